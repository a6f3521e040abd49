/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Extended attributes, read side: find and check every attribute an inode
 * carries, wherever the format keeps it.
 *
 * An inode's attributes live in up to three kinds of store, each an
 * o2_xattr_header followed by its entries, with names and values packed
 * from the store's end down towards the entries:
 *   - the inode's own tail (OCFS2_INLINE_XATTR_FL, i_xattr_inline_size
 *     bytes at the end of the inode block);
 *   - one xattr block (i_xattr_loc), whose header follows the block's own
 *     fields;
 *   - or, once that block is indexed (OCFS2_XATTR_INDEXED), a tree whose
 *     leaves are runs of clusters holding 4 KiB buckets, each a store (the
 *     first bucket of a run says how many buckets the run holds).
 * A value longer than OCFS2_XATTR_INLINE_SIZE (80 bytes) is not in the
 * store: the store keeps its value root, an extent list of the clusters
 * holding it (the entry's type says which: OCFS2_XATTR_ENTRY_LOCAL).
 *
 * Everything read is checked before it is used: an entry's name and value
 * must lie inside its store, past the entries; a value root's list must be
 * a sound extent list and map as many clusters as it claims, enough for
 * the value.  Damage is -EUCLEAN with a message naming the block.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "blockcheck.h"
#include "error.h"
#include "inode_write.h"
#include "internal.h"
#include "journal.h"
#include "meta.h"
#include "write.h"

#define XATTR_INLINE_VALUE_MAX 80u /* OCFS2_XATTR_INLINE_SIZE */
#define XATTR_BUCKET_BYTES 4096u
#define XATTR_INDEXED 0x1
#define XATTR_LOCAL 0x80
#define XATTR_TYPE_MASK 0x7f
#define XATTR_TYPE_MAX 5 /* user 1, POSIX ACL access 2 and default 3, trusted 4, security 5 */
#define XATTR_ACL_ACCESS 2
#define XATTR_ACL_DEFAULT 3

static unsigned padded(uint64_t n)
{
	return (unsigned)((n + 3) & ~(uint64_t)3);
}

struct store_walk {
	struct o2_fs *fs;
	o2_xattr_fn fn;
	void *arg;
	o2_extent_fn tree_fn; /* extent blocks and clusters of value trees */
	void *tree_arg;
	/* only the buckets names of this hash can be in (a lookup) */
	bool by_hash;
	uint32_t hash;
};

uint32_t o2_xattr_name_hash(const struct o2_fs *fs, const char *name, size_t len)
{
	uint32_t h = fs->info.uuid_hash;

	/* its bytes as (signed) char, as fsck.ocfs2 and the kernel read them */
	for (size_t i = 0; i < len; i++)
		h = (h << 5) ^ (h >> 27) ^ (uint32_t)(int32_t)(signed char)name[i];
	return h;
}

struct value_count {
	uint64_t clusters;
	o2_extent_fn fn;
	void *arg;
};

static int count_value_extent(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	struct value_count *c = arg;

	if (ext)
		c->clusters += ext->clusters;
	return c->fn ? c->fn(ext, eb_blkno, c->arg) : 0;
}

/* A value kept outside its store: check its root and walk its tree. */
static int check_value_root(struct store_walk *sw, uint64_t blkno, const uint8_t *root_at,
			    size_t room, const struct o2_xattr *x, uint32_t *ret_clusters)
{
	struct o2_fs *fs = sw->fs;
	struct o2_xattr_value_root *vr = (struct o2_xattr_value_root *)(uintptr_t)root_at;
	size_t head = offsetof(struct o2_xattr_value_root, xr_list.recs);
	unsigned count;
	int r;

	if (room < head + sizeof(struct o2_extent_rec))
		return o2_corrupt(fs, blkno, "xattr %.*s: no room for its value root", x->name_len,
				  x->name);
	/* a value root holds one record; a bigger value tree grows in depth */
	count = le16(vr->xr_list.count);
	if (count != 1)
		return o2_corrupt(fs, blkno, "xattr %.*s: its value root lists %u records, not 1",
				  x->name_len, x->name, count);
	r = o2_check_extent_list(fs, blkno, &vr->xr_list, count, "xattr value root");
	if (r < 0)
		return r;

	struct o2_tree_root tr = { blkno, &vr->xr_list, count };
	struct value_count c = { 0, sw->tree_fn, sw->tree_arg };

	r = o2_tree_walk(fs, &tr, count_value_extent, &c);
	if (r)
		return r;
	if (c.clusters != le32(vr->xr_clusters))
		return o2_corrupt(fs, blkno, "xattr %.*s: its value tree maps %llu clusters, its root "
				  "says %u", x->name_len, x->name, (unsigned long long)c.clusters,
				  le32(vr->xr_clusters));
	if (x->value_size > (c.clusters << fs->cbits))
		return o2_corrupt(fs, blkno, "xattr %.*s: a value of %llu bytes in %llu clusters",
				  x->name_len, x->name, (unsigned long long)x->value_size,
				  (unsigned long long)c.clusters);
	*ret_clusters = (uint32_t)c.clusters;
	return 0;
}

/*
 * One store: the header at h, len bytes from h.  blkno names it in
 * messages (the inode, the xattr block or the bucket's first block).
 */
static int walk_store(struct store_walk *sw, uint64_t blkno, const uint8_t *h, size_t len)
{
	struct o2_fs *fs = sw->fs;
	const struct o2_xattr_header *xh = (const struct o2_xattr_header *)(const void *)h;
	size_t head = offsetof(struct o2_xattr_header, xh_entries);
	unsigned n;

	if (len < head)
		return o2_corrupt(fs, blkno, "xattr store of %zu bytes is smaller than its header", len);
	n = le16(xh->xh_count);
	if (head + (size_t)n * sizeof(struct o2_xattr_entry) > len)
		return o2_corrupt(fs, blkno, "xattr store lists %u entries, room for %zu", n,
				  (len - head) / sizeof(struct o2_xattr_entry));
	size_t entries_end = head + (size_t)n * sizeof(struct o2_xattr_entry);

	for (unsigned i = 0; i < n; i++) {
		const struct o2_xattr_entry *xe = &xh->xh_entries[i];
		size_t off = le16(xe->xe_name_offset), name_room;
		struct o2_xattr x = { 0 };
		int r;

		x.type = xe->xe_type & XATTR_TYPE_MASK;
		x.local = (xe->xe_type & XATTR_LOCAL) != 0;
		x.name_len = xe->xe_name_len;
		x.value_size = le64(xe->xe_value_size);
		x.store_blkno = blkno;
		if (x.type == 0 || x.type > XATTR_TYPE_MAX)
			return o2_corrupt(fs, blkno, "xattr entry %u has unknown name type %u", i, x.type);
		/* POSIX ACLs are kept under an empty name; every other kind has one */
		if (x.name_len == 0 && x.type != XATTR_ACL_ACCESS && x.type != XATTR_ACL_DEFAULT)
			return o2_corrupt(fs, blkno, "xattr entry %u has an empty name", i);
		name_room = padded(x.name_len);
		if (off < entries_end || off > len || len - off < name_room)
			return o2_corrupt(fs, blkno, "xattr entry %u: name at offset %zu (%u bytes) is "
					  "outside its store (%zu-%zu)", i, off, x.name_len,
					  entries_end, len);
		x.name = (const char *)h + off;
		off += name_room;
		/* the format keeps a value in the store exactly when it is short */
		if (x.local != (x.value_size <= XATTR_INLINE_VALUE_MAX))
			return o2_corrupt(fs, blkno, "xattr %.*s: a value of %llu bytes kept %s its "
					  "store", x.name_len, x.name,
					  (unsigned long long)x.value_size, x.local ? "in" : "outside");
		if (x.local) {
			if (len - off < padded(x.value_size))
				return o2_corrupt(fs, blkno, "xattr %.*s: a local value of %llu bytes "
						  "does not fit its store", x.name_len, x.name,
						  (unsigned long long)x.value_size);
			x.value = h + off;
		} else {
			x.root = h + off;
			r = check_value_root(sw, blkno, h + off, len - off, &x, &x.value_clusters);
			if (r)
				return r;
		}
		r = sw->fn ? sw->fn(&x, sw->arg) : 0;
		if (r)
			return r;
	}
	return 0;
}

struct bucket_walk {
	struct store_walk *sw;
	uint8_t *bucket;
	uint64_t buckets;
};

int o2_xattr_bucket_read(struct o2_fs *fs, uint64_t blkno, uint8_t *bucket)
{
	unsigned blocks = XATTR_BUCKET_BYTES >> fs->bits;

	for (unsigned i = 0; i < blocks; i++) {
		int r = o2_read_meta(fs, blkno + i, O2_META_PLAIN, bucket + ((size_t)i << fs->bits));

		if (r < 0)
			return r;
	}
	if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_META_ECC)) {
		struct o2_xattr_header *xh = (struct o2_xattr_header *)(void *)bucket;

		if (o2_blockcheck_verify(bucket, XATTR_BUCKET_BYTES, &xh->xh_check) < 0)
			return o2_corrupt(fs, blkno, "xattr bucket checksum mismatch");
	}
	return 0;
}

