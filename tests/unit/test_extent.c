/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fscore's extent B-tree (fscore/extent_write.c, read back through
 * extent.c) on its own: a regular file's tree edited through
 * extent_write.h - inserts in order and out of order, merges with either
 * neighbour, unwritten extents split by marking parts written, punched
 * holes, growth past the inode's own list to depth 1, 2 (and 3 at 512-byte
 * blocks), truncation back to nothing.  After every step the tree read
 * back (o2_inode_map, o2_inode_walk_extents) must equal a model the test
 * keeps of every logical cluster; fsck.ocfs2 -fn judges the end.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../testenv.h"
#include "unit_vol.h"
/* fscore's private headers: this tests the extent tree module itself */
#include "alloc.h"
#include "extent_write.h"
#include "inode_write.h"
#include "internal.h"
#include "journal.h"

static const struct uv_geom geoms[] = {
	{ .bs = 512, .cs = 4096 },
	{ .bs = 4096, .cs = 4096 },
	{ .bs = 512, .cs = 1u << 20 },
	{ .bs = 4096, .cs = 1u << 20 },
};
#define NGEOMS ((int)(sizeof(geoms) / sizeof(geoms[0])))

/* The model: for each logical cluster its physical cluster (0: a hole) and flags. */
struct model {
	uint32_t n; /* clusters tracked */
	uint32_t *phys;
	uint8_t *flags;
	uint32_t mapped;
	uint32_t nphys; /* clusters of the volume */
	uint32_t *rev;	/* physical cluster -> logical + 1 (0: not the file's) */
};

struct ctx {
	struct uv v;
	struct o2_fs *fs;
	uint64_t ino;
	struct model m;
	unsigned steps;
	unsigned check_every; /* full lookups every this many steps (1: each) */
};

static void model_init(struct model *m, uint32_t n, uint32_t nphys)
{
	m->nphys = nphys;
	m->rev = calloc(nphys, sizeof(*m->rev));
	m->n = n;
	m->phys = calloc(n, sizeof(*m->phys));
	m->flags = calloc(n, 1);
	m->mapped = 0;
	ck_assert(m->phys && m->flags);
}

static void model_free(struct model *m)
{
	free(m->phys);
	free(m->flags);
	free(m->rev);
}

static uint32_t model_end(const struct model *m)
{
	uint32_t e = m->n;

	while (e && !m->phys[e - 1])
		e--;
	return e;
}

/* ---- the file and its tree ---- */

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

#define CREDITS (2 * O2_TREE_CREDITS + 2 * O2_ALLOC_CREDITS + 4)

static struct o2_buf *inode_buf(struct ctx *c, struct o2_tree_owner *o)
{
	struct o2_buf *ib;
	int r = o2_inode_buf(c->fs, c->ino, &ib);

	REQUIRE(r == 0, "inode %llu: %d %s", (unsigned long long)c->ino, r, o2_fs_error(c->fs));
	o2_inode_owner(ib, o);
	return ib;
}

/* i_clusters and i_size follow the model, so fsck sees a consistent file. */
static void set_sizes(struct ctx *c, struct o2_trans *t, struct o2_buf *ib)
{
	struct o2_dinode *di = o2_buf_dinode(ib);

	REQUIRE_EQ(o2_trans_add(t, ib), 0);
	di->i_clusters = cpu_le32(c->m.mapped);
	di->i_size = cpu_le64((uint64_t)model_end(&c->m) << c->fs->cbits);
}

static void setup(struct ctx *c, const struct uv_geom *g, uint32_t model_clusters)
{
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };
	struct o2_tree_owner o;
	int r;

	memset(c, 0, sizeof(*c));
	uv_make(&c->v, g);
	c->fs = c->v.fs;
	c->check_every = 1;
	r = o2_create(c->fs, o2_fs_super(c->fs)->root_blkno, "f", 1, &ni, &c->ino);
	REQUIRE(r == 0, "create: %d %s", r, o2_fs_error(c->fs));
	/* a new file may start with inline data: give it an extent list */
	struct o2_trans *t = begin(c->fs, 4);
	struct o2_buf *ib = inode_buf(c, &o);

	if (le16(o2_buf_dinode(ib)->i_dyn_features) & O2_DYN_INLINE_DATA) {
		REQUIRE_EQ(o2_trans_add(t, ib), 0);
		o2_inode_to_extent_list(c->fs, o2_buf_dinode(ib));
	}
	o2_brelse(c->fs, ib);
	end(t);
	model_init(&c->m, model_clusters, o2_fs_super(c->fs)->total_clusters);
}

