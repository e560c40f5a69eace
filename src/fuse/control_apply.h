/*
 * control_apply.h - the commands of .control, carried out (private to the
 * FUSE layer: fs.c owns the open .control handles and calls this).
 */
#ifndef DLCACHE_CONTROL_APPLY_H
#define DLCACHE_CONTROL_APPLY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcache/control.h"
#include "dlcache/fs.h"

/*
 * Feeds size bytes of buf to parser, or with buf NULL ends its last line (the
 * close of .control), and applies every complete command: scores in batches
 * under one cache lock, prefetch lines to the fetch layer, "epoch N" stored in
 * *epoch.  Tier lines are refused (bad lines, their cause in last_error)
 * unless may_steer_tier: the writer is the mount's owner or root.  Counts
 * lines and errors in the stats and logs the first bad line.
 * The caller serialises calls on one parser.  Returns 0, or -EINVAL when a
 * line was bad (the good lines around it were applied), or -ENOMEM.
 */
int dlc_control_apply(struct dlc_fs_context *context, _Atomic uint64_t *epoch,
		      struct dlc_control_parser *parser, const char *buf, size_t size,
		      bool may_steer_tier);

#endif
