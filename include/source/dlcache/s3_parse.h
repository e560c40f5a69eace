/*
 * s3_parse.h - pure parsers of what the S3 driver (backend_s3.c,
 * backend_s3_http.c) reads from outside: a server's Content-Range and Date
 * headers, the URL-encoded keys of a listing asked with encoding-type=url,
 * and the text of a shared credentials file.  No I/O, no logging, no
 * clock; every input may be of any length and any content, and a value
 * that is not exactly what the format says is refused, never guessed at.
 */
#ifndef DLCACHE_S3_PARSE_H
#define DLCACHE_S3_PARSE_H

#include <stdbool.h>
#include <stdint.h>

/* The TOTAL of a Content-Range whose object size is unknown ("/ *"). */
#define DLC_S3_SIZE_UNKNOWN UINT64_MAX

/*
 * A 206's Content-Range, "bytes FIRST-LAST/TOTAL" (RFC 9110 14.4; TOTAL may
 * be "*", given as DLC_S3_SIZE_UNKNOWN; the unit in any case; spaces around
 * the value tolerated).  0 with *first, *last and *total, or -EINVAL for
 * anything else: a missing part, a sign, junk, LAST < FIRST, LAST >= TOTAL,
 * a number past 2^64, the unsatisfied form "bytes * /TOTAL".
 */
int dlc_s3_content_range_parse(const char *value, uint64_t *first, uint64_t *last,
			       uint64_t *total);

/* An HTTP date (IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT", as S3 sends
 * its Date header) into unix seconds.  0, or -EINVAL. */
int dlc_s3_http_date_parse(const char *value, int64_t *out);

/*
 * A key, prefix or delimiter of a listing asked with encoding-type=url,
 * decoded: "%XX" is the byte XX (either case of hex), '+' a space (as S3
 * and MinIO encode, and as botocore decodes), anything else itself.  *out
 * is malloc'd.  0, -EINVAL for a '%' not followed by two hex digits or a
 * decoded NUL byte (no path can hold one), -ENOMEM.
 */
int dlc_s3_url_decode(const char *in, char **out);

/* What one profile of a credentials file gives: each NULL when absent. */
struct dlc_s3_keys {
	char *access_key;
	char *secret_key;
	char *session_token;
};

/*
 * Reads section profile of a shared credentials file's text (the AWS
 * tools' INI form: "[name]" headers, "name = value" lines of any length,
 * '#' and ';' comments, CR LF or LF line ends; a later value wins) into
 * *out, whose strings are malloc'd.  *section_found says whether the
 * section exists at all.  0, or -ENOMEM (*out then empty).
 */
int dlc_s3_credentials_parse(const char *text, const char *profile, struct dlc_s3_keys *out,
			     bool *section_found);

/* Wipes (OPENSSL_cleanse) and frees the keys; NULLs them. */
void dlc_s3_keys_wipe(struct dlc_s3_keys *keys);

#endif
