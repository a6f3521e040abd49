/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Allocators, write side.
 *
 * How it works.  The global bitmap is a chain allocator of cluster groups:
 * group g covers clusters [g*cpg, g*cpg + bits) and its descriptor is the
 * first block of the group (group 0's sits at s_first_cluster_group).  The
 * slot's suballocators (inode_alloc, extent_alloc) are chain allocators of
 * block groups carved out of clusters claimed from the global bitmap; bit
 * 0 of each is the descriptor itself, and bit b is block (group + b).  A
 * new group goes on the shortest chain (an unused chain first).
 *
 * Discontiguous groups (the discontig-bg feature): when the global bitmap
 * has no free run of a whole group's clusters, a suballocator group is
 * pieced together from several runs, as the kernel does.  The descriptor
 * (the first block of the first run) lists the runs in bg_list: record i
 * covers group clusters [e_cpos, e_cpos + e_leaf_clusters) at block
 * e_blkno, the records following each other without gaps, so bit b lives
 * in the record whose clusters hold b / bits-per-cluster.  The pieces are
 * chosen before anything changes (the longest free runs, as few as the
 * list can hold), so a group that cannot be made costs nothing but
 * -ENOSPC.
 *
 * Freed clusters go to the slot's truncate log, not straight back to the
 * bitmap, so they cannot be reused before the transaction that freed them
 * has committed; o2_trunclog_flush() returns them, after a commit, in a
 * transaction of its own.
 *
 * Every change goes through the caller's transaction; credits: see
 * O2_ALLOC_CREDITS.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "error.h"
#include "journal.h"

static inline bool bit_test(const uint8_t *bm, unsigned i)
{
	return bm[i / 8] & (1u << (i % 8));
}

static inline void bit_set(uint8_t *bm, unsigned i)
{
	bm[i / 8] |= (uint8_t)(1u << (i % 8));
}

static inline void bit_clear(uint8_t *bm, unsigned i)
{
	bm[i / 8] &= (uint8_t)~(1u << (i % 8));
}

/*
 * The first bit at or after i (up to bits) that is set (set) or clear
 * (!set).  Whole 64-bit words of the other kind are skipped at once: a
 * window or a group of 32,768 bits filled from its start would otherwise
 * cost each allocation a walk bit by bit over all that is used.
 */
static unsigned next_bit(const uint8_t *bm, unsigned i, unsigned bits, bool set)
{
	const uint64_t other = set ? 0 : ~(uint64_t)0;

	while (i < bits) {
		if (i % 64 == 0 && bits - i >= 64) {
			uint64_t w;

			memcpy(&w, bm + i / 8, sizeof(w));
			if (w == other) {
				i += 64;
				continue;
			}
		}
		if (bit_test(bm, i) == set)
			return i;
		i++;
	}
	return bits;
}

/* Longest run of clear bits, up to want; the first of want, else the longest if >= min. */
static bool find_run(const uint8_t *bm, unsigned bits, unsigned min, unsigned want,
		     unsigned *ret_start, unsigned *ret_len)
{
	unsigned best_start = 0, best_len = 0;

	for (unsigned i = next_bit(bm, 0, bits, false); i < bits;
	     i = next_bit(bm, i, bits, false)) {
		unsigned s = i, end = next_bit(bm, s, bits, true);

		i = end - s > want ? s + want : end;
		if (i - s > best_len) {
			best_start = s;
			best_len = i - s;
			if (best_len >= want)
				break;
		}
		i = end;
	}
	if (best_len < min || best_len == 0)
		return false;
	*ret_start = best_start;
	*ret_len = best_len;
	return true;
}

static struct o2_dinode *dinode(struct o2_buf *b)
{
	return (struct o2_dinode *)b->data;
}

static struct o2_group_desc *gdesc(struct o2_buf *b)
{
	return (struct o2_group_desc *)b->data;
}

/* ---- cluster locks of system files ----
 *
 * On a shared volume every node changes its own slot's allocators, local
 * alloc window, truncate log and orphan directory under their own cluster
 * locks, which the daemon keeps cached for the mount; the global bitmap
 * and other slots' files are locked only when an operation needs them.
 * fscore never waits for a lock (the daemon's downconverts need the
 * handle): it asks whether the lock is held before it changes anything,
 * and if not, the operation stops with -O2_ENEEDLOCK and is run again
 * once the daemon has taken it.  Checks made inside a transaction are a
 * last guard: an estimate that was short there turns the volume
 * read-only (o2_trans_finish) rather than change a file unlocked.
 */

bool o2_lock_have(struct o2_fs *fs, uint64_t blkno, bool ex)
{
	return !fs->opts.lock_held || fs->opts.lock_held(fs->opts.cluster_arg, blkno, ex);
}

int o2_lock_need(struct o2_fs *fs, uint64_t blkno, bool ex)
{
	if (o2_lock_have(fs, blkno, ex))
		return 0;
	fs->lock_want = blkno;
	fs->lock_want_ex = ex;
	/* harmless in a handle that changed nothing yet; else the estimate was short */
	if (o2_journal_in_handle(fs))
		return o2_fail(fs, -O2_ENEEDLOCK, "the cluster lock of system inode %llu was needed "
			       "inside a transaction", (unsigned long long)blkno);
	return -O2_ENEEDLOCK;
}

void o2_fs_lock_wanted(const struct o2_fs *fs, uint64_t *blkno, bool *ex)
{
	*blkno = fs->lock_want;
	*ex = fs->lock_want_ex;
}

/*
 * Clusters of the global bitmap and how many of them are in use as statfs
 * counts them: the bitmap's used bits less the local alloc window's unused
 * ones (marked used in the bitmap on the window's behalf, but free).
 */
static int cluster_counts(struct o2_fs *fs, uint32_t *ret_total, uint32_t *ret_used)
{
	struct o2_buf *b;
	int r = o2_bread(fs, fs->sys.global_bitmap, O2_META_INODE, &b);

	if (r < 0)
		return r;
	uint32_t total = le32(dinode(b)->id1.bitmap1.i_total);
	uint32_t used = le32(dinode(b)->id1.bitmap1.i_used);

	o2_brelse(fs, b);
	if (fs->sys.local_alloc && o2_bread(fs, fs->sys.local_alloc, O2_META_INODE, &b) == 0) {
		uint32_t lt = le32(dinode(b)->id1.bitmap1.i_total);
		uint32_t lu = le32(dinode(b)->id1.bitmap1.i_used);

		if (lu <= lt && lt - lu <= used)
			used -= lt - lu;
		o2_brelse(fs, b);
	}
	*ret_total = total;
	*ret_used = used;
	return 0;
}

/* Keep what o2_fs_super() reports in step with the bitmap (best effort). */
static void refresh_counts(struct o2_fs *fs)
{
	uint32_t total, used;

	if (fs->sys.global_bitmap && cluster_counts(fs, &total, &used) == 0) {
		fs->info.total_clusters = total;
		fs->info.used_clusters = used;
	}
}

/*
 * Whether a group descriptor lists its clusters in bg_list: the bitmap is
 * the discontig-bg size, so the list follows it, and the list is in use
 * (the test chain.c and the tools apply).
 */
static bool gd_discontig(const struct o2_group_desc *gd)
{
	return le16(gd->bg_size) == O2_MAX_BG_BITMAP_SIZE &&
	       offsetof(struct o2_group_desc, bg_bitmap) + O2_MAX_BG_BITMAP_SIZE ==
		       offsetof(struct o2_group_desc, bg_list) &&
	       le16(gd->bg_list.next_free_rec) != 0;
}

/* The block that bit stands for in a suballocator group of bpc bits per cluster. */
static int group_bit_block(struct o2_fs *fs, const struct o2_group_desc *gd, uint64_t gblk,
			   unsigned bpc, unsigned bit, uint64_t *ret)
{
	uint64_t blk = 0;
	bool found = false;

	if (!gd_discontig(gd)) {
		blk = gblk + bit;
		found = true;
	} else {
		const struct o2_extent_list *el = &gd->bg_list;
		unsigned n = le16(el->next_free_rec);

		if (n > le16(el->count) || le16(el->count) > o2_extent_recs_per_gd(fs->bs))
			return o2_corrupt(fs, gblk, "discontiguous group lists %u of %u runs", n,
					  le16(el->count));
		for (unsigned i = 0; i < n && !found; i++) {
			const struct o2_extent_rec *rec = &el->recs[i];
			uint64_t first = (uint64_t)le32(rec->cpos) * bpc;
			uint64_t nbits = (uint64_t)le16(rec->leaf_clusters) * bpc;

			if (bit >= first && bit < first + nbits) {
				blk = le64(rec->blkno) + (bit - first);
				found = true;
			}
		}
		if (!found)
			return o2_corrupt(fs, gblk, "discontiguous group lists no cluster for bit %u",
					  bit);
	}
	if (blk <= O2_SUPER_BLKNO || blk >= fs->nblocks)
		return o2_corrupt(fs, gblk, "bit %u of the group stands for block %llu, outside "
				  "the volume", bit, (unsigned long long)blk);
	*ret = blk;
	return 0;
}

/* Read a group descriptor for changing: validated, logged in t. */
static int get_group(struct o2_trans *t, struct o2_fs *fs, uint64_t alloc_blkno, uint64_t blkno,
		     struct o2_buf **ret)
{
	struct o2_buf *b;
	int r = o2_bread(fs, blkno, O2_META_GROUP, &b);

	if (r < 0)
		return r;
	struct o2_group_desc *gd = gdesc(b);

	if (!o2_sig_ok(gd->bg_signature, O2_SIG_GROUP) || le64(gd->bg_blkno) != blkno ||
	    le64(gd->bg_parent_dinode) != alloc_blkno ||
	    le16(gd->bg_bits) > le16(gd->bg_size) * 8u ||
	    le16(gd->bg_free_bits_count) > le16(gd->bg_bits)) {
		o2_brelse(fs, b);
		return o2_corrupt(fs, blkno, "group descriptor of allocator %llu is damaged",
				  (unsigned long long)alloc_blkno);
	}
	*ret = b;
	return 0;
}

/*
 * Read the groups of chain c of the allocator ab in order: fn(fs, gd,
 * blkno, prev - 0 for the head -, arg) for each, until fn answers
 * non-zero (the answer) or the chain ends (0).
 */
typedef int (*group_fn)(struct o2_fs *fs, const struct o2_group_desc *gd, uint64_t blkno,
			uint64_t prev, void *arg);

static int chain_visit(struct o2_fs *fs, struct o2_buf *ab, unsigned c, group_fn fn, void *arg)
{
	uint64_t blk = le64(dinode(ab)->id2.i_chain.cl_recs[c].c_blkno), prev = 0;
	unsigned hops = 0;
	int r = 0;

	while (blk && r == 0) {
		struct o2_buf *gb;

		if (++hops > 1000000)
			return o2_corrupt(fs, ab->blkno, "chain %u loops", c);
		r = get_group(NULL, fs, ab->blkno, blk, &gb);
		if (r < 0)
			return r;
		r = fn(fs, gdesc(gb), blk, prev, arg);
		prev = blk;
		blk = le64(gdesc(gb)->bg_next_group);
		o2_brelse(fs, gb);
	}
	return r;
}

/* Mark [start, start+len) of a group used or free, with its chain and inode counts. */
static int group_change(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ab, struct o2_buf *gb,
			unsigned start, unsigned len, bool use)
{
	struct o2_group_desc *gd = gdesc(gb);
	struct o2_dinode *ai = dinode(ab);
	unsigned chain = le16(gd->bg_chain);
	int r;

	if (chain >= le16(ai->id2.i_chain.cl_next_free_rec))
		return o2_corrupt(fs, gb->blkno, "group claims chain %u of %u", chain,
				  le16(ai->id2.i_chain.cl_next_free_rec));
	r = o2_trans_add(t, gb);
	if (r == 0)
		r = o2_trans_add(t, ab);
	if (r < 0)
		return r;
	for (unsigned i = start; i < start + len; i++) {
		if (bit_test(gd->bg_bitmap, i) == use)
			return o2_corrupt(fs, gb->blkno, "bit %u is already %s", i,
					  use ? "in use" : "free");
		if (use)
			bit_set(gd->bg_bitmap, i);
		else
			bit_clear(gd->bg_bitmap, i);
	}
	int delta = use ? -(int)len : (int)len;
	struct o2_chain_rec *cr = &ai->id2.i_chain.cl_recs[chain];

	gd->bg_free_bits_count = cpu_le16((uint16_t)(le16(gd->bg_free_bits_count) + delta));
	gd->bg_reserved1 = 0; /* contiguous-free hint: 0 makes readers recompute it */
	cr->c_free = cpu_le32((uint32_t)((int64_t)le32(cr->c_free) + delta));
	ai->id1.bitmap1.i_used = cpu_le32((uint32_t)((int64_t)le32(ai->id1.bitmap1.i_used) - delta));
	if (ab->blkno == fs->sys.global_bitmap)
		refresh_counts(fs);
	return 0;
}

/* ---- global bitmap ---- */

static uint64_t cluster_group_blkno(const struct o2_fs *fs, uint32_t cpg, uint32_t g)
{
	return g == 0 ? fs->info.first_cluster_group : ((uint64_t)g * cpg) << fs->bpc_bits;
}

static int global_alloc(struct o2_trans *t, struct o2_fs *fs, uint32_t min, uint32_t want,
			uint32_t *ret_start, uint32_t *ret_len)
{
	struct o2_buf *ab;
	int r = o2_lock_need(fs, fs->sys.global_bitmap, true);

	if (r == 0)
		r = o2_bread(fs, fs->sys.global_bitmap, O2_META_INODE, &ab);
	if (r < 0)
		return r;
	struct o2_dinode *ai = dinode(ab);
	unsigned nchains = le16(ai->id2.i_chain.cl_next_free_rec);
	uint32_t cpg = le16(ai->id2.i_chain.cl_cpg);

	if (!cpg) {
		o2_brelse(fs, ab);
		return o2_corrupt(fs, fs->sys.global_bitmap, "global bitmap has 0 clusters per group");
	}

	if (want > cpg)
		want = cpg;
	if (min > want)
		min = want;
	r = -ENOSPC;
	/* one pass wanting the full run, a second accepting min */
	for (int pass = 0; pass < 2 && r == -ENOSPC; pass++) {
		uint32_t need = pass ? min : want;

		for (unsigned c = 0; c < nchains && r == -ENOSPC; c++) {
			uint64_t blk = le64(ai->id2.i_chain.cl_recs[c].c_blkno);
			unsigned hops = 0;

			if (le32(ai->id2.i_chain.cl_recs[c].c_free) < need)
				continue;
			while (blk && r == -ENOSPC) {
				struct o2_buf *gb;
				unsigned s, n;

				if (++hops > 1000000) {
					r = o2_corrupt(fs, ab->blkno, "chain %u loops", c);
					break;
				}
				r = get_group(t, fs, ab->blkno, blk, &gb);
				if (r < 0)
					break;
				r = -ENOSPC;
				struct o2_group_desc *gd = gdesc(gb);

				if (le16(gd->bg_free_bits_count) >= need &&
				    find_run(gd->bg_bitmap, le16(gd->bg_bits), need, want, &s, &n)) {
					uint64_t g0 = (blk == fs->info.first_cluster_group)
							      ? 0
							      : (blk >> fs->bpc_bits) / cpg;

					r = group_change(t, fs, ab, gb, s, n, true);
					if (r == 0) {
						*ret_start = (uint32_t)(g0 * cpg + s);
						*ret_len = n;
					}
				}
				blk = le64(gd->bg_next_group);
				o2_brelse(fs, gb);
			}
		}
	}
	o2_brelse(fs, ab);
	return r;
}

/* Mark clusters [start, start+len) of the global bitmap used or free (they may span groups). */
static int clusters_mark(struct o2_trans *t, struct o2_fs *fs, uint32_t start, uint32_t len,
			 bool use)
{
	struct o2_buf *ab;
	int r = o2_lock_need(fs, fs->sys.global_bitmap, true);

	if (r == 0)
		r = o2_bread(fs, fs->sys.global_bitmap, O2_META_INODE, &ab);
	if (r < 0)
		return r;
	uint32_t cpg = le16(dinode(ab)->id2.i_chain.cl_cpg);

	if (!cpg)
		r = o2_corrupt(fs, fs->sys.global_bitmap, "global bitmap has 0 clusters per group");
	while (len && r == 0) {
		uint32_t g = start / cpg, off = start % cpg, n = cpg - off < len ? cpg - off : len;
		struct o2_buf *gb;

		r = get_group(t, fs, ab->blkno, cluster_group_blkno(fs, cpg, g), &gb);
		if (r < 0)
			break;
		if (off + n > le16(gdesc(gb)->bg_bits))
			r = o2_corrupt(fs, gb->blkno, "%s clusters %u+%u past the group",
				       use ? "claiming" : "freeing", start, n);
		else
			r = group_change(t, fs, ab, gb, off, n, use);
		o2_brelse(fs, gb);
		start += n;
		len -= n;
	}
	o2_brelse(fs, ab);
	return r;
}

int o2_clusters_free_now(struct o2_trans *t, struct o2_fs *fs, uint32_t start, uint32_t len)
{
	return clusters_mark(t, fs, start, len, false);
}

/* ---- local alloc ----
 *
 * The slot's window: la_bm_off..+i_total of the global bitmap, all marked
 * used there on the window's behalf; the local bitmap says which of them
 * this node has handed out.  Small allocations come from the window, so
 * most of them touch no shared block.  A window that cannot serve a
 * request gives its unused bits back and a new one is claimed.
 */

/*
 * The window's size in MiB as kernel OCFS2 sizes it by default: nearly a
 * cluster group's worth (less 16 MiB for the groups other allocations
 * need, a multiple of 4), at most 256 MiB, at most a slot's share of the
 * volume; 8 MiB where groups are tiny (512-byte blocks and clusters up to
 * 8K, 1K blocks with 4K clusters).  A window that large is claimed from
 * the global bitmap - whose lock nodes pass to one another - once per some
 * hundred megabytes allocated rather than once per 8 MiB.  localalloc_mb
 * (the mount option) overrides it.
 */
static uint32_t window_mb(const struct o2_fs *fs)
{
	uint32_t group_bits = (fs->bs - (uint32_t)offsetof(struct o2_group_desc, bg_bitmap)) * 8;
	uint32_t mb_shift = 20 - fs->cbits; /* clusters per MiB, as a shift (cbits <= 20) */
	uint32_t mb = group_bits >> mb_shift, slot_mb;

	if ((fs->bs == 512 && fs->cs <= 8192) || (fs->bs == 1024 && fs->cs == 4096))
		return 8;
	mb = mb > 16 ? (mb - 16) & ~4u : 0;
	if (mb > 512)
		mb = 256;
	while (mb > 256)
		mb >>= 1;
	slot_mb = (fs->info.total_clusters / (fs->info.max_slots ? fs->info.max_slots : 1)) >>
		  mb_shift;
	return mb < slot_mb ? mb : slot_mb;
}

/* Bits a new window asks for: window_mb's worth, at least one, within the bitmap. */
static uint32_t window_bits(const struct o2_fs *fs, const struct o2_dinode *la)
{
	uint32_t cap = (uint32_t)le16(la->id2.i_lab.la_size) * 8;
	uint32_t asked = fs->opts.localalloc_mb;
	/* too large for the bitmap: the default, as the kernel reverts it */
	uint32_t mb = asked && asked <= cap >> (20 - fs->cbits) ? asked : window_mb(fs);
	uint32_t want = mb << (20 - fs->cbits);

	if (want < 1)
		want = 1;
	return want < cap ? want : cap;
}

/* Return the window's unused bits to the global bitmap and empty it (la logged). */
static int window_return(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *lb)
{
	struct o2_dinode *di = dinode(lb);
	uint32_t total = le32(di->id1.bitmap1.i_total), off = le32(di->id2.i_lab.la_bm_off);
	unsigned size = le16(di->id2.i_lab.la_size);
	int r = 0;

	if (total > size * 8u)
		return o2_corrupt(fs, lb->blkno, "local alloc window larger than its bitmap");
	for (uint32_t i = 0; i < total && r == 0;) {
		uint32_t s0 = i;

		if (bit_test(di->id2.i_lab.la_bitmap, i)) {
			i++;
			continue;
		}
		while (i < total && !bit_test(di->id2.i_lab.la_bitmap, i))
			i++;
		r = o2_clusters_free_now(t, fs, off + s0, i - s0);
	}
	if (r == 0) {
		memset(di->id2.i_lab.la_bitmap, 0, size);
		di->id2.i_lab.la_bm_off = 0;
		di->id1.bitmap1.i_total = 0;
		di->id1.bitmap1.i_used = 0;
		refresh_counts(fs);
	}
	return r;
}

/*
 * A run of min to want clusters from the window as it stands (lb, the
 * window's inode, not sliding it): 0 with the run marked used in the
 * window's bitmap (lb logged in t), -ENOSPC when the window has none.
 * Nothing of the global bitmap changes: no lock but this slot's is needed.
 */
static int window_run(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *lb, uint32_t min,
		      uint32_t want, uint32_t *ret_start, uint32_t *ret_len)
{
	struct o2_dinode *di = dinode(lb);
	uint32_t total = le32(di->id1.bitmap1.i_total);
	unsigned s0, n;
	int r;

	if (total > le16(di->id2.i_lab.la_size) * 8u)
		return o2_corrupt(fs, lb->blkno, "local alloc window larger than its bitmap");
	if (!total || !find_run(di->id2.i_lab.la_bitmap, total, min, want, &s0, &n))
		return -ENOSPC;
	r = o2_trans_add(t, lb);
	if (r < 0)
		return r;
	for (unsigned i = s0; i < s0 + n; i++)
		bit_set(di->id2.i_lab.la_bitmap, i);
	di->id1.bitmap1.i_used = cpu_le32(le32(di->id1.bitmap1.i_used) + n);
	*ret_start = le32(di->id2.i_lab.la_bm_off) + s0;
	*ret_len = n;
	return 0;
}

static int clusters_alloc(struct o2_trans *t, struct o2_fs *fs, uint32_t min, uint32_t want,
			  uint32_t *ret_start, uint32_t *ret_len)
{
	struct o2_buf *lb;
	int r;

	if (!fs->sys.local_alloc)
		return global_alloc(t, fs, min, want, ret_start, ret_len);
	r = o2_bread(fs, fs->sys.local_alloc, O2_META_INODE, &lb);
	if (r < 0)
		return r;
	struct o2_dinode *di = dinode(lb);
	uint32_t wbits = window_bits(fs, di);

	if (min > wbits || !le16(di->id2.i_lab.la_size)) {
		/* larger than any window: straight from the global bitmap */
		o2_brelse(fs, lb);
		return global_alloc(t, fs, min, want, ret_start, ret_len);
	}
	if (want > wbits)
		want = wbits;
	for (int attempt = 0; attempt < 2; attempt++) {
		uint32_t total = le32(di->id1.bitmap1.i_total);

		r = window_run(t, fs, lb, min, want, ret_start, ret_len);
		if (r != -ENOSPC || attempt) {
			o2_brelse(fs, lb);
			return r == -ENOSPC ? global_alloc(t, fs, min, want, ret_start, ret_len) : r;
		}
		/*
		 * Slide the window: the new one first, so that a volume with no
		 * run of min clusters left answers ENOSPC having changed nothing
		 * (global_alloc changes nothing when it finds nothing); then the
		 * old window's unused bits go back.  The old window's bits are
		 * all marked used in the global bitmap, so the new one cannot
		 * overlap it.
		 */
		uint32_t start, got;

		r = global_alloc(t, fs, min, wbits, &start, &got);
		if (r == 0)
			r = o2_trans_add(t, lb);
		if (r == 0 && total)
			r = window_return(t, fs, lb);
		if (r < 0)
			break;
		di->id2.i_lab.la_bm_off = cpu_le32(start);
		di->id1.bitmap1.i_total = cpu_le32(got);
		di->id1.bitmap1.i_used = 0;
		memset(di->id2.i_lab.la_bitmap, 0, le16(di->id2.i_lab.la_size));
	}
	o2_brelse(fs, lb);
	if (r == -ENOSPC) /* fragmented: whatever the global bitmap still has */
		r = global_alloc(t, fs, min, want, ret_start, ret_len);
	return r;
}

int o2_clusters_alloc(struct o2_trans *t, struct o2_fs *fs, uint32_t min, uint32_t want,
		      uint32_t *ret_start, uint32_t *ret_len)
{
	/* nothing to give (o2_reserve left no spare): say so before changing anything */
	if (!want || want < min)
		return -ENOSPC;
	int r = clusters_alloc(t, fs, min, want, ret_start, ret_len);

	/* bits handed out of the window change no group: count them here */
	refresh_counts(fs);
	return r;
}

/* ---- truncate log ---- */

int o2_clusters_free(struct o2_trans *t, struct o2_fs *fs, uint32_t start, uint32_t len)
{
	struct o2_buf *tb;
	int r;

	if (!len)
		return 0;
	r = o2_bread(fs, fs->sys.truncate_log, O2_META_INODE, &tb);
	if (r < 0)
		return r;
	struct o2_truncate_log *tl = &dinode(tb)->id2.i_dealloc;
	unsigned used = le16(tl->tl_used), count = le16(tl->tl_count);

	r = o2_trans_add(t, tb);
	if (r < 0)
		goto out;
	if (used && le32(tl->tl_recs[used - 1].t_start) + le32(tl->tl_recs[used - 1].t_clusters) == start) {
		tl->tl_recs[used - 1].t_clusters = cpu_le32(le32(tl->tl_recs[used - 1].t_clusters) + len);
	} else if (used < count) {
		tl->tl_recs[used].t_start = cpu_le32(start);
		tl->tl_recs[used].t_clusters = cpu_le32(len);
		tl->tl_used = cpu_le16((uint16_t)(used + 1));
	} else {
		/* full: give these back at once (the log was flushed too rarely) */
		r = o2_clusters_free_now(t, fs, start, len);
	}
out:
	o2_brelse(fs, tb);
	return r;
}

static int reclaim_empty_groups(struct o2_fs *fs);

bool o2_trunclog_pending(struct o2_fs *fs)
{
	struct o2_buf *tb;
	bool any = fs->empty_groups;

	if (fs->sys.truncate_log && o2_bread(fs, fs->sys.truncate_log, O2_META_INODE, &tb) == 0) {
		any = le16(dinode(tb)->id2.i_dealloc.tl_used) != 0;
		o2_brelse(fs, tb);
	}
	return any;
}

static bool trunclog_needs_flush(struct o2_fs *fs)
{
	struct o2_buf *tb;
	bool need = false;

	if (o2_bread(fs, fs->sys.truncate_log, O2_META_INODE, &tb) == 0) {
		const struct o2_truncate_log *tl = &dinode(tb)->id2.i_dealloc;

		need = le16(tl->tl_used) * 2 > le16(tl->tl_count);
		o2_brelse(fs, tb);
	}
	return need;
}

/* Commit, then give the log's clusters back (empty groups stay where they are). */
static int trunclog_empty(struct o2_fs *fs)
{
	struct o2_buf *tb;
	int r;

	/* giving clusters back changes the global bitmap */
	r = o2_lock_need(fs, fs->sys.global_bitmap, true);
	if (r < 0)
		return r;
	/* what the log holds was freed by committed transactions only */
	r = o2_journal_commit(fs);
	if (r < 0)
		return r;
	for (;;) {
		struct o2_trans *t;
		unsigned used;

		r = o2_bread(fs, fs->sys.truncate_log, O2_META_INODE, &tb);
		if (r < 0)
			return r;
		used = le16(dinode(tb)->id2.i_dealloc.tl_used);
		o2_brelse(fs, tb);
		if (!used)
			return 0;
		r = o2_trans_begin(fs, 16, &t);
		if (r < 0)
			return r;
		r = o2_bread(fs, fs->sys.truncate_log, O2_META_INODE, &tb);
		if (r == 0) {
			struct o2_truncate_log *tl = &dinode(tb)->id2.i_dealloc;
			struct o2_truncate_rec rec = tl->tl_recs[used - 1];
			uint32_t start = le32(rec.t_start), len = le32(rec.t_clusters);
			/* at most a few groups per transaction */
			uint32_t take = len > 4 * 32256u ? 4 * 32256u : len;

			r = o2_trans_add(t, tb);
			if (r == 0)
				r = o2_clusters_free_now(t, fs, start + len - take, take);
			if (r == 0) {
				if (take == len) {
					tl->tl_used = cpu_le16((uint16_t)(used - 1));
					/* nothing stale past tl_used: every flush leaves the same block */
					memset(&tl->tl_recs[used - 1], 0, sizeof(tl->tl_recs[used - 1]));
				} else
					tl->tl_recs[used - 1].t_clusters = cpu_le32(len - take);
			}
			o2_brelse(fs, tb);
		}
		int e = o2_trans_finish(t, r);

		if (r == 0)
			r = e;
		if (r < 0)
			return r;
	}
}

int o2_trunclog_flush(struct o2_fs *fs)
{
	/* empty groups first: their clusters go through the log too */
	int r = o2_lock_need(fs, fs->sys.global_bitmap, true);

	if (r == 0 && fs->empty_groups)
		r = o2_lock_need(fs, fs->sys.inode_alloc, true);
	if (r == 0 && fs->empty_groups)
		r = o2_lock_need(fs, fs->sys.extent_alloc, true);
	if (r == 0)
		r = reclaim_empty_groups(fs);

	return r < 0 ? r : trunclog_empty(fs);
}

/* ---- suballocators ---- */

/* The chain a new group joins: an unused one first, else the one with fewest bits. */
static unsigned smallest_chain(const struct o2_chain_list *cl)
{
	unsigned best = 0;

	for (unsigned c = 0; c < le16(cl->cl_count); c++)
		if (le32(cl->cl_recs[c].c_total) < le32(cl->cl_recs[best].c_total))
			best = c;
	return best;
}

/*
 * Pieces for a new group: free runs of the global bitmap, or unused runs
 * of the local alloc window, the longest first.
 */
struct run {
	uint32_t start, len;
	uint32_t group; /* global group index; the window's runs: its group */
	bool window;
};

struct runs {
	struct run *v;
	unsigned n, cap;
	uint32_t need; /* a run longer than the group is cut to it */
};

/* Keep the cap longest runs offered, longest first (ties: the first offered). */
static void runs_offer(struct runs *rs, const struct run *x)
{
	unsigned i;

	if (!x->len || (rs->n == rs->cap && rs->v[rs->n - 1].len >= x->len))
		return;
	if (rs->n < rs->cap)
		rs->n++;
	for (i = rs->n - 1; i > 0 && rs->v[i - 1].len < x->len; i--)
		rs->v[i] = rs->v[i - 1];
	rs->v[i] = *x;
}

/* Offer the clear runs of a bitmap whose bit i is cluster base + i. */
static void runs_scan(struct runs *rs, const uint8_t *bm, unsigned bits, uint32_t base,
		      uint32_t group, bool window)
{
	for (unsigned i = 0; i < bits;) {
		if (bit_test(bm, i)) {
			i++;
			continue;
		}
		unsigned s = i;

		while (i < bits && !bit_test(bm, i))
			i++;
		runs_offer(rs, &(struct run){ base + s, i - s < rs->need ? i - s : rs->need, group,
					      window });
	}
}

/* Offer every free run the global bitmap and the window hold. */
static int runs_collect(struct o2_fs *fs, struct runs *rs)
{
	struct o2_buf *ab, *gb, *lb;
	int r = o2_bread(fs, fs->sys.global_bitmap, O2_META_INODE, &ab);

	if (r < 0)
		return r;
	const struct o2_chain_list *cl = &dinode(ab)->id2.i_chain;
	uint32_t cpg = le16(cl->cl_cpg);

	if (!cpg) {
		o2_brelse(fs, ab);
		return o2_corrupt(fs, fs->sys.global_bitmap, "global bitmap has 0 clusters per group");
	}

	for (unsigned c = 0; c < le16(cl->cl_next_free_rec) && r == 0; c++) {
		uint64_t blk = le64(cl->cl_recs[c].c_blkno);
		unsigned hops = 0;

		while (blk && r == 0) {
			if (++hops > 1000000) {
				r = o2_corrupt(fs, ab->blkno, "chain %u loops", c);
				break;
			}
			r = get_group(NULL, fs, ab->blkno, blk, &gb);
			if (r < 0)
				break;
			const struct o2_group_desc *gd = gdesc(gb);
			uint32_t g = blk == fs->info.first_cluster_group
					     ? 0
					     : (uint32_t)((blk >> fs->bpc_bits) / cpg);

			runs_scan(rs, gd->bg_bitmap, le16(gd->bg_bits), g * cpg, g, false);
			blk = le64(gd->bg_next_group);
			o2_brelse(fs, gb);
		}
	}
	o2_brelse(fs, ab);
	if (r < 0 || !fs->sys.local_alloc)
		return r;
	r = o2_bread(fs, fs->sys.local_alloc, O2_META_INODE, &lb);
	if (r < 0)
		return r;
	const struct o2_dinode *la = dinode(lb);
	uint32_t total = le32(la->id1.bitmap1.i_total), off = le32(la->id2.i_lab.la_bm_off);

	if (total > le16(la->id2.i_lab.la_size) * 8u)
		r = o2_corrupt(fs, lb->blkno, "local alloc window larger than its bitmap");
	else if (total)
		runs_scan(rs, la->id2.i_lab.la_bitmap, total, off, cpg ? off / cpg : 0, true);
	o2_brelse(fs, lb);
	return r;
}

/*
 * Choose the pieces of a group of need clusters in at most maxrecs runs,
 * touching at most maxgroups global groups, so that the allocation stays
 * within its handle's credits: the allocator inode, the new descriptor, the
 * global bitmap inode and the window's inode take four, the groups the
 * rest (GROW_CREDITS(maxgroups)).  Changes nothing; -ENOSPC when no such
 * choice exists.
 */
#define PLAN_GROUPS_INLINE (O2_ALLOC_CREDITS - 4)
#define PLAN_GROUPS_MAX 32
#define GROW_CREDITS(groups) (4 + (groups))

static int plan_group(struct o2_fs *fs, uint32_t need, unsigned maxrecs, unsigned maxgroups,
		      struct run *ret, unsigned *ret_n)
{
	/* more candidates than records: some may be skipped for their group */
	struct runs rs = { .cap = maxrecs * 4, .need = need };
	uint32_t groups[PLAN_GROUPS_MAX], got = 0;
	unsigned ngroups = 0, n = 0;
	int r;

	rs.v = o2_calloc(rs.cap, sizeof(*rs.v));
	if (!rs.v)
		return -ENOMEM;
	r = runs_collect(fs, &rs);
	for (unsigned i = 0; i < rs.n && got < need && n < maxrecs && r == 0; i++) {
		struct run x = rs.v[i];
		unsigned k = 0;

		while (k < ngroups && groups[k] != x.group)
			k++;
		if (k == ngroups) {
			if (ngroups == maxgroups)
				continue;
			groups[ngroups++] = x.group;
		}
		if (x.len > need - got)
			x.len = need - got;
		ret[n++] = x;
		got += x.len;
	}
	free(rs.v);
	if (r < 0)
		return r;
	if (got < need)
		return -ENOSPC;
	*ret_n = n;
	return 0;
}

/* Whether new allocator groups come from the window first (claim_group). */
static bool groups_from_window(const struct o2_fs *fs)
{
	return fs->sys.local_alloc && (fs->opts.flags & O2_OPEN_SHARED);
}

/*
 * A whole group's clusters in one run from this slot's window, as it
 * stands, on a shared volume (claim_group): -ENOSPC if it has none.
 */
static int window_group(struct o2_trans *t, struct o2_fs *fs, uint32_t cpg, struct run *ret)
{
	struct o2_buf *lb;
	int r;

	if (!groups_from_window(fs))
		return -ENOSPC;
	r = o2_bread(fs, fs->sys.local_alloc, O2_META_INODE, &lb);
	if (r < 0)
		return r;
	r = window_run(t, fs, lb, cpg, cpg, &ret->start, &ret->len);
	o2_brelse(fs, lb);
	if (r == 0)
		refresh_counts(fs); /* bits handed out of the window change no group */
	return r;
}

/*
 * Claim the clusters of a new suballocator group: one run of a whole
 * group's clusters, or on discontig-bg volumes up to a descriptor's worth
 * of shorter runs.  ret gets the runs (cap: o2_extent_recs_per_gd).
 *
 * The kernel takes inode groups from the global bitmap alone
 * (ALLOC_GROUPS_FROM_GLOBAL), for their locality, and so does a volume of
 * one node here.  On a shared volume the window comes first when it holds
 * a whole group: the global bitmap's lock would otherwise pass between
 * nodes every thousand creates, and each pass makes the node that gives
 * it up write its whole log home.  The group is as contiguous either way,
 * and the format does not care where its clusters came from.
 */
static int claim_group(struct o2_trans *t, struct o2_fs *fs, uint32_t cpg, unsigned maxgroups,
		       struct run *ret, unsigned *ret_n)
{
	unsigned maxrecs = 1, n;
	bool window = false;
	int r;

	r = window_group(t, fs, cpg, &ret[0]);
	if (r != -ENOSPC) {
		*ret_n = 1;
		return r;
	}
	r = global_alloc(t, fs, cpg, cpg, &ret[0].start, &ret[0].len);
	if (r != -ENOSPC) {
		*ret_n = 1;
		return r;
	}
	/* no whole run in the global bitmap: the window's, or pieces */
	if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_DISCONTIG_BG))
		maxrecs = o2_extent_recs_per_gd(fs->bs);
	r = plan_group(fs, cpg, maxrecs, maxgroups, ret, &n);
	if (r < 0)
		return r;
	for (unsigned i = 0; i < n; i++)
		window |= ret[i].window;
	if (window) {
		/* the window's unused bits go back to the bitmap first */
		struct o2_buf *lb;

		r = o2_bread(fs, fs->sys.local_alloc, O2_META_INODE, &lb);
		if (r < 0)
			return r;
		r = o2_trans_add(t, lb);
		if (r == 0)
			r = window_return(t, fs, lb);
		o2_brelse(fs, lb);
	}
	for (unsigned i = 0; i < n && r == 0; i++)
		r = clusters_mark(t, fs, ret[i].start, ret[i].len, true);
	if (r == 0)
		*ret_n = n;
	return r;
}

