/*
 * check_options.c - the command line of mount.dlcache, as a person writes it.
 *
 * Parsing is table-driven: each good line lists the fields it must produce
 * (as "field=value" tokens compared with a rendering of struct dlc_options),
 * each bad line a word its cause must contain; every cause must be one line
 * ending with '.'.  Sizes and durations have their own tables.  Validation
 * runs against a fresh temporary tree per test:
 *
 *     TMP/src/            the dataset (a directory)
 *     TMP/src/sample.bin  a file in it
 *     TMP/mnt/            the mountpoint
 *     TMP/file            a plain file
 *     TMP/local/          a local disk
 *     TMP/mnt-alias ->    mnt (symlink)
 *     TMP/local-alias ->  local (symlink)
 */
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fuse_lowlevel.h>
#include <fuse_opt.h>
#include <xxhash.h>

#include "dlcache/options.h"

#define MAX_ARGS 16
#define BASE_KERNEL "default_permissions,fsname=/src,subtype=dlcache"

/* ---- helpers ----------------------------------------------------------- */

static int count_args(const char *const *argv)
{
	int argc = 0;

	while (argv[argc])
		argc++;
	return argc;
}

static int parse_line(const char *const *argv, struct dlc_options *opts, char **cause)
{
	return dlc_options_parse(count_args(argv), (char **)argv, opts, cause);
}

/* Every field as space-separated "name=value" tokens. */
static char *render(const struct dlc_options *o)
{
	char *text;
	int n = asprintf(&text,
			 "source=%s mountpoint=%s cache_dir=%s snapshot=%s "
			 "cache_size=%llu cache_max_file=%llu policy=%d refresh=%d "
			 "crawl_threads=%u threads=%u foreground=%d debug=%d "
			 "allow_other=%d help=%d version=%d log_level=%d "
			 "delay_ns=%llu bandwidth=%llu fail_every=%u timeout_ns=%llu "
			 "connections=%u block_size=%llu readahead_max=%llu kernel_opts=%s",
			 o->source ? o->source : "(null)",
			 o->mountpoint ? o->mountpoint : "(null)",
			 o->cache_dir ? o->cache_dir : "(null)",
			 o->snapshot ? o->snapshot : "(null)",
			 (unsigned long long)o->cache_size,
			 (unsigned long long)o->cache_max_file, (int)o->policy, o->refresh,
			 o->crawl_threads, o->threads, o->foreground, o->debug,
			 o->allow_other, o->show_help, o->show_version, (int)o->log_level,
			 (unsigned long long)o->backend.delay_ns,
			 (unsigned long long)o->backend.bandwidth, o->backend.fail_every,
			 (unsigned long long)o->backend.timeout_ns, o->backend.connections,
			 (unsigned long long)o->block_size, (unsigned long long)o->readahead_max,
			 o->kernel_opts ? o->kernel_opts : "(null)");

	ck_assert_int_ge(n, 0);
	return text;
}

