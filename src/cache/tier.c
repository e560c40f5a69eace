/*
 * tier.c - the cluster tier's client: one pool of libmemcached handles per
 * server, a circuit breaker per server, fill-and-freeze admission.
 *
 * Reads.  dlc_tier_get finds the key's owner (tier_place.c), takes a handle
 * from that server's pool and asks it with one get, waiting at most the
 * tier's timeout (libmemcached's connect, poll, send and receive timeouts
 * all set to it), into a result the handle keeps from get to get (no new
 * buffer, no fresh pages per hit: handle_free; a buffer grown past
 * RESULT_KEEP_MAX is let go).  The value is opened under the job's key
 * (tier_seal.h: AES-256-GCM, snapshot, inode and size bound in) straight
 * into the caller's buffer, and, when the caller gives one, its bytes
 * checked against the member's xxh3 of a packed snapshot; a value that
 * fails either is counted as corrupt (per server and in tier->corrupt)
 * and deleted, so the next source read can add a good one.  Any other
 * outcome is a miss.  A tier is never on without a key: servers are
 * refused until dlc_tier_set_key has given one.
 *
 * Breaker.  libmemcached does not eject a server that accepts connections
 * but never answers, so every call to a hung server would wait the full
 * timeout.  Here the first timeout or connection error opens the server's
 * breaker: calls skip it (counted as skips, answered as misses) until the
 * health thread's probe - one stats call, at most one at a time, after a
 * back-off that doubles from BACKOFF_MIN_MS to BACKOFF_MAX_MS - finds it
 * answering again.  So a hung peer costs one timeout per server per
 * back-off, not one per read.
 *
 * Admission.  Offers use add (an existing value wins: two nodes that missed
 * the same sample store it once).  memcached runs with -M, so a full server
 * refuses instead of evicting; a refusal once its fill has reached its full
 * share of the limit freezes the server (no more offers) until the health
 * thread sees it restarted (another pid, or a smaller uptime), empty, or
 * until this node removed values from it (below).  The share depends on how
 * the server stores values (its settings' slab_chunk_max): with memcached's
 * defaults each value takes one chunk of a size class, the classes get 1 MiB
 * pages as they fill, and a class that gets no more refuses while others
 * have room (fill stops at 80-86% of -m with ~110 KB samples), so only a
 * refusal at FULL_PERCENT freezes; run as the README recommends
 * (-o slab_chunk_max=2048 -f 8) values are chains of 2 KiB chunks of one
 * class, the server fills to ~93% of -m, and a refusal means it is full
 * once past CHUNKED_FULL_PERCENT (BENCHMARKS.md).  The health thread also
 * reads memcached's own counters every HEALTH_PERIOD_MS: bytes (fill),
 * limit_maxbytes, evictions and extstore_objects_lost, the last two of which
 * must stay 0, and its item_size_max (-I): a sample is offered, and asked
 * for, only when its value fits the owner's largest item.
 *
 * Removal.  With ranks, dlc_tier_plan sets a score threshold at each epoch
 * and hands the health thread the samples below it whose owner is this
 * node's own server; the health thread deletes them in slices of
 * PRUNE_SLICE per period (so probes of the other servers go on), counts the
 * values that were there as removed, and unfreezes its server: room for the
 * samples that rose above the threshold.  Each node removes only from its
 * own server, so N nodes with the same ranks share the work.
 *
 * INVARIANTS.  tier->lock (a rwlock) guards tier->servers and tier->count:
 * gets and offers hold it for reading for their whole call, so a new server
 * list (write lock) never frees a server in use.  A server's pool_lock
 * guards its pool of idle handles; a handle is used by one thread at a
 * time; the idle handles are dropped when a breaker opens or closes, so a
 * connection to a process that died is not used again.  Lock order:
 * tier->lock, then a server's pool_lock.  Counters,
 * up, full and retry_at are atomics read without locks.  The health thread
 * alone probes and alone uses each server's probe handle.  Nothing is on
 * disk: a crash leaves the servers' values, which are checked when read.
 * tier->sealer is set before serving and not changed after (immutable).
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <ifaddrs.h>
#include <libmemcached/memcached.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "dlcache/cache.h"
#include "dlcache/cause.h"
#include "dlcache/hash.h"
#include "dlcache/log.h"
#include "dlcache/snapshot.h"
#include "dlcache/tier.h"
#include "dlcache/tier_place.h"
#include "dlcache/tier_seal.h"

#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 30000
#define HEALTH_PERIOD_MS 250
#define POOL_MAX 64
#define FULL_PERCENT 95
#define CHUNKED_FULL_PERCENT 85
#define PRUNE_SLICE 4096
/* What a server's item holds besides the value: memcached's item header,
 * the key and the CAS, with room to spare. */
#define ITEM_OVERHEAD 1024
/* Share of memcached's -m that holds values: with its defaults the slabs
 * round sizes up to classes (measured 80-86% with ~110 KB samples); with
 * values chained in small chunks of one class (slab_chunk_max at most
 * CHUNKED_MAX) 91-93% (BENCHMARKS.md). */
