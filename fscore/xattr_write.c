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
 * Not here: a block that has become indexed (buckets) is refused, as is
 * changing a value whose tree is deeper than its root (-EOPNOTSUPP, with a
 * message).  When neither store has room the answer is -ENOSPC, the limit
 * ext4 has without ea_inode; the kernel would index the block instead.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
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

/* The name hash fsck.ocfs2 checks: its bytes as (signed) char, as it reads them. */
static uint32_t name_hash(const struct o2_fs *fs, const char *name, size_t len)
{
	uint32_t h = fs->info.uuid_hash;

	for (size_t i = 0; i < len; i++)
		h = (h << 5) ^ (h >> 27) ^ (uint32_t)(int32_t)(signed char)name[i];
	return h;
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
 * The one run of clusters a value root maps, and whether a reflink shares
 * it (counted in the inode's refcount tree); -EOPNOTSUPP for a deeper tree.
 */
static int value_run(struct o2_fs *fs, uint64_t ino, const struct xent *x, uint32_t *ret_start,
		     uint32_t *ret_len, bool *ret_shared)
{
	const struct o2_xattr_value_root *vr = (const struct o2_xattr_value_root *)(const void *)x->body;

	*ret_len = 0;
	*ret_shared = false;
	if (le16(vr->xr_list.tree_depth) || le16(vr->xr_list.next_free_rec) > 1)
		return o2_fail(fs, -EOPNOTSUPP, "inode %llu: xattr %.*s has a value tree of more than "
			       "one extent; changing it is not implemented",
			       (unsigned long long)ino, x->name_len, x->name);
	if (le16(vr->xr_list.next_free_rec) == 1) {
		*ret_start = (uint32_t)(le64(vr->xr_list.recs[0].blkno) >> fs->bpc_bits);
		*ret_len = le16(vr->xr_list.recs[0].leaf_clusters);
		*ret_shared = (vr->xr_list.recs[0].flags & O2_EXT_REFCOUNTED) != 0;
	}
	return 0;
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
	uint32_t need;		     /* clusters the new value takes */
	struct xent add;
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
	if (le16(xb->xb_flags) & XATTR_INDEXED)
		return o2_fail(fs, -EOPNOTSUPP, "inode %llu keeps its xattrs in buckets; "
			       "changing them is not implemented", (unsigned long long)ino);
	return load_store(fs, loc, p->xb->data + BLOCK_STORE_AT, fs->bs - BLOCK_STORE_AT, &p->blk);
}

/* Read both stores and decide everything before anything changes. */
static int make_plan(struct o2_fs *fs, uint64_t ino, struct o2_buf *ib, const struct change *c,
		     struct plan *p)
{
	struct o2_dinode *di = o2_buf_dinode(ib);
	int r = load_stores(fs, ino, ib, p), i;

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
				      &p->old_shared);
			if (r < 0)
				return r;
		}
	} else if (!c->value || (c->flags & O2_XATTR_REPLACE)) {
		return -ENODATA;
	}
	/* letting go of a shared value may split a refcount record */
	if (!c->value)
		return p->old_shared ? o2_reserve(fs, &(struct o2_resv){ .meta = O2_RESV_TREE_META(5),
									  .freeing = true }, NULL) : 0;

	/* the new entry, its value root filled in once its clusters exist */
	struct xent *a = &p->add;

	a->type = (uint8_t)c->type;
	a->name_len = (uint8_t)c->len;
	memcpy(a->name, c->name, c->len);
	a->value_size = c->size;
	a->local = c->size <= INLINE_VALUE_MAX;
	if (a->local)
		memcpy(a->body, c->value, c->size);
	else
		p->need = (uint32_t)((c->size + fs->cs - 1) >> fs->cbits);

	/* placed as if the old one were gone: the inode's tail first, then the block */
	size_t want = ENTRY_BYTES + nv_bytes(a);
	size_t in_len = p->in.len, blk_len = p->blk.len;

	if (!in_len && can_make_inline(fs, di))
		in_len = fs->info.xattr_inline_size;
	if (!blk_len)
		blk_len = fs->bs - BLOCK_STORE_AT;
	if (in_len && used_bytes(&p->in, p->old_at == &p->in ? p->old_i : -1) + want <= in_len)
		p->new_at = &p->in;
	else if (used_bytes(&p->blk, p->old_at == &p->blk ? p->old_i : -1) + want <= blk_len)
		p->new_at = &p->blk;
	else
		return -ENOSPC;

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
	if (p->need || p->make_block || p->old_shared)
		return o2_reserve(fs, &(struct o2_resv){ .clusters = p->need, .run = p->need,
							 .meta = (p->make_block ? 1 : 0) +
								 (p->old_shared ? O2_RESV_TREE_META(5) : 0) },
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
	if (p->xb && p->blk.n == 0) {
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
		o2_touch(fs, di, false, true);
	return r;
}

static int change_in(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib,
		     const struct change *c)
{
	struct plan p = { 0 };
	int r = make_plan(fs, ib->blkno, ib, c, &p);

	if (r == 0)
		r = apply(t, fs, ib, c, &p);
	plan_free(fs, &p);
	return r;
}

int o2_xattr_change_in(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, unsigned type,
		       const char *name, size_t len, const void *value, size_t size, unsigned flags)
{
	static const uint8_t empty[1];
	struct change c = { type, name, len, value && !size ? empty : value, size, flags };
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
	if (r == 0)
		r = o2_trans_begin_freeing(fs, SET_CREDITS, &t);
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
	struct change c = { type, name, len, value ? value : empty, size, flags };

	if (!value && size)
		return -EINVAL;
	return change(fs, ino, &c);
}

int o2_xattr_remove(struct o2_fs *fs, uint64_t ino, unsigned type, const char *name, size_t len)
{
	struct change c = { type, name, len, NULL, 0, 0 };

	return change(fs, ino, &c);
}

/* ---- freeing values in steps ---- */

#define STRIP_RUNS 16
#define STRIP_CREDITS (4 + O2_ALLOC_CREDITS + 2 * STRIP_RUNS + O2_REFCOUNT_CREDITS)

/* One transaction: up to STRIP_RUNS values out of their clusters and stores. */
static int strip_step(struct o2_fs *fs, uint64_t ino, bool *ret_more)
{
	struct plan p = { 0 };
	struct o2_trans *t;
	struct o2_buf *ib;
	uint32_t start[STRIP_RUNS], len[STRIP_RUNS];
	bool shared[STRIP_RUNS];
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
				} else if (runs == STRIP_RUNS || (runs && shared[runs - 1])) {
					*ret_more = true;
					break;
				} else {
					r = value_run(fs, ino, &s->e[i], &start[runs], &len[runs],
						      &shared[runs]);
					/* a shared value is released alone: its credits */
					if (r == 0 && shared[runs] && runs) {
						*ret_more = true;
						break;
					}
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
		}
		plan_free(fs, &p);
		o2_brelse(fs, ib);
	}
	e = o2_trans_finish(t, r);
	return r < 0 ? r : e;
}

