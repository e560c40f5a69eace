/*
 * store.c - the local cache on disk: one file per cached sample under
 * cache_dir/data/XX/NAME, crash-safe inserts and xxh3-verified reads, and
 * the public dlc_store_* API.  This file owns cache_dir (its layout, the
 * lock file, tmp/) and every operation on the cache files; store_index.c
 * keeps the SQLite index of those files (path, size, the source's mtime,
 * xxh3), and this file calls it with store->mutex held.
 *
 * An insert hashes the bytes, writes them to a fresh file in tmp/, renames
 * that file over data/XX/NAME and then records the row.  A read opens
 * data/XX/NAME directly, without the index and without a lock, and checks
 * the size and the xxh3 the caller remembers from the index; bytes that do
 * not match are never returned.  Index changes are batched into one open
 * transaction that the flusher thread (store_index.c) commits within a
 * second, and that dlc_store_flush() and dlc_store_close() commit at once.
 *
 * DESIGN / INVARIANTS
 *
 * Locking.  store->mutex guards the SQLite connection, its prepared
 * statements and the transaction state (in_txn, txn_began, stopping,
 * unclean).  It is a leaf: nothing else is locked while it is held (but
 * layout_lock), and callers (cache.c) may hold their own lock around any
 * call.  layout_lock serializes remaking the layout (remake_layout), so
 * that inserts that found it gone at once log its removal once; a leaf
 * too, taken with or without the mutex.  dlc_store_read takes no lock: it
 * uses only dir_fd, which is fixed from open to close.  dlc_store_load calls its
 * callback with the mutex released, so the callback may call the store.
 *
 * On disk.  A file under data/ is complete before it gets its name there
 * (rename(2) of a finished tmp/ file).  The row is added after the rename
 * and deleted after the unlink, so a crash can leave only:
 *   - files in tmp/: deleted by every open;
 *   - files under data/ without a row (the row was not committed yet):
 *     deleted by the scan that runs at open when meta "clean" is not "1";
 *   - rows without a file, or with a file whose bytes changed (replaced
 *     but the new row not committed, or torn by a power cut, since nothing
 *     is fsync'ed): the scan deletes rows whose file is missing or has the
 *     wrong size, and dlc_store_read's size and xxh3 checks catch the rest.
 * store_index.c says when the scan runs and what becomes of an index.db
 * that cannot be used.  A disk too full to open the index (SQLite needs room
 * for its WAL index, the clean mark, a scan's deletions) leaves the store
 * without one for this open (no_index): no entry, no insert, no write, so
 * the index is unchanged for the next open.
 *
 * The lock file is flock(2)ed from open to close, so two daemons never
 * share a cache_dir; tmp/ names are unique within the daemon that holds it.
 *
 * Checked.  dlc_store_verify_locked() (store_index.c, since what it checks
 * is the index's state) asserts the locking state above (the transaction
 * flag agrees with SQLite's, a store without an index has no connection);
 * verify builds run it at each release of store->mutex (dlc_store_unlock,
 * verify.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "dlcache/blob.h"
#include "dlcache/cause.h"
#include "dlcache/hash.h"
#include "dlcache/log.h"
#include "dlcache/store.h"
#include "store_private.h"

/* Blocks are read with O_DIRECT into spare blobs (blob.h). */
_Static_assert(DLC_BLOB_SPARE_ALIGN % DLC_STORE_DIRECT_ALIGN == 0,
	       "a spare blob's data must be aligned for O_DIRECT reads");

#define BLOCK_SIZE 4096u
#define TMP_PATH_SIZE 64
/* The meta key naming the source whose bytes the cache holds (dlc_store_claim). */
#define SOURCE_KEY "source"

/* NAME of path: 16 lowercase hex digits of XXH3_64(path). */
static void entry_name(const char *path, char name[NAME_LEN + 1])
{
	snprintf(name, NAME_LEN + 1, "%016" PRIx64, (uint64_t)XXH3_64bits(path, strlen(path)));
}

