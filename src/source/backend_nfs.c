/*
 * backend_nfs.c - the driver for NFS sources ("HOST:/PATH",
 * "nfs://HOST/PATH?version=4", parsed by nfs_source.c), spoken from user
 * space with libnfs: no kernel NFS client, no mount(2), no rpcbind for NFSv4.
 * Every operation runs on a connection of the pool (backend_nfs_pool.c,
 * dlc_nfs_run_on_slot), which also reconnects and bounds every call with
 * nfs_timeout=.  The source's path is mounted whole (NFSv4 looks it up in the
 * server's pseudo file system), and the paths given to libnfs are "/" plus
 * the path relative to the source.
 *
 * Files.  A struct dlc_backend_file is a path plus, per slot, the libnfs
 * handle of the file opened on that slot's connection (NULL where it is not
 * open).  pread prefers a free slot where the file is open already; when all
 * of those are busy it takes another slot and opens the file there by path.
 * So several threads may pread one handle at once (the tar driver's chunks
 * are read that way), each on its own connection, and a handle opened before
 * a server restart re-opens by path on the new connection.
 *
 * Listings.  A directory is read whole (and its links resolved) on one slot
 * into memory, and the callback sees it after the slot is given back, so a
 * second attempt on a new connection never repeats an entry.
 *
 * Reads.  Over NFSv4, libnfs 4.0 sends one READ per nfs_pread, and a READ
 * above 1 MiB breaks the connection, so reads go out in pieces of at most
 * 1 MiB.  A server may also return fewer bytes than asked for before the end
 * of the file (its own maximum, e.g. nfs-ganesha's MaxRead), and libnfs hides
 * the READ's eof flag.  So a short piece is the end of the file only when the
 * server has already returned at least as many bytes in one READ as the piece
 * asked for (largest_read); otherwise the next piece is asked for, and tells.
 *
 * Symlinks.  libnfs resolves a symlink met before the last component of a
 * path on the client, and O_NOFOLLOW guards only the last, so each open,
 * stat and listing by path is checked by a walk that follows none
 * (backend_nfs_walk.c): the call counts only when what it reached is what
 * the walk reached; otherwise it fails with ELOOP.
 *
 * Create.  The host is resolved and one connection made, so that a bad host,
 * export or port fails the mount with a sentence; when the server cannot be
 * reached, a plain TCP connect to its port tells refused from unanswered.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlcache/cause.h"
#include "dlcache/log.h"
#include "backend_nfs_private.h"

#define DEFAULT_SLOTS 16
#define DEFAULT_TIMEOUT_MS 30000
#define READ_PIECE (1u << 20)
#define NFS_PORT 2049
#define PORTMAPPER_PORT 111

/* struct nfsdirent's type: NFSv3's ftype3, which libnfs uses for NFSv4 too. */
enum { NFS_TYPE_REG = 1, NFS_TYPE_DIR = 2, NFS_TYPE_LNK = 5 };


/* ------------------------------------------------------------------------
 * Paths and attributes.
 */

/* "/" + path into buf, when path is canonical (relative, no empty, "." or
 * ".." component).  0, -EINVAL or -ENAMETOOLONG. */
static int server_path(const char *path, char *buf, size_t size)
{
	const char *component = path;

	while (*path) {
		const char *slash = strchr(component, '/');
		size_t len = slash ? (size_t)(slash - component) : strlen(component);

		if (len == 0 || (component[0] == '.' &&
				 (len == 1 || (len == 2 && component[1] == '.'))))
			return -EINVAL;
		if (!slash)
			break;
		component = slash + 1;
	}
	if ((size_t)snprintf(buf, size, "/%s", path) >= size)
		return -ENAMETOOLONG;
	return 0;
}

static void attr_from_stat(const struct nfs_stat_64 *st, struct dlc_backend_attr *out)
{
	out->mode = (uint32_t)st->nfs_mode;
	out->uid = (uint32_t)st->nfs_uid;
	out->gid = (uint32_t)st->nfs_gid;
	out->size = st->nfs_size;
	out->mtime_sec = (int64_t)st->nfs_mtime;
	out->mtime_nsec = (uint32_t)st->nfs_mtime_nsec;
}

static bool kind_served(uint32_t mode)
{
	return S_ISREG(mode) || S_ISDIR(mode) || S_ISLNK(mode);
}

