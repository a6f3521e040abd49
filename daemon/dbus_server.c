// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The D-Bus API (dbus/org.ocfs2d.Daemon1.xml) in server mode.
 *
 * One API, two ways in: peer-to-peer on the control socket (a GDBusServer
 * that admits only root peers; how ocfs2ctl reaches the daemon, bus or no
 * bus), and the name org.ocfs2d.Daemon1 on the system bus when there is
 * one (management UIs; only root may call the methods that change state,
 * anyone allowed by the bus policy may read).  Each connection gets its own
 * object manager and skeletons, built from one registry of mounted volumes
 * (registry.c), which the server object owns.
 *
 * Threads: the skeletons run their method handlers on GDBus worker threads
 * (mounting replays journals, unmounting waits for the volume to close),
 * and every skeleton and export is touched on the main loop only.  A
 * handler's arguments are checked by dbus/args.c before anything happens.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gio/gio.h>

#include "api.h"
#include "ocfs2d-generated.h"
#include "cluster.h"
#include "job.h"
#include "lockcache.h"
#include "ocfs2d.h"
#include "registry.h"

/* One connection the API is exported on. */
struct export {
	struct dbus_server *s;
	GDBusConnection *conn;
	GDBusObjectManagerServer *om;
	O2dManager *manager;
	gulong closed_id; /* our "closed" handler on a peer connection, or 0 */
};

struct dbus_server {
	struct registry *reg;
	gint busy;		/* method calls in progress */
	GPtrArray *exports;	/* struct export *, main loop only */
	GDBusServer *server;
	char *socket_path;
	guint bus_owner;
	GMainLoop *idle_loop;	/* quit once idle, or NULL */
	int idle_lock;		/* the control socket's lifetime lock, or -1 */
	guint idle_retry;	/* a timeout to look again, or 0 */
	GMutex jobs_lock;	/* guards jobs */
	GHashTable *jobs;	/* object path -> struct job_entry *, the running jobs */
	guint last_job;		/* the last job's number (atomic) */
};

/* A Format or Check running, shown as a Job object on every export. */
struct job_entry {
	struct dbus_server *s;
	struct job *job;
	char *path;
	guint32 uid; /* who started it */
};

/* Main-loop work about one entry, queued from another thread. */
struct entry_work {
	struct dbus_server *s;
	struct mounted *m;
};

static void queue_entry_work(GSourceFunc fn, struct dbus_server *s, struct mounted *m)
{
	struct entry_work *w = g_new(struct entry_work, 1);

	w->s = s;
	w->m = m;
	g_idle_add(fn, w);
}

static gboolean handle_unmount(O2dVolume *vol, GDBusMethodInvocation *inv, GVariant *options,
			       gpointer data);
static gboolean handle_reflink(O2dVolume *vol, GDBusMethodInvocation *inv, const char *source,
			       const char *destination, GVariant *options, gpointer data);
static gboolean handle_cluster_state(O2dVolume *vol, GDBusMethodInvocation *inv, GVariant *options,
				     gpointer data);
static gboolean handle_statistics(O2dVolume *vol, GDBusMethodInvocation *inv, GVariant *options,
				  gpointer data);
static gboolean handle_quota(O2dVolume *vol, GDBusMethodInvocation *inv, GVariant *options,
			     gpointer data);
static gboolean handle_set_quota(O2dVolume *vol, GDBusMethodInvocation *inv, GVariant *options,
				 gpointer data);
static gboolean handle_status(O2dVolume *vol, GDBusMethodInvocation *inv, GVariant *options,
			      gpointer data);

static gboolean handle_format(O2dManager *manager, GDBusMethodInvocation *inv, const char *device,
			      GVariant *options, gpointer data);
static gboolean handle_check(O2dManager *manager, GDBusMethodInvocation *inv, const char *device,
			     GVariant *options, gpointer data);
static gboolean handle_cancel(O2dJob *job, GDBusMethodInvocation *inv, GVariant *options,
			      gpointer data);
static struct job_entry *attach_job(struct dbus_server *s, GDBusMethodInvocation *inv,
				    struct job *job);

/* A mount's or an unmount's job watches the volume's work (volume_watch). */
static int watch_progress(void *arg, uint64_t done, uint64_t total)
{
	return job_progress(arg, done, total) ? 1 : 0;
}

static bool watch_commit(void *arg)
{
	return job_commit(arg);
}

/* ---- the main loop side: exports and skeletons ---- */

static void show_job_view(O2dJob *iface, struct job *job)
{
	struct job_view view;

	job_snapshot(job, &view);
	o2d_job_set_progress(iface, view.progress);
	o2d_job_set_expected_end_time(iface, (guint64)view.expected_end_us);
	o2d_job_set_cancelable(iface, view.cancelable);
}

static void export_job(struct export *x, struct job_entry *e)
{
	g_autoptr(O2dObjectSkeleton) obj = o2d_object_skeleton_new(e->path);
	g_autoptr(O2dJob) iface = o2d_job_skeleton_new();

	g_dbus_interface_skeleton_set_flags(
		G_DBUS_INTERFACE_SKELETON(iface),
		G_DBUS_INTERFACE_SKELETON_FLAGS_HANDLE_METHOD_INVOCATIONS_IN_THREAD);
	o2d_job_set_operation(iface, job_operation(e->job));
	o2d_job_set_device(iface, job_device(e->job));
	o2d_job_set_started_by_uid(iface, e->uid);
	show_job_view(iface, e->job);
	g_signal_connect(iface, "handle-cancel", G_CALLBACK(handle_cancel), x->s);
	o2d_object_skeleton_set_job(obj, iface);
	g_dbus_object_manager_server_export(x->om, G_DBUS_OBJECT_SKELETON(obj));
}

/* The job's interface on one export, or NULL (unref it). */
static O2dJob *job_iface(struct export *x, const char *path)
{
	GDBusInterface *iface = g_dbus_object_manager_get_interface(G_DBUS_OBJECT_MANAGER(x->om),
								     path, O2D_JOB_IFACE);

	return iface ? O2D_JOB(iface) : NULL;
}

static void export_volume(struct export *x, struct mounted *m)
{
	g_autoptr(O2dObjectSkeleton) obj = o2d_object_skeleton_new(m->path);
	g_autoptr(O2dVolume) vol = o2d_volume_skeleton_new();
	const char *state;
	bool ro;

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
	o2d_volume_set_cluster_name(vol, m->cluster_name);
	o2d_volume_set_node_id(vol, m->node_id);
	registry_read_state(x->s->reg, m, &ro, &state);
	o2d_volume_set_read_only(vol, ro);
	o2d_volume_set_state(vol, state);
	g_signal_connect(vol, "handle-unmount", G_CALLBACK(handle_unmount), x->s);
	g_signal_connect(vol, "handle-reflink", G_CALLBACK(handle_reflink), x->s);
	g_signal_connect(vol, "handle-cluster-state", G_CALLBACK(handle_cluster_state), x->s);
	g_signal_connect(vol, "handle-statistics", G_CALLBACK(handle_statistics), x->s);
	g_signal_connect(vol, "handle-status", G_CALLBACK(handle_status), x->s);
	g_signal_connect(vol, "handle-quota", G_CALLBACK(handle_quota), x->s);
	g_signal_connect(vol, "handle-set-quota", G_CALLBACK(handle_set_quota), x->s);
	o2d_object_skeleton_set_volume(obj, vol);
	g_dbus_object_manager_server_export(x->om, G_DBUS_OBJECT_SKELETON(obj));
}

