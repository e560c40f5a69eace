/*
 * s3_sign.c - AWS Signature Version 4 (see s3_sign.h for the algorithm).
 *
 * Pure: works on the caller's strings and fixed-size stack buffers, calls
 * OpenSSL's one-shot SHA-256 and HMAC, and neither logs nor reads the clock.
 * Every string it builds is sized from its inputs (a session token or a
 * continuation token of any length signs), and one that does not fit a
 * caller's buffer fails with -ENAMETOOLONG rather than being cut.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "dlcache/s3_sign.h"

#define SHA256_LEN 32

/* The headers signed, in canonical form: lower-case name, trimmed value
 * (malloc'd, as long as the header's). */
struct canonical_header {
	char name[64];
	char *value;
};

struct canonical_headers {
	struct canonical_header list[DLC_S3_MAX_HEADERS + 3];
	size_t count;
	size_t text_len;              /* the names' and values' lengths, summed */
};

/* The values may hold a session token: wiped before they are freed. */
static void headers_free(struct canonical_headers *headers)
{
	for (size_t i = 0; i < headers->count; i++) {
		OPENSSL_cleanse(headers->list[i].value, strlen(headers->list[i].value));
		free(headers->list[i].value);
	}
	headers->count = 0;
}

static bool unreserved(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

int dlc_s3_uri_encode(const char *in, bool keep_slash, char *out, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t len = 0;

	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		if (unreserved(*p) || (keep_slash && *p == '/')) {
			if (len + 1 >= size)
				return -ENAMETOOLONG;
			out[len++] = (char)*p;
		} else {
			if (len + 3 >= size)
				return -ENAMETOOLONG;
			out[len++] = '%';
			out[len++] = hex[*p >> 4];
			out[len++] = hex[*p & 15];
		}
	}
	if (len >= size)
		return -ENAMETOOLONG;
	out[len] = '\0';
	return (int)len;
}

/* in encoded (dlc_s3_uri_encode) into a malloc'd string, or NULL. */
static char *uri_encode_dup(const char *in, bool keep_slash)
{
	size_t size = 3 * strlen(in) + 1;
	char *out = malloc(size);

	if (out && dlc_s3_uri_encode(in, keep_slash, out, size) < 0) {
		free(out);
		out = NULL;
	}
	return out;
}

struct encoded_param {
	char *name;
	char *value;
};

