/*
 * log.c - level-gated messages to stderr, or to syslog once daemonized.
 *
 * One line per message, written with a single write so that lines from
 * several threads never interleave.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "dlcache/log.h"

enum dlc_log_level dlc_log_threshold = DLC_LOG_INFO;
static bool log_to_syslog;

static const char *const level_names[] = { "error", "warning", "info", "debug" };

void dlc_log_init(enum dlc_log_level threshold, bool use_syslog)
{
	dlc_log_threshold = threshold;
	if (use_syslog && !log_to_syslog)
		openlog("dlcache", LOG_PID, LOG_DAEMON);
	log_to_syslog = use_syslog;
}

int dlc_log_parse_level(const char *name, enum dlc_log_level *out)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(name, level_names[i]) == 0) {
			*out = (enum dlc_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

void dlc_log_write(enum dlc_log_level level, const char *func, const char *fmt, ...)
{
	static const int priorities[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char line[1024];
	int saved_errno = errno;
	va_list ap;
	int n;

	if (log_to_syslog) {
		n = snprintf(line, sizeof(line), "%s: ", func);
	} else {
		n = snprintf(line, sizeof(line), "dlcache: %s: %s: ", level_names[level], func);
	}
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);

	if (log_to_syslog) {
		syslog(priorities[level], "%s", line);
	} else {
		size_t len = strlen(line);

		if (len + 1 < sizeof(line)) {
			line[len++] = '\n';
		} else {
			line[sizeof(line) - 2] = '\n';
			len = sizeof(line) - 1;
		}
		(void)!write(STDERR_FILENO, line, len);
	}
	errno = saved_errno;
}

bool dlc_progress_due(struct timespec *last, bool force)
{
	struct timespec now;
	long long elapsed;

	clock_gettime(CLOCK_MONOTONIC, &now);
	elapsed = (long long)(now.tv_sec - last->tv_sec) * 1000000000LL +
		  (now.tv_nsec - last->tv_nsec);
	if (!force && elapsed < 100000000LL)
		return false;
	*last = now;
	return true;
}
