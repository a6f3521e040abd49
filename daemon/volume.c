// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * A mounted volume: opening it safely, its FUSE and ticker threads, and
 * closing it cleanly however the session ends (our unmount, umount(8), or
 * an aborted connection).
 *
 * On this machine an exclusive flock on the device keeps a second ocfs2d or
 * an ocfs2ctl write verb away.  Across machines: a clustered volume is
 * mounted through its cluster (cluster.h), which claims a slot under the
 * super lock; with the nocluster option, or for a local volume, the slot
 * map and the journals tell whether another node uses it, as far as they
 * can without the cluster.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "cluster.h"
#include "flock.h"
#include "locktab.h"
#include "ocfs2d.h"


/* ---- checks before opening read-write ---- */

/*
 * Without the cluster (a local volume, or nocluster), nothing but us may
 * use the volume: on a clustered volume no slot may be in use, and no
 * journal but ours may be dirty (someone is using it, or crashed and is
 * not yet recovered: without the cluster stack we cannot tell which).  A
 * local volume has one user by definition.
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
		bool dirty, pending;

		if (i == v->opts.slot)
			continue;
		r = o2_journal_state(fs, i, &dirty, &pending);
		if (r < 0) {
			g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r),
				    "%s: reading the journal of slot %u: %s", v->device, i,
				    o2_fs_error(fs)[0] ? o2_fs_error(fs) : g_strerror(-r));
			return false;
		}
		if (dirty) {
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

/* Open the device; O_DIRECT where the file system under it allows. */
static int open_dev_flags(struct volume *v, unsigned devflags)
{
	int r = o2_blockdev_open_file(v->device, devflags, &v->dev);

	if (r == -EINVAL && (devflags & O2_DEV_DIRECT)) {
		/* a file system without O_DIRECT under an image file: say so, go on */
		g_warning("%s: cannot bypass the page cache (O_DIRECT) here: other nodes' writes "
			  "may be seen late; use a block device or a loop device with direct I/O",
			  v->device);
		r = o2_blockdev_open_file(v->device, devflags & ~O2_DEV_DIRECT, &v->dev);
	}
	if (r < 0)
		v->dev = NULL;
	return r;
}

static bool open_dev(struct volume *v, unsigned devflags, GError **err)
{
	int r = open_dev_flags(v, devflags);

	if (r < 0) {
		v->dev = NULL;
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r), "%s: %s", v->device,
			    r == -EBUSY ? "in use on this machine (mounted already, or an ocfs2ctl "
					  "write verb is running)"
					: g_strerror(-r));
		return false;
	}
	return true;
}

static bool probe_fs(struct volume *v, struct o2_fs **ret, GError **err)
{
	char msg[512] = "";
	int r = o2_fs_open(v->dev, O2_OPEN_RDONLY, ret, msg, sizeof(msg));

	if (r < 0)
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r), "%s: %s", v->device,
			    r == -ENODATA ? "not an OCFS2 volume" : msg);
	return r == 0;
}

/* How long the kernel may keep attributes while the inode's lock stays. */
#define CLUSTER_ATTR_TIMEOUT_S 3600.0

/*
 * What cluster locks ask of the filesystem (cluster.h), on the lock
 * cache's downconvert thread or an operation's, never with the volume
 * mutex held: no operation waits for a cluster lock while holding it.
 */
static int fs_writeback(void *arg, enum o2_writeback how)
{
	struct volume *v = arg;
	int r = 0;

	g_mutex_lock(&v->lock);
	if (v->fs && !v->opts.ro)
		r = volume_note_locked(v, "writing back for another node", o2_fs_writeback(v->fs, how));
	/* file data a commit did not flush (an overwrite in place) goes too */
	if (r == 0 && v->fs && !v->opts.ro && how != O2_WB_LOG)
		r = volume_note_locked(v, "writing back for another node", wcache_write_out(v->dev));
	g_mutex_unlock(&v->lock);
	return r;
}

/*
 * A lock lost: the clean blocks it covers go (o2_fs_lost; with blkno 0, a
 * lock of no known inode, every clean block), and so do the clean copies
 * of its file data (wcache.c), and the kernel forgets the inode's
 * attributes, which it caches only while this node holds the lock, and -
 * a directory's - the listing it keeps and the names it looked up in it.
 * No notification waits for anything a request holds (attributes: no
 * page lock, no directory lock; a listing's pages are locked only while
 * the kernel copies entries in or out; names: a new epoch), so they are
 * made here, before the lock goes; a reply built before them and
 * delivered after is one the kernel then ignores (FUSE's attribute
 * versions; a name's epoch is read before its lookup is sent).
 */