/* Each token of expected must be a whole token of the rendering. */
static void assert_fields(const struct dlc_options *opts, const char *expected,
			  const char *line)
{
	char *rendered = render(opts);
	char *copy = strdup(expected);
	char *save = NULL;

	for (char *token = strtok_r(copy, " ", &save); token;
	     token = strtok_r(NULL, " ", &save)) {
		size_t len = strlen(token);
		bool found = false;

		for (const char *p = rendered; (p = strstr(p, token)); p++) {
			if ((p == rendered || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0')) {
				found = true;
				break;
			}
		}
		ck_assert_msg(found, "line [%s]: expected %s in %s", line, token, rendered);
	}
	free(copy);
	free(rendered);
}

static char *join_line(const char *const *argv)
{
	size_t len = 1;
	char *line;

	for (int i = 0; argv[i]; i++)
		len += strlen(argv[i]) + 3;
	line = calloc(1, len);
	for (int i = 0; argv[i]; i++) {
		if (i)
			strcat(line, " ");
		strcat(line, "'");
		strcat(line, argv[i]);
		strcat(line, "'");
	}
	return line;
}

/* A cause a person reads: one line, one sentence ending with '.', naming word. */
static void assert_cause(const char *cause, const char *word, const char *context)
{
	size_t len;

	ck_assert_msg(cause != NULL, "%s: no cause", context);
	len = strlen(cause);
	ck_assert_msg(len > 0 && cause[len - 1] == '.', "%s: cause does not end with '.': %s",
		      context, cause);
	ck_assert_msg(strchr(cause, '\n') == NULL, "%s: cause is not one line: %s",
		      context, cause);
	ck_assert_msg(strchr(cause, ';') != NULL, "%s: cause names no fix: %s", context, cause);
	ck_assert_msg(strstr(cause, word) != NULL, "%s: cause lacks '%s': %s",
		      context, word, cause);
}

/* ---- parse: good lines ------------------------------------------------- */

struct good_case {
	const char *argv[MAX_ARGS];
	const char *expected;
};

static const struct good_case good_cases[] = {
	{ { "mount.dlcache", "/src", "/mnt", NULL },
	  "source=/src mountpoint=/mnt cache_dir=(null) snapshot=(null) "
	  "cache_size=10737418240 cache_max_file=67108864 policy=3 refresh=0 "
	  "crawl_threads=16 threads=16 foreground=0 debug=0 allow_other=0 help=0 "
	  "version=0 log_level=2 delay_ns=0 bandwidth=0 fail_every=0 "
	  "kernel_opts=" BASE_KERNEL },
	/* every dlcache option in one -o */
	{ { "mount.dlcache", "/src", "/mnt", "-o",
	    "cache_dir=/c,cache_size=200G,cache_max_file=1M,policy=lru,snapshot=/s.db,"
	    "refresh,crawl_threads=32,threads=64,log_level=debug,source_delay=2ms,"
	    "source_bw=1G,source_fail_every=7,allow_other,fsname=imagenet", NULL },
	  "cache_dir=/c cache_size=214748364800 cache_max_file=1048576 policy=1 "
	  "snapshot=/s.db refresh=1 crawl_threads=32 threads=64 log_level=3 "
	  "delay_ns=2000000 bandwidth=1073741824 fail_every=7 allow_other=1 foreground=0 "
	  "kernel_opts=default_permissions,fsname=imagenet,subtype=dlcache,allow_other" },
	/* several -o, the -oOPTS form, options before the arguments */
	{ { "mount.dlcache", "-o", "policy=none", "-ocache_size=1T", "/src", "-o",
	    "threads=1", "/mnt", NULL },
	  "source=/src mountpoint=/mnt policy=2 cache_size=1099511627776 threads=1" },
	/* the last of a repeated option wins */
	{ { "mount.dlcache", "/src", "/mnt", "-o", "cache_size=1G,policy=lru",
	    "-o", "cache_size=2G,policy=freeze", NULL },
	  "cache_size=2147483648 policy=0" },
	/* fstab and mount(8) options are dropped */
	{ { "mount.dlcache", "/src", "/mnt", "-o",
	    "_netdev,nofail,noauto,auto,user,users,nouser,owner,group,defaults,"
	    "comment=systemd.automount,x-systemd.automount,x-systemd.idle-timeout=60,"
	    "x-gvfs-show,user=bob", NULL },
	  "kernel_opts=" BASE_KERNEL },
	/* kernel flags reach the FUSE mount, in order; atime only undoes noatime
	 * (libfuse 3.17 rejects it) */
	{ { "mount.dlcache", "/src", "/mnt", "-o",
	    "nosuid,nodev,noexec,noatime,sync,dirsync", "-o", "suid,dev,exec,atime,async",
	    NULL },
	  "kernel_opts=" BASE_KERNEL ",nosuid,nodev,noexec,sync,dirsync,"
	  "suid,dev,exec,async" },
	/* rw adds nothing (the daemon refuses changes itself); ro reaches the kernel */
	{ { "mount.dlcache", "/src", "/mnt", "-o", "rw", NULL },
	  "kernel_opts=" BASE_KERNEL },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "ro,rw,default_permissions", NULL },
	  "kernel_opts=" BASE_KERNEL ",ro" },
	/* atime flags libfuse does not take change nothing on a read-only mount */
	{ { "mount.dlcache", "/src", "/mnt", "-o",
	    "relatime,norelatime,strictatime,nostrictatime,diratime,nodiratime,nosuid", NULL },
	  "kernel_opts=" BASE_KERNEL ",nosuid" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "nodev,allow_other", NULL },
	  "allow_other=1 kernel_opts=" BASE_KERNEL ",allow_other,nodev" },
	/* -d implies -f and log_level=debug, whatever log_level says */
	{ { "mount.dlcache", "/src", "/mnt", "-d", NULL },
	  "debug=1 foreground=1 log_level=3" },
	{ { "mount.dlcache", "-d", "/src", "/mnt", "-o", "log_level=error", NULL },
	  "debug=1 foreground=1 log_level=3" },
	{ { "mount.dlcache", "/src", "/mnt", "-f", "-o", "log_level=warning", NULL },
	  "debug=0 foreground=1 log_level=1" },
	/* help and version need no arguments */
	{ { "mount.dlcache", "-h", NULL }, "help=1 version=0 source=(null)" },
	{ { "mount.dlcache", "--help", NULL }, "help=1" },
	{ { "mount.dlcache", "-V", NULL }, "version=1 help=0" },
	{ { "dlcache", "--version", NULL }, "version=1" },
	/* fsname and a source with a comma are escaped for fuse_opt */
	{ { "mount.dlcache", "/src", "/mnt", "-o", "fsname=a\\,b", NULL },
	  "kernel_opts=default_permissions,fsname=a\\,b,subtype=dlcache" },
	{ { "mount.dlcache", "/da,ta", "/mnt", NULL },
	  "source=/da,ta kernel_opts=default_permissions,fsname=/da\\,ta,subtype=dlcache" },
	/* what mount(8) adds when it runs the helper; -s tolerates unknown options */
	{ { "/sbin/mount.dlcache", "/src", "/mnt", "-s", "-n", "-v", "-o",
	    "rw,nosuid,some_future_option", NULL },
	  "kernel_opts=" BASE_KERNEL ",nosuid" },
	{ { "mount.dlcache", "/src", "/mnt", "-t", "dlcache", NULL }, "mountpoint=/mnt" },
	/* empty options, as in "ro,,nodev" */
	{ { "mount.dlcache", "/src", "/mnt", "-o", "nosuid,,nodev", "-o", "", NULL },
	  "kernel_opts=" BASE_KERNEL ",nosuid,nodev" },
	/* after --, arguments are never options */
	{ { "mount.dlcache", "-o", "policy=lru", "--", "/src", "/mnt", NULL },
	  "source=/src mountpoint=/mnt policy=1" },
	/* a source that is not a path is left for its backend */
	{ { "mount.dlcache", "host:/export/imagenet", "/mnt", NULL },
	  "source=host:/export/imagenet kernel_opts=default_permissions,"
	  "fsname=host:/export/imagenet,subtype=dlcache" },
	/* an NFS source: its timeout, and a connection for every thread that may
	 * call it at once (the source pool's, prefetchers' and the 16 readahead
	 * threads', or the crawl's), at most 64 */
	{ { "mount.dlcache", "host:/export", "/mnt", NULL },
	  "timeout_ns=0 connections=64" },
	{ { "mount.dlcache", "host:/export", "/mnt", "-o",
	    "nfs_timeout=5s,source_threads=8,prefetch_threads=8,crawl_threads=48", NULL },
	  "timeout_ns=5000000000 connections=48" },
	{ { "mount.dlcache", "host:/export", "/mnt", "-o", "source_threads=10,prefetch_threads=6", NULL },
	  "connections=32" },
	/* source_timeout= is nfs_timeout='s new name, for every kind of source */
	{ { "mount.dlcache", "/src", "/mnt", "-o", "source_timeout=90s", NULL },
	  "timeout_ns=90000000000" },
	{ { "mount.dlcache", "host:/export", "/mnt", "-o", "nfs_timeout=60m,threads=100", NULL },
	  "timeout_ns=3600000000000 connections=64" },
	{ { "mount.dlcache", "host:/export", "/mnt", "-o", "source_threads=1,prefetch_threads=1,"
	    "crawl_threads=1", NULL },
	  "connections=18" },
	/* blocks of large files: defaults, a window in whole blocks, and a
	 * default window that shrinks to a quarter of a small memory_limit */
	{ { "mount.dlcache", "/src", "/mnt", NULL }, "block_size=4194304 readahead_max=67108864" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "block_size=1M,readahead_max=3500K", NULL },
	  "block_size=1048576 readahead_max=3145728" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "memory_limit=32M,cache_max_file=8M", NULL },
	  "block_size=4194304 readahead_max=8388608" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "readahead_max=0", NULL }, "readahead_max=0" },
	/* bounds */
	{ { "mount.dlcache", "/src", "/mnt", "-o",
	    "crawl_threads=1,threads=1024,source_bw=0,source_fail_every=0,source_delay=0", NULL },
	  "crawl_threads=1 threads=1024 bandwidth=0 fail_every=0 delay_ns=0" },
	{ { "mount.dlcache", "/src", "/mnt", "-o",
	    "crawl_threads=256,cache_size=1.5T,cache_max_file=0,source_delay=1.5us", NULL },
	  "crawl_threads=256 cache_size=1649267441664 cache_max_file=0 delay_ns=1500" },
};