/* Shared with store_index.c (contracts in store_private.h). */
/* Frees a store in any state dlc_store_open can leave it. */
static void store_destroy(struct dlc_store *store)
{
	dlc_store_stop_flusher(store);
	dlc_store_close_index(store);
	if (store->lock_fd >= 0)
		close(store->lock_fd); /* releases the flock */
	if (store->dir_fd >= 0)
		close(store->dir_fd);
	pthread_cond_destroy(&store->wake);
	pthread_mutex_destroy(&store->mutex);
	pthread_mutex_destroy(&store->layout_lock);
	free(store->dir);
	free(store);
}

/* mkdir -p: missing components are created 0700, existing ones left alone. */
static int make_dir_path(const char *dir)
{
	char *copy = strdup(dir);
	int rc = 0;

	if (!copy)
		return -ENOMEM;
	for (char *p = copy + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		if (p[-1] != '/') {
			char saved = *p;

			*p = '\0';
			if (mkdir(copy, 0700) != 0 && errno != EEXIST) {
				rc = -errno;
				goto out;
			}
			*p = saved;
		}
		if (*p == '\0')
			break;
	}
out:
	free(copy);
	return rc;
}

/*
 * cache_dir must be the daemon's own and writable by nobody else: whoever
 * can write it can replace index.db and the files under data/ together,
 * hashes included, and so choose the bytes the mount serves.
 */