/*
 * Claim clusters for a new block group and link it into the allocator;
 * its pieces may come from at most maxgroups global groups (t's credits).
 */
static int grow_suballoc(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ab,
			 unsigned maxgroups)
{
	struct o2_dinode *ai = dinode(ab);
	struct o2_chain_list *cl = &ai->id2.i_chain;
	uint32_t cpg = le16(cl->cl_cpg), bpc = le16(cl->cl_bpc);
	unsigned bits = cpg * bpc, size, nruns;
	struct o2_buf *gb;
	struct run *runs;
	int r;

	if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_DISCONTIG_BG))
		size = O2_MAX_BG_BITMAP_SIZE;
	else
		size = fs->bs - offsetof(struct o2_group_desc, bg_bitmap);
	if (!cpg || bpc != 1u << fs->bpc_bits || bits > size * 8 || bits > 0xffff)
		return o2_corrupt(fs, ab->blkno, "allocator groups of %u clusters of %u blocks do "
				  "not fit a descriptor", cpg, bpc);
	runs = o2_calloc(o2_extent_recs_per_gd(fs->bs), sizeof(*runs));
	if (!runs)
		return -ENOMEM;
	r = claim_group(t, fs, cpg, maxgroups, runs, &nruns);
	if (r < 0)
		goto out_free;
	uint64_t blkno = (uint64_t)runs[0].start << fs->bpc_bits;

	r = o2_bnew(fs, blkno, O2_META_GROUP, &gb);
	if (r < 0)
		goto out_free;
	r = o2_trans_add(t, gb);
	if (r == 0)
		r = o2_trans_add(t, ab);
	if (r < 0)
		goto out;
	unsigned chain = smallest_chain(cl);
	struct o2_group_desc *gd = gdesc(gb);
	struct o2_chain_rec *cr = &cl->cl_recs[chain];

	memcpy(gd->bg_signature, O2_SIG_GROUP, sizeof(O2_SIG_GROUP));
	gd->bg_size = cpu_le16((uint16_t)size);
	gd->bg_bits = cpu_le16((uint16_t)bits);
	gd->bg_free_bits_count = cpu_le16((uint16_t)(bits - 1));
	gd->bg_chain = cpu_le16((uint16_t)chain);
	gd->bg_generation = cpu_le32(fs->info.fs_generation);
	gd->bg_next_group = cr->c_blkno;
	gd->bg_parent_dinode = cpu_le64(ab->blkno);
	gd->bg_blkno = cpu_le64(blkno);
	if (nruns > 1) {
		/* the runs in order: group cluster cpos lives in the record covering it */
		struct o2_extent_list *el = &gd->bg_list;
		uint32_t cpos = 0;

		el->count = cpu_le16((uint16_t)o2_extent_recs_per_gd(fs->bs));
		el->next_free_rec = cpu_le16((uint16_t)nruns);
		for (unsigned i = 0; i < nruns; i++) {
			el->recs[i].cpos = cpu_le32(cpos);
			el->recs[i].leaf_clusters = cpu_le16((uint16_t)runs[i].len);
			el->recs[i].blkno = cpu_le64((uint64_t)runs[i].start << fs->bpc_bits);
			cpos += runs[i].len;
		}
	}
	bit_set(gd->bg_bitmap, 0); /* the descriptor itself */
	cr->c_blkno = cpu_le64(blkno);
	cr->c_total = cpu_le32(le32(cr->c_total) + bits);
	cr->c_free = cpu_le32(le32(cr->c_free) + bits - 1);
	if (chain >= le16(cl->cl_next_free_rec))
		cl->cl_next_free_rec = cpu_le16((uint16_t)(chain + 1));
	ai->id1.bitmap1.i_total = cpu_le32(le32(ai->id1.bitmap1.i_total) + bits);
	ai->id1.bitmap1.i_used = cpu_le32(le32(ai->id1.bitmap1.i_used) + 1);
	ai->i_clusters = cpu_le32(le32(ai->i_clusters) + cpg);
	ai->i_size = cpu_le64((uint64_t)le32(ai->i_clusters) << fs->cbits);
