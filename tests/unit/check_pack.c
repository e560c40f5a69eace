/*
 * check_pack.c - packed datasets: the packed snapshot layout (written with
 * the snapshot writer, loaded, queried, refused when damaged) and dlcache
 * pack (offsets and hashes checked against the chunks it wrote, the chunk
 * rules, what it refuses, what it leaves when stopped), the index of shards
 * made by GNU tar (dlcache snapshot --tar: offsets checked against the
 * shards, both layouts, what it refuses), and the chunk reader of the read
 * path (checked reads, damage, whole-chunk passes, threads).
 *
 * Every test gets a fresh temporary directory; the files it writes are
 * checked against the rules a mount relies on: every member's bytes are at
 * its recorded offset in its chunk, with its recorded xxh3.
 */
#include <check.h>
#include <pthread.h>
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

#include "dlcache/cache.h"
#include "dlcache/chunks.h"
#include "dlcache/fetch.h"
#include "dlcache/pack.h"
#include "dlcache/snapshot.h"
#include "dlcache/store.h"

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

	ck_assert_int_eq(dlc_snapshot_render_chunks(snap, NULL, 0, &text, &len), 0);
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

/* ------------------------------------------------------------------------
 * dlcache pack.
 */

#define CHUNK_SIZE (64 * 1024)
#define BIG_SIZE (200 * 1024)   /* larger than a chunk: a chunk of its own */

static void write_file(const char *dir, const char *relative, size_t size, unsigned seed)
{
	char path[PATH_MAX];
	FILE *f;

	format_path(path, "%s/%s", dir, relative);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	for (size_t i = 0; i < size; i++)
		fputc((int)((i * 131 + seed * 7 + (i >> 8)) & 0xff), f);
	ck_assert_int_eq(fclose(f), 0);
}

static void make_dir(const char *dir, const char *relative)
{
	char path[PATH_MAX];

	format_path(path, "%s/%s", dir, relative);
	ck_assert_int_eq(mkdir(path, 0755), 0);
}

/* A tree with classes of small files, odd names, a long name, a link, a big file. */
static void make_source(const char *src)
{
	char name[PATH_MAX], path[PATH_MAX];

	ck_assert_int_eq(mkdir(src, 0755), 0);
	make_dir(src, "train");
	for (int c = 0; c < 4; c++) {
		format_path(name, "train/class %d", c);
		make_dir(src, name);
		for (int i = 0; i < 12; i++) {
			format_path(name, "train/class %d/sample_%02d.JPEG", c, i);
			write_file(src, name, (size_t)(1000 + 997 * i + 13 * c), (unsigned)(c * 100 + i));
		}
	}
	make_dir(src, "caf\xc3\xa9 \xe2\x98\x95");
	write_file(src, "caf\xc3\xa9 \xe2\x98\x95/na\xc3\xafve file.txt", 17, 1);
	format_path(name, "train/%0150d.bin", 7);      /* too long for a ustar name */
	write_file(src, name, 333, 2);
	write_file(src, "empty.dat", 0, 3);
	write_file(src, "big.bin", BIG_SIZE, 4);
	make_dir(src, "empty dir");
	format_path(path, "%s/link", src);
	ck_assert_int_eq(symlink("train/class 0/sample_00.JPEG", path), 0);
}

