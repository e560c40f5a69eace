/*
 * backend_nfs_pool.c - the NFS driver's connections to the server: a pool of
 * slots, each able to hold one libnfs context, handed to one call at a time.
 *
 * A libnfs context is one TCP connection with its own RPC state, and it is
 * not thread-safe.  The pool has up to 64 slots (config->connections; 16 by
 * default).  Every call of the driver takes a free slot for its whole
 * duration (dlc_nfs_slot_take) and gives it back (dlc_nfs_slot_give), so a
 * context is only ever used by the thread that holds its slot.  Slots connect
 * lazily: a call that finds every connected slot busy takes an unconnected
 * one and connects it, so the pool grows to the parallelism that the crawl
 * and the readers reach, and no further.  NFSv4 contexts get distinct client
 * names ("dlcache.HOST.PID.SLOT.GENERATION"): libnfs's default name only
 * differs by the second it was made in, and contexts of one process that
 * share a name make the server answer NFS4ERR_STALE_CLIENTID.
 *
 * Reconnect.  libnfs 4.0 does not reconnect a synchronous context (once the
 * server restarts, every call on it fails with EIO at once), does not renew
 * an NFSv4 lease (after an idle lease period, OPEN and READ fail with
 * NFS4ERR_EXPIRED, ERANGE here), and reports a call that timed out as EINTR.
 * Any of these marks the connection lost (dlc_nfs_slot_drop): the slot shuts
 * its socket down, closes the handles open on it (which then fail at once
 * and free their memory), destroys the context, and connects afresh on its
 * next use, where the files re-open by path.  A call that failed that way on
 * a connection made before the call began is sent once more on a new
 * connection of the same slot, since the old one may have died while idle; a
 * call that fails on a connection it made itself fails with EIO.  This is
 * transport, not retry policy: an answer from the server is never asked for
 * again.
 *
 * Timeouts.  Every context gets nfs_set_timeout (nfs_timeout=, default 30 s),
 * which bounds connecting, mounting and every call, so a hung or unreachable
 * server gives EIO after at most that long, and a dead one (connection
 * refused or reset) at once.  After a connect failed, calls that would
 * connect fail at once for half a second (quiet_until_ns): readers that
 * retry do not hammer a dead server, and each attempt costs a context, of
 * which libnfs 4.0 leaks 28 bytes (its default client name).
 *
 * What is locked by what: see backend_nfs_private.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dlcache/log.h"
#include "backend_nfs_private.h"

#define CONNECT_QUIET_NS 500000000LL

static int64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static uint64_t bit(unsigned s)
{
	return (uint64_t)1 << s;
}

static unsigned lowest(uint64_t set)
{
	return (unsigned)__builtin_ctzll(set);
}

/* Takes a free slot: one in prefer, else a connected one, else any; waits
 * while every slot is busy. */
unsigned dlc_nfs_slot_take(struct nfs_backend *nb, uint64_t prefer)
{
	uint64_t all = nb->nslots == 64 ? UINT64_MAX : bit(nb->nslots) - 1;
	uint64_t free_slots;
	unsigned s;

	pthread_mutex_lock(&nb->lock);
	while ((free_slots = all & ~nb->busy) == 0)
		pthread_cond_wait(&nb->given_back, &nb->lock);
	if (free_slots & prefer)
		s = lowest(free_slots & prefer);
	else if (free_slots & nb->connected)
		s = lowest(free_slots & nb->connected);
	else
		s = lowest(free_slots);
	nb->busy |= bit(s);
	pthread_mutex_unlock(&nb->lock);
	return s;
}

/* Takes slot s itself, waiting until it is free. */
void dlc_nfs_slot_take_exactly(struct nfs_backend *nb, unsigned s)
{
	pthread_mutex_lock(&nb->lock);
	while (nb->busy & bit(s))
		pthread_cond_wait(&nb->given_back, &nb->lock);
	nb->busy |= bit(s);
	pthread_mutex_unlock(&nb->lock);
}

void dlc_nfs_slot_give(struct nfs_backend *nb, unsigned s)
{
	pthread_mutex_lock(&nb->lock);
	nb->busy &= ~bit(s);
	if (nb->slots[s].nfs)
		nb->connected |= bit(s);
	else
		nb->connected &= ~bit(s);
	pthread_cond_broadcast(&nb->given_back);
	pthread_mutex_unlock(&nb->lock);
}

void dlc_nfs_file_attach(struct nfs_backend *nb, unsigned s, struct dlc_backend_file *file,
			 struct nfsfh *handle)
{
	struct nfs_slot *slot = &nb->slots[s];

	file->on[s].handle = handle;
	file->on[s].prev = NULL;
	file->on[s].next = slot->files;
	if (slot->files)
		slot->files->on[s].prev = file;
	slot->files = file;
	atomic_fetch_or(&file->open_on, bit(s));
}

/* Unlinks file from slot s and returns its handle there. */
struct nfsfh *dlc_nfs_file_detach(struct nfs_backend *nb, unsigned s,
				  struct dlc_backend_file *file)
{
	struct file_on_slot *on = &file->on[s];
	struct nfsfh *handle = on->handle;

	if (on->prev)
		on->prev->on[s].next = on->next;
	else
		nb->slots[s].files = on->next;
	if (on->next)
		on->next->on[s].prev = on->prev;
	on->handle = NULL;
	on->prev = on->next = NULL;
	atomic_fetch_and(&file->open_on, ~bit(s));
	return handle;
}

