/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fscore: the OCFS2 filesystem core.  The public API.
 *
 * Conventions: functions return >= 0 on success and -errno on failure.
 * Corruption found on disk is -EUCLEAN; the volume handle then holds a
 * message naming the block and the fault (o2_fs_error()).  Out-parameters
 * (ret_*) are written only on success.  A volume handle is not thread-safe;
 * callers serialise access to it.
 */
#ifndef O2FS_H
#define O2FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "o2fs/blockdev.h"

struct o2_fs;
struct o2_inode;

/* ---- feature bits (superblock) ---- */
#define O2_FEATURE_COMPAT_BACKUP_SB 0x0001
#define O2_FEATURE_COMPAT_JBD2_SB 0x0002

#define O2_FEATURE_INCOMPAT_HEARTBEAT_DEV 0x0002
#define O2_FEATURE_INCOMPAT_RESIZE_INPROG 0x0004
#define O2_FEATURE_INCOMPAT_LOCAL_MOUNT 0x0008
#define O2_FEATURE_INCOMPAT_SPARSE_ALLOC 0x0010
#define O2_FEATURE_INCOMPAT_TUNEFS_INPROG 0x0020
#define O2_FEATURE_INCOMPAT_INLINE_DATA 0x0040
#define O2_FEATURE_INCOMPAT_USERSPACE_STACK 0x0080
#define O2_FEATURE_INCOMPAT_EXTENDED_SLOT_MAP 0x0100
#define O2_FEATURE_INCOMPAT_XATTR 0x0200
#define O2_FEATURE_INCOMPAT_INDEXED_DIRS 0x0400
#define O2_FEATURE_INCOMPAT_META_ECC 0x0800
#define O2_FEATURE_INCOMPAT_REFCOUNT_TREE 0x1000
#define O2_FEATURE_INCOMPAT_DISCONTIG_BG 0x2000
#define O2_FEATURE_INCOMPAT_CLUSTERINFO 0x4000
#define O2_FEATURE_INCOMPAT_APPEND_DIO 0x8000

#define O2_FEATURE_RO_COMPAT_UNWRITTEN 0x0001
#define O2_FEATURE_RO_COMPAT_USRQUOTA 0x0002
#define O2_FEATURE_RO_COMPAT_GRPQUOTA 0x0004

enum o2_feature_class { O2_COMPAT, O2_INCOMPAT, O2_RO_COMPAT };

/*
 * The name of one feature bit as mkfs.ocfs2 and debugfs.ocfs2 spell it
 * ("sparse", "indexed-dirs", ...), or NULL for a bit with no name.
 */
const char *o2_feature_name(enum o2_feature_class cls, uint32_t bit);

/* ---- opening a volume ---- */

#define O2_OPEN_RDONLY 0x0
#define O2_OPEN_RDWR 0x1
/* POSIX ACLs take part in permissions (kernel OCFS2's "acl" mount option):
 * o2_acl_set is allowed, new inodes inherit default ACLs, chmod updates
 * the access ACL.  Without it ACLs on disk are left alone. */
#define O2_OPEN_ACL 0x2
/* Read-write: record node (o2_open_opts.node) in the slot map for the
 * slot, before the journal is marked in use, and empty the entry again
 * at a clean close, once the journal is clean (cluster mounts, under the
 * super lock). */
#define O2_OPEN_CLAIM_SLOT 0x4
/* Other nodes change the device while it is open (a cluster mount): read
 * no block ahead of need, since a block read without the cluster lock that
 * covers it may be stale by the time that lock is taken.  The caller keeps
 * the cache honest with o2_fs_writeback and o2_fs_drop_cached. */
#define O2_OPEN_SHARED 0x8

/*
 * Probe dev for an OCFS2 superblock at every block size 512..4096, validate
 * it, and check that fscore implements every incompat feature (and, for
 * O2_OPEN_RDWR, every ro-compat feature) it carries.  On failure the reason
 * is written to errbuf (if not NULL): -ENODATA no OCFS2 superblock found,
 * -EUCLEAN a damaged superblock, -EOPNOTSUPP a feature not implemented (the
 * message names it), -EIO/-ENOMEM.  The handle borrows dev; the caller frees
 * dev after o2_fs_close().
 */
int o2_fs_open(struct o2_blockdev *dev, unsigned flags, struct o2_fs **ret_fs, char *errbuf,
	       size_t errlen);

