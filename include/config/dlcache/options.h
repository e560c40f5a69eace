/*
 * options.h - the command line of mount.dlcache / `dlcache mount`:
 *
 *     mount.dlcache SOURCE MOUNTPOINT [-o OPT[,OPT...]] [-f] [-d] [-h] [-V]
 *
 * parsed with fuse_opt, checked, and turned into struct dlc_options.  Every
 * failure is one sentence, in *cause, naming the problem and the fix.  Options
 * that only mean something to mount(8) or fstab (_netdev, nofail, noauto,
 * auto, user, users, nouser, defaults, x-systemd.*, ...) are accepted and
 * dropped; kernel mount flags (ro, rw, nosuid, nodev, noexec, noatime, ...)
 * and allow_other pass to the FUSE mount.  man/mount.dlcache.8 lists them all.
 */
#ifndef DLCACHE_OPTIONS_H
#define DLCACHE_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dlcache/backend.h"
#include "dlcache/log.h"
#include "dlcache/policy.h"

#define DLC_DEFAULT_CACHE_SIZE (10ULL << 30)
#define DLC_DEFAULT_CACHE_MAX_FILE (64ULL << 20)
#define DLC_DEFAULT_CRAWL_THREADS 16
#define DLC_DEFAULT_THREADS 16
#define DLC_DEFAULT_SOURCE_THREADS 64
#define DLC_DEFAULT_MEMORY_LIMIT (1ULL << 30)
#define DLC_DEFAULT_PREFETCH_THREADS 16
#define DLC_DEFAULT_PREFETCH_WINDOW 256

/* The usage line that ends the causes of a malformed command line. */
#define DLC_MOUNT_USAGE "usage: mount.dlcache SOURCE MOUNTPOINT [-o OPTIONS]"

struct dlc_options {
	char *source;               /* as written; a directory is made absolute */
	char *mountpoint;           /* absolute */
	char *cache_dir;            /* absolute; defaulted by dlc_options_validate */
	uint64_t cache_size;        /* bytes */
	uint64_t cache_max_file;    /* larger files are cached by blocks (blocks.h) */
	uint64_t block_size;        /* their block */
	uint64_t readahead_max;     /* a sequential reader's readahead window's cap */
	uint64_t kernel_readahead;  /* the kernel's readahead window for the mount;
				     * 0: left as the kernel set it */
	uint64_t memory_limit;      /* the memory budget for file bytes (budget.h) */
	char *snapshot;             /* absolute; default CACHE_DIR/snapshot.db */
	bool snapshot_default;      /* snapshot is CACHE_DIR/snapshot.db: neither given
				     * nor the packed directory's own */
	bool refresh;               /* rebuild the snapshot even if it exists */
	bool chunk_fetch;           /* packed sources: a miss reads its whole chunk */
	bool passthrough;           /* hits may be FUSE passthrough opens (default on) */
	bool io_uring;              /* FUSE over io_uring (libfuse >= 3.18; default off) */
	enum dlc_policy_kind policy;
	unsigned crawl_threads;
	unsigned threads;           /* most FUSE worker threads */
	unsigned source_threads;    /* most opens and reads waiting on the source at once */
	unsigned prefetch_threads;  /* workers serving .control prefetch lines */
	unsigned prefetch_window;   /* most prefetched files held ahead of the reader */
	bool foreground;            /* -f */
	bool debug;                 /* -d: foreground, FUSE debug and log_level=debug */
	bool allow_other;
	char *control_user;         /* control_uid= as written, or NULL */
	char *control_group;        /* control_gid= as written, or NULL */
	int64_t control_uid;        /* resolved by dlc_options_validate; -1: the mounting user */
	int64_t control_gid;        /* resolved by dlc_options_validate; -1: none */
	bool show_help;             /* -h / --help: print usage, mount nothing */
	bool show_version;          /* -V / --version */
	enum dlc_log_level log_level;
	char *tier_servers;         /* tier_servers= as written, or NULL */
	char *tier_list;            /* its text, read and checked by dlc_options_validate */
	char *tier_key;             /* tier_key= as written, or NULL */
	unsigned char *tier_secret; /* its bytes, read and checked by dlc_options_validate */
	size_t tier_secret_len;
	uint64_t tier_timeout_ns;   /* 0: DLC_TIER_DEFAULT_TIMEOUT_MS */
	struct dlc_backend_config backend;  /* source_delay, source_bw, source_fail_every,
					     * nfs_timeout; connections from the thread counts */
	char *kernel_opts;          /* for the FUSE mount after -o, fuse_opt-escaped, e.g.
				       "default_permissions,fsname=SOURCE,subtype=dlcache,nosuid" */
};

