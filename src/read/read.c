/*
 * read.c - the read path's face (read.h): where an open of a dataset file
 * is told how it is served, and where its reads are answered from.
 *
 * The choice, made once per open from the snapshot's node (one lookup):
 *
 *   size <= max_file   a checked cache file (dlc_fetch_open_cached: one
 *                      visit to the cache) -> FD, done on the caller's
 *                      thread; otherwise the whole file in memory
 *                      (dlc_fetch_get_answer_first) -> BUFFER, must wait;
 *                      it is given what the open saw (the size, the
 *                      cached copy's hash): a first hit in the mount, read
 *                      whole and checked, looks nothing up again and
 *                      visits the cache once more, after its read
 *   size >  max_file   with DLC_READ_CAN_PASSTHROUGH, its cached blocks
 *                      opened whole (checked first if need be, which must
 *                      wait) -> FD, kept only if the open passes through
 *                      (dlc_read_opened); otherwise, or when not all
 *                      cached, a reader by blocks -> BLOCKS, must wait
 *
 * A read of an FD handle is a range of the cache file to splice; of a
 * BUFFER, a slice of the shared bytes (the reply holds a reference: once
 * the kernel has the reply it may release the open, and another thread
 * close the handle, before the reply is sent); of BLOCKS, a copy into a
 * reply buffer drawn from the budget, answered at once when the blocks are
 * at hand, else on a thread that may wait.
 *
 * Reply buffers are kept for the next read rather than given back: fresh
 * memory costs a page fault per 4 KiB on first touch (about 20 us on a VM;
 * fetch.h), and a buffer of 1 MiB, at malloc's mmap threshold (main.c),
 * would be fresh every time.  REPLY_SPARES of them stay: the FUSE threads'
 * and the source pool's.
 *
 * A handle is used by one open: its reads may run at the same time (FUSE
 * threads, the pool), and only read it; open, open_wait, opened and close
 * each run alone (before the open is answered, or at release).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlcache/blocks.h"
#include "dlcache/deadline.h"
#include "dlcache/read.h"

/* Up to the kernel's largest request (256 pages). */
#define REPLY_CAPACITY (1u << 20)
#define REPLY_SPARES 16

struct dlc_read {
	struct dlc_fetch *fetch;
	const struct dlc_snapshot *snapshot;
	struct dlc_budget *budget;
	uint64_t max_file;
	struct dlc_blob_spares *replies;        /* read replies' buffers, reused */
};

enum kind {
	KIND_PENDING,   /* opened, not finished (dlc_read_open_wait) */
	KIND_FD,        /* a checked cache file, spliced or passed through */
	KIND_BUFFER,    /* the whole file in memory */
	KIND_BLOCKS,    /* a large file, read by blocks (blocks.h) */
};

struct dlc_read_handle {
	struct dlc_read *read;
	uint32_t ino;
	uint64_t size;
	unsigned caps;
	bool large;             /* size > max_file */
	struct dlc_fetch_seen seen;     /* what the open saw, for open_wait (not large) */
	enum kind kind;
	int fd;                 /* KIND_FD */
	struct dlc_blob *blob;  /* KIND_BUFFER */
	struct dlc_block_reader *blocks;        /* KIND_BLOCKS */
};

struct dlc_read *dlc_read_create(struct dlc_fetch *fetch, const struct dlc_snapshot *snapshot,
				 struct dlc_budget *budget, uint64_t max_file)
{
	struct dlc_read *read = calloc(1, sizeof(*read));

	if (!read)
		return NULL;
	*read = (struct dlc_read) { .fetch = fetch, .snapshot = snapshot, .budget = budget,
				    .max_file = max_file };
	read->replies = dlc_blob_spares_create(REPLY_CAPACITY, REPLY_SPARES);
	if (!read->replies) {
		free(read);
		return NULL;
	}
	return read;
}

void dlc_read_free(struct dlc_read *read)
{
	if (!read)
		return;
	dlc_blob_spares_close(read->replies);
	free(read);
}

int dlc_read_open(struct dlc_read *read, uint64_t ino, unsigned caps, struct dlc_read_handle **out)
{
	const struct dlc_node *node = dlc_snapshot_node(read->snapshot, ino);
	struct dlc_read_handle *h;
	enum dlc_fetch_found found = DLC_FETCH_MISS;

	*out = NULL;
	if (!node)
		return -ENOENT;
	if (S_ISDIR(node->mode))
		return -EISDIR;
	if (!S_ISREG(node->mode))
		return -ELOOP;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	*h = (struct dlc_read_handle) { .read = read, .ino = (uint32_t)ino, .size = node->size,
					.caps = caps, .large = node->size > read->max_file,
					.kind = KIND_PENDING, .fd = -1 };
	*out = h;
	if (!h->large)
		found = dlc_fetch_open_cached(read->fetch, h->ino, h->size, &h->fd, &h->seen);
	else if (caps & DLC_READ_CAN_PASSTHROUGH)
		found = dlc_fetch_open_cached_blocks(read->fetch, h->ino, false, &h->fd);
	/* else read by blocks: splicing 1 MiB replies is slower */
	if (found == DLC_FETCH_FOUND) {
		h->kind = KIND_FD;
		return DLC_READ_DONE;
	}
	return DLC_READ_MUST_WAIT;
}