static void fs_lost(void *arg, uint64_t blkno)
{
	struct volume *v = arg;

	g_mutex_lock(&v->lock);
	const uint64_t *n = blkno ? g_hash_table_lookup(v->nodes, &blkno) : NULL;

	if (v->fs && blkno)
		o2_fs_lost(v->fs, blkno);
	else if (v->fs)
		o2_fs_drop_cached(v->fs, 0);
	if (v->dev)
		wcache_lost(v->dev, blkno);
	/* the kernel knows no system file */
	if ((n || (blkno && blkno == v->root)) && v->se && !v->kernel_gone) {
		bool dir = blkno == v->root || (n && (n[2] & NODE_DIR));

		/* a directory's pages are the listing the kernel keeps of it */
		session_notify_inval_inode(v, volume_node_id(v, blkno), dir ? 0 : -1, 0);
		if (v->names_cached && dir)
			session_notify_new_epoch(v);
	}
	g_mutex_unlock(&v->lock);
}

/*
 * Before inode blkno's lock goes lower: the kernel drops its pages of the
 * inode, writing dirty ones (shared mappings) back first, through write
 * requests served under the lock still held.  It waits for page locks
 * that reads and writes in flight hold, so it runs without the volume
 * mutex, and those requests pass the lock meanwhile (CLUSTER_ADMIT).
 * Directories and inodes the kernel does not know have no pages.
 */
static void fs_invalidate(void *arg, uint64_t blkno)
{
	struct volume *v = arg;
	const uint64_t *n;
	bool go;

	g_mutex_lock(&v->lock);
	n = g_hash_table_lookup(v->nodes, &blkno);
	go = n && !(n[2] & NODE_DIR) && v->se && !v->kernel_gone;
	if (go)
		v->invalidating++;
	g_mutex_unlock(&v->lock);
	if (!go)
		return;
	session_notify_inval_inode(v, volume_node_id(v, blkno), 0, 0);
	g_mutex_lock(&v->lock);
	if (!--v->invalidating)
		g_cond_broadcast(&v->inval_cond);
	g_mutex_unlock(&v->lock);
}

static void fs_refresh(void *arg, uint64_t blkno, const uint8_t *lvb)
{
	struct volume *v = arg;

	g_mutex_lock(&v->lock);
	if (v->fs)
		o2_inode_refresh(v->fs, blkno, lvb);
	g_mutex_unlock(&v->lock);
}

static void fs_lvb(void *arg, uint64_t blkno, uint8_t *lvb)
{
	struct volume *v = arg;

	g_mutex_lock(&v->lock);
	if (v->fs)
		o2_inode_lvb(v->fs, blkno, lvb);
	g_mutex_unlock(&v->lock);
}

/* A request is about to wait for another node: its thread hands on the serving. */
static void fs_waiting(void *arg)
{
	(void)arg;
	session_may_wait();
}

static const struct cluster_fs_ops cluster_fs_ops = { fs_writeback, fs_lost, fs_refresh, fs_lvb,
						       fs_invalidate, fs_waiting };

/* Writes a clustered volume keeps in memory at most (wcache.c) */
#define WCACHE_LIMIT (64u << 20)

/*
 * A clustered volume: join its cluster and, under the super lock, claim a
 * slot (cluster.h).  The device is opened again with O_DIRECT: no page
 * cache may hide another node's writes (devflags has O2_DEV_DIRECT), and
 * a read-write mount keeps its writes in the daemon until a flush or a
 * lock leaving sends them (wcache.c).  On success the super lock is held
 * until cluster_mount_done.
 */
