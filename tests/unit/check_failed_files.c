/*
 * check_failed_files.c - the table of large files whose source read failed
 * for time a moment ago (read/failed_files.c): a file noted is recent for
 * DLC_FAILED_HOLD_NS, and a file noted again a moment ago is never the one
 * given up for a new file, however full the table.
 *
 * White box: the table is private to src/read/, so this suite compiles
 * failed_files.c in (its symbols take the place of the library's).
 */
#include <check.h>
#include <stdlib.h>

#include "../../src/read/failed_files.c"

static struct dlc_failed_files files;

static void setup(void)
{
	dlc_failed_files_init(&files);
}

static void teardown(void)
{
	dlc_failed_files_destroy(&files);
}

START_TEST(a_noted_file_is_recent_and_others_are_not)
{
	ck_assert(!dlc_failed_files_recent(&files, 7));
	dlc_failed_files_note(&files, 7);
	ck_assert(dlc_failed_files_recent(&files, 7));
	ck_assert(!dlc_failed_files_recent(&files, 8));
	/* Inode 0 is a real inode, not a free slot's. */
	ck_assert(!dlc_failed_files_recent(&files, 0));
}
END_TEST

/*
 * The soak's case: during a stall more files fail than the table holds, and
 * a file noted again in place must outlive those noted before it.  With
 * slots reused in turn, the new file took the slot of file 1000 (the first
 * taken), noted again a moment before, and its next re-read waited
 * source_timeout once more.
 */
START_TEST(a_file_noted_again_is_not_given_up_for_a_new_one)
{
	dlc_failed_files_note(&files, 1000);
	for (uint32_t ino = 1; ino < DLC_FAILED_FILES; ino++)
		dlc_failed_files_note(&files, ino);
	dlc_failed_files_note(&files, 1000);
	dlc_failed_files_note(&files, 2000);
	ck_assert_msg(dlc_failed_files_recent(&files, 1000), "the file noted again was given up");
	ck_assert(dlc_failed_files_recent(&files, 2000));
	/* The least recently noted made room. */
	ck_assert(!dlc_failed_files_recent(&files, 1));
	for (uint32_t ino = 2; ino < DLC_FAILED_FILES; ino++)
		ck_assert_msg(dlc_failed_files_recent(&files, ino), "file %u was given up", ino);
}
END_TEST

/* A file noted twice takes one slot: the table still holds as many files. */
START_TEST(a_file_noted_twice_takes_one_slot)
{
	for (int round = 0; round < 3; round++)
		for (uint32_t ino = 1; ino <= DLC_FAILED_FILES; ino++)
			dlc_failed_files_note(&files, ino);
	for (uint32_t ino = 1; ino <= DLC_FAILED_FILES; ino++)
		ck_assert_msg(dlc_failed_files_recent(&files, ino), "file %u was given up", ino);
}
END_TEST

/* A note lasts DLC_FAILED_HOLD_NS (one second), no longer. */
START_TEST(a_note_runs_out)
{
	struct timespec wait = { (time_t)(DLC_FAILED_HOLD_NS / 1000000000ULL),
				 (long)(DLC_FAILED_HOLD_NS % 1000000000ULL) + 50000000L };

	dlc_failed_files_note(&files, 5);
	nanosleep(&wait, NULL);
	ck_assert(!dlc_failed_files_recent(&files, 5));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("failed_files");
	TCase *tc = tcase_create("table");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, a_noted_file_is_recent_and_others_are_not);
	tcase_add_test(tc, a_file_noted_again_is_not_given_up_for_a_new_one);
	tcase_add_test(tc, a_file_noted_twice_takes_one_slot);
	tcase_add_test(tc, a_note_runs_out);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
