/*
 * fs.c - the FUSE low-level operations table.
 *
 * Inode numbers are the snapshot's (1 is the root); the virtual files at the
 * root take the numbers just above the snapshot's last inode.  The snapshot
 * never changes while mounted, so entries and attributes are given to the
 * kernel with very long timeouts, missing names are cached as negative
 * entries, directory listings are cached (cache_readdir), file pages are kept
 * across opens (keep_cache), and FORGET needs no work.  Every mutation fails
 * with EROFS, except writes to .control: each write is parsed by control.c
 * and its commands applied by control_apply.c; a bad line fails that write
 * (or the close that ends an unterminated line) with EINVAL after the good
 * lines around it were applied.
 *
 * A dataset file is served through the read face (read.h): an open is
 * one dlc_read_open, finished in the source pool when it answers
 * DLC_READ_MUST_WAIT, a read one dlc_read_at (likewise).  This file only
 * picks the reply's form from what the face gives back (a range of a file
 * to splice, or bytes), tells passthrough.c the cache file the kernel may
 * read itself, and tells the face how the open is served; where the bytes
 * come from is read/'s choice.
 *
 * The FUSE folder's replies: this file answers every request (readonly.c
 * the mutations it fills into the table, with EROFS); pending.c answers a
 * request waiting on the source with EINTR when its reader leaves.  The
 * modules called return 0 or -errno (or an outcome enum) and this file
 * replies fuse_reply_err(req, -rc).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dlcache/control.h"
#include "dlcache/deadline.h"
#include "dlcache/fs.h"
#include "dlcache/log.h"
#include "dlcache/kernel_readahead.h"
#include "dlcache/pool.h"
#include "dlcache/read.h"
#include "control_apply.h"
#include "page_drop.h"
#include "passthrough.h"
#include "pending.h"
#include "readonly.h"
#include "stats_gauges.h"

/* The dataset does not change while mounted: a year is as good as forever. */
#define FOREVER (365.0 * 24 * 3600)

enum virtual_file {
	VIRTUAL_STATS = 1,
	VIRTUAL_CONTROL,
	VIRTUAL_CACHED,
	VIRTUAL_CHUNKS,
	VIRTUAL_SCORES,
	VIRTUAL_COUNT,
};

static const char *const virtual_names[VIRTUAL_COUNT] = {
	[VIRTUAL_STATS] = DLC_FS_STATS_NAME,
	[VIRTUAL_CONTROL] = DLC_FS_CONTROL_NAME,
	[VIRTUAL_CACHED] = DLC_FS_CACHED_NAME,
	[VIRTUAL_CHUNKS] = DLC_FS_CHUNKS_NAME,
	[VIRTUAL_SCORES] = DLC_FS_SCORES_NAME,
};

enum handle_kind {
	HANDLE_DATA,        /* a dataset file, read through the read face */
	HANDLE_TEXT,        /* a virtual file's contents, made at open */
	HANDLE_CONTROL,     /* .control: a parser for what is written */
};

struct handle {
	_Atomic unsigned refs;                  /* the kernel's open, and each
						 * source read in the pool */
	enum handle_kind kind;
	struct dlc_read_handle *data;           /* HANDLE_DATA */
	char *text;
	size_t text_len;
	fuse_ino_t ino;                         /* a dataset file's */
	enum dlc_open_mode mode;                /* how its open is served (passthrough.h) */
	pthread_mutex_t lock;                   /* HANDLE_CONTROL: guards parser */
	struct dlc_control_parser *parser;
	bool opened_by_owner;                   /* HANDLE_CONTROL: by the mount's owner or root */
	struct handle *prev, *next;             /* fs->open_handles; guarded by
						 * fs->handles_lock */
};

struct fs {
	struct dlc_fs_context *context;
	uint64_t virtual_base;      /* the snapshot's count; virtual inode v is base + v */
	struct timespec started;
	uid_t owner;
	gid_t owner_group;
	_Atomic uint64_t epoch;     /* the last "epoch N" written to .control */
	/*
	 * Every handle the kernel holds: the ones it never releases (the
	 * daemon stopped while files were open) are freed by fs_destroy.
	 */
	pthread_mutex_t handles_lock;
	struct handle open_handles; /* list head; guarded by handles_lock */
	struct dlc_pool *source_pool;  /* opens and reads that wait on the source */
	struct dlc_passthrough *passthrough;   /* the mode of each dataset open */
	struct dlc_read *read;                 /* the read face (read.h) */
	struct dlc_page_drop *page_drop;       /* failed reads' pages to drop; may be NULL */
	atomic_bool readahead_set;             /* set_kernel_readahead has run */
	/* How OPENs arrive (.stats fuse.*): through io_uring, or read from /dev/fuse. */
	_Atomic uint64_t opens_io_uring;
	_Atomic uint64_t opens_dev_fuse;
};

