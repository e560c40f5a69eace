/*
 * check_s3sign.c - Signature Version 4 (s3_sign.c) against the values AWS
 * publishes, never against values this code produced:
 *
 *  - the Signature Version 4 test suite (AWS General Reference, "Signature
 *    Version 4 test suite"; credentials AKIDEXAMPLE, 20150830T123600Z,
 *    us-east-1, service "service"): get-vanilla, get-vanilla-query-order-key-case
 *    (the query sorted), post-vanilla, post-sts-header-before (a session
 *    token, signed), with their canonical requests where the suite gives them;
 *  - the Amazon S3 API Reference, "Signature Calculations for the
 *    Authorization Header: Transferring Payload in a Single Chunk", examples
 *    GET Object (a Range header and x-amz-content-sha256) and the
 *    ListObjects GET Bucket example (a query to sort and encode).
 *
 * And the driver's parsers of what comes from outside (s3_parse.c), table
 * by table: Content-Range, HTTP dates, URL-encoded listing keys, and the
 * credentials file; tokens and lines of any length.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/s3_parse.h"
#include "dlcache/s3_sign.h"
#include "dlcache/s3_source.h"

static const struct dlc_s3_credentials suite_credentials = {
	.access_key = "AKIDEXAMPLE",
	.secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
};

static const struct dlc_s3_credentials s3_doc_credentials = {
	.access_key = "AKIAIOSFODNN7EXAMPLE",
	.secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
};

#define SUITE_TOKEN "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="

#define SUITE_SCOPE "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "

static const struct dlc_s3_pair suite_host[] = { { "Host", "example.amazonaws.com" } };

struct vector {
	const char *name;
	struct dlc_s3_request request;
	const struct dlc_s3_credentials *credentials;
	const char *canonical;      /* NULL where the source gives none */
	const char *authorization;
};

static const struct dlc_s3_pair order_params[] = { { "Param2", "value2" }, { "Param1", "value1" } };
static const struct dlc_s3_pair s3_get_headers[] = {
	{ "Host", "examplebucket.s3.amazonaws.com" }, { "Range", "bytes=0-9" },
};
static const struct dlc_s3_pair s3_list_headers[] = {
	{ "Host", "examplebucket.s3.amazonaws.com" },
};
static const struct dlc_s3_pair s3_list_params[] = { { "max-keys", "2" }, { "prefix", "J" } };

static const struct dlc_s3_credentials suite_token_credentials = {
	.access_key = "AKIDEXAMPLE",
	.secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
	.session_token = SUITE_TOKEN,
};

#define SUITE_REQUEST(m) .method = m, .path = "/", .headers = suite_host, .nheaders = 1, \
	.amz_date = "20150830T123600Z", .region = "us-east-1", .service = "service"

