/*
 * stats.c - the daemon's counters and their renderings for .stats.
 *
 * Counters are relaxed atomics bumped from any thread (dlc_stats_add in the
 * header); nothing here orders them against each other, so a rendering is a
 * snapshot of each counter, read once, not of all of them at one instant.
 * The last error text is the only non-atomic state and stats->lock guards it.
 *
 * The .stats JSON is written by a small line writer that puts exactly one
 * member on each line, indents by two spaces per level and opens nested
 * objects with `"name": {` alone on a line, so that dlc_stats_print_human()
 * (and a user's grep or awk) can read it line by line without a JSON parser.
 * Strings are escaped for JSON: quote and backslash, every control character
 * as \u00XX, and bytes that are not valid UTF-8 as \ufffd, so that a source
 * path holding anything still gives a valid document.
 *
 * Lifetime totals travel as "name value\n" lines, one per counter.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/stats.h"

#ifndef DLC_VERSION
#define DLC_VERSION "unknown"
#endif

/* Keys of the .stats document (no escaping needed) are at most this long. */
#define KEY_MAX 64
/* Sections nest at most this deep in a document print_human accepts. */
#define SECTION_DEPTH_MAX 8
/* Width of the name column in print_human's table. */
#define HUMAN_NAME_WIDTH 22

static const char *const counter_names[DLC_STAT_COUNT] = {
	[DLC_STAT_HITS] = "hits",
	[DLC_STAT_MISSES] = "misses",
	[DLC_STAT_BYTES_FROM_CACHE] = "bytes_from_cache",
	[DLC_STAT_BYTES_FROM_REMOTE] = "bytes_from_remote",
	[DLC_STAT_ADMISSIONS] = "admissions",
	[DLC_STAT_EVICTIONS] = "evictions",
	[DLC_STAT_BYPASSES] = "bypasses",
	[DLC_STAT_CORRUPT] = "corrupt",
	[DLC_STAT_CACHE_READ_ERRORS] = "cache_read_errors",
	[DLC_STAT_REMOTE_ERRORS] = "remote_errors",
	[DLC_STAT_PREFETCHES] = "prefetches",
	[DLC_STAT_PREFETCH_HITS] = "prefetch_hits",
	[DLC_STAT_CHUNK_READS] = "chunk_reads",
	[DLC_STAT_CHUNK_ADMISSIONS] = "chunk_admissions",
	[DLC_STAT_CHUNK_HITS] = "chunk_hits",
	[DLC_STAT_CONTROL_LINES] = "control_lines",
	[DLC_STAT_CONTROL_ERRORS] = "control_errors",
	[DLC_STAT_INTERRUPTED] = "interrupted",
	[DLC_STAT_EXPIRED] = "expired",
	[DLC_STAT_HITS_PASSTHROUGH] = "hits_passthrough",
	[DLC_STAT_PASSTHROUGH_DECLINED] = "passthrough_declined",
	[DLC_STAT_BLOCK_HITS] = "block_hits",
	[DLC_STAT_BLOCK_MISSES] = "block_misses",
	[DLC_STAT_BLOCK_ADMISSIONS] = "block_admissions",
	[DLC_STAT_READAHEADS] = "readaheads",
	[DLC_STAT_HEAD_READS] = "head_reads",
	[DLC_STAT_WHOLE_BLOCK_OPENS] = "whole_block_opens",
	[DLC_STAT_UNBUFFERED_READS] = "unbuffered_reads",
	[DLC_STAT_IOCTLS] = "ioctls",
	[DLC_STAT_WARMED] = "warmed",
	[DLC_STAT_SHARD_PREFETCHES] = "shard_prefetches",
	[DLC_STAT_SHARD_PREFETCH_HITS] = "shard_prefetch_hits",
	[DLC_STAT_DATA_READS] = "data_reads",
	[DLC_STAT_PAGE_DROPS] = "page_drops",
};

