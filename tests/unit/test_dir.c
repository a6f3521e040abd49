/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fscore's directories (fscore/dir_write.c, dx_write.c, and dir.c's entry
 * scanner) on their own: entries added through dir.h until an inline
 * directory moves to a block, the directory grows by blocks, and an
 * indexed one's index leaves its root for leaf blocks; then found,
 * removed, renamed and retargeted.  After each step o2_dir_iterate must
 * list exactly the model's entries and every name must be found (by
 * o2_dir_find and by the public lookup); fsck.ocfs2 -fn judges link counts
 * and the index at the end.  The one entry scanner must refuse each kind
 * of damaged entry with -EUCLEAN and a message naming the block, for
 * readers and writers alike.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../testenv.h"
#include "unit_vol.h"
/* fscore's private headers: this tests the directory modules themselves */
#include "alloc.h"
#include "dir.h"
#include "dx_write.h"
#include "inode_write.h"
#include "internal.h"
#include "journal.h"
#include "namei.h"

static const struct uv_geom geoms[] = {
	{ .bs = 512, .cs = 4096 },
	{ .bs = 4096, .cs = 4096 },
	{ .bs = 4096, .cs = 4096, .features = "noindexed-dirs" },
	{ .bs = 4096, .cs = 1u << 20 },
	{ .bs = 512, .cs = 4096, .features = "metaecc" },
	{ .bs = 512, .cs = 4096, .features = "noinline-data,noindexed-dirs" },
};
#define NGEOMS ((int)(sizeof(geoms) / sizeof(geoms[0])))

#define NTARGETS 3

struct ent {
	char name[256];
	uint8_t len;
	uint64_t ino;
	bool live;
	uint64_t pos; /* where iterate first listed it since it was added, + 1 (0: not yet) */
};

struct ctx {
	struct uv v;
	struct o2_fs *fs;
	uint64_t root, dir;
	uint64_t target[NTARGETS];
	struct ent *e;
	size_t n, cap;
	unsigned steps, check_every;
};

static struct o2_trans *begin(struct o2_fs *fs)
{
	struct o2_trans *t;
	int r = o2_trans_begin(fs, O2_NAMEI_CREDITS, &t);

	REQUIRE(r == 0, "trans begin: %d", r);
	return t;
}

static void end(struct o2_trans *t)
{
	REQUIRE_EQ(o2_trans_end(t), 0);
}

static struct o2_buf *ibuf(struct ctx *c, uint64_t ino)
{
	struct o2_buf *b;
	int r = o2_inode_buf(c->fs, ino, &b);

	REQUIRE(r == 0, "inode %llu: %d %s", (unsigned long long)ino, r, o2_fs_error(c->fs));
	return b;
}

static void links_add(struct ctx *c, struct o2_trans *t, uint64_t ino, int delta)
{
	struct o2_buf *b = ibuf(c, ino);
	struct o2_dinode *di = o2_buf_dinode(b);

	REQUIRE_EQ(o2_trans_add(t, b), 0);
	o2_set_links(di, (uint32_t)((int)o2_links_of(di) + delta));
	o2_brelse(c->fs, b);
}

static void setup(struct ctx *c, const struct uv_geom *g)
{
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };
	int r;

	memset(c, 0, sizeof(*c));
	uv_make(&c->v, g);
	c->fs = c->v.fs;
	c->root = o2_fs_super(c->fs)->root_blkno;
	c->check_every = 1;
	for (int i = 0; i < NTARGETS; i++) {
		char nm[8];

		snprintf(nm, sizeof(nm), "t%d", i);
		r = o2_create(c->fs, c->root, nm, strlen(nm), &ni, &c->target[i]);
		REQUIRE(r == 0, "create %s: %d %s", nm, r, o2_fs_error(c->fs));
	}
	ni.mode = S_IFDIR | 0755;
	r = o2_mkdir(c->fs, c->root, "d", 1, &ni, &c->dir);
	REQUIRE(r == 0, "mkdir: %d %s", r, o2_fs_error(c->fs));
}

static void ctx_free(struct ctx *c)
{
	free(c->e);
}

/* The i-th name: distinct, of lengths from 1 to 255. */
static const char digits36[] = "0123456789abcdefghijklmnopqrstuvwxyz";

static void name_of(size_t i, char *buf, uint8_t *ret_len)
{
	const char *digits = digits36;
	size_t len = i % 50 == 49 ? 255 : 1 + (i * 37) % 40;
	char id[16];
	size_t k = 0;

	/* base 36, and an end mark, so a name is no other's prefix-padded twin */
	for (size_t x = i; k == 0 || x; x /= 36)
		id[k++] = digits[x % 36];
	id[k++] = '_';
	if (len < k)
		len = k;
	memcpy(buf, id, k);
	for (size_t j = k; j < len; j++)
		buf[j] = (char)('A' + (i + j) % 26);
	buf[len] = '\0';
	*ret_len = (uint8_t)len;
}

