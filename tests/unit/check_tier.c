/*
 * check_tier.c - the cluster tier: keys, owners and value frames
 * (tier_place.c, pure), the client against a real memcached on a loopback
 * port (tier.c: round trip, refusal to serve a bad value, a dead server
 * answered as a miss within the timeout), and the tier block of .stats in
 * JSON and Prometheus text.
 *
 * The memcached is started by this test (fork and exec) and stopped by its
 * PID; without the memcached binary the client cases are skipped.
 */
#include <check.h>
#include <errno.h>
#include <libmemcached/memcached.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dlcache/stats.h"
#include "dlcache/tier.h"
#include "dlcache/tier_place.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

START_TEST(test_keys)
{
	char a[DLC_TIER_KEY_MAX], b[DLC_TIER_KEY_MAX];

	ck_assert_uint_eq(dlc_tier_place_key(0x0123456789abcdefULL, 0x1f, a), strlen(a));
	ck_assert_str_eq(a, "dlc1:0123456789abcdef:1f");
	dlc_tier_place_key(0x0123456789abcdefULL, 0xffffffffu, b);
	ck_assert_str_eq(b, "dlc1:0123456789abcdef:ffffffff");
	ck_assert_uint_lt(strlen(b), DLC_TIER_KEY_MAX);
	/* Another snapshot never shares a key. */
	dlc_tier_place_key(0x0123456789abcdeeULL, 0x1f, b);
	ck_assert_str_ne(a, b);
}
END_TEST

START_TEST(test_owner_balance_and_growth)
{
	unsigned counts[4] = { 0 }, moved = 0, keys = 30000;
	char key[DLC_TIER_KEY_MAX];

	for (unsigned i = 1; i <= keys; i++) {
		size_t len = dlc_tier_place_key(42, i, key);
		unsigned three = dlc_tier_place_owner(key, len, 3);
		unsigned four = dlc_tier_place_owner(key, len, 4);

		ck_assert_uint_lt(three, 3);
		ck_assert_uint_eq(three, dlc_tier_place_owner(key, len, 3));
		ck_assert_uint_eq(dlc_tier_place_owner(key, len, 1), 0);
		counts[three]++;
		/* Appending a server moves a key only to the new one. */
		if (four != three) {
			ck_assert_uint_eq(four, 3);
			moved++;
		}
	}
	for (unsigned s = 0; s < 3; s++)
		ck_assert_msg(counts[s] > keys / 3 * 9 / 10 && counts[s] < keys / 3 * 11 / 10,
			      "server %u owns %u of %u keys", s, counts[s], keys);
	ck_assert_msg(moved > keys / 4 * 9 / 10 && moved < keys / 4 * 11 / 10,
		      "%u of %u keys moved to a fourth server", moved, keys);
}
END_TEST

START_TEST(test_value_frames)
{
	unsigned char payload[1000], value[DLC_TIER_HEADER_SIZE + 1000];

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (unsigned char)(i * 7);
	dlc_tier_value_header(payload, sizeof(payload), value);
	memcpy(value + DLC_TIER_HEADER_SIZE, payload, sizeof(payload));
	ck_assert_int_eq(dlc_tier_value_check(value, sizeof(value), 1000), DLC_TIER_VALUE_GOOD);
	ck_assert_int_eq(dlc_tier_value_check(value, sizeof(value), 999), DLC_TIER_VALUE_BAD_SIZE);
	ck_assert_int_eq(dlc_tier_value_check(value, sizeof(value) - 1, 1000), DLC_TIER_VALUE_BAD_FRAME);
	ck_assert_int_eq(dlc_tier_value_check(value, 10, 1000), DLC_TIER_VALUE_BAD_FRAME);
	for (size_t at = DLC_TIER_HEADER_SIZE; at < sizeof(value); at += 97) {
		value[at] ^= 0x01;
		ck_assert_int_eq(dlc_tier_value_check(value, sizeof(value), 1000), DLC_TIER_VALUE_BAD_HASH);
		value[at] ^= 0x01;
	}
	value[0] ^= 0x20;
	ck_assert_int_eq(dlc_tier_value_check(value, sizeof(value), 1000), DLC_TIER_VALUE_BAD_FRAME);
	value[0] ^= 0x20;
	/* An empty file frames as a bare header. */
	dlc_tier_value_header(payload, 0, value);
	ck_assert_int_eq(dlc_tier_value_check(value, DLC_TIER_HEADER_SIZE, 0), DLC_TIER_VALUE_GOOD);
}
END_TEST

