// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The FUSE low-level operations of a mounted volume.
 *
 * Inode numbers: FUSE's root is node 1; every other node id is the OCFS2
 * inode number (its block number), which is never 1.  The generation is
 * the inode's i_generation, so a reused block is a new inode to the kernel.
 *
 * Lookup counts: each reply that hands the kernel a node (lookup, create,
 * mknod, mkdir, symlink, link, readdirplus) counts one lookup; forget takes
 * them back.  While the kernel holds a node we hold an fscore open
 * reference on it, so a file unlinked while open (or merely still known to
 * the kernel) lives on as an orphan until the kernel forgets it.
 *
 * Caching: on one node every change passes through this mount, so the
 * kernel's caches stay right; entry and attribute timeouts are options
 * (1 s by default) and page caches are kept across opens.  On a clustered
 * volume another node may change anything at any time: the kernel caches
 * nothing for now (timeouts 0, direct I/O), and every operation takes its
 * cluster locks first ("cluster locks" below).
 *
 * Every fscore call runs under the volume lock; replies are sent after it
 * is released.
 *
 * This file is the operations table and nothing else: the sessions that
 * run it and what they read off the wire are session.c's, and requests
 * that come from the control channel rather than the kernel (reflink.c)
 * work on the volume directly.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <linux/fuse.h>

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "cluster.h"
#include "flock.h"
#include "locktab.h"
#include "ocfs2d.h"

#define NAME_MAX_O2 255
#define COPY_CHUNK (1u << 20)

static struct volume *vol_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static uint64_t to_blk(const struct volume *v, fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? v->root : (uint64_t)ino;
}

static fuse_ino_t to_fuse(const struct volume *v, uint64_t blk)
{
	return (fuse_ino_t)volume_node_id(v, blk);
}

static void lock(struct volume *v)
{
	g_mutex_lock(&v->lock);
}

static void unlock(struct volume *v)
{
	g_mutex_unlock(&v->lock);
}

/* The same, after the lock was released: the message is read under it. */
static int note(struct volume *v, const char *op, int r)
{
	if (r < 0) {
		g_mutex_lock(&v->lock);
		volume_note_locked(v, op, r);
		g_mutex_unlock(&v->lock);
	}
	return r;
}

/* ---- lookup counts (under the lock) ---- */

static int node_ref(struct volume *v, uint64_t blk, uint32_t gen, bool dir)
{
	uint64_t *n = g_hash_table_lookup(v->nodes, &blk);

	if (n) {
		n[1]++;
		n[2] = gen | (dir ? NODE_DIR : 0);
		return 0;
	}
	int r = o2_inode_open_ref(v->fs, blk);

	if (r < 0)
		return r;
	n = g_new(uint64_t, 4);
	n[0] = blk;
	n[1] = 1;
	n[2] = gen | (dir ? NODE_DIR : 0);
	n[3] = 0;
	g_hash_table_insert(v->nodes, n, n);
	return 0;
}

/* Bound on v->gens: past it, it starts again (it only saves reads). */
#define GENS_MAX 65536

/* blk, forgotten by the kernel, was gen with its lock still cached here. */
static void gen_remember(struct volume *v, uint64_t blk, uint32_t gen)
{
	uint64_t *g = g_new(uint64_t, 2);

	if (g_hash_table_size(v->gens) >= GENS_MAX)
		g_hash_table_remove_all(v->gens);
	g[0] = blk;
	g[1] = gen;
	g_hash_table_replace(v->gens, g, g);
}

/*
 * blk's generation known without reading the inode unlocked: the one the
 * kernel was handed (or had when it forgot the inode), if this node still
 * holds that lock (a try that asks nothing) and the inode, read under it,
 * is still that one in use.  Nobody else can free the inode while the
 * lock is here; this node's own free shows in its cached block.  Under
 * the volume mutex.  false: read it unlocked (fuseops_gen_unlocked).
 */
static bool known_gen(struct volume *v, uint64_t blk, uint32_t *gen)
{
	const uint64_t *n = g_hash_table_lookup(v->nodes, &blk);
	const uint64_t *g = n ? NULL : g_hash_table_lookup(v->gens, &blk);
	struct cluster_hold h = { 0 };
	struct o2_inode *in;
	bool ok;

	if (!v->cluster || (!n && !g))
		return false;
	uint32_t cand = n ? (uint32_t)n[2] : (uint32_t)g[1];

	if (cluster_lock_inode_cached(v->cluster, blk, cand, &h) < 0)
		return false;
	ok = o2_inode_get(v->fs, blk, &in) == 0;
	if (ok) {
		const struct o2_inode_info *ii = o2_inode_info(in);

		ok = ii->generation == cand && (ii->flags & O2_INODE_VALID) &&
		     !(ii->flags & O2_INODE_ORPHANED);
		o2_inode_unref(in);
	}
	cluster_unlock(&h);
	if (ok)
		*gen = cand;
	return ok;
}

static void node_unref(struct volume *v, uint64_t blk, uint64_t count)
{
	uint64_t *n = g_hash_table_lookup(v->nodes, &blk);

	if (!n)
		return;
	n[1] = count >= n[1] ? 0 : n[1] - count;
	if (n[1])
		return;
	/*
	 * Its inode and open locks stay cached: the kernel forgets an inode
	 * whenever a new epoch makes it look its name up again (and where it
	 * caches no name, as soon as it stops using it), and the next system
	 * call would pay for them again.  The lock cache drops idle locks
	 * beyond lock_cache=N, least recently used first, and a node deleting
	 * the inode asks for its open lock (cluster_open_elsewhere).
	 */
	uint32_t gen = (uint32_t)n[2];

	g_hash_table_remove(v->nodes, &blk);
	if (v->fs) {
		/*
		 * Under the inode's lock if this node still holds it (a try that
		 * asks nothing), else without it (fuseops_gen_unlocked), which
		 * would leave the cached inode to be read again at its next use:
		 * a new epoch has the kernel forget every inode at once.
		 */
		struct cluster_hold h = { 0 };
		bool held = !v->cluster || cluster_lock_inode_cached(v->cluster, blk, gen, &h) == 0;

		if (!held)
			o2_fs_unlocked_reads(v->fs, true);
		int r = o2_inode_close_ref(v->fs, blk);

		if (!held)
			o2_fs_unlocked_reads(v->fs, false);
		if (h.res)
			gen_remember(v, blk, gen);
		cluster_unlock(&h);
		if (r < 0)
			volume_note_locked(v, "freeing an unlinked inode", r);
	}
}

void fuseops_forget_all(struct volume *v)
{
	GHashTableIter it;
	gpointer key;

	g_hash_table_iter_init(&it, v->nodes);
	while (g_hash_table_iter_next(&it, &key, NULL)) {
		uint64_t blk = *(uint64_t *)key;

		if (v->fs)
			o2_inode_close_ref(v->fs, blk);
		g_hash_table_iter_remove(&it);
	}
}

/* ---- cluster locks ----
 *
 * On a clustered volume (docs/ARCHITECTURE.md, "Cluster locks") every
 * operation takes the M lock of each inode it reads (PR) or changes (EX)
 * before it takes the volume lock, and drops them after its reply is
 * ready; the lock cache keeps them between operations, so this costs no
 * message while no other node wants them.  One order for every node, so
 * that no two operations wait for each other: the rename lock (renames
 * between directories); directories before the files in them, parents
 * before children, two directories or two files in block order; and for a
 * change, after every inode's, the locks of this slot's allocators and
 * orphan directory (every node writes on a slot of its own, and keeps
 * them cached).  The global bitmap's and other slots' allocators' locks
 * come last, and only when fscore asks for one (retry_locked, the one
 * place that takes them: cluster.h, struct held, keeps their order).  An
 * operation that learns an inode from a name (lookup, unlink, rename)
 * reads the name under its directory's lock, drops the volume lock,
 * takes the inode's, and checks the name again.  Nothing here runs on a
 * local volume.
 */

/* A change takes EX; a read-only mount only ever reads. */
static int change_mode(const struct volume *v)
{
	return v->opts.ro ? O2LT_PR : O2LT_EX;
}

/*
 * blk's generation as the kernel knows it (under the lock): lock names
 * carry it, so a reused block is a new lock.  Read from the inode for one
 * the kernel was not handed by us (0 if unreadable: the operation fails
 * on the inode anyway).
 */
static uint32_t node_gen(struct volume *v, uint64_t blk)
{
	const uint64_t *n = g_hash_table_lookup(v->nodes, &blk);
	uint32_t gen = 0;

	if (blk == v->root)
		return v->root_gen;
	if (blk == v->bitmap)
		return v->bitmap_gen;
	if (n)
		return (uint32_t)n[2];
	if (!known_gen(v, blk, &gen))
		fuseops_gen_unlocked(v, blk, &gen);
	return gen;
}

/*
 * Another node may change a block this one reads without its lock at any
 * moment, and nothing drops the copy before the lock is next taken here
 * (only losing a lock drops cached blocks): such reads go to the device
 * and leave nothing a later read trusts (o2_fs_unlocked_reads).  Found: a
 * FORGET read a freed inode, another node reused it, and a lookup here
 * named the new file's lock from the stale copy ("not in use").
 */
int fuseops_gen_unlocked(struct volume *v, uint64_t blk, uint32_t *gen)
{
	struct o2_inode *in;
	int r;

	*gen = 0;
	o2_fs_unlocked_reads(v->fs, true);
	r = o2_inode_get(v->fs, blk, &in);
	if (r == 0) {
		*gen = o2_inode_info(in)->generation;
		o2_inode_unref(in);
	}
	o2_fs_unlocked_reads(v->fs, false);
	return r;
}

/*
 * Pages.  The kernel keeps a file's pages while this node holds its lock
 * (fs_invalidate makes it drop them before the lock goes lower); the
 * invalidation waits for page locks that reads and writes in flight hold,
 * so those take the lock with CLUSTER_ADMIT and pass while it runs.  A
 * write in flight also holds page locks while it waits for EX, and an
 * invalidation of a PR lock could not let it pass: so a node that has a
 * file open for writing takes its lock EX for everything (even a read or
 * a stat), and lowers it from EX straight to NL (CLUSTER_WRITER) - it
 * never sits at PR while a write may come.  Directories have no pages.
 */
