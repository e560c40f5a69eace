/*
 * check_snapshot.c - the snapshot module and the posix backend it crawls.
 *
 * Every test gets a fresh fixture: a temporary source tree (nested
 * directories, files of several sizes, names with spaces and UTF-8, an empty
 * directory, symlinks to a file, to a directory and to nowhere, and a fifo
 * that must never appear), a snapshot built from it and loaded back.  Tests
 * compare what the snapshot says against lstat(2) of the real tree, and
 * check that damaged or foreign files are refused with a sentence.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dlcache/backend.h"
#include "dlcache/snapshot.h"

#define BIG_SIZE 100000

static char tmp_dir[PATH_MAX];
static char src_dir[PATH_MAX];
static char snap_file[PATH_MAX];
static struct dlc_backend *backend;
static struct dlc_snapshot *snap;
static uint64_t built_entries;

/* ------------------------------------------------------------------------
 * Fixture.
 */

/* snprintf into a PATH_MAX buffer that must not truncate. */
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

static void make_path(char *out, const char *relative)
{
	format_path(out, "%s/%s", src_dir, relative);
}

static void write_file(const char *relative, size_t size, long mtime_sec, long mtime_nsec)
{
	char path[PATH_MAX];
	FILE *f;

	make_path(path, relative);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	for (size_t i = 0; i < size; i++)
		fputc((int)((i * 7 + 3) & 0xff), f);
	ck_assert_int_eq(fclose(f), 0);
	if (mtime_sec) {
		struct timespec times[2] = {
			{ .tv_sec = mtime_sec, .tv_nsec = mtime_nsec },
			{ .tv_sec = mtime_sec, .tv_nsec = mtime_nsec },
		};

		ck_assert_int_eq(utimensat(AT_FDCWD, path, times, AT_SYMLINK_NOFOLLOW), 0);
	}
}

static void make_dir(const char *relative)
{
	char path[PATH_MAX];

	make_path(path, relative);
	ck_assert_int_eq(mkdir(path, 0755), 0);
}

static void make_link(const char *target, const char *relative)
{
	char path[PATH_MAX];

	make_path(path, relative);
	ck_assert_int_eq(symlink(target, path), 0);
}

static void make_tree(void)
{
	char path[PATH_MAX];

	write_file("a.txt", 6, 1500000000, 123456789);
	write_file("big.bin", BIG_SIZE, 1600000000, 1);
	write_file("empty.dat", 0, 0, 0);
	write_file("one.dat", 1, 0, 0);
	write_file("with space.txt", 4096, 1400000000, 999999999);
	write_file("caf\xc3\xa9 \xe2\x98\x95.txt", 17, 0, 0);   /* "café ☕.txt" */
	write_file("Zebra", 3, 0, 0);
	make_link("a.txt", "link");
	make_link("dir1", "dirlink");
	make_link("nowhere/at all", "dangling");
	make_path(path, "fifo");
	ck_assert_int_eq(mkfifo(path, 0644), 0);
	make_dir("empty");
	make_dir("dir1");
	make_dir("dir1/sub");
	make_dir("dir1/sub/deeper");
	write_file("dir1/sub/deeper/file.txt", 12345, 1700000000, 5);
	make_dir("dir1/na\xc3\xafve dir");                    /* "naïve dir" */
	write_file("dir1/na\xc3\xafve dir/x", 2, 0, 0);
	make_path(path, "dir1/na\xc3\xafve dir/pipe");
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	make_dir("dir2");
	for (int i = 29; i >= 0; i--) {
		char name[32];

		snprintf(name, sizeof(name), "dir2/n%02d_%d.JPEG", i, i * 37);
		write_file(name, (size_t)i * 10, 0, 0);
	}
}

static int remove_tree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return -1;
	if (S_ISDIR(st.st_mode)) {
		DIR *dir = opendir(path);
		struct dirent *de;

		if (!dir)
			return -1;
		while ((de = readdir(dir))) {
			char child[PATH_MAX];

			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			format_path(child, "%s/%s", path, de->d_name);
			remove_tree(child);
		}
		closedir(dir);
		return rmdir(path);
	}
	return unlink(path);
}

static void build_into(const char *file, unsigned threads, uint64_t *entries)
{
	struct dlc_snapshot_build_options options = { .threads = threads };
	char *cause = NULL;
	int rc;

	rc = dlc_snapshot_build(backend, file, &options, entries, &cause);
	ck_assert_msg(rc == 0, "build failed: %d %s", rc, cause ? cause : "(no cause)");
	ck_assert_ptr_null(cause);
}

static struct dlc_snapshot *load_ok(const char *file)
{
	struct dlc_snapshot *loaded = NULL;
	char *cause = NULL;
	int rc;

	rc = dlc_snapshot_load(file, &loaded, &cause);
	ck_assert_msg(rc == 0, "load failed: %d %s", rc, cause ? cause : "(no cause)");
	ck_assert_ptr_nonnull(loaded);
	return loaded;
}

