/*
 * prefetch.c - the prefetch workers: announcements taken into the plan
 * (dlc_fetch_prefetch), the worker threads started (dlc_fetch_start) and
 * what they do, each file flown through the single flight (fetch.c's
 * dlc_fetch_obtain) and each announced hit read ahead.  The top of the
 * fetcher: it calls fetch.c and staging.c, and neither calls it (the
 * workers are stopped and joined by dlc_fetch_stop, fetch.c's, since the
 * fetcher's end stops them first).
 *
 * Prefetch.  "prefetch PATH" lines announce the order in which the job will
 * read: each announced file gets the next sequence number and joins a FIFO
 * plan.  Workers take files from the plan and fly them like misses (a reader
 * arriving meanwhile joins the flight), then keep the bytes in memory,
 * "staged", until the reader opens the file; they enter the cache as they
 * land while it has free room, else when they are read (see fly, fetch.c).
 * The readers' position, and which plan entries and staged files it has
 * passed, are staging.c's.  Staged plus in-flight prefetches
 * never exceed the window (prefetch_window files, PREFETCH_WINDOW_BYTES
 * bytes: dlc_staging_window_full), so the prefetcher stays a bounded distance ahead, and what it
 * holds for the reader is in memory, where no eviction can take it.  The
 * cache plans with the same order: each announced file is told to it
 * (dlc_cache_announce), each open of a reader moves it on
 * (dlc_cache_consume), and a prefetch is offered to it as said above.
 * An announced file larger than max_file (a shard) is told to the cache
 * too, but streamed by blocks.c in its own announced order
 * (dlc_blocks_announce), not through the plan and workers here.
 *
 * Announced hits are read ahead (warm_list.h; DESIGN.md says why): a plan
 * entry the cache holds goes on the warm list, and a worker advises the
 * kernel to read its cache file once the reader is within the window of
 * it.  The list has WARM_WINDOWS windows of slots, one kept for each plan
 * entry a worker is looking at; while it is full the workers take nothing
 * from the plan, so they stay within nine windows of the reader (the
 * window of staged misses bounds the misses), and at most a window of hits
 * is read ahead at once.  An entry the reader opened or passed is dropped.
 *
 * INVARIANTS.  A worker holds fetch->lock (fetch.c) while it looks at the
 * plan, the window and the warm list, and drops it only for what may wait:
 * asking the cache for a plan entry, flying it, reading a hit ahead.
 * active counts the workers at work on a plan entry, and is part of the
 * window.  The workers are started once (dlc_fetch_start) and joined once
 * stopping is set (dlc_fetch_stop).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "dlcache/blocks.h"
#include "dlcache/fetch.h"
#include "fetch_private.h"
#include "warm_list.h"

/* Slots of the warm list, in windows (at most 2^20, 12 MiB): the workers go
 * on taking plan entries, and fetching its misses, past the hits it holds. */
#define WARM_WINDOWS 8u
#define WARM_MAX (1u << 20)

/* Room for a prefetch of size bytes: the budget stays under half full. */
static bool prefetch_room(struct dlc_fetch *fetch, uint64_t size)
{
	return !fetch->budget || dlc_budget_has_room(fetch->budget, size, fetch->budget->limit / 2);
}

/* Takes the warm list's first entry and reads it ahead if still wanted;
 * lock held, dropped meanwhile. */
static void warm_next(struct dlc_fetch *fetch)
{
	uint32_t ino;
	uint64_t seq;

	/* The slot this frees is the caller's to fill: no wake-up. */
	(void)dlc_warm_list_first(&fetch->warm, &ino, &seq);
	dlc_warm_list_pop(&fetch->warm);
	if (dlc_staging_passed(fetch, seq) || fetch->announced[ino] != seq)
		return;
	unlock(fetch);
	dlc_warm_file(fetch->cache, fetch->stats, ino);
	pthread_mutex_lock(&fetch->lock);
}

