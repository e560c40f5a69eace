/*
 * pending.h - a FUSE request answered later, from another thread, exactly
 * once, by whichever comes first: the work it waits for, or the kernel's
 * INTERRUPT (the reader got a signal).
 *
 * The interrupted reader is told EINTR at once and leaves; the work goes on
 * (a fetch other readers wait for lands for them, and its bytes reach the
 * cache) and its answer is thrown away.  Private to src/fuse/.
 *
 * INVARIANTS (the state machine of one request; pending.c has the why):
 *
 *   REGISTERING --interrupt--> INTERRUPTED --watch--> ANSWERED (EINTR by watch)
 *        |
 *        +------watch-------> WATCHED --interrupt--> ANSWERED (EINTR by callback)
 *                                |
 *                                +------claim------> ANSWERED (work's answer)
 *
 *   - Every move is one compare-and-swap on `state`; ANSWERED is final, so
 *     exactly one side answers req, once.
 *   - The interrupt callback never replies while the state is REGISTERING:
 *     libfuse may be calling it from inside fuse_req_interrupt_func, with
 *     the request's lock held and no reference of its own, where a reply
 *     would free the request under libfuse's feet.  It only marks
 *     INTERRUPTED; dlc_pending_watch answers once registration returned.
 *   - In WATCHED the callback may reply: libfuse calls it then only from
 *     its INTERRUPT handler, which holds a reference on the request until
 *     the callback returned.
 *   - Whoever moves the state to ANSWERED (other than the callback) first
 *     unregisters the callback, which waits for one running now; after that
 *     no callback reads the struct, and its owner may free it.
 */
#ifndef DLCACHE_FUSE_PENDING_H
#define DLCACHE_FUSE_PENDING_H

#include <fuse_lowlevel.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "dlcache/stats.h"

enum dlc_pending_state {
	DLC_PENDING_REGISTERING,        /* dlc_pending_watch is registering the callback */
	DLC_PENDING_INTERRUPTED,        /* interrupted meanwhile: dlc_pending_watch answers */
	DLC_PENDING_WATCHED,            /* the work or the interrupt answers, first come */
	DLC_PENDING_ANSWERED,           /* answered (or claimed to be): final */
};

struct dlc_pending {
	fuse_req_t req;
	struct dlc_stats *stats;        /* counts interrupted requests */
	atomic_int state;               /* enum dlc_pending_state */
};

/*
 * Starts watching req for an interrupt.  False: the reader was already
 * interrupted and has been answered EINTR; req must not be touched again
 * and no interrupt callback runs on pending any more (it may be freed).
 * True: pending must stay where it is until dlc_pending_claim returned.
 */
bool dlc_pending_watch(struct dlc_pending *pending, fuse_req_t req, struct dlc_stats *stats);

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
