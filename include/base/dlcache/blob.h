/*
 * blob.h - a buffer of bytes shared by reference: a file's whole contents,
 * a block, a reply.  Its bytes may be drawn from a memory budget (given
 * back with the last reference) and its memory from a set of spare
 * buffers (kept for the next blob instead of going back to the system).
 *
 * Every buffer of the read path is a blob: the fetcher's whole files and
 * flights (read/fetch.c), the blocks of large files (read/blocks.c), the
 * replies of fuse/fs.c.  This module only holds the type; who charges what
 * to the budget is theirs (budget.h states the rule).
 */
#ifndef DLCACHE_BLOB_H
#define DLCACHE_BLOB_H

#include <stdatomic.h>
#include <stdint.h>

#include "dlcache/budget.h"

/*
 * Spare buffers start their data on a boundary of this many bytes, so that
 * a whole block can be read into one with O_DIRECT (store.h's
 * DLC_STORE_DIRECT_ALIGN must divide it; store.c checks).
 */
#define DLC_BLOB_SPARE_ALIGN 4096u

struct dlc_blob_spares; /* opaque: see below */

/* A file's whole contents (or a block's), shared by reference. */
struct dlc_blob {
	_Atomic unsigned refs;
	struct dlc_budget *budget;      /* what its bytes were taken from, or NULL */
	struct dlc_blob_spares *spares; /* where its memory goes when put, or NULL: freed */
	void *base;                     /* what to free: the blob itself when NULL */
	uint64_t size;
	unsigned char data[];
};

/* Takes one more reference; returns blob. */
struct dlc_blob *dlc_blob_get(struct dlc_blob *blob);

/* A blob of size bytes (+ 1 spare byte) on the heap, refs 1, outside any
 * budget or spares (dlc_blob_put frees it); NULL on ENOMEM. */
struct dlc_blob *dlc_blob_alloc(uint64_t size);
/* Drops a reference; the last gives its bytes back to its budget, and its
 * memory to its spares (or to the system). */
void dlc_blob_put(struct dlc_blob *blob);

/*
 * Spare buffers: the memory of put blobs of one capacity, kept for the next
 * blob instead of going back to the system.  Fresh memory costs a page
 * fault per 4 KiB page on first touch, and a fault is dear in a VM (about
 * 20 us each on this project's machine: 20 ms to fill a 4 MiB block, ten
 * times the time to read it from a cold local file).  At most max buffers
 * are kept; the blocks' buffers (blocks.c) come from here.
 */
/* NULL on ENOMEM; capacity > 0: the largest blob size it serves. */
struct dlc_blob_spares *dlc_blob_spares_create(uint64_t capacity, unsigned max);
/* A blob of size <= capacity bytes (+ 1 spare byte), refs 1, no budget:
 * a kept buffer if any, else new memory; NULL on ENOMEM. */
struct dlc_blob *dlc_blob_spares_take(struct dlc_blob_spares *spares, uint64_t size);
/* Buffers kept now (for tests). */
unsigned dlc_blob_spares_count(struct dlc_blob_spares *spares);
/* Frees the kept buffers; blobs still out free theirs when put, and the
 * last of them frees spares. */
void dlc_blob_spares_close(struct dlc_blob_spares *spares);

#endif
