/*
 * fetch.c - one remote fetch per missing sample, however many readers.
 *
 * A reader first asks the cache.  On a miss it looks for a flight (a fetch
 * in progress) for the same inode: if there is one it waits for it and
 * shares its bytes; if not, it starts one, reads the whole file from the
 * source without holding any lock, and lands the flight.  A reader answered
 * first (dlc_fetch_get_answer_first) has its bytes before they are offered
 * to the cache: the flight lands "settling", still listed, until
 * dlc_fetch_offer_later has offered them; otherwise the bytes are offered
 * before the flight lands.  Either way a reader arriving while the bytes
 * are being written to the cache joins the flight instead of starting a
 * second fetch.
 * A reader that joined waits until its request's deadline at most
 * (deadline.h); the owner's source calls end by its own.
 *
 * Prefetch.  "prefetch PATH" lines announce the order in which the job will
 * read: each announced file gets the next sequence number and joins a FIFO
 * plan.  Workers take files from the plan and fly them like misses (a reader
 * arriving meanwhile joins the flight), then keep the bytes in memory,
 * "staged", until the reader opens the file; they enter the cache as they
 * land while it has free room, else when they are read (see fly).  Several
 * readers (DataLoader workers) share one announced order: an open takes the
 * file's staged bytes wherever the others are, and marks its announcement
 * read; the readers' position is the furthest announced file opened.  An
 * inode's announcement is its latest line: a file announced more than once
 * (sampling with replacement) is prefetched for its last line, and its first
 * read moves the position there (see DESIGN.md: the files in between are
 * then skipped as passed; keying by the earliest unread line instead was
 * tried and froze the position whenever readers ran ahead of the workers).
 * Plan entries a whole window behind the position are skipped;
 * staged files that far behind are dropped only once they have waited
 * STAGED_GRACE_NS for a slower reader, so each announced file is fetched
 * once however many readers take turns.  A prefetch is staged in the
 * critical section where its flight lands, so a reader finds it either in
 * flight or staged, never in between.  Staged plus in-flight prefetches
 * never exceed the window (prefetch_window files, PREFETCH_WINDOW_BYTES
 * bytes), so the prefetcher stays a bounded distance ahead, and what it
 * holds for the reader is in memory, where no eviction can take it.  The
 * cache plans with the same order: each announced file is told to it
 * (dlc_cache_announce), each open of a reader moves it on
 * (dlc_cache_consume), and a prefetch is offered to it as said above.
 * An announced file larger than max_file (a shard) is told to the cache
 * too, but streamed by blocks.c in its own announced order
 * (dlc_blocks_announce), not through the plan and workers here.
 *
 * Announced hits are read ahead (warm_list.h; DESIGN.md says why): a plan
 * entry the cache holds goes on the warm list, and a worker advises the
 * kernel to read its cache file once the reader is within the window of
 * it.  The list has WARM_WINDOWS windows of slots, one kept for each plan
 * entry a worker is looking at; while it is full the workers take nothing
 * from the plan, so they stay within nine windows of the reader (the
 * window of staged misses bounds the misses), and at most a window of hits
 * is read ahead at once.  An entry the reader opened or passed is dropped.
 *
 * Packed sources.  When the snapshot is packed, a miss reads the file's byte
 * range out of its tar chunk through chunks.c (one source open per chunk for
 * the mount's life, every file checked against its recorded xxh3, as is a
 * member's value from the cluster tier) instead of opening the file; with chunk_fetch, the first miss on a chunk reads the
 * whole chunk and offers every member to the cache through the normal
 * admission (members it refuses are held in memory a while by chunks.c, for
 * a chunk-wise reader), and a reader missing a member of a chunk being read
 * is handed its bytes by that read.
 *
 * One read interface.  Whole files of a tree, members of packed chunks and
 * blocks of large files are read through one table per mount (struct
 * source_ops, "The source" below), so the flights, the tier, prefetch and
 * the budget above it are the same for a tree and a packed source.  Files
 * larger than max_file, packed or not, are read by blocks.c, which takes
 * its bytes from the same table (the "block" kind).
 *
 * INVARIANTS.  fetch->lock guards the flight list, every flight's fields,
 * the plan, the staged files, the reader's position and the stopping flag.
 * Plan entry i (from plan_head) has sequence number plan_head_seq + i.
 * A flight is referenced by its owner and by each waiter (refs); the last
 * one to drop it frees it.  At most one flight per inode is in the list.
 * A listed flight is unlanded, or a reader's miss settling (landed with its
 * bytes, before its cache insert; the list holds a reference until
 * dlc_fetch_offer_later unlists it).
 * Verify builds check these at every release of fetch->lock (verify.h:
 * unlock, wait_on; dlc_fetch_verify_locked, fetch_verify.c, says what).
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dlcache/blocks.h"
#include "dlcache/chunks.h"
#include "dlcache/deadline.h"
#include "dlcache/fetch.h"
#include "dlcache/log.h"
#include "dlcache/store.h"
#include "dlcache/tier.h"
#include "dlcache/verify.h"
#include "fetch_private.h"
#include "warm_list.h"

/*
 * A staged file passed by the furthest reader is kept this long for a
 * slower one (DataLoader workers drift apart by a few files); only then is
 * it taken for passed for good.
 */
#define STAGED_GRACE_NS 2000000000ULL

#define PREFETCH_WINDOW_BYTES (256ULL << 20)
#define PLAN_MAX (64u << 20)

/* Slots of the warm list, in windows (at most 2^20, 12 MiB): the workers go
 * on taking plan entries, and fetching its misses, past the hits it holds. */
#define WARM_WINDOWS 8u
/* A reader wakes a worker once window / WARM_BATCH_PART entries are due. */
#define WARM_BATCH_PART 8u
#define WARM_MAX (1u << 20)

static const struct source_ops tree_source, packed_source;


