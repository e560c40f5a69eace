/*
 * flights.c - the flights of blocks.c: one per block being read (listed
 * while in flight, and while a readahead is staged in it), its landing,
 * its offer to the cache, and the readahead jobs that fly blocks ahead of
 * a reader (blocks.c) or of an announced shard's stream (shards.c); and
 * the block readers' lifetime and source handles, which the jobs use.
 * See blocks.c for the read path these serve and its INVARIANTS, which
 * hold here too; nothing here calls blocks.c or shards.c.  Verify builds
 * check them at every release of either lock, by whichever file releases
 * it (dlc_flights_unlock, dlc_flights_wait, dlc_flights_reader_unlock;
 * what each checks is said at verify_flights and verify_reader, the end
 * of this file).
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlcache/blocks.h"
#include "dlcache/deadline.h"
#include "dlcache/log.h"
#include "dlcache/pool.h"
#include "dlcache/verify.h"
#include "blocks_private.h"

static int verify_flights(const struct dlc_blocks *blocks);
static int verify_reader(const struct dlc_block_reader *reader);

/* A blob for a block, kept memory (budget.h): taken only if the budget's use
 * stays at or below ceiling, never waited for; NULL when there is no room. */
struct dlc_blob *dlc_flights_blob_new(struct dlc_blocks *blocks, uint64_t size, uint64_t ceiling)
{
	struct dlc_budget *budget = blocks->budget;
	struct dlc_blob *blob;

	if (budget && !dlc_budget_try_acquire(budget, size, ceiling))
		return NULL;
	blob = dlc_blob_spares_take(blocks->spares, size);   /* + 1 byte: see dlc_flights_load_block */
	if (!blob) {
		dlc_budget_release(budget, size);
		return NULL;
	}
	blob->budget = budget;
	return blob;
}

/* Lock held. */
struct block_flight *dlc_flights_find(struct dlc_blocks *blocks, uint32_t ino, uint32_t index)
{
	for (struct block_flight *f = blocks->flights; f; f = f->next)
		if (f->ino == ino && f->index == index)
			return f;
	return NULL;
}

/* Drops one reference; lock held. */
void dlc_flights_put(struct block_flight *f)
{
	if (--f->refs == 0) {
		dlc_blob_put(f->blob);
		free(f);
	}
}

/* A shard block is no longer the stream's to count: taken by a reader, or
 * out of the list; the stream may go on.  Lock held. */
static void unclaim(struct dlc_blocks *blocks, struct block_flight *f)
{
	if (!f->unclaimed)
		return;
	assert(blocks->shard_bytes >= f->len);
	f->unclaimed = false;
	blocks->shard_bytes -= f->len;
	atomic_store(&blocks->shards_due, true);
}

/* Takes f out of the list, dropping the list's reference, when the caller
 * holds one of its own (so f lives on); lock held. */
static void unlist_held(struct dlc_blocks *blocks, struct block_flight *f)
{
	if (!f->listed)
		return;
	unclaim(blocks, f);
	for (struct block_flight **p = &blocks->flights; *p; p = &(*p)->next) {
		if (*p == f) {
			*p = f->next;
			break;
		}
	}
	f->listed = false;
	f->refs--;
}

/*
 * Reader has got the bytes of landed flight f: a readahead staged for it
 * (or for nobody any more) leaves the list, unless its offer to the cache
 * is still running: then it only loses its owner, and dlc_flights_settle() unlists it
 * once the cache holds the block (unlisted before, the block would be read
 * from the source again by the next reader to want it).  One staged for
 * another reader of the file stays listed for that reader.  An announced
 * shard's block is the first reader's that wants it; true when its bytes
 * were not offered to the cache as they landed (no room) and the caller
 * must offer them now, with dlc_flights_offer_later once the lock is dropped (f then
 * holds a reference for the offer, and stays listed until it is done).
 * Lock held, and a reference of the caller's besides the list's.
 */
