/*
 * failed_files.h - the large files whose source read failed for time a
 * moment ago (blocks.c): a read of such a file that must wait on the
 * source fails at once for DLC_FAILED_HOLD_NS instead of waiting
 * source_timeout again.  The kernel answers a failed read by reading the
 * page once more, at once, in a request of its own, through whichever open
 * file of the inode waited for the page (another reader's too), so one
 * read(2) of a stalled source waited twice (8-10 s with a 5 s timeout in
 * tests/bench/soak.sh).  "For time": a source call or a flight that timed
 * out, or a request whose deadline passed before it could start
 * (deadline.h); a source error that came at once is not noted, a retry
 * costs no wait.  Looked up before a read queues for the source (on the
 * FUSE thread) and again when it runs.  The DLC_FAILED_FILES files
 * noted last are kept (a file noted again moves to the newest).  Locked
 * by its own mutex, a leaf (nothing is taken under it).  Private to
 * src/read/.
 */
#ifndef DLCACHE_READ_FAILED_FILES_H
#define DLCACHE_READ_FAILED_FILES_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define DLC_FAILED_HOLD_NS 1000000000ULL
/* More than the files a stall fails within a second: 64 streams failed
 * together in tests/bench/soak.sh. */
#define DLC_FAILED_FILES 256

struct dlc_failed_files {
	pthread_mutex_t lock;
	struct {
		uint32_t ino;
		uint64_t at_ns;         /* CLOCK_MONOTONIC; 0: a free slot */
	} slot[DLC_FAILED_FILES];       /* lock */
};

void dlc_failed_files_init(struct dlc_failed_files *files);
void dlc_failed_files_destroy(struct dlc_failed_files *files);

/* A read of ino failed for time now. */
void dlc_failed_files_note(struct dlc_failed_files *files, uint32_t ino);

/* Whether a read of ino failed for time less than DLC_FAILED_HOLD_NS ago. */
bool dlc_failed_files_recent(struct dlc_failed_files *files, uint32_t ino);

#endif
