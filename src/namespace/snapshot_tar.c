/*
 * snapshot_tar.c - dlcache snapshot --tar: a packed snapshot for existing tar
 * shards (WebDataset .tar files, for example), indexed in place, so that a
 * directory of *.tar files mounts as the tree of their members (contract in
 * snapshot.h, dlc_snapshot_index_tar).
 *
 * Shards are found by listing the source through the backend, sorted by
 * path, and read through the backend with libarchive (tar formats only, no
 * decompression, so that offsets are offsets in the shard).  A member's data
 * offset is libarchive's count of consumed bytes right after its header
 * (archive_filter_bytes), and its xxh3 is taken over the bytes libarchive
 * hands out for it: should the offset ever be wrong, reads of the member
 * fail their check instead of serving other bytes.  Names are read in a
 * UTF-8 thread locale, so pax UTF-8 paths come back as their bytes.
 *
 * The tree.  Members become entries with their whole path (the shard's
 * prefix in front unless merging); they are sorted component by component,
 * which is a depth-first walk with every directory's children in name
 * order, repeated directories are merged and other repeats refused, hard
 * links take the bytes of the member they name, and directories no member
 * names are inserted where the walk needs them.  Then entries are numbered
 * breadth-first, as every snapshot is, and written.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <xxhash.h>

#include "dlcache/cause.h"
#include "dlcache/log.h"
#include "dlcache/snapshot.h"
#include "snapshot_private.h"

#define SHARD_BUFFER (1u << 20)
#define MAX_LINK_HOPS 8

struct tar_entry {
	char *path;                     /* in the tree, without leading or trailing '/' */
	char *target;                   /* symlinks: the link's text */
	char *hardlink;                 /* hard links until resolved: the target's path */
	struct dlc_backend_attr attr;
	uint32_t chunk;                 /* regular files: the shard; else the shard that named it */
	uint64_t offset;
	uint64_t hash;
	bool named;                     /* a member named it (else a directory made for it) */
	/* Numbering: */
	uint32_t parent;                /* index of the parent entry */
	uint32_t first_child, last_child, next_sibling;  /* UINT32_MAX: none */
	uint32_t ino;
};

struct shard {
	char *path;                     /* relative to the source root */
	struct dlc_backend_attr attr;
};

struct tar_index {
	struct dlc_backend *backend;
	const struct dlc_snapshot_tar_options *options;
	char **cause;
	struct shard *shards;           /* sorted by path: shard i is chunk i */
	size_t nshards, shards_cap;
	struct tar_entry *entries;
	size_t nentries, entries_cap;
	unsigned char *buffer;          /* raw reads for libarchive */
	unsigned char *data;            /* member bytes, for hashing */
	struct timespec last_progress;
};

static void free_entry(struct tar_entry *entry)
{
	free(entry->path);
	free(entry->target);
	free(entry->hardlink);
}

static int index_oom(struct tar_index *index)
{
	dlc_cause_set(index->cause, "out of memory while indexing the shards of '%s'",
		      index->backend->source);
	return -ENOMEM;
}

/* Lists dir recursively, collecting the regular files named *.tar. */
struct shard_walk {
	struct tar_index *index;
	const char *dir;
	char **subdirs;
	size_t nsubdirs, subdirs_cap;
	int rc;
};

static char *join(const char *dir, const char *name)
{
	char *path;

	if (!*dir)
		return strdup(name);
	return asprintf(&path, "%s/%s", dir, name) < 0 ? NULL : path;
}

static int shard_found(void *arg, const struct dlc_backend_dirent *dirent)
{
	struct shard_walk *walk = arg;
	struct tar_index *index = walk->index;
	size_t len = strlen(dirent->name);
	char *path;

	if (S_ISDIR(dirent->attr.mode)) {
		path = join(walk->dir, dirent->name);
		if (!path || dlc_snapshot_grow_array(&walk->subdirs, &walk->subdirs_cap,
						     walk->nsubdirs + 1, sizeof(char *)) < 0) {
			free(path);
			return -ENOMEM;
		}
		walk->subdirs[walk->nsubdirs++] = path;
		return 0;
	}
	if (!S_ISREG(dirent->attr.mode) || len <= 4 || strcmp(dirent->name + len - 4, ".tar") != 0)
		return 0;
	path = join(walk->dir, dirent->name);
	if (!path || dlc_snapshot_grow_array(&index->shards, &index->shards_cap, index->nshards + 1,
					     sizeof(*index->shards)) < 0) {
		free(path);
		return -ENOMEM;
	}
	index->shards[index->nshards++] = (struct shard){ path, dirent->attr };
	return 0;
}