static int check_private(struct dlc_store *store, const char *dir, char **cause)
{
	struct stat st;

	if (fstat(store->dir_fd, &st) != 0) {
		int rc = -errno;

		dlc_cause_set(cause, "cannot stat cache_dir %s: %s", dir, strerror(-rc));
		return rc;
	}
	if (st.st_uid != geteuid()) {
		dlc_cause_set(cause, "cache_dir %s belongs to user %u, not to the user mounting (%u), "
			      "who could change the cached bytes; give a directory of your own, or "
			      "chown it", dir, (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		dlc_cause_set(cause, "cache_dir %s is writable by other users (mode %04o), who could "
			      "change the cached bytes; run chmod go-w %s, or give a private directory",
			      dir, (unsigned)(st.st_mode & 07777), dir);
		return -EPERM;
	}
	return 0;
}

/* mkdirat of sub unless it exists (*made set when it did not); 0 or -errno. */
static int make_dir(struct dlc_store *store, const char *sub, bool *made)
{
	if (mkdirat(store->dir_fd, sub, 0700) == 0)
		*made = true;
	else if (errno != EEXIST)
		return -errno;
	return 0;
}

/* Makes what is missing of data/, data/XX/ and tmp/ (*made: something
 * was); 0 or -errno. */
static int make_layout(struct dlc_store *store, bool *made)
{
	char sub[sizeof("data/xx")];
	int rc;

	*made = false;
	rc = make_dir(store, "data", made);
	for (unsigned i = 0; i < 256 && rc == 0; i++) {
		snprintf(sub, sizeof(sub), "data/%02x", i);
		rc = make_dir(store, sub, made);
	}
	return rc == 0 ? make_dir(store, "tmp", made) : rc;
}

/*
 * Makes data/, data/XX/ and tmp/ again after something removed them behind
 * the daemon (a cleaner of old files, a person); 0 or -errno (cache_dir
 * itself is gone).  Logged, since their files are gone too.
 */
static int remake_layout(struct dlc_store *store)
{
	bool made;
	int rc;

	/* Inserts that found it gone at once: the first remakes it, the
	 * others find it made and log nothing. */
	pthread_mutex_lock(&store->layout_lock);
	rc = make_layout(store, &made);
	pthread_mutex_unlock(&store->layout_lock);
	if (rc == 0 && made)
		dlc_log(DLC_LOG_WARNING, "%s/data or %s/tmp was removed while mounted: made again",
			store->dir, store->dir);
	return rc;
}

/* Deletes what inserts in progress left in tmp/. */
static int clear_tmp(struct dlc_store *store)
{
	struct dirent *de;
	DIR *d;
	int fd;

	fd = openat(store->dir_fd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		int err = -errno;

		close(fd);
		return err;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(fd, de->d_name, 0) != 0 && errno != ENOENT)
			dlc_log(DLC_LOG_WARNING, "cannot delete %s/tmp/%s: %s", store->dir,
				de->d_name, strerror(errno));
	}
	closedir(d);
	return 0;
}

int dlc_store_open(const char *dir, struct dlc_store **out, char **cause)
{
	struct dlc_store *store;
	pthread_condattr_t attr;
	int rc;

	*out = NULL;
	if (cause)
		*cause = NULL;
	store = calloc(1, sizeof(*store));
	if (!store)
		return -ENOMEM;
	store->dir_fd = -1;
	store->lock_fd = -1;
	atomic_init(&store->tmp_seq, 0);
	pthread_mutex_init(&store->mutex, NULL);
	pthread_mutex_init(&store->layout_lock, NULL);
	/* The flusher (store_index.c) sleeps on wake until CLOCK_MONOTONIC deadlines. */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&store->wake, &attr);
	pthread_condattr_destroy(&attr);

	rc = make_dir_path(dir);
	if (rc != 0) {
		dlc_cause_set(cause, "cannot create cache_dir %s: %s", dir, strerror(-rc));
		goto err;
	}
	store->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (store->dir_fd < 0) {
		rc = -errno;
		dlc_cause_set(cause, "cannot open cache_dir %s: %s", dir, strerror(-rc));
		goto err;
	}
	store->dir = realpath(dir, NULL);
	if (!store->dir) {
		rc = -errno;
		dlc_cause_set(cause, "cannot resolve cache_dir %s: %s", dir, strerror(-rc));
		goto err;
	}
	rc = check_private(store, store->dir, cause);
	if (rc != 0)
		goto err;

	store->lock_fd = openat(store->dir_fd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
				0600);
	if (store->lock_fd < 0) {
		rc = -errno;
		dlc_cause_set(cause, "cannot create %s/lock: %s", store->dir, strerror(-rc));
		goto err;
	}
	if (flock(store->lock_fd, LOCK_EX | LOCK_NB) != 0) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		if (rc == -EBUSY)
			dlc_cause_set(cause, "cache_dir %s is in use by another dlcache mount; give "
				  "each mount its own cache_dir", store->dir);
		else
			dlc_cause_set(cause, "cannot lock %s/lock: %s", store->dir, strerror(-rc));
		goto err;
	}

	rc = make_layout(store, &(bool) { false });
	if (rc == 0)
		rc = clear_tmp(store);
	if (rc != 0) {
		dlc_cause_set(cause, "cannot prepare cache_dir %s: %s", store->dir, strerror(-rc));
		goto err;
	}

	pthread_mutex_lock(&store->mutex);
	rc = dlc_store_open_index(store, cause);
	if (rc == -ENOSPC) {
		/*
		 * A full disk must not stop the mount: go on without the cache,
		 * leaving index.db and the files as they are for the next mount.
		 */
		dlc_store_close_index(store);
		store->no_index = true;
		if (cause) {
			free(*cause);
			*cause = NULL;
		}
		dlc_log(DLC_LOG_WARNING, "cache disk under %s is full: the cache index cannot be "
			"opened, so this mount serves nothing from the cache (its files stay for the "
			"next mount); reads go on from the source", store->dir);
		rc = 0;
	}
	pthread_mutex_unlock(&store->mutex); /* a failed open leaves no state to verify */
	if (rc != 0)
		goto err;

	rc = dlc_store_start_flusher(store);
	if (rc != 0) {
		dlc_cause_set(cause, "cannot start the cache flusher thread: %s", strerror(-rc));
		goto err;
	}
	*out = store;
	return 0;

err:
	store_destroy(store);
	return rc;
}

