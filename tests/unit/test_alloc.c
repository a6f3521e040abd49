/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fscore's allocators (fscore/alloc.c) on their own: bits of the
 * suballocators and clusters of the global bitmap, its local alloc window
 * and the truncate log, claimed and freed through alloc.h on volumes made
 * in memory.  After every step the chain records, group descriptors,
 * window and counts must agree with each other and with what the test
 * holds (free + used == total, a group's set bits == its used bits, no
 * block handed out twice); ENOSPC must change nothing; fsck.ocfs2 -fn
 * judges the volume at the end of each case.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../testenv.h"
#include "unit_vol.h"
/* fscore's private headers: this tests the allocator module itself */
#include "alloc.h"
#include "internal.h"
#include "journal.h"

static const struct uv_geom geoms[] = {
	{ .bs = 512, .cs = 4096 },
	{ .bs = 4096, .cs = 4096 },
	{ .bs = 512, .cs = 1u << 20 },
	{ .bs = 4096, .cs = 1u << 20 },
};
#define NGEOMS ((int)(sizeof(geoms) / sizeof(geoms[0])))

/* ---- reading the allocators as the format has them ---- */

static struct o2_buf *get(struct o2_fs *fs, uint64_t blk, uint8_t kind)
{
	struct o2_buf *b;
	int r = o2_bread(fs, blk, kind, &b);

	REQUIRE(r == 0, "read block %llu: %d %s", (unsigned long long)blk, r, o2_fs_error(fs));
	return b;
}

static unsigned popcount_bits(const uint8_t *bm, unsigned bits)
{
	unsigned n = 0;

	for (unsigned i = 0; i < bits; i++)
		n += (bm[i / 8] >> (i % 8)) & 1;
	return n;
}

static bool bit_of(const uint8_t *bm, unsigned i)
{
	return (bm[i / 8] >> (i % 8)) & 1;
}

struct chain_state {
	uint32_t total, used;
	unsigned groups;
};

/*
 * Every chain and group of allocator ablk consistent: each group's set
 * bits == its bits - free bits, the chain records' totals and free counts
 * the sums of their groups', the inode's i_total/i_used their sums.
 */
static struct chain_state check_chain(struct o2_fs *fs, uint64_t ablk, const char *what)
{
	struct o2_buf *ab = get(fs, ablk, O2_META_INODE);
	const struct o2_dinode *ai = (const struct o2_dinode *)ab->data;
	const struct o2_chain_list *cl = &ai->id2.i_chain;
	struct chain_state s = { 0, 0, 0 };
	uint32_t sum_total = 0, sum_free = 0;

	REQUIRE(le16(cl->cl_next_free_rec) <= le16(cl->cl_count), "%s: chains", what);
	for (unsigned c = 0; c < le16(cl->cl_next_free_rec); c++) {
		uint32_t ctotal = 0, cfree = 0;
		unsigned hops = 0;

		for (uint64_t g = le64(cl->cl_recs[c].c_blkno); g;) {
			struct o2_buf *gb = get(fs, g, O2_META_GROUP);
			const struct o2_group_desc *gd = (const struct o2_group_desc *)gb->data;
			unsigned bits = le16(gd->bg_bits), fr = le16(gd->bg_free_bits_count);

			REQUIRE(++hops < 100000, "%s: chain %u loops", what, c);
			REQUIRE(o2_sig_ok(gd->bg_signature, O2_SIG_GROUP), "%s: group %llu sig",
				      what, (unsigned long long)g);
			REQUIRE_EQ(le64(gd->bg_blkno), g);
			REQUIRE_EQ(le64(gd->bg_parent_dinode), ablk);
			REQUIRE_EQ(le16(gd->bg_chain), c);
			REQUIRE(fr <= bits, "%s: group %llu: %u free of %u", what,
				      (unsigned long long)g, fr, bits);
			REQUIRE(popcount_bits(gd->bg_bitmap, bits) == bits - fr,
				      "%s: group %llu has %u bits set, but %u of %u free", what,
				      (unsigned long long)g, popcount_bits(gd->bg_bitmap, bits), fr,
				      bits);
			REQUIRE(bit_of(gd->bg_bitmap, 0), "%s: group %llu: bit 0 (itself) free",
				      what, (unsigned long long)g);
			ctotal += bits;
			cfree += fr;
			s.groups++;
			g = le64(gd->bg_next_group);
			o2_brelse(fs, gb);
		}
		REQUIRE(ctotal == le32(cl->cl_recs[c].c_total) &&
				      cfree == le32(cl->cl_recs[c].c_free),
			      "%s: chain %u records %u/%u free/total, its groups %u/%u", what, c,
			      le32(cl->cl_recs[c].c_free), le32(cl->cl_recs[c].c_total), cfree, ctotal);
		sum_total += ctotal;
		sum_free += cfree;
	}
	s.total = le32(ai->id1.bitmap1.i_total);
	s.used = le32(ai->id1.bitmap1.i_used);
	REQUIRE(s.total == sum_total && s.used == sum_total - sum_free,
		      "%s: inode says %u used of %u, chains %u used of %u", what, s.used, s.total,
		      sum_total - sum_free, sum_total);
	o2_brelse(fs, ab);
	return s;
}

