/*
 * snapshot_private.h - what the two halves of the snapshot module share and
 * no other module sees: snapshot_build.c writes the file that snapshot.c
 * loads.  The helpers are defined in snapshot.c.
 */
#ifndef DLCACHE_SNAPSHOT_PRIVATE_H
#define DLCACHE_SNAPSHOT_PRIVATE_H

#include <sqlite3.h>
#include <stddef.h>

/* The meta table's "format": written by the build, required by the load. */
#define SNAPSHOT_FORMAT 1

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