/* ------------------------------------------------------------------------
 * list (see "Listings" above).
 */

struct listed {
	struct dlc_backend_attr attr;
	char *name;
	char *target;               /* symlinks only */
};

struct list_call {
	char path[PATH_MAX];
	struct listed *entries;
	size_t count, cap;
};

static void list_call_reset(struct list_call *call)
{
	for (size_t i = 0; i < call->count; i++) {
		free(call->entries[i].name);
		free(call->entries[i].target);
	}
	call->count = 0;
}

/* The kind bits for a readdir entry, or 0 for a kind that is not served. */
static uint32_t entry_kind(const struct nfsdirent *entry)
{
	switch (entry->type) {
	case NFS_TYPE_REG:
		return S_IFREG;
	case NFS_TYPE_DIR:
		return S_IFDIR;
	case NFS_TYPE_LNK:
		return S_IFLNK;
	default:
		return 0;
	}
}

/*
 * Resolves the link called name in the listed directory into *target
 * (malloc'd), size bytes long by its attributes.  libnfs 4.0 copies the
 * target without a terminating NUL, so the buffer starts zeroed.
 */
static int read_link(struct nfs_context *nfs, const struct list_call *call, const char *name,
		     uint64_t size, char **target)
{
	char path[PATH_MAX];
	char *buf;
	int rc;

	*target = NULL;
	if ((size_t)snprintf(path, sizeof(path), "%s%s%s", call->path,
			     strcmp(call->path, "/") == 0 ? "" : "/", name) >= sizeof(path))
		return -ENAMETOOLONG;
	buf = calloc(1, PATH_MAX + 1);
	if (!buf)
		return -ENOMEM;
	rc = nfs_readlink(nfs, path, buf, PATH_MAX);
	if (rc == 0 && strlen(buf) >= PATH_MAX)
		rc = -ENAMETOOLONG;
	if (rc < 0) {
		free(buf);
		return rc;
	}
	if (size > 0 && size < strlen(buf))
		buf[size] = '\0';
	*target = buf;
	return 0;
}

static int run_list(struct nfs_backend *nb, unsigned s, void *arg)
{
	struct nfs_context *nfs = nb->slots[s].nfs;
	struct list_call *call = arg;
	struct dlc_nfs_walked before, after;
	struct nfsdirent *entry;
	struct nfsdir *dir;
	int rc;

	list_call_reset(call);
	/* libnfs follows symlinks in every component of a directory it opens,
	 * and tells nothing of the directory it listed: a walk that follows
	 * none, before and after, must reach one directory. */
	rc = dlc_nfs_walk(nb, s, call->path, &before);
	if (rc == 0 && before.is_link)
		rc = -ELOOP;
	if (rc < 0)
		return rc;
	rc = nfs_opendir(nfs, call->path, &dir);
	if (rc < 0)
		return rc;
	while ((entry = nfs_readdir(nfs, dir))) {
		uint32_t kind = entry_kind(entry);
		struct listed *listed;

		if (!kind || strcmp(entry->name, ".") == 0 || strcmp(entry->name, "..") == 0)
			continue;
		if (call->count == call->cap) {
			size_t cap = call->cap ? call->cap * 2 : 64;
			struct listed *grown = realloc(call->entries, cap * sizeof(*grown));

			if (!grown) {
				rc = -ENOMEM;
				break;
			}
			call->entries = grown;
			call->cap = cap;
		}
		listed = &call->entries[call->count];
		*listed = (struct listed){
			.attr = {
				.mode = kind | (entry->mode & 07777),
				.uid = entry->uid,
				.gid = entry->gid,
				.size = entry->size,
				.mtime_sec = (int64_t)entry->mtime.tv_sec,
				.mtime_nsec = entry->mtime_nsec,
			},
			.name = strdup(entry->name),
		};
		if (!listed->name) {
			rc = -ENOMEM;
			break;
		}
		call->count++;
		if (kind == S_IFLNK) {
			rc = read_link(nfs, call, entry->name, entry->size, &listed->target);
			if (rc == -ENOENT) {    /* removed since the listing */
				free(listed->name);
				call->count--;
				rc = 0;
				continue;
			}
			if (rc < 0)
				break;
		}
	}
	nfs_closedir(nfs, dir);
	if (rc == 0)
		rc = dlc_nfs_walk(nb, s, call->path, &after);
	if (rc == 0 && (after.is_link || after.fileid != before.fileid))
		rc = -ELOOP;
	return rc;
}

