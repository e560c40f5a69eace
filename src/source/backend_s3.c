/*
 * backend_s3.c - the driver for S3 sources ("s3://BUCKET/PREFIX", parsed by
 * s3_source.c): the objects under PREFIX/ as a tree split at '/', read over
 * HTTP with libcurl (backend_s3_http.c) and signed with Signature V4
 * (s3_sign.c).
 *
 * Listings.  A directory DIR is one ListObjectsV2 query (prefix
 * PREFIX/DIR/, delimiter '/', encoding-type=url), page after page by
 * continuation token: each <Contents> is a file (its size, LastModified and
 * ETag kept), each <CommonPrefixes> a directory.  The XML is parsed with
 * libexpat; texts and tokens have no length limit.  A page's keys are
 * decoded once it is read, when it says they are encoded (<EncodingType>
 * comes after them on S3; a server that ignores the parameter sends them
 * raw).  A page truncated without a token, or one that does not parse,
 * fails the listing with a sentence (dlc_cause_thread_set): a directory
 * is listed whole or not at all.  Pages are gathered whole before the
 * callback sees any entry, so a page retried never repeats one.  A key that is also a prefix ("a" and "a/b") shows as
 * the directory; "dir/" markers and keys with an empty, "." or ".."
 * component are left out (no path could name them).  The snapshot's crawl
 * threads list directories in parallel, each on its own connection.
 *
 * Reads.  open asks nothing of the remote: it takes the ETag the snapshot
 * recorded (set_versions) and pread sends a ranged GET with If-Match, so an
 * object replaced after the snapshot fails the read (412: EIO, logged once)
 * instead of mixing versions.  Each answer is checked against the asked
 * range and the snapshot's ETag and size before a byte of it is used
 * (backend_s3_http.c); one that breaks the protocol fails the read with EIO
 * and a sentence naming the server's fault.  A whole small file is one GET
 * (the read path asks for it in one pread).  The retries and the time limit are
 * backend_s3_http.c's.  After mount the driver sends no LIST and no HEAD
 * (stat is a HEAD, and only a packed source's snapshot lookup asks it,
 * before mount).
 *
 * Create.  One listing of at most one key under the prefix, so that a dead
 * endpoint, a missing bucket, refused credentials or an empty prefix fail
 * the mount with a sentence.
 */
#include <errno.h>
#include <expat.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/crypto.h>

#include "dlcache/cause.h"
#include "dlcache/log.h"
#include "dlcache/s3_parse.h"
#include "backend_s3_private.h"

#define FILE_MODE (S_IFREG | 0444)
#define DIR_MODE (S_IFDIR | 0555)

struct dlc_backend_file {
	char *key;
	char etag[S3_ETAG_MAX];       /* "" when the snapshot has none */
	bool size_known;              /* the snapshot holds the object: its size */
	uint64_t size;
};

/* ------------------------------------------------------------------------
 * Listings.
 */

struct listed {
	char *name;
	char *etag;
	struct dlc_backend_attr attr;
};

/* An entry of the page being parsed, its key as the server wrote it: the
 * page says whether keys are URL-encoded (<EncodingType>) anywhere in it,
 * after the keys as often as not, so keys are decoded once it is read. */
struct raw_entry {
	char *key;
	char *etag;                   /* NULL for a common prefix */
	uint64_t size;
	int64_t mtime;
};

struct listing {
	const char *prefix;           /* the listed prefix, "PREFIX/DIR/" */
	size_t prefix_len;
	struct listed *entries;
	size_t count, cap;
	/* Parser state for one page.  Texts have no length limit: a key is at
	 * most 1 KiB, but a continuation token may be of any length. */
	int depth;
	bool in_contents, in_prefixes;
	char *text;                   /* the current leaf's text */
	size_t text_len, text_cap;
	char *key;                    /* the current <Contents>' */
	char etag[S3_ETAG_MAX];
	uint64_t size;
	int64_t mtime;
	struct raw_entry *page;
	size_t page_count, page_cap;
	bool url_encoded;             /* <EncodingType>url</EncodingType> */
	bool truncated;
	char *token;                  /* NextContinuationToken, NULL when none */
	int error;
};

