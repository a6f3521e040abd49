/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Directories, write side: adding, finding, removing and retargeting
 * entries, growing a directory out of the inode and by blocks, and the
 * "." and ".." of a new directory.
 *
 * How directories grow: an inline directory takes entries in the inode
 * until it is full, then moves to one block in a new cluster; a block
 * directory takes an entry in the first block with room, else a new block
 * (from its last cluster, or a new cluster; indexed directories take the
 * first block of their free list that fits).  On volumes with indexed-dirs
 * a directory gets its index (dx_write.c) when it leaves the inode, and its
 * blocks carry trailers, as they do everywhere with metaecc.  Removing an
 * entry folds its space into the entry before it.
 *
 * Every block (or inline area) is checked with the read side's entry
 * scanner (o2_dir_scan_entries) before it is searched or changed, so a
 * damaged entry is refused here exactly as a lookup would refuse it.
 */
#include <stdlib.h>
#include <sys/stat.h>

#include "alloc.h"
#include "dir.h"
#include "dx_write.h"
#include "error.h"
#include "extent_write.h"
#include "inode_write.h"
#include "internal.h"
#include "journal.h"
#include "reserve.h"

/* Whether new block directories get an index (and so trailers). */
static bool want_index(const struct o2_fs *fs)
{
	return o2_has_incompat(fs, O2_FEATURE_INCOMPAT_INDEXED_DIRS);
}

static bool new_dir_trailers(const struct o2_fs *fs)
{
	return o2_has_incompat(fs, O2_FEATURE_INCOMPAT_META_ECC) || want_index(fs);
}

static bool is_indexed(struct o2_buf *dib)
{
	return le16(o2_buf_dinode(dib)->i_dyn_features) & O2_DYN_INDEXED_DIR;
}

/* Whether this block directory's blocks carry trailers. */
static bool dir_trailers(const struct o2_fs *fs, struct o2_buf *dib)
{
	return o2_has_incompat(fs, O2_FEATURE_INCOMPAT_META_ECC) || is_indexed(dib);
}

static unsigned usable_of(const struct o2_fs *fs, bool trailer)
{
	return fs->bs - (trailer ? sizeof(struct o2_dir_trailer) : 0);
}

static void init_trailer(const struct o2_fs *fs, uint8_t *block, uint64_t blkno, uint64_t dir)
{
	struct o2_dir_trailer *tr = (struct o2_dir_trailer *)(block + fs->bs - sizeof(*tr));

	memset(tr, 0, sizeof(*tr));
	tr->db_compat_rec_len = cpu_le16(sizeof(*tr));
	memcpy(tr->db_signature, O2_SIG_DIRTRL, sizeof(O2_SIG_DIRTRL));
	tr->db_blkno = cpu_le64(blkno);
	tr->db_parent_dinode = cpu_le64(dir);
}

static void put_entry(struct o2_dir_entry *de, uint64_t ino, const char *name, size_t len,
		      uint8_t type, unsigned rec_len)
{
	de->inode = cpu_le64(ino);
	de->rec_len = cpu_le16((uint16_t)rec_len);
	de->name_len = (uint8_t)len;
	de->file_type = type;
	memcpy(de->name, name, len);
}

/* Place an entry in [data, data+size) if there is room; true when placed. */
static bool place_entry(uint8_t *data, unsigned size, uint64_t ino, const char *name, size_t len,
			uint8_t type)
{
	unsigned need = O2_DIR_REC_LEN(len);

	for (unsigned off = 0; off + O2_DIR_MEMBER_LEN <= size;) {
		struct o2_dir_entry *de = (struct o2_dir_entry *)(data + off);
		unsigned rl = le16(de->rec_len);

		if (rl < O2_DIR_REC_LEN(1) || rl > size - off)
			return false; /* damaged: o2_dir_add checked the block first */
		if (!le64(de->inode) && rl >= need) {
			put_entry(de, ino, name, len, type, rl);
			return true;
		}
		unsigned used = O2_DIR_REC_LEN(de->name_len);

		if (le64(de->inode) && rl - used >= need) {
			struct o2_dir_entry *nd = (struct o2_dir_entry *)(data + off + used);

			put_entry(nd, ino, name, len, type, rl - used);
			de->rec_len = cpu_le16((uint16_t)used);
			return true;
		}
		off += rl;
	}
	return false;
}

