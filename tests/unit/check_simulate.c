/*
 * check_simulate.c - the simulator against known answers, a brute-force MIN,
 * and its own command line.
 *
 * Known answers: the classic page-reference string (lru 8 misses, MIN 6),
 * the hit ratios of per-epoch shuffling (freeze exactly the cache fraction,
 * MIN barely more, lru about c + (1-c)ln(1-c)), PADS on shuffles, and
 * importance beating freeze and lru on importance-sampled traces.  MIN is
 * checked against a few lines of quadratic code on random traces and must
 * never lose to a real policy.  The trace format and the command's errors
 * are table-driven: every error is one sentence on one line.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlcache/simulate.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const enum dlc_policy_kind real_kinds[] = {
	DLC_POLICY_FREEZE, DLC_POLICY_LRU, DLC_POLICY_IMPORTANCE,
};

static double later_hit_ratio(const struct dlc_simulate_result *result)
{
	return 1.0 - (double)result->later_misses / (double)result->later_accesses;
}

/* A trace over the ids given, one epoch, every score unknown. */
static void make_trace(struct dlc_trace *trace, const uint32_t *ids, size_t length,
		       uint32_t samples)
{
	memset(trace, 0, sizeof(*trace));
	trace->samples = samples;
	trace->length = length;
	trace->epoch_length = length;
	trace->ids = malloc(length * sizeof(*trace->ids));
	trace->scores = malloc(samples * sizeof(*trace->scores));
	ck_assert_ptr_nonnull(trace->ids);
	ck_assert_ptr_nonnull(trace->scores);
	memcpy(trace->ids, ids, length * sizeof(*ids));
	for (uint32_t i = 0; i < samples; i++)
		trace->scores[i] = NAN;
}

static struct dlc_simulate_result replay(const struct dlc_trace *trace, enum dlc_policy_kind kind,
					 uint32_t capacity, bool pads)
{
	struct dlc_simulate_result result;

	ck_assert_int_eq(dlc_simulate_replay(trace, kind, capacity, pads, &result), 0);
	ck_assert_uint_eq(result.accesses, trace->length);
	return result;
}

static struct dlc_simulate_result belady(const struct dlc_trace *trace, uint32_t capacity)
{
	struct dlc_simulate_result result;

	ck_assert_int_eq(dlc_simulate_belady(trace, capacity, &result), 0);
	ck_assert_uint_eq(result.accesses, trace->length);
	return result;
}

/* --- known answers ----------------------------------------------------- */

START_TEST(test_reference_string)
{
	/* 7 0 1 2 0 3 1 4 2 3 0 3 2 3 with 4 frames (see check_policy.c for lru
	 * by hand).  MIN: 4 cold misses, 3 evicts 7 (never used again), 4
	 * evicts or bypasses against 1 (neither is used again): 6. */
	static const uint32_t pages[] = { 7, 0, 1, 2, 0, 3, 1, 4, 2, 3, 0, 3, 2, 3 };
	static const struct {
		enum dlc_policy_kind kind;
		uint64_t misses;
	} cases[] = {
		{ DLC_POLICY_LRU, 8 },
		{ DLC_POLICY_FREEZE, 9 },
		{ DLC_POLICY_IMPORTANCE, 9 },   /* no scores: freeze */
		{ DLC_POLICY_NONE, 14 },
	};
	struct dlc_trace trace;

	make_trace(&trace, pages, ARRAY_SIZE(pages), 8);
	for (size_t c = 0; c < ARRAY_SIZE(cases); c++)
		ck_assert_uint_eq(replay(&trace, cases[c].kind, 4, false).misses, cases[c].misses);
	ck_assert_uint_eq(belady(&trace, 4).misses, 6);
	/* One epoch: nothing counts as later. */
	ck_assert_uint_eq(belady(&trace, 4).later_accesses, 0);
	/* Capacities at the edges. */
	ck_assert_uint_eq(belady(&trace, 0).misses, 14);
	ck_assert_uint_eq(belady(&trace, 8).misses, 6);        /* 6 distinct pages */
	ck_assert_uint_eq(belady(&trace, 100).misses, 6);
	ck_assert_uint_eq(replay(&trace, DLC_POLICY_LRU, 0, false).misses, 14);
	dlc_trace_free(&trace);
}
END_TEST

