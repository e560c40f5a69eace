/*
 * fetch_verify.c - the fetcher's invariants checked (the INVARIANTS of
 * fetch.c and staging.c): the flight list, the plan ring and its
 * numbering, the staged files and their bytes, the reader's position and
 * the warm list (in announced order).  Reads the state only; the caller
 * holds fetch->lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "fetch_private.h"

int dlc_fetch_verify_locked(const struct dlc_fetch *fetch)
{
	const struct dlc_warm_list *warm = &fetch->warm;
	uint64_t bytes = 0;

	for (const struct flight *f = fetch->flights, *g; f; f = f->next) {
		if (f->landed != f->settling || f->refs == 0 || f->ahead != (f->stage_seq != 0) ||
		    (f->settling && (f->ahead || f->rc != 0 || !f->blob)) ||
		    f->stage_seq > fetch->next_seq)
			return -EUCLEAN;
		for (g = f->next; g; g = g->next)
			if (g->ino == f->ino)
				return -EUCLEAN;
	}
	if (fetch->plan_count > fetch->plan_size || (fetch->plan_size == 0) != (fetch->plan == NULL) ||
	    (fetch->plan_size > 0 && fetch->plan_head >= fetch->plan_size) ||
	    (fetch->plan_count > 0 && (!fetch->announced || fetch->stopping ||
				       fetch->plan_head_seq + fetch->plan_count != fetch->next_seq + 1)))
		return -EUCLEAN;
	for (size_t i = 0; i < fetch->plan_count; i++) {
		uint64_t seq = fetch->announced[fetch->plan[(fetch->plan_head + i) % fetch->plan_size]];

		if (seq != 0 && (seq < fetch->plan_head_seq + i || seq > fetch->next_seq))
			return -EUCLEAN;
	}
	if (fetch->nstaged > fetch->staged_slots || (fetch->nstaged > 0 && !fetch->announced))
		return -EUCLEAN;
	for (unsigned i = 0; i < fetch->nstaged; i++) {
		const struct staged *st = &fetch->staged[i];

		if (!st->blob || st->seq == 0 || st->seq > fetch->next_seq)
			return -EUCLEAN;
		bytes += st->blob->size;
	}
	for (unsigned i = 1; i < warm->count && warm->size > 0; i++)
		if (warm->seq[(warm->head + i - 1) % warm->size] >= warm->seq[(warm->head + i) % warm->size])
			return -EUCLEAN;
	return bytes != fetch->staged_bytes || fetch->window == 0 ||
	       fetch->reader_seq > fetch->next_seq ||
	       atomic_load_explicit(&fetch->planning, memory_order_relaxed) != (fetch->announced != NULL) ||
	       warm->count + warm->kept > warm->size || (warm->size > 0 && warm->head >= warm->size)
	       ? -EUCLEAN : 0;
}

int dlc_fetch_verify(struct dlc_fetch *fetch)
{
	int rc;

	pthread_mutex_lock(&fetch->lock);
	rc = dlc_fetch_verify_locked(fetch);
	pthread_mutex_unlock(&fetch->lock);
	return rc;
}