static int compare_params(const void *a, const void *b)
{
	const struct encoded_param *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

size_t dlc_s3_canonical_query_size(const struct dlc_s3_pair *params, size_t nparams)
{
	size_t size = 1;

	for (size_t i = 0; i < nparams; i++)
		size += 3 * (strlen(params[i].name ? params[i].name : "") +
			     strlen(params[i].value ? params[i].value : "")) + 2;
	return size;
}

int dlc_s3_canonical_query(const struct dlc_s3_pair *params, size_t nparams, char *out,
			   size_t size)
{
	struct encoded_param encoded[DLC_S3_MAX_PARAMS] = { { 0 } };
	size_t len = 0;
	int rc = 0;

	if (nparams > DLC_S3_MAX_PARAMS)
		return -EINVAL;
	for (size_t i = 0; i < nparams; i++) {
		if (!params[i].name || !params[i].value) {
			rc = -EINVAL;
			goto out;
		}
		encoded[i].name = uri_encode_dup(params[i].name, false);
		encoded[i].value = uri_encode_dup(params[i].value, false);
		if (!encoded[i].name || !encoded[i].value) {
			rc = -ENOMEM;
			goto out;
		}
	}
	qsort(encoded, nparams, sizeof(encoded[0]), compare_params);
	rc = -ENAMETOOLONG;
	if (size == 0)
		goto out;
	out[0] = '\0';
	for (size_t i = 0; i < nparams; i++) {
		int n = snprintf(out + len, size - len, "%s%s=%s", i ? "&" : "",
				 encoded[i].name, encoded[i].value);

		if (n < 0 || (size_t)n >= size - len)
			goto out;
		len += (size_t)n;
	}
	rc = (int)len;
out:
	for (size_t i = 0; i < nparams; i++) {
		free(encoded[i].name);
		free(encoded[i].value);
	}
	return rc;
}

/* Lower-cases name, trims value and folds its inner runs of spaces to one. */
static int add_header(struct canonical_headers *headers, const char *name, const char *value)
{
	struct canonical_header *header;
	size_t len = 0;
	bool space = false;

	if (!name || !value || headers->count == sizeof(headers->list) / sizeof(headers->list[0]))
		return -EINVAL;
	header = &headers->list[headers->count];
	if (strlen(name) >= sizeof(header->name))
		return -ENAMETOOLONG;
	for (size_t i = 0; name[i]; i++)
		header->name[i] = (char)tolower((unsigned char)name[i]);
	header->name[strlen(name)] = '\0';
	header->value = malloc(strlen(value) + 1);
	if (!header->value)
		return -ENOMEM;
	while (*value == ' ' || *value == '\t')
		value++;
	for (; *value; value++) {
		if (*value == ' ' || *value == '\t') {
			space = true;
			continue;
		}
		if (space && len > 0)
			header->value[len++] = ' ';
		space = false;
		header->value[len++] = *value;
	}
	header->value[len] = '\0';
	headers->text_len += strlen(header->name) + len;
	headers->count++;
	return 0;
}

static int compare_headers(const void *a, const void *b)
{
	return strcmp(((const struct canonical_header *)a)->name,
		      ((const struct canonical_header *)b)->name);
}

static int collect_headers(const struct dlc_s3_request *request,
			   const struct dlc_s3_credentials *credentials,
			   struct canonical_headers *headers)
{
	int rc;

	headers->count = 0;
	headers->text_len = 0;
	if (request->nheaders > DLC_S3_MAX_HEADERS)
		return -EINVAL;
	for (size_t i = 0; i < request->nheaders; i++) {
		rc = add_header(headers, request->headers[i].name, request->headers[i].value);
		if (rc < 0)
			return rc;
	}
	rc = add_header(headers, "x-amz-date", request->amz_date);
	if (rc == 0 && request->sign_content_hash)
		rc = add_header(headers, "x-amz-content-sha256",
				request->payload_hash ? request->payload_hash : DLC_S3_EMPTY_SHA256);
	if (rc == 0 && credentials && credentials->session_token)
		rc = add_header(headers, "x-amz-security-token", credentials->session_token);
	if (rc < 0)
		return rc;
	qsort(headers->list, headers->count, sizeof(headers->list[0]), compare_headers);
	return 0;
}

/* Appends the formatted text at *len; -ENAMETOOLONG when it does not fit. */
static int append(char *out, size_t size, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int append(char *out, size_t size, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out + *len, size - *len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size - *len)
		return -ENAMETOOLONG;
	*len += (size_t)n;
	return 0;
}

static int signed_names(const struct canonical_headers *headers, char *out, size_t size)
{
	size_t len = 0;

	out[0] = '\0';
	for (size_t i = 0; i < headers->count; i++)
		if (append(out, size, &len, "%s%s", i ? ";" : "", headers->list[i].name) < 0)
			return -ENAMETOOLONG;
	return 0;
}

/*
 * The canonical request into *out (malloc'd, sized from the request), with
 * the signed header names into names.  Its length, or -errno.  headers is
 * the caller's to free (headers_free) whatever the outcome.
 */
static int build_canonical(const struct dlc_s3_request *request,
			   const struct dlc_s3_credentials *credentials,
			   struct canonical_headers *headers, char *names, size_t names_size,
			   char **out)
{
	char *path = NULL, *query = NULL, *text = NULL;
	size_t len = 0, query_size, size;
	int rc;

	*out = NULL;
	headers->count = 0;
	if (!request->method || !request->path || request->path[0] != '/' || !request->amz_date ||
	    strlen(request->amz_date) != 16 || !request->region || !request->service)
		return -EINVAL;
	rc = -ENOMEM;
	path = uri_encode_dup(request->path, true);
	query_size = dlc_s3_canonical_query_size(request->params, request->nparams);
	query = malloc(query_size);
	if (!path || !query)
		goto out;
	rc = dlc_s3_canonical_query(request->params, request->nparams, query, query_size);
	if (rc < 0)
		goto out;
	rc = collect_headers(request, credentials, headers);
	if (rc < 0)
		goto out;
	rc = signed_names(headers, names, names_size);
	if (rc < 0)
		goto out;
	/* Three line ends and two blank lines, ':' and '\n' per header. */
	size = strlen(request->method) + strlen(path) + strlen(query) + headers->text_len +
	       2 * headers->count + strlen(names) + 64 + 8;
	rc = -ENOMEM;
	text = malloc(size);
	if (!text)
		goto out;
	text[0] = '\0';
	rc = append(text, size, &len, "%s\n%s\n%s\n", request->method, path, query);
	for (size_t i = 0; rc == 0 && i < headers->count; i++)
		rc = append(text, size, &len, "%s:%s\n", headers->list[i].name,
			    headers->list[i].value);
	if (rc == 0)
		rc = append(text, size, &len, "\n%s\n%s", names,
			    request->payload_hash ? request->payload_hash : DLC_S3_EMPTY_SHA256);
out:
	free(path);
	free(query);
	if (rc < 0) {
		free(text);
		return rc;
	}
	*out = text;
	return (int)len;
}

int dlc_s3_canonical_request(const struct dlc_s3_request *request,
			     const struct dlc_s3_credentials *credentials, char *out, size_t size)
{
	struct canonical_headers *headers = malloc(sizeof(*headers));
	char names[1024], *text = NULL;
	int rc;

	if (!headers)
		return -ENOMEM;
	rc = build_canonical(request, credentials, headers, names, sizeof(names), &text);
	if (rc >= 0 && (size_t)rc >= size)
		rc = -ENAMETOOLONG;
	else if (rc >= 0)
		memcpy(out, text, (size_t)rc + 1);
	headers_free(headers);
	free(headers);
	free(text);
	return rc;
}

static void to_hex(const unsigned char *bytes, size_t len, char *out)
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = hex[bytes[i] >> 4];
		out[2 * i + 1] = hex[bytes[i] & 15];
	}
	out[2 * len] = '\0';
}

