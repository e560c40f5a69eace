/*
 * backend_posix.c - the driver for a source that is a directory: a
 * kernel-mounted parallel file system (Lustre, GPFS, BeeGFS), an NFS mount,
 * or a local disk.
 *
 * The driver keeps one O_PATH|O_DIRECTORY descriptor to the source root,
 * opened once at create time (the root itself may be reached through a
 * symlink: the user chose it).  Every later access is relative to that
 * descriptor and never follows a symlink anywhere below the root: files and
 * directories are opened with openat2(2) and RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS; where the kernel lacks openat2 (ENOSYS) the path is
 * walked one component at a time with O_NOFOLLOW, which gives the same
 * guarantee.  Attributes come from fstatat(AT_SYMLINK_NOFOLLOW) and link
 * targets from readlinkat, so a symlink is reported as a symlink, never as
 * what it points to.  Paths are canonical relative paths ("" is the root,
 * no "." or ".." components, no empty components); anything else is EINVAL.
 *
 * Only regular files, directories and symlinks exist for this driver: list
 * skips every other kind, stat calls them ENOENT and open refuses them
 * (without blocking on a fifo).
 *
 * Emulation of a slow or faulty remote (struct dlc_backend_config), for
 * benchmarks and tests:
 *   delay_ns    slept once at the start of every call of every kind;
 *   bandwidth   one link shared by every call: a pread of n bytes takes
 *               its n / bandwidth seconds on the link after the transfers
 *               queued before it, and returns when its own ends, so
 *               parallel reads together never pass the bandwidth (a token
 *               bucket without burst, in virtual time);
 *   fail_every  every Nth pread (counted across all threads and files)
 *               fails with EIO without reading.
 *
 * Thread-safety: the root descriptor and the config never change after
 * create; the read counter and the process-wide openat2 flag are atomics;
 * link_lock guards link_free_ns.
 * pread(2) on one descriptor is safe from several threads at once, so a file
 * handle may be read by several threads (backend.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dlcache/cause.h"
#include "dlcache/backend.h"
#include "dlcache/log.h"

struct posix_backend {
	int root_fd;                        /* O_PATH|O_DIRECTORY; fixed after create */
	char *root;
	struct dlc_backend_config config;   /* fixed after create */
	_Atomic uint64_t reads;             /* preads so far, for fail_every */
	pthread_mutex_t link_lock;
	uint64_t link_free_ns;              /* CLOCK_MONOTONIC when the emulated link is idle */
};

/* Set once openat2 answered ENOSYS: the kernel (or a seccomp filter) is the
 * same for every backend of the process. */
static atomic_bool no_openat2;

struct dlc_backend_file {
	int fd;
};

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / 1000000000u),
		.tv_nsec = (long)(ns % 1000000000u),
	};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void emulate_delay(const struct posix_backend *pb)
{
	if (pb->config.delay_ns)
		sleep_ns(pb->config.delay_ns);
}

/*
 * Moves bytes over the emulated link: they take their time at the
 * configured bandwidth after every transfer queued before them, and the
 * caller sleeps until its own transfer ends.
 */
static void emulate_bandwidth(struct posix_backend *pb, uint64_t bytes)
{
	uint64_t bandwidth = pb->config.bandwidth;
	struct timespec now, until;
	uint64_t cost_ns, now_ns, end_ns;

	if (!bandwidth || !bytes)
		return;
	cost_ns = bytes / bandwidth * 1000000000ULL +
		  (uint64_t)((double)(bytes % bandwidth) * 1e9 / (double)bandwidth);
	clock_gettime(CLOCK_MONOTONIC, &now);
	now_ns = (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
	pthread_mutex_lock(&pb->link_lock);
	if (pb->link_free_ns < now_ns)
		pb->link_free_ns = now_ns;
	pb->link_free_ns += cost_ns;
	end_ns = pb->link_free_ns;
	pthread_mutex_unlock(&pb->link_lock);
	until.tv_sec = (time_t)(end_ns / 1000000000ULL);
	until.tv_nsec = (long)(end_ns % 1000000000ULL);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
		;
}

/* 0 when path is canonical: relative, no empty, "." or ".." component. */
static int check_path(const char *path)
{
	const char *component = path;

	if (!*path)
		return 0;
	for (;;) {
		const char *slash = strchr(component, '/');
		size_t len = slash ? (size_t)(slash - component) : strlen(component);

		if (len == 0)
			return -EINVAL;
		if (component[0] == '.' && (len == 1 || (len == 2 && component[1] == '.')))
			return -EINVAL;
		if (!slash)
			return 0;
		component = slash + 1;
	}
}

/*
 * -errno for an openat(O_NOFOLLOW) of name in dir_fd that failed with err:
 * ELOOP where name is a symlink (as openat2 says), whatever openat said.
 */
static int walk_error(int dir_fd, const char *name, int err)
{
	struct stat st;

	if (err == ENOTDIR && fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode))
		return -ELOOP;
	return -err;
}

/*
 * Opens path below dir_fd one component at a time, never following a
 * symlink: the fallback for kernels without openat2.  path is canonical and
 * non-empty.  Returns a descriptor or -errno.
 */
