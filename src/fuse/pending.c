/*
 * pending.c - answer a request once: its work or its interrupt (pending.h).
 *
 * libfuse calls the interrupt callback with the request's own lock held and
 * keeps the request alive until the callback returns; a reply frees the
 * request.  So the two sides agree through `answered` under one lock, and
 * the side that loses never touches req again:
 *
 *   interrupt:  lock; mine = !answered; answered = true; unlock;
 *               if mine: reply EINTR            (req lives until we return)
 *   work done:  lock; mine = !answered; answered = true; unlock;
 *               if mine: unregister the callback (waits for a callback
 *                        running right now, which found answered and did
 *                        nothing), then the caller replies
 *
 * A callback that lost never reads pending after its unlock, so the owner
 * may free it as soon as claim returns.  One lock for every request: it is
 * held for a few instructions.
 */
#include <errno.h>
#include <pthread.h>

#include "pending.h"

static pthread_mutex_t answer_lock = PTHREAD_MUTEX_INITIALIZER;

/* true when the caller won the right to answer */
static bool take_answer(struct dlc_pending *pending)
{
	bool mine;

	pthread_mutex_lock(&answer_lock);
	mine = !pending->answered;
	pending->answered = true;
	pthread_mutex_unlock(&answer_lock);
	return mine;
}

static void interrupted(fuse_req_t req, void *data)
{
	struct dlc_pending *pending = data;
	struct dlc_stats *stats = pending->stats;

	if (!take_answer(pending))
		return;
	dlc_stats_add(stats, DLC_STAT_INTERRUPTED, 1);
	fuse_reply_err(req, EINTR);
}

void dlc_pending_watch(struct dlc_pending *pending, fuse_req_t req, struct dlc_stats *stats)
{
	pending->req = req;
	pending->stats = stats;
	pending->answered = false;
	fuse_req_interrupt_func(req, interrupted, pending);
}

bool dlc_pending_wanted(struct dlc_pending *pending)
{
	bool wanted;

	pthread_mutex_lock(&answer_lock);
	wanted = !pending->answered;
	pthread_mutex_unlock(&answer_lock);
	return wanted;
}

bool dlc_pending_claim(struct dlc_pending *pending)
{
	if (!take_answer(pending))
		return false;
	fuse_req_interrupt_func(pending->req, NULL, NULL);
	return true;
}