static bool join_cluster(struct volume *v, unsigned devflags, const struct o2_super_info *si,
			 GError **err)
{
	struct o2_fs *probe = NULL;
	bool ok;

	o2_blockdev_free(v->dev);
	v->dev = NULL;
	if (!open_dev(v, devflags, err))
		return false;
	if (!v->opts.ro) {
		struct o2_blockdev *wc;
		int r = wcache_new(v->dev, WCACHE_LIMIT, &wc);

		if (r < 0) {
			g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r), "%s: %s", v->device,
				    g_strerror(-r));
			return false;
		}
		v->dev = wc;
	}
	v->cluster = cluster_join(v->device, si, err);
	if (!v->cluster)
		return false;
	/* before the first inode lock (the global bitmap's, for the slot) */
	cluster_set_fs(v->cluster, &cluster_fs_ops, v);
	/* read what the slot decision needs only after joining */
	ok = probe_fs(v, &probe, err) && cluster_mount_slot(v->cluster, probe, &v->opts, &v->slot, err);
	o2_fs_close(probe);
	if (!ok) {
		cluster_leave(v->cluster);
		v->cluster = NULL;
	}
	return ok;
}

/*
 * A read-only mount shows what was committed, as the kernel's does: if the
 * slot's journal holds transactions a crash left, open the volume
 * read-write once to replay them (a clean close empties the journal), then
 * read-only again.  With norecovery, or where the device cannot be
 * written, that is said instead.  v->fs is the read-only handle; under the
 * super lock on a clustered volume.
 */
static bool replay_before_ro(struct volume *v, unsigned devflags, const struct o2_open_opts *ro_oo,
			     GError **err)
{
	struct o2_open_opts oo = *ro_oo;
	bool dirty, pending;
	char msg[512] = "";
	int r = o2_journal_state(v->fs, v->slot, &dirty, &pending);

	if (r < 0) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r),
			    "%s: reading the journal of slot %u: %s", v->device, v->slot,
			    o2_fs_error(v->fs)[0] ? o2_fs_error(v->fs) : g_strerror(-r));
		return false;
	}
	if (!pending)
		return true;
	if (v->opts.norecovery) {
		g_warning("%s: the journal of slot %u holds committed transactions that are not "
			  "replayed (norecovery): what this read-only mount shows is older than "
			  "what was committed",
			  v->device, v->slot);
		return true;
	}
	if (v->cluster && !cluster_lock_journal(v->cluster, v->fs, v->slot, err))
		return false;
	o2_fs_close(v->fs);
	v->fs = NULL;
	o2_blockdev_free(v->dev);
	v->dev = NULL;
	r = open_dev_flags(v, devflags & ~O2_DEV_RDONLY);
	if (r < 0) {
		if (v->cluster)
			cluster_unlock_journal(v->cluster);
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r),
			    "%s: the journal of slot %u needs replay (a crash left committed "
			    "transactions in it), and the device cannot be opened for writing (%s); "
			    "mount with norecovery to see the volume as it was before them",
			    v->device, v->slot, g_strerror(-r));
		return false;
	}
	oo.flags |= O2_OPEN_RDWR;
	if (v->cluster) {
		oo.flags |= O2_OPEN_CLAIM_SLOT;
		oo.node = cluster_nodeid(v->cluster);
	}
	struct o2_fs *rw = NULL;

	r = o2_fs_open_opts(v->dev, &oo, &rw, msg, sizeof(msg));
	if (r == 0)
		r = o2_fs_close_why(rw, msg, sizeof(msg));
	if (v->cluster)
		cluster_unlock_journal(v->cluster);
	if (r == -ECANCELED) {
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_CANCELLED,
			    "%s: mount cancelled before the journal of slot %u was replayed to its "
			    "end: the journal is left whole for the next mount to replay",
			    v->device, v->slot);
		return false;
	}
	if (r < 0) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r),
			    "%s: replaying the journal of slot %u before the read-only mount: %s",
			    v->device, v->slot, msg);
		return false;
	}
	g_message("%s: replayed the journal of slot %u before mounting read-only", v->device,
		  v->slot);
	o2_blockdev_free(v->dev);
	v->dev = NULL;
	if (!open_dev(v, devflags, err))
		return false;
	r = o2_fs_open_opts(v->dev, ro_oo, &v->fs, msg, sizeof(msg));
	if (r < 0) {
		v->fs = NULL;
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r), "%s: %s", v->device, msg);
		return false;
	}
	return true;
}

/*
 * One mount per volume on this machine, however the device is named (an
 * image, a loop device over it, another name of one disk): the volume's
 * UUID is claimed with a lock file under RUN_VOLUMES, which says where it
 * is mounted.  The lock goes with the process, so a killed daemon leaves
 * no claim behind.  Where the directory cannot be made (not root), the
 * flock on the device itself is all there is.
 */
