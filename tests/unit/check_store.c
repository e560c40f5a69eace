/*
 * check_store.c - the local cache store: bytes come back exactly as inserted
 * or not at all, the index survives close/open and crashes, a broken index
 * or a full disk never stops the daemon, and two daemons never share a
 * cache_dir.
 *
 * Every test gets a fresh temporary directory (root) and a cache_dir inside
 * it that does not exist yet.  Crashes are simulated with a child process
 * (this program, re-executed) that opens the store, changes it and is
 * killed with SIGKILL.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>
#include <xxhash.h>

#include "dlcache/hash.h"
#include "dlcache/log.h"
#include "dlcache/store.h"
/* White box: the invariants test breaks the state on purpose. */
#include "../../src/cache/store_private.h"

static char root[PATH_MAX];
static char cache_dir[PATH_MAX];
static char mnt_dir[PATH_MAX];   /* the tmpfs of the ENOSPC case, if mounted */
static bool mnt_mounted;

/* snprintf for paths, failing the test instead of truncating. */
static void fmt_path(char *out, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void fmt_path(char *out, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, size, fmt, ap);
	va_end(ap);
	ck_assert_msg(n >= 0 && (size_t)n < size, "path too long");
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/check_store.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	fmt_path(cache_dir, sizeof(cache_dir), "%s/cache", root);
	mnt_mounted = false;
	dlc_log_init(DLC_LOG_ERROR, false);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void teardown(void)
{
	if (mnt_mounted)
		umount2(mnt_dir, MNT_DETACH);
	nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Deterministic bytes that differ by seed. */
static void *make_bytes(size_t size, unsigned seed)
{
	unsigned char *p = malloc(size ? size : 1);

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < size; i++)
		p[i] = (unsigned char)((i * 131u + seed * 7919u + (i >> 8)) & 0xff);
	return p;
}

static struct dlc_store *open_ok(void)
{
	struct dlc_store *store = NULL;
	char *cause = NULL;
	int rc = dlc_store_open(cache_dir, &store, &cause);

	ck_assert_msg(rc == 0, "open: %s (%s)", strerror(-rc), cause ? cause : "no cause");
	ck_assert_ptr_null(cause);
	ck_assert_ptr_nonnull(store);
	return store;
}

/* cache_dir/data/XX/NAME of path, as store.h lays it out. */
static void file_of(const char *path, char *out, size_t size)
{
	char name[17];

	snprintf(name, sizeof(name), "%016" PRIx64, (uint64_t)XXH3_64bits(path, strlen(path)));
	fmt_path(out, size, "%s/data/%.2s/%s", cache_dir, name, name);
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* Entries in dir other than . and .., recursively for data/. */
static size_t count_files(const char *dir)
{
	struct dirent *de;
	size_t n = 0;
	DIR *d = opendir(dir);

	ck_assert_msg(d != NULL, "opendir %s: %s", dir, strerror(errno));
	while ((de = readdir(d)) != NULL) {
		char sub[PATH_MAX];
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		fmt_path(sub, sizeof(sub), "%s/%s", dir, de->d_name);
		ck_assert_int_eq(lstat(sub, &st), 0);
		n += S_ISDIR(st.st_mode) ? count_files(sub) : 1;
	}
	closedir(d);
	return n;
}

static size_t count_in(const char *sub)
{
	char dir[PATH_MAX];

	fmt_path(dir, sizeof(dir), "%s/%s", cache_dir, sub);
	return count_files(dir);
}

static void write_file(const char *path, const void *data, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, data, size), (ssize_t)size);
	close(fd);
}

/* Runs SQL on cache_dir/index.db through a connection of its own. */
static void db_exec(const char *sql)
{
	char path[PATH_MAX];
	sqlite3 *db;
	char *err = NULL;

	fmt_path(path, sizeof(path), "%s/index.db", cache_dir);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, &err) == SQLITE_OK, "%s: %s", sql, err);
	sqlite3_close(db);
}

static int count_row(void *arg, int n, char **values, char **names)
{
	*(long *)arg = strtol(values[0], NULL, 10);
	return 0;
}

/* Rows another process would see committed in entries. */
static long committed_rows(void)
{
	char path[PATH_MAX];
	sqlite3 *db;
	long n = -1;

	fmt_path(path, sizeof(path), "%s/index.db", cache_dir);
	ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	ck_assert_int_eq(sqlite3_exec(db, "SELECT count(*) FROM entries", count_row, &n, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	return n;
}

/* What dlc_store_load reports, copied. */
struct loaded {
	size_t n;
	size_t cap;
	struct dlc_store_entry *entries;
};

static int collect(void *arg, const struct dlc_store_entry *entry)
{
	struct loaded *l = arg;

	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->entries = realloc(l->entries, l->cap * sizeof(*l->entries));
		ck_assert_ptr_nonnull(l->entries);
	}
	l->entries[l->n] = *entry;
	l->entries[l->n].path = strdup(entry->path);
	l->n++;
	return 1;
}

static const struct dlc_store_entry *find(const struct loaded *l, const char *path)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->entries[i].path, path) == 0)
			return &l->entries[i];
	return NULL;
}

static void loaded_free(struct loaded *l)
{
	for (size_t i = 0; i < l->n; i++)
		free((char *)l->entries[i].path);
	free(l->entries);
	memset(l, 0, sizeof(*l));
}

static void load_all(struct dlc_store *store, struct loaded *l)
{
	memset(l, 0, sizeof(*l));
	ck_assert_int_eq(dlc_store_load(store, collect, l), 0);
}

/* Inserts path with size bytes of seed; returns the hash. */
static uint64_t insert_ok(struct dlc_store *store, const char *path, size_t size, unsigned seed,
			  int64_t mtime_ns)
{
	void *data = make_bytes(size, seed);
	uint64_t hash = 0;
	int rc = dlc_store_insert(store, path, data, size, mtime_ns, &hash, NULL);

	ck_assert_msg(rc == 0, "insert %s: %s", path, strerror(-rc));
	ck_assert_uint_eq(hash, XXH3_64bits(data, size));
	free(data);
	return hash;
}

/* Reads path back and compares it with size bytes of seed. */
static void read_ok(struct dlc_store *store, const char *path, size_t size, unsigned seed,
		    uint64_t hash)
{
	void *want = make_bytes(size, seed);
	void *got = malloc(size ? size : 1);
	int rc = dlc_store_read(store, path, got, size, hash, NULL);

	ck_assert_msg(rc == 0, "read %s: %s", path, strerror(-rc));
	ck_assert(memcmp(want, got, size) == 0);
	free(want);
	free(got);
}

static int read_rc(struct dlc_store *store, const char *path, size_t size, uint64_t hash)
{
	void *buf = malloc(size ? size : 1);
	int rc = dlc_store_read(store, path, buf, size, hash, NULL);

	free(buf);
	return rc;
}

/* ---- round trip ---------------------------------------------------------- */

START_TEST(test_roundtrip_sizes)
{
	static const size_t sizes[] = { 0, 1, 4095, 4096, 4097, 110000, 1 << 20 };
	struct dlc_store *store = open_ok();
	uint64_t hashes[sizeof(sizes) / sizeof(sizes[0])];
	char path[64], file[PATH_MAX];
	struct stat st;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(path, sizeof(path), "train/n01/img_%zu.JPEG", sizes[i]);
		hashes[i] = insert_ok(store, path, sizes[i], (unsigned)i, 1000 + (int64_t)i);
		file_of(path, file, sizeof(file));
		ck_assert_int_eq(stat(file, &st), 0);
		ck_assert_int_eq(st.st_size, (off_t)sizes[i]);
		ck_assert_int_eq(st.st_mode & 0777, 0600);
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(path, sizeof(path), "train/n01/img_%zu.JPEG", sizes[i]);
		read_ok(store, path, sizes[i], (unsigned)i, hashes[i]);
	}
	ck_assert_uint_eq(count_in("tmp"), 0);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/*
 * An insert's stamp opens the file it wrote at once (no read-back), is the
 * stamp a checked read of that file gives, and stops opening it once
 * anything writes the file or puts another in its place.
 */