static const char *const backend_op_names[DLC_BACKEND_OP_COUNT] = {
	[DLC_BACKEND_LIST] = "list",
	[DLC_BACKEND_STAT] = "stat",
	[DLC_BACKEND_OPEN] = "open",
	[DLC_BACKEND_READ] = "read",
	[DLC_BACKEND_CLOSE] = "close",
};

void dlc_stats_init(struct dlc_stats *stats)
{
	for (int i = 0; i < DLC_STAT_COUNT; i++) {
		atomic_init(&stats->counters[i], 0);
		stats->lifetime_base[i] = 0;
	}
	pthread_mutex_init(&stats->lock, NULL);
	stats->last_error[0] = '\0';
}

void dlc_stats_destroy(struct dlc_stats *stats)
{
	pthread_mutex_destroy(&stats->lock);
}

const char *dlc_stats_name(enum dlc_stat which)
{
	if ((unsigned)which >= DLC_STAT_COUNT)
		return NULL;
	return counter_names[which];
}

void dlc_stats_set_error(struct dlc_stats *stats, const char *text)
{
	size_t len = text ? strlen(text) : 0;

	if (len >= sizeof(stats->last_error)) {
		len = sizeof(stats->last_error) - 1;
		/* Cut before a UTF-8 sequence rather than through it. */
		while (len > 0 && ((unsigned char)text[len] & 0xc0) == 0x80)
			len--;
	}
	pthread_mutex_lock(&stats->lock);
	if (len > 0)
		memcpy(stats->last_error, text, len);
	stats->last_error[len] = '\0';
	pthread_mutex_unlock(&stats->lock);
}

/* The length of the valid UTF-8 sequence at s (1 to 4), or 0 if it is not one. */
static size_t utf8_sequence_length(const unsigned char *s)
{
	unsigned char lead = s[0];
	unsigned char min = 0x80, max = 0xbf;
	size_t len;

	if (lead < 0x80)
		return 1;
	if (lead >= 0xc2 && lead <= 0xdf) {
		len = 2;
	} else if (lead >= 0xe0 && lead <= 0xef) {
		len = 3;
		if (lead == 0xe0)
			min = 0xa0;     /* overlong */
		else if (lead == 0xed)
			max = 0x9f;     /* surrogates */
	} else if (lead >= 0xf0 && lead <= 0xf4) {
		len = 4;
		if (lead == 0xf0)
			min = 0x90;     /* overlong */
		else if (lead == 0xf4)
			max = 0x8f;     /* above U+10FFFF */
	} else {
		return 0;
	}
	if (s[1] < min || s[1] > max)
		return 0;
	for (size_t i = 2; i < len; i++) {
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	}
	return len;
}

static void write_json_string(FILE *f, const char *text)
{
	const unsigned char *s = (const unsigned char *)(text ? text : "");

	fputc('"', f);
	while (*s != '\0') {
		size_t len = utf8_sequence_length(s);

		if (len == 0) {
			fputs("\\ufffd", f);
			s++;
		} else if (*s == '"' || *s == '\\') {
			fputc('\\', f);
			fputc(*s++, f);
		} else if (*s < 0x20 || *s == 0x7f) {
			fprintf(f, "\\u%04x", *s++);
		} else {
			fwrite(s, 1, len, f);
			s += len;
		}
	}
	fputc('"', f);
}

/* Writes one member per line; the caller's keys need no escaping. */
struct json_writer {
	FILE *f;
	int depth;
	bool first[SECTION_DEPTH_MAX];
};

static void json_begin(struct json_writer *w, FILE *f)
{
	w->f = f;
	w->depth = 1;
	w->first[1] = true;
	fputc('{', f);
}

static void json_key(struct json_writer *w, const char *key)
{
	fputs(w->first[w->depth] ? "\n" : ",\n", w->f);
	w->first[w->depth] = false;
	fprintf(w->f, "%*s\"%s\": ", 2 * w->depth, "", key);
}

static void json_open(struct json_writer *w, const char *key)
{
	assert(w->depth + 1 < SECTION_DEPTH_MAX);
	json_key(w, key);
	fputc('{', w->f);
	w->depth++;
	w->first[w->depth] = true;
}

