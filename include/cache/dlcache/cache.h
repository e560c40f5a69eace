/*
 * cache.h - what is cached, and the bytes of it: the store's files, the
 * policy's choices and the xxh3 of each cached inode, kept consistent under
 * one lock.
 *
 * An inode's cache entry goes through three states: absent; admitted (the
 * policy charges its bytes, its file is being written: readers treat it as a
 * miss); ready (file written, hash known: readers are served).  Evictions
 * chosen by the policy are carried out (file deleted) before the admitted
 * entry's file is written, so the cache files never hold more than the
 * capacity.
 *
 * The first hit on an entry in a mount reads it whole and checks its xxh3;
 * later hits open the file and serve it by range (spliced), after checking
 * with fstat that the file is still the one that was checked.  A cache file
 * changed behind the daemon is therefore checked again before it is served.
 */
#ifndef DLCACHE_CACHE_H
#define DLCACHE_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "dlcache/budget.h"
#include "dlcache/policy.h"
#include "dlcache/scores.h"
#include "dlcache/snapshot.h"
#include "dlcache/stats.h"
#include "dlcache/store.h"

struct dlc_cache; /* opaque */

struct dlc_cache_gauges {
	uint64_t bytes;         /* charged to the capacity, in-flight inserts included */
	uint64_t entries;
	uint64_t capacity;
	bool admission;         /* false while the cache disk is full (tried again every 5 s) or failed */
	uint64_t scores_known;  /* samples with a known importance */
	uint64_t announced;     /* lines of the announced order held, not yet read (importance) */
};

/*
 * Builds the cache over store for the inodes of snapshot, loading the scores
 * saved in scores_file (NULL: none) for this snapshot and restoring the
 * persisted entries whose path, size and mtime still match the snapshot (the
 * others are dropped).  0, or -errno with *cause.
 */
int dlc_cache_open(struct dlc_store *store, const struct dlc_snapshot *snapshot,
		   enum dlc_policy_kind kind, uint64_t capacity, const char *scores_file,
		   struct dlc_stats *stats, struct dlc_cache **out, char **cause);
void dlc_cache_close(struct dlc_cache *cache);

/* The invariants of the cache (cache_verify.c says which): 0, or -EUCLEAN
 * when one is broken (verify.h). */
int dlc_cache_verify(struct dlc_cache *cache);

/* Writes the scores to the scores file given at open (crash-safe); 0 or -errno. */
int dlc_cache_save_scores(struct dlc_cache *cache);

/*
 * Sets the scores of n samples (NaN forgets one) and re-keys the cached ones,
 * under one lock acquisition.
 */
void dlc_cache_set_scores(struct dlc_cache *cache, const uint32_t *inos, const float *values,
			  size_t n);

/* The score of ino; NaN when unknown. */
float dlc_cache_score(struct dlc_cache *cache, uint32_t ino);

/* Every score becomes unknown. */
void dlc_cache_reset_scores(struct dlc_cache *cache);

/* The job wrote `epoch N`: a new admission pass starts (dlc_policy_begin_pass). */
void dlc_cache_begin_pass(struct dlc_cache *cache, uint64_t epoch);

/*
 * The job announced that ino will be read after the files announced before
 * it (a `prefetch PATH` line): the importance policy plans with the order
 * (dlc_policy_announce).  0, -ENOSPC when the plan is full (the line is not
 * planned), -ENOMEM.
 */
int dlc_cache_announce(struct dlc_cache *cache, uint32_t ino);

/* A reader opened ino: its announced line is read (dlc_policy_consume).
 * Call before its bytes are offered, so that a miss is judged by its next
 * use. */
void dlc_cache_consume(struct dlc_cache *cache, uint32_t ino);

/* True when ino's bytes are cached and ready to serve. */
bool dlc_cache_contains(struct dlc_cache *cache, uint32_t ino);

/*
 * The relative paths of the ready entries, one per line, malloc'd in *text
 * (NULL when none), its *len bytes taken from budget up to ceiling
 * (dlc_text_finish).  The inodes are looked at in batches, the cache lock
 * held for one batch at a time: each line was ready at some moment of the
 * call.  0 or -ENOMEM (no memory, or the budget has no room).
 */
