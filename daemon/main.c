// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ocfs2d: serve OCFS2 volumes through FUSE.
 *
 *   ocfs2d [-f] [-o OPTIONS] DEVICE MOUNTPOINT   one volume; exits when it is unmounted
 *   ocfs2d [-f] --server [--control PATH] [--no-system-bus]
 *                                                mount and unmount on request,
 *                                                through the D-Bus API (dbus_server.c)
 *
 * Without -f the daemon detaches once the volume is mounted (or the control
 * socket listens), so that the caller knows the outcome.  SIGTERM and
 * SIGINT unmount every volume cleanly (forcing a busy one: its open files
 * get errors) and exit; a SIGKILL leaves the journal for the next mount.
 */

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib-unix.h>
#include <glib.h>

#include "api.h"
#include "ocfs2d.h"

static GMainLoop *loop;
static struct volume *single;
static struct dbus_server *server; /* server mode: ours, started and stopped here */
static int exit_status;

static gboolean on_signal(gpointer data)
{
	g_message("%s: unmounting and exiting", (const char *)data);
	if (single) {
		g_autoptr(GError) err = NULL;

		if (!volume_unmount(single, true, &err))
			g_warning("%s", err->message);
		/* the volume's thread reports gone(): that quits the loop */
	} else {
		dbus_server_unmount_all(server);
		g_main_loop_quit(loop);
	}
	return G_SOURCE_CONTINUE;
}

static gboolean quit_idle(gpointer data)
{
	g_main_loop_quit(loop);
	return G_SOURCE_REMOVE;
}

static void single_gone(struct volume *v, void *arg)
{
	if (v->close_result < 0)
		exit_status = 1;
	g_idle_add(quit_idle, NULL);
}

/*
 * Detaching: fork; the child carries on, the parent waits on a pipe for
 * one byte (0: ready, else failed) and exits with it.
 */
static int ready_fd = -1;

static void detach(void)
{
	int p[2];

	if (pipe(p) < 0) {
		perror("ocfs2d: pipe");
		exit(1);
	}
	pid_t pid = fork();

	if (pid < 0) {
		perror("ocfs2d: fork");
		exit(1);
	}
	if (pid > 0) {
		unsigned char c = 1;

		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			c = 1;
		_exit(c);
	}
	close(p[0]);
	ready_fd = p[1];
	setsid();
}

static void report_ready(bool ok)
{
	if (ready_fd < 0)
		return;
	unsigned char c = ok ? 0 : 1;

	if (write(ready_fd, &c, 1) < 0)
		g_warning("telling the parent: %s", g_strerror(errno));
	close(ready_fd);
	ready_fd = -1;
	if (ok) {
		int null = open("/dev/null", O_RDWR);

		if (null >= 0) {
			dup2(null, STDIN_FILENO);
			/* stdout/stderr stay: logs go wherever the caller sent them */
			close(null);
		}
	}
}

