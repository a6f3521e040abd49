/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * o2_mkfs on memory devices: every block size, cluster size and feature
 * level makes a volume our own reader opens and walks with the geometry and
 * features asked for; the same inputs give the same bytes; bad options and
 * small devices give clear errors; failing writes give clean errors; a
 * format cut short before its last write is no volume.  (The real
 * ocfs2-tools judge the result in test_format.py.)
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "o2fs/o2fs.h"

#define MiB (1024ull * 1024ull)

static const unsigned block_sizes[] = { 512, 1024, 2048, 4096 };
static const unsigned cluster_sizes[] = { 4096, 65536, 1u << 20 };
static const enum o2_mkfs_level levels[] = { O2_MKFS_LEVEL_MAX_COMPAT, O2_MKFS_LEVEL_DEFAULT,
					     O2_MKFS_LEVEL_MAX_FEATURES };

/* A fixed byte stream standing in for getrandom(2). */
static int fake_random(void *arg, void *buf, size_t len)
{
	unsigned *state = arg;
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++) {
		*state = *state * 1103515245u + 12345u;
		p[i] = (uint8_t)(*state >> 16);
	}
	return 0;
}

static uint64_t fake_clock(void *arg)
{
	(void)arg;
	return 1700000000ull * 1000000000ull;
}

static void base_opts(struct o2_mkfs_opts *o, unsigned *seed)
{
	memset(o, 0, sizeof(*o));
	o->random = fake_random;
	o->random_arg = seed;
	o->now_ns = fake_clock;
}

static unsigned journal_for(unsigned cs)
{
	return cs >= (1u << 20) ? 16 : 4;
}

/* Format, open with our reader, walk everything, compare with what was asked. */
static void make_and_check(unsigned bs, unsigned cs, enum o2_mkfs_level level, unsigned slots,
			   const char *stack, bool local)
{
	struct o2_blockdev *dev;
	struct o2_mkfs_opts o;
	struct o2_mkfs_info info, plan;
	struct o2_fs *fs;
	struct o2_walk_stats ws;
	const struct o2_super_info *si;
	char err[512];
	unsigned seed = bs * 7 + cs + level;
	int r;

	base_opts(&o, &seed);
	o.block_size = bs;
	o.cluster_size = cs;
	o.level = level;
	o.slots = slots;
	o.label = "mkfs-test";
	o.journal_size = journal_for(cs) * MiB;
	if (stack) {
		o.cluster_stack = stack;
		o.cluster_name = "clu";
	}
	if (local)
		o.mount = O2_MKFS_MOUNT_LOCAL;
	ck_assert_int_eq(o2_blockdev_new_memory(128 * MiB, &dev), 0);
	r = o2_mkfs_plan(dev->size, &o, &plan, err, sizeof(err));
	ck_assert_msg(r == 0, "plan b%u c%u: %s", bs, cs, err);
	r = o2_mkfs(dev, &o, NULL, NULL, &info, err, sizeof(err));
	ck_assert_msg(r == 0, "mkfs b%u c%u level %d: %s", bs, cs, level, err);

	/* the plan saw the same layout */
	ck_assert_uint_eq(plan.blocks, info.blocks);
	ck_assert_uint_eq(plan.used_clusters, info.used_clusters);
	ck_assert_uint_eq(plan.root_blkno, info.root_blkno);
	ck_assert_uint_eq(plan.features.incompat, info.features.incompat);

	r = o2_fs_open(dev, O2_OPEN_RDONLY, &fs, err, sizeof(err));
	ck_assert_msg(r == 0, "open b%u c%u level %d: %s", bs, cs, level, err);
	si = o2_fs_super(fs);
	ck_assert_uint_eq(si->block_size, bs);
	ck_assert_uint_eq(si->cluster_size, cs);
	ck_assert_uint_eq(si->max_slots, info.slots);
	ck_assert_str_eq(si->label, "mkfs-test");
	ck_assert_mem_eq(si->uuid, info.uuid, 16);
	ck_assert_uint_eq(si->feature_compat, info.features.compat);
	ck_assert_uint_eq(si->feature_incompat, info.features.incompat);
	ck_assert_uint_eq(si->feature_ro_compat, info.features.ro_compat);
	ck_assert_uint_eq(si->total_clusters, info.clusters);
	ck_assert_uint_eq(si->used_clusters, info.used_clusters);
	ck_assert_uint_eq(si->fs_generation, info.generation);
	if (stack) {
		ck_assert_str_eq(si->stack, stack);
		ck_assert_str_eq(si->cluster_name, "clu");
	}
	r = o2_fs_walk(fs, &ws);
	ck_assert_msg(r == 0, "walk b%u c%u level %d: %s", bs, cs, level, o2_fs_error(fs));
	for (unsigned s = 0; s < info.slots; s++) {
		struct o2_journal_info ji;

		ck_assert_int_eq(o2_journal_info(fs, s, &ji), 0);
		ck_assert_uint_eq((uint64_t)ji.maxlen * ji.block_size, info.journal_bytes);
		ck_assert_uint_eq(ji.first, bs == 512 ? 2 : 1);
		ck_assert_uint_eq(ji.start, 1);
		ck_assert_uint_eq(ji.sequence, 1);
		ck_assert_mem_eq(ji.uuid, info.uuid, 16);
	}
	{
		uint64_t blkno;

		ck_assert_int_eq(o2_path_lookup(fs, "/lost+found", &blkno), 0);
		r = o2_sysfile_lookup(fs, O2_SYS_USER_QUOTA, 0, &blkno);
		ck_assert_int_eq(r, level == O2_MKFS_LEVEL_MAX_FEATURES ? 0 : -ENOENT);
	}
	o2_fs_close(fs);
	o2_blockdev_free(dev);
}

