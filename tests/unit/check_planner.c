/*
 * check_planner.c - the announced-order planner (planner.c) and the
 * importance policy planning with it (policy.c).
 *
 * The planner is checked against known answers (next uses, consumption out
 * of order, lines left behind, a restart, the ring growing and the 32-bit
 * positions wrapping) and against a model of a few lines of array code.
 * The policy is checked decision by decision (the furthest next use goes,
 * a miss used last bypasses, beyond the horizon the scores decide), under
 * random operations with its invariants verified after each, and as a
 * whole: replayed with the whole trace announced, it misses exactly as
 * often as Belady's MIN on every generated trace.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/planner.h"
#include "dlcache/policy.h"
#include "dlcache/simulate.h"
#include "unit_random.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))


/* What the planner told: each moved inode, and the next use it had before. */
struct moves {
	uint32_t ino[64];
	uint64_t before[64];
	size_t count;
};

static void record_move(void *arg, uint32_t ino, uint64_t before)
{
	struct moves *moves = arg;

	if (moves->count < ARRAY_SIZE(moves->ino)) {
		moves->ino[moves->count] = ino;
		moves->before[moves->count] = before;
	}
	moves->count++;
}

static struct dlc_planner *make_planner(uint32_t max_ino, struct moves *moves)
{
	struct dlc_planner *planner = dlc_planner_create(max_ino, moves ? record_move : NULL, moves);

	ck_assert_ptr_nonnull(planner);
	return planner;
}

static void announce_all(struct dlc_planner *planner, const uint32_t *inos, size_t count)
{
	for (size_t i = 0; i < count; i++)
		ck_assert_int_eq(dlc_planner_announce(planner, inos[i]), 0);
	ck_assert_int_eq(dlc_planner_verify(planner), 0);
}

/* --- the planner --------------------------------------------------------- */

START_TEST(test_planner_next_uses)
{
	/* Lines 1..6: 3 1 3 2 1 3. */
	static const uint32_t order[] = { 3, 1, 3, 2, 1, 3 };
	struct moves moves = { 0 };
	struct dlc_planner *planner = make_planner(4, &moves);

	ck_assert_uint_eq(dlc_planner_next_use(planner, 3), DLC_PLANNER_NEVER);
	announce_all(planner, order, ARRAY_SIZE(order));
	/* An inode's first line moves it; later lines of it do not. */
	ck_assert_uint_eq(moves.count, 3);
	ck_assert_uint_eq(moves.ino[0], 3);
	ck_assert_uint_eq(moves.before[0], DLC_PLANNER_NEVER);
	ck_assert_uint_eq(dlc_planner_lines(planner), 6);
	ck_assert_uint_eq(dlc_planner_next_use(planner, 3), 1);
	ck_assert_uint_eq(dlc_planner_next_use(planner, 1), 2);
	ck_assert_uint_eq(dlc_planner_next_use(planner, 2), 4);
	ck_assert_uint_eq(dlc_planner_next_use(planner, 4), DLC_PLANNER_NEVER);

	/* Reading 3 consumes line 1: its next use is line 3, then 6, then none. */
	moves.count = 0;
	ck_assert_int_eq(dlc_planner_consume(planner, 3), 1);
	ck_assert_uint_eq(moves.count, 1);
	ck_assert_uint_eq(moves.ino[0], 3);
	ck_assert_uint_eq(moves.before[0], 1);
	ck_assert_uint_eq(dlc_planner_next_use(planner, 3), 3);
	ck_assert_int_eq(dlc_planner_consume(planner, 3), 1);
	ck_assert_uint_eq(dlc_planner_next_use(planner, 3), 6);
	ck_assert_int_eq(dlc_planner_consume(planner, 3), 1);
	ck_assert_uint_eq(dlc_planner_next_use(planner, 3), DLC_PLANNER_NEVER);
	/* Nothing left for 3, and 4 never was announced. */
	ck_assert_int_eq(dlc_planner_consume(planner, 3), 0);
	ck_assert_int_eq(dlc_planner_consume(planner, 4), 0);
	ck_assert_int_eq(dlc_planner_consume(planner, 0), 0);
	ck_assert_int_eq(dlc_planner_consume(planner, 5), 0);
	ck_assert_uint_eq(dlc_planner_lines(planner), 3);
	ck_assert_int_eq(dlc_planner_verify(planner), 0);
	ck_assert_int_eq(dlc_planner_announce(planner, 0), -EINVAL);
	ck_assert_int_eq(dlc_planner_announce(planner, 5), -EINVAL);
	dlc_planner_free(planner);
}
END_TEST

