/*
 * options.c - the command line of mount.dlcache and `dlcache mount`.
 *
 * Parsing is fuse_opt's: one template names every option dlcache knows, each
 * with a key, and one callback (option_proc) turns a matched key into a field
 * of struct dlc_options, takes SOURCE and MOUNTPOINT from the non-option
 * arguments, and explains anything fuse_opt could not match.  Options that
 * only mean something to mount(8) or fstab are discarded by the template
 * itself (FUSE_OPT_KEY_DISCARD); x-* options, which no template can match by
 * prefix, are discarded in the callback.  Kernel mount flags are collected as
 * written and, once the whole line is read, joined behind the options every
 * mount gets ("default_permissions,fsname=...,subtype=dlcache") into
 * opts->kernel_opts, a list in fuse_opt's own escaped syntax that the caller
 * hands to fuse_session_new() after "-o".
 *
 * Parsing touches no file; dlc_options_validate() (options_validate.c) then
 * checks the result against the file system.  Every failure is one sentence
 * in *cause naming the problem and its fix; the caller prints it and exits
 * with status 1.
 */
#include <errno.h>
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

#include <fuse_lowlevel.h>     /* FUSE_MAJOR_VERSION, FUSE_MINOR_VERSION */
#include <fuse_opt.h>
#include <xxhash.h>

#include "dlcache/cause.h"
#include "dlcache/blocks.h"
#include "dlcache/kernel_readahead.h"
#include "dlcache/options.h"
#include "dlcache/snapshot.h"

#define MAX_CRAWL_THREADS 256
#define MAX_PREFETCH_THREADS 256
#define MAX_PREFETCH_WINDOW 1000000
#define MAX_THREADS 1024
#define MAX_SOURCE_THREADS 1024
#define MIN_MEMORY_LIMIT (16ULL << 20)
#define MIN_NFS_TIMEOUT_NS 1000000000ULL            /* libnfs counts whole seconds */
#define MAX_NFS_TIMEOUT_NS (3600ULL * 1000000000ULL)
#define MAX_NFS_CONNECTIONS 64

enum option_key {
	KEY_CACHE_DIR,
	KEY_CACHE_SIZE,
	KEY_CACHE_MAX_FILE,
	KEY_BLOCK_SIZE,
	KEY_READAHEAD_MAX,
	KEY_KERNEL_READAHEAD,
	KEY_POLICY,
	KEY_SNAPSHOT,
	KEY_REFRESH,
	KEY_CRAWL_THREADS,
	KEY_PREFETCH_THREADS,
	KEY_PREFETCH_WINDOW,
	KEY_THREADS,
	KEY_SOURCE_THREADS,
	KEY_MEMORY_LIMIT,
	KEY_SOURCE_TIMEOUT,
	KEY_LOG_LEVEL,
	KEY_SOURCE_DELAY,
	KEY_SOURCE_BW,
	KEY_SOURCE_FAIL_EVERY,
	KEY_NFS_TIMEOUT,
	KEY_TIER_SERVERS,
	KEY_TIER_KEY,
	KEY_S3_ENDPOINT,
	KEY_S3_REGION,
	KEY_S3_PROFILE,
	KEY_TIER_TIMEOUT,
	KEY_ALLOW_OTHER,
	KEY_FSNAME,
	KEY_CONTROL_UID,
	KEY_CONTROL_GID,
	KEY_CHUNK_FETCH,
	KEY_PASSTHROUGH,
	KEY_ATIME,
	KEY_IO_URING,
	KEY_KERNEL_FLAG,   /* passed to the FUSE mount as written */
	KEY_FOREGROUND,
	KEY_DEBUG,
	KEY_HELP,
	KEY_VERSION,
	KEY_SLOPPY,
};

/*
 * The kernel mount is read-write unless the line says "ro": the daemon
 * itself refuses every change to the dataset with EROFS, and a read-write
 * mount lets the job write ranks to .control.  "rw" therefore adds nothing.
 * default_permissions is always on: the kernel checks the dataset's modes.  "atime" is not passed on (libfuse 3.17 rejects it): it removes
 * an earlier "noatime", the kernel's default being to update access times.
 * The atime family beyond atime/noatime (relatime, strictatime,
 * diratime, nodiratime and their negations) is dropped: libfuse 3.14 rejects
 * them as unknown options, and on a read-only mount no access time is ever
 * written, so they change nothing.
 */