static bool group_bit(struct o2_fs *fs, uint64_t group, unsigned bit)
{
	struct o2_buf *gb = get(fs, group, O2_META_GROUP);
	bool set = bit_of(((const struct o2_group_desc *)gb->data)->bg_bitmap, bit);

	o2_brelse(fs, gb);
	return set;
}

/*
 * The clusters of the volume, as allocation sees them: used[c] unless
 * free in the global bitmap or a free bit of the local alloc window.  Also
 * checks the window against the bitmap and the counts o2_fs_super reports.
 */
struct cmap {
	uint32_t n, used;
	uint8_t *used_of;
};

static void cluster_map(struct o2_fs *fs, struct cmap *m)
{
	struct chain_state s = check_chain(fs, fs->sys.global_bitmap, "global bitmap");
	struct o2_buf *ab = get(fs, fs->sys.global_bitmap, O2_META_INODE);
	const struct o2_chain_list *cl = &((const struct o2_dinode *)ab->data)->id2.i_chain;
	uint32_t cpg = le16(cl->cl_cpg);

	m->n = s.total;
	m->used = 0;
	m->used_of = calloc(s.total, 1);
	ck_assert_ptr_nonnull(m->used_of);
	for (unsigned c = 0; c < le16(cl->cl_next_free_rec); c++) {
		for (uint64_t g = le64(cl->cl_recs[c].c_blkno); g;) {
			struct o2_buf *gb = get(fs, g, O2_META_GROUP);
			const struct o2_group_desc *gd = (const struct o2_group_desc *)gb->data;
			uint64_t gi = g == fs->info.first_cluster_group ? 0 : (g >> fs->bpc_bits) / cpg;

			for (unsigned i = 0; i < le16(gd->bg_bits); i++) {
				uint64_t cl_no = gi * cpg + i;

				REQUIRE(cl_no < s.total, "group %llu bit %u: cluster %llu past %u",
					      (unsigned long long)g, i, (unsigned long long)cl_no,
					      s.total);
				m->used_of[cl_no] = bit_of(gd->bg_bitmap, i);
			}
			g = le64(gd->bg_next_group);
			o2_brelse(fs, gb);
		}
	}
	o2_brelse(fs, ab);

	/* the window: its clusters held back marked used in the bitmap, its own bits counted */
	struct o2_buf *lb = get(fs, fs->sys.local_alloc, O2_META_INODE);
	const struct o2_dinode *la = (const struct o2_dinode *)lb->data;
	uint32_t lt = le32(la->id1.bitmap1.i_total), lu = le32(la->id1.bitmap1.i_used);
	uint32_t off = le32(la->id2.i_lab.la_bm_off);

	REQUIRE(lt <= le16(la->id2.i_lab.la_size) * 8u, "window of %u bits", lt);
	REQUIRE(popcount_bits(la->id2.i_lab.la_bitmap, lt) == lu,
		      "local alloc: %u bits set, i_used %u", popcount_bits(la->id2.i_lab.la_bitmap, lt),
		      lu);
	REQUIRE(popcount_bits(la->id2.i_lab.la_bitmap, le16(la->id2.i_lab.la_size) * 8u) == lu,
		      "local alloc: bits set past its window of %u", lt);
	REQUIRE(!lt || (uint64_t)off + lt <= s.total, "window %u+%u past %u", off, lt,
		      s.total);
	/*
	 * A window bit still clear is a cluster the window holds back: it
	 * must be marked used in the bitmap.  A set bit was handed out; once
	 * freed (through the truncate log, or at once) its cluster is free in
	 * the bitmap while the window's bit stays set until the window goes
	 * back, as in OCFS2, so either state is right for it.
	 */
	for (uint32_t i = 0; i < lt; i++) {
		if (bit_of(la->id2.i_lab.la_bitmap, i))
			continue;
		REQUIRE(m->used_of[off + i], "window cluster %u, not handed out, free in the "
			      "global bitmap", off + i);
		m->used_of[off + i] = 0;
	}
	o2_brelse(fs, lb);
	for (uint32_t c = 0; c < m->n; c++)
		m->used += m->used_of[c];
	REQUIRE_EQ(m->used, s.used - (lt - lu));
	/* what statfs and o2_fs_super report */
	REQUIRE_EQ(o2_fs_super(fs)->total_clusters, m->n);
	REQUIRE_EQ(o2_fs_super(fs)->used_clusters, m->used);
}

static void cmap_free(struct cmap *m)
{
	free(m->used_of);
	m->used_of = NULL;
}

static void same_clusters(struct o2_fs *fs, const struct cmap *before, const char *what)
{
	struct cmap now;

	cluster_map(fs, &now);
	REQUIRE_EQ(now.n, before->n);
	REQUIRE(now.used == before->used && memcmp(now.used_of, before->used_of, now.n) == 0,
		      "%s changed the clusters in use (%u -> %u)", what, before->used, now.used);
	cmap_free(&now);
}

/* ---- transactions ---- */

static struct o2_trans *begin(struct o2_fs *fs, unsigned credits)
{
	struct o2_trans *t;
	int r = o2_trans_begin(fs, credits, &t);

	REQUIRE(r == 0, "trans begin: %d", r);
	return t;
}

