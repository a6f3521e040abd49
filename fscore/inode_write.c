/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Inodes, write side: the cached inode block every write-path module
 * changes, and the small edits they all make to it (times, generation,
 * id2 turned into an extent list).  These sat in file.c and namei.c,
 * which made acl.c, xattr*.c and refcount.c call up into the modules that
 * call them.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "error.h"
#include "inode_write.h"
#include "internal.h"
#include "journal.h"

struct o2_dinode *o2_buf_dinode(struct o2_buf *b)
{
	return (struct o2_dinode *)b->data;
}

int o2_inode_buf(struct o2_fs *fs, uint64_t ino, struct o2_buf **ret)
{
	struct o2_buf *b;
	int r;

	if (ino <= O2_SUPER_BLKNO || ino >= fs->nblocks)
		return o2_fail(fs, -ENOENT, "inode %llu lies outside the volume",
			       (unsigned long long)ino);
	r = o2_bread(fs, ino, O2_META_INODE, &b);
	if (r < 0)
		return r;
	struct o2_dinode *di = o2_buf_dinode(b);

	if (!o2_sig_ok(di->i_signature, O2_SIG_INODE) || le64(di->i_blkno) != ino ||
	    le32(di->i_fs_generation) != fs->info.fs_generation) {
		o2_brelse(fs, b);
		return o2_corrupt(fs, ino, "not a valid inode block");
	}
	if (!(le32(di->i_flags) & O2_FL_VALID)) {
		o2_brelse(fs, b);
		return o2_fail(fs, -ENOENT, "inode %llu is not in use", (unsigned long long)ino);
	}
	*ret = b;
	return 0;
}

void o2_inode_owner(struct o2_buf *ib, struct o2_tree_owner *o)
{
	struct o2_dinode *di = o2_buf_dinode(ib);

	o->root = ib;
	o->el = &di->id2.i_list;
	/* 8-byte aligned inside the block buffer */
	o->last_eb = (o2le64 *)(void *)((uint8_t *)di + offsetof(struct o2_dinode, i_last_eb_blk));
	o->no_merge = false;
}

void o2_touch(struct o2_fs *fs, struct o2_dinode *di, bool mtime, bool ctime)
{
	uint64_t now = o2_now_ns(fs);

	if (mtime) {
		di->i_mtime = cpu_le64(now / 1000000000ull);
		di->i_mtime_nsec = cpu_le32((uint32_t)(now % 1000000000ull));
	}
	if (ctime) {
		di->i_ctime = cpu_le64(now / 1000000000ull);
		di->i_ctime_nsec = cpu_le32((uint32_t)(now % 1000000000ull));
	}
}

unsigned o2_inode_xattr_room(const struct o2_dinode *di)
{
	return (le16(di->i_dyn_features) & O2_DYN_INLINE_XATTR) ? le16(di->i_xattr_inline_size) : 0;
}

void o2_inode_to_extent_list(struct o2_fs *fs, struct o2_dinode *di)
{
	unsigned room = fs->bs - (unsigned)offsetof(struct o2_dinode, id2) - o2_inode_xattr_room(di);

	di->i_dyn_features = cpu_le16(le16(di->i_dyn_features) & ~O2_DYN_INLINE_DATA);
	memset(&di->id2, 0, room);
	di->id2.i_list.count = cpu_le16((uint16_t)((room - offsetof(struct o2_extent_list, recs)) /
						   sizeof(struct o2_extent_rec)));
}

uint32_t o2_new_generation(struct o2_fs *fs)
{
	uint64_t x = o2_now_ns(fs) ^ (fs->gen_counter++ * 0x9E3779B97F4A7C15ULL);

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 29;
	return (uint32_t)x;
}

uint8_t o2_mode_ftype(uint16_t mode)
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

uint32_t o2_links_of(const struct o2_dinode *di)
{
	return (uint32_t)le16(di->i_links_count) | ((uint32_t)le16(di->i_links_count_hi) << 16);
}

void o2_set_links(struct o2_dinode *di, uint32_t n)
{
	di->i_links_count = cpu_le16((uint16_t)n);
	di->i_links_count_hi = cpu_le16((uint16_t)(n >> 16));
}