START_TEST(test_parse_good)
{
	const struct good_case *c = &good_cases[_i];
	struct dlc_options opts;
	char *cause = (char *)"unset";
	char *line = join_line(c->argv);
	int rc = parse_line(c->argv, &opts, &cause);

	ck_assert_msg(rc == 0, "line [%s]: rc %d, cause %s", line, rc, cause ? cause : "(null)");
	ck_assert_ptr_null(cause);
	assert_fields(&opts, c->expected, line);
	dlc_options_free(&opts);
	free(line);
}
END_TEST

/* ---- parse: bad lines -------------------------------------------------- */

struct bad_case {
	const char *argv[MAX_ARGS];
	const char *word;
};

static const struct bad_case bad_cases[] = {
	{ { "mount.dlcache", NULL }, "no source given" },
	{ { "mount.dlcache", "-o", "policy=lru", NULL }, "no source given" },
	{ { "mount.dlcache", "/src", NULL }, "no mountpoint given" },
	{ { "mount.dlcache", "/src", "/mnt", "/extra", NULL }, "unexpected argument '/extra'" },
	/* a space after a comma splits the option list */
	{ { "mount.dlcache", "/src", "/mnt", "-o", "cache_size=1G,", "policy=lru", NULL },
	  "'policy=lru'" },
	{ { "mount.dlcache", "", "/mnt", NULL }, "source is empty" },
	{ { "mount.dlcache", "/src", "", NULL }, "mountpoint is empty" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "foo", NULL },
	  "unknown mount option 'foo'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "nosuid,loop", NULL },
	  "unknown mount option 'loop'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "bogus=1", NULL },
	  "unknown mount option 'bogus=1'" },
	{ { "mount.dlcache", "/src", "/mnt", "-x", NULL }, "unknown flag '-x'" },
	{ { "mount.dlcache", "/src", "/mnt", "--foreground", NULL }, "unknown flag" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", NULL }, "-o needs" },
	{ { "mount.dlcache", "/src", "/mnt", "-t", NULL }, "-t needs" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "cache_size=abc", NULL },
	  "cache_size 'abc' is not a size" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "cache_size=", NULL },
	  "cache_size '' is not a size" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "cache_size=-1G", NULL }, "cache_size '-1G'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "cache_size=0", NULL }, "larger than 0" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "cache_size=99999999T", NULL },
	  "cache_size '99999999T' is too large" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "cache_max_file=1.5", NULL },
	  "cache_max_file '1.5'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "policy=fifo", NULL },
	  "policy 'fifo' is unknown" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "policy=", NULL }, "policy ''" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "log_level=loud", NULL },
	  "log_level 'loud'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "crawl_threads=0", NULL }, "crawl_threads '0'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "prefetch_threads=0", NULL }, "prefetch_threads '0'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "prefetch_window=many", NULL }, "prefetch_window 'many'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "chunk_fetch=2", NULL }, "chunk_fetch '2' is neither 0 nor 1" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "chunk_fetch=yes", NULL }, "chunk_fetch 'yes'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "chunk_fetch", NULL }, "needs a value" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "passthrough=2", NULL }, "passthrough '2' is neither 0 nor 1" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "io_uring=on", NULL }, "io_uring 'on' is neither 0 nor 1" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "io_uring=2", NULL }, "io_uring '2' is neither 0 nor 1" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "io_uring=", NULL }, "io_uring ''" },
#if FUSE_MAJOR_VERSION == 3 && FUSE_MINOR_VERSION < 18
	/* FUSE over io_uring needs libfuse 3.18 */
	{ { "mount.dlcache", "/src", "/mnt", "-o", "io_uring=1", NULL }, "rebuild with tests/build.sh" },
#endif
	{ { "mount.dlcache", "/src", "/mnt", "-o", "crawl_threads=257", NULL },
	  "from 1 to 256" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "crawl_threads=four", NULL },
	  "crawl_threads 'four'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "threads=0", NULL }, "threads '0'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "source_threads=0", NULL }, "source_threads '0'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "memory_limit=8M", NULL },
	  "memory_limit '8M' is below 16M" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "cache_max_file=300M", NULL },
	  "cache_max_file (314572800 bytes) is more than a quarter of memory_limit (1073741824 bytes)" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "memory_limit=64M,cache_max_file=32M", NULL },
	  "lower cache_max_file= or raise memory_limit=" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "block_size=5000", NULL },
	  "block_size '5000' must be a multiple of 4K between 64K and 256M" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "block_size=32K", NULL }, "between 64K and 256M" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "memory_limit=64M,cache_max_file=1M,readahead_max=32M", NULL },
	  "lower them or raise memory_limit=" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "source_threads=1025", NULL }, "from 1 to 1024" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "source_timeout=500ms", NULL },
	  "source_timeout '500ms' is outside 1s to 60m" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "source_timeout=2", NULL },
	  "source_timeout '2' is not a duration" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "threads=1025", NULL }, "from 1 to 1024" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "threads=-4", NULL }, "threads '-4'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "threads=99999999999999999999", NULL },
	  "threads '99999999999999999999'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "source_delay=2", NULL },
	  "source_delay '2' is not a duration" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "source_delay=2h", NULL }, "source_delay '2h'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "source_bw=fast", NULL }, "source_bw 'fast'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "source_fail_every=-1", NULL },
	  "source_fail_every '-1'" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "source_fail_every=5000000000", NULL },
	  "source_fail_every" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "nfs_timeout=500ms", NULL },
	  "nfs_timeout '500ms' is outside 1s to 60m" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "nfs_timeout=61m", NULL }, "outside 1s to 60m" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "nfs_timeout=30", NULL },
	  "nfs_timeout '30' is not a duration" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "cache_dir=", NULL }, "cache_dir=" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "snapshot=", NULL }, "snapshot=" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "fsname=", NULL }, "fsname=" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "refresh=yes", NULL },
	  "'refresh' takes no value" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "ro=1", NULL }, "'ro' takes no value" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "cache_size", NULL },
	  "'cache_size' needs a value" },
	{ { "mount.dlcache", "/src", "/mnt", "-o", "policy", NULL }, "'policy' needs a value" },
	/* a newline in what the user wrote stays out of the one-line cause */
	{ { "mount.dlcache", "/src", "/mnt", "-o", "foo\nbar", NULL }, "unknown mount option" },
	/* -s tolerates unknown names, not bad values */
	{ { "mount.dlcache", "/src", "/mnt", "-s", "-o", "cache_size=lots", NULL },
	  "cache_size 'lots'" },
	/* -h still reports a broken line */
	{ { "mount.dlcache", "-h", "-o", "policy=fifo", NULL }, "policy 'fifo'" },
};