#define RUN_VOLUMES "/run/ocfs2d/volumes"

static bool claim_uuid(struct volume *v, const uint8_t uuid[16], GError **err)
{
	char hex[33], path[sizeof(RUN_VOLUMES) + 40];
	int fd;

	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02X", uuid[i]);
	snprintf(path, sizeof(path), RUN_VOLUMES "/%s", hex);
	if (g_mkdir_with_parents(RUN_VOLUMES, 0700) < 0 ||
	    (fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0) {
		g_debug("%s: cannot claim the volume in %s: %s", v->device, RUN_VOLUMES,
			g_strerror(errno));
		return true;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		char owner[2 * PATH_MAX + 8] = "";
		ssize_t n = pread(fd, owner, sizeof(owner) - 1, 0);
		char *nl;

		owner[n > 0 ? n : 0] = '\0';
		nl = strchr(owner, '\n');
		if (nl)
			*nl = '\0';
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_BUSY,
			    "%s: volume %s is already mounted on this machine, on %s: one volume, "
			    "one mount (a second would be a writer the first knows nothing of)",
			    v->device, hex, owner[0] ? owner : "(unknown)");
		close(fd);
		return false;
	}
	g_autofree char *text = g_strdup_printf("%s\n%s\n", v->mountpoint, v->device);

	if (ftruncate(fd, 0) < 0 || pwrite(fd, text, strlen(text), 0) < 0)
		g_debug("%s: writing %s: %s", v->device, path, g_strerror(errno));
	v->claim_fd = fd;
	return true;
}

static void release_uuid(struct volume *v)
{
	if (v->claim_fd >= 0) {
		if (ftruncate(v->claim_fd, 0) < 0)
			g_debug("%s: emptying its claim: %s", v->device, g_strerror(errno));
		close(v->claim_fd);
		v->claim_fd = -1;
	}
}


/* fscore asks before it frees an inode whose last name is gone (under the
 * volume mutex, in a transaction: open locks never wait on it). */
static int fs_open_elsewhere(void *arg, uint64_t blkno, uint32_t gen)
{
	struct volume *v = arg;

	return cluster_open_elsewhere(v->cluster, blkno, gen);
}

/* fscore asks whether the operation under way holds a system file's lock
 * (under the volume mutex: answered from what this thread's operation holds). */
/* fscore's before_home: the locks of inodes made here are known everywhere first. */
static int fs_before_home(void *arg)
{
	struct volume *v = arg;

	return cluster_settle(v->cluster);
}

static bool fs_lock_held(void *arg, uint64_t blkno, bool ex)
{
	(void)arg;
	return cluster_sys_held(blkno, ex);
}

