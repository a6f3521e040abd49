/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Reflinks: a new file sharing every cluster of another through the
 * refcount tree.  The copy waits in the orphan directory while its
 * extents are shared a few per transaction, then takes its name.  It
 * used to sit in namei.c; it builds on namei.c (new inodes, orphans) and
 * the refcount tree, and nothing calls back into it.
 */
#include <sys/stat.h>

#include "dir.h"
#include "error.h"
#include "extent_write.h"
#include "inode_write.h"
#include "internal.h"
#include "journal.h"
#include "namei.h"
#include "reserve.h"
#include "write.h"

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
	/* a record into the copy's tree, the source's cut in two, a refcount split */
	r = o2_reserve(fs, &(struct o2_resv){ .meta = 3 * O2_RESV_TREE_META(5) }, NULL);
	if (r < 0)
		return r;
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
	struct o2_dir_slot f;
	char oname[17];
	int r, e;

	r = o2_trans_begin(fs, O2_NAMEI_CREDITS, &t);
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
		r = o2_dir_check_changeable(fs, dib);
	if (r == 0) {
		r = o2_dir_find(fs, dib, name, len, &f);
		r = r == 0 ? -EEXIST : r == -ENOENT ? 0 : r;
	}
	o2_orphan_name(dst, oname);
	if (r == 0)
		r = o2_dir_find(fs, ob, oname, 16, &f);
	if (r == 0)
		r = o2_dir_remove(t, fs, ob, oname, 16, &f);
	if (r == 0)
		r = o2_dir_add(t, fs, dib, name, len, dst, o2_mode_ftype(S_IFREG));
	if (r == 0)
		r = o2_trans_add(t, db);
	if (r == 0)
		r = o2_trans_add(t, dib);
	if (r == 0) {
		struct o2_dinode *dd = o2_buf_dinode(db);

		dd->i_size = o2_buf_dinode(sb)->i_size;
		dd->i_flags = cpu_le32(le32(dd->i_flags) & ~(uint32_t)O2_FL_ORPHANED);
		dd->i_orphaned_slot = cpu_le16(0);
		o2_set_links(dd, 1);
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
	struct o2_dir_slot f;
	uint64_t dst = 0;
	struct o2_resv want = { .inodes = 1, .meta = 1 }; /* and a refcount tree's root */
	bool inline_data = false;
	char oname[17];
	int r, e;

	if (!fs->journal)
		return -EROFS;
	r = o2_check_name(name, len);
	if (r < 0)
		return r;
	if (!o2_has_incompat(fs, O2_FEATURE_INCOMPAT_REFCOUNT_TREE))
		return o2_fail(fs, -EOPNOTSUPP, "the volume lacks the refcount feature "
			       "(tunefs.ocfs2 --fs-features=refcount adds it)");
	/* a name in the orphan directory, then the one asked for */
	/* the new inode's number is not known yet: a name of none */
	r = o2_resv_orphan(fs, 0, &want);
	if (r == 0)
		r = o2_name_need(fs, dir, name, len, &want);
	if (r == 0)
		r = o2_reserve(fs, &want, NULL);
	if (r < 0)
		return r;
	/* the new inode: in the orphan directory until every extent is shared */
	r = o2_trans_begin(fs, O2_NAMEI_CREDITS + O2_REFCOUNT_DETACH_CREDITS + 4, &t);
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
		r = o2_dir_check_changeable(fs, dib);
	if (r == 0) {
		r = o2_dir_find(fs, dib, name, len, &f);
		r = r == 0 ? -EEXIST : r == -ENOENT ? 0 : r;
	}
	if (r == 0)
		r = o2_inode_buf(fs, fs->sys.orphan_dir, &ob);
	if (r < 0)
		goto rel;
	r = o2_new_inode(t, fs, (uint16_t)(S_IFREG | (ni->mode & 07777)), ni->uid, ni->gid, 0, &ib);
	if (r < 0)
		goto rel;
	struct o2_dinode *di = o2_buf_dinode(ib);

	dst = ib->blkno;
	inline_data = le16(sd->i_dyn_features) & O2_DYN_INLINE_DATA;
	/* inline data is copied at once (nothing to share); shared extents come in steps */
	if (inline_data) {
		memcpy(di->id2.i_data.id_data, sd->id2.i_data.id_data, (size_t)le64(sd->i_size));
		di->i_size = sd->i_size;
	} else {
		o2_inode_to_extent_list(fs, di);
	}
	o2_set_links(di, 0);
	di->i_flags = cpu_le32(le32(di->i_flags) | O2_FL_ORPHANED);
	di->i_orphaned_slot = cpu_le16((uint16_t)fs->opts.slot);
	o2_orphan_name(dst, oname);
	r = o2_dir_add(t, fs, ob, oname, 16, dst, o2_mode_ftype(S_IFREG));
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
	if (r < 0)
		return r;
	/* the attributes first, while the copy's inode has room for an inline store */
	r = o2_xattr_reflink(fs, src, dst);
	/* the extents, a few per transaction; a failure leaves an orphan to free */
	for (uint32_t cpos = 0; r == 0 && !inline_data;) {
		bool done;

		r = reflink_step(fs, src, dst, &cpos, &done);
		if (r == 0 && done)
			break;
	}
	if (r == 0)
		r = reflink_finish(fs, src, dst, dir, name, len);
	if (r < 0) {
		if (!fs->ro_reason)
			(void)o2_reap_orphan(fs, dst);
		return r;
	}
	*ret_ino = dst;
	return 0;
}
