// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ocfs2ctl mount, umount, mounts, status and log: the runtime verbs, through ocfs2d.
 *
 *   mount [-o OPTS] [--foreground] DEVICE MOUNTPOINT
 *   umount [-f] MOUNTPOINT
 *   mounts
 *   status                               every served volume: state, cluster,
 *                                        journal, space and inodes
 *   log [-n LINES] [MOUNTPOINT|DEVICE]   the daemon's log (ocfs2d.log next to
 *                                        the control socket), one volume's lines
 *
 * They talk to a running ocfs2d through its D-Bus API
 * (dbus/org.ocfs2d.Daemon1.xml), peer-to-peer on its control socket, so
 * they work with or without a system bus.  The calls go through the
 * proxies gdbus-codegen makes from the interface XML (ocfs2d-generated.h),
 * the same code the daemon's skeletons come from, so a method's name and
 * signature are checked by the compiler on both sides.  mount starts a daemon when none is
 * running (one that exits after its last volume is unmounted); with
 * --foreground it runs ocfs2d for this one volume in the foreground
 * instead.  umount of a volume served by a foreground ocfs2d unmounts it
 * directly and waits until the daemon has closed the device.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib-unix.h>
#include <signal.h>

#include "api.h"
#include "ctl.h"
#include "json.h"
#include "ocfs2d-generated.h"
#include "progress.h"

#define CALL_TIMEOUT G_MAXINT /* mounting replays journals, unmounting waits for them */

/* Who speaks in messages ("ocfs2ctl: VERB: ..."), and whether results are printed. */
static const char *prog = "ocfs2ctl";
static bool quiet;

static int fail(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(const char *verb, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: %s: ", prog, verb);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CTL_EXIT_FAIL;
}

static int usage(const char *verb, const char *args)
{
	fprintf(stderr, "ocfs2ctl: %s: usage: ocfs2ctl %s %s\n", verb, verb, args);
	return CTL_EXIT_USAGE;
}

static const char *control_path(void)
{
	const char *p = getenv("OCFS2D_CONTROL");

	return p && *p ? p : O2D_CONTROL_DEFAULT;
}

/*
 * Hold the control socket's lifetime lock shared until we exit, so that a
 * daemon exiting once idle does not leave between our connect and our
 * call.  A daemon that has taken it to exit holds it until it is gone:
 * wait for that (bounded; without the lock we only risk that race).
 */
static void hold_daemon(void)
{
	static bool done;
	g_autofree char *lock = g_strconcat(control_path(), O2D_CONTROL_LOCK_SUFFIX, NULL);
	int fd;

	if (done)
		return;
	fd = open(lock, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return; /* none yet: the daemon we start makes it, then we ask again */
	done = true;
	for (int i = 0; i < 300; i++) {
		if (flock(fd, LOCK_SH | LOCK_NB) == 0)
			return; /* fd stays open: the lock is ours until we exit */
		if (errno != EWOULDBLOCK && errno != EINTR)
			break;
		g_usleep(100 * 1000);
	}
	close(fd);
}

/*
 * Connect to the daemon's API on its control socket.  NULL with *err set
 * if that fails; *absent tells whether no daemon is there at all.  A
 * daemon killed a moment ago may still hold its socket while its last
 * threads finish (a connect then fails half-way, reset): ask again until
 * it is gone or answers.
 */
static GDBusConnection *connect_daemon(bool *absent, GError **err)
{
	g_autofree char *addr = g_strconcat("unix:path=", control_path(), NULL);
	GDBusConnection *c = NULL;

	(void)o2d_error_quark(); /* so that the daemon's errors arrive by name */
	hold_daemon();
	for (int tries = 0;; tries++) {
		g_clear_error(err);
		c = g_dbus_connection_new_for_address_sync(
			addr, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT, NULL, NULL, err);
		*absent = !c && (g_error_matches(*err, G_IO_ERROR, G_IO_ERROR_NOT_FOUND) ||
				 g_error_matches(*err, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED));
		if (c || *absent || tries >= 100 ||
		    g_error_matches(*err, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED))
			return c;
		g_usleep(100 * 1000);
	}
}

/* A call's error as ocfs2ctl says it: the daemon's message without the D-Bus name. */
static const char *message_of(GError *err)
{
	g_dbus_error_strip_remote_error(err);
	return err->message;
}

/*
 * Proxies wait for the daemon's answer as long as it takes, not GDBus's
 * default 25 s: mounting replays journals, unmounting waits for them.
 */
static void wait_for_answers(gpointer proxy)
{
	g_dbus_proxy_set_default_timeout(G_DBUS_PROXY(proxy), CALL_TIMEOUT);
}

/* Proxies of ours only call and read once: no signals to follow. */
#define PROXY_FLAGS G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS

/*
 * The daemon's Volume object at path, its properties read once, or NULL
 * with *err set.  On a peer-to-peer connection the name is NULL.  If no
 * object is there the proxy still comes, with no properties: callers tell
 * by a NULL Device.
 */
static O2dVolume *volume_proxy(GDBusConnection *c, const char *path, GError **err)
{
	O2dVolume *vol = o2d_volume_proxy_new_sync(c, PROXY_FLAGS, NULL, path, NULL, err);

	if (vol)
		wait_for_answers(vol);
	return vol;
}

/* Where ocfs2d is: $OCFS2D, next to us (installed or in the build tree), or PATH. */
static char *find_daemon(void)
{
	const char *env = getenv("OCFS2D");
	char self[PATH_MAX], cand[PATH_MAX + 32];
	ssize_t n;

	if (env && *env)
		return strdup(env);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');

		if (slash) {
			*slash = '\0';
			const char *rel[] = { "/ocfs2d", "/../daemon/ocfs2d", "/../sbin/ocfs2d" };

			for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
				snprintf(cand, sizeof(cand), "%s%s", self, rel[i]);
				if (access(cand, X_OK) == 0)
					return strdup(cand);
			}
		}
	}
	return strdup("ocfs2d");
}

/*
 * Run ocfs2d with args (it detaches once ready); its exit status or -1.  Its
 * output goes to ocfs2d.log next to the control socket, not to ours: a
 * caller reading our output through a pipe must not wait on the daemon.
 */
