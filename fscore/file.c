/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * File data, write side: writes, truncation, preallocation, attributes.
 *
 * How it works.  Small files live inline in the inode while they fit and
 * move to extents when they grow.  A write walks its range a cluster run at
 * a time: a hole gets new clusters (their parts the write does not cover
 * are zeroed first, so no stale data shows), an unwritten extent is split
 * and marked written, then the data goes straight to the device - before
 * the transaction that points at it commits (ordered mode).  Each run is
 * its own transaction, bounded in credits.  Truncation frees clusters
 * through the truncate log a bounded number of records at a time.  On
 * volumes without the sparse feature, every cluster below i_size is kept
 * allocated (growth fills the gap with zeroed clusters).
 */
#include <stdlib.h>
#include <sys/stat.h>

#include "alloc.h"
#include "data.h"
#include "error.h"
#include "extent_write.h"
#include "inode_write.h"
#include "journal.h"
#include "quota.h"
#include "reserve.h"
#include "write.h"

#define WRITE_CREDITS (O2_TREE_CREDITS + O2_ALLOC_CREDITS + 2)
/* a write into shared clusters: an extent cut out and one put in, a refcount leaf */
#define COW_CREDITS (3 * O2_TREE_CREDITS + O2_ALLOC_CREDITS + O2_REFCOUNT_CREDITS)
/* a refcount record split: a split per level of the refcount tree and a new root */
#define REFCOUNT_META O2_RESV_TREE_META(5)

/* What o2_tree_truncate and o2_tree_punch hand clusters to (release_data). */
struct release {
	bool is_dir;
	uint64_t refcount_root; /* the inode's refcount tree, 0 if none */
	bool free_unused;	/* shared clusters nobody uses any more: freed */
	uint32_t released;	/* clusters the file let go of */
};

static void release_init(struct release *rl, const struct o2_dinode *di)
{
	rl->is_dir = S_ISDIR(le16(di->i_mode));
	rl->refcount_root = (le16(di->i_dyn_features) & O2_DYN_HAS_REFCOUNT) ?
				    le64(di->i_refcount_loc) : 0;
	rl->free_unused = true;
	rl->released = 0;
}

/* A file lets go of clusters: freed, or for shared ones their count lowered. */
static int release_data(struct o2_trans *t, struct o2_fs *fs, uint64_t blkno, uint32_t clusters,
			uint8_t flags, void *arg)
{
	struct release *rl = arg;
	uint32_t start = (uint32_t)(blkno >> fs->bpc_bits);

	rl->released += clusters;
	if (flags & O2_EXT_REFCOUNTED) {
		if (!rl->refcount_root)
			return o2_corrupt(fs, blkno, "a shared extent in a file without a refcount tree");
		return o2_refcount_release(t, fs, rl->refcount_root, start, clusters,
					   rl->free_unused);
	}
	/* directory blocks were journaled: replay must not bring them back over new data */
	if (rl->is_dir)
		for (uint64_t b = 0; b < ((uint64_t)clusters << fs->bpc_bits); b++) {
			int r = o2_trans_revoke(t, blkno + b);

			if (r < 0)
				return r;
		}
	return o2_clusters_free(t, fs, start, clusters);
}

/* The last extent mapped in [c0, c1) (ext.blkno 0: none). */
struct last_in {
	uint32_t c0, c1;
	struct o2_extent ext;
};

static int last_in_fn(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	struct last_in *l = arg;

	if (ext && ext->cpos < l->c1 && (uint64_t)ext->cpos + ext->clusters > l->c0)
		l->ext = *ext;
	return 0;
}

/*
 * Where a step releasing [c0, c1) of a file (tree) from the end starts,
 * and how many of the file's records it may cut.  Without a refcount tree:
 * c0 and max.  With one: a single record, and of a shared extent only the
 * clusters of one refcount record or gap (one leaf of the tree), so that
 * the step logs a bounded number of blocks; *ret_c0 > c0 leaves the rest
 * to later steps.
 */
static int release_step(struct o2_fs *fs, const struct release *rl, const struct o2_tree_root *tree,
			uint32_t c0, uint32_t c1, unsigned max, uint32_t *ret_c0, unsigned *ret_batch)
{
	struct last_in l = { c0, c1, { 0 } };
	uint32_t count, run, before;
	int r;

	*ret_c0 = c0;
	*ret_batch = max;
	if (!rl->refcount_root)
		return 0;
	*ret_batch = 1;
	r = o2_tree_walk(fs, tree, last_in_fn, &l);
	if (r < 0 || !l.ext.blkno || !(l.ext.flags & O2_EXT_REFCOUNTED))
		return r;
	uint32_t s = l.ext.cpos > c0 ? l.ext.cpos : c0;
	uint32_t e = l.ext.cpos + l.ext.clusters < c1 ? l.ext.cpos + l.ext.clusters : c1;
	uint32_t p_last = (uint32_t)(l.ext.blkno >> fs->bpc_bits) + (e - 1 - l.ext.cpos);

	r = o2_refcount_lookup(fs, rl->refcount_root, p_last, &count, &run, &before);
	if (r == 0 && e - s > before + 1)
		*ret_c0 = e - (before + 1);
	return r;
}

/*
 * One transaction of ensure_clusters, planned and reserved while no handle
 * is open: what cpos maps to, what the step does there and how many
 * clusters it covers.  Nothing changes between the plan and the step: the
 * reservation may grow an allocator or flush the truncate log, neither of
 * which touches the file's tree.
 */
