/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Directories, read side: inline directories, block directories (with
 * trailers where the format calls for them) and the dx index.
 *
 * How lookups work in an indexed directory: the name's hash (major, minor)
 * selects, through the dx_root's extent tree, the cluster whose cpos is the
 * largest <= major (clamped to that extent), and the block minor mod
 * blocks-per-cluster within it: a dx_leaf.  Its entries with equal hashes
 * name the directory blocks to search.  A small index lives inline in the
 * dx_root block instead.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "dir.h"
#include "error.h"
#include "internal.h"
#include "meta.h"

bool o2_dir_has_trailer(const struct o2_fs *fs, const struct o2_inode *dir)
{
	if (dir->info.dyn_features & O2_DYN_INLINE_DATA)
		return false;
	return o2_has_incompat(fs, O2_FEATURE_INCOMPAT_META_ECC) ||
	       (dir->info.dyn_features & O2_DYN_INDEXED_DIR);
}

static void fill_dirent(struct o2_dirent *out, const struct o2_dir_entry *de, uint64_t blk)
{
	out->ino = le64(de->inode);
	out->type = de->file_type;
	out->name_len = de->name_len;
	memcpy(out->name, de->name, de->name_len);
	out->name[de->name_len] = '\0';
	out->dirent_blk = blk;
}

int o2_dir_scan_entries(struct o2_fs *fs, uint64_t blk, const uint8_t *data, unsigned size,
			 o2_dir_entry_fn fn, void *arg)
{
	unsigned off = 0;

	while (off < size) {
		const struct o2_dir_entry *de = (const struct o2_dir_entry *)(data + off);
		unsigned rec_len, name_len;

		if (size - off < O2_DIR_MEMBER_LEN)
			return o2_corrupt(fs, blk, "directory entry at offset %u is cut short", off);
		rec_len = le16(de->rec_len);
		name_len = de->name_len;
		if (rec_len < O2_DIR_REC_LEN(1))
			return o2_corrupt(fs, blk, "directory entry at offset %u has rec_len %u, "
					  "below the minimum", off, rec_len);
		if (rec_len % 4)
			return o2_corrupt(fs, blk, "directory entry at offset %u has unaligned "
					  "rec_len %u", off, rec_len);
		if (rec_len < O2_DIR_REC_LEN(name_len))
			return o2_corrupt(fs, blk, "directory entry at offset %u: name of %u bytes "
					  "in a record of %u", off, name_len, rec_len);
		if (rec_len > size - off)
			return o2_corrupt(fs, blk, "directory entry at offset %u runs past the end "
					  "of the block", off);
		if (le64(de->inode)) {
			if (name_len == 0)
				return o2_corrupt(fs, blk, "directory entry at offset %u has an empty "
						  "name", off);
			if (de->file_type >= O2_FT_MAX)
				return o2_corrupt(fs, blk, "directory entry at offset %u has file type "
						  "%u", off, de->file_type);
			if (le64(de->inode) >= fs->nblocks || le64(de->inode) <= O2_SUPER_BLKNO)
				return o2_corrupt(fs, blk, "directory entry at offset %u names inode "
						  "%llu, outside the volume", off,
						  (unsigned long long)le64(de->inode));
			int r = fn(de, blk, arg);

			if (r)
				return r;
		}
		off += rec_len;
	}
	return 0;
}

static int check_trailer(struct o2_fs *fs, const struct o2_inode *dir, uint64_t blk,
			 const uint8_t *block)
{
	const struct o2_dir_trailer *t =
		(const struct o2_dir_trailer *)(block + fs->bs - sizeof(struct o2_dir_trailer));

	if (!o2_sig_ok(t->db_signature, O2_SIG_DIRTRL))
		return o2_corrupt(fs, blk, "directory block has no trailer signature");
	if (le64(t->db_blkno) != blk)
		return o2_corrupt(fs, blk, "directory trailer records block %llu",
				  (unsigned long long)le64(t->db_blkno));
	if (le64(t->db_parent_dinode) != dir->info.blkno)
		return o2_corrupt(fs, blk, "directory trailer names parent %llu, not %llu",
				  (unsigned long long)le64(t->db_parent_dinode),
				  (unsigned long long)dir->info.blkno);
	return 0;
}

/* Read directory block blk of dir into buf and validate it; returns usable bytes. */
static int read_dir_block(struct o2_fs *fs, const struct o2_inode *dir, uint64_t blk, uint8_t *buf)
{
	bool trailer = o2_dir_has_trailer(fs, dir);
	/* metaecc implies trailers, which hold the block check */
	int r = o2_read_meta(fs, blk, trailer ? O2_META_DIR_BLOCK : O2_META_PLAIN, buf);

	if (r < 0)
		return r;
	if (trailer) {
		r = check_trailer(fs, dir, blk, buf);
		if (r < 0)
			return r;
		return (int)(fs->bs - sizeof(struct o2_dir_trailer));
	}
	return (int)fs->bs;
}

