/*
 * pending.c - answer a request once: its work or its interrupt (pending.h).
 *
 * A reply frees the request.  libfuse calls the interrupt callback in two
 * places, both with the request's own lock held:
 *
 *   - from its INTERRUPT handler (find_interrupted), which takes a
 *     reference on the request first and drops it after the callback: a
 *     reply from the callback there is safe, the request outlives it;
 *   - from fuse_req_interrupt_func itself, at once, when the request was
 *     interrupted before the callback was registered (the kernel's
 *     INTERRUPT came while the daemon was still between reading the
 *     request and dlc_pending_watch).  No reference is held there: a reply
 *     from the callback frees the request, and fuse_req_interrupt_func then
 *     unlocks the freed request's mutex (libfuse 3.14 to 3.18 alike).
 *
 * The callback cannot tell the two apart, but it can tell whether
 * registration is over: dlc_pending_watch moves REGISTERING to WATCHED only
 * after fuse_req_interrupt_func returned.  So while REGISTERING the callback
 * only marks INTERRUPTED, and dlc_pending_watch, which holds the request,
 * answers EINTR itself.  From WATCHED on, the callback can only be running
 * from the INTERRUPT handler, and answers at once, so that a reader who
 * waits on a slow source leaves at once.  The moves are compare-and-swaps
 * (pending.h draws them); whoever wins the move to ANSWERED replies, and
 * the loser never touches req again.
 *
 * A callback that found the request answered by the work returns without
 * touching it; the work's claim unregisters the callback before it replies,
 * which waits for such a callback (fuse_req_interrupt_func takes the
 * request's lock), so the owner may free pending as soon as claim returns.
 *
 * The reaper.  Work under a request's deadline answers by it, but a request
 * can wait where no deadline reaches: queued in the source pool behind
 * threads busy with work that has none (a cache insert after an answered
 * miss, readahead), or on a lock such work holds.  So every watched request
 * with a deadline is linked into one registry, and one thread, started at
 * the first such watch, wakes at the earliest deadline + grace among them
 * and answers EIO (the reply for a source timeout) to each request still
 * WATCHED then; its work goes on, finds it unwanted, and its claim fails.
 * The owner frees pending once claim returned false, so the reaper takes a
 * request in two steps: WATCHED to EXPIRING under the registry's mutex
 * (unlinking it: a claim that comes later finds it out of the list and
 * waits), then, with the mutex released, the callback unregistered and the
 * reply; EXPIRING to ANSWERED under the mutex again, signalled to a claim
 * waiting for it.  Lock order: the registry's mutex, then nothing (the
 * reply and fuse_req_interrupt_func run without it).
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlcache/deadline.h"
#include "dlcache/log.h"
#include "pending.h"

/*
 * The reaper's registry: watched requests with a deadline, oldest first,
 * and the reaper thread's state, all under registry_lock.
 */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t registry_changed;         /* CLOCK_MONOTONIC: one watched, or stopping */
static pthread_cond_t registry_answered = PTHREAD_COND_INITIALIZER; /* EXPIRING -> ANSWERED */
static pthread_once_t registry_once = PTHREAD_ONCE_INIT;
static struct dlc_pending registry = { .prev = &registry, .next = &registry };
static pthread_t reaper;
static bool reaper_running, reaper_stopping, reaper_start_failed;
static uint64_t reaper_wake_ns;                 /* when it wakes next; 0: when signalled */

/* Moves state from `from` to `to`; true when this caller made the move. */
static bool move(struct dlc_pending *pending, int from, int to)
{
	return atomic_compare_exchange_strong(&pending->state, &from, to);
}

static void interrupted(fuse_req_t req, void *data)
{
	struct dlc_pending *pending = data;
	struct dlc_stats *stats = pending->stats;

	/* Maybe inside fuse_req_interrupt_func: mark, dlc_pending_watch answers. */
	if (move(pending, DLC_PENDING_REGISTERING, DLC_PENDING_INTERRUPTED))
		return;
	/* From the INTERRUPT handler, which holds req: answer now.  pending
	 * may be freed as soon as the move is made; only stats and req are
	 * used after it. */
	if (!move(pending, DLC_PENDING_WATCHED, DLC_PENDING_ANSWERED))
		return;
	dlc_stats_add(stats, DLC_STAT_INTERRUPTED, 1);
	fuse_reply_err(req, EINTR);
}

#ifndef NDEBUG
/*
 * Test hook (debug builds): DLCACHE_TEST_HOLD_WATCH=MS holds every request
 * here, before its callback is registered, until its reader is interrupted
 * or MS milliseconds passed, so that a mount test can deliver the
 * INTERRUPT inside the window this module must survive.
 */
static long hold_ms;
static pthread_once_t hold_once = PTHREAD_ONCE_INIT;

static void read_hold(void)
{
	const char *value = getenv("DLCACHE_TEST_HOLD_WATCH");

	hold_ms = value ? strtol(value, NULL, 10) : 0;
}

static void hold_for_test(fuse_req_t req)
{
	struct timespec tick = { 0, 1000000 };

	pthread_once(&hold_once, read_hold);
	for (long waited = 0; waited < hold_ms && !fuse_req_interrupted(req); waited++)
		nanosleep(&tick, NULL);
}
#endif

static void init_registry(void)
{
	dlc_deadline_cond_init(&registry_changed);
}

/* Registry lock held. */
static void unlink_pending(struct dlc_pending *pending)
{
	pending->prev->next = pending->next;
	pending->next->prev = pending->prev;
	pending->prev = pending->next = NULL;
}

