/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The write path's shared declarations (fscore private), sectioned by the
 * .c file that defines them.
 */
#ifndef O2_WRITE_H
#define O2_WRITE_H

#include "alloc.h"
#include "extent_write.h"
#include "internal.h"

/* ---- file.c: freeing a file's clusters ---- */

/* Credits of one o2_free_step (a refcount leaf changed with it). */
#define O2_FREE_STEP_CREDITS (O2_TREE_CREDITS * 2 + 64 + O2_REFCOUNT_CREDITS)
/*
 * Inside t, free up to a bounded number of the inode's extents from cluster
 * new_end on (logging ib); *ret_more: some are left for another step.  size
 * (UINT64_MAX: leave it): the file's new, smaller size, lowered with them.
 */
int o2_free_step(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, uint32_t new_end,
		 uint64_t size, bool *ret_more);
/* The same until done, one transaction per step. */
int o2_free_from(struct o2_fs *fs, uint64_t ino, uint32_t new_end, uint64_t size);
int o2_sum_clusters(const struct o2_extent *ext, uint64_t eb_blkno, void *arg);

/* ---- refcount.c: refcount trees ---- */

/*
 * Whether the tree's root is sound enough to
 * change (-EUCLEAN with a message if it is damaged).
 */
int o2_refcount_check(struct o2_fs *fs, uint64_t root);
/*
 * The count of physical cluster cpos (0: not shared), how many clusters
 * from cpos on have that same count in the same record - or gap between
 * records - of the same leaf (*ret_run), and how many before it
 * (*ret_before, may be NULL).  A change within such a run touches one leaf.
 */
int o2_refcount_lookup(struct o2_fs *fs, uint64_t root, uint32_t cpos, uint32_t *ret_count,
		       uint32_t *ret_run, uint32_t *ret_before);
/*
 * Inside t: a file lets go of physical clusters [cpos, cpos+len), all
 * counted in the tree.  Their counts drop by one; those nobody uses now
 * leave the tree and, with free_unused, go to the truncate log (without it
 * their last user keeps them as its own).  Logs the leaves the range
 * spans, and per leaf at most a new leaf, the root and its list of leaves
 * (O2_REFCOUNT_CREDITS).
 */
int o2_refcount_release(struct o2_trans *t, struct o2_fs *fs, uint64_t root, uint32_t cpos,
			uint32_t len, bool free_unused);
#define O2_REFCOUNT_CREDITS (O2_TREE_CREDITS + O2_ALLOC_CREDITS + 4)
/*
 * Inside t: physical clusters [cpos, cpos+len) gain a user.  fresh: they
 * were not shared (no record may cover them; they get one counting 2);
 * else records must cover them all, each count raised by one.
 */
int o2_refcount_share(struct o2_trans *t, struct o2_fs *fs, uint64_t root, uint32_t cpos,
		      uint32_t len, bool fresh);
/*
 * Inside t: the inode in ib joins tree root (its rf_count raised), or with
 * root 0 gets a new, empty tree of its own from the extent allocator.
 */
int o2_refcount_attach(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, uint64_t root);
/* Inside t: the inode in ib leaves its tree (freed with its last user). */
int o2_refcount_detach(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib);
#define O2_REFCOUNT_DETACH_CREDITS (O2_ALLOC_CREDITS + 2)

/* ---- xattr.c: checking and freeing xattrs ---- */

/*
 * -EOPNOTSUPP (with a message) for inodes whose change would need what the
 * write path lacks: when freed, xattrs in buckets or shared by a reflink
 * (and -EUCLEAN for a damaged refcount tree).
 */
int o2_check_writable(struct o2_fs *fs, const struct o2_dinode *di, bool freeing);
/*
 * Freeing an inode's xattrs: 0 if o2_xattr_free_all can do it in
 * the transaction that frees the inode, else -EOPNOTSUPP (buckets, values
 * of more than one extent, too many values) or -EUCLEAN, with a message.
 */
int o2_xattr_check_freeable(struct o2_fs *fs, uint64_t ino_blkno);
/* Inside t: free the value clusters and xattr block, clear the inode's xattr flags. */
int o2_xattr_free_all(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib);
/* Whether o2_xattr_free_all can free the inode's xattrs in one transaction. */
bool o2_xattr_free_fits(struct o2_fs *fs, uint64_t ino_blkno);
/* Inside t: give an xattr block (its buffer, head checked) back to its allocator. */
int o2_xattr_block_free(struct o2_trans *t, struct o2_fs *fs, const uint8_t *buf);
/* Credits o2_xattr_free_all may use: the allocator's blocks, truncate log, inode. */
#define O2_XATTR_FREE_CREDITS (O2_ALLOC_CREDITS + 8)

/* ---- xattr_write.c: changing xattrs ---- */

/*
 * Free the inode's xattr values kept in clusters, their entries with them,
 * a bounded number per transaction: before an inode whose values are too
 * many for o2_xattr_free_all's one transaction is freed.
 */
int o2_xattr_strip_values(struct o2_fs *fs, uint64_t ino);
/*
 * A reflink's copy: dst (new, in the orphan directory, without attributes,
 * in src's refcount tree) gets every attribute of src but the POSIX ACLs,
 * one per transaction, placed as any set places them (its buckets made as
 * they fill); values kept in clusters are shared through the refcount tree
 * (a crash leaves dst an orphan whose freeing lets them go).
 */
int o2_xattr_reflink(struct o2_fs *fs, uint64_t src, uint64_t dst);
/*
 * Inside t (which has O2_XATTR_SET_CREDITS for it): set (value non-NULL)
 * or remove one attribute of the inode in ib, as o2_xattr_set does.  What
 * may fail for want of space is tried before anything is logged, so call
 * it before changing other blocks where that matters.
 */
#define O2_XATTR_SET_CREDITS (4 + 3 * O2_ALLOC_CREDITS + 8)
int o2_xattr_change_in(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, unsigned type,
		       const char *name, size_t len, const void *value, size_t size, unsigned flags);

/* ---- acl.c: POSIX ACLs ---- */

/* POSIX ACLs, on volumes opened with O2_OPEN_ACL. */
#define O2_ACL_INLINE_BYTES 128
struct o2_acl_inherit {
	uint8_t *access, *deflt; /* entries as stored; NULL: none */
	size_t access_len, deflt_len;
};
/*
 * A new inode of *mode in dir: the ACLs it inherits from dir's default
 * ACL, *mode cut down by it - or by umask when dir has none.  Nothing
 * without O2_OPEN_ACL (the caller applied the umask).
 */
int o2_acl_inherit_plan(struct o2_fs *fs, uint64_t dir, uint16_t *mode, uint16_t umask,
			struct o2_acl_inherit *ret);
/* Inside t (2 * O2_XATTR_SET_CREDITS): give the new inode its ACLs. */
int o2_acl_inherit_apply(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib,
			 const struct o2_acl_inherit *in);
void o2_acl_inherit_free(struct o2_acl_inherit *in);
/* The inode's access ACL after chmod to mode (malloc'd; NULL if it has none). */
int o2_acl_chmod_plan(struct o2_fs *fs, uint64_t ino, uint16_t mode, uint8_t **ret, size_t *ret_len);

#endif
