/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The extent B-tree, write side (fscore private).  See extent_write.c. */
#ifndef O2_EXTENT_WRITE_H
#define O2_EXTENT_WRITE_H

#include "internal.h"

struct o2_trans;

/* The owner of a tree: the block holding the root list, logged by the tree code. */
struct o2_tree_owner {
	struct o2_buf *root;
	struct o2_extent_list *el; /* inside root->data */
	o2le64 *last_eb;	   /* the owner's pointer to the rightmost leaf */
	bool no_merge;		   /* records name blocks, not runs: never merge them */
};

/* Blocks an insert may log at the worst: a split per level plus allocations. */
#define O2_TREE_CREDITS 56

/*
 * Extent blocks that adding nrecs records to the leaf covering cpos may
 * take: none while the leaf has room for them, else a split per level and
 * a new root for each.  Reads only (for o2_reserve).
 */
int o2_tree_meta_need(struct o2_fs *fs, const struct o2_tree_owner *o, uint32_t cpos,
		      unsigned nrecs, uint32_t *ret);

/* Insert a leaf record (merging with a neighbour where it can). */
int o2_tree_insert(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o,
		   const struct o2_extent *ext);

/* Inside t: extent block b goes back to its allocator (no revoke: only ever reused as one). */
int o2_tree_free_eb(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *b);

typedef int (*o2_tree_free_fn)(struct o2_trans *t, struct o2_fs *fs, uint64_t blkno,
			       uint32_t clusters, uint8_t flags, void *arg);
/* Remove from cluster new_end on; 1 if more than max_recs records remained. */
int o2_tree_truncate(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o,
		     uint32_t new_end, unsigned max_recs, o2_tree_free_fn free_fn, void *arg);
/* Remove clusters [c0, c1) wherever mapped; 1 if more than max_recs records were in it. */
int o2_tree_punch(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o, uint32_t c0,
		  uint32_t c1, unsigned max_recs, o2_tree_free_fn free_fn, void *arg);
/* Clear flag on [cpos, cpos+len), inside one record that has it (split as needed). */
int o2_tree_clear_flag(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o,
		       uint32_t cpos, uint32_t len, uint8_t flag);
/* Set flag on [cpos, cpos+len), inside one record (split as needed). */
int o2_tree_set_flag(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o,
		     uint32_t cpos, uint32_t len, uint8_t flag);
/* Turn [cpos, cpos+len) of an unwritten extent into a written one. */
int o2_tree_mark_written(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o,
			 uint32_t cpos, uint32_t len);

#endif
