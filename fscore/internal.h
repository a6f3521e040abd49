/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fscore private: the volume and inode handles every module shares, and
 * the declarations of the read-side modules that have no header of their
 * own, sectioned by the .c file that defines them.  Other modules declare
 * theirs in their own header (error.h, meta.h, cache.h, dir.h, ...).
 */
#ifndef O2_INTERNAL_H
#define O2_INTERNAL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "format.h"
#include "cache.h"
#include "mem.h"
#include "o2fs/o2fs.h"

struct o2_fs {
	struct o2_blockdev *dev;
	/* the inode whose file data is being read or written (o2_write,
	   o2_inode_read), named to the device's data calls; 0: none */
	uint64_t io_owner;
	unsigned flags;
	uint32_t bs;		/* block size */
	uint32_t bits;		/* log2 block size */
	uint32_t cs;		/* cluster size */
	uint32_t cbits;
	uint32_t bpc_bits;	/* log2 blocks per cluster */
	uint64_t nblocks;	/* blocks on the device */
	uint8_t *sb_block;	/* the superblock inode, one block */
	struct o2_super_info info;
	uint32_t dx_seed[4];
	char err[512];
	struct o2_cache *cache;
	struct o2_journal *journal; /* NULL when opened read-only */
	struct o2_quota *quota;	    /* quota accounting (quota.c); NULL: none */
	struct o2_open_opts opts;
	int ro_reason;		/* non-zero: an I/O error made the volume read-only */
	struct {		/* system files the write path uses (read-write only) */
		uint64_t global_bitmap, inode_alloc, extent_alloc, truncate_log, local_alloc,
			orphan_dir;
	} sys;
	bool empty_groups;	/* a suballocator group of this slot emptied (alloc.c) */
	/* shared: the system inode lock an operation stopped for (o2_lock_need) */
	uint64_t lock_want;
	bool lock_want_ex;
	/* shared: frees waiting for their allocator's lock (o2_fs_run_deallocs) */
	struct o2_dealloc *deallocs;
	unsigned ndeallocs, capdeallocs;
	/* inodes held open (orphan handling): a hash of chains */
	struct o2_openref **refs;
	unsigned nrefs_buckets, nrefs;
	/* shared: other slots' orphans whose last reference here went */
	uint64_t *foreign;
	unsigned nforeign, capforeign;
	uint64_t gen_counter;	     /* mixes inode generations */
	uint64_t fsyncs, fsync_commits; /* o2_fs_stats */
	uint64_t refreshes, refreshes_kept; /* o2_inode_refresh */
	uint64_t dir_changes; /* entries added, removed or retargeted (o2_fs_dir_stamp) */
	/* o2_fs_close_progress: the close's checkpoint reports here (or NULL) */
	int (*close_progress)(void *arg, uint64_t done, uint64_t total);
	void *close_arg;
};

struct o2_inode {
	struct o2_fs *fs;
	uint8_t *buf; /* one block */
	struct o2_inode_info info;
};

static inline struct o2_dinode *o2_di(const struct o2_inode *ino)
{
	return (struct o2_dinode *)ino->buf;
}

/* A signature field holds the NUL-terminated signature string. */
static inline bool o2_sig_ok(const uint8_t *field, const char *sig)
{
	return memcmp(field, sig, strlen(sig) + 1) == 0;
}

static inline bool o2_has_incompat(const struct o2_fs *fs, uint32_t bit)
{
	return (fs->info.feature_incompat & bit) != 0;
}

/* ---- inode.c ---- */

/* An allocator inode's chain list or bitmap is sound (0 or -EUCLEAN). */
int o2_inode_check_alloc_contents(struct o2_fs *fs, const struct o2_inode *ino);

/* ---- extent.c: extent trees ---- */

/* Validators: 0 or -EUCLEAN with a message. */
int o2_check_extent_list(struct o2_fs *fs, uint64_t blkno, const struct o2_extent_list *el,
			 unsigned max_recs, const char *what);
int o2_check_extent_block(struct o2_fs *fs, uint64_t blkno, const void *buf);
/*
 * Generic extent tree access, as the kernel does it: one B-tree, with the
 * root list held by an owner (inode, dx_root, xattr value, refcount).
 */
struct o2_tree_root {
	uint64_t owner_blkno; /* block holding the root list, for messages */
	struct o2_extent_list *el;
	unsigned max_recs;
};

int o2_tree_map(struct o2_fs *fs, const struct o2_tree_root *root, uint32_t cpos,
		struct o2_extent *ret);
int o2_tree_walk(struct o2_fs *fs, const struct o2_tree_root *root, o2_extent_fn fn, void *arg);
/* Largest leaf record with cpos <= key (used by the dx index). */
int o2_tree_lookup_le(struct o2_fs *fs, const struct o2_tree_root *root, uint32_t key,
		      struct o2_extent *ret);

/* ---- refcount.c ---- */

/* A refcount tree: every block and record checked, counted. */
struct o2_refcount_stats {
	uint64_t blocks, records;
};
int o2_refcount_tree_check(struct o2_fs *fs, uint64_t root, struct o2_refcount_stats *ret);

/* ---- xattr.c ---- */

/* o2_xattr_iterate, and tree_fn also sees each value tree's and bucket tree's
 * extents and extent blocks (as o2_inode_walk_extents calls fn). */
int o2_xattr_walk(struct o2_fs *fs, struct o2_inode *ino, o2_xattr_fn fn, void *arg,
		  o2_extent_fn tree_fn, void *tree_arg);
/* The hash of an attribute's name (without its prefix), as buckets sort them. */
uint32_t o2_xattr_name_hash(const struct o2_fs *fs, const char *name, size_t len);
/* The first name hash bucket blkno holds, from its first block alone (*has false: empty). */
int o2_xattr_bucket_first_hash(struct o2_fs *fs, uint64_t blkno, bool *has, uint32_t *hash);
/* Read the 4 KiB xattr bucket whose first block is blkno (its check verified). */
int o2_xattr_bucket_read(struct o2_fs *fs, uint64_t blkno, uint8_t *bucket);
/* Check one xattr store (header at h, len bytes) and call fn for each entry. */
int o2_xattr_store_walk(struct o2_fs *fs, uint64_t blkno, const uint8_t *h, size_t len,
			o2_xattr_fn fn, void *arg);

/* ---- super.c ---- */

/*
 * Free the handle without writing anything, as if the machine stopped here
 * (tests use it to leave a dirty journal behind).
 */
void o2_fs_abandon(struct o2_fs *fs);

#endif
