/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The extent B-tree, read side.  One implementation for every owner: the
 * owner hands over its root list (struct o2_tree_root).
 *
 * How it works: interior records cover [cpos, next record's cpos) and point
 * at an extent block one level down; leaf records map cpos..cpos+clusters to
 * physical blocks.  A lookup descends through the record with the largest
 * cpos <= the key.  Depth strictly decreases on the way down and is bounded,
 * so a damaged tree cannot make a lookup loop.
 */
#include <stdlib.h>

#include "error.h"
#include "internal.h"
#include "meta.h"

/* The deepest extent tree the kernel builds. */
#define O2_MAX_TREE_DEPTH 5

int o2_check_extent_block(struct o2_fs *fs, uint64_t blkno, const void *buf)
{
	const struct o2_extent_block *eb = buf;
	int r = o2_check_meta_head(fs, blkno, "extent block", eb->h_signature, O2_SIG_EXTENT,
				   le64(eb->h_blkno), le32(eb->h_fs_generation));

	if (r < 0)
		return r;
	return o2_check_extent_list(fs, blkno, &eb->h_list, o2_extent_recs_per_eb(fs->bs),
				    "extent block");
}

/* Read the child extent block of an interior record; it must sit one level down. */
static int read_child(struct o2_fs *fs, uint64_t parent, uint64_t blkno, unsigned want_depth,
		      uint8_t *buf, const struct o2_extent_list **ret_el)
{
	const struct o2_extent_block *eb = (const struct o2_extent_block *)buf;
	int r;

	if (blkno <= O2_SUPER_BLKNO || blkno >= fs->nblocks)
		return o2_corrupt(fs, parent, "extent record points at block %llu, outside the volume",
				  (unsigned long long)blkno);
	r = o2_read_meta(fs, blkno, O2_META_EXTENT, buf);
	if (r < 0)
		return r;
	r = o2_check_extent_block(fs, blkno, buf);
	if (r < 0)
		return r;
	if (le16(eb->h_list.tree_depth) != want_depth)
		return o2_corrupt(fs, blkno, "extent block at depth %u where %u belongs",
				  le16(eb->h_list.tree_depth), want_depth);
	if (le16(eb->h_list.next_free_rec) == 0)
		return o2_corrupt(fs, blkno, "extent block holds no records");
	*ret_el = &eb->h_list;
	return 0;
}

/* Index of the last used record with cpos <= key, or -1. */
static int find_le(const struct o2_extent_list *el, uint32_t key)
{
	int i;

	for (i = (int)le16(el->next_free_rec) - 1; i >= 0; i--)
		if (le32(el->recs[i].cpos) <= key)
			break;
	return i;
}

static uint32_t leaf_clusters(const struct o2_extent_rec *rec)
{
	return le16(rec->leaf_clusters);
}

static int check_leaf_rec(struct o2_fs *fs, uint64_t owner, const struct o2_extent_rec *rec)
{
	uint64_t blkno = le64(rec->blkno);
	uint64_t nblk = (uint64_t)leaf_clusters(rec) << fs->bpc_bits;

	if (nblk && (blkno >= fs->nblocks || nblk > fs->nblocks - blkno))
		return o2_corrupt(fs, owner, "extent at cluster %u maps blocks %llu..%llu, past the "
				  "end of the volume",
				  le32(rec->cpos), (unsigned long long)blkno,
				  (unsigned long long)(blkno + nblk - 1));
	if ((uint64_t)le32(rec->cpos) + leaf_clusters(rec) > (uint64_t)UINT32_MAX + 1)
		return o2_corrupt(fs, owner, "extent at cluster %u runs past the 32-bit cluster range",
				  le32(rec->cpos));
	return 0;
}

/*
 * Descend to the leaf whose range holds key.  On return *ret_el is the leaf
 * list (inside buf or the root) and *ret_end the first cpos past that
 * leaf's range (UINT32_MAX+1 for the rightmost).
 */
static int descend(struct o2_fs *fs, const struct o2_tree_root *root, uint32_t key, uint8_t *buf,
		   const struct o2_extent_list **ret_el, uint64_t *ret_owner, uint64_t *ret_end,
		   bool *ret_before_all)
{
	const struct o2_extent_list *el = root->el;
	uint64_t owner = root->owner_blkno, end = (uint64_t)UINT32_MAX + 1;
	int r;

	*ret_before_all = false;
	while (le16(el->tree_depth) > 0) {
		unsigned depth = le16(el->tree_depth);
		int i = find_le(el, key);

		if (i < 0) {
			/* key lies before every record: descend leftmost for the hole's end */
			if (le16(el->next_free_rec) == 0)
				break;
			*ret_before_all = true;
			i = 0;
		}
		if (i + 1 < (int)le16(el->next_free_rec))
			end = le32(el->recs[i + 1].cpos);
		uint64_t child = le64(el->recs[i].blkno);

		r = read_child(fs, owner, child, depth - 1, buf, &el);
		if (r < 0)
			return r;
		owner = child;
	}
	*ret_el = el;
	*ret_owner = owner;
	*ret_end = end;
	return 0;
}

int o2_tree_map(struct o2_fs *fs, const struct o2_tree_root *root, uint32_t cpos,
		struct o2_extent *ret)
{
	const struct o2_extent_list *el;
	uint64_t owner, end;
	bool before_all;
	uint8_t *buf = o2_malloc(fs->bs);
	int r;

	if (!buf)
		return -ENOMEM;
	r = descend(fs, root, cpos, buf, &el, &owner, &end, &before_all);
	if (r < 0)
		goto out;
	int n = (int)le16(el->next_free_rec);
	int i = find_le(el, cpos);

	if (le16(el->tree_depth) == 0 && i >= 0 && !before_all) {
		const struct o2_extent_rec *rec = &el->recs[i];
		uint32_t start = le32(rec->cpos), len = leaf_clusters(rec);

		r = check_leaf_rec(fs, owner, rec);
		if (r < 0)
			goto out;
		if (cpos < (uint64_t)start + len) {
			ret->cpos = cpos;
			ret->clusters = len - (cpos - start);
			ret->blkno = le64(rec->blkno) + ((uint64_t)(cpos - start) << fs->bpc_bits);
			ret->flags = rec->flags;
			if (ret->blkno == 0) {
				r = o2_corrupt(fs, owner, "extent at cluster %u maps to block 0", start);
				goto out;
			}
			goto out;
		}
	}
	/* a hole: it ends at the next record in this leaf, or the leaf's range end */
	uint64_t hole_end = end;

	if (i + 1 < n && le32(el->recs[i + 1].cpos) < hole_end)
		hole_end = le32(el->recs[i + 1].cpos);
	if (hole_end <= cpos)
		hole_end = (uint64_t)cpos + 1;
	ret->cpos = cpos;
	ret->clusters = hole_end - cpos > UINT32_MAX ? UINT32_MAX : (uint32_t)(hole_end - cpos);
	ret->blkno = 0;
	ret->flags = 0;
out:
	free(buf);
	return r;
}

int o2_tree_lookup_le(struct o2_fs *fs, const struct o2_tree_root *root, uint32_t key,
		      struct o2_extent *ret)
{
	const struct o2_extent_list *el;
	uint64_t owner, end;
	bool before_all;
	uint8_t *buf = o2_malloc(fs->bs);
	int r, i;

	if (!buf)
		return -ENOMEM;
	r = descend(fs, root, key, buf, &el, &owner, &end, &before_all);
	if (r < 0)
		goto out;
	i = find_le(el, key);
	if (before_all || i < 0 || le16(el->tree_depth) != 0) {
		r = o2_corrupt(fs, owner, "no extent record covers key 0x%x", key);
		goto out;
	}
	r = check_leaf_rec(fs, owner, &el->recs[i]);
	if (r < 0)
		goto out;
	ret->cpos = le32(el->recs[i].cpos);
	ret->clusters = leaf_clusters(&el->recs[i]);
	ret->blkno = le64(el->recs[i].blkno);
	ret->flags = el->recs[i].flags;
	if (ret->clusters == 0 || ret->blkno == 0)
		r = o2_corrupt(fs, owner, "empty extent record at key 0x%x", ret->cpos);
out:
	free(buf);
	return r;
}

static int walk_list(struct o2_fs *fs, uint64_t owner, const struct o2_extent_list *el,
		     o2_extent_fn fn, void *arg)
{
	unsigned depth = le16(el->tree_depth), n = le16(el->next_free_rec);
	uint64_t prev_end = 0;
	int r;

	for (unsigned i = 0; i < n; i++) {
		const struct o2_extent_rec *rec = &el->recs[i];
		uint32_t cpos = le32(rec->cpos);

		if (cpos < prev_end)
			return o2_corrupt(fs, owner, "extent record %u at cluster %u overlaps the one "
					  "before it", i, cpos);
		if (depth == 0) {
			struct o2_extent ext = { cpos, leaf_clusters(rec), le64(rec->blkno), rec->flags };

			if (ext.clusters == 0)
				continue; /* the kernel's transient empty leftmost record */
			r = check_leaf_rec(fs, owner, rec);
			if (r < 0)
				return r;
			if (ext.blkno == 0)
				return o2_corrupt(fs, owner, "extent at cluster %u maps to block 0",
						  cpos);
			prev_end = (uint64_t)cpos + ext.clusters;
			r = fn(&ext, 0, arg);
			if (r)
				return r;
			continue;
		}
		uint8_t *buf = o2_malloc(fs->bs);
		const struct o2_extent_list *child;
		uint64_t blkno = le64(rec->blkno);

		if (!buf)
			return -ENOMEM;
		r = read_child(fs, owner, blkno, depth - 1, buf, &child);
		if (r == 0)
			r = fn(NULL, blkno, arg);
		if (r == 0)
			r = walk_list(fs, blkno, child, fn, arg);
		free(buf);
		if (r)
			return r;
		prev_end = cpos;
	}
	return 0;
}

int o2_tree_walk(struct o2_fs *fs, const struct o2_tree_root *root, o2_extent_fn fn, void *arg)
{
	return walk_list(fs, root->owner_blkno, root->el, fn, arg);
}

int o2_check_extent_list(struct o2_fs *fs, uint64_t blkno, const struct o2_extent_list *el,
			 unsigned max_recs, const char *what)
{
	unsigned count = le16(el->count), next = le16(el->next_free_rec);
	unsigned depth = le16(el->tree_depth);

	if (count > max_recs)
		return o2_corrupt(fs, blkno, "%s extent list claims %u records, room for %u", what,
				  count, max_recs);
	if (next > count)
		return o2_corrupt(fs, blkno, "%s extent list uses %u of %u records", what, next,
				  count);
	if (depth > O2_MAX_TREE_DEPTH)
		return o2_corrupt(fs, blkno, "%s extent tree depth %u exceeds %u", what, depth,
				  O2_MAX_TREE_DEPTH);
	return 0;
}
