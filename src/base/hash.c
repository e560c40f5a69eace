/*
 * hash.c - picks the XXH3 implementation for this processor (hash.h).
 */
#include <xxhash.h>

#include "dlcache/hash.h"

#if DLC_HAVE_HASH_AVX2
uint64_t dlc_xxh3_avx2(const void *data, size_t len);   /* hash_avx2.c */
#endif

/* Below this the SIMD width does not pay for itself: the call stays in
 * the library, whose short-input paths are the same code. */
#define AVX2_MIN_LEN 256

int dlc_xxh3_uses_avx2(void)
{
#if DLC_HAVE_HASH_AVX2
	return __builtin_cpu_supports("avx2") ? 1 : 0;
#else
	return 0;
#endif
}

uint64_t dlc_xxh3(const void *data, size_t len)
{
#if DLC_HAVE_HASH_AVX2
	if (len >= AVX2_MIN_LEN && __builtin_cpu_supports("avx2"))
		return dlc_xxh3_avx2(data, len);
#endif
	return XXH3_64bits(data, len);
}
