/*
 * scores.h - the importance of every sample in the snapshot (the "ghost"
 * table): one float per inode, NaN meaning unknown, whether the sample is
 * cached or not.  The policy ranks cached samples by it and judges misses by
 * it; .control writes it.
 *
 * Not locked: the caller (cache.c) serializes writes with the policy's lock;
 * a racy read of one float (for stats) is harmless.
 *
 * On disk (scores_save/scores_load): a small header (magic "DLCSCOR1",
 * entries, the snapshot's identity, xxh3 of the payload) followed by the
 * floats; written to FILE.tmp and renamed, so a crash leaves the old file or
 * the new one.  Scores saved for another snapshot are not loaded.
 */
#ifndef DLCACHE_SCORES_H
#define DLCACHE_SCORES_H

#include <stdint.h>

struct dlc_scores {
	float *values;          /* values[ino] for ino 1..max_ino; values[0] unused */
	uint32_t max_ino;
	uint32_t known;         /* how many are not NaN */
};

/* All unknown; 0 or -ENOMEM. */
int dlc_scores_init(struct dlc_scores *scores, uint32_t max_ino);
void dlc_scores_destroy(struct dlc_scores *scores);

/* Sets one score (NaN forgets it); ino must be in 1..max_ino. */
void dlc_scores_set(struct dlc_scores *scores, uint32_t ino, float value);

/* Every score becomes unknown. */
void dlc_scores_reset(struct dlc_scores *scores);

/* 0, or -errno from the file system. */
int dlc_scores_save(const struct dlc_scores *scores, const char *file, uint64_t snapshot_id);

/* What dlc_scores_load found, other than an error. */
enum dlc_scores_loaded {
	DLC_SCORES_LOADED = 0,          /* the scores are the file's */
	DLC_SCORES_OTHER_SNAPSHOT,      /* saved for another snapshot: unchanged */
};

/* An enum dlc_scores_loaded; -ENOENT (no file), -EBADMSG (damaged: wrong
 * magic, size or checksum), other -errno; the scores are unchanged unless
 * loaded. */
int dlc_scores_load(struct dlc_scores *scores, const char *file, uint64_t snapshot_id);

#endif
