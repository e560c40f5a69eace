/*
 * page_drop.c - drops the kernel's pages of failed reads (page_drop.h): a
 * ring of failed ranges under one mutex, and one thread that sends each to
 * the kernel as FUSE_NOTIFY_INVAL_INODE.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "page_drop.h"
#include "dlcache/log.h"

struct range {
	fuse_ino_t ino;
	off_t off;
	off_t len;
};

struct dlc_page_drop {
	struct dlc_stats *stats;
	struct fuse_session *session;   /* set before serving, read by the thread */
	pthread_mutex_t lock;
	pthread_cond_t wake;            /* signalled on a note and on stop */
	struct range queue[DLC_PAGE_DROP_QUEUE];        /* lock: a ring */
	unsigned head, count;           /* lock: the oldest entry, how many */
	bool stopping;                  /* lock */
	bool warned;                    /* the thread's: a failed notice was logged */
	pthread_t thread;
};

/* Sends one range; the kernel answers ENOENT for an inode it no longer
 * holds (nothing to drop), which is no failure. */
static void send_range(struct dlc_page_drop *drop, struct fuse_session *session, const struct range *r)
{
	int rc = fuse_lowlevel_notify_inval_inode(session, r->ino, r->off, r->len);

	if (rc == 0) {
		dlc_stats_add(drop->stats, DLC_STAT_PAGE_DROPS, 1);
	} else if (rc != -ENOENT && rc != -ENOTCONN && rc != -ENODEV && !drop->warned) {
		/* Once: the pages then cost round trips, no bytes. */
		drop->warned = true;
		dlc_log(DLC_LOG_WARNING, "the kernel refused to drop the pages of a failed read (%s); "
			"later reads of such pages go one page per request", strerror(-rc));
	}
}

static void *run(void *arg)
{
	struct dlc_page_drop *drop = arg;

	pthread_mutex_lock(&drop->lock);
	for (;;) {
		struct fuse_session *session;
		struct range r;

		while (!drop->count && !drop->stopping)
			pthread_cond_wait(&drop->wake, &drop->lock);
		if (drop->stopping)
			break;
		r = drop->queue[drop->head];
		drop->head = (drop->head + 1) % DLC_PAGE_DROP_QUEUE;
		drop->count--;
		session = drop->session;
		/* The notice may wait for reads of those pages in flight: never
		 * under the lock, which notes take on FUSE threads. */
		pthread_mutex_unlock(&drop->lock);
		if (session)
			send_range(drop, session, &r);
		pthread_mutex_lock(&drop->lock);
	}
	pthread_mutex_unlock(&drop->lock);
	return NULL;
}

struct dlc_page_drop *dlc_page_drop_new(struct dlc_stats *stats)
{
	struct dlc_page_drop *drop = calloc(1, sizeof(*drop));

	if (!drop)
		return NULL;
	drop->stats = stats;
	pthread_mutex_init(&drop->lock, NULL);
	pthread_cond_init(&drop->wake, NULL);
	if (pthread_create(&drop->thread, NULL, run, drop) != 0) {
		pthread_cond_destroy(&drop->wake);
		pthread_mutex_destroy(&drop->lock);
		free(drop);
		return NULL;
	}
	return drop;
}

void dlc_page_drop_set_session(struct dlc_page_drop *drop, struct fuse_session *session)
{
	if (!drop)
		return;
	pthread_mutex_lock(&drop->lock);
	drop->session = session;
	pthread_mutex_unlock(&drop->lock);
}

void dlc_page_drop_note(struct dlc_page_drop *drop, fuse_ino_t ino, off_t off, size_t len)
{
	struct range *last;

	if (!drop || !len)
		return;
	pthread_mutex_lock(&drop->lock);
	last = drop->count ? &drop->queue[(drop->head + drop->count - 1) % DLC_PAGE_DROP_QUEUE] : NULL;
	if (last && last->ino == ino && off <= last->off + last->len && off + (off_t)len >= last->off) {
		/* Overlapping or adjacent: one range covers both. */
		off_t end = last->off + last->len > off + (off_t)len ? last->off + last->len
								       : off + (off_t)len;

		last->off = last->off < off ? last->off : off;
		last->len = end - last->off;
	} else if (drop->count < DLC_PAGE_DROP_QUEUE) {
		drop->queue[(drop->head + drop->count) % DLC_PAGE_DROP_QUEUE] =
			(struct range) { .ino = ino, .off = off, .len = (off_t)len };
		drop->count++;
		pthread_cond_signal(&drop->wake);
	}
	/* Full: left out (page_drop.h). */
	pthread_mutex_unlock(&drop->lock);
}

void dlc_page_drop_free(struct dlc_page_drop *drop)
{
	if (!drop)
		return;
	pthread_mutex_lock(&drop->lock);
	drop->stopping = true;
	pthread_cond_signal(&drop->wake);
	pthread_mutex_unlock(&drop->lock);
	pthread_join(drop->thread, NULL);
	pthread_cond_destroy(&drop->wake);
	pthread_mutex_destroy(&drop->lock);
	free(drop);
}
