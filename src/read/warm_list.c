/*
 * warm_list.c - the ring of announced hits to read ahead, and the advice
 * that reads one ahead (warm_list.h).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "dlcache/cache.h"
#include "dlcache/stats.h"
#include "warm_list.h"

int dlc_warm_list_init(struct dlc_warm_list *list, unsigned size)
{
	*list = (struct dlc_warm_list) { .size = size };
	list->ino = calloc(size, sizeof(*list->ino));
	list->seq = calloc(size, sizeof(*list->seq));
	if (!list->ino || !list->seq) {
		dlc_warm_list_free(list);
		return -ENOMEM;
	}
	return 0;
}

void dlc_warm_list_free(struct dlc_warm_list *list)
{
	free(list->ino);
	free(list->seq);
	list->ino = NULL;
	list->seq = NULL;
	list->size = list->count = list->kept = 0;
}

bool dlc_warm_list_full(const struct dlc_warm_list *list)
{
	return list->count + list->kept >= list->size;
}

void dlc_warm_list_keep(struct dlc_warm_list *list)
{
	assert(list->count + list->kept < list->size);
	list->kept++;
}

void dlc_warm_list_unkeep(struct dlc_warm_list *list)
{
	assert(list->kept > 0);
	list->kept--;
}

void dlc_warm_list_push_kept(struct dlc_warm_list *list, uint32_t ino, uint64_t seq)
{
	unsigned at = list->count;

	assert(list->kept > 0 && list->count < list->size);
	list->kept--;
	/* Workers push in the order their cache checks end, not the order they
	 * took the entries: later ones move up a slot (a few at most, one per
	 * other worker), else an earlier hit would wait behind one not yet due,
	 * and be never read ahead. */
	for (; at > 0; at--) {
		unsigned prev = (list->head + at - 1) % list->size;
		unsigned slot = (list->head + at) % list->size;

		if (list->seq[prev] < seq)
			break;
		list->ino[slot] = list->ino[prev];
		list->seq[slot] = list->seq[prev];
	}
	list->ino[(list->head + at) % list->size] = ino;
	list->seq[(list->head + at) % list->size] = seq;
	list->count++;
}

bool dlc_warm_list_first(const struct dlc_warm_list *list, uint32_t *ino, uint64_t *seq)
{
	if (list->count == 0)
		return false;
	*ino = list->ino[list->head];
	*seq = list->seq[list->head];
	return true;
}

void dlc_warm_list_pop(struct dlc_warm_list *list)
{
	assert(list->count > 0);
	list->head = (list->head + 1) % list->size;
	list->count--;
}

void dlc_warm_list_clear(struct dlc_warm_list *list)
{
	list->count = 0;
}

void dlc_warm_file(struct dlc_cache *cache, struct dlc_stats *stats, uint32_t ino)
{
	int fd;

	if (dlc_cache_open_checked(cache, ino, &fd) != DLC_CACHE_OPENED)
		return;
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED) == 0)
		dlc_stats_add(stats, DLC_STAT_WARMED, 1);
	close(fd);
}
