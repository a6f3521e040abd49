/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Extended attributes, write side: set or remove one attribute.
 *
 * Where an attribute goes is decided as the kernel decides it: in the
 * inode's own tail when it fits there, else in the inode's xattr block.
 * The tail is made on first use if the inode has the room (256 bytes,
 * s_xattr_inline_size, taken from the end of its extent list, inline data
 * or fast symlink text; never on 512-byte blocks); the block is made on
 * first use from the extent allocator, and freed again when it empties.
 * A value over 80 bytes lives in clusters of its own, one contiguous run
 * its value root maps; they are written before the transaction that points
 * at them ends, as file data is, so they are never journaled and never
 * need a revoke.  A changed value always gets new clusters and the old
 * ones go through the truncate log: one transaction changes everything.
 *
 * Each change rewrites the stores it touches whole: entries in their
 * order (a new one last, as the kernel appends), names and values packed
 * down from the store's end, and at least four zero bytes after the last
 * entry (fsck.ocfs2 counts entries up to a zero hash).
 *
 * A value a reflink shares (its extent marked refcounted) is let go through
 * the refcount tree when it changes or goes: copy on write, as for data.
 * A reflink's copy gets every attribute but the POSIX ACLs, its values in
 * clusters shared (o2_xattr_reflink).
 *
 * When neither store has room, the block becomes indexed, as the kernel
 * makes it: a tree of 4 KiB buckets keyed by name hash (make_indexed), a
 * full bucket split in two (bucket_split), each in a transaction of its
 * own that changes no attribute, before the change itself goes into its
 * bucket as into any store (entries kept sorted by hash there).
 *
 * A value the kernel left in a tree deeper than its root (fragmented free
 * space) is replaced or removed whole: its clusters (shared ones through
 * the refcount tree, up to DEEP_SHARED_MAX runs) and its extent blocks are
 * freed.  Not here: sharing such a value in a reflink (-EOPNOTSUPP, with a
 * message).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "blockcheck.h"
#include "data.h"
#include "error.h"
#include "inode_write.h"
#include "internal.h"
#include "journal.h"
#include "reserve.h"
#include "meta.h"
#include "write.h"

#define ENTRY_BYTES sizeof(struct o2_xattr_entry)
#define HEADER_BYTES offsetof(struct o2_xattr_header, xh_entries)
#define HEADER_GAP 4u /* zero bytes after the last entry */
#define INLINE_VALUE_MAX 80u
#define VALUE_ROOT_BYTES (sizeof(struct o2_xattr_value_root) + sizeof(struct o2_extent_rec))
#define INLINE_MIN 256u	  /* OCFS2_MIN_XATTR_INLINE_SIZE */
#define BLOCK_STORE_AT offsetof(struct o2_xattr_block, xb_attrs)
#define XATTR_LOCAL 0x80
#define XATTR_INDEXED 0x1
#define BUCKET_BYTES 4096u
#define SET_CREDITS O2_XATTR_SET_CREDITS

static size_t pad4(size_t n)
{
	return (n + 3) & ~(size_t)3;
}

/* One attribute as a store keeps it. */
struct xent {
	uint8_t type, name_len;
	bool local;
	uint64_t value_size;
	char name[O2_XATTR_NAME_MAX];
	uint8_t body[INLINE_VALUE_MAX]; /* the value if local, else its value root */
};

struct store {
	struct xent *e;
	unsigned n, max;
	size_t len; /* bytes the store spans; 0: the inode has none */
};

static size_t nv_bytes(const struct xent *x)
{
	return pad4(x->name_len) + (x->local ? pad4(x->value_size) : VALUE_ROOT_BYTES);
}

/* Bytes the store uses, leaving out entry skip (-1: none). */
static size_t used_bytes(const struct store *s, int skip)
{
	size_t u = HEADER_BYTES + HEADER_GAP;

	for (unsigned i = 0; i < s->n; i++)
		if ((int)i != skip)
			u += ENTRY_BYTES + nv_bytes(&s->e[i]);
	return u;
}

static uint32_t name_hash(const struct o2_fs *fs, const char *name, size_t len)
{
	return o2_xattr_name_hash(fs, name, len);
}

static int collect(const struct o2_xattr *x, void *arg)
{
	struct store *s = arg;
	struct xent *e;

	if (s->n == s->max)
		return -EUCLEAN; /* walk_store bounds the count by the store's room */
	e = &s->e[s->n++];
	e->type = x->type;
	e->name_len = x->name_len;
	e->local = x->local;
	e->value_size = x->value_size;
	memcpy(e->name, x->name, x->name_len);
	memcpy(e->body, x->local ? x->value : x->root, x->local ? x->value_size : VALUE_ROOT_BYTES);
	return 0;
}

static int load_store(struct o2_fs *fs, uint64_t blkno, const uint8_t *h, size_t len,
		      struct store *s)
{
	s->len = len;
	s->n = 0;
	s->max = (unsigned)(len / ENTRY_BYTES) + 1;
	s->e = o2_malloc((size_t)s->max * sizeof(*s->e));
	if (!s->e)
		return -ENOMEM;
	return o2_xattr_store_walk(fs, blkno, h, len, collect, s);
}

static void write_store(const struct o2_fs *fs, const struct store *s, uint8_t *h)
{
	struct o2_xattr_header *xh = (struct o2_xattr_header *)(void *)h;
	size_t at = s->len;

	memset(h, 0, s->len);
	xh->xh_count = cpu_le16((uint16_t)s->n);
	for (unsigned i = 0; i < s->n; i++) {
		const struct xent *x = &s->e[i];
		struct o2_xattr_entry *xe = &xh->xh_entries[i];

		at -= nv_bytes(x);
		xe->xe_name_hash = cpu_le32(name_hash(fs, x->name, x->name_len));
		xe->xe_name_offset = cpu_le16((uint16_t)at);
		xe->xe_name_len = x->name_len;
		xe->xe_type = (uint8_t)(x->type | (x->local ? XATTR_LOCAL : 0));
		xe->xe_value_size = cpu_le64(x->value_size);
		memcpy(h + at, x->name, x->name_len);
		memcpy(h + at + pad4(x->name_len), x->body,
		       x->local ? (size_t)x->value_size : VALUE_ROOT_BYTES);
	}
}

static int find(const struct store *s, unsigned type, const char *name, size_t len)
{
	for (unsigned i = 0; i < s->n; i++)
		if (s->e[i].type == type && s->e[i].name_len == len && !memcmp(s->e[i].name, name, len))
			return (int)i;
	return -1;
}

static void drop(struct store *s, unsigned i)
{
	memmove(&s->e[i], &s->e[i + 1], (s->n - i - 1) * sizeof(*s->e));
	s->n--;
}

/*
 * A value tree deeper than its root (the kernel writes one on fragmented
 * free space): its runs and extent blocks, all freed when the value goes.
 */
#define DEEP_PARTS 32

struct vdeep {
	uint64_t blk[DEEP_PARTS]; /* each run's first block */
	uint32_t len[DEEP_PARTS];
	bool sh[DEEP_PARTS];	  /* ... shared by a reflink (the refcount tree counts it) */
	unsigned runs, shared;	  /* runs, and how many of them are shared */
	uint64_t eb[DEEP_PARTS];
	unsigned nebs;
	bool over;
};

/* Shared runs of a deep value one change may let go of (their refcount credits). */
#define DEEP_SHARED_MAX 2

static int deep_part(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	struct vdeep *d = arg;

	if (!ext) {
		if (d->nebs == DEEP_PARTS)
			d->over = true;
		else
			d->eb[d->nebs++] = eb_blkno;
		return 0;
	}
	if (d->runs == DEEP_PARTS) {
		d->over = true;
		return 0;
	}
	d->sh[d->runs] = (ext->flags & O2_EXTENT_REFCOUNTED) != 0;
	d->shared += d->sh[d->runs];
	d->blk[d->runs] = ext->blkno;
	d->len[d->runs++] = ext->clusters;
	return 0;
}

/*
 * The one run of clusters a value root maps, and whether a reflink shares
 * it (counted in the inode's refcount tree).  A deeper tree: with deep, its
 * parts there (*ret_len 0); without, -EOPNOTSUPP.
 */