static unsigned char *read_whole(const char *path, size_t *size)
{
	struct stat st;
	unsigned char *data;
	int fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	data = malloc((size_t)st.st_size + 1);
	ck_assert_ptr_nonnull(data);
	ck_assert_int_eq(pread(fd, data, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*size = (size_t)st.st_size;
	return data;
}

static void pack_ok(const char *src, const char *dst, struct dlc_pack_result *result)
{
	struct dlc_pack_options options = { .chunk_size = CHUNK_SIZE };
	char *cause = NULL;
	int rc = dlc_pack(src, dst, &options, result, &cause);

	ck_assert_msg(rc == 0, "pack: %d %s", rc, cause ? cause : "");
	ck_assert_ptr_null(cause);
}

START_TEST(test_pack_puts_every_file_at_its_recorded_offset)
{
	struct dlc_pack_result result;
	struct dlc_snapshot *snap = NULL;
	char src[PATH_MAX], dst[PATH_MAX], file[PATH_MAX], path[PATH_MAX];
	char *cause = NULL;
	uint32_t last_chunk = 0, big_chunk = UINT32_MAX;
	uint64_t last_offset = 0, files = 0;

	format_path(src, "%s/src", tmp_dir);
	format_path(dst, "%s/packed", tmp_dir);
	make_source(src);
	pack_ok(src, dst, &result);
	format_path(file, "%s/%s", dst, DLC_SNAPSHOT_PACKED_NAME);
	ck_assert_int_eq(dlc_snapshot_load(file, &snap, &cause), 0);
	ck_assert(dlc_snapshot_packed(snap));
	ck_assert_uint_eq(result.entries, dlc_snapshot_count(snap));
	ck_assert_uint_eq(result.chunks, dlc_snapshot_chunk_count(snap));
	ck_assert_uint_gt(result.chunks, 3);
	ck_assert_str_eq(dlc_snapshot_source(snap), dst);

	for (uint64_t ino = 1; ino <= dlc_snapshot_count(snap); ino++) {
		const struct dlc_node *node = dlc_snapshot_node(snap, ino);
		struct dlc_snapshot_member member;
		unsigned char *chunk, *original;
		size_t chunk_len, original_len;

		if (!S_ISREG(node->mode))
			continue;
		files++;
		ck_assert_int_eq(dlc_snapshot_chunk(snap, ino, &member), 0);
		/* Members follow inode order: (chunk, offset) only grows. */
		ck_assert(member.chunk > last_chunk ||
			  (member.chunk == last_chunk && member.offset >= last_offset));
		last_chunk = member.chunk;
		last_offset = member.offset + node->size;
		ck_assert_int_eq(dlc_snapshot_path(snap, ino, path, sizeof(path)), 0);
		format_path(file, "%s/%s", src, path);
		original = read_whole(file, &original_len);
		ck_assert_uint_eq(original_len, node->size);
		format_path(file, "%s/%s", dst, member.chunk_path);
		chunk = read_whole(file, &chunk_len);
		ck_assert_uint_eq(chunk_len, dlc_snapshot_chunk_size(snap, member.chunk));
		ck_assert_uint_le(member.offset + node->size, chunk_len);
		ck_assert_msg(memcmp(chunk + member.offset, original, node->size) == 0,
			      "%s is not at offset %llu of %s", path,
			      (unsigned long long)member.offset, member.chunk_path);
		ck_assert_uint_eq(member.hash, XXH3_64bits(original, original_len));
		if (strcmp(path, "big.bin") == 0)
			big_chunk = member.chunk;
		free(chunk);
		free(original);
	}
	ck_assert_uint_eq(files, result.files);
	ck_assert_uint_eq(files, 4 * 12 + 4);
	/* The big file has a chunk of its own; every other chunk stays within the size. */
	ck_assert_uint_ne(big_chunk, UINT32_MAX);
	for (uint64_t ino = 1; ino <= dlc_snapshot_count(snap); ino++) {
		struct dlc_snapshot_member member;

		if (dlc_snapshot_chunk(snap, ino, &member) == 0 && member.chunk == big_chunk)
			ck_assert_uint_eq(dlc_snapshot_node(snap, ino)->size, BIG_SIZE);
	}
	for (uint32_t c = 0; c < dlc_snapshot_chunk_count(snap); c++) {
		if (c != big_chunk)
			ck_assert_uint_le(dlc_snapshot_chunk_size(snap, c), CHUNK_SIZE);
	}
	dlc_snapshot_free(snap);
}
END_TEST

/* The mount reads names and attributes from the snapshot: the same as a crawl's. */
START_TEST(test_packed_tree_is_the_crawled_tree)
{
	struct dlc_backend *backend = NULL;
	struct dlc_snapshot *packed = NULL, *crawled = NULL;
	char src[PATH_MAX], dst[PATH_MAX], file[PATH_MAX];
	char *cause = NULL;

	format_path(src, "%s/src", tmp_dir);
	format_path(dst, "%s/packed", tmp_dir);
	make_source(src);
	pack_ok(src, dst, NULL);
	format_path(file, "%s/%s", dst, DLC_SNAPSHOT_PACKED_NAME);
	ck_assert_int_eq(dlc_snapshot_load(file, &packed, &cause), 0);
	format_path(file, "%s/tree.db", tmp_dir);
	ck_assert_int_eq(dlc_backend_create(src, NULL, &backend, &cause), 0);
	ck_assert_int_eq(dlc_snapshot_build(backend, file, NULL, NULL, &cause), 0);
	ck_assert_int_eq(dlc_snapshot_load(file, &crawled, &cause), 0);
	ck_assert_uint_eq(dlc_snapshot_id(packed), dlc_snapshot_id(crawled));
	dlc_snapshot_free(packed);
	dlc_snapshot_free(crawled);
	dlc_backend_destroy(backend);
}
END_TEST

START_TEST(test_pack_of_an_empty_tree)
{
	struct dlc_pack_result result;
	struct dlc_snapshot *snap = NULL;
	char src[PATH_MAX], dst[PATH_MAX], file[PATH_MAX];
	char *cause = NULL, *text = NULL;
	size_t len = 1;

	format_path(src, "%s/src", tmp_dir);
	format_path(dst, "%s/packed", tmp_dir);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	pack_ok(src, dst, &result);
	ck_assert_uint_eq(result.chunks, 0);
	ck_assert_uint_eq(result.files, 0);
	format_path(file, "%s/%s", dst, DLC_SNAPSHOT_PACKED_NAME);
	ck_assert_int_eq(dlc_snapshot_load(file, &snap, &cause), 0);
	ck_assert(dlc_snapshot_packed(snap));
	ck_assert_uint_eq(dlc_snapshot_count(snap), 1);
	ck_assert_int_eq(dlc_snapshot_render_chunks(snap, NULL, 0, &text, &len), 0);
	ck_assert_uint_eq(len, 0);
	dlc_snapshot_free(snap);
}
END_TEST

static void expect_pack_error(const char *src, const char *dst, int expected, const char *phrase)
{
	struct dlc_pack_options options = { .chunk_size = CHUNK_SIZE };
	char *cause = NULL;

	ck_assert_int_eq(dlc_pack(src, dst, &options, NULL, &cause), expected);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, phrase), "cause '%s' lacks '%s'", cause, phrase);
	free(cause);
}

