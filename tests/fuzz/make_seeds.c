/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_make_seeds: writes the seed corpora of the fuzz targets from
 * fscore's own output (tests/fuzz/make-corpus.sh adds volumes made by the
 * real mkfs.ocfs2 through "encode").
 *
 *   fuzz_make_seeds generate CORPUS_DIR
 *       CORPUS_DIR/fuzz_open_walk/fscore-*: fz_volume()s, fresh and after a
 *         workload (files, sparse files with extent blocks, symlinks, an
 *         indexed directory), some with a dirty journal (a crash copy);
 *       CORPUS_DIR/fuzz_replay/fscore-*: the slot-0 journal of a crash copy
 *         taken after a committed workload, cut after its last non-zero block;
 *       CORPUS_DIR/fuzz_ops/seed-*: operation sequences;
 *       CORPUS_DIR/fuzz_locktab/seed-*: lock traffic in a simulated group.
 *   fuzz_make_seeds locktab CORPUS_DIR
 *       only the fuzz_locktab seeds.
 *   fuzz_make_seeds encode IMAGE OUT [FLAGS]
 *       IMAGE (at most 8 MiB) in the sparse format of fuzz_open_walk.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"
#include "fuzz_locktab.h"

static void die(const char *what, int r)
{
	fprintf(stderr, "fuzz_make_seeds: %s: %d (%s)\n", what, r, strerror(r < 0 ? -r : r));
	exit(1);
}

static void put(const char *dir, const char *name, const void *data, size_t len)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int r = fz_write_file(path, data, len);
	if (r < 0)
		die(path, r);
	printf("%s: %zu bytes\n", path, len);
}

static void put_image(const char *dir, const char *name, const uint8_t *mem, size_t len,
		      uint8_t flags)
{
	size_t n;
	uint8_t *enc = fz_image_encode(mem, len, flags, &n);

	put(dir, name, enc, n);
	free(enc);
}

/* ---- a workload on a fresh volume ---- */

static uint64_t now;

static struct o2_fs *open_rw(struct o2_blockdev *dev)
{
	struct o2_open_opts o = { .flags = O2_OPEN_RDWR, .slot = 0 };
	struct o2_fs *fs;
	char err[512];

	o.now_ns = fz_clock;
	o.clock_arg = &now;
	int r = o2_fs_open_opts(dev, &o, &fs, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "%s\n", err);
		die("o2_fs_open_opts", r);
	}
	return fs;
}

static void must(struct o2_fs *fs, long r, const char *what)
{
	if (r < 0) {
		fprintf(stderr, "%s\n", o2_fs_error(fs));
		die(what, (int)r);
	}
}

/*
 * Files, directories, a symlink, a sparse file with enough extents for an
 * extent block, a directory with enough entries to need blocks (and an
 * index where the volume has indexed-dirs), a removed file (a revoke).
 */
enum size { TINY, SMALL, BIG };

static void workload(struct o2_fs *fs, enum size size)
{
	const bool big = size == BIG;
	const struct o2_new_inode reg = { .mode = S_IFREG | 0644 };
	const struct o2_new_inode dirm = { .mode = S_IFDIR | 0755 };
	uint64_t root = o2_fs_super(fs)->root_blkno, d, f, g, l;
	uint8_t buf[8192];
	char name[64];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 31 + 7);
	must(fs, o2_mkdir(fs, root, "dir", 3, &dirm, &d), "mkdir");
	must(fs, o2_create(fs, root, "small", 5, &reg, &f), "create");
	must(fs, o2_write(fs, f, 0, "hello, ocfs2\n", 13), "write");
	must(fs, o2_create(fs, d, "sparse", 6, &reg, &g), "create");
	for (unsigned i = 0; i < (big ? 24u : 6u); i++)
		must(fs, o2_write(fs, g, (uint64_t)i * 3 * 4096 + 100, buf, 16), "write");
	must(fs, o2_symlink(fs, d, "link", 4, "../small", &reg, &l), "symlink");
	must(fs, o2_link(fs, f, d, "hard", 4), "link");
	must(fs, o2_fs_sync(fs), "sync");
	if (size == TINY)
		return;
	for (unsigned i = 0; i < (big ? 24u : 12u); i++) {
		uint64_t x;
		size_t n = (size_t)snprintf(name, sizeof(name), "entry-with-a-longish-name-%u", i);
		must(fs, o2_create(fs, d, name, n, &reg, &x), "create");
	}
	must(fs, o2_unlink(fs, d, "entry-with-a-longish-name-3", 27), "unlink");
	must(fs, o2_fallocate(fs, f, 0, 8192, 8192), "fallocate");
	must(fs, o2_rename(fs, root, "small", 5, d, "renamed", 7, 0), "rename");
	must(fs, o2_fs_sync(fs), "sync");
}

