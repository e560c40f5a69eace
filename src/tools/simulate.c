/*
 * simulate.c - `dlcache simulate`: replays sample-access traces through the
 * daemon's own policies and through Belady's MIN, and prints hit ratios.
 *
 * This file owns the replay of a trace through a policy, MIN, and the
 * command around them; the traces themselves (two generators and a text
 * format) are trace.c's.  The policies are the real ones from policy.c,
 * called exactly as cache.c calls them: sample id i is inode i + 1 and is
 * charged one byte, so a capacity in bytes is a capacity in samples.  Only
 * dlc_simulate_main prints.
 *
 * DESIGN
 *
 * MIN precomputes, for every access, the position of the next access to the
 * same sample, and keeps the cached samples in a max-heap keyed by that next
 * use (with a position per sample, so that a hit re-keys in O(log c)).  On a
 * miss with the cache full, the missed sample competes too: if its own next
 * use is at least as far as the heap's top, it is not cached (bypass), which
 * is what the real policies may do as well, so MIN bounds them all.
 *
 * PADS (SHADE's policy-aware sampling) needs the policy's state: at the start
 * of each epoch the replay partitions that epoch's accesses, stably, into
 * those whose sample is cached now and the rest, and replays the first group
 * first.  Each policy gets its own reordering; MIN replays the trace as drawn.
 *
 * THREADS.  The command runs its replays (one per policy and cache size, and
 * MIN) on up to one thread per CPU.  They share only the trace, which nobody
 * writes once it is built; each writes its own result slot; the job counter
 * and the first error are guarded by job_board.lock.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlcache/cause.h"
#include "dlcache/policy.h"
#include "dlcache/simulate.h"
#include "simulate_private.h"

/* The position of "no further access" in MIN's next-use array. */
#define NEVER SIZE_MAX

#define DEFAULT_SAMPLES 10000u
#define DEFAULT_EPOCHS 5u
#define DEFAULT_SIGMA 1.0
#define DEFAULT_SEED 1u
#define MAX_EPOCHS 100000u
#define MAX_FRACTIONS 32
#define MAX_THREADS 16
#define DEFAULT_BATCH 256u
#define MAX_WORLD 4096u

/* --- replay through a policy ------------------------------------------- */

static int check_trace(const struct dlc_trace *trace)
{
	if (trace->samples == 0 || trace->epoch_length == 0)
		return -EINVAL;
	for (size_t k = 0; k < trace->length; k++) {
		if (trace->ids[k] >= trace->samples)
			return -EINVAL;
	}
	for (size_t r = 0; r < trace->rescore_count; r++) {
		if (trace->rescores[r].sample >= trace->samples ||
		    (r > 0 && trace->rescores[r].before < trace->rescores[r - 1].before))
			return -EINVAL;
	}
	return 0;
}

static void tally(struct dlc_simulate_result *out, size_t position, size_t epoch_length,
		  bool hit)
{
	out->accesses++;
	out->misses += !hit;
	if (position >= epoch_length) {
		out->later_accesses++;
		out->later_misses += !hit;
	}
}

/* Puts the accesses to cached samples first, each group in trace order. */
static void pads_reorder(const struct dlc_policy *policy, const uint32_t *ids,
			 const float *updates, size_t count_in_epoch, uint32_t *ids_out,
			 float *updates_out)
{
	size_t next = 0;

	for (int cached = 1; cached >= 0; cached--) {
		for (size_t k = 0; k < count_in_epoch; k++) {
			if (dlc_policy_contains(policy, ids[k] + 1) != (bool)cached)
				continue;
			ids_out[next] = ids[k];
			if (updates != NULL)
				updates_out[next] = updates[k];
			next++;
		}
	}
}

/* Announces the accesses [from, to) of the trace; 0 or -ENOMEM. */
static int announce_range(struct dlc_policy *policy, const struct dlc_trace *trace, size_t from,
			  size_t to)
{
	for (size_t k = from; k < to && k < trace->length; k++) {
		int rc = dlc_policy_announce(policy, trace->ids[k] + 1);

		/* A full planner plans less; only memory is an error. */
		if (rc == -ENOMEM)
			return rc;
	}
	return 0;
}

/*
 * Announces the accesses [from, to) of the trace, each sample at its first
 * access only (a job that names each drawn sample once); seen has a byte per
 * sample.  0 or -ENOMEM.
 */
static int announce_range_once(struct dlc_policy *policy, const struct dlc_trace *trace,
			       size_t from, size_t to, uint8_t *seen)
{
	memset(seen, 0, trace->samples);
	for (size_t k = from; k < to && k < trace->length; k++) {
		int rc;

		if (seen[trace->ids[k]])
			continue;
		seen[trace->ids[k]] = 1;
		rc = dlc_policy_announce(policy, trace->ids[k] + 1);
		if (rc == -ENOMEM)
			return rc;
	}
	return 0;
}

