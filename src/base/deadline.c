/*
 * deadline.c - the deadline of the request a thread serves (deadline.h):
 * one thread-local time, set by the thread that takes the request and read
 * by every wait below it on the same thread.  Thread-local, not a parameter,
 * because the waits lie layers below the request (the source driver's
 * calls under the flights of the read path) behind call tables that know
 * nothing of requests; the request's work runs on one thread from its start
 * to its reply, so the thread is where the request is.
 */
#include "dlcache/deadline.h"

static _Thread_local uint64_t current;

uint64_t dlc_deadline_now(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

void dlc_deadline_set(uint64_t deadline_ns)
{
	current = deadline_ns;
}

uint64_t dlc_deadline_get(void)
{
	return current;
}

bool dlc_deadline_passed(void)
{
	return current && dlc_deadline_now() >= current;
}

uint64_t dlc_deadline_within(uint64_t timeout_ns)
{
	uint64_t own = dlc_deadline_now() + timeout_ns;

	return current && current < own ? current : own;
}

struct timespec dlc_deadline_timespec(uint64_t deadline_ns)
{
	return (struct timespec) { .tv_sec = (time_t)(deadline_ns / 1000000000ULL),
				   .tv_nsec = (long)(deadline_ns % 1000000000ULL) };
}

void dlc_deadline_cond_init(pthread_cond_t *cond)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(cond, &attr);
	pthread_condattr_destroy(&attr);
}
