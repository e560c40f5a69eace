/*
 * control.c - the .control line protocol: bytes in, commands out.
 *
 * A parser belongs to one open file description of .control.  It cuts the
 * bytes of each write into lines, parses every complete line and hands each
 * good command to the caller's callback; it applies nothing, resolves no
 * path, takes no lock, does no I/O and never logs.  A bad line becomes a
 * count and, for the first one a result sees, a sentence "line N: <cause>".
 * The grammar is in control.h; the choices it leaves open are made here:
 *
 *   - A line is the bytes before its '\n', a final '\r' included; one of at
 *     most DLC_CONTROL_MAX_LINE bytes is parsed, a longer one is refused
 *     whole ("line N: longer than 8192 bytes").  The refusal is counted by
 *     the call whose bytes take the line past the limit; the rest of the line
 *     is skipped up to its '\n', whichever call brings it, without being
 *     stored.
 *   - A score is decimal text as strtod reads it in the C locale: optional
 *     sign, digits with at most one '.', at least one digit, an optional
 *     exponent ('e' or 'E', optional sign, at least one digit).  Hex, inf,
 *     nan and values that overflow to infinity ("1e999") are refused; values
 *     that underflow ("1e-999") are finite and read as strtod reads them.
 *     The score token ends at the first blank (space or tab) and must be
 *     decimal text to its end, so "12abc" and "1.2.3" are refused.
 *   - PATH is everything after the blanks that follow SCORE or the keyword,
 *     up to the end of the line less a final '\r': trailing blanks belong to
 *     the path ("0.5 a.jpg " names "a.jpg "), as they would in a file name.
 *   - A path written with the mount's absolute prefix loses it when the
 *     prefix is followed by '/' or ends the path ("/mnt/data/x" -> "x", but
 *     "/mnt/database/x" -> "mnt/database/x"); the prefix is matched against
 *     the path as written.  Then '/' runs collapse, leading and trailing '/'
 *     go, and "." and ".." components, NUL bytes and an empty result are
 *     refused.
 *   - Lines are numbered from 1 over every call to one parser, blank and
 *     comment lines included, until dlc_control_finish starts it afresh.
 *   - A callback error other than -EINVAL stops the call: its line counts as
 *     neither good nor bad, the lines after it in the same call are dropped
 *     (still numbered), and so is the rest of a line the call leaves
 *     unterminated, so a later call starts on a fresh line.
 *
 * Speed: a line that lies whole in the caller's buffer is parsed in place;
 * only an unterminated last line is copied (into tail[]) to wait for the
 * next call.  A normalized path is built in path[], reused for every line.
 * No line allocates: memory is taken only to word the first error of a
 * result.  Scores with at most 19 significant digits and a decimal exponent
 * within +-22 (every "0.7312") are converted exactly by one IEEE division or
 * multiplication (Clinger's fast path, correctly rounded as strtod is);
 * other finite decimals go through strtod_l in the C locale, so the
 * process's LC_NUMERIC never changes what a score means.
 */
#include <assert.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dlcache/cause.h"
#include "dlcache/control.h"
#include "dlcache/tier_place.h"

/* The most bytes of a user's token quoted in a cause. */
#define SHOWN_MAX 48
/* show()'s buffer: the quoted bytes, "..." and a NUL. */
#define SHOWN_SIZE (SHOWN_MAX + 4)

/* Significant digits that fit a uint64_t exactly (10^19 < 2^64). */
#define FAST_DIGITS_MAX 19
/* Integers up to 2^53 are exact doubles; so are 10^0 .. 10^22. */
#define FAST_MANTISSA_MAX (UINT64_C(1) << 53)
#define FAST_EXPONENT_MAX 22
/* An exponent past this is out of any double's range either way. */
#define EXPONENT_CLAMP 100000

#define FORMS "write SCORE PATH, epoch N, prefetch PATH, forget PATH, reset, tier HOST:PORT ... or tier off"