static void unlock(struct dlc_fetch *fetch);
static void wait_on(struct dlc_fetch *fetch, pthread_cond_t *cond);

/* Largest single read from the source. */
#define READ_CHUNK (8u << 20)

/*
 * A blob of size bytes, with room for one more (see read_source), drawn
 * from the fetcher's budget: waits for room, until the request's deadline
 * at most (deadline.h; NULL then), the thread's work charge (budget.h)
 * until it puts the blob or keeps it (keep_blob).
 */
static struct dlc_blob *blob_new(struct dlc_fetch *fetch, uint64_t size)
{
	struct dlc_blob *blob;

	if (dlc_budget_acquire_by(fetch->budget, size, dlc_deadline_get()) < 0)
		return NULL;
	blob = dlc_blob_alloc(size);
	if (!blob) {
		dlc_budget_release(fetch->budget, size);
		return NULL;
	}
	blob->budget = fetch->budget;
	return blob;
}

/* blob_new's blob now belongs to a flight, staged or open file. */
static struct dlc_blob *keep_blob(struct dlc_blob *blob)
{
	if (blob)
		dlc_budget_keep(blob->budget, blob->size);
	return blob;
}

struct dlc_fetch *dlc_fetch_create(struct dlc_backend *backend, const struct dlc_snapshot *snapshot,
				   struct dlc_cache *cache, struct dlc_stats *stats, uint64_t max_file)
{
	return dlc_fetch_create_packed(backend, snapshot, cache, stats, max_file, false);
}

struct dlc_fetch *dlc_fetch_create_packed(struct dlc_backend *backend,
					  const struct dlc_snapshot *snapshot,
					  struct dlc_cache *cache, struct dlc_stats *stats,
					  uint64_t max_file, bool chunk_fetch)
{
	struct dlc_fetch *fetch = calloc(1, sizeof(*fetch));

	if (!fetch)
		return NULL;
	if (dlc_snapshot_packed(snapshot) &&
	    dlc_chunks_create(backend, snapshot, stats, chunk_fetch, max_file, &fetch->chunks) < 0) {
		free(fetch);
		return NULL;
	}
	fetch->source = fetch->chunks ? &packed_source : &tree_source;
	fetch->max_file = max_file;
	fetch->window = 1;
	pthread_cond_init(&fetch->queued, NULL);
	fetch->backend = backend;
	fetch->snapshot = snapshot;
	fetch->cache = cache;
	fetch->stats = stats;
	pthread_mutex_init(&fetch->lock, NULL);
	dlc_deadline_cond_init(&fetch->landed);
	return fetch;
}

void dlc_fetch_set_tier(struct dlc_fetch *fetch, struct dlc_tier *tier)
{
	fetch->tier = tier;
}

void dlc_fetch_set_budget(struct dlc_fetch *fetch, struct dlc_budget *budget)
{
	fetch->budget = budget;
	dlc_chunks_set_budget(fetch->chunks, budget);  /* a no-op for a tree */
}

/* Room for a prefetch of size bytes: the budget stays under half full. */
static bool prefetch_room(struct dlc_fetch *fetch, uint64_t size)
{
	return !fetch->budget || dlc_budget_has_room(fetch->budget, size, fetch->budget->limit / 2);
}

void dlc_fetch_free(struct dlc_fetch *fetch)
{
	if (!fetch)
		return;
	dlc_fetch_stop(fetch);
	assert(fetch->flights == NULL);
	free(fetch->plan);
	free(fetch->announced);
	free(fetch->staged);
	dlc_warm_list_free(&fetch->warm);
	dlc_chunks_free(fetch->chunks);
	dlc_blocks_free(fetch->blocks);
	pthread_cond_destroy(&fetch->queued);
	pthread_cond_destroy(&fetch->landed);
	pthread_mutex_destroy(&fetch->lock);
	free(fetch);
}

static void flight_put(struct dlc_fetch *fetch, struct flight *flight)
{
	if (--flight->refs == 0) {
		dlc_blob_put(flight->blob);
		free(flight);
	}
}

/* ------------------------------------------------------------------------
 * The source: one read interface, three kinds.
 *
 *   whole file   a tree's small file, opened by path and read whole
 *                (tree_read_whole);
 *   member       a packed snapshot's small file, its checked byte range of
 *                a chunk, or the whole chunk with chunk_fetch, members held
 *                in memory (packed_read_whole, packed_take_held);
 *   block        a range of a file larger than max_file, for blocks.c: the
 *                tree's file opened once per reader (tree_block_*), or the
 *                member's range of its chunk through chunks.c's shared
 *                handle (packed_block_read).
 *
 * A mount's source is one of two tables, chosen once in dlc_fetch_create:
 * nothing else in this file asks whether the snapshot is packed.  Each
 * kind counts the bytes it takes from the remote, and logs and counts its
 * failures (bytes_from_remote, remote_errors).
 */

/*
 * Reads the whole of path (blob->size bytes per the snapshot) from the
 * source.  Reads ask for one byte more than is still missing (the blob has
 * room for it), and drivers return short reads only at end of file, so a
 * small sample costs one read that also proves its size.  A file that shrank
 * or grew since the snapshot gives -ESTALE.
 */
static int read_path(struct dlc_fetch *fetch, const char *path, struct dlc_blob *blob)
{
	struct dlc_backend_file *file;
	uint64_t done = 0;
	int rc;

	rc = dlc_backend_open(fetch->backend, path, &file);
	if (rc < 0)
		return rc;
	for (;;) {
		uint64_t left = blob->size + 1 - done;
		size_t want = left > READ_CHUNK ? READ_CHUNK : (size_t)left;
		ssize_t n = dlc_backend_pread(fetch->backend, file, blob->data + done, want, done);

		if (n < 0) {
			rc = (int)n;
			break;
		}
		done += (uint64_t)n;
		if (done > blob->size) {
			rc = -ESTALE;
			break;
		}
		if ((size_t)n < want) {
			rc = done == blob->size ? 0 : -ESTALE;
			break;
		}
	}
	dlc_backend_close(fetch->backend, file);
	return rc;
}

