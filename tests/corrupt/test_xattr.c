/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Extended attributes and refcount trees as kernel OCFS2 leaves them, read
 * by fscore.
 *
 * No offline tool writes them, so this test lays them out itself, by the
 * format, on a volume the real mkfs.ocfs2 made:
 * file "inline" keeps its xattrs in its inode (one value in its own
 * cluster), file "block" in an xattr block (one value in two clusters),
 * file "indexed" in the buckets of an indexed xattr block; "shared1" and
 * "shared2" are a reflink (the same clusters, a refcount tree counting
 * them twice).  fsck.ocfs2 -fn must find that volume clean - so the layout
 * is the format's (it checks name hashes, bucket checks, reference counts)
 * - and then fscore must read back every attribute (name, type, value) and
 * both files' data, count xattrs and refcount records in o2_fs_walk, change
 * the buckets, free a file's xattrs with it, and answer each kind
 * of damage with -EUCLEAN and a message naming the block, never a crash.
 * Block sizes 4096 and 1024 with metaecc (a bucket then spans four
 * blocks).  Needs mkfs.ocfs2 and fsck.ocfs2 (else 77).
 *
 * O2_XATTR_IMAGES=DIR keeps the crafted volumes there (xattr-4096.img,
 * xattr-1024.img): tests/fuzz/make-corpus.sh makes fuzz seeds of them.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "blockcheck.h"
#include "format.h"
#include "internal.h"
#include "journal.h"
#include "o2fs/blockdev.h"
#include "o2fs/o2fs.h"
#include "../testenv.h"

#define VOLUME_BYTES (16u << 20) /* the fuzz targets' device size: seeds too */
#define INLINE_ROOM 256u
#define BUCKET 4096u
#define VALUE_ROOT_BYTES 48u /* value root with its one record */

static char tmpdir[256];

struct spec {
	uint8_t type;
	const char *name;
	size_t value_size; /* > 80: kept outside, in clusters */
};

/* What a file was given, to compare with what fscore reads back. */
static const struct spec inline_specs[] = {
	{ 1, "a", 5 }, { 5, "selinux", 27 }, { 1, "big", 200 },
};
static const struct spec block_specs[] = {
	{ 1, "one", 3 }, { 4, "two", 80 }, { 1, "blob", 5000 }, { 2, "", 0 } /* ends */,
};
static const struct spec bucket_specs[] = {
	{ 1, "alpha", 10 }, { 1, "beta", 60 }, { 4, "gamma", 81 }, { 1, "delta", 1 },
	{ 3, "", 28 },
};

/* The value of a name: bytes anyone can recompute. */
static void value_of(const char *name, size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (uint8_t)(name[0] * 7 + i * 13 + strlen(name));
}

static uint32_t name_hash(uint32_t seed, const char *name, size_t len)
{
	uint32_t h = seed;

	for (size_t i = 0; i < len; i++)
		h = (h << 5) ^ (h >> 27) ^ (uint8_t)name[i];
	return h;
}

static unsigned pad4(size_t n)
{
	return (unsigned)((n + 3) & ~(size_t)3);
}

static size_t nspecs(const struct spec *s, size_t max)
{
	size_t n = 0;

	while (n < max && s[n].name[0])
		n++;
	return n;
}

/* Write value bytes into freshly allocated clusters, logged in t. */
static void put_value_clusters(struct o2_trans *t, struct o2_fs *fs, const char *name,
			       size_t size, uint32_t *ret_start, uint32_t *ret_len)
{
	uint32_t want = (uint32_t)((size + fs->info.cluster_size - 1) / fs->info.cluster_size);
	uint8_t *v = calloc(1, (size_t)want * fs->info.cluster_size);

	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(o2_clusters_alloc(t, fs, want, want, ret_start, ret_len), 0);
	ck_assert_uint_eq(*ret_len, want);
	value_of(name, size, v);
	for (uint64_t b = 0; b < ((uint64_t)want << fs->bpc_bits); b++) {
		struct o2_buf *buf;

		ck_assert_int_eq(o2_bnew(fs, ((uint64_t)*ret_start << fs->bpc_bits) + b, O2_META_PLAIN,
					 &buf), 0);
		ck_assert_int_eq(o2_trans_add(t, buf), 0);
		memcpy(buf->data, v + (b << fs->bits), fs->bs);
		o2_brelse(fs, buf);
	}
	free(v);
}

/*
 * Lay out a store at h (len bytes): entries sorted by name hash, names and
 * values packed down from the end, values over 80 bytes in clusters.
 */
static void build_store(struct o2_trans *t, struct o2_fs *fs, uint8_t *h, size_t len,
			const struct spec *specs, size_t n, bool bucket)
{
	struct o2_xattr_header *xh = (struct o2_xattr_header *)(void *)h;
	size_t order[8], free_at = len;
	unsigned total = 0;

	ck_assert_uint_le(n, 8);
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	for (size_t i = 1; i < n; i++) /* by hash, as buckets must be */
		for (size_t j = i; j > 0; j--) {
			uint32_t a = name_hash(fs->info.uuid_hash, specs[order[j - 1]].name,
					       strlen(specs[order[j - 1]].name));
			uint32_t b = name_hash(fs->info.uuid_hash, specs[order[j]].name,
					       strlen(specs[order[j]].name));
			if (a <= b)
				break;
			size_t tmp = order[j];
			order[j] = order[j - 1];
			order[j - 1] = tmp;
		}
	memset(h, 0, len);
	for (size_t k = 0; k < n; k++) {
		const struct spec *s = &specs[order[k]];
		struct o2_xattr_entry *xe = &xh->xh_entries[k];
		size_t nl = strlen(s->name), room;
		bool local = s->value_size <= 80;

		room = pad4(nl) + (local ? pad4(s->value_size) : VALUE_ROOT_BYTES);
		free_at -= room;
		xe->xe_name_hash = cpu_le32(name_hash(fs->info.uuid_hash, s->name, nl));
		xe->xe_name_offset = cpu_le16((uint16_t)free_at);
		xe->xe_name_len = (uint8_t)nl;
		xe->xe_type = (uint8_t)(s->type | (local ? 0x80 : 0));
		xe->xe_value_size = cpu_le64(s->value_size);
		memcpy(h + free_at, s->name, nl);
		if (local) {
			value_of(s->name, s->value_size, h + free_at + pad4(nl));
		} else {
			struct o2_xattr_value_root *vr =
				(struct o2_xattr_value_root *)(void *)(h + free_at + pad4(nl));
			uint32_t start, got;

			put_value_clusters(t, fs, s->name, s->value_size, &start, &got);
			vr->xr_clusters = cpu_le32(got);
			vr->xr_list.count = cpu_le16(1);
			vr->xr_list.next_free_rec = cpu_le16(1);
			vr->xr_list.recs[0].leaf_clusters = cpu_le16((uint16_t)got);
			vr->xr_list.recs[0].blkno = cpu_le64((uint64_t)start << fs->bpc_bits);
		}
		total += (unsigned)room;
	}
	xh->xh_count = cpu_le16((uint16_t)n);
	xh->xh_free_start = cpu_le16((uint16_t)free_at);
	xh->xh_name_value_len = cpu_le16((uint16_t)total);
	if (bucket)
		xh->xh_num_buckets = cpu_le16(1);
}

/* An inode made ready to carry xattrs (logged in t). */
static struct o2_buf *xattr_inode(struct o2_trans *t, struct o2_fs *fs, uint64_t ino,
				  bool inline_room)
{
	struct o2_buf *b;

	ck_assert_int_eq(o2_bread(fs, ino, O2_META_INODE, &b), 0);
	ck_assert_int_eq(o2_trans_add(t, b), 0);
	struct o2_dinode *di = (struct o2_dinode *)(void *)b->data;
	uint16_t dyn = le16(di->i_dyn_features) | O2_DYN_HAS_XATTR;

	if (inline_room) {
		dyn |= O2_DYN_INLINE_XATTR;
		di->i_xattr_inline_size = cpu_le16(INLINE_ROOM);
		if (dyn & O2_DYN_INLINE_DATA)
			di->id2.i_data.id_count = cpu_le16((uint16_t)(o2_inline_max(fs->bs) - INLINE_ROOM));
		else
			di->id2.i_list.count = cpu_le16((uint16_t)((fs->bs - offsetof(struct o2_dinode,
				id2.i_list.recs) - INLINE_ROOM) / sizeof(struct o2_extent_rec)));
	}
	di->i_dyn_features = cpu_le16(dyn);
	return b;
}

