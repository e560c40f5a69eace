/*
 * shards.c - the stream of announced shards (blocks.h, dlc_blocks_announce):
 * the plan of announced large files and the pump that flies their blocks
 * ahead of their readers, through flights.c's readahead jobs.
 *
 * A `prefetch PATH` line on a file read by blocks
 * (dlc_blocks_announce) appends it to the mount's shard plan, in announced
 * order.  The plan's stream flies the blocks of its shards ahead of any
 * reader, in that order, from the first shard with a block not flown yet:
 * each through dlc_flights_list_ahead and the readahead pools like a reader's
 * readahead, owned by the shard's stream reader (its own source handle),
 * and staged in its landed flight until a reader of the shard takes it
 * (dlc_flights_take: the first reader to want it, served from memory or joining the
 * flight) or the shard is done with.  Blocks the cache holds checked are
 * skipped.  A landed block is offered to the cache only into free room
 * (dlc_cache_block_offer_if_room); refused for room, it is offered when a
 * reader takes it, so admission decides at the read as for a miss.
 * Bounds: the stream's unclaimed blocks (in flight or staged) hold at most
 * readahead_max bytes (shard_limit; readahead_max=0 turns the stream off),
 * and each buffer is a try-charge below ahead_limit, never waited for;
 * with no room the stream stops (the block is marked in the stream's
 * shard_rewind) and the next read, open, close or announcement starts it
 * again (shards_due).  A reader opening an announced file claims
 * its first plan entry: the stream goes on ahead of it (its reads move the
 * entry's cursor), and the entry, with whatever it still stages, goes when
 * its last reader closes.  Entries nobody opened leave once a shard
 * announced prefetch_window or more after them is opened (as staging.c
 * passes whole files), or once the file is opened whole from the cache.
 *
 * Locking: blocks->lock guards the plan (blocks_private.h); a pump runs
 * with no lock of its caller's held and counts itself in blocks->pumping,
 * which dlc_blocks_stop waits to see at zero before it stops the pools.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "dlcache/blocks.h"
#include "blocks_private.h"

/* Takes entry *p out of the plan and returns it; lock held. */
static struct shard *unlink_shard(struct dlc_blocks *blocks, struct shard **p)
{
	struct shard *s = *p;

	*p = s->next;
	if (blocks->shards_tail == &s->next)
		blocks->shards_tail = p;
	blocks->nshards--;
	blocks->pump_from = NULL;
	s->next = NULL;
	return s;
}

/* Takes out the entries nobody opened that a whole window of announced
 * shards lies behind the furthest opened one, prepended to gone; lock held. */
static struct shard *pass_shards(struct dlc_blocks *blocks, struct shard *gone)
{
	struct shard **p = &blocks->shards;

	while (*p && (*p)->seq + blocks->shard_window <= blocks->opened_seq) {
		struct shard *s;

		if ((*p)->readers) {
			p = &(*p)->next;
			continue;
		}
		s = unlink_shard(blocks, p);
		s->next = gone;
		gone = s;
	}
	return gone;
}

/* Frees entries taken out of the plan, and what their streams still
 * stage or fly (in flight, it lands for nobody).  No lock held. */
void dlc_shards_release(struct shard *gone)
{
	while (gone) {
		struct shard *s = gone;

		gone = s->next;
		if (s->stream) {
			dlc_flights_drop_staged(s->stream);
			dlc_flights_reader_put(s->stream);
		}
		free(s);
	}
}

/* Block index of stream's entry was not flown (no room): the stream comes
 * back to it at the next pump (next_block); lock held. */
static void rewind_stream(struct dlc_blocks *blocks, struct dlc_block_reader *stream, uint32_t index)
{
	if (index < stream->shard_rewind)
		stream->shard_rewind = index;
	blocks->pump_from = NULL;
	atomic_store(&blocks->shards_due, true);
}

/* The next block the stream flies of entry s, blocks its jobs found no room
 * for first (flights.c's run_ahead marks them as rewind_stream does); lock held. */
static uint32_t next_block(struct shard *s)
{
	if (s->stream && s->stream->shard_rewind < s->next_index)
		s->next_index = s->stream->shard_rewind;
	if (s->stream)
		s->stream->shard_rewind = UINT32_MAX;
	return s->next_index;
}

/*
 * Flies the plan's next blocks, in announced order, while the stream's
 * unclaimed blocks stay within shard_limit (at least one block) and the
 * budget has room below ahead_limit; stops at the first block with no room
 * (shards_due: the next pump tries it again).  Waits for nothing: the
 * blocks are read on the readahead pools.  No lock of the caller's held.
 */
