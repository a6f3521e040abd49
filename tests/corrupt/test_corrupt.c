/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Damaged volumes: fscore must answer every call on a damaged image with
 * success or a negative errno, never crash, hang or read out of bounds; a
 * corruption (-EUCLEAN) always comes with a message that names the block.
 *
 * How it works.  At start-up the real mkfs.ocfs2 makes a set of volumes
 * (default, max-compat and max-features; 512-byte and 4 KiB blocks).  Each
 * test case loads one into a memory device, finds the structure it wants to
 * damage by asking fscore itself on the pristine copy (system file lookups,
 * extent and chain records) and computing byte offsets from format.h, damages
 * it, and runs everything: open, the verification walk, path lookups, ls of
 * / and //, every system file read in full, slot map, chain walks, journal
 * superblocks.  Where the outcome is deterministic the test asserts the error
 * and the block the message names.
 *
 * Variants.  Every damage runs on every volume.  On metaecc volumes it runs
 * twice: once with the block checks recomputed after the damage (so the
 * structural checks are what must catch it), once "raw", where the stale
 * check must be what catches it: -EUCLEAN naming the damaged block.
 *
 * Needs mkfs.ocfs2; exits 77 (skip) without it.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "blockcheck.h"
#include "format.h"
#include "o2fs/o2fs.h"
#include "../testenv.h"

#define MiB (1024ull * 1024ull)
#define ANY_BLOCK UINT64_MAX

/* ---- the volumes ---- */

struct image {
	const char *name;
	const char *mkfs_args;
	unsigned bs;
	uint64_t size;
	bool ecc;
	const uint8_t *data;
	char path[320];
};

static struct image images[] = {
	{ "default-4k", "", 4096, 64 * MiB, false, NULL, "" },
	{ "default-512", "", 512, 64 * MiB, false, NULL, "" },
	{ "max-compat-4k", "--fs-feature-level=max-compat", 4096, 64 * MiB, false, NULL, "" },
	{ "max-compat-512", "--fs-feature-level=max-compat", 512, 64 * MiB, false, NULL, "" },
	{ "max-features-4k", "--fs-feature-level=max-features", 4096, 128 * MiB, true, NULL, "" },
	{ "max-features-512", "--fs-feature-level=max-features", 512, 64 * MiB, true, NULL, "" },
};
#define NIMAGES (sizeof(images) / sizeof(images[0]))

struct variant {
	unsigned img;
	bool raw; /* metaecc volumes: leave the stale block checks */
};

static const struct variant variants[] = {
	{ 0, false }, { 1, false }, { 2, false }, { 3, false },
	{ 4, false }, { 5, false }, { 4, true },  { 5, true },
};
#define NVARIANTS ((int)(sizeof(variants) / sizeof(variants[0])))

static char tmpdir[256];

/* ---- devices over shared memory ---- */

/*
 * Each case damages its own copy of a 64-128 MiB image, and opens copies of
 * that read-write: copying whole images made the suite spend most of its
 * time in memcpy and page faults.  So a case's volume is a private mapping
 * of the image file (the kernel copies the pages the case touches), and the
 * devices here read through to memory they do not own: a view (reads and
 * writes go to the memory) and a copy-on-write overlay (writes land in
 * private pages; the memory underneath is never changed).
 */
#define COW_PAGE 4096u

struct shared_dev {
	struct o2_blockdev dev;
	uint8_t *mem;	     /* view: read and written in place */
	const uint8_t *base; /* overlay: read where no page was written */
	uint8_t **pages;     /* overlay: written pages, by page index */
	size_t npages;
};

static int view_read(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off)
{
	memcpy(buf, ((struct shared_dev *)dev)->mem + off, len);
	return 0;
}

static int view_write(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off)
{
	memcpy(((struct shared_dev *)dev)->mem + off, buf, len);
	return 0;
}

static void shared_destroy(struct o2_blockdev *dev)
{
	struct shared_dev *d = (struct shared_dev *)dev;
	for (size_t i = 0; d->pages && i < d->npages; i++)
		free(d->pages[i]);
	free(d->pages);
	free(d);
}

static const struct o2_blockdev_ops view_ops = {
	.read = view_read, .write = view_write, .flush = NULL, .destroy = shared_destroy
};

static int cow_read(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off)
{
	struct shared_dev *d = (struct shared_dev *)dev;
	uint8_t *out = buf;
	while (len) {
		size_t pg = (size_t)(off / COW_PAGE), in = (size_t)(off % COW_PAGE);
		size_t n = COW_PAGE - in < len ? COW_PAGE - in : len;
		memcpy(out, d->pages[pg] ? d->pages[pg] + in : d->base + off, n);
		out += n;
		off += n;
		len -= n;
	}
	return 0;
}

static int cow_write(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off)
{
	struct shared_dev *d = (struct shared_dev *)dev;
	const uint8_t *from = buf;
	while (len) {
		size_t pg = (size_t)(off / COW_PAGE), in = (size_t)(off % COW_PAGE);
		size_t n = COW_PAGE - in < len ? COW_PAGE - in : len;
		if (!d->pages[pg]) {
			uint64_t start = (uint64_t)pg * COW_PAGE;
			uint64_t have = d->dev.size - start < COW_PAGE ? d->dev.size - start : COW_PAGE;
			d->pages[pg] = calloc(1, COW_PAGE);
			ck_assert_ptr_nonnull(d->pages[pg]);
			memcpy(d->pages[pg], d->base + start, (size_t)have);
		}
		memcpy(d->pages[pg] + in, from, n);
		from += n;
		off += n;
		len -= n;
	}
	return 0;
}

static const struct o2_blockdev_ops cow_ops = {
	.read = cow_read, .write = cow_write, .flush = NULL, .destroy = shared_destroy
};

static struct o2_blockdev *shared_dev_new(const struct o2_blockdev_ops *ops, const uint8_t *mem,
					  uint64_t size)
{
	struct shared_dev *d = calloc(1, sizeof(*d));
	ck_assert_ptr_nonnull(d);
	d->dev.ops = ops;
	d->dev.size = size / 512 * 512;
	d->dev.sector_size = 512;
	if (ops == &view_ops) {
		d->mem = (uint8_t *)mem;
	} else {
		d->base = mem;
		d->npages = (size_t)((size + COW_PAGE - 1) / COW_PAGE);
		d->pages = calloc(d->npages ? d->npages : 1, sizeof(*d->pages));
		ck_assert_ptr_nonnull(d->pages);
	}
	return &d->dev;
}

/* A device over mem that the test's own changes show through. */
static struct o2_blockdev *view_dev(uint8_t *mem, uint64_t size)
{
	return shared_dev_new(&view_ops, mem, size);
}

/* A writable copy of mem, copied a page at a time as it is written. */
static struct o2_blockdev *cow_dev(const uint8_t *mem, uint64_t size)
{
	return shared_dev_new(&cow_ops, mem, size);
}

/* Block b as a copy-on-write device now holds it (what a replay wrote). */
static const uint8_t *cow_block(struct o2_blockdev *dev, uint64_t b, unsigned bs)
{
	static uint8_t buf[4096];
	ck_assert_uint_le(bs, sizeof(buf));
	ck_assert_int_eq(cow_read(dev, buf, bs, b * bs), 0);
	return buf;
}

/* ---- a deterministic PRNG ---- */

static uint64_t rng_state;

static void rng_seed(uint64_t s)
{
	rng_state = s * 0x9E3779B97F4A7C15ull + 0x1234567ull;
}

static uint64_t rng(void)
{
	uint64_t x = rng_state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* ---- one damaged volume ---- */

enum kind { K_NONE, K_INODE, K_GROUP, K_EXTENT, K_DIRBLOCK, K_DXROOT };

struct snapshot {
	uint64_t blkno;
	uint8_t data[4096];
};

struct target {
	uint64_t blkno;
	enum kind kind;
};

struct vol {
	const struct image *img;
	bool raw;
	int variant;
	char ctx[320]; /* names the case in every message */
	struct o2_blockdev *dev;
	uint8_t *mem;
	unsigned bs, bpc_bits;
	uint64_t nblocks;
	uint32_t fs_generation;
	unsigned slots;
	uint64_t root, sysdir, lost_found, first_cluster_group;
	uint64_t sys[O2_SYS_COUNT][2];
	/* from the pristine volume */
	struct o2_extent jrec[2];    /* journal:000N extent record 0 */
	uint64_t jsb[2];	     /* journal superblock blocks */
	uint32_t jclusters;	     /* journal:0000 i_clusters */
	uint64_t gb_groups[16];	     /* global bitmap groups, chain order */
	unsigned gb_chain[16], gb_ngroups;
	uint64_t ia_group;	     /* inode_alloc:0000 first group */
	uint64_t slotmap_data;	     /* slot map data block 0 */
	/* raw mode: protected blocks changed, and what their checks make of it */
	struct target touched[16];
	unsigned ntouched;
	uint64_t marks[16]; /* changed beyond repair: the stale check must catch it */
	unsigned nmarks;
	unsigned ncorrected; /* one flipped bit: the ECC must repair it */
	struct snapshot snaps[8];
	unsigned nsnaps;
	/* metadata blocks, for the fuzzer */
	struct target targets[1024];
	unsigned ntargets;
};

static uint8_t *blk(struct vol *v, uint64_t b)
{
	ck_assert_msg(b < v->nblocks, "%s: test bug: block %" PRIu64 " outside", v->ctx, b);
	return v->mem + b * v->bs;
}

static struct o2_dinode *dinode(struct vol *v, uint64_t b)
{
	return (struct o2_dinode *)blk(v, b);
}

static size_t check_off(const struct vol *v, enum kind k)
{
	switch (k) {
	case K_INODE:
		return offsetof(struct o2_dinode, i_check);
	case K_GROUP:
		return offsetof(struct o2_group_desc, bg_check);
	case K_EXTENT:
		return offsetof(struct o2_extent_block, h_check);
	case K_DXROOT:
		return offsetof(struct o2_dx_root_block, dr_check);
	case K_DIRBLOCK:
		return v->bs - sizeof(struct o2_dir_trailer) + offsetof(struct o2_dir_trailer, db_check);
	case K_NONE:
		break;
	}
	return 0;
}

static void recompute(struct vol *v, uint64_t b, enum kind k)
{
	uint8_t *p = blk(v, b);
	o2_blockcheck_compute(p, v->bs, p + check_off(v, k));
}

/*
 * A block was changed.  On metaecc volumes either fix its check, or (raw)
 * leave it stale; classify() later works out what the check must do.
 */
static void touched(struct vol *v, uint64_t b, enum kind k)
{
	if (!v->img->ecc || k == K_NONE)
		return;
	if (!v->raw) {
		recompute(v, b, k);
		return;
	}
	for (unsigned i = 0; i < v->ntouched; i++)
		if (v->touched[i].blkno == b)
			return;
	ck_assert_uint_lt(v->ntouched, 16);
	v->touched[v->ntouched++] = (struct target){ b, k };
}

static const uint8_t *baseline(struct vol *v, uint64_t b)
{
	for (unsigned i = 0; i < v->nsnaps; i++)
		if (v->snaps[i].blkno == b)
			return v->snaps[i].data;
	return v->img->data + b * v->bs;
}

/*
 * Raw mode: compare each changed block with what it was.  Changed bits
 * outside the check: one is repaired by the ECC, more make the block
 * untrustworthy; a changed CRC always does.
 */
static void classify(struct vol *v)
{
	v->nmarks = 0;
	v->ncorrected = 0;
	for (unsigned i = 0; i < v->ntouched; i++) {
		uint64_t b = v->touched[i].blkno;
		const uint8_t *was = baseline(v, b), *now = blk(v, b);
		size_t co = check_off(v, v->touched[i].kind);
		unsigned bits = 0;
		bool crc = memcmp(was + co, now + co, 4) != 0;

		for (size_t k = 0; k < v->bs; k++)
			if (k < co || k >= co + sizeof(struct o2_block_check))
				bits += (unsigned)__builtin_popcount(was[k] ^ now[k]);
		if (crc || bits > 1)
			v->marks[v->nmarks++] = b;
		else if (bits == 1)
			v->ncorrected++;
	}
}

/* Save a block so that restore() can undo the damage (several cases per test). */
static void snap(struct vol *v, uint64_t b)
{
	ck_assert_uint_lt(v->nsnaps, 8);
	v->snaps[v->nsnaps].blkno = b;
	memcpy(v->snaps[v->nsnaps].data, blk(v, b), v->bs);
	v->nsnaps++;
}

static void restore(struct vol *v)
{
	while (v->nsnaps) {
		v->nsnaps--;
		memcpy(blk(v, v->snaps[v->nsnaps].blkno), v->snaps[v->nsnaps].data, v->bs);
	}
	v->ntouched = 0;
	v->nmarks = 0;
	v->ncorrected = 0;
}

/* ---- conventions ---- */

static bool names_block(const char *msg, uint64_t b)
{
	char pat[40];
	int n = snprintf(pat, sizeof(pat), "block %" PRIu64, b);
	for (const char *p = msg; (p = strstr(p, pat)) != NULL; p++)
		if (p[n] < '0' || p[n] > '9')
			return true;
	return false;
}

static bool names_some_block(const char *msg)
{
	for (const char *p = msg; (p = strstr(p, "block ")) != NULL; p++)
		if (p[6] >= '0' && p[6] <= '9')
			return true;
	return false;
}

static const int allowed_errors[] = { EUCLEAN, ENOENT,	   ERANGE,	EINVAL,	     ENOTDIR,
				      EIO,     ENODATA,	   EOPNOTSUPP,	ENAMETOOLONG };

static bool allowed(long r)
{
	for (size_t i = 0; i < sizeof(allowed_errors) / sizeof(allowed_errors[0]); i++)
		if (r == -allowed_errors[i])
			return true;
	return false;
}

static const char *ctx_of(const struct vol *v)
{
	return v ? v->ctx : "?";
}

/* Every call: >= 0, or an allowed -errno; -EUCLEAN names a block. */
static void conv(const struct vol *v, struct o2_fs *fs, long r, const char *what)
{
	if (r >= 0)
		return;
	ck_assert_msg(allowed(r), "%s: %s returned %ld (%s): not a valid error here; message: %s",
		      ctx_of(v), what, r, strerror((int)-r), fs ? o2_fs_error(fs) : "");
	if (r == -EUCLEAN) {
		const char *m = o2_fs_error(fs);
		ck_assert_msg(m && m[0], "%s: %s gave -EUCLEAN with an empty message", ctx_of(v),
			      what);
		ck_assert_msg(names_some_block(m),
			      "%s: %s gave -EUCLEAN; message does not name a block: \"%s\"",
			      ctx_of(v), what, m);
	}
}

/* ---- exercising everything ---- */

struct outcome {
	int open_r;
	char open_msg[512];
	int walk_r;
	char walk_msg[512];
	struct o2_walk_stats stats;
};

struct count_ctx {
	const struct vol *v;
	struct o2_fs *fs;
	unsigned n;
	uint64_t nblocks;
};

static int dirent_cb(const struct o2_dirent *de, void *arg)
{
	struct count_ctx *c = arg;

	ck_assert_msg(de->name_len > 0, "%s: empty name from o2_dir_iterate", ctx_of(c->v));
	ck_assert_msg(de->name[de->name_len] == '\0', "%s: name not terminated", ctx_of(c->v));
	ck_assert_msg(de->ino < c->nblocks, "%s: dirent %s names inode %" PRIu64 " outside the device",
		      ctx_of(c->v), de->name, de->ino);
	ck_assert_msg(de->type < 8, "%s: dirent type %u", ctx_of(c->v), de->type);
	return ++c->n > 100000; /* stop runaway directories */
}

static int extent_cb(const struct o2_extent *e, uint64_t eb, void *arg)
{
	struct count_ctx *c = arg;

	if (e && e->blkno)
		ck_assert_msg(e->blkno < c->nblocks, "%s: extent maps block %" PRIu64 " outside",
			      ctx_of(c->v), e->blkno);
	if (!e)
		ck_assert_msg(eb < c->nblocks, "%s: extent block %" PRIu64 " outside", ctx_of(c->v),
			      eb);
	return ++c->n > 1000000;
}

static int group_cb(unsigned chain, const struct o2_group_info *g, void *arg)
{
	struct count_ctx *c = arg;

	ck_assert_msg(g->blkno < c->nblocks, "%s: group %" PRIu64 " outside", ctx_of(c->v),
		      g->blkno);
	ck_assert_msg(g->free_bits <= g->bits, "%s: group %" PRIu64 " reported with %u free of %u",
		      ctx_of(c->v), g->blkno, g->free_bits, g->bits);
	return ++c->n > 1000000;
}

#define SENTINEL_PTR ((void *)(uintptr_t)0x5A5A5A50)
#define SENTINEL_BLK 0xA5A5A5A5A5A5A5A5ull

static void read_fully(const struct vol *v, struct o2_fs *fs, struct o2_inode *ino)
{
	const struct o2_inode_info *in = o2_inode_info(ino);
	const size_t chunk = 1 << 20;
	uint64_t cap = 2 * (uint64_t)v->img->size, end = in->size < cap ? in->size : cap;
	uint8_t *buf = malloc(chunk);

	for (uint64_t off = 0; off < end;) {
		ssize_t n = o2_inode_read(fs, ino, off, buf, chunk);
		conv(v, fs, n, "o2_inode_read");
		if (n <= 0)
			break;
		ck_assert_msg((size_t)n <= chunk, "%s: o2_inode_read returned %zd > %zu", v->ctx, n,
			      chunk);
		off += (uint64_t)n;
	}
	/* Reading at or past the end returns nothing. */
	ck_assert_int_eq(o2_inode_read(fs, ino, in->size, buf, 16), 0);
	ck_assert_int_eq(o2_inode_read(fs, ino, UINT64_MAX, buf, 16), 0);
	free(buf);
}

static void exercise_inode(const struct vol *v, struct o2_fs *fs, uint64_t blkno, bool dirs)
{
	struct o2_inode *ino = SENTINEL_PTR;
	struct count_ctx cc = { v, fs, 0, v->nblocks };
	int r = o2_inode_get(fs, blkno, &ino);

	conv(v, fs, r, "o2_inode_get");
	if (r < 0) {
		ck_assert_msg(ino == SENTINEL_PTR, "%s: o2_inode_get wrote ret on failure", v->ctx);
		return;
	}
	const struct o2_inode_info *in = o2_inode_info(ino);
	ck_assert_uint_eq(in->blkno, blkno);

	switch (in->kind) {
	case O2_ID2_EXTENTS: {
		struct o2_extent e;
		for (unsigned i = 0; i <= in->list_next_free; i++) {
			r = o2_inode_extent_rec(ino, i, &e);
			ck_assert_int_eq(r, i < in->list_next_free ? 0 : -ERANGE);
		}
		r = o2_inode_walk_extents(fs, ino, extent_cb, &cc);
		conv(v, fs, r, "o2_inode_walk_extents");
		const uint32_t probes[] = { 0, 1, 1000, UINT32_MAX / 2, UINT32_MAX };
		for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
			r = o2_inode_map(fs, ino, probes[i], &e);
			conv(v, fs, r, "o2_inode_map");
			if (r == 0) {
				ck_assert_uint_eq(e.cpos, probes[i]);
				ck_assert_uint_ge(e.clusters, 1);
				if (e.blkno)
					ck_assert_msg(e.blkno < v->nblocks &&
							      ((uint64_t)e.clusters << v->bpc_bits) <=
								      v->nblocks - e.blkno,
						      "%s: o2_inode_map(%" PRIu64 ", %u) gave blocks %" PRIu64
						      "+%u clusters, past the device",
						      v->ctx, blkno, probes[i], e.blkno, e.clusters);
			}
		}
		read_fully(v, fs, ino);
		break;
	}
	case O2_ID2_INLINE:
	case O2_ID2_FAST_SYMLINK:
		read_fully(v, fs, ino);
		break;
	case O2_ID2_CHAIN: {
		struct o2_chain_rec_info cr;
		for (unsigned i = 0; i <= in->chain_next_free; i++) {
			r = o2_inode_chain_rec(ino, i, &cr);
			ck_assert_int_eq(r, i < in->chain_next_free ? 0 : -ERANGE);
		}
		r = o2_chain_walk(fs, ino, group_cb, &cc);
		conv(v, fs, r, "o2_chain_walk");
		break;
	}
	case O2_ID2_TRUNCATE_LOG: {
		struct o2_trunc_rec tr;
		for (unsigned i = 0; i <= in->tl_used; i++) {
			r = o2_inode_truncate_rec(ino, i, &tr);
			ck_assert_int_eq(r, i < in->tl_used ? 0 : -ERANGE);
		}
		break;
	}
	case O2_ID2_LOCAL_ALLOC:
		ck_assert_uint_le(o2_inode_local_alloc_used(ino), (unsigned)in->la_size * 8);
		break;
	default:
		break;
	}
	if ((in->mode & S_IFMT) == S_IFDIR && dirs) {
		struct o2_dirent de;
		static const char *names[] = { ".", "..", "lost+found", "journal:0000",
					       "no-such-name" };
		r = o2_dir_iterate(fs, ino, dirent_cb, &cc);
		conv(v, fs, r, "o2_dir_iterate");
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			de.ino = SENTINEL_BLK;
			r = o2_dir_lookup(fs, ino, names[i], strlen(names[i]), &de);
			conv(v, fs, r, "o2_dir_lookup");
			if (r < 0)
				ck_assert_uint_eq(de.ino, SENTINEL_BLK);
		}
		char longname[300];
		memset(longname, 'x', sizeof(longname));
		r = o2_dir_lookup(fs, ino, longname, 255, &de);
		conv(v, fs, r, "o2_dir_lookup(255)");
		r = o2_dir_lookup(fs, ino, longname, 256, &de);
		conv(v, fs, r, "o2_dir_lookup(256)");
		ck_assert_int_ne(r, 0);
	}
	if ((in->mode & S_IFMT) == S_IFLNK) {
		char target[4096];
		r = o2_inode_readlink(fs, ino, target, sizeof(target));
		conv(v, fs, r, "o2_inode_readlink");
	}
	o2_inode_unref(ino);
}