out:
	o2_brelse(fs, gb);
out_free:
	free(runs);
	return r;
}

int o2_suballoc_alloc(struct o2_trans *t, struct o2_fs *fs, uint64_t alloc_blkno,
		      struct o2_suballoc_res *ret)
{
	struct o2_buf *ab;
	int r = o2_lock_need(fs, alloc_blkno, true);

	if (r == 0)
		r = o2_bread(fs, alloc_blkno, O2_META_INODE, &ab);
	if (r < 0)
		return r;
	for (int attempt = 0; attempt < 2; attempt++) {
		struct o2_chain_list *cl = &dinode(ab)->id2.i_chain;

		r = -ENOSPC;
		for (unsigned c = 0; c < le16(cl->cl_next_free_rec) && r == -ENOSPC; c++) {
			uint64_t blk = le64(cl->cl_recs[c].c_blkno);
			unsigned hops = 0;

			if (!le32(cl->cl_recs[c].c_free))
				continue;
			while (blk && r == -ENOSPC) {
				struct o2_buf *gb;
				unsigned s, n;

				if (++hops > 1000000) {
					r = o2_corrupt(fs, alloc_blkno, "chain %u loops", c);
					break;
				}
				r = get_group(t, fs, alloc_blkno, blk, &gb);
				if (r < 0)
					break;
				r = -ENOSPC;
				struct o2_group_desc *gd = gdesc(gb);

				uint64_t bblk = 0;

				if (le16(gd->bg_free_bits_count) &&
				    find_run(gd->bg_bitmap, le16(gd->bg_bits), 1, 1, &s, &n)) {
					r = group_bit_block(fs, gd, blk, le16(cl->cl_bpc), s, &bblk);
					if (r == 0)
						r = group_change(t, fs, ab, gb, s, 1, true);
					if (r == 0) {
						ret->blkno = bblk;
						ret->group = blk;
						ret->bit = (uint16_t)s;
						ret->slot = (uint16_t)fs->opts.slot;
					}
				}
				blk = le64(gd->bg_next_group);
				o2_brelse(fs, gb);
			}
		}
		if (r != -ENOSPC || attempt)
			break;
		/*
		 * Only when the operation's reservation (o2_reserve) fell
		 * short of what it used: a bug in an estimate, not a full
		 * volume, which the reservation would have reported first.
		 */
		r = grow_suballoc(t, fs, ab, PLAN_GROUPS_INLINE);
		if (r < 0)
			break;
		r = -ENOSPC;
	}
	o2_brelse(fs, ab);
	return r;
}

