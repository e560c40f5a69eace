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
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "pending.h"

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

bool dlc_pending_watch(struct dlc_pending *pending, fuse_req_t req, struct dlc_stats *stats)
{
	pending->req = req;
	pending->stats = stats;
	atomic_init(&pending->state, DLC_PENDING_REGISTERING);
#ifndef NDEBUG
	hold_for_test(req);
#endif
	fuse_req_interrupt_func(req, interrupted, pending);
	if (move(pending, DLC_PENDING_REGISTERING, DLC_PENDING_WATCHED))
		return true;
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
	if (!move(pending, DLC_PENDING_WATCHED, DLC_PENDING_ANSWERED))
		return false;
	fuse_req_interrupt_func(pending->req, NULL, NULL);
	return true;
}
