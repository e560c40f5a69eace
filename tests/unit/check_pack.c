/*
 * check_pack.c - packed datasets: the packed snapshot layout (written with
 * the snapshot writer, loaded, queried, refused when damaged).
 *
 * Every test gets a fresh temporary directory; the files it writes are
 * checked against the rules a mount relies on: every member's bytes are at
 * its recorded offset in its chunk, with its recorded xxh3.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "dlcache/snapshot.h"

static char tmp_dir[PATH_MAX];

static void format_path(char *out, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void format_path(char *out, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, PATH_MAX, fmt, ap);
	va_end(ap);
	ck_assert(n > 0 && n < PATH_MAX);
}

static void run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void run(const char *fmt, ...)
{
	char command[4 * PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(command, sizeof(command), fmt, ap);
	va_end(ap);
	ck_assert_msg(system(command) == 0, "%s failed", command);
}

static void setup(void)
{
	strcpy(tmp_dir, "/tmp/check_pack.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp_dir));
}

static void teardown(void)
{
	run("rm -rf '%s'", tmp_dir);
}

static struct dlc_backend_attr attr_of(uint32_t mode, uint64_t size)
{
	return (struct dlc_backend_attr){
		.mode = mode, .uid = 1000, .gid = 1000, .size = size,
		.mtime_sec = 1700000000, .mtime_nsec = 42,
	};
}

/*
 * The packed snapshot of a small tree, written by hand:
 *   1 /  2 a.txt (chunk 0 @ 512, 6 bytes)  3 dir/  4 link -> a.txt
 *   5 dir/b.bin (chunk 1 @ 1024, 3 bytes)
 */
static void write_packed(const char *file)
{
	struct dlc_snapshot_writer *writer;
	char *cause = NULL;
	const struct dlc_snapshot_row rows[] = {
		{ .parent = 1, .name = "", .attr = attr_of(S_IFDIR | 0755, 4096) },
		{ .parent = 1, .name = "a.txt", .attr = attr_of(S_IFREG | 0644, 6),
		  .member = { .chunk = 0, .offset = 512, .hash = XXH3_64bits("hello\n", 6) } },
		{ .parent = 1, .name = "dir", .attr = attr_of(S_IFDIR | 0755, 4096) },
		{ .parent = 1, .name = "link", .attr = attr_of(S_IFLNK | 0777, 5),
		  .target = "a.txt" },
		{ .parent = 3, .name = "b.bin", .attr = attr_of(S_IFREG | 0600, 3),
		  .member = { .chunk = 1, .offset = 1024, .hash = 0xfedcba9876543210ULL } },
	};

	ck_assert_int_eq(dlc_snapshot_writer_open(file, "/data/packed", true, &writer, &cause), 0);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		ck_assert_int_eq(dlc_snapshot_writer_add(writer, &rows[i], &cause), 0);
	ck_assert_int_eq(dlc_snapshot_writer_add_chunk(writer, "chunk-000000.tar", 10240, &cause), 0);
	ck_assert_int_eq(dlc_snapshot_writer_add_chunk(writer, "sub/chunk-000001.tar", 2048, &cause), 0);
	ck_assert_int_eq(dlc_snapshot_writer_commit(writer, NULL, &cause), 0);
	ck_assert_ptr_null(cause);
}

START_TEST(test_packed_snapshot_round_trips)
{
	struct dlc_snapshot *snap = NULL;
	struct dlc_snapshot_member member;
	char file[PATH_MAX], tmp[PATH_MAX];
	char *cause = NULL, *text = NULL;
	size_t len = 0;

	format_path(file, "%s/packed.snapshot", tmp_dir);
	write_packed(file);
	format_path(tmp, "%s.tmp", file);
	ck_assert_int_eq(access(tmp, F_OK), -1);
	ck_assert(dlc_snapshot_file_is_packed(file));
	ck_assert_int_eq(dlc_snapshot_load(file, &snap, &cause), 0);
	ck_assert(dlc_snapshot_packed(snap));
	ck_assert_uint_eq(dlc_snapshot_count(snap), 5);
	ck_assert_uint_eq(dlc_snapshot_chunk_count(snap), 2);
	ck_assert_str_eq(dlc_snapshot_chunk_path(snap, 1), "sub/chunk-000001.tar");
	ck_assert_uint_eq(dlc_snapshot_chunk_size(snap, 0), 10240);
	ck_assert_ptr_null(dlc_snapshot_chunk_path(snap, 2));
	ck_assert_uint_eq(dlc_snapshot_chunk_size(snap, 2), 0);

	ck_assert_int_eq(dlc_snapshot_chunk(snap, 2, &member), 0);
	ck_assert_uint_eq(member.chunk, 0);
	ck_assert_str_eq(member.chunk_path, "chunk-000000.tar");
	ck_assert_uint_eq(member.offset, 512);
	ck_assert_uint_eq(member.hash, XXH3_64bits("hello\n", 6));
	ck_assert_int_eq(dlc_snapshot_chunk(snap, 5, &member), 0);
	ck_assert_uint_eq(member.chunk, 1);
	ck_assert_uint_eq(member.offset, 1024);
	ck_assert_uint_eq(member.hash, 0xfedcba9876543210ULL);   /* above INT64_MAX */
	ck_assert_int_eq(dlc_snapshot_chunk(snap, 1, &member), -ENOENT);   /* a directory */
	ck_assert_int_eq(dlc_snapshot_chunk(snap, 4, &member), -ENOENT);   /* a symlink */
	ck_assert_int_eq(dlc_snapshot_chunk(snap, 6, &member), -ENOENT);   /* out of range */
	ck_assert_str_eq(dlc_snapshot_link_target(snap, 4), "a.txt");

	ck_assert_int_eq(dlc_snapshot_render_chunks(snap, &text, &len), 0);
	ck_assert_uint_eq(len, strlen("0\ta.txt\n1\tdir/b.bin\n"));
	ck_assert(memcmp(text, "0\ta.txt\n1\tdir/b.bin\n", len) == 0);
	free(text);
	dlc_snapshot_free(snap);
}
END_TEST