/* Remove the entry at off: fold it into the one before it, or clear it. */
static void drop_entry(uint8_t *data, unsigned off)
{
	struct o2_dir_entry *de = (struct o2_dir_entry *)(data + off);
	unsigned prev = 0, o = 0;
	bool have_prev = false;

	while (o < off) {
		prev = o;
		have_prev = true;
		o += le16(((struct o2_dir_entry *)(data + o))->rec_len);
	}
	if (have_prev) {
		struct o2_dir_entry *pd = (struct o2_dir_entry *)(data + prev);

		pd->rec_len = cpu_le16((uint16_t)(le16(pd->rec_len) + le16(de->rec_len)));
	} else {
		de->inode = 0;
	}
}

/* Block number of directory block i (logical) of the directory. */
static int dir_block(struct o2_fs *fs, struct o2_buf *dib, uint64_t i, uint64_t *ret)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	struct o2_extent ext;
	int r = o2_tree_map(fs, &(struct o2_tree_root){ dib->blkno, &di->id2.i_list,
						      le16(di->id2.i_list.count) },
			    (uint32_t)(i >> fs->bpc_bits), &ext);

	if (r < 0)
		return r;
	if (!ext.blkno)
		return o2_corrupt(fs, dib->blkno, "directory has a hole at block %llu",
				  (unsigned long long)i);
	*ret = ext.blkno + (i & ((1u << fs->bpc_bits) - 1));
	return 0;
}

static uint8_t kind_of(bool trailer)
{
	return trailer ? O2_META_DIR_BLOCK : O2_META_PLAIN;
}

/* Turn an inline directory into one block in a new cluster. */
static int expand_inline_dir(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	unsigned size = (unsigned)le64(di->i_size);
	uint32_t start, got;
	struct o2_buf *b;
	struct o2_tree_owner o;
	int r = o2_clusters_alloc(t, fs, 1, 1, &start, &got);

	if (r < 0)
		return r;
	uint64_t blk = (uint64_t)start << fs->bpc_bits;

	bool tr = new_dir_trailers(fs);

	r = o2_bnew(fs, blk, kind_of(tr), &b);
	if (r < 0)
		return r;
	r = o2_trans_add(t, b);
	if (r == 0)
		r = o2_trans_add(t, dib);
	if (r < 0)
		goto out;
	memcpy(b->data, di->id2.i_data.id_data, size);
	/* the last entry grows to the end of the usable block */
	for (unsigned off = 0; off < size;) {
		struct o2_dir_entry *de = (struct o2_dir_entry *)(b->data + off);
		unsigned rl = le16(de->rec_len);

		if (!rl)
			break;
		if (off + rl >= size) {
			de->rec_len = cpu_le16((uint16_t)(usable_of(fs, tr) - off));
			break;
		}
		off += rl;
	}
	if (tr)
		init_trailer(fs, b->data, blk, dib->blkno);
	o2_inode_to_extent_list(fs, di);
	di->i_size = cpu_le64(fs->bs);
	di->i_clusters = cpu_le32(1);
	o2_inode_owner(dib, &o);
	r = o2_tree_insert(t, fs, &o, &(struct o2_extent){ 0, 1, blk, 0 });
	if (r == 0 && want_index(fs))
		r = o2_dx_create(t, fs, dib);
out:
	o2_brelse(fs, b);
	return r;
}