static struct o2_blockdev *copy_of(const struct fz_volume *v)
{
	struct o2_blockdev *dev;
	int r = o2_blockdev_new_memory_from(v->data, v->size, v->size, &dev);

	if (r < 0)
		die("memory device", r);
	return dev;
}

static void ops_seeds(const char *dir);
static void locktab_seeds(const char *top);

static const char *const cfg_names[FZ_CFG_COUNT] = { "512", "4k", "512-ecc", "1k-compat" };

static void generate(const char *top)
{
	char walk_dir[4096], replay_dir[4096], ops_dir[4096], name[128];

	snprintf(walk_dir, sizeof(walk_dir), "%s/fuzz_open_walk", top);
	snprintf(replay_dir, sizeof(replay_dir), "%s/fuzz_replay", top);
	snprintf(ops_dir, sizeof(ops_dir), "%s/fuzz_ops", top);
	mkdir(top, 0755);
	mkdir(walk_dir, 0755);
	mkdir(replay_dir, 0755);
	mkdir(ops_dir, 0755);

	for (int c = 0; c < FZ_CFG_COUNT; c++) {
		const struct fz_volume *v = fz_volume((enum fz_config)c);
		const unsigned bs = v->info.block_size;
		const bool ecc = v->info.features.incompat & O2_FEATURE_INCOMPAT_META_ECC;

		/* fresh */
		snprintf(name, sizeof(name), "fscore-%s-fresh", cfg_names[c]);
		put_image(walk_dir, name, v->data, v->size, ecc ? FZ_IMG_FIX_CHECKS : 0);

		/* after a workload, closed cleanly */
		struct o2_blockdev *dev = copy_of(v);
		struct o2_fs *fs = open_rw(dev);
		workload(fs, c == FZ_CFG_512 ? BIG : SMALL);
		must(fs, o2_fs_close(fs), "close");
		/* a clean journal: what its log held no longer matters */
		memset(o2_blockdev_memory_data(dev) + (v->journal_blkno + 1) * bs, 0,
		       (size_t)(v->journal_blocks - 1) * bs);
		snprintf(name, sizeof(name), "fscore-%s-files", cfg_names[c]);
		put_image(walk_dir, name, o2_blockdev_memory_data(dev), v->size, ecc ? FZ_IMG_FIX_CHECKS : 0);
		o2_blockdev_free(dev);

		/* a crash after committed transactions: dirty journal */
		dev = copy_of(v);
		fs = open_rw(dev);
		workload(fs, bs >= 4096 ? TINY : SMALL);
		uint8_t *crash = malloc(v->size);
		if (!crash)
			die("malloc", -ENOMEM);
		memcpy(crash, o2_blockdev_memory_data(dev), v->size);
		must(fs, o2_fs_close(fs), "close");
		o2_blockdev_free(dev);
		if (c == FZ_CFG_512 || c == FZ_CFG_512_ECC) {
			snprintf(name, sizeof(name), "fscore-%s-crash-rdwr", cfg_names[c]);
			put_image(walk_dir, name, crash, v->size,
				  (uint8_t)(FZ_IMG_RDWR | (ecc ? FZ_IMG_FIX_CHECKS : 0)));
		}

		/* its journal, for fuzz_replay: cut after the last non-zero block */
		const uint8_t *log = crash + v->journal_blkno * bs;
		size_t len = (size_t)v->journal_blocks * bs;
		while (len >= bs) {
			bool zero = true;
			for (size_t i = len - bs; i < len && zero; i++)
				zero = log[i] == 0;
			if (!zero)
				break;
			len -= bs;
		}
		uint8_t *seed = malloc(len + 1);
		if (!seed)
			die("malloc", -ENOMEM);
		seed[0] = (uint8_t)c;
		memcpy(seed + 1, log, len);
		snprintf(name, sizeof(name), "fscore-%s-journal", cfg_names[c]);
		put(replay_dir, name, seed, len + 1);
		/* and the journal superblock alone (1 KiB at least): a log with nothing in it */
		size_t sbl = bs < 1024 ? 1024 : bs;
		seed = realloc(seed, sbl + 1);
		if (!seed)
			die("malloc", -ENOMEM);
		seed[0] = (uint8_t)c;
		memcpy(seed + 1, log, sbl);
		snprintf(name, sizeof(name), "fscore-%s-empty", cfg_names[c]);
		put(replay_dir, name, seed, sbl + 1);
		free(seed);
		free(crash);
	}

	ops_seeds(ops_dir);
	locktab_seeds(top);
}