static bool open_fs(struct volume *v, const struct volume_watch *watch, GError **err)
{
	char msg[512] = "";
	unsigned devflags = O2_DEV_EXCLUSIVE | (v->opts.ro ? O2_DEV_RDONLY : 0);
	struct o2_fs *probe = NULL;
	bool ok = true;
	int r;

	if (!open_dev(v, devflags, err))
		return false;
	/* look before touching anything: a read-only open changes nothing */
	if (!probe_fs(v, &probe, err))
		return false;
	struct o2_super_info si = *o2_fs_super(probe);
	bool clustered = !(si.feature_incompat & O2_FEATURE_INCOMPAT_LOCAL_MOUNT);

	if (!claim_uuid(v, si.uuid, err)) {
		o2_fs_close(probe);
		return false;
	}

	if (clustered && !v->opts.nocluster) {
		o2_fs_close(probe);
		devflags |= O2_DEV_DIRECT;
		if (!join_cluster(v, devflags, &si, err))
			return false;
	} else {
		if (clustered)
			g_warning("%s: mounted WITHOUT the cluster (nocluster): nothing stops another "
				  "node from using this %s volume at the same time, which would "
				  "corrupt it",
				  v->device, o2_fs_stack_name(probe));
		v->slot = v->opts.slot;
		ok = check_unused(probe, v, err);
		o2_fs_close(probe);
		if (!ok)
			return false;
	}

	struct o2_open_opts oo = {
		.flags = (v->opts.ro ? O2_OPEN_RDONLY : O2_OPEN_RDWR) | (v->opts.acl ? O2_OPEN_ACL : 0),
		.slot = v->slot,
		.commit_interval_ms = v->opts.commit_s * 1000,
		.localalloc_mb = v->opts.localalloc_mb,
		.cache_blocks = 32768,
		/* 32 MiB of 4 KiB blocks: ready before the first request needs them */
		.cache_prefill = 8192,
	};
	if (v->cluster) {
		oo.flags |= O2_OPEN_SHARED;
		oo.open_elsewhere = fs_open_elsewhere;
		oo.lock_held = fs_lock_held;
		oo.before_home = fs_before_home;
		oo.cluster_arg = v;
	}
	if (watch) {
		/* a replay stopped half-way leaves the log whole: safe to stop */
		oo.replay_progress = watch->progress;
		oo.progress_arg = watch->arg;
	}
	if (v->cluster && !v->opts.ro) {
		oo.flags |= O2_OPEN_CLAIM_SLOT;
		oo.node = cluster_nodeid(v->cluster);
	}
	r = o2_fs_open_opts(v->dev, &oo, &v->fs, msg, sizeof(msg));
	if (r == -ECANCELED) {
		v->fs = NULL;
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_CANCELLED,
			    "%s: mount cancelled before the journal of slot %u was replayed to its "
			    "end: the journal is left whole for the next mount to replay",
			    v->device, v->slot);
	} else if (r < 0) {
		v->fs = NULL;
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r), "%s: %s", v->device, msg);
	} else if (v->opts.ro) {
		ok = replay_before_ro(v, devflags, &oo, err);
	}
	if (v->cluster)
		cluster_mount_done(v->cluster);
	if (r < 0 || !ok)
		return false;
	const struct o2_super_info *osi = o2_fs_super(v->fs);
	struct o2_inode *root;

	v->root = osi->root_blkno;
	v->cluster_size = osi->cluster_size;
	v->block_size = osi->block_size;
	r = o2_inode_get(v->fs, v->root, &root);
	if (r < 0) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r),
			    "%s: reading the root directory: %s", v->device,
			    o2_fs_error(v->fs)[0] ? o2_fs_error(v->fs) : g_strerror(-r));
		return false;
	}
	v->root_gen = o2_inode_info(root)->generation;
	o2_inode_unref(root);
	if (v->cluster) {
		cluster_bitmap(v->cluster, &v->bitmap, &v->bitmap_gen);
		cluster_set_lock_cache(v->cluster, v->opts.lock_cache);
		/* file locks answer when the cluster decides, from a thread of
		 * their own: the io_uring codecs answer only inside the request */
		if (v->opts.uring && !v->opts.localflocks) {
			g_warning("%s: served through io_uring: flock and fcntl locks hold on this "
				  "node only (as with localflocks)", v->device);
		} else if (!v->opts.localflocks) {
			v->flocks = flocks_new(cluster_group(v->cluster), err);
			if (!v->flocks)
				return false;
		}
		/*
		 * Another node may change any name or inode at any time.  The
		 * kernel keeps an inode's attributes for as long as this node
		 * holds its lock (fs_lost makes it forget them when the lock
		 * goes; what it is told of an inode not under its lock comes
		 * with a timeout of 0), so the timeout is only a bound.  Names
		 * likewise under their directory's lock, once the kernel is
		 * known to take a new epoch (volume_mount); until then it asks
		 * for them again each time (forgetting one name at once would
		 * need the directory's i_rwsem, which a request waiting for
		 * the lock may hold).
		 */
		v->opts.attr_timeout = CLUSTER_ATTR_TIMEOUT_S;
		v->opts.entry_timeout = 0;
	}
	/*
	 * writeback_cache lets the kernel own written pages, sizes and times
	 * until it hands them over: only this node's kernel may then change
	 * the volume, and a read-only mount has nothing to hand over.
	 */
	if (v->opts.writeback_cache && v->cluster) {
		g_warning("%s: writeback_cache is for local volumes (other nodes could not see "
			  "what the kernel still holds): mounted without it", v->device);
		v->opts.writeback_cache = false;
	}
	if (v->opts.ro)
		v->opts.writeback_cache = false;
	return true;
}

/* ---- threads ---- */

/* Orphans freed in one pass (each takes a lock): the rest wait a tick. */
#define ORPHANS_PER_PASS 32

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int tick_fn(struct o2_fs *fs, void *arg)
{
	(void)arg;
	return o2_fs_tick(fs);
}

