/*
 * check_pending.c - the state machine of a request answered once
 * (src/fuse/pending.h): by its work, by its interrupt, or by the reaper
 * once its deadline is past, over a fake of the three libfuse calls
 * pending.c makes (a request with its own lock, as libfuse's: the
 * interrupt callback runs under it, and registration takes it).
 *
 * pending.c is compiled into this test with those calls renamed to the
 * fakes; the rest (stats, deadline, log) is the library's.  The race test
 * runs owners that claim, an interrupter and the reaper against each
 * other on requests whose reaping falls within a millisecond of their
 * claim, and frees (and poisons) each struct as soon as its claim returned:
 * every request is answered exactly once, and under ASan (tests/sanitize.sh)
 * a reaper that touched a struct after the claim is a use-after-free.
 */
#include <check.h>
#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* libfuse's request is opaque to pending.c: the fake's own. */
struct fuse_req {
	pthread_mutex_t lock;
	fuse_interrupt_func_t func;
	void *data;
	atomic_int replies;
	atomic_int error;               /* of the last reply; 0: the work's */
};

static void fake_interrupt_func(fuse_req_t req, fuse_interrupt_func_t func, void *data)
{
	pthread_mutex_lock(&req->lock);
	req->func = func;
	req->data = data;
	pthread_mutex_unlock(&req->lock);
}

static int fake_reply_err(fuse_req_t req, int err)
{
	/* A reply is a write to /dev/fuse: it takes a while, a window for an
	 * owner that frees its struct too early. */
	nanosleep(&(struct timespec) { 0, 20000 }, NULL);
	atomic_store(&req->error, err);
	atomic_fetch_add(&req->replies, 1);
	return 0;
}

static int fake_req_interrupted(fuse_req_t req)
{
	(void)req;
	return 0;
}

#define fuse_req_interrupt_func fake_interrupt_func
#define fuse_reply_err fake_reply_err
#define fuse_req_interrupted fake_req_interrupted
#include "../../src/fuse/pending.c"
#undef fuse_req_interrupt_func
#undef fuse_reply_err
#undef fuse_req_interrupted

#include "dlcache/deadline.h"
#include "dlcache/stats.h"

/* The kernel's INTERRUPT, as libfuse's handler: the callback under the lock,
 * for a request not answered yet (an answered one is off libfuse's list). */
static void interrupt(fuse_req_t req)
{
	pthread_mutex_lock(&req->lock);
	if (!atomic_load(&req->replies) && req->func)
		req->func(req, req->data);
	pthread_mutex_unlock(&req->lock);
}

static struct dlc_stats stats;

static void setup(void)
{
	dlc_stats_init(&stats);
}

static void teardown(void)
{
	dlc_pending_stop_reaper();
	dlc_stats_destroy(&stats);
}

static void init_req(struct fuse_req *req)
{
	memset(req, 0, sizeof(*req));
	pthread_mutex_init(&req->lock, NULL);
}

static void sleep_us(long us)
{
	nanosleep(&(struct timespec) { us / 1000000, us % 1000000 * 1000 }, NULL);
}

START_TEST(test_a_request_past_its_deadline_is_answered_eio_by_the_reaper)
{
	struct fuse_req req;
	struct dlc_pending pending;
	uint64_t start = dlc_deadline_now();

	init_req(&req);
	ck_assert(dlc_pending_watch(&pending, &req, &stats, start + 100000000ULL, NULL));
	for (int i = 0; i < 300 && !atomic_load(&req.replies); i++)
		sleep_us(10000);
	ck_assert_int_eq(atomic_load(&req.replies), 1);
	ck_assert_int_eq(atomic_load(&req.error), EIO);
	/* Not before deadline + grace, and soon after. */
	ck_assert_uint_ge(dlc_deadline_now() - start, 100000000ULL + DLC_PENDING_GRACE_NS);
	ck_assert_uint_lt(dlc_deadline_now() - start, 100000000ULL + DLC_PENDING_GRACE_NS + 300000000ULL);
	ck_assert(!dlc_pending_wanted(&pending));
	ck_assert(!dlc_pending_claim(&pending));
	ck_assert_ptr_null(req.func);
	ck_assert_uint_eq(dlc_stats_get(&stats, DLC_STAT_EXPIRED), 1);
	ck_assert_uint_eq(dlc_stats_get(&stats, DLC_STAT_INTERRUPTED), 0);
}
END_TEST

START_TEST(test_a_request_claimed_in_time_or_without_deadline_is_not_reaped)
{
	struct fuse_req timed, untimed;
	struct dlc_pending pending_timed, pending_untimed;

	init_req(&timed);
	init_req(&untimed);
	ck_assert(dlc_pending_watch(&pending_timed, &timed, &stats, dlc_deadline_now() + 50000000ULL,
				    NULL));
	ck_assert(dlc_pending_watch(&pending_untimed, &untimed, &stats, 0, NULL));
	ck_assert(dlc_pending_claim(&pending_timed));
	/* Claimed: off the registry (the struct may go); the reaper stays quiet. */
	memset(&pending_timed, 0xa5, sizeof(pending_timed));
	sleep_us(50000 + DLC_PENDING_GRACE_NS / 1000 + 200000);
	ck_assert_int_eq(atomic_load(&timed.replies), 0);
	ck_assert_int_eq(atomic_load(&untimed.replies), 0);
	ck_assert(dlc_pending_wanted(&pending_untimed));
	ck_assert(dlc_pending_claim(&pending_untimed));
	ck_assert_uint_eq(dlc_stats_get(&stats, DLC_STAT_EXPIRED), 0);
}
END_TEST