static void page_clear(struct listing *listing)
{
	for (size_t i = 0; i < listing->page_count; i++) {
		free(listing->page[i].key);
		free(listing->page[i].etag);
	}
	listing->page_count = 0;
}

static void listing_free(struct listing *listing)
{
	for (size_t i = 0; i < listing->count; i++) {
		free(listing->entries[i].name);
		free(listing->entries[i].etag);
	}
	free(listing->entries);
	page_clear(listing);
	free(listing->page);
	free(listing->text);
	free(listing->key);
	free(listing->token);
}

static int64_t parse_iso_time(const char *text)
{
	struct tm tm = { 0 };

	if (!strptime(text, "%Y-%m-%dT%H:%M:%S", &tm))
		return 0;
	return (int64_t)timegm(&tm);
}

/* Adds the entry called by the part of key after the listed prefix (a
 * trailing '/' dropped for a prefix); names that cannot be paths are left
 * out. */
static void listing_add(struct listing *listing, const char *key, bool dir, const char *etag,
			uint64_t size, int64_t mtime)
{
	size_t len;
	struct listed *entry;

	if (listing->error || strncmp(key, listing->prefix, listing->prefix_len) != 0)
		return;
	key += listing->prefix_len;
	len = strlen(key);
	if (dir && len > 0 && key[len - 1] == '/')
		len--;
	if (len == 0 || memchr(key, '/', len) || (len == 1 && key[0] == '.') ||
	    (len == 2 && key[0] == '.' && key[1] == '.'))
		return;
	if (listing->count == listing->cap) {
		size_t cap = listing->cap ? listing->cap * 2 : 256;
		struct listed *grown = realloc(listing->entries, cap * sizeof(*grown));

		if (!grown) {
			listing->error = -ENOMEM;
			return;
		}
		listing->entries = grown;
		listing->cap = cap;
	}
	entry = &listing->entries[listing->count];
	memset(entry, 0, sizeof(*entry));
	entry->name = strndup(key, len);
	if (!dir)
		entry->etag = strdup(etag);
	if (!entry->name || (!dir && !entry->etag)) {
		free(entry->name);
		free(entry->etag);
		listing->error = -ENOMEM;
		return;
	}
	entry->attr.mode = dir ? DIR_MODE : FILE_MODE;
	entry->attr.size = dir ? 0 : size;
	entry->attr.mtime_sec = dir ? 0 : mtime;
	listing->count++;
}

/* Keeps an entry of the page, key as written (copied). */
static void page_add(struct listing *listing, const char *key, const char *etag)
{
	struct raw_entry *entry;

	if (listing->error)
		return;
	if (listing->page_count == listing->page_cap) {
		size_t cap = listing->page_cap ? listing->page_cap * 2 : 256;
		struct raw_entry *grown = realloc(listing->page, cap * sizeof(*grown));

		if (!grown) {
			listing->error = -ENOMEM;
			return;
		}
		listing->page = grown;
		listing->page_cap = cap;
	}
	entry = &listing->page[listing->page_count];
	entry->key = strdup(key);
	entry->etag = etag ? strdup(etag) : NULL;
	entry->size = listing->size;
	entry->mtime = listing->mtime;
	if (!entry->key || (etag && !entry->etag)) {
		free(entry->key);
		free(entry->etag);
		listing->error = -ENOMEM;
		return;
	}
	listing->page_count++;
}

static void XMLCALL on_start(void *arg, const XML_Char *name, const XML_Char **attrs)
{
	struct listing *listing = arg;

	(void)attrs;
	listing->depth++;
	listing->text_len = 0;
	if (listing->depth == 2 && strcmp(name, "Contents") == 0) {
		listing->in_contents = true;
		free(listing->key);
		listing->key = NULL;
		listing->etag[0] = '\0';
		listing->size = 0;
		listing->mtime = 0;
	} else if (listing->depth == 2 && strcmp(name, "CommonPrefixes") == 0) {
		listing->in_prefixes = true;
	}
}

