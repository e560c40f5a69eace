/*
 * control.h - the .control line protocol, as a pure parser from bytes to
 * commands.  It applies nothing, resolves no path and never logs: the caller
 * does that with each command it is handed, and may reject one (an unknown
 * path) with a cause, which counts the line as bad.
 *
 * Grammar (UTF-8 text, one command per line, '\n' ends a line, a '\r' before
 * it is dropped; leading blanks are skipped; blank lines and lines whose first
 * non-blank character is '#' are ignored):
 *
 *   SCORE PATH        importance of one sample: SCORE is a finite decimal
 *                     number (strtod syntax without hex, inf or nan), higher is
 *                     more important; PATH is the rest of the line after the
 *                     blanks that follow SCORE, so it may contain spaces
 *                     (trailing blanks too: "0.5 a " names "a ")
 *   epoch N           the job starts epoch N (a decimal integer)
 *   prefetch PATH     fetch PATH in the background, through admission
 *   forget PATH       PATH's score becomes unknown
 *   reset             every score becomes unknown
 *   tier HOST:PORT .. the cluster tier's servers, in the same order on every
 *                     node (each word HOST:PORT; an IPv6 host in brackets;
 *                     at most DLC_CONTROL_TIER_MAX); replaces the list
 *   tier off          detaches the cluster tier
 *
 * PATH is relative to the mount root; a leading '/' is accepted, and so is
 * the mount's own absolute path as a prefix ("/mnt/data/train/x.JPEG").  The
 * parser normalizes it (no leading '/', repeated '/' collapsed, a trailing
 * '/' dropped) and refuses an empty path, a "." or ".." component, and NUL
 * bytes.  A line longer than DLC_CONTROL_MAX_LINE bytes is refused whole
 * (the parser skips to its end without buffering it).  A line's length
 * counts every byte before its '\n', a final '\r' included, so a line of
 * exactly DLC_CONTROL_MAX_LINE bytes is accepted.  Lines are numbered from 1
 * per parser, blank and comment lines included.
 */
#ifndef DLCACHE_CONTROL_H
#define DLCACHE_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#define DLC_CONTROL_MAX_LINE 8192
#define DLC_CONTROL_TIER_MAX 256

enum dlc_control_kind {
	DLC_CONTROL_SCORE,
	DLC_CONTROL_EPOCH,
	DLC_CONTROL_PREFETCH,
	DLC_CONTROL_FORGET,
	DLC_CONTROL_RESET,
	DLC_CONTROL_TIER,       /* servers: the HOST:PORT words, joined by one space */
	DLC_CONTROL_TIER_OFF,
};

struct dlc_control_command {
	enum dlc_control_kind kind;
	double score;           /* SCORE */
	uint64_t epoch;         /* epoch */
	const char *path;       /* SCORE, prefetch, forget: normalized, NUL-terminated;
				 * valid during the callback only */
	const char *servers;    /* tier: NUL-terminated, valid during the callback only */
};

/*
 * Applies one command; returns 0, or -EINVAL with *cause set (malloc'd, one
 * sentence) to count the line as bad.
 */
typedef int (*dlc_control_apply_cb)(void *arg, const struct dlc_control_command *command,
				    char **cause);

/* What one feed or finish call saw. */
struct dlc_control_result {
	uint64_t lines;         /* commands handed to the callback and accepted */
	uint64_t errors;        /* bad lines (syntax, or refused by the callback) */
	char *first_error;      /* malloc'd: "line N: <cause>" of the first bad line, or NULL */
};

struct dlc_control_parser; /* opaque: one per open file description */

/*
 * mount_prefix is the mount's absolute path (may be NULL; a relative path or
 * "/" is ignored); NULL on ENOMEM.
 */
struct dlc_control_parser *dlc_control_parser_new(const char *mount_prefix);
void dlc_control_parser_free(struct dlc_control_parser *parser);

/*
 * Feeds len bytes.  Every complete line is parsed and, if good, handed to
 * apply; an incomplete last line is kept for the next feed.  Fills *result
 * (which the caller zeroes first and frees first_error of).  Returns 0, or
 * -EINVAL when at least one line was bad (the good ones were applied), or
 * -ENOMEM.
 *
 * Counts are added to *result, so one result may span several calls; its
 * first_error is set only by the first bad line it counts.  A callback
 * error other than -EINVAL (such as -ENOMEM) stops the call and is
 * returned: that line counts as neither good nor bad, the rest of data is
 * dropped, and so is the rest of a line data leaves unterminated, so that
 * the next call starts on a fresh line (line numbers stay those written).
 */
int dlc_control_feed(struct dlc_control_parser *parser, const char *data, size_t len,
		     dlc_control_apply_cb apply, void *arg, struct dlc_control_result *result);

/*
 * Parses the kept unterminated line, if any, as if a newline followed, then
 * starts the parser afresh (line 1, nothing kept) for reuse.  Returns as
 * dlc_control_feed does.
 */
int dlc_control_finish(struct dlc_control_parser *parser, dlc_control_apply_cb apply, void *arg,
		       struct dlc_control_result *result);

void dlc_control_result_clear(struct dlc_control_result *result);

#endif