START_TEST(test_uniform_shuffles)
{
	/* N = 10000, 10 epochs, cache fraction 0.2 (DESIGN.md's claims). */
	enum { SAMPLES = 10000, EPOCHS = 10, CAPACITY = 2000 };
	const double c = 0.2;
	struct dlc_trace trace;
	struct dlc_simulate_result freeze, lru, importance, min;

	ck_assert_int_eq(dlc_simulate_shuffle(SAMPLES, EPOCHS, 42, &trace), 0);
	freeze = replay(&trace, DLC_POLICY_FREEZE, CAPACITY, false);
	lru = replay(&trace, DLC_POLICY_LRU, CAPACITY, false);
	importance = replay(&trace, DLC_POLICY_IMPORTANCE, CAPACITY, false);
	min = belady(&trace, CAPACITY);

	ck_assert_uint_eq(freeze.later_accesses, (uint64_t)SAMPLES * (EPOCHS - 1));
	/* freeze: exactly the cached 2000 hit in every later epoch. */
	ck_assert_uint_eq(freeze.later_accesses - freeze.later_misses,
			  (uint64_t)CAPACITY * (EPOCHS - 1));
	ck_assert_double_eq_tol(later_hit_ratio(&freeze), c, 1e-12);
	/* The first epoch is all cold misses for everyone. */
	ck_assert_uint_eq(freeze.misses - freeze.later_misses, SAMPLES);
	/* MIN: at least freeze, a little more at most (epoch boundaries). */
	ck_assert_uint_le(min.misses, freeze.misses);
	ck_assert_uint_ge(min.later_accesses - min.later_misses,
			  (uint64_t)CAPACITY * (EPOCHS - 1));
	ck_assert_double_le(later_hit_ratio(&min), c + 0.02);
	/* lru thrashes towards c + (1-c)ln(1-c) = 0.0215. */
	ck_assert_double_eq_tol(later_hit_ratio(&lru), c + (1 - c) * log(1 - c), 0.01);
	/* importance with random static scores keeps the top 2000 after epoch 1. */
	ck_assert_uint_eq(importance.later_accesses - importance.later_misses,
			  (uint64_t)CAPACITY * (EPOCHS - 1));
	dlc_trace_free(&trace);
}
END_TEST

START_TEST(test_pads_on_shuffles)
{
	/* Every cached sample is read before anything is evicted: any policy
	 * that keeps the cache full hits exactly its capacity per later epoch,
	 * lru included; freeze's hits do not depend on the order at all. */
	enum { SAMPLES = 5000, EPOCHS = 4, CAPACITY = 1000 };
	struct dlc_trace trace;

	ck_assert_int_eq(dlc_simulate_shuffle(SAMPLES, EPOCHS, 3, &trace), 0);
	for (size_t k = 0; k < ARRAY_SIZE(real_kinds); k++) {
		struct dlc_simulate_result pads = replay(&trace, real_kinds[k], CAPACITY, true);

		ck_assert_uint_eq(pads.later_accesses - pads.later_misses,
				  (uint64_t)CAPACITY * (EPOCHS - 1));
	}
	ck_assert_uint_eq(replay(&trace, DLC_POLICY_FREEZE, CAPACITY, true).misses,
			  replay(&trace, DLC_POLICY_FREEZE, CAPACITY, false).misses);
	ck_assert_uint_lt(replay(&trace, DLC_POLICY_LRU, CAPACITY, false).later_misses,
			  (uint64_t)SAMPLES * (EPOCHS - 1));
	ck_assert_uint_gt(replay(&trace, DLC_POLICY_LRU, CAPACITY, false).later_misses,
			  replay(&trace, DLC_POLICY_LRU, CAPACITY, true).later_misses);
	dlc_trace_free(&trace);
}
END_TEST

START_TEST(test_importance_sampling_favours_importance)
{
	static const struct {
		enum dlc_simulate_weights weights;
		double sigma;
	} cases[] = {
		{ DLC_SIMULATE_WEIGHTS_RANK, 0 },
		{ DLC_SIMULATE_WEIGHTS_LOGNORMAL, 1.0 },
		{ DLC_SIMULATE_WEIGHTS_LOGNORMAL, 0.5 },
	};
	enum { SAMPLES = 10000, EPOCHS = 5 };
	static const uint32_t capacities[] = { 1000, 2000, 5000 };

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		struct dlc_trace trace;

		ck_assert_int_eq(dlc_simulate_sample(SAMPLES, EPOCHS, cases[c].weights,
						     cases[c].sigma, 7, &trace), 0);
		for (size_t i = 0; i < ARRAY_SIZE(capacities); i++) {
			struct dlc_simulate_result freeze, lru, importance, min;

			freeze = replay(&trace, DLC_POLICY_FREEZE, capacities[i], false);
			lru = replay(&trace, DLC_POLICY_LRU, capacities[i], false);
			importance = replay(&trace, DLC_POLICY_IMPORTANCE, capacities[i], false);
			min = belady(&trace, capacities[i]);
			ck_assert_msg(importance.misses < freeze.misses &&
					      importance.misses < lru.misses &&
					      importance.later_misses < freeze.later_misses &&
					      importance.later_misses < lru.later_misses,
				      "case %zu, capacity %u: importance %ju, freeze %ju, lru %ju misses",
				      c, capacities[i], (uintmax_t)importance.misses,
				      (uintmax_t)freeze.misses, (uintmax_t)lru.misses);
			ck_assert_uint_le(min.misses, importance.misses);
		}
		dlc_trace_free(&trace);
	}
}
END_TEST

/* --- MIN against brute force ------------------------------------------- */

/* The next access to sample after position k, or length. */
static size_t next_access(const uint32_t *ids, size_t length, size_t k, uint32_t sample)
{
	for (size_t j = k + 1; j < length; j++) {
		if (ids[j] == sample)
			return j;
	}
	return length;
}

