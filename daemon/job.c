// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Jobs (job.h): a format or a check on a thread of its own, or a mount or
 * an unmount its caller does; their progress and their cancellation.  The
 * judging before a format or check starts runs on the caller's thread (a
 * GDBus worker), so that every refusal is the method's error and a job,
 * once it exists, only has its work left to do.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "job.h"
#include "o2fs/blockdev.h"
#include "o2fs/o2fs.h"

enum job_op { JOB_FORMAT, JOB_CHECK, JOB_MOUNT, JOB_UNMOUNT };

static const char *const op_names[] = { "format", "check", "mount", "unmount" };

struct job {
	enum job_op op;
	bool attached; /* its caller does the work (a mount, an unmount) */
	char *device;
	struct o2_blockdev *dev; /* open, flocked, until the work is over */
	/* a format's options, and the strings they point into */
	struct o2_mkfs_opts mkfs;
	char *label, *stack, *cluster_name;
	uint64_t time_ns; /* the option time, for mkfs's clock */
	bool dry_run;

	GThread *thread;
	job_fn changed, done;
	void *arg;

	GMutex lock; /* guards what follows */
	struct job_view view;
	bool cancel;	   /* asked to stop */
	gint64 started;	   /* monotonic, µs */
	gint64 last_time;  /* when changed was last called */
	double last_shown; /* the progress it showed */
	bool success;
	char *message;
};

static struct job *job_alloc(enum job_op op, const char *device)
{
	struct job *j = g_new0(struct job, 1);

	j->op = op;
	j->device = g_strdup(device);
	g_mutex_init(&j->lock);
	return j;
}

void job_free(struct job *j)
{
	if (!j)
		return;
	if (j->thread)
		g_thread_join(j->thread);
	if (j->dev)
		o2_blockdev_free(j->dev);
	g_free(j->device);
	g_free(j->label);
	g_free(j->stack);
	g_free(j->cluster_name);
	g_free(j->message);
	g_mutex_clear(&j->lock);
	g_free(j);
}

const char *job_operation(const struct job *j)
{
	return op_names[j->op];
}

bool job_attached(const struct job *j)
{
	return j->attached;
}

struct job *job_new_attached(const char *operation, const char *device, bool cancelable)
{
	struct job *j = job_alloc(!strcmp(operation, "mount") ? JOB_MOUNT : JOB_UNMOUNT, device);

	j->attached = true;
	j->view.cancelable = cancelable;
	return j;
}

const char *job_device(const struct job *j)
{
	return j->device;
}

/* ---- judging a device ---- */

/*
 * Where the kernel has path mounted (a block device by its number, an
 * image by the mount's source, as a FUSE mount of it names it), in buf; or
 * NULL.
 */
static const char *mounted_on(const char *path, const struct stat *st, char *buf, size_t len)
{
	g_autofree char *text = NULL;
	g_auto(GStrv) lines = NULL;
	char *real = realpath(path, NULL);
	const char *found = NULL;

	if (!g_file_get_contents("/proc/self/mountinfo", &text, NULL, NULL)) {
		free(real);
		return NULL;
	}
	lines = g_strsplit(text, "\n", -1);
	for (char **l = lines; *l && !found; l++) {
		unsigned maj, min;
		char mnt[4096], src[4096];
		const char *sep = strstr(*l, " - ");

		if (!sep || sscanf(*l, "%*u %*u %u:%u %*s %4095s", &maj, &min, mnt) != 3 ||
		    sscanf(sep + 3, "%*s %4095s", src) != 1)
			continue;
		if ((S_ISBLK(st->st_mode) && major(st->st_rdev) == maj &&
		     minor(st->st_rdev) == min) ||
		    !strcmp(src, path) || (real && !strcmp(src, real))) {
			snprintf(buf, len, "%s", mnt);
			found = buf;
		}
	}
	free(real);
	return found;
}

/* Open device for a job, flocked, or set *err (NotFound, DeviceBusy, ...). */
static struct o2_blockdev *open_device(const char *device, bool rdonly, GError **err)
{
	struct o2_blockdev *dev;
	struct stat st;
	char where[4096];
	int r;

