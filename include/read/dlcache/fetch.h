/*
 * fetch.h - the bytes of a sample: from the cache when it holds a good copy,
 * otherwise from the source, once however many readers want it at the same
 * time (single flight), then offered to the cache.
 *
 * Samples are small, so a miss reads the whole file (for a packed source:
 * its byte range of a tar chunk, see chunks.h).  Files larger than the
 * mount's cache_max_file are read and cached by blocks, with readahead for
 * sequential readers (blocks.h, the "direct" calls below), a packed source's
 * as a tree's: every byte from the source goes through one read interface
 * with three kinds (fetch_source.c).
 *
 * The FUSE layer does not call these: it reads through the read face
 * (read.h), which chooses among the entry points below once per open.
 *
 * Prefetch requests (from .control) announce the reader's order; worker
 * threads fetch a bounded window ahead of it, through the same flights, so a
 * reader arriving during a prefetch shares it (see prefetch.c).  Announced
 * files larger than max_file are streamed ahead by blocks (blocks.h).
 */
#ifndef DLCACHE_FETCH_H
#define DLCACHE_FETCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlcache/backend.h"
#include "dlcache/blob.h"
#include "dlcache/blocks.h"
#include "dlcache/budget.h"
#include "dlcache/cache.h"
#include "dlcache/snapshot.h"
#include "dlcache/stats.h"
#include "dlcache/tier.h"

struct dlc_fetch; /* opaque */

/* NULL on ENOMEM.  The arguments must outlive the fetcher; files larger than
 * max_file are read by blocks.  A packed snapshot's files are read out of
 * its chunks (chunks.h). */
struct dlc_fetch *dlc_fetch_create(struct dlc_backend *backend, const struct dlc_snapshot *snapshot,
				   struct dlc_cache *cache, struct dlc_stats *stats, uint64_t max_file);

/* The same; with chunk_fetch and a packed snapshot, the first miss on a
 * chunk reads it whole and offers every member to the cache. */
struct dlc_fetch *dlc_fetch_create_packed(struct dlc_backend *backend,
					  const struct dlc_snapshot *snapshot,
					  struct dlc_cache *cache, struct dlc_stats *stats,
					  uint64_t max_file, bool chunk_fetch);
void dlc_fetch_free(struct dlc_fetch *fetch);

/* The invariants of fetch.c and staging.c (flights, plan, staged files): 0, or -EUCLEAN
 * when one is broken (verify.h). */
int dlc_fetch_verify(struct dlc_fetch *fetch);

/*
 * Puts the cluster tier (tier.h; NULL: none) between the cache and the
 * source: a miss asks it before the source, and bytes read from the source
 * are offered to it after the local cache.  Call before serving; tier must
 * outlive the fetcher.  A tier hit is still a local miss in the stats.
 */
void dlc_fetch_set_tier(struct dlc_fetch *fetch, struct dlc_tier *tier);

/*
 * Draws every file buffer from budget (budget.h), set before serving: a
 * reader's miss waits for room; a prefetch starts only while the budget is
 * under half full (otherwise the file is left to be a miss).
 */
void dlc_fetch_set_budget(struct dlc_fetch *fetch, struct dlc_budget *budget);

/*
 * Returns in *out (one reference, release with dlc_blob_put) the contents of
 * regular file ino.  Counts a hit or a miss.  -EIO when the source fails or
 * the file's size differs from the snapshot's (it changed: remount with
 * -o refresh); -ENOMEM.
 */
int dlc_fetch_get(struct dlc_fetch *fetch, uint32_t ino, struct dlc_blob **out);

/* What dlc_fetch_open_cached saw of a file it did not open, for the rest of
 * the open (dlc_fetch_get_answer_first): nothing looked up twice. */
struct dlc_fetch_seen {
	uint64_t size;                  /* the snapshot's size of the file */
	bool told;                      /* the cache was told of this read already
					 * (DLC_FETCH_MISS_TOLD) */
	struct dlc_cache_entry entry;   /* its cached copy (dlc_cache_open_hit) */
};

/*
 * dlc_fetch_get for a caller that answers its reader before the cache is
 * written: when ino's bytes were staged by a prefetch worker and still go to
 * the cache, or fetched by this call (a miss), *later holds a reference to
 * them and the caller must pass it to dlc_fetch_offer_later once the reader
 * has its answer (admission decides then); *later is NULL otherwise.  Until
 * then, another open of a miss's ino shares its bytes (its flight stays
 * listed), and another open of a staged file is a miss and fetches again.
 * seen: what dlc_fetch_open_cached saw a moment ago, or NULL (ino is looked
 * up).  With seen->told the read is neither consumed nor counted as the
 * policy's hit again.  A first hit in the mount (a copy not checked yet)
 * takes the cache's lock once, after its read (dlc_cache_read_hit).
 */
int dlc_fetch_get_answer_first(struct dlc_fetch *fetch, uint32_t ino,
			       const struct dlc_fetch_seen *seen, struct dlc_blob **out,
			       struct dlc_blob **later);