static int hold_gen(struct volume *v, struct held *hd, uint64_t blk, uint32_t gen, int mode)
{
	unsigned flags = hd->admit ? CLUSTER_ADMIT : 0;

	if (blk != v->bitmap && blk != v->root) {
		lock(v);
		const uint64_t *n = g_hash_table_lookup(v->nodes, &blk);
		bool dir = n && (n[2] & NODE_DIR), writing = n && n[3];

		unlock(v);
		if (!dir && writing && mode == O2LT_PR && !v->opts.ro)
			mode = O2LT_EX;
		if (!dir && mode == O2LT_EX)
			flags |= CLUSTER_WRITER;
	}
	for (unsigned i = 0; i < hd->n; i++)
		if (hd->blk[i] == blk && hd->h[i].mode >= mode)
			return 0;
	if (hd->n == HELD_MAX)
		return -EINVAL;
	cluster_held_use(hd);
	int r = cluster_lock_inode_flags(v->cluster, blk, gen, mode, flags, &hd->h[hd->n]);

	if (r == 0) {
		hd->blk[hd->n] = blk;
		hd->gen[hd->n] = gen;
		hd->sys[hd->n++] = false;
	}
	return r;
}

static void release(struct held *hd)
{
	cluster_release(hd);
}

/*
 * The one place an operation gets a lock fscore asked for: with the volume
 * lock held, after a call answered -O2_ENEEDLOCK having changed nothing,
 * drop the volume lock, take the system file's lock in its place in the
 * order (hd), and return without the volume lock: 0, the caller runs the
 * call again; -errno, it fails with that.
 */
static int take_wanted(struct volume *v, struct held *hd)
{
	uint64_t blk = 0;
	uint32_t gen = 0;
	bool ex = true;
	struct o2_inode *in;
	int r = -EIO;

	if (v->fs) {
		o2_fs_lock_wanted(v->fs, &blk, &ex);
		r = o2_inode_get(v->fs, blk, &in);
	}
	if (r == 0) {
		gen = o2_inode_info(in)->generation;
		o2_inode_unref(in);
	}
	unlock(v);
	/* a call that keeps asking would never end */
	if (r == 0 && (!v->cluster || ++hd->retries > 4 * HELD_MAX))
		r = -EIO;
	if (r == 0)
		r = cluster_hold_sys(v->cluster, hd, blk, gen, ex ? O2LT_EX : O2LT_PR);
	return r;
}

/*
 * After a call that changed the volume (volume lock held): frees it made
 * into allocators whose locks it did not hold (another slot's) run now,
 * each taking its allocator's lock (the kernel's dealloc context).  They
 * are not the operation's: a failure is logged, not answered.
 */
static void run_deallocs(struct volume *v, struct held *hd)
{
	while (v->cluster && v->fs && o2_fs_deallocs_pending(v->fs)) {
		int r = o2_fs_run_deallocs(v->fs);

		if (r == -O2_ENEEDLOCK) {
			r = take_wanted(v, hd);
			lock(v);
		}
		if (r < 0) {
			volume_note_locked(v, "freeing into another slot's allocator", r);
			break;
		}
	}
}

/*
 * r = call, under the volume lock, run again while fscore stops it for a
 * system file's lock (taken meanwhile), then the frees it left.  The
 * call must change nothing before it may stop so (fscore's promise).
 */
#define RETRY_LOCKED(v, hd, r, call)                                 \
	do {                                                         \
		for (;;) {                                           \
			(r) = (call);                                \
			if ((r) != -O2_ENEEDLOCK) {                  \
				run_deallocs((v), (hd));             \
				break;                               \
			}                                            \
			int wanted_ = take_wanted((v), (hd));        \
			lock(v);                                     \
			if (wanted_ < 0) {                           \
				(r) = wanted_;                       \
				break;                               \
			}                                            \
		}                                                    \
	} while (0)

/*
 * Take the locks of inodes a in mode ma and then b in mode mb (0: none;
 * nodes the kernel knows; one inode named twice is locked once, in the
 * stronger mode), and for a change the global bitmap's last.  0, or
 * -errno with nothing held.
 */
static int hold_seq(struct volume *v, struct held *hd, uint64_t a, int ma, uint64_t b, int mb)
{
	uint32_t ga = 0, gb = 0;
	int r = 0;

	if (!v->cluster)
		return 0;
	if (a == b)
		ma = mb = MAX(ma, mb);
	lock(v);
	if (a)
		ga = node_gen(v, a);
	if (b && b != a)
		gb = node_gen(v, b);
	unlock(v);
	if (a)
		r = hold_gen(v, hd, a, ga, ma);
	if (r == 0 && b && b != a)
		r = hold_gen(v, hd, b, gb, mb);
	/* a change may allocate or free: this slot's allocators' locks last */
	if (r == 0 && (ma == O2LT_EX || mb == O2LT_EX))
		r = cluster_hold_own(v->cluster, hd);
	if (r < 0)
		release(hd);
	return r;
}

int fuseops_run_locked(struct volume *v, struct held *hd, int (*fn)(struct o2_fs *fs, void *arg),
		       void *arg)
{
	int r;

	RETRY_LOCKED(v, hd, r, v->fs ? fn(v->fs, arg) : -EIO);
	return r;
}

/* hold_seq, in block order: two directories, or two files. */
static int hold2(struct volume *v, struct held *hd, uint64_t a, int ma, uint64_t b, int mb)
{
	if (b && (!a || b < a))
		return hold_seq(v, hd, b, mb, a, ma);
	return hold_seq(v, hd, a, ma, b, mb);
}

static int hold(struct volume *v, struct held *hd, int mode, uint64_t a, uint64_t b)
{
	return hold2(v, hd, a, mode, b, mode);
}

/*
 * A rename between two directories first takes the rename lock, as the
 * kernel's does: directories are locked in block order, and a directory
 * moved into another is locked after both, so two such renames at once
 * could lock crossing pairs; no other operation locks two directories
 * that are not parent and child.
 */
static int hold_rename(struct volume *v, struct held *hd, uint64_t from, uint64_t to)
{
	int r;

	if (!v->cluster || from == to || v->opts.ro)
		return 0;
	if (hd->n == HELD_MAX)
		return -EINVAL;
	cluster_held_use(hd);
	r = cluster_lock_rename(v->cluster, &hd->h[hd->n]);
	if (r == 0) {
		hd->blk[hd->n] = 0;
		hd->sys[hd->n++] = false;
	}
	return r;
}

/*
 * The inode that name in dir names now, and its generation (under the
 * lock): 0 and *blk 0 if there is none.
 */
static int name_target(struct volume *v, uint64_t dir, const char *name, uint64_t *blk,
		       uint32_t *gen)
{
	struct o2_inode *d;
	struct o2_dirent de;
	int r = o2_inode_get(v->fs, dir, &d);

	*blk = 0;
	*gen = 0;
	if (r < 0)
		return r;
	r = o2_dir_lookup(v->fs, d, name, strlen(name), &de);
	o2_inode_unref(d);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	r = known_gen(v, de.ino, gen) ? 0 : fuseops_gen_unlocked(v, de.ino, gen);
	if (r == 0)
		*blk = de.ino;
	return r;
}

/*
 * Lock, in mode, the inodes that names[i] in dirs[i] name (n of them),
 * whose directories hd already holds: read the names under the volume
 * lock, lock what they name (block order), and read them again until they
 * name what is locked.  Returns with the volume lock held (0), or -errno
 * without it.
 */
static int hold_targets(struct volume *v, struct held *hd, int mode, unsigned n,
			const uint64_t *dirs, const char *const *names)
{
	if (!v->cluster) {
		lock(v);
		return 0;
	}
	for (int tries = 0;; tries++) {
		uint64_t blk[2] = { 0, 0 };
		uint32_t gen[2] = { 0, 0 };
		bool same = true;
		int r = 0;

		lock(v);
		for (unsigned i = 0; i < n && r == 0; i++)
			r = name_target(v, dirs[i], names[i], &blk[i], &gen[i]);
		for (unsigned i = 0; i < n && r == 0; i++) {
			bool have = !blk[i];

			for (unsigned j = 0; j < hd->n; j++)
				have |= hd->blk[j] == blk[i];
			same &= have;
		}
		if (r == 0 && same)
			return 0;
		unlock(v);
		if (r < 0)
			return r;
		if (tries == 8)
			return -EAGAIN; /* the names keep changing under us */
		if (n == 2 && blk[1] && (!blk[0] || blk[1] < blk[0])) {
			uint64_t tb = blk[0];
			uint32_t tg = gen[0];

			blk[0] = blk[1], gen[0] = gen[1];
			blk[1] = tb, gen[1] = tg;
		}
		/* system files' locks stay after the inodes': let them go meanwhile */
		bool sys = cluster_drop_sys(hd);

		for (unsigned i = 0; i < n && r == 0; i++)
			if (blk[i])
				r = hold_gen(v, hd, blk[i], gen[i], mode);
		if (r == 0 && sys)
			r = cluster_hold_own(v->cluster, hd);
		if (r < 0)
			return r;
	}
}

/* ---- attributes ---- */

static void fill_stat(const struct volume *v, const struct o2_inode_info *in, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = in->blkno;
	st->st_mode = in->mode;
	st->st_nlink = in->links;
	st->st_uid = in->uid;
	st->st_gid = in->gid;
	st->st_rdev = (dev_t)in->rdev;
	st->st_size = (off_t)in->size;
	st->st_blksize = v->cluster_size < 65536 ? v->cluster_size : 65536;
	st->st_blocks = (blkcnt_t)((uint64_t)in->clusters * (v->cluster_size / 512));
	st->st_atim.tv_sec = in->atime.sec;
	st->st_atim.tv_nsec = in->atime.nsec;
	st->st_mtim.tv_sec = in->mtime.sec;
	st->st_mtim.tv_nsec = in->mtime.nsec;
	st->st_ctim.tv_sec = in->ctime.sec;
	st->st_ctim.tv_nsec = in->ctime.nsec;
}

