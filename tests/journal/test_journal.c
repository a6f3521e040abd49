/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The journal against the real ocfs2-tools.
 *
 * Each case makes a volume with mkfs.ocfs2, runs a seeded workload of
 * transactions through fscore (inode timestamps as real metadata, free
 * blocks with patterns, blocks that begin with the JBD2 magic so they must
 * be escaped, revokes of blocks then rewritten directly, enough traffic to
 * wrap the log), then stops without closing, as a crash would.  The image
 * is copied: fsck.ocfs2 -fy replays one copy, fscore the other.  Both must
 * pass fsck.ocfs2 -fn, agree block for block (except the journal inode and
 * journal superblock, whose bookkeeping differs by design), and hold what
 * the workload committed.  debugfs.ocfs2 logdump must decode the log.
 *
 * Also unit tests of the cache (eviction under pressure, dirty blocks
 * pinned) and of commit/checkpoint/wrap on the memory device.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "internal.h"
#include "jmap.h"
#include "journal.h"
#include "../testenv.h"

static char tmpdir[256];

static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

static void make_volume(const char *name, const char *mkfs_args, const char *size)
{
	char p[512];

	path_of(p, sizeof(p), name);
	unlink(p);
	ck_assert_int_eq(sh("truncate -s %s %s", size, p), 0);
	ck_assert_msg(sh("mkfs.ocfs2 -q -M local %s %s >/dev/null 2>&1", mkfs_args, p) == 0,
		      "mkfs.ocfs2 %s failed", mkfs_args);
}

static uint64_t fake_now = 1700000000ull * 1000000000ull;

static uint64_t clock_fn(void *arg)
{
	return fake_now;
}

static struct o2_fs *open_rw(const char *name, struct o2_blockdev **ret_dev)
{
	char p[512], err[256];
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	struct o2_open_opts o = { .flags = O2_OPEN_RDWR, .now_ns = clock_fn, .commit_interval_ms = 1000000 };
	int r;

	path_of(p, sizeof(p), name);
	ck_assert_int_eq(o2_blockdev_open_file(p, 0, &dev), 0);
	r = o2_fs_open_opts(dev, &o, &fs, err, sizeof(err));
	ck_assert_msg(r == 0, "open %s: %d %s", name, r, err);
	*ret_dev = dev;
	return fs;
}

/* ---- the workload ---- */

#define POOL 48

struct model {
	uint64_t pool[POOL];	  /* free blocks the workload scribbles on */
	uint8_t *expect[POOL];	  /* committed content of each */
	uint64_t root_mtime;	  /* committed root inode mtime */
	unsigned revoked, escaped, handles;
	uint32_t wraps;
};

static void fill_pattern(uint8_t *p, uint32_t bs, uint64_t tag, bool magic)
{
	for (uint32_t i = 0; i < bs; i += 8) {
		uint64_t v = tag * 0x100000001b3ull + i;

		memcpy(p + i, &v, 8);
	}
	if (magic)
		*(o2be32 *)p = cpu_be32(JBD2_MAGIC);
}

/* Free blocks near the end of the volume: the fresh volume never uses them. */
static void pick_pool(struct o2_fs *fs, struct model *m)
{
	for (unsigned i = 0; i < POOL; i++) {
		m->pool[i] = fs->nblocks - 1 - 3 * i;
		m->expect[i] = NULL;
	}
}