/* A zeroed block of kind from the extent allocator (as the kernel takes
 * xattr and refcount blocks), logged in t; the caller writes its head. */
static struct o2_buf *new_meta_block(struct o2_trans *t, struct o2_fs *fs, uint8_t kind,
				     struct o2_suballoc_res *res)
{
	struct o2_buf *b;

	ck_assert_int_eq(o2_suballoc_alloc(t, fs, fs->sys.extent_alloc, res), 0);
	ck_assert_int_eq(o2_bnew(fs, res->blkno, kind, &b), 0);
	ck_assert_int_eq(o2_trans_add(t, b), 0);
	memset(b->data, 0, fs->bs);
	return b;
}

/* A new xattr block for the inode in b (logged in t). */
static struct o2_buf *new_xattr_block(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib,
				      uint16_t flags)
{
	struct o2_suballoc_res res;
	struct o2_buf *b = new_meta_block(t, fs, O2_META_XATTR, &res);
	struct o2_xattr_block *xb = (struct o2_xattr_block *)(void *)b->data;

	memcpy(xb->xb_signature, O2_SIG_XATTR, sizeof(O2_SIG_XATTR));
	xb->xb_suballoc_slot = cpu_le16(res.slot);
	xb->xb_suballoc_bit = cpu_le16(res.bit);
	xb->xb_fs_generation = cpu_le32(fs->info.fs_generation);
	xb->xb_blkno = cpu_le64(res.blkno);
	xb->xb_flags = cpu_le16(flags);
	if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_DISCONTIG_BG))
		xb->xb_suballoc_loc = cpu_le64(res.group);
	((struct o2_dinode *)(void *)ib->data)->i_xattr_loc = cpu_le64(res.blkno);
	return b;
}

struct volume {
	unsigned bs;
	const char *features; /* mkfs.ocfs2 --fs-features */
	char path[320];
	uint64_t inline_ino, block_ino, indexed_ino;
	uint64_t xattr_blk, indexed_blk, bucket_blk;
	uint64_t shared1_ino, shared2_ino, refcount_blk;
	unsigned refcount_records;
	size_t xattrs;
};

static struct volume vols[2] = {
	{ .bs = 4096, .features = "noinline-data" }, /* a file's extent list gives room */
	{ .bs = 1024, .features = "metaecc" },	      /* buckets' checks over four blocks */
};

static void judge(struct volume *v, const char *path, const char *what);

#define SHARED_BYTES 12288u

/*
 * A reflink as the kernel leaves one: "shared1" is written (three clusters
 * of data), "shared2" is made to map the same clusters; both inodes name a
 * refcount tree whose root block holds a record per extent, count 2, and
 * their extents are marked refcounted.
 */
static void craft_reflink(struct volume *v, struct o2_fs *fs)
{
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };
	uint8_t data[SHARED_BYTES];
	struct o2_trans *t;
	struct o2_buf *b1, *b2, *rb;
	struct o2_suballoc_res res;
	uint64_t root = fs->info.root_blkno;

	value_of("shared", sizeof(data), data);
	ck_assert_int_eq(o2_create(fs, root, "shared1", 7, &ni, &v->shared1_ino), 0);
	ck_assert_int_eq(o2_write(fs, v->shared1_ino, 0, data, sizeof(data)), (ssize_t)sizeof(data));
	ck_assert_int_eq(o2_create(fs, root, "shared2", 7, &ni, &v->shared2_ino), 0);
	ck_assert_int_eq(o2_fs_sync(fs), 0);
	ck_assert_int_eq(o2_trans_begin(fs, 64, &t), 0);
	ck_assert_int_eq(o2_bread(fs, v->shared1_ino, O2_META_INODE, &b1), 0);
	ck_assert_int_eq(o2_bread(fs, v->shared2_ino, O2_META_INODE, &b2), 0);
	ck_assert_int_eq(o2_trans_add(t, b1), 0);
	ck_assert_int_eq(o2_trans_add(t, b2), 0);
	struct o2_dinode *d1 = (struct o2_dinode *)(void *)b1->data;
	struct o2_dinode *d2 = (struct o2_dinode *)(void *)b2->data;
	struct o2_extent_list *el = &d1->id2.i_list;

	ck_assert(!(le16(d1->i_dyn_features) & O2_DYN_INLINE_DATA));
	ck_assert_uint_eq(le16(el->tree_depth), 0);

	/* the refcount tree's root, records in it */
	rb = new_meta_block(t, fs, O2_META_REFCOUNT, &res);
	struct o2_refcount_block *rf = (struct o2_refcount_block *)(void *)rb->data;

	memcpy(rf->rf_signature, O2_SIG_REFCNT, sizeof(O2_SIG_REFCNT));
	rf->rf_suballoc_slot = cpu_le16(res.slot);
	rf->rf_suballoc_bit = cpu_le16(res.bit);
	rf->rf_fs_generation = cpu_le32(fs->info.fs_generation);
	rf->rf_blkno = cpu_le64(res.blkno);
	if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_DISCONTIG_BG))
		rf->rf_suballoc_loc = cpu_le64(res.group);
	rf->rf_count = cpu_le32(2);
	rf->rf_generation = cpu_le32(0x5eed1234);
	rf->rf_records.rl_count = cpu_le16((uint16_t)((fs->bs - offsetof(struct o2_refcount_block,
		rf_records.rl_recs)) / sizeof(struct o2_refcount_rec)));
	unsigned n = le16(el->next_free_rec), used = 0;

	for (unsigned i = 0; i < n; i++) {
		struct o2_extent_rec *e = &el->recs[i];

		if (!le16(e->leaf_clusters))
			continue;
		e->flags |= O2_EXT_REFCOUNTED;
		/* kept in physical order */
		uint64_t cpos = le64(e->blkno) >> fs->bpc_bits;
		unsigned at = used;

		while (at > 0 && le64(rf->rf_records.rl_recs[at - 1].r_cpos) > cpos) {
			rf->rf_records.rl_recs[at] = rf->rf_records.rl_recs[at - 1];
			at--;
		}
		rf->rf_records.rl_recs[at].r_cpos = cpu_le64(cpos);
		rf->rf_records.rl_recs[at].r_clusters = cpu_le32(le16(e->leaf_clusters));
		rf->rf_records.rl_recs[at].r_refcount = cpu_le32(2);
		used++;
	}
	rf->rf_records.rl_used = cpu_le16((uint16_t)used);
	v->refcount_blk = res.blkno;
	v->refcount_records = used;
	o2_brelse(fs, rb);

	/* shared2: the same extents, the same size */
	uint16_t dyn2 = le16(d2->i_dyn_features) & (uint16_t)~O2_DYN_INLINE_DATA;

	memset(&d2->id2, 0, fs->bs - offsetof(struct o2_dinode, id2));
	memcpy(&d2->id2.i_list, el, offsetof(struct o2_extent_list, recs) +
	       (size_t)n * sizeof(struct o2_extent_rec));
	d2->i_size = d1->i_size;
	d2->i_clusters = d1->i_clusters;
	d1->i_dyn_features = cpu_le16(le16(d1->i_dyn_features) | O2_DYN_HAS_REFCOUNT);
	d2->i_dyn_features = cpu_le16(dyn2 | O2_DYN_HAS_REFCOUNT);
	d1->i_refcount_loc = cpu_le64(res.blkno);
	d2->i_refcount_loc = cpu_le64(res.blkno);
	o2_brelse(fs, b1);
	o2_brelse(fs, b2);
	ck_assert_int_eq(o2_trans_end(t), 0);
}

