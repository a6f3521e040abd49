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
 * first); a reflink shares them (counts raised, or a record counting 2);
 * a file's last hold on its tree goes with the file.  As the kernel does,
 * a root that fills up moves its records to a leaf block and becomes a
 * tree of leaves (each covering a range of clusters from its rf_cpos to
 * the next leaf's); a full leaf splits in two; an empty one leaves the
 * tree, and the root takes the records back when the last leaf empties.
 * Callers change one run of records (one leaf) at a time, which bounds
 * what a transaction logs.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "error.h"
#include "inode_write.h"
#include "internal.h"
#include "journal.h"
#include "meta.h"
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

/* ---- write side ---- */

static struct o2_refcount_block *rblock(struct o2_buf *b)
{
	return (struct o2_refcount_block *)(void *)b->data;
}

static bool is_tree(struct o2_buf *rb)
{
	return le32(rblock(rb)->rf_flags) & REFCOUNT_TREE;
}

/* The root's list of leaves as a tree to change (its records name blocks: no merging). */
static void leaves_owner(struct o2_buf *rb, struct o2_tree_owner *o)
{
	o->root = rb;
	o->el = &rblock(rb)->rf_list;
	o->last_eb = (o2le64 *)(void *)(rb->data + offsetof(struct o2_refcount_block, rf_last_eb_blk));
	o->no_merge = true;
}

static struct o2_tree_root leaves_tree(const struct o2_fs *fs, struct o2_buf *rb)
{
	return (struct o2_tree_root){ rb->blkno, &rblock(rb)->rf_list, list_room(fs->bs) };
}

/* The tree's root, cached and checked, for a change. */
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
	struct o2_refcount_block *rb = rblock(b);

	r = o2_check_meta_head(fs, root, "refcount block", rb->rf_signature, O2_SIG_REFCNT,
			       le64(rb->rf_blkno), le32(rb->rf_fs_generation));
	if (r == 0 && (le32(rb->rf_flags) & REFCOUNT_LEAF))
		r = o2_corrupt(fs, root, "refcount tree root is marked a leaf");
	if (r == 0 && is_tree(b))
		r = o2_check_extent_list(fs, root, &rb->rf_list, list_room(fs->bs), "refcount tree");
	else if (r == 0)
		r = check_records(fs, root, &rb->rf_records, &records);
	if (r == 0 && is_tree(b) && !le16(rb->rf_list.next_free_rec))
		r = o2_corrupt(fs, root, "refcount tree has no leaf");
	if (r < 0) {
		o2_brelse(fs, b);
		return r;
	}
	*ret = b;
	return 0;
}

/*
 * Where the records of a physical cluster live: the root itself, or the
 * leaf whose range [start, end) holds it (the leftmost leaf's range starts
 * at 0 whatever its first record says).
 */
struct rleaf {
	struct o2_buf *b;
	uint64_t start, end;
	bool is_root, leftmost;
};

static void leaf_put(struct o2_fs *fs, struct rleaf *l)
{
	if (!l->is_root)
		o2_brelse(fs, l->b);
	l->b = NULL;
}

static int leaf_find(struct o2_fs *fs, struct o2_buf *rb, uint64_t cpos, struct rleaf *ret)
{
	struct o2_tree_root tr = leaves_tree(fs, rb);
	struct o2_extent ext, next;
	uint64_t records = 0;
	struct o2_buf *b;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (!is_tree(rb)) {
		*ret = (struct rleaf){ rb, 0, UINT64_MAX, true, true };
		return 0;
	}
	uint32_t first = le32(rblock(rb)->rf_list.recs[0].cpos);
	uint32_t key = cpos > UINT32_MAX ? UINT32_MAX : (uint32_t)cpos;

	r = o2_tree_lookup_le(fs, &tr, key < first ? first : key, &ext);
	if (r == 0 && ext.cpos == UINT32_MAX)
		next = (struct o2_extent){ UINT32_MAX, 0, 0, 0 };
	else if (r == 0)
		r = o2_tree_map(fs, &tr, ext.cpos + 1, &next);
	if (r == 0)
		r = o2_bread(fs, ext.blkno, O2_META_REFCOUNT, &b);
	if (r < 0)
		return r;
	struct o2_refcount_block *lb = rblock(b);

	r = o2_check_meta_head(fs, ext.blkno, "refcount block", lb->rf_signature, O2_SIG_REFCNT,
			       le64(lb->rf_blkno), le32(lb->rf_fs_generation));
	if (r == 0 && (!(le32(lb->rf_flags) & REFCOUNT_LEAF) || le64(lb->rf_parent) != rb->blkno ||
		       le32(lb->rf_generation) != le32(rblock(rb)->rf_generation) ||
		       le32(lb->rf_cpos) != ext.cpos))
		r = o2_corrupt(fs, ext.blkno, "refcount leaf does not belong where tree %llu has it",
			       (unsigned long long)rb->blkno);
	if (r == 0)
		r = check_records(fs, ext.blkno, &lb->rf_records, &records);
	if (r < 0) {
		o2_brelse(fs, b);
		return r;
	}
	ret->b = b;
	ret->leftmost = ext.cpos == first;
	ret->start = ret->leftmost ? 0 : ext.cpos;
	ret->end = next.blkno ? next.cpos : (uint64_t)next.cpos + next.clusters;
	if (ret->end >= UINT32_MAX)
		ret->end = UINT64_MAX;
	return 0;
}