static void XMLCALL on_text(void *arg, const XML_Char *text, int len)
{
	struct listing *listing = arg;

	if (listing->error)
		return;
	if (listing->text_len + (size_t)len + 1 > listing->text_cap) {
		size_t cap = listing->text_cap ? listing->text_cap : 256;
		char *grown;

		while (cap < listing->text_len + (size_t)len + 1)
			cap *= 2;
		grown = realloc(listing->text, cap);
		if (!grown) {
			listing->error = -ENOMEM;
			return;
		}
		listing->text = grown;
		listing->text_cap = cap;
	}
	memcpy(listing->text + listing->text_len, text, (size_t)len);
	listing->text_len += (size_t)len;
}

static void XMLCALL on_end(void *arg, const XML_Char *name)
{
	struct listing *listing = arg;
	const char *text = listing->text_len ? listing->text : "";

	if (listing->text_len)
		listing->text[listing->text_len] = '\0';
	if (listing->error) {
		/* nothing more is kept */
	} else if (listing->depth == 3 && listing->in_contents) {
		if (strcmp(name, "Key") == 0) {
			free(listing->key);
			listing->key = strdup(text);
			if (!listing->key)
				listing->error = -ENOMEM;
		} else if (strcmp(name, "ETag") == 0 && listing->text_len < sizeof(listing->etag)) {
			memcpy(listing->etag, text, listing->text_len + 1);
		} else if (strcmp(name, "Size") == 0) {
			listing->size = strtoull(text, NULL, 10);
		} else if (strcmp(name, "LastModified") == 0) {
			listing->mtime = parse_iso_time(text);
		}
	} else if (listing->depth == 3 && listing->in_prefixes && strcmp(name, "Prefix") == 0) {
		page_add(listing, text, NULL);
	} else if (listing->depth == 2 && strcmp(name, "Contents") == 0) {
		listing->in_contents = false;
		if (listing->key && listing->key[0])
			page_add(listing, listing->key, listing->etag);
	} else if (listing->depth == 2 && strcmp(name, "CommonPrefixes") == 0) {
		listing->in_prefixes = false;
	} else if (listing->depth == 2 && strcmp(name, "IsTruncated") == 0) {
		listing->truncated = strcmp(text, "true") == 0;
	} else if (listing->depth == 2 && strcmp(name, "EncodingType") == 0) {
		listing->url_encoded = strcmp(text, "url") == 0;
	} else if (listing->depth == 2 && strcmp(name, "NextContinuationToken") == 0) {
		free(listing->token);
		listing->token = listing->text_len ? strdup(text) : NULL;
		if (listing->text_len && !listing->token)
			listing->error = -ENOMEM;
	}
	listing->text_len = 0;
	listing->depth--;
}

/*
 * Parses one page into listing (its entries added, truncated and token
 * set).  0, -ENOMEM, or -EIO for XML that is not a listing or a key that is
 * not URL-encoded where the page says it is (*fault then says which).
 */
static int parse_page(struct listing *listing, const char *body, size_t len, const char **fault)
{
	XML_Parser parser = XML_ParserCreate("UTF-8");
	int rc = 0;

	*fault = NULL;
	if (!parser)
		return -ENOMEM;
	listing->depth = 0;
	listing->in_contents = listing->in_prefixes = false;
	listing->truncated = listing->url_encoded = false;
	free(listing->token);
	listing->token = NULL;
	page_clear(listing);
	XML_SetUserData(parser, listing);
	XML_SetElementHandler(parser, on_start, on_end);
	XML_SetCharacterDataHandler(parser, on_text);
	if (XML_Parse(parser, body ? body : "", (int)len, 1) != XML_STATUS_OK) {
		*fault = "is not well-formed XML";
		rc = -EIO;
	}
	XML_ParserFree(parser);
	for (size_t i = 0; rc == 0 && !listing->error && i < listing->page_count; i++) {
		struct raw_entry *entry = &listing->page[i];
		char *key = entry->key;

		if (listing->url_encoded) {
			rc = dlc_s3_url_decode(entry->key, &key);
			if (rc == -EINVAL) {
				*fault = "holds a key that is not URL-encoded though it says it is";
				rc = -EIO;
			}
			if (rc < 0)
				break;
		}
		listing_add(listing, key, !entry->etag, entry->etag, entry->size, entry->mtime);
		if (key != entry->key)
			free(key);
	}
	page_clear(listing);
	return rc ? rc : listing->error;
}