static void json_close(struct json_writer *w)
{
	w->depth--;
	fprintf(w->f, "\n%*s}", 2 * w->depth, "");
}

static void json_end(struct json_writer *w)
{
	assert(w->depth == 1);
	fputs("\n}\n", w->f);
}

static void json_uint(struct json_writer *w, const char *key, uint64_t value)
{
	json_key(w, key);
	fprintf(w->f, "%" PRIu64, value);
}

static void json_bool(struct json_writer *w, const char *key, bool value)
{
	json_key(w, key);
	fputs(value ? "true" : "false", w->f);
}

static void json_fixed(struct json_writer *w, const char *key, double value, int decimals)
{
	json_key(w, key);
	fprintf(w->f, "%.*f", decimals, isfinite(value) ? value : 0.0);
}

static void json_string(struct json_writer *w, const char *key, const char *value)
{
	json_key(w, key);
	write_json_string(w->f, value);
}

int dlc_stats_render_json(struct dlc_stats *stats, const struct dlc_stats_gauges *gauges,
			  char **out, size_t *len)
{
	static const struct dlc_stats_gauges no_gauges;
	uint64_t counters[DLC_STAT_COUNT];
	char last_error[sizeof(stats->last_error)];
	struct json_writer w;
	char *buf = NULL;
	size_t size = 0;
	uint64_t lookups;
	bool failed;
	FILE *f;

	if (gauges == NULL)
		gauges = &no_gauges;
	for (int i = 0; i < DLC_STAT_COUNT; i++)
		counters[i] = dlc_stats_get(stats, (enum dlc_stat)i);
	pthread_mutex_lock(&stats->lock);
	memcpy(last_error, stats->last_error, sizeof(last_error));
	pthread_mutex_unlock(&stats->lock);
	last_error[sizeof(last_error) - 1] = '\0';
	lookups = counters[DLC_STAT_HITS] + counters[DLC_STAT_MISSES];

	f = open_memstream(&buf, &size);
	if (f == NULL)
		return -ENOMEM;

	json_begin(&w, f);
	json_string(&w, "version", DLC_VERSION);
	json_string(&w, "source", gauges->source);
	json_string(&w, "policy", gauges->policy);
	json_fixed(&w, "uptime_seconds", gauges->uptime_seconds, 3);
	for (int i = 0; i < DLC_STAT_COUNT; i++)
		json_uint(&w, counter_names[i], counters[i]);
	json_fixed(&w, "hit_ratio",
		   lookups ? (double)counters[DLC_STAT_HITS] / (double)lookups : 0.0, 4);
	json_string(&w, "last_error", last_error);
	json_uint(&w, "epoch", gauges->epoch);
	json_uint(&w, "scored_samples", gauges->scores_known);

	json_open(&w, "remote_ops");
	for (int i = 0; i < DLC_BACKEND_OP_COUNT; i++)
		json_uint(&w, backend_op_names[i], gauges->backend_calls[i]);
	json_uint(&w, "metadata",
		  gauges->backend_calls[DLC_BACKEND_LIST] + gauges->backend_calls[DLC_BACKEND_STAT]);
	json_uint(&w, "errors", gauges->backend_errors);
	json_close(&w);

	json_open(&w, "cache");
	json_uint(&w, "bytes", gauges->cache_bytes);
	json_uint(&w, "entries", gauges->cache_entries);
	json_uint(&w, "capacity", gauges->cache_capacity);
	json_bool(&w, "admission", gauges->admission_enabled);
	json_bool(&w, "passthrough", gauges->passthrough);
	json_uint(&w, "passthrough_backing", gauges->passthrough_backing);
	json_uint(&w, "announced", gauges->cache_announced);
	json_close(&w);

	json_open(&w, "fuse");
	json_bool(&w, "io_uring", gauges->io_uring);
	json_uint(&w, "opens_io_uring", gauges->opens_io_uring);
	json_uint(&w, "opens_dev_fuse", gauges->opens_dev_fuse);
	json_close(&w);

	json_open(&w, "source_reads");
	json_uint(&w, "threads", gauges->source_threads);
	json_uint(&w, "running", gauges->source_running);
	json_uint(&w, "queued", gauges->source_queued);
	json_close(&w);

	json_open(&w, "memory");
	json_uint(&w, "limit", gauges->memory_limit);
	json_uint(&w, "used", gauges->memory_used);
	json_uint(&w, "peak", gauges->memory_peak);
	json_uint(&w, "waits", gauges->memory_waits);
	json_close(&w);

	json_open(&w, "snapshot");
	json_uint(&w, "entries", gauges->snapshot_entries);
	json_uint(&w, "bytes", gauges->snapshot_bytes);
	json_uint(&w, "index_memory", gauges->index_memory);
	json_close(&w);

	/* Shown while the tier has servers, and after, once a value was refused. */
	if (gauges->tier_count > 0 || gauges->tier_corrupt > 0) {
		json_open(&w, "tier");
		json_uint(&w, "servers", gauges->tier_count);
		json_uint(&w, "corrupt", gauges->tier_corrupt);
		for (unsigned i = 0; i < gauges->tier_count; i++) {
			const struct dlc_stats_tier_server *t = &gauges->tier[i];

			json_open(&w, t->name);
			json_bool(&w, "up", t->up);
			json_bool(&w, "own", t->own);
			json_bool(&w, "full", t->full);
			json_uint(&w, "fill", t->fill);
			json_uint(&w, "limit", t->limit);
			json_uint(&w, "hits", t->hits);
			json_uint(&w, "own_hits", t->own_hits);
			json_uint(&w, "misses", t->misses);
			json_uint(&w, "adds", t->adds);
			json_uint(&w, "refusals", t->refusals);
			json_uint(&w, "timeouts", t->timeouts);
			json_uint(&w, "corrupt", t->corrupt);
			json_uint(&w, "bytes", t->bytes);
			json_uint(&w, "skips", t->skips);
			json_uint(&w, "removed", t->removed);
			json_uint(&w, "item_max", t->item_max);
			json_uint(&w, "evictions", t->evictions);
			json_uint(&w, "extstore_lost", t->extstore_lost);
			json_close(&w);
		}
		json_close(&w);
	}

	json_open(&w, "lifetime");
	for (int i = 0; i < DLC_STAT_COUNT; i++)
		json_uint(&w, counter_names[i], stats->lifetime_base[i] + counters[i]);
	json_close(&w);
	json_end(&w);

	failed = ferror(f) != 0;
	if (fclose(f) != 0 || failed) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	if (len != NULL)
		*len = size;
	return 0;
}