static void end(struct o2_trans *t)
{
	REQUIRE_EQ(o2_trans_end(t), 0);
}

/* ---- suballocators ---- */

struct claimed {
	uint64_t blkno, group;
	uint16_t bit;
};

static int cmp_claimed(const void *a, const void *b)
{
	const struct claimed *x = a, *y = b;

	return x->blkno < y->blkno ? -1 : x->blkno > y->blkno;
}

static void all_distinct(struct claimed *c, size_t n, const char *what)
{
	struct claimed *s = malloc((n ? n : 1) * sizeof(*s));

	memcpy(s, c, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_claimed);
	for (size_t i = 1; i < n; i++)
		REQUIRE(s[i].blkno != s[i - 1].blkno, "%s: block %llu handed out twice", what,
			      (unsigned long long)s[i].blkno);
	free(s);
}

static void claim_one(struct o2_fs *fs, uint64_t ablk, struct claimed *out, const char *what)
{
	struct o2_trans *t = begin(fs, O2_ALLOC_CREDITS);
	struct o2_suballoc_res res;
	int r = o2_suballoc_alloc(t, fs, ablk, &res);

	REQUIRE(r == 0, "%s: claim: %d %s", what, r, o2_fs_error(fs));
	end(t);
	REQUIRE(res.blkno > O2_SUPER_BLKNO && res.blkno < fs->nblocks, "%s: block %llu",
		      what, (unsigned long long)res.blkno);
	REQUIRE_EQ(res.slot, 0);
	REQUIRE(group_bit(fs, res.group, res.bit), "%s: bit %u of group %llu not set", what,
		      res.bit, (unsigned long long)res.group);
	/* without discontiguous groups a bit's block is group + bit */
	if (!o2_has_incompat(fs, O2_FEATURE_INCOMPAT_DISCONTIG_BG))
		REQUIRE_EQ(res.blkno, res.group + res.bit);
	*out = (struct claimed){ res.blkno, res.group, res.bit };
}

static void free_one(struct o2_fs *fs, uint64_t ablk, const struct claimed *c)
{
	struct o2_trans *t = begin(fs, O2_ALLOC_CREDITS);
	int r = o2_suballoc_free(t, fs, ablk, c->group, c->bit);

	REQUIRE(r == 0, "free bit %u of %llu: %d %s", c->bit, (unsigned long long)c->group,
		      r, o2_fs_error(fs));
	end(t);
	REQUIRE_T(!group_bit(fs, c->group, c->bit));
}

/*
 * Claim bits of one suballocator until it has grown and is full again,
 * free every third, claim as many again (they must be exactly the ones
 * freed, with no growth), claim one more (now it must grow), free all.
 */
static void suballoc_cycle(struct uv *v, uint64_t ablk, const char *name)
{
	struct o2_fs *fs = v->fs;
	char what[160];
	struct chain_state s0, s;
	size_t cap = 1024, n = 0;
	struct claimed *c = malloc(cap * sizeof(*c));

	snprintf(what, sizeof(what), "%s %s", v->what, name);
	s0 = check_chain(fs, ablk, what);
	/* fill what is free, then one more: the allocator must grow */
	for (uint32_t k = 0; k < s0.total - s0.used + 1; k++) {
		if (n == cap)
			c = realloc(c, (cap *= 2) * sizeof(*c));
		claim_one(fs, ablk, &c[n++], what);
		if (n < 40 || n % 97 == 0)
			check_chain(fs, ablk, what);
	}
	s = check_chain(fs, ablk, what);
	REQUIRE(s.total > s0.total, "%s: no growth after %zu claims (%u of %u used)", what,
		      n, s.used, s.total);
	REQUIRE_EQ(s.used, s0.used + n + (s.groups - s0.groups));
	/* and fill the new group too */
	while (s.used < s.total) {
		if (n == cap)
			c = realloc(c, (cap *= 2) * sizeof(*c));
		claim_one(fs, ablk, &c[n++], what);
		s.used++;
	}
	all_distinct(c, n, what);
	s = check_chain(fs, ablk, what);
	REQUIRE_EQ(s.used, s.total);

	/* free every third: the same ones come back, and nothing grows */
	size_t nf = 0;
	struct claimed *freed = malloc(n * sizeof(*freed));

	for (size_t i = 0; i < n; i += 3) {
		free_one(fs, ablk, &c[i]);
		freed[nf++] = c[i];
	}
	struct chain_state sf = check_chain(fs, ablk, what);

	REQUIRE_EQ(sf.used, s.used - nf);
	REQUIRE_EQ(sf.total, s.total);
	for (size_t i = 0; i < n; i += 3)
		claim_one(fs, ablk, &c[i], what);
	sf = check_chain(fs, ablk, what);
	REQUIRE_EQ(sf.total, s.total);
	REQUIRE_EQ(sf.used, s.total);
	{
		struct claimed *again = malloc(nf * sizeof(*again));
		size_t k = 0;

		for (size_t i = 0; i < n; i += 3)
			again[k++] = c[i];
		qsort(again, nf, sizeof(*again), cmp_claimed);
		qsort(freed, nf, sizeof(*freed), cmp_claimed);
		for (size_t i = 0; i < nf; i++)
			REQUIRE(again[i].blkno == freed[i].blkno,
				      "%s: reclaimed block %llu was not one freed (%llu)", what,
				      (unsigned long long)again[i].blkno,
				      (unsigned long long)freed[i].blkno);
		free(again);
	}
	all_distinct(c, n, what);
	/* full again: one more grows it */
	if (n == cap)
		c = realloc(c, (cap *= 2) * sizeof(*c));
	claim_one(fs, ablk, &c[n++], what);
	sf = check_chain(fs, ablk, what);
	REQUIRE_OP(sf.total, >, s.total);

	/* everything back */
	for (size_t i = 0; i < n; i++)
		free_one(fs, ablk, &c[i]);
	sf = check_chain(fs, ablk, what);
	REQUIRE_EQ(sf.used, s0.used + (sf.groups - s0.groups));
	free(freed);
	free(c);
}