struct entries {
	uint64_t ino[512];
	unsigned n;
};

static int collect_cb(const struct o2_dirent *de, void *arg)
{
	struct entries *e = arg;

	if ((de->name_len == 1 && de->name[0] == '.') ||
	    (de->name_len == 2 && de->name[0] == '.' && de->name[1] == '.'))
		return 0;
	if (e->n < 512)
		e->ino[e->n++] = de->ino;
	return 0;
}

/* ls DIR, then stat and read every entry. */
static void exercise_dir(const struct vol *v, struct o2_fs *fs, uint64_t dir)
{
	struct o2_inode *ino;
	struct entries *e = calloc(1, sizeof(*e));
	int r = o2_inode_get(fs, dir, &ino);

	conv(v, fs, r, "o2_inode_get(dir)");
	if (r == 0) {
		r = o2_dir_iterate(fs, ino, collect_cb, e);
		conv(v, fs, r, "o2_dir_iterate(collect)");
		o2_inode_unref(ino);
	}
	exercise_inode(v, fs, dir, true);
	for (unsigned i = 0; i < e->n; i++)
		exercise_inode(v, fs, e->ino[i], true);
	free(e);
}

static void exercise_rest(const struct vol *v, struct o2_fs *fs, bool light)
{
	const struct o2_super_info *si = o2_fs_super(fs);
	int r;

	ck_assert_uint_eq(si->block_size, v->bs);
	ck_assert_uint_eq(si->device_blocks, v->nblocks);

	static const char *paths[] = { "/",
				       "//",
				       "/lost+found",
				       "/lost+found/",
				       "//global_bitmap",
				       "//journal:0000",
				       "//orphan_dir:0000/x",
				       "/lost+found/../lost+found/.",
				       "/no/such/path",
				       "//slot_map/x" };
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		uint64_t b = SENTINEL_BLK;
		r = o2_path_lookup(fs, paths[i], &b);
		conv(v, fs, r, "o2_path_lookup");
		if (r < 0)
			ck_assert_uint_eq(b, SENTINEL_BLK);
		else
			ck_assert_uint_lt(b, v->nblocks);
	}

	if (!light) {
		exercise_dir(v, fs, si->root_blkno);
		exercise_dir(v, fs, si->system_dir_blkno);
		for (int t = 0; t < O2_SYS_COUNT; t++) {
			for (unsigned s = 0; s < (o2_sysfile_is_per_slot(t) ? si->max_slots : 1u); s++) {
				uint64_t b = SENTINEL_BLK;
				r = o2_sysfile_lookup(fs, (enum o2_sysfile)t, s, &b);
				conv(v, fs, r, "o2_sysfile_lookup");
				if (r == 0)
					exercise_inode(v, fs, b, false);
				else
					ck_assert_uint_eq(b, SENTINEL_BLK);
				if (s >= 3)
					break;
			}
		}
	} else {
		struct o2_inode *ino;
		struct count_ctx cc = { v, fs, 0, v->nblocks };
		const uint64_t dirs[] = { si->root_blkno, si->system_dir_blkno };
		for (int i = 0; i < 2; i++) {
			r = o2_inode_get(fs, dirs[i], &ino);
			conv(v, fs, r, "o2_inode_get(dir)");
			if (r == 0) {
				r = o2_dir_iterate(fs, ino, dirent_cb, &cc);
				conv(v, fs, r, "o2_dir_iterate");
				o2_inode_unref(ino);
			}
		}
	}

	struct o2_slotmap_info *sm = malloc(sizeof(*sm));
	r = o2_slotmap_read(fs, sm);
	conv(v, fs, r, "o2_slotmap_read");
	if (r == 0)
		ck_assert_uint_le(sm->nslots, 255);
	free(sm);

	unsigned nslots = si->max_slots < 4 ? si->max_slots : 4;
	for (unsigned s = 0; s <= nslots; s++) {
		struct o2_journal_info j, before;
		memset(&j, 0xA5, sizeof(j));
		memcpy(&before, &j, sizeof(j));
		r = o2_journal_info(fs, s, &j);
		conv(v, fs, r, "o2_journal_info");
		if (r < 0)
			ck_assert_msg(memcmp(&j, &before, sizeof(j)) == 0,
				      "%s: o2_journal_info wrote its result on failure", v->ctx);
	}
	char name[64];
	uint32_t major, minor;
	for (int t = 0; t < O2_SYS_COUNT; t++) {
		o2_sysfile_name((enum o2_sysfile)t, 1, name, sizeof(name));
		o2_dx_hash(fs, name, strlen(name), &major, &minor);
	}
}

/* Open, walk, then everything else.  The outcome keeps open and walk results. */
/*
 * Read-write opening replays a dirty journal and writes the journal inode:
 * on a copy of the damaged device it too must fail cleanly or work, and a
 * volume it accepted must close cleanly or say why not.
 */
static void exercise_rdwr(const struct vol *v)
{
	struct o2_blockdev *copy;
	struct o2_fs *fs = SENTINEL_PTR;
	char err[512] = "";

	copy = cow_dev(v->mem, v->dev->size);
	int r = o2_fs_open(copy, O2_OPEN_RDWR, &fs, err, sizeof(err));
	if (r < 0) {
		ck_assert_msg(allowed(r), "%s: read-write o2_fs_open returned %d (%s): %s", v->ctx, r,
			      strerror(-r), err);
		ck_assert_msg(fs == SENTINEL_PTR, "%s: read-write o2_fs_open wrote ret_fs on failure",
			      v->ctx);
		ck_assert_msg(err[0], "%s: read-write o2_fs_open failed (%d) with an empty message",
			      v->ctx, r);
		if (r == -EUCLEAN)
			ck_assert_msg(names_some_block(err),
				      "%s: read-write o2_fs_open gave -EUCLEAN; message names no block: "
				      "\"%s\"",
				      v->ctx, err);
	} else {
		struct o2_walk_stats st;
		r = o2_fs_walk(fs, &st);
		conv(v, fs, r, "o2_fs_walk (read-write)");
		r = o2_fs_close(fs);
		ck_assert_msg(r == 0 || allowed(r), "%s: o2_fs_close (read-write) returned %d", v->ctx,
			      r);
	}
	o2_blockdev_free(copy);
}

static void run_all_mode(struct vol *v, struct outcome *o, bool light)
{
	struct o2_fs *fs = SENTINEL_PTR;
	char err[512];

	if (!light)
		exercise_rdwr(v);
	memset(o, 0, sizeof(*o));
	memset(err, 0, sizeof(err));
	o->open_r = o2_fs_open(v->dev, O2_OPEN_RDONLY, &fs, err, sizeof(err));
	if (o->open_r < 0) {
		ck_assert_msg(allowed(o->open_r), "%s: o2_fs_open returned %d (%s): %s", v->ctx,
			      o->open_r, strerror(-o->open_r), err);
		ck_assert_msg(fs == SENTINEL_PTR, "%s: o2_fs_open wrote ret_fs on failure", v->ctx);
		ck_assert_msg(err[0], "%s: o2_fs_open failed (%d) with an empty message", v->ctx,
			      o->open_r);
		if (o->open_r == -EUCLEAN)
			ck_assert_msg(names_some_block(err),
				      "%s: o2_fs_open gave -EUCLEAN; message names no block: \"%s\"",
				      v->ctx, err);
		snprintf(o->open_msg, sizeof(o->open_msg), "%s", err);
		return;
	}
	o->walk_r = o2_fs_walk(fs, &o->stats);
	conv(v, fs, o->walk_r, "o2_fs_walk");
	snprintf(o->walk_msg, sizeof(o->walk_msg), "%s", o->walk_r < 0 ? o2_fs_error(fs) : "");
	if (o->walk_r == 0)
		ck_assert_uint_ge(o->stats.inodes, 3);
	exercise_rest(v, fs, light);
	o2_fs_close(fs);
}

static void run_all(struct vol *v, struct outcome *o)
{
	run_all_mode(v, o, false);
}

