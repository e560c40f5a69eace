/*
 * check_budget.c - the memory budget: what fits is taken at once, what does
 * not waits until bytes come back (until a request's deadline at most),
 * optional work never waits and stops at its ceiling, one request larger
 * than the limit passes only alone, and the peak and wait counts say what
 * happened.  The rule (budget.h): a thread
 * holding a work charge that asks for another aborts in debug builds
 * instead of waiting for ever; a charge kept or given back frees the thread
 * to wait again; and streams that keep memory only without waiting, with
 * waiters that hold nothing, all run to the end in a budget far too small
 * for all their blocks.  dlc_budget_verify holds through all of it, and
 * catches a release of more than was taken.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dlcache/budget.h"
#include "dlcache/deadline.h"

static struct dlc_budget budget;

static void setup(void)
{
	dlc_budget_init(&budget, 100);
}

static void teardown(void)
{
	dlc_budget_destroy(&budget);
}

static struct dlc_budget_gauges gauges(void)
{
	struct dlc_budget_gauges g;

	dlc_budget_gauges(&budget, &g);
	return g;
}

START_TEST(what_fits_is_taken_and_given_back)
{
	dlc_budget_acquire(&budget, 60);
	dlc_budget_keep(&budget, 60);   /* held by a file: the thread may ask again */
	dlc_budget_acquire(&budget, 40);
	ck_assert_uint_eq(gauges().used, 100);
	dlc_budget_release(&budget, 60);
	dlc_budget_release(&budget, 40);
	ck_assert_uint_eq(gauges().used, 0);
	ck_assert_uint_eq(gauges().peak, 100);
	ck_assert_uint_eq(gauges().waits, 0);
	ck_assert_uint_eq(gauges().limit, 100);
}
END_TEST

START_TEST(optional_work_stops_at_its_ceiling_without_waiting)
{
	ck_assert(dlc_budget_has_room(&budget, 50, 50));
	ck_assert(!dlc_budget_has_room(&budget, 51, 50));
	ck_assert_uint_eq(gauges().used, 0);
	ck_assert(dlc_budget_try_acquire(&budget, 50, 50));
	ck_assert(!dlc_budget_try_acquire(&budget, 1, 50));
	ck_assert(!dlc_budget_has_room(&budget, 1, 50));
	ck_assert(dlc_budget_try_acquire(&budget, 50, 1000));   /* capped at the limit */
	ck_assert(!dlc_budget_try_acquire(&budget, 1, 1000));
	ck_assert_uint_eq(gauges().used, 100);
	dlc_budget_release(&budget, 100);
	ck_assert(!dlc_budget_try_acquire(&budget, 101, UINT64_MAX));
}
END_TEST

START_TEST(verify_holds_and_catches_a_release_of_more_than_was_taken)
{
	ck_assert_int_eq(dlc_budget_verify(&budget), 0);
	dlc_budget_acquire(&budget, 60);
	dlc_budget_keep(&budget, 60);
	ck_assert(dlc_budget_try_acquire(&budget, 30, 100));
	ck_assert_int_eq(dlc_budget_verify(&budget), 0);
	dlc_budget_release(&budget, 90);
	ck_assert_int_eq(dlc_budget_verify(&budget), 0);
	budget.used -= 1;                       /* one byte more given back than taken */
	ck_assert_int_eq(dlc_budget_verify(&budget), -EUCLEAN);
	budget.used = 0;
	ck_assert_int_eq(dlc_budget_verify(&budget), 0);
}
END_TEST

struct waiter {
	uint64_t bytes;
	_Atomic bool done;
};

static void *acquire_thread(void *arg)
{
	struct waiter *w = arg;

	dlc_budget_acquire(&budget, w->bytes);
	atomic_store(&w->done, true);
	return NULL;
}

static void pause_ms(long ms)
{
	nanosleep(&(struct timespec){ .tv_nsec = ms * 1000000L }, NULL);
}

START_TEST(a_request_that_does_not_fit_waits_for_bytes_to_come_back)
{
	struct waiter w = { .bytes = 30 };
	pthread_t thread;

	dlc_budget_acquire(&budget, 80);
	pthread_create(&thread, NULL, acquire_thread, &w);
	pause_ms(100);
	ck_assert(!atomic_load(&w.done));
	ck_assert_uint_eq(gauges().used, 80);
	dlc_budget_release(&budget, 20);
	pthread_join(thread, NULL);
	ck_assert(atomic_load(&w.done));
	ck_assert_uint_eq(gauges().used, 90);
	ck_assert_uint_eq(gauges().waits, 1);
	ck_assert_uint_le(gauges().peak, 100);
}
END_TEST