/* One leaf of an indexed block's tree: a run of clusters holding buckets. */
static int walk_bucket_run(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	struct bucket_walk *bw = arg;
	struct o2_fs *fs = bw->sw->fs;
	uint64_t per_bucket = XATTR_BUCKET_BYTES >> fs->bits;
	uint64_t room, n;
	int r;

	if (bw->sw->tree_fn) {
		r = bw->sw->tree_fn(ext, eb_blkno, bw->sw->tree_arg);
		if (r)
			return r;
	}
	if (!ext)
		return 0;
	room = ((uint64_t)ext->clusters << fs->bpc_bits) / per_bucket;
	r = o2_xattr_bucket_read(fs, ext->blkno, bw->bucket);
	if (r < 0)
		return r;
	n = le16(((const struct o2_xattr_header *)(const void *)bw->bucket)->xh_num_buckets);
	if (n == 0 || n > room)
		return o2_corrupt(fs, ext->blkno, "xattr bucket run of %llu buckets in room for %llu",
				  (unsigned long long)n, (unsigned long long)room);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t blkno = ext->blkno + i * per_bucket;

		if (i) {
			r = o2_xattr_bucket_read(fs, blkno, bw->bucket);
			if (r < 0)
				return r;
		}
		r = walk_store(bw->sw, blkno, bw->bucket, XATTR_BUCKET_BYTES);
		if (r)
			return r;
		bw->buckets++;
	}
	return 0;
}