struct dlc_control_parser {
	char *prefix;              /* the mount's absolute path, normalized; NULL if none */
	size_t prefix_len;
	locale_t c_locale;         /* for strtod_l */
	uint64_t line;             /* number of the line being read, from 1 */
	bool skipping;             /* the current line is refused (too long) or dropped
				    * (after a callback failure): skip to its '\n' */
	size_t tail_len;           /* bytes of the current, unterminated line in tail[] */
	char tail[DLC_CONTROL_MAX_LINE];
	char path[DLC_CONTROL_MAX_LINE + 1];    /* the normalized path of the line */
	char number[DLC_CONTROL_MAX_LINE + 1];  /* a score token for strtod_l */
};

/* One feed or finish call. */
struct feed {
	struct dlc_control_parser *parser;
	dlc_control_apply_cb apply;
	void *arg;
	struct dlc_control_result *result;
	bool bad;                  /* a line of this call was bad */
	int failure;               /* the callback's -errno other than -EINVAL, or 0 */
};

static const double powers_of_ten[FAST_EXPONENT_MAX + 1] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static const char *skip_blanks(const char *p, const char *end)
{
	while (p < end && is_blank(*p))
		p++;
	return p;
}

static const char *token_end(const char *p, const char *end)
{
	while (p < end && !is_blank(*p))
		p++;
	return p;
}

static bool token_is(const char *token, size_t len, const char *word)
{
	return len == strlen(word) && memcmp(token, word, len) == 0;
}

static bool token_is_caseless(const char *token, size_t len, const char *word)
{
	return len == strlen(word) && strncasecmp(token, word, len) == 0;
}

/*
 * A user's bytes as a cause quotes them: at most SHOWN_MAX bytes, cut
 * before a UTF-8 continuation byte, "..." when cut, NUL bytes as '?' (the
 * cause formatter turns the other control characters into '?').
 */
static const char *show(char shown[SHOWN_SIZE], const char *text, size_t len)
{
	size_t n = len;

	if (n > SHOWN_MAX) {
		n = SHOWN_MAX;
		while (n > 0 && ((unsigned char)text[n] & 0xc0) == 0x80)
			n--;
	}
	for (size_t i = 0; i < n; i++)
		shown[i] = text[i] ? text[i] : '?';
	if (n < len) {
		memcpy(shown + n, "...", 3);
		n += 3;
	}
	shown[n] = '\0';
	return shown;
}

/* Counts the current line as bad; the first bad line of a result words first_error. */
__attribute__((format(printf, 2, 3)))
static void refuse(struct feed *feed, const char *fmt, ...)
{
	struct dlc_control_result *result = feed->result;
	char *cause = NULL;
	va_list ap;

	feed->bad = true;
	if (result->errors++ > 0 || result->first_error)
		return;
	va_start(ap, fmt);
	dlc_cause_vset(&cause, fmt, ap);
	va_end(ap);
	if (cause)
		dlc_cause_set(&result->first_error, "line %" PRIu64 ": %s", feed->parser->line,
			      cause);
	free(cause);
}

static bool is_nonfinite_word(const char *p, const char *end)
{
	size_t len = (size_t)(end - p);

	return token_is_caseless(p, len, "inf") || token_is_caseless(p, len, "infinity") ||
	       token_is_caseless(p, len, "nan") ||
	       (len > 4 && strncasecmp(p, "nan(", 4) == 0 && end[-1] == ')');
}

/*
 * Reads the score token [p, end).  Returns 0 with *value, -EINVAL when it is
 * not decimal text, or -ERANGE when it names inf or nan or overflows.
 */