static void *release_later(void *arg)
{
	(void)arg;
	pause_ms(50);
	dlc_budget_release(&budget, 20);
	return NULL;
}

/* A request's wait ends at its deadline with nothing taken, the thread free
 * to ask again; room that comes back before the deadline is taken. */
START_TEST(a_wait_for_memory_ends_at_its_deadline)
{
	uint64_t start;
	pthread_t thread;

	dlc_budget_acquire(&budget, 80);
	dlc_budget_keep(&budget, 80);
	start = dlc_deadline_now();
	ck_assert_int_eq(dlc_budget_acquire_by(&budget, 30, start + 200000000ULL), -ETIMEDOUT);
	ck_assert_uint_ge(dlc_deadline_now() - start, 200000000ULL);
	ck_assert_uint_lt(dlc_deadline_now() - start, 2000000000ULL);
	ck_assert_uint_eq(gauges().used, 80);
	ck_assert_uint_eq(gauges().waits, 1);
	/* Past its deadline, a request that fits is still served at once. */
	ck_assert_int_eq(dlc_budget_acquire_by(&budget, 20, start), 0);
	ck_assert_uint_eq(gauges().used, 100);
	dlc_budget_release(&budget, 20);
	dlc_budget_acquire(&budget, 20);
	dlc_budget_keep(&budget, 20);
	pthread_create(&thread, NULL, release_later, NULL);
	ck_assert_int_eq(dlc_budget_acquire_by(&budget, 20, dlc_deadline_now() + 5000000000ULL), 0);
	pthread_join(thread, NULL);
	ck_assert_uint_eq(gauges().used, 100);
	ck_assert_uint_eq(gauges().waits, 2);
	dlc_budget_release(&budget, 20);
	dlc_budget_release(&budget, 80);
}
END_TEST

START_TEST(a_request_over_the_limit_passes_only_alone)
{
	struct waiter w = { .bytes = 150 };
	pthread_t thread;

	dlc_budget_charge(&budget, 10);
	pthread_create(&thread, NULL, acquire_thread, &w);
	pause_ms(100);
	ck_assert(!atomic_load(&w.done));
	dlc_budget_release(&budget, 10);
	pthread_join(thread, NULL);
	ck_assert_uint_eq(gauges().used, 150);
	dlc_budget_release(&budget, 150);
}
END_TEST

START_TEST(no_budget_takes_nothing)
{
	dlc_budget_acquire(NULL, 1ULL << 40);
	ck_assert(dlc_budget_try_acquire(NULL, 1ULL << 40, 0));
	dlc_budget_charge(NULL, 5);
	dlc_budget_release(NULL, 5);
}
END_TEST

START_TEST(kept_memory_stops_at_half_the_limit)
{
	ck_assert_uint_eq(dlc_budget_kept_ceiling(&budget), 50);
	ck_assert_uint_eq(dlc_budget_kept_ceiling(NULL), UINT64_MAX);
}
END_TEST

#ifndef NDEBUG
/*
 * The old deadlock in one thread: a source thread took its reply's buffer,
 * then waited for a block that only its own release could make room for.
 * Debug builds abort at the second request (before the rule: a wait for
 * ever, and the test runs out of time).
 */
START_TEST(a_thread_holding_budget_never_waits_for_more)
{
	dlc_budget_acquire(&budget, 60);
	dlc_budget_acquire(&budget, 50);
}
END_TEST
#endif

START_TEST(a_charge_kept_or_given_back_lets_the_thread_wait_again)
{
	dlc_budget_acquire(&budget, 30);
	dlc_budget_keep(&budget, 30);           /* an open file's bytes now */
	dlc_budget_acquire(&budget, 20);
	dlc_budget_release(&budget, 20);
	dlc_budget_acquire(&budget, 40);
	ck_assert_uint_eq(gauges().used, 70);
	dlc_budget_release(&budget, 40);
	dlc_budget_release(&budget, 30);        /* the file closed, on any thread */
	ck_assert_uint_eq(gauges().used, 0);
}
END_TEST

/*
 * blocks.c's pattern: a stream serves each read with a work charge (its
 * reply) and keeps its last KEPT blocks, taken without waiting below the
 * kept ceiling; without room it gives back its oldest and tries again, then
 * reads unbuffered.  STREAMS streams want three times the budget, and all
 * finish, with use never over the limit nor kept memory over its ceiling.
 */
