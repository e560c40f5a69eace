/*
 * cache_blocks.h - the interface of cache_blocks.c (files larger than
 * cache_max_file, cached as blocks) to cache.c, which calls down into it
 * only: cache_blocks.c never calls cache.c (tests/layers.sh holds that).
 * cache.c owns the victims of every admission, blocks' included, so a
 * block offer is cache.c's (dlc_cache_block_offer): cache_blocks.c admits
 * the file, cache.c carries out the victims, cache_blocks.c writes the
 * block.  The readers' side (dlc_cache_block_read, ...) is in cache.h.
 */
#ifndef DLCACHE_CACHE_BLOCKS_H
#define DLCACHE_CACHE_BLOCKS_H

#include <stdbool.h>
#include <stdint.h>

#include "cache_private.h"

/* All called with cache->lock held unless said otherwise. */

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

/* One block offered, named by dlc_cache_blocks_prepare outside the lock. */
struct dlc_blocks_offer {
	uint32_t ino;
	uint32_t index;
	const struct dlc_node *node;
	char path[DLC_SNAPSHOT_PATH_MAX];       /* the block's row */
	char key[DLC_SNAPSHOT_PATH_MAX];        /* its file's data file */
};

/* Names block index of ino (without the lock); false when it cannot be
 * cached (no such inode, no blocks, a name too long): nothing to do. */
bool dlc_cache_blocks_prepare(struct dlc_cache *cache, uint32_t ino, uint32_t index,
			      struct dlc_blocks_offer *offer);

/* What dlc_cache_blocks_admit did with a file about to take a block. */
enum dlc_blocks_admission {
	DLC_BLOCKS_ADMITTED,    /* admitted before: nothing to carry out */
	DLC_BLOCKS_BYPASSED,    /* not admitted (the policy, a paused
				 * admission): the write finds no file */
	DLC_BLOCKS_EVICT_FIRST, /* the policy chose victims: carry them out
				 * (carry_out_victims in cache.c),
				 * then write; admitted unless out of memory */
	DLC_BLOCKS_NO_ROOM,     /* room_only and no free room: nothing done */
};

/*
 * The first half of a block offer: admits the block's file when it is not
 * admitted yet (with room_only, only into free room), leaving the victims
 * in cache->victims.  Lock held, and still held on return.
 */
enum dlc_blocks_admission dlc_cache_blocks_admit(struct dlc_cache *cache,
						 const struct dlc_blocks_offer *offer, bool room_only);

/*
 * The second half: writes the block (size bytes of data) when its file is
 * admitted and the block absent.  Called with the lock held, returns with
 * it released (dropped while the block is written).  True when the block
 * is (now) cached, false when bypassed.
 */
bool dlc_cache_blocks_write(struct dlc_cache *cache, const struct dlc_blocks_offer *offer,
			    const void *data, uint64_t size);

#endif
