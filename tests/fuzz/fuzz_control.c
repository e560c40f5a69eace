/*
 * fuzz_control.c - libFuzzer target for the .control line protocol
 * (src/fuse/control.c): whatever bytes a job writes, the parser must not crash,
 * read out of bounds, leak, or hand over a command that breaks control.h's
 * contract.
 *
 * Input: byte 0 picks the run (bits 0-1: the mount prefix, none,
 * "/mnt/data", "/mnt/data/" or "/"; bit 2: the callback refuses some paths
 * with -EINVAL; bit 3: the callback fails some paths with -ENOMEM); the
 * rest is the text written to .control.  Each input is parsed three ways:
 *
 *   A  one dlc_control_feed of everything, then dlc_control_finish;
 *   B  the same bytes cut at offsets drawn from the input itself (cuts of
 *      1 to 64 bytes, so lines and even CRLFs are split across feeds);
 *   C  one feed per line (each line with its '\n').
 *
 * Oracles.  Every command handed over has a normalized path where it needs
 * one (not empty, no leading, trailing or doubled '/', no "." or ".."
 * component, no NUL, at most DLC_CONTROL_MAX_LINE bytes) and a finite
 * score.  A result counts first_error exactly when it counts an error, and
 * first_error reads "line N: ..." on one line.  Without -ENOMEM, A, B and C
 * hand over the same commands with the same counts and the same first
 * error (how writes are cut never changes what is applied).  In C, the
 * score of each score line equals what strtod_l reads from its token in the
 * C locale, bit for bit (the parser's fast path must round as strtod does).
 *
 * The same file links with replay.c (no libFuzzer) into a program that runs
 * the checked-in corpus as a plain test.
 */
#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/control.h"
#include "fuzz.h"


/* What one run recorded: the commands as text, and the counts. */
struct record {
	char *text;
	size_t len;
	size_t cap;
	unsigned flags;
	uint64_t handed;       /* commands handed to the callback (C: in the current feed) */
	bool have_score;
	double score;          /* the last score handed over */
};

static void append(struct record *rec, const char *bytes, size_t n)
{
	if (rec->len + n + 1 > rec->cap) {
		size_t cap = (rec->len + n + 1) * 2;
		char *grown = realloc(rec->text, cap);

		if (!grown)
			abort();
		rec->text = grown;
		rec->cap = cap;
	}
	memcpy(rec->text + rec->len, bytes, n);
	rec->len += n;
	rec->text[rec->len] = '\0';
}

/* The path contract of control.h, checked on every command. */
static void check_path(const char *path)
{
	size_t len;

	CHECK(path != NULL);
	len = strlen(path);
	CHECK(len > 0 && len <= DLC_CONTROL_MAX_LINE);
	CHECK(path[0] != '/' && path[len - 1] != '/');
	CHECK(strstr(path, "//") == NULL);
	for (const char *c = path;;) {
		const char *slash = strchr(c, '/');
		size_t n = slash ? (size_t)(slash - c) : strlen(c);

		CHECK(!(n == 1 && c[0] == '.'));
		CHECK(!(n == 2 && c[0] == '.' && c[1] == '.'));
		if (!slash)
			break;
		c = slash + 1;
	}
}

static uint32_t path_hash(const char *path)
{
	uint32_t h = 2166136261u;

	for (; *path; path++)
		h = (h ^ (uint8_t)*path) * 16777619u;
	return h;
}

static int apply(void *arg, const struct dlc_control_command *command, char **cause)
{
	struct record *rec = arg;
	char head[64];
	int n;

	rec->handed++;
	switch (command->kind) {
	case DLC_CONTROL_SCORE:
		check_path(command->path);
		CHECK(isfinite(command->score));
		rec->have_score = true;
		rec->score = command->score;
		n = snprintf(head, sizeof(head), "score %a ", command->score);
		break;
	case DLC_CONTROL_PREFETCH:
		check_path(command->path);
		n = snprintf(head, sizeof(head), "prefetch ");
		break;
	case DLC_CONTROL_FORGET:
		check_path(command->path);
		n = snprintf(head, sizeof(head), "forget ");
		break;
	case DLC_CONTROL_EPOCH:
		CHECK(command->path == NULL);
		n = snprintf(head, sizeof(head), "epoch %" PRIu64, command->epoch);
		break;
	case DLC_CONTROL_RESET:
		CHECK(command->path == NULL);
		n = snprintf(head, sizeof(head), "reset");
		break;
	case DLC_CONTROL_TIER:
		/* Words of HOST:PORT joined by one space: no blank at either end,
		 * no two in a row, no control byte. */
		CHECK(command->path == NULL && command->servers && command->servers[0] != ' ');
		CHECK(strstr(command->servers, "  ") == NULL);
		CHECK(command->servers[strlen(command->servers) - 1] != ' ');
		n = snprintf(head, sizeof(head), "tier %zu", strlen(command->servers));
		break;
	case DLC_CONTROL_TIER_OFF:
		CHECK(command->path == NULL && command->servers == NULL);
		n = snprintf(head, sizeof(head), "tier off");
		break;
	default:
		abort();
	}
	append(rec, head, (size_t)n);
	if (command->path)
		append(rec, command->path, strlen(command->path));
	append(rec, "\n", 1);
	if (command->path) {
		uint32_t h = path_hash(command->path);

		if ((rec->flags & 8) && h % 7 == 0)
			return -ENOMEM;
		if ((rec->flags & 4) && h % 3 == 0) {
			/* Half the refusals give a cause, half leave it to the parser. */
			if (h % 2 && asprintf(cause, "no sample '%s'.", command->path) < 0)
				*cause = NULL;
			return -EINVAL;
		}
	}
	return 0;
}

