/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Inodes: reading and validating dinodes, their id2 contents, and file data. */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache.h"
#include "error.h"
#include "internal.h"
#include "meta.h"

static int validate_dinode(struct o2_fs *fs, uint64_t blkno, struct o2_inode *ino)
{
	const struct o2_dinode *di = o2_di(ino);
	struct o2_inode_info *in = &ino->info;
	unsigned bs = fs->bs;
	bool super = blkno == O2_SUPER_BLKNO;
	int r;

	if (!o2_sig_ok(di->i_signature, super ? O2_SIG_SUPER : O2_SIG_INODE))
		return o2_corrupt(fs, blkno, "bad inode signature");
	if (le64(di->i_blkno) != blkno)
		return o2_corrupt(fs, blkno, "inode records its block number as %llu",
				  (unsigned long long)le64(di->i_blkno));
	if (le32(di->i_fs_generation) != fs->info.fs_generation)
		return o2_corrupt(fs, blkno, "inode fs generation 0x%x is not the volume's 0x%x",
				  le32(di->i_fs_generation), fs->info.fs_generation);
	if (!(le32(di->i_flags) & O2_FL_VALID))
		return o2_corrupt(fs, blkno, "inode is not in use (Valid flag clear)");

	in->blkno = blkno;
	in->generation = le32(di->i_generation);
	in->fs_generation = le32(di->i_fs_generation);
	in->suballoc_slot = le16(di->i_suballoc_slot);
	in->suballoc_bit = le16(di->i_suballoc_bit);
	in->suballoc_loc = le64(di->i_suballoc_loc);
	in->clusters = le32(di->i_clusters);
	in->uid = le32(di->i_uid);
	in->gid = le32(di->i_gid);
	in->size = le64(di->i_size);
	in->mode = le16(di->i_mode);
	in->links = (uint32_t)le16(di->i_links_count) | ((uint32_t)le16(di->i_links_count_hi) << 16);
	in->flags = le32(di->i_flags);
	in->attr = le32(di->i_attr);
	in->dyn_features = le16(di->i_dyn_features);
	in->orphaned_slot = le16(di->i_orphaned_slot);
	in->dio_orphaned_slot = le16(di->i_dio_orphaned_slot);
	in->xattr_inline_size = le16(di->i_xattr_inline_size);
	in->atime = (struct o2_timespec){ (int64_t)le64(di->i_atime), le32(di->i_atime_nsec) };
	in->ctime = (struct o2_timespec){ (int64_t)le64(di->i_ctime), le32(di->i_ctime_nsec) };
	in->mtime = (struct o2_timespec){ (int64_t)le64(di->i_mtime), le32(di->i_mtime_nsec) };
	in->dtime = le64(di->i_dtime);
	in->last_eb_blk = le64(di->i_last_eb_blk);
	in->xattr_loc = le64(di->i_xattr_loc);
	in->dx_root = le64(di->i_dx_root);
	in->refcount_loc = le64(di->i_refcount_loc);
	in->check_crc32 = le32(di->i_check.crc32e);
	in->check_ecc = le16(di->i_check.ecc);
	in->rdev = le64(di->id1.i_rdev);
	if (in->flags & (O2_FL_BITMAP | O2_FL_CHAIN | O2_FL_LOCAL_ALLOC)) {
		in->bitmap_used = le32(di->id1.bitmap1.i_used);
		in->bitmap_total = le32(di->id1.bitmap1.i_total);
	}
	if (in->flags & O2_FL_JOURNAL) {
		in->journal_flags = le32(di->id1.journal1.ij_flags);
		in->journal_recovery_generation = le32(di->id1.journal1.ij_recovery_generation);
	}

	/* Space the inline xattr area takes from the end of the block. */
	unsigned xattr_room = 0;

	if (in->dyn_features & O2_DYN_INLINE_XATTR) {
		xattr_room = in->xattr_inline_size;
		if (xattr_room > bs - offsetof(struct o2_dinode, id2))
			return o2_corrupt(fs, blkno, "inline xattr size %u does not fit the block",
					  xattr_room);
	}

	switch (in->mode & S_IFMT) {
	case S_IFREG:
	case S_IFDIR:
	case S_IFLNK:
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK:
		break;
	default:
		if (!super && !(in->flags & O2_FL_SYSTEM))
			return o2_corrupt(fs, blkno, "inode mode 0%o has no known file type",
					  in->mode);
	}

	if (in->flags & O2_FL_SUPER) {
		in->kind = O2_ID2_SUPER;
	} else if (in->flags & O2_FL_CHAIN) {
		const struct o2_chain_list *cl = &di->id2.i_chain;

		in->kind = O2_ID2_CHAIN;
		in->chain_cpg = le16(cl->cl_cpg);
		in->chain_bpc = le16(cl->cl_bpc);
		in->chain_count = le16(cl->cl_count);
		in->chain_next_free = le16(cl->cl_next_free_rec);
		if (in->chain_count > o2_chain_recs_per_inode(bs) || in->chain_next_free > in->chain_count)
			return o2_corrupt(fs, blkno, "chain list uses %u of %u records (room for %u)",
					  in->chain_next_free, in->chain_count,
					  o2_chain_recs_per_inode(bs));
		if (in->chain_cpg == 0 || in->chain_bpc == 0)
			return o2_corrupt(fs, blkno, "chain list has %u clusters per group and %u bits per cluster",
					  in->chain_cpg, in->chain_bpc);
		if (in->bitmap_used > in->bitmap_total)
			return o2_corrupt(fs, blkno, "allocator uses %u of %u bits", in->bitmap_used,
					  in->bitmap_total);
	} else if (in->flags & O2_FL_LOCAL_ALLOC) {
		in->kind = O2_ID2_LOCAL_ALLOC;
		in->la_bm_off = le32(di->id2.i_lab.la_bm_off);
		in->la_size = le16(di->id2.i_lab.la_size);
		if (in->la_size > o2_local_alloc_max(bs))
			return o2_corrupt(fs, blkno, "local alloc bitmap of %u bytes exceeds %u",
					  in->la_size, o2_local_alloc_max(bs));
	} else if (in->flags & O2_FL_DEALLOC) {
		in->kind = O2_ID2_TRUNCATE_LOG;
		in->tl_count = le16(di->id2.i_dealloc.tl_count);
		in->tl_used = le16(di->id2.i_dealloc.tl_used);
		if (in->tl_count > o2_truncate_recs_per_inode(bs) || in->tl_used > in->tl_count)
			return o2_corrupt(fs, blkno, "truncate log uses %u of %u records (room for %u)",
					  in->tl_used, in->tl_count, o2_truncate_recs_per_inode(bs));
	} else if (in->dyn_features & O2_DYN_INLINE_DATA) {
		in->kind = O2_ID2_INLINE;
		in->inline_count = le16(di->id2.i_data.id_count);
		if (in->inline_count > o2_inline_max(bs) - xattr_room)
			return o2_corrupt(fs, blkno, "inline data area of %u bytes exceeds %u",
					  in->inline_count, o2_inline_max(bs) - xattr_room);
		if (in->size > in->inline_count)
			return o2_corrupt(fs, blkno, "inline file of %llu bytes in an area of %u",
					  (unsigned long long)in->size, in->inline_count);
	} else if (S_ISLNK(in->mode) && in->clusters == 0) {
		in->kind = O2_ID2_FAST_SYMLINK;
		if (in->size >= o2_fast_symlink_max(bs))
			return o2_corrupt(fs, blkno, "fast symlink of %llu bytes exceeds %u",
					  (unsigned long long)in->size, o2_fast_symlink_max(bs) - 1);
	} else {
		const struct o2_extent_list *el = &di->id2.i_list;
		unsigned max = (bs - offsetof(struct o2_dinode, id2.i_list.recs) - xattr_room) /
			       sizeof(struct o2_extent_rec);

		in->kind = O2_ID2_EXTENTS;
		in->list_depth = le16(el->tree_depth);
		in->list_count = le16(el->count);
		in->list_next_free = le16(el->next_free_rec);
		r = o2_check_extent_list(fs, blkno, el, max, "inode");
		if (r < 0)
			return r;
		if (in->list_count == 0 && !S_ISCHR(in->mode) && !S_ISBLK(in->mode) &&
		    !S_ISFIFO(in->mode) && !S_ISSOCK(in->mode))
			return o2_corrupt(fs, blkno, "inode extent list has no room for records");
	}
	return 0;
}

