/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A clustered volume's place in its cluster (docs/ARCHITECTURE.md,
 * "Cluster mounts").
 *
 * A volume formatted for a cluster stack (o2cb, pcmk) is mounted through
 * the cluster: the daemon joins the volume's CPG lock-service group (one
 * per volume, named from its UUID), with a lock cache in front, served by
 * a thread of its own (the cache's "service side").  Mounting takes the
 * super lock EX, reads the slot map and the journals, claims a slot, takes
 * that slot's journal lock EX for as long as the volume is mounted (that
 * is what tells the others this node is alive on the slot), and lowers the
 * super lock.  Unmounting takes the super lock again, empties the journal
 * and the slot (fscore does both at close), and leaves the group cleanly.
 *
 * Every node mounts on a slot of its own (read-only mounts claim none and
 * write nothing); docs/ARCHITECTURE.md, "Cluster mounts".
 *
 * Threads: every function here is called from the volume's mount or
 * unmount path, never from the service thread, and may block on the lock
 * service.
 */
#ifndef OCFS2D_CLUSTER_H
#define OCFS2D_CLUSTER_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "o2fs/o2fs.h"

struct cluster;
struct mount_opts;
struct o2lt_member_info;
struct o2lc_stats;

/*
 * Join the lockspace of the volume described by si (read from device,
 * named in messages): check that corosync runs and that its cluster name
 * is the volume's, join the group and wait until this member has its
 * state.  NULL with *err set on failure.
 */
struct cluster *cluster_join(const char *device, const struct o2_super_info *si, GError **err);

/*
 * Under the super lock (taken here and held until cluster_mount_done),
 * decide the slot this node mounts with: its own slot if the slot map
 * still has it (a crash of this node's daemon), else the preferred slot
 * (opts->slot) if free, else the lowest free one.  Refused (false, *err
 * set) if no slot is free, if a node died holding a slot and is not yet
 * recovered, or if a journal needs recovery.  For read-write, the slot's
 * journal lock is taken and held until cluster_leave, and so are the
 * locks of the slot's local-alloc window and truncate log (no other node
 * touches them while this one lives).  The slot's allocators' and orphan
 * directory's locks and the global bitmap's are taken EX too (opening a
 * slot gives back into them what a crash left) and held, as the mounting
 * thread's operation (cluster_sys_held), until cluster_mount_done.  fs is a read-only
 * handle opened after cluster_join (its cache is no older than the super
 * lock).
 */
bool cluster_mount_slot(struct cluster *c, struct o2_fs *fs, const struct mount_opts *opts,
			unsigned *ret_slot, GError **err);
/*
 * Take slot's journal lock EX without waiting (a read-only mount that must
 * replay its slot's journal first), and drop it again.  Under the super
 * lock.
 */
bool cluster_lock_journal(struct cluster *c, struct o2_fs *fs, unsigned slot, GError **err);
void cluster_unlock_journal(struct cluster *c);

/* The mount is done (or failed): lower the global bitmap's and the super lock. */
void cluster_mount_done(struct cluster *c);

/* The global bitmap inode (for its lock), known once a slot is decided. */
void cluster_bitmap(const struct cluster *c, uint64_t *blkno, uint32_t *gen);

/* Before closing the volume: take the super lock EX (for the slot map). */
bool cluster_unmount_begin(struct cluster *c, GError **err);

/*
 * Drop every lock and leave the group cleanly, then free c.  Call it once
 * the volume is closed (its journal clean, or left dirty for recovery).
 */
void cluster_leave(struct cluster *c);

uint32_t cluster_nodeid(const struct cluster *c);
const char *cluster_name(const struct cluster *c);
/* The volume's CPG lock group. */
const char *cluster_group(const struct cluster *c);

