/*
 * store_private.h - what the two halves of the store module share and no
 * other module sees: store.c (cache_dir, the cache files and the public
 * API) and store_index.c (the SQLite index and its batch transaction).
 * Unless a comment says otherwise, the store_index.c functions below run
 * with store->mutex held, which store.c takes around each call.
 */
#ifndef DLCACHE_STORE_PRIVATE_H
#define DLCACHE_STORE_PRIVATE_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "dlcache/store.h"

#define LOAD_CHUNK 1024                 /* rows dlc_store_load copies per lock hold */
#define NAME_LEN 16                     /* hex digits of XXH3_64(path) */
#define DATA_PATH_SIZE sizeof("data/xx/0123456789abcdef")

/* The prepared statements; only store_index.c runs them. */
enum stmt_id {
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_NAME_OWNER,
	ST_UPSERT,
	ST_DELETE,
	ST_DELETE_ROWID,
	ST_DELETE_NAME,
	ST_ROW_NAME,
	ST_LOAD,
	ST_SCAN,
	ST_META_GET,
	ST_META_SET,
	ST_COUNT
};

struct dlc_store {
	/* Fixed from open to close: read without a lock. */
	char *dir;                      /* absolute path, for logs and SQLite */
	int dir_fd;                     /* every file is opened relative to it */
	int lock_fd;                    /* holds flock(LOCK_EX) on dir/lock */
	atomic_uint_fast64_t tmp_seq;   /* makes tmp/ names unique */
	bool no_index;                  /* the disk was full at open: index.db is not
					 * open and nothing is read or written */
	atomic_bool no_direct;          /* the cache's file system refused O_DIRECT */

	pthread_mutex_t mutex;
	pthread_mutex_t layout_lock;    /* one remake of the layout at a time (a leaf) */
	pthread_cond_t wake;            /* a transaction began, or stopping */
	pthread_t flusher;
	bool flusher_running;           /* only touched by open and close */

	sqlite3 *db;                    /* guarded by mutex */
	sqlite3_stmt *stmt[ST_COUNT];   /* guarded by mutex */
	bool in_txn;                    /* guarded by mutex: BEGIN done, no COMMIT yet */
	struct timespec txn_began;      /* guarded by mutex; CLOCK_MONOTONIC */
	bool stopping;                  /* guarded by mutex: the flusher must exit */
	bool unclean;                   /* guarded by mutex: changes were lost, so
					 * leave clean=0 and let the next open scan */
};

/* One index row as dlc_store_load copies it out; path is malloc'd. */
struct dlc_store_row {
	int64_t rowid;
	char *path;
	uint64_t size;
	int64_t mtime_ns;
	uint64_t hash;
};

/*
 * store_index.c: the module's invariants (see store.c's DESIGN block), 0 or
 * -EUCLEAN; mutex held.  dlc_store_unlock releases the mutex after running
 * them in verify builds (verify.h): every path that takes the mutex leaves
 * through it.
 */
int dlc_store_verify_locked(const struct dlc_store *store);
void dlc_store_unlock(struct dlc_store *store);

/* data/XX/NAME for a NAME, relative to dir_fd. */
static inline void dlc_store_data_path(const char *name, char out[DATA_PATH_SIZE])
{
	snprintf(out, DATA_PATH_SIZE, "data/%.2s/%s", name, name);
}

/*
 * store_index.c: opens index.db (cache_dir is locked and laid out), setting
 * a broken one aside once, runs the orphan scan if the previous daemon did
 * not close it cleanly, and marks it unclean until dlc_store_mark_clean.
 * Returns 0, or -errno with *cause set.
 */
int dlc_store_open_index(struct dlc_store *store, char **cause);

/* Finalizes the statements and closes the connection.  Mutex held or unshared. */
void dlc_store_close_index(struct dlc_store *store);

/*
 * The flusher thread, which commits the batch transaction a second after it
 * began.  Called without the mutex, by open and by close only; stopping a
 * flusher that never started does nothing.
 */
int dlc_store_start_flusher(struct dlc_store *store);
void dlc_store_stop_flusher(struct dlc_store *store);

/* Opens the batch transaction if none is open. */
int dlc_store_begin_change(struct dlc_store *store);

/*
 * Commits the batch transaction, if one is open.  A COMMIT that fails but
 * leaves the transaction open (busy, disk full) is retried by the flusher a
 * second later.
 */
int dlc_store_commit_changes(struct dlc_store *store);

/*
 * At close: commits what is pending (giving it up if that fails) and, when
 * no change was lost, sets meta "clean" to "1" so that the next open does
 * not scan.  Returns 0 or the -errno of the failure.
 */
int dlc_store_mark_clean(struct dlc_store *store);

/* meta: *value is malloc'd; -ENOENT when key is absent.  Set joins the batch. */
int dlc_store_meta_get_locked(struct dlc_store *store, const char *key, char **value);
int dlc_store_meta_set_locked(struct dlc_store *store, const char *key, const char *value);

/* Whose the data file NAME is (a data file belongs to its whole file's
 * path, or to the file key its ranges share, store.h). */
enum dlc_store_name {
	DLC_STORE_NAME_FREE = 0,        /* key's, or nobody's yet */
	DLC_STORE_NAME_TAKEN,           /* another key's: a 64-bit collision */
};

/* An enum dlc_store_name, or -errno (the index failed). */
int dlc_store_check_name_owner(struct dlc_store *store, const char *name, const char *key);

/*
 * Adds or replaces path's row, or deletes it (-ENOENT when there was none),
 * in the batch transaction, which dlc_store_begin_change opened.  file is
 * NULL for a whole file (name is NAME(path), offset 0), else the key of the
 * shared data file (name is NAME(file)).
 */
int dlc_store_put_row(struct dlc_store *store, const char *path, const char *name,
		      const char *file, uint64_t offset, uint64_t size, int64_t mtime_ns,
		      uint64_t hash);
int dlc_store_delete_row(struct dlc_store *store, const char *path);

/* Deletes every row whose data file is name, in the batch transaction. */
int dlc_store_delete_name_rows(struct dlc_store *store, const char *name);

/*
 * path's row: copies its data file's NAME into name and sets *shared when
 * the row is a range of a shared data file; -ENOENT when path has no row.
 */
int dlc_store_row_name(struct dlc_store *store, const char *path, char name[NAME_LEN + 1],
		       bool *shared);

/* 1 when some row still names the data file name, 0 when none, or -errno. */
int dlc_store_name_used(struct dlc_store *store, const char *name);

/*
 * Copies up to LOAD_CHUNK rows with rowid > after, in rowid order, into
 * rows and their count into *n.  On failure *n still counts the rows whose
 * path the caller must free (the last one's may be NULL).
 */
int dlc_store_load_rows(struct dlc_store *store, int64_t after,
			struct dlc_store_row rows[LOAD_CHUNK], size_t *n);

#endif