/* Kind "whole file": a tree's small file. */
static int tree_read_whole(struct dlc_fetch *fetch, uint32_t ino, struct dlc_blob *blob,
			   bool *offered)
{
	char path[DLC_SNAPSHOT_PATH_MAX];
	int rc;

	*offered = false;
	rc = dlc_snapshot_path(fetch->snapshot, ino, path, sizeof(path));
	if (rc == 0)
		rc = read_path(fetch, path, blob);
	if (rc == 0) {
		dlc_stats_add(fetch->stats, DLC_STAT_BYTES_FROM_REMOTE, blob->size);
		return 0;
	}
	if (rc == -ENOMEM)
		return rc;
	dlc_stats_add(fetch->stats, DLC_STAT_REMOTE_ERRORS, 1);
	if (rc == -ESTALE) {
		dlc_log(DLC_LOG_WARNING, "%s changed size on the source since the snapshot; remount with -o refresh", path);
		dlc_stats_set_error(fetch->stats, "a file changed size on the source since the snapshot");
	} else {
		dlc_log(DLC_LOG_WARNING, "cannot read %s from the source: %s", path, strerror(-rc));
		dlc_stats_set_error(fetch->stats, "a read from the source failed");
	}
	return -EIO;
}

/* Kind "block", a tree's large file: opened by path once per reader. */
static int tree_block_open(void *ctx, uint32_t ino, void **handle)
{
	struct dlc_fetch *fetch = ctx;
	struct dlc_backend_file *file = NULL;
	char path[DLC_SNAPSHOT_PATH_MAX];
	int rc;

	rc = dlc_snapshot_path(fetch->snapshot, ino, path, sizeof(path));
	if (rc == 0)
		rc = dlc_backend_open(fetch->backend, path, &file);
	if (rc < 0) {
		dlc_stats_add(fetch->stats, DLC_STAT_REMOTE_ERRORS, 1);
		dlc_log(DLC_LOG_WARNING, "cannot open %s on the source: %s", path, strerror(-rc));
		dlc_stats_set_error(fetch->stats, "a read from the source failed");
		return rc == -ETIMEDOUT ? -ETIMEDOUT : -EIO;     /* blocks.c tells them apart */
	}
	*handle = file;
	return 0;
}

static ssize_t tree_block_read(void *ctx, uint32_t ino, void *handle, void *buf, size_t len,
			       uint64_t off)
{
	struct dlc_fetch *fetch = ctx;
	ssize_t n = dlc_backend_pread(fetch->backend, handle, buf, len, off);

	(void)ino;
	if (n < 0) {
		dlc_stats_add(fetch->stats, DLC_STAT_REMOTE_ERRORS, 1);
		dlc_log(DLC_LOG_WARNING, "read from the source failed: %s", strerror((int)-n));
		dlc_stats_set_error(fetch->stats, "a read from the source failed");
		return n == -ETIMEDOUT ? -ETIMEDOUT : -EIO;     /* blocks.c tells them apart */
	}
	dlc_stats_add(fetch->stats, DLC_STAT_BYTES_FROM_REMOTE, (uint64_t)n);
	return n;
}

static void tree_block_close(void *ctx, void *handle)
{
	struct dlc_fetch *fetch = ctx;

	dlc_backend_close(fetch->backend, handle);
}

/* A member of a chunk read whole, offered to the cache like a miss. */
static void offer_member(void *arg, uint32_t ino, const void *data, uint64_t size)
{
	struct dlc_fetch *fetch = arg;

	if (dlc_cache_contains(fetch->cache, ino))
		return;
	if (dlc_cache_offer(fetch->cache, ino, data, size))
		dlc_stats_add(fetch->stats, DLC_STAT_CHUNK_ADMISSIONS, 1);
	else
		dlc_chunks_hold(fetch->chunks, ino, data, size);
}

/*
 * Kind "member": packed file ino into blob; *offered when the bytes came
 * from the cache (another thread's whole-chunk read put them there).  0 or
 * -EIO (chunks.c logged and counted it).
 */
static int packed_read_whole(struct dlc_fetch *fetch, uint32_t ino, struct dlc_blob *blob,
			     bool *offered)
{
	int rc;

	*offered = false;
	rc = dlc_chunks_read_whole(fetch->chunks, ino, blob->data, blob->size, offer_member, fetch);
	if (rc != DLC_CHUNKS_NOT_IN_PASS)
		return rc;
	/* Another thread's whole read may have cached or held it meanwhile. */
	if (dlc_cache_read(fetch->cache, ino, blob->data, blob->size) == 0 ||
	    dlc_chunks_take_held(fetch->chunks, ino, blob->data, blob->size)) {
		*offered = true;
		return 0;
	}
	return dlc_chunks_read_file(fetch->chunks, ino, blob->data, blob->size);
}

static bool packed_take_held(struct dlc_fetch *fetch, uint32_t ino, void *buf, uint64_t size)
{
	return dlc_chunks_take_held(fetch->chunks, ino, buf, size);
}

/*
 * Kind "block", a packed member larger than max_file: its range of the
 * chunk, through the chunk's shared handle (no handle of the reader's own).
 * Not checked against the member's xxh3, which covers the whole member: a
 * block is checked by its own xxh3 once cached, like a tree's.
 */
static int packed_block_open(void *ctx, uint32_t ino, void **handle)
{
	(void)ctx;
	(void)ino;
	*handle = NULL;
	return 0;
}

static ssize_t packed_block_read(void *ctx, uint32_t ino, void *handle, void *buf, size_t len,
				 uint64_t off)
{
	struct dlc_fetch *fetch = ctx;
	ssize_t n = dlc_chunks_read_range(fetch->chunks, ino, buf, len, off);

	(void)handle;
	return n < 0 ? -EIO : n;
}

