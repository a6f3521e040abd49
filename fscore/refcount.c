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
 * apart, non-empty, counted above zero and inside the volume.
 *
 * Write side: a shared extent's clusters are released - their count
 * lowered, clusters no file uses any more freed - when a file lets go of
 * them (truncate, hole punching, deletion, or a write that copies them
 * first), and a file's last hold on its tree goes with the file.  fscore
 * changes trees whose records fit in the root block; the kernel grows a
 * full root into leaf blocks, which fscore reads but does not change.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "internal.h"
#include "journal.h"
#include "write.h"

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

/* ---- write side: the records a tree keeps in its root ---- */

/*
 * The tree's root, cached and checked, for a change: fscore changes trees
 * whose records live in the root block; a tree grown into leaf blocks (a
 * kernel's, with more shared extents than a block holds) is -EOPNOTSUPP.
 */
static int root_load(struct o2_fs *fs, uint64_t root, struct o2_buf **ret)
{
	struct o2_buf *b;
	uint64_t records = 0;
	int r;

	if (root <= O2_SUPER_BLKNO || root >= fs->nblocks)
		return o2_corrupt(fs, root, "refcount tree root %llu is outside the volume",
				  (unsigned long long)root);
	r = o2_bread(fs, root, O2_META_REFCOUNT, &b);
	if (r < 0)
		return r;
	struct o2_refcount_block *rb = (struct o2_refcount_block *)(void *)b->data;

	r = o2_check_meta_head(fs, root, "refcount block", rb->rf_signature, O2_SIG_REFCNT,
			       le64(rb->rf_blkno), le32(rb->rf_fs_generation));
	if (r == 0 && (le32(rb->rf_flags) & REFCOUNT_LEAF))
		r = o2_corrupt(fs, root, "refcount tree root is marked a leaf");
	if (r == 0 && (le32(rb->rf_flags) & REFCOUNT_TREE))
		r = o2_fail(fs, -EOPNOTSUPP, "refcount tree %llu keeps its records in leaf blocks; "
			    "changing it is not implemented", (unsigned long long)root);
	if (r == 0)
		r = check_records(fs, root, &rb->rf_records, &records);
	if (r < 0) {
		o2_brelse(fs, b);
		return r;
	}
	*ret = b;
	return 0;
}

static struct o2_refcount_list *root_records(struct o2_buf *b)
{
	return &((struct o2_refcount_block *)(void *)b->data)->rf_records;
}

int o2_refcount_room(struct o2_fs *fs, uint64_t root, unsigned *ret_room)
{
	struct o2_buf *b;
	int r = root_load(fs, root, &b);

	if (r < 0)
		return r;
	*ret_room = (unsigned)(le16(root_records(b)->rl_count) - le16(root_records(b)->rl_used));
	o2_brelse(fs, b);
	return 0;
}

int o2_refcount_lookup(struct o2_fs *fs, uint64_t root, uint32_t cpos, uint32_t *ret_count,
		       uint32_t *ret_run)
{
	struct o2_buf *b;
	int r = root_load(fs, root, &b);

	if (r < 0)
		return r;
	const struct o2_refcount_list *rl = root_records(b);

	*ret_count = 0;
	*ret_run = UINT32_MAX;
	for (unsigned i = 0; i < le16(rl->rl_used); i++) {
		uint64_t s = le64(rl->rl_recs[i].r_cpos), e = s + le32(rl->rl_recs[i].r_clusters);

		if (cpos < s) {
			*ret_run = (uint32_t)(s - cpos); /* no record until s */
			break;
		}
		if (cpos < e) {
			*ret_count = le32(rl->rl_recs[i].r_refcount);
			*ret_run = (uint32_t)(e - cpos);
			break;
		}
	}
	o2_brelse(fs, b);
	return 0;
}

int o2_refcount_full(struct o2_fs *fs, uint64_t root)
{
	return o2_fail(fs, -EOPNOTSUPP, "refcount tree %llu is full; growing it into leaf blocks "
		       "is not implemented", (unsigned long long)root);
}

/*
 * Inside t: the root's records become v[0..n) (-EOPNOTSUPP, nothing
 * logged, if they do not fit).  t NULL: only whether they fit.
 */
static int records_store(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *b,
			 const struct o2_refcount_rec *v, unsigned n)
{
	struct o2_refcount_list *rl = root_records(b);
	unsigned count = le16(rl->rl_count);
	int r;

	if (n > count)
		return o2_refcount_full(fs, b->blkno);
	if (!t)
		return 0;
	r = o2_trans_add(t, b);
	if (r < 0)
		return r;
	memcpy(rl->rl_recs, v, n * sizeof(*v));
	memset(&rl->rl_recs[n], 0, (count - n) * sizeof(*v));
	rl->rl_used = cpu_le16((uint16_t)n);
	return 0;
}

