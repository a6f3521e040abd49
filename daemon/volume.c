// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * A mounted volume: opening it safely, its FUSE and ticker threads, and
 * closing it cleanly however the session ends (our unmount, umount(8), or
 * an aborted connection).
 *
 * Single node for now: the volume is opened with the local lock backend,
 * so nothing else may be using it.  On this machine an exclusive flock on
 * the device keeps a second ocfs2d or an ocfs2ctl write verb away; for
 * other machines the slot map and the journals tell: a clustered volume
 * with a slot in use is refused.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "ocfs2d.h"

#define O2_JOURNAL_DIRTY_FLAG 0x1 /* OCFS2_JOURNAL_DIRTY_FL in ij_flags */

/* ---- checks before opening read-write ---- */

/*
 * Nothing but us may use the volume: on a clustered volume no slot may be
 * in use, and no journal but ours may be dirty (someone is using it, or
 * crashed and is not yet recovered: without the cluster stack we cannot
 * tell which).  A local volume has one user by definition.
 */
static bool check_unused(struct o2_fs *fs, const struct volume *v, GError **err)
{
	const struct o2_super_info *si = o2_fs_super(fs);
	bool local = si->feature_incompat & O2_FEATURE_INCOMPAT_LOCAL_MOUNT;
	struct o2_slotmap_info *sm;
	int r;

	if (v->opts.slot >= si->max_slots) {
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
			    "%s: slot %u does not exist (the volume has %u)", v->device,
			    v->opts.slot, si->max_slots);
		return false;
	}
	if (local)
		return true;
	sm = g_new0(struct o2_slotmap_info, 1);
	r = o2_slotmap_read(fs, sm);
	if (r < 0) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r), "%s: reading the slot map: %s",
			    v->device, o2_fs_error(fs)[0] ? o2_fs_error(fs) : g_strerror(-r));
		g_free(sm);
		return false;
	}
	for (unsigned i = 0; i < sm->nslots; i++)
		if (sm->slots[i].valid) {
			g_set_error(err, G_IO_ERROR, G_IO_ERROR_BUSY,
				    "%s: slot %u is in use by node %u: the volume is mounted on "
				    "another node (ocfs2d mounts %s-stack volumes only while no "
				    "other node uses them, until its cluster support lands)",
				    v->device, i, sm->slots[i].node, o2_fs_stack_name(fs));
			g_free(sm);
			return false;
		}
	g_free(sm);
	for (unsigned i = 0; i < si->max_slots; i++) {
		struct o2_journal_info ji;

		if (i == v->opts.slot)
			continue;
		r = o2_journal_info(fs, i, &ji);
		if (r < 0) {
			g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r),
				    "%s: reading the journal of slot %u: %s", v->device, i,
				    o2_fs_error(fs)[0] ? o2_fs_error(fs) : g_strerror(-r));
			return false;
		}
		if (ji.ij_flags & O2_JOURNAL_DIRTY_FLAG) {
			g_set_error(err, G_IO_ERROR, G_IO_ERROR_BUSY,
				    "%s: the journal of slot %u is in use or needs recovery: another "
				    "node has the volume mounted or crashed; if no node uses it, "
				    "replay it with fsck.ocfs2 first",
				    v->device, i);
			return false;
		}
	}
	return true;
}