#define SLAB_USE_PERCENT 80
#define CHUNKED_USE_PERCENT 90
#define CHUNKED_MAX 16384
#define HOST_MAX 256
/* A handle keeps the buffer of its last get up to this size: samples of
 * several MB (-I 8m) would otherwise pin POOL_MAX of them per server. */
#define RESULT_KEEP_MAX (1u << 20)

struct tier_server {
	char name[280];
	char host[HOST_MAX];
	unsigned port;
	bool own;
	pthread_mutex_t pool_lock;
	memcached_st *pool[POOL_MAX];          /* guarded by pool_lock: idle handles */
	unsigned npool;                        /* guarded by pool_lock */
	memcached_st *probe;                   /* the health thread's alone */
	_Atomic bool up;
	_Atomic bool full;
	_Atomic int64_t retry_at;              /* ms, CLOCK_MONOTONIC: next probe when down */
	unsigned backoff_ms;                   /* the health thread's alone */
	_Atomic uint64_t fill, limit, evictions, extstore_lost, pid, uptime;
	_Atomic uint64_t item_max;             /* memcached's item_size_max; 0: not read yet */
	_Atomic uint64_t chunk_max;            /* its slab_chunk_max; 0: not read yet */
	_Atomic uint64_t hits, own_hits, misses, adds, refusals, timeouts, corrupt, bytes, skips;
	_Atomic uint64_t removed;
};

struct dlc_tier {
	uint64_t snapshot_id;
	unsigned timeout_ms;
	struct dlc_tier_sealer *sealer;        /* set before serving; NULL: no key, no servers */
	_Atomic uint64_t corrupt;              /* values refused, over every server list */
	pthread_rwlock_t lock;
	struct tier_server *servers;           /* guarded by lock */
	unsigned count;                        /* guarded by lock */
	_Atomic float threshold;               /* NaN: none */
	pthread_mutex_t health_lock;           /* guards stopping, prune, nprune */
	pthread_cond_t health_wake;
	bool stopping;
	uint32_t *prune;                       /* samples to delete from the own server */
	size_t nprune;
	pthread_t health;
	bool started;                          /* the health thread runs */
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * A handle of the pool carries, as its user data, the result its gets are
 * read into: its buffer stays allocated from one get to the next.
 * memcached_get would hand each value out in a new ~100 KB malloc, whose
 * pages are faulted in again on every hit (perf: most of a tier hit's time
 * was that copy into fresh pages).
 */
static void handle_free(memcached_st *mc)
{
	memcached_result_st *result = memcached_get_user_data(mc);

	if (result) {
		memcached_result_free(result);     /* its buffer; the struct is ours */
		free(result);
	}
	memcached_free(mc);
}

static memcached_st *handle_new(const struct dlc_tier *tier, const struct tier_server *server)
{
	memcached_st *mc = memcached_create(NULL);

	if (!mc)
		return NULL;
	if (memcached_server_add(mc, server->host, (in_port_t)server->port) != MEMCACHED_SUCCESS) {
		memcached_free(mc);
		return NULL;
	}
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_NO_BLOCK, 1);
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, tier->timeout_ms);
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, tier->timeout_ms);
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_SND_TIMEOUT, (uint64_t)tier->timeout_ms * 1000);
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_RCV_TIMEOUT, (uint64_t)tier->timeout_ms * 1000);
	/* The breaker here decides when to try again, not libmemcached. */
	memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, 0);
	return mc;
}

static memcached_st *pool_take(const struct dlc_tier *tier, struct tier_server *server)
{
	memcached_st *mc = NULL;

	pthread_mutex_lock(&server->pool_lock);
	if (server->npool > 0)
		mc = server->pool[--server->npool];
	pthread_mutex_unlock(&server->pool_lock);
	if (mc)
		return mc;
	mc = handle_new(tier, server);
	if (mc) {
		/* Not allocated by libmemcached: memcached_fetch_result frees
		 * a result it allocated when it reads END. */
		memcached_result_st *result = malloc(sizeof(*result));

		if (!result || !memcached_result_create(mc, result)) {
			free(result);
			memcached_free(mc);
			return NULL;
		}
		memcached_set_user_data(mc, result);
	}
	return mc;
}

/* Returns a handle to the pool; a handle that saw an error is dropped, so
 * that no half-read reply is left on a connection. */
static void pool_give(struct tier_server *server, memcached_st *mc, bool healthy)
{
	if (healthy) {
		pthread_mutex_lock(&server->pool_lock);
		if (server->npool < POOL_MAX) {
			server->pool[server->npool++] = mc;
			mc = NULL;
		}
		pthread_mutex_unlock(&server->pool_lock);
	}
	if (mc)
		handle_free(mc);
}

/*
 * Drops the idle handles: their connections may be to a process that died
 * (a restart) and would each fail once more on their next use.
 */