static void craft(struct volume *v)
{
	char cmd[1024], err[256];
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	struct o2_trans *t;
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };

	snprintf(v->path, sizeof(v->path), "%s/xattr-%u.img", tmpdir, v->bs);
	int fd = open(v->path, O_CREAT | O_TRUNC | O_RDWR, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, VOLUME_BYTES), 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "mkfs.ocfs2 -q -b %u -C 4096 -M local -N 1 -J size=4M "
		 "--fs-feature-level=default --fs-features=%s -L xattr %s </dev/null >/dev/null 2>&1",
		 v->bs, v->features, v->path);
	(void)!system(cmd); /* exits 1 without modprobe; the open below judges */
	snprintf(cmd, sizeof(cmd), "fsck.ocfs2 -fn %s 2>&1 | grep '^\\[' >%s/fresh-%u.problems",
		 v->path, tmpdir, v->bs);
	(void)!system(cmd);
	ck_assert_int_eq(o2_blockdev_open_file(v->path, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(o2_create(fs, fs->info.root_blkno, "inline", 6, &ni, &v->inline_ino), 0);
	ck_assert_int_eq(o2_create(fs, fs->info.root_blkno, "block", 5, &ni, &v->block_ino), 0);
	ck_assert_int_eq(o2_create(fs, fs->info.root_blkno, "indexed", 7, &ni, &v->indexed_ino), 0);
	ck_assert_int_eq(o2_trans_begin(fs, 128, &t), 0);

	/* in the inode's tail */
	struct o2_buf *ib = xattr_inode(t, fs, v->inline_ino, true);

	build_store(t, fs, ib->data + fs->bs - INLINE_ROOM, INLINE_ROOM, inline_specs, 3, false);
	o2_brelse(fs, ib);

	/* in an xattr block */
	ib = xattr_inode(t, fs, v->block_ino, false);
	struct o2_buf *xb = new_xattr_block(t, fs, ib, 0);
	size_t at = offsetof(struct o2_xattr_block, xb_attrs);

	v->xattr_blk = xb->blkno;
	build_store(t, fs, xb->data + at, fs->bs - at, block_specs, nspecs(block_specs, 4), false);
	o2_brelse(fs, xb);
	o2_brelse(fs, ib);

	/* in the one bucket of an indexed block */
	ib = xattr_inode(t, fs, v->indexed_ino, false);
	xb = new_xattr_block(t, fs, ib, 0x1);
	v->indexed_blk = xb->blkno;
	uint32_t start, got;
	uint8_t *bucket = calloc(1, BUCKET);

	ck_assert_ptr_nonnull(bucket);
	ck_assert_int_eq(o2_clusters_alloc(t, fs, 1, 1, &start, &got), 0);
	v->bucket_blk = (uint64_t)start << fs->bpc_bits;
	build_store(t, fs, bucket, BUCKET, bucket_specs, nspecs(bucket_specs, 5), true);
	if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_META_ECC))
		o2_blockcheck_compute(bucket, BUCKET,
				      &((struct o2_xattr_header *)(void *)bucket)->xh_check);
	for (unsigned i = 0; i < BUCKET / fs->bs; i++) {
		struct o2_buf *bb;

		ck_assert_int_eq(o2_bnew(fs, v->bucket_blk + i, O2_META_PLAIN, &bb), 0);
		ck_assert_int_eq(o2_trans_add(t, bb), 0);
		memcpy(bb->data, bucket + (size_t)i * fs->bs, fs->bs);
		o2_brelse(fs, bb);
	}
	free(bucket);
	struct o2_xattr_tree_root *xt =
		&((struct o2_xattr_block *)(void *)xb->data)->xb_attrs.xb_root;

	xt->xt_clusters = cpu_le32(1);
	xt->xt_list.count = cpu_le16((uint16_t)((fs->bs - at - offsetof(struct o2_xattr_tree_root,
						xt_list.recs)) / sizeof(struct o2_extent_rec)));
	xt->xt_list.next_free_rec = cpu_le16(1);
	xt->xt_list.recs[0].leaf_clusters = cpu_le16(1);
	xt->xt_list.recs[0].blkno = cpu_le64(v->bucket_blk);
	o2_brelse(fs, xb);
	o2_brelse(fs, ib);
	ck_assert_int_eq(o2_trans_end(t), 0);
	craft_reflink(v, fs);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	v->xattrs = 3 + nspecs(block_specs, 4) + nspecs(bucket_specs, 5);

	/* the judge: the layout above is the format's */
	judge(v, v->path, "the crafted volume");
}

/* The volume, read-only, from a copy in memory that a case may damage. */
static struct o2_fs *open_copy(struct volume *v, void (*damage)(struct volume *, uint8_t *),
			       struct o2_blockdev **ret_dev)
{
	int fd = open(v->path, O_RDONLY);
	uint8_t *data = malloc(VOLUME_BYTES);
	struct o2_fs *fs = NULL;
	char err[256];

	ck_assert_int_ge(fd, 0);
	ck_assert_ptr_nonnull(data);
	ck_assert_int_eq(pread(fd, data, VOLUME_BYTES, 0), (ssize_t)VOLUME_BYTES);
	close(fd);
	if (damage)
		damage(v, data);
	ck_assert_int_eq(o2_blockdev_new_memory_from(data, VOLUME_BYTES, VOLUME_BYTES, ret_dev), 0);
	free(data);
	ck_assert_msg(o2_fs_open(*ret_dev, O2_OPEN_RDONLY, &fs, err, sizeof(err)) == 0, "%s", err);
	return fs;
}

struct seen {
	size_t n;
	char names[16][64];
	const struct spec *specs;
	size_t nspecs;
	int bad;
};

static int collect(const struct o2_xattr *x, void *arg)
{
	struct seen *s = arg;

	if (s->n < 16)
		snprintf(s->names[s->n], sizeof(s->names[0]), "%u.%.*s", x->type, x->name_len, x->name);
	s->n++;
	for (size_t i = 0; i < s->nspecs; i++) {
		const struct spec *sp = &s->specs[i];
		uint8_t want[128];

		if (strlen(sp->name) != x->name_len || memcmp(sp->name, x->name, x->name_len))
			continue;
		if (sp->type != x->type || sp->value_size != x->value_size ||
		    x->local != (sp->value_size <= 80))
			s->bad++;
		if (x->local) {
			value_of(sp->name, sp->value_size, want);
			if (memcmp(want, x->value, sp->value_size))
				s->bad++;
		} else if ((uint64_t)x->value_clusters * 4096 < sp->value_size) {
			s->bad++;
		}
		return 0;
	}
	s->bad++;
	return 0;
}

static void expect_xattrs(struct o2_fs *fs, uint64_t ino, const struct spec *specs, size_t n)
{
	struct o2_inode *in;
	struct seen s = { .specs = specs, .nspecs = n };

	ck_assert_int_eq(o2_inode_get(fs, ino, &in), 0);
	ck_assert_int_eq(o2_xattr_iterate(fs, in, collect, &s), 0);
	o2_inode_unref(in);
	ck_assert_uint_eq(s.n, n);
	ck_assert_int_eq(s.bad, 0);
}

START_TEST(read_back)
{
	struct volume *v = &vols[_i];
	struct o2_blockdev *dev;
	struct o2_fs *fs = open_copy(v, NULL, &dev);
	struct o2_walk_stats st;

	expect_xattrs(fs, v->inline_ino, inline_specs, 3);
	expect_xattrs(fs, v->block_ino, block_specs, nspecs(block_specs, 4));
	expect_xattrs(fs, v->indexed_ino, bucket_specs, nspecs(bucket_specs, 5));
	ck_assert_int_eq(o2_fs_walk(fs, &st), 0);
	ck_assert_uint_eq(st.xattrs, v->xattrs);
	ck_assert_uint_gt(st.xattr_blocks, 0);
	ck_assert_uint_eq(st.refcount_trees, 1);
	ck_assert_uint_eq(st.refcount_records, v->refcount_records);
	/* a reflinked file reads as written, through either name */
	uint8_t want[SHARED_BYTES], got[SHARED_BYTES];
	uint64_t shared[2] = { v->shared1_ino, v->shared2_ino };

	value_of("shared", sizeof(want), want);
	for (unsigned i = 0; i < 2; i++) {
		struct o2_inode *in;

		ck_assert_int_eq(o2_inode_get(fs, shared[i], &in), 0);
		ck_assert_int_eq(o2_inode_read(fs, in, 0, got, sizeof(got)), (ssize_t)sizeof(got));
		ck_assert_mem_eq(got, want, sizeof(got));
		o2_inode_unref(in);
	}
	o2_fs_close(fs);
	o2_blockdev_free(dev);
}
END_TEST

