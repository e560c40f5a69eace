/*
 * snapshot.c - the dataset's namespace in memory: loads a snapshot file into
 * an immutable index and answers lookups, path resolution and paths from it.
 * The file is crawled by snapshot_build.c and written by snapshot_write.c;
 * what only packed snapshots have (chunks, where each file lies) is loaded
 * here too, into an array of its own, so a tree snapshot pays nothing for
 * it; snapshot_packed.c answers from it.  snapshot_private.h holds what they share.
 *
 * Load.  One SELECT in inode order fills one array of struct dlc_node
 * (nodes[ino - 1]) and one pool of NUL-terminated names (a symlink's target
 * follows its name's NUL).  Both grow geometrically and are shrunk to size
 * at the end.  Every row is checked as it arrives against the rules lookup
 * relies on, so a snapshot that loads is one that lookup, resolve and path
 * can trust without further checks.
 *
 * INVARIANTS (loaded index).  Inodes are exactly 1..count; the root is 1 and
 * its parent is 1; every other entry's parent is a directory with a smaller
 * inode; the children of each directory are contiguous, start at
 * first_child, and are strictly increasing by strcmp; names are non-empty,
 * contain no '/' and are not "." or "..".  The index is never written after
 * load, so readers need no lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "dlcache/cause.h"
#include "dlcache/snapshot.h"
#include "snapshot_private.h"

#define HUGE_PAGE (2u << 20)

/*
 * Zeroed memory for a large table probed at random: 2 MiB aligned and
 * advised into transparent huge pages, which spares a TLB miss per probe.
 */
static void *alloc_huge(size_t bytes)
{
	void *p;

	bytes = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
	if (posix_memalign(&p, HUGE_PAGE, bytes) != 0)
		return NULL;
	(void)madvise(p, bytes, MADV_HUGEPAGE);
	memset(p, 0, bytes);
	return p;
}

/* Moves a loaded array of bytes into huge pages; keeps it where it is on failure. */
static void move_to_huge(void *array_ptr, size_t bytes)
{
	void *old, *moved;

	if (bytes < HUGE_PAGE)
		return;
	memcpy(&old, array_ptr, sizeof(old));
	moved = alloc_huge(bytes);
	if (!moved)
		return;
	memcpy(moved, old, bytes);
	free(old);
	memcpy(array_ptr, &moved, sizeof(moved));
}

/* Gives back the unused tail of the array *array_ptr points to. */
static void shrink_array(void *array_ptr, size_t bytes)
{
	void *array, *shrunk;

	memcpy(&array, array_ptr, sizeof(array));
	if (!array || bytes == 0)
		return;
	shrunk = realloc(array, bytes);
	if (shrunk)
		memcpy(array_ptr, &shrunk, sizeof(shrunk));
}

/* ------------------------------------------------------------------------
 * Helpers shared with snapshot_build.c (contracts in snapshot_private.h).
 */

int dlc_snapshot_grow_array(void *array_ptr, size_t *cap, size_t need, size_t size)
{
	size_t new_cap = *cap ? *cap : 16;
	void *array, *grown;

	if (need <= *cap)
		return 0;
	while (new_cap < need) {
		if (new_cap > SIZE_MAX / 2 / size)
			return -ENOMEM;
		new_cap *= 2;
	}
	memcpy(&array, array_ptr, sizeof(array));
	grown = realloc(array, new_cap * size);
	if (!grown)
		return -ENOMEM;
	memcpy(array_ptr, &grown, sizeof(grown));
	*cap = new_cap;
	return 0;
}

int dlc_snapshot_sqlite_errno(sqlite3 *db)
{
	int err = db ? sqlite3_system_errno(db) : 0;

	return err > 0 ? -err : -EIO;
}

/* ------------------------------------------------------------------------
 * Load.
 */

struct loader {
	const char *file;
	struct dlc_snapshot *snapshot;
	size_t nodes_cap;
	size_t pool_cap;
	bool packed;                 /* the meta table says layout "tar" */
	char **cause;
};

static void not_snapshot(char **cause, const char *file, const char *detail)
{
	dlc_cause_set(cause, "%s is not a dlcache snapshot (%s); rebuild it with dlcache "
		  "snapshot or -o refresh", file, detail);
}

static int damaged(struct loader *loader, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int damaged(struct loader *loader, const char *fmt, ...)
{
	char *detail = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&detail, fmt, ap) < 0)
		detail = NULL;
	va_end(ap);
	dlc_cause_set(loader->cause, "snapshot %s is damaged (%s); rebuild it with %s",
		      loader->file, detail ? detail : "?", loader->packed ?
		      "dlcache pack or dlcache snapshot --tar" : "dlcache snapshot or -o refresh");
	free(detail);
	return -EINVAL;
}