int o2_refcount_check(struct o2_fs *fs, uint64_t root)
{
	struct o2_buf *b;
	int r = root_load(fs, root, &b);

	if (r == 0)
		o2_brelse(fs, b);
	return r;
}

int o2_refcount_lookup(struct o2_fs *fs, uint64_t root, uint32_t cpos, uint32_t *ret_count,
		       uint32_t *ret_run, uint32_t *ret_before)
{
	struct o2_buf *rb;
	struct rleaf l;
	int r = root_load(fs, root, &rb);

	if (r < 0)
		return r;
	r = leaf_find(fs, rb, cpos, &l);
	if (r < 0) {
		o2_brelse(fs, rb);
		return r;
	}
	const struct o2_refcount_list *rl = &rblock(l.b)->rf_records;
	uint64_t lo = l.start, hi = l.end; /* the run around cpos: a record, or a gap */

	*ret_count = 0;
	for (unsigned i = 0; i < le16(rl->rl_used); i++) {
		uint64_t s = le64(rl->rl_recs[i].r_cpos), e = s + le32(rl->rl_recs[i].r_clusters);

		if (cpos < s) {
			hi = s;
			break;
		}
		if (cpos < e) {
			*ret_count = le32(rl->rl_recs[i].r_refcount);
			lo = s;
			hi = e;
			break;
		}
		lo = e;
	}
	if (lo > cpos)
		lo = cpos; /* below the leftmost leaf's first record */
	*ret_run = hi - cpos > UINT32_MAX ? UINT32_MAX : (uint32_t)(hi - cpos);
	if (ret_before)
		*ret_before = (uint32_t)(cpos - lo);
	leaf_put(fs, &l);
	o2_brelse(fs, rb);
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

/* A change of [lo, hi) in one leaf: the counts go up (share) or down (release). */
struct change {
	uint64_t lo, hi;
	bool share, fresh, free_unused;
	struct o2_refcount_rec *v; /* the leaf's records after it (room: used + 2) */
	unsigned n;
	uint64_t *gone; /* start, length pairs that no file uses any more */
	unsigned ngone;
};

static int plan_change(struct o2_fs *fs, uint64_t root, const struct o2_refcount_list *rl,
		       struct change *c)
{
	uint64_t covered = 0, len = c->hi - c->lo;
	bool placed = false;

	c->n = c->ngone = 0;
	for (unsigned i = 0; i < le16(rl->rl_used); i++) {
		uint64_t s = le64(rl->rl_recs[i].r_cpos), e = s + le32(rl->rl_recs[i].r_clusters);
		uint32_t cnt = le32(rl->rl_recs[i].r_refcount);
		uint64_t ms = s > c->lo ? s : c->lo, me = e < c->hi ? e : c->hi;

		if (c->fresh && !placed && s >= c->hi) {
			recs_push(c->v, &c->n, c->lo, len, 2);
			placed = true;
		}
		if (ms >= me) {
			recs_push(c->v, &c->n, s, e - s, cnt);
			continue;
		}
		covered += me - ms;
		recs_push(c->v, &c->n, s, ms - s, cnt);
		if (c->share) {
			if (cnt == UINT32_MAX)
				return o2_fail(fs, -EMLINK, "clusters at %llu are shared too many times",
					       (unsigned long long)ms);
			recs_push(c->v, &c->n, ms, me - ms, cnt + 1);
		} else if (cnt > 1) {
			recs_push(c->v, &c->n, ms, me - ms, cnt - 1);
		} else if (c->free_unused) {
			c->gone[2 * c->ngone] = ms;
			c->gone[2 * c->ngone++ + 1] = me - ms;
		}
		recs_push(c->v, &c->n, me, e - me, cnt);
	}
	if (c->fresh && !placed)
		recs_push(c->v, &c->n, c->lo, len, 2);
	if (covered != (c->fresh ? 0 : len))
		return o2_corrupt(fs, root, "clusters %llu+%llu are %s in refcount tree %llu",
				  (unsigned long long)c->lo, (unsigned long long)len,
				  c->fresh ? "unshared in their file but counted" : "not all counted",
				  (unsigned long long)root);
	return 0;
}

/* A new refcount block from the extent allocator: its head, no records. */
static int block_new(struct o2_trans *t, struct o2_fs *fs, struct o2_buf **ret)
{
	struct o2_suballoc_res res;
	int r = o2_suballoc_new_block(t, fs, fs->sys.extent_alloc, O2_META_REFCOUNT, &res, ret);

	if (r < 0)
		return r;
	struct o2_refcount_block *x = rblock(*ret);

	memcpy(x->rf_signature, O2_SIG_REFCNT, sizeof(x->rf_signature));
	x->rf_suballoc_slot = cpu_le16(res.slot);
	x->rf_suballoc_bit = cpu_le16(res.bit);
	if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_DISCONTIG_BG))
		x->rf_suballoc_loc = cpu_le64(res.group);
	x->rf_fs_generation = cpu_le32(fs->info.fs_generation);
	x->rf_blkno = cpu_le64(res.blkno);
	x->rf_records.rl_count = cpu_le16((uint16_t)records_room(fs->bs));
	return 0;
}