/*
 * libfuse starts its io_uring queues after init() and, when that fails,
 * says so through its log and goes on with /dev/fuse: set by the log hook
 * (libfuse_log), which turns the message into a warning of ours.
 */
static _Atomic bool io_uring_start_failed;

/* How long unmount waits for source reads before it says what it waits for. */
#define SOURCE_POOL_GRACE_MS 2000

static struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static enum virtual_file virtual_of(const struct fs *fs, fuse_ino_t ino)
{
	if (ino > fs->virtual_base && ino < fs->virtual_base + VIRTUAL_COUNT)
		return (enum virtual_file)(ino - fs->virtual_base);
	return 0;
}

static unsigned count_subdirs(const struct dlc_snapshot *snapshot, const struct dlc_node *node)
{
	unsigned subdirs = 0;

	for (uint32_t i = 0; i < node->nchildren; i++)
		if (S_ISDIR(dlc_snapshot_node(snapshot, node->first_child + i)->mode))
			subdirs++;
	return subdirs;
}

/* Fills st for ino; 0 or -ENOENT. */
static int fill_attr(struct fs *fs, fuse_ino_t ino, struct stat *st)
{
	const struct dlc_snapshot *snapshot = fs->context->snapshot;
	const struct dlc_node *node;

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_blksize = 4096;
	if (virtual_of(fs, ino)) {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_uid = fs->owner;
		st->st_gid = fs->owner_group;
		if (virtual_of(fs, ino) != VIRTUAL_STATS) {
			/*
			 * The kernel (default_permissions) lets only these
			 * write .control and read .cached, .scores and .chunks, whose
			 * renderings grow with the dataset: another user of an
			 * allow_other mount cannot fill memory_limit with them.
			 */
			const struct dlc_fs_context *c = fs->context;
			bool control = virtual_of(fs, ino) == VIRTUAL_CONTROL;

			st->st_mode = S_IFREG | (control ? (c->control_gid >= 0 ? 0620 : 0600)
							 : (c->control_gid >= 0 ? 0440 : 0400));
			if (c->control_uid >= 0)
				st->st_uid = (uid_t)c->control_uid;
			if (c->control_gid >= 0)
				st->st_gid = (gid_t)c->control_gid;
		}
		st->st_mtim = fs->started;
		st->st_atim = fs->started;
		st->st_ctim = fs->started;
		return 0;
	}
	node = dlc_snapshot_node(snapshot, ino);
	if (!node)
		return -ENOENT;
	st->st_mode = node->mode & ~(mode_t)0222;
	st->st_uid = node->uid;
	st->st_gid = node->gid;
	st->st_size = (off_t)node->size;
	st->st_blocks = (blkcnt_t)((node->size + 511) / 512);
	st->st_mtim.tv_sec = node->mtime_sec;
	st->st_mtim.tv_nsec = node->mtime_nsec;
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
	st->st_nlink = S_ISDIR(node->mode) ? 2 + count_subdirs(snapshot, node) : 1;
	return 0;
}

static void fill_entry(struct fs *fs, fuse_ino_t ino, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->attr_timeout = FOREVER;
	e->entry_timeout = FOREVER;
	fill_attr(fs, ino, &e->attr);
}

/*
 * FUSE over io_uring (io_uring=1, libfuse >= 3.18).  main.c asked for it
 * with the session option "io_uring" (and its queue depth); libfuse starts
 * one queue per CPU, each with its own thread, right after this init when
 * the kernel offers FUSE_CAP_OVER_IO_URING (fuse.enable_uring=Y, checked
 * before the mount by dlc_options_validate), and falls back to /dev/fuse
 * when it cannot (libfuse_log warns).  Requests through io_uring carry no
 * INTERRUPT in libfuse 3.18 (they are not on the list INTERRUPT searches):
 * no_interrupt makes the kernel stop sending them, rather than libfuse
 * keeping each one forever; a signalled reader waiting for a miss then
 * waits for the miss (at most source_timeout).
 */
static void init_io_uring(struct fs *fs, struct fuse_conn_info *conn)
{
#if DLC_HAVE_IO_URING
	if (!fs->context->io_uring) {
		conn->want &= ~(unsigned)FUSE_CAP_OVER_IO_URING;
		return;
	}
	if (!(conn->capable & FUSE_CAP_OVER_IO_URING)) {
		dlc_log(DLC_LOG_WARNING, "io_uring=1, but the kernel did not offer FUSE over io_uring when the mount began (is /sys/module/fuse/parameters/enable_uring N?); requests come through /dev/fuse");
		return;
	}
	conn->want |= FUSE_CAP_OVER_IO_URING;
	conn->no_interrupt = 1;
#else
	(void)fs;
	(void)conn;
#endif
}

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fs *fs = userdata;

	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	conn->want &= ~(unsigned)FUSE_CAP_READDIRPLUS_AUTO;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA;
	/* Hits are spliced from the cache file's descriptor. */
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	if (conn->capable & FUSE_CAP_SPLICE_MOVE)
		conn->want |= FUSE_CAP_SPLICE_MOVE;
	if (fs->context->max_background)
		conn->max_background = fs->context->max_background;
	/* Hits on checked cache files: READs served by the kernel. */
	dlc_passthrough_init(fs->passthrough, conn, fs->context->passthrough);
	init_io_uring(fs, conn);
}