static int open_walk(int dir_fd, const char *path, int flags)
{
	char copy[PATH_MAX];
	char *component = copy;
	int current = dir_fd;
	size_t len = strlen(path);
	int fd;

	if (len >= sizeof(copy))
		return -ENAMETOOLONG;
	memcpy(copy, path, len + 1);
	for (;;) {
		char *slash = strchr(component, '/');

		if (!slash)
			break;
		*slash = '\0';
		fd = openat(current, component, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			fd = walk_error(current, component, errno);
			goto out;
		}
		if (current != dir_fd)
			close(current);
		current = fd;
		component = slash + 1;
	}
	fd = openat(current, component, flags | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		fd = walk_error(current, component, errno);
out:
	if (current != dir_fd)
		close(current);
	return fd;
}

/* Opens canonical path below the root without following any symlink. */
static int open_beneath(struct posix_backend *pb, const char *path, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	if (!*path) {
		fd = openat(pb->root_fd, ".", flags | O_CLOEXEC);
		return fd < 0 ? -errno : (int)fd;
	}
	if (!atomic_load_explicit(&no_openat2, memory_order_relaxed)) {
		for (int tries = 0; tries < 8; tries++) {
			fd = syscall(SYS_openat2, pb->root_fd, path, &how, sizeof(how));
			if (fd >= 0)
				return (int)fd;
			if (errno != EAGAIN)
				break;
		}
		if (errno == ENOSYS) {
			if (!atomic_exchange(&no_openat2, true))
				dlc_log(DLC_LOG_INFO, "openat2 is not available; opening "
					"source paths one component at a time");
		} else if (errno != EPERM) {
			return -errno;
		}
	}
	/* Here openat2 is missing, or said EPERM, which may be a seccomp
	 * filter that does not know it: the walk answers for this call. */
	return open_walk(pb->root_fd, path, flags);
}

static void attr_from_stat(const struct stat *st, struct dlc_backend_attr *out)
{
	out->mode = (uint32_t)st->st_mode;
	out->uid = (uint32_t)st->st_uid;
	out->gid = (uint32_t)st->st_gid;
	out->size = st->st_size > 0 ? (uint64_t)st->st_size : 0;
	out->mtime_sec = (int64_t)st->st_mtim.tv_sec;
	out->mtime_nsec = (uint32_t)st->st_mtim.tv_nsec;
}

static bool kind_served(mode_t mode)
{
	return S_ISREG(mode) || S_ISDIR(mode) || S_ISLNK(mode);
}

static int posix_list(void *priv, const char *dir, dlc_backend_list_cb cb, void *arg)
{
	struct posix_backend *pb = priv;
	char target[PATH_MAX];
	struct dirent *de;
	DIR *stream;
	int fd, rc;

	emulate_delay(pb);
	rc = check_path(dir);
	if (rc < 0)
		return rc;
	fd = open_beneath(pb, dir, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return fd;
	stream = fdopendir(fd);
	if (!stream) {
		rc = -errno;
		close(fd);
		return rc;
	}
	for (;;) {
		struct dlc_backend_dirent entry = { 0 };
		struct stat st;

		errno = 0;
		de = readdir(stream);
		if (!de) {
			rc = errno ? -errno : 0;
			break;
		}
		if (de->d_name[0] == '.' && (de->d_name[1] == '\0' ||
		    (de->d_name[1] == '.' && de->d_name[2] == '\0')))
			continue;
		if (de->d_type != DT_UNKNOWN && de->d_type != DT_REG &&
		    de->d_type != DT_DIR && de->d_type != DT_LNK)
			continue;
		if (fstatat(dirfd(stream), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;       /* removed since readdir */
			rc = -errno;
			break;
		}
		if (!kind_served(st.st_mode))
			continue;
		entry.name = de->d_name;
		attr_from_stat(&st, &entry.attr);
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlinkat(dirfd(stream), de->d_name, target, sizeof(target));

			if (n < 0) {
				if (errno == ENOENT)
					continue;
				rc = -errno;
				break;
			}
			if ((size_t)n >= sizeof(target)) {
				rc = -ENAMETOOLONG;
				break;
			}
			target[n] = '\0';
			entry.link_target = target;
		}
		rc = cb(arg, &entry);
		if (rc != 0)
			break;
	}
	closedir(stream);
	return rc;
}

/* lstat of canonical path below the root, following no symlink on the way. */
static int stat_beneath(struct posix_backend *pb, const char *path, struct stat *st)
{
	const char *slash = strrchr(path, '/');
	char parent[PATH_MAX];
	size_t len;
	int dir_fd, rc = 0;

	if (!*path)
		return fstatat(pb->root_fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ?
		       -errno : 0;
	if (!slash)
		return fstatat(pb->root_fd, path, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	len = (size_t)(slash - path);
	if (len >= sizeof(parent))
		return -ENAMETOOLONG;
	memcpy(parent, path, len);
	parent[len] = '\0';
	dir_fd = open_beneath(pb, parent, O_PATH | O_DIRECTORY);
	if (dir_fd < 0)
		return dir_fd;
	if (fstatat(dir_fd, slash + 1, st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	close(dir_fd);
	return rc;
}

static int posix_stat(void *priv, const char *path, struct dlc_backend_attr *out)
{
	struct posix_backend *pb = priv;
	struct stat st;
	int rc;

	emulate_delay(pb);
	rc = check_path(path);
	if (rc < 0)
		return rc;
	rc = stat_beneath(pb, path, &st);
	if (rc < 0)
		return rc;
	if (!kind_served(st.st_mode))
		return -ENOENT;
	attr_from_stat(&st, out);
	return 0;
}

static int posix_open(void *priv, const char *path, struct dlc_backend_file **out)
{
	struct posix_backend *pb = priv;
	struct dlc_backend_file *file;
	struct stat st;
	int fd, rc;

	emulate_delay(pb);
	*out = NULL;
	rc = check_path(path);
	if (rc < 0)
		return rc;
	if (!*path)
		return -EISDIR;
	/* O_NONBLOCK so that a fifo put there since the crawl cannot hang us. */
	fd = open_beneath(pb, path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto err_close;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		goto err_close;
	}
	if (fcntl(fd, F_SETFL, 0) < 0) {
		rc = -errno;
		goto err_close;
	}
	file = malloc(sizeof(*file));
	if (!file) {
		rc = -ENOMEM;
		goto err_close;
	}
	file->fd = fd;
	*out = file;
	return 0;

err_close:
	close(fd);
	return rc;
}

static ssize_t posix_pread(void *priv, struct dlc_backend_file *file, void *buf,
			   size_t len, uint64_t off)
{
	struct posix_backend *pb = priv;
	ssize_t n;

	emulate_delay(pb);
	if (pb->config.fail_every) {
		uint64_t nth = atomic_fetch_add_explicit(&pb->reads, 1, memory_order_relaxed) + 1;

		if (nth % pb->config.fail_every == 0)
			return -EIO;
	}
	if (off > (uint64_t)INT64_MAX)
		return -EINVAL;
	/* Short transfers are retried: callers take a short count for end of file. */
	size_t done = 0;

	while (done < len) {
		n = pread(file->fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	emulate_bandwidth(pb, (uint64_t)done);
	return (ssize_t)done;
}

static int posix_close(void *priv, struct dlc_backend_file *file)
{
	struct posix_backend *pb = priv;
	int rc = 0;

	emulate_delay(pb);
	if (!file)
		return 0;
	/* Linux releases the descriptor even when close fails: no retry. */
	if (close(file->fd) < 0)
		rc = -errno;
	free(file);
	return rc;
}

static void posix_destroy(void *priv)
{
	struct posix_backend *pb = priv;

	if (!pb)
		return;
	close(pb->root_fd);
	free(pb->root);
	pthread_mutex_destroy(&pb->link_lock);
	free(pb);
}

static const struct dlc_backend_ops posix_ops = {
	.name = "posix",
	.list = posix_list,
	.stat = posix_stat,
	.open = posix_open,
	.pread = posix_pread,
	.close = posix_close,
	.destroy = posix_destroy,
};

/* Sets *cause for a root that open(2) or a listing probe refused with err. */
static void root_cause(char **cause, const char *root, int err)
{
	switch (err) {
	case ENOENT:
		dlc_cause_set(cause, "source '%s' does not exist; give the dataset's directory", root);
		break;
	case ENOTDIR:
		dlc_cause_set(cause, "source '%s' is not a directory; give the dataset's directory",
			  root);
		break;
	case EACCES:
	case EPERM:
		dlc_cause_set(cause, "source '%s' cannot be read (%s); give a directory this "
			  "user may list, or mount as its owner", root, strerror(err));
		break;
	default:
		dlc_cause_set(cause, "source '%s' cannot be opened (%s); give the dataset's "
			  "directory", root, strerror(err));
		break;
	}
}

int dlc_backend_posix_create(const char *root, const struct dlc_backend_config *config,
			     struct dlc_backend *backend, char **cause)
{
	struct posix_backend *pb;
	int probe_fd, rc;

	pb = calloc(1, sizeof(*pb));
	if (!pb)
		return -ENOMEM;
	pb->root = strdup(root);
	if (!pb->root) {
		rc = -ENOMEM;
		goto err_free;
	}
	pb->config = *config;
	atomic_init(&pb->reads, 0);
	pthread_mutex_init(&pb->link_lock, NULL);

	pb->root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pb->root_fd < 0) {
		rc = -errno;
		root_cause(cause, root, -rc);
		goto err_free_root;
	}
	/* O_PATH needs no permission; check now that the root can be listed. */
	probe_fd = openat(pb->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (probe_fd < 0) {
		rc = -errno;
		root_cause(cause, root, -rc);
		goto err_close_root;
	}
	close(probe_fd);

	backend->ops = &posix_ops;
	backend->priv = pb;
	return 0;

err_close_root:
	close(pb->root_fd);
err_free_root:
	pthread_mutex_destroy(&pb->link_lock);
	free(pb->root);
err_free:
	free(pb);
	return rc;
}