static void one_handle(struct o2_fs *fs, struct model *m, uint8_t **pending, bool *direct,
		       uint64_t *pending_mtime)
{
	struct o2_trans *t;
	struct o2_buf *b;
	unsigned n = 1 + (unsigned)(rnd() % 6);
	int r;

	r = o2_trans_begin(fs, n + 1, &t);
	ck_assert_msg(r == 0, "begin: %d %s", r, o2_fs_error(fs));
	/* a real metadata change: the root inode's mtime */
	ck_assert_int_eq(o2_bread(fs, fs->info.root_blkno, O2_META_INODE, &b), 0);
	ck_assert_int_eq(o2_trans_add(t, b), 0);
	*pending_mtime = 1000000 + m->handles;
	((struct o2_dinode *)b->data)->i_mtime = cpu_le64(*pending_mtime);
	o2_brelse(fs, b);
	for (unsigned k = 0; k < n; k++) {
		unsigned i = (unsigned)(rnd() % POOL);
		bool magic = rnd() % 4 == 0;

		if (rnd() % 8 == 0 && m->expect[i]) {
			/*
			 * Free the block: revoke it; once the revoke has committed,
			 * reuse it as file data written straight to the device (as
			 * the allocator allows).  Replay must not write an older
			 * logged copy over that data.
			 */
			ck_assert_int_eq(o2_trans_revoke(t, m->pool[i]), 0);
			if (!pending[i])
				pending[i] = malloc(fs->bs);
			fill_pattern(pending[i], fs->bs, 0xdada0000ull + m->handles * 64 + i, false);
			direct[i] = true;
			m->revoked++;
			continue;
		}
		ck_assert_int_eq(o2_bnew(fs, m->pool[i], O2_META_PLAIN, &b), 0);
		r = o2_trans_add(t, b);
		ck_assert_msg(r == 0, "add: %d %s", r, o2_fs_error(fs));
		fill_pattern(b->data, fs->bs, m->handles * 64 + i, magic);
		m->escaped += magic;
		direct[i] = false;
		if (!pending[i])
			pending[i] = malloc(fs->bs);
		memcpy(pending[i], b->data, fs->bs);
		o2_brelse(fs, b);
	}
	ck_assert_int_eq(o2_trans_end(t), 0);
	m->handles++;
}

/*
 * Run handles; sync now and then (everything synced is committed).  The
 * last few handles stay in the running transaction and are lost.
 */
static void workload(struct o2_fs *fs, struct model *m, unsigned handles, bool force_wrap)
{
	uint8_t *pending[POOL] = { 0 };
	bool direct[POOL] = { 0 };
	uint64_t pending_mtime = m->root_mtime;
	struct o2_journal_stats js;

	for (unsigned h = 0; h < handles; h++) {
		one_handle(fs, m, pending, direct, &pending_mtime);
		if (rnd() % 3 == 0 || h + 1 == handles - 2) {
			ck_assert_int_eq(o2_fs_sync(fs), 0);
			for (unsigned i = 0; i < POOL; i++) {
				if (!pending[i])
					continue;
				if (direct[i])
					ck_assert_int_eq(o2_blockdev_write(fs->dev, pending[i], fs->bs,
									   m->pool[i] << fs->bits), 0);
				direct[i] = false;
				free(m->expect[i]);
				m->expect[i] = pending[i];
				pending[i] = NULL;
			}
			m->root_mtime = pending_mtime;
		}
		o2_journal_stats(fs, &js);
		/* checkpoint near the end of the ring so later commits wrap */
		if (force_wrap && js.head > js.ring_blocks - 12 && !m->wraps) {
			ck_assert_int_eq(o2_journal_checkpoint(fs), 0);
			m->wraps++;
		}
	}
	for (unsigned i = 0; i < POOL; i++)
		free(pending[i]);
}

static void model_free(struct model *m)
{
	for (unsigned i = 0; i < POOL; i++)
		free(m->expect[i]);
}

static void check_model(const char *name, const struct model *m)
{
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	char p[512], err[256];
	uint8_t *buf;

	path_of(p, sizeof(p), name);
	ck_assert_int_eq(o2_blockdev_open_file(p, O2_DEV_RDONLY, &dev), 0);
	ck_assert_int_eq(o2_fs_open(dev, O2_OPEN_RDONLY, &fs, err, sizeof(err)), 0);
	buf = malloc(fs->bs);
	for (unsigned i = 0; i < POOL; i++) {
		if (!m->expect[i])
			continue;
		ck_assert_int_eq(o2_blockdev_read(dev, buf, fs->bs, m->pool[i] << fs->bits), 0);
		ck_assert_msg(memcmp(buf, m->expect[i], fs->bs) == 0,
			      "%s: block %llu does not hold its last committed content", name,
			      (unsigned long long)m->pool[i]);
	}
	struct o2_inode *root;

	ck_assert_int_eq(o2_inode_get(fs, fs->info.root_blkno, &root), 0);
	ck_assert_msg((uint64_t)o2_inode_info(root)->mtime.sec == m->root_mtime,
		      "%s: root mtime %lld, committed %llu", name,
		      (long long)o2_inode_info(root)->mtime.sec, (unsigned long long)m->root_mtime);
	o2_inode_unref(root);
	free(buf);
	o2_fs_close(fs);
	o2_blockdev_free(dev);
}

