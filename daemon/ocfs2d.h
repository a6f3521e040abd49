/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ocfs2d: the daemon's shared declarations.
 *
 * Modules, each calling only those below it (no file calls back up; check
 * with nm: a file's undefined symbols name the files it calls):
 *
 *   main.c         options, detaching, signals; owns the D-Bus server or,
 *                  in single-volume mode, the one volume
 *   dbus_server.c  the D-Bus API: skeletons per connection, method handlers
 *   registry.c     the server's table of mounted volumes (registry.h)
 *   volume.c       a volume's life: opening it (check_unused, open_fs),
 *                  mounting, its FUSE and ticker threads, closing it
 *   uring.c        serving a session through io_uring queues
 *   reflink.c      reflinks by path, for the API
 *   job.c          Format and Check jobs for the API: judging the device,
 *                  the work on a thread of its own, progress, cancelling
 *   fuseops.c      the FUSE operations table, lookup counts and the
 *                  cluster locks each operation takes
 *   cluster.c      a clustered volume's place in its cluster: joining,
 *                  slots, the lock cache (cluster.h)
 *   session.c      making and hooking FUSE sessions, the wire peeks and
 *                  the INIT patch, for the classic and io_uring loops alike
 *                  (it is handed fuseops_table's table, so it never calls
 *                  fuseops.c; the operations ask it for a write's flags)
 *   note.c         logging what a volume's failures mean (volume_note_locked)
 *   log.c          where messages go: stderr, syslog when detached, the journal
 *
 * Threads.  The GLib main loop (main.c) only dispatches: signals and, in
 * server mode, the D-Bus API (dbus_server.c), whose method handlers run on
 * GDBus worker threads.  Each mounted volume has a FUSE session served on
 * a thread of its own (session.c's threads taking turns, libfuse's worker
 * threads with fuse_session_loop_mt, or uring.c's thread per CPU queue), and a ticker
 * thread that commits the running transaction on the commit interval.
 * fscore is not thread-safe: every call on a volume's o2_fs runs under
 * that volume's lock (struct volume.lock), so filesystem work never runs
 * on the main loop and never concurrently on one volume.  The registry
 * has a mutex of its own, taken inside a volume's lock (never around it).
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
struct flocks;

/*
 * Who watches a mount or an unmount (the API's Job objects, through
 * dbus_server.c): progress gets done of total units (a mount's journal
 * replay, an unmount's checkpoint), and a non-zero answer asks a mount to
 * stop; commit is asked once a mount reaches the point after which it
 * may not stop (the FUSE mount): false stops it there.  Called on the
 * thread doing the work.
 */
struct volume_watch {
	int (*progress)(void *arg, uint64_t done, uint64_t total);
	bool (*commit)(void *arg);
	void *arg;
};

/* request statistics cover FUSE opcodes below this (CUSE_INIT aside, all) */
#define SESSION_OPCODES 64
/* requests timed at once (more in flight go uncounted in time) */
#define SESSION_SLOTS 256

struct volume {
	char *device, *mountpoint;
	struct mount_opts opts;
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	struct cluster *cluster;	/* clustered volumes (cluster.h); NULL otherwise */
	struct flocks *flocks;		/* cluster-wide file locks (flock.h); NULL: kernel-local */
	unsigned slot;		/* the slot this node mounted with */
	int claim_fd;		/* the volume's UUID claimed on this machine, or -1 */
	uint64_t root;		/* the root directory's inode (block) number */
	uint32_t root_gen;	/* and its generation (cluster lock names) */
	uint64_t bitmap;	/* clustered: the global bitmap's inode, whose lock */
	uint32_t bitmap_gen;	/* guards every change to it (and statfs) */
	uint32_t cluster_size, block_size;
	bool no_open;		/* the kernel opens files without asking us */
	bool acl;		/* POSIX ACLs on: the kernel enforces them, we keep them */
	bool use_uring;		/* serve through io_uring queues (uring.c) */
	bool killpriv;		/* FUSE_HANDLE_KILLPRIV_V2 agreed: set-ID bits are ours to drop */
	bool names_cached;	/* clustered: the kernel keeps names under directory locks */
	/* the INIT request, seen by session_saw_request until its reply goes */
	uint64_t init_unique, init_offered;
	bool init_pending;
	/* requests served, per opcode (session.c: session_request_stats) */
	uint64_t req_count[SESSION_OPCODES], req_us[SESSION_OPCODES];
	/* requests in flight by unique, for their timing (unique: atomic; 0 free) */
	struct session_req { uint64_t unique; uint32_t opcode; gint64 start; } req_slots[SESSION_SLOTS];

	GMutex lock;		/* guards fs, nodes, ro_reported, flushing, kernel_gone, close_watch */
	/* who watches the close (an Unmount's job), or NULL */
	const struct volume_watch *close_watch;
	GHashTable *nodes;	/* inode number -> {number, lookup count, generation | NODE_DIR} (uint64_t[3]) */
	/* inode number -> generation ({number, generation}, uint64_t[2]) of
	   inodes the kernel forgot while their lock stayed cached (fuseops.c) */
	GHashTable *gens;
	bool ro_reported;	/* the turn to read-only is in the log */
	/*
	 * An fsync is flushing the device without the lock (fuseops.c,
	 * op_fsync); other fsyncs wait on flush_cond (with lock) for it and
	 * look again at what it covered, rather than flush at the same time.
	 */
	bool flushing;
	GCond flush_cond;
	/* kernel page invalidations in flight without the lock (fs_invalidate):
	 * the session stays until they end (inval_cond, with lock) */
	unsigned invalidating;
	GCond inval_cond;
	/*
	 * Threads fsyncs run on when one thread serves the session (fuseops.c,
	 * fsync_blk), or NULL: made before serving, emptied before the close.
	 */
	GThreadPool *sync_pool;
	/* early write-back of files other nodes keep asking for (cluster,
	 * read-write; fuseops.c, write_back_soon): made and emptied as
	 * sync_pool */
	GThreadPool *write_back_pool;
	bool write_back_queued;

	struct fuse_session *se;
	bool kernel_gone;	/* the session ended: no notification may go to it */
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
 * log.c: send every message where administrators look (see log.c); detached
 * says whether ocfs2d runs without -f.  Called first, before any message.
 */
void log_init(bool detached);

/*
 * note.c: log what fscore said about a failed call named op, if it is more
 * than an ordinary errno answer (with v->lock held): damage, an I/O error,
 * and (once) the volume turning read-only, which also calls v->turned_ro.
 * Returns r.
 */
int volume_note_locked(struct volume *v, const char *op, int r);

/*
 * Open DEVICE (exclusively on this machine), check that nothing else uses
 * the volume, open it with fscore (replaying our slot's journal if a crash
 * left it dirty), mount it on MOUNTPOINT and start serving.  false with
 * *err set (a message an operator can act on) on failure; watch (or NULL)
 * sees the replay and may stop the mount until the FUSE mount
 * (G_IO_ERROR_CANCELLED: the volume closed, a journal being replayed left
 * whole for the next mount).
 */
bool volume_mount(const char *device, const char *mountpoint, const struct mount_opts *opts,
		  void (*gone)(struct volume *, void *), void *gone_arg,
		  const struct volume_watch *watch, struct volume **ret, GError **err);
/*
 * Ask the kernel to unmount.  force: if busy, detach it and abort the FUSE
 * connection (open files then get errors) so the volume still closes
 * cleanly.  The volume is closed on its own thread; gone() reports it.
 * v->close_watch, set under v->lock before, sees the close's checkpoint.
 */
bool volume_unmount(struct volume *v, bool force, GError **err);
/*
 * With writeback_cache, have the kernel hand over every written page it
 * holds (syncfs on the mount), before the daemon works on files behind
 * its back or cuts the connection.  Never with v->lock held: the pages
 * arrive as requests.
 */
void volume_take_kernel_pages(struct volume *v);
/* References: the mounter holds one; the last unref (after gone()) waits
 * for the volume's threads and frees it. */
struct volume *volume_ref(struct volume *v);
void volume_unref(struct volume *v);

/* The largest write (and read) a request carries. */
#define OCFS2D_MAX_WRITE (1u << 20)

/* uring.c: FUSE over io_uring.  Whether to try it (before mounting: the
 * kernel offers it in INIT only if its module parameter is on then). */
bool uring_wanted(struct volume *v);
/* Serve the mounted session (on its FUSE thread) until it ends. */
int uring_serve(struct volume *v);

/*
 * session.c: a volume's FUSE sessions and their wire, for both the
 * classic loops (volume.c) and the io_uring loop (uring.c).
 *
 * session_new: a session of v's with the operations ops (fuseops_table's)
 * and v's mount options, not yet mounted; NULL and *err on failure.
 */
struct fuse_lowlevel_ops;
struct fuse_session *session_new(struct volume *v, const struct fuse_lowlevel_ops *ops,
				 GError **err);
/*
 * For what libfuse does not pass on (FUSE_HANDLE_KILLPRIV_V2), something
 * must see each raw request before libfuse runs it, and the INIT reply
 * before it goes.  session_hook does that on a mounted session's own
 * reads and writes (0 or -errno).  A loop that hands requests to libfuse
 * itself instead tells session_saw_request about each request (on the
 * thread that then runs it), and session_patch_init about each reply
 * (iov[0] its header, iov[1] its body): true if it added the flag to INIT's.
 */
int session_hook(struct fuse_session *se);
struct iovec;
void session_saw_request(struct volume *v, const void *req, size_t len);
bool session_patch_init(struct volume *v, const struct iovec *iov, int count);
/* The write_flags of the FUSE_WRITE this thread is running (0 for others). */
uint32_t session_write_flags(void);
/*
 * Each request is counted by opcode when it is seen, and the time until
 * its reply added when the reply goes out, from whichever thread (the
 * classic loops: session_hook's writes; the io_uring loop tells
 * session_replied).  Requests are timed in a table of SESSION_SLOTS by
 * their unique: one whose slot a later request took is counted but not
 * timed.  session_request_stats calls fn for each
 * opcode seen so far: its name (FUSE's, lower case), count and
 * microseconds in all.
 */
void session_replied(struct volume *v, uint64_t unique);
/*
 * Serve v's mounted session in turns until it ends (0 or -errno): one
 * thread at a time reads requests and runs each itself, spinning poll_us
 * after each for the next.  hand_on: a request about to wait for another
 * node or the kernel calls session_may_wait first, and another thread
 * (up to threads=) serves meanwhile; without it one thread serves all.
 * Run on the volume's FUSE thread; returns once every thread is done.
 */
int session_serve(struct volume *v, bool hand_on);
/* The calling thread is about to wait: if it leads the serving, another takes over. */
void session_may_wait(void);
/*
 * Notifications to the kernel, written to v's /dev/fuse as they are made
 * (0 or -errno; -ENOENT: the kernel does not know the node).  Ours, not
 * libfuse's: served through io_uring, the mounted session never sees INIT
 * (a codec answers it), and libfuse refuses to notify for it.
 *
 * session_notify_inval_inode: node's attributes, and its pages in [off,
 * off + len) (len 0: to the end; off < 0: no pages).  It waits for the
 * page locks of reads and writes in flight.
 * session_notify_inval_entry: the name in parent; it waits for parent's
 * i_rwsem, which a request in flight in parent may hold.
 * session_notify_new_epoch: every name cached (FUSE_NOTIFY_INC_EPOCH, Linux
 * 6.16; older kernels: -EINVAL); it waits for nothing.
 */
int session_notify_inval_inode(struct volume *v, uint64_t node, int64_t off, int64_t len);
int session_notify_inval_entry(struct volume *v, uint64_t parent, const char *name);
int session_notify_new_epoch(struct volume *v);
void session_request_stats(struct volume *v,
			   void (*fn)(const char *name, uint64_t count, uint64_t us, void *arg),
			   void *arg);

/*
 * wcache.c: a write-back cache in front of a clustered volume's O_DIRECT
 * device.  wcache_new wraps inner (the new device owns it) and keeps up to
 * limit bytes of writes in memory; a flush, or passing the bound, sends
 * them on.  wcache_write_out sends them without a flush (another node is
 * to read them); 0 or -errno, and 0 for a device of another kind.
 * Clean copies of what was sent or read serve reads of file data
 * (o2_blockdev_read_data) until their owner's lock is lost (wcache_lost).  Over a file or
 * block device, the runs of one send go to it together (io_uring).
 */
int wcache_new(struct o2_blockdev *inner, size_t limit, struct o2_blockdev **ret);
int wcache_write_out(struct o2_blockdev *dev);
/* Forget every clean copy (a lock went to NL: another node may write now). */
void wcache_drop_clean(struct o2_blockdev *dev);
/* Inode owner's lock went to NL: its copies, and those of no named owner, go; 0: all. */
void wcache_lost(struct o2_blockdev *dev, uint64_t owner);
struct wcache_stats {
	uint64_t cached;   /* bytes of pages holding writes not sent yet */
	uint64_t sent;	   /* bytes sent on so far */
	uint64_t together; /* of those, bytes sent through the ring beside others */
};
void wcache_stats(struct o2_blockdev *dev, struct wcache_stats *st);

/*
 * fuseops.c: the FUSE low-level operations.  fuseops_table fills ret with
 * the table for v (without the xattr operations under noxattr).
 */
void fuseops_table(const struct volume *v, struct fuse_lowlevel_ops *ret);
/*
 * Clustered, v->lock held: inode blk's generation into *gen, read without
 * its lock (to name the lock): from the device unless this node has changes
 * to it not yet home (o2_fs_unlocked_reads).  0, or -errno with *gen 0.
 */
int fuseops_gen_unlocked(struct volume *v, uint64_t blk, uint32_t *gen);
/* Drop every lookup reference the kernel still holds (session end; v->lock held). */
void fuseops_forget_all(struct volume *v);
/* The sync_pool's function: runs one fsync handed to it, and replies. */
void fuseops_sync_job(gpointer data, gpointer user_data);
/* The volume's write_back_pool's job (data: the volume). */
void fuseops_write_back_job(gpointer data, gpointer user_data);

/* In the third word of a nodes entry: the inode is a directory. */
#define NODE_DIR (UINT64_C(1) << 32)

/*
 * Clustered: r = fn(v->fs, arg) with v->lock held, run again while fscore
 * stops it for a system file's lock (o2_open_opts.lock_held), which is
 * taken into hd meanwhile with v->lock dropped; then the frees it left
 * for other slots' allocators (o2_fs_run_deallocs).  The one retry loop
 * of the daemon (fuseops.c's RETRY_LOCKED); hd holds, on return, what was
 * taken.
 */
struct held;
int fuseops_run_locked(struct volume *v, struct held *hd, int (*fn)(struct o2_fs *fs, void *arg),
		       void *arg);

/*
 * The FUSE node id of inode blk as fuseops hands them out: the root
 * directory is FUSE's node 1 (FUSE_ROOT_ID), every other inode its own
 * number, which is never 1.
 */
static inline uint64_t volume_node_id(const struct volume *v, uint64_t blk)
{
	return blk == v->root ? 1 : blk;
}

/*
 * reflink.c: a reflink on the mounted volume (paths inside it, absolute):
 * dst may be an existing directory (the copy takes src's name there).  The
 * kernel's view of the new name is refreshed.  0 and *ret_ino, or -errno
 * and *ret_msg (g_free it).  Takes v->lock itself.
 */
int reflink_by_path(struct volume *v, const char *src, const char *dst, uint64_t *ret_ino,
		    char **ret_msg);

/*
 * dbus_server.c: the D-Bus API (server mode; dbus/org.ocfs2d.Daemon1.xml),
 * served peer-to-peer on the control socket at path and, if system_bus, as
 * org.ocfs2d.Daemon1 on the system bus.  The server owns the registry of
 * the volumes it mounted (registry.h).  NULL and *err if the socket cannot
 * be served (another daemon answers on it, say).
 */
struct dbus_server;
struct dbus_server *dbus_server_start(const char *path, bool system_bus, GError **err);
/*
 * Stop serving and free s (after the main loop has stopped).  If a method
 * call is still running on a GDBus thread (a Mount when SIGTERM came), s
 * is left allocated for it until the process exits.
 */
void dbus_server_stop(struct dbus_server *s);
/* Unmount every volume (SIGTERM): forced, then wait for them to close. */
void dbus_server_unmount_all(struct dbus_server *s);
/* Quit loop once the last volume is unmounted (a daemon ocfs2ctl started). */
void dbus_server_exit_when_idle(struct dbus_server *s, GMainLoop *loop);

#endif
