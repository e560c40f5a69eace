/*
 * main.c - the dlcache command: argv, subcommands, and the order in which a
 * mount is set up and torn down.  No logic of its own lives here.
 *
 *   mount.dlcache SOURCE MOUNTPOINT [-o OPTIONS] [-f] [-d]   (also mount.fuse.dlcache)
 *   dlcache mount SOURCE MOUNTPOINT [-o OPTIONS] [-f] [-d]
 *   dlcache snapshot SOURCE -o FILE [--threads N]
 *   dlcache snapshot --tar SOURCE [FILE] [--merge]       (snapshot_tar.c)
 *   dlcache pack SOURCE DEST [--chunk-size SIZE]         (pack.c)
 *   dlcache stat MOUNT [--json|--prometheus]
 *   dlcache keygen FILE                                (tier_seal.c)
 *   dlcache simulate [OPTIONS]                         (simulate.c, trace.c)
 *   dlcache warmup MOUNT [LIST|-|DIR] [--top N] ...        (warmup.c)
 *
 * A background mount forks first, before any thread or SQLite connection
 * exists; the child sets everything up, mounts, and only then tells the
 * waiting parent, which exits 0 (mounted) or 1 (the child printed why).
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <getopt.h>
#include <libgen.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlcache/backend.h"
#include "dlcache/cache.h"
#include "dlcache/cause.h"
#include "dlcache/fetch.h"
#include "dlcache/fs.h"
#include "dlcache/log.h"
#include "dlcache/options.h"
#include "dlcache/pack.h"
#include "dlcache/simulate.h"
#include "dlcache/warmup.h"
#include "dlcache/snapshot.h"
#include "dlcache/stats.h"
#include "dlcache/store.h"
#include "dlcache/tier.h"
#include "dlcache/tier_seal.h"

#define STATS_TOTALS_KEY "stats_totals"
#define SCORES_FILE "scores.bin"

static void print_cause(const char *what, char *cause, int rc)
{
	if (cause)
		fprintf(stderr, "dlcache: %s\n", cause);
	else
		fprintf(stderr, "dlcache: %s: %s\n", what, strerror(-rc));
	free(cause);
}

/*
 * Forks; the parent waits for the child's word on a pipe and exits with it.
 * Returns the write end of the pipe in the child.
 */
static int background(void)
{
	int fds[2];
	pid_t pid;
	char status = 1;

	if (pipe(fds) < 0) {
		perror("dlcache: pipe");
		exit(1);
	}
	pid = fork();
	if (pid < 0) {
		perror("dlcache: fork");
		exit(1);
	}
	if (pid > 0) {
		close(fds[1]);
		if (read(fds[0], &status, 1) != 1) {
			/* The child died before it could say: reap it for its status. */
			int wstatus;

			waitpid(pid, &wstatus, 0);
			status = 1;
		}
		exit(status ? 1 : 0);
	}
	close(fds[0]);
	setsid();
	return fds[1];
}

/* Detaches from the terminal and tells the parent the mount is ready. */
static void detach(int ready_fd, enum dlc_log_level level)
{
	char ok = 0;
	int null = open("/dev/null", O_RDWR);

	if (chdir("/") < 0)
		dlc_log(DLC_LOG_WARNING, "chdir /: %s", strerror(errno));
	dlc_log_init(level, true);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}
	(void)!write(ready_fd, &ok, 1);
	close(ready_fd);
}

/* Whether the snapshot is SOURCE/dlcache.snapshot (a packed source's own). */
static bool snapshot_in_source(const struct dlc_options *opts)
{
	size_t len = strlen(opts->source);

	return strncmp(opts->snapshot, opts->source, len) == 0 && opts->snapshot[len] == '/' &&
	       strcmp(opts->snapshot + len + 1, DLC_SNAPSHOT_PACKED_NAME) == 0;
}

/* The backend's view of the snapshot's files: S3 ETags for If-Match, and
 * sizes, against which each S3 answer is checked. */