/* Free bits of a suballocator: its total less its used; and its clusters per group. */
static int suballoc_free_bits(struct o2_fs *fs, uint64_t alloc_blkno, uint32_t *ret,
			      uint32_t *ret_cpg)
{
	struct o2_buf *ab;
	int r = o2_bread(fs, alloc_blkno, O2_META_INODE, &ab);

	if (r < 0)
		return r;
	uint32_t total = le32(dinode(ab)->id1.bitmap1.i_total);
	uint32_t used = le32(dinode(ab)->id1.bitmap1.i_used);

	*ret_cpg = le16(dinode(ab)->id2.i_chain.cl_cpg);
	o2_brelse(fs, ab);
	*ret = used < total ? total - used : 0;
	return 0;
}

int o2_suballoc_reserve(struct o2_fs *fs, uint64_t alloc_blkno, uint32_t bits, bool *ret_grew)
{
	uint32_t avail;
	int r = o2_lock_need(fs, alloc_blkno, true);

	for (unsigned rounds = 0; r == 0; rounds++) {
		struct o2_trans *t;
		struct o2_buf *ab;
		uint32_t cpg;

		r = suballoc_free_bits(fs, alloc_blkno, &avail, &cpg);
		if (r < 0 || avail >= bits)
			return r;
		/* a new group comes from the window if it can (claim_group), else
		   from the global bitmap */
		r = groups_from_window(fs) ? o2_lock_clusters(fs, cpg, cpg)
					   : o2_lock_need(fs, fs->sys.global_bitmap, true);
		if (r < 0)
			return r;
		if (rounds >= 16) /* a group holds far more than one operation takes */
			return o2_fail(fs, -ENOSPC, "allocator %llu grew %u times and still has "
				       "only %u of %u free blocks", (unsigned long long)alloc_blkno,
				       rounds, avail, bits);
		/*
		 * A handle of its own: the new group is whole and consistent
		 * whether or not the operation that asked for it goes on, as
		 * the kernel's group allocation is.  Nothing is logged before
		 * the clusters are found, so -ENOSPC here changes nothing.
		 */
		r = o2_trans_begin(fs, GROW_CREDITS(PLAN_GROUPS_MAX), &t);
		if (r < 0)
			return r;
		r = o2_bread(fs, alloc_blkno, O2_META_INODE, &ab);
		if (r == 0) {
			r = grow_suballoc(t, fs, ab, PLAN_GROUPS_MAX);
			o2_brelse(fs, ab);
		}
		r = o2_trans_finish(t, r);
		if (r < 0)
			return r;
		if (ret_grew)
			*ret_grew = true;
	}
	return r;
}