/*
 * Operation sequences for fuzz_ops, in the layout its decoder reads.
 * Inodes and directories are indices into its table: 0 is /, 1 lost+found,
 * then what creates made, in order.  Names: a byte k < 224 gives
 * "fdsl"[k & 3] followed by (k >> 2) % 16.
 */
struct seq {
	uint8_t b[1024];
	size_t n;
};

static void emit(struct seq *q, unsigned n, ...)
{
	va_list ap;

	va_start(ap, n);
	for (unsigned i = 0; i < n; i++)
		q->b[q->n++] = (uint8_t)va_arg(ap, unsigned);
	va_end(ap);
}

enum { S_CREATE, S_MKDIR, S_WRITE, S_TRUNCATE, S_RENAME, S_UNLINK, S_RMDIR, S_LINK, S_SYMLINK,
       S_FALLOCATE, S_SETATTR, S_REF, S_MANY, S_SYNC, S_TICK, S_REMOUNT, S_CRASH, S_WRITE2,
       S_SETXATTR, S_RMXATTR };

/* off: a 16-bit value v and a scale selector (0: v, 3: v*4, 5: v*512, 6: v<<20, 7: v<<34) */
static void q_create(struct seq *q, unsigned dir, unsigned name, unsigned type)
{
	emit(q, 4, S_CREATE, dir, name, type);
}
static void q_mkdir(struct seq *q, unsigned dir, unsigned name)
{
	emit(q, 3, S_MKDIR, dir, name);
}
static void q_write(struct seq *q, unsigned ino, unsigned v, unsigned sel, unsigned len,
		    unsigned pat)
{
	emit(q, 8, S_WRITE, ino, v & 255, v >> 8, sel, len & 255, len >> 8, pat);
}
static void q_truncate(struct seq *q, unsigned ino, unsigned v, unsigned sel)
{
	emit(q, 5, S_TRUNCATE, ino, v & 255, v >> 8, sel);
}
static void q_rename(struct seq *q, unsigned d1, unsigned n1, unsigned d2, unsigned n2,
		     unsigned flags)
{
	emit(q, 6, S_RENAME, d1, n1, d2, n2, flags);
}
static void q_name_op(struct seq *q, unsigned op, unsigned dir, unsigned name)
{
	emit(q, 3, op, dir, name);
}
static void q_link(struct seq *q, unsigned ino, unsigned dir, unsigned name)
{
	emit(q, 4, S_LINK, ino, dir, name);
}
static void q_symlink(struct seq *q, unsigned dir, unsigned name, unsigned tlen)
{
	emit(q, 5, S_SYMLINK, dir, name, tlen & 255, tlen >> 8);
}
static void q_fallocate(struct seq *q, unsigned ino, unsigned keep, unsigned v, unsigned sel,
			unsigned len, unsigned unit1)
{
	emit(q, 8, S_FALLOCATE, ino, keep, v & 255, v >> 8, sel, len & 255, len >> 8);
	emit(q, 1, unit1);
}
static void q_setattr(struct seq *q, unsigned ino, unsigned v, unsigned sel, unsigned mask)
{
	emit(q, 6, S_SETATTR, ino, v & 255, v >> 8, sel, mask);
	emit(q, 12, 0xa4, 0x01, 5, 6, 1, 2, 3, 4, 5, 6, 7, 8); /* mode, uid, gid, atime */
}
static void q_ref_open(struct seq *q, unsigned ino)
{
	emit(q, 3, S_REF, 0, ino);
}
static void q_ref_close(struct seq *q)
{
	emit(q, 2, S_REF, 1);
}
static void q_many(struct seq *q, unsigned dir, unsigned count, unsigned base)
{
	emit(q, 4, S_MANY, dir, count, base);
}

