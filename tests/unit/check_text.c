/*
 * check_text.c - a text counted in the budget as it grows: every byte
 * allocated is taken first, a text that would pass the ceiling fails with
 * -ENOMEM and gives everything back, and a finished text keeps exactly its
 * length taken.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/text.h"

static struct dlc_budget budget;

static void setup(void)
{
	dlc_budget_init(&budget, 1 << 20);
}

static void teardown(void)
{
	dlc_budget_destroy(&budget);
}

static uint64_t used(void)
{
	struct dlc_budget_gauges g;

	dlc_budget_gauges(&budget, &g);
	return g.used;
}

START_TEST(a_finished_text_keeps_exactly_its_length_taken)
{
	struct dlc_text text;
	char line[100], *data;
	size_t len;

	memset(line, 'x', sizeof(line));
	dlc_text_init(&text, &budget, budget.limit);
	for (int i = 0; i < 2000; i++)
		ck_assert_int_eq(dlc_text_append(&text, line, sizeof(line)), 0);
	ck_assert_uint_ge(used(), 200000);
	ck_assert_int_eq(dlc_text_finish(&text, &data, &len), 0);
	ck_assert_uint_eq(len, 200000);
	ck_assert_uint_eq(used(), 200000);
	ck_assert_int_eq(data[199999], 'x');
	free(data);
	dlc_budget_release(&budget, len);
	ck_assert_uint_eq(used(), 0);
}
END_TEST

START_TEST(a_text_past_the_ceiling_fails_and_gives_everything_back)
{
	struct dlc_text text;
	char line[4096] = { 0 };
	int rc = 0, lines = 0;

	/* Half the budget is held elsewhere; the text may take the rest. */
	ck_assert(dlc_budget_try_acquire(&budget, budget.limit / 2, budget.limit));
	dlc_text_init(&text, &budget, budget.limit);
	while (lines < 1000 && (rc = dlc_text_append(&text, line, sizeof(line))) == 0)
		lines++;
	ck_assert_int_eq(rc, -ENOMEM);
	ck_assert_int_lt(lines, 128);   /* 512 KiB left: it stopped before */
	ck_assert_uint_le(used(), budget.limit);
	ck_assert_uint_eq(text.len, (size_t)lines * sizeof(line));
	dlc_text_discard(&text);
	ck_assert_uint_eq(used(), budget.limit / 2);
	dlc_budget_release(&budget, budget.limit / 2);
}
END_TEST

START_TEST(an_empty_text_is_null_and_takes_nothing)
{
	struct dlc_text text;
	char *data;
	size_t len;

	dlc_text_init(&text, &budget, budget.limit);
	ck_assert_int_eq(dlc_text_finish(&text, &data, &len), 0);
	ck_assert_ptr_null(data);
	ck_assert_uint_eq(len, 0);
	ck_assert_uint_eq(used(), 0);
}
END_TEST

int main(void)
{
	Suite *suite = suite_create("text");
	TCase *tc = tcase_create("text");
	SRunner *runner;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, a_finished_text_keeps_exactly_its_length_taken);
	tcase_add_test(tc, a_text_past_the_ceiling_fails_and_gives_everything_back);
	tcase_add_test(tc, an_empty_text_is_null_and_takes_nothing);
	suite_add_tcase(suite, tc);
	runner = srunner_create(suite);
	srunner_run_all(runner, CK_ENV);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? 1 : 0;
}
