/*
 * check_control.c - the .control line protocol, as a training job writes it.
 *
 * Every test feeds text to a parser whose callback records each command it
 * is handed as one line of text ("score 0.25 [train/x]", "epoch 3",
 * "prefetch [a]", "forget [a]", "reset"; paths in brackets so trailing
 * blanks show).  The callback refuses paths under "missing/" with a cause
 * and fails paths under "nomem/" with -ENOMEM, the two ways a real caller
 * answers.  Good lines are a table of text -> recorded commands; bad lines a
 * table of text -> line number and a word the cause must hold, every cause
 * being one sentence with a fix.  Splits feed one sample text in every
 * two-way cut, in every three-way cut whose two cuts lie at most 64 bytes
 * apart (so each line is also cut in three), and byte by byte, and must
 * record exactly what one feed records.
 *
 * The throughput benchmark (1.28 M ImageNet-style lines in 128 KiB feeds)
 * is not a test: its tcase exists only when DLC_BENCH=1 is set, prints
 * lines/s and asserts nothing about time.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlcache/control.h"

#define MAX_LINE DLC_CONTROL_MAX_LINE
/* A string literal with its length, so that tables may hold NUL bytes. */
#define TEXT(s) s, sizeof(s) - 1

/* ---- the recording callback -------------------------------------------- */

struct recorder {
	char *text;                /* one line per command handed over */
	size_t len;
	size_t cap;
	unsigned handed;           /* commands handed over */
	double last_score;
	int fail_after;            /* > 0: the n-th command fails with -ENOMEM */
};