static void setup(void)
{
	char *cause = NULL;
	int rc;

	strcpy(tmp_dir, "/tmp/check_snapshot.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp_dir));
	format_path(src_dir, "%s/src", tmp_dir);
	format_path(snap_file, "%s/snapshot.db", tmp_dir);
	ck_assert_int_eq(mkdir(src_dir, 0755), 0);
	make_tree();

	rc = dlc_backend_create(src_dir, NULL, &backend, &cause);
	ck_assert_msg(rc == 0, "backend: %d %s", rc, cause ? cause : "");
	build_into(snap_file, 0, &built_entries);
	snap = load_ok(snap_file);
}

static void teardown(void)
{
	dlc_snapshot_free(snap);
	snap = NULL;
	dlc_backend_destroy(backend);
	backend = NULL;
	remove_tree(tmp_dir);
}

/* ------------------------------------------------------------------------
 * Walking the real tree.
 */

typedef void (*visit_fn)(const char *relative, const struct stat *st, void *arg);

/* Calls visit for every regular file, directory and symlink below relative. */
static void walk(const char *relative, visit_fn visit, void *arg)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *dir;

	make_path(path, relative);
	dir = opendir(path);
	ck_assert_ptr_nonnull(dir);
	while ((de = readdir(dir))) {
		char child[PATH_MAX], child_path[PATH_MAX];
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		format_path(child, "%s%s%s", relative, *relative ? "/" : "", de->d_name);
		make_path(child_path, child);
		ck_assert_int_eq(lstat(child_path, &st), 0);
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
			continue;
		visit(child, &st, arg);
		if (S_ISDIR(st.st_mode))
			walk(child, visit, arg);
	}
	closedir(dir);
}

struct tally {
	uint64_t entries;
	uint64_t dirs;
	uint64_t bytes;
};

static void count_entry(const char *relative, const struct stat *st, void *arg)
{
	struct tally *tally = arg;

	(void)relative;
	tally->entries++;
	if (S_ISDIR(st->st_mode))
		tally->dirs++;
	if (S_ISREG(st->st_mode))
		tally->bytes += (uint64_t)st->st_size;
}

static void check_entry(const char *relative, const struct stat *st, void *arg)
{
	const struct dlc_node *node;
	const char *base = strrchr(relative, '/');
	uint64_t ino, parent;

	(void)arg;
	ino = dlc_snapshot_resolve(snap, relative);
	ck_assert_msg(ino != 0, "'%s' does not resolve", relative);
	node = dlc_snapshot_node(snap, ino);
	ck_assert_ptr_nonnull(node);
	ck_assert_uint_eq(node->mode, st->st_mode);
	ck_assert_uint_eq(node->uid, st->st_uid);
	ck_assert_uint_eq(node->gid, st->st_gid);
	ck_assert_uint_eq(node->size, (uint64_t)st->st_size);
	ck_assert_int_eq(node->mtime_sec, st->st_mtim.tv_sec);
	ck_assert_uint_eq(node->mtime_nsec, (uint64_t)st->st_mtim.tv_nsec);

	base = base ? base + 1 : relative;
	ck_assert_str_eq(dlc_snapshot_name(snap, ino), base);
	parent = node->parent;
	ck_assert_uint_eq(dlc_snapshot_lookup(snap, parent, base), ino);
}

/* ------------------------------------------------------------------------
 * Build and load.
 */

START_TEST(test_build_counts_every_entry)
{
	struct tally tally = { 0 };
	char tmp[PATH_MAX];

	walk("", count_entry, &tally);
	ck_assert_uint_eq(dlc_snapshot_count(snap), tally.entries + 1);
	ck_assert_uint_eq(built_entries, tally.entries + 1);
	ck_assert_uint_eq(dlc_snapshot_total_bytes(snap), tally.bytes);
	ck_assert_str_eq(dlc_snapshot_source(snap), src_dir);
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, "fifo"), 0);
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, "dir1/na\xc3\xafve dir/pipe"), 0);
	format_path(tmp, "%s.tmp", snap_file);
	ck_assert_int_eq(access(tmp, F_OK), -1);
	ck_assert_uint_ge(dlc_snapshot_memory(snap),
			  dlc_snapshot_count(snap) * sizeof(struct dlc_node));
}
END_TEST

START_TEST(test_build_lists_each_directory_once)
{
	struct tally tally = { 0 };
	uint64_t before = dlc_backend_metadata_calls(backend);

	walk("", count_entry, &tally);
	build_into(snap_file, 4, NULL);
	/* one stat of the root, one list per directory, root included */
	ck_assert_uint_eq(dlc_backend_metadata_calls(backend) - before, tally.dirs + 2);
	ck_assert_uint_eq(backend->calls[DLC_BACKEND_OPEN], 0);
	ck_assert_uint_eq(backend->calls[DLC_BACKEND_READ], 0);
}
END_TEST

START_TEST(test_build_numbering_does_not_depend_on_threads)
{
	char one_file[PATH_MAX];
	struct dlc_snapshot *one;

	format_path(one_file, "%s/one-thread.db", tmp_dir);
	build_into(one_file, 1, NULL);
	one = load_ok(one_file);
	ck_assert_uint_eq(dlc_snapshot_count(one), dlc_snapshot_count(snap));
	for (uint64_t ino = 1; ino <= dlc_snapshot_count(snap); ino++) {
		const struct dlc_node *a = dlc_snapshot_node(snap, ino);
		const struct dlc_node *b = dlc_snapshot_node(one, ino);

		ck_assert_str_eq(dlc_snapshot_name(snap, ino), dlc_snapshot_name(one, ino));
		ck_assert_uint_eq(a->parent, b->parent);
		ck_assert_uint_eq(a->mode, b->mode);
		ck_assert_uint_eq(a->size, b->size);
	}
	dlc_snapshot_free(one);
}
END_TEST