/* ---- the model against the directory ---- */

struct seen {
	struct ctx *c;
	size_t live;
	unsigned char *hit;
	bool dot, dotdot;
	uint64_t next; /* positions ascend: the least the next entry may have */
};

static int seen_fn(const struct o2_dirent *de, void *arg)
{
	struct seen *s = arg;
	struct ctx *c = s->c;

	/* readdir's cookies: in order, and an entry stays where it is (below) */
	REQUIRE(de->pos >= s->next, "%s step %u: \"%s\" at %llu, after an entry at %llu or later",
		c->v.what, c->steps, de->name, (unsigned long long)de->pos,
		(unsigned long long)s->next);
	s->next = de->pos + 1;
	if (de->name_len == 1 && de->name[0] == '.') {
		REQUIRE(!s->dot && de->ino == c->dir, "\".\" twice or wrong");
		s->dot = true;
		return 0;
	}
	if (de->name_len == 2 && !memcmp(de->name, "..", 2)) {
		REQUIRE(!s->dotdot && de->ino == c->root, "\"..\" twice or wrong");
		s->dotdot = true;
		return 0;
	}
	/* a name says which it is: its index in base 36, least digit first, up to '_' */
	size_t i = 0, mul = 1;
	unsigned k = 0;

	for (; k < de->name_len && de->name[k] != '_'; k++, mul *= 36) {
		const char *d = strchr(digits36, de->name[k]);

		REQUIRE(d && *d, "%s: iterate lists \"%s\", not a name of the test's", c->v.what,
			de->name);
		i += (size_t)(d - digits36) * mul;
	}
	if (k < de->name_len && i < c->n) {
		struct ent *e = &c->e[i];

		if (e->live && e->len == de->name_len && !memcmp(e->name, de->name, e->len)) {
			REQUIRE(!s->hit[i], "%s step %u: \"%s\" listed twice", c->v.what, c->steps,
				e->name);
			REQUIRE(de->ino == e->ino && de->type == O2_DT_REG,
				"%s step %u: \"%s\" -> %llu type %u, the model says %llu", c->v.what,
				c->steps, e->name, (unsigned long long)de->ino, de->type,
				(unsigned long long)e->ino);
			REQUIRE(!e->pos || e->pos == de->pos + 1,
				"%s step %u: \"%s\" moved from %llu to %llu", c->v.what, c->steps,
				e->name, (unsigned long long)e->pos - 1, (unsigned long long)de->pos);
			e->pos = de->pos + 1;
			s->hit[i] = 1;
			s->live++;
			return 0;
		}
	}
	ck_abort_msg("%s step %u: iterate lists \"%s\", which the model does not have", c->v.what,
		     c->steps, de->name);
	return 1;
}

/* ---- the index against the model ---- */

struct hent {
	uint32_t major, minor;
	uint64_t blk;
};

static int cmp_hent(const void *a, const void *b)
{
	const struct hent *x = a, *y = b;

	if (x->major != y->major)
		return x->major < y->major ? -1 : 1;
	if (x->minor != y->minor)
		return x->minor < y->minor ? -1 : 1;
	return x->blk < y->blk ? -1 : x->blk > y->blk;
}

struct hset {
	struct hent *v;
	size_t n, cap;
};

static void hset_push(struct hset *h, uint32_t major, uint32_t minor, uint64_t blk)
{
	if (h->n == h->cap) {
		h->cap = h->cap ? h->cap * 2 : 256;
		h->v = realloc(h->v, h->cap * sizeof(*h->v));
		ck_assert_ptr_nonnull(h->v);
	}
	h->v[h->n++] = (struct hent){ major, minor, blk };
}

static void hset_list(struct hset *h, const struct o2_dx_entry_list *l)
{
	for (unsigned i = 0; i < le16(l->de_num_used); i++)
		hset_push(h, le32(l->de_entries[i].dx_major_hash), le32(l->de_entries[i].dx_minor_hash),
			  le64(l->de_entries[i].dx_dirent_blk));
}

struct leaf_acc {
	struct ctx *c;
	struct hset *h;
	uint8_t *buf;
};

static int leaf_fn(const struct o2_extent *e, uint64_t eb, void *arg)
{
	struct leaf_acc *a = arg;
	struct o2_fs *fs = a->c->fs;

	(void)eb;
	if (!e)
		return 0;
	for (uint64_t b = 0; b < ((uint64_t)e->clusters << fs->bpc_bits); b++) {
		int r = o2_dx_read_leaf(fs, e->blkno + b, a->buf);

		REQUIRE(r == 0, "dx leaf %llu: %d %s", (unsigned long long)(e->blkno + b), r,
			o2_fs_error(fs));
		hset_list(a->h, &((const struct o2_dx_leaf *)a->buf)->dl_list);
	}
	return 0;
}

/*
 * An indexed directory's index holds exactly one entry per name - "." and
 * ".." too - with its hash and the block the name is in, and counts them.
 */
