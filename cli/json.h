/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A tiny streaming JSON writer for ocfs2ctl: objects, arrays, strings,
 * integers and booleans, pretty-printed with two-space indentation.
 *
 * Every value call takes a key: the member name inside an object, NULL
 * inside an array (or for the top-level value).  Strings are escaped as RFC
 * 8259 asks; bytes that are not part of valid UTF-8 are written as \u00XX
 * (their Latin-1 reading), so the output is always valid JSON whatever the
 * volume holds.  Write errors are left to the caller (ferror on the stream).
 */
#ifndef OCFS2CTL_JSON_H
#define OCFS2CTL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

struct json_writer {
	FILE *out;
	unsigned depth;
	/* Whether the container at each depth has had a member yet. */
	bool has_member[JSON_MAX_DEPTH + 1];
};

void json_init(struct json_writer *w, FILE *out);
/* End the document with a newline. */
void json_finish(struct json_writer *w);

void json_object_begin(struct json_writer *w, const char *key);
void json_object_end(struct json_writer *w);
void json_array_begin(struct json_writer *w, const char *key);
void json_array_end(struct json_writer *w);

void json_string(struct json_writer *w, const char *key, const char *s);
void json_string_len(struct json_writer *w, const char *key, const char *s, size_t len);
void json_int(struct json_writer *w, const char *key, int64_t v);
void json_uint(struct json_writer *w, const char *key, uint64_t v);
void json_bool(struct json_writer *w, const char *key, bool v);
void json_null(struct json_writer *w, const char *key);

/*
 * A string written in pieces: begin, any number of raw appends (escaped
 * like json_string; a UTF-8 sequence must not be split across appends),
 * end.
 */
void json_string_begin(struct json_writer *w, const char *key);
void json_string_append(struct json_writer *w, const char *s, size_t len);
void json_string_end(struct json_writer *w);

#endif