/* Whether name is one of the virtual files of the mount root. */
static bool virtual_named(const char *name)
{
	for (int v = VIRTUAL_STATS; v < VIRTUAL_COUNT; v++)
		if (strcmp(name, virtual_names[v]) == 0)
			return true;
	return false;
}

/*
 * Sets the kernel's readahead window for the mount (kernel_readahead.h):
 * with the default of 1 MiB, large files are asked for in requests of up
 * to 1 MiB instead of 128 KiB at a time.  The kernel sets the window when it
 * takes the INIT reply, so this waits for the first request after it: a
 * lookup, or the getattr of the root (any access starts with one of them).
 * Never fatal: without it reads stay correct, in smaller requests.
 */
static void set_kernel_readahead(struct fs *fs)
{
	const struct dlc_fs_context *context = fs->context;
	int rc;

	if (atomic_load_explicit(&fs->readahead_set, memory_order_relaxed) ||
	    atomic_exchange(&fs->readahead_set, true) || context->kernel_readahead == 0)
		return;
	rc = dlc_kernel_readahead_set("/proc/self/mountinfo", "/sys/class/bdi", context->mountpoint,
				      context->kernel_readahead);
	if (rc < 0)
		dlc_log(rc == -EACCES || rc == -EROFS || rc == -EPERM ? DLC_LOG_INFO : DLC_LOG_WARNING,
			"the kernel's readahead for %s stays at its default (%s): large files are read 128 KiB at a time; mount as root to raise it, or write kernel_readahead=0 to silence this",
			context->mountpoint, strerror(-rc));
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	struct fuse_entry_param e;
	uint64_t ino = 0;

	set_kernel_readahead(fs);
	for (int v = VIRTUAL_STATS; parent == FUSE_ROOT_ID && v < VIRTUAL_COUNT; v++)
		if (strcmp(name, virtual_names[v]) == 0)
			ino = fs->virtual_base + (fuse_ino_t)v;
	if (!ino && !virtual_of(fs, parent))
		ino = dlc_snapshot_lookup(fs->context->snapshot, parent, name);
	if (ino) {
		fill_entry(fs, ino, &e);
	} else {
		/* A negative entry: the kernel remembers the name is absent. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = FOREVER;
	}
	fuse_reply_entry(req, &e);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int rc = fill_attr(fs_of(req), ino, &st);

	set_kernel_readahead(fs_of(req));
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, FOREVER);
}

static void fs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	const char *target = dlc_snapshot_link_target(fs_of(req)->context->snapshot, ino);

	if (target)
		fuse_reply_readlink(req, target);
	else
		fuse_reply_err(req, EINVAL);
}

static void fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct dlc_node *node = dlc_snapshot_node(fs_of(req)->context->snapshot, ino);

	if (!node || virtual_of(fs_of(req), ino)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (!S_ISDIR(node->mode)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/*
 * Offsets: 1 follows ".", 2 follows "..", 3 + i follows child i.  The
 * listing never changes, so an offset is always valid.
 */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, bool plus)
{
	struct fs *fs = fs_of(req);
	const struct dlc_snapshot *snapshot = fs->context->snapshot;
	const struct dlc_node *dir = dlc_snapshot_node(snapshot, ino);
	char *buf;
	size_t used = 0;

	if (!dir || !S_ISDIR(dir->mode)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (off_t off = offset; off < 2 + (off_t)dir->nchildren; off++) {
		fuse_ino_t child;
		const char *name;
		struct fuse_entry_param e;
		size_t n;

		if (off == 0) {
			child = ino;
			name = ".";
		} else if (off == 1) {
			child = dir->parent;
			name = "..";
		} else {
			child = dir->first_child + (fuse_ino_t)(off - 2);
			name = dlc_snapshot_name(snapshot, child);
			/* The mount's own names win: a dataset file of that name at
			 * the root is hidden (readdirplus would hand the kernel its
			 * inode under the name of .stats or .control). */
			if (ino == FUSE_ROOT_ID && virtual_named(name))
				continue;
		}
		if (plus) {
			fill_entry(fs, child, &e);
			if (off < 2) {
				/* No lookup count for "." and "..": the kernel ignores them. */
				e.ino = 0;
				e.attr.st_ino = child;
			}
			n = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, off + 1);
		} else {
			struct stat st = { .st_ino = child };

			st.st_mode = dlc_snapshot_node(snapshot, child)->mode & S_IFMT;
			n = fuse_add_direntry(req, buf + used, size - used, name, &st, off + 1);
		}
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, offset, false);
}

static void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, offset, true);
}

static void fs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

