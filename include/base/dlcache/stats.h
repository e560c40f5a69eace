/*
 * stats.h - atomic counters, and their rendering as the .stats JSON document.
 *
 * Counters count since mount.  The lifetime totals of a cache directory (the
 * sums over every mount) are persisted by the caller through the store's meta
 * table with dlc_stats_totals_encode/decode.
 *
 * The JSON has one member per line and nested objects open with `"name": {`
 * on their own line; dlc_stats_print_human() relies on that layout, and so may
 * a user's shell script.
 */
#ifndef DLCACHE_STATS_H
#define DLCACHE_STATS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * The kinds of calls to the source.  The source layer's wrappers count them
 * (backend.h); they are defined here, in the lowest layer, because the stats
 * render them and a layer never includes one above it.
 */
enum dlc_backend_op {
	DLC_BACKEND_LIST = 0,
	DLC_BACKEND_STAT,
	DLC_BACKEND_OPEN,
	DLC_BACKEND_READ,
	DLC_BACKEND_CLOSE,
	DLC_BACKEND_OP_COUNT,
};

enum dlc_stat {
	DLC_STAT_HITS = 0,             /* opens served from the local cache */
	DLC_STAT_MISSES,               /* opens that needed the remote */
	DLC_STAT_BYTES_FROM_CACHE,
	DLC_STAT_BYTES_FROM_REMOTE,
	DLC_STAT_ADMISSIONS,
	DLC_STAT_EVICTIONS,
	DLC_STAT_BYPASSES,             /* misses served but not admitted */
	DLC_STAT_CORRUPT,              /* cache entries whose size or xxh3 did not match */
	DLC_STAT_CACHE_READ_ERRORS,    /* cached copies that could not be read (kept; served from the source) */
	DLC_STAT_REMOTE_ERRORS,        /* reads failed because the remote failed */
	DLC_STAT_PREFETCHES,           /* files fetched by prefetch workers */
	DLC_STAT_PREFETCH_HITS,        /* opens served from prefetched bytes (also hits) */
	DLC_STAT_CHUNK_READS,          /* whole chunks read in one pass (chunk_fetch) */
	DLC_STAT_CHUNK_ADMISSIONS,     /* members those reads admitted on their own thread */
	DLC_STAT_CHUNK_HITS,           /* opens served from refused members held in memory */
	DLC_STAT_CONTROL_LINES,
	DLC_STAT_CONTROL_ERRORS,
	DLC_STAT_INTERRUPTED,          /* readers that left a wait for the source with EINTR */
	DLC_STAT_EXPIRED,              /* requests answered EIO by the reaper: still unanswered
					* past their deadline (arrival + source_timeout) */
	DLC_STAT_HITS_PASSTHROUGH,     /* hits whose reads the kernel serves from the cache file */
	DLC_STAT_PASSTHROUGH_DECLINED, /* checked hits the daemon serves while passthrough is
					* on: the file had a daemon-served open, or the kernel
					* refused the backing file */
	DLC_STAT_BLOCK_HITS,           /* blocks of large files served from the cache */
	DLC_STAT_BLOCK_MISSES,         /* blocks of large files read from the source */
	DLC_STAT_BLOCK_ADMISSIONS,     /* blocks written to the cache */
	DLC_STAT_READAHEADS,           /* blocks fetched ahead of a sequential reader */
	DLC_STAT_HEAD_READS,           /* first reads of a large file served by a small source read */
	DLC_STAT_WHOLE_BLOCK_OPENS,    /* opens of a large file served whole from its cached blocks */
	DLC_STAT_UNBUFFERED_READS,     /* reads of a large file sent straight from the source:
					* no room in the memory budget for their block */
	DLC_STAT_IOCTLS,               /* ioctl(2) calls on files of the mount, each a round trip
					* (Python's open() asks every file whether it is a tty) */
	DLC_STAT_WARMED,               /* announced hits whose cache files were read ahead */
	DLC_STAT_SHARD_PREFETCHES,     /* blocks of announced large files (shards) fetched ahead */
	DLC_STAT_SHARD_PREFETCH_HITS,  /* of those, blocks handed to a reader (landed or in flight) */
	DLC_STAT_DATA_READS,           /* READ requests of dataset files the daemon answered
					* (not those the kernel served: page cache, passthrough) */
	DLC_STAT_PAGE_DROPS,           /* failed reads whose pages the kernel was told to drop
					* (src/fuse/page_drop.h) */
	DLC_STAT_COUNT,
};

struct dlc_stats {
	_Atomic uint64_t counters[DLC_STAT_COUNT];
	uint64_t lifetime_base[DLC_STAT_COUNT];    /* totals of earlier mounts; set before serving */
	pthread_mutex_t lock;                      /* guards last_error */
	char last_error[256];
};