START_TEST(test_threshold)
{
	const float scores[] = { 0.9f, 0.1f, NAN, 0.5f, 0.7f, 0.5f, 0.3f };
	const uint64_t sizes[] = { 10, 10, 1000, 10, 10, 10, 10 };

	/* Everything scored fits (the unscored 1000 bytes do not count). */
	ck_assert(isnan(dlc_tier_place_threshold(scores, sizes, 7, 60)));
	ck_assert(isnan(dlc_tier_place_threshold(scores, sizes, 7, 1000)));
	/* 0.9 and 0.7 fit in 25; the tie at 0.5 (20 bytes) does not fit whole. */
	ck_assert_float_eq(dlc_tier_place_threshold(scores, sizes, 7, 25), 0.7f);
	ck_assert_float_eq(dlc_tier_place_threshold(scores, sizes, 7, 39), 0.7f);
	ck_assert_float_eq(dlc_tier_place_threshold(scores, sizes, 7, 40), 0.5f);
	ck_assert_float_eq(dlc_tier_place_threshold(scores, sizes, 7, 59), 0.3f);
	/* Not even the best fits: nothing is offered. */
	ck_assert(isinf(dlc_tier_place_threshold(scores, sizes, 7, 5)));
	/* Nothing scored: no threshold. */
	ck_assert(isnan(dlc_tier_place_threshold(scores + 2, sizes + 2, 1, 0)));
	ck_assert(isnan(dlc_tier_place_threshold(scores, sizes, 0, 0)));
}
END_TEST

struct server_case {
	const char *text;
	const char *host;       /* NULL: refused */
	unsigned port;
};

static const struct server_case server_cases[] = {
	{ "node1:11211", "node1", 11211 },
	{ "127.0.0.1:1", "127.0.0.1", 1 },
	{ "[::1]:65535", "::1", 65535 },
	{ "[fe80::1%eth0]:11211", "fe80::1%eth0", 11211 },
	{ "node1", NULL, 0 },
	{ "node1:", NULL, 0 },
	{ ":11211", NULL, 0 },
	{ "node1:0", NULL, 0 },
	{ "node1:65536", NULL, 0 },
	{ "node1:99999999999999999999", NULL, 0 },
	{ "node1:+1", NULL, 0 },
	{ "::1:11211", NULL, 0 },
	{ "[::1]11211", NULL, 0 },
	{ "[::1]:", NULL, 0 },
	{ "[]:1", NULL, 0 },
	{ "a\tb:1", NULL, 0 },
};

START_TEST(test_parse_server)
{
	const struct server_case *c = &server_cases[_i];
	char host[256] = "";
	unsigned port = 0;
	bool ok = dlc_tier_place_parse_server(c->text, strlen(c->text), host, sizeof(host), &port);

	ck_assert_msg(ok == (c->host != NULL), "'%s': %s", c->text, ok ? "accepted" : "refused");
	if (ok) {
		ck_assert_str_eq(host, c->host);
		ck_assert_uint_eq(port, c->port);
	}
	/* A host longer than the buffer is refused, never cut. */
	ck_assert(!dlc_tier_place_parse_server("abcdefgh:1", 10, host, 8, &port));
}
END_TEST

/* ---- the client against a real memcached ---- */

static pid_t memcached_pid;
static unsigned memcached_port;

