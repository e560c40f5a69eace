/*
 * backend_deadline.c - a time limit on every open, read and close of a
 * driver that cannot bound its own calls (the directory driver: a hung
 * hard-mounted NFS or Lustre blocks read(2) for as long as the server is
 * gone, and no signal but SIGKILL ends the wait).
 *
 * The wrapper runs each call on a thread of its own pool and waits for it
 * at most timeout_ns, and never past the deadline of the request the
 * calling thread serves (deadline.h: a request that makes several calls,
 * or waited before this one, is answered within source_timeout of its
 * arrival all the same).  When the time is up the caller gets -ETIMEDOUT and
 * leaves; the call is "abandoned": the thread finishes it whenever the
 * kernel lets it, then cleans up what the caller never saw (closes a file
 * that opened late, frees the read's buffer).  Reads land in a buffer owned
 * by the call and are copied out only if the caller is still there, so an
 * abandoned read can never write into memory its caller has reused.  list
 * and stat (the crawl at mount, in the user's foreground command) go to the
 * driver directly.
 *
 * The cost is one thread hand-off per call, and for reads one copy; a
 * source that answers normally never notices the limit.  Read buffers of
 * 1 MiB and more (blocks of large files, larger samples) are kept for the
 * next reads once their call is done (spare_take/spare_give): fresh memory
 * costs a page fault per 4 KiB page on first touch, about 20 us each in a
 * VM, which made a 4 MiB read 20 ms slower than the read itself.
 *
 * Files.  The caller's file is the wrapper's, holding the driver's and a
 * count of references: the caller's, and one per read in progress.  A read
 * abandoned in the kernel keeps the driver's file open (and its memory
 * valid) after the caller closed it; the last reference closes it.
 *
 * INVARIANTS.  A call is shared by its caller and its thread; call->lock
 * guards done, abandoned, result and refs, and whoever drops the last of
 * the two references frees it.  outstanding counts calls not yet finished
 * by their thread: while it is not zero at destroy (threads stuck in the
 * kernel) the pool and the inner driver are left allocated, because those
 * threads will still use them; the process is about to exit.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlcache/backend.h"
#include "dlcache/deadline.h"
#include "dlcache/log.h"
#include "dlcache/pool.h"

/* Most calls running at once; calls beyond it queue (and time out there). */
#define DEADLINE_THREADS 256
/* Read buffers kept for reuse: at most this many and SPARE_BYTES in all
 * (16 blocks of 4 MiB: as many as a large file's readahead has in flight),
 * each of at least SPARE_MIN bytes (smaller ones come from malloc's heaps,
 * reused anyway). */
#define SPARE_BUFFERS 16
#define SPARE_BYTES (64u << 20)
#define SPARE_MIN (1u << 20)

struct spare {
	void *buf;
	size_t cap;
};

struct deadline_backend {
	const struct dlc_backend_ops *inner_ops;
	void *inner;
	uint64_t timeout_ns;
	struct dlc_pool *pool;
	_Atomic unsigned outstanding;
	_Atomic uint64_t timeouts;
	pthread_mutex_t spare_lock;
	struct spare spares[SPARE_BUFFERS];     /* spare_lock: nspares of them */
	unsigned nspares;
	size_t spare_bytes;                     /* spare_lock: their caps */
};

/* The caller's handle: the driver's file and who still uses it. */
struct dlc_backend_file {
	void *inner;                    /* the driver's struct dlc_backend_file */
	_Atomic unsigned refs;
};

enum call_kind { CALL_OPEN, CALL_PREAD, CALL_CLOSE };

struct call {
	pthread_mutex_t lock;
	pthread_cond_t finished;
	unsigned refs;                  /* guarded by lock: caller and thread */
	bool done;                      /* guarded by lock */
	bool abandoned;                 /* guarded by lock: the caller left */
	enum call_kind kind;
	struct deadline_backend *db;
	char *path;                     /* CALL_OPEN */
	void *inner;                    /* CALL_OPEN's result; CALL_CLOSE's input */
	struct dlc_backend_file *file;  /* CALL_PREAD's input (one reference) */
	void *buf;                      /* CALL_PREAD: the call's own buffer */
	size_t cap;                     /* its size */
	size_t len;
	uint64_t off;
	ssize_t result;
};

/* A buffer of at least len bytes (*cap: its size), kept or new; NULL on ENOMEM. */
static void *spare_take(struct deadline_backend *db, size_t len, size_t *cap)
{
	void *buf = NULL;
	unsigned best = SPARE_BUFFERS;

	if (len >= SPARE_MIN) {
		pthread_mutex_lock(&db->spare_lock);
		for (unsigned i = 0; i < db->nspares; i++)
			if (db->spares[i].cap >= len && (best == SPARE_BUFFERS ||
							 db->spares[i].cap < db->spares[best].cap))
				best = i;
		if (best < SPARE_BUFFERS) {
			buf = db->spares[best].buf;
			*cap = db->spares[best].cap;
			db->spare_bytes -= *cap;
			db->spares[best] = db->spares[--db->nspares];
		}
		pthread_mutex_unlock(&db->spare_lock);
		if (buf)
			return buf;
	}
	*cap = len ? len : 1;
	return malloc(*cap);
}

