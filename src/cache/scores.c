/*
 * scores.c - one float of importance per inode, and its file.
 *
 * The file is what dlc_scores_save wrote: struct file_header, then max_ino
 * floats (inodes 1..max_ino) in the machine's byte order; a file from a
 * machine of the other byte order fails the magic check and is ignored.
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "dlcache/scores.h"

#define SCORES_MAGIC 0x31524f4353434c44ULL   /* "DLCSCOR1" read as little-endian */

struct file_header {
	uint64_t magic;
	uint64_t snapshot_id;
	uint64_t entries;
	uint64_t hash;          /* XXH3_64 of the floats */
};

int dlc_scores_init(struct dlc_scores *scores, uint32_t max_ino)
{
	scores->values = malloc(((size_t)max_ino + 1) * sizeof(float));
	if (!scores->values)
		return -ENOMEM;
	scores->max_ino = max_ino;
	dlc_scores_reset(scores);
	return 0;
}

void dlc_scores_destroy(struct dlc_scores *scores)
{
	free(scores->values);
	scores->values = NULL;
}

void dlc_scores_set(struct dlc_scores *scores, uint32_t ino, float value)
{
	bool was_known = !isnan(scores->values[ino]);
	bool is_known = !isnan(value);

	scores->values[ino] = value;
	if (is_known && !was_known)
		scores->known++;
	else if (!is_known && was_known)
		scores->known--;
}

void dlc_scores_reset(struct dlc_scores *scores)
{
	for (size_t i = 0; i <= scores->max_ino; i++)
		scores->values[i] = NAN;
	scores->known = 0;
}

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int dlc_scores_save(const struct dlc_scores *scores, const char *file, uint64_t snapshot_id)
{
	size_t bytes = (size_t)scores->max_ino * sizeof(float);
	struct file_header header = {
		.magic = SCORES_MAGIC,
		.snapshot_id = snapshot_id,
		.entries = scores->max_ino,
		.hash = XXH3_64bits(scores->values + 1, bytes),
	};
	char tmp[PATH_MAX];
	int fd, rc;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", file) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = write_all(fd, &header, sizeof(header));
	if (rc == 0)
		rc = write_all(fd, scores->values + 1, bytes);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, file) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	return rc;
}

int dlc_scores_load(struct dlc_scores *scores, const char *file, uint64_t snapshot_id)
{
	size_t bytes = (size_t)scores->max_ino * sizeof(float);
	struct file_header header;
	float *values = NULL;
	uint32_t known = 0;
	int fd, rc = 0;
	ssize_t n;

	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = pread(fd, &header, sizeof(header), 0);
	if (n != (ssize_t)sizeof(header)) {
		rc = n < 0 ? -errno : -EBADMSG;
		goto out;
	}
	if (header.magic != SCORES_MAGIC) {
		rc = -EBADMSG;
		goto out;
	}
	if (header.entries != scores->max_ino) {
		rc = DLC_SCORES_OTHER_SNAPSHOT;
		goto out;
	}
	if (header.snapshot_id != snapshot_id) {
		rc = DLC_SCORES_OTHER_SNAPSHOT;
		goto out;
	}
	values = malloc(((size_t)scores->max_ino + 1) * sizeof(float));
	if (!values) {
		rc = -ENOMEM;
		goto out;
	}
	n = pread(fd, values + 1, bytes, sizeof(header));
	if (n != (ssize_t)bytes || XXH3_64bits(values + 1, bytes) != header.hash) {
		rc = n < 0 ? -errno : -EBADMSG;
		goto out;
	}
	values[0] = NAN;
	for (size_t i = 1; i <= scores->max_ino; i++)
		known += !isnan(values[i]);
	/* In place: the policy holds a pointer to the array. */
	memcpy(scores->values, values, ((size_t)scores->max_ino + 1) * sizeof(float));
	scores->known = known;
out:
	free(values);
	close(fd);
	return rc;
}
