/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A tiny streaming JSON writer; see json.h. */

#include "json.h"

#include <inttypes.h>
#include <string.h>

void json_init(struct json_writer *w, FILE *out)
{
	memset(w, 0, sizeof(*w));
	w->out = out;
}

void json_finish(struct json_writer *w)
{
	fputc('\n', w->out);
}

static void json_indent(struct json_writer *w)
{
	fputc('\n', w->out);
	for (unsigned i = 0; i < w->depth; i++)
		fputs("  ", w->out);
}

static void json_write_escaped(FILE *out, const char *s, size_t len);

/* Start a value: the separator, the indentation and the member name. */
static void json_value_prefix(struct json_writer *w, const char *key)
{
	unsigned d = w->depth < JSON_MAX_DEPTH ? w->depth : JSON_MAX_DEPTH;

	if (w->depth > 0) {
		if (w->has_member[d])
			fputc(',', w->out);
		w->has_member[d] = true;
		json_indent(w);
	}
	if (key) {
		fputc('"', w->out);
		json_write_escaped(w->out, key, strlen(key));
		fputs("\": ", w->out);
	}
}

static void json_container_begin(struct json_writer *w, const char *key, char open)
{
	json_value_prefix(w, key);
	fputc(open, w->out);
	w->depth++;
	if (w->depth <= JSON_MAX_DEPTH)
		w->has_member[w->depth] = false;
}

static void json_container_end(struct json_writer *w, char close)
{
	unsigned d = w->depth < JSON_MAX_DEPTH ? w->depth : JSON_MAX_DEPTH;
	bool had_members = w->depth > 0 && w->has_member[d];

	if (w->depth > 0)
		w->depth--;
	if (had_members)
		json_indent(w);
	fputc(close, w->out);
}

void json_object_begin(struct json_writer *w, const char *key)
{
	json_container_begin(w, key, '{');
}

void json_object_end(struct json_writer *w)
{
	json_container_end(w, '}');
}

void json_array_begin(struct json_writer *w, const char *key)
{
	json_container_begin(w, key, '[');
}

void json_array_end(struct json_writer *w)
{
	json_container_end(w, ']');
}

/*
 * The length of the valid UTF-8 sequence starting at s (at most len bytes),
 * or 0 if the bytes there are not one: overlong forms, surrogates and code
 * points above U+10FFFF are refused.
 */
static size_t utf8_sequence_len(const unsigned char *s, size_t len)
{
	size_t n;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xC2 && s[0] <= 0xDF) {
		n = 2;
		cp = s[0] & 0x1F;
	} else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
		n = 3;
		cp = s[0] & 0x0F;
	} else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
		n = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (n > len)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
	    (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n;
}

static void json_write_escaped(FILE *out, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		unsigned char c = p[i];
		size_t n;

		switch (c) {
		case '"':
			fputs("\\\"", out);
			i++;
			continue;
		case '\\':
			fputs("\\\\", out);
			i++;
			continue;
		case '\n':
			fputs("\\n", out);
			i++;
			continue;
		case '\r':
			fputs("\\r", out);
			i++;
			continue;
		case '\t':
			fputs("\\t", out);
			i++;
			continue;
		case '\b':
			fputs("\\b", out);
			i++;
			continue;
		case '\f':
			fputs("\\f", out);
			i++;
			continue;
		default:
			break;
		}
		if (c < 0x20 || c == 0x7F) {
			fprintf(out, "\\u%04x", c);
			i++;
			continue;
		}
		n = utf8_sequence_len(p + i, len - i);
		if (n == 0) {
			/* Not UTF-8: keep the byte, read as Latin-1. */
			fprintf(out, "\\u%04x", c);
			i++;
			continue;
		}
		fwrite(p + i, 1, n, out);
		i += n;
	}
}

void json_string_len(struct json_writer *w, const char *key, const char *s, size_t len)
{
	json_value_prefix(w, key);
	fputc('"', w->out);
	json_write_escaped(w->out, s, len);
	fputc('"', w->out);
}

void json_string(struct json_writer *w, const char *key, const char *s)
{
	if (!s) {
		json_null(w, key);
		return;
	}
	json_string_len(w, key, s, strlen(s));
}

void json_string_begin(struct json_writer *w, const char *key)
{
	json_value_prefix(w, key);
	fputc('"', w->out);
}

void json_string_append(struct json_writer *w, const char *s, size_t len)
{
	json_write_escaped(w->out, s, len);
}

void json_string_end(struct json_writer *w)
{
	fputc('"', w->out);
}

void json_int(struct json_writer *w, const char *key, int64_t v)
{
	json_value_prefix(w, key);
	fprintf(w->out, "%" PRId64, v);
}

void json_uint(struct json_writer *w, const char *key, uint64_t v)
{
	json_value_prefix(w, key);
	fprintf(w->out, "%" PRIu64, v);
}

void json_bool(struct json_writer *w, const char *key, bool v)
{
	json_value_prefix(w, key);
	fputs(v ? "true" : "false", w->out);
}

void json_null(struct json_writer *w, const char *key)
{
	json_value_prefix(w, key);
	fputs("null", w->out);
}