/*
 * fsck.ocfs2 -fn on path: nothing beyond the fresh volume's own report
 * (mkfs.ocfs2 leaves its system directory unindexed, which fsck.ocfs2
 * reports as DX_TREE_MISSING).  fsck.ocfs2 -n exits 0 even when it declined
 * to fix something, so its problem lines ("[XATTR_HASH_INVALID] ...") are
 * what tells.
 */
static void judge(struct volume *v, const char *path, const char *what)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "fsck.ocfs2 -fn %s >%s.fsck 2>&1 && grep -q 'All passes succeeded' "
		 "%s.fsck && grep '^\\[' %s.fsck | cmp -s - %s/fresh-%u.problems",
		 path, path, path, path, tmpdir, v->bs);
	int st = system(cmd);

	if (st != 0) {
		snprintf(cmd, sizeof(cmd), "cat %s.fsck >&2", path);
		(void)!system(cmd);
	}
	ck_assert_msg(st == 0, "%u-byte blocks, %s: fsck.ocfs2 -fn finds fault", v->bs, what);
}

/*
 * Deleting files that carry xattrs: in place (no open reference) and
 * through the orphan directory (unlinked while open, freed at the last
 * close); the value clusters and the xattr block go with the inode, and
 * fsck.ocfs2 finds no leak.  Buckets are refused before anything changes.
 */
/* Blocks in use in this slot's extent allocator (xattr blocks come from it). */
static uint32_t extent_alloc_used(struct o2_fs *fs)
{
	struct o2_buf *b;

	ck_assert_int_eq(o2_bread(fs, fs->sys.extent_alloc, O2_META_INODE, &b), 0);
	uint32_t used = le32(((struct o2_dinode *)(void *)b->data)->id1.bitmap1.i_used);

	o2_brelse(fs, b);
	return used;
}

START_TEST(delete)
{
	struct volume *v = &vols[_i];
	char path[320], cmd[768], err[256];
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	struct o2_walk_stats st;

	snprintf(path, sizeof(path), "%s/delete-%u.img", tmpdir, v->bs);
	snprintf(cmd, sizeof(cmd), "cp %s %s", v->path, path);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0, "%s", err);
	uint64_t root = fs->info.root_blkno;
	uint32_t used = extent_alloc_used(fs);

	/* the kernel's buckets are taken apart in steps, then go with the inode */
	ck_assert_int_eq(o2_unlink(fs, root, "indexed", 7), 0);
	ck_assert_int_eq(o2_unlink(fs, root, "block", 5), 0);
	ck_assert_int_eq(o2_inode_open_ref(fs, v->inline_ino), 0);
	ck_assert_int_eq(o2_unlink(fs, root, "inline", 6), 0);
	ck_assert_int_eq(o2_fs_sync(fs), 0);
	ck_assert_int_eq(o2_inode_close_ref(fs, v->inline_ino), 0);
	ck_assert_int_eq(o2_fs_walk(fs, &st), 0);
	ck_assert_uint_eq(st.xattrs, 0);
	/* fsck.ocfs2 does not miss a leaked extent-allocator bit: we look
	 * (the two xattr blocks went) */
	ck_assert_uint_eq(extent_alloc_used(fs), used - 2);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	judge(v, path, "after deleting three files with xattrs (one in buckets)");
	unlink(path);
}
END_TEST

/*
 * Changing the kernel's buckets: an attribute replaced (its value moving
 * out of its cluster into the bucket), one removed, new ones added until
 * the bucket splits; everything reads back and fsck.ocfs2 finds the
 * buckets as the kernel would leave them.
 */
START_TEST(change_buckets)
{
	struct volume *v = &vols[_i];
	char path[320], cmd[768], err[256], name[64];
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	uint8_t val[200], got[200];

	snprintf(path, sizeof(path), "%s/change-%u.img", tmpdir, v->bs);
	snprintf(cmd, sizeof(cmd), "cp %s %s", v->path, path);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0, "%s", err);
	uint64_t ino = v->indexed_ino;

	memset(val, 'r', sizeof(val));
	ck_assert_int_eq(o2_xattr_set(fs, ino, 4, "gamma", 5, val, 7, O2_XATTR_REPLACE), 0);
	ck_assert_int_eq(o2_xattr_remove(fs, ino, 1, "beta", 4), 0);
	for (unsigned i = 0; i < 300; i++) {
		int n = snprintf(name, sizeof(name), "added-%u-with-a-longer-name", i);

		memset(val, (int)i, sizeof(val));
		ck_assert_int_eq(o2_xattr_set(fs, ino, 1, name, (size_t)n, val, 40 + i % 100, 0), 0);
	}
	ck_assert_int_eq(o2_xattr_get(fs, ino, 4, "gamma", 5, got, sizeof(got)), 7);
	ck_assert_int_eq(o2_xattr_get(fs, ino, 1, "beta", 4, got, sizeof(got)), -ENODATA);
	for (unsigned i = 0; i < 300; i += 7) {
		int n = snprintf(name, sizeof(name), "added-%u-with-a-longer-name", i);

		memset(val, (int)i, sizeof(val));
		ck_assert_int_eq(o2_xattr_get(fs, ino, 1, name, (size_t)n, got, sizeof(got)),
				 (int)(40 + i % 100));
		ck_assert(memcmp(got, val, 40 + i % 100) == 0);
	}
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	judge(v, path, "after changing the kernel's buckets");
	unlink(path);
}
END_TEST

/*
 * Put the two clusters of file ino's "blob" value under an extent block,
 * one record each (its flags kept: shared stays shared), as the kernel
 * writes a value on fragmented free space.
 */
static void make_deep(struct o2_fs *fs, uint64_t ino)
{
	struct o2_trans *t;
	struct o2_buf *ib, *xb, *eb;
	struct o2_suballoc_res res;

	ck_assert_int_eq(o2_trans_begin(fs, 16, &t), 0);
	ck_assert_int_eq(o2_bread(fs, ino, O2_META_INODE, &ib), 0);
	const struct o2_dinode *di = (const struct o2_dinode *)(void *)ib->data;
	uint64_t loc = le64(di->i_xattr_loc);
	struct o2_xattr_value_root *vr = NULL;
	/* the value is in the inode's tail, or in its block */
	for (int k = 0; k < 2 && !vr; k++) {
		uint8_t *h;

		if (k == 0 && (le16(di->i_dyn_features) & O2_DYN_INLINE_XATTR)) {
			xb = ib;
			h = ib->data + fs->bs - le16(di->i_xattr_inline_size);
		} else if (k == 1 && loc) {
			ck_assert_int_eq(o2_bread(fs, loc, O2_META_XATTR, &xb), 0);
			h = xb->data + offsetof(struct o2_xattr_block, xb_attrs);
		} else {
			continue;
		}
		struct o2_xattr_header *xh = (struct o2_xattr_header *)(void *)h;

		for (unsigned i = 0; i < le16(xh->xh_count); i++) {
			const struct o2_xattr_entry *xe = &xh->xh_entries[i];

			if (xe->xe_name_len == 4 && !memcmp(h + le16(xe->xe_name_offset), "blob", 4))
				vr = (struct o2_xattr_value_root *)(void *)(h + le16(xe->xe_name_offset) + 4);
		}
		if (!vr && xb != ib)
			o2_brelse(fs, xb);
	}
	ck_assert_ptr_nonnull(vr);
	ck_assert_int_eq(o2_trans_add(t, xb), 0);
	uint64_t blk = le64(vr->xr_list.recs[0].blkno);

	ck_assert_uint_eq(le16(vr->xr_list.recs[0].leaf_clusters), 2);
	ck_assert_int_eq(o2_suballoc_new_block(t, fs, fs->sys.extent_alloc, O2_META_EXTENT, &res, &eb),
			 0);
	struct o2_extent_block *e = (struct o2_extent_block *)(void *)eb->data;

	memset(e, 0, fs->bs);
	memcpy(e->h_signature, O2_SIG_EXTENT, sizeof(O2_SIG_EXTENT));
	e->h_suballoc_slot = cpu_le16(res.slot);
	e->h_suballoc_bit = cpu_le16(res.bit);
	if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_DISCONTIG_BG))
		e->h_suballoc_loc = cpu_le64(res.group);
	e->h_fs_generation = cpu_le32(fs->info.fs_generation);
	e->h_blkno = cpu_le64(res.blkno);
	e->h_list.count = cpu_le16((uint16_t)((fs->bs - offsetof(struct o2_extent_block, h_list.recs)) /
					       sizeof(struct o2_extent_rec)));
	e->h_list.next_free_rec = cpu_le16(2);
	uint8_t flags = vr->xr_list.recs[0].flags;

	for (unsigned i = 0; i < 2; i++) {
		e->h_list.recs[i].cpos = cpu_le32(i);
		e->h_list.recs[i].leaf_clusters = cpu_le16(1);
		e->h_list.recs[i].flags = flags;
		e->h_list.recs[i].blkno = cpu_le64(blk + ((uint64_t)i << fs->bpc_bits));
	}
	o2_brelse(fs, eb);
	vr->xr_last_eb_blk = cpu_le64(res.blkno);
	vr->xr_list.tree_depth = cpu_le16(1);
	vr->xr_list.recs[0].int_clusters = cpu_le32(2); /* interior: no flags */
	vr->xr_list.recs[0].blkno = cpu_le64(res.blkno);
	if (xb != ib)
		o2_brelse(fs, xb);
	o2_brelse(fs, ib);
	ck_assert_int_eq(o2_trans_end(t), 0);
}

