/*
 * s3_source.c - parsing "s3://BUCKET[/PREFIX]" and s3_endpoint= (see
 * s3_source.h).  Pure: strings in, strings out, a cause for a person.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/cause.h"
#include "dlcache/s3_source.h"

#define SCHEME "s3://"

bool dlc_s3_source_matches(const char *source)
{
	return source && strncmp(source, SCHEME, strlen(SCHEME)) == 0;
}

/* S3's bucket rules, loosely: 3-63 of a-z 0-9 . - _ (old buckets had '_'
 * and capitals; other stores allow them too, so capitals pass). */
static bool bucket_valid(const char *bucket, size_t len)
{
	if (len < 1 || len > 255)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)bucket[i]) && !strchr(".-_", bucket[i]))
			return false;
	return true;
}

/* Each '/'-separated component of prefix is non-empty, not "." or "..". */
static bool prefix_valid(const char *prefix, size_t len)
{
	size_t start = 0;

	for (size_t i = 0; i <= len; i++) {
		if (i < len && prefix[i] != '/')
			continue;
		if (i == start || (i - start == 1 && prefix[start] == '.') ||
		    (i - start == 2 && prefix[start] == '.' && prefix[start + 1] == '.'))
			return false;
		start = i + 1;
	}
	return true;
}

int dlc_s3_source_parse(const char *source, struct dlc_s3_source *out, char **cause)
{
	const char *bucket, *slash, *prefix;
	size_t bucket_len, prefix_len;

	out->bucket = out->prefix = NULL;
	if (!dlc_s3_source_matches(source)) {
		dlc_cause_set(cause, "source '%s' is not an S3 source; write s3://BUCKET/PREFIX",
			      source ? source : "");
		return -EINVAL;
	}
	bucket = source + strlen(SCHEME);
	slash = strchr(bucket, '/');
	bucket_len = slash ? (size_t)(slash - bucket) : strlen(bucket);
	if (!bucket_valid(bucket, bucket_len)) {
		dlc_cause_set(cause, "source '%s' has no valid bucket name (letters, digits, '.', '-' and '_'); write s3://BUCKET/PREFIX",
			      source);
		return -EINVAL;
	}
	prefix = slash ? slash + 1 : "";
	prefix_len = strlen(prefix);
	while (prefix_len > 0 && prefix[prefix_len - 1] == '/')
		prefix_len--;   /* "s3://b/train/" is "s3://b/train" */
	if (prefix_len > 0 && !prefix_valid(prefix, prefix_len)) {
		dlc_cause_set(cause, "source '%s' has an empty, '.' or '..' component in its prefix; write s3://BUCKET/DIR/SUBDIR",
			      source);
		return -EINVAL;
	}
	out->bucket = strndup(bucket, bucket_len);
	out->prefix = malloc(prefix_len + 2);
	if (!out->bucket || !out->prefix) {
		dlc_s3_source_free(out);
		return -ENOMEM;
	}
	memcpy(out->prefix, prefix, prefix_len);
	if (prefix_len > 0)
		out->prefix[prefix_len++] = '/';
	out->prefix[prefix_len] = '\0';
	return 0;
}

void dlc_s3_source_free(struct dlc_s3_source *source)
{
	free(source->bucket);
	free(source->prefix);
	source->bucket = source->prefix = NULL;
}

int dlc_s3_endpoint_parse(const char *endpoint_url, const char *bucket, const char *region,
			  struct dlc_s3_endpoint *out, char **cause)
{
	const char *authority, *end;
	int n1, n2, n3;

	memset(out, 0, sizeof(*out));
	if (!endpoint_url) {
		/* AWS.  A dotted bucket name breaks the wildcard certificate of
		 * the virtual-hosted name, so it goes path-style. */
		bool dotted = strchr(bucket, '.') != NULL;

		out->https = true;
		if (dotted) {
			n1 = asprintf(&out->host, "s3.%s.amazonaws.com", region);
			n2 = asprintf(&out->bucket_path, "/%s", bucket);
		} else {
			n1 = asprintf(&out->host, "%s.s3.%s.amazonaws.com", bucket, region);
			n2 = (out->bucket_path = strdup("")) ? 0 : -1;
		}
		n3 = n1 < 0 ? -1 : asprintf(&out->origin, "https://%s", out->host);
		if (n1 < 0 || n2 < 0 || n3 < 0) {
			if (n1 < 0)
				out->host = NULL;
			if (n2 < 0)
				out->bucket_path = NULL;
			if (n3 < 0)
				out->origin = NULL;
			dlc_s3_endpoint_free(out);
			return -ENOMEM;
		}
		return 0;
	}
	if (strncmp(endpoint_url, "http://", 7) == 0) {
		authority = endpoint_url + 7;
	} else if (strncmp(endpoint_url, "https://", 8) == 0) {
		authority = endpoint_url + 8;
		out->https = true;
	} else {
		dlc_cause_set(cause, "s3_endpoint '%s' is not an http:// or https:// URL; write e.g. s3_endpoint=http://127.0.0.1:9000",
			      endpoint_url);
		return -EINVAL;
	}
	end = authority + strcspn(authority, "/?#");
	if (end == authority || (*end && strcmp(end, "/") != 0) || memchr(authority, '@', (size_t)(end - authority))) {
		dlc_cause_set(cause, "s3_endpoint '%s' must be http[s]://HOST[:PORT] with no path or user; write e.g. s3_endpoint=https://minio.example:9000",
			      endpoint_url);
		return -EINVAL;
	}
	out->host = strndup(authority, (size_t)(end - authority));
	n1 = out->host ? asprintf(&out->origin, "%s://%s", out->https ? "https" : "http",
				  out->host) : -1;
	if (n1 < 0)
		out->origin = NULL;
	n2 = asprintf(&out->bucket_path, "/%s", bucket);
	if (n2 < 0)
		out->bucket_path = NULL;
	if (!out->host || n1 < 0 || n2 < 0) {
		dlc_s3_endpoint_free(out);
		return -ENOMEM;
	}
	return 0;
}

void dlc_s3_endpoint_free(struct dlc_s3_endpoint *endpoint)
{
	free(endpoint->host);
	free(endpoint->origin);
	free(endpoint->bucket_path);
	memset(endpoint, 0, sizeof(*endpoint));
}