/* The first failure of open-then-walk. */
static void first_failure(const struct outcome *o, int *r, const char **msg, const char **where)
{
	if (o->open_r < 0) {
		*r = o->open_r;
		*msg = o->open_msg;
		*where = "o2_fs_open";
	} else {
		*r = o->walk_r;
		*msg = o->walk_msg;
		*where = "o2_fs_walk";
	}
}

/*
 * The damage must be reported: open or walk fails with err, naming blkno
 * (ANY_BLOCK: any).  Raw metaecc damage must be caught by the block check:
 * -EUCLEAN naming one of the damaged blocks.
 */
static void expect_ok(struct vol *v, const char *what);

static void expect_fault(struct vol *v, const char *what, int err, uint64_t blkno)
{
	struct outcome o;
	int r;
	const char *msg, *where;

	classify(v);
	if (!v->nmarks && v->ncorrected) {
		expect_ok(v, what); /* the ECC repairs a single flipped bit */
		return;
	}
	run_all(v, &o);
	first_failure(&o, &r, &msg, &where);
	if (v->nmarks) {
		bool named = false;
		for (unsigned i = 0; i < v->nmarks; i++)
			named |= names_block(msg, v->marks[i]);
		ck_assert_msg(r == -EUCLEAN && named,
			      "%s, %s (stale check): %s gave %d \"%s\"; expected -EUCLEAN naming block "
			      "%" PRIu64,
			      v->ctx, what, where, r, msg, v->marks[0]);
		return;
	}
	ck_assert_msg(r == err, "%s, %s: %s gave %d (%s) \"%s\"; expected %d (%s)", v->ctx, what,
		      where, r, r ? strerror(-r) : "success", msg, err, strerror(-err));
	if (err == -EUCLEAN && blkno != ANY_BLOCK)
		ck_assert_msg(names_block(msg, blkno),
			      "%s, %s: %s gave -EUCLEAN but the message \"%s\" does not name block "
			      "%" PRIu64,
			      v->ctx, what, where, msg, blkno);
}

/* Either of two blocks may be named. */
static void expect_fault2(struct vol *v, const char *what, uint64_t b1, uint64_t b2)
{
	struct outcome o;
	int r;
	const char *msg, *where;

	classify(v);
	if (v->nmarks || v->ncorrected) {
		expect_fault(v, what, -EUCLEAN, ANY_BLOCK);
		return;
	}
	run_all(v, &o);
	first_failure(&o, &r, &msg, &where);
	ck_assert_msg(r == -EUCLEAN && (names_block(msg, b1) || names_block(msg, b2)),
		      "%s, %s: %s gave %d \"%s\"; expected -EUCLEAN naming block %" PRIu64
		      " or %" PRIu64,
		      v->ctx, what, where, r, msg, b1, b2);
}

static void expect_ok(struct vol *v, const char *what)
{
	struct outcome o;

	classify(v);
	if (v->nmarks) {
		expect_fault(v, what, -EUCLEAN, ANY_BLOCK);
		return;
	}
	run_all(v, &o);
	ck_assert_msg(o.open_r == 0, "%s, %s: o2_fs_open gave %d \"%s\"; expected success", v->ctx,
		      what, o.open_r, o.open_msg);
	ck_assert_msg(o.walk_r == 0, "%s, %s: o2_fs_walk gave %d \"%s\"; expected success", v->ctx,
		      what, o.walk_r, o.walk_msg);
}

/* Open must give exactly err, whatever the checks say. */
static void expect_open(struct vol *v, const char *what, int err)
{
	struct outcome o;

	run_all(v, &o);
	ck_assert_msg(o.open_r == err, "%s, %s: o2_fs_open gave %d \"%s\"; expected %d (%s)", v->ctx,
		      what, o.open_r, o.open_msg, err, strerror(-err));
}

/* Open, asserting success: for checks of single calls after damage. */
static struct o2_fs *must_open(struct vol *v)
{
	struct o2_fs *fs = NULL;
	char err[512];
	int r = o2_fs_open(v->dev, O2_OPEN_RDONLY, &fs, err, sizeof(err));
	ck_assert_msg(r == 0, "%s: o2_fs_open gave %d: %s", v->ctx, r, err);
	return fs;
}

/*
 * A read-write open works on the slot-0 journal, local alloc and truncate
 * log: damage there must make it fail with -EUCLEAN naming the block (on a
 * copy of the device; volumes whose features fscore cannot write are skipped).
 */
static void expect_rdwr_fault(struct vol *v, const char *what, uint64_t blkno)
{
	struct o2_blockdev *copy;
	struct o2_fs *fs = NULL;
	char err[512] = "";
	int r;

	copy = cow_dev(v->img->data, v->img->size);
	r = o2_fs_open(copy, O2_OPEN_RDWR, &fs, err, sizeof(err));
	if (r == 0)
		o2_fs_close(fs);
	o2_blockdev_free(copy);
	if (r == -EOPNOTSUPP)
		return;
	ck_assert_msg(r == 0, "%s: read-write open of the pristine volume: %d %s", v->ctx, r, err);

	classify(v);
	copy = cow_dev(v->mem, v->dev->size);
	err[0] = '\0';
	r = o2_fs_open(copy, O2_OPEN_RDWR, &fs, err, sizeof(err));
	if (r == 0)
		o2_fs_close(fs);
	o2_blockdev_free(copy);
	if (!v->nmarks && v->ncorrected) {
		ck_assert_msg(r == 0, "%s, %s: read-write open gave %d \"%s\" on a block the ECC "
			      "repairs", v->ctx, what, r, err);
		return;
	}
	bool named = !v->nmarks && names_block(err, blkno);
	for (unsigned i = 0; i < v->nmarks; i++)
		named |= names_block(err, v->marks[i]);
	ck_assert_msg(r == -EUCLEAN && named,
		      "%s, %s: read-write open gave %d \"%s\"; expected -EUCLEAN naming block %" PRIu64,
		      v->ctx, what, r, err, v->nmarks ? v->marks[0] : blkno);
}

/* fs call result must be -EUCLEAN naming blkno (or the stale-check block). */
static void expect_call(struct vol *v, struct o2_fs *fs, int r, const char *call, uint64_t blkno)
{
	const char *msg = o2_fs_error(fs);
	classify(v);
	if (!v->nmarks && v->ncorrected) {
		ck_assert_msg(r >= 0, "%s: %s gave %d \"%s\" on a block the ECC repairs", v->ctx,
			      call, r, msg);
		return;
	}
	bool named = blkno == ANY_BLOCK || (!v->nmarks && names_block(msg, blkno));
	for (unsigned i = 0; i < v->nmarks; i++)
		named |= names_block(msg, v->marks[i]);
	ck_assert_msg(r == -EUCLEAN && named,
		      "%s: %s gave %d \"%s\"; expected -EUCLEAN naming block %" PRIu64, v->ctx,
		      call, r, msg, v->nmarks ? v->marks[0] : blkno);
}

/* ---- setup: find things on the pristine volume ---- */

static int gb_group_cb(unsigned chain, const struct o2_group_info *g, void *arg)
{
	struct vol *v = arg;
	if (v->gb_ngroups < 16) {
		v->gb_chain[v->gb_ngroups] = chain;
		v->gb_groups[v->gb_ngroups++] = g->blkno;
	}
	return 0;
}

static void add_target(struct vol *v, uint64_t b, enum kind k)
{
	if (b == 0 || b >= v->nblocks || v->ntargets >= 1024)
		return;
	for (unsigned i = 0; i < v->ntargets; i++)
		if (v->targets[i].blkno == b)
			return;
	v->targets[v->ntargets++] = (struct target){ b, k };
}

static bool has_trailer(struct vol *v, uint64_t b)
{
	const uint8_t *p = blk(v, b) + v->bs - sizeof(struct o2_dir_trailer) +
			   offsetof(struct o2_dir_trailer, db_signature);
	return memcmp(p, O2_SIG_DIRTRL, sizeof(O2_SIG_DIRTRL)) == 0;
}

static int target_group_cb(unsigned chain, const struct o2_group_info *g, void *arg)
{
	add_target(arg, g->blkno, K_GROUP);
	return 0;
}

static int target_extent_cb(const struct o2_extent *e, uint64_t eb, void *arg)
{
	if (!e)
		add_target(arg, eb, K_EXTENT);
	return 0;
}

static void collect_inode_targets(struct vol *v, struct o2_fs *fs, uint64_t ino_blk)
{
	struct o2_inode *ino;

	if (o2_inode_get(fs, ino_blk, &ino) < 0)
		return;
	const struct o2_inode_info *in = o2_inode_info(ino);
	add_target(v, ino_blk, K_INODE);
	if (in->kind == O2_ID2_CHAIN)
		o2_chain_walk(fs, ino, target_group_cb, v);
	if (in->kind == O2_ID2_EXTENTS) {
		o2_inode_walk_extents(fs, ino, target_extent_cb, v);
		/* directory blocks, and the first blocks of system files */
		uint64_t nb = (in->size + v->bs - 1) / v->bs;
		if (!S_ISDIR(in->mode) && nb > 2)
			nb = 2;
		for (uint64_t b = 0; b < nb; b++) {
			struct o2_extent e;
			if (o2_inode_map(fs, ino, (uint32_t)(b >> v->bpc_bits), &e) < 0 || !e.blkno)
				continue;
			uint64_t pb = e.blkno + (b & ((1u << v->bpc_bits) - 1));
			add_target(v, pb, S_ISDIR(in->mode) && has_trailer(v, pb) ? K_DIRBLOCK : K_NONE);
		}
	}
	if (in->dx_root)
		add_target(v, in->dx_root, K_DXROOT);
	o2_inode_unref(ino);
}

static void collect_targets(struct vol *v, struct o2_fs *fs)
{
	struct o2_inode *dir;
	struct entries *e = calloc(1, sizeof(*e));
	const uint64_t dirs[] = { v->sysdir, v->root, v->lost_found };

	add_target(v, O2_SUPER_BLKNO, K_INODE);
	for (int d = 0; d < 3; d++) {
		collect_inode_targets(v, fs, dirs[d]);
		if (o2_inode_get(fs, dirs[d], &dir) < 0)
			continue;
		e->n = 0;
		o2_dir_iterate(fs, dir, collect_cb, e);
		o2_inode_unref(dir);
		for (unsigned i = 0; i < e->n; i++)
			collect_inode_targets(v, fs, e->ino[i]);
	}
	free(e);
}