struct o2_open_opts {
	unsigned flags;		     /* O2_OPEN_* */
	unsigned slot;		     /* read-write: the slot whose journal this node writes */
	uint32_t node;		     /* O2_OPEN_CLAIM_SLOT: this node's number */
	uint32_t commit_interval_ms; /* commit the running transaction at least this often; 0: 5000 */
	size_t cache_blocks;	     /* clean metadata blocks kept cached; 0: 8192 */
	size_t cache_prefill;	     /* block buffers allocated and touched at open, so a
					busy start does not page-fault for each (0: none) */
	uint32_t localalloc_mb;	     /* the local alloc window's size in MiB (the kernel's
					localalloc=); 0, or more than the window's bitmap
					holds: the kernel's default for the volume */
	/* Wall clock in nanoseconds since the epoch; NULL: CLOCK_REALTIME. */
	uint64_t (*now_ns)(void *arg);
	void *clock_arg;
	/*
	 * Cluster mounts: asked before an inode whose last name is gone is
	 * freed (at the unlink, at the last close here, when orphans are
	 * reaped): 1 if another node still has it open (it then waits in this
	 * slot's orphan directory for o2_fs_free_orphan), 0 if it may go,
	 * -errno taken as 1.  It must answer without waiting for other nodes
	 * (a try of the inode's open lock): it runs inside a transaction.
	 * NULL: nobody else can have it open.
	 */
	int (*open_elsewhere)(void *arg, uint64_t blkno, uint32_t generation);
	void *cluster_arg;
	/*
	 * Cluster mounts: whether the caller holds, for the operation under
	 * way, the cluster lock of system inode blkno - the global bitmap, or
	 * a slot's inode allocator, extent allocator or orphan directory - in
	 * EX (ex) or at least PR.  fscore asks before it changes such a file,
	 * and never waits for a lock: when the answer is no, the operation
	 * stops before it has changed anything with -O2_ENEEDLOCK, and
	 * o2_fs_lock_wanted names the lock; the caller takes it (with none of
	 * the handle's calls running) and runs the operation again.  Frees
	 * into an allocator whose lock is not held wait for
	 * o2_fs_run_deallocs.  Answered from what the caller holds (no
	 * message).  NULL: one node, every lock as good as held.
	 */
	bool (*lock_held)(void *arg, uint64_t blkno, bool ex);
	/*
	 * Cluster mounts: called before a checkpoint writes logged blocks
	 * home, where other nodes may read them without a lock of ours (an
	 * inode's generation, to name its lock): the daemon returns once
	 * every lock it took on something new is known to the lock service
	 * before anything another node might ask.  It must not wait for
	 * other nodes.  0, or -errno: the checkpoint fails, nothing written.
	 * NULL: none.
	 */
	int (*before_home)(void *arg);
	/*
	 * Read-write: how the replay of a journal a crash left goes, for the
	 * open only (never called after it returns).  Called with done 0 before
	 * the log is read, then with total (the blocks committed transactions
	 * hold, known once the log is scanned) and done (the blocks replayed or
	 * skipped for a revoke) as the replay writes them home.  A non-zero
	 * answer stops the replay: the open fails with -ECANCELED and the log
	 * is left as it was (still dirty, whole: what an interrupted replay
	 * leaves, which the next open replays from its start).  NULL: none.
	 */
	int (*replay_progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
};

/*
 * o2_fs_open with options.  Read-write opening also replays the slot's own
 * journal if it was left dirty (a crash), then marks the journal in use
 * (OCFS2_JOURNAL_DIRTY_FL) until o2_fs_close().  It does not check whether
 * another node uses the slot: that is the caller's (the cluster layer's) job.
 */
int o2_fs_open_opts(struct o2_blockdev *dev, const struct o2_open_opts *opts,
		    struct o2_fs **ret_fs, char *errbuf, size_t errlen);

/*
 * Close the volume.  Read-write: commit, checkpoint everything home, mark
 * the journal empty and clean.  The handle is freed even on failure (the
 * journal is then left dirty for the next open to replay).
 */
int o2_fs_close(struct o2_fs *fs);
/* The same; on failure errbuf (if not NULL) gets fscore's message saying why. */
int o2_fs_close_why(struct o2_fs *fs, char *errbuf, size_t errlen);
/*
 * The same, watched: progress (if not NULL) is called as the close's
 * checkpoint writes the log's blocks home (done of total blocks); a close
 * cannot stop half-way, so its answer is ignored.
 */
int o2_fs_close_progress(struct o2_fs *fs, int (*progress)(void *arg, uint64_t done, uint64_t total),
			 void *arg, char *errbuf, size_t errlen);

/* Commit the running transaction and make everything committed durable. */
int o2_fs_sync(struct o2_fs *fs);
/* Commit the running transaction if it is older than the commit interval. */
int o2_fs_tick(struct o2_fs *fs);

/*
 * Cluster coherence (O2_OPEN_SHARED).  o2_fs_writeback commits and writes
 * every logged block home, so that another node reading the device sees
 * all that this handle changed (before a lock leaves EX); it leaves the
 * truncate log as it is (flushing it changes the global bitmap).  How far:
 * O2_WB_ALL also empties the log (a lock leaving this node: another node
 * may change those blocks next, and a replay of this log must not undo
 * that); O2_WB_HOME leaves the log on disk as it is, saving two flushes (a
 * lock going from EX to PR: while this node keeps it, nobody else writes
 * what it covers, so replaying it again is harmless); O2_WB_LOG only
 * empties a log O2_WB_HOME left (a lock going from PR to NL).  o2_fs_drop_cached
 * forgets cached blocks that another node may have changed: blkno's alone,
 * or with blkno 0 every clean block (after a lock is lost).  Blocks with
 * changes not yet home are never dropped: write back first.
 */
enum o2_writeback { O2_WB_ALL, O2_WB_HOME, O2_WB_LOG };
int o2_fs_writeback(struct o2_fs *fs, enum o2_writeback how);
void o2_fs_drop_cached(struct o2_fs *fs, uint64_t blkno);
/*
 * The lock of inode ino went to NL (or a system file's lock is regained):
 * cached blocks it covers - its inode block, its directory blocks, an
 * allocator's groups - and those whose owner the cache cannot tell
 * (extent blocks, xattr blocks, ...) are read again at their next use;
 * the rest stay.
 */
void o2_fs_lost(struct o2_fs *fs, uint64_t ino);
/*
 * The value block of inode ino's cluster lock (O2_INODE_LVB_LEN bytes of
 * the lock's value block): what a node leaving EX tells the next holder of
 * the inode's block as it left it home - its generation, a 64-bit hash of
 * the block but its times and check, and the times.  o2_inode_lvb fills
 * lvb from the cached block when it is known to be what is home (false
 * otherwise: store no value).  o2_inode_refresh, when the lock is regained
 * (lvb NULL: the lock had no valid value): a cached block that matches
 * all but its times takes the times and is trusted again, with no read;
 * any other cached copy is forgotten, to be read at its next use.
 * Returns whether the cached block was kept.
 */
#define O2_INODE_LVB_LEN 52
bool o2_inode_lvb(struct o2_fs *fs, uint64_t ino, uint8_t *lvb);
bool o2_inode_refresh(struct o2_fs *fs, uint64_t ino, const uint8_t *lvb);
/*
 * Between o2_fs_unlocked_reads(fs, true) and (fs, false) the caller reads
 * blocks without the cluster locks that cover them (an inode's generation
 * before its lock can be named, an inode the kernel forgot): those reads
 * go to the device unless this handle has changes to the block not yet
 * home, and what they cache no later read trusts.  Calls nest.
 */
void o2_fs_unlocked_reads(struct o2_fs *fs, bool on);
/*
 * Whether a listing of directory dir taken at stamp s is still what dir
 * holds: no directory's entries changed through this handle since, and
 * no lock covering dir was lost (o2_fs_lost of dir or of every owner,
 * o2_fs_drop_cached).  A caller that keeps a listing (readdir from a
 * snapshot made at opendir) need not look each name up again then.
 */
struct o2_dir_stamp {
	uint64_t changes, epoch;
};
void o2_fs_dir_stamp(struct o2_fs *fs, struct o2_dir_stamp *s);
bool o2_fs_dir_unchanged(struct o2_fs *fs, uint64_t dir, const struct o2_dir_stamp *s);
/*
 * Orphans on a shared volume.  An inode whose last name went while it was
 * open waits in an orphan directory; on a shared volume fscore frees none
 * by itself, because freeing changes the inode, which another node may
 * have changed under its own lock (written to it while it had it open),
 * and the global bitmap.  o2_fs_orphans lists those this node may free
 * now: this slot's, and other slots' whose last reference here went (their
 * node may have unmounted since), none open here (*ret: free(); *n of
 * them).  The caller takes each one's inode lock EX, then the global
 * bitmap's, and calls o2_fs_free_orphan for each, with the generation it
 * locked: it frees ino if it still is that orphan and open_elsewhere says
 * no other node has it open (0 also when it leaves it), through the
 * orphan directory of the slot it is in.  Opening a shared volume frees
 * no orphan either.  0 or -errno (an error turns the volume read-only).
 */
int o2_fs_orphans(struct o2_fs *fs, uint64_t **ret, size_t *n);
int o2_fs_free_orphan(struct o2_fs *fs, uint64_t ino, uint32_t gen);
/*
 * Whether o2_fs_tick has work that changes the global bitmap, or orphans
 * wait (o2_fs_orphans): a clustered writer takes the locks only then.  An
 * error counts as work (the call then reports it).
 */
bool o2_fs_global_work(struct o2_fs *fs);

/*
 * An operation stopped for a cluster lock it did not hold (see
 * o2_open_opts.lock_held), having changed nothing: -O2_ENEEDLOCK, never
 * an errno (no errno is this large).  o2_fs_lock_wanted: the system inode
 * whose lock it wants, and whether EX.
 */
#define O2_ENEEDLOCK 4096
void o2_fs_lock_wanted(const struct o2_fs *fs, uint64_t *blkno, bool *ex);
/*
 * Frees an operation made into an allocator whose lock it did not hold
 * (another slot's, as the kernel's dealloc context defers them) wait
 * here, after its transaction: o2_fs_run_deallocs does them, each
 * allocator's in a transaction of its own, and stops with -O2_ENEEDLOCK
 * at the first allocator whose lock is not held (call it again once it
 * is).  A crash before they run leaves the blocks allocated but unused
 * (fsck.ocfs2 gives them back), as the kernel's crash would.
 */
bool o2_fs_deallocs_pending(const struct o2_fs *fs);
int o2_fs_run_deallocs(struct o2_fs *fs);

/*
 * fsync(2) (datasync false) or fdatasync(2) of inode ino: commit only when
 * a transaction not yet durable holds a change of the inode - for
 * fdatasync, one beyond its times (a write inside the file changes only
 * them: no size change, allocation or unwritten extent marked written) -
 * and otherwise just flush the device for the file data, which went
 * straight to it.  Either costs nothing when flushes since cover it.
 * ino 0: the whole volume, every change so far (o2_fs_sync without
 * emptying the truncate log).
 */
int o2_fs_fsync(struct o2_fs *fs, uint64_t ino, bool datasync);

/*
 * The same in steps, for a caller that keeps fscore under a lock and
 * would flush the device without it, so that other calls go on meanwhile
 * and concurrent fsyncs share commits and flushes:
 *
 *	o2_fsync_begin(fs, ino, datasync, &s);          (lock held)
 *	while ((r = o2_fsync_step(fs, &s)) == O2_FSYNC_FLUSH) {
 *		w = o2_fs_device_writes(fs);
 *		...drop the lock...  f = o2_blockdev_flush(dev);  ...take it...
 *		r = o2_fs_flushed(fs, w, f);
 *		if (r < 0)
 *			break;
 *	}
 *
 * O2_FSYNC_FLUSH asks for a flush that covers s.need device writes (one
 * that starts after them); a flush another thread started once the device
 * had that many writes does as well.  Between steps the volume may see
 * other calls; a commit in flight is finished by whatever needs it.
 */
struct o2_fsync {
	uint64_t ino;
	bool datasync;
	bool commit;	  /* a transaction must become durable: tid */
	uint32_t tid;
	uint64_t writes;  /* device writes done when the fsync began */
	uint64_t need;	  /* O2_FSYNC_FLUSH: writes the flush must cover */
};
#define O2_FSYNC_FLUSH 1
void o2_fsync_begin(struct o2_fs *fs, uint64_t ino, bool datasync, struct o2_fsync *s);
int o2_fsync_step(struct o2_fs *fs, struct o2_fsync *s);
/* Writes the device has completed (a flush starting now covers them). */
uint64_t o2_fs_device_writes(const struct o2_fs *fs);
/* A flush that began after `writes` writes ended with result (0 or -errno;
 * a failure turns the volume read-only).  Returns 0 or -errno. */
int o2_fs_flushed(struct o2_fs *fs, uint64_t writes, int result);

/*
 * What the volume has cost its journal and device since it was opened
 * (counters only grow; all zero for a read-only open).  For measuring how
 * many commits and device flushes an fsync or a workload takes.
 */
struct o2_fs_stats {
	uint64_t journal_commits;     /* transactions committed to the log */
	uint64_t journal_checkpoints; /* times the log was written home and emptied */
	uint64_t journal_log_blocks;  /* blocks written to the log */
	uint64_t journal_times_home;  /* transactions of inode times alone written home unlogged */
	uint64_t device_flushes;      /* flushes of the device (fdatasync of a file) */
	uint64_t fsyncs;	      /* o2_fs_fsync and o2_fsync_begin calls */
	uint64_t fsync_commits;	      /* of those, ones that needed a commit */
	uint64_t lock_refreshes;      /* inode locks regained (o2_inode_refresh) */
	uint64_t lock_refreshes_kept; /* of those, with the cached inode block kept */
};
void o2_fs_stats(const struct o2_fs *fs, struct o2_fs_stats *ret);

/*
 * Quotas (usrquota, grpquota).  Usage counts as fsck.ocfs2 counts it: an
 * inode and its clusters' bytes for its owner and its group, system files
 * aside.  o2_fs_quota_iterate calls fn for each id of type (0 users, 1
 * groups) the global quota file holds, and each this handle changed,
 * with the changes this handle has not folded into it yet; fn's non-zero
 * return stops it and is returned.  -EOPNOTSUPP: the volume has no such
 * quota.
 */
struct o2_dquot {
	uint32_t id;
	uint64_t space, inodes;	      /* bytes, inodes in use */
	uint64_t bsoft, bhard;	      /* space limits in bytes (0: none) */
	uint64_t isoft, ihard;	      /* inode limits (0: none) */
	uint64_t btime, itime;	      /* grace deadlines, seconds since the epoch (0: none) */
};
int o2_fs_quota_iterate(struct o2_fs *fs, unsigned type,
			int (*fn)(void *arg, const struct o2_dquot *dq), void *arg);
/*
 * Fold this handle's quota changes into the global quota files now (sync
 * and close do it too, when the files' cluster locks are held; the tick
 * does on the files' sync interval; due_only: only once that interval has
 * passed).  -O2_ENEEDLOCK, with nothing
 * changed: take the lock o2_fs_lock_wanted names and call again.
 */
int o2_fs_quota_sync(struct o2_fs *fs, bool due_only);
/*
 * Set the limits of id in quota type (0 users, 1 groups): lim's bsoft,
 * bhard (bytes), isoft and ihard (0: none); the rest of lim is ignored.
 * A grace deadline starts if usage is over a soft limit already.
 * o2_fs_quota_grace reads (set false) or sets the type's grace periods in
 * seconds.  Read-write; -O2_ENEEDLOCK as o2_fs_quota_sync.
 */
int o2_fs_quota_set_limits(struct o2_fs *fs, unsigned type, uint32_t id, const struct o2_dquot *lim);
int o2_fs_quota_grace(struct o2_fs *fs, unsigned type, bool set, uint32_t *bgrace,
		      uint32_t *igrace);
/* Non-zero (a -errno) once a failure (I/O, a damaged block, memory in the
 * middle of an operation) has turned the volume read-only. */
int o2_fs_readonly_reason(const struct o2_fs *fs);

struct o2_replay_stats {
	uint32_t transactions;	  /* committed transactions found */
	uint32_t blocks_replayed;
	uint32_t blocks_revoked;  /* skipped because a later revoke covered them */
	uint32_t first_seq, next_seq;
};

/*
 * Replay the journal of a slot if its journal inode is marked dirty: scan,
 * collect revokes, write every committed block home, then mark the journal
 * empty, clear the dirty flag and bump the recovery generation.  Running it
 * again after an interruption reaches the same result.  The volume must be
 * open read-write; the slot must not be in use by anyone (the caller holds
 * its journal lock).  -EUCLEAN for a damaged journal, -EOPNOTSUPP for JBD2
 * features we do not implement.
 */
int o2_journal_recover(struct o2_fs *fs, unsigned slot, struct o2_replay_stats *ret);

/* The message of the last failure on this handle ("" if none). */
const char *o2_fs_error(const struct o2_fs *fs);

struct o2_super_info {
	uint16_t major_rev, minor_rev;
	uint16_t mnt_count, max_mnt_count, state, errors;
	uint32_t check_interval;
	uint64_t last_check;
	uint32_t creator_os;
	uint32_t feature_compat, feature_incompat, feature_ro_compat;
	uint16_t tunefs_flags;
	uint64_t root_blkno, system_dir_blkno, first_cluster_group;
	uint32_t block_bits, cluster_bits;
	uint32_t block_size, cluster_size;
	uint16_t max_slots;
	uint32_t uuid_hash;
	char label[65];
	uint8_t uuid[16];
	char stack[5];		/* "o2cb", "pcmk", ... or "" (classic o2cb) */
	char cluster_name[17];
	uint8_t stack_flags;
	uint16_t xattr_inline_size;
	uint32_t dx_seed[3];
	uint32_t fs_generation;
	uint64_t device_blocks;	/* blocks on the device */
	uint32_t total_clusters; /* from the global bitmap */
	uint32_t used_clusters;	/* from the global bitmap */
};

const struct o2_super_info *o2_fs_super(const struct o2_fs *fs);

/* The cluster stack in words: "local", "o2cb", "pcmk", ... */
const char *o2_fs_stack_name(const struct o2_fs *fs);

/* ---- system files ---- */

enum o2_sysfile {
	O2_SYS_BAD_BLOCKS,
	O2_SYS_GLOBAL_INODE_ALLOC,
	O2_SYS_SLOT_MAP,
	O2_SYS_HEARTBEAT,
	O2_SYS_GLOBAL_BITMAP,
	O2_SYS_USER_QUOTA,
	O2_SYS_GROUP_QUOTA,
	O2_SYS_ORPHAN_DIR, /* first per-slot file */
	O2_SYS_EXTENT_ALLOC,
	O2_SYS_INODE_ALLOC,
	O2_SYS_JOURNAL,
	O2_SYS_LOCAL_ALLOC,
	O2_SYS_TRUNCATE_LOG,
	O2_SYS_LOCAL_USER_QUOTA,
	O2_SYS_LOCAL_GROUP_QUOTA,
	O2_SYS_COUNT
};

/* Whether a system file is one per slot. */
bool o2_sysfile_is_per_slot(enum o2_sysfile type);
/* Its name in the system directory ("journal:0001"); buf of >= 32 bytes. */
void o2_sysfile_name(enum o2_sysfile type, unsigned slot, char *buf, size_t len);
/*
 * Look a system file up by name in the system directory.  -ENOENT if the
 * volume has none (quota files without quotas), -EINVAL for a bad slot.
 */
int o2_sysfile_lookup(struct o2_fs *fs, enum o2_sysfile type, unsigned slot, uint64_t *ret_blkno);

/* ---- inodes ---- */

struct o2_timespec {
	int64_t sec;
	uint32_t nsec;
};

/* What the inode's id2 area holds. */
enum o2_id2_kind {
	O2_ID2_NONE,	   /* device nodes, FIFOs, sockets */
	O2_ID2_EXTENTS,	   /* an extent list */
	O2_ID2_INLINE,	   /* inline data */
	O2_ID2_FAST_SYMLINK,
	O2_ID2_CHAIN,	   /* chain allocator */
	O2_ID2_LOCAL_ALLOC,
	O2_ID2_TRUNCATE_LOG,
	O2_ID2_SUPER,
};

struct o2_inode_info {
	uint64_t blkno;
	uint32_t generation, fs_generation;
	uint16_t suballoc_slot, suballoc_bit;
	uint64_t suballoc_loc;
	uint32_t clusters, uid, gid;
	uint64_t size;
	uint16_t mode;
	uint32_t links;
	uint32_t flags, attr;
	uint16_t dyn_features, orphaned_slot, dio_orphaned_slot, xattr_inline_size;
	struct o2_timespec atime, ctime, mtime;
	uint64_t dtime;
	uint64_t last_eb_blk, xattr_loc, dx_root, refcount_loc;
	uint32_t check_crc32;
	uint16_t check_ecc;
	uint64_t rdev;
	uint32_t bitmap_used, bitmap_total;   /* O2_FL_BITMAP inodes */
	uint32_t journal_flags, journal_recovery_generation; /* journals */
	enum o2_id2_kind kind;
	/* id2 header, by kind: */
	uint16_t list_depth, list_count, list_next_free; /* EXTENTS */
	uint16_t inline_count;			       /* INLINE */
	uint16_t chain_cpg, chain_bpc, chain_count, chain_next_free; /* CHAIN */
	uint32_t la_bm_off;			       /* LOCAL_ALLOC */
	uint16_t la_size;
	uint16_t tl_count, tl_used;		       /* TRUNCATE_LOG */
};

/* i_flags bits */
#define O2_INODE_VALID 0x0001
#define O2_INODE_ORPHANED 0x0004
#define O2_INODE_SYSTEM 0x0010
#define O2_INODE_SUPER 0x0020
#define O2_INODE_LOCAL_ALLOC 0x0040
#define O2_INODE_BITMAP 0x0080
#define O2_INODE_JOURNAL 0x0100
#define O2_INODE_HEARTBEAT 0x0200
#define O2_INODE_CHAIN 0x0400
#define O2_INODE_DEALLOC 0x0800
#define O2_INODE_QUOTA 0x1000
#define O2_INODE_DIO_ORPHANED 0x2000

/* i_dyn_features bits */
#define O2_INODE_DYN_INLINE_DATA 0x0001
#define O2_INODE_DYN_HAS_XATTR 0x0002
#define O2_INODE_DYN_INLINE_XATTR 0x0004
#define O2_INODE_DYN_INDEXED_DIR 0x0008
#define O2_INODE_DYN_HAS_REFCOUNT 0x0010

/*
 * Read and validate the inode at blkno (signature, self-reference, fs
 * generation, the id2 structure its flags call for).  The superblock (block
 * 2) may be read this way too.  -EUCLEAN on damage, -ERANGE for a block
 * number outside the volume.  The returned handle is freed with
 * o2_inode_unref().
 */
int o2_inode_get(struct o2_fs *fs, uint64_t blkno, struct o2_inode **ret_inode);
void o2_inode_unref(struct o2_inode *inode);
const struct o2_inode_info *o2_inode_info(const struct o2_inode *inode);

struct o2_extent {
	uint32_t cpos;	   /* first logical cluster */
	uint32_t clusters; /* clusters covered */
	uint64_t blkno;	   /* first physical block (0 = a hole, in maps) */
	uint8_t flags;	   /* O2_EXTENT_* (leaf records) */
};
#define O2_EXTENT_UNWRITTEN 0x01
#define O2_EXTENT_REFCOUNTED 0x02

/* Record i of the inode's own extent list (kind EXTENTS); -ERANGE past next_free. */
int o2_inode_extent_rec(const struct o2_inode *inode, unsigned i, struct o2_extent *ret);

struct o2_chain_rec_info {
	uint32_t free, total;
	uint64_t blkno;
};
int o2_inode_chain_rec(const struct o2_inode *inode, unsigned i, struct o2_chain_rec_info *ret);

struct o2_trunc_rec {
	uint32_t start, clusters;
};
int o2_inode_truncate_rec(const struct o2_inode *inode, unsigned i, struct o2_trunc_rec *ret);

/* Bits set in a local alloc inode's window bitmap. */
unsigned o2_inode_local_alloc_used(const struct o2_inode *inode);

/*
 * Map logical cluster cpos of the inode's data through its extent tree.
 * ret gets the extent containing cpos (blkno adjusted to cpos), or, in a
 * hole, {cpos, length of the hole up to the next extent or UINT32_MAX, 0}.
 */
int o2_inode_map(struct o2_fs *fs, struct o2_inode *inode, uint32_t cpos, struct o2_extent *ret);

/*
 * Call fn for every leaf extent of the inode's tree in logical order, and
 * for every extent block visited (extent == NULL, eb_blkno set).  Stops at
 * the first non-zero return of fn and returns it.
 */
typedef int (*o2_extent_fn)(const struct o2_extent *extent, uint64_t eb_blkno, void *arg);
int o2_inode_walk_extents(struct o2_fs *fs, struct o2_inode *inode, o2_extent_fn fn, void *arg);

/*
 * Read up to len bytes of file data at off: inline data, holes and
 * unwritten extents read as zeros; nothing past i_size.  Returns the
 * number of bytes read.
 */
ssize_t o2_inode_read(struct o2_fs *fs, struct o2_inode *inode, uint64_t off, void *buf,
		      size_t len);

/* A symlink's target, NUL-terminated, into buf of len bytes; -ENAMETOOLONG if short. */
int o2_inode_readlink(struct o2_fs *fs, struct o2_inode *inode, char *buf, size_t len);

/* ---- directories ---- */

struct o2_dirent {
	uint64_t ino;
	uint8_t type; /* O2_DT_* */
	uint8_t name_len;
	char name[256];
	uint64_t dirent_blk; /* block holding the entry (the inode for inline dirs) */
	/*
	 * o2_dir_iterate: where the entry lies in the directory, in bytes
	 * (logical block x block size + its offset there; inline: its offset
	 * in the inode's data).  An entry never moves while it lives (adding
	 * splits free space, removing folds it into the entry before, an
	 * inline directory's entries keep their offsets in its first block),
	 * so this is a cookie a listing can resume from whatever was added or
	 * removed meanwhile.  0 from the other calls.
	 */
	uint64_t pos;
};

enum { O2_DT_UNKNOWN, O2_DT_REG, O2_DT_DIR, O2_DT_CHR, O2_DT_BLK, O2_DT_FIFO, O2_DT_SOCK, O2_DT_LNK };

typedef int (*o2_dirent_fn)(const struct o2_dirent *de, void *arg);
/*
 * Call fn for every live entry of the directory, "." and ".." included, in
 * on-disk order (pos ascending).  -ENOTDIR if it is not a directory.
 * Every block is validated (entries, trailers).
 */
int o2_dir_iterate(struct o2_fs *fs, struct o2_inode *dir, o2_dirent_fn fn, void *arg);

/*
 * Look name up in dir: through the index for indexed directories, by a
 * scan otherwise.  -ENOENT if absent.
 */
int o2_dir_lookup(struct o2_fs *fs, struct o2_inode *dir, const char *name, size_t len,
		  struct o2_dirent *ret);

/* The TEA hash of a name as indexed directories use it. */
void o2_dx_hash(const struct o2_fs *fs, const char *name, size_t len, uint32_t *ret_major,
		uint32_t *ret_minor);

/*
 * Resolve an absolute path from the root directory; a path beginning with
 * "//" starts at the system directory (as debugfs.ocfs2 spells it).
 * Symlinks are not followed.
 */
int o2_path_lookup(struct o2_fs *fs, const char *path, uint64_t *ret_blkno);

/* ---- slot map ---- */

struct o2_slot_info {
	bool valid;
	uint32_t node;
};

struct o2_slotmap_info {
	bool extended;
	unsigned nslots;
	struct o2_slot_info slots[255];
};

int o2_slotmap_read(struct o2_fs *fs, struct o2_slotmap_info *ret);

/*
 * Write one slot's entry: held by node (valid) or empty.  The entry goes
 * straight to the disk and is flushed before this returns; the slot map is
 * not journaled.  Cluster mounts call it only under the super lock EX.
 * -EINVAL for a slot out of range (or a node beyond the legacy map's 16
 * bits), -EROFS on a read-only device, -EUCLEAN for a damaged slot map.
 */
int o2_slotmap_set(struct o2_fs *fs, unsigned slot, bool valid, uint32_t node);

/* ---- chain allocators ---- */

struct o2_group_info {
	uint64_t blkno;
	uint16_t chain, bits, free_bits, size;
	uint16_t contig_free; /* computed from the bitmap */
	uint32_t generation;
	uint64_t next_group, parent;
	uint32_t check_crc32;
	uint16_t check_ecc;
	bool discontig;
};

/*
 * Visit every group descriptor of the chain allocator inode, chain by chain,
 * validating each (signature, self-reference, parent, chain number, bitmap
 * counts) and the chain totals against the chain records.  A chain that
 * loops or runs longer than the volume allows is -EUCLEAN.
 */
typedef int (*o2_group_fn)(unsigned chain, const struct o2_group_info *g, void *arg);
int o2_chain_walk(struct o2_fs *fs, struct o2_inode *alloc, o2_group_fn fn, void *arg);

/* ---- journal ---- */

struct o2_journal_info {
	uint32_t block_size, maxlen, first, sequence, start, errno_;
	uint32_t feature_compat, feature_incompat, feature_ro_compat;
	uint8_t uuid[16];
	uint32_t nr_users;
	uint32_t ij_flags, recovery_generation; /* from the journal inode */
	uint64_t inode_blkno;
};

int o2_journal_info(struct o2_fs *fs, unsigned slot, struct o2_journal_info *ret);

/*
 * Whether slot's journal is marked in use (*ret_dirty: a node has it
 * mounted, or crashed with it) and holds committed transactions not yet
 * written home (*ret_pending: a replay is due).  0 or -errno.
 */
int o2_journal_state(struct o2_fs *fs, unsigned slot, bool *ret_dirty, bool *ret_pending);

/* ---- verification walk ---- */

struct o2_walk_stats {
	uint64_t inodes, dirs, dirents, extent_blocks, data_blocks, groups, dx_blocks;
	uint64_t xattrs;	   /* extended attributes */
	uint64_t xattr_blocks;	   /* xattr blocks, bucket and value clusters' blocks, their
				    * extent blocks */
	uint64_t refcount_trees;   /* refcount trees (each counted once, however shared) */
	uint64_t refcount_records; /* their records */
};

/*
 * One extended attribute as the volume keeps it (pointers valid only during
 * the callback).  type is the name's prefix: 1 user., 2 system.posix_acl_access,
 * 3 system.posix_acl_default, 4 trusted., 5 security.
 */
struct o2_xattr {
	uint8_t type, name_len;
	const char *name;	  /* name_len bytes, not NUL-terminated, no prefix */
	uint64_t value_size;
	bool local;		  /* value in the store (value points at it) */
	const uint8_t *value;
	const void *root;	  /* !local: its value root in the store */
	uint32_t value_clusters;  /* !local: clusters of the value's tree */
	uint64_t store_blkno;	  /* the inode, xattr block or bucket holding the entry */
};
typedef int (*o2_xattr_fn)(const struct o2_xattr *x, void *arg);

/*
 * Call fn for every extended attribute of the inode - in its own tail, its
 * xattr block, or that block's buckets - checking each store, entry and
 * value tree on the way (-EUCLEAN on damage).  Stops at the first non-zero
 * return of fn and returns it.
 */
int o2_xattr_iterate(struct o2_fs *fs, struct o2_inode *inode, o2_xattr_fn fn, void *arg);
/* The same for the inode at blkno (looked up for the walk). */
int o2_xattr_iterate_blkno(struct o2_fs *fs, uint64_t blkno, o2_xattr_fn fn, void *arg);
/* Copy x's value (x->value_size bytes) into buf, from its clusters if not local. */
int o2_xattr_read_value(struct o2_fs *fs, const struct o2_xattr *x, void *buf);

#define O2_XATTR_USER 1
#define O2_XATTR_ACL_ACCESS 2
#define O2_XATTR_ACL_DEFAULT 3
#define O2_XATTR_TRUSTED 4
#define O2_XATTR_SECURITY 5
#define O2_XATTR_NAME_MAX 255 /* bytes of a name after its prefix */
#define O2_XATTR_VALUE_MAX 65536
/*
 * Split a full name ("user.foo", "system.posix_acl_access") into its type
 * and the name the volume keeps (after the prefix; empty for the ACLs):
 * -EOPNOTSUPP for a prefix OCFS2 has no type for, -EINVAL for an empty
 * name after a prefix that needs one.
 */
int o2_xattr_parse_name(const char *full, unsigned *ret_type, const char **ret_name);
/* The prefix of a type ("user.", ...; the ACLs' whole names), NULL if none. */
const char *o2_xattr_prefix(unsigned type);
/*
 * The value of one attribute: its size if size is 0, else copied into buf
 * (-ERANGE if larger than size).  -ENODATA if the inode has no such
 * attribute.
 */
ssize_t o2_xattr_get(struct o2_fs *fs, uint64_t ino, unsigned type, const char *name, size_t len,
		     void *buf, size_t size);

/*
 * Read and validate every block of every system file and, recursively,
 * every directory from the root (and each inode its entries name):
 * allocators' groups, journals' superblocks, slot map, local allocs,
 * truncate logs, orphan dirs, every inode's extended attributes and
 * refcount tree.  Stops at the first fault (-EUCLEAN with the
 * message on the handle).
 */
int o2_fs_walk(struct o2_fs *fs, struct o2_walk_stats *ret);

/*
 * The same walk, watched: progress (if not NULL) is called after each
 * inode the walk visits, with the inodes visited so far and the inodes
 * in use (the inode allocators' used bits, read before the walk; a file
 * with several names is visited once per name, so done may pass total).
 * A non-zero return stops the walk, which then returns -ECANCELED.
 */
struct o2_walk_opts {
	int (*progress)(void *arg, uint64_t done, uint64_t total);
	void *arg;
};
int o2_fs_walk_opts(struct o2_fs *fs, const struct o2_walk_opts *opts, struct o2_walk_stats *ret);


/* ---- the write path (volume opened read-write) ----
 *
 * Each call is one or more complete transactions: when it returns, the
 * change is in the running transaction and will be committed (o2_fs_sync
 * makes it durable).  Inodes are named by their number (= block number).
 * Errors: -EROFS (read-only volume or after an I/O error), -ENOSPC,
 * -EEXIST, -ENOENT, -ENOTDIR, -EISDIR, -ENOTEMPTY, -ENAMETOOLONG, -EMLINK,
 * -EINVAL, -EUCLEAN (damage found), -ENOMEM.
 */

struct o2_new_inode {
	uint16_t mode;	/* type and permission bits */
	uint32_t uid, gid;
	uint64_t rdev;	/* character and block devices */
	uint16_t umask; /* O2_OPEN_ACL: applied unless the directory has a default ACL */
};

/* Create a regular file, device node, FIFO or socket named name in dir. */
int o2_create(struct o2_fs *fs, uint64_t dir, const char *name, size_t len,
	      const struct o2_new_inode *ni, uint64_t *ret_ino);
int o2_mkdir(struct o2_fs *fs, uint64_t dir, const char *name, size_t len,
	     const struct o2_new_inode *ni, uint64_t *ret_ino);
/* A symlink to target (fast when it fits in the inode). ni->mode is ignored. */
int o2_symlink(struct o2_fs *fs, uint64_t dir, const char *name, size_t len, const char *target,
	       const struct o2_new_inode *ni, uint64_t *ret_ino);
/*
 * A reflink: a new regular file name in dir sharing src's data (copy on
 * write: a later write to either gets its own copy of what it changes).
 * Mode (permission bits), uid and gid from ni; size from src; extended
 * attributes are not copied.  Crash-safe: the new inode waits in the
 * orphan directory until every extent is shared.  -EOPNOTSUPP without the
 * refcount feature, or when src's refcount tree is one fscore does not
 * change (grown into leaf blocks).
 */
int o2_reflink(struct o2_fs *fs, uint64_t src, uint64_t dir, const char *name, size_t len,
	       const struct o2_new_inode *ni, uint64_t *ret_ino);
/* A new name for ino (not a directory: -EPERM). */
int o2_link(struct o2_fs *fs, uint64_t ino, uint64_t dir, const char *name, size_t len);
/* Remove a name that is not a directory (-EISDIR).  The inode is freed with
 * its last link unless it is open (o2_inode_open_ref): then it goes to the
 * orphan directory until the last close. */
int o2_unlink(struct o2_fs *fs, uint64_t dir, const char *name, size_t len);
int o2_rmdir(struct o2_fs *fs, uint64_t dir, const char *name, size_t len);

#define O2_RENAME_NOREPLACE 0x1
#define O2_RENAME_EXCHANGE 0x2
int o2_rename(struct o2_fs *fs, uint64_t olddir, const char *oldname, size_t oldlen,
	      uint64_t newdir, const char *newname, size_t newlen, unsigned flags);

/* Write len bytes at off, growing the file as needed; returns bytes written. */
ssize_t o2_write(struct o2_fs *fs, uint64_t ino, uint64_t off, const void *buf, size_t len);
/* Set the size: shrinking frees clusters, growing leaves a hole. */
int o2_truncate(struct o2_fs *fs, uint64_t ino, uint64_t size);

#define O2_FALLOC_KEEP_SIZE 0x1
/* With KEEP_SIZE: free [off, off+len) instead (reads as zeros after), zeroing
 * partial clusters at its ends; -EOPNOTSUPP on volumes without sparse files. */
#define O2_FALLOC_PUNCH_HOLE 0x2
/* Preallocate [off, off+len) as unwritten extents (read as zeros). */
int o2_fallocate(struct o2_fs *fs, uint64_t ino, unsigned mode, uint64_t off, uint64_t len);

#define O2_SET_MODE 0x01
#define O2_SET_UID 0x02
#define O2_SET_GID 0x04
#define O2_SET_SIZE 0x08
#define O2_SET_ATIME 0x10
#define O2_SET_MTIME 0x20
#define O2_SET_CTIME 0x40
struct o2_setattr {
	uint16_t mode; /* permission bits only */
	uint32_t uid, gid;
	uint64_t size;
	struct o2_timespec atime, mtime, ctime;
};
int o2_setattr(struct o2_fs *fs, uint64_t ino, const struct o2_setattr *attr, unsigned mask);

/*
 * Set one extended attribute (as setxattr(2): O2_XATTR_CREATE fails with
 * -EEXIST if it exists, O2_XATTR_REPLACE with -ENODATA if it does not) or
 * remove it (-ENODATA if absent).  It goes where the kernel would put it:
 * the inode's own tail if it fits, else the inode's xattr block; a value
 * over 80 bytes in clusters of its own.  -ENOSPC when neither has room (the
 * kernel would then index the block: not implemented), -EOPNOTSUPP for an
 * inode whose xattrs are already indexed or on a volume without xattrs,
 * -E2BIG for a value over O2_XATTR_VALUE_MAX, -ERANGE for a name over
 * O2_XATTR_NAME_MAX, -EINVAL for an unknown type, an empty name (but for
 * the ACL types, whose name is always empty) or a NULL value of non-zero
 * size.  Sets the inode's ctime.
 */
#define O2_XATTR_CREATE 0x1
#define O2_XATTR_REPLACE 0x2
int o2_xattr_set(struct o2_fs *fs, uint64_t ino, unsigned type, const char *name, size_t len,
		 const void *value, size_t size, unsigned flags);
int o2_xattr_remove(struct o2_fs *fs, uint64_t ino, unsigned type, const char *name, size_t len);

/*
 * POSIX ACLs in the format of the system.posix_acl_access/default
 * attributes (a version-2 header, then entries).  o2_acl_get: as
 * o2_xattr_get (-ENODATA: none).  o2_acl_set (value NULL or a bare header:
 * remove) needs O2_OPEN_ACL (else -EOPNOTSUPP); it checks the ACL
 * (-EINVAL), sets the mode's permission bits from an access ACL and keeps
 * no ACL the mode says all of, in one transaction; a default ACL on a
 * non-directory is -EACCES.
 */
ssize_t o2_acl_get(struct o2_fs *fs, uint64_t ino, unsigned type, void *buf, size_t size);
int o2_acl_set(struct o2_fs *fs, uint64_t ino, unsigned type, const void *value, size_t size);

/*
 * Open-file references: an inode unlinked while referenced lives on in the
 * orphan directory; the last o2_inode_close_ref frees it (with
 * O2_OPEN_SHARED it leaves that to o2_fs_free_orphan, which the caller
 * runs under the inode's and the global bitmap's locks).  Orphans left by a crash are freed
 * at the next read-write open.
 */
int o2_inode_open_ref(struct o2_fs *fs, uint64_t ino);
int o2_inode_close_ref(struct o2_fs *fs, uint64_t ino);

struct o2_statfs {
	uint64_t block_size, cluster_size;
	uint64_t total_clusters, free_clusters;
	uint64_t total_inodes, free_inodes; /* inode bits in this slot's allocator, plus room to grow */
	uint32_t max_name_len;
};
int o2_statfs(struct o2_fs *fs, struct o2_statfs *ret);

/* ==================================================================== */
/* ---- mkfs: making a new volume (fscore/mkfs.c) ---- */

/* A set of superblock feature bits. */
struct o2_features {
	uint32_t compat, incompat, ro_compat;
};

/* -T: what the volume will hold; it changes the defaults as in mkfs.ocfs2. */
enum o2_mkfs_type {
	O2_MKFS_TYPE_DEFAULT,
	O2_MKFS_TYPE_DATAFILES,
	O2_MKFS_TYPE_MAIL,
	O2_MKFS_TYPE_VMSTORE,
};

/* --fs-feature-level */
enum o2_mkfs_level {
	O2_MKFS_LEVEL_DEFAULT,
	O2_MKFS_LEVEL_MAX_COMPAT,
	O2_MKFS_LEVEL_MAX_FEATURES,
};

/* -M */
enum o2_mkfs_mount {
	O2_MKFS_MOUNT_DEFAULT, /* cluster, unless --fs-features=local */
	O2_MKFS_MOUNT_CLUSTER,
	O2_MKFS_MOUNT_LOCAL,
};

/* -J block32 / block64 */
enum o2_mkfs_journal64 {
	O2_MKFS_J64_AUTO, /* 64-bit block numbers only when the volume needs them */
	O2_MKFS_J64_OFF,  /* block32: refuse volumes over 2^32 blocks */
	O2_MKFS_J64_ON,   /* block64 */
};

/* -T NAME and --fs-feature-level=NAME; -EINVAL for an unknown name. */
int o2_mkfs_parse_type(const char *name, enum o2_mkfs_type *ret);
int o2_mkfs_parse_level(const char *name, enum o2_mkfs_level *ret);

/*
 * Parse an --fs-features list ("sparse,noinline-data,..."), adding to *on
 * and *off (the caller zeroes them once; several lists may accumulate).
 * As in mkfs.ocfs2, naming a feature also turns on what it needs
 * (unwritten needs sparse), and "no" + a feature also turns off what needs
 * it.  -EINVAL (with the reason in errbuf) for an unknown name or a
 * feature both asked for and refused.
 */
int o2_mkfs_parse_features(const char *list, struct o2_features *on, struct o2_features *off,
			   char *errbuf, size_t errlen);

struct o2_mkfs_opts {
	unsigned block_size;	  /* -b: 512..4096; 0: by volume size, as mkfs.ocfs2 */
	unsigned cluster_size;	  /* -C: 4K..1M; 0: by volume size and type */
	unsigned slots;		  /* -N: 1..255; 0: by volume size (1 for local) */
	const char *label;	  /* -L: at most 63 bytes; NULL: none */
	uint64_t journal_size;	  /* -J size=: bytes per slot; 0: by volume size and type */
	enum o2_mkfs_journal64 journal64;
	enum o2_mkfs_type type;	  /* -T */
	enum o2_mkfs_level level; /* --fs-feature-level */
	struct o2_features features_on, features_off; /* --fs-features */
	enum o2_mkfs_mount mount; /* -M */
	const char *cluster_stack; /* --cluster-stack: "o2cb", "pcmk", "cman"; NULL: none */
	const char *cluster_name;  /* --cluster-name, with a stack */
	uint64_t volume_size;	  /* bytes to use from the device start; 0: all of it */

