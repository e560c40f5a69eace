/*
 * backend_s3_http.c - the S3 driver's HTTP side: credentials, a pool of
 * libcurl handles, and one signed request with its retries and time limit.
 *
 * Credentials.  The standard chain, as the AWS tools read it: the
 * environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN),
 * then the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else
 * ~/.aws/credentials) in the section of s3_profile=, AWS_PROFILE or
 * "default"; s3_profile= puts the file first.  The keys live in struct
 * s3_backend only: no log line, cause or stats field ever prints them (a
 * cause names where they came from), and destroy wipes them.
 *
 * Connections.  A curl easy handle keeps its connections alive between
 * requests.  Idle handles wait in a small stack; a request takes one (or
 * makes one) and gives it back, so a mount's readers reuse connections and
 * the pool holds at most as many handles as requests ran at once.  Each
 * handle receives into a buffer of S3_RECEIVE_BUFFER bytes (curl's default
 * is 16 KiB): a 100 KB sample arrives in one or two reads of the socket
 * and one call of on_body instead of seven, a 4 MiB block in 32 instead of
 * 256 (strace -c of an epoch, tests/bench/s3_epoch1.sh).  At most
 * handles_cap buffers exist (8 MiB at 64 handles), made once per handle.
 *
 * Retries.  A request that gets 500, 502, 503 (SlowDown) or 504, or whose
 * connection breaks (reset, nothing received, a partial body), is tried
 * again after 50 ms, doubled per retry with jitter up to 2 s, at most
 * S3_MAX_ATTEMPTS times in all, and never past source_timeout from its
 * start: each attempt gets the time that is left as curl's own limit.  A
 * refused connection or an unknown host is not retried (the endpoint is
 * down: the read fails at once, and the next read tries again).
 */
#include <ctype.h>
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "dlcache/cause.h"
#include "dlcache/log.h"
#include "backend_s3_private.h"

/* ------------------------------------------------------------------------
 * Credentials.
 */