/*
 * Connects slot s (held, without a context).  0, or -errno with libnfs's
 * words for it in *why (malloc'd, may be NULL).
 */
int dlc_nfs_slot_connect(struct nfs_backend *nb, unsigned s, char **why)
{
	struct nfs_slot *slot = &nb->slots[s];
	struct nfs_context *nfs;
	char name[160];
	int rc = 0;

	*why = NULL;
	pthread_mutex_lock(&nb->connect_lock);
	nfs = nfs_init_context();
	if (nfs && (nb->source.nfsport || nb->source.mountport)) {
		/* libnfs 4.0 takes the ports from URL arguments only. */
		char url[96];
		struct nfs_url *parsed;

		snprintf(url, sizeof(url), "nfs://server/?nfsport=%u&mountport=%u",
			 nb->source.nfsport, nb->source.mountport);
		parsed = nfs_parse_url_dir(nfs, url);
		if (!parsed)
			rc = -ENOMEM;
		nfs_destroy_url(parsed);
	}
	pthread_mutex_unlock(&nb->connect_lock);
	if (!nfs)
		return -ENOMEM;
	if (rc < 0)
		goto err;

	nfs_set_version(nfs, nb->source.version);      /* NFS_V3 is 3, NFS_V4 is 4 */
	nfs_set_timeout(nfs, nb->timeout_ms);
	nfs_set_autoreconnect(nfs, 0);   /* it cannot in 4.0; dlc_nfs_slot_drop does */
	nfs_set_dircache(nfs, 0);        /* every directory is listed once */
	if (nb->source.version == 4) {
		/* The default name leaks here (28 bytes): libnfs 4.0 does not free it. */
		snprintf(name, sizeof(name), "dlcache.%s.%d.%u.%u", nb->hostname, (int)getpid(),
			 s, slot->generation);
		nfs4_set_client_name(nfs, name);
	}
	rc = nfs_mount(nfs, nb->source.server, nb->source.path);
	if (rc < 0)
		goto err;
	slot->nfs = nfs;
	slot->generation++;
	return 0;

err:
	if (nfs_get_error(nfs))
		*why = strdup(nfs_get_error(nfs));
	nfs_destroy_context(nfs);
	return rc < 0 ? rc : -EIO;
}

/* Errors that leave the connection useless (see "Reconnect" above). */
bool dlc_nfs_connection_lost(int rc)
{
	switch (-rc) {
	case EIO:
	case EINTR:             /* libnfs: the call timed out */
	case ERANGE:            /* libnfs: NFSv4 state lost (lease expired, client id stale) */
	case ETIMEDOUT:
	case ECONNRESET:
	case ECONNREFUSED:
	case ENOTCONN:
	case EPIPE:
		return true;
	default:
		return false;
	}
}

/* Drops slot s's connection (held) after a call failed with rc. */
void dlc_nfs_slot_drop(struct nfs_backend *nb, unsigned s, int rc)
{
	struct nfs_slot *slot = &nb->slots[s];
	int fd = nfs_get_fd(slot->nfs);

	/* Whatever is sent from here fails at once instead of waiting for a
	 * server that may not answer: closing a handle then only frees it. */
	if (fd >= 0)
		shutdown(fd, SHUT_RDWR);
	while (slot->files)
		nfs_close(slot->nfs, dlc_nfs_file_detach(nb, s, slot->files));
	nfs_destroy_context(slot->nfs);
	slot->nfs = NULL;
	dlc_log(DLC_LOG_INFO, "connection %u to NFS server %s lost (%s); it reconnects when next used",
		s, nb->source.server, rc == -EINTR ? "a call timed out" :
		rc == -ERANGE ? "the server dropped this client's NFSv4 state" : strerror(-rc));
}

/*
 * Runs run(nb, s, arg) holding a connected slot, preferring the slots in
 * prefer.  When it fails because a connection made before the call was lost,
 * the slot connects afresh and runs it once more.  Returns run's result; a
 * lost connection or a failed connect is -EIO.
 */
int dlc_nfs_run_on_slot(struct nfs_backend *nb, uint64_t prefer,
			int (*run)(struct nfs_backend *nb, unsigned s, void *arg), void *arg)
{
	unsigned s = dlc_nfs_slot_take(nb, prefer);
	bool fresh = false;
	int rc;

	for (;;) {
		if (!nb->slots[s].nfs) {
			char *why;

			if (monotonic_ns() < atomic_load(&nb->quiet_until_ns)) {
				rc = -EIO;
				break;
			}
			rc = dlc_nfs_slot_connect(nb, s, &why);
			if (rc < 0) {
				dlc_log(DLC_LOG_INFO, "cannot connect to NFS server %s: %s",
					nb->source.server, why ? why : strerror(-rc));
				free(why);
				if (rc != -ENOMEM) {
					atomic_store(&nb->quiet_until_ns,
						     monotonic_ns() + CONNECT_QUIET_NS);
					rc = -EIO;
				}
				break;
			}
			fresh = true;
		}
		rc = run(nb, s, arg);
		if (rc >= 0 || !dlc_nfs_connection_lost(rc))
			break;
		dlc_nfs_slot_drop(nb, s, rc);
		if (fresh) {
			rc = -EIO;
			break;
		}
	}
	dlc_nfs_slot_give(nb, s);
	return rc;
}