/*
 * Parses argv (argv[0] is the program name) into opts, which it first fills
 * with defaults.  Pure: touches no file.  Returns 0, or -EINVAL with *cause.
 * With -h or -V nothing else is required and kernel_opts stays NULL.
 * On failure opts holds nothing to free (dlc_options_free is still
 * safe).  cause may be NULL; on success *cause is set to NULL.
 */
int dlc_options_parse(int argc, char **argv, struct dlc_options *opts, char **cause);

/*
 * Checks opts against the file system and fills in defaults that depend on
 * it: the source directory exists, the mountpoint is a directory, cache_dir
 * and the snapshot are not inside the mountpoint, default cache_dir
 * (/var/cache/dlcache/HASH for root, ~/.cache/dlcache/HASH otherwise, HASH
 * from the source) and snapshot.  0, or -errno with *cause.
 * Also refused: a mountpoint that is the source or holds it, a cache_dir
 * inside the source, a snapshot= that does not exist without refresh, and
 * refresh of a packed source, and io_uring=1 while the kernel's FUSE over
 * io_uring is off (dlc_options_check_io_uring).  Without snapshot=, a source holding
 * dlcache.snapshot (a packed source) is mounted with that snapshot.
 * source, mountpoint, cache_dir and snapshot come out canonical (realpath;
 * a cache_dir or snapshot that does not exist yet through its deepest
 * existing ancestor); a source not starting with '/' is left as written.
 */
int dlc_options_validate(struct dlc_options *opts, char **cause);

/* Where the kernel says whether FUSE over io_uring is on, and whether
 * io_uring itself is. */
#define DLC_FUSE_URING_PARAMETER "/sys/module/fuse/parameters/enable_uring"
#define DLC_IO_URING_DISABLED_SYSCTL "/proc/sys/kernel/io_uring_disabled"

/*
 * io_uring=1 against the kernel: parameter (DLC_FUSE_URING_PARAMETER) must
 * read Y (or 1), and sysctl (DLC_IO_URING_DISABLED_SYSCTL), when it
 * exists, must not be 2 (io_uring off for everyone) nor, for a caller
 * other than root, 1.  A missing parameter means a kernel without FUSE over
 * io_uring (Linux < 6.14, or CONFIG_FUSE_IO_URING off).  Reads only: the
 * system-wide switch is the administrator's.  0, or -EOPNOTSUPP / -errno
 * with *cause naming the fix.  dlc_options_validate calls it with the real
 * paths when opts->io_uring is set.
 */
int dlc_options_check_io_uring(const char *parameter, const char *sysctl, char **cause);

void dlc_options_free(struct dlc_options *opts);

/* Prints the usage text and every option with its default. */
void dlc_options_usage(const char *program, FILE *out);

/* "200G", "1.5T", "4096", "512k": bytes, binary multiples (K, M, G, T; an
 * optional trailing B or iB); a fraction needs a suffix and is rounded down
 * to a byte.  0 or -EINVAL (-ERANGE on overflow). */
int dlc_parse_size(const char *text, uint64_t *out);

/* "2ms", "150us", "1s", "500ns", "2m" (minutes), "1.5ms": nanoseconds, a
 * fraction rounded down; a bare number only when it is 0.  0 or -EINVAL
 * (-ERANGE on overflow). */
int dlc_parse_duration(const char *text, uint64_t *out);

#endif
