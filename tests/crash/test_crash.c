/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Crash consistency of the journal.
 *
 * A seeded workload of small transactions (crash_common.c) runs on a volume
 * made by mkfs.ocfs2, over the crash-recording device, and ends with a
 * clean close.  Then, for every flush in the recorded stream and for random
 * points between flushes, the disk as a crash there could have left it is
 * materialised (unflushed writes applied, dropped or torn as a seed says),
 * opened read-write - which replays the journal - and judged: it must open
 * cleanly and hold the state after some handle no older than the last one
 * made durable before the crash point.
 *
 * Volumes: 4 KiB blocks (16 MiB), 1 KiB blocks (8 MiB), and 4 KiB blocks
 * with metaecc, each with a 4 MiB journal that the workload wraps several
 * times.  "--quick" checks a sample of the points (the 'unit' suite).
 *
 * Then targeted cases, each built around one way a crash can go wrong: the
 * log reused right after a checkpoint (searched with many seeds, and once
 * constructed exactly), a revoke still running when the log is
 * checkpointed under an open handle, and a torn descriptor of the last,
 * uncommitted transaction.  And fdatasync of data written in place, which
 * only flushes the device: a crash at each of its writes and its flush;
 * and two commits batched on one flush.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crash_common.h"
#include "../testenv.h"
#include "jmap.h"
#include "journal.h"

enum { VOL_4K, VOL_1K, VOL_ECC, VOL_QUOTA, NVOLS };

static struct vol_image vols[NVOLS];
static bool quick;

struct harness {
	const struct vol_image *v;
	struct o2_blockdev *mem, *crash;
	struct fake_clock clk;
	struct model m;
	struct workload w;
	uint64_t rng;
	size_t points, reopened;
	uint32_t max_h_seen;
};

static uint64_t hrand(struct harness *hs)
{
	uint64_t x = hs->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return hs->rng = x;
}

/* Materialise, replay, judge one crash point. */
static void check_point(struct harness *hs, size_t p, uint64_t seed, bool reopen)
{
	struct o2_blockdev *dev;
	struct fake_clock clk = { hs->clk.ns + 1000000000ull };
	struct o2_fs *fs;
	struct o2_inode *root;
	char err[256], msg[2048];
	uint32_t h = 0;
	int r;

	ck_assert_int_eq(o2_crashdev_materialise(hs->crash, p, seed, &dev), 0);
	r = open_rw(dev, &clk, &fs, err, sizeof(err));
	ck_assert_msg(r == 0, "%s: crash point %zu seed %llu: open failed: %d %s", hs->v->name, p,
		      (unsigned long long)seed, r, err);
	r = o2_inode_get(fs, hs->m.t[0].blkno, &root);
	ck_assert_msg(r == 0, "%s: crash point %zu seed %llu: root inode: %d %s", hs->v->name, p,
		      (unsigned long long)seed, r, o2_fs_error(fs));
	o2_inode_unref(root);
	ck_assert_msg(model_judge(&hs->m, dev, p, &h, msg, sizeof(msg)), "%s: %s (seed %llu)",
		      hs->v->name, msg, (unsigned long long)seed);
	if (h != UINT32_MAX && h > hs->max_h_seen)
		hs->max_h_seen = h;
	r = o2_fs_close(fs);
	ck_assert_msg(r == 0, "%s: crash point %zu: close after replay: %d", hs->v->name, p, r);
	if (reopen) {
		/* a replayed and closed volume opens again with nothing to do, unchanged */
		uint64_t *a = calloc(hs->m.nt, sizeof(*a)), *b = calloc(hs->m.nt, sizeof(*b));
		struct o2_replay_stats st;

		ck_assert(a && b);
		model_read(&hs->m, dev, a);
		ck_assert_int_eq(open_rw(dev, &clk, &fs, err, sizeof(err)), 0);
		ck_assert_int_eq(o2_journal_recover(fs, 0, &st), 0);
		ck_assert_uint_eq(st.blocks_replayed, 0);
		model_read(&hs->m, dev, b);
		ck_assert_msg(memcmp(a, b, hs->m.nt * sizeof(*a)) == 0,
			      "%s: crash point %zu: reopening changed the volume", hs->v->name, p);
		ck_assert_int_eq(o2_fs_close(fs), 0);
		free(a);
		free(b);
		hs->reopened++;
	}
	o2_blockdev_free(dev);
	hs->points++;
}

static void harness_run(const struct vol_image *v, const struct wl_params *p, unsigned min_wraps)
{
	struct harness hs = { .v = v, .clk = { 1700000000ull * 1000000000ull } };
	struct o2_journal_stats js;
	struct wl_run run = { 0 };
	struct o2_fs *fs;
	char err[256];
	size_t nops, prev_flush = 0, flushes = 0, stride = quick ? 23 : 1;
	struct timespec t0, t1;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	hs.rng = p->seed * 0x9E3779B97F4A7C15ull + 7;
	hs.mem = vol_image_dev(v);
	ck_assert_int_eq(o2_crashdev_new(hs.mem, &hs.crash), 0);
	r = open_rw(hs.crash, &hs.clk, &fs, err, sizeof(err));
	ck_assert_msg(r == 0, "open: %d %s", r, err);
	model_init(&hs.m, fs, p->pool);
	wl_generate(&hs.w, p);
	run = (struct wl_run){ .fs = fs, .crash = hs.crash, .datadev = hs.crash, .clk = &hs.clk,
			       .m = &hs.m };
	r = wl_execute(&run, &hs.w);
	ck_assert_msg(r == 0, "workload: step %zu: %s: %d %s", run.step, run.failed_call, r,
		      o2_fs_error(fs));
	o2_journal_stats(fs, &js);
	ck_assert_msg(js.log_blocks_written / js.ring_blocks >= min_wraps,
		      "%s: the workload wrote %u log blocks, fewer than %u rings of %u",
		      v->name, js.log_blocks_written, min_wraps, js.ring_blocks);
	ck_assert_uint_ge(js.checkpoints, min_wraps);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	model_durable_now(&hs.m, hs.crash);

	nops = o2_crashdev_nops(hs.crash);
	for (size_t i = 0; i < nops; i++) {
		if (!o2_crashdev_op_is_flush(hs.crash, i))
			continue;
		if (flushes++ % stride == 0) {
			/* just after the flush, and just before it with the tail torn */
			check_point(&hs, i + 1, 0, flushes % 16 == 1);
			check_point(&hs, i, hrand(&hs) | 1, false);
			/* somewhere between the previous flush and this one */
			if (i > prev_flush + 1)
				check_point(&hs, prev_flush + 1 + hrand(&hs) % (i - prev_flush - 1),
					    hrand(&hs) | 1, false);
		}
		prev_flush = i;
	}
	for (unsigned k = 0; k < 4; k++)
		check_point(&hs, nops, k ? hrand(&hs) | 1 : 0, k == 0);
	check_point(&hs, 0, 0, true);

	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%s seed %llu: %u handles, %zu ops (%zu flushes), %u commits, %u checkpoints, "
	       "%u log blocks (%.1f rings), newest replayed handle %u\n",
	       v->name, (unsigned long long)p->seed, hs.m.nh, nops, flushes, js.commits,
	       js.checkpoints, js.log_blocks_written,
	       (double)js.log_blocks_written / js.ring_blocks, hs.max_h_seen);
	printf("%s seed %llu: crash points checked: %zu (%zu reopened) in %.1f s\n", v->name,
	       (unsigned long long)p->seed, hs.points, hs.reopened,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	fflush(stdout);
	wl_free(&hs.w);
	model_free(&hs.m);
	o2_blockdev_free(hs.crash);
	o2_blockdev_free(hs.mem);
}

/*
 * A pass-through device that notes which crash-device ops wrote one block
 * (the journal superblock), so that the windows where it changes can be
 * searched with many seeds.
 */
struct spy_dev {
	struct o2_blockdev dev;
	struct o2_blockdev *crash;
	uint64_t watch_off;
	size_t hits[4096];
	size_t nhits;
};

static int spy_read(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off)
{
	return o2_blockdev_read(((struct spy_dev *)dev)->crash, buf, len, off);
}

static int spy_write(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off)
{
	struct spy_dev *s = (struct spy_dev *)dev;

	if (off <= s->watch_off && s->watch_off < off + len && s->nhits < 4096)
		s->hits[s->nhits++] = o2_crashdev_nops(s->crash);
	return o2_blockdev_write(s->crash, buf, len, off);
}

static int spy_flush(struct o2_blockdev *dev)
{
	return o2_blockdev_flush(((struct spy_dev *)dev)->crash);
}

static void spy_destroy(struct o2_blockdev *dev)
{
}