START_TEST(test_parse_bad)
{
	const struct bad_case *c = &bad_cases[_i];
	struct dlc_options opts;
	char *cause = NULL;
	char *line = join_line(c->argv);
	int rc = parse_line(c->argv, &opts, &cause);

	ck_assert_msg(rc == -EINVAL, "line [%s]: rc %d, expected -EINVAL", line, rc);
	assert_cause(cause, c->word, line);
	/* nothing is left to free, and freeing again is harmless */
	ck_assert_ptr_null(opts.source);
	ck_assert_ptr_null(opts.kernel_opts);
	dlc_options_free(&opts);
	free(cause);
	free(line);
}
END_TEST

START_TEST(test_parse_without_cause)
{
	const char *argv[] = { "mount.dlcache", "-o", "policy=fifo", NULL };
	struct dlc_options opts;

	ck_assert_int_eq(parse_line(argv, &opts, NULL), -EINVAL);
	dlc_options_free(&opts);
}
END_TEST

/* What the daemon does with kernel_opts: libfuse 3.14 must accept every flag. */
START_TEST(test_kernel_opts_accepted_by_libfuse)
{
	const char *argv[] = { "mount.dlcache", "/data/a,b\\c", "/mnt", "-o",
			       "nosuid,suid,nodev,dev,noexec,exec,noatime,atime,sync,async,"
			       "dirsync,relatime,strictatime,diratime,nodiratime,allow_other,rw",
			       NULL };
	struct fuse_lowlevel_ops ops = { 0 };
	struct dlc_options opts;
	struct fuse_session *session;
	char *cause = NULL;

	ck_assert_int_eq(parse_line(argv, &opts, &cause), 0);
	{
		char *fuse_argv[] = { (char *)"dlcache", (char *)"-o", opts.kernel_opts, NULL };
		struct fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);

		session = fuse_session_new(&args, &ops, sizeof(ops), NULL);
		ck_assert_msg(session != NULL, "libfuse rejected %s", opts.kernel_opts);
		fuse_session_destroy(session);
		fuse_opt_free_args(&args);
	}
	dlc_options_free(&opts);
}
END_TEST

/* fuse_opt reads fsname back exactly as written, commas and backslashes too. */
struct fsname_probe {
	char *fsname;
	char *subtype;
};

START_TEST(test_fsname_escaping_round_trip)
{
	static const char *const sources[] = { "/data/a,b", "/data/back\\slash", "/plain",
					       "host:/export/x,y\\,z" };
	static const struct fuse_opt probe_template[] = {
		{ "fsname=%s", offsetof(struct fsname_probe, fsname), 0 },
		{ "subtype=%s", offsetof(struct fsname_probe, subtype), 0 },
		FUSE_OPT_END
	};

	for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++) {
		const char *argv[] = { "mount.dlcache", sources[i], "/mnt", NULL };
		struct fsname_probe probe = { 0 };
		struct dlc_options opts;
		char *cause = NULL;

		ck_assert_int_eq(parse_line(argv, &opts, &cause), 0);
		{
			char *fuse_argv[] = { (char *)"x", (char *)"-o", opts.kernel_opts, NULL };
			struct fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);

			ck_assert_int_eq(fuse_opt_parse(&args, &probe, probe_template, NULL), 0);
			fuse_opt_free_args(&args);
		}
		ck_assert_str_eq(probe.fsname, sources[i]);
		ck_assert_str_eq(probe.subtype, "dlcache");
		free(probe.fsname);
		free(probe.subtype);
		dlc_options_free(&opts);
	}
}
END_TEST

START_TEST(test_prefetch_options)
{
	char *argv[] = { (char *)"mount.dlcache", (char *)"/src", (char *)"/mnt", (char *)"-o",
			 (char *)"prefetch_threads=4,prefetch_window=32", NULL };
	struct dlc_options opts;
	char *cause = NULL;

	ck_assert_int_eq(dlc_options_parse(5, argv, &opts, &cause), 0);
	ck_assert_uint_eq(opts.prefetch_threads, 4);
	ck_assert_uint_eq(opts.prefetch_window, 32);
	dlc_options_free(&opts);
	argv[4] = (char *)"cache_size=1G";
	ck_assert_int_eq(dlc_options_parse(5, argv, &opts, &cause), 0);
	ck_assert_uint_eq(opts.prefetch_threads, DLC_DEFAULT_PREFETCH_THREADS);
	ck_assert_uint_eq(opts.prefetch_window, DLC_DEFAULT_PREFETCH_WINDOW);
	ck_assert(!opts.chunk_fetch);
	dlc_options_free(&opts);
	argv[4] = (char *)"chunk_fetch=1";
	ck_assert_int_eq(dlc_options_parse(5, argv, &opts, &cause), 0);
	ck_assert(opts.chunk_fetch);
	dlc_options_free(&opts);
	argv[4] = (char *)"chunk_fetch=1,chunk_fetch=0";
	ck_assert_int_eq(dlc_options_parse(5, argv, &opts, &cause), 0);
	ck_assert(!opts.chunk_fetch);
	ck_assert(opts.passthrough);     /* on by default */
	dlc_options_free(&opts);
	ck_assert(!opts.io_uring);       /* off by default */
	dlc_options_free(&opts);
	argv[4] = (char *)"passthrough=0,io_uring=0";
	ck_assert_int_eq(dlc_options_parse(5, argv, &opts, &cause), 0);
	ck_assert(!opts.passthrough);
	ck_assert(!opts.io_uring);
	dlc_options_free(&opts);
#if FUSE_MAJOR_VERSION > 3 || FUSE_MINOR_VERSION >= 18
	argv[4] = (char *)"io_uring=1";
	ck_assert_int_eq(dlc_options_parse(5, argv, &opts, &cause), 0);
	ck_assert(opts.io_uring);
	/* libfuse's own session option, not a kernel mount option */
	ck_assert_ptr_null(strstr(opts.kernel_opts, "io_uring"));
	dlc_options_free(&opts);
#endif
}
END_TEST