int o2_xattr_bucket_first_hash(struct o2_fs *fs, uint64_t blkno, bool *has, uint32_t *hash)
{
	struct o2_buf *b;
	int r = o2_bread(fs, blkno, O2_META_PLAIN, &b);

	if (r < 0)
		return r;
	const struct o2_xattr_header *xh = (const struct o2_xattr_header *)(const void *)b->data;

	*has = le16(xh->xh_count) != 0;
	*hash = *has ? le32(xh->xh_entries[0].xe_name_hash) : 0;
	o2_brelse(fs, b);
	return 0;
}

/*
 * A lookup's buckets: in the run whose record is the last at or below the
 * hash, from the last bucket whose first hash is at or below it, on while
 * the next ones start with that very hash.
 */
static int walk_hash_buckets(struct store_walk *sw, const struct o2_tree_root *tr, uint8_t *bucket)
{
	struct o2_fs *fs = sw->fs;
	uint64_t per_bucket = XATTR_BUCKET_BYTES >> fs->bits;
	struct o2_extent ext;
	unsigned n, idx = 0;
	int r = o2_tree_lookup_le(fs, tr, sw->hash, &ext);

	if (r < 0)
		return r;
	r = o2_xattr_bucket_read(fs, ext.blkno, bucket);
	if (r < 0)
		return r;
	n = le16(((const struct o2_xattr_header *)(const void *)bucket)->xh_num_buckets);
	if (n == 0 || n > ((uint64_t)ext.clusters << fs->bpc_bits) / per_bucket)
		return o2_corrupt(fs, ext.blkno, "xattr bucket run of %u buckets in room for %llu", n,
				  (unsigned long long)(((uint64_t)ext.clusters << fs->bpc_bits) /
						       per_bucket));
	for (unsigned i = 1; i < n; i++) {
		bool has;
		uint32_t h;

		r = o2_xattr_bucket_first_hash(fs, ext.blkno + i * per_bucket, &has, &h);
		if (r < 0)
			return r;
		if (has && h > sw->hash)
			break;
		if (has)
			idx = i;
	}
	for (unsigned i = idx; i < n; i++) {
		uint64_t blkno = ext.blkno + i * per_bucket;

		if (i > idx) {
			bool has;
			uint32_t h;

			r = o2_xattr_bucket_first_hash(fs, blkno, &has, &h);
			if (r < 0 || !has || h != sw->hash)
				return r;
		}
		r = o2_xattr_bucket_read(fs, blkno, bucket);
		if (r == 0)
			r = walk_store(sw, blkno, bucket, XATTR_BUCKET_BYTES);
		if (r)
			return r;
	}
	return 0;
}

