/*
 * store_index.c - the store's SQLite index, cache_dir/index.db: a row per
 * cached file (path, NAME, size, the source's mtime, xxh3) and a meta table
 * of small values.  It opens index.db, or sets a broken one aside and starts
 * an empty one; checks the schema and the format; deletes orphans after an
 * unclean close; and holds every prepared statement, so that it is the only
 * file of the store that speaks SQL.  store.c owns cache_dir, the cache
 * files and the public API, and calls in here with store->mutex held.
 *
 * Index changes are batched into one open transaction that the flusher
 * thread commits within a second, and that dlc_store_flush() and
 * dlc_store_close() commit at once.
 *
 * DESIGN / INVARIANTS
 *
 * Locking.  store->mutex guards the SQLite connection, its prepared
 * statements and the transaction state (in_txn, txn_began, stopping,
 * unclean), which only this file touches.  Every function here runs with it
 * held but the flusher's start and stop; the flusher thread takes it itself
 * and sleeps on store->wake until a transaction begins or is due.
 *
 * On disk.  Meta "clean" is set to "0" (committed, and checkpointed into
 * index.db so that a power cut losing the WAL cannot undo it) at open and to
 * "1" at a close that committed everything, so only a crash, a power cut, or
 * a commit that SQLite rolled back, makes the next open scan (store.c says what a crash can leave
 * behind).  The scan deletes the rows whose file is missing or has the wrong
 * size, then the files under data/ that have no row.  An index.db that
 * SQLite cannot read, that fails quick_check after a crash, or that has
 * another format is renamed aside to index.db.broken-TIME and replaced by an
 * empty one; its files are then orphans and the scan deletes them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "dlcache/cause.h"
#include "dlcache/log.h"
#include "dlcache/verify.h"
#include "store_private.h"

/*
 * Format 2 (this one): rows may share a data file (`file`, `offset`: the
 * blocks of one large file).  Format 1 had a file per row; its indexes are
 * migrated in place (migrate_format_1).
 */
#define STORE_FORMAT "2"
#define FLUSH_INTERVAL_NS 1000000000LL  /* the longest a change stays uncommitted */
#define BUSY_TIMEOUT_MS 5000
#define WHY_SIZE 160                    /* why an index.db is set aside */

/* How the previous daemon left the index, from meta "clean". */
enum index_state {
	INDEX_CLEAN,    /* "1": closed cleanly, no scan needed */
	INDEX_UNCLEAN,  /* "0": the daemon died, or lost changes */
	INDEX_NEW,      /* absent: a new (maybe replacement) index */
};


static const char *const stmt_sql[ST_COUNT] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_NAME_OWNER] = "SELECT coalesce(file, path) FROM entries WHERE name = ?1 LIMIT 1",
	[ST_UPSERT] = "INSERT OR REPLACE INTO entries(path, name, file, offset, size, mtime_ns, hash)"
		      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	[ST_DELETE] = "DELETE FROM entries WHERE path = ?1",
	[ST_DELETE_ROWID] = "DELETE FROM entries WHERE rowid = ?1",
	[ST_DELETE_NAME] = "DELETE FROM entries WHERE name = ?1",
	[ST_ROW_NAME] = "SELECT name, file IS NOT NULL FROM entries WHERE path = ?1",
	[ST_LOAD] = "SELECT rowid, path, size, mtime_ns, hash FROM entries"
		    " WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
	[ST_SCAN] = "SELECT rowid, name, size, offset, file IS NOT NULL FROM entries",
	[ST_META_GET] = "SELECT value FROM meta WHERE key = ?1",
	[ST_META_SET] = "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)",
};

/*
 * entries: one row per cached thing.  A whole file has a data file of its
 * own: name is NAME(path), file is NULL, offset 0.  A range (a block of a
 * large file) lives at offset in a data file shared with the other blocks
 * of that file: file is the key naming it and name is NAME(file).  So
 * coalesce(file, path) is the key a data file belongs to, and names are
 * not unique.
 */
