/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Indexed directories, write side.
 *
 * How it works.  A directory that leaves its inode on a volume with
 * indexed-dirs gets an index at once, as the kernel does: a dx_root block
 * (from the extent allocator) holding the hash of every entry, "." and ".."
 * included, inline while they fit.  New names go into the index directly:
 * into the inline list, or into the dx_leaf that the placement rule names
 * (o2_dx_leaf_for_hash).  When there is no room, the whole index is built
 * again with twice the leaf clusters: entries sorted by major hash are cut
 * into equal runs, each run gets a cluster whose cpos is the run's first
 * hash (the first is 0), and each entry goes to block minor mod
 * blocks-per-cluster of it.  The new leaves are written straight to their
 * home blocks - nothing points at them until the transaction that switches
 * the root commits - and the old leaves are freed (and revoked) in that
 * transaction.  Each directory block's trailer records its largest hole,
 * and the blocks that can take a new entry form the free list headed by
 * dr_free_blk.
 */
#include <stdlib.h>
#include <sys/stat.h>

#include "alloc.h"
#include "dir.h"
#include "dx_write.h"
#include "error.h"
#include "inode_write.h"
#include "journal.h"
#include "meta.h"
#include "reserve.h"
#include "write.h"

#define MIN_HOLE O2_DIR_REC_LEN(1)

struct dx_ent {
	uint32_t major, minor;
	uint64_t blk;
};

static struct o2_dx_root_block *dxroot(struct o2_buf *b)
{
	return (struct o2_dx_root_block *)b->data;
}

static struct o2_dir_trailer *trailer(const struct o2_fs *fs, uint8_t *block)
{
	return (struct o2_dir_trailer *)(block + fs->bs - sizeof(struct o2_dir_trailer));
}

static void dx_owner(struct o2_buf *rb, struct o2_tree_owner *o)
{
	struct o2_dx_root_block *dr = dxroot(rb);

	o->root = rb;
	o->el = &dr->dr_list;
	o->last_eb = (o2le64 *)(void *)(rb->data + offsetof(struct o2_dx_root_block, dr_last_eb_blk));
	o->no_merge = false;
}

/* Largest hole in a directory block a new entry could use. */
static unsigned largest_hole(const struct o2_fs *fs, const uint8_t *block)
{
	unsigned size = fs->bs - sizeof(struct o2_dir_trailer), best = 0;

	for (unsigned off = 0; off + O2_DIR_MEMBER_LEN <= size;) {
		const struct o2_dir_entry *de = (const struct o2_dir_entry *)(block + off);
		unsigned rl = le16(de->rec_len), hole;

		if (rl < O2_DIR_REC_LEN(1) || rl > size - off)
			break;
		hole = le64(de->inode) ? rl - O2_DIR_REC_LEN(de->name_len) : rl;
		if (hole > best)
			best = hole;
		off += rl;
	}
	return best >= MIN_HOLE ? best : 0;
}

int o2_dx_block_changed(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib, struct o2_buf *b)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	struct o2_buf *rb;
	int r;

	if (!(le16(di->i_dyn_features) & O2_DYN_INDEXED_DIR))
		return 0;
	struct o2_dir_trailer *tr = trailer(fs, b->data);
	bool was_on = le16(tr->db_free_rec_len) >= MIN_HOLE;
	unsigned hole = largest_hole(fs, b->data);
	bool now_on = hole >= MIN_HOLE;

	r = o2_trans_add(t, b);
	if (r < 0)
		return r;
	tr->db_free_rec_len = cpu_le16((uint16_t)hole);
	if (was_on == now_on)
		return 0;
	r = o2_bread(fs, le64(di->i_dx_root), O2_META_DX_ROOT, &rb);
	if (r < 0)
		return r;
	r = o2_trans_add(t, rb);
	if (r < 0)
		goto out;
	struct o2_dx_root_block *dr = dxroot(rb);

	if (now_on) {
		tr->db_free_next = dr->dr_free_blk;
		dr->dr_free_blk = cpu_le64(b->blkno);
		goto out;
	}
	/* unlink: find the block that points at b */
	if (le64(dr->dr_free_blk) == b->blkno) {
		dr->dr_free_blk = tr->db_free_next;
	} else {
		uint64_t cur = le64(dr->dr_free_blk);

		for (unsigned hops = 0; cur && r == 0; hops++) {
			struct o2_buf *cb;

			if (hops > (1u << 24)) {
				r = o2_corrupt(fs, rb->blkno, "directory free list loops");
				break;
			}
			r = o2_bread(fs, cur, O2_META_DIR_BLOCK, &cb);
			if (r < 0)
				break;
			struct o2_dir_trailer *ct = trailer(fs, cb->data);
			uint64_t next = le64(ct->db_free_next);

			if (next == b->blkno) {
				r = o2_trans_add(t, cb);
				if (r == 0)
					ct->db_free_next = tr->db_free_next;
				o2_brelse(fs, cb);
				break;
			}
			o2_brelse(fs, cb);
			cur = next;
		}
	}
	tr->db_free_next = 0;