/*
 * The locks of filesystem operations (docs/ARCHITECTURE.md, "Cluster
 * locks").  An operation takes the M lock of each inode it reads (PR) or
 * changes (EX) before it takes the volume mutex, and drops them after; the
 * lock cache keeps them cached between operations.  The filesystem side
 * (volume.c) says what must happen when a lock moves:
 *   writeback: a lock leaves EX, or leaves this node: put everything
 *     changed on the disk, as far as `how` says (o2_fs_writeback: HOME
 *     from EX to PR, ALL from EX to NL, LOG from PR to NL); 0, or -errno:
 *     the lock stays and the write-back is retried;
 *   lost: inode blkno's lock goes to NL: whatever is cached may go stale
 *     (blocks, and what the kernel caches of the inode);
 *   refresh: an inode lock is regained: its block, read without the lock
 *     (by a lookup in its directory), may be stale; lvb (NULL: none valid)
 *     is the value block the last node to leave EX stored (o2_inode_lvb);
 *   lvb: an inode lock leaves EX, everything written back: fill lvb
 *     (O2LC_LVB_LEN bytes) for the next holder (o2_inode_lvb), zeros when
 *     there is nothing to tell;
 *   invalidate: inode blkno's lock is about to go lower (or be dropped):
 *     the kernel's pages of it go (dirty ones written back first).  It
 *     runs before local users are drained, on a thread of its own, and
 *     requests taking the lock with CLUSTER_ADMIT pass meanwhile (the
 *     kernel holds page locks for them, which the invalidation waits for);
 *   waiting (may be NULL): the calling thread, taking a lock, is about to
 *     wait for another node (the lock is asked for already); a thread
 *     serving requests inline hands its place to another first.
 * They run with no cluster lock held by the calling thread and may take
 * the volume mutex.  Set before the first inode lock is taken.
 */
struct cluster_fs_ops {
	int (*writeback)(void *arg, enum o2_writeback how);
	void (*lost)(void *arg, uint64_t blkno);
	void (*refresh)(void *arg, uint64_t blkno, const uint8_t *lvb);
	void (*lvb)(void *arg, uint64_t blkno, uint8_t *lvb);
	void (*invalidate)(void *arg, uint64_t blkno);
	void (*waiting)(void *arg);
};
void cluster_set_fs(struct cluster *c, const struct cluster_fs_ops *ops, void *arg);

struct cluster_hold {
	struct o2lc_res *res; /* NULL: nothing held */
	int mode;
};

/*
 * Take the M lock of inode blkno (generation gen) in mode (O2LT_PR or
 * O2LT_EX) into h, waiting for other nodes.  0, or -errno (-EIO once the
 * cluster is gone).  Never with the volume mutex held.
 */
int cluster_lock_inode(struct cluster *c, uint64_t blkno, uint32_t gen, int mode,
		       struct cluster_hold *h);
/*
 * The same with flags: CLUSTER_ADMIT, a request the kernel sends holding
 * page locks of the inode (read, write), which passes while the inode's
 * pages are being invalidated; CLUSTER_WRITER (EX), a node that may write
 * the inode's data lowers the lock from EX to NL, never to PR (so it never
 * waits to convert PR to EX while holding a page lock).
 */
#define CLUSTER_ADMIT 0x1u
#define CLUSTER_WRITER 0x2u
int cluster_lock_inode_flags(struct cluster *c, uint64_t blkno, uint32_t gen, int mode,
			     unsigned flags, struct cluster_hold *h);
/*
 * The M lock of inode blkno PR into h only if this node holds it already
 * (cached, refreshed, nobody waiting for it): no message, no wait, so it
 * may be taken under the volume mutex.  0, or -EWOULDBLOCK / -EAGAIN.
 */
int cluster_lock_inode_cached(struct cluster *c, uint64_t blkno, uint32_t gen,
			      struct cluster_hold *h);
/* Let go of what h holds (nothing if it holds nothing). */
void cluster_unlock(struct cluster_hold *h);
/*
 * The rename lock (R) EX into h: a rename between two directories takes it
 * before any other lock, so that no two of them lock directories in
 * orders that cross.
 */
int cluster_lock_rename(struct cluster *c, struct cluster_hold *h);

/*
 * The cluster locks one operation holds, in the order taken: inode locks
 * (fuseops.c, "cluster locks"), then system files' (sys): this slot's
 * allocators and orphan directory, another slot's, in block order, and
 * the global bitmap's last.  An operation holds this slot's for every
 * change; fscore asks for the others when it needs them (o2_open_opts'
 * lock_held), and cluster_hold_sys takes one in its place in the order,
 * letting the later ones go meanwhile.  The held set of the operation
 * running on a thread is what cluster_sys_held answers from.
 */
#define HELD_MAX 16

struct held {
	struct cluster_hold h[HELD_MAX];
	uint64_t blk[HELD_MAX]; /* 0: the rename lock */
	uint32_t gen[HELD_MAX];
	bool sys[HELD_MAX];
	unsigned n;
	unsigned retries; /* locks fscore asked for (a bound against loops) */
	/* a read or write: the kernel holds page locks of the inode for it */
	bool admit;
};

