/*
 * text.c - a text whose memory is taken from the budget as it grows
 * (text.h).  It grows by doubling; the new size is taken before realloc and
 * the old given back after it, so the budget counts the moment both exist.
 * At the end the buffer is cut to its length and the rest given back.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/text.h"

#define FIRST_SIZE 65536

void dlc_text_init(struct dlc_text *text, struct dlc_budget *budget, uint64_t ceiling)
{
	*text = (struct dlc_text) { .budget = budget, .ceiling = ceiling };
}

static int grow(struct dlc_text *text, size_t need)
{
	size_t grown = text->size ? text->size : FIRST_SIZE;
	char *bigger;

	while (grown < need) {
		if (grown > SIZE_MAX / 2)
			return -ENOMEM;
		grown *= 2;
	}
	if (!dlc_budget_try_acquire(text->budget, grown, text->ceiling))
		return -ENOMEM;
	bigger = realloc(text->data, grown);
	if (!bigger) {
		dlc_budget_release(text->budget, grown);
		return -ENOMEM;
	}
	dlc_budget_release(text->budget, text->size);
	text->data = bigger;
	text->size = grown;
	return 0;
}

int dlc_text_append(struct dlc_text *text, const void *bytes, size_t n)
{
	int rc;

	if (n > SIZE_MAX - text->len)
		return -ENOMEM;
	if (text->len + n > text->size && (rc = grow(text, text->len + n)) < 0)
		return rc;
	memcpy(text->data + text->len, bytes, n);
	text->len += n;
	return 0;
}

int dlc_text_finish(struct dlc_text *text, char **data, size_t *len)
{
	char *cut;

	if (!text->data) {
		*data = NULL;
		*len = 0;
		return 0;
	}
	cut = realloc(text->data, text->len ? text->len : 1);
	if (cut)
		text->data = cut;
	dlc_budget_release(text->budget, text->size - text->len);
	*data = text->data;
	*len = text->len;
	*text = (struct dlc_text) { 0 };
	return 0;
}

void dlc_text_discard(struct dlc_text *text)
{
	dlc_budget_release(text->budget, text->size);
	free(text->data);
	*text = (struct dlc_text) { 0 };
}