/*
 * A value whose tree is deeper than its root, as the kernel writes one on
 * fragmented free space: the "blob" value's two clusters put under an
 * extent block, one record each.  fsck.ocfs2 takes it; fscore reads it,
 * replaces it (its clusters and its extent block freed) and deletes the
 * file.
 */
START_TEST(deep_value)
{
	struct volume *v = &vols[_i];
	char path[320], cmd[768], err[256];
	struct o2_blockdev *dev;
	struct o2_fs *fs;

	snprintf(path, sizeof(path), "%s/deep-%u.img", tmpdir, v->bs);
	snprintf(cmd, sizeof(cmd), "cp %s %s", v->path, path);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0, "%s", err);
	make_deep(fs, v->block_ino);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	judge(v, path, "with a value tree deeper than its root");

	/* deleted with its file: value, extent block and xattr block go */
	char path2[340];

	snprintf(path2, sizeof(path2), "%s.del", path);
	snprintf(cmd, sizeof(cmd), "cp %s %s", path, path2);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(o2_blockdev_open_file(path2, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0, "%s", err);
	uint32_t before = extent_alloc_used(fs);

	ck_assert_int_eq(o2_unlink(fs, fs->info.root_blkno, "block", 5), 0);
	ck_assert_int_eq(o2_fs_sync(fs), 0);
	ck_assert_uint_eq(extent_alloc_used(fs), before - 2);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	judge(v, path2, "after deleting the file with the deep value");
	unlink(path2);

	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0, "%s", err);
	expect_xattrs(fs, v->block_ino, block_specs, nspecs(block_specs, 4));
	uint32_t used = extent_alloc_used(fs);
	uint8_t val[100];

	memset(val, 'd', sizeof(val));
	ck_assert_int_eq(o2_xattr_set(fs, v->block_ino, 1, "blob", 4, val, sizeof(val), 0), 0);
	ck_assert_uint_eq(extent_alloc_used(fs), used - 1); /* the extent block went */
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	judge(v, path, "after replacing the deep value");
	unlink(path);
}
END_TEST

/*
 * A deep value a reflink shares: the copy's removal of it lets go of its
 * clusters through the refcount tree (they stay: the source uses them)
 * and frees its extent block; deleting the source frees the rest.
 */
START_TEST(deep_shared)
{
	struct volume *v = &vols[_i];
	char path[320], cmd[768], err[256];
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };
	uint64_t copy;

	snprintf(path, sizeof(path), "%s/deepsh-%u.img", tmpdir, v->bs);
	snprintf(cmd, sizeof(cmd), "cp %s %s", v->path, path);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0, "%s", err);
	int r = o2_reflink(fs, v->block_ino, fs->info.root_blkno, "copy", 4, &ni, &copy);

	ck_assert_msg(r == 0, "reflink: %d %s", r, o2_fs_error(fs));
	make_deep(fs, v->block_ino);
	make_deep(fs, copy);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	judge(v, path, "with a deep value two files share");

	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0, "%s", err);
	expect_xattrs(fs, copy, block_specs, nspecs(block_specs, 4));
	uint32_t used = extent_alloc_used(fs);

	r = o2_xattr_remove(fs, copy, 1, "blob", 4);
	ck_assert_msg(r == 0, "removing the copy's shared deep value: %d %s", r, o2_fs_error(fs));
	ck_assert_uint_eq(extent_alloc_used(fs), used - 1);
	expect_xattrs(fs, v->block_ino, block_specs, nspecs(block_specs, 4));
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	judge(v, path, "after the copy let go of the shared deep value");

	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0, "%s", err);
	r = o2_unlink(fs, fs->info.root_blkno, "block", 5);
	ck_assert_msg(r == 0, "deleting the source: %d %s", r, o2_fs_error(fs));
	ck_assert_int_eq(o2_unlink(fs, fs->info.root_blkno, "copy", 4), 0);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	judge(v, path, "after deleting both files");
	unlink(path);
}
END_TEST

/* The data of file ino, against want (len bytes, the file's size). */
static void expect_data(struct o2_fs *fs, uint64_t ino, const uint8_t *want, size_t len,
			const char *what)
{
	struct o2_inode *in;
	uint8_t got[SHARED_BYTES + 1];

	ck_assert_int_eq(o2_inode_get(fs, ino, &in), 0);
	ck_assert_uint_eq(o2_inode_info(in)->size, len);
	ck_assert_int_eq(o2_inode_read(fs, in, 0, got, sizeof(got)), (ssize_t)len);
	o2_inode_unref(in);
	ck_assert_msg(memcmp(got, want, len) == 0, "%s: the data differs", what);
}

/* Records in the refcount tree's root and their counts: "cpos+n:count ..." */
static void expect_records(struct o2_fs *fs, struct volume *v, uint32_t base, const char *want)
{
	struct o2_buf *b;
	char got[256] = "";
	size_t len = 0;

	ck_assert_int_eq(o2_bread(fs, v->refcount_blk, O2_META_REFCOUNT, &b), 0);
	const struct o2_refcount_list *rl =
		&((const struct o2_refcount_block *)(const void *)b->data)->rf_records;

	for (unsigned i = 0; i < le16(rl->rl_used); i++)
		len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%llu+%u:%u", i ? " " : "",
					(unsigned long long)(le64(rl->rl_recs[i].r_cpos) - base),
					le32(rl->rl_recs[i].r_clusters), le32(rl->rl_recs[i].r_refcount));
	o2_brelse(fs, b);
	ck_assert_str_eq(got, want);
}

/*
 * Changing reflinked files: a write into a shared cluster copies it first
 * (the other file keeps the old data, the count drops to 1), a write into
 * a cluster only one file still uses takes it as it is (no longer marked
 * shared, its record gone), truncating and punching a hole let go of
 * shared clusters (counts lowered), and deleting both files frees every
 * cluster and the tree itself.  fsck.ocfs2 -fn checks the counts against
 * the extents after each stage; the data is checked through fscore.
 */
