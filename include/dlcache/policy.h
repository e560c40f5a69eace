/*
 * policy.h - admission and eviction, as pure data structures.
 *
 * A policy tracks which inodes are cached and how many bytes they are charged
 * (their footprint), and never lets the total exceed its capacity: an entry
 * is charged from the moment it is admitted, before its bytes are written, so
 * in-flight inserts count.  It does no I/O and never logs; the caller holds
 * one lock around every call and carries out the evictions it returns.
 *
 *   freeze  admit while there is room, never evict: with per-epoch shuffling
 *           this keeps a hit ratio equal to the cache fraction, which is optimal.
 *   lru     admit always (if it fits at all), evict least recently used first.
 *   none    admit nothing.
 *
 * The same code runs in the daemon and in the simulator.
 */
#ifndef DLCACHE_POLICY_H
#define DLCACHE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum dlc_policy_kind {
	DLC_POLICY_FREEZE = 0,
	DLC_POLICY_LRU,
	DLC_POLICY_NONE,
};

/* A growable list of inodes (victims of an admission). */
struct dlc_ino_list {
	uint32_t *items;
	size_t count;
	size_t capacity;
};

void dlc_ino_list_free(struct dlc_ino_list *list);

/* "freeze", "lru", "none" -> kind; 0 or -EINVAL. */
int dlc_policy_parse(const char *name, enum dlc_policy_kind *out);
const char *dlc_policy_name(enum dlc_policy_kind kind);

struct dlc_policy; /* opaque */

/* A policy for inodes 1..max_ino holding at most capacity bytes; NULL on ENOMEM
 * (errno EINVAL for an unknown kind).  Memory: none 0, freeze 8, lru 16 bytes
 * per inode (calloc'd, so pages of never-cached inodes cost nothing). */
struct dlc_policy *dlc_policy_create(enum dlc_policy_kind kind, uint64_t capacity,
				     uint32_t max_ino);
void dlc_policy_free(struct dlc_policy *policy);
enum dlc_policy_kind dlc_policy_kind(const struct dlc_policy *policy);

/*
 * Offers ino (not cached) charged bytes.  Returns 1 when admitted: ino is now
 * cached and the inodes to evict, already removed from the policy, are
 * appended to victims (cleared first), coldest first.  Returns 0 when not
 * admitted (an already cached ino asserts in debug builds and gives 0),
 * -ENOMEM (the policy is unchanged), or -EINVAL for ino outside 1..max_ino.
 * victims starts as { 0 } and is reused across calls; dlc_ino_list_free it.
 */
int dlc_policy_admit(struct dlc_policy *policy, uint32_t ino, uint64_t bytes,
		     struct dlc_ino_list *victims);

/* Records ino as cached without a decision (a persisted entry at mount);
 * 0, or -ENOSPC when it does not fit (then it is not recorded; always for
 * none), -EEXIST when already cached, -EINVAL for ino outside 1..max_ino.
 * lru: each restored ino becomes the most recent, so restore the oldest first. */
int dlc_policy_restore(struct dlc_policy *policy, uint32_t ino, uint64_t bytes);

/* A cache hit on ino (lru moves it to the front); a no-op when not cached. */
void dlc_policy_hit(struct dlc_policy *policy, uint32_t ino);

/* Forgets ino (its bytes were dropped); a no-op when it is not cached. */
void dlc_policy_remove(struct dlc_policy *policy, uint32_t ino);

bool dlc_policy_contains(const struct dlc_policy *policy, uint32_t ino);
uint64_t dlc_policy_used(const struct dlc_policy *policy);
uint32_t dlc_policy_entries(const struct dlc_policy *policy);
uint64_t dlc_policy_capacity(const struct dlc_policy *policy);

#endif
