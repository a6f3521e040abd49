/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The extent B-tree, write side: one implementation for every owner.
 *
 * How it works.  An insert first tries to merge the new record with a
 * neighbour; otherwise it goes into its leaf.  A full leaf is split: the
 * topmost full node on the path below a node with room is split in two (at
 * its end when the insert lands there, as appends do, else in half) and the
 * new node is linked into its parent; a full root moves its records into a
 * new extent block and points at it, adding a level.  After each structural
 * change the path is looked up again, so no stale path survives a split.
 * Interior records cover from their child's first cluster to the next
 * record's cpos (the rightmost: to the end of its subtree).  Truncation
 * removes records from the right, frees extent blocks that empty out, and
 * pulls a lone child back into the root.  Leaves are chained through
 * h_next_leaf_blk, and the owner's last_eb names the rightmost leaf.
 */
#include <stdlib.h>

#include "alloc.h"
#include "error.h"
#include "extent_write.h"
#include "journal.h"

#define MAX_DEPTH 5

struct level {
	struct o2_buf *buf;	  /* extent block (NULL for the root) */
	struct o2_extent_list *el;
	int idx;		  /* record followed to the next level */
};

struct path {
	struct level lv[MAX_DEPTH + 1];
	int n; /* levels; lv[n-1] is the leaf */
};

static void path_release(struct o2_fs *fs, struct path *p)
{
	for (int i = 1; i < p->n; i++)
		o2_brelse(fs, p->lv[i].buf);
	p->n = 0;
}

static uint32_t rec_clusters(const struct o2_extent_list *el, const struct o2_extent_rec *r)
{
	return le16(el->tree_depth) ? le32(r->int_clusters) : le16(r->leaf_clusters);
}

static uint64_t list_end(const struct o2_extent_list *el)
{
	unsigned n = le16(el->next_free_rec);

	if (!n)
		return 0;
	return (uint64_t)le32(el->recs[n - 1].cpos) + rec_clusters(el, &el->recs[n - 1]);
}

static int find_le(const struct o2_extent_list *el, uint32_t key)
{
	int i;

	for (i = (int)le16(el->next_free_rec) - 1; i >= 0; i--)
		if (le32(el->recs[i].cpos) <= key)
			break;
	return i;
}

static int read_eb(struct o2_fs *fs, uint64_t parent, uint64_t blkno, unsigned depth,
		   struct o2_buf **ret)
{
	struct o2_buf *b;
	int r;

	if (blkno <= O2_SUPER_BLKNO || blkno >= fs->nblocks)
		return o2_corrupt(fs, parent, "extent record points at block %llu, outside the volume",
				  (unsigned long long)blkno);
	r = o2_bread(fs, blkno, O2_META_EXTENT, &b);
	if (r < 0)
		return r;
	r = o2_check_extent_block(fs, blkno, b->data);
	if (r == 0 && le16(((struct o2_extent_block *)b->data)->h_list.tree_depth) != depth)
		r = o2_corrupt(fs, blkno, "extent block at depth %u where %u belongs",
			       le16(((struct o2_extent_block *)b->data)->h_list.tree_depth), depth);
	if (r < 0) {
		o2_brelse(fs, b);
		return r;
	}
	*ret = b;
	return 0;
}

/* Path to the leaf for key (rightmost if rightmost is set). */
static int descend(struct o2_fs *fs, const struct o2_tree_owner *o, uint32_t key, bool rightmost,
		   struct path *p)
{
	struct o2_extent_list *el = o->el;
	uint64_t owner = o->root->blkno;
	int r;

