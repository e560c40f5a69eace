/*
 * check_trace.c - the churning training job of the simulator (trace.c's
 * dlc_simulate_churn) and what the policies do on it.
 *
 * The generator: scores move (every read sample gets a new rank, written
 * after its batch, losses fall with visits), DistributedSampler partitions
 * (node 0's share, global ranks), the same trace for the same seed.  The
 * policies: under a plain shuffle whose scores churn, importance never hits
 * less than freeze in any epoch, announced or not (at each epoch, or one
 * epoch ahead); the command prints the churning job's table.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlcache/simulate.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static void make_churn(uint32_t samples, uint32_t epochs, uint32_t batch, uint32_t world,
		       bool sampled, uint64_t seed, struct dlc_trace *trace)
{
	struct dlc_simulate_churn job = {
		.samples = samples, .epochs = epochs, .batch = batch, .world = world,
		.sampled = sampled, .seed = seed,
	};

	ck_assert_int_eq(dlc_simulate_churn(&job, trace), 0);
}

START_TEST(test_churn_scores_move_every_batch)
{
	enum { SAMPLES = 1000, EPOCHS = 4, BATCH = 50 };
	struct dlc_trace trace;
	float first[SAMPLES];
	unsigned changed = 0, later_lower = 0, seen = 0;

	make_churn(SAMPLES, EPOCHS, BATCH, 1, false, 3, &trace);
	ck_assert_uint_eq(trace.length, SAMPLES * EPOCHS);
	ck_assert_uint_eq(trace.epoch_length, SAMPLES);
	ck_assert_ptr_null(trace.updates);
	/* Scores start unknown; every read gets a rank after its batch, the
	 * last batch's after the trace's end excepted. */
	for (uint32_t i = 0; i < SAMPLES; i++)
		ck_assert(isnan(trace.scores[i]));
	ck_assert_uint_eq(trace.rescore_count, SAMPLES * EPOCHS - BATCH);
	for (uint32_t i = 0; i < SAMPLES; i++)
		first[i] = NAN;
	for (size_t r = 0; r < trace.rescore_count; r++) {
		const struct dlc_trace_rescore *rescore = &trace.rescores[r];

		/* In effect from the read after the batch that read it. */
		ck_assert_uint_eq(rescore->before % BATCH, 0);
		ck_assert_uint_gt(rescore->before, 0);
		ck_assert(r == 0 || rescore->before >= trace.rescores[r - 1].before);
		ck_assert(rescore->score >= 0 && rescore->score <= 1);
		ck_assert_uint_eq(trace.ids[r], rescore->sample);
		if (isnan(first[rescore->sample])) {
			first[rescore->sample] = rescore->score;
			seen++;
		} else if (rescore->before > 3 * SAMPLES) {
			changed += first[rescore->sample] != rescore->score;
			later_lower += rescore->score < first[rescore->sample];
		}
	}
	ck_assert_uint_eq(seen, SAMPLES);
	/* Ranks churn: nearly every sample's rank moved by the fourth epoch. */
	ck_assert_uint_gt(changed, SAMPLES * 9 / 10 - BATCH);
	ck_assert_uint_gt(later_lower, 0);
	dlc_trace_free(&trace);
}
END_TEST

START_TEST(test_churn_partitions_like_distributed_sampler)
{
	enum { SAMPLES = 1001, WORLD = 4, EPOCHS = 3, BATCH = 16 };
	uint32_t per_node = (SAMPLES + WORLD - 1) / WORLD;
	struct dlc_trace trace;
	size_t r = 0;

	make_churn(SAMPLES, EPOCHS, BATCH, WORLD, false, 9, &trace);
	ck_assert_uint_eq(trace.epoch_length, per_node);
	ck_assert_uint_eq(trace.length, (size_t)per_node * EPOCHS);
	for (uint32_t epoch = 0; epoch < EPOCHS; epoch++) {
		uint32_t ranked[SAMPLES] = { 0 };
		size_t from = (size_t)epoch * per_node, to = from + per_node;
		unsigned twice = 0;

		/* The global batches of this epoch: every sample ranked once, the
		 * padding (per_node * WORLD - SAMPLES) twice; node 0's reads are
		 * among them, one per WORLD global reads. */
		for (; r < trace.rescore_count && trace.rescores[r].before <= to; r++)
			ranked[trace.rescores[r].sample]++;
		if (epoch + 1 == EPOCHS)
			break;
		for (uint32_t i = 0; i < SAMPLES; i++) {
			ck_assert_uint_ge(ranked[i], 1);
			ck_assert_uint_le(ranked[i], 2);
			twice += ranked[i] == 2;
		}
		ck_assert_uint_eq(twice, per_node * WORLD - SAMPLES);
		for (size_t k = from; k < to; k++)
			ck_assert_uint_ge(ranked[trace.ids[k]], 1);
	}
	dlc_trace_free(&trace);
}
END_TEST

