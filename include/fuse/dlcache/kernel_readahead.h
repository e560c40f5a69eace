/*
 * kernel_readahead.h - how far ahead the kernel reads a mounted file.
 *
 * The kernel asks a FUSE daemon for a file's bytes in READ requests no
 * larger than its readahead window, which for a FUSE mount starts at
 * 128 KiB (the backing device's read_ahead_kb in sysfs; the INIT reply can
 * only lower it).  A sequential reader of a large cached file then costs a
 * round trip per 128 KiB; with a window of 1 MiB (the default here) the
 * kernel sends up to 1 MiB per request (its 256-page limit).  Root can
 * raise the window after the mount: /sys/class/bdi/MAJOR:MINOR/read_ahead_kb,
 * MAJOR:MINOR being the mount's device, read from /proc/self/mountinfo
 * (stat(2) of the mount point would ask the daemon, which is not serving
 * yet).
 */
#ifndef DLCACHE_KERNEL_READAHEAD_H
#define DLCACHE_KERNEL_READAHEAD_H

#include <stddef.h>
#include <stdint.h>

/* Default of kernel_readahead=, and its largest value. */
#define DLC_DEFAULT_KERNEL_READAHEAD (1ULL << 20)
#define DLC_MAX_KERNEL_READAHEAD (256ULL << 20)

/*
 * The device ("MAJOR:MINOR") of the last mount on mountpoint listed in
 * mountinfo (a /proc/PID/mountinfo file), into dev (size bytes): 0,
 * -ENOENT when nothing is mounted there, or -errno reading mountinfo.
 */
int dlc_mount_device(const char *mountinfo, const char *mountpoint, char *dev, size_t size);

/*
 * Sets the readahead window of the mount on mountpoint to bytes (rounded
 * down to KiB, at least 4 KiB): bdi_root is /sys/class/bdi, mountinfo
 * /proc/self/mountinfo outside tests.  0 or -errno (-EACCES and -EROFS
 * when not root).
 */
int dlc_kernel_readahead_set(const char *mountinfo, const char *bdi_root, const char *mountpoint,
			     uint64_t bytes);

#endif
