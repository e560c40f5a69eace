/*
 * cache.c - the cache's state in one place: which inodes are cached (the
 * policy), the xxh3 of each ready entry, and the store's files.  Files
 * larger than cache_max_file are cached as blocks by cache_blocks.c, which
 * this file calls down into (cache_blocks.h) and which never calls back: a
 * block offer starts here, so that the victims of every admission are
 * carried out here.  Whether admission is on (a full or failing disk) is
 * cache_admission.c's, which both ask.
 *
 * INVARIANTS.  cache->lock guards policy, hashes, generations, ready,
 * deleting, pending_bytes, admission and victims.  An inode is ready only if the policy contains it
 * and its file was written with the hash in hashes[ino]; generations[ino]
 * changes each time it becomes ready, so a reader that checked the file
 * without the lock acts on its outcome only if the entry it read is still
 * the one there (an entry evicted and admitted again with the same bytes
 * has the same hash but another generation).  Only a copy proven bad (size
 * or xxh3 wrong, file gone) is dropped; a passing failure to read it (out
 * of descriptors or memory, an I/O error) is a miss that keeps it.  Victims are chosen under the
 * lock, marked deleting (their bytes counted in pending_bytes) and deleted
 * from the store without it, before the admitted entry's bytes are written;
 * before writing, an admission waits while the bytes charged (its own
 * included) plus those pending pass the capacity, so the files on disk
 * never exceed it, and a
 * hit never waits behind an unlink or an index write.  A victim still being
 * written is deleted by its writer, which finds it marked; its evictor
 * waits for that before writing its own bytes.  An inode marked
 * deleting is not admitted again until its file is gone.  The store's own lock
 * nests inside cache->lock; dlc_store_read takes none, so a first hit
 * holds cache->lock only to copy the hash (at the open, dlc_cache_open_hit)
 * and, after its read, to keep the check and tell the policy, in one take
 * (dlc_cache_read_hit).  save_lock serializes saves of the
 * scores (one FILE.tmp at a time) and nests outside cache->lock, which a
 * save holds only to copy the table: the write and fsync run unlocked, so
 * an `epoch N` line never stalls the opens of the mount.  cache_verify.c
 * checks these (and the policy's own) at every release of cache->lock in
 * verify builds: every unlock and wait here goes through its helpers.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "dlcache/cache.h"
#include "cache_private.h"
#include "cache_blocks.h"
#include "dlcache/cause.h"
#include "dlcache/log.h"
#include "dlcache/text.h"


/* Inodes .cached looks at per hold of the cache lock: a hit waits for one batch at most. */
#define LIST_BATCH 4096u

static int64_t node_mtime_ns(const struct dlc_node *node)
{
	return node->mtime_sec * 1000000000LL + node->mtime_nsec;
}

/* Deletes the store copy of ino; called with the lock held. */
static void drop_file(struct dlc_cache *cache, uint32_t ino)
{
	char path[DLC_SNAPSHOT_PATH_MAX];

	if (dlc_cache_blocks_has(cache, ino)) {
		dlc_cache_blocks_drop(cache, ino);
		return;
	}
	set_ready(cache, ino, false);
	if (dlc_snapshot_path(cache->snapshot, ino, path, sizeof(path)) == 0)
		(void)dlc_store_remove(cache->store, path);
}

/*
 * Carries out the evictions an admission left in cache->victims: called and
 * returns with the lock held, drops it while files are deleted.  Blocks of
 * large files go through cache_blocks.c's eviction.
 */
