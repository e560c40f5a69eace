/*
 * staging.c - the prefetch's state, under fetch->lock: the plan of
 * announced files, the readers' position in it, the files staged for them,
 * and whether the window and the warm list are due or full.  Plain
 * functions on that state with the lock held, which never drop it: called
 * by the single flight (fetch.c: an open reports the reader's position and
 * takes its staged bytes; a landing prefetch is staged in fly) and by the
 * workers (prefetch.c: the plan grows and is taken, the window bounds
 * them); they call neither.
 *
 * Several readers (DataLoader workers) share one announced order: an open
 * takes the file's staged bytes wherever the others are, and marks its
 * announcement read; the readers' position is the furthest announced file
 * opened.  An inode's announcement is its latest line: a file announced more
 * than once (sampling with replacement) is prefetched for its last line, and
 * its first read moves the position there (see DESIGN.md: the files in
 * between are then skipped as passed; keying by the earliest unread line
 * instead was tried and froze the position whenever readers ran ahead of
 * the workers).  Plan entries a whole window behind the position are
 * skipped; staged files that far behind are dropped only once they have
 * waited STAGED_GRACE_NS for a slower reader, so each announced file is
 * fetched once however many readers take turns.  A prefetch is staged in the
 * critical section where its flight lands (fly, fetch.c), so a reader finds
 * it either in flight or staged, never in between.
 *
 * INVARIANTS.  fetch->lock (fetch.c) guards the plan, the staged files, the
 * reader's position and the warm list.  Plan entry i (from plan_head) has
 * sequence number plan_head_seq + i.  Verify builds check these at every
 * release of fetch->lock (fetch_private.h: unlock, wait_on;
 * dlc_fetch_verify_locked, fetch_verify.c, says what).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "dlcache/deadline.h"
#include "fetch_private.h"
#include "warm_list.h"

/*
 * A staged file passed by the furthest reader is kept this long for a
 * slower one (DataLoader workers drift apart by a few files); only then is
 * it taken for passed for good.
 */
#define STAGED_GRACE_NS 2000000000ULL

#define PREFETCH_WINDOW_BYTES (256ULL << 20)
#define PLAN_MAX (64u << 20)

/* A reader wakes a worker once window / WARM_BATCH_PART entries are due. */
#define WARM_BATCH_PART 8u

/*
 * Whether announced position seq is behind the furthest reader by a whole
 * window: a plan entry that far behind is not fetched any more.  Lock held.
 */
bool dlc_staging_passed(const struct dlc_fetch *fetch, uint64_t seq)
{
	return seq + fetch->window <= fetch->reader_seq;
}

/* Whether the warm list's first entry is due, with slack entries to spare:
 * within the window of the reader, or to be dropped (passed, opened,
 * announced again); lock held. */
static bool warm_due_by(const struct dlc_fetch *fetch, uint64_t slack)
{
	uint32_t ino;
	uint64_t seq;

	return dlc_warm_list_first(&fetch->warm, &ino, &seq) &&
	       (seq + slack <= fetch->reader_seq + fetch->window || dlc_staging_passed(fetch, seq) ||
		fetch->announced[ino] != seq);
}

bool dlc_staging_warm_due(const struct dlc_fetch *fetch)
{
	return warm_due_by(fetch, 0);
}

/*
 * A reader opened ino: its announced read has happened (a prefetch of it
 * landing later stages nothing), the furthest position moves to it if it
 * lies ahead, staged files passed and past their grace are dropped, and
 * ino's own staged bytes, if any, are returned (the caller's reference).
 * Wakes all workers if the window gained room, else one once an eighth
 * of a window of warm entries is due (it takes them all): wake-ups at
 * every open slowed each open on a few cores.  Lock held.
 */
struct dlc_blob *dlc_staging_reader_opened(struct dlc_fetch *fetch, uint32_t ino, bool *offered)
{
	struct dlc_blob *mine = NULL;
	uint64_t seq = fetch->announced[ino];
	uint64_t now = dlc_deadline_now();
	unsigned kept = 0;

	if (seq == 0)
		return NULL;
	fetch->announced[ino] = 0;
	if (seq > fetch->reader_seq)
		fetch->reader_seq = seq;
	for (unsigned i = 0; i < fetch->nstaged; i++) {
		struct staged *st = &fetch->staged[i];

		bool taken = st->ino == ino && !mine;

		if (!taken && !(dlc_staging_passed(fetch, st->seq) && now - st->staged_ns >= STAGED_GRACE_NS)) {
			fetch->staged[kept++] = *st;
			continue;
		}
		fetch->staged_bytes -= st->blob->size;
		if (taken) {
			mine = st->blob;
			*offered = st->offered;
		} else {
			dlc_blob_put(st->blob);
		}
	}
	if (kept < fetch->nstaged)
		pthread_cond_broadcast(&fetch->queued);
	else if (warm_due_by(fetch, fetch->window / WARM_BATCH_PART))
		pthread_cond_signal(&fetch->queued);
	fetch->nstaged = kept;
	return mine;
}

bool dlc_staging_window_full(const struct dlc_fetch *fetch)
{
	return fetch->nstaged + fetch->active >= fetch->window ||
	       fetch->staged_bytes >= PREFETCH_WINDOW_BYTES;
}

/* Makes room for one more plan entry; lock held. */
bool dlc_staging_plan_grow(struct dlc_fetch *fetch)
{
	size_t size = fetch->plan_size ? fetch->plan_size * 2 : 65536;
	uint32_t *plan;

	if (fetch->plan_count < fetch->plan_size)
		return true;
	if (fetch->plan_size >= PLAN_MAX)
		return false;
	plan = malloc(size * sizeof(*plan));
	if (!plan)
		return false;
	for (size_t i = 0; i < fetch->plan_count; i++)
		plan[i] = fetch->plan[(fetch->plan_head + i) % fetch->plan_size];
	free(fetch->plan);
	fetch->plan = plan;
	fetch->plan_size = size;
	fetch->plan_head = 0;
	return true;
}
