/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * How ocfs2ctl shows a long verb's progress (format, check, put -r): on a
 * terminal one line redrawn in place, "Title [#####     ]  40%" and what
 * the verb adds (bytes and files copied, time left); into a pipe or a log
 * a plain line per tenth ("verb: 40%"), or nothing where the verb asks.
 */
#ifndef OCFS2CTL_PROGRESS_H
#define OCFS2CTL_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct progress {
	const char *title; /* on a terminal: "Formatting", "Checking", "Copying" */
	const char *verb;  /* plain lines: "check: 40%" */
	bool tty;	   /* stdout is a terminal: a bar */
	bool off;	   /* nothing at all (--json, -q, or no lines wanted) */
	int shown;	   /* the last percentage shown, -1 for none */
	bool bar_open;	   /* a bar is on the line: end it before other output */
	int64_t last_us;   /* when the bar was last drawn (monotonic) */
	unsigned width;	   /* what the last bar printed, to wipe a longer one */
};

/*
 * Start: a bar on a terminal; into anything else plain lines if lines,
 * nothing otherwise; nothing at all with off.
 */
void progress_init(struct progress *p, const char *title, const char *verb, bool lines, bool off);
/*
 * fraction (0..1) done; seconds_left < 0 when unknown; detail (or NULL)
 * follows the percentage on the bar and, in parentheses, on plain lines.
 * The bar is redrawn when the percentage moves or 0.2 s passed.
 */
void progress_show(struct progress *p, double fraction, long seconds_left, const char *detail);
/* The bar's line ends (before other output, and at the end). */
void progress_end(struct progress *p);
/* Bytes for people: "4.0 MiB" (GLib's g_format_size puts a no-break space in). */
void progress_size(char *buf, size_t len, uint64_t n);

#endif