/* Quota changes into the global quota files, under their locks: those due (the tick's work). */
static int quota_sync_due_fn(struct o2_fs *fs, void *arg)
{
	(void)arg;
	return o2_fs_quota_sync(fs, true);
}

/* The same, every change now (unmount). */
static int quota_sync_all_fn(struct o2_fs *fs, void *arg)
{
	(void)arg;
	return o2_fs_quota_sync(fs, false);
}

struct orphan {
	uint64_t ino;
	uint32_t gen;
};

static int free_orphan_fn(struct o2_fs *fs, void *arg)
{
	const struct orphan *o = arg;

	return o2_fs_free_orphan(fs, o->ino, o->gen);
}

/*
 * The work of a clustered writer that changes the global bitmap: the timed
 * commit when it flushes the truncate log (tick), and freeing orphans
 * (fscore's o2_fs_orphans).  Each orphan is freed under its inode lock EX
 * (another node may have written to it while it had it open, under that
 * lock), then this slot's allocators' and orphan directory's, taken in
 * that order before the volume lock, as every operation takes them; the
 * global bitmap's (a flush of the truncate log), another slot's orphan
 * directory or allocators (an orphan of that slot) are taken when fscore
 * asks for them (fuseops_run_locked).  Orphans another node has open are
 * left out first, at the cost of a try of their open lock now and then
 * (cluster_orphans_due).  Returns how many orphans were left to another
 * pass (0: none).
 */
static size_t global_work(struct volume *v, bool tick)
{
	uint64_t *inos = NULL;
	size_t n = 0, left;

	g_mutex_lock(&v->lock);
	if (v->fs)
		volume_note_locked(v, "listing orphans", o2_fs_orphans(v->fs, &inos, &n));
	g_mutex_unlock(&v->lock);
	left = n > ORPHANS_PER_PASS ? n - ORPHANS_PER_PASS : 0;
	n -= left;
	if (n)
		qsort(inos, n, sizeof(*inos), cmp_u64); /* files: in block order */

	g_autofree uint32_t *gens = g_new0(uint32_t, n ? n : 1);
	g_autofree struct cluster_hold *held = g_new0(struct cluster_hold, n ? n : 1);
	struct held sys = { .n = 0 };

	g_mutex_lock(&v->lock);
	for (size_t i = 0; i < n && v->fs; i++) {
		/* only the lock's name: o2_fs_free_orphan checks it under the lock */
		fuseops_gen_unlocked(v, inos[i], &gens[i]);
	}
	g_mutex_unlock(&v->lock);
	/* one another node has open stays an orphan: try its open lock
	 * first, rather than pass its inode lock to and fro each second */
	n = cluster_orphans_due(v->cluster, inos, gens, n);
	for (size_t i = 0; i < n; i++)
		if (cluster_lock_inode(v->cluster, inos[i], gens[i], O2LT_EX, &held[i]) < 0)
			held[i].res = NULL;
	if (cluster_hold_own(v->cluster, &sys) == 0) {
		g_mutex_lock(&v->lock);
		if (v->fs && tick)
			volume_note_locked(v, "timed commit",
					   fuseops_run_locked(v, &sys, tick_fn, NULL));
		if (v->fs && tick)
			volume_note_locked(v, "quota sync",
					   fuseops_run_locked(v, &sys, quota_sync_due_fn, NULL));
		for (size_t i = 0; i < n && v->fs; i++) {
			struct orphan o = { inos[i], gens[i] };

			if (held[i].res)
				volume_note_locked(v, "freeing an orphan",
						   fuseops_run_locked(v, &sys, free_orphan_fn, &o));
		}
		g_mutex_unlock(&v->lock);
	}
	cluster_release(&sys);
	for (size_t i = n; i-- > 0;)
		cluster_unlock(&held[i]);
	free(inos);
	return left;
}