/* Blocks of the journal inode and journal superblock of slot 0. */
static void journal_blocks(const char *name, uint64_t *ino, uint64_t *sb)
{
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	struct o2_journal_info ji;
	struct o2_jmap jm;
	char p[512], err[256];

	path_of(p, sizeof(p), name);
	ck_assert_int_eq(o2_blockdev_open_file(p, O2_DEV_RDONLY, &dev), 0);
	ck_assert_int_eq(o2_fs_open(dev, O2_OPEN_RDONLY, &fs, err, sizeof(err)), 0);
	ck_assert_int_eq(o2_journal_info(fs, 0, &ji), 0);
	ck_assert_int_eq(o2_jmap_load(fs, 0, &jm), 0);
	*ino = ji.inode_blkno;
	*sb = jm.sb_phys;
	o2_jmap_free(&jm);
	o2_fs_close(fs);
	o2_blockdev_free(dev);
}

static void compare_images(const char *a, const char *b, uint32_t bs, uint64_t skip1, uint64_t skip2)
{
	char pa[512], pb[512];
	FILE *fa, *fb;
	uint8_t *x = malloc(bs), *y = malloc(bs);
	uint64_t blk = 0, diffs = 0, first = 0;

	path_of(pa, sizeof(pa), a);
	path_of(pb, sizeof(pb), b);
	fa = fopen(pa, "rb");
	fb = fopen(pb, "rb");
	ck_assert_ptr_nonnull(fa);
	ck_assert_ptr_nonnull(fb);
	for (;; blk++) {
		size_t na = fread(x, 1, bs, fa), nb = fread(y, 1, bs, fb);

		ck_assert_uint_eq(na, nb);
		if (na == 0)
			break;
		if (blk != skip1 && blk != skip2 && blk != O2_SUPER_BLKNO && memcmp(x, y, na) != 0 && !diffs++)
			first = blk;
	}
	fclose(fa);
	fclose(fb);
	free(x);
	free(y);
	ck_assert_msg(diffs == 0, "%s and %s differ in %llu blocks, first %llu", a, b,
		      (unsigned long long)diffs, (unsigned long long)first);
}