out:
	o2_brelse(fs, rb);
	return r;
}

/* ---- collecting entries ---- */

struct collect {
	struct o2_fs *fs;
	struct dx_ent *v;
	size_t n, cap;
};

static int collect_ent(const struct o2_dirent *de, void *arg)
{
	struct collect *c = arg;

	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 256;
		struct dx_ent *nv = o2_realloc(c->v, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		c->v = nv;
		c->cap = ncap;
	}
	struct dx_ent *e = &c->v[c->n++];

	o2_dx_hash(c->fs, de->name, de->name_len, &e->major, &e->minor);
	e->blk = de->dirent_blk;
	return 0;
}

static int cmp_ent(const void *a, const void *b)
{
	const struct dx_ent *x = a, *y = b;

	if (x->major != y->major)
		return x->major < y->major ? -1 : 1;
	if (x->minor != y->minor)
		return x->minor < y->minor ? -1 : 1;
	return 0;
}

/* The directory's entries with their hashes, sorted (read through the cache). */
static int collect_all(struct o2_fs *fs, uint64_t dir, struct collect *c)
{
	struct o2_inode *d;
	int r = o2_inode_get(fs, dir, &d);

	if (r < 0)
		return r;
	r = o2_dir_iterate(fs, d, collect_ent, c);
	o2_inode_unref(d);
	if (r > 0)
		r = -EIO;
	if (r == 0)
		qsort(c->v, c->n, sizeof(*c->v), cmp_ent);
	return r;
}

static void put_dx(struct o2_dx_entry *de, const struct dx_ent *e)
{
	de->dx_major_hash = cpu_le32(e->major);
	de->dx_minor_hash = cpu_le32(e->minor);
	de->dx_dirent_blk = cpu_le64(e->blk);
}

/* ---- building ---- */

static int free_leaves(struct o2_trans *t, struct o2_fs *fs, uint64_t blkno, uint32_t clusters,
		       uint8_t flags, void *arg)
{
	for (uint64_t b = 0; b < ((uint64_t)clusters << fs->bpc_bits); b++) {
		int r = o2_trans_revoke(t, blkno + b);

		if (r < 0)
			return r;
	}
	return o2_clusters_free(t, fs, (uint32_t)(blkno >> fs->bpc_bits), clusters);
}

/*
 * Lay the sorted entries out over k leaf clusters.  Returns 1 if some leaf
 * would overflow (the caller tries more clusters).
 */
static int plan(const struct o2_fs *fs, const struct dx_ent *v, size_t n, unsigned k,
		uint32_t *cpos, unsigned *fill)
{
	unsigned bpc = 1u << fs->bpc_bits, cap = o2_dx_entries_per_leaf(fs->bs);
	size_t per = (n + k - 1) / k, i = 0;

	memset(fill, 0, (size_t)k * bpc * sizeof(*fill));
	for (unsigned c = 0; c < k; c++) {
		size_t end = c + 1 == k ? n : i + per;

		/* equal hashes stay in one cluster */
		while (end < n && end > 0 && v[end].major == v[end - 1].major)
			end++;
		if (end > n)
			end = n;
		cpos[c] = c == 0 ? 0 : (i < n ? v[i].major : cpos[c - 1] + 1);
		if (c > 0 && cpos[c] <= cpos[c - 1])
			return 1;
		for (; i < end; i++) {
			unsigned b = c * bpc + (v[i].minor & (bpc - 1));

			if (++fill[b] > cap)
				return 1;
		}
	}
	return i == n ? 0 : 1;
}