	p->n = 0;
	p->lv[0] = (struct level){ NULL, el, 0 };
	p->n = 1;
	while (le16(el->tree_depth) > 0) {
		unsigned depth = le16(el->tree_depth);
		int i = rightmost ? (int)le16(el->next_free_rec) - 1 : find_le(el, key);
		struct o2_buf *b;

		if (le16(el->next_free_rec) == 0) {
			path_release(fs, p);
			return o2_corrupt(fs, owner, "interior extent list is empty");
		}
		if (i < 0)
			i = 0;
		if (p->n > MAX_DEPTH) {
			path_release(fs, p);
			return o2_corrupt(fs, owner, "extent tree deeper than %u", MAX_DEPTH);
		}
		p->lv[p->n - 1].idx = i;
		r = read_eb(fs, owner, le64(el->recs[i].blkno), depth - 1, &b);
		if (r < 0) {
			path_release(fs, p);
			return r;
		}
		owner = b->blkno;
		el = &((struct o2_extent_block *)b->data)->h_list;
		p->lv[p->n++] = (struct level){ b, el, 0 };
	}
	return 0;
}

/* Log every block on the path (and the root) before changing it. */
static int path_journal(struct o2_trans *t, const struct o2_tree_owner *o, struct path *p)
{
	int r = o2_trans_add(t, o->root);

	for (int i = 1; i < p->n && r == 0; i++)
		r = o2_trans_add(t, p->lv[i].buf);
	return r;
}

/*
 * Recompute the interior records on the path, bottom up.  An interior record
 * starts where its subtree's first extent does, except along the leftmost
 * path: there every interior level starts at cluster 0 (as the kernel and
 * libocfs2 expect when they look up a position in a leading hole).
 */
static void path_fixup(struct path *p)
{
	bool leftmost = true;

	for (int l = 0; l < p->n - 1; l++)
		leftmost &= p->lv[l].idx == 0;
	for (int l = p->n - 2; l >= 0; l--) {
		struct o2_extent_list *el = p->lv[l].el, *child = p->lv[l + 1].el;
		int i = p->lv[l].idx;
		unsigned n = le16(el->next_free_rec);

		if (!le16(child->next_free_rec))
			continue;
		uint32_t cpos = leftmost ? 0 : le32(child->recs[0].cpos);
		uint64_t end = i + 1 < (int)n ? le32(el->recs[i + 1].cpos) : list_end(child);

		el->recs[i].cpos = cpu_le32(cpos);
		el->recs[i].int_clusters = cpu_le32((uint32_t)(end - cpos));
		if (i > 0)
			el->recs[i - 1].int_clusters =
				cpu_le32(cpos - le32(el->recs[i - 1].cpos));
	}
}

static int new_eb(struct o2_trans *t, struct o2_fs *fs, unsigned depth, struct o2_buf **ret)
{
	struct o2_suballoc_res res;
	struct o2_buf *b;
	int r = o2_suballoc_new_block(t, fs, fs->sys.extent_alloc, O2_META_EXTENT, &res, &b);

	if (r < 0)
		return r;
	struct o2_extent_block *eb = (struct o2_extent_block *)b->data;

	memcpy(eb->h_signature, O2_SIG_EXTENT, sizeof(O2_SIG_EXTENT));
	eb->h_suballoc_slot = cpu_le16(res.slot);
	eb->h_suballoc_bit = cpu_le16(res.bit);
	eb->h_fs_generation = cpu_le32(fs->info.fs_generation);
	eb->h_blkno = cpu_le64(res.blkno);
	if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_DISCONTIG_BG))
		eb->h_suballoc_loc = cpu_le64(res.group);
	eb->h_list.tree_depth = cpu_le16((uint16_t)depth);
	eb->h_list.count = cpu_le16((uint16_t)o2_extent_recs_per_eb(fs->bs));
	*ret = b;
	return 0;
}

int o2_tree_free_eb(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *b)
{
	const struct o2_extent_block *eb = (const struct o2_extent_block *)b->data;

	/* extent blocks are only ever reused as extent blocks (journaled): no
	 * revoke; another slot's wait for its allocator's lock */
	return o2_suballoc_give_back(t, fs, O2_SYS_EXTENT_ALLOC, le16(eb->h_suballoc_slot),
				     le64(eb->h_suballoc_loc), le16(eb->h_suballoc_bit), b->blkno);
}

