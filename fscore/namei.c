/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The namespace, write side: new inodes and the operations on names
 * (create, mkdir, symlink, link, unlink, rmdir, rename), plus open-file
 * references and orphans.  Directory entries themselves are dir_write.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "alloc.h"
#include "dir.h"
#include "dx_write.h"
#include "error.h"
#include "extent_write.h"
#include "inode_write.h"
#include "journal.h"
#include "reserve.h"
#include "namei.h"
#include "quota.h"
#include "write.h"

/* an inode freed where its last name goes (its extents in the inode) */
#define FREE_IN_PLACE_CREDITS (24 + O2_XATTR_FREE_CREDITS)
#define UNLINK_CREDITS (O2_NAMEI_CREDITS + FREE_IN_PLACE_CREDITS)

/* ---- inodes ---- */

int o2_new_inode(struct o2_trans *t, struct o2_fs *fs, uint16_t mode, uint32_t uid,
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
	o2_set_links(di, S_ISDIR(mode) ? 2 : 1);
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
	o2_set_links(di, 0);
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

/*
 * Free an orphan: its index and data in transactions of their own while it
 * stays in the orphan directory, then - in one transaction - its orphan
 * entry and its inode bit, so that a crash anywhere leaves either a
 * reachable orphan or nothing.  An entry naming an inode no longer in use
 * just goes.
 */
int o2_reap_orphan(struct o2_fs *fs, uint64_t ino)
{
	return o2_reap_orphan_from(fs, ino, fs->sys.orphan_dir);
}

int o2_reap_orphan_from(struct o2_fs *fs, uint64_t ino, uint64_t orphan_dir)
{
	struct o2_trans *t;
	struct o2_buf *ob = NULL, *ib = NULL;
	struct o2_dir_slot f;
	char name[17];
	int r, e;

	/* the orphan's entry goes from its slot's orphan directory */
	r = o2_lock_need(fs, orphan_dir, true);
	if (r < 0)
		return r;
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
		r = o2_trans_begin(fs, O2_NAMEI_CREDITS, &t);
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
	r = o2_trans_begin_freeing(fs, O2_NAMEI_CREDITS + O2_XATTR_FREE_CREDITS +
				   O2_REFCOUNT_DETACH_CREDITS, &t);
	if (r < 0)
		return r;
	o2_orphan_name(ino, name);
	r = o2_inode_buf(fs, orphan_dir, &ob);
	if (r == 0)
		r = o2_dir_find(fs, ob, name, 16, &f);
	if (r == 0)
		r = o2_dir_remove(t, fs, ob, name, 16, &f);
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

/* Whether another node still has inode ino (generation gen) open. */
static bool open_elsewhere(struct o2_fs *fs, uint64_t ino, uint32_t gen)
{
	return fs->opts.open_elsewhere && fs->opts.open_elsewhere(fs->opts.cluster_arg, ino, gen) != 0;
}

/*
 * reap_orphan once the inode's last name or reference is gone.  What it
 * refuses (xattrs in buckets, say) is no failure of the unlink or the
 * close: the orphan waits, consistent, for a later open to try again; so
 * does one another node still has open.
 */
static int reap_or_wait(struct o2_fs *fs, uint64_t ino)
{
	struct o2_buf *ib;
	int r;

	if (fs->opts.open_elsewhere) {
		r = o2_inode_buf(fs, ino, &ib);
		if (r == 0) {
			uint32_t gen = le32(o2_buf_dinode(ib)->i_generation);

			o2_brelse(fs, ib);
			if (open_elsewhere(fs, ino, gen))
				return 0;
		}
	}
	r = o2_reap_orphan(fs, ino);
	return r == -EOPNOTSUPP ? 0 : r;
}

/*
 * reap_or_wait after an unlink or a rename removed the last name: that
 * change is made, so a cluster lock the freeing would need is no reason
 * to run the operation again - the inode waits in the orphan directory,
 * where o2_fs_orphans finds it for the daemon to free under its locks.
 */
static int reap_after(struct o2_fs *fs, uint64_t ino)
{
	int r = reap_or_wait(fs, ino);

	return r == -O2_ENEEDLOCK ? 0 : r;
}

/* Remember orphan ino of another slot, for o2_orphans_list. */
static int foreign_add(struct o2_fs *fs, uint64_t ino)
{
	if (fs->nforeign == fs->capforeign) {
		unsigned ncap = fs->capforeign ? fs->capforeign * 2 : 8;
		uint64_t *nv = o2_realloc(fs->foreign, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		fs->foreign = nv;
		fs->capforeign = ncap;
	}
	fs->foreign[fs->nforeign++] = ino;
	return 0;
}

/* Forget orphan ino of another slot (freed, or found no orphan). */
static void foreign_del(struct o2_fs *fs, uint64_t ino)
{
	for (unsigned i = 0; i < fs->nforeign; i++)
		if (fs->foreign[i] == ino)
			fs->foreign[i--] = fs->foreign[--fs->nforeign];
}

int o2_orphan_free(struct o2_fs *fs, uint64_t ino, uint32_t want_gen)
{
	struct o2_buf *ib;
	unsigned slot;
	uint32_t gen;
	bool live, orphan;
	int r;

	if (find_ref(fs, ino))
		return 0; /* open here again: its last close decides */
	r = o2_inode_buf(fs, ino, &ib);
	if (r == -ENOENT)
		live = orphan = false;
	else if (r < 0)
		return r;
	else {
		struct o2_dinode *di = o2_buf_dinode(ib);

		live = le32(di->i_flags) & O2_FL_VALID;
		orphan = live && (le32(di->i_flags) & O2_FL_ORPHANED);
		slot = le16(di->i_orphaned_slot);
		gen = le32(di->i_generation);
		o2_brelse(fs, ib);
	}
	foreign_del(fs, ino);
	if (!orphan) {
		/* freed already; an entry of ours naming it just goes */
		r = live ? 0 : o2_reap_orphan(fs, ino);
		return r == -ENOENT || r == -EOPNOTSUPP ? 0 : r;
	}
	/* another inode in that block since the caller took its lock: not ours */
	if (gen != want_gen || slot >= fs->info.max_slots || open_elsewhere(fs, ino, gen))
		return 0;
	uint64_t dir = fs->sys.orphan_dir;

	if (slot != fs->opts.slot) {
		r = o2_sysfile_lookup(fs, O2_SYS_ORPHAN_DIR, slot, &dir);
		if (r < 0)
			return r;
	}
	r = o2_reap_orphan_from(fs, ino, dir);
	return r == -EOPNOTSUPP ? 0 : r;
}

int o2_inode_close_ref(struct o2_fs *fs, uint64_t ino)
{
	struct o2_openref **pp = find_ref_slot(fs, ino), *o;
	struct o2_buf *ib;
	unsigned slot;
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
	slot = le16(o2_buf_dinode(ib)->i_orphaned_slot);
	o2_brelse(fs, ib);
	if (!orphan)
		return 0;
	/*
	 * Shared: freeing takes the inode's lock and the global bitmap's,
	 * which the caller may not hold; the daemon frees it later
	 * (o2_fs_orphans, o2_fs_free_orphan), this slot's orphans and those
	 * of other slots that were open here (their own node may have
	 * unmounted since: nobody else would free them).
	 */
	if (fs->flags & O2_OPEN_SHARED)
		return slot == fs->opts.slot ? 0 : foreign_add(fs, ino);
	return reap_or_wait(fs, ino);
}

void o2_openrefs_free(struct o2_fs *fs)
{
	free(fs->foreign);
	fs->foreign = NULL;
	fs->nforeign = fs->capforeign = 0;
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
	if (!find_ref(fs, ib->blkno) &&
	    !open_elsewhere(fs, ib->blkno, le32(o2_buf_dinode(ib)->i_generation))) {
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
	o2_orphan_name(ib->blkno, name);
	r = o2_inode_buf(fs, fs->sys.orphan_dir, &ob);
	if (r < 0)
		return r;
	r = o2_dir_add(t, fs, ob, name, 16, ib->blkno, o2_mode_ftype(le16(di->i_mode)));
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

/* The inodes this slot's orphan directory names, into l. */
static int collect_orphans(struct o2_fs *fs, struct orphan_list *l)
{
	struct o2_inode *od;
	int r = o2_inode_get(fs, fs->sys.orphan_dir, &od);

	if (r < 0)
		return r;
	r = o2_dir_iterate(fs, od, collect_orphan, l);
	o2_inode_unref(od);
	return r;
}

int o2_orphans_process(struct o2_fs *fs)
{
	struct orphan_list l = { 0 };
	int r = collect_orphans(fs, &l);

	for (size_t i = 0; i < l.n && r >= 0; i++) {
		/* one fscore cannot free (xattrs in buckets, say)
		 * waits in the orphan directory: the volume still mounts;
		 * one open here goes at its last close */
		if (!find_ref(fs, l.v[i]))
			r = reap_or_wait(fs, l.v[i]);
	}
	free(l.v);
	return r < 0 ? r : 0;
}

int o2_orphans_list(struct o2_fs *fs, uint64_t **ret, size_t *n)
{
	struct orphan_list l = { 0 };
	int r = collect_orphans(fs, &l);

	*ret = NULL;
	*n = 0;
	for (unsigned i = 0; i < fs->nforeign && r >= 0; i++) {
		struct o2_dirent de = { .ino = fs->foreign[i] };

		r = collect_orphan(&de, &l);
	}
	if (r < 0) {
		free(l.v);
		return r;
	}
	/* none open here (their last close decides), none twice */
	size_t k = 0;

	for (size_t i = 0; i < l.n; i++) {
		bool dup = false;

		for (size_t j = 0; j < k && !dup; j++)
			dup = l.v[j] == l.v[i];
		if (!dup && !find_ref(fs, l.v[i]))
			l.v[k++] = l.v[i];
	}
	*ret = l.v;
	*n = k;
	return 0;
}

/* ---- operations ---- */

int o2_check_name(const char *name, size_t len)
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

int o2_name_need(struct o2_fs *fs, uint64_t dir, const char *name, size_t len,
		 struct o2_resv *want)
{
	struct o2_buf *dib;
	struct o2_dir_slot f;
	int r = o2_inode_buf(fs, dir, &dib);

	if (r < 0)
		return r;
	/* a name that is there already is the answer, whatever the space */
	r = o2_dir_find(fs, dib, name, len, &f);
	if (r == 0)
		r = -EEXIST;
	else if (r == -ENOENT)
		r = o2_dir_add_need(fs, dib, name, len, want);
	o2_brelse(fs, dib);
	return r;
}

static int make_node(struct o2_fs *fs, uint64_t dir, const char *name, size_t len,
		     uint16_t mode, const struct o2_new_inode *ni, const char *target,
		     uint64_t *ret_ino)
{
	struct o2_trans *t;
	struct o2_buf *dib = NULL, *ib = NULL;
	struct o2_dir_slot f;
	size_t tlen = target ? strlen(target) : 0;
	int r, e;

	if (!fs->journal)
		return -EROFS;
	r = o2_check_name(name, len);
	if (r < 0)
		return r;
	if (target && (tlen == 0 || tlen >= 4096))
		return tlen ? -ENAMETOOLONG : -ENOENT;
	struct o2_acl_inherit acl = { 0 };
	/* the inode, a name, a directory's first block or a long symlink's target */
	struct o2_resv want = { .inodes = 1 };

	if (!target) /* symlinks take no ACL, as in the kernel */
		r = o2_acl_inherit_plan(fs, dir, &mode, ni->umask, &acl);
	if (r < 0)
		return r;
	bool acls = acl.access || acl.deflt;

	r = o2_name_need(fs, dir, name, len, &want);
	uint32_t own = 0; /* clusters the new inode holds */

	if (S_ISDIR(mode) && !o2_has_incompat(fs, O2_FEATURE_INCOMPAT_INLINE_DATA)) {
		/* a block of its own, and its index root */
		own = 1;
		if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_INDEXED_DIRS))
			want.meta += 1;
	} else if (target && tlen >= o2_fast_symlink_max(fs->bs)) {
		want.run = (uint32_t)((tlen + fs->cs - 1) >> fs->cbits);
		own = want.run;
	}
	want.clusters += own;
	/* the owner's and group's quotas take the inode and its clusters */
	if (r == 0)
		r = o2_quota_check(fs, ni->uid, ni->gid, (uint64_t)own << fs->cbits, 1, NULL);
	if (acls) /* a block of attributes, if the inode cannot hold them */
		want.meta += 1;
	/* an ACL past an xattr's inline 80 bytes keeps its value in a cluster */
	want.clusters += (acl.access_len > 80) + (acl.deflt_len > 80);
	if (r == 0)
		r = o2_reserve(fs, &want, NULL);
	if (r < 0) {
		o2_acl_inherit_free(&acl);
		return r;
	}

	r = o2_trans_begin(fs, O2_NAMEI_CREDITS + (acls ? 2 * O2_XATTR_SET_CREDITS : 0), &t);
	if (r < 0) {
		o2_acl_inherit_free(&acl);
		return r;
	}
	r = o2_inode_buf(fs, dir, &dib);
	if (r < 0)
		goto end;
	r = o2_dir_check_changeable(fs, dib);
	if (r < 0)
		goto rel;
	if (S_ISDIR(mode) && o2_links_of(o2_buf_dinode(dib)) >= 32000 &&
	    !o2_has_incompat(fs, O2_FEATURE_INCOMPAT_INDEXED_DIRS)) {
		r = -EMLINK;
		goto rel;
	}
	r = o2_dir_find(fs, dib, name, len, &f);
	if (r == 0)
		r = -EEXIST;
	if (r != -ENOENT)
		goto rel;
	r = o2_new_inode(t, fs, mode, ni->uid, ni->gid, ni->rdev, &ib);
	if (r < 0)
		goto rel;
	struct o2_dinode *di = o2_buf_dinode(ib);

	if (S_ISDIR(mode)) {
		r = o2_dir_init(t, fs, ib, dir);
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
		r = o2_dir_add(t, fs, dib, name, len, ib->blkno, o2_mode_ftype(mode));
	if (r == 0) {
		struct o2_dinode *pd = o2_buf_dinode(dib);

		r = o2_trans_add(t, dib);
		if (S_ISDIR(mode))
			o2_set_links(pd, o2_links_of(pd) + 1);
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
	struct o2_dir_slot f;
	int r, e;

	if (!fs->journal)
		return -EROFS;
	r = o2_check_name(name, len);
	if (r < 0)
		return r;
	struct o2_resv want = { 0 };

	r = o2_name_need(fs, dir, name, len, &want);
	if (r == 0)
		r = o2_reserve(fs, &want, NULL);
	if (r < 0)
		return r;
	r = o2_trans_begin(fs, O2_NAMEI_CREDITS, &t);
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
	if (o2_links_of(di) == 0 || (le32(di->i_flags) & O2_FL_ORPHANED)) {
		r = -ENOENT;
		goto rel;
	}
	if (o2_links_of(di) >= 32000) {
		r = -EMLINK;
		goto rel;
	}
	r = o2_dir_find(fs, dib, name, len, &f);
	if (r == 0)
		r = -EEXIST;
	if (r != -ENOENT)
		goto rel;
	r = o2_dir_add(t, fs, dib, name, len, ino, o2_mode_ftype(le16(di->i_mode)));
	if (r == 0)
		r = o2_trans_add(t, ib);
	if (r == 0) {
		o2_set_links(di, o2_links_of(di) + 1);
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
		     size_t len, const struct o2_dir_slot *f, bool *ret_delete)
{
	struct o2_buf *ib;
	int r = o2_inode_buf(fs, f->ino, &ib);

	*ret_delete = false;
	if (r < 0)
		return r;
	struct o2_dinode *di = o2_buf_dinode(ib);
	bool isdir = S_ISDIR(le16(di->i_mode));

	r = o2_check_writable(fs, di, isdir || o2_links_of(di) <= 1);
	if (r == 0)
		r = o2_dir_remove(t, fs, dib, name, len, f);
	if (r == 0)
		r = o2_trans_add(t, ib);
	if (r == 0)
		r = o2_trans_add(t, dib);
	if (r == 0) {
		struct o2_dinode *pd = o2_buf_dinode(dib);
		uint32_t links = o2_links_of(di);

		if (isdir) {
			o2_set_links(pd, o2_links_of(pd) - 1);
			links = 0;
		} else if (links) {
			links--;
		}
		o2_set_links(di, links);
		o2_touch(fs, di, false, true);
		o2_touch(fs, pd, true, true);
		if (!links)
			r = drop_last_link(t, fs, ib, ret_delete);
	}
	o2_brelse(fs, ib);
	return r;
}

/*
 * Add to want the orphan entry of the inode name in dir names (it may lose
 * its last link): its own entry, since in an indexed orphan directory the
 * name's hash picks the leaf, and another name's may have room where its
 * own is full and must be rebuilt larger.
 */
static int resv_orphan_of(struct o2_fs *fs, uint64_t dir, const char *name, size_t len,
			  struct o2_resv *want)
{
	struct o2_buf *dib;
	struct o2_dir_slot f;
	int r = o2_inode_buf(fs, dir, &dib);

	if (r == 0) {
		r = o2_dir_find(fs, dib, name, len, &f);
		o2_brelse(fs, dib);
	}
	return r < 0 ? r : o2_resv_orphan(fs, f.ino, want);
}

static int remove_name(struct o2_fs *fs, uint64_t dir, const char *name, size_t len, bool want_dir)
{
	struct o2_trans *t;
	struct o2_buf *dib = NULL;
	struct o2_dir_slot f;
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
	/* the inode may move to the orphan directory: from what deletions have set aside */
	struct o2_resv want = { .freeing = true };

	r = resv_orphan_of(fs, dir, name, len, &want);
	if (r == 0)
		r = o2_reserve(fs, &want, NULL);
	if (r < 0)
		return r;
	r = o2_trans_begin_freeing(fs, UNLINK_CREDITS, &t);
	if (r < 0)
		return r;
	r = o2_inode_buf(fs, dir, &dib);
	if (r == 0)
		r = o2_dir_find(fs, dib, name, len, &f);
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
		r = reap_after(fs, f.ino);
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
		struct o2_dir_slot f;
		int r;

		if (dir == ino)
			return 1;
		if (dir == fs->info.root_blkno)
			return 0;
		r = o2_inode_buf(fs, dir, &b);
		if (r < 0)
			return r;
		r = o2_dir_find(fs, b, "..", 2, &f);
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
	struct o2_dir_slot f;
	int r = o2_inode_buf(fs, dir, &b);

	if (r < 0)
		return r;
	r = o2_dir_find(fs, b, "..", 2, &f);
	if (r == 0)
		r = o2_dir_retarget(t, fs, b, &f, parent, O2_FT_DIR);
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

		o2_set_links(di, (uint32_t)((int64_t)o2_links_of(di) + delta));
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
	struct o2_dir_slot of, nf;
	bool have_new, del = false;
	int r, e;

	if (!fs->journal)
		return -EROFS;
	if ((flags & O2_RENAME_NOREPLACE) && (flags & O2_RENAME_EXCHANGE))
		return -EINVAL;
	r = o2_check_name(oldname, oldlen);
	if (r == 0)
		r = o2_check_name(newname, newlen);
	if (r == -EEXIST)
		r = -EBUSY; /* "." or ".." */
	if (r < 0)
		return r;
	/*
	 * The new name (unless it replaces one, which takes nothing), and an
	 * orphan entry for an inode it replaces.
	 */
	struct o2_resv want = { 0 };

	r = o2_name_need(fs, newdir, newname, newlen, &want);
	if (r == -EEXIST)
		r = resv_orphan_of(fs, newdir, newname, newlen, &want);
	if (r == 0)
		r = o2_reserve(fs, &want, NULL);
	if (r < 0)
		return r;
	r = o2_trans_begin_freeing(fs, 2 * O2_NAMEI_CREDITS + FREE_IN_PLACE_CREDITS, &t);
	if (r < 0)
		return r;
	r = o2_inode_buf(fs, olddir, &odb);
	if (r == 0)
		r = o2_inode_buf(fs, newdir, &ndb);
	if (r == 0)
		r = o2_dir_find(fs, odb, oldname, oldlen, &of);
	if (r < 0)
		goto rel;
	r = o2_dir_find(fs, ndb, newname, newlen, &nf);
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
		r = o2_dir_retarget(t, fs, odb, &of, nf.ino, nf.type);
		if (r == 0)
			r = o2_dir_retarget(t, fs, ndb, &nf, of.ino, of.type);
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
					      ndir || o2_links_of(o2_buf_dinode(tb)) <= 1);
			o2_brelse(fs, tb);
		}
		if (r < 0)
			goto rel;
		r = o2_dir_retarget(t, fs, ndb, &nf, of.ino, of.type);
		if (r == 0) {
			struct o2_dir_slot gone = nf;
			struct o2_buf *gb;

			r = o2_inode_buf(fs, gone.ino, &gb);
			if (r == 0) {
				struct o2_dinode *gd = o2_buf_dinode(gb);
				uint32_t links = o2_links_of(gd);

				r = o2_trans_add(t, gb);
				if (r == 0) {
					links = ndir ? 0 : (links ? links - 1 : 0);
					o2_set_links(gd, links);
					o2_touch(fs, gd, false, true);
					if (ndir)
						o2_set_links(o2_buf_dinode(ndb),
							     o2_links_of(o2_buf_dinode(ndb)) - 1);
					if (!links)
						r = drop_last_link(t, fs, gb, &del);
				}
				o2_brelse(fs, gb);
			}
		}
	} else {
		r = o2_dir_add(t, fs, ndb, newname, newlen, of.ino, of.type);
	}
	if (r < 0)
		goto rel;
	/* the old name goes (look it up again: adding may have moved it) */
	r = o2_dir_find(fs, odb, oldname, oldlen, &of);
	if (r == 0)
		r = o2_dir_remove(t, fs, odb, oldname, oldlen, &of);
	if (r == 0 && odir && olddir != newdir) {
		r = set_dotdot(t, fs, of.ino, newdir);
		if (r == 0)
			r = o2_trans_add(t, odb);
		if (r == 0)
			r = o2_trans_add(t, ndb);
		if (r == 0) {
			o2_set_links(o2_buf_dinode(odb), o2_links_of(o2_buf_dinode(odb)) - 1);
			o2_set_links(o2_buf_dinode(ndb), o2_links_of(o2_buf_dinode(ndb)) + 1);
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
		r = reap_after(fs, nf.ino);
	return r;
}
