/*
 * simulate.h - the trace-driven simulator behind `dlcache simulate`.
 *
 * A trace is a sequence of sample accesses (0-based sample ids) cut into
 * epochs.  The simulator replays it through the daemon's own policies
 * (policy.c: freeze, lru, importance), one byte per sample and a capacity
 * counted in samples, and through Belady's MIN, the offline optimum, and
 * reports the hits of each.  Traces come from a generator (per-epoch uniform
 * shuffles, or importance sampling with replacement) or from a text file.
 * Everything but dlc_simulate_main is pure: no output, a seeded generator of
 * its own, the same answer for the same arguments on every machine.
 */
#ifndef DLCACHE_SIMULATE_H
#define DLCACHE_SIMULATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcache/policy.h"

/* The most samples and accesses a trace may have (ids and inodes are 32-bit). */
#define DLC_SIMULATE_MAX_SAMPLES 1000000000u
#define DLC_SIMULATE_MAX_LENGTH 4294967295u

/* A score the job writes while the trace runs: sample's score becomes score
 * just before access number before (0-based, in replay order) is looked up. */
struct dlc_trace_rescore {
	uint64_t before;
	uint32_t sample;
	float score;
};

struct dlc_trace {
	uint32_t samples;       /* sample ids are 0..samples-1 */
	size_t length;          /* accesses in ids[] */
	size_t epoch_length;    /* accesses per epoch (>= 1); the last epoch may be shorter */
	uint32_t *ids;          /* the accesses, in order */
	float *scores;          /* samples floats: each sample's importance at the start, NaN unknown */
	float *updates;         /* NULL, or length floats: the score an access sets for its
				 * sample just before it is looked up, NaN for none */
	struct dlc_trace_rescore *rescores;     /* NULL, or rescore_count, by before */
	size_t rescore_count;
};

/* Frees what a generator or parser allocated and zeroes *trace; NULL is fine. */
void dlc_trace_free(struct dlc_trace *trace);

enum dlc_simulate_weights {
	DLC_SIMULATE_WEIGHTS_RANK = 0,      /* ln(rank + 10), rank 0 the least important */
	DLC_SIMULATE_WEIGHTS_LOGNORMAL,     /* exp(sigma * z), z standard normal */
};

/*
 * Per-epoch uniform shuffling: each of epochs epochs is an independent uniform
 * permutation of the samples (epoch_length = samples).  Each sample gets a
 * random static score, uniform in [0, 1), drawn from its own stream so that
 * it does not depend on epochs.  0, -EINVAL (no samples or epochs, or more
 * than DLC_SIMULATE_MAX_SAMPLES / _LENGTH) or -ENOMEM.
 */
int dlc_simulate_shuffle(uint32_t samples, uint32_t epochs, uint64_t seed,
			 struct dlc_trace *out);

/*
 * Importance sampling with replacement: each epoch draws samples ids, each
 * id i with probability w_i / sum(w), where the static weight w_i is
 *   rank:       ln(r_i + 10), r_i the sample's place in a random order of
 *               importance (0 the least important, samples-1 the most), so
 *               the most important sample has the highest weight;
 *   lognormal:  exp(sigma * z_i), z_i standard normal (sigma > 0).
 * The scores are the weights.  0, -EINVAL (as above, or a bad sigma) or
 * -ENOMEM.
 */
int dlc_simulate_sample(uint32_t samples, uint32_t epochs, enum dlc_simulate_weights weights,
			double sigma, uint64_t seed, struct dlc_trace *out);

/*
 * A training job whose scores move as training moves them: each sample has a
 * difficulty d (lognormal, sigma 1) and its loss at its v-th read is
 * d * 0.7^v times lognormal noise (sigma 0.3), so losses fall with visits
 * and ranks churn.  After every batch of batch reads per node the job
 * writes the rank scores (in [0, 1]) of the whole global batch, against a
 * sorted reference of every sample's latest loss rebuilt at each epoch and
 * whenever the samples known double (examples/dlcache.py's RankReporter):
 * the trace's rescores, in effect from the node's next read.  Scores start
 * unknown.
 *
 * The order is per epoch either a uniform permutation (sampled false) or
 * samples draws with replacement, each sample with probability proportional
 * to its latest loss (unseen samples: the mean of the known ones), as an
 * importance sampler would.  world > 1 splits each epoch's global order as
 * PyTorch's DistributedSampler does (padded with its first indices to a
 * multiple of world, node r taking positions r, r + world, ...); the trace
 * is node 0's reads, epoch_length the per-node share, and the scores are the
 * global ranks every node writes (all-gathered).
 */