/* The rightmost leaf's block number, for the owner's last_eb. */
static int update_last_eb(struct o2_fs *fs, const struct o2_tree_owner *o)
{
	struct path p;
	int r;

	if (le16(o->el->tree_depth) == 0) {
		*o->last_eb = 0;
		return 0;
	}
	r = descend(fs, o, 0, true, &p);
	if (r < 0)
		return r;
	*o->last_eb = cpu_le64(p.lv[p.n - 1].buf->blkno);
	path_release(fs, &p);
	return 0;
}

/* Add a level: the root's records move into a new extent block. */
static int grow_root(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o)
{
	unsigned depth = le16(o->el->tree_depth), n = le16(o->el->next_free_rec);
	struct o2_buf *b;
	int r;

	if (depth + 1 > MAX_DEPTH)
		return o2_fail(fs, -EFBIG, "extent tree of block %llu would exceed depth %u",
			       (unsigned long long)o->root->blkno, MAX_DEPTH);
	if (n > o2_extent_recs_per_eb(fs->bs))
		return o2_corrupt(fs, o->root->blkno, "root extent list larger than a block's");
	r = o2_trans_add(t, o->root);
	if (r == 0)
		r = new_eb(t, fs, depth, &b);
	if (r < 0)
		return r;
	struct o2_extent_list *el = &((struct o2_extent_block *)b->data)->h_list;
	uint32_t cpos = 0; /* the leftmost interior record always starts at 0 */
	uint64_t end = list_end(o->el);

	memcpy(el->recs, o->el->recs, n * sizeof(struct o2_extent_rec));
	el->next_free_rec = cpu_le16((uint16_t)n);
	memset(o->el->recs, 0, n * sizeof(struct o2_extent_rec));
	o->el->tree_depth = cpu_le16((uint16_t)(depth + 1));
	o->el->next_free_rec = cpu_le16(1);
	o->el->recs[0].cpos = cpu_le32(cpos);
	o->el->recs[0].int_clusters = cpu_le32((uint32_t)(end - cpos));
	o->el->recs[0].blkno = cpu_le64(b->blkno);
	o2_brelse(fs, b);
	return 0;
}

/*
 * Split the node at level l of the path (its parent has room): move records
 * [h, n) into a new sibling inserted right after it.
 */
static int split_node(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o,
		      struct path *p, int l, bool at_end)
{
	struct o2_extent_list *el = p->lv[l].el, *pel = p->lv[l - 1].el;
	struct o2_extent_block *oeb = (struct o2_extent_block *)p->lv[l].buf->data;
	unsigned n = le16(el->next_free_rec), depth = le16(el->tree_depth);
	unsigned h = at_end ? n - 1 : n / 2, pi = (unsigned)p->lv[l - 1].idx;
	unsigned pn = le16(pel->next_free_rec);
	struct o2_buf *b;
	int r;

	r = o2_trans_add(t, p->lv[l].buf);
	if (r == 0)
		r = o2_trans_add(t, l - 1 > 0 ? p->lv[l - 1].buf : o->root);
	if (r == 0)
		r = new_eb(t, fs, depth, &b);
	if (r < 0)
		return r;
	struct o2_extent_block *neb = (struct o2_extent_block *)b->data;
	uint64_t old_end = (uint64_t)le32(pel->recs[pi].cpos) + le32(pel->recs[pi].int_clusters);

	memcpy(neb->h_list.recs, &el->recs[h], (n - h) * sizeof(struct o2_extent_rec));
	neb->h_list.next_free_rec = cpu_le16((uint16_t)(n - h));
	memset(&el->recs[h], 0, (n - h) * sizeof(struct o2_extent_rec));
	el->next_free_rec = cpu_le16((uint16_t)h);
	if (depth == 0) {
		neb->h_next_leaf_blk = oeb->h_next_leaf_blk;
		oeb->h_next_leaf_blk = cpu_le64(b->blkno);
	}
	/* the parent gets a record for the new node right after the old one */
	memmove(&pel->recs[pi + 2], &pel->recs[pi + 1], (pn - pi - 1) * sizeof(struct o2_extent_rec));
	uint32_t ncpos = le32(neb->h_list.recs[0].cpos);