static void pump_shards(struct dlc_blocks *blocks)
{
	pthread_mutex_lock(&blocks->lock);
	if (blocks->stopping) {
		dlc_flights_unlock(blocks);
		return;
	}
	blocks->pumping++;
	atomic_store(&blocks->shards_due, false);
	for (;;) {
		struct dlc_block_reader *stream;
		struct ahead_job *job;
		struct shard *s, *last = NULL;
		uint32_t index;
		uint64_t len;
		bool skip;

		/* Entries before pump_from have every block flown. */
		for (s = blocks->pump_from ? blocks->pump_from : blocks->shards;
		     s && next_block(s) >= s->nblocks; s = s->next)
			last = s;
		blocks->pump_from = s ? s : last;
		if (!s)
			break;
		if (!s->stream && !(s->stream = dlc_flights_reader_new(blocks, s->ino, s->size))) {
			atomic_store(&blocks->shards_due, true);
			break;
		}
		index = s->next_index;
		len = dlc_blocks_block_len(s->stream, index);
		/* Full: a block taken or dropped makes room (unclaim). */
		if (blocks->shard_bytes > 0 && blocks->shard_bytes + len > blocks->shard_limit)
			break;
		s->next_index++;
		blocks->shard_bytes += len;
		stream = s->stream;
		atomic_fetch_add(&stream->refs, 1);
		dlc_flights_unlock(blocks);

		job = dlc_flights_list_ahead(stream, index, true, &skip);
		if (job)
			dlc_flights_submit_ahead(job);

		pthread_mutex_lock(&blocks->lock);
		if (!job) {
			blocks->shard_bytes -= len;
			if (!skip)
				rewind_stream(blocks, stream, index);
		}
		dlc_flights_unlock(blocks);
		dlc_flights_reader_put(stream);
		pthread_mutex_lock(&blocks->lock);
		if (!job && !skip)
			break;
	}
	if (--blocks->pumping == 0 && blocks->stopping)
		pthread_cond_broadcast(&blocks->landed);
	dlc_flights_unlock(blocks);
}

void dlc_shards_pump_if_due(struct dlc_blocks *blocks)
{
	if (atomic_load(&blocks->shards_due))
		pump_shards(blocks);
}

bool dlc_blocks_announce(struct dlc_blocks *blocks, uint32_t ino, unsigned window)
{
	const struct dlc_node *node = dlc_snapshot_node(blocks->snapshot, ino);
	struct shard *s;

	if (!node || node->size == 0 || blocks->shard_limit == 0)
		return false;
	s = calloc(1, sizeof(*s));
	if (!s)
		return false;
	s->ino = ino;
	s->size = node->size;
	s->nblocks = (uint32_t)((node->size + blocks->block_size - 1) / blocks->block_size);
	pthread_mutex_lock(&blocks->lock);
	if (blocks->stopping || blocks->nshards >= SHARD_PLAN_MAX) {
		dlc_flights_unlock(blocks);
		free(s);
		return false;
	}
	s->seq = ++blocks->shard_seq;
	blocks->shard_window = window ? window : 1;
	*blocks->shards_tail = s;
	blocks->shards_tail = &s->next;
	blocks->nshards++;
	dlc_flights_unlock(blocks);
	pump_shards(blocks);
	return true;
}

/* A reader of ino opened: it claims ino's first plan entry, if any (the
 * furthest opened position moves to it, and entries a window behind go);
 * lock held.  Returns the entries to release. */
struct shard *dlc_shards_claim(struct dlc_blocks *blocks, struct dlc_block_reader *reader)
{
	struct shard *s;

	for (s = blocks->shards; s && s->ino != reader->ino; s = s->next)
		;
	if (!s)
		return NULL;
	s->readers++;
	reader->shard = s;
	if (s->seq > blocks->opened_seq)
		blocks->opened_seq = s->seq;
	return pass_shards(blocks, NULL);
}

struct shard *dlc_shards_unclaim(struct dlc_blocks *blocks, struct dlc_block_reader *reader)
{
	struct shard *s = reader->shard, **p = &blocks->shards;

	reader->shard = NULL;
	if (--s->readers > 0)
		return NULL;
	while (*p != s)
		p = &(*p)->next;
	return unlink_shard(blocks, p);
}

void dlc_blocks_opened_whole(struct dlc_blocks *blocks, uint32_t ino)
{
	struct shard **p, *gone = NULL;

	if (!blocks)
		return;
	pthread_mutex_lock(&blocks->lock);
	for (p = &blocks->shards; *p && (*p)->ino != ino; p = &(*p)->next)
		;
	if (*p) {
		if ((*p)->seq > blocks->opened_seq)
			blocks->opened_seq = (*p)->seq;
		if ((*p)->readers == 0)
			gone = unlink_shard(blocks, p);
		gone = pass_shards(blocks, gone);
	}
	dlc_flights_unlock(blocks);
	dlc_shards_release(gone);
	dlc_shards_pump_if_due(blocks);
}