/* Keeps buf (cap bytes, no call writing it any more) for the next reads, or frees it. */
static void spare_give(struct deadline_backend *db, void *buf, size_t cap)
{
	if (cap >= SPARE_MIN) {
		pthread_mutex_lock(&db->spare_lock);
		if (db->nspares < SPARE_BUFFERS && db->spare_bytes + cap <= SPARE_BYTES) {
			db->spares[db->nspares++] = (struct spare) { buf, cap };
			db->spare_bytes += cap;
			buf = NULL;
		}
		pthread_mutex_unlock(&db->spare_lock);
	}
	free(buf);
}

static void call_put(struct call *call)
{
	bool last;

	pthread_mutex_lock(&call->lock);
	last = --call->refs == 0;
	pthread_mutex_unlock(&call->lock);
	if (!last)
		return;
	pthread_cond_destroy(&call->finished);
	pthread_mutex_destroy(&call->lock);
	free(call->path);
	free(call->buf);
	free(call);
}

/* Drops one reference to file; the last one closes the driver's file. */
static void file_put(struct deadline_backend *db, struct dlc_backend_file *file)
{
	if (atomic_fetch_sub(&file->refs, 1) != 1)
		return;
	db->inner_ops->close(db->inner, file->inner);
	free(file);
}

static void run_call(void *arg)
{
	struct call *call = arg;
	struct deadline_backend *db = call->db;
	bool abandoned;

	pthread_mutex_lock(&call->lock);
	abandoned = call->abandoned;
	pthread_mutex_unlock(&call->lock);
	/* A read or open whose caller already left is not worth making. */
	if (abandoned && call->kind != CALL_CLOSE) {
		call->result = -ETIMEDOUT;
	} else {
		switch (call->kind) {
		case CALL_OPEN: {
			struct dlc_backend_file *inner = NULL;

			call->result = db->inner_ops->open(db->inner, call->path, &inner);
			call->inner = inner;
			break;
		}
		case CALL_PREAD:
			call->result = db->inner_ops->pread(db->inner, call->file->inner, call->buf,
							    call->len, call->off);
			break;
		case CALL_CLOSE:
			call->result = db->inner_ops->close(db->inner, call->inner);
			break;
		}
	}
	pthread_mutex_lock(&call->lock);
	call->done = true;
	abandoned = call->abandoned;
	pthread_cond_signal(&call->finished);
	pthread_mutex_unlock(&call->lock);
	if (abandoned && call->kind == CALL_OPEN && call->result == 0)
		db->inner_ops->close(db->inner, call->inner);   /* opened too late */
	if (call->kind == CALL_PREAD)
		file_put(db, call->file);
	atomic_fetch_sub(&db->outstanding, 1);
	call_put(call);
}

/* The pool is stopping (never while the backend is in use): run it here. */
static void drop_call(void *arg)
{
	run_call(arg);
}

static struct call *call_new(struct deadline_backend *db, enum call_kind kind)
{
	struct call *call = calloc(1, sizeof(*call));
	pthread_condattr_t attr;

	if (!call)
		return NULL;
	pthread_mutex_init(&call->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&call->finished, &attr);
	pthread_condattr_destroy(&attr);
	call->refs = 2;
	call->kind = kind;
	call->db = db;
	return call;
}

/*
 * Runs call on the pool and waits for it until timeout_ns from now or the
 * calling thread's request deadline (deadline.h), whichever comes first (a
 * call submitted past that deadline is abandoned at once: its thread skips
 * an open or a read, and still makes a close); returns its
 * result, or -ETIMEDOUT after abandoning it (or the pool's -errno when it
 * could not be queued: then the thread's reference is dropped here).
 * *finished tells whether the call's fields hold its outcome; the caller
 * reads them, then drops its own reference.
 */
static ssize_t call_wait(struct call *call, bool *finished)
{
	struct deadline_backend *db = call->db;
	struct dlc_pool_job job = { run_call, drop_call, call };
	struct timespec deadline;
	ssize_t result;
	int rc;

	atomic_fetch_add(&db->outstanding, 1);
	rc = dlc_pool_submit(db->pool, &job);
	if (rc < 0) {
		atomic_fetch_sub(&db->outstanding, 1);
		if (call->kind == CALL_PREAD)
			file_put(db, call->file);
		call->refs = 1;
		*finished = false;
		return rc;
	}
	/* Within the request's deadline too (deadline.h): a request making
	 * several calls, or queued before this one, is answered in time. */
	deadline = dlc_deadline_timespec(dlc_deadline_within(db->timeout_ns));
	pthread_mutex_lock(&call->lock);
	while (!call->done) {
		if (pthread_cond_timedwait(&call->finished, &call->lock, &deadline) == ETIMEDOUT &&
		    !call->done) {
			call->abandoned = true;
			break;
		}
	}
	*finished = call->done;
	result = call->done ? call->result : -ETIMEDOUT;
	pthread_mutex_unlock(&call->lock);
	/* A close left to its thread (the request's time is up) fails nothing. */
	if (!*finished && call->kind != CALL_CLOSE) {
		atomic_fetch_add(&db->timeouts, 1);
		dlc_log(DLC_LOG_WARNING, "the source did not answer within %.0f s; the read fails with a timeout (source_timeout=)",
			(double)db->timeout_ns / 1e9);
	}
	return result;
}

