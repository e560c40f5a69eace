/*
 * cache_private.h - the cache's state, shared by cache.c (whole files, the
 * evictions), cache_blocks.c (blocks of files larger than cache_max_file,
 * behind cache_blocks.h) and cache_admission.c (whether admission is on),
 * and checked by cache_verify.c.  Nothing outside src/cache/ includes it (but the unit
 * tests, white box).  See cache.c for the INVARIANTS; the block
 * entries' own are in cache_blocks.c.
 */
#ifndef DLCACHE_CACHE_PRIVATE_H
#define DLCACHE_CACHE_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcache/cache.h"

/* A file cached as blocks: cache_blocks.c's, guarded by cache->lock but
 * `io`; here for cache_verify.c. */
enum block_state {
	BLOCK_ABSENT = 0,
	BLOCK_WRITING,
	BLOCK_READY,
	BLOCK_DELETING,
};

struct block_file {
	uint32_t ino;
	uint32_t nblocks;
	uint64_t block_size;
	uint64_t file_size;
	bool evicted;                   /* not charged any more: blocks left are deleted */
	bool unlinked;                  /* out of the table: freed at the last unpin */
	uint32_t outstanding;           /* evicted: blocks still to delete */
	uint32_t pins;                  /* checks holding it without the lock */
	uint8_t *state;                 /* enum block_state per block */
	uint64_t *hashes;               /* per block, valid when READY */
	uint8_t *checked;               /* per block: proven at `stamp` in this mount */
	uint64_t stamp;                 /* the data file as this mount last knew it, 0 = never */
	uint32_t *generations;          /* per block, set when it becomes READY */
	pthread_rwlock_t io;            /* writes (write lock) against checks (read lock) */
	struct block_file *next;        /* chain of the table */
};

/* Chains of the block table (a power of two). */
#define DLC_CACHE_BLOCK_BUCKETS 1024

/* The chain of the block table that holds ino. */
static inline size_t dlc_cache_block_bucket(uint32_t ino)
{
	return (ino * 2654435761u) & (DLC_CACHE_BLOCK_BUCKETS - 1);
}

struct dlc_cache {
	pthread_mutex_t lock;
	pthread_mutex_t save_lock;      /* one save of the scores at a time; outside lock */
	struct dlc_store *store;
	const struct dlc_snapshot *snapshot;
	struct dlc_stats *stats;
	struct dlc_policy *policy;      /* guarded by lock */
	struct dlc_scores scores;       /* guarded by lock (writes); the policy reads it */
	char *scores_file;              /* NULL: scores are not saved */
	uint64_t *hashes;               /* guarded by lock; per inode, valid when ready */
	uint32_t *generations;          /* guarded by lock; per inode, bumped when it becomes ready */
	uint32_t next_generation;       /* guarded by lock */
	uint64_t *stamps;               /* guarded by lock; per inode: the cache file as last
					 * checked in this mount, 0 = not checked yet */
	uint8_t *ready;                 /* guarded by lock; bitmap by inode */
	bool admission;                 /* guarded by lock */
	int64_t retry_at_ns;            /* guarded by lock: a full disk is tried again then (0: never) */
	bool full_logged;               /* guarded by lock */
	bool plan_logged;               /* guarded by lock: an announcement was not planned */
	struct dlc_ino_list victims;    /* guarded by lock; scratch for admissions */
	uint8_t *deleting;              /* guarded by lock; bitmap by inode: evicted, its
					 * file not deleted yet (by its evictor, or by its
					 * writer when it was evicted while written) */
	uint64_t pending_bytes;         /* guarded by lock: footprint of those files */
	pthread_cond_t deleted;         /* pending_bytes went down */
	atomic_bool transient_logged;   /* a passing read error was logged */
	dlc_cache_read_hook read_hook;  /* tests only; set before serving */
	dlc_cache_write_hook write_hook;
	void *hook_arg;
	dlc_cache_drop_hook drop_hook;  /* guarded by lock: an entry stops being ready */
	void *drop_arg;
	uint64_t block_size;            /* blocks of large files (0: none); fixed before serving */
	struct block_file **block_table; /* guarded by lock: DLC_CACHE_BLOCK_BUCKETS chains by inode */
	uint64_t lock_releases;         /* guarded by lock: each dlc_cache_unlock (tests count
					 * the takes of a hit, dlc_cache_lock_releases) */
};

static inline bool is_deleting(const struct dlc_cache *cache, uint32_t ino)
{
	return cache->deleting[ino >> 3] & (1u << (ino & 7));
}

static inline void set_deleting(struct dlc_cache *cache, uint32_t ino, bool deleting)
{
	if (deleting)
		cache->deleting[ino >> 3] |= (uint8_t)(1u << (ino & 7));
	else
		cache->deleting[ino >> 3] &= (uint8_t)~(1u << (ino & 7));
}

static inline bool is_ready(const struct dlc_cache *cache, uint32_t ino)
{
	return cache->ready[ino >> 3] & (1u << (ino & 7));
}

static inline void set_ready(struct dlc_cache *cache, uint32_t ino, bool ready)
{
	cache->stamps[ino] = 0;
	if (ready) {
		cache->generations[ino] = ++cache->next_generation;
		cache->ready[ino >> 3] |= (uint8_t)(1u << (ino & 7));
	} else {
		cache->ready[ino >> 3] &= (uint8_t)~(1u << (ino & 7));
		if (cache->drop_hook)
			cache->drop_hook(cache->drop_arg, ino);
	}
}

/* cache_admission.c: what a failed write leaves, asked by every admission. */

/* Whether offers may be admitted now (a paused admission resumes after its
 * 5 s); lock held. */
bool dlc_cache_admitting(struct dlc_cache *cache);

/* Pauses or stops admission after a failed write; rc < 0. */
void dlc_cache_write_failed(struct dlc_cache *cache, const char *path, int rc);

/*
 * cache_verify.c: the INVARIANTS of cache.c and cache_blocks.c, lock held;
 * 0 or -EUCLEAN.  Every release of cache->lock goes through
 * dlc_cache_unlock, every wait for deletions through dlc_cache_wait_deleted,
 * which run it first in verify builds (verify.h).
 */
int dlc_cache_verify_locked(const struct dlc_cache *cache);
void dlc_cache_unlock(struct dlc_cache *cache);
void dlc_cache_wait_deleted(struct dlc_cache *cache);

#endif
