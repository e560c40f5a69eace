/*
 * check_stats.c - counters, the .stats JSON layout, lifetime totals and the
 * human rendering.
 *
 * The layout tests hold the document to its promise of one member per line:
 * every line must match one of four shapes, every key appears once in its
 * object, and strings from outside (the source path, the last error) can
 * hold quotes, backslashes, newlines, control bytes or broken UTF-8 without
 * breaking it.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/stats.h"

#ifndef DLC_VERSION
#define DLC_VERSION "unknown"   /* as src/base/stats.c, when meson does not define it */
#endif

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const char *const expected_names[DLC_STAT_COUNT] = {
	"hits", "misses", "bytes_from_cache", "bytes_from_remote", "admissions",
	"evictions", "bypasses", "corrupt", "cache_read_errors", "remote_errors", "prefetches", "prefetch_hits",
	"chunk_reads", "chunk_admissions", "chunk_hits", "control_lines", "control_errors",
	"interrupted",
	"expired",
	"hits_passthrough",
	"passthrough_declined",
	"block_hits",
	"block_misses",
	"block_admissions",
	"readaheads",
	"head_reads",
	"whole_block_opens",
	"unbuffered_reads",
	"ioctls",
	"warmed",
	"shard_prefetches",
	"shard_prefetch_hits",
	"data_reads",
	"page_drops",
};

static struct dlc_stats stats;

static void setup(void)
{
	dlc_stats_init(&stats);
}

static void teardown(void)
{
	dlc_stats_destroy(&stats);
}

static struct dlc_stats_gauges sample_gauges(void)
{
	struct dlc_stats_gauges gauges = {
		.source = "/data/imagenet",
		.policy = "freeze",
		.uptime_seconds = 12.345,
		.cache_bytes = 1320702443,
		.cache_entries = 11000,
		.cache_capacity = 200ULL << 30,
		.admission_enabled = true,
		.cache_announced = 4242,
		.io_uring = true,
		.opens_io_uring = 31,
		.opens_dev_fuse = 2,
		.snapshot_entries = 1281167,
		.snapshot_bytes = 147897477120ULL,
		.index_memory = 96 << 20,
		.backend_calls = { 3, 4, 5, 6, 7 },
		.backend_errors = 2,
	};

	return gauges;
}

static char *render(const struct dlc_stats_gauges *gauges)
{
	char *json = NULL;
	size_t len = 0;

	ck_assert_int_eq(dlc_stats_render_json(&stats, gauges, &json, &len), 0);
	ck_assert_ptr_nonnull(json);
	ck_assert_uint_eq(len, strlen(json));
	return json;
}

/* Whether line opens a top-level section; its name goes to name. */
static bool opens_section(const char *line, char *name, size_t size)
{
	size_t len = strlen(line);
	const char *quote;

	if (strncmp(line, "  \"", 3) != 0 || len < 8 || strcmp(line + len - 4, "\": {") != 0)
		return false;
	quote = strchr(line + 3, '"');
	if (quote != line + len - 4 || (size_t)(quote - (line + 3)) >= size)
		return false;
	memcpy(name, line + 3, (size_t)(quote - (line + 3)));
	name[quote - (line + 3)] = '\0';
	return true;
}

/* The column where the value of a print_human line starts. */
static size_t value_column(const char *line)
{
	size_t i = strspn(line, " ");

	i += strcspn(line + i, " ");
	return i + strspn(line + i, " ");
}

/* The line holding `"key": ` inside section (NULL: top level); NULL if none. */
static char *find_member(const char *json, const char *section, const char *key, char *line,
			 size_t size)
{
	char current[64] = "";
	const char *s = json;

	while (*s) {
		const char *end = strchrnul(s, '\n');
		size_t len = (size_t)(end - s);
		char text[512];
		char name[64];

		ck_assert_uint_lt(len, sizeof(text));
		memcpy(text, s, len);
		text[len] = '\0';
		if (opens_section(text, name, sizeof(name))) {
			strcpy(current, name);
		} else if (strcmp(text, "  }") == 0 || strcmp(text, "  },") == 0) {
			current[0] = '\0';
		} else if (strcmp(current, section ? section : "") == 0) {
			char pattern[80];

			snprintf(pattern, sizeof(pattern), "\"%s\": ", key);
			if (strstr(text, pattern) == text + (section ? 4 : 2)) {
				snprintf(line, size, "%s", text);
				return line;
			}
		}
		s = *end ? end + 1 : end;
	}
	return NULL;
}

