/*
 * check_backend.c - choosing a driver for a source, and the NFS source forms.
 *
 * The parser of "HOST:/PATH" and "nfs://HOST/PATH?ARGS" is table-driven: each
 * good source lists the server, path, version and ports it must produce, each
 * bad one a phrase its cause must contain (every cause is one sentence ending
 * with '.').  The NFS driver's refusals at create time are checked against
 * servers that cannot answer, all on this machine: a port nobody listens on,
 * a listener that never replies, a name that does not resolve.  Mounting a
 * real export is for tests/mount/nfs.sh, which starts nfs-ganesha.
 */
#include <arpa/inet.h>
#include <check.h>
#include <pthread.h>
#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dlcache/backend.h"
#include "dlcache/deadline.h"
#include "dlcache/nfs_source.h"

/* ------------------------------------------------------------------------
 * Which sources are NFS.
 */

struct match_case {
	const char *source;
	bool nfs;
};

static const struct match_case match_cases[] = {
	{ "fileserver:/datasets/imagenet", true },
	{ "10.0.0.5:/export", true },
	{ "[fd00::5]:/export", true },
	{ "nfs://fileserver/datasets/imagenet?version=4", true },
	{ "host:relative", true },          /* claimed, then refused with a sentence */
	{ "s3://bucket/key", true },        /* likewise */
	{ "/datasets/imagenet", false },
	{ "/data/with:colon", false },
	{ "relative/dir", false },
	{ "./a:b", false },
	{ "", false },
};

START_TEST(test_matches)
{
	const struct match_case *c = &match_cases[_i];

	ck_assert_msg(dlc_nfs_source_matches(c->source) == c->nfs, "'%s' should %sbe NFS",
		      c->source, c->nfs ? "" : "not ");
}
END_TEST

/* ------------------------------------------------------------------------
 * Good sources.
 */

struct good_case {
	const char *source;
	const char *server;
	const char *path;
	int version;
	unsigned nfsport;
	unsigned mountport;
};

static const struct good_case good_cases[] = {
	{ "fileserver:/datasets/imagenet", "fileserver", "/datasets/imagenet", 4, 0, 0 },
	{ "fileserver:/", "fileserver", "/", 4, 0, 0 },
	{ "10.0.0.5:/export/", "10.0.0.5", "/export", 4, 0, 0 },
	{ "fs-1.example.com:/export//a/./b/", "fs-1.example.com", "/export/a/b", 4, 0, 0 },
	{ "[fd00::5]:/export", "fd00::5", "/export", 4, 0, 0 },
	{ "[fe80::1%eth0]:/e", "fe80::1%eth0", "/e", 4, 0, 0 },
	/* in the mount(8) form '?' and '&' belong to the path */
	{ "host:/odd?name&x", "host", "/odd?name&x", 4, 0, 0 },
	{ "nfs://fileserver/datasets/imagenet", "fileserver", "/datasets/imagenet", 4, 0, 0 },
	{ "nfs://fileserver/datasets/imagenet?version=4", "fileserver", "/datasets/imagenet",
	  4, 0, 0 },
	{ "nfs://fileserver/export?version=3", "fileserver", "/export", 3, 0, 0 },
	{ "nfs://127.0.0.1/export?version=4&nfsport=20490", "127.0.0.1", "/export", 4, 20490, 0 },
	{ "nfs://127.0.0.1:2050/export", "127.0.0.1", "/export", 4, 2050, 0 },
	{ "nfs://[::1]:2050/export/a", "::1", "/export/a", 4, 2050, 0 },
	{ "nfs://[::1]/export", "::1", "/export", 4, 0, 0 },
	{ "nfs://h/e?version=3&mountport=635&nfsport=2049", "h", "/e", 3, 2049, 635 },
	/* the query's nfsport wins over the authority's port; empty arguments are skipped */
	{ "nfs://h:1/e?&nfsport=2&", "h", "/e", 4, 2, 0 },
	{ "nfs://h/", "h", "/", 4, 0, 0 },
	{ "nfs://h/./e/", "h", "/e", 4, 0, 0 },
	{ "nfs://h/e?nfsport=65535", "h", "/e", 4, 65535, 0 },
};

