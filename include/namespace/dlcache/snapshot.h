/*
 * snapshot.h - the dataset's namespace, crawled once, saved to SQLite, served
 * from memory.
 *
 * A snapshot numbers every entry of the source with an inode number: the root
 * is 1 (FUSE_ROOT_ID) and entries are numbered breadth-first, so the children
 * of a directory are contiguous and sorted by name (strcmp).  lookup is a
 * binary search inside the parent's range, path resolution walks components,
 * and the path of an inode is rebuilt by following parents.  Inode numbers
 * are fixed for the life of a snapshot file.
 *
 * The in-memory index is one array of struct dlc_node (48 bytes) plus one
 * pool of NUL-terminated names (a symlink's target follows its name), about
 * 70 bytes per ImageNet entry.
 *
 * On disk (SQLite, one file): table meta(key TEXT PRIMARY KEY, value) holds
 * "format", "layout", "source", "created" (unix seconds), "entries"; table
 * entries(ino INTEGER PRIMARY KEY, parent, name, mode, uid, gid, size,
 * mtime_sec, mtime_nsec, target) holds one row per entry, root included;
 * table versions(ino INTEGER PRIMARY KEY, version TEXT) the version of each
 * regular file whose source names one (an S3 object's ETag; absent from
 * snapshots written before it, and empty for other sources).  Only a
 * snapshot with versions pays for them in memory: 4 bytes per entry plus
 * the text.
 * A snapshot is written to FILE.tmp and renamed, so a crash never leaves a
 * half-written FILE; load checks the numbering rules above and refuses a file
 * that breaks them.
 *
 * Layouts.  A "tree" snapshot (format 1; files written before layouts
 * existed have no "layout" and are trees) describes a source whose files are
 * the dataset's files.  A "tar" snapshot (format 2, which older dlcache
 * refuses) describes a packed source: the dataset's files are members of tar
 * chunks (dlcache pack, or dlcache snapshot --tar over existing shards).  It
 * adds table chunks(id INTEGER PRIMARY KEY, path, size), ids 0..n-1, paths
 * relative to the source root, and three columns to entries: chunk,
 * data_offset (of the member's first data byte in its chunk) and hash (the
 * xxh3-64 of the member's bytes, as a signed 64-bit integer), set for
 * regular files.  Only a packed snapshot pays for them in memory: 24 bytes
 * per entry in an array of its own, plus the chunk paths; struct dlc_node
 * stays 48 bytes.
 *
 * A loaded snapshot is immutable: every function below may be called from
 * any number of threads at once.  The first dlc_snapshot_resolve builds a
 * hash index of whole paths (8 to 12 bytes per entry, counted by
 * dlc_snapshot_memory), under a lock, so that a path costs one probe instead
 * of a binary search per component.
 */
#ifndef DLCACHE_SNAPSHOT_H
#define DLCACHE_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcache/backend.h"
#include "dlcache/budget.h"

#define DLC_SNAPSHOT_ROOT_INO 1

/* Longest relative path (bytes, without the NUL) plus one: a crawl and
 * `snapshot --tar` leave out what is longer (pack copies a crawled
 * snapshot), so a path buffer of this size always fits. */
#define DLC_SNAPSHOT_PATH_MAX 4096

/* The snapshot that dlcache pack writes beside its chunks, and where a mount
 * looks for one in its source: SOURCE/dlcache.snapshot makes SOURCE packed. */
#define DLC_SNAPSHOT_PACKED_NAME "dlcache.snapshot"

struct dlc_node {
	uint64_t size;
	int64_t mtime_sec;
	uint32_t mtime_nsec;
	uint32_t mode;          /* S_IFREG, S_IFDIR or S_IFLNK plus permission bits */
	uint32_t uid;
	uint32_t gid;
	uint32_t parent;        /* inode of the parent directory; the root's is 1 */
	uint32_t name_off;      /* name in the pool; for a symlink the target follows its NUL */
	uint32_t first_child;   /* directories: inode of the first child (0 if empty) */
	uint32_t nchildren;     /* directories: number of children */
};

struct dlc_snapshot; /* opaque, immutable once loaded */

struct dlc_snapshot_build_options {
	unsigned threads;       /* parallel crawl workers; 0 picks a default (16) */
	bool progress;          /* print "\rcrawled N entries" lines to stderr */
};

/*
 * Crawls backend in parallel and writes a snapshot to file (through
 * file.tmp and rename).  Returns 0, or -errno with *cause set to a malloc'd
 * sentence.  On return *entries (if not NULL) holds the number of entries.
 */
