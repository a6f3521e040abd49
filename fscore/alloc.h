/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Allocators, write side (fscore private).  See alloc.c. */
#ifndef O2_ALLOC_H
#define O2_ALLOC_H

#include "internal.h"

struct o2_trans;

/* Blocks an allocation may log: allocator inode, groups, and a new group. */
#define O2_ALLOC_CREDITS 8

/*
 * Claim a run of free clusters from the global bitmap: want if a run that
 * long exists, else at least min (runs never cross a group).  -ENOSPC, at
 * once and with nothing changed when want is 0 or below min.
 */
int o2_clusters_alloc(struct o2_trans *t, struct o2_fs *fs, uint32_t min, uint32_t want,
		      uint32_t *ret_start, uint32_t *ret_len);
/* Free clusters through the truncate log (reusable after a later flush). */
int o2_clusters_free(struct o2_trans *t, struct o2_fs *fs, uint32_t start, uint32_t len);
/* Free clusters in the global bitmap at once. */
int o2_clusters_free_now(struct o2_trans *t, struct o2_fs *fs, uint32_t start, uint32_t len);
/*
 * Give this slot's empty inode and extent allocator groups back (through
 * the log), commit, then return every cluster in the truncate log to the
 * global bitmap.  No reservation may be outstanding: a group grown for one
 * is empty until used (o2_reserve calls it only before reserving again).
 */
int o2_trunclog_flush(struct o2_fs *fs);
/* The truncate log holds freed clusters not yet back, or an allocator group emptied. */
bool o2_trunclog_pending(struct o2_fs *fs);
/* Begin a transaction that may free clusters: the truncate log gets room first. */
int o2_trans_begin_freeing(struct o2_fs *fs, unsigned credits, struct o2_trans **ret);

struct o2_suballoc_res {
	uint64_t blkno; /* the block allocated */
	uint64_t group; /* its group descriptor */
	uint16_t bit, slot;
};

/*
 * One block from a suballocator (inode_alloc or extent_alloc), growing it
 * if full: by a group of cl_cpg clusters in one run, or on discontig-bg
 * volumes pieced together from shorter runs.  ret->group is the group
 * descriptor (for *_suballoc_loc), ret->bit the bit in it; in a
 * discontiguous group blkno is not group + bit.
 */
int o2_suballoc_alloc(struct o2_trans *t, struct o2_fs *fs, uint64_t alloc_blkno,
		      struct o2_suballoc_res *ret);
/*
 * o2_suballoc_alloc, then the block as a new buffer of kind, joined to t:
 * *ret is referenced and its contents are the caller's to format.
 */
int o2_suballoc_new_block(struct o2_trans *t, struct o2_fs *fs, uint64_t alloc_blkno,
			  uint8_t kind, struct o2_suballoc_res *res, struct o2_buf **ret);
int o2_suballoc_free(struct o2_trans *t, struct o2_fs *fs, uint64_t alloc_blkno, uint64_t group,
		     uint16_t bit);
/*
 * Block blkno back to the allocator it names (its suballoc slot, group -
 * 0 without discontig-bg - and bit): type O2_SYS_INODE_ALLOC or
 * O2_SYS_EXTENT_ALLOC, that slot's.
 */
int o2_suballoc_give_back(struct o2_trans *t, struct o2_fs *fs, enum o2_sysfile type,
			  uint16_t slot, uint64_t group, uint16_t bit, uint64_t blkno);

/* Return this slot's local alloc window to the global bitmap. */
int o2_local_alloc_return(struct o2_fs *fs);
/*
 * Move the local alloc window, in a handle of its own, if it holds no run
 * of min clusters - what the operation's first allocation would otherwise
 * do inside its own transaction (the kernel's ocfs2_reserve_local_alloc_bits
 * slides the window at reservation time too).  No run of min in the global
 * bitmap: nothing changes (the allocation then takes what is left there).
 * Called by o2_reserve with no handle open.
 */
int o2_local_alloc_refill(struct o2_fs *fs, uint32_t min);

/*
 * Make sure the suballocator at alloc_blkno has bits free blocks, growing
 * it by a group (each in a handle of its own) while it has fewer.  -ENOSPC
 * with nothing changed when no group can be made.  *ret_grew (if given)
 * is set when a group was added.  Called by o2_reserve (reserve.c).
 */
int o2_suballoc_reserve(struct o2_fs *fs, uint64_t alloc_blkno, uint32_t bits, bool *ret_grew);
/* Free clusters as statfs counts them: the global bitmap's and the local alloc window's. */
int o2_clusters_avail(struct o2_fs *fs, uint32_t *ret_free);
/* *ret: o2_clusters_alloc(len, len) would find len clusters in one run. */
int o2_clusters_have_run(struct o2_fs *fs, uint32_t len, bool *ret);

/*
 * Cluster locks of system files (o2_open_opts.lock_held).  o2_lock_have:
 * whether the caller holds system inode blkno's lock (in EX if ex);
 * always on one node.  o2_lock_need: 0 if it does, else -O2_ENEEDLOCK
 * with the lock remembered for o2_fs_lock_wanted - asked before the
 * operation changes anything, so that the caller can take the lock and
 * run it again.
 */
bool o2_lock_have(struct o2_fs *fs, uint64_t blkno, bool ex);
int o2_lock_need(struct o2_fs *fs, uint64_t blkno, bool ex);
/*
 * Clusters the local-alloc window can give without the global bitmap:
 * 0 if it holds want of them (and a run of run, if run > 1), else what
 * o2_lock_need(global bitmap) says - the window must move, or the
 * allocation go past it.
 */
int o2_lock_clusters(struct o2_fs *fs, uint32_t want, uint32_t run);

/* Look up this slot's system files (read-write open). */
int o2_sysfiles_load(struct o2_fs *fs);

#endif