/*
 * Extended attributes.  how: bits 0-2 the type (0 user, 2 and 3 the POSIX
 * ACLs, 4 trusted, 5 security), bits 3-4 the flags (1 create, 2 replace).
 * name: k < 200 picks from fuzz_ops' pool ("a", "b", "mime_type", ...; the
 * ACLs' empty name), 200..254 takes a length byte and that many bytes.
 * The value: size selector 4 and a 16-bit size, a pattern, no literal bytes.
 */
static void q_setxattr(struct seq *q, unsigned ino, unsigned how, unsigned name, unsigned size,
		       unsigned pat)
{
	emit(q, 4, S_SETXATTR, ino, how, name);
	emit(q, 5, 4, size & 255, size >> 8, pat, 0);
}
static void q_rmxattr(struct seq *q, unsigned ino, unsigned how, unsigned name)
{
	emit(q, 4, S_RMXATTR, ino, how, name);
}

static void ops_seeds(const char *dir)
{
	struct seq q;

	/* every operation once, on 512-byte blocks */
	memset(&q, 0, sizeof(q));
	emit(&q, 1, 0x00);
	q_create(&q, 0, 0, 0);		/* /f0: ino 2 */
	q_write(&q, 2, 0, 0, 4096, 0x41);
	q_mkdir(&q, 0, 1);		/* /d0: ino 3 */
	q_rename(&q, 0, 0, 3, 4, 0);	/* /f0 -> /d0/f1 */
	emit(&q, 1, S_SYNC);
	q_write(&q, 2, 0x1234, 0, 0x2000, 0x77);
	q_truncate(&q, 2, 2048, 0);
	q_symlink(&q, 0, 2, 64);	/* /s0: ino 4 */
	q_link(&q, 2, 0, 8);		/* /f2 */
	q_name_op(&q, S_UNLINK, 0, 8);
	emit(&q, 1, S_CRASH);
	emit(&q, 1, S_REMOUNT);
	q_many(&q, 0, 60, 7);
	q_fallocate(&q, 2, 0, 4096, 0, 64, 0);
	q_setattr(&q, 2, 100, 0, 0x3f);
	q_ref_open(&q, 2);
	q_name_op(&q, S_UNLINK, 3, 4);	/* /d0/f1, open: an orphan */
	q_name_op(&q, S_RMDIR, 0, 1);
	emit(&q, 2, S_TICK, 200);
	put(dir, "seed-basic", q.b, q.n);

	/* a big sparse file on 4K blocks */
	memset(&q, 0, sizeof(q));
	emit(&q, 1, 0x01);
	q_create(&q, 0, 0, 0);
	for (unsigned i = 0; i < 12; i++)
		q_write(&q, 2, 0x100 * i + 3, 5, 3000, i);
	q_write(&q, 2, 3, 6, 0xffff, 9);
	q_truncate(&q, 2, 0x900, 5);
	emit(&q, 1, S_REMOUNT);
	q_fallocate(&q, 2, 1, 0x10, 5, 0x800, 1);
	q_truncate(&q, 2, 0, 0);
	put(dir, "seed-bigfile", q.b, q.n);

	/* directories on a metaecc volume with a tiny cache */
	memset(&q, 0, sizeof(q));
	emit(&q, 1, 0x82);
	q_mkdir(&q, 0, 1);		/* 2 */
	q_mkdir(&q, 0, 5);		/* 3 */
	q_mkdir(&q, 2, 9);		/* 4 */
	q_many(&q, 2, 120, 1);
	q_many(&q, 3, 120, 2);
	q_rename(&q, 2, 9, 3, 13, 0);
	q_create(&q, 0, 4, 0);
	q_rename(&q, 0, 5, 0, 4, 3);	/* exchange a dir and a file */
	emit(&q, 3, S_CRASH, S_SYNC, S_REMOUNT);
	q_name_op(&q, S_RMDIR, 2, 9);
	put(dir, "seed-dirs", q.b, q.n);

	/* max-compat on 1K blocks: no inline data, no indexed dirs */
	memset(&q, 0, sizeof(q));
	emit(&q, 1, 0x03);
	q_create(&q, 0, 0, 0);
	q_create(&q, 0, 4, 3);
	q_create(&q, 0, 8, 4);
	q_write(&q, 2, 16, 0, 256, 9);
	q_write(&q, 2, 0x80, 5, 5000, 10);
	q_symlink(&q, 0, 2, 3000);
	q_rename(&q, 0, 0, 0, 4, 0);	/* replaces the FIFO */
	q_ref_open(&q, 2);
	q_ref_close(&q);
	emit(&q, 1, S_CRASH);
	q_setattr(&q, 2, 0x3fff, 3, 0x08);
	q_many(&q, 1, 100, 9);
	put(dir, "seed-compat", q.b, q.n);

	/* extended attributes on 4K blocks: in the inode, in a block, values in clusters */
	memset(&q, 0, sizeof(q));
	emit(&q, 1, 0x01);
	q_create(&q, 0, 0, 0);		/* /f0: ino 2 */
	q_mkdir(&q, 0, 1);		/* /d0: ino 3 */
	q_setxattr(&q, 2, 0x08, 0, 20, 1);	/* user.a, create: in the inode */
	q_setxattr(&q, 2, 0x00, 1, 5000, 2);	/* user.b: two clusters */
	q_setxattr(&q, 2, 0x10, 1, 200, 3);	/* replaced: one cluster */
	q_setxattr(&q, 2, 0x02, 0, 60, 4);	/* the access ACL */
	q_setxattr(&q, 3, 0x03, 0, 40, 5);	/* a directory's default ACL */
	emit(&q, 6, S_SETXATTR, 2, 0x04, 210, 5, 'h');	/* trusted., a name with high bytes */
	emit(&q, 4, 0xe9, 0xff, 0x80, 'x');
	emit(&q, 5, 4, 90, 0, 6, 0);
	for (unsigned i = 0; i < 6; i++)	/* more than the inode holds: the block; the
						 * last name is empty: -EINVAL */
		q_setxattr(&q, 2, 0x05, 2 + i, 70 + i, 7 + i);
	q_write(&q, 2, 0, 0, 9000, 0x31);	/* inline data to extents, the xattrs kept */
	q_rmxattr(&q, 2, 0x00, 0);		/* user.a */
	q_rmxattr(&q, 2, 0x00, 0);		/* again: -ENODATA */
	emit(&q, 1, S_REMOUNT);
	q_setxattr(&q, 3, 0x00, 6, 65535, 13);	/* a 64 KiB value on the directory */
	q_link(&q, 2, 3, 8);			/* /d0/f2 */
	q_name_op(&q, S_UNLINK, 0, 0);		/* /f0: still linked */
	emit(&q, 1, S_CRASH);
	q_name_op(&q, S_UNLINK, 3, 8);		/* freed with its xattrs */
	put(dir, "seed-xattr", q.b, q.n);

	/* the same on 512-byte blocks with metaecc: no room in the inode, only the block */
	memset(&q, 0, sizeof(q));
	emit(&q, 1, 0x82);
	q_create(&q, 0, 0, 0);		/* ino 2 */
	q_symlink(&q, 0, 2, 20);	/* ino 3: a fast symlink */
	q_setxattr(&q, 2, 0x00, 0, 80, 1);
	q_setxattr(&q, 2, 0x00, 1, 81, 2);
	q_setxattr(&q, 3, 0x05, 3, 12, 3);
	q_setxattr(&q, 2, 0x00, 6, 80, 4);	/* a long name: the block nearly full */
	q_setxattr(&q, 2, 0x10, 1, 3, 5);	/* a value from clusters back to the block */
	q_rmxattr(&q, 2, 0x00, 0);
	q_rmxattr(&q, 2, 0x00, 1);		/* the block empties and goes */
	q_setxattr(&q, 2, 0x00, 4, 30000, 6);
	emit(&q, 2, S_SYNC, S_REMOUNT);
	q_name_op(&q, S_UNLINK, 0, 0);
	q_name_op(&q, S_UNLINK, 0, 2);
	put(dir, "seed-xattr-512", q.b, q.n);
}