static const struct vector vectors[] = {
	{ "get-vanilla", { SUITE_REQUEST("GET") }, &suite_credentials,
	  "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
	  DLC_S3_EMPTY_SHA256,
	  SUITE_SCOPE "SignedHeaders=host;x-amz-date, "
	  "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31" },
	{ "get-vanilla-query-order-key-case",
	  { SUITE_REQUEST("GET"), .params = order_params, .nparams = 2 }, &suite_credentials,
	  "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\n"
	  "x-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" DLC_S3_EMPTY_SHA256,
	  SUITE_SCOPE "SignedHeaders=host;x-amz-date, "
	  "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500" },
	{ "post-vanilla", { SUITE_REQUEST("POST") }, &suite_credentials, NULL,
	  SUITE_SCOPE "SignedHeaders=host;x-amz-date, "
	  "Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b" },
	{ "post-sts-header-before", { SUITE_REQUEST("POST") }, &suite_token_credentials,
	  "POST\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n"
	  "x-amz-security-token:" SUITE_TOKEN "\n\nhost;x-amz-date;x-amz-security-token\n"
	  DLC_S3_EMPTY_SHA256,
	  SUITE_SCOPE "SignedHeaders=host;x-amz-date;x-amz-security-token, "
	  "Signature=85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead" },
	{ "s3 GET Object (Range)",
	  { .method = "GET", .path = "/test.txt", .headers = s3_get_headers, .nheaders = 2,
	    .sign_content_hash = true, .amz_date = "20130524T000000Z", .region = "us-east-1",
	    .service = "s3" },
	  &s3_doc_credentials,
	  "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
	  "x-amz-content-sha256:" DLC_S3_EMPTY_SHA256 "\nx-amz-date:20130524T000000Z\n\n"
	  "host;range;x-amz-content-sha256;x-amz-date\n" DLC_S3_EMPTY_SHA256,
	  "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
	  "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
	  "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41" },
	{ "s3 GET Bucket (List Objects)",
	  { .method = "GET", .path = "/", .params = s3_list_params, .nparams = 2,
	    .headers = s3_list_headers, .nheaders = 1, .sign_content_hash = true,
	    .amz_date = "20130524T000000Z", .region = "us-east-1", .service = "s3" },
	  &s3_doc_credentials,
	  "GET\n/\nmax-keys=2&prefix=J\nhost:examplebucket.s3.amazonaws.com\n"
	  "x-amz-content-sha256:" DLC_S3_EMPTY_SHA256 "\nx-amz-date:20130524T000000Z\n\n"
	  "host;x-amz-content-sha256;x-amz-date\n" DLC_S3_EMPTY_SHA256,
	  "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
	  "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
	  "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7" },
};

START_TEST(test_published_vector)
{
	const struct vector *v = &vectors[_i];
	char canonical[16384], authorization[1024];
	int rc;

	rc = dlc_s3_canonical_request(&v->request, v->credentials, canonical, sizeof(canonical));
	ck_assert_msg(rc > 0, "%s: canonical request failed: %d", v->name, rc);
	if (v->canonical)
		ck_assert_msg(strcmp(canonical, v->canonical) == 0,
			      "%s: canonical request\n%s\nwanted\n%s", v->name, canonical,
			      v->canonical);
	rc = dlc_s3_sign(&v->request, v->credentials, authorization, sizeof(authorization));
	ck_assert_msg(rc == 0, "%s: sign failed: %d", v->name, rc);
	ck_assert_msg(strcmp(authorization, v->authorization) == 0, "%s:\n%s\nwanted\n%s", v->name,
		      authorization, v->authorization);
}
END_TEST

/* The SigV4 encoding rules: unreserved bytes kept, '/' only in paths, the
 * rest upper-case %XX byte by byte (UTF-8 included), space as %20. */
START_TEST(test_uri_encode)
{
	static const struct { const char *in; bool slash; const char *out; } cases[] = {
		{ "a-b_c.d~e", false, "a-b_c.d~e" },
		{ "a b+c", false, "a%20b%2Bc" },
		{ "dir/x y.jpg", true, "dir/x%20y.jpg" },
		{ "dir/x", false, "dir%2Fx" },
		{ "\xc3\xbc", false, "%C3%BC" },
		{ "*=&", false, "%2A%3D%26" },
	};
	char out[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(dlc_s3_uri_encode(cases[i].in, cases[i].slash, out, sizeof(out)),
				 (int)strlen(cases[i].out));
		ck_assert_str_eq(out, cases[i].out);
	}
	ck_assert_int_eq(dlc_s3_uri_encode("abcdef", false, out, 4), -ENAMETOOLONG);
}
END_TEST