static int compare_listed(const void *a, const void *b)
{
	const struct listed *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	/* A directory sorts before a file of the same name. */
	return c ? c : (S_ISDIR(x->attr.mode) ? -1 : 0) - (S_ISDIR(y->attr.mode) ? -1 : 0);
}

static void log_once(atomic_bool *flag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_once(atomic_bool *flag, const char *fmt, ...)
{
	/* dlc_log reads its level twice: decide it once. */
	enum dlc_log_level level = atomic_exchange(flag, true) ? DLC_LOG_DEBUG : DLC_LOG_WARNING;
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	dlc_log(level, "%s", line);
}

/*
 * "this machine's clock is N s ahead of the server's" for a request the
 * server refused as RequestTimeTooSkewed, from the time signed into it and
 * the server's Date header, into text (size bytes).
 */
static void describe_skew(const struct s3_response *resp, char *text, size_t size)
{
	long long skew = (long long)(resp->sent_at - resp->server_date);

	if (resp->server_date == 0)
		snprintf(text, size, "this machine's clock differs from the server's by more than S3 allows (15 minutes; the server sent no Date to tell by how much)");
	else
		snprintf(text, size, "this machine's clock is %lld s %s the server's (by its Date header), more than S3 allows (15 minutes)",
			 skew < 0 ? -skew : skew, skew < 0 ? "behind" : "ahead of");
}

static bool is_skew(const struct s3_response *resp)
{
	return resp->status == 403 && strcmp(resp->code, "RequestTimeTooSkewed") == 0;
}

/* -errno for a request that got HTTP status (not 2xx) or none (rc < 0),
 * with the reason logged once per kind. */
static int failure(struct s3_backend *sb, const char *what, const char *key, int rc,
		   const struct s3_response *resp)
{
	if (rc < 0) {
		log_once(&sb->logged_failed, "S3 %s of '%s' failed: %s at %s", what, key,
			 strerror(-rc), sb->endpoint.origin);
		return rc == -ETIMEDOUT ? -ETIMEDOUT : -EIO;
	}
	switch (resp->status) {
	case 412:
		log_once(&sb->logged_replaced, "S3 %s of '%s' failed: object replaced after the snapshot; rebuild the snapshot (mount with -o refresh)",
			 what, key);
		return -EIO;
	case 403:
	case 401:
		if (is_skew(resp)) {
			char skew[256];

			describe_skew(resp, skew, sizeof(skew));
			log_once(&sb->logged_skew, "S3 %s of '%s' failed: the server refuses the request's time (RequestTimeTooSkewed): %s; set the clock right (NTP) and the reads go on",
				 what, key, skew);
			return -EIO;
		}
		log_once(&sb->logged_denied, "S3 %s of '%s' failed: access denied (%s); the credentials from %s may be expired or wrong: renew them and remount",
			 what, key, resp->code[0] ? resp->code : "403", sb->credential_origin);
		return -EIO;
	case 404:
		log_once(&sb->logged_gone, "S3 %s of '%s' failed: object deleted after the snapshot; rebuild the snapshot (mount with -o refresh)",
			 what, key);
		return -EIO;
	default:
		log_once(&sb->logged_failed, "S3 %s of '%s' failed: HTTP %ld%s%s from %s", what, key,
			 resp->status, resp->code[0] ? " " : "", resp->code, sb->endpoint.origin);
		return -EIO;
	}
}

static int s3_list(void *priv, const char *dir, dlc_backend_list_cb cb, void *arg)
{
	struct s3_backend *sb = priv;
	struct listing listing = { 0 };
	struct s3_response resp;
	const char *fault;
	char *prefix;
	int rc;

	if (asprintf(&prefix, "%s%s%s", sb->source.prefix, dir, *dir ? "/" : "") < 0)
		return -ENOMEM;
	listing.prefix = prefix;
	listing.prefix_len = strlen(prefix);
	for (unsigned page = 1;; page++) {
		/* encoding-type=url: keys come URL-encoded, so that a key with
		 * bytes XML 1.0 cannot carry still lists. */
		struct dlc_s3_pair params[5] = {
			{ "list-type", "2" }, { "delimiter", "/" }, { "prefix", prefix },
			{ "encoding-type", "url" }, { "continuation-token", listing.token },
		};

		rc = s3_perform(sb, &(struct s3_call){ .method = "GET", .params = params,
						       .nparams = listing.token ? 5 : 4 },
				&resp);
		if (rc < 0 || resp.status != 200) {
			rc = failure(sb, "listing", prefix, rc, &resp);
			s3_response_release(&resp);
			goto out;
		}
		rc = parse_page(&listing, resp.body, resp.body_len, &fault);
		s3_response_release(&resp);
		if (rc == -EIO) {
			dlc_cause_thread_set("the S3 server at %s answered page %u of the listing of '%s' with a page that %s; the listing cannot be trusted, so no snapshot is made: fix the server",
					      sb->endpoint.origin, page, prefix, fault);
			goto out;
		}
		if (rc < 0)
			goto out;
		if (!listing.truncated)
			break;
		/* A page that says more follow but not how to ask for them
		 * would end the directory short: its files would be missing
		 * from the snapshot without a word. */
		if (!listing.token) {
			dlc_cause_thread_set("the S3 server at %s says page %u of the listing of '%s' is truncated but gives no NextContinuationToken to ask for the rest; no snapshot is made, since it would lack files: fix the server (or the proxy before it)",
					      sb->endpoint.origin, page, prefix);
			rc = -EIO;
			goto out;
		}
	}

	qsort(listing.entries, listing.count, sizeof(listing.entries[0]), compare_listed);
	for (size_t i = 0; i < listing.count; i++) {
		struct listed *entry = &listing.entries[i];
		struct dlc_backend_dirent dirent = {
			.name = entry->name, .attr = entry->attr, .version = entry->etag,
		};

		if (i > 0 && strcmp(entry->name, listing.entries[i - 1].name) == 0) {
			dlc_log(DLC_LOG_WARNING, "S3 key '%s%s' is also a prefix of other keys; the directory is kept and the object left out",
				prefix, entry->name);
			continue;
		}
		rc = cb(arg, &dirent);
		if (rc < 0)
			break;
	}
out:
	listing_free(&listing);
	free(prefix);
	return rc;
}

/* ------------------------------------------------------------------------
 * stat, open, pread, close.
 */

static int s3_stat(void *priv, const char *path, struct dlc_backend_attr *out)
{
	struct s3_backend *sb = priv;
	struct s3_response resp;
	char *key;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!*path) {
		out->mode = DIR_MODE;
		return 0;
	}
	if (asprintf(&key, "%s%s", sb->source.prefix, path) < 0)
		return -ENOMEM;
	rc = s3_perform(sb, &(struct s3_call){ .method = "HEAD", .key = key }, &resp);
	if (rc == 0 && resp.status == 200) {
		out->mode = FILE_MODE;
		out->size = resp.content_length;
		out->mtime_sec = resp.last_modified;
	} else if (rc == 0 && resp.status == 404) {
		rc = -ENOENT;
	} else {
		rc = failure(sb, "HEAD", key, rc, &resp);
	}
	s3_response_release(&resp);
	free(key);
	return rc;
}