static void log_path(char *log, size_t size)
{
	const char *ctl = control_path(), *slash = strrchr(ctl, '/');

	snprintf(log, size, "%.*s/ocfs2d.log", slash ? (int)(slash - ctl) : 1, slash ? ctl : ".");
}

static int run_daemon(char *const *args)
{
	char log[PATH_MAX];
	const char *ctl = control_path(), *slash = strrchr(ctl, '/');
	pid_t pid;
	int st;

	log_path(log, sizeof(log));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

		if (fd < 0 && slash && slash != ctl) {
			/* the socket's directory may not exist yet */
			char dir[PATH_MAX];

			snprintf(dir, sizeof(dir), "%.*s", (int)(slash - ctl), ctl);
			mkdir(dir, 0755);
			fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		}
		if (fd < 0)
			fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execvp(args[0], args);
		fprintf(stderr, "%s: cannot run %s: %s\n", prog, args[0], strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The daemon's answer: its message, or a JSON object with the paths. */
static int print_result(bool json, const char *device, const char *mnt, const char *msg)
{
	if (quiet)
		return CTL_EXIT_OK;
	if (json) {
		struct json_writer j;

		json_init(&j, stdout);
		json_object_begin(&j, NULL);
		if (device)
			json_string(&j, "device", device);
		json_string(&j, "mountpoint", mnt);
		json_string(&j, "message", msg);
		json_object_end(&j);
		json_finish(&j);
	} else {
		printf("%s\n", msg);
	}
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

static int do_mount(bool json, const char *opts, bool foreground, const char *device,
		    const char *mnt)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(GDBusConnection) c = NULL;
	g_autoptr(O2dManager) manager = NULL;
	g_autoptr(O2dVolume) vol = NULL;
	g_autofree char *path = NULL;
	g_autofree char *daemon = find_daemon();
	g_autofree char *absdev = g_canonicalize_filename(device, NULL);
	g_autofree char *absmnt = g_canonicalize_filename(mnt, NULL);
	GVariantBuilder ob;
	bool absent;

	if (foreground) {
		char *args[] = { daemon, "-f", "-o", (char *)opts, (char *)device, (char *)mnt, NULL };

		fflush(NULL);
		execvp(daemon, args);
		return fail("mount", "cannot run ocfs2d: %s", strerror(errno));
	}
	if (!g_utf8_validate(absdev, -1, NULL) || !g_utf8_validate(absmnt, -1, NULL) ||
	    !g_utf8_validate(opts, -1, NULL))
		return fail("mount", "paths and options must be UTF-8 to travel over D-Bus");
	c = connect_daemon(&absent, &err);
	if (!c && absent) {
		char *args[] = { daemon, "--server", "--exit-when-idle", NULL };
		int st = run_daemon(args);

		if (st != 0)
			return fail("mount", "could not start ocfs2d (%s exited with %d; see ocfs2d.log "
				    "next to %s)", args[0], st, control_path());
		g_clear_error(&err);
		c = connect_daemon(&absent, &err);
	}
	if (!c)
		return fail("mount", "cannot reach ocfs2d at %s: %s", control_path(), err->message);
	g_variant_builder_init(&ob, G_VARIANT_TYPE_VARDICT);
	if (*opts)
		g_variant_builder_add(&ob, "{sv}", "options", g_variant_new_string(opts));
	manager = o2d_manager_proxy_new_sync(c, PROXY_FLAGS | G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES,
					     NULL, O2D_MANAGER_PATH, NULL, &err);
	if (!manager) {
		g_variant_builder_clear(&ob);
		return fail("mount", "%s", message_of(err));
	}
	wait_for_answers(manager);
	if (!o2d_manager_call_mount_sync(manager, absdev, absmnt, g_variant_builder_end(&ob), &path,
					 NULL, &err))
		return fail("mount", "%s", message_of(err));
	/* the paths as the daemon resolved them; ours if it cannot say */
	vol = volume_proxy(c, path, NULL);
	g_autofree char *dev = vol ? o2d_volume_dup_device(vol) : NULL;
	g_autofree char *where = vol ? o2d_volume_dup_mount_point(vol) : NULL;
	g_autofree char *msg = g_strdup_printf("%s mounted on %s", dev ? dev : absdev,
					       where ? where : absmnt);

	return print_result(json, dev ? dev : absdev, where ? where : absmnt, msg);
}

/* The mount source of a FUSE ocfs2 mount at mnt (from mountinfo), or NULL. */
static char *ocfs2_mount_source(const char *mnt)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192], *src = NULL;

	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		char path[4096], fstype[256], source[4096];
		char *sep = strstr(line, " - ");

		if (!sep || sscanf(line, "%*u %*u %*s %*s %4095s", path) != 1)
			continue;
		if (sscanf(sep + 3, "%255s %4095s", fstype, source) != 2)
			continue;
		if (!strcmp(path, mnt) && !strcmp(fstype, "fuse.ocfs2")) {
			free(src);
			src = strdup(source);
		}
	}
	fclose(f);
	return src;
}

/*
 * A volume served by a foreground ocfs2d: unmount it here, then wait (up to
 * a minute) for the daemon to close the device, which it holds flocked.
 */
