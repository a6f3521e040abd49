/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The verification walk: read and validate everything reachable from the
 * superblock.  Directories are visited once each (a set of visited inodes
 * guards against cycles a damaged volume may hold), with an explicit stack
 * rather than recursion so deep trees cannot exhaust the C stack.
 */
#include <stdlib.h>
#include <sys/stat.h>

#include "dir.h"
#include "error.h"
#include "internal.h"

/* ---- a small set of block numbers (open addressing) ---- */

struct blkset {
	uint64_t *slots;
	size_t cap, n;
};

static size_t hash64(uint64_t v, size_t cap)
{
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdULL;
	v ^= v >> 33;
	return (size_t)v & (cap - 1);
}

/* 1 if added, 0 if present, -ENOMEM. */
static int blkset_add(struct blkset *s, uint64_t v)
{
	if ((s->n + 1) * 2 > s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 64;
		uint64_t *ns = o2_calloc(ncap, sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->slots[i])
				continue;
			size_t j = hash64(s->slots[i], ncap);

			while (ns[j])
				j = (j + 1) & (ncap - 1);
			ns[j] = s->slots[i];
		}
		free(s->slots);
		s->slots = ns;
		s->cap = ncap;
	}
	size_t j = hash64(v, s->cap);

	while (s->slots[j]) {
		if (s->slots[j] == v)
			return 0;
		j = (j + 1) & (s->cap - 1);
	}
	s->slots[j] = v;
	s->n++;
	return 1;
}

struct walk {
	struct o2_fs *fs;
	struct o2_walk_stats st;
	struct blkset seen_dirs;
	struct blkset seen_trees; /* refcount trees: shared, checked once */
	uint64_t *stack;
	size_t depth, stack_cap;
	bool read_data; /* read every data block (system files) */
	uint8_t *buf;
	const struct o2_walk_opts *opts; /* the progress hook, or NULL */
	uint64_t inodes_in_use;		 /* its total */
};

