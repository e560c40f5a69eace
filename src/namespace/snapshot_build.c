/*
 * snapshot_build.c - dlc_snapshot_build: crawls a source through a backend,
 * in parallel, and writes the snapshot's SQLite file, which snapshot.c loads.
 *
 * Build.  A pool of crawl workers takes directories from a shared stack of
 * jobs, lists each through dlc_backend_list, sorts the listing by name
 * (strcmp) outside the lock, and then, under the lock, appends the children
 * contiguously to one array of crawl nodes and pushes a job for every child
 * directory.  When the crawl is over, nodes are numbered breadth-first from
 * the root (inode 1), which keeps every directory's children contiguous and
 * sorted, and written through the snapshot writer (snapshot_write.c), which
 * puts FILE in place only when it is whole.
 *
 * INVARIANTS (crawl).  struct crawl's nodes, blocks, jobs, busy, error and
 * cause are guarded by crawl.lock; a worker touches them only while holding
 * it, and everything it prepares outside the lock (the sorted listing, the
 * name block, the child paths) is its own until handed over under the lock.
 * The crawl is over when the job stack is empty and no worker is busy, or
 * when a worker recorded an error; the worker that sees either condition
 * first wakes all the others.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "dlcache/cause.h"
#include "dlcache/log.h"
#include "dlcache/snapshot.h"
#include "snapshot_private.h"

#define DEFAULT_CRAWL_THREADS 16

/* ------------------------------------------------------------------------
 * The parallel crawl.
 */

struct crawl_node {
	struct dlc_backend_attr attr;
	const char *name;            /* in one of crawl.blocks */
	const char *target;          /* symlinks: in the same block; else NULL */
	const char *version;         /* the source's version (S3 ETag): same block; or NULL */
	uint32_t parent;             /* crawl index */
	uint32_t first_child;        /* crawl index of the first child */
	uint32_t nchildren;
};

struct crawl_job {
	uint32_t dir;                /* crawl index of the directory to list */
	char *path;                  /* its path relative to the source root */
};

struct crawl {
	struct dlc_backend *backend;
	bool progress;
	pthread_mutex_t lock;
	pthread_cond_t wake;         /* jobs pushed, or the crawl is over */
	/* Guarded by lock: */
	struct crawl_node *nodes;
	size_t nnodes, nodes_cap;
	char **blocks;               /* the name blocks the nodes point into */
	size_t nblocks, blocks_cap;
	struct crawl_job *jobs;      /* a stack; order does not matter */
	size_t njobs, jobs_cap;
	uint64_t name_bytes;         /* pool bytes the loaded index will need */
	unsigned busy;               /* workers listing a directory now */
	int error;                   /* first error, or 0 */
	char *cause;                 /* its sentence */
	struct timespec last_progress;
};

/* One directory's listing, gathered by one worker outside the lock. */
struct listed_entry {
	struct dlc_backend_attr attr;
	size_t name_off;             /* in listing.buf while listing, then... */
	size_t target_off;           /* ...SIZE_MAX when not a symlink */
	size_t version_off;          /* ...SIZE_MAX when the source gave none */
	const char *name;            /* set once the buffer stops moving */
	const char *target;
	const char *version;
};

struct child_job {
	size_t entry;                /* index in the sorted listing */
	char *path;
};

struct listing {
	struct listed_entry *entries;
	size_t nentries, entries_cap;
	char *buf;
	size_t buf_len, buf_cap;
	struct child_job *children;
	size_t nchildren, children_cap;
};

static int listing_add_text(struct listing *listing, const char *text, size_t *off)
{
	size_t len = strlen(text) + 1;
	int rc;

	rc = dlc_snapshot_grow_array(&listing->buf, &listing->buf_cap, listing->buf_len + len, 1);
	if (rc < 0)
		return rc;
	memcpy(listing->buf + listing->buf_len, text, len);
	*off = listing->buf_len;
	listing->buf_len += len;
	return 0;
}