/* One interop case: workload, crash, replay both ways, judge. */
static void interop_case(const char *mkfs_args, const char *size, uint64_t seed, unsigned handles)
{
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	struct model m = { 0 };
	char img[64], a[64], b[64], pa[512], pb[512], pi[512];
	uint64_t jino, jsb;

	snprintf(img, sizeof(img), "v%llu.img", (unsigned long long)seed);
	snprintf(a, sizeof(a), "v%llu-fsck.img", (unsigned long long)seed);
	snprintf(b, sizeof(b), "v%llu-ours.img", (unsigned long long)seed);
	make_volume(img, mkfs_args, size);
	rng = seed * 2654435761u + 1;
	fs = open_rw(img, &dev);
	pick_pool(fs, &m);
	workload(fs, &m, handles, true);
	uint32_t bs = fs->bs;
	struct o2_journal_stats js;

	o2_journal_stats(fs, &js);
	ck_assert_msg(js.commits > 3, "the workload committed only %u times", js.commits);
	o2_fs_abandon(fs); /* the crash */
	o2_blockdev_free(dev);

	path_of(pi, sizeof(pi), img);
	path_of(pa, sizeof(pa), a);
	path_of(pb, sizeof(pb), b);
	/* the log decodes with the real debugfs */
	ck_assert_msg(sh("debugfs.ocfs2 -R 'logdump 0' %s > %s.logdump 2>&1", pi, pi) == 0,
		      "logdump failed");
	ck_assert_msg(sh("grep -v 'Error: 0' %s.logdump | grep -qiwE 'error|bad|invalid|corrupt'", pi) != 0,
		      "logdump complained: see %s.logdump", pi);
	ck_assert_msg(sh("grep -q 'Journal Commit Block' %s.logdump", pi) == 0,
		      "logdump shows no commit block");
	ck_assert_int_eq(sh("cp --sparse=always %s %s && cp --sparse=always %s %s", pi, pa, pi, pb), 0);

	/* the real fsck replays one copy */
	sh("echo y | fsck.ocfs2 -F -fy %s >%s.fsck 2>&1", pa, pa);
	ck_assert_msg(sh("fsck.ocfs2 -fn %s >%s.fsckn 2>&1", pa, pa) == 0,
		      "fsck.ocfs2 -fn after fsck's replay failed: see %s.fsckn", pa);
	/* fscore replays the other */
	fs = open_rw(b, &dev);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	ck_assert_msg(sh("fsck.ocfs2 -fn %s >%s.fsckn 2>&1", pb, pb) == 0,
		      "fsck.ocfs2 -fn after our replay failed: see %s.fsckn", pb);

	/*
	 * An open does more than replay: it gives back allocator groups the
	 * workload left empty (and the truncate log): fsck's copy gets that
	 * too, so that the two differ only if the replays did.
	 */
	fs = open_rw(a, &dev);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	journal_blocks(b, &jino, &jsb);
	/*
	 * Expected differences: the journal inode and superblock (fsck leaves
	 * the dirty flag and does not bump the recovery generation), and the
	 * volume superblock, where fsck -fy stamps s_lastcheck.
	 */
	compare_images(a, b, bs, jino, jsb);
	check_model(b, &m);
	model_free(&m);
	ck_assert_msg(m.escaped > 0 && m.revoked > 0 && m.wraps > 0,
		      "workload did not exercise escapes (%u), revokes (%u) and wrap (%u)",
		      m.escaped, m.revoked, m.wraps);
	unlink(pi);
	unlink(pa);
	unlink(pb);
}

START_TEST(interop_4k_default)
{
	interop_case("-b 4096 -C 4096 -J size=4M", "96M", 1, 900);
}
END_TEST

START_TEST(interop_512_maxcompat)
{
	interop_case("-b 512 -C 4096 -J size=4M --fs-feature-level=max-compat", "64M", 2, 2500);
}
END_TEST

START_TEST(interop_1k_metaecc)
{
	interop_case("-b 1024 -C 4096 -J size=4M --fs-features=metaecc", "96M", 3, 1500);
}
END_TEST

START_TEST(interop_4k_block64)
{
	interop_case("-b 4096 -C 8192 -J size=4M,block64", "96M", 4, 900);
}
END_TEST

START_TEST(interop_2k_1m_cluster)
{
	interop_case("-b 2048 -C 1M -J size=16M", "512M", 5, 3000);
}
END_TEST

/* ---- cache and journal mechanics on a memory copy of a real volume ---- */

static struct o2_blockdev *memory_volume(const char *mkfs_args)
{
	char p[512];
	struct o2_blockdev *file, *mem;
	uint8_t *data;

	make_volume("mem.img", mkfs_args, "64M");
	path_of(p, sizeof(p), "mem.img");
	ck_assert_int_eq(o2_blockdev_open_file(p, O2_DEV_RDONLY, &file), 0);
	data = malloc(file->size);
	ck_assert_int_eq(o2_blockdev_read(file, data, file->size, 0), 0);
	ck_assert_int_eq(o2_blockdev_new_memory_from(data, file->size, file->size, &mem), 0);
	free(data);
	o2_blockdev_free(file);
	unlink(p);
	return mem;
}