START_TEST(test_parse_good)
{
	const struct good_case *c = &good_cases[_i];
	struct dlc_nfs_source src;
	char *cause = (char *)"unset";
	int rc;

	rc = dlc_nfs_source_parse(c->source, &src, &cause);
	ck_assert_msg(rc == 0, "'%s': %d %s", c->source, rc, cause ? cause : "");
	ck_assert_ptr_null(cause);
	ck_assert_str_eq(src.server, c->server);
	ck_assert_str_eq(src.path, c->path);
	ck_assert_int_eq(src.version, c->version);
	ck_assert_uint_eq(src.nfsport, c->nfsport);
	ck_assert_uint_eq(src.mountport, c->mountport);
	dlc_nfs_source_free(&src);
	dlc_nfs_source_free(&src);      /* twice is harmless */
}
END_TEST

/* ------------------------------------------------------------------------
 * Bad sources.
 */

struct bad_case {
	const char *source;
	const char *phrase;
};

static const struct bad_case bad_cases[] = {
	{ ":/export", "names no NFS server" },
	{ "nfs:///export", "names no NFS server" },
	{ "nfs://", "names no NFS server" },
	{ "nfs://host", "names no export" },
	{ "nfs://host?version=4", "names no export" },
	{ "host:export", "is not absolute" },
	{ "host:", "is not absolute" },
	{ "host:/a/../b", "contains '..'" },
	{ "nfs://h/a/..", "contains '..'" },
	{ "bad host:/export", "is not a host name" },
	{ "nfs://ho$t/export", "is not a host name" },
	{ "[fd00::5:/export", "neither a directory nor HOST:/PATH" },
	{ "[zz::1]:/export", "is not a host name" },
	{ "nfs://h/e?version=2", "write version=4 or version=3" },
	{ "nfs://h/e?version=", "is not an NFS version" },
	{ "nfs://h/e?version=44", "is not an NFS version" },
	{ "nfs://h/e?nfsport=0", "nfsport '0' in source" },
	{ "nfs://h/e?nfsport=65536", "not a port number" },
	{ "nfs://h/e?mountport=x", "mountport 'x'" },
	{ "nfs://h/e?nfsport", "nfsport '' in source" },
	{ "nfs://h:0/e", "the port in source" },
	{ "nfs://h:/e", "the port in source" },
	{ "nfs://h:99999/e", "the port in source" },
	{ "nfs://h/e?uid=0", "'uid' in source" },
	{ "nfs://h/e?autoreconnect=-1", "use version=, nfsport= or mountport=" },
	{ "s3://bucket/key", "is a s3:// address" },
	{ "/local/dir", "is not an NFS source" },
	/* control characters from the user never reach the terminal */
	{ "ho\nst:/e", "'ho?st' in source 'ho?st:/e'" },
};

START_TEST(test_parse_bad)
{
	const struct bad_case *c = &bad_cases[_i];
	struct dlc_nfs_source src;
	char *cause = NULL;
	int rc;

	rc = dlc_nfs_source_parse(c->source, &src, &cause);
	ck_assert_msg(rc == -EINVAL, "'%s': %d", c->source, rc);
	ck_assert_ptr_null(src.server);
	ck_assert_ptr_null(src.path);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, c->phrase), "'%s': cause '%s' lacks '%s'", c->source, cause,
		      c->phrase);
	ck_assert_msg(cause[strlen(cause) - 1] == '.', "cause '%s' is not a sentence", cause);
	ck_assert_ptr_null(strchr(cause, '\n'));
	free(cause);
}
END_TEST

/* ------------------------------------------------------------------------
 * The NFS driver refuses, quickly and in one sentence.
 */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A TCP socket listening on 127.0.0.1 at an ephemeral port, never accepting. */