/* Add a block to a block directory; ret gets the new block, logged, one empty entry. */
static int grow_dir(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib, struct o2_buf **ret)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	uint64_t nblk = (le64(di->i_size) + fs->bs - 1) >> fs->bits, blk;
	struct o2_buf *b;
	int r;

	r = o2_trans_add(t, dib);
	if (r < 0)
		return r;
	if (nblk < ((uint64_t)le32(di->i_clusters) << fs->bpc_bits)) {
		r = dir_block(fs, dib, nblk, &blk);
		if (r < 0)
			return r;
	} else {
		uint32_t start, got;
		struct o2_tree_owner o;

		r = o2_clusters_alloc(t, fs, 1, 1, &start, &got);
		if (r < 0)
			return r;
		blk = (uint64_t)start << fs->bpc_bits;
		o2_inode_owner(dib, &o);
		r = o2_tree_insert(t, fs, &o, &(struct o2_extent){ (uint32_t)(nblk >> fs->bpc_bits),
								 1, blk, 0 });
		if (r < 0)
			return r;
		di->i_clusters = cpu_le32(le32(di->i_clusters) + 1);
	}
	bool tr = dir_trailers(fs, dib);

	r = o2_trans_bnew(t, fs, blk, kind_of(tr), &b);
	if (r < 0)
		return r;
	((struct o2_dir_entry *)b->data)->rec_len = cpu_le16((uint16_t)usable_of(fs, tr));
	if (tr)
		init_trailer(fs, b->data, blk, dib->blkno);
	di->i_size = cpu_le64((nblk + 1) << fs->bits);
	*ret = b;
	return 0;
}

int o2_dir_check_changeable(struct o2_fs *fs, struct o2_buf *dib)
{
	struct o2_dinode *di = o2_buf_dinode(dib);

	if (!S_ISDIR(le16(di->i_mode)))
		return -ENOTDIR;
	if (is_indexed(dib) && !o2_has_incompat(fs, O2_FEATURE_INCOMPAT_INDEXED_DIRS))
		return o2_corrupt(fs, dib->blkno, "indexed directory on a volume without "
				  "indexed-dirs");
	return 0;
}

struct find_arg {
	const uint8_t *data; /* the block (or inline area) scanned */
	const char *name;
	size_t len;
	uint64_t blk; /* 0: inline */
	struct o2_dir_slot *ret;
};

static int match_entry(const struct o2_dir_entry *de, uint64_t blk, void *arg)
{
	struct find_arg *a = arg;

	if (de->name_len != a->len || memcmp(de->name, a->name, a->len))
		return 0;
	*a->ret = (struct o2_dir_slot){ le64(de->inode), de->file_type, a->blk,
					(unsigned)((const uint8_t *)de - a->data) };
	return 1;
}

static int accept_entry(const struct o2_dir_entry *de, uint64_t blk, void *arg)
{
	return 0;
}

/*
 * Check a block (or the inline area) before an entry is placed in it, the
 * same way a lookup checks it: place_entry trusts what it walks.
 */
static int check_entries(struct o2_fs *fs, uint64_t blk, const uint8_t *data, unsigned size)
{
	return o2_dir_scan_entries(fs, blk, data, size, accept_entry, NULL);
}

/* An entry went into block b of an indexed directory: index it, track the hole. */
static int indexed_added(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib,
			 struct o2_buf *b, const char *name, size_t len)
{
	int r;

	if (!is_indexed(dib))
		return 0;
	r = o2_dx_insert(t, fs, dib, name, len, b->blkno);
	return r < 0 ? r : o2_dx_block_changed(t, fs, dib, b);
}

/* Whether the name fits in data (a directory block or the inline area) as it is. */
static int fits_in(struct o2_fs *fs, const uint8_t *data, unsigned size, const char *name,
		   size_t len)
{
	uint8_t *copy = o2_malloc(size);

	if (!copy)
		return -ENOMEM;
	memcpy(copy, data, size);
	int fits = place_entry(copy, size, 1, name, len, O2_FT_REG);

	free(copy);
	return fits;
}