/* Attributes of blk (under the lock). */
static int get_stat(struct volume *v, uint64_t blk, struct stat *st, uint32_t *gen)
{
	struct o2_inode *ino;
	int r = o2_inode_get(v->fs, blk, &ino);

	if (r < 0)
		return r;
	const struct o2_inode_info *in = o2_inode_info(ino);

	if (!(in->flags & O2_INODE_VALID)) {
		o2_inode_unref(ino);
		return -ESTALE;
	}
	fill_stat(v, in, st);
	if (gen)
		*gen = in->generation;
	o2_inode_unref(ino);
	return 0;
}

/* An entry for blk, counting one lookup (under the lock). */
static int make_entry(struct volume *v, uint64_t blk, struct fuse_entry_param *e)
{
	uint32_t gen = 0;
	int r;

	memset(e, 0, sizeof(*e));
	r = get_stat(v, blk, &e->attr, &gen);
	if (r == 0)
		r = node_ref(v, blk, gen, S_ISDIR(e->attr.st_mode));
	if (r < 0)
		return r;
	e->ino = to_fuse(v, blk);
	e->generation = gen;
	e->attr_timeout = v->opts.attr_timeout;
	e->entry_timeout = v->opts.entry_timeout;
	return 0;
}

/*
 * While this node has an inode open it holds the inode's open lock (O) in
 * PR, so that no node frees it meanwhile (the one that removes its last
 * name keeps it as an orphan instead); once held, the inode must still be
 * the one the kernel has, which is checked under its lock: EX for an open
 * that writes or truncates (open_writer and O_TRUNC then find it held,
 * rather than ask again to convert), else PR.  NULL on a local volume.
 */
static int hold_open(struct volume *v, uint64_t blk, const struct fuse_file_info *fi,
		     struct cluster_hold **ret)
{
	bool writes = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
	struct held hd = { .n = 0 };
	struct cluster_hold *h;
	struct stat st;
	uint32_t gen, now = 0;
	int r;

	*ret = NULL;
	if (!v->cluster)
		return 0;
	h = g_new0(struct cluster_hold, 1);
	lock(v);
	gen = node_gen(v, blk);
	unlock(v);
	r = cluster_open_hold(v->cluster, blk, gen, h);
	if (r == 0)
		r = hold(v, &hd, writes ? change_mode(v) : O2LT_PR, blk, 0);
	if (r == 0) {
		lock(v);
		r = get_stat(v, blk, &st, &now);
		unlock(v);
		release(&hd);
		if (r == 0 && now != gen)
			r = -ESTALE;
	}
	if (r < 0) {
		cluster_unlock(h);
		g_free(h);
		return r;
	}
	*ret = h;
	return 0;
}

static void release_open(struct cluster_hold *h)
{
	if (h) {
		cluster_unlock(h);
		g_free(h);
	}
}

static void reply_entry_or_err(fuse_req_t req, int r, const struct fuse_entry_param *e)
{
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_entry(req, e);
}

static bool name_ok(const char *name, int *r)
{
	size_t len = strlen(name);

	*r = len > NAME_MAX_O2 ? -ENAMETOOLONG : 0;
	return !*r;
}

/* ---- session ---- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct volume *v = userdata;

	/* bigger requests: fewer round trips for sequential I/O */
	conn->max_write = OCFS2D_MAX_WRITE;
	conn->max_readahead = OCFS2D_MAX_WRITE;
	if (conn->capable & FUSE_CAP_SPLICE_READ)
		conn->want &= ~FUSE_CAP_SPLICE_READ;
	/* readdirplus: attributes where their locks are held (do_readdir) */
	conn->want |= conn->capable & FUSE_CAP_READDIRPLUS;
	conn->want |= conn->capable & FUSE_CAP_ASYNC_READ;
	/*
	 * writeback_cache (local volumes, volume.c): writes stay in the
	 * kernel's pages and reach us in batches, at fsync, close and the
	 * kernel's own write-back, with the kernel's times and sizes.
	 * Otherwise every write is a request, answered when it is ours.
	 */
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	if (v->opts.writeback_cache) {
		if (conn->capable & FUSE_CAP_WRITEBACK_CACHE) {
			conn->want |= FUSE_CAP_WRITEBACK_CACHE;
		} else {
			g_warning("%s: the kernel offers FUSE no write-back cache: writes go "
				  "through", v->device);
			lock(v);
			v->opts.writeback_cache = false;
			unlock(v);
		}
	}
	/*
	 * Opening a file needs nothing from us (lookups hold the inode, page
	 * caches are kept): let the kernel open and release files without a
	 * round trip each.  O_TRUNC then reaches us as a setattr, as it must
	 * once open is not ours.  Closing has nothing to flush either: flush
	 * is left unimplemented, so the kernel stops sending it.
	 */
	if ((conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) && !v->cluster) {
		conn->want |= FUSE_CAP_NO_OPEN_SUPPORT;
		conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
		v->no_open = true;
	}
	conn->time_gran = 1;
	/*
	 * acl: the kernel enforces POSIX ACLs (asking us for them), and leaves
	 * the umask to us, since a default ACL replaces it.
	 */
	if (v->opts.acl) {
		if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK)) {
			conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
			v->acl = true;
		} else {
			g_warning("%s: the kernel offers no POSIX ACL support to FUSE: mounted "
				  "without ACLs", v->device);
		}
	}
}

/*
 * A lookup on a clustered volume: the name under the directory's lock,
 * then the inode's attributes under its own, never both at once (as the
 * kernel's lookup does, so that no node waits for an inode lock while it
 * holds a directory's).  If the name moved in between, look again.
 */
static int cluster_lookup(struct volume *v, uint64_t dir, const char *name,
			  struct fuse_entry_param *e)
{
	for (int tries = 0; tries < 8; tries++) {
		struct held hd = { .n = 0 };
		uint64_t blk;
		uint32_t gen;
		int r = hold(v, &hd, O2LT_PR, dir, 0);

		if (r < 0)
			return r;
		lock(v);
		r = name_target(v, dir, name, &blk, &gen);
		unlock(v);
		release(&hd);
		if (r == 0 && !blk)
			r = -ENOENT;
		if (r == 0)
			r = hold_gen(v, &hd, blk, gen, O2LT_PR);
		if (r < 0)
			return r;
		lock(v);
		r = make_entry(v, blk, e);
		if (r == 0 && e->generation != gen) {
			node_unref(v, blk, 1); /* freed and reused since: not this one */
			r = -ESTALE;
		}
		unlock(v);
		release(&hd);
		if (r != -ESTALE)
			return r;
	}
	return -ESTALE;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct volume *v = vol_of(req);
	struct fuse_entry_param e;
	struct o2_inode *dir;
	struct o2_dirent de;
	int r;

	if (!name_ok(name, &r)) {
		fuse_reply_err(req, -r);
		return;
	}
	if (v->cluster) {
		r = cluster_lookup(v, to_blk(v, parent), name, &e);
		goto reply;
	}
	lock(v);
	r = o2_inode_get(v->fs, to_blk(v, parent), &dir);
	if (r == 0) {
		r = o2_dir_lookup(v->fs, dir, name, strlen(name), &de);
		o2_inode_unref(dir);
	}
	if (r == 0)
		r = make_entry(v, de.ino, &e);
	unlock(v);
reply:
	if (r == -ENOENT) {
		/* a negative entry the kernel may cache like a positive one */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = v->opts.entry_timeout;
		fuse_reply_entry(req, &e);
		return;
	}
	reply_entry_or_err(req, note(v, "lookup", r), &e);
}

/*
 * The last reference to an orphan frees it; on a clustered volume fscore
 * leaves that to the ticker, which holds the global bitmap's lock for it.
 */
static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct volume *v = vol_of(req);

	lock(v);
	for (size_t i = 0; i < count; i++)
		node_unref(v, to_blk(v, forgets[i].ino), forgets[i].nlookup);
	unlock(v);
	fuse_reply_none(req);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct fuse_forget_data one = { .ino = ino, .nlookup = nlookup };

	op_forget_multi(req, 1, &one);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct volume *v = vol_of(req);
	struct held hd = { .n = 0 };
	struct stat st;
	int r = hold(v, &hd, O2LT_PR, to_blk(v, ino), 0);
	if (r == 0) {
		lock(v);
		r = get_stat(v, to_blk(v, ino), &st, NULL);
		unlock(v);
		release(&hd);
	}
	if (r < 0)
		fuse_reply_err(req, -note(v, "getattr", r));
	else
		fuse_reply_attr(req, &st, v->opts.attr_timeout);
}

static struct o2_timespec now_ts(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (struct o2_timespec){ ts.tv_sec, (uint32_t)ts.tv_nsec };
}

static struct o2_timespec to_ts(const struct timespec *t)
{
	return (struct o2_timespec){ t->tv_sec, (uint32_t)t->tv_nsec };
}

/*
 * Set-ID bits and file capabilities on write (FUSE_HANDLE_KILLPRIV_V2).
 *
 * Without it the kernel asks us for security.capability before every
 * write(2), to see whether the write must drop it: a round trip per write.
 * With it the kernel leaves that to us and asks only when it has not yet
 * seen the file's privileges gone since its attributes were last fetched
 * (SB_NOSEC); in return we drop, as Linux does, S_ISUID and (with group
 * execute) S_ISGID on a write or truncate by a caller without CAP_FSETID
 * (the kernel marks those requests), on any chown, and security.capability
 * on every write.  The flag is agreed, and each write's own flags are
 * read, on the wire, which libfuse does not show us: see session.c.
 */

/* A mode without what a write or chown drops: S_ISUID, and S_ISGID with
 * group execute (without it the bit marks mandatory locking, not privilege). */
static uint16_t setid_killed(uint16_t mode)
{
	mode &= (uint16_t)~S_ISUID;
	if (mode & S_IXGRP)
		mode &= (uint16_t)~S_ISGID;
	return mode;
}

/*
 * Before a write (v->lock held), with KILLPRIV_V2: the set-ID bits go if
 * the kernel says the writer may not keep them, and security.capability
 * always, as Linux drops them on write.  *mode_changed: the kernel's copy
 * of the mode is now stale (it fetched it just before the write).
 */
