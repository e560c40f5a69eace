/*
 * readonly.h - the mutations a read-only dataset refuses.  Private to
 * src/fuse/.
 */
#ifndef DLCACHE_FUSE_READONLY_H
#define DLCACHE_FUSE_READONLY_H

#include <fuse_lowlevel.h>

/*
 * Sets in ops every operation that would change the dataset (mknod, mkdir,
 * unlink, rmdir, symlink, rename, link, setxattr, removexattr, create,
 * fallocate, copy_file_range) to one that fails with EROFS.  setattr and
 * write are fs.c's: .control takes writes and a no-op truncate.
 */
void dlc_readonly_ops(struct fuse_lowlevel_ops *ops);

#endif