enum step_kind {
	STEP_KEEP,    /* written clusters: the data goes over them */
	STEP_LEAVE,   /* unwritten clusters a preallocation leaves as they are */
	STEP_CONVERT, /* unwritten clusters marked written */
	STEP_NEW,     /* a hole: new clusters (at most n) */
	STEP_UNSHARE, /* shared clusters this file alone uses: kept, no longer shared */
	STEP_COW,     /* shared clusters: copied into new ones (at most n) */
};

struct step {
	enum step_kind kind;
	struct o2_extent ext; /* what cpos maps to */
	uint32_t n;	      /* clusters the step covers (NEW, COW: at most) */
};

/*
 * A write reaches clusters a reflink shares (ext maps cpos on): the file
 * first gets them to itself.  If it is their only user it keeps them as
 * they are (STEP_UNSHARE); otherwise new clusters - up to 1 MiB of them,
 * as many as are free - take their place (STEP_COW).  Either way the
 * file's record is cut (two new records at most) and the refcount tree
 * may split a record of its own: reserved here, with a cluster for a copy.
 */
static int plan_cow(struct o2_fs *fs, struct o2_buf *ib, const struct o2_tree_owner *o,
		    uint32_t cpos, uint32_t len, struct step *s)
{
	const struct o2_extent *ext = &s->ext;
	uint32_t p = (uint32_t)(ext->blkno >> fs->bpc_bits), count, run, meta, spare;
	uint32_t most = (uint32_t)((1u << 20) >> fs->cbits);
	struct release rl;
	int r;

	release_init(&rl, o2_buf_dinode(ib));
	r = o2_refcount_lookup(fs, rl.refcount_root, p, &count, &run, NULL);
	if (r < 0)
		return r;
	if (count == 0)
		return o2_corrupt(fs, o->root->blkno, "shared clusters at %u are not counted in its "
				  "refcount tree", p);
	s->n = len < ext->clusters ? len : ext->clusters;
	if (run < s->n)
		s->n = run;
	s->kind = count == 1 ? STEP_UNSHARE : STEP_COW;
	r = o2_tree_meta_need(fs, o, cpos, 2, &meta);
	if (r == 0)
		r = o2_reserve(fs, &(struct o2_resv){ .clusters = s->kind == STEP_COW,
						     .meta = meta + REFCOUNT_META }, &spare);
	if (r < 0 || s->kind == STEP_UNSHARE)
		return r;
	if (s->n > most)
		s->n = most ? most : 1;
	if (s->n > spare + 1)
		s->n = spare + 1;
	return 0;
}

/*
 * Plan the step of ensure_clusters at cpos and reserve what it may
 * allocate: -ENOSPC here has changed nothing.
 */
static int plan_step(struct o2_fs *fs, uint64_t ino, uint32_t cpos, uint32_t len, bool unwritten,
		     bool fill, struct step *s)
{
	struct o2_tree_owner o;
	struct o2_buf *ib;
	uint32_t meta, spare;
	int r = o2_inode_buf(fs, ino, &ib);

	if (r < 0)
		return r;
	o2_inode_owner(ib, &o);
	r = o2_tree_map(fs, &(struct o2_tree_root){ ino, o.el, le16(o.el->count) }, cpos, &s->ext);
	if (r < 0)
		goto out;
	const struct o2_extent *ext = &s->ext;

	s->n = ext->clusters < len ? ext->clusters : len;
	if (ext->blkno && (ext->flags & O2_EXTENT_REFCOUNTED) &&
	    (fill || ((ext->flags & O2_EXTENT_UNWRITTEN) && !unwritten))) {
		r = plan_cow(fs, ib, &o, cpos, len, s);
	} else if (ext->blkno && !(ext->flags & O2_EXTENT_UNWRITTEN)) {
		s->kind = STEP_KEEP;
	} else if (ext->blkno && unwritten) {
		s->kind = STEP_LEAVE;
	} else if (ext->blkno) {
		/* a written part cut out of an unwritten record: two new records */
		s->kind = STEP_CONVERT;
		r = o2_tree_meta_need(fs, &o, cpos, 2, &meta);
		if (r == 0)
			r = o2_reserve(fs, &(struct o2_resv){ .meta = meta }, NULL);
	} else {
		/*
		 * The new record's extent blocks and at least one cluster; then
		 * whatever clusters are left may all go to the data.
		 */
		s->kind = STEP_NEW;
		if (s->n > 0xffff)
			s->n = 0xffff;
		/* the file's owner and group may take only what their quotas allow */
		const struct o2_dinode *di = o2_buf_dinode(ib);
		uint64_t allowed;

		r = o2_quota_check(fs, le32(di->i_uid), le32(di->i_gid), (uint64_t)s->n << fs->cbits,
				   0, &allowed);
		if (r == 0 && allowed >> fs->cbits == 0)
			r = -EDQUOT;
		if (r == 0 && allowed >> fs->cbits < s->n)
			s->n = (uint32_t)(allowed >> fs->cbits);
		if (r == 0)
			r = o2_tree_meta_need(fs, &o, cpos, 1, &meta);
		if (r == 0)
			r = o2_reserve(fs, &(struct o2_resv){ .clusters = 1, .meta = meta }, &spare);
		if (r == 0 && s->n > spare + 1)
			s->n = spare + 1;
	}
out:
	o2_brelse(fs, ib);
	return r;
}

/*
 * A write into shared clusters, as planned (STEP_UNSHARE, STEP_COW): the
 * copies get the old data with the write's bytes over it.  *ret_got: the
 * clusters copied (0 after STEP_UNSHARE: the caller maps cpos again).
 */