static bool open_fs(struct volume *v, GError **err)
{
	char msg[512] = "";
	unsigned devflags = O2_DEV_EXCLUSIVE | (v->opts.ro ? O2_DEV_RDONLY : 0);
	struct o2_fs *probe = NULL;
	int r;

	r = o2_blockdev_open_file(v->device, devflags, &v->dev);
	if (r < 0) {
		v->dev = NULL;
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r), "%s: %s", v->device,
			    r == -EBUSY ? "in use on this machine (mounted already, or an ocfs2ctl "
					  "write verb is running)"
					: g_strerror(-r));
		return false;
	}
	/* look before touching anything: a read-only open changes nothing */
	r = o2_fs_open(v->dev, O2_OPEN_RDONLY, &probe, msg, sizeof(msg));
	if (r < 0) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r), "%s: %s", v->device,
			    r == -ENODATA ? "not an OCFS2 volume" : msg);
		return false;
	}
	bool ok = check_unused(probe, v, err);

	o2_fs_close(probe);
	if (!ok)
		return false;

	struct o2_open_opts oo = {
		.flags = (v->opts.ro ? O2_OPEN_RDONLY : O2_OPEN_RDWR) | (v->opts.acl ? O2_OPEN_ACL : 0),
		.slot = v->opts.slot,
		.commit_interval_ms = v->opts.commit_s * 1000,
		.cache_blocks = 32768,
		/* 32 MiB of 4 KiB blocks: ready before the first request needs them */
		.cache_prefill = 8192,
	};
	r = o2_fs_open_opts(v->dev, &oo, &v->fs, msg, sizeof(msg));
	if (r < 0) {
		v->fs = NULL;
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r), "%s: %s", v->device, msg);
		return false;
	}
	const struct o2_super_info *si = o2_fs_super(v->fs);

	v->root = si->root_blkno;
	v->cluster_size = si->cluster_size;
	v->block_size = si->block_size;
	return true;
}

/* ---- threads ---- */

/* Commit the running transaction on the commit interval. */
static gpointer tick_main(gpointer arg)
{
	struct volume *v = arg;
	gint64 period = (gint64)v->opts.commit_s * G_TIME_SPAN_SECOND;

	g_mutex_lock(&v->tick_mu);
	while (!v->stopping) {
		gint64 until = g_get_monotonic_time() + MIN(period, G_TIME_SPAN_SECOND);

		g_cond_wait_until(&v->tick_cond, &v->tick_mu, until);
		if (v->stopping)
			break;
		g_mutex_unlock(&v->tick_mu);
		g_mutex_lock(&v->lock);
		if (v->fs && !v->opts.ro)
			volume_note_locked(v, "timed commit", o2_fs_tick(v->fs));
		g_mutex_unlock(&v->lock);
		g_mutex_lock(&v->tick_mu);
	}
	g_mutex_unlock(&v->tick_mu);
	return NULL;
}

static void stop_ticker(struct volume *v)
{
	if (!v->tick_thread)
		return;
	g_mutex_lock(&v->tick_mu);
	v->stopping = true;
	g_cond_broadcast(&v->tick_cond);
	g_mutex_unlock(&v->tick_mu);
	g_thread_join(v->tick_thread);
	v->tick_thread = NULL;
}

static int close_fs(struct volume *v)
{
	int r = 0;

	g_mutex_lock(&v->lock);
	if (v->fs) {
		char why[256];

		fuseops_forget_all(v);
		r = o2_fs_close_why(v->fs, why, sizeof(why));
		if (r < 0)
			g_warning("%s: closing the volume failed: %s; the journal is left for the "
				  "next mount to replay", v->device, why);
		v->fs = NULL;
	}
	g_mutex_unlock(&v->lock);
	if (v->dev) {
		o2_blockdev_free(v->dev);
		v->dev = NULL;
	}
	return r;
}

/*
 * One thread serving requests, spinning for a short while (poll_us) after
 * each before it sleeps: a client issuing requests back to back finds this
 * thread awake, so no request pays for waking it - on virtual machines a
 * cross-CPU wakeup of an idle CPU is most of a round trip.
 */