void dlc_s3_sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char digest[SHA256_LEN];
	unsigned int digest_len = 0;

	EVP_Digest(data, len, digest, &digest_len, EVP_sha256(), NULL);
	to_hex(digest, SHA256_LEN, out);
}

static void hmac(const void *key, size_t key_len, const char *data, unsigned char out[SHA256_LEN])
{
	unsigned int out_len = SHA256_LEN;

	HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)data, strlen(data), out,
	     &out_len);
}

int dlc_s3_sign(const struct dlc_s3_request *request,
		const struct dlc_s3_credentials *credentials, char *out, size_t size)
{
	struct canonical_headers *headers;
	char *canonical = NULL;
	char names[1024], scope[256], to_sign[512], canonical_hash[65], signature[65];
	char secret[256] = "", date[9];
	unsigned char key[SHA256_LEN] = {0}, digest[SHA256_LEN];
	size_t len = 0;
	int rc;

	if (!credentials || !credentials->access_key || !credentials->secret_key)
		return -EINVAL;
	headers = malloc(sizeof(*headers));
	if (!headers)
		return -ENOMEM;
	rc = build_canonical(request, credentials, headers, names, sizeof(names), &canonical);
	if (rc < 0)
		goto out;
	dlc_s3_sha256_hex(canonical, (size_t)rc, canonical_hash);

	memcpy(date, request->amz_date, 8);
	date[8] = '\0';
	rc = -ENAMETOOLONG;
	if ((size_t)snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", date,
			     request->region, request->service) >= sizeof(scope) ||
	    (size_t)snprintf(to_sign, sizeof(to_sign), "AWS4-HMAC-SHA256\n%s\n%s\n%s",
			     request->amz_date, scope, canonical_hash) >= sizeof(to_sign) ||
	    (size_t)snprintf(secret, sizeof(secret), "AWS4%s", credentials->secret_key) >=
		    sizeof(secret))
		goto out;

	hmac(secret, strlen(secret), date, key);
	hmac(key, sizeof(key), request->region, key);
	hmac(key, sizeof(key), request->service, key);
	hmac(key, sizeof(key), "aws4_request", key);
	hmac(key, sizeof(key), to_sign, digest);
	to_hex(digest, sizeof(digest), signature);

	out[0] = '\0';
	rc = append(out, size, &len,
		    "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
		    credentials->access_key, scope, names, signature);
out:
	/* The secret and the keys derived from it do not outlive the call. */
	OPENSSL_cleanse(secret, sizeof(secret));
	OPENSSL_cleanse(key, sizeof(key));
	free(canonical);
	headers_free(headers);
	free(headers);
	return rc;
}

void dlc_s3_amz_date(time_t t, char out[17])
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}