static bool snapshot_version(void *arg, const char *path, char *buf, size_t size,
			     uint64_t *bytes)
{
	const struct dlc_snapshot *snapshot = arg;
	uint64_t ino = dlc_snapshot_resolve(snapshot, path);
	const struct dlc_node *node = dlc_snapshot_node(snapshot, ino);
	const char *version = dlc_snapshot_version(snapshot, ino);

	if (!node || ino == 0 || !S_ISREG(node->mode) || size == 0)
		return false;
	*bytes = node->size;
	buf[0] = '\0';
	if (version && strlen(version) < size)
		memcpy(buf, version, strlen(version) + 1);
	return true;
}

static int ensure_snapshot(struct dlc_options *opts, struct dlc_backend *backend,
			   struct dlc_snapshot **snapshot, char **cause)
{
	struct dlc_snapshot_build_options build = {
		.threads = opts->crawl_threads,
		.progress = isatty(STDERR_FILENO),
	};
	uint64_t entries;
	bool built = false;
	int rc;

	if (opts->refresh && dlc_snapshot_file_is_packed(opts->snapshot)) {
		dlc_cause_set(cause, "snapshot %s is a packed dataset's, and refresh would replace it with a crawl of the chunks; drop refresh, or run dlcache pack or dlcache snapshot --tar again",
			      opts->snapshot);
		return -EINVAL;
	}
	/* A packed source the daemon reaches only through its backend (NFS): its
	 * own snapshot, copied to the local disk.  (A packed directory was found
	 * by dlc_options_validate, which then leaves snapshot_default unset.) */
	if (opts->snapshot_default) {
		bool packed;

		rc = dlc_snapshot_fetch_packed(backend, opts->snapshot, &packed, cause);
		if (rc < 0)
			return rc;
		if (packed && opts->refresh) {
			dlc_cause_set(cause, "source '%s' is packed (it holds " DLC_SNAPSHOT_PACKED_NAME "), and refresh would crawl its chunks as files; drop refresh, or pack the dataset again with dlcache pack",
				      opts->source);
			return -EINVAL;
		}
		if (packed)
			goto load;
	}
	if (opts->refresh || access(opts->snapshot, F_OK) < 0) {
build:
		dlc_log(DLC_LOG_INFO, "building the snapshot of %s in %s", opts->source, opts->snapshot);
		rc = dlc_snapshot_build(backend, opts->snapshot, &build, &entries, cause);
		if (rc < 0)
			return rc;
		dlc_log(DLC_LOG_INFO, "snapshot has %llu entries", (unsigned long long)entries);
		built = true;
	}
load:
	rc = dlc_snapshot_load(opts->snapshot, snapshot, cause);
	if (rc < 0)
		return rc;
	/*
	 * A snapshot names its source: one of another source would show that
	 * source's tree.  The cache directory's own is rebuilt for the new
	 * source; one the user named is refused.  A packed directory carries its
	 * snapshot and may be copied anywhere.
	 */
	if (strcmp(dlc_snapshot_source(*snapshot), backend->source) != 0 &&
	    !snapshot_in_source(opts) && !dlc_snapshot_packed(*snapshot)) {
		if (opts->snapshot_default && !built) {
			dlc_log(DLC_LOG_INFO, "the snapshot in %s was built from %s; building one of %s",
				opts->cache_dir, dlc_snapshot_source(*snapshot), backend->source);
			dlc_snapshot_free(*snapshot);
			*snapshot = NULL;
			goto build;
		}
		dlc_cause_set(cause, "snapshot %s was built from %s, not from %s; build one of this source with dlcache snapshot %s -o FILE, or add -o refresh to rebuild it",
			      opts->snapshot, dlc_snapshot_source(*snapshot), backend->source, opts->source);
		dlc_snapshot_free(*snapshot);
		*snapshot = NULL;
		return -EINVAL;
	}
	/* Reads ask for the bytes the snapshot described (S3: If-Match). */
	dlc_backend_set_versions(backend, snapshot_version, *snapshot);
	/* From here on, the stats count what the mount itself asks of the source. */
	for (int op = 0; op < DLC_BACKEND_OP_COUNT; op++)
		atomic_store(&backend->calls[op], 0);
	atomic_store(&backend->errors, 0);
	return 0;
}