int o2_inode_get(struct o2_fs *fs, uint64_t blkno, struct o2_inode **ret_inode)
{
	struct o2_inode *ino;
	int r;

	if (blkno < O2_SUPER_BLKNO || blkno >= fs->nblocks)
		return o2_fail(fs, -ERANGE, "inode %llu lies outside the volume (%llu blocks)",
			       (unsigned long long)blkno, (unsigned long long)fs->nblocks);
	ino = o2_calloc(1, sizeof(*ino));
	if (!ino)
		return -ENOMEM;
	ino->buf = o2_malloc(fs->bs);
	if (!ino->buf) {
		free(ino);
		return -ENOMEM;
	}
	ino->fs = fs;
	r = o2_read_meta(fs, blkno, O2_META_INODE, ino->buf);
	if (r >= 0)
		r = validate_dinode(fs, blkno, ino);
	if (r < 0) {
		o2_inode_unref(ino);
		return r;
	}
	*ret_inode = ino;
	return 0;
}

void o2_inode_unref(struct o2_inode *inode)
{
	if (!inode)
		return;
	free(inode->buf);
	free(inode);
}

const struct o2_inode_info *o2_inode_info(const struct o2_inode *inode)
{
	return &inode->info;
}

static void decode_rec(const struct o2_extent_list *el, const struct o2_extent_rec *rec,
		       struct o2_extent *ret)
{
	ret->cpos = le32(rec->cpos);
	ret->blkno = le64(rec->blkno);
	if (le16(el->tree_depth) == 0) {
		ret->clusters = le16(rec->leaf_clusters);
		ret->flags = rec->flags;
	} else {
		ret->clusters = le32(rec->int_clusters);
		ret->flags = 0;
	}
}

