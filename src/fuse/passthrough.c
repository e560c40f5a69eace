/*
 * passthrough.c - which opens of a dataset file the kernel reads itself.
 *
 * A hit on a checked cache entry holding the whole file can be a
 * passthrough open: the cache file is registered as a backing file
 * (fuse_passthrough_open, an ioctl on /dev/fuse that returns a backing
 * id), the OPEN reply carries the id, and the kernel serves every READ of
 * that open from the cache file, whose pages sit once in the page cache.
 * OPEN and RELEASE still reach the daemon, so hit counts, the policy and
 * the prefetcher's reader position are unchanged.
 *
 * Registering costs two ioctls per open (open, and close at the last
 * RELEASE), about 20 us of a 70 us warm open; so the id of a complete,
 * checked entry is kept registered across opens ("kept"): the first
 * passthrough open registers it, later opens reuse it, and it is closed when
 * the cache drops the entry (evicted, replaced, found corrupt, dropped by
 * .control: the cache's drop hook, dlc_passthrough_dropped), and at unmount.
 * A registered backing file holds the cache file open in the kernel, so its
 * disk space is not freed until the id is closed: the drop hook runs under
 * the cache's lock as the entry stops being ready, before its file is
 * unlinked, and closes an idle id at once.  An id whose inode still has
 * passthrough opens is closed at their last RELEASE (their backing files
 * hold the file anyway, as any open file does).  At most
 * PASSTHROUGH_MAX_KEPT ids are kept; past that, registrations last from the
 * open to the inode's last passthrough RELEASE, as if nothing were kept.
 *
 * An entry dropped between the open of its cache file and its registration
 * must not be kept (its file would never be closed): each bucket of inodes
 * counts the drops of its inodes, the opener reads the count before it
 * opens the cache file (dlc_passthrough_seq) and keeps the id only if no
 * drop happened since.
 *
 * The kernel's rules (fs/fuse/iomode.c), which this table keeps:
 *   - an inode is either in "cached" io mode (daemon-served opens that use
 *     the page cache) or in passthrough mode: an open of the other kind
 *     fails with EIO;
 *   - while an inode has a backing file (it has passthrough opens), every
 *     open of it must pass through (a direct_io open fails too), to that
 *     same backing file;
 *   - keep_cache makes no sense on a passthrough open (the caller leaves it
 *     off).
 * So, per inode: while daemon opens are live, a hit is served by the daemon
 * too (splice); while passthrough opens are live, every new open joins them
 * with their backing id, whatever served it (a hit, a miss after an
 * eviction, a first hit being checked): the backing file is a checked copy
 * of the file's bytes, which the kernel keeps open even once the entry is
 * evicted and its file unlinked.  A kept id with no live open is used again
 * only by a hit (the cache file just opened and checked against its stamp);
 * a daemon-served open of that inode closes it first (the entry is no
 * longer the one registered, or its file changed: the hit path refused it).
 *
 * INVARIANTS
 *   - entries[], the entries' fields, drops[] and the counts are guarded by
 *     pt->lock, which nests inside the cache's lock (the drop hook) and
 *     never takes it: nothing here calls the cache;
 *   - an entry exists while its inode has a live tracked open or a
 *     registered backing id;
 *   - an entry never has daemon and passthrough opens at once; it has a
 *     backing id > 0 exactly when it has passthrough opens or is kept;
 *   - a kept entry is ready in the cache with the file registered: the drop
 *     hook unkeeps it as the entry stops being ready;
 *   - pt->registered counts the ids > 0 in the table, pt->kept the kept
 *     entries (<= PASSTHROUGH_MAX_KEPT);
 *   - this table counts an open from the moment its mode is chosen (before
 *     the reply) to the daemon's RELEASE (after the kernel dropped the
 *     open's io mode): it is never less strict than the kernel.
 * dlc_passthrough_verify checks the first four; verify builds run the same
 * checks at every release of pt->lock (unlock()).
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "dlcache/log.h"
#include "dlcache/verify.h"
#include "passthrough.h"

static int verify_locked(const struct dlc_passthrough *pt);
static void unlock(struct dlc_passthrough *pt);

/* Chains of the table of live inodes: opens live at once are at most a few thousand. */
#define PASSTHROUGH_BUCKETS 4096

/*
 * Backing ids kept registered across opens.  Each one is a file the kernel
 * holds open for the daemon (not counted in its RLIMIT_NOFILE, but in the
 * system's file-max, and pinning the cache file's inode and dentry): a few
 * thousand covers the hot set of a node's readers at a few hundred KB of
 * kernel memory.  Entries past it still pass through, registered per open.
 */
#define PASSTHROUGH_MAX_KEPT 4096

/* linux/fuse.h's, absent from Debian 12's kernel headers (6.1). */
#ifndef FUSE_DEV_IOC_BACKING_CLOSE
#define FUSE_DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)
#endif

