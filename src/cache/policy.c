/*
 * policy.c - admission and eviction as pure data structures.
 *
 * A policy owns the answer to "is this inode cached, and for how many bytes",
 * for every inode 1..max_ino, and keeps the sum of those charges (used) at or
 * below the capacity.  It does no I/O, never logs and takes no lock: the
 * caller serializes every call and carries out the evictions it returns.
 * For freeze, lru and none every operation is O(1) except an admission,
 * which is O(victims); importance keeps a heap, so its operations are
 * O(log n) and an admission O((victims + 1) log n).
 *
 * DESIGN
 *
 * State lives in arrays indexed by inode number, sized max_ino + 1 so that
 * no inode ever needs a hash lookup; index 0 is never a valid inode and is
 * free for a sentinel.
 *
 *   charge[ino]  the bytes ino is charged, plus one; 0 means "not cached".
 *                The offset keeps the cached bit explicit without a second
 *                array: a 0-byte file is cached with charge 1 and footprint 0.
 *                Charges are exact 64-bit byte counts (a sample of several
 *                GiB is fine), so used is the exact sum the caller charged.
 *                A charge of UINT64_MAX bytes cannot be stored; such an
 *                entry could never fit anyway and is refused.
 *   links[ino]   lru only: prev/next inode in a circular doubly linked list
 *                whose sentinel is links[0]; links[0].next is the most
 *                recently used inode, links[0].prev the least.  An all-zero
 *                array (calloc) is an empty list.
 *   heap.items[i] importance only: the cached inodes that have no announced
 *                use ahead, as a binary min-heap (children of i at 2i+1 and
 *                2i+2), ordered by rank: unknown scores (NaN) below every
 *                known one, then by score, then by inode number, so the order
 *                is total and every decision is deterministic whatever the
 *                heap's layout.
 *   plan.items[i] importance only, once an order is announced: the cached
 *                inodes whose next announced use lies ahead, as a max-heap
 *                by that use (then inode), so the root is needed last.  An
 *                entry moves between the heaps when the planner moves its
 *                next use (plan_moved): an announcement, a read, a line the
 *                readers skipped.
 *   heap_pos[ino] importance only: where ino sits in heap or plan, valid while
 *                ino is cached, so a rescore or a removal finds it in O(1);
 *                heap_of() tells which heap from plan.items[heap_pos[ino]].
 *   read_pass[ino] importance only: the pass ino was last read in (0 =
 *                never).  Only entries read in the current pass are evictable
 *                (under a per-epoch shuffle the others are sure hits in it),
 *                so the heap ranks them below every unread entry (until an
 *                order is announced: then by score alone); a read
 *                re-keys one entry, a new pass rebuilds the heap.  A pass is
 *                announced (dlc_policy_begin_pass, from `epoch N`) or, until
 *                one is, inferred: a second read of a sample in a pass
 *                starts the next.  An announced pass that reads a sample
 *                a second time, through a second line of the order or with
 *                its whole order announced before its first read
 *                (pass_whole: a job naming each sample once), draws with
 *                replacement (pass_repeats): for the rest of it, unread
 *                entries promise no hit and are evictable too.
 *   planner      importance only, from the first announcement: the announced
 *                order (planner.c), each inode's upcoming lines.
 *
 * The scores themselves belong to the caller (dlc_policy_set_scores); the
 * policy only reads them, and the caller tells it when one changed so the
 * heap can be re-keyed.
 *
 * Memory per inode: none 0 bytes, freeze 8 bytes, lru 16 bytes, importance
 * 20 bytes (charge 8, heap_pos 4, heap 4, read_pass 4), plus the struct, and
 * with an announced order 12 more (plan 4, the planner's head and tail 8)
 * and 8 per announced line.  The arrays come from calloc, so untouched pages
 * cost nothing until an inode in them is cached.
 *
 * Where a policy differs, the code switches on the kind: the admission
 * decision (dlc_policy_admit) and the eviction order (order_insert,
 * order_remove, order_touch, order_victim).  For importance order_touch is a
 * no-op and importance_victim picks each victim: without an announced order
 * the heap's root, while it was read in the current pass and is strictly
 * less important than the candidate; with one, Belady's MIN over the
 * announced horizon (see importance_victim).
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/planner.h"
#include "dlcache/policy.h"

/* The largest charge that charge[] can store (it holds bytes + 1). */
#define MAX_CHARGE (UINT64_MAX - 1)