static const struct o2_blockdev_ops spy_ops = { spy_read, spy_write, spy_flush, spy_destroy, NULL,
						 NULL };

/*
 * The log reused right after a checkpoint.  Big transactions, each synced,
 * fill the ring until a handle needs a checkpoint; the transaction after
 * it overwrites the oldest part of the log, which the journal superblock
 * named as the start of the log until the checkpoint.  Every flush is
 * checked with some seeds, and each flush whose unflushed window changes
 * the journal superblock with many: the seeds that drop the superblock
 * writes while new log blocks land (torn) are the interesting crashes.
 */
START_TEST(crash_log_reuse)
{
	struct wl_params p = {
		.seed = 7, .handles = 70, .pool = 600, .kmax = 1, .big_pct = 100, .big_max = 80,
		.revoke_pct = 0, .sync_pct = 100,
	};
	struct harness hs = { .v = &vols[VOL_4K], .clk = { 1700000000ull * 1000000000ull } };
	struct spy_dev spy = { .dev = { .ops = &spy_ops, .sector_size = 512 } };
	struct o2_journal_stats js;
	struct o2_jmap jm;
	struct wl_run run;
	struct o2_fs *fs;
	char err[256];
	size_t nops, prev_flush = 0, h = 0, hot = 0;

	hs.rng = 99;
	hs.mem = vol_image_dev(hs.v);
	ck_assert_int_eq(o2_crashdev_new(hs.mem, &hs.crash), 0);
	spy.crash = hs.crash;
	spy.dev.size = hs.crash->size;
	ck_assert_int_eq(open_rw(&spy.dev, &hs.clk, &fs, err, sizeof(err)), 0);
	ck_assert_int_eq(o2_jmap_load(fs, 0, &jm), 0);
	spy.watch_off = jm.sb_phys << fs->bits;
	o2_jmap_free(&jm);
	model_init(&hs.m, fs, p.pool);
	wl_generate(&hs.w, &p);
	run = (struct wl_run){ .fs = fs, .crash = hs.crash, .datadev = &spy.dev, .clk = &hs.clk,
			       .m = &hs.m };
	ck_assert_int_eq(wl_execute(&run, &hs.w), 0);
	o2_journal_stats(fs, &js);
	ck_assert_uint_ge(js.checkpoints, 3);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	model_durable_now(&hs.m, hs.crash);
	nops = o2_crashdev_nops(hs.crash);
	for (size_t i = 0; i < nops; i++) {
		bool sb_changes = false;

		if (!o2_crashdev_op_is_flush(hs.crash, i))
			continue;
		for (; h < spy.nhits && spy.hits[h] < i; h++)
			sb_changes |= spy.hits[h] > prev_flush;
		hot += sb_changes;
		for (uint64_t seed = 0; seed < (sb_changes ? (quick ? 64 : 300) : (quick ? 2 : 6));
		     seed++)
			check_point(&hs, i, seed, false);
		prev_flush = i;
	}
	printf("log reuse: %u checkpoints, %zu windows that change the journal superblock; "
	       "crash points checked: %zu\n", js.checkpoints, hot, hs.points);
	wl_free(&hs.w);
	model_free(&hs.m);
	o2_blockdev_free(hs.crash);
	o2_blockdev_free(hs.mem);
}
END_TEST

/*
 * A revoke still in the running transaction when the log is checkpointed
 * under an open handle.  Block X is committed (and synced) with content A;
 * a handle revokes X and stays open; a second handle needs more log than is
 * free.  Nothing after A is committed, so after a crash X must still read
 * A, whatever the checkpoint did.
 */
START_TEST(crash_revoke_then_checkpoint)
{
	const struct vol_image *v = &vols[VOL_4K];
	struct o2_blockdev *mem = vol_image_dev(v), *crash, *dev;
	struct fake_clock clk = { 1700000000ull * 1000000000ull };
	struct o2_journal_stats js;
	struct o2_trans *a, *b;
	struct o2_buf *buf;
	struct o2_fs *fs;
	char err[256];
	uint8_t *want, *got;
	uint64_t x;
	unsigned big;

	ck_assert_int_eq(o2_crashdev_new(mem, &crash), 0);
	ck_assert_int_eq(open_rw(crash, &clk, &fs, err, sizeof(err)), 0);
	want = malloc(fs->bs);
	got = malloc(fs->bs);
	x = fs->nblocks - 1;
	big = o2_journal_max_credits(fs);

	/* X = A, durable */
	ck_assert_int_eq(o2_trans_begin(fs, 1, &a), 0);
	ck_assert_int_eq(o2_bnew(fs, x, O2_META_PLAIN, &buf), 0);
	ck_assert_int_eq(o2_trans_add(a, buf), 0);
	memset(buf->data, 0xA1, fs->bs);
	memcpy(want, buf->data, fs->bs);
	o2_brelse(fs, buf);
	ck_assert_int_eq(o2_trans_end(a), 0);
	ck_assert_int_eq(o2_fs_sync(fs), 0);

	/* fill the log until one more big handle does not fit */
	for (;;) {
		o2_journal_stats(fs, &js);
		uint32_t used = js.tail ? (js.head + js.ring_blocks - js.tail) % js.ring_blocks : 0;

		if (used + big + 8 > js.ring_blocks)
			break;
		ck_assert_int_eq(o2_trans_begin(fs, big / 2, &a), 0);
		for (unsigned i = 0; i < big / 2; i++) {
			ck_assert_int_eq(o2_bnew(fs, x - 1 - i, O2_META_PLAIN, &buf), 0);
			ck_assert_int_eq(o2_trans_add(a, buf), 0);
			memset(buf->data, (int)i, fs->bs);
			o2_brelse(fs, buf);
		}
		ck_assert_int_eq(o2_trans_end(a), 0);
		ck_assert_int_eq(o2_fs_sync(fs), 0);
	}

	/* free X in a handle that stays open; another handle needs the log */
	ck_assert_int_eq(o2_trans_begin(fs, 1, &a), 0);
	ck_assert_int_eq(o2_trans_revoke(a, x), 0);
	o2_journal_stats(fs, &js);
	uint32_t checkpoints = js.checkpoints;

	ck_assert_int_eq(o2_trans_begin(fs, big, &b), 0);
	ck_assert_int_eq(o2_trans_end(b), 0);
	o2_journal_stats(fs, &js);
	if (js.checkpoints == checkpoints)
		printf("revoke then checkpoint: the journal did not checkpoint under the open "
		       "handle\n");
	ck_assert_int_eq(o2_trans_end(a), 0);
	o2_fs_abandon(fs); /* crash: the revoke never committed */

	ck_assert_int_eq(o2_crashdev_materialise(crash, o2_crashdev_nops(crash), 0, &dev), 0);
	ck_assert_int_eq(open_rw(dev, &clk, &fs, err, sizeof(err)), 0);
	ck_assert_int_eq(o2_blockdev_read(dev, got, fs->bs, x << fs->bits), 0);
	ck_assert_msg(memcmp(got, want, fs->bs) == 0,
		      "block %llu lost its committed content: a revoke that never committed "
		      "kept it from the checkpoint", (unsigned long long)x);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	free(want);
	free(got);
	o2_blockdev_free(dev);
	o2_blockdev_free(crash);
	o2_blockdev_free(mem);
}
END_TEST

/* One handle writing n free blocks from first down (block i: bytes tag*37+i), maybe synced. */
static void fill_handle(struct o2_fs *fs, unsigned n, uint64_t first, int sync, unsigned tag)
{
	struct o2_trans *t;
	struct o2_buf *b;

	ck_assert_int_eq(o2_trans_begin(fs, n, &t), 0);
	for (unsigned i = 0; i < n; i++) {
		ck_assert_int_eq(o2_bnew(fs, first - i, O2_META_PLAIN, &b), 0);
		ck_assert_int_eq(o2_trans_add(t, b), 0);
		memset(b->data, (int)((tag * 37 + i) & 0xff), fs->bs);
		o2_brelse(fs, b);
	}
	ck_assert_int_eq(o2_trans_end(t), 0);
	if (sync)
		ck_assert_int_eq(o2_fs_sync(fs), 0);
}

static uint32_t log_used(struct o2_fs *fs)
{
	struct o2_journal_stats js;

	o2_journal_stats(fs, &js);
	return js.tail ? (js.head + js.ring_blocks - js.tail) % js.ring_blocks : 0;
}

/*
 * The last transaction in the log, not committed, with its descriptor
 * torn: the sector holding the LAST_TAG tag did not reach the disk, so the
 * descriptor parses as many more tags than the log has room for.  The crash
 * is an ordinary one (the descriptor was written, not flushed), so the
 * volume must open, without that transaction.
 */