START_TEST(test_pack_refuses_what_it_would_damage)
{
	char src[PATH_MAX], dst[PATH_MAX], path[PATH_MAX];

	format_path(src, "%s/src", tmp_dir);
	format_path(dst, "%s/packed", tmp_dir);
	make_source(src);
	format_path(path, "%s/inside", src);
	expect_pack_error(src, path, -EINVAL, "inside the source");
	ck_assert_int_eq(access(path, F_OK), -1);     /* not even created */
	expect_pack_error(src, src, -EINVAL, "inside the source");
	expect_pack_error(src, tmp_dir, -EINVAL, "the source");
	format_path(path, "%s/missing", tmp_dir);
	expect_pack_error(path, dst, -ENOENT, "cannot be opened");

	ck_assert_int_eq(mkdir(dst, 0755), 0);
	write_file(dst, "notes.txt", 3, 0);
	expect_pack_error(src, dst, -ENOTEMPTY, "is not empty (it holds 'notes.txt')");
	format_path(path, "%s/notes.txt", dst);
	ck_assert_int_eq(access(path, F_OK), 0);       /* nothing of it was removed */
	unlink(path);
	pack_ok(src, dst, NULL);
	expect_pack_error(src, dst, -EEXIST, "holds a finished pack already");
}
END_TEST

/* What a killed pack leaves (temporaries, even renamed chunks, never the
 * snapshot) does not stop the next pack into the same directory. */
START_TEST(test_pack_replaces_what_an_interrupted_pack_left)
{
	struct dlc_pack_result result;
	char src[PATH_MAX], dst[PATH_MAX];

	format_path(src, "%s/src", tmp_dir);
	format_path(dst, "%s/packed", tmp_dir);
	make_source(src);
	ck_assert_int_eq(mkdir(dst, 0755), 0);
	write_file(dst, "chunk-000000.tar.tmp", 100, 0);
	write_file(dst, "chunk-000007.tar", 100, 0);
	write_file(dst, "dlcache.snapshot.tmp", 100, 0);
	write_file(dst, ".dlcache-crawl.db", 100, 0);
	pack_ok(src, dst, &result);
	format_path(src, "%s/chunk-000007.tar", dst);
	ck_assert_int_eq(access(src, F_OK), result.chunks > 7 ? 0 : -1);
	format_path(src, "%s/dlcache.snapshot.tmp", dst);
	ck_assert_int_eq(access(src, F_OK), -1);
}
END_TEST

START_TEST(test_stopped_pack_leaves_nothing)
{
	static volatile sig_atomic_t stop = 1;
	struct dlc_pack_options options = { .chunk_size = CHUNK_SIZE, .stop = &stop };
	char src[PATH_MAX], dst[PATH_MAX], command[3 * PATH_MAX];
	char *cause = NULL;

	format_path(src, "%s/src", tmp_dir);
	format_path(dst, "%s/packed", tmp_dir);
	make_source(src);
	ck_assert_int_eq(dlc_pack(src, dst, &options, NULL, &cause), -EINTR);
	ck_assert_ptr_nonnull(strstr(cause, "interrupted"));
	free(cause);
	snprintf(command, sizeof(command), "test -z \"$(ls -A '%s')\"", dst);
	ck_assert_msg(system(command) == 0, "the stopped pack left files in %s", dst);
}
END_TEST

/* ------------------------------------------------------------------------
 * The chunk reader.
 */

struct packed_fixture {
	char src[PATH_MAX];
	char dst[PATH_MAX];
	struct dlc_snapshot *snap;
	struct dlc_backend *backend;
	struct dlc_stats stats;
};

static void packed_open(struct packed_fixture *f)
{
	char file[PATH_MAX];
	char *cause = NULL;

	format_path(f->src, "%s/src", tmp_dir);
	format_path(f->dst, "%s/packed", tmp_dir);
	make_source(f->src);
	pack_ok(f->src, f->dst, NULL);
	format_path(file, "%s/%s", f->dst, DLC_SNAPSHOT_PACKED_NAME);
	ck_assert_int_eq(dlc_snapshot_load(file, &f->snap, &cause), 0);
	ck_assert_int_eq(dlc_backend_create(f->dst, NULL, &f->backend, &cause), 0);
	dlc_stats_init(&f->stats);
}

static void packed_close(struct packed_fixture *f)
{
	dlc_snapshot_free(f->snap);
	dlc_backend_destroy(f->backend);
	dlc_stats_destroy(&f->stats);
}

/* The source bytes of ino, malloc'd. */
static unsigned char *original_of(struct packed_fixture *f, uint64_t ino)
{
	char path[PATH_MAX], file[PATH_MAX];
	size_t len;

	ck_assert_int_eq(dlc_snapshot_path(f->snap, ino, path, sizeof(path)), 0);
	format_path(file, "%s/%s", f->src, path);
	return read_whole(file, &len);
}

static uint64_t ino_of(struct packed_fixture *f, const char *path)
{
	uint64_t ino = dlc_snapshot_resolve(f->snap, path);

	ck_assert_uint_ne(ino, 0);
	return ino;
}