static int nfs_backend_list(void *priv, const char *dir, dlc_backend_list_cb cb, void *arg)
{
	struct nfs_backend *nb = priv;
	struct list_call *call = calloc(1, sizeof(*call));
	int rc;

	if (!call)
		return -ENOMEM;
	rc = server_path(dir, call->path, sizeof(call->path));
	if (rc == 0)
		rc = dlc_nfs_run_on_slot(nb, 0, run_list, call);
	for (size_t i = 0; rc == 0 && i < call->count; i++) {
		struct dlc_backend_dirent entry = {
			.name = call->entries[i].name,
			.attr = call->entries[i].attr,
			.link_target = call->entries[i].target,
		};

		rc = cb(arg, &entry);
	}
	list_call_reset(call);
	free(call->entries);
	free(call);
	return rc;
}

/* ------------------------------------------------------------------------
 * stat, open, pread, close.
 */

struct stat_call {
	char path[PATH_MAX];
	struct nfs_stat_64 st;
};

/* An lstat by path, after a walk that follows no symlink, which counts
 * only when it reaches the same object (see open_on_slot). */
static int run_stat(struct nfs_backend *nb, unsigned s, void *arg)
{
	struct stat_call *call = arg;
	struct dlc_nfs_walked walked;
	int rc;

	rc = dlc_nfs_walk(nb, s, call->path, &walked);
	if (rc == 0)
		rc = nfs_lstat64(nb->slots[s].nfs, call->path, &call->st);
	if (rc == 0 && walked.reached && walked.fileid != call->st.nfs_ino)
		rc = -ELOOP;
	return rc;
}

static int nfs_backend_stat(void *priv, const char *path, struct dlc_backend_attr *out)
{
	struct stat_call call;
	int rc;

	rc = server_path(path, call.path, sizeof(call.path));
	if (rc == 0)
		rc = dlc_nfs_run_on_slot(priv, 0, run_stat, &call);
	if (rc < 0)
		return rc;
	if (!kind_served((uint32_t)call.st.nfs_mode))
		return -ENOENT;
	attr_from_stat(&call.st, out);
	return 0;
}

/*
 * Opens file on slot s, which must hold no handle for it yet.  libnfs walks
 * the path itself and would follow a symlink before the last component, so
 * a walk that follows none (dlc_nfs_walk) goes first, and the open counts
 * only when its handle names the object the walk reached: the same file
 * handle (one round trip), or else the same fileid (a GETATTR more): a
 * symlink in any component, before or at the open, gives -ELOOP and nothing
 * is read.  The walk goes first so that libnfs is not asked to follow a
 * link the walk already refused: libnfs 4.0 leaks its COMPOUND's operation
 * array each time it resolves one (nfs4_lookup_path_1_cb, fixed in 7.0).
 */
static int open_on_slot(struct nfs_backend *nb, unsigned s, struct dlc_backend_file *file)
{
	struct nfs_context *nfs = nb->slots[s].nfs;
	struct dlc_nfs_walked walked;
	struct nfsfh *handle;
	struct nfs_stat_64 st;
	int rc;

	rc = dlc_nfs_walk(nb, s, file->path, &walked);
	if (rc == 0 && walked.is_link)
		rc = -ELOOP;
	if (rc < 0)
		return rc;
	rc = nfs_open(nfs, file->path, O_RDONLY | O_NOFOLLOW, &handle);
	if (rc < 0)
		return rc;
	if (!(walked.is_regular && dlc_nfs_walked_is(&walked, handle))) {
		/* NFSv4's OPEN refuses what is not a regular file; v3 has no OPEN. */
		rc = nfs_fstat64(nfs, handle, &st);
		if (rc == 0 && !S_ISREG(st.nfs_mode))
			rc = S_ISDIR(st.nfs_mode) ? -EISDIR : -EINVAL;
		if (rc == 0 && walked.fileid != st.nfs_ino)
			rc = -ELOOP;
	}
	if (rc < 0) {
		nfs_close(nfs, handle);
		return rc;
	}
	dlc_nfs_file_attach(nb, s, file, handle);
	return 0;
}

static int run_open(struct nfs_backend *nb, unsigned s, void *arg)
{
	return open_on_slot(nb, s, arg);
}

