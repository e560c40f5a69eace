/*
 * snapshot.c - the dataset's namespace: crawled once through a backend,
 * saved to SQLite, loaded into an immutable in-memory index.
 *
 * Build.  A pool of crawl workers takes directories from a shared stack of
 * jobs, lists each through dlc_backend_list, sorts the listing by name
 * (strcmp) outside the lock, and then, under the lock, appends the children
 * contiguously to one array of crawl nodes and pushes a job for every child
 * directory.  When the crawl is over, nodes are numbered breadth-first from
 * the root (inode 1), which keeps every directory's children contiguous and
 * sorted, and written to FILE.tmp in one transaction; FILE.tmp is fsynced
 * and renamed over FILE, and FILE's directory is fsynced.
 *
 * Load.  One SELECT in inode order fills one array of struct dlc_node
 * (nodes[ino - 1]) and one pool of NUL-terminated names (a symlink's target
 * follows its name's NUL).  Both grow geometrically and are shrunk to size
 * at the end.  Every row is checked as it arrives against the rules lookup
 * relies on, so a snapshot that loads is one that lookup, resolve and path
 * can trust without further checks.
 *
 * INVARIANTS (crawl).  struct crawl's nodes, blocks, jobs, busy, error and
 * cause are guarded by crawl.lock; a worker touches them only while holding
 * it, and everything it prepares outside the lock (the sorted listing, the
 * name block, the child paths) is its own until handed over under the lock.
 * The crawl is over when the job stack is empty and no worker is busy, or
 * when a worker recorded an error; the worker that sees either condition
 * first wakes all the others.
 *
 * INVARIANTS (loaded index).  Inodes are exactly 1..count; the root is 1 and
 * its parent is 1; every other entry's parent is a directory with a smaller
 * inode; the children of each directory are contiguous, start at
 * first_child, and are strictly increasing by strcmp; names are non-empty,
 * contain no '/' and are not "." or "..".  The index is never written after
 * load, so readers need no lock.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "dlcache/cause.h"
#include "dlcache/snapshot.h"

#define SNAPSHOT_FORMAT 1
#define DEFAULT_CRAWL_THREADS 16
#define PROGRESS_INTERVAL_NS 100000000LL   /* at most ~10 progress lines a second */

struct dlc_snapshot {
	struct dlc_node *nodes;      /* nodes[ino - 1] */
	uint32_t count;
	char *pool;                  /* names, each NUL-terminated; symlink targets after their name */
	size_t pool_len;
	char *source;
	uint64_t total_bytes;
	uint64_t id;                 /* xxh3 of nodes and pool: the namespace's identity */
	/* The path index, built on the first resolve (see path_index_build). */
	pthread_mutex_t index_lock;  /* serializes the build */
	_Atomic(uint64_t *) index;   /* slots: hash tag << 32 | ino, 0 = empty */
	uint64_t index_mask;
};

#define HUGE_PAGE (2u << 20)

/*
 * Zeroed memory for a large table probed at random: 2 MiB aligned and
 * advised into transparent huge pages, which spares a TLB miss per probe.
 */
static void *alloc_huge(size_t bytes)
{
	void *p;

	bytes = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
	if (posix_memalign(&p, HUGE_PAGE, bytes) != 0)
		return NULL;
	(void)madvise(p, bytes, MADV_HUGEPAGE);
	memset(p, 0, bytes);
	return p;
}

/* Moves a loaded array of bytes into huge pages; keeps it where it is on failure. */
static void move_to_huge(void *array_ptr, size_t bytes)
{
	void *old, *moved;

	if (bytes < HUGE_PAGE)
		return;
	memcpy(&old, array_ptr, sizeof(old));
	moved = alloc_huge(bytes);
	if (!moved)
		return;
	memcpy(moved, old, bytes);
	free(old);
	memcpy(array_ptr, &moved, sizeof(moved));
}

/*
 * Grows the array that *array_ptr points to (any object pointer; *cap
 * elements of size bytes) to hold at least need elements, doubling.  On
 * failure returns -ENOMEM and leaves the array as it was.  The pointer is
 * read and written with memcpy so that no type-punned access happens.
 */
static int grow_array(void *array_ptr, size_t *cap, size_t need, size_t size)
{
	size_t new_cap = *cap ? *cap : 16;
	void *array, *grown;

	if (need <= *cap)
		return 0;
	while (new_cap < need) {
		if (new_cap > SIZE_MAX / 2 / size)
			return -ENOMEM;
		new_cap *= 2;
	}
	memcpy(&array, array_ptr, sizeof(array));
	grown = realloc(array, new_cap * size);
	if (!grown)
		return -ENOMEM;
	memcpy(array_ptr, &grown, sizeof(grown));
	*cap = new_cap;
	return 0;
}

