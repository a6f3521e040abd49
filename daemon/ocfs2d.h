/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ocfs2d: the daemon's shared declarations.
 *
 * Threads.  The GLib main loop (main.c) only dispatches: signals and, in
 * server mode, the D-Bus API (api.c).  Each mounted volume has a FUSE session
 * served by libfuse's worker threads (fuse_session_loop_mt) on a thread of
 * its own, and a ticker thread that commits the running transaction on the
 * commit interval.  fscore is not thread-safe: every call on a volume's
 * o2_fs runs under that volume's lock (struct volume.lock), so filesystem
 * work never runs on the main loop and never concurrently on one volume.
 */
#ifndef OCFS2D_H
#define OCFS2D_H

#include <gio/gio.h>
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "o2fs/blockdev.h"
#include "o2fs/o2fs.h"
#include "mountopts.h"

struct fuse_session;
struct cluster;

struct volume {
	char *device, *mountpoint;
	struct mount_opts opts;
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	struct cluster *cluster;	/* clustered volumes (cluster.h); NULL otherwise */
	unsigned slot;		/* the slot this node mounted with */
	int claim_fd;		/* the volume's UUID claimed on this machine, or -1 */
	uint64_t root;		/* the root directory's inode (block) number */
	uint32_t cluster_size, block_size;
	bool no_open;		/* the kernel opens files without asking us */
	bool acl;		/* POSIX ACLs on: the kernel enforces them, we keep them */
	bool use_uring;		/* serve through io_uring queues (uring.c) */
	bool killpriv;		/* FUSE_HANDLE_KILLPRIV_V2 agreed: set-ID bits are ours to drop */
	/* the INIT request, seen by fuseops_saw_request until its reply goes */
	uint64_t init_unique, init_offered;
	bool init_pending;

	GMutex lock;		/* guards fs, nodes and ro_reported */
	GHashTable *nodes;	/* inode number -> lookup count (uint64_t *) */
	bool ro_reported;	/* the turn to read-only is in the log */

	struct fuse_session *se;
	unsigned conn_id;	/* /sys/fs/fuse/connections/N */
	GThread *fuse_thread, *tick_thread;
	GMutex tick_mu;
	GCond tick_cond;
	bool stopping;

	/* called (on the volume's FUSE thread) once the session has ended
	 * and the volume is closed; close_result is o2_fs_close's */
	void (*gone)(struct volume *v, void *arg);
	void *gone_arg;
	/* called (under lock, so it may only schedule work) when an error
	 * turns the volume read-only; NULL for none; gets gone_arg */
	void (*turned_ro)(struct volume *v, void *arg);
	int close_result;
	gint refs;		/* volume_free when the last goes */
};

/*
 * Log what fscore said about a failed call named op, if it is more than an
 * ordinary errno answer (with v->lock held); returns r.
 */
int volume_note_locked(struct volume *v, const char *op, int r);

/*
 * Open DEVICE (exclusively on this machine), check that nothing else uses
 * the volume, open it with fscore (replaying our slot's journal if a crash
 * left it dirty), mount it on MOUNTPOINT and start serving.  false with
 * *err set (a message an operator can act on) on failure.
 */
bool volume_mount(const char *device, const char *mountpoint, const struct mount_opts *opts,
		  void (*gone)(struct volume *, void *), void *gone_arg, struct volume **ret,
		  GError **err);
/*
 * Ask the kernel to unmount.  force: if busy, detach it and abort the FUSE
 * connection (open files then get errors) so the volume still closes
 * cleanly.  The volume is closed on its own thread; gone() reports it.
 */
bool volume_unmount(struct volume *v, bool force, GError **err);
/* References: the mounter holds one; the last unref (after gone()) waits
 * for the volume's threads and frees it. */
struct volume *volume_ref(struct volume *v);
void volume_unref(struct volume *v);

/*
 * Whether the journal of slot is marked in use (*ret_dirty) and holds
 * committed transactions not yet written home (*ret_pending: a replay is
 * due).  0 or -errno (fscore's message on fs).
 */
int volume_journal_state(struct o2_fs *fs, unsigned slot, bool *ret_dirty, bool *ret_pending);

/* The largest write (and read) a request carries. */
#define OCFS2D_MAX_WRITE (1u << 20)

/* uring.c: FUSE over io_uring.  Whether to try it (before mounting: the
 * kernel offers it in INIT only if its module parameter is on then). */
bool uring_wanted(struct volume *v);
/* Serve the mounted session (on its FUSE thread) until it ends. */
int uring_serve(struct volume *v);

/* fuseops.c */
struct fuse_session *fuseops_session_new(struct volume *v, GError **err);
/*
 * Hooks on a mounted session's reads and writes (0 or -errno), for what
 * libfuse does not pass on; a loop that hands requests to libfuse itself
 * tells fuseops_saw_request about each first, and fuseops_patch_init about
 * the INIT reply (iov[0] its header, iov[1] its body; true if changed).
 */
int fuseops_session_hook(struct fuse_session *se);
struct iovec;
void fuseops_saw_request(struct volume *v, const void *req, size_t len);
bool fuseops_patch_init(struct volume *v, const struct iovec *iov, int count);
/* Drop every lookup reference the kernel still holds (session end). */
void fuseops_forget_all(struct volume *v);
/*
 * A reflink on the mounted volume (paths inside it, absolute): dst may be
 * an existing directory (the copy takes src's name there).  The kernel's
 * view of the new name is refreshed.  0 and *ret_ino, or -errno and
 * *ret_msg (g_free it).
 */
int fuseops_reflink(struct volume *v, const char *src, const char *dst, uint64_t *ret_ino,
		    char **ret_msg);

/*
 * api.c: the D-Bus API (server mode; dbus/org.ocfs2d.Daemon1.xml), served
 * peer-to-peer on the control socket at path and, if system_bus, as
 * org.ocfs2d.Daemon1 on the system bus.
 */
bool api_start(const char *path, bool system_bus, GError **err);
void api_stop(void);
/* Unmount every volume (SIGTERM): forced, then wait for them to close. */
void api_unmount_all(void);
/* Quit loop once the last volume is unmounted (a daemon ocfs2ctl started). */
void api_exit_when_idle(GMainLoop *loop);

#endif