static int cow_step(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib,
		    const struct o2_tree_owner *o, uint32_t cpos, const struct step *s,
		    const struct o2_fill *fill, uint32_t *ret_got)
{
	const struct o2_extent *ext = &s->ext;
	uint32_t p = (uint32_t)(ext->blkno >> fs->bpc_bits), n = s->n, start, got;
	struct release rl;
	uint8_t *buf;
	int r = 0;

	*ret_got = 0;
	release_init(&rl, o2_buf_dinode(ib));
	if (s->kind == STEP_UNSHARE) {
		r = o2_tree_clear_flag(t, fs, o, cpos, n, O2_EXT_REFCOUNTED);
		return r < 0 ? r : o2_refcount_release(t, fs, rl.refcount_root, p, n, false);
	}
	size_t bytes = (size_t)n << fs->cbits;

	buf = o2_malloc(bytes);
	if (!buf)
		return -ENOMEM;
	if (ext->flags & O2_EXTENT_UNWRITTEN)
		memset(buf, 0, bytes);
	else
		r = o2_blockdev_read_data(fs->dev, buf, bytes, ext->blkno << fs->bits, fs->io_owner);
	if (r == 0)
		r = o2_clusters_alloc(t, fs, 1, n, &start, &got);
	if (r < 0)
		goto out;
	uint64_t cs = (uint64_t)cpos << fs->cbits, ce = cs + ((uint64_t)got << fs->cbits);
	uint64_t blk = (uint64_t)start << fs->bpc_bits;

	if (fill) {
		uint64_t ds = fill->off > cs ? fill->off : cs;
		uint64_t de = fill->off + fill->len < ce ? fill->off + fill->len : ce;

		if (ds < de)
			memcpy(buf + (ds - cs), fill->src + (ds - fill->off), (size_t)(de - ds));
	}
	r = o2_data_dev_write(fs, buf, (size_t)(ce - cs), blk << fs->bits);
	if (r == 0)
		r = o2_tree_punch(t, fs, o, cpos, cpos + got, 1, release_data, &rl);
	if (r == 0)
		r = o2_tree_insert(t, fs, o, &(struct o2_extent){ cpos, got, blk, 0 });
	if (r == 0)
		*ret_got = got;
out:
	free(buf);
	return r;
}

/* The step's change to the file, inside its transaction; *ret_got: clusters done. */
static int do_step(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, uint32_t cpos,
		   bool unwritten, const struct step *s, const struct o2_fill *fill,
		   uint32_t *ret_got)
{
	struct o2_tree_owner o;
	uint32_t start, got;
	int r = 0;

	*ret_got = 0;
	o2_inode_owner(ib, &o);
	switch (s->kind) {
	case STEP_UNSHARE:
	case STEP_COW:
		return cow_step(t, fs, ib, &o, cpos, s, fill, ret_got);
	case STEP_KEEP:
		*ret_got = s->n;
		return fill ? o2_fill_existing(fs, s->ext.blkno, cpos, s->n, fill) : 0;
	case STEP_LEAVE:
		*ret_got = s->n;
		return 0;
	case STEP_CONVERT:
		r = o2_fill_clusters(fs, s->ext.blkno, cpos, s->n, fill);
		if (r == 0)
			r = o2_tree_mark_written(t, fs, &o, cpos, s->n);
		if (r == 0)
			*ret_got = s->n;
		return r;
	case STEP_NEW:
		break;
	}
	r = o2_clusters_alloc(t, fs, 1, s->n, &start, &got);
	if (r < 0)
		return r;
	uint64_t blk = (uint64_t)start << fs->bpc_bits;
	bool uw = unwritten && (fs->info.feature_ro_compat & O2_FEATURE_RO_COMPAT_UNWRITTEN);

	if (!uw)
		r = o2_fill_clusters(fs, blk, cpos, got, fill);
	if (r == 0)
		r = o2_tree_insert(t, fs, &o, &(struct o2_extent){ cpos, got, blk,
								 uw ? O2_EXT_UNWRITTEN : 0 });
	if (r == 0)
		r = o2_trans_add(t, ib);
	if (r == 0) {
		o2_buf_dinode(ib)->i_clusters = cpu_le32(le32(o2_buf_dinode(ib)->i_clusters) + got);
		*ret_got = got;
	}
	return r;
}

/*
 * Make [cpos, cpos+len) of the file allocated and written: new clusters
 * get the fill's data (if any) and zeros, existing ones the fill's data -
 * written before the transaction that maps them ends, so no commit maps
 * clusters whose content was never written.
 * size_to (0: leave the size): the size the caller is growing the file to.
 * Each transaction that allocates or converts clusters also raises i_size
 * over them (up to size_to), so no commit ever holds clusters past the end
 * of the file (fsck's INODE_SPARSE_SIZE after a crash); the kernel does the
 * same by updating i_size in the handle that allocated.
 * Each step reserves what it may allocate before its transaction begins
 * (plan_step): short of space, it stops having changed nothing in that
 * step; *ret_done (if given) says how many clusters from cpos the earlier
 * steps made ready, in order.
 */
static int holes_in(struct o2_fs *fs, uint64_t ino, uint32_t c0, uint32_t c1, uint32_t *ret);