START_TEST(suballoc_claim_free)
{
	struct uv v;

	uv_make(&v, &geoms[_i]);
	suballoc_cycle(&v, v.fs->sys.inode_alloc, "inode_alloc");
	suballoc_cycle(&v, v.fs->sys.extent_alloc, "extent_alloc");
	uv_finish(&v, "suballocators", _i == 0 || _i == 3); /* fsck: some of them */
	uv_free(&v);
}
END_TEST

/* ---- clusters ---- */

struct run {
	uint32_t start, len;
};

struct runs {
	struct run *r;
	size_t n, cap;
};

static void runs_push(struct runs *rs, uint32_t start, uint32_t len)
{
	if (rs->n == rs->cap) {
		rs->cap = rs->cap ? rs->cap * 2 : 64;
		rs->r = realloc(rs->r, rs->cap * sizeof(*rs->r));
		ck_assert_ptr_nonnull(rs->r);
	}
	rs->r[rs->n++] = (struct run){ start, len };
}

/* Claim clusters; on success they must be inside the volume, in use, and none the test holds. */
static int alloc_clusters(struct uv *v, uint8_t *held, uint32_t min, uint32_t want,
			  struct runs *rs)
{
	struct o2_fs *fs = v->fs;
	struct o2_trans *t = begin(fs, 4 * O2_ALLOC_CREDITS);
	uint32_t start = 0, len = 0;
	int r = o2_clusters_alloc(t, fs, min, want, &start, &len);

	end(t);
	if (r < 0)
		return r;
	REQUIRE(len >= min && len <= want, "%s: asked %u..%u, got %u", v->what, min, want,
		      len);
	struct cmap m;

	cluster_map(fs, &m);
	REQUIRE((uint64_t)start + len <= m.n, "%s: %u+%u past %u", v->what, start, len, m.n);
	for (uint32_t i = start; i < start + len; i++) {
		REQUIRE(!held[i], "%s: cluster %u handed out twice", v->what, i);
		REQUIRE(m.used_of[i], "%s: cluster %u handed out but free", v->what, i);
		held[i] = 1;
	}
	cmap_free(&m);
	if (rs)
		runs_push(rs, start, len);
	return (int)len;
}

static void free_now(struct uv *v, uint8_t *held, uint32_t start, uint32_t len)
{
	struct o2_trans *t = begin(v->fs, 8 * O2_ALLOC_CREDITS);
	int r = o2_clusters_free_now(t, v->fs, start, len);

	REQUIRE(r == 0, "%s: free %u+%u: %d %s", v->what, start, len, r, o2_fs_error(v->fs));
	end(t);
	for (uint32_t i = start; i < start + len; i++) {
		REQUIRE_T(held[i]);
		held[i] = 0;
	}
}

static uint32_t window_bits(struct o2_fs *fs)
{
	struct o2_buf *lb = get(fs, fs->sys.local_alloc, O2_META_INODE);
	uint32_t cap = le16(((const struct o2_dinode *)lb->data)->id2.i_lab.la_size) * 8u;
	uint32_t want = (uint32_t)((8u << 20) >> fs->cbits);

	o2_brelse(fs, lb);
	return want ? (want < cap ? want : cap) : 1;
}