/* The unsigned value of a member, which must exist. */
static uint64_t member_value(const char *json, const char *section, const char *key)
{
	char line[512];
	const char *colon;

	ck_assert_msg(find_member(json, section, key, line, sizeof(line)) != NULL,
		      "no member %s in %s", key, section ? section : "top level");
	colon = strstr(line, ": ");
	return strtoull(colon + 2, NULL, 10);
}

/* --- counters ---------------------------------------------------------- */

START_TEST(test_counter_names_in_order)
{
	for (int i = 0; i < DLC_STAT_COUNT; i++)
		ck_assert_str_eq(dlc_stats_name((enum dlc_stat)i), expected_names[i]);
	ck_assert_ptr_null(dlc_stats_name(DLC_STAT_COUNT));
}
END_TEST

START_TEST(test_counters_start_at_zero_and_add)
{
	for (int i = 0; i < DLC_STAT_COUNT; i++) {
		ck_assert_uint_eq(dlc_stats_get(&stats, (enum dlc_stat)i), 0);
		ck_assert_uint_eq(stats.lifetime_base[i], 0);
	}
	dlc_stats_add(&stats, DLC_STAT_HITS, 1);
	dlc_stats_add(&stats, DLC_STAT_HITS, 2);
	dlc_stats_add(&stats, DLC_STAT_BYTES_FROM_REMOTE, 5ULL << 32);
	ck_assert_uint_eq(dlc_stats_get(&stats, DLC_STAT_HITS), 3);
	ck_assert_uint_eq(dlc_stats_get(&stats, DLC_STAT_BYTES_FROM_REMOTE), 5ULL << 32);
	ck_assert_uint_eq(dlc_stats_get(&stats, DLC_STAT_MISSES), 0);
}
END_TEST

enum { ADDERS = 4, ADDS_PER_THREAD = 100000 };

static void *add_many(void *arg)
{
	(void)arg;
	for (int i = 0; i < ADDS_PER_THREAD; i++) {
		dlc_stats_add(&stats, DLC_STAT_HITS, 1);
		dlc_stats_add(&stats, DLC_STAT_BYTES_FROM_CACHE, 3);
	}
	return NULL;
}

START_TEST(test_counters_lose_nothing_across_threads)
{
	pthread_t threads[ADDERS];

	for (int i = 0; i < ADDERS; i++)
		ck_assert_int_eq(pthread_create(&threads[i], NULL, add_many, NULL), 0);
	for (int i = 0; i < ADDERS; i++)
		pthread_join(threads[i], NULL);
	ck_assert_uint_eq(dlc_stats_get(&stats, DLC_STAT_HITS), ADDERS * ADDS_PER_THREAD);
	ck_assert_uint_eq(dlc_stats_get(&stats, DLC_STAT_BYTES_FROM_CACHE),
			  3 * ADDERS * ADDS_PER_THREAD);
}
END_TEST

START_TEST(test_last_error_is_kept_and_truncated)
{
	char long_text[1000];
	char *json;
	char line[512];

	dlc_stats_set_error(&stats, "line 3: unknown path 'x'");
	ck_assert_str_eq(stats.last_error, "line 3: unknown path 'x'");
	dlc_stats_set_error(&stats, NULL);
	ck_assert_str_eq(stats.last_error, "");

	/* 254 ASCII bytes then "é" (2 bytes): the cut must not split it. */
	memset(long_text, 'a', sizeof(long_text));
	memcpy(long_text + 254, "\xc3\xa9", 2);
	long_text[sizeof(long_text) - 1] = '\0';
	dlc_stats_set_error(&stats, long_text);
	ck_assert_uint_eq(strlen(stats.last_error), 254);
	long_text[10] = '\0';
	dlc_stats_set_error(&stats, long_text);
	ck_assert_str_eq(stats.last_error, "aaaaaaaaaa");

	json = render(NULL);
	ck_assert_ptr_nonnull(find_member(json, NULL, "last_error", line, sizeof(line)));
	ck_assert_str_eq(line, "  \"last_error\": \"aaaaaaaaaa\",");
	free(json);
}
END_TEST

