/*
 * blocks.c - the read path of files larger than cache_max_file: blocks,
 * one flight per block, and readahead per open file (see blocks.h).
 *
 * A read maps to the blocks it covers; each block is served from, in
 * order: the reader's last two blocks in memory; the cache file of a block
 * checked earlier in this mount (opened by its stamp, read by range); a
 * flight.  A flight loads one block: from the cache (read whole and checked
 * against its xxh3: the first use in a mount) or, failing that, from the
 * source in one call, then offers it to the cache (cache_blocks.c decides).
 * Readers wanting a block in flight wait for it and share its bytes.
 *
 * The source is fetch.c's (struct dlc_block_source): a tree's file, opened
 * by path once per reader, or a packed member (dlcache pack, snapshot
 * --tar), read by range of its chunk through chunks.c's shared handle.
 * Blocks know nothing of the difference: both are cached, checked and read
 * ahead alike.
 *
 * Readahead.  A reader whose reads advance block after block (a read may
 * fall up to two blocks behind the furthest read, or skip one ahead:
 * DataLoader workers and the kernel's async reads reorder a little; with the
 * mount's kernel readahead raised, by up to two of its windows more) gets a
 * window, two blocks once it has advanced twice, doubling with every block
 * it advances, up to readahead_max.  Blocks in the window that the cache
 * does not hold are flown ahead on the readahead pool; their bytes stay in
 * their landed flight ("staged") until the reader takes them, so a reader
 * arriving early joins the flight.  Any other read resets the window and
 * drops the reader's staged blocks: a random reader reads only its blocks.
 *
 * Memory (the rule of budget.h).  A reader's blocks in memory and its
 * readahead are kept memory: given back only as the reader moves on, so
 * they are taken without waiting (dlc_budget_try_acquire), readahead below
 * ahead_limit, a reader's own block below the budget's kept ceiling (half
 * the limit).  A read runs on a source thread that already holds its
 * reply's buffer, and must not wait for more: a reader finding no room for
 * its block gives back its own oldest block and tries again, and failing
 * that reads without a buffer of its own, straight from the source into
 * the reply ("unbuffered": one source call per read, nothing offered to the
 * cache).  So no reader waits for memory that other waiting readers hold
 * (the budget's old deadlock: every reader keeping its blocks and waiting
 * for one more); a reader is slowed when memory is short, never stopped.
 *
 * Time (deadline.h).  A read is answered within source_timeout of its
 * arrival: its waits for flights end at its request's deadline (the flight
 * goes on for the others), its source calls end by it, so a failed
 * readahead or head read is read again only with the time the request has
 * left, and a file whose read failed for time fails its next source reads
 * at once for a second (failed_files.h).  Source timeouts stay -ETIMEDOUT
 * up to here (a flight's too); the reply is -EIO.
 *
 * INVARIANTS.  blocks->lock guards the flight list and every flight's
 * fields.  At most one flight per (inode, block) is listed; a flight is
 * referenced by the list while listed and by each waiter; the last
 * reference frees it.  A readahead flight names its reader (owner) while it
 * is staged for it; a reader that resets or closes clears its flights'
 * owner and unlists the landed ones, a flight landing without an owner
 * unlists itself.  reader->lock guards the reader's file, blocks in memory,
 * cache fd and window; blocks->lock may be taken under it (a reader taking
 * a landed readahead), never the reverse.  A reader is referenced by its open file and by each of
 * its readahead jobs.  Nothing here waits on the budget: every block buffer
 * is taken with a try, and a flight is listed only once its buffer is taken
 * (a reader's) or by readahead, whose job lands it with or without one, so
 * a reader waiting for a flight waits for I/O only.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlcache/blocks.h"
#include "dlcache/deadline.h"
#include "dlcache/fetch.h"
#include "dlcache/log.h"
#include "dlcache/pool.h"
#include "failed_files.h"

struct block_flight {
	uint32_t ino;
	uint32_t index;
	unsigned refs;
	bool listed;
	bool landed;
	bool ahead;                     /* flown by readahead */
	bool settling;                  /* landed from the source, its offer to the cache
					 * not done: it stays listed until then */
	int rc;
	struct dlc_blob *blob;          /* landed with rc 0: the block's bytes */
	struct dlc_block_reader *owner; /* ahead: the reader it is staged for, or NULL */
	struct dlc_blocks *blocks;
	struct block_flight *next;
};

struct dlc_blocks {
	struct dlc_block_source source;
	const struct dlc_snapshot *snapshot;
	struct dlc_cache *cache;
	struct dlc_stats *stats;
	struct dlc_budget *budget;
	uint64_t block_size;
	uint32_t readahead_blocks;      /* the window's cap, in blocks */
	uint32_t reorder;               /* blocks the kernel's requests may arrive out
					 * of order by, beyond one (see note_read) */
	unsigned held_blocks;           /* blocks a reader keeps in memory */
	uint64_t ahead_limit;           /* readahead only while the budget's use is below */
	struct dlc_pool *pool;          /* readahead fetches from the source */
	struct dlc_pool *local;         /* readahead of cached blocks (read whole and
					 * checked): the local disk's work */
	struct dlc_blob_spares *spares; /* the blocks' buffers, reused (fetch.h) */
	pthread_mutex_t lock;
	pthread_cond_t landed;          /* broadcast when a flight lands */
	struct block_flight *flights;   /* guarded by lock */
	struct dlc_failed_files failed; /* files the source did not answer lately */
};