static unsigned free_port(void)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
	close(fd);
	return ntohs(addr.sin_port);
}

/* Starts a memcached of 8 MiB (-M) on a free port; item_max: its -I, or NULL. */
static bool start_memcached_with(const char *item_max)
{
	char port[16];

	memcached_port = free_port();
	snprintf(port, sizeof(port), "%u", memcached_port);
	memcached_pid = fork();
	ck_assert_int_ge(memcached_pid, 0);
	if (memcached_pid == 0) {
		if (item_max)
			execlp("memcached", "memcached", "-u", "root", "-l", "127.0.0.1", "-p", port,
			       "-U", "0", "-m", "8", "-M", "-I", item_max, (char *)NULL);
		else
			execlp("memcached", "memcached", "-u", "root", "-l", "127.0.0.1", "-p", port,
			       "-U", "0", "-m", "8", "-M", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 100; i++) {
		struct sockaddr_in addr = { .sin_family = AF_INET,
					    .sin_port = htons((uint16_t)memcached_port),
					    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		int status;

		if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
			close(fd);
			return true;
		}
		close(fd);
		if (waitpid(memcached_pid, &status, WNOHANG) == memcached_pid) {
			memcached_pid = 0;
			return false;
		}
		usleep(20000);
	}
	return false;
}

static bool start_memcached(void)
{
	return start_memcached_with(NULL);
}

static void stop_memcached(void)
{
	if (memcached_pid > 0) {
		kill(memcached_pid, SIGKILL);
		waitpid(memcached_pid, NULL, 0);
		memcached_pid = 0;
	}
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

START_TEST(test_client_round_trip)
{
	struct dlc_stats_tier_server gauges[2];
	struct dlc_tier *tier;
	char list[64], key[DLC_TIER_KEY_MAX];
	unsigned char data[5000], back[5000];
	memcached_st *mc;
	struct timespec t0;
	char *cause = NULL;

	if (!start_memcached()) {
		fprintf(stderr, "memcached not available: client case skipped\n");
		return;
	}
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 13 + 1);
	ck_assert_int_eq(dlc_tier_create(77, 100, &tier), 0);
	ck_assert(!dlc_tier_on(tier));
	ck_assert_int_eq(dlc_tier_get(tier, 5, back, sizeof(back)), -ENOENT);
	snprintf(list, sizeof(list), "# the tier\n127.0.0.1:%u\n", memcached_port);
	ck_assert_int_eq(dlc_tier_set_servers(tier, list, &cause), 0);
	ck_assert(dlc_tier_on(tier));
	ck_assert_int_eq(dlc_tier_start(tier), 0);

	ck_assert_int_eq(dlc_tier_get(tier, 5, back, sizeof(back)), -ENOENT);
	dlc_tier_offer(tier, 5, data, sizeof(data), NAN);
	memset(back, 0, sizeof(back));
	ck_assert_int_eq(dlc_tier_get(tier, 5, back, sizeof(back)), 0);
	ck_assert_mem_eq(back, data, sizeof(data));

	/* Below the threshold: not offered. */
	dlc_tier_set_threshold(tier, 0.5f);
	dlc_tier_offer(tier, 6, data, sizeof(data), 0.25f);
	dlc_tier_offer(tier, 7, data, sizeof(data), NAN);
	dlc_tier_offer(tier, 8, data, sizeof(data), 0.75f);
	dlc_tier_set_threshold(tier, NAN);
	ck_assert_int_eq(dlc_tier_get(tier, 6, back, sizeof(back)), -ENOENT);
	ck_assert_int_eq(dlc_tier_get(tier, 7, back, sizeof(back)), -ENOENT);
	ck_assert_int_eq(dlc_tier_get(tier, 8, back, sizeof(back)), 0);

	/* A value flipped on the server is refused, counted and deleted. */
	mc = memcached_create(NULL);
	memcached_server_add(mc, "127.0.0.1", (in_port_t)memcached_port);
	{
		size_t klen = dlc_tier_place_key(77, 5, key), vlen;
		uint32_t flags;
		memcached_return_t rc;
		char *value = memcached_get(mc, key, klen, &vlen, &flags, &rc);

		ck_assert_ptr_nonnull(value);
		value[vlen - 1] ^= 0x40;
		ck_assert_int_eq(memcached_set(mc, key, klen, value, vlen, 0, 0), MEMCACHED_SUCCESS);
		free(value);
		ck_assert_int_eq(dlc_tier_get(tier, 5, back, sizeof(back)), -ENOENT);
		value = memcached_get(mc, key, klen, &vlen, &flags, &rc);
		ck_assert_int_eq(rc, MEMCACHED_NOTFOUND);
		free(value);
	}
	memcached_free(mc);
	dlc_tier_verify(tier);
	ck_assert_uint_eq(dlc_tier_gauges(tier, gauges, 2), 1);
	/* Framed for another size than the snapshot's: corrupt too. */
	ck_assert_int_eq(dlc_tier_get(tier, 8, back, sizeof(back) - 1), -ENOENT);
	ck_assert_int_eq(dlc_tier_get(tier, 8, back, sizeof(back)), -ENOENT);
	dlc_tier_offer(tier, 8, data, sizeof(data), NAN);
	ck_assert_uint_eq(dlc_tier_gauges(tier, gauges, 2), 1);
	ck_assert_uint_eq(gauges[0].hits, 2);
	ck_assert_uint_eq(gauges[0].corrupt, 2);
	ck_assert_uint_eq(gauges[0].adds, 3);
	ck_assert_uint_eq(gauges[0].bytes, 2 * sizeof(data));
	ck_assert(gauges[0].up);

	/* A dead server: a miss within the timeout, then skipped. */
	stop_memcached();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(dlc_tier_get(tier, 8, back, sizeof(back)), -ENOENT);
	ck_assert_int_eq(dlc_tier_get(tier, 8, back, sizeof(back)), -ENOENT);
	ck_assert_msg(seconds_since(&t0) < 2.0, "a dead server held a get for %.3f s", seconds_since(&t0));
	dlc_tier_gauges(tier, gauges, 2);
	ck_assert(!gauges[0].up);
	ck_assert_uint_ge(gauges[0].skips, 1);

	/* A bad list leaves the old one; an empty one turns the tier off. */
	ck_assert_int_eq(dlc_tier_set_servers(tier, "127.0.0.1:1 nohost", &cause), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cause, "'nohost' is not a tier server"));
	free(cause);
	ck_assert(dlc_tier_on(tier));
	ck_assert_int_eq(dlc_tier_set_servers(tier, "  \n# none\n", &cause), 0);
	ck_assert(!dlc_tier_on(tier));
	dlc_tier_free(tier);
}
END_TEST