static void set_mounts(struct export *x)
{
	o2d_manager_set_mounts(x->manager, registry_count(x->s->reg));
}

/* Refresh a volume's changing properties on every export. */
static void update_volume(struct dbus_server *s, struct mounted *m)
{
	for (guint i = 0; i < s->exports->len; i++) {
		struct export *x = s->exports->pdata[i];
		g_autoptr(GDBusInterface) iface = g_dbus_object_manager_get_interface(
			G_DBUS_OBJECT_MANAGER(x->om), m->path, O2D_VOLUME_IFACE);
		const char *state;
		bool ro;

		if (!iface)
			continue;
		registry_read_state(s->reg, m, &ro, &state);
		o2d_volume_set_read_only(O2D_VOLUME(iface), ro);
		o2d_volume_set_state(O2D_VOLUME(iface), state);
	}
}

static gboolean exit_if_idle(gpointer arg);

static gboolean look_again(gpointer arg)
{
	struct dbus_server *s = arg;

	s->idle_retry = 0;
	return exit_if_idle(s);
}

/*
 * Quit the idle loop if one is set, nothing is mounted, no call is running
 * and no client holds the lifetime lock (one that has connected, or is
 * about to, and has not exited yet: then look again shortly).
 */
static gboolean exit_if_idle(gpointer arg)
{
	struct dbus_server *s = arg;
	bool idle = registry_count(s->reg) == 0 && !g_atomic_int_get(&s->busy);

	if (!idle || !s->idle_loop || !g_main_loop_is_running(s->idle_loop))
		return G_SOURCE_REMOVE;
	if (s->idle_lock >= 0 && flock(s->idle_lock, LOCK_EX | LOCK_NB) < 0) {
		if (!s->idle_retry)
			s->idle_retry = g_timeout_add(200, look_again, s);
		return G_SOURCE_REMOVE;
	}
	/* held until the process is gone: clients wait for that, then start
	 * a daemon of their own */
	g_message("no volume mounted: exiting");
	g_main_loop_quit(s->idle_loop);
	return G_SOURCE_REMOVE;
}

/* A method call is over: an idle daemon may exit now (from any thread). */
static void call_done(struct dbus_server *s)
{
	if (g_atomic_int_dec_and_test(&s->busy))
		g_idle_add(exit_if_idle, s);
}

/* An entry registry_remove handed over: its objects go, then it does. */
static gboolean volume_gone_idle(gpointer arg)
{
	g_autofree struct entry_work *w = arg;

	for (guint i = 0; i < w->s->exports->len; i++) {
		struct export *x = w->s->exports->pdata[i];

		g_dbus_object_manager_server_unexport(x->om, w->m->path);
		set_mounts(x);
	}
	mounted_free(w->m);
	return exit_if_idle(w->s);
}

static gboolean volume_changed_idle(gpointer arg)
{
	g_autofree struct entry_work *w = arg;

	update_volume(w->s, w->m);
	return G_SOURCE_REMOVE;
}

/* A registry callback: the entry's state changed; show it on the main loop. */
static void queue_changed(struct mounted *m, void *arg)
{
	queue_entry_work(volume_changed_idle, arg, m);
}

/* A Mount that worked: show the volume everywhere, then answer. */
struct mount_done {
	struct dbus_server *s;
	struct mounted *m;
	O2dManager *manager;
	GDBusMethodInvocation *inv;
};

static gboolean mount_done_idle(gpointer arg)
{
	struct mount_done *d = arg;

	for (guint i = 0; i < d->s->exports->len; i++) {
		struct export *x = d->s->exports->pdata[i];

		export_volume(x, d->m);
		set_mounts(x);
	}
	o2d_manager_complete_mount(d->manager, d->inv, d->m->path);
	g_object_unref(d->manager);
	g_free(d);
	return G_SOURCE_REMOVE;
}

/* A registry callback: m is registered; queue its showing (d, in arg). */
static void queue_mount_done(struct mounted *m, void *arg)
{
	g_idle_add(mount_done_idle, arg);
}

/* ---- the volume side (other threads) ---- */

/* A registry callback: hand the removed entry to the main loop. */
static void queue_gone(struct mounted *m, void *arg)
{
	queue_entry_work(volume_gone_idle, arg, m);
}

/* On the volume's FUSE thread, once it is closed. */
static void volume_gone(struct volume *v, void *arg)
{
	struct dbus_server *s = arg;

	/* queued (under the registry's lock) before an Unmount waiting for
	 * the volume to go can queue its answer, so the answer comes after */
	registry_remove(s->reg, v, queue_gone, s);
}

/* A registry callback: an error turned the entry read-only. */
static void mark_turned_ro(struct mounted *m, void *arg)
{
	m->ro = true;
	m->turned_ro = true;
	queue_changed(m, arg);
}

/* Under v->lock: an error turned the volume read-only. */
static void volume_turned_ro(struct volume *v, void *arg)
{
	struct dbus_server *s = arg;

	registry_update(s->reg, v, mark_turned_ro, s);
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
		{ G_IO_ERROR_CANCELLED, ECANCELED },
	};

	if (e->domain == O2D_ERROR)
		return o2d_error_to_errno(e);
	for (size_t i = 0; i < G_N_ELEMENTS(map); i++)
		if (e->domain == G_IO_ERROR && e->code == map[i].code)
			return map[i].err;
	return EIO;
}

/* Who called: root on the control socket (checked at connection), the bus says who else. */
static guint32 caller_uid(GDBusMethodInvocation *inv)
{
	GDBusConnection *conn = g_dbus_method_invocation_get_connection(inv);
	const char *sender = g_dbus_method_invocation_get_sender(inv);
	g_autoptr(GVariant) r = NULL;
	guint32 uid = G_MAXUINT32;

	if (!g_dbus_connection_get_unique_name(conn))
		return 0;
	if (sender)
		r = g_dbus_connection_call_sync(conn, "org.freedesktop.DBus", "/org/freedesktop/DBus",
						"org.freedesktop.DBus", "GetConnectionUnixUser",
						g_variant_new("(s)", sender), G_VARIANT_TYPE("(u)"),
						G_DBUS_CALL_FLAGS_NONE, -1, NULL, NULL);
	if (r)
		g_variant_get(r, "(u)", &uid);
	return uid;
}

/* Whether the call's options (its last argument) say auth.no_user_interaction. */
static bool no_user_interaction(GDBusMethodInvocation *inv)
{
	GVariant *params = g_dbus_method_invocation_get_parameters(inv);
	gsize n = params ? g_variant_n_children(params) : 0;
	g_autoptr(GVariant) opts = n ? g_variant_get_child_value(params, n - 1) : NULL;
	gboolean no = FALSE;

	if (opts && g_variant_is_of_type(opts, G_VARIANT_TYPE_VARDICT))
		g_variant_lookup(opts, "auth.no_user_interaction", "b", &no);
	return no;
}

/*
 * Ask polkit whether the bus caller sender may do action (it may ask the
 * user to authenticate, unless the call says auth.no_user_interaction):
 * true if so; false with *why saying what polkit answered, or that there
 * is no polkit to ask.
 */