static int listen_silently(unsigned *port)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	socklen_t len = sizeof(addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	ck_assert_int_eq(listen(fd, 16), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
	*port = ntohs(addr.sin_port);
	return fd;
}

/* A port on 127.0.0.1 where nothing listens (bound, then closed again). */
static unsigned closed_port(void)
{
	unsigned port;

	close(listen_silently(&port));
	return port;
}

static void expect_create_error(const char *source, const struct dlc_backend_config *config,
				int expected, const char *phrase, double within)
{
	struct dlc_backend *backend = NULL;
	char *cause = NULL;
	double start = now();
	int rc;

	rc = dlc_backend_create(source, config, &backend, &cause);
	ck_assert_msg(rc == expected, "'%s': %d (%s), expected %d", source, rc,
		      cause ? cause : "", expected);
	ck_assert_ptr_null(backend);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, phrase), "'%s': cause '%s' lacks '%s'", source, cause, phrase);
	ck_assert_msg(cause[strlen(cause) - 1] == '.', "cause '%s' is not a sentence", cause);
	ck_assert_msg(now() - start < within, "'%s' took %.1f s", source, now() - start);
	free(cause);
}

START_TEST(test_nfs_port_without_server_is_refused_at_once)
{
	char source[128];

	snprintf(source, sizeof(source), "nfs://127.0.0.1/export?nfsport=%u", closed_port());
	expect_create_error(source, NULL, -ECONNREFUSED, "refuses connections on port", 2.0);
}
END_TEST

START_TEST(test_nfs_server_that_never_answers_times_out)
{
	struct dlc_backend_config config = { .timeout_ns = 1000000000ULL };
	char source[128];
	unsigned port;
	int fd = listen_silently(&port);

	snprintf(source, sizeof(source), "nfs://127.0.0.1:%u/export", port);
	expect_create_error(source, &config, -ETIMEDOUT, "did not answer within 1 s", 5.0);
	close(fd);
}
END_TEST

START_TEST(test_nfs_unknown_host_is_refused)
{
	expect_create_error("no-such-host.invalid:/export", NULL, -EHOSTUNREACH,
			    "is not a known host", 30.0);
}
END_TEST

START_TEST(test_nfs_bad_forms_and_options_are_refused)
{
	struct dlc_backend_config slow = { .delay_ns = 1000000 };

	expect_create_error("host:export", NULL, -EINVAL, "is not absolute", 1.0);
	expect_create_error("nfs://host/e?version=5", NULL, -EINVAL, "version", 1.0);
	expect_create_error("127.0.0.1:/export", &slow, -EINVAL, "do not apply to NFS", 1.0);
}
END_TEST

/* --- the emulated link (source_bw) ------------------------------------ */

struct link_reader {
	struct dlc_backend *backend;
	ssize_t got;
};

static void *read_one_mib(void *arg)
{
	struct link_reader *r = arg;
	struct dlc_backend_file *file;
	char *buf = malloc(1 << 20);

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(dlc_backend_open(r->backend, "one_mib", &file), 0);
	r->got = dlc_backend_pread(r->backend, file, buf, 1 << 20, 0);
	dlc_backend_close(r->backend, file);
	free(buf);
	return NULL;
}

/*
 * source_bw is one link shared by every call: four parallel reads of 1 MiB
 * at 8 MiB/s take half a second together (not an eighth, as they would if
 * each call had the whole bandwidth to itself).
 */
