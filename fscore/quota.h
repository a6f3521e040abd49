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
/* The sync interval passed with changes waiting (stays true until a sync). */
bool o2_quota_due(struct o2_fs *fs);

#endif
