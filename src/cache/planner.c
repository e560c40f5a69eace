/*
 * planner.c - the announced order of reads: per inode, a queue of its
 * upcoming lines, so that "when is ino next needed" is O(1).
 *
 * The importance policy plans with it (Belady's MIN over the announced
 * horizon, see policy.c); it is a pure data structure: no I/O, no lock, no
 * logging, every call serialized by the policy's caller.
 *
 * DESIGN
 *
 * Every announced line has a position (seq), counted from 1 in a 64-bit
 * number that never wraps.  The lines held, from base (the oldest not yet
 * dropped) to next_seq (the next to announce), sit in a ring of a power of
 * two slots, slot = seq mod ring_size, two 32-bit words each:
 *
 *   line_ino[slot]   the inode announced, 0 once the line was read (or for
 *                    a burnt position, below);
 *   line_next[slot]  the next unread line of the same inode, 0 for none.
 *
 * Per inode, head[ino] is its earliest unread line and tail[ino] its latest
 * (valid while head is not 0), so each inode's unread lines form a chain
 * from head through line_next: appending is O(1), and so is consuming the
 * earliest.  Positions are stored as their low 32 bits (8 bytes a line,
 * 8 an inode): the lines held always lie within 2^32 of base, so
 * full_seq() recovers the 64-bit position from them.  0 stands for "none",
 * so a position whose low 32 bits are 0 is never given to a line: it is
 * burnt (held as an already read line).
 *
 * Readers consume lines slightly out of order.  An open consumes its
 * inode's earliest unread line and moves the frontier (the furthest line
 * read) to it when further; the lines more than DLC_PLANNER_SLACK behind
 * the frontier are dropped (skipped: the reader passed them), and so are the
 * read lines at base, so the ring holds the unread future plus at most the
 * slack.  Each consumed or dropped line changes its inode's head: the
 * policy is told (moved()) so it can re-key that inode.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/planner.h"

/* The first ring: 64 Ki lines (512 KiB). */
#define RING_MIN (1u << 16)

struct dlc_planner {
	uint32_t max_ino;
	uint32_t *head;         /* per inode: low 32 bits of its earliest unread line, 0 = none */
	uint32_t *tail;         /* per inode: low 32 bits of its latest line, while head != 0 */
	uint32_t *line_ino;     /* per slot: the inode of the line, 0 = read or burnt */
	uint32_t *line_next;    /* per slot: low 32 bits of the inode's next unread line, 0 = none */
	uint64_t ring_size;     /* slots, a power of two; 0 before the first line */
	uint64_t base;          /* the oldest line held */
	uint64_t next_seq;      /* the position of the next line announced */
	uint64_t frontier;      /* the furthest line read (base - 1 before any) */
	uint64_t unread;        /* lines held and not read */
	dlc_planner_moved_fn moved;
	void *moved_arg;
};

static uint64_t slot_of(const struct dlc_planner *planner, uint64_t seq)
{
	return seq & (planner->ring_size - 1);
}

/* The 64-bit position of a line held, from its low 32 bits. */
static uint64_t full_seq(const struct dlc_planner *planner, uint32_t low)
{
	return planner->base + (uint32_t)(low - (uint32_t)planner->base);
}

struct dlc_planner *dlc_planner_create(uint32_t max_ino, dlc_planner_moved_fn moved, void *arg)
{
	struct dlc_planner *planner = calloc(1, sizeof(*planner));

	if (planner == NULL)
		return NULL;
	planner->max_ino = max_ino;
	planner->head = calloc((size_t)max_ino + 1, sizeof(*planner->head));
	planner->tail = calloc((size_t)max_ino + 1, sizeof(*planner->tail));
	if (planner->head == NULL || planner->tail == NULL) {
		dlc_planner_free(planner);
		return NULL;
	}
	planner->base = 1;
	planner->next_seq = 1;
	planner->frontier = 0;
	planner->moved = moved;
	planner->moved_arg = arg;
	return planner;
}

void dlc_planner_free(struct dlc_planner *planner)
{
	if (planner == NULL)
		return;
	free(planner->line_next);
	free(planner->line_ino);
	free(planner->tail);
	free(planner->head);
	free(planner);
}

/* Makes room for one more line in the ring; 0, -ENOSPC or -ENOMEM. */
static int ring_reserve(struct dlc_planner *planner)
{
	uint64_t held = planner->next_seq - planner->base;
	uint64_t size = planner->ring_size ? planner->ring_size * 2 : RING_MIN;
	uint32_t *ino, *next;

	if (held < planner->ring_size)
		return 0;
	if (held >= DLC_PLANNER_MAX_LINES)
		return -ENOSPC;
	ino = malloc(size * sizeof(*ino));
	next = malloc(size * sizeof(*next));
	if (ino == NULL || next == NULL) {
		free(ino);
		free(next);
		return -ENOMEM;
	}
	for (uint64_t seq = planner->base; seq < planner->next_seq; seq++) {
		ino[seq & (size - 1)] = planner->line_ino[slot_of(planner, seq)];
		next[seq & (size - 1)] = planner->line_next[slot_of(planner, seq)];
	}
	free(planner->line_ino);
	free(planner->line_next);
	planner->line_ino = ino;
	planner->line_next = next;
	planner->ring_size = size;
	return 0;
}

