// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The local control channel: a Unix socket (root only) through which
 * `ocfs2ctl mount/umount/mounts` ask a running daemon to mount and unmount
 * volumes.  The D-Bus API will take its place.
 *
 * Protocol: one request line per connection, fields separated by tabs:
 *   MOUNT <device> <mountpoint> <options>
 *   UMOUNT <mountpoint> <force: 0|1>
 *   LIST
 *   REFLINK <device> <source> <destination>   (paths inside the volume)
 * The answer: for LIST, one "VOL <device> <mountpoint> <state>" line per
 * volume; then "OK <message>" or "ERR <errno> <message>".  Each
 * connection is served on a thread of its own (GThreadedSocketService):
 * mounting replays journals and unmounting waits for the volume to close,
 * none of which may run on the main loop.
 */

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>

#include "ocfs2d.h"

static GSocketService *service;
static char *socket_path;
static GMutex reg_lock;
static GCond reg_cond;
static GHashTable *volumes; /* mountpoint -> struct volume * */
static GMainLoop *idle_loop;
static gint busy; /* requests being served */

void control_exit_when_idle(GMainLoop *loop)
{
	idle_loop = loop;
}

static gboolean exit_if_idle(gpointer arg)
{
	g_mutex_lock(&reg_lock);
	bool idle = g_hash_table_size(volumes) == 0 && !g_atomic_int_get(&busy);
	g_mutex_unlock(&reg_lock);
	if (idle && idle_loop) {
		g_message("no volume mounted: exiting");
		g_main_loop_quit(idle_loop);
	}
	return G_SOURCE_REMOVE;
}

static gboolean free_volume_idle(gpointer arg)
{
	volume_unref(arg);
	return exit_if_idle(NULL);
}

/* On the volume's FUSE thread, once it is closed. */
static void volume_gone(struct volume *v, void *arg)
{
	g_mutex_lock(&reg_lock);
	g_hash_table_remove(volumes, v->mountpoint);
	g_cond_broadcast(&reg_cond);
	g_mutex_unlock(&reg_lock);
	g_idle_add(free_volume_idle, v);
}

unsigned control_volume_count(void)
{
	g_mutex_lock(&reg_lock);
	unsigned n = volumes ? g_hash_table_size(volumes) : 0;
	g_mutex_unlock(&reg_lock);
	return n;
}

