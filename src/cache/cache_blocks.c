/*
 * cache_blocks.c - files larger than cache_max_file, cached as blocks.
 *
 * A large file is one entry of the policy, like a small one: admitted when
 * its first block is offered, charged its whole footprint from then on (the
 * sum of its blocks' footprints, since block_size is a multiple of 4 KiB),
 * scored by its own path (a `SCORE` line on a shard scores the shard), and
 * evicted whole when the policy chooses it.  Its blocks arrive one by one
 * (each a miss of some reader, a readahead, or a block of an announced
 * shard, whose file is admitted only into free room by
 * dlc_cache_block_offer_if_room) and each is a store range
 * (store.h): row "REL//bINDEX:BLOCK_SIZE" with its exact length and xxh3,
 * its bytes at INDEX * BLOCK_SIZE in one data file per large file (key
 * "REL//blocks:BLOCK_SIZE"), which thus holds the file itself once every
 * block is in: an open can then hand it to the kernel (passthrough) or
 * splice from it as from a whole file's (dlc_cache_blocks_open_whole).
 *
 * Checks.  A block is served from its data file without reading it back
 * ("checked") when this mount wrote it or read and checked it, and the data
 * file has not changed since: per file, `stamp` is the data file's stamp as
 * this mount last knew it good and `checked` marks the blocks proven at that
 * stamp.  A stamp that differs from the one recorded means something else
 * changed the file: every mark is cleared, and the block proven now is the
 * only one at the new stamp.  The file's `io` lock makes the stamps
 * exact: a write (write lock) takes the stamps just before and just after
 * its pwrite and records them with its mark before another write can run;
 * a check (read lock) runs while none does.  After a remount nothing is
 * checked; dlc_cache_blocks_check_whole checks a complete file at its open.
 *
 * INVARIANTS (cache->lock guards everything here but `io`).  A block_file
 * exists in the table for every inode cached as blocks, from its admission
 * until its data file is deleted after an eviction.  Per block: ABSENT (no
 * row), WRITING (its writer is inserting it), READY (row and hash known:
 * served), DELETING (evicted: its evictor deletes it).  The policy charges
 * the whole file while it is admitted, so its blocks on disk, written or
 * being written, never pass its charge; once evicted (`evicted`), its
 * blocks still on disk are counted in pending_bytes until deleted, by the
 * evictor (DELETING, with the whole data file) or by their writer (WRITING),
 * `outstanding` counting them and the inode marked deleting until they are
 * all gone, so the disk never holds more than the capacity and the inode is
 * not admitted again before.  A writer waits, as a whole-file writer does,
 * while the charged bytes plus pending_bytes pass the capacity.  A data
 * file is never cut: a block found bad loses its row and is written again
 * in place; the file goes whole, so a backing file the kernel holds keeps
 * the bytes it was given.  Generations come from the cache's one counter,
 * so a reader that checked a block without the lock acts on the outcome
 * only if the same block is still ready.  A block_file out of the table is
 * freed once nobody holds it (`pins`: checks running without the lock).
 * cache_verify.c checks the table against these at every release of
 * cache->lock in verify builds (the struct is in cache_private.h for it).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlcache/cache.h"
#include "dlcache/log.h"
#include "cache_private.h"
#include "cache_blocks.h"

/* The separator of a block row's path: never in a snapshot path. */
#define BLOCK_SEPARATOR "//b"

static struct block_file **bucket_of(struct dlc_cache *cache, uint32_t ino)
{
	return &cache->block_table[dlc_cache_block_bucket(ino)];
}

static struct block_file *find(struct dlc_cache *cache, uint32_t ino)
{
	if (!cache->block_table)
		return NULL;
	for (struct block_file *f = *bucket_of(cache, ino); f; f = f->next)
		if (f->ino == ino)
			return f;
	return NULL;
}

static uint64_t block_len(const struct block_file *f, uint32_t index)
{
	uint64_t start = (uint64_t)index * f->block_size;

	return f->file_size - start < f->block_size ? f->file_size - start : f->block_size;
}

static void destroy(struct block_file *f)
{
	pthread_rwlock_destroy(&f->io);
	free(f->state);
	free(f->hashes);
	free(f->checked);
	free(f->generations);
	free(f);
}