START_TEST(test_an_interrupt_answers_first_and_the_reaper_skips_it)
{
	struct fuse_req req;
	struct dlc_pending pending;

	init_req(&req);
	ck_assert(dlc_pending_watch(&pending, &req, &stats, dlc_deadline_now(), NULL));
	interrupt(&req);
	ck_assert_int_eq(atomic_load(&req.error), EINTR);
	sleep_us(DLC_PENDING_GRACE_NS / 1000 + 200000);
	ck_assert_int_eq(atomic_load(&req.replies), 1);
	ck_assert(!dlc_pending_claim(&pending));
	ck_assert_uint_eq(dlc_stats_get(&stats, DLC_STAT_EXPIRED), 0);
	ck_assert_uint_eq(dlc_stats_get(&stats, DLC_STAT_INTERRUPTED), 1);
}
END_TEST

#define OWNERS 4
#define PER_OWNER 1500

static struct fuse_req race_reqs[OWNERS * PER_OWNER];
static atomic_bool race_over;

static unsigned next_random(unsigned *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return *seed >> 8;
}

/* An owner: watches a request due to the reaper within a millisecond, waits
 * up to a millisecond, claims, answers if it won, frees the struct. */
static void *own(void *arg)
{
	unsigned index = (unsigned)(uintptr_t)arg, seed = index * 7919u + 1;

	for (unsigned i = 0; i < PER_OWNER; i++) {
		struct fuse_req *req = &race_reqs[index * PER_OWNER + i];
		struct dlc_pending *pending = malloc(sizeof(*pending));
		uint64_t reap_at = dlc_deadline_now() + next_random(&seed) % 1000000u;

		ck_assert_ptr_nonnull(pending);
		if (dlc_pending_watch(pending, req, &stats, reap_at - DLC_PENDING_GRACE_NS, NULL)) {
			sleep_us(next_random(&seed) % 1000);
			if (dlc_pending_claim(pending))
				fake_reply_err(req, 0);
		}
		memset(pending, 0xa5, sizeof(*pending));
		free(pending);
	}
	return NULL;
}

static void *interrupt_at_random(void *arg)
{
	unsigned seed = 4242;

	(void)arg;
	while (!atomic_load(&race_over)) {
		interrupt(&race_reqs[next_random(&seed) % (OWNERS * PER_OWNER)]);
		sleep_us(50);
	}
	return NULL;
}

START_TEST(test_work_interrupt_and_reaper_race_and_answer_once)
{
	pthread_t owners[OWNERS], interrupter;
	uint64_t by_work = 0, by_interrupt = 0, by_reaper = 0;

	for (unsigned i = 0; i < OWNERS * PER_OWNER; i++)
		init_req(&race_reqs[i]);
	atomic_store(&race_over, false);
	ck_assert_int_eq(pthread_create(&interrupter, NULL, interrupt_at_random, NULL), 0);
	for (unsigned i = 0; i < OWNERS; i++)
		ck_assert_int_eq(pthread_create(&owners[i], NULL, own, (void *)(uintptr_t)i), 0);
	for (unsigned i = 0; i < OWNERS; i++)
		pthread_join(owners[i], NULL);
	atomic_store(&race_over, true);
	pthread_join(interrupter, NULL);
	for (unsigned i = 0; i < OWNERS * PER_OWNER; i++) {
		struct fuse_req *req = &race_reqs[i];
		int replies = atomic_load(&req->replies);

		ck_assert_msg(replies == 1, "request %u answered %d times", i, replies);
		switch (atomic_load(&req->error)) {
		case 0:
			by_work++;
			break;
		case EINTR:
			by_interrupt++;
			break;
		case EIO:
			by_reaper++;
			break;
		default:
			ck_abort_msg("request %u answered %d", i, atomic_load(&req->error));
		}
	}
	ck_assert_uint_eq(dlc_stats_get(&stats, DLC_STAT_EXPIRED), by_reaper);
	ck_assert_uint_eq(dlc_stats_get(&stats, DLC_STAT_INTERRUPTED), by_interrupt);
	/* Each side won some of the races. */
	ck_assert_uint_gt(by_work, 0);
	ck_assert_uint_gt(by_reaper, 0);
}
END_TEST

static Suite *pending_suite(void)
{
	Suite *s = suite_create("pending");
	TCase *tc = tcase_create("answered once");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_a_request_past_its_deadline_is_answered_eio_by_the_reaper);
	tcase_add_test(tc, test_a_request_claimed_in_time_or_without_deadline_is_not_reaped);
	tcase_add_test(tc, test_an_interrupt_answers_first_and_the_reaper_skips_it);
	tcase_add_test(tc, test_work_interrupt_and_reaper_race_and_answer_once);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *runner = srunner_create(pending_suite());
	int failed;

	srunner_run_all(runner, CK_NORMAL);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