	pel->recs[pi + 1].cpos = cpu_le32(ncpos);
	pel->recs[pi + 1].int_clusters = cpu_le32((uint32_t)(old_end - ncpos));
	pel->recs[pi + 1].blkno = cpu_le64(b->blkno);
	pel->recs[pi].int_clusters = cpu_le32(ncpos - le32(pel->recs[pi].cpos));
	pel->next_free_rec = cpu_le16((uint16_t)(pn + 1));
	o2_brelse(fs, b);
	return 0;
}

static bool contiguous(const struct o2_fs *fs, const struct o2_extent_rec *a, const struct o2_extent *b)
{
	uint32_t alen = le16(a->leaf_clusters);

	return le32(a->cpos) + alen == b->cpos && a->flags == b->flags &&
	       le64(a->blkno) + ((uint64_t)alen << fs->bpc_bits) == b->blkno &&
	       alen + b->clusters <= 0xffff;
}

int o2_tree_meta_need(struct o2_fs *fs, const struct o2_tree_owner *o, uint32_t cpos,
		      unsigned nrecs, uint32_t *ret)
{
	struct path p;
	int r = descend(fs, o, cpos, false, &p);

	if (r < 0)
		return r;
	const struct o2_extent_list *leaf = p.lv[p.n - 1].el;
	unsigned n = le16(leaf->next_free_rec), count = le16(leaf->count);

	/* a merge with a neighbour would take nothing, but room is what is sure */
	*ret = n + nrecs <= count ? 0 : nrecs * (uint32_t)(p.n + 1);
	path_release(fs, &p);
	return 0;
}