START_TEST(test_planner_reads_out_of_order)
{
	/* Two workers read lines 1..4 (inodes 1..4) as 2 1 4 3. */
	static const uint32_t order[] = { 1, 2, 3, 4, 1 };
	struct dlc_planner *planner = make_planner(4, NULL);

	announce_all(planner, order, ARRAY_SIZE(order));
	ck_assert_int_eq(dlc_planner_consume(planner, 2), 1);
	/* Line 1 is behind the frontier but within the slack: still unread. */
	ck_assert_uint_eq(dlc_planner_next_use(planner, 1), 1);
	ck_assert_int_eq(dlc_planner_consume(planner, 1), 1);
	ck_assert_uint_eq(dlc_planner_next_use(planner, 1), 5);
	ck_assert_int_eq(dlc_planner_consume(planner, 4), 1);
	ck_assert_int_eq(dlc_planner_consume(planner, 3), 1);
	ck_assert_uint_eq(dlc_planner_lines(planner), 1);
	ck_assert_int_eq(dlc_planner_verify(planner), 0);
	dlc_planner_free(planner);
}
END_TEST

START_TEST(test_planner_drops_lines_left_behind)
{
	uint32_t count = DLC_PLANNER_SLACK + 10;
	struct moves moves = { 0 };
	struct dlc_planner *planner = make_planner(count, &moves);

	/* Lines 1..count for inodes 1..count; the reader skips inode 1 and 2. */
	for (uint32_t ino = 1; ino <= count; ino++)
		ck_assert_int_eq(dlc_planner_announce(planner, ino), 0);
	for (uint32_t ino = 3; ino <= DLC_PLANNER_SLACK + 2; ino++)
		ck_assert_int_eq(dlc_planner_consume(planner, ino), 1);
	/* Frontier SLACK + 2: line 1 is SLACK + 1 behind, line 2 exactly SLACK. */
	ck_assert_uint_eq(dlc_planner_next_use(planner, 1), DLC_PLANNER_NEVER);
	ck_assert_uint_eq(dlc_planner_next_use(planner, 2), 2);
	moves.count = 0;
	ck_assert_int_eq(dlc_planner_consume(planner, DLC_PLANNER_SLACK + 3), 1);
	ck_assert_uint_eq(dlc_planner_next_use(planner, 2), DLC_PLANNER_NEVER);
	/* The dropped line told its inode's move, then the consumed one. */
	ck_assert_uint_eq(moves.count, 2);
	ck_assert_uint_eq(moves.ino[0], DLC_PLANNER_SLACK + 3);
	ck_assert_uint_eq(moves.ino[1], 2);
	ck_assert_uint_eq(moves.before[1], 2);
	ck_assert_uint_eq(dlc_planner_lines(planner), count - DLC_PLANNER_SLACK - 3);
	ck_assert_int_eq(dlc_planner_verify(planner), 0);
	dlc_planner_free(planner);
}
END_TEST