static int umount_direct(const char *mnt, bool force)
{
	char *src = ocfs2_mount_source(mnt);

	if (!src)
		return fail("umount", "%s: no ocfs2d volume is mounted there", mnt);
	if (umount2(mnt, force ? MNT_DETACH : 0) < 0) {
		int e = errno;

		free(src);
		return fail("umount", "%s: %s%s", mnt, strerror(e),
			    e == EBUSY ? " (files are open or a process works in it; -f detaches)"
				       : "");
	}
	int fd = open(src, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		for (int i = 0; i < 600 && flock(fd, LOCK_EX | LOCK_NB) < 0; i++) {
			struct timespec ts = { 0, 100000000 };

			nanosleep(&ts, NULL);
		}
		close(fd);
	}
	if (!quiet)
		printf("%s unmounted\n", src);
	free(src);
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

static int do_umount(bool json, bool force, const char *mnt_arg)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(GDBusConnection) c = NULL;
	g_autoptr(O2dVolume) vol = NULL;
	char mnt[PATH_MAX];
	GVariantBuilder ob;
	bool absent;

	if (!realpath(mnt_arg, mnt))
		return fail("umount", "%s: %s", mnt_arg, strerror(errno));
	c = connect_daemon(&absent, &err);
	if (!c)
		return umount_direct(mnt, force); /* no server: a foreground daemon's, if any */
	g_autofree char *path = o2d_volume_path(mnt);

	vol = volume_proxy(c, path, NULL);
	g_autofree char *dev = vol ? o2d_volume_dup_device(vol) : NULL;

	if (!dev)
		return umount_direct(mnt, force); /* not the server's: a foreground daemon's */
	g_variant_builder_init(&ob, G_VARIANT_TYPE_VARDICT);
	if (force)
		g_variant_builder_add(&ob, "{sv}", "force", g_variant_new_boolean(TRUE));
	if (!o2d_volume_call_unmount_sync(vol, g_variant_builder_end(&ob), NULL, &err))
		return fail("umount", "%s", message_of(err));
	g_autofree char *msg = g_strdup_printf("%s unmounted cleanly", dev);

	return print_result(json, NULL, mnt, msg);
}

/* A string property as the listing shows it: one the daemon did not send is empty. */
static const char *or_empty(const char *s)
{
	return s ? s : "";
}

/* Compare volumes (O2dVolume **) by mount point, for a stable listing. */
static int by_mountpoint(gconstpointer a, gconstpointer b)
{
	return g_strcmp0(o2d_volume_get_mount_point(*(O2dVolume *const *)a),
			 o2d_volume_get_mount_point(*(O2dVolume *const *)b));
}

/*
 * The daemon's volumes, as proxies with their properties (from one
 * GetManagedObjects, through the generated object manager client),
 * sorted by mount point: g_ptr_array_unref it.  NULL with *err set.
 */
static GPtrArray *list_volumes(GDBusConnection *c, GError **err)
{
	g_autoptr(GDBusObjectManager) om = o2d_object_manager_client_new_sync(
		c, G_DBUS_OBJECT_MANAGER_CLIENT_FLAGS_NONE, NULL, O2D_ROOT_PATH, NULL, err);
	GPtrArray *vols;
	GList *objs;

	if (!om)
		return NULL;
	vols = g_ptr_array_new_with_free_func(g_object_unref);
	objs = g_dbus_object_manager_get_objects(om);
	for (GList *l = objs; l; l = l->next) {
		O2dVolume *vol = o2d_object_get_volume(O2D_OBJECT(l->data));

		if (vol) {
			wait_for_answers(vol);
			g_ptr_array_add(vols, vol);
		}
	}
	g_list_free_full(objs, g_object_unref);
	g_ptr_array_sort(vols, by_mountpoint);
	return vols;
}

static int do_mounts(bool json)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(GPtrArray) vols = NULL;
	g_autoptr(GDBusConnection) c = NULL;
	struct json_writer j;
	bool absent;

	c = connect_daemon(&absent, &err);
	if (c) {
		vols = list_volumes(c, &err);
		if (!vols)
			return fail("mounts", "ocfs2d: %s", message_of(err));
	} else if (!absent) {
		return fail("mounts", "cannot reach ocfs2d at %s: %s", control_path(), err->message);
	}
	if (json) {
		json_init(&j, stdout);
		json_array_begin(&j, NULL);
	}
	for (guint i = 0; vols && i < vols->len; i++) {
		O2dVolume *p = vols->pdata[i];
		const char *dev = or_empty(o2d_volume_get_device(p));
		const char *mnt = or_empty(o2d_volume_get_mount_point(p));
		const char *state = or_empty(o2d_volume_get_state(p));
		const char *uuid = or_empty(o2d_volume_get_uuid(p));
		const char *label = or_empty(o2d_volume_get_label(p));
		gboolean ro = o2d_volume_get_read_only(p);
		guint32 slot = o2d_volume_get_slot(p);
		const char *cluster = or_empty(o2d_volume_get_cluster_name(p));
		guint32 node = o2d_volume_get_node_id(p);

		if (json) {
			json_object_begin(&j, NULL);
			json_string(&j, "device", dev);
			json_string(&j, "mountpoint", mnt);
			json_string(&j, "mode", ro ? "ro" : "rw");
			json_string(&j, "state", state);
			json_string(&j, "uuid", uuid);
			json_string(&j, "label", label);
			json_uint(&j, "slot", slot);
			json_string(&j, "cluster", cluster);
			json_uint(&j, "node", node);
			json_object_end(&j);
		} else {
			g_autofree char *where =
				cluster[0] ? g_strdup_printf(", cluster %s, node %u, slot %u", cluster,
							     node, slot)
					   : g_strdup("");

			printf("%s on %s (%s%s%s%s)\n", dev, mnt, ro ? "ro" : "rw",
			       strcmp(state, "mounted") ? ", " : "",
			       strcmp(state, "mounted") ? state : "", where);
		}
	}
	if (json) {
		json_array_end(&j);
		json_finish(&j);
	} else if (!c) {
		printf("ocfs2d is not running (no control socket at %s)\n", control_path());
	}
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

int ctl_daemon_reflink(const char *image, const char *src, const char *dst, uint64_t *ret_ino,
		       char *msg, size_t msglen)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(GDBusConnection) c = NULL;
	g_autoptr(GPtrArray) vols = NULL;
	g_autofree char *abs = realpath(image, NULL);
	O2dVolume *vol = NULL;
	guint64 ino;
	bool absent;

	msg[0] = '\0';
	if (!abs)
		return 1; /* the offline path reports it */
	c = connect_daemon(&absent, &err);
	if (!c)
		return 1; /* no daemon: nothing of it is mounted */
	vols = list_volumes(c, &err);
	for (guint i = 0; vols && i < vols->len && !vol; i++)
		if (!g_strcmp0(o2d_volume_get_device(vols->pdata[i]), abs))
			vol = vols->pdata[i];
	if (!vol)
		return 1; /* the daemon does not serve this image */
	if (!g_utf8_validate(src, -1, NULL) || !g_utf8_validate(dst, -1, NULL)) {
		snprintf(msg, msglen, "paths must be UTF-8 to travel over D-Bus");
		return -EINVAL;
	}
	if (!o2d_volume_call_reflink_sync(vol, src, dst,
					  g_variant_new_array(G_VARIANT_TYPE("{sv}"), NULL, 0), &ino,
					  NULL, &err)) {
		int e = o2d_error_to_errno(err);

		snprintf(msg, msglen, "%s", message_of(err));
		return -e;
	}
	*ret_ino = ino;
	return 0;
}