static int find_shards(struct tar_index *index, const char *dir)
{
	struct shard_walk walk = { .index = index, .dir = dir };
	int rc;

	rc = dlc_backend_list(index->backend, dir, shard_found, &walk);
	if (rc < 0) {
		if (rc == -ENOMEM)
			index_oom(index);
		else
			dlc_cause_set(index->cause, "cannot list '%s' in '%s': %s", dir,
				      index->backend->source, strerror(-rc));
	}
	for (size_t i = 0; i < walk.nsubdirs; i++) {
		if (rc == 0)
			rc = find_shards(index, walk.subdirs[i]);
		free(walk.subdirs[i]);
	}
	free(walk.subdirs);
	return rc;
}

/* libarchive's view of a shard: reads through the backend. */
struct shard_reader {
	struct tar_index *index;
	struct dlc_backend_file *file;
	uint64_t position;
};

static la_ssize_t shard_read(struct archive *archive, void *arg, const void **buffer)
{
	struct shard_reader *reader = arg;
	ssize_t n = dlc_backend_pread(reader->index->backend, reader->file, reader->index->buffer,
				      SHARD_BUFFER, reader->position);

	if (n < 0) {
		archive_set_error(archive, (int)-n, "%s", strerror((int)-n));
		return -1;
	}
	reader->position += (uint64_t)n;
	*buffer = reader->index->buffer;
	return n;
}

static la_int64_t shard_skip(struct archive *archive, void *arg, la_int64_t request)
{
	struct shard_reader *reader = arg;

	reader->position += (uint64_t)request;
	return request;
}

/*
 * The tree path of member name in a shard: prefix, then the name without
 * leading "/" or "./", "." or empty components, or a trailing "/".  NULL
 * with *unsafe for a ".." component; "" for the shard's root.
 */
static char *member_path(const char *prefix, const char *name, bool *unsafe)
{
	size_t len = strlen(prefix) + strlen(name) + 2, used = 0;
	char *path = malloc(len);
	const char *component = name;

	*unsafe = false;
	if (!path)
		return NULL;
	if (*prefix) {
		used = strlen(prefix);
		memcpy(path, prefix, used);
	}
	while (*component) {
		const char *slash = strchrnul(component, '/');
		size_t n = (size_t)(slash - component);

		if (n == 2 && component[0] == '.' && component[1] == '.') {
			*unsafe = true;
			free(path);
			return NULL;
		}
		if (n > 0 && !(n == 1 && component[0] == '.')) {
			if (used > 0)
				path[used++] = '/';
			memcpy(path + used, component, n);
			used += n;
		}
		component = *slash ? slash + 1 : slash;
	}
	path[used] = '\0';
	return path;
}

static int add_entry(struct tar_index *index, const struct tar_entry *entry)
{
	if (dlc_snapshot_grow_array(&index->entries, &index->entries_cap, index->nentries + 1,
				    sizeof(*index->entries)) < 0)
		return -ENOMEM;
	index->entries[index->nentries++] = *entry;
	return 0;
}

static void index_progress(struct tar_index *index, size_t shard, bool force)
{
	if (!index->options->progress || !dlc_progress_due(&index->last_progress, force))
		return;
	fprintf(stderr, "\rindexed %zu of %zu shards, %zu members", shard, index->nshards,
		index->nentries);
}