	if (stat(device, &st) < 0) {
		g_set_error(err, O2D_ERROR, o2d_error_from_errno(errno), "%s: %s", device,
			    g_strerror(errno));
		return NULL;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
			    "%s is neither a block device nor an image file", device);
		return NULL;
	}
	if (mounted_on(device, &st, where, sizeof(where))) {
		g_set_error(err, O2D_ERROR, O2D_ERROR_DEVICE_BUSY, "%s is mounted on %s", device,
			    where);
		return NULL;
	}
	r = o2_blockdev_open_file(device, O2_DEV_EXCLUSIVE | (rdonly ? O2_DEV_RDONLY : 0), &dev);
	if (r == -EBUSY) {
		g_set_error(err, O2D_ERROR, O2D_ERROR_DEVICE_BUSY,
			    "%s is in use: an ocfs2d has it mounted, or another job or an "
			    "offline ocfs2ctl verb works on it", device);
		return NULL;
	}
	if (r < 0) {
		g_set_error(err, O2D_ERROR, o2d_error_from_errno(-r), "%s: %s", device,
			    g_strerror(-r));
		return NULL;
	}
	return dev;
}

/* Whether dev holds something a format would destroy: why in buf, or NULL. */
static const char *holds_data(struct o2_blockdev *dev, char *buf, size_t len)
{
	char errbuf[256] = "";
	struct o2_fs *fs = NULL;
	int r = o2_fs_open(dev, O2_OPEN_RDONLY, &fs, errbuf, sizeof(errbuf));

	if (r == 0) {
		const struct o2_super_info *si = o2_fs_super(fs);
		char uuid[33];

		for (int i = 0; i < 16; i++)
			snprintf(uuid + 2 * i, 3, "%02X", si->uuid[i]);
		snprintf(buf, len, "an OCFS2 volume (label '%s', UUID %s)", si->label, uuid);
		o2_fs_close(fs);
		return buf;
	}
	if (r != -ENODATA && r != -EIO && r != -ENXIO) {
		snprintf(buf, len, "an OCFS2 volume that cannot be opened (%s)",
			 errbuf[0] ? errbuf : g_strerror(-r));
		return buf;
	}
	/* not OCFS2: anything but zeros at its start is someone's data */
	size_t n = dev->size < (64u << 10) ? (size_t)dev->size : (64u << 10);
	g_autofree guint8 *head = g_malloc(n ? n : 1);

	n -= n % dev->sector_size;
	if (!n || o2_blockdev_read(dev, head, n, 0) < 0)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (head[i]) {
			snprintf(buf, len, "data (its first 64 KiB are not all zeros)");
			return buf;
		}
	return NULL;
}

static uint64_t fixed_time(void *arg)
{
	return *(const uint64_t *)arg;
}

static int begin_writing(void *arg)
{
	return job_commit(arg) ? 0 : 1;
}

struct job *job_new_format(const struct o2d_format_req *req, GError **err)
{
	struct job *j = job_alloc(JOB_FORMAT, req->device);
	struct o2_mkfs_opts *o = &j->mkfs;
	struct o2_mkfs_info info;
	char errbuf[768] = "", what[512];
	int r;

	/* the options first: a bad one is refused before the device is looked at */
	o->block_size = req->block_size;
	o->cluster_size = req->cluster_size;
	o->slots = req->slots;
	o->journal_size = req->journal_size;
	o->label = j->label = g_strdup(req->label);
	o->cluster_stack = j->stack = g_strdup(req->cluster_stack);
	o->cluster_name = j->cluster_name = g_strdup(req->cluster_name);
	o->mount = !req->have_local ? O2_MKFS_MOUNT_DEFAULT
		   : req->local	    ? O2_MKFS_MOUNT_LOCAL
				    : O2_MKFS_MOUNT_CLUSTER;
	o->journal64 = !req->have_journal64 ? O2_MKFS_J64_AUTO
		       : req->journal64	    ? O2_MKFS_J64_ON
					    : O2_MKFS_J64_OFF;
	o->volume_size = req->volume_size;
	o->have_uuid = req->have_uuid;
	memcpy(o->uuid, req->uuid, sizeof(o->uuid));
	o->have_generation = req->have_generation;
	o->generation = req->generation;
	o->have_dx_seed = req->have_dx_seed;
	memcpy(o->dx_seed, req->dx_seed, sizeof(o->dx_seed));
	if (req->have_time) {
		j->time_ns = req->time * 1000000000ull;
		o->now_ns = fixed_time;
		o->clock_arg = &j->time_ns;
	}
	/* the job may be cancelled until mkfs has planned and begins to write */
	o->begin_writing = begin_writing;
	o->begin_arg = j;
	j->dry_run = req->dry_run;
	if (req->type && o2_mkfs_parse_type(req->type, &o->type) < 0)
		snprintf(errbuf, sizeof(errbuf), "type \"%.64s\": mail, datafiles or vmstore",
			 req->type);
	else if (req->feature_level && o2_mkfs_parse_level(req->feature_level, &o->level) < 0)
		snprintf(errbuf, sizeof(errbuf),
			 "feature_level \"%.64s\": max-compat, default or max-features",
			 req->feature_level);
	else if (req->features && o2_mkfs_parse_features(req->features, &o->features_on,
							 &o->features_off, what, sizeof(what)) < 0)
		snprintf(errbuf, sizeof(errbuf), "features \"%.64s\": %s", req->features, what);
	else if (o->slots > 255)
		snprintf(errbuf, sizeof(errbuf), "slots %u: at most 255", o->slots);
	if (errbuf[0]) {
		g_set_error_literal(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT, errbuf);
		job_free(j);
		return NULL;
	}
	j->dev = open_device(req->device, false, err);
	if (!j->dev) {
		job_free(j);
		return NULL;
	}
	if (o->volume_size > j->dev->size) {
		g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
			    "volume_size %" G_GUINT64_FORMAT ": more than %s holds (%" G_GUINT64_FORMAT
			    " bytes)", o->volume_size, req->device, (guint64)j->dev->size);
		job_free(j);
		return NULL;
	}
	r = o2_mkfs_plan(j->dev->size, o, &info, errbuf, sizeof(errbuf));
	if (r < 0) {
		g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT, "%s: %s", req->device,
			    errbuf[0] ? errbuf : g_strerror(-r));
		job_free(j);
		return NULL;
	}
	if (!req->force && holds_data(j->dev, what, sizeof(what))) {
		g_set_error(err, O2D_ERROR, O2D_ERROR_EXISTS,
			    "%s holds %s; the option force (ocfs2ctl format -F) overwrites it", req->device, what);
		job_free(j);
		return NULL;
	}
	j->view.cancelable = true;
	return j;
}