/* Appends len bytes of text and a NUL to the pool; *off is where they start. */
static int pool_add(struct loader *loader, const char *text, size_t len, uint32_t *off)
{
	struct dlc_snapshot *snapshot = loader->snapshot;

	if (snapshot->pool_len > UINT32_MAX)
		return damaged(loader, "names take more than 4 GiB");
	if (dlc_snapshot_grow_array(&snapshot->pool, &loader->pool_cap,
				    snapshot->pool_len + len + 1, 1) < 0) {
		dlc_cause_set(loader->cause, "out of memory while loading snapshot %s", loader->file);
		return -ENOMEM;
	}
	memcpy(snapshot->pool + snapshot->pool_len, text, len);
	snapshot->pool[snapshot->pool_len + len] = '\0';
	if (off)
		*off = (uint32_t)snapshot->pool_len;
	snapshot->pool_len += len + 1;
	return 0;
}

/*
 * Reads the meta table: the format must be one of ours and agree with the
 * layout; keeps source and the entry count, and sets *packed.
 */
static int load_meta(struct loader *loader, sqlite3 *db, uint64_t *entries_hint, bool *packed)
{
	sqlite3_stmt *stmt;
	bool format_ok = false, layout_ok = true;
	int64_t format_number = 0;
	char *format = NULL;
	int rc, src;

	*packed = false;

	src = sqlite3_prepare_v2(db, "SELECT key, value FROM meta", -1, &stmt, NULL);
	if (src != SQLITE_OK) {
		not_snapshot(loader->cause, loader->file,
			     src == SQLITE_NOTADB ? "not an SQLite database" : sqlite3_errmsg(db));
		return -EINVAL;
	}
	while ((src = sqlite3_step(stmt)) == SQLITE_ROW) {
		const char *key = (const char *)sqlite3_column_text(stmt, 0);
		const char *value = (const char *)sqlite3_column_text(stmt, 1);

		if (!key)
			continue;
		if (strcmp(key, "format") == 0) {
			free(format);
			format = strdup(value ? value : "NULL");
			format_number = sqlite3_column_int64(stmt, 1);
			format_ok = sqlite3_column_type(stmt, 1) == SQLITE_INTEGER &&
				    (format_number == SNAPSHOT_FORMAT ||
				     format_number == SNAPSHOT_FORMAT_PACKED);
		} else if (strcmp(key, "layout") == 0) {
			*packed = value && strcmp(value, "tar") == 0;
			loader->packed = *packed;
			layout_ok = value && (*packed || strcmp(value, "tree") == 0);
		} else if (strcmp(key, "source") == 0 && value && !loader->snapshot->source) {
			loader->snapshot->source = strdup(value);
			if (!loader->snapshot->source)
				src = SQLITE_NOMEM;
		} else if (strcmp(key, "entries") == 0 &&
			   sqlite3_column_type(stmt, 1) == SQLITE_INTEGER &&
			   sqlite3_column_int64(stmt, 1) > 0) {
			*entries_hint = (uint64_t)sqlite3_column_int64(stmt, 1);
		}
		if (src == SQLITE_NOMEM)
			break;
	}
	sqlite3_finalize(stmt);
	if (src != SQLITE_DONE) {
		rc = src == SQLITE_NOMEM ? -ENOMEM : dlc_snapshot_sqlite_errno(db);
		dlc_cause_set(loader->cause, "cannot read snapshot %s: %s", loader->file,
			  src == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(db));
		goto out;
	}
	rc = 0;
	if (!format_ok) {
		char *detail = NULL;

		if (!format || asprintf(&detail, "format %s", format) < 0)
			detail = NULL;
		not_snapshot(loader->cause, loader->file, detail ? detail : "no format");
		free(detail);
		rc = -EINVAL;
	} else if (!layout_ok || *packed != (format_number == SNAPSHOT_FORMAT_PACKED)) {
		rc = damaged(loader, "its layout does not match its format %" PRId64, format_number);
	}
out:
	free(format);
	return rc;
}

/*
 * Packed snapshots: checks and stores where the row stmt is on lies (columns
 * 10 to 12: chunk, data_offset, hash), which must be inside its chunk.
 */
