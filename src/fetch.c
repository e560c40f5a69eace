/*
 * fetch.c - one remote fetch per missing sample, however many readers.
 *
 * A reader first asks the cache.  On a miss it looks for a flight (a fetch
 * in progress) for the same inode: if there is one it waits for it and
 * shares its bytes; if not, it starts one, reads the whole file from the
 * source without holding any lock, offers the bytes to the cache, and only
 * then lands the flight, so that a reader arriving while the bytes are being
 * written to the cache joins the flight instead of starting a second fetch.
 *
 * Prefetch workers pop inodes from a ring under the same lock and fly them
 * like misses; a reader that arrives meanwhile joins the flight.
 *
 * INVARIANTS.  fetch->lock guards the flight list, every flight's fields,
 * the prefetch ring and the stopping flag.
 * A flight is referenced by its owner and by each waiter (refs); the last
 * one to drop it frees it.  At most one flight per inode is in the list.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dlcache/fetch.h"
#include "dlcache/log.h"

struct flight {
	uint32_t ino;
	unsigned refs;
	bool landed;
	int rc;
	struct dlc_blob *blob;          /* one reference held by the flight once landed */
	struct flight *next;
};

struct dlc_fetch {
	struct dlc_backend *backend;
	const struct dlc_snapshot *snapshot;
	struct dlc_cache *cache;
	struct dlc_stats *stats;
	uint64_t max_file;
	pthread_mutex_t lock;
	pthread_cond_t landed;          /* broadcast when any flight lands */
	struct flight *flights;         /* guarded by lock */
	pthread_cond_t queued;          /* signalled when the ring gains work or stopping */
	uint32_t *ring;                 /* guarded by lock: DLC_FETCH_QUEUE prefetch requests */
	size_t ring_head;               /* guarded by lock: next to pop */
	size_t ring_count;              /* guarded by lock */
	bool stopping;                  /* guarded by lock */
	pthread_t *workers;
	unsigned nworkers;
};

/* Largest single read from the source. */
#define READ_CHUNK (8u << 20)

/* A blob of size bytes, with room for one more (see read_source). */
static struct dlc_blob *blob_new(uint64_t size)
{
	struct dlc_blob *blob = malloc(sizeof(*blob) + size + 1);

	if (!blob)
		return NULL;
	atomic_init(&blob->refs, 1);
	blob->size = size;
	return blob;
}

static struct dlc_blob *blob_get(struct dlc_blob *blob)
{
	atomic_fetch_add(&blob->refs, 1);
	return blob;
}

void dlc_blob_put(struct dlc_blob *blob)
{
	if (blob && atomic_fetch_sub(&blob->refs, 1) == 1)
		free(blob);
}

struct dlc_fetch *dlc_fetch_create(struct dlc_backend *backend, const struct dlc_snapshot *snapshot,
				   struct dlc_cache *cache, struct dlc_stats *stats, uint64_t max_file)
{
	struct dlc_fetch *fetch = calloc(1, sizeof(*fetch));

	if (!fetch)
		return NULL;
	fetch->ring = malloc(DLC_FETCH_QUEUE * sizeof(*fetch->ring));
	if (!fetch->ring) {
		free(fetch);
		return NULL;
	}
	fetch->max_file = max_file;
	pthread_cond_init(&fetch->queued, NULL);
	fetch->backend = backend;
	fetch->snapshot = snapshot;
	fetch->cache = cache;
	fetch->stats = stats;
	pthread_mutex_init(&fetch->lock, NULL);
	pthread_cond_init(&fetch->landed, NULL);
	return fetch;
}

void dlc_fetch_free(struct dlc_fetch *fetch)
{
	if (!fetch)
		return;
	dlc_fetch_stop(fetch);
	assert(fetch->flights == NULL);
	free(fetch->ring);
	pthread_cond_destroy(&fetch->queued);
	pthread_cond_destroy(&fetch->landed);
	pthread_mutex_destroy(&fetch->lock);
	free(fetch);
}

/*
 * Reads the whole of path (blob->size bytes per the snapshot) from the
 * source.  Reads ask for one byte more than is still missing (the blob has
 * room for it), and drivers return short reads only at end of file, so a
 * small sample costs one read that also proves its size.  A file that shrank
 * or grew since the snapshot gives -ESTALE.
 */
static int read_source(struct dlc_fetch *fetch, const char *path, struct dlc_blob *blob)
{
	struct dlc_backend_file *file;
	uint64_t done = 0;
	int rc;

	rc = dlc_backend_open(fetch->backend, path, &file);
	if (rc < 0)
		return rc;
	for (;;) {
		uint64_t left = blob->size + 1 - done;
		size_t want = left > READ_CHUNK ? READ_CHUNK : (size_t)left;
		ssize_t n = dlc_backend_pread(fetch->backend, file, blob->data + done, want, done);

		if (n < 0) {
			rc = (int)n;
			break;
		}
		done += (uint64_t)n;
		if (done > blob->size) {
			rc = -ESTALE;
			break;
		}
		if ((size_t)n < want) {
			rc = done == blob->size ? 0 : -ESTALE;
			break;
		}
	}
	dlc_backend_close(fetch->backend, file);
	return rc;
}