START_TEST(reflink_write)
{
	struct volume *v = &vols[_i];
	char path[320], cmd[768], err[256];
	uint8_t one[SHARED_BYTES], two[SHARED_BYTES], patch[100];
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	struct o2_walk_stats st;
	struct o2_statfs sf0, sf;

	snprintf(path, sizeof(path), "%s/reflink-%u.img", tmpdir, v->bs);
	snprintf(cmd, sizeof(cmd), "cp %s %s", v->path, path);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0, "%s", err);
	uint64_t root = fs->info.root_blkno;
	uint32_t used = extent_alloc_used(fs);
	struct o2_extent ext;
	struct o2_inode *in;

	ck_assert_int_eq(o2_inode_get(fs, v->shared1_ino, &in), 0);
	ck_assert_int_eq(o2_inode_map(fs, in, 0, &ext), 0);
	o2_inode_unref(in);
	ck_assert_uint_eq(ext.clusters, 3);
	uint32_t base = (uint32_t)(ext.blkno >> fs->bpc_bits);

	ck_assert_int_eq(o2_statfs(fs, &sf0), 0);
	value_of("shared", sizeof(one), one);
	memcpy(two, one, sizeof(two));
	memset(patch, 0xab, sizeof(patch));
	expect_records(fs, v, base, "0+3:2");

	/* cluster 1 of shared1 is copied; shared2 keeps the old one */
	ck_assert_int_eq(o2_write(fs, v->shared1_ino, 5000, patch, sizeof(patch)),
			 (ssize_t)sizeof(patch));
	memcpy(one + 5000, patch, sizeof(patch));
	expect_records(fs, v, base, "0+1:2 1+1:1 2+1:2");
	expect_data(fs, v->shared1_ino, one, sizeof(one), "shared1 after its copy");
	expect_data(fs, v->shared2_ino, two, sizeof(two), "shared2 after shared1's copy");
	ck_assert_int_eq(o2_statfs(fs, &sf), 0);
	ck_assert_uint_eq(sf.free_clusters + 1, sf0.free_clusters);

	/* shared2 is all that uses the old cluster 1 now: written in place */
	ck_assert_int_eq(o2_write(fs, v->shared2_ino, 4096, patch, 50), 50);
	memcpy(two + 4096, patch, 50);
	expect_records(fs, v, base, "0+1:2 2+1:2");
	ck_assert_int_eq(o2_statfs(fs, &sf), 0);
	ck_assert_uint_eq(sf.free_clusters + 1, sf0.free_clusters);

	/* truncating shared1 into cluster 1 (its own) lets go of cluster 2 */
	ck_assert_int_eq(o2_truncate(fs, v->shared1_ino, 6000), 0);
	expect_records(fs, v, base, "0+1:2 2+1:1");
	/* a hole over shared2's cluster 0 lets go of that */
	ck_assert_int_eq(o2_fallocate(fs, v->shared2_ino, O2_FALLOC_PUNCH_HOLE | O2_FALLOC_KEEP_SIZE,
				      0, 4096), 0);
	memset(two, 0, 4096);
	expect_records(fs, v, base, "0+1:1 2+1:1");
	/* truncating shared2 into its shared cluster 2: copied, not zeroed in place */
	ck_assert_int_eq(o2_truncate(fs, v->shared2_ino, 9000), 0);
	expect_records(fs, v, base, "0+1:1");
	ck_assert_int_eq(o2_fs_sync(fs), 0);
	expect_data(fs, v->shared1_ino, one, 6000, "shared1 truncated");
	expect_data(fs, v->shared2_ino, two, 9000, "shared2 punched and truncated");
	ck_assert_int_eq(o2_fs_walk(fs, &st), 0);
	ck_assert_uint_eq(st.refcount_trees, 1);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	judge(v, path, "after writing, truncating and punching reflinked files");

	/* both deleted (shared1 while open): every cluster and the tree go */
	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(o2_inode_open_ref(fs, v->shared1_ino), 0);
	ck_assert_int_eq(o2_unlink(fs, root, "shared1", 7), 0);
	ck_assert_int_eq(o2_unlink(fs, root, "shared2", 7), 0);
	ck_assert_int_eq(o2_inode_close_ref(fs, v->shared1_ino), 0);
	ck_assert_int_eq(o2_fs_sync(fs), 0);
	ck_assert_int_eq(o2_fs_walk(fs, &st), 0);
	ck_assert_uint_eq(st.refcount_trees, 0);
	ck_assert_uint_eq(extent_alloc_used(fs), used - 1);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	judge(v, path, "after deleting both reflinked files");
	unlink(path);
}
END_TEST

/*
 * A refcount tree that outgrows its root: a copy written at every other
 * cluster splits the records until the root cannot hold them; it becomes
 * a tree of leaf blocks (then more leaves), as the kernel grows it.  Both
 * files keep their data; fsck.ocfs2 -fn checks the tree and the counts;
 * deleting the copy merges the records again (leaves leave the tree), and
 * deleting the source gives back every block: the extent allocator's
 * count is what it was.
 */
START_TEST(reflink_grow)
{
	struct volume *v = &vols[_i];
	char path[320], cmd[768], err[256];
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	struct o2_walk_stats st;
	uint64_t src, copy, root, tree;
	unsigned room = (v->bs - 144) / 16;
	size_t clusters = room + 12, bytes = clusters * 4096;
	uint8_t *data = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes + 1);
	struct o2_inode *in;
	struct o2_buf *b;
	int r;

	ck_assert(data && want && got);
	snprintf(path, sizeof(path), "%s/reflink-grow-%u.img", tmpdir, v->bs);
	snprintf(cmd, sizeof(cmd), "cp %s %s", v->path, path);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0, "%s", err);
	root = fs->info.root_blkno;
	uint32_t used = extent_alloc_used(fs);

	value_of("grow", bytes, data);
	ck_assert_int_eq(o2_create(fs, root, "src", 3, &ni, &src), 0);
	ck_assert_int_eq(o2_write(fs, src, 0, data, bytes), (ssize_t)bytes);
	ck_assert_int_eq(o2_reflink(fs, src, root, "copy", 4, &ni, &copy), 0);
	memcpy(want, data, bytes);
	for (size_t k = 0; k < clusters / 2; k++) {
		uint8_t x = (uint8_t)~k;

		ck_assert_int_eq(o2_write(fs, copy, (2 * k + 1) * 4096 + 7, &x, 1), 1);
		want[(2 * k + 1) * 4096 + 7] = x;
	}
	ck_assert_int_eq(o2_inode_get(fs, src, &in), 0);
	tree = o2_inode_info(in)->refcount_loc;
	o2_inode_unref(in);
	ck_assert_int_eq(o2_bread(fs, tree, O2_META_REFCOUNT, &b), 0);
	struct o2_refcount_block *rb = (struct o2_refcount_block *)(void *)b->data;

	ck_assert_msg(le32(rb->rf_flags) & 2, "the root became a tree");
	ck_assert_uint_ge(le32(rb->rf_clusters), 2);
	o2_brelse(fs, b);
	ck_assert_int_eq(o2_fs_walk(fs, &st), 0);
	ck_assert_uint_eq(st.refcount_records, 2 * (clusters / 2) + 1 + v->refcount_records);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(o2_inode_get(fs, i ? copy : src, &in), 0);
		ck_assert_int_eq(o2_inode_read(fs, in, 0, got, bytes + 1), (ssize_t)bytes);
		o2_inode_unref(in);
		ck_assert_msg(memcmp(got, i ? want : data, bytes) == 0, "%s changed", i ? "copy" : "src");
	}
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	judge(v, path, "with a refcount tree grown into leaves");

	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0, "%s", err);
	r = o2_unlink(fs, root, "copy", 4);
	ck_assert_msg(r == 0, "unlink copy: %d %s", r, o2_fs_error(fs));
	ck_assert_int_eq(o2_write(fs, src, 4096, "x", 1), 1);
	data[4096] = 'x';
	ck_assert_int_eq(o2_inode_get(fs, src, &in), 0);
	ck_assert_int_eq(o2_inode_read(fs, in, 0, got, bytes + 1), (ssize_t)bytes);
	o2_inode_unref(in);
	ck_assert(memcmp(got, data, bytes) == 0);
	ck_assert_int_eq(o2_fs_walk(fs, &st), 0);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	judge(v, path, "after deleting the copy");

	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0, "%s", err);
	r = o2_unlink(fs, root, "src", 3);
	ck_assert_msg(r == 0, "unlink src: %d %s", r, o2_fs_error(fs));
	ck_assert_int_eq(o2_fs_sync(fs), 0);
	ck_assert_uint_eq(extent_alloc_used(fs), used);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	judge(v, path, "after deleting the source");
	unlink(path);
	free(data);
	free(want);
	free(got);
}
END_TEST

/*
 * An orphan whose xattrs are in the kernel's buckets (as another node may
 * leave one) is freed at the next read-write open, buckets and all, and
 * the volume stays consistent.
 */