START_TEST(test_chunks_read_every_file_with_one_open_per_chunk)
{
	struct packed_fixture f;
	struct dlc_chunks *chunks;
	uint64_t files = 0;

	packed_open(&f);
	ck_assert_int_eq(dlc_chunks_create(f.backend, f.snap, &f.stats, false, UINT64_MAX, &chunks), 0);
	for (int round = 0; round < 2; round++) {
		for (uint64_t ino = 1; ino <= dlc_snapshot_count(f.snap); ino++) {
			const struct dlc_node *node = dlc_snapshot_node(f.snap, ino);
			unsigned char *buf, *original;

			if (!S_ISREG(node->mode)) {
				ck_assert_int_eq(dlc_chunks_read_file(chunks, (uint32_t)ino, NULL, 0), -ENOENT);
				continue;
			}
			buf = malloc(node->size + 1);
			original = original_of(&f, ino);
			ck_assert_int_eq(dlc_chunks_read_file(chunks, (uint32_t)ino, buf, node->size), 0);
			ck_assert(memcmp(buf, original, node->size) == 0);
			free(buf);
			free(original);
			files++;
		}
	}
	ck_assert_uint_eq(atomic_load(&f.backend->calls[DLC_BACKEND_OPEN]),
			  dlc_snapshot_chunk_count(f.snap));
	ck_assert_uint_eq(dlc_stats_get(&f.stats, DLC_STAT_REMOTE_ERRORS), 0);
	ck_assert_uint_gt(files, 0);
	dlc_chunks_free(chunks);
	ck_assert_uint_eq(atomic_load(&f.backend->calls[DLC_BACKEND_CLOSE]),
			  dlc_snapshot_chunk_count(f.snap));
	packed_close(&f);
}
END_TEST

START_TEST(test_chunks_range_reads_stop_at_the_file)
{
	struct packed_fixture f;
	struct dlc_chunks *chunks;
	unsigned char buf[4096], *original;
	uint64_t ino;

	packed_open(&f);
	ck_assert_int_eq(dlc_chunks_create(f.backend, f.snap, &f.stats, false, UINT64_MAX, &chunks), 0);
	ino = ino_of(&f, "big.bin");
	original = original_of(&f, ino);
	ck_assert_int_eq(dlc_chunks_read_range(chunks, (uint32_t)ino, buf, 100, 5000), 100);
	ck_assert(memcmp(buf, original + 5000, 100) == 0);
	ck_assert_int_eq(dlc_chunks_read_range(chunks, (uint32_t)ino, buf, sizeof(buf), BIG_SIZE - 10), 10);
	ck_assert(memcmp(buf, original + BIG_SIZE - 10, 10) == 0);
	ck_assert_int_eq(dlc_chunks_read_range(chunks, (uint32_t)ino, buf, sizeof(buf), BIG_SIZE), 0);
	free(original);
	dlc_chunks_free(chunks);
	packed_close(&f);
}
END_TEST

/*
 * A member larger than max_file goes through fetch.c's blocks like a tree's
 * large file (the "block" kind of its one read interface): read by range
 * from its chunk, offered to the cache block by block, and served from the
 * cache by the next fetcher with no source read.  Before, packed large
 * members were read by range, uncached: the second pass read the source.
 */
START_TEST(test_fetch_caches_a_large_member_by_blocks)
{
	const uint64_t block = 64 * 1024, nblocks = (BIG_SIZE + block - 1) / block;
	struct packed_fixture f;
	struct dlc_store *store;
	struct dlc_cache *cache;
	struct dlc_fetch *fetch;
	struct dlc_block_reader *reader;
	char cache_dir[PATH_MAX];
	char *cause = NULL;
	unsigned char *buf = malloc(BIG_SIZE + 4096), *original;
	uint64_t ino, reads;

	packed_open(&f);
	format_path(cache_dir, "%s/cache", tmp_dir);
	ck_assert_int_eq(dlc_store_open(cache_dir, &store, &cause), 0);
	ck_assert_int_eq(dlc_cache_open(store, f.snap, DLC_POLICY_FREEZE, 16 << 20, NULL, &f.stats,
					&cache, &cause), 0);
	ino = ino_of(&f, "big.bin");
	original = original_of(&f, ino);
	for (int pass = 0; pass < 2; pass++) {
		fetch = dlc_fetch_create(f.backend, f.snap, cache, &f.stats, 16 * 1024);
		ck_assert_ptr_nonnull(fetch);
		dlc_fetch_set_blocks(fetch, block, 0, 0);
		reads = atomic_load(&f.backend->calls[DLC_BACKEND_READ]);
		ck_assert_int_eq(dlc_fetch_open_direct(fetch, (uint32_t)ino, &reader), 0);
		ck_assert_ptr_nonnull(reader);
		memset(buf, 0, BIG_SIZE + 4096);
		ck_assert_int_eq(dlc_fetch_read_direct(fetch, (uint32_t)ino, reader, buf, BIG_SIZE + 4096, 0),
				 BIG_SIZE);
		ck_assert(memcmp(buf, original, BIG_SIZE) == 0);
		/* A range across a block boundary, and one past the end. */
		ck_assert_int_eq(dlc_fetch_read_direct(fetch, (uint32_t)ino, reader, buf, 100, block - 50), 100);
		ck_assert(memcmp(buf, original + block - 50, 100) == 0);
		ck_assert_int_eq(dlc_fetch_read_direct(fetch, (uint32_t)ino, reader, buf, 10, BIG_SIZE), 0);
		dlc_fetch_close_direct(fetch, reader);
		dlc_fetch_free(fetch);          /* the blocks' offers are done by then */
		if (pass == 0) {
			ck_assert_uint_eq(dlc_stats_get(&f.stats, DLC_STAT_BLOCK_MISSES), nblocks);
			ck_assert_uint_eq(dlc_stats_get(&f.stats, DLC_STAT_BLOCK_ADMISSIONS), nblocks);
			ck_assert_uint_eq(dlc_stats_get(&f.stats, DLC_STAT_BYTES_FROM_REMOTE), BIG_SIZE);
			ck_assert_uint_gt(atomic_load(&f.backend->calls[DLC_BACKEND_READ]), reads);
		} else {
			ck_assert_uint_eq(dlc_stats_get(&f.stats, DLC_STAT_BLOCK_MISSES), nblocks);
			ck_assert_uint_ge(dlc_stats_get(&f.stats, DLC_STAT_BLOCK_HITS), nblocks);
			ck_assert_uint_eq(atomic_load(&f.backend->calls[DLC_BACKEND_READ]), reads);
		}
	}
	ck_assert_uint_eq(dlc_stats_get(&f.stats, DLC_STAT_REMOTE_ERRORS), 0);
	dlc_cache_close(cache);
	dlc_store_close(store);
	free(original);
	free(buf);
	packed_close(&f);
}
END_TEST