/* Blocks a reader keeps in memory: three (parallel readers of one file, and
 * the kernel's async reads), and as many more as the kernel's requests may
 * arrive out of order by, up to HELD_MAX (blocks->held_blocks). */
#define HELD_MAX 16

struct dlc_block_reader {
	_Atomic unsigned refs;
	struct dlc_blocks *blocks;
	uint32_t ino;
	uint64_t size;
	uint32_t nblocks;
	pthread_mutex_t lock;
	bool opened;                    /* lock: source.open called (on the first source read) */
	void *handle;                   /* lock: what it gave */
	struct dlc_blob *held[HELD_MAX];        /* lock: blocks in memory, newest first;
						 * the first blocks->held_blocks used */
	uint32_t held_index[HELD_MAX];
	int fd;                         /* lock: a checked cache file, or -1 */
	uint32_t fd_index;
	uint32_t next_index;            /* lock: one past the furthest block read */
	unsigned advances;              /* lock: blocks advanced in a row */
	uint32_t window;                /* lock: readahead window in blocks, 0 = none */
	uint32_t ahead_until;           /* lock: blocks below are flown or cached */
	_Atomic bool read_once;         /* a read has come: the next has no head read */
};

static uint64_t block_len(const struct dlc_block_reader *reader, uint32_t index)
{
	uint64_t start = (uint64_t)index * reader->blocks->block_size;

	return reader->size - start < reader->blocks->block_size ? reader->size - start
								   : reader->blocks->block_size;
}

/*
 * How many put block buffers are kept for reuse: 32 MiB of them (8 blocks
 * of 4 MiB), at least one.  A reader's stream frees a block about as often
 * as its readahead takes one, so they circulate; the daemon's memory stays
 * within its budget plus these.  Measured on a 1 GiB first pass: 40,000
 * page faults with 32 or 64 MiB kept (287,000 with none).
 */
static unsigned spare_buffers(uint64_t block_size)
{
	uint64_t n = (32ull << 20) / block_size;

	return n ? (unsigned)n : 1;
}

struct dlc_blocks *dlc_blocks_create(const struct dlc_block_source *source,
				     const struct dlc_snapshot *snapshot,
				     struct dlc_cache *cache, struct dlc_stats *stats,
				     struct dlc_budget *budget, uint64_t block_size,
				     uint64_t readahead_max, uint64_t kernel_readahead)
{
	struct dlc_blocks *blocks = calloc(1, sizeof(*blocks));

	if (!blocks || block_size == 0 || block_size % 4096)
		goto fail;
	blocks->pool = dlc_pool_create(DLC_BLOCKS_READAHEAD_THREADS);
	blocks->local = dlc_pool_create(DLC_BLOCKS_LOCAL_THREADS);
	blocks->spares = dlc_blob_spares_create(block_size, spare_buffers(block_size));
	if (!blocks->pool || !blocks->local || !blocks->spares)
		goto fail;
	blocks->source = *source;
	blocks->snapshot = snapshot;
	blocks->cache = cache;
	blocks->stats = stats;
	blocks->budget = budget;
	blocks->block_size = block_size;
	blocks->readahead_blocks = (uint32_t)(readahead_max / block_size);
	/*
	 * The kernel keeps up to two of its readahead windows in flight, in
	 * requests the FUSE threads answer in any order: a request may come
	 * that many blocks behind the furthest one, and its block must still be
	 * in the reader's memory, or it is read again (from the source when the
	 * cache did not keep it: epochs over shards twice the cache read 1.25x
	 * their bytes from the source with a 4 MiB window and two held blocks).
	 */
	blocks->reorder = (uint32_t)((2 * kernel_readahead + block_size - 1) / block_size);
	blocks->held_blocks = 3 + blocks->reorder < HELD_MAX ? 3 + blocks->reorder : HELD_MAX;
	/*
	 * Readahead takes buffers only while the budget's use is below half its
	 * limit and below two windows: one reader gets its whole window, several
	 * share two (four readers of 1 GiB shards that read slower than the
	 * link filled four windows of 64 MiB: 292 MiB of the budget and 360 MiB
	 * of RSS growth, against the 300).
	 */
	blocks->ahead_limit = budget ? budget->limit / 2 : 0;
	if (budget && 2 * readahead_max < blocks->ahead_limit)
		blocks->ahead_limit = 2 * readahead_max;
	pthread_mutex_init(&blocks->lock, NULL);
	dlc_deadline_cond_init(&blocks->landed);
	dlc_failed_files_init(&blocks->failed);
	if (cache)
		dlc_cache_set_block_size(cache, block_size);
	return blocks;
fail:
	if (blocks) {
		dlc_pool_stop(blocks->pool, 0);
		dlc_pool_stop(blocks->local, 0);
		dlc_blob_spares_close(blocks->spares);
	}
	free(blocks);
	return NULL;
}