static int polling_loop(struct volume *v)
{
	struct fuse_session *se = v->se;
	struct fuse_buf buf = { 0 };
	int fd = fuse_session_fd(se), fl = fcntl(fd, F_GETFL), r = 0;
	gint64 spin_until = 0;

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	while (!fuse_session_exited(se)) {
		r = fuse_session_receive_buf(se, &buf);
		if (r == -EAGAIN) {
			if (g_get_monotonic_time() < spin_until)
				continue;
			struct pollfd p = { .fd = fd, .events = POLLIN };

			if (poll(&p, 1, -1) < 0 && errno != EINTR) {
				r = -errno;
				break;
			}
			continue;
		}
		if (r == -EINTR)
			continue;
		if (r <= 0)
			break;
		fuse_session_process_buf(se, &buf);
		spin_until = g_get_monotonic_time() + v->opts.poll_us;
	}
	free(buf.mem);
	fuse_session_reset(se);
	return r < 0 ? r : 0;
}

static gpointer fuse_main(gpointer arg)
{
	struct volume *v = arg;
	int r;

	if (v->use_uring) {
		r = uring_serve(v);
	} else if (v->opts.poll_us) {
		r = polling_loop(v);
	} else if (v->opts.threads > 1) {
		struct fuse_loop_config *cfg = fuse_loop_cfg_create();

		fuse_loop_cfg_set_clone_fd(cfg, 1);
		fuse_loop_cfg_set_max_threads(cfg, v->opts.threads);
		fuse_loop_cfg_set_idle_threads(cfg, MIN(v->opts.threads, 4u));
		r = fuse_session_loop_mt(v->se, cfg);
		fuse_loop_cfg_destroy(cfg);
	} else {
		r = fuse_session_loop(v->se);
	}
	if (r < 0 && r != -ENODEV && r != -ECONNABORTED)
		g_warning("%s: FUSE session ended: %s", v->mountpoint, g_strerror(-r));
	/* the kernel side is gone (or going): no request can reach us now */
	fuse_session_unmount(v->se);
	stop_ticker(v);
	v->close_result = close_fs(v);
	g_message("%s: unmounted from %s%s", v->device, v->mountpoint,
		  v->close_result < 0 ? " (journal left dirty)" : " (clean)");
	if (v->gone)
		v->gone(v, v->gone_arg);
	return NULL;
}

/* ---- mount and unmount ---- */

static void volume_release(struct volume *v)
{
	if (v->se)
		fuse_session_destroy(v->se);
	if (v->nodes)
		g_hash_table_destroy(v->nodes);
	g_mutex_clear(&v->lock);
	g_mutex_clear(&v->tick_mu);
	g_cond_clear(&v->tick_cond);
	g_free(v->device);
	g_free(v->mountpoint);
	g_free(v);
}

/* A mount point left by a daemon that died answers ENOTCONN: detach it. */
static bool prepare_mountpoint(const char *mnt, GError **err)
{
	struct stat st;
	struct statvfs sv;

	/* stat() may be answered from the kernel's attribute cache even when
	 * the daemon is gone; statfs() is never cached */
	if ((stat(mnt, &st) < 0 && errno == ENOTCONN) ||
	    (statvfs(mnt, &sv) < 0 && errno == ENOTCONN)) {
		if (umount2(mnt, MNT_DETACH) == 0)
			g_message("%s: detached a stale FUSE mount left by a dead daemon", mnt);
	}
	if (stat(mnt, &st) < 0) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(errno), "mount point %s: %s", mnt,
			    g_strerror(errno));
		return false;
	}
	if (!S_ISDIR(st.st_mode)) {
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_NOT_DIRECTORY,
			    "mount point %s is not a directory", mnt);
		return false;
	}
	return true;
}

/*
 * The FUSE connection number of the mount at mnt (its device number, as
 * /sys/fs/fuse/connections names it), from /proc/self/mountinfo: a stat()
 * would be a FUSE request that nobody serves yet.
 */
static unsigned connection_id(const char *mnt)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	unsigned id = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned maj, mn;
		char path[4096];

		/* id parent major:minor root mountpoint ... (the last match wins) */
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &mn, path) == 3 &&
		    !strcmp(path, mnt))
			id = mn | (maj << 20);
	}
	fclose(f);
	return id;
}