/* Answers EIO to a request the reaper moved to EXPIRING; no lock held. */
static void expire(struct dlc_pending *pending)
{
	/* Waits for a callback running now; its move fails on EXPIRING. */
	fuse_req_interrupt_func(pending->req, NULL, NULL);
	dlc_stats_add(pending->stats, DLC_STAT_EXPIRED, 1);
	if (pending->on_expire)
		pending->on_expire(pending);
	fuse_reply_err(pending->req, EIO);
}

static void *reap(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&registry_lock);
	while (!reaper_stopping) {
		struct dlc_pending *due = NULL, *pending, *next;
		uint64_t now = dlc_deadline_now(), wake = 0;

		for (pending = registry.next; pending != &registry && !due; pending = next) {
			uint64_t at = pending->deadline_ns + DLC_PENDING_GRACE_NS;

			next = pending->next;
			if (atomic_load(&pending->state) != DLC_PENDING_WATCHED)
				unlink_pending(pending);        /* answered; its claim is to come */
			else if (now < at)
				wake = !wake || at < wake ? at : wake;
			else if (move(pending, DLC_PENDING_WATCHED, DLC_PENDING_EXPIRING))
				due = pending;
		}
		if (due) {
			unlink_pending(due);
			pthread_mutex_unlock(&registry_lock);
			expire(due);
			pthread_mutex_lock(&registry_lock);
			atomic_store(&due->state, DLC_PENDING_ANSWERED);
			pthread_cond_broadcast(&registry_answered);
			continue;
		}
		reaper_wake_ns = wake;
		if (wake) {
			struct timespec until = dlc_deadline_timespec(wake);

			pthread_cond_timedwait(&registry_changed, &registry_lock, &until);
		} else {
			pthread_cond_wait(&registry_changed, &registry_lock);
		}
	}
	pthread_mutex_unlock(&registry_lock);
	return NULL;
}

/* Links a watched request into the registry, starting the reaper if need be. */
static void enter_registry(struct dlc_pending *pending)
{
	uint64_t at = pending->deadline_ns + DLC_PENDING_GRACE_NS;

	pthread_once(&registry_once, init_registry);
	pthread_mutex_lock(&registry_lock);
	pending->prev = registry.prev;
	pending->next = &registry;
	registry.prev->next = pending;
	registry.prev = pending;
	if (!reaper_running && !reaper_stopping) {
		int rc = pthread_create(&reaper, NULL, reap, NULL);

		if (rc == 0) {
			reaper_running = true;
		} else if (!reaper_start_failed) {
			/* Tried again at the next watch; said once. */
			reaper_start_failed = true;
			dlc_log(DLC_LOG_WARNING, "cannot start the thread that answers requests past source_timeout (%s); such a request waits for its work",
				strerror(rc));
		}
	} else if (!reaper_wake_ns || at < reaper_wake_ns) {
		pthread_cond_signal(&registry_changed);
	}
	pthread_mutex_unlock(&registry_lock);
}

/* Unlinks pending if the reaper did not, and waits while the reaper answers it. */
static void leave_registry(struct dlc_pending *pending)
{
	pthread_mutex_lock(&registry_lock);
	if (pending->next)
		unlink_pending(pending);
	while (atomic_load(&pending->state) == DLC_PENDING_EXPIRING)
		pthread_cond_wait(&registry_answered, &registry_lock);
	pthread_mutex_unlock(&registry_lock);
}

void dlc_pending_stop_reaper(void)
{
	pthread_mutex_lock(&registry_lock);
	if (!reaper_running) {
		pthread_mutex_unlock(&registry_lock);
		return;
	}
	/* Every watched request was claimed: the source pool has stopped. */
	assert(registry.next == &registry);
	reaper_stopping = true;
	pthread_cond_signal(&registry_changed);
	pthread_mutex_unlock(&registry_lock);
	pthread_join(reaper, NULL);
	pthread_mutex_lock(&registry_lock);
	reaper_running = reaper_stopping = false;
	reaper_wake_ns = 0;
	pthread_mutex_unlock(&registry_lock);
}

bool dlc_pending_watch(struct dlc_pending *pending, fuse_req_t req, struct dlc_stats *stats,
		       uint64_t deadline_ns, void (*on_expire)(struct dlc_pending *pending))
{
	pending->req = req;
	pending->stats = stats;
	pending->deadline_ns = deadline_ns;
	pending->on_expire = on_expire;
	pending->prev = pending->next = NULL;
	atomic_init(&pending->state, DLC_PENDING_REGISTERING);
#ifndef NDEBUG
	hold_for_test(req);
#endif
	fuse_req_interrupt_func(req, interrupted, pending);
	if (move(pending, DLC_PENDING_REGISTERING, DLC_PENDING_WATCHED)) {
		/* Answered by an interrupt meanwhile or not, the claim unlinks it. */
		if (deadline_ns)
			enter_registry(pending);
		return true;
	}
	/* Interrupted during registration: the callback only marked it. */
	fuse_req_interrupt_func(req, NULL, NULL);
	atomic_store(&pending->state, DLC_PENDING_ANSWERED);
	dlc_stats_add(stats, DLC_STAT_INTERRUPTED, 1);
	fuse_reply_err(req, EINTR);
	return false;
}

bool dlc_pending_wanted(struct dlc_pending *pending)
{
	return atomic_load(&pending->state) == DLC_PENDING_WATCHED;
}

bool dlc_pending_claim(struct dlc_pending *pending)
{
	bool claimed = move(pending, DLC_PENDING_WATCHED, DLC_PENDING_ANSWERED);

	if (pending->deadline_ns)
		leave_registry(pending);
	if (!claimed)
		return false;
	fuse_req_interrupt_func(pending->req, NULL, NULL);
	return true;
}