/* A new, empty leaf for the tree rb roots, starting at cpos. */
static int leaf_new(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *rb, uint64_t cpos,
		    struct o2_buf **ret)
{
	struct o2_buf *b;
	int r;

	if (cpos > UINT32_MAX)
		return o2_fail(fs, -EFBIG, "refcount leaf at cluster %llu: past what a tree indexes",
			       (unsigned long long)cpos);
	r = block_new(t, fs, &b);
	if (r < 0)
		return r;
	struct o2_refcount_block *lb = rblock(b);

	lb->rf_parent = cpu_le64(rb->blkno);
	lb->rf_flags = cpu_le32(REFCOUNT_LEAF);
	lb->rf_cpos = cpu_le32((uint32_t)cpos);
	lb->rf_generation = rblock(rb)->rf_generation;
	*ret = b;
	return 0;
}

/* A refcount block (root or leaf) back to the extent allocator it came from. */
static int block_free(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *b)
{
	struct o2_refcount_block *x = rblock(b);

	return o2_suballoc_give_back(t, fs, O2_SYS_EXTENT_ALLOC, le16(x->rf_suballoc_slot),
				     le64(x->rf_suballoc_loc), le16(x->rf_suballoc_bit), b->blkno);
}

static void records_put(struct o2_fs *fs, struct o2_buf *b, const struct o2_refcount_rec *v,
			unsigned n)
{
	struct o2_refcount_list *rl = &rblock(b)->rf_records;
	unsigned count = records_room(fs->bs);

	if (n)
		memcpy(rl->rl_recs, v, n * sizeof(*v));
	memset(&rl->rl_recs[n], 0, (count - n) * sizeof(*v));
	rl->rl_count = cpu_le16((uint16_t)count);
	rl->rl_used = cpu_le16((uint16_t)n);
}