static int ensure_clusters(struct o2_fs *fs, uint64_t ino, uint32_t cpos, uint32_t len,
			   bool unwritten, uint64_t size_to, const struct o2_fill *fill,
			   uint32_t *ret_done)
{
	struct o2_buf *ib;
	unsigned credits = WRITE_CREDITS;
	uint32_t done = 0;
	int r = o2_inode_buf(fs, ino, &ib);

	if (ret_done)
		*ret_done = 0;
	if (r < 0)
		return r;
	if (le16(o2_buf_dinode(ib)->i_dyn_features) & O2_DYN_HAS_REFCOUNT)
		credits = COW_CREDITS;
	o2_brelse(fs, ib);
	/*
	 * Clustered: the clusters this may allocate, taken from the window
	 * unless the global bitmap's lock is held - asked now, before the
	 * first step, so that a step part way never stops for it.
	 */
	if (len && o2_lock_clusters(fs, len + 1, 1) == -O2_ENEEDLOCK) {
		uint32_t holes;

		/* an overwrite allocates nothing: count what it would */
		r = holes_in(fs, ino, cpos, cpos + len, &holes);
		if (r == 0 && holes)
			r = o2_lock_clusters(fs, holes + 1, 1);
		if (r < 0)
			return r;
	}
	while (len) {
		struct o2_trans *t;
		struct step s;
		uint32_t got = 0;
		int e;

		r = plan_step(fs, ino, cpos, len, unwritten, fill != NULL, &s);
		if (r < 0)
			return r;
		r = o2_trans_begin(fs, credits, &t);
		if (r < 0)
			return r;
		r = o2_inode_buf(fs, ino, &ib);
		if (r < 0)
			goto end;
		r = do_step(t, fs, ib, cpos, unwritten, &s, fill, &got);
		if (r == 0 && got && size_to) {
			struct o2_dinode *di = o2_buf_dinode(ib);
			uint64_t end = (uint64_t)(cpos + got) << fs->cbits;

			if (end > size_to)
				end = size_to;
			if (end > le64(di->i_size)) {
				r = o2_trans_add(t, ib);
				if (r == 0)
					di->i_size = cpu_le64(end);
			}
		}
		/*
		 * A conversion or copy on write may change only extent blocks,
		 * never the inode's: fdatasync must still commit it.
		 */
		if (s.kind != STEP_KEEP && s.kind != STEP_LEAVE)
			o2_trans_mark_inode(t, ino, true);
		o2_brelse(fs, ib);
end:
		e = o2_trans_finish(t, r);
		if (r == 0)
			r = e;
		if (r < 0)
			return r;
		cpos += got;
		len -= got;
		done += got;
		if (ret_done)
			*ret_done = done;
	}
	return 0;
}

/* Move inline data out to an extent, so the file can grow past the inode. */
static int uninline(struct o2_fs *fs, uint64_t ino)
{
	struct o2_trans *t;
	struct o2_buf *ib;
	uint8_t *copy = NULL;
	uint64_t size;
	int r, e;

	/* the data's cluster (the new list fits in the inode: no extent block) */
	r = o2_reserve(fs, &(struct o2_resv){ .clusters = 1 }, NULL);
	if (r < 0)
		return r;
	r = o2_trans_begin(fs, WRITE_CREDITS, &t);
	if (r < 0)
		return r;
	r = o2_inode_buf(fs, ino, &ib);
	if (r < 0)
		goto end;
	struct o2_dinode *di = o2_buf_dinode(ib);

	if (!(le16(di->i_dyn_features) & O2_DYN_INLINE_DATA))
		goto rel;
	size = le64(di->i_size);
	copy = o2_malloc(fs->cs);
	if (!copy) {
		r = -ENOMEM;
		goto rel;
	}
	memset(copy, 0, fs->cs);
	memcpy(copy, di->id2.i_data.id_data, (size_t)size);
	r = o2_trans_add(t, ib);
	if (r < 0)
		goto rel;
	o2_inode_to_extent_list(fs, di);
	if (size) {
		uint32_t start, got;
		struct o2_tree_owner o;

		r = o2_clusters_alloc(t, fs, 1, 1, &start, &got);
		if (r < 0)
			goto rel;
		uint64_t blk = (uint64_t)start << fs->bpc_bits;

		r = o2_blockdev_write(fs->dev, copy, fs->cs, blk << fs->bits);
		if (r < 0) {
			r = o2_fs_abort(fs, r, "writing file data");
			goto rel;
		}
		o2_inode_owner(ib, &o);
		r = o2_tree_insert(t, fs, &o, &(struct o2_extent){ 0, 1, blk, 0 });
		di->i_clusters = cpu_le32(1);
	}
rel:
	free(copy);
	o2_brelse(fs, ib);
end:
	e = o2_trans_finish(t, r);
	return r < 0 ? r : e;
}

static int set_size(struct o2_fs *fs, uint64_t ino, uint64_t size, bool only_grow, bool touch)
{
	struct o2_trans *t;
	struct o2_buf *ib;
	int r, e;

	r = o2_trans_begin(fs, 2, &t);
	if (r < 0)
		return r;
	r = o2_inode_buf(fs, ino, &ib);
	if (r == 0) {
		struct o2_dinode *di = o2_buf_dinode(ib);

		/* a write inside the file: fdatasync need not commit its times */
		if (only_grow && touch && size <= le64(di->i_size))
			o2_trans_times_only(t);
		r = o2_trans_add(t, ib);
		if (r == 0) {
			if (!only_grow || size > le64(di->i_size))
				di->i_size = cpu_le64(size);
			if (touch)
				o2_touch(fs, di, true, true);
		}
		o2_brelse(fs, ib);
	}
	e = o2_trans_finish(t, r);
	return r < 0 ? r : e;
}

static bool sparse(const struct o2_fs *fs)
{
	return o2_has_incompat(fs, O2_FEATURE_INCOMPAT_SPARSE_ALLOC);
}

static ssize_t write_file(struct o2_fs *fs, uint64_t ino, uint64_t off, const void *buf,
			  size_t len);

ssize_t o2_write(struct o2_fs *fs, uint64_t ino, uint64_t off, const void *buf, size_t len)
{
	ssize_t r;

	fs->io_owner = ino;
	r = write_file(fs, ino, off, buf, len);
	fs->io_owner = 0;
	return r;
}

