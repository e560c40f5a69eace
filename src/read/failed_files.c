/*
 * failed_files.c - the large files whose source read failed for time a
 * moment ago (failed_files.h): a small table of (inode, time) slots, the
 * least recently noted given up first, looked up only on the slow path of
 * a block read.
 */
#include <string.h>

#include "dlcache/deadline.h"
#include "failed_files.h"

void dlc_failed_files_init(struct dlc_failed_files *files)
{
	memset(files->slot, 0, sizeof(files->slot));
	pthread_mutex_init(&files->lock, NULL);
}

void dlc_failed_files_destroy(struct dlc_failed_files *files)
{
	pthread_mutex_destroy(&files->lock);
}

void dlc_failed_files_note(struct dlc_failed_files *files, uint32_t ino)
{
	uint64_t now = dlc_deadline_now();
	unsigned i, slot = 0;

	pthread_mutex_lock(&files->lock);
	/* The file's own slot, else the free or least recently noted one:
	 * a slot noted again a moment ago is never the one given up (slots
	 * reused in turn lost a file noted again in place, and its re-read
	 * waited source_timeout once more). */
	for (i = 0; i < DLC_FAILED_FILES; i++) {
		if (files->slot[i].at_ns && files->slot[i].ino == ino) {
			slot = i;
			break;
		}
		if (files->slot[i].at_ns < files->slot[slot].at_ns)
			slot = i;
	}
	files->slot[slot].ino = ino;
	files->slot[slot].at_ns = now;
	pthread_mutex_unlock(&files->lock);
}

bool dlc_failed_files_recent(struct dlc_failed_files *files, uint32_t ino)
{
	uint64_t now = dlc_deadline_now();
	bool recent = false;

	pthread_mutex_lock(&files->lock);
	for (unsigned i = 0; i < DLC_FAILED_FILES && !recent; i++)
		recent = files->slot[i].at_ns && files->slot[i].ino == ino &&
			 now - files->slot[i].at_ns < DLC_FAILED_HOLD_NS;
	pthread_mutex_unlock(&files->lock);
	return recent;
}