START_TEST(crash_torn_descriptor)
{
	const struct vol_image *v = &vols[VOL_4K];
	struct o2_blockdev *mem = vol_image_dev(v), *crash, *dev, *before;
	struct fake_clock clk = { 1700000000ull * 1000000000ull };
	struct o2_journal_stats js;
	struct o2_jmap jm;
	struct o2_fs *fs;
	char err[256];
	uint8_t sector[512];
	uint64_t top, desc_phys;
	uint32_t ring, desc_pos;
	size_t before_commit, p;
	int r;

	ck_assert_int_eq(o2_crashdev_new(mem, &crash), 0);
	ck_assert_int_eq(open_rw(crash, &clk, &fs, err, sizeof(err)), 0);
	o2_journal_stats(fs, &js);
	ring = js.ring_blocks;
	top = fs->nblocks - 1;
	/* fill the log to 72 free blocks: 67 copies, a descriptor, a commit, room to spare */
	while (ring - log_used(fs) > 200)
		fill_handle(fs, 100, top, 1, 1);
	if (ring - log_used(fs) > 72 + 2)
		fill_handle(fs, ring - log_used(fs) - 72 - 2, top, 1, 1);
	ck_assert_uint_eq(ring - log_used(fs), 72);

	o2_journal_stats(fs, &js);
	desc_pos = js.head;
	fill_handle(fs, 67, top - 200, 0, 2);
	before_commit = o2_crashdev_nops(crash);
	ck_assert_int_eq(o2_journal_commit(fs), 0);
	for (p = before_commit; !o2_crashdev_op_is_flush(crash, p); p++)
		;
	ck_assert_int_eq(o2_jmap_load(fs, 0, &jm), 0);
	ck_assert_int_eq(o2_jmap_phys(&jm, desc_pos, &desc_phys), 0);
	o2_jmap_free(&jm);
	desc_phys <<= fs->bits;
	o2_fs_abandon(fs);

	/* the crash: all writes before the pre-commit flush, but sector 1 of the descriptor old */
	ck_assert_int_eq(o2_crashdev_materialise(crash, p, 0, &dev), 0);
	ck_assert_int_eq(o2_crashdev_materialise(crash, before_commit, 0, &before), 0);
	ck_assert_int_eq(o2_blockdev_read(before, sector, 512, desc_phys + 512), 0);
	ck_assert_int_eq(o2_blockdev_write(dev, sector, 512, desc_phys + 512), 0);
	r = open_rw(dev, &clk, &fs, err, sizeof(err));
	ck_assert_msg(r == 0, "a torn, uncommitted last transaction makes the volume unopenable: "
		      "%d %s", r, err);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(before);
	o2_blockdev_free(dev);
	o2_blockdev_free(crash);
	o2_blockdev_free(mem);
}
END_TEST

/*
 * Reusing log space that a checkpoint freed.  Transaction T1 (the
 * "victim") is the oldest in the log; the log fills up; a handle forces a
 * checkpoint, and the transaction after it is written over the start of
 * the log - T1's descriptor and first copies, not its commit block.  The
 * crash comes before that transaction's first flush, and loses what a disk
 * may lose then: every write since the last flush may revert, here the
 * journal superblock and the block holding T1's descriptor.  Replay must
 * not then apply T1 with another transaction's blocks as its copies.
 */
START_TEST(crash_checkpoint_reuse)
{
	const struct vol_image *v = &vols[VOL_4K];
	struct o2_blockdev *mem = vol_image_dev(v), *crash, *img, *base;
	struct fake_clock clk = { 1700000000ull * 1000000000ull };
	struct o2_journal_stats js;
	struct o2_jmap jm;
	struct o2_fs *fs;
	char err[256];
	uint8_t *buf;
	uint64_t top, sb_phys, s_phys;
	uint32_t ring, start, free_blocks, bs;
	size_t c0, p, f;
	unsigned k, victims = 40;
	int r;

	ck_assert_int_eq(o2_crashdev_new(mem, &crash), 0);
	ck_assert_int_eq(open_rw(crash, &clk, &fs, err, sizeof(err)), 0);
	buf = malloc(fs->bs);
	top = fs->nblocks - 1;
	fill_handle(fs, 1, top - 300, 1, 9);
	ck_assert_int_eq(o2_journal_checkpoint(fs), 0);
	o2_journal_stats(fs, &js);
	ring = js.ring_blocks;
	start = js.head;
	fill_handle(fs, victims, top - 400, 1, 1); /* T1 at start */
	while (ring - log_used(fs) > 150)
		fill_handle(fs, 100, top, 1, 2);
	free_blocks = ring - log_used(fs);
	/* k copies + descriptor + commit overrun the free space by 12 blocks */
	k = free_blocks + 10;
	ck_assert_uint_le(k, o2_journal_max_credits(fs));
	o2_journal_stats(fs, &js);
	uint32_t checkpoints = js.checkpoints;

	fill_handle(fs, k, top - 500, 0, 3);
	o2_journal_stats(fs, &js);
	ck_assert_uint_eq(js.checkpoints, checkpoints + 1);
	c0 = o2_crashdev_nops(crash);
	ck_assert_int_eq(o2_journal_commit(fs), 0);
	for (p = c0; !o2_crashdev_op_is_flush(crash, p); p++)
		;
	for (f = p; f-- > 0 && !o2_crashdev_op_is_flush(crash, f);)
		;
	ck_assert_int_eq(o2_jmap_load(fs, 0, &jm), 0);
	sb_phys = jm.sb_phys << fs->bits;
	ck_assert_int_eq(o2_jmap_phys(&jm, start, &s_phys), 0);
	s_phys <<= fs->bits;
	o2_jmap_free(&jm);
	bs = fs->bs;
	o2_fs_abandon(fs);

	/* the disk at the crash, with two unflushed writes reverted to the last flush */
	ck_assert_int_eq(o2_crashdev_materialise(crash, p, 0, &img), 0);
	ck_assert_int_eq(o2_crashdev_materialise(crash, f + 1, 0, &base), 0);
	ck_assert_int_eq(o2_blockdev_read(base, buf, bs, sb_phys), 0);
	ck_assert_int_eq(o2_blockdev_write(img, buf, bs, sb_phys), 0);
	ck_assert_int_eq(o2_blockdev_read(base, buf, bs, s_phys), 0);
	ck_assert_int_eq(o2_blockdev_write(img, buf, bs, s_phys), 0);
	r = open_rw(img, &clk, &fs, err, sizeof(err));
	ck_assert_msg(r == 0, "open after the crash: %d %s", r, err);
	for (unsigned i = 0; i < victims; i++) {
		uint64_t blk = top - 400 - i;
		uint8_t want = (uint8_t)((1 * 37 + i) & 0xff);
		bool ok = true;

		ck_assert_int_eq(o2_blockdev_read(img, buf, fs->bs, blk << fs->bits), 0);
		for (uint32_t b = 0; b < fs->bs; b++)
			ok &= buf[b] == want;
		ck_assert_msg(ok, "block %llu (copy %u of the oldest transaction) was overwritten by "
			      "replay: the log was reused before the checkpoint that freed it was "
			      "durable", (unsigned long long)blk, i);
	}
	ck_assert_int_eq(o2_fs_close(fs), 0);
	free(buf);
	o2_blockdev_free(base);
	o2_blockdev_free(img);
	o2_blockdev_free(crash);
	o2_blockdev_free(mem);
}
END_TEST

#define FDS_SIZE (3u * 4096u)
#define FDS_OFF 4000u /* the overwrite: partial blocks at both ends */
#define FDS_LEN 5000u

static void fds_pattern(uint8_t *buf, size_t len, unsigned tag)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 7 + i / 509 + tag * 91 + 1);
}

/* The file's size and content on a replayed volume open on fs. */
static void fds_read(struct o2_fs *fs, uint64_t ino, uint64_t *size, uint8_t *buf)
{
	struct o2_inode *in;

	ck_assert_int_eq(o2_inode_get(fs, ino, &in), 0);
	*size = in->info.size;
	memset(buf, 0, FDS_SIZE);
	ck_assert_int_eq(o2_inode_read(fs, in, 0, buf, FDS_SIZE), (ssize_t)*size);
	o2_inode_unref(in);
}

/* As fds_read, for a file the crash may have lost: false if ino is no inode. */
static bool fds_try_read(struct o2_fs *fs, uint64_t ino, uint64_t *size, uint8_t *buf)
{
	struct o2_inode *in;

	if (o2_inode_get(fs, ino, &in) < 0)
		return false;
	o2_inode_unref(in);
	fds_read(fs, ino, size, buf);
	return true;
}