START_TEST(test_matrix)
{
	unsigned bs = block_sizes[_i / 9], cs = cluster_sizes[(_i / 3) % 3];

	make_and_check(bs, cs, levels[_i % 3], 2, NULL, false);
}
END_TEST

START_TEST(test_stacks)
{
	make_and_check(4096, 4096, O2_MKFS_LEVEL_DEFAULT, 4, "pcmk", false);
	make_and_check(1024, 4096, O2_MKFS_LEVEL_DEFAULT, 2, "o2cb", false);
	make_and_check(2048, 65536, O2_MKFS_LEVEL_MAX_FEATURES, 0, NULL, true);
	make_and_check(512, 4096, O2_MKFS_LEVEL_DEFAULT, 16, NULL, false);
	make_and_check(1024, 4096, O2_MKFS_LEVEL_MAX_FEATURES, 12, NULL, false);
}
END_TEST

/* Same inputs, same bytes; a different seed, a different volume. */
START_TEST(test_deterministic)
{
	struct o2_blockdev *a, *b;
	struct o2_mkfs_opts o;
	unsigned seed;
	char err[256];

	ck_assert_int_eq(o2_blockdev_new_memory(64 * MiB, &a), 0);
	ck_assert_int_eq(o2_blockdev_new_memory(64 * MiB, &b), 0);
	seed = 42;
	base_opts(&o, &seed);
	o.level = O2_MKFS_LEVEL_MAX_FEATURES;
	ck_assert_int_eq(o2_mkfs(a, &o, NULL, NULL, NULL, err, sizeof(err)), 0);
	seed = 42;
	ck_assert_int_eq(o2_mkfs(b, &o, NULL, NULL, NULL, err, sizeof(err)), 0);
	ck_assert(!memcmp(o2_blockdev_memory_data(a), o2_blockdev_memory_data(b), 64 * MiB));
	seed = 43;
	ck_assert_int_eq(o2_mkfs(b, &o, NULL, NULL, NULL, err, sizeof(err)), 0);
	ck_assert(memcmp(o2_blockdev_memory_data(a), o2_blockdev_memory_data(b), 64 * MiB));
	o2_blockdev_free(a);
	o2_blockdev_free(b);
}
END_TEST

/* Explicit identity wins over the random source. */
START_TEST(test_explicit_identity)
{
	struct o2_blockdev *dev;
	struct o2_mkfs_opts o;
	struct o2_mkfs_info info;
	unsigned seed = 1;
	char err[256];
	static const uint8_t uuid[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };

	ck_assert_int_eq(o2_blockdev_new_memory(64 * MiB, &dev), 0);
	base_opts(&o, &seed);
	o.have_uuid = true;
	memcpy(o.uuid, uuid, 16);
	o.have_generation = true;
	o.generation = 0x12345678;
	o.have_dx_seed = true;
	o.dx_seed[0] = 1;
	o.dx_seed[1] = 2;
	o.dx_seed[2] = 3;
	ck_assert_int_eq(o2_mkfs(dev, &o, NULL, NULL, &info, err, sizeof(err)), 0);
	ck_assert_mem_eq(info.uuid, uuid, 16);
	ck_assert_uint_eq(info.generation, 0x12345678);
	ck_assert_uint_eq(info.dx_seed[2], 3);
	ck_assert_int_eq(info.format_time, 1700000000);
	o2_blockdev_free(dev);
}
END_TEST

