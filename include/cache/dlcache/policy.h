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
 *   importance  (SHADE) keep the samples with the highest scores: cached
 *           entries sit in a min-heap by score; a miss is admitted if there is
 *           room, otherwise only if its score is strictly greater than the
 *           heap's minimum, evicting minima (each strictly below it) until it
 *           fits.  An unknown score (NaN) ranks below every known one, and an
 *           unknown-scored miss never evicts: with no scores at all this is
 *           freeze.  Pass-aware: a victim must already have been read in the
 *           current pass (a cached entry not yet read will be hit in this
 *           pass; evicting it for a miss that will not be read again in this
 *           pass loses a hit and gains nothing), otherwise the miss bypasses.
 *           So under a per-epoch permutation every entry cached when a pass
 *           starts is hit in it: importance never falls below freeze.  A pass
 *           is what dlc_policy_begin_pass announces; without announcements it
 *           ends when a sample already read in it is read again.
 *           With an announced order (dlc_policy_announce, `prefetch PATH`
 *           lines) it plans: the order is the future, so a cached entry
 *           whose next announced use is furthest goes first (one with no
 *           announced use, lowest score first, before any announced one),
 *           and a miss whose next use is later than all of theirs bypasses:
 *           Belady's MIN over the announced horizon.  Beyond it (a miss not
 *           announced again) the rule above holds among the entries not
 *           announced, ranked by score alone, and a miss not announced
 *           never displaces an announced entry.
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
	DLC_POLICY_IMPORTANCE,
};

/* A growable list of inodes (victims of an admission). */
struct dlc_ino_list {
	uint32_t *items;
	size_t count;
	size_t capacity;
};

void dlc_ino_list_free(struct dlc_ino_list *list);

/* "freeze", "lru", "none", "importance" -> kind; 0 or -EINVAL. */
int dlc_policy_parse(const char *name, enum dlc_policy_kind *out);
const char *dlc_policy_name(enum dlc_policy_kind kind);

struct dlc_policy; /* opaque */

/* A policy for inodes 1..max_ino holding at most capacity bytes; NULL on ENOMEM
 * (errno EINVAL for an unknown kind).  Memory: none 0, freeze 8, lru 16,
 * importance 20 bytes per inode (calloc'd, so pages of never-cached inodes
 * cost nothing), and once an order is announced 12 more per inode and 8 per
 * announced line not yet read (planner.h). */
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
 * importance: "coldest first" is lowest rank first (unknown, then lowest
 * score, then lowest inode); an admission that cannot make room from
 * entries strictly less important than ino evicts nothing and gives 0.
 */
int dlc_policy_admit(struct dlc_policy *policy, uint32_t ino, uint64_t bytes,
		     struct dlc_ino_list *victims);

/*
 * The job announced that ino will be read after everything announced
 * before it (a `prefetch PATH` line).  0; -ENOSPC when the planner holds
 * DLC_PLANNER_MAX_LINES unread lines (the line is not planned), -ENOMEM,
 * -EINVAL for ino outside 1..max_ino.  importance only; other kinds ignore
 * it (0).
 */
int dlc_policy_announce(struct dlc_policy *policy, uint32_t ino);

/*
 * A reader opened ino: its earliest announced line is read, and the lines
 * the readers have left behind are dropped (planner.h).  Call before the
 * hit or the admission of that read.  A no-op without an announced order.
 * In an announced pass, a second read of a sample (through a second line,
 * or with the pass's whole order announced before its first read) marks
 * the pass as drawn with replacement (see policy.c).
 */
void dlc_policy_consume(struct dlc_policy *policy, uint32_t ino);

/* Announced lines not yet read (0 without an announced order). */
uint64_t dlc_policy_announced(const struct dlc_policy *policy);

/* Records ino as cached without a decision (a persisted entry at mount);
 * 0, or -ENOSPC when it does not fit (then it is not recorded; always for
 * none), -EEXIST when already cached, -EINVAL for ino outside 1..max_ino.
 * lru: each restored ino becomes the most recent, so restore the oldest first. */
int dlc_policy_restore(struct dlc_policy *policy, uint32_t ino, uint64_t bytes);

/*
 * The job announced epoch (an `epoch N` line): a new pass starts unless it is
 * the epoch already announced, and from then on passes are only announced,
 * never inferred.  importance only; other kinds ignore it.
 */
void dlc_policy_begin_pass(struct dlc_policy *policy, uint32_t epoch);

/* The current pass number (from 1; importance only, else 0). */
uint32_t dlc_policy_pass(const struct dlc_policy *policy);

/* A cache hit on ino (lru moves it to the front, importance stamps it read in
 * this pass); a no-op when not cached.  dlc_policy_admit stamps its ino too. */
void dlc_policy_hit(struct dlc_policy *policy, uint32_t ino);

/* Forgets ino (its bytes were dropped); a no-op when it is not cached. */
void dlc_policy_remove(struct dlc_policy *policy, uint32_t ino);

/*
 * Gives an importance policy the per-inode scores it ranks by: scores has
 * max_ino + 1 floats indexed by inode, NaN meaning unknown, and outlives the
 * policy.  Call before the first admit or restore (called later, it re-keys
 * what is cached in O(n)); other kinds ignore it.  Without it, every score is
 * unknown.
 */
void dlc_policy_set_scores(struct dlc_policy *policy, const float *scores);

/* scores[ino] changed: a cached entry is re-keyed in O(log n). */
void dlc_policy_rescore(struct dlc_policy *policy, uint32_t ino);

/* Many scores changed (a reset): every cached entry is re-keyed in O(n). */
void dlc_policy_rescore_all(struct dlc_policy *policy);

bool dlc_policy_contains(const struct dlc_policy *policy, uint32_t ino);
uint64_t dlc_policy_used(const struct dlc_policy *policy);
uint32_t dlc_policy_entries(const struct dlc_policy *policy);
uint64_t dlc_policy_capacity(const struct dlc_policy *policy);

/*
 * Checks every internal invariant in O(max_ino + announced lines): the
 * charges sum to used, the entries are counted, the lru list or the
 * importance heaps (order, positions; planned entries in the plan heap, the
 * others in the heap by rank) hold exactly the cached inodes, and the
 * planner's chains are whole.  0, or -EUCLEAN.  For tests.
 */
int dlc_policy_verify(const struct dlc_policy *policy);

#endif