/*
 * Take system inode blkno's lock (generation gen) in mode into hd, in its
 * place in the order: system-file locks hd holds that come after it are
 * let go first and taken again after it.  hd becomes this thread's
 * operation's.  Never with the volume mutex held.  0 or -errno; on an
 * error hd may have lost locks that came after blkno (cluster_release
 * still lets go what it holds).
 */
int cluster_hold_sys(struct cluster *c, struct held *hd, uint64_t blkno, uint32_t gen, int mode);
/* This slot's inode allocator, extent allocator and orphan directory EX (a change). */
int cluster_hold_own(struct cluster *c, struct held *hd);
/* Let go of the system-file locks at the end of hd (1 if it held any). */
bool cluster_drop_sys(struct held *hd);
/* hd is this thread's operation's (inode locks taken by the caller). */
void cluster_held_use(struct held *hd);
/* Let go of everything hd holds; it is no longer this thread's. */
void cluster_release(struct held *hd);
/*
 * Whether hd holds inode blkno's lock and another node asked for it in
 * the last CLUSTER_CONTENDED_US: the next node will soon want what this
 * operation wrote.
 */
#define CLUSTER_CONTENDED_US G_USEC_PER_SEC
bool cluster_held_contended(const struct held *hd, uint64_t blkno);
/*
 * Write back now what a lock leaving EX for PR would (cluster_fs_ops
 * writeback, O2_WB_HOME), with no lock asked for: before another node
 * asks.  0 or -errno.  Never with the volume mutex held.
 */
int cluster_write_back(struct cluster *c);
/*
 * Whether the operation running on this thread holds system inode
 * blkno's lock, in EX if ex (fscore's o2_open_opts.lock_held).
 */
bool cluster_sys_held(uint64_t blkno, bool ex);

/*
 * Open locks (the O lock of an inode): cluster_open_hold takes it PR into
 * h for as long as this node has the inode open (waiting for another node's
 * try to end); cluster_unlock lets it go, and it stays cached until
 * another node's try asks for it or the lock cache's LRU drops it.
 * cluster_open_elsewhere tries it EX without waiting: 0 if no other node
 * holds it, 1 if one does (which is told, and lets it go if it only caches
 * it), -errno.  Unlike
 * inode locks they may be taken and dropped under the volume mutex:
 * nothing is written back when they move.
 */
int cluster_open_hold(struct cluster *c, uint64_t blkno, uint32_t gen, struct cluster_hold *h);
int cluster_open_elsewhere(struct cluster *c, uint64_t blkno, uint32_t gen);
/*
 * Inode blkno (generation gen) was just made here, and no other node can
 * know of it until this node writes it home: its inode lock is taken as
 * new (o2lc_lock_new: held at once, no message waited for; EX, lowered to
 * NL rather than PR if file, which may be opened for writing) and, if
 * file, its open lock too (PR), and both left cached for the operations
 * that follow.  Never waits (a name the cache knows already is only
 * asked for), so it may run under the volume mutex.  Returns whether the
 * inode lock is held now.
 */
bool cluster_made(struct cluster *c, uint64_t blkno, uint32_t gen, bool file);
/*
 * Before this node writes home what it logged (where other nodes may read
 * it): wait until every lock taken as new has its place in the lock
 * service's order (o2lc_settle).  It waits for the service, never for
 * another node.  0, or -EIO once the cluster is gone.
 */
int cluster_settle(struct cluster *c);

/*
 * Of the n orphans blknos (generations gens), the ones worth taking locks
 * for now, moved to the front: their number.  Each is first tried with
 * cluster_open_elsewhere, which costs one message and waits for no node;
 * one another node holds open is left out, and looked at again after a
 * wait that doubles each time it is still open (1 s to a minute).  Not
 * with the volume mutex held; one caller thread at a time.
 */
size_t cluster_orphans_due(struct cluster *c, uint64_t *blknos, uint32_t *gens, size_t n);

/* Keep at most n idle locks cached; the least recently used go first. */
void cluster_set_lock_cache(struct cluster *c, unsigned n);

/*
 * The members the lock table knows now (g_free *ret), and the lock
 * cache's counters.  Any thread but the service side.
 */
size_t cluster_members(struct cluster *c, struct o2lt_member_info **ret);
void cluster_lock_stats(struct cluster *c, struct o2lc_stats *ret);

#endif