#define STREAMS 12
#define KEPT 3
#define BLOCK 10
#define REPLY 5
#define STEPS 300

static _Atomic uint64_t kept_now, kept_peak;
static _Atomic unsigned unbuffered;

static void keep_count(int64_t delta)
{
	uint64_t now = atomic_fetch_add(&kept_now, (uint64_t)delta) + (uint64_t)delta;
	uint64_t peak = atomic_load(&kept_peak);

	while (now > peak && !atomic_compare_exchange_weak(&kept_peak, &peak, now))
		;
}

static void *stream_thread(void *arg)
{
	bool held[KEPT] = { false };
	unsigned next = 0;

	(void)arg;
	for (int step = 0; step < STEPS; step++) {
		bool got;

		dlc_budget_acquire(&budget, REPLY);
		/* The slot of the oldest block goes first, whatever happens. */
		if (held[next]) {
			dlc_budget_release(&budget, BLOCK);
			keep_count(-BLOCK);
			held[next] = false;
		}
		got = dlc_budget_try_acquire(&budget, BLOCK, dlc_budget_kept_ceiling(&budget));
		for (unsigned i = 1; !got && i < KEPT; i++) {
			unsigned oldest = (next + i) % KEPT;

			if (held[oldest]) {
				dlc_budget_release(&budget, BLOCK);
				keep_count(-BLOCK);
				held[oldest] = false;
				got = dlc_budget_try_acquire(&budget, BLOCK,
							     dlc_budget_kept_ceiling(&budget));
			}
		}
		if (got) {
			keep_count(BLOCK);
			held[next] = true;
		} else {
			atomic_fetch_add(&unbuffered, 1);
		}
		next = (next + 1) % KEPT;
		if (step % 16 == 0)
			sched_yield();
		dlc_budget_release(&budget, REPLY);
	}
	for (unsigned i = 0; i < KEPT; i++) {
		if (held[i]) {
			dlc_budget_release(&budget, BLOCK);
			keep_count(-BLOCK);
		}
	}
	return NULL;
}

START_TEST(streams_that_keep_memory_without_waiting_never_stop)
{
	pthread_t threads[STREAMS];

	atomic_store(&kept_now, 0);
	atomic_store(&kept_peak, 0);
	atomic_store(&unbuffered, 0);
	for (int i = 0; i < STREAMS; i++)
		ck_assert_int_eq(pthread_create(&threads[i], NULL, stream_thread, NULL), 0);
	/* check's timeout fails the test if a stream stops. */
	for (int i = 0; i < STREAMS; i++)
		pthread_join(threads[i], NULL);
	ck_assert_uint_eq(gauges().used, 0);
	ck_assert_uint_le(gauges().peak, 100);
	ck_assert_uint_le(atomic_load(&kept_peak), 50);
	ck_assert_uint_gt(atomic_load(&unbuffered), 0);        /* memory was short */
}
END_TEST

int main(void)
{
	Suite *suite = suite_create("budget");
	TCase *tc = tcase_create("budget");
	SRunner *runner;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, what_fits_is_taken_and_given_back);
	tcase_add_test(tc, optional_work_stops_at_its_ceiling_without_waiting);
	tcase_add_test(tc, a_request_that_does_not_fit_waits_for_bytes_to_come_back);
	tcase_add_test(tc, a_wait_for_memory_ends_at_its_deadline);
	tcase_add_test(tc, a_request_over_the_limit_passes_only_alone);
	tcase_add_test(tc, no_budget_takes_nothing);
	tcase_add_test(tc, kept_memory_stops_at_half_the_limit);
	tcase_add_test(tc, a_charge_kept_or_given_back_lets_the_thread_wait_again);
	tcase_add_test(tc, streams_that_keep_memory_without_waiting_never_stop);
	tcase_add_test(tc, verify_holds_and_catches_a_release_of_more_than_was_taken);
#ifndef NDEBUG
	/* An abort ends the test's own process only when check forks. */
	if (!getenv("CK_FORK") || strcmp(getenv("CK_FORK"), "no") != 0)
		tcase_add_test_raise_signal(tc, a_thread_holding_budget_never_waits_for_more, SIGABRT);
#endif
	suite_add_tcase(suite, tc);
	runner = srunner_create(suite);
	srunner_run_all(runner, CK_ENV);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? 1 : 0;
}