static void carry_out_victims(struct dlc_cache *cache)
{
	size_t nvictims = cache->victims.count;
	uint32_t *victims = nvictims ? malloc(nvictims * sizeof(*victims)) : NULL;
	struct block_file **blocks = nvictims ? calloc(nvictims, sizeof(*blocks)) : NULL;

	if (!blocks) {
		free(victims);
		victims = NULL;
	}
	for (size_t i = 0; i < nvictims; i++) {
		uint32_t v = cache->victims.items[i];

		if (!victims) {
			drop_file(cache, v);    /* out of memory: under the lock, as before */
			continue;
		}
		victims[i] = v;
		if (dlc_cache_blocks_has(cache, v)) {
			/* Blocks: each file on disk counted, deleted below. */
			blocks[i] = dlc_cache_blocks_evict(cache, v);
			victims[i] = 0;
			continue;
		}
		/* A victim being written is deleted by its writer (below). */
		set_deleting(cache, v, true);
		cache->pending_bytes += dlc_store_footprint(dlc_snapshot_node(cache->snapshot, v)->size);
		if (!is_ready(cache, v))
			victims[i] = 0;
		set_ready(cache, v, false);
	}
	dlc_stats_add(cache->stats, DLC_STAT_EVICTIONS, nvictims);
	if (!victims)
		return;
	dlc_cache_unlock(cache);

	/* The victims' files go before this entry's bytes are written, without
	 * the lock that every hit takes (unlink and SQLite can be slow). */
	for (size_t i = 0; i < nvictims; i++) {
		char victim_path[DLC_SNAPSHOT_PATH_MAX];

		if (blocks[i])
			dlc_cache_blocks_delete_evicted(cache, blocks[i]);
		if (!victims[i])
			continue;
		if (dlc_snapshot_path(cache->snapshot, victims[i], victim_path, sizeof(victim_path)) == 0)
			(void)dlc_store_remove(cache->store, victim_path);
	}
	pthread_mutex_lock(&cache->lock);
	{
		uint64_t freed = 0;

		for (size_t i = 0; i < nvictims; i++) {
			if (!victims[i])
				continue;
			set_deleting(cache, victims[i], false);
			freed += dlc_store_footprint(dlc_snapshot_node(cache->snapshot, victims[i])->size);
		}
		cache->pending_bytes -= freed;
	}
	pthread_cond_broadcast(&cache->deleted);
	free(victims);
	free(blocks);
}

/* A persisted entry that still matches the snapshot, waiting to be restored. */
struct restore_candidate {
	uint32_t ino;
	float score;            /* -inf when unknown: restored last */
	uint64_t hash;
};

struct restore_state {
	struct dlc_cache *cache;
	struct restore_candidate *items;
	size_t count, cap;
	uint64_t kept;
	uint64_t dropped;
};

/*
 * First pass over the index: entries that no longer match the snapshot are
 * dropped at once; the others are collected, so that the second pass can
 * restore the most important first (a smaller cache_size at remount keeps
 * the highest-scored entries, not the first rows read).
 */