/* --- the JSON document ------------------------------------------------- */

START_TEST(test_every_line_has_one_of_four_shapes)
{
	static const char *const shapes[] = {
		"^\\{$",                                        /* the document opens */
		"^\\}$",                                        /* and closes */
		"^(  )+\"[a-z_]+\": \\{$",                      /* a section opens */
		"^(  )+\\},?$",                                 /* and closes */
		("^(  )+\"[a-z_]+\": ([0-9]+|[0-9]+\\.[0-9]+|true|false|"
		 "\"([^\"\\\\[:cntrl:]]|\\\\[\"\\\\]|\\\\u[0-9a-f]{4})*\"),?$"),
	};
	struct dlc_stats_gauges gauges = sample_gauges();
	regex_t re[ARRAY_SIZE(shapes)];
	char *json, *s;
	int lines = 0;

	for (size_t i = 0; i < ARRAY_SIZE(shapes); i++)
		ck_assert_int_eq(regcomp(&re[i], shapes[i], REG_EXTENDED | REG_NOSUB), 0);
	gauges.source = "/odd \"name\"\\with\nnewline\t\x01 and \xff bytes";
	dlc_stats_set_error(&stats, "bad line \"x\"\r\n");
	dlc_stats_add(&stats, DLC_STAT_HITS, 7);
	json = render(&gauges);
	ck_assert_uint_gt(strlen(json), 0);
	ck_assert_int_eq(json[strlen(json) - 1], '\n');
	for (s = json; *s;) {
		char *end = strchr(s, '\n');
		bool matched = false;

		ck_assert_ptr_nonnull(end);     /* every line ends with a newline */
		*end = '\0';
		for (size_t i = 0; i < ARRAY_SIZE(shapes) && !matched; i++)
			matched = regexec(&re[i], s, 0, NULL, 0) == 0;
		ck_assert_msg(matched, "line of no known shape: [%s]", s);
		lines++;
		s = end + 1;
	}
	/* 4 identity + the counters + 4, remote_ops 9, cache 9, fuse 5,
	 * source_reads 5, memory 6, snapshot 5, lifetime (the counters + 2), the
	 * document's braces */
	ck_assert_int_eq(lines, 2 + 4 + DLC_STAT_COUNT + 4 + 9 + 9 + 5 + 5 + 6 + 5 + DLC_STAT_COUNT + 2);
	for (size_t i = 0; i < ARRAY_SIZE(shapes); i++)
		regfree(&re[i]);
	free(json);
}
END_TEST