static void recorder_append(struct recorder *rec, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void recorder_append(struct recorder *rec, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	ck_assert_int_ge(n, 0);
	if (rec->len + (size_t)n + 1 > rec->cap) {
		rec->cap = (rec->len + (size_t)n + 1) * 2;
		rec->text = realloc(rec->text, rec->cap);
		ck_assert_ptr_nonnull(rec->text);
	}
	va_start(ap, fmt);
	vsnprintf(rec->text + rec->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	rec->len += (size_t)n;
}

static int record(void *arg, const struct dlc_control_command *command, char **cause)
{
	struct recorder *rec = arg;

	rec->handed++;
	switch (command->kind) {
	case DLC_CONTROL_SCORE:
		ck_assert_ptr_nonnull(command->path);
		rec->last_score = command->score;
		recorder_append(rec, "score %.15g [%s]\n", command->score, command->path);
		break;
	case DLC_CONTROL_EPOCH:
		ck_assert_ptr_null(command->path);
		recorder_append(rec, "epoch %" PRIu64 "\n", command->epoch);
		break;
	case DLC_CONTROL_PREFETCH:
		recorder_append(rec, "prefetch [%s]\n", command->path);
		break;
	case DLC_CONTROL_FORGET:
		recorder_append(rec, "forget [%s]\n", command->path);
		break;
	case DLC_CONTROL_RESET:
		ck_assert_ptr_null(command->path);
		recorder_append(rec, "reset\n");
		break;
	case DLC_CONTROL_TIER:
		ck_assert_ptr_nonnull(command->servers);
		recorder_append(rec, "tier [%s]\n", command->servers);
		break;
	case DLC_CONTROL_TIER_OFF:
		ck_assert_ptr_null(command->servers);
		recorder_append(rec, "tier off\n");
		break;
	default:
		ck_abort_msg("unknown command kind %d", (int)command->kind);
	}
	if (rec->fail_after > 0 && rec->handed == (unsigned)rec->fail_after)
		return -ENOMEM;
	if (command->path && strncmp(command->path, "nomem/", 6) == 0)
		return -ENOMEM;
	if (command->path && strncmp(command->path, "missing/", 8) == 0) {
		if (strcmp(command->path, "missing/silently") != 0) {
			ck_assert_int_ge(asprintf(cause, "no sample '%s' in the snapshot; check the path.",
						  command->path), 0);
		}
		return -EINVAL;
	}
	return 0;
}

static const char *recorded(const struct recorder *rec)
{
	return rec->text ? rec->text : "";
}

/* What a whole run of feeds and a finish saw. */
struct outcome {
	char *commands;
	uint64_t lines;
	uint64_t errors;
	char *first_error;
	int rc;                    /* the first -errno other than -EINVAL, else -EINVAL, else 0 */
};

static void outcome_clear(struct outcome *out)
{
	free(out->commands);
	free(out->first_error);
	memset(out, 0, sizeof(*out));
}

static int worse(int rc, int next)
{
	if (rc != 0 && rc != -EINVAL)
		return rc;
	return next != 0 ? next : rc;
}

/*
 * Feeds text cut at the given offsets (ascending, within len), then
 * finishes; one result spans all calls.
 */
static struct outcome run_cuts(const char *prefix, const char *text, size_t len,
			       const size_t *cuts, size_t ncuts)
{
	struct dlc_control_parser *parser = dlc_control_parser_new(prefix);
	struct dlc_control_result result = { 0 };
	struct recorder rec = { 0 };
	struct outcome out = { 0 };
	size_t from = 0;

	ck_assert_ptr_nonnull(parser);
	for (size_t i = 0; i <= ncuts; i++) {
		size_t to = i < ncuts ? cuts[i] : len;

		ck_assert_uint_le(from, to);
		out.rc = worse(out.rc, dlc_control_feed(parser, text + from, to - from, record,
							&rec, &result));
		from = to;
	}
	out.rc = worse(out.rc, dlc_control_finish(parser, record, &rec, &result));
	out.commands = rec.text ? rec.text : strdup("");
	out.lines = result.lines;
	out.errors = result.errors;
	out.first_error = result.first_error;
	dlc_control_parser_free(parser);
	return out;
}

static struct outcome run_text(const char *prefix, const char *text, size_t len)
{
	return run_cuts(prefix, text, len, NULL, 0);
}

static unsigned count_lines(const char *text)
{
	unsigned n = 0;

	for (; *text; text++)
		n += *text == '\n';
	return n;
}

/*
 * A cause a person reads: "line N: ", one line, one sentence ending with
 * '.', a fix after ';', and the word that names the problem.
 */
static void assert_cause(const char *cause, uint64_t line, const char *word, const char *context)
{
	char prefix[40];
	size_t len;

	ck_assert_msg(cause != NULL, "%s: no first_error", context);
	snprintf(prefix, sizeof(prefix), "line %" PRIu64 ": ", line);
	ck_assert_msg(strncmp(cause, prefix, strlen(prefix)) == 0,
		      "%s: cause does not start with '%s': %s", context, prefix, cause);
	len = strlen(cause);
	ck_assert_msg(cause[len - 1] == '.', "%s: cause does not end with '.': %s", context, cause);
	ck_assert_msg(strchr(cause, '\n') == NULL, "%s: cause is not one line: %s", context, cause);
	ck_assert_msg(strchr(cause, ';') != NULL, "%s: cause names no fix: %s", context, cause);
	ck_assert_msg(strstr(cause, word) != NULL, "%s: cause lacks '%s': %s", context, word,
		      cause);
}

/* ---- good lines --------------------------------------------------------- */

struct good_case {
	const char *prefix;
	const char *text;
	const char *expected;      /* the recorded commands */
};

static const struct good_case good_cases[] = {
	/* the everyday line */
	{ NULL, "0.7312 train/n01440764/n01440764_10026.JPEG\n",
	  "score 0.7312 [train/n01440764/n01440764_10026.JPEG]\n" },
	/* every form strtod reads as a finite decimal */
	{ NULL, "1 a\n-2.5 b\n+3 c\n.5 d\n5. e\n1e3 f\n1E-3 g\n2.5e+2 h\n007 i\n0.000 j\n",
	  "score 1 [a]\nscore -2.5 [b]\nscore 3 [c]\nscore 0.5 [d]\nscore 5 [e]\n"
	  "score 1000 [f]\nscore 0.001 [g]\nscore 250 [h]\nscore 7 [i]\nscore 0 [j]\n" },
	{ NULL, "1.7976931348623157e308 max\n4.9e-324 min\n1e-400 under\n",
	  "score 1.79769313486232e+308 [max]\nscore 4.94065645841247e-324 [min]\n"
	  "score 0 [under]\n" },
	{ NULL, "0.12345678901234567890123 long\n123456789012345678901234567890 big\n",
	  "score 0.123456789012346 [long]\nscore 1.23456789012346e+29 [big]\n" },
	/* blanks: leading, tabs, several between score and path */
	{ NULL, "  \t0.5 a\n0.5\t\tb\n0.5 \t c\n",
	  "score 0.5 [a]\nscore 0.5 [b]\nscore 0.5 [c]\n" },
	/* comments and blank lines */
	{ NULL, "# ranks\n\n   \n\t# indented comment\n#0.5 x\n0.5 a\n\n",
	  "score 0.5 [a]\n" },
	/* CRLF: one final '\r' goes, others stay in the path */
	{ NULL, "0.5 a\r\nepoch 3\r\nreset\r\n\r\n# c\r\nprefetch b\r\n0.5 c\r\r\n0.5 d\re\n",
	  "score 0.5 [a]\nepoch 3\nreset\nprefetch [b]\nscore 0.5 [c\r]\nscore 0.5 [d\re]\n" },
	/* spaces inside a path, and trailing blanks that are part of it */
	{ NULL, "0.5 my dir/a b.jpg\n0.5 a  \n0.5 b\t\nforget c d \n",
	  "score 0.5 [my dir/a b.jpg]\nscore 0.5 [a  ]\nscore 0.5 [b\t]\nforget [c d ]\n" },
	/* normalization */
	{ NULL, "0.5 /a\n0.5 ///a//b///\n0.5 a/\n0.5 .hidden/..x/.../x.\n0.5 a/ /b\n",
	  "score 0.5 [a]\nscore 0.5 [a/b]\nscore 0.5 [a]\nscore 0.5 [.hidden/..x/.../x.]\n"
	  "score 0.5 [a/ /b]\n" },
	{ NULL, "0.5 train/café/ünï.jpg\n", "score 0.5 [train/café/ünï.jpg]\n" },
	/* keywords */
	{ NULL, "epoch 0\nepoch 18446744073709551615\nepoch 7   \nepoch\t5\n  epoch 0012\n",
	  "epoch 0\nepoch 18446744073709551615\nepoch 7\nepoch 5\nepoch 12\n" },
	{ NULL, "prefetch train/a.JPEG\nprefetch\t//b//c/\nforget /train/b\nforget x y\n",
	  "prefetch [train/a.JPEG]\nprefetch [b/c]\nforget [train/b]\nforget [x y]\n" },
	{ NULL, "reset\nreset  \t\n  reset\n", "reset\nreset\nreset\n" },
	/* the cluster tier: words joined by one space, in the order written */
	{ NULL, "tier n1:11211\n", "tier [n1:11211]\n" },
	{ NULL, "tier  n1:11211 \t10.0.0.2:11212  [::1]:11213\r\n",
	  "tier [n1:11211 10.0.0.2:11212 [::1]:11213]\n" },
	{ NULL, "tier off\n  tier off \t\ntier n1:1\n", "tier off\ntier off\ntier [n1:1]\n" },
	{ NULL, "0.5 tier off\nprefetch tier\n", "score 0.5 [tier off]\nprefetch [tier]\n" },
	/* a keyword as a path */
	{ NULL, "0.5 reset\nprefetch epoch 3\n", "score 0.5 [reset]\nprefetch [epoch 3]\n" },
	/* the mount's own prefix */
	{ "/mnt/data", "0.5 /mnt/data/train/x\n", "score 0.5 [train/x]\n" },
	{ "/mnt/data", "0.5 /mnt/database/x\n", "score 0.5 [mnt/database/x]\n" },
	{ "/mnt/data", "0.5 /mnt/datax\n", "score 0.5 [mnt/datax]\n" },
	{ "/mnt/data", "0.5 mnt/data/x\n", "score 0.5 [mnt/data/x]\n" },
	{ "/mnt/data", "0.5 /mnt/data//x//\n", "score 0.5 [x]\n" },
	{ "/mnt/data", "0.5 /mnt/data/mnt/data/x\n", "score 0.5 [mnt/data/x]\n" },
	{ "/mnt/data", "0.5 //mnt/data/x\n", "score 0.5 [mnt/data/x]\n" },
	{ "/mnt/data", "0.5 train/x\n0.5 /train/y\n", "score 0.5 [train/x]\nscore 0.5 [train/y]\n" },
	{ "/mnt/data", "prefetch /mnt/data/a\nforget /mnt/data/b/\n", "prefetch [a]\nforget [b]\n" },
	{ "/mnt/data/", "0.5 /mnt/data/x\n", "score 0.5 [x]\n" },
	{ "//mnt//data//", "0.5 /mnt/data/x\n", "score 0.5 [x]\n" },
	{ "/", "0.5 /x\n", "score 0.5 [x]\n" },
	{ "mnt/data", "0.5 mnt/data/x\n", "score 0.5 [mnt/data/x]\n" },
	/* a last line without newline is parsed by finish */
	{ NULL, "0.5 a\n0.25 b", "score 0.5 [a]\nscore 0.25 [b]\n" },
	{ NULL, "reset\r", "reset\n" },
	{ NULL, "", "" },
	{ NULL, "\n\n\n", "" },
};

START_TEST(test_good_lines)
{
	const struct good_case *c = &good_cases[_i];
	struct outcome out = run_text(c->prefix, c->text, strlen(c->text));

	ck_assert_msg(out.rc == 0, "[%s]: rc %d, first error %s", c->text, out.rc,
		      out.first_error ? out.first_error : "(none)");
	ck_assert_msg(out.errors == 0 && out.first_error == NULL, "[%s]: %s", c->text,
		      out.first_error);
	ck_assert_msg(strcmp(out.commands, c->expected) == 0, "[%s]: recorded\n%s\nexpected\n%s",
		      c->text, out.commands, c->expected);
	ck_assert_uint_eq(out.lines, count_lines(c->expected));
	outcome_clear(&out);
}
END_TEST

/* ---- exact scores --------------------------------------------------------- */

struct score_case {
	const char *token;
	double expected;
};

/* The compiler rounds each literal correctly; the parser must agree bit for bit. */
static const struct score_case score_cases[] = {
	{ "0.7312", 0.7312 }, { "0.1", 0.1 }, { "0.3", 0.3 }, { "-0.1", -0.1 },
	{ "1", 1.0 }, { "-0", -0.0 }, { "+0", 0.0 }, { "-0.0e5", -0.0 },
	{ "0e999", 0.0 }, { "123456789", 123456789.0 },
	{ "9007199254740993", 9007199254740993.0 },       /* 2^53 + 1: rounds */
	{ "1e22", 1e22 }, { "1e23", 1e23 }, { "1e-22", 1e-22 }, { "1e-23", 1e-23 },
	{ "3.141592653589793238462643383279", 3.141592653589793238462643383279 },
	{ "2.2250738585072014e-308", 2.2250738585072014e-308 },
	{ "1.7976931348623157e308", 1.7976931348623157e308 },
	{ "0.000001234", 0.000001234 }, { "1234.5678e-2", 1234.5678e-2 },
	{ "12345678901234567890", 12345678901234567890.0 },
	{ "0.1234567890123456789", 0.1234567890123456789 },
	{ "00000000000000000000000000001.5", 1.5 },
	{ "1.00000000000000000000000000001", 1.00000000000000000000000000001 },
	{ "5e-324", 5e-324 }, { "2.5e-324", 2.5e-324 }, { "2e-324", 0.0 }, { "-1e-400", -0.0 },
};

START_TEST(test_score_exact)
{
	const struct score_case *c = &score_cases[_i];
	struct dlc_control_parser *parser = dlc_control_parser_new(NULL);
	struct dlc_control_result result = { 0 };
	struct recorder rec = { 0 };
	char line[128];
	int len = snprintf(line, sizeof(line), "%s p\n", c->token);

	ck_assert_int_eq(dlc_control_feed(parser, line, (size_t)len, record, &rec, &result), 0);
	ck_assert_uint_eq(rec.handed, 1);
	ck_assert_msg(memcmp(&rec.last_score, &c->expected, sizeof(double)) == 0,
		      "%s: parsed %.17g (%a), expected %.17g (%a)", c->token, rec.last_score,
		      rec.last_score, c->expected, c->expected);
	dlc_control_result_clear(&result);
	free(rec.text);
	dlc_control_parser_free(parser);
}
END_TEST

static uint64_t next_random(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

/* Random decimals must read bit for bit as strtod reads them. */
START_TEST(test_score_random)
{
	enum { TOKENS = 20000 };
	struct dlc_control_parser *parser = dlc_control_parser_new(NULL);
	uint64_t state = 0x9e3779b97f4a7c15u;
	char token[96];

	for (int i = 0; i < TOKENS; i++) {
		struct dlc_control_result result = { 0 };
		struct recorder rec = { 0 };
		char line[128];
		size_t n = 0;
		int int_digits = (int)(next_random(&state) % 12);
		int frac_digits = (int)(next_random(&state) % 24);
		double expected;
		int len;

		if (next_random(&state) % 4 == 0)
			token[n++] = next_random(&state) % 2 ? '-' : '+';
		if (int_digits == 0 && frac_digits == 0)
			int_digits = 1;
		for (int d = 0; d < int_digits; d++)
			token[n++] = (char)('0' + next_random(&state) % 10);
		if (frac_digits > 0 || next_random(&state) % 8 == 0)
			token[n++] = '.';
		for (int d = 0; d < frac_digits; d++)
			token[n++] = (char)('0' + next_random(&state) % 10);
		if (next_random(&state) % 3 == 0)
			n += (size_t)sprintf(token + n, "e%d", (int)(next_random(&state) % 80) - 40);
		token[n] = '\0';

		expected = strtod(token, NULL);
		len = snprintf(line, sizeof(line), "%s p\n", token);
		ck_assert_int_eq(dlc_control_feed(parser, line, (size_t)len, record, &rec, &result),
				 0);
		ck_assert_uint_eq(rec.handed, 1);
		ck_assert_msg(memcmp(&rec.last_score, &expected, sizeof(double)) == 0,
			      "%s: parsed %a, strtod %a", token, rec.last_score, expected);
		free(rec.text);
	}
	dlc_control_parser_free(parser);
}
END_TEST

/* ---- bad lines ------------------------------------------------------------ */

struct bad_case {
	const char *prefix;
	const char *text;
	size_t len;
	unsigned line;             /* the bad line's number */
	const char *word;          /* its cause must hold this */
	unsigned accepted;         /* good commands around it */
};

static const struct bad_case bad_cases[] = {
	/* scores that are not finite */
	{ NULL, TEXT("nan a\n"), 1, "'nan' is not a finite number", 0 },
	{ NULL, TEXT("NaN a\n"), 1, "finite", 0 },
	{ NULL, TEXT("nan(0x1) a\n"), 1, "finite", 0 },
	{ NULL, TEXT("inf a\n"), 1, "finite", 0 },
	{ NULL, TEXT("-inf a\n"), 1, "'-inf' is not a finite number", 0 },
	{ NULL, TEXT("+Infinity a\n"), 1, "finite", 0 },
	{ NULL, TEXT("1e999 a\n"), 1, "'1e999' is not a finite number", 0 },
	{ NULL, TEXT("-1e309 a\n"), 1, "finite", 0 },
	/* scores that are not decimal text */
	{ NULL, TEXT("0x1p3 a\n"), 1, "'0x1p3' is not a decimal", 0 },
	{ NULL, TEXT("0x10 a\n"), 1, "decimal", 0 },
	{ NULL, TEXT("1.2.3 a\n"), 1, "'1.2.3' is not a decimal", 0 },
	{ NULL, TEXT("12abc a\n"), 1, "'12abc' is not a decimal", 0 },
	{ NULL, TEXT("1e a\n"), 1, "decimal", 0 },
	{ NULL, TEXT("1e+ a\n"), 1, "decimal", 0 },
	{ NULL, TEXT("1e5.5 a\n"), 1, "decimal", 0 },
	{ NULL, TEXT(". a\n"), 1, "decimal", 0 },
	{ NULL, TEXT("- a\n"), 1, "decimal", 0 },
	{ NULL, TEXT("+ a\n"), 1, "decimal", 0 },
	{ NULL, TEXT("--1 a\n"), 1, "decimal", 0 },
	{ NULL, TEXT("+-1 a\n"), 1, "decimal", 0 },
	{ NULL, TEXT("1,5 a\n"), 1, "decimal", 0 },
	{ NULL, TEXT("1_000 a\n"), 1, "decimal", 0 },
	{ NULL, TEXT("0.5abc\n"), 1, "decimal", 0 },
	{ NULL, TEXT("0.\0 a\n"), 1, "'0.?' is not a decimal", 0 },
	{ NULL, TEXT("-.e1 a\n"), 1, "decimal", 0 },
	/* a score without a path */
	{ NULL, TEXT("0.5\n"), 1, "no path", 0 },
	{ NULL, TEXT("0.5   \n"), 1, "no path", 0 },
	{ NULL, TEXT("0.5\t\r\n"), 1, "no path", 0 },
	{ NULL, TEXT("0.5"), 1, "no path", 0 },
	/* unknown commands */
	{ NULL, TEXT("xyz a\n"), 1, "unknown command 'xyz'; write SCORE PATH, epoch N", 0 },
	{ NULL, TEXT("score 0.5 a\n"), 1, "unknown command 'score'", 0 },
	{ NULL, TEXT("epochs 3\n"), 1, "unknown command 'epochs'", 0 },
	{ NULL, TEXT("EPOCH 3\n"), 1, "lowercase", 0 },
	{ NULL, TEXT("Reset\n"), 1, "lowercase", 0 },
	{ NULL, TEXT("PREFETCH a\n"), 1, "lowercase", 0 },
	{ NULL, TEXT("x\0y 0.5\n"), 1, "unknown command 'x?y'", 0 },
	{ NULL, TEXT("resetx\n"), 1, "unknown", 0 },
	{ NULL, TEXT("a/b.jpg 0.5\n"), 1, "unknown", 0 },
	/* epoch */
	{ NULL, TEXT("epoch\n"), 1, "epoch needs a number", 0 },
	{ NULL, TEXT("epoch   \n"), 1, "needs a number", 0 },
	{ NULL, TEXT("epoch x\n"), 1, "not a whole number", 0 },
	{ NULL, TEXT("epoch -1\n"), 1, "whole", 0 },
	{ NULL, TEXT("epoch +1\n"), 1, "whole", 0 },
	{ NULL, TEXT("epoch 3x\n"), 1, "whole", 0 },
	{ NULL, TEXT("epoch 1.5\n"), 1, "whole", 0 },
	{ NULL, TEXT("epoch 18446744073709551616\n"), 1, "too large", 0 },
	{ NULL, TEXT("epoch 99999999999999999999999\n"), 1, "too large", 0 },
	{ NULL, TEXT("epoch 3 4\n"), 1, "remove '4'", 0 },
	{ NULL, TEXT("epoch 3 # three\n"), 1, "remove '# three'", 0 },
	/* the cluster tier */
	{ NULL, TEXT("tier\n"), 1, "tier needs servers", 0 },
	{ NULL, TEXT("tier \t\n"), 1, "tier needs servers", 0 },
	{ NULL, TEXT("tier off now\n"), 1, "tier off alone", 0 },
	{ NULL, TEXT("tier n1\n"), 1, "'n1' is not a tier server", 0 },
	{ NULL, TEXT("tier n1:11211 n2\n"), 1, "'n2' is not a tier server", 0 },
	{ NULL, TEXT("tier n1:0\n"), 1, "not a tier server", 0 },
	{ NULL, TEXT("tier n1:65536\n"), 1, "not a tier server", 0 },
	{ NULL, TEXT("tier n1:11x\n"), 1, "not a tier server", 0 },
	{ NULL, TEXT("tier :11211\n"), 1, "not a tier server", 0 },
	{ NULL, TEXT("tier ::1:11211\n"), 1, "not a tier server", 0 },
	{ NULL, TEXT("tier [::1]11211\n"), 1, "not a tier server", 0 },
	{ NULL, TEXT("tier n1:1 off\n"), 1, "'off' is not a tier server", 0 },
	{ NULL, TEXT("Tier off\n"), 1, "keywords are lowercase", 0 },
	{ NULL, TEXT("tier n\0:1\n"), 1, "not a tier server", 0 },
	/* reset, prefetch, forget */
	{ NULL, TEXT("reset now\n"), 1, "no argument", 0 },
	{ NULL, TEXT("reset all scores\r\n"), 1, "no argument", 0 },
	{ NULL, TEXT("prefetch\n"), 1, "prefetch needs a path", 0 },
	{ NULL, TEXT("prefetch \t \n"), 1, "prefetch needs a path", 0 },
	{ NULL, TEXT("forget\n"), 1, "forget needs a path", 0 },
	/* paths */
	{ NULL, TEXT("0.5 ../a\n"), 1, "'..' component, which leaves the dataset", 0 },
	{ NULL, TEXT("0.5 a/../../b\n"), 1, "leaves the dataset", 0 },
	{ NULL, TEXT("0.5 a/..\n"), 1, "'..'", 0 },
	{ NULL, TEXT("0.5 a/../\n"), 1, "'..'", 0 },
	{ NULL, TEXT("prefetch /../etc/passwd\n"), 1, "leaves the dataset", 0 },
	{ NULL, TEXT("forget ..\n"), 1, "'..'", 0 },
	{ NULL, TEXT("0.5 ./a\n"), 1, "'.' component", 0 },
	{ NULL, TEXT("0.5 a/./b\n"), 1, "'.' component", 0 },
	{ NULL, TEXT("0.5 a/.\n"), 1, "'.' component", 0 },
	{ NULL, TEXT("0.5 /\n"), 1, "empty", 0 },
	{ NULL, TEXT("0.5 ///\n"), 1, "empty", 0 },
	{ NULL, TEXT("forget /\n"), 1, "empty", 0 },
	{ NULL, TEXT("0.5 a\0b\n"), 1, "NUL", 0 },
	{ NULL, TEXT("prefetch \0\n"), 1, "NUL", 0 },
	{ "/mnt/data", TEXT("0.5 /mnt/data\n"), 1, "'/mnt/data' is empty", 0 },
	{ "/mnt/data", TEXT("0.5 /mnt/data/\n"), 1, "empty", 0 },
	{ "/mnt/data", TEXT("0.5 /mnt/data/..\n"), 1, "leaves the dataset", 0 },
	{ "/mnt/data", TEXT("0.5 /mnt/data/../database/x\n"), 1, "leaves the dataset", 0 },
	/* long tokens are quoted cut short */
	{ NULL, TEXT("0.5 ../aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"),
	  1, "aaa...'", 0 },
	/* line numbers count blank and comment lines; good lines around apply */
	{ NULL, TEXT("# c\n\n0.5 a\nnan b\n"), 4, "line 4: score 'nan'", 1 },
	{ NULL, TEXT("0.1 a\r\n\r\n0.2 b\r\nepoch x\r\nreset\r\n"), 4, "whole", 3 },
	{ NULL, TEXT("0.1 a\n0.2 b\nepoch 1\nreset\n0.3 c\n\n\n#\n0.4 ..\n"), 9, "'..'", 5 },
	{ NULL, TEXT("0.1 a\n0.2 b\n1.2.3"), 3, "decimal", 2 },
};

START_TEST(test_bad_lines)
{
	const struct bad_case *c = &bad_cases[_i];
	struct outcome out;
	char context[160];

	snprintf(context, sizeof(context), "case %d [%.60s]", _i, c->text);
	out = run_text(c->prefix, c->text, c->len);
	ck_assert_msg(out.rc == -EINVAL, "%s: rc %d", context, out.rc);
	ck_assert_msg(out.errors == 1, "%s: %" PRIu64 " errors", context, out.errors);
	ck_assert_msg(out.lines == c->accepted, "%s: %" PRIu64 " lines accepted", context,
		      out.lines);
	ck_assert_uint_eq(count_lines(out.commands), c->accepted);
	assert_cause(out.first_error, c->line, c->word, context);
	outcome_clear(&out);
}
END_TEST

/* ---- mixtures and the result ---------------------------------------------- */

START_TEST(test_mixture)
{
	static const char text[] =
		"0.1 a\n"
		"nan b\n"
		"0.2 c\n"
		"epoch 1\n"
		"xyz\n"
		"0.3 ../d\n"
		"reset\n";
	struct outcome out = run_text(NULL, text, strlen(text));

	ck_assert_int_eq(out.rc, -EINVAL);
	ck_assert_str_eq(out.commands, "score 0.1 [a]\nscore 0.2 [c]\nepoch 1\nreset\n");
	ck_assert_uint_eq(out.lines, 4);
	ck_assert_uint_eq(out.errors, 3);
	assert_cause(out.first_error, 2, "finite", "mixture");
	outcome_clear(&out);
}
END_TEST

/* One result over several feeds keeps the first error; each feed says its own status. */
START_TEST(test_result_spans_feeds)
{
	struct dlc_control_parser *parser = dlc_control_parser_new(NULL);
	struct dlc_control_result result = { 0 };
	struct recorder rec = { 0 };

	ck_assert_int_eq(dlc_control_feed(parser, TEXT("0.1 a\nreset now\n"), record, &rec,
					  &result), -EINVAL);
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("0.2 b\n"), record, &rec, &result), 0);
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("epoch x\n"), record, &rec, &result),
			 -EINVAL);
	ck_assert_int_eq(dlc_control_finish(parser, record, &rec, &result), 0);
	ck_assert_uint_eq(result.lines, 2);
	ck_assert_uint_eq(result.errors, 2);
	assert_cause(result.first_error, 2, "reset takes no argument", "spans feeds");

	dlc_control_result_clear(&result);
	ck_assert_ptr_null(result.first_error);
	ck_assert_uint_eq(result.lines, 0);
	ck_assert_uint_eq(result.errors, 0);
	dlc_control_result_clear(&result);
	dlc_control_result_clear(NULL);

	/* a fresh result after clear gets the next bad line, numbered on */
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("0.3 c\n1.2.3 x\n"), record, &rec,
					  &result), -EINVAL);
	assert_cause(result.first_error, 2, "decimal", "after clear");
	dlc_control_result_clear(&result);
	free(rec.text);
	dlc_control_parser_free(parser);
	dlc_control_parser_free(NULL);
}
END_TEST