/* Offers later's bytes (from dlc_fetch_get_answer_first, may be NULL) to the
 * cache as ino's (and to the tier, for a miss's), ends the miss's flight and
 * releases the reference. */
void dlc_fetch_offer_later(struct dlc_fetch *fetch, uint32_t ino, struct dlc_blob *later);

/* Starts worker threads that serve prefetch requests, holding at most
 * window files ahead of the reader; call after daemonizing.  0 or -errno. */
int dlc_fetch_start(struct dlc_fetch *fetch, unsigned workers, unsigned window);

/*
 * Announces that the reader will open regular file ino next after the files
 * announced before it: a worker fetches it (through admission, like a miss;
 * skipped if it is cached by then) when it is within the window ahead of the
 * reader, and holds its bytes until the reader opens it or passes it.  A
 * file larger than max_file goes to the blocks' shard stream instead
 * (dlc_blocks_announce, which the window of dlc_fetch_start bounds as
 * well).  Returns false when it was not queued (not a regular file, no
 * workers, 64 M announcements already waiting, or the stream refused it).
 */
bool dlc_fetch_prefetch(struct dlc_fetch *fetch, uint32_t ino);

/* Stops the workers (dropping queued requests) and waits for them. */
void dlc_fetch_stop(struct dlc_fetch *fetch);

/* Whether a prefetch worker holds ino's bytes for a reader now ("staged"). */
bool dlc_fetch_is_staged(struct dlc_fetch *fetch, uint32_t ino);

/* What dlc_fetch_open_cached and dlc_fetch_open_cached_blocks found. */
enum dlc_fetch_found {
	DLC_FETCH_FOUND,        /* *fd is the cache file, counted as a hit */
	DLC_FETCH_MISS,         /* read it the long way (dlc_fetch_get_answer_first,
				 * or by blocks) */
	DLC_FETCH_MISS_TOLD,    /* the same, but the cache was told of the read
				 * already (seen->told) */
};

/*
 * A hit that needs no reading now: an fd on ino's cache file (of size
 * bytes), checked earlier in this mount, counted as a hit; the check, the
 * read's consumption and the policy's hit take the cache's lock once
 * (dlc_cache_open_hit).  A file staged by a prefetch is a miss here.  On a
 * miss, *seen is for dlc_fetch_get_answer_first.
 */
enum dlc_fetch_found dlc_fetch_open_cached(struct dlc_fetch *fetch, uint32_t ino, uint64_t size,
					   int *fd, struct dlc_fetch_seen *seen);

/*
 * Files larger than max_file are read by blocks (blocks.h): cached in
 * blocks of block_size bytes, read ahead up to readahead_max for a
 * sequential reader.  Call before serving (the defaults otherwise:
 * DLC_DEFAULT_BLOCK_SIZE, DLC_DEFAULT_READAHEAD_MAX).  A packed source's
 * large files are cached by blocks too, each read by range from its chunk.
 */
void dlc_fetch_set_blocks(struct dlc_fetch *fetch, uint64_t block_size, uint64_t readahead_max,
			  uint64_t kernel_readahead);

/*
 * A large file whose blocks are all cached, opened whole: an fd on its
 * data file (dlc_cache_blocks_open_whole), for an open the kernel serves
 * itself (passthrough).  With check, blocks not yet checked in this mount
 * are checked first (dlc_cache_blocks_check_whole; it reads them, so not on
 * a FUSE request thread), unless they pass an eighth of the machine's
 * memory (their pages would not stay cached until read).  DLC_FETCH_MISS
 * when the file must be read by blocks (dlc_fetch_open_direct).  Counted by
 * dlc_fetch_note_whole_hit (size: the file's) once the open keeps it.
 */
enum dlc_fetch_found dlc_fetch_open_cached_blocks(struct dlc_fetch *fetch, uint32_t ino,
						  bool check, int *fd);
void dlc_fetch_note_whole_hit(struct dlc_fetch *fetch, uint32_t ino, uint64_t size);

/* Reads of a file larger than max_file, through its reader.  0 or -errno. */
int dlc_fetch_open_direct(struct dlc_fetch *fetch, uint32_t ino, struct dlc_block_reader **out);
/* The count read (short only at the end of the file), or -EIO, -ENOMEM. */
ssize_t dlc_fetch_read_direct(struct dlc_fetch *fetch, uint32_t ino, struct dlc_block_reader *reader,
			      void *buf, size_t len, uint64_t off);
/* The same without waiting (dlc_blocks_try_read): false when the read must
 * go to a thread that may wait on the source; true with *count the count or
 * -EIO. */
bool dlc_fetch_try_read_direct(struct dlc_fetch *fetch, struct dlc_block_reader *reader,
			       void *buf, size_t len, uint64_t off, ssize_t *count);
void dlc_fetch_close_direct(struct dlc_fetch *fetch, struct dlc_block_reader *reader);

#endif