int o2_inode_extent_rec(const struct o2_inode *inode, unsigned i, struct o2_extent *ret)
{
	const struct o2_extent_list *el = &o2_di(inode)->id2.i_list;

	if (inode->info.kind != O2_ID2_EXTENTS)
		return -EINVAL;
	if (i >= inode->info.list_next_free)
		return -ERANGE;
	decode_rec(el, &el->recs[i], ret);
	return 0;
}

int o2_inode_chain_rec(const struct o2_inode *inode, unsigned i, struct o2_chain_rec_info *ret)
{
	const struct o2_chain_rec *cr;

	if (inode->info.kind != O2_ID2_CHAIN)
		return -EINVAL;
	if (i >= inode->info.chain_next_free)
		return -ERANGE;
	cr = &o2_di(inode)->id2.i_chain.cl_recs[i];
	ret->free = le32(cr->c_free);
	ret->total = le32(cr->c_total);
	ret->blkno = le64(cr->c_blkno);
	return 0;
}

int o2_inode_truncate_rec(const struct o2_inode *inode, unsigned i, struct o2_trunc_rec *ret)
{
	const struct o2_truncate_rec *tr;

	if (inode->info.kind != O2_ID2_TRUNCATE_LOG)
		return -EINVAL;
	if (i >= inode->info.tl_used)
		return -ERANGE;
	tr = &o2_di(inode)->id2.i_dealloc.tl_recs[i];
	ret->start = le32(tr->t_start);
	ret->clusters = le32(tr->t_clusters);
	return 0;
}

