/*
 * unit_random.h - shared by the unit suites that run long random
 * sequences: a seeded generator, so every run replays the same sequence,
 * and an assertion cheap enough for millions of checks.
 */
#ifndef DLCACHE_UNIT_RANDOM_H
#define DLCACHE_UNIT_RANDOM_H

#include <check.h>
#include <stdint.h>

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

/* splitmix64. */
static inline uint64_t next_random(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline uint32_t random_below(uint64_t *state, uint32_t bound)
{
	return (uint32_t)(next_random(state) % bound);
}

#endif