struct job *job_new_check(const struct o2d_check_req *req, GError **err)
{
	struct job *j = job_alloc(JOB_CHECK, req->device);

	j->dev = open_device(req->device, true, err);
	if (!j->dev) {
		job_free(j);
		return NULL;
	}
	j->view.cancelable = true;
	return j;
}

/* ---- the work (the job's thread) ---- */

void job_snapshot(struct job *j, struct job_view *ret)
{
	g_mutex_lock(&j->lock);
	*ret = j->view;
	g_mutex_unlock(&j->lock);
}

/*
 * done of total units are done: update the view, and tell the caller when
 * it moved by 1% or 200 ms passed.  Whether the job was asked to stop.
 */
bool job_progress(struct job *j, uint64_t done, uint64_t total)
{
	gint64 now = g_get_monotonic_time();
	double p = total ? (double)MIN(done, total) / (double)total : 0;
	bool tell, cancel;

	g_mutex_lock(&j->lock);
	j->view.progress = p;
	/* the pace so far, once there is one to go by */
	if (p >= 0.01 && now - j->started > 100000)
		j->view.expected_end_us = g_get_real_time() + (gint64)((double)(now - j->started) *
								      (1 - p) / p);
	tell = p - j->last_shown >= 0.01 || now - j->last_time >= 200000;
	if (tell) {
		j->last_shown = p;
		j->last_time = now;
	}
	cancel = j->cancel;
	g_mutex_unlock(&j->lock);
	if (tell)
		j->changed(j, j->arg);
	return cancel;
}

bool job_commit(struct job *j)
{
	bool cancelled;

	g_mutex_lock(&j->lock);
	cancelled = j->cancel;
	if (!cancelled)
		j->view.cancelable = false;
	g_mutex_unlock(&j->lock);
	if (!cancelled)
		j->changed(j, j->arg);
	return !cancelled;
}

static int walk_progress(void *arg, uint64_t done, uint64_t total)
{
	return job_progress(arg, done, total) ? 1 : 0;
}

static void mkfs_progress(void *arg, unsigned done, unsigned total)
{
	job_progress(arg, done, total);
}

static void finish(struct job *j, bool success, char *message)
{
	g_mutex_lock(&j->lock);
	j->success = success;
	j->message = message;
	j->view.cancelable = false;
	if (success)
		j->view.progress = 1;
	g_mutex_unlock(&j->lock);
}

