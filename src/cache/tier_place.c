/*
 * tier_place.c - keys and owners of the cluster tier's values (pure).
 *
 * See tier_place.h for the contracts.  The owner is Lamping and Veach's jump
 * consistent hash of the key's xxh3: a linear congruential walk over the
 * bucket numbers whose last jump below nservers is the owner, so the result
 * depends only on the key and the list's length, and growing the list moves
 * a key only to one of the new buckets.  The admission threshold keeps the
 * highest-scored samples that fit the servers' budget, ties together.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dlcache/tier_place.h"

size_t dlc_tier_place_key(uint64_t snapshot_id, uint32_t ino, char *key)
{
	int n = snprintf(key, DLC_TIER_KEY_MAX, "dlc1:%016llx:%x", (unsigned long long)snapshot_id,
			 ino);

	return n < 0 ? 0 : (size_t)n;
}

unsigned dlc_tier_place_owner(const char *key, size_t key_len, unsigned nservers)
{
	uint64_t h = XXH3_64bits(key, key_len);
	int64_t b = -1, j = 0;

	while (j < (int64_t)nservers) {
		b = j;
		h = h * 2862933555777941757ULL + 1;
		j = (int64_t)((double)(b + 1) * ((double)(1LL << 31) / (double)((h >> 33) + 1)));
	}
	return (unsigned)b;
}

struct scored {
	float score;
	uint64_t size;
};

static int by_score_descending(const void *a, const void *b)
{
	float x = ((const struct scored *)a)->score, y = ((const struct scored *)b)->score;

	return x < y ? 1 : x > y ? -1 : 0;
}

float dlc_tier_place_threshold(const float *scores, const uint64_t *sizes, size_t n,
			       uint64_t budget)
{
	struct scored *all = malloc((n ? n : 1) * sizeof(*all));
	uint64_t total = 0;
	float threshold = NAN;
	size_t m = 0;

	if (!all)
		return NAN;
	for (size_t i = 0; i < n; i++) {
		if (isnan(scores[i]))
			continue;
		all[m++] = (struct scored) { scores[i], sizes[i] };
		total += sizes[i];
	}
	if (m > 0 && total > budget) {
		uint64_t used = 0;

		qsort(all, m, sizeof(*all), by_score_descending);
		/* The lowest score whose samples, and every higher one's, still fit;
		 * ties stay together, so a tie that does not fit is left out whole. */
		threshold = INFINITY;
		for (size_t i = 0; i < m;) {
			size_t j = i;
			uint64_t group = 0;

			while (j < m && all[j].score == all[i].score)
				group += all[j++].size;
			if (used + group > budget)
				break;
			used += group;
			threshold = all[i].score;
			i = j;
		}
	}
	free(all);
	return threshold;
}

bool dlc_tier_place_parse_server(const char *text, size_t len, char *host, size_t hostlen,
				 unsigned *port)
{
	const char *colon = NULL, *host_start = text, *host_end;
	unsigned long value = 0;

	if (len > 0 && text[0] == '[') {
		const char *close = memchr(text, ']', len);

		if (!close || close + 1 >= text + len || close[1] != ':')
			return false;
		host_start = text + 1;
		host_end = close;
		colon = close + 1;
	} else {
		for (size_t i = 0; i < len; i++)
			if (text[i] == ':')
				colon = text + i;
		if (!colon)
			return false;
		host_end = colon;
		if (memchr(text, ':', (size_t)(colon - text)))
			return false;   /* an IPv6 address needs its brackets */
	}
	if (host_end == host_start || (size_t)(host_end - host_start) >= hostlen)
		return false;
	if (colon + 1 == text + len)
		return false;
	for (const char *p = colon + 1; p < text + len; p++) {
		if (*p < '0' || *p > '9')
			return false;
		value = value * 10 + (unsigned long)(*p - '0');
		if (value > 65535)
			return false;
	}
	if (value == 0)
		return false;
	for (const char *p = host_start; p < host_end; p++)
		if (*p == ' ' || *p == '\t' || (unsigned char)*p < 0x20)
			return false;
	memcpy(host, host_start, (size_t)(host_end - host_start));
	host[host_end - host_start] = '\0';
	*port = (unsigned)value;
	return true;
}