/*
 * Found by the sanitizer suite: a crawl worker whose first listing is an
 * empty directory sorted a NULL array (undefined behaviour).  The source
 * here is one empty directory, crawled by one worker.
 */
START_TEST(test_build_of_an_empty_source)
{
	char empty_dir[PATH_MAX], empty_file[PATH_MAX];
	struct dlc_snapshot_build_options options = { .threads = 1 };
	struct dlc_backend *empty_backend = NULL;
	struct dlc_snapshot *empty;
	uint64_t entries = 0;
	char *cause = NULL;

	format_path(empty_dir, "%s/empty-src", tmp_dir);
	format_path(empty_file, "%s/empty.db", tmp_dir);
	ck_assert_int_eq(mkdir(empty_dir, 0755), 0);
	ck_assert_int_eq(dlc_backend_create(empty_dir, NULL, &empty_backend, &cause), 0);
	ck_assert_int_eq(dlc_snapshot_build(empty_backend, empty_file, &options, &entries, &cause), 0);
	ck_assert_uint_eq(entries, 1);
	empty = load_ok(empty_file);
	ck_assert_uint_eq(dlc_snapshot_count(empty), 1);
	ck_assert_uint_eq(dlc_snapshot_node(empty, 1)->nchildren, 0);
	dlc_snapshot_free(empty);
	dlc_backend_destroy(empty_backend);
}
END_TEST

START_TEST(test_build_replaces_existing_file)
{
	struct dlc_snapshot *again;

	write_file("added later", 5, 0, 0);
	build_into(snap_file, 0, NULL);
	again = load_ok(snap_file);
	ck_assert_uint_eq(dlc_snapshot_count(again), dlc_snapshot_count(snap) + 1);
	ck_assert_uint_ne(dlc_snapshot_resolve(again, "added later"), 0);
	dlc_snapshot_free(again);
}
END_TEST

START_TEST(test_build_progress_line)
{
	struct dlc_snapshot_build_options options = { .progress = true };
	char capture[PATH_MAX], text[256], expected[64];
	char *cause = NULL;
	uint64_t entries = 0;
	int saved, fd, rc;
	ssize_t n;

	format_path(capture, "%s/stderr", tmp_dir);
	fd = open(capture, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	rc = dlc_snapshot_build(backend, snap_file, &options, &entries, &cause);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	ck_assert_int_eq(rc, 0);
	n = pread(fd, text, sizeof(text) - 1, 0);
	close(fd);
	ck_assert_int_gt(n, 0);
	text[n] = '\0';
	snprintf(expected, sizeof(expected), "\rcrawled %llu entries\n",
		 (unsigned long long)entries);
	ck_assert_uint_ge(strlen(text), strlen(expected));
	ck_assert_str_eq(text + strlen(text) - strlen(expected), expected);
}
END_TEST

START_TEST(test_build_into_missing_directory_fails)
{
	char file[PATH_MAX];
	char *cause = NULL;
	int rc;

	format_path(file, "%s/no/such/dir/snapshot.db", tmp_dir);
	rc = dlc_snapshot_build(backend, file, NULL, NULL, &cause);
	ck_assert_int_lt(rc, 0);
	ck_assert_ptr_nonnull(cause);
	ck_assert_ptr_nonnull(strstr(cause, "snapshot.db.tmp"));
	free(cause);
}
END_TEST

/* ------------------------------------------------------------------------
 * Lookup, resolve, path.
 */

START_TEST(test_every_entry_resolves_with_lstat_attributes)
{
	walk("", check_entry, NULL);
}
END_TEST

START_TEST(test_lookup_of_missing_names)
{
	uint64_t file = dlc_snapshot_resolve(snap, "a.txt");

	ck_assert_uint_ne(file, 0);
	ck_assert_uint_eq(dlc_snapshot_lookup(snap, DLC_SNAPSHOT_ROOT_INO, "nope"), 0);
	ck_assert_uint_eq(dlc_snapshot_lookup(snap, DLC_SNAPSHOT_ROOT_INO, ""), 0);
	ck_assert_uint_eq(dlc_snapshot_lookup(snap, DLC_SNAPSHOT_ROOT_INO, "a.tx"), 0);
	ck_assert_uint_eq(dlc_snapshot_lookup(snap, DLC_SNAPSHOT_ROOT_INO, "a.txtx"), 0);
	ck_assert_uint_eq(dlc_snapshot_lookup(snap, DLC_SNAPSHOT_ROOT_INO, "fifo"), 0);
	ck_assert_uint_eq(dlc_snapshot_lookup(snap, DLC_SNAPSHOT_ROOT_INO, "dir1/sub"), 0);
	ck_assert_uint_eq(dlc_snapshot_lookup(snap, file, "x"), 0);
	ck_assert_uint_eq(dlc_snapshot_lookup(snap, 0, "a.txt"), 0);
	ck_assert_uint_eq(dlc_snapshot_lookup(snap, dlc_snapshot_count(snap) + 1, "a.txt"), 0);
	ck_assert_ptr_null(dlc_snapshot_node(snap, 0));
	ck_assert_ptr_null(dlc_snapshot_node(snap, dlc_snapshot_count(snap) + 1));
	ck_assert_str_eq(dlc_snapshot_name(snap, DLC_SNAPSHOT_ROOT_INO), "");
}
END_TEST

START_TEST(test_resolve_path_forms)
{
	uint64_t deeper = dlc_snapshot_resolve(snap, "dir1/sub/deeper");

	ck_assert_uint_ne(deeper, 0);
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, ""), DLC_SNAPSHOT_ROOT_INO);
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, "/"), DLC_SNAPSHOT_ROOT_INO);
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, "dir1//sub/deeper/"), deeper);
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, "dir1/sub/deeper//"), deeper);
	ck_assert_uint_ne(dlc_snapshot_resolve(snap, "with space.txt"), 0);
	ck_assert_uint_ne(dlc_snapshot_resolve(snap, "caf\xc3\xa9 \xe2\x98\x95.txt"), 0);
	ck_assert_uint_ne(dlc_snapshot_resolve(snap, "dir1/na\xc3\xafve dir/x"), 0);
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, "dir1/./sub"), 0);
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, "./dir1"), 0);
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, "dir1/../a.txt"), 0);
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, "dirlink/sub"), 0);
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, "link/x"), 0);
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, "a.txt/x"), 0);
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, "dir1/sub/deeper/file.txt/"),
			  dlc_snapshot_resolve(snap, "dir1/sub/deeper/file.txt"));
}
END_TEST

