/*
 * read.h - the read path's one face: open a dataset file, read ranges of
 * it, close it.  The FUSE layer calls nothing else to serve a file's bytes.
 *
 * dlc_read_open looks the file up once and chooses how it is served, once:
 * a cache file checked earlier in this mount (a hit: one visit to the
 * cache, dlc_cache_open_hit), a large file's cached blocks opened whole
 * (when the caller can pass a file through to the kernel), the whole file
 * in memory (from the cache, staged by a prefetch, a chunk member, the
 * tier, or the source, through fetch.h's single flight), or a reader by
 * blocks (blocks.h).  What may wait on the source is not done on the
 * caller's thread: dlc_read_open then answers DLC_READ_MUST_WAIT and the
 * caller finishes the open with dlc_read_open_wait on a thread that may
 * wait (the FUSE layer's source pool), as dlc_read_at does for a read.
 *
 * The caller picks its reply form from what a read gives back (a range of
 * a file descriptor to splice, or bytes) and tells the face how the kernel
 * serves the open (dlc_read_opened: passed through or not); it never needs
 * to know which kind of handle it holds.
 *
 * Outcomes are an enum (enum dlc_read_outcome), returned beside -errno:
 * an errno is always a real error.
 */
#ifndef DLCACHE_READ_H
#define DLCACHE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlcache/blob.h"
#include "dlcache/budget.h"
#include "dlcache/fetch.h"
#include "dlcache/snapshot.h"

struct dlc_read;        /* per mount; opaque */
struct dlc_read_handle; /* per open file; opaque */

/* What the caller can take, for dlc_read_open's caps. */
#define DLC_READ_CAN_PASSTHROUGH 1u     /* a cache file the kernel reads itself */

/* The outcomes of dlc_read_open and dlc_read_at that are not errors. */
enum dlc_read_outcome {
	DLC_READ_DONE = 0,      /* done here */
	DLC_READ_MUST_WAIT = 1, /* call again where waiting is allowed (see each) */
};

/*
 * NULL on ENOMEM.  Files larger than max_file are read by blocks; read
 * replies draw their buffers from budget (may be NULL).  The arguments
 * must outlive it.
 */
struct dlc_read *dlc_read_create(struct dlc_fetch *fetch, const struct dlc_snapshot *snapshot,
				 struct dlc_budget *budget, uint64_t max_file);
/* Every handle must be closed first. */
void dlc_read_free(struct dlc_read *read);

/*
 * Opens regular file ino for reading.  -ENOENT, -EISDIR, -ELOOP (not a
 * regular file), -ENOMEM; otherwise *out is a handle and the return is
 * DLC_READ_DONE (ready: a hit that needed no reading), or
 * DLC_READ_MUST_WAIT: finish it with dlc_read_open_wait on a thread that
 * may wait on the source, or dlc_read_close it.  Never waits on the source.
 */
int dlc_read_open(struct dlc_read *read, uint64_t ino, unsigned caps, struct dlc_read_handle **out);

/*
 * What an open leaves to do once its reader has the answer: a prefetched
 * file's bytes go to the cache then (fetch.h: dlc_fetch_get_answer_first).
 * Owned by the caller, so that it outlives a handle the kernel may release
 * as soon as it has the answer.
 */
struct dlc_read_later {
	struct dlc_fetch *fetch;
	uint32_t ino;
	struct dlc_blob *blob;
};

/* The rest of an open that answered DLC_READ_MUST_WAIT; may wait on the
 * source.  0 or -errno (-EIO: the source failed; h is still to be closed).
 * Pass later to dlc_read_after_answer once the open is answered, whatever
 * the outcome. */
int dlc_read_open_wait(struct dlc_read_handle *h, struct dlc_read_later *later);
void dlc_read_after_answer(struct dlc_read_later *later);

/* A cache file whose bytes are the file's, for the caller to hand to the
 * kernel (passthrough), or -1.  Owned by h. */
int dlc_read_backing_fd(const struct dlc_read_handle *h);

/*
 * The caller tells how the open is served: passed_through, the kernel reads
 * dlc_read_backing_fd itself; otherwise every read comes to dlc_read_at
 * (a large file's whole open then turns into a reader by blocks).  Counts
 * the hit that stays.  0 or -errno.
 */
int dlc_read_opened(struct dlc_read_handle *h, bool passed_through);

/* One read's answer: len bytes at data, or (fd >= 0) len bytes of fd from
 * pos on, to splice (fewer at the end of the file). */
struct dlc_read_reply {
	int fd;
	off_t pos;
	const void *data;
	size_t len;
	struct dlc_blob *held;          /* data's buffer: the reply's reference */
	size_t charged;                 /* bytes of the budget it holds */
	struct dlc_budget *budget;
};

/*
 * Reads size bytes at off.  With may_wait false (a FUSE thread), answers
 * only from what is at hand and returns DLC_READ_MUST_WAIT when the read
 * must wait for the source; with may_wait true it waits.  DLC_READ_DONE
 * fills reply, released with dlc_read_reply_done once sent; or -EIO,
 * -ENOMEM.
 */
int dlc_read_at(struct dlc_read_handle *h, size_t size, off_t off, bool may_wait,
		struct dlc_read_reply *reply);
void dlc_read_reply_done(struct dlc_read_reply *reply);

/*
 * A read of h was answered for time by the caller (its deadline passed
 * before dlc_read_at could run): a large file read by blocks is noted as
 * one whose source read failed for time (dlc_blocks_note_failed), so that
 * the kernel's at-once re-read of the page fails at once too.  Other kinds
 * need nothing.  Never waits.
 */
void dlc_read_note_expired(struct dlc_read_handle *h);

/* Closes h; NULL is a no-op. */
void dlc_read_close(struct dlc_read_handle *h);

#endif
