/*
 * options_validate.c - dlc_options_validate(): the parsed command line
 * checked against the file system.  The source and the mountpoint exist, the
 * cache directory and the snapshot live outside the mount and outside the
 * dataset (and the cache directory is the mounting user's alone), a packed
 * source's own snapshot is found, control_uid= and control_gid= name a real
 * user and group; tier_servers= comes with tier_key=, a private secret of
 * at least 32 bytes (tier_seal.h), read here; io_uring=1 finds FUSE over io_uring switched on in the
 * kernel; the defaults that depend on these are filled in and the paths
 * made canonical.  Every failure is one sentence in *cause naming the
 * problem and its fix.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "dlcache/cause.h"
#include "dlcache/options.h"
#include "dlcache/s3_source.h"
#include "dlcache/snapshot.h"
#include "dlcache/tier.h"
#include "dlcache/tier_seal.h"

/* child is parent itself or lies below it (both absolute and canonical). */
static bool path_is_within(const char *child, const char *parent)
{
	size_t len = strlen(parent);

	if (strcmp(parent, "/") == 0)
		return true;
	return strncmp(child, parent, len) == 0 && (child[len] == '\0' || child[len] == '/');
}

/*
 * The canonical absolute form of path, which need not exist: realpath of its
 * deepest existing ancestor, then the missing components ("." dropped, ".."
 * taking one back).  0, or -errno from realpath or getcwd.
 */