void dlc_blocks_stop(struct dlc_blocks *blocks)
{
	if (blocks && blocks->pool) {
		dlc_pool_stop(blocks->pool, 2000);
		blocks->pool = NULL;
	}
	if (blocks && blocks->local) {
		dlc_pool_stop(blocks->local, 2000);
		blocks->local = NULL;
	}
}

void dlc_blocks_free(struct dlc_blocks *blocks)
{
	if (!blocks)
		return;
	dlc_blocks_stop(blocks);
	/* Staged blocks of readers closed by now are already unlisted. */
	while (blocks->flights) {
		struct block_flight *f = blocks->flights;

		blocks->flights = f->next;
		dlc_blob_put(f->blob);
		free(f);
	}
	/* Blobs still held (by open handles' readers) free their buffers. */
	dlc_blob_spares_close(blocks->spares);
	pthread_cond_destroy(&blocks->landed);
	pthread_mutex_destroy(&blocks->lock);
	dlc_failed_files_destroy(&blocks->failed);
	free(blocks);
}

/* A blob for a block, kept memory (budget.h): taken only if the budget's use
 * stays at or below ceiling, never waited for; NULL when there is no room. */
static struct dlc_blob *blob_new(struct dlc_blocks *blocks, uint64_t size, uint64_t ceiling)
{
	struct dlc_budget *budget = blocks->budget;
	struct dlc_blob *blob;

	if (budget && !dlc_budget_try_acquire(budget, size, ceiling))
		return NULL;
	blob = dlc_blob_spares_take(blocks->spares, size);   /* + 1 byte: see load_block */
	if (!blob) {
		dlc_budget_release(budget, size);
		return NULL;
	}
	blob->budget = budget;
	return blob;
}

/* Lock held. */
static struct block_flight *find_flight(struct dlc_blocks *blocks, uint32_t ino, uint32_t index)
{
	for (struct block_flight *f = blocks->flights; f; f = f->next)
		if (f->ino == ino && f->index == index)
			return f;
	return NULL;
}

/* Drops one reference; lock held. */
static void put_flight(struct block_flight *f)
{
	if (--f->refs == 0) {
		dlc_blob_put(f->blob);
		free(f);
	}
}

/* Takes f out of the list, dropping the list's reference, when the caller
 * holds one of its own (so f lives on); lock held. */
static void unlist_held(struct dlc_blocks *blocks, struct block_flight *f)
{
	if (!f->listed)
		return;
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
 * is still running: then it only loses its owner, and settle() unlists it
 * once the cache holds the block (unlisted before, the block would be read
 * from the source again by the next reader to want it).  One staged for
 * another reader of the file stays listed for that reader.  Lock held, and
 * a reference of the caller's besides the list's.
 */
static void take(struct dlc_blocks *blocks, struct block_flight *f,
		 const struct dlc_block_reader *reader)
{
	if (!f->ahead || (f->owner != reader && f->owner != NULL))
		return;
	if (f->settling)
		f->owner = NULL;
	else
		unlist_held(blocks, f);
}

/* unlist_held, when the list's may be the last reference. */
static void unlist(struct dlc_blocks *blocks, struct block_flight *f)
{
	if (!f->listed)
		return;
	f->refs++;
	unlist_held(blocks, f);
	put_flight(f);
}

/* The reader's source handle, opened on first use, outside reader->lock (a
 * hung open would hold the reader's every read past its deadline); of two
 * first uses at once, the later one's handle is closed. */
static int source_handle(struct dlc_block_reader *reader, void **out)
{
	struct dlc_blocks *blocks = reader->blocks;
	void *handle = NULL, *extra = NULL;
	int rc;

	pthread_mutex_lock(&reader->lock);
	if (reader->opened) {
		*out = reader->handle;
		pthread_mutex_unlock(&reader->lock);
		return 0;
	}
	pthread_mutex_unlock(&reader->lock);
	rc = blocks->source.open(blocks->source.ctx, reader->ino, &handle);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&reader->lock);
	if (reader->opened) {
		extra = handle;
	} else {
		reader->handle = handle;
		reader->opened = true;
	}
	*out = reader->handle;
	pthread_mutex_unlock(&reader->lock);
	if (extra && blocks->source.close)
		blocks->source.close(blocks->source.ctx, extra);
	return 0;
}

/* The reader's file is not the snapshot's size on the source: logs and
 * counts it; -EIO. */
