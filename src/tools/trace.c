/*
 * trace.c - the sample-access traces that `dlcache simulate` replays: three
 * generators (per-epoch uniform shuffles, importance sampling with
 * replacement, a training job whose scores churn) and the text trace
 * format, its parser and its loader.
 *
 * Its functions are declared in simulate.h (dlc_simulate_shuffle,
 * dlc_simulate_sample, dlc_simulate_churn, dlc_simulate_parse,
 * dlc_simulate_load and dlc_trace_free); simulate.c replays the traces they
 * build.  Nothing here prints: a bad trace file is reported through a cause.
 *
 * DESIGN
 *
 * Randomness comes from splitmix64 (one 64-bit state, passes BigCrush), never
 * rand(), so a seed gives the same trace on every machine.  Each use draws
 * from its own stream derived from the seed (access order, scores), so that,
 * for instance, the scores do not change when the number of epochs does.
 * Bounded integers use Lemire's multiply-and-reject, which is unbiased.
 *
 * Importance sampling draws with replacement from the weights through an
 * alias table (Vose): O(samples) to build, O(1) per draw.
 *
 * The churning job (dlc_simulate_churn) walks the global order one global
 * batch at a time (batch reads per node, world nodes): node 0's reads go to
 * the trace, every read sample gets a new loss, and the batch's rank scores
 * become rescores in effect from node 0's next read.  A rank is a binary
 * search in a sorted reference of the latest losses, rebuilt at each epoch
 * and whenever the known samples double, as the training helper does.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/cause.h"
#include "dlcache/simulate.h"
#include "simulate_private.h"

/* Streams derived from one seed, one per use. */
enum stream {
	STREAM_ORDER = 1,       /* access order: shuffles, draws */
	STREAM_SCORES = 2,      /* scores and weights */
	STREAM_LOSSES = 3,      /* the churning job's loss noise */
};

/* The churning job's losses: difficulty * DECAY^visits * lognormal noise. */
#define CHURN_DIFFICULTY_SIGMA 1.0
#define CHURN_DECAY 0.7
#define CHURN_NOISE_SIGMA 0.3

#define MAX_TOKEN 64

/* --- randomness -------------------------------------------------------- */

struct rng {
	uint64_t state;
};