static const struct source_ops tree_source = {
	.read_whole = tree_read_whole,
	.take_held = NULL,
	.block = { tree_block_open, tree_block_read, tree_block_close, NULL },
};

static const struct source_ops packed_source = {
	.read_whole = packed_read_whole,
	.take_held = packed_take_held,
	.block = { packed_block_open, packed_block_read, NULL, NULL },
};

/*
 * Whether announced position seq is behind the furthest reader by a whole
 * window: a plan entry that far behind is not fetched any more.  Lock held.
 */
static bool passed(const struct dlc_fetch *fetch, uint64_t seq)
{
	return seq + fetch->window <= fetch->reader_seq;
}

#ifndef NDEBUG
/*
 * Test hook (debug builds): DLCACHE_TEST_HOLD_INSERT=MS holds a reader's
 * miss MS milliseconds before its bytes are offered to the cache, so that
 * a test can tell whether its open waits for the insert.
 */
static long insert_hold_ms;
static pthread_once_t insert_hold_once = PTHREAD_ONCE_INIT;

static void read_insert_hold(void)
{
	const char *value = getenv("DLCACHE_TEST_HOLD_INSERT");

	insert_hold_ms = value ? strtol(value, NULL, 10) : 0;
}

static void hold_insert_for_test(void)
{
	pthread_once(&insert_hold_once, read_insert_hold);
	if (insert_hold_ms > 0)
		nanosleep(&(struct timespec) { insert_hold_ms / 1000, insert_hold_ms % 1000 * 1000000 },
			  NULL);
}
#else
static void hold_insert_for_test(void)
{
}
#endif

/* Offers a landing flight's bytes (see fly); whether the offer was made. */
static bool offer_landing(struct dlc_fetch *fetch, const struct flight *flight,
			  const void *data, uint64_t size)
{
	if (flight->ahead)
		return dlc_cache_offer_if_room(fetch->cache, flight->ino, data, size);
	hold_insert_for_test();
	dlc_cache_offer(fetch->cache, flight->ino, data, size);
	return true;
}

static uint64_t monotonic_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

/*
 * Fetches ino from the source as the owner of flight, then lands it.  A
 * miss's bytes are offered to the cache before it lands, unless settle (its
 * reader is answered first, dlc_fetch_get_answer_first): then the flight
 * lands "settling", listed still with a reference of the list's, so that a
 * reader arriving during the insert joins it and has the bytes at once, and
 * dlc_fetch_offer_later offers them and unlists it (settled).  A prefetch's
 * are offered too while the cache has free room (dlc_cache_offer_if_room:
 * the cache fills in the background); otherwise when they are read
 * (dlc_fetch_get takes them staged, or a reader joined the flight), so that
 * admission decides at the read, as for a miss: decided a window of reads
 * earlier, it evicted for files on a cache that changed by their read (2-4%
 * more source opens in tests/bench/announce.sh).
 */
static int fly(struct dlc_fetch *fetch, struct flight *flight, uint64_t size, bool settle)
{
	struct dlc_blob *blob = blob_new(fetch, size);
	bool offered = false;           /* to the cache, by the source (a chunk read) or here */
	bool staged = false, stopping, tier_due = false;
	uint64_t hash;
	int rc;

	settle = settle && !flight->ahead;
	if (!blob) {
		rc = -ENOMEM;
		goto land;
	}
	/* The cluster tier, between the local cache and the source: never
	 * fatal; a packed member's bytes must match its recorded xxh3. */
	if (fetch->tier &&
	    dlc_tier_get(fetch->tier, flight->ino, blob->data, size,
			 dlc_chunks_recorded_hash(fetch->chunks, flight->ino, &hash)) == 0) {
		if (!settle)
			offered = offer_landing(fetch, flight, blob->data, size);
		rc = 0;
		goto land;
	}
	rc = fetch->source->read_whole(fetch, flight->ino, blob, &offered);
	settle = settle && rc == 0 && !offered;
	tier_due = settle && fetch->tier;
	if (rc == 0 && !offered && !settle)
		offered = offer_landing(fetch, flight, blob->data, size);
	if (rc == 0 && fetch->tier && !tier_due)
		dlc_tier_offer(fetch->tier, flight->ino, blob->data, size,
			       dlc_cache_score(fetch->cache, flight->ino));
land:
	settle = settle && rc == 0;
	pthread_mutex_lock(&fetch->lock);
	for (struct flight **p = &fetch->flights; *p && !settle; p = &(*p)->next) {
		if (*p == flight) {
			*p = flight->next;
			break;
		}
	}
	if (settle) {
		flight->settling = true;
		flight->tier_due = tier_due;
		flight->refs++;         /* the list's, until settled */
	}
	flight->landed = true;
	flight->rc = rc;
	if (rc == 0)
		flight->blob = keep_blob(blob);
	else
		dlc_blob_put(blob);
	/*
	 * A prefetch is staged as it lands, in the same critical section, so
	 * that no reader can find it neither in flight nor staged and fetch it
	 * again; not if a reader opened the file meanwhile (and joined).
	 */
	if (rc == 0 && flight->stage_seq && !fetch->stopping &&
	    fetch->announced[flight->ino] == flight->stage_seq) {
		fetch->staged[fetch->nstaged++] = (struct staged) {
			flight->ino, flight->stage_seq, dlc_blob_get(blob), monotonic_ns(), offered
		};
		fetch->staged_bytes += blob->size;
		staged = true;
	}
	stopping = fetch->stopping;
	pthread_cond_broadcast(&fetch->landed);
	unlock(fetch);
	/* A prefetch a reader opened in flight was read as it landed. */
	if (rc == 0 && flight->ahead && !offered && !staged && !stopping)
		dlc_cache_offer(fetch->cache, flight->ino, blob->data, size);
	return rc;
}

