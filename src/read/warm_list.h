/*
 * warm_list.h - the announced hits waiting to be read ahead (prefetch.c's
 * "Announced hits are read ahead"): a ring of inodes in announced order,
 * each with its sequence number, and the count of slots kept for plan
 * entries a worker is looking at.  Not locked itself: the fetcher holds its
 * lock around every call.  Private to src/read/.
 */
#ifndef DLCACHE_READ_WARM_LIST_H
#define DLCACHE_READ_WARM_LIST_H

#include <stdbool.h>
#include <stdint.h>

struct dlc_cache;
struct dlc_stats;

struct dlc_warm_list {
	uint32_t *ino;
	uint64_t *seq;
	unsigned size;          /* slots */
	unsigned head;          /* the first entry */
	unsigned count;         /* entries */
	unsigned kept;          /* slots kept for entries not pushed yet */
};

/* size slots (>= 1); 0 or -ENOMEM. */
int dlc_warm_list_init(struct dlc_warm_list *list, unsigned size);
void dlc_warm_list_free(struct dlc_warm_list *list);

/* Whether every slot is taken or kept. */
bool dlc_warm_list_full(const struct dlc_warm_list *list);

/* Keeps a slot for a plan entry that may turn out a hit; gives one back. */
void dlc_warm_list_keep(struct dlc_warm_list *list);
void dlc_warm_list_unkeep(struct dlc_warm_list *list);

/* Puts an entry into a kept slot (one must be kept), in sequence order:
 * workers push hits as their cache checks end, not in the order they took
 * them, and only the first entry is looked at. */
void dlc_warm_list_push_kept(struct dlc_warm_list *list, uint32_t ino, uint64_t seq);

/* The first entry; false when the list is empty. */
bool dlc_warm_list_first(const struct dlc_warm_list *list, uint32_t *ino, uint64_t *seq);

/* Drops the first entry (there is one). */
void dlc_warm_list_pop(struct dlc_warm_list *list);

/* Drops every entry (kept slots stay kept: their workers give them back). */
void dlc_warm_list_clear(struct dlc_warm_list *list);

/*
 * Asks the kernel to read ino's cache file ahead (POSIX_FADV_WILLNEED), if
 * the entry was checked in this mount (an unchecked one is read whole by
 * its first hit anyway), and counts it as warmed.  The advice only starts
 * the reads: nothing waits for the disk here.  Call without the fetcher's lock.
 */
void dlc_warm_file(struct dlc_cache *cache, struct dlc_stats *stats, uint32_t ino);

#endif