START_TEST(test_planner_restart_leaves_old_order_behind)
{
	uint32_t epoch = 3 * DLC_PLANNER_SLACK;
	struct dlc_planner *planner = make_planner(epoch, NULL);

	/* An epoch announced (inode i at line i), a tenth of it read, then the
	 * job starts over and announces the inodes backwards. */
	for (uint32_t ino = 1; ino <= epoch; ino++)
		ck_assert_int_eq(dlc_planner_announce(planner, ino), 0);
	for (uint32_t ino = 1; ino <= epoch / 10; ino++)
		ck_assert_int_eq(dlc_planner_consume(planner, ino), 1);
	for (uint32_t ino = epoch; ino >= 1; ino--)
		ck_assert_int_eq(dlc_planner_announce(planner, ino), 0);
	/* Reading backwards takes the old lines (the earliest) while they last:
	 * the first read drops those more than the slack behind it. */
	for (uint32_t ino = epoch; ino > epoch - DLC_PLANNER_SLACK - 1; ino--)
		ck_assert_int_eq(dlc_planner_consume(planner, ino), 1);
	ck_assert_uint_eq(dlc_planner_next_use(planner, epoch - DLC_PLANNER_SLACK - 1),
			  2 * epoch + 1 - (epoch - DLC_PLANNER_SLACK - 1));
	ck_assert_int_eq(dlc_planner_verify(planner), 0);
	/* The next read is in the new order: every old line is left behind. */
	for (uint32_t ino = epoch - DLC_PLANNER_SLACK - 1; ino >= 1; ino--)
		ck_assert_int_eq(dlc_planner_consume(planner, ino), 1);
	ck_assert_uint_eq(dlc_planner_lines(planner), 0);
	for (uint32_t ino = 1; ino <= epoch; ino += 97)
		ck_assert_uint_eq(dlc_planner_next_use(planner, ino), DLC_PLANNER_NEVER);
	ck_assert_int_eq(dlc_planner_verify(planner), 0);
	dlc_planner_free(planner);
}
END_TEST

START_TEST(test_planner_positions_wrap_32_bits)
{
	struct dlc_planner *planner = make_planner(8, NULL);
	uint64_t start = (1ULL << 32) - 5;
	uint64_t last = 0;

	/* Positions around 2^32: the one whose low 32 bits are 0 is burnt. */
	dlc_planner_set_next_seq(planner, start);
	for (uint32_t i = 0; i < 12; i++)
		ck_assert_int_eq(dlc_planner_announce(planner, i % 8 + 1), 0);
	ck_assert_int_eq(dlc_planner_verify(planner), 0);
	ck_assert_uint_eq(dlc_planner_next_use(planner, 1), start);
	ck_assert_uint_eq(dlc_planner_next_use(planner, 6), start + 6);
	for (uint32_t i = 0; i < 12; i++) {
		uint32_t ino = i % 8 + 1;
		uint64_t use = dlc_planner_next_use(planner, ino);

		ck_assert_uint_gt(use, last);
		ck_assert_uint_ne((uint32_t)use, 0);
		last = use;
		ck_assert_int_eq(dlc_planner_consume(planner, ino), 1);
		if (i == 0)   /* 1's next line, past the burnt position */
			ck_assert_uint_eq(dlc_planner_next_use(planner, 1), start + 9);
	}
	ck_assert_uint_eq(dlc_planner_lines(planner), 0);
	ck_assert_int_eq(dlc_planner_verify(planner), 0);
	dlc_planner_free(planner);
}
END_TEST

START_TEST(test_planner_ring_grows_and_fills)
{
	struct dlc_planner *planner = make_planner(1000, NULL);

	for (uint32_t i = 0; i < DLC_PLANNER_MAX_LINES; i++)
		FAST_ASSERT_UINT_EQ(dlc_planner_announce(planner, i % 1000 + 1), 0);
	ck_assert_int_eq(dlc_planner_announce(planner, 1), -ENOSPC);
	ck_assert_uint_eq(dlc_planner_lines(planner), DLC_PLANNER_MAX_LINES);
	/* One read makes room for one line. */
	ck_assert_int_eq(dlc_planner_consume(planner, 1), 1);
	ck_assert_int_eq(dlc_planner_announce(planner, 1), 0);
	ck_assert_int_eq(dlc_planner_announce(planner, 1), -ENOSPC);
	ck_assert_int_eq(dlc_planner_consume(planner, 2), 1);
	ck_assert_uint_eq(dlc_planner_next_use(planner, 2), 1002);
	dlc_planner_free(planner);
}
END_TEST

/* The model: every line with its inode and whether it is still unread. */
struct model_line {
	uint32_t ino;
	bool unread;
};