static ssize_t write_file(struct o2_fs *fs, uint64_t ino, uint64_t off, const void *buf,
			  size_t len)
{
	struct o2_buf *ib;
	const uint8_t *src = buf;
	uint64_t size;
	bool inline_data;
	int r;

	if (!fs->journal)
		return -EROFS;
	if (len == 0)
		return 0;
	if (off + len < off || (off + len - 1) >> fs->cbits > UINT32_MAX - 1)
		return -EFBIG;
	r = o2_inode_buf(fs, ino, &ib);
	if (r < 0)
		return r;
	struct o2_dinode *di = o2_buf_dinode(ib);
	uint16_t mode = le16(di->i_mode);

	size = le64(di->i_size);
	inline_data = le16(di->i_dyn_features) & O2_DYN_INLINE_DATA;
	r = o2_check_writable(fs, di, false);
	o2_brelse(fs, ib);
	if (r < 0)
		return r;
	if (S_ISDIR(mode))
		return -EISDIR;
	if (!S_ISREG(mode))
		return -EINVAL;

	if (inline_data) {
		r = o2_inode_buf(fs, ino, &ib);
		if (r < 0)
			return r;
		di = o2_buf_dinode(ib);
		unsigned cap = le16(di->id2.i_data.id_count);

		if (off + len <= cap) {
			struct o2_trans *t;

			r = o2_trans_begin(fs, 2, &t);
			if (r == 0) {
				r = o2_trans_add(t, ib);
				if (r == 0) {
					memcpy(di->id2.i_data.id_data + off, src, len);
					if (off + len > le64(di->i_size))
						di->i_size = cpu_le64(off + len);
					o2_touch(fs, di, true, true);
				}
				int e = o2_trans_finish(t, r);

				if (r == 0)
					r = e;
			}
			o2_brelse(fs, ib);
			return r < 0 ? r : (ssize_t)len;
		}
		o2_brelse(fs, ib);
		r = uninline(fs, ino);
		if (r < 0)
			return r;
	}

	/* clusters: on non-sparse volumes, everything from the old end too */
	uint64_t first = off;

	if (!sparse(fs) && size < off)
		first = size;
	uint32_t c0 = (uint32_t)(first >> fs->cbits);
	uint32_t c1 = (uint32_t)((off + len - 1) >> fs->cbits);

	/* allocation and data together: each new block is written once */
	struct o2_fill f = { off, len, src };

	uint32_t done;

	r = ensure_clusters(fs, ino, c0, c1 - c0 + 1, false, off + len, &f, &done);
	if (r < 0) {
		/* out of space part way: the clusters made ready hold their data (a short write) */
		uint64_t ready = (uint64_t)(c0 + done) << fs->cbits;

		/* a step that found it needs a cluster lock stops the same way */
		if ((r != -ENOSPC && r != -O2_ENEEDLOCK) || ready <= off)
			return r;
		len = (size_t)(ready - off);
	}
	r = set_size(fs, ino, off + len, true, true);
	return r < 0 ? r : (ssize_t)len;
}

struct extent_sum {
	uint64_t clusters, end; /* clusters mapped; the end of the last extent */
};

static int sum_extents(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	struct extent_sum *s = arg;

	if (ext) {
		s->clusters += ext->clusters;
		if ((uint64_t)ext->cpos + ext->clusters > s->end)
			s->end = (uint64_t)ext->cpos + ext->clusters;
	}
	return 0;
}

int o2_free_step(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, uint32_t new_end,
		 uint64_t size, bool *ret_more)
{
	struct o2_dinode *di = o2_buf_dinode(ib);
	uint16_t mode = le16(di->i_mode);
	/* a fast symlink's id2 holds its text, not an extent list */
	bool fast_link = S_ISLNK(mode) && !le32(di->i_clusters);
	struct o2_tree_owner o;
	struct release rl;
	uint32_t step_end;
	unsigned batch;
	int r;

	*ret_more = false;
	if ((le16(di->i_dyn_features) & O2_DYN_INLINE_DATA) || fast_link ||
	    (le32(di->i_flags) & (O2_FL_CHAIN | O2_FL_LOCAL_ALLOC | O2_FL_DEALLOC)) ||
	    !le16(di->id2.i_list.count))
		return 0;
	release_init(&rl, di);
	r = release_step(fs, &rl, &(struct o2_tree_root){ ib->blkno, &di->id2.i_list,
							  le16(di->id2.i_list.count) },
			 new_end, UINT32_MAX, 16, &step_end, &batch);
	if (r < 0)
		return r;
	o2_inode_owner(ib, &o);
	r = o2_tree_truncate(t, fs, &o, step_end, batch, release_data, &rl);
	if (r < 0)
		return r;
	*ret_more = r > 0 || step_end > new_end;
	r = o2_trans_add(t, ib);
	if (r < 0)
		return r;
	/* i_clusters follows what the tree holds */
	struct extent_sum sum = { 0, 0 };
	struct o2_tree_root root = { ib->blkno, &di->id2.i_list, le16(di->id2.i_list.count) };

	r = o2_tree_walk(fs, &root, sum_extents, &sum);
	if (r < 0)
		return r;
	di->i_clusters = cpu_le32((uint32_t)sum.clusters);
	/*
	 * The size comes down with the clusters, in the same transaction: no
	 * commit holds clusters past i_size (fsck INODE_SPARSE_SIZE after a
	 * crash), and a truncate cut short leaves a prefix of the old file.
	 */
	if (size != UINT64_MAX) {
		uint64_t cur = le64(di->i_size), want = size;
		uint64_t end = sum.end << fs->cbits;

		if (*ret_more && end > want)
			want = end < cur ? end : cur;
		if (want < cur)
			di->i_size = cpu_le64(want);
	}
	return 0;
}