	/*
	 * Randomness and time.  Explicit values win; otherwise the UUID
	 * (version 4), the volume generation and the indexed-dir hash seeds
	 * come from random() (NULL: getrandom(2)), and the format time from
	 * now_ns() (NULL: CLOCK_REALTIME).
	 */
	bool have_uuid;
	uint8_t uuid[16];
	bool have_generation;
	uint32_t generation;
	bool have_dx_seed;
	uint32_t dx_seed[3];
	int (*random)(void *arg, void *buf, size_t len); /* 0 or -errno */
	void *random_arg;
	uint64_t (*now_ns)(void *arg);
	void *clock_arg;
	/*
	 * o2_mkfs: called once the layout is planned and checked, before the
	 * first byte is written; a non-zero answer stops the format there
	 * (-ECANCELED, the device untouched).  NULL: none.
	 */
	int (*begin_writing)(void *arg);
	void *begin_arg;
};

/* What o2_mkfs made (or, from o2_mkfs_plan, would make). */
struct o2_mkfs_info {
	unsigned block_size, cluster_size, slots;
	uint64_t volume_bytes, blocks;
	uint32_t clusters;
	uint32_t cluster_groups, clusters_per_group, tail_group_clusters;
	uint64_t journal_bytes; /* per slot */
	bool journal64;
	uint32_t extent_alloc_clusters; /* per slot */
	uint32_t extent_alloc_groups;	/* per slot */
	struct o2_features features;
	enum o2_mkfs_type type;
	char label[64];
	char stack[5];		/* "" for classic o2cb without cluster information */
	char cluster_name[17];
	bool local;
	uint8_t uuid[16];
	uint32_t generation, uuid_hash, dx_seed[3];
	int64_t format_time;
	uint64_t root_blkno, system_dir_blkno, first_cluster_group;
	unsigned backup_supers;
	uint64_t backup_super_blkno[6];
	uint32_t used_clusters; /* in the global bitmap once made */
};

/*
 * Work out the layout for a device of dev_bytes without writing anything:
 * validate the options (-EINVAL, reason in errbuf: block size 3000,
 * cluster size 2K, 300 slots, a label of 64 bytes or more, a journal under
 * 4 MiB or under nine clusters, ...) and check that everything fits
 * (-ENOSPC: the device is too small).  ret gets the geometry and features.
 */
int o2_mkfs_plan(uint64_t dev_bytes, const struct o2_mkfs_opts *opts, struct o2_mkfs_info *ret,
		 char *errbuf, size_t errlen);

/* Called as the format progresses: done of total units of work. */
typedef void (*o2_mkfs_progress_fn)(void *arg, unsigned done, unsigned total);

/*
 * Format dev as a new OCFS2 volume, the same structures mkfs.ocfs2 1.8.7
 * makes: the OCFS1 decoy header, the superblock and its backups, the
 * global bitmap and its groups, the system directory and every system
 * file (journals with empty JBD2 logs, slot map, heartbeat area, local
 * allocs, truncate logs, orphan directories, allocators, quota files when
 * usrquota/grpquota are on), the root directory and lost+found.  It writes
 * through dev directly (no journal), zeroing the journals and the
 * heartbeat area, and flushes; the superblock is written last, so an
 * interrupted format is not a volume.  It does not check what dev held
 * before: that is the caller's choice.  Errors as o2_mkfs_plan, plus -EIO
 * and friends from the device and -ENOMEM.  ret_info (may be NULL) gets
 * what was made.
 */
int o2_mkfs(struct o2_blockdev *dev, const struct o2_mkfs_opts *opts, o2_mkfs_progress_fn progress,
	    void *progress_arg, struct o2_mkfs_info *ret_info, char *errbuf, size_t errlen);

/* ---- end of mkfs ---- */
/* ==================================================================== */

#endif
