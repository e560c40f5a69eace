/*
 * blocks.h - reads of files larger than cache_max_file, by blocks.
 *
 * Such a file (a TFRecord, WebDataset or HDF5 shard) is read through the
 * cache's blocks (cache.h): each read maps to the blocks it covers; a block
 * the cache holds is served from it (checked on its first use in a mount,
 * then read by range from its file), a missing one is read from the source
 * in one call, served and offered to the cache, once however many readers
 * want it (single flight per block).  Each open file has a reader that
 * watches its offsets: a sequential reader (small reordering tolerated)
 * gets a readahead window of blocks fetched ahead of it, doubling up to
 * readahead_max; a random reader fetches only the blocks it reads.  Every
 * buffer comes from the memory budget; readahead only takes what is free
 * below half of it and never waits.  Files announced with `prefetch`
 * (dlc_blocks_announce) are streamed ahead in announced order before any
 * reader opens them, under the same rules.
 *
 * blocks.c never opens the source itself: a block's bytes come from a
 * dlc_block_source (fetch_source.c's "block" kind), a tree's file by path or a
 * packed member by range of its chunk, so both are cached alike.
 */
#ifndef DLCACHE_BLOCKS_H
#define DLCACHE_BLOCKS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlcache/budget.h"
#include "dlcache/cache.h"
#include "dlcache/snapshot.h"
#include "dlcache/stats.h"

struct dlc_blocks;              /* per mount; opaque */

/*
 * Where blocks come from.  open() is called once per reader, before its
 * first source read (0, or -EIO after logging and counting the failure:
 * -ETIMEDOUT when the source did not answer in time); read() reads len
 * bytes at off of regular file ino: the count (short only at the file's
 * end), or -EIO (-ETIMEDOUT) after logging and counting the failure;
 * it counts the bytes it took from the remote.  read() may run on several
 * threads at once with the same handle; close() releases the handle of a
 * reader that opened one.
 */
struct dlc_block_source {
	int (*open)(void *ctx, uint32_t ino, void **handle);
	ssize_t (*read)(void *ctx, uint32_t ino, void *handle, void *buf, size_t len, uint64_t off);
	void (*close)(void *ctx, void *handle);
	void *ctx;
};

struct dlc_block_reader;        /* per open file; opaque */

/* Defaults of block_size= and readahead_max=. */
#define DLC_DEFAULT_BLOCK_SIZE (4ULL << 20)
#define DLC_DEFAULT_READAHEAD_MAX (64ULL << 20)
/* Threads that run readahead fetches from the source (a remote source
 * needs many calls in flight to fill its link). */
#define DLC_BLOCKS_READAHEAD_THREADS 16
/* Threads that read cached blocks ahead (each read whole and checked on
 * its first use in a mount): a local disk reads a few streams faster than
 * many. */
#define DLC_BLOCKS_LOCAL_THREADS 2

/*
 * NULL on ENOMEM.  block_size is a multiple of 4 KiB, readahead_max of
 * block_size or 0 (no readahead); kernel_readahead is the mount's kernel
 * readahead window as raised (kernel_readahead.h), 0 when left at the
 * kernel's: how far out of order the kernel's requests may arrive.  The
 * arguments must outlive it (source is
 * copied).  Tells the cache the block size (dlc_cache_set_block_size).
 * budget and cache may be NULL.
 */
struct dlc_blocks *dlc_blocks_create(const struct dlc_block_source *source,
				     const struct dlc_snapshot *snapshot,
				     struct dlc_cache *cache, struct dlc_stats *stats,
				     struct dlc_budget *budget, uint64_t block_size,
				     uint64_t readahead_max, uint64_t kernel_readahead);

/* Stops readahead (queued fetches dropped, running ones finished). */
void dlc_blocks_stop(struct dlc_blocks *blocks);
/* Stops and frees; every reader must be closed. */
void dlc_blocks_free(struct dlc_blocks *blocks);

/* A reader for regular file ino (opened on the source only when a block
 * must be read from it).  0, -ENOENT, -ENOMEM. */
int dlc_blocks_open(struct dlc_blocks *blocks, uint32_t ino, struct dlc_block_reader **out);

/*
 * Reads up to len bytes at off into buf: the count (short only at the end
 * of the file), or -EIO (the source failed, or the file changed size on
 * it), -ENOMEM.  Safe from several threads on one reader.
 */
ssize_t dlc_blocks_read(struct dlc_block_reader *reader, void *buf, size_t len, uint64_t off);

/*
 * The same without waiting: true with *count when every byte asked for was
 * at hand (blocks in the reader's memory, checked cache files, readahead
 * landed), or with *count -EIO when a block is not and the file's source
 * read failed for time a moment ago (the kernel reading a failed page
 * again: it fails at once, as dlc_blocks_read would); false when a block
 * must be waited for (call dlc_blocks_read from a thread that may wait).
 * Also moves the readahead window on.
 */
bool dlc_blocks_try_read(struct dlc_block_reader *reader, void *buf, size_t len, uint64_t off,
			 ssize_t *count);

void dlc_blocks_close(struct dlc_block_reader *reader);

/*
 * Notes that a read of reader's file was answered for time by someone else
 * (the FUSE face's reaper, when the request's deadline passed before its
 * work could run): as a read that failed for time here, the kernel's re-read
 * of the page then fails at once (failed_files.h) instead of queueing
 * behind the same hung work.  Never waits (a leaf lock); any thread.
 */
void dlc_blocks_note_failed(struct dlc_block_reader *reader);

/*
 * Announces that regular file ino (read by blocks) will be read after the
 * files announced before it: a `prefetch PATH` line on a shard.  The
 * mount's shard stream flies its blocks ahead of any reader, in announced
 * order, holding at most readahead_max bytes not yet taken by a reader (in
 * flight or landed), each block's buffer taken with a try below the
 * budget's readahead ceiling, never waited for; landed blocks go into the
 * cache while it has free room.  A reader that opens ino takes its blocks
 * (single flight: one in flight is joined).  window: prefetch_window, the
 * announced files an entry nobody opened may lie behind the furthest one
 * opened before it is dropped.  False when not queued (readahead_max=0,
 * a file not in the snapshot or empty, 1 M entries waiting, or stopping).
 */
bool dlc_blocks_announce(struct dlc_blocks *blocks, uint32_t ino, unsigned window);

/* ino was opened whole from its cached blocks (no reader): its first
 * announced entry, if any and not claimed, is done with.  NULL: a no-op. */
void dlc_blocks_opened_whole(struct dlc_blocks *blocks, uint32_t ino);

/* The invariants of the blocks' flights (flights.c), and of one reader's
 * state.  0, or -EUCLEAN when one is broken (verify.h). */
int dlc_blocks_verify(struct dlc_blocks *blocks);
int dlc_blocks_reader_verify(struct dlc_block_reader *reader);

#endif