static int value_run(struct o2_fs *fs, uint64_t ino, const struct xent *x, uint32_t *ret_start,
		     uint32_t *ret_len, bool *ret_shared, struct vdeep *deep)
{
	const struct o2_xattr_value_root *vr = (const struct o2_xattr_value_root *)(const void *)x->body;

	*ret_len = 0;
	*ret_shared = false;
	if (deep)
		memset(deep, 0, sizeof(*deep));
	if ((le16(vr->xr_list.tree_depth) || le16(vr->xr_list.next_free_rec) > 1) && deep) {
		/* the entry's own copy of its root (the store is not changed here) */
		struct o2_xattr_value_root *root = (struct o2_xattr_value_root *)(uintptr_t)x->body;
		int r = o2_tree_walk(fs, &(struct o2_tree_root){ ino, &root->xr_list, 1 }, deep_part,
				     deep);

		if (r < 0)
			return r;
		if (deep->over || deep->shared > DEEP_SHARED_MAX)
			return o2_fail(fs, -EOPNOTSUPP, "inode %llu: xattr %.*s has a value tree %s; "
				       "changing it is not implemented", (unsigned long long)ino,
				       x->name_len, x->name,
				       deep->over ? "of too many parts"
						  : "of more shared runs than one change may let go of");
		return 0;
	}
	if (le16(vr->xr_list.tree_depth) || le16(vr->xr_list.next_free_rec) > 1)
		return o2_fail(fs, -EOPNOTSUPP, "inode %llu: xattr %.*s has a value tree of more than "
			       "one extent; sharing it is not implemented",
			       (unsigned long long)ino, x->name_len, x->name);
	if (le16(vr->xr_list.next_free_rec) == 1) {
		*ret_start = (uint32_t)(le64(vr->xr_list.recs[0].blkno) >> fs->bpc_bits);
		*ret_len = le16(vr->xr_list.recs[0].leaf_clusters);
		*ret_shared = (vr->xr_list.recs[0].flags & O2_EXT_REFCOUNTED) != 0;
	}
	return 0;
}

static int value_release(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, uint32_t start,
			 uint32_t len, bool shared);

/* Inside t: a deep value tree's clusters (shared ones through the refcount tree) and extent blocks go. */
static int deep_release(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib,
			const struct vdeep *d)
{
	int r = 0;

	for (unsigned i = 0; r == 0 && i < d->runs; i++)
		r = value_release(t, fs, ib, (uint32_t)(d->blk[i] >> fs->bpc_bits), d->len[i], d->sh[i]);
	for (unsigned i = 0; r == 0 && i < d->nebs; i++) {
		struct o2_buf *b;

		r = o2_bread(fs, d->eb[i], O2_META_EXTENT, &b);
		if (r == 0) {
			r = o2_tree_free_eb(t, fs, b);
			o2_brelse(fs, b);
		}
	}
	return r;
}

/* Inside t: let go of a value's clusters (shared ones through the refcount tree). */
static int value_release(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, uint32_t start,
			 uint32_t len, bool shared)
{
	if (!len)
		return 0;
	if (!shared)
		return o2_clusters_free(t, fs, start, len);
	if (!(le16(o2_buf_dinode(ib)->i_dyn_features) & O2_DYN_HAS_REFCOUNT))
		return o2_corrupt(fs, ib->blkno, "an xattr value is marked shared, but the inode has "
				  "no refcount tree");
	return o2_refcount_release(t, fs, le64(o2_buf_dinode(ib)->i_refcount_loc), start, len, true);
}

/* Whether the inode can be given an inline store, as the kernel judges it. */
static bool can_make_inline(const struct o2_fs *fs, const struct o2_dinode *di)
{
	unsigned size = fs->info.xattr_inline_size;
	uint64_t have, used;

	if (fs->bs <= 512 || size < INLINE_MIN || (le16(di->i_dyn_features) & O2_DYN_INLINE_XATTR))
		return false;
	if (le16(di->i_dyn_features) & O2_DYN_INLINE_DATA) {
		have = le16(di->id2.i_data.id_count);
		used = le64(di->i_size);
	} else if (S_ISLNK(le16(di->i_mode)) && !le32(di->i_clusters)) {
		have = o2_fast_symlink_max(fs->bs);
		used = le64(di->i_size);
	} else {
		have = (uint64_t)le16(di->id2.i_list.count) * sizeof(struct o2_extent_rec);
		used = (uint64_t)le16(di->id2.i_list.next_free_rec) * sizeof(struct o2_extent_rec);
	}
	return used <= have && have - used >= size;
}

/* Give the inode its inline store: the room comes off whatever id2 holds. */
static void make_inline(struct o2_fs *fs, struct o2_dinode *di)
{
	unsigned size = fs->info.xattr_inline_size;
	uint16_t mode = le16(di->i_mode);

	if (le16(di->i_dyn_features) & O2_DYN_INLINE_DATA)
		di->id2.i_data.id_count = cpu_le16((uint16_t)(le16(di->id2.i_data.id_count) - size));
	else if (!(S_ISLNK(mode) && !le32(di->i_clusters)))
		di->id2.i_list.count = cpu_le16((uint16_t)(le16(di->id2.i_list.count) -
							   size / sizeof(struct o2_extent_rec)));
	di->i_xattr_inline_size = cpu_le16((uint16_t)size);
	di->i_dyn_features = cpu_le16(le16(di->i_dyn_features) | O2_DYN_INLINE_XATTR |
				      O2_DYN_HAS_XATTR);
	memset((uint8_t *)di + fs->bs - size, 0, size);
}

struct change {
	unsigned type;
	const char *name;
	size_t len;
	const void *value; /* NULL: remove */
	size_t size;
	unsigned flags;
	/* a value over 80 bytes already in clusters: this root, shared (reflinks) */
	const uint8_t *shared_root;
};

static int check_args(struct o2_fs *fs, const struct change *c)
{
	if (!fs->journal)
		return -EROFS;
	if (!o2_has_incompat(fs, O2_FEATURE_INCOMPAT_XATTR))
		return o2_fail(fs, -EOPNOTSUPP, "the volume was formatted without extended attributes");
	if (c->type == 0 || c->type > O2_XATTR_SECURITY)
		return -EINVAL;
	if (c->len > O2_XATTR_NAME_MAX)
		return -ERANGE;
	/* the ACLs are kept under an empty name, everything else under one */
	if ((c->len == 0) != (c->type == O2_XATTR_ACL_ACCESS || c->type == O2_XATTR_ACL_DEFAULT))
		return -EINVAL;
	if (c->value && c->size > O2_XATTR_VALUE_MAX)
		return -E2BIG;
	return 0;
}

struct plan {
	struct store in, blk;
	struct o2_buf *xb;	   /* the xattr block, if the inode has one */
	bool make_inline, make_block;
	struct store *old_at, *new_at; /* where the attribute is, and will be */
	int old_i;
	uint32_t old_start, old_len; /* clusters the old value frees */
	bool old_shared;	     /* ... through the refcount tree */
	struct vdeep old_deep;	     /* ... or the parts of its deeper tree */
	uint32_t need;		     /* clusters the new value takes */
	struct xent add;
	/* an indexed block: blk is the bucket the attribute is in or goes to */
	bool indexed;
	uint64_t bucket;	     /* its first block */
	uint16_t bucket_nb;	     /* its xh_num_buckets (the first of a run: the run's count) */
	bool need_index, need_split; /* no room: make the block indexed, split the bucket */
};

static void plan_free(struct o2_fs *fs, struct plan *p)
{
	free(p->in.e);
	free(p->blk.e);
	if (p->xb)
		o2_brelse(fs, p->xb);
}

