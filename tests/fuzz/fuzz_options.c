/*
 * fuzz_options.c - libFuzzer target for the command line of mount.dlcache
 * (src/config/options.c): whatever an fstab line or a shell hands the helper, the
 * parser must not crash, read out of bounds or leak, and a line it accepts
 * must not give the kernel mount anything the person did not ask for.
 *
 * Input: byte 0 picks the form.  Even: the rest is one -o list, parsed as
 * "mount.dlcache /data /mnt -o LIST" (what mount(8) runs for an fstab
 * line).  Odd: the rest is argv itself, entries separated by NUL bytes
 * (at most 32), after "mount.dlcache".  Either way the same bytes, up to
 * the first NUL, also go to dlc_parse_size and dlc_parse_duration.
 *
 * Oracles.  A refused line leaves opts empty and gives one sentence: not
 * empty, one line, ending with '.'.  An accepted line has a source and a
 * mountpoint, numbers within the documented ranges, a non-zero cache_size,
 * and kernel_opts that fuse_opt itself reads back as: default_permissions,
 * one fsname=, subtype=dlcache, allow_other exactly when opts->allow_other,
 * and otherwise only the pass-through kernel flags (so no option value, such
 * as a source or fsname holding a comma, can smuggle an option into the
 * mount).  dlc_options_free may run twice.  A size or duration that parses
 * is made of the documented characters.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fuse_opt.h>

#include "dlcache/options.h"
#include "fuzz.h"

#define MAX_ARGS 32

/* What fuse_opt reads back from kernel_opts. */
struct readback {
	unsigned default_permissions;
	unsigned fsname;
	unsigned subtype;
	unsigned allow_other;
	unsigned others;        /* anything not in the pass-through list */
	unsigned position;      /* options seen so far */
	bool default_first;
};

enum { RB_DEFAULT, RB_FSNAME, RB_SUBTYPE, RB_ALLOW_OTHER, RB_FLAG };

static const struct fuse_opt readback_template[] = {
	FUSE_OPT_KEY("default_permissions", RB_DEFAULT),
	FUSE_OPT_KEY("fsname=", RB_FSNAME),
	FUSE_OPT_KEY("subtype=dlcache", RB_SUBTYPE),
	FUSE_OPT_KEY("allow_other", RB_ALLOW_OTHER),
	FUSE_OPT_KEY("nosuid", RB_FLAG),
	FUSE_OPT_KEY("suid", RB_FLAG),
	FUSE_OPT_KEY("nodev", RB_FLAG),
	FUSE_OPT_KEY("dev", RB_FLAG),
	FUSE_OPT_KEY("noexec", RB_FLAG),
	FUSE_OPT_KEY("exec", RB_FLAG),
	FUSE_OPT_KEY("noatime", RB_FLAG),
	FUSE_OPT_KEY("atime", RB_FLAG),
	FUSE_OPT_KEY("sync", RB_FLAG),
	FUSE_OPT_KEY("async", RB_FLAG),
	FUSE_OPT_KEY("dirsync", RB_FLAG),
	FUSE_OPT_KEY("ro", RB_FLAG),
	FUSE_OPT_END
};

static int readback_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct readback *rb = data;

	(void)arg;
	(void)outargs;
	switch (key) {
	case RB_DEFAULT:
		rb->default_first |= rb->position == 0;
		rb->default_permissions++;
		break;
	case RB_FSNAME:
		rb->fsname++;
		break;
	case RB_SUBTYPE:
		rb->subtype++;
		break;
	case RB_ALLOW_OTHER:
		rb->allow_other++;
		break;
	case RB_FLAG:
		break;
	default:
		/* FUSE_OPT_KEY_OPT or NONOPT: nothing else may reach the mount. */
		rb->others++;
		break;
	}
	rb->position++;
	return 0;
}