int dlc_cache_list(struct dlc_cache *cache, struct dlc_budget *budget, uint64_t ceiling,
		   char **text, size_t *len);

/*
 * "SCORE PATH" per sample with a known score (inode order; the score as
 * %.9g, which gives the float back exactly), one per line, in *text as
 * dlc_cache_list gives its lines: NULL when none, *len bytes taken from
 * budget up to ceiling, the scores copied under the lock a batch at a
 * time.  0 or -ENOMEM (no memory, or the budget has no room).
 */
int dlc_cache_list_scores(struct dlc_cache *cache, struct dlc_budget *budget, uint64_t ceiling,
			  char **text, size_t *len);

/*
 * Copies the cached bytes of regular file ino (size bytes, its snapshot
 * size) into buf.  0 on a hit; -ENOENT when ino is not (yet) cached; a
 * cached copy that is missing or fails its size or xxh3 check is dropped,
 * counted as corrupt, and reported as -ENOENT.  Any other failure to read it
 * (EMFILE, ENOMEM, EIO...) keeps the entry, counts a cache read error and is
 * reported as -ENOENT too: the caller reads the source.  A copy read whole
 * and checked is opened without reading from then on in this mount
 * (dlc_cache_open_hit).  Tells the policy nothing (dlc_cache_read_hit does).
 */
int dlc_cache_read(struct dlc_cache *cache, uint32_t ino, void *buf, uint64_t size);

/*
 * A cached copy as dlc_cache_open_hit saw it under the lock: what
 * dlc_cache_read_hit checks the bytes against without taking the lock
 * before the read.  Only an outcome of dlc_cache_open_hit is valid.
 */
struct dlc_cache_entry {
	bool ready;                     /* cached then; the fields below only if so */
	uint32_t generation;            /* the entry read, told from one admitted since */
	uint64_t hash;                  /* xxh3 of its bytes */
};

/*
 * dlc_cache_read for a reader's open, told to the policy in the same visit:
 * the first hit of a copy in a mount, read whole and checked.  With entry
 * (ready: dlc_cache_open_hit's, a moment ago), the copy is read without
 * taking the lock first; the lock is taken once, after the read, to keep
 * the check (the copy opens without reading from then on, as long as it is
 * the entry read), with consume to consume the announced read
 * (dlc_cache_consume's part, first), and with hit to record the policy's
 * hit (dlc_cache_hit's, when the bytes were served): the order of the
 * separate calls.  Without entry (NULL or not ready), the lock is taken
 * before the read as well.  The read is consumed whatever the outcome, so
 * that a miss is judged by its next use when its bytes are offered.
 * Returns as dlc_cache_read.
 */
int dlc_cache_read_hit(struct dlc_cache *cache, uint32_t ino, const struct dlc_cache_entry *entry,
		       void *buf, uint64_t size, bool consume, bool hit);

/*
 * Tests only, for races made deterministic: read_hook(arg, ino, rc) runs
 * after each read of a cached copy in dlc_cache_read, without the lock, and
 * returns the outcome to act on (rc, or an injected error); write_hook(arg,
 * ino) runs in dlc_cache_offer after the admitted bytes were written, before
 * the lock is taken again.  Either may evict or admit entries meanwhile.
 * Set before any reader runs; NULL for none.
 */
typedef int (*dlc_cache_read_hook)(void *arg, uint32_t ino, int rc);
typedef void (*dlc_cache_write_hook)(void *arg, uint32_t ino);
void dlc_cache_set_hooks(struct dlc_cache *cache, dlc_cache_read_hook read_hook,
			 dlc_cache_write_hook write_hook, void *arg);

/*
 * drop(arg, ino) runs, with the cache's lock held, each time an entry stops
 * being ready (evicted, replaced, found corrupt, dropped), before its file
 * is deleted: the FUSE layer closes the passthrough backing file it keeps
 * registered for it, which would otherwise hold the file's disk space.  It
 * must not call the cache.  NULL removes it.
 */
typedef void (*dlc_cache_drop_hook)(void *arg, uint32_t ino);
void dlc_cache_set_drop_hook(struct dlc_cache *cache, dlc_cache_drop_hook drop, void *arg);