/*
 * Joins the flight for ino, or starts and flies it (ahead: for a prefetch),
 * and waits for it to land.  On success *out (when out is not NULL) holds a
 * reference to the bytes.  A reader that joined waits at most until its
 * request's deadline (deadline.h), then leaves with -ETIMEDOUT while the
 * flight goes on for the others; the owner's source calls end by its own.
 * With later (a reader's miss answered first), an owner's flight lands
 * settling and *later holds the bytes for dlc_fetch_offer_later; a joiner's
 * *later stays NULL (the owner offers them).
 */
static int obtain(struct dlc_fetch *fetch, uint32_t ino, uint64_t size, uint64_t stage_seq,
		  struct dlc_blob **out, struct dlc_blob **later)
{
	struct flight *flight;
	bool owner = false;
	int rc;

	pthread_mutex_lock(&fetch->lock);
	for (flight = fetch->flights; flight; flight = flight->next)
		if (flight->ino == ino)
			break;
	if (!flight) {
		flight = calloc(1, sizeof(*flight));
		if (!flight) {
			unlock(fetch);
			return -ENOMEM;
		}
		flight->ino = ino;
		flight->ahead = stage_seq != 0;
		flight->stage_seq = stage_seq;
		flight->next = fetch->flights;
		fetch->flights = flight;
		owner = true;
	}
	flight->refs++;
	unlock(fetch);

	if (owner)
		fly(fetch, flight, size, later != NULL);

	pthread_mutex_lock(&fetch->lock);
	while (!flight->landed) {
		uint64_t deadline = dlc_deadline_get();
		struct timespec until = dlc_deadline_timespec(deadline);

		if (!deadline) {
			wait_on(fetch, &fetch->landed);
			continue;
		}
		DLC_VERIFY(dlc_fetch_verify_locked(fetch));
		if (pthread_cond_timedwait(&fetch->landed, &fetch->lock, &until) == ETIMEDOUT &&
		    !flight->landed) {
			flight_put(fetch, flight);
			unlock(fetch);
			return -ETIMEDOUT;
		}
	}
	rc = flight->rc;
	if (rc == 0 && out)
		*out = dlc_blob_get(flight->blob);
	if (owner && flight->settling)
		*later = dlc_blob_get(flight->blob);
	flight_put(fetch, flight);
	unlock(fetch);
	return rc;
}

/* Whether the warm list's first entry is due, with slack entries to spare:
 * within the window of the reader, or to be dropped (passed, opened,
 * announced again); lock held. */
static bool warm_due_by(const struct dlc_fetch *fetch, uint64_t slack)
{
	uint32_t ino;
	uint64_t seq;

	return dlc_warm_list_first(&fetch->warm, &ino, &seq) &&
	       (seq + slack <= fetch->reader_seq + fetch->window || passed(fetch, seq) ||
		fetch->announced[ino] != seq);
}

static bool warm_due(const struct dlc_fetch *fetch)
{
	return warm_due_by(fetch, 0);
}

/*
 * A reader opened ino: its announced read has happened (a prefetch of it
 * landing later stages nothing), the furthest position moves to it if it
 * lies ahead, staged files passed and past their grace are dropped, and
 * ino's own staged bytes, if any, are returned (the caller's reference).
 * Wakes all workers if the window gained room, else one once an eighth
 * of a window of warm entries is due (it takes them all): wake-ups at
 * every open slowed each open on a few cores.  Lock held.
 */
static struct dlc_blob *reader_opened(struct dlc_fetch *fetch, uint32_t ino, bool *offered)
{
	struct dlc_blob *mine = NULL;
	uint64_t seq = fetch->announced[ino];
	uint64_t now = monotonic_ns();
	unsigned kept = 0;

	if (seq == 0)
		return NULL;
	fetch->announced[ino] = 0;
	if (seq > fetch->reader_seq)
		fetch->reader_seq = seq;
	for (unsigned i = 0; i < fetch->nstaged; i++) {
		struct staged *st = &fetch->staged[i];

		bool taken = st->ino == ino && !mine;

		if (!taken && !(passed(fetch, st->seq) && now - st->staged_ns >= STAGED_GRACE_NS)) {
			fetch->staged[kept++] = *st;
			continue;
		}
		fetch->staged_bytes -= st->blob->size;
		if (taken) {
			mine = st->blob;
			*offered = st->offered;
		} else {
			dlc_blob_put(st->blob);
		}
	}
	if (kept < fetch->nstaged)
		pthread_cond_broadcast(&fetch->queued);
	else if (warm_due_by(fetch, fetch->window / WARM_BATCH_PART))
		pthread_cond_signal(&fetch->queued);
	fetch->nstaged = kept;
	return mine;
}

/* A reader opens ino; the caller tells the cache (consumes the read). */
static struct dlc_blob *note_open(struct dlc_fetch *fetch, uint32_t ino, bool *offered)
{
	struct dlc_blob *staged;

	if (!atomic_load_explicit(&fetch->planning, memory_order_acquire))
		return NULL;
	pthread_mutex_lock(&fetch->lock);
	staged = reader_opened(fetch, ino, offered);
	unlock(fetch);
	return staged;
}

int dlc_fetch_get(struct dlc_fetch *fetch, uint32_t ino, struct dlc_blob **out)
{
	struct dlc_blob *later = NULL;
	int rc = dlc_fetch_get_answer_first(fetch, ino, NULL, out, &later);

	dlc_fetch_offer_later(fetch, ino, later);
	return rc;
}

/*
 * Unlists ino's settling flight of bytes later, if any (a miss's, see fly),
 * its insert done: a reader arriving now finds the cache.  Whether the
 * bytes are still due to the tier.
 */