/* ---- splits --------------------------------------------------------------- */

static const char split_sample[] =
	"# ranks for epoch 3\r\n"
	"epoch 3\n"
	"0.7312 train/n01440764/n01440764_10026.JPEG\n"
	"\n"
	"  -1.5e-3\t/mnt/data/train/a b.JPEG  \r\n"
	"nan train/x\n"
	"prefetch //val//y/\n"
	"forget missing/z\n"
	"3.141592653589793238462643383279 pi\n"
	"reset\n"
	"1.2.3 q\n"
	"0.25 last";

/* Longer than any line of split_sample. */
#define THREE_WAY_SPAN 64

static void assert_same(const struct outcome *want, const struct outcome *got,
			const char *how)
{
	ck_assert_msg(strcmp(want->commands, got->commands) == 0,
		      "%s: recorded\n%s\nexpected\n%s", how, got->commands, want->commands);
	ck_assert_msg(want->lines == got->lines && want->errors == got->errors,
		      "%s: %" PRIu64 " lines %" PRIu64 " errors, expected %" PRIu64 " and %" PRIu64,
		      how, got->lines, got->errors, want->lines, want->errors);
	ck_assert_msg(got->first_error && strcmp(want->first_error, got->first_error) == 0,
		      "%s: first error %s, expected %s", how, got->first_error, want->first_error);
	ck_assert_msg(want->rc == got->rc, "%s: rc %d, expected %d", how, got->rc, want->rc);
}