struct live_inode {
	fuse_ino_t ino;
	unsigned daemon_opens;       /* DLC_OPEN_DAEMON opens live */
	unsigned passthrough_opens;  /* DLC_OPEN_PASSTHROUGH opens live */
	int backing_id;              /* > 0 while passthrough_opens > 0 or kept */
	bool kept;                   /* the id outlives the opens, until the entry's drop */
	struct live_inode *next;
};

struct dlc_passthrough {
	pthread_mutex_t lock;
	bool on;                     /* set once at INIT, before any open; under lock
				      * (the drop hook may run before INIT) */
	bool refused;                /* the kernel refused a backing file; guarded by lock */
	struct dlc_stats *stats;
	struct fuse_session *session;   /* for the ioctls that have no request */
	unsigned registered;         /* backing ids registered; guarded by lock */
	unsigned kept;               /* of which kept across opens; guarded by lock */
	struct live_inode *buckets[PASSTHROUGH_BUCKETS];   /* guarded by lock */
	uint32_t drops[PASSTHROUGH_BUCKETS];   /* guarded by lock: drops of the bucket's inodes */
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

void dlc_passthrough_set_session(struct dlc_passthrough *pt, struct fuse_session *session)
{
	pt->session = session;
}

/* Unregisters backing id; the kernel frees the file once no open uses it. */
static void close_id(struct dlc_passthrough *pt, int id)
{
#if DLC_HAVE_PASSTHROUGH
	int fd = pt->session ? fuse_session_fd(pt->session) : -1;
	uint32_t arg = (uint32_t)id;

	/* fuse_passthrough_close wants a request; the drop hook has none.
	 * Fails only once the connection is gone, which frees every id. */
	if (fd >= 0 && ioctl(fd, FUSE_DEV_IOC_BACKING_CLOSE, &arg) < 0 && errno != ENODEV &&
	    errno != EBADF)
		dlc_log(DLC_LOG_WARNING, "cannot unregister passthrough backing file %d: %s", id,
			strerror(errno));
#else
	(void)id;
#endif
	pt->registered--;
}

void dlc_passthrough_free(struct dlc_passthrough *pt)
{
	if (!pt)
		return;
	for (size_t b = 0; b < PASSTHROUGH_BUCKETS; b++) {
		while (pt->buckets[b]) {
			struct live_inode *e = pt->buckets[b];

			pt->buckets[b] = e->next;
			if (e->backing_id > 0)
				close_id(pt, e->backing_id);
			free(e);
		}
	}
	pthread_mutex_destroy(&pt->lock);
	free(pt);
}

bool dlc_passthrough_init(struct dlc_passthrough *pt, struct fuse_conn_info *conn, bool wanted)
{
#if DLC_HAVE_PASSTHROUGH
	/*
	 * conn->want, not libfuse 3.17's fuse_set_feature_flag(): libfuse
	 * folds want into want_ext after init, and mixing the two calls
	 * drops the flags set through want.
	 */
	if (wanted && (conn->capable & FUSE_CAP_PASSTHROUGH) && geteuid() == 0) {
		conn->want |= FUSE_CAP_PASSTHROUGH;
		pthread_mutex_lock(&pt->lock);   /* the drop hook may be reading it */
		pt->on = true;
		unlock(pt);
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

unsigned dlc_passthrough_backing(struct dlc_passthrough *pt)
{
	unsigned n;

	if (!pt)
		return 0;
	pthread_mutex_lock(&pt->lock);
	n = pt->registered;
	unlock(pt);
	return n;
}

static struct live_inode **slot_of(struct dlc_passthrough *pt, fuse_ino_t ino)
{
	struct live_inode **p = &pt->buckets[ino % PASSTHROUGH_BUCKETS];

	while (*p && (*p)->ino != ino)
		p = &(*p)->next;
	return p;
}

/* Removes the entry at *p if no open of its inode is live and no id registered. */
static void drop_if_idle(struct live_inode **p)
{
	struct live_inode *e = *p;

	if (e->daemon_opens == 0 && e->passthrough_opens == 0 && e->backing_id == 0) {
		*p = e->next;
		free(e);
	}
}

/* e is no longer kept; its id is closed now if no open uses it. */
static void unkeep(struct dlc_passthrough *pt, struct live_inode *e)
{
	if (!e->kept)
		return;
	e->kept = false;
	pt->kept--;
	if (e->passthrough_opens == 0) {
		close_id(pt, e->backing_id);
		e->backing_id = 0;
	}
}

uint32_t dlc_passthrough_seq(struct dlc_passthrough *pt, fuse_ino_t ino)
{
	uint32_t seq;

	if (!pt->on)
		return 0;
	pthread_mutex_lock(&pt->lock);
	seq = pt->drops[ino % PASSTHROUGH_BUCKETS];
	unlock(pt);
	return seq;
}

void dlc_passthrough_dropped(void *arg, uint32_t ino)
{
	struct dlc_passthrough *pt = arg;
	struct live_inode **p;

	/* The cache's threads may drop entries before INIT set pt->on. */
	pthread_mutex_lock(&pt->lock);
	if (!pt->on) {
		unlock(pt);
		return;
	}
	pt->drops[ino % PASSTHROUGH_BUCKETS]++;
	p = slot_of(pt, ino);
	if (*p) {
		unkeep(pt, *p);
		drop_if_idle(p);
	}
	unlock(pt);
}

#if DLC_HAVE_PASSTHROUGH
/* The first passthrough open of e: fd registered as the backing file, and
 * kept if the entry was not dropped since seq was read and room is left. */
static enum dlc_open_mode pass_through(struct dlc_passthrough *pt, fuse_req_t req,
				       struct live_inode *e, int fd, uint32_t seq,
				       struct fuse_file_info *fi)
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
	pt->registered++;
	e->backing_id = id;
	if (seq == pt->drops[e->ino % PASSTHROUGH_BUCKETS] && pt->kept < PASSTHROUGH_MAX_KEPT) {
		e->kept = true;
		pt->kept++;
	}
	fi->backing_id = id;
	return DLC_OPEN_PASSTHROUGH;
}
#endif

enum dlc_open_mode dlc_passthrough_open(struct dlc_passthrough *pt, fuse_req_t req, fuse_ino_t ino,
					int fd, uint32_t seq, struct fuse_file_info *fi)
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
			/* Untracked (no id is registered for it, or it would
			 * have an entry): direct_io is neutral to the kernel. */
			unlock(pt);
			fi->direct_io = 1;
			return DLC_OPEN_DIRECT;
		}
		e->ino = ino;
		*p = e;
	}
