/*
 * stats_gauges.h - the .stats file's rendering: the daemon's counters
 * (base/stats.c) with the gauges of the moment, gathered from every layer
 * the FUSE face holds (cache, snapshot, source, memory, tier, passthrough,
 * the source pool).  Private to src/fuse/.
 */
#ifndef DLCACHE_FUSE_STATS_GAUGES_H
#define DLCACHE_FUSE_STATS_GAUGES_H

#include <stdint.h>
#include <time.h>

#include "dlcache/fs.h"
#include "dlcache/pool.h"
#include "passthrough.h"

/* What only fs.c knows of the mount, copied at the open of .stats. */
struct dlc_fs_gauge_state {
	struct timespec started;                /* CLOCK_REALTIME at mount */
	struct dlc_passthrough *passthrough;
	uint64_t opens_io_uring, opens_dev_fuse;
	uint64_t epoch;                         /* the last "epoch N" */
	struct dlc_pool *source_pool;
};

/*
 * Renders .stats (JSON, dlc_stats_render_json) into *text (malloc'd) and
 * its length into *len: 0, or -ENOMEM.
 */
int dlc_fs_render_stats(struct dlc_fs_context *c, const struct dlc_fs_gauge_state *state,
			char **text, size_t *len);

#endif
