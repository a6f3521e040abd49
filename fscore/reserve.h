/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Reserving what an operation may allocate, before it changes anything (fscore private).  See reserve.c. */
#ifndef O2_RESERVE_H
#define O2_RESERVE_H

#include "internal.h"

/*
 * The most one operation (or one transaction of a long one) may claim, as
 * its code can tell before it changes anything: the kernel's
 * ocfs2_reserve_clusters, ocfs2_reserve_new_metadata_blocks and
 * ocfs2_reserve_new_inode in one.
 */
struct o2_resv {
	/* clusters it claims for itself: directory blocks, a new directory's
	 * block, a symlink's target, xattr values, index leaves */
	uint32_t clusters;
	/* the longest of those that must be one run (0 or 1: any cluster) */
	uint32_t run;
	/* extent allocator blocks: extent blocks for tree growth and splits,
	 * an xattr block, a directory index root, refcount blocks */
	uint32_t meta;
	/* inode allocator blocks */
	uint32_t inodes;
	/* a deletion (unlink, rmdir, truncate, punch, xattr removal): it may
	 * use the extent blocks every other operation leaves set aside */
	bool freeing;
};

/*
 * Extent blocks every operation but a deletion leaves free in the extent
 * allocator, so that a deletion on a full volume - a punch that cuts a
 * record in two, an orphan entry, a refcount record split - always has
 * the blocks it needs: a split per level of the deepest tree, and a new
 * root level.
 */
#define O2_RESV_FREEING_META 7

/* Blocks one new record in an extent tree may take at most: a split per level, a new root. */
#define O2_RESV_TREE_META(depth) ((uint32_t)(depth) + 2)

/*
 * Reserve want: the suballocators are grown (each new group in a handle
 * of its own, committed with or without the operation) until they hold
 * want->meta (plus O2_RESV_FREEING_META unless freeing) and want->inodes
 * free blocks; then the free clusters must cover want->clusters, with a
 * run of want->run.  -ENOSPC with nothing changed when they cannot be had.
 * *ret_spare (if given): the free clusters beyond want->clusters, which
 * file data may take (a write shortens itself to them).
 *
 * Short of space with freed clusters waiting in the truncate log, it
 * flushes the log (a commit) and looks again - only when no handle is
 * open.
 *
 * Call it before the operation's transaction begins, or inside its handle
 * before that handle changed anything; fscore runs one operation at a
 * time, so what was counted stays there until it is used.
 */
int o2_reserve(struct o2_fs *fs, const struct o2_resv *want, uint32_t *ret_spare);

/*
 * Add to want what one more entry in this slot's orphan directory takes
 * (see o2_dir_add_need): a deletion that may leave an orphan reserves it
 * with freeing set, for the entry of the inode ino that may go there; every
 * other operation leaves it free (ino 0: a name of no inode in
 * particular).  The name matters once the orphan directory is indexed:
 * the entry's hash picks the index leaf, and a full one is rebuilt larger.
 */
int o2_resv_orphan(struct o2_fs *fs, uint64_t ino, struct o2_resv *want);

#endif
