/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The namespace, write side: new inodes, directory entries, and the
 * operations on names (create, mkdir, symlink, link, unlink, rmdir,
 * rename), plus open-file references and orphans.
 *
 * How directories grow: an inline directory takes entries in the inode
 * until it is full, then moves to one block in a new cluster; a block
 * directory takes an entry in the first block with room, else a new block
 * (from its last cluster, or a new cluster; indexed directories take the
 * first block of their free list that fits).  On volumes with indexed-dirs
 * a directory gets its index (dx_write.c) when it leaves the inode, and its
 * blocks carry trailers, as they do everywhere with metaecc.  Removing an
 * entry folds its space into the entry before it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "alloc.h"
#include "dx_write.h"
#include "error.h"
#include "extent_write.h"
#include "inode_write.h"
#include "journal.h"
#include "write.h"

#define NAMEI_CREDITS (O2_TREE_CREDITS + 2 * O2_ALLOC_CREDITS + 16)
/* an inode freed where its last name goes (its extents in the inode) */
#define FREE_IN_PLACE_CREDITS (24 + O2_XATTR_FREE_CREDITS)
#define UNLINK_CREDITS (NAMEI_CREDITS + FREE_IN_PLACE_CREDITS)

static uint8_t type_of(uint16_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return O2_FT_REG;
	case S_IFDIR: return O2_FT_DIR;
	case S_IFCHR: return O2_FT_CHR;
	case S_IFBLK: return O2_FT_BLK;
	case S_IFIFO: return O2_FT_FIFO;
	case S_IFSOCK: return O2_FT_SOCK;
	case S_IFLNK: return O2_FT_LNK;
	}
	return O2_FT_UNKNOWN;
}

static uint32_t links_of(const struct o2_dinode *di)
{
	return (uint32_t)le16(di->i_links_count) | ((uint32_t)le16(di->i_links_count_hi) << 16);
}

static void set_links(struct o2_dinode *di, uint32_t n)
{
	di->i_links_count = cpu_le16((uint16_t)n);
	di->i_links_count_hi = cpu_le16((uint16_t)(n >> 16));
}

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
			return false; /* damaged; the read path reports it */
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