/* .stats, made (rc 0), is counted in the memory budget until release. */
static int charge_text(struct fs *fs, struct handle *h, int rc)
{
	if (rc == 0)
		dlc_budget_charge(fs->context->budget, h->text_len);
	return rc;
}

/*
 * Whether req comes from the mount's owner (the user who mounted) or root:
 * who may steer the cluster tier through .control (control_uid= and
 * control_gid= users may write the rest).
 */
static bool is_owner(const struct fs *fs, fuse_req_t req)
{
	uid_t uid = fuse_req_ctx(req)->uid;

	return uid == 0 || uid == fs->owner;
}

static int open_virtual(struct fs *fs, enum virtual_file which, struct handle *h)
{
	struct dlc_budget *budget = fs->context->budget;

	switch (which) {
	case VIRTUAL_STATS: {
		struct dlc_fs_gauge_state state = {
			.started = fs->started,
			.passthrough = fs->passthrough,
			.opens_io_uring = atomic_load_explicit(&fs->opens_io_uring, memory_order_relaxed),
			.opens_dev_fuse = atomic_load_explicit(&fs->opens_dev_fuse, memory_order_relaxed),
			.epoch = atomic_load(&fs->epoch),
			.source_pool = fs->source_pool,
		};

		h->kind = HANDLE_TEXT;
		return charge_text(fs, h, dlc_fs_render_stats(fs->context, &state, &h->text,
							       &h->text_len));
	}
	case VIRTUAL_CACHED:
		/* Taken from the budget as they grow: -ENOMEM past its limit. */
		h->kind = HANDLE_TEXT;
		return dlc_cache_list(fs->context->cache, budget, budget ? budget->limit : 0, &h->text,
				      &h->text_len);
	case VIRTUAL_SCORES:
		h->kind = HANDLE_TEXT;
		return dlc_cache_list_scores(fs->context->cache, budget, budget ? budget->limit : 0,
					     &h->text, &h->text_len);
	case VIRTUAL_CHUNKS:
		h->kind = HANDLE_TEXT;
		return dlc_snapshot_render_chunks(fs->context->snapshot, budget, budget ? budget->limit : 0,
						  &h->text, &h->text_len);
	case VIRTUAL_CONTROL:
		h->kind = HANDLE_CONTROL;
		h->parser = dlc_control_parser_new(fs->context->mountpoint);
		if (!h->parser)
			return -ENOMEM;
		pthread_mutex_init(&h->lock, NULL);
		return 0;
	default:
		return -ENOENT;
	}
}

static void free_handle(struct fs *fs, struct handle *h)
{
	dlc_read_close(h->data);
	if (h->parser) {
		dlc_control_parser_free(h->parser);
		pthread_mutex_destroy(&h->lock);
	}
	if (h->text)
		dlc_budget_release(fs->context->budget, h->text_len);
	free(h->text);
	free(h);
}

static void track_handle(struct fs *fs, struct handle *h)
{
	pthread_mutex_lock(&fs->handles_lock);
	h->next = fs->open_handles.next;
	h->prev = &fs->open_handles;
	h->next->prev = h;
	fs->open_handles.next = h;
	pthread_mutex_unlock(&fs->handles_lock);
}

static void untrack_handle(struct fs *fs, struct handle *h)
{
	pthread_mutex_lock(&fs->handles_lock);
	h->prev->next = h->next;
	h->next->prev = h->prev;
	pthread_mutex_unlock(&fs->handles_lock);
}

/* Drops one reference to h; the last one frees it. */
static void handle_put(struct fs *fs, struct handle *h)
{
	if (atomic_fetch_sub(&h->refs, 1) == 1)
		free_handle(fs, h);
}

/* What the glue can take from the read face: passthrough when it is on. */
static unsigned read_caps(const struct fs *fs)
{
	return dlc_passthrough_on(fs->passthrough) ? DLC_READ_CAN_PASSTHROUGH : 0;
}

/*
 * Answers an open of ino with h (taken: freed on failure) or with rc < 0.
 * A dataset file's open gets its mode from passthrough.c: the face's
 * backing file, if it has one, may be passed through to the kernel, and
 * the face is told which (dlc_read_opened); the page cache is kept across
 * opens (keep_cache) only for daemon-served opens.
 */
static void finish_open(fuse_req_t req, struct fs *fs, struct fuse_file_info *fi, fuse_ino_t ino,
			bool virtual, struct handle *h, uint32_t seq, int rc)
{
	if (rc < 0) {
		free_handle(fs, h);
		fuse_reply_err(req, -rc);
		return;
	}
	if (virtual) {
		fi->direct_io = 1;
	} else {
		h->ino = ino;
		h->mode = dlc_passthrough_open(fs->passthrough, req, ino,
					       dlc_read_backing_fd(h->data), seq, fi);
		rc = dlc_read_opened(h->data, h->mode == DLC_OPEN_PASSTHROUGH);
		if (rc < 0) {
			dlc_passthrough_release(fs->passthrough, req, ino, h->mode);
			free_handle(fs, h);
			fuse_reply_err(req, -rc);
			return;
		}
		fi->keep_cache = h->mode == DLC_OPEN_DAEMON;
		fi->noflush = 1;
	}
	fi->fh = (uintptr_t)h;
	track_handle(fs, h);
	if (fuse_reply_open(req, fi) != 0) {
		/* The opener was interrupted, or the connection is gone: nobody
		 * will release this handle. */
		untrack_handle(fs, h);
		dlc_passthrough_release(fs->passthrough, req, ino, h->mode);
		free_handle(fs, h);
	}
}