/* Belady with bypass, spelled out: scan the future for every candidate. */
static uint64_t brute_force_min(const uint32_t *ids, size_t length, uint32_t samples,
				uint32_t capacity)
{
	bool *cached = calloc(samples, sizeof(*cached));
	uint32_t count = 0;
	uint64_t misses = 0;

	ck_assert_ptr_nonnull(cached);
	for (size_t k = 0; k < length; k++) {
		uint32_t farthest = 0;
		size_t farthest_next = 0;

		if (cached[ids[k]])
			continue;
		misses++;
		if (count < capacity) {
			cached[ids[k]] = true;
			count++;
			continue;
		}
		for (uint32_t s = 0; s < samples; s++) {
			size_t next;

			if (!cached[s])
				continue;
			next = next_access(ids, length, k, s);
			if (next >= farthest_next) {
				farthest = s;
				farthest_next = next;
			}
		}
		if (count > 0 && farthest_next > next_access(ids, length, k, ids[k])) {
			cached[farthest] = false;
			cached[ids[k]] = true;
		}
	}
	free(cached);
	return misses;
}

START_TEST(test_min_matches_brute_force)
{
	enum { TRIALS = 40, LENGTH = 600 };
	uint64_t rng = 0x3141;

	for (unsigned trial = 0; trial < TRIALS; trial++) {
		uint32_t ids[LENGTH];
		uint32_t samples = 1 + trial % 25;
		uint32_t capacity = trial % 9;
		struct dlc_trace trace;

		for (size_t k = 0; k < LENGTH; k++) {
			rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
			/* Skewed: low ids recur more, so farthest-next-use matters. */
			ids[k] = (uint32_t)((rng >> 33) % samples);
			if ((rng >> 20) % 3 == 0)
				ids[k] /= 2;
		}
		make_trace(&trace, ids, LENGTH, samples);
		trace.epoch_length = 100;
		ck_assert_uint_eq(belady(&trace, capacity).misses,
				  brute_force_min(ids, LENGTH, samples, capacity));
		/* MIN is the optimum: no real policy does better. */
		for (size_t k = 0; k < ARRAY_SIZE(real_kinds); k++)
			ck_assert_uint_le(belady(&trace, capacity).misses,
					  replay(&trace, real_kinds[k], capacity, false).misses);
		dlc_trace_free(&trace);
	}
}
END_TEST

/* --- generators -------------------------------------------------------- */

START_TEST(test_generators_are_deterministic)
{
	enum { SAMPLES = 3000, EPOCHS = 3 };

	for (int kind = 0; kind < 3; kind++) {
		struct dlc_trace a, b, other;

		if (kind == 0) {
			ck_assert_int_eq(dlc_simulate_shuffle(SAMPLES, EPOCHS, 5, &a), 0);
			ck_assert_int_eq(dlc_simulate_shuffle(SAMPLES, EPOCHS, 5, &b), 0);
			ck_assert_int_eq(dlc_simulate_shuffle(SAMPLES, EPOCHS, 6, &other), 0);
		} else {
			enum dlc_simulate_weights weights = kind == 1 ? DLC_SIMULATE_WEIGHTS_RANK
								      : DLC_SIMULATE_WEIGHTS_LOGNORMAL;

			ck_assert_int_eq(dlc_simulate_sample(SAMPLES, EPOCHS, weights, 1, 5, &a), 0);
			ck_assert_int_eq(dlc_simulate_sample(SAMPLES, EPOCHS, weights, 1, 5, &b), 0);
			ck_assert_int_eq(dlc_simulate_sample(SAMPLES, EPOCHS, weights, 1, 6, &other),
					 0);
		}
		ck_assert_uint_eq(a.samples, SAMPLES);
		ck_assert_uint_eq(a.length, (size_t)SAMPLES * EPOCHS);
		ck_assert_uint_eq(a.epoch_length, SAMPLES);
		ck_assert_ptr_null(a.updates);
		ck_assert_int_eq(memcmp(a.ids, b.ids, a.length * sizeof(*a.ids)), 0);
		ck_assert_int_eq(memcmp(a.scores, b.scores, SAMPLES * sizeof(*a.scores)), 0);
		ck_assert_int_ne(memcmp(a.ids, other.ids, a.length * sizeof(*a.ids)), 0);
		for (size_t k = 0; k < a.length; k++) {
			if (a.ids[k] >= SAMPLES)
				ck_abort_msg("id %u out of range at %zu", a.ids[k], k);
		}
		for (uint32_t i = 0; i < SAMPLES; i++)
			ck_assert(isfinite(a.scores[i]));
		dlc_trace_free(&a);
		dlc_trace_free(&b);
		dlc_trace_free(&other);
		ck_assert_ptr_null(a.ids);
	}
}
END_TEST