/* Read the inode's stores (checked) into the plan. */
static int load_stores(struct o2_fs *fs, uint64_t ino, struct o2_buf *ib, struct plan *p)
{
	struct o2_dinode *di = o2_buf_dinode(ib);
	unsigned room = o2_inode_xattr_room(di);
	uint64_t loc = le64(di->i_xattr_loc);
	int r;

	if (room) {
		r = load_store(fs, ino, ib->data + fs->bs - room, room, &p->in);
		if (r < 0)
			return r;
	}
	if (!loc)
		return 0;

	const struct o2_xattr_block *xb;

	if (loc >= fs->nblocks || loc <= O2_SUPER_BLKNO)
		return o2_corrupt(fs, ino, "xattr block %llu is outside the volume",
				  (unsigned long long)loc);
	r = o2_bread(fs, loc, O2_META_XATTR, &p->xb);
	if (r < 0)
		return r;
	xb = (const struct o2_xattr_block *)(const void *)p->xb->data;
	r = o2_check_meta_head(fs, loc, "xattr block", xb->xb_signature, O2_SIG_XATTR,
			       le64(xb->xb_blkno), le32(xb->xb_fs_generation));
	if (r < 0)
		return r;
	if (le16(xb->xb_flags) & XATTR_INDEXED) {
		if (fs->bs > BUCKET_BYTES)
			return o2_corrupt(fs, loc, "indexed xattr block on a volume with %u-byte blocks",
					  fs->bs);
		p->indexed = true; /* the bucket comes with the name (plan_bucket) */
		return 0;
	}
	return load_store(fs, loc, p->xb->data + BLOCK_STORE_AT, fs->bs - BLOCK_STORE_AT, &p->blk);
}

/* ---- buckets ---- */

static unsigned bucket_blocks(const struct o2_fs *fs)
{
	return BUCKET_BYTES >> fs->bits;
}

static struct o2_xattr_tree_root *xt_of(struct o2_buf *xb)
{
	return (struct o2_xattr_tree_root *)(void *)(xb->data + BLOCK_STORE_AT);
}

static bool block_indexed(const struct o2_buf *xb)
{
	return le16(((const struct o2_xattr_block *)(const void *)xb->data)->xb_flags) & XATTR_INDEXED;
}

static unsigned xt_max_recs(const struct o2_fs *fs)
{
	return (unsigned)((fs->bs - BLOCK_STORE_AT - offsetof(struct o2_xattr_tree_root, xt_list.recs)) /
			  sizeof(struct o2_extent_rec));
}

/* The bucket tree: leaf records keyed by the first name hash of their run, never merged. */
static void xt_owner(struct o2_buf *xb, struct o2_tree_owner *o)
{
	struct o2_xattr_tree_root *xt = xt_of(xb);

	o->root = xb;
	o->el = &xt->xt_list;
	o->last_eb = (o2le64 *)(void *)(xb->data + BLOCK_STORE_AT +
					offsetof(struct o2_xattr_tree_root, xt_last_eb_blk));
	o->no_merge = true;
}

/* Where a bucket is: its run (one leaf record) and its place in it. */
struct bpos {
	uint64_t run;		 /* the run's first block */
	uint32_t cpos, clusters; /* the run's record */
	unsigned n, room;	 /* buckets the run uses, and has room for */
	unsigned idx;		 /* the bucket */
};

static uint64_t bucket_at(const struct o2_fs *fs, const struct bpos *b, unsigned i)
{
	return b->run + (uint64_t)i * bucket_blocks(fs);
}

/*
 * The bucket names of this hash are in, or go to: in the run whose record
 * is the last at or below hash, the last bucket whose first hash is at or
 * below it (the run's first if none).
 */
static int bucket_locate(struct o2_fs *fs, struct o2_buf *xb, uint32_t hash, struct bpos *bp)
{
	struct o2_xattr_tree_root *xt = xt_of(xb);
	struct o2_extent ext;
	int r = o2_tree_lookup_le(fs, &(struct o2_tree_root){ xb->blkno, &xt->xt_list,
							       xt_max_recs(fs) }, hash, &ext);

	if (r < 0)
		return r;
	bp->run = ext.blkno;
	bp->cpos = ext.cpos;
	bp->clusters = ext.clusters;
	bp->room = (unsigned)((((uint64_t)ext.clusters) << fs->bpc_bits) / bucket_blocks(fs));
	bp->idx = 0;

	struct o2_buf *b;

	r = o2_bread(fs, ext.blkno, O2_META_PLAIN, &b);
	if (r < 0)
		return r;
	bp->n = le16(((const struct o2_xattr_header *)(const void *)b->data)->xh_num_buckets);
	o2_brelse(fs, b);
	if (bp->n == 0 || bp->n > bp->room)
		return o2_corrupt(fs, ext.blkno, "xattr bucket run of %u buckets in room for %u", bp->n,
				  bp->room);
	for (unsigned i = 1; i < bp->n; i++) {
		bool has;
		uint32_t h;

		r = o2_xattr_bucket_first_hash(fs, bucket_at(fs, bp, i), &has, &h);
		if (r < 0)
			return r;
		if (has && h > hash)
			break;
		if (has)
			bp->idx = i;
	}
	return 0;
}

static void sort_by_hash(const struct o2_fs *fs, struct store *s)
{
	for (unsigned i = 1; i < s->n; i++) {
		struct xent x = s->e[i];
		uint32_t h = name_hash(fs, x.name, x.name_len);
		unsigned j = i;

		while (j && name_hash(fs, s->e[j - 1].name, s->e[j - 1].name_len) > h) {
			s->e[j] = s->e[j - 1];
			j--;
		}
		s->e[j] = x;
	}
}

/*
 * A bucket's image from a store (entries sorted by hash, as buckets keep
 * them): the header's free start and name/value length as fsck.ocfs2
 * reckons them (a value's size taken, as it takes it, to 16 bits), its
 * run's bucket count if it is a run's first, and its check.
 */
static void bucket_image(const struct o2_fs *fs, struct store *s, uint16_t nbuckets, uint8_t *buf)
{
	struct o2_xattr_header *xh = (struct o2_xattr_header *)(void *)buf;
	unsigned min = BUCKET_BYTES, total = 0;

	sort_by_hash(fs, s);
	s->len = BUCKET_BYTES;
	write_store(fs, s, buf);
	for (unsigned i = 0; i < s->n; i++) {
		const struct o2_xattr_entry *xe = &xh->xh_entries[i];
		uint16_t v = (uint16_t)le64(xe->xe_value_size);

		if (le16(xe->xe_name_offset) < min)
			min = le16(xe->xe_name_offset);
		total += pad4(xe->xe_name_len) + (v <= INLINE_VALUE_MAX ? pad4(v) : VALUE_ROOT_BYTES);
	}
	xh->xh_free_start = cpu_le16((uint16_t)min);
	xh->xh_name_value_len = cpu_le16((uint16_t)total);
	xh->xh_num_buckets = cpu_le16(nbuckets);
	if (o2_has_incompat((struct o2_fs *)(uintptr_t)fs, O2_FEATURE_INCOMPAT_META_ECC))
		o2_blockcheck_compute(buf, BUCKET_BYTES, &xh->xh_check);
}

/* Write a bucket's image over its blocks, logged in t (fresh: blocks not in use before). */
static int bucket_put(struct o2_trans *t, struct o2_fs *fs, uint64_t blkno, const uint8_t *buf,
		      bool fresh)
{
	for (unsigned i = 0; i < bucket_blocks(fs); i++) {
		struct o2_buf *b;
		int r = fresh ? o2_trans_bnew(t, fs, blkno + i, O2_META_PLAIN, &b)
			      : o2_bread(fs, blkno + i, O2_META_PLAIN, &b);

		if (r == 0 && !fresh && (r = o2_trans_add(t, b)) < 0)
			o2_brelse(fs, b);
		if (r < 0)
			return r;
		memcpy(b->data, buf + ((size_t)i << fs->bits), fs->bs);
		o2_brelse(fs, b);
	}
	return 0;
}

/* A bucket image's run count set to n, its check computed again. */
static void set_count(struct o2_fs *fs, uint8_t *buf, unsigned n)
{
	struct o2_xattr_header *xh = (struct o2_xattr_header *)(void *)buf;

	xh->xh_num_buckets = cpu_le16((uint16_t)n);
	if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_META_ECC))
		o2_blockcheck_compute(buf, BUCKET_BYTES, &xh->xh_check);
}

/* Set the bucket count of the run whose first bucket is first (in t). */
static int set_run_count(struct o2_trans *t, struct o2_fs *fs, uint64_t first, unsigned n,
			 uint8_t *buf)
{
	int r = o2_xattr_bucket_read(fs, first, buf);

	if (r < 0)
		return r;
	set_count(fs, buf, n);
	return bucket_put(t, fs, first, buf, false);
}

