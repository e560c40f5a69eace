/*
 * store.h - the local cache: sample bytes in files under cache_dir, their
 * persistent index in SQLite, xxh3 verification, crash-safe insert.
 *
 * Layout of cache_dir (missing components created 0700, mkdir -p; the mode of
 * an existing directory is left alone, but cache_dir itself must belong to
 * the caller and be writable by nobody else):
 *   lock           flock(2)ed while a daemon uses the directory
 *   index.db       SQLite (WAL): entries(path TEXT PRIMARY KEY, name, file,
 *                  offset, size, mtime_ns, hash) and meta(key TEXT PRIMARY KEY,
 *                  value); format 2 (format 1 is migrated at open)
 *   data/XX/NAME   a whole file: one per cached sample, its exact bytes; NAME
 *                  is the 16 hex digits of XXH3_64(path), XX its first two.
 *                  Or a shared data file: the ranges (blocks) of one large
 *                  file at their offsets, sparse until all are in; NAME is
 *                  XXH3_64 of the key the ranges share (file)
 *   tmp/           inserts of whole files in progress
 *
 * The store decides nothing about what to keep (that is policy.c): it keeps
 * what it is told, and it never hands out bytes that do not match the xxh3
 * recorded when they were inserted.
 *
 * DESIGN (crash safety).  An insert writes tmp/N, renames it to data/XX/NAME
 * and then adds the index row; a removal deletes the file, then the row.  Index
 * changes are batched in one open transaction committed at least every second
 * by the store's own thread, and at dlc_store_flush() and dlc_store_close().
 * A crash can therefore leave: files in tmp/ (deleted at the next open), files
 * without a row (deleted by the scan that runs when the previous close was not
 * clean), rows without a file or with torn bytes (found by the size and hash
 * checks of dlc_store_read and dropped).  None of these is ever served.
 *
 * Thread-safety: every function may be called from any thread; one mutex
 * guards the SQLite connection.  dlc_store_read takes no lock.
 */
#ifndef DLCACHE_STORE_H
#define DLCACHE_STORE_H

#include <stdbool.h>
#include <stdint.h>

struct dlc_store; /* opaque */

struct dlc_store_entry {
	const char *path;       /* relative to the dataset root */
	uint64_t size;
	int64_t mtime_ns;       /* the source file's mtime when it was cached */
	uint64_t hash;          /* XXH3_64 of the bytes */
};

/*
 * Opens (creating if needed) the cache in dir and locks it.  Returns 0, or
 * -errno with *cause set to a malloc'd sentence: -EBUSY when another daemon
 * holds dir, -EPERM when dir belongs to another user or group or others may
 * write it, -ENOTDIR, -EACCES; a broken index is renamed aside and started
 * afresh (logged), not an error.  Nor is a disk too full to open the index
 * (logged): the store then lists no entry, refuses every insert with
 * -ENOSPC and writes nothing, so the next open finds the index as it was.
 */
int dlc_store_open(const char *dir, struct dlc_store **out, char **cause);

/*
 * Calls cb for every indexed entry.  cb returns 1 to keep the entry, 0 to
 * drop it (the store deletes its file and row), or -errno to stop with that
 * error.  cb runs without the store's lock, so it may call the store;
 * entry->path is valid only during the call.  An entry inserted or replaced
 * while load runs may or may not be visited.
 */
int dlc_store_load(struct dlc_store *store,
		   int (*cb)(void *arg, const struct dlc_store_entry *entry), void *arg);

/*
 * Reads the cached bytes of path into buf, which holds size bytes.  Returns
 * 0 when the file exists, has exactly size bytes and hashes to hash;
 * -ENOENT when it is gone; -EBADMSG when size or hash differ; other -errno.
 * When buf and size are multiples of DLC_STORE_DIRECT_ALIGN and size is at
 * least DLC_STORE_DIRECT_MIN (blocks of large files, in their aligned
 * buffers: fetch.h), the file is read with O_DIRECT, straight from the disk
 * into buf: the bytes are wanted once, to be checked and handed to the
 * kernel, which keeps them in the mounted file's page cache; reading them
 * through the cache file's page cache too cost a copy (a third of the
 * daemon's time in a cached pass) and a second copy of them in memory.
 */
#define DLC_STORE_DIRECT_ALIGN 4096u
#define DLC_STORE_DIRECT_MIN (256u << 10)

/*
 * Whether a cached file is still the one a stamp names (below): an outcome
 * the caller acts on, not an error (errors are -errno).
 */
enum dlc_store_stamp {
	DLC_STORE_SAME = 0,     /* the file is as the stamp says */
	DLC_STORE_CHANGED,      /* written, cut or replaced since: read it again */
};

int dlc_store_read(struct dlc_store *store, const char *path, void *buf, uint64_t size,
		   uint64_t hash, uint64_t *stamp);

/*
 * The stamp (when stamp is not NULL) that dlc_store_read fills on success
 * identifies the file as it was checked: device, inode number, size, mtime
 * and ctime, which change whenever anything writes, truncates or replaces the
 * file.  dlc_store_open_checked opens path's cached copy (or, path being a
 * ranges' file key, their shared data file) for reading by range without
 * reading it, if its stamp is still stamp: returns DLC_STORE_SAME with *fd
 * open on it, DLC_STORE_CHANGED (changed since it was checked: read it
 * whole again; *fd is -1), -ENOENT, other -errno.
 */
int dlc_store_open_checked(struct dlc_store *store, const char *path, uint64_t stamp, int *fd);