START_TEST(test_shuffle_epochs_are_permutations)
{
	enum { SAMPLES = 1000, EPOCHS = 4 };
	struct dlc_trace trace;
	unsigned seen[SAMPLES];
	float previous = -1;

	ck_assert_int_eq(dlc_simulate_shuffle(SAMPLES, EPOCHS, 9, &trace), 0);
	for (int epoch = 0; epoch < EPOCHS; epoch++) {
		memset(seen, 0, sizeof(seen));
		for (size_t k = 0; k < SAMPLES; k++)
			seen[trace.ids[(size_t)epoch * SAMPLES + k]]++;
		for (uint32_t i = 0; i < SAMPLES; i++)
			ck_assert_uint_eq(seen[i], 1);
	}
	/* Epochs differ from each other. */
	ck_assert_int_ne(memcmp(trace.ids, trace.ids + SAMPLES, SAMPLES * sizeof(*trace.ids)), 0);
	/* Scores: uniform in [0, 1), not all alike. */
	for (uint32_t i = 0; i < SAMPLES; i++) {
		ck_assert(trace.scores[i] >= 0 && trace.scores[i] < 1);
		if (i > 0 && trace.scores[i] != previous)
			previous = -2;
		else if (i == 0)
			previous = trace.scores[0];
	}
	ck_assert(previous == -2);
	dlc_trace_free(&trace);

	/* The scores come from their own stream: they do not depend on epochs. */
	{
		struct dlc_trace one, many;

		ck_assert_int_eq(dlc_simulate_shuffle(SAMPLES, 1, 9, &one), 0);
		ck_assert_int_eq(dlc_simulate_shuffle(SAMPLES, 7, 9, &many), 0);
		ck_assert_int_eq(memcmp(one.scores, many.scores, SAMPLES * sizeof(float)), 0);
		ck_assert_int_eq(memcmp(one.ids, many.ids, SAMPLES * sizeof(uint32_t)), 0);
		dlc_trace_free(&one);
		dlc_trace_free(&many);
	}
}
END_TEST

START_TEST(test_sampling_follows_weights)
{
	enum { SAMPLES = 100, EPOCHS = 2000 };
	static const enum dlc_simulate_weights kinds[] = {
		DLC_SIMULATE_WEIGHTS_RANK, DLC_SIMULATE_WEIGHTS_LOGNORMAL,
	};

	for (size_t w = 0; w < ARRAY_SIZE(kinds); w++) {
		struct dlc_trace trace;
		unsigned drawn[SAMPLES] = { 0 };
		double total = 0;

		ck_assert_int_eq(dlc_simulate_sample(SAMPLES, EPOCHS, kinds[w], 1.5, 11, &trace), 0);
		for (size_t k = 0; k < trace.length; k++)
			drawn[trace.ids[k]]++;
		for (uint32_t i = 0; i < SAMPLES; i++) {
			ck_assert(trace.scores[i] > 0);
			total += trace.scores[i];
		}
		/* Each count within 5 standard deviations of its share. */
		for (uint32_t i = 0; i < SAMPLES; i++) {
			double expected = (double)trace.length * trace.scores[i] / total;

			ck_assert_msg(fabs(drawn[i] - expected) < 5 * sqrt(expected) + 1,
				      "weights %zu, sample %u: drawn %u, expected %.1f", w, i,
				      drawn[i], expected);
		}
		if (kinds[w] == DLC_SIMULATE_WEIGHTS_RANK) {
			/* Ranks 0..N-1 each once: weights ln(10) .. ln(N + 9). */
			float lowest = INFINITY, highest = -INFINITY;

			for (uint32_t i = 0; i < SAMPLES; i++) {
				lowest = fminf(lowest, trace.scores[i]);
				highest = fmaxf(highest, trace.scores[i]);
			}
			ck_assert_float_eq(lowest, (float)log(10.0));
			ck_assert_float_eq(highest, (float)log(SAMPLES + 9.0));
		}
		dlc_trace_free(&trace);
	}
}
END_TEST

START_TEST(test_generator_limits)
{
	struct dlc_trace trace;

	ck_assert_int_eq(dlc_simulate_shuffle(0, 1, 1, &trace), -EINVAL);
	ck_assert_ptr_null(trace.ids);
	ck_assert_int_eq(dlc_simulate_shuffle(1, 0, 1, &trace), -EINVAL);
	ck_assert_int_eq(dlc_simulate_shuffle(DLC_SIMULATE_MAX_SAMPLES + 1, 1, 1, &trace), -EINVAL);
	ck_assert_int_eq(dlc_simulate_shuffle(100000, 100000, 1, &trace), -EINVAL);
	ck_assert_int_eq(dlc_simulate_sample(10, 1, DLC_SIMULATE_WEIGHTS_LOGNORMAL, 0, 1, &trace),
			 -EINVAL);
	ck_assert_int_eq(dlc_simulate_sample(10, 1, DLC_SIMULATE_WEIGHTS_LOGNORMAL, NAN, 1, &trace),
			 -EINVAL);
	ck_assert_int_eq(dlc_simulate_sample(10, 1, (enum dlc_simulate_weights)7, 1, 1, &trace),
			 -EINVAL);
	ck_assert_int_eq(dlc_simulate_sample(0, 1, DLC_SIMULATE_WEIGHTS_RANK, 1, 1, &trace),
			 -EINVAL);

	/* One sample: every access is sample 0. */
	ck_assert_int_eq(dlc_simulate_sample(1, 3, DLC_SIMULATE_WEIGHTS_RANK, 0, 1, &trace), 0);
	ck_assert_uint_eq(trace.length, 3);
	for (size_t k = 0; k < trace.length; k++)
		ck_assert_uint_eq(trace.ids[k], 0);
	ck_assert_uint_eq(belady(&trace, 1).misses, 1);
	ck_assert_uint_eq(replay(&trace, DLC_POLICY_LRU, 1, true).misses, 1);
	ck_assert_uint_eq(replay(&trace, DLC_POLICY_IMPORTANCE, 0, false).misses, 3);
	dlc_trace_free(&trace);
	ck_assert_int_eq(dlc_simulate_shuffle(1, 2, 1, &trace), 0);
	ck_assert_uint_eq(replay(&trace, DLC_POLICY_FREEZE, 1, false).later_misses, 0);
	dlc_trace_free(&trace);

	/* A trace with an id out of range is refused, not replayed. */
	{
		static const uint32_t ids[] = { 0, 5 };
		struct dlc_simulate_result result;

		make_trace(&trace, ids, 2, 3);
		ck_assert_int_eq(dlc_simulate_replay(&trace, DLC_POLICY_LRU, 1, false, &result),
				 -EINVAL);
		ck_assert_int_eq(dlc_simulate_belady(&trace, 1, &result), -EINVAL);
		dlc_trace_free(&trace);
	}
	dlc_trace_free(NULL);
}
END_TEST