/* The root's records move to a first leaf (range from 0): the root becomes a tree. */
static int root_to_tree(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *rb, struct rleaf *ret)
{
	struct o2_refcount_block *x = rblock(rb);
	struct o2_buf *lb;
	int r = leaf_new(t, fs, rb, 0, &lb);

	if (r < 0)
		return r;
	r = o2_trans_add(t, rb);
	if (r < 0) {
		o2_brelse(fs, lb);
		return r;
	}
	memcpy(&rblock(lb)->rf_records, &x->rf_records,
	       offsetof(struct o2_refcount_list, rl_recs) +
	       le16(x->rf_records.rl_used) * sizeof(struct o2_refcount_rec));
	rblock(lb)->rf_records.rl_count = cpu_le16((uint16_t)records_room(fs->bs));
	memset(&x->rf_list, 0, fs->bs - offsetof(struct o2_refcount_block, rf_list));
	x->rf_list.count = cpu_le16((uint16_t)list_room(fs->bs));
	x->rf_list.next_free_rec = cpu_le16(1);
	x->rf_list.recs[0].leaf_clusters = cpu_le16(1);
	x->rf_list.recs[0].blkno = cpu_le64(lb->blkno);
	x->rf_flags = cpu_le32(le32(x->rf_flags) | REFCOUNT_TREE);
	x->rf_clusters = cpu_le32(1);
	x->rf_last_eb_blk = cpu_le64(0);
	*ret = (struct rleaf){ lb, 0, UINT64_MAX, false, true };
	return 0;
}

/* The last leaf has left the tree: the root holds the (no) records again. */
static int tree_to_root(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *rb)
{
	struct o2_refcount_block *x = rblock(rb);
	int r = o2_trans_add(t, rb);

	if (r < 0)
		return r;
	memset(&x->rf_records, 0, fs->bs - offsetof(struct o2_refcount_block, rf_records));
	x->rf_records.rl_count = cpu_le16((uint16_t)records_room(fs->bs));
	x->rf_flags = cpu_le32(le32(x->rf_flags) & ~(uint32_t)REFCOUNT_TREE);
	x->rf_clusters = cpu_le32(0);
	x->rf_last_eb_blk = cpu_le64(0);
	return 0;
}

static int drop_leaf_block(struct o2_trans *t, struct o2_fs *fs, uint64_t blkno, uint32_t clusters,
			   uint8_t flags, void *arg)
{
	struct o2_buf *b;
	int r = o2_bread(fs, blkno, O2_META_REFCOUNT, &b);

	if (r == 0) {
		r = block_free(t, fs, b);
		o2_brelse(fs, b);
	}
	return r;
}

/* Take an empty leaf (not the leftmost) out of the tree. */
static int leaf_remove(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *rb, struct rleaf *l)
{
	struct o2_tree_owner o;
	uint32_t cpos = le32(rblock(l->b)->rf_cpos);
	int r = o2_trans_add(t, rb);

	if (r < 0)
		return r;
	leaves_owner(rb, &o);
	r = o2_tree_punch(t, fs, &o, cpos, cpos + 1, 1, drop_leaf_block, NULL);
	if (r > 0)
		r = 0;
	if (r == 0)
		rblock(rb)->rf_clusters = cpu_le32(le32(rblock(rb)->rf_clusters) - 1);
	return r;
}

/*
 * Inside t: leaf l's records become v[0..n).  A root that overflows
 * becomes a tree; a leaf that overflows splits in two; a leaf left empty
 * leaves the tree (the leftmost takes its right neighbour's records
 * instead, and the last one gives the root its records back).
 */
static int leaf_store(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *rb, struct rleaf *l,
		      const struct o2_refcount_rec *v, unsigned n)
{
	unsigned count = records_room(fs->bs);
	int r;

	if (n > count && l->is_root) {
		r = root_to_tree(t, fs, rb, l);
		if (r < 0)
			return r;
	}
	if (n > count) {
		unsigned k = n / 2;
		struct o2_buf *nb = NULL;
		struct o2_tree_owner o;

		r = leaf_new(t, fs, rb, le64(v[k].r_cpos), &nb);
		if (r == 0)
			r = o2_trans_add(t, l->b);
		if (r == 0)
			r = o2_trans_add(t, rb);
		if (r < 0)
			return r;
		records_put(fs, l->b, v, k);
		records_put(fs, nb, v + k, n - k);
		leaves_owner(rb, &o);
		r = o2_tree_insert(t, fs, &o, &(struct o2_extent){ (uint32_t)le64(v[k].r_cpos), 1,
								 nb->blkno, 0 });
		o2_brelse(fs, nb);
		if (r == 0)
			rblock(rb)->rf_clusters = cpu_le32(le32(rblock(rb)->rf_clusters) + 1);
		return r;
	}
	if (n == 0 && !l->is_root) {
		const struct o2_extent_list *el = &rblock(rb)->rf_list;

		if (!l->leftmost)
			return leaf_remove(t, fs, rb, l);
		if (le16(el->next_free_rec) == 1 && !le16(el->tree_depth)) {
			r = leaf_remove(t, fs, rb, l);
			return r < 0 ? r : tree_to_root(t, fs, rb);
		}
		if (l->end != UINT64_MAX) {
			/* the leftmost stays: it takes its neighbour's records */
			struct rleaf nl;

			r = leaf_find(fs, rb, l->end, &nl);
			if (r == 0)
				r = o2_trans_add(t, l->b);
			if (r == 0) {
				const struct o2_refcount_list *nr = &rblock(nl.b)->rf_records;

				records_put(fs, l->b, nr->rl_recs, le16(nr->rl_used));
				records_put(fs, nl.b, NULL, 0);
				r = leaf_remove(t, fs, rb, &nl);
			}
			if (nl.b)
				leaf_put(fs, &nl);
			return r;
		}
	}
	r = o2_trans_add(t, l->b);
	if (r == 0)
		records_put(fs, l->b, v, n);
	return r;
}