bool dlc_flights_take(struct dlc_blocks *blocks, struct block_flight *f,
		      const struct dlc_block_reader *reader)
{
	if (f->shard && f->unclaimed && f->landed && f->rc == 0) {
		unclaim(blocks, f);
		f->taken = true;
		f->owner = NULL;
		dlc_stats_add(blocks->stats, DLC_STAT_SHARD_PREFETCH_HITS, 1);
		/* Still settling: its landing offers it (offer_shard_and_settle). */
		if (f->settling)
			return false;
		if (f->offered) {
			unlist_held(blocks, f);
			return false;
		}
		f->settling = true;
		f->refs++;
		return true;
	}
	if (!f->ahead || (f->owner != reader && f->owner != NULL))
		return false;
	if (f->settling)
		f->owner = NULL;
	else
		unlist_held(blocks, f);
	return false;
}

/* unlist_held, when the list's may be the last reference. */
void dlc_flights_unlist(struct dlc_blocks *blocks, struct block_flight *f)
{
	if (!f->listed)
		return;
	f->refs++;
	unlist_held(blocks, f);
	dlc_flights_put(f);
}

/*
 * The reader's source handle, opened on first use, outside reader->lock (a
 * hung open would hold the reader's every read past its deadline).  One
 * thread opens; the others (readahead jobs, a second read) wait for it, up
 * to their request's deadline (deadline.h), so the source sees one open per
 * reader.  No lock held.  0, -ETIMEDOUT, or the open's -errno.
 */
int dlc_flights_source_handle(struct dlc_block_reader *reader, void **out)
{
	struct dlc_blocks *blocks = reader->blocks;
	uint64_t deadline = dlc_deadline_get();
	struct timespec until = dlc_deadline_timespec(deadline);
	void *handle = NULL;
	int rc;

	pthread_mutex_lock(&reader->lock);
	while (reader->opening) {
		if (!deadline) {
			DLC_VERIFY(verify_reader(reader));
			pthread_cond_wait(&reader->open_done, &reader->lock);
		} else {
			DLC_VERIFY(verify_reader(reader));
			if (pthread_cond_timedwait(&reader->open_done, &reader->lock, &until) == ETIMEDOUT &&
			    reader->opening) {
				dlc_flights_reader_unlock(reader);
				return -ETIMEDOUT;
			}
		}
	}
	if (reader->opened) {
		*out = reader->handle;
		dlc_flights_reader_unlock(reader);
		return 0;
	}
	reader->opening = true;
	dlc_flights_reader_unlock(reader);
	rc = blocks->source.open(blocks->source.ctx, reader->ino, &handle);
	pthread_mutex_lock(&reader->lock);
	reader->opening = false;
	if (rc == 0) {
		reader->handle = handle;
		reader->opened = true;
		*out = handle;
	}
	pthread_cond_broadcast(&reader->open_done);
	dlc_flights_reader_unlock(reader);
	return rc;
}

/* The reader's file is not the snapshot's size on the source: logs and
 * counts it; -EIO. */
int dlc_flights_changed_size(struct dlc_block_reader *reader)
{
	struct dlc_blocks *blocks = reader->blocks;
	char path[DLC_SNAPSHOT_PATH_MAX];

	dlc_stats_add(blocks->stats, DLC_STAT_REMOTE_ERRORS, 1);
	if (dlc_snapshot_path(blocks->snapshot, reader->ino, path, sizeof(path)) < 0)
		snprintf(path, sizeof(path), "inode %u", reader->ino);
	dlc_log(DLC_LOG_WARNING, "%s changed size on the source since the snapshot; remount with -o refresh", path);
	dlc_stats_set_error(blocks->stats, "a file changed size on the source since the snapshot");
	return -EIO;
}

/*
 * Loads block index of the reader's file into blob (its exact length): from
 * the cache if it holds a good copy, else from the source in one read,
 * offered to the cache.  0, -ETIMEDOUT (the source did not answer in time)
 * or -EIO.
 */