#if DLC_HAVE_PASSTHROUGH
	if (e->passthrough_opens == 0 && e->kept && fd < 0) {
		/* A kept id with no open, and the hit path did not give the
		 * entry's file: it changed or went; this open is the daemon's. */
		unkeep(pt, e);
	}
	if (e->backing_id > 0) {
		/* Live passthrough opens (which every open must join), or a
		 * kept id of the very file this hit opened. */
		fi->backing_id = e->backing_id;
		mode = DLC_OPEN_PASSTHROUGH;
	} else if (fd >= 0 && e->daemon_opens == 0) {
		mode = pass_through(pt, req, e, fd, seq, fi);
	}
#else
	(void)req;
	(void)seq;
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
	unlock(pt);
	return mode;
}

void dlc_passthrough_release(struct dlc_passthrough *pt, fuse_req_t req, fuse_ino_t ino,
			     enum dlc_open_mode mode)
{
	struct live_inode **p, *e;

	(void)req;
	if (!pt->on || (mode != DLC_OPEN_DAEMON && mode != DLC_OPEN_PASSTHROUGH))
		return;
	pthread_mutex_lock(&pt->lock);
	p = slot_of(pt, ino);
	e = *p;
	assert(e);
	if (!e) {
		unlock(pt);
		return;
	}
	if (mode == DLC_OPEN_DAEMON) {
		assert(e->daemon_opens > 0);
		e->daemon_opens--;
	} else {
		assert(e->passthrough_opens > 0);
		if (--e->passthrough_opens == 0 && !e->kept) {
			close_id(pt, e->backing_id);
			e->backing_id = 0;
		}
	}
	drop_if_idle(p);
	unlock(pt);
}

static int verify_locked(const struct dlc_passthrough *pt)
{
	unsigned registered = 0, kept = 0;

	for (size_t b = 0; b < PASSTHROUGH_BUCKETS; b++) {
		for (const struct live_inode *e = pt->buckets[b]; e; e = e->next) {
			if (e->ino % PASSTHROUGH_BUCKETS != b)
				return -EUCLEAN;
			if (e->daemon_opens == 0 && e->passthrough_opens == 0 && e->backing_id <= 0)
				return -EUCLEAN;   /* an entry with nothing to keep it */
			if (e->daemon_opens > 0 && e->passthrough_opens > 0)
				return -EUCLEAN;   /* both io modes at once */
			if ((e->passthrough_opens > 0 || e->kept) != (e->backing_id > 0))
				return -EUCLEAN;
			registered += e->backing_id > 0;
			kept += e->kept;
		}
	}
	if (registered != pt->registered || kept != pt->kept || kept > PASSTHROUGH_MAX_KEPT)
		return -EUCLEAN;
	return 0;
}

/* Every path that takes pt->lock leaves through here (verify.h). */
static void unlock(struct dlc_passthrough *pt)
{
	DLC_VERIFY(verify_locked(pt));
	pthread_mutex_unlock(&pt->lock);
}

int dlc_passthrough_verify(struct dlc_passthrough *pt)
{
	int rc;

	pthread_mutex_lock(&pt->lock);
	rc = verify_locked(pt);
	pthread_mutex_unlock(&pt->lock);
	return rc;
}