/* What the replay announces as epoch `start` (its first access) begins. */
static int announce_epoch(struct dlc_policy *policy, const struct dlc_trace *trace,
			  enum dlc_simulate_announce announce, size_t start, uint8_t *seen)
{
	size_t epoch = trace->epoch_length;

	switch (announce) {
	case DLC_SIMULATE_ANNOUNCE_NONE:
		return 0;
	case DLC_SIMULATE_ANNOUNCE_EPOCH:
		return announce_range(policy, trace, start, start + epoch);
	case DLC_SIMULATE_ANNOUNCE_AHEAD:
		/* The first epoch and the next; then each epoch announces the one after it. */
		if (start == 0)
			return announce_range(policy, trace, 0, 2 * epoch);
		return announce_range(policy, trace, start + epoch, start + 2 * epoch);
	case DLC_SIMULATE_ANNOUNCE_ALL:
		return start == 0 ? announce_range(policy, trace, 0, trace->length) : 0;
	case DLC_SIMULATE_ANNOUNCE_FIRST:
		return announce_range_once(policy, trace, start, start + epoch, seen);
	}
	return 0;
}

static int replay(const struct dlc_trace *trace, enum dlc_policy_kind kind, uint32_t capacity,
		  bool pads, enum dlc_simulate_announce announce, struct dlc_simulate_result *out)
{
	struct dlc_ino_list victims = { 0 };
	struct dlc_policy *policy = NULL;
	uint32_t *pads_ids = NULL;
	float *pads_updates = NULL;
	uint8_t *seen = NULL;   /* ANNOUNCE_FIRST: a byte per sample */
	float *scores = NULL;
	size_t rescored = 0;    /* trace->rescores applied */
	int rc;

	memset(out, 0, sizeof(*out));
	rc = check_trace(trace);
	if (rc < 0)
		return rc;
	rc = -ENOMEM;
	policy = dlc_policy_create(kind, capacity, trace->samples);
	scores = malloc(((size_t)trace->samples + 1) * sizeof(*scores));
	if (policy == NULL || scores == NULL)
		goto out;
	if (pads) {
		size_t epoch = trace->epoch_length < trace->length ? trace->epoch_length
								    : trace->length;

		pads_ids = malloc((epoch ? epoch : 1) * sizeof(*pads_ids));
		if (pads_ids == NULL)
			goto out;
		if (trace->updates != NULL) {
			pads_updates = malloc((epoch ? epoch : 1) * sizeof(*pads_updates));
			if (pads_updates == NULL)
				goto out;
		}
	}
	if (announce == DLC_SIMULATE_ANNOUNCE_FIRST) {
		seen = malloc(trace->samples);
		if (seen == NULL)
			goto out;
	}
	scores[0] = NAN;
	memcpy(scores + 1, trace->scores, (size_t)trace->samples * sizeof(*scores));
	dlc_policy_set_scores(policy, scores);

	for (size_t start = 0; start < trace->length; start += trace->epoch_length) {
		size_t in_epoch = trace->length - start < trace->epoch_length
					  ? trace->length - start : trace->epoch_length;
		const uint32_t *ids = trace->ids + start;
		const float *updates = trace->updates ? trace->updates + start : NULL;

		if (pads) {
			pads_reorder(policy, ids, updates, in_epoch, pads_ids, pads_updates);
			ids = pads_ids;
			updates = pads_updates;
		}
		if (announce != DLC_SIMULATE_ANNOUNCE_NONE) {
			dlc_policy_begin_pass(policy, (uint32_t)(start / trace->epoch_length) + 1);
			rc = announce_epoch(policy, trace, announce, start, seen);
			if (rc < 0)
				goto out;
		}
		for (size_t k = 0; k < in_epoch; k++) {
			uint32_t ino = ids[k] + 1;
			bool hit;

			/* The scores the job wrote since the last read (by position). */
			for (; rescored < trace->rescore_count &&
			       trace->rescores[rescored].before <= start + k; rescored++) {
				uint32_t sample = trace->rescores[rescored].sample + 1;

				scores[sample] = trace->rescores[rescored].score;
				dlc_policy_rescore(policy, sample);
			}
			if (updates != NULL && !isnan(updates[k])) {
				scores[ino] = updates[k];
				dlc_policy_rescore(policy, ino);
			}
			dlc_policy_consume(policy, ino);
			hit = dlc_policy_contains(policy, ino);
			if (hit) {
				dlc_policy_hit(policy, ino);
			} else {
				rc = dlc_policy_admit(policy, ino, 1, &victims);
				if (rc < 0)
					goto out;
			}
			tally(out, start + k, trace->epoch_length, hit);
		}
	}
	rc = 0;
out:
	dlc_ino_list_free(&victims);
	dlc_policy_free(policy);
	free(seen);
	free(pads_updates);
	free(pads_ids);
	free(scores);
	return rc;
}

int dlc_simulate_replay(const struct dlc_trace *trace, enum dlc_policy_kind kind,
			uint32_t capacity, bool pads, struct dlc_simulate_result *out)
{
	return replay(trace, kind, capacity, pads, DLC_SIMULATE_ANNOUNCE_NONE, out);
}

