/*
 * text.h - a text built in memory that the budget counts as it grows: the
 * renderings of the virtual files .cached and .chunks, whose size follows
 * the dataset (about 50 MB for a million cached files).
 *
 * Every byte allocated is taken from the budget before it is allocated,
 * with dlc_budget_try_acquire under a ceiling: a text that would pass it
 * fails with -ENOMEM instead of growing the daemon, and never waits (the
 * bytes it already holds would be held while waiting).
 */
#ifndef DLCACHE_TEXT_H
#define DLCACHE_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "dlcache/budget.h"

struct dlc_text {
	struct dlc_budget *budget;      /* NULL: nothing is counted */
	uint64_t ceiling;               /* the budget's use may not pass this */
	char *data;
	size_t len;                     /* bytes written */
	size_t size;                    /* bytes allocated, all taken from budget */
};

/* An empty text drawing from budget (may be NULL) up to ceiling. */
void dlc_text_init(struct dlc_text *text, struct dlc_budget *budget, uint64_t ceiling);

/* Appends n bytes.  0, or -ENOMEM: no memory, or the budget has no room;
 * the text is unchanged then. */
int dlc_text_append(struct dlc_text *text, const void *bytes, size_t n);

/*
 * Hands the text over: *data (malloc'd; NULL when nothing was written)
 * and *len.  Exactly *len bytes stay taken from the budget; whoever frees
 * *data gives them back with dlc_budget_release.  Always 0.
 */
int dlc_text_finish(struct dlc_text *text, char **data, size_t *len);

/* Frees the text and gives its bytes back. */
void dlc_text_discard(struct dlc_text *text);

#endif