START_TEST(test_path_round_trips_through_resolve)
{
	char buf[PATH_MAX];

	for (uint64_t ino = 1; ino <= dlc_snapshot_count(snap); ino++) {
		ck_assert_int_eq(dlc_snapshot_path(snap, ino, buf, sizeof(buf)), 0);
		ck_assert_msg(dlc_snapshot_resolve(snap, buf) == ino, "ino %llu path '%s'",
			      (unsigned long long)ino, buf);
	}
	ck_assert_int_eq(dlc_snapshot_path(snap, DLC_SNAPSHOT_ROOT_INO, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "");
	ck_assert_int_eq(dlc_snapshot_path(snap, 0, buf, sizeof(buf)), -ENOENT);
	ck_assert_int_eq(dlc_snapshot_path(snap, dlc_snapshot_count(snap) + 1, buf,
					   sizeof(buf)), -ENOENT);
}
END_TEST

START_TEST(test_path_buffer_bounds)
{
	static const char deep[] = "dir1/sub/deeper/file.txt";
	uint64_t ino = dlc_snapshot_resolve(snap, deep);
	char buf[sizeof(deep)];

	ck_assert_int_eq(dlc_snapshot_path(snap, ino, buf, sizeof(deep)), 0);
	ck_assert_str_eq(buf, deep);
	for (size_t len = 0; len < sizeof(deep); len++)
		ck_assert_int_eq(dlc_snapshot_path(snap, ino, buf, len), -ENAMETOOLONG);
	ck_assert_int_eq(dlc_snapshot_path(snap, DLC_SNAPSHOT_ROOT_INO, buf, 1), 0);
	ck_assert_int_eq(dlc_snapshot_path(snap, DLC_SNAPSHOT_ROOT_INO, buf, 0), -ENAMETOOLONG);
}
END_TEST

/* ------------------------------------------------------------------------
 * Numbering.
 */

START_TEST(test_children_contiguous_and_sorted)
{
	uint32_t count = dlc_snapshot_count(snap);
	uint64_t children = 0;
	const struct dlc_node *root = dlc_snapshot_node(snap, DLC_SNAPSHOT_ROOT_INO);
	const struct dlc_node *empty;

	ck_assert(S_ISDIR(root->mode));
	ck_assert_uint_eq(root->parent, DLC_SNAPSHOT_ROOT_INO);
	ck_assert_uint_eq(root->first_child, 2);
	for (uint64_t ino = 1; ino <= count; ino++) {
		const struct dlc_node *node = dlc_snapshot_node(snap, ino);

		if (!S_ISDIR(node->mode)) {
			ck_assert_uint_eq(node->nchildren, 0);
			continue;
		}
		children += node->nchildren;
		if (node->nchildren == 0)
			continue;
		ck_assert_uint_gt(node->first_child, ino);
		for (uint32_t k = 0; k < node->nchildren; k++) {
			uint64_t child = node->first_child + k;

			ck_assert_uint_eq(dlc_snapshot_node(snap, child)->parent, ino);
			if (k > 0)
				ck_assert_int_lt(strcmp(dlc_snapshot_name(snap, child - 1),
							dlc_snapshot_name(snap, child)), 0);
		}
	}
	ck_assert_uint_eq(children, count - 1);
	/* Breadth-first: the root's children come right after it. */
	ck_assert_str_eq(dlc_snapshot_name(snap, 2), "Zebra");
	empty = dlc_snapshot_node(snap, dlc_snapshot_resolve(snap, "empty"));
	ck_assert(S_ISDIR(empty->mode));
	ck_assert_uint_eq(empty->nchildren, 0);
	ck_assert_uint_eq(empty->first_child, 0);
}
END_TEST

START_TEST(test_symlink_targets)
{
	static const char *const links[] = { "link", "dirlink", "dangling" };

	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		char path[PATH_MAX], target[PATH_MAX];
		uint64_t ino = dlc_snapshot_resolve(snap, links[i]);
		ssize_t n;

		make_path(path, links[i]);
		n = readlink(path, target, sizeof(target) - 1);
		ck_assert_int_gt(n, 0);
		target[n] = '\0';
		ck_assert_uint_ne(ino, 0);
		ck_assert(S_ISLNK(dlc_snapshot_node(snap, ino)->mode));
		ck_assert_str_eq(dlc_snapshot_name(snap, ino), links[i]);
		ck_assert_str_eq(dlc_snapshot_link_target(snap, ino), target);
	}
	ck_assert_ptr_null(dlc_snapshot_link_target(snap, dlc_snapshot_resolve(snap, "a.txt")));
	ck_assert_ptr_null(dlc_snapshot_link_target(snap, DLC_SNAPSHOT_ROOT_INO));
	ck_assert_ptr_null(dlc_snapshot_link_target(snap, 0));
}
END_TEST

