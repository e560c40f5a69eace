/*
 * warmup.c - `dlcache warmup`: fills a mount's cache ahead of a job, as
 * `juicefs warmup` does, from a Slurm prolog or before the job starts.
 *
 * This file owns the command.  It finds the mount root above MOUNT (the
 * nearest directory holding .control and .stats), gathers the files to warm
 * (a list of paths, standard input, a directory walked recursively, or the N
 * highest-scored files of .scores), announces them in one order as prefetch
 * lines on .control, and reads each whole through the mount on a few threads
 * in that same order: the daemon's prefetcher runs ahead of the readers, and
 * every miss is offered to the cache as a job's read would be (the policy
 * decides; warmup forces nothing in).  Then it waits until .cached holds
 * every file or stops growing, and reports what the cache admitted and what
 * it refused, with the reason the .stats counters give.  It needs no
 * privilege beyond writing .control (the mounting user, or control_uid and
 * control_gid of mount.dlcache(8)) and reads nothing but dlcache-control(5)'s
 * files and the dataset's.
 *
 * THREADS.  The main thread gathers, announces, shows progress and reports;
 * up to --threads readers take files by an atomic index and add to atomic
 * counters; each writes only its own files' status.  Nothing else is shared.
 * On --timeout the main thread reports and returns while readers may still
 * be blocked in a read; the process's exit ends them.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dlcache/fs.h"
#include "dlcache/log.h"
#include "dlcache/warmup.h"

#define READ_BUFFER (1u << 20)
#define CONTROL_WRITE (64u * 1024)
#define MAX_THREADS 64
#define PLAIN_PROGRESS_SECONDS 5.0
#define SETTLE_SECONDS 1.0              /* .cached unchanged this long: settled */
#define MIB (1024.0 * 1024.0)

/* One file to warm; status is written by the one reader that took it. */
struct warm_file {
	char *path;                     /* relative to the mount root */
	uint64_t size;                  /* st_size through the mount */
	double score;                   /* from .scores; NAN when unknown */
	bool cached_before;             /* listed in .cached before the reads */
	bool cached_after;              /* listed in .cached at the end */
	bool repeated;                  /* named before in the selection */
	bool read;                      /* its reader is done with it */
	int error;                      /* 0, or the errno of its open or read */
};

/* A file of the selection found by its path (sorted by path, then index). */
struct path_index {
	const char *path;
	size_t index;
};

struct warmup {
	/* Options. */
	const char *mount_arg, *source;
	long top;                       /* 0: every file of the selection */
	int threads;
	double timeout;                 /* seconds; 0: none */

	/* The mount. */
	char root[PATH_MAX];
	int root_fd;

	/* The selection, in reading order. */
	struct warm_file *files;
	size_t count, capacity;
	size_t skipped;                 /* lines naming no regular file of the dataset */
	char *first_skipped;
	uint64_t total_bytes;

	/* The readers. */
	atomic_size_t next;
	atomic_size_t files_done;
	atomic_uint_fast64_t bytes_done;
	atomic_bool stop;
	atomic_int running;

	/* Progress. */
	bool tty;
	struct timespec start, last_tty;  /* start: of the command (for --timeout) */
	struct timespec reads_start;      /* when the readers started (for rates) */
	double read_seconds;              /* how long the reads took, once done */
	double last_plain;
};

static double seconds_since(const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: dlcache warmup MOUNT [LIST|-|DIR] [--top N] [--threads N] [--timeout SECONDS]\n"
		"  Announces files to the dlcache mount holding MOUNT, reads them through it so\n"
		"  that the cache admits what its policy keeps, and reports what it admitted.\n"
		"  LIST   a file of paths (relative to the mount root, or absolute), one per line;\n"
		"  -      the same list on standard input;\n"
		"  DIR    a directory of the mount, walked recursively (default: MOUNT itself);\n"
		"  --top N         only the N files with the highest scores (.scores); with\n"
		"                  MOUNT the mount root, the N highest-scored files of all;\n"
		"  --threads N     readers (default 4, at most 64);\n"
		"  --timeout SECONDS  give up after this long (default: no limit).\n"
		"  Exit status 0 when at least one file is cached; see dlcache(1).\n");
}