START_TEST(cache_eviction_and_pinning)
{
	struct o2_blockdev *dev = memory_volume("-b 4096 -J size=4M");
	struct o2_open_opts o = { .flags = O2_OPEN_RDWR, .cache_blocks = 32, .now_ns = clock_fn,
				  .commit_interval_ms = 1000000 };
	struct o2_cache_stats st;
	struct o2_fs *fs;
	struct o2_trans *t;
	struct o2_buf *b;
	char err[256];
	uint64_t base;

	ck_assert_int_eq(o2_fs_open_opts(dev, &o, &fs, err, sizeof(err)), 0);
	base = fs->nblocks - 200;
	/* log 10 blocks and keep them uncommitted */
	ck_assert_int_eq(o2_trans_begin(fs, 10, &t), 0);
	for (unsigned i = 0; i < 10; i++) {
		ck_assert_int_eq(o2_bnew(fs, base + i, O2_META_PLAIN, &b), 0);
		ck_assert_int_eq(o2_trans_add(t, b), 0);
		memset(b->data, 0x40 + (int)i, fs->bs);
		o2_brelse(fs, b);
	}
	ck_assert_int_eq(o2_trans_end(t), 0);
	/* read far more clean blocks than the cache may keep */
	for (unsigned i = 0; i < 500; i++) {
		ck_assert_int_eq(o2_bread(fs, 100 + i, O2_META_PLAIN, &b), 0);
		o2_brelse(fs, b);
	}
	o2_cache_stats(fs, &st);
	ck_assert_uint_le(st.buffers, 32 + 10 + 4);
	ck_assert_uint_ge(st.evictions, 400);
	ck_assert_uint_eq(st.dirty, 10);
	/* the pinned blocks still hold their new content, and the disk the old */
	uint8_t *disk = malloc(fs->bs);

	for (unsigned i = 0; i < 10; i++) {
		ck_assert_int_eq(o2_bread(fs, base + i, O2_META_PLAIN, &b), 0);
		ck_assert_uint_eq(b->data[17], 0x40 + i);
		o2_brelse(fs, b);
		ck_assert_int_eq(o2_blockdev_read(dev, disk, fs->bs, (base + i) << fs->bits), 0);
		ck_assert_uint_eq(disk[17], 0);
	}
	/* commit: still not home (only in the log) */
	ck_assert_int_eq(o2_fs_sync(fs), 0);
	ck_assert_int_eq(o2_blockdev_read(dev, disk, fs->bs, base << fs->bits), 0);
	ck_assert_uint_eq(disk[17], 0);
	o2_cache_stats(fs, &st);
	ck_assert_uint_eq(st.dirty, 10);
	/* checkpoint: home, and evictable again */
	ck_assert_int_eq(o2_journal_checkpoint(fs), 0);
	ck_assert_int_eq(o2_blockdev_read(dev, disk, fs->bs, base << fs->bits), 0);
	ck_assert_uint_eq(disk[17], 0x40);
	o2_cache_stats(fs, &st);
	ck_assert_uint_eq(st.dirty, 0);
	free(disk);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
}
END_TEST