/* ------------------------------------------------------------------------
 * Refusals.
 */

static void expect_create_error(const char *source, int expected, const char *phrase)
{
	struct dlc_backend *other = NULL;
	char *cause = NULL;
	int rc;

	rc = dlc_backend_create(source, NULL, &other, &cause);
	ck_assert_int_eq(rc, expected);
	ck_assert_ptr_null(other);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, phrase), "cause '%s' lacks '%s'", cause, phrase);
	free(cause);
}

START_TEST(test_bad_sources_are_refused)
{
	char path[PATH_MAX];

	format_path(path, "%s/missing", tmp_dir);
	expect_create_error(path, -ENOENT, "does not exist");
	make_path(path, "a.txt");
	expect_create_error(path, -ENOTDIR, "is not a directory");
	/* NFS forms go to their driver (check_backend has the rest) */
	expect_create_error("host:export/imagenet", -EINVAL, "is not absolute");
	expect_create_error("nfs://host/export?version=2", -EINVAL, "version=4");
	expect_create_error("relative/dir", -EINVAL, "absolute");
	expect_create_error("", -EINVAL, "source");
}
END_TEST

static void expect_load_error(const char *file, int expected, const char *phrase)
{
	struct dlc_snapshot *loaded = NULL;
	char *cause = NULL;
	int rc;

	rc = dlc_snapshot_load(file, &loaded, &cause);
	ck_assert_int_eq(rc, expected);
	ck_assert_ptr_null(loaded);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, phrase), "cause '%s' lacks '%s'", cause, phrase);
	free(cause);
}

START_TEST(test_missing_snapshot_is_refused)
{
	char file[PATH_MAX];

	format_path(file, "%s/none.db", tmp_dir);
	expect_load_error(file, -ENOENT, "does not exist");
	expect_load_error(tmp_dir, -EINVAL, "is not a dlcache snapshot");
}
END_TEST