char *dlc_stats_totals_encode(struct dlc_stats *stats)
{
	/* name, space, up to 20 digits, newline per counter. */
	size_t size = DLC_STAT_COUNT * (KEY_MAX + 23) + 1;
	size_t used = 0;
	char *text = malloc(size);

	if (text == NULL)
		return NULL;
	text[0] = '\0';
	for (int i = 0; i < DLC_STAT_COUNT; i++) {
		uint64_t total = stats->lifetime_base[i] + dlc_stats_get(stats, (enum dlc_stat)i);
		int n = snprintf(text + used, size - used, "%s %" PRIu64 "\n",
				 counter_names[i], total);

		assert(n > 0 && (size_t)n < size - used);
		used += (size_t)n;
	}
	return text;
}

/* Parses the decimal digits of [s, end) into *out; 0 or -EINVAL. */
static int parse_uint64(const char *s, const char *end, uint64_t *out)
{
	uint64_t value = 0;

	if (s == end)
		return -EINVAL;
	for (; s < end; s++) {
		unsigned digit = (unsigned)(*s - '0');

		if (digit > 9 || value > (UINT64_MAX - digit) / 10)
			return -EINVAL;
		value = value * 10 + digit;
	}
	*out = value;
	return 0;
}

int dlc_stats_totals_decode(struct dlc_stats *stats, const char *text)
{
	uint64_t base[DLC_STAT_COUNT] = { 0 };
	const char *line = text;

	if (text == NULL)
		return -EINVAL;
	while (*line != '\0') {
		const char *end = strchrnul(line, '\n');
		const char *space = memchr(line, ' ', (size_t)(end - line));
		uint64_t value;

		if (end == line) {
			line++;
			continue;       /* a blank line */
		}
		if (space == NULL || space == line || parse_uint64(space + 1, end, &value) < 0)
			return -EINVAL;
		for (int i = 0; i < DLC_STAT_COUNT; i++) {
			if (strlen(counter_names[i]) == (size_t)(space - line) &&
			    memcmp(counter_names[i], line, (size_t)(space - line)) == 0)
				base[i] = value;
		}
		line = *end ? end + 1 : end;
	}
	memcpy(stats->lifetime_base, base, sizeof(base));
	return 0;
}