START_TEST(commit_checkpoint_wrap)
{
	struct o2_blockdev *dev = memory_volume("-b 1024 -J size=4M");
	struct o2_open_opts o = { .flags = O2_OPEN_RDWR, .now_ns = clock_fn, .commit_interval_ms = 1000 };
	struct o2_journal_stats js;
	struct o2_fs *fs;
	char err[256];
	uint32_t last_head = 0, wraps = 0, checkpoints;
	uint64_t base;

	ck_assert_int_eq(o2_fs_open_opts(dev, &o, &fs, err, sizeof(err)), 0);
	base = fs->nblocks - 64;
	/* a first open may log its own work (mkfs.ocfs2's empty allocator
	 * groups going back): home with it, then the log is empty */
	ck_assert_int_eq(o2_journal_checkpoint(fs), 0);
	o2_journal_stats(fs, &js);
	ck_assert_uint_eq(js.tail, 0);
	ck_assert_uint_eq(js.ring_blocks, 4095);
	/* too many credits is refused up front */
	struct o2_trans *t;

	ck_assert_int_eq(o2_trans_begin(fs, o2_journal_max_credits(fs) + 1, &t), -ENOSPC);
	/* logging more blocks than the handle's credits is refused */
	{
		struct o2_buf *b;

		ck_assert_int_eq(o2_trans_begin(fs, 1, &t), 0);
		ck_assert_int_eq(o2_bnew(fs, base - 1, O2_META_PLAIN, &b), 0);
		ck_assert_int_eq(o2_trans_add(t, b), 0);
		o2_brelse(fs, b);
		ck_assert_int_eq(o2_bnew(fs, base - 2, O2_META_PLAIN, &b), 0);
		ck_assert_int_eq(o2_trans_add(t, b), -ENOSPC);
		o2_brelse(fs, b);
		ck_assert_int_eq(o2_trans_end(t), 0);
	}
	for (unsigned h = 0; h < 3000; h++) {
		struct o2_buf *b;

		ck_assert_int_eq(o2_trans_begin(fs, 8, &t), 0);
		for (unsigned k = 0; k < 8; k++) {
			ck_assert_int_eq(o2_bnew(fs, base + (h + k) % 64, O2_META_PLAIN, &b), 0);
			ck_assert_int_eq(o2_trans_add(t, b), 0);
			memset(b->data, (int)(h & 0xff), fs->bs);
			o2_brelse(fs, b);
		}
		fake_now += 300ull * 1000000; /* the commit interval passes every 4 handles */
		ck_assert_int_eq(o2_trans_end(t), 0);
		o2_journal_stats(fs, &js);
		if (js.head < last_head)
			wraps++;
		last_head = js.head;
	}
	o2_journal_stats(fs, &js);
	checkpoints = js.checkpoints;
	ck_assert_uint_gt(js.commits, 600);
	ck_assert_uint_ge(wraps, 2);
	ck_assert_uint_ge(checkpoints, 2);
	ck_assert_uint_gt(js.next_tid, js.commits);
	/* the public counters (o2_fs_stats, what the daemon serves) are the journal's */
	struct o2_fs_stats fst;

	o2_fs_stats(fs, &fst);
	ck_assert_uint_eq(fst.journal_commits, js.commits);
	ck_assert_uint_eq(fst.journal_checkpoints, js.checkpoints);
	ck_assert_uint_eq(fst.journal_log_blocks, js.log_blocks_written);
	ck_assert_uint_eq(fst.device_flushes, dev->flushes);
	/* a clean close leaves an empty log and a clean journal inode */
	ck_assert_int_eq(o2_fs_close(fs), 0);
	ck_assert_int_eq(o2_fs_open(dev, O2_OPEN_RDONLY, &fs, err, sizeof(err)), 0);
	struct o2_journal_info ji;

	ck_assert_int_eq(o2_journal_info(fs, 0, &ji), 0);
	ck_assert_uint_eq(ji.start, 0);
	ck_assert_uint_eq(ji.ij_flags & O2_JOURNAL_DIRTY, 0);
	ck_assert_uint_eq(ji.feature_incompat & JBD2_INCOMPAT_REVOKE, JBD2_INCOMPAT_REVOKE);
	/* the newest content of every block is home */
	uint8_t *buf = malloc(fs->bs);

	for (unsigned k = 0; k < 64; k++) {
		unsigned last = 0;

		for (unsigned h = 0; h < 3000; h++)
			for (unsigned i = 0; i < 8; i++)
				if ((h + i) % 64 == k)
					last = h;
		ck_assert_int_eq(o2_blockdev_read(dev, buf, fs->bs, (base + k) << fs->bits), 0);
		ck_assert_uint_eq(buf[3], last & 0xff);
	}
	free(buf);
	o2_fs_close(fs);
	o2_blockdev_free(dev);
}
END_TEST