/* Flips one byte of file path's bytes inside its chunk. */
static void flip_byte(struct packed_fixture *f, uint64_t ino, uint64_t at)
{
	struct dlc_snapshot_member member;
	char file[PATH_MAX];
	unsigned char byte;
	int fd;

	ck_assert_int_eq(dlc_snapshot_chunk(f->snap, ino, &member), 0);
	format_path(file, "%s/%s", f->dst, member.chunk_path);
	fd = open(file, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &byte, 1, (off_t)(member.offset + at)), 1);
	byte ^= 0x5a;
	ck_assert_int_eq(pwrite(fd, &byte, 1, (off_t)(member.offset + at)), 1);
	close(fd);
}

START_TEST(test_chunks_damage_fails_only_the_damaged_file)
{
	struct packed_fixture f;
	struct dlc_chunks *chunks;
	struct dlc_snapshot_member damaged, neighbour;
	uint64_t victim, other;
	unsigned char buf[BIG_SIZE];

	packed_open(&f);
	victim = ino_of(&f, "train/class 1/sample_03.JPEG");
	other = ino_of(&f, "train/class 1/sample_04.JPEG");
	ck_assert_int_eq(dlc_snapshot_chunk(f.snap, victim, &damaged), 0);
	ck_assert_int_eq(dlc_snapshot_chunk(f.snap, other, &neighbour), 0);
	ck_assert_uint_eq(damaged.chunk, neighbour.chunk);
	flip_byte(&f, victim, 7);
	ck_assert_int_eq(dlc_chunks_create(f.backend, f.snap, &f.stats, false, UINT64_MAX, &chunks), 0);
	ck_assert_int_eq(dlc_chunks_read_file(chunks, (uint32_t)victim, buf,
					      dlc_snapshot_node(f.snap, victim)->size), -EIO);
	ck_assert_int_eq(dlc_chunks_read_file(chunks, (uint32_t)other, buf,
					      dlc_snapshot_node(f.snap, other)->size), 0);
	ck_assert_uint_eq(dlc_stats_get(&f.stats, DLC_STAT_REMOTE_ERRORS), 1);
	dlc_chunks_free(chunks);
	packed_close(&f);
}
END_TEST

struct handed {
	struct packed_fixture *f;
	unsigned count[1024];
	unsigned total;
	bool bytes_ok;
};

static void count_member(void *arg, uint32_t ino, const void *data, uint64_t size)
{
	struct handed *handed = arg;
	unsigned char *original = original_of(handed->f, ino);

	ck_assert_uint_lt(ino, 1024);
	handed->count[ino]++;
	handed->total++;
	if (memcmp(original, data, size) != 0)
		handed->bytes_ok = false;
	free(original);
}

START_TEST(test_chunks_whole_pass_hands_every_member_once)
{
	static struct handed handed;
	struct packed_fixture f;
	struct dlc_chunks *chunks;
	struct dlc_snapshot_member asked, member;
	unsigned char buf[BIG_SIZE], *original;
	uint64_t ino, in_chunk = 0, big;

	packed_open(&f);
	handed = (struct handed){ .f = &f, .bytes_ok = true };
	ck_assert_int_eq(dlc_chunks_create(f.backend, f.snap, &f.stats, true, BIG_SIZE - 1, &chunks), 0);
	ino = ino_of(&f, "train/class 2/sample_05.JPEG");
	ck_assert_int_eq(dlc_snapshot_chunk(f.snap, ino, &asked), 0);
	ck_assert_int_eq(dlc_chunks_read_whole(chunks, (uint32_t)ino, buf,
					       dlc_snapshot_node(f.snap, ino)->size,
					       count_member, &handed), 0);
	original = original_of(&f, ino);
	ck_assert(memcmp(buf, original, dlc_snapshot_node(f.snap, ino)->size) == 0);
	free(original);
	/* Every other member of the chunk went to the callback once; the one
	 * asked for was copied to the caller, who offers it. */
	for (uint64_t i = 1; i <= dlc_snapshot_count(f.snap); i++) {
		if (dlc_snapshot_chunk(f.snap, i, &member) == 0 && member.chunk == asked.chunk) {
			ck_assert_uint_eq(handed.count[i], i == ino ? 0 : 1);
			in_chunk++;
		}
	}
	ck_assert_uint_eq(handed.total, in_chunk - 1);
	ck_assert(handed.bytes_ok);
	ck_assert_uint_eq(dlc_stats_get(&f.stats, DLC_STAT_CHUNK_READS), 1);
	ck_assert_uint_eq(atomic_load(&f.backend->calls[DLC_BACKEND_READ]), 1);
	/* A chunk is read whole once per mount. */
	ck_assert_int_eq(dlc_chunks_read_whole(chunks, (uint32_t)ino, buf,
					       dlc_snapshot_node(f.snap, ino)->size,
					       count_member, &handed), DLC_CHUNKS_NOT_IN_PASS);
	ck_assert_uint_eq(handed.total, in_chunk - 1);
	/* Files above max_file are skipped: the big file's chunk hands nothing. */
	big = ino_of(&f, "big.bin");
	ck_assert_int_eq(dlc_chunks_read_whole(chunks, (uint32_t)big, buf, BIG_SIZE, count_member,
					       &handed), DLC_CHUNKS_NOT_IN_PASS);
	ck_assert_uint_eq(handed.total, in_chunk - 1);
	dlc_chunks_free(chunks);
	packed_close(&f);
}
END_TEST