static void vol_setup(struct vol *v, int variant, const char *test)
{
	const struct variant *var = &variants[variant];
	struct o2_fs *fs;
	char err[512];
	int r;

	memset(v, 0, sizeof(*v));
	v->img = &images[var->img];
	v->raw = var->raw;
	v->variant = variant;
	snprintf(v->ctx, sizeof(v->ctx), "[%s on %s%s]", test, v->img->name,
		 v->raw ? ", stale checks" : v->img->ecc ? ", checks recomputed" : "");
	/* a private mapping: the kernel copies the pages this case damages */
	int fd = open(v->img->path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	v->mem = mmap(NULL, v->img->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	ck_assert_msg(v->mem != MAP_FAILED, "%s: mmap %s", v->ctx, v->img->path);
	v->dev = view_dev(v->mem, v->img->size);
	v->bs = v->img->bs;
	v->nblocks = v->img->size / v->bs;

	r = o2_fs_open(v->dev, O2_OPEN_RDONLY, &fs, err, sizeof(err));
	ck_assert_msg(r == 0, "%s: the pristine volume does not open: %d %s", v->ctx, r, err);
	const struct o2_super_info *si = o2_fs_super(fs);
	const struct o2_dinode *sb = dinode(v, O2_SUPER_BLKNO);
	v->root = si->root_blkno;
	v->sysdir = si->system_dir_blkno;
	v->first_cluster_group = si->first_cluster_group;
	v->fs_generation = si->fs_generation;
	v->slots = si->max_slots;
	v->bpc_bits = si->cluster_bits - si->block_bits;
	/* fscore and format.h agree on the superblock */
	ck_assert_uint_eq(v->root, le64(sb->id2.i_super.s_root_blkno));
	ck_assert_uint_eq(v->sysdir, le64(sb->id2.i_super.s_system_dir_blkno));
	ck_assert_uint_eq(v->fs_generation, le32(sb->i_fs_generation));
	ck_assert_uint_eq(v->slots, 2);

	for (int t = 0; t < O2_SYS_COUNT; t++) {
		for (unsigned s = 0; s < 2; s++) {
			r = o2_sysfile_lookup(fs, (enum o2_sysfile)t, s, &v->sys[t][s]);
			if (r == -ENOENT)
				v->sys[t][s] = 0;
			else
				ck_assert_msg(r == 0, "%s: sysfile %d:%u: %d %s", v->ctx, t, s, r,
					      o2_fs_error(fs));
			if (!o2_sysfile_is_per_slot((enum o2_sysfile)t))
				break;
		}
	}
	ck_assert_int_eq(o2_path_lookup(fs, "/lost+found", &v->lost_found), 0);

	for (unsigned s = 0; s < 2; s++) {
		struct o2_inode *ji;
		ck_assert_int_eq(o2_inode_get(fs, v->sys[O2_SYS_JOURNAL][s], &ji), 0);
		ck_assert_int_eq(o2_inode_extent_rec(ji, 0, &v->jrec[s]), 0);
		if (s == 0)
			v->jclusters = o2_inode_info(ji)->clusters;
		o2_inode_unref(ji);
		v->jsb[s] = v->jrec[s].blkno;
		ck_assert_uint_eq(be32(*(const o2be32 *)blk(v, v->jsb[s])), JBD2_MAGIC);
	}

	struct o2_inode *a;
	ck_assert_int_eq(o2_inode_get(fs, v->sys[O2_SYS_GLOBAL_BITMAP][0], &a), 0);
	ck_assert_int_eq(o2_chain_walk(fs, a, gb_group_cb, v), 0);
	o2_inode_unref(a);
	ck_assert_uint_ge(v->gb_ngroups, 1);
	ck_assert_int_eq(o2_inode_get(fs, v->sys[O2_SYS_INODE_ALLOC][0], &a), 0);
	struct o2_chain_rec_info cr;
	ck_assert_int_eq(o2_inode_chain_rec(a, 0, &cr), 0);
	v->ia_group = cr.blkno;
	o2_inode_unref(a);

	ck_assert_int_eq(o2_inode_get(fs, v->sys[O2_SYS_SLOT_MAP][0], &a), 0);
	struct o2_extent e;
	ck_assert_int_eq(o2_inode_extent_rec(a, 0, &e), 0);
	v->slotmap_data = e.blkno;
	o2_inode_unref(a);

	if (strstr(test, "fuzz"))
		collect_targets(v, fs);
	o2_fs_close(fs);
}

static void vol_teardown(struct vol *v)
{
	o2_blockdev_free(v->dev);
	munmap(v->mem, v->img->size);
}

#define VTEST(name)                                                                               \
	static void name##_body(struct vol *v);                                                   \
	START_TEST(name)                                                                          \
	{                                                                                         \
		struct vol *v = malloc(sizeof(*v));                                               \
		vol_setup(v, _i, #name);                                                          \
		name##_body(v);                                                                   \
		vol_teardown(v);                                                                  \
		free(v);                                                                          \
	}                                                                                         \
	END_TEST                                                                                  \
	static void name##_body(struct vol *v)

/* ---- baseline ---- */

VTEST(pristine)
{
	struct outcome o;

	run_all(v, &o);
	ck_assert_msg(o.open_r == 0, "%s: open %d %s", v->ctx, o.open_r, o.open_msg);
	ck_assert_msg(o.walk_r == 0, "%s: walk %d %s", v->ctx, o.walk_r, o.walk_msg);
	ck_assert_uint_ge(o.stats.inodes, 20);
	ck_assert_uint_ge(o.stats.dirs, 4);
	/* And read-write open is refused cleanly while writing is not there. */
	struct o2_fs *fs = SENTINEL_PTR;
	char err[256] = "";
	int r = o2_fs_open(v->dev, O2_OPEN_RDWR, &fs, err, sizeof(err));
	if (r == 0) {
		ck_assert_int_eq(o2_fs_close(fs), 0);
		/* what a read-write open and a clean close leave behind still walks */
		run_all(v, &o);
		ck_assert_msg(o.open_r == 0 && o.walk_r == 0, "%s: after RDWR open/close: %d %d %s %s",
			      v->ctx, o.open_r, o.walk_r, o.open_msg, o.walk_msg);
	} else {
		ck_assert_msg(r == -EOPNOTSUPP && err[0], "%s: RDWR open gave %d %s", v->ctx, r, err);
	}
}
END_TEST

/* ---- superblock ---- */

VTEST(sb_signature)
{
	dinode(v, 2)->i_signature[0] = 'X';
	touched(v, 2, K_INODE);
	expect_open(v, "superblock signature", -ENODATA);
	restore(v);
	memset(dinode(v, 2)->i_signature, 0, 8);
	touched(v, 2, K_INODE);
	expect_open(v, "superblock signature zeroed", -ENODATA);
}

VTEST(sb_blocksize_bits)
{
	const uint32_t vals[] = { 0, 9, 10, 11, 12, 13, 31, 0xFFFFFFFF };
	struct o2_dinode *sb = dinode(v, 2);
	uint32_t real = le32(sb->id2.i_super.s_blocksize_bits);

	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		if (vals[i] == real)
			continue;
		snap(v, 2);
		sb->id2.i_super.s_blocksize_bits = cpu_le32(vals[i]);
		touched(v, 2, K_INODE);
		struct outcome o;
		run_all(v, &o);
		ck_assert_msg(o.open_r == -ENODATA || o.open_r == -EUCLEAN,
			      "%s: s_blocksize_bits %u: open gave %d \"%s\"", v->ctx, vals[i],
			      o.open_r, o.open_msg);
		restore(v);
	}
}

VTEST(sb_root_out_of_range)
{
	const uint64_t vals[] = { v->nblocks, v->nblocks + 7, UINT64_MAX, 0, 1, 2 };
	struct o2_super_block *s = &dinode(v, 2)->id2.i_super;

	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		char what[64];
		snap(v, 2);
		s->s_root_blkno = cpu_le64(vals[i]);
		touched(v, 2, K_INODE);
		snprintf(what, sizeof(what), "s_root_blkno %" PRIu64, vals[i]);
		expect_fault(v, what, -EUCLEAN, 2);
		restore(v);

		snap(v, 2);
		s->s_system_dir_blkno = cpu_le64(vals[i]);
		touched(v, 2, K_INODE);
		snprintf(what, sizeof(what), "s_system_dir_blkno %" PRIu64, vals[i]);
		expect_fault(v, what, -EUCLEAN, 2);
		restore(v);
	}
	snap(v, 2);
	s->s_first_cluster_group = cpu_le64(v->nblocks + 1);
	touched(v, 2, K_INODE);
	expect_fault(v, "s_first_cluster_group beyond the device", -EUCLEAN, 2);
}

VTEST(sb_root_not_an_inode)
{
	/* The root points at the first cluster group descriptor. */
	dinode(v, 2)->id2.i_super.s_root_blkno = cpu_le64(v->first_cluster_group);
	touched(v, 2, K_INODE);
	expect_fault(v, "root points at a group descriptor", -EUCLEAN, v->first_cluster_group);
}

VTEST(sb_geometry)
{
	struct o2_dinode *sb = dinode(v, 2);
	const uint32_t cbits[] = { 0, 11, 21, 255 };
	for (size_t i = 0; i < sizeof(cbits) / sizeof(cbits[0]); i++) {
		snap(v, 2);
		sb->id2.i_super.s_clustersize_bits = cpu_le32(cbits[i]);
		touched(v, 2, K_INODE);
		expect_fault(v, "s_clustersize_bits", -EUCLEAN, 2);
		restore(v);
	}
	const uint16_t slots[] = { 0, 256, 0xFFFF };
	for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
		snap(v, 2);
		sb->id2.i_super.s_max_slots = cpu_le16(slots[i]);
		touched(v, 2, K_INODE);
		expect_fault(v, "s_max_slots", -EUCLEAN, 2);
		restore(v);
	}
	snap(v, 2);
	sb->i_blkno = cpu_le64(3);
	touched(v, 2, K_INODE);
	expect_fault(v, "superblock i_blkno", -EUCLEAN, 2);
	restore(v);

	snap(v, 2);
	sb->i_flags = cpu_le32(le32(sb->i_flags) & ~(uint32_t)O2_FL_SUPER);
	touched(v, 2, K_INODE);
	expect_fault(v, "superblock without the Superblock flag", -EUCLEAN, 2);
	restore(v);

	/* More slots than the volume has system files for: a missing journal. */
	snap(v, 2);
	sb->id2.i_super.s_max_slots = cpu_le16(200);
	touched(v, 2, K_INODE);
	expect_fault(v, "s_max_slots 200 without the slots' system files", -EUCLEAN, ANY_BLOCK);
}

VTEST(sb_features)
{
	struct o2_dinode *sb = dinode(v, 2);
	sb->id2.i_super.s_feature_incompat =
		cpu_le32(le32(sb->id2.i_super.s_feature_incompat) | 0x40000000u);
	touched(v, 2, K_INODE);
	classify(v);
	if (v->nmarks || v->ncorrected)
		expect_fault(v, "unknown incompat feature", -EUCLEAN, 2);
	else
		expect_open(v, "unknown incompat feature", -EOPNOTSUPP);
	restore(v);

	/* two unknown bits: beyond what the ECC repairs */
	sb->id2.i_super.s_feature_incompat =
		cpu_le32(le32(sb->id2.i_super.s_feature_incompat) | 0x40000000u | 0x20000000u);
	touched(v, 2, K_INODE);
	classify(v);
	if (v->nmarks)
		expect_fault(v, "two unknown incompat features", -EUCLEAN, 2);
	else
		expect_open(v, "two unknown incompat features", -EOPNOTSUPP);
}

VTEST(sb_fs_generation)
{
	struct o2_dinode *sb = dinode(v, 2);
	sb->i_fs_generation = cpu_le32(le32(sb->i_fs_generation) ^ 0x5555);
	touched(v, 2, K_INODE);
	/* Every inode now has the wrong generation; the system dir is read first. */
	expect_fault(v, "superblock fs generation", -EUCLEAN, v->sysdir);
}

/* ---- inodes ---- */

VTEST(root_inode)
{
	struct o2_dinode *di = dinode(v, v->root);

	snap(v, v->root);
	di->i_signature[0] ^= 0x20;
	touched(v, v->root, K_INODE);
	expect_fault(v, "root signature", -EUCLEAN, v->root);
	{
		struct o2_fs *fs = must_open(v);
		uint64_t b;
		expect_call(v, fs, o2_path_lookup(fs, "/lost+found", &b), "lookup /lost+found",
			    v->root);
		o2_fs_close(fs);
	}
	restore(v);

	snap(v, v->root);
	di->i_blkno = cpu_le64(v->root + 1);
	touched(v, v->root, K_INODE);
	expect_fault(v, "root i_blkno", -EUCLEAN, v->root);
	restore(v);

	snap(v, v->root);
	di->i_fs_generation = cpu_le32(le32(di->i_fs_generation) + 1);
	touched(v, v->root, K_INODE);
	expect_fault(v, "root fs generation", -EUCLEAN, v->root);
	restore(v);

	snap(v, v->root);
	di->i_flags = cpu_le32(le32(di->i_flags) & ~(uint32_t)O2_FL_VALID);
	touched(v, v->root, K_INODE);
	expect_fault(v, "root not Valid", -EUCLEAN, v->root);
	restore(v);

	snap(v, v->root);
	di->i_dyn_features = cpu_le16(le16(di->i_dyn_features) | O2_DYN_INLINE_XATTR);
	di->i_xattr_inline_size = cpu_le16((uint16_t)v->bs);
	touched(v, v->root, K_INODE);
	expect_fault(v, "root inline xattr area larger than the block", -EUCLEAN, v->root);
	restore(v);
}

VTEST(root_not_a_directory)
{
	struct o2_dinode *di = dinode(v, v->root);
	di->i_mode = cpu_le16(S_IFREG | 0644);
	touched(v, v->root, K_INODE);
	expect_fault(v, "root is a regular file", -EUCLEAN, v->root);
}

VTEST(sysdir_signature)
{
	dinode(v, v->sysdir)->i_signature[1] = '?';
	touched(v, v->sysdir, K_INODE);
	expect_fault(v, "system dir signature", -EUCLEAN, v->sysdir);
}

static const struct {
	enum o2_sysfile type;
	unsigned slot;
} sysfiles_to_damage[] = {
	{ O2_SYS_GLOBAL_BITMAP, 0 },   { O2_SYS_GLOBAL_INODE_ALLOC, 0 }, { O2_SYS_SLOT_MAP, 0 },
	{ O2_SYS_HEARTBEAT, 0 },       { O2_SYS_ORPHAN_DIR, 0 },	 { O2_SYS_EXTENT_ALLOC, 0 },
	{ O2_SYS_INODE_ALLOC, 0 },     { O2_SYS_JOURNAL, 1 },		 { O2_SYS_LOCAL_ALLOC, 0 },
	{ O2_SYS_TRUNCATE_LOG, 1 },    { O2_SYS_BAD_BLOCKS, 0 },
};

VTEST(sysfile_inodes)
{
	for (size_t i = 0; i < sizeof(sysfiles_to_damage) / sizeof(sysfiles_to_damage[0]); i++) {
		uint64_t b = v->sys[sysfiles_to_damage[i].type][sysfiles_to_damage[i].slot];
		char what[96], name[32];
		o2_sysfile_name(sysfiles_to_damage[i].type, sysfiles_to_damage[i].slot, name,
				sizeof(name));

		snap(v, b);
		dinode(v, b)->i_signature[6] = '9';
		touched(v, b, K_INODE);
		snprintf(what, sizeof(what), "%s signature", name);
		expect_fault(v, what, -EUCLEAN, b);
		restore(v);

		snap(v, b);
		dinode(v, b)->i_blkno = cpu_le64(b ^ 1);
		touched(v, b, K_INODE);
		snprintf(what, sizeof(what), "%s i_blkno", name);
		expect_fault(v, what, -EUCLEAN, b);
		restore(v);
	}
	/* A damaged journal inode: o2_journal_info of that slot says so. */
	uint64_t j1 = v->sys[O2_SYS_JOURNAL][1];
	dinode(v, j1)->i_signature[0] = 'X';
	touched(v, j1, K_INODE);
	struct o2_fs *fs = must_open(v);
	struct o2_journal_info ji;
	expect_call(v, fs, o2_journal_info(fs, 1, &ji), "o2_journal_info(1)", j1);
	ck_assert_int_eq(o2_journal_info(fs, 0, &ji), 0);
	o2_fs_close(fs);
}

/* ---- extent lists (journal:0000's) ---- */

static uint64_t jino0(struct vol *v)
{
	return v->sys[O2_SYS_JOURNAL][0];
}

static struct o2_extent_list *j0_list(struct vol *v)
{
	return &dinode(v, jino0(v))->id2.i_list;
}

VTEST(extent_list_header)
{
	struct o2_extent_list *el = j0_list(v);
	uint64_t j = jino0(v);
	unsigned count = le16(el->count);

	snap(v, j);
	el->next_free_rec = cpu_le16((uint16_t)(count + 1));
	touched(v, j, K_INODE);
	expect_fault(v, "l_next_free_rec > l_count", -EUCLEAN, j);
	restore(v);

	snap(v, j);
	el->count = cpu_le16((uint16_t)(o2_extent_recs_per_inode(v->bs) + 1));
	touched(v, j, K_INODE);
	expect_fault(v, "l_count beyond the block", -EUCLEAN, j);
	restore(v);

	snap(v, j);
	el->count = cpu_le16(0xFFFF);
	el->next_free_rec = cpu_le16(0xFFFF);
	touched(v, j, K_INODE);
	expect_fault(v, "l_count 0xFFFF", -EUCLEAN, j);
	restore(v);

	snap(v, j);
	el->count = cpu_le16(0);
	el->next_free_rec = cpu_le16(0);
	touched(v, j, K_INODE);
	expect_fault(v, "empty extent list on a journal", -EUCLEAN, j);
	restore(v);

	const uint16_t depths[] = { 0xFFFF, 6, 100 };
	for (size_t i = 0; i < 3; i++) {
		snap(v, j);
		el->tree_depth = cpu_le16(depths[i]);
		touched(v, j, K_INODE);
		expect_fault(v, "nonsense tree depth", -EUCLEAN, j);
		restore(v);
	}

	/* depth 1: the data extent is taken for an extent block */
	snap(v, j);
	el->tree_depth = cpu_le16(1);
	touched(v, j, K_INODE);
	expect_fault(v, "depth 1 over data", -EUCLEAN, v->jsb[0]);
	{
		struct o2_fs *fs = must_open(v);
		struct o2_journal_info ji;
		expect_call(v, fs, o2_journal_info(fs, 0, &ji), "o2_journal_info", v->jsb[0]);
		o2_fs_close(fs);
	}
	restore(v);
}

VTEST(extent_records)
{
	struct o2_extent_list *el = j0_list(v);
	uint64_t j = jino0(v);
	const uint64_t past[] = { v->nblocks - 1, v->nblocks, v->nblocks + 100, UINT64_MAX - 3,
				  UINT64_MAX };

	for (size_t i = 0; i < sizeof(past) / sizeof(past[0]); i++) {
		snap(v, j);
		el->recs[0].blkno = cpu_le64(past[i]);
		touched(v, j, K_INODE);
		expect_fault(v, "extent past the device", -EUCLEAN, j);
		struct o2_fs *fs = must_open(v);
		struct o2_journal_info ji;
		expect_call(v, fs, o2_journal_info(fs, 0, &ji), "o2_journal_info", j);
		o2_fs_close(fs);
		restore(v);
	}

	snap(v, j);
	el->recs[0].leaf_clusters = cpu_le16(0xFFFF);
	touched(v, j, K_INODE);
	expect_fault(v, "extent length runs past the device", -EUCLEAN, j);
	restore(v);

	snap(v, j);
	el->recs[0].blkno = cpu_le64(0);
	touched(v, j, K_INODE);
	expect_fault(v, "extent maps to block 0", -EUCLEAN, j);
	restore(v);

	snap(v, j);
	el->next_free_rec = cpu_le16(2);
	el->recs[1] = el->recs[0];
	touched(v, j, K_INODE);
	expect_fault(v, "overlapping extent records", -EUCLEAN, j);
	restore(v);

	snap(v, j);
	el->recs[0].cpos = cpu_le32(0xFFFFFFF0u);
	touched(v, j, K_INODE);
	expect_fault(v, "extent past the 32-bit cluster range", -EUCLEAN, j);
	restore(v);
}

