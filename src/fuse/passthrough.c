/*
 * passthrough.c - which opens of a dataset file the kernel reads itself.
 *
 * A hit on a checked cache entry holding the whole file can be a
 * passthrough open: at OPEN the cache file is registered as the open's
 * backing file (fuse_passthrough_open, an ioctl on /dev/fuse that returns
 * a backing id), the reply carries the id, and the kernel serves every READ
 * of that open from the cache file, whose pages sit once in the page cache.
 * OPEN and RELEASE still reach the daemon, so hit counts, the policy and
 * the prefetcher's reader position are unchanged.
 *
 * The kernel's rules (fs/fuse/iomode.c), which this table keeps:
 *   - an inode is either in "cached" io mode (daemon-served opens that use
 *     the page cache) or in passthrough mode: an open of the other kind
 *     fails with EIO;
 *   - while an inode has a backing file, every open of it must pass through
 *     (a direct_io open fails too), to that same backing file;
 *   - keep_cache makes no sense on a passthrough open (the caller leaves it
 *     off).
 * So, per inode with live opens: while daemon opens are live, a hit is
 * served by the daemon too (splice); while passthrough opens are live, every
 * new open joins them with their backing id, whatever served it (a hit, a
 * miss after an eviction, a first hit being checked): the backing file is a
 * checked copy of the file's bytes, which the kernel keeps open even once
 * the entry is evicted and its file unlinked.  The backing id is closed when
 * the inode's last passthrough open is released.
 *
 * INVARIANTS
 *   - entries[] and the entries' fields are guarded by pt->lock; an inode
 *     with no live tracked open has no entry;
 *   - an entry never has daemon and passthrough opens at once, and it has
 *     a backing id > 0 exactly when it has passthrough opens;
 *   - this table counts an open from the moment its mode is chosen (before
 *     the reply) to the daemon's RELEASE (after the kernel dropped the
 *     open's io mode): it is never less strict than the kernel.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "dlcache/log.h"
#include "passthrough.h"

/* Chains of the table of live inodes: opens live at once are at most a few thousand. */
#define PASSTHROUGH_BUCKETS 4096

struct live_inode {
	fuse_ino_t ino;
	unsigned daemon_opens;       /* DLC_OPEN_DAEMON opens live */
	unsigned passthrough_opens;  /* DLC_OPEN_PASSTHROUGH opens live */
	int backing_id;              /* > 0 while passthrough_opens > 0 */
	struct live_inode *next;
};

struct dlc_passthrough {
	pthread_mutex_t lock;
	bool on;                     /* set once at INIT, before any open */
	bool refused;                /* the kernel refused a backing file; guarded by lock */
	struct dlc_stats *stats;
	struct live_inode *buckets[PASSTHROUGH_BUCKETS];   /* guarded by lock */
};

struct dlc_passthrough *dlc_passthrough_new(struct dlc_stats *stats)
{
	struct dlc_passthrough *pt = calloc(1, sizeof(*pt));

	if (!pt)
		return NULL;
	pthread_mutex_init(&pt->lock, NULL);
	pt->stats = stats;
	return pt;
}

void dlc_passthrough_free(struct dlc_passthrough *pt)
{
	if (!pt)
		return;
	for (size_t b = 0; b < PASSTHROUGH_BUCKETS; b++) {
		while (pt->buckets[b]) {
			struct live_inode *e = pt->buckets[b];

			pt->buckets[b] = e->next;
			free(e);
		}
	}
	pthread_mutex_destroy(&pt->lock);
	free(pt);
}

bool dlc_passthrough_init(struct dlc_passthrough *pt, struct fuse_conn_info *conn, bool wanted)
{
	pt->on = false;
#if DLC_HAVE_PASSTHROUGH
	/*
	 * conn->want, not libfuse 3.17's fuse_set_feature_flag(): libfuse
	 * folds want into want_ext after init, and mixing the two calls
	 * drops the flags set through want.
	 */
	if (wanted && (conn->capable & FUSE_CAP_PASSTHROUGH) && geteuid() == 0) {
		conn->want |= FUSE_CAP_PASSTHROUGH;
		pt->on = true;
	}
#else
	(void)conn;
	(void)wanted;
#endif
	return pt->on;
}

bool dlc_passthrough_on(const struct dlc_passthrough *pt)
{
	return pt && pt->on;
}

static struct live_inode **slot_of(struct dlc_passthrough *pt, fuse_ino_t ino)
{
	struct live_inode **p = &pt->buckets[ino % PASSTHROUGH_BUCKETS];

	while (*p && (*p)->ino != ino)
		p = &(*p)->next;
	return p;
}

