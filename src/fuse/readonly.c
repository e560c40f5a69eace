/*
 * readonly.c - the mutations a read-only dataset refuses: every operation
 * that would create, remove, rename, link, extend or copy into a file of
 * the mount fails with EROFS (setattr and write stay in fs.c, where
 * .control takes writes and a no-op truncate).  Without these entries
 * libfuse would answer ENOSYS, which tools read as "not supported" rather
 * than "read-only".
 */
#include <errno.h>

#include "readonly.h"

static void refuse_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	fuse_reply_err(req, EROFS);
}

static void refuse_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	fuse_reply_err(req, EROFS);
}

static void refuse_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void refuse_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void refuse_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
			  const char *newname, unsigned int flags)
{
	fuse_reply_err(req, EROFS);
}

static void refuse_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	fuse_reply_err(req, EROFS);
}

static void refuse_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			    size_t size, int flags)
{
	fuse_reply_err(req, EROFS);
}

static void refuse_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void refuse_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			  struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void refuse_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			     struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void refuse_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
				   struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
				   struct fuse_file_info *fi_out, size_t len, int flags)
{
	fuse_reply_err(req, EROFS);
}

void dlc_readonly_ops(struct fuse_lowlevel_ops *ops)
{
	ops->mknod = refuse_mknod;
	ops->mkdir = refuse_mkdir;
	ops->unlink = refuse_unlink;
	ops->rmdir = refuse_unlink;
	ops->symlink = refuse_symlink;
	ops->rename = refuse_rename;
	ops->link = refuse_link;
	ops->setxattr = refuse_setxattr;
	ops->removexattr = refuse_removexattr;
	ops->create = refuse_create;
	ops->fallocate = refuse_fallocate;
	ops->copy_file_range = refuse_copy_file_range;
}