/*
 * An open or a read that waits on the source, handed to the source pool so
 * that the FUSE threads stay free.  Its reader may leave (pending.h): the
 * work still runs if it had started, for whoever else waits on the same
 * flight, and its answer is dropped.  It is answered within source_timeout
 * of its arrival (deadline.h): its pool thread serves it under that
 * deadline, and one that waited in the queue past it fails at once; one
 * stuck where no deadline reaches (queued behind work that has none, such
 * as a cache insert after an answered miss) is answered EIO by pending.c's
 * reaper shortly after it.
 */
struct source_wait {
	struct dlc_pending pending;
	uint64_t deadline_ns;           /* arrival + source_timeout; 0: none */
	struct fs *fs;
	struct handle *h;               /* one reference (an open: the only one) */
	fuse_ino_t ino;
	bool open;
	struct fuse_file_info fi;       /* an open: what to answer with */
	size_t size;                    /* a read */
	off_t off;
};

/* The deadline of a request arriving now (deadline.h). */
static uint64_t deadline_of(const struct fs *fs)
{
	uint64_t timeout = fs->context->source_timeout_ns;

	return timeout ? dlc_deadline_now() + timeout : 0;
}

/*
 * Answers req, a READ of [off, off + size) of ino, with what dlc_read_at
 * gave (rc DLC_READ_DONE) or -rc.  A failed READ's pages stay in the page
 * cache, not up to date, and would be read back one page per request: the
 * kernel is told to drop them (page_drop.h).
 */
static void reply_read(struct fs *fs, fuse_req_t req, fuse_ino_t ino, off_t off, size_t size, int rc,
		       struct dlc_read_reply *reply)
{
	dlc_stats_add(fs->context->stats, DLC_STAT_DATA_READS, 1);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		dlc_page_drop_note(fs->page_drop, ino, off, size);
	} else if (reply->fd >= 0) {
		struct fuse_bufvec data = FUSE_BUFVEC_INIT(reply->len);

		data.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		data.buf[0].fd = reply->fd;
		data.buf[0].pos = reply->pos;
		fuse_reply_data(req, &data, FUSE_BUF_SPLICE_MOVE);
	} else {
		fuse_reply_buf(req, reply->data, reply->len);
	}
}

static void read_from_source(struct source_wait *w)
{
	struct dlc_read_reply reply;
	int rc = dlc_read_at(w->h->data, w->size, w->off, true, &reply);

	if (dlc_pending_claim(&w->pending))
		reply_read(w->fs, w->pending.req, w->ino, w->off, w->size, rc, &reply);
	if (rc == DLC_READ_DONE)
		dlc_read_reply_done(&reply);
}

static void run_source_wait(void *arg)
{
	struct source_wait *w = arg;
	bool late;
	int rc;

	dlc_deadline_set(w->deadline_ns);
	/* Queued behind source calls until its time was up: no call now. */
	late = dlc_deadline_passed();
	if (!w->open) {
		/* A late read still goes in: bytes already at hand are served,
		 * and blocks.c fails the rest at once, noting the file as one
		 * the source does not answer (for the kernel's retry). */
		if (dlc_pending_wanted(&w->pending))
			read_from_source(w);
		else
			dlc_pending_claim(&w->pending);
		handle_put(w->fs, w->h);
	} else {
		/* A reader that left before its turn costs no fetch. */
		struct dlc_read_later later = { 0 };    /* what waits for the reply */
		/* Read before a cache file is opened: see dlc_passthrough_seq. */
		uint32_t seq = dlc_passthrough_seq(w->fs->passthrough, w->ino);

		rc = !dlc_pending_wanted(&w->pending) ? -EINTR : late ? -ETIMEDOUT
			: dlc_read_open_wait(w->h->data, &later);
		if (rc == -ETIMEDOUT && late)
			dlc_stats_add(w->fs->context->stats, DLC_STAT_REMOTE_ERRORS, 1);
		if (dlc_pending_claim(&w->pending))
			finish_open(w->pending.req, w->fs, &w->fi, w->ino, false, w->h, seq, rc);
		else
			free_handle(w->fs, w->h);
		dlc_deadline_set(0);
		dlc_read_after_answer(&later);
	}
	dlc_deadline_set(0);
	free(w);
}