int o2_tree_insert(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o,
		   const struct o2_extent *ext)
{
	struct path p;
	int r;

	if (!ext->clusters || ext->clusters > 0xffff || !ext->blkno)
		return o2_fail(fs, -EINVAL, "bad extent to insert (%u clusters at block %llu)",
			       ext->clusters, (unsigned long long)ext->blkno);
	for (int rounds = 0;; rounds++) {
		if (rounds > 4 * MAX_DEPTH + 4)
			return o2_corrupt(fs, o->root->blkno, "extent insert does not converge");
		r = descend(fs, o, ext->cpos, false, &p);
		if (r < 0)
			return r;
		struct o2_extent_list *leaf = p.lv[p.n - 1].el;
		unsigned n = le16(leaf->next_free_rec), count = le16(leaf->count);
		int i = find_le(leaf, ext->cpos);

		if (i >= 0 && le32(leaf->recs[i].cpos) + le16(leaf->recs[i].leaf_clusters) > ext->cpos) {
			path_release(fs, &p);
			return o2_corrupt(fs, o->root->blkno, "extent at cluster %u overlaps one at %u",
					  ext->cpos, le32(leaf->recs[i].cpos));
		}
		if (i + 1 < (int)n && ext->cpos + ext->clusters > le32(leaf->recs[i + 1].cpos)) {
			path_release(fs, &p);
			return o2_corrupt(fs, o->root->blkno, "extent at cluster %u overlaps one at %u",
					  ext->cpos, le32(leaf->recs[i + 1].cpos));
		}
		bool merge_left = !o->no_merge && i >= 0 && contiguous(fs, &leaf->recs[i], ext);
		struct o2_extent_rec *right = i + 1 < (int)n ? &leaf->recs[i + 1] : NULL;
		bool merge_right = !o->no_merge && !merge_left && right && right->flags == ext->flags &&
				   ext->cpos + ext->clusters == le32(right->cpos) &&
				   ext->blkno + ((uint64_t)ext->clusters << fs->bpc_bits) == le64(right->blkno) &&
				   le16(right->leaf_clusters) + ext->clusters <= 0xffff;

		if (merge_left || merge_right || n < count) {
			r = path_journal(t, o, &p);
			if (r == 0) {
				if (merge_left) {
					leaf->recs[i].leaf_clusters =
						cpu_le16((uint16_t)(le16(leaf->recs[i].leaf_clusters) + ext->clusters));
				} else if (merge_right) {
					right->cpos = cpu_le32(ext->cpos);
					right->blkno = cpu_le64(ext->blkno);
					right->leaf_clusters =
						cpu_le16((uint16_t)(le16(right->leaf_clusters) + ext->clusters));
				} else {
					memmove(&leaf->recs[i + 2], &leaf->recs[i + 1],
						(n - (unsigned)(i + 1)) * sizeof(struct o2_extent_rec));
					memset(&leaf->recs[i + 1], 0, sizeof(struct o2_extent_rec));
					leaf->recs[i + 1].cpos = cpu_le32(ext->cpos);
					leaf->recs[i + 1].leaf_clusters = cpu_le16((uint16_t)ext->clusters);
					leaf->recs[i + 1].flags = ext->flags;
					leaf->recs[i + 1].blkno = cpu_le64(ext->blkno);
					leaf->next_free_rec = cpu_le16((uint16_t)(n + 1));
				}
				path_fixup(&p);
			}
			path_release(fs, &p);
			return r < 0 ? r : update_last_eb(fs, o);
		}
		/* no room: split the topmost full node under a node with room */
		int l = p.n - 1;

		while (l > 0 && le16(p.lv[l - 1].el->next_free_rec) == le16(p.lv[l - 1].el->count))
			l--;
		if (l == 0) {
			path_release(fs, &p);
			r = grow_root(t, fs, o);
		} else {
			bool at_end = (unsigned)(i + 1) == n;

			for (int k = 0; k < l - 1 && at_end; k++)
				at_end = p.lv[k].idx + 1 == (int)le16(p.lv[k].el->next_free_rec);
			r = split_node(t, fs, o, &p, l, at_end);
			path_release(fs, &p);
		}
		if (r < 0)
			return r;
	}
}

/*
 * After records went away: pull a lone child back into the root while it
 * fits, then point last_eb at the rightmost leaf.
 */
static int shrink_root(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o)
{
	int r = 0;

	while (le16(o->el->tree_depth) > 0 && le16(o->el->next_free_rec) == 1) {
		struct o2_buf *b;
		unsigned depth = le16(o->el->tree_depth);

		r = read_eb(fs, o->root->blkno, le64(o->el->recs[0].blkno), depth - 1, &b);
		if (r < 0)
			return r;
		struct o2_extent_list *cel = &((struct o2_extent_block *)b->data)->h_list;
		unsigned cn = le16(cel->next_free_rec);

		if (cn > le16(o->el->count)) {
			o2_brelse(fs, b);
			break;
		}
		r = o2_trans_add(t, o->root);
		if (r == 0) {
			memcpy(o->el->recs, cel->recs, cn * sizeof(struct o2_extent_rec));
			o->el->next_free_rec = cpu_le16((uint16_t)cn);
			o->el->tree_depth = cpu_le16((uint16_t)(depth - 1));
			r = o2_tree_free_eb(t, fs, b);
		}
		o2_brelse(fs, b);
		if (r < 0)
			return r;
	}
	return update_last_eb(fs, o);
}

/*
 * Remove everything at or past cluster new_end, calling free_fn for each
 * cluster run dropped.  Stops after about max_recs records and returns 1
 * if more remains (the caller starts a new transaction and calls again).
 */