static int deadline_list(void *priv, const char *dir, dlc_backend_list_cb cb, void *arg)
{
	struct deadline_backend *db = priv;

	return db->inner_ops->list(db->inner, dir, cb, arg);
}

static int deadline_stat(void *priv, const char *path, struct dlc_backend_attr *out)
{
	struct deadline_backend *db = priv;

	return db->inner_ops->stat(db->inner, path, out);
}

static int deadline_open(void *priv, const char *path, struct dlc_backend_file **out)
{
	struct call *call = call_new(priv, CALL_OPEN);
	struct dlc_backend_file *file = malloc(sizeof(*file));
	bool finished;
	ssize_t rc;

	*out = NULL;
	if (call)
		call->path = strdup(path);
	if (!call || !call->path || !file) {
		if (call) {
			call->refs = 1;
			call_put(call);
		}
		free(file);
		return -ENOMEM;
	}
	rc = call_wait(call, &finished);
	if (finished && rc == 0) {
		file->inner = call->inner;
		atomic_init(&file->refs, 1);
		*out = file;
	} else {
		free(file);
	}
	call_put(call);
	return (int)rc;
}

static ssize_t deadline_pread(void *priv, struct dlc_backend_file *file, void *buf, size_t len,
			      uint64_t off)
{
	struct call *call = call_new(priv, CALL_PREAD);
	bool finished;
	ssize_t n;

	if (!call)
		return -ENOMEM;
	call->buf = spare_take(priv, len, &call->cap);
	if (!call->buf) {
		call->refs = 1;
		call_put(call);
		return -ENOMEM;
	}
	atomic_fetch_add(&file->refs, 1);
	call->file = file;
	call->len = len;
	call->off = off;
	n = call_wait(call, &finished);
	if (finished) {
		/* Done: the thread no longer writes the buffer (an abandoned
		 * call's is freed by whoever puts the call last). */
		if (n > 0)
			memcpy(buf, call->buf, (size_t)n);
		spare_give(priv, call->buf, call->cap);
		call->buf = NULL;
	}
	call_put(call);
	return n;
}

static int deadline_close(void *priv, struct dlc_backend_file *file)
{
	struct call *call;
	bool finished;
	ssize_t rc;

	if (!file)
		return 0;
	if (atomic_fetch_sub(&file->refs, 1) != 1)
		return 0;       /* an abandoned read still uses it: it closes it */
	call = call_new(priv, CALL_CLOSE);
	if (!call) {
		atomic_store(&file->refs, 1);
		file_put(priv, file);
		return 0;
	}
	call->inner = file->inner;
	free(file);
	rc = call_wait(call, &finished);
	call_put(call);
	return (int)rc;
}

static void deadline_destroy(void *priv)
{
	struct deadline_backend *db = priv;
	unsigned stuck;

	if (!db)
		return;
	/* Calls abandoned a moment ago may still end: give them a little time. */
	for (int i = 0; i < 100 && atomic_load(&db->outstanding); i++)
		nanosleep(&(struct timespec){ .tv_nsec = 50000000 }, NULL);
	stuck = atomic_load(&db->outstanding);
	if (stuck) {
		/* Their threads still use the pool and the driver: leave them. */
		dlc_log(DLC_LOG_WARNING, "%u calls to the source never returned; leaving them behind", stuck);
		return;
	}
	dlc_pool_stop(db->pool, 0);
	db->inner_ops->destroy(db->inner);
	while (db->nspares > 0)
		free(db->spares[--db->nspares].buf);
	pthread_mutex_destroy(&db->spare_lock);
	free(db);
}

static const struct dlc_backend_ops deadline_ops = {
	.name = "posix",
	.list = deadline_list,
	.stat = deadline_stat,
	.open = deadline_open,
	.pread = deadline_pread,
	.close = deadline_close,
	.destroy = deadline_destroy,
};

int dlc_backend_deadline_wrap(struct dlc_backend *backend, uint64_t timeout_ns)
{
	struct deadline_backend *db = calloc(1, sizeof(*db));

	if (!db)
		return -ENOMEM;
	db->pool = dlc_pool_create(DEADLINE_THREADS);
	if (!db->pool) {
		free(db);
		return -ENOMEM;
	}
	db->inner_ops = backend->ops;
	db->inner = backend->priv;
	db->timeout_ns = timeout_ns;
	atomic_init(&db->outstanding, 0);
	atomic_init(&db->timeouts, 0);
	pthread_mutex_init(&db->spare_lock, NULL);
	backend->ops = &deadline_ops;
	backend->priv = db;
	return 0;
}