/*
 * The session's options: the kernel mount's, -d, and with io_uring=1
 * libfuse's "io_uring" with a queue depth.  A queue (one per CPU) holds a
 * request from its arrival to its reply, and a miss answers from the
 * source pool: each queue is made deep enough for every open and read that
 * may wait on the source at once (source_threads) plus the ones the FUSE
 * threads answer (threads), so that io_uring never bounds misses below
 * what /dev/fuse allows.  Its buffers (1 MiB each, libfuse's largest
 * request) are touched only as far as replies fill them.
 */
static struct fuse_session *new_session(struct dlc_options *opts, struct dlc_fs_context *context)
{
	char program[] = "dlcache", dash_o[] = "-o", dash_d[] = "-d";
	char uring[64];
	char *argv[7] = { program, dash_o, opts->kernel_opts };
	int argc = 3;
	struct fuse_args args;
	struct fuse_session *session;

	if (opts->io_uring) {
		snprintf(uring, sizeof(uring), "io_uring,io_uring_q_depth=%u",
			 opts->source_threads + opts->threads);
		argv[argc++] = dash_o;
		argv[argc++] = uring;
	}
	if (opts->debug)
		argv[argc++] = dash_d;
	args = (struct fuse_args) FUSE_ARGS_INIT(argc, argv);
	session = dlc_fs_session_new(&args, context);
	/* fuse_session_new leaves what it did not consume in a copy of argv. */
	fuse_opt_free_args(&args);
	return session;
}

static int serve(struct dlc_options *opts, struct fuse_session *session, struct dlc_fetch *fetch,
		 struct dlc_tier *tier, int ready_fd)
{
	struct fuse_loop_config *loop;
	int rc;

	if (fuse_set_signal_handlers(session) < 0)
		return -EIO;
	if (fuse_session_mount(session, opts->mountpoint) < 0) {
		fuse_remove_signal_handlers(session);
		fprintf(stderr, "dlcache: cannot mount on %s; see the message above.\n", opts->mountpoint);
		return -EIO;
	}
	dlc_log(DLC_LOG_INFO, "mounted %s on %s", opts->source, opts->mountpoint);
	if (ready_fd >= 0)
		detach(ready_fd, opts->log_level);
	/* Threads only now: a background mount has forked by this point. */
	rc = dlc_fetch_start(fetch, opts->prefetch_threads, opts->prefetch_window);
	if (rc < 0)
		dlc_log(DLC_LOG_WARNING, "no prefetch workers: %s", strerror(-rc));
	rc = dlc_tier_start(tier);
	if (rc < 0)
		dlc_log(DLC_LOG_WARNING, "no tier health thread: %s; a tier server that stops answering stays skipped",
			strerror(-rc));

	loop = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(loop, 1);
	fuse_loop_cfg_set_max_threads(loop, opts->threads);
	rc = fuse_session_loop_mt(session, loop);
	fuse_loop_cfg_destroy(loop);
	/*
	 * The kernel aborted the connection: a forced unmount, a write to
	 * /sys/fs/fuse/connections/N/abort, or a lazily unmounted mount whose
	 * last user left while requests were in flight.  The mount is over,
	 * as it is when the device reports ENODEV: not a failure to mount.
	 */
	if (rc == -ECONNABORTED) {
		dlc_log(DLC_LOG_INFO, "the kernel aborted the FUSE connection of %s", opts->mountpoint);
		rc = 0;
	}

	fuse_session_unmount(session);
	fuse_remove_signal_handlers(session);
	dlc_log(DLC_LOG_INFO, "unmounted %s", opts->mountpoint);
	return rc < 0 ? rc : 0;
}

static void save_totals(struct dlc_store *store, struct dlc_stats *stats)
{
	char *totals = dlc_stats_totals_encode(stats);

	if (totals)
		dlc_store_meta_set(store, STATS_TOTALS_KEY, totals);
	free(totals);
}

