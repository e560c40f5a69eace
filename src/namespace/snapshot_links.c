/*
 * snapshot_links.c - symlinks resolved inside the snapshot: the path a
 * .control line names may pass through links of the dataset, which lead to
 * the file they name as long as they stay inside the dataset.  Nothing
 * here touches the source: the targets are the ones the snapshot recorded.
 * Pure: no I/O, no log; a refusal says why in a sentence fragment.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "dlcache/snapshot.h"

/* Symlinks followed while resolving one .control path, at most (as ELOOP). */
#define MAX_LINKS 16

uint32_t dlc_snapshot_resolve_following(const struct dlc_snapshot *snapshot, const char *path,
				       const char **why)
{
	char work[2 * 8192 + 2], rest[sizeof(work)];
	uint32_t dir = 1, links = 0;
	char *cursor;

	if (strlen(path) >= sizeof(work))
		return 0;
	strcpy(work, path);
	cursor = work;
	for (;;) {
		char *slash, *name;
		const struct dlc_node *node;
		const char *target;
		uint32_t ino;

		while (*cursor == '/')
			cursor++;
		if (*cursor == '\0')
			return dir;
		name = cursor;
		slash = strchr(cursor, '/');
		cursor = slash ? slash + 1 : cursor + strlen(cursor);
		if (slash)
			*slash = '\0';
		if (strcmp(name, ".") == 0)
			continue;
		if (strcmp(name, "..") == 0) {
			if (dir == 1) {
				*why = "a symlink in it leads outside the dataset";
				return 0;
			}
			dir = dlc_snapshot_node(snapshot, dir)->parent;
			continue;
		}
		ino = (uint32_t)dlc_snapshot_lookup(snapshot, dir, name);
		node = ino ? dlc_snapshot_node(snapshot, ino) : NULL;
		if (node == NULL) {
			if (links > 0)
				*why = "a symlink in it is dangling";
			return 0;
		}
		target = S_ISLNK(node->mode) ? dlc_snapshot_link_target(snapshot, ino) : NULL;
		if (target == NULL) {
			if (*cursor != '\0' && !S_ISDIR(node->mode))
				return 0;
			dir = ino;
			continue;
		}
		if (++links > MAX_LINKS) {
			*why = "its symlinks loop";
			return 0;
		}
		if (target[0] == '/') {
			*why = "a symlink in it leads outside the dataset";
			return 0;
		}
		/* The rest of the path now starts with the link's target. */
		if ((size_t)snprintf(rest, sizeof(rest), "%s/%s", target, cursor) >= sizeof(rest))
			return 0;
		strcpy(work, rest);
		cursor = work;
	}
}
