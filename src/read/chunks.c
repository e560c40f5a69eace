/*
 * chunks.c - reads the files of a packed source out of its tar chunks (see
 * chunks.h for the contract).
 *
 * Handles.  chunks[c].file is opened by the first reader of chunk c: it
 * marks the chunk opening under open_lock and opens it without the lock,
 * so a source open that hangs (up to source_timeout) holds up only the
 * readers of that chunk, who wait on `opened` for its outcome (one open
 * per chunk however many readers arrive together), never the readers of
 * chunks already open.  A reader takes a use of the handle for its pread
 * (users), so a handle is never closed under a read.  Open handles are kept
 * in an LRU list, and at most max_open of them stay open: opening one more
 * detaches the least recently used idle ones first, and closes them after
 * unlocking (a packed ImageNet has thousands of chunks, and the process has
 * far fewer descriptors).  Handles in use are never closed, so the count
 * may pass max_open by the readers in flight.  An open that fails is not
 * remembered past the readers that waited for it (they fail with it): the
 * next read tries again, so a source that comes back heals.  An open that
 * fails for lack of descriptors (EMFILE, ENFILE) closes every idle handle
 * and tries once more; if it fails again, that read fails with EIO and says
 * so, but the chunk is not reported as damaged.
 *
 * Checks.  A file is one pread of exactly its size at its offset: a short
 * read means the chunk ends before the file (truncated or replaced), and
 * the bytes must hash to the xxh3 the snapshot recorded.  Either failure is
 * -EIO for that file only; the first failure of a chunk is logged (reported
 * is set once), every one is counted as a remote error.
 *
 * Whole-chunk passes.  With whole chunks on, members[] lists the regular
 * files of each chunk in offset order.  The first miss on chunk c starts its
 * pass (pass NONE -> RUNNING): the chunk is read front to back in windows of
 * WINDOW bytes (larger when one member is larger), a window's unfinished
 * member carried to the front of the next.  A reader missing a member of a
 * chunk whose pass runs registers as a waiter; the pass copies that
 * member's checked bytes into the waiter's buffer, and the waiter offers
 * them to the cache on its own thread, so the cache writes of a chunk run on
 * as many threads as there are readers.  Members nobody waits for go to the
 * callback on the pass's thread; the member of the miss that started the
 * pass is copied to its caller, like a waiter's.  passed_to says how far the
 * pass has gone; a waiter whose member the pass went past without filling
 * (a damaged member, or a second inode at the same bytes) looks in the cache
 * and reads its file alone.  At most MAX_PASSES passes run at once, so
 * memory stays bounded; a miss finding them all busy reads its file alone
 * and leaves the chunk for a later pass.  A pass's window is taken from the
 * budget without waiting: the miss that starts it holds its own file's
 * bytes, and a thread holding memory never waits for more (budget.h).  With
 * no room, the miss reads its file alone and leaves the chunk for a later
 * pass too.
 *
 * Held bytes.  A member that admission refuses would be lost once its pass
 * has gone by, yet a chunk-wise reader comes for the members of a chunk
 * soon after reading it whole.  So fetch_source.c hands refused members back here
 * (dlc_chunks_hold): copies of them wait in a FIFO ring of at most
 * HOLD_BYTES and HOLD_SLOTS entries, oldest dropped first, until a reader
 * takes them (once).  held_at[ino] names the ring slot of ino's copy; a slot
 * reused by another inode no longer matches, so stale marks need no
 * clearing.
 *
 * INVARIANTS.  hold_lock guards the ring, held_at and held_bytes (taken
 * alone, never with lock or open_lock).  lock guards every chunk's pass, passed_to and waiting list,
 * each waiter's filled flag, and running; passed_to only grows while its
 * pass runs; a chunk's pass goes NONE -> RUNNING -> DONE once per mount
 * (RUNNING -> NONE when its window found no room in the budget).  A
 * waiter's buffer is written only by the pass that found it in the list,
 * before it sets filled, and the waiter leaves the list before it returns.
 * No lock is held while reading the source, copying bytes or calling the
 * callback.  open_lock guards every chunk's file, users, LRU links,
 * opening, opens and open_rc, and open_count.  A chunk is opening from the
 * moment a reader takes on its open until it sets file (or open_rc) and
 * broadcasts `opened`; while it is, file is NULL, the chunk is not in the
 * LRU list and counts in open_count (so concurrent opens of other chunks
 * stay within max_open), and no other reader opens it.  No source call
 * (open or close) is made with open_lock held: handles to close are first
 * detached (out of the list and the count).  Lock order: open_lock is never
 * taken with lock held, nor the other way round.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "dlcache/chunks.h"
#include "dlcache/hash.h"
#include "dlcache/log.h"

#define WINDOW (16u << 20)
#define MAX_PASSES 4
#define HOLD_BYTES (256ULL << 20)
#define HOLD_SLOTS (1u << 16)         /* a power of two */

