// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The one progress display of ocfs2ctl (progress.h): the daemon's jobs
 * (ctl_mount.c), the offline format (ctl_format.c) and put -r
 * (ctl_write.c) all draw through it.
 */

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"

#define BAR_WIDTH 40

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void progress_init(struct progress *p, const char *title, const char *verb, bool lines, bool off)
{
	memset(p, 0, sizeof(*p));
	p->title = title;
	p->verb = verb;
	p->tty = isatty(STDOUT_FILENO);
	p->off = off || (!p->tty && !lines);
	p->shown = -1;
}

void progress_show(struct progress *p, double fraction, long seconds_left, const char *detail)
{
	int pct;

	if (p->off)
		return;
	if (fraction < 0)
		fraction = 0;
	if (fraction > 1)
		fraction = 1;
	pct = (int)(fraction * 100 + 1e-9);
	if (p->tty) {
		int64_t now = now_us();
		unsigned fill = (unsigned)(fraction * BAR_WIDTH);
		char bar[BAR_WIDTH + 1], eta[32] = "";
		int n;

		/* a redraw per percent, or five a second while the detail moves */
		if (pct == p->shown && (!detail || now - p->last_us < 200000))
			return;
		memset(bar, '#', fill);
		memset(bar + fill, ' ', BAR_WIDTH - fill);
		bar[BAR_WIDTH] = '\0';
		if (seconds_left >= 0 && pct < 100)
			snprintf(eta, sizeof(eta), "  %ld:%02ld left", seconds_left / 60,
				 seconds_left % 60);
		n = printf("\r%s [%s] %3d%%%s%s%s", p->title, bar, pct, detail ? "  " : "",
			   detail ? detail : "", eta);
		/* wipe what a longer line before left */
		if (n > 0 && (unsigned)n < p->width)
			printf("%*s", (int)(p->width - (unsigned)n), "");
		if (n > 0 && (unsigned)n > p->width)
			p->width = (unsigned)n;
		p->bar_open = true;
		p->last_us = now;
	} else {
		/* plain lines for logs and pipes: every tenth */
		if (p->shown >= 0 && pct / 10 == p->shown / 10)
			return;
		if (detail)
			printf("%s: %d%% (%s)\n", p->verb, pct / 10 * 10, detail);
		else
			printf("%s: %d%%\n", p->verb, pct / 10 * 10);
	}
	fflush(stdout);
	p->shown = pct;
}

void progress_end(struct progress *p)
{
	if (p->bar_open) {
		printf("\n");
		fflush(stdout);
	}
	p->bar_open = false;
}

void progress_size(char *buf, size_t len, uint64_t n)
{
	static const char *const units[] = { "bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)n;
	size_t u = 0;

	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " bytes", n);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
}