struct bad_case {
	unsigned bs, cs, slots;
	const char *label;
	uint64_t journal, dev_size;
	const char *stack, *name;
	int want;
	const char *msg;
};

static const struct bad_case bad_cases[] = {
	{ 3000, 0, 0, NULL, 0, 64 * MiB, NULL, NULL, -EINVAL, "block size 3000" },
	{ 0, 2048, 0, NULL, 0, 64 * MiB, NULL, NULL, -EINVAL, "cluster size 2048" },
	{ 0, 3u << 20, 0, NULL, 0, 64 * MiB, NULL, NULL, -EINVAL, "cluster size" },
	{ 0, 0, 300, NULL, 0, 64 * MiB, NULL, NULL, -EINVAL, "300 slots" },
	{ 0, 0, 0, "0123456789012345678901234567890123456789012345678901234567890123", 0, 64 * MiB,
	  NULL, NULL, -EINVAL, "label of 64 bytes" },
	{ 0, 0, 0, NULL, 3 * MiB, 64 * MiB, NULL, NULL, -EINVAL, "at least 4M" },
	{ 0, 1u << 20, 0, NULL, 4 * MiB, 64 * MiB, NULL, NULL, -EINVAL, "nine clusters" },
	{ 0, 0, 4, NULL, 32 * MiB, 64 * MiB, NULL, NULL, -ENOSPC, "too big" },
	{ 0, 0, 0, NULL, 0, 1 * MiB, NULL, NULL, -ENOSPC, "too small" },
	{ 0, 0, 0, NULL, 0, 4 * MiB, NULL, NULL, -ENOSPC, "too small" },
	{ 0, 0, 0, NULL, 0, 64 * MiB, "pcmk", NULL, -EINVAL, "--cluster-name" },
	{ 0, 0, 0, NULL, 0, 64 * MiB, NULL, "x", -EINVAL, "--cluster-stack" },
	{ 0, 0, 0, NULL, 0, 64 * MiB, "heartbeat", "x", -EINVAL, "unknown cluster stack" },
	{ 0, 0, 0, NULL, 0, 64 * MiB, "o2cb", "a-b", -EINVAL, "alphanumeric" },
	{ 0, 0, 0, NULL, 0, 64 * MiB, "pcmk", "0123456789abcdefg", -EINVAL, "1 to 16" },
	{ 512, 1u << 20, 255, NULL, 16 * MiB, 8192 * MiB, NULL, NULL, -EINVAL, "fewer slots" },
};

START_TEST(test_bad_options)
{
	const struct bad_case *c = &bad_cases[_i];
	struct o2_mkfs_opts o;
	unsigned seed = 7;
	char err[512] = "";
	int r;

	base_opts(&o, &seed);
	o.block_size = c->bs;
	o.cluster_size = c->cs;
	o.slots = c->slots;
	o.label = c->label;
	o.journal_size = c->journal;
	o.cluster_stack = c->stack;
	o.cluster_name = c->name;
	r = o2_mkfs_plan(c->dev_size, &o, NULL, err, sizeof(err));
	ck_assert_msg(r == c->want, "case %d: got %d (%s), want %d", _i, r, err, c->want);
	ck_assert_msg(strstr(err, c->msg), "case %d: message '%s' lacks '%s'", _i, err, c->msg);
}
END_TEST