static void check_index(struct ctx *c, struct o2_buf *dib)
{
	const struct o2_dinode *di = o2_buf_dinode(dib);

	if (!(le16(di->i_dyn_features) & O2_DYN_INDEXED_DIR))
		return;
	struct hset want = { 0 }, have = { 0 };
	struct o2_buf *rb;
	struct o2_dir_slot f;
	uint32_t major, minor;

	for (size_t i = 0; i < c->n; i++) {
		if (!c->e[i].live)
			continue;
		REQUIRE_EQ(o2_dir_find(c->fs, dib, c->e[i].name, c->e[i].len, &f), 0);
		o2_dx_hash(c->fs, c->e[i].name, c->e[i].len, &major, &minor);
		hset_push(&want, major, minor, f.blk);
	}
	for (int d = 1; d <= 2; d++) {
		REQUIRE_EQ(o2_dir_find(c->fs, dib, "..", (size_t)d, &f), 0);
		o2_dx_hash(c->fs, "..", (size_t)d, &major, &minor);
		hset_push(&want, major, minor, f.blk);
	}
	REQUIRE_EQ(o2_bread(c->fs, le64(di->i_dx_root), O2_META_DX_ROOT, &rb), 0);
	struct o2_dx_root_block *dr = (struct o2_dx_root_block *)rb->data;

	if (dr->dr_flags & O2_DX_INLINE) {
		hset_list(&have, &dr->dr_entries);
	} else {
		struct leaf_acc a = { c, &have, malloc(c->fs->bs) };
		struct o2_tree_root root = { rb->blkno, &dr->dr_list, le16(dr->dr_list.count) };
		int r = o2_tree_walk(c->fs, &root, leaf_fn, &a);

		REQUIRE(r == 0, "dx tree walk: %d %s", r, o2_fs_error(c->fs));
		free(a.buf);
	}
	REQUIRE(le32(dr->dr_num_entries) == want.n, "%s step %u: the index counts %u names, "
		"the directory has %zu", c->v.what, c->steps, le32(dr->dr_num_entries), want.n);
	o2_brelse(c->fs, rb);
	REQUIRE(have.n == want.n, "%s step %u: the index holds %zu entries, the directory %zu names",
		c->v.what, c->steps, have.n, want.n);
	qsort(want.v, want.n, sizeof(*want.v), cmp_hent);
	qsort(have.v, have.n, sizeof(*have.v), cmp_hent);
	for (size_t i = 0; i < want.n; i++)
		REQUIRE(!cmp_hent(&want.v[i], &have.v[i]),
			"%s step %u: the index has hash %08x:%08x in block %llu, the directory "
			"%08x:%08x in %llu", c->v.what, c->steps, have.v[i].major, have.v[i].minor,
			(unsigned long long)have.v[i].blk, want.v[i].major, want.v[i].minor,
			(unsigned long long)want.v[i].blk);
	free(want.v);
	free(have.v);
}

static void verify(struct ctx *c, bool full)
{
	struct o2_inode *in;
	struct seen s = { c, 0, calloc(c->n + 1, 1), false, false, 0 };
	size_t live = 0;
	int r;

	c->steps++;
	if (!full && c->steps % c->check_every) {
		free(s.hit);
		return;
	}
	REQUIRE_EQ(o2_inode_get(c->fs, c->dir, &in), 0);
	r = o2_dir_iterate(c->fs, in, seen_fn, &s);
	REQUIRE(r == 0, "%s step %u: iterate: %d %s", c->v.what, c->steps, r, o2_fs_error(c->fs));
	REQUIRE(s.dot && s.dotdot, "%s: no . or ..", c->v.what);
	for (size_t i = 0; i < c->n; i++)
		live += c->e[i].live;
	REQUIRE(s.live == live, "%s step %u: iterate lists %zu names, the model has %zu",
		c->v.what, c->steps, s.live, live);
	/*
	 * every name found, every removed one not (between full checks a
	 * sample: the latest names and every 17th, as finds in block
	 * directories scan and the whole set each step made this quadratic)
	 */
	struct o2_buf *dib = ibuf(c, c->dir);

	for (size_t i = 0; i < c->n; i++) {
		struct ent *e = &c->e[i];

		if (!full && i % 17 && i + 8 < c->n)
			continue;
		struct o2_dir_slot f;
		struct o2_dirent de;

		r = o2_dir_find(c->fs, dib, e->name, e->len, &f);
		if (e->live) {
			REQUIRE(r == 0 && f.ino == e->ino && f.type == O2_FT_REG,
				"%s step %u: find \"%s\": %d %llu, the model says %llu", c->v.what,
				c->steps, e->name, r, (unsigned long long)f.ino,
				(unsigned long long)e->ino);
			r = o2_dir_lookup(c->fs, in, e->name, e->len, &de);
			REQUIRE(r == 0 && de.ino == e->ino, "%s step %u: lookup \"%s\": %d", c->v.what,
				c->steps, e->name, r);
		} else {
			REQUIRE(r == -ENOENT, "%s step %u: find removed \"%s\": %d", c->v.what,
				c->steps, e->name, r);
		}
	}
	check_index(c, dib);
	o2_brelse(c->fs, dib);
	o2_inode_unref(in);
	free(s.hit);
}