START_TEST(test_chunks_hold_refused_bytes_until_taken_once)
{
	struct packed_fixture f;
	struct dlc_chunks *chunks, *plain;
	unsigned char buf[16];

	packed_open(&f);
	ck_assert_int_eq(dlc_chunks_create(f.backend, f.snap, &f.stats, true, UINT64_MAX, &chunks), 0);
	ck_assert(!dlc_chunks_take_held(chunks, 2, buf, 5));
	dlc_chunks_hold(chunks, 2, "hello", 5);
	dlc_chunks_hold(chunks, 3, "world", 5);
	dlc_chunks_hold(chunks, 3, "again", 5);            /* replaces the older copy */
	ck_assert(!dlc_chunks_take_held(chunks, 2, buf, 4));   /* the size must match */
	ck_assert(dlc_chunks_take_held(chunks, 2, buf, 5));
	ck_assert(memcmp(buf, "hello", 5) == 0);
	ck_assert(!dlc_chunks_take_held(chunks, 2, buf, 5));   /* taken once */
	ck_assert(dlc_chunks_take_held(chunks, 3, buf, 5));
	ck_assert(memcmp(buf, "again", 5) == 0);
	ck_assert(!dlc_chunks_take_held(chunks, 3, buf, 5));
	dlc_chunks_hold(chunks, 4, "", 0);
	ck_assert(dlc_chunks_take_held(chunks, 4, buf, 0));
	dlc_chunks_hold(chunks, 5, "left", 4);            /* freed by dlc_chunks_free */
	dlc_chunks_free(chunks);
	/* Without whole chunks nothing is held. */
	ck_assert_int_eq(dlc_chunks_create(f.backend, f.snap, &f.stats, false, UINT64_MAX, &plain), 0);
	dlc_chunks_hold(plain, 2, "hello", 5);
	ck_assert(!dlc_chunks_take_held(plain, 2, buf, 5));
	dlc_chunks_free(plain);
	packed_close(&f);
}
END_TEST

/* Readers on many threads share the chunk handles (pread is thread-safe). */
struct reader_arg {
	struct packed_fixture *f;
	struct dlc_chunks *chunks;
	unsigned seed;
	int failures;
};

static void *reader(void *arg)
{
	struct reader_arg *r = arg;
	uint32_t count = dlc_snapshot_count(r->f->snap);

	for (int i = 0; i < 300; i++) {
		uint64_t ino = (uint64_t)(rand_r(&r->seed) % count) + 1;
		const struct dlc_node *node = dlc_snapshot_node(r->f->snap, ino);
		unsigned char *buf;

		if (!S_ISREG(node->mode))
			continue;
		buf = malloc(node->size + 1);
		if (dlc_chunks_read_file(r->chunks, (uint32_t)ino, buf, node->size) != 0)
			r->failures++;
		free(buf);
	}
	return NULL;
}