bool volume_mount(const char *device, const char *mountpoint, const struct mount_opts *opts,
		  void (*gone)(struct volume *, void *), void *gone_arg, struct volume **ret,
		  GError **err)
{
	struct volume *v = g_new0(struct volume, 1);
	char *absmnt = realpath(mountpoint, NULL);

	g_mutex_init(&v->lock);
	g_mutex_init(&v->tick_mu);
	g_cond_init(&v->tick_cond);
	char *absdev = realpath(device, NULL);

	v->device = g_strdup(absdev ? absdev : device);
	free(absdev);
	v->mountpoint = g_strdup(absmnt ? absmnt : mountpoint);
	free(absmnt);
	v->opts = *opts;
	v->gone = gone;
	v->gone_arg = gone_arg;
	v->refs = 1;
	v->nodes = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);

	if (!prepare_mountpoint(v->mountpoint, err) || !open_fs(v, err))
		goto fail;
	struct fuse_lowlevel_ops ops;

	fuseops_table(v, &ops);
	v->se = session_new(v, &ops, err);
	if (!v->se)
		goto fail;
	v->use_uring = uring_wanted(v);
	if (fuse_session_mount(v->se, v->mountpoint) != 0) {
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "mounting %s on %s failed (is /dev/fuse there, and are we root?)",
			    v->device, v->mountpoint);
		goto fail;
	}
	int r = session_hook(v->se);

	if (r < 0) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r),
			    "%s: cannot hook the FUSE session: %s", v->device, g_strerror(-r));
		fuse_session_unmount(v->se);
		goto fail;
	}
	v->conn_id = connection_id(v->mountpoint);
	v->tick_thread = v->opts.ro ? NULL : g_thread_new("ocfs2d-tick", tick_main, v);
	v->fuse_thread = g_thread_new("ocfs2d-fuse", fuse_main, v);
	g_message("%s: mounted on %s (%s volume, slot %u%s)", v->device, v->mountpoint,
		  o2_fs_stack_name(v->fs), v->opts.slot, v->opts.ro ? ", read-only" : "");
	*ret = v;
	return true;

fail:
	close_fs(v);
	volume_release(v);
	return false;
}

/* Abort the FUSE connection: every pending and future request fails. */
static void abort_connection(struct volume *v)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/sys/fs/fuse/connections/%u/abort", v->conn_id);
	if (access("/sys/fs/fuse/connections/", F_OK) == 0 && access(path, F_OK) < 0 &&
	    mount("fusectl", "/sys/fs/fuse/connections", "fusectl", 0, NULL) < 0)
		g_warning("mounting fusectl on /sys/fs/fuse/connections: %s", g_strerror(errno));
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		g_warning("%s: cannot abort the FUSE connection (%s): %s", v->mountpoint, path,
			  g_strerror(errno));
		return;
	}
	if (write(fd, "1", 1) < 0)
		g_warning("%s: aborting the FUSE connection: %s", v->mountpoint, g_strerror(errno));
	close(fd);
}

bool volume_unmount(struct volume *v, bool force, GError **err)
{
	if (umount2(v->mountpoint, 0) == 0)
		return true;
	int e = errno;

	if (e == EINVAL || e == ENOENT)
		return true; /* not mounted any more: the session is ending */
	if (e != EBUSY || !force) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(e), "unmounting %s: %s%s",
			    v->mountpoint, g_strerror(e),
			    e == EBUSY ? " (files are open or a process works in it)" : "");
		return false;
	}
	/* busy and forced: detach, then cut the connection so the volume can close */
	if (umount2(v->mountpoint, MNT_DETACH) < 0)
		g_warning("%s: detaching: %s", v->mountpoint, g_strerror(errno));
	abort_connection(v);
	return true;
}

struct volume *volume_ref(struct volume *v)
{
	g_atomic_int_inc(&v->refs);
	return v;
}

void volume_unref(struct volume *v)
{
	if (!g_atomic_int_dec_and_test(&v->refs))
		return;
	if (v->fuse_thread)
		g_thread_join(v->fuse_thread);
	volume_release(v);
}