/* (Re)build the whole index of a block directory in t. */
static int rebuild(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib, unsigned min_clusters)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	struct collect c = { .fs = fs };
	struct o2_buf *rb = NULL;
	uint32_t *cpos = NULL;
	unsigned *fill = NULL, k = 0;
	int r;

	r = collect_all(fs, dib->blkno, &c);
	if (r < 0)
		goto out;
	r = o2_trans_add(t, dib);
	if (r < 0)
		goto out;
	if (le64(di->i_dx_root)) {
		r = o2_bread(fs, le64(di->i_dx_root), O2_META_DX_ROOT, &rb);
		if (r < 0)
			goto out;
		r = o2_trans_add(t, rb);
		if (r < 0)
			goto out;
		/* drop the old leaves */
		if (!(dxroot(rb)->dr_flags & O2_DX_INLINE)) {
			struct o2_tree_owner o;

			dx_owner(rb, &o);
			r = o2_tree_truncate(t, fs, &o, 0, UINT32_MAX, free_leaves, NULL);
			if (r < 0)
				goto out;
		}
	} else {
		struct o2_suballoc_res res;

		r = o2_suballoc_new_block(t, fs, fs->sys.extent_alloc, O2_META_DX_ROOT, &res, &rb);
		if (r < 0)
			goto out;
		struct o2_dx_root_block *dr = dxroot(rb);

		memcpy(dr->dr_signature, O2_SIG_DXROOT, sizeof(O2_SIG_DXROOT));
		dr->dr_suballoc_slot = cpu_le16(res.slot);
		dr->dr_suballoc_bit = cpu_le16(res.bit);
		dr->dr_fs_generation = cpu_le32(fs->info.fs_generation);
		dr->dr_blkno = cpu_le64(res.blkno);
		dr->dr_dir_blkno = cpu_le64(dib->blkno);
		if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_DISCONTIG_BG))
			dr->dr_suballoc_loc = cpu_le64(res.group);
		di->i_dx_root = cpu_le64(res.blkno);
		di->i_dyn_features = cpu_le16(le16(di->i_dyn_features) | O2_DYN_INDEXED_DIR);
	}
	struct o2_dx_root_block *dr = dxroot(rb);
	unsigned per_root = o2_dx_entries_per_root(fs->bs);

	/* reset the root's list; keep the rest of the header */
	memset(&dr->dr_list, 0, fs->bs - offsetof(struct o2_dx_root_block, dr_list));
	dr->dr_num_entries = cpu_le32((uint32_t)c.n);
	dr->dr_clusters = 0;
	dr->dr_last_eb_blk = 0;
	if (c.n <= per_root && !min_clusters) {
		dr->dr_flags = O2_DX_INLINE;
		dr->dr_entries.de_count = cpu_le16((uint16_t)per_root);
		dr->dr_entries.de_num_used = cpu_le16((uint16_t)c.n);
		for (size_t i = 0; i < c.n; i++)
			put_dx(&dr->dr_entries.de_entries[i], &c.v[i]);
		goto out;
	}
	dr->dr_flags = 0;
	dr->dr_list.count = cpu_le16((uint16_t)o2_extent_recs_per_dx_root(fs->bs));
	/* aim for half-full leaves, then double until the layout fits */
	unsigned bpc = 1u << fs->bpc_bits, cap = o2_dx_entries_per_leaf(fs->bs);

	k = (unsigned)((c.n * 2 + (size_t)bpc * cap - 1) / ((size_t)bpc * cap));
	if (k < min_clusters)
		k = min_clusters;
	if (k < 1)
		k = 1;
	for (;; k *= 2) {
		free(cpos);
		free(fill);
		cpos = o2_malloc(k * sizeof(*cpos));
		fill = o2_malloc((size_t)k * bpc * sizeof(*fill));
		if (!cpos || !fill) {
			r = -ENOMEM;
			goto out;
		}
		if (plan(fs, c.v, c.n, k, cpos, fill) == 0)
			break;
		if (k > (1u << 20)) {
			r = o2_fail(fs, -ENOSPC, "directory %llu: its names hash too unevenly to index",
				    (unsigned long long)dib->blkno);
			goto out;
		}
	}
	/* leaves: written home directly, linked into the tree in t */
	size_t i = 0;
	struct o2_tree_owner o;

	dx_owner(rb, &o);
	for (unsigned cl = 0; cl < k && r == 0; cl++) {
		uint32_t start, got;

		r = o2_clusters_alloc(t, fs, 1, 1, &start, &got);
		if (r < 0)
			break;
		uint64_t blk0 = (uint64_t)start << fs->bpc_bits;

		for (unsigned b = 0; b < bpc && r == 0; b++) {
			struct o2_buf *lb;

			r = o2_bnew(fs, blk0 + b, O2_META_DX_LEAF, &lb);
			if (r < 0)
				break;
			struct o2_dx_leaf *dl = (struct o2_dx_leaf *)lb->data;

			memcpy(dl->dl_signature, O2_SIG_DXLEAF, sizeof(O2_SIG_DXLEAF));
			dl->dl_blkno = cpu_le64(blk0 + b);
			dl->dl_fs_generation = cpu_le32(fs->info.fs_generation);
			dl->dl_list.de_count = cpu_le16((uint16_t)cap);
			o2_brelse(fs, lb);
		}
		/* this cluster's entries */
		size_t end = i;

		while (end < c.n && (cl + 1 == k || c.v[end].major < cpos[cl + 1]))
			end++;
		for (; i < end && r == 0; i++) {
			struct o2_buf *lb;

			r = o2_bread(fs, blk0 + (c.v[i].minor & (bpc - 1)), O2_META_DX_LEAF, &lb);
			if (r < 0)
				break;
			struct o2_dx_leaf *dl = (struct o2_dx_leaf *)lb->data;
			unsigned u = le16(dl->dl_list.de_num_used);

			put_dx(&dl->dl_list.de_entries[u], &c.v[i]);
			dl->dl_list.de_num_used = cpu_le16((uint16_t)(u + 1));
			o2_brelse(fs, lb);
		}
		for (unsigned b = 0; b < bpc && r == 0; b++) {
			struct o2_buf *lb;

			r = o2_bread(fs, blk0 + b, O2_META_DX_LEAF, &lb);
			if (r == 0) {
				r = o2_write_meta_direct(fs, lb);
				o2_brelse(fs, lb);
			}
		}
		if (r == 0)
			r = o2_tree_insert(t, fs, &o, &(struct o2_extent){ cpos[cl], 1, blk0, 0 });
		dr->dr_clusters = cpu_le32(le32(dr->dr_clusters) + 1);
	}