/* Append [s, s+n) with count c to v, merging it into the last one where they touch. */
static void recs_push(struct o2_refcount_rec *v, unsigned *n, uint64_t s, uint64_t len, uint32_t c)
{
	if (len == 0)
		return;
	if (*n) {
		struct o2_refcount_rec *l = &v[*n - 1];

		if (le64(l->r_cpos) + le32(l->r_clusters) == s && le32(l->r_refcount) == c &&
		    le32(l->r_clusters) + len <= UINT32_MAX) {
			l->r_clusters = cpu_le32((uint32_t)(le32(l->r_clusters) + len));
			return;
		}
	}
	v[*n].r_cpos = cpu_le64(s);
	v[*n].r_clusters = cpu_le32((uint32_t)len);
	v[*n].r_refcount = cpu_le32(c);
	(*n)++;
}

int o2_refcount_release(struct o2_trans *t, struct o2_fs *fs, uint64_t root, uint32_t cpos,
			uint32_t len, bool free_unused)
{
	uint64_t lo = cpos, hi = (uint64_t)cpos + len, covered = 0;
	struct o2_refcount_rec *v = NULL;
	uint64_t *gone = NULL; /* start, length pairs of clusters no longer shared by anyone */
	unsigned n = 0, ngone = 0;
	struct o2_buf *b;
	int r = root_load(fs, root, &b);

	if (r < 0)
		return r;
	struct o2_refcount_list *rl = root_records(b);
	unsigned used = le16(rl->rl_used);

	v = o2_malloc((used + 2) * sizeof(*v));
	gone = o2_malloc((used + 1) * 2 * sizeof(*gone));
	if (!v || !gone) {
		r = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < used; i++) {
		uint64_t s = le64(rl->rl_recs[i].r_cpos), e = s + le32(rl->rl_recs[i].r_clusters);
		uint32_t c = le32(rl->rl_recs[i].r_refcount);
		uint64_t ms = s > lo ? s : lo, me = e < hi ? e : hi;

		if (ms >= me) {
			recs_push(v, &n, s, e - s, c);
			continue;
		}
		covered += me - ms;
		recs_push(v, &n, s, ms - s, c);
		if (c > 1) {
			recs_push(v, &n, ms, me - ms, c - 1);
		} else if (free_unused) {
			gone[2 * ngone] = ms;
			gone[2 * ngone++ + 1] = me - ms;
		}
		recs_push(v, &n, me, e - me, c);
	}
	if (covered != len) {
		r = o2_corrupt(fs, root, "shared clusters %u+%u are not all counted in refcount tree "
			       "%llu", cpos, len, (unsigned long long)root);
		goto out;
	}
	r = records_store(t, fs, b, v, n);
	if (r < 0 || !t)
		goto out;
	for (unsigned i = 0; i < ngone && r == 0; i++)
		r = o2_clusters_free(t, fs, (uint32_t)gone[2 * i], (uint32_t)gone[2 * i + 1]);
out:
	free(v);
	free(gone);
	o2_brelse(fs, b);
	return r;
}

int o2_refcount_detach(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib)
{
	struct o2_dinode *di = (struct o2_dinode *)(void *)ib->data;
	uint64_t root = le64(di->i_refcount_loc);
	struct o2_buf *b;
	int r;

	if (!(le16(di->i_dyn_features) & O2_DYN_HAS_REFCOUNT))
		return 0;
	r = root_load(fs, root, &b);
	if (r < 0)
		return r;
	struct o2_refcount_block *rb = (struct o2_refcount_block *)(void *)b->data;
	uint32_t users = le32(rb->rf_count);

	r = o2_trans_add(t, b);
	if (r == 0)
		r = o2_trans_add(t, ib);
	if (r < 0)
		goto out;
	di->i_dyn_features = cpu_le16(le16(di->i_dyn_features) & ~O2_DYN_HAS_REFCOUNT);
	di->i_refcount_loc = cpu_le64(0);
	rb->rf_count = cpu_le32(users ? users - 1 : 0);
	if (users <= 1) {
		/* its last user: the root goes back to the extent allocator it came from */
		uint16_t slot = le16(rb->rf_suballoc_slot), bit = le16(rb->rf_suballoc_bit);
		uint64_t group = le64(rb->rf_suballoc_loc), alloc = fs->sys.extent_alloc;

		if (!group)
			group = root - bit;
		if (slot != fs->opts.slot)
			r = o2_sysfile_lookup(fs, O2_SYS_EXTENT_ALLOC, slot, &alloc);
		if (r == 0)
			r = o2_suballoc_free(t, fs, alloc, group, bit);
	}
out:
	o2_brelse(fs, b);
	return r;
}