static int collect_entry(void *arg, const struct dlc_store_entry *entry)
{
	struct restore_state *state = arg;
	struct dlc_cache *cache = state->cache;
	uint64_t ino, hash = entry->hash;
	const struct dlc_node *node;

	if (dlc_cache_blocks_is_block_path(entry->path)) {
		/* A block: its file is a candidate once, with its first row. */
		uint32_t first = 0;
		int rc = dlc_cache_blocks_collect(cache, entry, &first);

		if (rc == 0)
			state->dropped++;
		if (rc <= 0 || !first)
			return rc;
		ino = first;
		hash = 1;       /* "seen"; a file of blocks has a hash per block */
		goto add;
	}
	ino = dlc_snapshot_resolve(cache->snapshot, entry->path);
	node = ino ? dlc_snapshot_node(cache->snapshot, ino) : NULL;
	if (!node || !S_ISREG(node->mode) || node->size != entry->size ||
	    node_mtime_ns(node) != entry->mtime_ns || cache->hashes[ino] != 0 ||
	    entry->hash == 0) {
		state->dropped++;
		return 0;
	}
add:
	if (state->count == state->cap) {
		size_t cap = state->cap ? state->cap * 2 : 1024;
		struct restore_candidate *grown = realloc(state->items, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		state->items = grown;
		state->cap = cap;
	}
	cache->hashes[ino] = hash;       /* marks ino seen until restored */
	state->items[state->count++] = (struct restore_candidate) {
		.ino = (uint32_t)ino,
		.score = isnan(cache->scores.values[ino]) ? -INFINITY : cache->scores.values[ino],
		.hash = hash,
	};
	return 1;
}

static int compare_candidates(const void *a, const void *b)
{
	const struct restore_candidate *x = a, *y = b;

	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Second pass: the most important first, while they fit; the rest dropped. */
static void restore_collected(struct restore_state *state)
{
	struct dlc_cache *cache = state->cache;

	if (state->count > 1)
		qsort(state->items, state->count, sizeof(*state->items), compare_candidates);
	for (size_t i = 0; i < state->count; i++) {
		uint32_t ino = state->items[i].ino;
		const struct dlc_node *node = dlc_snapshot_node(cache->snapshot, ino);

		if (dlc_policy_restore(cache->policy, ino, dlc_store_footprint(node->size)) < 0) {
			char path[DLC_SNAPSHOT_PATH_MAX];

			cache->hashes[ino] = 0;
			if (dlc_cache_blocks_has(cache, ino))
				dlc_cache_blocks_drop(cache, ino);
			else if (dlc_snapshot_path(cache->snapshot, ino, path, sizeof(path)) == 0)
				(void)dlc_store_remove(cache->store, path);
			state->dropped++;
			continue;
		}
		cache->hashes[ino] = state->items[i].hash;
		set_ready(cache, ino, true);
		state->kept++;
	}
}

int dlc_cache_open(struct dlc_store *store, const struct dlc_snapshot *snapshot,
		   enum dlc_policy_kind kind, uint64_t capacity, const char *scores_file,
		   struct dlc_stats *stats, struct dlc_cache **out, char **cause)
{
	uint32_t count = dlc_snapshot_count(snapshot);
	struct restore_state state = { 0 };
	struct dlc_cache *cache;
	int rc;

	*cause = NULL;

	cache = calloc(1, sizeof(*cache));
	if (!cache)
		goto err_nomem;
	pthread_mutex_init(&cache->lock, NULL);
	pthread_mutex_init(&cache->save_lock, NULL);
	cache->store = store;
	cache->snapshot = snapshot;
	cache->stats = stats;
	cache->admission = kind != DLC_POLICY_NONE;
	cache->policy = dlc_policy_create(kind, capacity, count);
	cache->hashes = calloc((size_t)count + 1, sizeof(*cache->hashes));
	cache->stamps = calloc((size_t)count + 1, sizeof(*cache->stamps));
	cache->generations = calloc((size_t)count + 1, sizeof(*cache->generations));
	cache->ready = calloc((size_t)count / 8 + 1, 1);
	cache->deleting = calloc((size_t)count / 8 + 1, 1);
	pthread_cond_init(&cache->deleted, NULL);
	cache->block_table = calloc(DLC_CACHE_BLOCK_BUCKETS, sizeof(*cache->block_table));
	if (!cache->block_table || !cache->policy || !cache->hashes || !cache->stamps || !cache->generations || !cache->ready ||
	    !cache->deleting ||
	    dlc_scores_init(&cache->scores, count) < 0)
		goto err_nomem;
	if (scores_file) {
		cache->scores_file = strdup(scores_file);
		if (!cache->scores_file)
			goto err_nomem;
		rc = dlc_scores_load(&cache->scores, scores_file, dlc_snapshot_id(snapshot));
		if (rc == DLC_SCORES_LOADED)
			dlc_log(DLC_LOG_INFO, "%u scores loaded from %s", cache->scores.known, scores_file);
		else if (rc == DLC_SCORES_OTHER_SNAPSHOT)
			dlc_log(DLC_LOG_INFO, "scores in %s belong to another snapshot: starting with none",
				scores_file);
		else if (rc != -ENOENT)
			dlc_log(DLC_LOG_WARNING, "cannot load the scores in %s (%s): starting with none",
				scores_file, strerror(-rc));
	}
	/* Before restoring: the importance heap is keyed by these scores. */
	dlc_policy_set_scores(cache->policy, cache->scores.values);

	state.cache = cache;
	rc = dlc_store_load(store, collect_entry, &state);
	restore_collected(&state);
	free(state.items);
	if (rc < 0) {
		/* What was restored is good (reads check every byte); the store
		 * leaves the index marked unclean, so the next mount checks it. */
		dlc_log(DLC_LOG_WARNING, "cannot read the whole cache index in %s (%s): going on with %llu entries",
			dlc_store_dir(store), strerror(-rc), (unsigned long long)state.kept);
	}
	dlc_store_flush(store);
	dlc_log(DLC_LOG_INFO, "%llu cached entries reused, %llu dropped (not in the snapshot, changed, or over capacity)",
		(unsigned long long)state.kept, (unsigned long long)state.dropped);
	*out = cache;
	return 0;

err_nomem:
	if (cache)
		dlc_cache_close(cache);
	dlc_cause_set(cause, "out of memory while setting up the cache; free memory or mount a smaller dataset.");
	return -ENOMEM;
}

void dlc_cache_close(struct dlc_cache *cache)
{
	if (!cache)
		return;
	dlc_cache_blocks_free(cache);
	dlc_policy_free(cache->policy);
	dlc_scores_destroy(&cache->scores);
	free(cache->scores_file);
	dlc_ino_list_free(&cache->victims);
	free(cache->hashes);
	free(cache->stamps);
	free(cache->generations);
	free(cache->deleting);
	pthread_cond_destroy(&cache->deleted);
	free(cache->ready);
	pthread_mutex_destroy(&cache->save_lock);
	pthread_mutex_destroy(&cache->lock);
	free(cache);
}

/* Whether a failure to read a cached copy proves the copy bad. */
static bool copy_is_bad(int rc)
{
	return rc == -EBADMSG || rc == -ENOENT;
}

/* Tells the policy of a reader's read, lock held: the announced read
 * consumed first, then the hit (dlc_cache_read_hit's consume and hit). */
static void tell_read(struct dlc_cache *cache, uint32_t ino, bool consume, bool hit)
{
	if (consume)
		dlc_policy_consume(cache->policy, ino);
	if (hit && is_ready(cache, ino))
		dlc_policy_hit(cache->policy, ino);
}

int dlc_cache_read(struct dlc_cache *cache, uint32_t ino, void *buf, uint64_t size)
{
	return dlc_cache_read_hit(cache, ino, NULL, buf, size, false, false);
}

int dlc_cache_read_hit(struct dlc_cache *cache, uint32_t ino, const struct dlc_cache_entry *entry,
		       void *buf, uint64_t size, bool consume, bool hit)
{
	char path[DLC_SNAPSHOT_PATH_MAX];
	struct dlc_cache_entry seen = { .ready = false };
	uint64_t stamp = 0;
	bool bad = false, same;
	int rc;

	if (entry && entry->ready) {
		seen = *entry;
	} else {
		pthread_mutex_lock(&cache->lock);
		if (is_ready(cache, ino))
			seen = (struct dlc_cache_entry) { .ready = true, .hash = cache->hashes[ino],
							  .generation = cache->generations[ino] };
		else
			tell_read(cache, ino, consume, false);
		dlc_cache_unlock(cache);
		if (!seen.ready)
			return -ENOENT;
	}

	rc = dlc_snapshot_path(cache->snapshot, ino, path, sizeof(path));
	if (rc == 0) {
		rc = dlc_store_read(cache->store, path, buf, size, seen.hash, &stamp);
		if (cache->read_hook)
			rc = cache->read_hook(cache->hook_arg, ino, rc);
		bad = copy_is_bad(rc);
		if (rc < 0 && !bad) {
			/* Out of descriptors or memory, a passing I/O error: the copy
			 * may well be good, so it stays; this read goes to the source. */
			if (!atomic_exchange(&cache->transient_logged, true))
				dlc_log(DLC_LOG_WARNING, "cannot read the cached copy of %s (%s%s); it is kept and the read goes to the source (logged once)",
					path, strerror(-rc),
					rc == -EMFILE || rc == -ENFILE ? ": out of descriptors, raise ulimit -n" : "");
			dlc_stats_add(cache->stats, DLC_STAT_CACHE_READ_ERRORS, 1);
		}
	}
	if (rc < 0 && !bad && !consume)
		return -ENOENT;

	/* The one take after the read: the check kept, or the copy proven bad
	 * dropped, only if the entry read is still the one there (not evicted,
	 * nor admitted again since); the policy told in the same take. */
	pthread_mutex_lock(&cache->lock);
	tell_read(cache, ino, consume, false);
	same = is_ready(cache, ino) && cache->generations[ino] == seen.generation;
	if (rc == 0) {
		if (same)
			cache->stamps[ino] = stamp;
		tell_read(cache, ino, false, hit);
	} else if (bad && same) {
		dlc_policy_remove(cache->policy, ino);
		drop_file(cache, ino);
		dlc_stats_add(cache->stats, DLC_STAT_CORRUPT, 1);
		dlc_log(DLC_LOG_WARNING, "cached copy of %s dropped: %s", path,
			rc == -EBADMSG ? "its size or xxh3 does not match" : strerror(-rc));
	}
	dlc_cache_unlock(cache);
	return rc == 0 ? 0 : -ENOENT;
}

void dlc_cache_set_hooks(struct dlc_cache *cache, dlc_cache_read_hook read_hook,
			 dlc_cache_write_hook write_hook, void *arg)
{
	cache->read_hook = read_hook;
	cache->write_hook = write_hook;
	cache->hook_arg = arg;
}

void dlc_cache_set_drop_hook(struct dlc_cache *cache, dlc_cache_drop_hook drop, void *arg)
{
	pthread_mutex_lock(&cache->lock);
	cache->drop_hook = drop;
	cache->drop_arg = arg;
	dlc_cache_unlock(cache);
}

int dlc_cache_open_checked(struct dlc_cache *cache, uint32_t ino, int *fd)
{
	char path[DLC_SNAPSHOT_PATH_MAX];
	uint64_t stamp;
	int rc;

	*fd = -1;
	pthread_mutex_lock(&cache->lock);
	stamp = is_ready(cache, ino) ? cache->stamps[ino] : 0;
	dlc_cache_unlock(cache);
	if (!stamp)
		return DLC_CACHE_UNCHECKED;
	rc = dlc_snapshot_path(cache->snapshot, ino, path, sizeof(path));
	if (rc < 0)
		return rc;
	rc = dlc_store_open_checked(cache->store, path, stamp, fd);
	if (rc == DLC_STORE_SAME)
		return DLC_CACHE_OPENED;
	return rc == DLC_STORE_CHANGED || rc == -ENOENT ? DLC_CACHE_UNCHECKED : rc;
}

enum dlc_cache_hit dlc_cache_open_hit(struct dlc_cache *cache, uint32_t ino, bool consume,
				     int *fd, struct dlc_cache_entry *entry)
{
	char path[DLC_SNAPSHOT_PATH_MAX];
	uint64_t stamp;
	int rc;

	*fd = -1;
	*entry = (struct dlc_cache_entry) { .ready = false };
	pthread_mutex_lock(&cache->lock);
	stamp = is_ready(cache, ino) ? cache->stamps[ino] : 0;
	if (is_ready(cache, ino))
		*entry = (struct dlc_cache_entry) { .ready = true, .hash = cache->hashes[ino],
						    .generation = cache->generations[ino] };
	if (stamp) {
		/* Told before the open, in this one take of the lock: the open
		 * fails only when the file changed or went since its check. */
		if (consume)
			dlc_policy_consume(cache->policy, ino);
		dlc_policy_hit(cache->policy, ino);
	}
	dlc_cache_unlock(cache);
	if (!stamp)
		return DLC_CACHE_HIT_UNCHECKED;
	rc = dlc_snapshot_path(cache->snapshot, ino, path, sizeof(path));
	if (rc == 0)
		rc = dlc_store_open_checked(cache->store, path, stamp, fd);
	if (rc != DLC_STORE_SAME) {
		*fd = -1;
		return DLC_CACHE_HIT_GONE;
	}
	return DLC_CACHE_HIT_OPEN;
}

void dlc_cache_note_read(struct dlc_cache *cache, uint32_t ino, bool consume)
{
	pthread_mutex_lock(&cache->lock);
	if (consume)
		dlc_policy_consume(cache->policy, ino);
	if (is_ready(cache, ino))
		dlc_policy_hit(cache->policy, ino);
	dlc_cache_unlock(cache);
}

void dlc_cache_hit(struct dlc_cache *cache, uint32_t ino)
{
	pthread_mutex_lock(&cache->lock);
	if (is_ready(cache, ino))
		dlc_policy_hit(cache->policy, ino);
	dlc_cache_unlock(cache);
}

/* dlc_cache_offer, and with room_only dlc_cache_offer_if_room (*made is
 * false when there was no free room and nothing was done). */
static bool offer(struct dlc_cache *cache, uint32_t ino, const void *data, uint64_t size,
		  bool room_only, bool *made)
{
	const struct dlc_node *node = dlc_snapshot_node(cache->snapshot, ino);
	char path[DLC_SNAPSHOT_PATH_MAX];
	uint64_t hash, stamp, footprint;
	int rc;

	if (!node || dlc_snapshot_path(cache->snapshot, ino, path, sizeof(path)) < 0)
		goto bypass;

	pthread_mutex_lock(&cache->lock);
	footprint = dlc_store_footprint(size);
	if (room_only && dlc_policy_used(cache->policy) + cache->pending_bytes + footprint >
			 dlc_policy_capacity(cache->policy)) {
		dlc_cache_unlock(cache);
		*made = false;
		return false;
	}
	if (!dlc_cache_admitting(cache) || dlc_policy_contains(cache->policy, ino) || is_deleting(cache, ino) ||
	    dlc_cache_blocks_has(cache, ino) ||
	    dlc_policy_admit(cache->policy, ino, footprint, &cache->victims) <= 0) {
		dlc_cache_unlock(cache);
		goto bypass;
	}
	carry_out_victims(cache);
	dlc_cache_unlock(cache);

	/*
	 * Files evicted by other admissions, or by this one while still being
	 * written (their writer deletes them once its write ends), may still be
	 * on disk beside the ones charged: wait until they are gone before
	 * writing this one, so that the disk never holds more than the capacity
	 * (see INVARIANTS).  Evicted meanwhile, this entry gives up as a writer
	 * evicted mid-write does.
	 */
	pthread_mutex_lock(&cache->lock);
	while (!is_deleting(cache, ino) &&
	       dlc_policy_used(cache->policy) + cache->pending_bytes > dlc_policy_capacity(cache->policy))
		dlc_cache_wait_deleted(cache);
	if (is_deleting(cache, ino)) {
		set_deleting(cache, ino, false);
		cache->pending_bytes -= footprint;
		pthread_cond_broadcast(&cache->deleted);
		dlc_cache_unlock(cache);
		goto bypass;
	}
	dlc_cache_unlock(cache);

	rc = dlc_store_insert(cache->store, path, data, size, node_mtime_ns(node), &hash, &stamp);
	if (cache->write_hook)
		cache->write_hook(cache->hook_arg, ino);

	pthread_mutex_lock(&cache->lock);
	if (is_deleting(cache, ino)) {
		/* Evicted by another admission while its bytes were being
		 * written: its evictor counted them as pending; they go now. */
		dlc_cache_unlock(cache);
		if (rc == 0)
			(void)dlc_store_remove(cache->store, path);
		pthread_mutex_lock(&cache->lock);
		set_deleting(cache, ino, false);
		cache->pending_bytes -= footprint;
		pthread_cond_broadcast(&cache->deleted);
		dlc_cache_unlock(cache);
		goto bypass;
	}
	if (rc == 0) {
		cache->hashes[ino] = hash;
		set_ready(cache, ino, true);
		/* Written by this mount: opened by its stamp from the next open
		 * on, with no read-back (DESIGN.md, the paragraph on hits). */
		cache->stamps[ino] = stamp;
		dlc_stats_add(cache->stats, DLC_STAT_ADMISSIONS, 1);
		dlc_cache_unlock(cache);
		return true;
	}
	dlc_policy_remove(cache->policy, ino);
	dlc_cache_write_failed(cache, path, rc);
	dlc_cache_unlock(cache);
bypass:
	dlc_stats_add(cache->stats, DLC_STAT_BYPASSES, 1);
	return false;
}

bool dlc_cache_offer(struct dlc_cache *cache, uint32_t ino, const void *data, uint64_t size)
{
	bool made;

	return offer(cache, ino, data, size, false, &made);
}

bool dlc_cache_offer_if_room(struct dlc_cache *cache, uint32_t ino, const void *data, uint64_t size)
{
	bool made = true;

	(void)offer(cache, ino, data, size, true, &made);
	return made;
}

/*
 * dlc_cache_block_offer, and with room_only dlc_cache_block_offer_if_room
 * (*made is false when the file was not admitted yet and there was no free
 * room for it: nothing was done).  cache_blocks.c admits the file, this
 * carries out the victims its admission chose, cache_blocks.c writes the
 * block: the evictions (whole files and blocks) are this file's.
 */
static bool block_offer(struct dlc_cache *cache, uint32_t ino, uint32_t index, const void *data,
			uint64_t size, bool room_only, bool *made)
{
	struct dlc_blocks_offer offer;

	if (!dlc_cache_blocks_prepare(cache, ino, index, &offer))
		return false;
	pthread_mutex_lock(&cache->lock);
	switch (dlc_cache_blocks_admit(cache, &offer, room_only)) {
	case DLC_BLOCKS_NO_ROOM:
		dlc_cache_unlock(cache);
		*made = false;
		return false;
	case DLC_BLOCKS_EVICT_FIRST:
		carry_out_victims(cache);
		break;
	case DLC_BLOCKS_ADMITTED:
	case DLC_BLOCKS_BYPASSED:
		break;
	}
	return dlc_cache_blocks_write(cache, &offer, data, size);
}

bool dlc_cache_block_offer(struct dlc_cache *cache, uint32_t ino, uint32_t index,
			   const void *data, uint64_t size)
{
	bool made;

	return block_offer(cache, ino, index, data, size, false, &made);
}

bool dlc_cache_block_offer_if_room(struct dlc_cache *cache, uint32_t ino, uint32_t index,
				   const void *data, uint64_t size)
{
	bool made = true;

	(void)block_offer(cache, ino, index, data, size, true, &made);
	return made;
}

int dlc_cache_announce(struct dlc_cache *cache, uint32_t ino)
{
	int rc;

	pthread_mutex_lock(&cache->lock);
	rc = dlc_policy_announce(cache->policy, ino);
	if (rc < 0 && !cache->plan_logged) {
		/* Prefetch goes on; admission plans with what it holds. */
		cache->plan_logged = true;
		dlc_log(DLC_LOG_WARNING, "an announced order is planned with only in part: %s (logged once)",
			rc == -ENOSPC ? "16 M announced reads not yet read are held; announce fewer epochs ahead"
				      : strerror(-rc));
	}
	dlc_cache_unlock(cache);
	return rc;
}

void dlc_cache_consume(struct dlc_cache *cache, uint32_t ino)
{
	pthread_mutex_lock(&cache->lock);
	dlc_policy_consume(cache->policy, ino);
	dlc_cache_unlock(cache);
}

void dlc_cache_gauges(struct dlc_cache *cache, struct dlc_cache_gauges *out)
{
	pthread_mutex_lock(&cache->lock);
	out->bytes = dlc_policy_used(cache->policy);
	out->entries = dlc_policy_entries(cache->policy);
	out->capacity = dlc_policy_capacity(cache->policy);
	out->admission = cache->admission;
	out->scores_known = cache->scores.known;
	out->announced = dlc_policy_announced(cache->policy);
	dlc_cache_unlock(cache);
}

int dlc_cache_save_scores(struct dlc_cache *cache)
{
	int rc;

	struct dlc_scores copy;
	size_t bytes;

	if (!cache->scores_file)
		return 0;
	/* Copy under the lock (a memcpy), write and fsync outside it. */
	pthread_mutex_lock(&cache->save_lock);
	copy.max_ino = cache->scores.max_ino;
	bytes = ((size_t)copy.max_ino + 1) * sizeof(*copy.values);
	copy.values = malloc(bytes);
	if (copy.values == NULL) {
		rc = -ENOMEM;
	} else {
		pthread_mutex_lock(&cache->lock);
		memcpy(copy.values, cache->scores.values, bytes);
		copy.known = cache->scores.known;
		dlc_cache_unlock(cache);
		rc = dlc_scores_save(&copy, cache->scores_file, dlc_snapshot_id(cache->snapshot));
		free(copy.values);
	}
	pthread_mutex_unlock(&cache->save_lock);
	if (rc < 0)
		dlc_log(DLC_LOG_WARNING, "cannot save the scores to %s: %s", cache->scores_file, strerror(-rc));
	return rc;
}

void dlc_cache_set_scores(struct dlc_cache *cache, const uint32_t *inos, const float *values,
			  size_t n)
{
	pthread_mutex_lock(&cache->lock);
	for (size_t i = 0; i < n; i++) {
		dlc_scores_set(&cache->scores, inos[i], values[i]);
		dlc_policy_rescore(cache->policy, inos[i]);
	}
	dlc_cache_unlock(cache);
}

void dlc_cache_reset_scores(struct dlc_cache *cache)
{
	pthread_mutex_lock(&cache->lock);
	dlc_scores_reset(&cache->scores);
	dlc_policy_rescore_all(cache->policy);
	dlc_cache_unlock(cache);
}

void dlc_cache_begin_pass(struct dlc_cache *cache, uint64_t epoch)
{
	pthread_mutex_lock(&cache->lock);
	dlc_policy_begin_pass(cache->policy, (uint32_t)epoch);
	dlc_cache_unlock(cache);
}

float dlc_cache_score(struct dlc_cache *cache, uint32_t ino)
{
	float score = NAN;

	pthread_mutex_lock(&cache->lock);
	if (ino >= 1 && ino <= cache->scores.max_ino)
		score = cache->scores.values[ino];
	dlc_cache_unlock(cache);
	return score;
}

bool dlc_cache_contains(struct dlc_cache *cache, uint32_t ino)
{
	bool ready;

	pthread_mutex_lock(&cache->lock);
	ready = is_ready(cache, ino);
	dlc_cache_unlock(cache);
	return ready;
}

int dlc_cache_list_scores(struct dlc_cache *cache, struct dlc_budget *budget, uint64_t ceiling,
			  char **text, size_t *len)
{
	struct scored { uint32_t ino; float score; } *batch = malloc(LIST_BATCH * sizeof(*batch));
	char path[DLC_SNAPSHOT_PATH_MAX];
	char line[DLC_SNAPSHOT_PATH_MAX + 32];
	struct dlc_text out;
	uint32_t count;
	int rc = 0;

	if (!batch)
		return -ENOMEM;
	dlc_text_init(&out, budget, ceiling);
	pthread_mutex_lock(&cache->lock);
	count = cache->scores.max_ino;
	pthread_mutex_unlock(&cache->lock);
	for (uint32_t first = 1; rc == 0 && first <= count; first += LIST_BATCH) {
		uint32_t last = count - first < LIST_BATCH ? count : first + LIST_BATCH - 1;
		uint32_t n = 0;

		/* A batch of the known scores under the lock; its lines without it. */
		pthread_mutex_lock(&cache->lock);
		for (uint32_t ino = first; ino <= last; ino++)
			if (!isnan(cache->scores.values[ino]))
				batch[n++] = (struct scored){ ino, cache->scores.values[ino] };
		pthread_mutex_unlock(&cache->lock);

		for (uint32_t i = 0; rc == 0 && i < n; i++) {
			int length;

			if (dlc_snapshot_path(cache->snapshot, batch[i].ino, path, sizeof(path)) < 0)
				continue;
			length = snprintf(line, sizeof(line), "%.9g %s\n", (double)batch[i].score, path);
			if (length > 0 && (size_t)length < sizeof(line))
				rc = dlc_text_append(&out, line, (size_t)length);
		}
	}
	free(batch);
	if (rc < 0) {
		dlc_text_discard(&out);
		return rc;
	}
	return dlc_text_finish(&out, text, len);
}

int dlc_cache_list(struct dlc_cache *cache, struct dlc_budget *budget, uint64_t ceiling,
		   char **text, size_t *len)
{
	uint32_t count = dlc_snapshot_count(cache->snapshot);
	uint32_t *batch = malloc(LIST_BATCH * sizeof(*batch));
	char path[DLC_SNAPSHOT_PATH_MAX + 1];
	struct dlc_text out;
	int rc = 0;

	if (!batch)
		return -ENOMEM;
	dlc_text_init(&out, budget, ceiling);
	for (uint32_t first = 1; rc == 0 && first <= count; first += LIST_BATCH) {
		uint32_t last = count - first < LIST_BATCH ? count : first + LIST_BATCH - 1;
		uint32_t n = 0;

		/* A batch of the ready set under the lock; its lines without it. */
		pthread_mutex_lock(&cache->lock);
		for (uint32_t ino = first; ino <= last; ino++)
			if (is_ready(cache, ino))
				batch[n++] = ino;
		dlc_cache_unlock(cache);

		for (uint32_t i = 0; rc == 0 && i < n; i++) {
			size_t length;

			if (dlc_snapshot_path(cache->snapshot, batch[i], path, DLC_SNAPSHOT_PATH_MAX) < 0)
				continue;
			length = strlen(path);
			path[length++] = '\n';
			rc = dlc_text_append(&out, path, length);
		}
	}
	free(batch);
	if (rc < 0) {
		dlc_text_discard(&out);
		return rc;
	}
	return dlc_text_finish(&out, text, len);
}