/*
 * fsck.ocfs2 replays a copy of dev (the disk as the crash left it); the
 * sizes and contents of n files as that replay leaves them (size
 * UINT64_MAX: no such inode).
 */
static void fds_fsck_replay_n(struct o2_blockdev *dev, unsigned nfiles, const uint64_t *ino,
			      uint64_t *size, uint8_t **buf)
{
	char dir[256], path[300], cmd[700];
	uint8_t *block = malloc(1u << 20);
	struct o2_blockdev *fdev;
	struct o2_fs *fs;
	char err[256];
	int fd, st;

	snprintf(dir, sizeof(dir), "%s/o2fds-XXXXXX", test_tmpdir());
	ck_assert(block && mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/vol.img", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	for (uint64_t off = 0; off < dev->size; off += 1u << 20) {
		size_t n = dev->size - off < (1u << 20) ? (size_t)(dev->size - off) : 1u << 20;

		ck_assert_int_eq(o2_blockdev_read(dev, block, n, off), 0);
		ck_assert(pwrite(fd, block, n, (off_t)off) == (ssize_t)n);
	}
	close(fd);
	free(block);
	/*
	 * As tests/journal does: after its replay fsck.ocfs2 1.8.7 wants the
	 * cluster stack (-F and a yes get past that warning) and stops there,
	 * so its status says nothing; the replay is what is compared.
	 */
	snprintf(cmd, sizeof(cmd), "echo y | PATH=\"$PATH:/usr/sbin:/sbin\" fsck.ocfs2 -F -fy %s "
		 ">%s.out 2>&1", path, path);
	st = system(cmd);
	ck_assert_msg(WIFEXITED(st), "fsck.ocfs2 -fy: status %d", st);
	ck_assert_int_eq(o2_blockdev_open_file(path, O2_DEV_RDONLY, &fdev), 0);
	ck_assert_msg(o2_fs_open(fdev, O2_OPEN_RDONLY, &fs, err, sizeof(err)) == 0, "%s", err);
	for (unsigned i = 0; i < nfiles; i++)
		if (!fds_try_read(fs, ino[i], &size[i], buf[i]))
			size[i] = UINT64_MAX;
	o2_fs_close(fs);
	o2_blockdev_free(fdev);
	snprintf(cmd, sizeof(cmd), "%s.out", path);
	unlink(cmd);
	unlink(path);
	rmdir(dir);
}

static void fds_fsck_replay(struct o2_blockdev *dev, uint64_t ino, uint64_t *size, uint8_t *buf)
{
	fds_fsck_replay_n(dev, 1, &ino, size, &buf);
	ck_assert_msg(*size != UINT64_MAX, "fsck.ocfs2's replay lost inode %llu",
		      (unsigned long long)ino);
}

/* The file's mtime on a replayed volume open on fs, in seconds. */
static int64_t fds_mtime(struct o2_fs *fs, uint64_t ino)
{
	struct o2_inode *in;
	int64_t t;

	ck_assert_int_eq(o2_inode_get(fs, ino, &in), 0);
	t = in->info.mtime.sec;
	o2_inode_unref(in);
	return t;
}

/*
 * One crash point of an overwrite of file ino from a to b, with a flush
 * making it durable at op flush_at: the volume replays and opens, the
 * file keeps FDS_SIZE bytes, every sector holds the old or the new bytes
 * (the new once p is past flush_at); with fsck, fsck.ocfs2 -fn passes and
 * its replay leaves the file as ours does.  *mtime (if not NULL): the
 * file's mtime, in seconds.  what names the case in messages.
 */
static void judge_overwrite(struct o2_blockdev *crash, size_t p, uint64_t seed, uint64_t ino,
			    const uint8_t *a, const uint8_t *b, size_t flush_at, bool fsck,
			    const char *what, int64_t *mtime)
{
	struct fake_clock clk = { 1700000000ull * 1000000000ull };
	uint8_t *got = malloc(FDS_SIZE), *theirs = malloc(FDS_SIZE);
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	uint64_t size, fsize;
	char err[256];

	ck_assert(got && theirs);
	ck_assert_int_eq(o2_crashdev_materialise(crash, p, seed, &dev), 0);
	ck_assert_msg(open_rw(dev, &clk, &fs, err, sizeof(err)) == 0,
		      "%s, crash point %zu seed %llu: open: %s", what, p, (unsigned long long)seed,
		      err);
	fds_read(fs, ino, &size, got);
	if (mtime)
		*mtime = fds_mtime(fs, ino);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	ck_assert_uint_eq(size, FDS_SIZE);
	for (uint32_t off = 0; off < FDS_SIZE; off += 512) {
		bool old = memcmp(got + off, a + off, 512) == 0;
		bool new = memcmp(got + off, b + off, 512) == 0;

		ck_assert_msg(new || (old && p <= flush_at),
			      "%s, crash point %zu (the flush: op %zu) seed %llu: sector at %u "
			      "holds %s", what, p, flush_at, (unsigned long long)seed, off,
			      old ? "the old data after the flush" : "neither old nor new data");
	}
	if (fsck) {
		struct o2_blockdev *raw;
		char at[160];

		snprintf(at, sizeof(at), "%s, crash point %zu seed %llu", what, p,
			 (unsigned long long)seed);
		judge_fsck(at, dev);
		ck_assert_int_eq(o2_crashdev_materialise(crash, p, seed, &raw), 0);
		fds_fsck_replay(raw, ino, &fsize, theirs);
		ck_assert_msg(fsize == size && memcmp(theirs, got, FDS_SIZE) == 0,
			      "%s: fsck.ocfs2's replay leaves the file otherwise (size %llu)", at,
			      (unsigned long long)fsize);
		o2_blockdev_free(raw);
	}
	o2_blockdev_free(dev);
	free(got);
	free(theirs);
}

/*
 * fdatasync after a write inside a file: the data goes in place and only
 * the device is flushed - no commit.  A file is written (extending) and
 * fdatasync'ed (that commits); then overwritten inside, fdatasync'ed
 * again (one flush, nothing else), and fsync'ed (its times: a commit).  A
 * crash at every write and flush of the last two, each disk also as a few
 * seeds leave the unflushed writes: the volume replays, holds the
 * committed size, the old or new bytes of every sector before the
 * fdatasync's flush and the new ones after it; fsck.ocfs2 -fn passes, and
 * fsck.ocfs2's replay leaves the file as ours does.
 */
START_TEST(crash_fdatasync)
{
	const struct vol_image *v = &vols[VOL_4K];
	struct o2_blockdev *mem = vol_image_dev(v), *crash;
	struct fake_clock clk = { 1700000000ull * 1000000000ull };
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };
	struct o2_fs_stats s0, s1, s2;
	uint8_t *a = malloc(FDS_SIZE), *b = malloc(FDS_SIZE);
	uint64_t ino;
	struct o2_fs *fs;
	char err[256];
	size_t w0, f0, c1, end, flush_at = 0, judged = 0;
	bool fsck = have_fsck();

	ck_assert(a && b);
	fds_pattern(a, FDS_SIZE, 1);
	memcpy(b, a, FDS_SIZE);
	fds_pattern(b + FDS_OFF, FDS_LEN, 2);
	ck_assert_int_eq(o2_crashdev_new(mem, &crash), 0);
	ck_assert_int_eq(open_rw(crash, &clk, &fs, err, sizeof(err)), 0);
	ck_assert_int_eq(o2_create(fs, o2_fs_super(fs)->root_blkno, "f", 1, &ni, &ino), 0);
	ck_assert_int_eq(o2_write(fs, ino, 0, a, FDS_SIZE), (ssize_t)FDS_SIZE);

	/* an extending write: fdatasync commits (the size, the clusters) */
	o2_fs_stats(fs, &s0);
	ck_assert_int_eq(o2_fs_fsync(fs, ino, true), 0);
	o2_fs_stats(fs, &s1);
	ck_assert_uint_eq(s1.journal_commits, s0.journal_commits + 1);
	ck_assert_uint_eq(s1.fsync_commits, s0.fsync_commits + 1);

	/* inside the file: the data in place, one flush, no commit */
	clk.ns += 1000000000ull;
	w0 = o2_crashdev_nops(crash);
	ck_assert_int_eq(o2_write(fs, ino, FDS_OFF, b + FDS_OFF, FDS_LEN), (ssize_t)FDS_LEN);
	f0 = o2_crashdev_nops(crash);
	ck_assert_uint_gt(f0, w0);
	for (size_t i = w0; i < f0; i++)
		ck_assert_msg(!o2_crashdev_op_is_flush(crash, i), "the write flushed (op %zu)", i);
	ck_assert_int_eq(o2_fs_fsync(fs, ino, true), 0);
	o2_fs_stats(fs, &s2);
	ck_assert_uint_eq(s2.journal_commits, s1.journal_commits);
	ck_assert_uint_eq(s2.journal_log_blocks, s1.journal_log_blocks);
	ck_assert_uint_eq(s2.device_flushes, s1.device_flushes + 1);
	ck_assert_uint_eq(s2.fsync_commits, s1.fsync_commits);
	c1 = o2_crashdev_nops(crash);
	ck_assert_uint_eq(c1, f0 + 1);
	ck_assert(o2_crashdev_op_is_flush(crash, f0));
	flush_at = f0;
	/* nothing new since: a second fdatasync costs nothing */
	ck_assert_int_eq(o2_fs_fsync(fs, ino, true), 0);
	ck_assert_uint_eq(o2_crashdev_nops(crash), c1);

	/* fsync: the times changed in the running transaction - a commit */
	ck_assert_int_eq(o2_fs_fsync(fs, ino, false), 0);
	o2_fs_stats(fs, &s1);
	ck_assert_uint_eq(s1.journal_commits, s2.journal_commits + 1);
	end = o2_crashdev_nops(crash);
	o2_fs_abandon(fs);

	for (size_t p = w0; p <= end; p++) {
		for (unsigned k = 0; k < 4; k++) {
			judge_overwrite(crash, p, k ? crash_seed(p * 5 + k) : 0, ino, a, b, flush_at,
					fsck && k < 2, "fdatasync", NULL);
			judged++;
		}
	}
	ck_assert_uint_ge(judged, 4 * 3);
	printf("fdatasync: ops %zu..%zu (its flush: %zu), crash points checked: %zu\n", w0, end,
	       flush_at, judged);
	free(a);
	free(b);
	o2_blockdev_free(crash);
	o2_blockdev_free(mem);
}
END_TEST


