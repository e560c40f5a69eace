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
 * INVARIANTS.  fetch->lock guards the flight list and every flight's fields.
 * A flight is referenced by its owner and by each waiter (refs); the last
 * one to drop it frees it.  At most one flight per inode is in the list.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

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
	pthread_mutex_t lock;
	pthread_cond_t landed;          /* broadcast when any flight lands */
	struct flight *flights;         /* guarded by lock */
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
				   struct dlc_cache *cache, struct dlc_stats *stats)
{
	struct dlc_fetch *fetch = calloc(1, sizeof(*fetch));

	if (!fetch)
		return NULL;
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
	assert(fetch->flights == NULL);
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

int dlc_fetch_get(struct dlc_fetch *fetch, uint32_t ino, struct dlc_blob **out)
{
	const struct dlc_node *node = dlc_snapshot_node(fetch->snapshot, ino);
	struct dlc_blob *blob;
	struct flight *flight;
	bool owner = false;
	int rc;

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
		fly(fetch, flight, node->size);

	pthread_mutex_lock(&fetch->lock);
	while (!flight->landed)
		pthread_cond_wait(&fetch->landed, &fetch->lock);
	rc = flight->rc;
	if (rc == 0)
		*out = blob_get(flight->blob);
	flight_put(fetch, flight);
	pthread_mutex_unlock(&fetch->lock);
	return rc;
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