static int check_dir_inode(struct o2_fs *fs, struct o2_inode *dir)
{
	if (!S_ISDIR(dir->info.mode))
		return -ENOTDIR;
	if (dir->info.kind == O2_ID2_INLINE)
		return 0;
	if (dir->info.kind != O2_ID2_EXTENTS)
		return o2_corrupt(fs, dir->info.blkno, "directory holds neither inline data nor "
				  "extents");
	/* mkfs.ocfs2 itself leaves sizes that are not whole blocks (lost+found
	 * without inline data): the last block counts whole */
	if (dir->info.size > ((uint64_t)dir->info.clusters << fs->cbits))
		return o2_corrupt(fs, dir->info.blkno, "directory size %llu exceeds its %u clusters",
				  (unsigned long long)dir->info.size, dir->info.clusters);
	return 0;
}

/* Iterate over every block of a block directory. */
typedef int (*block_fn)(uint64_t blk, const uint8_t *data, unsigned size, void *arg);

static int for_each_dir_block(struct o2_fs *fs, struct o2_inode *dir, block_fn fn, void *arg)
{
	uint64_t nblocks = (dir->info.size + fs->bs - 1) >> fs->bits;
	uint8_t *buf = o2_malloc(fs->bs);
	int r = 0;

	if (!buf)
		return -ENOMEM;
	for (uint64_t b = 0; b < nblocks && r == 0;) {
		struct o2_extent ext;

		r = o2_inode_map(fs, dir, (uint32_t)(b >> fs->bpc_bits), &ext);
		if (r < 0)
			break;
		if (ext.blkno == 0 || (ext.flags & O2_EXTENT_UNWRITTEN)) {
			r = o2_corrupt(fs, dir->info.blkno, "directory has a hole at block %llu",
				       (unsigned long long)b);
			break;
		}
		uint64_t in_ext = ((uint64_t)ext.clusters << fs->bpc_bits) -
				  (b & ((1u << fs->bpc_bits) - 1));
		uint64_t phys = ext.blkno + (b & ((1u << fs->bpc_bits) - 1));

		for (uint64_t k = 0; k < in_ext && b < nblocks && r == 0; k++, b++) {
			int size = read_dir_block(fs, dir, phys + k, buf);

			if (size < 0) {
				r = size;
				break;
			}
			r = fn(phys + k, buf, (unsigned)size, arg);
		}
	}
	free(buf);
	return r;
}

struct iter_ctx {
	struct o2_fs *fs;
	o2_dirent_fn fn;
	void *arg;
	struct o2_dirent de;
	const uint8_t *data; /* the block (or inline data) being scanned */
	uint64_t base;	     /* its position in the directory */
};

static int iter_entry(const struct o2_dir_entry *de, uint64_t blk, void *arg)
{
	struct iter_ctx *c = arg;

	fill_dirent(&c->de, de, blk);
	c->de.pos = c->base + (uint64_t)((const uint8_t *)de - c->data);
	return c->fn(&c->de, c->arg);
}

/* for_each_dir_block calls this for logical blocks 0, 1, 2... in turn */
static int iter_block(uint64_t blk, const uint8_t *data, unsigned size, void *arg)
{
	struct iter_ctx *c = arg;
	int r;

	c->data = data;
	r = o2_dir_scan_entries(c->fs, blk, data, size, iter_entry, c);
	c->base += c->fs->bs;
	return r;
}

int o2_dir_iterate(struct o2_fs *fs, struct o2_inode *dir, o2_dirent_fn fn, void *arg)
{
	struct iter_ctx *c;
	int r = check_dir_inode(fs, dir);

	if (r < 0)
		return r;
	c = o2_malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	*c = (struct iter_ctx){ .fs = fs, .fn = fn, .arg = arg };
	if (dir->info.kind == O2_ID2_INLINE) {
		c->data = o2_di(dir)->id2.i_data.id_data;
		r = o2_dir_scan_entries(fs, dir->info.blkno, c->data, (unsigned)dir->info.size,
					iter_entry, c);
	} else {
		r = for_each_dir_block(fs, dir, iter_block, c);
	}
	free(c);
	return r;
}

/* ---- lookup ---- */

struct find_ctx {
	struct o2_fs *fs;
	const char *name;
	size_t len;
	struct o2_dirent *ret;
	bool found;
};