START_TEST(test_planner_matches_model)
{
	enum { INODES = 50, STEPS = 60000 };
	struct model_line *lines = calloc(STEPS + 1, sizeof(*lines));
	struct dlc_planner *planner = make_planner(INODES, NULL);
	uint64_t state = 14 + (uint64_t)_i, frontier = 0;
	size_t count = 0;

	ck_assert_ptr_nonnull(lines);
	for (int step = 0; step < STEPS; step++) {
		uint32_t ino = random_below(&state, INODES) + 1;

		/* Announce a bit more than is read, and read in bursts. */
		if (random_below(&state, 100) < 52) {
			ck_assert_int_eq(dlc_planner_announce(planner, ino), 0);
			lines[++count] = (struct model_line){ ino, true };
		} else {
			int consumed = 0;

			for (size_t seq = 1; seq <= count; seq++) {
				if (lines[seq].ino == ino && lines[seq].unread) {
					lines[seq].unread = false;
					consumed = 1;
					if (seq > frontier)
						frontier = seq;
					break;
				}
			}
			FAST_ASSERT_UINT_EQ(dlc_planner_consume(planner, ino), consumed);
			for (size_t seq = 1; seq + DLC_PLANNER_SLACK < frontier; seq++)
				lines[seq].unread = false;
		}
		if (step % 97 == 0) {
			for (uint32_t i = 1; i <= INODES; i++) {
				uint64_t next = DLC_PLANNER_NEVER;

				for (size_t seq = 1; seq <= count && next == DLC_PLANNER_NEVER; seq++)
					if (lines[seq].ino == i && lines[seq].unread)
						next = seq;
				FAST_ASSERT_UINT_EQ(dlc_planner_next_use(planner, i), next);
			}
			FAST_ASSERT_UINT_EQ(dlc_planner_verify(planner), 0);
		}
	}
	dlc_planner_free(planner);
	free(lines);
}
END_TEST

/* --- the policy planning ------------------------------------------------- */

static struct dlc_policy *make_planning_policy(uint64_t capacity, uint32_t max_ino,
					       float *scores)
{
	struct dlc_policy *policy = dlc_policy_create(DLC_POLICY_IMPORTANCE, capacity, max_ino);

	ck_assert_ptr_nonnull(policy);
	dlc_policy_set_scores(policy, scores);
	return policy;
}

static void announce(struct dlc_policy *policy, const uint32_t *inos, size_t count)
{
	for (size_t i = 0; i < count; i++)
		ck_assert_int_eq(dlc_policy_announce(policy, inos[i]), 0);
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
}

/* A reader's open: consumed, then a hit or an offer; returns whether it hit. */
static bool read_one(struct dlc_policy *policy, uint32_t ino, struct dlc_ino_list *victims)
{
	bool hit;

	dlc_policy_consume(policy, ino);
	hit = dlc_policy_contains(policy, ino);
	if (hit)
		dlc_policy_hit(policy, ino);
	else
		ck_assert_int_ge(dlc_policy_admit(policy, ino, 1, victims), 0);
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	return hit;
}