static bool polkit_allows(GDBusMethodInvocation *inv, const char *action, char **why)
{
	GDBusConnection *conn = g_dbus_method_invocation_get_connection(inv);
	const char *sender = g_dbus_method_invocation_get_sender(inv);
	bool interactive = !no_user_interaction(inv);
	g_autoptr(GError) err = NULL;
	g_autoptr(GVariant) r = NULL;
	GVariantBuilder subject, details;
	gboolean ok = FALSE, challenge = FALSE;

	g_variant_builder_init(&subject, G_VARIANT_TYPE_VARDICT);
	g_variant_builder_add(&subject, "{sv}", "name", g_variant_new_string(sender));
	g_variant_builder_init(&details, G_VARIANT_TYPE("a{ss}"));
	/* an interactive check waits for the user at the agent: no time limit */
	r = g_dbus_connection_call_sync(
		conn, "org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
		"org.freedesktop.PolicyKit1.Authority", "CheckAuthorization",
		g_variant_new("((sa{sv})sa{ss}us)", "system-bus-name", &subject, action, &details,
			      interactive ? 1u : 0u, ""),
		G_VARIANT_TYPE("((bba{ss}))"), G_DBUS_CALL_FLAGS_NONE, interactive ? G_MAXINT : -1, NULL,
		&err);
	if (!r) {
		g_dbus_error_strip_remote_error(err);
		*why = g_strdup_printf("no polkit authority to ask (%s)", err->message);
		return false;
	}
	g_variant_get(r, "((bb@a{ss}))", &ok, &challenge, NULL);
	if (!ok)
		*why = g_strdup(challenge ? "polkit wants authentication, and no agent gave it"
					  : "polkit says no");
	return ok;
}

/*
 * Whether the caller may change state (action, a polkit action of
 * packaging/polkit, for what in words): peers on the control socket were
 * checked for root when they connected; on the bus root may, and anyone
 * else if polkit allows the action.  Answers NotAuthorized if not.
 */
static bool authorized(GDBusMethodInvocation *inv, const char *action, const char *what)
{
	guint32 uid = caller_uid(inv);
	g_autofree char *why = NULL;

	if (uid == 0)
		return true;
	if (uid != G_MAXUINT32 && polkit_allows(inv, action, &why))
		return true;
	g_dbus_method_invocation_return_error(inv, O2D_ERROR, O2D_ERROR_NOT_AUTHORIZED,
					      "only root, or a user polkit allows %s, may %s "
					      "(caller uid %d: %s)",
					      action, what, uid == G_MAXUINT32 ? -1 : (int)uid,
					      why ? why : "unknown to the bus");
	return false;
}

/* The registered volume an invocation's object stands for, referenced; or NULL. */
static struct volume *lookup_target(struct dbus_server *s, GDBusMethodInvocation *inv)
{
	g_autofree char *mnt = o2d_volume_mountpoint(g_dbus_method_invocation_get_object_path(inv));

	return mnt ? registry_find(s->reg, mnt) : NULL;
}

/* The same, or NULL with NotMounted answered. */
static struct volume *target_or_reply(struct dbus_server *s, GDBusMethodInvocation *inv)
{
	struct volume *v = lookup_target(s, inv);

	if (!v)
		g_dbus_method_invocation_return_error_literal(inv, O2D_ERROR, O2D_ERROR_NOT_MOUNTED,
							      "that volume is no longer mounted");
	return v;
}

/* The API's view of a volume just mounted (owning the mounter's reference). */
static struct mounted *describe(struct dbus_server *s, struct volume *v)
{
	struct mounted *m = g_new0(struct mounted, 1);

	m->v = v;
	m->path = o2d_volume_path(v->mountpoint);
	m->options = mount_opts_to_string(&v->opts);
	m->slot = v->slot;
	m->ro = v->opts.ro;
	g_mutex_lock(&v->lock);
	m->cluster_name = g_strdup(v->cluster ? cluster_name(v->cluster) : "");
	m->node_id = v->cluster ? cluster_nodeid(v->cluster) : 0;
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
	/* from now on a turn to read-only reaches the registry; it gets
	 * gone_arg, which volume_mount was given: s */
	v->turned_ro = volume_turned_ro;
	g_mutex_unlock(&v->lock);
	return m;
}

static gboolean handle_mount(O2dManager *manager, GDBusMethodInvocation *inv, const char *device,
			     const char *mountpoint, GVariant *options, gpointer data)
{
	struct dbus_server *s = data;
	struct o2d_mount_req req;
	g_autoptr(GError) err = NULL;
	struct volume *v;

	if (!o2d_parse_mount(g_dbus_method_invocation_get_parameters(inv), &req, &err)) {
		return_error(inv, err);
		return TRUE;
	}
	if (!authorized(inv, "org.ocfs2d.Daemon1.mount", "mount volumes")) {
		o2d_mount_req_clear(&req);
		return TRUE;
	}
	g_atomic_int_inc(&s->busy);
	char *real = realpath(req.mountpoint, NULL);
	g_autofree char *abs = g_strdup(real ? real : req.mountpoint);

	free(real);
	if (!registry_claim(s->reg, abs)) {
		g_dbus_method_invocation_return_error(inv, O2D_ERROR, O2D_ERROR_ALREADY_MOUNTED,
						      "%s: a volume is mounted there already", abs);
		o2d_mount_req_clear(&req);
		call_done(s);
		return TRUE;
	}
	/*
	 * The mount is a Job while it works (udisks2's way): its progress is
	 * the journal's replay, and Cancel stops it until the FUSE mount.
	 */
	struct job *job = job_new_attached("mount", req.device, true);
	struct volume_watch watch = { watch_progress, watch_commit, job };
	g_autofree char *done_msg = NULL;

	attach_job(s, inv, job);
	if (!volume_mount(req.device, req.mountpoint, &req.opts, volume_gone, s, &watch, &v,
			  &err)) {
		registry_unclaim(s->reg, abs);
		job_end(job, false, err->message);
		return_errno(inv, errno_of(err), err->message);
	} else {
		struct mounted *m = describe(s, v);
		struct mount_done *d = g_new0(struct mount_done, 1);

		done_msg = g_strdup_printf("%s mounted on %s", v->device, v->mountpoint);
		job_end(job, true, done_msg);
		d->s = s;
		d->m = m;
		d->manager = g_object_ref(manager);
		d->inv = inv;
		/* queued under the registry's lock: before the volume's going,
		 * should it go at once, can free m */
		if (!registry_add(s->reg, abs, m, queue_mount_done, d)) {
			g_object_unref(d->manager);
			g_free(d);
			return_errno(inv, EIO, "the volume was unmounted as soon as it was mounted");
			mounted_free(m);
		}
	}
	o2d_mount_req_clear(&req);
	call_done(s);
	return TRUE;
}

/* An Unmount whose volume has closed: its answer, sent from the main loop. */
struct unmount_done {
	struct dbus_server *s;
	O2dVolume *vol;
	GDBusMethodInvocation *inv;
	int result;
	char *device;
};

static gboolean unmount_done_idle(gpointer arg)
{
	struct unmount_done *d = arg;
	struct dbus_server *s = d->s;

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
	if (g_atomic_int_dec_and_test(&s->busy))
		exit_if_idle(s);
	return G_SOURCE_REMOVE;
}

/* Registry callbacks: an Unmount begins, or failed and the volume stays. */
static void mark_unmounting(struct mounted *m, void *arg)
{
	m->unmounting = true;
	queue_changed(m, arg);
}

static void mark_mounted(struct mounted *m, void *arg)
{
	m->unmounting = false;
	queue_changed(m, arg);
}