/* A result's first_error: set exactly when it counted an error, one line. */
static void check_result(const struct dlc_control_result *result)
{
	CHECK((result->errors > 0) == (result->first_error != NULL));
	if (result->first_error) {
		CHECK(strncmp(result->first_error, "line ", 5) == 0);
		CHECK(strchr(result->first_error, '\n') == NULL);
	}
}

static void check_rc(int rc, const struct dlc_control_result *before,
		     const struct dlc_control_result *after, bool nomem)
{
	CHECK(rc == 0 || rc == -EINVAL || (nomem && rc == -ENOMEM));
	if (rc == 0)
		CHECK(after->errors == before->errors);
	if (rc == -EINVAL)
		CHECK(after->errors > before->errors);
}

static const char *const prefixes[4] = { NULL, "/mnt/data", "/mnt/data/", "/" };

struct outcome {
	struct record rec;
	struct dlc_control_result result;
};

static void outcome_free(struct outcome *out)
{
	free(out->rec.text);
	dlc_control_result_clear(&out->result);
}

/* Feeds text in pieces of the given sizes (cycled), then finishes. */
static void run_cut(unsigned flags, const char *text, size_t len, const uint8_t *sizes,
		    size_t nsizes, struct outcome *out)
{
	struct dlc_control_parser *parser = dlc_control_parser_new(prefixes[flags & 3]);
	bool nomem = flags & 8;
	size_t done = 0, i = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	out->rec.flags = flags;
	if (!parser)
		abort();
	while (done < len) {
		size_t n = nsizes ? (size_t)(sizes[i++ % nsizes] % 64) + 1 : len - done;
		struct dlc_control_result before = out->result;

		if (n > len - done)
			n = len - done;
		rc = dlc_control_feed(parser, text + done, n, apply, &out->rec, &out->result);
		check_rc(rc, &before, &out->result, nomem);
		check_result(&out->result);
		done += n;
	}
	{
		struct dlc_control_result before = out->result;

		rc = dlc_control_finish(parser, apply, &out->rec, &out->result);
		check_rc(rc, &before, &out->result, nomem);
		check_result(&out->result);
	}
	dlc_control_parser_free(parser);
}

/* What strtod_l reads from the score token of line [p, end), as the parser cuts it. */
static double expected_score(locale_t c_locale, const char *p, const char *end)
{
	char token[DLC_CONTROL_MAX_LINE + 1];
	const char *t;

	if (end > p && end[-1] == '\r')
		end--;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	for (t = p; t < end && *t != ' ' && *t != '\t'; t++)
		;
	memcpy(token, p, (size_t)(t - p));
	token[t - p] = '\0';
	return strtod_l(token, NULL, c_locale);
}

/* One feed per line; every score equals strtod_l's reading of its token. */
static void run_lines(unsigned flags, const char *text, size_t len, struct outcome *out)
{
	struct dlc_control_parser *parser = dlc_control_parser_new(prefixes[flags & 3]);
	locale_t c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
	bool nomem = flags & 8;
	size_t done = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	out->rec.flags = flags;
	if (!parser || !c_locale)
		abort();
	while (done < len) {
		const char *line = text + done;
		const char *newline = memchr(line, '\n', len - done);
		size_t n = newline ? (size_t)(newline - line) + 1 : len - done;
		struct dlc_control_result before = out->result;

		out->rec.handed = 0;
		out->rec.have_score = false;
		rc = dlc_control_feed(parser, line, n, apply, &out->rec, &out->result);
		check_rc(rc, &before, &out->result, nomem);
		check_result(&out->result);
		CHECK(out->rec.handed <= 1);
		if (newline && out->rec.have_score && (size_t)(newline - line) <= DLC_CONTROL_MAX_LINE) {
			double want = expected_score(c_locale, line, newline);

			CHECK(memcmp(&want, &out->rec.score, sizeof(want)) == 0);
		}
		done += n;
	}
	{
		struct dlc_control_result before = out->result;

		rc = dlc_control_finish(parser, apply, &out->rec, &out->result);
		check_rc(rc, &before, &out->result, nomem);
		check_result(&out->result);
	}
	freelocale(c_locale);
	dlc_control_parser_free(parser);
}

static void assert_same(const struct outcome *a, const struct outcome *b)
{
	CHECK(a->rec.len == b->rec.len);
	CHECK(a->rec.len == 0 || memcmp(a->rec.text, b->rec.text, a->rec.len) == 0);
	CHECK(a->result.lines == b->result.lines);
	CHECK(a->result.errors == b->result.errors);
	CHECK((a->result.first_error == NULL) == (b->result.first_error == NULL));
	CHECK(!a->result.first_error || strcmp(a->result.first_error, b->result.first_error) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outcome whole, cut, lines;
	const char *text;
	size_t len;
	unsigned flags;

	if (size == 0)
		return 0;
	flags = data[0];
	text = (const char *)data + 1;
	len = size - 1;

	run_cut(flags, text, len, NULL, 0, &whole);
	/* The cut sizes come from the text itself: every input is its own split. */
	run_cut(flags, text, len, data + 1, len < 16 ? len : 16, &cut);
	run_lines(flags, text, len, &lines);
	if (!(flags & 8)) {
		assert_same(&whole, &cut);
		assert_same(&whole, &lines);
	}
	outcome_free(&whole);
	outcome_free(&cut);
	outcome_free(&lines);
	return 0;
}
