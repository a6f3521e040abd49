// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The D-Bus API (dbus/org.ocfs2d.Daemon1.xml) in server mode.
 *
 * One API, two ways in: peer-to-peer on the control socket (a GDBusServer
 * that admits only root peers; how ocfs2ctl reaches the daemon, bus or no
 * bus), and the name org.ocfs2d.Daemon1 on the system bus when there is
 * one (management UIs; only root may call the methods that change state,
 * anyone allowed by the bus policy may read).  Each connection gets its own
 * object manager and skeletons, built from one registry of mounted volumes.
 *
 * Threads: the skeletons run their method handlers on GDBus worker threads
 * (mounting replays journals, unmounting waits for the volume to close),
 * and every skeleton and export is touched on the main loop only.  A
 * handler's arguments are checked by dbus/args.c before anything happens.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gio/gio.h>

#include "api.h"
#include "ocfs2d-generated.h"
#include "ocfs2d.h"

/* A mounted volume as the API shows it; fields fixed once registered but state. */
struct mounted {
	struct volume *v; /* a reference */
	char *path;	  /* its object path */
	char *uuid, *label, *stack, *options;
	unsigned slot, max_slots, block_size, cluster_size;
	guint64 size;
	bool ro;	   /* mounted read-only, or turned so */
	bool turned_ro;	   /* an error turned it read-only (State "read-only") */
	bool unmounting;
};

/* One connection the API is exported on. */
struct export {
	GDBusConnection *conn;
	GDBusObjectManagerServer *om;
	O2dManager *manager;
};

static GMutex reg_lock;
static GCond reg_cond;
static GHashTable *registry;	/* mountpoint -> struct mounted *, under reg_lock */
static GHashTable *gone_early;	/* volumes gone before they were registered */
static GHashTable *mounting;	/* mount points a Mount in progress has claimed */
static gint busy;		/* method calls in progress */
static GPtrArray *exports;	/* struct export *, main loop only */
static GDBusServer *server;
static char *socket_path;
static guint bus_owner;
static GMainLoop *idle_loop;

static gboolean handle_unmount(O2dVolume *vol, GDBusMethodInvocation *inv, GVariant *options,
			       gpointer data);
static gboolean handle_reflink(O2dVolume *vol, GDBusMethodInvocation *inv, const char *source,
			       const char *destination, GVariant *options, gpointer data);

/* ---- the main loop side: exports and skeletons ---- */

static const char *state_of(const struct mounted *m)
{
	return m->unmounting ? "unmounting" : m->turned_ro ? "read-only" : "mounted";
}

static void export_volume(struct export *x, struct mounted *m)
{
	g_autoptr(O2dObjectSkeleton) obj = o2d_object_skeleton_new(m->path);
	g_autoptr(O2dVolume) vol = o2d_volume_skeleton_new();

	g_dbus_interface_skeleton_set_flags(
		G_DBUS_INTERFACE_SKELETON(vol),
		G_DBUS_INTERFACE_SKELETON_FLAGS_HANDLE_METHOD_INVOCATIONS_IN_THREAD);
	o2d_volume_set_device(vol, m->v->device);
	o2d_volume_set_mount_point(vol, m->v->mountpoint);
	o2d_volume_set_uuid(vol, m->uuid);
	o2d_volume_set_label(vol, m->label);
	o2d_volume_set_stack(vol, m->stack);
	o2d_volume_set_slot(vol, m->slot);
	o2d_volume_set_max_slots(vol, m->max_slots);
	o2d_volume_set_block_size(vol, m->block_size);
	o2d_volume_set_cluster_size(vol, m->cluster_size);
	o2d_volume_set_size(vol, m->size);
	o2d_volume_set_options(vol, m->options);
	g_mutex_lock(&reg_lock);
	o2d_volume_set_read_only(vol, m->ro);
	o2d_volume_set_state(vol, state_of(m));
	g_mutex_unlock(&reg_lock);
	g_signal_connect(vol, "handle-unmount", G_CALLBACK(handle_unmount), NULL);
	g_signal_connect(vol, "handle-reflink", G_CALLBACK(handle_reflink), NULL);
	o2d_object_skeleton_set_volume(obj, vol);
	g_dbus_object_manager_server_export(x->om, G_DBUS_OBJECT_SKELETON(obj));
}