int o2_tree_truncate(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o,
		     uint32_t new_end, unsigned max_recs, o2_tree_free_fn free_fn, void *arg)
{
	struct path p;
	int r = 0;

	for (unsigned done = 0;; done++) {
		if (done >= max_recs)
			return 1;
		r = descend(fs, o, 0, true, &p);
		if (r < 0)
			return r;
		int l = p.n - 1;
		struct o2_extent_list *leaf = p.lv[l].el;
		unsigned n = le16(leaf->next_free_rec);

		if (!n) {
			path_release(fs, &p);
			break;
		}
		struct o2_extent_rec *rec = &leaf->recs[n - 1];
		uint32_t cpos = le32(rec->cpos), len = le16(rec->leaf_clusters);

		if (cpos + len <= new_end) {
			path_release(fs, &p);
			break;
		}
		r = path_journal(t, o, &p);
		if (r < 0)
			goto out;
		uint32_t keep = cpos >= new_end ? 0 : new_end - cpos;
		uint64_t free_blk = le64(rec->blkno) + ((uint64_t)keep << fs->bpc_bits);

		r = free_fn(t, fs, free_blk, len - keep, rec->flags, arg);
		if (r < 0)
			goto out;
		if (keep) {
			rec->leaf_clusters = cpu_le16((uint16_t)keep);
			path_fixup(&p);
			path_release(fs, &p);
			break;
		}
		memset(rec, 0, sizeof(*rec));
		leaf->next_free_rec = cpu_le16((uint16_t)(n - 1));
		/* drop extent blocks that emptied, bottom up */
		while (l > 0 && le16(p.lv[l].el->next_free_rec) == 0) {
			struct o2_extent_list *pel = p.lv[l - 1].el;
			unsigned pn = le16(pel->next_free_rec);

			r = o2_tree_free_eb(t, fs, p.lv[l].buf);
			if (r < 0)
				goto out;
			memset(&pel->recs[pn - 1], 0, sizeof(struct o2_extent_rec));
			pel->next_free_rec = cpu_le16((uint16_t)(pn - 1));
			l--;
		}
		if (l == 0 && le16(o->el->next_free_rec) == 0)
			o->el->tree_depth = 0; /* everything gone */
		/* the new rightmost path: fix its interior records */
		path_release(fs, &p);
		r = descend(fs, o, 0, true, &p);
		if (r < 0)
			return r;
		r = path_journal(t, o, &p);
		if (r == 0) {
			path_fixup(&p);
			if (p.n > 1)
				((struct o2_extent_block *)p.lv[p.n - 1].buf->data)->h_next_leaf_blk = 0;
		}
		path_release(fs, &p);
		if (r < 0)
			return r;
	}
	return shrink_root(t, fs, o);
out:
	path_release(fs, &p);
	return r;
}

/*
 * A leaf emptied by a punch (not the root): free it, and its parents that
 * empty with it, and take their records out of the levels above.  Returns
 * the level whose list lost a record (0: the root), with p released.
 */
static int drop_empty_leaf(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o,
			   struct path *p, uint64_t *ret_next_leaf)
{
	int l = p->n - 1, r = 0;

	*ret_next_leaf = le64(((struct o2_extent_block *)p->lv[l].buf->data)->h_next_leaf_blk);
	while (l > 0 && le16(p->lv[l].el->next_free_rec) == 0) {
		struct o2_extent_list *pel = p->lv[l - 1].el;
		unsigned pn = le16(pel->next_free_rec), pi = (unsigned)p->lv[l - 1].idx;

		r = o2_tree_free_eb(t, fs, p->lv[l].buf);
		if (r < 0)
			break;
		memmove(&pel->recs[pi], &pel->recs[pi + 1], (pn - pi - 1) * sizeof(struct o2_extent_rec));
		memset(&pel->recs[pn - 1], 0, sizeof(struct o2_extent_rec));
		pel->next_free_rec = cpu_le16((uint16_t)(pn - 1));
		l--;
	}
	if (r == 0 && l == 0 && le16(o->el->next_free_rec) == 0)
		o->el->tree_depth = 0; /* nothing left */
	path_release(fs, p);
	return r;
}