/* Waits up to 5 s for the health thread's probe: limit and item_max known. */
static void wait_probed(struct dlc_tier *tier, struct dlc_stats_tier_server *g)
{
	for (int i = 0; i < 500; i++) {
		dlc_tier_gauges(tier, g, 1);
		if (g->limit > 0 && g->item_max > 0)
			return;
		usleep(10000);
	}
	ck_abort_msg("the health thread never read the server's stats");
}

/*
 * A sample larger than memcached's default item (1 MiB) is neither offered
 * nor asked for; a server started with -I 4m takes it, once the health
 * thread has read its item_size_max.
 */
START_TEST(test_values_up_to_the_item_size)
{
	static unsigned char data[2u << 20], back[2u << 20];
	const char *sizes[] = { NULL, "4m" };

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 31 + 7);
	for (unsigned k = 0; k < 2; k++) {
		struct dlc_stats_tier_server g;
		struct dlc_tier *tier;
		char list[64], *cause = NULL;

		if (!start_memcached_with(sizes[k])) {
			fprintf(stderr, "memcached not available: client case skipped\n");
			return;
		}
		ck_assert_int_eq(dlc_tier_create(78, 1000, &tier), 0);
		snprintf(list, sizeof(list), "127.0.0.1:%u", memcached_port);
		ck_assert_int_eq(dlc_tier_set_servers(tier, list, &cause), 0);
		ck_assert_int_eq(dlc_tier_start(tier), 0);
		wait_probed(tier, &g);
		dlc_tier_offer(tier, 9, data, sizeof(data), NAN);
		memset(back, 0, sizeof(back));
		dlc_tier_gauges(tier, &g, 1);
		if (k == 0) {
			ck_assert_uint_eq(g.item_max, 1u << 20);
			ck_assert_uint_eq(g.adds, 0);
			ck_assert_uint_eq(g.refusals, 0);        /* not even sent */
			ck_assert_int_eq(dlc_tier_get(tier, 9, back, sizeof(back)), -ENOENT);
			ck_assert_uint_eq(g.misses, 0);          /* nor asked for */
		} else {
			ck_assert_uint_eq(g.item_max, 4u << 20);
			ck_assert_uint_eq(g.adds, 1);
			ck_assert_int_eq(dlc_tier_get(tier, 9, back, sizeof(back)), 0);
			ck_assert_mem_eq(back, data, sizeof(data));
		}
		dlc_tier_free(tier);
		stop_memcached();
	}
}
END_TEST

