/*
 * cache_private.h - the cache's state, shared by cache.c (whole files) and
 * cache_blocks.c (blocks of files larger than cache_max_file), and checked
 * by cache_verify.c.  Nothing outside src/cache/ includes it (but the unit
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

/*
 * cache_blocks.c's side of what cache.c does, all called with cache->lock
 * held unless said otherwise.
 */

/* Whether ino is cached as blocks (admitted, or evicted and being deleted). */
bool dlc_cache_blocks_has(struct dlc_cache *cache, uint32_t ino);

/*
 * ino, cached as blocks, was chosen as a victim (the policy no longer
 * charges it): its ready blocks are counted in pending_bytes for the
 * evictor to delete, its blocks being written for their writers.  Returns
 * the block file the evictor must pass to dlc_cache_blocks_delete_evicted,
 * or NULL when it has nothing to delete.
 */
struct block_file *dlc_cache_blocks_evict(struct dlc_cache *cache, uint32_t ino);

/* Called WITHOUT the lock: deletes the blocks dlc_cache_blocks_evict left
 * to the evictor, then settles pending_bytes. */
void dlc_cache_blocks_delete_evicted(struct dlc_cache *cache, struct block_file *file);

/* Deletes every block of ino now, under the lock (restore, out of memory). */
void dlc_cache_blocks_drop(struct dlc_cache *cache, uint32_t ino);

/*
 * Restore at mount: entry is a block row (its path has the block suffix);
 * returns 1 to keep it, 0 to drop it, -ENOMEM.  *new_ino is set to the
 * inode when this row is the first of its file (the caller then restores
 * the file in the policy), else 0.
 */
int dlc_cache_blocks_collect(struct dlc_cache *cache, const struct dlc_store_entry *entry,
			     uint32_t *new_ino);

/* Whether path names a block row. */
bool dlc_cache_blocks_is_block_path(const char *path);

/* Frees the block table (close). */
void dlc_cache_blocks_free(struct dlc_cache *cache);

/*
 * Carries out the evictions an admission left in cache->victims: called and
 * returns with the lock held, drops it while files are deleted.
 */
void dlc_cache_carry_out_victims(struct dlc_cache *cache);

/* Whether offers may be admitted now (a paused admission resumes after its
 * 5 s); lock held. */
bool dlc_cache_admitting(struct dlc_cache *cache);

/* Pauses admission after a failed write (see offer in cache.c); rc < 0. */
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
