/*
 * pool.h - a pool of threads for work that may wait on the source.
 *
 * The FUSE request threads must always be free to answer lookups, hits,
 * .stats and .control; anything that can wait on the source (a miss, a range
 * read of a large file) is handed to a pool and replied to from there.  The
 * pool grows a thread per job up to its limit and queues the rest in FIFO
 * order.
 */
#ifndef DLCACHE_POOL_H
#define DLCACHE_POOL_H

#include <stdint.h>

struct dlc_pool; /* opaque */

/* One job: run(arg) on a pool thread, or drop(arg) if the pool stops first. */
struct dlc_pool_job {
	void (*run)(void *arg);
	void (*drop)(void *arg);
	void *arg;
};

/* What the pool is doing now, for .stats. */
struct dlc_pool_gauges {
	unsigned threads;      /* started */
	unsigned running;      /* running a job */
	unsigned queued;       /* waiting for a thread */
	unsigned max_threads;
};

/* A pool of at most max_threads threads (none started yet); NULL on ENOMEM. */
struct dlc_pool *dlc_pool_create(unsigned max_threads);

/*
 * Queues job; a thread runs it as soon as one is free.  0, or -ENOMEM /
 * -ESHUTDOWN (the pool is stopping): then the job was not queued and the
 * caller still owns arg.
 */
int dlc_pool_submit(struct dlc_pool *pool, const struct dlc_pool_job *job);

void dlc_pool_gauges(struct dlc_pool *pool, struct dlc_pool_gauges *out);

/*
 * Stops the pool: queued jobs are dropped (their drop is called here) and
 * running jobs finish (after grace_ms a warning says what it waits for; a
 * job that waits on the source ends within the source's timeout).  Then
 * frees the pool.  NULL is a no-op.
 */
void dlc_pool_stop(struct dlc_pool *pool, unsigned grace_ms);

#endif