/* A new run of one cluster at dest joins the tree, its record at hash (in t). */
static int add_run(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *xb,
		   const struct o2_tree_owner *o, uint32_t hash, uint64_t dest)
{
	int r = o2_trans_add(t, xb);

	if (r == 0)
		r = o2_tree_insert(t, fs, o, &(struct o2_extent){ hash, 1, dest, 0 });
	if (r == 0)
		xt_of(xb)->xt_clusters = cpu_le32(le32(xt_of(xb)->xt_clusters) + 1);
	return r;
}

/* Bucket at blkno: its image in buf, its entries in s. */
static int bucket_load(struct o2_fs *fs, uint64_t blkno, uint8_t *buf, struct store *s)
{
	int r = o2_xattr_bucket_read(fs, blkno, buf);

	if (r == 0)
		r = load_store(fs, blkno, buf, BUCKET_BYTES, s);
	return r;
}

/*
 * The plan's bucket for this name (indexed): where it is, else where it
 * goes.  Names of one hash stay in one bucket, but a volume another
 * writer made may spread them over the next ones: those are searched too.
 */
static int plan_bucket(struct o2_fs *fs, struct plan *p, const struct change *c)
{
	uint32_t hash = name_hash(fs, c->name, c->len);
	uint8_t *buf = o2_malloc(BUCKET_BYTES);
	struct bpos bp;
	int r = buf ? bucket_locate(fs, p->xb, hash, &bp) : -ENOMEM;

	for (unsigned i = bp.idx; r == 0 && i < bp.n; i++) {
		if (i > bp.idx) {
			bool has;
			uint32_t h;

			r = o2_xattr_bucket_first_hash(fs, bucket_at(fs, &bp, i), &has, &h);
			if (r < 0 || !has || h != hash)
				break;
		}
		free(p->blk.e);
		p->blk.e = NULL;
		r = bucket_load(fs, bucket_at(fs, &bp, i), buf, &p->blk);
		if (r < 0)
			break;
		p->bucket = bucket_at(fs, &bp, i);
		p->bucket_nb = le16(((struct o2_xattr_header *)(void *)buf)->xh_num_buckets);
		if (find(&p->blk, c->type, c->name, c->len) >= 0 || i + 1 == bp.n)
			break;
		/* not here: back to the bucket it would go to, unless found further on */
		bool found = false;

		for (unsigned j = i + 1; !found && j < bp.n; j++) {
			bool has;
			uint32_t h;

			r = o2_xattr_bucket_first_hash(fs, bucket_at(fs, &bp, j), &has, &h);
			if (r < 0 || !has || h != hash)
				break;
			found = true;
		}
		if (!found)
			break;
	}
	free(buf);
	return r;
}

/* Bucket tree transactions: the block made indexed, a bucket split. */
static int free_run(struct o2_trans *t, struct o2_fs *fs, uint64_t blkno, uint32_t clusters,
		    uint8_t flags, void *arg)
{
	struct o2_buf *xb = arg;
	struct o2_xattr_tree_root *xt = xt_of(xb);

	(void)flags;
	xt->xt_clusters = cpu_le32(le32(xt->xt_clusters) - clusters);
	return o2_clusters_free(t, fs, (uint32_t)(blkno >> fs->bpc_bits), clusters);
}

/*
 * The inode's full xattr block becomes indexed, in a transaction of its
 * own (it changes no attribute): its entries move to the first bucket of a
 * new cluster, and the block holds the root of the bucket tree, one record
 * at hash 0.
 */
static int make_indexed(struct o2_fs *fs, uint64_t ino)
{
	struct plan p = { 0 };
	struct o2_trans *t;
	struct o2_buf *ib;
	uint8_t *buf = o2_malloc(BUCKET_BYTES);
	uint32_t start, got;
	int r, e;

	if (!buf)
		return -ENOMEM;
	r = o2_reserve(fs, &(struct o2_resv){ .clusters = 1 }, NULL);
	if (r == 0)
		r = o2_trans_begin(fs, bucket_blocks(fs) + 4 + O2_ALLOC_CREDITS, &t);
	if (r < 0) {
		free(buf);
		return r;
	}
	r = o2_inode_buf(fs, ino, &ib);
	if (r == 0) {
		r = load_stores(fs, ino, ib, &p);
		if (r == 0 && (!p.xb || p.indexed))
			r = -EAGAIN; /* nothing to do: plan again */
		if (r == 0)
			r = o2_clusters_alloc(t, fs, 1, 1, &start, &got);
		if (r == 0) {
			uint64_t blk = (uint64_t)start << fs->bpc_bits;
			struct o2_xattr_block *xb = (struct o2_xattr_block *)(void *)p.xb->data;

			bucket_image(fs, &p.blk, 1, buf);
			r = bucket_put(t, fs, blk, buf, true);
			if (r == 0)
				r = o2_trans_add(t, p.xb);
			if (r == 0) {
				struct o2_xattr_tree_root *xt = xt_of(p.xb);

				memset(p.xb->data + BLOCK_STORE_AT, 0, fs->bs - BLOCK_STORE_AT);
				xb->xb_flags = cpu_le16(le16(xb->xb_flags) | XATTR_INDEXED);
				xt->xt_clusters = cpu_le32(1);
				xt->xt_list.count = cpu_le16((uint16_t)xt_max_recs(fs));
				xt->xt_list.next_free_rec = cpu_le16(1);
				xt->xt_list.recs[0].leaf_clusters = cpu_le16(1);
				xt->xt_list.recs[0].blkno = cpu_le64(blk);
			}
		}
		plan_free(fs, &p);
		o2_brelse(fs, ib);
	}
	free(buf);
	e = o2_trans_finish(t, r == -EAGAIN ? 0 : r);
	return r == -EAGAIN ? 0 : r < 0 ? r : e;
}

/* Where to cut a bucket's entries (sorted) in two: never inside one hash. */
static int split_point(const struct o2_fs *fs, const struct store *s, unsigned *ret)
{
	unsigned n = s->n, m = n / 2;

#define H(i) name_hash(fs, s->e[i].name, s->e[i].name_len)
	while (m < n && m && H(m) == H(m - 1))
		m++;
	if (m == n)
		for (m = n / 2; m && H(m) == H(m - 1); m--)
			;
#undef H
	if (m == 0 || m == n)
		return -ENOSPC; /* every entry has one hash: nothing to split */
	*ret = m;
	return 0;
}

/*
 * The bucket a name of this hash goes to is full: split it, in a
 * transaction of its own (it changes no attribute).  The upper half of
 * its entries (by hash) goes to a new bucket right after it - in its run
 * if the run has room (the buckets after it move down one), else the
 * start of a new run of one cluster, which takes the buckets after it too
 * and gets a record of its own at its first hash.
 */