/* Applies sql to a copy of a packed snapshot and expects load to refuse it. */
static const struct {
	const char *sql;
	const char *phrase;
} damages[] = {
	{ "UPDATE entries SET chunk = 2 WHERE ino = 2", "outside its chunk" },
	{ "UPDATE entries SET chunk = -1 WHERE ino = 2", "outside its chunk" },
	{ "UPDATE entries SET data_offset = 10236 WHERE ino = 2", "outside its chunk" },
	{ "UPDATE entries SET data_offset = -5 WHERE ino = 2", "outside its chunk" },
	{ "UPDATE entries SET hash = NULL WHERE ino = 5", "no chunk, offset or hash" },
	{ "UPDATE entries SET chunk = 'x' WHERE ino = 5", "no chunk, offset or hash" },
	{ "UPDATE chunks SET id = 5 WHERE id = 1", "out of order" },
	{ "UPDATE chunks SET path = '../x.tar' WHERE id = 1", "invalid path" },
	{ "UPDATE chunks SET path = '/abs.tar' WHERE id = 1", "invalid path" },
	{ "UPDATE chunks SET path = 'a//b.tar' WHERE id = 1", "invalid path" },
	{ "UPDATE chunks SET size = -1 WHERE id = 0", "invalid size" },
	{ "DROP TABLE chunks", "no such table" },
	{ "UPDATE meta SET value = 1 WHERE key = 'format'", "layout does not match" },
};

START_TEST(test_damaged_packed_snapshot_is_refused)
{
	struct dlc_snapshot *snap = NULL;
	char file[PATH_MAX], copy[PATH_MAX];
	char *cause = NULL, *error = NULL;
	sqlite3 *db;

	format_path(file, "%s/packed.snapshot", tmp_dir);
	format_path(copy, "%s/damaged.snapshot", tmp_dir);
	write_packed(file);
	run("cp '%s' '%s'", file, copy);
	ck_assert_int_eq(sqlite3_open(copy, &db), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(db, damages[_i].sql, NULL, NULL, &error) == SQLITE_OK, "%s: %s",
		      damages[_i].sql, error ? error : "");
	sqlite3_close(db);
	ck_assert_int_eq(dlc_snapshot_load(copy, &snap, &cause), -EINVAL);
	ck_assert_ptr_null(snap);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, damages[_i].phrase), "cause '%s' lacks '%s'", cause,
		      damages[_i].phrase);
	ck_assert_msg(strstr(cause, "rebuild it with dlcache pack or dlcache snapshot --tar"),
		      "cause '%s' lacks the fix", cause);
	free(cause);
}
END_TEST

START_TEST(test_tree_writer_has_no_chunks)
{
	struct dlc_snapshot_writer *writer;
	struct dlc_snapshot *snap = NULL;
	char file[PATH_MAX];
	char *cause = NULL;
	uint64_t entries = 0;
	const struct dlc_snapshot_row root = { .parent = 1, .name = "",
					       .attr = attr_of(S_IFDIR | 0755, 0) };

	format_path(file, "%s/tree.snapshot", tmp_dir);
	ck_assert_int_eq(dlc_snapshot_writer_open(file, "/data", false, &writer, &cause), 0);
	ck_assert_int_eq(dlc_snapshot_writer_add(writer, &root, &cause), 0);
	ck_assert_int_eq(dlc_snapshot_writer_add_chunk(writer, "x.tar", 1, &cause), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cause, "not a packed snapshot"));
	free(cause);
	cause = NULL;
	ck_assert_int_eq(dlc_snapshot_writer_commit(writer, &entries, &cause), 0);
	ck_assert_uint_eq(entries, 1);
	ck_assert(!dlc_snapshot_file_is_packed(file));
	ck_assert_int_eq(dlc_snapshot_load(file, &snap, &cause), 0);
	ck_assert(!dlc_snapshot_packed(snap));
	dlc_snapshot_free(snap);
}
END_TEST

START_TEST(test_aborted_writer_leaves_nothing)
{
	struct dlc_snapshot_writer *writer;
	char file[PATH_MAX], tmp[PATH_MAX];
	char *cause = NULL;

	format_path(file, "%s/never.snapshot", tmp_dir);
	format_path(tmp, "%s.tmp", file);
	ck_assert_int_eq(dlc_snapshot_writer_open(file, "/data", true, &writer, &cause), 0);
	ck_assert_int_eq(access(tmp, F_OK), 0);
	dlc_snapshot_writer_abort(writer);
	ck_assert_int_eq(access(tmp, F_OK), -1);
	ck_assert_int_eq(access(file, F_OK), -1);
}
END_TEST

static Suite *pack_suite(void)
{
	Suite *s = suite_create("pack");
	TCase *tc;

	tc = tcase_create("format");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_packed_snapshot_round_trips);
	tcase_add_loop_test(tc, test_damaged_packed_snapshot_is_refused, 0,
			    (int)(sizeof(damages) / sizeof(damages[0])));
	tcase_add_test(tc, test_tree_writer_has_no_chunks);
	tcase_add_test(tc, test_aborted_writer_leaves_nothing);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *runner = srunner_create(pack_suite());
	int failed;

	srunner_run_all(runner, CK_ENV);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