/*
 * A mount holds a descriptor per cache file being read, per open chunk of a
 * packed source, per source connection: the soft RLIMIT_NOFILE (often 1024)
 * goes up to the hard limit.  Chunk handles then budget themselves from
 * what there is (chunks.c).
 */
static void raise_descriptor_limit(void)
{
	struct rlimit limit;

	if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
		limit.rlim_cur = limit.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &limit) < 0)
			dlc_log(DLC_LOG_INFO, "cannot raise the descriptor limit: %s", strerror(errno));
	}
}

static int cmd_mount(int argc, char **argv)
{
	struct dlc_options opts;
	struct dlc_stats stats;
	struct dlc_backend *backend = NULL;
	struct dlc_snapshot *snapshot = NULL;
	struct dlc_store *store = NULL;
	struct dlc_cache *cache = NULL;
	struct dlc_fetch *fetch = NULL;
	struct dlc_tier *tier = NULL;
	struct fuse_session *session = NULL;
	struct dlc_fs_context context;
	struct dlc_budget budget;
	char *cause = NULL, *totals = NULL, *scores_file = NULL;
	uint64_t dropped = 0;
	int ready_fd = -1;
	int rc;

	rc = dlc_options_parse(argc, argv, &opts, &cause);
	if (rc == 0 && (opts.show_help || opts.show_version)) {
		if (opts.show_help)
			dlc_options_usage(argv[0], stdout);
		else
			printf("dlcache %s (libfuse %s)\n", DLC_VERSION, fuse_pkgversion());
		dlc_options_free(&opts);
		return 0;
	}
	if (rc == 0)
		rc = dlc_options_validate(&opts, &cause);
	if (rc < 0) {
		print_cause("bad options", cause, rc);
		dlc_options_free(&opts);
		return 1;
	}
	/* A background mount, like mount(8), says nothing on the terminal unless
	 * something is wrong; its info lines go to syslog once it is detached. */
	dlc_log_init(opts.foreground || opts.log_level < DLC_LOG_WARNING ? opts.log_level
									  : DLC_LOG_WARNING, false);
	if (!opts.foreground)
		ready_fd = background();

	raise_descriptor_limit();
	dlc_stats_init(&stats);
	dlc_budget_init(&budget, opts.memory_limit);
	/*
	 * File buffers of 1 MiB and more (samples, chunks) are mmap'd and go
	 * back to the system when freed.  glibc otherwise raises its mmap
	 * threshold after the first such free and serves the next ones from
	 * its heaps, which keep the freed memory: the daemon's RSS grows far
	 * past what the memory budget counts.  The buffers that are freed and
	 * taken again all the time, blocks of large files and the directory
	 * source's reads, are kept instead, in bounded sets of spares
	 * (dlc_blob_spares in fetch.h, backend_deadline.c).
	 *
	 * Below 1 MiB the heaps must keep what they are given back: with
	 * glibc's default (128 KiB) a heap hands its top to the system as
	 * soon as a freed sample leaves that much free there, and the next
	 * sample's buffer is fresh memory.  A fresh page costs about 20 us to
	 * touch on a virtual machine: a 110 KB sample's buffer took 27 page
	 * faults, and a pass of misses spent twice the CPU.  16 MiB of free
	 * top per heap is sixteen buffers of the largest heap size; what
	 * the heaps hold stays bounded by what was live at once, which the
	 * memory budget bounds.
	 */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	mallopt(M_TRIM_THRESHOLD, 16 << 20);
	rc = dlc_backend_create(opts.source, &opts.backend, &backend, &cause);
	if (rc < 0)
		goto out;
	rc = dlc_store_open(opts.cache_dir, &store, &cause);
	if (rc < 0)
		goto out;
	rc = ensure_snapshot(&opts, backend, &snapshot, &cause);
	if (rc < 0)
		goto out;
	/* A cache_dir reused for another source drops what it held. */
	rc = dlc_store_claim(store, backend->source, &dropped);
	if (rc < 0) {
		dlc_cause_set(&cause, "cannot record the source in the cache index of %s (%s); check the cache disk, or use another cache_dir",
			      opts.cache_dir, strerror(-rc));
		goto out;
	}
	if (dlc_store_meta_get(store, STATS_TOTALS_KEY, &totals) == 0)
		dlc_stats_totals_decode(&stats, totals);
	free(totals);
	if (asprintf(&scores_file, "%s/%s", opts.cache_dir, SCORES_FILE) < 0) {
		scores_file = NULL;
		rc = -ENOMEM;
		goto out;
	}
	rc = dlc_cache_open(store, snapshot, opts.policy, opts.cache_size, scores_file, &stats,
			    &cache, &cause);
	if (rc < 0)
		goto out;
	fetch = dlc_fetch_create_packed(backend, snapshot, cache, &stats, opts.cache_max_file,
					opts.chunk_fetch);
	if (!fetch) {
		rc = -ENOMEM;
		goto out;
	}
	rc = dlc_tier_create(dlc_snapshot_id(snapshot), (unsigned)(opts.tier_timeout_ns / 1000000),
			     &tier);
	if (rc == 0 && opts.tier_secret)
		rc = dlc_tier_set_key(tier, opts.tier_secret, opts.tier_secret_len);
	if (rc == 0 && opts.tier_list)
		rc = dlc_tier_set_servers(tier, opts.tier_list, &cause);
	if (rc < 0)
		goto out;
	dlc_fetch_set_tier(fetch, tier);
	dlc_fetch_set_budget(fetch, &budget);
	dlc_fetch_set_blocks(fetch, opts.block_size, opts.readahead_max, opts.kernel_readahead);
	context = (struct dlc_fs_context) {
		.snapshot = snapshot,
		.backend = backend,
		.cache = cache,
		.fetch = fetch,
		.tier = tier,
		.stats = &stats,
		.budget = &budget,
		.kernel_readahead = opts.kernel_readahead,
		.source = opts.source,
		.policy = dlc_policy_name(opts.policy),
		.cache_max_file = opts.cache_max_file,
		.source_threads = opts.source_threads,
		.source_timeout_ns = opts.backend.timeout_ns ? opts.backend.timeout_ns
						   : DLC_BACKEND_DEFAULT_TIMEOUT_NS,
		.max_background = 64,
		.passthrough = opts.passthrough,
		.io_uring = opts.io_uring,
		.mountpoint = opts.mountpoint,
		.control_uid = opts.control_uid,
		.control_gid = opts.control_gid,
	};
	session = new_session(&opts, &context);
	if (!session) {
		rc = -EINVAL;
		cause = strdup("cannot start the FUSE session; see the message above.");
		goto out;
	}
	rc = serve(&opts, session, fetch, tier, ready_fd);
	ready_fd = -1;
out:
	if (rc < 0)
		print_cause("cannot mount", cause, rc);
	if (session) {
		dlc_fs_stop_source_reads(&context);
		fuse_session_destroy(session);
	}
	dlc_fetch_free(fetch);
	dlc_tier_free(tier);
	if (cache)
		dlc_cache_save_scores(cache);
	dlc_cache_close(cache);
	free(scores_file);
	if (store) {
		save_totals(store, &stats);
		dlc_store_close(store);
	}
	dlc_snapshot_free(snapshot);
	dlc_backend_destroy(backend);
	dlc_stats_destroy(&stats);
	dlc_budget_destroy(&budget);
	dlc_options_free(&opts);
	return rc < 0 ? 1 : 0;
}