/* Reads the data of the current member, hashing it; 0 or -errno with *cause. */
static int hash_member(struct tar_index *index, struct archive *archive, const char *shard,
		       const char *name, uint64_t size, uint64_t *hash)
{
	XXH3_state_t *state = XXH3_createState();
	uint64_t done = 0;
	int rc = 0;

	if (!state)
		return index_oom(index);
	XXH3_64bits_reset(state);
	while (done < size) {
		la_ssize_t n = archive_read_data(archive, index->data, SHARD_BUFFER);

		if (n <= 0) {
			dlc_cause_set(index->cause, "shard '%s' in '%s' is truncated or damaged in "
				      "member '%s' (%s); repair or remove the shard", shard,
				      index->backend->source, name,
				      n < 0 ? archive_error_string(archive) : "it ends early");
			rc = -EIO;
			break;
		}
		XXH3_64bits_update(state, index->data, (size_t)n);
		done += (uint64_t)n;
	}
	*hash = XXH3_64bits_digest(state);
	XXH3_freeState(state);
	return rc;
}

/* Turns the current header of shard c into an entry; 0, or -errno with *cause. */
static int index_member(struct tar_index *index, struct archive *archive,
			struct archive_entry *member, uint32_t c, const char *prefix)
{
	const char *shard = index->shards[c].path;
	const char *name = archive_entry_pathname(member);
	const char *link = archive_entry_hardlink(member);
	mode_t type = archive_entry_filetype(member);
	struct tar_entry entry = { .chunk = c, .named = true };
	bool unsafe;
	int rc;