/*
 * Caches size bytes of data for path (crash-safe, see DESIGN).  Stores the
 * XXH3_64 of data in *hash and, when stamp is not NULL, the new file's stamp
 * in *stamp (as dlc_store_read fills it: the file holds exactly data, so it
 * may be opened by dlc_store_open_checked at once).  Returns 0; -ENOSPC when the disk is full (nothing
 * is left behind); -EEXIST when another cached path has the same file name
 * (a 64-bit hash collision: do not cache this one); other -errno.  data/ and
 * tmp/, when something removed them behind the store, are made again (logged).
 */
int dlc_store_insert(struct dlc_store *store, const char *path, const void *data,
		     uint64_t size, int64_t mtime_ns, uint64_t *hash, uint64_t *stamp);

/*
 * Deletes the cached copy of path, file and row; 0 or -ENOENT.  For a range,
 * only its row: its shared data file is deleted with its last row.
 */
int dlc_store_remove(struct dlc_store *store, const char *path);

/*
 * Ranges: the blocks of one large file, each a row of its own (path, its
 * size and xxh3) whose bytes sit at offset in one data file that the
 * ranges share, named by the key file (by the caller's convention, never a
 * whole file's path).  One data file holding a whole large file can be
 * handed to the kernel (FUSE passthrough) like a whole file's.
 *
 * DESIGN (crash safety).  An insert writes the bytes at offset in the data
 * file (created if absent, sparse meanwhile), then adds the row; nothing is
 * renamed, so a crash can leave bytes without a row (never served: a read
 * goes by the row), a row whose bytes were not written or were torn (the
 * unclean scan drops a row beyond the file's end, and the xxh3 check of a
 * read catches the rest), and a data file without any row (the scan deletes
 * it).  A data file is deleted whole (dlc_store_remove_file, or with its
 * last row), never cut: a descriptor the kernel holds on it keeps reading
 * the bytes it was given.
 */

/*
 * Writes size bytes of data at offset of file's data file and records
 * them as path's row.  Stores the xxh3 of data in *hash and the stamps of
 * the data file just before and just after the write in *before (0 when
 * the file did not exist) and *after (see dlc_store_open_checked): a caller
 * that serializes its writes to one file and finds *before equal to the
 * stamp it recorded after its previous write knows that nothing else wrote
 * the file in between.  0; -ENOSPC; -EEXIST (file's name collides with
 * another key's); other -errno.
 */
int dlc_store_insert_range(struct dlc_store *store, const char *path, const char *file,
			   uint64_t offset, const void *data, uint64_t size, int64_t mtime_ns,
			   uint64_t *hash, uint64_t *before, uint64_t *after);

/*
 * dlc_store_read for a range: reads size bytes at offset of file's data
 * file, which must hold them (-EBADMSG otherwise), and checks their xxh3;
 * *stamp is the data file's.  O_DIRECT as dlc_store_read when buf, size and
 * offset are aligned.
 */
int dlc_store_read_range(struct dlc_store *store, const char *file, uint64_t offset, void *buf,
			 uint64_t size, uint64_t hash, uint64_t *stamp);

/*
 * Checks n ranges of file's data file, read through the page cache:
 * ranges[i].ok tells whether the file holds range i with its hash.  The pages read stay in the page cache, for the kernel to serve
 * from next (the whole-file open of a large file).  *stamp is the data
 * file's, the same before and after the check.  DLC_STORE_SAME (0);
 * DLC_STORE_CHANGED when the file changed during the check (nothing is
 * proven); -ENOENT; other -errno.
 */
struct dlc_store_range {
	uint64_t offset;
	uint64_t size;
	uint64_t hash;
	bool ok;
};

int dlc_store_check_ranges(struct dlc_store *store, const char *file,
			   struct dlc_store_range *ranges, size_t n, uint64_t *stamp);

/* Deletes file's data file and the rows of all its ranges; 0 or -ENOENT. */
int dlc_store_remove_file(struct dlc_store *store, const char *file);

/*
 * Records source (the mount's source, canonical) as the dataset this cache
 * holds.  When the index names another source, every entry is dropped first
 * (files and rows), so bytes cached for one dataset are never served for
 * another that has files of the same paths, sizes and times; *dropped then
 * counts them.  An index that names no source yet (made before this check)
 * is claimed as it is.  A crash part-way leaves the old name, so the next
 * claim drops the rest.  0 or -errno; a store without an index (full disk
 * at open) holds nothing and returns 0.
 */
int dlc_store_claim(struct dlc_store *store, const char *source, uint64_t *dropped);

/* Commits pending index changes now. */
int dlc_store_flush(struct dlc_store *store);

/* Small persistent values (stats totals, later scores): value is malloc'd. */
int dlc_store_meta_get(struct dlc_store *store, const char *key, char **value);
int dlc_store_meta_set(struct dlc_store *store, const char *key, const char *value);

/* Flushes, marks the cache cleanly closed, unlocks and frees. */
int dlc_store_close(struct dlc_store *store);

/*
 * Checks the store's invariants under its lock (the batch transaction flag
 * agrees with SQLite's, a store without an index has no connection, every
 * statement is prepared): 0, or -EUCLEAN.  Verify builds also run them at
 * each release of the lock (verify.h).
 */
int dlc_store_verify(struct dlc_store *store);

/*
 * Bytes a cached file of size bytes is charged against cache_size: size
 * rounded up to whole 4 KiB blocks, so an empty file costs 0 (its inode and
 * the index row are not charged).
 */
uint64_t dlc_store_footprint(uint64_t size);

/* The directory holding the cache files, for logs. */
const char *dlc_store_dir(const struct dlc_store *store);

#endif