/*
 * A lock leaving a node that only overwrote file data: the transaction of
 * the inode's times goes home unlogged (home_times), no commit, no flush.
 * The file is written and checkpointed; overwritten inside and written
 * back for a lock going to NL (O2_WB_ALL), fsync'ed (a flush); overwritten
 * again and written back for EX to PR (O2_WB_HOME); then a new file joins
 * an overwrite's transaction, which must commit.  A crash at every write
 * and flush, each disk also as a few seeds leave the unflushed writes: the
 * volume replays, the file keeps its size, every sector holds the old or
 * the new bytes (the new after the fsync's flush), its mtime is one the
 * file had (the newest after that flush); fsck.ocfs2 -fn passes, and
 * fsck.ocfs2's replay leaves the file as ours does.
 */
START_TEST(crash_times_home)
{
	const struct vol_image *v = &vols[VOL_4K];
	struct o2_blockdev *mem = vol_image_dev(v), *crash;
	struct fake_clock clk = { 1700000000ull * 1000000000ull };
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };
	struct o2_fs_stats s0, s1;
	uint8_t *a = malloc(FDS_SIZE), *b = malloc(FDS_SIZE);
	uint64_t ino, g;
	int64_t t0, t1, t2, t3;
	struct o2_fs *fs;
	char err[256];
	size_t w0, flush_at, end, judged = 0;
	bool fsck = have_fsck();

	ck_assert(a && b);
	fds_pattern(a, FDS_SIZE, 3);
	memcpy(b, a, FDS_SIZE);
	fds_pattern(b + FDS_OFF, FDS_LEN, 4);
	ck_assert_int_eq(o2_crashdev_new(mem, &crash), 0);
	ck_assert_int_eq(open_rw(crash, &clk, &fs, err, sizeof(err)), 0);
	ck_assert_int_eq(o2_create(fs, o2_fs_super(fs)->root_blkno, "f", 1, &ni, &ino), 0);
	ck_assert_int_eq(o2_write(fs, ino, 0, a, FDS_SIZE), (ssize_t)FDS_SIZE);
	ck_assert_int_eq(o2_fs_writeback(fs, O2_WB_ALL), 0);
	t0 = (int64_t)(clk.ns / 1000000000ull);

	/* overwritten, a lock leaves: the times home, no commit, no flush */
	w0 = o2_crashdev_nops(crash);
	clk.ns += 5000000000ull;
	t1 = (int64_t)(clk.ns / 1000000000ull);
	o2_fs_stats(fs, &s0);
	ck_assert_int_eq(o2_write(fs, ino, FDS_OFF, b + FDS_OFF, FDS_LEN), (ssize_t)FDS_LEN);
	ck_assert_int_eq(o2_fs_writeback(fs, O2_WB_ALL), 0);
	o2_fs_stats(fs, &s1);
	ck_assert_uint_eq(s1.journal_times_home, s0.journal_times_home + 1);
	ck_assert_uint_eq(s1.journal_commits, s0.journal_commits);
	ck_assert_uint_eq(s1.device_flushes, s0.device_flushes);
	for (size_t i = w0; i < o2_crashdev_nops(crash); i++)
		ck_assert_msg(!o2_crashdev_op_is_flush(crash, i), "the write-back flushed (op %zu)", i);

	/* fsync: nothing to commit, one flush */
	ck_assert_int_eq(o2_fs_fsync(fs, ino, false), 0);
	o2_fs_stats(fs, &s0);
	ck_assert_uint_eq(s0.journal_commits, s1.journal_commits);
	ck_assert_uint_eq(s0.device_flushes, s1.device_flushes + 1);
	flush_at = o2_crashdev_nops(crash) - 1;
	ck_assert(o2_crashdev_op_is_flush(crash, flush_at));

	/* again, for EX to PR; then with a new file in the transaction: a commit */
	clk.ns += 5000000000ull;
	t2 = (int64_t)(clk.ns / 1000000000ull);
	ck_assert_int_eq(o2_write(fs, ino, FDS_OFF, b + FDS_OFF, FDS_LEN), (ssize_t)FDS_LEN);
	ck_assert_int_eq(o2_fs_writeback(fs, O2_WB_HOME), 0);
	clk.ns += 5000000000ull;
	t3 = (int64_t)(clk.ns / 1000000000ull);
	ck_assert_int_eq(o2_write(fs, ino, FDS_OFF, b + FDS_OFF, FDS_LEN), (ssize_t)FDS_LEN);
	ck_assert_int_eq(o2_create(fs, o2_fs_super(fs)->root_blkno, "g", 1, &ni, &g), 0);
	ck_assert_int_eq(o2_fs_writeback(fs, O2_WB_ALL), 0);
	o2_fs_stats(fs, &s1);
	ck_assert_uint_eq(s1.journal_times_home, s0.journal_times_home + 1);
	ck_assert_uint_eq(s1.journal_commits, s0.journal_commits + 1);
	end = o2_crashdev_nops(crash);
	o2_fs_abandon(fs);

	for (size_t p = w0; p <= end; p++) {
		for (unsigned k = 0; k < 4; k++) {
			uint64_t seed = k ? crash_seed(p * 7 + k) : 0;
			int64_t mt;

			judge_overwrite(crash, p, seed, ino, a, b, flush_at, fsck && k < 2,
					"times home", &mt);
			ck_assert_msg(p <= flush_at ? mt == t0 || mt == t1 : mt == t1 || mt == t2 || mt == t3,
				      "crash point %zu (fsync's flush: op %zu) seed %llu: mtime %lld "
				      "(the file's: %lld, %lld, %lld, %lld)", p, flush_at,
				      (unsigned long long)seed, (long long)mt, (long long)t0, (long long)t1,
				      (long long)t2, (long long)t3);
			judged++;
		}
	}
	ck_assert_uint_ge(judged, 4 * 3);
	printf("times home: ops %zu..%zu (fsync's flush: %zu), crash points checked: %zu\n", w0,
	       end, flush_at, judged);
	free(a);
	free(b);
	o2_blockdev_free(crash);
	o2_blockdev_free(mem);
}
END_TEST

/*
 * A commit in flight while the volume goes on: ocfs2d drops its lock for
 * an fsync's flushes, so other calls run between o2_fsync_step and the
 * flush it asked for.  File g is fsync'ed in steps; while its commit is in
 * flight (copies written, not flushed), f is overwritten in place and h is
 * created and written - a new running transaction - and only then does
 * the flush (sampled before them, as ocfs2d samples it) complete.  Then h
 * is fsync'ed in steps too, and while that commit is in flight o2_fs_sync
 * runs and must finish it itself; the late flush then changes nothing.  A
 * crash at every write and flush: the volume replays, fsck.ocfs2 -fn is
 * clean and agrees, g and h hold their data once their fsyncs returned.
 */