static unsigned tree_depth(struct ctx *c)
{
	struct o2_tree_owner o;
	struct o2_buf *ib = inode_buf(c, &o);
	unsigned d = le16(o.el->tree_depth);

	o2_brelse(c->fs, ib);
	return d;
}

static unsigned root_count(struct ctx *c)
{
	struct o2_tree_owner o;
	struct o2_buf *ib = inode_buf(c, &o);
	unsigned n = le16(o.el->count);

	o2_brelse(c->fs, ib);
	return n;
}

static unsigned root_used(struct ctx *c)
{
	struct o2_tree_owner o;
	struct o2_buf *ib = inode_buf(c, &o);
	unsigned n = le16(o.el->next_free_rec);

	o2_brelse(c->fs, ib);
	return n;
}

/* ---- checking the tree against the model ---- */

struct walk_acc {
	struct ctx *c;
	uint32_t next_cpos, clusters, records;
	uint64_t ebs;
};

static int walk_fn(const struct o2_extent *e, uint64_t eb, void *arg)
{
	struct walk_acc *a = arg;
	const struct model *m = &a->c->m;
	uint32_t bpc = a->c->fs->bpc_bits;

	if (!e) {
		a->ebs++;
		return 0;
	}
	REQUIRE(e->cpos >= a->next_cpos, "walk: extent at %u after one ending at %u", e->cpos,
		a->next_cpos);
	REQUIRE(e->clusters > 0 && (uint64_t)e->cpos + e->clusters <= m->n,
		"walk: extent %u+%u outside the model's %u", e->cpos, e->clusters, m->n);
	for (uint32_t i = 0; i < e->clusters; i++) {
		uint32_t cp = e->cpos + i;

		REQUIRE(m->phys[cp] && (uint64_t)m->phys[cp] << bpc == e->blkno + ((uint64_t)i << bpc) &&
				m->flags[cp] == e->flags,
			"walk: cluster %u maps to block %llu flags %u, the model says cluster %u flags %u",
			cp, (unsigned long long)(e->blkno + ((uint64_t)i << bpc)), e->flags,
			m->phys[cp], m->flags[cp]);
	}
	(void)eb;
	a->next_cpos = e->cpos + e->clusters;
	a->clusters += e->clusters;
	a->records++;
	return 0;
}

/* One lookup at cpos against the model. */
static void check_map(struct ctx *c, struct o2_inode *in, uint32_t cpos)
{
	const struct model *m = &c->m;
	struct o2_extent e;
	int r = o2_inode_map(c->fs, in, cpos, &e);

	REQUIRE(r == 0, "%s step %u: map %u: %d %s", c->v.what, c->steps, cpos, r,
		o2_fs_error(c->fs));
	REQUIRE(e.cpos == cpos, "map %u: extent starts at %u", cpos, e.cpos);
	if (cpos < m->n && m->phys[cpos]) {
		REQUIRE(e.blkno == (uint64_t)m->phys[cpos] << c->fs->bpc_bits && e.flags == m->flags[cpos],
			"%s step %u: map %u: block %llu flags %u, the model says cluster %u flags %u",
			c->v.what, c->steps, cpos, (unsigned long long)e.blkno, e.flags, m->phys[cpos],
			m->flags[cpos]);
		/* the rest of its record: a run in the model too */
		REQUIRE(e.clusters >= 1 && (uint64_t)cpos + e.clusters <= m->n,
			"map %u: %u clusters", cpos, e.clusters);
		for (uint32_t i = 1; i < e.clusters; i++)
			REQUIRE(m->phys[cpos + i] == m->phys[cpos] + i &&
					m->flags[cpos + i] == m->flags[cpos],
				"%s step %u: map %u says %u clusters run on, the model breaks at %u",
				c->v.what, c->steps, cpos, e.clusters, cpos + i);
	} else {
		uint32_t h = cpos;

		while (h < m->n && !m->phys[h])
			h++;
		REQUIRE(e.blkno == 0, "%s step %u: map %u: block %llu in a hole", c->v.what, c->steps,
			cpos, (unsigned long long)e.blkno);
		if (h >= m->n)
			REQUIRE(e.clusters >= m->n - cpos || e.clusters == UINT32_MAX,
				"%s step %u: map %u: a hole of %u at the end", c->v.what, c->steps,
				cpos, e.clusters);
		else
			REQUIRE(e.clusters == h - cpos,
				"%s step %u: map %u: a hole of %u, the model's is %u", c->v.what,
				c->steps, cpos, e.clusters, h - cpos);
	}
}