/*
 * Samples queued for removal (dlc_tier_plan queues those below the
 * threshold) are deleted from this node's own server by the health thread
 * and counted; the others stay.
 */
START_TEST(test_prune_removes_queued_samples_from_own_server)
{
	unsigned char data[3000], back[3000];
	const uint32_t below[] = { 11, 13, 15, 99 };   /* 99 was never stored */
	struct dlc_stats_tier_server g;
	struct dlc_tier *tier;
	char list[64], *cause = NULL;

	if (!start_memcached()) {
		fprintf(stderr, "memcached not available: client case skipped\n");
		return;
	}
	memset(data, 0x5a, sizeof(data));
	ck_assert_int_eq(dlc_tier_create(79, 100, &tier), 0);
	snprintf(list, sizeof(list), "127.0.0.1:%u", memcached_port);
	ck_assert_int_eq(dlc_tier_set_servers(tier, list, &cause), 0);
	ck_assert_int_eq(dlc_tier_start(tier), 0);
	wait_probed(tier, &g);
	ck_assert(g.own);
	for (uint32_t ino = 10; ino < 16; ino++)
		dlc_tier_offer(tier, ino, data, sizeof(data), NAN);
	ck_assert_int_eq(dlc_tier_prune(tier, below, COUNT(below)), 0);
	for (int i = 0; i < 300 && g.removed < 3; i++) {
		usleep(10000);
		dlc_tier_gauges(tier, &g, 1);
	}
	ck_assert_uint_eq(g.removed, 3);
	for (uint32_t ino = 10; ino < 16; ino++)
		ck_assert_int_eq(dlc_tier_get(tier, ino, back, sizeof(back)), ino % 2 ? -ENOENT : 0);
	dlc_tier_free(tier);
	stop_memcached();
}
END_TEST

START_TEST(test_read_file)
{
	char path[] = "/tmp/check_tier.XXXXXX";
	char *text = NULL, *cause = NULL;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dlc_tier_read_file(path, &text, &cause), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cause, "names no server"));
	free(cause);
	cause = NULL;
	ck_assert_int_eq(write(fd, "a:1\nb:2 # two\n", 14), 14);
	ck_assert_int_eq(dlc_tier_read_file(path, &text, &cause), 0);
	ck_assert_str_eq(text, "a:1\nb:2 # two\n");
	free(text);
	ck_assert_int_eq(write(fd, "c\n", 2), 2);
	ck_assert_int_eq(dlc_tier_read_file(path, &text, &cause), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cause, "'c' is not a tier server"));
	ck_assert_ptr_null(strchr(cause, '\n'));
	free(cause);
	cause = NULL;
	close(fd);
	unlink(path);
	ck_assert_int_eq(dlc_tier_read_file(path, &text, &cause), -ENOENT);
	ck_assert_ptr_nonnull(strstr(cause, "cannot read the tier_servers file"));
	free(cause);
}
END_TEST