START_TEST(crash_fsync_in_flight)
{
	const struct vol_image *v = &vols[VOL_4K];
	struct o2_blockdev *mem = vol_image_dev(v), *crash;
	struct fake_clock clk = { 1700000000ull * 1000000000ull };
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };
	uint64_t root, f, g, h, size, fsize, w;
	uint8_t *a = malloc(FDS_SIZE), *b = malloc(FDS_SIZE), *got = malloc(FDS_SIZE),
		*theirs = malloc(FDS_SIZE);
	struct o2_fs_stats st0, st1;
	struct o2_fsync s;
	struct o2_fs *fs;
	char err[256];
	size_t first, g_done, h_done, end, judged = 0;
	bool fsck = have_fsck();
	int r;

	ck_assert(a && b && got && theirs);
	fds_pattern(a, FDS_SIZE, 3);
	fds_pattern(b, FDS_SIZE, 4);
	ck_assert_int_eq(o2_crashdev_new(mem, &crash), 0);
	ck_assert_int_eq(open_rw(crash, &clk, &fs, err, sizeof(err)), 0);
	root = o2_fs_super(fs)->root_blkno;
	ck_assert_int_eq(o2_create(fs, root, "f", 1, &ni, &f), 0);
	ck_assert_int_eq(o2_write(fs, f, 0, a, FDS_SIZE), (ssize_t)FDS_SIZE);
	ck_assert_int_eq(o2_fs_fsync(fs, f, false), 0);
	first = o2_crashdev_nops(crash);

	ck_assert_int_eq(o2_create(fs, root, "g", 1, &ni, &g), 0);
	ck_assert_int_eq(o2_write(fs, g, 0, b, 8192), 8192);
	o2_fs_stats(fs, &st0);
	o2_fsync_begin(fs, g, true, &s);
	ck_assert_int_eq(o2_fsync_step(fs, &s), O2_FSYNC_FLUSH);
	w = o2_fs_device_writes(fs);
	/* meanwhile, without the lock ocfs2d dropped */
	ck_assert_int_eq(o2_write(fs, f, 100, b, 5000), 5000);
	ck_assert_int_eq(o2_create(fs, root, "h", 1, &ni, &h), 0);
	ck_assert_int_eq(o2_write(fs, h, 0, b, FDS_SIZE), (ssize_t)FDS_SIZE);
	/* the flush ends; the commit block, its flush */
	ck_assert_int_eq(o2_fs_flushed(fs, w, o2_blockdev_flush(crash)), 0);
	while ((r = o2_fsync_step(fs, &s)) == O2_FSYNC_FLUSH) {
		w = o2_fs_device_writes(fs);
		ck_assert_int_eq(o2_fs_flushed(fs, w, o2_blockdev_flush(crash)), 0);
	}
	ck_assert_int_eq(r, 0);
	g_done = o2_crashdev_nops(crash);
	o2_fs_stats(fs, &st1);
	/* one commit (g's), not h's running one too */
	ck_assert_uint_eq(st1.journal_commits, st0.journal_commits + 1);

	/* h's commit in flight; o2_fs_sync finishes it, and commits nothing more */
	o2_fsync_begin(fs, h, true, &s);
	ck_assert_int_eq(o2_fsync_step(fs, &s), O2_FSYNC_FLUSH);
	w = o2_fs_device_writes(fs);
	ck_assert_int_eq(o2_fs_sync(fs), 0);
	h_done = o2_crashdev_nops(crash);
	o2_fs_stats(fs, &st0);
	ck_assert_uint_eq(st0.journal_commits, st1.journal_commits + 1);
	ck_assert_int_eq(o2_fs_flushed(fs, w, 0), 0);
	ck_assert_int_eq(o2_fsync_step(fs, &s), 0);
	ck_assert_uint_eq(o2_crashdev_nops(crash), h_done);
	end = h_done;
	o2_fs_abandon(fs);

	for (size_t p = first; p <= end; p++) {
		for (unsigned k = 0; k < 3; k++) {
			uint64_t seed = k ? crash_seed(p * 7 + k) : 0;
			struct o2_blockdev *dev;
			struct o2_inode *in;
			char what[96];

			snprintf(what, sizeof(what), "fsync in flight, crash point %zu seed %llu", p,
				 (unsigned long long)seed);
			ck_assert_int_eq(o2_crashdev_materialise(crash, p, seed, &dev), 0);
			ck_assert_msg(open_rw(dev, &clk, &fs, err, sizeof(err)) == 0, "%s: open: %s",
				      what, err);
			r = o2_inode_get(fs, g, &in);
			if (p >= g_done)
				ck_assert_msg(r == 0, "%s: g is gone after its fsync", what);
			if (r == 0) {
				o2_inode_unref(in);
				fds_read(fs, g, &size, got);
				ck_assert_msg(size == 0 || (size == 8192 && !memcmp(got, b, 8192)),
					      "%s: g holds %llu bytes, not its data", what,
					      (unsigned long long)size);
				ck_assert_msg(p < g_done || size == 8192, "%s: g lost its data", what);
			}
			r = o2_inode_get(fs, h, &in);
			if (p >= h_done)
				ck_assert_msg(r == 0, "%s: h is gone after its fsync", what);
			if (r == 0) {
				o2_inode_unref(in);
				fds_read(fs, h, &size, got);
				ck_assert_msg(p < h_done || (size == FDS_SIZE && !memcmp(got, b, FDS_SIZE)),
					      "%s: h lost its data (%llu bytes)", what,
					      (unsigned long long)size);
			}
			ck_assert_int_eq(o2_fs_close(fs), 0);
			if (fsck && k < 2) {
				struct o2_blockdev *raw;
				uint64_t osize;

				judge_fsck(what, dev);
				ck_assert_int_eq(o2_crashdev_materialise(crash, p, seed, &raw), 0);
				ck_assert_int_eq(open_rw(dev, &clk, &fs, err, sizeof(err)), 0);
				fds_read(fs, f, &osize, got);
				ck_assert_int_eq(o2_fs_close(fs), 0);
				fds_fsck_replay(raw, f, &fsize, theirs);
				ck_assert_msg(fsize == osize && memcmp(theirs, got, FDS_SIZE) == 0,
					      "%s: fsck.ocfs2's replay leaves f otherwise", what);
				o2_blockdev_free(raw);
			}
			o2_blockdev_free(dev);
			judged++;
		}
	}
	printf("fsync in flight: ops %zu..%zu (g durable at %zu, h at %zu), crash points "
	       "checked: %zu\n", first, end, g_done, h_done, judged);
	free(a);
	free(b);
	free(got);
	free(theirs);
	o2_blockdev_free(crash);
	o2_blockdev_free(mem);
}
END_TEST

/*
 * Batched commits: the next commit's log goes out while the previous
 * commit block waits for its flush, so that one flush serves both (see
 * journal.c, "Batching").  g is fsync'ed in steps up to its commit block;
 * before that block's flush, h is created, written and fsync'ed: its
 * copies join the flush.  Two commits, three flushes.  A crash at every
 * write and flush of both (and a few seeds for the unflushed writes): the
 * volume replays, g and h hold their data once their fsyncs returned and
 * are whole or absent before, fsck.ocfs2 -fn is clean, and fsck.ocfs2's
 * replay leaves g and h as ours does.
 */
