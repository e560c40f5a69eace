/*
 * s3_source.h - the way a user names an S3 source, and the endpoint option,
 * parsed into what the S3 driver (backend_s3.c) needs:
 *
 *     s3://BUCKET[/PREFIX]      the objects whose keys start with PREFIX/,
 *                               as a tree split at '/'
 *     s3_endpoint=http[s]://HOST[:PORT][/]   a custom endpoint (MinIO, Ceph
 *                               RGW, GCS's XML API, a test server), addressed
 *                               path-style: URL/BUCKET/KEY
 *
 * Without an endpoint the source is on AWS: https://BUCKET.s3.REGION.
 * amazonaws.com/KEY (virtual-hosted), or path-style on
 * https://s3.REGION.amazonaws.com when the bucket's name has a dot (its
 * name would not match the wildcard certificate).  Pure: no file, no network.
 */
#ifndef DLCACHE_S3_SOURCE_H
#define DLCACHE_S3_SOURCE_H

#include <stdbool.h>

struct dlc_s3_source {
	char *bucket;
	char *prefix;         /* "" or "a/b/" (always ends with '/') */
};

struct dlc_s3_endpoint {
	bool https;
	char *host;           /* "host[:port]" as it goes in the Host header */
	char *origin;         /* "http[s]://host[:port]", what URLs start with */
	char *bucket_path;    /* path-style: "/BUCKET"; virtual-hosted: "" */
};

/* True when source starts with "s3://". */
bool dlc_s3_source_matches(const char *source);

/* Parses "s3://BUCKET[/PREFIX]" into *out (freed with dlc_s3_source_free).
 * 0, or -EINVAL with *cause saying how to write it (-ENOMEM without). */
int dlc_s3_source_parse(const char *source, struct dlc_s3_source *out, char **cause);
void dlc_s3_source_free(struct dlc_s3_source *source);

/* The endpoint of bucket: endpoint_url (s3_endpoint=, may be NULL: AWS) in
 * region.  0, or -EINVAL with *cause (-ENOMEM without). */
int dlc_s3_endpoint_parse(const char *endpoint_url, const char *bucket, const char *region,
			  struct dlc_s3_endpoint *out, char **cause);
void dlc_s3_endpoint_free(struct dlc_s3_endpoint *endpoint);

#endif
