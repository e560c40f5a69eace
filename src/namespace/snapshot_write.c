/*
 * snapshot_write.c - the snapshot file, written row by row: the one writer
 * behind the crawl (snapshot_build.c), dlcache pack (pack.c) and the index
 * of existing tar shards (snapshot_tar.c).  snapshot.c loads what it writes.
 *
 * A writer owns one SQLite connection on FILE.tmp, with journaling and
 * syncing off (the file is worthless until it is renamed, so there is
 * nothing to protect), and one transaction for all rows.  Commit writes the
 * meta table, closes the connection, fsyncs FILE.tmp, renames it over FILE
 * and fsyncs the directory: a reader sees the old FILE or the whole new one,
 * and a crash at any point leaves at worst a stray FILE.tmp, which the next
 * writer of FILE replaces.
 *
 * A tree snapshot is format 1 with layout "tree"; a packed one is format 2
 * with layout "tar", a chunks table and three more columns in entries (see
 * snapshot.h).  Older dlcache, which knows only format 1, refuses a packed
 * snapshot instead of serving the chunks' members as missing files.
 *
 * Either layout has table versions(ino INTEGER PRIMARY KEY, version TEXT),
 * a row per regular file whose source named a version (an S3 object's
 * ETag), empty for sources that have none.  A table and not a column, so a
 * snapshot without it (written before it existed) loads as one without
 * versions, and older dlcache, which never reads it, loads a new tree
 * snapshot as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dlcache/cause.h"
#include "dlcache/snapshot.h"
#include "snapshot_private.h"

struct dlc_snapshot_writer {
	sqlite3 *db;
	sqlite3_stmt *insert_entry;
	sqlite3_stmt *insert_chunk;
	sqlite3_stmt *insert_version;
	char *file;
	char *tmp;
	char *source;
	bool packed;
	uint64_t entries;
	uint64_t chunks;
};

static const char tree_schema_sql[] =
	"PRAGMA journal_mode=OFF;"
	"PRAGMA synchronous=OFF;"
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value);"
	"CREATE TABLE entries(ino INTEGER PRIMARY KEY, parent INTEGER NOT NULL,"
	" name TEXT NOT NULL, mode INTEGER NOT NULL, uid INTEGER NOT NULL,"
	" gid INTEGER NOT NULL, size INTEGER NOT NULL, mtime_sec INTEGER NOT NULL,"
	" mtime_nsec INTEGER NOT NULL, target TEXT);"
	"CREATE TABLE versions(ino INTEGER PRIMARY KEY, version TEXT NOT NULL);"
	"BEGIN;";

static const char packed_schema_sql[] =
	"PRAGMA journal_mode=OFF;"
	"PRAGMA synchronous=OFF;"
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value);"
	"CREATE TABLE chunks(id INTEGER PRIMARY KEY, path TEXT NOT NULL,"
	" size INTEGER NOT NULL);"
	"CREATE TABLE entries(ino INTEGER PRIMARY KEY, parent INTEGER NOT NULL,"
	" name TEXT NOT NULL, mode INTEGER NOT NULL, uid INTEGER NOT NULL,"
	" gid INTEGER NOT NULL, size INTEGER NOT NULL, mtime_sec INTEGER NOT NULL,"
	" mtime_nsec INTEGER NOT NULL, target TEXT, chunk INTEGER,"
	" data_offset INTEGER, hash INTEGER);"
	"CREATE TABLE versions(ino INTEGER PRIMARY KEY, version TEXT NOT NULL);"
	"BEGIN;";

static int write_failed(struct dlc_snapshot_writer *writer, int src, char **cause)
{
	int rc = dlc_snapshot_sqlite_errno(writer->db);

	dlc_cause_set(cause, "cannot write snapshot '%s' (%s); check that its directory "
		      "exists, is writable and has room", writer->tmp,
		      writer->db && rc != -EIO ? strerror(-rc) :
		      writer->db ? sqlite3_errmsg(writer->db) : sqlite3_errstr(src));
	return rc;
}

int dlc_snapshot_writer_open(const char *file, const char *source, bool packed,
			     struct dlc_snapshot_writer **out, char **cause)
{
	struct dlc_snapshot_writer *writer;
	int rc, src;

	*out = NULL;
	writer = calloc(1, sizeof(*writer));
	if (!writer || !(writer->file = strdup(file)) || !(writer->source = strdup(source)) ||
	    asprintf(&writer->tmp, "%s.tmp", file) < 0) {
		if (writer)
			writer->tmp = NULL;
		rc = -ENOMEM;
		dlc_cause_set(cause, "out of memory while writing snapshot '%s'", file);
		goto err;
	}
	writer->packed = packed;
	if (unlink(writer->tmp) < 0 && errno != ENOENT) {
		rc = -errno;
		dlc_cause_set(cause, "cannot replace '%s': %s", writer->tmp, strerror(-rc));
		goto err;
	}
	src = sqlite3_open_v2(writer->tmp, &writer->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			      SQLITE_OPEN_NOMUTEX, NULL);
	if (src == SQLITE_OK)
		src = sqlite3_exec(writer->db, packed ? packed_schema_sql : tree_schema_sql,
				   NULL, NULL, NULL);
	if (src == SQLITE_OK)
		src = sqlite3_prepare_v2(writer->db, packed ?
					 "INSERT INTO entries(ino, parent, name, mode, uid, gid, size,"
					 " mtime_sec, mtime_nsec, target, chunk, data_offset, hash)"
					 " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)" :
					 "INSERT INTO entries(ino, parent, name, mode, uid, gid, size,"
					 " mtime_sec, mtime_nsec, target) VALUES(?,?,?,?,?,?,?,?,?,?)",
					 -1, &writer->insert_entry, NULL);
	if (src == SQLITE_OK && packed)
		src = sqlite3_prepare_v2(writer->db,
					 "INSERT INTO chunks(id, path, size) VALUES(?,?,?)",
					 -1, &writer->insert_chunk, NULL);
	if (src == SQLITE_OK)
		src = sqlite3_prepare_v2(writer->db,
					 "INSERT INTO versions(ino, version) VALUES(?,?)",
					 -1, &writer->insert_version, NULL);
	if (src != SQLITE_OK) {
		rc = write_failed(writer, src, cause);
		goto err;
	}
	*out = writer;
	return 0;

err:
	dlc_snapshot_writer_abort(writer);
	return rc;
}

static sqlite3_int64 clamp_size(uint64_t size)
{
	return size > INT64_MAX ? INT64_MAX : (sqlite3_int64)size;
}

int dlc_snapshot_writer_add(struct dlc_snapshot_writer *writer,
			    const struct dlc_snapshot_row *row, char **cause)
{
	sqlite3_stmt *stmt = writer->insert_entry;
	int src;

	sqlite3_bind_int64(stmt, 1, (sqlite3_int64)(writer->entries + 1));
	sqlite3_bind_int64(stmt, 2, row->parent);
	sqlite3_bind_text(stmt, 3, row->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 4, row->attr.mode);
	sqlite3_bind_int64(stmt, 5, row->attr.uid);
	sqlite3_bind_int64(stmt, 6, row->attr.gid);
	sqlite3_bind_int64(stmt, 7, clamp_size(row->attr.size));
	sqlite3_bind_int64(stmt, 8, row->attr.mtime_sec);
	sqlite3_bind_int64(stmt, 9, row->attr.mtime_nsec);
	if (row->target)
		sqlite3_bind_text(stmt, 10, row->target, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(stmt, 10);
	if (writer->packed && S_ISREG(row->attr.mode)) {
		sqlite3_bind_int64(stmt, 11, row->member.chunk);
		sqlite3_bind_int64(stmt, 12, clamp_size(row->member.offset));
		sqlite3_bind_int64(stmt, 13, (sqlite3_int64)row->member.hash);
	} else if (writer->packed) {
		sqlite3_bind_null(stmt, 11);
		sqlite3_bind_null(stmt, 12);
		sqlite3_bind_null(stmt, 13);
	}
	src = sqlite3_step(stmt);
	sqlite3_reset(stmt);
	if (src == SQLITE_DONE && row->version && S_ISREG(row->attr.mode)) {
		stmt = writer->insert_version;
		sqlite3_bind_int64(stmt, 1, (sqlite3_int64)(writer->entries + 1));
		sqlite3_bind_text(stmt, 2, row->version, -1, SQLITE_STATIC);
		src = sqlite3_step(stmt);
		sqlite3_reset(stmt);
	}
	if (src != SQLITE_DONE)
		return write_failed(writer, src, cause);
	writer->entries++;
	return 0;
}

int dlc_snapshot_writer_add_chunk(struct dlc_snapshot_writer *writer, const char *path,
				  uint64_t size, char **cause)
{
	sqlite3_stmt *stmt = writer->insert_chunk;
	int src;

	if (!stmt) {
		dlc_cause_set(cause, "snapshot '%s' is not a packed snapshot and has no chunks",
			      writer->file);
		return -EINVAL;
	}
	sqlite3_bind_int64(stmt, 1, (sqlite3_int64)writer->chunks);
	sqlite3_bind_text(stmt, 2, path, -1, SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 3, clamp_size(size));
	src = sqlite3_step(stmt);
	sqlite3_reset(stmt);
	if (src != SQLITE_DONE)
		return write_failed(writer, src, cause);
	writer->chunks++;
	return 0;
}

static int write_meta(sqlite3 *db, const char *key, const char *text, int64_t number)
{
	sqlite3_stmt *stmt;
	int rc;

	rc = sqlite3_prepare_v2(db, "INSERT INTO meta(key, value) VALUES(?, ?)", -1, &stmt,
				NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(stmt, 1, key, -1, SQLITE_STATIC);
	if (text)
		sqlite3_bind_text(stmt, 2, text, -1, SQLITE_STATIC);
	else
		sqlite3_bind_int64(stmt, 2, number);
	rc = sqlite3_step(stmt);
	sqlite3_finalize(stmt);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int fsync_path(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

int dlc_snapshot_fsync_parent(const char *file)
{
	const char *slash = strrchr(file, '/');
	char *dir;
	int rc;

	if (!slash)
		rc = fsync_path(".", O_RDONLY | O_DIRECTORY);
	else {
		dir = strndup(file, slash == file ? 1 : (size_t)(slash - file));
		if (!dir)
			return -ENOMEM;
		rc = fsync_path(dir, O_RDONLY | O_DIRECTORY);
		free(dir);
	}
	return rc == -EINVAL ? 0 : rc;  /* a file system that cannot fsync a directory */
}