struct dlc_simulate_churn {
	uint32_t samples;
	uint32_t epochs;
	uint32_t batch;         /* reads per node between score writes, >= 1 */
	uint32_t world;         /* nodes, >= 1 */
	bool sampled;           /* draws with replacement by loss, not permutations */
	uint64_t seed;
};

/* 0, -EINVAL (a count of 0, or more than DLC_SIMULATE_MAX_SAMPLES / _LENGTH)
 * or -ENOMEM. */
int dlc_simulate_churn(const struct dlc_simulate_churn *churn, struct dlc_trace *out);

/*
 * Parses a trace file's text (size bytes, no NUL needed): one access per
 * line, "ID" or "ID SCORE" (a 0-based decimal id and a finite number),
 * separated by blanks; '#' starts a comment, blank lines are ignored.  A
 * SCORE sets the sample's score from that access on (trace->updates); scores
 * start unknown.  samples is the dataset size (0: the highest id + 1) and the
 * epoch length.  0, or -EINVAL with a sentence naming the line in *cause
 * (name is how the sentence calls the text), or -ENOMEM.
 */
int dlc_simulate_parse(const char *name, const char *text, size_t size, uint32_t samples,
		       struct dlc_trace *out, char **cause);

/* Reads the file at path (or "-" for standard input) and parses it. */
int dlc_simulate_load(const char *path, uint32_t samples, struct dlc_trace *out, char **cause);

/* Hits and accesses of one replay; "later" counts from the second epoch on. */
struct dlc_simulate_result {
	uint64_t accesses;
	uint64_t misses;
	uint64_t later_accesses;
	uint64_t later_misses;
};

/*
 * Replays trace through a fresh policy of kind holding capacity samples
 * (sample id i is inode i + 1, charged one byte; the importance policy ranks
 * by the trace's scores and updates).  On a miss the sample is offered for
 * admission, on a hit the policy is told.  With pads, each epoch's accesses
 * are first reordered, stably, so that those to samples cached when the
 * epoch starts come first (SHADE's PADS).  0, -EINVAL (an id out of range) or
 * -ENOMEM.
 */
int dlc_simulate_replay(const struct dlc_trace *trace, enum dlc_policy_kind kind,
			uint32_t capacity, bool pads, struct dlc_simulate_result *out);

/* How much of the order a replay announces to the policy (`prefetch` lines). */
enum dlc_simulate_announce {
	DLC_SIMULATE_ANNOUNCE_NONE = 0,
	DLC_SIMULATE_ANNOUNCE_EPOCH,    /* each epoch's accesses, as the epoch starts */
	DLC_SIMULATE_ANNOUNCE_AHEAD,    /* those and the next epoch's: one epoch ahead */
	DLC_SIMULATE_ANNOUNCE_ALL,      /* the whole trace, before the first access */
	DLC_SIMULATE_ANNOUNCE_FIRST,    /* each epoch's, as it starts, each sample once */
};

/*
 * dlc_simulate_replay without PADS, announcing the order as announce says:
 * the policy is told each announced access (dlc_policy_announce), each
 * access is consumed before its lookup (dlc_policy_consume), and each epoch
 * starts a pass (dlc_policy_begin_pass, the job's `epoch N` line).  Only
 * importance plans with it.  With NONE it is dlc_simulate_replay.
 */
int dlc_simulate_replay_announced(const struct dlc_trace *trace, enum dlc_policy_kind kind,
				  uint32_t capacity, enum dlc_simulate_announce announce,
				  struct dlc_simulate_result *out);

/*
 * Belady's MIN with bypass over the trace as given (no reordering): on a
 * miss with the cache full, the one of the cached samples and the missed one
 * whose next access is farthest (never, first) is evicted or not admitted.
 * O(length log capacity).  0, -EINVAL or -ENOMEM.
 */
int dlc_simulate_belady(const struct dlc_trace *trace, uint32_t capacity,
			struct dlc_simulate_result *out);

/* The `dlcache simulate` command; argv[0] is "simulate".  Returns the exit status. */
int dlc_simulate_main(int argc, char **argv);

#endif
