/*
 * pack.h - dlcache pack: a tree of small files rewritten as a few large tar
 * chunks plus a packed snapshot that says where every file lies, so that a
 * mount of the packed directory presents the original tree (DIESEL: merge
 * small files into chunks; read and shuffle chunk-wise).
 *
 * DST receives chunk-000000.tar, chunk-000001.tar, ... (pax/ustar as
 * libarchive writes them; GNU tar lists and extracts them) and
 * dlcache.snapshot.  Members follow the snapshot's inode order (breadth
 * first, each directory's children sorted by name), so the regular files of
 * one chunk have consecutive inodes; a file is never split, and a file
 * larger than the chunk size gets a chunk of its own.  Everything is written
 * under temporary names (NAME.tmp) and renamed when whole, the snapshot
 * last: a pack that is interrupted leaves no dlcache.snapshot, so nothing
 * that mounts as a packed source.
 */
#ifndef DLCACHE_PACK_H
#define DLCACHE_PACK_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#define DLC_DEFAULT_CHUNK_SIZE (256ULL << 20)

struct dlc_pack_options {
	uint64_t chunk_size;        /* a chunk is closed before a member that would take it past this; 0 = default */
	unsigned crawl_threads;     /* 0 = default */
	bool progress;              /* "\rpacked ..." lines on stderr */
	/* When not NULL and set (from a signal handler), the pack stops at the
	 * next member or block, removes what it wrote and returns -EINTR. */
	const volatile sig_atomic_t *stop;
};

struct dlc_pack_result {
	uint64_t entries;           /* snapshot entries, root included */
	uint64_t files;             /* regular files packed */
	uint64_t bytes;             /* their bytes */
	uint32_t chunks;
};

/*
 * Packs the tree under src (a directory) into dst (created if missing; it
 * must be empty or hold only what an interrupted pack left).  0, or -errno
 * with *cause set to a sentence naming the problem and the fix.
 */
int dlc_pack(const char *src, const char *dst, const struct dlc_pack_options *options,
	     struct dlc_pack_result *result, char **cause);

#endif