static void verify(struct ctx *c, bool full)
{
	struct o2_inode *in;
	struct walk_acc a = { c, 0, 0, 0, 0 };
	int r;

	c->steps++;
	if (!full && c->steps % c->check_every)
		return;
	r = o2_inode_get(c->fs, c->ino, &in);
	REQUIRE(r == 0, "inode get: %d %s", r, o2_fs_error(c->fs));
	r = o2_inode_walk_extents(c->fs, in, walk_fn, &a);
	REQUIRE(r == 0, "%s step %u: walk: %d %s", c->v.what, c->steps, r, o2_fs_error(c->fs));
	REQUIRE(a.clusters == c->m.mapped, "%s step %u: the tree maps %u clusters, the model %u",
		c->v.what, c->steps, a.clusters, c->m.mapped);
	REQUIRE_EQ(o2_inode_info(in)->clusters, c->m.mapped);
	/* every cluster where something changes, and a sample of the rest */
	uint32_t end = model_end(&c->m);

	for (uint32_t cp = 0; cp <= end && cp < c->m.n; cp++) {
		bool edge = cp == 0 || !c->m.phys[cp] != !c->m.phys[cp - 1] ||
			    (c->m.phys[cp] && (c->m.phys[cp] != c->m.phys[cp - 1] + 1 ||
					       c->m.flags[cp] != c->m.flags[cp - 1]));

		if (edge || end < 4096 || cp % 61 == 0)
			check_map(c, in, cp);
	}
	if (end + 7 < c->m.n)
		check_map(c, in, end + 7);
	o2_inode_unref(in);
}

/* ---- edits ---- */

static uint32_t claim(struct ctx *c, struct o2_trans *t, uint32_t len)
{
	uint32_t start, got;
	int r = o2_clusters_alloc(t, c->fs, len, len, &start, &got);

	REQUIRE(r == 0, "%s: %u clusters: %d %s", c->v.what, len, r, o2_fs_error(c->fs));
	REQUIRE_EQ(got, len);
	return start;
}

/* Map [cpos, cpos+len) to physical clusters from pstart on, with flags. */
static void insert_at(struct ctx *c, struct o2_trans *t, uint32_t cpos, uint32_t len,
		      uint32_t pstart, uint8_t flags)
{
	struct o2_tree_owner o;
	struct o2_buf *ib = inode_buf(c, &o);
	struct o2_extent e = { cpos, len, (uint64_t)pstart << c->fs->bpc_bits, flags };
	int r = o2_tree_insert(t, c->fs, &o, &e);

	REQUIRE(r == 0, "%s step %u: insert %u+%u at cluster %u: %d %s", c->v.what, c->steps, cpos,
		len, pstart, r, o2_fs_error(c->fs));
	REQUIRE((uint64_t)cpos + len <= c->m.n, "model too small");
	for (uint32_t i = 0; i < len; i++) {
		REQUIRE(!c->m.phys[cpos + i], "test bug: cluster %u already mapped", cpos + i);
		c->m.phys[cpos + i] = pstart + i;
		c->m.flags[cpos + i] = flags;
		c->m.rev[pstart + i] = cpos + i + 1;
	}
	c->m.mapped += len;
	set_sizes(c, t, ib);
	o2_brelse(c->fs, ib);
}

/* New clusters for [cpos, cpos+len), in a transaction of its own. */
static void insert(struct ctx *c, uint32_t cpos, uint32_t len, uint8_t flags)
{
	struct o2_trans *t = begin(c->fs, CREDITS);

	insert_at(c, t, cpos, len, claim(c, t, len), flags);
	end(t);
}