static int bucket_split(struct o2_fs *fs, uint64_t ino, uint32_t hash)
{
	struct plan p = { 0 };
	struct store up = { 0 };
	struct o2_trans *t = NULL;
	struct o2_buf *ib;
	struct bpos bp;
	uint8_t *buf = o2_malloc(BUCKET_BYTES);
	unsigned m = 0, bb = bucket_blocks(fs);
	int r, e;

	if (!buf)
		return -ENOMEM;
	r = o2_inode_buf(fs, ino, &ib);
	if (r < 0) {
		free(buf);
		return r;
	}
	r = load_stores(fs, ino, ib, &p);
	if (r == 0 && !p.indexed)
		r = o2_corrupt(fs, ino, "xattr bucket split without buckets");
	if (r == 0)
		r = bucket_locate(fs, p.xb, hash, &bp);
	if (r == 0)
		r = bucket_load(fs, bucket_at(fs, &bp, bp.idx), buf, &p.blk);
	if (r == 0) {
		sort_by_hash(fs, &p.blk);
		r = split_point(fs, &p.blk, &m);
	}
	if (r == 0) {
		up = p.blk;
		up.e = o2_malloc((size_t)up.max * sizeof(*up.e));
		r = up.e ? 0 : -ENOMEM;
	}
	if (r < 0)
		goto out;
	up.n = p.blk.n - m;
	memcpy(up.e, p.blk.e + m, up.n * sizeof(*up.e));
	p.blk.n = m;
	uint32_t new_hash = name_hash(fs, up.e[0].name, up.e[0].name_len);
	bool in_run = bp.n < bp.room;
	/* buckets that move: those after the split one (into the new run, or down one) */
	unsigned moved = bp.n - 1 - bp.idx;
	/*
	 * A full run whose split bucket lies in its first half: its upper half
	 * moves to a new run instead, splitting nothing; the bucket is split
	 * in the room that leaves, when the caller plans again.  So no split
	 * moves more than half a run.
	 */
	unsigned from = 0; /* 0: the split bucket's upper half starts the new run */

	for (unsigned j = bp.n / 2; !in_run && moved > bp.n / 2 && !from && j < bp.n; j++) {
		bool has;
		uint32_t h;

		r = o2_xattr_bucket_first_hash(fs, bucket_at(fs, &bp, j), &has, &h);
		if (r < 0)
			goto out;
		if (has && j > bp.idx) {
			from = j;
			new_hash = h;
			moved = bp.n - j;
		}
	}
	unsigned credits = (moved + 3) * bb + 4;
	struct o2_tree_owner o;

	xt_owner(p.xb, &o);
	if (!in_run) {
		uint32_t meta;

		if (new_hash < bp.cpos + bp.clusters) {
			r = -ENOSPC; /* a run of another writer's covers the hash */
			goto out;
		}
		r = o2_tree_meta_need(fs, &o, new_hash, 1, &meta);
		if (r == 0)
			r = o2_reserve(fs, &(struct o2_resv){ .clusters = 1, .meta = meta }, NULL);
		credits += O2_TREE_CREDITS + O2_ALLOC_CREDITS;
	}
	if (r == 0 && credits > o2_journal_max_credits(fs))
		r = o2_fail(fs, -ENOSPC, "splitting an xattr bucket would move %u buckets, more than "
			    "one transaction holds", moved);
	if (r == 0)
		r = o2_trans_begin(fs, credits, &t);
	if (r < 0)
		goto out;
	uint64_t dest, first = bucket_at(fs, &bp, 0);
	unsigned bi = bp.idx;

	if (in_run) {
		/* from the end down: each bucket after the split one one place on */
		for (unsigned j = bp.n - 1; r == 0 && j > bi; j--) {
			r = o2_xattr_bucket_read(fs, bucket_at(fs, &bp, j), buf);
			if (r == 0)
				r = bucket_put(t, fs, bucket_at(fs, &bp, j + 1), buf, j + 1 == bp.n);
		}
		dest = bucket_at(fs, &bp, bi + 1);
		if (r == 0) {
			bucket_image(fs, &up, 0, buf);
			r = bucket_put(t, fs, dest, buf, bi + 1 == bp.n);
		}
		if (r == 0) {
			bucket_image(fs, &p.blk, bi == 0 ? (uint16_t)(bp.n + 1) : 0, buf);
			r = bucket_put(t, fs, bucket_at(fs, &bp, bi), buf, false);
		}
		if (r == 0 && bi)
			r = set_run_count(t, fs, first, bp.n + 1, buf);
	} else if (from) {
		/* the run's upper half, whole, to a new run */
		uint32_t start, got;

		r = o2_clusters_alloc(t, fs, 1, 1, &start, &got);
		dest = (uint64_t)start << fs->bpc_bits;
		for (unsigned j = from; r == 0 && j < bp.n; j++) {
			r = o2_xattr_bucket_read(fs, bucket_at(fs, &bp, j), buf);
			if (r == 0) {
				set_count(fs, buf, j == from ? moved : 0);
				r = bucket_put(t, fs, dest + (uint64_t)(j - from) * bb, buf, true);
			}
		}
		if (r == 0)
			r = set_run_count(t, fs, first, from, buf);
		if (r == 0)
			r = add_run(t, fs, p.xb, &o, new_hash, dest);
	} else {
		uint32_t start, got;

		r = o2_clusters_alloc(t, fs, 1, 1, &start, &got);
		dest = (uint64_t)start << fs->bpc_bits;
		if (r == 0) {
			bucket_image(fs, &up, (uint16_t)(moved + 1), buf);
			r = bucket_put(t, fs, dest, buf, true);
		}
		for (unsigned j = bi + 1; r == 0 && j < bp.n; j++) {
			r = o2_xattr_bucket_read(fs, bucket_at(fs, &bp, j), buf);
			if (r == 0)
				r = bucket_put(t, fs, dest + (uint64_t)(j - bi) * bb, buf, true);
		}
		if (r == 0) {
			bucket_image(fs, &p.blk, bi == 0 ? (uint16_t)(bi + 1) : 0, buf);
			r = bucket_put(t, fs, bucket_at(fs, &bp, bi), buf, false);
		}
		if (r == 0 && bi)
			r = set_run_count(t, fs, first, bi + 1, buf);
		if (r == 0)
			r = add_run(t, fs, p.xb, &o, new_hash, dest);
	}
out:
	free(up.e);
	plan_free(fs, &p);
	o2_brelse(fs, ib);
	free(buf);
	if (!t)
		return r;
	e = o2_trans_finish(t, r);
	return r < 0 ? r : e;
}


/* Read both stores and decide everything before anything changes. */
static int make_plan(struct o2_fs *fs, uint64_t ino, struct o2_buf *ib, const struct change *c,
		     struct plan *p)
{
	struct o2_dinode *di = o2_buf_dinode(ib);
	int r = load_stores(fs, ino, ib, p), i;

	if (r == 0 && p->indexed)
		r = plan_bucket(fs, p, c);
	if (r < 0)
		return r;
	p->old_i = -1;
	if ((i = find(&p->in, c->type, c->name, c->len)) >= 0)
		p->old_at = &p->in;
	else if ((i = find(&p->blk, c->type, c->name, c->len)) >= 0)
		p->old_at = &p->blk;
	if (p->old_at) {
		p->old_i = i;
		if (c->flags & O2_XATTR_CREATE)
			return -EEXIST;
		if (!p->old_at->e[i].local) {
			r = value_run(fs, ino, &p->old_at->e[i], &p->old_start, &p->old_len,
				      &p->old_shared, &p->old_deep);
			if (r < 0)
				return r;
		}
	} else if (!c->value || (c->flags & O2_XATTR_REPLACE)) {
		return -ENODATA;
	}
	/* letting go of a shared value may split a refcount record */
	if (!c->value)
		return p->old_shared || p->old_deep.shared
			       ? o2_reserve(fs, &(struct o2_resv){ .meta = O2_RESV_TREE_META(5),
								  .freeing = true }, NULL)
			       : 0;

	/* the new entry, its value root filled in once its clusters exist */
	struct xent *a = &p->add;

	a->type = (uint8_t)c->type;
	a->name_len = (uint8_t)c->len;
	memcpy(a->name, c->name, c->len);
	a->value_size = c->size;
	a->local = c->size <= INLINE_VALUE_MAX;
	if (a->local) {
		memcpy(a->body, c->value, c->size);
	} else if (c->shared_root) {
		struct o2_xattr_value_root *vr = (struct o2_xattr_value_root *)(void *)a->body;

		memcpy(a->body, c->shared_root, VALUE_ROOT_BYTES);
		if (le16(vr->xr_list.next_free_rec))
			vr->xr_list.recs[0].flags |= O2_EXT_REFCOUNTED;
	} else {
		p->need = (uint32_t)((c->size + fs->cs - 1) >> fs->cbits);
	}

	/* placed as if the old one were gone: the inode's tail first, then the block */
	size_t want = ENTRY_BYTES + nv_bytes(a);
	size_t in_len = p->in.len, blk_len = p->blk.len;

	if (!in_len && can_make_inline(fs, di))
		in_len = fs->info.xattr_inline_size;
	if (!blk_len)
		blk_len = fs->bs - BLOCK_STORE_AT;
	if (in_len && used_bytes(&p->in, p->old_at == &p->in ? p->old_i : -1) + want <= in_len) {
		p->new_at = &p->in;
	} else if (used_bytes(&p->blk, p->old_at == &p->blk ? p->old_i : -1) + want <= blk_len) {
		p->new_at = &p->blk;
	} else if (p->indexed) {
		p->need_split = true; /* the caller splits the bucket and plans again */
		return 0;
	} else if (p->xb && fs->bs <= BUCKET_BYTES) {
		p->need_index = true; /* the caller indexes the block and plans again */
		return 0;
	} else {
		return -ENOSPC;
	}