static void pool_drain(struct tier_server *server)
{
	memcached_st *idle[POOL_MAX];
	unsigned n;

	pthread_mutex_lock(&server->pool_lock);
	n = server->npool;
	memcpy(idle, server->pool, n * sizeof(idle[0]));
	server->npool = 0;
	pthread_mutex_unlock(&server->pool_lock);
	for (unsigned i = 0; i < n; i++)
		handle_free(idle[i]);
}

/* Opens server's breaker: calls skip it until a probe succeeds. */
static void trip(struct tier_server *server, memcached_return_t rc)
{
	pool_drain(server);
	if (atomic_exchange(&server->up, false))
		dlc_log(DLC_LOG_WARNING, "tier server %s stopped answering (%s); reads skip it until it answers again",
			server->name, memcached_strerror(NULL, rc));
	atomic_store(&server->retry_at, now_ms() + BACKOFF_MIN_MS);
}

/* A timeout or a lost connection, as opposed to an answer. */
static bool is_transport_error(memcached_return_t rc)
{
	switch (rc) {
	case MEMCACHED_SUCCESS:
	case MEMCACHED_NOTFOUND:
	case MEMCACHED_NOTSTORED:
	case MEMCACHED_DATA_EXISTS:
	case MEMCACHED_E2BIG:
	case MEMCACHED_SERVER_MEMORY_ALLOCATION_FAILURE:
	case MEMCACHED_SERVER_ERROR:
	case MEMCACHED_MEMORY_ALLOCATION_FAILURE:
		return false;
	default:
		return true;
	}
}

static bool is_timeout(memcached_return_t rc)
{
	return rc == MEMCACHED_TIMEOUT || rc == MEMCACHED_ERRNO || rc == MEMCACHED_IN_PROGRESS;
}

/* The largest sample the server takes: its item_size_max less the item's
 * own bytes, or memcached's default 1 MiB until the health thread has read it. */
static uint64_t value_max(const struct tier_server *server)
{
	uint64_t item_max = atomic_load(&server->item_max);

	if (item_max == 0)
		return DLC_TIER_VALUE_MAX;
	return item_max > ITEM_OVERHEAD + DLC_TIER_SEAL_OVERHEAD ?
	       item_max - ITEM_OVERHEAD - DLC_TIER_SEAL_OVERHEAD : 0;
}

/* The server that owns ino, or NULL when off or it is not up (counted). */
static struct tier_server *owner_of(struct dlc_tier *tier, uint32_t ino, char *key, size_t *klen)
{
	struct tier_server *server;

	if (tier->count == 0)
		return NULL;
	*klen = dlc_tier_place_key(tier->snapshot_id, ino, key);
	server = &tier->servers[dlc_tier_place_owner(key, *klen, tier->count)];
	if (!atomic_load(&server->up)) {
		atomic_fetch_add(&server->skips, 1);
		return NULL;
	}
	return server;
}

int dlc_tier_get(struct dlc_tier *tier, uint32_t ino, void *buf, uint64_t size,
		 const uint64_t *xxh3)
{
	char key[DLC_TIER_KEY_MAX];
	struct tier_server *server;
	memcached_return_t rc = MEMCACHED_FAILURE;
	memcached_result_st *got = NULL;
	memcached_st *mc = NULL;
	const char *value = NULL;
	const char *keys[1] = { key };
	size_t klen = 0, vlen = 0;
	int result = -ENOENT;

	pthread_rwlock_rdlock(&tier->lock);
	server = owner_of(tier, ino, key, &klen);
	if (server && size <= value_max(server))
		mc = pool_take(tier, server);
	if (!mc)
		goto out;
	/* memcached_get, into the handle's own result (handle_free). */
	rc = memcached_mget(mc, keys, &klen, 1);
	if (rc == MEMCACHED_SUCCESS) {
		got = memcached_fetch_result(mc, memcached_get_user_data(mc), &rc);
		if (!got && rc == MEMCACHED_END)
			rc = MEMCACHED_NOTFOUND;
		if (got) {
			value = memcached_result_value(got);
			vlen = memcached_result_length(got);
		}
	}
	if (rc == MEMCACHED_SUCCESS && value) {
		enum dlc_tier_open opened = dlc_tier_unseal(tier->sealer, tier->snapshot_id, ino,
							    value, vlen, buf, size);

		if (opened == DLC_TIER_OPEN_GOOD && (!xxh3 || dlc_xxh3(buf, size) == *xxh3)) {
			atomic_fetch_add(&server->hits, 1);
			atomic_fetch_add(&server->bytes, size);
			if (server->own)
				atomic_fetch_add(&server->own_hits, 1);
			result = 0;
		} else {
			atomic_fetch_add(&server->corrupt, 1);
			atomic_fetch_add(&tier->corrupt, 1);
			dlc_log(DLC_LOG_WARNING, "tier server %s holds a bad value for inode %u (%s); deleted, read from the source",
				server->name, ino,
				opened == DLC_TIER_OPEN_BAD_FRAME ? "not a sealed value of its size" :
				opened == DLC_TIER_OPEN_BAD_SEAL ? "does not open under tier_key" :
				"not the packed member's bytes");
			memcached_delete(mc, key, klen, 0);
		}
	} else if (rc == MEMCACHED_NOTFOUND) {
		atomic_fetch_add(&server->misses, 1);
	} else if (is_transport_error(rc)) {
		if (is_timeout(rc))
			atomic_fetch_add(&server->timeouts, 1);
		trip(server, rc);
	} else {
		atomic_fetch_add(&server->misses, 1);
	}
	if (got && vlen > RESULT_KEEP_MAX) {
		/* Let a large buffer go; a handle whose result cannot be made
		 * again is dropped (handle_free sees no result). */
		memcached_result_free(got);
		if (!memcached_result_create(mc, got)) {
			free(got);
			memcached_set_user_data(mc, NULL);
			rc = MEMCACHED_MEMORY_ALLOCATION_FAILURE;
			pool_give(server, mc, false);
			goto out;
		}
	}
	pool_give(server, mc, !is_transport_error(rc));
out:
	pthread_rwlock_unlock(&tier->lock);
	return result;
}