static int free_fn(struct o2_trans *t, struct o2_fs *fs, uint64_t blkno, uint32_t clusters,
		   uint8_t flags, void *arg)
{
	struct ctx *c = arg;
	uint32_t p = (uint32_t)(blkno >> fs->bpc_bits);
	bool found = false;

	/* the model must hold exactly this run */
	if (p < c->m.nphys && c->m.rev[p]) {
		uint32_t cp = c->m.rev[p] - 1;

		for (uint32_t i = 0; i < clusters; i++) {
			REQUIRE(c->m.phys[cp + i] == p + i && c->m.flags[cp + i] == flags,
				"%s: freeing cluster %u flags %u, the model has %u flags %u at %u",
				c->v.what, p + i, flags, c->m.phys[cp + i], c->m.flags[cp + i],
				cp + i);
			c->m.phys[cp + i] = 0;
			c->m.flags[cp + i] = 0;
			c->m.rev[p + i] = 0;
		}
		found = true;
	}
	REQUIRE(found, "%s: freeing clusters %u+%u the file does not map", c->v.what, p, clusters);
	c->m.mapped -= clusters;
	return o2_clusters_free_now(t, fs, p, clusters);
}

static void truncate_to(struct ctx *c, uint32_t new_end)
{
	for (int round = 0;; round++) {
		struct o2_trans *t = begin(c->fs, CREDITS + 8 * O2_ALLOC_CREDITS);
		struct o2_tree_owner o;
		struct o2_buf *ib = inode_buf(c, &o);
		int r = o2_tree_truncate(t, c->fs, &o, new_end, 8, free_fn, c);

		REQUIRE(r >= 0, "%s: truncate to %u: %d %s", c->v.what, new_end, r,
			o2_fs_error(c->fs));
		set_sizes(c, t, ib);
		o2_brelse(c->fs, ib);
		end(t);
		REQUIRE(round < 100000, "truncate does not end");
		if (r == 0)
			break;
	}
	for (uint32_t cp = new_end; cp < c->m.n; cp++)
		REQUIRE(!c->m.phys[cp], "%s: cluster %u mapped after truncating to %u", c->v.what, cp,
			new_end);
}

static void punch(struct ctx *c, uint32_t c0, uint32_t c1)
{
	for (int round = 0;; round++) {
		struct o2_trans *t = begin(c->fs, CREDITS + 8 * O2_ALLOC_CREDITS);
		struct o2_tree_owner o;
		struct o2_buf *ib = inode_buf(c, &o);
		int r = o2_tree_punch(t, c->fs, &o, c0, c1, 4, free_fn, c);

		REQUIRE(r >= 0, "%s: punch %u..%u: %d %s", c->v.what, c0, c1, r, o2_fs_error(c->fs));
		set_sizes(c, t, ib);
		o2_brelse(c->fs, ib);
		end(t);
		REQUIRE(round < 100000, "punch does not end");
		if (r == 0)
			break;
	}
	for (uint32_t cp = c0; cp < c1; cp++)
		REQUIRE(!c->m.phys[cp], "%s: cluster %u mapped after punching %u..%u", c->v.what, cp,
			c0, c1);
}

static void mark_written(struct ctx *c, uint32_t cpos, uint32_t len)
{
	struct o2_trans *t = begin(c->fs, CREDITS);
	struct o2_tree_owner o;
	struct o2_buf *ib = inode_buf(c, &o);
	int r = o2_tree_mark_written(t, c->fs, &o, cpos, len);

	REQUIRE(r == 0, "%s: mark written %u+%u: %d %s", c->v.what, cpos, len, r,
		o2_fs_error(c->fs));
	for (uint32_t i = 0; i < len; i++)
		c->m.flags[cpos + i] &= (uint8_t)~O2_EXT_UNWRITTEN;
	o2_brelse(c->fs, ib);
	end(t);
}