static void snapshot_usage(FILE *out)
{
	fprintf(out, "usage: dlcache snapshot SOURCE -o FILE [--threads N]\n"
		     "         [--s3-endpoint URL] [--s3-region REGION] [--s3-profile NAME]\n"
		     "       dlcache snapshot --tar SOURCE [FILE] [--merge]\n"
		     "Crawls SOURCE in parallel and writes its metadata snapshot to FILE;\n"
		     "mount with -o snapshot=FILE to use it.  An S3 source (s3://BUCKET/PREFIX)\n"
		     "takes the mount's s3_endpoint=, s3_region= and s3_profile= as the\n"
		     "--s3-* flags.  With --tar, indexes the members\n"
		     "of every *.tar file under SOURCE (each shard's under its name without\n"
		     ".tar, or all in one tree with --merge) into FILE, by default\n"
		     "SOURCE/" DLC_SNAPSHOT_PACKED_NAME ", which makes SOURCE mount as that tree.\n");
}

/* dlcache snapshot --tar SOURCE [FILE]: the index of existing shards. */
static int snapshot_tar(const char *source, const char *output, bool merge)
{
	struct dlc_snapshot_tar_options options = {
		.merge = merge,
		.progress = isatty(STDERR_FILENO),
	};
	struct dlc_snapshot_tar_result result;
	struct dlc_backend *backend = NULL;
	char *cause = NULL, *real = realpath(source, NULL), *file = NULL;
	int rc;

	if (!real) {
		fprintf(stderr, "dlcache: cannot open '%s': %s; give the directory that holds the shards.\n",
			source, strerror(errno));
		return 1;
	}
	if (!output && asprintf(&file, "%s/%s", real, DLC_SNAPSHOT_PACKED_NAME) < 0)
		file = NULL;
	rc = dlc_backend_create(real, NULL, &backend, &cause);
	if (rc == 0)
		rc = dlc_snapshot_index_tar(backend, output ? output : file, &options, &result, &cause);
	if (rc < 0)
		print_cause("cannot index the shards", cause, rc);
	else
		printf("%s: %llu entries (%llu files) from %u shards in %s\n", output ? output : file,
		       (unsigned long long)result.entries, (unsigned long long)result.files,
		       result.shards, real);
	dlc_backend_destroy(backend);
	free(file);
	free(real);
	return rc < 0 ? 1 : 0;
}

