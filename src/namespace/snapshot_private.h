/*
 * snapshot_private.h - what the files of the snapshot module share and no
 * other module sees: snapshot_build.c crawls, snapshot_write.c writes the
 * file, snapshot.c loads it (a packed one's chunks and member locations
 * too) and answers queries, snapshot_packed.c answers what only packed
 * snapshots have, snapshot_tar.c indexes existing tar shards.
 * The helpers are defined in the file named with each.
 */
#ifndef DLCACHE_SNAPSHOT_PRIVATE_H
#define DLCACHE_SNAPSHOT_PRIVATE_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcache/snapshot.h"

/* The meta table's "format": 1 for a tree, 2 for a packed snapshot (layout
 * "tar"); load accepts both. */
#define SNAPSHOT_FORMAT 1
#define SNAPSHOT_FORMAT_PACKED 2

/* Where one entry's bytes lie in a packed source (zero for non-files). */
struct snapshot_location {
	uint64_t offset;
	uint64_t hash;
	uint32_t chunk;
};

/* What only a packed snapshot has; immutable once loaded. */
struct snapshot_chunks {
	struct snapshot_location *locations;    /* locations[ino - 1] */
	size_t locations_cap;                   /* while loading */
	char **paths;                           /* paths[chunk], relative to the source */
	uint64_t *sizes;                        /* sizes[chunk] */
	uint32_t count;
	size_t path_bytes;
};

struct dlc_snapshot {
	struct dlc_node *nodes;      /* nodes[ino - 1] */
	uint32_t count;
	char *pool;                  /* names, each NUL-terminated; symlink targets after their name */
	size_t pool_len;
	char *source;
	uint64_t total_bytes;
	uint64_t id;                 /* xxh3 of nodes and pool: the namespace's identity */
	struct snapshot_chunks *chunks;  /* NULL for a tree snapshot */
	/* Versions (S3 ETags): version_at[ino - 1] is 1 + the offset of ino's
	 * in versions, 0 for none; both NULL for a snapshot without any. */
	uint32_t *version_at;
	char *versions;
	size_t versions_len;
	/* The path index, built on the first resolve (see path_index_build). */
	pthread_mutex_t index_lock;  /* serializes the build */
	_Atomic(uint64_t *) index;   /* slots: hash tag << 32 | ino, 0 = empty */
	uint64_t index_mask;
};

/* snapshot_write.c: fsyncs the directory holding file (0 where the file
 * system cannot fsync a directory); 0 or -errno. */
int dlc_snapshot_fsync_parent(const char *file);

/*
 * Grows the array that *array_ptr points to (any object pointer; *cap
 * elements of size bytes) to hold at least need elements, doubling.  On
 * failure returns -ENOMEM and leaves the array as it was.  The pointer is
 * read and written with memcpy so that no type-punned access happens.
 */
int dlc_snapshot_grow_array(void *array_ptr, size_t *cap, size_t need, size_t size);

/* -errno for the failure db just reported; -EIO when it names none. */
int dlc_snapshot_sqlite_errno(sqlite3 *db);

#endif
