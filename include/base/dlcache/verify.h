/*
 * verify.h - invariants that run, not only invariants that are written.
 *
 * Each module with state has a verify function (dlc_store_verify,
 * dlc_passthrough_verify, ...) that checks its invariants and returns 0, or
 * -EUCLEAN naming nothing more: the tests call it directly.  Builds with the
 * meson option verify (on for buildtype=debug and in tests/sanitize.sh, off
 * by default) also call it through DLC_VERIFY at the points where the
 * invariants must hold, which is each release of the module's lock: the
 * habit of SQLite's pager, which asserts assert_pager_state() on entry to
 * every routine.  Elsewhere DLC_VERIFY compiles to nothing, so a check may
 * cost what it needs (a scan of a table) without touching release builds or
 * benchmarks.
 *
 * A failed check is a bug, not a condition to recover from: it logs one line
 * naming the check and where it ran, then aborts, so that the core (or the
 * sanitizer's report) shows the state that broke it.
 */
#ifndef DLCACHE_VERIFY_H
#define DLCACHE_VERIFY_H

#include <stdbool.h>

#ifdef DLC_VERIFY_ON
#define DLC_VERIFY_ENABLED true
#else
#define DLC_VERIFY_ENABLED false
#endif

/*
 * Runs call (an expression returning 0 or -errno) in verify builds and
 * aborts through dlc_verify_failed when it is not 0.  call is not evaluated
 * otherwise.
 */
#define DLC_VERIFY(call)                                                        \
	do {                                                                    \
		if (DLC_VERIFY_ENABLED) {                                       \
			int dlc_verify_rc_ = (call);                            \
			if (dlc_verify_rc_ != 0)                                \
				dlc_verify_failed(#call, __func__, dlc_verify_rc_); \
		}                                                               \
	} while (0)

/* Logs "invariant broken: WHAT (in FUNC): error" and aborts. */
_Noreturn void dlc_verify_failed(const char *what, const char *func, int rc);

#endif
