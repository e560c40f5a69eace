/*
 * check_policy.c - the admission and eviction policies against known answers
 * and against a reference model.
 *
 * Known answers: the classic page-reference string for lru, fill-then-freeze,
 * the hit ratio of each policy under per-epoch shuffling (the reason freeze is
 * the default).  The model test replays 10^5 random admits, hits, restores
 * and removes against a few lines of obviously-correct array code and
 * compares every outcome, every victim in order, and the accounting.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/policy.h"
#include "unit_random.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static struct dlc_policy *make_policy(enum dlc_policy_kind kind, uint64_t capacity,
				      uint32_t max_ino)
{
	struct dlc_policy *policy = dlc_policy_create(kind, capacity, max_ino);

	ck_assert_ptr_nonnull(policy);
	ck_assert_int_eq(dlc_policy_kind(policy), kind);
	ck_assert_uint_eq(dlc_policy_capacity(policy), capacity);
	ck_assert_uint_eq(dlc_policy_used(policy), 0);
	ck_assert_uint_eq(dlc_policy_entries(policy), 0);
	return policy;
}


/* Asserts the victims of the last admission, coldest first. */
static void assert_victims(const struct dlc_ino_list *victims, const uint32_t *expected,
			   size_t count)
{
	ck_assert_uint_eq(victims->count, count);
	for (size_t i = 0; i < count; i++)
		ck_assert_uint_eq(victims->items[i], expected[i]);
}

/* --- names ------------------------------------------------------------- */

START_TEST(test_parse_and_name_round_trip)
{
	static const struct {
		const char *name;
		enum dlc_policy_kind kind;
	} cases[] = {
		{ "freeze", DLC_POLICY_FREEZE },
		{ "lru", DLC_POLICY_LRU },
		{ "none", DLC_POLICY_NONE },
		{ "importance", DLC_POLICY_IMPORTANCE },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		enum dlc_policy_kind kind = DLC_POLICY_NONE;

		ck_assert_int_eq(dlc_policy_parse(cases[i].name, &kind), 0);
		ck_assert_int_eq(kind, cases[i].kind);
		ck_assert_str_eq(dlc_policy_name(cases[i].kind), cases[i].name);
	}
}
END_TEST

START_TEST(test_parse_rejects_unknown_names)
{
	static const char *const bad[] = {
		"", "LRU", "Freeze", "lru ", " lru", "fifo", "Importance", "importance ",
		"import", "freezer", "no",
	};
	enum dlc_policy_kind kind = DLC_POLICY_LRU;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		ck_assert_int_eq(dlc_policy_parse(bad[i], &kind), -EINVAL);
		ck_assert_int_eq(kind, DLC_POLICY_LRU);
	}
	ck_assert_int_eq(dlc_policy_parse(NULL, &kind), -EINVAL);
	ck_assert_str_eq(dlc_policy_name((enum dlc_policy_kind)42), "unknown");
	ck_assert_ptr_null(dlc_policy_create((enum dlc_policy_kind)42, 10, 10));
}
END_TEST

/* --- freeze ------------------------------------------------------------ */

START_TEST(test_freeze_fills_then_never_evicts)
{
	/* capacity 10: sizes offered in turn, and whether each is admitted */
	static const struct {
		uint64_t bytes;
		int admitted;
	} steps[] = {
		{ 3, 1 }, { 3, 1 }, { 3, 1 },   /* 9 used */
		{ 3, 0 },                       /* would be 12 */
		{ 2, 0 },                       /* would be 11 */
		{ 1, 1 },                       /* exactly full */
		{ 0, 1 },                       /* a 0-byte file always fits */
		{ 1, 0 }, { 10, 0 }, { 11, 0 },
	};
	struct dlc_policy *policy = make_policy(DLC_POLICY_FREEZE, 10, 100);
	struct dlc_ino_list victims = { 0 };
	uint64_t used = 0;

	for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
		uint32_t ino = (uint32_t)i + 1;

		ck_assert_int_eq(dlc_policy_admit(policy, ino, steps[i].bytes, &victims),
				 steps[i].admitted);
		ck_assert_uint_eq(victims.count, 0);
		ck_assert(dlc_policy_contains(policy, ino) == (steps[i].admitted == 1));
		used += steps[i].admitted ? steps[i].bytes : 0;
		ck_assert_uint_eq(dlc_policy_used(policy), used);
		ck_assert_uint_le(dlc_policy_used(policy), 10);
	}
	ck_assert_uint_eq(dlc_policy_entries(policy), 5);
	/* Hits change nothing: the frozen set stays. */
	for (uint32_t ino = 1; ino <= 5; ino++)
		dlc_policy_hit(policy, ino);
	ck_assert_int_eq(dlc_policy_admit(policy, 50, 1, &victims), 0);
	ck_assert(dlc_policy_contains(policy, 1));
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_freeze_restore_respects_capacity)
{
	struct dlc_policy *policy = make_policy(DLC_POLICY_FREEZE, 100, 10);
	struct dlc_ino_list victims = { 0 };

	ck_assert_int_eq(dlc_policy_restore(policy, 1, 60), 0);
	ck_assert_int_eq(dlc_policy_restore(policy, 2, 41), -ENOSPC);
	ck_assert(!dlc_policy_contains(policy, 2));
	ck_assert_int_eq(dlc_policy_restore(policy, 2, 40), 0);
	ck_assert_int_eq(dlc_policy_restore(policy, 2, 0), -EEXIST);
	ck_assert_int_eq(dlc_policy_restore(policy, 3, 1), -ENOSPC);
	ck_assert_uint_eq(dlc_policy_used(policy), 100);
	ck_assert_uint_eq(dlc_policy_entries(policy), 2);
	/* Restored entries are charged like admitted ones. */
	ck_assert_int_eq(dlc_policy_admit(policy, 3, 1, &victims), 0);
	dlc_policy_free(policy);
}
END_TEST

/* --- lru --------------------------------------------------------------- */

/* Replays page references (page p is inode p + 1), each of one byte. */
static unsigned replay_unit_pages(struct dlc_policy *policy, const uint32_t *pages,
				  size_t count, uint32_t *evicted, size_t *evicted_count)
{
	struct dlc_ino_list victims = { 0 };
	unsigned misses = 0;

	*evicted_count = 0;
	for (size_t i = 0; i < count; i++) {
		uint32_t ino = pages[i] + 1;

		if (dlc_policy_contains(policy, ino)) {
			dlc_policy_hit(policy, ino);
			continue;
		}
		misses++;
		ck_assert_int_ge(dlc_policy_admit(policy, ino, 1, &victims), 0);
		for (size_t v = 0; v < victims.count; v++)
			evicted[(*evicted_count)++] = victims.items[v] - 1;
		ck_assert_uint_le(dlc_policy_used(policy), dlc_policy_capacity(policy));
	}
	dlc_ino_list_free(&victims);
	return misses;
}