/* print_human: reads the line layout that dlc_stats_render_json writes. */

enum stats_line_kind {
	STATS_LINE_OTHER,       /* the document's "{", or a line of another shape */
	STATS_LINE_MEMBER,      /* "key": value */
	STATS_LINE_OPEN,        /* "key": { */
	STATS_LINE_CLOSE,       /* } */
};

struct stats_line {
	enum stats_line_kind kind;
	char key[KEY_MAX + 1];
	const char *value;      /* the raw JSON value, without a trailing comma */
	size_t value_len;
};

static void parse_stats_line(const char *s, size_t len, struct stats_line *out)
{
	const char *end = s + len;
	const char *quote;

	out->kind = STATS_LINE_OTHER;
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
		end--;
	if (end > s && end[-1] == ',')
		end--;
	if (end - s == 1 && *s == '}') {
		out->kind = STATS_LINE_CLOSE;
		return;
	}
	if (end - s < 2 || *s != '"')
		return;
	quote = memchr(s + 1, '"', (size_t)(end - s - 1));
	if (quote == NULL || quote - (s + 1) > KEY_MAX || end - quote < 3 ||
	    quote[1] != ':' || quote[2] != ' ')
		return;
	memcpy(out->key, s + 1, (size_t)(quote - (s + 1)));
	out->key[quote - (s + 1)] = '\0';
	out->value = quote + 3;
	out->value_len = (size_t)(end - out->value);
	if (out->value_len == 0)
		return;
	if (out->value_len == 1 && out->value[0] == '{')
		out->kind = STATS_LINE_OPEN;
	else
		out->kind = STATS_LINE_MEMBER;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t len = strlen(s), suffix_len = strlen(suffix);

	return len >= suffix_len && strcmp(s + len - suffix_len, suffix) == 0;
}

static bool is_byte_valued(const char *key)
{
	return ends_with(key, "bytes") || strcmp(key, "bytes_from_cache") == 0 ||
	       strcmp(key, "bytes_from_remote") == 0 || strcmp(key, "capacity") == 0 ||
	       strcmp(key, "index_memory") == 0;
}

static void print_size(FILE *out, uint64_t bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double scaled = (double)bytes;
	int unit = -1;

	while (scaled >= 1024.0 && unit + 1 < (int)(sizeof(units) / sizeof(units[0]))) {
		scaled /= 1024.0;
		unit++;
	}
	if (unit < 0)
		fprintf(out, "%" PRIu64 " bytes", bytes);
	else
		fprintf(out, "%.2f %s (%" PRIu64 " bytes)", scaled, units[unit], bytes);
}