static void check_splits(const char *prefix, const char *text, size_t len, bool three_way)
{
	struct outcome whole = run_text(prefix, text, len);
	size_t *cuts = malloc(len * sizeof(*cuts));
	char how[64];

	ck_assert_ptr_nonnull(cuts);
	ck_assert_ptr_nonnull(whole.first_error);
	for (size_t i = 0; i <= len; i++) {
		struct outcome got = run_cuts(prefix, text, len, &i, 1);

		snprintf(how, sizeof(how), "cut at %zu", i);
		assert_same(&whole, &got, how);
		outcome_clear(&got);
		/* second cuts within THREE_WAY_SPAN bytes: every line of the sample in three pieces */
		for (size_t j = i; three_way && j <= len && j <= i + THREE_WAY_SPAN; j++) {
			size_t pair[2] = { i, j };

			got = run_cuts(prefix, text, len, pair, 2);
			snprintf(how, sizeof(how), "cuts at %zu and %zu", i, j);
			assert_same(&whole, &got, how);
			outcome_clear(&got);
		}
	}
	for (size_t i = 0; i < len; i++)
		cuts[i] = i + 1;
	{
		struct outcome got = run_cuts(prefix, text, len, cuts, len > 0 ? len - 1 : 0);

		assert_same(&whole, &got, "byte by byte");
		outcome_clear(&got);
	}
	free(cuts);
	outcome_clear(&whole);
}