START_TEST(test_plan_evicts_the_furthest_next_use)
{
	/* 1 2 3 fill the cache; 4 needs room: 2 is needed last (line 8). */
	static const uint32_t order[] = { 1, 2, 3, 4, 1, 3, 4, 2 };
	float scores[6] = { NAN, 0.9f, 0.9f, 0.9f, 0.1f, 0.1f };
	struct dlc_policy *policy = make_planning_policy(3, 5, scores);
	struct dlc_ino_list victims = { 0 };

	announce(policy, order, ARRAY_SIZE(order));
	for (uint32_t ino = 1; ino <= 3; ino++)
		ck_assert(!read_one(policy, ino, &victims));
	ck_assert_uint_eq(dlc_policy_announced(policy), 5);
	/* A lower score than all of them, and still admitted: the order decides. */
	dlc_policy_consume(policy, 4);
	ck_assert_int_eq(dlc_policy_admit(policy, 4, 1, &victims), 1);
	ck_assert_uint_eq(victims.count, 1);
	ck_assert_uint_eq(victims.items[0], 2);
	ck_assert(read_one(policy, 1, &victims));
	ck_assert(read_one(policy, 3, &victims));
	ck_assert(read_one(policy, 4, &victims));
	ck_assert(!read_one(policy, 2, &victims));
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_plan_bypasses_a_miss_needed_last)
{
	/* 4's next use (line 8) is later than 1's, 2's and 3's: it bypasses. */
	static const uint32_t order[] = { 1, 2, 3, 4, 3, 2, 1, 4 };
	float scores[5] = { NAN, 0.1f, 0.1f, 0.1f, 0.9f };
	struct dlc_policy *policy = make_planning_policy(3, 4, scores);
	struct dlc_ino_list victims = { 0 };
	size_t hits = 0;

	announce(policy, order, ARRAY_SIZE(order));
	for (size_t i = 0; i < ARRAY_SIZE(order); i++)
		hits += read_one(policy, order[i], &victims);
	/* MIN: 3 2 1 hit, both reads of 4 miss.  The last one is past the
	 * horizon, where the scores decide: 4 outranks them and stays. */
	ck_assert_uint_eq(hits, 3);
	ck_assert(dlc_policy_contains(policy, 4));
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_plan_unannounced_miss_never_displaces_announced)
{
	static const uint32_t order[] = { 1, 2, 1, 2 };
	float scores[4] = { NAN, 0.1f, 0.1f, 0.9f };
	struct dlc_policy *policy = make_planning_policy(2, 3, scores);
	struct dlc_ino_list victims = { 0 };

	dlc_policy_begin_pass(policy, 1);
	announce(policy, order, ARRAY_SIZE(order));
	ck_assert(!read_one(policy, 1, &victims));
	ck_assert(!read_one(policy, 2, &victims));
	/* 3 is more important, and read in this pass, but not announced. */
	dlc_policy_hit(policy, 1);
	ck_assert_int_eq(dlc_policy_admit(policy, 3, 1, &victims), 0);
	ck_assert(read_one(policy, 1, &victims));
	ck_assert(read_one(policy, 2, &victims));
	/* Past the horizon the scores decide again: 3 outranks 1 and 2. */
	ck_assert_uint_eq(dlc_policy_announced(policy), 0);
	ck_assert_int_eq(dlc_policy_admit(policy, 3, 1, &victims), 1);
	ck_assert_uint_eq(victims.count, 1);
	ck_assert_uint_eq(victims.items[0], 1);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_plan_takes_unannounced_entries_first)
{
	/* 1 and 2 cached and read, 3 and 4 cached and not read in this pass;
	 * the order announces 5, 3, 4: only 1 or 2 may go, lowest score first. */
	static const uint32_t order[] = { 5, 3, 4, 5 };
	float scores[6] = { NAN, 0.9f, 0.2f, 0.1f, 0.1f, 0.0f };
	struct dlc_policy *policy = make_planning_policy(4, 5, scores);
	struct dlc_ino_list victims = { 0 };

	for (uint32_t ino = 1; ino <= 4; ino++)
		ck_assert_int_eq(dlc_policy_restore(policy, ino, 1), 0);
	dlc_policy_hit(policy, 1);
	dlc_policy_hit(policy, 2);
	dlc_policy_begin_pass(policy, 2);
	announce(policy, order, ARRAY_SIZE(order));
	/* Not read in this pass, not announced, and 5 scores lowest: still goes. */
	ck_assert(!read_one(policy, 5, &victims));
	ck_assert_uint_eq(victims.count, 1);
	ck_assert_uint_eq(victims.items[0], 2);
	ck_assert(read_one(policy, 3, &victims));
	ck_assert(read_one(policy, 4, &victims));
	ck_assert(read_one(policy, 5, &victims));
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

/*
 * The two tests below: cache 2 with 1 (score 0.1) and 2 (0.9) restored,
 * then passes 2 and 3, each announcing its order and reading its reads;
 * after pass 2, 3 must have taken 1's place.  Returns the misses.
 */
static size_t two_announced_passes(const uint32_t *order2, size_t n_order2, const uint32_t *reads2,
				   size_t n_reads2, const uint32_t *order3, size_t n_order3,
				   const uint32_t *reads3, size_t n_reads3)
{
	float scores[4] = { NAN, 0.1f, 0.9f, 0.5f };
	struct dlc_policy *policy = make_planning_policy(2, 3, scores);
	struct dlc_ino_list victims = { 0 };
	size_t misses = 0;

	ck_assert_int_eq(dlc_policy_restore(policy, 1, 1), 0);
	ck_assert_int_eq(dlc_policy_restore(policy, 2, 1), 0);
	dlc_policy_begin_pass(policy, 2);
	announce(policy, order2, n_order2);
	for (size_t i = 0; i < n_reads2; i++)
		misses += !read_one(policy, reads2[i], &victims);
	/* 3 took 1's place: 1 was not read in the pass, but the pass repeats. */
	ck_assert(dlc_policy_contains(policy, 3));
	ck_assert(!dlc_policy_contains(policy, 1));
	dlc_policy_begin_pass(policy, 3);
	announce(policy, order3, n_order3);
	for (size_t i = 0; i < n_reads3; i++)
		misses += !read_one(policy, reads3[i], &victims);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
	return misses;
}

/*
 * An announced pass whose reads reach a sample's second announced line draws
 * with replacement: an
 * entry it has not read yet is no certain hit in it, so a more important miss
 * with no announced use left may take its place.  Cache 2: 1 (score 0.1) and
 * 2 (0.9) restored; pass 2 announces 2 2 3 and pass 3 announces 3 2 3.  MIN
 * keeps 3 over 1 (1 is never read again): one miss, 3's first read.  Were 1
 * kept for being unread in pass 2, 3 would miss again in pass 3.
 */
START_TEST(test_plan_repeats_lift_the_pass_rule)
{
	static const uint32_t pass2[] = { 2, 2, 3 };
	static const uint32_t pass3[] = { 3, 2, 3 };

	ck_assert_uint_eq(two_announced_passes(pass2, ARRAY_SIZE(pass2), pass2, ARRAY_SIZE(pass2),
					       pass3, ARRAY_SIZE(pass3), pass3, ARRAY_SIZE(pass3)),
			  1);
}
END_TEST

/*
 * The same job naming each sample once in its order (as examples/dlcache.py's
 * DistributedSlicer does), the whole order written before the pass's first read: 2 is read a
 * second time without a line, which shows the pass draws with replacement
 * just as well, and 3 takes 1's place again (1 is in no line: the pass does
 * not read it).  MIN's single miss, where the pass rule alone gives two.
 */
START_TEST(test_plan_whole_order_named_once_lifts_the_pass_rule)
{
	static const uint32_t pass2[] = { 2, 3 };
	static const uint32_t reads2[] = { 2, 2, 3 };
	static const uint32_t pass3[] = { 3, 2 };
	static const uint32_t reads3[] = { 3, 2, 3 };

	ck_assert_uint_eq(two_announced_passes(pass2, ARRAY_SIZE(pass2), reads2, ARRAY_SIZE(reads2),
					       pass3, ARRAY_SIZE(pass3), reads3, ARRAY_SIZE(reads3)),
			  1);
}
END_TEST

/*
 * The same start with the order written a window at a time (after the
 * pass's reads began), as a permutation may be, and 2 opened twice by
 * accident: no line names 2 twice and the order is not whole, so 1, not
 * read yet in the pass, may be a certain hit later in it, and 3, with no
 * announced use left, bypasses.
 */
START_TEST(test_plan_keeps_unread_entries_without_repeats)
{
	static const uint32_t first[] = { 2 };
	static const uint32_t then[] = { 3 };
	float scores[4] = { NAN, 0.1f, 0.9f, 0.5f };
	struct dlc_policy *policy = make_planning_policy(2, 3, scores);
	struct dlc_ino_list victims = { 0 };

	ck_assert_int_eq(dlc_policy_restore(policy, 1, 1), 0);
	ck_assert_int_eq(dlc_policy_restore(policy, 2, 1), 0);
	dlc_policy_begin_pass(policy, 2);
	announce(policy, first, ARRAY_SIZE(first));
	ck_assert(read_one(policy, 2, &victims));
	announce(policy, then, ARRAY_SIZE(then));
	ck_assert(read_one(policy, 2, &victims));
	ck_assert(!read_one(policy, 3, &victims));
	ck_assert_uint_eq(victims.count, 0);
	ck_assert(!dlc_policy_contains(policy, 3));
	ck_assert(read_one(policy, 1, &victims));
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_plan_other_kinds_ignore_the_order)
{
	static const enum dlc_policy_kind kinds[] = {
		DLC_POLICY_FREEZE, DLC_POLICY_LRU, DLC_POLICY_NONE,
	};
	struct dlc_policy *policy = dlc_policy_create(kinds[_i], 2, 3);

	ck_assert_ptr_nonnull(policy);
	ck_assert_int_eq(dlc_policy_announce(policy, 1), 0);
	ck_assert_int_eq(dlc_policy_announce(policy, 4), -EINVAL);
	ck_assert_uint_eq(dlc_policy_announced(policy), 0);
	dlc_policy_consume(policy, 1);
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_plan_random_operations_keep_invariants)
{
	enum { INODES = 64, STEPS = 20000 };
	float scores[INODES + 1];
	struct dlc_policy *policy;
	struct dlc_ino_list victims = { 0 };
	uint64_t state = 99 + (uint64_t)_i;

	for (uint32_t i = 0; i <= INODES; i++)
		scores[i] = (float)random_below(&state, 8);
	policy = make_planning_policy(40 + 40 * (uint64_t)_i, INODES, scores);
	for (int step = 0; step < STEPS; step++) {
		uint32_t ino = random_below(&state, INODES) + 1;
		uint32_t what = random_below(&state, 100);

		if (what < 40)
			ck_assert_int_eq(dlc_policy_announce(policy, ino), 0);
		else if (what < 80)
			read_one(policy, ino, &victims);
		else if (what < 85 && !dlc_policy_contains(policy, ino))
			ck_assert_int_ge(dlc_policy_admit(policy, ino, random_below(&state, 9),
							  &victims), 0);
		else if (what < 90)
			dlc_policy_remove(policy, ino);
		else if (what < 97) {
			scores[ino] = (float)random_below(&state, 8);
			dlc_policy_rescore(policy, ino);
		} else if (what < 99)
			dlc_policy_begin_pass(policy, (uint32_t)step);
		else
			dlc_policy_rescore_all(policy);
		FAST_ASSERT_UINT_EQ(dlc_policy_verify(policy), 0);
	}
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

/* --- the planner against MIN --------------------------------------------- */

START_TEST(test_announced_trace_gives_min_misses)
{
	static const double fractions[] = { 0.05, 0.1, 0.2, 0.5 };
	struct dlc_trace trace;
	uint32_t samples = 3000;

	switch (_i) {
	case 0:
		ck_assert_int_eq(dlc_simulate_sample(samples, 4, DLC_SIMULATE_WEIGHTS_LOGNORMAL, 1.0, 3,
						     &trace), 0);
		break;
	case 1:
		ck_assert_int_eq(dlc_simulate_sample(samples, 4, DLC_SIMULATE_WEIGHTS_RANK, 0, 4,
						     &trace), 0);
		break;
	default:
		ck_assert_int_eq(dlc_simulate_shuffle(samples, 4, 5, &trace), 0);
		break;
	}
	for (size_t f = 0; f < ARRAY_SIZE(fractions); f++) {
		uint32_t capacity = (uint32_t)(fractions[f] * samples);
		struct dlc_simulate_result min, planned, plain;

		ck_assert_int_eq(dlc_simulate_belady(&trace, capacity, &min), 0);
		ck_assert_int_eq(dlc_simulate_replay_announced(&trace, DLC_POLICY_IMPORTANCE, capacity,
							       DLC_SIMULATE_ANNOUNCE_ALL, &planned), 0);
		ck_assert_uint_eq(planned.accesses, min.accesses);
		ck_assert_uint_eq(planned.misses, min.misses);
		ck_assert_uint_eq(planned.later_misses, min.later_misses);
		/* Without the order it is not MIN (except on a permutation). */
		ck_assert_int_eq(dlc_simulate_replay(&trace, DLC_POLICY_IMPORTANCE, capacity, false,
						     &plain), 0);
		ck_assert_uint_ge(plain.misses, min.misses);
		if (_i < 2)
			ck_assert_uint_gt(plain.misses, min.misses);
	}
	dlc_trace_free(&trace);
}
END_TEST

START_TEST(test_epoch_ahead_announcements_stay_near_min)
{
	struct dlc_trace trace;
	uint32_t samples = 10000;

	/* The job: lognormal importance sampling, cache 10%. */
	ck_assert_int_eq(dlc_simulate_sample(samples, 5, DLC_SIMULATE_WEIGHTS_LOGNORMAL, 1.0, 1,
					     &trace), 0);
	for (int announce = DLC_SIMULATE_ANNOUNCE_EPOCH; announce <= DLC_SIMULATE_ANNOUNCE_AHEAD;
	     announce++) {
		struct dlc_simulate_result min, planned;

		ck_assert_int_eq(dlc_simulate_belady(&trace, samples / 10, &min), 0);
		ck_assert_int_eq(dlc_simulate_replay_announced(&trace, DLC_POLICY_IMPORTANCE,
							       samples / 10, announce, &planned), 0);
		ck_assert_uint_le(planned.misses * 100, min.misses * 105);
	}
	dlc_trace_free(&trace);
}
END_TEST

/*
 * An order naming each drawn sample once per epoch (a slicer's) shows first
 * uses only; the repeats the job still reads must not make the plan cost
 * more source fetches than no order at all (importance sampling with
 * replacement, lognormal weights).
 */
START_TEST(test_first_use_announcements_cost_no_more_than_none)
{
	static const double fractions[] = { 0.1, 0.2, 0.5 };
	struct dlc_trace trace;
	uint32_t samples = 5000;

	ck_assert_int_eq(dlc_simulate_sample(samples, 5, DLC_SIMULATE_WEIGHTS_LOGNORMAL, 1.0, 1,
					     &trace), 0);
	for (size_t f = 0; f < ARRAY_SIZE(fractions); f++) {
		uint32_t capacity = (uint32_t)(fractions[f] * samples);
		struct dlc_simulate_result first, none;

		ck_assert_int_eq(dlc_simulate_replay_announced(&trace, DLC_POLICY_IMPORTANCE, capacity,
							       DLC_SIMULATE_ANNOUNCE_FIRST, &first), 0);
		ck_assert_int_eq(dlc_simulate_replay(&trace, DLC_POLICY_IMPORTANCE, capacity, false,
						     &none), 0);
		ck_assert_msg(first.misses <= none.misses, "cache %.0f%%: %" PRIu64 " misses announced, %" PRIu64 " not",
			      fractions[f] * 100, first.misses, none.misses);
	}
	dlc_trace_free(&trace);
}
END_TEST

static Suite *planner_suite(void)
{
	Suite *s = suite_create("planner");
	TCase *tc;

	tc = tcase_create("planner");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_planner_next_uses);
	tcase_add_test(tc, test_planner_reads_out_of_order);
	tcase_add_test(tc, test_planner_drops_lines_left_behind);
	tcase_add_test(tc, test_planner_restart_leaves_old_order_behind);
	tcase_add_test(tc, test_planner_positions_wrap_32_bits);
	tcase_add_test(tc, test_planner_ring_grows_and_fills);
	tcase_add_loop_test(tc, test_planner_matches_model, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("policy");
	tcase_add_test(tc, test_plan_evicts_the_furthest_next_use);
	tcase_add_test(tc, test_plan_bypasses_a_miss_needed_last);
	tcase_add_test(tc, test_plan_unannounced_miss_never_displaces_announced);
	tcase_add_test(tc, test_plan_takes_unannounced_entries_first);
	tcase_add_test(tc, test_plan_repeats_lift_the_pass_rule);
	tcase_add_test(tc, test_plan_whole_order_named_once_lifts_the_pass_rule);
	tcase_add_test(tc, test_plan_keeps_unread_entries_without_repeats);
	tcase_add_loop_test(tc, test_plan_other_kinds_ignore_the_order, 0, 3);
	tcase_add_loop_test(tc, test_plan_random_operations_keep_invariants, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("min");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_announced_trace_gives_min_misses, 0, 3);
	tcase_add_test(tc, test_epoch_ahead_announcements_stay_near_min);
	tcase_add_test(tc, test_first_use_announcements_cost_no_more_than_none);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(planner_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