static int walk_block(struct store_walk *sw, uint64_t ino_blkno, uint64_t blkno)
{
	struct o2_fs *fs = sw->fs;
	uint8_t *buf = o2_malloc(fs->bs);
	const struct o2_xattr_block *xb;
	size_t at = offsetof(struct o2_xattr_block, xb_attrs);
	int r;

	if (!buf)
		return -ENOMEM;
	if (blkno >= fs->nblocks || blkno <= O2_SUPER_BLKNO) {
		r = o2_corrupt(fs, ino_blkno, "xattr block %llu is outside the volume",
			       (unsigned long long)blkno);
		goto out;
	}
	r = o2_read_meta(fs, blkno, O2_META_XATTR, buf);
	if (r < 0)
		goto out;
	xb = (const struct o2_xattr_block *)(const void *)buf;
	r = o2_check_meta_head(fs, blkno, "xattr block", xb->xb_signature, O2_SIG_XATTR,
			       le64(xb->xb_blkno), le32(xb->xb_fs_generation));
	if (r < 0)
		goto out;
	if (!(le16(xb->xb_flags) & XATTR_INDEXED)) {
		r = walk_store(sw, blkno, buf + at, fs->bs - at);
		goto out;
	}
	if (fs->bs > XATTR_BUCKET_BYTES) {
		r = o2_corrupt(fs, blkno, "indexed xattr block on a volume with %u-byte blocks", fs->bs);
		goto out;
	}

	struct o2_xattr_tree_root *xt = (struct o2_xattr_tree_root *)(void *)(buf + at);
	unsigned max = (unsigned)((fs->bs - at - offsetof(struct o2_xattr_tree_root, xt_list.recs)) /
				  sizeof(struct o2_extent_rec));
	struct bucket_walk bw = { sw, o2_malloc(XATTR_BUCKET_BYTES), 0 };

	if (!bw.bucket) {
		r = -ENOMEM;
		goto out;
	}
	r = o2_check_extent_list(fs, blkno, &xt->xt_list, max, "xattr tree root");
	if (r == 0 && sw->by_hash) {
		r = walk_hash_buckets(sw, &(struct o2_tree_root){ blkno, &xt->xt_list, max },
				      bw.bucket);
	} else if (r == 0) {
		struct o2_tree_root tr = { blkno, &xt->xt_list, max };

		r = o2_tree_walk(fs, &tr, walk_bucket_run, &bw);
	}
	free(bw.bucket);
out:
	free(buf);
	return r;
}

