/*
 * control_apply.c - the .control commands, carried out.
 *
 * control.c parses what a job writes into commands; this file resolves their
 * paths in the snapshot and hands them to the modules that act on them:
 * scores (and forget) go to cache.c in batches of SCORE_BATCH under one cache
 * lock, prefetch lines to prefetch.c (after the scores before them, so admission
 * judges a prefetch by those), "epoch N" saves the scores, reset clears them,
 * "tier ..." and "tier off" replace the cluster tier's server list (tier.c),
 * when the writer is the mount's owner or root (fs.c says which): they
 * choose where every node's bytes come from, which a control_uid= or
 * control_gid= writer, trusted with scores, prefetch and epochs, is not;
 * "epoch N" also sets the tier's admission threshold from the scores.
 * Each call counts its lines and errors in the stats and logs its first bad
 * line once.  No state lives here between calls: the parser (one per open
 * .control) holds the unfinished line.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "dlcache/cause.h"
#include "dlcache/log.h"
#include "control_apply.h"

/* Scores are applied in batches of this many, under one cache lock. */
#define SCORE_BATCH 4096

/* Carries a write's commands from the parser to the modules. */
struct control_batch {
	struct dlc_fs_context *context;
	_Atomic uint64_t *epoch;
	bool may_steer_tier;            /* the writer is the mount's owner or root */
	size_t count;
	uint32_t inos[SCORE_BATCH];
	float values[SCORE_BATCH];
};

static void flush_scores(struct control_batch *batch)
{
	dlc_cache_set_scores(batch->context->cache, batch->inos, batch->values, batch->count);
	batch->count = 0;
}

static int push_score(struct control_batch *batch, uint32_t ino, float value)
{
	if (batch->count == SCORE_BATCH)
		flush_scores(batch);
	batch->inos[batch->count] = ino;
	batch->values[batch->count] = value;
	batch->count++;
	return 0;
}

/* Applies one parsed .control command (see control.h); called by the parser. */
static int apply_command(void *arg, const struct dlc_control_command *command, char **cause)
{
	struct control_batch *batch = arg;
	struct dlc_fs_context *c = batch->context;
	const struct dlc_node *node = NULL;
	uint32_t ino = 0;

	if (command->path) {
		const char *why = NULL;

		ino = (uint32_t)dlc_snapshot_resolve(c->snapshot, command->path);
		node = ino ? dlc_snapshot_node(c->snapshot, ino) : NULL;
		if (!node || S_ISLNK(node->mode)) {
			/* A symlink (or a path through one) inside the dataset is its target. */
			ino = dlc_snapshot_resolve_following(c->snapshot, command->path, &why);
			node = ino ? dlc_snapshot_node(c->snapshot, ino) : NULL;
		}
		if (why != NULL) {
			dlc_cause_set(cause, "'%s' is not a file in the dataset: %s; give the path of a file inside the dataset",
				      command->path, why);
			return -EINVAL;
		}
		if (!node || !S_ISREG(node->mode)) {
			dlc_cause_set(cause, "'%s' is not a file in the dataset; give a file's path relative to the mount root",
				      command->path);
			return -EINVAL;
		}
	}
	switch (command->kind) {
	case DLC_CONTROL_SCORE:
		if (!isfinite((float)command->score)) {
			dlc_cause_set(cause, "score %g is out of range; scale scores to within +-3e38", command->score);
			return -EINVAL;
		}
		return push_score(batch, ino, (float)command->score);
	case DLC_CONTROL_FORGET:
		return push_score(batch, ino, NAN);
	case DLC_CONTROL_PREFETCH:
		/* Admission judges a prefetch by the scores written before it. */
		flush_scores(batch);
		dlc_fetch_prefetch(c->fetch, ino);
		return 0;
	case DLC_CONTROL_EPOCH:
		flush_scores(batch);
		atomic_store(batch->epoch, command->epoch);
		dlc_cache_begin_pass(c->cache, command->epoch);
		dlc_cache_save_scores(c->cache);
		if (c->tier && dlc_tier_on(c->tier))
			dlc_tier_plan(c->tier, c->cache, c->snapshot);
		return 0;
	case DLC_CONTROL_RESET:
		batch->count = 0;
		dlc_cache_reset_scores(c->cache);
		return 0;
	case DLC_CONTROL_TIER:
	case DLC_CONTROL_TIER_OFF:
		if (!batch->may_steer_tier) {
			dlc_cause_set(cause, "only the mount's owner or root may change the tier; write tier lines as the user who mounted, or set tier_servers= at mount");
			return -EINVAL;
		}
		if (!c->tier) {
			dlc_cause_set(cause, "this mount has no tier client; remount to attach a tier");
			return -EINVAL;
		}
		return dlc_tier_set_servers(c->tier, command->kind == DLC_CONTROL_TIER ?
					    command->servers : "", cause);
	}
	return 0;
}

/* Counts what a feed or finish did; logs its first bad line.  0 or -EINVAL. */
static int control_account(struct dlc_stats *stats, struct dlc_control_result *result, int rc)
{
	dlc_stats_add(stats, DLC_STAT_CONTROL_LINES, result->lines + result->errors);
	dlc_stats_add(stats, DLC_STAT_CONTROL_ERRORS, result->errors);
	if (result->first_error) {
		dlc_stats_set_error(stats, result->first_error);
		dlc_log(DLC_LOG_WARNING, ".control: %s (%llu bad lines in this write)", result->first_error,
			(unsigned long long)result->errors);
	}
	dlc_control_result_clear(result);
	return rc;
}

int dlc_control_apply(struct dlc_fs_context *context, _Atomic uint64_t *epoch,
		      struct dlc_control_parser *parser, const char *buf, size_t size,
		      bool may_steer_tier)
{
	struct dlc_control_result result = { 0 };
	struct control_batch *batch = malloc(sizeof(*batch));
	int rc;

	if (!batch)
		return -ENOMEM;
	batch->context = context;
	batch->epoch = epoch;
	batch->may_steer_tier = may_steer_tier;
	batch->count = 0;
	if (buf)
		rc = dlc_control_feed(parser, buf, size, apply_command, batch, &result);
	else
		rc = dlc_control_finish(parser, apply_command, batch, &result);
	flush_scores(batch);
	free(batch);
	return control_account(context->stats, &result, rc);
}