START_TEST(test_usage_lists_every_option)
{
	static const char *const names[] = {
		"cache_dir=", "cache_size=", "cache_max_file=", "policy=", "snapshot=",
		"refresh", "crawl_threads=", "threads=", "prefetch_threads=", "prefetch_window=",
		"source_threads=", "source_timeout=", "nfs_timeout=", "memory_limit=",
		"log_level=", "source_delay=",
		"source_bw=", "source_fail_every=", "allow_other", "fsname=", "control_uid=",
		"control_gid=", "chunk_fetch=", "passthrough=", "io_uring=", "block_size=", "readahead_max=",
		"dlcache.snapshot", "nosuid",
		"nodev", "noexec", "noatime", "dirsync", "_netdev", "x-*", "-f", "-d",
		"--help", "--version", "10G", "64M", "freeze",
	};
	char *text = NULL;
	size_t size = 0;
	FILE *out = open_memstream(&text, &size);

	dlc_options_usage("mount.dlcache", out);
	fclose(out);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		ck_assert_msg(strstr(text, names[i]), "usage lacks %s", names[i]);
	free(text);
}
END_TEST

START_TEST(test_free_zeroed)
{
	struct dlc_options opts;

	memset(&opts, 0, sizeof(opts));
	dlc_options_free(&opts);
	dlc_options_free(&opts);
	dlc_options_free(NULL);
}
END_TEST

/* Found by fuzz_options: a second free of parsed options freed control_uid= again. */
START_TEST(test_free_twice_after_parse)
{
	const char *argv[] = { "mount.dlcache", "/src", "/mnt", "-o",
			       "cache_dir=/c,snapshot=/s,control_uid=trainer,control_gid=ml", NULL };
	struct dlc_options opts;

	ck_assert_int_eq(parse_line(argv, &opts, NULL), 0);
	ck_assert_str_eq(opts.control_user, "trainer");
	dlc_options_free(&opts);
	ck_assert_ptr_null(opts.control_user);
	ck_assert_ptr_null(opts.control_group);
	dlc_options_free(&opts);
}
END_TEST

/* ---- sizes and durations ----------------------------------------------- */

struct number_case {
	const char *text;
	int rc;
	uint64_t value;
};

static const struct number_case size_cases[] = {
	{ "0", 0, 0 },
	{ "4096", 0, 4096 },
	{ "4096B", 0, 4096 },
	{ "4096b", 0, 4096 },
	{ "512k", 0, 512ULL << 10 },
	{ "512K", 0, 512ULL << 10 },
	{ "1M", 0, 1ULL << 20 },
	{ "1MB", 0, 1ULL << 20 },
	{ "1MiB", 0, 1ULL << 20 },
	{ "1mib", 0, 1ULL << 20 },
	{ "200G", 0, 200ULL << 30 },
	{ "200g", 0, 200ULL << 30 },
	{ "1.5T", 0, 3ULL << 39 },
	{ "0.5K", 0, 512 },
	{ "1.1G", 0, 1181116006ULL },            /* rounded down to a byte */
	{ "0.0000000000000000000001T", 0, 0 },   /* digits past the 18th do not matter */
	{ "007k", 0, 7168 },
	{ "16777215T", 0, 16777215ULL << 40 },
	{ "18446744073709551615", 0, UINT64_MAX },
	{ "", -EINVAL, 0 },
	{ "abc", -EINVAL, 0 },
	{ "-1", -EINVAL, 0 },
	{ "+1", -EINVAL, 0 },
	{ " 1", -EINVAL, 0 },
	{ "1 ", -EINVAL, 0 },
	{ "1 G", -EINVAL, 0 },
	{ "1.5", -EINVAL, 0 },
	{ "1.", -EINVAL, 0 },
	{ ".5K", -EINVAL, 0 },
	{ "1.K", -EINVAL, 0 },
	{ "1KK", -EINVAL, 0 },
	{ "1iB", -EINVAL, 0 },
	{ "1Ki", -EINVAL, 0 },
	{ "1KBB", -EINVAL, 0 },
	{ "1P", -EINVAL, 0 },
	{ "1X", -EINVAL, 0 },
	{ "1e3", -EINVAL, 0 },
	{ "0x10", -EINVAL, 0 },
	{ "1,5G", -EINVAL, 0 },
	{ "K", -EINVAL, 0 },
	{ "99999999999999999999999x", -EINVAL, 0 },
	{ "18446744073709551616", -ERANGE, 0 },
	{ "99999999999999999999999", -ERANGE, 0 },
	{ "16777216T", -ERANGE, 0 },
	{ "17179869184G", -ERANGE, 0 },
};

START_TEST(test_parse_size)
{
	const struct number_case *c = &size_cases[_i];
	uint64_t value = 12345;
	int rc = dlc_parse_size(c->text, &value);

	ck_assert_msg(rc == c->rc, "size '%s': rc %d, expected %d", c->text, rc, c->rc);
	if (c->rc == 0)
		ck_assert_msg(value == c->value, "size '%s': %llu, expected %llu", c->text,
			      (unsigned long long)value, (unsigned long long)c->value);
	else
		ck_assert_msg(value == 12345, "size '%s': output written on failure", c->text);
}
END_TEST

static const struct number_case duration_cases[] = {
	{ "0", 0, 0 },
	{ "0.0", 0, 0 },
	{ "0ms", 0, 0 },
	{ "500ns", 0, 500 },
	{ "150us", 0, 150000 },
	{ "2ms", 0, 2000000 },
	{ "1.5ms", 0, 1500000 },
	{ "1s", 0, 1000000000 },
	{ "0.25s", 0, 250000000 },
	{ "2m", 0, 120000000000ULL },
	{ "1.0000000001ns", 0, 1 },
	{ "", -EINVAL, 0 },
	{ "2", -EINVAL, 0 },
	{ "1.5", -EINVAL, 0 },
	{ "ms", -EINVAL, 0 },
	{ "2 ms", -EINVAL, 0 },
	{ "2MS", -EINVAL, 0 },
	{ "2h", -EINVAL, 0 },
	{ "2msx", -EINVAL, 0 },
	{ "-1ms", -EINVAL, 0 },
	{ "1.ms", -EINVAL, 0 },
	{ "abc", -EINVAL, 0 },
	{ "99999999999999999999", -EINVAL, 0 },
	{ "99999999999999999999ns", -ERANGE, 0 },
	{ "400000000m", -ERANGE, 0 },
};