static void print_cluster_state(GVariant *st, const char *mnt, bool json)
{
	const char *group = "";
	g_autoptr(GVariant) members = g_variant_lookup_value(st, "members", G_VARIANT_TYPE("a(uus)"));
	g_autoptr(GVariant) slots = g_variant_lookup_value(st, "slots", G_VARIANT_TYPE("a(uu)"));
	g_autoptr(GVariant) locks = g_variant_lookup_value(st, "locks", G_VARIANT_TYPE("a{st}"));
	GVariantIter it;
	guint32 a, b;
	const char *str;
	guint64 n;
	struct json_writer j;

	g_variant_lookup(st, "group", "&s", &group);
	if (json) {
		json_init(&j, stdout);
		json_object_begin(&j, NULL);
		json_string(&j, "mountpoint", mnt);
		json_string(&j, "group", group);
		json_array_begin(&j, "members");
		if (members) {
			g_variant_iter_init(&it, members);
			while (g_variant_iter_next(&it, "(uu&s)", &a, &b, &str)) {
				json_object_begin(&j, NULL);
				json_uint(&j, "node", a);
				json_uint(&j, "pid", b);
				json_string(&j, "state", str);
				json_object_end(&j);
			}
		}
		json_array_end(&j);
		json_array_begin(&j, "slots");
		if (slots) {
			g_variant_iter_init(&it, slots);
			while (g_variant_iter_next(&it, "(uu)", &a, &b)) {
				json_object_begin(&j, NULL);
				json_uint(&j, "slot", a);
				json_uint(&j, "node", b);
				json_object_end(&j);
			}
		}
		json_array_end(&j);
		json_object_begin(&j, "locks");
		if (locks) {
			g_variant_iter_init(&it, locks);
			while (g_variant_iter_next(&it, "{&st}", &str, &n))
				json_uint(&j, str, n);
		}
		json_object_end(&j);
		json_object_end(&j);
		json_finish(&j);
		return;
	}
	printf("Lock group %s\n", group);
	printf("%-8s %-8s %s\n", "Node#", "Pid", "State");
	if (members) {
		g_variant_iter_init(&it, members);
		while (g_variant_iter_next(&it, "(uu&s)", &a, &b, &str))
			printf("%-8u %-8u %s\n", a, b, str);
	}
	printf("Slots in use (the slot map on disk now):\n%5s   %s\n", "Slot#", "Node#");
	if (slots) {
		g_variant_iter_init(&it, slots);
		while (g_variant_iter_next(&it, "(uu)", &a, &b))
			printf("%5u   %u\n", a, b);
	}
	if (locks) {
		printf("Lock cache:");
		g_variant_iter_init(&it, locks);
		while (g_variant_iter_next(&it, "{&st}", &str, &n))
			printf(" %s %" G_GUINT64_FORMAT, str, n);
		printf("\n");
	}
}

/*
 * The proxy of the volume a running ocfs2d serves on mountpoint (it keeps
 * its connection), with *ret_abs the resolved mount point; or NULL with
 * *ret_status, the failure already reported for verb.
 */
static O2dVolume *served_volume(const char *verb, const char *mountpoint, char **ret_abs,
				int *ret_status)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(GDBusConnection) c = NULL;
	g_autoptr(GPtrArray) vols = NULL;
	g_autofree char *abs = realpath(mountpoint, NULL);
	bool absent;

	if (!abs) {
		*ret_status = fail(verb, "%s: %s", mountpoint, g_strerror(errno));
		return NULL;
	}
	c = connect_daemon(&absent, &err);
	if (!c) {
		*ret_status = fail(verb, "%s: ocfs2d is not running (%s)", abs,
				   absent ? "no control socket" : err->message);
		return NULL;
	}
	vols = list_volumes(c, &err);
	for (guint i = 0; vols && i < vols->len; i++)
		if (!g_strcmp0(o2d_volume_get_mount_point(vols->pdata[i]), abs)) {
			*ret_abs = g_steal_pointer(&abs);
			return g_object_ref(vols->pdata[i]);
		}
	*ret_status = fail(verb, "%s: ocfs2d serves no volume mounted there", abs);
	return NULL;
}

int ctl_daemon_cluster_state(const char *mountpoint, bool json)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *abs = NULL;
	g_autoptr(GVariant) st = NULL;
	int status;
	g_autoptr(O2dVolume) vol = served_volume("slots", mountpoint, &abs, &status);

	if (!vol)
		return status;
	if (!o2d_volume_call_cluster_state_sync(vol, g_variant_new_array(G_VARIANT_TYPE("{sv}"), NULL, 0),
						&st, NULL, &err))
		return fail("slots", "%s: %s", abs, message_of(err));
	print_cluster_state(st, abs, json);
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

int ctl_daemon_quota(const char *mountpoint, unsigned type, struct o2_dquot **ret, size_t *ret_n,
		     uint32_t *bgrace, uint32_t *igrace)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *abs = NULL;
	g_autoptr(GVariant) info = NULL, ids = NULL;
	GVariantBuilder o;
	GVariantIter it;
	struct o2_dquot d = { 0 };
	guint64 v[8];
	size_t n = 0;
	int status;
	g_autoptr(O2dVolume) vol = served_volume("quota", mountpoint, &abs, &status);

	if (!vol)
		return status;
	g_variant_builder_init(&o, G_VARIANT_TYPE("a{sv}"));
	g_variant_builder_add(&o, "{sv}", "type", g_variant_new_string(type ? "group" : "user"));
	if (!o2d_volume_call_quota_sync(vol, g_variant_builder_end(&o), &info, &ids, NULL, &err))
		return fail("quota", "%s", message_of(err));
	*bgrace = *igrace = 0;
	g_variant_lookup(info, "block_grace", "u", bgrace);
	g_variant_lookup(info, "inode_grace", "u", igrace);
	*ret = g_new0(struct o2_dquot, g_variant_n_children(ids) + 1);
	g_variant_iter_init(&it, ids);
	while (g_variant_iter_next(&it, "(utttttttt)", &d.id, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
				   &v[6], &v[7])) {
		d.space = v[0], d.inodes = v[1], d.bsoft = v[2], d.bhard = v[3];
		d.isoft = v[4], d.ihard = v[5], d.btime = v[6], d.itime = v[7];
		(*ret)[n++] = d;
	}
	*ret_n = n;
	return CTL_EXIT_OK;
}