START_TEST(test_churn_is_deterministic)
{
	struct dlc_trace a, b, c;
	struct dlc_simulate_churn bad = { .samples = 10, .epochs = 1, .batch = 0, .world = 1 };

	make_churn(500, 3, 32, 2, _i == 1, 5, &a);
	make_churn(500, 3, 32, 2, _i == 1, 5, &b);
	make_churn(500, 3, 32, 2, _i == 1, 6, &c);
	ck_assert_uint_eq(a.length, b.length);
	ck_assert_mem_eq(a.ids, b.ids, a.length * sizeof(*a.ids));
	ck_assert_uint_eq(a.rescore_count, b.rescore_count);
	ck_assert_mem_eq(a.rescores, b.rescores, a.rescore_count * sizeof(*a.rescores));
	ck_assert(memcmp(a.ids, c.ids, a.length * sizeof(*a.ids)) != 0);
	dlc_trace_free(&a);
	dlc_trace_free(&b);
	dlc_trace_free(&c);

	ck_assert_int_eq(dlc_simulate_churn(&bad, &a), -EINVAL);
	bad.batch = 1;
	bad.world = 11;
	ck_assert_int_eq(dlc_simulate_churn(&bad, &a), -EINVAL);
	bad.world = 0;
	ck_assert_int_eq(dlc_simulate_churn(&bad, &a), -EINVAL);
	bad.world = 1;
	bad.samples = 0;
	ck_assert_int_eq(dlc_simulate_churn(&bad, &a), -EINVAL);
}
END_TEST

START_TEST(test_churn_draws_follow_the_losses)
{
	enum { SAMPLES = 2000, EPOCHS = 4 };
	struct dlc_trace trace;
	unsigned counts[SAMPLES] = { 0 }, most = 0, repeated = 0;

	make_churn(SAMPLES, EPOCHS, 64, 1, true, 2, &trace);
	for (size_t k = SAMPLES; k < trace.length; k++)
		counts[trace.ids[k]]++;
	for (uint32_t i = 0; i < SAMPLES; i++) {
		most = counts[i] > most ? counts[i] : most;
		repeated += counts[i] > EPOCHS - 1;
	}
	/* With replacement and skewed by loss: some samples come many times. */
	ck_assert_uint_ge(most, 3 * (EPOCHS - 1));
	ck_assert_uint_gt(repeated, SAMPLES / 20);
	dlc_trace_free(&trace);
}
END_TEST

/* Hits of replays of trace's first epochs 1..epochs, one per epoch. */
static void hits_per_epoch(const struct dlc_trace *trace, enum dlc_policy_kind kind,
			   uint32_t capacity, enum dlc_simulate_announce announce,
			   uint64_t *hits, size_t epochs)
{
	uint64_t before = 0;

	for (size_t e = 1; e <= epochs; e++) {
		struct dlc_trace prefix = *trace;
		struct dlc_simulate_result result;

		prefix.length = e * trace->epoch_length;
		ck_assert_int_eq(dlc_simulate_replay_announced(&prefix, kind, capacity, announce,
							       &result), 0);
		hits[e - 1] = result.accesses - result.misses - before;
		before = result.accesses - result.misses;
	}
}