#define ENTRIES_COLUMNS \
	"(path TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL, file TEXT," \
	" offset INTEGER NOT NULL DEFAULT 0, size INTEGER NOT NULL," \
	" mtime_ns INTEGER NOT NULL, hash INTEGER NOT NULL);"

static const char schema_sql[] =
	"CREATE TABLE IF NOT EXISTS entries" ENTRIES_COLUMNS
	"CREATE INDEX IF NOT EXISTS entries_name ON entries(name);"
	"CREATE TABLE IF NOT EXISTS meta("
	" key TEXT PRIMARY KEY NOT NULL,"
	" value TEXT NOT NULL);";

/*
 * Format 1 to 2, in one transaction: the rows of whole files are kept as
 * they are; the rows of blocks (format 1 kept each block in a file of its
 * own, under a path holding "//", which no dataset path holds) are dropped,
 * and "clean" is cleared so that this open's scan deletes their files.
 * The blocks are fetched again, into the shared files of format 2.
 */
static const char migrate_1_sql[] =
	"BEGIN IMMEDIATE;"
	"CREATE TABLE entries_2" ENTRIES_COLUMNS
	"INSERT INTO entries_2(path, name, size, mtime_ns, hash)"
	" SELECT path, name, size, mtime_ns, hash FROM entries WHERE instr(path, '//') = 0;"
	"DROP TABLE entries;"
	"ALTER TABLE entries_2 RENAME TO entries;"
	"INSERT OR REPLACE INTO meta(key, value) VALUES ('format', '2');"
	"INSERT OR REPLACE INTO meta(key, value) VALUES ('clean', '0');"
	"COMMIT;";

/* Whether name is a NAME (and, given subdir "XX", one that belongs in it). */
static bool is_entry_name(const char *name, const char *subdir)
{
	size_t i;

	for (i = 0; name[i]; i++) {
		if (i >= NAME_LEN || !((name[i] >= '0' && name[i] <= '9') ||
				       (name[i] >= 'a' && name[i] <= 'f')))
			return false;
	}
	return i == NAME_LEN && (!subdir || (name[0] == subdir[0] && name[1] == subdir[1]));
}

static int sqlite_to_errno(sqlite3 *db, int rc)
{
	int sys;

	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EBADMSG;
	case SQLITE_TOOBIG:
		return -EFBIG;
	case SQLITE_CANTOPEN:
	case SQLITE_IOERR:
		sys = db ? sqlite3_system_errno(db) : 0;
		if (sys == EDQUOT)
			return -ENOSPC;
		return sys > 0 ? -sys : -EIO;
	default:
		return -EIO;
	}
}

static bool is_broken_index(int rc)
{
	return (rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB;
}

/*
 * Turns a failed SQLite call into -errno, logs SQLite's message (only the
 * store can see it), and notes a transaction SQLite rolled back by itself:
 * its changes are lost, so the next open must scan.  Mutex held.
 */
static int db_failed(struct dlc_store *store, const char *what, int rc)
{
	int err = sqlite_to_errno(store->db, rc);

	if (is_broken_index(rc))
		store->unclean = true;
	if (store->in_txn && sqlite3_get_autocommit(store->db)) {
		store->in_txn = false;
		store->unclean = true;
		dlc_log(DLC_LOG_WARNING, "%s: SQLite rolled back uncommitted index changes; "
			"the next mount rescans %s", what, store->dir);
	}
	if (err == -ENOSPC)
		dlc_log(DLC_LOG_DEBUG, "%s: %s", what, sqlite3_errmsg(store->db));
	else
		dlc_log(DLC_LOG_WARNING, "%s: %s", what, sqlite3_errmsg(store->db));
	return err;
}

/* Steps a statement that returns no row and resets it.  Mutex held. */
static int step_done(struct dlc_store *store, enum stmt_id id, const char *what)
{
	sqlite3_stmt *stmt = store->stmt[id];
	int rc = sqlite3_step(stmt);
	int err = 0;

	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		err = db_failed(store, what, rc);
	sqlite3_reset(stmt);
	return err;
}

static void timespec_now(struct timespec *ts)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
}