int dlc_flights_load_block(struct dlc_block_reader *reader, uint32_t index, struct dlc_blob *blob,
			   bool *from_source)
{
	struct dlc_blocks *blocks = reader->blocks;
	void *handle;
	uint64_t len = blob->size;
	ssize_t n;
	int rc;

	*from_source = false;
	if (blocks->cache && dlc_cache_block_read(blocks->cache, reader->ino, index, blob->data, len) == 0) {
		dlc_stats_add(blocks->stats, DLC_STAT_BLOCK_HITS, 1);
		dlc_stats_add(blocks->stats, DLC_STAT_BYTES_FROM_CACHE, len);
		return 0;
	}
	rc = dlc_flights_source_handle(reader, &handle);
	if (rc < 0)
		return rc;
	/*
	 * The handle stays open while the reader lives, and this call holds a
	 * reference to the reader.  The last block asks for one byte more
	 * (the blob has room for it), so a file that grew is seen too.  The
	 * source logged and counted a failure, and counts the bytes.
	 */
	n = blocks->source.read(blocks->source.ctx, reader->ino, handle, blob->data,
				index + 1 == reader->nblocks ? len + 1 : len,
				(uint64_t)index * blocks->block_size);
	if (n < 0)
		return n == -ETIMEDOUT ? -ETIMEDOUT : -EIO;
	/* Drivers return short reads only at the end of the file. */
	if ((uint64_t)n != len)
		return dlc_flights_changed_size(reader);
	dlc_stats_add(blocks->stats, DLC_STAT_BLOCK_MISSES, 1);
	*from_source = true;
	return 0;
}

/*
 * Lands f with rc (its blob already set when rc is 0): its waiters take
 * their bytes now.  A failed flight leaves the list at once; a good one
 * stays listed (so a reader arriving meanwhile joins it rather than read the
 * source again) until its offer to the cache is done (settle).  Lock held,
 * and a reference of the caller's.
 */
void dlc_flights_land(struct dlc_blocks *blocks, struct block_flight *f, int rc)
{
	f->rc = rc;
	f->landed = true;
	if (rc < 0)
		unlist_held(blocks, f);
	pthread_cond_broadcast(&blocks->landed);
}

/* After the offer of a landed flight: a reader's own flight, or readahead
 * nobody waits for any more, leaves the list; staged readahead stays. */
void dlc_flights_settle(struct dlc_blocks *blocks, struct block_flight *f)
{
	f->settling = false;
	if (!f->ahead || !f->owner)
		unlist_held(blocks, f);
}

/* Offers a block just read from the source to the cache, then settles its
 * flight and drops the reference the caller held for it. */
static void offer_and_settle(struct dlc_blocks *blocks, struct block_flight *f)
{
	if (blocks->cache)
		(void)dlc_cache_block_offer(blocks->cache, f->ino, f->index, f->blob->data, f->blob->size);
	pthread_mutex_lock(&blocks->lock);
	dlc_flights_settle(blocks, f);
	dlc_flights_put(f);
	dlc_flights_unlock(blocks);
}

static void run_offer(void *arg)
{
	struct block_flight *f = arg;

	offer_and_settle(f->blocks, f);
}

/* The pool stops (unmount): the offer still runs, on the stopping thread,
 * so that blocks read before the unmount are cached as after it. */
static void drop_offer(void *arg)
{
	struct block_flight *f = arg;

	offer_and_settle(f->blocks, f);
}

/*
 * Offers landed flight f's bytes to the cache on the source pool, so that
 * the reader is answered first.  Not on the local pool: cache writes queued
 * behind two threads held their blocks in memory while the source ran
 * ahead (daemon RSS 537 MiB with four streams, against 150 MiB here).
 */
void dlc_flights_offer_later(struct dlc_blocks *blocks, struct block_flight *f)
{
	struct dlc_pool_job job = { run_offer, drop_offer, f };

	if (!blocks->pool || dlc_pool_submit(blocks->pool, &job) < 0)
		offer_and_settle(blocks, f);
}

/*
 * Waits for listed flight f to land and takes its bytes for the reader: its
 * rc, and when 0 one blob reference in *out.  *offer is f when the caller
 * must hand it to dlc_flights_offer_later once the lock is dropped (take), else NULL.
 * -ETIMEDOUT when the request's deadline (deadline.h) comes first: the
 * flight goes on for its other readers (and, readahead, stays staged for
 * this one).  Lock held.
 */
int dlc_flights_join(struct dlc_blocks *blocks, struct block_flight *f,
		     const struct dlc_block_reader *reader, struct dlc_blob **out,
		     struct block_flight **offer)
{
	uint64_t deadline = dlc_deadline_get();
	struct timespec until = dlc_deadline_timespec(deadline);
	int rc;