static int kill_privs(struct volume *v, struct held *hd, uint64_t blk, bool setid,
		      bool *mode_changed)
{
	static const char cap[] = "capability";
	struct o2_inode *in;
	uint16_t mode, dyn;
	int r;

	if (!v->killpriv)
		return 0;
	r = o2_inode_get(v->fs, blk, &in);
	if (r < 0)
		return r;
	mode = o2_inode_info(in)->mode;
	dyn = o2_inode_info(in)->dyn_features;
	o2_inode_unref(in);
	if (!S_ISREG(mode))
		return 0;
	if (setid && setid_killed(mode) != mode) {
		struct o2_setattr a = { .mode = setid_killed(mode) & 07777, .ctime = now_ts() };

		RETRY_LOCKED(v, hd, r, o2_setattr(v->fs, blk, &a, O2_SET_MODE | O2_SET_CTIME));
		if (r < 0)
			return r;
		*mode_changed = true;
	}
	if (!(dyn & O2_INODE_DYN_HAS_XATTR))
		return 0;
	r = (int)o2_xattr_get(v->fs, blk, O2_XATTR_SECURITY, cap, strlen(cap), NULL, 0);
	if (r >= 0)
		RETRY_LOCKED(v, hd, r, o2_xattr_remove(v->fs, blk, O2_XATTR_SECURITY, cap, strlen(cap)));
	return r == -ENODATA ? 0 : r;
}

/* Fold the set-ID bits' dropping into a setattr of inode blk (v->lock held). */
static int kill_setid_mode(struct volume *v, uint64_t blk, struct o2_setattr *a, unsigned *mask)
{
	struct o2_inode *in;
	uint16_t mode;
	int r = o2_inode_get(v->fs, blk, &in);

	if (r < 0)
		return r;
	mode = o2_inode_info(in)->mode;
	o2_inode_unref(in);
	if (S_ISDIR(mode))
		return 0;
	if (*mask & O2_SET_MODE)
		mode = (uint16_t)((mode & S_IFMT) | (a->mode & 07777));
	if (setid_killed(mode) != mode || (*mask & O2_SET_MODE)) {
		a->mode = setid_killed(mode) & 07777;
		*mask |= O2_SET_MODE;
	}
	return 0;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct volume *v = vol_of(req);
	struct o2_setattr a = { 0 };
	unsigned mask = 0;
	uint64_t blk = to_blk(v, ino);
	struct stat st;
	int r;

	if (to_set & FUSE_SET_ATTR_MODE) {
		mask |= O2_SET_MODE;
		a.mode = attr->st_mode & 07777;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		mask |= O2_SET_UID;
		a.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		mask |= O2_SET_GID;
		a.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		mask |= O2_SET_SIZE;
		a.size = (uint64_t)attr->st_size;
	}
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW)) {
		mask |= O2_SET_ATIME;
		a.atime = (to_set & FUSE_SET_ATTR_ATIME_NOW) ? now_ts() : to_ts(&attr->st_atim);
	}
	if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
		mask |= O2_SET_MTIME;
		a.mtime = (to_set & FUSE_SET_ATTR_MTIME_NOW) ? now_ts() : to_ts(&attr->st_mtim);
	}
	if (to_set & FUSE_SET_ATTR_CTIME) {
		mask |= O2_SET_CTIME;
		a.ctime = to_ts(&attr->st_ctim);
	}
	struct held hd = { .n = 0 };

	r = hold(v, &hd, change_mode(v), blk, 0);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	lock(v);
	/*
	 * KILLPRIV_V2: the kernel marks a truncate by a caller without
	 * CAP_FSETID and any chown of a non-directory (FATTR_KILL_SUIDGID).
	 * A setattr that sets nothing is the kernel dropping privileges
	 * before a write, fallocate or copy_file_range by such a caller, or a
	 * chown(-1, -1): it leaves the bits to us.  (It also comes when root
	 * writes a file with a security.capability, which loses that and
	 * here a set-ID bit as well: a file rarely has both.)
	 */
	r = 0;
	if (v->killpriv && ((to_set & FUSE_SET_ATTR_KILL_SUID) || to_set == 0))
		r = kill_setid_mode(v, blk, &a, &mask);
	if (r == 0)
		RETRY_LOCKED(v, &hd, r, o2_setattr(v->fs, blk, &a, mask));
	if (r == 0 && (mask & O2_SET_SIZE) && !(mask & O2_SET_MTIME)) {
		/* truncate(2) changes mtime and ctime even when the size stays */
		struct o2_setattr t = { .mtime = now_ts() };

		t.ctime = t.mtime;
		RETRY_LOCKED(v, &hd, r, o2_setattr(v->fs, blk, &t, O2_SET_MTIME | O2_SET_CTIME));
	}
	if (r == 0)
		r = get_stat(v, blk, &st, NULL);
	unlock(v);
	release(&hd);
	if (r < 0)
		fuse_reply_err(req, -note(v, "setattr", r));
	else
		fuse_reply_attr(req, &st, v->opts.attr_timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct volume *v = vol_of(req);
	char buf[PATH_MAX + 1];
	struct held hd = { .n = 0 };
	struct o2_inode *in;
	int r = hold(v, &hd, O2LT_PR, to_blk(v, ino), 0);

	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	lock(v);
	r = o2_inode_get(v->fs, to_blk(v, ino), &in);
	if (r == 0) {
		r = S_ISLNK(o2_inode_info(in)->mode) ? o2_inode_readlink(v->fs, in, buf, sizeof(buf))
						      : -EINVAL;
		o2_inode_unref(in);
	}
	unlock(v);
	release(&hd);
	if (r < 0)
		fuse_reply_err(req, -note(v, "readlink", r));
	else
		fuse_reply_readlink(req, buf);
}

/*
 * Owner and group of a new inode: the caller's, except that a set-group-ID
 * directory gives its group (and, to new directories, its set-group-ID bit).
 */
static int new_inode(struct volume *v, fuse_req_t req, uint64_t dir, mode_t mode,
		     struct o2_new_inode *ni)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct o2_inode *d;
	int r = o2_inode_get(v->fs, dir, &d);

	if (r < 0)
		return r;
	const struct o2_inode_info *di = o2_inode_info(d);

	ni->mode = (uint16_t)mode;
	ni->uid = ctx->uid;
	ni->gid = ctx->gid;
	ni->rdev = 0;
	/* with ACLs the kernel leaves the umask to us: fscore applies it unless
	 * the directory's default ACL decides */
	ni->umask = v->acl ? (uint16_t)ctx->umask : 0;
	if (di->mode & S_ISGID) {
		ni->gid = di->gid;
		if (S_ISDIR(mode))
			ni->mode |= S_ISGID;
	}
	o2_inode_unref(d);
	return 0;
}

/*
 * Make a node named name in parent: a directory, a symlink to target, or
 * (o2_create) anything else; e gets its entry (one lookup counted).
 */
static int make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		     const char *target, struct fuse_entry_param *e)
{
	struct volume *v = vol_of(req);
	struct o2_new_inode ni;
	uint64_t blk = 0, dir = to_blk(v, parent);
	int r;

	if (!name_ok(name, &r))
		return r;
	if (target && strlen(target) >= PATH_MAX)
		return -ENAMETOOLONG;
	struct held hd = { .n = 0 };

	r = hold(v, &hd, change_mode(v), dir, 0);
	if (r < 0)
		return r;
	lock(v);
	r = new_inode(v, req, dir, mode, &ni);
	ni.rdev = rdev;
	if (r == 0 && S_ISDIR(mode))
		RETRY_LOCKED(v, &hd, r, o2_mkdir(v->fs, dir, name, strlen(name), &ni, &blk));
	else if (r == 0 && S_ISLNK(mode))
		RETRY_LOCKED(v, &hd, r,
			     o2_symlink(v->fs, dir, name, strlen(name), target, &ni, &blk));
	else if (r == 0)
		RETRY_LOCKED(v, &hd, r, o2_create(v->fs, dir, name, strlen(name), &ni, &blk));
	if (r == 0)
		r = make_entry(v, blk, e);
	/*
	 * Nobody else can know of the new inode yet: its locks are taken
	 * as new, no message waited for, and the kernel may keep its
	 * attributes (it forgets them when the lock goes).  A name the lock
	 * cache knew already is only asked for: not cached then.
	 */
	if (r == 0 && v->cluster &&
	    !cluster_made(v->cluster, blk, (uint32_t)e->generation, S_ISREG(mode)))
		e->attr_timeout = 0;
	unlock(v);
	release(&hd);
	return r;
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct fuse_entry_param e;
	int r = make_node(req, parent, name, mode, rdev, NULL, &e);

	reply_entry_or_err(req, note(vol_of(req), "mknod", r), &e);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fuse_entry_param e;
	int r = make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL, &e);

	reply_entry_or_err(req, note(vol_of(req), "mkdir", r), &e);
}

static void op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int r = make_node(req, parent, name, S_IFLNK | 0777, 0, target, &e);

	reply_entry_or_err(req, note(vol_of(req), "symlink", r), &e);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct volume *v = vol_of(req);
	struct fuse_entry_param e;
	uint64_t blk = to_blk(v, ino);
	int r;

	if (!name_ok(newname, &r)) {
		fuse_reply_err(req, -r);
		return;
	}
	struct held hd = { .n = 0 };

	/* as the kernel's link: the directory before the file */
	r = hold_seq(v, &hd, to_blk(v, newparent), change_mode(v), blk, change_mode(v));
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	lock(v);
	RETRY_LOCKED(v, &hd, r, o2_link(v->fs, blk, to_blk(v, newparent), newname, strlen(newname)));
	if (r == 0)
		r = make_entry(v, blk, &e);
	unlock(v);
	release(&hd);
	reply_entry_or_err(req, note(v, "link", r), &e);
}