static void flight_put(struct dlc_fetch *fetch, struct flight *flight)
{
	if (--flight->refs == 0) {
		dlc_blob_put(flight->blob);
		free(flight);
	}
}

/* Fetches ino from the source as the owner of flight, then lands it. */
static int fly(struct dlc_fetch *fetch, struct flight *flight, uint64_t size)
{
	struct dlc_blob *blob = blob_new(size);
	char path[4096];
	int rc;

	rc = blob ? dlc_snapshot_path(fetch->snapshot, flight->ino, path, sizeof(path)) : -ENOMEM;
	if (rc == 0)
		rc = read_source(fetch, path, blob);
	if (rc == 0) {
		dlc_stats_add(fetch->stats, DLC_STAT_BYTES_FROM_REMOTE, size);
		dlc_cache_offer(fetch->cache, flight->ino, blob->data, size);
	} else if (rc != -ENOMEM) {
		dlc_stats_add(fetch->stats, DLC_STAT_REMOTE_ERRORS, 1);
		if (rc == -ESTALE) {
			dlc_log(DLC_LOG_WARNING, "%s changed size on the source since the snapshot; remount with -o refresh", path);
			dlc_stats_set_error(fetch->stats, "a file changed size on the source since the snapshot");
		} else {
			dlc_log(DLC_LOG_WARNING, "cannot read %s from the source: %s", path, strerror(-rc));
			dlc_stats_set_error(fetch->stats, "a read from the source failed");
		}
		rc = -EIO;
	}

	pthread_mutex_lock(&fetch->lock);
	for (struct flight **p = &fetch->flights; *p; p = &(*p)->next) {
		if (*p == flight) {
			*p = flight->next;
			break;
		}
	}
	flight->landed = true;
	flight->rc = rc;
	if (rc == 0)
		flight->blob = blob;
	else
		dlc_blob_put(blob);
	pthread_cond_broadcast(&fetch->landed);
	pthread_mutex_unlock(&fetch->lock);
	return rc;
}

/*
 * Joins the flight for ino, or starts and flies it, and waits for it to land.
 * On success *out (when out is not NULL) holds a reference to the bytes.
 */
static int obtain(struct dlc_fetch *fetch, uint32_t ino, uint64_t size, struct dlc_blob **out)
{
	struct flight *flight;
	bool owner = false;
	int rc;

	pthread_mutex_lock(&fetch->lock);
	for (flight = fetch->flights; flight; flight = flight->next)
		if (flight->ino == ino)
			break;
	if (!flight) {
		flight = calloc(1, sizeof(*flight));
		if (!flight) {
			pthread_mutex_unlock(&fetch->lock);
			return -ENOMEM;
		}
		flight->ino = ino;
		flight->next = fetch->flights;
		fetch->flights = flight;
		owner = true;
	}
	flight->refs++;
	pthread_mutex_unlock(&fetch->lock);

	if (owner)
		fly(fetch, flight, size);

	pthread_mutex_lock(&fetch->lock);
	while (!flight->landed)
		pthread_cond_wait(&fetch->landed, &fetch->lock);
	rc = flight->rc;
	if (rc == 0 && out)
		*out = blob_get(flight->blob);
	flight_put(fetch, flight);
	pthread_mutex_unlock(&fetch->lock);
	return rc;
}

int dlc_fetch_get(struct dlc_fetch *fetch, uint32_t ino, struct dlc_blob **out)
{
	const struct dlc_node *node = dlc_snapshot_node(fetch->snapshot, ino);
	struct dlc_blob *blob;

	if (!node)
		return -ENOENT;
	blob = blob_new(node->size);
	if (!blob)
		return -ENOMEM;
	if (dlc_cache_read(fetch->cache, ino, blob->data, node->size) == 0) {
		dlc_cache_hit(fetch->cache, ino);
		dlc_stats_add(fetch->stats, DLC_STAT_HITS, 1);
		dlc_stats_add(fetch->stats, DLC_STAT_BYTES_FROM_CACHE, node->size);
		*out = blob;
		return 0;
	}
	dlc_blob_put(blob);
	dlc_stats_add(fetch->stats, DLC_STAT_MISSES, 1);
	return obtain(fetch, ino, node->size, out);
}

int dlc_fetch_open_cached(struct dlc_fetch *fetch, uint32_t ino)
{
	const struct dlc_node *node = dlc_snapshot_node(fetch->snapshot, ino);
	int fd;

	if (!node)
		return -ENOENT;
	fd = dlc_cache_open_checked(fetch->cache, ino);
	if (fd < 0)
		return fd;
	dlc_cache_hit(fetch->cache, ino);
	dlc_stats_add(fetch->stats, DLC_STAT_HITS, 1);
	dlc_stats_add(fetch->stats, DLC_STAT_BYTES_FROM_CACHE, node->size);
	return fd;
}

