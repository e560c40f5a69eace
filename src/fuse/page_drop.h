/*
 * page_drop.h - tells the kernel to drop the pages of a read the daemon
 * failed (private to src/fuse/).
 *
 * A READ answered with an error leaves its pages in the kernel's page
 * cache, locked until the answer and then not up to date.  Every later
 * read(2) of them, by any reader of the inode, then reads them one 4 KiB
 * page per request (the kernel's read_folio), each a round trip to the
 * daemon, in order, while the readers behind wait on each page's lock: a
 * failed 1 MiB readahead costs 256 round trips.  Measured in
 * tests/bench/soak.sh (2026-11-27): after a request failed at its 5 s
 * deadline, a second reader of the shard read the range back page by page
 * from a block it held, 247 requests in 0.58 s on an idle machine, and the
 * first reader's read(2) waited through all of them (5.59 s); on a loaded
 * machine the same chain made reads of 7.5-8.3 s against a 6 s target.
 *
 * With the pages dropped (FUSE_NOTIFY_INVAL_INODE for the failed range),
 * the next read(2) finds no page and asks with one readahead request again:
 * one round trip, served at once from memory or failed at once
 * (failed_files.h).
 *
 * The notice cannot be sent by the thread that answered: the kernel locks
 * each page to drop it, so a notice waits for any read of those pages in
 * flight, which only a FUSE thread can answer (libfuse: never notify on a
 * request's own path).  Notes go to a small queue, and one thread of this
 * module sends them.  A note never blocks; when the queue is full it is
 * left out (the pages then cost the round trips above, nothing more: a
 * dropped page is read again from the daemon, the source's bytes).
 */
#ifndef DLCACHE_FUSE_PAGE_DROP_H
#define DLCACHE_FUSE_PAGE_DROP_H

#include <fuse_lowlevel.h>
#include <stddef.h>
#include <sys/types.h>

#include "dlcache/stats.h"

/* How many failed ranges may wait for the thread. */
#define DLC_PAGE_DROP_QUEUE 256

struct dlc_page_drop;

/*
 * The queue and its thread for one mount; NULL when out of memory or no
 * thread can start (the mount then serves without: notes are ignored).
 * stats counts each range sent (DLC_STAT_PAGE_DROPS).
 */
struct dlc_page_drop *dlc_page_drop_new(struct dlc_stats *stats);

/* The session the notices go to; set once before it serves. */
void dlc_page_drop_set_session(struct dlc_page_drop *drop, struct fuse_session *session);

/*
 * A READ of [off, off + len) of ino was answered with an error: queue the
 * range to drop.  Never blocks (one short lock); a range adjacent to the
 * last queued one of the same inode joins it.  drop may be NULL.
 */
void dlc_page_drop_note(struct dlc_page_drop *drop, fuse_ino_t ino, off_t off, size_t len);

/* Stops the thread (what is queued is left), frees drop.  NULL is fine. */
void dlc_page_drop_free(struct dlc_page_drop *drop);

#endif