START_TEST(clusters_claim_free)
{
	struct uv v;
	struct cmap m0, m;
	struct runs rs = { 0 };
	int r;

	uv_make(&v, &geoms[_i]);
	struct o2_fs *fs = v.fs;

	cluster_map(fs, &m0);
	uint8_t *held = calloc(m0.n, 1);

	/* nothing to give: -ENOSPC before anything changes */
	{
		struct o2_trans *t = begin(fs, O2_ALLOC_CREDITS);
		uint32_t s = 77, l = 77;

		REQUIRE_EQ(o2_clusters_alloc(t, fs, 1, 0, &s, &l), -ENOSPC);
		REQUIRE_EQ(o2_clusters_alloc(t, fs, 3, 2, &s, &l), -ENOSPC);
		REQUIRE_EQ(s, 77);
		REQUIRE_EQ(l, 77);
		end(t);
		same_clusters(fs, &m0, "a request for nothing");
	}
	/* single clusters, then contiguous runs of exactly what was asked */
	for (int i = 0; i < 5; i++)
		REQUIRE_EQ(alloc_clusters(&v, held, 1, 1, &rs), 1);
	uint32_t sizes[] = { 2, 7, 16, window_bits(fs) / 2, window_bits(fs) + 3 };

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t want = sizes[i];

		cluster_map(fs, &m);
		if (want > (m.n - m.used) / 4) {
			cmap_free(&m);
			continue; /* the 1M volumes have few clusters */
		}
		cmap_free(&m);
		r = alloc_clusters(&v, held, want, want, &rs);
		REQUIRE(r == (int)want, "%s: a run of %u: %d %s", v.what, want, r,
			      o2_fs_error(fs));
	}
	/* take everything that is left, in runs of whatever size */
	while ((r = alloc_clusters(&v, held, 1, 0xffff, &rs)) > 0)
		;
	REQUIRE_EQ(r, -ENOSPC);
	cluster_map(fs, &m);
	REQUIRE_EQ(m.used, m.n);
	/* full: -ENOSPC, and nothing changes */
	{
		struct o2_trans *t = begin(fs, 4 * O2_ALLOC_CREDITS);
		uint32_t s, l;

		REQUIRE_EQ(o2_clusters_alloc(t, fs, 1, 1, &s, &l), -ENOSPC);
		REQUIRE_EQ(o2_clusters_alloc(t, fs, 1, 100, &s, &l), -ENOSPC);
		end(t);
		same_clusters(fs, &m, "a request on a full volume");
	}
	cmap_free(&m);

	/* free one run, and it is what the next claims get */
	struct run mid = rs.r[rs.n / 2];

	free_now(&v, held, mid.start, mid.len);
	{
		uint32_t got = 0;

		while ((r = alloc_clusters(&v, held, 1, 0xffff, NULL)) > 0)
			got += (uint32_t)r;
		REQUIRE_EQ(r, -ENOSPC);
		REQUIRE_EQ(got, mid.len);
		for (uint32_t i = mid.start; i < mid.start + mid.len; i++)
			REQUIRE_T(held[i]);
	}

	/*
	 * The truncate log: clusters freed through it stay in use until a
	 * flush; adjacent frees share a record; a full log frees at once.
	 */
	{
		struct o2_buf *tb = get(fs, fs->sys.truncate_log, O2_META_INODE);
		unsigned count = le16(((const struct o2_dinode *)tb->data)->id2.i_dealloc.tl_count);
		o2_brelse(fs, tb);
		REQUIRE_T(!o2_trunclog_pending(fs));
		/* single clusters two apart: each its own record, count + 2 of them */
		uint32_t k = 0, c = 0;

		cluster_map(fs, &m);
		for (; c < m.n && k < count + 2; c += 2) {
			if (!held[c])
				continue;
			struct o2_trans *t = begin(fs, 8 * O2_ALLOC_CREDITS);

			REQUIRE_EQ(o2_clusters_free(t, fs, c, 1), 0);
			end(t);
			held[c] = 0;
			k++;
			tb = get(fs, fs->sys.truncate_log, O2_META_INODE);
			unsigned used = le16(((const struct o2_dinode *)tb->data)->id2.i_dealloc.tl_used);

			o2_brelse(fs, tb);
			REQUIRE_EQ(used, k <= count ? k : count);
		}
		REQUIRE_OP(k, >=, 3);
		uint32_t at_once = k > count ? k - count : 0, logged = k - at_once;

		/* the 4K-cluster volumes have clusters enough to fill the log */
		if (fs->cs == 4096)
			REQUIRE_EQ(at_once, 2);

		REQUIRE_T(o2_trunclog_pending(fs));
		/* past a full log they went back at once, the rest wait in the log */
		struct cmap after;

		cluster_map(fs, &after);
		REQUIRE_EQ(after.used, m.used - at_once);
		cmap_free(&after);
		cmap_free(&m);
		/* those freed at once are claimable; the logged ones are not */
		for (uint32_t i = 0; i < at_once; i++)
			REQUIRE_EQ(alloc_clusters(&v, held, 1, 1, NULL), 1);
		REQUIRE_EQ(alloc_clusters(&v, held, 1, 1, NULL), -ENOSPC);
		/* a flush returns them */
		REQUIRE_EQ(o2_trunclog_flush(fs), 0);
		REQUIRE_T(!o2_trunclog_pending(fs));
		cluster_map(fs, &m);
		REQUIRE_EQ(m.used, m.n - logged);
		cmap_free(&m);
		uint32_t got = 0;

		while ((r = alloc_clusters(&v, held, 1, 0xffff, NULL)) > 0)
			got += (uint32_t)r;
		REQUIRE_EQ(r, -ENOSPC);
		REQUIRE_EQ(got, logged);
	}
	/* a run freed through the log in pieces that touch: one record */
	{
		struct run big = { 0, 0 };

		for (size_t i = 0; i < rs.n; i++)
			if (rs.r[i].len > big.len)
				big = rs.r[i];
		REQUIRE_OP(big.len, >=, 2);
		struct o2_trans *t = begin(fs, 8 * O2_ALLOC_CREDITS);

		REQUIRE_EQ(o2_clusters_free(t, fs, big.start, 1), 0);
		REQUIRE_EQ(o2_clusters_free(t, fs, big.start + 1, big.len - 1), 0);
		end(t);
		struct o2_buf *tb = get(fs, fs->sys.truncate_log, O2_META_INODE);
		const struct o2_truncate_log *tl = &((const struct o2_dinode *)tb->data)->id2.i_dealloc;

		REQUIRE_EQ(le16(tl->tl_used), 1);
		REQUIRE_EQ(le32(tl->tl_recs[0].t_start), big.start);
		REQUIRE_EQ(le32(tl->tl_recs[0].t_clusters), big.len);
		o2_brelse(fs, tb);
		for (uint32_t i = big.start; i < big.start + big.len; i++)
			held[i] = 0;
		REQUIRE_EQ(o2_trunclog_flush(fs), 0);
		cluster_map(fs, &m);
		REQUIRE_EQ(m.used, m.n - big.len);
		cmap_free(&m);
	}

	/* everything the test holds back: the volume as it was made */
	for (uint32_t c = 0; c < m0.n;) {
		if (!held[c]) {
			c++;
			continue;
		}
		uint32_t s = c;

		while (c < m0.n && held[c] && c - s < 1000)
			c++;
		free_now(&v, held, s, c - s);
	}
	cluster_map(fs, &m);
	REQUIRE_EQ(m.used, m0.used);
	cmap_free(&m);
	cmap_free(&m0);
	free(held);
	free(rs.r);
	uv_finish(&v, "clusters", _i == 1 || _i == 2);
	uv_free(&v);
}
END_TEST

