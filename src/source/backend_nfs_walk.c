/*
 * backend_nfs_walk.c - walking a path on the NFS server without following a
 * symlink in any component, which libnfs 4.0 cannot do: its path calls
 * resolve a symlink met before the last component on the client (READLINK
 * and a new lookup from the target), and O_NOFOLLOW guards only the last.
 *
 * So the driver asks the server itself, with libnfs's raw RPC layer on the
 * slot's connection: starting from the file handle of the source's root,
 * each component is looked up in the directory the previous one named.  The
 * server never follows a symlink in a LOOKUP: NFSv4 answers NFS4ERR_SYMLINK
 * when the current object is one (the whole walk is one COMPOUND: PUTFH,
 * LOOKUP per component, GETFH, GETATTR), NFSv3 returns each object's type
 * with its handle (one LOOKUP per component).  The walk tells the file
 * handle, type and fileid of the object it reached.
 *
 * The driver's calls go on by path (libnfs has no open by handle), so each
 * call compares what it opened or statted with what the walk reached: the
 * file handle of an open (equal handles name one object; when they differ,
 * the fileid decides), the fileid of a stat.  The same object was reached
 * through real directories only; another one means a component changed
 * between the two (a directory swapped for a symlink during the call, or a
 * file renamed over), and the call fails.  A swap before the walk fails the
 * walk itself (ELOOP).
 *
 * The raw calls are waited for as libnfs's own synchronous calls are (poll
 * and nfs_service, which also times them out).  A reply that a failed wait
 * leaves behind is freed by the wait when its callback already ran (libnfs
 * errors the waiting calls when the socket breaks), else by its callback,
 * which libnfs runs with RPC_STATUS_CANCEL when the context is destroyed
 * (the pool drops a slot whose connection failed).  The decoded results
 * belong to libnfs (freed with its PDU after the callback): a callback
 * copies what it keeps and frees nothing of them.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>
#include <nfsc/libnfs-raw-nfs4.h>

#include "backend_nfs_private.h"

/*
 * The handle of the mounted root.  libnfs exports nfs_get_rootfh (from 1.x
 * to 6.x at least) but declares it, and struct nfs_fh, only in its private
 * header; the layout has been these two fields all along.
 */
struct nfs_fh {
	int len;
	char *val;
};
const struct nfs_fh *nfs_get_rootfh(struct nfs_context *nfs);

/* A raw call's outcome, filled by its callback. */
struct walk_reply {
	bool done;
	bool abandoned;             /* the waiter left: the callback frees it */
	int rc;                     /* 0 or -errno */
	bool is_link;               /* type of the object reached */
	bool is_regular;
	uint64_t fileid;
	bool got_attributes;
	char *fh;                   /* the handle reached (malloc'd) */
	unsigned fh_len;
};

static void reply_free(struct walk_reply *r)
{
	free(r->fh);
	free(r);
}

/* Ends a callback: hands the reply to its waiter, or frees it. */
static void reply_done(struct walk_reply *r)
{
	if (r->abandoned) {
		reply_free(r);
		return;
	}
	r->done = true;
}

/* Keeps a copy of the handle reached.  0 or -ENOMEM. */
static int reply_keep_fh(struct walk_reply *r, const char *val, unsigned len)
{
	r->fh = malloc(len ? len : 1);
	if (!r->fh)
		return -ENOMEM;
	memcpy(r->fh, val, len);
	r->fh_len = len;
	return 0;
}

/* -errno for an RPC that got no reply (libnfs says EINTR for a timeout,
 * which the pool takes for a lost connection). */
static int rpc_failure(int status)
{
	return status == RPC_STATUS_TIMEOUT || status == RPC_STATUS_CANCEL ? -EINTR : -EIO;
}

/*
 * Services the connection until r is done.  0, or -EIO when the connection
 * failed: r is then no longer the caller's.  A failing nfs_service may have
 * run the callback already (libnfs errors every waiting call when the socket
 * breaks), so r is freed here; else its callback frees it when the context
 * is destroyed.
 */