/*
 * memcached refuses an item when its size class can get no more memory,
 * while other classes may still have room: a refusal freezes the server
 * only once its fill reaches FULL_PERCENT of its limit, CHUNKED_FULL_PERCENT
 * when its values are chains of small chunks of one class (or when the
 * health thread has not read them yet).
 */
static bool is_chunked(const struct tier_server *server)
{
	uint64_t chunk_max = atomic_load(&server->chunk_max);

	return chunk_max > 0 && chunk_max <= CHUNKED_MAX;
}

static bool is_nearly_full(struct tier_server *server)
{
	uint64_t limit = atomic_load(&server->limit);
	unsigned percent = is_chunked(server) ? CHUNKED_FULL_PERCENT : FULL_PERCENT;

	return limit == 0 || atomic_load(&server->fill) * 100 >= limit * percent;
}

void dlc_tier_offer(struct dlc_tier *tier, uint32_t ino, const void *data, uint64_t size,
		    float score)
{
	float threshold = atomic_load(&tier->threshold);
	char key[DLC_TIER_KEY_MAX];
	struct tier_server *server;
	memcached_return_t rc;
	memcached_st *mc = NULL;
	unsigned char *value;
	size_t klen = 0;

	if (!isnan(threshold) && !(score >= threshold))
		return;
	pthread_rwlock_rdlock(&tier->lock);
	server = owner_of(tier, ino, key, &klen);
	if (!server || atomic_load(&server->full) || size > value_max(server))
		goto out;
	value = malloc(DLC_TIER_SEAL_OVERHEAD + size);
	if (!value)
		goto out;
	if (dlc_tier_seal(tier->sealer, tier->snapshot_id, ino, data, size, value) < 0) {
		free(value);
		goto out;
	}
	mc = pool_take(tier, server);
	if (!mc) {
		free(value);
		goto out;
	}
	rc = memcached_add(mc, key, klen, (const char *)value, DLC_TIER_SEAL_OVERHEAD + size, 0, 0);
	free(value);
	if (rc == MEMCACHED_SUCCESS) {
		atomic_fetch_add(&server->adds, 1);
	} else if (rc == MEMCACHED_SERVER_MEMORY_ALLOCATION_FAILURE || rc == MEMCACHED_SERVER_ERROR ||
		   rc == MEMCACHED_E2BIG) {
		atomic_fetch_add(&server->refusals, 1);
		if (rc != MEMCACHED_E2BIG && is_nearly_full(server) &&
		    !atomic_exchange(&server->full, true))
			dlc_log(DLC_LOG_INFO, "tier server %s is full; frozen until it restarts", server->name);
	} else if (is_transport_error(rc)) {
		if (is_timeout(rc))
			atomic_fetch_add(&server->timeouts, 1);
		trip(server, rc);
	}
	pool_give(server, mc, !is_transport_error(rc));
out:
	pthread_rwlock_unlock(&tier->lock);
}

void dlc_tier_set_threshold(struct dlc_tier *tier, float threshold)
{
	atomic_store(&tier->threshold, threshold);
}