/* Commit the running transaction on the commit interval (and, on a
 * clustered volume, free the orphans other nodes no longer hold open). */
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
		/*
		 * On a clustered volume the global bitmap's lock (and orphans'
		 * inode locks) are taken only when there is such work, so that
		 * idle writers do not pass it to and fro every second.
		 */
		bool global = false;

		if (v->cluster && !v->opts.ro) {
			g_mutex_lock(&v->lock);
			global = v->fs && o2_fs_global_work(v->fs);
			g_mutex_unlock(&v->lock);
		}
		if (global) {
			global_work(v, true);
		} else {
			g_mutex_lock(&v->lock);
			/* work for the global bitmap that came up meanwhile waits a tick */
			if (v->fs && !v->opts.ro && (!v->cluster || !o2_fs_global_work(v->fs)))
				volume_note_locked(v, "timed commit", o2_fs_tick(v->fs));
			g_mutex_unlock(&v->lock);
		}
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

static int run_deallocs_fn(struct o2_fs *fs, void *arg)
{
	(void)arg;
	return o2_fs_run_deallocs(fs);
}

static int close_fs(struct volume *v)
{
	int r = 0;

	GError *e = NULL;
	struct held sys = { .n = 0 };

	/* no request is served any more: leave the file-lock group cleanly,
	 * and this node's file locks go */
	flocks_free(v->flocks);
	v->flocks = NULL;
	/* the kernel's references go first: what they kept may be an orphan
	 * to free now, under its lock (fscore frees none by itself) */
	g_mutex_lock(&v->lock);
	if (v->fs)
		fuseops_forget_all(v);
	g_mutex_unlock(&v->lock);
	if (v->cluster && v->fs && !v->opts.ro)
		for (int pass = 0; pass < 8 && global_work(v, false) > 0; pass++)
			;
	/* the slot map changes under the super lock only, and the truncate
	 * log's last flush and the window's return under the global bitmap's
	 * and this slot's allocators' (taken before the volume mutex, as every
	 * cluster lock is; dropped as the cluster is left) */
	if (v->cluster && v->fs && !v->opts.ro) {
		if (!cluster_unmount_begin(v->cluster, &e)) {
			g_warning("%s: %s; closing without it", v->device, e->message);
			g_clear_error(&e);
		}
		if (cluster_hold_own(v->cluster, &sys) < 0 ||
		    cluster_hold_sys(v->cluster, &sys, v->bitmap, v->bitmap_gen, O2LT_EX) < 0)
			g_warning("%s: cannot lock the global bitmap and the slot's allocators; "
				  "closing without them", v->device);
	}
	g_mutex_lock(&v->lock);
	/* frees waiting for other slots' allocators' locks: before the close */
	if (v->cluster && v->fs && !v->opts.ro && o2_fs_deallocs_pending(v->fs))
		volume_note_locked(v, "freeing into another slot's allocator",
				   fuseops_run_locked(v, &sys, run_deallocs_fn, NULL));
	/* quota changes reach the global files under their locks: before the close */
	if (v->cluster && v->fs && !v->opts.ro)
		volume_note_locked(v, "quota sync",
				   fuseops_run_locked(v, &sys, quota_sync_all_fn, NULL));
	if (v->fs) {
		char why[256];

		fuseops_forget_all(v);
		r = o2_fs_close_progress(v->fs, v->close_watch ? v->close_watch->progress : NULL,
					 v->close_watch ? v->close_watch->arg : NULL, why,
					 sizeof(why));
		if (r < 0)
			g_warning("%s: closing the volume failed: %s; the journal is left for the "
				  "next mount to replay", v->device, why);
		v->fs = NULL;
	}
	struct cluster *c = v->cluster;

	v->cluster = NULL; /* under the lock: the D-Bus API reads it so */
	g_mutex_unlock(&v->lock);
	cluster_release(&sys);
	cluster_leave(c);
	if (v->dev) {
		o2_blockdev_free(v->dev);
		v->dev = NULL;
	}
	release_uuid(v);
	return r;
}

/*
 * Serve the session until it ends, then close the volume.  A clustered
 * volume is served in turns with hand-on (session_serve): a request about
 * to wait for another node's lock hands the serving to another thread, so
 * it holds up nothing else.
 */