static int parse_score(struct dlc_control_parser *parser, const char *p, const char *end,
		       double *value)
{
	const char *start = p;
	bool negative = false, any_digit = false, exact = true;
	uint64_t mantissa = 0;
	int digits = 0;
	long exponent = 0;
	char *stop;
	double v;

	if (p < end && (*p == '+' || *p == '-'))
		negative = *p++ == '-';
	if (is_nonfinite_word(p, end))
		return -ERANGE;
	for (; p < end && is_digit(*p); p++) {
		any_digit = true;
		if (mantissa == 0 && *p == '0')
			continue;
		if (digits++ < FAST_DIGITS_MAX)
			mantissa = mantissa * 10 + (uint64_t)(*p - '0');
		else
			exact = false;
	}
	if (p < end && *p == '.') {
		for (p++; p < end && is_digit(*p); p++) {
			any_digit = true;
			if (mantissa == 0 && *p == '0') {
				exponent--;
				continue;
			}
			if (digits++ < FAST_DIGITS_MAX) {
				mantissa = mantissa * 10 + (uint64_t)(*p - '0');
				exponent--;
			} else {
				exact = false;
			}
		}
	}
	if (!any_digit)
		return -EINVAL;
	if (p < end && (*p == 'e' || *p == 'E')) {
		bool exponent_negative = false;
		long written = 0;

		p++;
		if (p < end && (*p == '+' || *p == '-'))
			exponent_negative = *p++ == '-';
		if (p == end || !is_digit(*p))
			return -EINVAL;
		for (; p < end && is_digit(*p); p++) {
			if (written < EXPONENT_CLAMP)
				written = written * 10 + (*p - '0');
		}
		exponent += exponent_negative ? -written : written;
	}
	if (p != end)
		return -EINVAL;

#if FLT_EVAL_METHOD == 0
	if (exact && mantissa == 0) {
		*value = negative ? -0.0 : 0.0;
		return 0;
	}
	if (exact && mantissa <= FAST_MANTISSA_MAX && exponent >= -FAST_EXPONENT_MAX &&
	    exponent <= FAST_EXPONENT_MAX) {
		v = (double)mantissa;
		v = exponent < 0 ? v / powers_of_ten[-exponent] : v * powers_of_ten[exponent];
		*value = negative ? -v : v;
		return 0;
	}
#endif
	memcpy(parser->number, start, (size_t)(end - start));
	parser->number[end - start] = '\0';
	v = strtod_l(parser->number, &stop, parser->c_locale);
	if (stop != parser->number + (end - start))
		return -EINVAL;
	if (!isfinite(v))
		return -ERANGE;
	*value = v;
	return 0;
}

/*
 * Normalizes the path [p, end) into parser->path.  Returns it, or NULL
 * after refusing the line.
 */
static const char *normalize_path(struct feed *feed, const char *p, const char *end)
{
	struct dlc_control_parser *parser = feed->parser;
	size_t len = (size_t)(end - p);
	const char *written = p;
	char *out = parser->path;
	char shown[SHOWN_SIZE];

	if (memchr(p, '\0', len)) {
		refuse(feed, "path '%s' holds a NUL byte; write the path as text.",
		       show(shown, written, len));
		return NULL;
	}
	if (parser->prefix && len >= parser->prefix_len &&
	    memcmp(p, parser->prefix, parser->prefix_len) == 0 &&
	    (len == parser->prefix_len || p[parser->prefix_len] == '/'))
		p += parser->prefix_len;
	while (p < end) {
		const char *slash;
		size_t n;

		if (*p == '/') {
			p++;
			continue;
		}
		slash = memchr(p, '/', (size_t)(end - p));
		n = (size_t)((slash ? slash : end) - p);
		if (p[0] == '.' && (n == 1 || (n == 2 && p[1] == '.'))) {
			if (n == 2)
				refuse(feed, "path '%s' has a '..' component, which leaves the dataset; give a path inside the mount.",
				       show(shown, written, len));
			else
				refuse(feed, "path '%s' has a '.' component; write the path without it.",
				       show(shown, written, len));
			return NULL;
		}
		if (out != parser->path)
			*out++ = '/';
		memcpy(out, p, n);
		out += n;
		p += n;
	}
	if (out == parser->path) {
		refuse(feed, "path '%s' is empty once normalized; give a sample's path relative to the mount, such as train/x.JPEG.",
		       show(shown, written, len));
		return NULL;
	}
	*out = '\0';
	return parser->path;
}