START_TEST(test_foreign_file_is_refused)
{
	char file[PATH_MAX];
	sqlite3 *db;

	make_path(file, "with space.txt");
	expect_load_error(file, -EINVAL, "is not a dlcache snapshot");

	format_path(file, "%s/other.db", tmp_dir);
	ck_assert_int_eq(sqlite3_open(file, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "CREATE TABLE t(x)", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	expect_load_error(file, -EINVAL, "is not a dlcache snapshot");
}
END_TEST

/* Applies sql to a copy of the fixture's snapshot and returns the copy's name. */
static void damage_copy(const char *sql, char *file)
{
	char command[3 * PATH_MAX];
	sqlite3 *db;
	char *error = NULL;

	format_path(file, "%s/damaged.db", tmp_dir);
	snprintf(command, sizeof(command), "cp '%s' '%s'", snap_file, file);
	ck_assert_int_eq(system(command), 0);
	ck_assert_int_eq(sqlite3_open(file, &db), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, &error) == SQLITE_OK, "%s: %s", sql,
		      error ? error : "");
	ck_assert_int_gt(sqlite3_changes(db), 0);
	sqlite3_close(db);
}

static const struct {
	const char *sql;
	const char *phrase;
} damages[] = {
	{ "UPDATE meta SET value = 3 WHERE key = 'format'", "(format 3)" },
	{ "UPDATE meta SET value = 2 WHERE key = 'format'", "layout does not match" },
	{ "UPDATE meta SET value = 'zip' WHERE key = 'layout'", "layout does not match" },
	{ "DELETE FROM meta WHERE key = 'format'", "(no format)" },
	{ "DELETE FROM entries", "no root" },
	{ "UPDATE entries SET parent = 2 WHERE ino = 1", "root" },
	{ "DELETE FROM entries WHERE ino = 3", "inode 4 where 3 was due" },
	{ "UPDATE entries SET parent = 1 WHERE ino = (SELECT max(ino) FROM entries)",
	  "not contiguous" },
	{ "UPDATE entries SET parent = ino WHERE ino = 5", "not an earlier entry" },
	{ "UPDATE entries SET parent = 0 WHERE ino = 5", "not an earlier entry" },
	{ "UPDATE entries SET parent = 2 WHERE ino = (SELECT max(ino) FROM entries)",
	  "not a directory" },
	{ "UPDATE entries SET name = 'zzzz' WHERE ino = 2", "not sorted" },
	{ "UPDATE entries SET name = (SELECT name FROM entries WHERE ino = 3) WHERE ino = 2",
	  "not sorted" },
	{ "UPDATE entries SET name = 'A/b' WHERE ino = 2", "invalid name" },
	{ "UPDATE entries SET name = '' WHERE ino = 2", "invalid name" },
	{ "UPDATE entries SET name = '..' WHERE ino = 2", "invalid name" },
	{ "UPDATE entries SET mode = 4480 WHERE ino = 2", "not a directory, file or symlink" },
	{ "UPDATE entries SET mtime_nsec = 1000000000 WHERE ino = 2", "out of range" },
	{ "UPDATE entries SET size = -1 WHERE ino = 2", "out of range" },
	{ "UPDATE entries SET target = NULL WHERE target IS NOT NULL", "target" },
};

/* Snapshots written before layouts existed have no "layout": they are trees. */
START_TEST(test_snapshot_without_layout_loads_as_a_tree)
{
	struct dlc_snapshot *loaded = NULL;
	char file[PATH_MAX];
	char *cause = NULL;
	char *text = NULL;
	size_t len = 1;
	struct dlc_snapshot_member member;

	damage_copy("DELETE FROM meta WHERE key = 'layout'", file);
	ck_assert_int_eq(dlc_snapshot_load(file, &loaded, &cause), 0);
	ck_assert_ptr_null(cause);
	ck_assert_uint_eq(dlc_snapshot_count(loaded), dlc_snapshot_count(snap));
	ck_assert_uint_eq(dlc_snapshot_id(loaded), dlc_snapshot_id(snap));
	ck_assert(!dlc_snapshot_packed(loaded));
	ck_assert_uint_eq(dlc_snapshot_chunk_count(loaded), 0);
	ck_assert_ptr_null(dlc_snapshot_chunk_path(loaded, 0));
	ck_assert_int_eq(dlc_snapshot_chunk(loaded, 2, &member), -ENOENT);
	ck_assert_int_eq(dlc_snapshot_render_chunks(loaded, NULL, 0, &text, &len), 0);
	ck_assert_ptr_null(text);
	ck_assert_uint_eq(len, 0);
	ck_assert(!dlc_snapshot_file_is_packed(file));
	dlc_snapshot_free(loaded);
}
END_TEST

START_TEST(test_damaged_snapshot_is_refused)
{
	char file[PATH_MAX];

	/* The table above assumes that inode 2 is the file "Zebra". */
	ck_assert_str_eq(dlc_snapshot_name(snap, 2), "Zebra");
	damage_copy(damages[_i].sql, file);
	expect_load_error(file, -EINVAL, damages[_i].phrase);
	expect_load_error(file, -EINVAL, "rebuild it with dlcache snapshot or -o refresh");
}
END_TEST

/* ------------------------------------------------------------------------
 * The posix backend.
 */

static struct dlc_backend *make_backend(uint64_t delay_ns, uint64_t bandwidth,
					unsigned fail_every)
{
	struct dlc_backend_config config = {
		.delay_ns = delay_ns, .bandwidth = bandwidth, .fail_every = fail_every,
	};
	struct dlc_backend *made = NULL;
	char *cause = NULL;

	ck_assert_int_eq(dlc_backend_create(src_dir, &config, &made, &cause), 0);
	ck_assert_ptr_null(cause);
	return made;
}

START_TEST(test_backend_reads_bytes)
{
	unsigned char *buf = malloc(BIG_SIZE + 10);
	struct dlc_backend_file *file = NULL;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(dlc_backend_open(backend, "big.bin", &file), 0);
	ck_assert_int_eq(dlc_backend_pread(backend, file, buf, BIG_SIZE + 10, 0), BIG_SIZE);
	for (size_t i = 0; i < BIG_SIZE; i++)
		ck_assert_uint_eq(buf[i], (i * 7 + 3) & 0xff);
	ck_assert_int_eq(dlc_backend_pread(backend, file, buf, 100, BIG_SIZE - 10), 10);
	ck_assert_uint_eq(buf[0], ((BIG_SIZE - 10) * 7 + 3) & 0xff);
	ck_assert_int_eq(dlc_backend_pread(backend, file, buf, 100, BIG_SIZE), 0);
	ck_assert_int_eq(dlc_backend_close(backend, file), 0);

	ck_assert_int_eq(dlc_backend_open(backend, "dir1/sub/deeper/file.txt", &file), 0);
	ck_assert_int_eq(dlc_backend_pread(backend, file, buf, 20000, 0), 12345);
	ck_assert_int_eq(dlc_backend_close(backend, file), 0);
	ck_assert_int_eq(dlc_backend_open(backend, "caf\xc3\xa9 \xe2\x98\x95.txt", &file), 0);
	ck_assert_int_eq(dlc_backend_close(backend, file), 0);
	free(buf);
}
END_TEST

START_TEST(test_backend_open_never_follows_symlinks)
{
	static const struct {
		const char *path;
		int rc;
	} refused[] = {
		{ "link", -ELOOP },
		{ "dangling", -ELOOP },
		{ "dirlink/sub/deeper/file.txt", -ELOOP },
		{ "dir1", -EISDIR },
		{ "", -EISDIR },
		{ "fifo", -EINVAL },
		{ "nope", -ENOENT },
		{ "../src/a.txt", -EINVAL },
		{ "dir1/../a.txt", -EINVAL },
		{ "./a.txt", -EINVAL },
		{ "/etc/passwd", -EINVAL },
		{ "dir1//sub", -EINVAL },
	};

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		struct dlc_backend_file *file = (struct dlc_backend_file *)&file;

		ck_assert_msg(dlc_backend_open(backend, refused[i].path, &file) == refused[i].rc,
			      "open of '%s'", refused[i].path);
		ck_assert_ptr_null(file);
	}
}
END_TEST