static gpointer fuse_main(gpointer arg)
{
	struct volume *v = arg;
	int r;

	bool turns = !v->use_uring && (v->opts.poll_us || v->cluster);

	/* requests run where they are read: fsyncs get threads of their own
	   (fuseops.c, fsync_blk) */
	if (!v->use_uring && (turns || v->opts.threads <= 1))
		v->sync_pool = g_thread_pool_new(fuseops_sync_job, NULL, (gint)MAX(v->opts.threads, 2u),
						 FALSE, NULL);
	if (v->cluster && !v->opts.ro)
		v->write_back_pool = g_thread_pool_new(fuseops_write_back_job, NULL, 1, FALSE, NULL);
	if (v->use_uring) {
		r = uring_serve(v);
	} else if (turns) {
		r = session_serve(v, v->cluster != NULL);
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
	/* fsyncs still running reply while the session can take replies */
	if (v->sync_pool) {
		g_thread_pool_free(v->sync_pool, FALSE, TRUE);
		v->sync_pool = NULL;
	}
	if (v->write_back_pool) {
		GThreadPool *p = v->write_back_pool;

		g_mutex_lock(&v->lock);
		v->write_back_pool = NULL; /* no more: the session is gone */
		g_mutex_unlock(&v->lock);
		g_thread_pool_free(p, FALSE, TRUE);
	}
	if (r < 0 && r != -ENODEV && r != -ECONNABORTED)
		g_warning("%s: FUSE session ended: %s", v->mountpoint, g_strerror(-r));
	/* the kernel side is gone (or going): no request can reach us now */
	g_mutex_lock(&v->lock);
	v->kernel_gone = true;
	while (v->invalidating)
		g_cond_wait(&v->inval_cond, &v->lock);
	g_mutex_unlock(&v->lock);
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
	if (v->gens)
		g_hash_table_destroy(v->gens);
	g_mutex_clear(&v->lock);
	g_cond_clear(&v->flush_cond);
	g_cond_clear(&v->inval_cond);
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
		  void (*gone)(struct volume *, void *), void *gone_arg,
		  const struct volume_watch *watch, struct volume **ret, GError **err)
{
	struct volume *v = g_new0(struct volume, 1);
	char *absmnt = realpath(mountpoint, NULL);

	g_mutex_init(&v->lock);
	g_cond_init(&v->flush_cond);
	g_cond_init(&v->inval_cond);
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
	v->claim_fd = -1;
	v->nodes = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
	v->gens = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);

	if (!prepare_mountpoint(v->mountpoint, err) || !open_fs(v, watch, err))
		goto fail;
	struct fuse_lowlevel_ops ops;

	fuseops_table(v, &ops);
	v->se = session_new(v, &ops, err);
	if (!v->se)
		goto fail;
	v->use_uring = uring_wanted(v);
	/* the safe point: once the kernel has the mount, it is not taken back */
	if (watch && !watch->commit(watch->arg)) {
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_CANCELLED,
			    "%s: mount cancelled before it was mounted on %s", v->device,
			    v->mountpoint);
		goto fail;
	}
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
	/*
	 * Names cached under directory locks need a kernel that can forget
	 * them all without a lock (session_notify_new_epoch): ask it once
	 * now, before any request is served.
	 */
	if (v->cluster) {
		r = session_notify_new_epoch(v);
		v->names_cached = r == 0;
		if (v->names_cached)
			v->opts.entry_timeout = CLUSTER_ATTR_TIMEOUT_S;
		else
			g_message("%s: the kernel cannot drop FUSE names by epoch (%s; Linux 6.16 "
				  "can): every name is looked up each time", v->device, g_strerror(-r));
	}
	v->conn_id = connection_id(v->mountpoint);
	v->tick_thread = v->opts.ro ? NULL : g_thread_new("ocfs2d-tick", tick_main, v);
	v->fuse_thread = g_thread_new("ocfs2d-fuse", fuse_main, v);
	g_message("%s: mounted on %s (%s volume, slot %u%s%s)", v->device, v->mountpoint,
		  o2_fs_stack_name(v->fs), v->slot, v->opts.ro ? ", read-only" : "",
		  v->cluster ? ", through the cluster" : "");
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

void volume_take_kernel_pages(struct volume *v)
{
	g_mutex_lock(&v->lock);
	bool wanted = v->opts.writeback_cache && !v->kernel_gone;

	g_mutex_unlock(&v->lock);
	if (!wanted)
		return;
	int fd = open(v->mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || syncfs(fd) < 0)
		g_warning("%s: asking the kernel for its written pages: %s", v->mountpoint,
			  g_strerror(errno));
	if (fd >= 0)
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
	/* busy and forced: detach, then cut the connection so the volume can
	 * close - with what the kernel still held written first */
	volume_take_kernel_pages(v);
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
