/*
 * cause.c - formats the one-sentence causes of cause.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "dlcache/cause.h"

void dlc_cause_set(char **cause, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	dlc_cause_vset(cause, fmt, ap);
	va_end(ap);
}

void dlc_cause_vset(char **cause, const char *fmt, va_list ap)
{
	char *text;

	if (!cause)
		return;
	if (vasprintf(&text, fmt, ap) < 0)
		text = NULL;
	for (char *p = text; p && *p; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	}
	free(*cause);
	*cause = text;
}

/* The sentence left on this thread (cause.h). */
static _Thread_local char thread_cause[512];

void dlc_cause_thread_set(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(thread_cause, sizeof(thread_cause), fmt, ap);
	va_end(ap);
}

void dlc_cause_thread_clear(void)
{
	thread_cause[0] = '\0';
}

const char *dlc_cause_thread(void)
{
	return thread_cause[0] ? thread_cause : NULL;
}