static void set_mounts(struct export *x)
{
	g_mutex_lock(&reg_lock);
	unsigned n = g_hash_table_size(registry);
	g_mutex_unlock(&reg_lock);
	o2d_manager_set_mounts(x->manager, n);
}

/* Refresh a volume's changing properties on every export. */
static void update_volume(struct mounted *m)
{
	for (guint i = 0; i < exports->len; i++) {
		struct export *x = exports->pdata[i];
		g_autoptr(GDBusInterface) iface = g_dbus_object_manager_get_interface(
			G_DBUS_OBJECT_MANAGER(x->om), m->path, O2D_VOLUME_IFACE);

		if (!iface)
			continue;
		g_mutex_lock(&reg_lock);
		o2d_volume_set_read_only(O2D_VOLUME(iface), m->ro);
		o2d_volume_set_state(O2D_VOLUME(iface), state_of(m));
		g_mutex_unlock(&reg_lock);
	}
}

static void mounted_free(struct mounted *m)
{
	volume_unref(m->v);
	g_free(m->path);
	g_free(m->uuid);
	g_free(m->label);
	g_free(m->stack);
	g_free(m->options);
	g_free(m);
}

static gboolean exit_if_idle(gpointer arg)
{
	g_mutex_lock(&reg_lock);
	bool idle = g_hash_table_size(registry) == 0 && !g_atomic_int_get(&busy);
	g_mutex_unlock(&reg_lock);
	if (idle && idle_loop && g_main_loop_is_running(idle_loop)) {
		g_message("no volume mounted: exiting");
		g_main_loop_quit(idle_loop);
	}
	return G_SOURCE_REMOVE;
}

static gboolean volume_gone_idle(gpointer arg)
{
	struct mounted *m = arg;

	for (guint i = 0; i < exports->len; i++) {
		struct export *x = exports->pdata[i];

		g_dbus_object_manager_server_unexport(x->om, m->path);
		set_mounts(x);
	}
	mounted_free(m);
	return exit_if_idle(NULL);
}

static gboolean volume_changed_idle(gpointer arg)
{
	update_volume(arg);
	return G_SOURCE_REMOVE;
}

/* A Mount that worked: show the volume everywhere, then answer. */
struct mount_done {
	struct mounted *m;
	O2dManager *manager;
	GDBusMethodInvocation *inv;
};

static gboolean mount_done_idle(gpointer arg)
{
	struct mount_done *d = arg;

	for (guint i = 0; i < exports->len; i++) {
		struct export *x = exports->pdata[i];

		export_volume(x, d->m);
		set_mounts(x);
	}
	o2d_manager_complete_mount(d->manager, d->inv, d->m->path);
	g_object_unref(d->manager);
	g_free(d);
	return G_SOURCE_REMOVE;
}

/* ---- the volume side (other threads) ---- */

/* On the volume's FUSE thread, once it is closed. */
static void volume_gone(struct volume *v, void *arg)
{
	g_mutex_lock(&reg_lock);
	struct mounted *m = g_hash_table_lookup(registry, v->mountpoint);

	/* queued before an Unmount waiting below can queue its answer (after it) */
	if (m && m->v == v) {
		g_hash_table_remove(registry, v->mountpoint);
		g_idle_add(volume_gone_idle, m);
	} else {
		g_hash_table_add(gone_early, v);
	}
	g_cond_broadcast(&reg_cond);
	g_mutex_unlock(&reg_lock);
}