static int changed_size(struct dlc_block_reader *reader)
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
 * Reads [pos, pos + n) of the reader's file straight from the source into
 * dst: the unbuffered read of a reader that found no room for its block
 * (see "Memory" above).  A read reaching the file's end asks for one byte
 * past it as well, as a block read does, so that a file that grew is seen
 * too.  Nothing is offered to the cache (it takes checked whole blocks).
 * 0 or -EIO.
 */
static int read_unbuffered(struct dlc_block_reader *reader, char *dst, uint64_t pos, size_t n)
{
	struct dlc_blocks *blocks = reader->blocks;
	void *handle;
	ssize_t got;
	char past;
	int rc;

	rc = source_handle(reader, &handle);
	if (rc < 0)
		return rc;
	/* The source logged and counted a failure, and counts the bytes. */
	got = blocks->source.read(blocks->source.ctx, reader->ino, handle, dst, n, pos);
	if (got < 0)
		return got == -ETIMEDOUT ? -ETIMEDOUT : -EIO;
	if ((uint64_t)got != n)
		return changed_size(reader);
	if (pos + n == reader->size) {
		got = blocks->source.read(blocks->source.ctx, reader->ino, handle, &past, 1, pos + n);
		if (got < 0)
			return got == -ETIMEDOUT ? -ETIMEDOUT : -EIO;
		if (got > 0)
			return changed_size(reader);
	}
	dlc_stats_add(blocks->stats, DLC_STAT_UNBUFFERED_READS, 1);
	return 0;
}

/*
 * Loads block index of the reader's file into blob (its exact length): from
 * the cache if it holds a good copy, else from the source in one read,
 * offered to the cache.  0 or -EIO.
 */
static int load_block(struct dlc_block_reader *reader, uint32_t index, struct dlc_blob *blob,
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
	rc = source_handle(reader, &handle);
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
		return changed_size(reader);
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
static void land(struct dlc_blocks *blocks, struct block_flight *f, int rc)
{
	f->rc = rc;
	f->landed = true;
	if (rc < 0)
		unlist_held(blocks, f);
	pthread_cond_broadcast(&blocks->landed);
}

/* After the offer of a landed flight: a reader's own flight, or readahead
 * nobody waits for any more, leaves the list; staged readahead stays. */
static void settle(struct dlc_blocks *blocks, struct block_flight *f)
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
	settle(blocks, f);
	put_flight(f);
	pthread_mutex_unlock(&blocks->lock);
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
static void offer_later(struct dlc_blocks *blocks, struct block_flight *f)
{
	struct dlc_pool_job job = { run_offer, drop_offer, f };

	if (!blocks->pool || dlc_pool_submit(blocks->pool, &job) < 0)
		offer_and_settle(blocks, f);
}

/*
 * Waits for listed flight f to land and takes its bytes for the reader: its
 * rc, and when 0 one blob reference in *out; -ETIMEDOUT when the request's
 * deadline (deadline.h) comes first: the flight goes on for its other
 * readers (and, readahead, stays staged for this one).  Lock held.
 */
static int join(struct dlc_blocks *blocks, struct block_flight *f,
		const struct dlc_block_reader *reader, struct dlc_blob **out)
{
	uint64_t deadline = dlc_deadline_get();
	struct timespec until = dlc_deadline_timespec(deadline);
	int rc;

	f->refs++;
	while (!f->landed) {
		if (!deadline) {
			pthread_cond_wait(&blocks->landed, &blocks->lock);
		} else if (pthread_cond_timedwait(&blocks->landed, &blocks->lock, &until) == ETIMEDOUT &&
			   !f->landed) {
			put_flight(f);
			return -ETIMEDOUT;
		}
	}
	rc = f->rc;
	if (rc == 0 && f->blob)
		*out = dlc_blob_get(f->blob);
	take(blocks, f, reader);        /* the reader holds it now */
	put_flight(f);
	return *out || rc < 0 ? rc : -EIO;
}

/*
 * A buffer for block index of the reader's own flight, without waiting
 * (see "Memory" above): when the budget has no room, the reader gives back
 * its oldest block in memory and tries once more.  NULL when there is still
 * none.
 */
static struct dlc_blob *reader_blob(struct dlc_block_reader *reader, uint32_t index)
{
	struct dlc_blocks *blocks = reader->blocks;
	uint64_t ceiling = dlc_budget_kept_ceiling(blocks->budget);
	struct dlc_blob *blob = blob_new(blocks, block_len(reader, index), ceiling);
	struct dlc_blob *oldest = NULL;

	if (blob || !blocks->budget)
		return blob;
	pthread_mutex_lock(&reader->lock);
	for (unsigned i = blocks->held_blocks; i-- > 0;) {
		if (reader->held[i]) {
			oldest = reader->held[i];
			reader->held[i] = NULL;
			break;
		}
	}
	pthread_mutex_unlock(&reader->lock);
	if (!oldest)
		return NULL;
	dlc_blob_put(oldest);
	return blob_new(blocks, block_len(reader, index), ceiling);
}

/*
 * Block index of the reader's file, one flight per block: 0 with one blob
 * reference in *out; 0 with *out NULL when the budget has no room for the
 * block (the caller reads unbuffered); or -errno.  Waits for flights (I/O),
 * never for memory.
 */
static int get_block(struct dlc_block_reader *reader, uint32_t index, struct dlc_blob **out)
{
	struct dlc_blocks *blocks = reader->blocks;
	struct dlc_blob *blob = NULL;
	bool from_source = false, joined_ahead = false;
	struct block_flight *f;
	int rc;

	*out = NULL;
	pthread_mutex_lock(&blocks->lock);
	for (;;) {
		f = find_flight(blocks, reader->ino, index);
		if (f) {
			bool ahead = f->ahead;

			rc = join(blocks, f, reader, out);
			/* A readahead that failed (no room, the source) must not
			 * fail the reader: it reads the block itself, after one
			 * more look (another reader may have taken over), while
			 * the request has time (its calls end by its deadline). */
			if (!(ahead && rc < 0) || joined_ahead || rc == -ETIMEDOUT ||
			    dlc_deadline_passed()) {
				pthread_mutex_unlock(&blocks->lock);
				dlc_blob_put(blob);
				return rc;
			}
			joined_ahead = true;
			continue;
		}
		if (blob)
			break;
		/* The buffer before the flight is listed: a reader that joins
		 * a listed flight waits for its I/O, never for memory. */
		pthread_mutex_unlock(&blocks->lock);
		blob = reader_blob(reader, index);
		if (!blob)
			return 0;
		pthread_mutex_lock(&blocks->lock);
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		pthread_mutex_unlock(&blocks->lock);
		dlc_blob_put(blob);
		return -ENOMEM;
	}
	f->ino = reader->ino;
	f->index = index;
	f->blocks = blocks;
	f->blob = blob;
	f->refs = 2;            /* the list's and ours */
	f->listed = true;
	f->next = blocks->flights;
	blocks->flights = f;
	pthread_mutex_unlock(&blocks->lock);

	rc = load_block(reader, index, f->blob, &from_source);

	pthread_mutex_lock(&blocks->lock);
	land(blocks, f, rc);
	if (rc == 0)
		*out = dlc_blob_get(f->blob);
	if (rc < 0 || !from_source) {
		settle(blocks, f);
		put_flight(f);
		pthread_mutex_unlock(&blocks->lock);
		return rc;
	}
	f->settling = true;
	pthread_mutex_unlock(&blocks->lock);
	/* The reader is answered first. */
	offer_later(blocks, f);
	return 0;
}

static void reader_put(struct dlc_block_reader *reader)
{
	if (atomic_fetch_sub(&reader->refs, 1) != 1)
		return;
	for (int i = 0; i < HELD_MAX; i++)
		dlc_blob_put(reader->held[i]);
	if (reader->fd >= 0)
		close(reader->fd);
	if (reader->opened && reader->blocks->source.close)
		reader->blocks->source.close(reader->blocks->source.ctx, reader->handle);
	pthread_mutex_destroy(&reader->lock);
	free(reader);
}

/* Forgets the reader's staged blocks (reset or close). */
static void drop_staged(struct dlc_block_reader *reader)
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
			unlist(blocks, f);
	}
	pthread_mutex_unlock(&blocks->lock);
}

