/*
 * cache.c - the cache's state in one place: which inodes are cached (the
 * policy), the xxh3 of each ready entry, and the store's files.
 *
 * INVARIANTS.  cache->lock guards policy, hashes, ready, admission and
 * victims.  An inode is ready only if the policy contains it and its file was
 * written with the hash in hashes[ino].  Victims are removed from the store
 * while the lock is held, before the admitted entry's bytes are written, so
 * the files on disk never exceed the policy's capacity.  The store's own lock
 * nests inside cache->lock; dlc_store_read takes none, so a hit holds
 * cache->lock only to copy the hash.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dlcache/cache.h"
#include "dlcache/cause.h"
#include "dlcache/log.h"

struct dlc_cache {
	pthread_mutex_t lock;
	struct dlc_store *store;
	const struct dlc_snapshot *snapshot;
	struct dlc_stats *stats;
	struct dlc_policy *policy;      /* guarded by lock */
	struct dlc_scores scores;       /* guarded by lock (writes); the policy reads it */
	char *scores_file;              /* NULL: scores are not saved */
	uint64_t *hashes;               /* guarded by lock; per inode, valid when ready */
	uint64_t *stamps;               /* guarded by lock; per inode: the cache file as last
					 * checked in this mount, 0 = not checked yet */
	uint8_t *ready;                 /* guarded by lock; bitmap by inode */
	bool admission;                 /* guarded by lock */
	struct dlc_ino_list victims;    /* guarded by lock; scratch for admissions */
};

static bool is_ready(const struct dlc_cache *cache, uint32_t ino)
{
	return cache->ready[ino >> 3] & (1u << (ino & 7));
}

static void set_ready(struct dlc_cache *cache, uint32_t ino, bool ready)
{
	cache->stamps[ino] = 0;
	if (ready)
		cache->ready[ino >> 3] |= (uint8_t)(1u << (ino & 7));
	else
		cache->ready[ino >> 3] &= (uint8_t)~(1u << (ino & 7));
}

static int64_t node_mtime_ns(const struct dlc_node *node)
{
	return node->mtime_sec * 1000000000LL + node->mtime_nsec;
}

/* Deletes the store copy of ino; called with the lock held. */
static void drop_file(struct dlc_cache *cache, uint32_t ino)
{
	char path[4096];

	set_ready(cache, ino, false);
	if (dlc_snapshot_path(cache->snapshot, ino, path, sizeof(path)) == 0)
		(void)dlc_store_remove(cache->store, path);
}

struct restore_state {
	struct dlc_cache *cache;
	uint64_t kept;
	uint64_t dropped;
};

static int restore_entry(void *arg, const struct dlc_store_entry *entry)
{
	struct restore_state *state = arg;
	struct dlc_cache *cache = state->cache;
	uint64_t ino = dlc_snapshot_resolve(cache->snapshot, entry->path);
	const struct dlc_node *node = ino ? dlc_snapshot_node(cache->snapshot, ino) : NULL;

	if (!node || !S_ISREG(node->mode) || node->size != entry->size ||
	    node_mtime_ns(node) != entry->mtime_ns || dlc_policy_contains(cache->policy, (uint32_t)ino) ||
	    dlc_policy_restore(cache->policy, (uint32_t)ino, dlc_store_footprint(entry->size)) < 0) {
		state->dropped++;
		return 0;
	}
	cache->hashes[ino] = entry->hash;
	set_ready(cache, (uint32_t)ino, true);
	state->kept++;
	return 1;
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
	cache->store = store;
	cache->snapshot = snapshot;
	cache->stats = stats;
	cache->admission = kind != DLC_POLICY_NONE;
	cache->policy = dlc_policy_create(kind, capacity, count);
	cache->hashes = calloc((size_t)count + 1, sizeof(*cache->hashes));
	cache->stamps = calloc((size_t)count + 1, sizeof(*cache->stamps));
	cache->ready = calloc((size_t)count / 8 + 1, 1);
	if (!cache->policy || !cache->hashes || !cache->stamps || !cache->ready ||
	    dlc_scores_init(&cache->scores, count) < 0)
		goto err_nomem;
	if (scores_file) {
		cache->scores_file = strdup(scores_file);
		if (!cache->scores_file)
			goto err_nomem;
		rc = dlc_scores_load(&cache->scores, scores_file, dlc_snapshot_id(snapshot));
		if (rc == 0)
			dlc_log(DLC_LOG_INFO, "%u scores loaded from %s", cache->scores.known, scores_file);
		else if (rc == -ESTALE)
			dlc_log(DLC_LOG_INFO, "scores in %s belong to another snapshot: starting with none",
				scores_file);
		else if (rc != -ENOENT)
			dlc_log(DLC_LOG_WARNING, "cannot load the scores in %s (%s): starting with none",
				scores_file, strerror(-rc));
	}
	/* Before restoring: the importance heap is keyed by these scores. */
	dlc_policy_set_scores(cache->policy, cache->scores.values);

	state.cache = cache;
	rc = dlc_store_load(store, restore_entry, &state);
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
	dlc_policy_free(cache->policy);
	dlc_scores_destroy(&cache->scores);
	free(cache->scores_file);
	dlc_ino_list_free(&cache->victims);
	free(cache->hashes);
	free(cache->stamps);
	free(cache->ready);
	pthread_mutex_destroy(&cache->lock);
	free(cache);
}