int dlc_snapshot_writer_commit(struct dlc_snapshot_writer *writer, uint64_t *entries,
			       char **cause)
{
	sqlite3 *db = writer->db;
	int rc, src;

	sqlite3_finalize(writer->insert_entry);
	sqlite3_finalize(writer->insert_chunk);
	sqlite3_finalize(writer->insert_version);
	writer->insert_entry = writer->insert_chunk = writer->insert_version = NULL;
	src = write_meta(db, "format", NULL, writer->packed ? SNAPSHOT_FORMAT_PACKED
							    : SNAPSHOT_FORMAT);
	if (src == SQLITE_OK)
		src = write_meta(db, "layout", writer->packed ? "tar" : "tree", 0);
	if (src == SQLITE_OK)
		src = write_meta(db, "source", writer->source, 0);
	if (src == SQLITE_OK)
		src = write_meta(db, "created", NULL, (int64_t)time(NULL));
	if (src == SQLITE_OK)
		src = write_meta(db, "entries", NULL, (int64_t)writer->entries);
	if (src == SQLITE_OK)
		src = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	if (src != SQLITE_OK) {
		rc = write_failed(writer, src, cause);
		goto err;
	}
	src = sqlite3_close(db);
	writer->db = NULL;
	if (src != SQLITE_OK) {
		rc = write_failed(writer, src, cause);
		goto err;
	}
	rc = fsync_path(writer->tmp, O_RDONLY);
	if (rc == 0 && rename(writer->tmp, writer->file) < 0)
		rc = -errno;
	if (rc == 0)
		rc = dlc_snapshot_fsync_parent(writer->file);
	if (rc < 0) {
		dlc_cause_set(cause, "cannot write snapshot '%s' (%s); check that its directory "
			      "exists, is writable and has room", writer->file, strerror(-rc));
		goto err;
	}
	if (entries)
		*entries = writer->entries;
	free(writer->tmp);              /* renamed: nothing left to remove */
	writer->tmp = NULL;
	dlc_snapshot_writer_abort(writer);
	return 0;

err:
	dlc_snapshot_writer_abort(writer);
	return rc;
}

void dlc_snapshot_writer_abort(struct dlc_snapshot_writer *writer)
{
	if (!writer)
		return;
	sqlite3_finalize(writer->insert_entry);
	sqlite3_finalize(writer->insert_chunk);
	sqlite3_finalize(writer->insert_version);
	if (writer->db)
		sqlite3_close(writer->db);
	if (writer->tmp)
		unlink(writer->tmp);
	free(writer->tmp);
	free(writer->file);
	free(writer->source);
	free(writer);
}