START_TEST(unfreeable_orphan)
{
	struct volume *v = &vols[_i];
	char path[320], cmd[768], err[256], name[17];
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	struct o2_trans *t;
	struct o2_buf *b;
	struct o2_walk_stats st;

	snprintf(path, sizeof(path), "%s/orphan-%u.img", tmpdir, v->bs);
	snprintf(cmd, sizeof(cmd), "cp %s %s", v->path, path);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0, "%s", err);
	/* as a crash after the last unlink leaves it: named in the orphan
	 * directory, flagged, no links */
	snprintf(name, sizeof(name), "%016llx", (unsigned long long)v->indexed_ino);
	ck_assert_int_eq(o2_rename(fs, fs->info.root_blkno, "indexed", 7, fs->sys.orphan_dir, name, 16,
				   0), 0);
	ck_assert_int_eq(o2_trans_begin(fs, 4, &t), 0);
	ck_assert_int_eq(o2_bread(fs, v->indexed_ino, O2_META_INODE, &b), 0);
	ck_assert_int_eq(o2_trans_add(t, b), 0);
	struct o2_dinode *di = (struct o2_dinode *)(void *)b->data;

	di->i_flags = cpu_le32(le32(di->i_flags) | O2_FL_ORPHANED);
	di->i_links_count = 0;
	o2_brelse(fs, b);
	ck_assert_int_eq(o2_trans_end(t), 0);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);

	/* the next read-write open reaps orphans: this one too */
	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_msg(o2_fs_open(dev, O2_OPEN_RDWR, &fs, err, sizeof(err)) == 0,
		      "%u-byte blocks: an orphan with buckets stops the mount: %s", v->bs, err);
	struct o2_inode *od;
	struct o2_dirent de;

	ck_assert_int_eq(o2_inode_get(fs, fs->sys.orphan_dir, &od), 0);
	ck_assert_int_eq(o2_dir_lookup(fs, od, name, 16, &de), -ENOENT);
	o2_inode_unref(od);
	ck_assert_int_eq(o2_fs_walk(fs, &st), 0);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	judge(v, path, "after the orphan with buckets was freed");
	unlink(path);
}
END_TEST

/* ---- damage: each must give -EUCLEAN and a message naming a block ---- */

static uint8_t *blk(struct volume *v, uint8_t *data, uint64_t blkno)
{
	return data + blkno * v->bs;
}

/* Recompute a metadata block's check after damaging it (so the structure,
 * not the checksum, is what fscore catches). */
static void recheck(struct volume *v, uint8_t *b, size_t check_off)
{
	o2_blockcheck_compute(b, v->bs, b + check_off);
}

static struct o2_xattr_header *inline_header(struct volume *v, uint8_t *data)
{
	return (struct o2_xattr_header *)(void *)(blk(v, data, v->inline_ino) + v->bs - INLINE_ROOM);
}

static void dmg_inline_count(struct volume *v, uint8_t *data)
{
	inline_header(v, data)->xh_count = cpu_le16(60);
	recheck(v, blk(v, data, v->inline_ino), offsetof(struct o2_dinode, i_check));
}

static void dmg_inline_name_offset(struct volume *v, uint8_t *data)
{
	inline_header(v, data)->xh_entries[0].xe_name_offset = cpu_le16(INLINE_ROOM - 1);
	recheck(v, blk(v, data, v->inline_ino), offsetof(struct o2_dinode, i_check));
}

static void dmg_inline_over_entries(struct volume *v, uint8_t *data)
{
	inline_header(v, data)->xh_entries[1].xe_name_offset = cpu_le16(20);
	recheck(v, blk(v, data, v->inline_ino), offsetof(struct o2_dinode, i_check));
}

static void dmg_inline_type(struct volume *v, uint8_t *data)
{
	inline_header(v, data)->xh_entries[0].xe_type = 0x80 | 9;
	recheck(v, blk(v, data, v->inline_ino), offsetof(struct o2_dinode, i_check));
}

static void dmg_inline_local_big(struct volume *v, uint8_t *data)
{
	struct o2_xattr_header *xh = inline_header(v, data);

	for (unsigned i = 0; i < 3; i++)
		if (xh->xh_entries[i].xe_type & 0x80)
			xh->xh_entries[i].xe_value_size = cpu_le64(200);
	recheck(v, blk(v, data, v->inline_ino), offsetof(struct o2_dinode, i_check));
}

/* The non-local value's root in a store. */
static struct o2_xattr_value_root *value_root(struct o2_xattr_header *xh)
{
	for (unsigned i = 0; i < le16(xh->xh_count); i++) {
		struct o2_xattr_entry *xe = &xh->xh_entries[i];

		if (!(xe->xe_type & 0x80))
			return (struct o2_xattr_value_root *)(void *)((uint8_t *)xh +
				le16(xe->xe_name_offset) + pad4(xe->xe_name_len));
	}
	ck_abort_msg("no value root");
	return NULL;
}

static void dmg_value_clusters(struct volume *v, uint8_t *data)
{
	struct o2_xattr_value_root *vr = value_root(inline_header(v, data));

	vr->xr_clusters = cpu_le32(7);
	recheck(v, blk(v, data, v->inline_ino), offsetof(struct o2_dinode, i_check));
}

static void dmg_value_count(struct volume *v, uint8_t *data)
{
	struct o2_xattr_value_root *vr = value_root(inline_header(v, data));

	vr->xr_list.count = cpu_le16(3);
	recheck(v, blk(v, data, v->inline_ino), offsetof(struct o2_dinode, i_check));
}

static void dmg_value_past_volume(struct volume *v, uint8_t *data)
{
	struct o2_xattr_value_root *vr = value_root(inline_header(v, data));

	vr->xr_list.recs[0].blkno = cpu_le64((uint64_t)VOLUME_BYTES / v->bs + 64);
	recheck(v, blk(v, data, v->inline_ino), offsetof(struct o2_dinode, i_check));
}

static void dmg_block_signature(struct volume *v, uint8_t *data)
{
	uint8_t *b = blk(v, data, v->xattr_blk);

	memcpy(b, "XATTR02", 8);
	recheck(v, b, offsetof(struct o2_xattr_block, xb_check));
}

static void dmg_block_blkno(struct volume *v, uint8_t *data)
{
	uint8_t *b = blk(v, data, v->xattr_blk);

	((struct o2_xattr_block *)(void *)b)->xb_blkno = cpu_le64(v->xattr_blk + 1);
	recheck(v, b, offsetof(struct o2_xattr_block, xb_check));
}

static void dmg_block_checksum(struct volume *v, uint8_t *data)
{
	uint8_t *b = blk(v, data, v->xattr_blk);

	/* two flipped bits: more than the check can correct */
	b[v->bs - 1] ^= 0x11;
	b[v->bs - 9] ^= 0x22;
}

static void dmg_inode_xattr_loc(struct volume *v, uint8_t *data)
{
	uint8_t *b = blk(v, data, v->block_ino);

	((struct o2_dinode *)(void *)b)->i_xattr_loc = cpu_le64((uint64_t)VOLUME_BYTES / v->bs + 5);
	recheck(v, b, offsetof(struct o2_dinode, i_check));
}

static struct o2_xattr_header *bucket_header(struct volume *v, uint8_t *data)
{
	return (struct o2_xattr_header *)(void *)blk(v, data, v->bucket_blk);
}

static void recheck_bucket(struct volume *v, uint8_t *data)
{
	o2_blockcheck_compute(blk(v, data, v->bucket_blk), BUCKET, &bucket_header(v, data)->xh_check);
}

static void dmg_bucket_count(struct volume *v, uint8_t *data)
{
	bucket_header(v, data)->xh_num_buckets = cpu_le16(9);
	recheck_bucket(v, data);
}

static void dmg_bucket_none(struct volume *v, uint8_t *data)
{
	bucket_header(v, data)->xh_num_buckets = 0;
	recheck_bucket(v, data);
}

static void dmg_bucket_name_offset(struct volume *v, uint8_t *data)
{
	bucket_header(v, data)->xh_entries[2].xe_name_offset = cpu_le16(BUCKET - 2);
	recheck_bucket(v, data);
}