int dlc_read_open_wait(struct dlc_read_handle *h, struct dlc_read_later *later)
{
	struct dlc_fetch *fetch = h->read->fetch;

	*later = (struct dlc_read_later) { .fetch = fetch, .ino = h->ino };
	if (!h->large) {
		h->kind = KIND_BUFFER;
		return dlc_fetch_get_answer_first(fetch, h->ino, &h->seen, &h->blob, &later->blob);
	}
	/* All blocks cached but not all checked in this mount: checked here,
	 * whole, so that the file can pass through. */
	if ((h->caps & DLC_READ_CAN_PASSTHROUGH) &&
	    dlc_fetch_open_cached_blocks(fetch, h->ino, true, &h->fd) == DLC_FETCH_FOUND) {
		h->kind = KIND_FD;
		return 0;
	}
	h->kind = KIND_BLOCKS;
	return dlc_fetch_open_direct(fetch, h->ino, &h->blocks);
}

void dlc_read_after_answer(struct dlc_read_later *later)
{
	if (later->fetch)
		dlc_fetch_offer_later(later->fetch, later->ino, later->blob);
	later->blob = NULL;
}

int dlc_read_backing_fd(const struct dlc_read_handle *h)
{
	return h->kind == KIND_FD ? h->fd : -1;
}

int dlc_read_opened(struct dlc_read_handle *h, bool passed_through)
{
	/* A large file opened whole is worth it only passed through: the
	 * daemon serves it by blocks otherwise (the inode has daemon-served
	 * opens live, or the kernel refused the backing file). */
	if (h->kind != KIND_FD || !h->large)
		return 0;
	if (passed_through) {
		dlc_fetch_note_whole_hit(h->read->fetch, h->ino, h->size);
		return 0;
	}
	close(h->fd);
	h->fd = -1;
	h->kind = KIND_BLOCKS;
	return dlc_fetch_open_direct(h->read->fetch, h->ino, &h->blocks);
}

/* A buffer for a reply of size bytes (blob->data), or NULL; dlc_blob_put it. */
static struct dlc_blob *reply_buffer(struct dlc_read *read, size_t size)
{
	struct dlc_blob *blob = dlc_blob_spares_take(read->replies, size);

	if (!blob && size > REPLY_CAPACITY)
		blob = dlc_blob_alloc(size);
	return blob;
}

/* KIND_BLOCKS: a copy into a reply buffer charged to the budget. */
static int read_blocks(struct dlc_read_handle *h, size_t size, off_t off, bool may_wait,
		       struct dlc_read_reply *reply)
{
	struct dlc_read *read = h->read;
	struct dlc_budget *budget = read->budget;
	ssize_t n = -ENOMEM;
	bool done;

	/* No room for the reply by the request's deadline (deadline.h): the
	 * read fails rather than wait for a close that may never come. */
	if (may_wait) {
		if (dlc_budget_acquire_by(budget, size, dlc_deadline_get()) < 0)
			return -ENOMEM;
	} else if (!dlc_budget_try_acquire(budget, size, budget ? budget->limit : 0))
		return DLC_READ_MUST_WAIT;
	reply->held = reply_buffer(read, size);
	reply->charged = size;
	reply->budget = budget;
	if (may_wait) {
		if (reply->held)
			n = dlc_fetch_read_direct(read->fetch, h->ino, h->blocks, reply->held->data,
						  size, (uint64_t)off);
		done = true;
	} else {
		done = reply->held && dlc_fetch_try_read_direct(read->fetch, h->blocks,
								 reply->held->data, size,
								 (uint64_t)off, &n);
	}
	if (!done || n < 0) {
		dlc_read_reply_done(reply);
		return done ? (int)n : DLC_READ_MUST_WAIT;
	}
	reply->data = reply->held->data;
	reply->len = (size_t)n;
	return DLC_READ_DONE;
}

void dlc_read_note_expired(struct dlc_read_handle *h)
{
	if (h->kind == KIND_BLOCKS && h->blocks)
		dlc_blocks_note_failed(h->blocks);
}

int dlc_read_at(struct dlc_read_handle *h, size_t size, off_t off, bool may_wait,
		struct dlc_read_reply *reply)
{
	*reply = (struct dlc_read_reply) { .fd = -1 };
	switch (h->kind) {
	case KIND_FD:
		reply->fd = h->fd;
		reply->pos = off;
		reply->len = size;
		return DLC_READ_DONE;
	case KIND_BUFFER:
		reply->held = dlc_blob_get(h->blob);
		if ((uint64_t)off < h->blob->size) {
			uint64_t left = h->blob->size - (uint64_t)off;

			reply->data = h->blob->data + off;
			reply->len = left < size ? (size_t)left : size;
		}
		return DLC_READ_DONE;
	case KIND_BLOCKS:
		return read_blocks(h, size, off, may_wait, reply);
	case KIND_PENDING:
		break;
	}
	return -EBADF;
}

void dlc_read_reply_done(struct dlc_read_reply *reply)
{
	dlc_blob_put(reply->held);
	reply->held = NULL;
	if (reply->charged)
		dlc_budget_release(reply->budget, reply->charged);
	reply->charged = 0;
}

void dlc_read_close(struct dlc_read_handle *h)
{
	if (!h)
		return;
	dlc_blob_put(h->blob);
	if (h->blocks)
		dlc_fetch_close_direct(h->read->fetch, h->blocks);
	if (h->fd >= 0)
		close(h->fd);
	free(h);
}
