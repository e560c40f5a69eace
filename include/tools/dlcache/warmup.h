/*
 * warmup.h - `dlcache warmup`: fills a mount's cache ahead of a job.
 *
 * The command talks to a running mount only through the files of
 * dlcache-control(5): it announces the files to warm as prefetch lines on
 * .control, reads each through the mount, and watches .cached and .stats
 * to report what the cache admitted and what it refused.
 */
#ifndef DLCACHE_WARMUP_H
#define DLCACHE_WARMUP_H

/*
 * `dlcache warmup MOUNT [LIST|-|DIR] [--top N] [--threads N] [--timeout S]`;
 * argv[0] is "warmup".  Prints progress on stderr (a line rewritten in place
 * on a terminal, a plain line every few seconds otherwise), the result on
 * stdout, and a one-sentence reason on stderr for a non-zero status.  0 when
 * at least one file is cached and every file could be read in time; 1
 * otherwise (not a dlcache mount, an unreadable list, nothing to warm,
 * nothing admitted, failed reads, the timeout); 2 for a usage error.
 */
int dlc_warmup_main(int argc, char **argv);

#endif