START_TEST(readonly_open_refuses_transactions)
{
	struct o2_blockdev *dev = memory_volume("-b 4096 -J size=4M");
	struct o2_fs *fs;
	struct o2_trans *t;
	char err[256];

	ck_assert_int_eq(o2_fs_open(dev, O2_OPEN_RDONLY, &fs, err, sizeof(err)), 0);
	ck_assert_int_eq(o2_trans_begin(fs, 1, &t), -EROFS);
	ck_assert_int_eq(o2_fs_sync(fs), 0);
	ck_assert_int_eq(o2_journal_recover(fs, 0, NULL), -EROFS);
	o2_fs_close(fs);
	/* a slot that does not exist */
	struct o2_open_opts o = { .flags = O2_OPEN_RDWR, .slot = 7 };

	ck_assert_int_eq(o2_fs_open_opts(dev, &o, &fs, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "slot 7") != NULL, "message: %s", err);
	o2_blockdev_free(dev);
}
END_TEST

/*
 * An overwrite changes its inode's times alone; when a cluster lock makes
 * the node write back, that transaction goes home without the log: no
 * commit, no flush, the inode's home copy carrying the new times with a
 * good block check.  An fsync of the inode then flushes once; a running
 * transaction with any other change commits as before.  fsck.ocfs2 must
 * find the volume clean, closed or not.
 */
static void times_home_case(const char *mkfs_args)
{
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	struct o2_fs_stats a, b;
	uint64_t ino, ino2, root;
	uint8_t data[8192], *raw;
	char p[512];

	make_volume("times.img", mkfs_args, "128M");
	path_of(p, sizeof(p), "times.img");
	fs = open_rw("times.img", &dev);
	root = o2_fs_super(fs)->root_blkno;
	memset(data, 'a', sizeof(data));
	ck_assert_int_eq(o2_create(fs, root, "f", 1, &(struct o2_new_inode){ .mode = S_IFREG | 0644 },
				   &ino), 0);
	ck_assert_int_eq(o2_write(fs, ino, 0, data, sizeof(data)), (ssize_t)sizeof(data));
	ck_assert_int_eq(o2_fs_writeback(fs, O2_WB_ALL), 0);

	/* an overwrite inside the file, then a lock leaves: home, unlogged */
	fake_now += 7ull * 1000000000ull;
	o2_fs_stats(fs, &a);
	ck_assert_int_eq(o2_write(fs, ino, 100, "xyz", 3), 3);
	ck_assert(o2_journal_pending(fs));
	ck_assert_int_eq(o2_fs_writeback(fs, O2_WB_ALL), 0);
	o2_fs_stats(fs, &b);
	ck_assert(!o2_journal_pending(fs));
	ck_assert_uint_eq(b.journal_times_home, a.journal_times_home + 1);
	ck_assert_uint_eq(b.journal_commits, a.journal_commits);
	ck_assert_uint_eq(b.device_flushes, a.device_flushes);
	raw = malloc(fs->bs);
	ck_assert_int_eq(o2_blockdev_read(dev, raw, fs->bs, ino << fs->bits), 0);
	ck_assert_uint_eq(le64(((struct o2_dinode *)raw)->i_mtime), fake_now / 1000000000ull);
	ck_assert_uint_eq(le64(((struct o2_dinode *)raw)->i_ctime), fake_now / 1000000000ull);

	/* its fsync has nothing to commit, and flushes once */
	ck_assert_int_eq(o2_fs_fsync(fs, ino, false), 0);
	o2_fs_stats(fs, &a);
	ck_assert_uint_eq(a.journal_commits, b.journal_commits);
	ck_assert_uint_eq(a.device_flushes, b.device_flushes + 1);

	/* EX to PR: the same */
	fake_now += 1000000000ull;
	ck_assert_int_eq(o2_write(fs, ino, 200, "xyz", 3), 3);
	ck_assert_int_eq(o2_fs_writeback(fs, O2_WB_HOME), 0);
	o2_fs_stats(fs, &b);
	ck_assert_uint_eq(b.journal_times_home, a.journal_times_home + 1);
	ck_assert_uint_eq(b.journal_commits, a.journal_commits);

	/* anything more in the transaction (a new file; a growing write): the log */
	ck_assert_int_eq(o2_write(fs, ino, 300, "xyz", 3), 3);
	ck_assert_int_eq(o2_create(fs, root, "g", 1, &(struct o2_new_inode){ .mode = S_IFREG | 0644 },
				   &ino2), 0);
	ck_assert_int_eq(o2_fs_writeback(fs, O2_WB_ALL), 0);
	o2_fs_stats(fs, &a);
	ck_assert_uint_eq(a.journal_times_home, b.journal_times_home);
	ck_assert_uint_eq(a.journal_commits, b.journal_commits + 1);
	ck_assert_int_eq(o2_write(fs, ino, sizeof(data), "xyz", 3), 3);
	ck_assert_int_eq(o2_fs_writeback(fs, O2_WB_ALL), 0);
	o2_fs_stats(fs, &b);
	ck_assert_uint_eq(b.journal_times_home, a.journal_times_home);
	ck_assert_uint_eq(b.journal_commits, a.journal_commits + 1);

	/* an overwrite of a block the log still holds: committed, not homed */
	ck_assert_int_eq(o2_write(fs, ino, 400, "xyz", 3), 3);
	ck_assert_int_eq(o2_journal_commit(fs), 0);
	ck_assert_int_eq(o2_write(fs, ino, 500, "xyz", 3), 3);
	ck_assert_int_eq(o2_fs_writeback(fs, O2_WB_ALL), 0);
	o2_fs_stats(fs, &a);
	ck_assert_uint_eq(a.journal_times_home, b.journal_times_home);

	/* left as a crash would leave it, then closed: clean both times */
	fake_now += 1000000000ull;
	ck_assert_int_eq(o2_write(fs, ino, 600, "xyz", 3), 3);
	ck_assert_int_eq(o2_fs_writeback(fs, O2_WB_ALL), 0);
	ck_assert_int_eq(o2_blockdev_flush(dev), 0);
	ck_assert_msg(sh("fsck.ocfs2 -fn %s >%s.fsck 2>&1", p, p) == 0, "fsck.ocfs2 -fn after a "
		      "times-only write-back (%s): see %s.fsck", mkfs_args, p);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
	ck_assert_msg(sh("fsck.ocfs2 -fn %s >%s.fsck 2>&1", p, p) == 0, "fsck.ocfs2 -fn after "
		      "close (%s): see %s.fsck", mkfs_args, p);
	free(raw);
	unlink(p);
}