/* One server of the cluster tier, as .stats shows it (tier.h fills it). */
struct dlc_stats_tier_server {
	char name[280];                /* HOST:PORT as configured */
	bool up;                       /* answering; false while its breaker is open */
	bool own;                      /* its address is one of this node's */
	bool full;                     /* refused an add: frozen until it restarts */
	uint64_t fill;                 /* memcached's "bytes" */
	uint64_t limit;                /* memcached's "limit_maxbytes" */
	uint64_t evictions;            /* memcached's "evictions": 0 under -M */
	uint64_t extstore_lost;        /* memcached's "extstore_objects_lost" */
	uint64_t item_max;             /* memcached's "item_size_max" (-I) */
	uint64_t hits, own_hits, misses, adds, refusals, timeouts, corrupt, bytes, skips;
	uint64_t removed;              /* values this node deleted: fell below the threshold */
};

/* Gauges and identity, gathered by the caller when .stats is read. */
struct dlc_stats_gauges {
	const char *source;
	const char *policy;
	double uptime_seconds;
	uint64_t cache_bytes;
	uint64_t cache_entries;
	uint64_t cache_capacity;
	bool admission_enabled;
	uint64_t cache_announced;      /* announced lines the planner holds, not yet read */
	bool passthrough;              /* hits may be passthrough opens (libfuse >= 3.17, granted) */
	uint64_t passthrough_backing;  /* backing ids registered with the kernel now */
	bool io_uring;                 /* requests arrive through FUSE over io_uring (io_uring=1) */
	uint64_t opens_io_uring;       /* OPENs that came through io_uring, */
	uint64_t opens_dev_fuse;       /* and those read from /dev/fuse */
	uint64_t snapshot_entries;
	uint64_t snapshot_bytes;       /* sum of file sizes in the dataset */
	uint64_t index_memory;         /* bytes of the in-memory snapshot index */
	uint64_t backend_calls[DLC_BACKEND_OP_COUNT];
	uint64_t backend_errors;
	uint64_t epoch;                /* the last "epoch N" written to .control */
	uint64_t scores_known;         /* samples with a known importance */
	unsigned source_threads;       /* the source pool: threads started, */
	unsigned source_running;       /* opens and reads waiting on the source, */
	unsigned source_queued;        /* and those waiting for a thread */
	uint64_t memory_limit;         /* the memory budget (memory_limit=): its bound, */
	uint64_t memory_used;          /* the bytes held now, */
	uint64_t memory_peak;          /* the most held at once, */
	uint64_t memory_waits;         /* and how often work waited for room */
	const struct dlc_stats_tier_server *tier;  /* the tier's servers, NULL: none */
	unsigned tier_count;
	uint64_t tier_corrupt;         /* tier values refused (sealed wrong, or not a packed
					* member's bytes), over every server list */
};

void dlc_stats_init(struct dlc_stats *stats);
void dlc_stats_destroy(struct dlc_stats *stats);

static inline void dlc_stats_add(struct dlc_stats *stats, enum dlc_stat which, uint64_t n)
{
	atomic_fetch_add_explicit(&stats->counters[which], n, memory_order_relaxed);
}

static inline uint64_t dlc_stats_get(struct dlc_stats *stats, enum dlc_stat which)
{
	return atomic_load_explicit(&stats->counters[which], memory_order_relaxed);
}

/* The JSON name of a counter ("hits", "bytes_from_cache", ...); NULL outside the enum. */
const char *dlc_stats_name(enum dlc_stat which);

/* Remembers text (truncated to 255 bytes at a UTF-8 boundary; NULL clears it)
 * as the last error shown in .stats. */
void dlc_stats_set_error(struct dlc_stats *stats, const char *text);

/* Renders the .stats document into a malloc'd, NUL-terminated *out (its length
 * in *len unless len is NULL); gauges may be NULL (all zero).  Strings are
 * escaped: control bytes as \u00XX, invalid UTF-8 as \ufffd.  0 or -ENOMEM. */
int dlc_stats_render_json(struct dlc_stats *stats, const struct dlc_stats_gauges *gauges,
			  char **out, size_t *len);

/* Writes a .stats document (made by dlc_stats_render_json) to out in
 * Prometheus's text format: one dlcache_NAME gauge per number, nested
 * sections joined by '_', a tier server's numbers labelled server="HOST:PORT";
 * strings and booleans as in print_human's reading.  0, -EINVAL when json is
 * not a .stats document, or -EIO. */
int dlc_stats_print_prometheus(const char *json, FILE *out);

/* Lifetime totals (base plus this mount) as "name value" lines, malloc'd; NULL on ENOMEM. */
char *dlc_stats_totals_encode(struct dlc_stats *stats);

/* Sets lifetime_base from text made by dlc_stats_totals_encode; unknown names
 * and blank lines are ignored, counters not named become 0; 0, or -EINVAL on a
 * malformed line (then lifetime_base is unchanged). */
int dlc_stats_totals_decode(struct dlc_stats *stats, const char *text);

/* Prints a .stats document for a person: aligned names, sizes in KiB/MiB/GiB,
 * the hit ratio; 0, -EINVAL when json is not a .stats document (no top-level
 * "hits"; nothing is printed), or -EIO when writing to out failed. */
int dlc_stats_print_human(const char *json, FILE *out);

#endif