/* --- the trace file ---------------------------------------------------- */

START_TEST(test_parse_good_traces)
{
	static const struct {
		const char *text;
		uint32_t samples_given;
		uint32_t samples;
		size_t length;
		uint32_t ids[6];
		bool has_updates;
		float updates[6];       /* NaN: none */
	} cases[] = {
		{ "0\n1\n2\n", 0, 3, 3, { 0, 1, 2 }, false, { 0 } },
		{ "# a header\n\n  5  # five\n\t2\r\n", 0, 6, 2, { 5, 2 }, false, { 0 } },
		{ "7", 0, 8, 1, { 7 }, false, { 0 } },
		{ "3\n1 0.5\n3 -2e3\n1\n", 0, 4, 4, { 3, 1, 3, 1 }, true,
		  { NAN, 0.5f, -2000.0f, NAN } },
		{ "0\n1\n", 10, 10, 2, { 0, 1 }, false, { 0 } },
		{ "000\n0009 1#x\n", 0, 10, 2, { 0, 9 }, true, { NAN, 1.0f } },
	};

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		struct dlc_trace trace;
		char *cause = NULL;

		ck_assert_msg(dlc_simulate_parse("t", cases[c].text, strlen(cases[c].text),
						 cases[c].samples_given, &trace, &cause) == 0,
			      "case %zu: %s", c, cause ? cause : "?");
		ck_assert_ptr_null(cause);
		ck_assert_uint_eq(trace.samples, cases[c].samples);
		ck_assert_uint_eq(trace.epoch_length, cases[c].samples);
		ck_assert_uint_eq(trace.length, cases[c].length);
		for (size_t k = 0; k < trace.length; k++)
			ck_assert_uint_eq(trace.ids[k], cases[c].ids[k]);
		for (uint32_t i = 0; i < trace.samples; i++)
			ck_assert(isnan(trace.scores[i]));
		ck_assert(cases[c].has_updates == (trace.updates != NULL));
		for (size_t k = 0; cases[c].has_updates && k < trace.length; k++) {
			if (isnan(cases[c].updates[k]))
				ck_assert(isnan(trace.updates[k]));
			else
				ck_assert_float_eq(trace.updates[k], cases[c].updates[k]);
		}
		dlc_trace_free(&trace);
	}
}
END_TEST

/* A cause is one sentence: one line, ending in a full stop. */
static void assert_one_sentence(const char *cause)
{
	size_t len;

	ck_assert_ptr_nonnull(cause);
	len = strlen(cause);
	ck_assert_uint_gt(len, 20);
	ck_assert_ptr_null(strchr(cause, '\n'));
	ck_assert_int_eq(cause[len - 1], '.');
}

START_TEST(test_parse_bad_traces)
{
	static const struct {
		const char *text;
		uint32_t samples;
		const char *cause;      /* a part of the sentence */
	} cases[] = {
		{ "", 0, "t has no sample ids" },
		{ "# only a comment\n\n   \n", 0, "t has no sample ids" },
		{ "1\nx\n", 0, "t line 2: 'x' is not a sample id" },
		{ "-1\n", 0, "line 1: '-1' is not a sample id" },
		{ "+1\n", 0, "'+1' is not a sample id" },
		{ "1.5\n", 0, "'1.5' is not a sample id" },
		{ "0x10\n", 0, "'0x10' is not a sample id" },
		{ "1000000000\n", 0, "'1000000000' is not a sample id" },
		{ "99999999999999999999\n", 0, "is not a sample id" },
		{ "1 nan\n", 0, "line 1: score 'nan' is not a finite number" },
		{ "1 inf\n", 0, "score 'inf' is not a finite number" },
		{ "1 1e99\n", 0, "score '1e99' is not a finite number" },
		{ "1 0.5x\n", 0, "score '0.5x'" },
		{ "0\n\n1 2 3\n", 0, "line 3 has more than two fields" },
		{ "0\n3\n", 3, "line 2: sample id 3 is not below the 3 samples; raise --samples" },
	};

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		struct dlc_trace trace;
		char *cause = NULL;

		ck_assert_int_eq(dlc_simulate_parse("t", cases[c].text, strlen(cases[c].text),
						    cases[c].samples, &trace, &cause), -EINVAL);
		assert_one_sentence(cause);
		ck_assert_msg(strstr(cause, cases[c].cause) != NULL, "case %zu: '%s' lacks '%s'",
			      c, cause, cases[c].cause);
		ck_assert_ptr_null(trace.ids);
		free(cause);
	}
}
END_TEST