/* The smallest victim list allocation, in items. */
#define INO_LIST_MIN_CAPACITY 16

struct lru_link {
	uint32_t prev;
	uint32_t next;
};

/* A binary heap of inodes (children of i at 2i+1 and 2i+2). */
struct ino_heap {
	uint32_t *items;
	uint32_t count;
};

struct dlc_policy {
	enum dlc_policy_kind kind;
	uint32_t max_ino;
	uint32_t entries;          /* cached inodes */
	uint64_t capacity;
	uint64_t used;             /* sum of the charges of cached inodes, <= capacity */
	uint64_t *charge;          /* bytes + 1 per inode, 0 = not cached; NULL for none */
	struct lru_link *links;    /* lru only, else NULL */
	struct ino_heap heap;      /* importance only: cached inodes not planned, min-heap by rank */
	struct ino_heap plan;      /* importance only: cached inodes planned, max-heap by next use */
	uint32_t *heap_pos;        /* importance only: index in heap or plan per cached inode */
	struct dlc_planner *planner; /* importance only: the announced order, NULL until announced */
	const float *scores;       /* importance only: the caller's, NULL = all unknown */
	uint32_t *read_pass;       /* importance only: the pass ino was last read in, 0 = never */
	uint32_t pass;             /* importance only: the current pass, from 1 */
	bool pass_announced;       /* importance only: passes come from dlc_policy_begin_pass */
	bool pass_repeats;         /* importance only: this pass draws with replacement */
	bool pass_read;            /* importance only: this pass has read a sample */
	bool pass_whole;           /* importance only: announced pass, order written before its reads */
	uint32_t announced_epoch;  /* importance only: the last epoch announced */
};

static const char *const policy_names[] = {
	[DLC_POLICY_FREEZE] = "freeze",
	[DLC_POLICY_LRU] = "lru",
	[DLC_POLICY_NONE] = "none",
	[DLC_POLICY_IMPORTANCE] = "importance",
};

#define POLICY_NAME_COUNT (sizeof(policy_names) / sizeof(policy_names[0]))

void dlc_ino_list_free(struct dlc_ino_list *list)
{
	if (list == NULL)
		return;
	free(list->items);
	list->items = NULL;
	list->count = 0;
	list->capacity = 0;
}

/* Makes room for at least want items, doubling; on -ENOMEM list is unchanged. */
static int ino_list_reserve(struct dlc_ino_list *list, size_t want)
{
	size_t capacity = list->capacity ? list->capacity : INO_LIST_MIN_CAPACITY;
	uint32_t *items;

	if (want <= list->capacity)
		return 0;
	while (capacity < want) {
		if (capacity > SIZE_MAX / 2 / sizeof(*items))
			return -ENOMEM;
		capacity *= 2;
	}
	items = realloc(list->items, capacity * sizeof(*items));
	if (items == NULL)
		return -ENOMEM;
	list->items = items;
	list->capacity = capacity;
	return 0;
}