static char *trimmed(char *text)
{
	char *end;

	while (isspace((unsigned char)*text))
		text++;
	end = text + strlen(text);
	while (end > text && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return text;
}

static int set_key(char **field, const char *value)
{
	char *copy = strdup(value);

	if (!copy)
		return -ENOMEM;
	if (*field) {
		OPENSSL_cleanse(*field, strlen(*field));
		free(*field);
	}
	*field = copy;
	return 0;
}

/* Reads section profile of file.  0 (found or not: *found), or -errno
 * (-ENOENT when the file is missing). */
static int read_credentials_file(struct s3_backend *sb, const char *file, const char *profile,
				 bool *found)
{
	char line[4096];
	bool in_section = false;
	FILE *in;
	int rc = 0;

	*found = false;
	in = fopen(file, "re");
	if (!in)
		return -errno;
	while (rc == 0 && fgets(line, sizeof(line), in)) {
		char *text = trimmed(line), *equals, *name, *value;

		if (*text == '#' || *text == ';' || *text == '\0')
			continue;
		if (*text == '[') {
			char *close = strchr(text, ']');

			if (close)
				*close = '\0';
			in_section = strcmp(trimmed(text + 1), profile) == 0;
			continue;
		}
		equals = strchr(text, '=');
		if (!in_section || !equals)
			continue;
		*equals = '\0';
		name = trimmed(text);
		value = trimmed(equals + 1);
		if (strcmp(name, "aws_access_key_id") == 0)
			rc = set_key(&sb->access_key, value);
		else if (strcmp(name, "aws_secret_access_key") == 0)
			rc = set_key(&sb->secret_key, value);
		else if (strcmp(name, "aws_session_token") == 0)
			rc = set_key(&sb->session_token, value);
	}
	OPENSSL_cleanse(line, sizeof(line));
	fclose(in);
	*found = sb->access_key && sb->secret_key;
	return rc;
}

static int credentials_from_env(struct s3_backend *sb, bool *found)
{
	const char *id = getenv("AWS_ACCESS_KEY_ID"), *secret = getenv("AWS_SECRET_ACCESS_KEY");
	const char *token = getenv("AWS_SESSION_TOKEN");

	*found = false;
	if (!id || !*id || !secret || !*secret)
		return 0;
	if (set_key(&sb->access_key, id) < 0 || set_key(&sb->secret_key, secret) < 0 ||
	    (token && *token && set_key(&sb->session_token, token) < 0))
		return -ENOMEM;
	*found = true;
	return set_key(&sb->credential_origin, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
}

int s3_credentials_load(struct s3_backend *sb, const char *profile, char **cause)
{
	const char *file = getenv("AWS_SHARED_CREDENTIALS_FILE");
	const char *section = profile ? profile : getenv("AWS_PROFILE");
	char *home_file = NULL, origin[4200];
	bool found = false;
	int rc = 0;

	if (!section || !*section)
		section = "default";
	if (!file || !*file) {
		const char *home = getenv("HOME");
		struct passwd *pw;

		if ((!home || !*home) && (pw = getpwuid(getuid())))
			home = pw->pw_dir;
		if (home && asprintf(&home_file, "%s/.aws/credentials", home) < 0)
			home_file = NULL;
		file = home_file;
	}
	if (!profile) {
		rc = credentials_from_env(sb, &found);
		if (rc < 0 || found)
			goto out;
	}
	if (file) {
		rc = read_credentials_file(sb, file, section, &found);
		if (rc == -ENOENT && !profile)
			rc = 0;
		if (rc < 0) {
			dlc_cause_set(cause, "cannot read the credentials file %s (%s); fix it, or give the keys in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
				      file, strerror(-rc));
			goto out;
		}
		if (found) {
			snprintf(origin, sizeof(origin), "profile '%s' of %s", section, file);
			rc = set_key(&sb->credential_origin, origin);
			goto out;
		}
	}
	if (profile) {
		dlc_cause_set(cause, "s3_profile '%s' has no aws_access_key_id and aws_secret_access_key in %s; add them, or name another profile",
			      profile, file ? file : "~/.aws/credentials");
		rc = -EINVAL;
		goto out;
	}
	/* No credentials anywhere: unsigned requests, which a public bucket
	 * answers; a private one answers 403 and create says what to set. */
	rc = set_key(&sb->credential_origin, "no credentials (anonymous requests)");
out:
	free(home_file);
	return rc;
}

/* ------------------------------------------------------------------------
 * The pool of handles.
 */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init_once(void)
{
	curl_init_result = curl_global_init(CURL_GLOBAL_ALL);
}

int s3_pool_init(struct s3_backend *sb, unsigned handles)
{
	pthread_once(&curl_once, curl_init_once);
	if (curl_init_result != CURLE_OK)
		return -EIO;
	sb->handles_cap = handles ? handles : S3_DEFAULT_HANDLES;
	sb->idle = calloc(sb->handles_cap, sizeof(*sb->idle));
	if (!sb->idle)
		return -ENOMEM;
	pthread_mutex_init(&sb->pool_lock, NULL);
	return 0;
}

void s3_pool_destroy(struct s3_backend *sb)
{
	if (!sb->idle)
		return;
	for (unsigned i = 0; i < sb->nidle; i++)
		curl_easy_cleanup(sb->idle[i]);
	free(sb->idle);
	sb->idle = NULL;
	pthread_mutex_destroy(&sb->pool_lock);
}

static CURL *take_handle(struct s3_backend *sb)
{
	CURL *curl = NULL;

	pthread_mutex_lock(&sb->pool_lock);
	if (sb->nidle > 0)
		curl = sb->idle[--sb->nidle];
	pthread_mutex_unlock(&sb->pool_lock);
	return curl ? curl : curl_easy_init();
}

/* Gives curl back; a handle whose last attempt broke is dropped, so that
 * its connection is never reused. */
static void give_handle(struct s3_backend *sb, CURL *curl, bool broken)
{
	if (!broken) {
		pthread_mutex_lock(&sb->pool_lock);
		if (sb->nidle < sb->handles_cap) {
			sb->idle[sb->nidle++] = curl;
			curl = NULL;
		}
		pthread_mutex_unlock(&sb->pool_lock);
	}
	if (curl)
		curl_easy_cleanup(curl);
}

/* ------------------------------------------------------------------------
 * One request.
 */

void s3_response_release(struct s3_response *resp)
{
	free(resp->body);
	resp->body = NULL;
	resp->body_len = resp->body_cap = 0;
}

struct transfer {
	const struct s3_call *call;
	struct s3_response *resp;
	uint64_t window_start;        /* object offset of the body's first byte */
	bool window_known;
};

static size_t on_header(char *data, size_t size, size_t count, void *arg)
{
	struct transfer *t = arg;
	size_t len = size * count;
	char line[512];
	char *value;

	if (len >= sizeof(line))
		return len;
	memcpy(line, data, len);
	line[len] = '\0';
	if (strncmp(line, "HTTP/", 5) == 0) {
		/* A new status line (after a 100 Continue, say): start over. */
		char *space = strchr(line, ' ');

		t->resp->status = space ? strtol(space + 1, NULL, 10) : 0;
		t->resp->etag[0] = '\0';
		t->window_known = false;
		return len;
	}
	value = strchr(line, ':');
	if (!value)
		return len;
	*value++ = '\0';
	value = trimmed(value);
	if (strcasecmp(line, "ETag") == 0) {
		snprintf(t->resp->etag, sizeof(t->resp->etag), "%s", value);
	} else if (strcasecmp(line, "Content-Length") == 0) {
		t->resp->content_length = strtoull(value, NULL, 10);
	} else if (strcasecmp(line, "Last-Modified") == 0) {
		struct tm tm = { 0 };

		if (strptime(value, "%a, %d %b %Y %H:%M:%S GMT", &tm))
			t->resp->last_modified = (int64_t)timegm(&tm);
	} else if (strcasecmp(line, "Content-Range") == 0) {
		unsigned long long first;

		if (sscanf(value, "bytes %llu-", &first) == 1) {
			t->window_start = first;
			t->window_known = true;
		}
	}
	return len;
}

static int body_append(struct s3_response *resp, const char *data, size_t len)
{
	if (resp->body_len + len + 1 > resp->body_cap) {
		size_t cap = resp->body_cap ? resp->body_cap : 4096;
		char *grown;

		while (cap < resp->body_len + len + 1)
			cap *= 2;
		if (cap > S3_MAX_LIST_BODY)
			return -EFBIG;
		grown = realloc(resp->body, cap);
		if (!grown)
			return -ENOMEM;
		resp->body = grown;
		resp->body_cap = cap;
	}
	memcpy(resp->body + resp->body_len, data, len);
	resp->body_len += len;
	resp->body[resp->body_len] = '\0';
	return 0;
}

/* An object's bytes go into the caller's window: a 206 starts at its
 * Content-Range, a 200 (a server that ignored Range) at 0, and what falls
 * outside [off, off + len) is dropped.  Anything else (a listing, an
 * error's XML) is kept in resp->body. */
static size_t on_body(char *data, size_t size, size_t count, void *arg)
{
	struct transfer *t = arg;
	const struct s3_call *call = t->call;
	struct s3_response *resp = t->resp;
	size_t len = size * count;

	if (call->window && (resp->status == 200 || resp->status == 206)) {
		/* A 206 without Content-Range starts where it was asked to. */
		uint64_t start = t->window_known ? t->window_start :
				 resp->status == 206 ? call->off : 0;
		uint64_t at = start + resp->window_filled;   /* object offset of data[0]... */

		/* window_filled counts the body bytes seen so far, so at is where
		 * this piece starts in the object. */
		for (size_t i = 0; i < len;) {
			uint64_t pos = at + i;
			size_t piece;

			if (pos < call->off) {
				uint64_t skip = call->off - pos;

				i += skip < len - i ? (size_t)skip : len - i;
				continue;
			}
			if (pos >= call->off + call->len)
				break;
			piece = len - i;
			if (piece > call->off + call->len - pos)
				piece = (size_t)(call->off + call->len - pos);
			memcpy(call->window + (pos - call->off), data + i, piece);
			i += piece;
		}
		resp->window_start = start;
		resp->window_filled += len;
		return len;
	}
	/* Error bodies are short; listings are bounded by S3_MAX_LIST_BODY. */
	if (body_append(resp, data, len) < 0)
		return 0;   /* CURLE_WRITE_ERROR */
	return len;
}

/* The S3 error's <Code>, when the body has one. */
static void error_code(struct s3_response *resp)
{
	const char *start, *end;

	resp->code[0] = '\0';
	if (!resp->body)
		return;
	start = strstr(resp->body, "<Code>");
	end = start ? strstr(start, "</Code>") : NULL;
	if (start && end && (size_t)(end - start - 6) < sizeof(resp->code))
		snprintf(resp->code, sizeof(resp->code), "%.*s", (int)(end - start - 6), start + 6);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool status_retried(long status)
{
	return status == 500 || status == 502 || status == 503 || status == 504;
}

static bool transport_retried(CURLcode code)
{
	return code == CURLE_SEND_ERROR || code == CURLE_RECV_ERROR ||
	       code == CURLE_GOT_NOTHING || code == CURLE_PARTIAL_FILE;
}

static int transport_errno(CURLcode code)
{
	switch (code) {
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

/* The signed headers and the URL of call, into list and url. */
static int prepare(struct s3_backend *sb, const struct s3_call *call, struct curl_slist **list,
		   char *url, size_t url_size)
{
	char path[8192], encoded[24576], query[8192], header[9000], date[17], range[64];
	struct dlc_s3_pair signed_headers[4];
	size_t nheaders = 0;
	struct curl_slist *grown;
	int rc;

	/* The bucket itself is "/BUCKET" path-style (s3rver, for one, reads
	 * "/BUCKET/" as a key prefix and drops the common prefixes), "/" on a
	 * virtual host. */
	if (call->key)
		rc = snprintf(path, sizeof(path), "%s/%s", sb->endpoint.bucket_path, call->key);
	else
		rc = snprintf(path, sizeof(path), "%s", *sb->endpoint.bucket_path ?
			      sb->endpoint.bucket_path : "/");
	if (rc < 0 || (size_t)rc >= sizeof(path))
		return -ENAMETOOLONG;
	rc = dlc_s3_uri_encode(path, true, encoded, sizeof(encoded));
	if (rc < 0)
		return rc;
	rc = dlc_s3_canonical_query(call->params, call->nparams, query, sizeof(query));
	if (rc < 0)
		return rc;
	if ((size_t)snprintf(url, url_size, "%s%s%s%s", sb->endpoint.origin, encoded,
			     *query ? "?" : "", query) >= url_size)
		return -ENAMETOOLONG;

	dlc_s3_amz_date(time(NULL), date);
	signed_headers[nheaders++] = (struct dlc_s3_pair){ "host", sb->endpoint.host };
	if (call->ranged) {
		snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)call->off,
			 (unsigned long long)(call->off + call->len - 1));
		signed_headers[nheaders++] = (struct dlc_s3_pair){ "range", range };
	}
	if (call->if_match)
		signed_headers[nheaders++] = (struct dlc_s3_pair){ "if-match", call->if_match };

#define ADD(...) do { \
		snprintf(header, sizeof(header), __VA_ARGS__); \
		grown = curl_slist_append(*list, header); \
		if (!grown) \
			return -ENOMEM; \
		*list = grown; \
	} while (0)
	for (size_t i = 0; i < nheaders; i++)
		ADD("%s: %s", signed_headers[i].name, signed_headers[i].value);
	ADD("x-amz-date: %s", date);
	ADD("x-amz-content-sha256: %s", DLC_S3_EMPTY_SHA256);
	ADD("Expect:");     /* no 100-continue round trip */
	if (sb->access_key) {
		struct dlc_s3_credentials credentials = {
			sb->access_key, sb->secret_key, sb->session_token,
		};
		struct dlc_s3_request request = {
			.method = call->method, .path = path, .params = call->params,
			.nparams = call->nparams, .headers = signed_headers, .nheaders = nheaders,
			.payload_hash = DLC_S3_EMPTY_SHA256, .sign_content_hash = true,
			.amz_date = date, .region = sb->region, .service = "s3",
		};
		char authorization[1024];

		if (sb->session_token)
			ADD("x-amz-security-token: %s", sb->session_token);
		rc = dlc_s3_sign(&request, &credentials, authorization, sizeof(authorization));
		if (rc < 0)
			return rc;
		ADD("Authorization: %s", authorization);
		OPENSSL_cleanse(authorization, sizeof(authorization));
	}
#undef ADD
	OPENSSL_cleanse(header, sizeof(header));
	return 0;
}

int s3_perform(struct s3_backend *sb, const struct s3_call *call, struct s3_response *resp)
{
	uint64_t start = now_ms(), backoff = S3_FIRST_BACKOFF_MS;
	char url[32768];
	int rc = -EIO;

	memset(resp, 0, sizeof(*resp));
	for (unsigned attempt = 1;; attempt++) {
		struct transfer transfer = { .call = call, .resp = resp };
		struct curl_slist *headers = NULL;
		uint64_t elapsed = now_ms() - start;
		CURLcode code;
		CURL *curl;

		if (elapsed >= sb->timeout_ms)
			return -ETIMEDOUT;
		curl = take_handle(sb);
		if (!curl)
			return -ENOMEM;
		s3_response_release(resp);
		resp->status = 0;
		resp->window_filled = 0;
		resp->window_start = 0;
		resp->etag[0] = resp->code[0] = '\0';
		rc = prepare(sb, call, &headers, url, sizeof(url));
		if (rc < 0) {
			curl_slist_free_all(headers);
			give_handle(sb, curl, false);
			return rc;
		}
		curl_easy_reset(curl);
		curl_easy_setopt(curl, CURLOPT_URL, url);
		curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
		curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)(sb->timeout_ms - elapsed));
		curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)(sb->timeout_ms - elapsed));
		curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
		curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
		curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, (long)S3_RECEIVE_BUFFER);
		if (strcmp(call->method, "HEAD") == 0)
			curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
		code = curl_easy_perform(curl);
		curl_slist_free_all(headers);
		give_handle(sb, curl, code != CURLE_OK);

		if (code == CURLE_OK && !status_retried(resp->status)) {
			if (resp->status >= 300)
				error_code(resp);
			return 0;
		}
		if (code == CURLE_OK)
			error_code(resp);
		if (code != CURLE_OK && !transport_retried(code))
			return transport_errno(code);
		if (attempt == S3_MAX_ATTEMPTS)
			return code == CURLE_OK ? 0 : -EIO;
		/* Back off with jitter (50-100% of the step), within the time left. */
		uint64_t wait = backoff / 2 + (uint64_t)rand() % (backoff / 2 + 1);

		elapsed = now_ms() - start;
		if (elapsed + wait >= sb->timeout_ms)
			return code == CURLE_OK ? 0 : -ETIMEDOUT;
		atomic_fetch_add_explicit(&sb->retries, 1, memory_order_relaxed);
		usleep((useconds_t)(wait * 1000));
		if (backoff < 2000)
			backoff *= 2;
	}
}