static int s3_open(void *priv, const char *path, struct dlc_backend_file **out)
{
	struct s3_backend *sb = priv;
	struct dlc_backend_file *file = calloc(1, sizeof(*file));

	*out = NULL;
	if (!file)
		return -ENOMEM;
	if (asprintf(&file->key, "%s%s", sb->source.prefix, path) < 0) {
		free(file);
		return -ENOMEM;
	}
	if (sb->version)
		file->size_known = sb->version(sb->version_arg, path, file->etag, sizeof(file->etag),
					       &file->size);
	if (!file->size_known)
		file->etag[0] = '\0';
	*out = file;
	return 0;
}

static ssize_t s3_pread(void *priv, struct dlc_backend_file *file, void *buf, size_t len,
			uint64_t off)
{
	struct s3_backend *sb = priv;
	struct s3_call call = {
		.method = "GET", .key = file->key, .if_match = file->etag[0] ? file->etag : NULL,
		.ranged = true, .off = off, .window = buf, .len = len,
		.size_known = file->size_known, .object_size = file->size,
	};
	struct s3_response resp;
	ssize_t got;
	int rc;

	if (len == 0)
		return 0;
	rc = s3_perform(sb, &call, &resp);
	if (rc == 0 && resp.fault[0]) {
		log_once(&sb->logged_fault, "S3 read of '%s' failed: the server at %s %s; no byte of that answer was used (fix or bypass the server or proxy that sends it)",
			 file->key, sb->endpoint.origin, resp.fault);
		got = -EIO;
	} else if (rc == 0 && (resp.status == 200 || resp.status == 206)) {
		/* Checked by s3_perform: the window holds [off, off + n) from
		 * this answer, fewer than asked only at the object's end. */
		got = (ssize_t)resp.window_filled;
	} else if (rc == 0 && resp.status == 416 && call.if_match && file->size_known &&
		   off < file->size) {
		log_once(&sb->logged_fault, "S3 read of '%s' failed: the server at %s says byte %llu is past the end of the snapshot's version of the object, which holds %llu bytes; no byte of that answer was used (fix or bypass the server or proxy that sends it)",
			 file->key, sb->endpoint.origin, (unsigned long long)off,
			 (unsigned long long)file->size);
		got = -EIO;
	} else if (rc == 0 && resp.status == 416) {
		got = 0;     /* at or past the end */
	} else {
		got = failure(sb, "read", file->key, rc, &resp);
	}
	s3_response_release(&resp);
	return got;
}