static void apply_command(struct feed *feed, const struct dlc_control_command *command)
{
	char *cause = NULL;
	int rc = feed->apply(feed->arg, command, &cause);

	assert(rc <= 0);
	if (rc == 0)
		feed->result->lines++;
	else if (rc == -EINVAL)
		refuse(feed, "%s", cause ? cause : "the command was refused; check its path against the dataset.");
	else
		feed->failure = rc;
	free(cause);
}

/* The rest of a keyword line is PATH; applies kind with it. */
static void parse_path_command(struct feed *feed, enum dlc_control_kind kind, const char *keyword,
			       const char *p, const char *end)
{
	struct dlc_control_command command = { .kind = kind };

	p = skip_blanks(p, end);
	if (p == end) {
		refuse(feed, "%s needs a path; write %s PATH.", keyword, keyword);
		return;
	}
	command.path = normalize_path(feed, p, end);
	if (command.path)
		apply_command(feed, &command);
}

static void parse_epoch(struct feed *feed, const char *p, const char *end)
{
	struct dlc_control_command command = { .kind = DLC_CONTROL_EPOCH };
	char shown[SHOWN_SIZE];
	const char *number, *number_end;

	number = skip_blanks(p, end);
	if (number == end) {
		refuse(feed, "epoch needs a number; write epoch N, such as epoch 3.");
		return;
	}
	number_end = token_end(number, end);
	for (p = number; p < number_end; p++) {
		unsigned digit = (unsigned)(*p - '0');

		if (!is_digit(*p)) {
			refuse(feed, "epoch '%s' is not a whole number; write epoch N with N made of digits, such as epoch 3.",
			       show(shown, number, (size_t)(number_end - number)));
			return;
		}
		if (command.epoch > (UINT64_MAX - digit) / 10) {
			refuse(feed, "epoch '%s' is too large; write a number below 2^64.",
			       show(shown, number, (size_t)(number_end - number)));
			return;
		}
		command.epoch = command.epoch * 10 + digit;
	}
	p = skip_blanks(number_end, end);
	if (p != end) {
		refuse(feed, "epoch takes one number; remove '%s' after it.",
		       show(shown, p, (size_t)(end - p)));
		return;
	}
	apply_command(feed, &command);
}

/*
 * "tier off", or "tier" and HOST:PORT words: the list is handed on as the
 * words joined by single spaces, each checked to be HOST:PORT.
 */
static void parse_tier(struct feed *feed, const char *p, const char *end)
{
	struct dlc_control_command command = { .kind = DLC_CONTROL_TIER };
	char *out = feed->parser->path;
	char shown[SHOWN_SIZE];
	char host[256];
	unsigned port, count = 0;

	p = skip_blanks(p, end);
	if (p == end) {
		refuse(feed, "tier needs servers; write tier HOST:PORT ..., or tier off.");
		return;
	}
	if (token_is(p, (size_t)(token_end(p, end) - p), "off")) {
		if (skip_blanks(token_end(p, end), end) != end) {
			refuse(feed, "tier off takes nothing after it; write tier off alone on its line.");
			return;
		}
		command.kind = DLC_CONTROL_TIER_OFF;
		apply_command(feed, &command);
		return;
	}
	for (; p < end; p = skip_blanks(p, end)) {
		const char *word_end = token_end(p, end);
		size_t len = (size_t)(word_end - p);

		if (memchr(p, '\0', len) ||
		    !dlc_tier_place_parse_server(p, len, host, sizeof(host), &port)) {
			refuse(feed, "'%s' is not a tier server; write tier HOST:PORT ..., such as tier node1:11211 node2:11211.",
			       show(shown, p, len));
			return;
		}
		if (++count > DLC_CONTROL_TIER_MAX) {
			refuse(feed, "tier names more than %d servers; list at most %d.",
			       DLC_CONTROL_TIER_MAX, DLC_CONTROL_TIER_MAX);
			return;
		}
		if (out != feed->parser->path)
			*out++ = ' ';
		memcpy(out, p, len);
		out += len;
		p = word_end;
	}
	*out = '\0';
	command.servers = feed->parser->path;
	apply_command(feed, &command);
}