out:
	o2_brelse(fs, rb);
	free(c.v);
	free(cpos);
	free(fill);
	return r;
}

/*
 * What rebuild(dib, min_clusters) would take with one more entry (hash
 * major/minor) than the directory holds: its leaf clusters (the old ones
 * go to the truncate log, not reusable before a commit), a root block if
 * it has none, and the extent blocks for more leaf records than the root
 * list holds.  Reads only.
 */
static int rebuild_need(struct o2_fs *fs, struct o2_buf *dib, unsigned min_clusters,
			uint32_t major, uint32_t minor, struct o2_resv *want)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	struct collect c = { .fs = fs };
	uint32_t *cpos = NULL;
	unsigned *fill = NULL, k;
	int r;

	if (!le64(di->i_dx_root))
		want->meta++;
	r = collect_all(fs, dib->blkno, &c);
	if (r == 0 && c.n == c.cap) {
		struct dx_ent *nv = o2_realloc(c.v, (c.cap + 1) * sizeof(*nv));

		if (!nv)
			r = -ENOMEM;
		else
			c.v = nv;
	}
	if (r < 0)
		goto out;
	c.v[c.n++] = (struct dx_ent){ major, minor, 0 };
	qsort(c.v, c.n, sizeof(*c.v), cmp_ent);
	if (c.n <= o2_dx_entries_per_root(fs->bs) && !min_clusters)
		goto out; /* an inline index */
	/* the same choice of k as rebuild's */
	unsigned bpc = 1u << fs->bpc_bits, cap = o2_dx_entries_per_leaf(fs->bs);

	k = (unsigned)((c.n * 2 + (size_t)bpc * cap - 1) / ((size_t)bpc * cap));
	if (k < min_clusters)
		k = min_clusters;
	if (k < 1)
		k = 1;
	for (;; k *= 2) {
		free(cpos);
		free(fill);
		cpos = o2_malloc(k * sizeof(*cpos));
		fill = o2_malloc((size_t)k * bpc * sizeof(*fill));
		if (!cpos || !fill) {
			r = -ENOMEM;
			goto out;
		}
		if (plan(fs, c.v, c.n, k, cpos, fill) == 0)
			break;
		if (k > (1u << 20)) {
			r = -ENOSPC; /* rebuild would refuse it too, before any change */
			goto out;
		}
	}
	want->clusters += k;
	uint32_t per_root = o2_extent_recs_per_dx_root(fs->bs), per_eb = o2_extent_recs_per_eb(fs->bs);

	if (k > per_root) /* leaves of records, interior blocks above them, a root level */
		want->meta += 2 * ((k + per_eb - 1) / per_eb) + O2_RESV_TREE_META(5);
