/*
 * pack.c - dlcache pack: rewrites a tree of files as tar chunks plus a
 * packed snapshot (see pack.h for what DST holds).
 *
 * How.  The source is crawled into a tree snapshot first (the parallel
 * crawl of snapshot_build.c, into DST/.dlcache-crawl.db, removed at the
 * end), so members are numbered exactly as a mount numbers them.  Then the
 * entries are taken in inode order; each is appended to the current chunk
 * with libarchive (pax restricted: plain ustar headers, a pax header only
 * where ustar cannot say it, such as long or non-ASCII names), and its row,
 * with the chunk, the offset of its data and the xxh3 of its bytes, goes to
 * the snapshot writer.  The data offset is libarchive's count of bytes
 * handed to its output after the header is written (archive_filter_bytes),
 * which counts logical bytes whatever libarchive buffers; the unit tests
 * check it against the bytes of the written chunks.
 *
 * Names reach libarchive in a UTF-8 thread locale, so valid UTF-8 names are
 * written as pax UTF-8 paths and GNU tar extracts them silently; other names
 * are written as raw bytes (pax hdrcharset=BINARY: GNU tar warns about the
 * keyword and extracts the right bytes).
 *
 * Crash and interruption.  Chunks are written as NAME.tar.tmp, fsynced, and
 * renamed only when all are whole; the snapshot is renamed last (the
 * writer's commit).  A stop request (a signal) or an error removes every
 * file the pack made; a kill -9 leaves temporaries and perhaps renamed
 * chunks but never dlcache.snapshot, and the next pack into DST removes
 * them.  DST holding a finished pack is refused rather than overwritten.
 */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <locale.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "dlcache/backend.h"
#include "dlcache/cause.h"
#include "dlcache/log.h"
#include "dlcache/pack.h"
#include "dlcache/snapshot.h"

#define CRAWL_FILE ".dlcache-crawl.db"
#define CHUNK_FORMAT "chunk-%06" PRIu32 ".tar"
#define READ_BLOCK (4u << 20)

/* What an interrupted pack may leave in DST, and nothing else. */
static const char *const leftover_patterns[] = {
	"chunk-[0-9]*.tar", "chunk-[0-9]*.tar.tmp", DLC_SNAPSHOT_PACKED_NAME ".tmp",
	CRAWL_FILE, CRAWL_FILE ".tmp",
};

struct pack {
	const char *dst;
	const struct dlc_pack_options *options;
	struct dlc_backend *backend;
	const struct dlc_snapshot *tree;
	struct dlc_snapshot_writer *writer;
	struct dlc_pack_result *result;
	char **cause;
	/* The chunk being written. */
	struct archive *archive;
	int fd;
	uint64_t chunk_members;
	/* Every chunk begun so far: chunk_sizes[i] once chunk i is closed. */
	uint32_t nchunks;
	uint64_t *chunk_sizes;
	size_t chunk_sizes_cap;
	unsigned char *block;
	uint64_t total_bytes;
	struct timespec last_progress;
};

static bool stopped(const struct pack *pack)
{
	return pack->options->stop && *pack->options->stop;
}

static int stop_cause(struct pack *pack)
{
	dlc_cause_set(pack->cause, "pack into '%s' was interrupted; nothing was left behind, "
		      "run it again", pack->dst);
	return -EINTR;
}

static char *dst_path(const struct pack *pack, const char *name)
{
	char *path;

	if (asprintf(&path, "%s/%s", pack->dst, name) < 0)
		return NULL;
	return path;
}

static char *chunk_name(uint32_t chunk, bool tmp)
{
	char *name;

	if (asprintf(&name, CHUNK_FORMAT "%s", chunk, tmp ? ".tmp" : "") < 0)
		return NULL;
	return name;
}

/* ------------------------------------------------------------------------
 * DST: created, checked, cleaned.
 */

static bool is_leftover(const char *name)
{
	for (size_t i = 0; i < sizeof(leftover_patterns) / sizeof(leftover_patterns[0]); i++)
		if (fnmatch(leftover_patterns[i], name, FNM_PERIOD) == 0 ||
		    strcmp(leftover_patterns[i], name) == 0)
			return true;
	return false;
}

