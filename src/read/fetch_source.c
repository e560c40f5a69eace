/*
 * fetch_source.c - the fetcher's source: one table per mount (struct
 * source_ops, fetch_private.h) through which every byte the read path takes
 * from the remote comes, so the flights, the tier, prefetch and the budget
 * above it (fetch.c, prefetch.c) are the same for a tree and a packed
 * source.  Files larger than max_file, packed or not, are read by blocks.c,
 * which takes its bytes from the same table (the "block" kind).  The bottom
 * of the fetcher: it calls nothing in the other fetch files, and holds no
 * state of its own (a kind's state is the source's, or chunks.c's).
 *
 * Packed sources.  When the snapshot is packed, a miss reads the file's byte
 * range out of its tar chunk through chunks.c (one source open per chunk for
 * the mount's life, every file checked against its recorded xxh3, as is a
 * member's value from the cluster tier) instead of opening the file; with chunk_fetch, the first miss on a chunk reads the
 * whole chunk and offers every member to the cache through the normal
 * admission (members it refuses are held in memory a while by chunks.c, for
 * a chunk-wise reader), and a reader missing a member of a chunk being read
 * is handed its bytes by that read.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "dlcache/chunks.h"
#include "dlcache/fetch.h"
#include "dlcache/log.h"
#include "fetch_private.h"

/* Largest single read from the source. */
#define READ_CHUNK (8u << 20)

/* ------------------------------------------------------------------------
 * The source: one read interface, three kinds.
 *
 *   whole file   a tree's small file, opened by path and read whole
 *                (tree_read_whole);
 *   member       a packed snapshot's small file, its checked byte range of
 *                a chunk, or the whole chunk with chunk_fetch, members held
 *                in memory (packed_read_whole, packed_take_held);
 *   block        a range of a file larger than max_file, for blocks.c: the
 *                tree's file opened once per reader (tree_block_*), or the
 *                member's range of its chunk through chunks.c's shared
 *                handle (packed_block_read).
 *
 * A mount's source is one of two tables, chosen once in dlc_fetch_create:
 * nothing else in the fetcher asks whether the snapshot is packed.  Each
 * kind counts the bytes it takes from the remote, and logs and counts its
 * failures (bytes_from_remote, remote_errors).
 */

/*
 * Reads the whole of path (blob->size bytes per the snapshot) from the
 * source.  Reads ask for one byte more than is still missing (the blob has
 * room for it), and drivers return short reads only at end of file, so a
 * small sample costs one read that also proves its size.  A file that shrank
 * or grew since the snapshot gives -ESTALE.
 */
static int read_path(struct dlc_fetch *fetch, const char *path, struct dlc_blob *blob)
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

/* Kind "whole file": a tree's small file. */
static int tree_read_whole(struct dlc_fetch *fetch, uint32_t ino, struct dlc_blob *blob,
			   bool *offered)
{
	char path[DLC_SNAPSHOT_PATH_MAX];
	int rc;

	*offered = false;
	rc = dlc_snapshot_path(fetch->snapshot, ino, path, sizeof(path));
	if (rc == 0)
		rc = read_path(fetch, path, blob);
	if (rc == 0) {
		dlc_stats_add(fetch->stats, DLC_STAT_BYTES_FROM_REMOTE, blob->size);
		return 0;
	}
	if (rc == -ENOMEM)
		return rc;
	dlc_stats_add(fetch->stats, DLC_STAT_REMOTE_ERRORS, 1);
	if (rc == -ESTALE) {
		dlc_log(DLC_LOG_WARNING, "%s changed size on the source since the snapshot; remount with -o refresh", path);
		dlc_stats_set_error(fetch->stats, "a file changed size on the source since the snapshot");
	} else {
		dlc_log(DLC_LOG_WARNING, "cannot read %s from the source: %s", path, strerror(-rc));
		dlc_stats_set_error(fetch->stats, "a read from the source failed");
	}
	return -EIO;
}

/* Kind "block", a tree's large file: opened by path once per reader. */
static int tree_block_open(void *ctx, uint32_t ino, void **handle)
{
	struct dlc_fetch *fetch = ctx;
	struct dlc_backend_file *file = NULL;
	char path[DLC_SNAPSHOT_PATH_MAX];
	int rc;

	rc = dlc_snapshot_path(fetch->snapshot, ino, path, sizeof(path));
	if (rc == 0)
		rc = dlc_backend_open(fetch->backend, path, &file);
	if (rc < 0) {
		dlc_stats_add(fetch->stats, DLC_STAT_REMOTE_ERRORS, 1);
		dlc_log(DLC_LOG_WARNING, "cannot open %s on the source: %s", path, strerror(-rc));
		dlc_stats_set_error(fetch->stats, "a read from the source failed");
		return rc == -ETIMEDOUT ? -ETIMEDOUT : -EIO;     /* blocks.c tells them apart */
	}
	*handle = file;
	return 0;
}

