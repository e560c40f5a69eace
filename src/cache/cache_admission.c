/*
 * cache_admission.c - whether the cache admits now: the state a failed write
 * leaves (a full disk pauses admission for 5 s, a disk that fails otherwise
 * turns it off until remount, out of descriptors or memory fails that one
 * insert) and the one sentence logged for it.  Whole files (cache.c) and
 * blocks (cache_blocks.c) both ask and both report here; it calls neither.
 * Everything here runs with cache->lock held (cache_private.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "dlcache/deadline.h"
#include "dlcache/log.h"
#include "dlcache/stats.h"
#include "dlcache/store.h"
#include "cache_private.h"

/* A full cache disk pauses admission for this long, then it is tried again. */
#define DISK_FULL_RETRY_NS (5 * 1000000000LL)

bool dlc_cache_admitting(struct dlc_cache *cache)
{
	if (!cache->admission && cache->retry_at_ns &&
	    (int64_t)dlc_deadline_now() >= cache->retry_at_ns) {
		/* The disk was full: evictions or the user may have made room. */
		cache->admission = true;
		cache->retry_at_ns = 0;
	}
	return cache->admission;
}

void dlc_cache_write_failed(struct dlc_cache *cache, const char *path, int rc)
{
	if (rc == -ENOSPC && cache->admission) {
		cache->admission = false;
		cache->retry_at_ns = (int64_t)dlc_deadline_now() + DISK_FULL_RETRY_NS;
		dlc_log(cache->full_logged ? DLC_LOG_INFO : DLC_LOG_WARNING,
			"cache disk under %s is full: admission pauses for %d s, reads go on from the source",
			dlc_store_dir(cache->store), (int)(DISK_FULL_RETRY_NS / 1000000000LL));
		cache->full_logged = true;
		dlc_stats_set_error(cache->stats, "cache disk full: admission paused");
	} else if (rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM) {
		/* Out of descriptors or memory: this insert fails, the disk is fine. */
		if (!atomic_exchange(&cache->transient_logged, true))
			dlc_log(DLC_LOG_WARNING, "cannot cache %s: %s%s; admission goes on (logged once)", path,
				strerror(-rc), rc == -ENOMEM ? "" : ": out of descriptors, raise ulimit -n");
	} else if (rc != -ENOSPC && rc != -EEXIST && cache->admission) {
		/* A disk that fails one write (read-only, I/O errors, cache_dir
		 * removed) fails the next ones too: one warning, not one per miss. */
		cache->admission = false;
		dlc_log(DLC_LOG_WARNING, "cannot cache %s: %s; admission is off until remount, reads go on from the source",
			path, strerror(-rc));
		dlc_stats_set_error(cache->stats, "a write to the cache disk failed: admission turned off");
	}
}
