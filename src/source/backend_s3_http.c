/*
 * backend_s3_http.c - the S3 driver's HTTP side: credentials, a pool of
 * libcurl handles, and one signed request with its retries and time limit.
 *
 * Credentials.  The standard chain, as the AWS tools read it: the
 * environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN),
 * then the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else
 * ~/.aws/credentials) in the section of s3_profile=, AWS_PROFILE or
 * "default"; s3_profile= puts the file first.  Either source gives both
 * keys or neither: one alone is refused in a sentence.  The file is read
 * whole (lines and tokens of any length; s3_parse.c).  The keys live in
 * struct s3_backend only: no log line, cause or stats field ever prints them (a
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
 * Answers.  An object's answer is checked when its headers end, before
 * its body is written anywhere (check_object_reply): the snapshot's ETag,
 * a Content-Range that is exactly the range asked, a 200 taken only as the
 * whole object of the snapshot's size.  The body then fills the caller's
 * window from its start, and only bytes written are counted.  An answer
 * that breaks these rules ends the transfer and comes back with its fault
 * described; it is not retried.
 *
 * Retries.  A request that gets 500, 502, 503 (SlowDown) or 504, or whose
 * connection breaks (reset, nothing received, a body cut short of its
 * framing, with or without Content-Length), is tried again after 50 ms,
 * doubled per retry with jitter up to 2 s, at most S3_MAX_ATTEMPTS times
 * in all, and never past source_timeout from its start: each attempt gets
 * the time that is left as curl's own limit.  A
 * refused connection or an unknown host is not retried (the endpoint is
 * down: the read fails at once, and the next read tries again).
 */
#include <ctype.h>
#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "dlcache/cause.h"
#include "dlcache/log.h"
#include "dlcache/s3_parse.h"
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

#define CREDENTIALS_FILE_MAX (16u << 20)   /* a credentials file is a few KiB */

/* The whole of file into *text (malloc'd, NUL-terminated).  0 or -errno
 * (-ENOENT when it is missing, -EFBIG past CREDENTIALS_FILE_MAX). */
static int slurp(const char *file, char **text)
{
	size_t len = 0, cap = 0;
	char *buf = NULL;
	FILE *in;
	int rc = 0;

	*text = NULL;
	in = fopen(file, "re");
	if (!in)
		return -errno;
	for (;;) {
		if (cap - len < 4096) {
			char *grown;

			cap = cap ? cap * 2 : 8192;
			if (cap > CREDENTIALS_FILE_MAX) {
				rc = -EFBIG;
				break;
			}
			grown = malloc(cap);
			if (!grown) {
				rc = -ENOMEM;
				break;
			}
			if (buf) {
				memcpy(grown, buf, len);
				OPENSSL_cleanse(buf, len);
				free(buf);
			}
			buf = grown;
		}
		size_t n = fread(buf + len, 1, cap - len - 1, in);

		len += n;
		if (n == 0) {
			if (ferror(in))
				rc = -EIO;
			break;
		}
	}
	fclose(in);
	if (rc < 0) {
		if (buf)
			OPENSSL_cleanse(buf, len);
		free(buf);
		return rc;
	}
	buf[len] = '\0';
	*text = buf;
	return 0;
}

/* Moves keys into sb (taking their strings). */
static void take_keys(struct s3_backend *sb, struct dlc_s3_keys *keys)
{
	struct dlc_s3_keys old = {
		sb->access_key, sb->secret_key, sb->session_token,
	};

	dlc_s3_keys_wipe(&old);
	sb->access_key = keys->access_key;
	sb->secret_key = keys->secret_key;
	sb->session_token = keys->session_token;
	memset(keys, 0, sizeof(*keys));
}

/* Reads section profile of file (lines of any length).  0 with *found when
 * the section gives both keys; -EINVAL with *cause for a section that gives
 * one key without the other (or a token alone); -errno otherwise (-ENOENT
 * when the file is missing). */