struct ahead_job {
	struct dlc_block_reader *reader;        /* one reference */
	struct block_flight *flight;            /* one reference */
};

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
	bool from_source = false, wanted;
	int rc = -ENOMEM;

	pthread_mutex_lock(&blocks->lock);
	wanted = f->owner != NULL;
	pthread_mutex_unlock(&blocks->lock);
	if (wanted)
		f->blob = blob_new(blocks, block_len(reader, f->index), blocks->ahead_limit);
	if (f->blob)
		rc = load_block(reader, f->index, f->blob, &from_source);
	if (rc == 0)
		dlc_stats_add(blocks->stats, DLC_STAT_READAHEADS, 1);
	pthread_mutex_lock(&blocks->lock);
	land(blocks, f, rc);
	if (rc < 0 || !from_source) {
		settle(blocks, f);
		put_flight(f);
		pthread_mutex_unlock(&blocks->lock);
	} else {
		f->settling = true;
		pthread_mutex_unlock(&blocks->lock);
		offer_and_settle(blocks, f);
	}
	reader_put(reader);
	free(job);
}

static void drop_ahead(void *arg)
{
	struct ahead_job *job = arg;
	struct dlc_blocks *blocks = job->reader->blocks;

	pthread_mutex_lock(&blocks->lock);
	land(blocks, job->flight, -ESHUTDOWN);
	put_flight(job->flight);
	pthread_mutex_unlock(&blocks->lock);
	reader_put(job->reader);
	free(job);
}

/*
 * Lists a readahead flight of block index for the reader, not started yet:
 * the job that starts it (submit_ahead), or NULL with *skip true when
 * nothing is to be read (the block is checked in this mount, or in
 * flight), or with *skip false when the budget has no room (try later).
 * Readers wanting the block meanwhile wait for the listed flight.
 */