out:
	free(c.v);
	free(cpos);
	free(fill);
	return r;
}

int o2_dx_insert_need(struct o2_fs *fs, struct o2_buf *dib, const char *name, size_t len,
		      struct o2_resv *want)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	struct o2_buf *rb, *lb;
	uint32_t major, minor;
	uint64_t leaf;
	int r;

	o2_dx_hash(fs, name, len, &major, &minor);
	if (!le64(di->i_dx_root))
		return rebuild_need(fs, dib, 0, major, minor, want);
	r = o2_bread(fs, le64(di->i_dx_root), O2_META_DX_ROOT, &rb);
	if (r < 0)
		return r;
	struct o2_dx_root_block *dr = dxroot(rb);
	unsigned clusters = le32(dr->dr_clusters);

	if (dr->dr_flags & O2_DX_INLINE) {
		bool room = le16(dr->dr_entries.de_num_used) < le16(dr->dr_entries.de_count);

		o2_brelse(fs, rb);
		return room ? 0 : rebuild_need(fs, dib, 0, major, minor, want);
	}
	r = o2_dx_leaf_for_hash(fs, rb->blkno, rb->data, major, minor, &leaf);
	o2_brelse(fs, rb);
	if (r == 0)
		r = o2_bread(fs, leaf, O2_META_DX_LEAF, &lb);
	if (r < 0)
		return r;
	const struct o2_dx_leaf *dl = (const struct o2_dx_leaf *)lb->data;
	bool room = le16(dl->dl_list.de_num_used) < le16(dl->dl_list.de_count);

	o2_brelse(fs, lb);
	return room ? 0 : rebuild_need(fs, dib, clusters * 2, major, minor, want);
}

int o2_dx_create(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	int r;

	r = rebuild(t, fs, dib, 0);
	if (r < 0)
		return r;
	/* every block's hole and the free list */
	uint64_t nblk = (le64(di->i_size) + fs->bs - 1) >> fs->bits;

	for (uint64_t i = 0; i < nblk && r == 0; i++) {
		struct o2_extent ext;
		struct o2_buf *b;

		r = o2_tree_map(fs, &(struct o2_tree_root){ dib->blkno, &di->id2.i_list,
							  le16(di->id2.i_list.count) },
				(uint32_t)(i >> fs->bpc_bits), &ext);
		if (r < 0)
			break;
		r = o2_bread(fs, ext.blkno + (i & ((1u << fs->bpc_bits) - 1)), O2_META_DIR_BLOCK, &b);
		if (r < 0)
			break;
		trailer(fs, b->data)->db_free_rec_len = 0;
		trailer(fs, b->data)->db_free_next = 0;
		r = o2_dx_block_changed(t, fs, dib, b);
		o2_brelse(fs, b);
	}
	return r;
}

int o2_dx_insert(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib, const char *name,
		 size_t len, uint64_t dirent_blk)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	struct dx_ent e = { .blk = dirent_blk };
	struct o2_buf *rb, *lb;
	int r;

	o2_dx_hash(fs, name, len, &e.major, &e.minor);
	r = o2_bread(fs, le64(di->i_dx_root), O2_META_DX_ROOT, &rb);
	if (r < 0)
		return r;
	struct o2_dx_root_block *dr = dxroot(rb);

	if (dr->dr_flags & O2_DX_INLINE) {
		unsigned u = le16(dr->dr_entries.de_num_used);

		if (u < le16(dr->dr_entries.de_count)) {
			r = o2_trans_add(t, rb);
			if (r == 0) {
				put_dx(&dr->dr_entries.de_entries[u], &e);
				dr->dr_entries.de_num_used = cpu_le16((uint16_t)(u + 1));
				dr->dr_num_entries = cpu_le32(le32(dr->dr_num_entries) + 1);
			}
			o2_brelse(fs, rb);
			return r;
		}
		o2_brelse(fs, rb);
		return rebuild(t, fs, dib, 0); /* the new entry is in its block already */
	}
	uint64_t leaf;

	r = o2_dx_leaf_for_hash(fs, rb->blkno, rb->data, e.major, e.minor, &leaf);
	if (r == 0)
		r = o2_bread(fs, leaf, O2_META_DX_LEAF, &lb);
	if (r < 0) {
		o2_brelse(fs, rb);
		return r;
	}
	struct o2_dx_leaf *dl = (struct o2_dx_leaf *)lb->data;
	unsigned u = le16(dl->dl_list.de_num_used);

	if (u < le16(dl->dl_list.de_count)) {
		r = o2_trans_add(t, lb);
		if (r == 0)
			r = o2_trans_add(t, rb);
		if (r == 0) {
			put_dx(&dl->dl_list.de_entries[u], &e);
			dl->dl_list.de_num_used = cpu_le16((uint16_t)(u + 1));
			dr->dr_num_entries = cpu_le32(le32(dr->dr_num_entries) + 1);
		}
		o2_brelse(fs, lb);
		o2_brelse(fs, rb);
		return r;
	}
	unsigned clusters = le32(dr->dr_clusters);

	o2_brelse(fs, lb);
	o2_brelse(fs, rb);
	return rebuild(t, fs, dib, clusters * 2);
}

