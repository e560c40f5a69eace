/*
 * verify.c - what a broken invariant does in a verify build (verify.h):
 * one line on the log, then abort(), so that the core or the sanitizer's
 * report holds the state that broke it.  Nothing here runs in a build
 * without the verify option unless a test calls it.
 */
#include <stdlib.h>
#include <string.h>

#include "dlcache/log.h"
#include "dlcache/verify.h"

void dlc_verify_failed(const char *what, const char *func, int rc)
{
	dlc_log_write(DLC_LOG_ERROR, func, "invariant broken: %s: %s", what,
		      strerror(rc < 0 ? -rc : rc));
	abort();
}
