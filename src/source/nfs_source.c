/*
 * nfs_source.c - parses "HOST:/PATH" and "nfs://HOST[:PORT]/PATH?ARGS" (see
 * nfs_source.h) into server, path, version and ports.
 *
 * The two forms share the host and path rules: a host is a DNS name or an
 * IPv4 address (letters, digits, '-', '.', '_'), or an IPv6 address in
 * brackets (hex digits, ':', '.', and a '%' zone); a path must be absolute,
 * and comes out canonical (repeated and trailing slashes and "." components
 * dropped); ".." is refused, since the server, not this parser, would decide
 * where it leads.  Only the URL form has arguments; in "HOST:/PATH" a '?' is
 * part of the path, as it is for mount(8).  Nothing here logs: every refusal
 * is a sentence in *cause.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/cause.h"
#include "dlcache/nfs_source.h"

#define URL_PREFIX "nfs://"
#define DEFAULT_VERSION 4

bool dlc_nfs_source_matches(const char *source)
{
	const char *colon, *slash;

	if (!source || source[0] == '/' || source[0] == '\0')
		return false;
	if (strncmp(source, URL_PREFIX, strlen(URL_PREFIX)) == 0)
		return true;
	colon = strchr(source, ':');
	slash = strchr(source, '/');
	return colon && (!slash || colon < slash);
}

void dlc_nfs_source_free(struct dlc_nfs_source *source)
{
	if (!source)
		return;
	free(source->server);
	free(source->path);
	source->server = NULL;
	source->path = NULL;
}

static bool is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_';
}

static bool is_ipv6_char(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
	       c == ':' || c == '.';
}

/*
 * Checks the host text [host, host + len) and copies it to *out, brackets
 * removed.  0, -EINVAL with *cause, or -ENOMEM.
 */
static int take_host(const char *source, const char *host, size_t len, char **out,
		     char **cause)
{
	const char *start = host;
	size_t keep = len;

	if (len == 0) {
		dlc_cause_set(cause, "source '%s' names no NFS server; write HOST:/EXPORT/PATH "
			      "or nfs://HOST/EXPORT/PATH.", source);
		return -EINVAL;
	}
	if (host[0] == '[') {
		const char *zone;
		size_t address_len;

		if (len < 3 || host[len - 1] != ']')
			goto bad;
		start = host + 1;
		keep = len - 2;
		/* An address, then perhaps '%' and a zone: an interface such as eth0. */
		zone = memchr(start, '%', keep);
		address_len = zone ? (size_t)(zone - start) : keep;
		for (size_t i = 0; i < address_len; i++)
			if (!is_ipv6_char(start[i]))
				goto bad;
		if (zone && zone + 1 == start + keep)
			goto bad;
		for (const char *p = zone ? zone + 1 : start + keep; p < start + keep; p++)
			if (!is_name_char(*p))
				goto bad;
	} else {
		for (size_t i = 0; i < len; i++)
			if (!is_name_char(host[i]))
				goto bad;
	}
	*out = strndup(start, keep);
	return *out ? 0 : -ENOMEM;

bad:
	dlc_cause_set(cause, "'%.*s' in source '%s' is not a host name or address; write a "
		      "name such as fileserver, an address such as 10.0.0.5, or [::1] for IPv6.",
		      (int)len, host, source);
	return -EINVAL;
}

/*
 * Copies the path [path, path + len) to *out in canonical form.  0, -EINVAL
 * with *cause, or -ENOMEM.
 */
static int take_path(const char *source, const char *path, size_t len, char **out,
		     char **cause)
{
	const char *end = path + len;
	char *canonical, *to;

	if (len == 0 || path[0] != '/') {
		dlc_cause_set(cause, "source '%s' has no absolute path on the server; write "
			      "HOST:/EXPORT/PATH or nfs://HOST/EXPORT/PATH.", source);
		return -EINVAL;
	}
	canonical = malloc(len + 2);
	if (!canonical)
		return -ENOMEM;
	to = canonical;
	for (const char *p = path; p < end;) {
		const char *component, *next;
		size_t clen;

		while (p < end && *p == '/')
			p++;
		if (p == end)
			break;
		component = p;
		next = memchr(p, '/', (size_t)(end - p));
		clen = next ? (size_t)(next - p) : (size_t)(end - p);
		p = component + clen;
		if (clen == 1 && component[0] == '.')
			continue;
		if (clen == 2 && component[0] == '.' && component[1] == '.') {
			free(canonical);
			dlc_cause_set(cause, "the path in source '%s' contains '..'; write the "
				      "dataset's path on the server without it.", source);
			return -EINVAL;
		}
		*to++ = '/';
		memcpy(to, component, clen);
		to += clen;
	}
	if (to == canonical)
		*to++ = '/';
	*to = '\0';
	*out = canonical;
	return 0;
}

/* A port number, 1 to 65535, from [text, text + len); 0 or -EINVAL. */
static int parse_port(const char *text, size_t len, unsigned *out)
{
	unsigned value = 0;

	if (len == 0 || len > 5)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (text[i] < '0' || text[i] > '9')
			return -EINVAL;
		value = value * 10 + (unsigned)(text[i] - '0');
	}
	if (value == 0 || value > 65535)
		return -EINVAL;
	*out = value;
	return 0;
}

/* Applies one "name=value" argument of the URL form. */
static int apply_argument(const char *source, const char *arg, size_t len,
			  struct dlc_nfs_source *out, char **cause)
{
	const char *equals = memchr(arg, '=', len);
	size_t name_len = equals ? (size_t)(equals - arg) : len;
	const char *value = equals ? equals + 1 : arg + len;
	size_t value_len = (size_t)(arg + len - value);