	struct store *s = p->new_at;

	if (!s->len) { /* a store made for it */
		s->len = s == &p->in ? in_len : blk_len;
		s->max = (unsigned)(s->len / ENTRY_BYTES) + 1;
		s->e = o2_malloc((size_t)s->max * sizeof(*s->e));
		if (!s->e)
			return -ENOMEM;
		*(s == &p->in ? &p->make_inline : &p->make_block) = true;
	}
	/*
	 * Reserved while nothing is logged: the value's clusters (one run: a
	 * value tree here has a single record) and a new block of attributes.
	 */
	bool shared_old = p->old_shared || p->old_deep.shared;

	if (p->need || p->make_block || shared_old)
		return o2_reserve(fs, &(struct o2_resv){ .clusters = p->need, .run = p->need,
							 .meta = (p->make_block ? 1 : 0) +
								 (shared_old ? O2_RESV_TREE_META(5) : 0) },
				  NULL);
	return 0;
}

static void set_value_root(struct xent *a, uint64_t blkno, uint32_t clusters)
{
	struct o2_xattr_value_root *vr = (struct o2_xattr_value_root *)(void *)a->body;

	memset(a->body, 0, VALUE_ROOT_BYTES);
	vr->xr_clusters = cpu_le32(clusters);
	vr->xr_list.count = cpu_le16(1);
	vr->xr_list.next_free_rec = cpu_le16(1);
	vr->xr_list.recs[0].leaf_clusters = cpu_le16((uint16_t)clusters);
	vr->xr_list.recs[0].blkno = cpu_le64(blkno);
}

static int new_block(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, struct plan *p)
{
	struct o2_suballoc_res res;
	int r = o2_suballoc_new_block(t, fs, fs->sys.extent_alloc, O2_META_XATTR, &res, &p->xb);

	if (r < 0)
		return r;

	struct o2_xattr_block *xb = (struct o2_xattr_block *)(void *)p->xb->data;

	memset(xb, 0, fs->bs);
	memcpy(xb->xb_signature, O2_SIG_XATTR, sizeof(O2_SIG_XATTR));
	xb->xb_suballoc_slot = cpu_le16(res.slot);
	xb->xb_suballoc_bit = cpu_le16(res.bit);
	xb->xb_fs_generation = cpu_le32(fs->info.fs_generation);
	xb->xb_blkno = cpu_le64(res.blkno);
	if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_DISCONTIG_BG))
		xb->xb_suballoc_loc = cpu_le64(res.group);
	o2_buf_dinode(ib)->i_xattr_loc = cpu_le64(res.blkno);
	return 0;
}

/*
 * Inside t (inode and block logged): write the stores back; an emptied
 * block goes back to its allocator.
 */
static int store_back(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, struct plan *p)
{
	struct o2_dinode *di = o2_buf_dinode(ib);
	unsigned room = o2_inode_xattr_room(di);

	if (room)
		write_store(fs, &p->in, ib->data + fs->bs - room);
	if (p->indexed) {
		/* the bucket, if the change touched it (its block stays as it is) */
		if (p->bucket && (p->old_at == &p->blk || p->new_at == &p->blk)) {
			uint8_t *buf = o2_malloc(BUCKET_BYTES);
			int r;

			if (!buf)
				return -ENOMEM;
			bucket_image(fs, &p->blk, p->bucket_nb, buf);
			r = bucket_put(t, fs, p->bucket, buf, false);
			free(buf);
			if (r < 0)
				return r;
		}
	} else if (p->xb && p->blk.n == 0) {
		int r = o2_xattr_block_free(t, fs, p->xb->data);

		if (r < 0)
			return r;
		di->i_xattr_loc = 0;
	} else if (p->xb) {
		write_store(fs, &p->blk, p->xb->data + BLOCK_STORE_AT);
	}
	uint16_t dyn = le16(di->i_dyn_features) & ~(uint16_t)O2_DYN_HAS_XATTR;

	if (room || di->i_xattr_loc)
		dyn |= O2_DYN_HAS_XATTR;
	di->i_dyn_features = cpu_le16(dyn);
	return 0;
}

/* Inside t, with the plan made: change the stores, allocate and free. */
static int apply(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, const struct change *c,
		 struct plan *p)
{
	struct o2_dinode *di = o2_buf_dinode(ib);
	int r;

	/* first what can fail for want of space, while nothing is logged */
	if (p->need) {
		uint32_t start, got;

		r = o2_clusters_alloc(t, fs, p->need, p->need, &start, &got);
		if (r < 0)
			return r;
		uint64_t blk = (uint64_t)start << fs->bpc_bits;

		r = o2_data_fill(fs, blk, got, c->value, c->size);
		if (r < 0)
			return r;
		set_value_root(&p->add, blk, got);
	}
	r = o2_trans_add(t, ib);
	if (r == 0 && p->xb)
		r = o2_trans_add(t, p->xb);
	if (r == 0 && p->make_block)
		r = new_block(t, fs, ib, p);
	if (r < 0)
		return r;
	if (p->make_inline)
		make_inline(fs, di);

	if (p->old_at && (!c->value || p->new_at != p->old_at))
		drop(p->old_at, (unsigned)p->old_i);
	if (c->value) {
		if (p->new_at == p->old_at)
			p->new_at->e[p->old_i] = p->add; /* in place, as the kernel replaces */
		else
			p->new_at->e[p->new_at->n++] = p->add;
	}

	r = store_back(t, fs, ib, p);
	if (r == 0)
		r = value_release(t, fs, ib, p->old_start, p->old_len, p->old_shared);
	if (r == 0)
		r = deep_release(t, fs, ib, &p->old_deep);
	if (r == 0)
		o2_touch(fs, di, false, true);
	return r;
}

static int change_in(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib,
		     const struct change *c)
{
	struct plan p = { 0 };
	int r = make_plan(fs, ib->blkno, ib, c, &p);

	/* indexing or splitting takes transactions of their own */
	if (r == 0 && (p.need_index || p.need_split))
		r = -ENOSPC;
	/* the refcount tree's credits are not the caller's (reflinks share no ACLs) */
	if (r == 0 && (p.old_shared || p.old_deep.shared))
		r = o2_fail(fs, -EOPNOTSUPP, "inode %llu: xattr %.*s has a value a reflink shares; "
			    "changing it along with another change is not implemented",
			    (unsigned long long)ib->blkno, (int)c->len, c->name);
	if (r == 0)
		r = apply(t, fs, ib, c, &p);
	plan_free(fs, &p);
	return r;
}

int o2_xattr_change_in(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, unsigned type,
		       const char *name, size_t len, const void *value, size_t size, unsigned flags)
{
	static const uint8_t empty[1];
	struct change c = { type, name, len, value && !size ? empty : value, size, flags, NULL };
	int r = check_args(fs, &c);

	return r < 0 ? r : change_in(t, fs, ib, &c);
}

static int change(struct o2_fs *fs, uint64_t ino, const struct change *c)
{
	struct plan p = { 0 };
	struct o2_trans *t;
	struct o2_buf *ib;
	int r = check_args(fs, c), e;

	if (r < 0)
		return r;
	r = o2_inode_buf(fs, ino, &ib);
	if (r < 0)
		return r;
	/* planned - and what it allocates reserved - before the handle opens */
	r = o2_check_writable(fs, o2_buf_dinode(ib), false);
	if (r == 0)
		r = make_plan(fs, ino, ib, c, &p);
	/* no room: the block indexed, or a bucket split, each a step of its own; then again */
	for (unsigned steps = 0; r == 0 && (p.need_index || p.need_split); steps++) {
		bool index = p.need_index;

		plan_free(fs, &p);
		memset(&p, 0, sizeof(p));
		if (steps == 64)
			r = o2_fail(fs, -ENOSPC, "inode %llu: no xattr bucket takes %.*s after 64 splits",
				    (unsigned long long)ino, (int)c->len, c->name);
		else if (index)
			r = make_indexed(fs, ino);
		else
			r = bucket_split(fs, ino, name_hash(fs, c->name, c->len));
		if (r == 0)
			r = make_plan(fs, ino, ib, c, &p);
	}
	if (r == 0)
		r = o2_trans_begin_freeing(fs, SET_CREDITS + (p.old_shared ? O2_REFCOUNT_CREDITS : 0) +
						       p.old_deep.shared * O2_REFCOUNT_CREDITS, &t);
	if (r == 0) {
		r = apply(t, fs, ib, c, &p);
		e = o2_trans_finish(t, r);
		if (r == 0)
			r = e;
	}
	plan_free(fs, &p);
	o2_brelse(fs, ib);
	return r;
}