static void parse_score_line(struct feed *feed, const char *p, const char *end)
{
	struct dlc_control_command command = { .kind = DLC_CONTROL_SCORE };
	const char *score = p, *score_end = token_end(p, end);
	size_t score_len = (size_t)(score_end - score);
	char shown[SHOWN_SIZE];
	int rc;

	rc = parse_score(feed->parser, score, score_end, &command.score);
	if (rc == -ERANGE) {
		refuse(feed, "score '%s' is not a finite number; write a decimal such as 0.25.",
		       show(shown, score, score_len));
		return;
	}
	if (rc < 0) {
		refuse(feed, "score '%s' is not a decimal number; write one such as 0.25, without hex or trailing characters.",
		       show(shown, score, score_len));
		return;
	}
	p = skip_blanks(score_end, end);
	if (p == end) {
		refuse(feed, "score '%s' has no path; write SCORE PATH, such as 0.25 train/x.JPEG.",
		       show(shown, score, score_len));
		return;
	}
	command.path = normalize_path(feed, p, end);
	if (command.path)
		apply_command(feed, &command);
}

static void refuse_long_line(struct feed *feed)
{
	refuse(feed, "longer than %d bytes; put each command on a line of at most %d bytes.",
	       DLC_CONTROL_MAX_LINE, DLC_CONTROL_MAX_LINE);
}

/* Parses one whole line of at most DLC_CONTROL_MAX_LINE bytes, without its '\n'. */
static void parse_line(struct feed *feed, const char *line, size_t len)
{
	const char *p, *end, *first_end;
	char shown[SHOWN_SIZE];
	size_t first_len;

	assert(len <= DLC_CONTROL_MAX_LINE);
	if (len > 0 && line[len - 1] == '\r')
		len--;
	end = line + len;
	p = skip_blanks(line, end);
	if (p == end || *p == '#')
		return;
	if (is_digit(*p) || *p == '.' || *p == '-' || *p == '+') {
		parse_score_line(feed, p, end);
		return;
	}
	first_end = token_end(p, end);
	first_len = (size_t)(first_end - p);
	if (token_is(p, first_len, "epoch"))
		parse_epoch(feed, first_end, end);
	else if (token_is(p, first_len, "prefetch"))
		parse_path_command(feed, DLC_CONTROL_PREFETCH, "prefetch", first_end, end);
	else if (token_is(p, first_len, "forget"))
		parse_path_command(feed, DLC_CONTROL_FORGET, "forget", first_end, end);
	else if (token_is(p, first_len, "tier"))
		parse_tier(feed, first_end, end);
	else if (token_is(p, first_len, "reset")) {
		if (skip_blanks(first_end, end) != end)
			refuse(feed, "reset takes no argument; write reset alone on its line.");
		else
			apply_command(feed, &(struct dlc_control_command){ .kind = DLC_CONTROL_RESET });
	} else if (is_nonfinite_word(p, first_end))
		parse_score_line(feed, p, end);
	else if (token_is_caseless(p, first_len, "epoch") ||
		 token_is_caseless(p, first_len, "prefetch") ||
		 token_is_caseless(p, first_len, "forget") ||
		 token_is_caseless(p, first_len, "tier") ||
		 token_is_caseless(p, first_len, "reset"))
		refuse(feed, "unknown command '%s'; keywords are lowercase: " FORMS ".",
		       show(shown, p, first_len));
	else
		refuse(feed, "unknown command '%s'; " FORMS ".", show(shown, p, first_len));
}

static int feed_status(const struct feed *feed)
{
	if (feed->failure)
		return feed->failure;
	return feed->bad ? -EINVAL : 0;
}

