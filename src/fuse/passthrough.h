/*
 * passthrough.h - FUSE passthrough for cache hits (private to src/fuse/).
 *
 * With libfuse >= 3.17 and a kernel that grants FUSE_CAP_PASSTHROUGH (as
 * root), an open of a checked cache entry registers the cache file as the
 * open's backing file: the kernel then reads it itself and READs never reach
 * the daemon.  The kernel refuses (EIO to the opener) a passthrough open of
 * an inode that has a daemon-served open with the page cache live, and any
 * open but a passthrough one to the same backing file while the inode has
 * one: this module keeps, per inode with live opens, how many of each kind
 * there are, and picks each new open's mode so the rules hold.  The backing
 * id of a checked entry stays registered across opens until the cache drops
 * the entry (dlc_passthrough_dropped) or the mount ends.
 *
 * Built against libfuse 3.14 it only says DLC_OPEN_DAEMON.
 */
#ifndef DLCACHE_FUSE_PASSTHROUGH_H
#define DLCACHE_FUSE_PASSTHROUGH_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

#include "dlcache/stats.h"

/* Whether this build's libfuse can register backing files (3.17 and later). */
#if FUSE_MAJOR_VERSION > 3 || (FUSE_MAJOR_VERSION == 3 && FUSE_MINOR_VERSION >= 17)
#define DLC_HAVE_PASSTHROUGH 1
#else
#define DLC_HAVE_PASSTHROUGH 0
#endif

/* How one open of a dataset file is served. */
enum dlc_open_mode {
	DLC_OPEN_UNTRACKED = 0,  /* not a dataset file (virtual files), or never answered */
	DLC_OPEN_DAEMON,         /* READs to the daemon, page cache kept (keep_cache) */
	DLC_OPEN_DIRECT,         /* READs to the daemon, no page cache (direct_io):
				  * untracked for want of memory */
	DLC_OPEN_PASSTHROUGH,    /* READs served by the kernel from the backing file */
};

struct dlc_passthrough;

/* A table for one mount; NULL when out of memory.  Starts off. */
struct dlc_passthrough *dlc_passthrough_new(struct dlc_stats *stats);
/* Closes every backing id still registered (unmount), frees the table. */
void dlc_passthrough_free(struct dlc_passthrough *pt);

/* The session whose /dev/fuse descriptor registers backing files; set once
 * before it serves. */
void dlc_passthrough_set_session(struct dlc_passthrough *pt, struct fuse_session *session);

/*
 * At INIT: asks for FUSE_CAP_PASSTHROUGH through conn->want when wanted
 * (the passthrough= option), the library supports it, the kernel offers it
 * and the daemon runs as root (the kernel registers backing files only for
 * CAP_SYS_ADMIN).  Returns whether passthrough is on for the mount.
 */
bool dlc_passthrough_init(struct dlc_passthrough *pt, struct fuse_conn_info *conn, bool wanted);

/* Whether passthrough is on for the mount (for .stats). */
bool dlc_passthrough_on(const struct dlc_passthrough *pt);

/* Backing ids registered now (.stats' passthrough_backing). */
unsigned dlc_passthrough_backing(struct dlc_passthrough *pt);

/*
 * The count of the cache's drops of inodes like ino, read before an open
 * opens its cache file and given to dlc_passthrough_open: an id registered
 * for a file dropped in between is not kept.
 */
uint32_t dlc_passthrough_seq(struct dlc_passthrough *pt, fuse_ino_t ino);

/*
 * The cache's drop hook (dlc_cache_set_drop_hook; arg is the table): ino's
 * entry stops being ready (evicted, replaced, corrupt, dropped), its file is
 * about to be deleted.  Its kept backing id is closed now if no open uses
 * it, else at the last passthrough RELEASE, so that the kernel does not
 * hold the file's disk space.  Called with the cache's lock held.
 */
void dlc_passthrough_dropped(void *arg, uint32_t ino);

/*
 * Picks the mode of an open of ino about to be answered with fi: fd is a
 * checked cache file holding the whole file (a hit that may start passing
 * through, or use the entry's kept backing id), opened after seq was read
 * (dlc_passthrough_seq), or -1 (the daemon serves it, unless the inode has live
 * passthrough opens: then every open joins them, the backing file being a
 * checked copy of the same bytes).  Sets fi->backing_id for
 * DLC_OPEN_PASSTHROUGH, fi->direct_io for DLC_OPEN_DIRECT; the caller sets
 * keep_cache only for DLC_OPEN_DAEMON.  Every mode returned must be given
 * back with dlc_passthrough_release once the kernel released the open (or
 * the reply failed).
 */
enum dlc_open_mode dlc_passthrough_open(struct dlc_passthrough *pt, fuse_req_t req, fuse_ino_t ino,
					int fd, uint32_t seq, struct fuse_file_info *fi);

/* The open of ino answered with mode is gone; the last passthrough open of
 * an inode closes its backing id unless it is kept. */
void dlc_passthrough_release(struct dlc_passthrough *pt, fuse_req_t req, fuse_ino_t ino,
			     enum dlc_open_mode mode);

/* Checks the table's invariants (an entry with passthrough opens or kept
 * holds a backing id, no entry with both kinds live, the registered and kept
 * counts): 0, or -EUCLEAN.  Verify builds also run them at each release of
 * the table's lock (verify.h). */
int dlc_passthrough_verify(struct dlc_passthrough *pt);

#endif