int o2_xattr_set(struct o2_fs *fs, uint64_t ino, unsigned type, const char *name, size_t len,
		 const void *value, size_t size, unsigned flags)
{
	static const uint8_t empty[1];
	struct change c = { type, name, len, value ? value : empty, size, flags, NULL };

	if (!value && size)
		return -EINVAL;
	return change(fs, ino, &c);
}

int o2_xattr_remove(struct o2_fs *fs, uint64_t ino, unsigned type, const char *name, size_t len)
{
	struct change c = { type, name, len, NULL, 0, 0, NULL };

	return change(fs, ino, &c);
}

/* ---- freeing values in steps ---- */

#define STRIP_RUNS 16
#define STRIP_CREDITS (4 + O2_ALLOC_CREDITS + 2 * STRIP_RUNS + DEEP_SHARED_MAX * O2_REFCOUNT_CREDITS)

/* One transaction: up to STRIP_RUNS values out of their clusters and stores. */
static int strip_step(struct o2_fs *fs, uint64_t ino, bool *ret_more)
{
	struct plan p = { 0 };
	struct o2_trans *t;
	struct o2_buf *ib;
	uint32_t start[STRIP_RUNS], len[STRIP_RUNS];
	bool shared[STRIP_RUNS];
	struct vdeep deep = { 0 };
	unsigned runs = 0;
	int r, e;

	*ret_more = false;
	r = o2_trans_begin_freeing(fs, STRIP_CREDITS, &t);
	if (r < 0)
		return r;
	r = o2_inode_buf(fs, ino, &ib);
	if (r == 0) {
		r = load_stores(fs, ino, ib, &p);
		for (int k = 0; r == 0 && k < 2; k++) {
			struct store *s = k ? &p.blk : &p.in;

			for (unsigned i = 0; r == 0 && i < s->n;) {
				if (s->e[i].local) {
					i++;
				} else if (runs == STRIP_RUNS || (runs && (shared[runs - 1] || deep.runs))) {
					*ret_more = true;
					break;
				} else {
					struct vdeep d1;

					r = value_run(fs, ino, &s->e[i], &start[runs], &len[runs],
						      &shared[runs], &d1);
					/* a shared value, or a deep one, is released alone: its credits */
					if (r == 0 && (shared[runs] || d1.runs) && runs) {
						*ret_more = true;
						break;
					}
					if (r == 0 && d1.runs)
						deep = d1;
					if (r == 0) {
						runs++;
						drop(s, i);
					}
				}
			}
		}
		if (r == 0 && runs) {
			r = o2_trans_add(t, ib);
			if (r == 0 && p.xb)
				r = o2_trans_add(t, p.xb);
			if (r == 0)
				r = store_back(t, fs, ib, &p);
			for (unsigned i = 0; r == 0 && i < runs; i++)
				r = value_release(t, fs, ib, start[i], len[i], shared[i]);
			if (r == 0)
				r = deep_release(t, fs, ib, &deep);
		}
		plan_free(fs, &p);
		o2_brelse(fs, ib);
	}
	e = o2_trans_finish(t, r);
	return r < 0 ? r : e;
}

/* Bucket tree records freed per transaction (a leaf, the root, each run's free). */
#define UNINDEX_RECS 4

struct runs {
	uint64_t *blk;
	uint32_t *clusters;
	size_t n, cap;
};

static int collect_run(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	struct runs *rs = arg;

	(void)eb_blkno;
	if (!ext)
		return 0;
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 16;
		uint64_t *n = o2_realloc(rs->blk, cap * sizeof(*n));
		uint32_t *c = n ? o2_realloc(rs->clusters, cap * sizeof(*c)) : NULL;

		if (n)
			rs->blk = n;
		if (!c)
			return -ENOMEM;
		rs->clusters = c;
		rs->cap = cap;
	}
	rs->clusters[rs->n] = ext->clusters;
	rs->blk[rs->n++] = ext->blkno;
	return 0;
}

/*
 * One transaction of taking an indexed block apart: the values in clusters
 * of one bucket (a shared one alone), else - none left - records of the
 * bucket tree and their clusters, and once the tree is empty the block is
 * a plain (empty) store again, freed with the inode.
 */
static int unindex_step(struct o2_fs *fs, uint64_t ino, bool *ret_more)
{
	struct plan p = { 0 };
	struct runs rs = { 0 };
	struct o2_trans *t;
	struct o2_buf *ib;
	uint8_t *buf = o2_malloc(BUCKET_BYTES);
	bool done = false;
	int r, e;

	*ret_more = false;
	if (!buf)
		return -ENOMEM;
	/* a bucket's values, or UNINDEX_RECS records of the tree: both fit these */
	r = o2_trans_begin_freeing(fs, STRIP_CREDITS + bucket_blocks(fs), &t);
	if (r < 0) {
		free(buf);
		return r;
	}
	r = o2_inode_buf(fs, ino, &ib);
	if (r < 0)
		goto out_t;
	r = load_stores(fs, ino, ib, &p);
	if (r < 0 || !p.indexed)
		goto out;
	struct o2_xattr_tree_root *xt = xt_of(p.xb);

	r = o2_tree_walk(fs, &(struct o2_tree_root){ p.xb->blkno, &xt->xt_list, xt_max_recs(fs) },
			 collect_run, &rs);
	for (size_t k = 0; r == 0 && !done && k < rs.n; k++) {
		struct o2_buf *b;
		unsigned n;

		r = o2_bread(fs, rs.blk[k], O2_META_PLAIN, &b);
		if (r < 0)
			break;
		n = le16(((const struct o2_xattr_header *)(const void *)b->data)->xh_num_buckets);
		o2_brelse(fs, b);
		if (n == 0 || n > ((uint64_t)rs.clusters[k] << fs->bpc_bits) / bucket_blocks(fs)) {
			r = o2_corrupt(fs, rs.blk[k], "xattr bucket run of %u buckets in %u clusters", n,
				       rs.clusters[k]);
			break;
		}
		for (unsigned i = 0; r == 0 && !done && i < n; i++) {
			uint64_t blk = rs.blk[k] + (uint64_t)i * bucket_blocks(fs);
			uint32_t start, len;
			bool shared;
			unsigned runs = 0;

			free(p.blk.e);
			p.blk.e = NULL;
			r = bucket_load(fs, blk, buf, &p.blk);
			uint16_t nb = le16(((struct o2_xattr_header *)(void *)buf)->xh_num_buckets);

			for (unsigned j = 0; r == 0 && j < p.blk.n && runs < STRIP_RUNS;) {
				if (p.blk.e[j].local) {
					j++;
					continue;
				}
				struct vdeep deep;

				r = value_run(fs, ino, &p.blk.e[j], &start, &len, &shared, &deep);
				if (r == 0 && (shared || deep.runs) && runs)
					break; /* alone, next time */
				if (r == 0)
					r = value_release(t, fs, ib, start, len, shared);
				if (r == 0)
					r = deep_release(t, fs, ib, &deep);
				if (r == 0) {
					drop(&p.blk, j);
					runs++;
				}
				if (shared || deep.runs)
					break;
			}
			if (r == 0 && runs) {
				bucket_image(fs, &p.blk, nb, buf);
				r = bucket_put(t, fs, blk, buf, false);
				done = true;
				*ret_more = true;
			}
		}
	}
	if (r == 0 && !done) {
		/* no values left: the tree's records and clusters, then the block is plain */
		struct o2_tree_owner o;

		xt_owner(p.xb, &o);
		r = o2_trans_add(t, p.xb);
		if (r == 0)
			r = o2_tree_truncate(t, fs, &o, 0, UNINDEX_RECS, free_run, p.xb);
		if (r == 1) {
			*ret_more = true;
			r = 0;
		} else if (r == 0) {
			struct o2_xattr_block *xb = (struct o2_xattr_block *)(void *)p.xb->data;

			memset(p.xb->data + BLOCK_STORE_AT, 0, fs->bs - BLOCK_STORE_AT);
			xb->xb_flags = cpu_le16(le16(xb->xb_flags) & ~(uint16_t)XATTR_INDEXED);
			*ret_more = true; /* the plain block's values (none) and the inline store's */
		}
	}
out:
	plan_free(fs, &p);
	o2_brelse(fs, ib);
out_t:
	free(rs.blk);
	free(rs.clusters);
	free(buf);
	e = o2_trans_finish(t, r);
	return r < 0 ? r : e;
}