/*
 * The reaper answered a read of w EIO (pending.h): its file is noted as one
 * whose source read failed for time, so the kernel's re-read of the page
 * fails at once rather than queue behind the same work.  pending is w's
 * first member; w and its handle reference live until w's claim returns.
 */
static void read_expired(struct dlc_pending *pending)
{
	struct source_wait *w = (struct source_wait *)pending;

	dlc_stats_add(w->fs->context->stats, DLC_STAT_DATA_READS, 1);
	dlc_read_note_expired(w->h->data);
	dlc_page_drop_note(w->fs->page_drop, w->ino, w->off, w->size);  /* as reply_read */
}

/* Frees w and its handle (an open's only reference, a read's own). */
static void free_source_wait(struct source_wait *w)
{
	if (w->open)
		free_handle(w->fs, w->h);
	else
		handle_put(w->fs, w->h);
	free(w);
}

/* The pool stopped before w ran: the mount is going away. */
static void drop_source_wait(void *arg)
{
	struct source_wait *w = arg;

	if (dlc_pending_claim(&w->pending))
		fuse_reply_err(w->pending.req, EIO);
	free_source_wait(w);
}

/*
 * Hands w to the source pool, or answers req with the error that prevents
 * it.  A reader interrupted before the watch was answered EINTR by it:
 * nothing to run.
 */
static void wait_for_source(fuse_req_t req, struct source_wait *w)
{
	struct dlc_pool_job job = { run_source_wait, drop_source_wait, w };
	int rc;

	if (!dlc_pending_watch(&w->pending, req, w->fs->context->stats, w->deadline_ns,
			       w->open ? NULL : read_expired)) {
		free_source_wait(w);
		return;
	}
	rc = dlc_pool_submit(w->fs->source_pool, &job);
	if (rc < 0) {
		if (dlc_pending_claim(&w->pending))
			fuse_reply_err(req, rc == -ESHUTDOWN ? EIO : -rc);
		free_source_wait(w);
	}
}

/* Counts an OPEN by the way it came: through io_uring or /dev/fuse. */
static void count_transport(struct fs *fs, fuse_req_t req)
{
#if DLC_HAVE_IO_URING
	if (fuse_req_is_uring(req)) {
		atomic_fetch_add_explicit(&fs->opens_io_uring, 1, memory_order_relaxed);
		return;
	}
#else
	(void)req;
#endif
	atomic_fetch_add_explicit(&fs->opens_dev_fuse, 1, memory_order_relaxed);
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	enum virtual_file which = virtual_of(fs, ino);
	struct source_wait *w;
	bool needs_source = false;
	struct handle *h;
	uint32_t seq;
	int rc;

	count_transport(fs, req);

	if (which != VIRTUAL_CONTROL && ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	atomic_init(&h->refs, 1);
	/* Read before the cache file is opened: see dlc_passthrough_seq. */
	seq = which ? 0 : dlc_passthrough_seq(fs->passthrough, ino);
	if (which) {
		rc = open_virtual(fs, which, h);
	} else {
		h->kind = HANDLE_DATA;
		rc = dlc_read_open(fs->read, ino, read_caps(fs), &h->data);
		needs_source = rc == DLC_READ_MUST_WAIT;
	}
	if (which == VIRTUAL_CONTROL)
		h->opened_by_owner = is_owner(fs, req);
	if (rc < 0 || !needs_source) {
		finish_open(req, fs, fi, ino, which != 0, h, seq, rc);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		finish_open(req, fs, fi, ino, false, h, 0, -ENOMEM);
		return;
	}
	*w = (struct source_wait) { .deadline_ns = deadline_of(fs), .fs = fs, .h = h, .ino = ino,
				    .open = true, .fi = *fi };
	wait_for_source(req, w);
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	char *buf;

	switch (h->kind) {
	case HANDLE_DATA: {
		/* At arrival: the try below counts against the deadline too. */
		uint64_t deadline_ns = deadline_of(fs_of(req));
		struct dlc_read_reply reply;
		struct source_wait *w;
		int rc = dlc_read_at(h->data, size, off, false, &reply);

		/* The reply holds its own reference to its bytes (read.h): once
		 * the kernel has it, another thread may release the handle. */
		if (rc != DLC_READ_MUST_WAIT) {
			reply_read(fs_of(req), req, ino, off, size, rc, &reply);
			if (rc == DLC_READ_DONE)
				dlc_read_reply_done(&reply);
			return;
		}
		/* A read that must wait for the source goes to the source pool. */
		w = malloc(sizeof(*w));
		if (!w) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		atomic_fetch_add(&h->refs, 1);
		*w = (struct source_wait) { .deadline_ns = deadline_ns, .fs = fs_of(req), .h = h,
					    .ino = ino, .size = size, .off = off };
		wait_for_source(req, w);
		return;
	}
	case HANDLE_TEXT: {
		/*
		 * As for a blob, the reply must own its bytes until
		 * fuse_reply_buf returns; a virtual file is read once, so the
		 * slice is copied rather than the text shared.
		 */
		size_t len = (uint64_t)off >= h->text_len ? 0 :
			     h->text_len - (uint64_t)off < size ? (size_t)(h->text_len - (uint64_t)off)
								 : size;

		buf = malloc(len ? len : 1);
		if (!buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		if (len)
			memcpy(buf, h->text + off, len);
		fuse_reply_buf(req, buf, len);
		free(buf);
		return;
	}
	case HANDLE_CONTROL:
		fuse_reply_buf(req, NULL, 0);
		return;
	}
}

/*
 * Feeds size bytes of buf to the handle's parser, or with buf NULL ends its
 * last line (close), applying the commands (control_apply.c); 0 or
 * -EINVAL/-ENOMEM.  The tier is steered only by a writer who is the mount's
 * owner or root and writes through a descriptor such a user opened
 * (owner_writes: the write's own caller is one; a close has none).
 */
static int control_run(struct fs *fs, struct handle *h, const char *buf, size_t size,
		       bool owner_writes)
{
	int rc;

	pthread_mutex_lock(&h->lock);
	rc = dlc_control_apply(fs->context, &fs->epoch, h->parser, buf, size,
			       h->opened_by_owner && owner_writes);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

static int control_finish(struct fs *fs, struct handle *h)
{
	return control_run(fs, h, NULL, 0, true);
}

static void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;

	/*
	 * The last unterminated line is applied at the final release of the
	 * open file, not at a flush: every close of a duplicate (dup, a shell
	 * redirection, a forked DataLoader worker) flushes, and applying the
	 * tail there would cut a line another holder is still writing.
	 * Its errors go to .stats and the log: release has no caller to tell.
	 */
	if (h->kind == HANDLE_CONTROL)
		control_finish(fs_of(req), h);
	dlc_passthrough_release(fs_of(req)->passthrough, req, h->ino, h->mode);
	untrack_handle(fs_of(req), h);
	handle_put(fs_of(req), h);
	fuse_reply_err(req, 0);
}

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	int rc;

	if (h->kind != HANDLE_CONTROL) {
		fuse_reply_err(req, EROFS);
		return;
	}
	rc = control_run(fs_of(req), h, buf, size, is_owner(fs_of(req), req));
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, size);
}