int o2_free_from(struct o2_fs *fs, uint64_t ino, uint32_t new_end, uint64_t size)
{
	for (;;) {
		struct o2_trans *t;
		struct o2_buf *ib;
		bool more = false;
		int r, e;

		r = o2_trans_begin_freeing(fs, O2_FREE_STEP_CREDITS, &t);
		if (r < 0)
			return r;
		r = o2_inode_buf(fs, ino, &ib);
		if (r == 0) {
			r = o2_free_step(t, fs, ib, new_end, size, &more);
			o2_brelse(fs, ib);
		}
		e = o2_trans_finish(t, r);
		if (r == 0)
			r = e;
		if (r < 0)
			return r;
		if (!more)
			return 0;
	}
}

int o2_sum_clusters(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	if (ext)
		*(uint64_t *)arg += ext->clusters;
	return 0;
}

/*
 * Zeros over [from, to), inside one cluster, where it holds written data
 * (through a copy of the cluster where a reflink shares it).
 */
static int zero_in_cluster(struct o2_fs *fs, uint64_t ino, uint64_t from, uint64_t to)
{
	struct o2_extent ext;
	struct o2_buf *ib;
	int r = o2_inode_buf(fs, ino, &ib);

	if (r < 0)
		return r;
	struct o2_dinode *di = o2_buf_dinode(ib);

	r = o2_tree_map(fs, &(struct o2_tree_root){ ino, &di->id2.i_list, le16(di->id2.i_list.count) },
			(uint32_t)(from >> fs->cbits), &ext);
	o2_brelse(fs, ib);
	if (r < 0 || !ext.blkno || (ext.flags & O2_EXTENT_UNWRITTEN))
		return r;
	uint8_t *z = o2_calloc(1, (size_t)(to - from));

	if (!z)
		return -ENOMEM;
	if (ext.flags & O2_EXTENT_REFCOUNTED)
		r = ensure_clusters(fs, ino, (uint32_t)(from >> fs->cbits), 1, false, 0,
				    &(struct o2_fill){ from, (size_t)(to - from), z }, NULL);
	else
		r = o2_data_write(fs, (ext.blkno << fs->bits) + (from & (fs->cs - 1)), z,
				  (size_t)(to - from));
	free(z);
	return r;
}

int o2_truncate(struct o2_fs *fs, uint64_t ino, uint64_t size)
{
	struct o2_buf *ib;
	uint64_t old;
	bool inline_data;
	int r;

	if (!fs->journal)
		return -EROFS;
	if ((size >> fs->cbits) > UINT32_MAX - 1)
		return -EFBIG;
	r = o2_inode_buf(fs, ino, &ib);
	if (r < 0)
		return r;
	struct o2_dinode *di = o2_buf_dinode(ib);
	uint16_t mode = le16(di->i_mode);

	old = le64(di->i_size);
	inline_data = le16(di->i_dyn_features) & O2_DYN_INLINE_DATA;
	unsigned cap = inline_data ? le16(di->id2.i_data.id_count) : 0;

	r = o2_check_writable(fs, di, false);
	o2_brelse(fs, ib);
	if (r < 0)
		return r;
	if (S_ISDIR(mode))
		return -EISDIR;
	if (!S_ISREG(mode))
		return -EINVAL;
	if (inline_data && size <= cap) {
		struct o2_trans *t;

		r = o2_trans_begin(fs, 2, &t);
		if (r < 0)
			return r;
		r = o2_inode_buf(fs, ino, &ib);
		if (r == 0) {
			di = o2_buf_dinode(ib);
			r = o2_trans_add(t, ib);
			if (r == 0) {
				if (size < old)
					memset(di->id2.i_data.id_data + size, 0, (size_t)(old - size));
				di->i_size = cpu_le64(size);
				o2_touch(fs, di, true, true);
			}
			o2_brelse(fs, ib);
		}
		int e = o2_trans_finish(t, r);

		return r < 0 ? r : e;
	}
	if (inline_data) {
		r = uninline(fs, ino);
		if (r < 0)
			return r;
	}
	if (size < old) {
		/* zero the tail of the last kept cluster so a later grow reads zeros */
		uint32_t keep = (uint32_t)((size + fs->cs - 1) >> fs->cbits);

		if (size % fs->cs) {
			r = zero_in_cluster(fs, ino, size, (size | (fs->cs - 1)) + 1);
			if (r < 0)
				return r;
		}
		r = o2_free_from(fs, ino, keep, size);
		if (r == 0)
			r = set_size(fs, ino, size, false, true);
		return r;
	}
	if (size > old && !sparse(fs)) {
		uint32_t c0 = (uint32_t)(old >> fs->cbits), c1 = (uint32_t)((size - 1) >> fs->cbits);

		r = ensure_clusters(fs, ino, c0, c1 - c0 + 1, false, size, NULL, NULL);
		if (r < 0)
			return r;
	}
	return set_size(fs, ino, size, false, true);
}

/*
 * Punch [off, end): inline data is zeroed in place; otherwise the partial
 * clusters at either end are zeroed and the whole clusters between them
 * leave the tree, a bounded number of records per transaction (as the
 * kernel, a crash may leave the hole partly punched, never inconsistent).
 */