static bool settled(struct dlc_fetch *fetch, uint32_t ino, const struct dlc_blob *later)
{
	bool tier_due = false;

	pthread_mutex_lock(&fetch->lock);
	for (struct flight **p = &fetch->flights; *p; p = &(*p)->next) {
		struct flight *flight = *p;

		if (flight->ino == ino && flight->settling && flight->blob == later) {
			*p = flight->next;
			tier_due = flight->tier_due;
			flight_put(fetch, flight);
			break;
		}
	}
	unlock(fetch);
	return tier_due;
}

void dlc_fetch_offer_later(struct dlc_fetch *fetch, uint32_t ino, struct dlc_blob *later)
{
	if (!later)
		return;
	hold_insert_for_test();
	dlc_cache_offer(fetch->cache, ino, later->data, later->size);
	if (settled(fetch, ino, later))
		dlc_tier_offer(fetch->tier, ino, later->data, later->size,
			       dlc_cache_score(fetch->cache, ino));
	dlc_blob_put(later);
}

int dlc_fetch_get_answer_first(struct dlc_fetch *fetch, uint32_t ino,
			       const struct dlc_fetch_seen *seen, struct dlc_blob **out,
			       struct dlc_blob **later)
{
	const struct dlc_node *node = seen ? NULL : dlc_snapshot_node(fetch->snapshot, ino);
	uint64_t size = seen ? seen->size : node ? node->size : 0;
	bool told = seen && seen->told;
	/* Told to the cache with its read of the copy (dlc_cache_read_hit), or
	 * where the bytes come from elsewhere; before they are offered. */
	bool consume = !told && atomic_load_explicit(&fetch->planning, memory_order_acquire);
	struct dlc_blob *blob;
	bool offered = false;

	*later = NULL;
	if (!seen && !node)
		return -ENOENT;
	blob = note_open(fetch, ino, &offered);
	if (blob) {
		/* Fetched ahead by a prefetch worker: nobody waits for the source.
		 * Its bytes are offered to the cache as a miss's would be, its read
		 * consumed first, but once the reader has its answer
		 * (the caller's dlc_fetch_offer_later): admission decides then. */
		if (consume)
			dlc_cache_consume(fetch->cache, ino);
		if (!offered)
			*later = dlc_blob_get(blob);
		dlc_stats_add(fetch->stats, DLC_STAT_HITS, 1);
		dlc_stats_add(fetch->stats, DLC_STAT_PREFETCH_HITS, 1);
		*out = blob;
		return 0;
	}
	blob = blob_new(fetch, size);
	if (!blob || (fetch->source->take_held &&
		      fetch->source->take_held(fetch, ino, blob->data, size))) {
		if (consume)
			dlc_cache_consume(fetch->cache, ino);
		if (!blob)
			return -ENOMEM;
		/* Read with its whole chunk a moment ago, refused by admission. */
		dlc_stats_add(fetch->stats, DLC_STAT_HITS, 1);
		dlc_stats_add(fetch->stats, DLC_STAT_CHUNK_HITS, 1);
		*out = keep_blob(blob);
		return 0;
	}
	/* A miss is consumed here too, before its bytes are offered. */
	if (dlc_cache_read_hit(fetch->cache, ino, seen ? &seen->entry : NULL, blob->data, size,
			       consume, !told) == 0) {
		dlc_stats_add(fetch->stats, DLC_STAT_HITS, 1);
		dlc_stats_add(fetch->stats, DLC_STAT_BYTES_FROM_CACHE, size);
		*out = keep_blob(blob);
		return 0;
	}
	dlc_blob_put(blob);
	dlc_stats_add(fetch->stats, DLC_STAT_MISSES, 1);
	return obtain(fetch, ino, size, 0, out, later);
}

bool dlc_fetch_is_staged(struct dlc_fetch *fetch, uint32_t ino)
{
	bool staged = false;

	if (!atomic_load_explicit(&fetch->planning, memory_order_acquire))
		return false;
	pthread_mutex_lock(&fetch->lock);
	for (unsigned i = 0; i < fetch->nstaged && !staged; i++)
		staged = fetch->staged[i].ino == ino;
	unlock(fetch);
	return staged;
}

enum dlc_fetch_found dlc_fetch_open_cached(struct dlc_fetch *fetch, uint32_t ino, uint64_t size,
					   int *fd, struct dlc_fetch_seen *seen)
{
	bool planning = atomic_load_explicit(&fetch->planning, memory_order_acquire);
	enum dlc_cache_hit hit;

	*fd = -1;
	*seen = (struct dlc_fetch_seen) { .size = size };
	/* A staged file is dlc_fetch_get's to take. */
	if (dlc_fetch_is_staged(fetch, ino))
		return DLC_FETCH_MISS;
	/* The check, the consumed read (while planning) and the hit, in one
	 * visit to the cache. */
	hit = dlc_cache_open_hit(fetch->cache, ino, planning, fd, &seen->entry);
	seen->told = hit == DLC_CACHE_HIT_GONE;
	if (hit == DLC_CACHE_HIT_UNCHECKED)
		return DLC_FETCH_MISS;
	if (hit == DLC_CACHE_HIT_GONE)
		return DLC_FETCH_MISS_TOLD;
	/*
	 * Only a hit reports the open here: a miss goes on to dlc_fetch_get,
	 * which reports it as it looks for the file's flight or staged bytes
	 * (reported earlier, a prefetch landing in between would be dropped
	 * and the file fetched twice).
	 */
	if (planning) {
		bool offered = false;   /* a hit: its staged copy, if any, is not needed */

		pthread_mutex_lock(&fetch->lock);
		dlc_blob_put(reader_opened(fetch, ino, &offered));
		unlock(fetch);
	}
	dlc_stats_add(fetch->stats, DLC_STAT_HITS, 1);
	dlc_stats_add(fetch->stats, DLC_STAT_BYTES_FROM_CACHE, size);
	return DLC_FETCH_FOUND;
}

static bool window_full(const struct dlc_fetch *fetch)
{
	return fetch->nstaged + fetch->active >= fetch->window ||
	       fetch->staged_bytes >= PREFETCH_WINDOW_BYTES;
}