static gboolean handle_unmount(O2dVolume *vol, GDBusMethodInvocation *inv, GVariant *options,
			       gpointer data)
{
	struct dbus_server *s = data;
	struct o2d_unmount_req req;
	g_autoptr(GError) err = NULL;
	struct volume *v;

	if (!o2d_parse_unmount(g_dbus_method_invocation_get_parameters(inv), &req, &err)) {
		return_error(inv, err);
		return TRUE;
	}
	if (!authorized(inv, "org.ocfs2d.Daemon1.unmount", "unmount volumes"))
		return TRUE;
	v = target_or_reply(s, inv);
	if (!v)
		return TRUE;
	g_atomic_int_inc(&s->busy);
	/*
	 * A Job while it works: its progress is the close's checkpoint; it
	 * cannot be cancelled (the kernel's unmount is not taken back).
	 */
	struct job *job = job_new_attached("unmount", v->device, false);
	struct volume_watch watch = { watch_progress, NULL, job };

	attach_job(s, inv, job);
	g_mutex_lock(&v->lock);
	v->close_watch = &watch;
	g_mutex_unlock(&v->lock);
	registry_update(s->reg, v, mark_unmounting, s);
	if (!volume_unmount(v, req.force, &err)) {
		g_mutex_lock(&v->lock);
		v->close_watch = NULL;
		g_mutex_unlock(&v->lock);
		registry_update(s->reg, v, mark_mounted, s);
		job_end(job, false, err->message);
		return_errno(inv, errno_of(err), err->message);
	} else {
		registry_wait_gone(s->reg, v);
		/* closed: nothing looks at the watch any more */
		g_mutex_lock(&v->lock);
		v->close_watch = NULL;
		g_mutex_unlock(&v->lock);
		if (v->close_result < 0) {
			g_autofree char *m = g_strdup_printf(
				"%s: closing failed (%s); the journal is left for the next mount "
				"to replay", v->device, g_strerror(-v->close_result));

			job_end(job, false, m);
		} else {
			g_autofree char *m = g_strdup_printf("%s unmounted from %s (clean)",
							     v->device, v->mountpoint);

			job_end(job, true, m);
		}
		/* answer on the main loop, after the volume's object is gone
		 * (volume_gone queued that first); busy stays up until then, so
		 * an idle daemon does not exit before the answer is out */
		struct unmount_done *d = g_new0(struct unmount_done, 1);

		d->s = s;
		d->vol = g_object_ref(vol);
		d->inv = inv;
		d->result = v->close_result;
		d->device = g_strdup(v->device);
		g_idle_add(unmount_done_idle, d);
		volume_unref(v);
		return TRUE;
	}
	volume_unref(v);
	call_done(s);
	return TRUE;
}