/* Under v->lock: an error turned the volume read-only. */
static void volume_turned_ro(struct volume *v, void *arg)
{
	g_mutex_lock(&reg_lock);
	struct mounted *m = g_hash_table_lookup(registry, v->mountpoint);

	if (m && m->v == v) {
		m->ro = true;
		m->turned_ro = true;
		g_idle_add(volume_changed_idle, m);
	}
	g_mutex_unlock(&reg_lock);
}

/* ---- method handlers (GDBus worker threads) ---- */

static void return_error(GDBusMethodInvocation *inv, GError *err)
{
	g_dbus_method_invocation_return_gerror(inv, err);
}

static void return_errno(GDBusMethodInvocation *inv, int e, const char *msg)
{
	g_dbus_method_invocation_return_error_literal(inv, O2D_ERROR, o2d_error_from_errno(e),
						      msg);
}

/* The errno behind a GIO error from the volume code. */
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

	if (e->domain == O2D_ERROR)
		return o2d_error_to_errno(e);
	for (size_t i = 0; i < G_N_ELEMENTS(map); i++)
		if (e->domain == G_IO_ERROR && e->code == map[i].code)
			return map[i].err;
	return EIO;
}

/*
 * Whether the caller may change state: peers on the control socket were
 * checked for root when they connected; on the bus ask the bus who it is.
 */
static bool authorized(GDBusMethodInvocation *inv, const char *what)
{
	GDBusConnection *conn = g_dbus_method_invocation_get_connection(inv);
	const char *sender = g_dbus_method_invocation_get_sender(inv);
	g_autoptr(GError) err = NULL;
	g_autoptr(GVariant) r = NULL;
	guint32 uid = G_MAXUINT32;

	if (!g_dbus_connection_get_unique_name(conn))
		return true;
	if (sender)
		r = g_dbus_connection_call_sync(conn, "org.freedesktop.DBus", "/org/freedesktop/DBus",
						"org.freedesktop.DBus", "GetConnectionUnixUser",
						g_variant_new("(s)", sender), G_VARIANT_TYPE("(u)"),
						G_DBUS_CALL_FLAGS_NONE, -1, NULL, &err);
	if (r)
		g_variant_get(r, "(u)", &uid);
	if (uid == 0)
		return true;
	g_dbus_method_invocation_return_error(inv, O2D_ERROR, O2D_ERROR_NOT_AUTHORIZED,
					      "only root may %s (caller uid %d)", what,
					      uid == G_MAXUINT32 ? -1 : (int)uid);
	return false;
}

/* The registered volume an invocation's object stands for, referenced; or NULL. */
static struct mounted *lookup_target(GDBusMethodInvocation *inv, struct volume **ret_v)
{
	g_autofree char *mnt = o2d_volume_mountpoint(g_dbus_method_invocation_get_object_path(inv));
	struct mounted *m = NULL;

	*ret_v = NULL;
	g_mutex_lock(&reg_lock);
	if (mnt)
		m = g_hash_table_lookup(registry, mnt);
	if (m)
		*ret_v = volume_ref(m->v);
	g_mutex_unlock(&reg_lock);
	return m;
}

static struct mounted *describe(struct volume *v)
{
	struct mounted *m = g_new0(struct mounted, 1);

	m->v = v;
	m->path = o2d_volume_path(v->mountpoint);
	m->options = mount_opts_to_string(&v->opts);
	m->slot = v->opts.slot;
	m->ro = v->opts.ro;
	g_mutex_lock(&v->lock);
	const struct o2_super_info *si = o2_fs_super(v->fs);
	char uuid[33];

	for (int i = 0; i < 16; i++)
		snprintf(uuid + 2 * i, 3, "%02X", si->uuid[i]);
	m->uuid = g_strdup(uuid);
	m->label = g_utf8_make_valid(si->label, -1);
	m->stack = g_strdup(o2_fs_stack_name(v->fs));
	m->max_slots = si->max_slots;
	m->block_size = si->block_size;
	m->cluster_size = si->cluster_size;
	m->size = (guint64)si->total_clusters * si->cluster_size;
	m->ro = m->ro || v->ro_reported;
	m->turned_ro = v->ro_reported;
	v->turned_ro = volume_turned_ro;
	g_mutex_unlock(&v->lock);
	return m;
}