static void *prefetch_worker(void *arg)
{
	struct dlc_fetch *fetch = arg;

	pthread_mutex_lock(&fetch->lock);
	for (;;) {
		const struct dlc_node *node;
		uint32_t ino;

		while (!fetch->stopping && fetch->ring_count == 0)
			pthread_cond_wait(&fetch->queued, &fetch->lock);
		if (fetch->stopping)
			break;
		ino = fetch->ring[fetch->ring_head];
		fetch->ring_head = (fetch->ring_head + 1) % DLC_FETCH_QUEUE;
		fetch->ring_count--;
		pthread_mutex_unlock(&fetch->lock);

		node = dlc_snapshot_node(fetch->snapshot, ino);
		if (!dlc_cache_contains(fetch->cache, ino)) {
			dlc_stats_add(fetch->stats, DLC_STAT_PREFETCHES, 1);
			obtain(fetch, ino, node->size, NULL);
		}
		pthread_mutex_lock(&fetch->lock);
	}
	pthread_mutex_unlock(&fetch->lock);
	return NULL;
}

int dlc_fetch_start(struct dlc_fetch *fetch, unsigned workers)
{
	fetch->workers = calloc(workers, sizeof(*fetch->workers));
	if (!fetch->workers)
		return -ENOMEM;
	for (unsigned i = 0; i < workers; i++) {
		int rc = pthread_create(&fetch->workers[i], NULL, prefetch_worker, fetch);

		if (rc != 0) {
			dlc_fetch_stop(fetch);
			return -rc;
		}
		fetch->nworkers++;
	}
	return 0;
}

bool dlc_fetch_prefetch(struct dlc_fetch *fetch, uint32_t ino)
{
	const struct dlc_node *node = dlc_snapshot_node(fetch->snapshot, ino);
	bool queued = false;

	if (!node || !S_ISREG(node->mode) || node->size > fetch->max_file)
		return false;
	pthread_mutex_lock(&fetch->lock);
	if (fetch->ring_count < DLC_FETCH_QUEUE && fetch->nworkers > 0 && !fetch->stopping) {
		fetch->ring[(fetch->ring_head + fetch->ring_count) % DLC_FETCH_QUEUE] = ino;
		fetch->ring_count++;
		queued = true;
		pthread_cond_signal(&fetch->queued);
	}
	pthread_mutex_unlock(&fetch->lock);
	return queued;
}

void dlc_fetch_stop(struct dlc_fetch *fetch)
{
	pthread_mutex_lock(&fetch->lock);
	fetch->stopping = true;
	fetch->ring_count = 0;
	pthread_cond_broadcast(&fetch->queued);
	pthread_mutex_unlock(&fetch->lock);
	for (unsigned i = 0; i < fetch->nworkers; i++)
		pthread_join(fetch->workers[i], NULL);
	fetch->nworkers = 0;
	free(fetch->workers);
	fetch->workers = NULL;
}

int dlc_fetch_open_direct(struct dlc_fetch *fetch, uint32_t ino, struct dlc_backend_file **out)
{
	char path[4096];
	int rc;

	rc = dlc_snapshot_path(fetch->snapshot, ino, path, sizeof(path));
	if (rc < 0)
		return rc;
	dlc_stats_add(fetch->stats, DLC_STAT_MISSES, 1);
	dlc_stats_add(fetch->stats, DLC_STAT_BYPASSES, 1);
	rc = dlc_backend_open(fetch->backend, path, out);
	if (rc < 0) {
		dlc_stats_add(fetch->stats, DLC_STAT_REMOTE_ERRORS, 1);
		dlc_log(DLC_LOG_WARNING, "cannot open %s on the source: %s", path, strerror(-rc));
		return -EIO;
	}
	return 0;
}

ssize_t dlc_fetch_read_direct(struct dlc_fetch *fetch, struct dlc_backend_file *file, void *buf,
			      size_t len, uint64_t off)
{
	ssize_t n = dlc_backend_pread(fetch->backend, file, buf, len, off);

	if (n < 0) {
		dlc_stats_add(fetch->stats, DLC_STAT_REMOTE_ERRORS, 1);
		dlc_log(DLC_LOG_WARNING, "read from the source failed: %s", strerror((int)-n));
		return -EIO;
	}
	dlc_stats_add(fetch->stats, DLC_STAT_BYTES_FROM_REMOTE, (uint64_t)n);
	return n;
}

void dlc_fetch_close_direct(struct dlc_fetch *fetch, struct dlc_backend_file *file)
{
	dlc_backend_close(fetch->backend, file);
}