static int64_t timespec_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

int dlc_store_begin_change(struct dlc_store *store)
{
	int rc;

	if (store->in_txn)
		return 0;
	rc = step_done(store, ST_BEGIN, "begin");
	if (rc != 0)
		return rc;
	store->in_txn = true;
	timespec_now(&store->txn_began);
	pthread_cond_signal(&store->wake);
	return 0;
}

int dlc_store_commit_changes(struct dlc_store *store)
{
	int rc;

	if (!store->in_txn)
		return 0;
	rc = step_done(store, ST_COMMIT, "commit");
	if (rc == 0 || sqlite3_get_autocommit(store->db))
		store->in_txn = false;
	else
		timespec_now(&store->txn_began);
	return rc;
}

/* Gives up the batch transaction (close after a failed commit).  Mutex held. */
static void rollback_changes(struct dlc_store *store)
{
	if (!store->in_txn)
		return;
	if (!sqlite3_get_autocommit(store->db))
		(void)step_done(store, ST_ROLLBACK, "rollback");
	store->in_txn = false;
	store->unclean = true;
}

int dlc_store_meta_get_locked(struct dlc_store *store, const char *key, char **value)
{
	sqlite3_stmt *stmt = store->stmt[ST_META_GET];
	int rc;
	int err = 0;

	*value = NULL;
	sqlite3_bind_text(stmt, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW) {
		const unsigned char *text = sqlite3_column_text(stmt, 0);

		*value = strdup(text ? (const char *)text : "");
		if (!*value)
			err = -ENOMEM;
	} else if (rc == SQLITE_DONE) {
		err = -ENOENT;
	} else {
		err = db_failed(store, "meta_get", rc);
	}
	sqlite3_reset(stmt);
	return err;
}

int dlc_store_meta_set_locked(struct dlc_store *store, const char *key, const char *value)
{
	sqlite3_stmt *stmt = store->stmt[ST_META_SET];
	int rc;

	rc = dlc_store_begin_change(store);
	if (rc != 0)
		return rc;
	sqlite3_bind_text(stmt, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 2, value, -1, SQLITE_STATIC);
	return step_done(store, ST_META_SET, "meta_set");
}

int dlc_store_verify_locked(const struct dlc_store *store)
{
	if (store->dir == NULL || store->dir_fd < 0 || store->lock_fd < 0)
		return -EUCLEAN;
	if (store->no_index)
		return store->db == NULL && !store->in_txn ? 0 : -EUCLEAN;
	if (store->db == NULL)
		return store->in_txn ? -EUCLEAN : 0;
	for (int i = 0; i < ST_COUNT; i++) {
		if (store->stmt[i] == NULL)
			return -EUCLEAN;
	}
	/* The batch flag is SQLite's own state: BEGIN done and not ended. */
	if (store->in_txn != !sqlite3_get_autocommit(store->db))
		return -EUCLEAN;
	return 0;
}

int dlc_store_verify(struct dlc_store *store)
{
	int rc;

	pthread_mutex_lock(&store->mutex);
	rc = dlc_store_verify_locked(store);
	pthread_mutex_unlock(&store->mutex);
	return rc;
}

void dlc_store_unlock(struct dlc_store *store)
{
	DLC_VERIFY(dlc_store_verify_locked(store));
	pthread_mutex_unlock(&store->mutex);
}

