/*
 * pending.h - a FUSE request answered later, from another thread, exactly
 * once, by whichever comes first: the work it waits for, the kernel's
 * INTERRUPT (the reader got a signal), or the reaper when the request's
 * deadline has passed.
 *
 * The interrupted reader is told EINTR at once and leaves; the work goes on
 * (a fetch other readers wait for lands for them, and its bytes reach the
 * cache) and its answer is thrown away.  A request still unanswered
 * DLC_PENDING_GRACE_NS after its deadline (arrival + source_timeout) is
 * answered EIO by the reaper thread, whatever its work waits for (a queue
 * behind work with no deadline, a lock): the deadline is kept by the
 * structure, not by each wait below it.  Private to src/fuse/.
 *
 * INVARIANTS (the state machine of one request; pending.c has the why):
 *
 *   REGISTERING --interrupt--> INTERRUPTED --watch--> ANSWERED (EINTR by watch)
 *        |
 *        +------watch-------> WATCHED --interrupt--> ANSWERED (EINTR by callback)
 *                                |
 *                                +------claim------> ANSWERED (work's answer)
 *                                |
 *                                +-----reaper-----> EXPIRING --reaper--> ANSWERED
 *                                                    (EIO by the reaper; claim waits)
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
 *   - A watched request with a deadline is in the reaper's registry (one
 *     mutex, a list through the structs) from dlc_pending_watch until
 *     dlc_pending_claim or the reaper takes it out; the reaper moves
 *     WATCHED to EXPIRING only under that mutex, so it never sees a struct
 *     whose claim returned.  dlc_pending_claim returns only once the state
 *     is not EXPIRING: the owner frees pending after the reaper is done
 *     with it.  The callback's and claim's moves fail on EXPIRING.
 */
#ifndef DLCACHE_FUSE_PENDING_H
#define DLCACHE_FUSE_PENDING_H

#include <fuse_lowlevel.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dlcache/stats.h"

/* How long after its deadline the reaper answers a request: its work answers
 * at the deadline itself; the reaper is the backstop. */
#define DLC_PENDING_GRACE_NS 500000000ULL

enum dlc_pending_state {
	DLC_PENDING_REGISTERING,        /* dlc_pending_watch is registering the callback */
	DLC_PENDING_INTERRUPTED,        /* interrupted meanwhile: dlc_pending_watch answers */
	DLC_PENDING_WATCHED,            /* the work, the interrupt or the reaper answers */
	DLC_PENDING_EXPIRING,           /* the reaper is answering EIO: claim waits */
	DLC_PENDING_ANSWERED,           /* answered (or claimed to be): final */
};

struct dlc_pending {
	fuse_req_t req;
	struct dlc_stats *stats;        /* counts interrupted and expired requests */
	atomic_int state;               /* enum dlc_pending_state */
	uint64_t deadline_ns;           /* CLOCK_MONOTONIC; 0: none, not in the registry */
	struct dlc_pending *prev, *next; /* the reaper's registry; NULL: not in it.
					  * Guarded by the registry's mutex */
	void (*on_expire)(struct dlc_pending *pending); /* dlc_pending_watch's */
};

/*
 * Starts watching req for an interrupt, and for its deadline (deadline_ns,
 * CLOCK_MONOTONIC as deadline.h; 0: none): the reaper answers EIO once it is
 * DLC_PENDING_GRACE_NS past, counted as `expired` in stats.  False: the
 * reader was already interrupted and has been answered EINTR; req must not
 * be touched again and no interrupt callback runs on pending any more (it
 * may be freed).  True: pending must stay where it is until
 * dlc_pending_claim returned, which the owner must call once in every case.
 * on_expire (or NULL) is called by the reaper, on its thread, just before
 * its EIO reply, pending still the owner's (its claim waits), so that the
 * owner's layer notes the failure first (a read: the kernel's at-once
 * re-read of the page must fail at once too); it must not wait.
 */
bool dlc_pending_watch(struct dlc_pending *pending, fuse_req_t req, struct dlc_stats *stats,
		       uint64_t deadline_ns, void (*on_expire)(struct dlc_pending *pending));

/* True while nobody has answered: the work is still wanted. */
bool dlc_pending_wanted(struct dlc_pending *pending);

/*
 * Takes the right to answer.  True: the caller must now reply to
 * pending->req (no interrupt or reaper will); false: the reader was answered
 * (EINTR, or EIO by the reaper) and req must not be touched again.  Either
 * way neither an interrupt callback nor the reaper touches pending after
 * this returns, so it may be freed.  May wait while the reaper answers.
 */
bool dlc_pending_claim(struct dlc_pending *pending);

/*
 * Stops the reaper thread, if it runs, and waits for it.  Every watched
 * request must have been claimed (the source pool stopped).  A later
 * dlc_pending_watch with a deadline starts it again.
 */
void dlc_pending_stop_reaper(void);

#endif