static ssize_t tree_block_read(void *ctx, uint32_t ino, void *handle, void *buf, size_t len,
			       uint64_t off)
{
	struct dlc_fetch *fetch = ctx;
	ssize_t n = dlc_backend_pread(fetch->backend, handle, buf, len, off);

	(void)ino;
	if (n < 0) {
		dlc_stats_add(fetch->stats, DLC_STAT_REMOTE_ERRORS, 1);
		dlc_log(DLC_LOG_WARNING, "read from the source failed: %s", strerror((int)-n));
		dlc_stats_set_error(fetch->stats, "a read from the source failed");
		return n == -ETIMEDOUT ? -ETIMEDOUT : -EIO;     /* blocks.c tells them apart */
	}
	dlc_stats_add(fetch->stats, DLC_STAT_BYTES_FROM_REMOTE, (uint64_t)n);
	return n;
}

static void tree_block_close(void *ctx, void *handle)
{
	struct dlc_fetch *fetch = ctx;

	dlc_backend_close(fetch->backend, handle);
}

/* A member of a chunk read whole, offered to the cache like a miss. */
static void offer_member(void *arg, uint32_t ino, const void *data, uint64_t size)
{
	struct dlc_fetch *fetch = arg;

	if (dlc_cache_contains(fetch->cache, ino))
		return;
	if (dlc_cache_offer(fetch->cache, ino, data, size))
		dlc_stats_add(fetch->stats, DLC_STAT_CHUNK_ADMISSIONS, 1);
	else
		dlc_chunks_hold(fetch->chunks, ino, data, size);
}

/*
 * Kind "member": packed file ino into blob; *offered when the bytes came
 * from the cache (another thread's whole-chunk read put them there).  0 or
 * -EIO (chunks.c logged and counted it).
 */
static int packed_read_whole(struct dlc_fetch *fetch, uint32_t ino, struct dlc_blob *blob,
			     bool *offered)
{
	int rc;

	*offered = false;
	rc = dlc_chunks_read_whole(fetch->chunks, ino, blob->data, blob->size, offer_member, fetch);
	if (rc != DLC_CHUNKS_NOT_IN_PASS)
		return rc;
	/* Another thread's whole read may have cached or held it meanwhile. */
	if (dlc_cache_read(fetch->cache, ino, blob->data, blob->size) == 0 ||
	    dlc_chunks_take_held(fetch->chunks, ino, blob->data, blob->size)) {
		*offered = true;
		return 0;
	}
	return dlc_chunks_read_file(fetch->chunks, ino, blob->data, blob->size);
}

static bool packed_take_held(struct dlc_fetch *fetch, uint32_t ino, void *buf, uint64_t size)
{
	return dlc_chunks_take_held(fetch->chunks, ino, buf, size);
}

/*
 * Kind "block", a packed member larger than max_file: its range of the
 * chunk, through the chunk's shared handle (no handle of the reader's own).
 * Not checked against the member's xxh3, which covers the whole member: a
 * block is checked by its own xxh3 once cached, like a tree's.
 */
static int packed_block_open(void *ctx, uint32_t ino, void **handle)
{
	(void)ctx;
	(void)ino;
	*handle = NULL;
	return 0;
}

static ssize_t packed_block_read(void *ctx, uint32_t ino, void *handle, void *buf, size_t len,
				 uint64_t off)
{
	struct dlc_fetch *fetch = ctx;
	ssize_t n = dlc_chunks_read_range(fetch->chunks, ino, buf, len, off);

	(void)handle;
	return n < 0 ? -EIO : n;
}

const struct source_ops dlc_fetch_source_tree = {
	.read_whole = tree_read_whole,
	.take_held = NULL,
	.block = { tree_block_open, tree_block_read, tree_block_close, NULL },
};

const struct source_ops dlc_fetch_source_packed = {
	.read_whole = packed_read_whole,
	.take_held = packed_take_held,
	.block = { packed_block_open, packed_block_read, NULL, NULL },
};