START_TEST(test_parse_duration)
{
	const struct number_case *c = &duration_cases[_i];
	uint64_t value = 12345;
	int rc = dlc_parse_duration(c->text, &value);

	ck_assert_msg(rc == c->rc, "duration '%s': rc %d, expected %d", c->text, rc, c->rc);
	if (c->rc == 0)
		ck_assert_msg(value == c->value, "duration '%s': %llu, expected %llu", c->text,
			      (unsigned long long)value, (unsigned long long)c->value);
	else
		ck_assert_msg(value == 12345, "duration '%s': output written on failure", c->text);
}
END_TEST

/* ---- validate ---------------------------------------------------------- */

static char *tmp_root;      /* realpath of the per-test directory */
static char *saved_cwd;

static char *tmp_path(const char *name)
{
	char *path;

	ck_assert_int_ge(asprintf(&path, "%s/%s", tmp_root, name), 0);
	return path;
}

static void make_dir(const char *name)
{
	char *path = tmp_path(name);

	ck_assert_int_eq(mkdir(path, 0755), 0);
	free(path);
}

static void make_file(const char *name)
{
	char *path = tmp_path(name);
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs("bytes\n", f);
	fclose(f);
	free(path);
}

static void make_link(const char *name, const char *target)
{
	char *path = tmp_path(name);

	ck_assert_int_eq(symlink(target, path), 0);
	free(path);
}