/* Takes the warm list's first entry and reads it ahead if still wanted;
 * lock held, dropped meanwhile. */
static void warm_next(struct dlc_fetch *fetch)
{
	uint32_t ino;
	uint64_t seq;

	/* The slot this frees is the caller's to fill: no wake-up. */
	(void)dlc_warm_list_first(&fetch->warm, &ino, &seq);
	dlc_warm_list_pop(&fetch->warm);
	if (passed(fetch, seq) || fetch->announced[ino] != seq)
		return;
	unlock(fetch);
	dlc_warm_file(fetch->cache, fetch->stats, ino);
	pthread_mutex_lock(&fetch->lock);
}

static void *prefetch_worker(void *arg)
{
	struct dlc_fetch *fetch = arg;

	pthread_mutex_lock(&fetch->lock);
	for (;;) {
		const struct dlc_node *node;
		uint32_t ino;
		uint64_t seq;

		while (!fetch->stopping && !warm_due(fetch) &&
		       (fetch->plan_count == 0 || window_full(fetch) ||
			dlc_warm_list_full(&fetch->warm)))
			wait_on(fetch, &fetch->queued);
		if (fetch->stopping)
			break;
		if (warm_due(fetch)) {
			warm_next(fetch);
			continue;
		}
		ino = fetch->plan[fetch->plan_head];
		seq = fetch->plan_head_seq++;
		fetch->plan_head = (fetch->plan_head + 1) % fetch->plan_size;
		fetch->plan_count--;
		/* Passed by the readers, read already, or announced again later. */
		if (passed(fetch, seq) || fetch->announced[ino] != seq)
			continue;
		fetch->active++;
		dlc_warm_list_keep(&fetch->warm);       /* it may be a hit */
		unlock(fetch);

		node = dlc_snapshot_node(fetch->snapshot, ino);
		/* Wake-ups only for what another worker may do now. */
		if (dlc_cache_contains(fetch->cache, ino)) {
			pthread_mutex_lock(&fetch->lock);
			dlc_warm_list_push_kept(&fetch->warm, ino, seq);
			if (window_full(fetch))
				pthread_cond_broadcast(&fetch->queued);
			fetch->active--;
			continue;
		}
		pthread_mutex_lock(&fetch->lock);
		if (dlc_warm_list_full(&fetch->warm))
			pthread_cond_signal(&fetch->queued);
		dlc_warm_list_unkeep(&fetch->warm);
		unlock(fetch);
		/* Memory short: the file is left to be an ordinary miss. */
		if (prefetch_room(fetch, node->size)) {
			dlc_stats_add(fetch->stats, DLC_STAT_PREFETCHES, 1);
			(void)obtain(fetch, ino, node->size, seq, NULL, NULL);
		}
		/* This worker goes on with the room its item leaves: one other
		 * is woken, for work this one may not take (a due warm entry
		 * first). */
		pthread_mutex_lock(&fetch->lock);
		fetch->active--;
		pthread_cond_signal(&fetch->queued);
	}
	unlock(fetch);
	return NULL;
}

int dlc_fetch_start(struct dlc_fetch *fetch, unsigned workers, unsigned window)
{
	unsigned warm_slots;

	fetch->window = window ? window : 1;
	fetch->staged = calloc(fetch->window + workers, sizeof(*fetch->staged));
	fetch->staged_slots = fetch->staged ? fetch->window + workers : 0;
	fetch->workers = calloc(workers, sizeof(*fetch->workers));
	warm_slots = fetch->window > WARM_MAX / WARM_WINDOWS ? WARM_MAX : fetch->window * WARM_WINDOWS;
	if (!fetch->workers || !fetch->staged || dlc_warm_list_init(&fetch->warm, warm_slots) < 0)
		return -ENOMEM;
	for (unsigned i = 0; i < workers; i++) {
		int rc = pthread_create(&fetch->workers[i], NULL, prefetch_worker, fetch);

		if (rc != 0) {
			dlc_fetch_stop(fetch);
			return -rc;
		}
		fetch->nworkers++;
	}
	return 0;
}

/* Makes room for one more plan entry; lock held. */
static bool plan_grow(struct dlc_fetch *fetch)
{
	size_t size = fetch->plan_size ? fetch->plan_size * 2 : 65536;
	uint32_t *plan;

	if (fetch->plan_count < fetch->plan_size)
		return true;
	if (fetch->plan_size >= PLAN_MAX)
		return false;
	plan = malloc(size * sizeof(*plan));
	if (!plan)
		return false;
	for (size_t i = 0; i < fetch->plan_count; i++)
		plan[i] = fetch->plan[(fetch->plan_head + i) % fetch->plan_size];
	free(fetch->plan);
	fetch->plan = plan;
	fetch->plan_size = size;
	fetch->plan_head = 0;
	return true;
}

bool dlc_fetch_prefetch(struct dlc_fetch *fetch, uint32_t ino)
{
	const struct dlc_node *node = dlc_snapshot_node(fetch->snapshot, ino);
	bool queued = false;
	unsigned window;

	if (!node || !S_ISREG(node->mode))
		return false;
	/* Outside fetch->lock: the cache's lock never nests inside it. */
	(void)dlc_cache_announce(fetch->cache, ino);
	if (node->size > fetch->max_file) {
		/* A shard: streamed by blocks (blocks.c, "Announced shards"). */
		if (!fetch->blocks)
			dlc_fetch_set_blocks(fetch, DLC_DEFAULT_BLOCK_SIZE, DLC_DEFAULT_READAHEAD_MAX, 0);
		pthread_mutex_lock(&fetch->lock);
		window = fetch->window;
		pthread_mutex_unlock(&fetch->lock);
		return fetch->blocks && dlc_blocks_announce(fetch->blocks, ino, window);
	}
	pthread_mutex_lock(&fetch->lock);
	if (!fetch->announced) {
		fetch->announced = calloc((size_t)dlc_snapshot_count(fetch->snapshot) + 1,
					  sizeof(*fetch->announced));
		if (fetch->announced)
			atomic_store_explicit(&fetch->planning, true, memory_order_release);
	}
	if (fetch->announced && fetch->nworkers > 0 && !fetch->stopping && plan_grow(fetch)) {
		if (fetch->plan_count == 0)
			fetch->plan_head_seq = fetch->next_seq + 1;
		fetch->plan[(fetch->plan_head + fetch->plan_count) % fetch->plan_size] = ino;
		fetch->plan_count++;
		fetch->announced[ino] = ++fetch->next_seq;
		queued = true;
		/* One entry, one worker: a broadcast per line woke all of them
		 * (47,400 futex calls in an announced epoch of 2,000 files); a
		 * busy worker takes the plan's next entry as it finishes. */
		pthread_cond_signal(&fetch->queued);
	}
	unlock(fetch);
	return queued;
}