int o2_dir_add_need(struct o2_fs *fs, struct o2_buf *dib, const char *name, size_t len,
		    struct o2_resv *want)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	bool tr = dir_trailers(fs, dib);
	uint64_t nblk = (le64(di->i_size) + fs->bs - 1) >> fs->bits;
	struct o2_buf *b;
	int r;

	if (le16(di->i_dyn_features) & O2_DYN_INLINE_DATA) {
		r = fits_in(fs, di->id2.i_data.id_data, (unsigned)le64(di->i_size), name, len);
		if (r != 0)
			return r < 0 ? r : 0;
		/* one block in a cluster of its own, mapped from the inode; its index */
		want->clusters++;
		return want_index(fs) ? o2_dx_insert_need(fs, dib, name, len, want) : 0;
	}
	if (is_indexed(dib)) {
		struct o2_buf *rb;
		uint64_t cur;

		r = o2_bread(fs, le64(di->i_dx_root), O2_META_DX_ROOT, &rb);
		if (r < 0)
			return r;
		cur = le64(((struct o2_dx_root_block *)rb->data)->dr_free_blk);
		o2_brelse(fs, rb);
		for (unsigned hops = 0; cur; hops++) {
			if (hops > (1u << 24))
				return o2_corrupt(fs, dib->blkno, "directory free list loops");
			r = o2_bread(fs, cur, O2_META_DIR_BLOCK, &b);
			if (r < 0)
				return r;
			const struct o2_dir_trailer *dt =
				(const struct o2_dir_trailer *)(b->data + fs->bs - sizeof(*dt));
			bool room = le16(dt->db_free_rec_len) >= O2_DIR_REC_LEN(len);

			cur = le64(dt->db_free_next);
			o2_brelse(fs, b);
			if (room)
				return o2_dx_insert_need(fs, dib, name, len, want);
		}
	} else {
		for (uint64_t i = 0; i < nblk; i++) {
			uint64_t blk;

			r = dir_block(fs, dib, i, &blk);
			if (r == 0)
				r = o2_bread(fs, blk, kind_of(tr), &b);
			if (r < 0)
				return r;
			r = fits_in(fs, b->data, usable_of(fs, tr), name, len);
			o2_brelse(fs, b);
			if (r != 0)
				return r < 0 ? r : 0;
		}
	}
	/* a new block: from the last cluster while it has one, else a new cluster */
	if (nblk >= ((uint64_t)le32(di->i_clusters) << fs->bpc_bits)) {
		struct o2_tree_owner o;
		uint32_t meta;

		o2_inode_owner(dib, &o);
		r = o2_tree_meta_need(fs, &o, (uint32_t)(nblk >> fs->bpc_bits), 1, &meta);
		if (r < 0)
			return r;
		want->clusters++;
		want->meta += meta;
	}
	return is_indexed(dib) ? o2_dx_insert_need(fs, dib, name, len, want) : 0;
}