/*
 * Lock traffic for fuzz_locktab (format in fuzz_locktab.h).  Slots 0 and 1
 * join together (JOIN 0x08), slot 2 alone later (JOIN 0x12), so that it
 * needs a snapshot.  Names 0..4; modes NL 0, PR 1, EX 2; DOWN mode 2 is
 * UNLOCK; 0x4 on a LOCK mode is NOQUEUE, 0x8 RECOVERY; 0x4 on a DOWN mode
 * carries a value block.
 */
static void locktab_seeds(const char *top)
{
	static const uint8_t grants[] = {
		LT_JOIN, 0x08,
		LT_LOCK, 0, 0, 1, LT_LOCK, 1, 0, 1, LT_DELIVER, 7,
		LT_LOCK, 1, 0, 2, LT_DELIVER, 7,	/* PR -> EX waits: slot 0 is told */
		LT_REACT, 0, LT_DELIVER, 7,		/* slot 0 lowers to NL: granted */
		LT_LOCK, 0, 0, 1 | 4, LT_DELIVER, 7,	/* a try-lock refused */
		LT_DOWN, 1, 0, 1 | 4, 0x5a, LT_DELIVER, 7, /* EX -> PR with a value block */
		LT_LOCK, 0, 0, 1, LT_DELIVER, 7,	/* granted with it */
		LT_LOCK, 0, 1, 2, LT_LOCK, 1, 1, 2, LT_DELIVER, 7, LT_CANCEL, 1, 1, LT_DELIVER, 7,
		LT_DOWN, 0, 1, 2, LT_DOWN, 1, 0, 2, LT_DOWN, 0, 0, 2, LT_DELIVER, 7,
	};
	static const uint8_t join[] = {
		LT_JOIN, 0x08,
		LT_LOCK, 0, 2, 1, LT_LOCK, 1, 2, 1, LT_LOCK, 0, 3, 2, LT_DELIVER, 7,
		LT_LOCK, 1, 3, 2, LT_DELIVER, 7,	/* waits */
		LT_JOIN, 0x12,				/* slot 2 joins: a snapshot is mailed */
		LT_LOCK, 2, 2, 1, LT_LOCK, 2, 3, 1,	/* it asks before it has its state */
		LT_LOCK, 0, 4, 2, LT_DELIVER, 1, LT_REACT, 0, LT_DELIVER, 7, LT_DELIVER, 7,
		LT_REACT, 1, LT_DELIVER, 7, LT_JOIN, 0x1b, LT_LEAVE, 0, 2, 0, LT_DELIVER, 7,
	};
	static const uint8_t failure[] = {
		LT_JOIN, 0x08,
		LT_LOCK, 0, 3, 2, LT_LOCK, 0, 2, 1, LT_LOCK, 1, 2, 1, LT_DELIVER, 7,
		LT_DOWN, 0, 3, 1 | 4, 0x11, LT_LOCK, 0, 3, 2, LT_DELIVER, 7,
		LT_LOCK, 1, 3, 2, LT_DELIVER, 7,	/* waits for slot 0's EX */
		LT_LEAVE, 0, 1, 0,			/* slot 0's node goes down: frozen */
		LT_JOIN, 0x12, LT_DELIVER, 7,		/* slot 2 gets its state */
		LT_LOCK, 2, 2, 2 | 8, LT_DELIVER, 7,	/* recovery before the fencing: waits */
		LT_RECOVERED, 1, 1, LT_DELIVER, 7,	/* refused: not fenced */
		LT_FENCED, 1, 1, LT_DELIVER, 7,		/* node 1 fenced: the recovery lock passes */
		LT_REACT, 1, LT_DELIVER, 7,
		LT_RECOVERED, 2, 1, LT_DELIVER, 7,	/* slot 1 gets lock 3; its value block is gone */
		LT_JOIN, 0x00, LT_LEAVE, 2, 2, 1, LT_FENCED, 1, 5, LT_DELIVER, 7,
	};
	static const uint8_t hostile[] = {
		LT_JOIN, 0x08, LT_LOCK, 0, 0, 2, LT_DELIVER, 7,
		LT_RAW, 0, 24, 0x4f, 0x32, 0x4c, 0x54, 1, 1, 0, 0, 24, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0,
		LT_RAW, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8,
		LT_BADCONF, 0, LT_BADCONF, 1, LT_BADCONF, 2, LT_BADCONF, 3,
		LT_LOCK, 1, 0, 1, LT_MUTATE, 5, 0, 0x01, LT_DELIVER, 7,
		LT_JOIN, 0x12, LT_MUTATE, 40, 0, 0xff, LT_DELIVER, 7, /* a damaged snapshot */
		LT_JOIN, 0x12, LT_DELIVER, 7,
	};
	static const uint8_t partition[] = {
		LT_JOIN, 0x08, LT_JOIN, 0x1a,		/* slots 0, 1, then 2 and 3 */
		LT_DELIVER, 7, LT_DELIVER, 7,
		LT_LOCK, 0, 0, 2, LT_LOCK, 2, 1, 1, LT_DELIVER, 7,
		LT_SPLIT, 0x0c,				/* 2 and 3 cut off */
		LT_LOCK, 1, 1, 2, LT_FENCED, 0, 3, LT_FENCED, 0, 4, LT_DELIVER, 7,
		LT_RECOVERED, 1, 3, LT_DELIVER, 7,
		LT_MERGE, LT_DELIVER, 7, LT_DELIVER, 7,	/* both sides see the conflict */
		LT_JOIN, 0x08, LT_DELIVER, 7,
	};
	/* a state over O2LT_SNAP_PLAIN_MAX: the snapshot for slot 3 is deflated */
	static const uint8_t bigsnap[] = {
		LT_JOIN, 0x08, LT_JOIN, 0x12, LT_DELIVER, 7,
		LT_LOCK, 0, 0, 1, LT_LOCK, 1, 0, 1, LT_LOCK, 2, 0, 1,
		LT_LOCK, 0, 1, 2, LT_LOCK, 1, 2, 1, LT_LOCK, 2, 2, 1, LT_DELIVER, 7,
		LT_LOCK, 1, 3, 2, LT_LOCK, 2, 4, 2, LT_LOCK, 0, 4, 1, LT_DELIVER, 7,
		LT_DOWN, 1, 3, 0 | 4, 0x77, LT_LOCK, 0, 3, 1, LT_LOCK, 2, 3, 1, LT_DELIVER, 7,
		LT_JOIN, 0x1b,				/* slot 3 joins: a deflated snapshot */
		LT_LOCK, 1, 1, 1, LT_DELIVER, 7, LT_DELIVER, 7,
		LT_LOCK, 3, 3, 2, LT_DELIVER, 7, LT_REACT, 0, LT_REACT, 2, LT_DELIVER, 7,
	};
	/* the same, with the deflated stream damaged, then the flag cleared */
	static const uint8_t bigsnap_damaged[] = {
		LT_JOIN, 0x08, LT_JOIN, 0x12, LT_DELIVER, 7,
		LT_LOCK, 0, 0, 1, LT_LOCK, 1, 0, 1, LT_LOCK, 2, 0, 1,
		LT_LOCK, 0, 1, 2, LT_LOCK, 1, 2, 1, LT_LOCK, 2, 2, 1, LT_DELIVER, 7,
		LT_LOCK, 1, 3, 2, LT_LOCK, 2, 4, 2, LT_LOCK, 0, 4, 1, LT_DELIVER, 7,
		LT_JOIN, 0x1b, LT_MUTATE, 90, 0, 0x20, LT_DELIVER, 7,
		LT_JOIN, 0x24, LT_MUTATE, 6, 0, 0x01, LT_DELIVER, 7,
		LT_JOIN, 0x2d, LT_MUTATE, 40, 0, 0x01, LT_DELIVER, 7,
		LT_LOCK, 0, 2, 2, LT_DELIVER, 7, LT_REACT, 1, LT_REACT, 2, LT_DELIVER, 7,
	};
	char dir[4096];

	snprintf(dir, sizeof(dir), "%s/fuzz_locktab", top);
	mkdir(top, 0755);
	mkdir(dir, 0755);
	put(dir, "seed-grants", grants, sizeof(grants));
	put(dir, "seed-join", join, sizeof(join));
	put(dir, "seed-failure", failure, sizeof(failure));
	put(dir, "seed-hostile", hostile, sizeof(hostile));
	put(dir, "seed-partition", partition, sizeof(partition));
	put(dir, "seed-bigsnap", bigsnap, sizeof(bigsnap));
	put(dir, "seed-bigsnap-damaged", bigsnap_damaged, sizeof(bigsnap_damaged));
}

