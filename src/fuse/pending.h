/*
 * pending.h - a FUSE request answered later, from another thread, exactly
 * once, by whichever comes first: the work it waits for, or the kernel's
 * INTERRUPT (the reader got a signal).
 *
 * The interrupted reader is told EINTR at once and leaves; the work goes on
 * (a fetch other readers wait for lands for them, and its bytes reach the
 * cache) and its answer is thrown away.  Private to src/fuse/.
 */
#ifndef DLCACHE_FUSE_PENDING_H
#define DLCACHE_FUSE_PENDING_H

#include <fuse_lowlevel.h>
#include <stdbool.h>

#include "dlcache/stats.h"

struct dlc_pending {
	fuse_req_t req;
	struct dlc_stats *stats;        /* counts interrupted requests */
	bool answered;                  /* guarded by the module's lock */
};

/*
 * Starts watching req for an interrupt.  If the reader was already
 * interrupted, it is answered EINTR before this returns.  pending must stay
 * where it is until dlc_pending_claim returned.
 */
void dlc_pending_watch(struct dlc_pending *pending, fuse_req_t req, struct dlc_stats *stats);

/* True while nobody has answered: the work is still wanted. */
bool dlc_pending_wanted(struct dlc_pending *pending);

/*
 * Takes the right to answer.  True: the caller must now reply to
 * pending->req (no interrupt will); false: the reader was answered EINTR and
 * req must not be touched again.  Either way no interrupt callback runs on
 * pending after this returns, so it may be freed.
 */
bool dlc_pending_claim(struct dlc_pending *pending);

#endif