/* Copies path with '/' runs collapsed and a trailing '/' dropped. */
static char *normalize_prefix(const char *path)
{
	char *copy = strdup(path), *out = copy;

	if (!copy)
		return NULL;
	for (const char *p = path; *p; p++) {
		if (*p == '/' && out > copy && out[-1] == '/')
			continue;
		*out++ = *p;
	}
	if (out - copy > 1 && out[-1] == '/')
		out--;
	*out = '\0';
	return copy;
}

struct dlc_control_parser *dlc_control_parser_new(const char *mount_prefix)
{
	/* malloc, not calloc: the three line buffers need no zeroing */
	struct dlc_control_parser *parser = malloc(sizeof(*parser));

	if (!parser)
		return NULL;
	parser->prefix = NULL;
	parser->prefix_len = 0;
	parser->line = 1;
	parser->skipping = false;
	parser->tail_len = 0;
	parser->c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
	if (!parser->c_locale)
		goto err_free;
	/* A relative prefix cannot be matched as written, and "/" is the leading '/'. */
	if (mount_prefix && mount_prefix[0] == '/') {
		parser->prefix = normalize_prefix(mount_prefix);
		if (!parser->prefix)
			goto err_locale;
		parser->prefix_len = strlen(parser->prefix);
		if (parser->prefix_len == 1) {
			free(parser->prefix);
			parser->prefix = NULL;
			parser->prefix_len = 0;
		}
	}
	return parser;

err_locale:
	freelocale(parser->c_locale);
err_free:
	free(parser);
	errno = ENOMEM;
	return NULL;
}

void dlc_control_parser_free(struct dlc_control_parser *parser)
{
	if (!parser)
		return;
	freelocale(parser->c_locale);
	free(parser->prefix);
	free(parser);
}

int dlc_control_feed(struct dlc_control_parser *parser, const char *data, size_t len,
		     dlc_control_apply_cb apply_cb, void *arg, struct dlc_control_result *result)
{
	struct feed feed = { .parser = parser, .apply = apply_cb, .arg = arg, .result = result };
	const char *p = data, *end = data + len;

	assert(parser && apply_cb && result && (data || len == 0));
	while (p < end) {
		const char *newline = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)((newline ? newline : end) - p);

		if (parser->skipping || feed.failure) {
			/* an over-long line, or a line after a callback failure: dropped */
		} else if (parser->tail_len > 0) {
			if (parser->tail_len + n > DLC_CONTROL_MAX_LINE) {
				refuse_long_line(&feed);
				parser->tail_len = 0;
				parser->skipping = !newline;
			} else {
				memcpy(parser->tail + parser->tail_len, p, n);
				parser->tail_len += n;
				if (newline) {
					parse_line(&feed, parser->tail, parser->tail_len);
					parser->tail_len = 0;
				}
			}
		} else if (n > DLC_CONTROL_MAX_LINE) {
			refuse_long_line(&feed);
			parser->skipping = !newline;
		} else if (newline) {
			parse_line(&feed, p, n);
		} else {
			memcpy(parser->tail, p, n);
			parser->tail_len = n;
		}
		if (!newline) {
			if (feed.failure)
				parser->skipping = true;
			break;
		}
		parser->skipping = false;
		parser->line++;
		p = newline + 1;
	}
	return feed_status(&feed);
}

int dlc_control_finish(struct dlc_control_parser *parser, dlc_control_apply_cb apply_cb, void *arg,
		       struct dlc_control_result *result)
{
	struct feed feed = { .parser = parser, .apply = apply_cb, .arg = arg, .result = result };

	assert(parser && apply_cb && result);
	if (!parser->skipping && parser->tail_len > 0)
		parse_line(&feed, parser->tail, parser->tail_len);
	parser->line = 1;
	parser->skipping = false;
	parser->tail_len = 0;
	return feed_status(&feed);
}

void dlc_control_result_clear(struct dlc_control_result *result)
{
	if (!result)
		return;
	free(result->first_error);
	memset(result, 0, sizeof(*result));
}