/* ---- edits, each a transaction as namei.c makes it ---- */

static void add(struct ctx *c, size_t i, uint64_t ino)
{
	if (i >= c->cap) {
		size_t old = c->cap;

		c->cap = c->cap ? c->cap * 2 : 256;
		if (c->cap <= i)
			c->cap = i + 1;
		c->e = realloc(c->e, c->cap * sizeof(*c->e));
		memset(c->e + old, 0, (c->cap - old) * sizeof(*c->e));
	}
	struct ent *e = &c->e[i];

	if (i >= c->n)
		c->n = i + 1;
	name_of(i, e->name, &e->len);
	struct o2_trans *t = begin(c->fs);
	struct o2_buf *dib = ibuf(c, c->dir);
	struct o2_dir_slot f;
	int r = o2_dir_find(c->fs, dib, e->name, e->len, &f);

	REQUIRE(r == -ENOENT, "%s: \"%s\" there before it is added: %d", c->v.what, e->name, r);
	r = o2_dir_add(t, c->fs, dib, e->name, e->len, ino, O2_FT_REG);
	REQUIRE(r == 0, "%s step %u: add \"%s\": %d %s", c->v.what, c->steps, e->name, r,
		o2_fs_error(c->fs));
	o2_brelse(c->fs, dib);
	links_add(c, t, ino, 1);
	end(t);
	e->ino = ino;
	e->live = true;
	e->pos = 0;
}

static void del(struct ctx *c, size_t i)
{
	struct ent *e = &c->e[i];
	struct o2_trans *t = begin(c->fs);
	struct o2_buf *dib = ibuf(c, c->dir);
	struct o2_dir_slot f;
	int r = o2_dir_find(c->fs, dib, e->name, e->len, &f);

	REQUIRE(r == 0, "%s: find \"%s\" to remove: %d", c->v.what, e->name, r);
	r = o2_dir_remove(t, c->fs, dib, e->name, e->len, &f);
	REQUIRE(r == 0, "%s step %u: remove \"%s\": %d %s", c->v.what, c->steps, e->name, r,
		o2_fs_error(c->fs));
	o2_brelse(c->fs, dib);
	links_add(c, t, e->ino, -1);
	end(t);
	e->live = false;
}

/* A rename within the directory: the new name added, then the old removed (two transactions). */
static void rename_ent(struct ctx *c, size_t from, size_t to)
{
	struct ent *a = &c->e[from];

	REQUIRE(to >= c->n, "test bug: rename to a used index");
	add(c, to, a->ino); /* (its own transaction: links +1) */
	a = &c->e[from];
	del(c, from);	    /* links -1 */
}

static void retarget(struct ctx *c, size_t i, uint64_t ino)
{
	struct ent *e = &c->e[i];
	struct o2_trans *t = begin(c->fs);
	struct o2_buf *dib = ibuf(c, c->dir);
	struct o2_dir_slot f;
	int r = o2_dir_find(c->fs, dib, e->name, e->len, &f);

	REQUIRE(r == 0, "%s: find \"%s\" to retarget: %d", c->v.what, e->name, r);
	r = o2_dir_retarget(t, c->fs, dib, &f, ino, O2_FT_REG);
	REQUIRE(r == 0, "%s: retarget \"%s\": %d %s", c->v.what, e->name, r, o2_fs_error(c->fs));
	o2_brelse(c->fs, dib);
	links_add(c, t, e->ino, -1);
	links_add(c, t, ino, 1);
	end(t);
	e->ino = ino;
}

/* ---- the directory's shape ---- */

struct shape {
	bool inline_data, indexed, dx_inline;
	uint64_t size;
	uint32_t clusters;
};

static struct shape shape_of(struct ctx *c)
{
	struct o2_buf *dib = ibuf(c, c->dir);
	const struct o2_dinode *di = o2_buf_dinode(dib);
	struct shape s = { 0 };

	s.inline_data = le16(di->i_dyn_features) & O2_DYN_INLINE_DATA;
	s.indexed = le16(di->i_dyn_features) & O2_DYN_INDEXED_DIR;
	s.size = le64(di->i_size);
	s.clusters = le32(di->i_clusters);
	if (s.indexed) {
		struct o2_buf *rb;

		REQUIRE_EQ(o2_bread(c->fs, le64(di->i_dx_root), O2_META_DX_ROOT, &rb), 0);
		s.dx_inline = ((const struct o2_dx_root_block *)rb->data)->dr_flags & O2_DX_INLINE;
		o2_brelse(c->fs, rb);
	}
	o2_brelse(c->fs, dib);
	return s;
}

