/*
 * budget.c - one bound on the daemon's buffers (see budget.h).
 *
 * A counter under a mutex, and a condition broadcast when bytes come back.
 * Waiters are not queued in order: each wakes and checks whether its
 * request fits now.  A request larger than the limit passes only when
 * nothing is held, so the bound is exceeded by at most that one request and
 * never deadlocks.
 *
 * The rule (budget.h) is the callers'; debug builds check its first half
 * with one thread-local slot: the work charge the thread holds, set by
 * dlc_budget_acquire and cleared when the thread gives those bytes back or
 * keeps them.  A thread asking for a second work charge while its slot is
 * set aborts.  (Bytes given back on the thread by something else of the
 * same size clear it too: the check can miss a fault, never invent one.)
 *
 * INVARIANTS.  lock guards used, peak and waits; used is the sum of the
 * bytes taken and not yet released; peak >= used.  A thread holds at most
 * one work charge, and waits only while it holds none.  dlc_budget_verify
 * checks peak >= used (which a release of more than was taken breaks, used
 * wrapping below zero); verify builds run it at every release of lock
 * (unlock()).  used <= limit is not an invariant: a charge and the lone
 * request larger than the limit may pass it, and a release cannot tell
 * whose bytes come back.  The per-thread rule is the debug assertion above.
 */
#include <assert.h>
#include <errno.h>

#include "dlcache/budget.h"
#include "dlcache/deadline.h"
#include "dlcache/verify.h"

#ifndef NDEBUG
/* Debug builds: the calling thread's work charge (bytes, budget), if any. */
static _Thread_local struct {
	const struct dlc_budget *budget;
	uint64_t bytes;
} work_held;
#endif

static int verify_locked(const struct dlc_budget *budget)
{
	return budget->peak >= budget->used ? 0 : -EUCLEAN;
}

/* Every path that takes budget->lock leaves through here (verify.h); a
 * wait, which releases it too, is entered through wait_returned. */
static void unlock(struct dlc_budget *budget)
{
	DLC_VERIFY(verify_locked(budget));
	pthread_mutex_unlock(&budget->lock);
}

/* With until 0 for ever; false when until (CLOCK_MONOTONIC) came first. */
static bool wait_returned(struct dlc_budget *budget, uint64_t until)
{
	struct timespec at = dlc_deadline_timespec(until);

	DLC_VERIFY(verify_locked(budget));
	if (!until)
		return pthread_cond_wait(&budget->returned, &budget->lock) == 0;
	return pthread_cond_timedwait(&budget->returned, &budget->lock, &at) != ETIMEDOUT;
}

int dlc_budget_verify(struct dlc_budget *budget)
{
	int rc;

	pthread_mutex_lock(&budget->lock);
	rc = verify_locked(budget);
	pthread_mutex_unlock(&budget->lock);
	return rc;
}

void dlc_budget_init(struct dlc_budget *budget, uint64_t limit)
{
	pthread_mutex_init(&budget->lock, NULL);
	dlc_deadline_cond_init(&budget->returned);
	budget->limit = limit;
	budget->used = budget->peak = budget->waits = 0;
}

void dlc_budget_destroy(struct dlc_budget *budget)
{
	pthread_cond_destroy(&budget->returned);
	pthread_mutex_destroy(&budget->lock);
}

static bool fits(const struct dlc_budget *budget, uint64_t bytes, uint64_t ceiling)
{
	return bytes <= ceiling && budget->used <= ceiling - bytes;
}

static void take(struct dlc_budget *budget, uint64_t bytes)
{
	budget->used += bytes;
	if (budget->used > budget->peak)
		budget->peak = budget->used;
}

void dlc_budget_acquire(struct dlc_budget *budget, uint64_t bytes)
{
	(void)dlc_budget_acquire_by(budget, bytes, 0);
}

int dlc_budget_acquire_by(struct dlc_budget *budget, uint64_t bytes, uint64_t deadline_ns)
{
	bool waited = false;

	if (!budget)
		return 0;
	/* The rule (budget.h): a thread holding budget never waits for more. */
	assert(work_held.budget == NULL);
	pthread_mutex_lock(&budget->lock);
	while (!fits(budget, bytes, budget->limit) && !(bytes > budget->limit && budget->used == 0)) {
		waited = true;
		/* Woken at the deadline, it looks once more before it leaves. */
		if (!wait_returned(budget, deadline_ns) && !fits(budget, bytes, budget->limit) &&
		    !(bytes > budget->limit && budget->used == 0)) {
			budget->waits++;
			unlock(budget);
			return -ETIMEDOUT;
		}
	}
	if (waited)
		budget->waits++;
	take(budget, bytes);
	unlock(budget);
#ifndef NDEBUG
	if (bytes > 0) {
		work_held.budget = budget;
		work_held.bytes = bytes;
	}
#endif
	return 0;
}

void dlc_budget_keep(struct dlc_budget *budget, uint64_t bytes)
{
#ifndef NDEBUG
	if (budget && work_held.budget == budget && work_held.bytes == bytes)
		work_held.budget = NULL;
#else
	(void)budget;
	(void)bytes;
#endif
}

uint64_t dlc_budget_kept_ceiling(const struct dlc_budget *budget)
{
	return budget ? budget->limit / 2 : UINT64_MAX;
}

bool dlc_budget_try_acquire(struct dlc_budget *budget, uint64_t bytes, uint64_t ceiling)
{
	bool ok;

	if (!budget)
		return true;
	pthread_mutex_lock(&budget->lock);
	ok = fits(budget, bytes, ceiling < budget->limit ? ceiling : budget->limit);
	if (ok)
		take(budget, bytes);
	unlock(budget);
	return ok;
}

bool dlc_budget_has_room(struct dlc_budget *budget, uint64_t bytes, uint64_t ceiling)
{
	bool room;

	if (!budget)
		return true;
	pthread_mutex_lock(&budget->lock);
	room = fits(budget, bytes, ceiling < budget->limit ? ceiling : budget->limit);
	unlock(budget);
	return room;
}

void dlc_budget_charge(struct dlc_budget *budget, uint64_t bytes)
{
	if (!budget)
		return;
	pthread_mutex_lock(&budget->lock);
	take(budget, bytes);
	unlock(budget);
}

void dlc_budget_release(struct dlc_budget *budget, uint64_t bytes)
{
	if (!budget || bytes == 0)
		return;
	dlc_budget_keep(budget, bytes);         /* given back: no longer the thread's */
	pthread_mutex_lock(&budget->lock);
	assert(budget->used >= bytes);
	budget->used -= bytes;
	pthread_cond_broadcast(&budget->returned);
	unlock(budget);
}

void dlc_budget_gauges(struct dlc_budget *budget, struct dlc_budget_gauges *out)
{
	pthread_mutex_lock(&budget->lock);
	out->limit = budget->limit;
	out->used = budget->used;
	out->peak = budget->peak;
	out->waits = budget->waits;
	unlock(budget);
}
