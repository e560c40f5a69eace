/*
 * snapshot_packed.c - what only packed snapshots have: the chunks table and
 * where each regular file lies in a chunk (loaded by snapshot.c with the
 * rest of the file, answered here by dlc_snapshot_chunk), and the .chunks
 * listing.  The packed snapshots
 * themselves are written by pack.c and snapshot_tar.c; a packed source
 * reached only through its backend (NFS) has its snapshot copied to the
 * local disk by dlc_snapshot_fetch_packed.
 *
 * A packed source is a directory of tar chunks plus the snapshot.  Each
 * regular file of the tree is one member of one chunk; the snapshot keeps
 * the member's chunk, the offset of its first data byte and the xxh3 of its
 * bytes, so a read is one pread of the chunk and a check, and a damaged
 * chunk can never hand out wrong bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlcache/cause.h"
#include "dlcache/snapshot.h"
#include "dlcache/text.h"
#include "snapshot_private.h"

/* ------------------------------------------------------------------------
 * Answering.
 */

bool dlc_snapshot_packed(const struct dlc_snapshot *snapshot)
{
	return snapshot->chunks != NULL;
}

uint32_t dlc_snapshot_chunk_count(const struct dlc_snapshot *snapshot)
{
	return snapshot->chunks ? snapshot->chunks->count : 0;
}

const char *dlc_snapshot_chunk_path(const struct dlc_snapshot *snapshot, uint32_t chunk)
{
	if (!snapshot->chunks || chunk >= snapshot->chunks->count)
		return NULL;
	return snapshot->chunks->paths[chunk];
}

uint64_t dlc_snapshot_chunk_size(const struct dlc_snapshot *snapshot, uint32_t chunk)
{
	if (!snapshot->chunks || chunk >= snapshot->chunks->count)
		return 0;
	return snapshot->chunks->sizes[chunk];
}

int dlc_snapshot_chunk(const struct dlc_snapshot *snapshot, uint64_t ino,
		       struct dlc_snapshot_member *out)
{
	const struct dlc_node *node = dlc_snapshot_node(snapshot, ino);
	const struct snapshot_location *location;

	if (!snapshot->chunks || !node || !S_ISREG(node->mode))
		return -ENOENT;
	location = &snapshot->chunks->locations[ino - 1];
	out->chunk = location->chunk;
	out->chunk_path = snapshot->chunks->paths[location->chunk];
	out->offset = location->offset;
	out->hash = location->hash;
	return 0;
}

int dlc_snapshot_render_chunks(const struct dlc_snapshot *snapshot, struct dlc_budget *budget,
			       uint64_t ceiling, char **text, size_t *len)
{
	char line[16 + DLC_SNAPSHOT_PATH_MAX + 1];
	struct dlc_text out;
	int rc = 0;

	*text = NULL;
	*len = 0;
	if (!snapshot->chunks)
		return 0;
	dlc_text_init(&out, budget, ceiling);
	for (uint64_t ino = DLC_SNAPSHOT_ROOT_INO; rc == 0 && ino <= snapshot->count; ino++) {
		size_t p;

		if (!S_ISREG(snapshot->nodes[ino - 1].mode))
			continue;
		p = (size_t)snprintf(line, 16, "%" PRIu32 "\t", snapshot->chunks->locations[ino - 1].chunk);
		if (dlc_snapshot_path(snapshot, ino, line + p, DLC_SNAPSHOT_PATH_MAX) < 0)
			continue;
		p += strlen(line + p);
		line[p++] = '\n';
		rc = dlc_text_append(&out, line, p);
	}
	if (rc < 0) {
		dlc_text_discard(&out);
		return rc;
	}
	return dlc_text_finish(&out, text, len);
}