int ctl_daemon_set_quota(const char *mountpoint, unsigned type, const uint32_t *id,
			 const struct o2_dquot *lim, const uint32_t *grace)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *abs = NULL;
	GVariantBuilder o;
	int status;
	g_autoptr(O2dVolume) vol = served_volume("quota", mountpoint, &abs, &status);

	if (!vol)
		return status;
	g_variant_builder_init(&o, G_VARIANT_TYPE("a{sv}"));
	g_variant_builder_add(&o, "{sv}", "type", g_variant_new_string(type ? "group" : "user"));
	if (id) {
		g_variant_builder_add(&o, "{sv}", "id", g_variant_new_uint32(*id));
		g_variant_builder_add(&o, "{sv}", "block_soft", g_variant_new_uint64(lim->bsoft));
		g_variant_builder_add(&o, "{sv}", "block_hard", g_variant_new_uint64(lim->bhard));
		g_variant_builder_add(&o, "{sv}", "inode_soft", g_variant_new_uint64(lim->isoft));
		g_variant_builder_add(&o, "{sv}", "inode_hard", g_variant_new_uint64(lim->ihard));
	}
	if (grace) {
		g_variant_builder_add(&o, "{sv}", "block_grace", g_variant_new_uint32(grace[0]));
		g_variant_builder_add(&o, "{sv}", "inode_grace", g_variant_new_uint32(grace[1]));
	}
	if (!o2d_volume_call_set_quota_sync(vol, g_variant_builder_end(&o), NULL, &err))
		return fail("quota", "%s", message_of(err));
	return CTL_EXIT_OK;
}

/* Volume.Statistics: the journal's and the device's counters of a mounted volume. */
static int do_stats(bool json, const char *mountpoint)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *abs = NULL;
	g_autoptr(GVariant) st = NULL;
	struct json_writer j;
	GVariantIter it;
	const char *key;
	guint64 n;
	int status;
	g_autoptr(O2dVolume) vol = served_volume("stats", mountpoint, &abs, &status);

	if (!vol)
		return status;
	if (!o2d_volume_call_statistics_sync(vol, g_variant_new_array(G_VARIANT_TYPE("{sv}"), NULL, 0),
					     &st, NULL, &err))
		return fail("stats", "%s: %s", abs, message_of(err));
	if (json) {
		json_init(&j, stdout);
		json_object_begin(&j, NULL);
		json_string(&j, "mountpoint", abs);
		g_variant_iter_init(&it, st);
		while (g_variant_iter_next(&it, "{&st}", &key, &n))
			json_uint(&j, key, n);
		json_object_end(&j);
		json_finish(&j);
	} else {
		printf("%s\n", abs);
		g_variant_iter_init(&it, st);
		while (g_variant_iter_next(&it, "{&st}", &key, &n))
			printf("  %-20s %" G_GUINT64_FORMAT "\n", key, n);
	}
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

/* A number of the Status answer (t), or 0 if the daemon did not send it. */
static guint64 status_u64(GVariant *st, const char *key)
{
	guint64 n = 0;

	if (st)
		g_variant_lookup(st, key, "t", &n);
	return n;
}

static const char *status_str(GVariant *st, const char *key)
{
	const char *v = NULL;

	if (st)
		g_variant_lookup(st, key, "&s", &v);
	return v ? v : "";
}

static void status_json(struct json_writer *j, O2dVolume *p, GVariant *st, const char *why)
{
	guint64 total = status_u64(st, "total_bytes"), free_b = status_u64(st, "free_bytes");

	json_object_begin(j, NULL);
	json_string(j, "device", or_empty(o2d_volume_get_device(p)));
	json_string(j, "mountpoint", or_empty(o2d_volume_get_mount_point(p)));
	json_string(j, "state", or_empty(o2d_volume_get_state(p)));
	json_string(j, "mode", o2d_volume_get_read_only(p) ? "ro" : "rw");
	json_string(j, "label", or_empty(o2d_volume_get_label(p)));
	json_string(j, "uuid", or_empty(o2d_volume_get_uuid(p)));
	json_string(j, "stack", or_empty(o2d_volume_get_stack(p)));
	json_string(j, "cluster", or_empty(o2d_volume_get_cluster_name(p)));
	json_uint(j, "node", o2d_volume_get_node_id(p));
	json_uint(j, "slot", o2d_volume_get_slot(p));
	json_uint(j, "max_slots", o2d_volume_get_max_slots(p));
	json_uint(j, "block_size", o2d_volume_get_block_size(p));
	json_uint(j, "cluster_size", o2d_volume_get_cluster_size(p));
	json_string(j, "options", or_empty(o2d_volume_get_options(p)));
	if (st) {
		json_object_begin(j, "journal");
		json_uint(j, "size", status_u64(st, "journal_size"));
		json_string(j, "state", status_str(st, "journal"));
		json_object_end(j);
		json_object_begin(j, "space");
		json_uint(j, "total_bytes", total);
		json_uint(j, "free_bytes", free_b);
		json_uint(j, "used_bytes", total - MIN(free_b, total));
		json_object_end(j);
		json_object_begin(j, "inodes");
		json_uint(j, "total", status_u64(st, "total_inodes"));
		json_uint(j, "free", status_u64(st, "free_inodes"));
		json_object_end(j);
		json_string(j, "readonly_reason", status_str(st, "readonly_reason"));
	} else {
		json_null(j, "journal");
		json_null(j, "space");
		json_null(j, "inodes");
		json_string(j, "error", why);
	}
	json_object_end(j);
}