START_TEST(test_parse_reads_only_size_bytes)
{
	/* No NUL needed: the text stops at size. */
	static const char text[] = { '1', '\n', '2', '5' };
	struct dlc_trace trace;
	char *cause = NULL;

	ck_assert_int_eq(dlc_simulate_parse("t", text, 3, 0, &trace, &cause), 0);
	ck_assert_uint_eq(trace.length, 2);
	ck_assert_uint_eq(trace.ids[1], 2);
	dlc_trace_free(&trace);
}
END_TEST

/* Writes text to a fresh temporary file; returns its malloc'd path. */
static char *write_temp(const char *text)
{
	char *path = strdup("/tmp/check_simulate.XXXXXX");
	int fd;

	ck_assert_ptr_nonnull(path);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

START_TEST(test_scores_from_the_trace)
{
	static const struct {
		const char *text;
		uint32_t capacity;
		uint64_t importance, freeze, lru;       /* misses */
	} cases[] = {
		/*
		 * 0 in; 1 (5) evicts 0 (1); 1 hits; 0 refused; 1 hits; 1 drops to
		 * 0 and hits; 0 (1) now evicts it; 0 hits.  Without the scores
		 * importance is freeze: 5.
		 */
		{ "0 1\n1 5\n1\n0\n1\n1 0\n0\n0\n", 1, 4, 5, 5 },
		/*
		 * 2 (3) evicts 0 (1); 1 rises from 2 to 9 on a hit, a second
		 * read of 1, so a new pass starts.  3 (5) may only evict an entry
		 * read in this pass: 1, which outranks it, so 3 bypasses, and 2
		 * (not yet read in the pass) hits: 4.  Without the pass rule 3
		 * would have evicted 2 and 2 then missed: 5.
		 */
		{ "0 1\n1 2\n2 3\n1 9\n3 5\n2\n", 2, 4, 5, 5 },
	};

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		struct dlc_trace trace;
		char *cause = NULL;

		ck_assert_int_eq(dlc_simulate_parse("t", cases[c].text, strlen(cases[c].text), 0,
						    &trace, &cause), 0);
		ck_assert_ptr_nonnull(trace.updates);
		ck_assert_uint_eq(replay(&trace, DLC_POLICY_IMPORTANCE, cases[c].capacity,
					 false).misses, cases[c].importance);
		ck_assert_uint_eq(replay(&trace, DLC_POLICY_FREEZE, cases[c].capacity,
					 false).misses, cases[c].freeze);
		ck_assert_uint_eq(replay(&trace, DLC_POLICY_LRU, cases[c].capacity,
					 false).misses, cases[c].lru);
		/* The trace's scores are not the trace's to keep: a replay leaves them. */
		for (uint32_t i = 0; i < trace.samples; i++)
			ck_assert(isnan(trace.scores[i]));
		dlc_trace_free(&trace);
	}
}
END_TEST

START_TEST(test_pads_moves_scores_with_their_access)
{
	/*
	 * 3 samples, so epochs of 3 accesses; capacity 1.
	 *   epoch 1  0 (5), 1 (1), 2 (1): 0 in, 1 and 2 refused     3 misses
	 *   epoch 2  1 (9), 2, 0; PADS puts cached 0 first: 0 hits, then 1
	 *            with its 9 evicts 0; 2 refused                  2 misses
	 *   epoch 3  1, 1, 2; 1 cached, so both 1s hit               1 miss
	 * Had the 9 stayed at the first position (on 0), 1 would have been
	 * refused and epoch 3 would miss 3 times: 8.
	 */
	static const char text[] = "0 5\n1 1\n2 1\n1 9\n2\n0\n1\n1\n2\n";
	struct dlc_trace trace;
	struct dlc_simulate_result result;
	char *cause = NULL;

	ck_assert_int_eq(dlc_simulate_parse("t", text, strlen(text), 0, &trace, &cause), 0);
	ck_assert_uint_eq(trace.epoch_length, 3);
	result = replay(&trace, DLC_POLICY_IMPORTANCE, 1, true);
	ck_assert_uint_eq(result.misses, 6);
	ck_assert_uint_eq(result.later_misses, 3);
	/*
	 * In trace order: 1 (9) re-read starts pass 2, where cached 0 is not
	 * yet read, so 1 and 2 bypass and 0 hits; in epoch 3 1 is read twice
	 * (each a new pass, 0 unread in it) and misses twice, 2 misses: 8.
	 */
	ck_assert_uint_eq(replay(&trace, DLC_POLICY_IMPORTANCE, 1, false).misses, 8);
	dlc_trace_free(&trace);
}
END_TEST

START_TEST(test_load)
{
	char *path = write_temp("# a trace\n0\n1 0.5\n");
	struct dlc_trace trace;
	char *cause = NULL;

	ck_assert_int_eq(dlc_simulate_load(path, 5, &trace, &cause), 0);
	ck_assert_ptr_null(cause);
	ck_assert_uint_eq(trace.length, 2);
	ck_assert_uint_eq(trace.samples, 5);
	ck_assert_float_eq(trace.updates[1], 0.5f);
	dlc_trace_free(&trace);
	unlink(path);
	free(path);

	ck_assert_int_eq(dlc_simulate_load("/nonexistent/trace", 0, &trace, &cause), -ENOENT);
	assert_one_sentence(cause);
	ck_assert_ptr_nonnull(strstr(cause, "cannot open the trace /nonexistent/trace"));
	free(cause);
	cause = NULL;

	path = write_temp("1\n2\nbad\n");
	ck_assert_int_eq(dlc_simulate_load(path, 0, &trace, &cause), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cause, path));
	ck_assert_ptr_nonnull(strstr(cause, "line 3"));
	free(cause);
	unlink(path);
	free(path);
}
END_TEST