static void set_unwritten(struct ctx *c, uint32_t cpos, uint32_t len)
{
	struct o2_trans *t = begin(c->fs, CREDITS);
	struct o2_tree_owner o;
	struct o2_buf *ib = inode_buf(c, &o);
	int r = o2_tree_set_flag(t, c->fs, &o, cpos, len, O2_EXT_UNWRITTEN);

	REQUIRE(r == 0, "%s: set unwritten %u+%u: %d %s", c->v.what, cpos, len, r,
		o2_fs_error(c->fs));
	for (uint32_t i = 0; i < len; i++)
		c->m.flags[cpos + i] |= O2_EXT_UNWRITTEN;
	o2_brelse(c->fs, ib);
	end(t);
}

/* fsck.ocfs2 takes about half a second a volume: it judges some of the cases. */
static void finish(struct ctx *c, const char *step, bool fsck)
{
	verify(c, true);
	uv_finish(&c->v, step, fsck);
	uv_free(&c->v);
	model_free(&c->m);
}

static int count_group(unsigned chain, const struct o2_group_info *g, void *arg)
{
	(void)chain;
	(void)g;
	++*(unsigned *)arg;
	return 0;
}

/* Blocks the extent allocator has handed out (its groups' own descriptors not counted). */
static uint32_t ebs_in_use(struct ctx *c)
{
	struct o2_inode *in;
	unsigned groups = 0;

	REQUIRE_EQ(o2_inode_get(c->fs, c->fs->sys.extent_alloc, &in), 0);
	REQUIRE_EQ(o2_chain_walk(c->fs, in, count_group, &groups), 0);
	uint32_t used = o2_inode_info(in)->bitmap_used - groups;

	o2_inode_unref(in);
	return used;
}

static bool has_unwritten(struct ctx *c)
{
	return o2_fs_super(c->fs)->feature_ro_compat & O2_FEATURE_RO_COMPAT_UNWRITTEN;
}

/* ---- the cases ---- */

/* Contiguous appends merge into one record; a piece put before its right neighbour merges too. */
START_TEST(merge_neighbours)
{
	struct ctx c;

	setup(&c, &geoms[_i], 256);
	struct o2_trans *t = begin(c.fs, CREDITS);
	uint32_t p = claim(&c, t, 24);

	end(t);
	/* left merges: [0,4) [4,8) [8,12) one after another */
	for (uint32_t k = 0; k < 3; k++) {
		t = begin(c.fs, CREDITS);
		insert_at(&c, t, 4 * k, 4, p + 4 * k, 0);
		end(t);
		verify(&c, true);
		REQUIRE_EQ(root_used(&c), 1);
	}
	/* right merge: [20,24) first, then [16,20) before it, then [12,16) joins both sides */
	t = begin(c.fs, CREDITS);
	insert_at(&c, t, 20, 4, p + 20, 0);
	end(t);
	verify(&c, true);
	REQUIRE_EQ(root_used(&c), 2);
	t = begin(c.fs, CREDITS);
	insert_at(&c, t, 16, 4, p + 16, 0);
	end(t);
	verify(&c, true);
	REQUIRE_EQ(root_used(&c), 2);
	t = begin(c.fs, CREDITS);
	insert_at(&c, t, 12, 4, p + 12, 0);
	end(t);
	verify(&c, true);
	REQUIRE_OP(root_used(&c), <=, 2);
	/* logically next but physically apart (either way round): no merge */
	{
		unsigned before = root_used(&c);

		t = begin(c.fs, CREDITS);
		uint32_t q = claim(&c, t, 6);

		end(t);
		t = begin(c.fs, CREDITS);
		insert_at(&c, t, 40, 2, q + 2, 0);
		end(t);
		t = begin(c.fs, CREDITS);
		insert_at(&c, t, 42, 2, q, 0); /* its clusters lie before its left neighbour's */
		end(t);
		verify(&c, true);
		REQUIRE_EQ(root_used(&c), before + 2);
		t = begin(c.fs, CREDITS);
		insert_at(&c, t, 38, 2, q + 4, 0); /* after its right neighbour's */
		end(t);
		verify(&c, true);
		REQUIRE_EQ(root_used(&c), before + 3);
	}
	/* different flags never merge */
	if (has_unwritten(&c)) {
		t = begin(c.fs, CREDITS);
		uint32_t q = claim(&c, t, 4);

		insert_at(&c, t, 60, 2, q, O2_EXT_UNWRITTEN);
		end(t);
		unsigned before = root_used(&c);

		t = begin(c.fs, CREDITS);
		insert_at(&c, t, 62, 2, q + 2, 0);
		end(t);
		verify(&c, true);
		REQUIRE_EQ(root_used(&c), before + 1);
	}
	/* an overlapping insert is refused and changes nothing */
	{
		struct o2_tree_owner o;
		struct o2_buf *ib;

		t = begin(c.fs, CREDITS);
		ib = inode_buf(&c, &o);
		struct o2_extent e = { 3, 2, (uint64_t)p << c.fs->bpc_bits, 0 };

		REQUIRE_EQ(o2_tree_insert(t, c.fs, &o, &e), -EUCLEAN);
		e = (struct o2_extent){ 100, 0, (uint64_t)p << c.fs->bpc_bits, 0 };
		REQUIRE_EQ(o2_tree_insert(t, c.fs, &o, &e), -EINVAL);
		o2_brelse(c.fs, ib);
		end(t);
		verify(&c, true);
	}
	finish(&c, "merges", _i == 0 || _i == 3);
}
END_TEST