	if (!name)
		name = archive_entry_pathname_utf8(member);
	if (!name) {
		dlc_cause_set(index->cause, "a member of shard '%s' in '%s' has a name libarchive "
			      "cannot read; re-create the shard", shard, index->backend->source);
		return -EINVAL;
	}
	if (!link && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
		return 0;       /* devices, fifos, sockets: not served, as in a crawl */
	if (archive_entry_sparse_count(member) > 0) {
		dlc_cause_set(index->cause, "member '%s' of shard '%s' in '%s' is sparse and "
			      "cannot be read as one byte range; re-create the shard without "
			      "--sparse", name, shard, index->backend->source);
		return -EINVAL;
	}
	entry.path = member_path(prefix, name, &unsafe);
	if (link && entry.path)
		entry.hardlink = member_path(prefix, link, &unsafe);
	if (unsafe) {
		free(entry.path);
		dlc_cause_set(index->cause, "member '%s' of shard '%s' in '%s' has '..' in its "
			      "name or link; re-create the shard with names inside it", name,
			      shard, index->backend->source);
		return -EINVAL;
	}
	if (!entry.path || (link && !entry.hardlink)) {
		free_entry(&entry);
		return index_oom(index);
	}
	if (!*entry.path) {
		free_entry(&entry);
		return 0;       /* "./": the shard's own top */
	}
	/* As in a crawl, every path of a snapshot fits DLC_SNAPSHOT_PATH_MAX:
	 * a longer member is left out, not the whole index. */
	if (strlen(entry.path) >= DLC_SNAPSHOT_PATH_MAX) {
		dlc_log(DLC_LOG_WARNING, "a path of %zu bytes, over the %d a snapshot holds, is left out: member '%.48s...' of shard '%s'",
			strlen(entry.path), DLC_SNAPSHOT_PATH_MAX - 1, name, shard);
		free_entry(&entry);
		return 0;
	}
	entry.attr = (struct dlc_backend_attr){
		.mode = (uint32_t)(link ? AE_IFREG : type) | (archive_entry_perm(member) & 07777),
		.uid = (uint32_t)archive_entry_uid(member),
		.gid = (uint32_t)archive_entry_gid(member),
		.mtime_sec = archive_entry_mtime(member),
		.mtime_nsec = (uint32_t)archive_entry_mtime_nsec(member),
	};
	if (type == AE_IFLNK) {
		const char *target = archive_entry_symlink(member);

		entry.target = strdup(target ? target : "");
		entry.attr.size = strlen(entry.target ? entry.target : "");
	} else if (type == AE_IFREG && !link) {
		int64_t size = archive_entry_size(member);

		entry.attr.size = size > 0 ? (uint64_t)size : 0;
		entry.offset = (uint64_t)archive_filter_bytes(archive, 0);
		rc = hash_member(index, archive, shard, name, entry.attr.size, &entry.hash);
		if (rc < 0) {
			free_entry(&entry);
			return rc;
		}
	}
	if ((type == AE_IFLNK && !entry.target) || add_entry(index, &entry) < 0) {
		free_entry(&entry);
		return index_oom(index);
	}
	return 0;
}

/* Indexes every member of shard c. */
static int index_shard(struct tar_index *index, uint32_t c)
{
	const char *shard = index->shards[c].path;
	struct shard_reader reader = { .index = index };
	struct archive_entry *member;
	struct archive *archive;
	char *prefix = NULL;
	int rc, arc;

	rc = dlc_backend_open(index->backend, shard, &reader.file);
	if (rc < 0) {
		dlc_cause_set(index->cause, "cannot open shard '%s' in '%s': %s", shard,
			      index->backend->source, strerror(-rc));
		return rc;
	}
	if (!index->options->merge) {
		prefix = strndup(shard, strlen(shard) - 4);
		if (!prefix) {
			dlc_backend_close(index->backend, reader.file);
			return index_oom(index);
		}
	}
	archive = archive_read_new();
	if (!archive || archive_read_support_format_tar(archive) != ARCHIVE_OK ||
	    archive_read_support_format_empty(archive) != ARCHIVE_OK ||
	    archive_read_set_read_callback(archive, shard_read) != ARCHIVE_OK ||
	    archive_read_set_skip_callback(archive, shard_skip) != ARCHIVE_OK ||
	    archive_read_set_callback_data(archive, &reader) != ARCHIVE_OK) {
		rc = index_oom(index);
		goto out;
	}
	if (archive_read_open1(archive) != ARCHIVE_OK) {
		dlc_cause_set(index->cause, "shard '%s' in '%s' is not an uncompressed tar archive "
			      "(%s); decompress it, or move it out of the directory", shard,
			      index->backend->source, archive_error_string(archive));
		rc = -EINVAL;
		goto out;
	}
	while ((arc = archive_read_next_header(archive, &member)) == ARCHIVE_OK ||
	       arc == ARCHIVE_WARN) {
		rc = index_member(index, archive, member, c, prefix ? prefix : "");
		if (rc < 0)
			goto out;
		index_progress(index, c, false);
	}
	if (arc != ARCHIVE_EOF) {
		dlc_cause_set(index->cause, "shard '%s' in '%s' cannot be read to its end (%s); "
			      "repair or remove the shard", shard, index->backend->source,
			      archive_error_string(archive));
		rc = -EIO;
	}
out:
	archive_read_free(archive);
	dlc_backend_close(index->backend, reader.file);
	free(prefix);
	return rc;
}

/* strcmp of paths compared component by component ('/' below every byte). */
static int compare_paths(const char *a, const char *b)
{
	for (;; a++, b++) {
		unsigned char x = (unsigned char)*a, y = (unsigned char)*b;

		if (x == y) {
			if (!x)
				return 0;
			continue;
		}
		if (!x || !y)
			return !x ? -1 : 1;
		if (x == '/' || y == '/')
			return x == '/' ? -1 : 1;
		return x < y ? -1 : 1;
	}
}

static int compare_entries(const void *a, const void *b)
{
	const struct tar_entry *x = a, *y = b;
	int c = compare_paths(x->path, y->path);

	/* Equal paths keep shard order, so messages name the earlier shard first. */
	if (c == 0)
		c = x->chunk < y->chunk ? -1 : x->chunk > y->chunk;
	return c;
}

static int claimed_twice(struct tar_index *index, const struct tar_entry *first,
			 const struct tar_entry *second)
{
	if (first->chunk == second->chunk)
		dlc_cause_set(index->cause, "'%s' appears twice in shard '%s' in '%s'; re-create "
			      "the shard with each name once", second->path,
			      index->shards[first->chunk].path, index->backend->source);
	else
		dlc_cause_set(index->cause, "'%s' appears in shards '%s' and '%s' in '%s'; "
			      "index without --merge (each shard in its own directory), or "
			      "remove one of them", second->path, index->shards[first->chunk].path,
			      index->shards[second->chunk].path, index->backend->source);
	return -EEXIST;
}

/* Drops repeated directories (the first that a member named wins); refuses other repeats. */
static int merge_repeats(struct tar_index *index)
{
	size_t kept = 0;

	for (size_t i = 0; i < index->nentries; i++) {
		struct tar_entry *entry = &index->entries[i];

		if (kept > 0 && strcmp(index->entries[kept - 1].path, entry->path) == 0) {
			struct tar_entry *first = &index->entries[kept - 1];

			if (!S_ISDIR(first->attr.mode) || !S_ISDIR(entry->attr.mode))
				return claimed_twice(index, first, entry);
			free_entry(entry);
			memset(entry, 0, sizeof(*entry));
			continue;
		}
		if (kept != i) {
			/* Moved: the old slot must not free it again on an error. */
			index->entries[kept] = *entry;
			memset(entry, 0, sizeof(*entry));
		}
		kept++;
	}
	index->nentries = kept;
	return 0;
}

/* Gives each hard link the bytes of the member it names. */
static int resolve_hardlinks(struct tar_index *index)
{
	for (size_t i = 0; i < index->nentries; i++) {
		struct tar_entry *entry = &index->entries[i];
		struct tar_entry *target = entry;

		for (int hops = 0; target && target->hardlink && hops < MAX_LINK_HOPS; hops++) {
			struct tar_entry key = { .path = target->hardlink, .chunk = 0 };
			size_t low = 0, high = index->nentries;

			target = NULL;
			while (low < high) {    /* the first entry with that path */
				size_t mid = low + (high - low) / 2;

				if (compare_paths(index->entries[mid].path, key.path) < 0)
					low = mid + 1;
				else
					high = mid;
			}
			if (low < index->nentries && strcmp(index->entries[low].path, key.path) == 0)
				target = &index->entries[low];
		}
		if (target == entry)
			continue;
		if (!target || target->hardlink || !S_ISREG(target->attr.mode) ||
		    target->chunk != entry->chunk) {
			dlc_cause_set(index->cause, "'%s' in shard '%s' in '%s' is a hard link to "
				      "'%s', which is no earlier file of that shard; re-create the "
				      "shard", entry->path, index->shards[entry->chunk].path,
				      index->backend->source, entry->hardlink);
			return -EINVAL;
		}
		entry->attr.size = target->attr.size;
		entry->offset = target->offset;
		entry->hash = target->hash;
	}
	for (size_t i = 0; i < index->nentries; i++) {
		free(index->entries[i].hardlink);
		index->entries[i].hardlink = NULL;
	}
	return 0;
}

#define NONE UINT32_MAX

/* Whether directory path a holds p (the root, "", holds everything). */
static bool holds(const char *a, const char *p)
{
	size_t len = strlen(a);

	return len == 0 || (strncmp(p, a, len) == 0 && p[len] == '/');
}

/*
 * Builds the tree in *out from the sorted, merged entries (which it takes
 * over): the root first, then every entry after the directories it needs,
 * each with its parent; 0, or -errno with *cause.
 */
static int build_tree(struct tar_index *index, const struct dlc_backend_attr *root,
		      struct tar_entry **out, size_t *count)
{
	struct tar_entry *tree = NULL;
	uint32_t *stack = NULL;
	size_t ntree = 0, tree_cap = 0, depth = 0, stack_cap = 0;
	int rc = 0;