	*offer = NULL;
	f->refs++;
	while (!f->landed) {
		if (!deadline) {
			dlc_flights_wait(blocks);
			continue;
		}
		DLC_VERIFY(verify_flights(blocks));
		if (pthread_cond_timedwait(&blocks->landed, &blocks->lock, &until) == ETIMEDOUT &&
		    !f->landed) {
			dlc_flights_put(f);
			return -ETIMEDOUT;
		}
	}
	rc = f->rc;
	if (rc == 0 && f->blob)
		*out = dlc_blob_get(f->blob);
	*offer = dlc_flights_take(blocks, f, reader) ? f : NULL;    /* the reader holds it now */
	dlc_flights_put(f);
	return *out || rc < 0 ? rc : -EIO;
}

void dlc_flights_reader_put(struct dlc_block_reader *reader)
{
	if (atomic_fetch_sub(&reader->refs, 1) != 1)
		return;
	for (int i = 0; i < HELD_MAX; i++)
		dlc_blob_put(reader->held[i]);
	if (reader->fd >= 0)
		close(reader->fd);
	if (reader->opened && reader->blocks->source.close)
		reader->blocks->source.close(reader->blocks->source.ctx, reader->handle);
	pthread_cond_destroy(&reader->open_done);
	pthread_mutex_destroy(&reader->lock);
	free(reader);
}

/* Forgets the reader's staged blocks (reset or close). */
void dlc_flights_drop_staged(struct dlc_block_reader *reader)
{
	struct dlc_blocks *blocks = reader->blocks;
	struct block_flight *f, *next;

	pthread_mutex_lock(&blocks->lock);
	for (f = blocks->flights; f; f = next) {
		next = f->next;
		if (f->owner != reader)
			continue;
		f->owner = NULL;
		if (f->landed && !f->settling)
			dlc_flights_unlist(blocks, f);
	}
	dlc_flights_unlock(blocks);
}

/*
 * offer_and_settle for an announced shard's block: offered only into the
 * cache's free room; with none, it stays listed unoffered for the reader
 * that takes it (take), or, taken while this ran, is offered now.
 */
static void offer_shard_and_settle(struct dlc_blocks *blocks, struct block_flight *f)
{
	bool made = !blocks->cache ||
		    dlc_cache_block_offer_if_room(blocks->cache, f->ino, f->index, f->blob->data,
						  f->blob->size);

	for (;;) {
		pthread_mutex_lock(&blocks->lock);
		if (made || !f->taken)
			break;
		dlc_flights_unlock(blocks);
		(void)dlc_cache_block_offer(blocks->cache, f->ino, f->index, f->blob->data, f->blob->size);
		made = true;
	}
	f->offered = made;
	dlc_flights_settle(blocks, f);
	dlc_flights_put(f);
	dlc_flights_unlock(blocks);
}

/*
 * A readahead fetch.  Its buffer is taken now, not when it was queued, so
 * that queued fetches hold no memory: at most one block per pool thread is
 * being read ahead at any time, plus what is staged.  No room in the budget
 * (or the reader gone): nothing is read, and the reader reads the block
 * itself if it gets there.
 */
static void run_ahead(void *arg)
{
	struct ahead_job *job = arg;
	struct dlc_block_reader *reader = job->reader;
	struct dlc_blocks *blocks = reader->blocks;
	struct block_flight *f = job->flight;
	bool from_source = false, wanted, shard = f->shard;
	int rc = -ENOMEM;

	pthread_mutex_lock(&blocks->lock);
	wanted = f->owner != NULL;
	dlc_flights_unlock(blocks);
	if (wanted)
		f->blob = dlc_flights_blob_new(blocks, dlc_blocks_block_len(reader, f->index), blocks->ahead_limit);
	if (f->blob)
		rc = dlc_flights_load_block(reader, f->index, f->blob, &from_source);
	if (rc == 0)
		dlc_stats_add(blocks->stats, shard ? DLC_STAT_SHARD_PREFETCHES : DLC_STAT_READAHEADS, 1);
	pthread_mutex_lock(&blocks->lock);
	/* No room after all: the shard's stream flies the block again at its
	 * next pump (shards.c). */
	if (shard && wanted && !f->blob) {
		if (f->index < reader->shard_rewind)
			reader->shard_rewind = f->index;
		blocks->pump_from = NULL;
		atomic_store(&blocks->shards_due, true);
	}
	dlc_flights_land(blocks, f, rc);
	if (rc < 0 || !from_source) {
		f->offered = true;      /* nothing to offer */
		dlc_flights_settle(blocks, f);
		dlc_flights_put(f);
		dlc_flights_unlock(blocks);
	} else {
		f->settling = true;
		dlc_flights_unlock(blocks);
		if (shard)
			offer_shard_and_settle(blocks, f);
		else
			offer_and_settle(blocks, f);
	}
	dlc_flights_reader_put(reader);
	free(job);
}