/* Remove a name with o2_unlink or o2_rmdir (same signature). */
static void remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, const char *op,
			int (*fn)(struct o2_fs *, uint64_t, const char *, size_t))
{
	struct volume *v = vol_of(req);
	int r;

	if (!name_ok(name, &r)) {
		fuse_reply_err(req, -r);
		return;
	}
	struct held hd = { .n = 0 };
	uint64_t dir = to_blk(v, parent);

	r = hold(v, &hd, change_mode(v), dir, 0);
	/* a lock fscore asks for is taken with the volume lock dropped: the
	 * name is read again, as hold_targets does, before the call runs again */
	while (r == 0) {
		r = hold_targets(v, &hd, change_mode(v), 1, &dir, &name);
		if (r < 0)
			break;
		r = fn(v->fs, dir, name, strlen(name));
		if (r != -O2_ENEEDLOCK) {
			run_deallocs(v, &hd);
			unlock(v);
			break;
		}
		r = take_wanted(v, &hd); /* 0: again, from the names */
	}
	release(&hd);
	fuse_reply_err(req, -note(v, op, r));
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, "unlink", o2_unlink);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, "rmdir", o2_rmdir);
}

/*
 * Under the volume mutex, after a rename between two directories: the
 * directories the kernel knows that moved (newname in dirs[1]; with
 * exchange, name in dirs[0] too), as node ids in ids.  Returns how many.
 */
static unsigned moved_dirs(struct volume *v, const uint64_t *dirs, const char *const *names,
			   bool exchange, fuse_ino_t *ids)
{
	unsigned n = 0;

	for (int i = exchange ? 0 : 1; i < 2; i++) {
		struct o2_inode *d;
		struct o2_dirent de;

		if (o2_inode_get(v->fs, dirs[i], &d) < 0)
			continue;
		if (o2_dir_lookup(v->fs, d, names[i], strlen(names[i]), &de) == 0 &&
		    de.type == O2_DT_DIR && g_hash_table_contains(v->nodes, &de.ino))
			ids[n++] = volume_node_id(v, de.ino);
		o2_inode_unref(d);
	}
	return n;
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct volume *v = vol_of(req);
	unsigned o2flags = 0;
	int r;

	if (!name_ok(name, &r) || !name_ok(newname, &r)) {
		fuse_reply_err(req, -r);
		return;
	}
	if (flags & RENAME_NOREPLACE)
		o2flags |= O2_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		o2flags |= O2_RENAME_EXCHANGE;
	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		fuse_reply_err(req, EINVAL); /* RENAME_WHITEOUT: no overlay support */
		return;
	}
	struct held hd = { .n = 0 };
	const uint64_t dirs[2] = { to_blk(v, parent), to_blk(v, newparent) };
	const char *const names[2] = { name, newname };
	fuse_ino_t moved_ids[2];
	unsigned moved = 0;

	r = hold_rename(v, &hd, dirs[0], dirs[1]);
	if (r == 0)
		r = hold(v, &hd, change_mode(v), dirs[0], dirs[1]);
	/* as remove_name: the names are read again after a lock fscore asked for */
	while (r == 0) {
		r = hold_targets(v, &hd, change_mode(v), 2, dirs, names);
		if (r < 0)
			break;
		r = o2_rename(v->fs, dirs[0], name, strlen(name), dirs[1], newname, strlen(newname),
			      o2flags);
		if (r != -O2_ENEEDLOCK) {
			run_deallocs(v, &hd);
			if (r == 0 && dirs[0] != dirs[1])
				moved = moved_dirs(v, dirs, names, flags & RENAME_EXCHANGE, moved_ids);
			unlock(v);
			break;
		}
		r = take_wanted(v, &hd);
	}
	release(&hd);
	/* ".." in the listings the kernel keeps of them (op_opendir) is gone */
	for (unsigned i = 0; i < moved; i++)
		session_notify_inval_inode(v, moved_ids[i], 0, 0);
	fuse_reply_err(req, -note(v, "rename", r));
}

/* ---- files ---- */

/*
 * How the kernel may cache an open file's pages: across opens on one node,
 * where every change passes through this mount; not at all on a clustered
 * volume for now, where another node may change the file at any time
 * (every read and write comes here, under the inode's lock).
 */
static void open_caching(const struct volume *v, struct fuse_file_info *fi)
{
	/*
	 * Clustered, the pages stay while this node holds the inode's lock
	 * (see "Pages" above), except for O_APPEND: the kernel would put the
	 * data in its pages at the end it knows, which another node may have
	 * moved (op_write writes at the real end), and O_DIRECT.
	 */
	if (v->cluster && (fi->flags & (O_APPEND | O_DIRECT))) {
		fi->direct_io = 1;
		fi->keep_cache = 0;
	} else {
		fi->keep_cache = 1;
	}
}

/*
 * A clustered file opened for writing: counted on its node (hold_gen then
 * takes its lock EX for everything), and its lock taken EX now, before
 * any write holds a page lock, so that no write waits to convert it from
 * PR.  release_writer undoes the count.
 */
static int open_writer(struct volume *v, uint64_t blk, const struct fuse_file_info *fi)
{
	struct held hd = { .n = 0 };
	uint64_t *n;
	uint32_t gen;
	int r;

	if (!v->cluster || (fi->flags & O_ACCMODE) == O_RDONLY)
		return 0;
	lock(v);
	n = g_hash_table_lookup(v->nodes, &blk);
	if (n)
		n[3]++;
	gen = node_gen(v, blk);
	unlock(v);
	r = hold_gen(v, &hd, blk, gen, O2LT_EX);
	release(&hd);
	return r;
}

static void release_writer(struct volume *v, uint64_t blk, const struct fuse_file_info *fi)
{
	uint64_t *n;

	if (!v->cluster || (fi->flags & O_ACCMODE) == O_RDONLY)
		return;
	lock(v);
	n = g_hash_table_lookup(v->nodes, &blk);
	if (n && n[3])
		n[3]--;
	unlock(v);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct volume *v = vol_of(req);
	uint64_t blk = to_blk(v, ino);
	int r = 0;

	struct cluster_hold *open = NULL;

	if (v->no_open) {
		fuse_reply_err(req, ENOSYS); /* the kernel stops asking (see op_init) */
		return;
	}
	r = hold_open(v, blk, fi, &open);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	/* O_TRUNC truncates even with O_RDONLY, as on Linux's own filesystems
	 * (the kernel has checked write permission) */
	if (fi->flags & O_TRUNC) {
		struct o2_setattr a = { .size = 0, .mtime = now_ts() };
		struct held hd = { .n = 0 };

		a.ctime = a.mtime;
		r = hold(v, &hd, change_mode(v), blk, 0);
		if (r == 0) {
			lock(v);
			RETRY_LOCKED(v, &hd, r,
				     o2_setattr(v->fs, blk, &a,
						O2_SET_SIZE | O2_SET_MTIME | O2_SET_CTIME));
			unlock(v);
			release(&hd);
		}
	}
	if (r == 0) {
		r = open_writer(v, blk, fi);
		if (r < 0)
			release_writer(v, blk, fi);
	}
	if (r < 0) {
		release_open(open);
		fuse_reply_err(req, -note(v, "open", r));
		return;
	}
	open_caching(v, fi);
	fi->fh = (uint64_t)(uintptr_t)open;
	if (fuse_reply_open(req, fi) != 0) {
		release_writer(v, blk, fi);
		release_open(open);
	}
}

/*
 * Whether the caller may open an existing file with flags: the kernel
 * checked only the directory, expecting to create it.  Mode bits, owner,
 * group and supplementary groups (not ACLs); root passes.
 */
static int may_open_existing(fuse_req_t req, const struct stat *st, int flags)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	int acc = flags & O_ACCMODE;
	unsigned want = (acc == O_RDONLY ? 4u : acc == O_WRONLY ? 2u : 6u) | (flags & O_TRUNC ? 2u : 0);
	unsigned have = st->st_mode & 7;
	gid_t groups[64];
	int n;

	if (ctx->uid == 0)
		return 0;
	if (ctx->uid == st->st_uid) {
		have = (st->st_mode >> 6) & 7;
	} else {
		bool member = ctx->gid == st->st_gid;

		n = fuse_req_getgroups(req, 64, groups);
		for (int i = 0; i < n && i < 64 && !member; i++)
			member = groups[i] == st->st_gid;
		if (member)
			have = (st->st_mode >> 3) & 7;
	}
	return want & ~have ? -EACCES : 0;
}

/*
 * O_CREAT without O_EXCL on a clustered volume, when another node made
 * the name after the kernel looked it up: open what is there, as the
 * call means (truncated for O_TRUNC).  The entry counts a lookup.
 */
static int open_made_elsewhere(fuse_req_t req, fuse_ino_t parent, const char *name,
			       struct fuse_file_info *fi, struct fuse_entry_param *e)
{
	struct volume *v = vol_of(req);
	int r = cluster_lookup(v, to_blk(v, parent), name, e);

	if (r < 0)
		return r;
	if (!S_ISREG(e->attr.st_mode))
		r = S_ISDIR(e->attr.st_mode) ? -EISDIR : -EEXIST;
	if (r == 0)
		r = may_open_existing(req, &e->attr, fi->flags);
	if (r == 0 && (fi->flags & O_TRUNC)) {
		struct o2_setattr a = { .size = 0, .mtime = now_ts() };
		struct held hd = { .n = 0 };

		a.ctime = a.mtime;
		r = hold(v, &hd, change_mode(v), to_blk(v, e->ino), 0);
		if (r == 0) {
			lock(v);
			RETRY_LOCKED(v, &hd, r,
				     o2_setattr(v->fs, to_blk(v, e->ino), &a,
						O2_SET_SIZE | O2_SET_MTIME | O2_SET_CTIME));
			if (r == 0)
				r = get_stat(v, to_blk(v, e->ino), &e->attr, NULL);
			unlock(v);
			release(&hd);
		}
	}
	if (r < 0) {
		lock(v);
		node_unref(v, to_blk(v, e->ino), 1);
		unlock(v);
	}
	return r;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct volume *v = vol_of(req);
	struct fuse_entry_param e;
	struct cluster_hold *open = NULL;
	int r = make_node(req, parent, name, S_IFREG | (mode & 07777), 0, NULL, &e);

