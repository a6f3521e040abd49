// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Where the daemon's messages go: where administrators look.
 *
 *  - Under a service manager (stderr is the journal's stream: JOURNAL_STREAM
 *    names it) every message goes to the journal, structured, as GLib's
 *    g_log_writer_journald sends it.
 *  - Detached (ocfs2d without -f, as ocfs2ctl and the mount helper start
 *    it) every message also goes to syslog (the journal too, where one
 *    runs), and to stderr, which ocfs2ctl sends to ocfs2d.log next to the
 *    control socket: `ocfs2ctl log` reads that file.
 *  - In the foreground (-f), on stderr only.
 *
 * On stderr each message is one line, "DATE TIME ocfs2d[PID]: LEVEL: text",
 * so that a log file says when.  G_MESSAGES_DEBUG still picks the debug
 * messages that are written, as with GLib's default writer.
 */

#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include <glib.h>

#include "ocfs2d.h"

static bool to_syslog;

static const char *level_name(GLogLevelFlags level)
{
	if (level & G_LOG_LEVEL_ERROR)
		return "ERROR";
	if (level & G_LOG_LEVEL_CRITICAL)
		return "CRITICAL";
	if (level & G_LOG_LEVEL_WARNING)
		return "WARNING";
	if (level & G_LOG_LEVEL_MESSAGE)
		return "Message";
	if (level & G_LOG_LEVEL_INFO)
		return "INFO";
	return "DEBUG";
}

static int syslog_priority(GLogLevelFlags level)
{
	if (level & G_LOG_LEVEL_ERROR)
		return LOG_ERR;
	if (level & G_LOG_LEVEL_CRITICAL)
		return LOG_CRIT;
	if (level & G_LOG_LEVEL_WARNING)
		return LOG_WARNING;
	if (level & G_LOG_LEVEL_MESSAGE)
		return LOG_NOTICE;
	if (level & G_LOG_LEVEL_INFO)
		return LOG_INFO;
	return LOG_DEBUG;
}

static GLogWriterOutput writer(GLogLevelFlags level, const GLogField *fields, gsize n,
			       gpointer data)
{
	g_autofree char *msg = NULL;

	if (g_log_writer_default_would_drop(level, G_LOG_DOMAIN))
		return G_LOG_WRITER_HANDLED;
	if (g_log_writer_is_journald(fileno(stderr)) &&
	    g_log_writer_journald(level, fields, n, data) == G_LOG_WRITER_HANDLED)
		return G_LOG_WRITER_HANDLED;
	for (gsize i = 0; i < n && !msg; i++)
		if (!strcmp(fields[i].key, "MESSAGE"))
			msg = fields[i].length < 0 ? g_strdup(fields[i].value)
						   : g_strndup(fields[i].value, fields[i].length);
	if (!msg)
		msg = g_strdup("(a message without text)");
	if (to_syslog)
		syslog(syslog_priority(level), "%s", msg);

	g_autoptr(GDateTime) now = g_date_time_new_now_local();
	g_autofree char *when = g_date_time_format(now, "%Y-%m-%d %H:%M:%S.%f");

	/* %f gives microseconds: milliseconds are enough */
	if (when && strlen(when) > 3)
		when[strlen(when) - 3] = '\0';
	fprintf(stderr, "%s ocfs2d[%d]: %s: %s\n", when ? when : "?", (int)getpid(),
		level_name(level), msg);
	fflush(stderr);
	return G_LOG_WRITER_HANDLED;
}

void log_init(bool detached)
{
	to_syslog = detached && !g_log_writer_is_journald(fileno(stderr));
	if (to_syslog)
		openlog("ocfs2d", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	g_log_set_writer_func(writer, NULL, NULL);
}