int dlc_simulate_replay_announced(const struct dlc_trace *trace, enum dlc_policy_kind kind,
				  uint32_t capacity, enum dlc_simulate_announce announce,
				  struct dlc_simulate_result *out)
{
	return replay(trace, kind, capacity, false, announce, out);
}

/* --- Belady's MIN ------------------------------------------------------ */

/* The cached samples, a max-heap by next use (then by id, for determinism). */
struct min_heap {
	uint32_t *items;
	uint32_t count;
	uint32_t *position;     /* per sample: index in items, UINT32_MAX = not cached */
	size_t *next_use;       /* per sample: when a cached sample is next accessed */
};

static bool min_before(const struct min_heap *heap, uint32_t a, uint32_t b)
{
	if (heap->next_use[a] != heap->next_use[b])
		return heap->next_use[a] > heap->next_use[b];
	return a > b;
}

static void min_place(struct min_heap *heap, uint32_t index, uint32_t sample)
{
	heap->items[index] = sample;
	heap->position[sample] = index;
}

static void min_sift_up(struct min_heap *heap, uint32_t index)
{
	uint32_t sample = heap->items[index];

	while (index > 0 && min_before(heap, sample, heap->items[(index - 1) / 2])) {
		min_place(heap, index, heap->items[(index - 1) / 2]);
		index = (index - 1) / 2;
	}
	min_place(heap, index, sample);
}

static void min_sift_down(struct min_heap *heap, uint32_t index)
{
	uint32_t sample = heap->items[index];

	for (;;) {
		uint64_t child = 2 * (uint64_t)index + 1;

		if (child >= heap->count)
			break;
		if (child + 1 < heap->count &&
		    min_before(heap, heap->items[child + 1], heap->items[child]))
			child++;
		if (!min_before(heap, heap->items[child], sample))
			break;
		min_place(heap, index, heap->items[child]);
		index = (uint32_t)child;
	}
	min_place(heap, index, sample);
}

int dlc_simulate_belady(const struct dlc_trace *trace, uint32_t capacity,
			struct dlc_simulate_result *out)
{
	struct min_heap heap = { 0 };
	size_t *next_access = NULL;     /* per access: the position of the sample's next one */
	int rc;

	memset(out, 0, sizeof(*out));
	rc = check_trace(trace);
	if (rc < 0)
		return rc;
	if (capacity > trace->samples)
		capacity = trace->samples;
	rc = -ENOMEM;
	next_access = malloc((trace->length ? trace->length : 1) * sizeof(*next_access));
	heap.items = malloc(((size_t)capacity + 1) * sizeof(*heap.items));
	heap.position = malloc((size_t)trace->samples * sizeof(*heap.position));
	heap.next_use = malloc((size_t)trace->samples * sizeof(*heap.next_use));
	if (next_access == NULL || heap.items == NULL || heap.position == NULL ||
	    heap.next_use == NULL)
		goto out;

	/* next_use[] doubles as "the last position seen" while walking backwards. */
	for (uint32_t i = 0; i < trace->samples; i++) {
		heap.next_use[i] = NEVER;
		heap.position[i] = UINT32_MAX;
	}
	for (size_t k = trace->length; k-- > 0;) {
		next_access[k] = heap.next_use[trace->ids[k]];
		heap.next_use[trace->ids[k]] = k;
	}

	for (size_t k = 0; k < trace->length; k++) {
		uint32_t sample = trace->ids[k];
		uint32_t index = heap.position[sample];
		bool hit = index != UINT32_MAX;

		heap.next_use[sample] = next_access[k];
		if (hit) {
			/* Its next use moved later: it can only rise. */
			min_sift_up(&heap, index);
		} else if (heap.count < capacity) {
			min_place(&heap, heap.count++, sample);
			min_sift_up(&heap, heap.count - 1);
		} else if (heap.count > 0 &&
			   heap.next_use[heap.items[0]] > heap.next_use[sample]) {
			heap.position[heap.items[0]] = UINT32_MAX;
			min_place(&heap, 0, sample);
			min_sift_down(&heap, 0);
		}
		tally(out, k, trace->epoch_length, hit);
	}
	rc = 0;
out:
	free(heap.next_use);
	free(heap.position);
	free(heap.items);
	free(next_access);
	return rc;
}

/* --- the command ------------------------------------------------------- */

/* The real policies in the table, in column order. */
static const enum dlc_policy_kind table_kinds[] = {
	DLC_POLICY_FREEZE, DLC_POLICY_LRU, DLC_POLICY_IMPORTANCE,
};

#define TABLE_KINDS (sizeof(table_kinds) / sizeof(table_kinds[0]))