static void put_utf8(FILE *out, uint32_t code)
{
	if (code < 0x80) {
		fputc((int)code, out);
	} else if (code < 0x800) {
		fputc(0xc0 | (int)(code >> 6), out);
		fputc(0x80 | (int)(code & 0x3f), out);
	} else if (code < 0x10000) {
		fputc(0xe0 | (int)(code >> 12), out);
		fputc(0x80 | (int)((code >> 6) & 0x3f), out);
		fputc(0x80 | (int)(code & 0x3f), out);
	} else {
		fputc(0xf0 | (int)(code >> 18), out);
		fputc(0x80 | (int)((code >> 12) & 0x3f), out);
		fputc(0x80 | (int)((code >> 6) & 0x3f), out);
		fputc(0x80 | (int)(code & 0x3f), out);
	}
}

/* Reads the 4 hex digits at s (s has at least 4 bytes before end); -1 if not hex. */
static long parse_hex4(const char *s, const char *end)
{
	long value = 0;

	if (end - s < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		int c = s[i];
		int digit = c >= '0' && c <= '9' ? c - '0' :
			    c >= 'a' && c <= 'f' ? c - 'a' + 10 :
			    c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

		if (digit < 0)
			return -1;
		value = value * 16 + digit;
	}
	return value;
}

/*
 * Prints a JSON string's text for a terminal: escapes decoded, except that
 * control characters stay visible as escapes (a source path must not be able
 * to move the cursor or change the terminal's colours).
 */
static void print_json_string(FILE *out, const char *s, size_t len)
{
	const char *end = s + len;

	if (len < 2 || s[0] != '"' || end[-1] != '"') {
		fwrite(s, 1, len, out);
		return;
	}
	s++;
	end--;
	if (s == end) {
		fputs("(none)", out);
		return;
	}
	while (s < end) {
		long code, low;

		if (*s != '\\' || end - s < 2) {
			fputc(*s++, out);
			continue;
		}
		switch (s[1]) {
		case '"': case '\\': case '/':
			fputc(s[1], out);
			s += 2;
			continue;
		case 'u':
			break;
		default:        /* \b \f \n \r \t: keep visible */
			fwrite(s, 1, 2, out);
			s += 2;
			continue;
		}
		code = parse_hex4(s + 2, end);
		if (code < 0x20 || code == 0x7f) {      /* control, or not hex */
			fwrite(s, 1, 2, out);
			s += 2;
			continue;
		}
		s += 6;
		if (code >= 0xd800 && code <= 0xdbff && end - s >= 6 && s[0] == '\\' &&
		    s[1] == 'u' && (low = parse_hex4(s + 2, end)) >= 0xdc00 && low <= 0xdfff) {
			code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
			s += 6;
		} else if (code >= 0xd800 && code <= 0xdfff) {
			code = 0xfffd;
		}
		put_utf8(out, (uint32_t)code);
	}
}

static void print_value(FILE *out, const struct stats_line *line)
{
	const char *value = line->value;
	size_t len = line->value_len;
	char number[32];
	char *end;

	if (value[0] == '"') {
		print_json_string(out, value, len);
		return;
	}
	if (len == 4 && memcmp(value, "true", 4) == 0) {
		fputs("yes", out);
		return;
	}
	if (len == 5 && memcmp(value, "false", 5) == 0) {
		fputs("no", out);
		return;
	}
	if (len < sizeof(number)) {
		memcpy(number, value, len);
		number[len] = '\0';
		if (strcmp(line->key, "hit_ratio") == 0) {
			double ratio = strtod(number, &end);

			if (*end == '\0') {
				fprintf(out, "%.2f %%", 100.0 * ratio);
				return;
			}
		} else if (strcmp(line->key, "uptime_seconds") == 0) {
			fprintf(out, "%s s", number);
			return;
		} else if (is_byte_valued(line->key)) {
			uint64_t bytes;

			if (parse_uint64(number, number + len, &bytes) == 0) {
				print_size(out, bytes);
				return;
			}
		}
	}
	fwrite(value, 1, len, out);
}