void dlc_fetch_stop(struct dlc_fetch *fetch)
{
	pthread_mutex_lock(&fetch->lock);
	fetch->stopping = true;
	fetch->plan_count = 0;
	dlc_warm_list_clear(&fetch->warm);
	pthread_cond_broadcast(&fetch->queued);
	unlock(fetch);
	dlc_blocks_stop(fetch->blocks);
	for (unsigned i = 0; i < fetch->nworkers; i++)
		pthread_join(fetch->workers[i], NULL);
	fetch->nworkers = 0;
	free(fetch->workers);
	fetch->workers = NULL;
	for (unsigned i = 0; i < fetch->nstaged; i++)
		dlc_blob_put(fetch->staged[i].blob);
	fetch->nstaged = 0;
	fetch->staged_bytes = 0;
}

void dlc_fetch_set_blocks(struct dlc_fetch *fetch, uint64_t block_size, uint64_t readahead_max,
			  uint64_t kernel_readahead)
{
	struct dlc_block_source source = fetch->source->block;

	source.ctx = fetch;
	pthread_mutex_lock(&fetch->lock);
	if (!fetch->blocks)
		fetch->blocks = dlc_blocks_create(&source, fetch->snapshot, fetch->cache, fetch->stats,
						  fetch->budget, block_size, readahead_max, kernel_readahead);
	unlock(fetch);
}

/* The most a whole-file open checks at once: an eighth of the memory. */
static uint64_t whole_check_limit(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

	return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 8 : 0;
}

enum dlc_fetch_found dlc_fetch_open_cached_blocks(struct dlc_fetch *fetch, uint32_t ino,
						  bool check, int *fd)
{
	*fd = -1;
	if (!fetch->cache)
		return DLC_FETCH_MISS;
	if (check && dlc_cache_blocks_check_whole(fetch->cache, ino, whole_check_limit()) !=
			     DLC_CACHE_CHECKED)
		return DLC_FETCH_MISS;
	if (dlc_cache_blocks_open_whole(fetch->cache, ino, fd) != DLC_CACHE_OPENED) {
		*fd = -1;
		return DLC_FETCH_MISS;
	}
	return DLC_FETCH_FOUND;
}

void dlc_fetch_note_whole_hit(struct dlc_fetch *fetch, uint32_t ino, uint64_t size)
{
	/* As a block reader's open does (dlc_blocks_open), and a hit's counts. */
	dlc_blocks_opened_whole(fetch->blocks, ino);
	dlc_cache_note_read(fetch->cache, ino, true);
	dlc_stats_add(fetch->stats, DLC_STAT_HITS, 1);
	dlc_stats_add(fetch->stats, DLC_STAT_WHOLE_BLOCK_OPENS, 1);
	dlc_stats_add(fetch->stats, DLC_STAT_BYTES_FROM_CACHE, size);
}

int dlc_fetch_open_direct(struct dlc_fetch *fetch, uint32_t ino, struct dlc_block_reader **out)
{
	*out = NULL;
	if (!fetch->blocks)
		dlc_fetch_set_blocks(fetch, DLC_DEFAULT_BLOCK_SIZE, DLC_DEFAULT_READAHEAD_MAX, 0);
	if (!fetch->blocks)
		return -ENOMEM;
	return dlc_blocks_open(fetch->blocks, ino, out);
}

ssize_t dlc_fetch_read_direct(struct dlc_fetch *fetch, uint32_t ino, struct dlc_block_reader *reader,
			      void *buf, size_t len, uint64_t off)
{
	(void)fetch;
	(void)ino;
	return dlc_blocks_read(reader, buf, len, off);
}

bool dlc_fetch_try_read_direct(struct dlc_fetch *fetch, struct dlc_block_reader *reader,
			       void *buf, size_t len, uint64_t off, ssize_t *count)
{
	(void)fetch;
	return dlc_blocks_try_read(reader, buf, len, off, count);
}

void dlc_fetch_close_direct(struct dlc_fetch *fetch, struct dlc_block_reader *reader)
{
	(void)fetch;
	dlc_blocks_close(reader);
}

/*
 * Listed flights unlanded or settling (a miss's, with its bytes), held,
 * one per inode, a prefetch's with its position; the plan ring in its slots, numbered up to the last
 * announcement, each entry announced at its number, later or opened (0);
 * staged files in their slots, with bytes and a position, staged_bytes
 * their sum; the readers' position; nothing planned or staged without the
 * announced table, nor planned once stopping; the warm list in its slots,
 * in announced order.
 */
static void unlock(struct dlc_fetch *fetch)
{
	DLC_VERIFY(dlc_fetch_verify_locked(fetch));
	pthread_mutex_unlock(&fetch->lock);
}

static void wait_on(struct dlc_fetch *fetch, pthread_cond_t *cond)
{
	DLC_VERIFY(dlc_fetch_verify_locked(fetch));
	pthread_cond_wait(cond, &fetch->lock);
}