enum pass_state {
	PASS_NONE = 0,
	PASS_RUNNING,
	PASS_DONE,
};

/* A reader waiting for a member of a chunk being read whole. */
struct waiter {
	uint32_t ino;
	void *buf;
	bool filled;                    /* guarded by dlc_chunks.lock */
	bool taken;                     /* guarded by lock: a pass is copying into buf */
	struct waiter *next;
};

struct chunk {
	struct dlc_backend_file *file;               /* guarded by open_lock; NULL: closed */
	unsigned users;                              /* guarded by open_lock: preads under way */
	uint32_t lru_prev, lru_next;                 /* guarded by open_lock: chunk + 1, 0 = none */
	bool opening;                                /* guarded by open_lock: a reader opens it */
	unsigned opens;                              /* guarded by open_lock: opens ended */
	int open_rc;                                 /* guarded by open_lock: the last one's */
	atomic_bool reported;                        /* its first failure was logged */
	uint32_t first_member;                       /* whole chunks: members[first..] */
	uint32_t nmembers;
	/* Guarded by dlc_chunks.lock: */
	enum pass_state pass;
	uint64_t passed_to;
	struct waiter *waiting;
};

struct dlc_chunks {
	struct dlc_backend *backend;
	const struct dlc_snapshot *snapshot;
	struct dlc_stats *stats;
	struct dlc_budget *budget;      /* pass windows and held bytes; set before serving */
	uint64_t max_file;
	bool whole;
	struct chunk *chunks;
	uint32_t count;
	uint32_t *members;              /* whole chunks: regular files by chunk, by offset */
	pthread_mutex_t open_lock;
	pthread_cond_t opened;          /* a chunk's open ended (with open_lock) */
	uint32_t lru_head, lru_tail;    /* guarded by open_lock: open handles, newest first */
	unsigned open_count;            /* guarded by open_lock: open and opening */
	unsigned max_open;              /* handles kept open at most (idle ones closed) */
	pthread_mutex_t lock;
	pthread_cond_t passed;          /* a pass moved on or ended */
	unsigned running;               /* guarded by lock: passes running */
	/* Held bytes (whole chunks only), guarded by hold_lock: */
	pthread_mutex_t hold_lock;
	struct held *held;              /* the ring, HOLD_SLOTS entries */
	uint32_t *held_at;              /* per inode: its slot + 1, 0 = none */
	uint64_t held_head, held_tail;  /* ring positions: [tail, head) */
	uint64_t held_bytes;
	_Atomic uint64_t held_count;    /* entries with bytes: lets take skip the lock */
};

/* A refused member's bytes, waiting for a reader. */
struct held {
	uint32_t ino;
	uint64_t size;
	void *data;                     /* NULL once taken or dropped */
};

/* An inode and its offset, to sort a chunk's members. */
struct placed {
	uint64_t offset;
	uint32_t ino;
};