int dlc_stats_print_human(const char *json, FILE *out)
{
	bool has_hits = false;
	int depth = 0;

	if (json == NULL)
		return -EINVAL;

	/* First pass: is this a .stats document at all? */
	for (const char *s = json; *s != '\0';) {
		const char *end = strchrnul(s, '\n');
		struct stats_line line;

		parse_stats_line(s, (size_t)(end - s), &line);
		if (line.kind == STATS_LINE_OPEN)
			depth++;
		else if (line.kind == STATS_LINE_CLOSE && depth > 0)
			depth--;
		else if (line.kind == STATS_LINE_MEMBER && depth == 0 &&
			 strcmp(line.key, "hits") == 0)
			has_hits = true;
		s = *end ? end + 1 : end;
	}
	if (!has_hits)
		return -EINVAL;

	depth = 0;
	for (const char *s = json; *s != '\0';) {
		const char *end = strchrnul(s, '\n');
		struct stats_line line;
		int indent = 2 * depth;

		parse_stats_line(s, (size_t)(end - s), &line);
		switch (line.kind) {
		case STATS_LINE_OPEN:
			fprintf(out, "\n%*s%s\n", indent, "", line.key);
			depth++;
			break;
		case STATS_LINE_CLOSE:
			if (depth > 0)
				depth--;
			break;
		case STATS_LINE_MEMBER:
			fprintf(out, "%*s%-*s ", indent, "", HUMAN_NAME_WIDTH - indent, line.key);
			print_value(out, &line);
			fputc('\n', out);
			break;
		case STATS_LINE_OTHER:
			break;
		}
		s = *end ? end + 1 : end;
	}
	return ferror(out) ? -EIO : 0;
}

/* A Prometheus metric name part: only [a-zA-Z0-9_]. */
static bool is_metric_word(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

int dlc_stats_print_prometheus(const char *json, FILE *out)
{
	char sections[SECTION_DEPTH_MAX][KEY_MAX + 1];
	bool labelled[SECTION_DEPTH_MAX];
	int depth = 0;

	/* The same document check as print_human. */
	if (json == NULL || strstr(json, "\n  \"hits\": ") == NULL)
		return -EINVAL;
	for (const char *s = json; *s != '\0';) {
		const char *end = strchrnul(s, '\n');
		struct stats_line line;
		const char *label = NULL;
		char name[SECTION_DEPTH_MAX * (KEY_MAX + 1) + 16];
		size_t used;

		parse_stats_line(s, (size_t)(end - s), &line);
		s = *end ? end + 1 : end;
		if (line.kind == STATS_LINE_OPEN) {
			if (depth < SECTION_DEPTH_MAX) {
				snprintf(sections[depth], sizeof(sections[depth]), "%s", line.key);
				labelled[depth] = !is_metric_word(line.key);
			}
			depth++;
			continue;
		}
		if (line.kind == STATS_LINE_CLOSE) {
			if (depth > 0)
				depth--;
			continue;
		}
		if (line.kind != STATS_LINE_MEMBER || depth > SECTION_DEPTH_MAX ||
		    !is_metric_word(line.key))
			continue;
		used = (size_t)snprintf(name, sizeof(name), "dlcache");
		for (int i = 0; i < depth; i++) {
			if (labelled[i])
				label = sections[i];
			else
				used += (size_t)snprintf(name + used, sizeof(name) - used, "_%s",
							 sections[i]);
		}
		snprintf(name + used, sizeof(name) - used, "_%s", line.key);
		{
			const char *v = line.value;
			int n = (int)line.value_len;

			if (n == 4 && memcmp(v, "true", 4) == 0)
				v = "1", n = 1;
			else if (n == 5 && memcmp(v, "false", 5) == 0)
				v = "0", n = 1;
			else if (n == 0 || !((v[0] >= '0' && v[0] <= '9') || v[0] == '-'))
				continue;       /* strings are not numbers */
			fputs(name, out);
			if (label) {
				fputs("{server=\"", out);
				for (const char *p = label; *p; p++) {
					if (*p == '"' || *p == '\\')
						fputc('\\', out);
					fputc(*p, out);
				}
				fputs("\"}", out);
			}
			fprintf(out, " %.*s\n", n, v);
		}
	}
	return ferror(out) ? -EIO : 0;
}