/* Every store of the inode whose block is ibuf (trusted no further than its checksum). */
static int walk_inode_sw(struct store_walk *swp, const uint8_t *ibuf)
{
	struct o2_fs *fs = swp->fs;
	const struct o2_dinode *di = (const struct o2_dinode *)(const void *)ibuf;
	uint16_t dyn = le16(di->i_dyn_features);
	uint64_t blkno = le64(di->i_blkno), loc = le64(di->i_xattr_loc);
	struct store_walk sw = *swp;
	int r = 0;

	if (!(dyn & O2_DYN_HAS_XATTR))
		return 0;
	if (dyn & O2_DYN_INLINE_XATTR) {
		size_t len = le16(di->i_xattr_inline_size);

		if (len > fs->bs - offsetof(struct o2_dinode, id2))
			return o2_corrupt(fs, blkno, "inline xattr size %zu does not fit the block", len);
		r = walk_store(&sw, blkno, ibuf + fs->bs - len, len);
		if (r)
			return r;
	}
	if (loc)
		r = walk_block(&sw, blkno, loc);
	return r;
}

static int walk_inode(struct o2_fs *fs, const uint8_t *ibuf, o2_xattr_fn fn, void *arg,
		      o2_extent_fn tree_fn, void *tree_arg)
{
	struct store_walk sw = { fs, fn, arg, tree_fn, tree_arg, false, 0 };

	return walk_inode_sw(&sw, ibuf);
}

int o2_xattr_walk(struct o2_fs *fs, struct o2_inode *ino, o2_xattr_fn fn, void *arg,
		  o2_extent_fn tree_fn, void *tree_arg)
{
	return walk_inode(fs, ino->buf, fn, arg, tree_fn, tree_arg);
}

int o2_xattr_iterate(struct o2_fs *fs, struct o2_inode *ino, o2_xattr_fn fn, void *arg)
{
	return o2_xattr_walk(fs, ino, fn, arg, NULL, NULL);
}

int o2_xattr_iterate_blkno(struct o2_fs *fs, uint64_t blkno, o2_xattr_fn fn, void *arg)
{
	struct o2_inode *in;
	int r = o2_inode_get(fs, blkno, &in);

	if (r < 0)
		return r;
	r = o2_xattr_iterate(fs, in, fn, arg);
	o2_inode_unref(in);
	return r;
}

int o2_xattr_store_walk(struct o2_fs *fs, uint64_t blkno, const uint8_t *h, size_t len,
			o2_xattr_fn fn, void *arg)
{
	struct store_walk sw = { fs, fn, arg, NULL, NULL, false, 0 };

	return walk_store(&sw, blkno, h, len);
}

/* ---- reading one attribute ---- */

struct value_read {
	struct o2_fs *fs;
	uint8_t *buf;
	uint64_t size, done;
};

static int read_value_extent(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	struct value_read *vr = arg;
	struct o2_fs *fs = vr->fs;

	if (!ext || vr->done >= vr->size)
		return 0;
	if (((uint64_t)ext->cpos << fs->cbits) != vr->done)
		return o2_corrupt(fs, eb_blkno, "xattr value tree has a hole at cluster %llu",
				  (unsigned long long)(vr->done >> fs->cbits));

	uint64_t want = vr->size - vr->done, have = (uint64_t)ext->clusters << fs->cbits;
	uint64_t n = want < have ? want : have;
	unsigned blocks = (unsigned)((n + fs->bs - 1) >> fs->bits);
	uint8_t *tmp = o2_malloc((size_t)blocks << fs->bits);
	int r;

	if (!tmp)
		return -ENOMEM;
	r = o2_read_blocks(fs, ext->blkno, blocks, tmp);
	if (r == 0) {
		memcpy(vr->buf + vr->done, tmp, (size_t)n);
		vr->done += n;
	}
	free(tmp);
	return r;
}

int o2_xattr_read_value(struct o2_fs *fs, const struct o2_xattr *x, void *buf)
{
	if (x->local) {
		memcpy(buf, x->value, (size_t)x->value_size);
		return 0;
	}

	struct o2_xattr_value_root *root = (struct o2_xattr_value_root *)(uintptr_t)x->root;
	struct o2_tree_root tr = { x->store_blkno, &root->xr_list, le16(root->xr_list.count) };
	struct value_read vr = { fs, buf, x->value_size, 0 };
	int r = o2_tree_walk(fs, &tr, read_value_extent, &vr);

	if (r == 0 && vr.done < vr.size)
		r = o2_corrupt(fs, x->store_blkno, "xattr %.*s: its value tree ends before its value",
			       x->name_len, x->name);
	return r;
}