static gboolean handle_mount(O2dManager *manager, GDBusMethodInvocation *inv, const char *device,
			     const char *mountpoint, GVariant *options, gpointer data)
{
	struct o2d_mount_req req;
	g_autoptr(GError) err = NULL;
	struct volume *v;

	if (!o2d_parse_mount(g_dbus_method_invocation_get_parameters(inv), &req, &err)) {
		return_error(inv, err);
		return TRUE;
	}
	if (!authorized(inv, "mount volumes")) {
		o2d_mount_req_clear(&req);
		return TRUE;
	}
	g_atomic_int_inc(&busy);
	char *real = realpath(req.mountpoint, NULL);
	g_autofree char *abs = g_strdup(real ? real : req.mountpoint);

	free(real);
	g_mutex_lock(&reg_lock);
	/* two Mounts at once on one mount point: the second waits for nothing, it fails */
	bool taken = g_hash_table_contains(registry, abs) || g_hash_table_contains(mounting, abs);

	if (!taken)
		g_hash_table_add(mounting, abs);
	g_mutex_unlock(&reg_lock);
	if (taken) {
		g_dbus_method_invocation_return_error(inv, O2D_ERROR, O2D_ERROR_ALREADY_MOUNTED,
						      "%s: a volume is mounted there already", abs);
	} else if (!volume_mount(req.device, req.mountpoint, &req.opts, volume_gone, NULL, &v,
				 &err)) {
		g_mutex_lock(&reg_lock);
		g_hash_table_remove(mounting, abs);
		g_mutex_unlock(&reg_lock);
		return_errno(inv, errno_of(err), err->message);
	} else {
		struct mounted *m = describe(v);

		g_mutex_lock(&reg_lock);
		g_hash_table_remove(mounting, abs);
		bool early = g_hash_table_remove(gone_early, v);
		if (!early)
			g_hash_table_insert(registry, v->mountpoint, m);
		g_mutex_unlock(&reg_lock);
		if (early) {
			return_errno(inv, EIO, "the volume was unmounted as soon as it was mounted");
			mounted_free(m);
		} else {
			struct mount_done *d = g_new0(struct mount_done, 1);

			d->m = m;
			d->manager = g_object_ref(manager);
			d->inv = inv;
			g_idle_add(mount_done_idle, d);
		}
	}
	o2d_mount_req_clear(&req);
	if (g_atomic_int_dec_and_test(&busy))
		g_idle_add(exit_if_idle, NULL);
	return TRUE;
}

/* An Unmount whose volume has closed: its answer, sent from the main loop. */
struct unmount_done {
	O2dVolume *vol;
	GDBusMethodInvocation *inv;
	int result;
	char *device;
};

static gboolean unmount_done_idle(gpointer arg)
{
	struct unmount_done *d = arg;

	if (d->result < 0) {
		g_autofree char *msg = g_strdup_printf(
			"%s: closing failed (%s); the journal is left for the next mount to replay",
			d->device, g_strerror(-d->result));

		return_errno(d->inv, -d->result, msg);
	} else {
		o2d_volume_complete_unmount(d->vol, d->inv);
	}
	g_object_unref(d->vol);
	g_free(d->device);
	g_free(d);
	if (g_atomic_int_dec_and_test(&busy))
		exit_if_idle(NULL);
	return G_SOURCE_REMOVE;
}

/* Whether v is still the registered volume on its mount point (under reg_lock). */
static bool registered_locked(struct volume *v)
{
	struct mounted *m = g_hash_table_lookup(registry, v->mountpoint);

	return m && m->v == v;
}