/*
 * close(2) of any descriptor: nothing to do, for .control too (its last
 * unterminated line waits for the final release, see fs_release), so
 * close(2) of .control reports 0; a line's errors are its write(2)'s.
 */
static void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

/*
 * ioctl(2) on any file of the mount: none is a terminal or takes a command,
 * so ENOTTY, as a local file system answers.  The kernel forwards every
 * ioctl to the daemon and does not remember the answer (it would remember
 * ENOSYS no better: fs/fuse/ioctl.c turns it into ENOTTY each time), so
 * each one is a round trip.  Python before 3.14 makes one at every buffered
 * open() (isatty(), for line buffering), which is how torchvision's image
 * loaders open samples; the count shows a job paying for it, and
 * examples/dlcache.py's loaders open unbuffered to skip it.
 */
static void fs_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in_buf,
		     size_t in_bufsz, size_t out_bufsz)
{
	(void)ino;
	(void)cmd;
	(void)arg;
	(void)fi;
	(void)flags;
	(void)in_buf;
	(void)in_bufsz;
	(void)out_bufsz;
	dlc_stats_add(fs_of(req)->context->stats, DLC_STAT_IOCTLS, 1);
	fuse_reply_err(req, ENOTTY);
}

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	const struct dlc_snapshot *snapshot = fs_of(req)->context->snapshot;
	struct statvfs st = {
		.f_bsize = 4096,
		.f_frsize = 4096,
		.f_blocks = (dlc_snapshot_total_bytes(snapshot) + 4095) / 4096,
		.f_files = dlc_snapshot_count(snapshot),
		.f_namemax = 255,
		.f_flag = ST_RDONLY,
	};

	fuse_reply_statfs(req, &st);
}

static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	int allowed = FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW |
		      FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_CTIME;
	struct stat st;

	/* Truncating .control (open with O_TRUNC, "> .control") is a no-op. */
	if (virtual_of(fs, ino) == VIRTUAL_CONTROL && !(to_set & ~allowed)) {
		fill_attr(fs, ino, &st);
		fuse_reply_attr(req, &st, FOREVER);
		return;
	}
	fuse_reply_err(req, EROFS);
}

/* No request runs any more: frees the handles the kernel will never release. */
static void fs_destroy(void *userdata)
{
	struct fs *fs = userdata;

	/* First the source reads, which hold handles. */
	dlc_fs_stop_source_reads(fs->context);
	dlc_page_drop_free(fs->page_drop);
	fs->context->fs = NULL;
	while (fs->open_handles.next != &fs->open_handles) {
		struct handle *h = fs->open_handles.next;

		untrack_handle(fs, h);
		free_handle(fs, h);
	}
	pthread_mutex_destroy(&fs->handles_lock);
	/* The cache outlives the mount; its drops no longer reach the table,
	 * whose kept backing ids are closed. */
	dlc_cache_set_drop_hook(fs->context->cache, NULL, NULL);
	dlc_passthrough_free(fs->passthrough);
	dlc_read_free(fs->read);
	free(fs);
}