static void reply(GOutputStream *out, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void reply(GOutputStream *out, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	g_autofree char *s = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_output_stream_write_all(out, s, strlen(s), NULL, NULL, NULL);
}

static int errno_of(const GError *e)
{
	static const struct {
		int code, err;
	} map[] = {
		{ G_IO_ERROR_NOT_FOUND, ENOENT },	 { G_IO_ERROR_EXISTS, EEXIST },
		{ G_IO_ERROR_BUSY, EBUSY },		 { G_IO_ERROR_PERMISSION_DENIED, EACCES },
		{ G_IO_ERROR_INVALID_ARGUMENT, EINVAL }, { G_IO_ERROR_NOT_DIRECTORY, ENOTDIR },
		{ G_IO_ERROR_NOT_SUPPORTED, EOPNOTSUPP }, { G_IO_ERROR_READ_ONLY, EROFS },
	};

	for (size_t i = 0; i < G_N_ELEMENTS(map); i++)
		if (e->domain == G_IO_ERROR && e->code == map[i].code)
			return map[i].err;
	return EIO;
}

static void do_mount(GOutputStream *out, char **f, unsigned n)
{
	struct mount_opts o;
	g_autoptr(GError) err = NULL;
	struct volume *v;

	if (n != 4) {
		reply(out, "ERR\t%d\tMOUNT wants a device, a mount point and options\n", EINVAL);
		return;
	}
	mount_opts_default(&o);
	if (!mount_opts_parse(f[3], &o, &err)) {
		reply(out, "ERR\t%d\t%s\n", EINVAL, err->message);
		return;
	}
	g_autofree char *abs = g_canonicalize_filename(f[2], NULL);

	g_mutex_lock(&reg_lock);
	if (g_hash_table_contains(volumes, abs)) {
		g_mutex_unlock(&reg_lock);
		reply(out, "ERR\t%d\t%s: a volume is mounted there already\n", EBUSY, abs);
		return;
	}
	g_mutex_unlock(&reg_lock);
	if (!volume_mount(f[1], f[2], &o, volume_gone, NULL, &v, &err)) {
		reply(out, "ERR\t%d\t%s\n", errno_of(err), err->message);
		return;
	}
	g_mutex_lock(&reg_lock);
	g_hash_table_insert(volumes, v->mountpoint, v);
	g_mutex_unlock(&reg_lock);
	reply(out, "OK\t%s mounted on %s\n", v->device, v->mountpoint);
}

static void do_umount(GOutputStream *out, char **f, unsigned n)
{
	g_autoptr(GError) err = NULL;
	struct volume *v;

	if (n != 3) {
		reply(out, "ERR\t%d\tUMOUNT wants a mount point and a force flag\n", EINVAL);
		return;
	}
	g_autofree char *abs = g_canonicalize_filename(f[1], NULL);
	char *real = realpath(abs, NULL);
	const char *key = abs;

	g_mutex_lock(&reg_lock);
	v = g_hash_table_lookup(volumes, key);
	if (!v && real)
		v = g_hash_table_lookup(volumes, key = real);
	if (v)
		volume_ref(v);
	g_mutex_unlock(&reg_lock);
	if (!v) {
		free(real);
		reply(out, "ERR\t%d\t%s: no volume of this daemon is mounted there\n", ENOENT, abs);
		return;
	}
	if (!volume_unmount(v, !strcmp(f[2], "1"), &err)) {
		volume_unref(v);
		free(real);
		reply(out, "ERR\t%d\t%s\n", errno_of(err), err->message);
		return;
	}
	int result = 0;
	g_autofree char *device = NULL;

	g_mutex_lock(&reg_lock);
	device = g_strdup(v->device);
	while (g_hash_table_lookup(volumes, key) == v)
		g_cond_wait(&reg_cond, &reg_lock);
	result = v->close_result;
	g_mutex_unlock(&reg_lock);
	volume_unref(v);
	free(real);
	if (result < 0)
		reply(out, "ERR\t%d\t%s: closing failed (%s); the journal is left for the next mount "
		      "to replay\n", -result, device, g_strerror(-result));
	else
		reply(out, "OK\t%s unmounted cleanly\n", device);
}

static void do_list(GOutputStream *out)
{
	GHashTableIter it;
	gpointer val;

	g_mutex_lock(&reg_lock);
	g_hash_table_iter_init(&it, volumes);
	while (g_hash_table_iter_next(&it, NULL, &val)) {
		struct volume *v = val;

		reply(out, "VOL\t%s\t%s\t%s\n", v->device, v->mountpoint, v->opts.ro ? "ro" : "rw");
	}
	g_mutex_unlock(&reg_lock);
	reply(out, "OK\t\n");
}

/* ENXIO: the device is not one this daemon serves (the caller may open it itself). */
static void do_reflink(GOutputStream *out, char **f, unsigned n)
{
	struct volume *v = NULL;
	GHashTableIter it;
	gpointer val;

	if (n != 4) {
		reply(out, "ERR\t%d\tREFLINK wants a device, a source and a destination\n", EINVAL);
		return;
	}
	g_autofree char *dev = realpath(f[1], NULL);

	g_mutex_lock(&reg_lock);
	g_hash_table_iter_init(&it, volumes);
	while (dev && !v && g_hash_table_iter_next(&it, NULL, &val))
		if (!strcmp(((struct volume *)val)->device, dev))
			v = volume_ref(val);
	g_mutex_unlock(&reg_lock);
	if (!v) {
		reply(out, "ERR\t%d\t%s: not mounted by this daemon\n", ENXIO, f[1]);
		return;
	}
	uint64_t ino = 0;
	g_autofree char *msg = NULL;
	int r = fuseops_reflink(v, f[2], f[3], &ino, &msg);

	volume_unref(v);
	if (r < 0)
		reply(out, "ERR\t%d\t%s\n", -r, msg ? msg : g_strerror(-r));
	else
		reply(out, "OK\t%llu\n", (unsigned long long)ino);
}

static bool peer_is_root(GSocketConnection *conn)
{
	GSocket *sock = g_socket_connection_get_socket(conn);
	g_autoptr(GCredentials) cred = g_socket_get_credentials(sock, NULL);

	return cred && g_credentials_get_unix_user(cred, NULL) == 0;
}

static gboolean on_run(GThreadedSocketService *svc, GSocketConnection *conn, GObject *src,
		       gpointer data)
{
	GInputStream *in = g_io_stream_get_input_stream(G_IO_STREAM(conn));
	GOutputStream *out = g_io_stream_get_output_stream(G_IO_STREAM(conn));
	g_autoptr(GDataInputStream) din = g_data_input_stream_new(in);
	gsize len = 0;
	g_autofree char *line = NULL;

	if (!peer_is_root(conn)) {
		reply(out, "ERR\t%d\tonly root may control ocfs2d\n", EPERM);
		return TRUE;
	}
	g_data_input_stream_set_newline_type(din, G_DATA_STREAM_NEWLINE_TYPE_LF);
	line = g_data_input_stream_read_line(din, &len, NULL, NULL);
	if (!line || len > 8192) {
		reply(out, "ERR\t%d\tno request (or one too long)\n", EINVAL);
		return TRUE;
	}
	g_auto(GStrv) f = g_strsplit(line, "\t", 8);
	unsigned n = g_strv_length(f);

	g_atomic_int_inc(&busy);

	if (n >= 1 && !strcmp(f[0], "MOUNT"))
		do_mount(out, f, n);
	else if (n >= 1 && !strcmp(f[0], "UMOUNT"))
		do_umount(out, f, n);
	else if (n == 1 && !strcmp(f[0], "LIST"))
		do_list(out);
	else if (n >= 1 && !strcmp(f[0], "REFLINK"))
		do_reflink(out, f, n);
	else
		reply(out, "ERR\t%d\tunknown request \"%.40s\"\n", EINVAL, n ? f[0] : "");
	g_output_stream_flush(out, NULL, NULL);
	if (g_atomic_int_dec_and_test(&busy))
		g_idle_add(exit_if_idle, NULL);
	return TRUE;
}

bool control_start(const char *path, GError **err)
{
	g_autoptr(GSocketAddress) addr = NULL;
	g_autofree char *dir = g_path_get_dirname(path);
	struct stat st;

	volumes = g_hash_table_new(g_str_hash, g_str_equal);
	if (g_mkdir_with_parents(dir, 0755) < 0) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(errno), "%s: %s", dir,
			    g_strerror(errno));
		return false;
	}
	if (lstat(path, &st) == 0) {
		/* a live daemon answers; a dead one left its socket behind */
		g_autoptr(GSocketClient) c = g_socket_client_new();
		g_autoptr(GSocketAddress) a = g_unix_socket_address_new(path);
		g_autoptr(GSocketConnection) probe =
			g_socket_client_connect(c, G_SOCKET_CONNECTABLE(a), NULL, NULL);

		if (probe) {
			g_set_error(err, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE,
				    "another ocfs2d is running (it answers on %s)", path);
			return false;
		}
		unlink(path);
	}
	service = G_SOCKET_SERVICE(g_threaded_socket_service_new(16));
	addr = g_unix_socket_address_new(path);
	mode_t old = umask(077);
	bool ok = g_socket_listener_add_address(G_SOCKET_LISTENER(service), addr,
						G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT, NULL,
						NULL, err);
	umask(old);
	if (!ok) {
		g_clear_object(&service);
		return false;
	}
	socket_path = g_strdup(path);
	g_signal_connect(service, "run", G_CALLBACK(on_run), NULL);
	g_socket_service_start(service);
	return true;
}

void control_stop(void)
{
	if (!service)
		return;
	g_socket_service_stop(service);
	g_socket_listener_close(G_SOCKET_LISTENER(service));
	g_clear_object(&service);
	if (socket_path)
		unlink(socket_path);
	g_clear_pointer(&socket_path, g_free);
}

void control_unmount_all(void)
{
	GPtrArray *list = g_ptr_array_new();
	GHashTableIter it;
	gpointer val;

	if (!volumes)
		return;
	g_mutex_lock(&reg_lock);
	g_hash_table_iter_init(&it, volumes);
	while (g_hash_table_iter_next(&it, NULL, &val))
		g_ptr_array_add(list, val);
	g_mutex_unlock(&reg_lock);
	for (guint i = 0; i < list->len; i++) {
		struct volume *v = list->pdata[i];
		g_autoptr(GError) err = NULL;

		if (!volume_unmount(v, true, &err))
			g_warning("%s", err->message);
	}
	g_ptr_array_free(list, TRUE);
	g_mutex_lock(&reg_lock);
	while (g_hash_table_size(volumes))
		g_cond_wait(&reg_cond, &reg_lock);
	g_mutex_unlock(&reg_lock);
}