/*
 * A suballocator that must grow on a volume with no clusters left:
 * -ENOSPC, and neither it nor the global bitmap changed.
 */
START_TEST(suballoc_enospc)
{
	struct uv v;
	struct cmap m;
	int r;

	uv_make(&v, &geoms[_i]);
	struct o2_fs *fs = v.fs;
	uint64_t ablk = fs->sys.extent_alloc;

	cluster_map(fs, &m);
	uint8_t *held = calloc(m.n, 1);

	cmap_free(&m);
	while ((r = alloc_clusters(&v, held, 1, 0xffff, NULL)) > 0)
		;
	REQUIRE_EQ(r, -ENOSPC);
	struct chain_state s = check_chain(fs, ablk, "extent_alloc");
	size_t n = 0;
	struct claimed *c = malloc((s.total - s.used + 1) * sizeof(*c));

	while (s.used < s.total) {
		claim_one(fs, ablk, &c[n++], "extent_alloc");
		s.used++;
	}
	cluster_map(fs, &m);
	struct o2_buf *ab = get(fs, ablk, O2_META_INODE);
	uint8_t *before = malloc(fs->bs);

	memcpy(before, ab->data, fs->bs);
	o2_brelse(fs, ab);
	{
		struct o2_trans *t = begin(fs, O2_ALLOC_CREDITS);
		struct o2_suballoc_res res;

		REQUIRE_EQ(o2_suballoc_alloc(t, fs, ablk, &res), -ENOSPC);
		end(t);
	}
	same_clusters(fs, &m, "a suballocator that could not grow");
	ab = get(fs, ablk, O2_META_INODE);
	REQUIRE(memcmp(before, ab->data, fs->bs) == 0, "the allocator inode changed");
	o2_brelse(fs, ab);
	cmap_free(&m);
	/* one cluster group's worth back, and it grows */
	for (uint32_t i = 0; i < m.n; i++)
		if (held[i])
			free_now(&v, held, i, 1);
	claim_one(fs, ablk, &c[n++], "extent_alloc");
	struct chain_state s2 = check_chain(fs, ablk, "extent_alloc");

	REQUIRE_OP(s2.total, >, s.total);
	for (size_t i = 0; i < n; i++)
		free_one(fs, ablk, &c[i]);
	free(c);
	free(before);
	free(held);
	uv_finish(&v, "suballocator ENOSPC", _i == 0);
	uv_free(&v);
}
END_TEST

/*
 * discontig-bg: the global bitmap left with no free run two clusters long,
 * the extent allocator grows by a group pieced together from single
 * clusters.  Every bit of it must stand for a block of those clusters,
 * none twice, the descriptor listing its runs; counts as ever; fsck clean.
 */