static void tree_setup(void)
{
	char template[] = "/tmp/check_options.XXXXXX";

	ck_assert_ptr_nonnull(mkdtemp(template));
	tmp_root = realpath(template, NULL);
	ck_assert_ptr_nonnull(tmp_root);
	saved_cwd = getcwd(NULL, 0);
	make_dir("src");
	make_file("src/sample.bin");
	make_dir("mnt");
	make_file("file");
	make_dir("local");
	make_link("mnt-alias", "mnt");
	make_link("local-alias", "local");
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void tree_teardown(void)
{
	if (saved_cwd) {
		(void)!chdir(saved_cwd);
		free(saved_cwd);
		saved_cwd = NULL;
	}
	nftw(tmp_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(tmp_root);
	tmp_root = NULL;
}

/*
 * Parses "SOURCE MOUNTPOINT [-o OPTS]" where each word may start with "T/",
 * which stands for the temporary tree, then validates.  Returns validate's rc.
 */
static int parse_and_validate(const char *source, const char *mountpoint,
			      const char *options, struct dlc_options *opts, char **cause)
{
	char *expanded[3] = { NULL, NULL, NULL };
	const char *words[3] = { source, mountpoint, options };
	const char *argv[8];
	int argc = 0;
	int rc;

	for (int i = 0; i < 3; i++) {
		const char *w = words[i];
		char *out = NULL;

		if (!w)
			continue;
		/* replace every "T/" that starts a path with the tree's root */
		for (const char *p = w; *p; p++) {
			bool starts = (p == w || p[-1] == '=' || p[-1] == ',') &&
				      p[0] == 'T' && p[1] == '/';
			char *longer;

			if (starts) {
				ck_assert_int_ge(asprintf(&longer, "%s%s", out ? out : "", tmp_root), 0);
			} else {
				ck_assert_int_ge(asprintf(&longer, "%s%c", out ? out : "", *p), 0);
			}
			free(out);
			out = longer;
		}
		expanded[i] = out ? out : strdup("");
	}
	argv[argc++] = "mount.dlcache";
	argv[argc++] = expanded[0];
	argv[argc++] = expanded[1];
	if (expanded[2]) {
		argv[argc++] = "-o";
		argv[argc++] = expanded[2];
	}
	argv[argc] = NULL;

	rc = parse_line(argv, opts, cause);
	ck_assert_msg(rc == 0, "parse failed: %s", *cause ? *cause : "(null)");
	rc = dlc_options_validate(opts, cause);
	for (int i = 0; i < 3; i++)
		free(expanded[i]);
	return rc;
}

static void expect_valid(const char *source, const char *mountpoint, const char *options,
			 struct dlc_options *opts)
{
	char *cause = NULL;
	int rc = parse_and_validate(source, mountpoint, options, opts, &cause);

	ck_assert_msg(rc == 0, "validate failed (%d): %s", rc, cause ? cause : "(null)");
	ck_assert_ptr_null(cause);
}

static void expect_invalid(const char *source, const char *mountpoint, const char *options,
			   const char *word)
{
	struct dlc_options opts;
	char *cause = NULL;
	int rc = parse_and_validate(source, mountpoint, options, &opts, &cause);

	ck_assert_msg(rc < 0, "validate accepted %s %s %s", source, mountpoint,
		      options ? options : "");
	assert_cause(cause, word, mountpoint);
	free(cause);
	dlc_options_free(&opts);
}

static char *expected_default_cache_dir(const char *source)
{
	char *dir;
	unsigned long long hash = XXH3_64bits(source, strlen(source));

	if (geteuid() == 0)
		ck_assert_int_ge(asprintf(&dir, "/var/cache/dlcache/%016llx", hash), 0);
	else if (getenv("XDG_CACHE_HOME") && getenv("XDG_CACHE_HOME")[0] == '/')
		ck_assert_int_ge(asprintf(&dir, "%s/dlcache/%016llx",
					  getenv("XDG_CACHE_HOME"), hash), 0);
	else
		ck_assert_int_ge(asprintf(&dir, "%s/.cache/dlcache/%016llx",
					  getenv("HOME"), hash), 0);
	return dir;
}

START_TEST(test_validate_defaults)
{
	struct dlc_options opts;
	char *source = tmp_path("src");
	char *mountpoint = tmp_path("mnt");
	char *cache_dir = expected_default_cache_dir(source);
	char *snapshot;

	/* trailing slashes and a symlinked mountpoint come out canonical */
	expect_valid("T/src/", "T/mnt-alias", NULL, &opts);
	ck_assert_str_eq(opts.source, source);
	ck_assert_str_eq(opts.mountpoint, mountpoint);
	ck_assert_str_eq(opts.cache_dir, cache_dir);
	ck_assert_int_ge(asprintf(&snapshot, "%s/snapshot.db", cache_dir), 0);
	ck_assert_str_eq(opts.snapshot, snapshot);
	/* fsname keeps the source as written */
	ck_assert_ptr_nonnull(strstr(opts.kernel_opts, "/src/,subtype=dlcache"));
	dlc_options_free(&opts);
	free(snapshot);
	free(cache_dir);
	free(mountpoint);
	free(source);
}
END_TEST

START_TEST(test_validate_root_cache_dir)
{
	struct dlc_options opts;

	if (geteuid() != 0)
		return;   /* the tests run as root in CI; elsewhere ~/.cache is checked above */
	expect_valid("T/src", "T/mnt", NULL, &opts);
	ck_assert_msg(strncmp(opts.cache_dir, "/var/cache/dlcache/", 19) == 0, "%s",
		      opts.cache_dir);
	ck_assert_uint_eq(strlen(opts.cache_dir), 19 + 16);
	ck_assert_uint_eq(strspn(opts.cache_dir + 19, "0123456789abcdef"), 16);
	dlc_options_free(&opts);
}
END_TEST

START_TEST(test_validate_non_path_source)
{
	struct dlc_options opts;
	char *cache_dir = expected_default_cache_dir("host:/export/imagenet");

	expect_valid("host:/export/imagenet", "T/mnt", NULL, &opts);
	ck_assert_str_eq(opts.source, "host:/export/imagenet");
	ck_assert_str_eq(opts.cache_dir, cache_dir);
	dlc_options_free(&opts);
	free(cache_dir);
}
END_TEST

START_TEST(test_validate_relative_paths)
{
	struct dlc_options opts;
	char *mountpoint = tmp_path("mnt");
	char *cache_dir = tmp_path("local/c");
	char *snapshot = tmp_path("local/snap.db");

	ck_assert_int_eq(chdir(tmp_root), 0);
	expect_valid("T/src", "mnt", "cache_dir=local/./c,snapshot=local/x/../snap.db,refresh",
		     &opts);
	ck_assert_str_eq(opts.mountpoint, mountpoint);
	ck_assert_str_eq(opts.cache_dir, cache_dir);
	ck_assert_str_eq(opts.snapshot, snapshot);
	dlc_options_free(&opts);
	free(snapshot);
	free(cache_dir);
	free(mountpoint);
}
END_TEST

START_TEST(test_validate_cache_dir_not_yet_made)
{
	struct dlc_options opts;
	char *cache_dir = tmp_path("local/a/b/c");
	char *snapshot;

	/* the deepest existing ancestor is resolved through its symlink */
	expect_valid("T/src", "T/mnt", "cache_dir=T/local-alias/a/b//c/", &opts);
	ck_assert_str_eq(opts.cache_dir, cache_dir);
	ck_assert_int_ge(asprintf(&snapshot, "%s/snapshot.db", cache_dir), 0);
	ck_assert_str_eq(opts.snapshot, snapshot);
	dlc_options_free(&opts);
	free(snapshot);
	free(cache_dir);
}
END_TEST

START_TEST(test_validate_missing_mountpoint)
{
	expect_invalid("T/src", "T/nowhere", NULL, "does not exist");
	expect_invalid("T/src", "T/nowhere", NULL, "mkdir -p");
	expect_invalid("T/src", "T/nowhere/deeper", NULL, "mountpoint");
}
END_TEST

START_TEST(test_validate_control_owner)
{
	struct dlc_options opts;

	expect_valid("T/src", "T/mnt", "control_uid=root,control_gid=0", &opts);
	ck_assert_int_eq(opts.control_uid, 0);
	ck_assert_int_eq(opts.control_gid, 0);
	dlc_options_free(&opts);
	expect_valid("T/src", "T/mnt", "control_uid=65534", &opts);
	ck_assert_int_eq(opts.control_uid, 65534);
	ck_assert_int_eq(opts.control_gid, -1);
	dlc_options_free(&opts);
	expect_valid("T/src", "T/mnt", NULL, &opts);
	ck_assert_int_eq(opts.control_uid, -1);
	dlc_options_free(&opts);
	expect_invalid("T/src", "T/mnt", "control_uid=no-such-user-here", "is not a user");
	expect_invalid("T/src", "T/mnt", "control_gid=no-such-group-here", "is not a group");
	expect_invalid("T/src", "T/mnt", "control_uid=-5", "is not a user");
}
END_TEST

START_TEST(test_validate_mountpoint_is_file)
{
	expect_invalid("T/src", "T/file", NULL, "is not a directory");
	expect_invalid("T/src", "T/file/x", NULL, "is not a directory");
}
END_TEST

START_TEST(test_validate_bad_source)
{
	expect_invalid("T/gone", "T/mnt", NULL, "source");
	expect_invalid("T/gone", "T/mnt", NULL, "does not exist");
	expect_invalid("T/file", "T/mnt", NULL, "is not a directory");
	expect_invalid("T/src", "T/src", NULL, "is the source itself");
	expect_invalid("T/mnt/inner", "T/mnt", NULL, "source");
}
END_TEST

START_TEST(test_validate_source_inside_mountpoint)
{
	make_dir("mnt/inner");
	expect_invalid("T/mnt/inner", "T/mnt", NULL, "inside the mountpoint");
}
END_TEST

START_TEST(test_validate_cache_dir_inside_mountpoint)
{
	expect_invalid("T/src", "T/mnt", "cache_dir=T/mnt/c", "inside the mountpoint");
	expect_invalid("T/src", "T/mnt", "cache_dir=T/mnt", "inside the mountpoint");
	expect_invalid("T/src", "T/mnt", "cache_dir=T/mnt-alias/c/d", "inside the mountpoint");
	expect_invalid("T/src", "T/mnt", "cache_dir=T/local/../mnt/c", "outside the mount");
}
END_TEST

START_TEST(test_validate_cache_dir_inside_source)
{
	expect_invalid("T/src", "T/mnt", "cache_dir=T/src/.cache", "inside the source");
	expect_invalid("T/src", "T/mnt", "cache_dir=T/src", "inside the source");
}
END_TEST

START_TEST(test_validate_cache_dir_is_file)
{
	expect_invalid("T/src", "T/mnt", "cache_dir=T/file", "not a directory");
	expect_invalid("T/src", "T/mnt", "cache_dir=T/file/c", "cache_dir");
}
END_TEST

START_TEST(test_validate_snapshot)
{
	struct dlc_options opts;
	char *snapshot = tmp_path("local/snap.db");

	/* a given snapshot must exist, unless refresh builds it */
	expect_invalid("T/src", "T/mnt", "snapshot=T/local/snap.db", "dlcache snapshot");
	expect_invalid("T/src", "T/mnt", "snapshot=T/local/snap.db", "refresh");
	expect_valid("T/src", "T/mnt", "snapshot=T/local/snap.db,refresh", &opts);
	ck_assert_str_eq(opts.snapshot, snapshot);
	dlc_options_free(&opts);

	make_file("local/snap.db");
	expect_valid("T/src", "T/mnt", "snapshot=T/local-alias/snap.db", &opts);
	ck_assert_str_eq(opts.snapshot, snapshot);
	dlc_options_free(&opts);

	expect_invalid("T/src", "T/mnt", "snapshot=T/mnt/snap.db,refresh", "inside the mountpoint");
	expect_invalid("T/src", "T/mnt", "snapshot=T/local", "is a directory");
	free(snapshot);
}
END_TEST

/* A source holding dlcache.snapshot is packed: that is its snapshot. */
START_TEST(test_validate_packed_source)
{
	struct dlc_options opts;
	char *packed = tmp_path("src/dlcache.snapshot");
	char *given = tmp_path("local/snap.db");

	make_file("src/dlcache.snapshot");
	expect_valid("T/src", "T/mnt", NULL, &opts);
	ck_assert_str_eq(opts.snapshot, packed);
	dlc_options_free(&opts);
	expect_invalid("T/src", "T/mnt", "refresh", "is packed");
	/* snapshot= still wins. */
	make_file("local/snap.db");
	expect_valid("T/src", "T/mnt", "snapshot=T/local/snap.db", &opts);
	ck_assert_str_eq(opts.snapshot, given);
	dlc_options_free(&opts);
	free(packed);
	free(given);
}
END_TEST

/* Writes text to TMP/name (no newline when text is ""). */
static char *kernel_file(const char *name, const char *text)
{
	char *path = NULL;
	FILE *f;

	ck_assert_int_ge(asprintf(&path, "%s/%s", tmp_root, name), 0);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/* io_uring=1 against the kernel's switches, as files read the same way. */
START_TEST(test_check_io_uring)
{
	char *on = kernel_file("enable_uring_on", "Y\n");
	char *one = kernel_file("enable_uring_one", "1\n");
	char *off = kernel_file("enable_uring_off", "N\n");
	char *empty = kernel_file("enable_uring_empty", "");
	char *allowed = kernel_file("io_uring_disabled_0", "0\n");
	char *disabled = kernel_file("io_uring_disabled_2", "2\n");
	char *missing = NULL, *cause = NULL;

	ck_assert_int_ge(asprintf(&missing, "%s/no/enable_uring", tmp_root), 0);
	ck_assert_int_eq(dlc_options_check_io_uring(on, allowed, &cause), 0);
	ck_assert_ptr_null(cause);
	ck_assert_int_eq(dlc_options_check_io_uring(one, allowed, &cause), 0);
	/* no io_uring_disabled sysctl (kernels before 6.6): nothing to refuse */
	ck_assert_int_eq(dlc_options_check_io_uring(on, missing, &cause), 0);

	ck_assert_int_eq(dlc_options_check_io_uring(off, allowed, &cause), -EOPNOTSUPP);
	assert_cause(cause, "switched off", "enable_uring N");
	ck_assert_ptr_nonnull(strstr(cause, "echo Y > "));
	ck_assert_ptr_nonnull(strstr(cause, off));
	free(cause);
	cause = NULL;
	ck_assert_int_eq(dlc_options_check_io_uring(empty, allowed, &cause), -ENODATA);
	assert_cause(cause, "cannot read", "enable_uring empty");
	free(cause);
	cause = NULL;
	ck_assert_int_eq(dlc_options_check_io_uring(missing, allowed, &cause), -EOPNOTSUPP);
	assert_cause(cause, "CONFIG_FUSE_IO_URING", "no enable_uring");
	free(cause);
	cause = NULL;
	ck_assert_int_eq(dlc_options_check_io_uring(on, disabled, &cause), -EOPNOTSUPP);
	assert_cause(cause, "every process", "io_uring_disabled 2");
	ck_assert_ptr_nonnull(strstr(cause, "echo 0 > "));
	free(cause);
	free(on);
	free(one);
	free(off);
	free(empty);
	free(allowed);
	free(disabled);
	free(missing);
}
END_TEST

START_TEST(test_validate_needs_arguments)
{
	struct dlc_options opts;
	char *cause = NULL;

	memset(&opts, 0, sizeof(opts));
	ck_assert_int_eq(dlc_options_validate(&opts, &cause), -EINVAL);
	assert_cause(cause, "no source given", "validate");
	free(cause);
}
END_TEST

static Suite *options_suite(void)
{
	Suite *s = suite_create("options");
	TCase *tc;

	tc = tcase_create("parse");
	tcase_add_loop_test(tc, test_parse_good, 0, sizeof(good_cases) / sizeof(good_cases[0]));
	tcase_add_loop_test(tc, test_parse_bad, 0, sizeof(bad_cases) / sizeof(bad_cases[0]));
	tcase_add_test(tc, test_parse_without_cause);
	tcase_add_test(tc, test_usage_lists_every_option);
	tcase_add_test(tc, test_prefetch_options);
	tcase_add_test(tc, test_free_zeroed);
	tcase_add_test(tc, test_free_twice_after_parse);
	suite_add_tcase(s, tc);

	tc = tcase_create("kernel_opts");
	tcase_add_test(tc, test_kernel_opts_accepted_by_libfuse);
	tcase_add_test(tc, test_fsname_escaping_round_trip);
	suite_add_tcase(s, tc);

	tc = tcase_create("numbers");
	tcase_add_loop_test(tc, test_parse_size, 0, sizeof(size_cases) / sizeof(size_cases[0]));
	tcase_add_loop_test(tc, test_parse_duration, 0,
			    sizeof(duration_cases) / sizeof(duration_cases[0]));
	suite_add_tcase(s, tc);

	tc = tcase_create("validate");
	tcase_add_checked_fixture(tc, tree_setup, tree_teardown);
	tcase_add_test(tc, test_validate_defaults);
	tcase_add_test(tc, test_validate_root_cache_dir);
	tcase_add_test(tc, test_validate_non_path_source);
	tcase_add_test(tc, test_validate_relative_paths);
	tcase_add_test(tc, test_validate_cache_dir_not_yet_made);
	tcase_add_test(tc, test_validate_missing_mountpoint);
	tcase_add_test(tc, test_validate_mountpoint_is_file);
	tcase_add_test(tc, test_validate_control_owner);
	tcase_add_test(tc, test_validate_bad_source);
	tcase_add_test(tc, test_validate_source_inside_mountpoint);
	tcase_add_test(tc, test_validate_cache_dir_inside_mountpoint);
	tcase_add_test(tc, test_validate_cache_dir_inside_source);
	tcase_add_test(tc, test_validate_cache_dir_is_file);
	tcase_add_test(tc, test_validate_snapshot);
	tcase_add_test(tc, test_validate_packed_source);
	tcase_add_test(tc, test_validate_needs_arguments);
	tcase_add_test(tc, test_check_io_uring);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(options_suite());
	int failures;

	srunner_run_all(sr, CK_ENV);
	failures = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failures ? 1 : 0;
}