static void check_kernel_opts(const struct dlc_options *opts)
{
	char program[] = "dlcache", dash_o[] = "-o";
	char *argv[] = { program, dash_o, opts->kernel_opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct readback rb = { 0 };

	CHECK(opts->kernel_opts != NULL);
	CHECK(fuse_opt_parse(&args, &rb, readback_template, readback_proc) == 0);
	fuse_opt_free_args(&args);
	CHECK(rb.default_permissions == 1 && rb.default_first);
	CHECK(rb.fsname == 1);
	CHECK(rb.subtype == 1);
	CHECK(rb.allow_other == (opts->allow_other ? 1u : 0u));
	CHECK(rb.others == 0);
}

static void check_accepted(const struct dlc_options *opts)
{
	if (opts->show_help || opts->show_version)
		return;
	CHECK(opts->source && opts->source[0]);
	CHECK(opts->mountpoint && opts->mountpoint[0]);
	CHECK(opts->cache_size > 0);
	CHECK(opts->crawl_threads >= 1 && opts->crawl_threads <= 256);
	CHECK(opts->threads >= 1 && opts->threads <= 1024);
	CHECK(opts->prefetch_threads >= 1 && opts->prefetch_threads <= 256);
	CHECK(opts->prefetch_window >= 1 && opts->prefetch_window <= 1000000);
	CHECK(!opts->cache_dir || opts->cache_dir[0]);
	CHECK(!opts->snapshot || opts->snapshot[0]);
	CHECK(!opts->control_user || opts->control_user[0]);
	CHECK(!opts->control_group || opts->control_group[0]);
	CHECK(!opts->debug || (opts->foreground && opts->log_level == DLC_LOG_DEBUG));
	check_kernel_opts(opts);
}

static void check_refused(const struct dlc_options *opts, int rc, const char *cause)
{
	size_t len;

	CHECK(rc == -EINVAL || rc == -ENOMEM);
	CHECK(cause != NULL);
	len = strlen(cause);
	CHECK(len > 0 && cause[len - 1] == '.');
	CHECK(strchr(cause, '\n') == NULL);
	CHECK(!opts->source && !opts->mountpoint && !opts->cache_dir && !opts->snapshot &&
	      !opts->kernel_opts && !opts->control_user && !opts->control_group);
}

static void parse_argv(int argc, char **argv)
{
	struct dlc_options opts;
	char *cause = NULL;
	int rc = dlc_options_parse(argc, argv, &opts, &cause);

	if (rc == 0) {
		CHECK(cause == NULL);
		check_accepted(&opts);
	} else {
		check_refused(&opts, rc, cause);
	}
	free(cause);
	dlc_options_free(&opts);
	dlc_options_free(&opts);
}

/* Sizes and durations: what parses is digits, at most one '.', and a unit. */
static void parse_numbers(const char *text)
{
	uint64_t value;
	const char *p;

	if (dlc_parse_size(text, &value) == 0) {
		CHECK(text[0] >= '0' && text[0] <= '9');
		for (p = text; *p; p++)
			CHECK(strchr("0123456789.kKmMgGtTiIbB", *p));
	}
	if (dlc_parse_duration(text, &value) == 0) {
		CHECK(text[0] >= '0' && text[0] <= '9');
		for (p = text; *p; p++)
			CHECK(strchr("0123456789.nusm", *p));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text, *argv[MAX_ARGS + 2];
	int argc = 0;

	if (size == 0)
		return 0;
	/* The bytes after the form byte, NUL-terminated: argv strings point into it. */
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	parse_numbers(text);

	argv[argc++] = (char *)"mount.dlcache";
	if (data[0] % 2 == 0) {
		argv[argc++] = (char *)"/data";
		argv[argc++] = (char *)"/mnt";
		argv[argc++] = (char *)"-o";
		argv[argc++] = text;
	} else {
		char *p = text, *end = text + size - 1;

		while (argc <= MAX_ARGS && p <= end) {
			argv[argc++] = p;
			p += strlen(p) + 1;
		}
	}
	argv[argc] = NULL;
	parse_argv(argc, argv);
	free(text);
	return 0;
}