START_TEST(test_every_key_once_per_object)
{
	static const struct {
		const char *section;
		const char *keys[56];
	} objects[] = {
		{ NULL, { "version", "source", "policy", "uptime_seconds", "hits", "misses",
			  "bytes_from_cache", "bytes_from_remote", "admissions", "evictions",
			  "bypasses", "corrupt", "cache_read_errors", "remote_errors", "prefetches", "prefetch_hits",
			  "chunk_reads", "chunk_admissions", "chunk_hits", "control_lines",
			  "control_errors", "interrupted", "expired", "hits_passthrough", "passthrough_declined",
			  "block_hits", "block_misses", "block_admissions", "readaheads",
			  "head_reads", "whole_block_opens", "unbuffered_reads", "ioctls", "warmed",
			  "shard_prefetches", "shard_prefetch_hits", "data_reads", "page_drops", "hit_ratio",
			  "last_error", "epoch",
			  "scored_samples",
			  "remote_ops", "cache", "fuse", "source_reads", "memory", "snapshot", "lifetime" } },
		{ "remote_ops", { "list", "stat", "open", "read", "close", "metadata", "errors" } },
		{ "cache", { "bytes", "entries", "capacity", "admission", "passthrough",
			     "passthrough_backing", "announced" } },
		{ "fuse", { "io_uring", "opens_io_uring", "opens_dev_fuse" } },
		{ "source_reads", { "threads", "running", "queued" } },
		{ "memory", { "limit", "used", "peak", "waits" } },
		{ "snapshot", { "entries", "bytes", "index_memory" } },
		{ "lifetime", { "hits", "misses", "bytes_from_cache", "bytes_from_remote",
				"admissions", "evictions", "bypasses", "corrupt", "cache_read_errors", "remote_errors",
				"prefetches", "prefetch_hits", "chunk_reads", "chunk_admissions", "chunk_hits",
				"control_lines", "control_errors", "interrupted", "expired", "hits_passthrough",
				"passthrough_declined", "block_hits", "block_misses", "block_admissions",
				"readaheads", "head_reads", "whole_block_opens", "unbuffered_reads", "ioctls",
				"warmed", "shard_prefetches", "shard_prefetch_hits", "data_reads",
				"page_drops" } },
	};
	struct dlc_stats_gauges gauges = sample_gauges();
	char *json = render(&gauges);

	for (size_t o = 0; o < ARRAY_SIZE(objects); o++) {
		const char *const *keys = objects[o].keys;
		int indent = objects[o].section ? 4 : 2;
		char current[64] = "";
		size_t count = 0;
		size_t next = 0;

		while (count < ARRAY_SIZE(objects[o].keys) && keys[count])
			count++;
		/* Each expected key once, in order; nothing else at this level. */
		for (const char *s = json; *s;) {
			const char *end = strchrnul(s, '\n');
			char text[512];
			char name[64];
			int spaces = 0;

			ck_assert_uint_lt((size_t)(end - s), sizeof(text));
			memcpy(text, s, (size_t)(end - s));
			text[end - s] = '\0';
			while (s[spaces] == ' ')
				spaces++;
			if (spaces == indent &&
			    strcmp(current, objects[o].section ? objects[o].section : "") == 0 &&
			    sscanf(s + spaces, "\"%63[a-z_]\"", name) == 1) {
				ck_assert_msg(next < count, "extra key %s", name);
				ck_assert_str_eq(name, keys[next]);
				next++;
			}
			opens_section(text, current, sizeof(current));
			if (spaces == 2 && s[2] == '}')
				current[0] = '\0';
			s = *end ? end + 1 : end;
		}
		ck_assert_uint_eq(next, count);
	}
	free(json);
}
END_TEST