static int check_dir_changeable(struct o2_fs *fs, struct o2_buf *dib)
{
	struct o2_dinode *di = o2_buf_dinode(dib);

	if (!S_ISDIR(le16(di->i_mode)))
		return -ENOTDIR;
	if (is_indexed(dib) && !o2_has_incompat(fs, O2_FEATURE_INCOMPAT_INDEXED_DIRS))
		return o2_corrupt(fs, dib->blkno, "indexed directory on a volume without "
				  "indexed-dirs");
	return 0;
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

static int dir_add(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib, const char *name,
		   size_t len, uint64_t ino, uint8_t type)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	int r = check_dir_changeable(fs, dib);

	if (r < 0)
		return r;
	if (le16(di->i_dyn_features) & O2_DYN_INLINE_DATA) {
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

struct found {
	uint64_t ino;
	uint8_t type;
	uint64_t blk; /* 0: inline */
	unsigned off;
};

/*
 * Find an entry by name: through the index for indexed directories (which
 * names the block), else by scanning every block.
 */
static int dir_find(struct o2_fs *fs, struct o2_buf *dib, const char *name, size_t len,
		    struct found *ret)
{
	struct o2_dinode *di = o2_buf_dinode(dib);
	uint8_t *data;
	unsigned size;
	uint64_t nblk = 1, blk = 0, only = 0;
	struct o2_buf *b = NULL;
	int r;

	if (!S_ISDIR(le16(di->i_mode)))
		return -ENOTDIR;
	bool inl = le16(di->i_dyn_features) & O2_DYN_INLINE_DATA;
	bool tr = dir_trailers(fs, dib);

	if (!inl)
		nblk = (le64(di->i_size) + fs->bs - 1) >> fs->bits;
	if (!inl && is_indexed(dib)) {
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
		if (inl) {
			data = di->id2.i_data.id_data;
			size = (unsigned)le64(di->i_size);
		} else {
			r = only ? (blk = only, 0) : dir_block(fs, dib, i, &blk);
			if (r == 0)
				r = o2_bread(fs, blk, kind_of(tr), &b);
			if (r < 0)
				return r;
			data = b->data;
			size = usable_of(fs, tr);
		}
		for (unsigned off = 0; off + O2_DIR_MEMBER_LEN <= size;) {
			struct o2_dir_entry *de = (struct o2_dir_entry *)(data + off);
			unsigned rl = le16(de->rec_len);

			if (rl < O2_DIR_REC_LEN(1) || rl > size - off) {
				o2_brelse(fs, b);
				return o2_corrupt(fs, inl ? dib->blkno : blk,
						  "damaged directory entry at offset %u", off);
			}
			if (le64(de->inode) && de->name_len == len && !memcmp(de->name, name, len)) {
				*ret = (struct found){ le64(de->inode), de->file_type, inl ? 0 : blk, off };
				o2_brelse(fs, b);
				return 0;
			}
			off += rl;
		}
		o2_brelse(fs, b);
		b = NULL;
	}
	return -ENOENT;
}

static int dir_remove(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib, const char *name,
		      size_t len, const struct found *f)
{
	int r = check_dir_changeable(fs, dib);

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
static int dir_retarget(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib,
			const struct found *f, uint64_t ino, uint8_t type)
{
	struct o2_buf *b = NULL;
	uint8_t *data;
	int r = check_dir_changeable(fs, dib);

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

/* ---- inodes ---- */

static int new_inode(struct o2_trans *t, struct o2_fs *fs, uint16_t mode, uint32_t uid,
		     uint32_t gid, uint64_t rdev, struct o2_buf **ret)
{
	struct o2_suballoc_res res;
	struct o2_buf *b;
	int r = o2_suballoc_new_block(t, fs, fs->sys.inode_alloc, O2_META_INODE, &res, &b);

	if (r < 0)
		return r;
	struct o2_dinode *di = o2_buf_dinode(b);
	uint64_t now = o2_now_ns(fs);

	memcpy(di->i_signature, O2_SIG_INODE, sizeof(O2_SIG_INODE));
	di->i_generation = cpu_le32(o2_new_generation(fs));
	di->i_suballoc_slot = cpu_le16(res.slot);
	di->i_suballoc_bit = cpu_le16(res.bit);
	if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_DISCONTIG_BG))
		di->i_suballoc_loc = cpu_le64(res.group);
	di->i_uid = cpu_le32(uid);
	di->i_gid = cpu_le32(gid);
	di->i_mode = cpu_le16(mode);
	set_links(di, S_ISDIR(mode) ? 2 : 1);
	di->i_flags = cpu_le32(O2_FL_VALID);
	di->i_blkno = cpu_le64(res.blkno);
	di->i_fs_generation = cpu_le32(fs->info.fs_generation);
	di->i_atime = di->i_ctime = di->i_mtime = cpu_le64(now / 1000000000ull);
	di->i_atime_nsec = di->i_ctime_nsec = di->i_mtime_nsec =
		cpu_le32((uint32_t)(now % 1000000000ull));
	if (S_ISCHR(mode) || S_ISBLK(mode))
		di->id1.i_rdev = cpu_le64(rdev);
	bool inl = o2_has_incompat(fs, O2_FEATURE_INCOMPAT_INLINE_DATA);

	if (inl && (S_ISREG(mode) || S_ISDIR(mode))) {
		di->i_dyn_features = cpu_le16(O2_DYN_INLINE_DATA);
		di->id2.i_data.id_count = cpu_le16((uint16_t)o2_inline_max(fs->bs));
	} else if (!S_ISLNK(mode)) {
		di->id2.i_list.count = cpu_le16((uint16_t)o2_extent_recs_per_inode(fs->bs));
	}
	*ret = b;
	return 0;
}

/* Make a new directory's "." and "..". */
static int init_dir(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, uint64_t parent)
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

/* Inside t: the inode (its data already freed) is no longer in use. */
static int free_inode_bit(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib)
{
	struct o2_dinode *di = o2_buf_dinode(ib);
	int r = o2_xattr_free_all(t, fs, ib);

	if (r == 0)
		r = o2_refcount_detach(t, fs, ib);
	if (r == 0)
		r = o2_trans_add(t, ib);
	if (r < 0)
		return r;
	di->i_flags = cpu_le32(le32(di->i_flags) & ~(uint32_t)(O2_FL_VALID | O2_FL_ORPHANED));
	di->i_dtime = cpu_le64(o2_now_ns(fs) / 1000000000ull);
	set_links(di, 0);
	return o2_suballoc_give_back(t, fs, O2_SYS_INODE_ALLOC, le16(di->i_suballoc_slot),
				     le64(di->i_suballoc_loc), le16(di->i_suballoc_bit), ib->blkno);
}

/* ---- open references and orphans ---- */

static unsigned ref_bucket(const struct o2_fs *fs, uint64_t ino)
{
	return (unsigned)((ino * 0x9E3779B97F4A7C15ull) >> 40) & (fs->nrefs_buckets - 1);
}

static struct o2_openref **find_ref_slot(struct o2_fs *fs, uint64_t ino)
{
	if (!fs->nrefs_buckets)
		return NULL;
	struct o2_openref **pp = &fs->refs[ref_bucket(fs, ino)];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

static struct o2_openref *find_ref(struct o2_fs *fs, uint64_t ino)
{
	struct o2_openref **pp = find_ref_slot(fs, ino);

	return pp ? *pp : NULL;
}

/* Double the buckets (a power of two) once chains get long. */
static int refs_grow(struct o2_fs *fs)
{
	unsigned n = fs->nrefs_buckets ? fs->nrefs_buckets * 2 : 256, old = fs->nrefs_buckets;
	struct o2_openref **nb = o2_calloc(n, sizeof(*nb)), **ob = fs->refs;

	if (!nb)
		return -ENOMEM;
	fs->refs = nb;
	fs->nrefs_buckets = n;
	for (unsigned i = 0; i < old; i++)
		while (ob[i]) {
			struct o2_openref *o = ob[i];
			unsigned b = ref_bucket(fs, o->ino);

			ob[i] = o->next;
			o->next = nb[b];
			nb[b] = o;
		}
	free(ob);
	return 0;
}

int o2_inode_open_ref(struct o2_fs *fs, uint64_t ino)
{
	struct o2_openref *o = find_ref(fs, ino);

	if (!o) {
		if (fs->nrefs >= fs->nrefs_buckets * 2u) {
			int r = refs_grow(fs);

			if (r < 0)
				return r;
		}
		o = o2_calloc(1, sizeof(*o));
		if (!o)
			return -ENOMEM;
		unsigned b = ref_bucket(fs, ino);

		o->ino = ino;
		o->next = fs->refs[b];
		fs->refs[b] = o;
		fs->nrefs++;
	}
	o->refs++;
	return 0;
}

int o2_openrefs_close_all(struct o2_fs *fs)
{
	int r = 0;

	for (unsigned i = 0; i < fs->nrefs_buckets && r == 0; i++)
		while (fs->refs[i] && r == 0) {
			fs->refs[i]->refs = 1; /* every holder at once */
			r = o2_inode_close_ref(fs, fs->refs[i]->ino);
		}
	return r;
}

static void orphan_name(uint64_t ino, char *buf)
{
	snprintf(buf, 17, "%016llx", (unsigned long long)ino);
}

/*
 * Free an orphan: its index and data in transactions of their own while it
 * stays in the orphan directory, then - in one transaction - its orphan
 * entry and its inode bit, so that a crash anywhere leaves either a
 * reachable orphan or nothing.  An entry naming an inode no longer in use
 * just goes.
 */
static int reap_orphan(struct o2_fs *fs, uint64_t ino)
{
	struct o2_trans *t;
	struct o2_buf *ob = NULL, *ib = NULL;
	struct found f;
	char name[17];
	int r, e;

	r = o2_inode_buf(fs, ino, &ib);
	bool indexed = r == 0 && (le16(o2_buf_dinode(ib)->i_dyn_features) & O2_DYN_INDEXED_DIR);

	/* what the write path cannot free (xattrs in buckets, or values a
	 * reflink shares) is refused before anything changes: the orphan
	 * stays as it is */
	if (r == 0)
		r = o2_check_writable(fs, o2_buf_dinode(ib), true);
	o2_brelse(fs, ib);
	if (r == -EOPNOTSUPP)
		return r;
	ib = NULL;
	if (indexed) {
		r = o2_trans_begin(fs, NAMEI_CREDITS, &t);
		if (r < 0)
			return r;
		r = o2_inode_buf(fs, ino, &ib);
		if (r == 0)
			r = o2_dx_destroy(t, fs, ib);
		o2_brelse(fs, ib);
		ib = NULL;
		e = o2_trans_finish(t, r);
		if (r == 0)
			r = e;
	}
	if (r == 0)
		r = o2_free_from(fs, ino, 0, UINT64_MAX);
	if (r == 0)
		r = o2_xattr_strip_values(fs, ino);
	if (r < 0 && r != -ENOENT)
		return r;
	/* the xattrs go with the inode bit: their clusters into the truncate log */
	r = o2_trans_begin_freeing(fs, NAMEI_CREDITS + O2_XATTR_FREE_CREDITS +
				   O2_REFCOUNT_DETACH_CREDITS, &t);
	if (r < 0)
		return r;
	orphan_name(ino, name);
	r = o2_inode_buf(fs, fs->sys.orphan_dir, &ob);
	if (r == 0)
		r = dir_find(fs, ob, name, 16, &f);
	if (r == 0)
		r = dir_remove(t, fs, ob, name, 16, &f);
	if (r == 0) {
		r = o2_inode_buf(fs, ino, &ib);
		if (r == 0)
			r = free_inode_bit(t, fs, ib);
		else if (r == -ENOENT)
			r = 0;
	}
	o2_brelse(fs, ob);
	o2_brelse(fs, ib);
	e = o2_trans_finish(t, r);
	return r < 0 ? r : e;
}

/*
 * reap_orphan once the inode's last name or reference is gone.  What it
 * refuses (xattrs in buckets, say) is no failure of the unlink or the
 * close: the orphan waits, consistent, for a later open to try again.
 */
static int reap_or_wait(struct o2_fs *fs, uint64_t ino)
{
	int r = reap_orphan(fs, ino);

	return r == -EOPNOTSUPP ? 0 : r;
}

int o2_inode_close_ref(struct o2_fs *fs, uint64_t ino)
{
	struct o2_openref **pp = find_ref_slot(fs, ino), *o;
	struct o2_buf *ib;
	bool orphan;
	int r;

	o = pp ? *pp : NULL;
	if (!o)
		return -EINVAL;
	if (--o->refs)
		return 0;
	*pp = o->next;
	fs->nrefs--;
	free(o);
	if (!fs->journal)
		return 0;
	r = o2_inode_buf(fs, ino, &ib);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	orphan = le32(o2_buf_dinode(ib)->i_flags) & O2_FL_ORPHANED;
	o2_brelse(fs, ib);
	return orphan ? reap_or_wait(fs, ino) : 0;
}

void o2_openrefs_free(struct o2_fs *fs)
{
	for (unsigned i = 0; i < fs->nrefs_buckets; i++)
		while (fs->refs[i]) {
			struct o2_openref *o = fs->refs[i];

			fs->refs[i] = o->next;
			free(o);
		}
	free(fs->refs);
	fs->refs = NULL;
	fs->nrefs_buckets = fs->nrefs = 0;
}

/*
 * The inode lost its last link inside t (of UNLINK_CREDITS).  Unless it is
 * open, it is freed in t when its data goes in one bounded step.  Otherwise
 * it moves to the orphan directory in t - a crash from here on leaves it
 * where recovery looks - and *ret_reap says to free it once t ends (not
 * while open: the last close does).
 */
static int drop_last_link(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, bool *ret_reap)
{
	struct o2_dinode *di = o2_buf_dinode(ib);
	char name[17];
	struct o2_buf *ob;
	int r;

	*ret_reap = false;
	if (!find_ref(fs, ib->blkno)) {
		/* data wholly in the inode's own list: freed here, in a bounded step */
		if (!(le16(di->i_dyn_features) & (O2_DYN_INDEXED_DIR | O2_DYN_HAS_REFCOUNT)) &&
		    (!(le16(di->i_dyn_features) & O2_DYN_HAS_XATTR) ||
		     o2_xattr_free_fits(fs, ib->blkno)) &&
		    ((le16(di->i_dyn_features) & O2_DYN_INLINE_DATA) ||
		     (S_ISLNK(le16(di->i_mode)) && !le32(di->i_clusters)) ||
		     !le16(di->id2.i_list.tree_depth))) {
			bool more;

			r = o2_free_step(t, fs, ib, 0, UINT64_MAX, &more);
			if (r < 0)
				return r;
			if (!more)
				return free_inode_bit(t, fs, ib);
		}
		*ret_reap = true;
	}
	orphan_name(ib->blkno, name);
	r = o2_inode_buf(fs, fs->sys.orphan_dir, &ob);
	if (r < 0)
		return r;
	r = dir_add(t, fs, ob, name, 16, ib->blkno, type_of(le16(di->i_mode)));
	o2_brelse(fs, ob);
	if (r == 0) {
		r = o2_trans_add(t, ib);
		di->i_flags = cpu_le32(le32(di->i_flags) | O2_FL_ORPHANED);
		di->i_orphaned_slot = cpu_le16((uint16_t)fs->opts.slot);
	}
	return r;
}

struct orphan_list {
	uint64_t *v;
	size_t n, cap;
};

static int collect_orphan(const struct o2_dirent *de, void *arg)
{
	struct orphan_list *l = arg;

	if (de->name[0] == '.')
		return 0;
	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 16;
		uint64_t *nv = o2_realloc(l->v, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		l->v = nv;
		l->cap = ncap;
	}
	l->v[l->n++] = de->ino;
	return 0;
}

int o2_orphans_process(struct o2_fs *fs)
{
	struct orphan_list l = { 0 };
	struct o2_inode *od;
	int r = o2_inode_get(fs, fs->sys.orphan_dir, &od);

	if (r < 0)
		return r;
	r = o2_dir_iterate(fs, od, collect_orphan, &l);
	o2_inode_unref(od);
	for (size_t i = 0; i < l.n && r >= 0; i++) {
		/* one fscore cannot free (xattrs in buckets, say)
		 * waits in the orphan directory: the volume still mounts */
		r = reap_or_wait(fs, l.v[i]);
	}
	free(l.v);
	return r < 0 ? r : 0;
}

/* ---- operations ---- */

static int check_name(const char *name, size_t len)
{
	if (len == 0)
		return -ENOENT;
	if (len > O2_MAX_NAME_LEN)
		return -ENAMETOOLONG;
	if (memchr(name, '/', len) || memchr(name, '\0', len))
		return -EINVAL;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return -EEXIST;
	return 0;
}

static int make_node(struct o2_fs *fs, uint64_t dir, const char *name, size_t len,
		     uint16_t mode, const struct o2_new_inode *ni, const char *target,
		     uint64_t *ret_ino)
{
	struct o2_trans *t;
	struct o2_buf *dib = NULL, *ib = NULL;
	struct found f;
	size_t tlen = target ? strlen(target) : 0;
	int r, e;

	if (!fs->journal)
		return -EROFS;
	r = check_name(name, len);
	if (r < 0)
		return r;
	if (target && (tlen == 0 || tlen >= 4096))
		return tlen ? -ENAMETOOLONG : -ENOENT;
	uint32_t spare;
	struct o2_acl_inherit acl = { 0 };

	r = o2_space_spare(fs, &spare);
	if (r == 0 && !target) /* symlinks take no ACL, as in the kernel */
		r = o2_acl_inherit_plan(fs, dir, &mode, ni->umask, &acl);
	if (r < 0)
		return r;
	bool acls = acl.access || acl.deflt;

	r = o2_trans_begin(fs, NAMEI_CREDITS + (acls ? 2 * O2_XATTR_SET_CREDITS : 0), &t);
	if (r < 0) {
		o2_acl_inherit_free(&acl);
		return r;
	}
	r = o2_inode_buf(fs, dir, &dib);
	if (r < 0)
		goto end;
	r = check_dir_changeable(fs, dib);
	if (r < 0)
		goto rel;
	if (S_ISDIR(mode) && links_of(o2_buf_dinode(dib)) >= 32000 &&
	    !o2_has_incompat(fs, O2_FEATURE_INCOMPAT_INDEXED_DIRS)) {
		r = -EMLINK;
		goto rel;
	}
	r = dir_find(fs, dib, name, len, &f);
	if (r == 0)
		r = -EEXIST;
	if (r != -ENOENT)
		goto rel;
	r = new_inode(t, fs, mode, ni->uid, ni->gid, ni->rdev, &ib);
	if (r < 0)
		goto rel;
	struct o2_dinode *di = o2_buf_dinode(ib);

	if (S_ISDIR(mode)) {
		r = init_dir(t, fs, ib, dir);
	} else if (target) {
		di->i_size = cpu_le64(tlen);
		if (tlen < o2_fast_symlink_max(fs->bs)) {
			memcpy(di->id2.i_symlink, target, tlen);
		} else {
			uint32_t start, got, need = (uint32_t)((tlen + fs->cs - 1) >> fs->cbits);
			struct o2_tree_owner o;

			di->id2.i_list.count = cpu_le16((uint16_t)o2_extent_recs_per_inode(fs->bs));
			r = o2_clusters_alloc(t, fs, need, need, &start, &got);
			if (r == 0) {
				uint64_t blk = (uint64_t)start << fs->bpc_bits;
				uint8_t *buf = o2_calloc(1, (size_t)got << fs->cbits);

				if (!buf) {
					r = -ENOMEM;
				} else {
					memcpy(buf, target, tlen);
					r = o2_blockdev_write(fs->dev, buf, (size_t)got << fs->cbits,
							      blk << fs->bits);
					if (r < 0)
						r = o2_fs_abort(fs, r, "writing a symlink");
					free(buf);
				}
				o2_inode_owner(ib, &o);
				if (r == 0)
					r = o2_tree_insert(t, fs, &o, &(struct o2_extent){ 0, got, blk, 0 });
				di->i_clusters = cpu_le32(got);
			}
		}
	}
	if (r == 0 && acls)
		r = o2_acl_inherit_apply(t, fs, ib, &acl);
	if (r == 0)
		r = dir_add(t, fs, dib, name, len, ib->blkno, type_of(mode));
	if (r == 0) {
		struct o2_dinode *pd = o2_buf_dinode(dib);

		r = o2_trans_add(t, dib);
		if (S_ISDIR(mode))
			set_links(pd, links_of(pd) + 1);
		o2_touch(fs, pd, true, true);
	}
	if (r == 0)
		*ret_ino = ib->blkno;
rel:
	o2_brelse(fs, ib);
	o2_brelse(fs, dib);
end:
	o2_acl_inherit_free(&acl);
	e = o2_trans_finish(t, r);
	return r < 0 ? r : e;
}

int o2_create(struct o2_fs *fs, uint64_t dir, const char *name, size_t len,
	      const struct o2_new_inode *ni, uint64_t *ret_ino)
{
	uint16_t type = ni->mode & S_IFMT;

	if (type == 0)
		type = S_IFREG;
	if (type == S_IFDIR || type == S_IFLNK)
		return -EINVAL;
	return make_node(fs, dir, name, len, (uint16_t)(type | (ni->mode & 07777)), ni, NULL, ret_ino);
}

int o2_mkdir(struct o2_fs *fs, uint64_t dir, const char *name, size_t len,
	     const struct o2_new_inode *ni, uint64_t *ret_ino)
{
	return make_node(fs, dir, name, len, (uint16_t)(S_IFDIR | (ni->mode & 07777)), ni, NULL,
			 ret_ino);
}

int o2_symlink(struct o2_fs *fs, uint64_t dir, const char *name, size_t len, const char *target,
	       const struct o2_new_inode *ni, uint64_t *ret_ino)
{
	return make_node(fs, dir, name, len, S_IFLNK | 0777, ni, target, ret_ino);
}

int o2_link(struct o2_fs *fs, uint64_t ino, uint64_t dir, const char *name, size_t len)
{
	struct o2_trans *t;
	struct o2_buf *dib = NULL, *ib = NULL;
	struct found f;
	int r, e;

	if (!fs->journal)
		return -EROFS;
	r = check_name(name, len);
	if (r < 0)
		return r;
	uint32_t spare;

	r = o2_space_spare(fs, &spare);
	if (r < 0)
		return r;
	r = o2_trans_begin(fs, NAMEI_CREDITS, &t);
	if (r < 0)
		return r;
	r = o2_inode_buf(fs, dir, &dib);
	if (r == 0)
		r = o2_inode_buf(fs, ino, &ib);
	if (r < 0)
		goto rel;
	struct o2_dinode *di = o2_buf_dinode(ib);

	if (S_ISDIR(le16(di->i_mode))) {
		r = -EPERM;
		goto rel;
	}
	/* an inode whose last name went (an open orphan) takes no new one, as
	 * Linux's vfs_link says: else its reaping would free a linked inode */
	if (links_of(di) == 0 || (le32(di->i_flags) & O2_FL_ORPHANED)) {
		r = -ENOENT;
		goto rel;
	}
	if (links_of(di) >= 32000) {
		r = -EMLINK;
		goto rel;
	}
	r = dir_find(fs, dib, name, len, &f);
	if (r == 0)
		r = -EEXIST;
	if (r != -ENOENT)
		goto rel;
	r = dir_add(t, fs, dib, name, len, ino, type_of(le16(di->i_mode)));
	if (r == 0)
		r = o2_trans_add(t, ib);
	if (r == 0) {
		set_links(di, links_of(di) + 1);
		o2_touch(fs, di, false, true);
		r = o2_trans_add(t, dib);
		o2_touch(fs, o2_buf_dinode(dib), true, true);
	}
rel:
	o2_brelse(fs, ib);
	o2_brelse(fs, dib);
	e = o2_trans_finish(t, r);
	return r < 0 ? r : e;
}

static int count_entry(const struct o2_dirent *de, void *arg)
{
	(*(unsigned *)arg)++;
	return 0;
}

/* 0 if directory ino holds only "." and "..", else -ENOTEMPTY (or an error). */
static int dir_must_be_empty(struct o2_fs *fs, uint64_t ino)
{
	struct o2_inode *d;
	unsigned n = 0;
	int r = o2_inode_get(fs, ino, &d);

	if (r < 0)
		return r;
	r = o2_dir_iterate(fs, d, count_entry, &n);
	o2_inode_unref(d);
	return r < 0 ? r : n > 2 ? -ENOTEMPTY : 0;
}

/*
 * Remove the name f (of inode child) from dir inside t.  A directory loses
 * its ".." link on its parent.  *ret_delete says whether the inode must be
 * freed once t ends.
 */
static int unlink_in(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib, const char *name,
		     size_t len, const struct found *f, bool *ret_delete)
{
	struct o2_buf *ib;
	int r = o2_inode_buf(fs, f->ino, &ib);

	*ret_delete = false;
	if (r < 0)
		return r;
	struct o2_dinode *di = o2_buf_dinode(ib);
	bool isdir = S_ISDIR(le16(di->i_mode));

	r = o2_check_writable(fs, di, isdir || links_of(di) <= 1);
	if (r == 0)
		r = dir_remove(t, fs, dib, name, len, f);
	if (r == 0)
		r = o2_trans_add(t, ib);
	if (r == 0)
		r = o2_trans_add(t, dib);
	if (r == 0) {
		struct o2_dinode *pd = o2_buf_dinode(dib);
		uint32_t links = links_of(di);

		if (isdir) {
			set_links(pd, links_of(pd) - 1);
			links = 0;
		} else if (links) {
			links--;
		}
		set_links(di, links);
		o2_touch(fs, di, false, true);
		o2_touch(fs, pd, true, true);
		if (!links)
			r = drop_last_link(t, fs, ib, ret_delete);
	}
	o2_brelse(fs, ib);
	return r;
}

static int remove_name(struct o2_fs *fs, uint64_t dir, const char *name, size_t len, bool want_dir)
{
	struct o2_trans *t;
	struct o2_buf *dib = NULL;
	struct found f;
	bool del = false;
	int r, e;

	if (!fs->journal)
		return -EROFS;
	if (len == 1 && name[0] == '.')
		return want_dir ? -EINVAL : -EISDIR;
	if (len == 2 && name[0] == '.' && name[1] == '.')
		return want_dir ? -ENOTEMPTY : -EISDIR;
	if (len > O2_MAX_NAME_LEN)
		return -ENAMETOOLONG;
	r = o2_trans_begin_freeing(fs, UNLINK_CREDITS, &t);
	if (r < 0)
		return r;
	r = o2_inode_buf(fs, dir, &dib);
	if (r == 0)
		r = dir_find(fs, dib, name, len, &f);
	if (r < 0)
		goto rel;
	if (want_dir != (f.type == O2_FT_DIR)) {
		r = want_dir ? -ENOTDIR : -EISDIR;
		goto rel;
	}
	if (want_dir) {
		r = dir_must_be_empty(fs, f.ino);
		if (r < 0)
			goto rel;
	}
	r = unlink_in(t, fs, dib, name, len, &f, &del);
rel:
	o2_brelse(fs, dib);
	e = o2_trans_finish(t, r);
	if (r == 0)
		r = e;
	if (r == 0 && del)
		r = reap_or_wait(fs, f.ino);
	return r;
}

int o2_unlink(struct o2_fs *fs, uint64_t dir, const char *name, size_t len)
{
	return remove_name(fs, dir, name, len, false);
}

int o2_rmdir(struct o2_fs *fs, uint64_t dir, const char *name, size_t len)
{
	return remove_name(fs, dir, name, len, true);
}

/* Whether dir is ino or lies below it (walking ".." up to the root). */
static int is_within(struct o2_fs *fs, uint64_t dir, uint64_t ino)
{
	for (unsigned depth = 0; depth < 100000; depth++) {
		struct o2_buf *b;
		struct found f;
		int r;

		if (dir == ino)
			return 1;
		if (dir == fs->info.root_blkno)
			return 0;
		r = o2_inode_buf(fs, dir, &b);
		if (r < 0)
			return r;
		r = dir_find(fs, b, "..", 2, &f);
		o2_brelse(fs, b);
		if (r < 0)
			return r;
		if (f.ino == dir)
			return 0;
		dir = f.ino;
	}
	return o2_corrupt(fs, dir, "directory tree loops");
}

/* Point a moved directory's ".." at its new parent. */
static int set_dotdot(struct o2_trans *t, struct o2_fs *fs, uint64_t dir, uint64_t parent)
{
	struct o2_buf *b;
	struct found f;
	int r = o2_inode_buf(fs, dir, &b);

	if (r < 0)
		return r;
	r = dir_find(fs, b, "..", 2, &f);
	if (r == 0)
		r = dir_retarget(t, fs, b, &f, parent, O2_FT_DIR);
	o2_brelse(fs, b);
	return r;
}

/* Change a link count by delta; directories' mtime too, the ctime always. */
static int adjust_links(struct o2_trans *t, struct o2_fs *fs, uint64_t ino, int delta)
{
	struct o2_buf *b;
	int r = o2_inode_buf(fs, ino, &b);

	if (r < 0)
		return r;
	r = o2_trans_add(t, b);
	if (r == 0) {
		struct o2_dinode *di = o2_buf_dinode(b);

		set_links(di, (uint32_t)((int64_t)links_of(di) + delta));
		o2_touch(fs, di, delta != 0, true);
	}
	o2_brelse(fs, b);
	return r;
}

int o2_rename(struct o2_fs *fs, uint64_t olddir, const char *oldname, size_t oldlen,
	      uint64_t newdir, const char *newname, size_t newlen, unsigned flags)
{
	struct o2_trans *t;
	struct o2_buf *odb = NULL, *ndb = NULL;
	struct found of, nf;
	bool have_new, del = false;
	int r, e;

	if (!fs->journal)
		return -EROFS;
	if ((flags & O2_RENAME_NOREPLACE) && (flags & O2_RENAME_EXCHANGE))
		return -EINVAL;
	r = check_name(oldname, oldlen);
	if (r == 0)
		r = check_name(newname, newlen);
	if (r == -EEXIST)
		r = -EBUSY; /* "." or ".." */
	if (r < 0)
		return r;
	r = o2_trans_begin_freeing(fs, 2 * NAMEI_CREDITS + FREE_IN_PLACE_CREDITS, &t);
	if (r < 0)
		return r;
	r = o2_inode_buf(fs, olddir, &odb);
	if (r == 0)
		r = o2_inode_buf(fs, newdir, &ndb);
	if (r == 0)
		r = dir_find(fs, odb, oldname, oldlen, &of);
	if (r < 0)
		goto rel;
	r = dir_find(fs, ndb, newname, newlen, &nf);
	if (r < 0 && r != -ENOENT)
		goto rel;
	have_new = r == 0;
	r = 0;
	if (have_new && (flags & O2_RENAME_NOREPLACE)) {
		r = -EEXIST;
		goto rel;
	}
	if (have_new && nf.ino == of.ino)
		goto rel; /* the same inode: nothing to do */
	if (!have_new && (flags & O2_RENAME_EXCHANGE)) {
		r = -ENOENT;
		goto rel;
	}
	bool odir = of.type == O2_FT_DIR, ndir = have_new && nf.type == O2_FT_DIR;

	/* a directory may not move below itself */
	if (odir && olddir != newdir) {
		r = is_within(fs, newdir, of.ino);
		if (r > 0)
			r = -EINVAL;
		if (r < 0)
			goto rel;
	}
	if ((flags & O2_RENAME_EXCHANGE) && ndir && olddir != newdir) {
		r = is_within(fs, olddir, nf.ino);
		if (r > 0)
			r = -EINVAL;
		if (r < 0)
			goto rel;
	}
	if (flags & O2_RENAME_EXCHANGE) {
		r = dir_retarget(t, fs, odb, &of, nf.ino, nf.type);
		if (r == 0)
			r = dir_retarget(t, fs, ndb, &nf, of.ino, of.type);
		if (r == 0 && olddir != newdir && odir != ndir) {
			r = adjust_links(t, fs, olddir, odir ? -1 : 1);
			if (r == 0)
				r = adjust_links(t, fs, newdir, odir ? 1 : -1);
		}
		if (r == 0 && odir && olddir != newdir)
			r = set_dotdot(t, fs, of.ino, newdir);
		if (r == 0 && ndir && olddir != newdir)
			r = set_dotdot(t, fs, nf.ino, olddir);
		/* both directories changed; both inodes' ctime */
		if (r == 0)
			r = o2_trans_add(t, odb);
		if (r == 0)
			r = o2_trans_add(t, ndb);
		if (r == 0) {
			o2_touch(fs, o2_buf_dinode(odb), true, true);
			o2_touch(fs, o2_buf_dinode(ndb), true, true);
			r = adjust_links(t, fs, of.ino, 0);
		}
		if (r == 0)
			r = adjust_links(t, fs, nf.ino, 0);
		goto rel;
	}
	if (have_new) {
		if (odir && !ndir) {
			r = -ENOTDIR;
			goto rel;
		}
		if (!odir && ndir) {
			r = -EISDIR;
			goto rel;
		}
		if (ndir) {
			r = dir_must_be_empty(fs, nf.ino);
			if (r < 0)
				goto rel;
		}
		/* the new name now names the moved inode; the old target loses a link */
		struct o2_buf *tb;

		r = o2_inode_buf(fs, nf.ino, &tb);
		if (r == 0) {
			r = o2_check_writable(fs, o2_buf_dinode(tb),
					      ndir || links_of(o2_buf_dinode(tb)) <= 1);
			o2_brelse(fs, tb);
		}
		if (r < 0)
			goto rel;
		r = dir_retarget(t, fs, ndb, &nf, of.ino, of.type);
		if (r == 0) {
			struct found gone = nf;
			struct o2_buf *gb;

			r = o2_inode_buf(fs, gone.ino, &gb);
			if (r == 0) {
				struct o2_dinode *gd = o2_buf_dinode(gb);
				uint32_t links = links_of(gd);

				r = o2_trans_add(t, gb);
				if (r == 0) {
					links = ndir ? 0 : (links ? links - 1 : 0);
					set_links(gd, links);
					o2_touch(fs, gd, false, true);
					if (ndir)
						set_links(o2_buf_dinode(ndb),
							  links_of(o2_buf_dinode(ndb)) - 1);
					if (!links)
						r = drop_last_link(t, fs, gb, &del);
				}
				o2_brelse(fs, gb);
			}
		}
	} else {
		r = dir_add(t, fs, ndb, newname, newlen, of.ino, of.type);
	}
	if (r < 0)
		goto rel;
	/* the old name goes (look it up again: adding may have moved it) */
	r = dir_find(fs, odb, oldname, oldlen, &of);
	if (r == 0)
		r = dir_remove(t, fs, odb, oldname, oldlen, &of);
	if (r == 0 && odir && olddir != newdir) {
		r = set_dotdot(t, fs, of.ino, newdir);
		if (r == 0)
			r = o2_trans_add(t, odb);
		if (r == 0)
			r = o2_trans_add(t, ndb);
		if (r == 0) {
			set_links(o2_buf_dinode(odb), links_of(o2_buf_dinode(odb)) - 1);
			set_links(o2_buf_dinode(ndb), links_of(o2_buf_dinode(ndb)) + 1);
		}
	}
	if (r == 0) {
		r = o2_trans_add(t, odb);
		if (r == 0)
			r = o2_trans_add(t, ndb);
		if (r == 0) {
			o2_touch(fs, o2_buf_dinode(odb), true, true);
			o2_touch(fs, o2_buf_dinode(ndb), true, true);
			/* the moved inode's ctime */
			r = adjust_links(t, fs, of.ino, 0);
		}
	}
rel:
	o2_brelse(fs, odb);
	o2_brelse(fs, ndb);
	e = o2_trans_finish(t, r);
	if (r == 0)
		r = e;
	if (r == 0 && del)
		r = reap_or_wait(fs, nf.ino);
	return r;
}

/* ---- reflinks ---- */

/*
 * What one reflink step shares: one of the source's extents, or of a
 * shared one the clusters of one refcount record or gap (one leaf of the
 * tree); it logs the source's record, an insert in the copy's tree and
 * that leaf's change.  The smallest journals take 256 blocks at once.
 */
#define REFLINK_STEP_CREDITS (2 * O2_TREE_CREDITS + O2_REFCOUNT_CREDITS + 8)

/* One step: the next of src's clusters from *cpos shared with dst (*ret_done: none left). */
static int reflink_step(struct o2_fs *fs, uint64_t src, uint64_t dst, uint32_t *cpos, bool *ret_done)
{
	struct o2_trans *t;
	struct o2_buf *sb = NULL, *db = NULL;
	struct o2_tree_owner so, dso;
	struct o2_extent ext;
	int r, e;

	*ret_done = false;
	r = o2_trans_begin(fs, REFLINK_STEP_CREDITS, &t);
	if (r < 0)
		return r;
	r = o2_inode_buf(fs, src, &sb);
	if (r == 0)
		r = o2_inode_buf(fs, dst, &db);
	if (r < 0)
		goto end;
	struct o2_dinode *sd = o2_buf_dinode(sb), *dd = o2_buf_dinode(db);
	uint64_t root = le64(sd->i_refcount_loc);

	o2_inode_owner(sb, &so);
	o2_inode_owner(db, &dso);
	for (;;) {
		r = o2_tree_map(fs, &(struct o2_tree_root){ src, so.el, le16(so.el->count) }, *cpos,
				&ext);
		if (r < 0 || ext.blkno)
			break;
		if ((uint64_t)*cpos + ext.clusters >= UINT32_MAX) {
			*ret_done = true;
			goto end;
		}
		*cpos += ext.clusters; /* a hole */
	}
	if (r < 0)
		goto end;
	bool fresh = !(ext.flags & O2_EXT_REFCOUNTED);
	uint32_t p = (uint32_t)(ext.blkno >> fs->bpc_bits), count, run;

	/* no more than one record or gap of the refcount tree: one leaf */
	r = o2_refcount_lookup(fs, root, p, &count, &run, NULL);
	if (r == 0 && (count == 0) != fresh)
		r = o2_corrupt(fs, src, "cluster %u is %s", p, fresh ? "counted in the refcount "
			       "tree but not marked shared" : "marked shared but not counted");
	if (r < 0)
		goto end;
	uint32_t n = ext.clusters < run ? ext.clusters : run;

	if (fresh)
		r = o2_tree_set_flag(t, fs, &so, *cpos, n, O2_EXT_REFCOUNTED);
	if (r == 0)
		r = o2_refcount_share(t, fs, root, p, n, fresh);
	if (r == 0)
		r = o2_tree_insert(t, fs, &dso, &(struct o2_extent){
			*cpos, n, ext.blkno, (uint8_t)(ext.flags | O2_EXT_REFCOUNTED) });
	if (r == 0)
		r = o2_trans_add(t, db);
	if (r == 0)
		dd->i_clusters = cpu_le32(le32(dd->i_clusters) + n);
	*cpos += n;
end:
	o2_brelse(fs, sb);
	o2_brelse(fs, db);
	e = o2_trans_finish(t, r);
	return r < 0 ? r : e;
}

/*
 * The reflink, done: dst leaves the orphan directory for its name in dir,
 * with src's size (a name taken meanwhile: -EEXIST, nothing changed).
 */
static int reflink_finish(struct o2_fs *fs, uint64_t src, uint64_t dst, uint64_t dir,
			  const char *name, size_t len)
{
	struct o2_trans *t;
	struct o2_buf *sb = NULL, *db = NULL, *dib = NULL, *ob = NULL;
	struct found f;
	char oname[17];
	int r, e;

	r = o2_trans_begin(fs, NAMEI_CREDITS, &t);
	if (r < 0)
		return r;
	r = o2_inode_buf(fs, src, &sb);
	if (r == 0)
		r = o2_inode_buf(fs, dst, &db);
	if (r == 0)
		r = o2_inode_buf(fs, dir, &dib);
	if (r == 0)
		r = o2_inode_buf(fs, fs->sys.orphan_dir, &ob);
	if (r == 0)
		r = check_dir_changeable(fs, dib);
	if (r == 0) {
		r = dir_find(fs, dib, name, len, &f);
		r = r == 0 ? -EEXIST : r == -ENOENT ? 0 : r;
	}
	orphan_name(dst, oname);
	if (r == 0)
		r = dir_find(fs, ob, oname, 16, &f);
	if (r == 0)
		r = dir_remove(t, fs, ob, oname, 16, &f);
	if (r == 0)
		r = dir_add(t, fs, dib, name, len, dst, type_of(S_IFREG));
	if (r == 0)
		r = o2_trans_add(t, db);
	if (r == 0)
		r = o2_trans_add(t, dib);
	if (r == 0) {
		struct o2_dinode *dd = o2_buf_dinode(db);

		dd->i_size = o2_buf_dinode(sb)->i_size;
		dd->i_flags = cpu_le32(le32(dd->i_flags) & ~(uint32_t)O2_FL_ORPHANED);
		dd->i_orphaned_slot = cpu_le16(0);
		set_links(dd, 1);
		o2_touch(fs, dd, true, true);
		o2_touch(fs, o2_buf_dinode(dib), true, true);
	}
	o2_brelse(fs, sb);
	o2_brelse(fs, db);
	o2_brelse(fs, dib);
	o2_brelse(fs, ob);
	e = o2_trans_finish(t, r);
	return r < 0 ? r : e;
}

int o2_reflink(struct o2_fs *fs, uint64_t src, uint64_t dir, const char *name, size_t len,
	       const struct o2_new_inode *ni, uint64_t *ret_ino)
{
	struct o2_trans *t;
	struct o2_buf *sb = NULL, *dib = NULL, *ib = NULL, *ob = NULL;
	struct found f;
	uint64_t dst = 0;
	uint32_t spare;
	bool inline_data = false;
	char oname[17];
	int r, e;

	if (!fs->journal)
		return -EROFS;
	r = check_name(name, len);
	if (r < 0)
		return r;
	if (!o2_has_incompat(fs, O2_FEATURE_INCOMPAT_REFCOUNT_TREE))
		return o2_fail(fs, -EOPNOTSUPP, "the volume lacks the refcount feature "
			       "(tunefs.ocfs2 --fs-features=refcount adds it)");
	r = o2_space_spare(fs, &spare);
	if (r < 0)
		return r;
	/* the new inode: in the orphan directory until every extent is shared */
	r = o2_trans_begin(fs, NAMEI_CREDITS + O2_REFCOUNT_DETACH_CREDITS + 4, &t);
	if (r < 0)
		return r;
	r = o2_inode_buf(fs, src, &sb);
	if (r < 0)
		goto rel;
	struct o2_dinode *sd = o2_buf_dinode(sb);
	uint16_t smode = le16(sd->i_mode);

	if (!S_ISREG(smode)) {
		r = S_ISDIR(smode) ? -EISDIR : -EINVAL;
		goto rel;
	}
	r = o2_check_writable(fs, sd, false);
	if (r == 0)
		r = o2_inode_buf(fs, dir, &dib);
	if (r == 0)
		r = check_dir_changeable(fs, dib);
	if (r == 0) {
		r = dir_find(fs, dib, name, len, &f);
		r = r == 0 ? -EEXIST : r == -ENOENT ? 0 : r;
	}
	if (r == 0)
		r = o2_inode_buf(fs, fs->sys.orphan_dir, &ob);
	if (r < 0)
		goto rel;
	r = new_inode(t, fs, (uint16_t)(S_IFREG | (ni->mode & 07777)), ni->uid, ni->gid, 0, &ib);
	if (r < 0)
		goto rel;
	struct o2_dinode *di = o2_buf_dinode(ib);

	dst = ib->blkno;
	inline_data = le16(sd->i_dyn_features) & O2_DYN_INLINE_DATA;
	if (inline_data) {
		/* nothing to share: the data is copied, the name given at once */
		memcpy(di->id2.i_data.id_data, sd->id2.i_data.id_data, (size_t)le64(sd->i_size));
		di->i_size = sd->i_size;
		r = dir_add(t, fs, dib, name, len, dst, type_of(S_IFREG));
		if (r == 0)
			r = o2_trans_add(t, dib);
		if (r == 0)
			o2_touch(fs, o2_buf_dinode(dib), true, true);
		goto rel;
	}
	o2_inode_to_extent_list(fs, di);
	set_links(di, 0);
	di->i_flags = cpu_le32(le32(di->i_flags) | O2_FL_ORPHANED);
	di->i_orphaned_slot = cpu_le16((uint16_t)fs->opts.slot);
	orphan_name(dst, oname);
	r = dir_add(t, fs, ob, oname, 16, dst, type_of(S_IFREG));
	if (r == 0 && !(le16(sd->i_dyn_features) & O2_DYN_HAS_REFCOUNT))
		r = o2_refcount_attach(t, fs, sb, 0);
	if (r == 0)
		r = o2_refcount_attach(t, fs, ib, le64(sd->i_refcount_loc));
rel:
	o2_brelse(fs, sb);
	o2_brelse(fs, dib);
	o2_brelse(fs, ob);
	o2_brelse(fs, ib);
	e = o2_trans_finish(t, r);
	if (r == 0)
		r = e;
	if (r < 0 || inline_data) {
		if (r == 0)
			*ret_ino = dst;
		return r;
	}
	/* the extents, a few per transaction; a failure leaves an orphan to free */
	for (uint32_t cpos = 0; r == 0;) {
		bool done;

		r = reflink_step(fs, src, dst, &cpos, &done);
		if (r == 0 && done)
			break;
	}
	if (r == 0)
		r = reflink_finish(fs, src, dst, dir, name, len);
	if (r < 0) {
		if (!fs->ro_reason)
			(void)reap_orphan(fs, dst);
		return r;
	}
	*ret_ino = dst;
	return 0;
}

int o2_statfs(struct o2_fs *fs, struct o2_statfs *ret)
{
	struct o2_inode *bm, *ia;
	uint64_t blkno;
	int r = o2_sysfile_lookup(fs, O2_SYS_GLOBAL_BITMAP, 0, &blkno);

	if (r < 0)
		return r;
	r = o2_inode_get(fs, blkno, &bm);
	if (r < 0)
		return r;
	r = o2_sysfile_lookup(fs, O2_SYS_INODE_ALLOC, fs->opts.slot, &blkno);
	if (r == 0)
		r = o2_inode_get(fs, blkno, &ia);
	if (r < 0) {
		o2_inode_unref(bm);
		return r;
	}
	uint64_t free_cl = bm->info.bitmap_total - bm->info.bitmap_used;
	struct o2_inode *la;

	/* the local alloc window's unused clusters are free too */
	if (fs->sys.local_alloc && o2_inode_get(fs, fs->sys.local_alloc, &la) == 0) {
		if (la->info.bitmap_used <= la->info.bitmap_total)
			free_cl += la->info.bitmap_total - la->info.bitmap_used;
		o2_inode_unref(la);
	}
	uint64_t inode_free = ia->info.bitmap_total - ia->info.bitmap_used;

	*ret = (struct o2_statfs){
		.block_size = fs->bs,
		.cluster_size = fs->cs,
		.total_clusters = bm->info.bitmap_total,
		.free_clusters = free_cl,
		/* each free cluster could become inodes */
		.total_inodes = ia->info.bitmap_total + (free_cl << fs->bpc_bits),
		.free_inodes = inode_free + (free_cl << fs->bpc_bits),
		.max_name_len = O2_MAX_NAME_LEN,
	};
	o2_inode_unref(ia);
	o2_inode_unref(bm);
	return 0;
}