	if (r == -EEXIST && v->cluster && !(fi->flags & O_EXCL))
		r = open_made_elsewhere(req, parent, name, fi, &e);
	if (r == 0) {
		r = hold_open(v, to_blk(v, e.ino), fi, &open);
		if (r == 0) {
			r = open_writer(v, to_blk(v, e.ino), fi);
			if (r < 0) {
				release_writer(v, to_blk(v, e.ino), fi);
				release_open(open);
			}
		}
		if (r < 0) {
			lock(v);
			node_unref(v, to_blk(v, e.ino), 1);
			unlock(v);
		}
	}
	if (r < 0) {
		fuse_reply_err(req, -note(v, "create", r));
		return;
	}
	open_caching(v, fi);
	fi->fh = (uint64_t)(uintptr_t)open;
	if (fuse_reply_create(req, &e, fi) != 0) {
		/* the kernel did not take it: give its lookup back */
		release_writer(v, to_blk(v, e.ino), fi);
		release_open(open);
		lock(v);
		node_unref(v, to_blk(v, e.ino), 1);
		unlock(v);
	}
}

/*
 * Each serving thread keeps its read buffer: a fresh megabyte per request
 * would be a fresh mmap (glibc maps blocks that large), paid for in page
 * faults and zeroing on every sequential read.
 */
static GPrivate read_buf_key = G_PRIVATE_INIT(g_free);

struct read_buf {
	size_t cap;
	char data[];
};

static char *read_buf(size_t size)
{
	struct read_buf *b = g_private_get(&read_buf_key);

	if (!b || b->cap < size) {
		size_t cap = MAX(size, (size_t)OCFS2D_MAX_WRITE);

		b = g_try_malloc(sizeof(*b) + cap);
		if (!b)
			return NULL;
		b->cap = cap;
		g_private_replace(&read_buf_key, b);
	}
	return b->data;
}

/*
 * O_DIRECT as Linux's block filesystems take it (ext4, XFS, kernel OCFS2):
 * the offset and the length in whole sectors of the device, or EINVAL.
 * FUSE passes the file's flags with each read and write but checks no
 * alignment itself; the caller's buffer address it does not pass, so that
 * one check is left out.
 */
#define DIRECT_ALIGN 512u