/* --- the command ------------------------------------------------------- */

struct captured {
	int status;
	char out[8192];
	char err[1024];
};

static void read_back(FILE *file, char *buffer, size_t size)
{
	size_t got;

	rewind(file);
	got = fread(buffer, 1, size - 1, file);
	buffer[got] = '\0';
	fclose(file);
}

/* Runs `dlcache simulate ARGS...` with stdout and stderr captured. */
static void run_command(struct captured *result, const char *const *args, size_t count)
{
	char *argv[32] = { (char *)"simulate" };
	FILE *out = tmpfile(), *err = tmpfile();
	int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);

	ck_assert_uint_lt(count, ARRAY_SIZE(argv) - 1);
	for (size_t i = 0; i < count; i++)
		argv[i + 1] = (char *)args[i];
	ck_assert_ptr_nonnull(out);
	ck_assert_ptr_nonnull(err);
	fflush(stdout);
	fflush(stderr);
	dup2(fileno(out), STDOUT_FILENO);
	dup2(fileno(err), STDERR_FILENO);
	result->status = dlc_simulate_main((int)count + 1, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(saved_out, STDOUT_FILENO);
	dup2(saved_err, STDERR_FILENO);
	close(saved_out);
	close(saved_err);
	read_back(out, result->out, sizeof(result->out));
	read_back(err, result->err, sizeof(result->err));
}

static unsigned count_lines(const char *text, bool comments)
{
	unsigned lines = 0;

	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n');

		if ((line[0] == '#') == comments)
			lines++;
		if (!end)
			break;
		line = end + 1;
	}
	return lines;
}

START_TEST(test_command_prints_a_table)
{
	static const char *const args[] = {
		"--samples", "2000", "--epochs", "3", "--seed", "4",
	};
	static const char *const two[] = {
		"--trace", "importance", "--weights", "lognormal", "--sigma", "1.5",
		"--samples", "500", "--fractions", "0.25,1", "--pads",
	};
	struct captured first, again;

	run_command(&first, args, ARRAY_SIZE(args));
	ck_assert_int_eq(first.status, 0);
	ck_assert_str_eq(first.err, "");
	ck_assert_uint_eq(count_lines(first.out, false), 3);
	ck_assert_ptr_nonnull(strstr(first.out, "# fraction"));
	ck_assert_ptr_nonnull(strstr(first.out, "freeze"));
	ck_assert_ptr_nonnull(strstr(first.out, "importance"));
	ck_assert_ptr_nonnull(strstr(first.out, "2000 samples; 6000 accesses in 3 epochs of 2000"));
	/* freeze after the first epoch of a shuffle: exactly the fraction. */
	ck_assert_ptr_nonnull(strstr(first.out, "      0.2      400 "));
	ck_assert_ptr_nonnull(strstr(first.out, "  0.2000 "));
	/* The same seed, the same table, threads or not. */
	run_command(&again, args, ARRAY_SIZE(args));
	ck_assert_str_eq(first.out, again.out);

	run_command(&first, two, ARRAY_SIZE(two));
	ck_assert_int_eq(first.status, 0);
	ck_assert_str_eq(first.err, "");
	ck_assert_uint_eq(count_lines(first.out, false), 2);
	ck_assert_ptr_nonnull(strstr(first.out, "lognormal sigma 1.5"));
	ck_assert_ptr_nonnull(strstr(first.out, "# pads:"));
	/* A cache as large as the dataset misses only the first time. */
	ck_assert_ptr_nonnull(strstr(first.out, "        1      500 "));

	run_command(&first, (const char *const[]){ "--help" }, 1);
	ck_assert_int_eq(first.status, 0);
	ck_assert_ptr_nonnull(strstr(first.out, "usage: dlcache simulate"));
	ck_assert_ptr_nonnull(strstr(first.out, "--fractions"));

	run_command(&first, (const char *const[]){ "--samples", "1", "--epochs", "2" }, 4);
	ck_assert_int_eq(first.status, 0);
	ck_assert_uint_eq(count_lines(first.out, false), 3);
}
END_TEST

START_TEST(test_command_reads_a_trace_file)
{
	char *path = write_temp("# ids\n0\n1\n2\n0\n1\n2\n");
	const char *args[] = { "--trace", path, "--fractions", "0.34" };
	const char *with_samples[] = { "--trace", path, "--samples", "6", "--fractions", "0.5" };
	struct captured result;

	run_command(&result, args, ARRAY_SIZE(args));
	ck_assert_int_eq(result.status, 0);
	ck_assert_str_eq(result.err, "");
	ck_assert_ptr_nonnull(strstr(result.out, "3 samples; 6 accesses in 2 epochs of 3"));
	ck_assert_ptr_nonnull(strstr(result.out, "none in the trace"));
	run_command(&result, with_samples, ARRAY_SIZE(with_samples));
	ck_assert_int_eq(result.status, 0);
	ck_assert_ptr_nonnull(strstr(result.out, "6 samples; 6 accesses in 1 epoch of 6"));
	unlink(path);
	free(path);
}
END_TEST