START_TEST(test_split_sample)
{
	struct outcome whole = run_text("/mnt/data", split_sample, strlen(split_sample));

	/* the reference itself must be right, or every split would agree on a wrong answer */
	ck_assert_str_eq(whole.commands,
			 "epoch 3\n"
			 "score 0.7312 [train/n01440764/n01440764_10026.JPEG]\n"
			 "score -0.0015 [train/a b.JPEG  ]\n"
			 "prefetch [val/y]\n"
			 "forget [missing/z]\n"
			 "score 3.14159265358979 [pi]\n"
			 "reset\n"
			 "score 0.25 [last]\n");
	ck_assert_uint_eq(whole.lines, 7);
	ck_assert_uint_eq(whole.errors, 3);
	ck_assert_int_eq(whole.rc, -EINVAL);
	assert_cause(whole.first_error, 6, "finite", "split sample");
	outcome_clear(&whole);

	check_splits("/mnt/data", split_sample, strlen(split_sample), true);
}
END_TEST

/* The same text ending with a newline: finish has nothing left to parse. */
START_TEST(test_split_sample_terminated)
{
	char *text;

	ck_assert_int_ge(asprintf(&text, "%s\n", split_sample), 0);
	check_splits("/mnt/data", text, strlen(text), false);
	free(text);
}
END_TEST