START_TEST(test_reference_string)
{
	/*
	 * 7 0 1 2 0 3 1 4 2 3 0 3 2 3 with 4 frames, worked by hand (MRU first):
	 *   7 0 1 2    4 cold misses        [2 1 0 7]
	 *   0 hit                           [0 2 1 7]
	 *   3 miss, evict 7                 [3 0 2 1]
	 *   1 hit                           [1 3 0 2]
	 *   4 miss, evict 2                 [4 1 3 0]
	 *   2 miss, evict 0                 [2 4 1 3]
	 *   3 hit                           [3 2 4 1]
	 *   0 miss, evict 1                 [0 3 2 4]
	 *   3 2 3 hits
	 * lru: 8 misses, victims 7 2 0 1.  freeze keeps 7 0 1 2: 9 misses.
	 */
	static const uint32_t pages[] = { 7, 0, 1, 2, 0, 3, 1, 4, 2, 3, 0, 3, 2, 3 };
	static const struct {
		enum dlc_policy_kind kind;
		unsigned misses;
		size_t evicted_count;
		uint32_t evicted[4];
	} cases[] = {
		{ DLC_POLICY_LRU, 8, 4, { 7, 2, 0, 1 } },
		{ DLC_POLICY_FREEZE, 9, 0, { 0 } },
		{ DLC_POLICY_NONE, 14, 0, { 0 } },
	};

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		struct dlc_policy *policy = make_policy(cases[c].kind, 4, 8);
		uint32_t evicted[ARRAY_SIZE(pages)];
		size_t evicted_count;

		ck_assert_uint_eq(replay_unit_pages(policy, pages, ARRAY_SIZE(pages),
						    evicted, &evicted_count),
				  cases[c].misses);
		ck_assert_uint_eq(evicted_count, cases[c].evicted_count);
		for (size_t i = 0; i < evicted_count; i++)
			ck_assert_uint_eq(evicted[i], cases[c].evicted[i]);
		dlc_policy_free(policy);
	}
}
END_TEST

START_TEST(test_lru_hit_changes_order)
{
	/* Three one-byte entries fill the cache; a hit before the fourth decides
	 * who goes. */
	static const struct {
		uint32_t hit;           /* 0: no hit */
		uint32_t victim;
	} cases[] = {
		{ 0, 1 }, { 1, 2 }, { 2, 1 }, { 3, 1 }, { 99, 1 },
	};

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		struct dlc_policy *policy = make_policy(DLC_POLICY_LRU, 3, 100);
		struct dlc_ino_list victims = { 0 };

		for (uint32_t ino = 1; ino <= 3; ino++)
			ck_assert_int_eq(dlc_policy_admit(policy, ino, 1, &victims), 1);
		if (cases[c].hit)
			dlc_policy_hit(policy, cases[c].hit);
		ck_assert_int_eq(dlc_policy_admit(policy, 4, 1, &victims), 1);
		assert_victims(&victims, &cases[c].victim, 1);
		ck_assert(!dlc_policy_contains(policy, cases[c].victim));
		ck_assert_uint_eq(dlc_policy_entries(policy), 3);
		dlc_ino_list_free(&victims);
		dlc_policy_free(policy);
	}
}
END_TEST

START_TEST(test_lru_evicts_as_many_as_needed)
{
	struct dlc_policy *policy = make_policy(DLC_POLICY_LRU, 10, 100);
	struct dlc_ino_list victims = { 0 };
	static const uint32_t first_two[] = { 1, 2 };
	static const uint32_t all[] = { 3, 4 };

	ck_assert_int_eq(dlc_policy_admit(policy, 1, 4, &victims), 1);
	ck_assert_int_eq(dlc_policy_admit(policy, 2, 3, &victims), 1);
	ck_assert_int_eq(dlc_policy_admit(policy, 3, 3, &victims), 1);
	ck_assert_uint_eq(victims.count, 0);
	/* 6 bytes need 4 + 3 freed: the two coldest go, the third stays. */
	ck_assert_int_eq(dlc_policy_admit(policy, 4, 6, &victims), 1);
	assert_victims(&victims, first_two, 2);
	ck_assert_uint_eq(dlc_policy_used(policy), 9);
	ck_assert_uint_eq(dlc_policy_entries(policy), 2);
	/* An entry of exactly the capacity empties the cache. */
	ck_assert_int_eq(dlc_policy_admit(policy, 5, 10, &victims), 1);
	assert_victims(&victims, all, 2);
	ck_assert_uint_eq(dlc_policy_used(policy), 10);
	ck_assert_uint_eq(dlc_policy_entries(policy), 1);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_lru_rejects_entry_larger_than_capacity)
{
	static const struct {
		uint64_t capacity;
		uint64_t bytes;
	} cases[] = {
		{ 10, 11 },
		{ 0, 1 },
		{ 1ULL << 40, (1ULL << 40) + 1 },
		{ UINT64_MAX, UINT64_MAX },     /* cannot be stored: refused */
	};

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		struct dlc_policy *policy = make_policy(DLC_POLICY_LRU, cases[c].capacity, 10);
		struct dlc_ino_list victims = { 0 };

		if (cases[c].capacity > 0)
			ck_assert_int_eq(dlc_policy_admit(policy, 1, 1, &victims), 1);
		ck_assert_int_eq(dlc_policy_admit(policy, 2, cases[c].bytes, &victims), 0);
		ck_assert_uint_eq(victims.count, 0);
		ck_assert(!dlc_policy_contains(policy, 2));
		ck_assert(dlc_policy_contains(policy, 1) == (cases[c].capacity > 0));
		ck_assert_uint_eq(dlc_policy_used(policy), cases[c].capacity > 0 ? 1 : 0);
		ck_assert_int_eq(dlc_policy_restore(policy, 3, cases[c].bytes), -ENOSPC);
		dlc_ino_list_free(&victims);
		dlc_policy_free(policy);
	}
}
END_TEST

START_TEST(test_lru_restore_order_and_capacity)
{
	struct dlc_policy *policy = make_policy(DLC_POLICY_LRU, 3, 10);
	struct dlc_ino_list victims = { 0 };
	static const uint32_t first[] = { 1 };
	static const uint32_t third[] = { 3 };

	/* Restored in call order: 1 is the least recent. */
	for (uint32_t ino = 1; ino <= 3; ino++)
		ck_assert_int_eq(dlc_policy_restore(policy, ino, 1), 0);
	ck_assert_int_eq(dlc_policy_restore(policy, 4, 1), -ENOSPC);
	ck_assert(!dlc_policy_contains(policy, 4));
	ck_assert_int_eq(dlc_policy_restore(policy, 5, 0), 0);  /* 0 bytes still fit */
	ck_assert_uint_eq(dlc_policy_entries(policy), 4);
	ck_assert_int_eq(dlc_policy_admit(policy, 6, 1, &victims), 1);
	assert_victims(&victims, first, 1);
	dlc_policy_hit(policy, 2);
	ck_assert_int_eq(dlc_policy_admit(policy, 7, 1, &victims), 1);
	assert_victims(&victims, third, 1);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_lru_victim_list_grows_and_is_cleared)
{
	enum { COUNT = 5000 };
	struct dlc_policy *policy = make_policy(DLC_POLICY_LRU, COUNT, COUNT + 1);
	struct dlc_ino_list victims = { 0 };

	for (uint32_t ino = 1; ino <= COUNT; ino++)
		FAST_ASSERT_UINT_EQ(dlc_policy_admit(policy, ino, 1, &victims), 1);
	ck_assert_int_eq(dlc_policy_admit(policy, COUNT + 1, COUNT, &victims), 1);
	ck_assert_uint_eq(victims.count, COUNT);
	ck_assert_uint_ge(victims.capacity, COUNT);
	for (uint32_t i = 0; i < COUNT; i++)
		FAST_ASSERT_UINT_EQ(victims.items[i], i + 1);
	/* The next admission clears the list first. */
	dlc_policy_remove(policy, COUNT + 1);
	ck_assert_int_eq(dlc_policy_admit(policy, 1, 1, &victims), 1);
	ck_assert_uint_eq(victims.count, 0);
	dlc_ino_list_free(&victims);
	ck_assert_ptr_null(victims.items);
	dlc_ino_list_free(&victims);    /* twice is harmless */
	dlc_policy_free(policy);
}
END_TEST

/* --- behaviour common to every policy ---------------------------------- */