/* ---- the cases ---- */

/*
 * Grow a directory through every shape its volume allows, then remove,
 * rename and retarget entries and add some back.
 */
START_TEST(grow_and_change)
{
	struct ctx c;
	const struct uv_geom *g = &geoms[_i];

	setup(&c, g);
	bool inl = o2_has_incompat(c.fs, O2_FEATURE_INCOMPAT_INLINE_DATA);
	bool idx = o2_has_incompat(c.fs, O2_FEATURE_INCOMPAT_INDEXED_DIRS);
	struct shape s = shape_of(&c);
	bool was_inline = s.inline_data, went_block = false, went_multi = false, went_leaves = false;
	/* enough names for index leaves: more than the dx root holds inline */
	size_t n = g->bs == 512 ? 260 : 700;

	REQUIRE(s.inline_data == inl, "%s: a new directory %s inline", c.v.what,
		s.inline_data ? "is" : "is not");
	c.check_every = 1;
	for (size_t i = 0; i < n; i++) {
		add(&c, i, c.target[i % NTARGETS]);
		struct shape now = shape_of(&c);

		if (s.inline_data && !now.inline_data) {
			/* out of the inode: one block, every entry kept, indexed if the volume is */
			went_block = true;
			REQUIRE(now.size == c.fs->bs, "%s: %llu bytes after leaving the inode", c.v.what,
				(unsigned long long)now.size);
			REQUIRE(now.indexed == idx, "%s: index %d after leaving the inode", c.v.what,
				now.indexed);
			verify(&c, true);
		}
		if (!now.inline_data && now.size > c.fs->bs && !went_multi) {
			went_multi = true;
			verify(&c, true);
		}
		if (s.indexed && s.dx_inline && !now.dx_inline) {
			went_leaves = true;
			verify(&c, true);
		}
		REQUIRE(!s.indexed || now.indexed, "%s: the index went away", c.v.what);
		REQUIRE(now.size >= s.size, "%s: the directory shrank on an add", c.v.what);
		s = now;
		if (i == 40)
			c.check_every = 13;
		verify(&c, false);
	}
	verify(&c, true);
	REQUIRE(!was_inline || went_block, "%s: never left the inode", c.v.what);
	REQUIRE(went_multi, "%s: never grew past one block (%llu bytes)", c.v.what,
		(unsigned long long)s.size);
	REQUIRE(!idx || went_leaves, "%s: the index never left its root", c.v.what);
	REQUIRE(((uint64_t)s.clusters << c.fs->cbits) >= s.size, "%s: %llu bytes in %u clusters",
		c.v.what, (unsigned long long)s.size, s.clusters);

	/* remove every third, rename every fifth, retarget every seventh */
	c.check_every = 11;
	for (size_t i = 0; i < n; i += 3) {
		del(&c, i);
		verify(&c, false);
	}
	verify(&c, true);
	/* half of the removed names come back, into the space they all left */
	uint64_t size_before = shape_of(&c).size;

	for (size_t i = 0; i < n / 2; i += 3) {
		add(&c, i, c.target[0]);
		verify(&c, false);
	}
	verify(&c, true);
	REQUIRE(shape_of(&c).size == size_before, "%s: re-adding removed names grew the directory",
		c.v.what);
	size_t next = n;

	for (size_t i = 1; i < n; i += 5) {
		if (!c.e[i].live)
			continue;
		rename_ent(&c, i, next++);
		verify(&c, false);
	}
	verify(&c, true);
	for (size_t i = 2; i < n; i += 7) {
		if (!c.e[i].live)
			continue;
		retarget(&c, i, c.target[(i + 1) % NTARGETS]);
		verify(&c, false);
	}
	verify(&c, true);
	/* fsck judges link counts, entries and index */
	uv_finish(&c.v, "directory", _i != 5);
	uv_free(&c.v);
	ctx_free(&c);
}
END_TEST

/* ---- the entry scanner ---- */

struct scan_acc {
	unsigned calls;
	uint64_t last;
	int stop_at;
};

static int scan_fn(const struct o2_dir_entry *de, uint64_t blk, void *arg)
{
	struct scan_acc *a = arg;

	(void)blk;
	a->calls++;
	a->last = le64(de->inode);
	return a->stop_at && (int)a->calls == a->stop_at ? 99 : 0;
}

static struct o2_dir_entry *entry_at(uint8_t *buf, unsigned off)
{
	return (struct o2_dir_entry *)(buf + off);
}

