/*
 * cause.h - the sentence a person reads when something they asked for fails
 * (a bad option, a source that cannot be opened, a broken snapshot).  It
 * names the problem and the fix, tmux-style, and travels up in a char **
 * next to the -errno return.
 */
#ifndef DLCACHE_CAUSE_H
#define DLCACHE_CAUSE_H

#include <stdarg.h>

/*
 * When cause is not NULL, replaces *cause (NULL, or a string from an earlier
 * call, which is freed) with the formatted sentence, malloc'd; control
 * characters, which could come from a user's path, become '?'.  On ENOMEM
 * *cause becomes NULL and the caller prints strerror instead.
 */
void dlc_cause_set(char **cause, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dlc_cause_vset(char **cause, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/*
 * A sentence left for the caller of the call running on this thread, where
 * the interface between them carries only an errno (a source driver's
 * list: backend.h).  Set keeps the first 511 bytes; the sentence lasts
 * until the next set or clear on the same thread; dlc_cause_thread returns
 * NULL when none was left.
 */
void dlc_cause_thread_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dlc_cause_thread_clear(void);
const char *dlc_cause_thread(void);

#endif
