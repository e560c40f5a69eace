/*
 * s3_sign.h - AWS Signature Version 4 for the S3 driver (backend_s3.c).
 *
 * Pure: no I/O, no logging, no clock (the caller passes the time).  It turns
 * a request (method, decoded path, decoded query parameters, the headers to
 * sign, the payload's SHA-256) and a credential into the Authorization
 * header's value, as AWS documents it:
 *
 *   canonical request = METHOD \n URI-encoded path \n sorted, encoded query \n
 *                       lower-case "name:trimmed value" lines sorted by name \n
 *                       \n signed header names joined by ';' \n payload hash
 *   string to sign    = "AWS4-HMAC-SHA256" \n AMZ-DATE \n SCOPE \n
 *                       hex(SHA256(canonical request))
 *   signing key       = HMAC(HMAC(HMAC(HMAC("AWS4" SECRET, DATE), REGION),
 *                       SERVICE), "aws4_request")
 *
 * x-amz-date is always signed (from amz_date), x-amz-security-token when the
 * credential has a session token, x-amz-content-sha256 when the request says
 * so (S3 wants it on every request; the generic test suite has none): the
 * caller must send those headers with the same values.  The query the
 * caller puts in its URL must be the canonical one (dlc_s3_canonical_query),
 * and the path the encoded one (dlc_s3_uri_encode with keep_slash), so that
 * what is signed is what is sent.
 *
 * Tested against AWS's published vectors (tests/unit/check_s3sign.c).
 */
#ifndef DLCACHE_S3_SIGN_H
#define DLCACHE_S3_SIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/* Hex SHA-256 of the empty string: the payload hash of every GET. */
#define DLC_S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* Most headers (besides the ones the signer adds) and query parameters. */
#define DLC_S3_MAX_HEADERS 8
#define DLC_S3_MAX_PARAMS 8

struct dlc_s3_credentials {
	const char *access_key;
	const char *secret_key;
	const char *session_token;   /* NULL for long-term keys */
};

struct dlc_s3_pair {
	const char *name;
	const char *value;
};

struct dlc_s3_request {
	const char *method;                  /* "GET" */
	const char *path;                    /* decoded, absolute: "/bucket/a b.jpg" */
	const struct dlc_s3_pair *params;    /* decoded query parameters, any order */
	size_t nparams;
	const struct dlc_s3_pair *headers;   /* host and any others to sign, any case */
	size_t nheaders;
	const char *payload_hash;            /* hex SHA-256 of the body; NULL: the empty body's */
	bool sign_content_hash;              /* sign x-amz-content-sha256: payload_hash */
	const char *amz_date;                /* "YYYYMMDDTHHMMSSZ" */
	const char *region;                  /* "us-east-1" */
	const char *service;                 /* "s3" */
};

/*
 * Percent-encodes in as SigV4 wants it (unreserved A-Z a-z 0-9 - _ . ~ kept,
 * every other byte as %XX in upper case; '/' kept when keep_slash) into out.
 * Returns the length, or -ENAMETOOLONG when out (size bytes) is too small.
 */
int dlc_s3_uri_encode(const char *in, bool keep_slash, char *out, size_t size);

/* The canonical query string of params (encoded, sorted by name then value,
 * joined with '&'; "" for none) into out.  Length or -ENAMETOOLONG (out is
 * too small), -EINVAL or -ENOMEM.  Values of any length are encoded. */
int dlc_s3_canonical_query(const struct dlc_s3_pair *params, size_t nparams, char *out,
			   size_t size);

/* Bytes enough for the canonical query of params, its NUL included. */
size_t dlc_s3_canonical_query_size(const struct dlc_s3_pair *params, size_t nparams);

/* The canonical request (see above) into out.  Length, or -EINVAL for a bad
 * request (too many headers, missing fields) or -ENAMETOOLONG. */
int dlc_s3_canonical_request(const struct dlc_s3_request *request,
			     const struct dlc_s3_credentials *credentials, char *out, size_t size);

/*
 * The Authorization header's value ("AWS4-HMAC-SHA256 Credential=AK/DATE/
 * REGION/SERVICE/aws4_request, SignedHeaders=..., Signature=HEX") into out.
 * 0, -EINVAL or -ENAMETOOLONG.
 */
int dlc_s3_sign(const struct dlc_s3_request *request,
		const struct dlc_s3_credentials *credentials, char *out, size_t size);

/* "YYYYMMDDTHHMMSSZ" of t (UTC) into out[17]. */
void dlc_s3_amz_date(time_t t, char out[17]);

/* Hex SHA-256 of data into out[65]. */
void dlc_s3_sha256_hex(const void *data, size_t len, char out[65]);

#endif