/* One volume as `systemctl status` shows a unit: a head line, then labelled lines. */
static void status_human(O2dVolume *p, GVariant *st, const char *why)
{
	const char *state = or_empty(o2d_volume_get_state(p));
	const char *stack = or_empty(o2d_volume_get_stack(p));
	const char *cluster = or_empty(o2d_volume_get_cluster_name(p));
	const char *label = or_empty(o2d_volume_get_label(p));
	bool healthy = !strcmp(state, "mounted");

	printf("%s %s on %s\n", healthy ? "*" : "x", or_empty(o2d_volume_get_device(p)),
	       or_empty(o2d_volume_get_mount_point(p)));
	printf("    State: %s (%s)\n", state, o2d_volume_get_read_only(p) ? "read-only" : "read-write");
	printf("   Volume: %s%s%s, UUID %s\n", *label ? "label \"" : "no label", label,
	       *label ? "\"" : "", or_empty(o2d_volume_get_uuid(p)));
	if (*cluster)
		printf("  Cluster: %s stack, cluster %s, node %u, slot %u of %u\n", stack, cluster,
		       o2d_volume_get_node_id(p), o2d_volume_get_slot(p),
		       o2d_volume_get_max_slots(p));
	else
		printf("  Cluster: none (%s stack%s), slot %u of %u\n", stack,
		       strcmp(stack, "local") ? ", mounted with nocluster" : "",
		       o2d_volume_get_slot(p), o2d_volume_get_max_slots(p));
	if (st) {
		guint64 total = status_u64(st, "total_bytes"), free_b = status_u64(st, "free_bytes");
		guint64 itotal = status_u64(st, "total_inodes"), ifree = status_u64(st, "free_inodes");
		char jsize[32], fsize[32], tsize[32];
		const char *jstate = status_str(st, "journal");
		const char *reason = status_str(st, "readonly_reason");

		progress_size(jsize, sizeof(jsize), status_u64(st, "journal_size"));
		progress_size(fsize, sizeof(fsize), free_b);
		progress_size(tsize, sizeof(tsize), total);

		printf("  Journal: %s, %s\n", jsize,
		       !strcmp(jstate, "clean") ? "clean (nothing committed waits to be written home)"
		       : !strcmp(jstate, "pending") ? "committed transactions not yet written home"
						    : jstate);
		printf("    Space: %s free of %s (%u%% used)\n", fsize, tsize,
		       total ? (unsigned)((total - MIN(free_b, total)) * 100 / total) : 0);
		printf("   Inodes: %" G_GUINT64_FORMAT " free of %" G_GUINT64_FORMAT "\n", ifree,
		       itotal);
		if (*reason)
			printf("    Error: turned read-only: %s\n", reason);
	} else {
		printf("   Status: unavailable (%s)\n", why);
	}
	printf("  Options: %s\n", or_empty(o2d_volume_get_options(p)));
}

/*
 * Every volume the daemon serves, with its properties and what Status
 * says of it now.  No daemon is no error: nothing is served.
 */
static int do_status(bool json)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(GPtrArray) vols = NULL;
	g_autoptr(GDBusConnection) c = NULL;
	struct json_writer j;
	bool absent;

	c = connect_daemon(&absent, &err);
	if (c) {
		vols = list_volumes(c, &err);
		if (!vols)
			return fail("status", "ocfs2d: %s", message_of(err));
	} else if (!absent) {
		return fail("status", "cannot reach ocfs2d at %s: %s", control_path(), err->message);
	}
	if (json) {
		json_init(&j, stdout);
		json_array_begin(&j, NULL);
	} else if (!c) {
		printf("ocfs2d is not running (no control socket at %s): no volume is served\n",
		       control_path());
	} else if (!vols->len) {
		printf("ocfs2d is running and serves no volume\n");
	}
	for (guint i = 0; vols && i < vols->len; i++) {
		O2dVolume *p = vols->pdata[i];
		g_autoptr(GVariant) st = NULL;
		g_autoptr(GError) e = NULL;

		/* a volume unmounted meanwhile answers NotMounted: shown without */
		if (!o2d_volume_call_status_sync(p, g_variant_new_array(G_VARIANT_TYPE("{sv}"), NULL, 0),
						 &st, NULL, &e))
			message_of(e);
		if (json) {
			status_json(&j, p, st, e ? e->message : "");
		} else {
			if (i)
				printf("\n");
			status_human(p, st, e ? e->message : "");
		}
	}
	if (json) {
		json_array_end(&j);
		json_finish(&j);
	}
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

/* ---- jobs: format and check through the daemon ---- */

/* What a job client waits for: its path once known, what came for it. */
struct job_watch {
	GMainLoop *loop;
	char *path;		/* the job, once the call answered */
	GHashTable *done;	/* path -> "1message" or "0message": Completed seen */
	const char *verb;
	struct progress prog;	/* the bar, or plain lines */
	bool lost;		/* the connection closed first */
	O2dJob *job;		/* for Cancel on ^C */
};

static void show_progress(struct job_watch *w, double p, guint64 end_us)
{
	gint64 left = end_us ? ((gint64)end_us - g_get_real_time()) / G_USEC_PER_SEC : -1;

	progress_show(&w->prog, p, left < 0 ? -1 : (long)left, NULL);
}

static void on_job_signal(GDBusConnection *c, const char *sender, const char *path,
			  const char *iface, const char *member, GVariant *params, gpointer data)
{
	struct job_watch *w = data;

	if (!strcmp(member, "Completed")) {
		gboolean ok;
		const char *msg;

		g_variant_get(params, "(b&s)", &ok, &msg);
		g_hash_table_insert(w->done, g_strdup(path), g_strdup_printf("%d%s", ok, msg));
		if (w->path && !strcmp(path, w->path))
			g_main_loop_quit(w->loop);
		return;
	}
	/* PropertiesChanged of a Job */
	const char *which;
	g_autoptr(GVariant) changed = NULL;
	g_autoptr(GVariant) inval = NULL;
	double p;
	guint64 end = 0;

	g_variant_get(params, "(&s@a{sv}@as)", &which, &changed, &inval);
	if (strcmp(which, O2D_JOB_IFACE) || !w->path || strcmp(path, w->path))
		return;
	g_variant_lookup(changed, "ExpectedEndTime", "t", &end);
	if (g_variant_lookup(changed, "Progress", "d", &p))
		show_progress(w, p, end);
}

