/*
 * fetch_private.h - the state of the fetcher (fetch.c) that its invariant
 * checks (fetch_verify.c) read: flights, staged prefetches, the plan, the
 * source table.  Private to src/read/; other layers see struct dlc_fetch
 * as opaque (fetch.h).
 */
#ifndef DLCACHE_READ_FETCH_PRIVATE_H
#define DLCACHE_READ_FETCH_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dlcache/fetch.h"
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

/* How a mount reads its source: see "The source" in fetch.c. */
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

/*
 * The invariants of fetch.c's INVARIANTS block: 0, or -EUCLEAN.  fetch->lock
 * held.  fetch.c runs it at every release of the lock in verify builds.
 */
int dlc_fetch_verify_locked(const struct dlc_fetch *fetch);

#endif