static bool remove_from(struct o2_dx_entry_list *l, const struct dx_ent *e)
{
	unsigned u = le16(l->de_num_used);

	for (unsigned i = 0; i < u; i++) {
		struct o2_dx_entry *x = &l->de_entries[i];

		if (le32(x->dx_major_hash) == e->major && le32(x->dx_minor_hash) == e->minor &&
		    le64(x->dx_dirent_blk) == e->blk) {
			memmove(x, x + 1, (u - i - 1) * sizeof(*x));
			memset(&l->de_entries[u - 1], 0, sizeof(*x));
			l->de_num_used = cpu_le16((uint16_t)(u - 1));
			return true;
		}
	}
	return false;
}

int o2_dx_remove(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib, const char *name,
		 size_t len, uint64_t dirent_blk)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	struct dx_ent e = { .blk = dirent_blk };
	struct o2_buf *rb, *lb = NULL;
	int r;

	o2_dx_hash(fs, name, len, &e.major, &e.minor);
	r = o2_bread(fs, le64(di->i_dx_root), O2_META_DX_ROOT, &rb);
	if (r < 0)
		return r;
	struct o2_dx_root_block *dr = dxroot(rb);
	struct o2_dx_entry_list *l;

	r = o2_trans_add(t, rb);
	if (r < 0)
		goto out;
	if (dr->dr_flags & O2_DX_INLINE) {
		l = &dr->dr_entries;
	} else {
		uint64_t leaf;

		r = o2_dx_leaf_for_hash(fs, rb->blkno, rb->data, e.major, e.minor, &leaf);
		if (r == 0)
			r = o2_bread(fs, leaf, O2_META_DX_LEAF, &lb);
		if (r == 0)
			r = o2_trans_add(t, lb);
		if (r < 0)
			goto out;
		l = &((struct o2_dx_leaf *)lb->data)->dl_list;
	}
	if (!remove_from(l, &e)) {
		r = o2_corrupt(fs, rb->blkno, "entry %.*s is missing from the directory index",
			       (int)len, name);
		goto out;
	}
	dr->dr_num_entries = cpu_le32(le32(dr->dr_num_entries) - 1);
out:
	o2_brelse(fs, lb);
	o2_brelse(fs, rb);
	return r;
}

int o2_dx_destroy(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	struct o2_buf *rb;
	int r;

	if (!(le16(di->i_dyn_features) & O2_DYN_INDEXED_DIR))
		return 0;
	r = o2_bread(fs, le64(di->i_dx_root), O2_META_DX_ROOT, &rb);
	if (r < 0)
		return r;
	struct o2_dx_root_block *dr = dxroot(rb);

	if (!(dr->dr_flags & O2_DX_INLINE)) {
		struct o2_tree_owner o;

		r = o2_trans_add(t, rb);
		dx_owner(rb, &o);
		if (r == 0)
			r = o2_tree_truncate(t, fs, &o, 0, UINT32_MAX, free_leaves, NULL);
	}
	if (r == 0)
		r = o2_suballoc_give_back(t, fs, O2_SYS_EXTENT_ALLOC, le16(dr->dr_suballoc_slot),
					  le64(dr->dr_suballoc_loc), le16(dr->dr_suballoc_bit),
					  rb->blkno);
	o2_brelse(fs, rb);
	if (r == 0)
		r = o2_trans_add(t, dib);
	if (r == 0) {
		di->i_dx_root = 0;
		di->i_dyn_features = cpu_le16(le16(di->i_dyn_features) & ~O2_DYN_INDEXED_DIR);
	}
	return r;
}