/* A ListObjectsV2 query as the driver sends it: sorted, '/' encoded. */
START_TEST(test_canonical_query)
{
	const struct dlc_s3_pair params[] = {
		{ "prefix", "train/n01 a/" }, { "list-type", "2" }, { "delimiter", "/" },
		{ "continuation-token", "1/x+y=" },
	};
	char out[512];

	ck_assert_int_gt(dlc_s3_canonical_query(params, 4, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "continuation-token=1%2Fx%2By%3D&delimiter=%2F&list-type=2&"
			      "prefix=train%2Fn01%20a%2F");
	ck_assert_int_eq(dlc_s3_canonical_query(params, 0, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(dlc_s3_canonical_query(params, 4, out, 16), -ENAMETOOLONG);
}
END_TEST

/* Bad requests are refused, never signed half-way. */
START_TEST(test_bad_requests)
{
	struct dlc_s3_request request = { SUITE_REQUEST("GET") };
	struct dlc_s3_credentials no_secret = { .access_key = "AK" };
	char out[1024];

	ck_assert_int_eq(dlc_s3_sign(&request, &no_secret, out, sizeof(out)), -EINVAL);
	request.path = "relative";
	ck_assert_int_eq(dlc_s3_sign(&request, &suite_credentials, out, sizeof(out)), -EINVAL);
	request.path = "/";
	request.amz_date = "2015";
	ck_assert_int_eq(dlc_s3_sign(&request, &suite_credentials, out, sizeof(out)), -EINVAL);
	request.amz_date = "20150830T123600Z";
	ck_assert_int_eq(dlc_s3_sign(&request, &suite_credentials, out, 20), -ENAMETOOLONG);
	ck_assert_int_eq(dlc_s3_sign(&request, &suite_credentials, out, sizeof(out)), 0);
}
END_TEST

START_TEST(test_amz_date_and_hash)
{
	char date[17], hash[65];

	dlc_s3_amz_date(1440938160, date);      /* 2015-08-30 12:36:00 UTC */
	ck_assert_str_eq(date, "20150830T123600Z");
	dlc_s3_sha256_hex("", 0, hash);
	ck_assert_str_eq(hash, DLC_S3_EMPTY_SHA256);
	/* FIPS 180-2's "abc". */
	dlc_s3_sha256_hex("abc", 3, hash);
	ck_assert_str_eq(hash, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
END_TEST

/* s3://BUCKET[/PREFIX] and s3_endpoint= (s3_source.c): what the driver
 * addresses, and a sentence for what it cannot. */
START_TEST(test_source_parse)
{
	static const struct { const char *in, *bucket, *prefix; } good[] = {
		{ "s3://bkt", "bkt", "" },
		{ "s3://bkt/", "bkt", "" },
		{ "s3://bkt/train", "bkt", "train/" },
		{ "s3://my.bucket-1/a/b c/", "my.bucket-1", "a/b c/" },
	};
	static const char *const bad[] = {
		"s3://", "s3:///x", "s3://b@d/x", "s3://b/a//c", "s3://b/./a", "s3://b/a/..", "nfs://h/x",
	};
	struct dlc_s3_source source;
	char *cause = NULL;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ck_assert_int_eq(dlc_s3_source_parse(good[i].in, &source, &cause), 0);
		ck_assert_str_eq(source.bucket, good[i].bucket);
		ck_assert_str_eq(source.prefix, good[i].prefix);
		dlc_s3_source_free(&source);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(dlc_s3_source_parse(bad[i], &source, &cause) == -EINVAL, "%s", bad[i]);
		ck_assert_msg(cause && strstr(cause, "s3://"), "%s: %s", bad[i], cause);
		free(cause);
		cause = NULL;
	}
	ck_assert(dlc_s3_source_matches("s3://x"));
	ck_assert(!dlc_s3_source_matches("/s3://x"));
}
END_TEST

START_TEST(test_endpoint_parse)
{
	struct dlc_s3_endpoint endpoint;
	char *cause = NULL;

	ck_assert_int_eq(dlc_s3_endpoint_parse(NULL, "bkt", "eu-west-1", &endpoint, &cause), 0);
	ck_assert_str_eq(endpoint.origin, "https://bkt.s3.eu-west-1.amazonaws.com");
	ck_assert_str_eq(endpoint.host, "bkt.s3.eu-west-1.amazonaws.com");
	ck_assert_str_eq(endpoint.bucket_path, "");
	dlc_s3_endpoint_free(&endpoint);
	/* A dotted name would break the wildcard certificate: path-style. */
	ck_assert_int_eq(dlc_s3_endpoint_parse(NULL, "a.b", "us-east-1", &endpoint, &cause), 0);
	ck_assert_str_eq(endpoint.origin, "https://s3.us-east-1.amazonaws.com");
	ck_assert_str_eq(endpoint.bucket_path, "/a.b");
	dlc_s3_endpoint_free(&endpoint);
	ck_assert_int_eq(dlc_s3_endpoint_parse("http://127.0.0.1:9000/", "bkt", "us-east-1",
					       &endpoint, &cause), 0);
	ck_assert_str_eq(endpoint.origin, "http://127.0.0.1:9000");
	ck_assert_str_eq(endpoint.host, "127.0.0.1:9000");
	ck_assert_str_eq(endpoint.bucket_path, "/bkt");
	dlc_s3_endpoint_free(&endpoint);
	static const char *const bad[] = {
		"ftp://h", "http://", "http://h/path", "https://user@h", "h:9000",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(dlc_s3_endpoint_parse(bad[i], "b", "r", &endpoint, &cause) == -EINVAL,
			      "%s", bad[i]);
		ck_assert_msg(cause && strstr(cause, "s3_endpoint"), "%s: %s", bad[i], cause);
		free(cause);
		cause = NULL;
	}
}
END_TEST

/* A session token or a continuation token of any length signs whole (an
 * 8 KiB token was refused as ENAMETOOLONG, "File name too long"). */
START_TEST(test_long_token_and_query)
{
	size_t token_len = 8192, value_len = 5000;
	char *token = malloc(token_len + 1), *value = malloc(value_len + 1);
	char *canonical = malloc(64 * 1024), *expected = malloc(64 * 1024), *query;
	char out[1024];
	struct dlc_s3_credentials credentials = suite_credentials;
	struct dlc_s3_pair params[] = { { "continuation-token", value }, { "list-type", "2" } };
	struct dlc_s3_request request = {
		.method = "GET", .path = "/bkt", .params = params, .nparams = 2,
		.headers = suite_host, .nheaders = 1, .amz_date = "20150830T123600Z",
		.region = "us-east-1", .service = "s3",
	};
	size_t query_size;

	ck_assert(token && value && canonical && expected);
	memset(token, 'T', token_len);
	token[token_len] = '\0';
	memset(value, '/', value_len);      /* every byte encoded: 15000 bytes */
	value[value_len] = '\0';
	credentials.session_token = token;
	query_size = dlc_s3_canonical_query_size(params, 2);
	query = malloc(query_size);
	ck_assert_ptr_nonnull(query);
	ck_assert_int_eq(dlc_s3_canonical_query(params, 2, query, query_size),
			 (int)(strlen("continuation-token=") + 3 * value_len + strlen("&list-type=2")));
	ck_assert(strncmp(query, "continuation-token=%2F%2F", 25) == 0);
	ck_assert(strcmp(query + strlen(query) - 12, "&list-type=2") == 0);
	ck_assert_int_eq(dlc_s3_canonical_query(params, 2, out, 100), -ENAMETOOLONG);
	/* The canonical form AWS documents, with the token whole. */
	snprintf(expected, 64 * 1024, "GET\n/bkt\n%s\nhost:example.amazonaws.com\n"
		 "x-amz-date:20150830T123600Z\nx-amz-security-token:%s\n\n"
		 "host;x-amz-date;x-amz-security-token\n%s", query, token, DLC_S3_EMPTY_SHA256);
	ck_assert_int_eq(dlc_s3_canonical_request(&request, &credentials, canonical, 64 * 1024),
			 (int)strlen(expected));
	ck_assert_str_eq(canonical, expected);
	ck_assert_int_eq(dlc_s3_sign(&request, &credentials, out, sizeof(out)), 0);
	ck_assert(strstr(out, "SignedHeaders=host;x-amz-date;x-amz-security-token, Signature="));
	free(token);
	free(value);
	free(canonical);
	free(expected);
	free(query);
}
END_TEST

/* Content-Range of a 206 (s3_parse.c): exactly "bytes FIRST-LAST/TOTAL". */
START_TEST(test_content_range)
{
	static const struct {
		const char *in;
		uint64_t first, last, total;
	} good[] = {
		{ "bytes 0-99/100", 0, 99, 100 },
		{ "bytes 64-1063/20000", 64, 1063, 20000 },
		{ "  BYTES 5-5/6\r\n", 5, 5, 6 },
		{ "bytes 0-0/*", 0, 0, DLC_S3_SIZE_UNKNOWN },
		{ "bytes 18446744073709551613-18446744073709551613/18446744073709551614",
		  18446744073709551613ull, 18446744073709551613ull, 18446744073709551614ull },
	};
	static const char *const bad[] = {
		"", "bytes", "bytes ", "bytes 0-99", "bytes 0-99/", "bytes -99/100", "bytes 0-/100",
		"bytes 10-9/100", "bytes 0-100/100", "bytes */100", "bytes +1-2/3", "bytes 1-2/3x",
		"bytes 1 -2/3", "items 0-1/2", "bytes=0-1/2", "bytes 0-1/2/3",
		"bytes 0-18446744073709551616/18446744073709551617", "bytes 0-1/18446744073709551615",
	};
	uint64_t first, last, total;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ck_assert_msg(dlc_s3_content_range_parse(good[i].in, &first, &last, &total) == 0,
			      "%s", good[i].in);
		ck_assert(first == good[i].first && last == good[i].last && total == good[i].total);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(dlc_s3_content_range_parse(bad[i], &first, &last, &total) == -EINVAL,
			      "'%s' was taken", bad[i]);
}
END_TEST

START_TEST(test_http_date)
{
	int64_t when;

	ck_assert_int_eq(dlc_s3_http_date_parse("Sun, 30 Aug 2015 12:36:00 GMT", &when), 0);
	ck_assert_int_eq(when, 1440938160);
	ck_assert_int_eq(dlc_s3_http_date_parse("Sun, 30 Aug 2015 12:36:00 GMT junk", &when), -EINVAL);
	ck_assert_int_eq(dlc_s3_http_date_parse("yesterday", &when), -EINVAL);
}
END_TEST

/* Keys of a listing with encoding-type=url, decoded as S3 encodes them. */
START_TEST(test_url_decode)
{
	static const struct { const char *in, *out; } good[] = {
		{ "plain/key.jpg", "plain/key.jpg" },
		{ "a+b%20c", "a b c" },
		{ "50%25%2Boff", "50%+off" },
		{ "ctl%01name%7f", "ctl\001name\177" },
		{ "%C3%BCn%c3%afcode", "\xc3\xbc" "n\xc3\xaf" "code" },
		{ "", "" },
	};
	static const char *const bad[] = { "%", "%4", "%G0", "a%0", "nul%00byte", "%%41" };
	char *out;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ck_assert_int_eq(dlc_s3_url_decode(good[i].in, &out), 0);
		ck_assert_str_eq(out, good[i].out);
		free(out);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(dlc_s3_url_decode(bad[i], &out) == -EINVAL, "'%s' was taken", bad[i]);
		ck_assert_ptr_null(out);
	}
}
END_TEST

/* The shared credentials file: lines of any length, CR LF, comments, the
 * profile's keys only. */
START_TEST(test_credentials_parse)
{
	size_t token_len = 3 * 4096 + 17;
	char *token = malloc(token_len + 1), *text = malloc(token_len + 1024);
	struct dlc_s3_keys keys;
	bool found;

	ck_assert(token && text);
	for (size_t i = 0; i < token_len; i++)
		token[i] = (char)('A' + i % 26);
	token[token_len] = '\0';
	snprintf(text, token_len + 1024,
		 "# comment\n[default]\naws_access_key_id = AKIDDEFAULT\n"
		 "aws_secret_access_key=secret-default\n\n"
		 "[ long ]\r\n; another comment\r\naws_access_key_id=AKIDLONG\r\n"
		 "aws_secret_access_key =  s e c  \r\naws_session_token = %s\r\nregion = x\r\n"
		 "[half]\naws_access_key_id = AKIDHALF\naws_session_token =\n"
		 "[last]\naws_access_key_id = AKIDLAST", token);
	ck_assert_int_eq(dlc_s3_credentials_parse(text, "long", &keys, &found), 0);
	ck_assert(found);
	ck_assert_str_eq(keys.access_key, "AKIDLONG");
	ck_assert_str_eq(keys.secret_key, "s e c");
	ck_assert_str_eq(keys.session_token, token);
	dlc_s3_keys_wipe(&keys);
	ck_assert_ptr_null(keys.access_key);
	ck_assert_int_eq(dlc_s3_credentials_parse(text, "default", &keys, &found), 0);
	ck_assert(found);
	ck_assert_str_eq(keys.access_key, "AKIDDEFAULT");
	ck_assert_str_eq(keys.secret_key, "secret-default");
	ck_assert_ptr_null(keys.session_token);
	dlc_s3_keys_wipe(&keys);
	ck_assert_int_eq(dlc_s3_credentials_parse(text, "half", &keys, &found), 0);
	ck_assert(found);
	ck_assert_str_eq(keys.access_key, "AKIDHALF");
	ck_assert_ptr_null(keys.secret_key);
	ck_assert_ptr_null(keys.session_token);        /* empty is none */
	dlc_s3_keys_wipe(&keys);
	ck_assert_int_eq(dlc_s3_credentials_parse(text, "last", &keys, &found), 0);
	ck_assert_str_eq(keys.access_key, "AKIDLAST");  /* no final line end */
	dlc_s3_keys_wipe(&keys);
	ck_assert_int_eq(dlc_s3_credentials_parse(text, "nosuch", &keys, &found), 0);
	ck_assert(!found);
	ck_assert_ptr_null(keys.access_key);
	free(token);
	free(text);
}
END_TEST

int main(void)
{
	Suite *suite = suite_create("s3sign");
	TCase *published = tcase_create("published vectors");
	TCase *rules = tcase_create("encoding rules");
	SRunner *runner;
	int failed;

	tcase_add_loop_test(published, test_published_vector, 0,
			    (int)(sizeof(vectors) / sizeof(vectors[0])));
	suite_add_tcase(suite, published);
	tcase_add_test(rules, test_uri_encode);
	tcase_add_test(rules, test_canonical_query);
	tcase_add_test(rules, test_bad_requests);
	tcase_add_test(rules, test_amz_date_and_hash);
	suite_add_tcase(suite, rules);
	TCase *sources = tcase_create("s3 sources");
	tcase_add_test(sources, test_source_parse);
	tcase_add_test(sources, test_endpoint_parse);
	suite_add_tcase(suite, sources);
	TCase *long_inputs = tcase_create("inputs of any length");
	tcase_add_test(long_inputs, test_long_token_and_query);
	tcase_add_test(long_inputs, test_credentials_parse);
	suite_add_tcase(suite, long_inputs);
	TCase *replies = tcase_create("server replies");
	tcase_add_test(replies, test_content_range);
	tcase_add_test(replies, test_http_date);
	tcase_add_test(replies, test_url_decode);
	suite_add_tcase(suite, replies);
	runner = srunner_create(suite);
	srunner_run_all(runner, CK_ENV);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