/*
 * A hand-made extent block: journal:0000 gets depth 1 and its one record
 * moves to an extent block placed in an unused block of journal:0001's log.
 */
static uint64_t craft_eb(struct vol *v)
{
	uint64_t x = v->jrec[1].blkno + 16;
	uint64_t j = jino0(v);
	struct o2_extent_block *eb = (struct o2_extent_block *)blk(v, x);
	struct o2_extent_list *el = j0_list(v);

	memset(eb, 0, v->bs);
	memcpy(eb->h_signature, O2_SIG_EXTENT, sizeof(O2_SIG_EXTENT));
	eb->h_fs_generation = cpu_le32(v->fs_generation);
	eb->h_blkno = cpu_le64(x);
	eb->h_suballoc_slot = cpu_le16(0);
	eb->h_list.tree_depth = cpu_le16(0);
	eb->h_list.count = cpu_le16((uint16_t)o2_extent_recs_per_eb(v->bs));
	eb->h_list.next_free_rec = cpu_le16(1);
	eb->h_list.recs[0] = el->recs[0];
	if (v->img->ecc)
		recompute(v, x, K_EXTENT);

	el->tree_depth = cpu_le16(1);
	el->recs[0].int_clusters = cpu_le32(v->jclusters);
	el->recs[0].blkno = cpu_le64(x);
	dinode(v, j)->i_last_eb_blk = cpu_le64(x);
	if (v->img->ecc)
		recompute(v, j, K_INODE);
	return x;
}

static int count_eb_cb(const struct o2_extent *e, uint64_t eb, void *arg)
{
	if (!e)
		(*(unsigned *)arg)++;
	return 0;
}

VTEST(extent_block_valid)
{
	if (v->raw)
		return; /* nothing damaged */
	uint64_t x = craft_eb(v);
	expect_ok(v, "a valid hand-made extent block");
	struct o2_fs *fs = must_open(v);
	struct o2_inode *ji;
	struct o2_journal_info j;
	unsigned nb = 0;
	ck_assert_int_eq(o2_journal_info(fs, 0, &j), 0);
	ck_assert_int_eq(o2_inode_get(fs, jino0(v), &ji), 0);
	ck_assert_int_eq(o2_inode_walk_extents(fs, ji, count_eb_cb, &nb), 0);
	ck_assert_uint_eq(nb, 1);
	struct o2_extent e;
	ck_assert_int_eq(o2_inode_map(fs, ji, 0, &e), 0);
	ck_assert_uint_eq(e.blkno, v->jsb[0]);
	o2_inode_unref(ji);
	o2_fs_close(fs);
	(void)x;
}

VTEST(extent_block_damage)
{
	uint64_t x = craft_eb(v);
	struct o2_extent_block *eb = (struct o2_extent_block *)blk(v, x);

#define EB_CASE(what, stmt)                                                                       \
	do {                                                                                      \
		snap(v, x);                                                                       \
		stmt;                                                                             \
		touched(v, x, K_EXTENT);                                                          \
		expect_fault(v, what, -EUCLEAN, x);                                               \
		restore(v);                                                                       \
	} while (0)

	EB_CASE("extent block signature", eb->h_signature[0] = 'e');
	EB_CASE("extent block h_blkno", eb->h_blkno = cpu_le64(x + 1));
	EB_CASE("extent block fs generation", eb->h_fs_generation = cpu_le32(v->fs_generation + 1));
	EB_CASE("extent block depth 1 under depth 1", eb->h_list.tree_depth = cpu_le16(1));
	EB_CASE("extent block with no records", eb->h_list.next_free_rec = cpu_le16(0));
	EB_CASE("extent block l_count too big",
		eb->h_list.count = cpu_le16((uint16_t)(o2_extent_recs_per_eb(v->bs) + 1)));
	EB_CASE("extent block next_free > count",
		eb->h_list.next_free_rec = cpu_le16((uint16_t)(le16(eb->h_list.count) + 1)));
	EB_CASE("extent block leaf past the device",
		eb->h_list.recs[0].blkno = cpu_le64(v->nblocks - 1));
	EB_CASE("extent block leaf at block 0", eb->h_list.recs[0].blkno = cpu_le64(0));
#undef EB_CASE

	/* A loop: the inode (depth 2) -> x (depth 1) -> x. */
	snap(v, x);
	snap(v, jino0(v));
	j0_list(v)->tree_depth = cpu_le16(2);
	touched(v, jino0(v), K_INODE);
	eb->h_list.tree_depth = cpu_le16(1);
	eb->h_list.recs[0].int_clusters = cpu_le32(v->jclusters);
	eb->h_list.recs[0].blkno = cpu_le64(x);
	touched(v, x, K_EXTENT);
	expect_fault(v, "extent block pointing at itself", -EUCLEAN, x);
	restore(v);

	/* Pointing at the inode that owns it. */
	snap(v, x);
	snap(v, jino0(v));
	j0_list(v)->tree_depth = cpu_le16(2);
	touched(v, jino0(v), K_INODE);
	eb->h_list.tree_depth = cpu_le16(1);
	eb->h_list.recs[0].blkno = cpu_le64(jino0(v));
	touched(v, x, K_EXTENT);
	expect_fault2(v, "extent block pointing at its inode", x, jino0(v));
	restore(v);
}

/* ---- directories ---- */

struct dirarea {
	uint64_t blkno; /* block holding the entries */
	enum kind kind;
	uint8_t *data;
	unsigned size;
};

/* Where a directory's first entries are: inline in the inode, or its first block. */
static void dir_area(struct vol *v, uint64_t dir, struct dirarea *a)
{
	struct o2_dinode *di = dinode(v, dir);

	if (le16(di->i_dyn_features) & O2_DYN_INLINE_DATA) {
		a->blkno = dir;
		a->kind = K_INODE;
		a->data = di->id2.i_data.id_data;
		a->size = (unsigned)le64(di->i_size);
		return;
	}
	ck_assert_uint_eq(le16(di->id2.i_list.tree_depth), 0);
	a->blkno = le64(di->id2.i_list.recs[0].blkno);
	a->data = blk(v, a->blkno);
	a->kind = has_trailer(v, a->blkno) ? K_DIRBLOCK : K_NONE;
	a->size = v->bs - (a->kind == K_DIRBLOCK ? (unsigned)sizeof(struct o2_dir_trailer) : 0);
}

static struct o2_dir_entry *entry_at(struct dirarea *a, unsigned off)
{
	return (struct o2_dir_entry *)(a->data + off);
}

/* Offset of the last entry, and of the entry named name (or -1). */
static unsigned last_entry(struct dirarea *a)
{
	unsigned off = 0, last = 0;
	while (off < a->size) {
		last = off;
		off += le16(entry_at(a, off)->rec_len);
	}
	ck_assert_uint_eq(off, a->size);
	return last;
}

static int find_entry(struct dirarea *a, const char *name)
{
	for (unsigned off = 0; off < a->size; off += le16(entry_at(a, off)->rec_len)) {
		struct o2_dir_entry *de = entry_at(a, off);
		if (de->inode && de->name_len == strlen(name) && !memcmp(de->name, name, de->name_len))
			return (int)off;
	}
	return -1;
}

static void dir_cases(struct vol *v, uint64_t dir, const char *dname)
{
	struct dirarea a;
	char what[128];
	dir_area(v, dir, &a);

#define DIR_CASE(label, stmt)                                                                     \
	do {                                                                                      \
		snap(v, a.blkno);                                                                 \
		stmt;                                                                             \
		touched(v, a.blkno, a.kind);                                                      \
		snprintf(what, sizeof(what), "%s: %s", dname, label);                             \
		expect_fault(v, what, -EUCLEAN, a.blkno);                                         \
		restore(v);                                                                       \
	} while (0)

	DIR_CASE("rec_len 0", entry_at(&a, 0)->rec_len = 0);
	DIR_CASE("rec_len 4", entry_at(&a, 0)->rec_len = cpu_le16(4));
	DIR_CASE("rec_len unaligned",
		 entry_at(&a, 0)->rec_len = cpu_le16(le16(entry_at(&a, 0)->rec_len) + 1));
	DIR_CASE("last rec_len crosses the end", {
		unsigned l = last_entry(&a);
		entry_at(&a, l)->rec_len = cpu_le16(le16(entry_at(&a, l)->rec_len) + 4);
	});
	DIR_CASE("first rec_len crosses the end", entry_at(&a, 0)->rec_len = cpu_le16(0xFFFC));
	DIR_CASE("name_len > rec_len", entry_at(&a, 0)->name_len = 255);
	DIR_CASE("entry names an inode past the device",
		 entry_at(&a, 0)->inode = cpu_le64(v->nblocks + 5));
	DIR_CASE("bad file type", entry_at(&a, 0)->file_type = 200);
#undef DIR_CASE
}

VTEST(root_dir_entries)
{
	dir_cases(v, v->root, "/");
}

/*
 * The write path checks directory entries as the read path does: a
 * create, link or rename into a directory whose block holds an entry the
 * old write-side scanner let through (it checked rec_len bounds only) must
 * be refused with -EUCLEAN naming that block, not written into.
 */
static bool rdwr_supported(struct vol *v);

struct write_case {
	const char *label;
	void (*damage)(struct o2_dir_entry *de, const struct vol *v);
};

static void wc_file_type(struct o2_dir_entry *de, const struct vol *v)
{
	de->file_type = 200;
}

static void wc_inode_range(struct o2_dir_entry *de, const struct vol *v)
{
	de->inode = cpu_le64(v->nblocks + 5);
}

static void wc_name_len(struct o2_dir_entry *de, const struct vol *v)
{
	de->name_len = 255;
}

/* One write call into the damaged root on a fresh read-write copy. */
static void write_into_damaged(struct vol *v, const struct dirarea *a, uint64_t lf,
			       const char *label, int call)
{
	static const char *const calls[] = { "o2_create", "o2_link", "o2_rename" };
	struct o2_new_inode ni = { .mode = 0100644 };
	struct o2_blockdev *copy = cow_dev(v->mem, v->img->size);
	struct o2_fs *fs = NULL;
	uint64_t victim = 0, ino = 0;
	char err[512] = "";
	int r = o2_fs_open(copy, O2_OPEN_RDWR, &fs, err, sizeof(err));

	ck_assert_msg(r == 0, "%s, %s: read-write open gave %d: %s", v->ctx, label, r, err);
	/* the file to link or move comes from an undamaged directory */
	if (call > 0) {
		r = o2_create(fs, lf, "victim", 6, &ni, &victim);
		ck_assert_msg(r == 0, "%s, %s: create in lost+found gave %d: %s", v->ctx, label, r,
			      o2_fs_error(fs));
	}
	if (call == 0)
		r = o2_create(fs, v->root, "newname", 7, &ni, &ino);
	else if (call == 1)
		r = o2_link(fs, victim, v->root, "newname", 7);
	else
		r = o2_rename(fs, lf, "victim", 6, v->root, "newname", 7, 0);
	const char *msg = o2_fs_error(fs);
	ck_assert_msg(r == -EUCLEAN && names_block(msg, a->blkno),
		      "%s, %s: %s into the damaged directory gave %d \"%s\"; expected -EUCLEAN "
		      "naming block %" PRIu64, v->ctx, label, calls[call], r, msg, a->blkno);
	o2_fs_close(fs);
	o2_blockdev_free(copy);
}

VTEST(write_path_dir_entries)
{
	static const struct write_case cases[] = {
		{ "bad file type", wc_file_type },
		{ "entry names an inode past the device", wc_inode_range },
		{ "name_len > rec_len", wc_name_len },
	};
	struct dirarea a;
	uint64_t lf;

	/* stale checks would refuse the block for its checksum, not its entries */
	if (v->raw || !rdwr_supported(v))
		return;
	struct o2_fs *fs = must_open(v);
	int r = o2_path_lookup(fs, "/lost+found", &lf);
	ck_assert_msg(r == 0, "%s: /lost+found: %d", v->ctx, r);
	o2_fs_close(fs);
	dir_area(v, v->root, &a);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (int call = 0; call < 3; call++) {
			snap(v, a.blkno);
			/* the first entry ("."): never the name a write looks for */
			cases[i].damage(entry_at(&a, 0), v);
			touched(v, a.blkno, a.kind);
			write_into_damaged(v, &a, lf, cases[i].label, call);
			restore(v);
		}
	}
}

VTEST(system_dir_entries)
{
	dir_cases(v, v->sysdir, "//");
}

VTEST(dir_entry_targets)
{
	struct dirarea a;
	dir_area(v, v->root, &a);
	int off = find_entry(&a, "lost+found");
	ck_assert_int_ge(off, 0);
	struct o2_dir_entry *de = entry_at(&a, (unsigned)off);

	/* lost+found names a group descriptor */
	snap(v, a.blkno);
	de->inode = cpu_le64(v->gb_groups[0]);
	touched(v, a.blkno, a.kind);
	expect_fault(v, "entry names a group descriptor", -EUCLEAN,
		     v->nmarks ? a.blkno : v->gb_groups[0]);
	restore(v);

	/* lost+found names the superblock */
	snap(v, a.blkno);
	de->inode = cpu_le64(2);
	touched(v, a.blkno, a.kind);
	expect_fault(v, "entry names the superblock", -EUCLEAN, ANY_BLOCK);
	restore(v);

	/* lost+found names the root: a directory cycle.  It must end. */
	snap(v, a.blkno);
	de->inode = cpu_le64(v->root);
	touched(v, a.blkno, a.kind);
	struct outcome o;
	run_all(v, &o);
	if (!v->nmarks)
		ck_assert_msg(o.open_r == 0 && (o.walk_r == 0 || o.walk_r == -EUCLEAN),
			      "%s: directory cycle: open %d walk %d %s", v->ctx, o.open_r, o.walk_r,
			      o.walk_msg);
	restore(v);

	/* lost+found names the system directory */
	snap(v, a.blkno);
	de->inode = cpu_le64(v->sysdir);
	touched(v, a.blkno, a.kind);
	run_all(v, &o);
	restore(v);
}