static void dmg_bucket_checksum(struct volume *v, uint8_t *data)
{
	uint8_t *b = blk(v, data, v->bucket_blk);

	b[BUCKET - 3] ^= 0x41;
	b[BUCKET - 100] ^= 0x18;
}

static void dmg_tree_root_count(struct volume *v, uint8_t *data)
{
	uint8_t *b = blk(v, data, v->indexed_blk);
	struct o2_xattr_tree_root *xt = &((struct o2_xattr_block *)(void *)b)->xb_attrs.xb_root;

	xt->xt_list.next_free_rec = cpu_le16(200);
	recheck(v, b, offsetof(struct o2_xattr_block, xb_check));
}

static struct o2_refcount_block *refcount_root(struct volume *v, uint8_t *data)
{
	return (struct o2_refcount_block *)(void *)blk(v, data, v->refcount_blk);
}

static void recheck_refcount(struct volume *v, uint8_t *data)
{
	recheck(v, blk(v, data, v->refcount_blk), offsetof(struct o2_refcount_block, rf_check));
}

static void dmg_refcount_signature(struct volume *v, uint8_t *data)
{
	memcpy(refcount_root(v, data)->rf_signature, "REFCNT2", 8);
	recheck_refcount(v, data);
}

static void dmg_refcount_used(struct volume *v, uint8_t *data)
{
	struct o2_refcount_block *rf = refcount_root(v, data);

	rf->rf_records.rl_used = cpu_le16(le16(rf->rf_records.rl_count) + 1);
	recheck_refcount(v, data);
}

static void dmg_refcount_zero(struct volume *v, uint8_t *data)
{
	refcount_root(v, data)->rf_records.rl_recs[0].r_refcount = 0;
	recheck_refcount(v, data);
}

static void dmg_refcount_past_volume(struct volume *v, uint8_t *data)
{
	refcount_root(v, data)->rf_records.rl_recs[0].r_cpos = cpu_le64(1ull << 40);
	recheck_refcount(v, data);
}

static void dmg_refcount_overlap(struct volume *v, uint8_t *data)
{
	struct o2_refcount_block *rf = refcount_root(v, data);
	struct o2_refcount_rec *r = rf->rf_records.rl_recs;

	/* a second record starting inside the first */
	r[1].r_cpos = cpu_le64(le64(r[0].r_cpos) + le32(r[0].r_clusters) - 1);
	r[1].r_clusters = cpu_le32(2);
	r[1].r_refcount = cpu_le32(1);
	rf->rf_records.rl_used = cpu_le16(2);
	recheck_refcount(v, data);
}

static void dmg_refcount_unshared(struct volume *v, uint8_t *data)
{
	refcount_root(v, data)->rf_count = 0;
	recheck_refcount(v, data);
}

static void dmg_refcount_leaf_root(struct volume *v, uint8_t *data)
{
	refcount_root(v, data)->rf_flags = cpu_le32(1);
	recheck_refcount(v, data);
}

static void dmg_refcount_loc_missing(struct volume *v, uint8_t *data)
{
	uint8_t *b = blk(v, data, v->shared2_ino);

	((struct o2_dinode *)(void *)b)->i_refcount_loc = 0;
	recheck(v, b, offsetof(struct o2_dinode, i_check));
}

static void dmg_refcount_tree_list(struct volume *v, uint8_t *data)
{
	struct o2_refcount_block *rf = refcount_root(v, data);

	rf->rf_flags = cpu_le32(2);
	rf->rf_list.count = cpu_le16(1000);
	recheck_refcount(v, data);
}

static const struct {
	const char *name;
	void (*damage)(struct volume *, uint8_t *);
	bool needs_ecc; /* a checksum case: only on metaecc volumes */
} damages[] = {
	{ "inline entry count", dmg_inline_count, false },
	{ "inline name offset", dmg_inline_name_offset, false },
	{ "inline name over the entries", dmg_inline_over_entries, false },
	{ "inline name type", dmg_inline_type, false },
	{ "local value too big", dmg_inline_local_big, false },
	{ "value root clusters", dmg_value_clusters, false },
	{ "value root record count", dmg_value_count, false },
	{ "value past the volume", dmg_value_past_volume, false },
	{ "xattr block signature", dmg_block_signature, false },
	{ "xattr block number", dmg_block_blkno, false },
	{ "xattr block checksum", dmg_block_checksum, true },
	{ "inode xattr_loc past the volume", dmg_inode_xattr_loc, false },
	{ "bucket count too big", dmg_bucket_count, false },
	{ "bucket count zero", dmg_bucket_none, false },
	{ "bucket name offset", dmg_bucket_name_offset, false },
	{ "bucket checksum", dmg_bucket_checksum, true },
	{ "xattr tree root records", dmg_tree_root_count, false },
	{ "refcount block signature", dmg_refcount_signature, false },
	{ "refcount records used", dmg_refcount_used, false },
	{ "refcount of zero", dmg_refcount_zero, false },
	{ "refcount record past the volume", dmg_refcount_past_volume, false },
	{ "refcount records overlap", dmg_refcount_overlap, false },
	{ "refcount tree shared by none", dmg_refcount_unshared, false },
	{ "refcount root marked a leaf", dmg_refcount_leaf_root, false },
	{ "inode names no refcount tree", dmg_refcount_loc_missing, false },
	{ "refcount tree list", dmg_refcount_tree_list, false },
};

#define NDAMAGES (sizeof(damages) / sizeof(damages[0]))

START_TEST(damaged)
{
	struct volume *v = &vols[_i / NDAMAGES];
	unsigned d = (unsigned)(_i % NDAMAGES);
	struct o2_blockdev *dev;
	struct o2_fs *fs = open_copy(v, damages[d].damage, &dev);
	struct o2_walk_stats st;

	if (damages[d].needs_ecc && !o2_has_incompat(fs, O2_FEATURE_INCOMPAT_META_ECC)) {
		o2_fs_close(fs);
		o2_blockdev_free(dev);
		return;
	}
	int r = o2_fs_walk(fs, &st);

	ck_assert_msg(r == -EUCLEAN, "%u-byte blocks, %s: the walk returns %d, not -EUCLEAN (%s)",
		      v->bs, damages[d].name, r, o2_fs_error(fs));
	ck_assert_msg(strstr(o2_fs_error(fs), "block") != NULL,
		      "%s: the message names no block: %s", damages[d].name, o2_fs_error(fs));
	o2_fs_close(fs);
	o2_blockdev_free(dev);
}
END_TEST

/* Made once, in the parent (an unchecked fixture): every case reads copies. */
static void craft_all(void)
{
	for (unsigned i = 0; i < 2; i++)
		craft(&vols[i]);
}

int main(void)
{
	test_env_init();
	if (system("command -v mkfs.ocfs2 >/dev/null 2>&1 && command -v fsck.ocfs2 >/dev/null 2>&1")) {
		fprintf(stderr, "mkfs.ocfs2/fsck.ocfs2 not found: skipped\n");
		return 77;
	}
	snprintf(tmpdir, sizeof(tmpdir), "%s/o2xattr-XXXXXX", test_tmpdir());
	if (!mkdtemp(tmpdir))
		return 99;

	Suite *s = suite_create("xattr");
	TCase *tc = tcase_create("xattr");

	tcase_add_unchecked_fixture(tc, craft_all, NULL);
	tcase_add_loop_test(tc, read_back, 0, 2);
	tcase_add_loop_test(tc, delete, 0, 2);
	tcase_add_loop_test(tc, change_buckets, 0, 2);
	tcase_add_loop_test(tc, deep_value, 0, 2);
	tcase_add_loop_test(tc, deep_shared, 0, 2);
	tcase_add_loop_test(tc, reflink_write, 0, 2);
	tcase_add_loop_test(tc, reflink_grow, 0, 2);
	tcase_add_loop_test(tc, unfreeable_orphan, 0, 2);
	tcase_add_loop_test(tc, damaged, 0, (int)(2 * NDAMAGES));
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	char cmd[512];
	const char *keep = getenv("O2_XATTR_IMAGES");

	if (keep && !failed) {
		snprintf(cmd, sizeof(cmd), "cp %s/xattr-*.img %s/", tmpdir, keep);
		if (system(cmd))
			failed = 1;
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	(void)!system(cmd);
	return failed ? 1 : 0;
}