/* ---- over-long lines ------------------------------------------------------ */

/* "0.5 " + path of path_len 'a' bytes + end + rest, malloc'd. */
static char *long_line(size_t path_len, const char *end, const char *rest, size_t *len)
{
	size_t end_len = strlen(end), rest_len = strlen(rest);
	char *text;

	*len = 4 + path_len + end_len + rest_len;
	text = malloc(*len + 1);
	ck_assert_ptr_nonnull(text);
	memcpy(text, "0.5 ", 4);
	memset(text + 4, 'a', path_len);
	memcpy(text + 4 + path_len, end, end_len);
	memcpy(text + 4 + path_len + end_len, rest, rest_len + 1);
	return text;
}

struct boundary_case {
	size_t path_len;           /* the line is 4 + path_len bytes before its end */
	const char *end;
	bool accepted;
};

static const struct boundary_case boundary_cases[] = {
	{ MAX_LINE - 4, "\n", true },         /* exactly 8192 bytes */
	{ MAX_LINE - 3, "\n", false },        /* 8193 */
	{ MAX_LINE - 5, "\r\n", true },       /* 8192 with its '\r' */
	{ MAX_LINE - 4, "\r\n", false },      /* 8193 with its '\r' */
	{ MAX_LINE - 4, "", true },           /* 8192, finished without newline */
	{ MAX_LINE - 3, "", false },          /* 8193, finished without newline */
	{ MAX_LINE * 12, "\n", false },       /* far longer */
};

START_TEST(test_long_line_boundary)
{
	const struct boundary_case *c = &boundary_cases[_i];
	bool terminated = c->end[0] != '\0';
	size_t len;
	char *text = long_line(c->path_len, c->end, "", &len);
	char *full;
	struct outcome out;
	size_t full_len;

	/* the next line must parse; only when the long one ends in a newline is there one */
	if (terminated)
		ck_assert_int_ge(asprintf(&full, "%s0.6 b\nnan\n", text), 0);
	else
		full = strdup(text);
	full_len = len + (terminated ? strlen("0.6 b\nnan\n") : 0);
	out = run_text(NULL, full, full_len);
	if (c->accepted) {
		ck_assert_uint_eq(out.lines, terminated ? 2 : 1);
		ck_assert_uint_eq(out.errors, terminated ? 1 : 0);
		ck_assert_uint_eq(strlen(out.commands),
				  strlen("score 0.5 []\n") + c->path_len +
				  (terminated ? strlen("score 0.6 [b]\n") : 0));
		if (terminated)
			assert_cause(out.first_error, 3, "finite", "after a long line");
	} else {
		ck_assert_uint_eq(out.lines, terminated ? 1 : 0);
		ck_assert_uint_eq(out.errors, terminated ? 2 : 1);
		ck_assert_str_eq(out.commands, terminated ? "score 0.6 [b]\n" : "");
		assert_cause(out.first_error, 1, "longer than 8192 bytes", "long line");
	}
	outcome_clear(&out);
	free(full);
	free(text);
}
END_TEST