	if (dlc_snapshot_grow_array(&tree, &tree_cap, index->nentries + 1, sizeof(*tree)) < 0 ||
	    dlc_snapshot_grow_array(&stack, &stack_cap, 16, sizeof(*stack)) < 0 ||
	    !(tree[0].path = strdup(""))) {
		rc = index_oom(index);
		goto out;
	}
	tree[0] = (struct tar_entry){ .path = tree[0].path, .attr = *root, .named = true,
				      .parent = 0 };
	ntree = 1;
	stack[depth++] = 0;
	for (size_t i = 0; i < index->nentries; i++) {
		struct tar_entry *entry = &index->entries[i];
		struct tar_entry *top;

		while (!holds(tree[stack[depth - 1]].path, entry->path))
			depth--;
		top = &tree[stack[depth - 1]];
		if (!S_ISDIR(top->attr.mode)) {
			dlc_cause_set(index->cause, "'%s' (shard '%s') is not a directory, but shard "
				      "'%s' has '%s' in it; index without --merge, or re-create "
				      "the shards", top->path, index->shards[top->chunk].path,
				      index->shards[entry->chunk].path, entry->path);
			rc = -ENOTDIR;
			goto out;
		}
		/* The directories between top and entry that no member named. */
		for (const char *slash = strchr(entry->path + (depth > 1 ? strlen(top->path) + 1 : 0), '/');
		     slash; slash = strchr(slash + 1, '/')) {
			struct tar_entry dir = {
				.path = strndup(entry->path, (size_t)(slash - entry->path)),
				.chunk = entry->chunk,
				.parent = stack[depth - 1],
			};
			const struct dlc_backend_attr *shard = &index->shards[entry->chunk].attr;

			dir.attr = (struct dlc_backend_attr){
				.mode = S_IFDIR | 0755, .uid = shard->uid, .gid = shard->gid,
				.size = 0, .mtime_sec = shard->mtime_sec, .mtime_nsec = shard->mtime_nsec,
			};
			if (!dir.path ||
			    dlc_snapshot_grow_array(&tree, &tree_cap, ntree + 1, sizeof(*tree)) < 0 ||
			    dlc_snapshot_grow_array(&stack, &stack_cap, depth + 2, sizeof(*stack)) < 0) {
				free(dir.path);
				rc = index_oom(index);
				goto out;
			}
			tree[ntree] = dir;
			stack[depth++] = (uint32_t)ntree++;
		}
		if (dlc_snapshot_grow_array(&tree, &tree_cap, ntree + 1, sizeof(*tree)) < 0 ||
		    dlc_snapshot_grow_array(&stack, &stack_cap, depth + 2, sizeof(*stack)) < 0) {
			rc = index_oom(index);
			goto out;
		}
		entry->parent = stack[depth - 1];
		tree[ntree] = *entry;
		entry->path = entry->target = NULL;     /* taken over */
		stack[depth++] = (uint32_t)ntree++;
	}
out:
	free(stack);
	for (size_t i = 0; i < index->nentries; i++)
		free_entry(&index->entries[i]);
	index->nentries = 0;
	*out = tree;
	*count = ntree;
	return rc;
}

/* Numbers the tree breadth-first (children stay in name order) and writes it. */
static int write_tree(struct tar_index *index, struct tar_entry *tree, size_t count,
		      const char *file, struct dlc_snapshot_tar_result *result)
{
	struct dlc_snapshot_writer *writer = NULL;
	uint32_t *queue = malloc((count + 1) * sizeof(*queue));
	size_t tail = 1;
	int rc;

	if (!queue)
		return index_oom(index);
	for (size_t i = 0; i < count; i++)
		tree[i].first_child = tree[i].last_child = tree[i].next_sibling = NONE;
	for (size_t i = 1; i < count; i++) {
		struct tar_entry *parent = &tree[tree[i].parent];

		if (parent->first_child == NONE)
			parent->first_child = (uint32_t)i;
		else
			tree[parent->last_child].next_sibling = (uint32_t)i;
		parent->last_child = (uint32_t)i;
	}
	queue[0] = 0;
	for (size_t head = 0; head < tail; head++)
		for (uint32_t c = tree[queue[head]].first_child; c != NONE; c = tree[c].next_sibling)
			queue[tail++] = c;
	for (size_t i = 0; i < count; i++)
		tree[queue[i]].ino = (uint32_t)(i + 1);

	rc = dlc_snapshot_writer_open(file, index->backend->source, true, &writer, index->cause);
	for (size_t i = 0; rc == 0 && i < count; i++) {
		const struct tar_entry *entry = &tree[queue[i]];
		const char *slash = strrchr(entry->path, '/');
		struct dlc_snapshot_row row = {
			.parent = i == 0 ? DLC_SNAPSHOT_ROOT_INO : tree[entry->parent].ino,
			.name = slash ? slash + 1 : entry->path,
			.attr = entry->attr,
			.target = entry->target,
			.member = { .chunk = entry->chunk, .offset = entry->offset, .hash = entry->hash },
		};

		rc = dlc_snapshot_writer_add(writer, &row, index->cause);
		if (S_ISREG(entry->attr.mode))
			result->files++;
	}
	for (size_t c = 0; rc == 0 && c < index->nshards; c++)
		rc = dlc_snapshot_writer_add_chunk(writer, index->shards[c].path,
						   index->shards[c].attr.size, index->cause);
	if (rc == 0)
		rc = dlc_snapshot_writer_commit(writer, &result->entries, index->cause);
	else
		dlc_snapshot_writer_abort(writer);
	free(queue);
	return rc;
}

static int compare_shards(const void *a, const void *b)
{
	return strcmp(((const struct shard *)a)->path, ((const struct shard *)b)->path);
}

int dlc_snapshot_index_tar(struct dlc_backend *backend, const char *file,
			   const struct dlc_snapshot_tar_options *options,
			   struct dlc_snapshot_tar_result *result, char **cause)
{
	static const struct dlc_snapshot_tar_options defaults;
	struct dlc_snapshot_tar_result ignored;
	struct tar_index index = { .backend = backend, .options = options ? options : &defaults,
				   .cause = cause };
	struct dlc_backend_attr root;
	struct tar_entry *tree = NULL;
	size_t count = 0;
	locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	locale_t previous = utf8 ? uselocale(utf8) : (locale_t)0;
	int rc;

