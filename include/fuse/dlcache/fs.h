/*
 * fs.h - the FUSE low-level file system: the FUSE folder is the only code
 * that replies to the kernel (fs.c, with pending.c and readonly.c).  It
 * serves the namespace from the snapshot, file bytes through the read face
 * (read.h), and the virtual files at the mount root: .stats (JSON), .control
 * (the job writes importance and commands), .cached (the cached paths),
 * .chunks (the chunk of every file of a packed source, for a chunk-wise
 * sampler).
 */
#ifndef DLCACHE_FS_H
#define DLCACHE_FS_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

#include "dlcache/backend.h"
#include "dlcache/budget.h"
#include "dlcache/cache.h"
#include "dlcache/fetch.h"
#include "dlcache/snapshot.h"
#include "dlcache/stats.h"
#include "dlcache/tier.h"

/* What the file system serves from; all of it outlives the session. */
struct dlc_fs_context {
	const struct dlc_snapshot *snapshot;
	struct dlc_backend *backend;
	struct dlc_cache *cache;
	struct dlc_fetch *fetch;
	struct dlc_tier *tier;       /* the cluster tier (off when it has no servers) */
	struct dlc_stats *stats;
	struct dlc_budget *budget;   /* every file buffer's bound (memory_limit=) */
	const char *source;
	const char *policy;
	uint64_t cache_max_file;     /* larger files are read from the source directly */
	unsigned source_threads;     /* most opens and reads waiting on the source at once */
	uint64_t source_timeout_ns;  /* an open or read waiting on the source is answered
				      * within this of its arrival; 0: no limit */
	unsigned max_background;     /* asynchronous requests the kernel may queue; 0 = libfuse's */
	bool passthrough;            /* hits may pass through to the cache file (passthrough=) */
	uint64_t kernel_readahead;   /* the kernel's readahead window to set; 0: leave it */
	bool io_uring;               /* the session was asked for FUSE over io_uring (io_uring=) */
	const char *mountpoint;      /* absolute; .control accepts it as a path prefix */
	int64_t control_uid;         /* owner of .control; -1: the user who mounted */
	int64_t control_gid;         /* group that may write .control too; -1: none */
	void *fs;                    /* the session's own state; set by dlc_fs_session_new */
};

/* libfuse 3.18 carries FUSE over io_uring (the session option "io_uring"). */
#if FUSE_MAJOR_VERSION > 3 || (FUSE_MAJOR_VERSION == 3 && FUSE_MINOR_VERSION >= 18)
#define DLC_HAVE_IO_URING 1
#else
#define DLC_HAVE_IO_URING 0
#endif

/* The virtual files at the mount root (hidden from listings). */
#define DLC_FS_STATS_NAME ".stats"
#define DLC_FS_CONTROL_NAME ".control"
#define DLC_FS_CACHED_NAME ".cached"
#define DLC_FS_CHUNKS_NAME ".chunks"
#define DLC_FS_SCORES_NAME ".scores"

/*
 * Creates the FUSE session for context with the command-line args (kernel
 * mount options, -d); NULL on failure (libfuse has printed why).  Does not
 * mount.
 */
struct fuse_session *dlc_fs_session_new(struct fuse_args *args, struct dlc_fs_context *context);

/*
 * Once the session loop has ended: answers the opens and reads still queued
 * for the source with EIO, waits for those running (each ends within
 * source_timeout), then stops the reaper thread that answers those stuck
 * past their deadline (pending.h).  Idempotent; fuse_session_destroy does it too, but only
 * after an INIT, so call it before freeing what the reads use.
 */
void dlc_fs_stop_source_reads(struct dlc_fs_context *context);

#endif