int dlc_store_load(struct dlc_store *store,
		   int (*cb)(void *arg, const struct dlc_store_entry *entry), void *arg)
{
	struct dlc_store_row *rows;
	int64_t last = INT64_MIN;
	int err = 0;

	if (store->no_index)
		return 0;
	rows = calloc(LOAD_CHUNK, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	for (;;) {
		size_t n;

		/* Copy a chunk under the lock; the callback runs without it. */
		pthread_mutex_lock(&store->mutex);
		err = dlc_store_load_rows(store, last, rows, &n);
		dlc_store_unlock(store);

		for (size_t i = 0; i < n && err == 0; i++) {
			struct dlc_store_entry entry = {
				.path = rows[i].path,
				.size = rows[i].size,
				.mtime_ns = rows[i].mtime_ns,
				.hash = rows[i].hash,
			};
			int keep = cb(arg, &entry);

			if (keep < 0) {
				err = keep;
			} else if (keep == 0) {
				int rm = dlc_store_remove(store, rows[i].path);

				if (rm != 0 && rm != -ENOENT)
					err = rm;
			}
		}
		for (size_t i = 0; i < n; i++)
			free(rows[i].path);
		if (err != 0 || n < LOAD_CHUNK)
			break;
		last = rows[n - 1].rowid;
	}
	free(rows);
	return err;
}

/* What dlc_store_read's stamp is made of: the file and its last change. */
static uint64_t stamp_of(const struct stat *st)
{
	const uint64_t parts[] = {
		(uint64_t)st->st_dev, (uint64_t)st->st_ino, (uint64_t)st->st_size,
		(uint64_t)st->st_ctim.tv_sec, (uint64_t)st->st_ctim.tv_nsec,
		(uint64_t)st->st_mtim.tv_sec, (uint64_t)st->st_mtim.tv_nsec,
	};
	uint64_t stamp = XXH3_64bits(parts, sizeof(parts));

	return stamp ? stamp : 1;
}

/*
 * Reads size bytes at offset of the data file of key (a whole file's path,
 * or a ranges' file key) and checks them: a whole file (exact) must have
 * exactly size bytes, a range's data file must hold them.
 */
static int read_at(struct dlc_store *store, const char *key, uint64_t offset, bool exact,
		   void *buf, uint64_t size, uint64_t hash, uint64_t *stamp)
{
	char name[NAME_LEN + 1], rel[DATA_PATH_SIZE];
	struct stat st;
	uint64_t done = 0;
	int fd, rc = 0;

	if (size > (uint64_t)SSIZE_MAX || offset > (uint64_t)INT64_MAX - size)
		return -EFBIG;
	entry_name(key, name);
	dlc_store_data_path(name, rel);
	fd = -1;
	if ((uintptr_t)buf % DLC_STORE_DIRECT_ALIGN == 0 && size % DLC_STORE_DIRECT_ALIGN == 0 &&
	    offset % DLC_STORE_DIRECT_ALIGN == 0 && size >= DLC_STORE_DIRECT_MIN &&
	    !atomic_load_explicit(&store->no_direct, memory_order_relaxed)) {
		fd = openat(store->dir_fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_DIRECT);
		if (fd < 0 && errno == EINVAL)
			atomic_store(&store->no_direct, true);  /* tmpfs, say: read through the page cache */
		else if (fd < 0)
			return errno == ELOOP ? -EBADMSG : -errno;
	}
	if (fd < 0)
		fd = openat(store->dir_fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? -EBADMSG : -errno;
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) ||
	    (exact ? (uint64_t)st.st_size != size : (uint64_t)st.st_size < offset + size)) {
		rc = -EBADMSG;
		goto out;
	}
	while (done < size) {
		ssize_t n = pread(fd, (char *)buf + done, (size_t)(size - done),
				  (off_t)(offset + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			goto out;
		}
		if (n == 0) {
			rc = -EBADMSG; /* shrank since fstat */
			goto out;
		}
		done += (uint64_t)n;
	}
	if (dlc_xxh3(buf, (size_t)size) != hash)
		rc = -EBADMSG;
	else if (stamp)
		*stamp = stamp_of(&st);
out:
	close(fd);
	return rc;
}

int dlc_store_read(struct dlc_store *store, const char *path, void *buf, uint64_t size,
		   uint64_t hash, uint64_t *stamp)
{
	return read_at(store, path, 0, true, buf, size, hash, stamp);
}

int dlc_store_read_range(struct dlc_store *store, const char *file, uint64_t offset, void *buf,
			 uint64_t size, uint64_t hash, uint64_t *stamp)
{
	return read_at(store, file, offset, false, buf, size, hash, stamp);
}

int dlc_store_open_checked(struct dlc_store *store, const char *path, uint64_t stamp, int *fd_out)
{
	char name[NAME_LEN + 1], rel[DATA_PATH_SIZE];
	struct stat st;
	int fd;

	*fd_out = -1;
	entry_name(path, name);
	dlc_store_data_path(name, rel);
	fd = openat(store->dir_fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? DLC_STORE_CHANGED : -errno;
	if (fstat(fd, &st) != 0 || stamp_of(&st) != stamp) {
		close(fd);
		return DLC_STORE_CHANGED;
	}
	*fd_out = fd;
	return DLC_STORE_SAME;
}

/*
 * Writes size bytes to a new file at tmp_path and returns its descriptor,
 * still open (the caller takes the file's stamp after the rename and closes
 * it with close_tmp); on failure nothing is left.
 */
static int write_tmp(struct dlc_store *store, const char *tmp_path, const void *data,
		     uint64_t size)
{
	uint64_t done = 0;
	int fd, rc = 0;

	fd = openat(store->dir_fd, tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno == EDQUOT ? -ENOSPC : -errno;
	while (done < size) {
		ssize_t n = write(fd, (const char *)data + done, (size_t)(size - done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = errno == EDQUOT ? -ENOSPC : -errno;
			break;
		}
		if (n == 0) {
			rc = -EIO;
			break;
		}
		done += (uint64_t)n;
	}
	if (rc != 0) {
		close(fd);
		unlinkat(store->dir_fd, tmp_path, 0);
		return rc;
	}
	return fd;
}

/* Closes a file write_tmp wrote: 0, or the write error close reports. */
static int close_tmp(int fd)
{
	if (close(fd) != 0 && errno != EINTR)
		return errno == EDQUOT ? -ENOSPC : -errno;
	return 0;
}

int dlc_store_insert(struct dlc_store *store, const char *path, const void *data,
		     uint64_t size, int64_t mtime_ns, uint64_t *hash, uint64_t *stamp)
{
	char name[NAME_LEN + 1], rel[DATA_PATH_SIZE], tmp_path[TMP_PATH_SIZE];
	struct stat st;
	uint64_t sum;
	int fd, rc;

	if (store->no_index)
		return -ENOSPC;
	if (size > (uint64_t)SSIZE_MAX || size > (uint64_t)INT64_MAX)
		return -EFBIG;
	sum = dlc_xxh3(data, (size_t)size);
	entry_name(path, name);
	dlc_store_data_path(name, rel);
	snprintf(tmp_path, sizeof(tmp_path), "tmp/%ld.%" PRIuFAST64, (long)getpid(),
		 atomic_fetch_add(&store->tmp_seq, 1));

	/* The bytes are written without the lock; only the rename and row take it. */
	fd = write_tmp(store, tmp_path, data, size);
	if (fd == -ENOENT && remake_layout(store) == 0)
		fd = write_tmp(store, tmp_path, data, size);
	if (fd < 0)
		return fd;

	pthread_mutex_lock(&store->mutex);
	rc = dlc_store_check_name_owner(store, name, path);
	if (rc == DLC_STORE_NAME_TAKEN)
		rc = -EEXIST;   /* not this path's to write: the insert fails */
	if (rc == 0)
		rc = dlc_store_begin_change(store);
	if (rc != 0)
		goto err_tmp;
	if (renameat(store->dir_fd, tmp_path, store->dir_fd, rel) != 0) {
		rc = -errno;
		if (rc == -ENOENT && remake_layout(store) == 0 &&
		    renameat(store->dir_fd, tmp_path, store->dir_fd, rel) == 0)
			rc = 0;
		if (rc != 0)
			goto err_tmp;
	}
	/*
	 * The stamp of the file these bytes are in, taken through the
	 * descriptor that wrote them and after the rename (which changes its
	 * ctime): the caller may serve the file by this stamp without reading
	 * it back, as after a check (dlc_store_open_checked).
	 */
	if (fstat(fd, &st) != 0)
		rc = -errno;
	if (rc == 0)
		rc = close_tmp(fd);
	else
		close(fd);
	fd = -1;
	if (rc == 0)
		rc = dlc_store_put_row(store, path, name, NULL, 0, size, mtime_ns, sum);
	if (rc != 0) {
		/* No row for these bytes: an old row, if any, now finds no file. */
		unlinkat(store->dir_fd, rel, 0);
		goto out_unlock;
	}
	*hash = sum;
	if (stamp)
		*stamp = stamp_of(&st);
	goto out_unlock;

err_tmp:
	close(fd);
	unlinkat(store->dir_fd, tmp_path, 0);
out_unlock:
	dlc_store_unlock(store);
	return rc;
}

/* Unlinks the data file name (logged when that fails); 0 or -errno. */
static int unlink_data(struct dlc_store *store, const char *name)
{
	char rel[DATA_PATH_SIZE];

	dlc_store_data_path(name, rel);
	if (unlinkat(store->dir_fd, rel, 0) != 0 && errno != ENOENT) {
		int rc = -errno;

		dlc_log(DLC_LOG_WARNING, "cannot delete %s/%s: %s", store->dir, rel, strerror(-rc));
		return rc;
	}
	return 0;
}

/* Unlinks the shared data file name if no row names it any more.  Mutex held. */
static void unlink_if_unused(struct dlc_store *store, const char *name)
{
	if (dlc_store_name_used(store, name) == 0)
		(void)unlink_data(store, name);
}

int dlc_store_remove(struct dlc_store *store, const char *path)
{
	char name[NAME_LEN + 1];
	bool shared = false;
	int rc;

	if (store->no_index)
		return -ENOENT;
	pthread_mutex_lock(&store->mutex);
	rc = dlc_store_row_name(store, path, name, &shared);
	if (rc == 0 && shared) {
		/* A range: its row goes; its data file with its last row. */
		rc = dlc_store_begin_change(store);
		if (rc == 0)
			rc = dlc_store_delete_row(store, path);
		if (rc == 0)
			unlink_if_unused(store, name);
		goto out;
	}
	if (rc != 0 && rc != -ENOENT)
		goto out;
	entry_name(path, name);
	/* The file of a colliding path is not path's to delete. */
	rc = dlc_store_check_name_owner(store, name, path);
	if (rc == DLC_STORE_NAME_TAKEN)
		rc = -ENOENT;
	if (rc != 0)
		goto out;
	rc = unlink_data(store, name);
	if (rc != 0)
		goto out;
	rc = dlc_store_begin_change(store);
	if (rc != 0)
		goto out;
	rc = dlc_store_delete_row(store, path);
out:
	dlc_store_unlock(store);
	return rc;
}

int dlc_store_remove_file(struct dlc_store *store, const char *file)
{
	char name[NAME_LEN + 1];
	int rc;

	if (store->no_index)
		return -ENOENT;
	entry_name(file, name);
	pthread_mutex_lock(&store->mutex);
	rc = dlc_store_check_name_owner(store, name, file);
	if (rc == DLC_STORE_NAME_TAKEN)
		rc = -ENOENT;
	if (rc == 0)
		rc = unlink_data(store, name);
	if (rc == 0)
		rc = dlc_store_begin_change(store);
	if (rc == 0)
		rc = dlc_store_delete_name_rows(store, name);
	dlc_store_unlock(store);
	return rc;
}

/* Writes size bytes of data at offset of fd; 0 or -errno. */
static int write_at(int fd, const void *data, uint64_t size, uint64_t offset)
{
	uint64_t done = 0;

	while (done < size) {
		ssize_t n = pwrite(fd, (const char *)data + done, (size_t)(size - done),
				   (off_t)(offset + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EDQUOT ? -ENOSPC : -errno;
		}
		if (n == 0)
			return -EIO;
		done += (uint64_t)n;
	}
	return 0;
}

static int open_for_range(struct dlc_store *store, const char *rel)
{
	return openat(store->dir_fd, rel, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
}

int dlc_store_insert_range(struct dlc_store *store, const char *path, const char *file,
			   uint64_t offset, const void *data, uint64_t size, int64_t mtime_ns,
			   uint64_t *hash, uint64_t *before, uint64_t *after)
{
	char name[NAME_LEN + 1], rel[DATA_PATH_SIZE];
	struct stat st;
	uint64_t sum;
	int fd, rc;

	if (store->no_index)
		return -ENOSPC;
	if (size > (uint64_t)SSIZE_MAX || offset > (uint64_t)INT64_MAX - size)
		return -EFBIG;
	sum = dlc_xxh3(data, (size_t)size);
	entry_name(file, name);
	dlc_store_data_path(name, rel);

	/* Never write into a data file that belongs to another key. */
	pthread_mutex_lock(&store->mutex);
	rc = dlc_store_check_name_owner(store, name, file);
	dlc_store_unlock(store);
	if (rc == DLC_STORE_NAME_TAKEN)
		return -EEXIST;
	if (rc != 0)
		return rc;

	/* The bytes are written without the lock; only the row takes it. */
	fd = open_for_range(store, rel);
	if (fd < 0 && errno == ENOENT && remake_layout(store) == 0)
		fd = open_for_range(store, rel);
	if (fd < 0)
		return errno == ELOOP ? -EBADMSG : errno == EDQUOT ? -ENOSPC : -errno;
	if (fstat(fd, &st) != 0) {
		rc = -errno;
	} else if (!S_ISREG(st.st_mode)) {
		rc = -EBADMSG;
	} else {
		/* A file this open just made is new to every caller. */
		*before = st.st_size == 0 && offset + size > 0 ? 0 : stamp_of(&st);
		rc = write_at(fd, data, size, offset);
	}

	pthread_mutex_lock(&store->mutex);
	if (rc == 0)
		rc = dlc_store_begin_change(store);
	/* As for a whole file: the stamp comes from the descriptor that wrote. */
	if (rc == 0 && fstat(fd, &st) != 0)
		rc = -errno;
	if (close(fd) != 0 && errno != EINTR && rc == 0)
		rc = errno == EDQUOT ? -ENOSPC : -errno;
	if (rc == 0)
		rc = dlc_store_put_row(store, path, name, file, offset, size, mtime_ns, sum);
	if (rc == 0) {
		*hash = sum;
		*after = stamp_of(&st);
	} else {
		/* The bytes have no row; nor, maybe, does the file. */
		unlink_if_unused(store, name);
	}
	dlc_store_unlock(store);
	return rc;
}

int dlc_store_check_ranges(struct dlc_store *store, const char *file,
			   struct dlc_store_range *ranges, size_t n, uint64_t *stamp)
{
	char name[NAME_LEN + 1], rel[DATA_PATH_SIZE];
	struct stat st, st_after;
	uint64_t largest = 0;
	char *buf = NULL;
	int fd, rc = 0;

	entry_name(file, name);
	dlc_store_data_path(name, rel);
	fd = openat(store->dir_fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? DLC_STORE_CHANGED : -errno;
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = DLC_STORE_CHANGED;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		largest = ranges[i].size > largest ? ranges[i].size : largest;
	/*
	 * Read through the page cache on purpose (no O_DIRECT): the pages
	 * stay for the kernel to serve from next.  Not mapped: a file cut
	 * behind a mapping would be a SIGBUS, a cut behind pread a short read.
	 */
	buf = largest > (uint64_t)SSIZE_MAX ? NULL : malloc(largest ? (size_t)largest : 1);
	if (!buf) {
		rc = -ENOMEM;
		goto out;
	}
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	for (size_t i = 0; i < n; i++) {
		struct dlc_store_range *r = &ranges[i];
		uint64_t done = 0;

		r->ok = false;
		if (r->offset > (uint64_t)st.st_size || r->size > (uint64_t)st.st_size - r->offset)
			continue;
		while (done < r->size) {
			ssize_t got = pread(fd, buf + done, (size_t)(r->size - done),
					    (off_t)(r->offset + done));

			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0) {
				rc = -errno;
				goto out;
			}
			if (got == 0)
				break;
			done += (uint64_t)got;
		}
		r->ok = done == r->size && dlc_xxh3(buf, (size_t)r->size) == r->hash;
	}
	/* A change behind the check leaves nothing proven. */
	if (fstat(fd, &st_after) != 0 || stamp_of(&st_after) != stamp_of(&st))
		rc = DLC_STORE_CHANGED;
	else
		*stamp = stamp_of(&st);
out:
	free(buf);
	close(fd);
	return rc;
}

int dlc_store_flush(struct dlc_store *store)
{
	int rc;

	if (store->no_index)
		return 0;
	pthread_mutex_lock(&store->mutex);
	rc = dlc_store_commit_changes(store);
	dlc_store_unlock(store);
	return rc;
}

static int drop_entry(void *arg, const struct dlc_store_entry *entry)
{
	(*(uint64_t *)arg)++;
	return 0;
}

int dlc_store_claim(struct dlc_store *store, const char *source, uint64_t *dropped)
{
	char *held = NULL;
	int rc;

	*dropped = 0;
	if (store->no_index)
		return 0;
	rc = dlc_store_meta_get(store, SOURCE_KEY, &held);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	if (held && strcmp(held, source) != 0) {
		dlc_log(DLC_LOG_INFO, "%s held the cache of %s; its entries are dropped for %s",
			store->dir, held, source);
		rc = dlc_store_load(store, drop_entry, dropped);
		if (rc == 0)
			rc = dlc_store_flush(store);
		if (rc < 0) {
			free(held);
			return rc;
		}
	}
	if (!held || strcmp(held, source) != 0)
		rc = dlc_store_meta_set(store, SOURCE_KEY, source);
	free(held);
	return rc < 0 ? rc : 0;
}

int dlc_store_meta_get(struct dlc_store *store, const char *key, char **value)
{
	int rc;

	*value = NULL;
	if (store->no_index)
		return -ENOENT;
	pthread_mutex_lock(&store->mutex);
	rc = dlc_store_meta_get_locked(store, key, value);
	dlc_store_unlock(store);
	return rc;
}

int dlc_store_meta_set(struct dlc_store *store, const char *key, const char *value)
{
	int rc;

	if (store->no_index)
		return -ENOSPC;
	pthread_mutex_lock(&store->mutex);
	rc = dlc_store_meta_set_locked(store, key, value);
	dlc_store_unlock(store);
	return rc;
}

int dlc_store_close(struct dlc_store *store)
{
	int rc;

	if (!store)
		return 0;
	dlc_store_stop_flusher(store);
	pthread_mutex_lock(&store->mutex);
	rc = store->no_index ? 0 : dlc_store_mark_clean(store);
	dlc_store_unlock(store);
	store_destroy(store);
	return rc;
}

uint64_t dlc_store_footprint(uint64_t size)
{
	if (size > UINT64_MAX - (BLOCK_SIZE - 1))
		return UINT64_MAX - (UINT64_MAX % BLOCK_SIZE);
	return (size + BLOCK_SIZE - 1) / BLOCK_SIZE * BLOCK_SIZE;
}

const char *dlc_store_dir(const struct dlc_store *store)
{
	return store->dir;
}
