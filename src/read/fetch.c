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
 * The fetcher is one struct (fetch_private.h) under one lock, its concerns
 * in four files, each calling only the ones below it:
 *
 *   prefetch.c       the workers: announcements taken, files flown ahead
 *                    through the flights here, announced hits read ahead;
 *   fetch.c          this file: the fetcher made, stopped and freed, a
 *                    reader's open (the cache, staged bytes, held members,
 *                    the flight) and the flights; the entry points of files
 *                    larger than max_file (blocks.c);
 *   staging.c        the prefetch's state: the plan, the readers' position,
 *                    the staged files, the window (a landing prefetch is
 *                    staged in fly, under the lock where it lands);
 *   fetch_source.c   the source table: a tree's files, packed members,
 *                    blocks.
 *
 * INVARIANTS.  fetch->lock guards the flight list, every flight's fields,
 * staging.c's state and the stopping flag.
 * A flight is referenced by its owner and by each waiter (refs); the last
 * one to drop it frees it.  At most one flight per inode is in the list.
 * A listed flight is unlanded, or a reader's miss settling (landed with its
 * bytes, before its cache insert; the list holds a reference until
 * dlc_fetch_offer_later unlists it).
 * Verify builds check these at every release of fetch->lock (fetch_private.h:
 * unlock, wait_on; dlc_fetch_verify_locked, fetch_verify.c, says what).
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "dlcache/blocks.h"
#include "dlcache/chunks.h"
#include "dlcache/deadline.h"
#include "dlcache/fetch.h"
#include "dlcache/tier.h"
#include "fetch_private.h"
#include "warm_list.h"

/*
 * A blob of size bytes, with room for one more (see read_path,
 * fetch_source.c), drawn from the fetcher's budget: waits for room, until
 * the request's deadline at most (deadline.h; NULL then), the thread's work
 * charge (budget.h) until it puts the blob or keeps it (keep_blob).
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
	fetch->source = fetch->chunks ? &dlc_fetch_source_packed : &dlc_fetch_source_tree;
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
			flight->ino, flight->stage_seq, dlc_blob_get(blob), dlc_deadline_now(), offered
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
int dlc_fetch_obtain(struct dlc_fetch *fetch, uint32_t ino, uint64_t size, uint64_t stage_seq,
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

/* A reader opens ino; the caller tells the cache (consumes the read). */
static struct dlc_blob *note_open(struct dlc_fetch *fetch, uint32_t ino, bool *offered)
{
	struct dlc_blob *staged;

	if (!atomic_load_explicit(&fetch->planning, memory_order_acquire))
		return NULL;
	pthread_mutex_lock(&fetch->lock);
	staged = dlc_staging_reader_opened(fetch, ino, offered);
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
	return dlc_fetch_obtain(fetch, ino, size, 0, out, later);
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
		dlc_blob_put(dlc_staging_reader_opened(fetch, ino, &offered));
		unlock(fetch);
	}
	dlc_stats_add(fetch->stats, DLC_STAT_HITS, 1);
	dlc_stats_add(fetch->stats, DLC_STAT_BYTES_FROM_CACHE, size);
	return DLC_FETCH_FOUND;
}

/* Here, not with the workers in prefetch.c: the fetcher's end (dlc_fetch_free)
 * stops first, and the stop ends the blocks' streams and the staging too. */
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