struct simulate_options {
	uint32_t samples;
	bool samples_given;
	uint32_t epochs;
	bool epochs_given;
	const char *trace;              /* "uniform", "importance" or a path */
	enum dlc_simulate_weights weights;
	bool weights_given;
	double sigma;
	bool sigma_given;
	bool pads;
	uint64_t seed;
	double fractions[MAX_FRACTIONS];
	size_t fraction_count;
	uint32_t batch;                 /* churn traces: reads per node between score writes */
	bool batch_given;
	uint32_t world;                 /* churn traces: DistributedSampler's nodes */
	bool world_given;
	enum dlc_simulate_announce announce;
};

static const char *const announce_names[] = {
	[DLC_SIMULATE_ANNOUNCE_NONE] = "none",
	[DLC_SIMULATE_ANNOUNCE_EPOCH] = "epoch",
	[DLC_SIMULATE_ANNOUNCE_AHEAD] = "ahead",
	[DLC_SIMULATE_ANNOUNCE_ALL] = "all",
	[DLC_SIMULATE_ANNOUNCE_FIRST] = "first",
};

static bool is_churn(const char *trace)
{
	return strcmp(trace, "churn") == 0 || strcmp(trace, "churn-sampled") == 0;
}

static void simulate_usage(FILE *out)
{
	fprintf(out,
		"usage: dlcache simulate [--trace uniform|importance|churn|churn-sampled|FILE] [--samples N]\n"
		"                        [--epochs E] [--weights rank|lognormal] [--sigma S] [--pads]\n"
		"                        [--batch B] [--world W] [--announce none|epoch|ahead|all|first]\n"
		"                        [--seed S] [--fractions F,F,...]\n"
		"Replays a trace of sample accesses through the cache policies (freeze, lru,\n"
		"importance) and Belady's MIN, and prints each one's hit ratio per cache size.\n"
		"\n"
		"  --trace uniform      a uniform shuffle of the samples each epoch (default)\n"
		"  --trace importance   each epoch draws N samples with replacement by weight\n"
		"  --trace churn        a shuffle each epoch, scores that churn: loss ranks written\n"
		"                       every batch (difficulty x 0.7^visits x noise)\n"
		"  --trace churn-sampled  the same job drawing with replacement by its losses\n"
		"  --trace FILE         one 0-based sample id per line, optionally a score; - is stdin\n"
		"  --samples N          samples in the dataset (default %u)\n"
		"  --epochs E           epochs to generate (default %u)\n"
		"  --weights rank       weight ln(rank + 10), rank 0 the least important (default)\n"
		"  --weights lognormal  weight exp(S * z), z standard normal\n"
		"  --sigma S            the lognormal S (default %.1f)\n"
		"  --pads               each epoch, accesses to cached samples come first\n"
		"  --batch B            churn: reads per node between score writes (default %u)\n"
		"  --world W            churn: W nodes split each epoch (DistributedSampler); node 0\n"
		"  --announce epoch     importance plans with each epoch's order, told as it starts\n"
		"  --announce ahead     ... told one epoch ahead; all: the whole trace at the start\n"
		"  --announce first     ... each epoch as it starts, each sample named once\n"
		"  --seed S             seed of the generators (default %u)\n"
		"  --fractions LIST     cache sizes as fractions of N (default 0.1,0.2,0.5)\n",
		DEFAULT_SAMPLES, DEFAULT_EPOCHS, DEFAULT_SIGMA, DEFAULT_BATCH, DEFAULT_SEED);
}

static int parse_uint(const char *text, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long value;

	if (text[0] < '0' || text[0] > '9')
		return -EINVAL;
	errno = 0;
	value = strtoull(text, &end, 10);
	if (errno != 0 || *end != '\0' || value > max)
		return -EINVAL;
	*out = value;
	return 0;
}

static int parse_fractions(const char *text, struct simulate_options *opts, char **cause)
{
	const char *at = text;

	opts->fraction_count = 0;
	for (;;) {
		char *end;
		double value;

		errno = 0;
		value = strtod(at, &end);
		if (end == at || errno != 0 || !(value > 0 && value <= 1) ||
		    (*end != ',' && *end != '\0')) {
			dlc_cause_set(cause, "--fractions '%s' is not a list of numbers in (0, 1]; write it like 0.1,0.2,0.5.",
				      text);
			return -EINVAL;
		}
		if (opts->fraction_count == MAX_FRACTIONS) {
			dlc_cause_set(cause, "--fractions lists more than %d sizes; give fewer.",
				      MAX_FRACTIONS);
			return -EINVAL;
		}
		opts->fractions[opts->fraction_count++] = value;
		if (*end == '\0')
			return 0;
		at = end + 1;
	}
}

enum {
	OPTION_SAMPLES = 256,
	OPTION_EPOCHS,
	OPTION_TRACE,
	OPTION_WEIGHTS,
	OPTION_SIGMA,
	OPTION_PADS,
	OPTION_SEED,
	OPTION_FRACTIONS,
	OPTION_BATCH,
	OPTION_WORLD,
	OPTION_ANNOUNCE,
	OPTION_HELP,
};