VTEST(dir_trailer)
{
	struct dirarea a;
	uint64_t dirs[2] = { v->root, v->sysdir };
	bool any = false;

	for (int d = 0; d < 2; d++) {
		dir_area(v, dirs[d], &a);
		/*
		 * mkfs puts trailers in every directory block of an indexed-dirs
		 * volume, but the kernel reads them only with metaecc or in an
		 * indexed directory.
		 */
		if (a.kind != K_DIRBLOCK ||
		    !(v->img->ecc || (le16(dinode(v, dirs[d])->i_dyn_features) & O2_DYN_INDEXED_DIR)))
			continue;
		any = true;
		struct o2_dir_trailer *t =
			(struct o2_dir_trailer *)(blk(v, a.blkno) + v->bs - sizeof(*t));
#define TR_CASE(label, stmt)                                                                      \
	do {                                                                                      \
		snap(v, a.blkno);                                                                 \
		stmt;                                                                             \
		touched(v, a.blkno, K_DIRBLOCK);                                                  \
		expect_fault(v, label, -EUCLEAN, a.blkno);                                        \
		restore(v);                                                                       \
	} while (0)
		TR_CASE("trailer signature", t->db_signature[0] = 'd');
		TR_CASE("trailer blkno", t->db_blkno = cpu_le64(a.blkno + 1));
		TR_CASE("trailer parent", t->db_parent_dinode = cpu_le64(dirs[d] + 1));
#undef TR_CASE
	}
	(void)any;
}

VTEST(inline_dir)
{
	struct o2_dinode *di = dinode(v, v->root);
	if (!(le16(di->i_dyn_features) & O2_DYN_INLINE_DATA))
		return; /* max-compat: no inline directories */

	snap(v, v->root);
	di->id2.i_data.id_count = cpu_le16((uint16_t)(o2_inline_max(v->bs) + 8));
	touched(v, v->root, K_INODE);
	expect_fault(v, "inline id_count too large", -EUCLEAN, v->root);
	restore(v);

	snap(v, v->root);
	di->id2.i_data.id_count = cpu_le16(0xFFFF);
	touched(v, v->root, K_INODE);
	expect_fault(v, "inline id_count 0xFFFF", -EUCLEAN, v->root);
	restore(v);

	snap(v, v->root);
	di->i_size = cpu_le64(le16(di->id2.i_data.id_count) + 4);
	touched(v, v->root, K_INODE);
	expect_fault(v, "inline i_size past id_count", -EUCLEAN, v->root);
	restore(v);

	snap(v, v->root);
	di->i_size = cpu_le64(UINT64_MAX);
	touched(v, v->root, K_INODE);
	expect_fault(v, "inline i_size huge", -EUCLEAN, v->root);
	restore(v);
}

/* ---- chain allocators ---- */

static struct o2_group_desc *gd(struct vol *v, uint64_t b)
{
	return (struct o2_group_desc *)blk(v, b);
}

static void group_cases(struct vol *v, uint64_t alloc, uint64_t g, const char *aname)
{
	struct o2_group_desc *d = gd(v, g);
	char what[128];

#define GD_CASE(label, stmt)                                                                      \
	do {                                                                                      \
		snap(v, g);                                                                       \
		stmt;                                                                             \
		touched(v, g, K_GROUP);                                                           \
		snprintf(what, sizeof(what), "%s group %" PRIu64 ": %s", aname, g, label);        \
		expect_fault(v, what, -EUCLEAN, g);                                               \
		restore(v);                                                                       \
	} while (0)

	GD_CASE("signature", d->bg_signature[0] = 'g');
	GD_CASE("bg_blkno", d->bg_blkno = cpu_le64(g + 1));
	GD_CASE("parent", d->bg_parent_dinode = cpu_le64(alloc + 1));
	GD_CASE("generation", d->bg_generation = cpu_le32(v->fs_generation ^ 1));
	GD_CASE("chain number", d->bg_chain = cpu_le16(le16(d->bg_chain) + 7));
	GD_CASE("bits beyond the bitmap",
		d->bg_bits = cpu_le16((uint16_t)(le16(d->bg_size) * 8 + 8)));
	GD_CASE("bitmap size beyond the block", d->bg_size = cpu_le16((uint16_t)v->bs));
	GD_CASE("free > bits", d->bg_free_bits_count = cpu_le16((uint16_t)(le16(d->bg_bits) + 1)));
	GD_CASE("zero bits", {
		d->bg_bits = 0;
		d->bg_free_bits_count = 0;
	});
	GD_CASE("bitmap disagrees with the free count",
		d->bg_bitmap[le16(d->bg_bits) / 8 - 1] ^= 0x80);
	GD_CASE("links to itself", d->bg_next_group = cpu_le64(g));
#undef GD_CASE

	snap(v, g);
	d->bg_next_group = cpu_le64(v->nblocks + 3);
	touched(v, g, K_GROUP);
	snprintf(what, sizeof(what), "%s group %" PRIu64 " links past the device", aname, g);
	expect_fault2(v, what, g, alloc);
	restore(v);

	snap(v, g);
	d->bg_next_group = cpu_le64(2);
	touched(v, g, K_GROUP);
	snprintf(what, sizeof(what), "%s group %" PRIu64 " links to the superblock", aname, g);
	expect_fault(v, what, -EUCLEAN, ANY_BLOCK);
	restore(v);

	/* the chain walk itself says so, too */
	snap(v, g);
	d->bg_signature[1] = 'r';
	touched(v, g, K_GROUP);
	struct o2_fs *fs = NULL;
	char err[256];
	if (o2_fs_open(v->dev, O2_OPEN_RDONLY, &fs, err, sizeof(err)) == 0) {
		struct o2_inode *ino;
		ck_assert_int_eq(o2_inode_get(fs, alloc, &ino), 0);
		expect_call(v, fs, o2_chain_walk(fs, ino, NULL, NULL), "o2_chain_walk", g);
		o2_inode_unref(ino);
		o2_fs_close(fs);
	}
	restore(v);
}

static void chain_inode_cases(struct vol *v, uint64_t alloc, const char *aname)
{
	struct o2_dinode *di = dinode(v, alloc);
	struct o2_chain_list *cl = &di->id2.i_chain;
	char what[128];

#define CI_CASE(label, stmt)                                                                      \
	do {                                                                                      \
		snap(v, alloc);                                                                   \
		stmt;                                                                             \
		touched(v, alloc, K_INODE);                                                       \
		snprintf(what, sizeof(what), "%s: %s", aname, label);                             \
		expect_fault(v, what, -EUCLEAN, alloc);                                           \
		restore(v);                                                                       \
	} while (0)

	CI_CASE("chain total off by one", cl->cl_recs[0].c_total =
						  cpu_le32(le32(cl->cl_recs[0].c_total) + 1));
	CI_CASE("chain free off by one", cl->cl_recs[0].c_free =
						 cpu_le32(le32(cl->cl_recs[0].c_free) + 1));
	CI_CASE("chain head 0", cl->cl_recs[0].c_blkno = 0);
	CI_CASE("chain head past the device", cl->cl_recs[0].c_blkno = cpu_le64(v->nblocks + 9));
	CI_CASE("next_free > count",
		cl->cl_next_free_rec = cpu_le16((uint16_t)(le16(cl->cl_count) + 1)));
	CI_CASE("count beyond the block",
		cl->cl_count = cpu_le16((uint16_t)(o2_chain_recs_per_inode(v->bs) + 1)));
	CI_CASE("clusters per group 0", cl->cl_cpg = 0);
	CI_CASE("bits per cluster 0", cl->cl_bpc = 0);
	CI_CASE("i_total off by one",
		di->id1.bitmap1.i_total = cpu_le32(le32(di->id1.bitmap1.i_total) + 1));
	CI_CASE("i_used > i_total",
		di->id1.bitmap1.i_used = cpu_le32(le32(di->id1.bitmap1.i_total) + 1));
#undef CI_CASE
}

VTEST(global_bitmap_groups)
{
	group_cases(v, v->sys[O2_SYS_GLOBAL_BITMAP][0], v->gb_groups[0], "global_bitmap");
	if (v->gb_ngroups > 1)
		group_cases(v, v->sys[O2_SYS_GLOBAL_BITMAP][0], v->gb_groups[v->gb_ngroups - 1],
			    "global_bitmap");
}

VTEST(inode_alloc_groups)
{
	group_cases(v, v->sys[O2_SYS_INODE_ALLOC][0], v->ia_group, "inode_alloc:0000");
}

VTEST(chain_inodes)
{
	chain_inode_cases(v, v->sys[O2_SYS_GLOBAL_BITMAP][0], "global_bitmap");
	chain_inode_cases(v, v->sys[O2_SYS_INODE_ALLOC][0], "inode_alloc:0000");
	chain_inode_cases(v, v->sys[O2_SYS_GLOBAL_INODE_ALLOC][0], "global_inode_alloc");
}

VTEST(chain_loop)
{
	uint64_t gba = v->sys[O2_SYS_GLOBAL_BITMAP][0];

	if (v->gb_ngroups < 2)
		return; /* one group: the self-link case covers it */
	/* group B (last) links back to group A (first), which links to B. */
	uint64_t a = v->gb_groups[0], b = v->gb_groups[v->gb_ngroups - 1];
	unsigned ca = v->gb_chain[0];
	snap(v, a);
	snap(v, b);
	gd(v, a)->bg_next_group = cpu_le64(b);
	touched(v, a, K_GROUP);
	gd(v, b)->bg_next_group = cpu_le64(a);
	gd(v, b)->bg_chain = cpu_le16((uint16_t)ca);
	touched(v, b, K_GROUP);
	expect_fault(v, "chain loop through an earlier group", -EUCLEAN, ANY_BLOCK);
	restore(v);

	/* and a chain that visits a group of another chain (shared tail) */
	snap(v, a);
	gd(v, a)->bg_next_group = cpu_le64(b);
	touched(v, a, K_GROUP);
	expect_fault(v, "chain runs into another chain's group", -EUCLEAN, ANY_BLOCK);
	restore(v);
	(void)gba;
}

/* ---- slot map, local alloc, truncate log, journal ---- */

VTEST(slot_map)
{
	uint64_t sm = v->sys[O2_SYS_SLOT_MAP][0];
	struct o2_dinode *di = dinode(v, sm);
	/* too small for two slots: legacy slots are 2 bytes, extended ones 8 */
	const uint64_t need = le32(dinode(v, 2)->id2.i_super.s_feature_incompat) &
					      O2_FEATURE_INCOMPAT_EXTENDED_SLOT_MAP
				      ? 16
				      : 4;
	const uint64_t small[] = { 0, 1, need - 1 };

	for (size_t i = 0; i < 3; i++) {
		snap(v, sm);
		di->i_size = cpu_le64(small[i]);
		touched(v, sm, K_INODE);
		expect_fault(v, "slot map too small", -EUCLEAN, sm);
		struct o2_fs *fs = must_open(v);
		struct o2_slotmap_info *info = malloc(sizeof(*info));
		expect_call(v, fs, o2_slotmap_read(fs, info), "o2_slotmap_read", sm);
		free(info);
		o2_fs_close(fs);
		restore(v);
	}

	snap(v, sm);
	di->id2.i_list.recs[0].blkno = cpu_le64(v->nblocks + 1);
	touched(v, sm, K_INODE);
	expect_fault(v, "slot map extent past the device", -EUCLEAN, sm);
	restore(v);

	/* Garbage slot contents are still a readable slot map. */
	snap(v, v->slotmap_data);
	memset(blk(v, v->slotmap_data), 0xFF, v->bs);
	struct outcome o;
	run_all(v, &o);
	restore(v);
}

VTEST(slot_map_huge_size)
{
	/*
	 * A slot map claiming 2^50 bytes.  Nothing may try to read all of it:
	 * every call must come back within this test case's short timeout.
	 */
	uint64_t sm = v->sys[O2_SYS_SLOT_MAP][0];
	dinode(v, sm)->i_size = cpu_le64(1ull << 50);
	touched(v, sm, K_INODE);
	struct outcome o;
	run_all(v, &o);
}

/* Slot 0's local alloc and truncate log; each damage its own case. */
static void la_tl_case(struct vol *v, int which)
{
	uint64_t la = v->sys[O2_SYS_LOCAL_ALLOC][0], tl = v->sys[O2_SYS_TRUNCATE_LOG][0];
	struct o2_dinode *l = dinode(v, la), *t = dinode(v, tl);
	const char *what = "";
	uint64_t b = la;

	switch (which) {
	case 0:
		what = "local alloc bitmap larger than the block";
		l->id2.i_lab.la_size = cpu_le16((uint16_t)(o2_local_alloc_max(v->bs) + 1));
		break;
	case 1:
		what = "local alloc window past the volume";
		l->id2.i_lab.la_bm_off = cpu_le32(0xFFFFFF00u);
		l->id1.bitmap1.i_total = cpu_le32(64);
		break;
	case 2:
		what = "truncate log used > count";
		b = tl;
		t->id2.i_dealloc.tl_used = cpu_le16((uint16_t)(le16(t->id2.i_dealloc.tl_count) + 1));
		break;
	case 3:
		what = "truncate log count beyond the block";
		b = tl;
		t->id2.i_dealloc.tl_count =
			cpu_le16((uint16_t)(o2_truncate_recs_per_inode(v->bs) + 1));
		break;
	default:
		what = "truncate log record past the volume";
		b = tl;
		t->id2.i_dealloc.tl_used = cpu_le16(1);
		t->id2.i_dealloc.tl_recs[0].t_start = cpu_le32(0xFFFFFFF0u);
		t->id2.i_dealloc.tl_recs[0].t_clusters = cpu_le32(100);
		break;
	}
	touched(v, b, K_INODE);
	expect_fault(v, what, -EUCLEAN, b);
	expect_rdwr_fault(v, what, b);
}

VTEST(local_alloc_size)
{
	la_tl_case(v, 0);
}

VTEST(local_alloc_window)
{
	la_tl_case(v, 1);
}

VTEST(truncate_log_used)
{
	la_tl_case(v, 2);
}

VTEST(truncate_log_count)
{
	la_tl_case(v, 3);
}

VTEST(truncate_log_record)
{
	la_tl_case(v, 4);
}

VTEST(journal_superblock)
{
	uint64_t b = v->jsb[0];
	struct jbd2_superblock *js = (struct jbd2_superblock *)blk(v, b);
	char what[96];

#define JS_CASE(label, stmt)                                                                      \
	do {                                                                                      \
		snap(v, b);                                                                       \
		stmt;                                                                             \
		snprintf(what, sizeof(what), "journal superblock %s", label);                     \
		expect_fault(v, what, -EUCLEAN, b);                                               \
		expect_rdwr_fault(v, what, b);                                                    \
		struct o2_fs *fs = must_open(v);                                                  \
		struct o2_journal_info ji;                                                        \
		expect_call(v, fs, o2_journal_info(fs, 0, &ji), "o2_journal_info(0)", b);         \
		ck_assert_int_eq(o2_journal_info(fs, 1, &ji), 0);                                 \
		o2_fs_close(fs);                                                                  \
		restore(v);                                                                       \
	} while (0)

	JS_CASE("magic", js->s_header.h_magic = 0);
	JS_CASE("magic byte-swapped", js->s_header.h_magic = cpu_le32(JBD2_MAGIC));
	JS_CASE("block type", js->s_header.h_blocktype = cpu_be32(9));
	JS_CASE("block size", js->s_blocksize = cpu_be32(v->bs * 2));
	JS_CASE("maxlen 0", js->s_maxlen = 0);
	JS_CASE("maxlen beyond the inode", js->s_maxlen = cpu_be32(0xFFFFFFF0u));
	JS_CASE("first 0", js->s_first = 0);
	JS_CASE("first >= maxlen", js->s_first = js->s_maxlen);
	JS_CASE("start >= maxlen", js->s_start = cpu_be32(be32(js->s_maxlen) + 5));
#undef JS_CASE

	/* The journal inode without the Journal flag. */
	uint64_t j = jino0(v);
	struct o2_dinode *di = dinode(v, j);
	di->i_flags = cpu_le32(le32(di->i_flags) & ~(uint32_t)O2_FL_JOURNAL);
	touched(v, j, K_INODE);
	struct o2_fs *fs = must_open(v);
	struct o2_journal_info ji;
	expect_call(v, fs, o2_journal_info(fs, 0, &ji), "o2_journal_info(0)", j);
	o2_fs_close(fs);
}

