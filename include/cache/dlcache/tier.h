/*
 * tier.h - the cluster tier: a client of one memcached per node, between the
 * local cache and the source (DESIGN.md, "The read path with tiers").
 *
 * A local miss asks the key's owner (tier_place.h) before the source; after a
 * source read the bytes are offered to the owner with memcached's add.  The
 * tier never fails a read: every error, timeout, refusal or bad value is a
 * miss to the caller, who then reads the source, so the tier can slow a read
 * by at most its timeout.  Values are sealed under the job's key
 * (tier_seal.h) and opened before a byte is served; one that does not open
 * (forged, moved, replayed from another snapshot, altered) is counted as
 * corrupt and deleted.  A tier has servers only once it has a key.
 *
 * Admission.  Each server is filled with add and then frozen: memcached runs
 * with -M, so when its memory is used up it refuses instead of evicting; a
 * refusal once its fill is at 95% of its limit marks the server full and no
 * more is offered to it until it restarts empty (its pid or uptime says so);
 * an earlier refusal only counts (one of memcached's size classes is out of
 * room).  With a threshold set, a sample scoring below it is not offered.
 *
 * A tier with no servers is "off": every get is a miss, no offer is made.
 */
#ifndef DLCACHE_TIER_H
#define DLCACHE_TIER_H

#include <stdbool.h>
#include <stdint.h>

#include "dlcache/stats.h"

#define DLC_TIER_DEFAULT_TIMEOUT_MS 200
/* Largest payload offered: memcached's default item size (1 MiB) less room
 * for the item header, key and seal. */
#define DLC_TIER_VALUE_MAX ((1u << 20) - 1024)
/* Most servers in one tier. */
#define DLC_TIER_MAX_SERVERS 256

struct dlc_tier; /* opaque */

/*
 * A tier for the snapshot with identity snapshot_id (dlc_snapshot_id); each
 * call to a server waits at most timeout_ms milliseconds (0: the default).
 * Starts off.  0 or -ENOMEM.
 */
int dlc_tier_create(uint64_t snapshot_id, unsigned timeout_ms, struct dlc_tier **out);

/* Starts the health thread (breaker probes, memcached's own counters); call
 * after daemonizing.  Until then a server that stops answering stays
 * skipped.  0 or -errno. */
int dlc_tier_start(struct dlc_tier *tier);
void dlc_tier_free(struct dlc_tier *tier);

/*
 * Derives the key values are sealed with from the tier_key file's bytes
 * (secret, len bytes; dlc_tier_key_read).  Call before serving, before any
 * server is set.  0, -ENOMEM or -EIO.
 */
int dlc_tier_set_key(struct dlc_tier *tier, const unsigned char *secret, size_t len);

/*
 * Replaces the server list with the HOST:PORT words of text (separated by
 * blanks or newlines; '#' starts a comment to the end of its line); an empty
 * list turns the tier off.  Waits for gets and offers in progress.  0, or
 * -EINVAL with *cause (the list is unchanged: also when it names servers
 * and the tier has no key), or -ENOMEM.
 */
int dlc_tier_set_servers(struct dlc_tier *tier, const char *text, char **cause);

/* Reads a tier_servers file: its text in *text (malloc'd) after checking it
 * names at least one server and every line parses.  0 or -errno with *cause. */
int dlc_tier_read_file(const char *path, char **text, char **cause);

/* True when at least one server is configured. */
bool dlc_tier_on(struct dlc_tier *tier);

/*
 * Opens the tier's value of ino (size bytes, its snapshot size) into buf;
 * with xxh3 not NULL (a packed member's recorded hash) its bytes must also
 * hash to *xxh3.  0 on a checked hit; -ENOENT otherwise (off, owner down,
 * not there, timed out, refused, bad value): buf holds nothing usable and
 * the caller reads the source.
 */
int dlc_tier_get(struct dlc_tier *tier, uint32_t ino, void *buf, uint64_t size,
		 const uint64_t *xxh3);

/* Values refused since the tier was made (sealed wrong, or not the packed
 * member's bytes), whatever server held them: .stats tier.corrupt. */
uint64_t dlc_tier_corrupt(struct dlc_tier *tier);

/* Offers ino's bytes just read from the source to their owner (add: a value
 * already there is kept).  Skipped when off, the owner is down or full, the
 * file is larger than DLC_TIER_VALUE_MAX, or score is below the owner's
 * threshold.  score is NaN when unknown. */
void dlc_tier_offer(struct dlc_tier *tier, uint32_t ino, const void *data, uint64_t size,
		    float score);

/* Samples scoring below threshold (NaN: no threshold) are no longer offered
 * to any server. */
void dlc_tier_set_threshold(struct dlc_tier *tier, float threshold);

struct dlc_cache;
struct dlc_snapshot;

/*
 * Sets the threshold from the ranks: when the regular files small enough for
 * the tier do not fit in the servers' budget (80% of their limits, what
 * memcached's slabs hold in values), only the highest-scored ones that fit
 * are offered from now on (dlc_tier_place_threshold); otherwise every one.
 * Reads every score (dlc_cache_score): O(files log files), call per epoch.
 * 0; -EAGAIN before the health thread has read every server's limit;
 * -ENOMEM.  Values already stored that fall below it stay (not removed).
 */
int dlc_tier_plan(struct dlc_tier *tier, struct dlc_cache *cache,
		  const struct dlc_snapshot *snapshot);

/* Fills out (at most max entries) with each server's state and counters;
 * returns the number of servers. */
/*
 * Queues count samples (inos) for removal from the tier: the health thread
 * deletes those whose owner is this node's own server, a slice per period,
 * and counts them in "removed".  Replaces what was queued.  0 or -ENOMEM.
 */
int dlc_tier_prune(struct dlc_tier *tier, const uint32_t *inos, size_t count);

unsigned dlc_tier_gauges(struct dlc_tier *tier, struct dlc_stats_tier_server *out, unsigned max);

/* Asserts the tier's invariants (for tests and debug builds). */
void dlc_tier_verify(struct dlc_tier *tier);

#endif