/* A block of three entries (a, a deleted one, b) and the rest in the last. */
static void good_block(uint8_t *buf, unsigned size, uint64_t ino)
{
	struct o2_dir_entry *de;

	memset(buf, 0, size);
	de = entry_at(buf, 0);
	de->inode = cpu_le64(ino);
	de->rec_len = cpu_le16(16);
	de->name_len = 1;
	de->file_type = O2_FT_REG;
	de->name[0] = 'a';
	de = entry_at(buf, 16);
	de->inode = 0; /* deleted: its type and name are not looked at */
	de->rec_len = cpu_le16(16);
	de->name_len = 3;
	de->file_type = 200;
	de = entry_at(buf, 32);
	de->inode = cpu_le64(ino + 1);
	de->rec_len = cpu_le16((uint16_t)(size - 32));
	de->name_len = 2;
	de->file_type = O2_FT_DIR;
	memcpy(de->name, "bb", 2);
}

static void expect_refused(struct o2_fs *fs, const uint8_t *buf, unsigned size, uint64_t blk,
			   const char *what, const char *words)
{
	struct scan_acc a = { 0, 0, 0 };
	char want[48];
	int r = o2_dir_scan_entries(fs, blk, buf, size, scan_fn, &a);

	REQUIRE(r == -EUCLEAN, "%s: scan gave %d", what, r);
	snprintf(want, sizeof(want), "block %llu", (unsigned long long)blk);
	REQUIRE(strstr(o2_fs_error(fs), want) != NULL, "%s: the message \"%s\" names no %s", what,
		o2_fs_error(fs), want);
	REQUIRE(strstr(o2_fs_error(fs), words) != NULL, "%s: the message \"%s\" does not say %s",
		what, o2_fs_error(fs), words);
	/* entries before the damaged one may have been seen, none after it */
	REQUIRE(a.calls <= 1, "%s: %u entries passed on", what, a.calls);
}

START_TEST(scanner_refuses_damage)
{
	struct uv v;
	uint8_t buf[512];
	const unsigned size = sizeof(buf);
	const uint64_t blk = 777;

	uv_make(&v, &geoms[0]);
	struct o2_fs *fs = v.fs;
	uint64_t ino = o2_fs_super(fs)->root_blkno;

	/* sound: both live entries, in order, and the callback's stop */
	{
		struct scan_acc a = { 0, 0, 0 };

		good_block(buf, size, ino);
		REQUIRE_EQ(o2_dir_scan_entries(fs, blk, buf, size, scan_fn, &a), 0);
		REQUIRE_EQ(a.calls, 2);
		REQUIRE_EQ(a.last, ino + 1);
		a = (struct scan_acc){ 0, 0, 1 };
		REQUIRE_EQ(o2_dir_scan_entries(fs, blk, buf, size, scan_fn, &a), 99);
		REQUIRE_EQ(a.calls, 1);
	}
	/* misaligned rec_len (the next entry then starts off the 4-byte grid) */
	good_block(buf, size, ino);
	entry_at(buf, 0)->rec_len = cpu_le16(18);
	expect_refused(fs, buf, size, blk, "misaligned rec_len", "rec_len");
	/* a name longer than its record */
	good_block(buf, size, ino);
	entry_at(buf, 0)->name_len = 9; /* needs 24 bytes, the record has 16 */
	expect_refused(fs, buf, size, blk, "name_len > rec_len", "name");
	/* a live entry of an unknown file type */
	good_block(buf, size, ino);
	entry_at(buf, 32)->file_type = O2_FT_MAX;
	expect_refused(fs, buf, size, blk, "bad file type", "file type");
	/* an inode past the end of the volume, and one inside the superblock's blocks */
	good_block(buf, size, ino);
	entry_at(buf, 32)->inode = cpu_le64(fs->nblocks + 5);
	expect_refused(fs, buf, size, blk, "inode past the volume", "outside the volume");
	good_block(buf, size, ino);
	entry_at(buf, 0)->inode = cpu_le64(O2_SUPER_BLKNO);
	expect_refused(fs, buf, size, blk, "inode at the superblock", "outside the volume");
	/* a record running past the block, one below the minimum, a live one without a name */
	good_block(buf, size, ino);
	entry_at(buf, 32)->rec_len = cpu_le16((uint16_t)(size - 28));
	expect_refused(fs, buf, size, blk, "rec_len past the end", "past the end");
	good_block(buf, size, ino);
	entry_at(buf, 0)->rec_len = cpu_le16(8);
	expect_refused(fs, buf, size, blk, "rec_len below the minimum", "minimum");
	good_block(buf, size, ino);
	entry_at(buf, 0)->name_len = 0;
	expect_refused(fs, buf, size, blk, "empty name", "empty name");
	/* the inline area's size need not be a block's: a short tail is refused too */
	good_block(buf, size, ino);
	expect_refused(fs, buf, 40, 1234, "entry cut short", "");
	uv_free(&v);
}
END_TEST

/*
 * Damage on disk: an entry's rec_len misaligned in a directory block.
 * Readers (iterate, lookup) and the write side (find, add) all refuse it
 * with -EUCLEAN naming that block, and the add changes nothing.
 */
