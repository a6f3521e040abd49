/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Shared by the fuzz targets: see fuzz_common.h.
 */
#include "fuzz_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blockcheck.h"
#include "format.h"

void fz_fail(const char *fmt, ...)
{
	va_list ap;

	fputs("FUZZ FINDING: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	abort();
}

void fz_debug(const char *fmt, ...)
{
	static int on = -1;
	va_list ap;

	if (on < 0)
		on = getenv("FUZZ_DEBUG") != NULL;
	if (!on)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- volumes ---- */

static const struct {
	const char *name;
	unsigned bs;
	enum o2_mkfs_level level;
	size_t size;
} configs[FZ_CFG_COUNT] = {
	[FZ_CFG_512] = { "512", 512, O2_MKFS_LEVEL_DEFAULT, 8u << 20 },
	[FZ_CFG_4K] = { "4k", 4096, O2_MKFS_LEVEL_DEFAULT, 16u << 20 },
	[FZ_CFG_512_ECC] = { "512-max-features", 512, O2_MKFS_LEVEL_MAX_FEATURES, 8u << 20 },
	[FZ_CFG_1K_COMPAT] = { "1k-max-compat", 1024, O2_MKFS_LEVEL_MAX_COMPAT, 12u << 20 },
};

static struct fz_volume volumes[FZ_CFG_COUNT];

uint64_t fz_clock(void *arg)
{
	uint64_t *t = arg;

	/* 2026-01-01, then one millisecond and a bit per call */
	*t += 1000003;
	return 1767225600ull * 1000000000ull + *t;
}

static int journal_extent_cb(const struct o2_extent *e, uint64_t eb, void *arg)
{
	struct fz_volume *v = arg;

	if (!e)
		return 0;
	uint64_t first = e->blkno;
	uint64_t n = (uint64_t)e->clusters * (v->info.cluster_size / v->info.block_size);

	if (v->journal_blocks == 0)
		v->journal_blkno = first;
	else if (v->journal_blkno + v->journal_blocks != first)
		return 1; /* not contiguous: the targets rely on it */
	v->journal_blocks += n;
	return 0;
}

static void make_volume(enum fz_config cfg)
{
	struct fz_volume *v = &volumes[cfg];
	struct o2_blockdev *dev;
	struct o2_mkfs_opts o;
	uint64_t t = 0;
	char err[256];
	int r;

	memset(&o, 0, sizeof(o));
	o.block_size = configs[cfg].bs;
	o.cluster_size = 4096;
	o.slots = 1;
	o.label = "fuzz";
	o.journal_size = 4u << 20;
	o.level = configs[cfg].level;
	/* quotas: fscore opens them read-only only */
	o.features_off.ro_compat = O2_FEATURE_RO_COMPAT_USRQUOTA | O2_FEATURE_RO_COMPAT_GRPQUOTA;
	o.mount = O2_MKFS_MOUNT_LOCAL;
	o.have_uuid = true;
	for (int i = 0; i < 16; i++)
		o.uuid[i] = (uint8_t)(0x10 + i);
	o.have_generation = true;
	o.generation = 0x0f0f1234;
	o.have_dx_seed = true;
	o.dx_seed[0] = 0x11111111;
	o.dx_seed[1] = 0x22222222;
	o.dx_seed[2] = 0x33333333;
	o.now_ns = fz_clock;
	o.clock_arg = &t;

	if (o2_blockdev_new_memory(configs[cfg].size, &dev) < 0)
		fz_fail("out of memory");
	r = o2_mkfs(dev, &o, NULL, NULL, &v->info, err, sizeof(err));
	if (r < 0)
		fz_fail("o2_mkfs (%s) failed: %d %s", configs[cfg].name, r, err);

	/* where the slot-0 journal lives */
	struct o2_fs *fs;
	struct o2_inode *ino;

	r = o2_fs_open(dev, O2_OPEN_RDONLY, &fs, err, sizeof(err));
	if (r < 0)
		fz_fail("o2_fs_open of a fresh %s volume: %d %s", configs[cfg].name, r, err);
	r = o2_sysfile_lookup(fs, O2_SYS_JOURNAL, 0, &v->journal_inode);
	if (r == 0)
		r = o2_inode_get(fs, v->journal_inode, &ino);
	if (r == 0) {
		r = o2_inode_walk_extents(fs, ino, journal_extent_cb, v);
		o2_inode_unref(ino);
	}
	if (r != 0 || v->journal_blocks == 0)
		fz_fail("journal:0000 of a fresh %s volume: %d (%s)", configs[cfg].name, r,
			o2_fs_error(fs));
	o2_fs_close(fs);

	uint8_t *copy = malloc(configs[cfg].size);
	if (!copy)
		fz_fail("out of memory");
	memcpy(copy, o2_blockdev_memory_data(dev), configs[cfg].size);
	v->size = configs[cfg].size;
	o2_blockdev_free(dev);
	v->data = copy;
}

const struct fz_volume *fz_volume(enum fz_config cfg)
{
	if (!volumes[cfg].data)
		make_volume(cfg);
	return &volumes[cfg];
}

/* ---- reusable memory devices ---- */

#define FZ_REGION_BITS 16

struct fz_dev {
	struct o2_blockdev dev;
	uint8_t *mem;
	const uint8_t *base;
	size_t size;
	uint8_t *dirty; /* one byte per region */
	size_t nregions;
};

static struct fz_dev *dev_of(struct o2_blockdev *bd)
{
	return (struct fz_dev *)((char *)bd - offsetof(struct fz_dev, dev));
}

static int range_ok(struct fz_dev *d, size_t len, uint64_t off)
{
	if (off % 512 || len % 512)
		return -EINVAL;
	if (off > d->size || len > d->size - off)
		return -ENXIO;
	return 0;
}

static int fzd_read(struct o2_blockdev *bd, void *buf, size_t len, uint64_t off)
{
	struct fz_dev *d = dev_of(bd);
	int r = range_ok(d, len, off);

	if (r == 0)
		memcpy(buf, d->mem + off, len);
	return r;
}

static int fzd_write(struct o2_blockdev *bd, const void *buf, size_t len, uint64_t off)
{
	struct fz_dev *d = dev_of(bd);
	int r = range_ok(d, len, off);

	if (r == 0) {
		memcpy(d->mem + off, buf, len);
		fz_dev_mark(d, (size_t)off, len);
	}
	return r;
}

static int fzd_flush(struct o2_blockdev *bd)
{
	return 0;
}

static void fzd_destroy(struct o2_blockdev *bd)
{
	/* lives as long as the process */
}

static const struct o2_blockdev_ops fzd_ops = { fzd_read, fzd_write, fzd_flush, fzd_destroy, NULL,
						NULL };

struct fz_dev *fz_dev_new(const uint8_t *base, size_t size)
{
	struct fz_dev *d = calloc(1, sizeof(*d));

	if (!d)
		fz_fail("out of memory");
	d->size = size;
	d->mem = malloc(size);
	d->nregions = (size + (1u << FZ_REGION_BITS) - 1) >> FZ_REGION_BITS;
	d->dirty = malloc(d->nregions);
	if (!d->mem || !d->dirty)
		fz_fail("out of memory");
	memset(d->dirty, 1, d->nregions);
	d->dev.ops = &fzd_ops;
	d->dev.size = size;
	d->dev.sector_size = 512;
	d->base = base;
	fz_dev_reset(d, NULL);
	return d;
}

struct o2_blockdev *fz_dev_blockdev(struct fz_dev *d)
{
	return &d->dev;
}

uint8_t *fz_dev_mem(struct fz_dev *d)
{
	return d->mem;
}

void fz_dev_mark(struct fz_dev *d, size_t off, size_t len)
{
	if (!len)
		return;
	for (size_t i = off >> FZ_REGION_BITS; i <= (off + len - 1) >> FZ_REGION_BITS; i++)
		d->dirty[i] = 1;
}

void fz_dev_reset(struct fz_dev *d, const uint8_t *base)
{
	if (base && base != d->base) {
		d->base = base;
		memset(d->dirty, 1, d->nregions);
	}
	for (size_t i = 0; i < d->nregions; i++) {
		if (!d->dirty[i])
			continue;
		size_t off = i << FZ_REGION_BITS, len = (size_t)1 << FZ_REGION_BITS;
		if (len > d->size - off)
			len = d->size - off;
		if (d->base)
			memcpy(d->mem + off, d->base + off, len);
		else
			memset(d->mem + off, 0, len);
		d->dirty[i] = 0;
	}
	d->dev.read_only = 0;
}

void fz_dev_copy(struct fz_dev *dst, const struct fz_dev *src)
{
	for (size_t i = 0; i < dst->nregions; i++) {
		if (!dst->dirty[i] && !src->dirty[i])
			continue;
		size_t off = i << FZ_REGION_BITS, len = (size_t)1 << FZ_REGION_BITS;
		if (len > dst->size - off)
			len = dst->size - off;
		memcpy(dst->mem + off, src->mem + off, len);
		dst->dirty[i] = 1;
	}
}

/* ---- reading input bytes ---- */

uint8_t fz_u8(struct fz_reader *r)
{
	if (!r->left)
		return 0;
	r->left--;
	return *r->p++;
}

uint16_t fz_u16(struct fz_reader *r)
{
	uint16_t lo = fz_u8(r);

	return (uint16_t)(lo | (uint16_t)fz_u8(r) << 8);
}

uint32_t fz_u32(struct fz_reader *r)
{
	uint32_t lo = fz_u16(r);

	return lo | (uint32_t)fz_u16(r) << 16;
}

/* ---- sparse images ---- */

#define SECTOR 512u

uint8_t fz_image_decode(const uint8_t *data, size_t size, struct fz_dev *d)
{
	struct fz_reader r = { data, size };
	uint8_t flags = fz_u8(&r);
	uint8_t *mem = fz_dev_mem(d);
	size_t nsect = d->size / SECTOR;

	while (r.left >= 6) {
		uint64_t first = fz_u32(&r) % nsect;
		uint64_t count = fz_u16(&r);

		if (count > nsect - first)
			count = nsect - first;
		size_t bytes = (size_t)count * SECTOR;
		if (bytes > r.left)
			bytes = r.left;
		memcpy(mem + first * SECTOR, r.p, bytes);
		fz_dev_mark(d, (size_t)first * SECTOR, bytes);
		r.p += bytes;
		r.left -= bytes;
	}
	return flags;
}

static bool sector_zero(const uint8_t *p)
{
	for (unsigned i = 0; i < SECTOR; i++)
		if (p[i])
			return false;
	return true;
}

uint8_t *fz_image_encode(const uint8_t *mem, size_t len, uint8_t flags, size_t *ret_len)
{
	size_t nsect = len / SECTOR, cap = 1 + len + 6 * (nsect / 2 + 1), n = 0;
	uint8_t *out = malloc(cap);

	if (!out)
		fz_fail("out of memory");
	out[n++] = flags;
	for (size_t s = 0; s < nsect;) {
		if (sector_zero(mem + s * SECTOR)) {
			s++;
			continue;
		}
		/* a run: extend over non-zero sectors and gaps of up to two zero sectors */
		size_t e = s + 1;
		for (;;) {
			size_t k = e;
			while (k < nsect && k < e + 3 && sector_zero(mem + k * SECTOR))
				k++;
			if (k >= nsect || k == e + 3)
				break;
			e = k + 1;
			if (e - s >= 0xffff)
				break;
		}
		uint32_t first = (uint32_t)s;
		uint16_t count = (uint16_t)(e - s);
		for (int i = 0; i < 4; i++)
			out[n++] = (uint8_t)(first >> (8 * i));
		out[n++] = (uint8_t)count;
		out[n++] = (uint8_t)(count >> 8);
		memcpy(out + n, mem + s * SECTOR, (size_t)count * SECTOR);
		n += (size_t)count * SECTOR;
		s = e;
	}
	*ret_len = n;
	return out;
}

void fz_fix_checks(struct fz_dev *d, unsigned bs)
{
	uint8_t *mem = d->mem;
	const size_t len = d->size;
	static const struct {
		const char *sig;
		size_t off;
	} sigs[] = {
		{ O2_SIG_INODE, offsetof(struct o2_dinode, i_check) },
		{ O2_SIG_SUPER, offsetof(struct o2_dinode, i_check) },
		{ O2_SIG_EXTENT, offsetof(struct o2_extent_block, h_check) },
		{ O2_SIG_GROUP, offsetof(struct o2_group_desc, bg_check) },
		{ O2_SIG_DXROOT, offsetof(struct o2_dx_root_block, dr_check) },
		{ O2_SIG_DXLEAF, offsetof(struct o2_dx_leaf, dl_check) },
		{ O2_SIG_XATTR, offsetof(struct o2_xattr_block, xb_check) },
		{ O2_SIG_REFCNT, offsetof(struct o2_refcount_block, rf_check) },
	};
	const size_t trl = bs - sizeof(struct o2_dir_trailer);

	for (size_t off = 0; off + bs <= len; off += bs) {
		uint8_t *b = mem + off;

		if (!d->dirty[off >> FZ_REGION_BITS])
			continue;
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
			if (memcmp(b, sigs[i].sig, strlen(sigs[i].sig)) == 0) {
				o2_blockcheck_compute(b, bs, b + sigs[i].off);
				goto next;
			}
		}
		if (memcmp(b + trl + offsetof(struct o2_dir_trailer, db_signature), O2_SIG_DIRTRL,
			   strlen(O2_SIG_DIRTRL)) == 0)
			o2_blockcheck_compute(b, bs, b + trl + offsetof(struct o2_dir_trailer, db_check));
next:;
	}
}

/* ---- exercising an open volume ---- */

struct ex {
	struct o2_fs *fs;
	uint64_t nblocks;
	unsigned block_bits, bpc_bits;
	unsigned budget;	/* inodes left to exercise */
	uint64_t dirs[64];	/* directories still to list */
	unsigned ndirs;
	uint8_t *buf;
};

#define EX_READ_CHUNK (64u << 10)
#define EX_READ_MAX (64u << 10) /* bytes of one file read at most */

static const int allowed_errors[] = { EUCLEAN, ENOENT, ERANGE, EINVAL, ENOTDIR, EIO,
				      ENODATA, EOPNOTSUPP, ENAMETOOLONG, ENOSPC, EFBIG };

/* The API's promise: success or a known -errno; -EUCLEAN with a message naming a block. */
static void conv(struct ex *x, long r, const char *what)
{
	if (r >= 0)
		return;
	for (size_t i = 0; i < sizeof(allowed_errors) / sizeof(allowed_errors[0]); i++) {
		if (r == -allowed_errors[i]) {
			if (r == -EUCLEAN) {
				const char *m = o2_fs_error(x->fs);

				if (!m || !strstr(m, "block "))
					fz_fail("%s: -EUCLEAN whose message names no block: \"%s\"", what,
						m ? m : "(null)");
			}
			return;
		}
	}
	fz_fail("%s returned %ld (%s): not an error it may give; message: %s", what, r,
		strerror((int)-r), o2_fs_error(x->fs));
}

static int count_extent_cb(const struct o2_extent *e, uint64_t eb, void *arg)
{
	struct ex *x = arg;

	if (e && e->blkno && e->blkno >= x->nblocks)
		fz_fail("o2_inode_walk_extents: extent at block %llu outside the device",
			(unsigned long long)e->blkno);
	if (!e && eb >= x->nblocks)
		fz_fail("o2_inode_walk_extents: extent block %llu outside the device",
			(unsigned long long)eb);
	return 0;
}

static int group_cb(unsigned chain, const struct o2_group_info *g, void *arg)
{
	struct ex *x = arg;

	if (g->blkno >= x->nblocks)
		fz_fail("o2_chain_walk: group %llu outside the device", (unsigned long long)g->blkno);
	if (g->free_bits > g->bits)
		fz_fail("o2_chain_walk: group %llu with %u free of %u bits",
			(unsigned long long)g->blkno, g->free_bits, g->bits);
	return 0;
}

struct dir_collect {
	struct ex *x;
	unsigned n, nkids;
	uint64_t ino[32];
	char names[4][256];
	unsigned nnames;
};

static int dirent_cb(const struct o2_dirent *de, void *arg)
{
	struct dir_collect *c = arg;

	if (de->name_len == 0 || de->name[de->name_len] != '\0')
		fz_fail("o2_dir_iterate: an empty or unterminated name");
	if (de->ino >= c->x->nblocks)
		fz_fail("o2_dir_iterate: entry \"%s\" names inode %llu outside the device", de->name,
			(unsigned long long)de->ino);
	if (de->type > O2_DT_LNK)
		fz_fail("o2_dir_iterate: entry type %u", de->type);
	if (++c->n > 20000)
		return 1;
	bool dot = (de->name_len == 1 && de->name[0] == '.') ||
		   (de->name_len == 2 && de->name[0] == '.' && de->name[1] == '.');
	if (dot)
		return 0;
	if (c->nnames < 4)
		memcpy(c->names[c->nnames++], de->name, (size_t)de->name_len + 1);
	if (c->nkids < 32)
		c->ino[c->nkids++] = de->ino;
	return 0;
}

static void exercise_inode(struct ex *x, uint64_t blkno)
{
	struct o2_inode *ino = NULL;
	int r;

	if (!x->budget)
		return;
	x->budget--;
	r = o2_inode_get(x->fs, blkno, &ino);
	conv(x, r, "o2_inode_get");
	if (r < 0)
		return;
	const struct o2_inode_info *in = o2_inode_info(ino);
	if (in->blkno != blkno)
		fz_fail("o2_inode_get(%llu) gave inode %llu", (unsigned long long)blkno,
			(unsigned long long)in->blkno);

	switch (in->kind) {
	case O2_ID2_EXTENTS: {
		struct o2_extent e;

		for (unsigned i = 0; i <= in->list_next_free; i++) {
			r = o2_inode_extent_rec(ino, i, &e);
			if (r != (i < in->list_next_free ? 0 : -ERANGE))
				fz_fail("o2_inode_extent_rec(%u of %u) gave %d", i, in->list_next_free, r);
		}
		r = o2_inode_walk_extents(x->fs, ino, count_extent_cb, x);
		conv(x, r, "o2_inode_walk_extents");
		static const uint32_t probes[] = { 0, 1, 7, 1000, UINT32_MAX / 2, UINT32_MAX };
		for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
			r = o2_inode_map(x->fs, ino, probes[i], &e);
			conv(x, r, "o2_inode_map");
			if (r == 0 && (e.cpos != probes[i] || e.clusters < 1))
				fz_fail("o2_inode_map(%u) gave cpos %u, %u clusters", probes[i], e.cpos,
					e.clusters);
			if (r == 0 && e.blkno &&
			    (e.blkno >= x->nblocks ||
			     ((uint64_t)e.clusters << x->bpc_bits) > x->nblocks - e.blkno))
				fz_fail("o2_inode_map(%llu, %u) gave blocks %llu + %u clusters, past the "
					"device",
					(unsigned long long)blkno, probes[i], (unsigned long long)e.blkno,
					e.clusters);
		}
	}
		/* fall through */
	case O2_ID2_INLINE:
	case O2_ID2_FAST_SYMLINK: {
		uint64_t end = in->size < EX_READ_MAX ? in->size : EX_READ_MAX;

		for (uint64_t off = 0; off < end;) {
			ssize_t n = o2_inode_read(x->fs, ino, off, x->buf, EX_READ_CHUNK);
			conv(x, n, "o2_inode_read");
			if (n <= 0)
				break;
			if ((size_t)n > EX_READ_CHUNK)
				fz_fail("o2_inode_read returned %zd > %u", n, EX_READ_CHUNK);
			off += (uint64_t)n;
		}
		if (o2_inode_read(x->fs, ino, in->size, x->buf, 16) != 0)
			fz_fail("o2_inode_read at i_size %llu returned data",
				(unsigned long long)in->size);
		if (o2_inode_read(x->fs, ino, UINT64_MAX, x->buf, 16) != 0)
			fz_fail("o2_inode_read at UINT64_MAX returned data");
		break;
	}
	case O2_ID2_CHAIN: {
		struct o2_chain_rec_info cr;

		for (unsigned i = 0; i <= in->chain_next_free; i++) {
			r = o2_inode_chain_rec(ino, i, &cr);
			if (r != (i < in->chain_next_free ? 0 : -ERANGE))
				fz_fail("o2_inode_chain_rec(%u of %u) gave %d", i, in->chain_next_free, r);
		}
		r = o2_chain_walk(x->fs, ino, group_cb, x);
		conv(x, r, "o2_chain_walk");
		break;
	}
	case O2_ID2_TRUNCATE_LOG: {
		struct o2_trunc_rec tr;

		for (unsigned i = 0; i <= in->tl_used; i++) {
			r = o2_inode_truncate_rec(ino, i, &tr);
			if (r != (i < in->tl_used ? 0 : -ERANGE))
				fz_fail("o2_inode_truncate_rec(%u of %u) gave %d", i, in->tl_used, r);
		}
		break;
	}
	case O2_ID2_LOCAL_ALLOC:
		if (o2_inode_local_alloc_used(ino) > (unsigned)in->la_size * 8)
			fz_fail("local alloc: %u bits used of %u", o2_inode_local_alloc_used(ino),
				(unsigned)in->la_size * 8);
		break;
	default:
		break;
	}

	if (S_ISDIR(in->mode)) {
		struct dir_collect *c = calloc(1, sizeof(*c));
		struct o2_dirent de;

		if (!c)
			fz_fail("out of memory");
		c->x = x;
		r = o2_dir_iterate(x->fs, ino, dirent_cb, c);
		conv(x, r, "o2_dir_iterate");
		for (unsigned i = 0; i < c->nnames; i++) {
			r = o2_dir_lookup(x->fs, ino, c->names[i], strlen(c->names[i]), &de);
			conv(x, r, "o2_dir_lookup");
		}
		static const char *names[] = { ".", "..", "lost+found", "no-such-name" };
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			r = o2_dir_lookup(x->fs, ino, names[i], strlen(names[i]), &de);
			conv(x, r, "o2_dir_lookup");
		}
		char longname[256];
		memset(longname, 'y', sizeof(longname));
		r = o2_dir_lookup(x->fs, ino, longname, 255, &de);
		conv(x, r, "o2_dir_lookup(255 bytes)");
		if (o2_dir_lookup(x->fs, ino, longname, 256, &de) == 0)
			fz_fail("o2_dir_lookup found a 256-byte name");
		for (unsigned i = 0; i < c->nkids; i++)
			if (x->ndirs < 64)
				x->dirs[x->ndirs++] = c->ino[i];
		free(c);
	}
	if (S_ISLNK(in->mode)) {
		char target[4096];

		r = o2_inode_readlink(x->fs, ino, target, sizeof(target));
		conv(x, r, "o2_inode_readlink");
		if (r >= 0 && !memchr(target, '\0', sizeof(target)))
			fz_fail("o2_inode_readlink: target not terminated");
	}
	o2_inode_unref(ino);
}