static int listing_add(void *arg, const struct dlc_backend_dirent *dirent)
{
	struct listing *listing = arg;
	struct listed_entry *entry;
	const char *name = dirent->name;
	uint32_t kind = dirent->attr.mode & S_IFMT;
	int rc;

	if (!name[0] || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return -EINVAL;
	if (kind != S_IFREG && kind != S_IFDIR && kind != S_IFLNK)
		return 0;
	if (kind == S_IFLNK && !dirent->link_target)
		return -EINVAL;
	rc = dlc_snapshot_grow_array(&listing->entries, &listing->entries_cap,
				     listing->nentries + 1, sizeof(*listing->entries));
	if (rc < 0)
		return rc;
	entry = &listing->entries[listing->nentries];
	entry->attr = dirent->attr;
	entry->target_off = SIZE_MAX;
	entry->version_off = SIZE_MAX;
	rc = listing_add_text(listing, name, &entry->name_off);
	if (rc == 0 && kind == S_IFLNK)
		rc = listing_add_text(listing, dirent->link_target, &entry->target_off);
	if (rc == 0 && kind == S_IFREG && dirent->version)
		rc = listing_add_text(listing, dirent->version, &entry->version_off);
	if (rc < 0)
		return rc;
	listing->nentries++;
	return 0;
}

static int compare_listed(const void *a, const void *b)
{
	const struct listed_entry *x = a, *y = b;

	return strcmp(x->name, y->name);
}

static void listing_reset(struct listing *listing)
{
	free(listing->buf);
	listing->buf = NULL;
	listing->buf_len = listing->buf_cap = 0;
	for (size_t i = 0; i < listing->nchildren; i++)
		free(listing->children[i].path);
	listing->nentries = 0;
	listing->nchildren = 0;
}

static void listing_free(struct listing *listing)
{
	listing_reset(listing);
	free(listing->entries);
	free(listing->children);
}

/* Joins a directory's path and a child's name ("" + "a" is "a"). */
static char *join_path(const char *dir, const char *name)
{
	char *path;

	if (!*dir)
		return strdup(name);
	if (asprintf(&path, "%s/%s", dir, name) < 0)
		return NULL;
	return path;
}

/*
 * Lists job->path into listing, sorted by name, with a path ready for every
 * child directory.  Outside the lock.  0, or -errno with *cause.
 */
static int crawl_list(struct crawl *crawl, const struct crawl_job *job,
		      struct listing *listing, char **cause)
{
	int rc;

	rc = dlc_backend_list(crawl->backend, job->path, listing_add, listing);
	if (rc < 0) {
		const char *why = dlc_cause_thread() ? dlc_cause_thread() : strerror(-rc);

		if (*job->path)
			dlc_cause_set(cause, "cannot list '%s' in source '%s': %s", job->path,
				  crawl->backend->source, why);
		else
			dlc_cause_set(cause, "cannot list source '%s': %s",
				  crawl->backend->source, why);
		return rc;
	}
	size_t kept = 0, dir_len = strlen(job->path);

	for (size_t i = 0; i < listing->nentries; i++) {
		struct listed_entry *entry = &listing->entries[i];

		entry->name = listing->buf + entry->name_off;
		entry->target = entry->target_off == SIZE_MAX ? NULL
							      : listing->buf + entry->target_off;
		entry->version = entry->version_off == SIZE_MAX ? NULL
								: listing->buf + entry->version_off;
		/* Every path of the snapshot fits DLC_SNAPSHOT_PATH_MAX, so the
		 * buffers that hold one never cut it: a longer one is left out
		 * (with what lies below it), not the whole snapshot. */
		if (dir_len + 1 + strlen(entry->name) >= DLC_SNAPSHOT_PATH_MAX) {
			dlc_log(DLC_LOG_WARNING, "a path of %zu bytes, over the %d a snapshot holds, is left out with what lies below it: '%.48s...%s' in source '%s'",
				dir_len + 1 + strlen(entry->name), DLC_SNAPSHOT_PATH_MAX - 1, job->path,
				strlen(entry->name) > 48 ? "" : entry->name, crawl->backend->source);
			continue;
		}
		listing->entries[kept++] = *entry;
	}
	listing->nentries = kept;
	/* An empty directory has no entries array, and qsort may not be given NULL. */
	if (listing->nentries > 1)
		qsort(listing->entries, listing->nentries, sizeof(*listing->entries), compare_listed);
	for (size_t i = 0; i < listing->nentries; i++) {
		struct listed_entry *entry = &listing->entries[i];

		if (i > 0 && strcmp(listing->entries[i - 1].name, entry->name) == 0) {
			dlc_cause_set(cause, "source '%s' lists '%s' twice in '%s'",
				  crawl->backend->source, entry->name, job->path);
			return -EIO;
		}
		if (!S_ISDIR(entry->attr.mode))
			continue;
		rc = dlc_snapshot_grow_array(&listing->children, &listing->children_cap,
					     listing->nchildren + 1, sizeof(*listing->children));
		if (rc < 0)
			goto err_oom;
		listing->children[listing->nchildren].entry = i;
		listing->children[listing->nchildren].path = join_path(job->path, entry->name);
		if (!listing->children[listing->nchildren].path) {
			rc = -ENOMEM;
			goto err_oom;
		}
		listing->nchildren++;
	}
	return 0;

err_oom:
	dlc_cause_set(cause, "out of memory while crawling source '%s'", crawl->backend->source);
	return rc;
}

static void crawl_progress(struct crawl *crawl, bool force)
{
	if (!crawl->progress || !dlc_progress_due(&crawl->last_progress, force))
		return;
	fprintf(stderr, "\rcrawled %zu entries", crawl->nnodes);
}

/*
 * Appends job's sorted listing as the children of job->dir and pushes the
 * child directories.  Under the lock.  On success the listing's name block
 * and child paths belong to the crawl; returns 0, or -errno with *cause (the
 * crawl is then unchanged).
 */
static int crawl_commit(struct crawl *crawl, const struct crawl_job *job,
			struct listing *listing, char **cause)
{
	size_t base = crawl->nnodes;
	uint64_t name_bytes = listing->buf_len;
	char *block;

	if (listing->nentries == 0)
		return 0;
	if (listing->nentries > UINT32_MAX - base ||
	    crawl->name_bytes + name_bytes > UINT32_MAX) {
		dlc_cause_set(cause, "source '%s' has more entries than a snapshot can number",
			  crawl->backend->source);
		return -EOVERFLOW;
	}
	if (dlc_snapshot_grow_array(&crawl->nodes, &crawl->nodes_cap, base + listing->nentries,
				    sizeof(*crawl->nodes)) < 0 ||
	    dlc_snapshot_grow_array(&crawl->blocks, &crawl->blocks_cap, crawl->nblocks + 1,
				    sizeof(*crawl->blocks)) < 0 ||
	    dlc_snapshot_grow_array(&crawl->jobs, &crawl->jobs_cap,
				    crawl->njobs + listing->nchildren, sizeof(*crawl->jobs)) < 0) {
		dlc_cause_set(cause, "out of memory while crawling source '%s'",
			  crawl->backend->source);
		return -ENOMEM;
	}

	block = listing->buf;
	crawl->blocks[crawl->nblocks++] = block;
	crawl->nodes[job->dir].first_child = (uint32_t)base;
	crawl->nodes[job->dir].nchildren = (uint32_t)listing->nentries;
	for (size_t i = 0; i < listing->nentries; i++) {
		const struct listed_entry *entry = &listing->entries[i];

		crawl->nodes[base + i] = (struct crawl_node){
			.attr = entry->attr,
			.name = entry->name,
			.target = entry->target,
			.version = entry->version,
			.parent = job->dir,
		};
	}
	crawl->nnodes += listing->nentries;
	crawl->name_bytes += name_bytes;
	for (size_t i = 0; i < listing->nchildren; i++) {
		crawl->jobs[crawl->njobs++] = (struct crawl_job){
			.dir = (uint32_t)(base + listing->children[i].entry),
			.path = listing->children[i].path,
		};
	}
	/* Handed over: the next listing starts with a fresh buffer. */
	listing->buf = NULL;
	listing->buf_len = listing->buf_cap = 0;
	listing->nchildren = 0;
	crawl_progress(crawl, false);
	return 0;
}

/* Records the crawl's first error; later ones are dropped.  Under the lock. */
static void crawl_fail(struct crawl *crawl, int rc, char *cause)
{
	if (crawl->error) {
		free(cause);
		return;
	}
	crawl->error = rc;
	crawl->cause = cause;
}

static void *crawl_worker(void *arg)
{
	struct crawl *crawl = arg;
	struct listing listing = { 0 };

	pthread_mutex_lock(&crawl->lock);
	for (;;) {
		struct crawl_job job;
		char *cause = NULL;
		int rc;

		while (crawl->njobs == 0 && crawl->busy > 0 && !crawl->error)
			pthread_cond_wait(&crawl->wake, &crawl->lock);
		if (crawl->error || crawl->njobs == 0)
			break;
		job = crawl->jobs[--crawl->njobs];
		crawl->busy++;
		pthread_mutex_unlock(&crawl->lock);

		rc = crawl_list(crawl, &job, &listing, &cause);

		pthread_mutex_lock(&crawl->lock);
		if (rc == 0 && !crawl->error)
			rc = crawl_commit(crawl, &job, &listing, &cause);
		if (rc < 0)
			crawl_fail(crawl, rc, cause);
		else
			free(cause);
		listing_reset(&listing);
		free(job.path);
		crawl->busy--;
		if (crawl->error || (crawl->njobs == 0 && crawl->busy == 0) || crawl->njobs > 1)
			pthread_cond_broadcast(&crawl->wake);
		else if (crawl->njobs == 1)
			pthread_cond_signal(&crawl->wake);
	}
	pthread_mutex_unlock(&crawl->lock);
	listing_free(&listing);
	return NULL;
}

static void crawl_free(struct crawl *crawl)
{
	for (size_t i = 0; i < crawl->njobs; i++)
		free(crawl->jobs[i].path);
	for (size_t i = 0; i < crawl->nblocks; i++)
		free(crawl->blocks[i]);
	free(crawl->jobs);
	free(crawl->blocks);
	free(crawl->nodes);
	free(crawl->cause);
	pthread_cond_destroy(&crawl->wake);
	pthread_mutex_destroy(&crawl->lock);
}

/* Runs the crawl from the root (crawl index 0) with nthreads workers. */
static int crawl_run(struct crawl *crawl, unsigned nthreads, char **cause)
{
	pthread_t *threads;
	unsigned started = 0;
	int rc;

	threads = calloc(nthreads, sizeof(*threads));
	if (!threads) {
		dlc_cause_set(cause, "out of memory while crawling source '%s'",
			  crawl->backend->source);
		return -ENOMEM;
	}
	for (; started < nthreads; started++) {
		if (pthread_create(&threads[started], NULL, crawl_worker, crawl) != 0)
			break;
	}
	if (started == 0)
		crawl_worker(crawl);    /* no thread to be had: crawl in this one */
	for (unsigned i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	free(threads);

	crawl_progress(crawl, true);
	if (crawl->progress)
		fputc('\n', stderr);
	rc = crawl->error;
	if (rc < 0 && cause) {
		*cause = crawl->cause;
		crawl->cause = NULL;
	}
	return rc;
}

/* ------------------------------------------------------------------------
 * Numbering and the SQLite file.
 */

/* Writes the numbered crawl to file through the snapshot writer. */
static int write_snapshot(const struct crawl *crawl, const char *file, const char *source,
			  const uint32_t *order, const uint32_t *ino_of, char **cause)
{
	struct dlc_snapshot_writer *writer;
	int rc;

	rc = dlc_snapshot_writer_open(file, source, false, &writer, cause);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < crawl->nnodes; i++) {
		const struct crawl_node *node = &crawl->nodes[order[i]];
		struct dlc_snapshot_row row = {
			.parent = i == 0 ? DLC_SNAPSHOT_ROOT_INO : ino_of[node->parent],
			.name = i == 0 ? "" : node->name,
			.attr = node->attr,
			.target = node->target,
			.version = i == 0 ? NULL : node->version,
		};

		rc = dlc_snapshot_writer_add(writer, &row, cause);
		if (rc < 0) {
			dlc_snapshot_writer_abort(writer);
			return rc;
		}
	}
	return dlc_snapshot_writer_commit(writer, NULL, cause);
}

/*
 * Numbers the crawl breadth-first: order[ino - 1] is the crawl index of
 * ino, ino_of[crawl index] its inode.  Children of a crawl node are
 * contiguous and sorted already, so each directory's children get
 * consecutive inodes in name order.
 */
static void number_breadth_first(const struct crawl *crawl, uint32_t *order, uint32_t *ino_of)
{
	size_t next = 1;

	order[0] = 0;
	ino_of[0] = DLC_SNAPSHOT_ROOT_INO;
	for (size_t i = 0; i < next; i++) {
		const struct crawl_node *node = &crawl->nodes[order[i]];

		for (uint32_t k = 0; k < node->nchildren; k++) {
			uint32_t child = node->first_child + k;

			ino_of[child] = (uint32_t)(next + 1);
			order[next++] = child;
		}
	}
	assert(next == crawl->nnodes);  /* every node is some directory's child */
}

int dlc_snapshot_build(struct dlc_backend *backend, const char *file,
		       const struct dlc_snapshot_build_options *options,
		       uint64_t *entries, char **cause)
{
	struct crawl crawl = { .backend = backend };
	struct dlc_backend_attr root_attr;
	uint32_t *order = NULL, *ino_of = NULL;
	unsigned nthreads = DEFAULT_CRAWL_THREADS;
	char *root_path;
	int rc;

	if (cause)
		*cause = NULL;
	if (entries)
		*entries = 0;
	if (options && options->threads)
		nthreads = options->threads;
	crawl.progress = options && options->progress;

	rc = dlc_backend_stat(backend, "", &root_attr);
	if (rc < 0) {
		dlc_cause_set(cause, "cannot read source '%s': %s", backend->source, strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(root_attr.mode)) {
		dlc_cause_set(cause, "source '%s' is not a directory; give the dataset's directory",
			  backend->source);
		return -ENOTDIR;
	}

	pthread_mutex_init(&crawl.lock, NULL);
	pthread_cond_init(&crawl.wake, NULL);
	clock_gettime(CLOCK_MONOTONIC, &crawl.last_progress);
	root_path = strdup("");
	if (!root_path ||
	    dlc_snapshot_grow_array(&crawl.nodes, &crawl.nodes_cap, 1, sizeof(*crawl.nodes)) < 0 ||
	    dlc_snapshot_grow_array(&crawl.jobs, &crawl.jobs_cap, 1, sizeof(*crawl.jobs)) < 0) {
		free(root_path);
		rc = -ENOMEM;
		dlc_cause_set(cause, "out of memory while crawling source '%s'", backend->source);
		goto out;
	}
	crawl.nodes[0] = (struct crawl_node){ .attr = root_attr, .name = "" };
	crawl.nnodes = 1;
	crawl.name_bytes = 1;
	crawl.jobs[0] = (struct crawl_job){ .dir = 0, .path = root_path };
	crawl.njobs = 1;

	rc = crawl_run(&crawl, nthreads, cause);
	if (rc < 0)
		goto out;

	order = malloc(crawl.nnodes * sizeof(*order));
	ino_of = malloc(crawl.nnodes * sizeof(*ino_of));
	if (!order || !ino_of) {
		rc = -ENOMEM;
		dlc_cause_set(cause, "out of memory while writing snapshot '%s'", file);
		goto out;
	}
	number_breadth_first(&crawl, order, ino_of);
	rc = write_snapshot(&crawl, file, backend->source, order, ino_of, cause);
	if (rc == 0 && entries)
		*entries = crawl.nnodes;
out:
	free(order);
	free(ino_of);
	crawl_free(&crawl);
	return rc;
}