/* A long line is refused by the feed that takes it past the limit, once, however fed. */
START_TEST(test_long_line_feeds)
{
	static const size_t chunks[] = { 1, 7, 1000, 4096, 8192, 8193, 20000 };
	size_t len;
	char *text = long_line(MAX_LINE * 3, "\n", "0.6 b\nxyz\n", &len);
	size_t line_len = 4 + MAX_LINE * 3;

	for (size_t k = 0; k < sizeof(chunks) / sizeof(chunks[0]); k++) {
		struct dlc_control_parser *parser = dlc_control_parser_new(NULL);
		struct dlc_control_result total = { 0 };
		struct recorder rec = { 0 };
		size_t refused_at = 0;
		unsigned refusals = 0;

		for (size_t from = 0; from < len; from += chunks[k]) {
			struct dlc_control_result result = { 0 };
			size_t n = from + chunks[k] <= len ? chunks[k] : len - from;
			int rc = dlc_control_feed(parser, text + from, n, record, &rec, &result);

			if (result.first_error && strstr(result.first_error, "longer than")) {
				refusals++;
				refused_at = from + n;
				ck_assert_int_eq(rc, -EINVAL);
				assert_cause(result.first_error, 1, "longer", "chunked");
			} else if (result.first_error) {
				/* the "xyz" line: numbered 3 after the long line and "0.6 b" */
				assert_cause(result.first_error, 3, "unknown command 'xyz'", "chunked");
			}
			total.lines += result.lines;
			total.errors += result.errors;
			dlc_control_result_clear(&result);
		}
		ck_assert_int_eq(dlc_control_finish(parser, record, &rec, &total), 0);
		ck_assert_uint_eq(refusals, 1);
		/* refused as soon as the bytes seen exceed the limit */
		ck_assert_msg(refused_at > MAX_LINE && refused_at - chunks[k] <= MAX_LINE &&
			      refused_at <= line_len + 1,
			      "chunk %zu: refused after %zu bytes", chunks[k], refused_at);
		ck_assert_str_eq(recorded(&rec), "score 0.6 [b]\n");
		ck_assert_uint_eq(total.lines, 1);
		ck_assert_uint_eq(total.errors, 2);
		free(rec.text);
		dlc_control_parser_free(parser);
	}
	free(text);
}
END_TEST

/* ---- finish --------------------------------------------------------------- */

START_TEST(test_finish)
{
	struct dlc_control_parser *parser = dlc_control_parser_new(NULL);
	struct dlc_control_result result = { 0 };
	struct recorder rec = { 0 };

	/* nothing kept: nothing happens */
	ck_assert_int_eq(dlc_control_finish(parser, record, &rec, &result), 0);
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("0.5 a\n"), record, &rec, &result), 0);
	ck_assert_int_eq(dlc_control_finish(parser, record, &rec, &result), 0);
	ck_assert_str_eq(recorded(&rec), "score 0.5 [a]\n");

	/* a kept tail is parsed, '\r' and all, as if a newline followed */
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("0.25 b\r"), record, &rec, &result), 0);
	ck_assert_str_eq(recorded(&rec), "score 0.5 [a]\n");
	ck_assert_int_eq(dlc_control_finish(parser, record, &rec, &result), 0);
	ck_assert_str_eq(recorded(&rec), "score 0.5 [a]\nscore 0.25 [b]\n");

	/* blank and comment tails are ignored */
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("   "), record, &rec, &result), 0);
	ck_assert_int_eq(dlc_control_finish(parser, record, &rec, &result), 0);
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("# no newline"), record, &rec, &result), 0);
	ck_assert_int_eq(dlc_control_finish(parser, record, &rec, &result), 0);
	ck_assert_uint_eq(result.lines, 2);
	ck_assert_uint_eq(result.errors, 0);

	/* a bad tail fails the finish, numbered on from the feeds */
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("0.1 c\n\nnan d"), record, &rec, &result),
			 0);
	ck_assert_int_eq(dlc_control_finish(parser, record, &rec, &result), -EINVAL);
	assert_cause(result.first_error, 3, "finite", "bad tail");
	dlc_control_result_clear(&result);

	/* after finish the parser starts afresh: line 1, no tail carried over */
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("0.5 e"), record, &rec, &result), 0);
	ck_assert_int_eq(dlc_control_finish(parser, record, &rec, &result), 0);
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("f\n"), record, &rec, &result), -EINVAL);
	assert_cause(result.first_error, 1, "unknown command 'f'", "after finish");
	dlc_control_result_clear(&result);

	/* finish inside a refused long line adds nothing; the next file starts clean */
	{
		size_t len;
		char *text = long_line(MAX_LINE, "", "", &len);

		ck_assert_int_eq(dlc_control_feed(parser, text, len, record, &rec, &result),
				 -EINVAL);
		ck_assert_uint_eq(result.errors, 1);
		ck_assert_int_eq(dlc_control_finish(parser, record, &rec, &result), 0);
		ck_assert_uint_eq(result.errors, 1);
		dlc_control_result_clear(&result);
		free(text);
	}
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("0.75 g\n"), record, &rec, &result), 0);
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("1.2.3"), record, &rec, &result), 0);
	ck_assert_int_eq(dlc_control_finish(parser, record, &rec, &result), -EINVAL);
	assert_cause(result.first_error, 2, "decimal", "after long");
	ck_assert_str_eq(recorded(&rec), "score 0.5 [a]\nscore 0.25 [b]\nscore 0.1 [c]\n"
			 "score 0.5 [e]\nscore 0.75 [g]\n");
	dlc_control_result_clear(&result);
	free(rec.text);
	dlc_control_parser_free(parser);
}
END_TEST

/* ---- the callback --------------------------------------------------------- */

START_TEST(test_callback_rejects)
{
	static const char text[] = "0.5 a\nforget /missing/b\n0.6 missing/c\n0.7 d\n";
	struct outcome out = run_text(NULL, text, strlen(text));

	ck_assert_int_eq(out.rc, -EINVAL);
	ck_assert_uint_eq(out.lines, 2);
	ck_assert_uint_eq(out.errors, 2);
	/* every command was handed over; the refused ones just do not count */
	ck_assert_str_eq(out.commands,
			 "score 0.5 [a]\nforget [missing/b]\nscore 0.6 [missing/c]\nscore 0.7 [d]\n");
	ck_assert_str_eq(out.first_error,
			 "line 2: no sample 'missing/b' in the snapshot; check the path.");
	outcome_clear(&out);

	/* refused without a cause: the parser words one */
	out = run_text(NULL, TEXT("\n0.5 missing/silently\n"));
	ck_assert_int_eq(out.rc, -EINVAL);
	ck_assert_uint_eq(out.errors, 1);
	assert_cause(out.first_error, 2, "refused", "no cause");
	outcome_clear(&out);

	/* a syntax error before a refusal stays first */
	out = run_text(NULL, TEXT("epoch\n0.5 missing/x\n"));
	assert_cause(out.first_error, 1, "epoch needs a number", "syntax first");
	ck_assert_uint_eq(out.errors, 2);
	outcome_clear(&out);
}
END_TEST