int fz_exercise(struct o2_fs *fs)
{
	const struct o2_super_info *si = o2_fs_super(fs);
	struct o2_walk_stats st = { 0 };
	struct ex x = { .fs = fs, .budget = 256 };
	int walk, r;

	x.nblocks = si->device_blocks;
	x.block_bits = si->block_bits;
	x.bpc_bits = si->cluster_bits - si->block_bits;
	x.buf = malloc(EX_READ_CHUNK);
	if (!x.buf)
		fz_fail("out of memory");

	walk = o2_fs_walk(fs, &st);
	conv(&x, walk, "o2_fs_walk");
	fz_debug("walk: %d %s (%llu inodes, %llu dirs, %llu dirents, %llu extent blocks)", walk,
		 walk < 0 ? o2_fs_error(fs) : "", (unsigned long long)st.inodes,
		 (unsigned long long)st.dirs, (unsigned long long)st.dirents,
		 (unsigned long long)st.extent_blocks);

	static const char *paths[] = { "/", "//", "/lost+found", "/lost+found/", "//global_bitmap",
				       "//journal:0000", "//orphan_dir:0000/x", "/a/b/../c",
				       "/lost+found/../lost+found/.", "//slot_map/x", "" };
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		uint64_t b = 0;

		r = o2_path_lookup(fs, paths[i], &b);
		conv(&x, r, "o2_path_lookup");
		if (r == 0 && b >= x.nblocks)
			fz_fail("o2_path_lookup(%s) gave block %llu outside the device", paths[i],
				(unsigned long long)b);
	}

	/* the namespace, breadth first from / and // (bounded by the budget) */
	x.dirs[x.ndirs++] = si->root_blkno;
	x.dirs[x.ndirs++] = si->system_dir_blkno;
	for (unsigned i = 0; i < x.ndirs && x.budget; i++)
		exercise_inode(&x, x.dirs[i]);

	/* every system file, whether the directories name it or not */
	x.budget += 64;
	for (int t = 0; t < O2_SYS_COUNT; t++) {
		unsigned ns = o2_sysfile_is_per_slot((enum o2_sysfile)t) ? si->max_slots : 1;
		for (unsigned s = 0; s < ns && s < 3; s++) {
			uint64_t b = 0;

			r = o2_sysfile_lookup(fs, (enum o2_sysfile)t, s, &b);
			conv(&x, r, "o2_sysfile_lookup");
			if (r == 0)
				exercise_inode(&x, b);
		}
	}

	struct o2_slotmap_info *sm = malloc(sizeof(*sm));
	if (!sm)
		fz_fail("out of memory");
	r = o2_slotmap_read(fs, sm);
	conv(&x, r, "o2_slotmap_read");
	if (r == 0 && sm->nslots > 255)
		fz_fail("o2_slotmap_read: %u slots", sm->nslots);
	free(sm);

	for (unsigned s = 0; s <= si->max_slots && s < 4; s++) {
		struct o2_journal_info j;

		r = o2_journal_info(fs, s, &j);
		conv(&x, r, "o2_journal_info");
	}

	struct o2_statfs sf;
	r = o2_statfs(fs, &sf);
	conv(&x, r, "o2_statfs");

	uint32_t major, minor;
	o2_dx_hash(fs, "lost+found", 10, &major, &minor);
	free(x.buf);
	return walk;
}

int fz_write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	const uint8_t *p = data;

	if (fd < 0)
		return -errno;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		p += n;
		len -= (size_t)n;
	}
	return close(fd) < 0 ? -errno : 0;
}

/* A failed open must give an error it may give, with a message (naming a block for -EUCLEAN). */
void fz_check_open_failure(int r, const char *err, const char *what)
{
	static const int ok[] = { EUCLEAN, ENODATA, EOPNOTSUPP, EIO, EINVAL, ENOENT,
				  ENOTDIR, ERANGE, ENOSPC, ENAMETOOLONG };

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (r == -ok[i]) {
			if (!err[0])
				fz_fail("%s failed (%d) with an empty message", what, r);
			if (r == -EUCLEAN && !strstr(err, "block "))
				fz_fail("%s gave -EUCLEAN; message names no block: \"%s\"", what, err);
			return;
		}
	fz_fail("%s returned %d: not an error it may give; message: %s", what, r, err);
}