/* Recompute the interior records on the path to key (and set its leaf's next-leaf link). */
static int fix_path(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o, uint32_t key,
		    const uint64_t *next_leaf)
{
	struct path p;
	int r = descend(fs, o, key, false, &p);

	if (r < 0)
		return r;
	r = path_journal(t, o, &p);
	if (r == 0) {
		path_fixup(&p);
		if (next_leaf && p.n > 1)
			((struct o2_extent_block *)p.lv[p.n - 1].buf->data)->h_next_leaf_blk = cpu_le64(*next_leaf);
	}
	path_release(fs, &p);
	return r;
}

/*
 * Remove clusters [c0, c1), right to left: whole records go, records
 * reaching across an end are cut, and one reaching across both is split in
 * two.  A leaf that empties goes with its record in the parent, and the
 * paths on both sides of the gap are fixed.  Stops after about
 * max_recs records and returns 1 if more remains.
 */
int o2_tree_punch(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o, uint32_t c0,
		  uint32_t c1, unsigned max_recs, o2_tree_free_fn free_fn, void *arg)
{
	struct path p;
	int r = 0;

	for (unsigned done = 0; c0 < c1; done++) {
		if (done >= max_recs)
			return 1;
		r = descend(fs, o, c1 - 1, false, &p);
		if (r < 0)
			return r;
		struct o2_extent_list *leaf = p.lv[p.n - 1].el;
		int i = find_le(leaf, c1 - 1);

		if (i < 0 || le32(leaf->recs[i].cpos) + (uint64_t)le16(leaf->recs[i].leaf_clusters) <= c0) {
			path_release(fs, &p);
			break; /* nothing mapped in what is left of the range */
		}
		struct o2_extent_rec *rec = &leaf->recs[i];
		uint32_t rc = le32(rec->cpos), re = rc + le16(rec->leaf_clusters);
		uint32_t from = rc > c0 ? rc : c0, to = re < c1 ? re : c1;
		uint64_t rblk = le64(rec->blkno);
		uint8_t flags = rec->flags;

		r = path_journal(t, o, &p);
		if (r == 0)
			r = free_fn(t, fs, rblk + ((uint64_t)(from - rc) << fs->bpc_bits), to - from, flags, arg);
		if (r < 0) {
			path_release(fs, &p);
			return r;
		}
		if (from > rc && to < re) {
			/* across both ends: keep the head here, the tail goes in anew */
			struct o2_extent tail = { to, re - to, rblk + ((uint64_t)(to - rc) << fs->bpc_bits), flags };

			rec->leaf_clusters = cpu_le16((uint16_t)(from - rc));
			path_fixup(&p);
			path_release(fs, &p);
			r = o2_tree_insert(t, fs, o, &tail);
			if (r < 0)
				return r;
			break;
		}
		if (from > rc) {
			/* the record's tail: nothing to its left is in the range */
			rec->leaf_clusters = cpu_le16((uint16_t)(from - rc));
			path_fixup(&p);
			path_release(fs, &p);
			break;
		}
		c1 = from;
		if (to < re) {
			/* the record's head */
			rec->cpos = cpu_le32(to);
			rec->blkno = cpu_le64(rblk + ((uint64_t)(to - rc) << fs->bpc_bits));
			rec->leaf_clusters = cpu_le16((uint16_t)(re - to));
			path_fixup(&p);
			path_release(fs, &p);
			continue;
		}
		/* the whole record */
		unsigned n = le16(leaf->next_free_rec);
		bool leftmost = true;

		for (int l = 0; l < p.n - 1; l++)
			leftmost &= p.lv[l].idx == 0;
		memmove(&leaf->recs[i], &leaf->recs[i + 1], (n - (unsigned)i - 1) * sizeof(struct o2_extent_rec));
		memset(&leaf->recs[n - 1], 0, sizeof(struct o2_extent_rec));
		leaf->next_free_rec = cpu_le16((uint16_t)(n - 1));
		if (n > 1 || p.n == 1) {
			path_fixup(&p);
			path_release(fs, &p);
			continue;
		}
		uint64_t next_leaf;

		r = drop_empty_leaf(t, fs, o, &p, &next_leaf);
		if (r < 0)
			return r;
		if (!le16(o->el->next_free_rec))
			continue;
		/*
		 * Fix the paths on both sides of the gap: the one left of it (the
		 * leftmost path when none is), whose leaf takes over the link to
		 * the next leaf; and the one right of it, whose subtrees may now
		 * start later than their records in the levels above say.
		 */
		r = fix_path(t, fs, o, rc ? rc - 1 : 0, leftmost ? NULL : &next_leaf);
		if (r == 0)
			r = fix_path(t, fs, o, rc, NULL);
		if (r < 0)
			return r;
	}
	return shrink_root(t, fs, o);
}