struct get_one {
	struct o2_fs *fs;
	uint8_t type;
	const char *name;
	size_t len;
	void *buf;
	size_t size;
	int64_t result;
};

static int get_match(const struct o2_xattr *x, void *arg)
{
	struct get_one *g = arg;
	int r;

	if (x->type != g->type || x->name_len != g->len || memcmp(x->name, g->name, g->len))
		return 0;
	if (g->size == 0) {
		g->result = (int64_t)x->value_size;
		return 1;
	}
	if (x->value_size > g->size) {
		g->result = -ERANGE;
		return 1;
	}
	r = o2_xattr_read_value(g->fs, x, g->buf);
	g->result = r < 0 ? r : (int64_t)x->value_size;
	return 1;
}

ssize_t o2_xattr_get(struct o2_fs *fs, uint64_t ino, unsigned type, const char *name, size_t len,
		     void *buf, size_t size)
{
	struct get_one g = { fs, (uint8_t)type, name, len, buf, size, -ENODATA };
	struct store_walk sw = { fs, get_match, &g, NULL, NULL, true,
				 o2_xattr_name_hash(fs, name, len) };
	struct o2_inode *in;
	int r;

	if (type == 0 || type > XATTR_TYPE_MAX || len > 255)
		return -EINVAL;
	r = o2_inode_get(fs, ino, &in);
	if (r < 0)
		return r;
	/* the inode's stores; of buckets only those the name's hash leads to */
	r = walk_inode_sw(&sw, in->buf);
	o2_inode_unref(in);
	if (r < 0)
		return r;
	return (ssize_t)g.result;
}

/* ---- freeing (write side): an inode's xattrs go with the inode ---- */

/*
 * What freeing an inode's xattrs takes: the runs of clusters its values
 * hold, and its xattr block.  What fscore can free: values whose trees are
 * a single record (the root's own), and no buckets; anything else is
 * -EOPNOTSUPP, said before the last link goes.  The transaction that frees
 * the inode (O2_XATTR_FREE_CREDITS) takes at most XATTR_FREE_MAX_RUNS
 * runs; an inode with more has them stripped first, in steps
 * (o2_xattr_strip_values).
 */
#define XATTR_FREE_MAX_RUNS 16

struct free_plan {
	struct o2_fs *fs;
	uint32_t start[XATTR_FREE_MAX_RUNS], len[XATTR_FREE_MAX_RUNS];
	unsigned runs;
	bool deep, too_many, shared;
	uint64_t block; /* the xattr block, 0 if none */
};

static int plan_run(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	struct free_plan *p = arg;

	if (!ext) {
		p->deep = true;
		return 0;
	}
	if (ext->flags & O2_EXTENT_REFCOUNTED)
		p->shared = true;
	if (p->runs == XATTR_FREE_MAX_RUNS) {
		p->too_many = true;
		return 0;
	}
	p->start[p->runs] = (uint32_t)(ext->blkno >> p->fs->bpc_bits);
	p->len[p->runs++] = ext->clusters;
	return 0;
}

/* Plan from the inode's block as it is now (in a transaction, maybe half freed). */
static int plan_free(struct o2_fs *fs, const uint8_t *ibuf, struct free_plan *p)
{
	const struct o2_dinode *di = (const struct o2_dinode *)(const void *)ibuf;
	int r = 0;

	memset(p, 0, sizeof(*p));
	p->fs = fs;
	if ((le16(di->i_dyn_features) & O2_DYN_HAS_XATTR) && le64(di->i_xattr_loc)) {
		uint8_t *buf = o2_malloc(fs->bs);

		p->block = le64(di->i_xattr_loc);
		r = buf ? o2_read_meta(fs, p->block, O2_META_XATTR, buf) : -ENOMEM;
		/* buckets are taken apart in steps first (o2_xattr_strip_values) */
		if (r == 0 && (le16(((const struct o2_xattr_block *)(void *)buf)->xb_flags) &
			       XATTR_INDEXED)) {
			free(buf);
			p->too_many = true;
			return 0;
		}
		free(buf);
	}
	if (r == 0)
		r = walk_inode(fs, ibuf, NULL, NULL, plan_run, p);
	/* a deeper value tree's extent blocks go too: stripped first, in steps */
	if (r == 0 && p->deep)
		p->too_many = true;
	return r;
}