static int compare_placed(const void *a, const void *b)
{
	const struct placed *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Lists the regular files of each chunk in offset order (members, first_member). */
static int list_members(struct dlc_chunks *chunks)
{
	uint32_t count = dlc_snapshot_count(chunks->snapshot), files = 0;
	struct placed *placed;
	uint32_t *next;

	for (uint32_t ino = 1; ino <= count; ino++) {
		struct dlc_snapshot_member member;

		if (dlc_snapshot_chunk(chunks->snapshot, ino, &member) == 0) {
			chunks->chunks[member.chunk].nmembers++;
			files++;
		}
	}
	placed = malloc(((size_t)files + 1) * sizeof(*placed));
	next = calloc((size_t)chunks->count + 1, sizeof(*next));
	chunks->members = malloc(((size_t)files + 1) * sizeof(*chunks->members));
	if (!placed || !next || !chunks->members) {
		free(placed);
		free(next);
		return -ENOMEM;
	}
	for (uint32_t c = 0, first = 0; c < chunks->count; c++) {
		chunks->chunks[c].first_member = first;
		next[c] = first;
		first += chunks->chunks[c].nmembers;
	}
	for (uint32_t ino = 1; ino <= count; ino++) {
		struct dlc_snapshot_member member;

		if (dlc_snapshot_chunk(chunks->snapshot, ino, &member) == 0)
			placed[next[member.chunk]++] = (struct placed){ member.offset, ino };
	}
	for (uint32_t c = 0; c < chunks->count; c++)
		qsort(placed + chunks->chunks[c].first_member, chunks->chunks[c].nmembers,
		      sizeof(*placed), compare_placed);
	for (uint32_t i = 0; i < files; i++)
		chunks->members[i] = placed[i].ino;
	free(placed);
	free(next);
	return 0;
}

/*
 * Chunk handles kept open: a quarter of the descriptors the process may
 * have (the rest serve the cache files, the kernel's FUSE requests and the
 * source's connections), at least 8 and at most 4096.
 */
static unsigned max_open_handles(void)
{
	struct rlimit limit;
	rlim_t n = 1024;

	if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
		n = limit.rlim_cur;
	n /= 4;
	return n < 8 ? 8 : n > 4096 ? 4096 : (unsigned)n;
}

int dlc_chunks_create(struct dlc_backend *backend, const struct dlc_snapshot *snapshot,
		      struct dlc_stats *stats, bool whole_chunks, uint64_t max_file,
		      struct dlc_chunks **out)
{
	struct dlc_chunks *chunks;

	*out = NULL;
	if (!dlc_snapshot_packed(snapshot))
		return -EINVAL;
	chunks = calloc(1, sizeof(*chunks));
	if (!chunks)
		return -ENOMEM;
	chunks->backend = backend;
	chunks->snapshot = snapshot;
	chunks->stats = stats;
	chunks->whole = whole_chunks;
	chunks->max_file = max_file;
	chunks->count = dlc_snapshot_chunk_count(snapshot);
	chunks->max_open = max_open_handles();
	chunks->chunks = calloc((size_t)chunks->count + 1, sizeof(*chunks->chunks));
	if (whole_chunks) {
		chunks->held = calloc(HOLD_SLOTS, sizeof(*chunks->held));
		chunks->held_at = calloc((size_t)dlc_snapshot_count(snapshot) + 1,
					 sizeof(*chunks->held_at));
	}
	if (!chunks->chunks || (whole_chunks && (!chunks->held || !chunks->held_at ||
						 list_members(chunks) < 0))) {
		free(chunks->members);
		free(chunks->held);
		free(chunks->held_at);
		free(chunks->chunks);
		free(chunks);
		return -ENOMEM;
	}
	pthread_mutex_init(&chunks->hold_lock, NULL);
	pthread_mutex_init(&chunks->open_lock, NULL);
	pthread_cond_init(&chunks->opened, NULL);
	pthread_mutex_init(&chunks->lock, NULL);
	pthread_cond_init(&chunks->passed, NULL);
	*out = chunks;
	return 0;
}

void dlc_chunks_set_budget(struct dlc_chunks *chunks, struct dlc_budget *budget)
{
	if (chunks)
		chunks->budget = budget;
}

void dlc_chunks_free(struct dlc_chunks *chunks)
{
	if (!chunks)
		return;
	for (uint32_t c = 0; c < chunks->count; c++) {
		struct dlc_backend_file *file = chunks->chunks[c].file;

		if (file)
			dlc_backend_close(chunks->backend, file);
	}
	for (uint64_t i = chunks->held_tail; chunks->held && i < chunks->held_head; i++) {
		struct held *entry = &chunks->held[i % HOLD_SLOTS];

		if (entry->data)
			dlc_budget_release(chunks->budget, entry->size);
		free(entry->data);
	}
	pthread_cond_destroy(&chunks->passed);
	pthread_mutex_destroy(&chunks->lock);
	pthread_cond_destroy(&chunks->opened);
	pthread_mutex_destroy(&chunks->open_lock);
	pthread_mutex_destroy(&chunks->hold_lock);
	free(chunks->held);
	free(chunks->held_at);
	free(chunks->members);
	free(chunks->chunks);
	free(chunks);
}

/*
 * Counts a failure of chunk c for file ino (0: the chunk itself) and logs
 * the first of the chunk, with the fix; returns -EIO.
 */
static int chunk_failed(struct dlc_chunks *chunks, uint32_t c, uint32_t ino, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int chunk_failed(struct dlc_chunks *chunks, uint32_t c, uint32_t ino, const char *fmt, ...)
{
	char path[DLC_SNAPSHOT_PATH_MAX] = "", what[256];
	va_list ap;

	dlc_stats_add(chunks->stats, DLC_STAT_REMOTE_ERRORS, 1);
	if (atomic_exchange(&chunks->chunks[c].reported, true))
		return -EIO;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (ino)
		dlc_snapshot_path(chunks->snapshot, ino, path, sizeof(path));
	dlc_log(DLC_LOG_WARNING, "chunk %s %s%s%s; its other files are still served, the "
		"affected ones fail with EIO (logged once per chunk); pack the dataset again or "
		"re-index it with dlcache snapshot --tar",
		dlc_snapshot_chunk_path(chunks->snapshot, c), what, ino ? ": " : "", path);
	dlc_stats_set_error(chunks->stats, "a chunk of the packed source is damaged or cannot be read");
	return -EIO;
}

/* LRU list of open handles; called with open_lock held. */
static void lru_unlink(struct dlc_chunks *chunks, uint32_t c)
{
	struct chunk *chunk = &chunks->chunks[c];

	if (chunk->lru_prev)
		chunks->chunks[chunk->lru_prev - 1].lru_next = chunk->lru_next;
	else
		chunks->lru_head = chunk->lru_next;
	if (chunk->lru_next)
		chunks->chunks[chunk->lru_next - 1].lru_prev = chunk->lru_prev;
	else
		chunks->lru_tail = chunk->lru_prev;
	chunk->lru_prev = chunk->lru_next = 0;
}

static void lru_push_front(struct dlc_chunks *chunks, uint32_t c)
{
	struct chunk *chunk = &chunks->chunks[c];

	chunk->lru_prev = 0;
	chunk->lru_next = chunks->lru_head;
	if (chunks->lru_head)
		chunks->chunks[chunks->lru_head - 1].lru_prev = c + 1;
	else
		chunks->lru_tail = c + 1;
	chunks->lru_head = c + 1;
}

/*
 * Detaches idle handles, least recently used first, until at most keep are
 * open (or none idle is left), into out (n of them, at most max), for the
 * caller to close after it unlocks.  Called with open_lock held.
 */
static void detach_idle(struct dlc_chunks *chunks, unsigned keep,
					     struct dlc_backend_file **out, size_t *n, size_t max)
{
	uint32_t at = chunks->lru_tail;

	*n = 0;
	while (at && chunks->open_count > keep && *n < max) {
		uint32_t c = at - 1;
		struct chunk *chunk = &chunks->chunks[c];

		at = chunk->lru_prev;
		if (chunk->users)
			continue;
		lru_unlink(chunks, c);
		out[(*n)++] = chunk->file;
		chunk->file = NULL;
		chunks->open_count--;
	}
}

#define CLOSE_BATCH 64

static void close_detached(struct dlc_chunks *chunks, struct dlc_backend_file **files, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dlc_backend_close(chunks->backend, files[i]);
}

/*
 * Opens chunk c on the source without open_lock (the caller marked it
 * opening), after closing the handles detached for room; out of
 * descriptors, closes every idle handle and tries once more.
 */
static int chunk_open(struct dlc_chunks *chunks, uint32_t c, struct dlc_backend_file **closing,
		      size_t nclosing, struct dlc_backend_file **file)
{
	const char *path = dlc_snapshot_chunk_path(chunks->snapshot, c);
	int rc;

	close_detached(chunks, closing, nclosing);
	rc = dlc_backend_open(chunks->backend, path, file);
	if (rc == -EMFILE || rc == -ENFILE) {
		pthread_mutex_lock(&chunks->open_lock);
		detach_idle(chunks, 0, closing, &nclosing, CLOSE_BATCH);
		pthread_mutex_unlock(&chunks->open_lock);
		close_detached(chunks, closing, nclosing);
		rc = dlc_backend_open(chunks->backend, path, file);
	}
	return rc;
}

/*
 * Takes a use of chunk c's handle, opening it (and closing idle ones beyond
 * max_open) as needed, or waiting for the reader that opens it; release it
 * with chunk_put.  NULL after logging.
 */
static struct dlc_backend_file *chunk_get(struct dlc_chunks *chunks, uint32_t c)
{
	struct dlc_backend_file *closing[CLOSE_BATCH], *file = NULL;
	struct chunk *chunk = &chunks->chunks[c];
	size_t nclosing = 0;
	int rc = 0;

	pthread_mutex_lock(&chunks->open_lock);
	while (chunk->opening) {
		unsigned opens = chunk->opens;

		while (chunk->opening)
			pthread_cond_wait(&chunks->opened, &chunks->open_lock);
		/* The open waited for failed: so does this read (the next tries again). */
		if (!chunk->file && chunk->opens != opens && chunk->open_rc < 0) {
			rc = chunk->open_rc;
			pthread_mutex_unlock(&chunks->open_lock);
			goto failed;
		}
	}
	file = chunk->file;
	if (file) {
		lru_unlink(chunks, c);
		lru_push_front(chunks, c);
		chunk->users++;
		pthread_mutex_unlock(&chunks->open_lock);
		return file;
	}
	chunk->opening = true;
	if (chunks->open_count >= chunks->max_open)
		detach_idle(chunks, chunks->max_open - 1, closing, &nclosing, CLOSE_BATCH);
	chunks->open_count++;
	pthread_mutex_unlock(&chunks->open_lock);

	rc = chunk_open(chunks, c, closing, nclosing, &file);

	pthread_mutex_lock(&chunks->open_lock);
	chunk->opening = false;
	chunk->opens++;
	chunk->open_rc = rc;
	if (rc == 0) {
		chunk->file = file;
		chunk->users = 1;
		lru_push_front(chunks, c);
	} else {
		chunks->open_count--;
	}
	pthread_cond_broadcast(&chunks->opened);
	pthread_mutex_unlock(&chunks->open_lock);
	if (rc == 0)
		return file;
failed:
	if (rc == -EMFILE || rc == -ENFILE) {
		/* Not the chunk's fault: not reported as damaged. */
		dlc_stats_add(chunks->stats, DLC_STAT_REMOTE_ERRORS, 1);
		dlc_log(DLC_LOG_WARNING, "cannot open chunk %s: out of descriptors (%s); raise ulimit -n",
			dlc_snapshot_chunk_path(chunks->snapshot, c), strerror(-rc));
		return NULL;
	}
	chunk_failed(chunks, c, 0, "cannot be opened on the source (%s)", strerror(-rc));
	return NULL;
}

static void chunk_put(struct dlc_chunks *chunks, uint32_t c)
{
	pthread_mutex_lock(&chunks->open_lock);
	assert(chunks->chunks[c].users > 0);
	chunks->chunks[c].users--;
	pthread_mutex_unlock(&chunks->open_lock);
}

/* Reads len bytes of chunk c at off into buf; the count, or -EIO after logging. */
static ssize_t chunk_pread(struct dlc_chunks *chunks, uint32_t c, void *buf, size_t len,
			   uint64_t off)
{
	struct dlc_backend_file *file = chunk_get(chunks, c);
	ssize_t n;

	if (!file)
		return -EIO;
	n = dlc_backend_pread(chunks->backend, file, buf, len, off);
	chunk_put(chunks, c);
	if (n < 0)
		return chunk_failed(chunks, c, 0, "cannot be read (%s)", strerror((int)-n));
	dlc_stats_add(chunks->stats, DLC_STAT_BYTES_FROM_REMOTE, (uint64_t)n);
	return n;
}

unsigned dlc_chunks_open_handles(struct dlc_chunks *chunks)
{
	unsigned n;

	pthread_mutex_lock(&chunks->open_lock);
	n = chunks->open_count;
	pthread_mutex_unlock(&chunks->open_lock);
	return n;
}

int dlc_chunks_read_file(struct dlc_chunks *chunks, uint32_t ino, void *buf, uint64_t size)
{
	struct dlc_snapshot_member member;
	ssize_t n = 0;

	if (dlc_snapshot_chunk(chunks->snapshot, ino, &member) < 0)
		return -ENOENT;
	if (size > 0) {
		n = chunk_pread(chunks, member.chunk, buf, size, member.offset);
		if (n < 0)
			return (int)n;
	}
	if ((uint64_t)n < size)
		return chunk_failed(chunks, member.chunk, ino, "ends before the file (it was "
				    "truncated or replaced since it was packed)");
	if (dlc_xxh3(buf, size) != member.hash)
		return chunk_failed(chunks, member.chunk, ino, "does not hold the bytes packed for "
				    "the file (it was damaged or replaced)");
	return 0;
}

ssize_t dlc_chunks_read_range(struct dlc_chunks *chunks, uint32_t ino, void *buf, size_t len,
			      uint64_t off)
{
	const struct dlc_node *node = dlc_snapshot_node(chunks->snapshot, ino);
	struct dlc_snapshot_member member;
	ssize_t n;

	if (dlc_snapshot_chunk(chunks->snapshot, ino, &member) < 0)
		return -ENOENT;
	if (off >= node->size)
		return 0;
	if (len > node->size - off)
		len = (size_t)(node->size - off);
	n = chunk_pread(chunks, member.chunk, buf, len, member.offset + off);
	if (n >= 0 && (size_t)n < len)
		return chunk_failed(chunks, member.chunk, ino, "ends before the file (it was "
				    "truncated or replaced since it was packed)");
	return n;
}

/* ------------------------------------------------------------------------
 * Whole-chunk passes.
 */

static void pass_progress(struct dlc_chunks *chunks, struct chunk *chunk, uint64_t passed_to)
{
	pthread_mutex_lock(&chunks->lock);
	chunk->passed_to = passed_to;
	if (chunk->waiting)
		pthread_cond_broadcast(&chunks->passed);
	pthread_mutex_unlock(&chunks->lock);
}

/* The waiter for member ino, marked taken, or NULL; the copy is the caller's. */
static struct waiter *take_waiter(struct dlc_chunks *chunks, struct chunk *chunk, uint32_t ino)
{
	struct waiter *found = NULL;

	pthread_mutex_lock(&chunks->lock);
	for (struct waiter *w = chunk->waiting; w && !found; w = w->next)
		if (w->ino == ino && !w->filled && !w->taken)
			found = w;
	if (found)
		found->taken = true;
	pthread_mutex_unlock(&chunks->lock);
	return found;
}

static void fill_waiter(struct dlc_chunks *chunks, struct waiter *waiter)
{
	pthread_mutex_lock(&chunks->lock);
	waiter->filled = true;
	pthread_cond_broadcast(&chunks->passed);
	pthread_mutex_unlock(&chunks->lock);
}

/*
 * The pass over chunk c: 0 when buf got ino's bytes, -EIO when they were bad,
 * DLC_CHUNKS_NOT_IN_PASS when the pass stopped before ino (the chunk could not be read), or
 * did not start: *no_room when the budget had no room for its window.
 */
static int run_pass(struct dlc_chunks *chunks, uint32_t c, uint32_t ino, void *buf,
		    dlc_chunks_member_cb cb, void *arg, bool *no_room)
{
	struct chunk *chunk = &chunks->chunks[c];
	const uint32_t *members = chunks->members + chunk->first_member;
	uint64_t cap = WINDOW, end = 0, start = 0, have = 0;
	unsigned char *window;
	int result = DLC_CHUNKS_NOT_IN_PASS;

	/* The window holds the largest member, and the pass stops after the last. */
	for (uint32_t i = 0; i < chunk->nmembers; i++) {
		struct dlc_snapshot_member member;
		uint64_t size = dlc_snapshot_node(chunks->snapshot, members[i])->size;

		if (size > chunks->max_file)
			continue;
		dlc_snapshot_chunk(chunks->snapshot, members[i], &member);
		if (size > cap)
			cap = size;
		if (member.offset + size > end)
			end = member.offset + size;
	}
	/* Work memory, given back below; never waited for (see the file's top). */
	*no_room = chunks->budget && !dlc_budget_try_acquire(chunks->budget, cap + 1, chunks->budget->limit);
	if (*no_room)
		return DLC_CHUNKS_NOT_IN_PASS;
	window = malloc(cap + 1);
	if (!window) {
		dlc_budget_release(chunks->budget, cap + 1);
		return DLC_CHUNKS_NOT_IN_PASS;
	}
	dlc_stats_add(chunks->stats, DLC_STAT_CHUNK_READS, 1);
	for (uint32_t i = 0; i < chunk->nmembers; i++) {
		uint32_t m = members[i];
		uint64_t size = dlc_snapshot_node(chunks->snapshot, m)->size;
		struct dlc_snapshot_member member;
		const unsigned char *data;

		if (size > chunks->max_file)
			continue;
		dlc_snapshot_chunk(chunks->snapshot, m, &member);
		if (size > 0 && member.offset + size > start + have) {
			ssize_t n;

			/* Carry the part of this member already read to the front. */
			if (member.offset < start + have) {
				memmove(window, window + (member.offset - start),
					(size_t)(start + have - member.offset));
				have = start + have - member.offset;
			} else {
				have = 0;
			}
			start = member.offset;
			n = chunk_pread(chunks, c, window + have,
					(size_t)(cap - have < end - (start + have) ?
						 cap - have : end - (start + have)),
					start + have);
			if (n < 0)
				break;
			have += (uint64_t)n;
			if (member.offset + size > start + have) {
				chunk_failed(chunks, c, m, "ends before the file (it was truncated or "
					     "replaced since it was packed)");
				if (m == ino)
					result = -EIO;
				break;
			}
		}
		data = size > 0 ? window + (member.offset - start) : window;
		if (dlc_xxh3(data, size) != member.hash) {
			chunk_failed(chunks, c, m, "does not hold the bytes packed for the file (it "
				     "was damaged or replaced)");
			if (m == ino)
				result = -EIO;
		} else if (m == ino) {
			memcpy(buf, data, size);
			result = 0;
		} else {
			struct waiter *waiter = take_waiter(chunks, chunk, m);

			if (waiter) {
				memcpy(waiter->buf, data, size);
				fill_waiter(chunks, waiter);
			} else {
				cb(arg, m, data, size);
			}
		}
		pass_progress(chunks, chunk, member.offset + size);
	}
	free(window);
	dlc_budget_release(chunks->budget, cap + 1);
	return result;
}

int dlc_chunks_read_whole(struct dlc_chunks *chunks, uint32_t ino, void *buf, uint64_t size,
			  dlc_chunks_member_cb cb, void *arg)
{
	struct dlc_snapshot_member member;
	struct chunk *chunk;
	bool no_room;
	int rc;

	if (!chunks->whole || dlc_snapshot_chunk(chunks->snapshot, ino, &member) < 0)
		return DLC_CHUNKS_NOT_IN_PASS;
	chunk = &chunks->chunks[member.chunk];
	pthread_mutex_lock(&chunks->lock);
	if (chunk->pass == PASS_NONE && chunks->running < MAX_PASSES) {
		chunk->pass = PASS_RUNNING;
		chunks->running++;
		pthread_mutex_unlock(&chunks->lock);
		rc = run_pass(chunks, member.chunk, ino, buf, cb, arg, &no_room);

		pthread_mutex_lock(&chunks->lock);
		chunk->pass = no_room ? PASS_NONE : PASS_DONE;
		chunks->running--;
		pthread_cond_broadcast(&chunks->passed);
		pthread_mutex_unlock(&chunks->lock);
		return rc;
	}
	if (chunk->pass == PASS_RUNNING && chunk->passed_to < member.offset + size) {
		struct waiter waiter = { .ino = ino, .buf = buf, .next = chunk->waiting };

		chunk->waiting = &waiter;
		/* A taken waiter is being copied into: wait for filled, whatever else. */
		while (!waiter.filled && (waiter.taken || (chunk->pass == PASS_RUNNING &&
							   chunk->passed_to < member.offset + size)))
			pthread_cond_wait(&chunks->passed, &chunks->lock);
		for (struct waiter **p = &chunk->waiting; *p; p = &(*p)->next) {
			if (*p == &waiter) {
				*p = waiter.next;
				break;
			}
		}
		if (waiter.filled) {
			pthread_mutex_unlock(&chunks->lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&chunks->lock);
	return DLC_CHUNKS_NOT_IN_PASS;
}

/* ------------------------------------------------------------------------
 * Held bytes.
 */

/* Frees the bytes of the entry in slot, if any.  hold_lock held. */
static void drop_held(struct dlc_chunks *chunks, struct held *entry)
{
	if (!entry->data)
		return;
	free(entry->data);
	dlc_budget_release(chunks->budget, entry->size);
	entry->data = NULL;
	chunks->held_bytes -= entry->size;
	atomic_fetch_sub_explicit(&chunks->held_count, 1, memory_order_relaxed);
}

/* The entry holding ino's bytes, or NULL.  hold_lock held. */
static struct held *find_held(struct dlc_chunks *chunks, uint32_t ino)
{
	uint32_t at = chunks->held_at[ino];
	struct held *entry;

	if (!at)
		return NULL;
	entry = &chunks->held[at - 1];
	return entry->data && entry->ino == ino ? entry : NULL;
}

void dlc_chunks_hold(struct dlc_chunks *chunks, uint32_t ino, const void *data, uint64_t size)
{
	struct held *entry;
	void *copy;

	if (!chunks->held || size > HOLD_BYTES || ino > dlc_snapshot_count(chunks->snapshot))
		return;
	/* Held bytes are a convenience: a quarter of the budget at most, never a wait. */
	if (chunks->budget && !dlc_budget_try_acquire(chunks->budget, size, chunks->budget->limit / 4))
		return;
	copy = malloc(size ? size : 1);
	if (!copy) {
		dlc_budget_release(chunks->budget, size);
		return;
	}
	memcpy(copy, data, size);
	pthread_mutex_lock(&chunks->hold_lock);
	entry = find_held(chunks, ino);
	if (entry)
		drop_held(chunks, entry);
	while (chunks->held_tail < chunks->held_head &&
	       (chunks->held_bytes + size > HOLD_BYTES ||
		chunks->held_head - chunks->held_tail == HOLD_SLOTS))
		drop_held(chunks, &chunks->held[chunks->held_tail++ % HOLD_SLOTS]);
	entry = &chunks->held[chunks->held_head % HOLD_SLOTS];
	*entry = (struct held){ .ino = ino, .size = size, .data = copy };
	chunks->held_at[ino] = (uint32_t)(chunks->held_head % HOLD_SLOTS) + 1;
	chunks->held_head++;
	chunks->held_bytes += size;
	atomic_fetch_add_explicit(&chunks->held_count, 1, memory_order_relaxed);
	pthread_mutex_unlock(&chunks->hold_lock);
}

const uint64_t *dlc_chunks_recorded_hash(const struct dlc_chunks *chunks, uint32_t ino,
					 uint64_t *hash)
{
	struct dlc_snapshot_member member;

	if (!chunks || dlc_snapshot_chunk(chunks->snapshot, ino, &member) < 0)
		return NULL;
	*hash = member.hash;
	return hash;
}

bool dlc_chunks_take_held(struct dlc_chunks *chunks, uint32_t ino, void *buf, uint64_t size)
{
	struct held *entry;
	void *data = NULL;

	if (!chunks->held || !atomic_load_explicit(&chunks->held_count, memory_order_relaxed) ||
	    ino > dlc_snapshot_count(chunks->snapshot))
		return false;
	pthread_mutex_lock(&chunks->hold_lock);
	entry = find_held(chunks, ino);
	if (entry && entry->size == size) {
		data = entry->data;
		entry->data = NULL;
		chunks->held_bytes -= size;
		atomic_fetch_sub_explicit(&chunks->held_count, 1, memory_order_relaxed);
		chunks->held_at[ino] = 0;
	}
	pthread_mutex_unlock(&chunks->hold_lock);
	if (!data)
		return false;
	memcpy(buf, data, size);
	free(data);
	dlc_budget_release(chunks->budget, size);
	return true;
}