START_TEST(test_chunks_serve_many_threads)
{
	struct packed_fixture f;
	struct dlc_chunks *chunks;
	struct reader_arg args[8];
	pthread_t threads[8];

	packed_open(&f);
	ck_assert_int_eq(dlc_chunks_create(f.backend, f.snap, &f.stats, false, UINT64_MAX, &chunks), 0);
	for (int i = 0; i < 8; i++) {
		args[i] = (struct reader_arg){ &f, chunks, (unsigned)i + 1, 0 };
		ck_assert_int_eq(pthread_create(&threads[i], NULL, reader, &args[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(threads[i], NULL);
		ck_assert_int_eq(args[i].failures, 0);
	}
	ck_assert_uint_le(atomic_load(&f.backend->calls[DLC_BACKEND_OPEN]),
			  dlc_snapshot_chunk_count(f.snap));
	dlc_chunks_free(chunks);
	packed_close(&f);
}
END_TEST

/* ------------------------------------------------------------------------
 * dlcache snapshot --tar over shards made by GNU tar.
 */

/* Two shards of make_source's tree: gnu format (class 0 and 1, the link,
 * the long name) and pax (the rest), plus a hard link and an empty file. */
static void make_shards(const char *src, const char *shards)
{
	run("mkdir -p '%s/sub' && ln '%s/big.bin' '%s/big hard link'", shards, src, src);
	run("cd '%s' && tar --format=gnu -cf '%s/one.tar' 'train/class 0' 'train/class 1' link "
	    "train/$(printf '%%0150d' 7).bin 'big.bin' 'big hard link' empty.dat", src, shards);
	run("cd '%s' && tar --format=pax -cf '%s/sub/two.tar' 'train/class 2' 'train/class 3' "
	    "'caf\xc3\xa9 \xe2\x98\x95' 'empty dir'", src, shards);
	run("echo 'not a shard' > '%s/notes.txt'", shards);
}

static struct dlc_snapshot *index_ok(const char *shards, bool merge,
				     struct dlc_snapshot_tar_result *result)
{
	struct dlc_snapshot_tar_options options = { .merge = merge };
	struct dlc_backend *backend = NULL;
	struct dlc_snapshot *snap = NULL;
	char file[PATH_MAX];
	char *cause = NULL;
	int rc;

	format_path(file, "%s/%s", shards, DLC_SNAPSHOT_PACKED_NAME);
	ck_assert_int_eq(dlc_backend_create(shards, NULL, &backend, &cause), 0);
	rc = dlc_snapshot_index_tar(backend, file, &options, result, &cause);
	ck_assert_msg(rc == 0, "index: %d %s", rc, cause ? cause : "");
	dlc_backend_destroy(backend);
	ck_assert_int_eq(dlc_snapshot_load(file, &snap, &cause), 0);
	return snap;
}

/* Every file of snap is at its offset in its shard and equals the file of
 * src at its path (without its shard's directory unless merged). */
static uint64_t check_members(struct dlc_snapshot *snap, const char *shards, const char *src,
			      bool merged)
{
	char path[PATH_MAX], file[PATH_MAX];
	uint64_t files = 0;

	for (uint64_t ino = 1; ino <= dlc_snapshot_count(snap); ino++) {
		const struct dlc_node *node = dlc_snapshot_node(snap, ino);
		struct dlc_snapshot_member member;
		unsigned char *chunk, *original;
		size_t chunk_len, original_len;
		const char *relative;

		if (!S_ISREG(node->mode))
			continue;
		ck_assert_int_eq(dlc_snapshot_chunk(snap, ino, &member), 0);
		ck_assert_int_eq(dlc_snapshot_path(snap, ino, path, sizeof(path)), 0);
		relative = path;
		if (!merged) {
			/* "sub/two.tar" holds "sub/two/...": strip as many components. */
			for (const char *p = member.chunk_path; p; p = strchr(p + 1, '/'))
				relative = strchr(relative, '/') + 1;
		}
		format_path(file, "%s/%s", src, relative);
		original = read_whole(file, &original_len);
		ck_assert_uint_eq(original_len, node->size);
		format_path(file, "%s/%s", shards, member.chunk_path);
		chunk = read_whole(file, &chunk_len);
		ck_assert_uint_le(member.offset + node->size, chunk_len);
		ck_assert_msg(memcmp(chunk + member.offset, original, node->size) == 0,
			      "%s is not at offset %llu of %s", path,
			      (unsigned long long)member.offset, member.chunk_path);
		ck_assert_uint_eq(member.hash, XXH3_64bits(original, original_len));
		free(chunk);
		free(original);
		files++;
	}
	return files;
}

START_TEST(test_index_of_gnu_tar_shards_puts_each_shard_in_its_directory)
{
	struct dlc_snapshot_tar_result result;
	struct dlc_snapshot *snap;
	char src[PATH_MAX], shards[PATH_MAX];
	uint64_t ino;

	format_path(src, "%s/src", tmp_dir);
	format_path(shards, "%s/shards", tmp_dir);
	make_source(src);
	make_shards(src, shards);
	snap = index_ok(shards, false, &result);
	ck_assert_uint_eq(result.shards, 2);
	ck_assert_uint_eq(dlc_snapshot_chunk_count(snap), 2);
	ck_assert_str_eq(dlc_snapshot_chunk_path(snap, 0), "one.tar");
	ck_assert_str_eq(dlc_snapshot_chunk_path(snap, 1), "sub/two.tar");
	ck_assert_uint_eq(check_members(snap, shards, src, false), result.files);
	ck_assert_uint_ne(dlc_snapshot_resolve(snap, "one/train/class 0/sample_00.JPEG"), 0);
	ck_assert_uint_ne(dlc_snapshot_resolve(snap, "sub/two/caf\xc3\xa9 \xe2\x98\x95"), 0);
	ck_assert_uint_ne(dlc_snapshot_resolve(snap, "sub/two/empty dir"), 0);
	ino = dlc_snapshot_resolve(snap, "one/link");
	ck_assert_str_eq(dlc_snapshot_link_target(snap, ino), "train/class 0/sample_00.JPEG");
	/* The hard link shares the bytes of the file it names. */
	ino = dlc_snapshot_resolve(snap, "one/big hard link");
	ck_assert_uint_ne(ino, 0);
	ck_assert_uint_eq(dlc_snapshot_node(snap, ino)->size, BIG_SIZE);
	ck_assert_uint_eq(result.files, 2 * 12 + 2 * 12 + 5);
	ck_assert_uint_eq(result.entries, dlc_snapshot_count(snap));
	dlc_snapshot_free(snap);
}
END_TEST

START_TEST(test_index_with_merge_is_the_original_tree)
{
	struct dlc_snapshot_tar_result result;
	struct dlc_snapshot *snap;
	char src[PATH_MAX], shards[PATH_MAX];

	format_path(src, "%s/src", tmp_dir);
	format_path(shards, "%s/shards", tmp_dir);
	make_source(src);
	make_shards(src, shards);
	snap = index_ok(shards, true, &result);
	ck_assert_uint_eq(check_members(snap, shards, src, true), result.files);
	ck_assert_uint_ne(dlc_snapshot_resolve(snap, "train/class 3/sample_11.JPEG"), 0);
	ck_assert_uint_ne(dlc_snapshot_resolve(snap, "train/class 0/sample_11.JPEG"), 0);
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, "one"), 0);
	dlc_snapshot_free(snap);
}
END_TEST

static void expect_index_error(const char *shards, bool merge, const char *phrase)
{
	struct dlc_snapshot_tar_options options = { .merge = merge };
	struct dlc_backend *backend = NULL;
	char file[PATH_MAX];
	char *cause = NULL;

	format_path(file, "%s/%s", shards, DLC_SNAPSHOT_PACKED_NAME);
	ck_assert_int_eq(dlc_backend_create(shards, NULL, &backend, &cause), 0);
	ck_assert_int_lt(dlc_snapshot_index_tar(backend, file, &options, NULL, &cause), 0);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, phrase), "cause '%s' lacks '%s'", cause, phrase);
	free(cause);
	dlc_backend_destroy(backend);
	ck_assert_int_eq(access(file, F_OK), -1);
}

