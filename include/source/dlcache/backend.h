/*
 * backend.h - one driver table per kind of source.
 *
 * A backend is the only code that touches the remote dataset.  Every path a
 * backend sees is relative to the source root, without a leading slash ("" is
 * the root itself, "train/n01440764/x.JPEG" a sample).  Drivers implement the
 * five operations of struct dlc_backend_ops; the dlc_backend_* wrappers below
 * count every call by kind, so the stats can prove that no metadata operation
 * reaches the remote after mount.
 *
 * Thread-safety: every operation may be called from several threads at once,
 * and pread may be called on ONE file handle from several threads at once
 * (chunks.c opens a tar chunk once per mount and every reader thread reads it): the
 * posix driver's pread(2) is safe so, and the NFS driver, whose library is
 * not thread-safe, gives each concurrent call its own connection and opens
 * the file there as needed.  A handle is closed once, after every pread on
 * it has returned.
 *
 * Errors: 0 (or a byte count) on success, -errno on failure.  A dead or
 * unreachable remote gives -EIO promptly, and a hung one after at most the
 * timeout (source_timeout=; the NFS driver bounds its own calls, the
 * directory driver is wrapped by backend_deadline.c), never a hang.  A remote that restarts
 * fails the calls in flight; later calls reconnect, and a file handle opened
 * before the restart goes on working (the NFS driver re-opens it by path).
 */
#ifndef DLCACHE_BACKEND_H
#define DLCACHE_BACKEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlcache/stats.h"   /* enum dlc_backend_op, the kinds of calls counted */

/* Attributes of one entry, as lstat(2) would give them (links not followed). */
struct dlc_backend_attr {
	uint32_t mode;      /* S_IFREG, S_IFDIR or S_IFLNK plus permission bits */
	uint32_t uid;
	uint32_t gid;
	uint64_t size;
	int64_t mtime_sec;
	uint32_t mtime_nsec;
};

/* One directory entry handed to a list callback; valid during the call only. */
struct dlc_backend_dirent {
	const char *name;          /* one component, never "." or ".." */
	struct dlc_backend_attr attr;
	const char *link_target;   /* the link's text for S_IFLNK, else NULL */
	const char *version;       /* the object's version as the source names it
				    * (S3: its ETag, quoted), else NULL */
};

/*
 * What the snapshot recorded of regular file path: returns true when it
 * holds one, with its size in *bytes and its version in buf (size bytes;
 * "" when it recorded none or the version does not fit).  Given to a
 * driver after the snapshot is loaded (dlc_backend_set_versions), so that
 * it can read exactly the bytes the snapshot described without asking the
 * remote (S3: If-Match, and each answer checked against version and size).
 */
typedef bool (*dlc_backend_version_fn)(void *arg, const char *path, char *buf, size_t size,
				       uint64_t *bytes);

/* Returns 0 to go on, or -errno to stop the listing with that error. */
typedef int (*dlc_backend_list_cb)(void *arg, const struct dlc_backend_dirent *entry);

struct dlc_backend_file; /* defined by each driver */

struct dlc_backend_ops {
	const char *name;
	/* Calls cb once per regular file, directory or symlink in dir (other
	 * kinds are skipped), in no particular order. */
	int (*list)(void *priv, const char *dir, dlc_backend_list_cb cb, void *arg);
	int (*stat)(void *priv, const char *path, struct dlc_backend_attr *out);
	/* Opens a regular file for reading; never follows a symlink. */
	int (*open)(void *priv, const char *path, struct dlc_backend_file **out);
	/* Reads up to len bytes at off; returns the count, fewer than len only
	 * at end of file (drivers retry short transfers and EINTR themselves). */
	ssize_t (*pread)(void *priv, struct dlc_backend_file *file, void *buf,
			 size_t len, uint64_t off);
	int (*close)(void *priv, struct dlc_backend_file *file);
	void (*destroy)(void *priv);
	/* Optional: takes the snapshot's versions (S3 driver only). */
	void (*set_versions)(void *priv, dlc_backend_version_fn fn, void *arg);
};

