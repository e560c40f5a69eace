/*
 * kernel_readahead.c - the kernel's readahead window for the mount (see
 * kernel_readahead.h): find the mount's device in mountinfo, write the
 * window to its backing device's read_ahead_kb.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlcache/kernel_readahead.h"

/*
 * Undoes mountinfo's escapes in place: the kernel writes a space, tab,
 * newline and backslash of a path as \040, \011, \012 and \134.
 */
static void unescape(char *s)
{
	char *out = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*out++ = *s++;
		}
	}
	*out = '\0';
}

int dlc_mount_device(const char *mountinfo, const char *mountpoint, char *dev, size_t size)
{
	FILE *f = fopen(mountinfo, "re");
	char *line = NULL;
	size_t cap = 0;
	int rc = -ENOENT;

	if (!f)
		return -errno;
	/* "ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS ...": the last line
	 * naming mountpoint is the mount on top. */
	while (getline(&line, &cap, f) >= 0) {
		char *save = NULL, *field[5];
		int n = 0;

		for (char *t = strtok_r(line, " \n", &save); t && n < 5; t = strtok_r(NULL, " \n", &save))
			field[n++] = t;
		if (n < 5)
			continue;
		unescape(field[4]);
		if (strcmp(field[4], mountpoint) != 0)
			continue;
		if (strlen(field[2]) >= size) {
			rc = -ENAMETOOLONG;
			continue;
		}
		strcpy(dev, field[2]);
		rc = 0;
	}
	free(line);
	fclose(f);
	return rc;
}

int dlc_kernel_readahead_set(const char *mountinfo, const char *bdi_root, const char *mountpoint,
			     uint64_t bytes)
{
	char dev[64], path[4096], value[32];
	uint64_t kib = bytes / 1024 < 4 ? 4 : bytes / 1024;
	int rc = dlc_mount_device(mountinfo, mountpoint, dev, sizeof(dev));
	ssize_t n;
	int fd, len;

	if (rc < 0)
		return rc;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s/read_ahead_kb", bdi_root, dev) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = snprintf(value, sizeof(value), "%llu\n", (unsigned long long)kib);
	n = write(fd, value, (size_t)len);
	rc = n == len ? 0 : n < 0 ? -errno : -EIO;
	close(fd);
	return rc;
}
