/*
 * check_kernel_readahead.c - finding a mount's device in a mountinfo file
 * (the last mount on a path wins, escaped names match their path) and
 * writing the readahead window, in KiB, to its backing device's
 * read_ahead_kb, over a fake /sys/class/bdi in a temporary directory.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlcache/kernel_readahead.h"

static char dir[] = "/tmp/check_kernel_readahead.XXXXXX";
static char mountinfo[256], bdi[256];

static void setup(void)
{
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(mountinfo, sizeof(mountinfo), "%s/mountinfo", dir);
	snprintf(bdi, sizeof(bdi), "%s/bdi", dir);
	f = fopen(mountinfo, "w");
	ck_assert_ptr_nonnull(f);
	fputs("22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
	      "30 1 0:50 / /mnt/data rw - fuse.dlcache /src rw\n"
	      "31 30 0:51 / /mnt/data rw - fuse.dlcache /src rw\n"
	      "32 1 0:52 / /mnt/a\\040b\\134c rw - fuse.dlcache /src rw\n"
	      "garbage\n", f);
	fclose(f);
	ck_assert_int_eq(mkdir(bdi, 0700), 0);
}

static void teardown(void)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	strcpy(dir, "/tmp/check_kernel_readahead.XXXXXX");
}

/* Makes bdi/DEV/read_ahead_kb holding "128\n"; its path into path. */
static void fake_device(const char *dev, char path[512])
{
	FILE *f;

	snprintf(path, 512, "%s/%s", bdi, dev);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	strcat(path, "/read_ahead_kb");
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("128\n", f);
	fclose(f);
}

static void expect_file(const char *path, const char *text)
{
	char buf[64] = "";
	FILE *f = fopen(path, "r");

	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	ck_assert_str_eq(buf, text);
}

START_TEST(the_mount_on_top_of_a_path_is_the_one_found)
{
	char dev[64];

	ck_assert_int_eq(dlc_mount_device(mountinfo, "/mnt/data", dev, sizeof(dev)), 0);
	ck_assert_str_eq(dev, "0:51");
	ck_assert_int_eq(dlc_mount_device(mountinfo, "/proc", dev, sizeof(dev)), 0);
	ck_assert_str_eq(dev, "0:21");
	ck_assert_int_eq(dlc_mount_device(mountinfo, "/mnt", dev, sizeof(dev)), -ENOENT);
	ck_assert_int_eq(dlc_mount_device(mountinfo, "/mnt/dat", dev, sizeof(dev)), -ENOENT);
	ck_assert_int_eq(dlc_mount_device(mountinfo, "/proc", dev, 4), -ENAMETOOLONG);
	ck_assert_int_eq(dlc_mount_device("/nonexistent/mountinfo", "/proc", dev, sizeof(dev)), -ENOENT);
}
END_TEST

START_TEST(escaped_mount_points_match_their_path)
{
	char dev[64];

	ck_assert_int_eq(dlc_mount_device(mountinfo, "/mnt/a b\\c", dev, sizeof(dev)), 0);
	ck_assert_str_eq(dev, "0:52");
	ck_assert_int_eq(dlc_mount_device(mountinfo, "/mnt/a\\040b\\134c", dev, sizeof(dev)), -ENOENT);
}
END_TEST

START_TEST(the_window_is_written_in_kib_to_the_mounts_device)
{
	char lower[512], top[512];

	fake_device("0:50", lower);
	fake_device("0:51", top);
	ck_assert_int_eq(dlc_kernel_readahead_set(mountinfo, bdi, "/mnt/data", 4u << 20), 0);
	expect_file(top, "4096\n");
	expect_file(lower, "128\n");
	/* Rounded down to KiB, at least 4 KiB. */
	ck_assert_int_eq(dlc_kernel_readahead_set(mountinfo, bdi, "/mnt/data", 1000), 0);
	expect_file(top, "4\n");
	ck_assert_int_eq(dlc_kernel_readahead_set(mountinfo, bdi, "/mnt/data", 5000), 0);
	expect_file(top, "4\n");
}
END_TEST

START_TEST(a_mount_or_device_that_is_not_there_is_an_error)
{
	ck_assert_int_eq(dlc_kernel_readahead_set(mountinfo, bdi, "/nowhere", 4u << 20), -ENOENT);
	/* Mounted, but its device has no read_ahead_kb (no such bdi). */
	ck_assert_int_eq(dlc_kernel_readahead_set(mountinfo, bdi, "/proc", 4u << 20), -ENOENT);
}
END_TEST

int main(void)
{
	Suite *suite = suite_create("kernel_readahead");
	TCase *tc = tcase_create("kernel_readahead");
	SRunner *runner;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, the_mount_on_top_of_a_path_is_the_one_found);
	tcase_add_test(tc, escaped_mount_points_match_their_path);
	tcase_add_test(tc, the_window_is_written_in_kib_to_the_mounts_device);
	tcase_add_test(tc, a_mount_or_device_that_is_not_there_is_an_error);
	suite_add_tcase(suite, tc);
	runner = srunner_create(suite);
	srunner_run_all(runner, CK_ENV);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? 1 : 0;
}