struct dlc_backend_config {
	/* Emulation of a slow remote, for benchmarks and tests (posix driver
	 * only; the NFS driver refuses them). */
	uint64_t delay_ns;          /* added to every call; 0 = none */
	uint64_t bandwidth;         /* bytes per second for reads; 0 = unlimited */
	unsigned fail_every;        /* fault injection: every Nth read fails with EIO; 0 = never */
	/* Every driver: the longest one open, read or close may take; 0 = 30 s
	 * (NFS rounds it up to whole seconds). */
	uint64_t timeout_ns;
	/* NFS and S3 drivers. */
	unsigned connections;       /* most connections to the server; 0 = 16, at most 64 */
	/* S3 driver (s3_source.h); NULL: the defaults. */
	char *s3_endpoint;          /* http[s]://HOST[:PORT], path-style; NULL: AWS */
	char *s3_region;            /* NULL: AWS_REGION, AWS_DEFAULT_REGION or us-east-1 */
	char *s3_profile;           /* NULL: AWS_PROFILE or "default" */
};

struct dlc_backend {
	const struct dlc_backend_ops *ops;
	void *priv;
	char *source;                                   /* as the user wrote it */
	_Atomic uint64_t calls[DLC_BACKEND_OP_COUNT];   /* counted by the wrappers */
	_Atomic uint64_t errors;                        /* calls that failed */
};

/*
 * Picks the driver for source ("/path" is a directory; "host:/export/path" and
 * "nfs://host/export/path?..." are NFS, see nfs_source.h; "s3://BUCKET/PREFIX"
 * is S3, see s3_source.h; a relative path is refused) and connects.  On failure returns -errno and sets *cause to a
 * malloc'd sentence naming the problem and the fix.
 */
int dlc_backend_create(const char *source, const struct dlc_backend_config *config,
		       struct dlc_backend **out, char **cause);
void dlc_backend_destroy(struct dlc_backend *backend);

/* Counting wrappers: use these, never ops directly. */
int dlc_backend_list(struct dlc_backend *backend, const char *dir,
		     dlc_backend_list_cb cb, void *arg);
int dlc_backend_stat(struct dlc_backend *backend, const char *path,
		     struct dlc_backend_attr *out);
int dlc_backend_open(struct dlc_backend *backend, const char *path,
		     struct dlc_backend_file **out);
ssize_t dlc_backend_pread(struct dlc_backend *backend, struct dlc_backend_file *file,
			  void *buf, size_t len, uint64_t off);
int dlc_backend_close(struct dlc_backend *backend, struct dlc_backend_file *file);

/*
 * A driver whose list fails for a reason no errno says (S3: a page that is
 * truncated but gives no continuation token) leaves a sentence with
 * dlc_cause_thread_set (cause.h) before it returns; the caller of
 * dlc_backend_list reads it with dlc_cause_thread (NULL when the driver
 * left none) and shows it instead of strerror.  dlc_backend_list clears it
 * as it starts.
 */

/* Hands the snapshot's versions to the driver (a no-op for drivers that
 * have none); fn must stay callable until the backend is destroyed. */
void dlc_backend_set_versions(struct dlc_backend *backend, dlc_backend_version_fn fn, void *arg);

/* Sum of the metadata calls (list and stat) made so far. */
uint64_t dlc_backend_metadata_calls(const struct dlc_backend *backend);

/* Drivers. */
int dlc_backend_posix_create(const char *root, const struct dlc_backend_config *config,
			     struct dlc_backend *backend, char **cause);
int dlc_backend_nfs_create(const char *source, const struct dlc_backend_config *config,
			   struct dlc_backend *backend, char **cause);
int dlc_backend_s3_create(const char *source, const struct dlc_backend_config *config,
			  struct dlc_backend *backend, char **cause);

/*
 * Puts a time limit of timeout_ns on backend's open, pread and close: each
 * runs on a thread of the wrapper's and the caller gets -ETIMEDOUT when the
 * time is up (backend_deadline.c).  0 or -ENOMEM (backend unchanged).
 */
int dlc_backend_deadline_wrap(struct dlc_backend *backend, uint64_t timeout_ns);

#define DLC_BACKEND_DEFAULT_TIMEOUT_NS (30ULL * 1000000000ULL)

#endif