static int nfs_backend_open(void *priv, const char *path, struct dlc_backend_file **out)
{
	struct nfs_backend *nb = priv;
	struct dlc_backend_file *file;
	char server[PATH_MAX];
	int rc;

	*out = NULL;
	rc = server_path(path, server, sizeof(server));
	if (rc < 0)
		return rc;
	if (!*path)
		return -EISDIR;
	file = calloc(1, sizeof(*file) + nb->nslots * sizeof(file->on[0]));
	if (!file)
		return -ENOMEM;
	file->path = strdup(server);
	if (!file->path) {
		free(file);
		return -ENOMEM;
	}
	atomic_init(&file->open_on, 0);
	rc = dlc_nfs_run_on_slot(nb, 0, run_open, file);
	if (rc < 0) {
		free(file->path);
		free(file);
		return rc;
	}
	*out = file;
	return 0;
}

struct pread_call {
	struct dlc_backend_file *file;
	char *buf;
	size_t len;
	uint64_t off;
	size_t done;                /* kept across attempts */
};

static int run_pread(struct nfs_backend *nb, unsigned s, void *arg)
{
	struct pread_call *call = arg;
	struct nfs_context *nfs = nb->slots[s].nfs;
	int rc;

	if (!call->file->on[s].handle) {
		rc = open_on_slot(nb, s, call->file);
		if (rc < 0)
			return rc;
	}
	while (call->done < call->len) {
		size_t ask = call->len - call->done > READ_PIECE ? READ_PIECE : call->len - call->done;
		uint64_t largest = atomic_load_explicit(&nb->largest_read, memory_order_relaxed);
		int n = nfs_pread(nfs, call->file->on[s].handle, call->off + call->done, ask,
				  call->buf + call->done);

		if (n < 0)
			return n;
		if (n == 0)
			break;
		call->done += (size_t)n;
		while ((uint64_t)n > largest &&
		       !atomic_compare_exchange_weak(&nb->largest_read, &largest, (uint64_t)n))
			;
		if ((size_t)n < ask && ask <= largest)
			break;  /* the server returns more than this: the end of the file */
	}
	return 0;
}

static ssize_t nfs_backend_pread(void *priv, struct dlc_backend_file *file, void *buf, size_t len,
			      uint64_t off)
{
	struct pread_call call = { .file = file, .buf = buf, .len = len, .off = off };
	int rc;

	if (off > (uint64_t)INT64_MAX || len > SSIZE_MAX)
		return -EINVAL;
	rc = dlc_nfs_run_on_slot(priv, atomic_load(&file->open_on), run_pread, &call);
	return rc < 0 ? rc : (ssize_t)call.done;
}

static int nfs_backend_close(void *priv, struct dlc_backend_file *file)
{
	struct nfs_backend *nb = priv;
	uint64_t open_on;
	int rc = 0;

	if (!file)
		return 0;
	while ((open_on = atomic_load(&file->open_on)) != 0) {
		unsigned s = (unsigned)__builtin_ctzll(open_on);

		dlc_nfs_slot_take_exactly(nb, s);
		if (file->on[s].handle) {
			int closed = nfs_close(nb->slots[s].nfs, dlc_nfs_file_detach(nb, s, file));

			/* A server that forgot the open, or went away, closed it too. */
			if (closed < 0 && dlc_nfs_connection_lost(closed)) {
				dlc_nfs_slot_drop(nb, s, closed);
				closed = 0;
			}
			if (closed < 0 && rc == 0)
				rc = closed;
		}
		dlc_nfs_slot_give(nb, s);
	}
	free(file->path);
	free(file);
	return rc;
}

static void nfs_backend_destroy(void *priv)
{
	struct nfs_backend *nb = priv;

	if (!nb)
		return;
	for (unsigned s = 0; s < nb->nslots; s++) {
		struct nfs_slot *slot = &nb->slots[s];

		if (!slot->nfs)
			continue;
		/* Nothing is sent, so that a server that is gone cannot hold up an
		 * unmount: NFSv4 has no unmount, an NFSv3 UMNT only tidies the
		 * server's list of clients (showmount), and files still open (none,
		 * when every caller closed its own) are dropped like a lost
		 * connection's, whose state the server forgets after a lease. */
		if (slot->files)
			dlc_nfs_slot_drop(nb, s, -ECONNABORTED);
		else
			nfs_destroy_context(slot->nfs);
	}
	dlc_nfs_source_free(&nb->source);
	pthread_cond_destroy(&nb->given_back);
	pthread_mutex_destroy(&nb->lock);
	pthread_mutex_destroy(&nb->connect_lock);
	free(nb);
}