static int load_location(struct loader *loader, sqlite3_stmt *stmt, uint64_t ino, bool file,
			 uint64_t size)
{
	struct snapshot_chunks *chunks = loader->snapshot->chunks;
	struct snapshot_location *location;
	int64_t chunk = sqlite3_column_int64(stmt, 10);
	int64_t offset = sqlite3_column_int64(stmt, 11);

	if (dlc_snapshot_grow_array(&chunks->locations, &chunks->locations_cap, ino,
				    sizeof(*chunks->locations)) < 0) {
		dlc_cause_set(loader->cause, "out of memory while loading snapshot %s", loader->file);
		return -ENOMEM;
	}
	location = &chunks->locations[ino - 1];
	*location = (struct snapshot_location){ 0 };
	if (!file)
		return 0;
	if (sqlite3_column_type(stmt, 10) != SQLITE_INTEGER ||
	    sqlite3_column_type(stmt, 11) != SQLITE_INTEGER ||
	    sqlite3_column_type(stmt, 12) != SQLITE_INTEGER)
		return damaged(loader, "file %" PRIu64 " has no chunk, offset or hash", ino);
	if (chunk < 0 || chunk >= chunks->count || offset < 0 ||
	    (uint64_t)offset > chunks->sizes[chunk] || size > chunks->sizes[chunk] - (uint64_t)offset)
		return damaged(loader, "file %" PRIu64 " lies outside its chunk", ino);
	location->chunk = (uint32_t)chunk;
	location->offset = (uint64_t)offset;
	location->hash = (uint64_t)sqlite3_column_int64(stmt, 12);
	return 0;
}

/* Checks and appends the row stmt is on, which must be inode count + 1. */
static int load_row(struct loader *loader, sqlite3_stmt *stmt)
{
	struct dlc_snapshot *snapshot = loader->snapshot;
	uint64_t ino = (uint64_t)snapshot->count + 1;
	int64_t row_ino = sqlite3_column_int64(stmt, 0);
	int64_t parent = sqlite3_column_int64(stmt, 1);
	const char *name = (const char *)sqlite3_column_text(stmt, 2);
	size_t name_len = (size_t)sqlite3_column_bytes(stmt, 2);
	int64_t mode = sqlite3_column_int64(stmt, 3);
	int64_t uid = sqlite3_column_int64(stmt, 4);
	int64_t gid = sqlite3_column_int64(stmt, 5);
	int64_t size = sqlite3_column_int64(stmt, 6);
	int64_t mtime_nsec = sqlite3_column_int64(stmt, 8);
	uint32_t kind = (uint32_t)mode & S_IFMT;
	struct dlc_node *node;
	int rc;

	if ((uint64_t)row_ino != ino || row_ino < 1)
		return damaged(loader, "inode %" PRId64 " where %" PRIu64 " was due", row_ino, ino);
	if (ino > UINT32_MAX)
		return damaged(loader, "more than %" PRIu32 " entries", UINT32_MAX);
	if (mode < 0 || mode > UINT32_MAX || (kind != S_IFREG && kind != S_IFDIR && kind != S_IFLNK))
		return damaged(loader, "entry %" PRIu64 " has mode %#" PRIo64
			       ", not a directory, file or symlink", ino, (uint64_t)mode);
	if (uid < 0 || uid > UINT32_MAX || gid < 0 || gid > UINT32_MAX || size < 0 ||
	    mtime_nsec < 0 || mtime_nsec > 999999999)
		return damaged(loader, "entry %" PRIu64 " has an owner, size or time out of range",
			       ino);
	if (ino == DLC_SNAPSHOT_ROOT_INO) {
		if (parent != DLC_SNAPSHOT_ROOT_INO || kind != S_IFDIR)
			return damaged(loader, "the root is not a directory that is its own parent");
		name = "";
		name_len = 0;
	} else {
		if (parent < 1 || (uint64_t)parent >= ino)
			return damaged(loader, "entry %" PRIu64 " has parent %" PRId64
				       ", not an earlier entry", ino, parent);
		if (!S_ISDIR(snapshot->nodes[parent - 1].mode))
			return damaged(loader, "the parent of entry %" PRIu64
				       " is not a directory", ino);
		if (!name || name_len == 0 || strlen(name) != name_len ||
		    memchr(name, '/', name_len) || strcmp(name, ".") == 0 ||
		    strcmp(name, "..") == 0)
			return damaged(loader, "entry %" PRIu64 " has an invalid name", ino);
	}

	if (dlc_snapshot_grow_array(&snapshot->nodes, &loader->nodes_cap, ino,
				    sizeof(*snapshot->nodes)) < 0) {
		dlc_cause_set(loader->cause, "out of memory while loading snapshot %s", loader->file);
		return -ENOMEM;
	}
	node = &snapshot->nodes[ino - 1];
	*node = (struct dlc_node){
		.size = (uint64_t)size,
		.mtime_sec = sqlite3_column_int64(stmt, 7),
		.mtime_nsec = (uint32_t)mtime_nsec,
		.mode = (uint32_t)mode,
		.uid = (uint32_t)uid,
		.gid = (uint32_t)gid,
		.parent = (uint32_t)parent,
	};
	rc = pool_add(loader, name, name_len, &node->name_off);
	if (rc < 0)
		return rc;
	if (kind == S_IFLNK) {
		const char *target = (const char *)sqlite3_column_text(stmt, 9);
		size_t target_len = (size_t)sqlite3_column_bytes(stmt, 9);

		if (!target || strlen(target) != target_len)
			return damaged(loader, "symlink %" PRIu64 " has no valid target", ino);
		rc = pool_add(loader, target, target_len, NULL);
		if (rc < 0)
			return rc;
	}
	if (kind == S_IFREG)
		snapshot->total_bytes += (uint64_t)size;
	if (snapshot->chunks) {
		rc = load_location(loader, stmt, ino, kind == S_IFREG, (uint64_t)size);
		if (rc < 0)
			return rc;
	}

	if (ino != DLC_SNAPSHOT_ROOT_INO) {
		struct dlc_node *dir = &snapshot->nodes[parent - 1];

		if (dir->nchildren == 0) {
			dir->first_child = (uint32_t)ino;
		} else if (dir->first_child + dir->nchildren != ino) {
			return damaged(loader, "the children of entry %" PRId64
				       " are not contiguous", parent);
		} else if (strcmp(snapshot->pool + snapshot->nodes[ino - 2].name_off, name) >= 0) {
			return damaged(loader, "the children of entry %" PRId64
				       " are not sorted by name", parent);
		}
		dir->nchildren++;
	}
	snapshot->count = (uint32_t)ino;
	return 0;
}