static gboolean handle_unmount(O2dVolume *vol, GDBusMethodInvocation *inv, GVariant *options,
			       gpointer data)
{
	struct o2d_unmount_req req;
	g_autoptr(GError) err = NULL;
	struct volume *v;
	struct mounted *m;

	if (!o2d_parse_unmount(g_dbus_method_invocation_get_parameters(inv), &req, &err)) {
		return_error(inv, err);
		return TRUE;
	}
	if (!authorized(inv, "unmount volumes"))
		return TRUE;
	m = lookup_target(inv, &v);
	if (!m) {
		g_dbus_method_invocation_return_error_literal(inv, O2D_ERROR, O2D_ERROR_NOT_MOUNTED,
							      "that volume is no longer mounted");
		return TRUE;
	}
	g_atomic_int_inc(&busy);
	g_mutex_lock(&reg_lock);
	m->unmounting = true;
	g_idle_add(volume_changed_idle, m);
	g_mutex_unlock(&reg_lock);
	if (!volume_unmount(v, req.force, &err)) {
		g_mutex_lock(&reg_lock);
		if (registered_locked(v)) {
			m->unmounting = false;
			g_idle_add(volume_changed_idle, m);
		}
		g_mutex_unlock(&reg_lock);
		return_errno(inv, errno_of(err), err->message);
	} else {
		g_mutex_lock(&reg_lock);
		while (registered_locked(v))
			g_cond_wait(&reg_cond, &reg_lock);
		g_mutex_unlock(&reg_lock);
		/* answer on the main loop, after the volume's object is gone
		 * (volume_gone queued that first); busy stays up until then, so
		 * an idle daemon does not exit before the answer is out */
		struct unmount_done *d = g_new0(struct unmount_done, 1);

		d->vol = g_object_ref(vol);
		d->inv = inv;
		d->result = v->close_result;
		d->device = g_strdup(v->device);
		g_idle_add(unmount_done_idle, d);
		volume_unref(v);
		return TRUE;
	}
	volume_unref(v);
	if (g_atomic_int_dec_and_test(&busy))
		g_idle_add(exit_if_idle, NULL);
	return TRUE;
}

static gboolean handle_reflink(O2dVolume *vol, GDBusMethodInvocation *inv, const char *source,
			       const char *destination, GVariant *options, gpointer data)
{
	struct o2d_reflink_req req;
	g_autoptr(GError) err = NULL;
	struct volume *v;

	if (!o2d_parse_reflink(g_dbus_method_invocation_get_parameters(inv), &req, &err)) {
		return_error(inv, err);
		return TRUE;
	}
	if (!authorized(inv, "make reflinks through ocfs2d")) {
		o2d_reflink_req_clear(&req);
		return TRUE;
	}
	if (!lookup_target(inv, &v)) {
		g_dbus_method_invocation_return_error_literal(inv, O2D_ERROR, O2D_ERROR_NOT_MOUNTED,
							      "that volume is no longer mounted");
		o2d_reflink_req_clear(&req);
		return TRUE;
	}
	uint64_t ino = 0;
	g_autofree char *msg = NULL;
	int r = reflink_by_path(v, req.source, req.destination, &ino, &msg);

	volume_unref(v);
	if (r < 0)
		return_errno(inv, -r, msg ? msg : g_strerror(-r));
	else
		o2d_volume_complete_reflink(vol, inv, ino);
	o2d_reflink_req_clear(&req);
	return TRUE;
}

/* ---- connections ---- */

static void export_free(struct export *x)
{
	g_dbus_object_manager_server_set_connection(x->om, NULL);
	g_object_unref(x->om);
	g_object_unref(x->manager);
	g_object_unref(x->conn);
	g_free(x);
}