static int resolve_path(const char *path, char **out)
{
	char *absolute = NULL;
	char *resolved = NULL;
	char *slash;
	const char *tail;
	int rc;

	if (path[0] == '/') {
		absolute = strdup(path);
	} else {
		char *cwd = getcwd(NULL, 0);

		if (!cwd)
			return -errno;
		if (asprintf(&absolute, "%s/%s", cwd, path) < 0)
			absolute = NULL;
		free(cwd);
	}
	if (!absolute)
		return -ENOMEM;

	/* Drop trailing slashes so the last component is a name. */
	for (size_t len = strlen(absolute); len > 1 && absolute[len - 1] == '/'; len--)
		absolute[len - 1] = '\0';

	resolved = realpath(absolute, NULL);
	if (resolved) {
		rc = 0;
		goto out;
	}
	if (errno != ENOENT) {
		rc = -errno;
		goto out;
	}

	slash = strrchr(absolute, '/');
	tail = slash + 1;
	if (slash == absolute)
		rc = resolve_path("/", &resolved);
	else {
		*slash = '\0';
		rc = resolve_path(absolute, &resolved);
	}
	if (rc < 0)
		goto out;
	if (strcmp(tail, "..") == 0) {
		char *last = strrchr(resolved, '/');

		if (last == resolved)
			last[1] = '\0';
		else
			*last = '\0';
	} else if (strcmp(tail, ".") != 0 && *tail != '\0') {
		char *longer;

		if (asprintf(&longer, "%s%s%s", resolved,
			     strcmp(resolved, "/") == 0 ? "" : "/", tail) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		free(resolved);
		resolved = longer;
	}
out:
	free(absolute);
	if (rc < 0) {
		free(resolved);
		return rc;
	}
	*out = resolved;
	return 0;
}

static int validate_source(struct dlc_options *opts, char **cause)
{
	struct stat st;
	char *real;

	if (dlc_s3_source_matches(opts->source)) {
		/* s3://b/data/ is s3://b/data: one snapshot and one cache for both. */
		size_t len = strlen(opts->source);

		while (len > strlen("s3://") + 1 && opts->source[len - 1] == '/')
			opts->source[--len] = '\0';
		return 0;
	}
	if (opts->source[0] != '/')
		return 0;   /* host:/export and the like: the backend decides */
	real = realpath(opts->source, NULL);
	if (!real || stat(real, &st) < 0) {
		int rc = -errno;

		free(real);
		if (rc == -ENOENT)
			dlc_cause_set(cause, "source '%s' does not exist; check the path, or mount the file system that holds the dataset first.",
				  opts->source);
		else
			dlc_cause_set(cause, "source '%s' cannot be opened (%s); check the path and its permissions.",
				  opts->source, strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		free(real);
		dlc_cause_set(cause, "source '%s' is not a directory; give the top directory of the dataset.",
			  opts->source);
		return -ENOTDIR;
	}
	free(opts->source);
	opts->source = real;
	return 0;
}

static int validate_mountpoint(struct dlc_options *opts, char **cause)
{
	struct stat st;
	char *real = realpath(opts->mountpoint, NULL);

	if (!real || stat(real, &st) < 0) {
		int rc = -errno;

		free(real);
		if (rc == -ENOENT)
			dlc_cause_set(cause, "mountpoint '%s' does not exist; create it with mkdir -p %s.",
				  opts->mountpoint, opts->mountpoint);
		else if (rc == -ENOTDIR)
			dlc_cause_set(cause, "mountpoint '%s' is not a directory; mount on a directory, e.g. one made with mkdir -p.",
				  opts->mountpoint);
		else
			dlc_cause_set(cause, "mountpoint '%s' cannot be used (%s); check the path and its permissions.",
				  opts->mountpoint, strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		dlc_cause_set(cause, "mountpoint '%s' is not a directory; mount on a directory, e.g. one made with mkdir -p.",
			  opts->mountpoint);
		free(real);
		return -ENOTDIR;
	}
	free(opts->mountpoint);
	opts->mountpoint = real;

	if (opts->source[0] != '/')
		return 0;
	if (strcmp(opts->mountpoint, opts->source) == 0) {
		dlc_cause_set(cause, "mountpoint '%s' is the source itself; mount the cached view on another directory, e.g. /mnt/data.",
			  opts->mountpoint);
		return -EINVAL;
	}
	if (path_is_within(opts->source, opts->mountpoint)) {
		dlc_cause_set(cause, "source '%s' is inside the mountpoint '%s', which the mount would hide; choose a mountpoint outside the source's path.",
			  opts->source, opts->mountpoint);
		return -EINVAL;
	}
	return 0;
}

/* /var/cache/dlcache/HASH for root, else $XDG_CACHE_HOME or ~/.cache + /dlcache/HASH. */
static int default_cache_dir(const struct dlc_options *opts, char **out, char **cause)
{
	unsigned long long hash = XXH3_64bits(opts->source, strlen(opts->source));
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	int n;

	if (geteuid() == 0)
		n = asprintf(out, "/var/cache/dlcache/%016llx", hash);
	else if (xdg && xdg[0] == '/')
		n = asprintf(out, "%s/dlcache/%016llx", xdg, hash);
	else if (home && home[0] == '/')
		n = asprintf(out, "%s/.cache/dlcache/%016llx", home, hash);
	else {
		dlc_cause_set(cause, "no home directory to hold the default cache_dir; set HOME, or give -o cache_dir=DIR on a local disk.");
		return -EINVAL;
	}
	if (n < 0) {
		*out = NULL;
		dlc_cause_set(cause, "out of memory while choosing the cache directory.");
		return -ENOMEM;
	}
	return 0;
}

static int validate_cache_dir(struct dlc_options *opts, char **cause)
{
	struct stat st;
	char *resolved;
	int rc;

	if (!opts->cache_dir) {
		rc = default_cache_dir(opts, &opts->cache_dir, cause);
		if (rc < 0)
			return rc;
	}
	rc = resolve_path(opts->cache_dir, &resolved);
	if (rc < 0) {
		dlc_cause_set(cause, "cache_dir '%s' cannot be used (%s); choose a directory on a local disk.",
			  opts->cache_dir, strerror(-rc));
		return rc;
	}
	if (stat(resolved, &st) == 0 && !S_ISDIR(st.st_mode)) {
		dlc_cause_set(cause, "cache_dir '%s' is not a directory; choose a directory on a local disk, or a path that does not exist yet.",
			  opts->cache_dir);
		free(resolved);
		return -ENOTDIR;
	}
	free(opts->cache_dir);
	opts->cache_dir = resolved;

	if (path_is_within(opts->cache_dir, opts->mountpoint)) {
		dlc_cause_set(cause, "cache_dir '%s' is inside the mountpoint '%s'; put the cache on a local disk outside the mount.",
			  opts->cache_dir, opts->mountpoint);
		return -EINVAL;
	}
	if (opts->source[0] == '/' && path_is_within(opts->cache_dir, opts->source)) {
		dlc_cause_set(cause, "cache_dir '%s' is inside the source '%s', where it would appear in the dataset; put the cache on a local disk outside the source.",
			  opts->cache_dir, opts->source);
		return -EINVAL;
	}
	return 0;
}

static int validate_snapshot(struct dlc_options *opts, char **cause)
{
	bool given = opts->snapshot != NULL;
	struct stat st;
	char *resolved;
	int rc;

	/* A packed source carries its snapshot (dlcache pack, snapshot --tar). */
	if (!given && opts->source[0] == '/') {
		if (asprintf(&opts->snapshot, "%s/" DLC_SNAPSHOT_PACKED_NAME, opts->source) < 0) {
			opts->snapshot = NULL;
			dlc_cause_set(cause, "out of memory while choosing the snapshot file.");
			return -ENOMEM;
		}
		given = stat(opts->snapshot, &st) == 0 && S_ISREG(st.st_mode);
		if (given && opts->refresh) {
			dlc_cause_set(cause, "source '%s' is packed (it holds " DLC_SNAPSHOT_PACKED_NAME "), and refresh would crawl its chunks as files; drop refresh, or pack the dataset again with dlcache pack.",
				      opts->source);
			return -EINVAL;
		}
		if (!given) {
			free(opts->snapshot);
			opts->snapshot = NULL;
		}
	}
	opts->snapshot_default = !given;
	if (!given) {
		if (asprintf(&opts->snapshot, "%s/snapshot.db", opts->cache_dir) < 0) {
			opts->snapshot = NULL;
			dlc_cause_set(cause, "out of memory while choosing the snapshot file.");
			return -ENOMEM;
		}
	}
	rc = resolve_path(opts->snapshot, &resolved);
	if (rc < 0) {
		dlc_cause_set(cause, "snapshot '%s' cannot be used (%s); give a file path on a local disk.",
			  opts->snapshot, strerror(-rc));
		return rc;
	}
	free(opts->snapshot);
	opts->snapshot = resolved;

	if (path_is_within(opts->snapshot, opts->mountpoint)) {
		dlc_cause_set(cause, "snapshot '%s' is inside the mountpoint '%s'; keep the snapshot on a local disk outside the mount.",
			  opts->snapshot, opts->mountpoint);
		return -EINVAL;
	}
	if (stat(opts->snapshot, &st) < 0) {
		rc = -errno;
		if (rc != -ENOENT) {
			dlc_cause_set(cause, "snapshot '%s' cannot be read (%s); check its permissions, or add -o refresh to build a new one.",
				  opts->snapshot, strerror(-rc));
			return rc;
		}
		if (given && !opts->refresh) {
			dlc_cause_set(cause, "snapshot '%s' does not exist; build it with dlcache snapshot %s -o %s, or add -o refresh.",
				  opts->snapshot, opts->source, opts->snapshot);
			return rc;
		}
		return 0;
	}
	if (S_ISDIR(st.st_mode)) {
		dlc_cause_set(cause, "snapshot '%s' is a directory; give the snapshot's file name, e.g. snapshot=%s/snapshot.db.",
			  opts->snapshot, opts->snapshot);
		return -EISDIR;
	}
	return 0;
}

/* A user or group given by number or by name; 0 or -EINVAL with *cause. */
static int resolve_id(const char *option, const char *text, bool group, int64_t *out, char **cause)
{
	char *end;
	unsigned long long number;

	errno = 0;
	number = strtoull(text, &end, 10);
	if (*text >= '0' && *text <= '9' && *end == '\0' && errno == 0 && number < UINT32_MAX) {
		*out = (int64_t)number;
		return 0;
	}
	if (group) {
		struct group *gr = getgrnam(text);

		if (gr) {
			*out = gr->gr_gid;
			return 0;
		}
	} else {
		struct passwd *pw = getpwnam(text);

		if (pw) {
			*out = pw->pw_uid;
			return 0;
		}
	}
	dlc_cause_set(cause, "%s '%s' is not a %s on this machine; give a name from %s or a number.",
		      option, text, group ? "group" : "user", group ? "/etc/group" : "/etc/passwd");
	return -EINVAL;
}

/*
 * The first line of a small kernel file (a module parameter, a sysctl),
 * without its newline; 0 or -errno.
 */
static int read_kernel_value(const char *path, char *value, size_t size)
{
	FILE *f = fopen(path, "re");
	int rc = 0;

	if (!f)
		return -errno;
	if (!fgets(value, (int)size, f))
		rc = ferror(f) ? -EIO : -ENODATA;
	fclose(f);
	if (rc == 0)
		value[strcspn(value, "\n")] = '\0';
	return rc;
}

int dlc_options_check_io_uring(const char *parameter, const char *sysctl, char **cause)
{
	char value[32];
	int rc = read_kernel_value(parameter, value, sizeof(value));

	if (rc == -ENOENT && strcmp(parameter, DLC_FUSE_URING_PARAMETER) == 0) {
		/* fuse may be a module not loaded yet: opening /dev/fuse loads it. */
		int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);

		if (fd >= 0)
			close(fd);
		rc = read_kernel_value(parameter, value, sizeof(value));
	}
	if (rc == -ENOENT) {
		dlc_cause_set(cause, "io_uring=1 needs a kernel with FUSE over io_uring (Linux 6.14 or later built with CONFIG_FUSE_IO_URING), and this one has no %s; mount without io_uring=1.",
			      parameter);
		return -EOPNOTSUPP;
	}
	if (rc < 0) {
		dlc_cause_set(cause, "io_uring=1: cannot read %s (%s); check that sysfs is mounted, or mount without io_uring=1.",
			      parameter, strerror(-rc));
		return rc;
	}
	if (strcmp(value, "Y") != 0 && strcmp(value, "1") != 0) {
		dlc_cause_set(cause, "io_uring=1 needs FUSE over io_uring, which the kernel has switched off (%s is %s); as root, echo Y > %s, or mount without io_uring=1.",
			      parameter, value, parameter);
		return -EOPNOTSUPP;
	}
	/* kernel.io_uring_disabled: 0 all may, 1 root and io_uring_group, 2 none. */
	if (read_kernel_value(sysctl, value, sizeof(value)) == 0 &&
	    (strcmp(value, "2") == 0 || (strcmp(value, "1") == 0 && geteuid() != 0))) {
		dlc_cause_set(cause, "io_uring=1 needs io_uring, which the kernel refuses to %s (%s is %s); as root, echo 0 > %s, or mount without io_uring=1.",
			      strcmp(value, "2") == 0 ? "every process" : "users other than root and kernel.io_uring_group",
			      sysctl, value, sysctl);
		return -EOPNOTSUPP;
	}
	return 0;
}

int dlc_options_validate(struct dlc_options *opts, char **cause)
{
	int rc;

	if (cause)
		*cause = NULL;
	if (!opts->source) {
		dlc_cause_set(cause, "no source given; " DLC_MOUNT_USAGE ".");
		return -EINVAL;
	}
	if (!opts->mountpoint) {
		dlc_cause_set(cause, "no mountpoint given; " DLC_MOUNT_USAGE ".");
		return -EINVAL;
	}
	rc = validate_source(opts, cause);
	if (rc == 0)
		rc = validate_mountpoint(opts, cause);
	if (rc == 0)
		rc = validate_cache_dir(opts, cause);
	if (rc == 0)
		rc = validate_snapshot(opts, cause);
	if (rc == 0 && opts->control_user)
		rc = resolve_id("control_uid", opts->control_user, false, &opts->control_uid, cause);
	if (rc == 0 && opts->control_group)
		rc = resolve_id("control_gid", opts->control_group, true, &opts->control_gid, cause);
	if (rc == 0 && opts->tier_servers && !opts->tier_key) {
		dlc_cause_set(cause, "tier_servers= needs tier_key=FILE, a secret every node of the job shares; make one with dlcache keygen FILE, copy it to each node (mode 0600) and add tier_key=FILE");
		rc = -EINVAL;
	}
	if (rc == 0 && opts->tier_key && !opts->tier_secret)
		rc = dlc_tier_key_read(opts->tier_key, &opts->tier_secret, &opts->tier_secret_len,
				       cause);
	if (rc == 0 && opts->tier_servers && !opts->tier_list)
		rc = dlc_tier_read_file(opts->tier_servers, &opts->tier_list, cause);
	if (rc == 0 && opts->io_uring)
		rc = dlc_options_check_io_uring(DLC_FUSE_URING_PARAMETER, DLC_IO_URING_DISABLED_SYSCTL,
						cause);
	return rc;
}