START_TEST(test_command_errors)
{
	static const struct {
		const char *args[6];
		size_t count;
		const char *says;
	} cases[] = {
		{ { "--samples", "0" }, 2, "--samples '0'" },
		{ { "--samples", "12x" }, 2, "--samples '12x'" },
		{ { "--samples", "-5" }, 2, "--samples '-5'" },
		{ { "--epochs", "x" }, 2, "--epochs 'x'" },
		{ { "--epochs", "0" }, 2, "--epochs '0'" },
		{ { "--weights", "rank" }, 2, "--weights applies to --trace importance" },
		{ { "--sigma", "2" }, 2, "--sigma applies to" },
		{ { "--trace", "importance", "--sigma", "2" }, 4, "--sigma applies to" },
		{ { "--trace", "importance", "--weights", "zipf" }, 4, "--weights 'zipf'" },
		{ { "--trace", "importance", "--weights", "lognormal", "--sigma", "0" }, 6,
		  "--sigma '0'" },
		{ { "--trace", "/nonexistent/trace" }, 2, "cannot open the trace /nonexistent/trace" },
		{ { "--trace", "" }, 2, "--trace is empty" },
		{ { "--fractions", "0.1,2" }, 2, "--fractions '0.1,2'" },
		{ { "--fractions", "0.1," }, 2, "--fractions '0.1,'" },
		{ { "--fractions", "0" }, 2, "--fractions '0'" },
		{ { "--seed", "x" }, 2, "--seed 'x'" },
		{ { "--bogus" }, 1, "unknown option '--bogus'" },
		{ { "-x" }, 1, "unknown option '-x'" },
		{ { "--pads=1" }, 1, "--pads=1 takes no value" },
		{ { "--samples" }, 1, "--samples needs a value" },
		{ { "extra" }, 1, "unexpected argument 'extra'" },
		{ { "--samples", "1000000", "--epochs", "100000" }, 4, "use fewer samples or epochs" },
		{ { "--world", "4" }, 2, "--batch and --world apply to --trace churn" },
		{ { "--trace", "importance", "--batch", "8" }, 4, "--batch and --world apply to" },
		{ { "--trace", "churn", "--world", "0" }, 4, "--world '0'" },
		{ { "--trace", "churn", "--batch", "0" }, 4, "--batch '0'" },
		{ { "--trace", "churn", "--samples", "3", "--world", "4" }, 6,
		  "--world 4 is more than the 3 samples" },
		{ { "--announce", "later" }, 2, "--announce 'later'" },
		{ { "--pads", "--announce", "epoch" }, 3, "--pads reorders each epoch" },
	};

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		struct captured result;

		run_command(&result, cases[c].args, cases[c].count);
		ck_assert_msg(result.status == 1, "case %zu: status %d", c, result.status);
		ck_assert_str_eq(result.out, "");
		ck_assert_msg(strncmp(result.err, "dlcache simulate: ", 18) == 0 &&
				      strstr(result.err, cases[c].says) != NULL,
			      "case %zu: '%s' lacks '%s'", c, result.err, cases[c].says);
		/* One line, one sentence. */
		ck_assert_ptr_eq(strchr(result.err, '\n'), result.err + strlen(result.err) - 1);
		ck_assert_int_eq(result.err[strlen(result.err) - 2], '.');
	}
	{
		char *path = write_temp("0\n");
		const char *args[] = { "--trace", path, "--epochs", "3" };
		struct captured result;

		run_command(&result, args, ARRAY_SIZE(args));
		ck_assert_int_eq(result.status, 1);
		ck_assert_ptr_nonnull(strstr(result.err, "--epochs applies to generated traces"));
		unlink(path);
		free(path);
	}
}
END_TEST

static Suite *simulate_suite(void)
{
	Suite *s = suite_create("simulate");
	TCase *tc;

	tc = tcase_create("known answers");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_reference_string);
	tcase_add_test(tc, test_uniform_shuffles);
	tcase_add_test(tc, test_pads_on_shuffles);
	tcase_add_test(tc, test_importance_sampling_favours_importance);
	suite_add_tcase(s, tc);

	tc = tcase_create("min");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_min_matches_brute_force);
	suite_add_tcase(s, tc);

	tc = tcase_create("generators");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_generators_are_deterministic);
	tcase_add_test(tc, test_shuffle_epochs_are_permutations);
	tcase_add_test(tc, test_sampling_follows_weights);
	tcase_add_test(tc, test_generator_limits);
	suite_add_tcase(s, tc);

	tc = tcase_create("trace file");
	tcase_add_test(tc, test_parse_good_traces);
	tcase_add_test(tc, test_parse_bad_traces);
	tcase_add_test(tc, test_parse_reads_only_size_bytes);
	tcase_add_test(tc, test_scores_from_the_trace);
	tcase_add_test(tc, test_pads_moves_scores_with_their_access);
	tcase_add_test(tc, test_load);
	suite_add_tcase(s, tc);

	tc = tcase_create("command");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_command_prints_a_table);
	tcase_add_test(tc, test_command_reads_a_trace_file);
	tcase_add_test(tc, test_command_errors);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(simulate_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
