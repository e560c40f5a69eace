/*
 * policy.c - admission and eviction as pure data structures.
 *
 * A policy owns the answer to "is this inode cached, and for how many bytes",
 * for every inode 1..max_ino, and keeps the sum of those charges (used) at or
 * below the capacity.  It does no I/O, never logs and takes no lock: the
 * caller serializes every call and carries out the evictions it returns.
 * Every operation is O(1) except an admission, which is O(victims).
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
 *
 * Memory per inode: none 0 bytes, freeze 8 bytes, lru 16 bytes (plus the
 * struct).  The arrays come from calloc, so untouched pages cost nothing
 * until an inode in them is cached.
 *
 * Where a policy differs, the code switches on the kind: the admission
 * decision (admit) and the recency order (order_insert, order_remove,
 * order_touch, order_victim).  An "importance" policy slots in there: its
 * order is a min-heap of cached inodes keyed by score with a position array
 * (heap index per inode, another uint32 per inode); order_victim is the heap
 * root, order_touch a no-op, and its admit evicts roots only while they are
 * less important than the candidate.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/policy.h"

/* The largest charge that charge[] can store (it holds bytes + 1). */
#define MAX_CHARGE (UINT64_MAX - 1)

/* The smallest victim list allocation, in items. */
#define INO_LIST_MIN_CAPACITY 16

struct lru_link {
	uint32_t prev;
	uint32_t next;
};

struct dlc_policy {
	enum dlc_policy_kind kind;
	uint32_t max_ino;
	uint32_t entries;          /* cached inodes */
	uint64_t capacity;
	uint64_t used;             /* sum of the charges of cached inodes, <= capacity */
	uint64_t *charge;          /* bytes + 1 per inode, 0 = not cached; NULL for none */
	struct lru_link *links;    /* lru only, else NULL */
};

static const char *const policy_names[] = {
	[DLC_POLICY_FREEZE] = "freeze",
	[DLC_POLICY_LRU] = "lru",
	[DLC_POLICY_NONE] = "none",
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
	return policy;

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

static void order_insert(struct dlc_policy *policy, uint32_t ino)
{
	if (policy->kind == DLC_POLICY_LRU)
		lru_push_front(policy->links, ino);
}

static void order_remove(struct dlc_policy *policy, uint32_t ino)
{
	if (policy->kind == DLC_POLICY_LRU)
		lru_unlink(policy->links, ino);
}

static void order_touch(struct dlc_policy *policy, uint32_t ino)
{
	if (policy->kind == DLC_POLICY_LRU && policy->links[0].next != ino) {
		lru_unlink(policy->links, ino);
		lru_push_front(policy->links, ino);
	}
}

/* The inode to evict first, 0 when there is none. */
static uint32_t order_victim(const struct dlc_policy *policy)
{
	if (policy->kind == DLC_POLICY_LRU)
		return policy->links[0].prev;
	return 0;
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

static void forget(struct dlc_policy *policy, uint32_t ino)
{
	uint64_t bytes = charged(policy, ino);

	assert(policy->used >= bytes && policy->entries > 0);
	order_remove(policy, ino);
	policy->charge[ino] = 0;
	policy->used -= bytes;
	policy->entries--;
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
	}
	return 0;
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
	if (ino_valid(policy, ino) && is_cached(policy, ino))
		order_touch(policy, ino);
}

void dlc_policy_remove(struct dlc_policy *policy, uint32_t ino)
{
	if (ino_valid(policy, ino) && is_cached(policy, ino))
		forget(policy, ino);
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
