/*
 * blocks.c - the read path of files larger than cache_max_file: blocks,
 * one flight per block, and readahead per open file (see blocks.h).  The
 * flights and readahead jobs live in flights.c, the stream of announced
 * shards in shards.c, the state they share in blocks_private.h.
 *
 * A read maps to the blocks it covers; each block is served from, in
 * order: the reader's last two blocks in memory; the cache file of a block
 * checked earlier in this mount (opened by its stamp, read by range); a
 * flight.  A flight loads one block: from the cache (read whole and checked
 * against its xxh3: the first use in a mount) or, failing that, from the
 * source in one call, then offers it to the cache (cache_blocks.c decides).
 * Readers wanting a block in flight wait for it and share its bytes.
 *
 * The source is fetch_source.c's (struct dlc_block_source): a tree's file, opened
 * by path once per reader, or a packed member (dlcache pack, snapshot
 * --tar), read by range of its chunk through chunks.c's shared handle.
 * Blocks know nothing of the difference: both are cached, checked and read
 * ahead alike.
 *
 * Readahead.  A reader whose reads advance block after block (a read may
 * fall up to two blocks behind the furthest read, or skip one ahead:
 * DataLoader workers and the kernel's async reads reorder a little; with the
 * mount's kernel readahead raised, by up to two of its windows more) gets a
 * window, two blocks once it has advanced twice or at its first read of
 * block 0, doubling with every block it advances, up to readahead_max.  Blocks in the window that the cache
 * does not hold are flown ahead on the readahead pool; their bytes stay in
 * their landed flight ("staged") until the reader takes them, so a reader
 * arriving early joins the flight.  Any other read resets the window and
 * drops the reader's staged blocks: a random reader reads only its blocks.
 *
 * Announced shards (`prefetch` lines on large files) are streamed ahead of
 * their readers by shards.c, through the same flights and readahead jobs
 * (flights.c); a reader of an announced file claims its plan entry at open
 * and gives it back at close.
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
 * goes on for the others; flights.c), its source calls end by it, so a
 * failed readahead or head read is read again only with the time the
 * request has left, and a file whose read failed for time fails its next
 * source reads at once for a second (failed_files.h), on the FUSE thread
 * already (dlc_blocks_try_read), so that the kernel's re-read of the failed
 * page does not queue behind hung calls with a deadline of its own.  Source timeouts stay
 * -ETIMEDOUT up to here (a flight's too); the reply is -EIO.
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
 * its readahead jobs.  blocks->lock also guards the shard plan, every
 * entry's fields, shard_bytes (the lens of the listed flights still
 * unclaimed, never above shard_limit but for one block) and reader->shard;
 * an entry is referenced by the plan and by its readers' shard pointers
 * (it leaves the plan only with no reader), its stream reader by the entry
 * and each of its jobs.  The stream is pumped (shards.c) without any
 * lock of the caller's held.  Nothing here waits on the budget: every block buffer
 * is taken with a try, and a flight is listed only once its buffer is taken
 * (a reader's) or by readahead, whose job lands it with or without one, so
 * a reader waiting for a flight waits for I/O only.
 * Verify builds check these at every release of either lock (flights.c:
 * dlc_flights_unlock, dlc_flights_wait, dlc_flights_reader_unlock).
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
#include "dlcache/log.h"
#include "dlcache/pool.h"
#include "blocks_private.h"

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
	blocks->shard_limit = (uint64_t)blocks->readahead_blocks * block_size;
	blocks->shards_tail = &blocks->shards;
	blocks->shard_window = 1;
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
	if (!blocks)
		return;
	/* No pump may submit to a pool stopped under it. */
	pthread_mutex_lock(&blocks->lock);
	blocks->stopping = true;
	while (blocks->pumping)
		dlc_flights_wait(blocks);
	dlc_flights_unlock(blocks);
	if (blocks->pool) {
		dlc_pool_stop(blocks->pool, 2000);
		blocks->pool = NULL;
	}
	if (blocks->local) {
		dlc_pool_stop(blocks->local, 2000);
		blocks->local = NULL;
	}
}