	if (cause)
		*cause = NULL;
	if (!result)
		result = &ignored;
	*result = (struct dlc_snapshot_tar_result){ 0 };
	clock_gettime(CLOCK_MONOTONIC, &index.last_progress);
	rc = dlc_backend_stat(backend, "", &root);
	if (rc < 0 || !S_ISDIR(root.mode)) {
		dlc_cause_set(cause, "source '%s' is not a directory that can be read (%s); give "
			      "the directory that holds the shards", backend->source,
			      rc < 0 ? strerror(-rc) : "not a directory");
		rc = rc < 0 ? rc : -ENOTDIR;
		goto out;
	}
	rc = find_shards(&index, "");
	if (rc < 0)
		goto out;
	if (index.nshards == 0) {
		dlc_cause_set(cause, "there is no *.tar file under '%s'; give the directory that "
			      "holds the shards", backend->source);
		rc = -ENOENT;
		goto out;
	}
	qsort(index.shards, index.nshards, sizeof(*index.shards), compare_shards);
	index.buffer = malloc(SHARD_BUFFER);
	index.data = malloc(SHARD_BUFFER);
	if (!index.buffer || !index.data) {
		rc = index_oom(&index);
		goto out;
	}
	for (size_t c = 0; c < index.nshards && rc == 0; c++)
		rc = index_shard(&index, (uint32_t)c);
	index_progress(&index, index.nshards, true);
	if (index.options->progress)
		fputc('\n', stderr);
	if (rc < 0)
		goto out;
	qsort(index.entries, index.nentries, sizeof(*index.entries), compare_entries);
	rc = merge_repeats(&index);
	if (rc == 0)
		rc = resolve_hardlinks(&index);
	if (rc == 0)
		rc = build_tree(&index, &root, &tree, &count);
	if (rc == 0)
		rc = write_tree(&index, tree, count, file, result);
	if (rc == 0)
		result->shards = (uint32_t)index.nshards;
out:
	for (size_t i = 0; i < count; i++)
		free_entry(&tree[i]);
	free(tree);
	for (size_t i = 0; i < index.nentries; i++)
		free_entry(&index.entries[i]);
	free(index.entries);
	for (size_t c = 0; c < index.nshards; c++)
		free(index.shards[c].path);
	free(index.shards);
	free(index.buffer);
	free(index.data);
	if (utf8) {
		uselocale(previous);
		freelocale(utf8);
	}
	return rc;
}