int dlc_cache_read(struct dlc_cache *cache, uint32_t ino, void *buf, uint64_t size)
{
	char path[4096];
	uint64_t hash, stamp;
	int rc;

	pthread_mutex_lock(&cache->lock);
	if (!is_ready(cache, ino)) {
		pthread_mutex_unlock(&cache->lock);
		return -ENOENT;
	}
	hash = cache->hashes[ino];
	pthread_mutex_unlock(&cache->lock);

	rc = dlc_snapshot_path(cache->snapshot, ino, path, sizeof(path));
	if (rc < 0)
		return rc;
	rc = dlc_store_read(cache->store, path, buf, size, hash, &stamp);
	if (rc == 0) {
		pthread_mutex_lock(&cache->lock);
		if (is_ready(cache, ino) && cache->hashes[ino] == hash)
			cache->stamps[ino] = stamp;
		pthread_mutex_unlock(&cache->lock);
		return 0;
	}

	pthread_mutex_lock(&cache->lock);
	/* Drop it unless an eviction or a new insert got there first. */
	if (is_ready(cache, ino) && cache->hashes[ino] == hash) {
		dlc_policy_remove(cache->policy, ino);
		drop_file(cache, ino);
		dlc_stats_add(cache->stats, DLC_STAT_CORRUPT, 1);
		dlc_log(DLC_LOG_WARNING, "cached copy of %s dropped: %s", path,
			rc == -EBADMSG ? "its size or xxh3 does not match" : strerror(-rc));
	}
	pthread_mutex_unlock(&cache->lock);
	return -ENOENT;
}

int dlc_cache_open_checked(struct dlc_cache *cache, uint32_t ino)
{
	char path[4096];
	uint64_t stamp;
	int rc;

	pthread_mutex_lock(&cache->lock);
	stamp = is_ready(cache, ino) ? cache->stamps[ino] : 0;
	pthread_mutex_unlock(&cache->lock);
	if (!stamp)
		return -ESTALE;
	rc = dlc_snapshot_path(cache->snapshot, ino, path, sizeof(path));
	if (rc < 0)
		return rc;
	rc = dlc_store_open_checked(cache->store, path, stamp);
	return rc == -ENOENT ? -ESTALE : rc;
}

void dlc_cache_hit(struct dlc_cache *cache, uint32_t ino)
{
	pthread_mutex_lock(&cache->lock);
	if (is_ready(cache, ino))
		dlc_policy_hit(cache->policy, ino);
	pthread_mutex_unlock(&cache->lock);
}

bool dlc_cache_offer(struct dlc_cache *cache, uint32_t ino, const void *data, uint64_t size)
{
	const struct dlc_node *node = dlc_snapshot_node(cache->snapshot, ino);
	char path[4096];
	uint64_t hash;
	int rc;

	if (!node || dlc_snapshot_path(cache->snapshot, ino, path, sizeof(path)) < 0)
		goto bypass;

	pthread_mutex_lock(&cache->lock);
	if (!cache->admission || dlc_policy_contains(cache->policy, ino) ||
	    dlc_policy_admit(cache->policy, ino, dlc_store_footprint(size), &cache->victims) <= 0) {
		pthread_mutex_unlock(&cache->lock);
		goto bypass;
	}
	for (size_t i = 0; i < cache->victims.count; i++)
		drop_file(cache, cache->victims.items[i]);
	dlc_stats_add(cache->stats, DLC_STAT_EVICTIONS, cache->victims.count);
	pthread_mutex_unlock(&cache->lock);

	rc = dlc_store_insert(cache->store, path, data, size, node_mtime_ns(node), &hash);

	pthread_mutex_lock(&cache->lock);
	if (rc == 0 && !dlc_policy_contains(cache->policy, ino)) {
		/* Evicted by another admission while its bytes were being written. */
		(void)dlc_store_remove(cache->store, path);
		pthread_mutex_unlock(&cache->lock);
		goto bypass;
	}
	if (rc == 0) {
		cache->hashes[ino] = hash;
		set_ready(cache, ino, true);
		dlc_stats_add(cache->stats, DLC_STAT_ADMISSIONS, 1);
		pthread_mutex_unlock(&cache->lock);
		return true;
	}
	dlc_policy_remove(cache->policy, ino);
	if (rc == -ENOSPC && cache->admission) {
		cache->admission = false;
		dlc_log(DLC_LOG_WARNING, "cache disk under %s is full: admission is off until remount, reads go on from the source",
			dlc_store_dir(cache->store));
		dlc_stats_set_error(cache->stats, "cache disk full: admission turned off");
	} else if (rc != -ENOSPC && rc != -EEXIST && cache->admission) {
		/* A disk that fails one write (read-only, I/O errors, cache_dir
		 * removed) fails the next ones too: one warning, not one per miss. */
		cache->admission = false;
		dlc_log(DLC_LOG_WARNING, "cannot cache %s: %s; admission is off until remount, reads go on from the source",
			path, strerror(-rc));
		dlc_stats_set_error(cache->stats, "a write to the cache disk failed: admission turned off");
	}
	pthread_mutex_unlock(&cache->lock);
bypass:
	dlc_stats_add(cache->stats, DLC_STAT_BYPASSES, 1);
	return false;
}