void dlc_flights_drop_ahead(void *arg)
{
	struct ahead_job *job = arg;
	struct dlc_blocks *blocks = job->reader->blocks;

	pthread_mutex_lock(&blocks->lock);
	dlc_flights_land(blocks, job->flight, -ESHUTDOWN);
	dlc_flights_put(job->flight);
	dlc_flights_unlock(blocks);
	dlc_flights_reader_put(job->reader);
	free(job);
}

/*
 * Lists a readahead flight of block index for the reader, not started yet:
 * the job that starts it (dlc_flights_submit_ahead), or NULL with *skip true when
 * nothing is to be read (the block is checked in this mount, or in
 * flight), or with *skip false when the budget has no room (try later).
 * Readers wanting the block meanwhile wait for the listed flight.  With
 * shard, the reader is a shard's stream and the flight an announced
 * block, unclaimed: its length, counted in shard_bytes by the caller, is
 * the flight's to give back.
 */
struct ahead_job *dlc_flights_list_ahead(struct dlc_block_reader *reader, uint32_t index, bool shard,
					 bool *skip)
{
	struct dlc_blocks *blocks = reader->blocks;
	struct ahead_job *job;
	struct block_flight *f;

	*skip = true;
	/* A block checked in this mount is read from its file; one cached but
	 * not yet checked is worth reading ahead (its check reads it whole). */
	if (blocks->cache && dlc_cache_block_checked(blocks->cache, reader->ino, index))
		return NULL;
	*skip = false;
	if (blocks->budget && !dlc_budget_has_room(blocks->budget, dlc_blocks_block_len(reader, index),
						   blocks->ahead_limit))
		return NULL;
	job = malloc(sizeof(*job));
	f = calloc(1, sizeof(*f));
	if (!job || !f) {
		free(job);
		free(f);
		return NULL;
	}
	pthread_mutex_lock(&blocks->lock);
	if (dlc_flights_find(blocks, reader->ino, index)) {
		dlc_flights_unlock(blocks);
		free(job);
		free(f);
		*skip = true;
		return NULL;
	}
	*f = (struct block_flight) { .ino = reader->ino, .index = index, .refs = 2, .listed = true,
				     .ahead = true, .owner = reader, .shard = shard, .unclaimed = shard,
				     .len = dlc_blocks_block_len(reader, index), .blocks = blocks,
				     .next = blocks->flights };
	blocks->flights = f;
	dlc_flights_unlock(blocks);
	atomic_fetch_add(&reader->refs, 1);
	*job = (struct ahead_job) { reader, f };
	return job;
}

/* Starts a flight listed by dlc_flights_list_ahead. */
void dlc_flights_submit_ahead(struct ahead_job *job)
{
	struct dlc_blocks *blocks = job->reader->blocks;
	struct dlc_pool_job pool_job = { run_ahead, dlc_flights_drop_ahead, job };

	/* A block the cache holds is read from the local disk, which serves
	 * a few streams faster than many; others wait on the source. */
	if (dlc_pool_submit(blocks->cache && dlc_cache_block_contains(blocks->cache, job->reader->ino,
								      job->flight->index)
			    ? blocks->local : blocks->pool, &pool_job) < 0)
		dlc_flights_drop_ahead(job);
}

/* A reader of ino (size bytes) with no side effects on the cache: a
 * shard's stream, or the start of dlc_blocks_open's reader.  NULL on ENOMEM. */
