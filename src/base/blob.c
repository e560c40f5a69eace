/*
 * blob.c - buffers shared by reference (blob.h): allocation, references,
 * and the spare buffers that keep the memory of put blobs of one capacity
 * for the next blob.
 *
 * INVARIANTS.  A blob's refs count its holders; the last put gives its size
 * back to its budget (if any) and its memory to its spares (if any, and not
 * full or closed) or to the system.  A spares set's lock guards its kept
 * buffers, count, refs and closed; refs counts the blobs out plus one until
 * dlc_blob_spares_close, and whoever drops it to 0 frees the set, so blobs
 * may outlive the close.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "dlcache/blob.h"
#include "dlcache/budget.h"

struct dlc_blob *dlc_blob_alloc(uint64_t size)
{
	struct dlc_blob *blob;

	if (size > SIZE_MAX - sizeof(*blob) - 1 || !(blob = malloc(sizeof(*blob) + size + 1)))
		return NULL;
	atomic_init(&blob->refs, 1);
	blob->budget = NULL;
	blob->spares = NULL;
	blob->base = NULL;
	blob->size = size;
	return blob;
}

struct dlc_blob *dlc_blob_get(struct dlc_blob *blob)
{
	atomic_fetch_add(&blob->refs, 1);
	return blob;
}

struct dlc_blob_spares {
	pthread_mutex_t lock;
	uint64_t capacity;
	unsigned max;
	unsigned count;                 /* lock: buffers in kept */
	unsigned refs;                  /* lock: blobs out, + 1 until closed */
	bool closed;                    /* lock */
	struct dlc_blob **kept;         /* lock: max slots */
};

static void blob_free(struct dlc_blob *blob)
{
	if (blob)
		free(blob->base ? blob->base : blob);
}

/*
 * A spare buffer of capacity (+ 1) bytes whose data starts on a page:
 * the store reads a whole block into it with O_DIRECT (store.h), which
 * wants the buffer, like the file offset and length, aligned.  The page
 * before data holds the blob's header.
 */
static struct dlc_blob *spare_new(uint64_t capacity)
{
	const size_t align = DLC_BLOB_SPARE_ALIGN;
	struct dlc_blob *blob;
	void *base;

	if (capacity > SIZE_MAX - 2 * align ||
	    posix_memalign(&base, align, align + ((capacity + 1 + align - 1) / align) * align) != 0)
		return NULL;
	blob = (struct dlc_blob *)((char *)base + align - sizeof(*blob));
	blob->base = base;
	return blob;
}

struct dlc_blob_spares *dlc_blob_spares_create(uint64_t capacity, unsigned max)
{
	struct dlc_blob_spares *spares = calloc(1, sizeof(*spares));

	if (!spares || capacity == 0 || !(spares->kept = calloc(max ? max : 1, sizeof(*spares->kept)))) {
		free(spares);
		return NULL;
	}
	pthread_mutex_init(&spares->lock, NULL);
	spares->capacity = capacity;
	spares->max = max;
	spares->refs = 1;
	return spares;
}

static void spares_free(struct dlc_blob_spares *spares)
{
	pthread_mutex_destroy(&spares->lock);
	free(spares->kept);
	free(spares);
}

struct dlc_blob *dlc_blob_spares_take(struct dlc_blob_spares *spares, uint64_t size)
{
	struct dlc_blob *blob = NULL;

	if (size > spares->capacity)
		return NULL;
	pthread_mutex_lock(&spares->lock);
	if (spares->count > 0)
		blob = spares->kept[--spares->count];
	pthread_mutex_unlock(&spares->lock);
	/* Every buffer has the full capacity, so that any can serve any size. */
	if (!blob && !(blob = spare_new(spares->capacity)))
		return NULL;
	pthread_mutex_lock(&spares->lock);
	spares->refs++;
	pthread_mutex_unlock(&spares->lock);
	atomic_init(&blob->refs, 1);
	blob->budget = NULL;
	blob->spares = spares;
	blob->size = size;
	return blob;
}

unsigned dlc_blob_spares_count(struct dlc_blob_spares *spares)
{
	unsigned n;

	pthread_mutex_lock(&spares->lock);
	n = spares->count;
	pthread_mutex_unlock(&spares->lock);
	return n;
}

/* The last reference of blob, from spares: kept, or freed. */
static void spares_put(struct dlc_blob_spares *spares, struct dlc_blob *blob)
{
	bool last;

	pthread_mutex_lock(&spares->lock);
	if (!spares->closed && spares->count < spares->max) {
		spares->kept[spares->count++] = blob;
		blob = NULL;
	}
	last = --spares->refs == 0;
	pthread_mutex_unlock(&spares->lock);
	blob_free(blob);
	if (last)
		spares_free(spares);
}

void dlc_blob_spares_close(struct dlc_blob_spares *spares)
{
	bool last;

	if (!spares)
		return;
	pthread_mutex_lock(&spares->lock);
	spares->closed = true;
	while (spares->count > 0)
		blob_free(spares->kept[--spares->count]);
	last = --spares->refs == 0;
	pthread_mutex_unlock(&spares->lock);
	if (last)
		spares_free(spares);
}

void dlc_blob_put(struct dlc_blob *blob)
{
	if (blob && atomic_fetch_sub(&blob->refs, 1) == 1) {
		dlc_budget_release(blob->budget, blob->size);
		if (blob->spares)
			spares_put(blob->spares, blob);
		else
			blob_free(blob);
	}
}