START_TEST(damaged_block_refused)
{
	static const struct uv_geom dg[] = {
		{ .bs = 4096, .cs = 4096 },
		{ .bs = 512, .cs = 4096, .features = "noindexed-dirs" },
	};
	struct ctx c;
	struct o2_dir_slot f;
	char want[48], nm[256];
	uint8_t len;
	int r;

	setup(&c, &dg[_i]);
	/* long names: out of the inode into blocks */
	size_t n = 0;

	while (shape_of(&c).inline_data || shape_of(&c).size < 2ull * c.fs->bs) {
		add(&c, n, c.target[0]);
		n++;
		REQUIRE(n < 1000, "the directory does not grow");
	}
	verify(&c, true);
	/* the entry of name 0, in the directory's first block */
	struct o2_buf *dib = ibuf(&c, c.dir);

	REQUIRE_EQ(o2_dir_find(c.fs, dib, c.e[0].name, c.e[0].len, &f), 0);
	o2_brelse(c.fs, dib);
	REQUIRE(f.blk != 0, "name 0 is still inline");
	uv_close(&c.v);
	uint8_t *img = o2_blockdev_memory_data(c.v.dev);
	struct o2_dir_entry *de = (struct o2_dir_entry *)(img + f.blk * c.v.g.bs + f.off);

	de->rec_len = cpu_le16((uint16_t)(le16(de->rec_len) + 2));
	uv_reopen(&c.v);
	c.fs = c.v.fs;
	snprintf(want, sizeof(want), "block %llu", (unsigned long long)f.blk);

	struct o2_inode *in;

	REQUIRE_EQ(o2_inode_get(c.fs, c.dir, &in), 0);
	struct seen s = { &c, 0, calloc(c.n + 1, 1), false, false, 0 };

	r = o2_dir_iterate(c.fs, in, seen_fn, &s);
	free(s.hit);
	REQUIRE(r == -EUCLEAN && strstr(o2_fs_error(c.fs), want),
		"iterate over a damaged block: %d \"%s\"", r, o2_fs_error(c.fs));
	struct o2_dirent d;

	r = o2_dir_lookup(c.fs, in, c.e[0].name, c.e[0].len, &d);
	REQUIRE(r == -EUCLEAN && strstr(o2_fs_error(c.fs), want),
		"lookup in a damaged block: %d \"%s\"", r, o2_fs_error(c.fs));
	o2_inode_unref(in);
	dib = ibuf(&c, c.dir);
	r = o2_dir_find(c.fs, dib, c.e[0].name, c.e[0].len, &f);
	REQUIRE(r == -EUCLEAN && strstr(o2_fs_error(c.fs), want), "find in a damaged block: %d \"%s\"",
		r, o2_fs_error(c.fs));
	if (!o2_has_incompat(c.fs, O2_FEATURE_INCOMPAT_INDEXED_DIRS)) {
		/* a block directory's add looks at its first block first */
		uint8_t before[4096];
		struct o2_trans *t = begin(c.fs);

		memcpy(before, img + f.blk * c.v.g.bs, c.v.g.bs);
		name_of(5000, nm, &len);
		r = o2_dir_add(t, c.fs, dib, nm, len, c.target[0], O2_FT_REG);
		REQUIRE(r == -EUCLEAN && strstr(o2_fs_error(c.fs), want),
			"add to a damaged directory: %d \"%s\"", r, o2_fs_error(c.fs));
		end(t);
		REQUIRE(o2_fs_sync(c.fs) == 0, "sync");
		REQUIRE(memcmp(before, img + f.blk * c.v.g.bs, c.v.g.bs) == 0,
			"a refused add changed the block");
	}
	o2_brelse(c.fs, dib);
	o2_fs_close(c.fs);
	c.v.fs = NULL;
	uv_free(&c.v);
	ctx_free(&c);
}
END_TEST

/* ---- orphans under cluster-lock rules ---- */

/* Clusters taken from the window by the test (start, count), given back at the end. */
static uint32_t taken[4096][2];
static unsigned ntaken;

/* Take what the local-alloc window has left: what comes next is from the global bitmap. */
static void use_up_window(struct o2_fs *fs)
{
	struct o2_buf *lb;
	uint32_t left, start, got;

	REQUIRE_EQ(o2_bread(fs, fs->sys.local_alloc, O2_META_INODE, &lb), 0);
	left = le32(o2_buf_dinode(lb)->id1.bitmap1.i_total) -
	       le32(o2_buf_dinode(lb)->id1.bitmap1.i_used);
	o2_brelse(fs, lb);
	while (left) {
		struct o2_trans *t;
		int r;

		REQUIRE_EQ(o2_trans_begin(fs, 4, &t), 0);
		r = o2_clusters_alloc(t, fs, 1, left, &start, &got);
		REQUIRE(r == 0, "using up the window: %d %s", r, o2_fs_error(fs));
		REQUIRE_EQ(o2_trans_end(t), 0);
		REQUIRE(ntaken < sizeof(taken) / sizeof(taken[0]), "window taken %u times", ntaken);
		taken[ntaken][0] = start;
		taken[ntaken++][1] = got;
		left -= got;
	}
}

