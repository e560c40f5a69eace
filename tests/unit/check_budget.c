/*
 * check_budget.c - the memory budget: what fits is taken at once, what does
 * not waits until bytes come back, optional work never waits and stops at
 * its ceiling, one request larger than the limit passes only alone, and the
 * peak and wait counts say what happened.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "dlcache/budget.h"

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
	tcase_add_test(tc, a_request_over_the_limit_passes_only_alone);
	tcase_add_test(tc, no_budget_takes_nothing);
	suite_add_tcase(suite, tc);
	runner = srunner_create(suite);
	srunner_run_all(runner, CK_ENV);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? 1 : 0;
}