START_TEST(suballoc_discontig)
{
	struct uv v;
	struct cmap m;
	int r;

	uv_make(&v, &geoms[_i]);
	struct o2_fs *fs = v.fs;
	uint64_t ablk = fs->sys.extent_alloc;

	REQUIRE_T(o2_has_incompat(fs, O2_FEATURE_INCOMPAT_DISCONTIG_BG));
	cluster_map(fs, &m);
	uint32_t nclusters = m.n;
	uint8_t *held = calloc(nclusters, 1);

	cmap_free(&m);
	while ((r = alloc_clusters(&v, held, 1, 0xffff, NULL)) > 0)
		;
	REQUIRE_EQ(r, -ENOSPC);
	struct chain_state s = check_chain(fs, ablk, "extent_alloc");
	size_t n = 0, cap = s.total - s.used + 1;
	struct claimed *c = malloc(cap * sizeof(*c));

	while (s.used < s.total) {
		claim_one(fs, ablk, &c[n++], "extent_alloc");
		s.used++;
	}
	/*
	 * Runs the test holds back, each L clusters with a held one between:
	 * no run as long as a group, and about half a descriptor's worth of
	 * them make one.
	 */
	struct o2_buf *ab = get(fs, ablk, O2_META_INODE);
	uint32_t cpg = le16(((const struct o2_dinode *)ab->data)->id2.i_chain.cl_cpg);
	unsigned maxrecs = o2_extent_recs_per_gd(fs->bs);

	o2_brelse(fs, ab);
	REQUIRE_OP(cpg, >=, 4);
	uint32_t L = (cpg + maxrecs / 2 - 1) / (maxrecs / 2), k = (cpg + L - 1) / L, made = 0;

	if (L < 2)
		L = 2;
	for (uint32_t i = 1; i + L < nclusters && made < k; i++) {
		uint32_t j = 0;

		while (j <= L && held[i - 1 + j])
			j++;
		if (j <= L)
			continue;
		free_now(&v, held, i, L); /* held[i-1] and held[i+L] stay */
		made++;
		i += L;
	}
	REQUIRE_EQ(made, k);
	/* one more block: a new group, in pieces */
	c = realloc(c, (cap + 64 * 1024) * sizeof(*c));
	claim_one(fs, ablk, &c[n++], "extent_alloc");
	struct chain_state s2 = check_chain(fs, ablk, "extent_alloc");

	REQUIRE_EQ(s2.groups, s.groups + 1);
	uint64_t g = c[n - 1].group;
	struct o2_buf *gb = get(fs, g, O2_META_GROUP);
	const struct o2_group_desc *gd = (const struct o2_group_desc *)gb->data;
	unsigned runs = le16(gd->bg_list.next_free_rec), bits = le16(gd->bg_bits);

	o2_brelse(fs, gb);
	REQUIRE(runs == k, "%s: a group of %u clusters from runs of %u lists %u runs, not %u",
		v.what, cpg, L, runs, k);
	/* fill it: each block in a cluster the test gave back, none twice */
	size_t first = n - 1;

	for (unsigned b = 1; b < bits - 1; b++)
		claim_one(fs, ablk, &c[n++], "extent_alloc");
	all_distinct(c, n, "extent_alloc");
	cluster_map(fs, &m);
	for (size_t i = first; i < n; i++) {
		uint32_t cl = (uint32_t)(c[i].blkno >> fs->bpc_bits);

		REQUIRE_EQ(c[i].group, g);
		REQUIRE(!held[cl] && m.used_of[cl], "%s: block %llu (bit %u) in cluster %u, not one "
			"of the group's", v.what, (unsigned long long)c[i].blkno, c[i].bit, cl);
	}
	cmap_free(&m);
	s2 = check_chain(fs, ablk, "extent_alloc");
	REQUIRE_EQ(s2.used, s2.total);
	/* everything back */
	for (size_t i = 0; i < n; i++)
		free_one(fs, ablk, &c[i]);
	for (uint32_t i = 0; i < nclusters; i++)
		if (held[i])
			free_now(&v, held, i, 1);
	free(c);
	free(held);
	uv_finish(&v, "discontiguous group", true);
	uv_free(&v);
}
END_TEST

/*
 * The local alloc window's size: as kernel OCFS2 sizes it by default (a
 * cluster group's worth less 16 MiB, rounded as the kernel rounds it; at
 * most a slot's share; 8 MiB where groups are tiny), or localalloc_mb,
 * falling back to the default when the window's bitmap cannot hold it.
 */
static const struct {
	struct uv_geom g;
	uint32_t asked_mb, want_mb;
} windows[] = {
	/* (4096 - 64) * 8 bits of 4K = 126 MiB, less 16 = 110, bit 2 off: 106 */
	{ { .bs = 4096, .cs = 4096, .bytes = 256 * MiB }, 0, 106 },
	{ { .bs = 4096, .cs = 4096, .bytes = 256 * MiB }, 16, 16 },
	/* the window's bitmap holds 121 MiB of 4K clusters: 200 is the default */
	{ { .bs = 4096, .cs = 4096, .bytes = 256 * MiB }, 200, 106 },
	/* a slot's share: the whole of a 64 MiB volume, less what mkfs used */
	{ { .bs = 4096, .cs = 4096, .bytes = 64 * MiB }, 0, 64 },
	{ { .bs = 512, .cs = 4096, .bytes = 64 * MiB }, 0, 8 },
};

START_TEST(window_size)
{
	struct uv v;
	struct o2_trans *t;
	struct o2_buf *lb;
	uint32_t start, got;
	struct o2_open_opts o = { .flags = O2_OPEN_RDWR, .localalloc_mb = windows[_i].asked_mb };
	char err[512] = "";
	int r;

	uv_make(&v, &windows[_i].g);
	uv_close(&v);
	r = o2_fs_open_opts(v.dev, &o, &v.fs, err, sizeof(err));
	ck_assert_msg(r == 0, "open: %d %s", r, err);
	REQUIRE_EQ(o2_trans_begin(v.fs, 8, &t), 0);
	REQUIRE_EQ(o2_clusters_alloc(t, v.fs, 1, 1, &start, &got), 0);
	REQUIRE_EQ(o2_trans_end(t), 0);
	lb = get(v.fs, v.fs->sys.local_alloc, O2_META_INODE);
	uint32_t total = le32(((const struct o2_dinode *)lb->data)->id1.bitmap1.i_total);
	uint32_t want = windows[_i].want_mb << (20 - v.fs->cbits);

	o2_brelse(v.fs, lb);
	if (windows[_i].g.bs == 4096 && windows[_i].g.bytes == 64 * MiB)
		/* what the global bitmap had left in one run, under the share */
		REQUIRE(total < want && total > want / 2, "%s: a window of %u clusters, the "
			"slot's share %u", v.what, total, want);
	else
		REQUIRE(total == want, "%s, localalloc=%u: a window of %u clusters, want %u",
			v.what, windows[_i].asked_mb, total, want);
	uv_finish(&v, "window", true); /* fsck.ocfs2 -fn judges the window too */
	uv_free(&v);
}
END_TEST