START_TEST(test_stats_tier_block)
{
	struct dlc_stats_tier_server servers[2] = {
		{ .name = "10.0.0.1:11211", .up = true, .own = true, .fill = 100, .hits = 7,
		  .own_hits = 3, .bytes = 700 },
		{ .name = "10.0.0.2:11211", .timeouts = 2 },
	};
	struct dlc_stats_gauges gauges = { .source = "/data", .policy = "freeze", .tier = servers,
					   .tier_count = 2 };
	struct dlc_stats stats;
	char *json = NULL, *text = NULL;
	size_t size = 0;
	FILE *out;

	dlc_stats_init(&stats);
	dlc_stats_add(&stats, DLC_STAT_HITS, 5);
	ck_assert_int_eq(dlc_stats_render_json(&stats, &gauges, &json, NULL), 0);
	ck_assert_ptr_nonnull(strstr(json, "\n  \"tier\": {\n    \"servers\": 2,\n    \"10.0.0.1:11211\": {\n      \"up\": true,"));
	out = open_memstream(&text, &size);
	ck_assert_int_eq(dlc_stats_print_prometheus(json, out), 0);
	fclose(out);
	ck_assert_ptr_nonnull(strstr(text, "\ndlcache_hits 5\n"));
	ck_assert_ptr_nonnull(strstr(text, "\ndlcache_cache_capacity 0\n"));
	ck_assert_ptr_nonnull(strstr(text, "\ndlcache_tier_servers 2\n"));
	ck_assert_ptr_nonnull(strstr(text, "\ndlcache_tier_hits{server=\"10.0.0.1:11211\"} 7\n"));
	ck_assert_ptr_nonnull(strstr(text, "\ndlcache_tier_up{server=\"10.0.0.1:11211\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(text, "\ndlcache_tier_up{server=\"10.0.0.2:11211\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(text, "\ndlcache_tier_timeouts{server=\"10.0.0.2:11211\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(text, "\ndlcache_lifetime_hits 5\n"));
	ck_assert_ptr_null(strstr(text, "dlcache_source "));     /* strings are not numbers */
	ck_assert_ptr_null(strstr(text, "dlcache_policy"));
	ck_assert_ptr_nonnull(strstr(text, "\ndlcache_source_reads_running 0\n"));
	free(text);
	text = NULL;
	out = open_memstream(&text, &size);
	ck_assert_int_eq(dlc_stats_print_prometheus("{\"a\": 1}", out), -EINVAL);
	fclose(out);
	ck_assert_uint_eq(size, 0);
	free(text);
	free(json);
	dlc_stats_destroy(&stats);
}
END_TEST

static Suite *tier_suite(void)
{
	Suite *s = suite_create("tier");
	TCase *tc = tcase_create("place");

	tcase_add_test(tc, test_keys);
	tcase_add_test(tc, test_owner_balance_and_growth);
	tcase_add_test(tc, test_value_frames);
	tcase_add_test(tc, test_threshold);
	tcase_add_loop_test(tc, test_parse_server, 0, COUNT(server_cases));
	suite_add_tcase(s, tc);
	tc = tcase_create("client");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_client_round_trip);
	tcase_add_test(tc, test_read_file);
	tcase_add_test(tc, test_values_up_to_the_item_size);
	tcase_add_test(tc, test_prune_removes_queued_samples_from_own_server);
	tcase_add_unchecked_fixture(tc, NULL, stop_memcached);
	suite_add_tcase(s, tc);
	tc = tcase_create("stats");
	tcase_add_test(tc, test_stats_tier_block);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(tier_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