void dlc_cache_gauges(struct dlc_cache *cache, struct dlc_cache_gauges *out)
{
	pthread_mutex_lock(&cache->lock);
	out->bytes = dlc_policy_used(cache->policy);
	out->entries = dlc_policy_entries(cache->policy);
	out->capacity = dlc_policy_capacity(cache->policy);
	out->admission = cache->admission;
	out->scores_known = cache->scores.known;
	pthread_mutex_unlock(&cache->lock);
}

int dlc_cache_save_scores(struct dlc_cache *cache)
{
	int rc;

	if (!cache->scores_file)
		return 0;
	pthread_mutex_lock(&cache->lock);
	rc = dlc_scores_save(&cache->scores, cache->scores_file, dlc_snapshot_id(cache->snapshot));
	pthread_mutex_unlock(&cache->lock);
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
	pthread_mutex_unlock(&cache->lock);
}

void dlc_cache_reset_scores(struct dlc_cache *cache)
{
	pthread_mutex_lock(&cache->lock);
	dlc_scores_reset(&cache->scores);
	dlc_policy_rescore_all(cache->policy);
	pthread_mutex_unlock(&cache->lock);
}

float dlc_cache_score(struct dlc_cache *cache, uint32_t ino)
{
	float score = NAN;

	pthread_mutex_lock(&cache->lock);
	if (ino >= 1 && ino <= cache->scores.max_ino)
		score = cache->scores.values[ino];
	pthread_mutex_unlock(&cache->lock);
	return score;
}

bool dlc_cache_contains(struct dlc_cache *cache, uint32_t ino)
{
	bool ready;

	pthread_mutex_lock(&cache->lock);
	ready = is_ready(cache, ino);
	pthread_mutex_unlock(&cache->lock);
	return ready;
}

int dlc_cache_list(struct dlc_cache *cache, char **text, size_t *len)
{
	uint32_t count = dlc_snapshot_count(cache->snapshot);
	struct dlc_ino_list inos = { 0 };
	char *buf = NULL;
	size_t used = 0, size = 0;
	char path[4096];
	int rc = 0;

	/* Copy the ready set under the lock; build the text without it. */
	pthread_mutex_lock(&cache->lock);
	inos.capacity = dlc_policy_entries(cache->policy) + 1;
	inos.items = malloc(inos.capacity * sizeof(*inos.items));
	for (uint32_t ino = 1; inos.items && ino <= count; ino++) {
		if (is_ready(cache, ino) && inos.count < inos.capacity)
			inos.items[inos.count++] = ino;
	}
	pthread_mutex_unlock(&cache->lock);
	if (!inos.items)
		return -ENOMEM;

	for (size_t i = 0; i < inos.count; i++) {
		size_t n;

		if (dlc_snapshot_path(cache->snapshot, inos.items[i], path, sizeof(path)) < 0)
			continue;
		n = strlen(path);
		if (used + n + 2 > size) {
			size_t grown = size ? size * 2 : 65536;
			char *bigger;

			while (grown < used + n + 2)
				grown *= 2;
			bigger = realloc(buf, grown);
			if (!bigger) {
				rc = -ENOMEM;
				break;
			}
			buf = bigger;
			size = grown;
		}
		memcpy(buf + used, path, n);
		used += n;
		buf[used++] = '\n';
	}
	dlc_ino_list_free(&inos);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	if (!buf)
		buf = calloc(1, 1);
	if (!buf)
		return -ENOMEM;
	*text = buf;
	*len = used;
	return 0;
}