/* The daemon went away (killed, crashed) before the job completed. */
static void on_closed(GDBusConnection *c, gboolean remote, GError *err, gpointer data)
{
	struct job_watch *w = data;

	w->lost = true;
	g_main_loop_quit(w->loop);
}

/* ^C: ask the daemon to cancel the job; it then completes, cancelled. */
static gboolean on_interrupt(gpointer data)
{
	struct job_watch *w = data;
	g_autoptr(GError) err = NULL;

	if (w->job && !o2d_job_call_cancel_sync(w->job, g_variant_new_array(G_VARIANT_TYPE("{sv}"),
									   NULL, 0),
						 NULL, &err)) {
		progress_end(&w->prog);
		fprintf(stderr, "%s: %s: %s\n", prog, w->verb, message_of(err));
	}
	return G_SOURCE_CONTINUE;
}

int ctl_daemon_job(const char *verb, const char *device, GVariant *options, bool json, bool silent)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(GDBusConnection) c = NULL;
	g_autoptr(O2dManager) manager = NULL;
	g_autoptr(GVariant) opts = g_variant_ref_sink(
		options ? options : g_variant_new_array(G_VARIANT_TYPE("{sv}"), NULL, 0));
	g_autofree char *abs = g_canonicalize_filename(device, NULL);
	g_autofree char *daemon = find_daemon();
	struct job_watch w = { .verb = verb };
	guint sub_done, sub_props, sigint;
	bool absent, ok;
	const char *msg = "";
	char *outcome;

	if (!g_utf8_validate(abs, -1, NULL))
		return fail(verb, "the device's path must be UTF-8 to travel over D-Bus");
	c = connect_daemon(&absent, &err);
	if (!c && absent) {
		char *args[] = { daemon, "--server", "--exit-when-idle", NULL };
		int st = run_daemon(args);

		if (st != 0)
			return fail(verb, "could not start ocfs2d (%s exited with %d; see ocfs2d.log "
				    "next to %s)", args[0], st, control_path());
		g_clear_error(&err);
		c = connect_daemon(&absent, &err);
	}
	if (!c)
		return fail(verb, "cannot reach ocfs2d at %s: %s", control_path(), err->message);
	progress_init(&w.prog, !strcmp(verb, "format") ? "Formatting" : "Checking", verb, true,
		      json || silent);
	w.loop = g_main_loop_new(NULL, FALSE);
	w.done = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	/* before the call: a short job may be over before its answer is read */
	sub_done = g_dbus_connection_signal_subscribe(c, NULL, O2D_JOB_IFACE, "Completed", NULL,
						      NULL, G_DBUS_SIGNAL_FLAGS_NONE, on_job_signal,
						      &w, NULL);
	sub_props = g_dbus_connection_signal_subscribe(c, NULL, "org.freedesktop.DBus.Properties",
						       "PropertiesChanged", NULL, O2D_JOB_IFACE,
						       G_DBUS_SIGNAL_FLAGS_NONE, on_job_signal, &w,
						       NULL);
	manager = o2d_manager_proxy_new_sync(c, PROXY_FLAGS | G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES,
					     NULL, O2D_MANAGER_PATH, NULL, &err);
	if (manager) {
		wait_for_answers(manager);
		ok = !strcmp(verb, "format")
			     ? o2d_manager_call_format_sync(manager, abs, opts, &w.path, NULL, &err)
			     : o2d_manager_call_check_sync(manager, abs, opts, &w.path, NULL, &err);
	} else {
		ok = false;
	}
	if (!ok) {
		g_dbus_connection_signal_unsubscribe(c, sub_done);
		g_dbus_connection_signal_unsubscribe(c, sub_props);
		g_main_loop_unref(w.loop);
		g_hash_table_unref(w.done);
		return fail(verb, "%s", message_of(err));
	}
	w.job = o2d_job_proxy_new_sync(c, PROXY_FLAGS | G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES, NULL,
				       w.path, NULL, NULL);
	sigint = g_unix_signal_add(SIGINT, on_interrupt, &w);
	g_signal_connect(c, "closed", G_CALLBACK(on_closed), &w);
	if (!g_hash_table_contains(w.done, w.path))
		g_main_loop_run(w.loop);
	g_source_remove(sigint);
	outcome = g_hash_table_lookup(w.done, w.path);
	ok = outcome && outcome[0] == '1';
	msg = outcome ? outcome + 1
		      : "ocfs2d went away before the job completed (see ocfs2ctl log)";
	if (ok)
		show_progress(&w, 1, 0);
	progress_end(&w.prog);
	if (json) {
		struct json_writer j;

		json_init(&j, stdout);
		json_object_begin(&j, NULL);
		json_string(&j, "device", abs);
		json_string(&j, "operation", verb);
		json_string(&j, "job", w.path);
		json_bool(&j, "success", ok);
		json_string(&j, "message", msg);
		json_object_end(&j);
		json_finish(&j);
	} else if (ok && !silent) {
		printf("%s\n", msg);
	}
	if (!ok)
		fail(verb, "%s", msg);
	g_dbus_connection_signal_unsubscribe(c, sub_done);
	g_dbus_connection_signal_unsubscribe(c, sub_props);
	g_clear_object(&w.job);
	g_free(w.path);
	g_main_loop_unref(w.loop);
	g_hash_table_unref(w.done);
	if (fflush(stdout) != 0)
		return CTL_EXIT_FAIL;
	return ok ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

/*
 * The names a volume goes by in the log for what (a mount point or a
 * device): what itself, resolved; the device the daemon serves on it now;
 * and every device the log says was mounted on it or mount point it was
 * mounted on (lines "DEV: mounted on MNT (...)").
 */