int dlc_policy_parse(const char *name, enum dlc_policy_kind *out)
{
	if (name == NULL)
		return -EINVAL;
	for (size_t i = 0; i < POLICY_NAME_COUNT; i++) {
		if (policy_names[i] != NULL && strcmp(name, policy_names[i]) == 0) {
			*out = (enum dlc_policy_kind)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *dlc_policy_name(enum dlc_policy_kind kind)
{
	if ((unsigned)kind >= POLICY_NAME_COUNT)
		return "unknown";
	return policy_names[kind];
}

struct dlc_policy *dlc_policy_create(enum dlc_policy_kind kind, uint64_t capacity,
				     uint32_t max_ino)
{
	size_t slots = (size_t)max_ino + 1;
	struct dlc_policy *policy;

	if ((unsigned)kind >= POLICY_NAME_COUNT) {
		errno = EINVAL;
		return NULL;
	}
	if (slots == 0) {
		errno = ENOMEM;
		return NULL;
	}
	policy = calloc(1, sizeof(*policy));
	if (policy == NULL)
		goto err;
	policy->kind = kind;
	policy->max_ino = max_ino;
	policy->capacity = capacity;
	if (kind == DLC_POLICY_NONE)
		return policy;

	policy->charge = calloc(slots, sizeof(*policy->charge));
	if (policy->charge == NULL)
		goto err_policy;
	if (kind == DLC_POLICY_LRU) {
		policy->links = calloc(slots, sizeof(*policy->links));
		if (policy->links == NULL)
			goto err_charge;
	}
	if (kind == DLC_POLICY_IMPORTANCE) {
		/* slots, not max_ino: calloc(0) may be NULL, and one spare is cheap. */
		policy->heap.items = calloc(slots, sizeof(*policy->heap.items));
		if (policy->heap.items == NULL)
			goto err_charge;
		policy->heap_pos = calloc(slots, sizeof(*policy->heap_pos));
		if (policy->heap_pos == NULL)
			goto err_heap;
		policy->read_pass = calloc(slots, sizeof(*policy->read_pass));
		if (policy->read_pass == NULL)
			goto err_heap_pos;
		policy->pass = 1;
	}
	return policy;

err_heap_pos:
	free(policy->heap_pos);
err_heap:
	free(policy->heap.items);
err_charge:
	free(policy->charge);
err_policy:
	free(policy);
err:
	errno = ENOMEM;
	return NULL;
}

void dlc_policy_free(struct dlc_policy *policy)
{
	if (policy == NULL)
		return;
	dlc_planner_free(policy->planner);
	free(policy->plan.items);
	free(policy->read_pass);
	free(policy->heap_pos);
	free(policy->heap.items);
	free(policy->links);
	free(policy->charge);
	free(policy);
}

enum dlc_policy_kind dlc_policy_kind(const struct dlc_policy *policy)
{
	return policy->kind;
}

static bool ino_valid(const struct dlc_policy *policy, uint32_t ino)
{
	return ino >= 1 && ino <= policy->max_ino;
}

static bool is_cached(const struct dlc_policy *policy, uint32_t ino)
{
	return policy->charge != NULL && policy->charge[ino] != 0;
}

static uint64_t charged(const struct dlc_policy *policy, uint32_t ino)
{
	return policy->charge[ino] - 1;
}

/* Whether bytes fit in the free space now (used <= capacity always holds). */
static bool fits(const struct dlc_policy *policy, uint64_t bytes)
{
	return bytes <= MAX_CHARGE && bytes <= policy->capacity - policy->used;
}

/* Recency order: lru keeps one; freeze has none to keep. */

static void lru_unlink(struct lru_link *links, uint32_t ino)
{
	links[links[ino].prev].next = links[ino].next;
	links[links[ino].next].prev = links[ino].prev;
	links[ino].prev = 0;
	links[ino].next = 0;
}

static void lru_push_front(struct lru_link *links, uint32_t ino)
{
	uint32_t first = links[0].next;

	links[ino].prev = 0;
	links[ino].next = first;
	links[first].prev = ino;
	links[0].next = ino;
}

/* Importance order: a min-heap of cached inodes by rank. */

static float score_of(const struct dlc_policy *policy, uint32_t ino)
{
	return policy->scores != NULL ? policy->scores[ino] : NAN;
}

/* Whether ino was already read in the current pass: only those may be evicted. */
static bool read_this_pass(const struct dlc_policy *policy, uint32_t ino)
{
	return policy->read_pass[ino] == policy->pass;
}

/*
 * Whether cached ino may go for a miss that is not announced, as far as the
 * pass goes: when it was read in this pass, or when this pass is known to
 * draw with replacement (pass_repeats, see dlc_policy_consume).  The rule
 * protects the entries a per-epoch permutation is sure to read later in the
 * pass, which matters when its order is announced a window at a time; a job
 * that draws with replacement gives no such promise, and an entry it has not
 * drawn yet in the pass is the one least likely drawn.
 */
static bool evictable_this_pass(const struct dlc_policy *policy, uint32_t ino)
{
	return policy->pass_repeats || read_this_pass(policy, ino);
}

/*
 * Whether a comes before b in the heap: entries already read in this pass
 * first (the only evictable ones), then unknown scores, then score, then inode.
 * Once an order is announced the heap holds entries not needed within it,
 * and what predicts a use beyond the horizon is the score, not this pass's
 * reads: the pass no longer orders (importance_victim still requires it for
 * a miss that is not announced, so that rule only gets stricter).
 */
static bool ranks_below(const struct dlc_policy *policy, uint32_t a, uint32_t b)
{
	float score_a = score_of(policy, a);
	float score_b = score_of(policy, b);
	bool read_a = read_this_pass(policy, a);

	if (policy->planner == NULL && read_a != read_this_pass(policy, b))
		return read_a;
	if (isnan(score_a) || isnan(score_b)) {
		if (isnan(score_a) != isnan(score_b))
			return isnan(score_a);
	} else if (score_a != score_b) {
		return score_a < score_b;
	}
	return a < b;
}

/* Whether cached ino is strictly less important than a known score. */
static bool less_important(const struct dlc_policy *policy, uint32_t ino, float score)
{
	float cached_score = score_of(policy, ino);

	return isnan(cached_score) || cached_score < score;
}

/*
 * The announced order: the position of ino's next announced use, or
 * DLC_PLANNER_NEVER (beyond the horizon, or nothing announced).
 */
static uint64_t next_use(const struct dlc_policy *policy, uint32_t ino)
{
	return policy->planner != NULL ? dlc_planner_next_use(policy->planner, ino)
				       : DLC_PLANNER_NEVER;
}

/* Whether ino belongs in the plan heap (its next use is announced). */
static bool planned(const struct dlc_policy *policy, uint32_t ino)
{
	return next_use(policy, ino) != DLC_PLANNER_NEVER;
}

/* Whether a comes before b in the plan heap: the furthest next use first. */
static bool used_later(const struct dlc_policy *policy, uint32_t a, uint32_t b)
{
	uint64_t use_a = next_use(policy, a);
	uint64_t use_b = next_use(policy, b);

	if (use_a != use_b)
		return use_a > use_b;
	return a < b;
}

/* The two heaps share the code below; each has its own order. */
static bool heap_before(const struct dlc_policy *policy, const struct ino_heap *heap,
			uint32_t a, uint32_t b)
{
	return heap == &policy->plan ? used_later(policy, a, b) : ranks_below(policy, a, b);
}

static void heap_place(struct dlc_policy *policy, struct ino_heap *heap, uint32_t index,
		       uint32_t ino)
{
	heap->items[index] = ino;
	policy->heap_pos[ino] = index;
}

/* Moves the inode at index towards the root; returns whether it moved. */
static bool heap_sift_up(struct dlc_policy *policy, struct ino_heap *heap, uint32_t index)
{
	uint32_t ino = heap->items[index];
	uint32_t start = index;

	while (index > 0) {
		uint32_t parent = (index - 1) / 2;

		if (!heap_before(policy, heap, ino, heap->items[parent]))
			break;
		heap_place(policy, heap, index, heap->items[parent]);
		index = parent;
	}
	heap_place(policy, heap, index, ino);
	return index != start;
}

static void heap_sift_down(struct dlc_policy *policy, struct ino_heap *heap, uint32_t index)
{
	uint32_t ino = heap->items[index];
	uint32_t count = heap->count;

	for (;;) {
		/* 64-bit: 2 * index + 1 overflows 32 bits for the largest heaps. */
		uint64_t child = 2 * (uint64_t)index + 1;

		if (child >= count)
			break;
		if (child + 1 < count &&
		    heap_before(policy, heap, heap->items[child + 1], heap->items[child]))
			child++;
		if (!heap_before(policy, heap, heap->items[child], ino))
			break;
		heap_place(policy, heap, index, heap->items[child]);
		index = (uint32_t)child;
	}
	heap_place(policy, heap, index, ino);
}

/* The inode at index changed rank: restores the heap order around it. */
static void heap_fix(struct dlc_policy *policy, struct ino_heap *heap, uint32_t index)
{
	if (!heap_sift_up(policy, heap, index))
		heap_sift_down(policy, heap, index);
}

static void heap_push(struct dlc_policy *policy, struct ino_heap *heap, uint32_t ino)
{
	assert(heap->count < policy->max_ino + 1);
	heap_place(policy, heap, heap->count++, ino);
	heap_sift_up(policy, heap, heap->count - 1);
}

static void heap_delete(struct dlc_policy *policy, struct ino_heap *heap, uint32_t ino)
{
	uint32_t index = policy->heap_pos[ino];
	uint32_t last = heap->items[--heap->count];

	assert(heap->items[index] == ino);
	if (index == heap->count)
		return;
	heap_place(policy, heap, index, last);
	heap_fix(policy, heap, index);
}

/* Floyd's bottom-up construction: O(n) for a heap whose every key changed. */
static void heap_build(struct dlc_policy *policy, struct ino_heap *heap)
{
	for (uint32_t index = heap->count / 2; index-- > 0;)
		heap_sift_down(policy, heap, index);
}

/* The heap that holds cached ino now (its next use may just have changed). */
static struct ino_heap *heap_of(struct dlc_policy *policy, uint32_t ino)
{
	uint32_t index = policy->heap_pos[ino];

	if (index < policy->plan.count && policy->plan.items[index] == ino)
		return &policy->plan;
	return &policy->heap;
}

/* The heap that cached ino belongs in, by its next use. */
static struct ino_heap *heap_for(struct dlc_policy *policy, uint32_t ino)
{
	return planned(policy, ino) ? &policy->plan : &policy->heap;
}

/* Cached ino's rank changed (its score, its pass or its next use): it is
 * re-keyed, moving to the other heap if its next use came or went. */
static void entry_fix(struct dlc_policy *policy, uint32_t ino)
{
	struct ino_heap *from = heap_of(policy, ino);
	struct ino_heap *to = heap_for(policy, ino);

	if (from == to) {
		heap_fix(policy, from, policy->heap_pos[ino]);
		return;
	}
	heap_delete(policy, from, ino);
	heap_push(policy, to, ino);
}

static void order_insert(struct dlc_policy *policy, uint32_t ino)
{
	if (policy->kind == DLC_POLICY_LRU)
		lru_push_front(policy->links, ino);
	else if (policy->kind == DLC_POLICY_IMPORTANCE)
		heap_push(policy, heap_for(policy, ino), ino);
}

static void order_remove(struct dlc_policy *policy, uint32_t ino)
{
	if (policy->kind == DLC_POLICY_LRU)
		lru_unlink(policy->links, ino);
	else if (policy->kind == DLC_POLICY_IMPORTANCE)
		heap_delete(policy, heap_of(policy, ino), ino);
}

static void order_touch(struct dlc_policy *policy, uint32_t ino)
{
	if (policy->kind == DLC_POLICY_LRU && policy->links[0].next != ino) {
		lru_unlink(policy->links, ino);
		lru_push_front(policy->links, ino);
	}
}

/* The inode to evict first (lru only: the walk of evict_and_admit). */
static uint32_t order_victim(const struct dlc_policy *policy)
{
	return policy->kind == DLC_POLICY_LRU ? policy->links[0].prev : 0;
}

/* Accounting shared by every policy. */

static void record(struct dlc_policy *policy, uint32_t ino, uint64_t bytes)
{
	assert(fits(policy, bytes));
	policy->charge[ino] = bytes + 1;
	policy->used += bytes;
	policy->entries++;
	order_insert(policy, ino);
}

/* Drops ino's charge; the caller has already taken it out of the order. */
static void release(struct dlc_policy *policy, uint32_t ino)
{
	uint64_t bytes = charged(policy, ino);

	assert(policy->used >= bytes && policy->entries > 0);
	policy->charge[ino] = 0;
	policy->used -= bytes;
	policy->entries--;
}

static void forget(struct dlc_policy *policy, uint32_t ino)
{
	order_remove(policy, ino);
	release(policy, ino);
}

/*
 * Evicts from the cold end until bytes fit, then admits.  The victims are
 * counted before anything changes, so that growing the list is the only step
 * that can fail and a failure leaves the policy as it was.
 */
static int evict_and_admit(struct dlc_policy *policy, uint32_t ino, uint64_t bytes,
			   struct dlc_ino_list *victims)
{
	uint64_t freed = 0;
	size_t needed = 0;
	uint32_t victim = order_victim(policy);
	int rc;

	if (bytes > policy->capacity || bytes > MAX_CHARGE)
		return 0;
	while (bytes > policy->capacity - (policy->used - freed)) {
		/* The charges sum to used and bytes <= capacity: the walk ends first. */
		assert(victim != 0);
		freed += charged(policy, victim);
		needed++;
		victim = policy->links[victim].prev;
	}
	rc = ino_list_reserve(victims, needed);
	if (rc < 0)
		return rc;
	while (victims->count < needed) {
		victim = order_victim(policy);
		victims->items[victims->count++] = victim;
		forget(policy, victim);
	}
	record(policy, ino, bytes);
	return 1;
}

/*
 * importance: the next victim for a candidate whose next announced use is
 * use (DLC_PLANNER_NEVER: none) and whose score is score, or 0 when no
 * cached entry may go for it.
 *
 * Beyond the announced horizon (the heap of entries not planned) the rule
 * is the scores': the victim must have been read in the current pass and be
 * strictly less important than the candidate.  A candidate that is
 * announced outranks all of those (they are needed later than it: not
 * within the horizon), whatever their scores, and then the planned entries
 * whose next use is later than its own, the furthest first: Belady's MIN
 * over the announced horizon.  A candidate not announced never displaces an
 * announced entry.
 */
static uint32_t importance_victim(const struct dlc_policy *policy, uint64_t use, float score)
{
	if (policy->heap.count > 0) {
		uint32_t victim = policy->heap.items[0];

		if (use != DLC_PLANNER_NEVER)
			return victim;
		if (!isnan(score) && evictable_this_pass(policy, victim) &&
		    less_important(policy, victim, score))
			return victim;
		return 0;
	}
	if (policy->plan.count > 0 && use != DLC_PLANNER_NEVER &&
	    next_use(policy, policy->plan.items[0]) > use)
		return policy->plan.items[0];
	return 0;
}

/*
 * importance: admits when there is room; otherwise pops victims
 * (importance_victim) while ino does not fit.  When they cannot make room
 * (or the victim list cannot grow), the popped entries are pushed back and
 * nothing is evicted: the cached set is as it was, and since both heap
 * orders are total no later decision can tell that a heap's layout changed.
 */
static int importance_admit(struct dlc_policy *policy, uint32_t ino, uint64_t bytes,
			    struct dlc_ino_list *victims)
{
	float score = score_of(policy, ino);
	uint64_t use = next_use(policy, ino);
	uint64_t freed = 0;
	int rc = 0;

	if (fits(policy, bytes)) {
		record(policy, ino, bytes);
		return 1;
	}
	if (bytes > policy->capacity || bytes > MAX_CHARGE)
		return 0;
	while (bytes > policy->capacity - (policy->used - freed)) {
		uint32_t victim = importance_victim(policy, use, score);

		if (victim == 0)
			goto refuse;
		rc = ino_list_reserve(victims, victims->count + 1);
		if (rc < 0)
			goto refuse;
		heap_delete(policy, heap_of(policy, victim), victim);
		victims->items[victims->count++] = victim;
		freed += charged(policy, victim);
	}
	for (size_t i = 0; i < victims->count; i++)
		release(policy, victims->items[i]);
	record(policy, ino, bytes);
	return 1;

refuse:
	for (size_t i = victims->count; i-- > 0;)
		heap_push(policy, heap_for(policy, victims->items[i]), victims->items[i]);
	victims->count = 0;
	return rc;
}

/* Starts a new pass: nothing cached has been read in it yet. */
static void next_pass(struct dlc_policy *policy)
{
	if (++policy->pass == 0) {
		/* 2^32 passes: restart the stamps rather than mistake old ones. */
		memset(policy->read_pass, 0, ((size_t)policy->max_ino + 1) * sizeof(*policy->read_pass));
		policy->pass = 1;
	}
	policy->pass_repeats = false;
	policy->pass_read = false;
	policy->pass_whole = false;
	heap_build(policy, &policy->heap);
}

/*
 * importance: ino is being read.  Without announced passes, a read of a
 * sample already read in this pass starts the next one (under a per-epoch
 * permutation that is the first read of the next epoch).  Then ino is
 * stamped with the pass and, when cached, re-keyed: it became evictable.
 */
static void note_read(struct dlc_policy *policy, uint32_t ino)
{
	if (policy->kind != DLC_POLICY_IMPORTANCE)
		return;
	if (read_this_pass(policy, ino) && !policy->pass_announced)
		next_pass(policy);
	policy->pass_read = true;
	if (read_this_pass(policy, ino))
		return;
	policy->read_pass[ino] = policy->pass;
	if (is_cached(policy, ino))
		entry_fix(policy, ino);
}

void dlc_policy_begin_pass(struct dlc_policy *policy, uint32_t epoch)
{
	if (policy->kind != DLC_POLICY_IMPORTANCE)
		return;
	if (policy->pass_announced && policy->announced_epoch == epoch)
		return;
	policy->pass_announced = true;
	policy->announced_epoch = epoch;
	next_pass(policy);
}

uint32_t dlc_policy_pass(const struct dlc_policy *policy)
{
	return policy->pass;
}

int dlc_policy_admit(struct dlc_policy *policy, uint32_t ino, uint64_t bytes,
		     struct dlc_ino_list *victims)
{
	victims->count = 0;
	if (!ino_valid(policy, ino))
		return -EINVAL;
	if (is_cached(policy, ino)) {
		assert(!"dlc_policy_admit: inode already cached");
		return 0;
	}

	switch (policy->kind) {
	case DLC_POLICY_FREEZE:
		if (!fits(policy, bytes))
			return 0;
		record(policy, ino, bytes);
		return 1;
	case DLC_POLICY_LRU:
		return evict_and_admit(policy, ino, bytes, victims);
	case DLC_POLICY_NONE:
		return 0;
	case DLC_POLICY_IMPORTANCE:
		note_read(policy, ino);
		return importance_admit(policy, ino, bytes, victims);
	}
	return 0;
}

/* The planner moved ino's next use: a cached ino is re-keyed (or changes heap). */
static void plan_moved(void *arg, uint32_t ino, uint64_t before)
{
	struct dlc_policy *policy = arg;

	(void)before;
	if (is_cached(policy, ino))
		entry_fix(policy, ino);
}

int dlc_policy_announce(struct dlc_policy *policy, uint32_t ino)
{
	if (!ino_valid(policy, ino))
		return -EINVAL;
	if (policy->kind != DLC_POLICY_IMPORTANCE)
		return 0;
	if (policy->planner == NULL) {
		size_t slots = (size_t)policy->max_ino + 1;

		policy->plan.items = calloc(slots, sizeof(*policy->plan.items));
		policy->planner = dlc_planner_create(policy->max_ino, plan_moved, policy);
		if (policy->plan.items == NULL || policy->planner == NULL) {
			dlc_planner_free(policy->planner);
			free(policy->plan.items);
			policy->planner = NULL;
			policy->plan.items = NULL;
			return -ENOMEM;
		}
		/* The heap's order no longer counts the pass (ranks_below). */
		heap_build(policy, &policy->heap);
	}
	policy->pass_whole = policy->pass_announced && !policy->pass_read;
	return dlc_planner_announce(policy->planner, ino);
}

void dlc_policy_consume(struct dlc_policy *policy, uint32_t ino)
{
	bool announced;

	if (policy->planner == NULL)
		return;
	announced = dlc_planner_consume(policy->planner, ino);
	/*
	 * Called before this read is noted, so read_this_pass means "read before
	 * in this pass": a repeat.  It shows the pass draws with replacement
	 * when a line named the sample again, or when the pass's whole order
	 * was written before its first read (a job naming each drawn sample
	 * once, as examples/dlcache.py's DistributedSlicer does): a sample with no line left and
	 * not read yet is then one the pass does not read at all.  A repeat
	 * with the order written a window at a time may be a file opened twice
	 * by accident under a permutation, and does not count.
	 */
	if (policy->pass_announced && read_this_pass(policy, ino) &&
	    (announced || policy->pass_whole))
		policy->pass_repeats = true;
}

uint64_t dlc_policy_announced(const struct dlc_policy *policy)
{
	return policy->planner != NULL ? dlc_planner_lines(policy->planner) : 0;
}

int dlc_policy_restore(struct dlc_policy *policy, uint32_t ino, uint64_t bytes)
{
	if (!ino_valid(policy, ino))
		return -EINVAL;
	if (policy->kind == DLC_POLICY_NONE)
		return -ENOSPC;
	if (is_cached(policy, ino))
		return -EEXIST;
	if (!fits(policy, bytes))
		return -ENOSPC;
	/* lru: each restored entry becomes the most recent, so the first is the coldest. */
	record(policy, ino, bytes);
	return 0;
}

void dlc_policy_hit(struct dlc_policy *policy, uint32_t ino)
{
	if (ino_valid(policy, ino) && is_cached(policy, ino)) {
		order_touch(policy, ino);
		note_read(policy, ino);
	}
}

void dlc_policy_remove(struct dlc_policy *policy, uint32_t ino)
{
	if (ino_valid(policy, ino) && is_cached(policy, ino))
		forget(policy, ino);
}

void dlc_policy_set_scores(struct dlc_policy *policy, const float *scores)
{
	if (policy->kind != DLC_POLICY_IMPORTANCE)
		return;
	policy->scores = scores;
	/* Restored entries were keyed by the old scores (none). */
	heap_build(policy, &policy->heap);
}

void dlc_policy_rescore(struct dlc_policy *policy, uint32_t ino)
{
	if (policy->kind == DLC_POLICY_IMPORTANCE && ino_valid(policy, ino) &&
	    is_cached(policy, ino) && heap_of(policy, ino) == &policy->heap)
		heap_fix(policy, &policy->heap, policy->heap_pos[ino]);
}

void dlc_policy_rescore_all(struct dlc_policy *policy)
{
	if (policy->kind == DLC_POLICY_IMPORTANCE)
		heap_build(policy, &policy->heap);
}

bool dlc_policy_contains(const struct dlc_policy *policy, uint32_t ino)
{
	return ino_valid(policy, ino) && is_cached(policy, ino);
}

uint64_t dlc_policy_used(const struct dlc_policy *policy)
{
	return policy->used;
}

uint32_t dlc_policy_entries(const struct dlc_policy *policy)
{
	return policy->entries;
}

uint64_t dlc_policy_capacity(const struct dlc_policy *policy)
{
	return policy->capacity;
}

/* Checks of dlc_policy_verify, one per structure. */

static bool lru_consistent(const struct dlc_policy *policy)
{
	const struct lru_link *links = policy->links;
	uint32_t count = 0;

	for (uint32_t ino = links[0].next; ino != 0; ino = links[ino].next) {
		if (!ino_valid(policy, ino) || !is_cached(policy, ino) ||
		    links[links[ino].next].prev != ino || ++count > policy->entries)
			return false;
	}
	return count == policy->entries && links[links[0].next].prev == 0;
}

/* One heap: positions right, order kept, each entry in the heap its next use says. */
static bool heap_consistent(const struct dlc_policy *policy, const struct ino_heap *heap)
{
	for (uint32_t index = 0; index < heap->count; index++) {
		uint32_t ino = heap->items[index];

		if (!ino_valid(policy, ino) || !is_cached(policy, ino) ||
		    policy->heap_pos[ino] != index)
			return false;
		if (index > 0 && heap_before(policy, heap, ino, heap->items[(index - 1) / 2]))
			return false;
		if (policy->read_pass[ino] > policy->pass)
			return false;
		if (planned(policy, ino) != (heap == &policy->plan))
			return false;
	}
	return true;
}

static bool importance_consistent(const struct dlc_policy *policy)
{
	if (policy->heap.count + policy->plan.count != policy->entries)
		return false;
	if (policy->planner != NULL && dlc_planner_verify(policy->planner) < 0)
		return false;
	return heap_consistent(policy, &policy->heap) && heap_consistent(policy, &policy->plan);
}

int dlc_policy_verify(const struct dlc_policy *policy)
{
	uint64_t used = 0;
	uint32_t entries = 0;

	if (policy->used > policy->capacity)
		return -EUCLEAN;
	if (policy->charge == NULL)
		return policy->used == 0 && policy->entries == 0 ? 0 : -EUCLEAN;
	if (policy->charge[0] != 0)
		return -EUCLEAN;
	for (uint32_t ino = 1; ino <= policy->max_ino; ino++) {
		if (is_cached(policy, ino)) {
			used += charged(policy, ino);
			entries++;
		}
	}
	if (used != policy->used || entries != policy->entries)
		return -EUCLEAN;
	if (policy->kind == DLC_POLICY_LRU && !lru_consistent(policy))
		return -EUCLEAN;
	if (policy->kind == DLC_POLICY_IMPORTANCE && !importance_consistent(policy))
		return -EUCLEAN;
	return 0;
}