static gboolean handle_reflink(O2dVolume *vol, GDBusMethodInvocation *inv, const char *source,
			       const char *destination, GVariant *options, gpointer data)
{
	struct dbus_server *s = data;
	struct o2d_reflink_req req;
	g_autoptr(GError) err = NULL;
	struct volume *v;

	if (!o2d_parse_reflink(g_dbus_method_invocation_get_parameters(inv), &req, &err)) {
		return_error(inv, err);
		return TRUE;
	}
	if (!authorized(inv, "org.ocfs2d.Daemon1.reflink", "make reflinks through ocfs2d")) {
		o2d_reflink_req_clear(&req);
		return TRUE;
	}
	v = target_or_reply(s, inv);
	if (!v) {
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

static const char *member_state_name(enum o2lt_member_state st)
{
	switch (st) {
	case O2LT_MEMBER_LIVE: return "live";
	case O2LT_MEMBER_DEAD: return "dead";
	case O2LT_MEMBER_FENCED: return "fenced";
	case O2LT_MEMBER_STALE: return "stale";
	}
	return "unknown";
}

/*
 * The cluster as this node sees it: under the volume's lock, so that the
 * cluster is not left (close_fs) meanwhile; asking the service side for
 * the members needs nothing the lock guards.
 */
static gboolean handle_cluster_state(O2dVolume *vol, GDBusMethodInvocation *inv, GVariant *options,
				     gpointer data)
{
	struct dbus_server *s = data;
	g_autoptr(GError) err = NULL;
	g_autofree struct o2lt_member_info *members = NULL;
	g_autofree struct o2_slotmap_info *sm = g_new0(struct o2_slotmap_info, 1);
	struct o2lc_stats st;
	struct volume *v;
	size_t n;
	int r;

	if (!o2d_parse_cluster_state(g_dbus_method_invocation_get_parameters(inv), &err)) {
		return_error(inv, err);
		return TRUE;
	}
	v = target_or_reply(s, inv);
	if (!v)
		return TRUE;
	g_mutex_lock(&v->lock);
	if (!v->cluster || !v->fs) {
		g_mutex_unlock(&v->lock);
		volume_unref(v);
		return_errno(inv, ENOENT, "the volume is not mounted through a cluster");
		return TRUE;
	}
	GVariantBuilder b, mb, sb, lb;

	g_variant_builder_init(&b, G_VARIANT_TYPE("a{sv}"));
	g_variant_builder_add(&b, "{sv}", "group", g_variant_new_string(cluster_group(v->cluster)));
	n = cluster_members(v->cluster, &members);
	g_variant_builder_init(&mb, G_VARIANT_TYPE("a(uus)"));
	for (size_t i = 0; i < n; i++)
		g_variant_builder_add(&mb, "(uus)", members[i].id.nodeid, members[i].id.pid,
				      member_state_name(members[i].state));
	g_variant_builder_add(&b, "{sv}", "members", g_variant_builder_end(&mb));
	r = o2_slotmap_read(v->fs, sm);
	if (r < 0) {
		g_autofree char *msg = g_strdup_printf("reading the slot map: %s",
						       o2_fs_error(v->fs)[0] ? o2_fs_error(v->fs)
									     : g_strerror(-r));

		g_mutex_unlock(&v->lock);
		volume_unref(v);
		g_variant_builder_clear(&b);
		return_errno(inv, -r, msg);
		return TRUE;
	}
	g_variant_builder_init(&sb, G_VARIANT_TYPE("a(uu)"));
	for (unsigned i = 0; i < sm->nslots; i++)
		if (sm->slots[i].valid)
			g_variant_builder_add(&sb, "(uu)", i, sm->slots[i].node);
	g_variant_builder_add(&b, "{sv}", "slots", g_variant_builder_end(&sb));
	cluster_lock_stats(v->cluster, &st);
	g_mutex_unlock(&v->lock);
	volume_unref(v);
	g_variant_builder_init(&lb, G_VARIANT_TYPE("a{st}"));
	g_variant_builder_add(&lb, "{st}", "taken", (guint64)st.locks);
	g_variant_builder_add(&lb, "{st}", "requests", (guint64)st.requests);
	g_variant_builder_add(&lb, "{st}", "downconverts", (guint64)st.downconverts);
	g_variant_builder_add(&lb, "{st}", "cancels", (guint64)st.cancels);
	g_variant_builder_add(&lb, "{st}", "blocking", (guint64)st.blocking);
	/* the bound lock_cache=N keeps: what the cache holds now, what it let go */
	g_variant_builder_add(&lb, "{st}", "cached", (guint64)st.resources);
	g_variant_builder_add(&lb, "{st}", "idle", (guint64)st.unused);
	g_variant_builder_add(&lb, "{st}", "dropped", (guint64)st.drops);
	/* where a transfer's time goes: waiting for locks, writing back */
	g_variant_builder_add(&lb, "{st}", "waits", (guint64)st.waits);
	g_variant_builder_add(&lb, "{st}", "wait_us", (guint64)st.wait_us);
	g_variant_builder_add(&lb, "{st}", "writeback_us", (guint64)st.writeback_us);
	g_variant_builder_add(&lb, "{st}", "messages",
			      (guint64)(st.requests - st.batched + st.downconverts + st.cancels));
	g_variant_builder_add(&b, "{sv}", "locks", g_variant_builder_end(&lb));
	o2d_volume_complete_cluster_state(vol, inv, g_variant_builder_end(&b));
	return TRUE;
}

/* A kind of FUSE request served: requests_<name> and requests_<name>_us. */
static void add_request_stats(const char *name, uint64_t count, uint64_t us, void *arg)
{
	g_autofree char *n = g_strconcat("requests_", name, NULL);
	g_autofree char *t = g_strconcat("requests_", name, "_us", NULL);

	g_variant_builder_add(arg, "{st}", n, (guint64)count);
	g_variant_builder_add(arg, "{st}", t, (guint64)us);
}

/*
 * The volume's journal and device counters: read under the volume's lock
 * (every commit and flush happens under it), so that the four are of one
 * moment and the volume is not closed meanwhile.  Open to any caller.
 */
static gboolean handle_statistics(O2dVolume *vol, GDBusMethodInvocation *inv, GVariant *options,
				  gpointer data)
{
	struct dbus_server *s = data;
	g_autoptr(GError) err = NULL;
	struct o2_fs_stats st;
	struct volume *v;
	GVariantBuilder b;

	if (!o2d_parse_statistics(g_dbus_method_invocation_get_parameters(inv), &err)) {
		return_error(inv, err);
		return TRUE;
	}
	v = target_or_reply(s, inv);
	if (!v)
		return TRUE;
	g_mutex_lock(&v->lock);
	if (!v->fs) {
		g_mutex_unlock(&v->lock);
		volume_unref(v);
		g_dbus_method_invocation_return_error_literal(inv, O2D_ERROR, O2D_ERROR_NOT_MOUNTED,
							      "that volume is no longer mounted");
		return TRUE;
	}
	o2_fs_stats(v->fs, &st);
	g_mutex_unlock(&v->lock);
	g_variant_builder_init(&b, G_VARIANT_TYPE("a{st}"));
	g_variant_builder_add(&b, "{st}", "journal_commits", (guint64)st.journal_commits);
	g_variant_builder_add(&b, "{st}", "journal_checkpoints", (guint64)st.journal_checkpoints);
	g_variant_builder_add(&b, "{st}", "journal_log_blocks", (guint64)st.journal_log_blocks);
	g_variant_builder_add(&b, "{st}", "journal_times_home", (guint64)st.journal_times_home);
	g_variant_builder_add(&b, "{st}", "device_flushes", (guint64)st.device_flushes);
	g_variant_builder_add(&b, "{st}", "fsyncs", (guint64)st.fsyncs);
	g_variant_builder_add(&b, "{st}", "fsync_commits", (guint64)st.fsync_commits);
	g_variant_builder_add(&b, "{st}", "lock_refreshes", (guint64)st.lock_refreshes);
	g_variant_builder_add(&b, "{st}", "lock_refreshes_kept", (guint64)st.lock_refreshes_kept);
	session_request_stats(v, add_request_stats, &b);
	volume_unref(v);
	o2d_volume_complete_statistics(vol, inv, g_variant_builder_end(&b));
	return TRUE;
}

/* ---- quotas ---- */

/*
 * Quota calls run on a thread of their own: setting limits on a clustered
 * volume may wait for another node's lock, which the bus thread must not.
 */
struct quota_call {
	struct volume *v;
	GDBusMethodInvocation *inv;
	O2dVolume *vol;
	struct o2d_quota_req req;
	bool set;
	GVariantBuilder ids;
};

static int quota_row(void *arg, const struct o2_dquot *dq)
{
	struct quota_call *q = arg;

	g_variant_builder_add(&q->ids, "(utttttttt)", dq->id, (guint64)dq->space,
			      (guint64)dq->inodes, (guint64)dq->bsoft, (guint64)dq->bhard,
			      (guint64)dq->isoft, (guint64)dq->ihard, (guint64)dq->btime,
			      (guint64)dq->itime);
	return 0;
}

static int quota_set_fn(struct o2_fs *fs, void *arg)
{
	const struct o2d_quota_req *req = arg;
	int r = 0;

	if (req->have_id) {
		struct o2_dquot lim = { .bsoft = req->block_soft, .bhard = req->block_hard,
					.isoft = req->inode_soft, .ihard = req->inode_hard };

		r = o2_fs_quota_set_limits(fs, req->type, req->id, &lim);
	}
	if (r == 0 && req->have_grace) {
		uint32_t b = req->block_grace, i = req->inode_grace;

		r = o2_fs_quota_grace(fs, req->type, true, &b, &i);
	}
	return r;
}

static gpointer quota_thread(gpointer p)
{
	struct quota_call *q = p;
	struct volume *v = q->v;
	struct held hd = { .n = 0 };
	uint32_t bgrace = 0, igrace = 0;
	char why[512] = "";
	int r;

	g_variant_builder_init(&q->ids, G_VARIANT_TYPE("a(utttttttt)"));
	g_mutex_lock(&v->lock);
	if (!v->fs) {
		r = -ENODEV;
	} else if (q->set) {
		r = v->opts.ro ? -EROFS : fuseops_run_locked(v, &hd, quota_set_fn, &q->req);
	} else {
		/* read as the disk has it: another node may have folded into it */
		if (v->cluster)
			o2_fs_unlocked_reads(v->fs, true);
		r = o2_fs_quota_grace(v->fs, q->req.type, false, &bgrace, &igrace);
		if (r == 0)
			r = o2_fs_quota_iterate(v->fs, q->req.type, quota_row, q);
		if (v->cluster)
			o2_fs_unlocked_reads(v->fs, false);
	}
	if (r < 0 && v->fs)
		snprintf(why, sizeof(why), "%s", o2_fs_error(v->fs));
	g_mutex_unlock(&v->lock);
	cluster_release(&hd);
	if (r == -ENODEV) {
		g_dbus_method_invocation_return_error_literal(q->inv, O2D_ERROR, O2D_ERROR_NOT_MOUNTED,
							      "that volume is no longer mounted");
	} else if (r < 0) {
		g_autofree char *msg = g_strdup_printf(
			"%s: %s", v->device,
			r == -EOPNOTSUPP ? (q->req.type ? "the volume keeps no group quotas"
							: "the volume keeps no user quotas")
			: why[0]	 ? why
					 : g_strerror(-r));

		return_errno(q->inv, -r, msg);
	} else if (q->set) {
		o2d_volume_complete_set_quota(q->vol, q->inv);
	} else {
		GVariantBuilder info;

		g_variant_builder_init(&info, G_VARIANT_TYPE("a{sv}"));
		g_variant_builder_add(&info, "{sv}", "block_grace", g_variant_new_uint32(bgrace));
		g_variant_builder_add(&info, "{sv}", "inode_grace", g_variant_new_uint32(igrace));
		o2d_volume_complete_quota(q->vol, q->inv, g_variant_builder_end(&info),
					  g_variant_builder_end(&q->ids));
	}
	g_variant_builder_clear(&q->ids);
	volume_unref(v);
	g_object_unref(q->vol);
	g_free(q);
	return NULL;
}

static gboolean start_quota(struct dbus_server *s, O2dVolume *vol, GDBusMethodInvocation *inv,
			    bool set)
{
	g_autoptr(GError) err = NULL;
	struct quota_call *q = g_new0(struct quota_call, 1);
	GVariant *params = g_dbus_method_invocation_get_parameters(inv);
	bool ok = set ? o2d_parse_set_quota(params, &q->req, &err)
		      : o2d_parse_quota(params, &q->req, &err);

	if (!ok) {
		g_free(q);
		return_error(inv, err);
		return TRUE;
	}
	if (set && !authorized(inv, "org.ocfs2d.Daemon1.quota", "set quota limits")) {
		g_free(q);
		return TRUE;
	}
	q->v = target_or_reply(s, inv);
	if (!q->v) {
		g_free(q);
		return TRUE;
	}
	q->inv = inv;
	q->vol = g_object_ref(vol);
	q->set = set;
	g_thread_unref(g_thread_new("quota", quota_thread, q));
	return TRUE;
}

/* Usage and limits of every id (any caller). */
static gboolean handle_quota(O2dVolume *vol, GDBusMethodInvocation *inv, GVariant *options,
			     gpointer data)
{
	return start_quota(data, vol, inv, false);
}

/* Limits or grace periods (root, or polkit's quota action). */
static gboolean handle_set_quota(O2dVolume *vol, GDBusMethodInvocation *inv, GVariant *options,
				 gpointer data)
{
	return start_quota(data, vol, inv, true);
}

/*
 * How full the volume is and how its journal stands: read under the
 * volume's lock, so that space, inodes and the journal are of one moment
 * (the journal's superblock as the last commit or checkpoint left it).
 * Open to any caller.
 */
static gboolean handle_status(O2dVolume *vol, GDBusMethodInvocation *inv, GVariant *options,
			      gpointer data)
{
	struct dbus_server *s = data;
	g_autoptr(GError) err = NULL;
	struct o2_statfs sf;
	struct o2_journal_info ji;
	struct volume *v;
	GVariantBuilder b;
	int r, ro;

	if (!o2d_parse_status(g_dbus_method_invocation_get_parameters(inv), &err)) {
		return_error(inv, err);
		return TRUE;
	}
	v = target_or_reply(s, inv);
	if (!v)
		return TRUE;
	g_mutex_lock(&v->lock);
	if (!v->fs) {
		g_mutex_unlock(&v->lock);
		volume_unref(v);
		g_dbus_method_invocation_return_error_literal(inv, O2D_ERROR, O2D_ERROR_NOT_MOUNTED,
							      "that volume is no longer mounted");
		return TRUE;
	}
	r = o2_statfs(v->fs, &sf);
	if (r >= 0)
		r = o2_journal_info(v->fs, v->slot, &ji);
	if (r < 0) {
		g_autofree char *msg = g_strdup_printf(
			"%s: %s", v->device,
			o2_fs_error(v->fs)[0] ? o2_fs_error(v->fs) : g_strerror(-r));

		g_mutex_unlock(&v->lock);
		volume_unref(v);
		return_errno(inv, -r, msg);
		return TRUE;
	}
	ro = o2_fs_readonly_reason(v->fs);
	g_mutex_unlock(&v->lock);
	volume_unref(v);
	g_variant_builder_init(&b, G_VARIANT_TYPE("a{sv}"));
	g_variant_builder_add(&b, "{sv}", "total_bytes",
			      g_variant_new_uint64(sf.total_clusters * sf.cluster_size));
	g_variant_builder_add(&b, "{sv}", "free_bytes",
			      g_variant_new_uint64(sf.free_clusters * sf.cluster_size));
	g_variant_builder_add(&b, "{sv}", "total_inodes", g_variant_new_uint64(sf.total_inodes));
	g_variant_builder_add(&b, "{sv}", "free_inodes", g_variant_new_uint64(sf.free_inodes));
	g_variant_builder_add(&b, "{sv}", "journal_size",
			      g_variant_new_uint64((guint64)ji.maxlen * ji.block_size));
	/* JBD2: a log whose start is 0 holds nothing to replay */
	g_variant_builder_add(&b, "{sv}", "journal",
			      g_variant_new_string(ji.start ? "pending" : "clean"));
	g_variant_builder_add(&b, "{sv}", "readonly_reason",
			      g_variant_new_string(ro ? g_strerror(-ro) : ""));
	o2d_volume_complete_status(vol, inv, g_variant_builder_end(&b));
	return TRUE;
}

/* ---- jobs: Format and Check ---- */

/* The job's progress moved: show it on every export (main loop). */
static gboolean job_changed_idle(gpointer arg)
{
	struct job_entry *e = arg;

	for (guint i = 0; i < e->s->exports->len; i++) {
		g_autoptr(O2dJob) iface = job_iface(e->s->exports->pdata[i], e->path);

		if (iface)
			show_job_view(iface, e->job);
	}
	return G_SOURCE_REMOVE;
}

/*
 * The job is over: its last progress, then Completed, on every export;
 * then its objects go, and it does.  Queued after every change it
 * reported, so nothing of it runs after this.
 */
static gboolean job_done_idle(gpointer arg)
{
	struct job_entry *e = arg;
	struct dbus_server *s = e->s;

	g_mutex_lock(&s->jobs_lock);
	g_hash_table_remove(s->jobs, e->path);
	g_mutex_unlock(&s->jobs_lock);
	/* a mount's and an unmount's own lines say how they went (volume.c):
	 * of their jobs only a cancel is news */
	if (!job_attached(e->job) || strstr(job_message(e->job), "cancelled"))
		g_message("%s: %s job %s: %s", job_device(e->job), job_operation(e->job),
			  job_success(e->job) ? "done" : "failed", job_message(e->job));
	for (guint i = 0; i < s->exports->len; i++) {
		struct export *x = s->exports->pdata[i];
		g_autoptr(O2dJob) iface = job_iface(x, e->path);

		if (!iface)
			continue;
		show_job_view(iface, e->job);
		g_dbus_interface_skeleton_flush(G_DBUS_INTERFACE_SKELETON(iface));
		o2d_job_emit_completed(iface, job_success(e->job), job_message(e->job));
		g_dbus_object_manager_server_unexport(x->om, e->path);
	}
	job_free(e->job);
	g_free(e->path);
	g_free(e);
	if (g_atomic_int_dec_and_test(&s->busy))
		exit_if_idle(s);
	return G_SOURCE_REMOVE;
}

/* Job callbacks, on the job's thread: to the main loop. */
static void job_changed(struct job *job, void *arg)
{
	g_idle_add(job_changed_idle, arg);
}

static void job_done(struct job *job, void *arg)
{
	g_idle_add(job_done_idle, arg);
}

/* A job that passed its judging: shown everywhere, then answered, then started. */
struct job_start {
	struct job_entry *e;
	O2dManager *manager;
	GDBusMethodInvocation *inv;
};

static gboolean job_start_idle(gpointer arg)
{
	struct job_start *d = arg;
	struct job_entry *e = d->e;

	for (guint i = 0; i < e->s->exports->len; i++)
		export_job(e->s->exports->pdata[i], e);
	if (!strcmp(job_operation(e->job), "format"))
		o2d_manager_complete_format(d->manager, d->inv, e->path);
	else
		o2d_manager_complete_check(d->manager, d->inv, e->path);
	g_message("%s: %s job %s started (uid %u)", job_device(e->job), job_operation(e->job),
		  e->path, e->uid);
	job_start(e->job, job_changed, job_done, e);
	g_object_unref(d->manager);
	g_free(d);
	return G_SOURCE_REMOVE;
}

/* A job's entry, its path and its caller (busy until job_done_idle). */
static struct job_entry *add_job(struct dbus_server *s, GDBusMethodInvocation *inv,
				 struct job *job)
{
	struct job_entry *e = g_new0(struct job_entry, 1);

	e->s = s;
	e->job = job;
	e->uid = caller_uid(inv);
	e->path = g_strdup_printf(O2D_JOBS_PATH "/%u", g_atomic_int_add(&s->last_job, 1) + 1);
	g_mutex_lock(&s->jobs_lock);
	g_hash_table_insert(s->jobs, e->path, e);
	g_mutex_unlock(&s->jobs_lock);
	g_atomic_int_inc(&s->busy);
	return e;
}

static gboolean job_export_idle(gpointer arg)
{
	struct job_entry *e = arg;

	for (guint i = 0; i < e->s->exports->len; i++)
		export_job(e->s->exports->pdata[i], e);
	return G_SOURCE_REMOVE;
}

/*
 * A job whose work the calling handler does (a Mount, an Unmount): shown
 * everywhere (queued before anything it reports), ready for job_progress.
 */
static struct job_entry *attach_job(struct dbus_server *s, GDBusMethodInvocation *inv,
				    struct job *job)
{
	struct job_entry *e = add_job(s, inv, job);

	job_start(job, job_changed, job_done, e);
	g_idle_add(job_export_idle, e);
	return e;
}

/* Give job its object and start it from the main loop (busy until job_done_idle). */
static void launch_job(struct dbus_server *s, O2dManager *manager, GDBusMethodInvocation *inv,
		       struct job *job)
{
	struct job_entry *e = add_job(s, inv, job);
	struct job_start *d = g_new0(struct job_start, 1);

	d->e = e;
	d->manager = g_object_ref(manager);
	d->inv = inv;
	g_idle_add(job_start_idle, d);
}

static gboolean handle_format(O2dManager *manager, GDBusMethodInvocation *inv, const char *device,
			      GVariant *options, gpointer data)
{
	struct dbus_server *s = data;
	struct o2d_format_req req;
	g_autoptr(GError) err = NULL;
	struct job *job;

	if (!o2d_parse_format(g_dbus_method_invocation_get_parameters(inv), &req, &err)) {
		return_error(inv, err);
		return TRUE;
	}
	if (!authorized(inv, "org.ocfs2d.Daemon1.format", "format devices")) {
		o2d_format_req_clear(&req);
		return TRUE;
	}
	job = job_new_format(&req, &err);
	o2d_format_req_clear(&req);
	if (!job)
		return_error(inv, err);
	else
		launch_job(s, manager, inv, job);
	return TRUE;
}

static gboolean handle_check(O2dManager *manager, GDBusMethodInvocation *inv, const char *device,
			     GVariant *options, gpointer data)
{
	struct dbus_server *s = data;
	struct o2d_check_req req;
	g_autoptr(GError) err = NULL;
	struct job *job;

	if (!o2d_parse_check(g_dbus_method_invocation_get_parameters(inv), &req, &err)) {
		return_error(inv, err);
		return TRUE;
	}
	if (!authorized(inv, "org.ocfs2d.Daemon1.check", "check devices")) {
		o2d_check_req_clear(&req);
		return TRUE;
	}
	job = job_new_check(&req, &err);
	o2d_check_req_clear(&req);
	if (!job)
		return_error(inv, err);
	else
		launch_job(s, manager, inv, job);
	return TRUE;
}

/*
 * Job.Cancel: the entry is looked up and asked under the jobs' lock, which
 * job_done_idle takes to remove it before freeing it.
 */
static gboolean handle_cancel(O2dJob *iface, GDBusMethodInvocation *inv, GVariant *options,
			      gpointer data)
{
	struct dbus_server *s = data;
	g_autoptr(GError) err = NULL;
	struct job_entry *e;
	bool found, mine, ok = false;
	guint32 uid;

	if (!o2d_parse_cancel(g_dbus_method_invocation_get_parameters(inv), &err)) {
		return_error(inv, err);
		return TRUE;
	}
	uid = caller_uid(inv);
	g_mutex_lock(&s->jobs_lock);
	e = g_hash_table_lookup(s->jobs, g_dbus_method_invocation_get_object_path(inv));
	found = e != NULL;
	/* root, or whoever started it (polkit let them) */
	mine = e && (uid == 0 || uid == e->uid);
	if (mine)
		ok = job_cancel(e->job);
	g_mutex_unlock(&s->jobs_lock);
	if (found && !mine)
		g_dbus_method_invocation_return_error(inv, O2D_ERROR, O2D_ERROR_NOT_AUTHORIZED,
						      "only root or the user who started a job may "
						      "cancel it (caller uid %d)",
						      uid == G_MAXUINT32 ? -1 : (int)uid);
	else if (!found)
		g_dbus_method_invocation_return_error_literal(inv, O2D_ERROR, O2D_ERROR_NOT_FOUND,
							      "that job is over");
	else if (!ok)
		g_dbus_method_invocation_return_error_literal(
			inv, O2D_ERROR, O2D_ERROR_NOT_CANCELABLE,
			"the job can no longer be cancelled (a format that has begun writing "
			"runs to its end, or the job is ending)");
	else
		o2d_job_complete_cancel(iface, inv);
	return TRUE;
}

/* ---- connections ---- */

static void export_free(struct export *x)
{
	if (x->closed_id)
		g_signal_handler_disconnect(x->conn, x->closed_id);
	g_dbus_object_manager_server_set_connection(x->om, NULL);
	g_object_unref(x->om);
	g_object_unref(x->manager);
	g_object_unref(x->conn);
	g_free(x);
}

/* A registry callback: collect the entries (in a GPtrArray). */
static void collect_entry(struct mounted *m, void *arg)
{
	g_ptr_array_add(arg, m);
}

static struct export *export_on(struct dbus_server *s, GDBusConnection *conn)
{
	struct export *x = g_new0(struct export, 1);
	g_autoptr(O2dObjectSkeleton) obj = o2d_object_skeleton_new(O2D_MANAGER_PATH);
	g_autoptr(GPtrArray) list = g_ptr_array_new();

	x->s = s;
	x->conn = g_object_ref(conn);
	x->om = g_dbus_object_manager_server_new(O2D_ROOT_PATH);
	x->manager = o2d_manager_skeleton_new();
	g_dbus_interface_skeleton_set_flags(
		G_DBUS_INTERFACE_SKELETON(x->manager),
		G_DBUS_INTERFACE_SKELETON_FLAGS_HANDLE_METHOD_INVOCATIONS_IN_THREAD);
	o2d_manager_set_version(x->manager, OCFS2D_VERSION);
	g_signal_connect(x->manager, "handle-mount", G_CALLBACK(handle_mount), s);
	g_signal_connect(x->manager, "handle-format", G_CALLBACK(handle_format), s);
	g_signal_connect(x->manager, "handle-check", G_CALLBACK(handle_check), s);
	o2d_object_skeleton_set_manager(obj, x->manager);
	g_dbus_object_manager_server_export(x->om, G_DBUS_OBJECT_SKELETON(obj));
	registry_foreach(s->reg, collect_entry, list);
	/* entries are freed on the main loop only (volume_gone_idle), so the
	 * list stays good here, outside the registry's lock */
	for (guint i = 0; i < list->len; i++)
		export_volume(x, list->pdata[i]);
	/* jobs are added and removed on the main loop only: this one */
	GHashTableIter it;
	gpointer e;

	g_mutex_lock(&s->jobs_lock);
	g_hash_table_iter_init(&it, s->jobs);
	while (g_hash_table_iter_next(&it, NULL, &e))
		export_job(x, e);
	g_mutex_unlock(&s->jobs_lock);
	set_mounts(x);
	g_dbus_object_manager_server_set_connection(x->om, conn);
	g_ptr_array_add(s->exports, x);
	return x;
}

static void unexport_from(struct dbus_server *s, GDBusConnection *conn)
{
	for (guint i = 0; i < s->exports->len; i++) {
		struct export *x = s->exports->pdata[i];

		if (x->conn == conn) {
			g_ptr_array_remove_index_fast(s->exports, i);
			export_free(x);
			return;
		}
	}
}

static void on_peer_closed(GDBusConnection *conn, gboolean remote_vanished, GError *error,
			   gpointer data)
{
	unexport_from(data, conn);
}

static gboolean on_new_connection(GDBusServer *srv, GDBusConnection *conn, gpointer data)
{
	struct export *x = export_on(data, conn);

	x->closed_id = g_signal_connect(conn, "closed", G_CALLBACK(on_peer_closed), data);
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
	export_on(data, conn);
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
		unexport_from(data, conn);
}

/* ---- start and stop ---- */

void dbus_server_exit_when_idle(struct dbus_server *s, GMainLoop *loop)
{
	g_autofree char *lock = g_strconcat(s->socket_path, O2D_CONTROL_LOCK_SUFFIX, NULL);

	s->idle_loop = loop;
	s->idle_lock = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (s->idle_lock < 0)
		g_warning("%s: %s (a client connecting as this daemon exits may be refused)", lock,
			  g_strerror(errno));
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

/*
 * Free what s holds and s (nothing may use it any more).  The lifetime
 * lock's descriptor stays open: it goes with the process.
 */
static void server_free(struct dbus_server *s)
{
	registry_free(s->reg);
	g_ptr_array_unref(s->exports);
	g_hash_table_unref(s->jobs);
	g_mutex_clear(&s->jobs_lock);
	g_free(s->socket_path);
	g_free(s);
}

struct dbus_server *dbus_server_start(const char *path, bool system_bus, GError **err)
{
	g_autofree char *dir = g_path_get_dirname(path);
	g_autofree char *addr = NULL;
	g_autofree char *guid = g_dbus_generate_guid();
	g_autoptr(GDBusAuthObserver) obs = g_dbus_auth_observer_new();
	struct dbus_server *s;
	struct stat st;

	(void)o2d_error_quark(); /* the error names, registered before any call */
	if (g_mkdir_with_parents(dir, 0755) < 0) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(errno), "%s: %s", dir,
			    g_strerror(errno));
		return NULL;
	}
	if (lstat(path, &st) == 0) {
		/* a live daemon answers; a dead one left its socket behind */
		if (daemon_answers(path)) {
			g_set_error(err, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE,
				    "another ocfs2d is running (it answers on %s)", path);
			return NULL;
		}
		unlink(path);
	}
	s = g_new0(struct dbus_server, 1);
	s->reg = registry_new();
	s->idle_lock = -1;
	s->exports = g_ptr_array_new();
	g_mutex_init(&s->jobs_lock);
	s->jobs = g_hash_table_new(g_str_hash, g_str_equal);
	g_signal_connect(obs, "authorize-authenticated-peer", G_CALLBACK(on_authorize_peer), NULL);
	g_signal_connect(obs, "allow-mechanism", G_CALLBACK(on_allow_mechanism), NULL);
	addr = g_strconcat("unix:path=", path, NULL);
	mode_t old = umask(077);
	s->server = g_dbus_server_new_sync(addr, G_DBUS_SERVER_FLAGS_NONE, guid, obs, NULL, err);
	umask(old);
	if (!s->server) {
		server_free(s);
		return NULL;
	}
	s->socket_path = g_strdup(path);
	g_signal_connect(s->server, "new-connection", G_CALLBACK(on_new_connection), s);
	g_dbus_server_start(s->server);
	if (system_bus)
		s->bus_owner = g_bus_own_name(G_BUS_TYPE_SYSTEM, O2D_BUS_NAME,
					      G_BUS_NAME_OWNER_FLAGS_DO_NOT_QUEUE, on_bus_acquired,
					      on_name_acquired, on_name_lost, s, NULL);
	return s;
}

/* Whether jobs still run (from the main loop). */
static bool jobs_left(struct dbus_server *s)
{
	guint n;

	g_mutex_lock(&s->jobs_lock);
	n = g_hash_table_size(s->jobs);
	g_mutex_unlock(&s->jobs_lock);
	return n > 0;
}

/*
 * Jobs end before the daemon does: checks are cancelled, a format that
 * writes is let finish (stopped half-way its device would hold no
 * volume); their clients hear Completed.
 */
static void end_jobs(struct dbus_server *s)
{
	GHashTableIter it;
	gpointer e;

	g_mutex_lock(&s->jobs_lock);
	if (g_hash_table_size(s->jobs))
		g_message("waiting for %u jobs to end (checks are cancelled, a format finishes)",
			  g_hash_table_size(s->jobs));
	g_hash_table_iter_init(&it, s->jobs);
	while (g_hash_table_iter_next(&it, NULL, &e))
		job_cancel(((struct job_entry *)e)->job);
	g_mutex_unlock(&s->jobs_lock);
	while (jobs_left(s))
		g_main_context_iteration(NULL, TRUE);
}

void dbus_server_stop(struct dbus_server *s)
{
	if (s->idle_retry)
		g_source_remove(s->idle_retry);
	s->idle_retry = 0;
	end_jobs(s);
	/* what the loop left queued: objects to remove, answers to send */
	while (g_main_context_iteration(NULL, FALSE))
		;
	if (s->bus_owner)
		g_bus_unown_name(s->bus_owner);
	s->bus_owner = 0;
	g_dbus_server_stop(s->server);
	g_clear_object(&s->server);
	while (s->exports->len) {
		struct export *x = g_ptr_array_steal_index_fast(s->exports, s->exports->len - 1);

		/* the last answers (an Unmount that made us idle) go out first */
		g_dbus_connection_flush_sync(x->conn, NULL, NULL);
		export_free(x);
	}
	unlink(s->socket_path);
	/*
	 * A method call still running (a Mount replaying a journal when a
	 * signal came) goes on using s on its worker thread: then s is left
	 * to the process's exit rather than freed under it.
	 */
	if (!g_atomic_int_get(&s->busy))
		server_free(s);
}

/* A registry callback: reference each volume not asked to go yet (asked, list in arg). */
struct to_unmount {
	GHashTable *asked;
	GPtrArray *list;
};

static void collect_unasked(struct mounted *m, void *arg)
{
	struct to_unmount *t = arg;

	if (g_hash_table_add(t->asked, m->v))
		g_ptr_array_add(t->list, volume_ref(m->v));
}

void dbus_server_unmount_all(struct dbus_server *s)
{
	/* a Mount finishing meanwhile registers one more: ask until none is left */
	g_autoptr(GHashTable) asked = g_hash_table_new(NULL, NULL);

	while (registry_count(s->reg)) {
		g_autoptr(GPtrArray) list = g_ptr_array_new();
		struct to_unmount t = { asked, list };

		registry_foreach(s->reg, collect_unasked, &t);
		for (guint i = 0; i < list->len; i++) {
			g_autoptr(GError) err = NULL;

			if (!volume_unmount(list->pdata[i], true, &err))
				g_warning("%s", err->message);
			volume_unref(list->pdata[i]);
		}
		registry_wait_removal(s->reg);
	}
}