/* Inside t: apply share/fresh/free_unused to [lo, lo+len), leaf by leaf. */
static int change_range(struct o2_trans *t, struct o2_fs *fs, uint64_t root, uint64_t lo,
			uint32_t len, bool share, bool fresh, bool free_unused)
{
	uint64_t hi = lo + len;
	struct o2_buf *rb;
	int r = root_load(fs, root, &rb);

	if (r < 0)
		return r; /* rb was not set */
	while (r == 0 && lo < hi) {
		struct change c = { .share = share, .fresh = fresh, .free_unused = free_unused };
		struct rleaf l;

		r = leaf_find(fs, rb, lo, &l);
		if (r < 0)
			break;
		unsigned used = le16(rblock(l.b)->rf_records.rl_used);

		c.lo = lo;
		c.hi = hi < l.end ? hi : l.end;
		c.v = o2_malloc((used + 2) * sizeof(*c.v));
		c.gone = o2_malloc((used + 1) * 2 * sizeof(*c.gone));
		r = c.v && c.gone ? plan_change(fs, root, &rblock(l.b)->rf_records, &c) : -ENOMEM;
		if (r == 0)
			r = leaf_store(t, fs, rb, &l, c.v, c.n);
		for (unsigned i = 0; r == 0 && i < c.ngone; i++)
			r = o2_clusters_free(t, fs, (uint32_t)c.gone[2 * i], (uint32_t)c.gone[2 * i + 1]);
		free(c.v);
		free(c.gone);
		leaf_put(fs, &l);
		lo = c.hi;
	}
	o2_brelse(fs, rb);
	return r;
}

int o2_refcount_release(struct o2_trans *t, struct o2_fs *fs, uint64_t root, uint32_t cpos,
			uint32_t len, bool free_unused)
{
	return change_range(t, fs, root, cpos, len, false, false, free_unused);
}

int o2_refcount_share(struct o2_trans *t, struct o2_fs *fs, uint64_t root, uint32_t cpos,
		      uint32_t len, bool fresh)
{
	return change_range(t, fs, root, cpos, len, true, fresh, false);
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
			struct o2_refcount_block *rb = rblock(b);

			if (le32(rb->rf_count) == UINT32_MAX)
				r = o2_fail(fs, -EMLINK, "refcount tree %llu has too many users",
					    (unsigned long long)root);
			else
				rb->rf_count = cpu_le32(le32(rb->rf_count) + 1);
		}
	} else {
		r = block_new(t, fs, &b);
		if (r == 0) {
			rblock(b)->rf_count = cpu_le32(1);
			rblock(b)->rf_generation = cpu_le32(o2_new_generation(fs));
			root = b->blkno;
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
	struct o2_refcount_block *rb = rblock(b);
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
		/* its last user: leaves (none, unless counts were left behind) and root go */
		if (is_tree(b)) {
			struct o2_tree_owner o;

			leaves_owner(b, &o);
			r = o2_tree_truncate(t, fs, &o, 0, UINT32_MAX, drop_leaf_block, NULL);
			if (r > 0)
				r = o2_corrupt(fs, root, "refcount tree freed with too many leaves");
		}
		if (r == 0)
			r = block_free(t, fs, b);
	}
out:
	o2_brelse(fs, b);
	return r;
}