START_TEST(test_importance_never_below_freeze_with_churning_scores)
{
	enum { SAMPLES = 3000, EPOCHS = 6 };
	static const double fractions[] = { 0.1, 0.2, 0.5 };
	static const uint32_t batches[] = { 32, 256 };
	static const enum dlc_simulate_announce horizons[] = {
		DLC_SIMULATE_ANNOUNCE_NONE, DLC_SIMULATE_ANNOUNCE_EPOCH, DLC_SIMULATE_ANNOUNCE_AHEAD,
	};
	struct dlc_trace trace;

	/* A plain shuffle whose every read rewrites ranks, in batches. */
	make_churn(SAMPLES, EPOCHS, batches[_i], 1, false, 11 + (uint64_t)_i, &trace);
	for (size_t f = 0; f < ARRAY_SIZE(fractions); f++) {
		uint32_t capacity = (uint32_t)(fractions[f] * SAMPLES);
		uint64_t freeze[EPOCHS];

		hits_per_epoch(&trace, DLC_POLICY_FREEZE, capacity, DLC_SIMULATE_ANNOUNCE_NONE,
			       freeze, EPOCHS);
		for (size_t h = 0; h < ARRAY_SIZE(horizons); h++) {
			uint64_t importance[EPOCHS];

			hits_per_epoch(&trace, DLC_POLICY_IMPORTANCE, capacity, horizons[h],
				       importance, EPOCHS);
			for (size_t e = 1; e < EPOCHS; e++)
				ck_assert_msg(importance[e] >= freeze[e],
					      "cache %u, horizon %zu, epoch %zu: importance %ju < freeze %ju",
					      capacity, h, e + 1, (uintmax_t)importance[e],
					      (uintmax_t)freeze[e]);
		}
		/* Every cached sample is read once per epoch: freeze hits its capacity. */
		ck_assert_uint_eq(freeze[EPOCHS - 1], capacity);
	}
	dlc_trace_free(&trace);
}
END_TEST

/* Runs `dlcache simulate ARGS...` with stdout captured; its exit status. */
static int run_command(const char *const *args, size_t count, char *out, size_t size)
{
	char *argv[32] = { (char *)"simulate" };
	FILE *file = tmpfile();
	int saved = dup(STDOUT_FILENO), status;
	size_t got;

	ck_assert_uint_lt(count, ARRAY_SIZE(argv) - 1);
	ck_assert_ptr_nonnull(file);
	for (size_t i = 0; i < count; i++)
		argv[i + 1] = (char *)args[i];
	fflush(stdout);
	dup2(fileno(file), STDOUT_FILENO);
	status = dlc_simulate_main((int)count + 1, argv);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	rewind(file);
	got = fread(out, 1, size - 1, file);
	out[got] = '\0';
	fclose(file);
	return status;
}

START_TEST(test_command_churn_with_partitions_and_announcements)
{
	static const char *const args[] = {
		"--trace", "churn-sampled", "--samples", "2000", "--epochs", "3", "--world", "2",
		"--batch", "32", "--announce", "all", "--fractions", "0.1,0.5",
	};
	char out[8192];
	const char *ratios;

	ck_assert_int_eq(run_command(args, ARRAY_SIZE(args), out, sizeof(out)), 0);
	ck_assert_ptr_nonnull(strstr(out, "draws with replacement by loss"));
	ck_assert_ptr_nonnull(strstr(out, "every 32 reads per node"));
	ck_assert_ptr_nonnull(strstr(out, "DistributedSampler over 2 nodes"));
	ck_assert_ptr_nonnull(strstr(out, "2000 samples; 3000 accesses in 3 epochs of 1000"));
	ck_assert_ptr_nonnull(strstr(out, "# announced: the whole trace"));
	/* Announced whole, importance is MIN: its fetches are MIN's. */
	ratios = strstr(out, "against MIN's:");
	ck_assert_ptr_nonnull(ratios);
	ck_assert_ptr_nonnull(strstr(ratios, "importance 1.000 1.000\n"));
}
END_TEST

static Suite *trace_suite(void)
{
	Suite *s = suite_create("trace");
	TCase *tc;

	tc = tcase_create("churn");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_churn_scores_move_every_batch);
	tcase_add_test(tc, test_churn_partitions_like_distributed_sampler);
	tcase_add_loop_test(tc, test_churn_is_deterministic, 0, 2);
	tcase_add_test(tc, test_churn_draws_follow_the_losses);
	suite_add_tcase(s, tc);

	tc = tcase_create("policies");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_importance_never_below_freeze_with_churning_scores, 0, 2);
	tcase_add_test(tc, test_command_churn_with_partitions_and_announcements);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(trace_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