int o2_xattr_strip_values(struct o2_fs *fs, uint64_t ino)
{
	struct o2_buf *ib;
	bool more, indexed = false;
	int r = o2_inode_buf(fs, ino, &ib);

	if (r < 0)
		return r;
	more = le16(o2_buf_dinode(ib)->i_dyn_features) & O2_DYN_HAS_XATTR;
	if (more && le64(o2_buf_dinode(ib)->i_xattr_loc)) {
		struct o2_buf *xb;

		r = o2_bread(fs, le64(o2_buf_dinode(ib)->i_xattr_loc), O2_META_XATTR, &xb);
		if (r == 0) {
			indexed = block_indexed(xb);
			o2_brelse(fs, xb);
		}
	}
	o2_brelse(fs, ib);

	/* buckets first: their values, then the tree, until the block is plain */
	bool again = indexed;

	while (r == 0 && again)
		r = unindex_step(fs, ino, &again);
	while (r == 0 && more)
		r = strip_step(fs, ino, &more);
	return r;
}

/* ---- reflinks ---- */

static bool is_acl(unsigned type)
{
	return type == O2_XATTR_ACL_ACCESS || type == O2_XATTR_ACL_DEFAULT;
}

/* One attribute of the source, as o2_xattr_reflink copies it. */
struct src_attr {
	uint8_t type, name_len;
	bool local;
	uint64_t size;
	char name[O2_XATTR_NAME_MAX];
	uint8_t value[INLINE_VALUE_MAX];
};

struct src_attrs {
	struct src_attr *v;
	size_t n, cap;
};

static int collect_src(const struct o2_xattr *x, void *arg)
{
	struct src_attrs *a = arg;

	if (is_acl(x->type))
		return 0;
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 16;
		struct src_attr *n = o2_realloc(a->v, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		a->v = n;
		a->cap = cap;
	}
	struct src_attr *s = &a->v[a->n++];

	s->type = x->type;
	s->name_len = x->name_len;
	s->local = x->local;
	s->size = x->value_size;
	memcpy(s->name, x->name, x->name_len);
	if (x->local)
		memcpy(s->value, x->value, x->value_size);
	return 0;
}

/*
 * One value in clusters, shared: in one transaction src's root is marked
 * refcounted (if it was not), the refcount tree counts one more user, and
 * dst gets the entry with the same root.
 */
static int reflink_shared(struct o2_fs *fs, uint64_t src, uint64_t dst, const struct src_attr *a)
{
	struct change cs = { a->type, a->name, a->name_len, NULL, 0, 0, NULL };
	struct plan ps = { 0 }, pd = { 0 };
	struct o2_trans *t = NULL;
	struct o2_buf *sb = NULL, *db = NULL;
	uint32_t start = 0, len = 0;
	bool shared = false;
	int r, e;

	r = o2_inode_buf(fs, src, &sb);
	if (r == 0)
		r = o2_inode_buf(fs, dst, &db);
	if (r == 0)
		r = make_plan(fs, src, sb, &cs, &ps);
	if (r == 0 && !ps.old_at)
		r = -ENODATA;
	if (r == 0)
		r = value_run(fs, src, &ps.old_at->e[ps.old_i], &start, &len, &shared, NULL);
	if (r < 0)
		goto out;
	struct change cd = { a->type, a->name, a->name_len, a->value, a->size, O2_XATTR_CREATE,
			     ps.old_at->e[ps.old_i].body };
	uint64_t root = le64(o2_buf_dinode(sb)->i_refcount_loc);

	r = make_plan(fs, dst, db, &cd, &pd);
	/* no room in dst: a step of its own first, then again (the caller) */
	if (r == 0 && (pd.need_index || pd.need_split)) {
		r = pd.need_index ? make_indexed(fs, dst)
				  : bucket_split(fs, dst, name_hash(fs, a->name, a->name_len));
		if (r == 0)
			r = -EAGAIN;
		goto out;
	}
	if (r == 0 && (!root || le64(o2_buf_dinode(db)->i_refcount_loc) != root))
		r = o2_fail(fs, -EINVAL, "inode %llu is not in the refcount tree of its reflink "
			    "source %llu", (unsigned long long)dst, (unsigned long long)src);
	if (r == 0)
		r = o2_reserve(fs, &(struct o2_resv){ .meta = O2_RESV_TREE_META(5) }, NULL);
	if (r == 0)
		r = o2_trans_begin(fs, SET_CREDITS + O2_REFCOUNT_CREDITS + 2 * bucket_blocks(fs) + 4, &t);
	if (r < 0)
		goto out;
	if (len)
		r = o2_refcount_share(t, fs, root, start, len, !shared);
	if (r == 0 && len && !shared) {
		struct o2_xattr_value_root *vr =
			(struct o2_xattr_value_root *)(void *)ps.old_at->e[ps.old_i].body;

		vr->xr_list.recs[0].flags |= O2_EXT_REFCOUNTED;
		r = o2_trans_add(t, sb);
		if (r == 0 && ps.xb)
			r = o2_trans_add(t, ps.xb);
		if (r == 0)
			r = store_back(t, fs, sb, &ps);
	}
	if (r == 0)
		r = apply(t, fs, db, &cd, &pd);
out:
	plan_free(fs, &ps);
	plan_free(fs, &pd);
	if (sb)
		o2_brelse(fs, sb);
	if (db)
		o2_brelse(fs, db);
	if (!t)
		return r;
	e = o2_trans_finish(t, r);
	return r < 0 ? r : e;
}

int o2_xattr_reflink(struct o2_fs *fs, uint64_t src, uint64_t dst)
{
	struct src_attrs all = { 0 };
	int r = o2_xattr_iterate_blkno(fs, src, collect_src, &all);

	for (size_t i = 0; r == 0 && i < all.n; i++) {
		const struct src_attr *a = &all.v[i];

		if (a->local) {
			r = o2_xattr_set(fs, dst, a->type, a->name, a->name_len, a->value,
					 (size_t)a->size, O2_XATTR_CREATE);
			continue;
		}
		/* a step to make room in dst comes back for the attribute itself */
		for (unsigned steps = 0; (r = reflink_shared(fs, src, dst, a)) == -EAGAIN; steps++)
			if (steps == 64)
				return o2_fail(fs, -ENOSPC, "inode %llu: no room for a reflinked xattr "
					       "after 64 bucket splits", (unsigned long long)dst);
	}
	free(all.v);
	return r;
}

/* ---- names ---- */

static const char *const prefixes[] = {
	[O2_XATTR_USER] = "user.",
	[O2_XATTR_ACL_ACCESS] = "system.posix_acl_access",
	[O2_XATTR_ACL_DEFAULT] = "system.posix_acl_default",
	[O2_XATTR_TRUSTED] = "trusted.",
	[O2_XATTR_SECURITY] = "security.",
};

const char *o2_xattr_prefix(unsigned type)
{
	return type && type <= O2_XATTR_SECURITY ? prefixes[type] : NULL;
}

int o2_xattr_parse_name(const char *full, unsigned *ret_type, const char **ret_name)
{
	for (unsigned t = 1; t <= O2_XATTR_SECURITY; t++) {
		size_t n = strlen(prefixes[t]);
		bool acl = t == O2_XATTR_ACL_ACCESS || t == O2_XATTR_ACL_DEFAULT;

		if (acl ? strcmp(full, prefixes[t]) : strncmp(full, prefixes[t], n))
			continue;
		*ret_type = t;
		*ret_name = full + n;
		return acl || full[n] ? 0 : -EINVAL;
	}
	return -EOPNOTSUPP;
}