static int punch_hole(struct o2_fs *fs, uint64_t ino, uint64_t off, uint64_t end, bool inline_data)
{
	struct o2_trans *t;
	struct o2_buf *ib;
	int r, e;

	if (inline_data) {
		r = o2_trans_begin(fs, 2, &t);
		if (r < 0)
			return r;
		r = o2_inode_buf(fs, ino, &ib);
		if (r == 0) {
			struct o2_dinode *di = o2_buf_dinode(ib);
			uint64_t size = le64(di->i_size);

			r = o2_trans_add(t, ib);
			if (r == 0) {
				if (off < size)
					memset(di->id2.i_data.id_data + off, 0,
					       (size_t)((end < size ? end : size) - off));
				o2_touch(fs, di, true, true);
			}
			o2_brelse(fs, ib);
		}
		e = o2_trans_finish(t, r);
		return r < 0 ? r : e;
	}
	uint64_t cmask = fs->cs - 1;
	uint32_t c0 = (uint32_t)((off + cmask) >> fs->cbits), c1 = (uint32_t)(end >> fs->cbits);

	r = 0;
	if ((off >> fs->cbits) == ((end - 1) >> fs->cbits) && (off & cmask) && (end & cmask)) {
		r = zero_in_cluster(fs, ino, off, end);
	} else {
		if (off & cmask)
			r = zero_in_cluster(fs, ino, off, (off | cmask) + 1);
		if (r == 0 && (end & cmask))
			r = zero_in_cluster(fs, ino, end & ~cmask, end);
	}
	if (r < 0)
		return r;
	for (bool more = true; more;) {
		struct o2_tree_owner o;
		struct release rl;
		uint32_t step_c0 = c0, meta = 0;
		unsigned batch;

		/*
		 * Planned with no handle open: where this step starts, and the
		 * record a hole inside a record cuts off - from the blocks set
		 * aside for deletions, reserved before anything changes.
		 */
		r = o2_inode_buf(fs, ino, &ib);
		if (r < 0)
			return r;
		o2_inode_owner(ib, &o);
		release_init(&rl, o2_buf_dinode(ib));
		if (c0 < c1)
			r = release_step(fs, &rl, &(struct o2_tree_root){ ino, o.el,
									  le16(o.el->count) },
					 c0, c1, 8, &step_c0, &batch);
		if (r == 0 && c0 < c1)
			r = o2_tree_meta_need(fs, &o, c1, 1, &meta);
		o2_brelse(fs, ib);
		if (r == 0 && meta)
			r = o2_reserve(fs, &(struct o2_resv){ .meta = meta, .freeing = true }, NULL);
		if (r < 0)
			return r;
		r = o2_trans_begin_freeing(fs, O2_FREE_STEP_CREDITS, &t);
		if (r < 0)
			return r;
		r = o2_inode_buf(fs, ino, &ib);
		if (r == 0) {
			struct o2_dinode *di = o2_buf_dinode(ib);

			o2_inode_owner(ib, &o);
			release_init(&rl, di);
			more = false;
			if (c0 < c1) {
				r = o2_tree_punch(t, fs, &o, step_c0, c1, batch, release_data, &rl);
				more = r > 0 || step_c0 > c0;
			}
			if (r >= 0)
				r = o2_trans_add(t, ib);
			if (r == 0) {
				if (rl.released > le32(di->i_clusters))
					r = o2_corrupt(fs, ino, "the extent tree maps more clusters than i_clusters says");
				else
					di->i_clusters = cpu_le32(le32(di->i_clusters) - rl.released);
				o2_touch(fs, di, true, true);
			}
			o2_brelse(fs, ib);
		}
		e = o2_trans_finish(t, r);
		if (r == 0)
			r = e;
		if (r < 0)
			return r;
	}
	return 0;
}

/* Clusters of [c0, c1) a file maps (o2_tree_walk callback). */
struct mapped_in {
	uint32_t c0, c1;
	uint64_t n;
};

static int mapped_in_fn(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	struct mapped_in *m = arg;

	if (ext) {
		uint64_t s = ext->cpos > m->c0 ? ext->cpos : m->c0;
		uint64_t e = (uint64_t)ext->cpos + ext->clusters;

		if (e > m->c1)
			e = m->c1;
		if (s < e)
			m->n += e - s;
	}
	return 0;
}

/* Clusters of [c0, c1) the file does not map (a write there allocates them). */
static int holes_in(struct o2_fs *fs, uint64_t ino, uint32_t c0, uint32_t c1, uint32_t *ret)
{
	struct mapped_in m = { c0, c1, 0 };
	struct o2_buf *ib;
	int r = o2_inode_buf(fs, ino, &ib);

	if (r < 0)
		return r;
	struct o2_dinode *di = o2_buf_dinode(ib);

	r = o2_tree_walk(fs, &(struct o2_tree_root){ ino, &di->id2.i_list,
						     le16(di->id2.i_list.count) },
			 mapped_in_fn, &m);
	o2_brelse(fs, ib);
	*ret = m.n >= (uint64_t)(c1 - c0) ? 0 : (uint32_t)((c1 - c0) - m.n);
	return r;
}

/*
 * The clusters a preallocation of [c0, c1) takes must all be free before
 * it begins: it works a record per transaction, and -ENOSPC part way
 * would leave part of it done (the extent blocks its steps may need are
 * reserved step by step, and seldom run out first).
 */
static int reserve_holes(struct o2_fs *fs, uint64_t ino, uint32_t c0, uint32_t c1)
{
	uint32_t holes;
	int r = holes_in(fs, ino, c0, c1, &holes);

	if (r < 0 || !holes)
		return r;
	return o2_reserve(fs, &(struct o2_resv){ .clusters = holes }, NULL);
}