static struct block_file *create(struct dlc_cache *cache, uint32_t ino, uint64_t block_size,
				 uint64_t file_size)
{
	struct block_file *f = calloc(1, sizeof(*f));
	uint64_t nblocks = (file_size + block_size - 1) / block_size;
	pthread_rwlockattr_t attr;

	if (!f)
		return NULL;
	/* Writers first: a stream of checks must not hold a block's write back. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&f->io, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (nblocks == 0 || nblocks > UINT32_MAX)
		goto fail;
	f->ino = ino;
	f->nblocks = (uint32_t)nblocks;
	f->block_size = block_size;
	f->file_size = file_size;
	f->state = calloc(nblocks, sizeof(*f->state));
	f->hashes = calloc(nblocks, sizeof(*f->hashes));
	f->checked = calloc(nblocks, sizeof(*f->checked));
	f->generations = calloc(nblocks, sizeof(*f->generations));
	if (!f->state || !f->hashes || !f->checked || !f->generations)
		goto fail;
	f->next = *bucket_of(cache, ino);
	*bucket_of(cache, ino) = f;
	return f;
fail:
	destroy(f);
	return NULL;
}

/* Takes f out of the table and frees it; its inode is no longer cached. */
static void unlink_free(struct dlc_cache *cache, struct block_file *f)
{
	for (struct block_file **p = bucket_of(cache, f->ino); *p; p = &(*p)->next) {
		if (*p == f) {
			*p = f->next;
			break;
		}
	}
	cache->hashes[f->ino] = 0;
	set_deleting(cache, f->ino, false);
	if (f->pins)
		f->unlinked = true;
	else
		destroy(f);
}

/* A check is done with f (lock held); f may be freed. */
static void unpin(struct block_file *f)
{
	if (--f->pins == 0 && f->unlinked)
		destroy(f);
}

/* Block index is proven good in the data file as it is at stamp (lock held). */
static void note_checked(struct block_file *f, uint32_t index, uint64_t stamp)
{
	if (stamp != f->stamp) {
		memset(f->checked, 0, f->nblocks);
		f->stamp = stamp;
	}
	f->checked[index] = 1;
}

/* buf: ino's snapshot path followed by suffix; 0 or -errno. */
static int path_plus(const struct dlc_cache *cache, uint32_t ino, const char *suffix, char *buf,
		     size_t size)
{
	int rc = dlc_snapshot_path(cache->snapshot, ino, buf, size);
	size_t len, more = strlen(suffix);

	if (rc < 0)
		return rc;
	len = strlen(buf);
	if (more >= size - len)
		return -ENAMETOOLONG;
	memcpy(buf + len, suffix, more + 1);
	return 0;
}

/* A block's row: "REL//bINDEX:BLOCK_SIZE". */
static int block_path(const struct dlc_cache *cache, uint32_t ino, uint32_t index,
		      uint64_t block_size, char *buf, size_t size)
{
	char suffix[64];

	snprintf(suffix, sizeof(suffix), BLOCK_SEPARATOR "%" PRIu32 ":%" PRIu64, index, block_size);
	return path_plus(cache, ino, suffix, buf, size);
}

/* The key of ino's data file (store.h's ranges): "REL//blocks:BLOCK_SIZE". */
static int data_key(const struct dlc_cache *cache, uint32_t ino, uint64_t block_size, char *buf,
		    size_t size)
{
	char suffix[64];

	snprintf(suffix, sizeof(suffix), "//blocks:%" PRIu64, block_size);
	return path_plus(cache, ino, suffix, buf, size);
}

/* Where block index starts in the file and in its data file. */
static uint64_t block_offset(const struct block_file *f, uint32_t index)
{
	return (uint64_t)index * f->block_size;
}

static int64_t mtime_ns(const struct dlc_node *node)
{
	return node->mtime_sec * 1000000000LL + node->mtime_nsec;
}

/* One evicted block file is gone (its evictor or writer deleted it). */
static void settle_evicted_block(struct dlc_cache *cache, struct block_file *f, uint32_t index)
{
	f->state[index] = BLOCK_ABSENT;
	cache->pending_bytes -= dlc_store_footprint(block_len(f, index));
	if (--f->outstanding == 0)
		unlink_free(cache, f);
	pthread_cond_broadcast(&cache->deleted);
}

bool dlc_cache_blocks_has(struct dlc_cache *cache, uint32_t ino)
{
	return find(cache, ino) != NULL;
}

struct block_file *dlc_cache_blocks_evict(struct dlc_cache *cache, uint32_t ino)
{
	struct block_file *f = find(cache, ino);
	bool evictor_deletes = false;

	if (!f || f->evicted)
		return NULL;
	f->evicted = true;
	set_ready(cache, ino, false);
	for (uint32_t i = 0; i < f->nblocks; i++) {
		if (f->state[i] == BLOCK_ABSENT)
			continue;
		if (f->state[i] == BLOCK_READY) {
			f->state[i] = BLOCK_DELETING;
			evictor_deletes = true;
		}
		f->outstanding++;
		cache->pending_bytes += dlc_store_footprint(block_len(f, i));
	}
	if (f->outstanding == 0) {
		unlink_free(cache, f);
		return NULL;
	}
	set_deleting(cache, ino, true);
	return evictor_deletes ? f : NULL;
}

/* Deletes f's data file and its rows; the DELETING blocks are then gone. */
static void remove_data_file(struct dlc_cache *cache, const struct block_file *f)
{
	char key[DLC_SNAPSHOT_PATH_MAX];

	if (data_key(cache, f->ino, f->block_size, key, sizeof(key)) == 0)
		(void)dlc_store_remove_file(cache->store, key);
}

/* Settles f's DELETING blocks once its data file is gone (lock held); f
 * may be freed.  The blocks being written are their writers' to settle. */
static void settle_deleted(struct dlc_cache *cache, struct block_file *f)
{
	for (uint32_t i = 0, n = f->nblocks; i < n; i++) {
		if (f->state[i] != BLOCK_DELETING)
			continue;
		if (f->outstanding == 1) {
			settle_evicted_block(cache, f, i);
			return;         /* f is freed */
		}
		settle_evicted_block(cache, f, i);
	}
}

void dlc_cache_blocks_delete_evicted(struct dlc_cache *cache, struct block_file *f)
{
	/* Only this evictor touches DELETING blocks, and f lives while they do. */
	remove_data_file(cache, f);
	pthread_mutex_lock(&cache->lock);
	settle_deleted(cache, f);
	dlc_cache_unlock(cache);
}

void dlc_cache_blocks_drop(struct dlc_cache *cache, uint32_t ino)
{
	struct block_file *f;

	dlc_policy_remove(cache->policy, ino);
	f = find(cache, ino);
	if (!f)
		return;
	if (!f->evicted)
		f = dlc_cache_blocks_evict(cache, ino);
	else
		f = NULL;       /* already being deleted by its evictor */
	if (!f)
		return;
	remove_data_file(cache, f);
	settle_deleted(cache, f);
}

bool dlc_cache_blocks_is_block_path(const char *path)
{
	return strstr(path, BLOCK_SEPARATOR) != NULL;
}

int dlc_cache_blocks_collect(struct dlc_cache *cache, const struct dlc_store_entry *entry,
			     uint32_t *first)
{
	const char *sep = strstr(entry->path, BLOCK_SEPARATOR);
	char rel[DLC_SNAPSHOT_PATH_MAX];
	unsigned long long index, block_size;
	const struct dlc_node *node;
	struct block_file *f;
	uint64_t ino;
	char tail;

	*first = 0;
	if (!sep || (size_t)(sep - entry->path) >= sizeof(rel) ||
	    sscanf(sep + strlen(BLOCK_SEPARATOR), "%llu:%llu%c", &index, &block_size, &tail) != 2 ||
	    block_size == 0 || block_size % 4096 || index > UINT32_MAX || entry->hash == 0)
		return 0;
	memcpy(rel, entry->path, (size_t)(sep - entry->path));
	rel[sep - entry->path] = '\0';
	ino = dlc_snapshot_resolve(cache->snapshot, rel);
	node = ino ? dlc_snapshot_node(cache->snapshot, ino) : NULL;
	if (!node || !S_ISREG(node->mode) || mtime_ns(node) != entry->mtime_ns ||
	    index * block_size >= node->size)
		return 0;
	f = find(cache, (uint32_t)ino);
	if (!f) {
		if (cache->hashes[ino] != 0)
			return 0;       /* cached whole by an earlier mount */
		f = create(cache, (uint32_t)ino, block_size, node->size);
		if (!f)
			return -ENOMEM;
		*first = (uint32_t)ino;
	}
	if (f->block_size != block_size || f->state[index] != BLOCK_ABSENT ||
	    block_len(f, (uint32_t)index) != entry->size) {
		if (*first) {
			unlink_free(cache, f);
			*first = 0;
		}
		return 0;
	}
	f->state[index] = BLOCK_READY;
	f->hashes[index] = entry->hash;
	f->generations[index] = ++cache->next_generation;
	return 1;
}

void dlc_cache_blocks_free(struct dlc_cache *cache)
{
	if (!cache->block_table)
		return;
	for (size_t b = 0; b < DLC_CACHE_BLOCK_BUCKETS; b++) {
		while (cache->block_table[b]) {
			struct block_file *f = cache->block_table[b];

			cache->block_table[b] = f->next;
			destroy(f);
		}
	}
	free(cache->block_table);
	cache->block_table = NULL;
}

void dlc_cache_set_block_size(struct dlc_cache *cache, uint64_t block_size)
{
	pthread_mutex_lock(&cache->lock);
	cache->block_size = block_size;
	/* Blocks of another size (an earlier mount's option) are dropped. */
	for (size_t b = 0; cache->block_table && b < DLC_CACHE_BLOCK_BUCKETS; b++) {
		struct block_file *f = cache->block_table[b];

		while (f) {
			struct block_file *next = f->next;

			if (f->block_size != block_size && !f->evicted)
				dlc_cache_blocks_drop(cache, f->ino);
			f = next;
		}
	}
	dlc_cache_unlock(cache);
}

uint64_t dlc_cache_block_size(struct dlc_cache *cache)
{
	uint64_t size;

	pthread_mutex_lock(&cache->lock);
	size = cache->block_size;
	dlc_cache_unlock(cache);
	return size;
}

/* The block if it is ready, else NULL; lock held. */
static struct block_file *ready_block(struct dlc_cache *cache, uint32_t ino, uint32_t index)
{
	struct block_file *f = find(cache, ino);

	if (!f || f->evicted || index >= f->nblocks || f->state[index] != BLOCK_READY)
		return NULL;
	return f;
}

bool dlc_cache_block_contains(struct dlc_cache *cache, uint32_t ino, uint32_t index)
{
	bool ready;

	pthread_mutex_lock(&cache->lock);
	ready = ready_block(cache, ino, index) != NULL;
	dlc_cache_unlock(cache);
	return ready;
}

bool dlc_cache_block_checked(struct dlc_cache *cache, uint32_t ino, uint32_t index)
{
	struct block_file *f;
	bool checked;

	pthread_mutex_lock(&cache->lock);
	f = ready_block(cache, ino, index);
	checked = f && f->checked[index];
	dlc_cache_unlock(cache);
	return checked;
}

/* Block index of f was proven bad (lock held): its row goes, and the kernel
 * must not keep reading the data file through a kept backing id. */
static void drop_bad_block(struct dlc_cache *cache, struct block_file *f, uint32_t index,
			   const char *path, int rc)
{
	f->state[index] = BLOCK_ABSENT;
	f->checked[index] = 0;
	(void)dlc_store_remove(cache->store, path);
	if (cache->drop_hook)
		cache->drop_hook(cache->drop_arg, f->ino);
	dlc_stats_add(cache->stats, DLC_STAT_CORRUPT, 1);
	dlc_log(DLC_LOG_WARNING, "cached block %s dropped: %s", path,
		rc == -EBADMSG ? "its size or xxh3 does not match" : strerror(-rc));
}

int dlc_cache_block_read(struct dlc_cache *cache, uint32_t ino, uint32_t index, void *buf,
			 uint64_t size)
{
	char path[DLC_SNAPSHOT_PATH_MAX], key[DLC_SNAPSHOT_PATH_MAX];
	struct block_file *f, *now;
	uint64_t hash, stamp = 0;
	uint32_t generation;
	int rc;

	pthread_mutex_lock(&cache->lock);
	f = ready_block(cache, ino, index);
	if (!f || block_len(f, index) != size) {
		dlc_cache_unlock(cache);
		return -ENOENT;
	}
	hash = f->hashes[index];
	generation = f->generations[index];
	f->pins++;
	dlc_cache_unlock(cache);

	rc = block_path(cache, ino, index, f->block_size, path, sizeof(path));
	if (rc == 0)
		rc = data_key(cache, ino, f->block_size, key, sizeof(key));
	if (rc == 0) {
		/* No write of this file runs while it is read: its stamp is exact. */
		pthread_rwlock_rdlock(&f->io);
		rc = dlc_store_read_range(cache->store, key, block_offset(f, index), buf, size, hash,
					  &stamp);
		if (cache->read_hook)
			rc = cache->read_hook(cache->hook_arg, ino, rc);
		pthread_mutex_lock(&cache->lock);
		pthread_rwlock_unlock(&f->io);
	} else {
		pthread_mutex_lock(&cache->lock);
		rc = -ENOENT;   /* not a block this mount can name: nothing to act on */
		path[0] = '\0';
	}
	now = ready_block(cache, ino, index);
	if (now != f || f->generations[index] != generation)
		now = NULL;     /* evicted, or another copy since: act on nothing */
	if (rc == 0) {
		if (now)
			note_checked(f, index, stamp);
		unpin(f);
		dlc_cache_unlock(cache);
		return 0;
	}
	if (rc != -EBADMSG && rc != -ENOENT) {
		unpin(f);
		dlc_cache_unlock(cache);
		if (!atomic_exchange(&cache->transient_logged, true))
			dlc_log(DLC_LOG_WARNING, "cannot read the cached block %s (%s); it is kept and the read goes to the source (logged once)",
				path, strerror(-rc));
		dlc_stats_add(cache->stats, DLC_STAT_CACHE_READ_ERRORS, 1);
		return -ENOENT;
	}
	/* Proven bad: this block goes (the file stays charged); the caller
	 * reads it from the source and offers it again. */
	if (now && path[0])
		drop_bad_block(cache, f, index, path, rc);
	unpin(f);
	dlc_cache_unlock(cache);
	return -ENOENT;
}

/* ino's data file, opened into *fd if it is still as stamp says (0:
 * nothing checked); an enum dlc_cache_open, or -errno. */
static int open_by_stamp(struct dlc_cache *cache, uint32_t ino, uint64_t block_size,
			 uint64_t stamp, int *fd)
{
	char key[DLC_SNAPSHOT_PATH_MAX];
	int rc;

	*fd = -1;
	if (!stamp || data_key(cache, ino, block_size, key, sizeof(key)) < 0)
		return DLC_CACHE_UNCHECKED;
	rc = dlc_store_open_checked(cache->store, key, stamp, fd);
	if (rc == DLC_STORE_SAME)
		return DLC_CACHE_OPENED;
	return rc == DLC_STORE_CHANGED || rc == -ENOENT ? DLC_CACHE_UNCHECKED : rc;
}

int dlc_cache_block_open_checked(struct dlc_cache *cache, uint32_t ino, uint32_t index, int *fd)
{
	struct block_file *f;
	uint64_t stamp = 0, block_size = 0;

	pthread_mutex_lock(&cache->lock);
	f = ready_block(cache, ino, index);
	if (f && f->checked[index]) {
		stamp = f->stamp;
		block_size = f->block_size;
	}
	dlc_cache_unlock(cache);
	return open_by_stamp(cache, ino, block_size, stamp, fd);
}

/* Whether every block of f is ready (lock held). */
static bool complete(const struct block_file *f)
{
	for (uint32_t i = 0; i < f->nblocks; i++)
		if (f->state[i] != BLOCK_READY)
			return false;
	return true;
}

int dlc_cache_blocks_open_whole(struct dlc_cache *cache, uint32_t ino, int *fd)
{
	struct block_file *f;
	uint64_t stamp = 0, block_size = 0;

	pthread_mutex_lock(&cache->lock);
	f = find(cache, ino);
	if (f && !f->evicted && complete(f) &&
	    memchr(f->checked, 0, f->nblocks) == NULL) {
		stamp = f->stamp;
		block_size = f->block_size;
	}
	dlc_cache_unlock(cache);
	return open_by_stamp(cache, ino, block_size, stamp, fd);
}

int dlc_cache_blocks_check_whole(struct dlc_cache *cache, uint32_t ino, uint64_t max_bytes)
{
	char path[DLC_SNAPSHOT_PATH_MAX], key[DLC_SNAPSHOT_PATH_MAX];
	struct dlc_store_range *ranges = NULL;
	uint32_t *indexes = NULL, *generations = NULL;
	uint64_t stamp = 0, bytes = 0;
	struct block_file *f;
	size_t n = 0;
	int rc;

	pthread_mutex_lock(&cache->lock);
	f = find(cache, ino);
	if (!f || f->evicted || !complete(f)) {
		dlc_cache_unlock(cache);
		return DLC_CACHE_INCOMPLETE;
	}
	for (uint32_t i = 0; i < f->nblocks; i++) {
		if (!f->checked[i]) {
			n++;
			bytes += block_len(f, i);
		}
	}
	if (n == 0 || bytes > max_bytes) {
		dlc_cache_unlock(cache);
		return n == 0 ? DLC_CACHE_CHECKED : DLC_CACHE_TOO_LARGE;
	}
	ranges = calloc(n, sizeof(*ranges));
	indexes = calloc(n, sizeof(*indexes));
	generations = calloc(n, sizeof(*generations));
	if (!ranges || !indexes || !generations) {
		dlc_cache_unlock(cache);
		rc = -ENOMEM;
		goto out;
	}
	n = 0;
	for (uint32_t i = 0; i < f->nblocks; i++) {
		if (f->checked[i])
			continue;
		ranges[n] = (struct dlc_store_range) { .offset = block_offset(f, i),
						       .size = block_len(f, i), .hash = f->hashes[i] };
		indexes[n] = i;
		generations[n++] = f->generations[i];
	}
	f->pins++;
	dlc_cache_unlock(cache);

	rc = data_key(cache, ino, f->block_size, key, sizeof(key));
	if (rc == 0) {
		pthread_rwlock_rdlock(&f->io);
		rc = dlc_store_check_ranges(cache->store, key, ranges, n, &stamp);
		if (rc == DLC_STORE_CHANGED)
			rc = DLC_CACHE_CHANGED;         /* nothing proven */
		pthread_mutex_lock(&cache->lock);
		pthread_rwlock_unlock(&f->io);
	} else {
		pthread_mutex_lock(&cache->lock);
	}
	for (size_t k = 0; rc == DLC_CACHE_CHECKED && k < n; k++) {
		uint32_t i = indexes[k];

		if (ready_block(cache, ino, i) != f || f->generations[i] != generations[k])
			continue;       /* evicted, or another copy since */
		if (ranges[k].ok) {
			note_checked(f, i, stamp);
		} else if (block_path(cache, ino, i, f->block_size, path, sizeof(path)) == 0) {
			drop_bad_block(cache, f, i, path, -EBADMSG);
			rc = DLC_CACHE_BAD_BLOCK;
		}
	}
	unpin(f);
	dlc_cache_unlock(cache);
out:
	free(ranges);
	free(indexes);
	free(generations);
	return rc;
}

bool dlc_cache_blocks_prepare(struct dlc_cache *cache, uint32_t ino, uint32_t index,
			      struct dlc_blocks_offer *offer)
{
	offer->ino = ino;
	offer->index = index;
	offer->node = dlc_snapshot_node(cache->snapshot, ino);
	return offer->node && cache->block_size &&
	       block_path(cache, ino, index, cache->block_size, offer->path, sizeof(offer->path)) == 0 &&
	       data_key(cache, ino, cache->block_size, offer->key, sizeof(offer->key)) == 0;
}

enum dlc_blocks_admission dlc_cache_blocks_admit(struct dlc_cache *cache,
						 const struct dlc_blocks_offer *offer, bool room_only)
{
	const struct dlc_node *node = offer->node;
	uint32_t ino = offer->ino;
	struct block_file *f;

	if (find(cache, ino))
		return DLC_BLOCKS_ADMITTED;
	if (room_only &&
	    dlc_policy_used(cache->policy) + cache->pending_bytes + dlc_store_footprint(node->size) >
	    dlc_policy_capacity(cache->policy))
		return DLC_BLOCKS_NO_ROOM;
	if (!dlc_cache_admitting(cache) || dlc_policy_contains(cache->policy, ino) ||
	    is_deleting(cache, ino) ||
	    dlc_policy_admit(cache->policy, ino, dlc_store_footprint(node->size), &cache->victims) <= 0)
		return DLC_BLOCKS_BYPASSED;
	f = create(cache, ino, cache->block_size, node->size);
	if (!f) {
		/* The victims are out of the policy already: they go all the same. */
		dlc_policy_remove(cache->policy, ino);
		return DLC_BLOCKS_EVICT_FIRST;
	}
	cache->hashes[ino] = 1;
	set_ready(cache, ino, true);
	dlc_stats_add(cache->stats, DLC_STAT_ADMISSIONS, 1);
	return DLC_BLOCKS_EVICT_FIRST;
}

bool dlc_cache_blocks_write(struct dlc_cache *cache, const struct dlc_blocks_offer *offer,
			    const void *data, uint64_t size)
{
	const struct dlc_node *node = offer->node;
	const char *path = offer->path, *key = offer->key;
	uint32_t ino = offer->ino, index = offer->index;
	struct block_file *f;
	uint64_t hash, before = 0, after = 0;
	int rc;

	/* Not admitted, or evicted by another admission while the lock was
	 * dropped for the victims? */
	f = find(cache, ino);
	if (!f || f->evicted || f->block_size != cache->block_size || index >= f->nblocks ||
	    block_len(f, index) != size || f->state[index] != BLOCK_ABSENT) {
		bool ready = f && !f->evicted && index < f->nblocks && f->state[index] == BLOCK_READY;

		dlc_cache_unlock(cache);
		return ready;
	}
	f->state[index] = BLOCK_WRITING;
	/* As for a whole file: the disk never holds more than the capacity. */
	while (!f->evicted &&
	       dlc_policy_used(cache->policy) + cache->pending_bytes > dlc_policy_capacity(cache->policy))
		dlc_cache_wait_deleted(cache);
	if (f->evicted) {
		settle_evicted_block(cache, f, index);
		dlc_cache_unlock(cache);
		return false;
	}
	dlc_cache_unlock(cache);

	/* f lives while this block is WRITING (evicted, it counts in outstanding). */
	pthread_rwlock_wrlock(&f->io);
	rc = dlc_store_insert_range(cache->store, path, key, block_offset(f, index), data, size,
				    mtime_ns(node), &hash, &before, &after);
	if (cache->write_hook)
		cache->write_hook(cache->hook_arg, ino);

	pthread_mutex_lock(&cache->lock);
	if (f->evicted) {
		/* Evicted while written: its evictor counted it as pending. */
		pthread_rwlock_unlock(&f->io);
		dlc_cache_unlock(cache);
		if (rc == 0)
			(void)dlc_store_remove(cache->store, path);
		pthread_mutex_lock(&cache->lock);
		settle_evicted_block(cache, f, index);
		dlc_cache_unlock(cache);
		return false;
	}
	if (rc == 0) {
		f->state[index] = BLOCK_READY;
		f->hashes[index] = hash;
		f->generations[index] = ++cache->next_generation;
		/*
		 * Written here: as good as checked, at the stamp after the
		 * write.  The other marks stand if the file was as this mount
		 * last knew it just before the write (the write lock keeps
		 * other writes of this mount out of that span).
		 */
		if (before != f->stamp)
			memset(f->checked, 0, f->nblocks);
		f->stamp = after;
		f->checked[index] = 1;
		dlc_stats_add(cache->stats, DLC_STAT_BLOCK_ADMISSIONS, 1);
		pthread_rwlock_unlock(&f->io);
		dlc_cache_unlock(cache);
		return true;
	}
	f->state[index] = BLOCK_ABSENT;
	dlc_cache_write_failed(cache, path, rc);
	pthread_rwlock_unlock(&f->io);
	dlc_cache_unlock(cache);
	return false;
}