START_TEST(test_parse_features)
{
	struct o2_features on = { 0 }, off = { 0 };
	char err[256];

	ck_assert_int_eq(o2_mkfs_parse_features("unwritten,metaecc", &on, &off, err, sizeof(err)), 0);
	ck_assert(on.incompat & O2_FEATURE_INCOMPAT_SPARSE_ALLOC); /* unwritten needs sparse */
	ck_assert(on.ro_compat & O2_FEATURE_RO_COMPAT_UNWRITTEN);
	ck_assert(on.incompat & O2_FEATURE_INCOMPAT_META_ECC);
	memset(&on, 0, sizeof(on));
	ck_assert_int_eq(o2_mkfs_parse_features("nosparse,,", &on, &off, err, sizeof(err)), 0);
	ck_assert(off.ro_compat & O2_FEATURE_RO_COMPAT_UNWRITTEN); /* so no unwritten either */
	memset(&off, 0, sizeof(off));
	ck_assert_int_eq(o2_mkfs_parse_features("turbo", &on, &off, err, sizeof(err)), -EINVAL);
	ck_assert(strstr(err, "'turbo'"));
	ck_assert_int_eq(o2_mkfs_parse_features("sparse,nosparse", &on, &off, err, sizeof(err)),
			 -EINVAL);
	ck_assert(strstr(err, "sparse"));
}
END_TEST

/* Every write failing in turn: a clean error, never a crash. */
START_TEST(test_write_faults)
{
	struct o2_blockdev *mem, *fault;
	struct o2_mkfs_opts o;
	struct o2_fault_counts counts;
	unsigned seed = 3;
	char err[512];
	uint64_t total;

	ck_assert_int_eq(o2_blockdev_new_memory(64 * MiB, &mem), 0);
	ck_assert_int_eq(o2_faultdev_new(mem, &fault), 0);
	base_opts(&o, &seed);
	o.block_size = 1024;
	o.journal_size = 4 * MiB;
	o.level = O2_MKFS_LEVEL_MAX_FEATURES;
	ck_assert_int_eq(o2_mkfs(fault, &o, NULL, NULL, NULL, err, sizeof(err)), 0);
	o2_faultdev_counts(fault, &counts);
	total = counts.writes;
	ck_assert_uint_gt(total, 10);
	for (uint64_t n = 1; n <= total; n += (n < 50 ? 1 : 37)) {
		struct o2_fault_plan plan = { .fail_write = n };
		struct o2_blockdev *f2;
		int r;

		ck_assert_int_eq(o2_faultdev_new(mem, &f2), 0);
		o2_faultdev_set_plan(f2, &plan);
		r = o2_mkfs(f2, &o, NULL, NULL, NULL, err, sizeof(err));
		ck_assert_msg(r == -EIO, "write %llu failing gave %d", (unsigned long long)n, r);
		ck_assert(strstr(err, "writing"));
		o2_blockdev_free(f2);
	}
	{
		struct o2_fault_plan plan = { .fail_flush = 1 };
		struct o2_blockdev *f2;

		ck_assert_int_eq(o2_faultdev_new(mem, &f2), 0);
		o2_faultdev_set_plan(f2, &plan);
		ck_assert_int_eq(o2_mkfs(f2, &o, NULL, NULL, NULL, err, sizeof(err)), -EIO);
		o2_blockdev_free(f2);
	}
	o2_blockdev_free(fault);
	o2_blockdev_free(mem);
}
END_TEST

/* Until the superblock is written, the device holds no volume. */
START_TEST(test_superblock_last)
{
	struct o2_blockdev *mem, *crash, *img;
	struct o2_mkfs_opts o;
	struct o2_fs *fs;
	unsigned seed = 5;
	char err[512];
	size_t nops, last_flush = 0, prev_flush = 0;

	ck_assert_int_eq(o2_blockdev_new_memory(32 * MiB, &mem), 0);
	ck_assert_int_eq(o2_crashdev_new(mem, &crash), 0);
	base_opts(&o, &seed);
	o.block_size = 4096;
	o.journal_size = 4 * MiB;
	ck_assert_int_eq(o2_mkfs(crash, &o, NULL, NULL, NULL, err, sizeof(err)), 0);
	nops = o2_crashdev_nops(crash);
	for (size_t i = 0; i < nops; i++)
		if (o2_crashdev_op_is_flush(crash, i)) {
			prev_flush = last_flush;
			last_flush = i;
		}
	ck_assert_uint_gt(last_flush, prev_flush);
	/* everything up to the superblock (the op before the last flush) */
	ck_assert_int_eq(o2_crashdev_materialise(crash, last_flush - 1, 0, &img), 0);
	ck_assert_int_eq(o2_fs_open(img, O2_OPEN_RDONLY, &fs, err, sizeof(err)), -ENODATA);
	o2_blockdev_free(img);
	/* everything but the final flush: complete and valid */
	ck_assert_int_eq(o2_crashdev_materialise(crash, last_flush, 0, &img), 0);
	ck_assert_int_eq(o2_fs_open(img, O2_OPEN_RDONLY, &fs, err, sizeof(err)), 0);
	o2_fs_close(fs);
	o2_blockdev_free(img);
	o2_blockdev_free(crash);
	o2_blockdev_free(mem);
}
END_TEST