/* Non-contiguous extents in a shuffled order, with lookups after each. */
START_TEST(out_of_order)
{
	struct ctx c;
	uint64_t seed = 42 + (uint64_t)_i;
	uint32_t order[120];

	/* the 1M-cluster volumes have about 55 clusters free */
	const uint32_t n = geoms[_i].cs >= MiB ? 15 : 120;

	setup(&c, &geoms[_i], 4 * n + 16);
	for (uint32_t i = 0; i < n; i++)
		order[i] = i;
	for (uint32_t i = n - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(uv_rand(&seed) % (i + 1)), x = order[i];

		order[i] = order[j];
		order[j] = x;
	}
	for (uint32_t i = 0; i < n; i++) {
		/* extents of 1..3 clusters at 4*k, with holes between */
		insert(&c, 4 * order[i], 1 + order[i] % 3, 0);
		verify(&c, false);
	}
	if (c.v.g.bs == 512 && n > 2 * root_count(&c))
		REQUIRE_OP(tree_depth(&c), >=, 1);
	/* punch holes through the middle of extents and across several */
	punch(&c, 5, 6);
	verify(&c, true);
	punch(&c, 30, 61);
	verify(&c, true);
	punch(&c, 4 * n - 40, 4 * n);
	verify(&c, true);
	truncate_to(&c, 2 * n + 1);
	verify(&c, true);
	finish(&c, "out of order", _i == 1 || _i == 2);
}
END_TEST

/* An unwritten extent written in parts: split into records, flags right at every step. */
START_TEST(unwritten_split)
{
	struct ctx c;

	setup(&c, &geoms[_i], 128);
	if (!has_unwritten(&c)) {
		fprintf(stderr, "%s: no unwritten extents on this volume\n", c.v.what);
		finish(&c, "unwritten", _i == 0);
		return;
	}
	insert(&c, 0, 20, O2_EXT_UNWRITTEN);
	verify(&c, true);
	REQUIRE_EQ(root_used(&c), 1);
	mark_written(&c, 5, 3); /* the middle: three records */
	verify(&c, true);
	REQUIRE_EQ(root_used(&c), 3);
	mark_written(&c, 0, 2); /* the head */
	verify(&c, true);
	mark_written(&c, 17, 3); /* the tail */
	verify(&c, true);
	mark_written(&c, 12, 1);
	verify(&c, true);
	set_unwritten(&c, 6, 1); /* and back, inside a written record */
	verify(&c, true);
	/* marking a written range written is refused */
	{
		struct o2_trans *t = begin(c.fs, CREDITS);
		struct o2_tree_owner o;
		struct o2_buf *ib = inode_buf(&c, &o);

		REQUIRE_EQ(o2_tree_mark_written(t, c.fs, &o, 0, 1), -EUCLEAN);
		REQUIRE_EQ(o2_tree_mark_written(t, c.fs, &o, 40, 1), -EUCLEAN);
		o2_brelse(c.fs, ib);
		end(t);
	}
	verify(&c, true);
	/* many small splits: every other cluster of a long unwritten extent */
	insert(&c, 40, 60, O2_EXT_UNWRITTEN);
	for (uint32_t k = 41; k < 100; k += 2) {
		mark_written(&c, k, 1);
		verify(&c, false);
	}
	verify(&c, true);
	punch(&c, 3, 45);
	verify(&c, true);
	truncate_to(&c, 70);
	verify(&c, true);
	finish(&c, "unwritten", _i == 0);
}
END_TEST

