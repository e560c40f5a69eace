/*
 * backend_s3_private.h - what the S3 driver's files share: backend_s3.c (the
 * driver's operations, listings parsed with libexpat, the probe at create)
 * and backend_s3_http.c (credentials, the pool of curl handles, one signed
 * request with its retries and time limit).
 */
#ifndef DLCACHE_BACKEND_S3_PRIVATE_H
#define DLCACHE_BACKEND_S3_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "dlcache/backend.h"
#include "dlcache/s3_sign.h"
#include "dlcache/s3_source.h"

#define S3_DEFAULT_REGION "us-east-1"
#define S3_DEFAULT_HANDLES 16
#define S3_MAX_ATTEMPTS 6           /* one try and five retries, within the timeout */
#define S3_FIRST_BACKOFF_MS 50      /* doubled per retry, with jitter, to at most 2 s */
#define S3_MAX_LIST_BODY (64u << 20)
#define S3_ETAG_MAX 128
#define S3_RECEIVE_BUFFER (128u << 10) /* curl's buffer per handle (backend_s3_http.c) */

struct s3_backend {
	struct dlc_s3_source source;      /* bucket and prefix */
	struct dlc_s3_endpoint endpoint;
	char *region;
	/* Credentials: never logged, never in .stats, wiped at destroy.
	 * access_key NULL: anonymous requests (a public bucket). */
	char *access_key;
	char *secret_key;
	char *session_token;
	char *credential_origin;          /* where they came from, for sentences */
	uint64_t timeout_ms;              /* source_timeout: one request, retries included */
	/* Idle curl handles, each with its own connection cache (keep-alive):
	 * a request takes one and gives it back, so connections are reused and
	 * the pool grows to the parallelism reached, at most handles_cap. */
	pthread_mutex_t pool_lock;
	CURL **idle;                      /* guarded by pool_lock */
	unsigned nidle, handles_cap;
	/* The snapshot's versions (ETags), set after load (set_versions). */
	dlc_backend_version_fn version;
	void *version_arg;
	/* Each cause is logged once per mount; later ones at debug level. */
	atomic_bool logged_replaced, logged_denied, logged_gone, logged_failed, logged_fault;
	atomic_bool logged_skew;
	_Atomic uint64_t retries;
};

/* What came back from one request (the last attempt's). */
struct s3_response {
	long status;                      /* HTTP status, 0 when none came */
	char code[64];                    /* S3's error <Code>, "" when none */
	char etag[S3_ETAG_MAX];           /* the ETag header, quotes kept */
	uint64_t content_length;
	int64_t last_modified;            /* unix seconds, 0 when absent */
	int64_t server_date;              /* the Date header, unix seconds; 0 when absent */
	int64_t sent_at;                  /* this machine's time, signed into the request */
	/* An object's answer that broke the protocol (a range not the one
	 * asked, another version, a body longer than framed): what the server
	 * did, as the end of a sentence ("sent bytes 64-1063 when ..."); "" when
	 * none.  Not a byte of such an answer is counted in window_filled. */
	char fault[320];
	/* The body: into the caller's window for objects (GET 200/206), or a
	 * malloc'd buffer for listings and errors. */
	char *body;
	size_t body_len, body_cap;
	size_t window_filled;             /* bytes of window written, from its start */
};

struct s3_call {
	const char *method;               /* "GET" or "HEAD" */
	const char *key;                  /* object key, decoded; NULL: the bucket */
	const struct dlc_s3_pair *params; /* decoded query */
	size_t nparams;
	const char *if_match;             /* ETag to require (the snapshot's), or NULL */
	bool ranged;                      /* send Range: bytes=off-(off+len-1) */
	uint64_t off;
	/* GET of an object: bytes [off, off+len) land in window. */
	char *window;
	size_t len;
	/* The object's size as the snapshot recorded it, when it did. */
	bool size_known;
	uint64_t object_size;
};

/*
 * Loads the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
 * AWS_SESSION_TOKEN; else the shared credentials file, AWS_SHARED_CREDENTIALS_FILE
 * or ~/.aws/credentials, section profile or AWS_PROFILE or "default"; a
 * profile given explicitly takes the file first).  None at all is not an
 * error: requests go unsigned.  0, or -errno with *cause.
 */
int s3_credentials_load(struct s3_backend *sb, const char *profile, char **cause);

/* Runs call, retried on 500/502/503/504 and broken connections (a reset,
 * a body cut short of its framing) with backoff while attempts and time
 * remain.  An object's answer (call->window) is checked before its body is
 * used (the snapshot's ETag, the exact range asked): one that breaks the
 * protocol is not retried, and comes back with resp->fault set and nothing
 * in window_filled.  0 when an HTTP answer came (any status, in resp);
 * -ECONNREFUSED, -EHOSTUNREACH (no such host or no route), -ETIMEDOUT,
 * -ENOMEM or -EIO when none did.  resp->body is the caller's to free
 * (s3_response_release). */
int s3_perform(struct s3_backend *sb, const struct s3_call *call, struct s3_response *resp);
void s3_response_release(struct s3_response *resp);

/* The pool (backend_s3_http.c). */
int s3_pool_init(struct s3_backend *sb, unsigned handles);
void s3_pool_destroy(struct s3_backend *sb);

#endif