/*
 * What an open of a cached copy without reading it found
 * (dlc_cache_open_checked, dlc_cache_block_open_checked,
 * dlc_cache_blocks_open_whole): an outcome the caller acts on; errors that
 * are errors (out of descriptors, ...) are -errno.
 */
enum dlc_cache_open {
	DLC_CACHE_OPENED = 0,   /* *fd is open on bytes checked in this mount */
	DLC_CACHE_UNCHECKED,    /* not checked yet, changed or gone since, or not
				 * cached: read it (dlc_cache_read, by blocks) */
};

/*
 * Opens the cached copy of ino for reading by range, without reading it,
 * when its bytes were checked by dlc_cache_read earlier in this mount and
 * the file has not changed since (dlc_store_open_checked).  Returns
 * DLC_CACHE_OPENED with *fd open; DLC_CACHE_UNCHECKED when the caller must
 * go through dlc_cache_read (not checked yet, changed, gone, or not
 * cached); other -errno.  *fd is -1 unless opened.
 */
int dlc_cache_open_checked(struct dlc_cache *cache, uint32_t ino, int *fd);

/* Tells the policy that ino was served from the cache (lru recency). */
void dlc_cache_hit(struct dlc_cache *cache, uint32_t ino);

/* What dlc_cache_open_hit found. */
enum dlc_cache_hit {
	DLC_CACHE_HIT_OPEN,      /* *fd is the checked copy; the read was told */
	DLC_CACHE_HIT_UNCHECKED, /* not checked in this mount (or not cached):
				  * nothing told, go through dlc_cache_read_hit */
	DLC_CACHE_HIT_GONE,      /* told, but the copy changed or went since its
				  * check: go through dlc_cache_read_hit, and do
				  * not tell the read again */
};

/*
 * A hit's one visit to the cache, for a copy checked earlier in this mount:
 * under one take of the lock, looks up its stamp and, when it has one,
 * tells the policy of the read (with consume, dlc_cache_consume's part
 * first, then dlc_cache_hit's: the order of the separate calls); then opens
 * the copy without the lock (dlc_store_open_checked).  *fd is -1 unless
 * DLC_CACHE_HIT_OPEN.  *entry is the copy as seen in that take (not ready:
 * not cached), for the read that follows any outcome but
 * DLC_CACHE_HIT_OPEN (dlc_cache_read_hit).
 */
enum dlc_cache_hit dlc_cache_open_hit(struct dlc_cache *cache, uint32_t ino, bool consume,
				     int *fd, struct dlc_cache_entry *entry);

/* dlc_cache_consume (with consume) then dlc_cache_hit, in one take of the
 * lock: an open of a file read by blocks. */
void dlc_cache_note_read(struct dlc_cache *cache, uint32_t ino, bool consume);

/* How many times the cache's lock was released since it was made: tests
 * count the takes of a hit with it (one). */
uint64_t dlc_cache_lock_releases(struct dlc_cache *cache);

/*
 * Offers the bytes of ino just read from the source.  Returns true when they
 * were admitted and written, false when bypassed (policy said no, admission
 * is off, or the write failed; a full disk pauses admission for 5 s, after
 * which the next offer tries again; a disk that fails writes turns it off
 * for the rest of the mount).  Counts admissions, evictions and bypasses.
 */
bool dlc_cache_offer(struct dlc_cache *cache, uint32_t ino, const void *data, uint64_t size);

/*
 * The same, for bytes fetched ahead of their read (a prefetch), only while
 * the cache has free room for them: no entry is evicted for bytes that are
 * not read yet.  Returns whether the offer was made (admitted, or refused
 * as dlc_cache_offer refuses); false when there was no room and nothing
 * was done or counted: the caller offers them again when they are read,
 * and the policy then decides as it does for a miss.
 */
bool dlc_cache_offer_if_room(struct dlc_cache *cache, uint32_t ino, const void *data, uint64_t size);

void dlc_cache_gauges(struct dlc_cache *cache, struct dlc_cache_gauges *out);