static const struct dlc_backend_ops nfs_ops = {
	.name = "nfs",
	.list = nfs_backend_list,
	.stat = nfs_backend_stat,
	.open = nfs_backend_open,
	.pread = nfs_backend_pread,
	.close = nfs_backend_close,
	.destroy = nfs_backend_destroy,
};

/* ------------------------------------------------------------------------
 * Connecting at create time, and saying why it failed.
 */

/* The port libnfs contacts first for this source. */
static unsigned first_port(const struct dlc_nfs_source *source)
{
	if (source->version == 4)
		return source->nfsport ? source->nfsport : NFS_PORT;
	return source->mountport ? source->mountport : PORTMAPPER_PORT;
}

/*
 * Opens a TCP connection to host:port and closes it again, to learn why a
 * mount failed: 0 when something listens there, else -errno (ECONNREFUSED,
 * ETIMEDOUT after timeout_ms, EHOSTUNREACH, ...).
 */
static int probe_port(const char *host, unsigned port, int timeout_ms)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *addrs;
	char service[12];
	int rc = -EHOSTUNREACH;

	snprintf(service, sizeof(service), "%u", port);
	if (getaddrinfo(host, service, &hints, &addrs) != 0)
		return -EHOSTUNREACH;
	for (struct addrinfo *a = addrs; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				a->ai_protocol);
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		int err = 0;
		socklen_t len = sizeof(err);

		if (fd < 0)
			continue;
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			err = 0;
		else if (errno != EINPROGRESS)
			err = errno;
		else if (poll(&pfd, 1, timeout_ms) <= 0)
			err = ETIMEDOUT;
		else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		close(fd);
		rc = -err;
		if (err == 0)
			break;
	}
	freeaddrinfo(addrs);
	return rc;
}

/*
 * Sets *cause for a first connection that failed with rc (libnfs said why)
 * and returns the -errno that names the failure best.
 */
static int connect_cause(struct nfs_backend *nb, const char *text, int rc, const char *why,
			 char **cause)
{
	const struct dlc_nfs_source *src = &nb->source;
	unsigned port = first_port(src);
	int probe;

	switch (-rc) {
	case ENOENT:
		dlc_cause_set(cause, "NFS server %s has no export or directory '%s'; check the "
			      "path in source '%s' against the server's exports.", src->server,
			      src->path, text);
		return rc;
	case EACCES:
	case EPERM:
		dlc_cause_set(cause, "NFS server %s refuses this client access to '%s' (%s); "
			      "allow it in the export's client list, or ask the server's "
			      "administrator.", src->server, src->path, why ? why : strerror(-rc));
		return rc;
	case ENOTDIR:
		dlc_cause_set(cause, "'%s' on NFS server %s is not a directory; give the "
			      "dataset's directory in source '%s'.", src->path, src->server, text);
		return rc;
	case ENOMEM:
		dlc_cause_set(cause, "out of memory while connecting to source '%s'.", text);
		return rc;
	}
	probe = probe_port(src->server, port, nb->timeout_ms);
	if (probe == -ECONNREFUSED)
		dlc_cause_set(cause, "NFS server %s refuses connections on port %u; check that "
			      "an NFS server runs there, or give its port as in "
			      "nfs://%s%s?nfsport=PORT.", src->server, port, src->server, src->path);
	else if (probe == -ETIMEDOUT)
		dlc_cause_set(cause, "NFS server %s did not answer on port %u within %d s; check "
			      "the host name and the network, or raise nfs_timeout=.", src->server,
			      port, nb->timeout_ms / 1000);
	else if (probe < 0)
		dlc_cause_set(cause, "NFS server %s cannot be reached on port %u (%s); check the "
			      "host name and the network.", src->server, port, strerror(-probe));
	else if (rc == -EINTR)
		dlc_cause_set(cause, "NFS server %s accepted a connection on port %u but did not "
			      "answer within %d s; check that the server is healthy, or raise "
			      "nfs_timeout=.", src->server, port, nb->timeout_ms / 1000);
	else
		dlc_cause_set(cause, "NFS server %s accepted a connection on port %u, but the "
			      "NFSv%d mount of '%s' failed (%s); check that the server speaks "
			      "NFSv%d, or give the version as in nfs://%s%s?version=%d.",
			      src->server, port, src->version, src->path,
			      why ? why : strerror(-rc), src->version, src->server, src->path,
			      src->version == 4 ? 3 : 4);
	if (probe < 0)
		return probe;
	return rc == -EINTR ? -ETIMEDOUT : -EIO;
}