/* Planning only: a volume over 2^32 blocks gets 64-bit journals, or a refusal with block32. */
START_TEST(test_huge_plan)
{
	struct o2_mkfs_opts o;
	struct o2_mkfs_info info;
	unsigned seed = 11;
	char err[512];
	uint64_t bytes = 20ull << 40;

	base_opts(&o, &seed);
	ck_assert_int_eq(o2_mkfs_plan(bytes, &o, &info, err, sizeof(err)), 0);
	ck_assert_uint_eq(info.block_size, 4096);
	ck_assert_uint_eq(info.cluster_size, 8192); /* 4K clusters would be over 2^32 */
	ck_assert(info.journal64);
	ck_assert_uint_eq(info.slots, 16);
	ck_assert_uint_eq(info.journal_bytes, 256 * MiB);
	ck_assert_uint_eq(info.backup_supers, 6);
	ck_assert_uint_eq(info.backup_super_blkno[5], (1ull << 40) / 4096);
	o.journal64 = O2_MKFS_J64_OFF;
	ck_assert_int_eq(o2_mkfs_plan(bytes, &o, &info, err, sizeof(err)), -EINVAL);
	ck_assert(strstr(err, "block64"));
	/* 2 TiB: 4K clusters, no 64-bit journal unless asked */
	base_opts(&o, &seed);
	ck_assert_int_eq(o2_mkfs_plan(2ull << 40, &o, &info, err, sizeof(err)), 0);
	ck_assert_uint_eq(info.cluster_size, 4096);
	ck_assert(!info.journal64);
	o.journal64 = O2_MKFS_J64_ON;
	ck_assert_int_eq(o2_mkfs_plan(2ull << 40, &o, &info, err, sizeof(err)), 0);
	ck_assert(info.journal64);
	/* -T datafiles: 128K clusters and 32M journals on a 10 GiB volume */
	base_opts(&o, &seed);
	o.type = O2_MKFS_TYPE_DATAFILES;
	ck_assert_int_eq(o2_mkfs_plan(10ull << 30, &o, &info, err, sizeof(err)), 0);
	ck_assert_uint_eq(info.cluster_size, 128 * 1024);
	ck_assert_uint_eq(info.journal_bytes, 8192ull * 4096);
	ck_assert_int_eq(o2_mkfs_plan(1ull << 30, &o, &info, err, sizeof(err)), -ENOSPC);
	ck_assert(strstr(err, "2 GiB"));
}
END_TEST

static unsigned progress_calls, progress_last, progress_total;

static void count_progress(void *arg, unsigned done, unsigned total)
{
	(void)arg;
	ck_assert_uint_le(done, total);
	ck_assert_uint_ge(done, progress_last);
	progress_calls++;
	progress_last = done;
	progress_total = total;
}

START_TEST(test_progress)
{
	struct o2_blockdev *dev;
	struct o2_mkfs_opts o;
	unsigned seed = 9;
	char err[256];

	ck_assert_int_eq(o2_blockdev_new_memory(128 * MiB, &dev), 0);
	base_opts(&o, &seed);
	o.journal_size = 16 * MiB;
	ck_assert_int_eq(o2_mkfs(dev, &o, count_progress, NULL, NULL, err, sizeof(err)), 0);
	ck_assert_uint_gt(progress_calls, 10);
	ck_assert_uint_eq(progress_last, progress_total);
	o2_blockdev_free(dev);
}
END_TEST

static Suite *mkfs_suite(void)
{
	Suite *s = suite_create("mkfs");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test_matrix, 0, 36);
	tcase_add_test(tc, test_stacks);
	tcase_add_test(tc, test_deterministic);
	tcase_add_test(tc, test_explicit_identity);
	tcase_add_loop_test(tc, test_bad_options, 0,
			    (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
	tcase_add_test(tc, test_parse_features);
	tcase_add_test(tc, test_write_faults);
	tcase_add_test(tc, test_superblock_last);
	tcase_add_test(tc, test_progress);
	tcase_add_test(tc, test_huge_plan);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(mkfs_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