static void export_on(GDBusConnection *conn)
{
	struct export *x = g_new0(struct export, 1);
	g_autoptr(O2dObjectSkeleton) obj = o2d_object_skeleton_new(O2D_MANAGER_PATH);
	GHashTableIter it;
	gpointer val;

	x->conn = g_object_ref(conn);
	x->om = g_dbus_object_manager_server_new(O2D_ROOT_PATH);
	x->manager = o2d_manager_skeleton_new();
	g_dbus_interface_skeleton_set_flags(
		G_DBUS_INTERFACE_SKELETON(x->manager),
		G_DBUS_INTERFACE_SKELETON_FLAGS_HANDLE_METHOD_INVOCATIONS_IN_THREAD);
	o2d_manager_set_version(x->manager, OCFS2D_VERSION);
	g_signal_connect(x->manager, "handle-mount", G_CALLBACK(handle_mount), NULL);
	o2d_object_skeleton_set_manager(obj, x->manager);
	g_dbus_object_manager_server_export(x->om, G_DBUS_OBJECT_SKELETON(obj));
	g_mutex_lock(&reg_lock);
	GPtrArray *list = g_ptr_array_new();

	g_hash_table_iter_init(&it, registry);
	while (g_hash_table_iter_next(&it, NULL, &val))
		g_ptr_array_add(list, val);
	g_mutex_unlock(&reg_lock);
	/* the registry only loses entries on the main loop (volume_gone_idle) */
	for (guint i = 0; i < list->len; i++)
		export_volume(x, list->pdata[i]);
	g_ptr_array_free(list, TRUE);
	set_mounts(x);
	g_dbus_object_manager_server_set_connection(x->om, conn);
	g_ptr_array_add(exports, x);
}

static void unexport_from(GDBusConnection *conn)
{
	for (guint i = 0; i < exports->len; i++) {
		struct export *x = exports->pdata[i];

		if (x->conn == conn) {
			g_ptr_array_remove_index_fast(exports, i);
			export_free(x);
			return;
		}
	}
}

static void on_peer_closed(GDBusConnection *conn, gboolean remote_vanished, GError *error,
			   gpointer data)
{
	unexport_from(conn);
}

static gboolean on_new_connection(GDBusServer *srv, GDBusConnection *conn, gpointer data)
{
	export_on(conn);
	g_signal_connect(conn, "closed", G_CALLBACK(on_peer_closed), NULL);
	return TRUE;
}

static gboolean on_authorize_peer(GDBusAuthObserver *obs, GIOStream *stream, GCredentials *cred,
				  gpointer data)
{
	bool root = cred && g_credentials_get_unix_user(cred, NULL) == 0;

	if (!root)
		g_message("control socket: refused a peer that is not root");
	return root;
}

static gboolean on_allow_mechanism(GDBusAuthObserver *obs, const char *mechanism, gpointer data)
{
	return g_strcmp0(mechanism, "EXTERNAL") == 0;
}

static void on_bus_acquired(GDBusConnection *conn, const char *name, gpointer data)
{
	export_on(conn);
}

static void on_name_acquired(GDBusConnection *conn, const char *name, gpointer data)
{
	g_message("serving the D-Bus API as %s on the system bus", name);
}

static void on_name_lost(GDBusConnection *conn, const char *name, gpointer data)
{
	if (!conn)
		g_message("no system bus: the D-Bus API is on the control socket only");
	else
		g_message("cannot own %s on the system bus (another daemon, or no policy "
			  "allowing it): the D-Bus API is on the control socket only",
			  name);
	if (conn)
		unexport_from(conn);
}

/* ---- start and stop ---- */

void api_exit_when_idle(GMainLoop *loop)
{
	idle_loop = loop;
}

/* Whether a live daemon answers on path. */
static bool daemon_answers(const char *path)
{
	g_autofree char *addr = g_strconcat("unix:path=", path, NULL);
	g_autoptr(GDBusConnection) c = g_dbus_connection_new_for_address_sync(
		addr, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT, NULL, NULL, NULL);

	if (c)
		g_dbus_connection_close_sync(c, NULL, NULL);
	return c != NULL;
}