int o2_dir_add(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib, const char *name,
	       size_t len, uint64_t ino, uint8_t type)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	int r = o2_dir_check_changeable(fs, dib);

	fs->dir_changes++; /* listings taken before are stale (o2_fs_dir_stamp) */
	if (r < 0)
		return r;
	if (le16(di->i_dyn_features) & O2_DYN_INLINE_DATA) {
		/* checked before logging: a refused add leaves nothing to undo */
		r = check_entries(fs, dib->blkno, di->id2.i_data.id_data, (unsigned)le64(di->i_size));
		if (r == 0)
			r = o2_trans_add(t, dib);
		if (r < 0)
			return r;
		if (place_entry(di->id2.i_data.id_data, (unsigned)le64(di->i_size), ino, name, len, type))
			return 0;
		r = expand_inline_dir(t, fs, dib);
		if (r < 0)
			return r;
	}
	bool tr = dir_trailers(fs, dib);
	uint64_t nblk = (le64(di->i_size) + fs->bs - 1) >> fs->bits;
	struct o2_buf *b;

	if (is_indexed(dib)) {
		/* the free list names the blocks with room */
		struct o2_buf *rb;
		uint64_t cur;

		r = o2_bread(fs, le64(di->i_dx_root), O2_META_DX_ROOT, &rb);
		if (r < 0)
			return r;
		cur = le64(((struct o2_dx_root_block *)rb->data)->dr_free_blk);
		o2_brelse(fs, rb);
		for (unsigned hops = 0; cur; hops++) {
			if (hops > (1u << 24))
				return o2_corrupt(fs, dib->blkno, "directory free list loops");
			r = o2_bread(fs, cur, O2_META_DIR_BLOCK, &b);
			if (r < 0)
				return r;
			const struct o2_dir_trailer *dt =
				(const struct o2_dir_trailer *)(b->data + fs->bs - sizeof(*dt));

			if (le16(dt->db_free_rec_len) >= O2_DIR_REC_LEN(len)) {
				r = check_entries(fs, cur, b->data, usable_of(fs, tr));
				if (r == 0)
					r = o2_trans_add(t, b);
				if (r == 0 && !place_entry(b->data, usable_of(fs, tr), ino, name, len, type))
					r = o2_corrupt(fs, cur, "free list promises room the block lacks");
				if (r == 0)
					r = indexed_added(t, fs, dib, b, name, len);
				o2_brelse(fs, b);
				return r;
			}
			cur = le64(dt->db_free_next);
			o2_brelse(fs, b);
		}
	} else {
		for (uint64_t i = 0; i < nblk; i++) {
			uint64_t blk;

			r = dir_block(fs, dib, i, &blk);
			if (r == 0)
				r = o2_bread(fs, blk, kind_of(tr), &b);
			if (r == 0) {
				r = check_entries(fs, blk, b->data, usable_of(fs, tr));
				if (r < 0)
					o2_brelse(fs, b);
			}
			if (r < 0)
				return r;
			/* look before logging, to log only the block that changes */
			uint8_t *copy = o2_malloc(fs->bs);

			if (!copy) {
				o2_brelse(fs, b);
				return -ENOMEM;
			}
			memcpy(copy, b->data, fs->bs);
			bool fits = place_entry(copy, usable_of(fs, tr), ino, name, len, type);

			free(copy);
			if (fits) {
				r = o2_trans_add(t, b);
				if (r == 0)
					place_entry(b->data, usable_of(fs, tr), ino, name, len, type);
				o2_brelse(fs, b);
				return r;
			}
			o2_brelse(fs, b);
		}
	}
	r = grow_dir(t, fs, dib, &b);
	if (r < 0)
		return r;
	if (!place_entry(b->data, usable_of(fs, tr), ino, name, len, type))
		r = o2_corrupt(fs, dib->blkno, "a new directory block has no room for an entry");
	if (r == 0)
		r = indexed_added(t, fs, dib, b, name, len);
	o2_brelse(fs, b);
	return r;
}

/*
 * Find an entry by name: through the index for indexed directories (which
 * names the block), else by scanning every block - with the read side's
 * scanner, so a damaged entry is refused here as a lookup refuses it.
 */
int o2_dir_find(struct o2_fs *fs, struct o2_buf *dib, const char *name, size_t len,
		struct o2_dir_slot *ret)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	struct find_arg a = { NULL, name, len, 0, ret };
	uint64_t nblk = 1, blk = 0, only = 0;
	struct o2_buf *b = NULL;
	int r;

	if (!S_ISDIR(le16(di->i_mode)))
		return -ENOTDIR;
	bool inl = le16(di->i_dyn_features) & O2_DYN_INLINE_DATA;
	bool tr = dir_trailers(fs, dib);

	if (inl) {
		a.data = di->id2.i_data.id_data;
		r = o2_dir_scan_entries(fs, dib->blkno, a.data, (unsigned)le64(di->i_size),
					match_entry, &a);
		return r == 1 ? 0 : r < 0 ? r : -ENOENT;
	}
	nblk = (le64(di->i_size) + fs->bs - 1) >> fs->bits;
	if (is_indexed(dib)) {
		struct o2_inode *d;
		struct o2_dirent de;

		r = o2_inode_get(fs, dib->blkno, &d);
		if (r < 0)
			return r;
		r = o2_dir_lookup(fs, d, name, len, &de);
		o2_inode_unref(d);
		if (r < 0)
			return r;
		only = de.dirent_blk;
		nblk = 1;
	}
	for (uint64_t i = 0; i < nblk; i++) {
		r = only ? (blk = only, 0) : dir_block(fs, dib, i, &blk);
		if (r == 0)
			r = o2_bread(fs, blk, kind_of(tr), &b);
		if (r < 0)
			return r;
		a.data = b->data;
		a.blk = blk;
		r = o2_dir_scan_entries(fs, blk, b->data, usable_of(fs, tr), match_entry, &a);
		o2_brelse(fs, b);
		if (r)
			return r == 1 ? 0 : r;
	}
	return -ENOENT;
}

