/*
 * stats_gauges.c - the .stats file's rendering (stats_gauges.h): each open
 * gathers the gauges of the moment from the layers the mount holds and
 * renders them with the counters.  Nothing here is kept between opens.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlcache/backend.h"
#include "dlcache/budget.h"
#include "dlcache/cache.h"
#include "dlcache/snapshot.h"
#include "dlcache/stats.h"
#include "dlcache/tier.h"
#include "stats_gauges.h"

static void gather_gauges(struct dlc_fs_context *c, const struct dlc_fs_gauge_state *fs,
			  struct dlc_stats_gauges *g)
{
	struct dlc_cache_gauges cache;
	struct dlc_pool_gauges pool;
	struct timespec now;

	memset(g, 0, sizeof(*g));
	clock_gettime(CLOCK_REALTIME, &now);
	dlc_cache_gauges(c->cache, &cache);
	g->source = c->source;
	g->policy = c->policy;
	g->uptime_seconds = (double)(now.tv_sec - fs->started.tv_sec) +
			    (double)(now.tv_nsec - fs->started.tv_nsec) / 1e9;
	g->cache_bytes = cache.bytes;
	g->cache_entries = cache.entries;
	g->cache_capacity = cache.capacity;
	g->admission_enabled = cache.admission;
	g->cache_announced = cache.announced;
	g->passthrough = dlc_passthrough_on(fs->passthrough);
	g->passthrough_backing = dlc_passthrough_backing(fs->passthrough);
	g->opens_io_uring = fs->opens_io_uring;
	g->opens_dev_fuse = fs->opens_dev_fuse;
	/* The .stats open itself was counted: true while io_uring serves. */
	g->io_uring = g->opens_io_uring > 0;
	g->snapshot_entries = dlc_snapshot_count(c->snapshot);
	g->snapshot_bytes = dlc_snapshot_total_bytes(c->snapshot);
	g->index_memory = dlc_snapshot_memory(c->snapshot);
	for (int op = 0; op < DLC_BACKEND_OP_COUNT; op++)
		g->backend_calls[op] = atomic_load(&c->backend->calls[op]);
	g->backend_errors = atomic_load(&c->backend->errors);
	g->epoch = fs->epoch;
	g->scores_known = cache.scores_known;
	dlc_pool_gauges(fs->source_pool, &pool);
	g->source_threads = pool.threads;
	g->source_running = pool.running;
	g->source_queued = pool.queued;
	if (c->budget) {
		struct dlc_budget_gauges memory;

		dlc_budget_gauges(c->budget, &memory);
		g->memory_limit = memory.limit;
		g->memory_used = memory.used;
		g->memory_peak = memory.peak;
		g->memory_waits = memory.waits;
	}
	if (c->tier)
		g->tier_corrupt = dlc_tier_corrupt(c->tier);
	if (c->tier && dlc_tier_on(c->tier)) {
		struct dlc_stats_tier_server *servers = calloc(DLC_TIER_MAX_SERVERS, sizeof(*servers));

		if (servers) {
			g->tier_count = dlc_tier_gauges(c->tier, servers, DLC_TIER_MAX_SERVERS);
			if (g->tier_count > DLC_TIER_MAX_SERVERS)
				g->tier_count = DLC_TIER_MAX_SERVERS;
			g->tier = servers;
		}
	}
}

int dlc_fs_render_stats(struct dlc_fs_context *c, const struct dlc_fs_gauge_state *state,
			char **text, size_t *len)
{
	struct dlc_stats_gauges gauges;
	int rc;

	gather_gauges(c, state, &gauges);
	rc = dlc_stats_render_json(c->stats, &gauges, text, len);
	free((void *)gauges.tier);
	return rc;
}