/* Makes dst if needed; refuses a finished pack or foreign files; removes leftovers. */
static int prepare_dst(const char *dst, char **cause)
{
	struct dirent *de;
	DIR *dir;
	int rc = 0;

	if (mkdir(dst, 0755) < 0 && errno != EEXIST) {
		rc = -errno;
		dlc_cause_set(cause, "cannot create '%s' (%s); give a directory that can be created "
			      "or an empty one", dst, strerror(-rc));
		return rc;
	}
	dir = opendir(dst);
	if (!dir) {
		rc = -errno;
		dlc_cause_set(cause, "cannot open '%s' (%s); give a new or empty directory", dst,
			      strerror(-rc));
		return rc;
	}
	/* First pass: refuse; second pass: clean.  Nothing is removed from a
	 * directory that is refused. */
	for (int pass = 0; pass < 2 && rc == 0; pass++) {
		rewinddir(dir);
		while ((de = readdir(dir)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			if (pass == 0 && strcmp(de->d_name, DLC_SNAPSHOT_PACKED_NAME) == 0) {
				dlc_cause_set(cause, "'%s' holds a finished pack already; remove it "
					      "or pack into another directory", dst);
				rc = -EEXIST;
				break;
			}
			if (pass == 0 && !is_leftover(de->d_name)) {
				dlc_cause_set(cause, "'%s' is not empty (it holds '%s'); pack into a "
					      "new or empty directory", dst, de->d_name);
				rc = -ENOTEMPTY;
				break;
			}
			if (pass == 1 && unlinkat(dirfd(dir), de->d_name, 0) < 0) {
				rc = -errno;
				dlc_cause_set(cause, "cannot remove '%s/%s' left by an earlier pack "
					      "(%s); remove it by hand", dst, de->d_name,
					      strerror(-rc));
				break;
			}
		}
	}
	closedir(dir);
	return rc;
}

/* Removes every chunk this pack made, under either name. */
static void remove_chunks(struct pack *pack)
{
	for (uint32_t i = 0; i < pack->nchunks; i++) {
		for (int tmp = 0; tmp < 2; tmp++) {
			char *name = chunk_name(i, tmp);
			char *path = name ? dst_path(pack, name) : NULL;

			if (path)
				unlink(path);
			free(path);
			free(name);
		}
	}
}

/* ------------------------------------------------------------------------
 * Chunks.
 */

static int archive_failed(struct pack *pack, const char *what)
{
	int err = pack->archive ? archive_errno(pack->archive) : 0;

	dlc_cause_set(pack->cause, "cannot write chunk %" PRIu32 " in '%s' (%s: %s); check that "
		      "it is writable and has room", pack->nchunks - 1, pack->dst, what,
		      pack->archive ? archive_error_string(pack->archive) : "out of memory");
	return err > 0 ? -err : -EIO;
}

static int grow_chunk_sizes(struct pack *pack)
{
	size_t cap = pack->chunk_sizes_cap ? pack->chunk_sizes_cap * 2 : 64;
	uint64_t *grown;

	if (pack->nchunks < pack->chunk_sizes_cap)
		return 0;
	grown = realloc(pack->chunk_sizes, cap * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	pack->chunk_sizes = grown;
	pack->chunk_sizes_cap = cap;
	return 0;
}

static int open_chunk(struct pack *pack)
{
	char *name = chunk_name(pack->nchunks, true);
	char *path = name ? dst_path(pack, name) : NULL;
	int rc;

	free(name);
	if (!path || grow_chunk_sizes(pack) < 0) {
		free(path);
		dlc_cause_set(pack->cause, "out of memory while packing into '%s'", pack->dst);
		return -ENOMEM;
	}
	pack->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (pack->fd < 0) {
		rc = -errno;
		dlc_cause_set(pack->cause, "cannot create '%s' (%s); check that '%s' is writable",
			      path, strerror(-rc), pack->dst);
		free(path);
		return rc;
	}
	free(path);
	pack->chunk_sizes[pack->nchunks++] = 0;
	pack->chunk_members = 0;
	pack->archive = archive_write_new();
	if (!pack->archive ||
	    archive_write_set_format_pax_restricted(pack->archive) != ARCHIVE_OK ||
	    archive_write_add_filter_none(pack->archive) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(pack->archive, 1) != ARCHIVE_OK ||
	    archive_write_open_fd(pack->archive, pack->fd) != ARCHIVE_OK)
		return archive_failed(pack, "start");
	return 0;
}

/* Ends the current chunk: end-of-archive blocks, fsync, size. */
static int close_chunk(struct pack *pack)
{
	struct stat st;
	int rc = 0;

	if (!pack->archive && pack->fd < 0)
		return 0;
	if (pack->archive && archive_write_close(pack->archive) != ARCHIVE_OK)
		rc = archive_failed(pack, "finish");
	archive_write_free(pack->archive);
	pack->archive = NULL;
	if (rc == 0 && (fsync(pack->fd) < 0 || fstat(pack->fd, &st) < 0)) {
		rc = -errno;
		dlc_cause_set(pack->cause, "cannot write chunk %" PRIu32 " in '%s' (%s); check that "
			      "it has room", pack->nchunks - 1, pack->dst, strerror(-rc));
	}
	if (rc == 0)
		pack->chunk_sizes[pack->nchunks - 1] = (uint64_t)st.st_size;
	close(pack->fd);
	pack->fd = -1;
	return rc;
}

/* Bytes the member will take in its chunk, about (headers, name, padded data). */
static uint64_t member_estimate(const char *path, const struct dlc_node *node)
{
	uint64_t data = S_ISREG(node->mode) ? (node->size + 511) / 512 * 512 : 0;

	return 3 * 512 + (strlen(path) * 2 + 511) / 512 * 512 + data;
}

/* ------------------------------------------------------------------------
 * Members.
 */

static void progress(struct pack *pack, bool force)
{
	if (!pack->options->progress || !dlc_progress_due(&pack->last_progress, force))
		return;
	fprintf(stderr, "\rpacked %" PRIu64 " files, %" PRIu64 " of %" PRIu64 " MiB, %" PRIu32
		" chunks", pack->result->files, pack->result->bytes >> 20, pack->total_bytes >> 20,
		pack->nchunks);
}

/* Copies file path (size bytes per the crawl) into the chunk; *hash its xxh3. */
static int copy_data(struct pack *pack, const char *path, uint64_t size, uint64_t *hash)
{
	struct dlc_backend_file *file;
	XXH3_state_t *state = XXH3_createState();
	uint64_t done = 0;
	int rc;

	if (!state) {
		dlc_cause_set(pack->cause, "out of memory while packing into '%s'", pack->dst);
		return -ENOMEM;
	}
	XXH3_64bits_reset(state);
	rc = dlc_backend_open(pack->backend, path, &file);
	if (rc < 0) {
		dlc_cause_set(pack->cause, "cannot read '%s' in '%s' (%s); check its permissions",
			      path, pack->backend->source, strerror(-rc));
		XXH3_freeState(state);
		return rc;
	}
	for (;;) {
		/* One byte more than is left shows a file that grew. */
		uint64_t left = size + 1 - done;
		size_t want = left > READ_BLOCK ? READ_BLOCK : (size_t)left;
		ssize_t n = dlc_backend_pread(pack->backend, file, pack->block, want, done);

		if (stopped(pack)) {
			rc = stop_cause(pack);
			break;
		}
		if (n < 0) {
			rc = (int)n;
			dlc_cause_set(pack->cause, "cannot read '%s' in '%s' (%s); check the source",
				      path, pack->backend->source, strerror(-rc));
			break;
		}
		if (done + (uint64_t)n > size || ((size_t)n < want && done + (uint64_t)n != size)) {
			rc = -ESTALE;
			dlc_cause_set(pack->cause, "'%s' in '%s' changed size while it was being "
				      "packed; pack again when the source is still", path,
				      pack->backend->source);
			break;
		}
		if (n > 0 && archive_write_data(pack->archive, pack->block, (size_t)n) != n) {
			rc = archive_failed(pack, path);
			break;
		}
		XXH3_64bits_update(state, pack->block, (size_t)n);
		done += (uint64_t)n;
		pack->result->bytes += (uint64_t)n;
		progress(pack, false);
		if ((size_t)n < want)
			break;
	}
	dlc_backend_close(pack->backend, file);
	*hash = XXH3_64bits_digest(state);
	XXH3_freeState(state);
	return rc;
}

/* Appends entry ino of the crawled tree to the current chunk and its row to the snapshot. */
static int pack_entry(struct pack *pack, uint64_t ino, const char *path)
{
	const struct dlc_node *node = dlc_snapshot_node(pack->tree, ino);
	const char *target = dlc_snapshot_link_target(pack->tree, ino);
	struct dlc_snapshot_row row = {
		.parent = node->parent,
		.name = dlc_snapshot_name(pack->tree, ino),
		.attr = {
			.mode = node->mode, .uid = node->uid, .gid = node->gid, .size = node->size,
			.mtime_sec = node->mtime_sec, .mtime_nsec = node->mtime_nsec,
		},
		.target = target,
	};
	struct archive_entry *entry;
	int rc = 0, arc;

	if (pack->archive && pack->chunk_members > 0 &&
	    archive_filter_bytes(pack->archive, 0) + (int64_t)member_estimate(path, node) >
	    (int64_t)pack->options->chunk_size) {
		rc = close_chunk(pack);
		if (rc < 0)
			return rc;
	}
	if (!pack->archive) {
		rc = open_chunk(pack);
		if (rc < 0)
			return rc;
	}
	entry = archive_entry_new();
	if (!entry) {
		dlc_cause_set(pack->cause, "out of memory while packing into '%s'", pack->dst);
		return -ENOMEM;
	}
	archive_entry_set_pathname(entry, path);
	archive_entry_set_filetype(entry, node->mode & S_IFMT);
	archive_entry_set_perm(entry, node->mode & 07777);
	archive_entry_set_uid(entry, node->uid);
	archive_entry_set_gid(entry, node->gid);
	archive_entry_set_mtime(entry, node->mtime_sec, node->mtime_nsec);
	archive_entry_set_size(entry, S_ISREG(node->mode) ? (int64_t)node->size : 0);
	if (target)
		archive_entry_set_symlink(entry, target);
	arc = archive_write_header(pack->archive, entry);
	archive_entry_free(entry);
	if (arc != ARCHIVE_OK && arc != ARCHIVE_WARN)   /* WARN: a name that is not UTF-8 */
		return archive_failed(pack, path);
	pack->chunk_members++;
	if (S_ISREG(node->mode)) {
		row.member.chunk = pack->nchunks - 1;
		row.member.offset = (uint64_t)archive_filter_bytes(pack->archive, 0);
		rc = copy_data(pack, path, node->size, &row.member.hash);
		if (rc < 0)
			return rc;
		pack->result->files++;
	}
	return dlc_snapshot_writer_add(pack->writer, &row, pack->cause);
}

/* Renames every chunk to its final name and adds it to the snapshot. */
static int finish_chunks(struct pack *pack)
{
	int rc = 0;

	for (uint32_t i = 0; i < pack->nchunks && rc == 0; i++) {
		char *tmp_name = chunk_name(i, true), *name = chunk_name(i, false);
		char *tmp = tmp_name ? dst_path(pack, tmp_name) : NULL;
		char *path = name ? dst_path(pack, name) : NULL;

		if (!tmp || !path) {
			rc = -ENOMEM;
			dlc_cause_set(pack->cause, "out of memory while packing into '%s'", pack->dst);
		} else if (rename(tmp, path) < 0) {
			rc = -errno;
			dlc_cause_set(pack->cause, "cannot rename '%s' (%s); check '%s'", tmp,
				      strerror(-rc), pack->dst);
		} else {
			rc = dlc_snapshot_writer_add_chunk(pack->writer, name, pack->chunk_sizes[i],
							   pack->cause);
		}
		free(tmp_name);
		free(name);
		free(tmp);
		free(path);
	}
	return rc;
}

/* Makes the chunks' renames durable before the snapshot's. */
static int fsync_dst(struct pack *pack)
{
	int fd = open(pack->dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0 || (fsync(fd) < 0 && errno != EINVAL))
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		dlc_cause_set(pack->cause, "cannot write '%s' (%s); check that it has room",
			      pack->dst, strerror(-rc));
	return rc;
}

/* Crawls src into a tree snapshot in dst and loads it. */
static int crawl_source(struct pack *pack, struct dlc_snapshot **tree)
{
	struct dlc_snapshot_build_options build = {
		.threads = pack->options->crawl_threads,
		.progress = pack->options->progress,
	};
	char *file = dst_path(pack, CRAWL_FILE);
	int rc;

	if (!file) {
		dlc_cause_set(pack->cause, "out of memory while packing into '%s'", pack->dst);
		return -ENOMEM;
	}
	rc = dlc_snapshot_build(pack->backend, file, &build, NULL, pack->cause);
	if (rc == 0)
		rc = dlc_snapshot_load(file, tree, pack->cause);
	unlink(file);
	free(file);
	return rc;
}

static int pack_tree(struct pack *pack)
{
	char path[PATH_MAX];
	int rc;

	for (uint64_t ino = DLC_SNAPSHOT_ROOT_INO; ino <= dlc_snapshot_count(pack->tree); ino++) {
		const struct dlc_node *node = dlc_snapshot_node(pack->tree, ino);

		if (S_ISREG(node->mode))
			pack->total_bytes += node->size;
	}
	for (uint64_t ino = DLC_SNAPSHOT_ROOT_INO; ino <= dlc_snapshot_count(pack->tree); ino++) {
		if (stopped(pack))
			return stop_cause(pack);
		if (ino == DLC_SNAPSHOT_ROOT_INO) {
			const struct dlc_node *root = dlc_snapshot_node(pack->tree, ino);
			struct dlc_snapshot_row row = {
				.parent = DLC_SNAPSHOT_ROOT_INO, .name = "",
				.attr = {
					.mode = root->mode, .uid = root->uid, .gid = root->gid,
					.size = root->size, .mtime_sec = root->mtime_sec,
					.mtime_nsec = root->mtime_nsec,
				},
			};

			rc = dlc_snapshot_writer_add(pack->writer, &row, pack->cause);
		} else {
			rc = dlc_snapshot_path(pack->tree, ino, path, sizeof(path));
			if (rc < 0)
				dlc_cause_set(pack->cause, "a path in '%s' is longer than %d bytes; "
					      "shorten it", pack->backend->source, PATH_MAX);
			else
				rc = pack_entry(pack, ino, path);
		}
		if (rc < 0)
			return rc;
	}
	rc = close_chunk(pack);
	progress(pack, true);
	if (pack->options->progress)
		fputc('\n', stderr);
	return rc;
}

/* The absolute form of dst, which need not exist yet (its parent must). */
static char *resolve_dst(const char *dst)
{
	char *copy, *real_parent, *base, *out = NULL;
	const char *parent;

	out = realpath(dst, NULL);
	if (out || errno != ENOENT)
		return out;
	copy = strdup(dst);
	if (!copy)
		return NULL;
	for (size_t len = strlen(copy); len > 1 && copy[len - 1] == '/'; len--)
		copy[len - 1] = '\0';
	base = strrchr(copy, '/');
	parent = base ? (base == copy ? "/" : copy) : ".";
	if (base)
		*base++ = '\0';
	else
		base = copy;
	real_parent = realpath(parent, NULL);
	if (real_parent && asprintf(&out, "%s%s%s", real_parent,
				    strcmp(real_parent, "/") == 0 ? "" : "/", base) < 0)
		out = NULL;
	free(real_parent);
	free(copy);
	return out;
}

/* child is parent itself or lies below it (both absolute and canonical). */
static bool path_within(const char *child, const char *parent)
{
	size_t len = strlen(parent);

	return strcmp(parent, "/") == 0 ||
	       (strncmp(child, parent, len) == 0 && (child[len] == '\0' || child[len] == '/'));
}

/* Checks src and dst, makes them absolute and creates dst; 0 or -errno with *cause. */
static int resolve_dirs(const char *src, const char *dst, char **real_src, char **real_dst,
			char **cause)
{
	int rc;

	*real_src = realpath(src, NULL);
	if (!*real_src) {
		rc = -errno;
		dlc_cause_set(cause, "source '%s' cannot be opened (%s); give the dataset's "
			      "directory", src, strerror(-rc));
		return rc;
	}
	*real_dst = resolve_dst(dst);
	if (!*real_dst) {
		rc = -errno;
		dlc_cause_set(cause, "cannot use '%s' (%s); give a new or empty directory whose "
			      "parent exists", dst, strerror(-rc));
		return rc;
	}
	if (path_within(*real_dst, *real_src)) {
		dlc_cause_set(cause, "'%s' is inside the source '%s', where the pack would pack "
			      "itself; pack into a directory outside the source", dst, src);
		return -EINVAL;
	}
	if (path_within(*real_src, *real_dst)) {
		dlc_cause_set(cause, "the source '%s' is inside '%s'; pack into a directory "
			      "outside the source", src, dst);
		return -EINVAL;
	}
	return 0;
}

int dlc_pack(const char *src, const char *dst, const struct dlc_pack_options *options,
	     struct dlc_pack_result *result, char **cause)
{
	struct dlc_pack_options defaults = *options;
	struct dlc_pack_result ignored;
	struct dlc_snapshot *tree = NULL;
	struct pack pack = { .fd = -1, .options = &defaults, .cause = cause };
	char *real_src = NULL, *real_dst = NULL, *snapshot_file = NULL;
	locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	locale_t previous = utf8 ? uselocale(utf8) : (locale_t)0;
	int rc;

	if (cause)
		*cause = NULL;
	if (!defaults.chunk_size)
		defaults.chunk_size = DLC_DEFAULT_CHUNK_SIZE;
	pack.result = result ? result : &ignored;
	*pack.result = (struct dlc_pack_result){ 0 };
	clock_gettime(CLOCK_MONOTONIC, &pack.last_progress);

	rc = resolve_dirs(src, dst, &real_src, &real_dst, cause);
	if (rc == 0)
		rc = prepare_dst(real_dst, cause);
	if (rc < 0)
		goto out;
	pack.dst = real_dst;
	rc = dlc_backend_create(real_src, NULL, &pack.backend, cause);
	if (rc < 0)
		goto out;
	rc = crawl_source(&pack, &tree);
	if (rc < 0)
		goto out;
	if (stopped(&pack)) {
		rc = stop_cause(&pack);
		goto out;
	}
	pack.tree = tree;
	pack.block = malloc(READ_BLOCK);
	snapshot_file = dst_path(&pack, DLC_SNAPSHOT_PACKED_NAME);
	if (!pack.block || !snapshot_file) {
		rc = -ENOMEM;
		dlc_cause_set(cause, "out of memory while packing into '%s'", real_dst);
		goto out;
	}
	rc = dlc_snapshot_writer_open(snapshot_file, real_dst, true, &pack.writer, cause);
	if (rc == 0)
		rc = pack_tree(&pack);
	if (rc == 0)
		rc = finish_chunks(&pack);
	if (rc == 0)
		rc = fsync_dst(&pack);
	if (rc == 0) {
		rc = dlc_snapshot_writer_commit(pack.writer, &pack.result->entries, cause);
		pack.writer = NULL;
	}
	if (rc == 0)
		pack.result->chunks = pack.nchunks;
out:
	if (pack.archive || pack.fd >= 0) {
		archive_write_free(pack.archive);
		if (pack.fd >= 0)
			close(pack.fd);
	}
	dlc_snapshot_writer_abort(pack.writer);
	if (rc < 0 && pack.dst) {
		remove_chunks(&pack);
		/* A commit that failed after its rename (the directory's fsync):
		 * DST held no snapshot before this pack, so this one is ours. */
		if (snapshot_file)
			unlink(snapshot_file);
	}
	dlc_snapshot_free(tree);
	dlc_backend_destroy(pack.backend);
	free(pack.chunk_sizes);
	free(pack.block);
	free(snapshot_file);
	free(real_src);
	free(real_dst);
	if (utf8) {
		uselocale(previous);
		freelocale(utf8);
	}
	return rc;
}
