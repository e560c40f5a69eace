/*
 * tier_place.h - the cluster tier's pure arithmetic: which server owns a
 * sample and the key it is stored under (the value's seal is tier_seal.h).
 * No I/O, no logging; tier.c does the talking.
 *
 * Owner.  Jump consistent hashing (Lamping and Veach, 2014) of the key's
 * xxh3 over the server list, in the list's order: every node given the same
 * list picks the same owner for a key, and appending a server to a list of
 * n moves only about 1/(n+1) of the keys (removing the last one moves only
 * its own).  Removing a server in the middle renumbers the ones after it, so
 * a tier file is edited at its end.
 *
 * Key.  "dlc1:" SNAPSHOT_ID(16 hex) ":" INODE(hex): nodes that mount the same
 * snapshot (same identity, see dlc_snapshot_id) agree on every key; nodes
 * with different snapshots never share one.  A key is no secret: whoever
 * reaches a server can name any sample's value, hence the seal.
 */
#ifndef DLCACHE_TIER_PLACE_H
#define DLCACHE_TIER_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DLC_TIER_KEY_MAX 48

/* The key of inode ino of the snapshot with identity snapshot_id, written
 * NUL-terminated into key (DLC_TIER_KEY_MAX bytes); returns its length. */
size_t dlc_tier_place_key(uint64_t snapshot_id, uint32_t ino, char *key);

/* The index (0..nservers-1) of the server that owns key; nservers > 0. */
unsigned dlc_tier_place_owner(const char *key, size_t key_len, unsigned nservers);

/*
 * The admission threshold when the tier's budget (bytes) is smaller than the
 * samples': the score s such that the samples scoring at least s, taken
 * from the highest score down, fit in budget (their sizes summed).  scores[i]
 * and sizes[i] describe sample i; NaN scores (unknown) are left out.  NaN
 * when every sample fits, none is scored, or memory runs out (then nothing
 * is held back).  Allocates n pairs for the sort.
 */
float dlc_tier_place_threshold(const float *scores, const uint64_t *sizes, size_t n,
			       uint64_t budget);

/*
 * Parses "HOST:PORT" (a name, an IPv4 address, or [IPv6]:PORT) into host
 * (hostlen bytes) and *port; false when malformed (no port, port 0 or above
 * 65535, empty or too long host).
 */
bool dlc_tier_place_parse_server(const char *text, size_t len, char *host, size_t hostlen,
				 unsigned *port);

#endif