unsigned o2_inode_local_alloc_used(const struct o2_inode *inode)
{
	const uint8_t *bm = o2_di(inode)->id2.i_lab.la_bitmap;
	unsigned n = 0;

	if (inode->info.kind != O2_ID2_LOCAL_ALLOC)
		return 0;
	for (unsigned i = 0; i < inode->info.la_size; i++)
		n += (unsigned)__builtin_popcount(bm[i]);
	return n;
}

/*
 * The contents of a local alloc or truncate log inode, beyond what parsing
 * checks: the window and every record must lie inside the volume, and the
 * window's counts must agree with its bitmap.
 */
int o2_inode_check_alloc_contents(struct o2_fs *fs, const struct o2_inode *ino)
{
	const struct o2_inode_info *in = &ino->info;
	uint32_t total = fs->info.total_clusters;

	if (in->kind == O2_ID2_LOCAL_ALLOC) {
		unsigned set = o2_inode_local_alloc_used(ino);

		if (in->bitmap_total > (uint32_t)in->la_size * 8 || in->bitmap_used > in->bitmap_total ||
		    set != in->bitmap_used)
			return o2_corrupt(fs, in->blkno, "local alloc claims %u used of %u bits in a "
					  "bitmap of %u bits with %u set", in->bitmap_used,
					  in->bitmap_total, in->la_size * 8, set);
		if ((uint64_t)in->la_bm_off + in->bitmap_total > total)
			return o2_corrupt(fs, in->blkno, "local alloc window %u+%u exceeds the %u "
					  "clusters of the volume", in->la_bm_off, in->bitmap_total,
					  total);
	} else if (in->kind == O2_ID2_TRUNCATE_LOG) {
		for (unsigned i = 0; i < in->tl_used; i++) {
			struct o2_trunc_rec tr;

			o2_inode_truncate_rec(ino, i, &tr);
			if ((uint64_t)tr.start + tr.clusters > total)
				return o2_corrupt(fs, in->blkno, "truncate log record %u (%u+%u) "
						  "exceeds the volume", i, tr.start, tr.clusters);
		}
	}
	return 0;
}

static void inode_tree_root(struct o2_inode *inode, struct o2_tree_root *root)
{
	root->owner_blkno = inode->info.blkno;
	root->el = &o2_di(inode)->id2.i_list;
	root->max_recs = inode->info.list_count;
}

int o2_inode_map(struct o2_fs *fs, struct o2_inode *inode, uint32_t cpos, struct o2_extent *ret)
{
	struct o2_tree_root root;

	if (inode->info.kind != O2_ID2_EXTENTS)
		return -EINVAL;
	inode_tree_root(inode, &root);
	return o2_tree_map(fs, &root, cpos, ret);
}

int o2_inode_walk_extents(struct o2_fs *fs, struct o2_inode *inode, o2_extent_fn fn, void *arg)
{
	struct o2_tree_root root;

	if (inode->info.kind != O2_ID2_EXTENTS)
		return -EINVAL;
	inode_tree_root(inode, &root);
	return o2_tree_walk(fs, &root, fn, arg);
}

/* Largest single device read while copying file data. */
#define READ_CHUNK (1u << 20)

/*
 * Copy n bytes of file data starting at device byte offset dev_off into out:
 * the whole blocks in the middle go straight from the device into out, the
 * partial blocks at either end through one block of scratch (*tmp, made on
 * first use).
 */
static int read_span(struct o2_fs *fs, uint64_t dev_off, uint8_t *out, size_t n, uint8_t **tmp)
{
	while (n) {
		uint64_t blk = dev_off >> fs->bits;
		uint32_t in_blk = (uint32_t)(dev_off & (fs->bs - 1));
		size_t k;
		int r;

		if (in_blk || n < fs->bs) {
			/* a partial block */
			k = fs->bs - in_blk;
			if (k > n)
				k = n;
			if (!*tmp && !(*tmp = o2_malloc(fs->bs)))
				return -ENOMEM;
			r = o2_read_data_blocks(fs, blk, 1, *tmp);
			if (r < 0)
				return r;
			memcpy(out, *tmp + in_blk, k);
		} else {
			k = n & ~(size_t)(fs->bs - 1);
			if (k > READ_CHUNK)
				k = READ_CHUNK;
			r = o2_read_data_blocks(fs, blk, (unsigned)(k >> fs->bits), out);
			if (r < 0)
				return r;
		}
		out += k;
		dev_off += k;
		n -= k;
	}
	return 0;
}