/*
 * Enough non-contiguous extents to outgrow the inode's list (depth 1),
 * then its list of leaves (depth 2; depth 3 too at 512-byte blocks), in
 * order and then filling the holes left between; truncated back in steps
 * to nothing, every extent block given back.
 */
static void depth_case(const struct uv_geom *g, unsigned want_depth)
{
	struct ctx c;
	unsigned root, per_eb;

	memset(&c, 0, sizeof(c));
	setup(&c, g, 1);
	root = root_count(&c);
	per_eb = o2_extent_recs_per_eb(c.fs->bs);
	/* appends split leaves at their end, so they fill */
	uint64_t need = root;

	for (unsigned d = 1; d < want_depth; d++)
		need *= per_eb;
	need += 2;
	model_free(&c.m);
	model_init(&c.m, (uint32_t)(4 * need + 64), o2_fs_super(c.fs)->total_clusters);
	c.check_every = need > 2000 ? 257 : 7;
	/* extent_alloc before, to see every extent block given back */
	uint32_t eb_used0 = ebs_in_use(&c);

	unsigned depth = 0;
	uint32_t k = 0;

	for (; depth < want_depth; k++) {
		REQUIRE(4 * k + 4 <= c.m.n, "%s: depth %u after %u extents", c.v.what, depth, k);
		insert(&c, 4 * k, 1, 0);
		verify(&c, false);
		unsigned d = tree_depth(&c);

		REQUIRE(d >= depth, "%s: the tree lost depth (%u -> %u) on an insert", c.v.what, depth,
			d);
		if (d > depth) {
			/* the first insert that overflows: the records before it filled every level */
			verify(&c, true);
			if (d == 1)
				REQUIRE(k == root, "%s: depth 1 after %u extents, the root holds %u",
					c.v.what, k, root);
			depth = d;
		}
	}
	/* now fill some of the holes: inserts in the middle of full leaves split them */
	for (uint32_t j = 0; j < k && j < 600; j += 3) {
		insert(&c, 4 * j + 2, 1, 0);
		verify(&c, false);
	}
	verify(&c, true);
	uv_walk(&c.v, "deep tree");
	/* back down: in halves, then to nothing */
	for (uint32_t e = model_end(&c.m); e > 8; e /= 2) {
		truncate_to(&c, e / 2);
		verify(&c, true);
	}
	truncate_to(&c, 0);
	verify(&c, true);
	REQUIRE_EQ(tree_depth(&c), 0);
	REQUIRE_EQ(root_used(&c), 0);
	REQUIRE(ebs_in_use(&c) == eb_used0, "%s: extent_alloc has %u used, %u before the tree grew",
		c.v.what, ebs_in_use(&c), eb_used0);
	/* and it grows again from nothing */
	for (uint32_t j = 0; j < root + 3; j++)
		insert(&c, 2 * j, 1, 0);
	verify(&c, true);
	REQUIRE_EQ(tree_depth(&c), 1);
	finish(&c, "depth", true);
}

START_TEST(depth_512)
{
	depth_case(&(struct uv_geom){ .bs = 512, .cs = 4096, .bytes = 128 * MiB }, 3);
}
END_TEST

START_TEST(depth_4096)
{
	depth_case(&(struct uv_geom){ .bs = 4096, .cs = 4096 }, 1);
}
END_TEST

static Suite *extent_suite(void)
{
	Suite *s = suite_create("extent");
	TCase *tc = tcase_create("edits");

	tcase_add_loop_test(tc, merge_neighbours, 0, NGEOMS);
	tcase_add_loop_test(tc, out_of_order, 0, NGEOMS);
	tcase_add_loop_test(tc, unwritten_split, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("depth");
	tcase_add_test(tc, depth_512);
	tcase_add_test(tc, depth_4096);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_env_init();
	SRunner *sr = srunner_create(extent_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