static int cmd_snapshot(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "threads", required_argument, NULL, 't' },
		{ "tar", no_argument, NULL, 'T' },
		{ "merge", no_argument, NULL, 'm' },
		{ "s3-endpoint", required_argument, NULL, 'E' },
		{ "s3-region", required_argument, NULL, 'R' },
		{ "s3-profile", required_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool tar = false, merge = false;
	struct dlc_snapshot_build_options build = {
		.threads = DLC_DEFAULT_CRAWL_THREADS,
		.progress = isatty(STDERR_FILENO),
	};
	struct dlc_backend_config config = { 0 };
	struct dlc_backend *backend = NULL;
	const char *output = NULL;
	char *cause = NULL, *end, *real_source = NULL;
	uint64_t entries = 0;
	int c, rc;

	while ((c = getopt_long(argc, argv, "o:t:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			output = optarg;
			break;
		case 't':
			errno = 0;
			build.threads = (unsigned)strtoul(optarg, &end, 10);
			if (errno || *end || build.threads < 1 || build.threads > 256) {
				fprintf(stderr, "dlcache: --threads '%s' is not a number from 1 to 256; pick one such as 16.\n", optarg);
				return 1;
			}
			break;
		case 'T':
			tar = true;
			break;
		case 'm':
			merge = true;
			break;
		case 'E':
			config.s3_endpoint = optarg;
			break;
		case 'R':
			config.s3_region = optarg;
			break;
		case 'P':
			config.s3_profile = optarg;
			break;
		case 'h':
			snapshot_usage(stdout);
			return 0;
		default:
			snapshot_usage(stderr);
			return 1;
		}
	}
	if (tar) {
		if (optind + 1 > argc || optind + 2 < argc || (output && optind + 2 == argc)) {
			fprintf(stderr, "dlcache: snapshot --tar needs one SOURCE and at most one FILE; usage: dlcache snapshot --tar SOURCE [FILE] [--merge].\n");
			return 1;
		}
		return snapshot_tar(argv[optind], output ? output : argv[optind + 1], merge);
	}
	if (merge) {
		fprintf(stderr, "dlcache: --merge goes with --tar; usage: dlcache snapshot --tar SOURCE [FILE] --merge.\n");
		return 1;
	}
	if (optind + 1 != argc || !output) {
		fprintf(stderr, "dlcache: snapshot needs one SOURCE and -o FILE; usage: dlcache snapshot SOURCE -o FILE.\n");
		return 1;
	}
	config.connections = build.threads;     /* NFS: one per crawl thread */
	/* A directory is named as the mount will name it (canonical), so the
	 * snapshot's source matches the mount's (ensure_snapshot compares them). */
	if (argv[optind][0] == '/' && (real_source = realpath(argv[optind], NULL)) != NULL)
		argv[optind] = real_source;
	rc = dlc_backend_create(argv[optind], &config, &backend, &cause);
	if (rc == 0)
		rc = dlc_snapshot_build(backend, output, &build, &entries, &cause);
	if (rc < 0) {
		print_cause("cannot build the snapshot", cause, rc);
		dlc_backend_destroy(backend);
		free(real_source);
		return 1;
	}
	printf("%s: %llu entries from %s\n", output, (unsigned long long)entries, argv[optind]);
	dlc_backend_destroy(backend);
	free(real_source);
	return 0;
}

static volatile sig_atomic_t pack_stop;

static void stop_pack(int signo)
{
	pack_stop = 1;
}

static void pack_usage(FILE *out)
{
	fprintf(out, "usage: dlcache pack SOURCE DEST [--chunk-size SIZE] [--threads N]\n"
		     "Writes the tree under SOURCE as tar chunks of about SIZE (default 256M)\n"
		     "in DEST, with the snapshot DEST/" DLC_SNAPSHOT_PACKED_NAME "; mount DEST\n"
		     "to read the original tree.\n");
}

static int cmd_pack(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "chunk-size", required_argument, NULL, 'c' },
		{ "threads", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct dlc_pack_options options = {
		.chunk_size = DLC_DEFAULT_CHUNK_SIZE,
		.crawl_threads = DLC_DEFAULT_CRAWL_THREADS,
		.progress = isatty(STDERR_FILENO),
		.stop = &pack_stop,
	};
	struct sigaction action = { .sa_handler = stop_pack };
	struct dlc_pack_result result;
	char *cause = NULL, *end;
	int c, rc;

	while ((c = getopt_long(argc, argv, "c:t:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (dlc_parse_size(optarg, &options.chunk_size) < 0 ||
			    options.chunk_size < 4096) {
				fprintf(stderr, "dlcache: --chunk-size '%s' is not a size of at least 4K; write e.g. --chunk-size 256M.\n", optarg);
				return 1;
			}
			break;
		case 't':
			errno = 0;
			options.crawl_threads = (unsigned)strtoul(optarg, &end, 10);
			if (errno || *end || options.crawl_threads < 1 || options.crawl_threads > 256) {
				fprintf(stderr, "dlcache: --threads '%s' is not a number from 1 to 256; pick one such as 16.\n", optarg);
				return 1;
			}
			break;
		case 'h':
			pack_usage(stdout);
			return 0;
		default:
			pack_usage(stderr);
			return 1;
		}
	}
	if (optind + 2 != argc) {
		fprintf(stderr, "dlcache: pack needs a SOURCE and a DEST directory; usage: dlcache pack SOURCE DEST [--chunk-size SIZE].\n");
		return 1;
	}
	sigemptyset(&action.sa_mask);
	sigaction(SIGINT, &action, NULL);
	sigaction(SIGTERM, &action, NULL);
	sigaction(SIGHUP, &action, NULL);
	rc = dlc_pack(argv[optind], argv[optind + 1], &options, &result, &cause);
	if (rc < 0) {
		print_cause("cannot pack", cause, rc);
		return rc == -EINTR ? 130 : 1;
	}
	printf("%s: %llu files (%llu bytes) in %u chunks, snapshot %s/%s\n", argv[optind + 1],
	       (unsigned long long)result.files, (unsigned long long)result.bytes, result.chunks,
	       argv[optind + 1], DLC_SNAPSHOT_PACKED_NAME);
	return 0;
}

static int cmd_stat(int argc, char **argv)
{
	bool json = argc == 3 && strcmp(argv[2], "--json") == 0;
	bool prometheus = argc == 3 && strcmp(argv[2], "--prometheus") == 0;
	char path[PATH_MAX];
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	if (argc != 2 && !json && !prometheus) {
		fprintf(stderr, "dlcache: stat needs one mountpoint; usage: dlcache stat MOUNT [--json|--prometheus].\n");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/%s", argv[1], DLC_FS_STATS_NAME);
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "dlcache: cannot read %s: %s; is a dlcache file system mounted on %s?\n",
			path, strerror(errno), argv[1]);
		return 1;
	}
	rc = (int)getdelim(&text, &len, '\0', f);
	fclose(f);
	if (rc <= 0) {
		fprintf(stderr, "dlcache: %s is empty; is a dlcache file system mounted on %s?\n", path, argv[1]);
		free(text);
		return 1;
	}
	if (json)
		fputs(text, stdout);
	else if ((prometheus ? dlc_stats_print_prometheus(text, stdout) :
			       dlc_stats_print_human(text, stdout)) < 0)
		fprintf(stderr, "dlcache: %s is not a dlcache stats file; is dlcache mounted on %s?\n", path, argv[1]);
	free(text);
	return 0;
}

