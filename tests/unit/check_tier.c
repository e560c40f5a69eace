/*
 * check_tier.c - the cluster tier: keys and owners (tier_place.c, pure),
 * sealed values and the key file (tier_seal.c), the client against a real memcached on a loopback
 * port (tier.c: round trip, refusal to serve a bad value, a dead server
 * answered as a miss within the timeout), and the tier block of .stats in
 * JSON and Prometheus text.
 *
 * The memcached is started by this test (fork and exec) and stopped by its
 * PID; without the memcached binary the client cases are skipped.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <libmemcached/memcached.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dlcache/hash.h"
#include "dlcache/stats.h"
#include "dlcache/tier.h"
#include "dlcache/tier_place.h"
#include "dlcache/tier_seal.h"

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

static const unsigned char test_secret[40] = "a secret of forty bytes, for the tests.";

static struct dlc_tier_sealer *test_sealer(const unsigned char *secret, size_t len)
{
	struct dlc_tier_sealer *sealer = NULL;

	ck_assert_int_eq(dlc_tier_sealer_new(secret, len, &sealer), 0);
	ck_assert_ptr_nonnull(sealer);
	return sealer;
}

/*
 * A sealed value opens only as the value it was sealed for: every byte of
 * magic, nonce, body and tag flipped, another snapshot, inode or size
 * (the associated data), another key, a cut or a longer value: refused.
 */
START_TEST(test_seal_and_open)
{
	enum { SIZE = 1000, LEN = SIZE + DLC_TIER_SEAL_OVERHEAD };
	unsigned char payload[SIZE], value[LEN], again[LEN], out[SIZE + 1];
	struct dlc_tier_sealer *sealer = test_sealer(test_secret, sizeof(test_secret));
	struct dlc_tier_sealer *other = test_sealer(test_secret, sizeof(test_secret) - 1);

	for (size_t i = 0; i < SIZE; i++)
		payload[i] = (unsigned char)(i * 7 + 3);
	ck_assert_int_eq(dlc_tier_seal(sealer, 42, 7, payload, SIZE, value), 0);
	ck_assert_mem_eq(value, "DLT2", 4);
	ck_assert_int_eq(dlc_tier_unseal(sealer, 42, 7, value, LEN, out, SIZE), DLC_TIER_OPEN_GOOD);
	ck_assert_mem_eq(out, payload, SIZE);
	/* The bytes are not in the clear, and each seal has its own nonce. */
	ck_assert(memmem(value, LEN, payload + 100, 32) == NULL);
	ck_assert_int_eq(dlc_tier_seal(sealer, 42, 7, payload, SIZE, again), 0);
	ck_assert(memcmp(value + 4, again + 4, DLC_TIER_SEAL_NONCE_SIZE) != 0);
	ck_assert_int_eq(dlc_tier_unseal(sealer, 42, 7, again, LEN, out, SIZE), DLC_TIER_OPEN_GOOD);

	/* Every byte, every bit of it in turn (magic, nonce, body, tag). */
	for (size_t at = 0; at < LEN; at++) {
		unsigned char bit = (unsigned char)(1u << (at % 8));

		value[at] ^= bit;
		ck_assert_msg(dlc_tier_unseal(sealer, 42, 7, value, LEN, out, SIZE) != DLC_TIER_OPEN_GOOD,
			      "a value with byte %zu flipped opened", at);
		value[at] ^= bit;
	}
	ck_assert_int_eq(dlc_tier_unseal(sealer, 42, 7, value, LEN, out, SIZE), DLC_TIER_OPEN_GOOD);
	/* The associated data: another snapshot, inode or size. */
	ck_assert_int_eq(dlc_tier_unseal(sealer, 43, 7, value, LEN, out, SIZE), DLC_TIER_OPEN_BAD_SEAL);
	ck_assert_int_eq(dlc_tier_unseal(sealer, 42 | (1ULL << 63), 7, value, LEN, out, SIZE),
			 DLC_TIER_OPEN_BAD_SEAL);
	ck_assert_int_eq(dlc_tier_unseal(sealer, 42, 8, value, LEN, out, SIZE), DLC_TIER_OPEN_BAD_SEAL);
	ck_assert_int_eq(dlc_tier_unseal(sealer, 42, 7 | (1u << 31), value, LEN, out, SIZE),
			 DLC_TIER_OPEN_BAD_SEAL);
	ck_assert_int_eq(dlc_tier_unseal(sealer, 42, 7, value, LEN, out, SIZE - 1),
			 DLC_TIER_OPEN_BAD_FRAME);
	ck_assert_int_eq(dlc_tier_unseal(sealer, 42, 7, value, LEN - 1, out, SIZE - 1),
			 DLC_TIER_OPEN_BAD_SEAL);
	ck_assert_int_eq(dlc_tier_unseal(sealer, 42, 7, value, LEN, out, SIZE + 1),
			 DLC_TIER_OPEN_BAD_FRAME);
	/* Cut, or too short to hold a seal at all. */
	ck_assert_int_eq(dlc_tier_unseal(sealer, 42, 7, value, LEN - 1, out, SIZE),
			 DLC_TIER_OPEN_BAD_FRAME);
	ck_assert_int_eq(dlc_tier_unseal(sealer, 42, 7, value, 3, out, 0), DLC_TIER_OPEN_BAD_FRAME);
	/* Another key (the secret less its last byte). */
	ck_assert_int_eq(dlc_tier_unseal(other, 42, 7, value, LEN, out, SIZE), DLC_TIER_OPEN_BAD_SEAL);
	/* An empty file seals too, and is bound all the same. */
	ck_assert_int_eq(dlc_tier_seal(sealer, 42, 9, payload, 0, value), 0);
	ck_assert_int_eq(dlc_tier_unseal(sealer, 42, 9, value, DLC_TIER_SEAL_OVERHEAD, out, 0),
			 DLC_TIER_OPEN_GOOD);
	ck_assert_int_eq(dlc_tier_unseal(sealer, 42, 10, value, DLC_TIER_SEAL_OVERHEAD, out, 0),
			 DLC_TIER_OPEN_BAD_SEAL);
	dlc_tier_sealer_free(other);
	dlc_tier_sealer_free(sealer);
}
END_TEST