static const struct fuse_opt option_template[] = {
	FUSE_OPT_KEY("cache_dir=", KEY_CACHE_DIR),
	FUSE_OPT_KEY("cache_size=", KEY_CACHE_SIZE),
	FUSE_OPT_KEY("cache_max_file=", KEY_CACHE_MAX_FILE),
	FUSE_OPT_KEY("block_size=", KEY_BLOCK_SIZE),
	FUSE_OPT_KEY("readahead_max=", KEY_READAHEAD_MAX),
	FUSE_OPT_KEY("kernel_readahead=", KEY_KERNEL_READAHEAD),
	FUSE_OPT_KEY("policy=", KEY_POLICY),
	FUSE_OPT_KEY("snapshot=", KEY_SNAPSHOT),
	FUSE_OPT_KEY("refresh", KEY_REFRESH),
	FUSE_OPT_KEY("crawl_threads=", KEY_CRAWL_THREADS),
	FUSE_OPT_KEY("prefetch_threads=", KEY_PREFETCH_THREADS),
	FUSE_OPT_KEY("prefetch_window=", KEY_PREFETCH_WINDOW),
	FUSE_OPT_KEY("threads=", KEY_THREADS),
	FUSE_OPT_KEY("source_threads=", KEY_SOURCE_THREADS),
	FUSE_OPT_KEY("memory_limit=", KEY_MEMORY_LIMIT),
	FUSE_OPT_KEY("source_timeout=", KEY_SOURCE_TIMEOUT),
	FUSE_OPT_KEY("log_level=", KEY_LOG_LEVEL),
	FUSE_OPT_KEY("source_delay=", KEY_SOURCE_DELAY),
	FUSE_OPT_KEY("source_bw=", KEY_SOURCE_BW),
	FUSE_OPT_KEY("source_fail_every=", KEY_SOURCE_FAIL_EVERY),
	FUSE_OPT_KEY("nfs_timeout=", KEY_NFS_TIMEOUT),
	FUSE_OPT_KEY("tier_servers=", KEY_TIER_SERVERS),
	FUSE_OPT_KEY("tier_key=", KEY_TIER_KEY),
	FUSE_OPT_KEY("s3_endpoint=", KEY_S3_ENDPOINT),
	FUSE_OPT_KEY("s3_region=", KEY_S3_REGION),
	FUSE_OPT_KEY("s3_profile=", KEY_S3_PROFILE),
	FUSE_OPT_KEY("tier_timeout=", KEY_TIER_TIMEOUT),
	FUSE_OPT_KEY("allow_other", KEY_ALLOW_OTHER),
	FUSE_OPT_KEY("fsname=", KEY_FSNAME),
	FUSE_OPT_KEY("control_uid=", KEY_CONTROL_UID),
	FUSE_OPT_KEY("control_gid=", KEY_CONTROL_GID),
	FUSE_OPT_KEY("chunk_fetch=", KEY_CHUNK_FETCH),
	FUSE_OPT_KEY("passthrough=", KEY_PASSTHROUGH),
	FUSE_OPT_KEY("io_uring=", KEY_IO_URING),

	FUSE_OPT_KEY("nosuid", KEY_KERNEL_FLAG),
	FUSE_OPT_KEY("suid", KEY_KERNEL_FLAG),
	FUSE_OPT_KEY("nodev", KEY_KERNEL_FLAG),
	FUSE_OPT_KEY("dev", KEY_KERNEL_FLAG),
	FUSE_OPT_KEY("noexec", KEY_KERNEL_FLAG),
	FUSE_OPT_KEY("exec", KEY_KERNEL_FLAG),
	FUSE_OPT_KEY("noatime", KEY_KERNEL_FLAG),
	FUSE_OPT_KEY("atime", KEY_ATIME),
	FUSE_OPT_KEY("sync", KEY_KERNEL_FLAG),
	FUSE_OPT_KEY("async", KEY_KERNEL_FLAG),
	FUSE_OPT_KEY("dirsync", KEY_KERNEL_FLAG),
	FUSE_OPT_KEY("ro", KEY_KERNEL_FLAG),
	FUSE_OPT_KEY("rw", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("default_permissions", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("relatime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("norelatime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("strictatime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nostrictatime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("diratime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nodiratime", FUSE_OPT_KEY_DISCARD),

	/* mount(8) and fstab only; x-* is handled in option_proc. */
	FUSE_OPT_KEY("_netdev", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nofail", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("noauto", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("auto", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("user", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("user=", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("users", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nouser", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("owner", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("group", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("defaults", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("comment=", FUSE_OPT_KEY_DISCARD),

	FUSE_OPT_KEY("-f", KEY_FOREGROUND),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	/* What mount(8) may add when it runs a helper: -s (sloppy), -n (no
	 * mtab), -v (verbose), -t TYPE. */
	FUSE_OPT_KEY("-s", KEY_SLOPPY),
	FUSE_OPT_KEY("-n", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("-v", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("-t ", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_END
};

/* What the fuse_opt callback works on. */
struct parse_state {
	struct dlc_options *opts;
	char *cause;            /* the first error, malloc'd */
	int rc;                 /* its -errno */
	char *fsname;           /* fsname= as written, or NULL for the source */
	char *kernel_flags;     /* pass-through flags, comma list */
	char *first_unknown;    /* an unknown -o option, reported unless -s */
	bool sloppy;
	bool readahead_given;   /* readahead_max= was written */
};

/* Records the first failure of a parse; returns -1 for fuse_opt. */
static int parse_fail(struct parse_state *state, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int parse_fail(struct parse_state *state, int rc, const char *fmt, ...)
{
	va_list ap;

	if (state->rc == 0) {
		state->rc = rc;
		va_start(ap, fmt);
		dlc_cause_vset(&state->cause, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Removes every flag in the kernel flag list; 0 or -ENOMEM. */
static int drop_kernel_flag(struct parse_state *state, const char *flag)
{
	char *kept = NULL, *list = state->kernel_flags, *save = NULL;

	if (!list)
		return 0;
	for (char *f = strtok_r(list, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
		if (strcmp(f, flag) != 0 && fuse_opt_add_opt(&kept, f) < 0) {
			free(kept);
			return -ENOMEM;
		}
	}
	free(list);
	state->kernel_flags = kept;
	return 0;
}

static int replace_string(char **field, const char *value)
{
	char *copy = strdup(value);

	if (!copy)
		return -ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

/* ---- numbers --------------------------------------------------------- */

/*
 * Reads "DIGITS[.DIGITS]" at the start of text.  Sets *whole (-ERANGE when it
 * does not fit in 64 bits), the fraction as *frac / *frac_scale (at most 18
 * digits are kept; later ones are below any unit here), and *end past the
 * number.  -EINVAL when text does not start with a digit, or a '.' has no
 * digit after it.
 */
static int parse_decimal(const char *text, uint64_t *whole, uint64_t *frac,
			 uint64_t *frac_scale, const char **end)
{
	const char *p = text;
	uint64_t value = 0;
	bool overflow = false;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned digit = (unsigned)(*p - '0');

		if (value > (UINT64_MAX - digit) / 10)
			overflow = true;
		else
			value = value * 10 + digit;
	}
	*frac = 0;
	*frac_scale = 1;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		for (int kept = 0; *p >= '0' && *p <= '9'; p++, kept++) {
			if (kept < 18) {
				*frac = *frac * 10 + (uint64_t)(*p - '0');
				*frac_scale *= 10;
			}
		}
	}
	*whole = value;
	*end = p;
	return overflow ? -ERANGE : 0;
}

/* whole * unit + frac / frac_scale * unit, rounded down; -ERANGE on overflow. */
static int scale_decimal(uint64_t whole, uint64_t frac, uint64_t frac_scale,
			 uint64_t unit, uint64_t *out)
{
	__extension__ typedef unsigned __int128 wide;
	wide total;

	if (unit != 0 && whole > UINT64_MAX / unit)
		return -ERANGE;
	total = (wide)whole * unit + (wide)frac * unit / frac_scale;
	if (total > UINT64_MAX)
		return -ERANGE;
	*out = (uint64_t)total;
	return 0;
}

int dlc_parse_size(const char *text, uint64_t *out)
{
	uint64_t whole, frac, frac_scale, unit = 1;
	const char *p;
	int rc;

	if (!text)
		return -EINVAL;
	rc = parse_decimal(text, &whole, &frac, &frac_scale, &p);
	if (rc == -EINVAL)
		return rc;
	switch (*p) {
	case 'k': case 'K': unit = 1ULL << 10; p++; break;
	case 'm': case 'M': unit = 1ULL << 20; p++; break;
	case 'g': case 'G': unit = 1ULL << 30; p++; break;
	case 't': case 'T': unit = 1ULL << 40; p++; break;
	default: break;
	}
	if (unit > 1 && (*p == 'i' || *p == 'I')) {
		p++;
		if (*p != 'b' && *p != 'B')
			return -EINVAL;
	}
	if (*p == 'b' || *p == 'B')
		p++;
	if (*p != '\0')
		return -EINVAL;
	/* A count of bytes has no fraction: "1.5" alone means nothing. */
	if (unit == 1 && frac_scale > 1)
		return -EINVAL;
	if (rc < 0)
		return rc;
	return scale_decimal(whole, frac, frac_scale, unit, out);
}

int dlc_parse_duration(const char *text, uint64_t *out)
{
	static const struct {
		const char *suffix;
		uint64_t nanoseconds;
	} units[] = {
		{ "ns", 1ULL },
		{ "us", 1000ULL },
		{ "ms", 1000000ULL },
		{ "s", 1000000000ULL },
		{ "m", 60000000000ULL },
	};
	uint64_t whole, frac, frac_scale;
	const char *p;
	int rc;

	if (!text)
		return -EINVAL;
	rc = parse_decimal(text, &whole, &frac, &frac_scale, &p);
	if (rc == -EINVAL)
		return rc;
	if (*p == '\0') {
		/* No unit: only zero means the same in every unit. */
		if (rc < 0 || whole != 0 || frac != 0)
			return -EINVAL;
		*out = 0;
		return 0;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(p, units[i].suffix) == 0) {
			if (rc < 0)
				return rc;
			return scale_decimal(whole, frac, frac_scale,
					     units[i].nanoseconds, out);
		}
	}
	return -EINVAL;
}

/* A whole decimal number in [min, max]; -EINVAL for anything else. */
static int parse_unsigned(const char *text, unsigned min, unsigned max, unsigned *out)
{
	uint64_t value = 0;

	if (*text == '\0')
		return -EINVAL;
	for (const char *p = text; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		value = value * 10 + (uint64_t)(*p - '0');
		if (value > max)
			return -EINVAL;
	}
	if (value < min)
		return -EINVAL;
	*out = (unsigned)value;
	return 0;
}

/* ---- parsing ---------------------------------------------------------- */

static int parse_size_option(struct parse_state *state, const char *name,
			     const char *value, const char *example, uint64_t *field)
{
	int rc = dlc_parse_size(value, field);

	if (rc == -ERANGE)
		return parse_fail(state, -EINVAL,
				  "%s '%s' is too large; write a size below 16777216T, e.g. %s=%s.",
				  name, value, name, example);
	if (rc < 0)
		return parse_fail(state, -EINVAL,
				  "%s '%s' is not a size; write a number with an optional K, M, G or T suffix, e.g. %s=%s.",
				  name, value, name, example);
	return 0;
}

static int parse_duration_option(struct parse_state *state, const char *name,
				 const char *value, uint64_t *field)
{
	int rc = dlc_parse_duration(value, field);

	if (rc == -ERANGE)
		return parse_fail(state, -EINVAL,
				  "%s '%s' is too long; write a shorter duration, e.g. %s=2ms.",
				  name, value, name);
	if (rc < 0)
		return parse_fail(state, -EINVAL,
				  "%s '%s' is not a duration; write a number with a unit ns, us, ms, s or m, e.g. %s=2ms.",
				  name, value, name);
	return 0;
}

static int parse_count_option(struct parse_state *state, const char *name,
			      const char *value, unsigned min, unsigned max,
			      unsigned *field)
{
	if (parse_unsigned(value, min, max, field) < 0)
		return parse_fail(state, -EINVAL,
				  "%s '%s' is not a whole number from %u to %u; write e.g. %s=%u.",
				  name, value, min, max, name, min > 16 ? min : 16);
	return 0;
}

static int parse_string_option(struct parse_state *state, const char *name,
			       const char *value, const char *example, char **field)
{
	if (*value == '\0')
		return parse_fail(state, -EINVAL,
				  "option %s= has an empty value; write %s=%s, or leave the option out.",
				  name, name, example);
	if (replace_string(field, value) < 0)
		return parse_fail(state, -ENOMEM, "out of memory while reading option %s.", name);
	return 0;
}

/* An -o option that matched no template: dropped, or an error with a hint. */
static int unknown_option(struct parse_state *state, const char *arg)
{
	const char *equals = strchr(arg, '=');

	if (*arg == '\0' || strncmp(arg, "x-", 2) == 0)
		return 0;   /* empty ("ro,,nodev") and x-systemd.* etc. */
	if (arg[0] == '-')
		return parse_fail(state, -EINVAL,
				  "unknown flag '%s'; run mount.dlcache --help for the flags it accepts, and give mount options after -o.",
				  arg);
	if (equals) {
		char *name = strndup(arg, (size_t)(equals - arg));
		bool is_flag = name && fuse_opt_match(option_template, name);

		if (is_flag) {
			parse_fail(state, -EINVAL,
				   "option '%s' takes no value; write just -o %s.", name, name);
			free(name);
			return -1;
		}
		free(name);
	} else {
		char *with_equals;
		bool wants_value;

		if (asprintf(&with_equals, "%s=", arg) < 0)
			return parse_fail(state, -ENOMEM, "out of memory while reading options.");
		wants_value = fuse_opt_match(option_template, with_equals);
		free(with_equals);
		if (wants_value)
			return parse_fail(state, -EINVAL,
					  "option '%s' needs a value; write -o %s=VALUE as mount.dlcache(8) describes.",
					  arg, arg);
	}
	if (!state->first_unknown) {
		state->first_unknown = strdup(arg);
		if (!state->first_unknown)
			return parse_fail(state, -ENOMEM, "out of memory while reading options.");
	}
	return 0;
}

static int positional_argument(struct parse_state *state, const char *arg)
{
	struct dlc_options *opts = state->opts;

	if (!opts->source) {
		if (*arg == '\0')
			return parse_fail(state, -EINVAL,
					  "the source is empty; give the dataset's directory, e.g. mount.dlcache /data/imagenet /mnt/data.");
		if (replace_string(&opts->source, arg) < 0)
			return parse_fail(state, -ENOMEM, "out of memory while reading the source.");
		return 0;
	}
	if (!opts->mountpoint) {
		if (*arg == '\0')
			return parse_fail(state, -EINVAL,
					  "the mountpoint is empty; give an existing directory, e.g. mount.dlcache %s /mnt/data.",
					  opts->source);
		if (replace_string(&opts->mountpoint, arg) < 0)
			return parse_fail(state, -ENOMEM, "out of memory while reading the mountpoint.");
		return 0;
	}
	return parse_fail(state, -EINVAL,
			  "unexpected argument '%s' after the mountpoint; give one SOURCE and one MOUNTPOINT, and options after -o separated by commas without spaces.",
			  arg);
}

static int option_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct parse_state *state = data;
	struct dlc_options *opts = state->opts;
	const char *value = strchr(arg, '=');
	unsigned number;
	int rc;

	(void)outargs;
	value = value ? value + 1 : "";

	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		return positional_argument(state, arg) < 0 ? -1 : 0;
	case FUSE_OPT_KEY_OPT:
		return unknown_option(state, arg) < 0 ? -1 : 0;
	case KEY_CACHE_DIR:
		return parse_string_option(state, "cache_dir", value,
					   "/local/ssd/dlcache", &opts->cache_dir);
	case KEY_SNAPSHOT:
		return parse_string_option(state, "snapshot", value,
					   "/local/ssd/imagenet.snapshot.db", &opts->snapshot);
	case KEY_FSNAME:
		return parse_string_option(state, "fsname", value, "imagenet", &state->fsname);
	case KEY_CONTROL_UID:
		return parse_string_option(state, "control_uid", value, "trainer", &opts->control_user);
	case KEY_CONTROL_GID:
		return parse_string_option(state, "control_gid", value, "ml", &opts->control_group);
	case KEY_CACHE_SIZE:
		rc = parse_size_option(state, "cache_size", value, "200G", &opts->cache_size);
		if (rc == 0 && opts->cache_size == 0)
			return parse_fail(state, -EINVAL,
					  "cache_size must be larger than 0; give the room the cache may use, e.g. cache_size=200G, or write policy=none to cache nothing.");
		return rc;
	case KEY_CACHE_MAX_FILE:
		return parse_size_option(state, "cache_max_file", value, "64M",
					 &opts->cache_max_file);
	case KEY_BLOCK_SIZE:
		rc = parse_size_option(state, "block_size", value, "4M", &opts->block_size);
		if (rc == 0 && (opts->block_size < (64u << 10) || opts->block_size > (256u << 20) ||
				opts->block_size % 4096))
			return parse_fail(state, -EINVAL,
					  "block_size '%s' must be a multiple of 4K between 64K and 256M; write e.g. block_size=4M.",
					  value);
		return rc;
	case KEY_READAHEAD_MAX:
		state->readahead_given = true;
		return parse_size_option(state, "readahead_max", value, "64M", &opts->readahead_max);
	case KEY_KERNEL_READAHEAD:
		rc = parse_size_option(state, "kernel_readahead", value, "4M", &opts->kernel_readahead);
		if (rc == 0 && (opts->kernel_readahead > DLC_MAX_KERNEL_READAHEAD ||
				(opts->kernel_readahead > 0 && opts->kernel_readahead < 4096)))
			return parse_fail(state, -EINVAL,
					  "kernel_readahead '%s' must be 0 or between 4K and 256M; write e.g. kernel_readahead=4M.",
					  value);
		return rc;
	case KEY_MEMORY_LIMIT:
		rc = parse_size_option(state, "memory_limit", value, "2G", &opts->memory_limit);
		if (rc == 0 && opts->memory_limit < MIN_MEMORY_LIMIT)
			return parse_fail(state, -EINVAL,
					  "memory_limit '%s' is below 16M; write e.g. memory_limit=1G.", value);
		return rc;
	case KEY_SOURCE_BW:
		return parse_size_option(state, "source_bw", value, "100M",
					 &opts->backend.bandwidth);
	case KEY_SOURCE_DELAY:
		return parse_duration_option(state, "source_delay", value,
					     &opts->backend.delay_ns);
	case KEY_POLICY:
		if (dlc_policy_parse(value, &opts->policy) < 0)
			return parse_fail(state, -EINVAL,
					  "policy '%s' is unknown; use importance, freeze, lru or none.", value);
		return 0;
	case KEY_LOG_LEVEL:
		if (dlc_log_parse_level(value, &opts->log_level) < 0)
			return parse_fail(state, -EINVAL,
					  "log_level '%s' is unknown; use error, warning, info or debug.",
					  value);
		return 0;
	case KEY_CRAWL_THREADS:
		return parse_count_option(state, "crawl_threads", value, 1, MAX_CRAWL_THREADS,
					  &opts->crawl_threads);
	case KEY_PREFETCH_THREADS:
		return parse_count_option(state, "prefetch_threads", value, 1, MAX_PREFETCH_THREADS,
					  &opts->prefetch_threads);
	case KEY_PREFETCH_WINDOW:
		return parse_count_option(state, "prefetch_window", value, 1, MAX_PREFETCH_WINDOW,
					  &opts->prefetch_window);
	case KEY_THREADS:
		return parse_count_option(state, "threads", value, 1, MAX_THREADS,
					  &opts->threads);
	case KEY_SOURCE_THREADS:
		return parse_count_option(state, "source_threads", value, 1, MAX_SOURCE_THREADS,
					  &opts->source_threads);
	case KEY_SOURCE_FAIL_EVERY:
		if (parse_unsigned(value, 0, UINT_MAX, &opts->backend.fail_every) < 0)
			return parse_fail(state, -EINVAL,
					  "source_fail_every '%s' is not a whole number; write N to fail every Nth read from the source, or 0 to never fail.",
					  value);
		return 0;
	case KEY_TIER_SERVERS:
		return parse_string_option(state, "tier_servers", value, "/etc/dlcache/tier",
					   &opts->tier_servers);
	case KEY_TIER_KEY:
		return parse_string_option(state, "tier_key", value, "/etc/dlcache/tier.key",
					   &opts->tier_key);
	case KEY_S3_ENDPOINT:
		return parse_string_option(state, "s3_endpoint", value, "http://127.0.0.1:9000",
					   &opts->backend.s3_endpoint);
	case KEY_S3_REGION:
		return parse_string_option(state, "s3_region", value, "eu-west-1",
					   &opts->backend.s3_region);
	case KEY_S3_PROFILE:
		return parse_string_option(state, "s3_profile", value, "training",
					   &opts->backend.s3_profile);
	case KEY_TIER_TIMEOUT:
		rc = parse_duration_option(state, "tier_timeout", value, &opts->tier_timeout_ns);
		if (rc == 0 && (opts->tier_timeout_ns < 1000000ULL ||
				opts->tier_timeout_ns > 10000000000ULL))
			return parse_fail(state, -EINVAL,
					  "tier_timeout '%s' is outside 1ms to 10s; write e.g. tier_timeout=200ms.",
					  value);
		return rc;
	case KEY_NFS_TIMEOUT:
	case KEY_SOURCE_TIMEOUT: {
		/* nfs_timeout= is the older name of source_timeout=. */
		const char *name = key == KEY_NFS_TIMEOUT ? "nfs_timeout" : "source_timeout";

		rc = parse_duration_option(state, name, value, &opts->backend.timeout_ns);
		if (rc == 0 && (opts->backend.timeout_ns < MIN_NFS_TIMEOUT_NS ||
				opts->backend.timeout_ns > MAX_NFS_TIMEOUT_NS))
			return parse_fail(state, -EINVAL,
					  "%s '%s' is outside 1s to 60m; write e.g. %s=30s.",
					  name, value, name);
		return rc;
	}
	case KEY_CHUNK_FETCH:
		if (parse_unsigned(value, 0, 1, &number) < 0)
			return parse_fail(state, -EINVAL,
					  "chunk_fetch '%s' is neither 0 nor 1; write chunk_fetch=1 to read a packed source's chunks whole.",
					  value);
		opts->chunk_fetch = number == 1;
		return 0;
	case KEY_PASSTHROUGH:
		if (parse_unsigned(value, 0, 1, &number) < 0)
			return parse_fail(state, -EINVAL,
					  "passthrough '%s' is neither 0 nor 1; write passthrough=0 to serve every read from the daemon.",
					  value);
		opts->passthrough = number == 1;
		return 0;
	case KEY_IO_URING:
		if (parse_unsigned(value, 0, 1, &number) < 0)
			return parse_fail(state, -EINVAL,
					  "io_uring '%s' is neither 0 nor 1; write io_uring=0, or leave it out.",
					  value);
		/*
		 * FUSE over io_uring needs libfuse 3.18 (tests/build.sh builds
		 * Debian's where a suite carries it); the kernel's side is
		 * checked by dlc_options_validate.
		 */
#if FUSE_MAJOR_VERSION == 3 && FUSE_MINOR_VERSION < 18
		if (number == 1)
			return parse_fail(state, -EINVAL,
					  "io_uring=1 needs libfuse 3.18 or later, and this dlcache is built with libfuse %d.%d; mount without io_uring=1, or rebuild with tests/build.sh, which builds libfuse 3.18 where Debian offers it.",
					  FUSE_MAJOR_VERSION, FUSE_MINOR_VERSION);
#endif
		opts->io_uring = number == 1;
		return 0;
	case KEY_REFRESH:
		opts->refresh = true;
		return 0;
	case KEY_ALLOW_OTHER:
		opts->allow_other = true;
		return 0;
	case KEY_KERNEL_FLAG:
		if (fuse_opt_add_opt(&state->kernel_flags, arg) < 0)
			return parse_fail(state, -ENOMEM, "out of memory while reading options.");
		return 0;
	case KEY_ATIME:
		/* libfuse 3.17 takes no "atime": it only undoes an earlier noatime. */
		if (drop_kernel_flag(state, "noatime") < 0)
			return parse_fail(state, -ENOMEM, "out of memory while reading options.");
		return 0;
	case KEY_FOREGROUND:
		opts->foreground = true;
		return 0;
	case KEY_DEBUG:
		opts->debug = true;
		return 0;
	case KEY_HELP:
		opts->show_help = true;
		return 0;
	case KEY_VERSION:
		opts->show_version = true;
		return 0;
	case KEY_SLOPPY:
		state->sloppy = true;
		return 0;
	default:
		return 0;   /* FUSE_OPT_KEY_DISCARD */
	}
}

/*
 * fuse_opt prints to stderr when -o or -t ends the line; catch that first so
 * the person gets a cause like every other mistake.
 */
static int check_dangling_flags(int argc, char **argv, struct parse_state *state)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return 0;
		if (strcmp(argv[i], "-o") != 0 && strcmp(argv[i], "-t") != 0)
			continue;
		if (i + 1 == argc) {
			if (argv[i][1] == 'o')
				return parse_fail(state, -EINVAL,
						  "flag -o needs a list of options after it; write e.g. -o cache_size=200G,policy=freeze.");
			return parse_fail(state, -EINVAL,
					  "flag -t needs a file system type after it; write -t dlcache, or leave it out.");
		}
		i++;
	}
	return 0;
}

static void set_defaults(struct dlc_options *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->cache_size = DLC_DEFAULT_CACHE_SIZE;
	opts->cache_max_file = DLC_DEFAULT_CACHE_MAX_FILE;
	opts->block_size = DLC_DEFAULT_BLOCK_SIZE;
	opts->readahead_max = DLC_DEFAULT_READAHEAD_MAX;
	opts->kernel_readahead = DLC_DEFAULT_KERNEL_READAHEAD;
	opts->policy = DLC_POLICY_IMPORTANCE;
	opts->crawl_threads = DLC_DEFAULT_CRAWL_THREADS;
	opts->control_uid = -1;
	opts->control_gid = -1;
	opts->prefetch_threads = DLC_DEFAULT_PREFETCH_THREADS;
	opts->prefetch_window = DLC_DEFAULT_PREFETCH_WINDOW;
	opts->threads = DLC_DEFAULT_THREADS;
	opts->source_threads = DLC_DEFAULT_SOURCE_THREADS;
	opts->memory_limit = DLC_DEFAULT_MEMORY_LIMIT;
	opts->log_level = DLC_LOG_INFO;
	opts->passthrough = true;
}

/* "default_permissions,fsname=NAME,subtype=dlcache[,allow_other][,FLAGS]" */
static int build_kernel_opts(struct parse_state *state)
{
	struct dlc_options *opts = state->opts;
	const char *fsname = state->fsname ? state->fsname : opts->source;
	char *fsname_opt = NULL;
	char *list = NULL;
	int rc = -ENOMEM;

	if (asprintf(&fsname_opt, "fsname=%s", fsname) < 0) {
		fsname_opt = NULL;
		goto out;
	}
	if (fuse_opt_add_opt(&list, "default_permissions") < 0 ||
	    fuse_opt_add_opt_escaped(&list, fsname_opt) < 0 ||
	    fuse_opt_add_opt(&list, "subtype=dlcache") < 0)
		goto out;
	if (opts->allow_other && fuse_opt_add_opt(&list, "allow_other") < 0)
		goto out;
	if (state->kernel_flags && fuse_opt_add_opt(&list, state->kernel_flags) < 0)
		goto out;
	opts->kernel_opts = list;
	list = NULL;
	rc = 0;
out:
	free(list);
	free(fsname_opt);
	return rc;
}

int dlc_options_parse(int argc, char **argv, struct dlc_options *opts, char **cause)
{
	struct parse_state state = { .opts = opts };
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	int rc;

	if (cause)
		*cause = NULL;
	set_defaults(opts);

	if (check_dangling_flags(argc, argv, &state) < 0)
		goto fail;
	if (fuse_opt_parse(&args, &state, option_template, option_proc) < 0) {
		if (state.rc == 0)
			parse_fail(&state, -ENOMEM, "out of memory while reading the command line.");
		goto fail;
	}
	fuse_opt_free_args(&args);

	if (state.first_unknown && !state.sloppy) {
		parse_fail(&state, -EINVAL,
			   "unknown mount option '%s'; see mount.dlcache(8) for the options dlcache accepts.",
			   state.first_unknown);
		goto fail;
	}
	if (opts->debug) {
		opts->foreground = true;
		opts->log_level = DLC_LOG_DEBUG;
	}
	/* A file cached whole is held whole in memory while it is fetched. */
	if (opts->cache_max_file > opts->memory_limit / 4) {
		parse_fail(&state, -EINVAL,
			   "cache_max_file (%llu bytes) is more than a quarter of memory_limit (%llu bytes); lower cache_max_file= or raise memory_limit=.",
			   (unsigned long long)opts->cache_max_file,
			   (unsigned long long)opts->memory_limit);
		goto fail;
	}
	/* A reader's block and a window of readahead blocks are in memory at
	 * once: at most a quarter of the limit each (the default window
	 * shrinks to fit a small memory_limit; a window asked for does not). */
	if (!state.readahead_given && opts->readahead_max > opts->memory_limit / 4)
		opts->readahead_max = opts->memory_limit / 4;
	if (opts->block_size > opts->memory_limit / 4 || opts->readahead_max > opts->memory_limit / 4) {
		parse_fail(&state, -EINVAL,
			   "block_size (%llu bytes) or readahead_max (%llu bytes) is more than a quarter of memory_limit (%llu bytes); lower them or raise memory_limit=.",
			   (unsigned long long)opts->block_size, (unsigned long long)opts->readahead_max,
			   (unsigned long long)opts->memory_limit);
		goto fail;
	}
	/* Whole blocks: the window is rounded down to a multiple of block_size. */
	opts->readahead_max -= opts->readahead_max % opts->block_size;
	/* An NFS source needs a connection per thread that may call it at once:
	 * the crawl's, or the source pool's, the prefetchers' and readahead's. */
	opts->backend.connections = opts->source_threads + opts->prefetch_threads +
				    DLC_BLOCKS_READAHEAD_THREADS;
	if (opts->backend.connections < opts->crawl_threads)
		opts->backend.connections = opts->crawl_threads;
	if (opts->backend.connections > MAX_NFS_CONNECTIONS)
		opts->backend.connections = MAX_NFS_CONNECTIONS;
	if (opts->show_help || opts->show_version)
		goto done;
	if (!opts->source) {
		parse_fail(&state, -EINVAL, "no source given; " DLC_MOUNT_USAGE ".");
		goto fail;
	}
	if (!opts->mountpoint) {
		parse_fail(&state, -EINVAL, "no mountpoint given; " DLC_MOUNT_USAGE ".");
		goto fail;
	}
	if (build_kernel_opts(&state) < 0) {
		parse_fail(&state, -ENOMEM, "out of memory while building the mount options.");
		goto fail;
	}
done:
	free(state.fsname);
	free(state.kernel_flags);
	free(state.first_unknown);
	return 0;

fail:
	fuse_opt_free_args(&args);
	free(state.fsname);
	free(state.kernel_flags);
	free(state.first_unknown);
	dlc_options_free(opts);
	set_defaults(opts);
	rc = state.rc ? state.rc : -ENOMEM;
	if (cause)
		*cause = state.cause;
	else
		free(state.cause);
	return rc;
}

void dlc_options_free(struct dlc_options *opts)
{
	if (!opts)
		return;
	free(opts->source);
	free(opts->mountpoint);
	free(opts->cache_dir);
	free(opts->snapshot);
	free(opts->kernel_opts);
	free(opts->control_user);
	free(opts->control_group);
	free(opts->tier_servers);
	free(opts->tier_list);
	free(opts->tier_key);
	if (opts->tier_secret)
		explicit_bzero(opts->tier_secret, opts->tier_secret_len);
	free(opts->tier_secret);
	opts->tier_key = NULL;
	opts->tier_secret = NULL;
	opts->tier_secret_len = 0;
	free(opts->backend.s3_endpoint);
	free(opts->backend.s3_region);
	free(opts->backend.s3_profile);
	opts->backend.s3_endpoint = opts->backend.s3_region = opts->backend.s3_profile = NULL;
	opts->tier_servers = NULL;
	opts->tier_list = NULL;
	opts->source = NULL;
	opts->mountpoint = NULL;
	opts->cache_dir = NULL;
	opts->snapshot = NULL;
	opts->kernel_opts = NULL;
	opts->control_user = NULL;
	opts->control_group = NULL;
}

void dlc_options_usage(const char *program, FILE *out)
{
	if (!program)
		program = "mount.dlcache";
	fprintf(out,
		"usage: %s SOURCE MOUNTPOINT [-o OPTION[,OPTION...]] [-f] [-d]\n"
		"       %s -h | -V\n"
		"\n"
		"Mounts a read-only, cached view of the dataset at SOURCE on MOUNTPOINT.\n"
		"SOURCE is a directory, HOST:/EXPORT/PATH (NFS, no kernel client needed),\n"
		"nfs://HOST[:PORT]/EXPORT/PATH[?version=3|4&nfsport=N&mountport=N] or\n"
		"s3://BUCKET[/PREFIX] (S3 or an S3-compatible store).\n"
		"\n"
		"flags:\n"
		"    -o OPTIONS             mount options, comma-separated (below)\n"
		"    -f                     stay in the foreground\n"
		"    -d                     debug: foreground, FUSE debug, log_level=debug\n"
		"    -h, --help             print this help and exit\n"
		"    -V, --version          print the version and exit\n"
		"\n"
		"dlcache options:\n"
		"    cache_dir=DIR          local cache (default: /var/cache/dlcache/HASH for\n"
		"                           root, else ~/.cache/dlcache/HASH)\n"
		"    cache_size=SIZE        most bytes the cache holds (default: 10G)\n"
		"    cache_max_file=SIZE    larger files are cached by blocks, not whole\n"
		"                           (default: 64M; at most a quarter of memory_limit)\n"
		"    block_size=SIZE        block of a larger file, a multiple of 4K from 64K\n"
		"                           to 256M (default: 4M)\n"
		"    readahead_max=SIZE     most read ahead of a sequential reader of a\n"
		"                           larger file, 0 for none (default: 64M)\n"
		"    kernel_readahead=SIZE  the kernel's readahead window for the mount,\n"
		"                           0 to leave it at 128K (default: 1M; root only)\n"
		"    memory_limit=SIZE      most memory for file bytes in flight, staged or\n"
		"                           held, at least 16M (default: 1G)\n"
		"    policy=NAME            importance, freeze, lru or none\n"
		"                           (default: importance)\n"
		"    snapshot=FILE          metadata snapshot (default: SOURCE/dlcache.snapshot\n"
		"                           when SOURCE is packed, else CACHE_DIR/snapshot.db)\n"
		"    chunk_fetch=0|1        packed sources: a miss reads its whole chunk and\n"
		"                           offers every file in it to the cache (default: 0)\n"
		"    passthrough=0|1        hits on checked cache files are read by the\n"
		"                           kernel from the cache file (FUSE passthrough:\n"
		"                           libfuse >= 3.17, as root; default: 1)\n"
		"    io_uring=0|1           FUSE over io_uring: requests and replies pass\n"
		"                           through per-CPU io_uring queues (libfuse >= 3.18,\n"
		"                           the kernel's fuse.enable_uring=Y; default: 0)\n"
		"    refresh                crawl the source again and rewrite the snapshot\n"
		"                           (default: off)\n"
		"    crawl_threads=N        threads crawling the source, 1-%d (default: %d)\n"
		"    threads=N              most FUSE worker threads, 1-%d (default: %d)\n"
		"    source_threads=N       most opens and reads waiting on the source at\n"
		"                           once, 1-%d (default: %d)\n"
		"    prefetch_threads=N     threads serving prefetch lines of .control, 1-%d\n"
		"                           (default: %d)\n"
		"    prefetch_window=N      most prefetched files held ahead of the reader,\n"
		"                           1-%d (default: %d)\n"
		"    log_level=LEVEL        error, warning, info or debug (default: info)\n"
		"    fsname=NAME            name shown by mount(8) and df(1) (default: SOURCE)\n"
		"    allow_other            let other users read the mount (default: off)\n"
		"    control_uid=USER       owner of .control, who may write it\n"
		"                           (default: the user who mounts)\n"
		"    control_gid=GROUP      group that may write .control too (default: none)\n"
		"    source_timeout=DURATION  longest one open or read of the source may\n"
		"                           take before the reader gets EIO, 1s-60m\n"
		"                           (default: 30s; nfs_timeout= is the old name)\n"
		"    tier_servers=FILE      the cluster tier: memcached servers, one HOST:PORT\n"
		"                           per line, the same file on every node\n"
		"                           (default: none)\n"
		"    tier_key=FILE          the secret tier values are sealed with, shared by\n"
		"                           every node (mode 0600; dlcache keygen FILE makes\n"
		"                           one); needed by tier_servers= and .control's tier\n"
		"                           lines (default: none)\n"
		"    tier_timeout=DURATION  longest wait for a tier server, 1ms-10s\n"
		"                           (default: 200ms)\n"
		"    s3_endpoint=URL        S3 sources: http[s]://HOST[:PORT] of an\n"
		"                           S3-compatible store, addressed path-style\n"
		"                           (default: AWS, virtual-hosted)\n"
		"    s3_region=REGION       S3 sources: the bucket's region (default:\n"
		"                           AWS_REGION, AWS_DEFAULT_REGION or us-east-1)\n"
		"    s3_profile=NAME        S3 sources: the profile of ~/.aws/credentials\n"
		"                           to sign with (default: AWS_ACCESS_KEY_ID and\n"
		"                           AWS_SECRET_ACCESS_KEY, else AWS_PROFILE or default)\n"
		"\n"
		"for benchmarks and tests:\n"
		"    source_delay=DURATION  delay added to every source call (default: 0)\n"
		"    source_bw=SIZE         limit source reads to SIZE bytes per second\n"
		"                           (default: 0, unlimited)\n"
		"    source_fail_every=N    fail every Nth source read with EIO\n"
		"                           (default: 0, never)\n"
		"\n"
		"kernel mount flags, passed to the mount: nosuid, suid, nodev, dev, noexec,\n"
		"exec, noatime, atime, sync, async, dirsync, ro.  The dataset is always\n"
		"read-only (changes fail with EROFS); rw is accepted and adds nothing;\n"
		"ro also makes .control unwritable.  relatime, strictatime, diratime,\n"
		"nodiratime, norelatime and nostrictatime are accepted and change nothing.\n"
		"Options for mount(8) and fstab only (_netdev, nofail, noauto, auto, user,\n"
		"users, nouser, owner, group, defaults, comment=..., x-*) are accepted and\n"
		"ignored.\n"
		"\n"
		"SIZE is bytes with an optional K, M, G or T suffix (binary multiples);\n"
		"DURATION is a number with a unit ns, us, ms, s or m, e.g. 2ms.\n"
		"See mount.dlcache(8).\n",
		program, program,
		MAX_CRAWL_THREADS, DLC_DEFAULT_CRAWL_THREADS,
		MAX_THREADS, DLC_DEFAULT_THREADS,
		MAX_SOURCE_THREADS, DLC_DEFAULT_SOURCE_THREADS,
		MAX_PREFETCH_THREADS, DLC_DEFAULT_PREFETCH_THREADS,
		MAX_PREFETCH_WINDOW, DLC_DEFAULT_PREFETCH_WINDOW);
}