struct dlc_block_reader *dlc_flights_reader_new(struct dlc_blocks *blocks, uint32_t ino, uint64_t size)
{
	struct dlc_block_reader *reader = calloc(1, sizeof(*reader));

	if (!reader)
		return NULL;
	atomic_init(&reader->refs, 1);
	reader->blocks = blocks;
	reader->ino = ino;
	reader->size = size;
	reader->nblocks = (uint32_t)((size + blocks->block_size - 1) / blocks->block_size);
	reader->fd = -1;
	reader->shard_rewind = UINT32_MAX;
	pthread_mutex_init(&reader->lock, NULL);
	dlc_deadline_cond_init(&reader->open_done);
	return reader;
}

/* Listed flights: marked so, one per block, held by the list and, until it
 * lands or while its offer runs, by the flier; an owner only on readahead;
 * landed, only with its bytes, and once settled only staged for a reader
 * (or a shard's stream).  Unclaimed only a shard's, their lengths within
 * shard_bytes (which also holds a pump's reservations, at most
 * shard_limit, or one block).  (A blob is read only once landed:
 * readahead sets it unlocked.) */
static int verify_flights(const struct dlc_blocks *blocks)
{
	uint64_t unclaimed = 0;

	for (const struct block_flight *f = blocks->flights, *g; f; f = f->next) {
		if (!f->listed || f->blocks != blocks || f->refs == 0 || (f->owner && !f->ahead) ||
		    ((!f->landed || f->settling) && f->refs < 2) || (!f->landed && f->settling))
			return -EUCLEAN;
		if (f->landed && (f->rc != 0 || !f->blob || f->blob->size > blocks->block_size ||
				  (!f->settling && !(f->ahead && f->owner))))
			return -EUCLEAN;
		if (f->unclaimed && !(f->shard && f->ahead))
			return -EUCLEAN;
		if (f->unclaimed)
			unclaimed += f->len;
		for (g = f->next; g; g = g->next)
			if (g->ino == f->ino && g->index == f->index)
				return -EUCLEAN;
	}
	if (unclaimed > blocks->shard_bytes ||
	    blocks->shard_bytes > (blocks->shard_limit > blocks->block_size ? blocks->shard_limit
									    : blocks->block_size))
		return -EUCLEAN;
	return 0;
}

/* A reader's blocks in memory: in the slots in use, of the file, each its
 * block's length; its fd's block, next_index, ahead_until, window in range. */
static int verify_reader(const struct dlc_block_reader *reader)
{
	const struct dlc_blocks *blocks = reader->blocks;

	for (unsigned i = 0; i < HELD_MAX; i++)
		if (reader->held[i] && (i >= blocks->held_blocks ||
					reader->held_index[i] >= reader->nblocks ||
					reader->held[i]->size != dlc_blocks_block_len(reader, reader->held_index[i])))
			return -EUCLEAN;
	return (reader->fd >= 0 && reader->fd_index >= reader->nblocks) ||
	       reader->next_index > reader->nblocks || reader->ahead_until > reader->nblocks ||
	       reader->window > blocks->readahead_blocks ? -EUCLEAN : 0;
}

void dlc_flights_unlock(struct dlc_blocks *blocks)
{
	DLC_VERIFY(verify_flights(blocks));
	pthread_mutex_unlock(&blocks->lock);
}

void dlc_flights_wait(struct dlc_blocks *blocks)
{
	DLC_VERIFY(verify_flights(blocks));
	pthread_cond_wait(&blocks->landed, &blocks->lock);
}

void dlc_flights_reader_unlock(struct dlc_block_reader *reader)
{
	DLC_VERIFY(verify_reader(reader));
	pthread_mutex_unlock(&reader->lock);
}

int dlc_blocks_verify(struct dlc_blocks *blocks)
{
	int rc;

	pthread_mutex_lock(&blocks->lock);
	rc = verify_flights(blocks);
	pthread_mutex_unlock(&blocks->lock);
	return rc;
}

int dlc_blocks_reader_verify(struct dlc_block_reader *reader)
{
	int rc;

	pthread_mutex_lock(&reader->lock);
	rc = verify_reader(reader);
	pthread_mutex_unlock(&reader->lock);
	return rc;
}