int o2_lock_clusters(struct o2_fs *fs, uint32_t want, uint32_t run)
{
	struct o2_buf *lb;
	unsigned s0, n;
	int r;

	if (o2_lock_have(fs, fs->sys.global_bitmap, true))
		return 0;
	if (!fs->sys.local_alloc)
		return o2_lock_need(fs, fs->sys.global_bitmap, true);
	r = o2_bread(fs, fs->sys.local_alloc, O2_META_INODE, &lb);
	if (r < 0)
		return r;
	const struct o2_dinode *la = dinode(lb);
	uint32_t total = le32(la->id1.bitmap1.i_total), used = le32(la->id1.bitmap1.i_used);
	bool enough = total <= le16(la->id2.i_lab.la_size) * 8u && used <= total &&
		      total - used >= want &&
		      (run <= 1 || find_run(la->id2.i_lab.la_bitmap, total, run, run, &s0, &n));

	o2_brelse(fs, lb);
	return enough ? 0 : o2_lock_need(fs, fs->sys.global_bitmap, true);
}

/* Free clusters in the local-alloc window. */
static int window_free(struct o2_fs *fs, uint32_t *ret)
{
	struct o2_buf *lb;
	int r;

	*ret = 0;
	if (!fs->sys.local_alloc)
		return 0;
	r = o2_bread(fs, fs->sys.local_alloc, O2_META_INODE, &lb);
	if (r < 0)
		return r;
	uint32_t total = le32(dinode(lb)->id1.bitmap1.i_total);
	uint32_t used = le32(dinode(lb)->id1.bitmap1.i_used);

	o2_brelse(fs, lb);
	*ret = used < total ? total - used : 0;
	return 0;
}