int dlc_tier_plan(struct dlc_tier *tier, struct dlc_cache *cache,
		  const struct dlc_snapshot *snapshot)
{
	uint32_t count = (uint32_t)dlc_snapshot_count(snapshot);
	uint64_t budget = 0, fits = UINT64_MAX;
	float *scores, threshold;
	uint64_t *sizes;
	unsigned known = 0;

	pthread_rwlock_rdlock(&tier->lock);
	for (unsigned i = 0; i < tier->count; i++) {
		uint64_t limit = atomic_load(&tier->servers[i].limit);

		budget += limit / 100 *
			  (is_chunked(&tier->servers[i]) ? CHUNKED_USE_PERCENT : SLAB_USE_PERCENT);
		known += limit > 0;
		if (value_max(&tier->servers[i]) < fits)
			fits = value_max(&tier->servers[i]);
	}
	if (known < tier->count || tier->count == 0) {
		pthread_rwlock_unlock(&tier->lock);
		return -EAGAIN;
	}
	pthread_rwlock_unlock(&tier->lock);
	scores = malloc(((size_t)count + 1) * sizeof(*scores));
	sizes = malloc(((size_t)count + 1) * sizeof(*sizes));
	if (!scores || !sizes) {
		free(scores);
		free(sizes);
		return -ENOMEM;
	}
	for (uint32_t ino = 1; ino <= count; ino++) {
		const struct dlc_node *node = dlc_snapshot_node(snapshot, ino);
		bool file = node && S_ISREG(node->mode) && node->size <= fits;

		scores[ino - 1] = file ? dlc_cache_score(cache, ino) : NAN;
		sizes[ino - 1] = file ? node->size + DLC_TIER_SEAL_OVERHEAD : 0;
	}
	threshold = dlc_tier_place_threshold(scores, sizes, count, budget);
	if (isnan(threshold))
		dlc_log(DLC_LOG_DEBUG, "tier: every sample is offered (budget %llu bytes)",
			(unsigned long long)budget);
	else
		dlc_log(DLC_LOG_INFO, "tier: samples scoring at least %g are offered (budget %llu bytes)",
			(double)threshold, (unsigned long long)budget);
	atomic_store(&tier->threshold, threshold);
	if (!isnan(threshold)) {
		/* The samples below the threshold, in place in sizes' memory
		 * (a uint32_t per ino fits where a uint64_t was). */
		uint32_t *below = (uint32_t *)sizes;
		size_t n = 0;

		for (uint32_t ino = 1; ino <= count; ino++)
			if (sizes[ino - 1] > 0 && !(scores[ino - 1] >= threshold))
				below[n++] = ino;
		dlc_tier_prune(tier, below, n);
	}
	free(scores);
	free(sizes);
	return 0;
}

int dlc_tier_prune(struct dlc_tier *tier, const uint32_t *inos, size_t count)
{
	uint32_t *copy = NULL;

	if (count > 0) {
		copy = malloc(count * sizeof(*copy));
		if (!copy)
			return -ENOMEM;
		memcpy(copy, inos, count * sizeof(*copy));
	}
	pthread_mutex_lock(&tier->health_lock);
	free(tier->prune);
	tier->prune = copy;
	tier->nprune = count;
	pthread_cond_signal(&tier->health_wake);
	pthread_mutex_unlock(&tier->health_lock);
	return 0;
}

/*
 * Deletes up to PRUNE_SLICE of the queued samples from their owners when the
 * owner is this node's own server; the health thread's, with tier->lock read.
 */
static void prune_slice(struct dlc_tier *tier)
{
	uint32_t slice[PRUNE_SLICE];
	bool removed[DLC_TIER_MAX_SERVERS] = { false };
	size_t n;

	pthread_mutex_lock(&tier->health_lock);
	if (tier->nprune == 0) {
		pthread_mutex_unlock(&tier->health_lock);
		return;
	}
	n = tier->nprune < PRUNE_SLICE ? tier->nprune : PRUNE_SLICE;
	tier->nprune -= n;
	memcpy(slice, tier->prune + tier->nprune, n * sizeof(slice[0]));
	if (tier->nprune == 0) {
		free(tier->prune);
		tier->prune = NULL;
	}
	pthread_mutex_unlock(&tier->health_lock);
	for (size_t i = 0; i < n && tier->count > 0; i++) {
		char key[DLC_TIER_KEY_MAX];
		size_t klen = dlc_tier_place_key(tier->snapshot_id, slice[i], key);
		unsigned at = dlc_tier_place_owner(key, klen, tier->count);
		struct tier_server *server = &tier->servers[at];
		memcached_return_t rc;
		memcached_st *mc;

		if (!server->own || !atomic_load(&server->up))
			continue;
		mc = pool_take(tier, server);
		if (!mc)
			continue;
		rc = memcached_delete(mc, key, klen, 0);
		if (rc == MEMCACHED_SUCCESS) {
			atomic_fetch_add(&server->removed, 1);
			removed[at] = true;
		} else if (is_transport_error(rc)) {
			trip(server, rc);
		}
		pool_give(server, mc, !is_transport_error(rc));
	}
	for (unsigned i = 0; i < tier->count; i++)
		if (removed[i] && atomic_exchange(&tier->servers[i].full, false))
			dlc_log(DLC_LOG_INFO, "tier server %s: values below the threshold removed; filling it again",
				tier->servers[i].name);
}

/* Stores value as numbers[i] when key is names[i] (a "stats" reply's line). */
static void take_number(const char *const *names, size_t count, const char *key, size_t key_len,
			const char *value, size_t value_len, uint64_t *numbers)
{
	char text[32];

	if (value_len >= sizeof(text))
		return;
	memcpy(text, value, value_len);
	text[value_len] = '\0';
	for (size_t i = 0; i < count; i++)
		if (strlen(names[i]) == key_len && memcmp(names[i], key, key_len) == 0)
			numbers[i] = strtoull(text, NULL, 10);
}