static ssize_t read_inode(struct o2_fs *fs, struct o2_inode *inode, uint64_t off, void *buf,
			  size_t len);

static uint32_t in_flags(const struct o2_inode *inode)
{
	return le32(o2_di(inode)->i_flags);
}

ssize_t o2_inode_read(struct o2_fs *fs, struct o2_inode *inode, uint64_t off, void *buf,
		      size_t len)
{
	ssize_t r;

	/* a system file's data (the slot map) is read without its lock: no
	   owner named, so no cache answers for it */
	fs->io_owner = (in_flags(inode) & O2_FL_SYSTEM) ? 0 : inode->info.blkno;
	r = read_inode(fs, inode, off, buf, len);
	fs->io_owner = 0;
	return r;
}

static ssize_t read_inode(struct o2_fs *fs, struct o2_inode *inode, uint64_t off, void *buf,
			  size_t len)
{
	const struct o2_inode_info *in = &inode->info;
	uint8_t *out = buf, *tmp = NULL;
	size_t done = 0;
	int r = 0;

	if (off >= in->size)
		return 0;
	if (len > in->size - off)
		len = (size_t)(in->size - off);
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;

	switch (in->kind) {
	case O2_ID2_INLINE:
		memcpy(out, o2_di(inode)->id2.i_data.id_data + off, len);
		return (ssize_t)len;
	case O2_ID2_FAST_SYMLINK:
		memcpy(out, o2_di(inode)->id2.i_symlink + off, len);
		return (ssize_t)len;
	case O2_ID2_EXTENTS:
		break;
	default:
		return o2_fail(fs, -EINVAL, "inode %llu holds no file data",
			       (unsigned long long)in->blkno);
	}

	while (done < len) {
		uint64_t pos = off + done;
		uint32_t cpos = (uint32_t)(pos >> fs->cbits);
		struct o2_extent ext;

		if ((pos >> fs->cbits) > UINT32_MAX) {
			r = o2_corrupt(fs, in->blkno, "file offset %llu beyond the cluster range",
				       (unsigned long long)pos);
			break;
		}
		r = o2_tree_map(fs, &(struct o2_tree_root){ in->blkno, &o2_di(inode)->id2.i_list,
							  in->list_count },
				cpos, &ext);
		if (r < 0)
			break;
		/* bytes from pos to the end of this extent (or hole) */
		uint64_t ext_start = (uint64_t)ext.cpos << fs->cbits;
		uint64_t span = (((uint64_t)ext.cpos + ext.clusters) << fs->cbits) - pos;
		size_t n = len - done;

		if (span < n)
			n = (size_t)span;
		if (ext.blkno == 0 || (ext.flags & O2_EXTENT_UNWRITTEN)) {
			memset(out + done, 0, n);
		} else {
			r = read_span(fs, (ext.blkno << fs->bits) + (pos - ext_start), out + done, n, &tmp);
			if (r < 0)
				break;
		}
		done += n;
	}
	free(tmp);
	if (r < 0)
		return r;
	return (ssize_t)done;
}

int o2_inode_readlink(struct o2_fs *fs, struct o2_inode *inode, char *buf, size_t len)
{
	const struct o2_inode_info *in = &inode->info;
	ssize_t n;

	if (!S_ISLNK(in->mode))
		return -EINVAL;
	if (in->size >= len)
		return -ENAMETOOLONG;
	n = o2_inode_read(fs, inode, 0, buf, (size_t)in->size);
	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	return 0;
}

/* ---- the value block of an inode's cluster lock ---- */

#define LVB_MAGIC 0x4f324c31u /* "O2L1": this layout */