START_TEST(test_strings_are_escaped)
{
	static const struct {
		const char *raw;
		const char *escaped;
	} cases[] = {
		{ "/data/imagenet", "\"/data/imagenet\"" },
		{ "", "\"\"" },
		{ "a\"b", "\"a\\\"b\"" },
		{ "back\\slash", "\"back\\\\slash\"" },
		{ "two\nlines\r\n", "\"two\\u000alines\\u000d\\u000a\"" },
		{ "\t\x01\x1f\x7f", "\"\\u0009\\u0001\\u001f\\u007f\"" },
		{ "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80\"" },
		{ "bad\xff\xfe", "\"bad\\ufffd\\ufffd\"" },
		{ "cut\xc3", "\"cut\\ufffd\"" },
		{ "overlong\xc0\xaf", "\"overlong\\ufffd\\ufffd\"" },
		{ "surrogate\xed\xa0\x80", "\"surrogate\\ufffd\\ufffd\\ufffd\"" },
		{ "host:/export/\"x\"\\", "\"host:/export/\\\"x\\\"\\\\\"" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct dlc_stats_gauges gauges = sample_gauges();
		char expected[256];
		char line[512];
		char *json;

		gauges.source = cases[i].raw;
		json = render(&gauges);
		snprintf(expected, sizeof(expected), "  \"source\": %s,", cases[i].escaped);
		ck_assert_ptr_nonnull(find_member(json, NULL, "source", line, sizeof(line)));
		ck_assert_str_eq(line, expected);
		free(json);

		dlc_stats_set_error(&stats, cases[i].raw);
		json = render(&gauges);
		snprintf(expected, sizeof(expected), "  \"last_error\": %s,", cases[i].escaped);
		ck_assert_ptr_nonnull(find_member(json, NULL, "last_error", line, sizeof(line)));
		ck_assert_str_eq(line, expected);
		free(json);
	}
}
END_TEST

START_TEST(test_values_and_derived_members)
{
	static const struct {
		uint64_t hits;
		uint64_t misses;
		const char *ratio_line;
	} ratios[] = {
		{ 0, 0, "  \"hit_ratio\": 0.0000," },
		{ 3, 1, "  \"hit_ratio\": 0.7500," },
		{ 1, 2, "  \"hit_ratio\": 0.3333," },
		{ 5, 0, "  \"hit_ratio\": 1.0000," },
	};
	struct dlc_stats_gauges gauges = sample_gauges();
	char line[512];
	char *json;

	for (size_t i = 0; i < ARRAY_SIZE(ratios); i++) {
		dlc_stats_destroy(&stats);
		dlc_stats_init(&stats);
		dlc_stats_add(&stats, DLC_STAT_HITS, ratios[i].hits);
		dlc_stats_add(&stats, DLC_STAT_MISSES, ratios[i].misses);
		json = render(&gauges);
		ck_assert_ptr_nonnull(find_member(json, NULL, "hit_ratio", line, sizeof(line)));
		ck_assert_str_eq(line, ratios[i].ratio_line);
		ck_assert_uint_eq(member_value(json, NULL, "hits"), ratios[i].hits);
		ck_assert_uint_eq(member_value(json, NULL, "misses"), ratios[i].misses);
		free(json);
	}

	json = render(&gauges);
	ck_assert_ptr_nonnull(find_member(json, NULL, "version", line, sizeof(line)));
	ck_assert_str_eq(line, "  \"version\": \"" DLC_VERSION "\",");
	ck_assert_ptr_nonnull(find_member(json, NULL, "uptime_seconds", line, sizeof(line)));
	ck_assert_str_eq(line, "  \"uptime_seconds\": 12.345,");
	ck_assert_ptr_nonnull(find_member(json, NULL, "policy", line, sizeof(line)));
	ck_assert_str_eq(line, "  \"policy\": \"freeze\",");
	ck_assert_uint_eq(member_value(json, "remote_ops", "list"), 3);
	ck_assert_uint_eq(member_value(json, "remote_ops", "close"), 7);
	ck_assert_uint_eq(member_value(json, "remote_ops", "metadata"), 3 + 4);
	ck_assert_uint_eq(member_value(json, "remote_ops", "errors"), 2);
	ck_assert_uint_eq(member_value(json, "cache", "bytes"), 1320702443);
	ck_assert_uint_eq(member_value(json, "cache", "capacity"), 200ULL << 30);
	ck_assert_ptr_nonnull(find_member(json, "cache", "admission", line, sizeof(line)));
	ck_assert_str_eq(line, "    \"admission\": true,");
	ck_assert_ptr_nonnull(find_member(json, "cache", "passthrough", line, sizeof(line)));
	ck_assert_str_eq(line, "    \"passthrough\": false,");
	ck_assert_uint_eq(member_value(json, "cache", "announced"), 4242);
	ck_assert_ptr_nonnull(find_member(json, "fuse", "io_uring", line, sizeof(line)));
	ck_assert_str_eq(line, "    \"io_uring\": true,");
	ck_assert_uint_eq(member_value(json, "fuse", "opens_io_uring"), 31);
	ck_assert_uint_eq(member_value(json, "fuse", "opens_dev_fuse"), 2);
	ck_assert_uint_eq(member_value(json, "snapshot", "entries"), 1281167);
	ck_assert_uint_eq(member_value(json, "snapshot", "index_memory"), 96 << 20);
	ck_assert_int_eq(json[strlen(json) - 2], '}');
	free(json);

	/* No gauges at all still renders a whole document. */
	json = render(NULL);
	ck_assert_ptr_nonnull(find_member(json, NULL, "source", line, sizeof(line)));
	ck_assert_str_eq(line, "  \"source\": \"\",");
	ck_assert_ptr_nonnull(find_member(json, "cache", "admission", line, sizeof(line)));
	ck_assert_str_eq(line, "    \"admission\": false,");
	free(json);
}
END_TEST

/* --- lifetime totals --------------------------------------------------- */

START_TEST(test_totals_round_trip)
{
	struct dlc_stats restored;
	char *text, *again;

	for (int i = 0; i < DLC_STAT_COUNT; i++) {
		stats.lifetime_base[i] = 1000 * (uint64_t)i;
		dlc_stats_add(&stats, (enum dlc_stat)i, (uint64_t)i + 1);
	}
	dlc_stats_add(&stats, DLC_STAT_BYTES_FROM_REMOTE, UINT64_MAX / 2);
	text = dlc_stats_totals_encode(&stats);
	ck_assert_ptr_nonnull(text);
	ck_assert_str_eq(strstr(text, "hits "), text);
	ck_assert_ptr_nonnull(strstr(text, "\nmisses 1002\n"));
	ck_assert_ptr_nonnull(strstr(text, "\ncontrol_errors 16017\n"));

	dlc_stats_init(&restored);
	ck_assert_int_eq(dlc_stats_totals_decode(&restored, text), 0);
	for (int i = 0; i < DLC_STAT_COUNT; i++) {
		ck_assert_uint_eq(restored.lifetime_base[i],
				  stats.lifetime_base[i] + dlc_stats_get(&stats, (enum dlc_stat)i));
		ck_assert_uint_eq(dlc_stats_get(&restored, (enum dlc_stat)i), 0);
	}
	again = dlc_stats_totals_encode(&restored);
	ck_assert_str_eq(again, text);
	free(again);
	free(text);
	dlc_stats_destroy(&restored);
}
END_TEST

START_TEST(test_lifetime_is_base_plus_current)
{
	struct dlc_stats_gauges gauges = sample_gauges();
	char *json;

	ck_assert_int_eq(dlc_stats_totals_decode(&stats, "hits 100\nmisses 50\nevictions 7\n"), 0);
	dlc_stats_add(&stats, DLC_STAT_HITS, 5);
	dlc_stats_add(&stats, DLC_STAT_CORRUPT, 2);
	json = render(&gauges);
	ck_assert_uint_eq(member_value(json, NULL, "hits"), 5);
	ck_assert_uint_eq(member_value(json, "lifetime", "hits"), 105);
	ck_assert_uint_eq(member_value(json, "lifetime", "misses"), 50);
	ck_assert_uint_eq(member_value(json, "lifetime", "evictions"), 7);
	ck_assert_uint_eq(member_value(json, "lifetime", "corrupt"), 2);
	ck_assert_uint_eq(member_value(json, "lifetime", "control_errors"), 0);
	free(json);
}
END_TEST

START_TEST(test_totals_decode_tolerates_and_rejects)
{
	static const struct {
		const char *text;
		int rc;
		uint64_t hits;      /* lifetime_base[hits] afterwards */
	} cases[] = {
		{ "", 0, 0 },
		{ "hits 1", 0, 1 },                      /* no final newline */
		{ "\nhits 2\n\n", 0, 2 },                /* blank lines */
		{ "future_counter 9\nhits 3\n", 0, 3 },  /* unknown names ignored */
		{ "hits 4\nhits 5\n", 0, 5 },            /* the last one wins */
		{ "hits 18446744073709551615\n", 0, UINT64_MAX },
		{ "hits 18446744073709551616\n", -EINVAL, 77 },
		{ "hits\n", -EINVAL, 77 },
		{ "hits \n", -EINVAL, 77 },
		{ " 5\n", -EINVAL, 77 },
		{ "hits -1\n", -EINVAL, 77 },
		{ "hits 1x\n", -EINVAL, 77 },
		{ "hits 1 2\n", -EINVAL, 77 },
		{ "hits 1\ngarbage\n", -EINVAL, 77 },    /* nothing applied */
		{ "hits=1\n", -EINVAL, 77 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		stats.lifetime_base[DLC_STAT_HITS] = 77;
		stats.lifetime_base[DLC_STAT_MISSES] = 77;
		ck_assert_msg(dlc_stats_totals_decode(&stats, cases[i].text) == cases[i].rc,
			      "case %zu", i);
		ck_assert_uint_eq(stats.lifetime_base[DLC_STAT_HITS], cases[i].hits);
		ck_assert_uint_eq(stats.lifetime_base[DLC_STAT_MISSES], cases[i].rc ? 77 : 0);
	}
	ck_assert_int_eq(dlc_stats_totals_decode(&stats, NULL), -EINVAL);
}
END_TEST

/* --- print_human ------------------------------------------------------- */

static char *print_human(const char *json, int *rc)
{
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);

	ck_assert_ptr_nonnull(f);
	*rc = dlc_stats_print_human(json, f);
	ck_assert_int_eq(fclose(f), 0);
	return text;
}

START_TEST(test_print_human_of_rendered_document)
{
	struct dlc_stats_gauges gauges = sample_gauges();
	const char *hits, *bytes;
	char *json, *text;
	int rc;

	gauges.source = "/odd\nname\x1b[31m";
	dlc_stats_add(&stats, DLC_STAT_HITS, 3);
	dlc_stats_add(&stats, DLC_STAT_MISSES, 1);
	dlc_stats_add(&stats, DLC_STAT_BYTES_FROM_CACHE, 512);
	json = render(&gauges);
	text = print_human(json, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_nonnull(strstr(text, "hit_ratio"));
	ck_assert_ptr_nonnull(strstr(text, "75.00 %"));
	ck_assert_ptr_nonnull(strstr(text, "1.23 GiB (1320702443 bytes)"));
	ck_assert_ptr_nonnull(strstr(text, "200.00 GiB (214748364800 bytes)"));
	ck_assert_ptr_nonnull(strstr(text, "96.00 MiB (100663296 bytes)"));
	ck_assert_ptr_nonnull(strstr(text, "512 bytes"));
	ck_assert_ptr_nonnull(strstr(text, "\nremote_ops\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nlifetime\n"));
	ck_assert_ptr_nonnull(strstr(text, "yes"));
	ck_assert_ptr_nonnull(strstr(text, "(none)"));
	/* A control byte in the source stays an escape on the terminal. */
	ck_assert_ptr_null(strchr(text, '\x1b'));
	ck_assert_ptr_nonnull(strstr(text, "/odd\\u000aname\\u001b[31m"));
	/* Values line up in one column, in and out of sections. */
	hits = strstr(text, "\nhits ");
	bytes = strstr(text, "\n  bytes ");
	ck_assert_ptr_nonnull(hits);
	ck_assert_ptr_nonnull(bytes);
	ck_assert_uint_eq(value_column(hits + 1), value_column(bytes + 1));
	free(text);
	free(json);
}
END_TEST

START_TEST(test_print_human_rejects_other_text)
{
	static const char *const bad[] = {
		"",
		"{}\n",
		"hits 5\nmisses 3\n",                   /* totals, not .stats */
		"{\n  \"lifetime\": {\n    \"hits\": 1\n  }\n}\n",   /* hits only nested */
		"not json at all",
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		int rc;
		char *text = print_human(bad[i], &rc);

		ck_assert_int_eq(rc, -EINVAL);
		ck_assert_str_eq(text, "");     /* nothing printed */
		free(text);
	}
}
END_TEST

static Suite *stats_suite(void)
{
	Suite *s = suite_create("stats");
	TCase *tc;

	tc = tcase_create("counters");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_counter_names_in_order);
	tcase_add_test(tc, test_counters_start_at_zero_and_add);
	tcase_add_test(tc, test_counters_lose_nothing_across_threads);
	tcase_add_test(tc, test_last_error_is_kept_and_truncated);
	suite_add_tcase(s, tc);

	tc = tcase_create("json");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_every_line_has_one_of_four_shapes);
	tcase_add_test(tc, test_every_key_once_per_object);
	tcase_add_test(tc, test_strings_are_escaped);
	tcase_add_test(tc, test_values_and_derived_members);
	suite_add_tcase(s, tc);

	tc = tcase_create("totals");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_totals_round_trip);
	tcase_add_test(tc, test_lifetime_is_base_plus_current);
	tcase_add_test(tc, test_totals_decode_tolerates_and_rejects);
	suite_add_tcase(s, tc);

	tc = tcase_create("human");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_print_human_of_rendered_document);
	tcase_add_test(tc, test_print_human_rejects_other_text);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(stats_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