static void *prefetch_worker(void *arg)
{
	struct dlc_fetch *fetch = arg;

	pthread_mutex_lock(&fetch->lock);
	for (;;) {
		const struct dlc_node *node;
		uint32_t ino;
		uint64_t seq;

		while (!fetch->stopping && !dlc_staging_warm_due(fetch) &&
		       (fetch->plan_count == 0 || dlc_staging_window_full(fetch) ||
			dlc_warm_list_full(&fetch->warm)))
			wait_on(fetch, &fetch->queued);
		if (fetch->stopping)
			break;
		if (dlc_staging_warm_due(fetch)) {
			warm_next(fetch);
			continue;
		}
		ino = fetch->plan[fetch->plan_head];
		seq = fetch->plan_head_seq++;
		fetch->plan_head = (fetch->plan_head + 1) % fetch->plan_size;
		fetch->plan_count--;
		/* Passed by the readers, read already, or announced again later. */
		if (dlc_staging_passed(fetch, seq) || fetch->announced[ino] != seq)
			continue;
		fetch->active++;
		dlc_warm_list_keep(&fetch->warm);       /* it may be a hit */
		unlock(fetch);

		node = dlc_snapshot_node(fetch->snapshot, ino);
		/* Wake-ups only for what another worker may do now. */
		if (dlc_cache_contains(fetch->cache, ino)) {
			pthread_mutex_lock(&fetch->lock);
			dlc_warm_list_push_kept(&fetch->warm, ino, seq);
			if (dlc_staging_window_full(fetch))
				pthread_cond_broadcast(&fetch->queued);
			fetch->active--;
			continue;
		}
		pthread_mutex_lock(&fetch->lock);
		if (dlc_warm_list_full(&fetch->warm))
			pthread_cond_signal(&fetch->queued);
		dlc_warm_list_unkeep(&fetch->warm);
		unlock(fetch);
		/* Memory short: the file is left to be an ordinary miss. */
		if (prefetch_room(fetch, node->size)) {
			dlc_stats_add(fetch->stats, DLC_STAT_PREFETCHES, 1);
			(void)dlc_fetch_obtain(fetch, ino, node->size, seq, NULL, NULL);
		}
		/* This worker goes on with the room its item leaves: one other
		 * is woken, for work this one may not take (a due warm entry
		 * first). */
		pthread_mutex_lock(&fetch->lock);
		fetch->active--;
		pthread_cond_signal(&fetch->queued);
	}
	unlock(fetch);
	return NULL;
}

int dlc_fetch_start(struct dlc_fetch *fetch, unsigned workers, unsigned window)
{
	unsigned warm_slots;

	fetch->window = window ? window : 1;
	fetch->staged = calloc(fetch->window + workers, sizeof(*fetch->staged));
	fetch->staged_slots = fetch->staged ? fetch->window + workers : 0;
	fetch->workers = calloc(workers, sizeof(*fetch->workers));
	warm_slots = fetch->window > WARM_MAX / WARM_WINDOWS ? WARM_MAX : fetch->window * WARM_WINDOWS;
	if (!fetch->workers || !fetch->staged || dlc_warm_list_init(&fetch->warm, warm_slots) < 0)
		return -ENOMEM;
	for (unsigned i = 0; i < workers; i++) {
		int rc = pthread_create(&fetch->workers[i], NULL, prefetch_worker, fetch);

		if (rc != 0) {
			dlc_fetch_stop(fetch);
			return -rc;
		}
		fetch->nworkers++;
	}
	return 0;
}

bool dlc_fetch_prefetch(struct dlc_fetch *fetch, uint32_t ino)
{
	const struct dlc_node *node = dlc_snapshot_node(fetch->snapshot, ino);
	bool queued = false;
	unsigned window;

	if (!node || !S_ISREG(node->mode))
		return false;
	/* Outside fetch->lock: the cache's lock never nests inside it. */
	(void)dlc_cache_announce(fetch->cache, ino);
	if (node->size > fetch->max_file) {
		/* A shard: streamed by blocks (blocks.c, "Announced shards"). */
		if (!fetch->blocks)
			dlc_fetch_set_blocks(fetch, DLC_DEFAULT_BLOCK_SIZE, DLC_DEFAULT_READAHEAD_MAX, 0);
		pthread_mutex_lock(&fetch->lock);
		window = fetch->window;
		pthread_mutex_unlock(&fetch->lock);
		return fetch->blocks && dlc_blocks_announce(fetch->blocks, ino, window);
	}
	pthread_mutex_lock(&fetch->lock);
	if (!fetch->announced) {
		fetch->announced = calloc((size_t)dlc_snapshot_count(fetch->snapshot) + 1,
					  sizeof(*fetch->announced));
		if (fetch->announced)
			atomic_store_explicit(&fetch->planning, true, memory_order_release);
	}
	if (fetch->announced && fetch->nworkers > 0 && !fetch->stopping && dlc_staging_plan_grow(fetch)) {
		if (fetch->plan_count == 0)
			fetch->plan_head_seq = fetch->next_seq + 1;
		fetch->plan[(fetch->plan_head + fetch->plan_count) % fetch->plan_size] = ino;
		fetch->plan_count++;
		fetch->announced[ino] = ++fetch->next_seq;
		queued = true;
		/* One entry, one worker: a broadcast per line woke all of them
		 * (47,400 futex calls in an announced epoch of 2,000 files); a
		 * busy worker takes the plan's next entry as it finishes. */
		pthread_cond_signal(&fetch->queued);
	}
	unlock(fetch);
	return queued;
}