/*
 * On a shared volume a new allocator group comes from this slot's local
 * alloc window when it holds one (claim_group): the global bitmap's lock
 * would otherwise pass between nodes every thousand creates.  Three
 * groups' worth of inodes, made without that lock, never ask for it.
 */
START_TEST(groups_from_window)
{
	const struct uv_geom g = { .bs = 4096, .cs = 4096, .bytes = 256 * MiB };
	struct o2_open_opts o = { .flags = O2_OPEN_RDWR | O2_OPEN_SHARED, .slot = 0,
				  .lock_held = uv_lock_held };
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };
	struct o2_trans *t;
	struct uv v;
	uint32_t start, got, before;
	unsigned asks = 0;
	char err[512] = "", nm[16];
	uint64_t ino;
	int r;

	uv_make(&v, &g);
	uv_close(&v);
	uv_gb_held = true; /* the daemon holds it while the slot opens */
	r = o2_fs_open_opts(v.dev, &o, &v.fs, err, sizeof(err));
	ck_assert_msg(r == 0, "open: %d %s", r, err);
	struct o2_fs *fs = v.fs;

	REQUIRE_EQ(o2_sysfile_lookup(fs, O2_SYS_GLOBAL_BITMAP, 0, &uv_gb_blkno), 0);
	/* a first cluster fills the window, as a node's first write does */
	REQUIRE_EQ(o2_trans_begin(fs, 8, &t), 0);
	REQUIRE_EQ(o2_clusters_alloc(t, fs, 1, 1, &start, &got), 0);
	REQUIRE_EQ(o2_trans_end(t), 0);
	struct o2_buf *ab = get(fs, fs->sys.inode_alloc, O2_META_INODE);

	before = le32(((const struct o2_dinode *)ab->data)->id1.bitmap1.i_total);
	o2_brelse(fs, ab);
	uv_gb_held = false;
	for (unsigned i = 0; i < before + 2048 + 10; i++) {
		snprintf(nm, sizeof(nm), "f%u", i);
		r = o2_create(fs, o2_fs_super(fs)->root_blkno, nm, strlen(nm), &ni, &ino);
		if (r == -O2_ENEEDLOCK) {
			uint64_t want;
			bool ex;

			o2_fs_lock_wanted(fs, &want, &ex);
			REQUIRE(want == uv_gb_blkno, "create %s wants the lock of %llu", nm,
				(unsigned long long)want);
			asks++;
			uv_gb_held = true;
			r = o2_create(fs, o2_fs_super(fs)->root_blkno, nm, strlen(nm), &ni, &ino);
			uv_gb_held = false;
		}
		REQUIRE(r == 0, "create %s: %d %s", nm, r, o2_fs_error(fs));
	}
	ab = get(fs, fs->sys.inode_alloc, O2_META_INODE);
	uint32_t after = le32(((const struct o2_dinode *)ab->data)->id1.bitmap1.i_total);

	o2_brelse(fs, ab);
	REQUIRE(after >= before + 3 * 1024, "the inode allocator grew from %u to %u", before, after);
	REQUIRE(asks == 0, "growing the inode allocator by %u asked for the global bitmap's lock "
		"%u times", after - before, asks);
	uv_gb_held = true;
	REQUIRE_EQ(o2_trans_begin(fs, 8, &t), 0);
	REQUIRE_EQ(o2_clusters_free(t, fs, start, got), 0);
	REQUIRE_EQ(o2_trans_end(t), 0);
	REQUIRE_EQ(o2_trunclog_flush(fs), 0);
	uv_finish(&v, "groups from the window", true);
	uv_free(&v);
	uv_gb_blkno = 0;
}
END_TEST

static Suite *alloc_suite(void)
{
	Suite *s = suite_create("alloc");
	TCase *tc = tcase_create("suballoc");

	tcase_add_loop_test(tc, suballoc_claim_free, 0, NGEOMS);
	tcase_add_loop_test(tc, suballoc_enospc, 0, 2);
	tcase_add_loop_test(tc, suballoc_discontig, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("clusters");
	tcase_add_loop_test(tc, clusters_claim_free, 0, NGEOMS);
	tcase_add_loop_test(tc, window_size, 0, (int)(sizeof(windows) / sizeof(windows[0])));
	tcase_add_test(tc, groups_from_window);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_env_init();
	SRunner *sr = srunner_create(alloc_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