/* dlcache keygen FILE: a new tier_key, never over an existing file. */
static int cmd_keygen(int argc, char **argv)
{
	char *cause = NULL;

	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "dlcache: keygen needs one FILE to create; usage: dlcache keygen FILE.\n");
		return 1;
	}
	if (dlc_tier_key_generate(argv[1], &cause) < 0) {
		print_cause("keygen", cause, -EIO);
		return 1;
	}
	printf("dlcache: wrote a %d-byte tier key to %s; copy it to every node of the job (mode 0600) and mount with tier_key=%s\n",
	       DLC_TIER_KEY_GENERATED, argv[1], argv[1]);
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: dlcache mount SOURCE MOUNTPOINT [-o OPTIONS] [-f] [-d]\n"
		"       dlcache snapshot SOURCE -o FILE [--threads N]\n"
		"       dlcache snapshot --tar SOURCE [FILE] [--merge]\n"
		"       dlcache pack SOURCE DEST [--chunk-size SIZE] [--threads N]\n"
		"       dlcache stat MOUNT [--json|--prometheus]\n"
		"       dlcache keygen FILE\n"
		"       dlcache warmup MOUNT [LIST|-|DIR] [--top N] [--threads N] [--timeout SECONDS]\n"
		"       dlcache simulate [--trace uniform|importance|FILE] [OPTIONS]\n"
		"       dlcache --version | --help\n"
		"mount.dlcache SOURCE MOUNTPOINT [-o OPTIONS] is the same as dlcache mount;\n"
		"see dlcache(1) and mount.dlcache(8).\n");
}

int main(int argc, char **argv)
{
	char *name = basename(argv[0]);

	if (strncmp(name, "mount.", 6) == 0)
		return cmd_mount(argc, argv);
	if (argc < 2) {
		usage(stderr);
		return 1;
	}
	if (strcmp(argv[1], "mount") == 0)
		return cmd_mount(argc - 1, argv + 1);
	if (strcmp(argv[1], "snapshot") == 0)
		return cmd_snapshot(argc - 1, argv + 1);
	if (strcmp(argv[1], "stat") == 0)
		return cmd_stat(argc - 1, argv + 1);
	if (strcmp(argv[1], "pack") == 0)
		return cmd_pack(argc - 1, argv + 1);
	if (strcmp(argv[1], "simulate") == 0)
		return dlc_simulate_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "keygen") == 0)
		return cmd_keygen(argc - 1, argv + 1);
	if (strcmp(argv[1], "warmup") == 0)
		return dlc_warmup_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		printf("dlcache %s (libfuse %s)\n", DLC_VERSION, fuse_pkgversion());
		return 0;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "dlcache: unknown command '%s'; use mount, snapshot, pack, stat, keygen, warmup or simulate (see dlcache --help).\n", argv[1]);
	return 1;
}