/* ---- journal replay (read-write open) over hand-made logs ---- */

/*
 * Open a copy of the volume read-write (which replays slot 0's journal if it
 * is marked dirty).  Returns the open result; *ret_copy keeps the device to
 * inspect afterwards.
 */
static int rdwr_open_copy(struct vol *v, struct o2_blockdev **ret_copy, char *err, size_t errlen)
{
	struct o2_fs *fs = SENTINEL_PTR;

	*ret_copy = cow_dev(v->mem, v->img->size);
	err[0] = '\0';
	int r = o2_fs_open(*ret_copy, O2_OPEN_RDWR, &fs, err, errlen);
	if (r < 0) {
		ck_assert_msg(allowed(r), "%s: read-write open returned %d (%s): %s", v->ctx, r,
			      strerror(-r), err);
		ck_assert_msg(fs == SENTINEL_PTR && err[0], "%s: failed open: ret_fs or message",
			      v->ctx);
		if (r == -EUCLEAN)
			ck_assert_msg(names_some_block(err), "%s: -EUCLEAN names no block: \"%s\"",
				      v->ctx, err);
		return r;
	}
	int c = o2_fs_close(fs);
	ck_assert_msg(c == 0, "%s: close after replay gave %d", v->ctx, c);
	return 0;
}

struct jlog {
	uint32_t first, maxlen, seq;
	uint64_t phys0; /* physical block of journal block 0 (one extent) */
	uint64_t scratch;
};

static uint8_t *jblk(struct vol *v, const struct jlog *l, uint32_t pos)
{
	return blk(v, l->phys0 + pos);
}

static void jheader(struct vol *v, const struct jlog *l, uint32_t pos, uint32_t type, uint32_t seq)
{
	struct jbd2_header *h = (struct jbd2_header *)jblk(v, l, pos);
	memset(h, 0, v->bs);
	h->h_magic = cpu_be32(JBD2_MAGIC);
	h->h_blocktype = cpu_be32(type);
	h->h_sequence = cpu_be32(seq);
}

/* A descriptor at pos with tags for blocks[0..n), flags as given; returns the next pos. */
static uint32_t jdesc(struct vol *v, const struct jlog *l, uint32_t pos, const uint64_t *blocks,
		      unsigned n, uint32_t seq, uint32_t extra_flags)
{
	uint8_t *d = jblk(v, l, pos);
	unsigned off = sizeof(struct jbd2_header);
	jheader(v, l, pos, JBD2_DESCRIPTOR_BLOCK, seq);
	for (unsigned i = 0; i < n; i++) {
		struct jbd2_block_tag *t = (struct jbd2_block_tag *)(d + off);
		uint32_t fl = extra_flags | (i ? JBD2_TAG_SAME_UUID : 0) |
			      (i + 1 == n ? JBD2_TAG_LAST : 0);
		t->t_blocknr = cpu_be32((uint32_t)blocks[i]);
		t->t_flags = cpu_be32(fl);
		off += 8 + (i ? 0 : 16);
		ck_assert_uint_le(off, v->bs);
	}
	return pos + 1 >= l->maxlen ? l->first : pos + 1;
}

static uint32_t jnext(const struct jlog *l, uint32_t pos)
{
	return pos + 1 >= l->maxlen ? l->first : pos + 1;
}

/* Mark slot 0's journal dirty with the log starting at start. */
static void jsetup(struct vol *v, struct jlog *l, uint32_t start)
{
	uint64_t j = jino0(v);
	struct jbd2_superblock *js = (struct jbd2_superblock *)blk(v, v->jsb[0]);
	struct o2_dinode *di = dinode(v, j);

	l->first = be32(js->s_first);
	l->maxlen = be32(js->s_maxlen);
	l->seq = be32(js->s_sequence);
	l->phys0 = v->jsb[0];
	l->scratch = v->jrec[1].blkno + 16;
	ck_assert_uint_ge((uint64_t)v->jrec[0].clusters << v->bpc_bits, l->maxlen);
	js->s_start = cpu_be32(start);
	di->id1.journal1.ij_flags = cpu_le32(le32(di->id1.journal1.ij_flags) | O2_JOURNAL_DIRTY);
	if (v->img->ecc)
		recompute(v, j, K_INODE);
}

static bool rdwr_supported(struct vol *v)
{
	struct o2_blockdev *copy;
	struct o2_fs *fs;
	copy = cow_dev(v->img->data, v->img->size);
	int r = o2_fs_open(copy, O2_OPEN_RDWR, &fs, NULL, 0);
	if (r == 0)
		o2_fs_close(fs);
	o2_blockdev_free(copy);
	ck_assert_msg(r == 0 || r == -EOPNOTSUPP, "%s: pristine read-write open: %d", v->ctx, r);
	return r == 0;
}

VTEST(journal_replay)
{
	if (v->raw || !rdwr_supported(v))
		return;
	struct jlog l;
	struct o2_blockdev *copy;
	char err[512];
	int r;
	uint8_t *want = malloc(v->bs);

	/* An empty log marked dirty: nothing to replay, and the volume is clean after. */
	jsetup(v, &l, l.first = be32(((struct jbd2_superblock *)blk(v, v->jsb[0]))->s_first));
	memset(jblk(v, &l, l.first), 0, v->bs);
	r = rdwr_open_copy(v, &copy, err, sizeof(err));
	ck_assert_msg(r == 0, "%s: empty dirty log: %d %s", v->ctx, r, err);
	o2_blockdev_free(copy);

	/* One transaction writing the scratch block; it must land, with ESCAPE undone. */
	uint32_t p = l.first;
	p = jdesc(v, &l, p, &l.scratch, 1, l.seq, JBD2_TAG_ESCAPE);
	memset(want, 0x5A, v->bs);
	*(o2be32 *)want = cpu_be32(JBD2_MAGIC);
	memset(jblk(v, &l, p), 0x5A, v->bs);
	memset(jblk(v, &l, p), 0, 4); /* escaped */
	p = jnext(&l, p);
	jheader(v, &l, p, JBD2_COMMIT_BLOCK, l.seq);
	r = rdwr_open_copy(v, &copy, err, sizeof(err));
	ck_assert_msg(r == 0, "%s: one transaction: %d %s", v->ctx, r, err);
	ck_assert_msg(memcmp(cow_block(copy, l.scratch, v->bs), want, v->bs) == 0,
		      "%s: the replayed block is not the logged copy (escape undone)", v->ctx);
	o2_blockdev_free(copy);

	/* The same with the wrong commit sequence: not committed, nothing written. */
	jheader(v, &l, p, JBD2_COMMIT_BLOCK, l.seq + 1);
	r = rdwr_open_copy(v, &copy, err, sizeof(err));
	ck_assert_msg(r == 0, "%s: uncommitted transaction: %d %s", v->ctx, r, err);
	ck_assert_msg(memcmp(cow_block(copy, l.scratch, v->bs), blk(v, l.scratch),
			     v->bs) == 0,
		      "%s: an uncommitted transaction was replayed", v->ctx);
	o2_blockdev_free(copy);

	/* Home blocks outside the volume, or the decoy sectors. */
	const uint64_t bad[] = { v->nblocks, v->nblocks + 100, 0xFFFFFFFFu, 0, 1 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p = jdesc(v, &l, l.first, &bad[i], 1, l.seq, 0);
		memset(jblk(v, &l, p), 0x33, v->bs);
		jheader(v, &l, jnext(&l, p), JBD2_COMMIT_BLOCK, l.seq);
		r = rdwr_open_copy(v, &copy, err, sizeof(err));
		ck_assert_msg(r == -EUCLEAN, "%s: replay to home block %" PRIu64 ": %d \"%s\"",
			      v->ctx, bad[i], r, err);
		o2_blockdev_free(copy);
	}

	/* A descriptor full of tags with no LAST flag, all for the scratch block. */
	uint64_t many[600];
	unsigned n = (unsigned)((v->bs - sizeof(struct jbd2_header) - 16) / 8);
	for (unsigned i = 0; i < n; i++)
		many[i] = l.scratch;
	p = jdesc(v, &l, l.first, many, n, l.seq, 0);
	struct jbd2_block_tag *last =
		(struct jbd2_block_tag *)(jblk(v, &l, l.first) + sizeof(struct jbd2_header) + 16 +
					  8 * (n - 1));
	last->t_flags = cpu_be32(JBD2_TAG_SAME_UUID); /* no LAST_TAG anywhere */
	for (unsigned i = 0; i < n; i++, p = jnext(&l, p))
		memset(jblk(v, &l, p), (int)(i & 0xFF), v->bs);
	jheader(v, &l, p, JBD2_COMMIT_BLOCK, l.seq);
	r = rdwr_open_copy(v, &copy, err, sizeof(err));
	ck_assert_msg(r == 0, "%s: descriptor without LAST_TAG: %d %s", v->ctx, r, err);
	memset(want, (int)((n - 1) & 0xFF), v->bs);
	ck_assert_msg(memcmp(cow_block(copy, l.scratch, v->bs), want, v->bs) == 0,
		      "%s: the last copy of the block must win", v->ctx);
	o2_blockdev_free(copy);

	/* Revoke blocks claiming impossible sizes. */
	const uint32_t counts[] = { 0, 11, v->bs + 4, 0xFFFFFFFFu };
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		jheader(v, &l, l.first, JBD2_REVOKE_BLOCK, l.seq);
		((struct jbd2_revoke_header *)jblk(v, &l, l.first))->r_count = cpu_be32(counts[i]);
		jheader(v, &l, jnext(&l, l.first), JBD2_COMMIT_BLOCK, l.seq);
		r = rdwr_open_copy(v, &copy, err, sizeof(err));
		ck_assert_msg(r == -EUCLEAN, "%s: revoke block of %u bytes: %d \"%s\"", v->ctx,
			      counts[i], r, err);
		o2_blockdev_free(copy);
	}

	/* A transaction that wraps around the end of the ring. */
	struct jbd2_superblock *js = (struct jbd2_superblock *)blk(v, v->jsb[0]);
	uint32_t start = l.maxlen - 1;
	js->s_start = cpu_be32(start);
	p = jdesc(v, &l, start, &l.scratch, 1, l.seq, 0);
	ck_assert_uint_eq(p, l.first);
	memset(jblk(v, &l, p), 0x77, v->bs);
	jheader(v, &l, jnext(&l, p), JBD2_COMMIT_BLOCK, l.seq);
	r = rdwr_open_copy(v, &copy, err, sizeof(err));
	ck_assert_msg(r == 0, "%s: wrapped transaction: %d %s", v->ctx, r, err);
	memset(want, 0x77, v->bs);
	ck_assert_msg(memcmp(cow_block(copy, l.scratch, v->bs), want, v->bs) == 0,
		      "%s: the wrapped transaction was not replayed", v->ctx);
	o2_blockdev_free(copy);

	/* A log that never ends: every block a commit of the next sequence. */
	js->s_start = cpu_be32(l.first);
	for (uint32_t pos = l.first, k = 0; pos < l.maxlen; pos++, k++)
		jheader(v, &l, pos, JBD2_COMMIT_BLOCK, l.seq + k);
	r = rdwr_open_copy(v, &copy, err, sizeof(err));
	ck_assert_msg(r == 0 || r == -EUCLEAN, "%s: endless log: %d \"%s\"", v->ctx, r, err);
	o2_blockdev_free(copy);

	/* Garbage everywhere in the log. */
	rng_seed(4242);
	for (uint32_t pos = l.first; pos < l.maxlen; pos++)
		for (unsigned k = 0; k < v->bs; k += 8) {
			uint64_t x = rng();
			memcpy(jblk(v, &l, pos) + k, &x, 8);
		}
	r = rdwr_open_copy(v, &copy, err, sizeof(err));
	ck_assert_msg(r == 0, "%s: garbage log: %d \"%s\"", v->ctx, r, err);
	o2_blockdev_free(copy);
	free(want);
}

/* ---- metaecc: the checks themselves ---- */

static void flip_bit(struct vol *v, uint64_t b, size_t bit)
{
	blk(v, b)[bit / 8] ^= (uint8_t)(1u << (bit % 8));
}

VTEST(metaecc_bit_flips)
{
	if (!v->img->ecc || !v->raw)
		return;
	const uint64_t blocks[] = { 2, v->root, v->sysdir, v->sys[O2_SYS_GLOBAL_BITMAP][0],
				    v->gb_groups[0], v->sys[O2_SYS_JOURNAL][0], v->ia_group };

	for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++) {
		uint64_t b = blocks[i];
		enum kind k = (b == v->gb_groups[0] || b == v->ia_group) ? K_GROUP : K_INODE;
		size_t coff = check_off(v, k) * 8;
		/* bits in the header and in the id2 area / bitmap */
		/*
		 * (Not the superblock's signature: like the kernel, the probe wants
		 * the signature before it looks at the check.)
		 */
		const size_t bits[] = { 0x28 * 8 + 3, 0xC0 * 8 + 1, 0x60 * 8 + 5,
					b == 2 ? 0x2C * 8 + 4 : 0x2 * 8 };
		char what[96];

		for (size_t n = 0; n < 4; n++) {
			snap(v, b);
			flip_bit(v, b, bits[n]);
			touched(v, b, k);
			snprintf(what, sizeof(what), "one flipped bit (%zu) in block %" PRIu64, bits[n],
				 b);
			classify(v);
			ck_assert_uint_eq(v->ncorrected, 1);
			expect_ok(v, what); /* repaired by the ECC */
			restore(v);
		}

		snap(v, b);
		flip_bit(v, b, bits[0]);
		flip_bit(v, b, bits[1]);
		touched(v, b, k);
		snprintf(what, sizeof(what), "two flipped bits in block %" PRIu64, b);
		expect_fault(v, what, -EUCLEAN, b);
		restore(v);

		snap(v, b);
		memset(blk(v, b) + coff / 8, 0, 8);
		touched(v, b, k);
		snprintf(what, sizeof(what), "zeroed check in block %" PRIu64, b);
		expect_fault(v, what, -EUCLEAN, b);
		restore(v);

		snap(v, b);
		flip_bit(v, b, coff + 7); /* in the stored crc */
		touched(v, b, k);
		snprintf(what, sizeof(what), "flipped crc bit in block %" PRIu64, b);
		expect_fault(v, what, -EUCLEAN, b);
		restore(v);
	}
}

/* ---- truncated and garbage devices ---- */

static struct o2_blockdev *mem_dev(const uint8_t *data, uint64_t len)
{
	return view_dev((uint8_t *)data, len);
}