int o2_clusters_avail(struct o2_fs *fs, uint32_t *ret_free)
{
	/* without the global bitmap's lock, only the window is sure */
	if (!o2_lock_have(fs, fs->sys.global_bitmap, true))
		return window_free(fs, ret_free);

	uint32_t total, used;
	int r = cluster_counts(fs, &total, &used);

	if (r == 0)
		*ret_free = used < total ? total - used : 0;
	return r;
}

static int group_has_run(struct o2_fs *fs, const struct o2_group_desc *gd, uint64_t blkno,
			 uint64_t prev, void *arg)
{
	uint32_t len = *(uint32_t *)arg;
	unsigned s, n;

	return le16(gd->bg_free_bits_count) >= len &&
	       find_run(gd->bg_bitmap, le16(gd->bg_bits), len, len, &s, &n);
}

int o2_clusters_have_run(struct o2_fs *fs, uint32_t len, bool *ret)
{
	struct o2_buf *b;
	unsigned s, n;
	int r;

	*ret = false;
	/* where o2_clusters_alloc looks: the window, then the global groups */
	if (fs->sys.local_alloc) {
		r = o2_bread(fs, fs->sys.local_alloc, O2_META_INODE, &b);
		if (r < 0)
			return r;
		const struct o2_dinode *la = dinode(b);
		uint32_t total = le32(la->id1.bitmap1.i_total);

		*ret = total <= le16(la->id2.i_lab.la_size) * 8u &&
		       find_run(la->id2.i_lab.la_bitmap, total, len, len, &s, &n);
		o2_brelse(fs, b);
		if (*ret)
			return 0;
	}
	/* unlocked, the global bitmap may say anything: only the window counts */
	if (!o2_lock_have(fs, fs->sys.global_bitmap, true))
		return 0;
	r = o2_bread(fs, fs->sys.global_bitmap, O2_META_INODE, &b);
	if (r < 0)
		return r;
	const struct o2_chain_list *cl = &dinode(b)->id2.i_chain;

	/* stop at the first run: a large volume has many groups */
	for (unsigned c = 0; c < le16(cl->cl_next_free_rec) && r == 0; c++)
		if (le32(cl->cl_recs[c].c_free) >= len)
			r = chain_visit(fs, b, c, group_has_run, &len);
	o2_brelse(fs, b);
	if (r > 0)
		*ret = true;
	return r < 0 ? r : 0;
}

int o2_suballoc_new_block(struct o2_trans *t, struct o2_fs *fs, uint64_t alloc_blkno,
			  uint8_t kind, struct o2_suballoc_res *res, struct o2_buf **ret)
{
	int r = o2_suballoc_alloc(t, fs, alloc_blkno, res);

	return r < 0 ? r : o2_trans_bnew(t, fs, res->blkno, kind, ret);
}

int o2_suballoc_free(struct o2_trans *t, struct o2_fs *fs, uint64_t alloc_blkno, uint64_t group,
		     uint16_t bit)
{
	struct o2_buf *ab, *gb;
	int r = o2_bread(fs, alloc_blkno, O2_META_INODE, &ab);

	if (r < 0)
		return r;
	r = get_group(t, fs, alloc_blkno, group, &gb);
	if (r == 0) {
		if (bit == 0 || bit >= le16(gdesc(gb)->bg_bits))
			r = o2_corrupt(fs, group, "freeing bit %u of a %u-bit group", bit,
				       le16(gdesc(gb)->bg_bits));
		else
			r = group_change(t, fs, ab, gb, bit, 1, false);
		/* this slot's group now empty: given back at the next truncate log flush */
		if (r == 0 && (alloc_blkno == fs->sys.inode_alloc ||
			       alloc_blkno == fs->sys.extent_alloc) &&
		    le16(gdesc(gb)->bg_free_bits_count) + 1u == le16(gdesc(gb)->bg_bits))
			fs->empty_groups = true;
		o2_brelse(fs, gb);
	}
	o2_brelse(fs, ab);
	return r;
}

/*
 * A free into an allocator whose lock this operation does not hold (the
 * kernel's dealloc context): kept, in the order made, for
 * o2_fs_run_deallocs after the transaction.
 */
struct o2_dealloc {
	uint64_t alloc, group;
	uint16_t bit;
};

static int dealloc_defer(struct o2_fs *fs, uint64_t alloc, uint64_t group, uint16_t bit)
{
	if (fs->ndeallocs == fs->capdeallocs) {
		unsigned cap = fs->capdeallocs ? 2 * fs->capdeallocs : 16;
		struct o2_dealloc *d = o2_realloc(fs->deallocs, (size_t)cap * sizeof(*d));

		if (!d)
			return -ENOMEM;
		fs->deallocs = d;
		fs->capdeallocs = cap;
	}
	fs->deallocs[fs->ndeallocs++] = (struct o2_dealloc){ alloc, group, bit };
	return 0;
}

int o2_suballoc_give_back(struct o2_trans *t, struct o2_fs *fs, enum o2_sysfile type,
			  uint16_t slot, uint64_t group, uint16_t bit, uint64_t blkno)
{
	uint64_t alloc = type == O2_SYS_INODE_ALLOC ? fs->sys.inode_alloc : fs->sys.extent_alloc;
	int r = 0;

	if (!group) /* not discontig-bg: the group starts bit blocks before */
		group = blkno - bit;
	if (slot != fs->opts.slot)
		r = o2_sysfile_lookup(fs, type, slot, &alloc);
	if (r < 0)
		return r;
	if (!o2_lock_have(fs, alloc, true))
		return dealloc_defer(fs, alloc, group, bit);
	return o2_suballoc_free(t, fs, alloc, group, bit);
}

bool o2_fs_deallocs_pending(const struct o2_fs *fs)
{
	return fs->ndeallocs != 0;
}

/* Frees of one allocator per transaction, at most this many. */
#define DEALLOCS_PER_TRANS 16