static int plan_free_ino(struct o2_fs *fs, uint64_t ino_blkno, struct free_plan *p)
{
	struct o2_buf *ib;
	int r = o2_inode_buf(fs, ino_blkno, &ib);

	if (r < 0)
		return r;
	r = plan_free(fs, ib->data, p);
	o2_brelse(fs, ib);
	return r;
}

int o2_xattr_block_free(struct o2_trans *t, struct o2_fs *fs, const uint8_t *buf)
{
	const struct o2_xattr_block *xb = (const struct o2_xattr_block *)(const void *)buf;

	/* xattr blocks come from the extent allocator and are only ever
	 * reused as journaled metadata: no revoke */
	return o2_suballoc_give_back(t, fs, O2_SYS_EXTENT_ALLOC, le16(xb->xb_suballoc_slot),
				     le64(xb->xb_suballoc_loc), le16(xb->xb_suballoc_bit),
				     le64(xb->xb_blkno));
}

int o2_xattr_check_freeable(struct o2_fs *fs, uint64_t ino_blkno)
{
	struct free_plan p;

	return plan_free_ino(fs, ino_blkno, &p);
}

bool o2_xattr_free_fits(struct o2_fs *fs, uint64_t ino_blkno)
{
	struct free_plan p;

	/* shared values go through the refcount tree: stripped first, in steps */
	return plan_free_ino(fs, ino_blkno, &p) == 0 && !p.too_many && !p.shared;
}

int o2_xattr_free_all(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib)
{
	struct o2_dinode *di = (struct o2_dinode *)(void *)ib->data;
	struct free_plan p;
	int r;

	if (!(le16(di->i_dyn_features) & O2_DYN_HAS_XATTR))
		return 0;
	r = plan_free(fs, ib->data, &p);
	if (r == 0 && (p.too_many || p.shared)) /* the callers strip values first */
		r = o2_fail(fs, -EOPNOTSUPP, "inode %llu: more than %u xattr values, or shared ones, "
			    "to free in one transaction", (unsigned long long)ib->blkno,
			    XATTR_FREE_MAX_RUNS);
	for (unsigned i = 0; r == 0 && i < p.runs; i++)
		r = o2_clusters_free(t, fs, p.start[i], p.len[i]);
	if (r == 0 && p.block) {
		struct o2_buf *b;

		r = o2_bread(fs, p.block, O2_META_XATTR, &b);
		if (r == 0) {
			r = o2_xattr_block_free(t, fs, b->data);
			o2_brelse(fs, b);
		}
	}
	if (r == 0)
		r = o2_trans_add(t, ib);
	if (r < 0)
		return r;
	di->i_xattr_loc = 0;
	di->i_dyn_features = cpu_le16(le16(di->i_dyn_features) &
				      ~(uint16_t)(O2_DYN_HAS_XATTR | O2_DYN_INLINE_XATTR));
	return 0;
}

int o2_check_writable(struct o2_fs *fs, const struct o2_dinode *di, bool freeing)
{
	uint16_t dyn = le16(di->i_dyn_features);

	if (dyn & O2_DYN_HAS_REFCOUNT) {
		int r = o2_refcount_check(fs, le64(di->i_refcount_loc));

		if (r < 0)
			return r;
	}
	if (freeing && (dyn & O2_DYN_HAS_XATTR))
		return o2_xattr_check_freeable(fs, le64(di->i_blkno));
	return 0;
}