START_TEST(test_backend_stat_does_not_follow)
{
	struct dlc_backend_attr attr;

	ck_assert_int_eq(dlc_backend_stat(backend, "link", &attr), 0);
	ck_assert(S_ISLNK(attr.mode));
	ck_assert_int_eq(dlc_backend_stat(backend, "dir1/sub/deeper/file.txt", &attr), 0);
	ck_assert(S_ISREG(attr.mode));
	ck_assert_uint_eq(attr.size, 12345);
	ck_assert_int_eq(attr.mtime_sec, 1700000000);
	ck_assert_uint_eq(attr.mtime_nsec, 5);
	ck_assert_int_eq(dlc_backend_stat(backend, "", &attr), 0);
	ck_assert(S_ISDIR(attr.mode));
	ck_assert_int_lt(dlc_backend_stat(backend, "dirlink/sub", &attr), 0);
	ck_assert_int_eq(dlc_backend_stat(backend, "fifo", &attr), -ENOENT);
	ck_assert_int_eq(dlc_backend_stat(backend, "missing", &attr), -ENOENT);
}
END_TEST

struct seen {
	int files, dirs, links;
	bool fifo;
	char link_target[64];
};

static int note_entry(void *arg, const struct dlc_backend_dirent *entry)
{
	struct seen *seen = arg;

	if (strcmp(entry->name, "fifo") == 0)
		seen->fifo = true;
	if (S_ISREG(entry->attr.mode))
		seen->files++;
	if (S_ISDIR(entry->attr.mode))
		seen->dirs++;
	if (S_ISLNK(entry->attr.mode)) {
		seen->links++;
		if (strcmp(entry->name, "link") == 0)
			snprintf(seen->link_target, sizeof(seen->link_target), "%s",
				 entry->link_target);
	} else if (entry->link_target) {
		return -EINVAL;
	}
	return 0;
}

static int stop_listing(void *arg, const struct dlc_backend_dirent *entry)
{
	(void)entry;
	++*(int *)arg;
	return -ECANCELED;
}

START_TEST(test_backend_list_skips_other_kinds)
{
	struct seen seen = { 0 };
	int calls = 0;

	ck_assert_int_eq(dlc_backend_list(backend, "", note_entry, &seen), 0);
	ck_assert(!seen.fifo);
	ck_assert_int_eq(seen.files, 7);
	ck_assert_int_eq(seen.dirs, 3);
	ck_assert_int_eq(seen.links, 3);
	ck_assert_str_eq(seen.link_target, "a.txt");
	ck_assert_int_eq(dlc_backend_list(backend, "dir2", stop_listing, &calls), -ECANCELED);
	ck_assert_int_eq(calls, 1);
	ck_assert_int_eq(dlc_backend_list(backend, "dirlink", note_entry, &seen), -ELOOP);
	ck_assert_int_eq(dlc_backend_list(backend, "a.txt", note_entry, &seen), -ENOTDIR);
}
END_TEST

START_TEST(test_backend_fail_every_fails_reads)
{
	struct dlc_backend *faulty = make_backend(0, 0, 3);
	struct dlc_backend_file *file = NULL;
	char buf[16];

	ck_assert_int_eq(dlc_backend_open(faulty, "a.txt", &file), 0);
	for (int nth = 1; nth <= 9; nth++) {
		ssize_t n = dlc_backend_pread(faulty, file, buf, sizeof(buf), 0);

		if (nth % 3 == 0)
			ck_assert_int_eq(n, -EIO);
		else
			ck_assert_int_eq(n, 6);
	}
	ck_assert_int_eq(dlc_backend_close(faulty, file), 0);
	ck_assert_uint_eq(faulty->calls[DLC_BACKEND_READ], 9);
	ck_assert_uint_eq(faulty->errors, 3);
	dlc_backend_destroy(faulty);
}
END_TEST

START_TEST(test_backend_counts_calls)
{
	struct dlc_backend *counted = make_backend(0, 0, 0);
	struct dlc_backend_file *file = NULL;
	struct dlc_backend_attr attr;
	struct seen seen = { 0 };
	char buf[8];

	ck_assert_uint_eq(dlc_backend_metadata_calls(counted), 0);
	ck_assert_int_eq(dlc_backend_list(counted, "dir1", note_entry, &seen), 0);
	ck_assert_int_eq(dlc_backend_stat(counted, "a.txt", &attr), 0);
	ck_assert_int_eq(dlc_backend_stat(counted, "nope", &attr), -ENOENT);
	ck_assert_int_eq(dlc_backend_open(counted, "a.txt", &file), 0);
	ck_assert_int_eq(dlc_backend_pread(counted, file, buf, sizeof(buf), 0), 6);
	ck_assert_int_eq(dlc_backend_pread(counted, file, buf, sizeof(buf), 6), 0);
	ck_assert_int_eq(dlc_backend_close(counted, file), 0);
	ck_assert_uint_eq(counted->calls[DLC_BACKEND_LIST], 1);
	ck_assert_uint_eq(counted->calls[DLC_BACKEND_STAT], 2);
	ck_assert_uint_eq(counted->calls[DLC_BACKEND_OPEN], 1);
	ck_assert_uint_eq(counted->calls[DLC_BACKEND_READ], 2);
	ck_assert_uint_eq(counted->calls[DLC_BACKEND_CLOSE], 1);
	ck_assert_uint_eq(counted->errors, 1);
	ck_assert_uint_eq(dlc_backend_metadata_calls(counted), 3);
	dlc_backend_destroy(counted);
}
END_TEST