static struct ahead_job *list_ahead(struct dlc_block_reader *reader, uint32_t index, bool *skip)
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
	if (blocks->budget && !dlc_budget_has_room(blocks->budget, block_len(reader, index),
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
	if (find_flight(blocks, reader->ino, index)) {
		pthread_mutex_unlock(&blocks->lock);
		free(job);
		free(f);
		*skip = true;
		return NULL;
	}
	*f = (struct block_flight) { .ino = reader->ino, .index = index, .refs = 2, .listed = true,
				     .ahead = true, .owner = reader, .blocks = blocks,
				     .next = blocks->flights };
	blocks->flights = f;
	pthread_mutex_unlock(&blocks->lock);
	atomic_fetch_add(&reader->refs, 1);
	*job = (struct ahead_job) { reader, f };
	return job;
}

/* Starts a flight listed by list_ahead. */
static void submit_ahead(struct ahead_job *job)
{
	struct dlc_blocks *blocks = job->reader->blocks;
	struct dlc_pool_job pool_job = { run_ahead, drop_ahead, job };

	/* A block the cache holds is read from the local disk, which serves
	 * a few streams faster than many; others wait on the source. */
	if (dlc_pool_submit(blocks->cache && dlc_cache_block_contains(blocks->cache, job->reader->ino,
								      job->flight->index)
			    ? blocks->local : blocks->pool, &pool_job) < 0)
		drop_ahead(job);
}

/*
 * Flies block index ahead of the reader unless the cache holds it checked
 * or it is in flight.  False when the budget has no room for it (try later).
 */
static bool fly_ahead(struct dlc_block_reader *reader, uint32_t index)
{
	bool skip;
	struct ahead_job *job = list_ahead(reader, index, &skip);

	if (job)
		submit_ahead(job);
	return job || skip;
}

/*
 * Watches the reader's offsets (see the readahead paragraph above) and
 * flies the blocks of its window that are not flown yet.
 */
static void note_read(struct dlc_block_reader *reader, uint32_t first, uint32_t last)
{
	struct dlc_blocks *blocks = reader->blocks;
	uint32_t from, to;
	bool sequential;

	pthread_mutex_lock(&reader->lock);
	sequential = (uint64_t)first + 2 + blocks->reorder >= reader->next_index &&
		     (uint64_t)first <= (uint64_t)reader->next_index + 1 + blocks->reorder;
	if (!sequential) {
		bool had_window = reader->window > 0;

		reader->advances = 0;
		reader->window = 0;
		reader->ahead_until = 0;
		reader->next_index = last + 1;
		pthread_mutex_unlock(&reader->lock);
		if (had_window)
			drop_staged(reader);
		return;
	}
	if (last + 1 > reader->next_index) {
		reader->advances += last + 1 - reader->next_index;
		reader->next_index = last + 1;
		if (reader->advances >= 2 && blocks->readahead_blocks) {
			reader->window = reader->window ? reader->window * 2 : 2;
			if (reader->window > blocks->readahead_blocks)
				reader->window = blocks->readahead_blocks;
		}
	}
	from = reader->ahead_until > reader->next_index ? reader->ahead_until : reader->next_index;
	to = reader->next_index + reader->window;
	if (to > reader->nblocks)
		to = reader->nblocks;
	if (from < to)
		reader->ahead_until = to;
	pthread_mutex_unlock(&reader->lock);

	for (uint32_t i = from; i < to; i++) {
		if (!fly_ahead(reader, i)) {
			/* No room in the budget now: the next read tries again. */
			pthread_mutex_lock(&reader->lock);
			if (reader->ahead_until > i)
				reader->ahead_until = i;
			pthread_mutex_unlock(&reader->lock);
			break;
		}
	}
}

static struct dlc_blob *take_landed(struct dlc_block_reader *reader, uint32_t index);
static void hold(struct dlc_block_reader *reader, uint32_t index, struct dlc_blob *blob);
static struct dlc_blob *hold_locked(struct dlc_block_reader *reader, uint32_t index,
				    struct dlc_blob *blob);

/* Copies [off, off + len) of block index from the reader's memory, a landed
 * readahead, or the file's checked data file; false when none has it. */
static bool serve_local(struct dlc_block_reader *reader, uint32_t index, char *dst, uint64_t off,
			size_t len)
{
	struct dlc_blocks *blocks = reader->blocks;
	bool served = false;
	int fd;

	pthread_mutex_lock(&reader->lock);
	for (unsigned i = 0; i < blocks->held_blocks; i++) {
		if (reader->held[i] && reader->held_index[i] == index) {
			memcpy(dst, reader->held[i]->data + off, len);
			served = true;
			break;
		}
	}
	if (!served) {
		/* Readahead landed for this block: take it (it was read and
		 * checked once already; reading its cache file again would
		 * read it twice). */
		struct dlc_blob *blob = take_landed(reader, index);

		if (blob) {
			/* Held before the lock goes: a concurrent read of the same
			 * block (the kernel's requests straddle blocks) finds it
			 * here rather than a flight no longer listed, and would
			 * read it from the source again. */
			memcpy(dst, blob->data + off, len);
			blob = hold_locked(reader, index, blob);
			pthread_mutex_unlock(&reader->lock);
			dlc_blob_put(blob);
			return true;
		}
	}
	if (!served && blocks->cache) {
		if (reader->fd < 0 || reader->fd_index != index) {
			fd = dlc_cache_block_open_checked(blocks->cache, reader->ino, index);
			if (fd >= 0) {
				if (reader->fd >= 0)
					close(reader->fd);
				reader->fd = fd;
				reader->fd_index = index;
				dlc_stats_add(blocks->stats, DLC_STAT_BLOCK_HITS, 1);
			}
		}
		if (reader->fd >= 0 && reader->fd_index == index) {
			/* The fd is on the file's data file: the block is at its offset. */
			uint64_t start = (uint64_t)index * blocks->block_size + off;
			size_t done = 0;

			while (done < len) {
				ssize_t n = pread(reader->fd, dst + done, len - done, (off_t)(start + done));

				if (n < 0 && errno == EINTR)
					continue;
				if (n <= 0)
					break;
				done += (size_t)n;
			}
			served = done == len;
			if (served)
				dlc_stats_add(blocks->stats, DLC_STAT_BYTES_FROM_CACHE, len);
			else {
				/* Gone or cut behind us: the flight path checks it again. */
				close(reader->fd);
				reader->fd = -1;
			}
		}
	}
	pthread_mutex_unlock(&reader->lock);
	return served;
}

/* Keeps blob (taken) as the reader's newest block in memory; returns the
 * oldest, which it no longer keeps, to put.  reader->lock held. */
static struct dlc_blob *hold_locked(struct dlc_block_reader *reader, uint32_t index,
				    struct dlc_blob *blob)
{
	struct dlc_blob *old = reader->held[reader->blocks->held_blocks - 1];

	for (unsigned i = reader->blocks->held_blocks - 1; i > 0; i--) {
		reader->held[i] = reader->held[i - 1];
		reader->held_index[i] = reader->held_index[i - 1];
	}
	reader->held[0] = blob;
	reader->held_index[0] = index;
	return old;
}

/* hold_locked, taking the lock. */
static void hold(struct dlc_block_reader *reader, uint32_t index, struct dlc_blob *blob)
{
	pthread_mutex_lock(&reader->lock);
	blob = hold_locked(reader, index, blob);
	pthread_mutex_unlock(&reader->lock);
	dlc_blob_put(blob);
}

int dlc_blocks_open(struct dlc_blocks *blocks, uint32_t ino, struct dlc_block_reader **out)
{
	const struct dlc_node *node = dlc_snapshot_node(blocks->snapshot, ino);
	struct dlc_block_reader *reader;

	*out = NULL;
	if (!node)
		return -ENOENT;
	reader = calloc(1, sizeof(*reader));
	if (!reader)
		return -ENOMEM;
	atomic_init(&reader->refs, 1);
	reader->blocks = blocks;
	reader->ino = ino;
	reader->size = node->size;
	reader->nblocks = (uint32_t)((node->size + blocks->block_size - 1) / blocks->block_size);
	reader->fd = -1;
	pthread_mutex_init(&reader->lock, NULL);
	if (blocks->cache) {
		dlc_cache_consume(blocks->cache, ino);
		dlc_cache_hit(blocks->cache, ino);      /* a no-op unless cached */
	}
	*out = reader;
	return 0;
}

/*
 * The head read: the reader's first read that waits, when its block must come from
 * the source, reads just the bytes asked for from the source, then flies
 * the whole block ahead (staged for the reader's next read), so that the
 * first byte of a shard waits for one small call instead of a whole block
 * (over 10 ms a call and 200 MB/s, 4 MiB blocks: 10 ms instead of 31).
 * The small call goes first, so that on a shared link it is not queued
 * behind the block.  True when dst holds the n bytes at pos; false when the
 * caller must read the block (not the first read, the block is cached or
 * in flight, a read as long as the block, or the small call failed).
 */
static bool read_head(struct dlc_block_reader *reader, uint32_t index, char *dst, uint64_t pos,
		      size_t n)
{
	struct dlc_blocks *blocks = reader->blocks;
	struct ahead_job *job;
	void *handle = NULL;
	ssize_t got = -1;
	bool skip;
	int rc;

	/* Not the file's end: a block read there also finds a file that
	 * changed size on the source, and must. */
	if (atomic_exchange(&reader->read_once, true) || n >= block_len(reader, index) ||
	    pos + n >= reader->size ||
	    (blocks->cache && dlc_cache_block_contains(blocks->cache, reader->ino, index)))
		return false;
	/* The block's flight is listed first, so that other readers of the
	 * block wait for it rather than make head reads of their own. */
	job = list_ahead(reader, index, &skip);
	if (!job)
		return false;
	rc = source_handle(reader, &handle);
	/* The source logged and counted a failure, and counts the bytes. */
	if (rc == 0)
		got = blocks->source.read(blocks->source.ctx, reader->ino, handle, dst, n, pos);
	if (got != (ssize_t)n) {
		/* The caller reads the block itself (and finds a changed file
		 * once, not twice); readers waiting here join that read. */
		drop_ahead(job);
		return false;
	}
	submit_ahead(job);
	dlc_stats_add(blocks->stats, DLC_STAT_HEAD_READS, 1);
	return true;
}

ssize_t dlc_blocks_read(struct dlc_block_reader *reader, void *buf, size_t len, uint64_t off)
{
	struct dlc_blocks *blocks = reader->blocks;
	uint64_t end, pos;
	uint32_t first, last;

	if (off >= reader->size || len == 0)
		return 0;
	end = reader->size - off < len ? reader->size : off + len;
	first = (uint32_t)(off / blocks->block_size);
	last = (uint32_t)((end - 1) / blocks->block_size);
	/* A read dlc_blocks_try_read could not serve was noted there already:
	 * noting it again changes nothing (the reader's next_index is past it). */
	note_read(reader, first, last);
	for (pos = off; pos < end;) {
		uint32_t index = (uint32_t)(pos / blocks->block_size);
		uint64_t in_block = pos - (uint64_t)index * blocks->block_size;
		uint64_t block_end = (uint64_t)index * blocks->block_size + block_len(reader, index);
		size_t n = (size_t)((block_end < end ? block_end : end) - pos);
		struct dlc_blob *blob = NULL;
		int rc;

		if (serve_local(reader, index, (char *)buf + (pos - off), in_block, n)) {
			pos += n;
			continue;
		}
		/* The source did not answer a read of this file a moment ago
		 * (failed_files.h), or an earlier block used up the request's
		 * time. */
		if (dlc_failed_files_recent(&blocks->failed, reader->ino))
			return -EIO;
		if (dlc_deadline_passed()) {
			dlc_failed_files_note(&blocks->failed, reader->ino);
			return -EIO;
		}
		if (read_head(reader, index, (char *)buf + (pos - off), pos, n)) {
			pos += n;
			continue;
		}
		rc = dlc_deadline_passed() ? -ETIMEDOUT : get_block(reader, index, &blob);
		if (rc == 0 && !blob)
			rc = read_unbuffered(reader, (char *)buf + (pos - off), pos, n);
		if (rc < 0) {
			/* Failed for time (this request's, or a flight's). */
			if (rc == -ETIMEDOUT || (rc != -ENOMEM && dlc_deadline_passed()))
				dlc_failed_files_note(&blocks->failed, reader->ino);
			return rc == -ENOMEM ? -ENOMEM : -EIO;
		}
		if (blob) {
			memcpy((char *)buf + (pos - off), blob->data + in_block, n);
			hold(reader, index, blob);
		}
		pos += n;
	}
	return (ssize_t)(end - off);
}

/* A landed flight of block index, taken without waiting; NULL if none. */
static struct dlc_blob *take_landed(struct dlc_block_reader *reader, uint32_t index)
{
	struct dlc_blocks *blocks = reader->blocks;
	struct dlc_blob *blob = NULL;
	struct block_flight *f;

	pthread_mutex_lock(&blocks->lock);
	f = find_flight(blocks, reader->ino, index);
	if (f && f->landed && f->rc == 0 && f->blob) {
		blob = dlc_blob_get(f->blob);
		f->refs++;
		take(blocks, f, reader);        /* the reader holds it now */
		put_flight(f);
	}
	pthread_mutex_unlock(&blocks->lock);
	return blob;
}

bool dlc_blocks_try_read(struct dlc_block_reader *reader, void *buf, size_t len, uint64_t off,
			 ssize_t *count)
{
	struct dlc_blocks *blocks = reader->blocks;
	uint64_t end, pos;

	if (off >= reader->size || len == 0) {
		*count = 0;
		return true;
	}
	end = reader->size - off < len ? reader->size : off + len;
	note_read(reader, (uint32_t)(off / blocks->block_size), (uint32_t)((end - 1) / blocks->block_size));
	for (pos = off; pos < end;) {
		uint32_t index = (uint32_t)(pos / blocks->block_size);
		uint64_t in_block = pos - (uint64_t)index * blocks->block_size;
		uint64_t block_end = (uint64_t)index * blocks->block_size + block_len(reader, index);
		size_t n = (size_t)((block_end < end ? block_end : end) - pos);

		/* serve_local takes a landed readahead too. */
		if (!serve_local(reader, index, (char *)buf + (pos - off), in_block, n))
			return false;
		pos += n;
	}
	*count = (ssize_t)(end - off);
	return true;
}

void dlc_blocks_close(struct dlc_block_reader *reader)
{
	if (!reader)
		return;
	drop_staged(reader);
	reader_put(reader);
}
