/*
 * budget.h - one bound on the daemon's buffers (memory_limit=).
 *
 * Every buffer that holds file bytes draws from one budget: a miss's bytes
 * (held while its readers have the file open), prefetched files staged for
 * the reader, blocks of large files, whole-chunk passes and refused members
 * held for a chunk-wise reader, read replies, virtual-file renderings.  At
 * the limit, work waits for bytes to be given back instead of the daemon
 * growing until the OOM killer ends the mount.
 *
 * THE RULE: no one waits for memory while holding memory that another
 * waiter needs.  A reader may be slowed when memory is short, never stopped.
 * Charges are of two kinds, and the callers keep to this:
 *
 *   - Work (dlc_budget_acquire): may wait for room.  The thread that waits
 *     holds no other charge of its own, and gives its charge back after
 *     work that waits for nothing but I/O (a reply's buffer, a chunk pass),
 *     or hands it with dlc_budget_keep to something that gives it back
 *     without any waiting on the budget: an open file's bytes, given back
 *     at close; a staged prefetch, given back when read or after its grace.
 *     A pool thread therefore never waits twice.
 *
 *   - Kept (dlc_budget_try_acquire): never waits.  Memory that is given back
 *     only as a reader moves on (a stream's recent blocks, its readahead,
 *     members held for a chunk-wise reader) is taken only this way, and only
 *     while use stays at or below dlc_budget_kept_ceiling(), half the limit.
 *     A stream that finds no room reads without a buffer of its own (blocks.c:
 *     straight from the source into the reply) instead of waiting.
 *
 * So what a waiter waits for is either work, which ends, or memory given
 * back without the waiter's help; kept memory never holds more than half
 * the limit, and every work request fits in the other half (options keep
 * cache_max_file, block_size and replies at or below a quarter), so each
 * waiter gets through.  (One wait is the reader's own doing: a process that
 * keeps whole files open while it opens more, until their bytes fill the
 * limit, waits for its own closes, until its request's deadline at most:
 * dlc_budget_acquire_by; see DESIGN.md, "Memory".)  Debug builds check the first half of the rule: a
 * thread that holds a work charge and asks for another aborts (a check of
 * the calls made, not a proof; tests/unit/check_budget.c).
 */
#ifndef DLCACHE_BUDGET_H
#define DLCACHE_BUDGET_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct dlc_budget {
	pthread_mutex_t lock;
	pthread_cond_t returned;        /* bytes were given back */
	uint64_t limit;                 /* fixed after init */
	uint64_t used;                  /* guarded by lock */
	uint64_t peak;                  /* guarded by lock */
	uint64_t waits;                 /* guarded by lock: acquisitions that waited */
};

struct dlc_budget_gauges {
	uint64_t limit, used, peak, waits;
};

void dlc_budget_init(struct dlc_budget *budget, uint64_t limit);
void dlc_budget_destroy(struct dlc_budget *budget);

/*
 * A work charge: takes bytes, waiting while they do not fit under the
 * limit.  The calling thread must hold no other work charge (debug builds
 * assert it); the charge is the thread's until it gives it back with
 * dlc_budget_release or hands it on with dlc_budget_keep.  A request larger
 * than the whole limit is let through once nothing else is held (it cannot
 * fit otherwise; options keep such requests out).  A NULL budget takes
 * nothing.
 */
void dlc_budget_acquire(struct dlc_budget *budget, uint64_t bytes);

/*
 * dlc_budget_acquire that waits no later than deadline_ns (CLOCK_MONOTONIC,
 * deadline.h; 0: no deadline): 0 with the bytes taken, or -ETIMEDOUT with
 * nothing taken (and the thread holding no work charge) when they did not
 * fit by then (counted in waits).  What a request waits for is bounded by
 * its deadline (source_timeout): a miss or a read reply that finds no room
 * in time fails rather than wait for a close that may never come.
 */
int dlc_budget_acquire_by(struct dlc_budget *budget, uint64_t bytes, uint64_t deadline_ns);

/*
 * The calling thread's work charge of bytes now belongs to something that
 * gives it back without waiting on the budget (see the rule); the thread
 * may wait for memory again.  Takes and gives back nothing.
 */
void dlc_budget_keep(struct dlc_budget *budget, uint64_t bytes);

/* Takes bytes only if used stays at or below ceiling; never waits.  Memory
 * kept between requests uses a ceiling at most dlc_budget_kept_ceiling(). */
bool dlc_budget_try_acquire(struct dlc_budget *budget, uint64_t bytes, uint64_t ceiling);

/* The ceiling of kept memory: half the limit (UINT64_MAX without a budget). */
uint64_t dlc_budget_kept_ceiling(const struct dlc_budget *budget);

/* Whether bytes would fit with used at or below ceiling now; takes nothing. */
bool dlc_budget_has_room(struct dlc_budget *budget, uint64_t bytes, uint64_t ceiling);

/* Counts bytes already allocated (small renderings), without waiting. */
void dlc_budget_charge(struct dlc_budget *budget, uint64_t bytes);

/* Gives back bytes taken by any of the above (a work charge: see acquire). */
void dlc_budget_release(struct dlc_budget *budget, uint64_t bytes);

void dlc_budget_gauges(struct dlc_budget *budget, struct dlc_budget_gauges *out);

/* The invariants of budget.c: 0, or -EUCLEAN when one is broken (verify.h). */
int dlc_budget_verify(struct dlc_budget *budget);

#endif
