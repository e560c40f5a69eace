/*
 * planner.h - the announced order of reads, as the policy plans with it
 * (policy.c is its only user in the daemon; tests drive it directly).
 *
 * A job announces the samples it will read, in order (`prefetch PATH`
 * lines); each announcement is a line with a sequence number.  The planner
 * answers "when is ino next needed" (its next unread line) in O(1) and moves
 * on as readers open files.  Pure: no I/O, no lock, no logging; the policy's
 * caller serializes every call.
 *
 * Lines are read by several readers at once (DataLoader workers), slightly
 * out of order, so an open consumes the earliest unread line of its inode,
 * wherever that is, and moves the frontier (the furthest line read) there if
 * that is further.  Lines more than DLC_PLANNER_SLACK behind the frontier
 * were skipped: they are dropped as if read.  A job that starts over and
 * announces a new order leaves the old one behind that way.
 *
 * Memory: 8 bytes per inode (once anything is announced) and 8 bytes per
 * line between the oldest unread line and the newest announced one (an
 * ImageNet epoch of 1.28 M lines costs 10 MiB), at most
 * DLC_PLANNER_MAX_LINES lines.
 */
#ifndef DLCACHE_PLANNER_H
#define DLCACHE_PLANNER_H

#include <stdint.h>

/* Lines behind the frontier that still count as unread: the reordering that
 * readers in parallel bring (8 workers times 2 batches of 256, twice). */
#define DLC_PLANNER_SLACK 8192u

/* The most lines held: 16 M (128 MiB), a dozen ImageNet epochs. */
#define DLC_PLANNER_MAX_LINES (16u << 20)

/* "Not announced": a next use further than every announced one. */
#define DLC_PLANNER_NEVER UINT64_MAX

struct dlc_planner; /* opaque */

/* Told which inode's next use changed (its earliest unread line moved). */
typedef void (*dlc_planner_moved_fn)(void *arg, uint32_t ino, uint64_t before);

/* A planner for inodes 1..max_ino; NULL on ENOMEM.  moved(arg, ino, before)
 * is called for each inode whose next use changes, after it changed, with
 * the next use it had before. */
struct dlc_planner *dlc_planner_create(uint32_t max_ino, dlc_planner_moved_fn moved, void *arg);
void dlc_planner_free(struct dlc_planner *planner);

/*
 * Appends a line for ino (1..max_ino).  0; -ENOSPC when DLC_PLANNER_MAX_LINES
 * lines are held (nothing changes), -ENOMEM, -EINVAL for a bad ino.
 */
int dlc_planner_announce(struct dlc_planner *planner, uint32_t ino);

/*
 * A reader opened ino: consumes its earliest unread line, moves the frontier
 * to it if that is further, then drops the lines left behind.  Returns 1
 * when a line was consumed, 0 when ino has none (or is out of range).
 */
int dlc_planner_consume(struct dlc_planner *planner, uint32_t ino);

/* The position of ino's earliest unread line (a number that only grows along
 * the order), or DLC_PLANNER_NEVER. */
uint64_t dlc_planner_next_use(const struct dlc_planner *planner, uint32_t ino);

/* Unread lines held (announced, not yet consumed nor dropped). */
uint64_t dlc_planner_lines(const struct dlc_planner *planner);

/*
 * Checks the invariants in O(max_ino + lines): every unread line is on its
 * inode's chain, in order, each chain starts at its inode's head.  0 or
 * -EUCLEAN.  For tests.
 */
int dlc_planner_verify(const struct dlc_planner *planner);

/* Tests only: the next line gets position seq (> every earlier one; the
 * planner must hold no unread line), to test the wrap of the 32-bit numbers
 * the lines store. */
void dlc_planner_set_next_seq(struct dlc_planner *planner, uint64_t seq);

#endif