static int find_entry(const struct o2_dir_entry *de, uint64_t blk, void *arg)
{
	struct find_ctx *c = arg;

	if (de->name_len != c->len || memcmp(de->name, c->name, c->len) != 0)
		return 0;
	fill_dirent(c->ret, de, blk);
	c->found = true;
	return 1;
}

static int find_in_block(uint64_t blk, const uint8_t *data, unsigned size, void *arg)
{
	struct find_ctx *c = arg;

	return o2_dir_scan_entries(c->fs, blk, data, size, find_entry, c);
}

static int search_block(struct o2_fs *fs, struct o2_inode *dir, uint64_t blk,
			struct find_ctx *c)
{
	uint8_t *buf = o2_malloc(fs->bs);
	int size, r;

	if (!buf)
		return -ENOMEM;
	size = read_dir_block(fs, dir, blk, buf);
	r = size < 0 ? size : o2_dir_scan_entries(fs, blk, buf, (unsigned)size, find_entry, c);
	free(buf);
	return r < 0 ? r : 0;
}

static int check_dx_root(struct o2_fs *fs, struct o2_inode *dir, uint64_t blk, const uint8_t *buf)
{
	const struct o2_dx_root_block *dr = (const struct o2_dx_root_block *)buf;
	int r = o2_check_meta_head(fs, blk, "dx_root", dr->dr_signature, O2_SIG_DXROOT,
				   le64(dr->dr_blkno), le32(dr->dr_fs_generation));

	if (r < 0)
		return r;
	if (le64(dr->dr_dir_blkno) != dir->info.blkno)
		return o2_corrupt(fs, blk, "dx_root belongs to inode %llu, not %llu",
				  (unsigned long long)le64(dr->dr_dir_blkno),
				  (unsigned long long)dir->info.blkno);
	if (dr->dr_flags & O2_DX_INLINE) {
		unsigned count = le16(dr->dr_entries.de_count), used = le16(dr->dr_entries.de_num_used);

		if (count > o2_dx_entries_per_root(fs->bs) || used > count)
			return o2_corrupt(fs, blk, "inline dx index uses %u of %u entries (room for %u)",
					  used, count, o2_dx_entries_per_root(fs->bs));
		return 0;
	}
	return o2_check_extent_list(fs, blk, &dr->dr_list, o2_extent_recs_per_dx_root(fs->bs),
				    "dx_root");
}

int o2_dx_read_root(struct o2_fs *fs, struct o2_inode *dir, uint8_t *buf)
{
	uint64_t blk = dir->info.dx_root;
	int r;

	if (blk <= O2_SUPER_BLKNO || blk >= fs->nblocks)
		return o2_corrupt(fs, dir->info.blkno, "dx_root pointer %llu lies outside the volume",
				  (unsigned long long)blk);
	r = o2_read_meta(fs, blk, O2_META_DX_ROOT, buf);
	return r < 0 ? r : check_dx_root(fs, dir, blk, buf);
}

int o2_dx_read_leaf(struct o2_fs *fs, uint64_t blk, uint8_t *buf)
{
	const struct o2_dx_leaf *dl = (const struct o2_dx_leaf *)buf;
	int r = o2_read_meta(fs, blk, O2_META_DX_LEAF, buf);

	if (r == 0)
		r = o2_check_meta_head(fs, blk, "dx_leaf", dl->dl_signature, O2_SIG_DXLEAF,
				       le64(dl->dl_blkno), le32(dl->dl_fs_generation));
	if (r < 0)
		return r;
	unsigned count = le16(dl->dl_list.de_count), used = le16(dl->dl_list.de_num_used);

	if (count > o2_dx_entries_per_leaf(fs->bs) || used > count)
		return o2_corrupt(fs, blk, "dx_leaf uses %u of %u entries (room for %u)", used, count,
				  o2_dx_entries_per_leaf(fs->bs));
	return 0;
}

/* Search the entries of one index list for the name's hash. */
static int search_dx_list(struct o2_fs *fs, struct o2_inode *dir, const struct o2_dx_entry_list *l,
			  uint32_t major, uint32_t minor, struct find_ctx *c)
{
	unsigned used = le16(l->de_num_used);

	for (unsigned i = 0; i < used && !c->found; i++) {
		const struct o2_dx_entry *e = &l->de_entries[i];
		int r;

		if (le32(e->dx_major_hash) != major || le32(e->dx_minor_hash) != minor)
			continue;
		r = search_block(fs, dir, le64(e->dx_dirent_blk), c);
		if (r < 0)
			return r;
	}
	return 0;
}