int main(int argc, char **argv)
{
	gboolean foreground = FALSE, server_mode = FALSE, idle_exit = FALSE, version = FALSE;
	gboolean no_bus = FALSE;
	g_autofree char *opts_str = NULL, *control = NULL;
	g_autoptr(GError) err = NULL;
	GOptionEntry entries[] = {
		{ "foreground", 'f', 0, G_OPTION_ARG_NONE, &foreground, "stay in the foreground", NULL },
		{ "options", 'o', 0, G_OPTION_ARG_STRING, &opts_str,
		  "mount options: ro, noallow_other (only root may enter; default: every user, modes "
		  "checked as the kernel does), entry_timeout=S, attr_timeout=S, commit=S, slot=N, "
		  "poll=USEC (default 200; 0: sleep between requests), threads=N (with poll=0), "
		  "lock_cache=N (clustered: idle cluster locks kept, default 65536), localalloc=MB "
		  "(the local alloc window; default as kernel OCFS2's), localflocks "
		  "(clustered: flock and fcntl locks on this node only), "
		  "user_xattr (default), nouser_xattr, acl, noacl (default), noxattr, uring (FUSE over "
		  "io_uring, Linux 6.14+), writeback_cache (local volumes: the kernel keeps written "
		  "pages and hands them over in batches; errors show at fsync and close), debug",
		  "OPTS" },
		{ "server", 's', 0, G_OPTION_ARG_NONE, &server_mode,
		  "serve the D-Bus API: mount and unmount on request", NULL },
		{ "control", 'c', 0, G_OPTION_ARG_FILENAME, &control,
		  "control socket, the API peer-to-peer (default " O2D_CONTROL_DEFAULT ")", "PATH" },
		{ "no-system-bus", 0, 0, G_OPTION_ARG_NONE, &no_bus,
		  "server: do not offer the API as " O2D_BUS_NAME " on the system bus", NULL },
		{ "exit-when-idle", 0, 0, G_OPTION_ARG_NONE, &idle_exit,
		  "server: exit once the last volume is unmounted", NULL },
		{ "version", 'V', 0, G_OPTION_ARG_NONE, &version, "print the version", NULL },
		{ NULL }
	};
	g_autoptr(GOptionContext) ctx = g_option_context_new("[DEVICE MOUNTPOINT]");
	struct mount_opts mo;

	/*
	 * Requests allocate and free blocks all the time on several threads.
	 * With glibc's defaults a thread's heap shrinks whenever its top is
	 * free, and grows again at the next request: an mprotect and a page
	 * fault a page, a large part of a cached request's time.  Memory freed
	 * stays with the daemon up to 64 MiB.
	 */
	mallopt(M_TRIM_THRESHOLD, 64 << 20);

	g_option_context_set_summary(ctx, "Serve an OCFS2 volume through FUSE.");
	g_option_context_add_main_entries(ctx, entries, NULL);
	if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
		fprintf(stderr, "ocfs2d: %s (see ocfs2d --help)\n", err->message);
		return 2;
	}
	if (version) {
		printf("ocfs2d %s\n", OCFS2D_VERSION);
		return 0;
	}
	if (server_mode ? argc != 1 : argc != 3) {
		fprintf(stderr, "ocfs2d: %s (see ocfs2d --help)\n",
			server_mode ? "--server takes no DEVICE or MOUNTPOINT"
			       : "give a DEVICE and a MOUNTPOINT, or --server");
		return 2;
	}
	mount_opts_default(&mo);
	if (!server_mode && !mount_opts_parse(opts_str, &mo, &err)) {
		fprintf(stderr, "ocfs2d: %s\n", err->message);
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "ocfs2d: must run as root (it mounts filesystems and opens devices)\n");
		return 1;
	}
	log_init(!foreground);
	if (!control)
		control = g_strdup(g_getenv("OCFS2D_CONTROL") ? g_getenv("OCFS2D_CONTROL")
							      : O2D_CONTROL_DEFAULT);
	if (!foreground)
		detach();
	signal(SIGPIPE, SIG_IGN);
	loop = g_main_loop_new(NULL, FALSE);
	g_unix_signal_add(SIGTERM, on_signal, (gpointer) "SIGTERM");
	g_unix_signal_add(SIGINT, on_signal, (gpointer) "SIGINT");
	g_unix_signal_add(SIGHUP, on_signal, (gpointer) "SIGHUP");

	if (server_mode) {
		server = dbus_server_start(control, !no_bus, &err);
		if (!server) {
			fprintf(stderr, "ocfs2d: %s\n", err->message);
			report_ready(false);
			return 1;
		}
		if (idle_exit)
			dbus_server_exit_when_idle(server, loop);
		g_message("serving the D-Bus API on %s", control);
	} else if (!volume_mount(argv[1], argv[2], &mo, single_gone, NULL, NULL, &single, &err)) {
		fprintf(stderr, "ocfs2d: %s\n", err->message);
		report_ready(false);
		return 1;
	}
	report_ready(true);
	g_main_loop_run(loop);
	if (server)
		dbus_server_stop(server);
	if (single)
		volume_unref(single);
	g_main_loop_unref(loop);
	return exit_status;
}