/* writes len bytes of fill into a new file at path with mode. */
static void write_file(const char *path, size_t len, mode_t mode)
{
	unsigned char buf[64];
	int fd;

	memset(buf, 'k', sizeof(buf));
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

/* The key file: missing, short, open to others, not a file: one sentence each. */
START_TEST(test_key_file)
{
	char dir[] = "/tmp/check_tier_key.XXXXXX", path[64], link[80];
	unsigned char *secret = NULL, first[64], *again = NULL;
	struct stat st;
	char *cause = NULL;
	size_t len = 0;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/key", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	ck_assert_int_eq(dlc_tier_key_read(path, &secret, &len, &cause), -ENOENT);
	ck_assert_ptr_nonnull(strstr(cause, "dlcache keygen"));
	write_file(path, 31, 0600);
	ck_assert_int_eq(dlc_tier_key_read(path, &secret, &len, &cause), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cause, "holds 31 bytes"));
	write_file(path, 32, 0644);
	ck_assert_int_eq(dlc_tier_key_read(path, &secret, &len, &cause), -EPERM);
	ck_assert_ptr_nonnull(strstr(cause, "chmod 600"));
	ck_assert_int_eq(chmod(path, 0640), 0);
	ck_assert_int_eq(dlc_tier_key_read(path, &secret, &len, &cause), -EPERM);
	ck_assert_int_eq(chmod(path, 0602), 0);
	ck_assert_int_eq(dlc_tier_key_read(path, &secret, &len, &cause), -EPERM);
	ck_assert_int_eq(chmod(path, 0400), 0);
	ck_assert_int_eq(dlc_tier_key_read(path, &secret, &len, &cause), 0);
	ck_assert_uint_eq(len, 32);
	ck_assert_mem_eq(secret, "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk", 32);
	free(secret);
	ck_assert_int_eq(dlc_tier_key_read(dir, &secret, &len, &cause), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cause, "not a regular file"));
	ck_assert_ptr_null(strchr(cause, '\n'));

	/* keygen: 0600, 32 random bytes, never over a file or a symlink. */
	unlink(path);
	ck_assert_int_eq(dlc_tier_key_generate(path, &cause), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(st.st_size, DLC_TIER_KEY_GENERATED);
	ck_assert_int_eq(dlc_tier_key_read(path, &secret, &len, &cause), 0);
	memcpy(first, secret, len);
	free(secret);
	ck_assert_int_eq(dlc_tier_key_generate(path, &cause), -EEXIST);
	ck_assert_ptr_nonnull(strstr(cause, "never overwrites"));
	ck_assert_int_eq(dlc_tier_key_read(path, &again, &len, &cause), 0);
	ck_assert_mem_eq(again, first, DLC_TIER_KEY_GENERATED);
	free(again);
	ck_assert_int_eq(symlink(path, link), 0);
	ck_assert_int_eq(dlc_tier_key_generate(link, &cause), -EEXIST);
	unlink(link);
	ck_assert_int_eq(symlink("/nonexistent/dlc-key", link), 0);
	ck_assert_int_ne(dlc_tier_key_generate(link, &cause), 0);     /* not through a dangling link */
	ck_assert_int_ne(access("/nonexistent/dlc-key", F_OK), 0);
	unlink(link);
	/* Two keys are not the same key. */
	snprintf(link, sizeof(link), "%s/key2", dir);
	ck_assert_int_eq(dlc_tier_key_generate(link, &cause), 0);
	ck_assert_int_eq(dlc_tier_key_read(link, &again, &len, &cause), 0);
	ck_assert(memcmp(again, first, DLC_TIER_KEY_GENERATED) != 0);
	free(again);
	free(cause);
	unlink(link);
	unlink(path);
	rmdir(dir);
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
	ck_assert_int_eq(dlc_tier_get(tier, 5, back, sizeof(back), NULL), -ENOENT);
	snprintf(list, sizeof(list), "# the tier\n127.0.0.1:%u\n", memcached_port);
	/* No key, no servers: the sentence says how to make one. */
	ck_assert_int_eq(dlc_tier_set_servers(tier, list, &cause), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cause, "dlcache keygen FILE"));
	free(cause);
	cause = NULL;
	ck_assert(!dlc_tier_on(tier));
	ck_assert_int_eq(dlc_tier_set_key(tier, test_secret, sizeof(test_secret)), 0);
	ck_assert_int_eq(dlc_tier_set_servers(tier, list, &cause), 0);
	ck_assert(dlc_tier_on(tier));
	ck_assert_int_eq(dlc_tier_start(tier), 0);

	ck_assert_int_eq(dlc_tier_get(tier, 5, back, sizeof(back), NULL), -ENOENT);
	dlc_tier_offer(tier, 5, data, sizeof(data), NAN);
	memset(back, 0, sizeof(back));
	ck_assert_int_eq(dlc_tier_get(tier, 5, back, sizeof(back), NULL), 0);
	ck_assert_mem_eq(back, data, sizeof(data));

	/* Below the threshold: not offered. */
	dlc_tier_set_threshold(tier, 0.5f);
	dlc_tier_offer(tier, 6, data, sizeof(data), 0.25f);
	dlc_tier_offer(tier, 7, data, sizeof(data), NAN);
	dlc_tier_offer(tier, 8, data, sizeof(data), 0.75f);
	dlc_tier_set_threshold(tier, NAN);
	ck_assert_int_eq(dlc_tier_get(tier, 6, back, sizeof(back), NULL), -ENOENT);
	ck_assert_int_eq(dlc_tier_get(tier, 7, back, sizeof(back), NULL), -ENOENT);
	ck_assert_int_eq(dlc_tier_get(tier, 8, back, sizeof(back), NULL), 0);

	/* A packed member's bytes must hash to its recorded xxh3: a value that
	 * opens but holds other bytes is refused, counted and deleted. */
	{
		uint64_t right = dlc_xxh3(data, sizeof(data)), wrong = right ^ 1;

		ck_assert_int_eq(dlc_tier_get(tier, 8, back, sizeof(back), &right), 0);
		ck_assert_int_eq(dlc_tier_get(tier, 8, back, sizeof(back), &wrong), -ENOENT);
		ck_assert_int_eq(dlc_tier_get(tier, 8, back, sizeof(back), &right), -ENOENT);
		ck_assert_uint_eq(dlc_tier_corrupt(tier), 1);
		dlc_tier_offer(tier, 8, data, sizeof(data), NAN);
	}

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
		ck_assert_int_eq(dlc_tier_get(tier, 5, back, sizeof(back), NULL), -ENOENT);
		value = memcached_get(mc, key, klen, &vlen, &flags, &rc);
		ck_assert_int_eq(rc, MEMCACHED_NOTFOUND);
		free(value);
	}
	memcached_free(mc);
	dlc_tier_verify(tier);
	ck_assert_uint_eq(dlc_tier_gauges(tier, gauges, 2), 1);
	/* Framed for another size than the snapshot's: corrupt too. */
	ck_assert_int_eq(dlc_tier_get(tier, 8, back, sizeof(back) - 1, NULL), -ENOENT);
	ck_assert_int_eq(dlc_tier_get(tier, 8, back, sizeof(back), NULL), -ENOENT);
	dlc_tier_offer(tier, 8, data, sizeof(data), NAN);
	ck_assert_uint_eq(dlc_tier_gauges(tier, gauges, 2), 1);
	ck_assert_uint_eq(gauges[0].hits, 3);
	ck_assert_uint_eq(gauges[0].corrupt, 3);
	ck_assert_uint_eq(dlc_tier_corrupt(tier), 3);
	ck_assert_uint_eq(gauges[0].adds, 4);
	ck_assert_uint_eq(gauges[0].bytes, 3 * sizeof(data));
	ck_assert(gauges[0].up);

	/* A dead server: a miss within the timeout, then skipped. */
	stop_memcached();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(dlc_tier_get(tier, 8, back, sizeof(back), NULL), -ENOENT);
	ck_assert_int_eq(dlc_tier_get(tier, 8, back, sizeof(back), NULL), -ENOENT);
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
		ck_assert_int_eq(dlc_tier_set_key(tier, test_secret, sizeof(test_secret)), 0);
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
			ck_assert_int_eq(dlc_tier_get(tier, 9, back, sizeof(back), NULL), -ENOENT);
			ck_assert_uint_eq(g.misses, 0);          /* nor asked for */
		} else {
			ck_assert_uint_eq(g.item_max, 4u << 20);
			ck_assert_uint_eq(g.adds, 1);
			ck_assert_int_eq(dlc_tier_get(tier, 9, back, sizeof(back), NULL), 0);
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
	ck_assert_int_eq(dlc_tier_set_key(tier, test_secret, sizeof(test_secret)), 0);
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
		ck_assert_int_eq(dlc_tier_get(tier, ino, back, sizeof(back), NULL), ino % 2 ? -ENOENT : 0);
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
					   .tier_count = 2, .tier_corrupt = 4 };
	struct dlc_stats stats;
	char *json = NULL, *text = NULL;
	size_t size = 0;
	FILE *out;

	dlc_stats_init(&stats);
	dlc_stats_add(&stats, DLC_STAT_HITS, 5);
	ck_assert_int_eq(dlc_stats_render_json(&stats, &gauges, &json, NULL), 0);
	ck_assert_ptr_nonnull(strstr(json, "\n  \"tier\": {\n    \"servers\": 2,\n    \"corrupt\": 4,\n    \"10.0.0.1:11211\": {\n      \"up\": true,"));
	out = open_memstream(&text, &size);
	ck_assert_int_eq(dlc_stats_print_prometheus(json, out), 0);
	fclose(out);
	ck_assert_ptr_nonnull(strstr(text, "\ndlcache_hits 5\n"));
	ck_assert_ptr_nonnull(strstr(text, "\ndlcache_cache_capacity 0\n"));
	ck_assert_ptr_nonnull(strstr(text, "\ndlcache_tier_servers 2\n"));
	ck_assert_ptr_nonnull(strstr(text, "\ndlcache_tier_corrupt 4\n"));
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
	tcase_add_test(tc, test_seal_and_open);
	tcase_add_test(tc, test_key_file);
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