static int read_credentials_file(struct s3_backend *sb, const char *file, const char *profile,
				 bool *found, char **cause)
{
	struct dlc_s3_keys keys;
	bool section = false;
	char *text;
	int rc;

	*found = false;
	rc = slurp(file, &text);
	if (rc < 0)
		return rc;
	rc = dlc_s3_credentials_parse(text, profile, &keys, &section);
	OPENSSL_cleanse(text, strlen(text));
	free(text);
	if (rc < 0)
		return rc;
	if (!keys.access_key != !keys.secret_key || (keys.session_token && !keys.access_key)) {
		dlc_cause_set(cause, "profile '%s' of %s has %s but no %s; add %s, or remove the profile's keys to go anonymous",
			      profile, file,
			      keys.access_key ? "aws_access_key_id" : keys.secret_key ?
			      "aws_secret_access_key" : "aws_session_token",
			      keys.access_key ? "aws_secret_access_key" : keys.secret_key ?
			      "aws_access_key_id" : "aws_access_key_id and aws_secret_access_key",
			      keys.access_key || keys.secret_key ? "it" : "them");
		dlc_s3_keys_wipe(&keys);
		return -EINVAL;
	}
	*found = keys.access_key != NULL;
	if (*found)
		take_keys(sb, &keys);
	dlc_s3_keys_wipe(&keys);
	return 0;
}

/* The environment's keys: both, or neither (one alone is a mistake said in
 * *cause: -EINVAL). */
