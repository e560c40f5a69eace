/*
 * chunks.h - the bytes of a packed source: files read as byte ranges of tar
 * chunks through the backend, each checked against the xxh3 its snapshot
 * recorded.
 *
 * Each chunk is opened once, at its first read, and kept open for the life
 * of the mount, so a pass over the dataset costs one source open per chunk
 * rather than one per file.  The handle is shared by every reader: this
 * relies on the backend contract that pread on one handle may be called
 * from several threads at once.
 *
 * A damaged chunk fails only the files it damages: a file whose bytes go past
 * the end of its chunk (truncated) or do not match their recorded xxh3
 * (corrupted, or the chunk replaced) gives -EIO; every other file of the
 * chunk is still served.  The first failure of each chunk is logged, once.
 *
 * Whole-chunk reads (mount option chunk_fetch=1): the first miss on a chunk
 * reads it in one sequential pass and hands every member's checked bytes to
 * a callback (fetch_source.c offers them to the cache), so one read warms many
 * samples; a chunk is read whole at most once per mount.  Members that
 * admission refuses are held in memory for a while (dlc_chunks_hold), for a
 * reader that goes through the chunk soon after, as a chunk-wise sampler
 * does.
 */
#ifndef DLCACHE_CHUNKS_H
#define DLCACHE_CHUNKS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlcache/backend.h"
#include "dlcache/budget.h"
#include "dlcache/snapshot.h"
#include "dlcache/stats.h"

struct dlc_chunks; /* opaque */

/*
 * The chunk reader of a packed snapshot; with whole_chunks, chunks can be
 * read whole, skipping files larger than max_file.  Counts bytes from the
 * remote and remote errors in stats.  0, -EINVAL (not packed) or -ENOMEM.
 */
int dlc_chunks_create(struct dlc_backend *backend, const struct dlc_snapshot *snapshot,
		      struct dlc_stats *stats, bool whole_chunks, uint64_t max_file,
		      struct dlc_chunks **out);

/* Draws pass windows and held bytes from budget (budget.h); before serving.
 * chunks may be NULL (a tree: nothing to do). */
void dlc_chunks_set_budget(struct dlc_chunks *chunks, struct dlc_budget *budget);

/* Closes every chunk handle. */
void dlc_chunks_free(struct dlc_chunks *chunks);

/*
 * Reads the size bytes of regular file ino (its snapshot size) into buf and
 * checks them.  0, -EIO (the chunk cannot be opened or read, ends before the
 * file, or the bytes do not match) or -ENOENT (not a file).
 */
int dlc_chunks_read_file(struct dlc_chunks *chunks, uint32_t ino, void *buf, uint64_t size);

/*
 * Reads up to len bytes at off inside regular file ino: the blocks of a
 * file larger than cache_max_file (blocks.c, through fetch_source.c), not checked
 * here (the xxh3 covers the whole file; a cached block has its own).  The
 * count, short only at the file's end; -EIO as above.
 */
ssize_t dlc_chunks_read_range(struct dlc_chunks *chunks, uint32_t ino, void *buf, size_t len,
			      uint64_t off);

/* Called for members of a chunk read whole, in offset order, with their
 * checked bytes: every member but the ones copied to a reader. */
typedef void (*dlc_chunks_member_cb)(void *arg, uint32_t ino, const void *data, uint64_t size);

/*
 * Whole-chunk reads (created with whole_chunks).  If no read of ino's chunk
 * has begun in this mount, reads the chunk in one pass and returns 0 with
 * ino's bytes in buf; members other callers are waiting for are copied to
 * them, the rest handed to cb.  If a pass over the chunk is under way and
 * has not reached ino, waits for it and returns 0 with ino's bytes in buf.
 * In both cases the caller offers ino's bytes to the cache itself.
 * Otherwise returns DLC_CHUNKS_NOT_IN_PASS (the chunk was read whole
 * already, or the pass went past ino without its bytes): the caller looks
 * in the cache, then calls dlc_chunks_read_file.  -EIO when ino's own bytes
 * are bad.
 */
enum dlc_chunks_pass {
	DLC_CHUNKS_IN_PASS = 0,         /* buf holds ino's bytes */
	DLC_CHUNKS_NOT_IN_PASS = 1,     /* no pass gave them: read the file alone */
};
int dlc_chunks_read_whole(struct dlc_chunks *chunks, uint32_t ino, void *buf, uint64_t size,
			  dlc_chunks_member_cb cb, void *arg);

/*
 * Whole-chunk reads: keeps a copy of member ino's bytes, which admission
 * refused, in memory for a reader that comes soon (at most 256 MiB in all,
 * the oldest dropped first).  Does nothing without whole chunks.
 */
void dlc_chunks_hold(struct dlc_chunks *chunks, uint32_t ino, const void *data, uint64_t size);

/* Copies ino's held bytes (size of them) into buf and forgets them; true
 * when they were held. */
bool dlc_chunks_take_held(struct dlc_chunks *chunks, uint32_t ino, void *buf, uint64_t size);

/*
 * The xxh3 the snapshot recorded for member ino's bytes, which a copy from
 * elsewhere (the cluster tier) must match as a read of its chunk does:
 * stored in *hash and hash returned; NULL when chunks is NULL (a tree
 * source records none) or ino is not a member.
 */
const uint64_t *dlc_chunks_recorded_hash(const struct dlc_chunks *chunks, uint32_t ino,
					 uint64_t *hash);

/* Chunk handles open now (idle ones beyond a quarter of RLIMIT_NOFILE are closed). */
unsigned dlc_chunks_open_handles(struct dlc_chunks *chunks);

#endif
