/*
 * blocks_private.h - the state that blocks.c (the read path of large
 * files), flights.c (flights and readahead jobs) and shards.c (the stream
 * of announced shards) share, and the calls between them: blocks.c and
 * shards.c call flights.c, blocks.c calls shards.c, never the reverse.
 * Private to src/read/.  The locking rules are blocks.c's INVARIANTS.
 */
#ifndef DLCACHE_READ_BLOCKS_PRIVATE_H
#define DLCACHE_READ_BLOCKS_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlcache/blob.h"
#include "dlcache/blocks.h"
#include "dlcache/pool.h"
#include "failed_files.h"

struct block_flight {
	uint32_t ino;
	uint32_t index;
	unsigned refs;
	bool listed;
	bool landed;
	bool ahead;                     /* flown by readahead */
	bool settling;                  /* landed from the source, its offer to the cache
					 * not done: it stays listed until then */
	int rc;
	struct dlc_blob *blob;          /* landed with rc 0: the block's bytes */
	struct dlc_block_reader *owner; /* ahead: the reader it is staged for, or NULL */
	bool shard;                     /* ahead, flown by the stream of announced shards
					 * (owner: the shard's stream reader until taken) */
	bool unclaimed;                 /* shard: no reader took it yet; len counted in
					 * blocks->shard_bytes while listed */
	bool taken;                     /* shard: a reader took it */
	bool offered;                   /* shard: offered to the cache (or read from it) */
	uint64_t len;                   /* shard: the block's length */
	struct dlc_blocks *blocks;
	struct block_flight *next;
};

/* An announced large file in the shard plan (shards.c). */
struct shard {
	uint32_t ino;
	uint32_t nblocks;
	uint64_t size;
	uint64_t seq;                   /* its announcement's number, from 1 */
	uint32_t next_index;            /* the next block the stream flies */
	unsigned readers;               /* readers that claimed it */
	struct dlc_block_reader *stream;        /* owns its flights; made when first pumped */
	struct shard *next;
};

/* Most shard plan entries at once (an announcement beyond is refused). */
#define SHARD_PLAN_MAX (1u << 20)

struct dlc_blocks {
	struct dlc_block_source source;
	const struct dlc_snapshot *snapshot;
	struct dlc_cache *cache;
	struct dlc_stats *stats;
	struct dlc_budget *budget;
	uint64_t block_size;
	uint32_t readahead_blocks;      /* the window's cap, in blocks */
	uint32_t reorder;               /* blocks the kernel's requests may arrive out
					 * of order by, beyond one (see blocks.c, note_read) */
	unsigned held_blocks;           /* blocks a reader keeps in memory */
	uint64_t ahead_limit;           /* readahead only while the budget's use is below */
	struct dlc_pool *pool;          /* readahead fetches from the source */
	struct dlc_pool *local;         /* readahead of cached blocks (read whole and
					 * checked): the local disk's work */
	struct dlc_blob_spares *spares; /* the blocks' buffers, reused (fetch.h) */
	pthread_mutex_t lock;
	pthread_cond_t landed;          /* broadcast when a flight lands */
	struct block_flight *flights;   /* guarded by lock */
	struct dlc_failed_files failed; /* files the source did not answer lately */
	/* Announced shards, all guarded by lock. */
	struct shard *shards;           /* the plan, in announced order */
	struct shard **shards_tail;
	unsigned nshards;
	uint64_t shard_seq;             /* the last announcement's number */
	uint64_t opened_seq;            /* the furthest announced shard opened */
	unsigned shard_window;          /* prefetch_window: entries passed by this many go */
	uint64_t shard_bytes;           /* unclaimed shard blocks listed */
	uint64_t shard_limit;           /* readahead_max (whole blocks); 0: no stream */
	unsigned pumping;               /* pumps running (shards.c) */
	bool stopping;                  /* no more pumping */
	struct shard *pump_from;        /* NULL, or an entry before which every block is
					 * flown: the pump looks from there */
	_Atomic bool shards_due;        /* the stream may go on: pump at the next chance */
};

/* Blocks a reader keeps in memory: three (parallel readers of one file, and
 * the kernel's async reads), and as many more as the kernel's requests may
 * arrive out of order by, up to HELD_MAX (blocks->held_blocks). */
#define HELD_MAX 16

struct dlc_block_reader {
	_Atomic unsigned refs;
	struct dlc_blocks *blocks;
	uint32_t ino;
	uint64_t size;
	uint32_t nblocks;
	pthread_mutex_t lock;
	bool opened;                    /* lock: source.open called (on the first source read) */
	bool opening;                   /* lock: a thread is in source.open, unlocked */
	pthread_cond_t open_done;       /* broadcast when opening ends */
	void *handle;                   /* lock: what it gave */
	struct dlc_blob *held[HELD_MAX];        /* lock: blocks in memory, newest first;
						 * the first blocks->held_blocks used */
	uint32_t held_index[HELD_MAX];
	int fd;                         /* lock: a checked cache file, or -1 */
	uint32_t fd_index;
	uint32_t next_index;            /* lock: one past the furthest block read */
	unsigned advances;              /* lock: blocks advanced in a row */
	uint32_t window;                /* lock: readahead window in blocks, 0 = none */
	uint32_t ahead_until;           /* lock: blocks below are flown or cached */
	_Atomic bool read_once;         /* a read has come: the next has no head read */
	struct shard *shard;            /* blocks->lock: the plan entry it claimed, or NULL */
	uint32_t shard_rewind;          /* blocks->lock: a shard stream's lowest block its
					 * job found no room for, UINT32_MAX if none */
};

