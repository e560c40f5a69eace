/*
 * check_scores.c - the per-inode importance table and its file.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlcache/scores.h"

static char dir[64];
static char file[128];

static void setup(void)
{
	strcpy(dir, "/tmp/check_scores.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/scores.bin", dir);
}

static void teardown(void)
{
	char tmp[160];

	snprintf(tmp, sizeof(tmp), "%s.tmp", file);
	unlink(tmp);
	unlink(file);
	rmdir(dir);
}

START_TEST(starts_unknown_and_counts_known)
{
	struct dlc_scores s;

	ck_assert_int_eq(dlc_scores_init(&s, 100), 0);
	ck_assert_uint_eq(s.known, 0);
	for (uint32_t ino = 1; ino <= 100; ino++)
		ck_assert(isnan(s.values[ino]));
	dlc_scores_set(&s, 5, 1.5f);
	dlc_scores_set(&s, 5, 2.5f);
	dlc_scores_set(&s, 7, -3.0f);
	ck_assert_uint_eq(s.known, 2);
	dlc_scores_set(&s, 7, NAN);
	ck_assert_uint_eq(s.known, 1);
	ck_assert(s.values[5] == 2.5f);
	dlc_scores_reset(&s);
	ck_assert_uint_eq(s.known, 0);
	ck_assert(isnan(s.values[5]));
	dlc_scores_destroy(&s);
}
END_TEST

START_TEST(save_then_load_round_trips_in_place)
{
	struct dlc_scores a, b;
	float *array;

	ck_assert_int_eq(dlc_scores_init(&a, 1000), 0);
	ck_assert_int_eq(dlc_scores_init(&b, 1000), 0);
	for (uint32_t ino = 1; ino <= 1000; ino += 3)
		dlc_scores_set(&a, ino, (float)ino / 7.0f);
	ck_assert_int_eq(dlc_scores_save(&a, file, 42), 0);
	array = b.values;
	ck_assert_int_eq(dlc_scores_load(&b, file, 42), 0);
	ck_assert_ptr_eq(b.values, array);
	ck_assert_uint_eq(b.known, a.known);
	for (uint32_t ino = 1; ino <= 1000; ino++) {
		if (isnan(a.values[ino]))
			ck_assert(isnan(b.values[ino]));
		else
			ck_assert(a.values[ino] == b.values[ino]);
	}
	dlc_scores_destroy(&a);
	dlc_scores_destroy(&b);
}
END_TEST

START_TEST(scores_of_another_snapshot_or_size_are_not_loaded)
{
	struct dlc_scores a, b, c;

	ck_assert_int_eq(dlc_scores_init(&a, 10), 0);
	ck_assert_int_eq(dlc_scores_init(&b, 10), 0);
	ck_assert_int_eq(dlc_scores_init(&c, 11), 0);
	dlc_scores_set(&a, 1, 1.0f);
	ck_assert_int_eq(dlc_scores_save(&a, file, 1), 0);
	ck_assert_int_eq(dlc_scores_load(&b, file, 2), DLC_SCORES_OTHER_SNAPSHOT);
	ck_assert_int_eq(dlc_scores_load(&c, file, 1), DLC_SCORES_OTHER_SNAPSHOT);
	ck_assert_uint_eq(b.known, 0);
	ck_assert(isnan(b.values[1]));
	dlc_scores_destroy(&a);
	dlc_scores_destroy(&b);
	dlc_scores_destroy(&c);
}
END_TEST

START_TEST(a_damaged_or_missing_file_is_refused)
{
	struct dlc_scores a, b;
	int fd;

	ck_assert_int_eq(dlc_scores_init(&a, 64), 0);
	ck_assert_int_eq(dlc_scores_init(&b, 64), 0);
	ck_assert_int_eq(dlc_scores_load(&b, file, 9), -ENOENT);
	dlc_scores_set(&a, 3, 3.0f);
	ck_assert_int_eq(dlc_scores_save(&a, file, 9), 0);
	fd = open(file, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "\x7f", 1, 32 + 40), 1);   /* a float's byte */
	close(fd);
	ck_assert_int_eq(dlc_scores_load(&b, file, 9), -EBADMSG);
	ck_assert_int_eq(truncate(file, 40), 0);
	ck_assert_int_eq(dlc_scores_load(&b, file, 9), -EBADMSG);
	ck_assert_int_eq(truncate(file, 3), 0);
	ck_assert_int_eq(dlc_scores_load(&b, file, 9), -EBADMSG);
	ck_assert_uint_eq(b.known, 0);
	dlc_scores_destroy(&a);
	dlc_scores_destroy(&b);
}
END_TEST

int main(void)
{
	Suite *suite = suite_create("scores");
	TCase *table = tcase_create("table");
	TCase *file_case = tcase_create("file");
	SRunner *runner;
	int failed;

	tcase_add_test(table, starts_unknown_and_counts_known);
	suite_add_tcase(suite, table);
	tcase_add_checked_fixture(file_case, setup, teardown);
	tcase_add_test(file_case, save_then_load_round_trips_in_place);
	tcase_add_test(file_case, scores_of_another_snapshot_or_size_are_not_loaded);
	tcase_add_test(file_case, a_damaged_or_missing_file_is_refused);
	suite_add_tcase(suite, file_case);
	runner = srunner_create(suite);
	srunner_run_all(runner, CK_ENV);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? 1 : 0;
}