static int s3_close(void *priv, struct dlc_backend_file *file)
{
	free(file->key);
	free(file);
	return 0;
}

static void wipe(char **secret)
{
	if (*secret) {
		OPENSSL_cleanse(*secret, strlen(*secret));
		free(*secret);
		*secret = NULL;
	}
}

static void s3_destroy(void *priv)
{
	struct s3_backend *sb = priv;

	if (!sb)
		return;
	s3_pool_destroy(sb);
	wipe(&sb->access_key);
	wipe(&sb->secret_key);
	wipe(&sb->session_token);
	free(sb->credential_origin);
	free(sb->region);
	dlc_s3_endpoint_free(&sb->endpoint);
	dlc_s3_source_free(&sb->source);
	free(sb);
}

static void s3_set_versions(void *priv, dlc_backend_version_fn fn, void *arg)
{
	struct s3_backend *sb = priv;

	sb->version = fn;
	sb->version_arg = arg;
}

static const struct dlc_backend_ops s3_ops = {
	.name = "s3",
	.list = s3_list,
	.stat = s3_stat,
	.open = s3_open,
	.pread = s3_pread,
	.close = s3_close,
	.destroy = s3_destroy,
	.set_versions = s3_set_versions,
};

/* ------------------------------------------------------------------------
 * Create.
 */

/* One listing of at most one key: the endpoint answers, the bucket exists,
 * the credentials are accepted and the prefix holds something. */