/* Removes the entry at *p if no open of its inode is live any more. */
static void drop_if_idle(struct live_inode **p)
{
	struct live_inode *e = *p;

	if (e->daemon_opens == 0 && e->passthrough_opens == 0) {
		*p = e->next;
		free(e);
	}
}

#if DLC_HAVE_PASSTHROUGH
/* The first passthrough open of e: fd registered as the backing file. */
static enum dlc_open_mode pass_through(struct dlc_passthrough *pt, fuse_req_t req,
				       struct live_inode *e, int fd, struct fuse_file_info *fi)
{
	int id;

	if (pt->refused)
		return DLC_OPEN_DAEMON;
	id = fuse_passthrough_open(req, fd);
	if (id <= 0) {
		/* libfuse logged the ioctl's error; the kernel would refuse
		 * the next ones alike (not root, a stacked cache file system). */
		dlc_log(DLC_LOG_WARNING, "the kernel refused a cache file as a passthrough backing file; hits are served by the daemon from now on (mount with passthrough=0 to keep it from trying)");
		pt->refused = true;
		return DLC_OPEN_DAEMON;
	}
	e->backing_id = id;
	fi->backing_id = id;
	return DLC_OPEN_PASSTHROUGH;
}
#endif

enum dlc_open_mode dlc_passthrough_open(struct dlc_passthrough *pt, fuse_req_t req, fuse_ino_t ino,
					int fd, struct fuse_file_info *fi)
{
	enum dlc_open_mode mode = DLC_OPEN_DAEMON;
	struct live_inode **p, *e;

	if (!pt->on)
		return DLC_OPEN_DAEMON;     /* no passthrough: nothing to keep apart */
	pthread_mutex_lock(&pt->lock);
	p = slot_of(pt, ino);
	e = *p;
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e) {
			/* Untracked (no passthrough open is live, or it would
			 * have an entry): direct_io is neutral to the kernel. */
			pthread_mutex_unlock(&pt->lock);
			fi->direct_io = 1;
			return DLC_OPEN_DIRECT;
		}
		e->ino = ino;
		*p = e;
	}
#if DLC_HAVE_PASSTHROUGH
	if (e->passthrough_opens > 0) {
		fi->backing_id = e->backing_id;
		mode = DLC_OPEN_PASSTHROUGH;
	} else if (fd >= 0 && e->daemon_opens == 0) {
		mode = pass_through(pt, req, e, fd, fi);
	}
#else
	(void)req;
#endif
	if (mode == DLC_OPEN_PASSTHROUGH) {
		e->passthrough_opens++;
		if (fd >= 0)
			dlc_stats_add(pt->stats, DLC_STAT_HITS_PASSTHROUGH, 1);
	} else {
		e->daemon_opens++;
		if (fd >= 0)
			dlc_stats_add(pt->stats, DLC_STAT_PASSTHROUGH_DECLINED, 1);
	}
	drop_if_idle(p);
	pthread_mutex_unlock(&pt->lock);
	return mode;
}

void dlc_passthrough_release(struct dlc_passthrough *pt, fuse_req_t req, fuse_ino_t ino,
			     enum dlc_open_mode mode)
{
	struct live_inode **p, *e;

	if (!pt->on || (mode != DLC_OPEN_DAEMON && mode != DLC_OPEN_PASSTHROUGH))
		return;
	pthread_mutex_lock(&pt->lock);
	p = slot_of(pt, ino);
	e = *p;
	assert(e);
	if (!e) {
		pthread_mutex_unlock(&pt->lock);
		return;
	}
	if (mode == DLC_OPEN_DAEMON) {
		assert(e->daemon_opens > 0);
		e->daemon_opens--;
	} else {
		assert(e->passthrough_opens > 0);
		if (--e->passthrough_opens == 0) {
#if DLC_HAVE_PASSTHROUGH
			fuse_passthrough_close(req, e->backing_id);
#else
			(void)req;
#endif
			e->backing_id = 0;
		}
	}
	drop_if_idle(p);
	pthread_mutex_unlock(&pt->lock);
}

void dlc_passthrough_verify(struct dlc_passthrough *pt)
{
	pthread_mutex_lock(&pt->lock);
	for (size_t b = 0; b < PASSTHROUGH_BUCKETS; b++) {
		for (const struct live_inode *e = pt->buckets[b]; e; e = e->next) {
			assert(e->ino % PASSTHROUGH_BUCKETS == b);
			assert(e->daemon_opens > 0 || e->passthrough_opens > 0);
			assert(e->daemon_opens == 0 || e->passthrough_opens == 0);
			assert((e->passthrough_opens > 0) == (e->backing_id > 0));
		}
	}
	pthread_mutex_unlock(&pt->lock);
}