static void encode(const char *in, const char *out, uint8_t flags)
{
	FILE *f = fopen(in, "rb");
	uint8_t *mem = calloc(1, FZ_IMG_DEV_BYTES);
	size_t n;

	if (!f)
		die(in, -errno);
	if (!mem)
		die("calloc", -ENOMEM);
	n = fread(mem, 1, FZ_IMG_DEV_BYTES, f);
	fclose(f);
	uint8_t *enc = fz_image_encode(mem, FZ_IMG_DEV_BYTES, flags, &n);
	int r = fz_write_file(out, enc, n);
	if (r < 0)
		die(out, r);
	printf("%s: %zu bytes\n", out, n);
	free(enc);
	free(mem);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "generate") == 0) {
		generate(argv[2]);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "locktab") == 0) {
		locktab_seeds(argv[2]);
		return 0;
	}
	if ((argc == 4 || argc == 5) && strcmp(argv[1], "encode") == 0) {
		encode(argv[2], argv[3], argc == 5 ? (uint8_t)strtoul(argv[4], NULL, 0) : 0);
		return 0;
	}
	fprintf(stderr, "usage: %s generate CORPUS_DIR | locktab CORPUS_DIR | encode IMAGE OUT [FLAGS]\n", argv[0]);
	return 2;
}