START_TEST(test_callback_fails)
{
	struct dlc_control_parser *parser = dlc_control_parser_new(NULL);
	struct dlc_control_result result = { 0 };
	struct recorder rec = { 0 };

	/* -ENOMEM stops the feed: the lines after it are dropped, the partial line too */
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("0.1 a\nnan\n0.2 nomem/b\n0.3 c\nxyz\n0.4 d"),
					  record, &rec, &result), -ENOMEM);
	ck_assert_str_eq(recorded(&rec), "score 0.1 [a]\nscore 0.2 [nomem/b]\n");
	ck_assert_uint_eq(result.lines, 1);
	ck_assert_uint_eq(result.errors, 1);
	assert_cause(result.first_error, 2, "finite", "before failure");
	dlc_control_result_clear(&result);

	/* the next feed finishes the dropped line, then goes on, numbered as written */
	ck_assert_int_eq(dlc_control_feed(parser, TEXT(" more\n0.5 e\nq\n"), record, &rec,
					  &result), -EINVAL);
	ck_assert_str_eq(recorded(&rec), "score 0.1 [a]\nscore 0.2 [nomem/b]\nscore 0.5 [e]\n");
	ck_assert_uint_eq(result.lines, 1);
	assert_cause(result.first_error, 8, "unknown command 'q'", "after failure");
	dlc_control_result_clear(&result);

	/* a failure in finish is returned, and the parser still starts afresh */
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("0.9 nomem/f"), record, &rec, &result), 0);
	ck_assert_int_eq(dlc_control_finish(parser, record, &rec, &result), -ENOMEM);
	ck_assert_uint_eq(result.lines, 0);
	ck_assert_uint_eq(result.errors, 0);
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("r\n"), record, &rec, &result), -EINVAL);
	assert_cause(result.first_error, 1, "unknown", "after failed finish");
	dlc_control_result_clear(&result);

	/* a failure on a line completed from the kept tail */
	rec.fail_after = (int)rec.handed + 1;
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("0.1 g"), record, &rec, &result), 0);
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("h\n0.2 i\n"), record, &rec, &result),
			 -ENOMEM);
	ck_assert_int_eq(dlc_control_feed(parser, TEXT("0.3 j\n"), record, &rec, &result), 0);
	ck_assert_str_eq(recorded(&rec) + strlen(recorded(&rec)) - strlen("score 0.1 [gh]\nscore 0.3 [j]\n"),
			 "score 0.1 [gh]\nscore 0.3 [j]\n");
	ck_assert_uint_eq(result.lines, 1);
	dlc_control_result_clear(&result);
	free(rec.text);
	dlc_control_parser_free(parser);
}
END_TEST

/* ---- throughput (DLC_BENCH=1 only) --------------------------------------- */

static int count_only(void *arg, const struct dlc_control_command *command, char **cause)
{
	(void)command;
	(void)cause;
	++*(uint64_t *)arg;
	return 0;
}

static double seconds_since(const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

static void bench_one(const char *label, const char *prefix, const char *path_prefix)
{
	enum { LINES = 1281167, CHUNK = 128 * 1024, ROUNDS = 5 };
	size_t cap = (size_t)LINES * (64 + strlen(path_prefix)), len = 0;
	char *text = malloc(cap);
	uint64_t state = 42;
	double best = 1e9;

	ck_assert_ptr_nonnull(text);
	for (unsigned i = 0; i < LINES; i++) {
		unsigned class = 1440764 + (unsigned)(i / 1281);

		len += (size_t)snprintf(text + len, cap - len, "0.%04u %strain/n%08u/n%08u_%u.JPEG\n",
					(unsigned)(next_random(&state) % 10000), path_prefix, class,
					class, 10000 + i % 20000);
	}
	for (int round = 0; round < ROUNDS; round++) {
		struct dlc_control_parser *parser = dlc_control_parser_new(prefix);
		struct dlc_control_result result = { 0 };
		uint64_t applied = 0;
		struct timespec start;
		double elapsed;

		clock_gettime(CLOCK_MONOTONIC, &start);
		for (size_t from = 0; from < len; from += CHUNK) {
			size_t n = from + CHUNK <= len ? CHUNK : len - from;

			ck_assert_int_eq(dlc_control_feed(parser, text + from, n, count_only,
							  &applied, &result), 0);
		}
		ck_assert_int_eq(dlc_control_finish(parser, count_only, &applied, &result), 0);
		elapsed = seconds_since(&start);
		ck_assert_uint_eq(applied, LINES);
		ck_assert_uint_eq(result.lines, LINES);
		if (elapsed < best)
			best = elapsed;
		dlc_control_parser_free(parser);
	}
	printf("control ingest, %s: %u lines, %.1f MB in 128 KiB feeds: best of %d %.3f s, "
	       "%.2f M lines/s, %.0f MB/s\n", label, (unsigned)LINES, (double)len / 1e6, ROUNDS,
	       best, LINES / best / 1e6, (double)len / best / 1e6);
	free(text);
}

START_TEST(test_bench_ingest)
{
	bench_one("relative paths", NULL, "");
	bench_one("mount-prefixed paths", "/mnt/data", "/mnt/data/");
}
END_TEST

/* ---- suite ---------------------------------------------------------------- */

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static Suite *control_suite(void)
{
	Suite *s = suite_create("control");
	TCase *tc;

	tc = tcase_create("good lines");
	tcase_add_loop_test(tc, test_good_lines, 0, COUNT(good_cases));
	tcase_add_loop_test(tc, test_score_exact, 0, COUNT(score_cases));
	tcase_add_test(tc, test_score_random);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("bad lines");
	tcase_add_loop_test(tc, test_bad_lines, 0, COUNT(bad_cases));
	tcase_add_test(tc, test_mixture);
	tcase_add_test(tc, test_result_spans_feeds);
	suite_add_tcase(s, tc);

	tc = tcase_create("splits");
	tcase_add_test(tc, test_split_sample);
	tcase_add_test(tc, test_split_sample_terminated);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);

	tc = tcase_create("long lines");
	tcase_add_loop_test(tc, test_long_line_boundary, 0, COUNT(boundary_cases));
	tcase_add_test(tc, test_long_line_feeds);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("finish and callback");
	tcase_add_test(tc, test_finish);
	tcase_add_test(tc, test_callback_rejects);
	tcase_add_test(tc, test_callback_fails);
	suite_add_tcase(s, tc);

	if (getenv("DLC_BENCH") && strcmp(getenv("DLC_BENCH"), "1") == 0) {
		tc = tcase_create("bench");
		tcase_add_test(tc, test_bench_ingest);
		tcase_set_timeout(tc, 600);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(control_suite());
	int failures;

	srunner_run_all(sr, CK_ENV);
	failures = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failures ? 1 : 0;
}