START_TEST(test_remove_frees_bytes)
{
	static const enum dlc_policy_kind kinds[] = {
		DLC_POLICY_FREEZE, DLC_POLICY_LRU, DLC_POLICY_IMPORTANCE,
	};
	struct dlc_policy *policy = make_policy(kinds[_i], 10, 10);
	struct dlc_ino_list victims = { 0 };

	ck_assert_int_eq(dlc_policy_admit(policy, 1, 4, &victims), 1);
	ck_assert_int_eq(dlc_policy_admit(policy, 2, 6, &victims), 1);
	dlc_policy_remove(policy, 1);
	ck_assert(!dlc_policy_contains(policy, 1));
	ck_assert_uint_eq(dlc_policy_used(policy), 6);
	ck_assert_uint_eq(dlc_policy_entries(policy), 1);
	/* The freed room is usable without evicting anyone. */
	ck_assert_int_eq(dlc_policy_admit(policy, 3, 4, &victims), 1);
	ck_assert_uint_eq(victims.count, 0);
	ck_assert(dlc_policy_contains(policy, 2));
	/* Removing what is not cached, or not an inode, changes nothing. */
	dlc_policy_remove(policy, 1);
	dlc_policy_remove(policy, 0);
	dlc_policy_remove(policy, 11);
	ck_assert_uint_eq(dlc_policy_used(policy), 10);
	ck_assert_uint_eq(dlc_policy_entries(policy), 2);
	/* A removed inode can come back. */
	dlc_policy_remove(policy, 2);
	ck_assert_int_eq(dlc_policy_admit(policy, 2, 6, &victims), 1);
	ck_assert_uint_eq(dlc_policy_used(policy), 10);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_zero_byte_files_are_cached)
{
	static const enum dlc_policy_kind kinds[] = {
		DLC_POLICY_FREEZE, DLC_POLICY_LRU, DLC_POLICY_IMPORTANCE,
	};
	struct dlc_policy *policy = make_policy(kinds[_i], 0, 10);
	struct dlc_ino_list victims = { 0 };

	/* Even a cache of capacity 0 holds empty files. */
	for (uint32_t ino = 1; ino <= 3; ino++)
		ck_assert_int_eq(dlc_policy_admit(policy, ino, 0, &victims), 1);
	ck_assert_uint_eq(dlc_policy_entries(policy), 3);
	ck_assert_uint_eq(dlc_policy_used(policy), 0);
	ck_assert(dlc_policy_contains(policy, 2));
	ck_assert(!dlc_policy_contains(policy, 4));
	ck_assert_int_eq(dlc_policy_admit(policy, 4, 1, &victims), 0);
	dlc_policy_remove(policy, 2);
	ck_assert(!dlc_policy_contains(policy, 2));
	ck_assert_uint_eq(dlc_policy_entries(policy), 2);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_lru_evicts_zero_byte_files_in_order)
{
	struct dlc_policy *policy = make_policy(DLC_POLICY_LRU, 2, 10);
	struct dlc_ino_list victims = { 0 };
	static const uint32_t expected[] = { 1, 2 };

	ck_assert_int_eq(dlc_policy_admit(policy, 1, 0, &victims), 1);
	ck_assert_int_eq(dlc_policy_admit(policy, 2, 1, &victims), 1);
	ck_assert_int_eq(dlc_policy_admit(policy, 3, 1, &victims), 1);
	ck_assert_uint_eq(victims.count, 0);
	/* The coldest goes first even though it frees nothing. */
	ck_assert_int_eq(dlc_policy_admit(policy, 4, 1, &victims), 1);
	assert_victims(&victims, expected, 2);
	ck_assert_uint_eq(dlc_policy_entries(policy), 2);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_inode_out_of_range)
{
	static const enum dlc_policy_kind kinds[] = {
		DLC_POLICY_FREEZE, DLC_POLICY_LRU, DLC_POLICY_NONE, DLC_POLICY_IMPORTANCE,
	};
	struct dlc_policy *policy = make_policy(kinds[_i], 100, 10);
	struct dlc_ino_list victims = { 0 };

	ck_assert_int_eq(dlc_policy_admit(policy, 0, 1, &victims), -EINVAL);
	ck_assert_int_eq(dlc_policy_admit(policy, 11, 1, &victims), -EINVAL);
	ck_assert_int_eq(dlc_policy_admit(policy, UINT32_MAX, 1, &victims), -EINVAL);
	ck_assert_int_eq(dlc_policy_restore(policy, 0, 1), -EINVAL);
	ck_assert_int_eq(dlc_policy_restore(policy, 11, 1), -EINVAL);
	dlc_policy_hit(policy, 0);
	dlc_policy_hit(policy, 11);
	ck_assert(!dlc_policy_contains(policy, 0));
	ck_assert(!dlc_policy_contains(policy, 11));
	ck_assert_uint_eq(dlc_policy_entries(policy), 0);
	/* The last valid inode works (for none: is refused). */
	ck_assert_int_eq(dlc_policy_admit(policy, 10, 1, &victims),
			 kinds[_i] == DLC_POLICY_NONE ? 0 : 1);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

/* --- none -------------------------------------------------------------- */

START_TEST(test_none_admits_nothing)
{
	struct dlc_policy *policy = make_policy(DLC_POLICY_NONE, 1000, 10);
	struct dlc_ino_list victims = { 0 };

	for (uint32_t ino = 1; ino <= 10; ino++) {
		ck_assert_int_eq(dlc_policy_admit(policy, ino, ino - 1, &victims), 0);
		ck_assert_uint_eq(victims.count, 0);
		ck_assert_int_eq(dlc_policy_restore(policy, ino, 0), -ENOSPC);
		dlc_policy_hit(policy, ino);
		dlc_policy_remove(policy, ino);
		ck_assert(!dlc_policy_contains(policy, ino));
	}
	ck_assert_uint_eq(dlc_policy_used(policy), 0);
	ck_assert_uint_eq(dlc_policy_entries(policy), 0);
	dlc_policy_free(policy);
}
END_TEST

/* --- importance -------------------------------------------------------- */

#define IMPORTANCE_MAX_INO 16

/* scores[ino] for an importance policy over inodes 1..IMPORTANCE_MAX_INO. */
struct score_table {
	float values[IMPORTANCE_MAX_INO + 1];
};

/* A policy ranking by table, every score unknown until a test sets it. */
static struct dlc_policy *make_importance(struct score_table *table, uint64_t capacity)
{
	struct dlc_policy *policy = make_policy(DLC_POLICY_IMPORTANCE, capacity,
						IMPORTANCE_MAX_INO);

	for (size_t i = 0; i < ARRAY_SIZE(table->values); i++)
		table->values[i] = NAN;
	dlc_policy_set_scores(policy, table->values);
	/* One announced pass, so that scripts may offer an inode twice: these
	 * check the score order among entries already read in the pass. */
	dlc_policy_begin_pass(policy, 0);
	return policy;
}

/* One offer in a scripted run: who, how big, and what must happen. */
struct importance_step {
	uint32_t ino;
	uint64_t bytes;
	int admitted;
	size_t victim_count;
	uint32_t victims[4];
};

static void run_importance_steps(struct dlc_policy *policy, const struct importance_step *steps,
				 size_t count)
{
	struct dlc_ino_list victims = { 0 };

	for (size_t i = 0; i < count; i++) {
		uint64_t used = dlc_policy_used(policy);
		uint64_t freed = 0;

		ck_assert_msg(dlc_policy_admit(policy, steps[i].ino, steps[i].bytes, &victims) ==
				      steps[i].admitted,
			      "step %zu: inode %u", i, steps[i].ino);
		assert_victims(&victims, steps[i].victims, steps[i].victim_count);
		ck_assert(dlc_policy_contains(policy, steps[i].ino) == (steps[i].admitted == 1));
		for (size_t v = 0; v < steps[i].victim_count; v++) {
			ck_assert(!dlc_policy_contains(policy, steps[i].victims[v]));
			freed++;        /* every entry in these scripts is charged 1 byte */
		}
		if (steps[i].admitted)
			ck_assert_uint_eq(dlc_policy_used(policy), used - freed + steps[i].bytes);
		else
			ck_assert_uint_eq(dlc_policy_used(policy), used);
		ck_assert_int_eq(dlc_policy_verify(policy), 0);
	}
	dlc_ino_list_free(&victims);
}

START_TEST(test_importance_admits_by_score)
{
	/* Inode -> score; 7 ties with 2, 8 is unknown. */
	static const float scores[IMPORTANCE_MAX_INO + 1] = {
		[1] = 5, [2] = 3, [3] = 8, [4] = 1, [5] = 4, [6] = 9, [7] = 3, [8] = NAN,
		[9] = 6, [10] = 2, [11] = 10,
	};
	/* Capacity 3 bytes; the cache after each step in brackets, lowest first. */
	static const struct importance_step steps[] = {
		{ 1, 1, 1, 0, { 0 } },          /* [5]         room */
		{ 2, 1, 1, 0, { 0 } },          /* [3 5]       room */
		{ 3, 1, 1, 0, { 0 } },          /* [3 5 8]     full */
		{ 4, 1, 0, 0, { 0 } },          /* 1 < 3: refused */
		{ 5, 1, 1, 1, { 2 } },          /* [4 5 8]     4 > 3 */
		{ 7, 1, 0, 0, { 0 } },          /* 3 < 4 */
		{ 8, 1, 0, 0, { 0 } },          /* unknown never evicts */
		{ 6, 1, 1, 1, { 5 } },          /* [5 8 9] */
		{ 9, 2, 0, 0, { 0 } },          /* would need 8 to go too: nothing goes */
		{ 9, 1, 1, 1, { 1 } },          /* [6 8 9] */
		{ 10, 1, 0, 0, { 0 } },
		{ 11, 2, 1, 2, { 9, 3 } },      /* [9 10]      lowest first */
		{ 4, 0, 1, 0, { 0 } },          /* [1 9 10]    a 0-byte file fits */
		{ 3, 1, 0, 0, { 0 } },          /* 8 < 9, and 4 alone frees nothing */
		{ 5, 4, 0, 0, { 0 } },          /* larger than the cache */
		{ 2, 1, 0, 0, { 0 } },
	};
	struct score_table table;
	struct dlc_policy *policy = make_importance(&table, 3);

	memcpy(table.values, scores, sizeof(scores));
	run_importance_steps(policy, steps, ARRAY_SIZE(steps));
	ck_assert_uint_eq(dlc_policy_entries(policy), 3);
	ck_assert_uint_eq(dlc_policy_used(policy), 3);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_importance_equal_score_never_evicts)
{
	static const struct importance_step steps[] = {
		{ 1, 1, 1, 0, { 0 } },
		{ 2, 1, 1, 0, { 0 } },
		{ 3, 1, 0, 0, { 0 } },          /* 1.0 is not more than 1.0 */
		{ 4, 1, 0, 0, { 0 } },          /* though inode 4 ranks above on a tie */
		{ 5, 1, 1, 1, { 1 } },          /* 1.5 evicts, the lower inode first */
		{ 6, 1, 1, 1, { 2 } },
		{ 3, 1, 0, 0, { 0 } },          /* [1.5 1.5]: 1.0 cannot come back */
	};
	struct score_table table;
	struct dlc_policy *policy = make_importance(&table, 2);

	for (uint32_t ino = 1; ino <= 4; ino++)
		table.values[ino] = 1.0f;
	table.values[5] = 1.5f;
	table.values[6] = 1.5f;
	run_importance_steps(policy, steps, ARRAY_SIZE(steps));
	/* Inode 9 ranks above 5 and 6 on the tie, and still evicts neither. */
	table.values[9] = 1.5f;
	run_importance_steps(policy, &(struct importance_step){ 9, 1, 0, 0, { 0 } }, 1);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_importance_unknown_never_evicts_but_is_evicted)
{
	static const struct importance_step steps[] = {
		{ 1, 1, 1, 0, { 0 } },          /* unknown scores fill the room */
		{ 2, 1, 1, 0, { 0 } },
		{ 3, 1, 0, 0, { 0 } },          /* an unknown miss never evicts */
		{ 4, 1, 1, 1, { 1 } },          /* any known score does: -1000 > unknown */
		{ 3, 1, 0, 0, { 0 } },
		{ 5, 1, 1, 1, { 2 } },          /* -2000 too */
		{ 6, 1, 0, 0, { 0 } },          /* -3000 < -2000 */
		{ 7, 1, 1, 1, { 5 } },          /* 0 > -2000 */
	};
	struct score_table table;
	struct dlc_policy *policy = make_importance(&table, 2);

	table.values[4] = -1000.0f;
	table.values[5] = -2000.0f;
	table.values[6] = -3000.0f;
	table.values[7] = 0.0f;
	run_importance_steps(policy, steps, ARRAY_SIZE(steps));
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_importance_without_scores_is_freeze)
{
	/* No dlc_policy_set_scores at all: the freeze script, decision by decision. */
	enum { SAMPLES = 300, OFFERS = 3000 };
	struct dlc_policy *importance = make_policy(DLC_POLICY_IMPORTANCE, 100, SAMPLES);
	struct dlc_policy *freeze = make_policy(DLC_POLICY_FREEZE, 100, SAMPLES);
	struct dlc_ino_list victims = { 0 };
	uint64_t rng = 7;

	for (unsigned i = 0; i < OFFERS; i++) {
		uint32_t ino = 1 + random_below(&rng, SAMPLES);
		uint64_t bytes = random_below(&rng, 5);

		if (dlc_policy_contains(freeze, ino)) {
			FAST_ASSERT_UINT_EQ(dlc_policy_contains(importance, ino), 1);
			continue;
		}
		FAST_ASSERT_UINT_EQ(dlc_policy_admit(importance, ino, bytes, &victims),
				    dlc_policy_admit(freeze, ino, bytes, &victims));
		FAST_ASSERT_UINT_EQ(victims.count, 0);
		dlc_policy_rescore(importance, ino);    /* changes nothing */
	}
	ck_assert_uint_eq(dlc_policy_used(importance), dlc_policy_used(freeze));
	ck_assert_uint_eq(dlc_policy_entries(importance), dlc_policy_entries(freeze));
	ck_assert_uint_ge(dlc_policy_used(freeze), 96);
	ck_assert_int_eq(dlc_policy_verify(importance), 0);
	dlc_ino_list_free(&victims);
	dlc_policy_free(freeze);
	dlc_policy_free(importance);
}
END_TEST

START_TEST(test_importance_rescore_changes_next_victim)
{
	/* Inodes 1, 2, 3 cached with scores 1, 2, 3; one rescore, then 4 (score
	 * 10) needs one slot. */
	static const struct {
		uint32_t ino;           /* 0: no rescore */
		float score;
		uint32_t victim;
	} cases[] = {
		{ 0, 0, 1 },
		{ 1, 5, 2 },            /* the minimum moves down the heap */
		{ 3, 0, 3 },            /* a leaf moves up to the root */
		{ 2, NAN, 2 },          /* forgotten: below every known score */
		{ 1, 2, 1 },            /* ties with 2: the lower inode goes */
		{ 2, 0.5f, 2 },
		{ 4, -5, 1 },           /* 4 is not cached: a no-op on the heap */
		{ 3, 3, 1 },            /* the same score again: nothing moves */
	};

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		struct score_table table;
		struct dlc_policy *policy = make_importance(&table, 3);
		struct dlc_ino_list victims = { 0 };

		for (uint32_t ino = 1; ino <= 3; ino++) {
			table.values[ino] = (float)ino;
			ck_assert_int_eq(dlc_policy_admit(policy, ino, 1, &victims), 1);
		}
		if (cases[c].ino != 0) {
			table.values[cases[c].ino] = cases[c].score;
			dlc_policy_rescore(policy, cases[c].ino);
			ck_assert_int_eq(dlc_policy_verify(policy), 0);
		}
		table.values[4] = 10;
		ck_assert_int_eq(dlc_policy_admit(policy, 4, 1, &victims), 1);
		ck_assert_msg(victims.count == 1 && victims.items[0] == cases[c].victim,
			      "case %zu: evicted %u, not %u", c,
			      victims.count ? victims.items[0] : 0, cases[c].victim);
		ck_assert_int_eq(dlc_policy_verify(policy), 0);
		dlc_ino_list_free(&victims);
		dlc_policy_free(policy);
	}
}
END_TEST