int o2_xattr_strip_values(struct o2_fs *fs, uint64_t ino)
{
	struct o2_buf *ib;
	bool more;
	int r = o2_inode_buf(fs, ino, &ib);

	if (r < 0)
		return r;
	more = le16(o2_buf_dinode(ib)->i_dyn_features) & O2_DYN_HAS_XATTR;
	o2_brelse(fs, ib);

	while (r == 0 && more)
		r = strip_step(fs, ino, &more);
	return r;
}

/* ---- reflinks ---- */

#define REFLINK_XATTR_CREDITS (8 + O2_ALLOC_CREDITS + O2_REFCOUNT_CREDITS)

static bool is_acl(unsigned type)
{
	return type == O2_XATTR_ACL_ACCESS || type == O2_XATTR_ACL_DEFAULT;
}

/* An empty store of len bytes for entries to be added to. */
static int store_make(struct store *s, size_t len)
{
	s->len = len;
	s->n = 0;
	s->max = (unsigned)(len / ENTRY_BYTES) + 1;
	s->e = o2_malloc((size_t)s->max * sizeof(*s->e));
	return s->e ? 0 : -ENOMEM;
}

/*
 * One transaction of o2_xattr_reflink: every local value dst lacks, and
 * at most one value in clusters, shared.  *ret_done once dst has them all.
 */