static int load_entries(struct loader *loader, sqlite3 *db)
{
	struct dlc_snapshot *snapshot = loader->snapshot;
	sqlite3_stmt *stmt;
	int rc = 0, src;

	src = sqlite3_prepare_v2(db, snapshot->chunks ?
				 "SELECT ino, parent, name, mode, uid, gid, size, mtime_sec,"
				 " mtime_nsec, target, chunk, data_offset, hash FROM entries"
				 " ORDER BY ino" :
				 "SELECT ino, parent, name, mode, uid, gid, size, mtime_sec,"
				 " mtime_nsec, target FROM entries ORDER BY ino",
				 -1, &stmt, NULL);
	if (src != SQLITE_OK) {
		not_snapshot(loader->cause, loader->file, sqlite3_errmsg(db));
		return -EINVAL;
	}
	while ((src = sqlite3_step(stmt)) == SQLITE_ROW) {
		rc = load_row(loader, stmt);
		if (rc < 0)
			goto out;
	}
	if (src != SQLITE_DONE) {
		rc = dlc_snapshot_sqlite_errno(db);
		dlc_cause_set(loader->cause, "cannot read snapshot %s: %s", loader->file,
			  sqlite3_errmsg(db));
		goto out;
	}
	if (snapshot->count == 0)
		rc = damaged(loader, "it has no root entry");
out:
	sqlite3_finalize(stmt);
	return rc;
}

/* Whether path is relative and canonical: no empty, "." or ".." component. */
static bool canonical_relative(const char *path)
{
	const char *component = path;

	if (!*path)
		return false;
	for (;;) {
		const char *slash = strchr(component, '/');
		size_t len = slash ? (size_t)(slash - component) : strlen(component);

		if (len == 0 || (component[0] == '.' && (len == 1 || (len == 2 && component[1] == '.'))))
			return false;
		if (!slash)
			return true;
		component = slash + 1;
	}
}

static int chunks_damaged(char **cause, const char *file, const char *detail, int64_t id)
{
	dlc_cause_set(cause, "snapshot %s is damaged (chunk %" PRId64 " %s); rebuild it with "
		      "dlcache pack or dlcache snapshot --tar", file, id, detail);
	return -EINVAL;
}

/* Reads the chunks table of a packed snapshot into snapshot->chunks.  0, or
 * -errno with *cause (the load's sentence). */