/* Collects the counters of one "stats" reply. */
static memcached_return_t take_stat(const memcached_instance_st *instance, const char *key,
				    size_t key_len, const char *value, size_t value_len, void *context)
{
	/* Into context: bytes, limit, evictions, extstore_lost, pid, uptime. */
	static const char *const names[] = { "bytes", "limit_maxbytes", "evictions",
					     "extstore_objects_lost", "pid", "uptime" };

	(void)instance;
	take_number(names, sizeof(names) / sizeof(names[0]), key, key_len, value, value_len, context);
	return MEMCACHED_SUCCESS;
}

/* Takes item_size_max and slab_chunk_max from a "stats settings" reply. */
static memcached_return_t take_settings(const memcached_instance_st *instance, const char *key,
					size_t key_len, const char *value, size_t value_len,
					void *context)
{
	static const char *const names[] = { "item_size_max", "slab_chunk_max" };

	(void)instance;
	take_number(names, sizeof(names) / sizeof(names[0]), key, key_len, value, value_len, context);
	return MEMCACHED_SUCCESS;
}

/* One probe of a server: its stats.  Run by the health thread only. */
static void probe(struct dlc_tier *tier, struct tier_server *server)
{
	uint64_t numbers[6] = { 0 };
	memcached_return_t rc;
	bool was_up = atomic_load(&server->up);

	if (!was_up && now_ms() < atomic_load(&server->retry_at))
		return;
	if (!server->probe)
		server->probe = handle_new(tier, server);
	if (!server->probe)
		return;
	rc = memcached_stat_execute(server->probe, NULL, take_stat, numbers);
	if (rc != MEMCACHED_SUCCESS || numbers[4] == 0) {
		memcached_free(server->probe);
		server->probe = NULL;
		if (was_up) {
			server->backoff_ms = BACKOFF_MIN_MS;
			trip(server, rc);
		} else {
			server->backoff_ms = server->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS :
					     server->backoff_ms * 2;
			atomic_store(&server->retry_at, now_ms() + server->backoff_ms);
		}
		return;
	}
	/* Another process, or the same pid younger: restarted, empty. */
	if (numbers[4] != atomic_load(&server->pid) || numbers[5] < atomic_load(&server->uptime)) {
		if (atomic_load(&server->pid) != 0 && atomic_exchange(&server->full, false))
			dlc_log(DLC_LOG_INFO, "tier server %s restarted; filling it again", server->name);
		atomic_store(&server->item_max, 0);     /* a restart may have changed -I */
	}
	if (atomic_load(&server->item_max) == 0) {
		uint64_t settings[2] = { 0 };

		/* Unread, the default stays (and is asked again next period);
		 * a handle that may hold half a reply is not used again. */
		if (memcached_stat_execute(server->probe, "settings", take_settings, settings) ==
		    MEMCACHED_SUCCESS) {
			atomic_store(&server->chunk_max, settings[1]);
			atomic_store(&server->item_max, settings[0]);
		} else {
			memcached_free(server->probe);
			server->probe = NULL;
		}
	}
	atomic_store(&server->fill, numbers[0]);
	atomic_store(&server->limit, numbers[1]);
	atomic_store(&server->evictions, numbers[2]);
	atomic_store(&server->extstore_lost, numbers[3]);
	atomic_store(&server->pid, numbers[4]);
	atomic_store(&server->uptime, numbers[5]);
	server->backoff_ms = BACKOFF_MIN_MS;
	if (!was_up)
		pool_drain(server);     /* handles returned while it was down */
	if (!was_up && !atomic_exchange(&server->up, true))
		dlc_log(DLC_LOG_INFO, "tier server %s answers again", server->name);
}

static void *health_main(void *arg)
{
	struct dlc_tier *tier = arg;

	pthread_mutex_lock(&tier->health_lock);
	while (!tier->stopping) {
		struct timespec deadline;

		pthread_mutex_unlock(&tier->health_lock);
		pthread_rwlock_rdlock(&tier->lock);
		for (unsigned i = 0; i < tier->count; i++)
			probe(tier, &tier->servers[i]);
		prune_slice(tier);
		pthread_rwlock_unlock(&tier->lock);
		pthread_mutex_lock(&tier->health_lock);
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_nsec += HEALTH_PERIOD_MS * 1000000L;
		deadline.tv_sec += deadline.tv_nsec / 1000000000L;
		deadline.tv_nsec %= 1000000000L;
		if (!tier->stopping && tier->nprune == 0)
			pthread_cond_timedwait(&tier->health_wake, &tier->health_lock, &deadline);
	}
	pthread_mutex_unlock(&tier->health_lock);
	return NULL;
}