int o2_fs_run_deallocs(struct o2_fs *fs)
{
	while (fs->ndeallocs) {
		uint64_t alloc = fs->deallocs[fs->ndeallocs - 1].alloc;
		struct o2_trans *t;
		int r, e;

		if (!fs->journal || fs->ro_reason) {
			/* nothing may change any more: the blocks stay allocated */
			fs->ndeallocs = 0;
			return fs->journal ? -EROFS : 0;
		}
		r = o2_lock_need(fs, alloc, true);
		if (r < 0)
			return r;
		/* the allocator inode and a group descriptor per free */
		r = o2_trans_begin(fs, 1 + 2 * DEALLOCS_PER_TRANS, &t);
		if (r < 0)
			return r;
		/* this allocator's frees, from the last (the rest close up) */
		unsigned n = 0;

		for (unsigned i = fs->ndeallocs; r == 0 && i-- > 0 && n < DEALLOCS_PER_TRANS;) {
			struct o2_dealloc d = fs->deallocs[i];

			if (d.alloc != alloc)
				continue;
			memmove(&fs->deallocs[i], &fs->deallocs[i + 1],
				(fs->ndeallocs - i - 1) * sizeof(d));
			fs->ndeallocs--;
			n++;
			r = o2_suballoc_free(t, fs, alloc, d.group, d.bit);
		}
		e = o2_trans_finish(t, r);
		if (r == 0)
			r = e;
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * Empty suballocator groups go back to the global bitmap, as kernel OCFS2
 * does since late 2024 (_ocfs2_reclaim_suballoc_to_main, called when a
 * free empties a group): otherwise a volume once filled with small files
 * keeps the clusters its inode and extent allocators grew by for good.
 * The kernel keeps an allocator's last chain; here every empty group goes,
 * down to no group at all - the state mkfs.ocfs2 leaves a slot's extent
 * allocator in - so an emptied volume has exactly its fresh free space
 * (the first allocation after that grows the allocator again).  Groups are
 * given back when the truncate log is flushed (fs->empty_groups says a
 * free emptied one), in transactions of their own, so a freeing operation
 * needs no credits for it.  A group leaves its chain (the chain record, or
 * the group before it, points past it; an unused chain at the end of the
 * list leaves the list), the allocator's counts lose it, its descriptor is
 * revoked, and its clusters go to the truncate log: reusable only once
 * this transaction has committed, so a crash before that finds the group
 * whole, never overwritten.  One group per
 * transaction.
 */

struct empty_group {
	uint64_t blkno, prev;
};

static int group_is_empty(struct o2_fs *fs, const struct o2_group_desc *gd, uint64_t blkno,
			  uint64_t prev, void *arg)
{
	struct empty_group *e = arg;

	if (le16(gd->bg_free_bits_count) + 1u != le16(gd->bg_bits))
		return 0;
	e->blkno = blkno;
	e->prev = prev;
	return 1;
}

/* The first empty group of an allocator: *ret_blkno, else 0. */
static int find_empty_group(struct o2_fs *fs, struct o2_buf *ab, uint64_t *ret_blkno,
			    uint64_t *ret_prev, unsigned *ret_chain)
{
	const struct o2_chain_list *cl = &dinode(ab)->id2.i_chain;
	unsigned n = le16(cl->cl_next_free_rec);
	struct empty_group e = { 0, 0 };
	int r = 0;

	*ret_blkno = 0;
	if (n > le16(cl->cl_count))
		return o2_corrupt(fs, ab->blkno, "allocator uses %u of %u chains", n,
				  le16(cl->cl_count));
	for (unsigned c = 0; c < n && r == 0; c++) {
		/* a chain with no empty bits to spare has no empty group */
		if (le32(cl->cl_recs[c].c_free) + 1 < le16(cl->cl_cpg) * (uint32_t)le16(cl->cl_bpc))
			continue;
		r = chain_visit(fs, ab, c, group_is_empty, &e);
		if (r > 0) {
			*ret_blkno = e.blkno;
			*ret_prev = e.prev;
			*ret_chain = c;
		}
	}
	return r < 0 ? r : 0;
}

/*
 * Give back group blkno (chain, after prev - 0: the chain's head) of the
 * allocator ab; moved: the groups of the last chain, which takes the place
 * of a chain this empties (chain_groups).
 */
static int reclaim_group(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ab, uint64_t blkno,
			 uint64_t prev, unsigned chain, unsigned moved, const struct run *runs,
			 unsigned nruns)
{
	struct o2_dinode *ai = dinode(ab);
	struct o2_chain_list *cl = &ai->id2.i_chain;
	struct o2_chain_rec *cr = &cl->cl_recs[chain];
	uint32_t cpg = le16(cl->cl_cpg);
	struct o2_buf *gb, *pb;
	int r = get_group(t, fs, ab->blkno, blkno, &gb);

	if (r < 0)
		return r;
	const struct o2_group_desc *gd = gdesc(gb);
	uint64_t next = le64(gd->bg_next_group);
	uint32_t bits = le16(gd->bg_bits);

	o2_brelse(fs, gb);
	if (le32(cr->c_total) < bits || le32(cr->c_free) < bits - 1 ||
	    le32(ai->id1.bitmap1.i_total) < bits || !le32(ai->id1.bitmap1.i_used) ||
	    le32(ai->i_clusters) < cpg)
		return o2_corrupt(fs, ab->blkno, "allocator counts less than its group %llu holds",
				  (unsigned long long)blkno);
	r = o2_trans_add(t, ab);
	if (r == 0 && prev) {
		r = get_group(t, fs, ab->blkno, prev, &pb);
		if (r == 0) {
			r = o2_trans_add(t, pb);
			if (r == 0)
				gdesc(pb)->bg_next_group = cpu_le64(next);
			o2_brelse(fs, pb);
		}
	} else if (r == 0) {
		cr->c_blkno = cpu_le64(next);
	}
	if (r < 0)
		return r;
	cr->c_total = cpu_le32(le32(cr->c_total) - bits);
	cr->c_free = cpu_le32(le32(cr->c_free) - (bits - 1));
	unsigned n = le16(cl->cl_next_free_rec);

	/*
	 * An empty chain leaves the list: fsck.ocfs2 calls one left in the
	 * middle CHAIN_EMPTY.  The last chain takes its place (its groups
	 * say so in bg_chain), and the list is one shorter.
	 */
	if (!le32(cr->c_total) && n) {
		uint64_t g = le64(cl->cl_recs[n - 1].c_blkno);

		for (unsigned hops = 0; chain != n - 1 && g && r == 0; hops++) {
			if (hops >= moved)
				return o2_corrupt(fs, ab->blkno, "chain %u grew while it was moved",
						  n - 1);
			r = get_group(t, fs, ab->blkno, g, &pb);
			if (r < 0)
				break;
			r = o2_trans_add(t, pb);
			if (r == 0)
				gdesc(pb)->bg_chain = cpu_le16((uint16_t)chain);
			g = le64(gdesc(pb)->bg_next_group);
			o2_brelse(fs, pb);
		}
		if (r < 0)
			return r;
		*cr = cl->cl_recs[n - 1];
		memset(&cl->cl_recs[n - 1], 0, sizeof(cl->cl_recs[n - 1]));
		cl->cl_next_free_rec = cpu_le16((uint16_t)(n - 1));
	}
	ai->id1.bitmap1.i_total = cpu_le32(le32(ai->id1.bitmap1.i_total) - bits);
	ai->id1.bitmap1.i_used = cpu_le32(le32(ai->id1.bitmap1.i_used) - 1);
	ai->i_clusters = cpu_le32(le32(ai->i_clusters) - cpg);
	ai->i_size = cpu_le64((uint64_t)le32(ai->i_clusters) << fs->cbits);
	r = o2_trans_revoke(t, blkno);
	for (unsigned i = 0; i < nruns && r == 0; i++)
		r = o2_clusters_free(t, fs, runs[i].start, runs[i].len);
	return r;
}

static int count_group(struct o2_fs *fs, const struct o2_group_desc *gd, uint64_t blkno,
		       uint64_t prev, void *arg)
{
	++*(unsigned *)arg;
	return 0;
}

/* The groups of the allocator's last chain, if emptying chain would move it: *ret (0: none). */
static int chain_groups(struct o2_fs *fs, struct o2_buf *ab, unsigned chain, uint32_t bits,
			unsigned *ret)
{
	const struct o2_chain_list *cl = &dinode(ab)->id2.i_chain;
	unsigned n = le16(cl->cl_next_free_rec);

	*ret = 0;
	if (chain + 1 >= n || le32(cl->cl_recs[chain].c_total) != bits)
		return 0;
	return chain_visit(fs, ab, n - 1, count_group, ret);
}

/* The clusters of group blkno: one run, or its bg_list's. */
static int group_runs(struct o2_fs *fs, uint64_t alloc_blkno, uint64_t blkno, uint32_t cpg,
		      struct run *ret, unsigned *ret_n)
{
	struct o2_buf *gb;
	int r = get_group(NULL, fs, alloc_blkno, blkno, &gb);

	if (r < 0)
		return r;
	const struct o2_group_desc *gd = gdesc(gb);
	uint32_t sum = 0;

	*ret_n = 0;
	if (!gd_discontig(gd)) {
		ret[0] = (struct run){ (uint32_t)(blkno >> fs->bpc_bits), cpg, 0, false };
		*ret_n = 1;
		sum = cpg;
	} else if (le16(gd->bg_list.next_free_rec) > o2_extent_recs_per_gd(fs->bs)) {
		r = o2_corrupt(fs, blkno, "discontiguous group lists %u runs",
			       le16(gd->bg_list.next_free_rec));
	} else {
		for (unsigned i = 0; i < le16(gd->bg_list.next_free_rec); i++) {
			const struct o2_extent_rec *rec = &gd->bg_list.recs[i];

			ret[i] = (struct run){ (uint32_t)(le64(rec->blkno) >> fs->bpc_bits),
					       le16(rec->leaf_clusters), 0, false };
			sum += le16(rec->leaf_clusters);
		}
		*ret_n = le16(gd->bg_list.next_free_rec);
	}
	o2_brelse(fs, gb);
	if (r == 0 && sum != cpg)
		r = o2_corrupt(fs, blkno, "group lists %u clusters, its allocator's groups have %u",
			       sum, cpg);
	return r;
}

static int reclaim_empty_groups(struct o2_fs *fs)
{
	uint64_t allocs[2] = { fs->sys.inode_alloc, fs->sys.extent_alloc };
	struct run *runs;
	int r = 0;

	if (!fs->empty_groups)
		return 0;
	runs = o2_calloc(o2_extent_recs_per_gd(fs->bs), sizeof(*runs));
	if (!runs)
		return -ENOMEM;
	for (unsigned a = 0; a < 2 && r == 0; a++) {
		for (;;) {
			struct o2_trans *t;
			struct o2_buf *ab;
			uint64_t blkno = 0, prev = 0;
			unsigned chain = 0, nruns = 0, moved = 0;

			r = o2_bread(fs, allocs[a], O2_META_INODE, &ab);
			if (r < 0)
				break;
			const struct o2_chain_list *cl = &dinode(ab)->id2.i_chain;

			r = find_empty_group(fs, ab, &blkno, &prev, &chain);
			if (r == 0 && blkno)
				r = group_runs(fs, allocs[a], blkno, le16(cl->cl_cpg), runs, &nruns);
			if (r == 0 && blkno)
				r = chain_groups(fs, ab, chain,
						 (uint32_t)le16(cl->cl_cpg) * le16(cl->cl_bpc), &moved);
			o2_brelse(fs, ab);
			if (r < 0 || !blkno)
				break;
			/* a chain too long to move in one transaction: the group stays */
			unsigned credits = 8 + 2 * nruns + moved;

			if (credits > o2_journal_max_credits(fs))
				break;
			r = o2_trans_begin(fs, credits, &t);
			if (r < 0)
				break;
			r = o2_bread(fs, allocs[a], O2_META_INODE, &ab);
			if (r == 0) {
				r = reclaim_group(t, fs, ab, blkno, prev, chain, moved, runs, nruns);
				o2_brelse(fs, ab);
			}
			r = o2_trans_finish(t, r);
			if (r < 0)
				break;
		}
	}
	free(runs);
	if (r == 0)
		fs->empty_groups = false;
	return r;
}

/* ---- finding the slot's system files ---- */

int o2_sysfiles_load(struct o2_fs *fs)
{
	unsigned slot = fs->opts.slot;
	int r;

	r = o2_sysfile_lookup(fs, O2_SYS_GLOBAL_BITMAP, 0, &fs->sys.global_bitmap);
	if (r == 0)
		r = o2_sysfile_lookup(fs, O2_SYS_INODE_ALLOC, slot, &fs->sys.inode_alloc);
	if (r == 0)
		r = o2_sysfile_lookup(fs, O2_SYS_EXTENT_ALLOC, slot, &fs->sys.extent_alloc);
	if (r == 0)
		r = o2_sysfile_lookup(fs, O2_SYS_TRUNCATE_LOG, slot, &fs->sys.truncate_log);
	if (r == 0)
		r = o2_sysfile_lookup(fs, O2_SYS_LOCAL_ALLOC, slot, &fs->sys.local_alloc);
	if (r == 0)
		r = o2_sysfile_lookup(fs, O2_SYS_ORPHAN_DIR, slot, &fs->sys.orphan_dir);
	/*
	 * Recovery at open frees what the log and the window name into the
	 * allocators, and a replayed journal may have written any of them:
	 * each must be sound (o2_inode_get validates the whole inode) first.
	 */
	uint64_t check[] = { fs->sys.global_bitmap, fs->sys.inode_alloc, fs->sys.extent_alloc,
			     fs->sys.truncate_log, fs->sys.local_alloc };
	for (unsigned i = 0; i < sizeof(check) / sizeof(check[0]) && r == 0; i++) {
		struct o2_inode *ino;

		r = o2_inode_get(fs, check[i], &ino);
		if (r == 0) {
			r = o2_inode_check_alloc_contents(fs, ino);
			o2_inode_unref(ino);
		}
	}
	/* the counts read at open predate the journal replay */
	if (r == 0)
		refresh_counts(fs);
	/* groups an earlier session left empty go back at the first flush */
	fs->empty_groups = true;
	return r;
}

/*
 * Give back this slot's local alloc window: its unused bits are marked used
 * in the global bitmap on the window's behalf.  fscore allocates from the
 * global bitmap directly, so a window here was left by another
 * earlier session that did not close cleanly or another implementation.
 */
int o2_local_alloc_return(struct o2_fs *fs)
{
	struct o2_trans *t;
	struct o2_buf *lb;
	uint32_t total;
	int r;

	r = o2_bread(fs, fs->sys.local_alloc, O2_META_INODE, &lb);
	if (r < 0)
		return r;
	total = le32(dinode(lb)->id1.bitmap1.i_total);
	o2_brelse(fs, lb);
	if (!total)
		return 0;
	r = o2_lock_need(fs, fs->sys.global_bitmap, true);
	if (r < 0)
		return r;
	r = o2_trans_begin(fs, O2_ALLOC_CREDITS * 4, &t);
	if (r < 0)
		return r;
	r = o2_bread(fs, fs->sys.local_alloc, O2_META_INODE, &lb);
	if (r == 0) {
		r = o2_trans_add(t, lb);
		if (r == 0)
			r = window_return(t, fs, lb);
		o2_brelse(fs, lb);
	}
	return o2_trans_finish(t, r);
}

int o2_local_alloc_refill(struct o2_fs *fs, uint32_t min)
{
	struct o2_trans *t;
	struct o2_buf *lb;
	uint32_t total, wbits, start, got;
	unsigned s, n;
	bool serves;
	int r;

	if (!fs->sys.local_alloc)
		return 0;
	r = o2_bread(fs, fs->sys.local_alloc, O2_META_INODE, &lb);
	if (r < 0)
		return r;
	const struct o2_dinode *la = dinode(lb);

	total = le32(la->id1.bitmap1.i_total);
	wbits = window_bits(fs, la);
	if (total > le16(la->id2.i_lab.la_size) * 8u)
		r = o2_corrupt(fs, lb->blkno, "local alloc window larger than its bitmap");
	/* allocations longer than a window go to the global bitmap, not the window */
	serves = !le16(la->id2.i_lab.la_size) || min > wbits ||
		 (total && find_run(la->id2.i_lab.la_bitmap, total, min, min, &s, &n));
	o2_brelse(fs, lb);
	if (r < 0 || serves)
		return r;
	/* the window moves: it comes from, and goes back to, the global bitmap */
	r = o2_lock_need(fs, fs->sys.global_bitmap, true);
	if (r < 0)
		return r;
	r = o2_trans_begin(fs, O2_ALLOC_CREDITS, &t);
	if (r < 0)
		return r;
	/* the new window first: no run of min left changes nothing (as in clusters_alloc) */
	r = global_alloc(t, fs, min, wbits, &start, &got);
	if (r == -ENOSPC)
		return o2_trans_finish(t, 0);
	if (r == 0)
		r = o2_bread(fs, fs->sys.local_alloc, O2_META_INODE, &lb);
	if (r == 0) {
		struct o2_dinode *di = dinode(lb);

		r = o2_trans_add(t, lb);
		if (r == 0 && le32(di->id1.bitmap1.i_total))
			r = window_return(t, fs, lb);
		if (r == 0) {
			di->id2.i_lab.la_bm_off = cpu_le32(start);
			di->id1.bitmap1.i_total = cpu_le32(got);
			di->id1.bitmap1.i_used = 0;
			memset(di->id2.i_lab.la_bitmap, 0, le16(di->id2.i_lab.la_size));
			refresh_counts(fs);
		}
		o2_brelse(fs, lb);
	}
	return o2_trans_finish(t, r);
}

int o2_trans_begin_freeing(struct o2_fs *fs, unsigned credits, struct o2_trans **ret)
{
	/* a freeing operation may leave an orphan in this slot's orphan directory */
	int rl = o2_lock_need(fs, fs->sys.orphan_dir, true);

	if (rl < 0)
		return rl;
	/*
	 * Not o2_trunclog_flush: the operation may have reserved already, and
	 * a group it grew for that is empty until it allocates from it.
	 */
	if (trunclog_needs_flush(fs)) {
		int r = trunclog_empty(fs);

		if (r < 0)
			return r;
	}
	return o2_trans_begin(fs, credits, ret);
}
