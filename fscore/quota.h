/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Quota accounting (fscore private; quota.c).
 *
 * Usage is what fsck.ocfs2 counts: each inode in use but the system files
 * (the root directory counts) charges its owner and its group one inode
 * and i_clusters clusters of space.  This node's changes go to its slot's
 * local quota files, in the transaction that made them, and are folded
 * into the global files under the global file's lock on the sync
 * interval, at sync and at close; a slot whose local files were left in
 * use is folded at the next open of that slot.
 */
#ifndef O2_QUOTA_H
#define O2_QUOTA_H

#include "internal.h"

/* Start accounting (read-write open, after the journal and the slot's
 * system files; before orphans are freed).  0 when the volume has no quotas. */
int o2_quota_open(struct o2_fs *fs);
/* Fold what is left if the global files' locks are held, and mark the
 * local files clean if nothing is left in them; stop accounting. */
int o2_quota_close(struct o2_fs *fs);
/* Forget everything without writing (abandon, or after close). */
void o2_quota_free(struct o2_fs *fs);
/*
 * Fold this node's changes into the global files (no handle open).
 * -O2_ENEEDLOCK, with nothing changed, when a global file's lock is not
 * held; if_locked: return 0 then instead.
 */
int o2_quota_sync(struct o2_fs *fs, bool if_locked);
/*
 * Before an operation charges uid and gid inodes more inodes and space
 * more bytes: 0 if their limits allow it, -EDQUOT if not (a hard limit,
 * or a soft one past its grace time, which the first step past the soft
 * limit starts); O2_QUOTA_NOID for either id leaves that quota out.  With ret_space, space may be cut short: *ret_space gets
 * the bytes allowed (a write shortens itself).  Limits are those of the
 * global file as this node last read it (at the first use of an id since
 * each fold); a first read on a shared volume may answer -O2_ENEEDLOCK
 * for the global file's lock, with nothing changed.
 */
#define O2_QUOTA_NOID 0xffffffffu /* uid or gid: not charged */
int o2_quota_check(struct o2_fs *fs, uint32_t uid, uint32_t gid, uint64_t space, uint64_t inodes,
		   uint64_t *ret_space);
/* o2_fs_quota_set_limits and o2_fs_quota_grace (super.c wraps them). */
int o2_quota_set_limits(struct o2_fs *fs, unsigned type, uint32_t id, const struct o2_dquot *lim);
int o2_quota_grace(struct o2_fs *fs, unsigned type, bool set, uint32_t *bgrace, uint32_t *igrace);
/* The sync interval passed with changes waiting (stays true until a sync). */
bool o2_quota_due(struct o2_fs *fs);

#endif