	if (len == 0)
		return 0;       /* "?&version=4" or a trailing '&' */
	if (name_len == 7 && strncmp(arg, "version", 7) == 0) {
		if (value_len == 1 && (value[0] == '3' || value[0] == '4')) {
			out->version = value[0] - '0';
			return 0;
		}
		dlc_cause_set(cause, "version '%.*s' in source '%s' is not an NFS version dlcache "
			      "speaks; write version=4 or version=3.", (int)value_len, value, source);
		return -EINVAL;
	}
	if ((name_len == 7 && strncmp(arg, "nfsport", 7) == 0) ||
	    (name_len == 9 && strncmp(arg, "mountport", 9) == 0)) {
		unsigned *field = name_len == 7 ? &out->nfsport : &out->mountport;

		if (parse_port(value, value_len, field) == 0)
			return 0;
		dlc_cause_set(cause, "%.*s '%.*s' in source '%s' is not a port number; write a "
			      "number from 1 to 65535, e.g. %.*s=2049.", (int)name_len, arg,
			      (int)value_len, value, source, (int)name_len, arg);
		return -EINVAL;
	}
	dlc_cause_set(cause, "'%.*s' in source '%s' is not an argument dlcache knows; use "
		      "version=, nfsport= or mountport=.", (int)name_len, arg, source);
	return -EINVAL;
}

/* nfs://AUTHORITY/PATH?ARGS */
static int parse_url(const char *source, struct dlc_nfs_source *out, char **cause)
{
	const char *authority = source + strlen(URL_PREFIX);
	const char *query = strchr(authority, '?');
	const char *path_end = query ? query : authority + strlen(authority);
	const char *path = memchr(authority, '/', (size_t)(path_end - authority));
	const char *host_end = path ? path : path_end;
	const char *port = NULL;
	int rc;

	/* A port follows the last ':' outside brackets. */
	for (const char *p = host_end; p > authority; p--) {
		if (p[-1] == ']')
			break;
		if (p[-1] == ':') {
			port = p;
			break;
		}
	}
	if (port && parse_port(port, (size_t)(host_end - port), &out->nfsport) < 0) {
		dlc_cause_set(cause, "the port in source '%s' is not a number from 1 to 65535; "
			      "write nfs://HOST:2049/EXPORT/PATH, or leave the port out.", source);
		return -EINVAL;
	}
	rc = take_host(source, authority, (size_t)((port ? port - 1 : host_end) - authority),
		       &out->server, cause);
	if (rc < 0)
		return rc;
	if (!path) {
		dlc_cause_set(cause, "source '%s' names no export; write nfs://%s/EXPORT/PATH.",
			      source, out->server);
		return -EINVAL;
	}
	rc = take_path(source, path, (size_t)(path_end - path), &out->path, cause);
	if (rc < 0)
		return rc;
	for (const char *arg = query ? query + 1 : NULL; arg;) {
		const char *amp = strchr(arg, '&');
		size_t len = amp ? (size_t)(amp - arg) : strlen(arg);

		rc = apply_argument(source, arg, len, out, cause);
		if (rc < 0)
			return rc;
		arg = amp ? amp + 1 : NULL;
	}
	return 0;
}

/* HOST:/PATH */
static int parse_host_path(const char *source, struct dlc_nfs_source *out, char **cause)
{
	const char *colon;
	int rc;

	if (source[0] == '[') {
		const char *bracket = strchr(source, ']');

		colon = bracket && bracket[1] == ':' ? bracket + 1 : NULL;
	} else {
		colon = strchr(source, ':');
	}
	if (!colon) {
		dlc_cause_set(cause, "source '%s' is neither a directory nor HOST:/PATH; write "
			      "the dataset's directory, or HOST:/EXPORT/PATH for NFS.", source);
		return -EINVAL;
	}
	rc = take_host(source, source, (size_t)(colon - source), &out->server, cause);
	if (rc < 0)
		return rc;
	if (colon[1] != '/') {
		dlc_cause_set(cause, "the path after '%s:' in source '%s' is not absolute; write "
			      "%s:/EXPORT/PATH.", out->server, source, out->server);
		return -EINVAL;
	}
	return take_path(source, colon + 1, strlen(colon + 1), &out->path, cause);
}

int dlc_nfs_source_parse(const char *source, struct dlc_nfs_source *out, char **cause)
{
	const char *colon;
	int rc;

	if (cause)
		*cause = NULL;
	memset(out, 0, sizeof(*out));
	out->version = DEFAULT_VERSION;
	if (!source || !dlc_nfs_source_matches(source)) {
		dlc_cause_set(cause, "source '%s' is not an NFS source; write HOST:/EXPORT/PATH "
			      "or nfs://HOST/EXPORT/PATH.", source ? source : "");
		return -EINVAL;
	}
	colon = strchr(source, ':');
	if (strncmp(source, URL_PREFIX, strlen(URL_PREFIX)) == 0) {
		rc = parse_url(source, out, cause);
	} else if (strncmp(colon, "://", 3) == 0) {
		dlc_cause_set(cause, "source '%s' is a %.*s:// address, which dlcache cannot "
			      "read; give a directory, HOST:/EXPORT/PATH or nfs://HOST/EXPORT/PATH.",
			      source, (int)(colon - source), source);
		rc = -EINVAL;
	} else {
		rc = parse_host_path(source, out, cause);
	}
	if (rc < 0)
		dlc_nfs_source_free(out);
	if (rc == -ENOMEM)
		dlc_cause_set(cause, "out of memory while reading source '%s'.", source);
	return rc;
}
