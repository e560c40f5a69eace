/*
 * hash.h - XXH3-64 of file bytes, the check of every cached copy.
 *
 * Every byte served from the cache is hashed once per mount (a block or a
 * whole file on its first read), and every byte admitted is hashed as it is
 * written, so on a cached pass of a large shard the hash was a third of the
 * daemon's time.  Debian's libxxhash is built for any x86-64 (SSE2, 12 GB/s
 * here); where the processor has AVX2 the same function compiled for it runs
 * at 27 GB/s (hash_avx2.c), chosen at run time.  Same values either way:
 * XXH3's result does not depend on the instructions that compute it.
 */
#ifndef DLCACHE_HASH_H
#define DLCACHE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* XXH3_64bits(data, len), on the fastest instructions this machine has. */
uint64_t dlc_xxh3(const void *data, size_t len);

/* Whether dlc_xxh3 uses the AVX2 build (for .stats and tests). */
int dlc_xxh3_uses_avx2(void);

#endif
