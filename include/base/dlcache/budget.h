/*
 * budget.h - one bound on the daemon's buffers (memory_limit=).
 *
 * Every buffer that holds file bytes draws from one budget: a miss's bytes
 * (held while its readers have the file open), prefetched files staged for
 * the reader, range reads of large files, whole-chunk passes and refused
 * members held for a chunk-wise reader, virtual-file renderings.  At the
 * limit, work waits for bytes to be given back instead of the daemon growing
 * until the OOM killer ends the mount.  Optional work (prefetching, holding)
 * never waits: it takes what is free below its own ceiling or does nothing,
 * so that it can never leave a reader's miss waiting for it.
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
 * Takes bytes, waiting while they do not fit under the limit.  A request
 * larger than the whole limit is let through once nothing else is held (it
 * cannot fit otherwise; options keep such requests out).  A NULL budget
 * takes nothing.
 */
void dlc_budget_acquire(struct dlc_budget *budget, uint64_t bytes);

/* Takes bytes only if used stays at or below ceiling; never waits. */
bool dlc_budget_try_acquire(struct dlc_budget *budget, uint64_t bytes, uint64_t ceiling);

/* Whether bytes would fit with used at or below ceiling now; takes nothing. */
bool dlc_budget_has_room(struct dlc_budget *budget, uint64_t bytes, uint64_t ceiling);

/* Counts bytes already allocated (small renderings), without waiting. */
void dlc_budget_charge(struct dlc_budget *budget, uint64_t bytes);

/* Gives back bytes taken by any of the above. */
void dlc_budget_release(struct dlc_budget *budget, uint64_t bytes);

void dlc_budget_gauges(struct dlc_budget *budget, struct dlc_budget_gauges *out);

#endif