START_TEST(test_insert_stamp_opens_the_written_file_until_it_changes)
{
	struct dlc_store *store = open_ok();
	void *data = make_bytes(20000, 7), *got = malloc(20000);
	uint64_t hash, stamp = 0, read_stamp = 0;
	char file[PATH_MAX];
	int fd;

	ck_assert_int_eq(dlc_store_insert(store, "s.jpg", data, 20000, 1, &hash, &stamp), 0);
	ck_assert_uint_ne(stamp, 0);
	ck_assert_int_eq(dlc_store_open_checked(store, "s.jpg", stamp, &fd), DLC_STORE_SAME);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, got, 20000, 0), 20000);
	ck_assert(memcmp(got, data, 20000) == 0);
	close(fd);
	ck_assert_int_eq(dlc_store_read(store, "s.jpg", got, 20000, hash, &read_stamp), 0);
	ck_assert_uint_eq(read_stamp, stamp);

	/* One byte rewritten in place, as a stray process might. */
	file_of("s.jpg", file, sizeof(file));
	fd = open(file, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "Z", 1, 100), 1);
	close(fd);
	ck_assert_int_eq(dlc_store_open_checked(store, "s.jpg", stamp, &fd), DLC_STORE_CHANGED);
	ck_assert_int_eq(fd, -1);

	/* A new insert of the path: the old stamp names the old file only. */
	ck_assert_int_eq(dlc_store_insert(store, "s.jpg", data, 20000, 1, &hash, &read_stamp), 0);
	ck_assert_uint_ne(read_stamp, stamp);
	ck_assert_int_eq(dlc_store_open_checked(store, "s.jpg", stamp, &fd), DLC_STORE_CHANGED);
	ck_assert_int_eq(fd, -1);
	ck_assert_int_eq(dlc_store_open_checked(store, "s.jpg", read_stamp, &fd), DLC_STORE_SAME);
	ck_assert_int_ge(fd, 0);
	close(fd);
	free(data);
	free(got);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