VTEST(truncated)
{
	const uint64_t sizes[] = { v->img->size / 2, v->img->size / 8, 16 * (uint64_t)v->bs,
				   3 * (uint64_t)v->bs, 2 * (uint64_t)v->bs, 512 };
	struct o2_blockdev *full = v->dev;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct outcome o;
		v->dev = mem_dev(v->mem, sizes[i]);
		uint64_t saved = v->nblocks;
		v->nblocks = sizes[i] / v->bs;
		snprintf(v->ctx, sizeof(v->ctx), "[truncated to %" PRIu64 " bytes, %s]", sizes[i],
			 v->img->name);
		run_all(v, &o);
		if (sizes[i] == 3 * (uint64_t)v->bs)
			ck_assert_msg(o.open_r == -EUCLEAN && names_block(o.open_msg, 2),
				      "%s: open gave %d \"%s\"", v->ctx, o.open_r, o.open_msg);
		if (sizes[i] < 3 * (uint64_t)v->bs)
			ck_assert_msg(o.open_r == -ENODATA, "%s: open gave %d \"%s\"", v->ctx,
				      o.open_r, o.open_msg);
		/*
		 * Half the device gone: the global bitmap then covers clusters the
		 * device does not have, whatever else still fits.
		 */
		if (sizes[i] == 16 * (uint64_t)v->bs || sizes[i] == v->img->size / 2) {
			int r;
			const char *msg, *where;
			first_failure(&o, &r, &msg, &where);
			ck_assert_msg(r == -EUCLEAN, "%s: %s gave %d \"%s\"", v->ctx, where, r, msg);
		}
		o2_blockdev_free(v->dev);
		v->nblocks = saved;
	}
	v->dev = full;
}

START_TEST(zero_length_file)
{
	char path[320];
	snprintf(path, sizeof(path), "%s/empty.img", tmpdir);
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	struct o2_blockdev *dev;
	ck_assert_int_eq(o2_blockdev_open_file(path, O2_DEV_RDONLY, &dev), 0);
	ck_assert_uint_eq(dev->size, 0);
	struct o2_fs *fs = SENTINEL_PTR;
	char err[256] = "";
	int r = o2_fs_open(dev, O2_OPEN_RDONLY, &fs, err, sizeof(err));
	ck_assert_msg(r == -ENODATA, "empty file: open gave %d \"%s\"", r, err);
	ck_assert(fs == SENTINEL_PTR);
	ck_assert(err[0]);
	/* A NULL error buffer is allowed. */
	ck_assert_int_eq(o2_fs_open(dev, O2_OPEN_RDONLY, &fs, NULL, 0), -ENODATA);
	o2_blockdev_free(dev);

	/* A memory device of size 0, too. */
	ck_assert_int_eq(o2_blockdev_new_memory(0, &dev), 0);
	ck_assert_int_eq(o2_fs_open(dev, O2_OPEN_RDONLY, &fs, err, sizeof(err)), -ENODATA);
	o2_blockdev_free(dev);
	unlink(path);
}
END_TEST

START_TEST(garbage)
{
	const uint64_t sizes[] = { 512, 4096, 12288, 1 * MiB, 16 * MiB };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (uint64_t seed = 1; seed <= 4; seed++) {
			uint8_t *buf = malloc(sizes[i]);
			rng_seed(seed * 1000 + i);
			for (uint64_t k = 0; k < sizes[i]; k += 8) {
				uint64_t x = rng();
				memcpy(buf + k, &x, 8);
			}
			struct o2_blockdev *dev = mem_dev(buf, sizes[i]);
			struct o2_fs *fs = SENTINEL_PTR;
			char err[256] = "";
			int r = o2_fs_open(dev, O2_OPEN_RDONLY, &fs, err, sizeof(err));
			ck_assert_msg(r == -ENODATA, "garbage size %" PRIu64 " seed %" PRIu64
				      ": open gave %d \"%s\"", sizes[i], seed, r, err);
			ck_assert(err[0]);
			o2_blockdev_free(dev);
			free(buf);
		}
	}
}
END_TEST

/* The real superblock (and the decoy sectors) followed by garbage. */
VTEST(garbage_after_superblock)
{
	for (uint64_t seed = 1; seed <= 3; seed++) {
		rng_seed(seed * 77);
		for (uint64_t k = 3 * (uint64_t)v->bs; k < 8 * MiB; k += 8) {
			uint64_t x = rng();
			memcpy(v->mem + k, &x, 8);
		}
		struct outcome o;
		run_all(v, &o);
		ck_assert_msg(o.open_r == -EUCLEAN && names_block(o.open_msg, v->sysdir),
			      "%s seed %" PRIu64 ": open gave %d \"%s\"; expected -EUCLEAN naming "
			      "the system dir %" PRIu64,
			      v->ctx, seed, o.open_r, o.open_msg, v->sysdir);
	}
	/* and zeros */
	memset(v->mem + 3 * (uint64_t)v->bs, 0, 8 * MiB);
	struct outcome o;
	run_all(v, &o);
	ck_assert_msg(o.open_r == -EUCLEAN, "%s zeros: open gave %d \"%s\"", v->ctx, o.open_r,
		      o.open_msg);
}

/* ---- fuzzing: random byte damage in metadata, full walk each time ---- */

/*
 * A fuzz iteration that takes too long is a failure in itself (a damaged
 * size or loop that makes fscore crawl).  SIGALRM ends the test process with
 * the iteration's description on stderr, so the case can be replayed.
 */
static char alarm_msg[512];

static void fuzz_alarm(int sig)
{
	(void)sig;
	ssize_t n = write(2, alarm_msg, strlen(alarm_msg));
	(void)n;
	_exit(86);
}

static unsigned fuzz_iterations(void)
{
	const char *e = getenv("O2_FUZZ_ITERATIONS");
	return e ? (unsigned)strtoul(e, NULL, 10) : 2000;
}

VTEST(fuzz)
{
	const unsigned iters = fuzz_iterations();
	const char *slow_env = getenv("O2_FUZZ_SLOW_SECONDS");
	const double slow = slow_env ? strtod(slow_env, NULL) : 10.0;
	const bool keep_isize = getenv("O2_FUZZ_KEEP_ISIZE") != NULL;
	const uint64_t region = (4 * MiB) / v->bs;
	const char *seed_env = getenv("O2_FUZZ_SEED");
	uint64_t seed = (seed_env ? strtoull(seed_env, NULL, 0) : 0xF00D) + (uint64_t)v->variant * 7919;
	char base[200];

	snprintf(base, sizeof(base), "%.190s", v->ctx);
	ck_assert_uint_gt(v->ntargets, 20);
	rng_seed(seed);
	for (unsigned it = 0; it < iters; it++) {
		struct target t;
		if (rng() % 4 != 0) {
			t = v->targets[rng() % v->ntargets];
		} else {
			t.blkno = rng() % region;
			t.kind = K_NONE;
		}
		snap(v, t.blkno);
		uint8_t *p = blk(v, t.blkno);
		unsigned nmod = 1 + (unsigned)(rng() % 4);
		char mods[128] = "";
		size_t ml = 0;
		for (unsigned m = 0; m < nmod; m++) {
			unsigned r = (unsigned)(rng() % 10), off;
			if (r < 4)
				off = (unsigned)(rng() % (v->bs < 0x100 ? v->bs : 0x100));
			else if (r < 6)
				off = 0xC0 + (unsigned)(rng() % 0x80) % (v->bs - 0xC0);
			else
				off = (unsigned)(rng() % v->bs);
			/* O2_FUZZ_KEEP_ISIZE: leave inode sizes alone, to look past a known bug */
			if (keep_isize && t.kind == K_INODE && off >= 0x20 && off < 0x28)
				off -= 0x10;
			switch (rng() % 6) {
			case 0:
				p[off] ^= (uint8_t)(1 + rng() % 255);
				break;
			case 1:
				p[off] = 0;
				break;
			case 2:
				p[off] = 0xFF;
				break;
			case 3:
				p[off] = (uint8_t)rng();
				break;
			case 4:
				p[off]++;
				break;
			default:
				p[off] ^= (uint8_t)(1u << (rng() % 8));
				break;
			}
			ml += (size_t)snprintf(mods + ml, sizeof(mods) - ml, " 0x%x=0x%02x", off, p[off]);
			if (ml >= sizeof(mods))
				ml = sizeof(mods) - 1;
		}
		/*
		 * On metaecc volumes: with checks recomputed the structure checks
		 * must catch the damage; with stale checks the block check must
		 * (or the ECC repairs a single flipped bit).
		 */
		if (v->img->ecc && t.kind != K_NONE && !v->raw)
			recompute(v, t.blkno, t.kind);
		snprintf(v->ctx, sizeof(v->ctx),
			 "%s seed 0x%" PRIx64 " iteration %u block %" PRIu64 " bytes%s%s", base, seed,
			 it, t.blkno, mods, v->img->ecc && t.kind == K_NONE ? " (unchecked block)" : "");
		struct outcome o;
		struct timespec t0, t1;
		snprintf(alarm_msg, sizeof(alarm_msg),
			 "\n%s: still running after %.0f s: a damaged volume must not make fscore "
			 "crawl (replay: O2_FUZZ_ITERATIONS=%u)\n",
			 v->ctx, slow, it + 1);
		signal(SIGALRM, fuzz_alarm);
		alarm((unsigned)slow);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		run_all_mode(v, &o, true);
		if (it % 8 == 0)
			exercise_rdwr(v); /* read-write open: slot 0's files, journal, close */
		clock_gettime(CLOCK_MONOTONIC, &t1);
		alarm(0);
		double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		ck_assert_msg(secs < slow, "%s: took %.1f s (open %d, walk %d \"%s\"): a damaged "
			      "volume must not make fscore crawl", v->ctx, secs, o.open_r, o.walk_r,
			      o.walk_msg);
		restore(v);
	}
	snprintf(v->ctx, sizeof(v->ctx), "%s", base);
	/* After all that, the restored volume is whole again. */
	struct outcome o;
	run_all(v, &o);
	ck_assert_int_eq(o.open_r, 0);
	ck_assert_int_eq(o.walk_r, 0);
}

/* ---- image making ---- */

static int make_image(struct image *im)
{
	char path[320], cmd[768];
	snprintf(path, sizeof(path), "%s/%s.img", tmpdir, im->name);
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)im->size) < 0)
		return -1;
	close(fd);
	snprintf(cmd, sizeof(cmd),
		 "mkfs.ocfs2 -q %s -b %u -C 4096 -N 2 -J size=4M -L corrupt %s </dev/null "
		 ">%s/mkfs.log 2>&1",
		 im->mkfs_args, im->bs, path, tmpdir);
	int st = system(cmd);
	/* Shared, read-only and reclaimable: each case copies what it damages. */
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	void *map = mmap(NULL, im->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return -1;
	im->data = map;
	snprintf(im->path, sizeof(im->path), "%s", path);
	/*
	 * Without modprobe, mkfs.ocfs2 exits 1 after a successful format; judge
	 * by the superblock signature.
	 */
	if (memcmp(im->data + 2 * (uint64_t)im->bs, O2_SIG_SUPER, sizeof(O2_SIG_SUPER)) != 0) {
		fprintf(stderr, "mkfs.ocfs2 failed for %s (status %d): %s\n", im->name, st, cmd);
		return -1;
	}
	return 0;
}

static Suite *corrupt_suite(void)
{
	Suite *s = suite_create("corrupt");
	TCase *tc;

#define ADD_V(name) tcase_add_loop_test(tc, name, 0, NVARIANTS)
	tc = tcase_create("superblock");
	ADD_V(pristine);
	ADD_V(sb_signature);
	ADD_V(sb_blocksize_bits);
	ADD_V(sb_root_out_of_range);
	ADD_V(sb_root_not_an_inode);
	ADD_V(sb_geometry);
	ADD_V(sb_features);
	ADD_V(sb_fs_generation);
	tcase_set_timeout(tc, 600);
	suite_add_tcase(s, tc);

	tc = tcase_create("inodes");
	ADD_V(root_inode);
	ADD_V(root_not_a_directory);
	ADD_V(sysdir_signature);
	ADD_V(sysfile_inodes);
	tcase_set_timeout(tc, 600);
	suite_add_tcase(s, tc);

	tc = tcase_create("extents");
	ADD_V(extent_list_header);
	ADD_V(extent_records);
	ADD_V(extent_block_valid);
	ADD_V(extent_block_damage);
	tcase_set_timeout(tc, 600);
	suite_add_tcase(s, tc);

	tc = tcase_create("directories");
	ADD_V(root_dir_entries);
	ADD_V(write_path_dir_entries);
	ADD_V(system_dir_entries);
	ADD_V(dir_entry_targets);
	ADD_V(dir_trailer);
	ADD_V(inline_dir);
	tcase_set_timeout(tc, 600);
	suite_add_tcase(s, tc);

	tc = tcase_create("allocators");
	ADD_V(global_bitmap_groups);
	ADD_V(inode_alloc_groups);
	ADD_V(chain_inodes);
	ADD_V(chain_loop);
	tcase_set_timeout(tc, 600);
	suite_add_tcase(s, tc);

	tc = tcase_create("system files");
	ADD_V(slot_map);
	ADD_V(local_alloc_size);
	ADD_V(local_alloc_window);
	ADD_V(truncate_log_used);
	ADD_V(truncate_log_count);
	ADD_V(truncate_log_record);
	ADD_V(journal_superblock);
	ADD_V(journal_replay);
	ADD_V(metaecc_bit_flips);
	tcase_set_timeout(tc, 600);
	suite_add_tcase(s, tc);

	/* A correct fscore answers in well under a second here. */
	tc = tcase_create("huge sizes");
	ADD_V(slot_map_huge_size);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);

	tc = tcase_create("devices");
	ADD_V(truncated);
	tcase_add_test(tc, zero_length_file);
	tcase_add_test(tc, garbage);
	ADD_V(garbage_after_superblock);
	tcase_set_timeout(tc, 600);
	suite_add_tcase(s, tc);

	tc = tcase_create("fuzz");
	ADD_V(fuzz);
	tcase_set_timeout(tc, 3000);
	suite_add_tcase(s, tc);
#undef ADD_V
	return s;
}

int main(void)
{
	test_env_init();
	if (system("command -v mkfs.ocfs2 >/dev/null 2>&1") != 0) {
		fprintf(stderr, "mkfs.ocfs2 not found: the corrupt tests need it (skipped)\n");
		return 77;
	}
	snprintf(tmpdir, sizeof(tmpdir), "%s/o2corrupt-XXXXXX", test_tmpdir());
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	for (size_t i = 0; i < NIMAGES; i++) {
		if (make_image(&images[i]) < 0) {
			fprintf(stderr, "could not make the %s image\n", images[i].name);
			return 1;
		}
	}
	char log[320];
	snprintf(log, sizeof(log), "%s/mkfs.log", tmpdir);
	unlink(log);

	SRunner *sr = srunner_create(corrupt_suite());
	/* the image files are removed at the end (and are sparse meanwhile) */
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	for (size_t i = 0; i < NIMAGES; i++) {
		munmap((void *)images[i].data, images[i].size);
		unlink(images[i].path);
	}
	rmdir(tmpdir);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