static double seconds_since(const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

START_TEST(test_backend_emulates_delay_and_bandwidth)
{
	struct dlc_backend *slow = make_backend(20000000, 0, 0);       /* 20 ms a call */
	struct dlc_backend *narrow = make_backend(0, 1000000, 0);      /* 1 MB/s */
	struct dlc_backend_file *file = NULL;
	struct dlc_backend_attr attr;
	struct timespec start;
	char *buf = malloc(BIG_SIZE);

	ck_assert_ptr_nonnull(buf);
	clock_gettime(CLOCK_MONOTONIC, &start);
	ck_assert_int_eq(dlc_backend_stat(slow, "a.txt", &attr), 0);
	ck_assert_double_ge(seconds_since(&start), 0.020);

	ck_assert_int_eq(dlc_backend_open(narrow, "big.bin", &file), 0);
	clock_gettime(CLOCK_MONOTONIC, &start);
	ck_assert_int_eq(dlc_backend_pread(narrow, file, buf, 50000, 0), 50000);
	ck_assert_double_ge(seconds_since(&start), 0.050);
	ck_assert_int_eq(dlc_backend_close(narrow, file), 0);
	free(buf);
	dlc_backend_destroy(slow);
	dlc_backend_destroy(narrow);
}
END_TEST

/* Deeper than the path index's component limit: resolve falls back to
 * component-by-component search and still finds (or refuses) the entry. */
START_TEST(test_resolve_of_very_deep_paths)
{
	char relative[2048] = "deep";
	char path[4096];
	uint64_t ino;

	make_dir("deep");
	for (int i = 1; i < 300; i++) {
		strcat(relative, "/d");
		make_dir(relative);
	}
	strcat(relative, "/leaf");
	write_file(relative, 5, 1700000000, 0);
	dlc_snapshot_free(snap);
	build_into(snap_file, 0, NULL);
	snap = load_ok(snap_file);
	ino = dlc_snapshot_resolve(snap, relative);
	ck_assert_uint_ne(ino, 0);
	ck_assert_int_eq(dlc_snapshot_path(snap, ino, path, sizeof(path)), 0);
	ck_assert_str_eq(path, relative);
	ck_assert_uint_eq(dlc_snapshot_node(snap, ino)->size, 5);
	strcat(relative, "x");
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, relative), 0);
	/* The same entries through the index, after the deep ones. */
	ck_assert_uint_ne(dlc_snapshot_resolve(snap, "deep/d/d"), 0);
	ck_assert_uint_eq(dlc_snapshot_resolve(snap, "deep/d/x"), 0);
}
END_TEST

static Suite *snapshot_suite(void)
{
	Suite *s = suite_create("snapshot");
	TCase *tc;

	tc = tcase_create("build");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_build_counts_every_entry);
	tcase_add_test(tc, test_build_lists_each_directory_once);
	tcase_add_test(tc, test_build_numbering_does_not_depend_on_threads);
	tcase_add_test(tc, test_build_replaces_existing_file);
	tcase_add_test(tc, test_build_of_an_empty_source);
	tcase_add_test(tc, test_build_progress_line);
	tcase_add_test(tc, test_build_into_missing_directory_fails);
	suite_add_tcase(s, tc);

	tc = tcase_create("lookup");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_every_entry_resolves_with_lstat_attributes);
	tcase_add_test(tc, test_lookup_of_missing_names);
	tcase_add_test(tc, test_resolve_path_forms);
	tcase_add_test(tc, test_path_round_trips_through_resolve);
	tcase_add_test(tc, test_path_buffer_bounds);
	tcase_add_test(tc, test_resolve_of_very_deep_paths);
	suite_add_tcase(s, tc);

	tc = tcase_create("numbering");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_children_contiguous_and_sorted);
	tcase_add_test(tc, test_symlink_targets);
	suite_add_tcase(s, tc);

	tc = tcase_create("refusals");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_bad_sources_are_refused);
	tcase_add_test(tc, test_missing_snapshot_is_refused);
	tcase_add_test(tc, test_foreign_file_is_refused);
	tcase_add_test(tc, test_snapshot_without_layout_loads_as_a_tree);
	tcase_add_loop_test(tc, test_damaged_snapshot_is_refused, 0,
			    (int)(sizeof(damages) / sizeof(damages[0])));
	suite_add_tcase(s, tc);

	tc = tcase_create("backend_posix");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_backend_reads_bytes);
	tcase_add_test(tc, test_backend_open_never_follows_symlinks);
	tcase_add_test(tc, test_backend_stat_does_not_follow);
	tcase_add_test(tc, test_backend_list_skips_other_kinds);
	tcase_add_test(tc, test_backend_fail_every_fails_reads);
	tcase_add_test(tc, test_backend_counts_calls);
	tcase_add_test(tc, test_backend_emulates_delay_and_bandwidth);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(snapshot_suite());
	int failures;

	srunner_run_all(sr, CK_ENV);
	failures = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failures ? 1 : 0;
}