int o2_dir_remove(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib, const char *name,
		  size_t len, const struct o2_dir_slot *f)
{
	int r = o2_dir_check_changeable(fs, dib);

	fs->dir_changes++; /* listings taken before are stale (o2_fs_dir_stamp) */
	if (r < 0)
		return r;
	if (!f->blk) {
		r = o2_trans_add(t, dib);
		if (r == 0)
			drop_entry(o2_buf_dinode(dib)->id2.i_data.id_data, f->off);
		return r;
	}
	struct o2_buf *b;

	r = o2_bread(fs, f->blk, kind_of(dir_trailers(fs, dib)), &b);
	if (r < 0)
		return r;
	r = o2_trans_add(t, b);
	if (r == 0)
		drop_entry(b->data, f->off);
	if (r == 0 && is_indexed(dib)) {
		r = o2_dx_remove(t, fs, dib, name, len, b->blkno);
		if (r == 0)
			r = o2_dx_block_changed(t, fs, dib, b);
	}
	o2_brelse(fs, b);
	return r;
}

/* Point an existing entry at another inode. */
int o2_dir_retarget(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib,
		    const struct o2_dir_slot *f, uint64_t ino, uint8_t type)
{
	struct o2_buf *b = NULL;
	uint8_t *data;
	int r = o2_dir_check_changeable(fs, dib);

	fs->dir_changes++; /* listings taken before are stale (o2_fs_dir_stamp) */
	if (r < 0)
		return r;
	if (!f->blk) {
		r = o2_trans_add(t, dib);
		data = o2_buf_dinode(dib)->id2.i_data.id_data;
	} else {
		r = o2_bread(fs, f->blk, kind_of(dir_trailers(fs, dib)), &b);
		if (r == 0)
			r = o2_trans_add(t, b);
		data = b ? b->data : NULL;
	}
	if (r == 0) {
		struct o2_dir_entry *de = (struct o2_dir_entry *)(data + f->off);

		de->inode = cpu_le64(ino);
		de->file_type = type;
	}
	o2_brelse(fs, b);
	return r;
}

/* Make a new directory's "." and "..". */
int o2_dir_init(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, uint64_t parent)
{
	struct o2_dinode *di = o2_buf_dinode(ib);
	uint8_t *data;
	unsigned size;
	struct o2_buf *b = NULL;

	if (le16(di->i_dyn_features) & O2_DYN_INLINE_DATA) {
		data = di->id2.i_data.id_data;
		size = le16(di->id2.i_data.id_count);
		di->i_size = cpu_le64(size);
	} else {
		uint32_t start, got;
		struct o2_tree_owner o;
		int r = o2_clusters_alloc(t, fs, 1, 1, &start, &got);

		if (r < 0)
			return r;
		uint64_t blk = (uint64_t)start << fs->bpc_bits;

		o2_inode_owner(ib, &o);
		bool tr = new_dir_trailers(fs);

		r = o2_tree_insert(t, fs, &o, &(struct o2_extent){ 0, 1, blk, 0 });
		if (r == 0)
			r = o2_trans_bnew(t, fs, blk, kind_of(tr), &b);
		if (r < 0)
			return r;
		di->i_clusters = cpu_le32(1);
		di->i_size = cpu_le64(fs->bs);
		data = b->data;
		size = usable_of(fs, tr);
		if (tr)
			init_trailer(fs, b->data, blk, ib->blkno);
	}
	unsigned dot = O2_DIR_REC_LEN(1);

	put_entry((struct o2_dir_entry *)data, ib->blkno, ".", 1, O2_FT_DIR, dot);
	put_entry((struct o2_dir_entry *)(data + dot), parent, "..", 2, O2_FT_DIR, size - dot);
	o2_brelse(fs, b);
	if (b && want_index(fs))
		return o2_dx_create(t, fs, ib);
	return 0;
}
