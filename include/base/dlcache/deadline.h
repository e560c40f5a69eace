/*
 * deadline.h - the time by which the request a thread serves must be
 * answered.
 *
 * A read or an open that waits on the source is answered within
 * source_timeout of its arrival in the daemon (bytes, or an error), whatever
 * it waits for on the way: a queue for the source pool, a flight another
 * reader or the readahead started, one source call or several (an open, a
 * failed readahead read again, a head read then its block).  Timing each of
 * those alone let one request wait for the sum (7-8 s with a 5 s timeout in
 * tests/bench/soak.sh).  So the thread that serves a request sets the
 * request's deadline for as long as it works on it (dlc_deadline_set), and
 * every wait below it ends by then: backend_deadline.c's source calls, the
 * flights of fetch.c and blocks.c.  A wait that ends at the deadline leaves
 * its work running for whoever else waits on it; only the request fails.
 *
 * A thread that serves no request (readahead, prefetch workers) has no
 * deadline: each of its source calls has source_timeout of its own.
 *
 * Times are CLOCK_MONOTONIC nanoseconds; 0 means "no deadline".
 */
#ifndef DLCACHE_DEADLINE_H
#define DLCACHE_DEADLINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC now, in nanoseconds. */
uint64_t dlc_deadline_now(void);

/* The calling thread serves a request due at deadline_ns (0: none) from now on. */
void dlc_deadline_set(uint64_t deadline_ns);

/* The calling thread's deadline, or 0. */
uint64_t dlc_deadline_get(void);

/* Whether the calling thread has a deadline and it has passed. */
bool dlc_deadline_passed(void);

/* The earlier of now + timeout_ns and the calling thread's deadline. */
uint64_t dlc_deadline_within(uint64_t timeout_ns);

/* deadline_ns as an absolute time for pthread_cond_timedwait on a
 * condition variable of CLOCK_MONOTONIC (dlc_deadline_cond_init). */
struct timespec dlc_deadline_timespec(uint64_t deadline_ns);

/* Initializes cond on CLOCK_MONOTONIC, for waits that end at a deadline. */
void dlc_deadline_cond_init(pthread_cond_t *cond);

#endif