/*
 * Give [cpos, cpos+len), inside one leaf record, the flags (rec | set) &
 * ~clear, splitting the record into up to three (the parts outside keep
 * theirs).  must: flags the record has to have.
 */
static int change_flags(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o,
			uint32_t cpos, uint32_t len, uint8_t must, uint8_t set, uint8_t clear)
{
	struct path p;
	int r = descend(fs, o, cpos, false, &p);

	if (r < 0)
		return r;
	struct o2_extent_list *leaf = p.lv[p.n - 1].el;
	int i = find_le(leaf, cpos);

	if (i < 0 || (leaf->recs[i].flags & must) != must ||
	    cpos + len > le32(leaf->recs[i].cpos) + le16(leaf->recs[i].leaf_clusters)) {
		path_release(fs, &p);
		return o2_corrupt(fs, o->root->blkno, "no extent%s covers clusters %u+%u",
				  must & O2_EXT_UNWRITTEN ? " marked unwritten" :
				  must ? " marked shared" : "", cpos, len);
	}
	struct o2_extent_rec *rec = &leaf->recs[i];
	uint32_t rcpos = le32(rec->cpos), rlen = le16(rec->leaf_clusters);
	uint64_t rblk = le64(rec->blkno);
	uint8_t rflags = rec->flags;
	struct o2_extent mid = { cpos, len, rblk + ((uint64_t)(cpos - rcpos) << fs->bpc_bits),
				 (uint8_t)((rflags | set) & ~clear) };
	struct o2_extent tail = { cpos + len, rcpos + rlen - (cpos + len),
				  rblk + ((uint64_t)(cpos + len - rcpos) << fs->bpc_bits), rflags };

	r = path_journal(t, o, &p);
	if (r < 0)
		goto out;
	if (cpos == rcpos) {
		/* the record becomes the middle part */
		rec->leaf_clusters = cpu_le16((uint16_t)len);
		rec->flags = mid.flags;
		path_fixup(&p);
		path_release(fs, &p);
		return tail.clusters ? o2_tree_insert(t, fs, o, &tail) : 0;
	}
	rec->leaf_clusters = cpu_le16((uint16_t)(cpos - rcpos));
	path_fixup(&p);
	path_release(fs, &p);
	r = o2_tree_insert(t, fs, o, &mid);
	if (r == 0 && tail.clusters)
		r = o2_tree_insert(t, fs, o, &tail);
	return r;
out:
	path_release(fs, &p);
	return r;
}

int o2_tree_clear_flag(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o,
		       uint32_t cpos, uint32_t len, uint8_t flag)
{
	return change_flags(t, fs, o, cpos, len, flag, 0, flag);
}

int o2_tree_set_flag(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o,
		     uint32_t cpos, uint32_t len, uint8_t flag)
{
	return change_flags(t, fs, o, cpos, len, 0, flag, 0);
}

int o2_tree_mark_written(struct o2_trans *t, struct o2_fs *fs, const struct o2_tree_owner *o,
			 uint32_t cpos, uint32_t len)
{
	return o2_tree_clear_flag(t, fs, o, cpos, len, O2_EXT_UNWRITTEN);
}
