/*
 * pool.c - threads for work that may wait on the source (see pool.h).
 *
 * Jobs sit in a FIFO ring.  A submit wakes an idle thread, or starts a new
 * one while fewer than max_threads exist; otherwise the job waits its turn.
 * Threads never exit before the pool stops: a pool that once needed N
 * threads will need them again at the next epoch's burst of misses, and an
 * idle thread costs only its stack's touched pages.
 *
 * INVARIANTS.  pool->lock guards every field but max_threads.  The ring
 * holds queued jobs from head, count of them, in a buffer of capacity
 * slots (a power of two, grown by doubling).  running counts threads inside
 * a job, idle those waiting for one.  A thread holds no pool lock while it
 * runs a job.  Threads are never cancelled: a job waiting on the source ends
 * within the source's own timeout (nfs_timeout, source_timeout), so stopping
 * waits for running jobs rather than abandon one holding a flight or a lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlcache/log.h"
#include "dlcache/pool.h"

/* Pool threads wait on the source and in small fetch frames: 256 KiB each. */
#define POOL_STACK (256u << 10)

struct dlc_pool {
	pthread_mutex_t lock;
	pthread_cond_t work;            /* a job was queued, or stopping */
	pthread_cond_t done;            /* a thread finished a job or exited */
	struct dlc_pool_job *ring;
	size_t capacity, head, count;
	pthread_t *threads;             /* max_threads slots, threads of them started */
	unsigned nthreads;
	unsigned idle;
	unsigned running;
	unsigned max_threads;
	bool stopping;
};

struct dlc_pool *dlc_pool_create(unsigned max_threads)
{
	struct dlc_pool *pool = calloc(1, sizeof(*pool));

	if (!pool)
		return NULL;
	pool->max_threads = max_threads ? max_threads : 1;
	pool->threads = calloc(pool->max_threads, sizeof(*pool->threads));
	pool->capacity = 64;
	pool->ring = calloc(pool->capacity, sizeof(*pool->ring));
	if (!pool->threads || !pool->ring) {
		free(pool->threads);
		free(pool->ring);
		free(pool);
		return NULL;
	}
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->work, NULL);
	pthread_cond_init(&pool->done, NULL);
	return pool;
}

static void *pool_thread(void *arg)
{
	struct dlc_pool *pool = arg;

	pthread_mutex_lock(&pool->lock);
	for (;;) {
		struct dlc_pool_job job;

		while (!pool->count && !pool->stopping) {
			pool->idle++;
			pthread_cond_wait(&pool->work, &pool->lock);
			pool->idle--;
		}
		if (pool->stopping)
			break;
		job = pool->ring[pool->head];
		pool->head = (pool->head + 1) & (pool->capacity - 1);
		pool->count--;
		pool->running++;
		pthread_mutex_unlock(&pool->lock);

		job.run(job.arg);

		pthread_mutex_lock(&pool->lock);
		pool->running--;
		if (pool->stopping)
			pthread_cond_broadcast(&pool->done);
	}
	pthread_mutex_unlock(&pool->lock);
	return NULL;
}

/* Doubles the ring, keeping the queued jobs in order.  Lock held. */
static int ring_grow(struct dlc_pool *pool)
{
	size_t capacity = pool->capacity * 2;
	struct dlc_pool_job *ring = malloc(capacity * sizeof(*ring));

	if (!ring)
		return -ENOMEM;
	for (size_t i = 0; i < pool->count; i++)
		ring[i] = pool->ring[(pool->head + i) & (pool->capacity - 1)];
	free(pool->ring);
	pool->ring = ring;
	pool->capacity = capacity;
	pool->head = 0;
	return 0;
}

/* Starts one more thread; a failure is not fatal while one thread exists. */
static void grow_threads(struct dlc_pool *pool)
{
	pthread_attr_t attr;
	int rc;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, POOL_STACK);
	rc = pthread_create(&pool->threads[pool->nthreads], &attr, pool_thread, pool);
	pthread_attr_destroy(&attr);
	if (rc == 0)
		pool->nthreads++;
	else if (pool->nthreads == 0)
		dlc_log(DLC_LOG_ERROR, "cannot start a thread for source reads: %s", strerror(rc));
}

int dlc_pool_submit(struct dlc_pool *pool, const struct dlc_pool_job *job)
{
	int rc = 0;

	pthread_mutex_lock(&pool->lock);
	if (pool->stopping) {
		rc = -ESHUTDOWN;
		goto out;
	}
	if (pool->count == pool->capacity && (rc = ring_grow(pool)) < 0)
		goto out;
	pool->ring[(pool->head + pool->count) & (pool->capacity - 1)] = *job;
	pool->count++;
	if (pool->idle >= pool->count)
		pthread_cond_signal(&pool->work);
	else if (pool->nthreads < pool->max_threads)
		grow_threads(pool);
	else
		pthread_cond_signal(&pool->work);
	if (pool->nthreads == 0) {
		/* Not even one thread: the job cannot run. */
		pool->count--;
		rc = -ENOMEM;
	}
out:
	pthread_mutex_unlock(&pool->lock);
	return rc;
}

void dlc_pool_gauges(struct dlc_pool *pool, struct dlc_pool_gauges *out)
{
	pthread_mutex_lock(&pool->lock);
	out->threads = pool->nthreads;
	out->running = pool->running;
	out->queued = (unsigned)pool->count;
	out->max_threads = pool->max_threads;
	pthread_mutex_unlock(&pool->lock);
}

void dlc_pool_stop(struct dlc_pool *pool, unsigned grace_ms)
{
	struct timespec deadline;
	bool warned = false;

	if (!pool)
		return;
	pthread_mutex_lock(&pool->lock);
	pool->stopping = true;
	while (pool->count) {
		struct dlc_pool_job job = pool->ring[pool->head];

		pool->head = (pool->head + 1) & (pool->capacity - 1);
		pool->count--;
		pthread_mutex_unlock(&pool->lock);
		if (job.drop)
			job.drop(job.arg);
		pthread_mutex_lock(&pool->lock);
	}
	pthread_cond_broadcast(&pool->work);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += grace_ms / 1000;
	deadline.tv_nsec += (long)(grace_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	while (pool->running) {
		if (warned) {
			pthread_cond_wait(&pool->done, &pool->lock);
		} else if (pthread_cond_timedwait(&pool->done, &pool->lock, &deadline) == ETIMEDOUT) {
			dlc_log(DLC_LOG_INFO, "waiting for %u reads from the source to end (at most the source timeout)",
				pool->running);
			warned = true;
		}
	}
	pthread_mutex_unlock(&pool->lock);
	for (unsigned i = 0; i < pool->nthreads; i++)
		pthread_join(pool->threads[i], NULL);
	pthread_cond_destroy(&pool->work);
	pthread_cond_destroy(&pool->done);
	pthread_mutex_destroy(&pool->lock);
	free(pool->ring);
	free(pool->threads);
	free(pool);
}