int o2_dx_leaf_for_hash(struct o2_fs *fs, uint64_t dx_root, const uint8_t *root_buf,
			uint32_t major, uint32_t minor, uint64_t *ret_blk)
{
	const struct o2_dx_root_block *dr = (const struct o2_dx_root_block *)root_buf;
	struct o2_tree_root root = { dx_root, (struct o2_extent_list *)&dr->dr_list,
				     o2_extent_recs_per_dx_root(fs->bs) };
	struct o2_extent ext;
	uint64_t cluster;
	int r = o2_tree_lookup_le(fs, &root, major, &ext);

	if (r < 0)
		return r;
	if ((uint64_t)major >= (uint64_t)ext.cpos + ext.clusters)
		cluster = ext.clusters - 1;
	else
		cluster = major - ext.cpos;
	*ret_blk = ext.blkno + (cluster << fs->bpc_bits) + (minor & ((1u << fs->bpc_bits) - 1));
	return 0;
}

static int dx_lookup(struct o2_fs *fs, struct o2_inode *dir, struct find_ctx *c)
{
	uint8_t *root = o2_malloc(fs->bs), *leaf = o2_malloc(fs->bs);
	const struct o2_dx_root_block *dr = (const struct o2_dx_root_block *)root;
	uint32_t major, minor;
	uint64_t leaf_blk;
	int r;

	if (!root || !leaf) {
		r = -ENOMEM;
		goto out;
	}
	r = o2_dx_read_root(fs, dir, root);
	if (r < 0)
		goto out;
	o2_dx_hash(fs, c->name, c->len, &major, &minor);
	if (dr->dr_flags & O2_DX_INLINE) {
		r = search_dx_list(fs, dir, &dr->dr_entries, major, minor, c);
		goto out;
	}
	r = o2_dx_leaf_for_hash(fs, dir->info.dx_root, root, major, minor, &leaf_blk);
	if (r < 0)
		goto out;
	r = o2_dx_read_leaf(fs, leaf_blk, leaf);
	if (r < 0)
		goto out;
	r = search_dx_list(fs, dir, &((const struct o2_dx_leaf *)leaf)->dl_list, major, minor, c);
out:
	free(root);
	free(leaf);
	return r;
}

int o2_dir_lookup(struct o2_fs *fs, struct o2_inode *dir, const char *name, size_t len,
		  struct o2_dirent *ret)
{
	struct find_ctx *c;
	int r = check_dir_inode(fs, dir);

	if (r < 0)
		return r;
	if (len == 0 || len > O2_MAX_NAME_LEN)
		return len ? -ENAMETOOLONG : -ENOENT;
	c = o2_calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	*c = (struct find_ctx){ .fs = fs, .name = name, .len = len, .ret = ret };
	if (dir->info.kind == O2_ID2_INLINE)
		r = o2_dir_scan_entries(fs, dir->info.blkno, o2_di(dir)->id2.i_data.id_data,
				 (unsigned)dir->info.size, find_entry, c);
	else if ((dir->info.dyn_features & O2_DYN_INDEXED_DIR) &&
		 o2_has_incompat(fs, O2_FEATURE_INCOMPAT_INDEXED_DIRS))
		r = dx_lookup(fs, dir, c);
	else
		r = for_each_dir_block(fs, dir, find_in_block, c);
	if (r >= 0)
		r = c->found ? 0 : -ENOENT;
	free(c);
	return r;
}

int o2_path_lookup(struct o2_fs *fs, const char *path, uint64_t *ret_blkno)
{
	uint64_t cur;
	const char *p = path;
	int r;

	if (p[0] != '/')
		return o2_fail(fs, -EINVAL, "path %s is not absolute", path);
	if (p[1] == '/') {
		cur = fs->info.system_dir_blkno;
		p += 2;
	} else {
		cur = fs->info.root_blkno;
	}
	while (*p) {
		const char *end;
		struct o2_inode *dir;
		struct o2_dirent de;

		while (*p == '/')
			p++;
		if (!*p) {
			/* a trailing slash asks for a directory */
			if (p > path && p[-1] == '/' && cur != fs->info.root_blkno &&
			    cur != fs->info.system_dir_blkno) {
				r = o2_inode_get(fs, cur, &dir);
				if (r < 0)
					return r;
				r = S_ISDIR(dir->info.mode) ? 0 : -ENOTDIR;
				o2_inode_unref(dir);
				if (r < 0)
					return r;
			}
			break;
		}
		end = strchr(p, '/');
		if (!end)
			end = p + strlen(p);
		r = o2_inode_get(fs, cur, &dir);
		if (r < 0)
			return r;
		r = o2_dir_lookup(fs, dir, p, (size_t)(end - p), &de);
		o2_inode_unref(dir);
		if (r < 0)
			return r;
		cur = de.ino;
		p = end;
	}
	*ret_blkno = cur;
	return 0;
}

void o2_orphan_name(uint64_t ino, char *buf)
{
	snprintf(buf, 17, "%016llx", (unsigned long long)ino);
}