/* 0, 1 for --help (usage printed), or -EINVAL with *cause. */
static int parse_options(int argc, char **argv, struct simulate_options *opts, char **cause)
{
	static const struct option longopts[] = {
		{ "samples", required_argument, NULL, OPTION_SAMPLES },
		{ "epochs", required_argument, NULL, OPTION_EPOCHS },
		{ "trace", required_argument, NULL, OPTION_TRACE },
		{ "weights", required_argument, NULL, OPTION_WEIGHTS },
		{ "sigma", required_argument, NULL, OPTION_SIGMA },
		{ "pads", no_argument, NULL, OPTION_PADS },
		{ "seed", required_argument, NULL, OPTION_SEED },
		{ "fractions", required_argument, NULL, OPTION_FRACTIONS },
		{ "batch", required_argument, NULL, OPTION_BATCH },
		{ "world", required_argument, NULL, OPTION_WORLD },
		{ "announce", required_argument, NULL, OPTION_ANNOUNCE },
		{ "help", no_argument, NULL, OPTION_HELP },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t value;
	char *end;
	int c;

	*opts = (struct simulate_options){
		.samples = DEFAULT_SAMPLES,
		.epochs = DEFAULT_EPOCHS,
		.trace = "uniform",
		.weights = DLC_SIMULATE_WEIGHTS_RANK,
		.sigma = DEFAULT_SIGMA,
		.seed = DEFAULT_SEED,
		.fractions = { 0.1, 0.2, 0.5 },
		.fraction_count = 3,
		.batch = DEFAULT_BATCH,
		.world = 1,
	};
	/* 0 restarts GNU getopt from scratch: the command may not be the first to parse. */
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case OPTION_SAMPLES:
			if (parse_uint(optarg, DLC_SIMULATE_MAX_SAMPLES, &value) < 0 || value == 0) {
				dlc_cause_set(cause, "--samples '%s' is not a whole number from 1 to %u; give one such as 10000.",
					      optarg, DLC_SIMULATE_MAX_SAMPLES);
				return -EINVAL;
			}
			opts->samples = (uint32_t)value;
			opts->samples_given = true;
			break;
		case OPTION_EPOCHS:
			if (parse_uint(optarg, MAX_EPOCHS, &value) < 0 || value == 0) {
				dlc_cause_set(cause, "--epochs '%s' is not a whole number from 1 to %u; give one such as 5.",
					      optarg, MAX_EPOCHS);
				return -EINVAL;
			}
			opts->epochs = (uint32_t)value;
			opts->epochs_given = true;
			break;
		case OPTION_TRACE:
			if (optarg[0] == '\0') {
				dlc_cause_set(cause, "--trace is empty; give uniform, importance or a file name.");
				return -EINVAL;
			}
			opts->trace = optarg;
			break;
		case OPTION_WEIGHTS:
			if (strcmp(optarg, "rank") == 0) {
				opts->weights = DLC_SIMULATE_WEIGHTS_RANK;
			} else if (strcmp(optarg, "lognormal") == 0) {
				opts->weights = DLC_SIMULATE_WEIGHTS_LOGNORMAL;
			} else {
				dlc_cause_set(cause, "--weights '%s' is not a weighting; give rank or lognormal.",
					      optarg);
				return -EINVAL;
			}
			opts->weights_given = true;
			break;
		case OPTION_SIGMA:
			errno = 0;
			opts->sigma = strtod(optarg, &end);
			if (end == optarg || *end != '\0' || errno != 0 ||
			    !(opts->sigma > 0 && opts->sigma <= SIMULATE_MAX_SIGMA)) {
				dlc_cause_set(cause, "--sigma '%s' is not a number above 0 and at most %g; give one such as 1.",
					      optarg, SIMULATE_MAX_SIGMA);
				return -EINVAL;
			}
			opts->sigma_given = true;
			break;
		case OPTION_PADS:
			opts->pads = true;
			break;
		case OPTION_SEED:
			if (parse_uint(optarg, UINT64_MAX, &opts->seed) < 0) {
				dlc_cause_set(cause, "--seed '%s' is not a whole number from 0 to %" PRIu64 "; give one such as 1.",
					      optarg, UINT64_MAX);
				return -EINVAL;
			}
			break;
		case OPTION_FRACTIONS:
			if (parse_fractions(optarg, opts, cause) < 0)
				return -EINVAL;
			break;
		case OPTION_BATCH:
			if (parse_uint(optarg, DLC_SIMULATE_MAX_SAMPLES, &value) < 0 || value == 0) {
				dlc_cause_set(cause, "--batch '%s' is not a whole number from 1 to %u; give one such as 256.",
					      optarg, DLC_SIMULATE_MAX_SAMPLES);
				return -EINVAL;
			}
			opts->batch = (uint32_t)value;
			opts->batch_given = true;
			break;
		case OPTION_WORLD:
			if (parse_uint(optarg, MAX_WORLD, &value) < 0 || value == 0) {
				dlc_cause_set(cause, "--world '%s' is not a whole number from 1 to %u; give the number of nodes, such as 4.",
					      optarg, MAX_WORLD);
				return -EINVAL;
			}
			opts->world = (uint32_t)value;
			opts->world_given = true;
			break;
		case OPTION_ANNOUNCE:
			for (value = 0; value < sizeof(announce_names) / sizeof(announce_names[0]); value++)
				if (strcmp(optarg, announce_names[value]) == 0)
					break;
			if (value == sizeof(announce_names) / sizeof(announce_names[0])) {
				dlc_cause_set(cause, "--announce '%s' is not a horizon; give none, epoch, ahead, all or first.",
					      optarg);
				return -EINVAL;
			}
			opts->announce = (enum dlc_simulate_announce)value;
			break;
		case 'h':
		case OPTION_HELP:
			simulate_usage(stdout);
			return 1;
		case ':':
			dlc_cause_set(cause, "%s needs a value; see dlcache simulate --help.",
				      argv[optind - 1]);
			return -EINVAL;
		default:
			if (optopt >= OPTION_SAMPLES)
				dlc_cause_set(cause, "%s takes no value; see dlcache simulate --help.",
					      argv[optind - 1]);
			else if (optopt > ' ' && optopt < 0x7f)
				dlc_cause_set(cause, "unknown option '-%c'; see dlcache simulate --help.",
					      optopt);
			else
				dlc_cause_set(cause, "unknown option '%s'; see dlcache simulate --help.",
					      argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		dlc_cause_set(cause, "unexpected argument '%s'; name a trace file with --trace FILE.",
			      argv[optind]);
		return -EINVAL;
	}
	return 0;
}

/* Rejects options that the chosen trace would silently ignore. */
static int check_combination(const struct simulate_options *opts, bool generated,
			     bool importance, char **cause)
{
	bool churn = is_churn(opts->trace);

	if (!churn && (opts->batch_given || opts->world_given)) {
		dlc_cause_set(cause, "--batch and --world apply to --trace churn and churn-sampled only; add one of those or drop them.");
		return -EINVAL;
	}
	if (churn && opts->world > opts->samples) {
		dlc_cause_set(cause, "--world %u is more than the %u samples; use fewer nodes or more samples.",
			      opts->world, opts->samples);
		return -EINVAL;
	}
	if (opts->pads && opts->announce != DLC_SIMULATE_ANNOUNCE_NONE) {
		dlc_cause_set(cause, "--pads reorders each epoch, so nothing announced would hold; drop --pads or --announce.");
		return -EINVAL;
	}
	if (!generated && opts->epochs_given) {
		dlc_cause_set(cause, "--epochs applies to generated traces only; drop it, the trace file's length decides the epochs.");
		return -EINVAL;
	}
	if (!importance && opts->weights_given) {
		dlc_cause_set(cause, "--weights applies to --trace importance only; add --trace importance or drop --weights.");
		return -EINVAL;
	}
	if (opts->sigma_given && !(importance && opts->weights == DLC_SIMULATE_WEIGHTS_LOGNORMAL)) {
		dlc_cause_set(cause, "--sigma applies to --trace importance --weights lognormal only; add those or drop --sigma.");
		return -EINVAL;
	}
	if (generated && opts->samples > DLC_SIMULATE_MAX_LENGTH / opts->epochs) {
		dlc_cause_set(cause, "%u samples times %u epochs is more than %u accesses; use fewer samples or epochs.",
			      opts->samples, opts->epochs, DLC_SIMULATE_MAX_LENGTH);
		return -EINVAL;
	}
	return 0;
}

static int make_trace(const struct simulate_options *opts, struct dlc_trace *trace, char **cause)
{
	bool uniform = strcmp(opts->trace, "uniform") == 0;
	bool importance = strcmp(opts->trace, "importance") == 0;
	bool churn = is_churn(opts->trace);
	struct dlc_simulate_churn job = {
		.samples = opts->samples, .epochs = opts->epochs, .batch = opts->batch,
		.world = opts->world, .sampled = strcmp(opts->trace, "churn-sampled") == 0,
		.seed = opts->seed,
	};
	int rc;

	rc = check_combination(opts, uniform || importance || churn, importance, cause);
	if (rc < 0)
		return rc;
	if (churn)
		rc = dlc_simulate_churn(&job, trace);
	else if (uniform)
		rc = dlc_simulate_shuffle(opts->samples, opts->epochs, opts->seed, trace);
	else if (importance)
		rc = dlc_simulate_sample(opts->samples, opts->epochs, opts->weights, opts->sigma,
					 opts->seed, trace);
	else
		return dlc_simulate_load(opts->trace, opts->samples_given ? opts->samples : 0,
					 trace, cause);
	if (rc == -ENOMEM)
		dlc_cause_set(cause, "not enough memory for %u samples times %u epochs; use fewer samples or epochs.",
			      opts->samples, opts->epochs);
	return rc;
}

/* The table's columns: fraction, entries, then per group a ratio per policy and MIN. */
#define FRACTION_WIDTH 9
#define ENTRIES_WIDTH 8
#define RATIO_WIDTH 6

static int column_width(size_t column)
{
	const char *name = column < TABLE_KINDS ? dlc_policy_name(table_kinds[column]) : "min";
	int width = (int)strlen(name);

	return width > RATIO_WIDTH ? width : RATIO_WIDTH;
}

/* A label centred in dashes over one group of columns. */
static void print_group(const char *label)
{
	int width = -1, dashes;

	for (size_t p = 0; p <= TABLE_KINDS; p++)
		width += column_width(p) + 1;
	dashes = width - (int)strlen(label) - 2;
	printf(" %.*s %s %.*s", dashes / 2, "--------------------------------", label,
	       dashes - dashes / 2, "--------------------------------");
}

static void print_header(const struct simulate_options *opts, const struct dlc_trace *trace)
{
	bool uniform = strcmp(opts->trace, "uniform") == 0;
	bool importance = strcmp(opts->trace, "importance") == 0;
	size_t epochs = (trace->length + trace->epoch_length - 1) / trace->epoch_length;

	if (is_churn(opts->trace))
		printf("# trace: a training job, %s each epoch, loss ranks written every %u reads%s, seed %" PRIu64 "\n",
		       strcmp(opts->trace, "churn") == 0 ? "a uniform shuffle" : "draws with replacement by loss",
		       opts->batch, opts->world > 1 ? " per node" : "", opts->seed);
	else if (uniform)
		printf("# trace: uniform shuffle each epoch, seed %" PRIu64 "\n", opts->seed);
	else if (importance && opts->weights == DLC_SIMULATE_WEIGHTS_RANK)
		printf("# trace: importance sampling with replacement, weights ln(rank + 10), seed %" PRIu64 "\n",
		       opts->seed);
	else if (importance)
		printf("# trace: importance sampling with replacement, weights lognormal sigma %g, seed %" PRIu64 "\n",
		       opts->sigma, opts->seed);
	else
		printf("# trace: %s\n", opts->trace);
	printf("# %u samples; %zu accesses in %zu %s of %zu\n", trace->samples, trace->length,
	       epochs, epochs == 1 ? "epoch" : "epochs", trace->epoch_length);
	if (opts->world > 1)
		printf("# DistributedSampler over %u nodes: node 0's share of each epoch; global ranks\n",
		       opts->world);
	if (is_churn(opts->trace))
		printf("# importance scores: loss ranks, difficulty x 0.7^visits x lognormal noise, unknown at first\n");
	else if (uniform)
		printf("# importance scores: a random static score per sample, uniform in [0, 1)\n");
	else if (importance)
		printf("# importance scores: the sampling weights\n");
	else if (trace->updates != NULL)
		printf("# importance scores: from the trace, each from its line on\n");
	else
		printf("# importance scores: none in the trace (importance acts as freeze)\n");
	if (opts->pads)
		printf("# pads: each epoch, accesses to samples cached at its start come first (min: as drawn)\n");
	if (opts->announce == DLC_SIMULATE_ANNOUNCE_EPOCH)
		printf("# announced: each epoch's order as it starts (prefetch lines); importance plans with it\n");
	else if (opts->announce == DLC_SIMULATE_ANNOUNCE_AHEAD)
		printf("# announced: each epoch's order one epoch ahead (prefetch lines); importance plans with it\n");
	else if (opts->announce == DLC_SIMULATE_ANNOUNCE_ALL)
		printf("# announced: the whole trace at the start (prefetch lines); importance plans with it\n");
	else if (opts->announce == DLC_SIMULATE_ANNOUNCE_FIRST)
		printf("# announced: each epoch's order as it starts, each sample once (its first draw)\n");
	printf("# hit ratio = hits / accesses; min is Belady's MIN with bypass (the optimum)\n");
	printf("#%*s", FRACTION_WIDTH + ENTRIES_WIDTH + 1, "");
	print_group("all accesses");
	printf(" ");
	print_group("from epoch 2 on");
	printf("\n#%*s %*s", FRACTION_WIDTH, "fraction", ENTRIES_WIDTH, "entries");
	for (int group = 0; group < 2; group++) {
		printf("%s", group ? "  " : "");
		for (size_t p = 0; p <= TABLE_KINDS; p++)
			printf(" %*s", column_width(p), p < TABLE_KINDS ? dlc_policy_name(table_kinds[p])
								       : "min");
	}
	printf("\n");
}

static void print_ratio(uint64_t misses, uint64_t accesses, int width)
{
	if (accesses == 0)
		printf(" %*s", width, "-");
	else
		printf(" %*.4f", width, 1.0 - (double)misses / (double)accesses);
}

/* The replays of the table, shared by the threads that run them. */
struct job_board {
	const struct dlc_trace *trace;
	bool pads;
	enum dlc_simulate_announce announce;
	const uint32_t *entries;        /* per row */
	struct dlc_simulate_result *results;    /* per row, TABLE_KINDS + 1 columns */
	size_t jobs;                    /* rows * (TABLE_KINDS + 1) */
	pthread_mutex_t lock;
	size_t next;                    /* guarded by lock: the next job to start */
	int rc;                         /* guarded by lock: the first failure, or 0 */
};

static void *run_jobs(void *arg)
{
	struct job_board *board = arg;

	for (;;) {
		size_t job = SIZE_MAX, row, column;
		int rc;

		pthread_mutex_lock(&board->lock);
		if (board->next < board->jobs && board->rc == 0)
			job = board->next++;
		pthread_mutex_unlock(&board->lock);
		if (job == SIZE_MAX)
			return NULL;
		row = job / (TABLE_KINDS + 1);
		column = job % (TABLE_KINDS + 1);
		if (column < TABLE_KINDS && board->announce != DLC_SIMULATE_ANNOUNCE_NONE)
			rc = dlc_simulate_replay_announced(board->trace, table_kinds[column],
							   board->entries[row], board->announce,
							   &board->results[job]);
		else if (column < TABLE_KINDS)
			rc = dlc_simulate_replay(board->trace, table_kinds[column], board->entries[row],
						 board->pads, &board->results[job]);
		else
			rc = dlc_simulate_belady(board->trace, board->entries[row],
						 &board->results[job]);
		if (rc < 0) {
			pthread_mutex_lock(&board->lock);
			if (board->rc == 0)
				board->rc = rc;
			pthread_mutex_unlock(&board->lock);
		}
	}
}

/* Runs every job, on this thread and up to one more per CPU; 0 or -errno. */
static int run_board(struct job_board *board)
{
	pthread_t threads[MAX_THREADS];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t wanted = cpus > 1 ? (size_t)cpus : 1, started = 0;

	if (wanted > MAX_THREADS)
		wanted = MAX_THREADS;
	if (wanted > board->jobs)
		wanted = board->jobs;
	pthread_mutex_init(&board->lock, NULL);
	/* A thread that cannot start leaves its share to the others. */
	while (started + 1 < wanted &&
	       pthread_create(&threads[started], NULL, run_jobs, board) == 0)
		started++;
	run_jobs(board);
	for (size_t i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	pthread_mutex_destroy(&board->lock);
	return board->rc;
}

int dlc_simulate_main(int argc, char **argv)
{
	struct simulate_options opts;
	struct dlc_trace trace = { 0 };
	struct dlc_simulate_result results[MAX_FRACTIONS][TABLE_KINDS + 1];
	uint32_t entries[MAX_FRACTIONS];
	struct job_board board = { 0 };
	char *cause = NULL;
	int rc;

	rc = parse_options(argc, argv, &opts, &cause);
	if (rc == 1)
		return 0;
	if (rc == 0)
		rc = make_trace(&opts, &trace, &cause);
	if (rc < 0)
		goto out;
	for (size_t f = 0; f < opts.fraction_count; f++)
		entries[f] = (uint32_t)llround(opts.fractions[f] * trace.samples);
	board.trace = &trace;
	board.pads = opts.pads;
	board.announce = opts.announce;
	board.entries = entries;
	board.results = &results[0][0];
	board.jobs = opts.fraction_count * (TABLE_KINDS + 1);
	rc = run_board(&board);
	if (rc < 0) {
		dlc_cause_set(&cause, "not enough memory to replay %u samples; use fewer samples or epochs.",
			      trace.samples);
		goto out;
	}
	print_header(&opts, &trace);
	for (size_t f = 0; f < opts.fraction_count; f++) {
		const struct dlc_simulate_result *row = results[f];

		printf(" %*.4g %*" PRIu32, FRACTION_WIDTH, opts.fractions[f], ENTRIES_WIDTH,
		       entries[f]);
		for (size_t p = 0; p <= TABLE_KINDS; p++)
			print_ratio(row[p].misses, row[p].accesses, column_width(p));
		printf("  ");
		for (size_t p = 0; p <= TABLE_KINDS; p++)
			print_ratio(row[p].later_misses, row[p].later_accesses, column_width(p));
		printf("\n");
	}
	/* What the source sees: every miss is a fetch, the first epoch's included. */
	printf("# source fetches (misses, all accesses) against MIN's:");
	for (size_t p = 0; p < TABLE_KINDS; p++) {
		printf(" %s", dlc_policy_name(table_kinds[p]));
		for (size_t f = 0; f < opts.fraction_count; f++) {
			const struct dlc_simulate_result *row = results[f];

			if (row[TABLE_KINDS].misses == 0)
				printf(" -");
			else
				printf(" %.3f", (double)row[p].misses / (double)row[TABLE_KINDS].misses);
		}
		printf("%s", p + 1 < TABLE_KINDS ? ";" : "\n");
	}
	if (fflush(stdout) != 0) {
		rc = -errno;
		dlc_cause_set(&cause, "cannot write the table: %s; check standard output.",
			      strerror(errno));
	}
out:
	if (rc < 0)
		fprintf(stderr, "dlcache simulate: %s\n",
			cause ? cause : "out of memory; use fewer samples or epochs.");
	free(cause);
	dlc_trace_free(&trace);
	return rc < 0 ? 1 : 0;
}