static int reflink_step(struct o2_fs *fs, uint64_t src, uint64_t dst, bool *ret_done)
{
	struct plan ps = { 0 }, pd = { 0 };
	struct o2_trans *t;
	struct o2_buf *sb = NULL, *db = NULL;
	bool shared_one = false, src_changed = false;
	unsigned added = 0;
	int r, e;

	*ret_done = false;
	r = o2_reserve(fs, &(struct o2_resv){ .meta = 1 + O2_RESV_TREE_META(5) }, NULL);
	if (r == 0)
		r = o2_trans_begin(fs, REFLINK_XATTR_CREDITS, &t);
	if (r < 0)
		return r;
	r = o2_inode_buf(fs, src, &sb);
	if (r == 0)
		r = o2_inode_buf(fs, dst, &db);
	if (r == 0)
		r = load_stores(fs, src, sb, &ps);
	if (r == 0)
		r = load_stores(fs, dst, db, &pd);
	if (r < 0)
		goto out;
	struct o2_dinode *sd = o2_buf_dinode(sb), *dd = o2_buf_dinode(db);
	uint64_t root = le64(sd->i_refcount_loc);

	for (int k = 0; r == 0 && k < 2; k++) {
		struct store *from = k ? &ps.blk : &ps.in, *to = k ? &pd.blk : &pd.in;

		for (unsigned i = 0; r == 0 && i < from->n; i++) {
			struct xent *x = &from->e[i];

			if (is_acl(x->type) || find(to, x->type, x->name, x->name_len) >= 0)
				continue;
			if (!x->local && shared_one)
				continue; /* the next step's */
			if (!to->len && k == 0) {
				if (!can_make_inline(fs, dd) || fs->info.xattr_inline_size != from->len) {
					r = o2_fail(fs, -EOPNOTSUPP, "inode %llu: the reflink has no room "
						    "for its source's inline attributes",
						    (unsigned long long)dst);
					break;
				}
				r = store_make(to, from->len);
				pd.make_inline = r == 0;
			} else if (!to->len) {
				r = store_make(to, from->len);
				pd.make_block = r == 0;
			}
			if (r < 0)
				break;
			struct xent copy = *x;

			if (!x->local) {
				uint32_t start, len;
				bool shared;
				struct o2_xattr_value_root *vr;

				r = value_run(fs, src, x, &start, &len, &shared);
				if (r == 0 && (!(le16(dd->i_dyn_features) & O2_DYN_HAS_REFCOUNT) ||
					       le64(dd->i_refcount_loc) != root || !root))
					r = o2_fail(fs, -EINVAL, "inode %llu is not in the refcount tree "
						    "of its reflink source %llu", (unsigned long long)dst,
						    (unsigned long long)src);
				if (r == 0 && len)
					r = o2_refcount_share(t, fs, root, start, len, !shared);
				if (r < 0)
					break;
				if (!shared && len) {
					vr = (struct o2_xattr_value_root *)(void *)x->body;
					vr->xr_list.recs[0].flags |= O2_EXT_REFCOUNTED;
					src_changed = true;
				}
				vr = (struct o2_xattr_value_root *)(void *)copy.body;
				if (len)
					vr->xr_list.recs[0].flags |= O2_EXT_REFCOUNTED;
				shared_one = true;
			}
			to->e[to->n++] = copy;
			added++;
		}
	}
	if (r == 0 && !added) {
		*ret_done = true;
		goto out;
	}
	if (r == 0)
		r = o2_trans_add(t, db);
	if (r == 0 && pd.xb)
		r = o2_trans_add(t, pd.xb);
	if (r == 0 && pd.make_block)
		r = new_block(t, fs, db, &pd);
	if (r == 0 && pd.make_inline)
		make_inline(fs, dd);
	if (r == 0)
		r = store_back(t, fs, db, &pd);
	if (r == 0 && src_changed) {
		r = o2_trans_add(t, sb);
		if (r == 0 && ps.xb)
			r = o2_trans_add(t, ps.xb);
		if (r == 0)
			r = store_back(t, fs, sb, &ps);
	}
out:
	plan_free(fs, &ps);
	plan_free(fs, &pd);
	if (sb)
		o2_brelse(fs, sb);
	if (db)
		o2_brelse(fs, db);
	e = o2_trans_finish(t, r);
	return r < 0 ? r : e;
}

int o2_xattr_reflink(struct o2_fs *fs, uint64_t src, uint64_t dst)
{
	struct o2_buf *sb;
	bool done = false;
	int r = o2_inode_buf(fs, src, &sb);

	if (r < 0)
		return r;
	done = !(le16(o2_buf_dinode(sb)->i_dyn_features) & O2_DYN_HAS_XATTR);
	o2_brelse(fs, sb);
	while (r == 0 && !done)
		r = reflink_step(fs, src, dst, &done);
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
