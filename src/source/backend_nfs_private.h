/*
 * backend_nfs_private.h - what the two halves of the NFS driver share and no
 * other module sees: backend_nfs_pool.c owns the connections (slots), and
 * backend_nfs.c the driver's operations, which run on a slot.
 *
 * INVARIANTS.  nfs_backend.lock guards busy and connected.  Everything in
 * slots[s] (context, generation, list of open files) and every file's on[s]
 * belong to the thread holding slot s (busy bit s set), which uses them
 * without the lock.  A file's open_on bit s mirrors on[s].handle != NULL: it
 * is written only by the holder of slot s and read by others as a hint.  A
 * thread holds at most one slot at a time, so slots cannot deadlock.
 * connect_lock serializes the creation of contexts (libnfs 4.0 promises no
 * thread safety at all), not the connecting.
 */
#ifndef DLCACHE_BACKEND_NFS_PRIVATE_H
#define DLCACHE_BACKEND_NFS_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <nfsc/libnfs.h>

#include "dlcache/backend.h"
#include "dlcache/nfs_source.h"

#define NFS_MAX_SLOTS 64

struct file_on_slot {
	struct nfsfh *handle;                   /* NULL: not open on this slot */
	struct dlc_backend_file *prev, *next;   /* in the slot's list of open files */
};

struct dlc_backend_file {
	char *path;                     /* on the server: "/" + the source-relative path */
	_Atomic uint64_t open_on;       /* bit s: on[s].handle is set (a hint) */
	struct file_on_slot on[];       /* one per slot */
};

struct nfs_slot {
	struct nfs_context *nfs;        /* NULL: not connected */
	unsigned generation;            /* connections made on this slot so far */
	struct dlc_backend_file *files; /* files with a handle on this connection */
};

struct nfs_backend {
	struct dlc_nfs_source source;
	int timeout_ms;                 /* whole seconds, as libnfs counts them */
	unsigned nslots;
	char hostname[64];
	pthread_mutex_t connect_lock;
	pthread_mutex_t lock;
	pthread_cond_t given_back;      /* a slot became free */
	uint64_t busy;                  /* guarded by lock: bit s = slot s is held */
	uint64_t connected;             /* guarded by lock: bit s = slot s has a context */
	_Atomic uint64_t largest_read;  /* most bytes the server returned in one READ */
	_Atomic int64_t quiet_until_ns; /* CLOCK_MONOTONIC: no connecting before this,
					 * after a connect failed */
	struct nfs_slot slots[NFS_MAX_SLOTS];
};

/* Takes a free slot: one in prefer, else a connected one, else any; waits
 * while every slot is busy.  Returns its number. */
unsigned dlc_nfs_slot_take(struct nfs_backend *nb, uint64_t prefer);

/* Takes slot s itself, waiting until it is free. */
void dlc_nfs_slot_take_exactly(struct nfs_backend *nb, unsigned s);

void dlc_nfs_slot_give(struct nfs_backend *nb, unsigned s);

/*
 * Connects slot s (held, without a context).  0, or -errno with libnfs's
 * words for it in *why (malloc'd, may be NULL).
 */
int dlc_nfs_slot_connect(struct nfs_backend *nb, unsigned s, char **why);

/* True for the errors after which a connection is useless (lost, timed out,
 * or its NFSv4 state forgotten by the server). */
bool dlc_nfs_connection_lost(int rc);

/* Drops slot s's connection (held) after a call failed with rc: closes the
 * handles open on it and destroys the context, without waiting on the server. */
void dlc_nfs_slot_drop(struct nfs_backend *nb, unsigned s, int rc);

/* Records that file is open on slot s (held) as handle, and forgets it. */
void dlc_nfs_file_attach(struct nfs_backend *nb, unsigned s, struct dlc_backend_file *file,
			 struct nfsfh *handle);
struct nfsfh *dlc_nfs_file_detach(struct nfs_backend *nb, unsigned s,
				  struct dlc_backend_file *file);

/*
 * Runs run(nb, s, arg) holding a connected slot, preferring the slots in
 * prefer.  When it fails because a connection made before the call was lost,
 * the slot connects afresh and runs it once more.  Returns run's result; a
 * lost connection or a failed connect is -EIO, and so is a call that needs
 * to connect within half a second of a connect that failed.
 */
int dlc_nfs_run_on_slot(struct nfs_backend *nb, uint64_t prefer,
			int (*run)(struct nfs_backend *nb, unsigned s, void *arg), void *arg);

/* What dlc_nfs_walk reached. */
struct dlc_nfs_walked {
	bool reached;               /* false for "/": the root, known by its handle */
	bool is_link;               /* the last component is a symlink */
	bool is_regular;            /* ... or a regular file */
	uint64_t fileid;            /* the object's, as fstat's nfs_ino gives it */
	unsigned fh_len;            /* its file handle (NFSv4 allows 128 bytes) */
	unsigned char fh[128];
};

/*
 * Looks path ("/" + a canonical relative path) up on slot s (held,
 * connected) from the source's root, one component at a time on the server,
 * following no symlink (backend_nfs_walk.c).  0 with *out filled; -ELOOP
 * when a component before the last is a symlink; -ENOENT, -ENOTDIR, -EACCES
 * as the server answers; -EIO or -EINTR when the connection failed.
 */
int dlc_nfs_walk(struct nfs_backend *nb, unsigned s, const char *path,
		 struct dlc_nfs_walked *out);

/* True when handle (from libnfs) is the file handle the walk reached: the
 * same object (equal handles name one object on a server). */
bool dlc_nfs_walked_is(const struct dlc_nfs_walked *walked, struct nfsfh *handle);

#endif