/* Gives back the unused tail of the array *array_ptr points to. */
static void shrink_array(void *array_ptr, size_t bytes)
{
	void *array, *shrunk;

	memcpy(&array, array_ptr, sizeof(array));
	if (!array || bytes == 0)
		return;
	shrunk = realloc(array, bytes);
	if (shrunk)
		memcpy(array_ptr, &shrunk, sizeof(shrunk));
}

/* ------------------------------------------------------------------------
 * Build: the parallel crawl.
 */

struct crawl_node {
	struct dlc_backend_attr attr;
	const char *name;            /* in one of crawl.blocks */
	const char *target;          /* symlinks: in the same block; else NULL */
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
	const char *name;            /* set once the buffer stops moving */
	const char *target;
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

	rc = grow_array(&listing->buf, &listing->buf_cap, listing->buf_len + len, 1);
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
	rc = grow_array(&listing->entries, &listing->entries_cap, listing->nentries + 1,
			sizeof(*listing->entries));
	if (rc < 0)
		return rc;
	entry = &listing->entries[listing->nentries];
	entry->attr = dirent->attr;
	entry->target_off = SIZE_MAX;
	rc = listing_add_text(listing, name, &entry->name_off);
	if (rc == 0 && kind == S_IFLNK)
		rc = listing_add_text(listing, dirent->link_target, &entry->target_off);
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
		if (*job->path)
			dlc_cause_set(cause, "cannot list '%s' in source '%s': %s", job->path,
				  crawl->backend->source, strerror(-rc));
		else
			dlc_cause_set(cause, "cannot list source '%s': %s",
				  crawl->backend->source, strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < listing->nentries; i++) {
		struct listed_entry *entry = &listing->entries[i];

		entry->name = listing->buf + entry->name_off;
		entry->target = entry->target_off == SIZE_MAX ? NULL
							      : listing->buf + entry->target_off;
	}
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
		rc = grow_array(&listing->children, &listing->children_cap,
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
	struct timespec now;
	long long elapsed;

	if (!crawl->progress)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	elapsed = (long long)(now.tv_sec - crawl->last_progress.tv_sec) * 1000000000LL +
		  (now.tv_nsec - crawl->last_progress.tv_nsec);
	if (!force && elapsed < PROGRESS_INTERVAL_NS)
		return;
	crawl->last_progress = now;
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
	if (grow_array(&crawl->nodes, &crawl->nodes_cap, base + listing->nentries,
		       sizeof(*crawl->nodes)) < 0 ||
	    grow_array(&crawl->blocks, &crawl->blocks_cap, crawl->nblocks + 1,
		       sizeof(*crawl->blocks)) < 0 ||
	    grow_array(&crawl->jobs, &crawl->jobs_cap, crawl->njobs + listing->nchildren,
		       sizeof(*crawl->jobs)) < 0) {
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
 * Build: numbering and the SQLite file.
 */

static const char schema_sql[] =
	"PRAGMA journal_mode=OFF;"
	"PRAGMA synchronous=OFF;"
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value);"
	"CREATE TABLE entries(ino INTEGER PRIMARY KEY, parent INTEGER NOT NULL,"
	" name TEXT NOT NULL, mode INTEGER NOT NULL, uid INTEGER NOT NULL,"
	" gid INTEGER NOT NULL, size INTEGER NOT NULL, mtime_sec INTEGER NOT NULL,"
	" mtime_nsec INTEGER NOT NULL, target TEXT);"
	"BEGIN;";

/* -errno for the failure db just reported; -EIO when it names none. */
static int sqlite_errno(sqlite3 *db)
{
	int err = db ? sqlite3_system_errno(db) : 0;

	return err > 0 ? -err : -EIO;
}

static int write_meta(sqlite3 *db, const char *key, const char *text, int64_t number)
{
	sqlite3_stmt *stmt;
	int rc;

	rc = sqlite3_prepare_v2(db, "INSERT INTO meta(key, value) VALUES(?, ?)", -1, &stmt,
				NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(stmt, 1, key, -1, SQLITE_STATIC);
	if (text)
		sqlite3_bind_text(stmt, 2, text, -1, SQLITE_STATIC);
	else
		sqlite3_bind_int64(stmt, 2, number);
	rc = sqlite3_step(stmt);
	sqlite3_finalize(stmt);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Writes every row of the crawl, in inode order, and the meta table. */
static int write_rows(sqlite3 *db, const struct crawl *crawl, const char *source,
		      const uint32_t *order, const uint32_t *ino_of)
{
	sqlite3_stmt *stmt;
	int rc;

	rc = sqlite3_prepare_v2(db,
				"INSERT INTO entries(ino, parent, name, mode, uid, gid, size,"
				" mtime_sec, mtime_nsec, target) VALUES(?,?,?,?,?,?,?,?,?,?)",
				-1, &stmt, NULL);
	if (rc != SQLITE_OK)
		return rc;
	for (size_t i = 0; i < crawl->nnodes; i++) {
		const struct crawl_node *node = &crawl->nodes[order[i]];
		uint32_t parent = i == 0 ? DLC_SNAPSHOT_ROOT_INO : ino_of[node->parent];

		sqlite3_bind_int64(stmt, 1, (sqlite3_int64)(i + 1));
		sqlite3_bind_int64(stmt, 2, parent);
		sqlite3_bind_text(stmt, 3, i == 0 ? "" : node->name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(stmt, 4, node->attr.mode);
		sqlite3_bind_int64(stmt, 5, node->attr.uid);
		sqlite3_bind_int64(stmt, 6, node->attr.gid);
		sqlite3_bind_int64(stmt, 7, node->attr.size > INT64_MAX ? INT64_MAX
									: (sqlite3_int64)node->attr.size);
		sqlite3_bind_int64(stmt, 8, node->attr.mtime_sec);
		sqlite3_bind_int64(stmt, 9, node->attr.mtime_nsec);
		if (node->target)
			sqlite3_bind_text(stmt, 10, node->target, -1, SQLITE_STATIC);
		else
			sqlite3_bind_null(stmt, 10);
		rc = sqlite3_step(stmt);
		if (rc != SQLITE_DONE)
			goto out;
		sqlite3_reset(stmt);
	}
	rc = write_meta(db, "format", NULL, SNAPSHOT_FORMAT);
	if (rc == SQLITE_OK)
		rc = write_meta(db, "source", source, 0);
	if (rc == SQLITE_OK)
		rc = write_meta(db, "created", NULL, (int64_t)time(NULL));
	if (rc == SQLITE_OK)
		rc = write_meta(db, "entries", NULL, (int64_t)crawl->nnodes);
out:
	sqlite3_finalize(stmt);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int fsync_path(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* fsyncs the directory holding file, so that a rename into it is durable. */
static int fsync_parent(const char *file)
{
	const char *slash = strrchr(file, '/');
	char *dir;
	int rc;

	if (!slash)
		return fsync_path(".", O_RDONLY | O_DIRECTORY);
	dir = strndup(file, slash == file ? 1 : (size_t)(slash - file));
	if (!dir)
		return -ENOMEM;
	rc = fsync_path(dir, O_RDONLY | O_DIRECTORY);
	free(dir);
	return rc;
}

/* Writes the numbered crawl to file through file.tmp. */
static int write_snapshot(const struct crawl *crawl, const char *file, const char *source,
			  const uint32_t *order, const uint32_t *ino_of, char **cause)
{
	sqlite3 *db = NULL;
	char *tmp;
	int rc, src;

	if (asprintf(&tmp, "%s.tmp", file) < 0) {
		dlc_cause_set(cause, "out of memory while writing snapshot '%s'", file);
		return -ENOMEM;
	}
	if (unlink(tmp) < 0 && errno != ENOENT) {
		rc = -errno;
		dlc_cause_set(cause, "cannot replace '%s': %s", tmp, strerror(-rc));
		goto out;
	}
	src = sqlite3_open_v2(tmp, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			      SQLITE_OPEN_NOMUTEX, NULL);
	if (src == SQLITE_OK)
		src = sqlite3_exec(db, schema_sql, NULL, NULL, NULL);
	if (src == SQLITE_OK)
		src = write_rows(db, crawl, source, order, ino_of);
	if (src == SQLITE_OK)
		src = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	if (src != SQLITE_OK) {
		rc = sqlite_errno(db);
		dlc_cause_set(cause, "cannot write snapshot '%s' (%s); check that its directory "
			  "exists and is writable", tmp, db && rc != -EIO ? strerror(-rc) :
			  db ? sqlite3_errmsg(db) : sqlite3_errstr(src));
		goto err_unlink;
	}
	src = sqlite3_close(db);
	db = NULL;
	if (src != SQLITE_OK) {
		rc = -EIO;
		dlc_cause_set(cause, "cannot write snapshot '%s' (%s); check that its directory "
			  "exists and is writable", tmp, sqlite3_errstr(src));
		goto err_unlink;
	}
	rc = fsync_path(tmp, O_RDONLY);
	if (rc == 0 && rename(tmp, file) < 0)
		rc = -errno;
	if (rc < 0) {
		dlc_cause_set(cause, "cannot write snapshot '%s' (%s); check that its directory "
			  "exists and is writable", file, strerror(-rc));
		goto err_unlink;
	}
	rc = fsync_parent(file);
	if (rc == -EINVAL)
		rc = 0;         /* a file system that cannot fsync a directory */
	if (rc < 0)
		dlc_cause_set(cause, "cannot write snapshot '%s' (%s); check that its directory "
			  "exists and is writable", file, strerror(-rc));
	goto out;

err_unlink:
	sqlite3_close(db);
	unlink(tmp);
out:
	free(tmp);
	return rc;
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
	if (!root_path || grow_array(&crawl.nodes, &crawl.nodes_cap, 1, sizeof(*crawl.nodes)) < 0 ||
	    grow_array(&crawl.jobs, &crawl.jobs_cap, 1, sizeof(*crawl.jobs)) < 0) {
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

/* ------------------------------------------------------------------------
 * Load.
 */

struct loader {
	const char *file;
	struct dlc_snapshot *snapshot;
	size_t nodes_cap;
	size_t pool_cap;
	char **cause;
};

static void not_snapshot(char **cause, const char *file, const char *detail)
{
	dlc_cause_set(cause, "%s is not a dlcache snapshot (%s); rebuild it with dlcache "
		  "snapshot or -o refresh", file, detail);
}

static int damaged(struct loader *loader, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int damaged(struct loader *loader, const char *fmt, ...)
{
	char *detail = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&detail, fmt, ap) < 0)
		detail = NULL;
	va_end(ap);
	dlc_cause_set(loader->cause, "snapshot %s is damaged (%s); rebuild it with dlcache "
		  "snapshot or -o refresh", loader->file, detail ? detail : "?");
	free(detail);
	return -EINVAL;
}

/* Appends len bytes of text and a NUL to the pool; *off is where they start. */
static int pool_add(struct loader *loader, const char *text, size_t len, uint32_t *off)
{
	struct dlc_snapshot *snapshot = loader->snapshot;

	if (snapshot->pool_len > UINT32_MAX)
		return damaged(loader, "names take more than 4 GiB");
	if (grow_array(&snapshot->pool, &loader->pool_cap, snapshot->pool_len + len + 1, 1) < 0) {
		dlc_cause_set(loader->cause, "out of memory while loading snapshot %s", loader->file);
		return -ENOMEM;
	}
	memcpy(snapshot->pool + snapshot->pool_len, text, len);
	snapshot->pool[snapshot->pool_len + len] = '\0';
	if (off)
		*off = (uint32_t)snapshot->pool_len;
	snapshot->pool_len += len + 1;
	return 0;
}

/* Reads the meta table: the format must be ours; keeps source and the entry count. */
static int load_meta(struct loader *loader, sqlite3 *db, uint64_t *entries_hint)
{
	sqlite3_stmt *stmt;
	bool format_ok = false;
	char *format = NULL;
	int rc, src;

	src = sqlite3_prepare_v2(db, "SELECT key, value FROM meta", -1, &stmt, NULL);
	if (src != SQLITE_OK) {
		not_snapshot(loader->cause, loader->file,
			     src == SQLITE_NOTADB ? "not an SQLite database" : sqlite3_errmsg(db));
		return -EINVAL;
	}
	while ((src = sqlite3_step(stmt)) == SQLITE_ROW) {
		const char *key = (const char *)sqlite3_column_text(stmt, 0);
		const char *value = (const char *)sqlite3_column_text(stmt, 1);

		if (!key)
			continue;
		if (strcmp(key, "format") == 0) {
			free(format);
			format = strdup(value ? value : "NULL");
			format_ok = sqlite3_column_type(stmt, 1) == SQLITE_INTEGER &&
				    sqlite3_column_int64(stmt, 1) == SNAPSHOT_FORMAT;
		} else if (strcmp(key, "source") == 0 && value && !loader->snapshot->source) {
			loader->snapshot->source = strdup(value);
			if (!loader->snapshot->source)
				src = SQLITE_NOMEM;
		} else if (strcmp(key, "entries") == 0 &&
			   sqlite3_column_type(stmt, 1) == SQLITE_INTEGER &&
			   sqlite3_column_int64(stmt, 1) > 0) {
			*entries_hint = (uint64_t)sqlite3_column_int64(stmt, 1);
		}
		if (src == SQLITE_NOMEM)
			break;
	}
	sqlite3_finalize(stmt);
	if (src != SQLITE_DONE) {
		rc = src == SQLITE_NOMEM ? -ENOMEM : sqlite_errno(db);
		dlc_cause_set(loader->cause, "cannot read snapshot %s: %s", loader->file,
			  src == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(db));
		goto out;
	}
	rc = 0;
	if (!format_ok) {
		char *detail = NULL;

		if (!format || asprintf(&detail, "format %s", format) < 0)
			detail = NULL;
		not_snapshot(loader->cause, loader->file, detail ? detail : "no format");
		free(detail);
		rc = -EINVAL;
	}
out:
	free(format);
	return rc;
}

/* Checks and appends the row stmt is on, which must be inode count + 1. */
static int load_row(struct loader *loader, sqlite3_stmt *stmt)
{
	struct dlc_snapshot *snapshot = loader->snapshot;
	uint64_t ino = (uint64_t)snapshot->count + 1;
	int64_t row_ino = sqlite3_column_int64(stmt, 0);
	int64_t parent = sqlite3_column_int64(stmt, 1);
	const char *name = (const char *)sqlite3_column_text(stmt, 2);
	size_t name_len = (size_t)sqlite3_column_bytes(stmt, 2);
	int64_t mode = sqlite3_column_int64(stmt, 3);
	int64_t uid = sqlite3_column_int64(stmt, 4);
	int64_t gid = sqlite3_column_int64(stmt, 5);
	int64_t size = sqlite3_column_int64(stmt, 6);
	int64_t mtime_nsec = sqlite3_column_int64(stmt, 8);
	uint32_t kind = (uint32_t)mode & S_IFMT;
	struct dlc_node *node;
	int rc;

	if ((uint64_t)row_ino != ino || row_ino < 1)
		return damaged(loader, "inode %" PRId64 " where %" PRIu64 " was due", row_ino, ino);
	if (ino > UINT32_MAX)
		return damaged(loader, "more than %" PRIu32 " entries", UINT32_MAX);
	if (mode < 0 || mode > UINT32_MAX || (kind != S_IFREG && kind != S_IFDIR && kind != S_IFLNK))
		return damaged(loader, "entry %" PRIu64 " has mode %#" PRIo64
			       ", not a directory, file or symlink", ino, (uint64_t)mode);
	if (uid < 0 || uid > UINT32_MAX || gid < 0 || gid > UINT32_MAX || size < 0 ||
	    mtime_nsec < 0 || mtime_nsec > 999999999)
		return damaged(loader, "entry %" PRIu64 " has an owner, size or time out of range",
			       ino);
	if (ino == DLC_SNAPSHOT_ROOT_INO) {
		if (parent != DLC_SNAPSHOT_ROOT_INO || kind != S_IFDIR)
			return damaged(loader, "the root is not a directory that is its own parent");
		name = "";
		name_len = 0;
	} else {
		if (parent < 1 || (uint64_t)parent >= ino)
			return damaged(loader, "entry %" PRIu64 " has parent %" PRId64
				       ", not an earlier entry", ino, parent);
		if (!S_ISDIR(snapshot->nodes[parent - 1].mode))
			return damaged(loader, "the parent of entry %" PRIu64
				       " is not a directory", ino);
		if (!name || name_len == 0 || strlen(name) != name_len ||
		    memchr(name, '/', name_len) || strcmp(name, ".") == 0 ||
		    strcmp(name, "..") == 0)
			return damaged(loader, "entry %" PRIu64 " has an invalid name", ino);
	}

	if (grow_array(&snapshot->nodes, &loader->nodes_cap, ino, sizeof(*snapshot->nodes)) < 0) {
		dlc_cause_set(loader->cause, "out of memory while loading snapshot %s", loader->file);
		return -ENOMEM;
	}
	node = &snapshot->nodes[ino - 1];
	*node = (struct dlc_node){
		.size = (uint64_t)size,
		.mtime_sec = sqlite3_column_int64(stmt, 7),
		.mtime_nsec = (uint32_t)mtime_nsec,
		.mode = (uint32_t)mode,
		.uid = (uint32_t)uid,
		.gid = (uint32_t)gid,
		.parent = (uint32_t)parent,
	};
	rc = pool_add(loader, name, name_len, &node->name_off);
	if (rc < 0)
		return rc;
	if (kind == S_IFLNK) {
		const char *target = (const char *)sqlite3_column_text(stmt, 9);
		size_t target_len = (size_t)sqlite3_column_bytes(stmt, 9);

		if (!target || strlen(target) != target_len)
			return damaged(loader, "symlink %" PRIu64 " has no valid target", ino);
		rc = pool_add(loader, target, target_len, NULL);
		if (rc < 0)
			return rc;
	}
	if (kind == S_IFREG)
		snapshot->total_bytes += (uint64_t)size;

	if (ino != DLC_SNAPSHOT_ROOT_INO) {
		struct dlc_node *dir = &snapshot->nodes[parent - 1];

		if (dir->nchildren == 0) {
			dir->first_child = (uint32_t)ino;
		} else if (dir->first_child + dir->nchildren != ino) {
			return damaged(loader, "the children of entry %" PRId64
				       " are not contiguous", parent);
		} else if (strcmp(snapshot->pool + snapshot->nodes[ino - 2].name_off, name) >= 0) {
			return damaged(loader, "the children of entry %" PRId64
				       " are not sorted by name", parent);
		}
		dir->nchildren++;
	}
	snapshot->count = (uint32_t)ino;
	return 0;
}

static int load_entries(struct loader *loader, sqlite3 *db)
{
	struct dlc_snapshot *snapshot = loader->snapshot;
	sqlite3_stmt *stmt;
	int rc = 0, src;

	src = sqlite3_prepare_v2(db,
				 "SELECT ino, parent, name, mode, uid, gid, size, mtime_sec,"
				 " mtime_nsec, target FROM entries ORDER BY ino",
				 -1, &stmt, NULL);
	if (src != SQLITE_OK) {
		not_snapshot(loader->cause, loader->file, sqlite3_errmsg(db));
		return -EINVAL;
	}
	while ((src = sqlite3_step(stmt)) == SQLITE_ROW) {
		rc = load_row(loader, stmt);
		if (rc < 0)
			goto out;
	}
	if (src != SQLITE_DONE) {
		rc = sqlite_errno(db);
		dlc_cause_set(loader->cause, "cannot read snapshot %s: %s", loader->file,
			  sqlite3_errmsg(db));
		goto out;
	}
	if (snapshot->count == 0)
		rc = damaged(loader, "it has no root entry");
out:
	sqlite3_finalize(stmt);
	return rc;
}

int dlc_snapshot_load(const char *file, struct dlc_snapshot **out, char **cause)
{
	struct dlc_snapshot *snapshot;
	struct loader loader = { .file = file, .cause = cause };
	uint64_t hint = 0;
	sqlite3 *db = NULL;
	struct stat st;
	int rc, src;

	if (cause)
		*cause = NULL;
	*out = NULL;
	if (stat(file, &st) < 0) {
		rc = -errno;
		if (rc == -ENOENT)
			dlc_cause_set(cause, "snapshot %s does not exist; build it with dlcache "
				  "snapshot or -o refresh", file);
		else
			dlc_cause_set(cause, "cannot read snapshot %s: %s", file, strerror(-rc));
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		not_snapshot(cause, file, "not a regular file");
		return -EINVAL;
	}
	snapshot = calloc(1, sizeof(*snapshot));
	if (snapshot)
		pthread_mutex_init(&snapshot->index_lock, NULL);
	if (!snapshot) {
		dlc_cause_set(cause, "out of memory while loading snapshot %s", file);
		return -ENOMEM;
	}
	loader.snapshot = snapshot;

	src = sqlite3_open_v2(file, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
	if (src != SQLITE_OK) {
		rc = sqlite_errno(db);
		dlc_cause_set(cause, "cannot open snapshot %s: %s", file,
			  db ? sqlite3_errmsg(db) : sqlite3_errstr(src));
		goto err;
	}
	rc = load_meta(&loader, db, &hint);
	if (rc < 0)
		goto err;
	/* Presize from the recorded count, but never beyond what the file can
	 * hold (a row takes well over 8 bytes), so a lie costs no huge malloc. */
	if (hint > (uint64_t)st.st_size / 8 + 1)
		hint = (uint64_t)st.st_size / 8 + 1;
	if (hint > UINT32_MAX)
		hint = UINT32_MAX;
	if (hint && (grow_array(&snapshot->nodes, &loader.nodes_cap, hint,
				sizeof(*snapshot->nodes)) < 0 ||
		     grow_array(&snapshot->pool, &loader.pool_cap, hint * 24, 1) < 0)) {
		rc = -ENOMEM;
		dlc_cause_set(cause, "out of memory while loading snapshot %s", file);
		goto err;
	}
	rc = load_entries(&loader, db);
	if (rc < 0)
		goto err;
	sqlite3_close(db);
	db = NULL;

	if (!snapshot->source) {
		snapshot->source = strdup("");
		if (!snapshot->source) {
			rc = -ENOMEM;
			dlc_cause_set(cause, "out of memory while loading snapshot %s", file);
			goto err;
		}
	}
	shrink_array(&snapshot->nodes, snapshot->count * sizeof(*snapshot->nodes));
	shrink_array(&snapshot->pool, snapshot->pool_len);
	/* Lookups and resolves touch both at random. */
	move_to_huge(&snapshot->nodes, snapshot->count * sizeof(*snapshot->nodes));
	move_to_huge(&snapshot->pool, snapshot->pool_len);
	snapshot->id = XXH3_64bits(snapshot->nodes, snapshot->count * sizeof(*snapshot->nodes)) ^
		       XXH3_64bits(snapshot->pool, snapshot->pool_len);
	*out = snapshot;
	return 0;

err:
	sqlite3_close(db);
	dlc_snapshot_free(snapshot);
	return rc;
}

void dlc_snapshot_free(struct dlc_snapshot *snapshot)
{
	if (!snapshot)
		return;
	free(snapshot->nodes);
	free(snapshot->pool);
	free(snapshot->source);
	free(atomic_load(&snapshot->index));
	pthread_mutex_destroy(&snapshot->index_lock);
	free(snapshot);
}

/* ------------------------------------------------------------------------
 * Queries on a loaded snapshot.
 */

uint32_t dlc_snapshot_count(const struct dlc_snapshot *snapshot)
{
	return snapshot->count;
}

const struct dlc_node *dlc_snapshot_node(const struct dlc_snapshot *snapshot, uint64_t ino)
{
	if (ino < 1 || ino > snapshot->count)
		return NULL;
	return &snapshot->nodes[ino - 1];
}

const char *dlc_snapshot_name(const struct dlc_snapshot *snapshot, uint64_t ino)
{
	const struct dlc_node *node = dlc_snapshot_node(snapshot, ino);

	return node ? snapshot->pool + node->name_off : NULL;
}

const char *dlc_snapshot_link_target(const struct dlc_snapshot *snapshot, uint64_t ino)
{
	const struct dlc_node *node = dlc_snapshot_node(snapshot, ino);
	const char *name;

	if (!node || !S_ISLNK(node->mode))
		return NULL;
	name = snapshot->pool + node->name_off;
	return name + strlen(name) + 1;
}

/* strcmp(component, candidate) for a component of len bytes, not NUL-terminated. */
static int compare_component(const char *component, size_t len, const char *candidate)
{
	int c = strncmp(component, candidate, len);

	if (c != 0)
		return c;
	return candidate[len] == '\0' ? 0 : -1;
}

static uint64_t lookup_component(const struct dlc_snapshot *snapshot, uint64_t parent,
				 const char *name, size_t len)
{
	const struct dlc_node *dir = dlc_snapshot_node(snapshot, parent);
	uint64_t low, high;

	if (!dir || !S_ISDIR(dir->mode) || len == 0)
		return 0;
	low = dir->first_child;
	high = low + dir->nchildren;    /* search [low, high) */
	while (low < high) {
		uint64_t mid = low + (high - low) / 2;
		int c = compare_component(name, len,
					  snapshot->pool + snapshot->nodes[mid - 1].name_off);

		if (c == 0)
			return mid;
		if (c < 0)
			high = mid;
		else
			low = mid + 1;
	}
	return 0;
}

uint64_t dlc_snapshot_lookup(const struct dlc_snapshot *snapshot, uint64_t parent,
			     const char *name)
{
	return lookup_component(snapshot, parent, name, strlen(name));
}

/*
 * The path index.  Resolving a path component by component costs a binary
 * search per component, and in a large directory every step of it is a cache
 * miss: 1.28 M rank lines in random order spent 88% of their time there.  So
 * the first resolve builds a hash table of every entry's whole path: the
 * hash of a path is chained over its components (the root's is PATH_SEED,
 * a child's is XXH3 of its name seeded with its parent's), so building it is
 * one pass in inode order and looking up a path never copies it.  A slot
 * holds the top 32 bits of the hash and the inode; a lookup that matches the
 * tag checks the names up the parent chain, so a hash collision costs a
 * probe, never a wrong answer.  Open addressing, linear probing, at most 2/3
 * full: 8 to 12 bytes per entry, built in about 0.2 s for 1.28 M entries.
 */
#define PATH_SEED 0x9e3779b97f4a7c15ULL
static uint64_t chain_hash(uint64_t parent_hash, const char *name, size_t len)
{
	return XXH3_64bits_withSeed(name, len, parent_hash);
}

static uint64_t *path_index_build(struct dlc_snapshot *snapshot)
{
	uint64_t *hashes, *table, size = 4;
	uint64_t *built;

	pthread_mutex_lock(&snapshot->index_lock);
	built = atomic_load(&snapshot->index);
	if (built)
		goto out;
	while (size < (uint64_t)snapshot->count * 3 / 2)
		size *= 2;
	hashes = malloc(((size_t)snapshot->count + 1) * sizeof(*hashes));
	table = alloc_huge(size * sizeof(*table));
	if (!hashes || !table) {
		free(hashes);
		free(table);
		goto out;       /* resolve falls back to the binary searches */
	}
	hashes[DLC_SNAPSHOT_ROOT_INO] = PATH_SEED;
	for (uint64_t ino = DLC_SNAPSHOT_ROOT_INO + 1; ino <= snapshot->count; ino++) {
		const struct dlc_node *node = &snapshot->nodes[ino - 1];
		const char *name = snapshot->pool + node->name_off;
		uint64_t h = chain_hash(hashes[node->parent], name, strlen(name));
		uint64_t slot = h & (size - 1);

		hashes[ino] = h;
		while (table[slot])
			slot = (slot + 1) & (size - 1);
		table[slot] = (h & 0xffffffff00000000ULL) | ino;
	}
	free(hashes);
	snapshot->index_mask = size - 1;
	atomic_store(&snapshot->index, table);
	built = table;
out:
	pthread_mutex_unlock(&snapshot->index_lock);
	return built;
}

/* Whether ino's path is exactly the n components in starts/lens. */
static bool path_matches(const struct dlc_snapshot *snapshot, uint64_t ino,
			 const char *const *starts, const size_t *lens, size_t n)
{
	while (n > 0) {
		const struct dlc_node *node;
		const char *name;

		if (ino == DLC_SNAPSHOT_ROOT_INO)
			return false;
		node = &snapshot->nodes[ino - 1];
		name = snapshot->pool + node->name_off;
		n--;
		if (strncmp(name, starts[n], lens[n]) != 0 || name[lens[n]] != '\0')
			return false;
		ino = node->parent;
	}
	return ino == DLC_SNAPSHOT_ROOT_INO;
}

#define MAX_COMPONENTS 256

uint64_t dlc_snapshot_resolve(const struct dlc_snapshot *snapshot, const char *path)
{
	struct dlc_snapshot *mutable = (struct dlc_snapshot *)snapshot;
	const char *starts[MAX_COMPONENTS];
	size_t lens[MAX_COMPONENTS];
	uint64_t *table = atomic_load(&mutable->index);
	uint64_t h = PATH_SEED, ino = DLC_SNAPSHOT_ROOT_INO;
	size_t n = 0;

	if (!table)
		table = path_index_build(mutable);
	for (;;) {
		const char *end;
		size_t len;

		while (*path == '/')
			path++;
		if (!*path)
			break;
		end = strchrnul(path, '/');
		len = (size_t)(end - path);
		if (path[0] == '.' && (len == 1 || (len == 2 && path[1] == '.')))
			return 0;
		if (table && n < MAX_COMPONENTS) {
			starts[n] = path;
			lens[n++] = len;
			h = chain_hash(h, path, len);
		} else {
			/* No index (no memory for it) or a very deep path: search. */
			table = NULL;
			for (size_t i = 0; i < n; i++)
				ino = lookup_component(snapshot, ino, starts[i], lens[i]);
			n = 0;
			ino = ino ? lookup_component(snapshot, ino, path, len) : 0;
			if (!ino)
				return 0;
		}
		path = end;
	}
	if (!table || n == 0)
		return ino;
	for (uint64_t slot = h & snapshot->index_mask; table[slot];
	     slot = (slot + 1) & snapshot->index_mask) {
		uint64_t candidate = table[slot] & 0xffffffffULL;

		if ((table[slot] & 0xffffffff00000000ULL) == (h & 0xffffffff00000000ULL) &&
		    path_matches(snapshot, candidate, starts, lens, n))
			return candidate;
	}
	return 0;
}

int dlc_snapshot_path(const struct dlc_snapshot *snapshot, uint64_t ino, char *buf,
		      size_t len)
{
	size_t pos;
	bool leaf = true;

	if (ino < 1 || ino > snapshot->count)
		return -ENOENT;
	if (len == 0)
		return -ENAMETOOLONG;
	/* Written from the end of buf backwards, then moved to its start. */
	pos = len - 1;
	buf[pos] = '\0';
	while (ino != DLC_SNAPSHOT_ROOT_INO) {
		const struct dlc_node *node = &snapshot->nodes[ino - 1];
		const char *name = snapshot->pool + node->name_off;
		size_t name_len = strlen(name);

		if (name_len + (leaf ? 0 : 1) > pos) {
			buf[0] = '\0';
			return -ENAMETOOLONG;
		}
		if (!leaf)
			buf[--pos] = '/';
		pos -= name_len;
		memcpy(buf + pos, name, name_len);
		leaf = false;
		ino = node->parent;
	}
	memmove(buf, buf + pos, len - pos);
	return 0;
}

const char *dlc_snapshot_source(const struct dlc_snapshot *snapshot)
{
	return snapshot->source;
}

uint64_t dlc_snapshot_id(const struct dlc_snapshot *snapshot)
{
	return snapshot->id;
}

uint64_t dlc_snapshot_total_bytes(const struct dlc_snapshot *snapshot)
{
	return snapshot->total_bytes;
}

size_t dlc_snapshot_memory(const struct dlc_snapshot *snapshot)
{
	size_t index = atomic_load(&((struct dlc_snapshot *)snapshot)->index) ?
		       (snapshot->index_mask + 1) * sizeof(uint64_t) : 0;

	return sizeof(*snapshot) + (size_t)snapshot->count * sizeof(*snapshot->nodes) +
	       snapshot->pool_len + strlen(snapshot->source) + 1 + index;
}
