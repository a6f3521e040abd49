/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Refcount trees, read side: the reference counts of clusters that
 * reflinked files share (OCFS2_HAS_REFCOUNT_FL inodes point at one with
 * i_refcount_loc; their shared extents carry OCFS2_EXT_REFCOUNTED).
 *
 * A tree's root is a refcount block.  Either it holds the records itself
 * (rf_records: physical cluster, length, count), or (OCFS2_REFCOUNT_TREE_FL)
 * an extent list whose leaves are leaf refcount blocks
 * (OCFS2_REFCOUNT_LEAF_FL, rf_parent naming the root), each holding
 * records.  Every block must be what it says (signature, block number,
 * volume generation, the tree's generation); records must be in order,
 * apart, non-empty, counted above zero and inside the volume.  fscore does
 * not write these trees: the write path refuses to change shared extents.
 */
#include <stdlib.h>

#include "internal.h"

#define REFCOUNT_LEAF 0x1
#define REFCOUNT_TREE 0x2

static unsigned records_room(unsigned bs)
{
	return (unsigned)((bs - offsetof(struct o2_refcount_block, rf_records.rl_recs)) /
			  sizeof(struct o2_refcount_rec));
}

static unsigned list_room(unsigned bs)
{
	return (unsigned)((bs - offsetof(struct o2_refcount_block, rf_list.recs)) /
			  sizeof(struct o2_extent_rec));
}

/* Read blkno as a refcount block of the tree whose root is root (0: it is the root). */
static int read_block(struct o2_fs *fs, uint64_t blkno, uint64_t root, uint32_t generation,
		      uint8_t *buf)
{
	const struct o2_refcount_block *rb = (const struct o2_refcount_block *)(const void *)buf;
	uint32_t flags;
	int r;

	if (blkno <= O2_SUPER_BLKNO || blkno >= fs->nblocks)
		return o2_corrupt(fs, root ? root : blkno, "refcount block %llu is outside the volume",
				  (unsigned long long)blkno);
	r = o2_read_meta(fs, blkno, O2_META_REFCOUNT, buf);
	if (r == 0)
		r = o2_check_meta_head(fs, blkno, "refcount block", rb->rf_signature, O2_SIG_REFCNT,
				       le64(rb->rf_blkno), le32(rb->rf_fs_generation));
	if (r < 0)
		return r;
	flags = le32(rb->rf_flags);
	if (root) {
		if (!(flags & REFCOUNT_LEAF) || (flags & REFCOUNT_TREE))
			return o2_corrupt(fs, blkno, "refcount leaf block has flags 0x%x", flags);
		if (le64(rb->rf_parent) != root)
			return o2_corrupt(fs, blkno, "refcount leaf names %llu as its root, not %llu",
					  (unsigned long long)le64(rb->rf_parent),
					  (unsigned long long)root);
		if (le32(rb->rf_generation) != generation)
			return o2_corrupt(fs, blkno, "refcount leaf generation 0x%x is not its tree's 0x%x",
					  le32(rb->rf_generation), generation);
	} else if (flags & REFCOUNT_LEAF) {
		return o2_corrupt(fs, blkno, "refcount tree root is marked a leaf");
	}
	return 0;
}

static int check_records(struct o2_fs *fs, uint64_t blkno, const struct o2_refcount_list *rl,
			 uint64_t *ret_records)
{
	unsigned count = le16(rl->rl_count), used = le16(rl->rl_used);
	uint64_t prev_end = 0;

	if (count > records_room(fs->bs))
		return o2_corrupt(fs, blkno, "refcount list claims %u records, room for %u", count,
				  records_room(fs->bs));
	if (used > count)
		return o2_corrupt(fs, blkno, "refcount list uses %u of %u records", used, count);
	for (unsigned i = 0; i < used; i++) {
		const struct o2_refcount_rec *rec = &rl->rl_recs[i];
		uint64_t cpos = le64(rec->r_cpos);
		uint32_t n = le32(rec->r_clusters);

		if (n == 0 || le32(rec->r_refcount) == 0)
			return o2_corrupt(fs, blkno, "refcount record %u is empty (%u clusters, count %u)",
					  i, n, le32(rec->r_refcount));
		if (cpos < prev_end)
			return o2_corrupt(fs, blkno, "refcount record %u at cluster %llu overlaps or "
					  "precedes the one before it", i, (unsigned long long)cpos);
		if (cpos >= fs->info.total_clusters || n > fs->info.total_clusters - cpos)
			return o2_corrupt(fs, blkno, "refcount record %u covers clusters %llu..%llu, past "
					  "the volume's %u", i, (unsigned long long)cpos,
					  (unsigned long long)(cpos + n - 1), fs->info.total_clusters);
		prev_end = cpos + n;
	}
	*ret_records += used;
	return 0;
}

struct leaf_walk {
	uint64_t root;
	uint32_t generation;
	uint8_t *buf;
	uint64_t blocks, records;
	struct o2_fs *fs;
};

static int visit_leaf(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	struct leaf_walk *lw = arg;
	const struct o2_refcount_block *rb = (const struct o2_refcount_block *)(const void *)lw->buf;
	int r;

	lw->blocks++;
	if (!ext)
		return 0; /* an extent block of the index */
	if (ext->clusters != 1)
		return o2_corrupt(lw->fs, lw->root, "refcount tree record at 0x%x spans %u clusters, "
				  "not one leaf block", ext->cpos, ext->clusters);
	r = read_block(lw->fs, ext->blkno, lw->root, lw->generation, lw->buf);
	if (r == 0 && le32(rb->rf_cpos) != ext->cpos)
		r = o2_corrupt(lw->fs, ext->blkno, "refcount leaf starts at 0x%x, its tree record "
			       "says 0x%x", le32(rb->rf_cpos), ext->cpos);
	if (r == 0)
		r = check_records(lw->fs, ext->blkno, &rb->rf_records, &lw->records);
	return r;
}

int o2_refcount_tree_check(struct o2_fs *fs, uint64_t root, struct o2_refcount_stats *ret)
{
	uint8_t *buf = o2_malloc(fs->bs);
	struct leaf_walk lw = { .root = root, .fs = fs };
	int r;

	if (!buf)
		return -ENOMEM;
	r = read_block(fs, root, 0, 0, buf);
	if (r < 0)
		goto out;

	struct o2_refcount_block *rb = (struct o2_refcount_block *)(void *)buf;

	lw.blocks = 1;
	if (le32(rb->rf_count) == 0) {
		r = o2_corrupt(fs, root, "refcount tree shared by no inode");
		goto out;
	}
	if (!(le32(rb->rf_flags) & REFCOUNT_TREE)) {
		r = check_records(fs, root, &rb->rf_records, &lw.records);
		goto out;
	}
	r = o2_check_extent_list(fs, root, &rb->rf_list, list_room(fs->bs), "refcount tree");
	if (r == 0) {
		struct o2_tree_root tr = { root, &rb->rf_list, list_room(fs->bs) };

		lw.generation = le32(rb->rf_generation);
		lw.buf = o2_malloc(fs->bs);
		r = lw.buf ? o2_tree_walk(fs, &tr, visit_leaf, &lw) : -ENOMEM;
		free(lw.buf);
	}
out:
	if (r == 0 && ret) {
		ret->blocks = lw.blocks;
		ret->records = lw.records;
	}
	free(buf);
	return r;
}