bool api_start(const char *path, bool system_bus, GError **err)
{
	g_autofree char *dir = g_path_get_dirname(path);
	g_autofree char *addr = NULL;
	g_autofree char *guid = g_dbus_generate_guid();
	g_autoptr(GDBusAuthObserver) obs = g_dbus_auth_observer_new();
	struct stat st;

	(void)o2d_error_quark(); /* the error names, registered before any call */
	registry = g_hash_table_new(g_str_hash, g_str_equal);
	gone_early = g_hash_table_new(NULL, NULL);
	mounting = g_hash_table_new(g_str_hash, g_str_equal);
	exports = g_ptr_array_new();
	if (g_mkdir_with_parents(dir, 0755) < 0) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(errno), "%s: %s", dir,
			    g_strerror(errno));
		return false;
	}
	if (lstat(path, &st) == 0) {
		/* a live daemon answers; a dead one left its socket behind */
		if (daemon_answers(path)) {
			g_set_error(err, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE,
				    "another ocfs2d is running (it answers on %s)", path);
			return false;
		}
		unlink(path);
	}
	g_signal_connect(obs, "authorize-authenticated-peer", G_CALLBACK(on_authorize_peer), NULL);
	g_signal_connect(obs, "allow-mechanism", G_CALLBACK(on_allow_mechanism), NULL);
	addr = g_strconcat("unix:path=", path, NULL);
	mode_t old = umask(077);
	server = g_dbus_server_new_sync(addr, G_DBUS_SERVER_FLAGS_NONE, guid, obs, NULL, err);
	umask(old);
	if (!server)
		return false;
	socket_path = g_strdup(path);
	g_signal_connect(server, "new-connection", G_CALLBACK(on_new_connection), NULL);
	g_dbus_server_start(server);
	if (system_bus)
		bus_owner = g_bus_own_name(G_BUS_TYPE_SYSTEM, O2D_BUS_NAME,
					   G_BUS_NAME_OWNER_FLAGS_DO_NOT_QUEUE, on_bus_acquired,
					   on_name_acquired, on_name_lost, NULL, NULL);
	return true;
}

void api_stop(void)
{
	/* what the loop left queued: objects to remove, answers to send */
	while (g_main_context_iteration(NULL, FALSE))
		;
	if (bus_owner)
		g_bus_unown_name(bus_owner);
	bus_owner = 0;
	if (server) {
		g_dbus_server_stop(server);
		g_clear_object(&server);
	}
	while (exports && exports->len) {
		struct export *x = g_ptr_array_steal_index_fast(exports, exports->len - 1);

		/* the last answers (an Unmount that made us idle) go out first */
		g_dbus_connection_flush_sync(x->conn, NULL, NULL);
		export_free(x);
	}
	if (socket_path)
		unlink(socket_path);
	g_clear_pointer(&socket_path, g_free);
}

void api_unmount_all(void)
{
	if (!registry)
		return;
	g_mutex_lock(&reg_lock);
	/* a Mount finishing meanwhile registers one more: ask until none is left */
	GHashTable *asked = g_hash_table_new(NULL, NULL);

	while (g_hash_table_size(registry)) {
		GHashTableIter it;
		gpointer val;
		GPtrArray *list = g_ptr_array_new();

		g_hash_table_iter_init(&it, registry);
		while (g_hash_table_iter_next(&it, NULL, &val))
			if (g_hash_table_add(asked, ((struct mounted *)val)->v))
				g_ptr_array_add(list, volume_ref(((struct mounted *)val)->v));
		g_mutex_unlock(&reg_lock);
		for (guint i = 0; i < list->len; i++) {
			g_autoptr(GError) err = NULL;

			if (!volume_unmount(list->pdata[i], true, &err))
				g_warning("%s", err->message);
			volume_unref(list->pdata[i]);
		}
		g_ptr_array_free(list, TRUE);
		g_mutex_lock(&reg_lock);
		if (g_hash_table_size(registry))
			g_cond_wait(&reg_cond, &reg_lock);
	}
	g_mutex_unlock(&reg_lock);
	g_hash_table_destroy(asked);
}