static const struct fuse_lowlevel_ops ops = {
	.init = fs_init,
	.destroy = fs_destroy,
	.lookup = fs_lookup,
	.getattr = fs_getattr,
	.readlink = fs_readlink,
	.opendir = fs_opendir,
	.readdir = fs_readdir,
	.readdirplus = fs_readdirplus,
	.releasedir = fs_releasedir,
	.open = fs_open,
	.read = fs_read,
	.release = fs_release,
	.flush = fs_flush,
	.ioctl = fs_ioctl,
	.statfs = fs_statfs,
	.setattr = fs_setattr,
	.write = fs_write,
};

/* Logs, once per mount, each dataset file the virtual files hide. */
static void warn_hidden_names(const struct dlc_snapshot *snapshot)
{
	for (int v = VIRTUAL_STATS; v < VIRTUAL_COUNT; v++)
		if (dlc_snapshot_lookup(snapshot, FUSE_ROOT_ID, virtual_names[v]))
			dlc_log(DLC_LOG_WARNING, "the dataset's own %s at its root is hidden by the mount's %s; rename it on the source to read it",
				virtual_names[v], virtual_names[v]);
}

/*
 * libfuse's log, while io_uring=1: every message goes to stderr as
 * libfuse's own default does, and the one that says the io_uring queues
 * could not start also becomes a warning in dlcache's log (syslog once
 * the mount is in the background), naming what it means.
 */
static void libfuse_log(enum fuse_log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

static void libfuse_log(enum fuse_log_level level, const char *fmt, va_list ap)
{
	char line[256];
	va_list copy;

	(void)level;
	va_copy(copy, ap);
	vsnprintf(line, sizeof(line), fmt, copy);
	va_end(copy);
	if (strstr(line, "failed to start io-uring") &&
	    !atomic_exchange(&io_uring_start_failed, true))
		dlc_log(DLC_LOG_WARNING, "io_uring=1, but libfuse could not start its io_uring queues (%.*s); requests come through /dev/fuse",
			(int)strcspn(line, "\n"), line);
	vfprintf(stderr, fmt, ap);
}

void dlc_fs_stop_source_reads(struct dlc_fs_context *context)
{
	struct fs *fs = context->fs;

	if (!fs || !fs->source_pool)
		return;
	dlc_pool_stop(fs->source_pool, SOURCE_POOL_GRACE_MS);
	fs->source_pool = NULL;
	/* Every source wait was claimed: nothing left for the reaper. */
	dlc_pending_stop_reaper();
}

struct fuse_session *dlc_fs_session_new(struct fuse_args *args, struct dlc_fs_context *context)
{
	struct fuse_lowlevel_ops all;
	struct fuse_session *session;
	struct fs *fs = calloc(1, sizeof(*fs));

	if (!fs)
		return NULL;
	fs->context = context;
	fs->virtual_base = dlc_snapshot_count(context->snapshot);
	fs->owner = getuid();
	fs->owner_group = getgid();
	pthread_mutex_init(&fs->handles_lock, NULL);
	fs->open_handles.next = fs->open_handles.prev = &fs->open_handles;
	clock_gettime(CLOCK_REALTIME, &fs->started);
	fs->source_pool = dlc_pool_create(context->source_threads);
	fs->passthrough = dlc_passthrough_new(context->stats);
	/* Without its thread (out of memory) failed pages are not dropped. */
	fs->page_drop = dlc_page_drop_new(context->stats);
	fs->read = dlc_read_create(context->fetch, context->snapshot, context->budget,
				   context->cache_max_file);
	if (!fs->source_pool || !fs->passthrough || !fs->read)
		goto err;
	warn_hidden_names(context->snapshot);
	if (context->io_uring)
		fuse_set_log_func(libfuse_log);
	all = ops;
	dlc_readonly_ops(&all);
	session = fuse_session_new(args, &all, sizeof(all), fs);
	if (!session)
		goto err;
	dlc_passthrough_set_session(fs->passthrough, session);
	dlc_page_drop_set_session(fs->page_drop, session);
	/* An entry the cache drops closes its kept backing id (passthrough.h). */
	dlc_cache_set_drop_hook(context->cache, dlc_passthrough_dropped, fs->passthrough);
	context->fs = fs;
	return session;

err:
	if (fs->source_pool)
		dlc_pool_stop(fs->source_pool, 0);
	dlc_page_drop_free(fs->page_drop);
	dlc_passthrough_free(fs->passthrough);
	dlc_read_free(fs->read);
	pthread_mutex_destroy(&fs->handles_lock);
	free(fs);
	return NULL;
}