static int push_dir(struct walk *w, uint64_t ino)
{
	int r = blkset_add(&w->seen_dirs, ino);

	if (r <= 0)
		return r;
	if (w->depth == w->stack_cap) {
		size_t ncap = w->stack_cap ? w->stack_cap * 2 : 64;
		uint64_t *ns = o2_realloc(w->stack, ncap * sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		w->stack = ns;
		w->stack_cap = ncap;
	}
	w->stack[w->depth++] = ino;
	return 0;
}

static int count_extent(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	struct walk *w = arg;

	if (!ext)
		w->st.extent_blocks++;
	else
		w->st.data_blocks += (uint64_t)ext->clusters << w->fs->bpc_bits;
	return 0;
}

static int count_xattr(const struct o2_xattr *x, void *arg)
{
	((struct walk *)arg)->st.xattrs++;
	return 0;
}

static int count_xattr_tree(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	struct walk *w = arg;

	w->st.xattr_blocks += ext ? (uint64_t)ext->clusters << w->fs->bpc_bits : 1;
	return 0;
}

static int count_group(unsigned chain, const struct o2_group_info *g, void *arg)
{
	((struct walk *)arg)->st.groups++;
	return 0;
}

struct data_reader {
	struct walk *w;
	struct o2_inode *ino;
	uint8_t *buf;
};

#define READ_ALL_CHUNK (1u << 20)

/* Read one extent's data below i_size (holes are not read: a damaged size or
 * cluster count cannot make the walk read terabytes of zeros). */
static int read_extent(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	struct data_reader *d = arg;
	struct o2_fs *fs = d->w->fs;

	if (!ext || (ext->flags & O2_EXTENT_UNWRITTEN))
		return 0;
	uint64_t off = (uint64_t)ext->cpos << fs->cbits;
	uint64_t end = off + ((uint64_t)ext->clusters << fs->cbits);

	if (end > d->ino->info.size)
		end = d->ino->info.size;
	while (off < end) {
		size_t want = end - off < READ_ALL_CHUNK ? (size_t)(end - off) : READ_ALL_CHUNK;
		ssize_t n = o2_inode_read(fs, d->ino, off, d->buf, want);

		if (n <= 0)
			return n < 0 ? (int)n : o2_corrupt(fs, d->ino->info.blkno, "short read");
		off += (uint64_t)n;
	}
	return 0;
}

static int read_all_data(struct walk *w, struct o2_inode *ino)
{
	struct data_reader d = { w, ino, o2_malloc(READ_ALL_CHUNK) };
	int r;

	if (!d.buf)
		return -ENOMEM;
	r = o2_inode_walk_extents(w->fs, ino, read_extent, &d);
	free(d.buf);
	return r;
}

static int check_sizes(struct walk *w, struct o2_inode *ino)
{
	const struct o2_inode_info *in = &ino->info;

	if (in->kind == O2_ID2_EXTENTS && S_ISREG(in->mode) &&
	    !o2_has_incompat(w->fs, O2_FEATURE_INCOMPAT_SPARSE_ALLOC) &&
	    in->size > ((uint64_t)in->clusters << w->fs->cbits))
		return o2_corrupt(w->fs, in->blkno, "file of %llu bytes holds only %u clusters on a "
				  "volume without sparse files",
				  (unsigned long long)in->size, in->clusters);
	return 0;
}

struct dx_check {
	struct walk *w;
	struct o2_inode *dir;
};

/* Every entry of an indexed directory must be found through the index. */
static int check_indexed_entry(const struct o2_dirent *de, void *arg)
{
	struct dx_check *c = arg;
	struct o2_dirent found;
	int r;

	if ((de->name_len == 1 && de->name[0] == '.') ||
	    (de->name_len == 2 && de->name[0] == '.' && de->name[1] == '.'))
		return 0;
	r = o2_dir_lookup(c->w->fs, c->dir, de->name, de->name_len, &found);
	if (r == -ENOENT || (r == 0 && found.dirent_blk != de->dirent_blk))
		return o2_corrupt(c->w->fs, c->dir->info.blkno, "entry %s (in block %llu) is "
				  "missing from the directory index", de->name,
				  (unsigned long long)de->dirent_blk);
	return r;
}

static int count_dx_leaf(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	struct walk *w = arg;

	if (!ext) {
		w->st.dx_blocks++;
		return 0;
	}
	for (uint64_t b = 0; b < ((uint64_t)ext->clusters << w->fs->bpc_bits); b++) {
		int r = o2_dx_read_leaf(w->fs, ext->blkno + b, w->buf);

		if (r < 0)
			return r;
		w->st.dx_blocks++;
	}
	return 0;
}

static int walk_index(struct walk *w, struct o2_inode *dir)
{
	uint8_t *root = o2_malloc(w->fs->bs);
	struct dx_check c = { w, dir };
	int r;

	if (!root)
		return -ENOMEM;
	r = o2_dx_read_root(w->fs, dir, root);
	if (r == 0) {
		const struct o2_dx_root_block *dr = (const struct o2_dx_root_block *)root;

		w->st.dx_blocks++;
		if (!(dr->dr_flags & O2_DX_INLINE)) {
			struct o2_tree_root tr = { dir->info.dx_root, (struct o2_extent_list *)&dr->dr_list,
						   o2_extent_recs_per_dx_root(w->fs->bs) };

			r = o2_tree_walk(w->fs, &tr, count_dx_leaf, w);
		}
	}
	free(root);
	if (r == 0)
		r = o2_dir_iterate(w->fs, dir, check_indexed_entry, &c);
	return r;
}

static int visit_inode(struct walk *w, uint64_t blkno, bool system);

struct dir_ctx {
	struct walk *w;
	bool system;
	int err;
};

static int visit_entry(const struct o2_dirent *de, void *arg)
{
	struct dir_ctx *c = arg;

	c->w->st.dirents++;
	if ((de->name_len == 1 && de->name[0] == '.') ||
	    (de->name_len == 2 && de->name[0] == '.' && de->name[1] == '.'))
		return 0;
	return visit_inode(c->w, de->ino, c->system);
}

static int visit_inode(struct walk *w, uint64_t blkno, bool system)
{
	struct o2_inode *ino;
	int r = o2_inode_get(w->fs, blkno, &ino);

	if (r < 0)
		return r;
	w->st.inodes++;
	const struct o2_inode_info *in = &ino->info;

	r = check_sizes(w, ino);
	if (r < 0)
		goto out;
	switch (in->kind) {
	case O2_ID2_EXTENTS:
		r = o2_inode_walk_extents(w->fs, ino, count_extent, w);
		if (r == 0 && (system || S_ISDIR(in->mode)) && !S_ISDIR(in->mode))
			r = read_all_data(w, ino);
		break;
	case O2_ID2_CHAIN:
		r = o2_chain_walk(w->fs, ino, count_group, w);
		break;
	case O2_ID2_LOCAL_ALLOC:
	case O2_ID2_TRUNCATE_LOG:
		r = o2_inode_check_alloc_contents(w->fs, ino);
		break;
	default:
		break;
	}
	if (r == 0 && (in->dyn_features & O2_DYN_HAS_REFCOUNT) &&
	    o2_has_incompat(w->fs, O2_FEATURE_INCOMPAT_REFCOUNT_TREE)) {
		if (!in->refcount_loc)
			r = o2_corrupt(w->fs, blkno, "inode shares clusters but names no refcount tree");
		else if ((r = blkset_add(&w->seen_trees, in->refcount_loc)) == 1) {
			struct o2_refcount_stats rs;

			r = o2_refcount_tree_check(w->fs, in->refcount_loc, &rs);
			if (r == 0) {
				w->st.refcount_trees++;
				w->st.refcount_records += rs.records;
			}
		}
	}
	if (r == 0 && (in->dyn_features & O2_DYN_HAS_XATTR)) {
		if (in->xattr_loc)
			w->st.xattr_blocks++;
		r = o2_xattr_walk(w->fs, ino, count_xattr, w, count_xattr_tree, w);
	}
	if (r == 0 && S_ISDIR(in->mode) && !(in->flags & O2_FL_SUPER))
		r = push_dir(w, blkno);
	if (r == 0 && w->opts && w->opts->progress &&
	    w->opts->progress(w->opts->arg, w->st.inodes, w->inodes_in_use))
		r = -ECANCELED;
out:
	o2_inode_unref(ino);
	return r;
}

static int walk_dirs(struct walk *w, bool system)
{
	struct dir_ctx c = { w, system, 0 };
	int r = 0;

	while (w->depth && r == 0) {
		uint64_t blkno = w->stack[--w->depth];
		struct o2_inode *dir;

		r = o2_inode_get(w->fs, blkno, &dir);
		if (r < 0)
			break;
		w->st.dirs++;
		r = o2_dir_iterate(w->fs, dir, visit_entry, &c);
		if (r == 0 && (dir->info.dyn_features & O2_DYN_INDEXED_DIR) &&
		    o2_has_incompat(w->fs, O2_FEATURE_INCOMPAT_INDEXED_DIRS))
			r = walk_index(w, dir);
		o2_inode_unref(dir);
	}
	return r;
}

/* The used bits of every inode allocator (global and per slot): the inodes in use. */
static int count_inodes_in_use(struct o2_fs *fs, uint64_t *ret)
{
	uint64_t n = 0;

	for (unsigned s = 0; s <= fs->info.max_slots; s++) {
		bool global = s == fs->info.max_slots;
		uint64_t blkno;
		struct o2_inode *ino;
		int r = o2_sysfile_lookup(fs, global ? O2_SYS_GLOBAL_INODE_ALLOC : O2_SYS_INODE_ALLOC,
					  global ? 0 : s, &blkno);

		if (r == 0)
			r = o2_inode_get(fs, blkno, &ino);
		if (r < 0)
			return r;
		n += ino->info.bitmap_used;
		o2_inode_unref(ino);
	}
	*ret = n;
	return 0;
}

int o2_fs_walk(struct o2_fs *fs, struct o2_walk_stats *ret)
{
	return o2_fs_walk_opts(fs, NULL, ret);
}

int o2_fs_walk_opts(struct o2_fs *fs, const struct o2_walk_opts *opts, struct o2_walk_stats *ret)
{
	struct walk w = { .fs = fs, .opts = opts };
	int r;

	/* damage here is found again, and named, by the walk itself */
	if (opts && opts->progress && count_inodes_in_use(fs, &w.inodes_in_use) < 0)
		w.inodes_in_use = 0;
	w.buf = o2_malloc(fs->bs);
	if (!w.buf)
		return -ENOMEM;
	/* the system directory and everything in it, data included */
	r = visit_inode(&w, fs->info.system_dir_blkno, true);
	if (r == 0)
		r = walk_dirs(&w, true);
	for (unsigned s = 0; s < fs->info.max_slots && r == 0; s++) {
		struct o2_journal_info j;

		r = o2_journal_info(fs, s, &j);
	}
	if (r == 0) {
		struct o2_slotmap_info *sm = o2_malloc(sizeof(*sm));

		r = sm ? o2_slotmap_read(fs, sm) : -ENOMEM;
		free(sm);
	}
	/* the volume must fit the device */
	if (r == 0 && fs->info.total_clusters > (fs->nblocks >> fs->bpc_bits))
		r = o2_corrupt(fs, O2_SUPER_BLKNO, "the volume has %u clusters but the device holds "
			       "only %llu", fs->info.total_clusters,
			       (unsigned long long)(fs->nblocks >> fs->bpc_bits));
	/* then the namespace from the root */
	if (r == 0) {
		struct o2_inode *root;

		r = o2_inode_get(fs, fs->info.root_blkno, &root);
		if (r == 0) {
			if (!S_ISDIR(root->info.mode))
				r = o2_corrupt(fs, fs->info.root_blkno, "the root inode is not a directory");
			o2_inode_unref(root);
		}
	}
	if (r == 0)
		r = visit_inode(&w, fs->info.root_blkno, false);
	if (r == 0)
		r = walk_dirs(&w, false);
	free(w.stack);
	free(w.seen_dirs.slots);
	free(w.seen_trees.slots);
	free(w.buf);
	if (r > 0)
		r = -EIO;
	if (r == 0)
		*ret = w.st;
	return r;
}