START_TEST(test_source_bw_is_one_shared_link)
{
	char dir[] = "/tmp/dlcache-link.XXXXXX", path[64];
	struct dlc_backend_config config = { .bandwidth = 8 << 20 };
	struct link_reader readers[4];
	pthread_t threads[4];
	struct dlc_backend *backend;
	char *cause = NULL;
	double start, took;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/one_mib", dir);
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < 1 << 20; i++)
		fputc(i & 0xff, f);
	fclose(f);
	ck_assert_int_eq(dlc_backend_create(dir, &config, &backend, &cause), 0);

	start = now();
	readers[0].backend = backend;
	read_one_mib(&readers[0]);
	took = now() - start;
	ck_assert_int_eq(readers[0].got, 1 << 20);
	ck_assert_msg(took >= 0.12 && took < 1.0, "one read took %.3f s", took);

	start = now();
	for (int i = 0; i < 4; i++) {
		readers[i].backend = backend;
		ck_assert_int_eq(pthread_create(&threads[i], NULL, read_one_mib, &readers[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(threads[i], NULL);
		ck_assert_int_eq(readers[i].got, 1 << 20);
	}
	took = now() - start;
	ck_assert_msg(took >= 0.49 && took < 2.5, "four parallel reads took %.3f s", took);

	dlc_backend_destroy(backend);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* ------------------------------------------------------------------------
 * The time limit's read buffers (backend_deadline.c).  A fake driver whose
 * reads at offset 1 hang for 300 ms and then keep writing 0xAA into their
 * buffer for 400 ms (a late, abandoned read); every other read fills 0xBB
 * at once and records the buffer it was given.
 */
struct fake_file {
	int unused;
};

static _Atomic bool fake_saw_last_bytes;     /* the buffer held the last read's bytes */

static int fake_open(void *priv, const char *path, struct dlc_backend_file **out)
{
	(void)priv;
	(void)path;
	*out = (struct dlc_backend_file *)calloc(1, sizeof(struct fake_file));
	return *out ? 0 : -ENOMEM;
}

static ssize_t fake_pread(void *priv, struct dlc_backend_file *file, void *buf, size_t len,
			  uint64_t off)
{
	(void)priv;
	(void)file;
	if (off == 1) {
		double end;

		usleep(300 * 1000);
		end = now() + 0.4;
		while (now() < end) {
			memset(buf, 0xaa, len);
			usleep(1000);
		}
		return (ssize_t)len;
	}
	atomic_store(&fake_saw_last_bytes, ((unsigned char *)buf)[len - 1] == 0xbb);
	memset(buf, 0xbb, len);
	return (ssize_t)len;
}

static int fake_close(void *priv, struct dlc_backend_file *file)
{
	(void)priv;
	free(file);
	return 0;
}

static void fake_destroy(void *priv)
{
	(void)priv;
}

static const struct dlc_backend_ops fake_ops = {
	.name = "fake",
	.open = fake_open,
	.pread = fake_pread,
	.close = fake_close,
	.destroy = fake_destroy,
};

/*
 * A read of 2 MiB reuses the buffer of the read before it (a fresh buffer
 * costs a page fault per page), but never the buffer of a read abandoned at
 * its deadline: that one is still being written, and every read meanwhile
 * gets only its own bytes.
 */
START_TEST(test_deadline_reuses_read_buffers_but_never_an_abandoned_one)
{
	struct dlc_backend backend = { .ops = &fake_ops };
	struct dlc_backend_file *file;
	size_t len = 2 << 20;
	unsigned char *out = malloc(len);
	double end;
	int reads = 0;

	/* As the daemon does (main.c): freed buffers of 1 MiB and more go back
	 * to the system, and new ones come zeroed. */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(dlc_backend_deadline_wrap(&backend, 200 * 1000000ull), 0);
	ck_assert_int_eq(backend.ops->open(backend.priv, "f", &file), 0);

	ck_assert_int_eq(backend.ops->pread(backend.priv, file, out, len, 0), (ssize_t)len);
	ck_assert(!atomic_load(&fake_saw_last_bytes));          /* a new buffer */
	ck_assert_int_eq(backend.ops->pread(backend.priv, file, out, len, 0), (ssize_t)len);
	ck_assert(atomic_load(&fake_saw_last_bytes));           /* the same one again */

	/* Abandoned at 200 ms; its driver call writes 0xAA from 300 to 700 ms.
	 * (A limit of 50 ms failed the reads below under ASan on a loaded
	 * machine: a 2 MiB read and its check took longer.) */
	ck_assert_int_eq(backend.ops->pread(backend.priv, file, out, len, 1), -ETIMEDOUT);
	end = now() + 0.6;
	while (now() < end) {
		memset(out, 0, len);
		ck_assert_int_eq(backend.ops->pread(backend.priv, file, out, len, 0), (ssize_t)len);
		for (size_t i = 0; i < len; i += 4093)
			ck_assert_msg(out[i] == 0xbb, "read %d: byte %zu is 0x%02x", reads, i, out[i]);
		ck_assert_int_eq(out[len - 1], 0xbb);
		reads++;
		usleep(2000);
	}
	ck_assert_int_gt(reads, 10);
	ck_assert_int_eq(backend.ops->close(backend.priv, file), 0);
	backend.ops->destroy(backend.priv);
	free(out);
}
END_TEST

/*
 * A request's deadline (deadline.h) bounds the call as well: with a limit of
 * 10 s a call, a read made 150 ms before its request's deadline leaves at
 * that deadline, and one made after it leaves at once.
 */
START_TEST(test_deadline_ends_a_call_at_the_requests_deadline)
{
	struct dlc_backend backend = { .ops = &fake_ops };
	struct dlc_backend_file *file;
	size_t len = 4096;
	char out[4096];
	double start;

	ck_assert_int_eq(dlc_backend_deadline_wrap(&backend, 10000 * 1000000ull), 0);
	ck_assert_int_eq(backend.ops->open(backend.priv, "f", &file), 0);
	dlc_deadline_set(dlc_deadline_now() + 150 * 1000000ull);
	start = now();
	ck_assert_int_eq(backend.ops->pread(backend.priv, file, out, len, 1), -ETIMEDOUT);
	ck_assert_double_ge(now() - start, 0.1);
	ck_assert_double_lt(now() - start, 0.4);
	start = now();
	ck_assert_int_eq(backend.ops->pread(backend.priv, file, out, len, 1), -ETIMEDOUT);
	ck_assert_double_lt(now() - start, 0.05);
	dlc_deadline_set(0);
	ck_assert_int_eq(backend.ops->pread(backend.priv, file, out, len, 0), (ssize_t)len);
	ck_assert_int_eq(backend.ops->close(backend.priv, file), 0);
	backend.ops->destroy(backend.priv);
}
END_TEST

static Suite *backend_suite(void)
{
	Suite *s = suite_create("backend");
	TCase *tc;

	tc = tcase_create("nfs_source");
	tcase_add_loop_test(tc, test_matches, 0, sizeof(match_cases) / sizeof(match_cases[0]));
	tcase_add_loop_test(tc, test_parse_good, 0, sizeof(good_cases) / sizeof(good_cases[0]));
	tcase_add_loop_test(tc, test_parse_bad, 0, sizeof(bad_cases) / sizeof(bad_cases[0]));
	suite_add_tcase(s, tc);

	tc = tcase_create("nfs_refusals");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_nfs_port_without_server_is_refused_at_once);
	tcase_add_test(tc, test_nfs_server_that_never_answers_times_out);
	tcase_add_test(tc, test_nfs_unknown_host_is_refused);
	tcase_add_test(tc, test_nfs_bad_forms_and_options_are_refused);
	suite_add_tcase(s, tc);
	tc = tcase_create("emulated_link");
	tcase_add_test(tc, test_source_bw_is_one_shared_link);
	suite_add_tcase(s, tc);
	tc = tcase_create("deadline");
	tcase_add_test(tc, test_deadline_reuses_read_buffers_but_never_an_abandoned_one);
	tcase_add_test(tc, test_deadline_ends_a_call_at_the_requests_deadline);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *runner = srunner_create(backend_suite());
	int failed;

	srunner_run_all(runner, CK_ENV);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