/* Connects the first slot and checks that the source is a directory. */
static int connect_first(struct nfs_backend *nb, const char *text, char **cause)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *addrs;
	struct nfs_stat_64 st;
	char *why = NULL;
	unsigned s;
	int rc;

	rc = getaddrinfo(nb->source.server, NULL, &hints, &addrs);
	if (rc != 0) {
		dlc_cause_set(cause, "NFS server %s in source '%s' is not a known host (%s); "
			      "check the name, or give the server's address.", nb->source.server,
			      text, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	freeaddrinfo(addrs);

	s = dlc_nfs_slot_take(nb, 0);
	rc = dlc_nfs_slot_connect(nb, s, &why);
	if (rc == 0) {
		rc = nfs_lstat64(nb->slots[s].nfs, "/", &st);
		if (rc == 0 && !S_ISDIR(st.nfs_mode))
			rc = -ENOTDIR;
		if (rc < 0 && nfs_get_error(nb->slots[s].nfs))
			why = strdup(nfs_get_error(nb->slots[s].nfs));
	}
	if (rc < 0)
		rc = connect_cause(nb, text, rc, why, cause);
	free(why);
	dlc_nfs_slot_give(nb, s);
	if (rc < 0)
		return rc;
	dlc_log(DLC_LOG_INFO, "connected to NFS server %s (NFSv%d) for %s", nb->source.server,
		nb->source.version, nb->source.path);
	return 0;
}

int dlc_backend_nfs_create(const char *source, const struct dlc_backend_config *config,
			   struct dlc_backend *backend, char **cause)
{
	struct nfs_backend *nb;
	struct sigaction ignore = { .sa_handler = SIG_IGN }, old;
	int rc;

	if (config->delay_ns || config->bandwidth || config->fail_every) {
		dlc_cause_set(cause, "source_delay, source_bw and source_fail_every emulate a slow "
			      "directory source and do not apply to NFS source '%s'; leave them out.",
			      source);
		return -EINVAL;
	}
	nb = calloc(1, sizeof(*nb));
	if (!nb)
		return -ENOMEM;
	rc = dlc_nfs_source_parse(source, &nb->source, cause);
	if (rc < 0) {
		free(nb);
		return rc;
	}
	nb->nslots = config->connections ? config->connections : DEFAULT_SLOTS;
	if (nb->nslots > NFS_MAX_SLOTS)
		nb->nslots = NFS_MAX_SLOTS;
	/* libnfs counts whole seconds, in an int of milliseconds. */
	nb->timeout_ms = DEFAULT_TIMEOUT_MS;
	if (config->timeout_ns) {
		uint64_t seconds = (config->timeout_ns + 999999999ULL) / 1000000000ULL;

		nb->timeout_ms = seconds > INT_MAX / 1000 ? INT_MAX / 1000 * 1000 : (int)seconds * 1000;
	}
	if (gethostname(nb->hostname, sizeof(nb->hostname)) < 0 || !nb->hostname[0])
		strcpy(nb->hostname, "localhost");
	nb->hostname[sizeof(nb->hostname) - 1] = '\0';
	pthread_mutex_init(&nb->connect_lock, NULL);
	pthread_mutex_init(&nb->lock, NULL);
	pthread_cond_init(&nb->given_back, NULL);
	atomic_init(&nb->largest_read, 0);
	atomic_init(&nb->quiet_until_ns, 0);

	/* A server that goes away must fail a send with EPIPE, not kill the daemon. */
	if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL)
		sigaction(SIGPIPE, &ignore, NULL);

	rc = connect_first(nb, source, cause);
	if (rc < 0) {
		nfs_backend_destroy(nb);
		return rc;
	}
	backend->ops = &nfs_ops;
	backend->priv = nb;
	return 0;
}