static GPtrArray *log_names(const char *what, char **lines)
{
	GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
	char *real = realpath(what, NULL);
	const char *me = real ? real : what;
	g_autoptr(GDBusConnection) c = NULL;
	g_autoptr(GError) err = NULL;
	bool absent;

	g_ptr_array_add(names, g_strdup(me));
	c = connect_daemon(&absent, &err); /* no daemon: the log alone says */
	if (c) {
		g_autofree char *path = o2d_volume_path(me);
		g_autoptr(O2dVolume) vol = volume_proxy(c, path, NULL);
		char *dev = vol ? o2d_volume_dup_device(vol) : NULL;

		if (dev)
			g_ptr_array_add(names, dev);
	}
	for (char **l = lines; *l; l++) {
		/* "... ocfs2d[PID]: LEVEL: DEV: mounted on MNT (" */
		const char *on = strstr(*l, ": mounted on ");
		const char *paren = on ? strstr(on, " (") : NULL;
		const char *lvl = on ? g_strstr_len(*l, on - *l, "]: ") : NULL;
		const char *dev = lvl ? strstr(lvl + 3, ": ") : NULL;

		if (!paren || !dev || dev >= on)
			continue;
		dev += 2;
		g_autofree char *d = g_strndup(dev, on - dev);
		g_autofree char *m = g_strndup(on + 13, paren - (on + 13));

		if (!strcmp(m, me))
			g_ptr_array_add(names, g_steal_pointer(&d));
		else if (!strcmp(d, me))
			g_ptr_array_add(names, g_steal_pointer(&m));
	}
	free(real);
	return names;
}

/* Whether a log line is about one of names: "NAME:" or "NAME " in it, or at its end. */
static bool line_names(const char *line, GPtrArray *names)
{
	for (guint i = 0; i < names->len; i++) {
		const char *n = names->pdata[i];
		size_t len = strlen(n);

		for (const char *p = strstr(line, n); p; p = strstr(p + 1, n))
			if (p[len] == ':' || p[len] == ' ' || p[len] == '\0' || p[len] == ',')
				return true;
	}
	return false;
}

static int do_log(const char *what, long last)
{
	char log[PATH_MAX];
	g_autofree char *text = NULL;
	g_autoptr(GError) err = NULL;
	g_autoptr(GPtrArray) names = NULL;
	g_auto(GStrv) lines = NULL;
	g_autoptr(GPtrArray) shown = g_ptr_array_new();

	log_path(log, sizeof(log));
	if (!g_file_get_contents(log, &text, NULL, &err))
		return fail("log", "cannot read %s: %s (the log of an ocfs2d that ocfs2ctl or "
			    "mount.fuse.ocfs2 started; see also syslog or journalctl -t ocfs2d)",
			    log, err->message);
	lines = g_strsplit(text, "\n", -1);
	if (what)
		names = log_names(what, lines);
	for (char **l = lines; *l; l++)
		if (**l && (!names || line_names(*l, names)))
			g_ptr_array_add(shown, *l);
	if (what && shown->len == 0)
		return fail("log", "%s: nothing in %s about it", what, log);
	for (guint i = last > 0 && shown->len > (guint)last ? shown->len - (guint)last : 0;
	     i < shown->len; i++)
		printf("%s\n", (char *)shown->pdata[i]);
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

void ctl_mount_speaker(const char *name, bool results)
{
	prog = name;
	quiet = !results;
}

int ctl_mount_volume(const char *opts, const char *device, const char *mnt)
{
	return do_mount(false, opts, false, device, mnt);
}

int ctl_umount_volume(const char *mnt, bool force)
{
	return do_umount(false, force, mnt);
}

int ctl_mount_main(int argc, char **argv, bool json)
{
	const char *verb = argv[0];
	const char *opts = "";
	long last = 0;
	bool foreground = false, force = false;
	char *pos[3];
	int npos = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--json")) {
			json = true;
		} else if (!strcmp(a, "-o") && !strcmp(verb, "mount")) {
			if (++i >= argc)
				return usage(verb, "[-o OPTIONS] [--foreground] DEVICE MOUNTPOINT");
			opts = argv[i];
		} else if (!strncmp(a, "-o", 2) && a[2] && !strcmp(verb, "mount")) {
			opts = a + 2;
		} else if (!strcmp(a, "--foreground") && !strcmp(verb, "mount")) {
			foreground = true;
		} else if ((!strcmp(a, "-f") || !strcmp(a, "--force")) && !strcmp(verb, "umount")) {
			force = true;
		} else if (!strcmp(a, "-n") && !strcmp(verb, "log")) {
			char *end;

			if (++i >= argc)
				return usage(verb, "[-n LINES] [MOUNTPOINT|DEVICE]");
			last = strtol(argv[i], &end, 10);
			if (!*argv[i] || *end || last <= 0)
				return fail(verb, "-n wants a count of lines, not \"%s\"", argv[i]);
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "ocfs2ctl: %s: unknown option '%s' (try --help)\n", verb, a);
			return CTL_EXIT_USAGE;
		} else if (npos < 3) {
			pos[npos++] = argv[i];
		} else {
			npos++;
		}
	}
	if (!strcmp(verb, "mount")) {
		if (npos != 2)
			return usage(verb, "[-o OPTIONS] [--foreground] DEVICE MOUNTPOINT");
		if (geteuid() != 0)
			return fail(verb, "must be run as root");
		return do_mount(json, opts, foreground, pos[0], pos[1]);
	}
	if (!strcmp(verb, "umount")) {
		if (npos != 1)
			return usage(verb, "[-f] MOUNTPOINT");
		if (geteuid() != 0)
			return fail(verb, "must be run as root");
		return do_umount(json, force, pos[0]);
	}
	if (!strcmp(verb, "stats")) {
		if (npos != 1)
			return usage(verb, "[--json] MOUNTPOINT");
		return do_stats(json, pos[0]);
	}
	if (!strcmp(verb, "log")) {
		if (npos > 1)
			return usage(verb, "[-n LINES] [MOUNTPOINT|DEVICE]");
		if (json)
			return fail(verb, "--json is not offered: the log is text");
		return do_log(npos ? pos[0] : NULL, last);
	}
	if (npos != 0)
		return usage(verb, "[--json]");
	if (!strcmp(verb, "status"))
		return do_status(json);
	return do_mounts(json);
}
