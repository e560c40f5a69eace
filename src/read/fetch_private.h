/*
 * fetch_private.h - the state of the fetcher, shared by its files (fetch.c
 * says which owns what, each calling only those below it: prefetch.c,
 * fetch.c, staging.c, fetch_source.c) and read by its invariant checks
 * (fetch_verify.c): flights, staged prefetches, the plan, the source table.
 * Private to src/read/; other layers see struct dlc_fetch as opaque
 * (fetch.h).
 */
#ifndef DLCACHE_READ_FETCH_PRIVATE_H
#define DLCACHE_READ_FETCH_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "dlcache/fetch.h"
#include "dlcache/verify.h"
#include "warm_list.h"

struct flight {
	uint32_t ino;
	unsigned refs;
	bool landed;
	bool ahead;                     /* flown by a prefetch worker, ahead of the reader */
	bool settling;                  /* a reader's miss landed before its cache insert:
					 * still listed, with the list's reference, until
					 * dlc_fetch_offer_later has offered its bytes */
	bool tier_due;                  /* settling: read from the source, offered to the
					 * tier after the cache */
	uint64_t stage_seq;             /* ahead: the announced position it is fetched for */
	int rc;
	struct dlc_blob *blob;          /* one reference held by the flight once landed */
	struct flight *next;
};

/* A prefetched file held for the reader. */
struct staged {
	uint32_t ino;
	uint64_t seq;
	struct dlc_blob *blob;
	uint64_t staged_ns;             /* CLOCK_MONOTONIC when it was staged */
	bool offered;                   /* offered to the cache as it landed (free room,
					 * or by a chunk read): not again at its read */
};

/* How a mount reads its source: see "The source" in fetch_source.c. */
struct source_ops {
	/* Regular file ino (blob->size bytes per the snapshot) into blob;
	 * *offered when it is in the cache already.  0, -EIO, -ENOMEM. */
	int (*read_whole)(struct dlc_fetch *fetch, uint32_t ino, struct dlc_blob *blob,
			  bool *offered);
	/* Bytes of ino read a moment ago and held in memory, copied into buf;
	 * NULL: the kind holds nothing. */
	bool (*take_held)(struct dlc_fetch *fetch, uint32_t ino, void *buf, uint64_t size);
	struct dlc_block_source block;  /* ctx: the fetcher */
};

struct dlc_fetch {
	struct dlc_backend *backend;
	const struct dlc_snapshot *snapshot;
	struct dlc_cache *cache;
	struct dlc_stats *stats;
	uint64_t max_file;
	const struct source_ops *source;        /* tree_source or packed_source */
	struct dlc_chunks *chunks;      /* packed sources only; NULL for a tree */
	struct dlc_blocks *blocks;      /* files larger than max_file; made once
					 * (dlc_fetch_set_blocks), under lock */
	struct dlc_tier *tier;          /* the cluster tier, or NULL; set before serving */
	struct dlc_budget *budget;      /* file buffers' bound, or NULL; set before serving */
	pthread_mutex_t lock;
	pthread_cond_t landed;          /* broadcast when any flight lands */
	struct flight *flights;         /* guarded by lock */
	pthread_cond_t queued;          /* signalled once per plan entry and as a worker
					 * leaves its item, broadcast when staged files
					 * leave the window, or stopping */
	uint32_t *plan;                 /* guarded by lock: announced inodes, a ring */
	size_t plan_size;               /* guarded by lock: slots in plan */
	size_t plan_head;               /* guarded by lock: next to take */
	size_t plan_count;              /* guarded by lock */
	uint64_t plan_head_seq;         /* guarded by lock: sequence number at plan_head */
	uint64_t next_seq;              /* guarded by lock: of the next announced file */
	uint64_t *announced;            /* guarded by lock: per inode, its latest sequence
					 * number, 0 = never or already opened; NULL until
					 * the first prefetch */
	_Atomic bool planning;          /* announced != NULL: readers must report opens */
	uint64_t reader_seq;            /* guarded by lock: the furthest announced file opened */
	struct staged *staged;          /* guarded by lock: window entries, window of them */
	unsigned nstaged;               /* guarded by lock */
	unsigned staged_slots;          /* entries staged has room for: window + workers,
					 * fixed at start */
	uint64_t staged_bytes;          /* guarded by lock */
	unsigned active;                /* guarded by lock: workers fetching */
	unsigned window;
	struct dlc_warm_list warm;      /* guarded by lock: announced hits to read ahead */
	bool stopping;                  /* guarded by lock */
	pthread_t *workers;
	unsigned nworkers;
};

/* The two tables of fetch_source.c: a tree's, a packed snapshot's. */
extern const struct source_ops dlc_fetch_source_tree, dlc_fetch_source_packed;

/*
 * fetch.c: joins the flight for ino, or starts and flies it (stage_seq not
 * 0: a prefetch for that announced position, staged as it lands), and
 * waits for it to land; *out (out not NULL) one reference to the bytes;
 * with later, a reader's miss answered first (fetch.c says how).  0 or
 * -errno; fetch->lock not held.
 */
int dlc_fetch_obtain(struct dlc_fetch *fetch, uint32_t ino, uint64_t size, uint64_t stage_seq,
		     struct dlc_blob **out, struct dlc_blob **later);

/*
 * staging.c, each with fetch->lock held, never dropped: whether announced
 * position seq is a whole window behind the readers; whether the warm
 * list's first entry is due; a reader's open of ino noted (its staged
 * bytes, if any, returned, *offered whether they were offered already);
 * whether staged and in-flight prefetches fill the window; room made for
 * one more plan entry (false: none).
 */
bool dlc_staging_passed(const struct dlc_fetch *fetch, uint64_t seq);
bool dlc_staging_warm_due(const struct dlc_fetch *fetch);
struct dlc_blob *dlc_staging_reader_opened(struct dlc_fetch *fetch, uint32_t ino, bool *offered);
bool dlc_staging_window_full(const struct dlc_fetch *fetch);
bool dlc_staging_plan_grow(struct dlc_fetch *fetch);

/*
 * The invariants of the INVARIANTS blocks of fetch.c and staging.c: 0, or
 * -EUCLEAN.  fetch->lock held.  Run at every release of the lock in verify
 * builds (unlock, wait_on below).
 */
int dlc_fetch_verify_locked(const struct dlc_fetch *fetch);

/*
 * fetch->lock released (unlock) or waited on (wait_on) by every fetch file,
 * in verify builds once these hold (dlc_fetch_verify_locked):
 * listed flights unlanded or settling (a miss's, with its bytes), held,
 * one per inode, a prefetch's with its position; the plan ring in its slots, numbered up to the last
 * announcement, each entry announced at its number, later or opened (0);
 * staged files in their slots, with bytes and a position, staged_bytes
 * their sum; the readers' position; nothing planned or staged without the
 * announced table, nor planned once stopping; the warm list in its slots,
 * in announced order.
 */
static inline void unlock(struct dlc_fetch *fetch)
{
	DLC_VERIFY(dlc_fetch_verify_locked(fetch));
	pthread_mutex_unlock(&fetch->lock);
}

static inline void wait_on(struct dlc_fetch *fetch, pthread_cond_t *cond)
{
	DLC_VERIFY(dlc_fetch_verify_locked(fetch));
	pthread_cond_wait(cond, &fetch->lock);
}

#endif