int dlc_snapshot_build(struct dlc_backend *backend, const char *file,
		       const struct dlc_snapshot_build_options *options,
		       uint64_t *entries, char **cause);

/* Loads file into memory; -errno with *cause (missing, not a snapshot, broken). */
int dlc_snapshot_load(const char *file, struct dlc_snapshot **out, char **cause);
void dlc_snapshot_free(struct dlc_snapshot *snapshot);

/* Number of entries, root included: inodes are 1..count. */
uint32_t dlc_snapshot_count(const struct dlc_snapshot *snapshot);

/* The node of ino, or NULL when ino is out of range. */
const struct dlc_node *dlc_snapshot_node(const struct dlc_snapshot *snapshot, uint64_t ino);

/* Name of ino ("" for the root). */
const char *dlc_snapshot_name(const struct dlc_snapshot *snapshot, uint64_t ino);

/* Target of a symlink, or NULL when ino is not a symlink. */
const char *dlc_snapshot_link_target(const struct dlc_snapshot *snapshot, uint64_t ino);

/* Inode of name inside directory parent, or 0 when there is none. */
uint64_t dlc_snapshot_lookup(const struct dlc_snapshot *snapshot, uint64_t parent,
			     const char *name);

/* Inode of a relative path ("a/b/c"; "" is the root; repeated or trailing
 * slashes are tolerated; "." and ".." are not), or 0 when there is none. */
uint64_t dlc_snapshot_resolve(const struct dlc_snapshot *snapshot, const char *path);

/*
 * Inode of a relative path in the snapshot, following symlinks at any
 * component (a link's target is read relative to the link's directory;
 * "." and ".." in targets are walked), never outside the dataset.  0 with
 * *why set to the cause when it does not end at a node: a link that leaves
 * the dataset (absolute, or ".." above the root), dangling, or a loop.
 */
uint32_t dlc_snapshot_resolve_following(const struct dlc_snapshot *snapshot, const char *path,
				       const char **why);

/* Writes the relative path of ino into buf; 0, -ENAMETOOLONG or -ENOENT. */
int dlc_snapshot_path(const struct dlc_snapshot *snapshot, uint64_t ino, char *buf,
		      size_t len);

/* The source the snapshot was built from, as recorded in the file. */
const char *dlc_snapshot_source(const struct dlc_snapshot *snapshot);

/* The namespace's identity: equal for two loads of snapshots of the same tree
 * (names, sizes, modes, times), different when anything differs.  Keys what
 * is saved per inode (scores). */
uint64_t dlc_snapshot_id(const struct dlc_snapshot *snapshot);

/* The version the source gave regular file ino when the snapshot was built
 * (an S3 object's ETag, quoted), or NULL (no such file, or a source without
 * versions). */
const char *dlc_snapshot_version(const struct dlc_snapshot *snapshot, uint64_t ino);

/* Sum of the sizes of regular files, and bytes held by the in-memory index. */
uint64_t dlc_snapshot_total_bytes(const struct dlc_snapshot *snapshot);
size_t dlc_snapshot_memory(const struct dlc_snapshot *snapshot);

/* ------------------------------------------------------------------------
 * Packed snapshots (layout "tar").
 */

/* Where the bytes of one regular file lie in a packed source. */
struct dlc_snapshot_member {
	uint32_t chunk;             /* index of its chunk, 0..dlc_snapshot_chunk_count - 1 */
	const char *chunk_path;     /* the chunk's path relative to the source root */
	uint64_t offset;            /* of the file's first byte in the chunk */
	uint64_t hash;              /* xxh3-64 of the file's bytes */
};

/* True for a packed snapshot: files are read from chunks (dlc_snapshot_chunk). */
bool dlc_snapshot_packed(const struct dlc_snapshot *snapshot);

/* Number of chunks (0 for a tree snapshot). */
uint32_t dlc_snapshot_chunk_count(const struct dlc_snapshot *snapshot);

/* Path of a chunk relative to the source root, or NULL out of range. */
const char *dlc_snapshot_chunk_path(const struct dlc_snapshot *snapshot, uint32_t chunk);

/* Size of a chunk when it was written or indexed, or 0 out of range. */
uint64_t dlc_snapshot_chunk_size(const struct dlc_snapshot *snapshot, uint32_t chunk);

/* Where regular file ino lies; 0, or -ENOENT when the snapshot is not packed
 * or ino is not a regular file.  The member's bytes are
 * [offset, offset + node size) of the chunk. */
int dlc_snapshot_chunk(const struct dlc_snapshot *snapshot, uint64_t ino,
		       struct dlc_snapshot_member *out);

