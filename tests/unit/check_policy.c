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
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/policy.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * For loops that check millions of times: check records every passing
 * ck_assert for its report (a write per call in fork mode), so compare first
 * and report only a failure.
 */
#define FAST_ASSERT_UINT_EQ(x, y)                               \
	do {                                                    \
		uintmax_t fast_x = (x), fast_y = (y);           \
		if (fast_x != fast_y)                           \
			ck_abort_msg("%s == %s failed: %ju != %ju", \
				     #x, #y, fast_x, fast_y);   \
	} while (0)

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

/* splitmix64: a seeded generator, so every run replays the same sequence. */
static uint64_t next_random(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint32_t random_below(uint64_t *state, uint32_t bound)
{
	return (uint32_t)(next_random(state) % bound);
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
		"", "LRU", "Freeze", "lru ", " lru", "fifo", "importance", "freezer", "no",
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
	static const enum dlc_policy_kind kinds[] = { DLC_POLICY_FREEZE, DLC_POLICY_LRU };
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
	static const enum dlc_policy_kind kinds[] = { DLC_POLICY_FREEZE, DLC_POLICY_LRU };
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
		DLC_POLICY_FREEZE, DLC_POLICY_LRU, DLC_POLICY_NONE,
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

/* --- the reference model ----------------------------------------------- */

#define MODEL_MAX_INO 64
#define MODEL_CAPACITY 1000

/* An obviously correct cache: order[0] is the most recent entry. */
struct model {
	enum dlc_policy_kind kind;
	uint64_t capacity;
	uint64_t used;
	bool cached[MODEL_MAX_INO + 2];
	uint64_t bytes[MODEL_MAX_INO + 2];
	uint32_t order[MODEL_MAX_INO + 2];
	size_t count;
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

static void model_hit(struct model *m, uint32_t ino)
{
	uint64_t bytes = m->bytes[ino];

	if (!m->cached[ino] || m->kind != DLC_POLICY_LRU)
		return;
	model_forget(m, ino);
	model_record(m, ino, bytes);
}

/* Returns whether ino was admitted; victims go to out, coldest first. */
static int model_admit(struct model *m, uint32_t ino, uint64_t bytes, uint32_t *out,
		       size_t *out_count)
{
	*out_count = 0;
	if (m->kind == DLC_POLICY_NONE)
		return 0;
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
		DLC_POLICY_LRU, DLC_POLICY_FREEZE, DLC_POLICY_NONE,
	};
	enum { OPERATIONS = 100000 };
	/* Inode MODEL_MAX_INO + 1 is kept out of the random operations. */
	struct dlc_policy *policy = make_policy(kinds[_i], MODEL_CAPACITY, MODEL_MAX_INO + 1);
	struct dlc_ino_list victims = { 0 };
	struct model *m = calloc(1, sizeof(*m));
	uint32_t expected[MODEL_MAX_INO + 2];
	size_t expected_count;
	uint64_t rng = 0x5eed0000 + (uint64_t)_i;
	unsigned admitted = 0, evicted = 0;

	ck_assert_ptr_nonnull(m);
	m->kind = kinds[_i];
	m->capacity = MODEL_CAPACITY;
	for (unsigned op = 0; op < OPERATIONS; op++) {
		uint32_t ino = 1 + random_below(&rng, MODEL_MAX_INO);
		uint32_t pick = random_below(&rng, 100);

		if (pick < 55) {
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
		} else if (pick < 70) {
			dlc_policy_hit(policy, ino);      /* cached or not */
			model_hit(m, ino);
		} else if (pick < 90) {
			dlc_policy_remove(policy, ino);   /* cached or not */
			if (m->cached[ino])
				model_forget(m, ino);
		} else {
			uint64_t bytes = random_size(&rng);

			int want = model_restore(m, ino, bytes);
			int rc = dlc_policy_restore(policy, ino, bytes);

			if (rc != want)
				ck_assert_int_eq(rc, want);
		}
		assert_matches_model(policy, m);
	}
	if (kinds[_i] != DLC_POLICY_NONE)
		ck_assert_uint_gt(admitted, 1000);
	if (kinds[_i] == DLC_POLICY_LRU)
		ck_assert_uint_gt(evicted, 1000);

	/* Drain: an entry as large as the cache shows the whole remaining order. */
	if (kinds[_i] == DLC_POLICY_LRU) {
		int want = model_admit(m, MODEL_MAX_INO + 1, MODEL_CAPACITY, expected,
				       &expected_count);

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

	tc = tcase_create("accounting");
	tcase_add_loop_test(tc, test_remove_frees_bytes, 0, 2);
	tcase_add_loop_test(tc, test_zero_byte_files_are_cached, 0, 2);
	tcase_add_loop_test(tc, test_inode_out_of_range, 0, 3);
	suite_add_tcase(s, tc);

	tc = tcase_create("model");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_random_operations_match_model, 0, 3);
	suite_add_tcase(s, tc);

	tc = tcase_create("workload");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_shuffled_epochs_favour_freeze, 0, 3);
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