static void run_check(struct job *j)
{
	struct o2_walk_opts opts = { walk_progress, j };
	struct o2_walk_stats st;
	struct o2_fs *fs = NULL;
	char errbuf[512] = "";
	int r = o2_fs_open(j->dev, O2_OPEN_RDONLY, &fs, errbuf, sizeof(errbuf));

	if (r == -ENODATA) {
		finish(j, false, g_strdup_printf("%s is not an OCFS2 volume", j->device));
		return;
	}
	if (r < 0) {
		finish(j, false, g_strdup_printf("%s: %s", j->device,
						 errbuf[0] ? errbuf : g_strerror(-r)));
		return;
	}
	r = o2_fs_walk_opts(fs, &opts, &st);
	if (r == -ECANCELED)
		finish(j, false, g_strdup("cancelled"));
	else if (r < 0)
		finish(j, false, g_strdup_printf("%s: %s", j->device,
						 r == -EUCLEAN && o2_fs_error(fs)[0]
							 ? o2_fs_error(fs)
							 : g_strerror(-r)));
	else
		finish(j, true,
		       g_strdup_printf("%s: clean: %" G_GUINT64_FORMAT " inodes, %" G_GUINT64_FORMAT
				       " directories, %" G_GUINT64_FORMAT " extent blocks, %"
				       G_GUINT64_FORMAT " data blocks, %" G_GUINT64_FORMAT " groups",
				       j->device, st.inodes, st.dirs, st.extent_blocks,
				       st.data_blocks, st.groups));
	o2_fs_close(fs);
}

/* What a dry run would make, as the job's message. */
static void run_plan(struct job *j)
{
	struct o2_mkfs_info info;
	char errbuf[512] = "";
	int r = o2_mkfs_plan(j->dev->size, &j->mkfs, &info, errbuf, sizeof(errbuf));

	if (r < 0) {
		finish(j, false, g_strdup_printf("%s: %s", j->device,
						 errbuf[0] ? errbuf : g_strerror(-r)));
		return;
	}
	finish(j, true,
	       g_strdup_printf("%s: would format (dry run, nothing written): %u slots, block size "
			       "%u, cluster size %u, %" G_GUINT64_FORMAT " bytes, journal %"
			       G_GUINT64_FORMAT " bytes per slot, label '%s'",
			       j->device, info.slots, info.block_size, info.cluster_size,
			       (guint64)info.clusters * info.cluster_size,
			       (guint64)info.journal_bytes, info.label));
}

static void run_format(struct job *j)
{
	struct o2_mkfs_info info;
	char errbuf[512] = "", uuid[33];
	int r;

	if (j->dry_run) {
		run_plan(j);
		return;
	}
	/*
	 * Cancelable while mkfs plans; begin_writing (job_commit) turns that
	 * off before its first write: a half-made volume would be no volume,
	 * and what the device held would be gone all the same.
	 */
	r = o2_mkfs(j->dev, &j->mkfs, mkfs_progress, j, &info, errbuf, sizeof(errbuf));
	if (r == -ECANCELED) {
		finish(j, false, g_strdup("cancelled"));
		return;
	}
	if (r < 0) {
		finish(j, false, g_strdup_printf("%s: %s", j->device,
						 errbuf[0] ? errbuf : g_strerror(-r)));
		return;
	}
	for (int i = 0; i < 16; i++)
		snprintf(uuid + 2 * i, 3, "%02X", info.uuid[i]);
	finish(j, true,
	       g_strdup_printf("%s: formatted: UUID %s, %u slots, block size %u, cluster size %u, "
			       "%" G_GUINT64_FORMAT " bytes",
			       j->device, uuid, info.slots, info.block_size, info.cluster_size,
			       (guint64)info.clusters * info.cluster_size));
}

static gpointer job_thread(gpointer arg)
{
	struct job *j = arg;

	if (j->op == JOB_FORMAT)
		run_format(j);
	else
		run_check(j);
	/* the device is free again before anyone hears of the end */
	o2_blockdev_free(j->dev);
	j->dev = NULL;
	j->done(j, j->arg);
	return NULL;
}

void job_start(struct job *j, job_fn changed, job_fn done, void *arg)
{
	j->changed = changed;
	j->done = done;
	j->arg = arg;
	j->started = j->last_time = g_get_monotonic_time();
	if (!j->attached)
		j->thread = g_thread_new(op_names[j->op], job_thread, j);
}

void job_end(struct job *j, bool success, const char *message)
{
	finish(j, success, g_strdup(message));
	j->done(j, j->arg);
}

bool job_cancel(struct job *j)
{
	bool ok;

	g_mutex_lock(&j->lock);
	ok = j->view.cancelable;
	if (ok)
		j->cancel = true;
	g_mutex_unlock(&j->lock);
	return ok;
}

bool job_success(const struct job *j)
{
	return j->success;
}

const char *job_message(const struct job *j)
{
	return j->message;
}