struct inode_lvb {
	o2le32 magic;
	o2le32 generation;
	o2le64 hash; /* the block as home, times and check left out */
	o2le64 atime, ctime, mtime;
	o2le32 atime_nsec, ctime_nsec, mtime_nsec;
} __attribute__((packed));

_Static_assert(sizeof(struct inode_lvb) == O2_INODE_LVB_LEN, "the value block's layout");

static uint64_t hash_words(uint64_t h, const uint8_t *p, size_t len)
{
	for (size_t off = 0; off + 8 <= len; off += 8) {
		uint64_t w;

		memcpy(&w, p + off, 8);
		h ^= w;
		h *= 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
	}
	return h;
}

/* An inode block's hash, its times and block check counted as zeros. */
static uint64_t hash_but_times(const struct o2_fs *fs, const uint8_t *block)
{
	/* the times and the check lie before i_dx_root */
	uint8_t head[offsetof(struct o2_dinode, i_dx_root)];

	memcpy(head, block, sizeof(head));
	/* i_atime, i_ctime, i_mtime; their nanoseconds; i_check */
	memset(head + offsetof(struct o2_dinode, i_atime), 0, 3 * sizeof(o2le64));
	memset(head + offsetof(struct o2_dinode, i_atime_nsec), 0, 3 * sizeof(o2le32));
	memset(head + offsetof(struct o2_dinode, i_check), 0, sizeof(struct o2_block_check));
	return hash_words(hash_words(0x9e3779b97f4a7c15ull, head, sizeof(head)),
			  block + sizeof(head), fs->bs - sizeof(head));
}

static bool inode_block(const struct o2_fs *fs, const struct o2_buf *b, uint64_t ino)
{
	const struct o2_dinode *d = (const struct o2_dinode *)b->data;

	return memcmp(d->i_signature, O2_SIG_INODE, sizeof(O2_SIG_INODE)) == 0 &&
	       le64(d->i_blkno) == ino;
}

bool o2_inode_lvb(struct o2_fs *fs, uint64_t ino, uint8_t *lvb)
{
	struct o2_buf *b = o2_cache_peek(fs, ino);
	struct inode_lvb v;

	if (!b || !inode_block(fs, b, ino) || !o2_cache_trusted(fs, b))
		return false;
	const struct o2_dinode *d = (const struct o2_dinode *)b->data;

	v = (struct inode_lvb){
		.magic = cpu_le32(LVB_MAGIC), .generation = d->i_generation,
		.hash = cpu_le64(hash_but_times(fs, b->data)),
		.atime = d->i_atime, .ctime = d->i_ctime, .mtime = d->i_mtime,
		.atime_nsec = d->i_atime_nsec, .ctime_nsec = d->i_ctime_nsec,
		.mtime_nsec = d->i_mtime_nsec,
	};
	memcpy(lvb, &v, sizeof(v));
	return true;
}

bool o2_inode_refresh(struct o2_fs *fs, uint64_t ino, const uint8_t *lvb)
{
	struct o2_buf *b = o2_cache_peek(fs, ino);
	struct inode_lvb v;

	fs->refreshes++;
	if (!b)
		return false;
	if (lvb && b->kind == O2_META_INODE && !b->dirty && !b->in_running && !b->in_log &&
	    inode_block(fs, b, ino)) {
		struct o2_dinode *d = (struct o2_dinode *)b->data;

		memcpy(&v, lvb, sizeof(v));
		if (le32(v.magic) == LVB_MAGIC && v.generation == d->i_generation &&
		    le64(v.hash) == hash_but_times(fs, b->data)) {
			d->i_atime = v.atime;
			d->i_ctime = v.ctime;
			d->i_mtime = v.mtime;
			d->i_atime_nsec = v.atime_nsec;
			d->i_ctime_nsec = v.ctime_nsec;
			d->i_mtime_nsec = v.mtime_nsec;
			o2_meta_seal(fs, b);
			o2_cache_vouch(fs, b);
			fs->refreshes_kept++;
			return true;
		}
	}
	o2_cache_forget(fs, ino);
	return false;
}