START_TEST(crash_commit_batched)
{
	const struct vol_image *v = &vols[VOL_4K];
	struct o2_blockdev *mem = vol_image_dev(v), *crash;
	struct fake_clock clk = { 1700000000ull * 1000000000ull };
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };
	uint64_t root, f, ino[2], size[2], fsize[2], w;
	uint8_t *a = malloc(FDS_SIZE), *b = malloc(FDS_SIZE), *c = malloc(FDS_SIZE),
		*got[2] = { malloc(FDS_SIZE), malloc(FDS_SIZE) },
		*theirs[2] = { malloc(FDS_SIZE), malloc(FDS_SIZE) };
	struct o2_fs_stats st0, st1;
	struct o2_fsync sg, sh;
	struct o2_fs *fs;
	char err[256];
	size_t first, done[2], end, judged = 0;
	bool fsck = have_fsck();

	ck_assert(a && b && c && got[0] && got[1] && theirs[0] && theirs[1]);
	fds_pattern(a, FDS_SIZE, 5);
	fds_pattern(b, FDS_SIZE, 6);
	fds_pattern(c, FDS_SIZE, 7);
	ck_assert_int_eq(o2_crashdev_new(mem, &crash), 0);
	ck_assert_int_eq(open_rw(crash, &clk, &fs, err, sizeof(err)), 0);
	root = o2_fs_super(fs)->root_blkno;
	ck_assert_int_eq(o2_create(fs, root, "f", 1, &ni, &f), 0);
	ck_assert_int_eq(o2_write(fs, f, 0, a, FDS_SIZE), (ssize_t)FDS_SIZE);
	ck_assert_int_eq(o2_fs_fsync(fs, f, false), 0);
	first = o2_crashdev_nops(crash);

	o2_fs_stats(fs, &st0);
	ck_assert_int_eq(o2_create(fs, root, "g", 1, &ni, &ino[0]), 0);
	ck_assert_int_eq(o2_write(fs, ino[0], 0, b, 8192), 8192);
	o2_fsync_begin(fs, ino[0], true, &sg);
	ck_assert_int_eq(o2_fsync_step(fs, &sg), O2_FSYNC_FLUSH);
	w = o2_fs_device_writes(fs);
	ck_assert_int_eq(o2_fs_flushed(fs, w, o2_blockdev_flush(crash)), 0);
	/* g's copies are durable: its commit block is written, not yet flushed */
	ck_assert_int_eq(o2_fsync_step(fs, &sg), O2_FSYNC_FLUSH);

	/* meanwhile h is made and fsync'ed: its copies go out now */
	clk.ns += 1000000000ull;
	ck_assert_int_eq(o2_create(fs, root, "h", 1, &ni, &ino[1]), 0);
	ck_assert_int_eq(o2_write(fs, ino[1], 0, c, FDS_SIZE), (ssize_t)FDS_SIZE);
	o2_fsync_begin(fs, ino[1], true, &sh);
	ck_assert_int_eq(o2_fsync_step(fs, &sh), O2_FSYNC_FLUSH);
	o2_fs_stats(fs, &st1);
	ck_assert_uint_eq(st1.journal_commits, st0.journal_commits + 2);

	/* one flush: g durable, h's copies too */
	w = o2_fs_device_writes(fs);
	ck_assert_int_eq(o2_fs_flushed(fs, w, o2_blockdev_flush(crash)), 0);
	ck_assert_int_eq(o2_fsync_step(fs, &sg), 0);
	done[0] = o2_crashdev_nops(crash);
	/* h's commit block, and its flush */
	ck_assert_int_eq(o2_fsync_step(fs, &sh), O2_FSYNC_FLUSH);
	w = o2_fs_device_writes(fs);
	ck_assert_int_eq(o2_fs_flushed(fs, w, o2_blockdev_flush(crash)), 0);
	ck_assert_int_eq(o2_fsync_step(fs, &sh), 0);
	done[1] = o2_crashdev_nops(crash);
	o2_fs_stats(fs, &st1);
	ck_assert_uint_eq(st1.journal_commits, st0.journal_commits + 2);
	ck_assert_uint_eq(st1.device_flushes, st0.device_flushes + 3);
	end = done[1];
	o2_fs_abandon(fs);

	for (size_t p = first; p <= end; p++) {
		for (unsigned k = 0; k < 3; k++) {
			uint64_t seed = k ? crash_seed(p * 11 + k) : 0;
			const uint8_t *want[2] = { b, c };
			const uint64_t wsize[2] = { 8192, FDS_SIZE };
			struct o2_blockdev *dev;
			bool here[2];
			char what[96];

			snprintf(what, sizeof(what), "batched commits, crash point %zu seed %llu", p,
				 (unsigned long long)seed);
			ck_assert_int_eq(o2_crashdev_materialise(crash, p, seed, &dev), 0);
			ck_assert_msg(open_rw(dev, &clk, &fs, err, sizeof(err)) == 0, "%s: open: %s",
				      what, err);
			for (unsigned i = 0; i < 2; i++) {
				here[i] = fds_try_read(fs, ino[i], &size[i], got[i]);
				ck_assert_msg(here[i] || p < done[i], "%s: %c is gone after its fsync",
					      what, "gh"[i]);
				if (!here[i])
					size[i] = UINT64_MAX;
				else
					ck_assert_msg(size[i] == 0 || (size[i] == wsize[i] &&
						      !memcmp(got[i], want[i], wsize[i])),
						      "%s: %c holds %llu bytes, not its data", what,
						      "gh"[i], (unsigned long long)size[i]);
				ck_assert_msg(p < done[i] || size[i] == wsize[i], "%s: %c lost its data",
					      what, "gh"[i]);
			}
			/* h committed after g: never h without g */
			ck_assert_msg(!here[1] || here[0], "%s: h survived without g", what);
			ck_assert_int_eq(o2_fs_close(fs), 0);
			if (fsck && k < 2) {
				struct o2_blockdev *raw;

				judge_fsck(what, dev);
				ck_assert_int_eq(o2_crashdev_materialise(crash, p, seed, &raw), 0);
				fds_fsck_replay_n(raw, 2, ino, fsize, theirs);
				for (unsigned i = 0; i < 2; i++)
					ck_assert_msg(fsize[i] == size[i] &&
						      (size[i] == UINT64_MAX ||
						       !memcmp(theirs[i], got[i], FDS_SIZE)),
						      "%s: fsck.ocfs2's replay leaves %c otherwise", what,
						      "gh"[i]);
				o2_blockdev_free(raw);
			}
			o2_blockdev_free(dev);
			judged++;
		}
	}
	printf("batched commits: ops %zu..%zu (g durable at %zu, h at %zu), crash points "
	       "checked: %zu\n", first, end, done[0], done[1], judged);
	free(a);
	free(b);
	free(c);
	for (unsigned i = 0; i < 2; i++) {
		free(got[i]);
		free(theirs[i]);
	}
	o2_blockdev_free(crash);
	o2_blockdev_free(mem);
}
END_TEST

/*
 * Quotas across a crash.  Usage counted from the inodes themselves (walked
 * from the root) against usage in the quota files after the crashed volume
 * was opened (the journal replayed, the local quota files left in use read
 * back) and closed (their changes folded into the global files): the two
 * differ only as they did on the fresh volume (mkfs.ocfs2 does not count
 * lost+found), at every crash point.
 */
#define QIDS 16

struct qcount {
	uint32_t id[2][QIDS];
	int64_t space[2][QIDS], inodes[2][QIDS];
	unsigned n[2];
};

static void qadd(struct qcount *c, unsigned t, uint32_t id, int64_t space, int64_t inodes)
{
	unsigned i = 0;

	while (i < c->n[t] && c->id[t][i] != id)
		i++;
	if (i == c->n[t]) {
		ck_assert_uint_lt(c->n[t], QIDS);
		c->id[t][c->n[t]++] = id;
	}
	c->space[t][i] += space;
	c->inodes[t][i] += inodes;
}

struct qwalk {
	struct o2_fs *fs;
	struct qcount *c;
	uint64_t seen[256];
	unsigned nseen;
	uint64_t subdirs[16];
	unsigned nsub;
};

static int qwalk_entry(const struct o2_dirent *de, void *arg)
{
	struct qwalk *w = arg;
	struct o2_inode *in;

	if ((de->name_len == 1 && de->name[0] == '.') ||
	    (de->name_len == 2 && de->name[0] == '.' && de->name[1] == '.'))
		return 0;
	for (unsigned i = 0; i < w->nseen; i++)
		if (w->seen[i] == de->ino)
			return 0;
	ck_assert_uint_lt(w->nseen, 256);
	w->seen[w->nseen++] = de->ino;
	ck_assert_int_eq(o2_inode_get(w->fs, de->ino, &in), 0);
	const struct o2_inode_info *ii = o2_inode_info(in);

	for (unsigned t = 0; t < 2; t++)
		qadd(w->c, t, t ? ii->gid : ii->uid, (int64_t)ii->clusters * o2_fs_super(w->fs)->cluster_size, 1);
	if (S_ISDIR(ii->mode)) {
		ck_assert_uint_lt(w->nsub, 16);
		w->subdirs[w->nsub++] = de->ino;
	}
	o2_inode_unref(in);
	return 0;
}

static int qfile_row(void *arg, const struct o2_dquot *dq)
{
	struct qcount *c = ((struct qcount **)arg)[0];
	unsigned t = (unsigned)(uintptr_t)((struct qcount **)arg)[1];

	qadd(c, t, dq->id, -(int64_t)dq->space, -(int64_t)dq->inodes);
	return 0;
}