START_TEST(test_replace_keeps_one_entry)
{
	struct dlc_store *store = open_ok();
	uint64_t old_hash = insert_ok(store, "a.jpg", 5000, 1, 1);
	uint64_t new_hash = insert_ok(store, "a.jpg", 7000, 2, 2);
	struct loaded l;

	read_ok(store, "a.jpg", 7000, 2, new_hash);
	ck_assert_int_eq(read_rc(store, "a.jpg", 5000, old_hash), -EBADMSG);
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_uint_eq(l.entries[0].size, 7000);
	ck_assert_uint_eq(l.entries[0].hash, new_hash);
	ck_assert_int_eq(l.entries[0].mtime_ns, 2);
	loaded_free(&l);
	ck_assert_uint_eq(count_in("data"), 1);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/*
 * dlc_store_verify holds through a store's life, and catches the states
 * its DESIGN block rules out when they are made on purpose (verify builds
 * abort on them at each release of the lock).
 */
START_TEST(test_verify_holds_and_catches_broken_states)
{
	struct dlc_store *store = open_ok();

	ck_assert_int_eq(dlc_store_verify(store), 0);
	(void)insert_ok(store, "a.jpg", 5000, 1, 1);
	ck_assert(store->in_txn);                   /* the batch is open */
	ck_assert_int_eq(dlc_store_verify(store), 0);
	ck_assert_int_eq(dlc_store_flush(store), 0);
	ck_assert_int_eq(dlc_store_verify(store), 0);

	store->in_txn = true;                       /* a flag SQLite disagrees with */
	ck_assert_int_eq(dlc_store_verify(store), -EUCLEAN);
	store->in_txn = false;
	store->no_index = true;                     /* "no index" with a connection */
	ck_assert_int_eq(dlc_store_verify(store), -EUCLEAN);
	store->no_index = false;
	ck_assert_int_eq(dlc_store_verify(store), 0);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

START_TEST(test_footprint)
{
	ck_assert_uint_eq(dlc_store_footprint(0), 0);
	ck_assert_uint_eq(dlc_store_footprint(1), 4096);
	ck_assert_uint_eq(dlc_store_footprint(4096), 4096);
	ck_assert_uint_eq(dlc_store_footprint(4097), 8192);
	ck_assert_uint_eq(dlc_store_footprint(110000), 110592);
	ck_assert_uint_eq(dlc_store_footprint(UINT64_MAX) % 4096, 0);
}
END_TEST

START_TEST(test_open_creates_layout)
{
	struct dlc_store *store;
	char nested[PATH_MAX], sub[PATH_MAX], *real;
	struct stat st;

	fmt_path(nested, sizeof(nested), "%s/a/b", root);
	fmt_path(cache_dir, sizeof(cache_dir), "%s/a/b/cache/", root);
	store = open_ok();
	ck_assert_int_eq(stat(cache_dir, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0700);
	ck_assert_int_eq(stat(nested, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	for (unsigned i = 0; i < 256; i++) {
		fmt_path(sub, sizeof(sub), "%s/data/%02x", cache_dir, i);
		ck_assert_int_eq(stat(sub, &st), 0);
		ck_assert(S_ISDIR(st.st_mode));
	}
	fmt_path(sub, sizeof(sub), "%s/tmp", cache_dir);
	ck_assert(exists(sub));
	real = realpath(cache_dir, NULL);
	ck_assert_str_eq(dlc_store_dir(store), real);
	free(real);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

START_TEST(test_open_keeps_existing_mode)
{
	struct dlc_store *store;
	struct stat st;

	ck_assert_int_eq(mkdir(cache_dir, 0755), 0);
	ck_assert_int_eq(chmod(cache_dir, 0755), 0);
	store = open_ok();
	ck_assert_int_eq(dlc_store_close(store), 0);
	ck_assert_int_eq(stat(cache_dir, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0755);
}
END_TEST

/* Whoever may write cache_dir could swap index.db and data/ together. */
START_TEST(test_open_refuses_a_cache_dir_others_can_write)
{
	static const mode_t loose[] = { 0777, 0775, 0757, 01777, 0720 };
	struct dlc_store *store = NULL;
	char *cause = NULL;

	ck_assert_int_eq(mkdir(cache_dir, 0700), 0);
	for (size_t i = 0; i < sizeof(loose) / sizeof(loose[0]); i++) {
		ck_assert_int_eq(chmod(cache_dir, loose[i]), 0);
		ck_assert_int_eq(dlc_store_open(cache_dir, &store, &cause), -EPERM);
		ck_assert_ptr_null(store);
		ck_assert_ptr_nonnull(cause);
		ck_assert_msg(strstr(cause, "writable by other users") && strstr(cause, "chmod go-w"),
			      "cause: %s", cause);
		free(cause);
		cause = NULL;
	}
	/* Nothing was created in it. */
	ck_assert_uint_eq(count_files(cache_dir), 0);
	ck_assert_int_eq(chmod(cache_dir, 0750), 0);
	store = open_ok();
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

START_TEST(test_open_refuses_a_cache_dir_of_another_user)
{
	struct dlc_store *store = NULL;
	char *cause = NULL;

	if (geteuid() != 0) {
		fprintf(stderr, "check_store: not root; the other-owner case is skipped\n");
		return;
	}
	ck_assert_int_eq(mkdir(cache_dir, 0700), 0);
	ck_assert_int_eq(chown(cache_dir, 65534, 65534), 0);
	ck_assert_int_eq(dlc_store_open(cache_dir, &store, &cause), -EPERM);
	ck_assert_ptr_null(store);
	ck_assert_msg(cause && strstr(cause, "belongs to user 65534"), "cause: %s", cause);
	free(cause);
}
END_TEST

START_TEST(test_open_not_a_directory)
{
	struct dlc_store *store = (struct dlc_store *)1;
	char *cause = NULL;

	write_file(cache_dir, "x", 1);
	ck_assert_int_eq(dlc_store_open(cache_dir, &store, &cause), -ENOTDIR);
	ck_assert_ptr_null(store);
	ck_assert_ptr_nonnull(cause);
	free(cause);
	cause = NULL;
	strcat(cache_dir, "/sub");
	ck_assert_int_eq(dlc_store_open(cache_dir, &store, &cause), -ENOTDIR);
	ck_assert_ptr_nonnull(cause);
	free(cause);
}
END_TEST

/* ---- verification -------------------------------------------------------- */

START_TEST(test_read_wrong_size_or_hash)
{
	struct dlc_store *store = open_ok();
	uint64_t hash = insert_ok(store, "x.png", 3000, 5, 0);

	ck_assert_int_eq(read_rc(store, "x.png", 3001, hash), -EBADMSG);
	ck_assert_int_eq(read_rc(store, "x.png", 2999, hash), -EBADMSG);
	ck_assert_int_eq(read_rc(store, "x.png", 3000, hash ^ 1), -EBADMSG);
	ck_assert_int_eq(read_rc(store, "x.png", 3000, hash), 0);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

START_TEST(test_read_corrupted_file)
{
	struct dlc_store *store = open_ok();
	uint64_t hash = insert_ok(store, "c.jpg", 110000, 9, 0);
	char file[PATH_MAX];
	unsigned char byte;
	int fd;

	file_of("c.jpg", file, sizeof(file));
	fd = open(file, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &byte, 1, 54321), 1);
	byte ^= 0x10;
	ck_assert_int_eq(pwrite(fd, &byte, 1, 54321), 1);
	close(fd);
	ck_assert_int_eq(read_rc(store, "c.jpg", 110000, hash), -EBADMSG);

	ck_assert_int_eq(truncate(file, 100), 0);
	ck_assert_int_eq(read_rc(store, "c.jpg", 110000, hash), -EBADMSG);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* Pages of file in the page cache, after writing them out and dropping them
 * first when drop is set. */
static size_t resident_pages(const char *file, bool drop)
{
	struct stat st;
	unsigned char vec[1024];
	size_t pages, n = 0;
	void *map;
	int fd = open(file, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	if (drop) {
		ck_assert_int_eq(fdatasync(fd), 0);
		ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	}
	pages = ((size_t)st.st_size + 4095) / 4096;
	ck_assert_uint_le(pages, sizeof(vec));
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	ck_assert_int_eq(mincore(map, (size_t)st.st_size, vec), 0);
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	munmap(map, (size_t)st.st_size);
	close(fd);
	return n;
}

/*
 * A block read into an aligned buffer (as the blocks' spare buffers are)
 * goes straight from the disk (O_DIRECT), leaving nothing in the cache
 * file's page cache; a misaligned buffer reads through it.  Both check the
 * size and the hash.
 */
START_TEST(test_aligned_block_reads_bypass_the_page_cache)
{
	const size_t size = 1 << 20;
	struct dlc_store *store = open_ok();
	uint64_t hash = insert_ok(store, "block", size, 3, 0);
	unsigned char *want = make_bytes(size, 3), *buf = aligned_alloc(4096, size + 4096);
	char file[PATH_MAX];
	int fd;

	ck_assert_ptr_nonnull(buf);
	file_of("block", file, sizeof(file));
	fd = open(file, O_RDONLY | O_DIRECT);
	if (fd < 0 && errno == EINVAL) {
		/* This file system has no O_DIRECT: the store reads buffered. */
		read_ok(store, "block", size, 3, hash);
		goto out;
	}
	ck_assert_int_ge(fd, 0);
	close(fd);

	ck_assert_uint_eq(resident_pages(file, true), 0);
	ck_assert_int_eq(dlc_store_read(store, "block", buf, size, hash, NULL), 0);
	ck_assert(memcmp(buf, want, size) == 0);
	ck_assert_uint_eq(resident_pages(file, false), 0);
	ck_assert_int_eq(dlc_store_read(store, "block", buf, size, hash ^ 1, NULL), -EBADMSG);

	/* Misaligned: through the page cache, the same bytes. */
	ck_assert_int_eq(dlc_store_read(store, "block", buf + 1, size, hash, NULL), 0);
	ck_assert(memcmp(buf + 1, want, size) == 0);
	ck_assert_uint_eq(resident_pages(file, false), size / 4096);

	/* A change not yet written back is seen by the direct read too. */
	fd = open(file, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "x", 1, 777), 1);
	close(fd);
	ck_assert_int_eq(dlc_store_read(store, "block", buf, size, hash, NULL), -EBADMSG);
out:
	free(want);
	free(buf);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/*
 * The store's hash is XXH3-64, whichever instructions compute it: the same
 * value as the library's at every length (each of XXH3's paths: up to 16,
 * 128 and 240 bytes, then stripes and blocks) and alignment, and the AVX2
 * build is the one used wherever the processor has AVX2.
 */
START_TEST(test_hash_is_the_librarys_xxh3_at_every_length)
{
	const size_t max = (1 << 20) + 64;
	unsigned char *data = make_bytes(max, 17);

	for (size_t len = 0; len <= 5000; len++)
		ck_assert_uint_eq(dlc_xxh3(data + len % 7, len), XXH3_64bits(data + len % 7, len));
	for (size_t len = 5001; len < max - 64; len = len * 3 / 2 + 11)
		ck_assert_uint_eq(dlc_xxh3(data + 3, len), XXH3_64bits(data + 3, len));
	ck_assert_uint_eq(dlc_xxh3(data, max), XXH3_64bits(data, max));
#if defined(__x86_64__)
	ck_assert_int_eq(dlc_xxh3_uses_avx2(), __builtin_cpu_supports("avx2") ? 1 : 0);
#endif
	free(data);
}
END_TEST

START_TEST(test_read_missing_file)
{
	struct dlc_store *store = open_ok();
	uint64_t hash = insert_ok(store, "m.jpg", 100, 1, 0);
	char file[PATH_MAX];

	file_of("m.jpg", file, sizeof(file));
	ck_assert_int_eq(unlink(file), 0);
	ck_assert_int_eq(read_rc(store, "m.jpg", 100, hash), -ENOENT);
	ck_assert_int_eq(read_rc(store, "never-inserted", 100, hash), -ENOENT);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

START_TEST(test_read_symlink_refused)
{
	struct dlc_store *store = open_ok();
	void *data = make_bytes(100, 3);
	uint64_t hash = XXH3_64bits(data, 100);
	char file[PATH_MAX], target[PATH_MAX];

	/* The right bytes, but behind a symlink nobody in the store made. */
	fmt_path(target, sizeof(target), "%s/elsewhere", root);
	write_file(target, data, 100);
	file_of("s.jpg", file, sizeof(file));
	ck_assert_int_eq(symlink(target, file), 0);
	ck_assert_int_eq(read_rc(store, "s.jpg", 100, hash), -EBADMSG);
	free(data);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* ---- persistence --------------------------------------------------------- */

START_TEST(test_persists_across_close)
{
	struct dlc_store *store = open_ok();
	uint64_t hashes[50];
	char path[64], *value = NULL;
	struct loaded l;

	for (unsigned i = 0; i < 50; i++) {
		snprintf(path, sizeof(path), "val/cls%u/%u.jpg", i % 7, i);
		hashes[i] = insert_ok(store, path, 100 + 37 * i, i, 1700000000123456789LL + i);
	}
	ck_assert_int_eq(dlc_store_meta_set(store, "hits", "12345"), 0);
	ck_assert_int_eq(dlc_store_close(store), 0);

	store = open_ok();
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 50);
	for (unsigned i = 0; i < 50; i++) {
		const struct dlc_store_entry *e;

		snprintf(path, sizeof(path), "val/cls%u/%u.jpg", i % 7, i);
		e = find(&l, path);
		ck_assert_msg(e != NULL, "%s not loaded", path);
		ck_assert_uint_eq(e->size, 100 + 37 * i);
		ck_assert_int_eq(e->mtime_ns, 1700000000123456789LL + i);
		ck_assert_uint_eq(e->hash, hashes[i]);
		read_ok(store, path, e->size, i, e->hash);
	}
	loaded_free(&l);
	ck_assert_int_eq(dlc_store_meta_get(store, "hits", &value), 0);
	ck_assert_str_eq(value, "12345");
	free(value);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

START_TEST(test_meta)
{
	struct dlc_store *store = open_ok();
	char *value = (char *)1;

	ck_assert_int_eq(dlc_store_meta_get(store, "absent", &value), -ENOENT);
	ck_assert_int_eq(dlc_store_meta_set(store, "k", "one"), 0);
	ck_assert_int_eq(dlc_store_meta_set(store, "k", "two"), 0);
	ck_assert_int_eq(dlc_store_meta_get(store, "k", &value), 0);
	ck_assert_str_eq(value, "two");
	free(value);
	ck_assert_int_eq(dlc_store_meta_get(store, "format", &value), 0);
	ck_assert_str_eq(value, "2");
	free(value);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* A cache_dir reused for another source: nothing of the first is kept. */
START_TEST(test_claim_by_another_source_drops_every_entry)
{
	struct dlc_store *store = open_ok();
	uint64_t dropped = 99, hash;
	char path[64], *value = NULL;
	struct loaded l;

	ck_assert_int_eq(dlc_store_claim(store, "/data/a", &dropped), 0);
	ck_assert_uint_eq(dropped, 0);
	for (unsigned i = 0; i < 20; i++) {
		snprintf(path, sizeof(path), "d/%u", i);
		insert_ok(store, path, 100 + i, i, 1700000000000000000LL);
	}
	/* The same source again keeps everything, across a close. */
	ck_assert_int_eq(dlc_store_close(store), 0);
	store = open_ok();
	ck_assert_int_eq(dlc_store_claim(store, "/data/a", &dropped), 0);
	ck_assert_uint_eq(dropped, 0);
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 20);
	loaded_free(&l);

	/* Another source: every entry, file and row, goes. */
	ck_assert_int_eq(dlc_store_claim(store, "/data/b", &dropped), 0);
	ck_assert_uint_eq(dropped, 20);
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 0);
	loaded_free(&l);
	hash = 0;
	ck_assert_int_eq(dlc_store_read(store, "d/3", (char[103]){ 0 }, 103, hash, NULL), -ENOENT);
	ck_assert_int_eq(dlc_store_meta_get(store, "source", &value), 0);
	ck_assert_str_eq(value, "/data/b");
	free(value);
	ck_assert_int_eq(dlc_store_close(store), 0);

	/* And it stays claimed by b after a reopen. */
	store = open_ok();
	ck_assert_int_eq(dlc_store_claim(store, "/data/b", &dropped), 0);
	ck_assert_uint_eq(dropped, 0);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

START_TEST(test_flusher_commits_within_a_second)
{
	struct dlc_store *store = open_ok();

	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	insert_ok(store, "f.jpg", 10, 1, 0);
	/* Batched: not committed at once (unless this machine is very slow)... */
	if (committed_rows() != 0) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ck_assert_msg(t1.tv_sec - t0.tv_sec >= 1, "insert committed at once");
	}
	/* ...but within a second. */
	usleep(1600 * 1000);
	ck_assert_int_eq(committed_rows(), 1);
	insert_ok(store, "g.jpg", 10, 1, 0);
	ck_assert_int_eq(dlc_store_flush(store), 0);
	ck_assert_int_eq(committed_rows(), 2);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* ---- removal and load's drop --------------------------------------------- */

START_TEST(test_remove)
{
	struct dlc_store *store = open_ok();
	uint64_t hash = insert_ok(store, "r.jpg", 4000, 1, 0);
	char file[PATH_MAX];
	struct loaded l;

	file_of("r.jpg", file, sizeof(file));
	ck_assert_int_eq(dlc_store_remove(store, "r.jpg"), 0);
	ck_assert(!exists(file));
	ck_assert_int_eq(read_rc(store, "r.jpg", 4000, hash), -ENOENT);
	ck_assert_int_eq(dlc_store_remove(store, "r.jpg"), -ENOENT);
	ck_assert_int_eq(dlc_store_remove(store, "never"), -ENOENT);
	ck_assert_int_eq(dlc_store_close(store), 0);

	store = open_ok();
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 0);
	loaded_free(&l);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

static int drop_odd(void *arg, const struct dlc_store_entry *entry)
{
	unsigned i;

	(*(unsigned *)arg)++;
	ck_assert_int_eq(sscanf(entry->path, "d/%u", &i), 1);
	return i % 2 == 0;
}

START_TEST(test_load_drop)
{
	struct dlc_store *store = open_ok();
	char path[32], file[PATH_MAX];
	unsigned calls = 0;
	struct loaded l;

	for (unsigned i = 0; i < 20; i++) {
		snprintf(path, sizeof(path), "d/%u", i);
		insert_ok(store, path, 500, i, 0);
	}
	ck_assert_int_eq(dlc_store_load(store, drop_odd, &calls), 0);
	ck_assert_uint_eq(calls, 20);
	for (unsigned i = 0; i < 20; i++) {
		snprintf(path, sizeof(path), "d/%u", i);
		file_of(path, file, sizeof(file));
		ck_assert_msg(exists(file) == (i % 2 == 0), "%s", path);
	}
	ck_assert_int_eq(dlc_store_close(store), 0);

	store = open_ok();
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 10);
	for (size_t i = 0; i < l.n; i++) {
		unsigned k;

		ck_assert_int_eq(sscanf(l.entries[i].path, "d/%u", &k), 1);
		ck_assert_uint_eq(k % 2, 0);
	}
	loaded_free(&l);
	ck_assert_uint_eq(count_in("data"), 10);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

static int stop_at_first(void *arg, const struct dlc_store_entry *entry)
{
	(*(unsigned *)arg)++;
	return -EIO;
}

START_TEST(test_load_stops_on_error)
{
	struct dlc_store *store = open_ok();
	unsigned calls = 0;

	insert_ok(store, "1", 1, 1, 0);
	insert_ok(store, "2", 1, 2, 0);
	ck_assert_int_eq(dlc_store_load(store, stop_at_first, &calls), -EIO);
	ck_assert_uint_eq(calls, 1);
	ck_assert_uint_eq(count_in("data"), 2);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* The callback may call the store: load holds no lock while it runs. */
static int remove_from_cb(void *arg, const struct dlc_store_entry *entry)
{
	struct dlc_store *store = arg;

	ck_assert_int_eq(dlc_store_remove(store, entry->path), 0);
	return 1;
}

START_TEST(test_load_many_in_chunks)
{
	struct dlc_store *store = open_ok();
	char path[32];
	struct loaded l;

	for (unsigned i = 0; i < 2500; i++) {
		snprintf(path, sizeof(path), "many/%04u", i);
		insert_ok(store, path, i % 3, i, i);
	}
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 2500);
	for (unsigned i = 0; i < 2500; i++) {
		snprintf(path, sizeof(path), "many/%04u", i);
		ck_assert_msg(find(&l, path) != NULL, "%s missing", path);
	}
	loaded_free(&l);
	ck_assert_int_eq(dlc_store_load(store, remove_from_cb, store), 0);
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 0);
	loaded_free(&l);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* ---- crashes ------------------------------------------------------------- */

/*
 * The crashing daemon, run as "check_store --crash-child DIR" in a process
 * of its own (so valgrind does not report the store it never closes): opens,
 * inserts, flushes, inserts more, and is killed with SIGKILL.
 */
static int crash_child(const char *dir)
{
	static unsigned char data[6000];
	struct dlc_store *store;
	uint64_t hash;

	/* No check macros here: this process is not under the test runner. */
	dlc_log_init(DLC_LOG_ERROR, false);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)((i * 131u + (i >> 8)) & 0xff);
	if (dlc_store_open(dir, &store, NULL) != 0)
		return 10;
	if (dlc_store_insert(store, "keep.jpg", data, 6000, 42, &hash, NULL) != 0 ||
	    dlc_store_insert(store, "gone.jpg", data, 6000, 42, &hash, NULL) != 0 ||
	    dlc_store_insert(store, "torn.jpg", data, 6000, 42, &hash, NULL) != 0 ||
	    dlc_store_flush(store) != 0 ||
	    dlc_store_insert(store, "late.jpg", data, 6000, 42, &hash, NULL) != 0)
		return 11;
	kill(getpid(), SIGKILL);
	return 12;
}

/* Runs crash_child in a fresh copy of this program; returns its wait status. */
static int run_crash_child(void)
{
	char self[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int status;
	pid_t pid;

	ck_assert_int_gt(len, 0);
	self[len] = '\0';
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execl(self, self, "--crash-child", cache_dir, (char *)NULL);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return status;
}

START_TEST(test_crash_then_reopen_scans)
{
	char orphan[PATH_MAX], junk[PATH_MAX], stale_tmp[PATH_MAX], file[PATH_MAX];
	struct dlc_store *store;
	const struct dlc_store_entry *e;
	struct loaded l;
	int status = run_crash_child();

	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %#x",
		      status);

	/* What a crash (and a careless person) can leave behind. */
	fmt_path(orphan, sizeof(orphan), "%s/data/ab/abababababababab", cache_dir);
	write_file(orphan, "orphan", 6);
	fmt_path(junk, sizeof(junk), "%s/data/ab/not-a-cache-file", cache_dir);
	write_file(junk, "junk", 4);
	fmt_path(stale_tmp, sizeof(stale_tmp), "%s/tmp/123.4", cache_dir);
	write_file(stale_tmp, "half", 4);
	file_of("gone.jpg", file, sizeof(file));
	ck_assert_int_eq(unlink(file), 0);
	file_of("torn.jpg", file, sizeof(file));
	ck_assert_int_eq(truncate(file, 1000), 0);

	store = open_ok();
	ck_assert(!exists(orphan));
	ck_assert(!exists(junk));
	ck_assert(!exists(stale_tmp));
	ck_assert_uint_eq(count_in("tmp"), 0);
	ck_assert(!exists(file));

	load_all(store, &l);
	e = find(&l, "keep.jpg");
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(e->size, 6000);
	ck_assert_int_eq(e->mtime_ns, 42);
	read_ok(store, "keep.jpg", 6000, 0, e->hash);
	ck_assert_ptr_null(find(&l, "gone.jpg"));
	ck_assert_ptr_null(find(&l, "torn.jpg"));
	/* late.jpg was never flushed: either the flusher committed it, or it is gone. */
	file_of("late.jpg", file, sizeof(file));
	e = find(&l, "late.jpg");
	if (e)
		read_ok(store, "late.jpg", 6000, 0, e->hash);
	else
		ck_assert(!exists(file));
	ck_assert_uint_eq(count_in("data"), l.n);
	loaded_free(&l);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/*
 * A power cut loses what the WAL held unsynced.  Emulated here at its worst:
 * the daemon dies after a clean mount and the whole WAL is lost, so index.db
 * is as the clean close left it.  The open must still scan: the files
 * written since have no row and would otherwise stay, uncounted, for good.
 */
START_TEST(test_power_cut_losing_the_wal_still_scans)
{
	char wal[PATH_MAX], shm[PATH_MAX];
	struct dlc_store *store = open_ok();
	void *data = make_bytes(3000, 5);
	uint64_t hash;
	struct loaded l;
	int status;

	ck_assert_int_eq(dlc_store_insert(store, "before.jpg", data, 3000, 1, &hash, NULL), 0);
	ck_assert_int_eq(dlc_store_close(store), 0);
	status = run_crash_child();
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %#x",
		      status);
	ck_assert_uint_eq(count_in("data"), 5);
	fmt_path(wal, sizeof(wal), "%s/index.db-wal", cache_dir);
	fmt_path(shm, sizeof(shm), "%s/index.db-shm", cache_dir);
	ck_assert_int_eq(unlink(wal), 0);
	(void)unlink(shm);

	store = open_ok();
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_ptr_nonnull(find(&l, "before.jpg"));
	read_ok(store, "before.jpg", 3000, 5, find(&l, "before.jpg")->hash);
	ck_assert_uint_eq(count_in("data"), 1);
	loaded_free(&l);
	free(data);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

START_TEST(test_tmp_cleared_at_every_open)
{
	struct dlc_store *store = open_ok();
	char stale_tmp[PATH_MAX];

	ck_assert_int_eq(dlc_store_close(store), 0);
	fmt_path(stale_tmp, sizeof(stale_tmp), "%s/tmp/999.1", cache_dir);
	write_file(stale_tmp, "half", 4);
	store = open_ok();
	ck_assert(!exists(stale_tmp));
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* ---- one daemon per cache_dir --------------------------------------------- */

START_TEST(test_second_open_busy)
{
	struct dlc_store *store = open_ok(), *second = (struct dlc_store *)1;
	char *cause = NULL;

	insert_ok(store, "b.jpg", 10, 1, 0);
	ck_assert_int_eq(dlc_store_open(cache_dir, &second, &cause), -EBUSY);
	ck_assert_ptr_null(second);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, "in use by another dlcache mount") != NULL, "%s", cause);
	free(cause);
	ck_assert_int_eq(dlc_store_close(store), 0);

	store = open_ok();
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* ---- a broken index --------------------------------------------------------- */

static bool has_broken_copy(void)
{
	struct dirent *de;
	bool found = false;
	DIR *d = opendir(cache_dir);

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, "index.db.broken-", 16) == 0)
			found = true;
	closedir(d);
	return found;
}

START_TEST(test_garbage_index_set_aside)
{
	struct dlc_store *store = open_ok();
	char db[PATH_MAX], file[PATH_MAX], garbage[8192];
	struct loaded l;
	uint64_t hash;

	insert_ok(store, "old.jpg", 3000, 1, 0);
	ck_assert_int_eq(dlc_store_close(store), 0);
	memset(garbage, 'x', sizeof(garbage));
	fmt_path(db, sizeof(db), "%s/index.db", cache_dir);
	write_file(db, garbage, sizeof(garbage));

	store = open_ok();
	ck_assert(has_broken_copy());
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 0);
	loaded_free(&l);
	file_of("old.jpg", file, sizeof(file));
	ck_assert(!exists(file)); /* an orphan of the old index */
	hash = insert_ok(store, "new.jpg", 3000, 2, 0);
	ck_assert_int_eq(dlc_store_close(store), 0);

	store = open_ok();
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_uint_eq(l.entries[0].hash, hash);
	loaded_free(&l);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

START_TEST(test_corrupt_pages_after_crash_set_aside)
{
	struct dlc_store *store = open_ok();
	char db[PATH_MAX], path[32], garbage[4096];
	struct loaded l;
	struct stat st;
	int fd;

	for (unsigned i = 0; i < 300; i++) {
		snprintf(path, sizeof(path), "p/%u", i);
		insert_ok(store, path, 10, i, 0);
	}
	ck_assert_int_eq(dlc_store_close(store), 0);
	/* A crash (clean=0) that also tore every page but the header page. */
	db_exec("UPDATE meta SET value = '0' WHERE key = 'clean'");
	fmt_path(db, sizeof(db), "%s/index.db", cache_dir);
	ck_assert_int_eq(stat(db, &st), 0);
	ck_assert_int_ge(st.st_size, 3 * 4096);
	memset(garbage, 0xa5, sizeof(garbage));
	fd = open(db, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	for (off_t off = 4096; off < st.st_size; off += 4096)
		ck_assert_int_eq(pwrite(fd, garbage, sizeof(garbage), off), 4096);
	close(fd);

	store = open_ok();
	ck_assert(has_broken_copy());
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 0);
	loaded_free(&l);
	ck_assert_uint_eq(count_in("data"), 0);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

START_TEST(test_other_format_set_aside)
{
	struct dlc_store *store = open_ok();
	char *value = NULL;
	struct loaded l;

	insert_ok(store, "old.jpg", 300, 1, 0);
	ck_assert_int_eq(dlc_store_close(store), 0);
	db_exec("UPDATE meta SET value = '3' WHERE key = 'format'");

	store = open_ok();
	ck_assert(has_broken_copy());
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 0);
	loaded_free(&l);
	ck_assert_int_eq(dlc_store_meta_get(store, "format", &value), 0);
	ck_assert_str_eq(value, "2");
	free(value);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

START_TEST(test_other_schema_set_aside)
{
	struct dlc_store *store = open_ok();
	struct loaded l;

	ck_assert_int_eq(dlc_store_close(store), 0);
	db_exec("DROP TABLE entries; CREATE TABLE entries(path TEXT PRIMARY KEY, x)");

	store = open_ok();
	ck_assert(has_broken_copy());
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 0);
	loaded_free(&l);
	insert_ok(store, "n.jpg", 10, 1, 0);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* ---- 64-bit name collision -------------------------------------------------- */

START_TEST(test_name_collision)
{
	struct dlc_store *store = open_ok();
	char sql[256], name_c[17], file[PATH_MAX];
	void *data = make_bytes(100, 1);
	uint64_t hash = 0;
	struct loaded l;

	insert_ok(store, "a.jpg", 100, 1, 0);
	ck_assert_int_eq(dlc_store_close(store), 0);
	/* Make "a.jpg" own the file name of "c.jpg", as a real collision would. */
	snprintf(name_c, sizeof(name_c), "%016" PRIx64, (uint64_t)XXH3_64bits("c.jpg", 5));
	snprintf(sql, sizeof(sql), "UPDATE entries SET name = '%s' WHERE path = 'a.jpg'", name_c);
	db_exec(sql);

	store = open_ok();
	ck_assert_int_eq(dlc_store_insert(store, "c.jpg", data, 100, 0, &hash, NULL), -EEXIST);
	file_of("c.jpg", file, sizeof(file));
	ck_assert(!exists(file));
	/* Removing c.jpg must not delete the file a.jpg's row names. */
	write_file(file, "bytes of a.jpg", 14);
	ck_assert_int_eq(dlc_store_remove(store, "c.jpg"), -ENOENT);
	ck_assert(exists(file));
	ck_assert_uint_eq(count_in("tmp"), 0);
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.entries[0].path, "a.jpg");
	loaded_free(&l);
	free(data);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* ---- cache_dir changed behind the store -------------------------------------- */

/* A cleaner of old files, or a person, removed data/ and tmp/ while mounted. */
START_TEST(test_layout_removed_while_open_is_made_again)
{
	struct dlc_store *store = open_ok();
	void *a = make_bytes(5000, 1), *b = make_bytes(7000, 2);
	uint64_t hash_a, hash_b;
	char path[PATH_MAX];

	ck_assert_int_eq(dlc_store_insert(store, "a", a, 5000, 0, &hash_a, NULL), 0);
	fmt_path(path, sizeof(path), "%s/data", cache_dir);
	ck_assert_int_eq(nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
	fmt_path(path, sizeof(path), "%s/tmp", cache_dir);
	ck_assert_int_eq(rmdir(path), 0);
	ck_assert_int_eq(dlc_store_insert(store, "b", b, 7000, 0, &hash_b, NULL), 0);
	read_ok(store, "b", 7000, 2, hash_b);
	ck_assert_int_eq(dlc_store_read(store, "a", a, 5000, hash_a, NULL), -ENOENT);
	/* One data/XX removed alone: the rename into it makes it again. */
	file_of("b", path, sizeof(path));
	ck_assert_int_eq(unlink(path), 0);
	*strrchr(path, '/') = '\0';
	ck_assert_int_eq(rmdir(path), 0);
	ck_assert_int_eq(dlc_store_insert(store, "b", b, 7000, 0, &hash_b, NULL), 0);
	read_ok(store, "b", 7000, 2, hash_b);
	free(a);
	free(b);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* ---- a full disk ------------------------------------------------------------- */

START_TEST(test_disk_full)
{
	enum { BLOB = 24 * 1024 };
	struct dlc_store *store;
	uint64_t hashes[64];
	char path[32];
	struct loaded l;
	unsigned n = 0;
	int rc = 0;

	fmt_path(mnt_dir, sizeof(mnt_dir), "%s/mnt", root);
	ck_assert_int_eq(mkdir(mnt_dir, 0700), 0);
	/*
	 * In a mount namespace of its own where possible, so that the tmpfs
	 * goes away with the test process even if the test fails.
	 */
	if (unshare(CLONE_NEWNS) == 0)
		(void)mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL);
	if (mount("tmpfs", mnt_dir, "tmpfs", 0, "size=256k") != 0) {
		fprintf(stderr, "check_store: cannot mount a tmpfs (%s); disk-full case skipped\n",
			strerror(errno));
		return;
	}
	mnt_mounted = true;
	fmt_path(cache_dir, sizeof(cache_dir), "%s/cache", mnt_dir);
	store = open_ok();
	for (n = 0; n < 64; n++) {
		void *data = make_bytes(BLOB, n);

		snprintf(path, sizeof(path), "full/%u", n);
		rc = dlc_store_insert(store, path, data, BLOB, 0, &hashes[n], NULL);
		free(data);
		if (rc != 0)
			break;
	}
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_uint_gt(n, 0);
	/* Nothing half-written anywhere, and everything before still reads. */
	ck_assert_uint_eq(count_in("tmp"), 0);
	ck_assert_uint_eq(count_in("data"), n);
	for (unsigned i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "full/%u", i);
		read_ok(store, path, BLOB, i, hashes[i]);
	}
	/* Evicting makes room again: for the index and for a later open. */
	ck_assert_uint_ge(n, 4);
	for (unsigned i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "full/%u", i);
		ck_assert_int_eq(dlc_store_remove(store, path), 0);
	}
	ck_assert_int_eq(dlc_store_flush(store), 0);
	ck_assert_int_eq(dlc_store_close(store), 0);

	store = open_ok();
	load_all(store, &l);
	ck_assert_uint_eq(l.n, n - 3);
	loaded_free(&l);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/*
 * A disk that filled up between mounts (another process, or the cache's own
 * files) must not stop the next mount: the store opens without its index,
 * refuses every insert, writes nothing, and the index is whole again for the
 * mount after the disk has room.
 */
START_TEST(test_disk_full_at_open)
{
	enum { BLOB = 24 * 1024 };
	struct dlc_store *store;
	char path[32], filler[PATH_MAX], *value;
	uint64_t hash;
	struct loaded l;
	unsigned n;
	int fd;

	fmt_path(mnt_dir, sizeof(mnt_dir), "%s/mnt", root);
	ck_assert_int_eq(mkdir(mnt_dir, 0700), 0);
	if (unshare(CLONE_NEWNS) == 0)
		(void)mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL);
	if (mount("tmpfs", mnt_dir, "tmpfs", 0, "size=256k,mode=0700") != 0) {
		fprintf(stderr, "check_store: cannot mount a tmpfs (%s); disk-full case skipped\n",
			strerror(errno));
		return;
	}
	mnt_mounted = true;
	fmt_path(cache_dir, sizeof(cache_dir), "%s/cache", mnt_dir);
	store = open_ok();
	for (n = 0; n < 4; n++) {
		void *data = make_bytes(BLOB, n);

		snprintf(path, sizeof(path), "kept/%u", n);
		ck_assert_int_eq(dlc_store_insert(store, path, data, BLOB, 0, &hash, NULL), 0);
		free(data);
	}
	ck_assert_int_eq(dlc_store_close(store), 0);

	/* Another process fills the disk to the last block. */
	fmt_path(filler, sizeof(filler), "%s/filler", mnt_dir);
	fd = open(filler, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	for (;;) {
		static const char block[4096];

		if (write(fd, block, sizeof(block)) < (ssize_t)sizeof(block))
			break;
	}
	close(fd);

	store = open_ok();
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 0);
	loaded_free(&l);
	ck_assert_int_eq(dlc_store_insert(store, "new", "x", 1, 0, &hash, NULL), -ENOSPC);
	ck_assert_int_eq(dlc_store_meta_set(store, "k", "v"), -ENOSPC);
	ck_assert_int_eq(dlc_store_meta_get(store, "k", &value), -ENOENT);
	ck_assert_ptr_null(value);
	ck_assert_int_eq(dlc_store_remove(store, "kept/0"), -ENOENT);
	ck_assert_int_eq(dlc_store_flush(store), 0);
	ck_assert_int_eq(dlc_store_close(store), 0);

	/* With room again, the next open finds every entry. */
	ck_assert_int_eq(unlink(filler), 0);
	store = open_ok();
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 4);
	loaded_free(&l);
	ck_assert_uint_eq(count_in("data"), 4);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* ---- threads ----------------------------------------------------------------- */

struct worker {
	struct dlc_store *store;
	unsigned id;
	int failures;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	enum { PER_THREAD = 100, SIZE = 8192 };
	uint64_t hashes[PER_THREAD];
	char path[64];

	for (unsigned i = 0; i < PER_THREAD; i++) {
		void *data = make_bytes(SIZE, w->id * 1000 + i);

		snprintf(path, sizeof(path), "t%u/%u", w->id, i);
		if (dlc_store_insert(w->store, path, data, SIZE, i, &hashes[i], NULL) != 0)
			w->failures++;
		free(data);
	}
	for (unsigned i = 0; i < PER_THREAD; i++) {
		void *buf = malloc(SIZE);

		snprintf(path, sizeof(path), "t%u/%u", w->id, i);
		if (dlc_store_read(w->store, path, buf, SIZE, hashes[i], NULL) != 0)
			w->failures++;
		free(buf);
		if (i % 2 && dlc_store_remove(w->store, path) != 0)
			w->failures++;
	}
	return NULL;
}

START_TEST(test_concurrent_use)
{
	struct dlc_store *store = open_ok();
	struct worker workers[4];
	pthread_t threads[4];
	struct loaded l;

	for (unsigned i = 0; i < 4; i++) {
		workers[i] = (struct worker){ .store = store, .id = i };
		ck_assert_int_eq(pthread_create(&threads[i], NULL, worker_main, &workers[i]), 0);
	}
	for (unsigned i = 0; i < 20; i++) {
		ck_assert_int_eq(dlc_store_flush(store), 0);
		usleep(1000);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(threads[i], NULL);
		ck_assert_int_eq(workers[i].failures, 0);
	}
	ck_assert_int_eq(dlc_store_close(store), 0);

	store = open_ok();
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 200);
	loaded_free(&l);
	ck_assert_uint_eq(count_in("data"), 200);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* ---- ranges: the blocks of a large file in one data file --------------------- */

#define RANGE 8192

/* Inserts range i (RANGE bytes at i * RANGE, seed i) of data file "big"; its hash. */
static uint64_t insert_range_ok(struct dlc_store *store, unsigned i, uint64_t *before,
				uint64_t *after)
{
	char path[32];
	void *data = make_bytes(RANGE, i);
	uint64_t hash = 0;
	int rc;

	snprintf(path, sizeof(path), "big//b%u", i);
	rc = dlc_store_insert_range(store, path, "big", (uint64_t)i * RANGE, data, RANGE, 7, &hash,
				    before, after);
	ck_assert_msg(rc == 0, "insert_range %u: %s", i, strerror(-rc));
	free(data);
	return hash;
}

/*
 * Ranges written out of order land at their offsets in one data file, read
 * back by range, and the file holds the whole once all are in; the stamps
 * before and after each write chain when nothing else writes, and a change
 * behind the store breaks the chain and the checked open.
 */
START_TEST(test_ranges_share_one_data_file)
{
	struct dlc_store *store = open_ok();
	uint64_t hashes[3], before, after, prev = 0, stamp;
	unsigned order[3] = { 2, 0, 1 };
	char file[PATH_MAX];
	unsigned char *got = malloc(3 * RANGE);
	struct loaded l;
	struct stat st;
	int fd;

	for (unsigned k = 0; k < 3; k++) {
		hashes[order[k]] = insert_range_ok(store, order[k], &before, &after);
		ck_assert_uint_eq(before, prev);        /* 0: the file did not exist */
		ck_assert_uint_ne(after, 0);
		prev = after;
	}
	file_of("big", file, sizeof(file));
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_int_eq(st.st_size, 3 * RANGE);
	ck_assert_uint_eq(count_in("data"), 1);
	for (unsigned i = 0; i < 3; i++) {
		void *want = make_bytes(RANGE, i);

		ck_assert_int_eq(dlc_store_read_range(store, "big", (uint64_t)i * RANGE, got, RANGE,
						      hashes[i], &stamp), 0);
		ck_assert_uint_eq(stamp, after);
		ck_assert_mem_eq(got, want, RANGE);
		ck_assert_int_eq(dlc_store_read_range(store, "big", (uint64_t)i * RANGE, got, RANGE,
						      hashes[i] ^ 1, NULL), -EBADMSG);
		free(want);
	}
	/* Past the end of the data file: not held. */
	ck_assert_int_eq(dlc_store_read_range(store, "big", 3 * RANGE, got, RANGE, hashes[0], NULL),
			 -EBADMSG);

	/* The whole file, opened by the last write's stamp, reads as the ranges. */
	ck_assert_int_eq(dlc_store_open_checked(store, "big", after, &fd), DLC_STORE_SAME);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, got, 3 * RANGE, 0), 3 * RANGE);
	for (unsigned i = 0; i < 3; i++) {
		void *want = make_bytes(RANGE, i);

		ck_assert_mem_eq(got + i * RANGE, want, RANGE);
		free(want);
	}
	close(fd);
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_ptr_nonnull(find(&l, "big//b1"));
	loaded_free(&l);

	/* Written behind the store: the next write sees a before it did not record. */
	fd = open(file, O_WRONLY);
	ck_assert_int_eq(pwrite(fd, "x", 1, 5), 1);
	close(fd);
	ck_assert_int_eq(dlc_store_open_checked(store, "big", after, &fd), DLC_STORE_CHANGED);
	insert_range_ok(store, 0, &before, &after);
	ck_assert_uint_ne(before, prev);
	free(got);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* A range's row goes alone; its data file with the last row, or all at once. */
START_TEST(test_ranges_are_removed_by_row_and_by_file)
{
	struct dlc_store *store = open_ok();
	uint64_t before, after;
	char file[PATH_MAX];
	struct loaded l;

	for (unsigned i = 0; i < 3; i++)
		insert_range_ok(store, i, &before, &after);
	file_of("big", file, sizeof(file));
	ck_assert_int_eq(dlc_store_remove(store, "big//b1"), 0);
	ck_assert(exists(file));
	ck_assert_int_eq(dlc_store_remove(store, "big//b0"), 0);
	ck_assert_int_eq(dlc_store_remove(store, "big//b2"), 0);
	ck_assert(!exists(file));

	for (unsigned i = 0; i < 3; i++)
		insert_range_ok(store, i, &before, &after);
	insert_ok(store, "small.jpg", 100, 1, 0);
	ck_assert_int_eq(dlc_store_remove_file(store, "big"), 0);
	ck_assert(!exists(file));
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_ptr_nonnull(find(&l, "small.jpg"));
	loaded_free(&l);
	ck_assert_int_eq(dlc_store_remove_file(store, "big"), 0);       /* nothing left: no error */
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/*
 * After a crash the scan keeps the ranges inside their data file, drops
 * the rows past its end (a write the crash cut), and deletes a data file
 * that no row names.
 */
START_TEST(test_unclean_scan_keeps_ranges_inside_their_file)
{
	struct dlc_store *store = open_ok();
	uint64_t before, after, hash0;
	char file[PATH_MAX], orphan[PATH_MAX];
	struct loaded l;

	hash0 = insert_range_ok(store, 0, &before, &after);
	insert_range_ok(store, 1, &before, &after);
	insert_range_ok(store, 2, &before, &after);
	ck_assert_int_eq(dlc_store_close(store), 0);
	db_exec("UPDATE meta SET value = '0' WHERE key = 'clean'");
	file_of("big", file, sizeof(file));
	ck_assert_int_eq(truncate(file, 2 * RANGE + 10), 0);
	file_of("gone", orphan, sizeof(orphan));
	write_file(orphan, "abc", 3);

	store = open_ok();
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_ptr_nonnull(find(&l, "big//b0"));
	ck_assert_ptr_nonnull(find(&l, "big//b1"));
	loaded_free(&l);
	ck_assert(!exists(orphan));
	ck_assert(exists(file));
	{
		unsigned char got[RANGE];

		ck_assert_int_eq(dlc_store_read_range(store, "big", 0, got, RANGE, hash0, NULL), 0);
	}
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* check_ranges proves each range in place, and tells the bad one. */
START_TEST(test_check_ranges_tells_each_range)
{
	struct dlc_store *store = open_ok();
	struct dlc_store_range ranges[4];
	uint64_t before, after, stamp = 0;
	char file[PATH_MAX];
	int fd;

	for (unsigned i = 0; i < 3; i++) {
		uint64_t hash = insert_range_ok(store, i, &before, &after);

		ranges[i] = (struct dlc_store_range) { .offset = (uint64_t)i * RANGE, .size = RANGE,
						       .hash = hash };
	}
	ranges[3] = (struct dlc_store_range) { .offset = 3 * RANGE, .size = RANGE, .hash = 1 };
	ck_assert_int_eq(dlc_store_check_ranges(store, "big", ranges, 4, &stamp), 0);
	ck_assert(ranges[0].ok && ranges[1].ok && ranges[2].ok);
	ck_assert(!ranges[3].ok);                       /* past the end */
	ck_assert_uint_eq(stamp, after);

	file_of("big", file, sizeof(file));
	fd = open(file, O_RDWR);
	{
		unsigned char byte;

		ck_assert_int_eq(pread(fd, &byte, 1, RANGE + 3), 1);
		byte ^= 0xff;
		ck_assert_int_eq(pwrite(fd, &byte, 1, RANGE + 3), 1);
	}
	close(fd);
	ck_assert_int_eq(dlc_store_check_ranges(store, "big", ranges, 3, &stamp), 0);
	ck_assert(ranges[0].ok && !ranges[1].ok && ranges[2].ok);
	ck_assert_uint_ne(stamp, after);
	ck_assert_int_eq(dlc_store_check_ranges(store, "absent", ranges, 1, &stamp), -ENOENT);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/*
 * A format 1 index (a file per row, blocks in files of their own) is
 * migrated at open: whole files are kept, block rows and their files go.
 */
START_TEST(test_format_1_index_is_migrated)
{
	struct dlc_store *store = open_ok();
	char block_file[PATH_MAX], sql[512], name[17];
	char *value = NULL;
	uint64_t hash = insert_ok(store, "keep.jpg", 300, 1, 0);
	struct loaded l;

	ck_assert_int_eq(dlc_store_close(store), 0);
	snprintf(name, sizeof(name), "%016" PRIx64, (uint64_t)XXH3_64bits("big//b0:4096", 12));
	snprintf(sql, sizeof(sql),
		 "CREATE TABLE old(path TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL UNIQUE,"
		 " size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, hash INTEGER NOT NULL);"
		 "INSERT INTO old SELECT path, name, size, mtime_ns, hash FROM entries;"
		 "DROP TABLE entries; ALTER TABLE old RENAME TO entries;"
		 "INSERT INTO entries VALUES ('big//b0:4096', '%s', 4096, 0, 5);"
		 "UPDATE meta SET value = '1' WHERE key = 'format';", name);
	db_exec(sql);
	file_of("big//b0:4096", block_file, sizeof(block_file));
	{
		void *data = make_bytes(4096, 2);

		write_file(block_file, data, 4096);
		free(data);
	}

	store = open_ok();
	ck_assert(!has_broken_copy());
	load_all(store, &l);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_ptr_nonnull(find(&l, "keep.jpg"));
	loaded_free(&l);
	read_ok(store, "keep.jpg", 300, 1, hash);
	ck_assert(!exists(block_file));
	ck_assert_int_eq(dlc_store_meta_get(store, "format", &value), 0);
	ck_assert_str_eq(value, "2");
	free(value);
	/* And it is a format 2 index now: ranges go in. */
	{
		uint64_t before, after;

		insert_range_ok(store, 0, &before, &after);
	}
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

/* A data file name taken by another key (a 64-bit collision) is not written. */
START_TEST(test_range_name_collision_refused)
{
	struct dlc_store *store = open_ok();
	void *data = make_bytes(RANGE, 1);
	uint64_t hash, before, after;
	char file[PATH_MAX];
	struct stat st;

	insert_ok(store, "big", 100, 1, 0);
	/* The whole file "big" now owns NAME("big"): pretend it is another path's. */
	db_exec("UPDATE entries SET path = 'other' WHERE path = 'big'");
	ck_assert_int_eq(dlc_store_insert_range(store, "big//b0", "big", 0, data, RANGE, 1, &hash,
						&before, &after), -EEXIST);
	file_of("big", file, sizeof(file));
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_int_eq(st.st_size, 100);              /* untouched */
	free(data);
	ck_assert_int_eq(dlc_store_close(store), 0);
}
END_TEST

static TCase *tcase(const char *name)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	return tc;
}

static Suite *store_suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc;

	tc = tcase("ranges");
	tcase_add_test(tc, test_ranges_share_one_data_file);
	tcase_add_test(tc, test_ranges_are_removed_by_row_and_by_file);
	tcase_add_test(tc, test_unclean_scan_keeps_ranges_inside_their_file);
	tcase_add_test(tc, test_check_ranges_tells_each_range);
	suite_add_tcase(s, tc);

	tc = tcase("roundtrip");
	tcase_add_test(tc, test_roundtrip_sizes);
	tcase_add_test(tc, test_replace_keeps_one_entry);
	tcase_add_test(tc, test_insert_stamp_opens_the_written_file_until_it_changes);
	tcase_add_test(tc, test_footprint);
	tcase_add_test(tc, test_verify_holds_and_catches_broken_states);
	tcase_add_test(tc, test_open_creates_layout);
	tcase_add_test(tc, test_open_keeps_existing_mode);
	tcase_add_test(tc, test_open_not_a_directory);
	tcase_add_test(tc, test_open_refuses_a_cache_dir_others_can_write);
	tcase_add_test(tc, test_open_refuses_a_cache_dir_of_another_user);
	suite_add_tcase(s, tc);

	tc = tcase("verify");
	tcase_add_test(tc, test_read_wrong_size_or_hash);
	tcase_add_test(tc, test_read_corrupted_file);
	tcase_add_test(tc, test_aligned_block_reads_bypass_the_page_cache);
	tcase_add_test(tc, test_hash_is_the_librarys_xxh3_at_every_length);
	tcase_add_test(tc, test_read_missing_file);
	tcase_add_test(tc, test_read_symlink_refused);
	suite_add_tcase(s, tc);

	tc = tcase("persist");
	tcase_add_test(tc, test_persists_across_close);
	tcase_add_test(tc, test_meta);
	tcase_add_test(tc, test_claim_by_another_source_drops_every_entry);
	tcase_add_test(tc, test_flusher_commits_within_a_second);
	suite_add_tcase(s, tc);

	tc = tcase("remove");
	tcase_add_test(tc, test_remove);
	tcase_add_test(tc, test_load_drop);
	tcase_add_test(tc, test_load_stops_on_error);
	tcase_add_test(tc, test_load_many_in_chunks);
	suite_add_tcase(s, tc);

	tc = tcase("crash");
	tcase_add_test(tc, test_crash_then_reopen_scans);
	tcase_add_test(tc, test_tmp_cleared_at_every_open);
	tcase_add_test(tc, test_power_cut_losing_the_wal_still_scans);
	suite_add_tcase(s, tc);

	tc = tcase("behind");
	tcase_add_test(tc, test_layout_removed_while_open_is_made_again);
	suite_add_tcase(s, tc);

	tc = tcase("lock");
	tcase_add_test(tc, test_second_open_busy);
	suite_add_tcase(s, tc);

	tc = tcase("broken_index");
	tcase_add_test(tc, test_garbage_index_set_aside);
	tcase_add_test(tc, test_corrupt_pages_after_crash_set_aside);
	tcase_add_test(tc, test_other_format_set_aside);
	tcase_add_test(tc, test_other_schema_set_aside);
	tcase_add_test(tc, test_format_1_index_is_migrated);
	suite_add_tcase(s, tc);

	tc = tcase("collision");
	tcase_add_test(tc, test_name_collision);
	tcase_add_test(tc, test_range_name_collision_refused);
	suite_add_tcase(s, tc);

	tc = tcase("disk_full");
	tcase_add_test(tc, test_disk_full);
	tcase_add_test(tc, test_disk_full_at_open);
	suite_add_tcase(s, tc);

	tc = tcase("threads");
	tcase_add_test(tc, test_concurrent_use);
	suite_add_tcase(s, tc);

	return s;
}

int main(int argc, char **argv)
{
	SRunner *sr;
	int failures;

	if (argc == 3 && strcmp(argv[1], "--crash-child") == 0)
		return crash_child(argv[2]);
	sr = srunner_create(store_suite());
	srunner_run_all(sr, CK_ENV);
	failures = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failures ? 1 : 0;
}
