/*
 * s3_parse.c - pure parsers of the S3 driver's outside inputs (see
 * s3_parse.h): Content-Range, HTTP dates, URL-encoded listing keys and the
 * shared credentials file's text.  Strings in, values out; no buffer of a
 * fixed size, so no input is cut, and nothing that is not exactly the
 * format is taken.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>

#include "dlcache/s3_parse.h"

/* Decimal digits at *p into *out, *p moved past them; false for none or
 * for a value past 2^64 - 1. */
static bool parse_number(const char **p, uint64_t *out)
{
	uint64_t value = 0;
	const char *s = *p;

	if (!isdigit((unsigned char)*s))
		return false;
	for (; isdigit((unsigned char)*s); s++) {
		unsigned digit = (unsigned)(*s - '0');

		if (value > (UINT64_MAX - digit) / 10)
			return false;
		value = value * 10 + digit;
	}
	*p = s;
	*out = value;
	return true;
}

int dlc_s3_content_range_parse(const char *value, uint64_t *first, uint64_t *last,
			       uint64_t *total)
{
	const char *p = value;
	uint64_t a, b, t = DLC_S3_SIZE_UNKNOWN;

	if (!value)
		return -EINVAL;
	while (*p == ' ' || *p == '\t')
		p++;
	if (strncasecmp(p, "bytes", 5) != 0 || (p[5] != ' ' && p[5] != '\t'))
		return -EINVAL;
	p += 6;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!parse_number(&p, &a) || *p++ != '-' || !parse_number(&p, &b) || *p++ != '/')
		return -EINVAL;
	if (*p == '*')
		p++;
	else if (!parse_number(&p, &t) || t == DLC_S3_SIZE_UNKNOWN)
		return -EINVAL;
	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++;
	if (*p || b < a || (t != DLC_S3_SIZE_UNKNOWN && b >= t))
		return -EINVAL;
	*first = a;
	*last = b;
	*total = t;
	return 0;
}

int dlc_s3_http_date_parse(const char *value, int64_t *out)
{
	struct tm tm = { 0 };
	const char *end;

	if (!value)
		return -EINVAL;
	while (*value == ' ' || *value == '\t')
		value++;
	end = strptime(value, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (!end)
		return -EINVAL;
	while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
		end++;
	if (*end)
		return -EINVAL;
	*out = (int64_t)timegm(&tm);
	return 0;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int dlc_s3_url_decode(const char *in, char **out)
{
	size_t len = strlen(in), n = 0;
	char *decoded = malloc(len + 1);

	*out = NULL;
	if (!decoded)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++) {
		if (in[i] == '+') {
			decoded[n++] = ' ';
		} else if (in[i] == '%') {
			/* in[i + 2] is read only after in[i + 1] proved no NUL. */
			int high = hex_value(in[i + 1]);
			int low = high >= 0 ? hex_value(in[i + 2]) : -1;

			if (low < 0 || (high == 0 && low == 0)) {
				free(decoded);
				return -EINVAL;
			}
			decoded[n++] = (char)(high * 16 + low);
			i += 2;
		} else {
			decoded[n++] = in[i];
		}
	}
	decoded[n] = '\0';
	*out = decoded;
	return 0;
}

void dlc_s3_keys_wipe(struct dlc_s3_keys *keys)
{
	char **fields[] = { &keys->access_key, &keys->secret_key, &keys->session_token };

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		if (*fields[i]) {
			OPENSSL_cleanse(*fields[i], strlen(*fields[i]));
			free(*fields[i]);
			*fields[i] = NULL;
		}
	}
}

/* [start, end) without its leading and trailing blanks. */
static void trim(const char **start, const char **end)
{
	while (*start < *end && isspace((unsigned char)**start))
		(*start)++;
	while (*end > *start && isspace((unsigned char)(*end)[-1]))
		(*end)--;
}

static bool equals(const char *start, const char *end, const char *word)
{
	size_t len = strlen(word);

	return (size_t)(end - start) == len && memcmp(start, word, len) == 0;
}

/* An empty value is no value: "aws_session_token =" clears it. */
static int set_field(char **field, const char *start, const char *end)
{
	char *copy = NULL;

	if (end > start && !(copy = strndup(start, (size_t)(end - start))))
		return -ENOMEM;
	if (*field) {
		OPENSSL_cleanse(*field, strlen(*field));
		free(*field);
	}
	*field = copy;
	return 0;
}

int dlc_s3_credentials_parse(const char *text, const char *profile, struct dlc_s3_keys *out,
			     bool *section_found)
{
	bool in_section = false;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	*section_found = false;
	for (const char *line = text; rc == 0 && line && *line;) {
		const char *next = strchr(line, '\n');
		const char *start = line, *end = next ? next : line + strlen(line);
		const char *equal;

		line = next ? next + 1 : NULL;
		trim(&start, &end);
		if (start == end || *start == '#' || *start == ';')
			continue;
		if (*start == '[') {
			const char *close = memchr(start, ']', (size_t)(end - start));
			const char *name = start + 1, *name_end = close ? close : end;

			trim(&name, &name_end);
			in_section = equals(name, name_end, profile);
			*section_found |= in_section;
			continue;
		}
		equal = memchr(start, '=', (size_t)(end - start));
		if (!in_section || !equal)
			continue;
		const char *name = start, *name_end = equal, *value = equal + 1, *value_end = end;

		trim(&name, &name_end);
		trim(&value, &value_end);
		if (equals(name, name_end, "aws_access_key_id"))
			rc = set_field(&out->access_key, value, value_end);
		else if (equals(name, name_end, "aws_secret_access_key"))
			rc = set_field(&out->secret_key, value, value_end);
		else if (equals(name, name_end, "aws_session_token"))
			rc = set_field(&out->session_token, value, value_end);
	}
	if (rc < 0)
		dlc_s3_keys_wipe(out);
	return rc;
}
