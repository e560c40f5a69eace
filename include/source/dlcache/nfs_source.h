/*
 * nfs_source.h - the two ways a user names an NFS source, parsed into what
 * the NFS driver (backend_nfs.c) needs to connect:
 *
 *     HOST:/PATH                               as mount(8) and fstab write it
 *     nfs://HOST[:PORT]/PATH[?ARG=VALUE[&...]]  the libnfs URL form
 *
 * HOST is a name, an IPv4 address, or an IPv6 address in brackets.  PATH is
 * the export, or any directory below it, as an absolute path on the server:
 * NFSv4 looks the whole path up in the server's pseudo file system, and
 * Linux's mountd accepts an NFSv3 MOUNT of a directory below an export, so
 * the parser needs no split between export and subdirectory (which only the
 * server could tell).
 * The URL's arguments are version=3|4 (default 4), nfsport=N (the NFS port,
 * default 2049, or for NFSv3 what the portmapper says) and mountport=N (NFSv3
 * only: the MOUNT port, default from the portmapper); PORT in the authority
 * is the same as nfsport.  Parsing is pure: it touches no file and no network.
 */
#ifndef DLCACHE_NFS_SOURCE_H
#define DLCACHE_NFS_SOURCE_H

#include <stdbool.h>

struct dlc_nfs_source {
	char *server;         /* host name or address, IPv6 without brackets */
	char *path;           /* absolute and canonical: "/" or "/a/b", no "." or
			       * empty component, no trailing slash */
	int version;          /* 3 or 4 */
	unsigned nfsport;     /* 0: the protocol's default */
	unsigned mountport;   /* NFSv3 MOUNT port; 0: ask the portmapper */
};

/*
 * True when source is written as an NFS source ("nfs://...", or a colon
 * before any slash, as in "host:/export"), so that dlc_nfs_source_parse, and
 * not the directory driver, must answer for it; some other "scheme://" is
 * claimed too, for parse to refuse with a sentence.
 */
bool dlc_nfs_source_matches(const char *source);

/*
 * Parses source into *out (freed with dlc_nfs_source_free).  0, or -EINVAL
 * with *cause naming what is wrong and how to write it (-ENOMEM without).
 * On failure *out holds nothing to free.
 */
int dlc_nfs_source_parse(const char *source, struct dlc_nfs_source *out, char **cause);

void dlc_nfs_source_free(struct dlc_nfs_source *source);

#endif