START_TEST(times_home)
{
	times_home_case("-b 4096 -C 4096");
	times_home_case("-b 1024 --fs-features=metaecc");
}
END_TEST

static Suite *journal_suite(void)
{
	Suite *s = suite_create("journal");
	TCase *mech = tcase_create("mechanics");
	TCase *interop = tcase_create("interop");

	tcase_add_test(mech, cache_eviction_and_pinning);
	tcase_add_test(mech, commit_checkpoint_wrap);
	tcase_add_test(mech, readonly_open_refuses_transactions);
	tcase_add_test(mech, times_home);
	tcase_set_timeout(mech, 120);
	suite_add_tcase(s, mech);
	tcase_add_test(interop, interop_4k_default);
	tcase_add_test(interop, interop_512_maxcompat);
	tcase_add_test(interop, interop_1k_metaecc);
	tcase_add_test(interop, interop_4k_block64);
	tcase_add_test(interop, interop_2k_1m_cluster);
	tcase_set_timeout(interop, 300);
	suite_add_tcase(s, interop);
	return s;
}

int main(void)
{
	test_env_init();
	SRunner *sr;
	int failed;

	if (sh("command -v mkfs.ocfs2 >/dev/null && command -v fsck.ocfs2 >/dev/null") != 0) {
		printf("SKIP: ocfs2-tools (mkfs.ocfs2, fsck.ocfs2) not installed\n");
		return 77;
	}
	snprintf(tmpdir, sizeof(tmpdir), "%s/o2-journal-XXXXXX", test_tmpdir());
	if (!mkdtemp(tmpdir))
		return 1;
	sr = srunner_create(journal_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (!failed)
		sh("rm -rf %s", tmpdir);
	else
		printf("artifacts kept in %s\n", tmpdir);
	return failed ? 1 : 0;
}