/* One unlink as the daemon runs it: without the global bitmap's lock, then with it if asked. */
static int unlink_locked(struct o2_fs *fs, uint64_t dir, const char *name)
{
	int r;

	uv_gb_held = false;
	r = o2_unlink(fs, dir, name, strlen(name));
	if (r == -O2_ENEEDLOCK) {
		uint64_t want;
		bool ex;

		o2_fs_lock_wanted(fs, &want, &ex);
		REQUIRE(want == uv_gb_blkno, "unlink %s wants the lock of %llu", name,
			(unsigned long long)want);
		uv_gb_held = true;
		r = o2_unlink(fs, dir, name, strlen(name));
	}
	uv_gb_held = false;
	return r;
}

/*
 * Files another holder keeps (the kernel's lookups) go to the orphan
 * directory at their unlink, which grows an index whose leaves fill.  An
 * entry's hash picks its leaf, so the unlink must reserve for the entry
 * it will add, not another name's: with the local-alloc window used up, a
 * full leaf's rebuild takes clusters from the global bitmap, and an
 * unreserved one needs that lock inside the transaction (the volume then
 * turns read-only).  Found by two nodes each removing 10,000 files.
 */
START_TEST(orphans_indexed_under_locks)
{
	const struct uv_geom g = { .bs = 4096, .cs = 4096, .bytes = 256 * MiB };
	struct o2_new_inode ni = { .mode = S_IFDIR | 0755 };
	/* 8 MiB windows, as used up below (the default would be 106 MiB) */
	struct o2_open_opts o = { .flags = O2_OPEN_RDWR, .slot = 0, .lock_held = uv_lock_held,
				  .localalloc_mb = 8 };
	enum { N = 3000 };
	static uint64_t ino[N];
	struct uv v;
	char err[512] = "", nm[16];
	uint64_t dir;
	int r;

	uv_make(&v, &g);
	r = o2_mkdir(v.fs, o2_fs_super(v.fs)->root_blkno, "d", 1, &ni, &dir);
	REQUIRE(r == 0, "mkdir: %d %s", r, o2_fs_error(v.fs));
	ni.mode = S_IFREG | 0644;
	for (int i = 0; i < N; i++) {
		snprintf(nm, sizeof(nm), "f%d", i);
		r = o2_create(v.fs, dir, nm, strlen(nm), &ni, &ino[i]);
		REQUIRE(r == 0, "create %s: %d %s", nm, r, o2_fs_error(v.fs));
	}
	uv_close(&v);
	r = o2_fs_open_opts(v.dev, &o, &v.fs, err, sizeof(err));
	ck_assert_msg(r == 0, "open: %d %s", r, err);
	struct o2_fs *fs = v.fs;

	REQUIRE_EQ(o2_sysfile_lookup(fs, O2_SYS_GLOBAL_BITMAP, 0, &uv_gb_blkno), 0);
	for (int i = 0; i < N; i++)
		REQUIRE_EQ(o2_inode_open_ref(fs, ino[i]), 0);
	for (int i = 0; i < N; i++) {
		snprintf(nm, sizeof(nm), "f%d", i);
		use_up_window(fs);
		r = unlink_locked(fs, dir, nm);
		REQUIRE(r == 0, "unlink %s (orphan %d): %d %s", nm, i, r, o2_fs_error(fs));
	}
	uv_gb_held = true; /* the last closes free them, as the daemon's orphan work does */
	for (int i = 0; i < N; i++)
		REQUIRE_EQ(o2_inode_close_ref(fs, ino[i]), 0);
	for (unsigned i = 0; i < ntaken; i++) {
		struct o2_trans *t;

		REQUIRE_EQ(o2_trans_begin(fs, 8, &t), 0);
		REQUIRE_EQ(o2_clusters_free(t, fs, taken[i][0], taken[i][1]), 0);
		REQUIRE_EQ(o2_trans_end(t), 0);
		if (o2_trunclog_pending(fs))
			REQUIRE_EQ(o2_trunclog_flush(fs), 0);
	}
	ntaken = 0;
	uv_finish(&v, "orphans in an indexed orphan directory", true);
	uv_free(&v);
	uv_gb_blkno = 0;
}
END_TEST

static Suite *dir_suite(void)
{
	Suite *s = suite_create("dir");
	TCase *tc = tcase_create("grow");

	tcase_add_loop_test(tc, grow_and_change, 0, NGEOMS);
	suite_add_tcase(s, tc);
	tc = tcase_create("scanner");
	tcase_add_test(tc, scanner_refuses_damage);
	tcase_add_loop_test(tc, damaged_block_refused, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("orphans");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, orphans_indexed_under_locks);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_env_init();
	SRunner *sr = srunner_create(dir_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