static const struct {
	const char *setup;      /* shell, run in the shards directory */
	bool merge;
	const char *phrase;
} index_refusals[] = {
	{ "true", false, "no *.tar file" },
	{ "mkdir d && echo x > d/a && tar -cf one.tar -C d a && tar -cf two.tar -C d a", true,
	  "'a' appears in shards 'one.tar' and 'two.tar'" },
	{ "mkdir -p d/c d/e && echo x > d/c/a && echo y > d/e/b && tar -cf one.tar -C d c e && "
	  "tar -cf two.tar -C d c", true, "'c/a' appears in shards 'one.tar' and 'two.tar'" },
	{ "mkdir d && echo x > d/a && tar -cf one.tar -C d a && tar -rf one.tar -C d a", false,
	  "'one/a' appears twice in shard 'one.tar'" },
	{ "mkdir -p d/a && echo x > d/b && echo y > d/a/c && tar -cf one.tar -C d b && "
	  "mv d/b d/b.old && mkdir d/b && echo z > d/b/x && tar -cf two.tar -C d b/x", true,
	  "is not a directory" },
	{ "mkdir d && echo x > d/a && tar -czf one.tar -C d a", false,
	  "not an uncompressed tar archive" },
	{ "mkdir d && truncate -s 1M d/s && echo x >> d/s && tar --sparse -cf one.tar -C d s", false,
	  "is sparse" },
	{ "python3 -c \"import io, tarfile; t = tarfile.open('one.tar', 'w'); "
	  "i = tarfile.TarInfo('a/../../evil'); i.size = 1; t.addfile(i, io.BytesIO(b'x'))\"", false,
	  "'..'" },
	{ "mkdir d && head -c 5000 /dev/zero > d/a && tar -cf one.tar -C d a && truncate -s 2000 one.tar",
	  false, "truncated or damaged in member 'a'" },
};

START_TEST(test_index_refuses_what_it_cannot_serve)
{
	char shards[PATH_MAX];

	format_path(shards, "%s/shards", tmp_dir);
	ck_assert_int_eq(mkdir(shards, 0755), 0);
	run("cd '%s' && %s", shards, index_refusals[_i].setup);
	expect_index_error(shards, index_refusals[_i].merge, index_refusals[_i].phrase);
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

	tc = tcase_create("pack");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_pack_puts_every_file_at_its_recorded_offset);
	tcase_add_test(tc, test_packed_tree_is_the_crawled_tree);
	tcase_add_test(tc, test_pack_of_an_empty_tree);
	tcase_add_test(tc, test_pack_refuses_what_it_would_damage);
	tcase_add_test(tc, test_pack_replaces_what_an_interrupted_pack_left);
	tcase_add_test(tc, test_stopped_pack_leaves_nothing);
	suite_add_tcase(s, tc);

	tc = tcase_create("index_tar");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_index_of_gnu_tar_shards_puts_each_shard_in_its_directory);
	tcase_add_test(tc, test_index_with_merge_is_the_original_tree);
	tcase_add_loop_test(tc, test_index_refuses_what_it_cannot_serve, 0,
			    (int)(sizeof(index_refusals) / sizeof(index_refusals[0])));
	suite_add_tcase(s, tc);

	tc = tcase_create("chunks");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_chunks_read_every_file_with_one_open_per_chunk);
	tcase_add_test(tc, test_chunks_range_reads_stop_at_the_file);
	tcase_add_test(tc, test_fetch_caches_a_large_member_by_blocks);
	tcase_add_test(tc, test_chunks_damage_fails_only_the_damaged_file);
	tcase_add_test(tc, test_chunks_whole_pass_hands_every_member_once);
	tcase_add_test(tc, test_chunks_hold_refused_bytes_until_taken_once);
	tcase_add_test(tc, test_chunks_serve_many_threads);
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