static bool direct_misaligned(const struct fuse_file_info *fi, off_t off, size_t size)
{
	return (fi->flags & O_DIRECT) && (((uint64_t)off | size) & (DIRECT_ALIGN - 1));
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct volume *v = vol_of(req);
	struct o2_inode *in;
	char *buf;
	ssize_t n;

	if (direct_misaligned(fi, off, size)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	buf = read_buf(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	struct held hd = { .n = 0, .admit = true };

	n = hold(v, &hd, O2LT_PR, to_blk(v, ino), 0);
	if (n == 0) {
		lock(v);
		n = o2_inode_get(v->fs, to_blk(v, ino), &in);
		if (n == 0) {
			n = o2_inode_read(v->fs, in, (uint64_t)off, buf, size);
			o2_inode_unref(in);
		}
		unlock(v);
		release(&hd);
	}
	if (n < 0)
		fuse_reply_err(req, -note(v, "read", (int)n));
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

/*
 * O_APPEND on a clustered volume: the kernel put the write at the size it
 * knows, which another node may have moved since; the end is where the
 * size is now, under the inode's lock (the kernel takes the reply's
 * count) - read again each time the write is run again.
 */
static ssize_t write_at(struct volume *v, uint64_t blk, const struct fuse_file_info *fi,
			off_t off, const char *buf, size_t size)
{
	if (v->cluster && (fi->flags & O_APPEND)) {
		struct stat st;
		int r = get_stat(v, blk, &st, NULL);

		if (r < 0)
			return r;
		off = st.st_size;
	}
	return o2_write(v->fs, blk, (uint64_t)off, buf, size);
}

/*
 * Write back, on a thread of its own (volume.c, write_back_pool), what a
 * write to a file another node keeps asking for left: the write-back of a
 * lock leaving EX for PR, done before the other node asks.  One at a
 * time; a call while one is queued adds nothing.
 */
void fuseops_write_back_job(gpointer data, gpointer unused)
{
	struct volume *v = data;

	(void)unused;
	lock(v);
	v->write_back_queued = false;
	unlock(v);
	cluster_write_back(v->cluster);
}

static void write_back_soon(struct volume *v)
{
	lock(v);
	/* pushed under the lock: the pool goes (NULL, under it) at the close */
	if (v->write_back_pool && !v->write_back_queued) {
		v->write_back_queued = true;
		g_thread_pool_push(v->write_back_pool, v, NULL);
	}
	unlock(v);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct volume *v = vol_of(req);
	bool killed = false;
	ssize_t n;

	if (off < 0 || direct_misaligned(fi, off, size)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	struct held hd = { .n = 0, .admit = true };

	n = hold(v, &hd, change_mode(v), to_blk(v, ino), 0);
	if (n < 0) {
		fuse_reply_err(req, (int)-n);
		return;
	}
	lock(v);
	n = kill_privs(v, &hd, to_blk(v, ino), session_write_flags() & FUSE_WRITE_KILL_SUIDGID,
		       &killed);
	if (n == 0)
		RETRY_LOCKED(v, &hd, n, write_at(v, to_blk(v, ino), fi, off, buf, size));
	unlock(v);
	/* another node asked for this file lately: it will again (below) */
	bool soon = n > 0 && v->cluster && cluster_held_contended(&hd, to_blk(v, ino));
	release(&hd);
	/* before the reply, so the writer's next stat(2) asks again */
	if (killed)
		session_notify_inval_inode(v, ino, -1, 0);
	/*
	 * Written past the page cache (a direct_io open, open_caching): what
	 * other opens on this node keep of that range is stale, the page
	 * holding the old end above all.  No cluster lock is held here, so
	 * the reads this waits for (page locks) can take theirs.
	 */
	if (n > 0 && v->cluster && (fi->flags & (O_APPEND | O_DIRECT))) {
		session_may_wait(); /* the reads it waits for must be served */
		session_notify_inval_inode(v, ino, off, (off_t)n);
	}
	if (n < 0)
		fuse_reply_err(req, -note(v, "write", (int)n));
	else
		fuse_reply_write(req, (size_t)n);
	/*
	 * What this wrote goes home now, after the reply, rather than when
	 * the other node asks: its wait for the lock then holds no device
	 * write (the ping-pong of one block between two nodes).
	 */
	if (soon)
		write_back_soon(v);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (fi->flock_release && vol_of(req)->flocks)
		flocks_release(vol_of(req)->flocks, to_blk(vol_of(req), ino), fi->lock_owner);
	release_writer(vol_of(req), to_blk(vol_of(req), ino), fi);
	release_open((struct cluster_hold *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/*
 * fsync and fdatasync: fscore says what must become durable (a commit, or
 * only the file data written in place) and when a device flush is needed.
 * The flushes run without the volume lock, so other requests go on while
 * the device works, and only one runs at a time: an fsync that finds one
 * running waits for it and then asks fscore again - that flush may have
 * covered it, and if not, the next flush covers every fsync that waited
 * (group commit; fscore joins the waiting fsyncs' changes in the one
 * transaction it commits).  fscore finishes a commit left in flight
 * itself, under the lock, if another call needs it first.
 */
static void fsync_now(fuse_req_t req, uint64_t blk, int datasync)
{
	struct volume *v = vol_of(req);
	struct o2_fsync s;
	int r;

	/* no cluster lock: a commit writes this node's own journal alone */
	lock(v);
	o2_fsync_begin(v->fs, blk, datasync, &s);
	while ((r = o2_fsync_step(v->fs, &s)) == O2_FSYNC_FLUSH) {
		uint64_t w;
		int f;

		if (v->flushing) {
			g_cond_wait(&v->flush_cond, &v->lock);
			continue;
		}
		v->flushing = true;
		w = o2_fs_device_writes(v->fs);
		unlock(v);
		f = o2_blockdev_flush(v->dev);
		lock(v);
		v->flushing = false;
		g_cond_broadcast(&v->flush_cond);
		r = o2_fs_flushed(v->fs, w, f);
		if (r < 0)
			break;
	}
	unlock(v);
	fuse_reply_err(req, -note(v, "fsync", r));
}

/* An fsync handed to the volume's sync threads (volume.c, sync_pool). */
struct fsync_job {
	fuse_req_t req;
	uint64_t blk;
	int datasync;
};

void fuseops_sync_job(gpointer data, gpointer user_data)
{
	struct fsync_job *j = data;

	fsync_now(j->req, j->blk, j->datasync);
	g_free(j);
}

/*
 * A volume served in turns (session_serve, the default) gives its
 * fsyncs to threads of their own: the serving thread goes on with other
 * requests - the writes of the files that will fsync next - while the
 * device flushes, and fsyncs from many callers meet on the flushes and
 * commits they share (group commit).  Served on many threads (libfuse's
 * workers) or through io_uring (whose replies go inside the request), the
 * fsync runs where it arrived.
 */
static void fsync_blk(fuse_req_t req, uint64_t blk, int datasync)
{
	struct volume *v = vol_of(req);

	if (v->sync_pool) {
		struct fsync_job *j = g_new(struct fsync_job, 1);

		*j = (struct fsync_job){ .req = req, .blk = blk, .datasync = datasync };
		g_thread_pool_push(v->sync_pool, j, NULL);
		return;
	}
	fsync_now(req, blk, datasync);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fsync_blk(req, to_blk(vol_of(req), ino), datasync);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct volume *v = vol_of(req);
	struct o2_statfs s;
	struct statvfs st = { 0 };
	int r;

	struct held hd = { .n = 0 };

	/* the global bitmap as the node that allocates wrote it home */
	r = hold(v, &hd, O2LT_PR, v->bitmap, 0);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	lock(v);
	r = o2_statfs(v->fs, &s);
	unlock(v);
	release(&hd);
	if (r < 0) {
		fuse_reply_err(req, -note(v, "statfs", r));
		return;
	}
	st.f_bsize = (unsigned long)s.cluster_size;
	st.f_frsize = (unsigned long)s.cluster_size;
	st.f_blocks = s.total_clusters;
	st.f_bfree = s.free_clusters;
	st.f_bavail = s.free_clusters;
	st.f_files = s.total_inodes;
	st.f_ffree = s.free_inodes;
	st.f_favail = s.free_inodes;
	st.f_namemax = s.max_name_len;
	fuse_reply_statfs(req, &st);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct volume *v = vol_of(req);
	int r;

	/* what kernel OCFS2 takes: preallocation, and punching holes */
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (off < 0 || len <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	struct held hd = { .n = 0 };

	r = hold(v, &hd, change_mode(v), to_blk(v, ino), 0);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	lock(v);
	RETRY_LOCKED(v, &hd, r,
		     o2_fallocate(v->fs, to_blk(v, ino),
				  ((mode & FALLOC_FL_KEEP_SIZE) ? O2_FALLOC_KEEP_SIZE : 0) |
					  ((mode & FALLOC_FL_PUNCH_HOLE) ? O2_FALLOC_PUNCH_HOLE : 0),
				  (uint64_t)off, (uint64_t)len));
	unlock(v);
	release(&hd);
	fuse_reply_err(req, -note(v, "fallocate", r));
}

/*
 * SEEK_DATA / SEEK_HOLE: data is what the extent tree maps to written
 * clusters (or inline data); holes and unwritten extents read as zeros and
 * count as holes.  The end of the file is a hole.
 */
static off_t seek_data_hole(struct volume *v, struct o2_inode *in, off_t off, int whence)
{
	const struct o2_inode_info *info = o2_inode_info(in);
	uint64_t size = info->size, cs = v->cluster_size;

	if (off < 0 || (uint64_t)off >= size)
		return -ENXIO;
	if (info->kind != O2_ID2_EXTENTS)
		return whence == SEEK_DATA ? off : (off_t)size;
	uint64_t pos = (uint64_t)off;

	while (pos < size) {
		struct o2_extent ex;
		int r = o2_inode_map(v->fs, in, (uint32_t)(pos / cs), &ex);

		if (r < 0)
			return r;
		bool data = ex.blkno && !(ex.flags & O2_EXTENT_UNWRITTEN);
		uint64_t end = ex.clusters == UINT32_MAX ? size : ((uint64_t)ex.cpos + ex.clusters) * cs;

		if (data == (whence == SEEK_DATA))
			return (off_t)pos;
		if (end <= pos)
			return -EUCLEAN;
		pos = end;
	}
	return whence == SEEK_DATA ? -ENXIO : (off_t)size;
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct volume *v = vol_of(req);
	struct o2_inode *in;
	off_t r;

	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	struct held hd = { .n = 0 };

	r = hold(v, &hd, O2LT_PR, to_blk(v, ino), 0);
	if (r < 0) {
		fuse_reply_err(req, (int)-r);
		return;
	}
	lock(v);
	r = o2_inode_get(v->fs, to_blk(v, ino), &in);
	if (r == 0) {
		r = seek_data_hole(v, in, off, whence);
		o2_inode_unref(in);
	}
	unlock(v);
	release(&hd);
	if (r < 0)
		fuse_reply_err(req, -note(v, "lseek", (int)r));
	else
		fuse_reply_lseek(req, r);
}

static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			       struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct volume *v = vol_of(req);
	char *buf;
	size_t done = 0;
	int r = 0;

	if (flags || off_in < 0 || off_out < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	struct held hd = { .n = 0 };

	r = hold2(v, &hd, to_blk(v, ino_in), O2LT_PR, to_blk(v, ino_out), change_mode(v));
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	buf = g_try_malloc(COPY_CHUNK);
	if (!buf) {
		release(&hd);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	while (done < len && r == 0) {
		size_t want = MIN(len - done, COPY_CHUNK);
		struct o2_inode *in;
		ssize_t n;

		lock(v);
		n = o2_inode_get(v->fs, to_blk(v, ino_in), &in);
		if (n == 0) {
			n = o2_inode_read(v->fs, in, (uint64_t)off_in + done, buf, want);
			o2_inode_unref(in);
		}
		if (n > 0) {
			size_t got = (size_t)n;

			RETRY_LOCKED(v, &hd, n,
				     o2_write(v->fs, to_blk(v, ino_out), (uint64_t)off_out + done,
					      buf, got));
		}
		unlock(v);
		if (n < 0)
			r = (int)n;
		else if (n == 0)
			break; /* end of the source */
		else
			done += (size_t)n;
	}
	g_free(buf);
	release(&hd);
	if (r < 0 && done == 0)
		fuse_reply_err(req, -note(v, "copy_file_range", r));
	else
		fuse_reply_write(req, done);
}

/* ---- directories ---- */

struct dir_snap {
	GArray *ents; /* struct snap_ent; NULL until the first readdir */
	struct cluster_hold *open;
	struct o2_dir_stamp stamp; /* when ents were read */
};

struct snap_ent {
	uint64_t ino;
	uint64_t pos; /* o2_dirent's: the listing's offsets are pos + 1 */
	uint8_t type;
	char *name;
};

static int snap_add(const struct o2_dirent *de, void *arg)
{
	GArray *ents = arg;
	struct snap_ent e = { de->ino, de->pos, de->type, g_strndup(de->name, de->name_len) };

	g_array_append_val(ents, e);
	return 0;
}

static void snap_ents_free(GArray *ents)
{
	for (guint i = 0; i < ents->len; i++)
		g_free(g_array_index(ents, struct snap_ent, i).name);
	g_array_free(ents, TRUE);
}

static void snap_free(struct dir_snap *s)
{
	release_open(s->open);
	if (s->ents)
		snap_ents_free(s->ents);
	g_free(s);
}

/*
 * A directory's entries are read at its first readdir (snap_read), and
 * readdir serves them from there.  An entry's offset (where the next
 * readdir resumes) is its place in the directory plus one, which no other
 * entry's adding or removal moves: the kernel resumes a listing it kept
 * (below) from such an offset with a readdir of another handle, whose
 * snapshot is another moment's.  Not at opendir: the kernel keeps the
 * listing it read in its page cache (FOPEN_CACHE_DIR with keep_cache) and
 * serves later listings from there, so most opens need no snapshot.  It
 * drops that listing when the directory changes through this mount (its
 * own bookkeeping), when its modification time changes (checked at the
 * start of each listing), and when this node loses the directory's lock
 * (fs_lost invalidates the directory's pages too).
 */
static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct volume *v = vol_of(req);
	struct dir_snap *s = g_new0(struct dir_snap, 1);
	int r;

	r = hold_open(v, to_blk(v, ino), fi, &s->open);
	if (r < 0) {
		snap_free(s);
		fuse_reply_err(req, -note(v, "opendir", r));
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)s;
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	if (fuse_reply_open(req, fi) != 0)
		snap_free(s);
}

/* The index of the first entry of ents at or after place pos (ents.len: none). */
static guint snap_find(GArray *ents, uint64_t pos)
{
	guint lo = 0, hi = ents->len;

	while (lo < hi) {
		guint mid = lo + (hi - lo) / 2;

		if (g_array_index(ents, struct snap_ent, mid).pos < pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Directory dir's entries into s, under the volume mutex and the directory's lock. */
static int snap_read(struct volume *v, struct o2_inode *dir, struct dir_snap *s)
{
	GArray *ents = g_array_new(FALSE, FALSE, sizeof(struct snap_ent));
	int r;

	o2_fs_dir_stamp(v->fs, &s->stamp);
	r = o2_dir_iterate(v->fs, dir, snap_add, ents);
	if (r < 0)
		snap_ents_free(ents);
	else
		s->ents = ents;
	return r;
}

static mode_t dt_mode(uint8_t t)
{
	static const mode_t m[] = { [O2_DT_REG] = S_IFREG,   [O2_DT_DIR] = S_IFDIR,
				    [O2_DT_CHR] = S_IFCHR,   [O2_DT_BLK] = S_IFBLK,
				    [O2_DT_FIFO] = S_IFIFO,  [O2_DT_SOCK] = S_IFSOCK,
				    [O2_DT_LNK] = S_IFLNK };

	return t < G_N_ELEMENTS(m) ? m[t] : 0;
}

static bool is_dot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

/*
 * Clustered, under the volume mutex: whether readdirplus may give inode
 * blk's attributes - this node holds its lock already (no message, no
 * wait; taken into h while they are read), so what it reads of the inode
 * is current, and the kernel forgets the attributes when the lock goes.  An inode the kernel does not know
 * has no generation here to name the lock: the name alone then.
 */
static bool plus_held(struct volume *v, uint64_t blk, struct cluster_hold *h)
{
	const uint64_t *n = g_hash_table_lookup(v->nodes, &blk);

	if (!v->cluster)
		return true;
	return n && cluster_lock_inode_cached(v->cluster, blk, (uint32_t)n[2], h) == 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct volume *v = vol_of(req);
	struct dir_snap *s = (struct dir_snap *)(uintptr_t)fi->fh;
	char *buf = g_try_malloc(size ? size : 1);
	size_t used = 0;
	int r = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	struct o2_inode *dir = NULL;
	struct held hd = { .n = 0 };
	bool locked = false, fresh = false;
	/* a handle's readdirs come one at a time: its first reads the snapshot */
	bool snap = !s->ents;

	/* the snapshot, and clustered readdirplus's names, under the
	   directory's lock, as a lookup reads them */
	if (snap || plus)
		r = hold(v, &hd, O2LT_PR, to_blk(v, ino), 0);
	if ((snap || plus) && r == 0) {
		lock(v);
		locked = true;
		r = o2_inode_get(v->fs, to_blk(v, ino), &dir);
		if (r == 0 && snap)
			r = snap_read(v, dir, s);
		/* nothing changed the directory since the snapshot: its names stand */
		fresh = o2_fs_dir_unchanged(v->fs, to_blk(v, ino), &s->stamp);
	}
	guint first = r == 0 && off > 0 ? snap_find(s->ents, (uint64_t)off) : 0;

	for (guint i = first; r == 0 && i < s->ents->len; i++) {
		const struct snap_ent *e = &g_array_index(s->ents, struct snap_ent, i);
		size_t n;

		if (plus) {
			struct fuse_entry_param ep;
			struct o2_dirent de;

			memset(&ep, 0, sizeof(ep));
			if (is_dot(e->name)) {
				ep.attr.st_ino = e->ino;
				ep.attr.st_mode = dt_mode(e->type);
			} else {
				/*
				 * The snapshot is from opendir: the name may be gone
				 * since, and its inode freed or even reused.  Entries
				 * handed to the kernel must be what the name is now:
				 * looked up again unless nothing changed the
				 * directory since (no change here, no lock of it lost).
				 */
				struct cluster_hold ih = { 0 };

				if (fresh) {
					de.ino = e->ino;
					de.type = e->type;
				} else {
					r = o2_dir_lookup(v->fs, dir, e->name, strlen(e->name), &de);
				}
				if (r == 0 && !plus_held(v, de.ino, &ih)) {
					/* its lock is not held here: the name alone */
					ep.attr.st_ino = (ino_t)volume_node_id(v, de.ino);
					ep.attr.st_mode = dt_mode(de.type);
					de.ino = 0;
				} else if (r == 0) {
					r = make_entry(v, de.ino, &ep);
				}
				cluster_unlock(&ih);
				if (r == -ESTALE || r == -ENOENT) {
					r = 0; /* gone since opendir */
					continue;
				}
				if (r < 0)
					break;
			}
			n = fuse_add_direntry_plus(req, buf + used, size - used, e->name, &ep,
						   (off_t)e->pos + 1);
			if (n > size - used) {
				if (!is_dot(e->name) && de.ino)
					node_unref(v, de.ino, 1); /* not sent after all */
				break;
			}
		} else {
			struct stat st = { .st_ino = e->ino, .st_mode = dt_mode(e->type) };

			n = fuse_add_direntry(req, buf + used, size - used, e->name, &st,
					      (off_t)e->pos + 1);
			if (n > size - used)
				break;
		}
		used += n;
	}
	if (dir)
		o2_inode_unref(dir);
	if (locked)
		unlock(v);
	release(&hd);
	if (r < 0 && used == 0)
		fuse_reply_err(req, -note(v, "readdir", r));
	else
		fuse_reply_buf(req, buf, used);
	g_free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	snap_free((struct dir_snap *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/*
 * fsync of a directory makes the whole volume durable, as it always has
 * here: FUSE passes no syncfs(2) to us, and tools fsync the mount point
 * for one (tests/fuse's fault case does).  A directory's fsync is rare
 * and usually follows a change of its entries, which is in the running
 * transaction anyway.
 */
static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fsync_blk(req, 0, datasync);
}

/* ---- extended attributes ----
 *
 * Names map onto OCFS2's kinds by prefix: user. (unless nouser_xattr),
 * trusted. and security.  POSIX ACLs (system.posix_acl_*) only with the
 * acl option, as kernel OCFS2: the kernel then enforces them
 * (FUSE_POSIX_ACL) and fscore keeps them and the mode in step.  Without
 * it they get EOPNOTSUPP, as on a kernel OCFS2 mount with noacl (the
 * default).
 */

static bool is_acl(unsigned type)
{
	return type == O2_XATTR_ACL_ACCESS || type == O2_XATTR_ACL_DEFAULT;
}

static int xattr_name(const struct volume *v, const char *full, unsigned *type, const char **name)
{
	int r = o2_xattr_parse_name(full, type, name);

	if (r < 0)
		return r;
	if (is_acl(*type) && !v->acl)
		return -EOPNOTSUPP;
	if (*type == O2_XATTR_USER && v->opts.nouser_xattr)
		return -EOPNOTSUPP;
	return strlen(*name) > O2_XATTR_NAME_MAX ? -ERANGE : 0;
}

/* A refusal fscore explains (xattrs in buckets, say) goes to the log. */
static int xattr_note(struct volume *v, const char *op, int r)
{
	if (r == -EOPNOTSUPP) {
		g_mutex_lock(&v->lock);
		g_message("%s: %s: %s", v->device, op, o2_fs_error(v->fs));
		g_mutex_unlock(&v->lock);
		return r;
	}
	return note(v, op, r);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *full, const char *value,
			size_t size, int flags)
{
	struct volume *v = vol_of(req);
	unsigned type, o2flags = 0;
	const char *name;
	int r = xattr_name(v, full, &type, &name);

	if (flags & XATTR_CREATE)
		o2flags |= O2_XATTR_CREATE;
	if (flags & XATTR_REPLACE)
		o2flags |= O2_XATTR_REPLACE;
	struct held hd = { .n = 0 };

	if (r == 0)
		r = hold(v, &hd, change_mode(v), to_blk(v, ino), 0);
	if (r == 0) {
		lock(v);
		if (is_acl(type))
			RETRY_LOCKED(v, &hd, r, o2_acl_set(v->fs, to_blk(v, ino), type, value, size));
		else
			RETRY_LOCKED(v, &hd, r,
				     o2_xattr_set(v->fs, to_blk(v, ino), type, name, strlen(name),
						  value, size, o2flags));
		unlock(v);
		release(&hd);
		r = xattr_note(v, "setxattr", r);
	}
	fuse_reply_err(req, -r);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *full, size_t size)
{
	struct volume *v = vol_of(req);
	g_autofree char *buf = size ? g_try_malloc(size) : NULL;
	const char *name;
	unsigned type;
	ssize_t n;
	int r = xattr_name(v, full, &type, &name);

	if (r == 0 && size && !buf)
		r = -ENOMEM;
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	struct held hd = { .n = 0 };

	r = hold(v, &hd, O2LT_PR, to_blk(v, ino), 0);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	lock(v);
	if (is_acl(type))
		n = o2_acl_get(v->fs, to_blk(v, ino), type, buf, size);
	else
		n = o2_xattr_get(v->fs, to_blk(v, ino), type, name, strlen(name), buf, size);
	unlock(v);
	release(&hd);
	if (n < 0)
		fuse_reply_err(req, -note(v, "getxattr", (int)n));
	else if (!size)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

struct xattr_list {
	const struct volume *v;
	bool trusted; /* the caller may see trusted.* */
	GString *out;
};

static int list_one(const struct o2_xattr *x, void *arg)
{
	struct xattr_list *l = arg;
	const char *prefix = o2_xattr_prefix(x->type);

	if ((is_acl(x->type) && !l->v->acl) ||
	    (x->type == O2_XATTR_USER && l->v->opts.nouser_xattr) ||
	    (x->type == O2_XATTR_TRUSTED && !l->trusted))
		return 0;
	g_string_append(l->out, prefix);
	g_string_append_len(l->out, x->name, x->name_len);
	g_string_append_c(l->out, '\0');
	return 0;
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct volume *v = vol_of(req);
	/* trusted.* is for the privileged, as kernel filesystems list it */
	struct xattr_list l = { v, fuse_req_ctx(req)->uid == 0, NULL };
	struct held hd = { .n = 0 };
	int r = hold(v, &hd, O2LT_PR, to_blk(v, ino), 0);

	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	l.out = g_string_new(NULL);
	lock(v);
	r = o2_xattr_iterate_blkno(v->fs, to_blk(v, ino), list_one, &l);
	unlock(v);
	release(&hd);
	if (r < 0)
		fuse_reply_err(req, -note(v, "listxattr", r));
	else if (!size)
		fuse_reply_xattr(req, l.out->len);
	else if (l.out->len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, l.out->str, l.out->len);
	g_string_free(l.out, TRUE);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *full)
{
	struct volume *v = vol_of(req);
	const char *name;
	unsigned type;
	int r = xattr_name(v, full, &type, &name);

	struct held hd = { .n = 0 };

	if (r == 0)
		r = hold(v, &hd, change_mode(v), to_blk(v, ino), 0);
	if (r == 0) {
		lock(v);
		if (is_acl(type))
			RETRY_LOCKED(v, &hd, r, o2_acl_set(v->fs, to_blk(v, ino), type, NULL, 0));
		else
			RETRY_LOCKED(v, &hd, r,
				     o2_xattr_remove(v->fs, to_blk(v, ino), type, name,
						     strlen(name)));
		unlock(v);
		release(&hd);
		r = xattr_note(v, "removexattr", r);
	}
	fuse_reply_err(req, -r);
}

/* ---- file locks: cluster-wide, in flock.c (only on clustered volumes) ---- */

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct volume *v = vol_of(req);

	/* a local volume's flush only lets the kernel report its write-back */
	if (!v->flocks) {
		fuse_reply_err(req, 0);
		return;
	}
	flocks_flush(v->flocks, req, to_blk(v, ino), fi->lock_owner);
}

static void op_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     struct flock *lk)
{
	flocks_getlk(vol_of(req)->flocks, req, to_blk(vol_of(req), ino), fi->lock_owner, lk);
}

static void op_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     struct flock *lk, int sleep)
{
	flocks_setlk(vol_of(req)->flocks, req, to_blk(vol_of(req), ino), fi->lock_owner, lk,
		     sleep);
}

static void op_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op)
{
	flocks_flock(vol_of(req)->flocks, req, to_blk(vol_of(req), ino), fi->lock_owner, op);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.create = op_create,
	.fallocate = op_fallocate,
	.copy_file_range = op_copy_file_range,
	.lseek = op_lseek,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.flush = op_flush,
	.getlk = op_getlk,
	.setlk = op_setlk,
	.flock = op_flock,
};

void fuseops_table(const struct volume *v, struct fuse_lowlevel_ops *ret)
{
	*ret = ops;
	/* noxattr: libfuse answers ENOSYS and the kernel stops asking - above
	 * all for security.capability before every write() */
	if (v->opts.noxattr)
		ret->setxattr = NULL, ret->getxattr = NULL, ret->listxattr = NULL,
		ret->removexattr = NULL;
	/* no cluster-wide file locks (a local volume, localflocks): the kernel
	 * keeps them, on this node only */
	if (!v->flocks)
		ret->getlk = NULL, ret->setlk = NULL, ret->flock = NULL;
	/* and closes need not reach us - unless the kernel's write-back cache
	 * hands pages over at each close: it reports a hand-over that failed
	 * (ENOSPC, EDQUOT, EIO) only to a filesystem that implements flush */
	if (!v->flocks && !v->opts.writeback_cache)
		ret->flush = NULL;
	/* that cache hands nothing over before SEEK_DATA and SEEK_HOLE: left
	 * to the kernel, which then sees the whole file as data, as it may */
	if (v->opts.writeback_cache)
		ret->lseek = NULL;
}