int o2_fallocate(struct o2_fs *fs, uint64_t ino, unsigned mode, uint64_t off, uint64_t len)
{
	struct o2_buf *ib;
	int r;

	if (!fs->journal)
		return -EROFS;
	if (!len)
		return -EINVAL;
	if (off + len < off || ((off + len - 1) >> fs->cbits) > UINT32_MAX - 1)
		return -EFBIG;
	r = o2_inode_buf(fs, ino, &ib);
	if (r < 0)
		return r;
	uint16_t m = le16(o2_buf_dinode(ib)->i_mode);
	bool inline_data = le16(o2_buf_dinode(ib)->i_dyn_features) & O2_DYN_INLINE_DATA;
	uint64_t size = le64(o2_buf_dinode(ib)->i_size);

	r = o2_check_writable(fs, o2_buf_dinode(ib), false);
	o2_brelse(fs, ib);
	if (r < 0)
		return r;
	if (!S_ISREG(m))
		return S_ISDIR(m) ? -EISDIR : -ENODEV;
	if (mode & O2_FALLOC_PUNCH_HOLE) {
		if (!(mode & O2_FALLOC_KEEP_SIZE))
			return -EOPNOTSUPP;
		/* without sparse allocation a file may have no holes */
		if (!sparse(fs))
			return o2_fail(fs, -EOPNOTSUPP, "punching holes needs the sparse feature");
		return punch_hole(fs, ino, off, off + len, inline_data);
	}
	if (inline_data) {
		r = uninline(fs, ino);
		if (r < 0)
			return r;
	}
	uint64_t first = off;

	if (!sparse(fs) && size < off)
		first = size;
	uint32_t c0 = (uint32_t)(first >> fs->cbits), c1 = (uint32_t)((off + len - 1) >> fs->cbits);

	r = reserve_holes(fs, ino, c0, c1 + 1);
	if (r < 0)
		return r;
	r = ensure_clusters(fs, ino, c0, c1 - c0 + 1, true,
			    (mode & O2_FALLOC_KEEP_SIZE) ? 0 : off + len, NULL, NULL);
	if (r < 0)
		return r;
	if (!(mode & O2_FALLOC_KEEP_SIZE))
		r = set_size(fs, ino, off + len, true, true);
	return r;
}

/* A chown or chgrp: the new owner's or group's quota must take the inode. */
static int chown_check(struct o2_fs *fs, uint64_t ino, unsigned mask, const struct o2_setattr *a)
{
	struct o2_buf *ib;
	int r = o2_inode_buf(fs, ino, &ib);

	if (r < 0)
		return r;
	const struct o2_dinode *di = o2_buf_dinode(ib);
	uint32_t uid = (mask & O2_SET_UID) && a->uid != le32(di->i_uid) ? a->uid : O2_QUOTA_NOID;
	uint32_t gid = (mask & O2_SET_GID) && a->gid != le32(di->i_gid) ? a->gid : O2_QUOTA_NOID;
	uint64_t space = (uint64_t)le32(di->i_clusters) << fs->cbits;

	o2_brelse(fs, ib);
	return o2_quota_check(fs, uid, gid, space, 1, NULL);
}

int o2_setattr(struct o2_fs *fs, uint64_t ino, const struct o2_setattr *a, unsigned mask)
{
	struct o2_trans *t;
	struct o2_buf *ib;
	int r, e;

	if (!fs->journal)
		return -EROFS;
	if (mask & O2_SET_SIZE) {
		r = o2_truncate(fs, ino, a->size);
		if (r < 0)
			return r;
	}
	if (!(mask & ~(unsigned)O2_SET_SIZE))
		return 0;
	/* a new owner or group takes the inode and its clusters in its quota */
	if (mask & (O2_SET_UID | O2_SET_GID)) {
		r = chown_check(fs, ino, mask, a);
		if (r < 0)
			return r;
	}
	/* with ACLs on, chmod rewrites the access ACL in the same transaction */
	uint8_t *acl = NULL;
	size_t acl_len = 0;

	if (mask & O2_SET_MODE) {
		r = o2_acl_chmod_plan(fs, ino, a->mode, &acl, &acl_len);
		if (r < 0)
			return r;
	}
	r = acl ? o2_trans_begin_freeing(fs, 2 + O2_XATTR_SET_CREDITS, &t) : o2_trans_begin(fs, 2, &t);
	if (r < 0) {
		free(acl);
		return r;
	}
	/*
	 * Times alone (the kernel's page cache hands a write's times over
	 * this way): fdatasync need not commit them, as for a write's own.
	 */
	if (!(mask & ~(unsigned)(O2_SET_ATIME | O2_SET_MTIME | O2_SET_CTIME)))
		o2_trans_times_only(t);
	r = o2_inode_buf(fs, ino, &ib);
	if (r == 0) {
		struct o2_dinode *di = o2_buf_dinode(ib);

		if (acl)
			r = o2_xattr_change_in(t, fs, ib, O2_XATTR_ACL_ACCESS, "", 0, acl, acl_len, 0);
		if (r == 0)
			r = o2_trans_add(t, ib);
		if (r == 0) {
			if (mask & O2_SET_MODE)
				di->i_mode = cpu_le16((uint16_t)((le16(di->i_mode) & S_IFMT) |
								 (a->mode & 07777)));
			if (mask & O2_SET_UID)
				di->i_uid = cpu_le32(a->uid);
			if (mask & O2_SET_GID)
				di->i_gid = cpu_le32(a->gid);
			if (mask & O2_SET_ATIME) {
				di->i_atime = cpu_le64((uint64_t)a->atime.sec);
				di->i_atime_nsec = cpu_le32(a->atime.nsec);
			}
			if (mask & O2_SET_MTIME) {
				di->i_mtime = cpu_le64((uint64_t)a->mtime.sec);
				di->i_mtime_nsec = cpu_le32(a->mtime.nsec);
			}
			if (mask & O2_SET_CTIME) {
				di->i_ctime = cpu_le64((uint64_t)a->ctime.sec);
				di->i_ctime_nsec = cpu_le32(a->ctime.nsec);
			} else {
				o2_touch(fs, di, false, true);
			}
		}
		o2_brelse(fs, ib);
	}
	free(acl);
	e = o2_trans_finish(t, r);
	return r < 0 ? r : e;
}