static int load_chunks(struct dlc_snapshot *snapshot, sqlite3 *db, const char *file,
		       char **cause)
{
	struct snapshot_chunks *chunks = calloc(1, sizeof(*chunks));
	size_t paths_cap = 0, sizes_cap = 0;
	sqlite3_stmt *stmt = NULL;
	int rc = 0, src;

	if (!chunks)
		goto err_oom;
	snapshot->chunks = chunks;
	src = sqlite3_prepare_v2(db, "SELECT id, path, size FROM chunks ORDER BY id", -1, &stmt,
				 NULL);
	if (src != SQLITE_OK) {
		dlc_cause_set(cause, "snapshot %s is damaged (%s); rebuild it with dlcache pack "
			      "or dlcache snapshot --tar", file, sqlite3_errmsg(db));
		return -EINVAL;
	}
	while ((src = sqlite3_step(stmt)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(stmt, 0);
		const char *path = (const char *)sqlite3_column_text(stmt, 1);
		int64_t size = sqlite3_column_int64(stmt, 2);

		if (id != chunks->count || id >= UINT32_MAX) {
			rc = chunks_damaged(cause, file, "is out of order", id);
			goto out;
		}
		if (!path || strlen(path) != (size_t)sqlite3_column_bytes(stmt, 1) ||
		    !canonical_relative(path)) {
			rc = chunks_damaged(cause, file, "has an invalid path", id);
			goto out;
		}
		if (sqlite3_column_type(stmt, 2) != SQLITE_INTEGER || size < 0) {
			rc = chunks_damaged(cause, file, "has an invalid size", id);
			goto out;
		}
		if (dlc_snapshot_grow_array(&chunks->paths, &paths_cap, chunks->count + 1,
					    sizeof(*chunks->paths)) < 0 ||
		    dlc_snapshot_grow_array(&chunks->sizes, &sizes_cap, chunks->count + 1,
					    sizeof(*chunks->sizes)) < 0 ||
		    !(chunks->paths[chunks->count] = strdup(path))) {
			sqlite3_finalize(stmt);
			goto err_oom;
		}
		chunks->sizes[chunks->count++] = (uint64_t)size;
		chunks->path_bytes += strlen(path) + 1;
	}
	if (src != SQLITE_DONE) {
		rc = dlc_snapshot_sqlite_errno(db);
		dlc_cause_set(cause, "cannot read snapshot %s: %s", file, sqlite3_errmsg(db));
	}
out:
	sqlite3_finalize(stmt);
	return rc;

err_oom:
	dlc_cause_set(cause, "out of memory while loading snapshot %s", file);
	return -ENOMEM;
}

static void free_chunks(struct snapshot_chunks *chunks)
{
	if (!chunks)
		return;
	for (uint32_t i = 0; i < chunks->count; i++)
		free(chunks->paths[i]);
	free(chunks->paths);
	free(chunks->sizes);
	free(chunks->locations);
	free(chunks);
}

/*
 * Reads table versions (absent from snapshots written before it: none).
 * Every row must name a regular file; the text goes into one buffer.
 */
static int load_versions(struct dlc_snapshot *snapshot, sqlite3 *db, const char *file,
			 char **cause)
{
	sqlite3_stmt *stmt = NULL;
	size_t cap = 0;
	int rc = 0, src;

	src = sqlite3_prepare_v2(db, "SELECT ino, version FROM versions", -1, &stmt, NULL);
	if (src != SQLITE_OK)
		return 0;   /* no such table: a snapshot without versions */
	while ((src = sqlite3_step(stmt)) == SQLITE_ROW) {
		int64_t ino = sqlite3_column_int64(stmt, 0);
		const char *version = (const char *)sqlite3_column_text(stmt, 1);
		size_t len = version ? strlen(version) + 1 : 0;

		if (ino < 1 || ino > snapshot->count || !version ||
		    !S_ISREG(snapshot->nodes[ino - 1].mode) ||
		    snapshot->versions_len + len > UINT32_MAX - 1) {
			not_snapshot(cause, file, "a version names no regular file");
			rc = -EINVAL;
			goto out;
		}
		if (!snapshot->version_at) {
			snapshot->version_at = calloc(snapshot->count, sizeof(*snapshot->version_at));
			if (!snapshot->version_at)
				goto oom;
		}
		if (dlc_snapshot_grow_array(&snapshot->versions, &cap, snapshot->versions_len + len,
					    1) < 0)
			goto oom;
		memcpy(snapshot->versions + snapshot->versions_len, version, len);
		snapshot->version_at[ino - 1] = (uint32_t)snapshot->versions_len + 1;
		snapshot->versions_len += len;
	}
	if (src != SQLITE_DONE) {
		rc = dlc_snapshot_sqlite_errno(db);
		dlc_cause_set(cause, "cannot read snapshot %s: %s", file, sqlite3_errmsg(db));
	}
out:
	sqlite3_finalize(stmt);
	return rc;
oom:
	sqlite3_finalize(stmt);
	dlc_cause_set(cause, "out of memory while loading snapshot %s", file);
	return -ENOMEM;
}

int dlc_snapshot_load(const char *file, struct dlc_snapshot **out, char **cause)
{
	struct dlc_snapshot *snapshot;
	struct loader loader = { .file = file, .cause = cause };
	uint64_t hint = 0;
	sqlite3 *db = NULL;
	struct stat st;
	bool packed;
	int rc, src;

	if (cause)
		*cause = NULL;
	*out = NULL;
	if (stat(file, &st) < 0) {
		rc = -errno;
		if (rc == -ENOENT)
			dlc_cause_set(cause, "snapshot %s does not exist; build it with dlcache "
				  "snapshot or -o refresh", file);
		else
			dlc_cause_set(cause, "cannot read snapshot %s: %s", file, strerror(-rc));
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		not_snapshot(cause, file, "not a regular file");
		return -EINVAL;
	}
	snapshot = calloc(1, sizeof(*snapshot));
	if (snapshot)
		pthread_mutex_init(&snapshot->index_lock, NULL);
	if (!snapshot) {
		dlc_cause_set(cause, "out of memory while loading snapshot %s", file);
		return -ENOMEM;
	}
	loader.snapshot = snapshot;

	src = sqlite3_open_v2(file, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
	if (src != SQLITE_OK) {
		rc = dlc_snapshot_sqlite_errno(db);
		dlc_cause_set(cause, "cannot open snapshot %s: %s", file,
			  db ? sqlite3_errmsg(db) : sqlite3_errstr(src));
		goto err;
	}
	rc = load_meta(&loader, db, &hint, &packed);
	if (rc == 0 && packed)
		rc = load_chunks(snapshot, db, file, cause);
	if (rc < 0)
		goto err;
	/* Presize from the recorded count, but never beyond what the file can
	 * hold (a row takes well over 8 bytes), so a lie costs no huge malloc. */
	if (hint > (uint64_t)st.st_size / 8 + 1)
		hint = (uint64_t)st.st_size / 8 + 1;
	if (hint > UINT32_MAX)
		hint = UINT32_MAX;
	if (hint && (dlc_snapshot_grow_array(&snapshot->nodes, &loader.nodes_cap, hint,
					     sizeof(*snapshot->nodes)) < 0 ||
		     dlc_snapshot_grow_array(&snapshot->pool, &loader.pool_cap,
					     hint * 24, 1) < 0 ||
		     (snapshot->chunks &&
		      dlc_snapshot_grow_array(&snapshot->chunks->locations,
					      &snapshot->chunks->locations_cap, hint,
					      sizeof(*snapshot->chunks->locations)) < 0))) {
		rc = -ENOMEM;
		dlc_cause_set(cause, "out of memory while loading snapshot %s", file);
		goto err;
	}
	rc = load_entries(&loader, db);
	if (rc == 0)
		rc = load_versions(snapshot, db, file, cause);
	if (rc < 0)
		goto err;
	sqlite3_close(db);
	db = NULL;

	if (!snapshot->source) {
		snapshot->source = strdup("");
		if (!snapshot->source) {
			rc = -ENOMEM;
			dlc_cause_set(cause, "out of memory while loading snapshot %s", file);
			goto err;
		}
	}
	shrink_array(&snapshot->nodes, snapshot->count * sizeof(*snapshot->nodes));
	shrink_array(&snapshot->pool, snapshot->pool_len);
	if (snapshot->chunks)
		shrink_array(&snapshot->chunks->locations,
			     snapshot->count * sizeof(*snapshot->chunks->locations));
	/* Lookups and resolves touch both at random. */
	move_to_huge(&snapshot->nodes, snapshot->count * sizeof(*snapshot->nodes));
	move_to_huge(&snapshot->pool, snapshot->pool_len);
	snapshot->id = XXH3_64bits(snapshot->nodes, snapshot->count * sizeof(*snapshot->nodes)) ^
		       XXH3_64bits(snapshot->pool, snapshot->pool_len);
	*out = snapshot;
	return 0;

err:
	sqlite3_close(db);
	dlc_snapshot_free(snapshot);
	return rc;
}

void dlc_snapshot_free(struct dlc_snapshot *snapshot)
{
	if (!snapshot)
		return;
	free(snapshot->nodes);
	free(snapshot->pool);
	free(snapshot->source);
	free_chunks(snapshot->chunks);
	free(snapshot->version_at);
	free(snapshot->versions);
	free(atomic_load(&snapshot->index));
	pthread_mutex_destroy(&snapshot->index_lock);
	free(snapshot);
}

/* ------------------------------------------------------------------------
 * Queries on a loaded snapshot.
 */

uint32_t dlc_snapshot_count(const struct dlc_snapshot *snapshot)
{
	return snapshot->count;
}

const struct dlc_node *dlc_snapshot_node(const struct dlc_snapshot *snapshot, uint64_t ino)
{
	if (ino < 1 || ino > snapshot->count)
		return NULL;
	return &snapshot->nodes[ino - 1];
}

const char *dlc_snapshot_name(const struct dlc_snapshot *snapshot, uint64_t ino)
{
	const struct dlc_node *node = dlc_snapshot_node(snapshot, ino);

	return node ? snapshot->pool + node->name_off : NULL;
}

const char *dlc_snapshot_link_target(const struct dlc_snapshot *snapshot, uint64_t ino)
{
	const struct dlc_node *node = dlc_snapshot_node(snapshot, ino);
	const char *name;

	if (!node || !S_ISLNK(node->mode))
		return NULL;
	name = snapshot->pool + node->name_off;
	return name + strlen(name) + 1;
}

/* strcmp(component, candidate) for a component of len bytes, not NUL-terminated. */
static int compare_component(const char *component, size_t len, const char *candidate)
{
	int c = strncmp(component, candidate, len);

	if (c != 0)
		return c;
	return candidate[len] == '\0' ? 0 : -1;
}

static uint64_t lookup_component(const struct dlc_snapshot *snapshot, uint64_t parent,
				 const char *name, size_t len)
{
	const struct dlc_node *dir = dlc_snapshot_node(snapshot, parent);
	uint64_t low, high;

	if (!dir || !S_ISDIR(dir->mode) || len == 0)
		return 0;
	low = dir->first_child;
	high = low + dir->nchildren;    /* search [low, high) */
	while (low < high) {
		uint64_t mid = low + (high - low) / 2;
		int c = compare_component(name, len,
					  snapshot->pool + snapshot->nodes[mid - 1].name_off);

		if (c == 0)
			return mid;
		if (c < 0)
			high = mid;
		else
			low = mid + 1;
	}
	return 0;
}

uint64_t dlc_snapshot_lookup(const struct dlc_snapshot *snapshot, uint64_t parent,
			     const char *name)
{
	return lookup_component(snapshot, parent, name, strlen(name));
}

/*
 * The path index.  Resolving a path component by component costs a binary
 * search per component, and in a large directory every step of it is a cache
 * miss: 1.28 M rank lines in random order spent 88% of their time there.  So
 * the first resolve builds a hash table of every entry's whole path: the
 * hash of a path is chained over its components (the root's is PATH_SEED,
 * a child's is XXH3 of its name seeded with its parent's), so building it is
 * one pass in inode order and looking up a path never copies it.  A slot
 * holds the top 32 bits of the hash and the inode; a lookup that matches the
 * tag checks the names up the parent chain, so a hash collision costs a
 * probe, never a wrong answer.  Open addressing, linear probing, at most 2/3
 * full: 8 to 12 bytes per entry, built in about 0.2 s for 1.28 M entries.
 */
#define PATH_SEED 0x9e3779b97f4a7c15ULL
static uint64_t chain_hash(uint64_t parent_hash, const char *name, size_t len)
{
	return XXH3_64bits_withSeed(name, len, parent_hash);
}

static uint64_t *path_index_build(struct dlc_snapshot *snapshot)
{
	uint64_t *hashes, *table, size = 4;
	uint64_t *built;

	pthread_mutex_lock(&snapshot->index_lock);
	built = atomic_load(&snapshot->index);
	if (built)
		goto out;
	while (size < (uint64_t)snapshot->count * 3 / 2)
		size *= 2;
	hashes = malloc(((size_t)snapshot->count + 1) * sizeof(*hashes));
	table = alloc_huge(size * sizeof(*table));
	if (!hashes || !table) {
		free(hashes);
		free(table);
		goto out;       /* resolve falls back to the binary searches */
	}
	hashes[DLC_SNAPSHOT_ROOT_INO] = PATH_SEED;
	for (uint64_t ino = DLC_SNAPSHOT_ROOT_INO + 1; ino <= snapshot->count; ino++) {
		const struct dlc_node *node = &snapshot->nodes[ino - 1];
		const char *name = snapshot->pool + node->name_off;
		uint64_t h = chain_hash(hashes[node->parent], name, strlen(name));
		uint64_t slot = h & (size - 1);

		hashes[ino] = h;
		while (table[slot])
			slot = (slot + 1) & (size - 1);
		table[slot] = (h & 0xffffffff00000000ULL) | ino;
	}
	free(hashes);
	snapshot->index_mask = size - 1;
	atomic_store(&snapshot->index, table);
	built = table;
out:
	pthread_mutex_unlock(&snapshot->index_lock);
	return built;
}

/* Whether ino's path is exactly the n components in starts/lens. */
static bool path_matches(const struct dlc_snapshot *snapshot, uint64_t ino,
			 const char *const *starts, const size_t *lens, size_t n)
{
	while (n > 0) {
		const struct dlc_node *node;
		const char *name;

		if (ino == DLC_SNAPSHOT_ROOT_INO)
			return false;
		node = &snapshot->nodes[ino - 1];
		name = snapshot->pool + node->name_off;
		n--;
		if (strncmp(name, starts[n], lens[n]) != 0 || name[lens[n]] != '\0')
			return false;
		ino = node->parent;
	}
	return ino == DLC_SNAPSHOT_ROOT_INO;
}

#define MAX_COMPONENTS 256

uint64_t dlc_snapshot_resolve(const struct dlc_snapshot *snapshot, const char *path)
{
	struct dlc_snapshot *mutable = (struct dlc_snapshot *)snapshot;
	const char *starts[MAX_COMPONENTS];
	size_t lens[MAX_COMPONENTS];
	uint64_t *table = atomic_load(&mutable->index);
	uint64_t h = PATH_SEED, ino = DLC_SNAPSHOT_ROOT_INO;
	size_t n = 0;

	if (!table)
		table = path_index_build(mutable);
	for (;;) {
		const char *end;
		size_t len;

		while (*path == '/')
			path++;
		if (!*path)
			break;
		end = strchrnul(path, '/');
		len = (size_t)(end - path);
		if (path[0] == '.' && (len == 1 || (len == 2 && path[1] == '.')))
			return 0;
		if (table && n < MAX_COMPONENTS) {
			starts[n] = path;
			lens[n++] = len;
			h = chain_hash(h, path, len);
		} else {
			/* No index (no memory for it) or a very deep path: search. */
			table = NULL;
			for (size_t i = 0; i < n; i++)
				ino = lookup_component(snapshot, ino, starts[i], lens[i]);
			n = 0;
			ino = ino ? lookup_component(snapshot, ino, path, len) : 0;
			if (!ino)
				return 0;
		}
		path = end;
	}
	if (!table || n == 0)
		return ino;
	for (uint64_t slot = h & snapshot->index_mask; table[slot];
	     slot = (slot + 1) & snapshot->index_mask) {
		uint64_t candidate = table[slot] & 0xffffffffULL;

		if ((table[slot] & 0xffffffff00000000ULL) == (h & 0xffffffff00000000ULL) &&
		    path_matches(snapshot, candidate, starts, lens, n))
			return candidate;
	}
	return 0;
}

int dlc_snapshot_path(const struct dlc_snapshot *snapshot, uint64_t ino, char *buf,
		      size_t len)
{
	size_t pos;
	bool leaf = true;

	if (ino < 1 || ino > snapshot->count)
		return -ENOENT;
	if (len == 0)
		return -ENAMETOOLONG;
	/* Written from the end of buf backwards, then moved to its start. */
	pos = len - 1;
	buf[pos] = '\0';
	while (ino != DLC_SNAPSHOT_ROOT_INO) {
		const struct dlc_node *node = &snapshot->nodes[ino - 1];
		const char *name = snapshot->pool + node->name_off;
		size_t name_len = strlen(name);

		if (name_len + (leaf ? 0 : 1) > pos) {
			buf[0] = '\0';
			return -ENAMETOOLONG;
		}
		if (!leaf)
			buf[--pos] = '/';
		pos -= name_len;
		memcpy(buf + pos, name, name_len);
		leaf = false;
		ino = node->parent;
	}
	memmove(buf, buf + pos, len - pos);
	return 0;
}

const char *dlc_snapshot_source(const struct dlc_snapshot *snapshot)
{
	return snapshot->source;
}

uint64_t dlc_snapshot_id(const struct dlc_snapshot *snapshot)
{
	return snapshot->id;
}

const char *dlc_snapshot_version(const struct dlc_snapshot *snapshot, uint64_t ino)
{
	if (!snapshot->version_at || ino < 1 || ino > snapshot->count ||
	    !snapshot->version_at[ino - 1])
		return NULL;
	return snapshot->versions + snapshot->version_at[ino - 1] - 1;
}

uint64_t dlc_snapshot_total_bytes(const struct dlc_snapshot *snapshot)
{
	return snapshot->total_bytes;
}

size_t dlc_snapshot_memory(const struct dlc_snapshot *snapshot)
{
	size_t index = atomic_load(&((struct dlc_snapshot *)snapshot)->index) ?
		       (snapshot->index_mask + 1) * sizeof(uint64_t) : 0;

	size_t packed = 0;

	if (snapshot->chunks)
		packed = sizeof(*snapshot->chunks) +
			 (size_t)snapshot->count * sizeof(*snapshot->chunks->locations) +
			 snapshot->chunks->count * (sizeof(char *) + sizeof(uint64_t)) +
			 snapshot->chunks->path_bytes;
	if (snapshot->version_at)
		packed += (size_t)snapshot->count * sizeof(*snapshot->version_at) +
			  snapshot->versions_len;
	return sizeof(*snapshot) + (size_t)snapshot->count * sizeof(*snapshot->nodes) +
	       snapshot->pool_len + strlen(snapshot->source) + 1 + index + packed;
}