/* The flusher: commits the batch transaction FLUSH_INTERVAL_NS after it began. */
static void *flusher_main(void *arg)
{
	struct dlc_store *store = arg;

	pthread_mutex_lock(&store->mutex);
	while (!store->stopping) {
		struct timespec now, deadline;
		int64_t due;

		if (!store->in_txn) {
			pthread_cond_wait(&store->wake, &store->mutex);
			continue;
		}
		due = timespec_ns(&store->txn_began) + FLUSH_INTERVAL_NS;
		timespec_now(&now);
		if (timespec_ns(&now) >= due) {
			(void)dlc_store_commit_changes(store);
			continue;
		}
		deadline.tv_sec = (time_t)(due / 1000000000LL);
		deadline.tv_nsec = (long)(due % 1000000000LL);
		pthread_cond_timedwait(&store->wake, &store->mutex, &deadline);
	}
	dlc_store_unlock(store);
	return NULL;
}

int dlc_store_start_flusher(struct dlc_store *store)
{
	sigset_t all, old;
	int rc;

	/* Signals belong to the main thread (FUSE's handlers). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&store->flusher, NULL, flusher_main, store);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return -rc;
	store->flusher_running = true;
	return 0;
}

void dlc_store_stop_flusher(struct dlc_store *store)
{
	if (!store->flusher_running)
		return;
	pthread_mutex_lock(&store->mutex);
	store->stopping = true;
	pthread_cond_signal(&store->wake);
	dlc_store_unlock(store);
	pthread_join(store->flusher, NULL);
	store->flusher_running = false;
}

void dlc_store_close_index(struct dlc_store *store)
{
	int rc;

	for (int i = 0; i < ST_COUNT; i++) {
		sqlite3_finalize(store->stmt[i]);
		store->stmt[i] = NULL;
	}
	if (store->db) {
		rc = sqlite3_close(store->db);
		if (rc != SQLITE_OK)
			dlc_log(DLC_LOG_WARNING, "closing %s/index.db: %s", store->dir,
				sqlite3_errstr(rc));
	}
	store->db = NULL;
	store->in_txn = false;
}

/*
 * Deletes rows whose file is missing or has the wrong size, then files under
 * data/ that have no row.  Runs at open when the index is new or was not
 * closed cleanly, inside the batch transaction.  Mutex held.  A range's bytes
 * that a crash left unwritten inside its data file are not found here but
 * by the xxh3 check of its first read.
 */
static int scan_orphans(struct dlc_store *store, enum index_state state)
{
	sqlite3_stmt *scan = store->stmt[ST_SCAN];
	sqlite3_stmt *owner = store->stmt[ST_NAME_OWNER];
	int64_t *stale = NULL;
	size_t n_stale = 0, cap_stale = 0, n_orphans = 0;
	char rel[DATA_PATH_SIZE];
	int rc, err = 0;

	while ((rc = sqlite3_step(scan)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(scan, 1);
		uint64_t size = (uint64_t)sqlite3_column_int64(scan, 2);
		uint64_t offset = (uint64_t)sqlite3_column_int64(scan, 3);
		bool shared = sqlite3_column_int(scan, 4) != 0;
		struct stat st;

		/* A whole file has exactly its size; a range must lie inside
		 * its shared data file. */
		if (name && is_entry_name(name, NULL)) {
			dlc_store_data_path(name, rel);
			if (fstatat(store->dir_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISREG(st.st_mode) &&
			    (shared ? offset <= (uint64_t)st.st_size &&
				      size <= (uint64_t)st.st_size - offset
				    : (uint64_t)st.st_size == size))
				continue;
		}
		if (n_stale == cap_stale) {
			size_t cap = cap_stale ? 2 * cap_stale : 256;
			int64_t *grown = realloc(stale, cap * sizeof(*stale));

			if (!grown) {
				err = -ENOMEM;
				break;
			}
			stale = grown;
			cap_stale = cap;
		}
		stale[n_stale++] = sqlite3_column_int64(scan, 0);
	}
	if (err == 0 && rc != SQLITE_DONE)
		err = db_failed(store, "scan", rc);
	sqlite3_reset(scan);
	if (err != 0)
		goto out;

	if (n_stale > 0) {
		err = dlc_store_begin_change(store);
		if (err != 0)
			goto out;
	}
	for (size_t i = 0; i < n_stale; i++) {
		sqlite3_bind_int64(store->stmt[ST_DELETE_ROWID], 1, stale[i]);
		err = step_done(store, ST_DELETE_ROWID, "scan");
		if (err != 0)
			goto out;
	}

	for (unsigned i = 0; i < 256; i++) {
		char sub[sizeof("data/xx")];
		struct dirent *de;
		DIR *d;
		int fd;

		snprintf(sub, sizeof(sub), "data/%02x", i);
		fd = openat(store->dir_fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			err = -errno;
			goto out;
		}
		d = fdopendir(fd);
		if (!d) {
			err = -errno;
			close(fd);
			goto out;
		}
		while ((de = readdir(d)) != NULL) {
			bool keep = false;

			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			if (is_entry_name(de->d_name, sub + 5)) {
				sqlite3_bind_text(owner, 1, de->d_name, -1, SQLITE_STATIC);
				rc = sqlite3_step(owner);
				keep = rc == SQLITE_ROW;
				if (rc != SQLITE_ROW && rc != SQLITE_DONE)
					err = db_failed(store, "scan", rc);
				sqlite3_reset(owner);
				if (err != 0)
					break;
			}
			if (keep)
				continue;
			if (unlinkat(fd, de->d_name, 0) == 0)
				n_orphans++;
			else if (errno != ENOENT)
				dlc_log(DLC_LOG_WARNING, "cannot delete %s/%s/%s: %s", store->dir,
					sub, de->d_name, strerror(errno));
		}
		closedir(d);
		if (err != 0)
			goto out;
	}
	if (state == INDEX_UNCLEAN)
		dlc_log(DLC_LOG_INFO, "%s was not closed cleanly: deleted %zu files without an "
			"index row and %zu rows without a good file", store->dir, n_orphans,
			n_stale);
	else if (n_orphans > 0)
		dlc_log(DLC_LOG_INFO, "%s: deleted %zu files the new index does not list",
			store->dir, n_orphans);
out:
	free(stale);
	return err;
}

/* Moves an unusable index.db (and its WAL) to index.db.broken-TIME. */
static int index_set_aside(struct dlc_store *store, const char *reason)
{
	char stamp[32], aside[96], aside_wal[112];
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	for (int i = 0;; i++) {
		if (i == 0)
			snprintf(aside, sizeof(aside), "index.db.broken-%s", stamp);
		else
			snprintf(aside, sizeof(aside), "index.db.broken-%s.%d", stamp, i);
		if (faccessat(store->dir_fd, aside, F_OK, AT_SYMLINK_NOFOLLOW) != 0 &&
		    errno == ENOENT)
			break;
		if (i == 1000)
			return -EEXIST;
	}
	if (renameat(store->dir_fd, "index.db", store->dir_fd, aside) != 0)
		return -errno;
	snprintf(aside_wal, sizeof(aside_wal), "%s-wal", aside);
	if (renameat(store->dir_fd, "index.db-wal", store->dir_fd, aside_wal) != 0 &&
	    errno != ENOENT)
		return -errno;
	if (unlinkat(store->dir_fd, "index.db-shm", 0) != 0 && errno != ENOENT)
		return -errno;
	dlc_log(DLC_LOG_WARNING, "%s/index.db is unusable (%s): moved it to %s and started "
		"an empty index; its cached files will be deleted", store->dir, reason, aside);
	return 0;
}

static int pragma_journal_wal(void *arg, int n, char **values, char **names)
{
	bool *is_wal = arg;

	*is_wal = n > 0 && values[0] && strcmp(values[0], "wal") == 0;
	return 0;
}

static int quick_check_row(void *arg, int n, char **values, char **names)
{
	bool *ok = arg;

	if (n < 1 || !values[0] || strcmp(values[0], "ok") != 0)
		*ok = false;
	return 0;
}

static int first_value(void *arg, int n, char **values, char **names)
{
	char **value = arg;

	(void)names;
	if (n > 0 && values[0] && !*value)
		*value = strdup(values[0]);
	return 0;
}

/*
 * Migrates an index of format 1 (see migrate_1_sql); SQLITE_OK also when
 * there is nothing to migrate (a new index, or another format, which the
 * format check then refuses).  Mutex held.
 */
static int migrate_format_1(struct dlc_store *store)
{
	char *format = NULL;
	int rc;

	/* Fails on a new index (no meta table yet): nothing to migrate. */
	if (sqlite3_exec(store->db, "SELECT value FROM meta WHERE key = 'format'", first_value,
			 &format, NULL) != SQLITE_OK || !format || strcmp(format, "1") != 0) {
		free(format);
		return SQLITE_OK;
	}
	free(format);
	rc = sqlite3_exec(store->db, migrate_1_sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		if (!sqlite3_get_autocommit(store->db))
			(void)sqlite3_exec(store->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	dlc_log(DLC_LOG_INFO, "%s/index.db: migrated to format %s (cached blocks of large files "
		"are dropped and fetched again; whole files are kept)", store->dir, STORE_FORMAT);
	return SQLITE_OK;
}

/*
 * Opens index.db and checks it.  Returns 0; -EBADMSG with why filled in when the
 * file is unusable and should be set aside; other -errno.  Sets *state to
 * how the previous daemon left it.  Mutex held.
 */
static int index_try_open(struct dlc_store *store, enum index_state *state,
			  char why[WHY_SIZE])
{
	char *db_path = NULL, *format = NULL, *clean_value = NULL;
	bool is_wal = false, check_ok = true;
	int rc, err = 0;

	*state = INDEX_NEW;
	snprintf(why, WHY_SIZE, "corrupt");
	/* An empty file is an empty database: create it (and so its WAL) 0600. */
	rc = openat(store->dir_fd, "index.db", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (rc < 0)
		return -errno;
	close(rc);
	if (asprintf(&db_path, "%s/index.db", store->dir) < 0)
		return -ENOMEM;
	rc = sqlite3_open_v2(db_path, &store->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	free(db_path);
	if (rc != SQLITE_OK) {
		err = sqlite_to_errno(store->db, rc);
		goto out;
	}
	sqlite3_extended_result_codes(store->db, 1);
	sqlite3_busy_timeout(store->db, BUSY_TIMEOUT_MS);

	rc = sqlite3_exec(store->db, "PRAGMA journal_mode=WAL", pragma_journal_wal, &is_wal,
			  NULL);
	if (rc == SQLITE_OK && !is_wal)
		dlc_log(DLC_LOG_WARNING, "%s/index.db: WAL mode unavailable, using a rollback "
			"journal", store->dir);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(store->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = migrate_format_1(store);
	if (rc == SQLITE_OK) {
		rc = sqlite3_exec(store->db, schema_sql, NULL, NULL, NULL);
		/* The tables exist but lack the columns indexed. */
		if ((rc & 0xff) == SQLITE_ERROR)
			rc = SQLITE_CORRUPT;
	}
	if (rc != SQLITE_OK)
		goto sqlite_failed;
	for (int i = 0; i < ST_COUNT; i++) {
		rc = sqlite3_prepare_v3(store->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&store->stmt[i], NULL);
		if (rc != SQLITE_OK) {
			/* The tables exist but have other columns. */
			if ((rc & 0xff) == SQLITE_ERROR)
				rc = SQLITE_CORRUPT;
			goto sqlite_failed;
		}
	}

	err = dlc_store_meta_get_locked(store, "format", &format);
	if (err == -ENOENT) {
		err = dlc_store_meta_set_locked(store, "format", STORE_FORMAT);
	} else if (err == 0 && strcmp(format, STORE_FORMAT) != 0) {
		snprintf(why, WHY_SIZE, "format %.32s, this dlcache reads format %s",
			 format, STORE_FORMAT);
		err = -EBADMSG;
	}
	if (err != 0)
		goto out;

	err = dlc_store_meta_get_locked(store, "clean", &clean_value);
	if (err != 0 && err != -ENOENT)
		goto out;
	err = 0;
	if (clean_value)
		*state = strcmp(clean_value, "1") == 0 ? INDEX_CLEAN : INDEX_UNCLEAN;
	if (*state != INDEX_CLEAN) {
		rc = sqlite3_exec(store->db, "PRAGMA quick_check", quick_check_row, &check_ok,
				  NULL);
		if (rc != SQLITE_OK)
			goto sqlite_failed;
		if (!check_ok) {
			snprintf(why, WHY_SIZE, "quick_check failed");
			err = -EBADMSG;
		}
	}
	goto out;

sqlite_failed:
	err = sqlite_to_errno(store->db, rc);
	if (is_broken_index(rc)) {
		snprintf(why, WHY_SIZE, "%s", sqlite3_errmsg(store->db));
		err = -EBADMSG;
	}
out:
	free(format);
	free(clean_value);
	return err;
}

int dlc_store_open_index(struct dlc_store *store, char **cause)
{
	char why[WHY_SIZE];
	enum index_state state;
	int rc;

	rc = index_try_open(store, &state, why);
	if (rc == -EBADMSG) {
		dlc_store_close_index(store);
		rc = index_set_aside(store, why);
		if (rc != 0) {
			dlc_cause_set(cause, "cannot move the broken index %s/index.db aside: %s",
				  store->dir, strerror(-rc));
			return rc;
		}
		rc = index_try_open(store, &state, why);
	}
	if (rc != 0) {
		dlc_cause_set(cause, "cannot open the cache index %s/index.db: %s", store->dir,
			  strerror(-rc));
		return rc;
	}
	if (state != INDEX_CLEAN) {
		rc = scan_orphans(store, state);
		if (rc != 0) {
			dlc_cause_set(cause, "cannot check %s after an unclean shutdown: %s",
				  store->dir, strerror(-rc));
			return rc;
		}
	}
	/*
	 * A crash from now on must make the next open scan, and so must a
	 * power cut that loses the WAL's unsynced tail (synchronous=NORMAL):
	 * the mark is checkpointed into index.db itself, which a checkpoint
	 * syncs, before any cache file is written.
	 */
	rc = dlc_store_meta_set_locked(store, "clean", "0");
	if (rc == 0)
		rc = dlc_store_commit_changes(store);
	if (rc == 0) {
		int sql = sqlite3_wal_checkpoint_v2(store->db, NULL, SQLITE_CHECKPOINT_FULL, NULL, NULL);

		if (sql != SQLITE_OK)
			rc = db_failed(store, "checkpoint", sql);
	}
	if (rc != 0)
		dlc_cause_set(cause, "cannot write the cache index %s/index.db: %s", store->dir,
			  strerror(-rc));
	return rc;
}

int dlc_store_mark_clean(struct dlc_store *store)
{
	int rc;

	rc = dlc_store_commit_changes(store);
	if (rc != 0)
		rollback_changes(store);
	if (!store->unclean) {
		rc = dlc_store_meta_set_locked(store, "clean", "1");
		if (rc == 0)
			rc = dlc_store_commit_changes(store);
		if (rc != 0)
			rollback_changes(store);
	}
	return rc;
}

/* The rows that store.c's insert, remove and load read and write. */

int dlc_store_check_name_owner(struct dlc_store *store, const char *name, const char *key)
{
	sqlite3_stmt *stmt = store->stmt[ST_NAME_OWNER];
	int rc, err = 0;

	sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW) {
		const unsigned char *owner = sqlite3_column_text(stmt, 0);

		if (!owner || strcmp((const char *)owner, key) != 0)
			err = DLC_STORE_NAME_TAKEN;
	} else if (rc != SQLITE_DONE) {
		err = db_failed(store, "insert", rc);
	}
	sqlite3_reset(stmt);
	return err;
}

int dlc_store_put_row(struct dlc_store *store, const char *path, const char *name,
		      const char *file, uint64_t offset, uint64_t size, int64_t mtime_ns,
		      uint64_t hash)
{
	sqlite3_stmt *upsert = store->stmt[ST_UPSERT];

	sqlite3_bind_text(upsert, 1, path, -1, SQLITE_STATIC);
	sqlite3_bind_text(upsert, 2, name, NAME_LEN, SQLITE_STATIC);
	if (file)
		sqlite3_bind_text(upsert, 3, file, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(upsert, 3);
	sqlite3_bind_int64(upsert, 4, (sqlite3_int64)offset);
	sqlite3_bind_int64(upsert, 5, (sqlite3_int64)size);
	sqlite3_bind_int64(upsert, 6, mtime_ns);
	sqlite3_bind_int64(upsert, 7, (sqlite3_int64)hash);
	return step_done(store, ST_UPSERT, "insert");
}

int dlc_store_delete_row(struct dlc_store *store, const char *path)
{
	int rc;

	sqlite3_bind_text(store->stmt[ST_DELETE], 1, path, -1, SQLITE_STATIC);
	rc = step_done(store, ST_DELETE, "remove");
	if (rc == 0 && sqlite3_changes(store->db) == 0)
		rc = -ENOENT;
	return rc;
}

int dlc_store_delete_name_rows(struct dlc_store *store, const char *name)
{
	sqlite3_bind_text(store->stmt[ST_DELETE_NAME], 1, name, -1, SQLITE_STATIC);
	return step_done(store, ST_DELETE_NAME, "remove");
}

int dlc_store_row_name(struct dlc_store *store, const char *path, char name[NAME_LEN + 1],
		       bool *shared)
{
	sqlite3_stmt *stmt = store->stmt[ST_ROW_NAME];
	int rc, err = -ENOENT;

	sqlite3_bind_text(stmt, 1, path, -1, SQLITE_STATIC);
	rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW) {
		const unsigned char *text = sqlite3_column_text(stmt, 0);

		if (text && is_entry_name((const char *)text, NULL)) {
			memcpy(name, text, NAME_LEN + 1);
			*shared = sqlite3_column_int(stmt, 1) != 0;
			err = 0;
		} else {
			err = -EBADMSG;
		}
	} else if (rc != SQLITE_DONE) {
		err = db_failed(store, "remove", rc);
	}
	sqlite3_reset(stmt);
	return err;
}

int dlc_store_name_used(struct dlc_store *store, const char *name)
{
	sqlite3_stmt *stmt = store->stmt[ST_NAME_OWNER];
	int rc, used;

	sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(stmt);
	used = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : db_failed(store, "remove", rc);
	sqlite3_reset(stmt);
	return used;
}

int dlc_store_load_rows(struct dlc_store *store, int64_t after,
			struct dlc_store_row rows[LOAD_CHUNK], size_t *n)
{
	sqlite3_stmt *stmt = store->stmt[ST_LOAD];
	int rc, err = 0;

	*n = 0;
	sqlite3_bind_int64(stmt, 1, after);
	sqlite3_bind_int(stmt, 2, LOAD_CHUNK);
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		const unsigned char *path = sqlite3_column_text(stmt, 1);

		rows[*n].rowid = sqlite3_column_int64(stmt, 0);
		rows[*n].path = strdup(path ? (const char *)path : "");
		rows[*n].size = (uint64_t)sqlite3_column_int64(stmt, 2);
		rows[*n].mtime_ns = sqlite3_column_int64(stmt, 3);
		rows[*n].hash = (uint64_t)sqlite3_column_int64(stmt, 4);
		(*n)++;
		if (!rows[*n - 1].path) {
			err = -ENOMEM;
			break;
		}
	}
	if (err == 0 && rc != SQLITE_DONE)
		err = db_failed(store, "load", rc);
	sqlite3_reset(stmt);
	return err;
}