/* ------------------------------------------------------------------------
 * The mount.
 */

static bool has_virtual_files(const char *dir)
{
	char path[PATH_MAX + 16];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, DLC_FS_CONTROL_NAME);
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return false;
	snprintf(path, sizeof(path), "%s/%s", dir, DLC_FS_STATS_NAME);
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The root of the mount holding arg: 0, -ENOENT (no such directory) or
 * -ENODEV (not inside a dlcache mount). */
static int find_root(struct warmup *w)
{
	char path[PATH_MAX];

	if (!realpath(w->mount_arg, path))
		return -errno;
	for (;;) {
		char *slash;

		if (has_virtual_files(path)) {
			snprintf(w->root, sizeof(w->root), "%s", path);
			return 0;
		}
		slash = strrchr(path, '/');
		if (!slash || path[1] == '\0')
			return -ENODEV;
		if (slash == path)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
}

/* The whole of ROOT/name in *text (NUL-terminated); 0 or -errno. */
static int read_virtual(const struct warmup *w, const char *name, char **text)
{
	char path[PATH_MAX + 16];
	size_t len = 0;
	FILE *f;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", w->root, name);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	*text = NULL;
	n = getdelim(text, &len, '\0', f);
	fclose(f);
	if (n < 0) {
		free(*text);
		*text = strdup("");
		return *text ? 0 : -ENOMEM;
	}
	return 0;
}

/* The number of key in .stats's text: the top-level member, or the member of
 * the object section ("cache") when section is given; 0 when absent. */
static uint64_t stats_number(const char *text, const char *section, const char *key)
{
	char pattern[96];
	const char *at = text;

	if (!text)
		return 0;
	if (section) {
		snprintf(pattern, sizeof(pattern), "\"%s\":", section);
		at = strstr(text, pattern);
		if (!at)
			return 0;
	}
	snprintf(pattern, sizeof(pattern), "\"%s\":", key);
	at = strstr(at, pattern);
	if (!at)
		return 0;
	at += strlen(pattern);
	while (*at == ' ')
		at++;
	if (strncmp(at, "false", 5) == 0)
		return 0;
	if (strncmp(at, "true", 4) == 0)
		return 1;
	return strtoull(at, NULL, 10);
}

/* ------------------------------------------------------------------------
 * The selection.
 */

static int add_file(struct warmup *w, const char *path)
{
	if (w->count == w->capacity) {
		size_t grown = w->capacity ? w->capacity * 2 : 1024;
		struct warm_file *bigger = realloc(w->files, grown * sizeof(*bigger));

		if (!bigger)
			return -ENOMEM;
		w->files = bigger;
		w->capacity = grown;
	}
	w->files[w->count] = (struct warm_file){ .path = strdup(path), .score = NAN };
	if (!w->files[w->count].path)
		return -ENOMEM;
	w->count++;
	return 0;
}

static void skip(struct warmup *w, const char *path)
{
	if (w->skipped++ == 0)
		w->first_skipped = strdup(path);
}

/* One line of a list: a path relative to the mount root, or an absolute path
 * inside the mount.  Blank lines are ignored; anything else is added and
 * checked later against the dataset. */
static int add_listed(struct warmup *w, char *line)
{
	size_t n = strlen(line), rootlen = strlen(w->root);

	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	if (n == 0)
		return 0;
	if (line[0] == '/') {
		if (strncmp(line, w->root, rootlen) != 0 ||
		    (line[rootlen] != '/' && !(rootlen == 1 && line[0] == '/'))) {
			skip(w, line);
			return 0;
		}
		line += rootlen == 1 ? 1 : rootlen + 1;
	}
	while (line[0] == '.' && line[1] == '/')
		line += 2;
	return add_file(w, line);
}

static int read_list(struct warmup *w, FILE *in)
{
	char *line = NULL;
	size_t len = 0;
	int rc = 0;

	while (rc == 0 && getline(&line, &len, in) >= 0)
		rc = add_listed(w, line);
	free(line);
	return rc;
}

/* nftw has no argument for its callback: the walk in progress. */
static struct warmup *walking;
static size_t walk_skip;                /* strlen of the root and its slash */

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	if (type != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	return add_file(walking, path + walk_skip) < 0 ? 1 : 0;
}

static int path_compare(const void *a, const void *b)
{
	return strcmp(((const struct warm_file *)a)->path, ((const struct warm_file *)b)->path);
}

/* Every regular file under dir (inside the mount), sorted by path. */
static int walk_dir(struct warmup *w, const char *dir)
{
	char real[PATH_MAX];
	size_t first = w->count, rootlen = strlen(w->root);

	if (!realpath(dir, real))
		return -errno;
	if (strncmp(real, w->root, rootlen) != 0 || (real[rootlen] != '/' && real[rootlen] != '\0'))
		return -EXDEV;
	walking = w;
	walk_skip = rootlen == 1 ? 1 : rootlen + 1;
	if (nftw(real, walk_one, 16, FTW_PHYS) != 0)
		return errno ? -errno : -ENOMEM;
	qsort(w->files + first, w->count - first, sizeof(*w->files), path_compare);
	return 0;
}

static int index_compare(const void *a, const void *b)
{
	const struct path_index *x = a, *y = b;
	int c = strcmp(x->path, y->path);

	return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* The selection's paths sorted, for lookups by path; NULL: out of memory. */
static struct path_index *index_paths(const struct warmup *w)
{
	struct path_index *sorted = malloc((w->count + 1) * sizeof(*sorted));

	if (!sorted)
		return NULL;
	for (size_t i = 0; i < w->count; i++)
		sorted[i] = (struct path_index){ w->files[i].path, i };
	qsort(sorted, w->count, sizeof(*sorted), index_compare);
	return sorted;
}

static int path_only_compare(const void *a, const void *b)
{
	return strcmp(((const struct path_index *)a)->path, ((const struct path_index *)b)->path);
}

/* Every "SCORE PATH" line of .scores gives its file of the selection its
 * score; with add_all, files not selected yet are added with theirs. */
static int read_scores(struct warmup *w, bool add_all)
{
	char *text, *line, *save = NULL;
	struct path_index *sorted;
	size_t selected = w->count;
	int rc = read_virtual(w, DLC_FS_SCORES_NAME, &text);

	if (rc < 0)
		return rc;
	sorted = index_paths(w);
	if (!sorted) {
		free(text);
		return -ENOMEM;
	}
	for (line = strtok_r(text, "\n", &save); line && rc == 0; line = strtok_r(NULL, "\n", &save)) {
		char *end;
		double score = strtod(line, &end);
		struct path_index key, *hit;

		if (end == line || *end != ' ')
			continue;
		key.path = end + 1;
		hit = bsearch(&key, sorted, selected, sizeof(*sorted), path_only_compare);
		if (hit)
			w->files[hit->index].score = score;
		else if (add_all && (rc = add_file(w, key.path)) == 0)
			w->files[w->count - 1].score = score;
	}
	free(sorted);
	free(text);
	return rc;
}

static int score_compare(const void *a, const void *b)
{
	const struct warm_file *x = a, *y = b;
	bool xs = !isnan(x->score), ys = !isnan(y->score);

	if (xs != ys)
		return xs ? -1 : 1;
	if (xs && x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return strcmp(x->path, y->path);
}

static void drop_file(struct warm_file *f)
{
	free(f->path);
	f->path = NULL;
}

/* Drops repeated paths (keeping the first) and paths that are not regular
 * files of the dataset; sizes the rest. */
static int check_files(struct warmup *w)
{
	struct path_index *sorted = index_paths(w);
	size_t kept = 0;

	if (!sorted)
		return -ENOMEM;
	/* Equal paths sort together, the earliest in reading order first. */
	for (size_t i = 1; i < w->count; i++)
		if (strcmp(sorted[i].path, sorted[i - 1].path) == 0)
			w->files[sorted[i].index].repeated = true;
	free(sorted);
	for (size_t i = 0; i < w->count; i++) {
		struct warm_file *f = &w->files[i];
		struct stat st;

		if (f->repeated) {
			drop_file(f);
			continue;
		}
		if (f->path[0] == '\0' || fstatat(w->root_fd, f->path, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode)) {
			skip(w, f->path);
			drop_file(f);
			continue;
		}
		f->size = (uint64_t)st.st_size;
		w->total_bytes += f->size;
		w->files[kept++] = *f;
	}
	w->count = kept;
	return 0;
}

/* ------------------------------------------------------------------------
 * .cached, before and after.
 */

static int cached_compare(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Marks each file listed in .cached (before or after); the count marked. */
static int mark_cached(struct warmup *w, bool after, size_t *marked)
{
	char *text, *line, *save = NULL;
	char **lines = NULL;
	size_t n = 0, cap = 0;
	int rc = read_virtual(w, DLC_FS_CACHED_NAME, &text);

	if (rc < 0)
		return rc;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (n == cap) {
			char **bigger = realloc(lines, (cap = cap ? cap * 2 : 4096) * sizeof(*lines));

			if (!bigger) {
				free(lines);
				free(text);
				return -ENOMEM;
			}
			lines = bigger;
		}
		lines[n++] = line;
	}
	if (n)
		qsort(lines, n, sizeof(*lines), cached_compare);
	*marked = 0;
	for (size_t i = 0; i < w->count; i++) {
		struct warm_file *f = &w->files[i];
		bool in = n && bsearch(&f->path, lines, n, sizeof(*lines), cached_compare);

		if (after)
			f->cached_after = in;
		else
			f->cached_before = in;
		*marked += in;
	}
	free(lines);
	free(text);
	return 0;
}

/* ------------------------------------------------------------------------
 * Announcing and reading.
 */

/* Writes "prefetch PATH" per file to .control, in whole lines of at most
 * CONTROL_WRITE bytes a write.  0 or -errno; *refused counts the writes the
 * daemon refused (EINVAL: a line it would not take; the others apply). */
static int announce(struct warmup *w, size_t *refused)
{
	char path[PATH_MAX + 16];
	char *buf = malloc(CONTROL_WRITE + 1);
	size_t used = 0;
	int fd, rc = 0;

	*refused = 0;
	if (!buf)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/%s", w->root, DLC_FS_CONTROL_NAME);
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0) {
		free(buf);
		return -errno;
	}
	for (size_t i = 0; i <= w->count && rc == 0; i++) {
		size_t n = i < w->count ? strlen(w->files[i].path) + sizeof("prefetch \n") - 1 : 0;

		if (used && (i == w->count || used + n > CONTROL_WRITE)) {
			ssize_t wrote = write(fd, buf, used);

			if (wrote < 0 && errno == EINVAL)
				(*refused)++;
			else if (wrote < 0)
				rc = -errno;
			used = 0;
		}
		if (i < w->count && n <= CONTROL_WRITE)
			used += (size_t)snprintf(buf + used, CONTROL_WRITE + 1 - used, "prefetch %s\n",
						 w->files[i].path);
	}
	if (close(fd) != 0 && rc == 0 && errno != EINVAL)
		rc = -errno;
	free(buf);
	return rc;
}

static void *reader(void *arg)
{
	struct warmup *w = arg;
	char *buf = malloc(READ_BUFFER);

	while (buf && !atomic_load(&w->stop)) {
		size_t i = atomic_fetch_add(&w->next, 1);
		struct warm_file *f;
		ssize_t n;
		int fd;

		if (i >= w->count)
			break;
		f = &w->files[i];
		fd = openat(w->root_fd, f->path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			f->error = errno;
		} else {
			while ((n = read(fd, buf, READ_BUFFER)) > 0 && !atomic_load(&w->stop))
				atomic_fetch_add(&w->bytes_done, (uint64_t)n);
			if (n < 0)
				f->error = errno;
			close(fd);
		}
		f->read = !atomic_load(&w->stop);
		atomic_fetch_add(&w->files_done, 1);
	}
	free(buf);
	atomic_fetch_sub(&w->running, 1);
	return NULL;
}

/* ------------------------------------------------------------------------
 * Progress and the report.
 */

static void progress_line(struct warmup *w, const char *phase, size_t cached, bool force)
{
	double elapsed = seconds_since(&w->reads_start);
	size_t done = atomic_load(&w->files_done);
	uint64_t bytes = atomic_load(&w->bytes_done);
	double rate = elapsed > 0 ? (double)bytes / elapsed : 0;
	char eta[32] = "";
	char line[256];

	if (w->tty) {
		if (!dlc_progress_due(&w->last_tty, force))
			return;
	} else {
		/* Plain lines for logs: one every few seconds, none forced (the
		 * report follows). */
		if (force || elapsed - w->last_plain < PLAIN_PROGRESS_SECONDS)
			return;
		w->last_plain = elapsed;
	}
	if (phase)
		snprintf(line, sizeof(line), "warmup: %zu/%zu files read, %.1f MiB, waiting for "
			 "the cache: %zu cached", done, w->count, (double)bytes / MIB, cached);
	else {
		if (rate > 0 && bytes > 0 && w->total_bytes > bytes)
			snprintf(eta, sizeof(eta), ", ETA %.0f s",
				 ceil((double)(w->total_bytes - bytes) / rate));
		snprintf(line, sizeof(line), "warmup: %zu/%zu files, %.1f/%.1f MiB, %.1f MiB/s%s",
			 done, w->count, (double)bytes / MIB, (double)w->total_bytes / MIB,
			 rate / MIB, eta);
	}
	if (w->tty)
		fprintf(stderr, "\r%s\033[K", line);
	else
		fprintf(stderr, "%s\n", line);
}

/* Why the refused files are not cached, from the .stats before and after. */
static void refusal_reason(char *out, size_t size, const char *before, const char *after)
{
	uint64_t bypasses = stats_number(after, NULL, "bypasses") - stats_number(before, NULL, "bypasses");
	uint64_t used = stats_number(after, "cache", "bytes");
	uint64_t capacity = stats_number(after, "cache", "capacity");
	int n;

	if (!after) {
		snprintf(out, size, "the policy refused them (%s could not be read)", DLC_FS_STATS_NAME);
		return;
	}
	if (!stats_number(after, "cache", "admission")) {
		snprintf(out, size, "the cache's disk is full, so the cache admits nothing (cache.admission "
			 "is false in .stats); free room on cache_dir's disk");
		return;
	}
	n = snprintf(out, size, "the cache (%.1f of %.1f MiB used) is full and its policy evicted nothing for them",
		     (double)used / MIB, (double)capacity / MIB);
	if (bypasses && n >= 0 && (size_t)n < size)
		snprintf(out + n, size - (size_t)n, " (%" PRIu64 " misses bypassed it)", bypasses);
}

static int report(struct warmup *w, const char *stats_before, bool timed_out)
{
	size_t admitted = 0, before = 0, refused = 0, failed = 0, unread = 0, nread = 0;
	uint64_t admitted_bytes = 0, before_bytes = 0, refused_bytes = 0;
	double elapsed = w->read_seconds ? w->read_seconds : seconds_since(&w->reads_start);
	uint64_t bytes = atomic_load(&w->bytes_done);
	const struct warm_file *first_failed = NULL;
	char *stats_after = NULL;
	char reason[512] = "";

	for (size_t i = 0; i < w->count; i++) {
		const struct warm_file *f = &w->files[i];

		nread += f->read;
		if (f->cached_before) {
			before++;
			before_bytes += f->size;
		} else if (!f->read) {
			unread++;
		} else if (f->error > 0) {
			failed++;
			if (!first_failed)
				first_failed = f;
		} else if (f->cached_after) {
			admitted++;
			admitted_bytes += f->size;
		} else {
			refused++;
			refused_bytes += f->size;
		}
	}
	if (w->tty)
		fputc('\n', stderr);
	printf("warmup: %zu files, %.1f MiB read in %.1f s (%.1f MiB/s)\n", nread,
	       (double)bytes / MIB, elapsed, elapsed > 0 ? (double)bytes / MIB / elapsed : 0.0);
	printf("  admitted: %zu files, %.1f MiB\n", admitted, (double)admitted_bytes / MIB);
	if (before)
		printf("  cached before: %zu files, %.1f MiB\n", before, (double)before_bytes / MIB);
	if (refused) {
		read_virtual(w, DLC_FS_STATS_NAME, &stats_after);
		refusal_reason(reason, sizeof(reason), stats_before, stats_after);
		free(stats_after);
		printf("  refused: %zu files, %.1f MiB: %s\n", refused, (double)refused_bytes / MIB, reason);
	}
	if (failed)
		printf("  failed: %zu files could not be read\n", failed);
	if (unread)
		printf("  not read: %zu files (timed out)\n", unread);
	if (w->skipped)
		printf("  skipped: %zu lines naming no regular file of the dataset (first: %s)\n",
		       w->skipped, w->first_skipped ? w->first_skipped : "?");
	fflush(stdout);

	if (timed_out) {
		fprintf(stderr, "dlcache warmup: timed out after %.3g s with %zu of %zu files read and "
			"%zu cached; give a longer --timeout.\n", w->timeout, nread, w->count,
			admitted + before);
		return 1;
	}
	if (failed) {
		fprintf(stderr, "dlcache warmup: %zu files could not be read through the mount (first: %s: "
			"%s); see the daemon's log.\n", failed, first_failed->path,
			strerror(first_failed->error));
		return 1;
	}
	if (admitted + before == 0) {
		fprintf(stderr, "dlcache warmup: nothing was admitted: the cache refused all %zu files "
			"(%s); give the mount a larger cache_size or score these files higher.\n",
			refused, reason);
		return 1;
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * The command.
 */

static int parse_args(struct warmup *w, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "top", required_argument, NULL, 'n' },
		{ "threads", required_argument, NULL, 't' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	w->threads = 4;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:t:T:h", longopts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'n':
			errno = 0;
			w->top = strtol(optarg, &end, 10);
			if (errno || *end || w->top < 1) {
				fprintf(stderr, "dlcache warmup: --top needs a number of files of at least 1, not '%s'.\n", optarg);
				return 2;
			}
			break;
		case 't':
			w->threads = (int)strtol(optarg, &end, 10);
			if (*end || w->threads < 1 || w->threads > MAX_THREADS) {
				fprintf(stderr, "dlcache warmup: --threads needs a number from 1 to %d, not '%s'.\n",
					MAX_THREADS, optarg);
				return 2;
			}
			break;
		case 'T':
			w->timeout = strtod(optarg, &end);
			if (*end || end == optarg || !(w->timeout > 0)) {
				fprintf(stderr, "dlcache warmup: --timeout needs a number of seconds above 0, not '%s'.\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return -1;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind < 1 || argc - optind > 2) {
		fprintf(stderr, "dlcache warmup: needs a mount and at most one list or directory; usage: "
			"dlcache warmup MOUNT [LIST|-|DIR] [--top N] [--threads N] [--timeout SECONDS].\n");
		return 2;
	}
	w->mount_arg = argv[optind];
	w->source = argc - optind == 2 ? argv[optind + 1] : NULL;
	return 0;
}

/* Fills the selection from the arguments; 0, or 1 after printing why not. */
static int gather(struct warmup *w)
{
	char real[PATH_MAX];
	bool whole_mount = !w->source && realpath(w->mount_arg, real) && strcmp(real, w->root) == 0;
	struct stat st;
	int rc = 0;

	if (w->source && strcmp(w->source, "-") == 0) {
		rc = read_list(w, stdin);
	} else if (w->source && stat(w->source, &st) == 0 && S_ISDIR(st.st_mode)) {
		rc = walk_dir(w, w->source);
		if (rc == -EXDEV) {
			fprintf(stderr, "dlcache warmup: %s is not inside the mount %s; give a directory of "
				"the mount, or a list of its files.\n", w->source, w->root);
			return 1;
		}
	} else if (w->source) {
		FILE *in = fopen(w->source, "re");

		if (!in) {
			fprintf(stderr, "dlcache warmup: cannot read the list %s: %s; give a file of paths, "
				"- for standard input, or a directory of the mount.\n", w->source, strerror(errno));
			return 1;
		}
		rc = read_list(w, in);
		fclose(in);
	} else if (!w->top || !whole_mount) {
		rc = walk_dir(w, w->mount_arg);
	}
	if (rc < 0) {
		fprintf(stderr, "dlcache warmup: cannot gather the files to warm: %s.\n", strerror(-rc));
		return 1;
	}
	if (w->top) {
		rc = read_scores(w, w->top && whole_mount);
		if (rc < 0) {
			fprintf(stderr, "dlcache warmup: --top needs %s/%s: %s; this daemon does not "
				"publish scores (upgrade dlcache).\n", w->root, DLC_FS_SCORES_NAME, strerror(-rc));
			return 1;
		}
		/* The highest scores first; unscored files after every scored one. */
		if (w->count > 1)
			qsort(w->files, w->count, sizeof(*w->files), score_compare);
		while (w->count > (size_t)w->top)
			drop_file(&w->files[--w->count]);
	}
	if (check_files(w) < 0) {
		fprintf(stderr, "dlcache warmup: out of memory for %zu files.\n", w->count);
		return 1;
	}
	if (w->count == 0) {
		if (w->top && whole_mount)
			fprintf(stderr, "dlcache warmup: the mount knows no scores yet (%s/%s is empty), so "
				"--top has nothing to choose from; give a list or a directory instead.\n",
				w->root, DLC_FS_SCORES_NAME);
		else
			fprintf(stderr, "dlcache warmup: %s names no regular file of the dataset%s%s%s; "
				"give paths relative to the mount root %s, one per line.\n",
				w->source ? (strcmp(w->source, "-") ? w->source : "standard input") : w->mount_arg,
				w->first_skipped ? " (first: " : "", w->first_skipped ? w->first_skipped : "",
				w->first_skipped ? ")" : "", w->root);
		return 1;
	}
	return 0;
}

/* Waits for the readers and then for .cached; true when it timed out. */
static bool wait_for_cache(struct warmup *w)
{
	const struct timespec tick = { 0, 100 * 1000 * 1000 };
	size_t cached = 0, last = (size_t)-1;
	double settled_at = 0;

	while (atomic_load(&w->running) > 0) {
		if (w->timeout && seconds_since(&w->start) > w->timeout)
			return true;
		progress_line(w, NULL, 0, false);
		nanosleep(&tick, NULL);
	}
	w->read_seconds = seconds_since(&w->reads_start);
	progress_line(w, NULL, 0, true);
	/* A prefetched file is written to the cache after its open is
	 * answered: wait until every file is listed or the list settles. */
	for (;;) {
		double now = seconds_since(&w->start);

		if (mark_cached(w, true, &cached) < 0)
			return false;
		if (cached == w->count)
			return false;
		if (cached != last) {
			last = cached;
			settled_at = now;
		} else if (now - settled_at >= SETTLE_SECONDS) {
			return false;
		}
		if (w->timeout && now > w->timeout)
			return true;
		progress_line(w, "cache", cached, false);
		nanosleep(&tick, NULL);
	}
}

int dlc_warmup_main(int argc, char **argv)
{
	/* On the heap: after a timeout, readers still blocked in a read use it
	 * until the process exits, after this function has returned. */
	struct warmup *state = calloc(1, sizeof(*state));
	pthread_t threads[MAX_THREADS];
	char *stats_before = NULL;
	size_t refused_writes = 0, marked = 0;
	bool timed_out;
	int rc, started = 0;
	struct warmup *w = state;

	if (!w) {
		fprintf(stderr, "dlcache warmup: out of memory.\n");
		return 1;
	}
	w->root_fd = -1;
	rc = parse_args(w, argc, argv);
	if (rc) {
		rc = rc < 0 ? 0 : rc;
		goto out;
	}
	rc = find_root(w);
	if (rc == -ENODEV) {
		fprintf(stderr, "dlcache warmup: %s is not a dlcache mount (no %s and %s at or above it); "
			"give a directory of a running dlcache mount.\n", w->mount_arg, DLC_FS_CONTROL_NAME,
			DLC_FS_STATS_NAME);
		rc = 1;
		goto out;
	}
	if (rc < 0) {
		fprintf(stderr, "dlcache warmup: cannot open %s: %s; give a directory of a running "
			"dlcache mount.\n", w->mount_arg, strerror(-rc));
		rc = 1;
		goto out;
	}
	w->root_fd = open(w->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->root_fd < 0) {
		fprintf(stderr, "dlcache warmup: cannot open %s: %s.\n", w->root, strerror(errno));
		rc = 1;
		goto out;
	}
	clock_gettime(CLOCK_MONOTONIC, &w->start);
	rc = gather(w);
	if (rc)
		goto out;
	read_virtual(w, DLC_FS_STATS_NAME, &stats_before);
	mark_cached(w, false, &marked);

	rc = announce(w, &refused_writes);
	if (rc < 0) {
		fprintf(stderr, "dlcache warmup: cannot write %s/%s: %s; warm up as the user who mounted "
			"(or the control_uid or control_gid of mount.dlcache(8)).\n", w->root,
			DLC_FS_CONTROL_NAME, strerror(-rc));
		rc = 1;
		goto out;
	}
	if (refused_writes)
		fprintf(stderr, "dlcache warmup: the daemon refused some prefetch lines (%zu writes; "
			"last_error in %s/%s says why); the files are read all the same.\n",
			refused_writes, w->root, DLC_FS_STATS_NAME);

	w->tty = isatty(STDERR_FILENO);
	clock_gettime(CLOCK_MONOTONIC, &w->reads_start);
	atomic_store(&w->running, w->threads);
	for (int i = 0; i < w->threads; i++) {
		if (pthread_create(&threads[i], NULL, reader, w) != 0) {
			atomic_fetch_sub(&w->running, w->threads - i);
			break;
		}
		started++;
	}
	if (!started) {
		fprintf(stderr, "dlcache warmup: cannot start a reader thread.\n");
		rc = 1;
		goto out;
	}
	timed_out = wait_for_cache(w);
	if (timed_out) {
		atomic_store(&w->stop, true);
		mark_cached(w, true, &marked);
	} else {
		for (int i = 0; i < started; i++)
			pthread_join(threads[i], NULL);
	}
	rc = report(w, stats_before, timed_out);
	if (timed_out) {
		free(stats_before);
		return rc;      /* readers may still be blocked in a read: exit ends them */
	}
out:
	for (size_t i = 0; i < w->count; i++)
		free(w->files[i].path);
	free(w->files);
	free(w->first_skipped);
	free(stats_before);
	if (w->root_fd >= 0)
		close(w->root_fd);
	free(w);
	return rc;
}