/*
 * Blocks (cache_blocks.c).  A file larger than cache_max_file is cached as
 * blocks of block_size bytes (the last one shorter), each a store range
 * with its own xxh3, all in one data file per large file.  The file is one entry of the policy: admitted, with
 * its whole footprint charged, when its first block is offered; scored by
 * its path; evicted whole.  Block index i holds bytes [i * block_size,
 * min((i + 1) * block_size, size)).
 */

/* Sets the size of new blocks (a multiple of 4 KiB; 0: no blocks) before
 * serving; blocks of another size restored from an earlier mount are dropped. */
void dlc_cache_set_block_size(struct dlc_cache *cache, uint64_t block_size);
uint64_t dlc_cache_block_size(struct dlc_cache *cache);

/* True when block index of ino is cached and ready to serve. */
bool dlc_cache_block_contains(struct dlc_cache *cache, uint32_t ino, uint32_t index);

/* True when block index of ino is ready and was checked in this mount (it
 * can be opened with dlc_cache_block_open_checked). */
bool dlc_cache_block_checked(struct dlc_cache *cache, uint32_t ino, uint32_t index);

/*
 * Copies block index of ino (size bytes, its exact length) into buf,
 * checking its size and xxh3.  0 on a hit; -ENOENT otherwise: not cached,
 * or a copy proven bad (dropped and counted as corrupt: the caller reads
 * the source and offers it again), or one that cannot be read now (kept,
 * counted as a cache read error).
 */
int dlc_cache_block_read(struct dlc_cache *cache, uint32_t ino, uint32_t index, void *buf,
			 uint64_t size);

/* DLC_CACHE_OPENED with *fd on the data file of ino, whose block index (at
 * index * block_size) was checked by dlc_cache_block_read or written
 * earlier in this mount and is unchanged since; DLC_CACHE_UNCHECKED
 * otherwise; other -errno. */
int dlc_cache_block_open_checked(struct dlc_cache *cache, uint32_t ino, uint32_t index, int *fd);

/*
 * The whole of a large file from the cache: DLC_CACHE_OPENED with *fd on
 * its data file (the file's exact bytes) when every block is ready and
 * checked in this mount and the data file has not changed since, for the
 * open to pass through or splice as a whole file's; DLC_CACHE_UNCHECKED
 * otherwise; other -errno.
 */
int dlc_cache_blocks_open_whole(struct dlc_cache *cache, uint32_t ino, int *fd);

/* What dlc_cache_blocks_check_whole found: outcomes, not errors. */
enum dlc_cache_check {
	DLC_CACHE_CHECKED = 0,  /* every block is checked in this mount now */
	DLC_CACHE_INCOMPLETE,   /* ino is not complete in the cache */
	DLC_CACHE_TOO_LARGE,    /* more than max_bytes to read: the blocks are
				 * checked as they are read */
	DLC_CACHE_BAD_BLOCK,    /* a block was bad: dropped and counted as
				 * corrupt; the file is read by blocks, that one
				 * from the source again */
	DLC_CACHE_CHANGED,      /* the data file changed meanwhile */
};

/*
 * Checks the blocks of ino not checked yet in this mount, when every block
 * is ready, reading them through the page cache (which the kernel then
 * serves from).  An enum dlc_cache_check, or -errno (out of memory, the
 * data file unreadable).
 */
int dlc_cache_blocks_check_whole(struct dlc_cache *cache, uint32_t ino, uint64_t max_bytes);

/*
 * Offers block index of ino, just read from the source (size bytes).  The
 * first block offered of a file not cached asks the policy to admit the
 * whole file.  True when the block is (now) cached, false when bypassed.
 */
bool dlc_cache_block_offer(struct dlc_cache *cache, uint32_t ino, uint32_t index,
			   const void *data, uint64_t size);

/*
 * The same, for a block fetched ahead of its read (an announced shard's,
 * blocks.h), only while the cache has free room: a file not admitted yet is
 * admitted only if its whole footprint fits without evicting anything (a
 * file admitted already takes its block, its room charged).  Returns
 * whether the offer was made (the block cached, or refused as
 * dlc_cache_block_offer refuses); false when there was no room and nothing
 * was done: the caller offers the block again when it is read.
 */
bool dlc_cache_block_offer_if_room(struct dlc_cache *cache, uint32_t ino, uint32_t index,
				   const void *data, uint64_t size);

#endif