static int probe(struct s3_backend *sb, const char *source, char **cause)
{
	struct dlc_s3_pair params[] = {
		{ "list-type", "2" }, { "prefix", sb->source.prefix }, { "max-keys", "1" },
	};
	struct s3_response resp;
	char skew[256] = "";
	int rc;

	rc = s3_perform(sb, &(struct s3_call){ .method = "GET", .params = params, .nparams = 3 },
			&resp);
	if (rc == 0 && is_skew(&resp))
		describe_skew(&resp, skew, sizeof(skew));
	if (rc == -ECONNREFUSED)
		dlc_cause_set(cause, "S3 endpoint %s refuses connections; check s3_endpoint= and that the server runs",
			      sb->endpoint.origin);
	else if (rc == -EHOSTUNREACH)
		dlc_cause_set(cause, "S3 endpoint %s cannot be reached (unknown host or no route); check s3_endpoint= (or s3_region=) and the network",
			      sb->endpoint.origin);
	else if (rc == -ETIMEDOUT)
		dlc_cause_set(cause, "S3 endpoint %s did not answer within source_timeout; check that it runs, or raise source_timeout=",
			      sb->endpoint.origin);
	else if (rc < 0)
		dlc_cause_set(cause, "S3 endpoint %s failed (%s); check s3_endpoint= and the network",
			      sb->endpoint.origin, strerror(-rc));
	else if (is_skew(&resp))
		dlc_cause_set(cause, "S3 endpoint %s refuses the requests' time (RequestTimeTooSkewed): %s; set the clock right (NTP) and mount again",
			      sb->endpoint.origin, skew);
	else if (resp.status == 403 || resp.status == 401)
		dlc_cause_set(cause, "S3 refuses access to bucket '%s' (%s) with %s; check the keys (AWS_ACCESS_KEY_ID, ~/.aws/credentials, s3_profile=) and the bucket's policy",
			      sb->source.bucket, resp.code[0] ? resp.code : "AccessDenied",
			      sb->credential_origin);
	else if (resp.status == 404)
		dlc_cause_set(cause, "bucket '%s' does not exist at %s; check the name, s3_endpoint= and s3_region=",
			      sb->source.bucket, sb->endpoint.origin);
	else if (resp.status == 301 || resp.status == 307 || strcmp(resp.code, "AuthorizationHeaderMalformed") == 0)
		dlc_cause_set(cause, "bucket '%s' is not in region %s; set s3_region= to its region",
			      sb->source.bucket, sb->region);
	else if (resp.status != 200)
		dlc_cause_set(cause, "S3 endpoint %s answers HTTP %ld%s%s to a listing of '%s'; check s3_endpoint= and the bucket",
			      sb->endpoint.origin, resp.status, resp.code[0] ? " " : "", resp.code,
			      source);
	else if (!resp.body || !strstr(resp.body, "<Contents>"))
		dlc_cause_set(cause, "nothing is stored under %s; check the bucket and the prefix",
			      source);
	else
		rc = 0;
	if (rc == 0 && resp.status != 200)
		rc = -EIO;
	else if (rc == 0 && (!resp.body || !strstr(resp.body, "<Contents>")))
		rc = -ENOENT;
	s3_response_release(&resp);
	return rc < 0 ? (rc == -ENOENT ? -ENOENT : -EIO) : 0;
}

static char *region_of(const struct dlc_backend_config *config)
{
	const char *region = config->s3_region;

	if (!region || !*region)
		region = getenv("AWS_REGION");
	if (!region || !*region)
		region = getenv("AWS_DEFAULT_REGION");
	if (!region || !*region)
		region = S3_DEFAULT_REGION;
	return strdup(region);
}

int dlc_backend_s3_create(const char *source, const struct dlc_backend_config *config,
			  struct dlc_backend *backend, char **cause)
{
	struct sigaction ignore = { .sa_handler = SIG_IGN }, old;
	struct s3_backend *sb;
	int rc;

	if (config->delay_ns || config->bandwidth || config->fail_every) {
		dlc_cause_set(cause, "source_delay, source_bw and source_fail_every emulate a slow directory source and do not apply to S3 source '%s'; leave them out",
			      source);
		return -EINVAL;
	}
	sb = calloc(1, sizeof(*sb));
	if (!sb)
		return -ENOMEM;
	/* A store that goes away must fail a send with EPIPE (TLS writes
	 * included), not kill the daemon. */
	if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL)
		sigaction(SIGPIPE, &ignore, NULL);
	rc = dlc_s3_source_parse(source, &sb->source, cause);
	if (rc < 0)
		goto err;
	sb->region = region_of(config);
	if (!sb->region) {
		rc = -ENOMEM;
		goto err;
	}
	rc = dlc_s3_endpoint_parse(config->s3_endpoint, sb->source.bucket, sb->region,
				   &sb->endpoint, cause);
	if (rc < 0)
		goto err;
	sb->timeout_ms = (config->timeout_ns ? config->timeout_ns
					     : DLC_BACKEND_DEFAULT_TIMEOUT_NS) / 1000000;
	rc = s3_credentials_load(sb, config->s3_profile, cause);
	if (rc < 0)
		goto err;
	rc = s3_pool_init(sb, config->connections);
	if (rc < 0)
		goto err;
	rc = probe(sb, source, cause);
	if (rc < 0)
		goto err;
	dlc_log(DLC_LOG_INFO, "S3 source %s at %s (region %s, %s)", source, sb->endpoint.origin,
		sb->region, sb->credential_origin);
	backend->ops = &s3_ops;
	backend->priv = sb;
	return 0;
err:
	s3_destroy(sb);
	return rc;
}