/* True when host resolves to an address of one of this node's interfaces. */
static bool is_local_host(const char *host)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
	struct ifaddrs *ifs = NULL;
	bool local = false;

	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return false;
	if (getifaddrs(&ifs) == 0) {
		for (struct addrinfo *a = res; a && !local; a = a->ai_next) {
			for (struct ifaddrs *i = ifs; i && !local; i = i->ifa_next) {
				if (!i->ifa_addr || i->ifa_addr->sa_family != a->ai_family)
					continue;
				if (a->ai_family == AF_INET)
					local = ((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr ==
						((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
				else if (a->ai_family == AF_INET6)
					local = memcmp(&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr,
						       &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
						       16) == 0;
			}
		}
		freeifaddrs(ifs);
	}
	freeaddrinfo(res);
	return local;
}

static void servers_free(struct tier_server *servers, unsigned count)
{
	for (unsigned i = 0; i < count; i++) {
		for (unsigned j = 0; j < servers[i].npool; j++)
			handle_free(servers[i].pool[j]);
		if (servers[i].probe)
			memcached_free(servers[i].probe);
		pthread_mutex_destroy(&servers[i].pool_lock);
	}
	free(servers);
}

/* Parses text's HOST:PORT words into a new array; 0 or -errno with *cause. */
static int parse_servers(const char *text, struct tier_server **out, unsigned *count, char **cause)
{
	struct tier_server *servers = NULL;
	unsigned n = 0;

	*out = NULL;
	*count = 0;
	for (const char *p = text; p && *p;) {
		size_t len;

		if (*p == '#') {
			p = strchr(p, '\n');
			continue;
		}
		if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
			p++;
			continue;
		}
		len = strcspn(p, " \t\r\n#");
		if (n == DLC_TIER_MAX_SERVERS) {
			dlc_cause_set(cause, "the tier names more than %d servers; list at most %d",
				      DLC_TIER_MAX_SERVERS, DLC_TIER_MAX_SERVERS);
			goto err;
		}
		if (n % 16 == 0) {
			struct tier_server *grown = realloc(servers, (n + 16) * sizeof(*servers));

			if (!grown)
				goto nomem;
			servers = grown;
		}
		memset(&servers[n], 0, sizeof(servers[n]));
		if (!dlc_tier_place_parse_server(p, len, servers[n].host, sizeof(servers[n].host),
						 &servers[n].port)) {
			dlc_cause_set(cause, "'%.*s' is not a tier server; write HOST:PORT, such as node1:11211",
				      (int)(len > 200 ? 200 : len), p);
			goto err;
		}
		snprintf(servers[n].name, sizeof(servers[n].name), "%.*s", (int)len, p);
		pthread_mutex_init(&servers[n].pool_lock, NULL);
		atomic_init(&servers[n].up, true);
		servers[n].backoff_ms = BACKOFF_MIN_MS;
		n++;
		p += len;
	}
	for (unsigned i = 0; i < n; i++)
		servers[i].own = is_local_host(servers[i].host);
	*out = servers;
	*count = n;
	return 0;
nomem:
	servers_free(servers, n);
	return -ENOMEM;
err:
	servers_free(servers, n);
	return -EINVAL;
}

int dlc_tier_set_servers(struct dlc_tier *tier, const char *text, char **cause)
{
	struct tier_server *servers, *old;
	unsigned count, old_count;
	int rc = parse_servers(text, &servers, &count, cause);

	if (rc < 0)
		return rc;
	if (count > 0 && !tier->sealer) {
		servers_free(servers, count);
		dlc_cause_set(cause, "a tier needs tier_key=FILE, a secret every node of the job shares; make one with dlcache keygen FILE, copy it to each node (mode 0600) and mount with tier_key=FILE");
		return -EINVAL;
	}
	pthread_rwlock_wrlock(&tier->lock);
	old = tier->servers;
	old_count = tier->count;
	tier->servers = servers;
	tier->count = count;
	pthread_rwlock_unlock(&tier->lock);
	servers_free(old, old_count);
	pthread_mutex_lock(&tier->health_lock);
	pthread_cond_signal(&tier->health_wake);
	pthread_mutex_unlock(&tier->health_lock);
	if (count > 0)
		dlc_log(DLC_LOG_INFO, "tier: %u servers", count);
	else if (old_count > 0)
		dlc_log(DLC_LOG_INFO, "tier: off");
	return 0;
}

int dlc_tier_read_file(const char *path, char **text, char **cause)
{
	struct tier_server *servers;
	unsigned count;
	char *buf = NULL;
	size_t cap = 0;
	FILE *f = fopen(path, "r");
	int rc;

	*text = NULL;
	if (!f) {
		rc = -errno;
		dlc_cause_set(cause, "cannot read the tier_servers file %s: %s; give a file with one HOST:PORT per line",
			      path, strerror(-rc));
		return rc;
	}
	rc = 0;
	if (getdelim(&buf, &cap, '\0', f) < 0) {
		rc = ferror(f) ? -EIO : 0;
		free(buf);
		buf = rc == 0 ? strdup("") : NULL;      /* an empty file */
	}
	fclose(f);
	if (rc < 0 || !buf) {
		free(buf);
		dlc_cause_set(cause, "cannot read the tier_servers file %s; give a readable file with one HOST:PORT per line",
			      path);
		return rc < 0 ? rc : -ENOMEM;
	}
	rc = parse_servers(buf, &servers, &count, cause);
	if (rc == 0 && count == 0) {
		dlc_cause_set(cause, "the tier_servers file %s names no server; write one HOST:PORT per line",
			      path);
		rc = -EINVAL;
	}
	servers_free(servers, count);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	*text = buf;
	return 0;
}

bool dlc_tier_on(struct dlc_tier *tier)
{
	bool on;

	pthread_rwlock_rdlock(&tier->lock);
	on = tier->count > 0;
	pthread_rwlock_unlock(&tier->lock);
	return on;
}

unsigned dlc_tier_gauges(struct dlc_tier *tier, struct dlc_stats_tier_server *out, unsigned max)
{
	unsigned count;

	pthread_rwlock_rdlock(&tier->lock);
	count = tier->count;
	for (unsigned i = 0; i < count && i < max; i++) {
		struct tier_server *s = &tier->servers[i];

		memset(&out[i], 0, sizeof(out[i]));
		snprintf(out[i].name, sizeof(out[i].name), "%s", s->name);
		out[i].up = atomic_load(&s->up);
		out[i].own = s->own;
		out[i].full = atomic_load(&s->full);
		out[i].fill = atomic_load(&s->fill);
		out[i].limit = atomic_load(&s->limit);
		out[i].evictions = atomic_load(&s->evictions);
		out[i].extstore_lost = atomic_load(&s->extstore_lost);
		out[i].hits = atomic_load(&s->hits);
		out[i].own_hits = atomic_load(&s->own_hits);
		out[i].misses = atomic_load(&s->misses);
		out[i].adds = atomic_load(&s->adds);
		out[i].refusals = atomic_load(&s->refusals);
		out[i].timeouts = atomic_load(&s->timeouts);
		out[i].corrupt = atomic_load(&s->corrupt);
		out[i].bytes = atomic_load(&s->bytes);
		out[i].skips = atomic_load(&s->skips);
		out[i].removed = atomic_load(&s->removed);
		out[i].item_max = atomic_load(&s->item_max);
	}
	pthread_rwlock_unlock(&tier->lock);
	return count;
}

int dlc_tier_set_key(struct dlc_tier *tier, const unsigned char *secret, size_t len)
{
	struct dlc_tier_sealer *sealer;
	int rc = dlc_tier_sealer_new(secret, len, &sealer);

	if (rc < 0)
		return rc;
	dlc_tier_sealer_free(tier->sealer);
	tier->sealer = sealer;
	return 0;
}

uint64_t dlc_tier_corrupt(struct dlc_tier *tier)
{
	return atomic_load(&tier->corrupt);
}

void dlc_tier_verify(struct dlc_tier *tier)
{
	pthread_rwlock_rdlock(&tier->lock);
	assert((tier->count == 0) == (tier->servers == NULL) || tier->count == 0);
	assert(tier->count == 0 || tier->sealer);
	for (unsigned i = 0; i < tier->count; i++) {
		struct tier_server *s = &tier->servers[i];

		pthread_mutex_lock(&s->pool_lock);
		assert(s->npool <= POOL_MAX);
		pthread_mutex_unlock(&s->pool_lock);
		assert(s->port > 0 && s->port <= 65535 && s->host[0] != '\0');
		assert(atomic_load(&s->own_hits) <= atomic_load(&s->hits));
	}
	pthread_rwlock_unlock(&tier->lock);
}

int dlc_tier_create(uint64_t snapshot_id, unsigned timeout_ms, struct dlc_tier **out)
{
	struct dlc_tier *tier = calloc(1, sizeof(*tier));

	*out = NULL;
	if (!tier)
		return -ENOMEM;
	tier->snapshot_id = snapshot_id;
	tier->timeout_ms = timeout_ms ? timeout_ms : DLC_TIER_DEFAULT_TIMEOUT_MS;
	atomic_init(&tier->threshold, NAN);
	atomic_init(&tier->corrupt, 0);
	pthread_rwlock_init(&tier->lock, NULL);
	pthread_mutex_init(&tier->health_lock, NULL);
	pthread_cond_init(&tier->health_wake, NULL);
	*out = tier;
	return 0;
}

int dlc_tier_start(struct dlc_tier *tier)
{
	int rc = pthread_create(&tier->health, NULL, health_main, tier);

	if (rc != 0)
		return -rc;
	tier->started = true;
	return 0;
}

void dlc_tier_free(struct dlc_tier *tier)
{
	if (!tier)
		return;
	pthread_mutex_lock(&tier->health_lock);
	tier->stopping = true;
	pthread_cond_signal(&tier->health_wake);
	pthread_mutex_unlock(&tier->health_lock);
	if (tier->started)
		pthread_join(tier->health, NULL);
	servers_free(tier->servers, tier->count);
	dlc_tier_sealer_free(tier->sealer);
	free(tier->prune);
	pthread_cond_destroy(&tier->health_wake);
	pthread_mutex_destroy(&tier->health_lock);
	pthread_rwlock_destroy(&tier->lock);
	free(tier);
}