static int credentials_from_env(struct s3_backend *sb, bool *found, char **cause)
{
	const char *id = getenv("AWS_ACCESS_KEY_ID"), *secret = getenv("AWS_SECRET_ACCESS_KEY");
	const char *token = getenv("AWS_SESSION_TOKEN");
	bool has_id = id && *id, has_secret = secret && *secret;

	*found = false;
	if (has_id != has_secret) {
		dlc_cause_set(cause, "%s is set but %s is not; set both, or unset %s to use the credentials file",
			      has_id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
			      has_id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID",
			      has_id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY");
		return -EINVAL;
	}
	if (!has_id)
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
	char *home_file = NULL, *origin = NULL;
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
		rc = credentials_from_env(sb, &found, cause);
		if (rc < 0 || found)
			goto out;
	}
	if (file) {
		rc = read_credentials_file(sb, file, section, &found, cause);
		if (rc == -ENOENT && !profile)
			rc = 0;
		if (rc == -EINVAL)
			goto out;
		if (rc < 0) {
			dlc_cause_set(cause, "cannot read the credentials file %s (%s); fix it, or give the keys in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
				      file, strerror(-rc));
			goto out;
		}
		if (found) {
			if (asprintf(&origin, "profile '%s' of %s", section, file) < 0) {
				origin = NULL;
				rc = -ENOMEM;
				goto out;
			}
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
	free(origin);
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
	/* The answer's framing, from its headers. */
	bool has_length;              /* a Content-Length came */
	bool has_range, range_bad;    /* a Content-Range came; it did not parse */
	bool etag_long;               /* an ETag too long to be any snapshot's */
	uint64_t range_first, range_last, range_total;
	/* An object's body (call->window): checked at the end of the headers. */
	bool checked;
	uint64_t expected;            /* window bytes the body must bring */
	uint64_t body_seen;           /* body bytes of this answer so far */
	bool slice_done;              /* a 200's slice is in: the rest is not wanted */
};

static void set_fault(struct s3_response *resp, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void set_fault(struct s3_response *resp, const char *fmt, ...)
{
	va_list ap;

	if (resp->fault[0])
		return;     /* the first fault is the one to name */
	va_start(ap, fmt);
	vsnprintf(resp->fault, sizeof(resp->fault), fmt, ap);
	va_end(ap);
}

/*
 * An object's answer (200 or 206 to a ranged GET), checked before a body
 * byte is used: it must be the snapshot's version of the object (ETag) and
 * frame exactly the bytes asked, [off, off + len) cut at the object's end.
 * A 206 must say so in its Content-Range; a 200 (a server or proxy that
 * ignored Range) is taken only as the whole object of the snapshot's size,
 * or, when the snapshot records no size, where the asked range starts at 0.
 * Sets t->expected, or resp->fault with what the server did wrong.
 */
static void check_object_reply(struct transfer *t)
{
	const struct s3_call *call = t->call;
	struct s3_response *resp = t->resp;
	unsigned long long off = call->off, last_asked = call->off + call->len - 1;

	t->checked = true;
	if (call->if_match && t->etag_long) {
		set_fault(resp, "sent an ETag longer than any the snapshot records, not the snapshot's %s (it ignored If-Match)",
			  call->if_match);
		return;
	}
	if (call->if_match && resp->etag[0] && strcmp(resp->etag, call->if_match) != 0) {
		set_fault(resp, "sent version %s of the object, not the snapshot's %s (it ignored If-Match)",
			  resp->etag, call->if_match);
		return;
	}
	if (resp->status == 206) {
		unsigned long long first = t->range_first, last = t->range_last;
		unsigned long long total = t->range_total, last_due;

		if (!t->has_range || t->range_bad) {
			set_fault(resp, "answered a ranged GET with 206 and %s Content-Range",
				  t->has_range ? "a malformed" : "no");
			return;
		}
		if (total == DLC_S3_SIZE_UNKNOWN && call->size_known)
			total = call->object_size;
		if (total == DLC_S3_SIZE_UNKNOWN) {
			set_fault(resp, "answered a ranged GET with a Content-Range of unknown object size");
			return;
		}
		if (call->if_match && call->size_known && total != call->object_size) {
			set_fault(resp, "says the object holds %llu bytes, but the snapshot's version of it holds %llu",
				  total, (unsigned long long)call->object_size);
			return;
		}
		last_due = last_asked < total - 1 ? last_asked : total - 1;
		if (first != off || last != last_due) {
			set_fault(resp, "sent bytes %llu-%llu when bytes %llu-%llu were asked",
				  first, last, off, last_due);
			return;
		}
		if (t->has_length && resp->content_length != last - first + 1) {
			set_fault(resp, "announced %llu body bytes for the %llu bytes of its Content-Range",
				  (unsigned long long)resp->content_length, last - first + 1);
			return;
		}
		t->expected = last - first + 1;
		return;
	}
	/* 200: the whole object, or nothing. */
	if (!t->has_length) {
		set_fault(resp, "answered a ranged GET with the whole object (200) but no Content-Length");
		return;
	}
	if (call->size_known && resp->content_length != call->object_size) {
		set_fault(resp, "answered a ranged GET with %llu bytes as the whole object (200), but the snapshot's object holds %llu",
			  (unsigned long long)resp->content_length,
			  (unsigned long long)call->object_size);
		return;
	}
	if (!call->size_known && off != 0) {
		set_fault(resp, "answered a ranged GET from byte %llu with the whole object (200), whose size the snapshot does not record",
			  off);
		return;
	}
	t->expected = off >= resp->content_length ? 0 :
		      resp->content_length - off < call->len ? resp->content_length - off : call->len;
}

/* A header line (NUL-terminated, its CR LF kept) into t. */
static void header_line(struct transfer *t, char *line)
{
	struct s3_response *resp = t->resp;
	char *value;

	if (strncmp(line, "HTTP/", 5) == 0) {
		/* A new status line (after a 100 Continue, say): start over. */
		char *space = strchr(line, ' ');

		resp->status = space ? strtol(space + 1, NULL, 10) : 0;
		resp->etag[0] = '\0';
		resp->content_length = 0;
		resp->server_date = 0;
		t->has_length = t->has_range = t->range_bad = t->etag_long = t->checked = false;
		return;
	}
	if (strcmp(line, "\r\n") == 0 || strcmp(line, "\n") == 0) {
		if (t->call->window && (resp->status == 200 || resp->status == 206) && !t->checked)
			check_object_reply(t);
		return;
	}
	value = strchr(line, ':');
	if (!value)
		return;
	*value++ = '\0';
	value = trimmed(value);
	if (strcasecmp(line, "ETag") == 0) {
		t->etag_long = strlen(value) >= sizeof(resp->etag);
		snprintf(resp->etag, sizeof(resp->etag), "%s", t->etag_long ? "" : value);
	} else if (strcasecmp(line, "Content-Length") == 0) {
		resp->content_length = strtoull(value, NULL, 10);
		t->has_length = true;
	} else if (strcasecmp(line, "Last-Modified") == 0) {
		int64_t when;

		if (dlc_s3_http_date_parse(value, &when) == 0)
			resp->last_modified = when;
	} else if (strcasecmp(line, "Date") == 0) {
		int64_t when;

		if (dlc_s3_http_date_parse(value, &when) == 0)
			resp->server_date = when;
	} else if (strcasecmp(line, "Content-Range") == 0) {
		t->has_range = true;
		t->range_bad = dlc_s3_content_range_parse(value, &t->range_first, &t->range_last,
							  &t->range_total) < 0;
	}
}

/* One header line: copied whole (no length limit, so no header that is
 * checked can slip past by being long); 0 on no memory ends the transfer. */
static size_t on_header(char *data, size_t size, size_t count, void *arg)
{
	struct transfer *t = arg;
	size_t len = size * count;
	char *line = strndup(data, len);

	if (!line)
		return 0;
	header_line(t, line);
	free(line);
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

/*
 * An object's bytes go into the caller's window, only once its headers
 * passed check_object_reply: a 206's body starts at call->off, a 200's at
 * 0 (what lies before call->off is skipped).  The window fills from its
 * start without a gap, so window_filled bytes of it are the answer's and
 * no byte past them is ever counted.  A body longer than it announced is a
 * fault; returning 0 ends the transfer (CURLE_WRITE_ERROR).  Anything else
 * (a listing, an error's XML) is kept in resp->body.
 */
static size_t on_body(char *data, size_t size, size_t count, void *arg)
{
	struct transfer *t = arg;
	const struct s3_call *call = t->call;
	struct s3_response *resp = t->resp;
	size_t len = size * count;

	if (call->window && (resp->status == 200 || resp->status == 206)) {
		uint64_t body_start = resp->status == 206 ? call->off : 0;
		uint64_t pos = body_start + t->body_seen;     /* object offset of data[0] */
		uint64_t end = call->off + t->expected;       /* of the window's last byte + 1 */

		if (!t->checked)
			check_object_reply(t);    /* no blank line was seen (HTTP/2) */
		if (resp->fault[0])
			return 0;
		if (resp->status == 206 && t->body_seen + len > t->expected) {
			set_fault(resp, "sent more body bytes than its Content-Range holds");
			return 0;
		}
		if (pos + len > call->off && pos < end) {
			uint64_t from = pos > call->off ? pos : call->off;
			uint64_t to = pos + len < end ? pos + len : end;

			memcpy(call->window + (from - call->off), data + (from - pos), (size_t)(to - from));
			resp->window_filled = (size_t)(to - call->off);
		}
		t->body_seen += len;
		if (resp->status == 200 && resp->window_filled == t->expected &&
		    t->body_seen < resp->content_length) {
			t->slice_done = true;
			return 0;
		}
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

/* Appends the formatted header line to *list; 0 or -ENOMEM.  The line may
 * hold a secret (a session token, a signature): wiped once curl has its
 * copy. */
static int add_header(struct curl_slist **list, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int add_header(struct curl_slist **list, const char *fmt, ...)
{
	struct curl_slist *grown;
	va_list ap;
	char *line;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	grown = curl_slist_append(*list, line);
	OPENSSL_cleanse(line, (size_t)n);
	free(line);
	if (!grown)
		return -ENOMEM;
	*list = grown;
	return 0;
}

/* The signed headers and the URL of call, into list and *url (malloc'd);
 * *sent_at is the time signed.  Every string is sized from its inputs: a
 * key, a continuation token or a session token of any length goes out
 * whole. */
static int prepare(struct s3_backend *sb, const struct s3_call *call, struct curl_slist **list,
		   char **url, int64_t *sent_at)
{
	char *path = NULL, *encoded = NULL, *query = NULL;
	char date[17], range[64], authorization[1024];
	struct dlc_s3_pair signed_headers[4];
	size_t nheaders = 0, query_size;
	time_t now = time(NULL);
	int rc = -ENOMEM;

	*url = NULL;
	/* The bucket itself is "/BUCKET" path-style (s3rver, for one, reads
	 * "/BUCKET/" as a key prefix and drops the common prefixes), "/" on a
	 * virtual host. */
	if (call->key)
		rc = asprintf(&path, "%s/%s", sb->endpoint.bucket_path, call->key);
	else
		rc = asprintf(&path, "%s", *sb->endpoint.bucket_path ? sb->endpoint.bucket_path : "/");
	if (rc < 0) {
		path = NULL;
		return -ENOMEM;
	}
	rc = -ENOMEM;
	encoded = malloc(3 * strlen(path) + 1);
	query_size = dlc_s3_canonical_query_size(call->params, call->nparams);
	query = malloc(query_size);
	if (!encoded || !query)
		goto out;
	rc = dlc_s3_uri_encode(path, true, encoded, 3 * strlen(path) + 1);
	if (rc >= 0)
		rc = dlc_s3_canonical_query(call->params, call->nparams, query, query_size);
	if (rc < 0)
		goto out;
	if (asprintf(url, "%s%s%s%s", sb->endpoint.origin, encoded, *query ? "?" : "", query) < 0) {
		*url = NULL;
		rc = -ENOMEM;
		goto out;
	}

	*sent_at = (int64_t)now;
	dlc_s3_amz_date(now, date);
	signed_headers[nheaders++] = (struct dlc_s3_pair){ "host", sb->endpoint.host };
	if (call->ranged) {
		snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)call->off,
			 (unsigned long long)(call->off + call->len - 1));
		signed_headers[nheaders++] = (struct dlc_s3_pair){ "range", range };
	}
	if (call->if_match)
		signed_headers[nheaders++] = (struct dlc_s3_pair){ "if-match", call->if_match };

	rc = 0;
	for (size_t i = 0; rc == 0 && i < nheaders; i++)
		rc = add_header(list, "%s: %s", signed_headers[i].name, signed_headers[i].value);
	if (rc == 0)
		rc = add_header(list, "x-amz-date: %s", date);
	if (rc == 0)
		rc = add_header(list, "x-amz-content-sha256: %s", DLC_S3_EMPTY_SHA256);
	if (rc == 0)
		rc = add_header(list, "Expect:");     /* no 100-continue round trip */
	if (rc == 0 && sb->access_key) {
		struct dlc_s3_credentials credentials = {
			sb->access_key, sb->secret_key, sb->session_token,
		};
		struct dlc_s3_request request = {
			.method = call->method, .path = path, .params = call->params,
			.nparams = call->nparams, .headers = signed_headers, .nheaders = nheaders,
			.payload_hash = DLC_S3_EMPTY_SHA256, .sign_content_hash = true,
			.amz_date = date, .region = sb->region, .service = "s3",
		};

		if (sb->session_token)
			rc = add_header(list, "x-amz-security-token: %s", sb->session_token);
		if (rc == 0)
			rc = dlc_s3_sign(&request, &credentials, authorization, sizeof(authorization));
		if (rc == 0)
			rc = add_header(list, "Authorization: %s", authorization);
		OPENSSL_cleanse(authorization, sizeof(authorization));
	}
out:
	free(path);
	free(encoded);
	free(query);
	if (rc < 0) {
		free(*url);
		*url = NULL;
	}
	return rc < 0 ? rc : 0;
}

int s3_perform(struct s3_backend *sb, const struct s3_call *call, struct s3_response *resp)
{
	uint64_t start = now_ms(), backoff = S3_FIRST_BACKOFF_MS;
	int rc = -EIO;

	memset(resp, 0, sizeof(*resp));
	for (unsigned attempt = 1;; attempt++) {
		struct transfer transfer = { .call = call, .resp = resp };
		struct curl_slist *headers = NULL;
		uint64_t elapsed = now_ms() - start;
		bool cut = false;
		CURLcode code;
		CURL *curl;
		char *url;

		if (elapsed >= sb->timeout_ms)
			return -ETIMEDOUT;
		curl = take_handle(sb);
		if (!curl)
			return -ENOMEM;
		s3_response_release(resp);
		memset(resp, 0, sizeof(*resp));
		rc = prepare(sb, call, &headers, &url, &resp->sent_at);
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
		free(url);
		give_handle(sb, curl, code != CURLE_OK);

		/* An answer that broke the protocol is not retried: the same
		 * server would answer the same; the caller names the fault. */
		if (resp->fault[0])
			return 0;
		/* A 200's slice is in: the transfer was ended on purpose. */
		if (code == CURLE_WRITE_ERROR && transfer.slice_done)
			code = CURLE_OK;
		/* A body that ended short of what its headers framed, with no
		 * transport error (a close-delimited body cut): as a reset. */
		if (code == CURLE_OK && call->window && (resp->status == 200 || resp->status == 206) &&
		    resp->window_filled < transfer.expected)
			cut = true;
		if (code == CURLE_OK && !cut && !status_retried(resp->status)) {
			if (resp->status >= 300)
				error_code(resp);
			return 0;
		}
		if (code == CURLE_OK && !cut)
			error_code(resp);
		if (code != CURLE_OK && !transport_retried(code))
			return transport_errno(code);
		if (attempt == S3_MAX_ATTEMPTS)
			return code == CURLE_OK && !cut ? 0 : -EIO;
		/* Back off with jitter (50-100% of the step), within the time left. */
		uint64_t wait = backoff / 2 + (uint64_t)rand() % (backoff / 2 + 1);

		elapsed = now_ms() - start;
		if (elapsed + wait >= sb->timeout_ms)
			return code == CURLE_OK && !cut ? 0 : -ETIMEDOUT;
		atomic_fetch_add_explicit(&sb->retries, 1, memory_order_relaxed);
		usleep((useconds_t)(wait * 1000));
		if (backoff < 2000)
			backoff *= 2;
	}
}