START_TEST(test_importance_rescore_all)
{
	struct score_table table;
	struct dlc_policy *policy = make_importance(&table, 3);
	struct dlc_ino_list victims = { 0 };
	static const struct importance_step after_reversal[] = {
		{ 5, 1, 1, 1, { 3 } },          /* 3 is now the least important */
	};
	static const struct importance_step after_reset[] = {
		{ 6, 1, 0, 0, { 0 } },          /* a NaN miss cannot evict NaN entries */
		{ 7, 1, 1, 1, { 1 } },          /* a known one evicts them, by inode */
		{ 8, 1, 1, 1, { 2 } },
		{ 9, 1, 1, 1, { 5 } },
		{ 10, 1, 0, 0, { 0 } },         /* [0 0 0]: equal, so no more */
	};

	for (uint32_t ino = 1; ino <= 3; ino++) {
		table.values[ino] = (float)ino;
		ck_assert_int_eq(dlc_policy_admit(policy, ino, 1, &victims), 1);
	}
	/* Reverse the order behind the policy's back, then re-key everything. */
	for (uint32_t ino = 1; ino <= 3; ino++)
		table.values[ino] = (float)(4 - ino);
	table.values[5] = 2.5f;
	dlc_policy_rescore_all(policy);
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	run_importance_steps(policy, after_reversal, ARRAY_SIZE(after_reversal));

	/* A reset: every score unknown. */
	for (size_t i = 0; i < ARRAY_SIZE(table.values); i++)
		table.values[i] = NAN;
	dlc_policy_rescore_all(policy);
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	for (uint32_t ino = 7; ino <= 10; ino++)
		table.values[ino] = 0.0f;
	run_importance_steps(policy, after_reset, ARRAY_SIZE(after_reset));
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_importance_large_file_evicts_nothing)
{
	struct score_table table;
	struct dlc_policy *policy = make_importance(&table, 10);
	struct dlc_ino_list victims = { 0 };
	static const uint32_t lower_two[] = { 1, 2 };

	/* One announced pass: the retried admission of 4 does not start another. */
	dlc_policy_begin_pass(policy, 0);
	table.values[1] = 1;
	table.values[2] = 5;
	table.values[3] = 9;
	table.values[4] = 6;
	ck_assert_int_eq(dlc_policy_admit(policy, 1, 3, &victims), 1);
	ck_assert_int_eq(dlc_policy_admit(policy, 2, 3, &victims), 1);
	ck_assert_int_eq(dlc_policy_admit(policy, 3, 4, &victims), 1);
	/* 7 bytes: 1 and 2 (less important than 6) free only 6; 3 (9) stays. */
	victims.count = 99;
	ck_assert_int_eq(dlc_policy_admit(policy, 4, 7, &victims), 0);
	ck_assert_uint_eq(victims.count, 0);
	for (uint32_t ino = 1; ino <= 3; ino++)
		ck_assert(dlc_policy_contains(policy, ino));
	ck_assert(!dlc_policy_contains(policy, 4));
	ck_assert_uint_eq(dlc_policy_used(policy), 10);
	ck_assert_uint_eq(dlc_policy_entries(policy), 3);
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	/* Larger than the whole cache, whatever the score. */
	table.values[5] = 100;
	ck_assert_int_eq(dlc_policy_admit(policy, 5, 11, &victims), 0);
	ck_assert_int_eq(dlc_policy_admit(policy, 5, UINT64_MAX, &victims), 0);
	ck_assert_uint_eq(victims.count, 0);
	/* The refused attempt left the order intact: 6 bytes evict 1 then 2. */
	ck_assert_int_eq(dlc_policy_admit(policy, 4, 6, &victims), 1);
	assert_victims(&victims, lower_two, 2);
	ck_assert_uint_eq(dlc_policy_used(policy), 10);
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_importance_restore_and_remove)
{
	struct score_table table;
	struct dlc_policy *policy = make_policy(DLC_POLICY_IMPORTANCE, 4, IMPORTANCE_MAX_INO);
	struct dlc_ino_list victims = { 0 };
	static const uint32_t fourth[] = { 4 };
	static const uint32_t thirteenth[] = { 13 };

	for (size_t i = 0; i < ARRAY_SIZE(table.values); i++)
		table.values[i] = 10.0f - (float)i;
	/* Restored at mount before the scores are known (no order yet)... */
	for (uint32_t ino = 1; ino <= 4; ino++)
		ck_assert_int_eq(dlc_policy_restore(policy, ino, 1), 0);
	ck_assert_int_eq(dlc_policy_restore(policy, 5, 1), -ENOSPC);
	ck_assert_int_eq(dlc_policy_restore(policy, 4, 0), -EEXIST);
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	/* ...then keyed by them: 4 (score 6) is the least important. */
	dlc_policy_set_scores(policy, table.values);
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	dlc_policy_remove(policy, 4);
	dlc_policy_remove(policy, 4);
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	ck_assert_int_eq(dlc_policy_restore(policy, 4, 1), 0);
	/* Restored entries are evictable once read in the pass. */
	dlc_policy_begin_pass(policy, 0);
	for (uint32_t ino = 1; ino <= 4; ino++)
		dlc_policy_hit(policy, ino);
	table.values[12] = 100;
	ck_assert_int_eq(dlc_policy_admit(policy, 12, 1, &victims), 1);
	assert_victims(&victims, fourth, 1);
	/* Removing from the middle of the heap keeps it ordered. */
	dlc_policy_remove(policy, 2);
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	ck_assert_int_eq(dlc_policy_admit(policy, 13, 1, &victims), 1);
	ck_assert_uint_eq(victims.count, 0);
	table.values[14] = 100;
	ck_assert_int_eq(dlc_policy_admit(policy, 14, 1, &victims), 1);
	assert_victims(&victims, thirteenth, 1);            /* score -3 */
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

START_TEST(test_scores_are_ignored_by_other_kinds)
{
	static const struct {
		enum dlc_policy_kind kind;
		int admitted;
		size_t victim_count;
	} expected[] = {
		{ DLC_POLICY_FREEZE, 0, 0 },
		{ DLC_POLICY_LRU, 1, 1 },
		{ DLC_POLICY_NONE, 0, 0 },
	};
	float scores[4] = { NAN, 3, 2, 1 };
	struct dlc_policy *policy = make_policy(expected[_i].kind, 2, 3);
	struct dlc_ino_list victims = { 0 };

	dlc_policy_set_scores(policy, scores);
	dlc_policy_admit(policy, 1, 1, &victims);
	dlc_policy_admit(policy, 2, 1, &victims);
	dlc_policy_rescore(policy, 1);
	dlc_policy_rescore_all(policy);
	ck_assert_int_eq(dlc_policy_admit(policy, 3, 1, &victims), expected[_i].admitted);
	ck_assert_uint_eq(victims.count, expected[_i].victim_count);
	if (expected[_i].victim_count)
		ck_assert_uint_eq(victims.items[0], 1);        /* recency, not score */
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

/*
 * A plain shuffle with scores that churn (every read rewrites the sample's
 * score, and a few others move too): whatever the scores do, every entry
 * cached when a pass starts is not evicted before its read, so importance
 * hits at least the cache's size in every epoch after the first, as freeze
 * does.  _i = 0: passes inferred from re-reads; 1: announced (`epoch N`).
 */
START_TEST(test_importance_never_below_freeze_under_shuffle)
{
	enum { SAMPLES = 2000, CAPACITY = 400, EPOCHS = 8 };
	struct dlc_policy *policy = make_policy(DLC_POLICY_IMPORTANCE, CAPACITY, SAMPLES);
	struct dlc_ino_list victims = { 0 };
	static float scores[SAMPLES + 1];
	static uint32_t order[SAMPLES];
	uint64_t rng = 0xabcdef;
	unsigned evictions = 0;

	for (uint32_t ino = 0; ino <= SAMPLES; ino++)
		scores[ino] = (float)random_below(&rng, 1000);
	dlc_policy_set_scores(policy, scores);
	for (uint32_t i = 0; i < SAMPLES; i++)
		order[i] = i + 1;
	for (unsigned epoch = 0; epoch < EPOCHS; epoch++) {
		unsigned hits = 0;

		if (_i == 1)
			dlc_policy_begin_pass(policy, epoch);
		for (uint32_t i = SAMPLES - 1; i > 0; i--) {
			uint32_t j = random_below(&rng, i + 1), t = order[i];

			order[i] = order[j];
			order[j] = t;
		}
		for (uint32_t i = 0; i < SAMPLES; i++) {
			uint32_t ino = order[i];
			uint32_t other = 1 + random_below(&rng, SAMPLES);

			if (dlc_policy_contains(policy, ino)) {
				dlc_policy_hit(policy, ino);
				hits++;
			} else {
				ck_assert_int_ge(dlc_policy_admit(policy, ino, 1, &victims), 0);
				evictions += (unsigned)victims.count;
			}
			/* The loss of the sample just trained on, and one other moving. */
			scores[ino] = (float)random_below(&rng, 1000);
			dlc_policy_rescore(policy, ino);
			scores[other] = (float)random_below(&rng, 1000);
			dlc_policy_rescore(policy, other);
		}
		if (epoch > 0)
			ck_assert_msg(hits >= CAPACITY, "epoch %u: %u hits < %u", epoch, hits,
				      CAPACITY);
		ck_assert_uint_eq(dlc_policy_pass(policy), epoch + (_i == 1 ? 2 : 1));
	}
	/* The scores did move the cache: not freeze in disguise. */
	ck_assert_uint_gt(evictions, 1000);
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

/* A cached entry not yet read in the pass is never a victim; once read, it is. */
START_TEST(test_importance_victim_must_be_read_in_the_pass)
{
	float scores[8] = { NAN, 1, 2, 9, 9, 9, 9, 9 };
	struct dlc_policy *policy = make_policy(DLC_POLICY_IMPORTANCE, 2, 7);
	struct dlc_ino_list victims = { 0 };

	dlc_policy_set_scores(policy, scores);
	dlc_policy_begin_pass(policy, 1);
	ck_assert_int_eq(dlc_policy_admit(policy, 1, 1, &victims), 1);
	ck_assert_int_eq(dlc_policy_admit(policy, 2, 1, &victims), 1);
	/* Same epoch again: no new pass; 1 and 2 were read, 3 (9) evicts 1. */
	dlc_policy_begin_pass(policy, 1);
	ck_assert_int_eq(dlc_policy_admit(policy, 3, 1, &victims), 1);
	ck_assert_uint_eq(victims.items[0], 1);
	/* Epoch 2: 2 and 3 not yet read, so 4 (9) bypasses though 2 ranks below. */
	dlc_policy_begin_pass(policy, 2);
	ck_assert_int_eq(dlc_policy_admit(policy, 4, 1, &victims), 0);
	ck_assert_uint_eq(victims.count, 0);
	/* 2 is read (a hit): now it may go, the less important first. */
	dlc_policy_hit(policy, 2);
	ck_assert_int_eq(dlc_policy_admit(policy, 5, 1, &victims), 1);
	ck_assert_uint_eq(victims.count, 1);
	ck_assert_uint_eq(victims.items[0], 2);
	/* 5 (read, 9) vs 6 (9): equal, refused; 3 unread stays whatever it scores. */
	scores[3] = 0;
	dlc_policy_rescore(policy, 3);
	ck_assert_int_eq(dlc_policy_admit(policy, 6, 1, &victims), 0);
	ck_assert(dlc_policy_contains(policy, 3));
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

/* Without announcements, a second read in a pass starts the next one. */
START_TEST(test_importance_pass_inferred_from_rereads)
{
	float scores[5] = { NAN, 1, 2, 3, 4 };
	struct dlc_policy *policy = make_policy(DLC_POLICY_IMPORTANCE, 2, 4);
	struct dlc_ino_list victims = { 0 };

	dlc_policy_set_scores(policy, scores);
	ck_assert_uint_eq(dlc_policy_pass(policy), 1);
	ck_assert_int_eq(dlc_policy_admit(policy, 1, 1, &victims), 1);
	ck_assert_int_eq(dlc_policy_admit(policy, 2, 1, &victims), 1);
	ck_assert_uint_eq(dlc_policy_pass(policy), 1);
	ck_assert_int_eq(dlc_policy_admit(policy, 3, 1, &victims), 1);    /* evicts 1 */
	dlc_policy_hit(policy, 2);                                         /* re-read */
	ck_assert_uint_eq(dlc_policy_pass(policy), 2);
	/* In pass 2 only 2 was read: 4 evicts 2; 3 is not yet read in it. */
	ck_assert_int_eq(dlc_policy_admit(policy, 4, 1, &victims), 1);
	ck_assert_uint_eq(victims.items[0], 2);
	/* 1 (1) is less important than every cached entry: refused, no pass change. */
	ck_assert_int_eq(dlc_policy_admit(policy, 1, 1, &victims), 0);
	ck_assert_uint_eq(dlc_policy_pass(policy), 2);
	ck_assert_int_eq(dlc_policy_verify(policy), 0);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

/* --- the reference model ----------------------------------------------- */

#define MODEL_MAX_INO 64
#define MODEL_CAPACITY 1000

/*
 * An obviously correct cache: order[0] is the most recent entry; importance
 * ignores the order and scans for the least important entry instead.
 */
struct model {
	enum dlc_policy_kind kind;
	uint64_t capacity;
	uint64_t used;
	bool cached[MODEL_MAX_INO + 2];
	uint64_t bytes[MODEL_MAX_INO + 2];
	uint32_t order[MODEL_MAX_INO + 2];
	size_t count;
	const float *scores;    /* importance: shared with the policy */
	uint32_t read_pass[MODEL_MAX_INO + 2];  /* importance: pass of the last read */
	uint32_t pass;          /* importance: inferred, a re-read starts the next */
	unsigned new_passes;    /* importance: passes started by a re-read */
	bool announced;         /* importance: passes announced, never inferred */
	unsigned partial_refusals;      /* importance: lower minima, but too few */
};

static void model_forget(struct model *m, uint32_t ino)
{
	size_t i = 0;

	while (m->order[i] != ino)
		i++;
	memmove(&m->order[i], &m->order[i + 1], (m->count - i - 1) * sizeof(m->order[0]));
	m->count--;
	m->cached[ino] = false;
	m->used -= m->bytes[ino];
}

static void model_record(struct model *m, uint32_t ino, uint64_t bytes)
{
	memmove(&m->order[1], &m->order[0], m->count * sizeof(m->order[0]));
	m->order[0] = ino;
	m->count++;
	m->cached[ino] = true;
	m->bytes[ino] = bytes;
	m->used += bytes;
}

/* importance: a read of ino; a second read in one pass starts the next. */
static void model_read(struct model *m, uint32_t ino)
{
	if (m->kind != DLC_POLICY_IMPORTANCE)
		return;
	if (m->read_pass[ino] == m->pass && !m->announced) {
		m->pass++;
		m->new_passes++;
	}
	m->read_pass[ino] = m->pass;
}

static void model_hit(struct model *m, uint32_t ino)
{
	uint64_t bytes = m->bytes[ino];

	if (m->cached[ino])
		model_read(m, ino);

	if (!m->cached[ino] || m->kind != DLC_POLICY_LRU)
		return;
	model_forget(m, ino);
	model_record(m, ino, bytes);
}

/* Importance rank, spelled out: read in this pass lowest, then unknown,
 * then score, then inode. */
static bool model_ranks_below(const struct model *m, uint32_t a, uint32_t b)
{
	float score_a = m->scores[a], score_b = m->scores[b];
	bool read_a = m->read_pass[a] == m->pass, read_b = m->read_pass[b] == m->pass;

	if (read_a != read_b)
		return read_a;

	if (isnan(score_a) && isnan(score_b))
		return a < b;
	if (isnan(score_a))
		return true;
	if (isnan(score_b))
		return false;
	if (score_a < score_b)
		return true;
	if (score_a > score_b)
		return false;
	return a < b;
}

/* The least important cached inode not yet taken, 0 when none is left. */
static uint32_t model_least_important(const struct model *m, const bool *taken)
{
	uint32_t best = 0;

	for (uint32_t ino = 1; ino <= MODEL_MAX_INO + 1; ino++) {
		if (m->cached[ino] && !taken[ino] && (best == 0 || model_ranks_below(m, ino, best)))
			best = ino;
	}
	return best;
}

static int model_admit_importance(struct model *m, uint32_t ino, uint64_t bytes, uint32_t *out,
				  size_t *out_count)
{
	bool taken[MODEL_MAX_INO + 2] = { false };
	float score = m->scores[ino];
	uint64_t freed = 0;

	model_read(m, ino);
	if (bytes > m->capacity)
		return 0;
	if (m->used + bytes <= m->capacity) {
		model_record(m, ino, bytes);
		return 1;
	}
	if (isnan(score))
		return 0;
	while (m->used - freed + bytes > m->capacity) {
		uint32_t victim = model_least_important(m, taken);

		if (victim == 0 || m->read_pass[victim] != m->pass ||
		    !(isnan(m->scores[victim]) || m->scores[victim] < score)) {
			m->partial_refusals += *out_count > 0;
			*out_count = 0;
			return 0;
		}
		taken[victim] = true;
		freed += m->bytes[victim];
		out[(*out_count)++] = victim;
	}
	for (size_t v = 0; v < *out_count; v++)
		model_forget(m, out[v]);
	model_record(m, ino, bytes);
	return 1;
}

/* Returns whether ino was admitted; victims go to out, coldest first. */
static int model_admit(struct model *m, uint32_t ino, uint64_t bytes, uint32_t *out,
		       size_t *out_count)
{
	*out_count = 0;
	if (m->kind == DLC_POLICY_NONE)
		return 0;
	if (m->kind == DLC_POLICY_IMPORTANCE)
		return model_admit_importance(m, ino, bytes, out, out_count);
	if (m->kind == DLC_POLICY_FREEZE) {
		if (m->used + bytes > m->capacity)
			return 0;
		model_record(m, ino, bytes);
		return 1;
	}
	if (bytes > m->capacity)
		return 0;
	while (m->used + bytes > m->capacity) {
		uint32_t victim = m->order[m->count - 1];

		out[(*out_count)++] = victim;
		model_forget(m, victim);
	}
	model_record(m, ino, bytes);
	return 1;
}

static int model_restore(struct model *m, uint32_t ino, uint64_t bytes)
{
	if (m->kind == DLC_POLICY_NONE)
		return -ENOSPC;
	if (m->cached[ino])
		return -EEXIST;
	if (m->used + bytes > m->capacity)
		return -ENOSPC;
	model_record(m, ino, bytes);
	return 0;
}

static uint64_t random_size(uint64_t *rng)
{
	uint32_t pick = random_below(rng, 100);

	if (pick < 10)
		return 0;
	if (pick < 12)
		return MODEL_CAPACITY;                  /* empties an lru cache */
	if (pick < 14)
		return MODEL_CAPACITY + 1 + random_below(rng, 5);   /* never fits */
	return 1 + random_below(rng, MODEL_CAPACITY / 4);
}

/* Few distinct values, so that ties are common; one in six unknown. */
static float random_score(uint64_t *rng)
{
	uint32_t pick = random_below(rng, 12);

	return pick < 2 ? NAN : (float)pick - 4.0f;
}

static void assert_matches_model(const struct dlc_policy *policy, const struct model *m)
{
	uint64_t sum = 0;

	FAST_ASSERT_UINT_EQ(dlc_policy_used(policy), m->used);
	FAST_ASSERT_UINT_EQ(dlc_policy_entries(policy), m->count);
	if (dlc_policy_used(policy) > m->capacity)
		ck_assert_uint_le(dlc_policy_used(policy), m->capacity);
	for (uint32_t ino = 1; ino <= MODEL_MAX_INO + 1; ino++) {
		FAST_ASSERT_UINT_EQ(dlc_policy_contains(policy, ino), m->cached[ino]);
		if (m->cached[ino])
			sum += m->bytes[ino];
	}
	FAST_ASSERT_UINT_EQ(sum, m->used);
	/* The lru list or the heap, with its positions, agrees with the charges. */
	if (dlc_policy_verify(policy) != 0)
		ck_assert_int_eq(dlc_policy_verify(policy), 0);
}

static void check_victims_match(const struct dlc_ino_list *victims, const uint32_t *expected,
				size_t count)
{
	FAST_ASSERT_UINT_EQ(victims->count, count);
	for (size_t v = 0; v < count; v++)
		FAST_ASSERT_UINT_EQ(victims->items[v], expected[v]);
}

START_TEST(test_random_operations_match_model)
{
	static const enum dlc_policy_kind kinds[] = {
		DLC_POLICY_LRU, DLC_POLICY_FREEZE, DLC_POLICY_NONE, DLC_POLICY_IMPORTANCE,
	};
	enum { OPERATIONS = 100000 };
	/* Inode MODEL_MAX_INO + 1 is kept out of the random operations. */
	struct dlc_policy *policy = make_policy(kinds[_i], MODEL_CAPACITY, MODEL_MAX_INO + 1);
	struct dlc_ino_list victims = { 0 };
	struct model *m = calloc(1, sizeof(*m));
	float scores[MODEL_MAX_INO + 2];
	uint32_t expected[MODEL_MAX_INO + 2];
	size_t expected_count;
	uint64_t rng = 0x5eed0000 + (uint64_t)_i;
	unsigned admitted = 0, evicted = 0, rescored = 0;

	ck_assert_ptr_nonnull(m);
	m->kind = kinds[_i];
	m->capacity = MODEL_CAPACITY;
	m->scores = scores;
	m->pass = 1;
	for (uint32_t ino = 0; ino <= MODEL_MAX_INO + 1; ino++)
		scores[ino] = random_score(&rng);
	dlc_policy_set_scores(policy, scores);
	for (unsigned op = 0; op < OPERATIONS; op++) {
		uint32_t ino = 1 + random_below(&rng, MODEL_MAX_INO);
		uint32_t pick = random_below(&rng, 1000);

		if (pick < 500) {
			/* What the daemon does on open: a hit, or a miss and an offer. */
			if (dlc_policy_contains(policy, ino)) {
				dlc_policy_hit(policy, ino);
				model_hit(m, ino);
			} else {
				uint64_t bytes = random_size(&rng);
				int want = model_admit(m, ino, bytes, expected, &expected_count);

				FAST_ASSERT_UINT_EQ(dlc_policy_admit(policy, ino, bytes, &victims),
						    want);
				check_victims_match(&victims, expected, expected_count);
				admitted += (unsigned)want;
				evicted += (unsigned)expected_count;
			}
		} else if (pick < 650) {
			dlc_policy_hit(policy, ino);      /* cached or not */
			model_hit(m, ino);
		} else if (pick < 830) {
			dlc_policy_remove(policy, ino);   /* cached or not */
			if (m->cached[ino])
				model_forget(m, ino);
		} else if (pick < 920) {
			uint64_t bytes = random_size(&rng);

			int want = model_restore(m, ino, bytes);
			int rc = dlc_policy_restore(policy, ino, bytes);

			if (rc != want)
				ck_assert_int_eq(rc, want);
		} else if (pick < 995) {
			/* A new loss for one sample, cached or not. */
			scores[ino] = random_score(&rng);
			dlc_policy_rescore(policy, ino);
			rescored += m->cached[ino];
		} else {
			/* A reset (every score unknown) or a new epoch of scores. */
			bool reset = random_below(&rng, 2) == 0;

			for (uint32_t i = 1; i <= MODEL_MAX_INO + 1; i++)
				scores[i] = reset ? NAN : random_score(&rng);
			dlc_policy_rescore_all(policy);
		}
		assert_matches_model(policy, m);
	}
	if (kinds[_i] != DLC_POLICY_NONE)
		ck_assert_uint_gt(admitted, 1000);
	if (kinds[_i] == DLC_POLICY_LRU || kinds[_i] == DLC_POLICY_IMPORTANCE)
		ck_assert_uint_gt(evicted, 1000);
	if (kinds[_i] == DLC_POLICY_IMPORTANCE) {
		/* The random walk did reach the cases that matter. */
		ck_assert_uint_gt(m->partial_refusals, 100);
		ck_assert_uint_gt(rescored, 1000);
		ck_assert_uint_gt(m->new_passes, 100);
	}

	/* Drain: an entry as large as the cache shows the whole remaining order. */
	if (kinds[_i] == DLC_POLICY_LRU || kinds[_i] == DLC_POLICY_IMPORTANCE) {
		int want;

		if (kinds[_i] == DLC_POLICY_IMPORTANCE) {
			/* An announced pass in which every entry was read: all evictable. */
			dlc_policy_begin_pass(policy, 7);
			m->announced = true;
			m->pass++;
			for (uint32_t ino = 1; ino <= MODEL_MAX_INO; ino++) {
				dlc_policy_hit(policy, ino);
				model_hit(m, ino);
			}
		}
		scores[MODEL_MAX_INO + 1] = 1000.0f;
		dlc_policy_rescore(policy, MODEL_MAX_INO + 1);
		want = model_admit(m, MODEL_MAX_INO + 1, MODEL_CAPACITY, expected, &expected_count);
		ck_assert_int_eq(want, 1);
		ck_assert_int_eq(dlc_policy_admit(policy, MODEL_MAX_INO + 1, MODEL_CAPACITY,
						  &victims), want);
		check_victims_match(&victims, expected, expected_count);
		assert_matches_model(policy, m);
	}
	free(m);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

/* --- workloads --------------------------------------------------------- */

/*
 * Per-epoch shuffling over N samples with room for half of them: after the
 * first epoch, freeze hits exactly the cached half; lru thrashes towards
 * c + (1-c)ln(1-c) = 0.153 (DESIGN.md).
 */
START_TEST(test_shuffled_epochs_favour_freeze)
{
	enum { SAMPLES = 2000, EPOCHS = 6 };
	static const struct {
		enum dlc_policy_kind kind;
		double min_ratio;
		double max_ratio;
	} cases[] = {
		{ DLC_POLICY_FREEZE, 0.5, 0.5 },
		{ DLC_POLICY_LRU, 0.10, 0.21 },
		{ DLC_POLICY_NONE, 0.0, 0.0 },
		{ DLC_POLICY_IMPORTANCE, 0.5, 0.5 },    /* no scores: freeze */
	};
	struct dlc_policy *policy = make_policy(cases[_i].kind, SAMPLES / 2, SAMPLES);
	struct dlc_ino_list victims = { 0 };
	uint32_t order[SAMPLES];
	uint64_t rng = 42;
	unsigned hits = 0, lookups = 0;
	double ratio;

	for (uint32_t i = 0; i < SAMPLES; i++)
		order[i] = i + 1;
	for (int epoch = 0; epoch < EPOCHS; epoch++) {
		for (uint32_t i = SAMPLES - 1; i > 0; i--) {
			uint32_t j = random_below(&rng, i + 1);
			uint32_t t = order[i];

			order[i] = order[j];
			order[j] = t;
		}
		for (uint32_t i = 0; i < SAMPLES; i++) {
			bool hit = dlc_policy_contains(policy, order[i]);

			if (hit)
				dlc_policy_hit(policy, order[i]);
			else if (dlc_policy_admit(policy, order[i], 1, &victims) < 0)
				ck_abort_msg("admit failed");
			if (epoch > 0) {
				hits += hit;
				lookups++;
			}
		}
	}
	ratio = (double)hits / lookups;
	ck_assert_double_ge(ratio, cases[_i].min_ratio);
	ck_assert_double_le(ratio, cases[_i].max_ratio);
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
}
END_TEST

static Suite *policy_suite(void)
{
	Suite *s = suite_create("policy");
	TCase *tc;

	tc = tcase_create("names");
	tcase_add_test(tc, test_parse_and_name_round_trip);
	tcase_add_test(tc, test_parse_rejects_unknown_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("freeze");
	tcase_add_test(tc, test_freeze_fills_then_never_evicts);
	tcase_add_test(tc, test_freeze_restore_respects_capacity);
	suite_add_tcase(s, tc);

	tc = tcase_create("lru");
	tcase_add_test(tc, test_reference_string);
	tcase_add_test(tc, test_lru_hit_changes_order);
	tcase_add_test(tc, test_lru_evicts_as_many_as_needed);
	tcase_add_test(tc, test_lru_rejects_entry_larger_than_capacity);
	tcase_add_test(tc, test_lru_restore_order_and_capacity);
	tcase_add_test(tc, test_lru_victim_list_grows_and_is_cleared);
	tcase_add_test(tc, test_lru_evicts_zero_byte_files_in_order);
	suite_add_tcase(s, tc);

	tc = tcase_create("none");
	tcase_add_test(tc, test_none_admits_nothing);
	suite_add_tcase(s, tc);

	tc = tcase_create("importance");
	tcase_add_test(tc, test_importance_admits_by_score);
	tcase_add_test(tc, test_importance_equal_score_never_evicts);
	tcase_add_test(tc, test_importance_unknown_never_evicts_but_is_evicted);
	tcase_add_test(tc, test_importance_without_scores_is_freeze);
	tcase_add_test(tc, test_importance_rescore_changes_next_victim);
	tcase_add_test(tc, test_importance_rescore_all);
	tcase_add_test(tc, test_importance_large_file_evicts_nothing);
	tcase_add_test(tc, test_importance_restore_and_remove);
	tcase_add_loop_test(tc, test_importance_never_below_freeze_under_shuffle, 0, 2);
	tcase_add_test(tc, test_importance_victim_must_be_read_in_the_pass);
	tcase_add_test(tc, test_importance_pass_inferred_from_rereads);
	tcase_add_loop_test(tc, test_scores_are_ignored_by_other_kinds, 0, 3);
	suite_add_tcase(s, tc);

	tc = tcase_create("accounting");
	tcase_add_loop_test(tc, test_remove_frees_bytes, 0, 3);
	tcase_add_loop_test(tc, test_zero_byte_files_are_cached, 0, 3);
	tcase_add_loop_test(tc, test_inode_out_of_range, 0, 4);
	suite_add_tcase(s, tc);

	tc = tcase_create("model");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_random_operations_match_model, 0, 4);
	suite_add_tcase(s, tc);

	tc = tcase_create("workload");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_shuffled_epochs_favour_freeze, 0, 4);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(policy_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