/* A readahead fetch queued on a pool (flights.c). */
struct ahead_job {
	struct dlc_block_reader *reader;        /* one reference */
	struct block_flight *flight;            /* one reference */
};

/* The length of block index of the reader's file. */
static inline uint64_t dlc_blocks_block_len(const struct dlc_block_reader *reader, uint32_t index)
{
	uint64_t start = (uint64_t)index * reader->blocks->block_size;

	return reader->size - start < reader->blocks->block_size ? reader->size - start
								   : reader->blocks->block_size;
}

/* flights.c: flights (blocks->lock held unless said), readers, readahead. */

/* Every release of blocks->lock (the wait for a landing included) and of
 * reader->lock, in any of the three files: verify builds check the
 * invariants there (verify.h). */
void dlc_flights_unlock(struct dlc_blocks *blocks);
void dlc_flights_wait(struct dlc_blocks *blocks);
void dlc_flights_reader_unlock(struct dlc_block_reader *reader);

/* A block's buffer, a try-charge at or below ceiling; NULL with no room. */
struct dlc_blob *dlc_flights_blob_new(struct dlc_blocks *blocks, uint64_t size, uint64_t ceiling);
/* The listed flight of (ino, index), or NULL. */
struct block_flight *dlc_flights_find(struct dlc_blocks *blocks, uint32_t ino, uint32_t index);
/* Drops one reference. */
void dlc_flights_put(struct block_flight *f);
/* The reader got landed f's bytes (see flights.c); true: hand f to
 * dlc_flights_offer_later once the lock is dropped. */
bool dlc_flights_take(struct dlc_blocks *blocks, struct block_flight *f,
		      const struct dlc_block_reader *reader);
/* Takes f out of the list (the list's may be the last reference). */
void dlc_flights_unlist(struct dlc_blocks *blocks, struct block_flight *f);
/* Lands f with rc; settles a landed flight after its offer. */
void dlc_flights_land(struct dlc_blocks *blocks, struct block_flight *f, int rc);
void dlc_flights_settle(struct dlc_blocks *blocks, struct block_flight *f);
/* Waits for f to land and takes its bytes (*out, *offer as take's). */
int dlc_flights_join(struct dlc_blocks *blocks, struct block_flight *f,
		     const struct dlc_block_reader *reader, struct dlc_blob **out,
		     struct block_flight **offer);
/* Offers landed f's bytes to the cache on the pool, then settles it and
 * drops the caller's reference; no lock held. */
void dlc_flights_offer_later(struct dlc_blocks *blocks, struct block_flight *f);

/* A reader of ino (size bytes), no side effects on the cache; NULL on ENOMEM. */
struct dlc_block_reader *dlc_flights_reader_new(struct dlc_blocks *blocks, uint32_t ino,
						uint64_t size);
/* Drops a reference to the reader; no lock held. */
void dlc_flights_reader_put(struct dlc_block_reader *reader);
/* Forgets the reader's staged blocks; no lock held. */
void dlc_flights_drop_staged(struct dlc_block_reader *reader);
/* The reader's source handle, opened on first use; no lock held. */
int dlc_flights_source_handle(struct dlc_block_reader *reader, void **out);
/* Logs and counts a file changed on the source; -EIO. */
int dlc_flights_changed_size(struct dlc_block_reader *reader);
/* Block index into blob, from the cache or the source; 0, -ETIMEDOUT or -EIO. */
int dlc_flights_load_block(struct dlc_block_reader *reader, uint32_t index, struct dlc_blob *blob,
			   bool *from_source);

/* Lists a readahead flight of block index (shard: for a shard's stream);
 * NULL with *skip (nothing to read) or not (no room).  No lock held. */
struct ahead_job *dlc_flights_list_ahead(struct dlc_block_reader *reader, uint32_t index, bool shard,
					 bool *skip);
/* Starts a listed flight on a pool; drops it (a struct ahead_job *) unstarted. */
void dlc_flights_submit_ahead(struct ahead_job *job);
void dlc_flights_drop_ahead(void *arg);

/* shards.c: the plan (no lock held unless said). */

/* The reader claims its file's first plan entry, if any; blocks->lock
 * held.  Returns entries to give to dlc_shards_release. */
struct shard *dlc_shards_claim(struct dlc_blocks *blocks, struct dlc_block_reader *reader);
/* The reader, closing, gives back its entry, which goes with its last
 * reader; blocks->lock held.  Returns entries to give to dlc_shards_release. */
struct shard *dlc_shards_unclaim(struct dlc_blocks *blocks, struct dlc_block_reader *reader);
/* Frees entries out of the plan and what their streams still hold. */
void dlc_shards_release(struct shard *gone);
/* Flies the plan's next blocks if the stream may go on (shards_due). */
void dlc_shards_pump_if_due(struct dlc_blocks *blocks);

#endif
