/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The ocfs2d D-Bus API (org.ocfs2d.Daemon1.xml): names, errors, and the
 * parsers that turn each method's arguments into a checked request.  The
 * daemon's handlers (daemon/dbus_server.c) act only on what these return, and the
 * fuzz target fuzz_dbus feeds them hostile messages; nothing here does I/O.
 */
#ifndef OCFS2D_API_H
#define OCFS2D_API_H

#include <gio/gio.h>
#include <stdbool.h>

#include "mountopts.h"

#define O2D_BUS_NAME "org.ocfs2d.Daemon1"
#define O2D_ROOT_PATH "/org/ocfs2d/Daemon1"
#define O2D_MANAGER_PATH O2D_ROOT_PATH "/Manager"
#define O2D_VOLUMES_PATH O2D_ROOT_PATH "/volumes"
#define O2D_JOBS_PATH O2D_ROOT_PATH "/jobs"
#define O2D_MANAGER_IFACE "org.ocfs2d.Daemon1.Manager"
#define O2D_VOLUME_IFACE "org.ocfs2d.Daemon1.Volume"
#define O2D_JOB_IFACE "org.ocfs2d.Daemon1.Job"
/* the daemon's control socket: the API served peer-to-peer */
#define O2D_CONTROL_DEFAULT "/run/ocfs2d/control"
/*
 * The socket's path with this appended names its lifetime lock.  A client
 * (ocfs2ctl) holds it shared (flock) from before it connects until it
 * exits; a daemon that exits once idle takes it exclusive before it stops
 * serving.  So such a daemon never leaves between a client's connect and
 * that client's call, and a client that finds it leaving waits, then
 * starts a new one.
 */
#define O2D_CONTROL_LOCK_SUFFIX ".lock"

/* org.ocfs2d.Daemon1.Error.* */
enum o2d_error {
	O2D_ERROR_FAILED,
	O2D_ERROR_NOT_AUTHORIZED,
	O2D_ERROR_INVALID_ARGUMENT,
	O2D_ERROR_OPTION_NOT_PERMITTED,
	O2D_ERROR_ALREADY_MOUNTED,
	O2D_ERROR_NOT_MOUNTED,
	O2D_ERROR_DEVICE_BUSY,
	O2D_ERROR_NOT_FOUND,
	O2D_ERROR_READ_ONLY,
	O2D_ERROR_EXISTS,
	O2D_ERROR_NOT_CANCELABLE,
	O2D_ERROR_CANCELLED,
};
#define O2D_ERROR (o2d_error_quark())
/* The domain, registered with GDBus so that errors cross the bus by name. */
GQuark o2d_error_quark(void);
/* The API error for an errno (EBUSY: DeviceBusy, ENOENT: NotFound, ...). */
enum o2d_error o2d_error_from_errno(int e);
/* The errno an API error stands for (for the CLI's exit and messages). */
int o2d_error_to_errno(const GError *e);

/* Longest path the API takes (bytes, without the NUL), and longest name in one. */
#define O2D_PATH_MAX 4095
#define O2D_NAME_MAX 255

/* Manager.Mount(s device, s mountpoint, a{sv} options) */
struct o2d_mount_req {
	char *device, *mountpoint;
	struct mount_opts opts;
};
/* Unmount(a{sv} options) */
struct o2d_unmount_req {
	bool force;
};
/* Volume.Reflink(s source, s destination, a{sv} options) */
struct o2d_reflink_req {
	char *source, *destination;
};

/* Volume.Quota(a{sv} options) and Volume.SetQuota(a{sv} options) */
struct o2d_quota_req {
	unsigned type; /* 0 users, 1 groups */
	bool have_id, have_grace;
	guint32 id, block_grace, inode_grace;
	guint64 block_soft, block_hard, inode_soft, inode_hard;
};

/* Manager.Format(s device, a{sv} options): what ocfs2ctl format's options say */
struct o2d_format_req {
	char *device;
	char *label, *type, *feature_level, *features, *cluster_stack, *cluster_name;
	guint32 block_size, cluster_size, slots; /* 0: by the volume's size */
	guint64 journal_size;			 /* 0: by the volume's size */
	guint64 volume_size;			 /* bytes from the start; 0: all */
	bool have_local, local;			 /* local b: one node, or (false) cluster */
	bool have_journal64, journal64;		 /* block64 or block32; absent: by size */
	bool have_uuid, have_generation, have_dx_seed, have_time;
	guint8 uuid[16];
	guint32 generation, dx_seed[3];
	guint64 time; /* seconds since the epoch */
	bool force, dry_run;
};
/* Manager.Check(s device, a{sv} options) */
struct o2d_check_req {
	char *device;
};

/*
 * Each parser takes the method's parameters (a tuple) and fills req, or
 * returns false with *err set (a D-Bus error a caller can act on): the
 * wrong tuple type (InvalidArgs), a bad path (InvalidArgument), an unknown
 * option (OptionNotPermitted), an option of the wrong type (InvalidArgs)
 * or value (InvalidArgument).  On success the caller clears req.
 */
bool o2d_parse_mount(GVariant *params, struct o2d_mount_req *req, GError **err);
void o2d_mount_req_clear(struct o2d_mount_req *req);
bool o2d_parse_unmount(GVariant *params, struct o2d_unmount_req *req, GError **err);
bool o2d_parse_reflink(GVariant *params, struct o2d_reflink_req *req, GError **err);
/* Volume.ClusterState(a{sv} options): no options yet beyond auth.* */
bool o2d_parse_cluster_state(GVariant *params, GError **err);
/* Volume.Statistics(a{sv} options): no options yet beyond auth.* */
bool o2d_parse_statistics(GVariant *params, GError **err);
bool o2d_parse_format(GVariant *params, struct o2d_format_req *req, GError **err);
void o2d_format_req_clear(struct o2d_format_req *req);
bool o2d_parse_check(GVariant *params, struct o2d_check_req *req, GError **err);
void o2d_check_req_clear(struct o2d_check_req *req);
/* Job.Cancel(a{sv} options): no options yet beyond auth.* */
bool o2d_parse_cancel(GVariant *params, GError **err);
/* Volume.Status(a{sv} options): no options yet beyond auth.* */
bool o2d_parse_status(GVariant *params, GError **err);
void o2d_reflink_req_clear(struct o2d_reflink_req *req);
bool o2d_parse_quota(GVariant *params, struct o2d_quota_req *req, GError **err);
/* SetQuota: an id with its four limits, the two grace periods, or both. */
bool o2d_parse_set_quota(GVariant *params, struct o2d_quota_req *req, GError **err);

/*
 * The object path of the volume mounted on mountpoint (absolute), and
 * back: the mount point of a volume object path, or NULL if path is not
 * one.  g_free the result.
 */
char *o2d_volume_path(const char *mountpoint);
char *o2d_volume_mountpoint(const char *object_path);

#endif
