/*
 * hash_avx2.c - XXH3-64 compiled for AVX2 (this file alone is built with
 * -mavx2; hash.c calls it only where the processor has AVX2).  xxhash.h's
 * inline build picks its AVX2 loop from the compiler's flags; its
 * functions are static here, apart from libxxhash's.
 */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <stdint.h>

uint64_t dlc_xxh3_avx2(const void *data, size_t len);

uint64_t dlc_xxh3_avx2(const void *data, size_t len)
{
	return XXH3_64bits(data, len);
}