static int wait_reply(struct nfs_context *nfs, struct walk_reply *r)
{
	while (!r->done) {
		struct pollfd pfd = { .fd = nfs_get_fd(nfs), .events = (short)nfs_which_events(nfs) };
		int n = poll(&pfd, 1, 100);

		if (n < 0 && errno == EINTR)
			continue;
		if (nfs_service(nfs, n < 0 ? -1 : pfd.revents) < 0) {
			if (r->done)
				reply_free(r);
			else
				r->abandoned = true;
			return -EIO;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * NFSv4: one COMPOUND.
 */

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void walk4_done(struct rpc_context *rpc, int status, void *data, void *private_data)
{
	struct walk_reply *r = private_data;
	COMPOUND4res *res = data;

	(void)rpc;
	if (status != RPC_STATUS_SUCCESS) {
		r->rc = rpc_failure(status);
		reply_done(r);
		return;
	}
	/* The status of the first operation that failed, or of the GETATTR. */
	r->rc = res->status == NFS4ERR_SYMLINK ? -ELOOP : nfsstat4_to_errno(res->status);
	for (unsigned i = 0; r->rc == 0 && i < res->resarray.resarray_len; i++) {
		/*
		 * libnfs decodes the results into its own arena, 4-byte aligned
		 * (XDR's unit), so an element may sit where its type cannot be
		 * read in place: copy it, and the mask word, out first.
		 */
		const unsigned char *base = (const unsigned char *)res->resarray.resarray_val;
		nfs_resop4 op_copy, *op = &op_copy;
		const GETATTR4resok *ok;
		const unsigned char *vals;
		uint32_t want = 1u << FATTR4_TYPE | 1u << FATTR4_FILEID, mask0 = 0;

		memcpy(&op_copy, base + (size_t)i * sizeof(op_copy), sizeof(op_copy));
		if (op->resop == OP_GETFH) {
			const GETFH4resok *fh = &op->nfs_resop4_u.opgetfh.GETFH4res_u.resok4;

			r->rc = reply_keep_fh(r, fh->object.nfs_fh4_val, fh->object.nfs_fh4_len);
			continue;
		}
		if (op->resop != OP_GETATTR)
			continue;
		/* Asked for TYPE (bit 1) and FILEID (bit 20): their values in that order. */
		ok = &op->nfs_resop4_u.opgetattr.GETATTR4res_u.resok4;
		vals = (const unsigned char *)ok->obj_attributes.attr_vals.attrlist4_val;
		if (ok->obj_attributes.attrmask.bitmap4_len >= 1)
			memcpy(&mask0, ok->obj_attributes.attrmask.bitmap4_val, sizeof(mask0));
		if (ok->obj_attributes.attrmask.bitmap4_len < 1 ||
		    mask0 != want ||
		    ok->obj_attributes.attr_vals.attrlist4_len != 12) {
			r->rc = -EIO;   /* a server that does not say what it found */
			break;
		}
		r->is_link = be32(vals) == NF4LNK;
		r->is_regular = be32(vals) == NF4REG;
		r->fileid = (uint64_t)be32(vals + 4) << 32 | be32(vals + 8);
		r->got_attributes = true;
	}
	if (r->rc == 0 && (!r->got_attributes || !r->fh))
		r->rc = -EIO;
	reply_done(r);
}

static void walked_set(struct dlc_nfs_walked *out, const struct walk_reply *r)
{
	out->fileid = r->fileid;
	out->is_link = r->is_link;
	out->is_regular = r->is_regular;
	out->fh_len = 0;
	if (r->fh && r->fh_len <= sizeof(out->fh)) {
		memcpy(out->fh, r->fh, r->fh_len);
		out->fh_len = r->fh_len;
	}
}

static int walk4(struct nfs_context *nfs, const struct nfs_fh *root, char *components[],
		 unsigned count, struct dlc_nfs_walked *out)
{
	uint32_t mask[1] = { 1u << FATTR4_TYPE | 1u << FATTR4_FILEID };
	nfs_argop4 *ops = calloc(count + 3, sizeof(*ops));
	struct walk_reply *r = calloc(1, sizeof(*r));
	COMPOUND4args args = { .minorversion = 0 };
	unsigned n = 0;
	int rc;

	if (!ops || !r) {
		free(ops);
		free(r);
		return -ENOMEM;
	}
	ops[n].argop = OP_PUTFH;
	ops[n].nfs_argop4_u.opputfh.object.nfs_fh4_len = (u_int)root->len;
	ops[n++].nfs_argop4_u.opputfh.object.nfs_fh4_val = root->val;
	for (unsigned i = 0; i < count; i++) {
		ops[n].argop = OP_LOOKUP;
		ops[n].nfs_argop4_u.oplookup.objname.utf8string_len = (u_int)strlen(components[i]);
		ops[n++].nfs_argop4_u.oplookup.objname.utf8string_val = components[i];
	}
	ops[n++].argop = OP_GETFH;
	ops[n].argop = OP_GETATTR;
	ops[n].nfs_argop4_u.opgetattr.attr_request.bitmap4_len = 1;
	ops[n++].nfs_argop4_u.opgetattr.attr_request.bitmap4_val = mask;
	args.argarray.argarray_len = n;
	args.argarray.argarray_val = ops;

	if (rpc_nfs4_compound_async(nfs_get_rpc_context(nfs), walk4_done, &args, r) != 0) {
		free(ops);
		reply_free(r);
		return -ENOMEM;
	}
	free(ops);
	rc = wait_reply(nfs, r);
	if (rc < 0)
		return rc;
	rc = r->rc;
	if (rc == 0)
		walked_set(out, r);
	reply_free(r);
	return rc;
}

/* ------------------------------------------------------------------------
 * NFSv3: a LOOKUP per component.
 */

static void lookup3_done(struct rpc_context *rpc, int status, void *data, void *private_data)
{
	struct walk_reply *r = private_data;
	LOOKUP3res *res = data;
	const LOOKUP3resok *ok;

	(void)rpc;
	if (status != RPC_STATUS_SUCCESS) {
		r->rc = rpc_failure(status);
		reply_done(r);
		return;
	}
	if (res->status != NFS3_OK) {
		/* A LOOKUP in a symlink: the walk checks types, so this is a race. */
		r->rc = res->status == NFS3ERR_NOTDIR ? -ENOTDIR : nfsstat3_to_errno(res->status);
		reply_done(r);
		return;
	}
	ok = &res->LOOKUP3res_u.resok;
	r->rc = -EIO;       /* a server that does not say what it found */
	if (ok->obj_attributes.attributes_follow) {
		const fattr3 *attr = &ok->obj_attributes.post_op_attr_u.attributes;

		r->rc = reply_keep_fh(r, ok->object.data.data_val, ok->object.data.data_len);
		if (r->rc == 0) {
			r->is_link = attr->type == NF3LNK;
			r->is_regular = attr->type == NF3REG;
			r->fileid = attr->fileid;
			r->rc = attr->type == NF3LNK || attr->type == NF3DIR || attr->type == NF3REG ?
					0 : -ENOENT;
		}
	}
	reply_done(r);
}

static int walk3(struct nfs_context *nfs, const struct nfs_fh *root, char *components[],
		 unsigned count, struct dlc_nfs_walked *out)
{
	char *dir = NULL;
	unsigned dir_len = 0;
	int rc = 0;

	for (unsigned i = 0; i < count; i++) {
		struct walk_reply *r = calloc(1, sizeof(*r));
		LOOKUP3args args;

		if (!r) {
			rc = -ENOMEM;
			break;
		}
		args.what.dir.data.data_len = dir ? dir_len : (u_int)root->len;
		args.what.dir.data.data_val = dir ? dir : root->val;
		args.what.name = components[i];
		if (rpc_nfs3_lookup_async(nfs_get_rpc_context(nfs), lookup3_done, &args, r) != 0) {
			free(r);
			rc = -ENOMEM;
			break;
		}
		rc = wait_reply(nfs, r);
		if (rc < 0)
			break;
		rc = r->rc;
		if (rc == 0 && r->is_link && i + 1 < count)
			rc = -ELOOP;
		if (rc < 0) {
			reply_free(r);
			break;
		}
		walked_set(out, r);
		free(dir);
		dir = r->fh;
		dir_len = r->fh_len;
		r->fh = NULL;
		reply_free(r);
	}
	free(dir);
	return rc;
}

int dlc_nfs_walk(struct nfs_backend *nb, unsigned s, const char *path, struct dlc_nfs_walked *out)
{
	struct nfs_context *nfs = nb->slots[s].nfs;
	const struct nfs_fh *root = nfs_get_rootfh(nfs);
	size_t len = strlen(path);
	char *copy, **components;
	unsigned count = 0;
	int rc;

	*out = (struct dlc_nfs_walked){ 0 };
	if (!root || root->len <= 0)
		return -EIO;
	copy = strdup(path);
	components = malloc((len / 2 + 1) * sizeof(*components));     /* "/a/b": len / 2 */
	if (!copy || !components) {
		free(copy);
		free(components);
		return -ENOMEM;
	}
	for (char *save = NULL, *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save))
		components[count++] = c;
	rc = 0;
	if (count > 0) {
		out->reached = true;
		if (nb->source.version == 4)
			rc = walk4(nfs, root, components, count, out);
		else
			rc = walk3(nfs, root, components, count, out);
	}
	/* else the root itself: reached by its handle */
	free(components);
	free(copy);
	return rc;
}

bool dlc_nfs_walked_is(const struct dlc_nfs_walked *walked, struct nfsfh *handle)
{
	const struct nfs_fh *fh = nfs_get_fh(handle);

	return walked->reached && walked->fh_len > 0 && fh && fh->len == (int)walked->fh_len &&
	       memcmp(fh->val, walked->fh, walked->fh_len) == 0;
}