int o2_refcount_share(struct o2_trans *t, struct o2_fs *fs, uint64_t root, uint32_t cpos,
		      uint32_t len, bool fresh)
{
	uint64_t lo = cpos, hi = (uint64_t)cpos + len, covered = 0;
	struct o2_refcount_rec *v = NULL;
	unsigned n = 0;
	bool placed = false;
	struct o2_buf *b;
	int r = root_load(fs, root, &b);

	if (r < 0)
		return r;
	struct o2_refcount_list *rl = root_records(b);
	unsigned used = le16(rl->rl_used);

	v = o2_malloc((used + 2) * sizeof(*v));
	if (!v) {
		r = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < used; i++) {
		uint64_t s = le64(rl->rl_recs[i].r_cpos), e = s + le32(rl->rl_recs[i].r_clusters);
		uint32_t c = le32(rl->rl_recs[i].r_refcount);
		uint64_t ms = s > lo ? s : lo, me = e < hi ? e : hi;

		if (fresh && !placed && s >= hi) {
			recs_push(v, &n, lo, len, 2);
			placed = true;
		}
		if (ms >= me) {
			recs_push(v, &n, s, e - s, c);
			continue;
		}
		covered += me - ms;
		if (c == UINT32_MAX) {
			r = o2_fail(fs, -EMLINK, "clusters at %llu are shared too many times",
				    (unsigned long long)ms);
			goto out;
		}
		recs_push(v, &n, s, ms - s, c);
		recs_push(v, &n, ms, me - ms, c + 1);
		recs_push(v, &n, me, e - me, c);
	}
	if (fresh && !placed)
		recs_push(v, &n, lo, len, 2);
	if (covered != (fresh ? 0 : len)) {
		r = o2_corrupt(fs, root, "clusters %u+%u are %s in refcount tree %llu", cpos, len,
			       fresh ? "unshared in their file but counted" : "not all counted",
			       (unsigned long long)root);
		goto out;
	}
	r = records_store(t, fs, b, v, n);
	if (r < 0)
		goto out;
out:
	free(v);
	o2_brelse(fs, b);
	return r;
}

int o2_refcount_attach(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, uint64_t root)
{
	struct o2_dinode *di = (struct o2_dinode *)(void *)ib->data;
	struct o2_buf *b = NULL;
	int r;

	if (root) {
		r = root_load(fs, root, &b);
		if (r == 0)
			r = o2_trans_add(t, b);
		if (r == 0) {
			struct o2_refcount_block *rb = (struct o2_refcount_block *)(void *)b->data;

			if (le32(rb->rf_count) == UINT32_MAX)
				r = o2_fail(fs, -EMLINK, "refcount tree %llu has too many users",
					    (unsigned long long)root);
			else
				rb->rf_count = cpu_le32(le32(rb->rf_count) + 1);
		}
	} else {
		struct o2_suballoc_res res;

		r = o2_suballoc_new_block(t, fs, fs->sys.extent_alloc, O2_META_REFCOUNT, &res, &b);
		if (r == 0) {
			struct o2_refcount_block *rb = (struct o2_refcount_block *)(void *)b->data;

			memcpy(rb->rf_signature, O2_SIG_REFCNT, sizeof(rb->rf_signature));
			rb->rf_suballoc_slot = cpu_le16(res.slot);
			rb->rf_suballoc_bit = cpu_le16(res.bit);
			if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_DISCONTIG_BG))
				rb->rf_suballoc_loc = cpu_le64(res.group);
			rb->rf_fs_generation = cpu_le32(fs->info.fs_generation);
			rb->rf_blkno = cpu_le64(res.blkno);
			rb->rf_count = cpu_le32(1);
			rb->rf_generation = cpu_le32(o2_new_generation(fs));
			rb->rf_records.rl_count = cpu_le16((uint16_t)records_room(fs->bs));
			root = res.blkno;
		}
	}
	if (r == 0)
		r = o2_trans_add(t, ib);
	if (r == 0) {
		di->i_dyn_features = cpu_le16(le16(di->i_dyn_features) | O2_DYN_HAS_REFCOUNT);
		di->i_refcount_loc = cpu_le64(root);
	}
	if (b)
		o2_brelse(fs, b);
	return r;
}
