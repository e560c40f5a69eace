/*
 * cache_verify.c - the cache's invariants that run (verify.h): what the
 * INVARIANTS of cache.c and cache_blocks.c say of the state under
 * cache->lock, checked by dlc_cache_verify in tests and, in verify builds,
 * at every release of cache->lock (dlc_cache_unlock) and before every wait
 * for deletions (dlc_cache_wait_deleted), which releases it too.
 *
 * Checked, in O(inodes + block files + the policy's own check):
 *   - the policy's own invariants (dlc_policy_verify);
 *   - a ready inode is in the policy and not being deleted; an inode being
 *     deleted is out of the policy;
 *   - a file of blocks in the table is marked deleting exactly when it is
 *     evicted; evicted, it is out of the policy, ready nowhere, and its
 *     outstanding count is its blocks still on disk (written or being
 *     written); admitted, it is in the policy with nothing outstanding or
 *     deleting;
 *   - pending_bytes is the footprint of every whole file being deleted plus
 *     that of every block left of an evicted file.
 * Not checked: that hashes[] match the files (the store's reads do that).
 */
#include <errno.h>

#include "dlcache/policy.h"
#include "dlcache/snapshot.h"
#include "dlcache/store.h"
#include "dlcache/verify.h"
#include "cache_private.h"

static uint64_t block_bytes(const struct block_file *f, uint32_t index)
{
	uint64_t start = (uint64_t)index * f->block_size;

	return f->file_size - start < f->block_size ? f->file_size - start : f->block_size;
}

/* Whether ino is cached as blocks (cache_blocks.c's find, read only). */
static bool has_block_file(const struct dlc_cache *cache, uint32_t ino)
{
	if (!cache->block_table)
		return false;
	for (const struct block_file *f = cache->block_table[dlc_cache_block_bucket(ino)]; f; f = f->next)
		if (f->ino == ino)
			return true;
	return false;
}

/* The table's files of blocks; adds the evicted ones' bytes to *pending. */
static int verify_block_files(const struct dlc_cache *cache, uint64_t *pending)
{
	for (size_t b = 0; cache->block_table && b < DLC_CACHE_BLOCK_BUCKETS; b++) {
		for (const struct block_file *f = cache->block_table[b]; f; f = f->next) {
			uint32_t on_disk = 0, ready = 0, deleting = 0;

			if (f->unlinked || f->nblocks == 0 || f->block_size == 0 ||
			    dlc_cache_block_bucket(f->ino) != b)
				return -EUCLEAN;
			for (uint32_t i = 0; i < f->nblocks; i++) {
				if (f->state[i] == BLOCK_ABSENT)
					continue;
				on_disk++;
				ready += f->state[i] == BLOCK_READY;
				deleting += f->state[i] == BLOCK_DELETING;
				if (f->evicted)
					*pending += dlc_store_footprint(block_bytes(f, i));
			}
			if (is_deleting(cache, f->ino) != f->evicted)
				return -EUCLEAN;
			if (f->evicted ? f->outstanding != on_disk || on_disk == 0 || ready > 0 ||
					 is_ready(cache, f->ino) ||
					 dlc_policy_contains(cache->policy, f->ino)
				       : f->outstanding != 0 || deleting > 0 ||
					 !dlc_policy_contains(cache->policy, f->ino))
				return -EUCLEAN;
		}
	}
	return 0;
}

int dlc_cache_verify_locked(const struct dlc_cache *cache)
{
	uint32_t count = dlc_snapshot_count(cache->snapshot);
	uint64_t pending = 0;

	if (dlc_policy_verify(cache->policy) < 0)
		return -EUCLEAN;
	for (uint32_t ino = 1; ino <= count; ino++) {
		bool deleting = is_deleting(cache, ino);

		if (is_ready(cache, ino) && (deleting || !dlc_policy_contains(cache->policy, ino)))
			return -EUCLEAN;
		if (!deleting)
			continue;
		if (dlc_policy_contains(cache->policy, ino))
			return -EUCLEAN;
		if (!has_block_file(cache, ino))
			pending += dlc_store_footprint(dlc_snapshot_node(cache->snapshot, ino)->size);
	}
	if (verify_block_files(cache, &pending) < 0)
		return -EUCLEAN;
	return pending == cache->pending_bytes ? 0 : -EUCLEAN;
}

int dlc_cache_verify(struct dlc_cache *cache)
{
	int rc;

	pthread_mutex_lock(&cache->lock);
	rc = dlc_cache_verify_locked(cache);
	pthread_mutex_unlock(&cache->lock);
	return rc;
}

void dlc_cache_unlock(struct dlc_cache *cache)
{
	DLC_VERIFY(dlc_cache_verify_locked(cache));
	cache->lock_releases++;
	pthread_mutex_unlock(&cache->lock);
}

uint64_t dlc_cache_lock_releases(struct dlc_cache *cache)
{
	uint64_t n;

	pthread_mutex_lock(&cache->lock);
	n = cache->lock_releases;
	pthread_mutex_unlock(&cache->lock);     /* not counted: the count's own */
	return n;
}

void dlc_cache_wait_deleted(struct dlc_cache *cache)
{
	DLC_VERIFY(dlc_cache_verify_locked(cache));
	pthread_cond_wait(&cache->deleted, &cache->lock);
}