/*
 * The .chunks text of a mount: for each regular file, in inode order,
 * "CHUNK<TAB>PATH<NEWLINE>", CHUNK a decimal chunk index; empty for a tree
 * snapshot.  malloc'd in *text (NULL when empty), its length in *len, and
 * *len bytes taken from budget up to ceiling (dlc_text_finish).  0 or
 * -ENOMEM (no memory, or the budget has no room).
 */
int dlc_snapshot_render_chunks(const struct dlc_snapshot *snapshot, struct dlc_budget *budget,
			       uint64_t ceiling, char **text, size_t *len);

/* Whether file holds a packed snapshot (false when it cannot be read). */
bool dlc_snapshot_file_is_packed(const char *file);

/*
 * A packed source reached through its backend only (NFS): when the source
 * holds DLC_SNAPSHOT_PACKED_NAME, copies it to the local file (through
 * file.tmp and a rename, with the source's mtime) unless file already is
 * that copy (same size and mtime), and sets *found.  Without one, *found is
 * false and nothing changes.  0, or -errno with *cause.
 */
int dlc_snapshot_fetch_packed(struct dlc_backend *backend, const char *file, bool *found,
			      char **cause);

/*
 * dlcache snapshot --tar: indexes existing tar shards in place.  Every
 * regular file under the backend's root whose name ends in ".tar" is a
 * chunk (in path order); its members (regular files, directories, symbolic
 * links, hard links to earlier members; other kinds are skipped) become the
 * tree.  By default each shard's members appear under the shard's own path
 * without ".tar" (shards/train-0001.tar holds shards/train-0001/...); with
 * merge, the members of all shards form one tree from the root.  A path
 * that two members claim (unless both are directories) is refused, as are
 * compressed or unreadable shards, sparse members and ".." in a name.
 * Each member's bytes are read once, to record their xxh3.  Writes a packed
 * snapshot to file; 0 or -errno with *cause.
 */
struct dlc_snapshot_tar_options {
	bool merge;                 /* one tree from all shards, not one directory per shard */
	bool progress;              /* "\rindexed ..." lines on stderr */
};

struct dlc_snapshot_tar_result {
	uint64_t entries;           /* snapshot entries, root included */
	uint64_t files;             /* regular files */
	uint32_t shards;
};

int dlc_snapshot_index_tar(struct dlc_backend *backend, const char *file,
			   const struct dlc_snapshot_tar_options *options,
			   struct dlc_snapshot_tar_result *result, char **cause);

/* ------------------------------------------------------------------------
 * Writing a snapshot file row by row (the crawl, dlcache pack and the tar
 * index all write through this).  Rows are added in inode order, the root
 * first; the rules load checks are the caller's to keep.  The file appears
 * only at commit (FILE.tmp, fsync, rename, fsync of the directory); abort or
 * a crash leaves any older FILE as it was.
 */

struct dlc_snapshot_row {
	uint32_t parent;                    /* inode of the parent; the root's is 1 */
	const char *name;                   /* one component; "" for the root */
	struct dlc_backend_attr attr;
	const char *target;                 /* symlinks: the link's text; else NULL */
	const char *version;                /* regular files: the source's version
					     * (S3 ETag), or NULL */
	struct dlc_snapshot_member member;  /* packed, regular files: chunk, offset, hash */
};

struct dlc_snapshot_writer; /* opaque */

/* Starts FILE.tmp; packed writes layout "tar" (chunks and member columns).
 * 0, or -errno with *cause. */
int dlc_snapshot_writer_open(const char *file, const char *source, bool packed,
			     struct dlc_snapshot_writer **out, char **cause);

/* Appends the row of the next inode (1, 2, ...).  0, or -errno with *cause. */
int dlc_snapshot_writer_add(struct dlc_snapshot_writer *writer,
			    const struct dlc_snapshot_row *row, char **cause);

/* Appends the next chunk (ids 0, 1, ...) of a packed snapshot. */
int dlc_snapshot_writer_add_chunk(struct dlc_snapshot_writer *writer, const char *path,
				  uint64_t size, char **cause);

/* Writes the meta table and puts FILE in place; frees writer whatever
 * happens.  On success *entries (if not NULL) holds the number of rows. */
int dlc_snapshot_writer_commit(struct dlc_snapshot_writer *writer, uint64_t *entries,
			       char **cause);

/* Drops FILE.tmp and frees writer (NULL is fine). */
void dlc_snapshot_writer_abort(struct dlc_snapshot_writer *writer);

#endif
