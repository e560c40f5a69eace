/*
 * log.h - one level-gated logging macro for the whole daemon.
 *
 * Messages go to stderr while the daemon runs in the foreground (or before it
 * daemonizes) and to syslog(3) afterwards.  Pure modules (policy, control
 * parser, scores) never log: they return a cause to their caller, which logs
 * once, at the layer that chooses the errno.
 */
#ifndef DLCACHE_LOG_H
#define DLCACHE_LOG_H

#include <stdbool.h>
#include <time.h>

enum dlc_log_level {
	DLC_LOG_ERROR = 0,
	DLC_LOG_WARNING = 1,
	DLC_LOG_INFO = 2,
	DLC_LOG_DEBUG = 3,
};

/* Messages above this level are dropped before formatting. */
extern enum dlc_log_level dlc_log_threshold;

/* Sets the threshold; with use_syslog, later messages go to syslog as "dlcache". */
void dlc_log_init(enum dlc_log_level threshold, bool use_syslog);

/* Parses "error", "warning", "info" or "debug"; 0 or -EINVAL. */
int dlc_log_parse_level(const char *name, enum dlc_log_level *out);

/* Writes one line "dlcache: LEVEL: FUNC: message"; use dlc_log() instead. */
void dlc_log_write(enum dlc_log_level level, const char *func, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define dlc_log(level, ...)                                             \
	do {                                                            \
		if ((level) <= dlc_log_threshold)                       \
			dlc_log_write((level), __func__, __VA_ARGS__);  \
	} while (0)

/*
 * Progress lines on a terminal: whether one is due now, that is when force is
 * set or at least 100 ms have passed since *last (CLOCK_MONOTONIC); if so,
 * *last becomes now.  A zeroed *last makes the first call due.
 */
bool dlc_progress_due(struct timespec *last, bool force);

#endif