bool dlc_snapshot_file_is_packed(const char *file)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *stmt = NULL;
	bool packed = false;

	if (sqlite3_open_v2(file, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) ==
	    SQLITE_OK &&
	    sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'layout'", -1, &stmt,
			       NULL) == SQLITE_OK &&
	    sqlite3_step(stmt) == SQLITE_ROW) {
		const char *value = (const char *)sqlite3_column_text(stmt, 0);

		packed = value && strcmp(value, "tar") == 0;
	}
	sqlite3_finalize(stmt);
	sqlite3_close(db);
	return packed;
}

/* ------------------------------------------------------------------------
 * A packed source's snapshot, copied from a source with no local path.
 */

#define FETCH_PIECE (1u << 20)

static bool is_copy_of(const char *file, const struct dlc_backend_attr *attr)
{
	struct stat st;

	return stat(file, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == attr->size &&
	       st.st_mtim.tv_sec == attr->mtime_sec &&
	       (uint32_t)st.st_mtim.tv_nsec == attr->mtime_nsec;
}

/* Copies the source's snapshot into the open fd; 0 or -errno. */
static int copy_from_source(struct dlc_backend *backend, int fd, uint64_t size)
{
	struct dlc_backend_file *in;
	unsigned char *buf = malloc(FETCH_PIECE);
	uint64_t off = 0;
	int rc;

	if (!buf)
		return -ENOMEM;
	rc = dlc_backend_open(backend, DLC_SNAPSHOT_PACKED_NAME, &in);
	if (rc < 0)
		goto out_free;
	while (off < size) {
		size_t want = size - off < FETCH_PIECE ? (size_t)(size - off) : FETCH_PIECE;
		ssize_t got = dlc_backend_pread(backend, in, buf, want, off);

		if (got < 0 || (size_t)got != want) {
			rc = got < 0 ? (int)got : -EIO; /* shorter than its size: it changed */
			break;
		}
		if (write(fd, buf, want) != (ssize_t)want) {
			rc = errno ? -errno : -EIO;
			break;
		}
		off += want;
	}
	dlc_backend_close(backend, in);
out_free:
	free(buf);
	return rc;
}

int dlc_snapshot_fetch_packed(struct dlc_backend *backend, const char *file, bool *found,
			      char **cause)
{
	struct dlc_backend_attr attr;
	char *tmp = NULL;
	int fd, rc;

	*found = false;
	rc = dlc_backend_stat(backend, DLC_SNAPSHOT_PACKED_NAME, &attr);
	if (rc == -ENOENT || (rc == 0 && !S_ISREG(attr.mode)))
		return 0;
	if (rc < 0) {
		dlc_cause_set(cause, "cannot look for %s on the source %s (%s); check that the server answers",
			      DLC_SNAPSHOT_PACKED_NAME, backend->source, strerror(-rc));
		return rc;
	}
	*found = true;
	if (is_copy_of(file, &attr))
		return 0;
	if (asprintf(&tmp, "%s.tmp", file) < 0) {
		dlc_cause_set(cause, "out of memory while copying the packed source's snapshot");
		return -ENOMEM;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		dlc_cause_set(cause, "cannot write %s (%s); check the cache directory's disk",
			      tmp, strerror(-rc));
		goto out_free;
	}
	rc = copy_from_source(backend, fd, attr.size);
	if (rc == 0) {
		const struct timespec times[2] = {
			{ .tv_sec = attr.mtime_sec, .tv_nsec = attr.mtime_nsec },
			{ .tv_sec = attr.mtime_sec, .tv_nsec = attr.mtime_nsec },
		};

		if (fsync(fd) < 0 || futimens(fd, times) < 0)
			rc = -errno;
	}
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, file) < 0)
		rc = -errno;
	if (rc < 0) {
		unlink(tmp);
		dlc_cause_set(cause, "cannot copy %s from the source %s to %s (%s); check the source and the local disk, then mount again",
			      DLC_SNAPSHOT_PACKED_NAME, backend->source, file, strerror(-rc));
	}
out_free:
	free(tmp);
	return rc;
}