int dlc_planner_announce(struct dlc_planner *planner, uint32_t ino)
{
	uint64_t seq, slot;
	int rc;

	if (ino == 0 || ino > planner->max_ino)
		return -EINVAL;
	if ((uint32_t)planner->next_seq == 0) {
		/* Its low bits would read as "none": burn it as a line already read. */
		rc = ring_reserve(planner);
		if (rc < 0)
			return rc;
		slot = slot_of(planner, planner->next_seq++);
		planner->line_ino[slot] = 0;
		planner->line_next[slot] = 0;
	}
	rc = ring_reserve(planner);
	if (rc < 0)
		return rc;
	seq = planner->next_seq++;
	slot = slot_of(planner, seq);
	planner->line_ino[slot] = ino;
	planner->line_next[slot] = 0;
	planner->unread++;
	if (planner->head[ino] == 0) {
		planner->head[ino] = (uint32_t)seq;
		planner->tail[ino] = (uint32_t)seq;
		if (planner->moved != NULL)
			planner->moved(planner->moved_arg, ino, DLC_PLANNER_NEVER);
		return 0;
	}
	planner->line_next[slot_of(planner, full_seq(planner, planner->tail[ino]))] = (uint32_t)seq;
	planner->tail[ino] = (uint32_t)seq;
	return 0;
}

/* Reads (or drops) seq, the earliest unread line of ino, and says so. */
static void pop_line(struct dlc_planner *planner, uint32_t ino, uint64_t seq)
{
	uint64_t slot = slot_of(planner, seq);

	assert(planner->line_ino[slot] == ino && planner->head[ino] == (uint32_t)seq);
	planner->head[ino] = planner->line_next[slot];
	planner->line_ino[slot] = 0;
	planner->unread--;
	if (planner->moved != NULL)
		planner->moved(planner->moved_arg, ino, seq);
}

/* Drops the read lines at base and the unread ones the slack left behind. */
static void trim(struct dlc_planner *planner)
{
	while (planner->base < planner->next_seq && planner->base <= planner->frontier) {
		uint64_t seq = planner->base;
		uint32_t ino = planner->line_ino[slot_of(planner, seq)];

		if (ino != 0) {
			if (seq + DLC_PLANNER_SLACK >= planner->frontier)
				break;
			pop_line(planner, ino, seq);
		}
		planner->base++;
	}
}

int dlc_planner_consume(struct dlc_planner *planner, uint32_t ino)
{
	uint64_t seq;

	if (ino == 0 || ino > planner->max_ino || planner->head[ino] == 0)
		return 0;
	seq = full_seq(planner, planner->head[ino]);
	pop_line(planner, ino, seq);
	if (seq > planner->frontier)
		planner->frontier = seq;
	trim(planner);
	return 1;
}

uint64_t dlc_planner_next_use(const struct dlc_planner *planner, uint32_t ino)
{
	if (ino == 0 || ino > planner->max_ino || planner->head[ino] == 0)
		return DLC_PLANNER_NEVER;
	return full_seq(planner, planner->head[ino]);
}

uint64_t dlc_planner_lines(const struct dlc_planner *planner)
{
	return planner->unread;
}

int dlc_planner_verify(const struct dlc_planner *planner)
{
	uint64_t chained = 0, unread = 0;

	if (planner->next_seq < planner->base ||
	    planner->next_seq - planner->base > planner->ring_size ||
	    planner->frontier + 1 < planner->base)
		return -EUCLEAN;
	for (uint64_t seq = planner->base; seq < planner->next_seq; seq++) {
		uint32_t ino = planner->line_ino[slot_of(planner, seq)];

		if (ino > planner->max_ino || (ino != 0 && (uint32_t)seq == 0))
			return -EUCLEAN;
		unread += ino != 0;
	}
	if (unread != planner->unread)
		return -EUCLEAN;
	for (uint32_t ino = 1; ino <= planner->max_ino; ino++) {
		uint64_t seq, last = 0;
		uint32_t low = planner->head[ino];

		for (; low != 0; low = planner->line_next[slot_of(planner, seq)]) {
			seq = full_seq(planner, low);
			if (seq < planner->base || seq >= planner->next_seq || seq <= last ||
			    planner->line_ino[slot_of(planner, seq)] != ino || ++chained > unread)
				return -EUCLEAN;
			last = seq;
		}
		if (last != 0 && planner->tail[ino] != (uint32_t)last)
			return -EUCLEAN;
	}
	return chained == unread ? 0 : -EUCLEAN;
}

void dlc_planner_set_next_seq(struct dlc_planner *planner, uint64_t seq)
{
	assert(planner->unread == 0 && seq >= planner->next_seq);
	planner->base = seq;
	planner->next_seq = seq;
	planner->frontier = seq - 1;
}