/* Walked usage less the quota files' usage, of dev (closed cleanly: read-only open). */
static void quota_gap(struct o2_blockdev *dev, struct qcount *gap)
{
	struct o2_fs *fs;
	char err[256];
	struct qwalk w = { .c = gap };

	memset(gap, 0, sizeof(*gap));
	ck_assert_msg(o2_fs_open(dev, 0, &fs, err, sizeof(err)) == 0, "open: %s", err);
	w.fs = fs;
	w.subdirs[w.nsub++] = o2_fs_super(fs)->root_blkno;
	/* the root itself counts */
	{
		struct o2_dirent root = { .ino = o2_fs_super(fs)->root_blkno, .name_len = 1 };

		memcpy(root.name, "/", 2);
		w.nsub = 0;
		qwalk_entry(&root, &w);
	}
	for (unsigned i = 0; i < w.nsub; i++) {
		struct o2_inode *d;

		ck_assert_int_eq(o2_inode_get(fs, w.subdirs[i], &d), 0);
		ck_assert_int_eq(o2_dir_iterate(fs, d, qwalk_entry, &w), 0);
		o2_inode_unref(d);
	}
	for (uintptr_t t = 0; t < 2; t++) {
		void *arg[2] = { gap, (void *)t };

		ck_assert_int_eq(o2_fs_quota_iterate(fs, (unsigned)t, qfile_row, arg), 0);
	}
	o2_fs_close(fs);
}

static bool gap_same(const struct qcount *a, const struct qcount *b, char *why, size_t len)
{
	for (unsigned t = 0; t < 2; t++)
		for (unsigned pass = 0; pass < 2; pass++) {
			const struct qcount *x = pass ? b : a, *y = pass ? a : b;

			for (unsigned i = 0; i < x->n[t]; i++) {
				int64_t ys = 0, yi = 0;

				for (unsigned j = 0; j < y->n[t]; j++)
					if (y->id[t][j] == x->id[t][i])
						ys = y->space[t][j], yi = y->inodes[t][j];
				if (ys != x->space[t][i] || yi != x->inodes[t][i]) {
					snprintf(why, len, "%s %u: the inodes hold %+lld bytes and %+lld "
						 "inodes more than the quota files (fresh: %+lld, %+lld)",
						 t ? "group" : "user", x->id[t][i],
						 (long long)(pass ? ys : x->space[t][i]),
						 (long long)(pass ? yi : x->inodes[t][i]),
						 (long long)(pass ? x->space[t][i] : ys),
						 (long long)(pass ? x->inodes[t][i] : yi));
					return false;
				}
			}
		}
	return true;
}

START_TEST(crash_quota)
{
	const struct vol_image *v = &vols[VOL_QUOTA];
	struct o2_blockdev *mem = vol_image_dev(v), *crash;
	struct fake_clock clk = { 1700000000ull * 1000000000ull };
	struct qcount fresh, gap;
	uint64_t ino[8], dir;
	uint8_t *buf = malloc(300000);
	struct o2_fs *fs;
	char err[256], why[256];
	size_t first, end, judged = 0;
	bool fsck = have_fsck();

	ck_assert(buf);
	memset(buf, 0x5a, 300000);
	quota_gap(mem, &fresh);
	ck_assert_int_eq(o2_crashdev_new(mem, &crash), 0);
	first = o2_crashdev_nops(crash);
	ck_assert_int_eq(open_rw(crash, &clk, &fs, err, sizeof(err)), 0);
	uint64_t root = o2_fs_super(fs)->root_blkno;
	struct o2_new_inode dn = { .mode = S_IFDIR | 0755, .uid = 1001, .gid = 2001 };

	ck_assert_int_eq(o2_mkdir(fs, root, "d", 1, &dn, &dir), 0);
	for (unsigned i = 0; i < 8; i++) {
		struct o2_new_inode ni = { .mode = S_IFREG | 0644, .uid = 1000 + i % 3,
					   .gid = 2000 + i % 2 };
		char name[8];

		snprintf(name, sizeof(name), "f%u", i);
		ck_assert_int_eq(o2_create(fs, i < 4 ? root : dir, name, strlen(name), &ni, &ino[i]),
				 0);
		ck_assert_int_eq(o2_write(fs, ino[i], 0, buf, 5000 + 30000 * i), 5000 + 30000 * i);
		if (i == 3)
			ck_assert_int_eq(o2_fs_sync(fs), 0); /* a fold, mid-way */
	}
	ck_assert_int_eq(o2_setattr(fs, ino[1], &(struct o2_setattr){ .uid = 1005, .gid = 2003 },
				    O2_SET_UID | O2_SET_GID), 0);
	ck_assert_int_eq(o2_truncate(fs, ino[7], 1000), 0);
	ck_assert_int_eq(o2_unlink(fs, dir, "f6", 2), 0);
	ck_assert_int_eq(o2_fs_sync(fs), 0);
	ck_assert_int_eq(o2_write(fs, ino[2], 300000, buf, 200000), 200000);
	ck_assert_int_eq(o2_unlink(fs, root, "f0", 2), 0);
	ck_assert_int_eq(o2_fs_writeback(fs, O2_WB_ALL), 0);
	end = o2_crashdev_nops(crash);
	o2_fs_abandon(fs);

	for (size_t p = first; p <= end; p += 1 + (end - first) / 150) {
		for (unsigned k = 0; k < 2; k++) {
			uint64_t seed = k ? crash_seed(p * 13 + k) : 0;
			struct o2_blockdev *dev;
			char what[96];

			snprintf(what, sizeof(what), "quotas, crash point %zu seed %llu", p,
				 (unsigned long long)seed);
			ck_assert_int_eq(o2_crashdev_materialise(crash, p, seed, &dev), 0);
			ck_assert_msg(open_rw(dev, &clk, &fs, err, sizeof(err)) == 0, "%s: open: %s",
				      what, err);
			ck_assert_msg(o2_fs_close(fs) == 0, "%s: close", what);
			quota_gap(dev, &gap);
			ck_assert_msg(gap_same(&gap, &fresh, why, sizeof(why)), "%s: %s", what, why);
			if (fsck && !k && p % 4 == 0)
				judge_fsck(what, dev);
			o2_blockdev_free(dev);
			judged++;
		}
	}
	printf("quotas: ops %zu..%zu, crash points checked: %zu\n", first, end, judged);
	free(buf);
	o2_blockdev_free(crash);
	o2_blockdev_free(mem);
}
END_TEST

static struct wl_params params(uint64_t seed, unsigned handles, unsigned big_max)
{
	return (struct wl_params){
		.seed = seed,
		.handles = handles,
		.pool = 192,
		.kmax = 8,
		.big_pct = 3,
		.big_max = big_max,
		.revoke_pct = 12,
		.sync_pct = 20,
	};
}

START_TEST(crash_4k)
{
	struct wl_params p = params(1 + (uint64_t)_i, 1400, 160);

	harness_run(&vols[VOL_4K], &p, 3);
}
END_TEST

START_TEST(crash_1k)
{
	struct wl_params p = params(101, 1600, 180);

	harness_run(&vols[VOL_1K], &p, 2);
}
END_TEST

START_TEST(crash_metaecc)
{
	struct wl_params p = params(201, 1000, 160);

	harness_run(&vols[VOL_ECC], &p, 2);
}
END_TEST

int main(int argc, char **argv)
{
	test_env_init();
	SRunner *sr;
	Suite *s;
	TCase *tc;
	int failed;

	for (int i = 1; i < argc; i++)
		quick |= strcmp(argv[i], "--quick") == 0;
	if (!have_mkfs()) {
		printf("SKIP: mkfs.ocfs2 (ocfs2-tools) is not installed\n");
		return SKIP_CODE;
	}
	vol_image_make(&vols[VOL_4K], "4k", 16u << 20, "-b 4096 -C 4096 -J size=4M");
	vol_image_make(&vols[VOL_1K], "1k", 8u << 20, "-b 1024 -C 4096 -J size=4M");
	vol_image_make(&vols[VOL_ECC], "4k-metaecc", 16u << 20,
		       "-b 4096 -C 4096 -J size=4M --fs-features=metaecc");
	vol_image_make(&vols[VOL_QUOTA], "4k-quota", 32u << 20,
		       "-b 4096 -C 4096 -J size=4M --fs-feature-level=max-features");

	s = suite_create("crash");
	tc = tcase_create("consistency");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, crash_4k, 0, quick ? 1 : 2);
	tcase_add_test(tc, crash_1k);
	tcase_add_test(tc, crash_metaecc);
	tcase_add_test(tc, crash_log_reuse);
	tcase_add_test(tc, crash_revoke_then_checkpoint);
	tcase_add_test(tc, crash_torn_descriptor);
	tcase_add_test(tc, crash_checkpoint_reuse);
	tcase_add_test(tc, crash_fdatasync);
	tcase_add_test(tc, crash_times_home);
	tcase_add_test(tc, crash_fsync_in_flight);
	tcase_add_test(tc, crash_commit_batched);
	tcase_add_test(tc, crash_quota);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	for (int i = 0; i < NVOLS; i++)
		vol_image_free(&vols[i]);
	return failed ? 1 : 0;
}