static uint64_t rng_next(struct rng *rng)
{
	uint64_t z = (rng->state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static struct rng rng_stream(uint64_t seed, enum stream stream)
{
	struct rng mixer = { seed ^ ((uint64_t)stream * 0xd1b54a32d192ed03ULL) };

	return (struct rng){ rng_next(&mixer) };
}

/* Uniform in 0..bound-1 (bound >= 1), without modulo bias. */
static uint32_t rng_below(struct rng *rng, uint32_t bound)
{
	uint64_t product = (rng_next(rng) >> 32) * bound;

	if ((uint32_t)product < bound) {
		uint32_t threshold = (uint32_t)-bound % bound;

		while ((uint32_t)product < threshold)
			product = (rng_next(rng) >> 32) * bound;
	}
	return (uint32_t)(product >> 32);
}

/* Uniform in [0, 1), 53 bits. */
static double rng_unit(struct rng *rng)
{
	return (double)(rng_next(rng) >> 11) * 0x1.0p-53;
}

/* Standard normal (Box-Muller, one of the pair). */
static double rng_normal(struct rng *rng)
{
	double radius = sqrt(-2.0 * log(1.0 - rng_unit(rng)));

	return radius * cos(2.0 * 3.14159265358979323846 * rng_unit(rng));
}

static void shuffle(uint32_t *items, uint32_t count, struct rng *rng)
{
	for (uint32_t i = count; i > 1; i--) {
		uint32_t j = rng_below(rng, i);
		uint32_t item = items[i - 1];

		items[i - 1] = items[j];
		items[j] = item;
	}
}

/* --- traces ------------------------------------------------------------ */

void dlc_trace_free(struct dlc_trace *trace)
{
	if (trace == NULL)
		return;
	free(trace->ids);
	free(trace->scores);
	free(trace->updates);
	free(trace->rescores);
	memset(trace, 0, sizeof(*trace));
}

/* Checks a generator's size; 0 or -EINVAL. */
static int check_size(uint32_t samples, uint32_t epochs)
{
	if (samples == 0 || epochs == 0 || samples > DLC_SIMULATE_MAX_SAMPLES ||
	    (uint64_t)samples * epochs > DLC_SIMULATE_MAX_LENGTH)
		return -EINVAL;
	return 0;
}

/* samples scores, all unknown; NULL on ENOMEM. */
static float *unknown_scores(uint32_t samples)
{
	float *scores = malloc((size_t)samples * sizeof(*scores));

	for (uint32_t i = 0; scores != NULL && i < samples; i++)
		scores[i] = NAN;
	return scores;
}

/* Allocates ids and scores (all unknown); 0 or -ENOMEM with *trace zeroed. */
static int trace_alloc(struct dlc_trace *trace, uint32_t samples, size_t length,
		       size_t epoch_length)
{
	memset(trace, 0, sizeof(*trace));
	trace->ids = malloc((length ? length : 1) * sizeof(*trace->ids));
	trace->scores = unknown_scores(samples);
	if (trace->ids == NULL || trace->scores == NULL) {
		dlc_trace_free(trace);
		return -ENOMEM;
	}
	trace->samples = samples;
	trace->length = length;
	trace->epoch_length = epoch_length ? epoch_length : 1;
	return 0;
}

int dlc_simulate_shuffle(uint32_t samples, uint32_t epochs, uint64_t seed,
			 struct dlc_trace *out)
{
	struct rng order = rng_stream(seed, STREAM_ORDER);
	struct rng scores = rng_stream(seed, STREAM_SCORES);
	int rc;

	memset(out, 0, sizeof(*out));
	rc = check_size(samples, epochs);
	if (rc < 0)
		return rc;
	rc = trace_alloc(out, samples, (size_t)samples * epochs, samples);
	if (rc < 0)
		return rc;
	for (uint32_t i = 0; i < samples; i++) {
		out->ids[i] = i;
		out->scores[i] = (float)(rng_next(&scores) >> 40) * 0x1.0p-24f;
	}
	for (uint32_t epoch = 0; epoch < epochs; epoch++) {
		uint32_t *ids = out->ids + (size_t)epoch * samples;

		if (epoch > 0)
			memcpy(ids, ids - samples, (size_t)samples * sizeof(*ids));
		shuffle(ids, samples, &order);
	}
	return 0;
}

/*
 * Vose's alias table over weights (which it overwrites): draw i uniformly,
 * then keep it with probability cutoff[i], else take alias[i].
 */
static int alias_build(double *weights, uint32_t count, uint32_t *alias)
{
	uint32_t *work = malloc((size_t)count * sizeof(*work));
	uint32_t small = 0, large = count;  /* small: work[0..small), large: work[large..count) */
	double total = 0;

	if (work == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < count; i++)
		total += weights[i];
	for (uint32_t i = 0; i < count; i++) {
		weights[i] = weights[i] * count / total;
		alias[i] = i;
		if (weights[i] < 1.0)
			work[small++] = i;
		else
			work[--large] = i;
	}
	while (small > 0 && large < count) {
		uint32_t less = work[--small];
		uint32_t more = work[large++];

		/* weights[less] is now its cutoff; more gives the rest of the slot. */
		alias[less] = more;
		weights[more] -= 1.0 - weights[less];
		if (weights[more] < 1.0)
			work[small++] = more;
		else
			work[--large] = more;
	}
	/* Left over only through rounding: they keep their own slot. */
	while (small > 0)
		weights[work[--small]] = 1.0;
	while (large < count)
		weights[work[large++]] = 1.0;
	free(work);
	return 0;
}

int dlc_simulate_sample(uint32_t samples, uint32_t epochs, enum dlc_simulate_weights weights,
			double sigma, uint64_t seed, struct dlc_trace *out)
{
	struct rng order = rng_stream(seed, STREAM_ORDER);
	struct rng scores = rng_stream(seed, STREAM_SCORES);
	double *cutoff = NULL;
	uint32_t *alias = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = check_size(samples, epochs);
	if (rc < 0)
		return rc;
	if (weights != DLC_SIMULATE_WEIGHTS_RANK &&
	    (weights != DLC_SIMULATE_WEIGHTS_LOGNORMAL ||
	     !(sigma > 0 && sigma <= SIMULATE_MAX_SIGMA)))
		return -EINVAL;
	rc = trace_alloc(out, samples, (size_t)samples * epochs, samples);
	if (rc < 0)
		return rc;
	cutoff = malloc((size_t)samples * sizeof(*cutoff));
	alias = malloc((size_t)samples * sizeof(*alias));
	if (cutoff == NULL || alias == NULL) {
		rc = -ENOMEM;
		goto out;
	}

	if (weights == DLC_SIMULATE_WEIGHTS_RANK) {
		/* alias[] holds the ranks for a moment: a random order of importance. */
		for (uint32_t i = 0; i < samples; i++)
			alias[i] = i;
		shuffle(alias, samples, &scores);
		for (uint32_t i = 0; i < samples; i++)
			cutoff[i] = log((double)alias[i] + 10.0);
	} else {
		for (uint32_t i = 0; i < samples; i++)
			cutoff[i] = exp(sigma * rng_normal(&scores));
	}
	for (uint32_t i = 0; i < samples; i++)
		out->scores[i] = (float)cutoff[i];
	rc = alias_build(cutoff, samples, alias);
	if (rc < 0)
		goto out;
	for (size_t k = 0; k < out->length; k++) {
		uint32_t i = rng_below(&order, samples);

		out->ids[k] = rng_unit(&order) < cutoff[i] ? i : alias[i];
	}
out:
	free(alias);
	free(cutoff);
	if (rc < 0)
		dlc_trace_free(out);
	return rc;
}

/* --- a job whose scores churn ------------------------------------------ */

struct churn {
	const struct dlc_simulate_churn *opts;
	struct rng order, losses;
	double *difficulty;     /* per sample */
	uint32_t *visits;       /* per sample: reads so far, all nodes */
	float *latest;          /* per sample: the latest loss, NaN before the first */
	uint32_t known;         /* samples with a loss */
	float *reference;       /* sorted latest losses of the known samples */
	uint32_t reference_count;
	uint32_t *global;       /* one epoch's global order, padded to a multiple of world */
	double *cutoff;         /* sampled: the alias table of the epoch */
	uint32_t *alias;
	size_t rescore_capacity;
};

static int compare_floats(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

static void churn_rebuild_reference(struct churn *churn)
{
	uint32_t count = 0;

	for (uint32_t i = 0; i < churn->opts->samples; i++)
		if (!isnan(churn->latest[i]))
			churn->reference[count++] = churn->latest[i];
	qsort(churn->reference, count, sizeof(*churn->reference), compare_floats);
	churn->reference_count = count;
}

/* The rank score of loss: the share of the reference strictly below it. */
static float churn_rank(const struct churn *churn, float loss)
{
	uint32_t low = 0, high = churn->reference_count;

	while (low < high) {
		uint32_t middle = low + (high - low) / 2;

		if (churn->reference[middle] < loss)
			low = middle + 1;
		else
			high = middle;
	}
	return churn->reference_count ? (float)low / (float)churn->reference_count : 0.5f;
}

/* Fills churn->global[0..samples) with the epoch's global order. */
static int churn_draw_epoch(struct churn *churn)
{
	uint32_t samples = churn->opts->samples;
	double mean = 0;
	int rc;

	if (!churn->opts->sampled) {
		shuffle(churn->global, samples, &churn->order);
		return 0;
	}
	for (uint32_t i = 0; i < samples; i++)
		mean += isnan(churn->latest[i]) ? 0 : churn->latest[i];
	mean = churn->known ? mean / churn->known : 1.0;
	for (uint32_t i = 0; i < samples; i++)
		churn->cutoff[i] = isnan(churn->latest[i]) ? mean : churn->latest[i];
	rc = alias_build(churn->cutoff, samples, churn->alias);
	if (rc < 0)
		return rc;
	for (uint32_t k = 0; k < samples; k++) {
		uint32_t i = rng_below(&churn->order, samples);

		churn->global[k] = rng_unit(&churn->order) < churn->cutoff[i] ? i : churn->alias[i];
	}
	return 0;
}

/* Sample i was read: its new loss, and the rank the job writes for it. */
static float churn_read(struct churn *churn, uint32_t i)
{
	float loss = (float)(churn->difficulty[i] * pow(CHURN_DECAY, ++churn->visits[i]) *
			     exp(CHURN_NOISE_SIGMA * rng_normal(&churn->losses)));

	if (isnan(churn->latest[i]) && ++churn->known >= 2 * churn->reference_count) {
		churn->latest[i] = loss;
		churn_rebuild_reference(churn);
	}
	churn->latest[i] = loss;
	return churn_rank(churn, loss);
}

static int churn_push(struct churn *churn, struct dlc_trace *out, uint64_t before,
		      uint32_t sample, float score)
{
	if (out->rescore_count == churn->rescore_capacity) {
		size_t capacity = churn->rescore_capacity ? churn->rescore_capacity * 2 : 4096;
		struct dlc_trace_rescore *grown = realloc(out->rescores, capacity * sizeof(*grown));

		if (grown == NULL)
			return -ENOMEM;
		out->rescores = grown;
		churn->rescore_capacity = capacity;
	}
	out->rescores[out->rescore_count++] = (struct dlc_trace_rescore){ before, sample, score };
	return 0;
}

/* One epoch: node 0's reads into ids[], every global batch's ranks as rescores. */
static int churn_epoch(struct churn *churn, struct dlc_trace *out, uint64_t start)
{
	const struct dlc_simulate_churn *opts = churn->opts;
	uint32_t world = opts->world, per_node = (uint32_t)out->epoch_length;
	int rc;

	rc = churn_draw_epoch(churn);
	if (rc < 0)
		return rc;
	/* DistributedSampler: padded with the first indices to a multiple of world. */
	for (uint32_t k = opts->samples; k < per_node * world; k++)
		churn->global[k] = churn->global[k - opts->samples];
	churn_rebuild_reference(churn);
	for (uint32_t first = 0; first < per_node; first += opts->batch) {
		uint32_t last = per_node - first < opts->batch ? per_node : first + opts->batch;

		for (uint32_t j = first; j < last; j++)
			out->ids[start + j] = churn->global[(size_t)j * world];
		for (size_t k = (size_t)first * world; k < (size_t)last * world; k++) {
			uint32_t i = churn->global[k];
			float score = churn_read(churn, i);

			if (start + last < out->length) {
				rc = churn_push(churn, out, start + last, i, score);
				if (rc < 0)
					return rc;
			}
		}
	}
	return 0;
}

int dlc_simulate_churn(const struct dlc_simulate_churn *opts, struct dlc_trace *out)
{
	struct churn churn = {
		.opts = opts,
		.order = rng_stream(opts->seed, STREAM_ORDER),
		.losses = rng_stream(opts->seed, STREAM_LOSSES),
	};
	struct rng scores = rng_stream(opts->seed, STREAM_SCORES);
	uint32_t per_node;
	int rc;

	memset(out, 0, sizeof(*out));
	if (opts->batch == 0 || opts->world == 0 || opts->world > opts->samples ||
	    check_size(opts->samples, opts->epochs) < 0)
		return -EINVAL;
	per_node = (uint32_t)(((uint64_t)opts->samples + opts->world - 1) / opts->world);
	rc = trace_alloc(out, opts->samples, (size_t)per_node * opts->epochs, per_node);
	if (rc < 0)
		return rc;
	rc = -ENOMEM;
	churn.difficulty = malloc((size_t)opts->samples * sizeof(*churn.difficulty));
	churn.visits = calloc(opts->samples, sizeof(*churn.visits));
	churn.latest = unknown_scores(opts->samples);
	churn.reference = malloc((size_t)opts->samples * sizeof(*churn.reference));
	churn.global = malloc((size_t)per_node * opts->world * sizeof(*churn.global));
	if (opts->sampled) {
		churn.cutoff = malloc((size_t)opts->samples * sizeof(*churn.cutoff));
		churn.alias = malloc((size_t)opts->samples * sizeof(*churn.alias));
	}
	if (churn.difficulty == NULL || churn.visits == NULL || churn.latest == NULL ||
	    churn.reference == NULL || churn.global == NULL ||
	    (opts->sampled && (churn.cutoff == NULL || churn.alias == NULL)))
		goto out;
	for (uint32_t i = 0; i < opts->samples; i++) {
		churn.difficulty[i] = exp(CHURN_DIFFICULTY_SIGMA * rng_normal(&scores));
		churn.global[i] = i;
	}
	for (uint32_t epoch = 0; epoch < opts->epochs; epoch++) {
		rc = churn_epoch(&churn, out, (uint64_t)epoch * per_node);
		if (rc < 0)
			goto out;
	}
	rc = 0;
out:
	free(churn.alias);
	free(churn.cutoff);
	free(churn.global);
	free(churn.reference);
	free(churn.latest);
	free(churn.visits);
	free(churn.difficulty);
	if (rc < 0)
		dlc_trace_free(out);
	return rc;
}

/* --- the trace file ---------------------------------------------------- */

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* The next blank-separated token in [*at, end), or false at the end. */
static bool next_token(const char **at, const char *end, const char **token, size_t *len)
{
	const char *p = *at;

	while (p < end && is_blank(*p))
		p++;
	if (p == end)
		return false;
	*token = p;
	while (p < end && !is_blank(*p))
		p++;
	*len = (size_t)(p - *token);
	*at = p;
	return true;
}

/* A 0-based decimal sample id below DLC_SIMULATE_MAX_SAMPLES. */
static bool parse_id(const char *token, size_t len, uint32_t *out)
{
	uint64_t value = 0;

	if (len == 0 || len > 10)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (token[i] < '0' || token[i] > '9')
			return false;
		value = value * 10 + (uint64_t)(token[i] - '0');
	}
	if (value >= DLC_SIMULATE_MAX_SAMPLES)
		return false;
	*out = (uint32_t)value;
	return true;
}

static bool parse_score(const char *token, size_t len, float *out)
{
	char buffer[MAX_TOKEN + 1];
	char *end;
	float value;

	if (len == 0 || len > MAX_TOKEN)
		return false;
	memcpy(buffer, token, len);
	buffer[len] = '\0';
	errno = 0;
	value = strtof(buffer, &end);
	if (*end != '\0' || !isfinite(value) || errno == ERANGE)
		return false;
	*out = value;
	return true;
}

/*
 * Grows an array of item_size items to hold want, doubling *capacity; returns
 * the array, or NULL (the old one still valid and *capacity unchanged).
 */
static void *grow(void *items, size_t *capacity, size_t want, size_t item_size)
{
	size_t next = *capacity ? *capacity : 1024;
	void *grown;

	if (want <= *capacity)
		return items;
	while (next < want)
		next *= 2;
	grown = realloc(items, next * item_size);
	if (grown != NULL)
		*capacity = next;
	return grown;
}

int dlc_simulate_parse(const char *name, const char *text, size_t size, uint32_t samples,
		       struct dlc_trace *out, char **cause)
{
	const char *end = text + size;
	size_t ids_capacity = 0, updates_capacity = 0, line_number = 0;
	uint32_t *ids = NULL;
	float *updates = NULL;
	void *grown;
	size_t length = 0;
	uint32_t highest = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	for (const char *line = text; line < end;) {
		const char *newline = memchr(line, '\n', (size_t)(end - line));
		const char *line_end = newline ? newline : end;
		const char *comment = memchr(line, '#', (size_t)(line_end - line));
		const char *at = line, *token;
		size_t len;
		uint32_t id;
		float score = NAN;

		line_number++;
		line = newline ? newline + 1 : end;
		if (comment)
			line_end = comment;
		if (!next_token(&at, line_end, &token, &len))
			continue;
		if (!parse_id(token, len, &id)) {
			dlc_cause_set(cause, "%s line %zu: '%.*s' is not a sample id; write one 0-based integer below %u per line, optionally followed by a score.",
				      name, line_number, (int)(len > MAX_TOKEN ? MAX_TOKEN : len), token,
				      DLC_SIMULATE_MAX_SAMPLES);
			goto invalid;
		}
		if (samples != 0 && id >= samples) {
			dlc_cause_set(cause, "%s line %zu: sample id %u is not below the %u samples; raise --samples or fix the trace.",
				      name, line_number, id, samples);
			goto invalid;
		}
		if (next_token(&at, line_end, &token, &len) && !parse_score(token, len, &score)) {
			dlc_cause_set(cause, "%s line %zu: score '%.*s' is not a finite number; write a decimal such as 0.25 after the sample id.",
				      name, line_number, (int)(len > MAX_TOKEN ? MAX_TOKEN : len), token);
			goto invalid;
		}
		if (next_token(&at, line_end, &token, &len)) {
			dlc_cause_set(cause, "%s line %zu has more than two fields; write a sample id and at most one score per line.",
				      name, line_number);
			goto invalid;
		}
		if (length == DLC_SIMULATE_MAX_LENGTH) {
			dlc_cause_set(cause, "%s has more than %u accesses; cut the trace shorter.",
				      name, DLC_SIMULATE_MAX_LENGTH);
			goto invalid;
		}
		grown = grow(ids, &ids_capacity, length + 1, sizeof(*ids));
		if (grown == NULL)
			goto nomem;
		ids = grown;
		if (!isnan(score) || updates != NULL) {
			bool first = updates == NULL;

			grown = grow(updates, &updates_capacity, length + 1, sizeof(*updates));
			if (grown == NULL)
				goto nomem;
			updates = grown;
			/* The first score: every earlier access set none. */
			for (size_t k = 0; first && k < length; k++)
				updates[k] = NAN;
			updates[length] = score;
		}
		ids[length++] = id;
		if (id > highest)
			highest = id;
	}
	if (length == 0) {
		dlc_cause_set(cause, "%s has no sample ids; write one 0-based integer per line.", name);
		goto invalid;
	}
	if (samples == 0)
		samples = highest + 1;
	out->scores = unknown_scores(samples);
	if (out->scores == NULL)
		goto nomem;
	out->samples = samples;
	out->length = length;
	out->epoch_length = samples;
	out->ids = ids;
	out->updates = updates;
	return 0;

invalid:
	rc = -EINVAL;
	goto out;
nomem:
	dlc_cause_set(cause, "not enough memory for the trace in %s; use a shorter trace.", name);
	rc = -ENOMEM;
out:
	free(ids);
	free(updates);
	return rc;
}

/* Reads all of path ("-": standard input); 0 or -errno with *cause. */
static int read_all(const char *path, char **text, size_t *size, char **cause)
{
	FILE *file = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	size_t capacity = 0, used = 0;
	char *buffer = NULL;
	int rc = 0;

	if (file == NULL) {
		rc = -errno;
		dlc_cause_set(cause, "cannot open the trace %s: %s; check the path given to --trace.",
			      path, strerror(errno));
		return rc;
	}
	for (;;) {
		char *grown = grow(buffer, &capacity, used + 65536, 1);
		size_t got;

		if (grown == NULL) {
			rc = -ENOMEM;
			dlc_cause_set(cause, "not enough memory to read the trace %s; use a shorter trace.",
				      path);
			break;
		}
		buffer = grown;
		got = fread(buffer + used, 1, capacity - used, file);
		used += got;
		if (got == 0) {
			if (ferror(file)) {
				rc = -EIO;
				dlc_cause_set(cause, "cannot read the trace %s; check the file.", path);
			}
			break;
		}
	}
	if (file != stdin)
		fclose(file);
	if (rc < 0) {
		free(buffer);
		return rc;
	}
	*text = buffer;
	*size = used;
	return 0;
}

int dlc_simulate_load(const char *path, uint32_t samples, struct dlc_trace *out, char **cause)
{
	char *text = NULL;
	size_t size = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = read_all(path, &text, &size, cause);
	if (rc < 0)
		return rc;
	rc = dlc_simulate_parse(path, text, size, samples, out, cause);
	free(text);
	return rc;
}