void dlc_blocks_free(struct dlc_blocks *blocks)
{
	if (!blocks)
		return;
	dlc_blocks_stop(blocks);
	/* Every reader is closed: the plan's entries hold only their streams. */
	dlc_shards_release(blocks->shards);
	blocks->shards = NULL;
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

	rc = dlc_flights_source_handle(reader, &handle);
	if (rc < 0)
		return rc;
	/* The source logged and counted a failure, and counts the bytes. */
	got = blocks->source.read(blocks->source.ctx, reader->ino, handle, dst, n, pos);
	if (got < 0)
		return got == -ETIMEDOUT ? -ETIMEDOUT : -EIO;
	if ((uint64_t)got != n)
		return dlc_flights_changed_size(reader);
	if (pos + n == reader->size) {
		got = blocks->source.read(blocks->source.ctx, reader->ino, handle, &past, 1, pos + n);
		if (got < 0)
			return got == -ETIMEDOUT ? -ETIMEDOUT : -EIO;
		if (got > 0)
			return dlc_flights_changed_size(reader);
	}
	dlc_stats_add(blocks->stats, DLC_STAT_UNBUFFERED_READS, 1);
	return 0;
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
	struct dlc_blob *blob = dlc_flights_blob_new(blocks, dlc_blocks_block_len(reader, index), ceiling);
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
	dlc_flights_reader_unlock(reader);
	if (!oldest)
		return NULL;
	dlc_blob_put(oldest);
	return dlc_flights_blob_new(blocks, dlc_blocks_block_len(reader, index), ceiling);
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
		f = dlc_flights_find(blocks, reader->ino, index);
		if (f) {
			bool ahead = f->ahead;
			struct block_flight *offer;

			rc = dlc_flights_join(blocks, f, reader, out, &offer);
			/* A readahead that failed (no room, the source) must not
			 * fail the reader: it reads the block itself, after one
			 * more look (another reader may have taken over), while
			 * the request has time (its calls end by its deadline). */
			if (!(ahead && rc < 0) || joined_ahead || rc == -ETIMEDOUT ||
			    dlc_deadline_passed()) {
				dlc_flights_unlock(blocks);
				if (offer)
					dlc_flights_offer_later(blocks, offer);
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
		dlc_flights_unlock(blocks);
		blob = reader_blob(reader, index);
		if (!blob)
			return 0;
		pthread_mutex_lock(&blocks->lock);
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		dlc_flights_unlock(blocks);
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
	dlc_flights_unlock(blocks);

	rc = dlc_flights_load_block(reader, index, f->blob, &from_source);

	pthread_mutex_lock(&blocks->lock);
	dlc_flights_land(blocks, f, rc);
	if (rc == 0)
		*out = dlc_blob_get(f->blob);
	if (rc < 0 || !from_source) {
		dlc_flights_settle(blocks, f);
		dlc_flights_put(f);
		dlc_flights_unlock(blocks);
		return rc;
	}
	f->settling = true;
	dlc_flights_unlock(blocks);
	/* The reader is answered first. */
	dlc_flights_offer_later(blocks, f);
	return 0;
}

/*
 * Flies block index ahead of the reader unless the cache holds it checked
 * or it is in flight.  False when the budget has no room for it (try later).
 */
static bool fly_ahead(struct dlc_block_reader *reader, uint32_t index)
{
	bool skip;
	struct ahead_job *job = dlc_flights_list_ahead(reader, index, false, &skip);

	if (job)
		dlc_flights_submit_ahead(job);
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
		dlc_flights_reader_unlock(reader);
		if (had_window)
			dlc_flights_drop_staged(reader);
		return;
	}
	/* An announced file's stream goes on ahead of its sequential reader
	 * (reader->shard is set at open and cleared at close, when no read
	 * runs: the pointer needs no lock, the entry does). */
	if (reader->shard) {
		pthread_mutex_lock(&blocks->lock);
		if (reader->shard->next_index < last + 1)
			reader->shard->next_index = last + 1;
		dlc_flights_unlock(blocks);
	}
	if (last + 1 > reader->next_index) {
		reader->advances += last + 1 - reader->next_index;
		reader->next_index = last + 1;
		/* A read from offset 0 opens the window at once: a file read
		 * from its start is read whole far more often than not (a tar
		 * shard), and waiting for a second block left half of a 4-8
		 * block shard to serial round trips. */
		if ((reader->advances >= 2 || first == 0) && blocks->readahead_blocks) {
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
	dlc_flights_reader_unlock(reader);

	for (uint32_t i = from; i < to; i++) {
		if (!fly_ahead(reader, i)) {
			/* No room in the budget now: the next read tries again. */
			pthread_mutex_lock(&reader->lock);
			if (reader->ahead_until > i)
				reader->ahead_until = i;
			dlc_flights_reader_unlock(reader);
			break;
		}
	}
}

static struct dlc_blob *take_landed(struct dlc_block_reader *reader, uint32_t index,
				    struct block_flight **offer);
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
		struct block_flight *offer;
		struct dlc_blob *blob = take_landed(reader, index, &offer);

		if (blob) {
			/* Held before the lock goes: a concurrent read of the same
			 * block (the kernel's requests straddle blocks) finds it
			 * here rather than a flight no longer listed, and would
			 * read it from the source again. */
			memcpy(dst, blob->data + off, len);
			blob = hold_locked(reader, index, blob);
			dlc_flights_reader_unlock(reader);
			dlc_blob_put(blob);
			if (offer)
				dlc_flights_offer_later(blocks, offer);
			return true;
		}
	}
	if (!served && blocks->cache) {
		if (reader->fd < 0 || reader->fd_index != index) {
			if (dlc_cache_block_open_checked(blocks->cache, reader->ino, index, &fd) ==
			    DLC_CACHE_OPENED) {
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
	dlc_flights_reader_unlock(reader);
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
	dlc_flights_reader_unlock(reader);
	dlc_blob_put(blob);
}

int dlc_blocks_open(struct dlc_blocks *blocks, uint32_t ino, struct dlc_block_reader **out)
{
	const struct dlc_node *node = dlc_snapshot_node(blocks->snapshot, ino);
	struct dlc_block_reader *reader;
	struct shard *gone;

	*out = NULL;
	if (!node)
		return -ENOENT;
	reader = dlc_flights_reader_new(blocks, ino, node->size);
	if (!reader)
		return -ENOMEM;
	if (blocks->cache)
		dlc_cache_note_read(blocks->cache, ino, true);  /* its hit: a no-op unless cached */
	pthread_mutex_lock(&blocks->lock);
	gone = dlc_shards_claim(blocks, reader);
	dlc_flights_unlock(blocks);
	dlc_shards_release(gone);
	dlc_shards_pump_if_due(blocks);
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
	if (atomic_exchange(&reader->read_once, true) || n >= dlc_blocks_block_len(reader, index) ||
	    pos + n >= reader->size ||
	    (blocks->cache && dlc_cache_block_contains(blocks->cache, reader->ino, index)))
		return false;
	/* The block's flight is listed first, so that other readers of the
	 * block wait for it rather than make head reads of their own. */
	job = dlc_flights_list_ahead(reader, index, false, &skip);
	if (!job)
		return false;
	rc = dlc_flights_source_handle(reader, &handle);
	/* The source logged and counted a failure, and counts the bytes. */
	if (rc == 0)
		got = blocks->source.read(blocks->source.ctx, reader->ino, handle, dst, n, pos);
	if (got != (ssize_t)n) {
		/* The caller reads the block itself (and finds a changed file
		 * once, not twice); readers waiting here join that read. */
		dlc_flights_drop_ahead(job);
		return false;
	}
	dlc_flights_submit_ahead(job);
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
		uint64_t block_end = (uint64_t)index * blocks->block_size + dlc_blocks_block_len(reader, index);
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
	/* Blocks taken from an announced file's stream made room for more. */
	dlc_shards_pump_if_due(blocks);
	return (ssize_t)(end - off);
}

/* A landed flight of block index, taken without waiting; NULL if none.
 * *offer as join's. */
static struct dlc_blob *take_landed(struct dlc_block_reader *reader, uint32_t index,
				    struct block_flight **offer)
{
	struct dlc_blocks *blocks = reader->blocks;
	struct dlc_blob *blob = NULL;
	struct block_flight *f;

	*offer = NULL;
	pthread_mutex_lock(&blocks->lock);
	f = dlc_flights_find(blocks, reader->ino, index);
	if (f && f->landed && f->rc == 0 && f->blob) {
		blob = dlc_blob_get(f->blob);
		f->refs++;
		*offer = dlc_flights_take(blocks, f, reader) ? f : NULL;    /* the reader holds it now */
		dlc_flights_put(f);
	}
	dlc_flights_unlock(blocks);
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
		uint64_t block_end = (uint64_t)index * blocks->block_size + dlc_blocks_block_len(reader, index);
		size_t n = (size_t)((block_end < end ? block_end : end) - pos);

		/* serve_local takes a landed readahead too. */
		if (!serve_local(reader, index, (char *)buf + (pos - off), in_block, n)) {
			/* The kernel reading a failed page again, at once, in a
			 * request with a fresh deadline (failed_files.h): answered
			 * here, before it queues behind the source's hung calls
			 * (whose hold would run out meanwhile). */
			if (!dlc_failed_files_recent(&blocks->failed, reader->ino))
				return false;
			*count = -EIO;
			return true;
		}
		pos += n;
	}
	*count = (ssize_t)(end - off);
	dlc_shards_pump_if_due(blocks);
	return true;
}

void dlc_blocks_note_failed(struct dlc_block_reader *reader)
{
	dlc_failed_files_note(&reader->blocks->failed, reader->ino);
}

void dlc_blocks_close(struct dlc_block_reader *reader)
{
	struct dlc_blocks *blocks;
	struct shard *gone = NULL;

	if (!reader)
		return;
	blocks = reader->blocks;
	dlc_flights_drop_staged(reader);
	if (reader->shard) {
		/* The last reader of an announced file is done with it: what
		 * its stream still stages is not wanted. */
		pthread_mutex_lock(&blocks->lock);
		gone = dlc_shards_unclaim(blocks, reader);
		dlc_flights_unlock(blocks);
		dlc_shards_release(gone);
	}
	dlc_flights_reader_put(reader);
	dlc_shards_pump_if_due(blocks);
}
