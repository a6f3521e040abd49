/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The test devices themselves: the crash-recording device (op log,
 * materialise semantics: flushed writes always present, seed 0 applies
 * everything, dropped and torn unflushed writes, copy-on-write
 * independence, lifetime) and the fault-injection device (which call
 * fails, sticky and not, short writes, counts).
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "o2fs/blockdev.h"

#define SZ (1024u * 1024u)
#define SEC 512u

static void fill(uint8_t *buf, size_t len, uint8_t v)
{
	memset(buf, v, len);
}

/* Every byte of [off, off+len) on dev equals v. */
static bool all_eq(struct o2_blockdev *dev, uint64_t off, size_t len, uint8_t v)
{
	uint8_t *buf = malloc(len);
	bool ok = true;

	ck_assert_int_eq(o2_blockdev_read(dev, buf, len, off), 0);
	for (size_t i = 0; i < len; i++)
		ok &= buf[i] == v;
	free(buf);
	return ok;
}

static struct o2_blockdev *mem_with(uint8_t v)
{
	struct o2_blockdev *mem;
	uint8_t *buf = malloc(SZ);

	fill(buf, SZ, v);
	ck_assert_int_eq(o2_blockdev_new_memory_from(buf, SZ, SZ, &mem), 0);
	free(buf);
	return mem;
}

static void wr(struct o2_blockdev *dev, uint64_t off, size_t len, uint8_t v)
{
	uint8_t *buf = malloc(len);

	fill(buf, len, v);
	ck_assert_int_eq(o2_blockdev_write(dev, buf, len, off), 0);
	free(buf);
}

START_TEST(crash_records_ops)
{
	struct o2_blockdev *mem = mem_with(0), *c;

	ck_assert_int_eq(o2_crashdev_new(mem, &c), 0);
	ck_assert_uint_eq(c->size, SZ);
	ck_assert_uint_eq(c->sector_size, SEC);
	ck_assert_uint_eq(o2_crashdev_nops(c), 0);
	wr(c, 0, 4096, 1);
	ck_assert_int_eq(o2_blockdev_flush(c), 0);
	wr(c, 8192, 512, 2);
	ck_assert_uint_eq(o2_crashdev_nops(c), 3);
	ck_assert(!o2_crashdev_op_is_flush(c, 0));
	ck_assert(o2_crashdev_op_is_flush(c, 1));
	ck_assert(!o2_crashdev_op_is_flush(c, 2));
	ck_assert(!o2_crashdev_op_is_flush(c, 3));
	/* writes pass through; reads see them */
	ck_assert(all_eq(mem, 0, 4096, 1));
	ck_assert(all_eq(c, 8192, 512, 2));
	/* generic checks still apply; rejected calls are not recorded */
	uint8_t b[512];
	ck_assert_int_eq(o2_blockdev_write(c, b, 100, 0), -EINVAL);
	ck_assert_int_eq(o2_blockdev_write(c, b, 512, SZ), -ENXIO);
	ck_assert_uint_eq(o2_crashdev_nops(c), 3);
	/* not a crash device */
	struct o2_blockdev *m;
	ck_assert_uint_eq(o2_crashdev_nops(mem), 0);
	ck_assert_int_eq(o2_crashdev_materialise(mem, 0, 0, &m), -EINVAL);
	ck_assert_int_eq(o2_crashdev_materialise(c, 4, 0, &m), -ERANGE);
	o2_blockdev_free(c);
	o2_blockdev_free(mem);
}
END_TEST

START_TEST(crash_points)
{
	struct o2_blockdev *mem = mem_with(0xEE), *c, *m;

	ck_assert_int_eq(o2_crashdev_new(mem, &c), 0);
	wr(c, 0, 4096, 1);	  /* op 0 */
	ck_assert_int_eq(o2_blockdev_flush(c), 0); /* op 1 */
	wr(c, 4096, 4096, 2);	  /* op 2 */
	wr(c, 0, 512, 3);	  /* op 3: overwrites part of op 0 */
	ck_assert_int_eq(o2_blockdev_flush(c), 0); /* op 4 */
	wr(c, 8192, 4096, 4);	  /* op 5 */

	/* point 0: the snapshot */
	ck_assert_int_eq(o2_crashdev_materialise(c, 0, 0, &m), 0);
	ck_assert(all_eq(m, 0, 12288, 0xEE));
	o2_blockdev_free(m);
	/* just before the first flush, seed 0: op 0 applied */
	ck_assert_int_eq(o2_crashdev_materialise(c, 1, 0, &m), 0);
	ck_assert(all_eq(m, 0, 4096, 1));
	ck_assert(all_eq(m, 4096, 8192, 0xEE));
	o2_blockdev_free(m);
	/* after the first flush, any seed: op 0 present; ops 2,3 as the seed says */
	for (uint64_t seed = 1; seed < 200; seed++) {
		ck_assert_int_eq(o2_crashdev_materialise(c, 4, seed, &m), 0);
		ck_assert(all_eq(m, 512, 3584, 1));
		ck_assert(all_eq(m, 0, 512, 1) || all_eq(m, 0, 512, 3));
		ck_assert(all_eq(m, 8192, 4096, 0xEE));
		o2_blockdev_free(m);
	}
	/* after the second flush: everything before it, whatever the seed */
	for (uint64_t seed = 0; seed < 50; seed++) {
		ck_assert_int_eq(o2_crashdev_materialise(c, 5, seed, &m), 0);
		ck_assert(all_eq(m, 0, 512, 3));
		ck_assert(all_eq(m, 512, 3584, 1));
		ck_assert(all_eq(m, 4096, 4096, 2));
		ck_assert(all_eq(m, 8192, 4096, 0xEE));
		o2_blockdev_free(m);
	}
	/* the end with seed 0 equals the inner device */
	ck_assert_int_eq(o2_crashdev_materialise(c, 6, 0, &m), 0);
	{
		uint8_t *a = malloc(SZ), *b = malloc(SZ);

		ck_assert_int_eq(o2_blockdev_read(m, a, SZ, 0), 0);
		ck_assert_int_eq(o2_blockdev_read(mem, b, SZ, 0), 0);
		ck_assert(memcmp(a, b, SZ) == 0);
		free(a);
		free(b);
	}
	o2_blockdev_free(m);
	o2_blockdev_free(c);
	o2_blockdev_free(mem);
}
END_TEST

/* Unflushed writes: over many seeds each is seen applied, dropped and torn; never anything else. */
START_TEST(crash_torn)
{
	struct o2_blockdev *mem = mem_with(0), *c, *m;
	unsigned applied = 0, dropped = 0, torn = 0, same = 0;
	uint8_t *first = malloc(8 * SEC), *buf = malloc(8 * SEC);

	ck_assert_int_eq(o2_crashdev_new(mem, &c), 0);
	ck_assert_int_eq(o2_blockdev_flush(c), 0);
	wr(c, 4096, 8 * SEC, 7);
	wr(c, 4096 + 2 * SEC, SEC, 9); /* a later single-sector write over sector 2 */
	for (uint64_t seed = 1; seed <= 500; seed++) {
		unsigned n7 = 0;

		ck_assert_int_eq(o2_crashdev_materialise(c, 3, seed, &m), 0);
		ck_assert_int_eq(o2_blockdev_read(m, buf, 8 * SEC, 4096), 0);
		for (unsigned s = 0; s < 8; s++) {
			uint8_t v = buf[s * SEC];
			bool atomic = true;

			for (unsigned i = 0; i < SEC; i++)
				atomic &= buf[s * SEC + i] == v;
			ck_assert_msg(atomic, "seed %llu: sector %u is not whole", (unsigned long long)seed, s);
			if (s == 2)
				ck_assert(v == 0 || v == 7 || v == 9);
			else
				ck_assert(v == 0 || v == 7);
			n7 += v == 7 || (s == 2 && v == 9);
		}
		applied += n7 == 8;
		dropped += n7 == 0;
		torn += n7 > 0 && n7 < 8;
		/* the same seed gives the same disk */
		if (seed == 1)
			memcpy(first, buf, 8 * SEC);
		o2_blockdev_free(m);
	}
	ck_assert_int_eq(o2_crashdev_materialise(c, 3, 1, &m), 0);
	ck_assert_int_eq(o2_blockdev_read(m, buf, 8 * SEC, 4096), 0);
	same = memcmp(first, buf, 8 * SEC) == 0;
	o2_blockdev_free(m);
	ck_assert(same);
	ck_assert_uint_gt(applied, 20);
	ck_assert_uint_gt(dropped, 20);
	ck_assert_uint_gt(torn, 20);
	/* seed 0 applies both, in order */
	ck_assert_int_eq(o2_crashdev_materialise(c, 3, 0, &m), 0);
	ck_assert(all_eq(m, 4096, 2 * SEC, 7));
	ck_assert(all_eq(m, 4096 + 2 * SEC, SEC, 9));
	ck_assert(all_eq(m, 4096 + 3 * SEC, 5 * SEC, 7));
	o2_blockdev_free(m);
	free(first);
	free(buf);
	o2_blockdev_free(c);
	o2_blockdev_free(mem);
}
END_TEST

/* A materialised device is writable and private; it may outlive its crash device. */
START_TEST(crash_cow)
{
	struct o2_blockdev *mem = mem_with(0x11), *c, *m1, *m2;

	ck_assert_int_eq(o2_crashdev_new(mem, &c), 0);
	wr(c, 0, 4096, 1);
	ck_assert_int_eq(o2_blockdev_flush(c), 0);
	ck_assert_int_eq(o2_crashdev_materialise(c, 2, 0, &m1), 0);
	ck_assert_int_eq(o2_crashdev_materialise(c, 2, 0, &m2), 0);
	ck_assert_int_eq(m1->read_only, 0);
	ck_assert_uint_eq(m1->size, SZ);
	/* write over recorded data, over snapshot data, straddling both, at the end */
	wr(m1, 0, 512, 5);
	wr(m1, 8192, 1024, 6);
	wr(m1, 3584, 1024, 8);
	wr(m1, SZ - 512, 512, 9);
	ck_assert_int_eq(o2_blockdev_flush(m1), 0);
	ck_assert(all_eq(m1, 0, 512, 5));
	ck_assert(all_eq(m1, 512, 3072, 1));
	ck_assert(all_eq(m1, 3584, 1024, 8));
	ck_assert(all_eq(m1, 4608, 3584, 0x11));
	ck_assert(all_eq(m1, 8192, 1024, 6));
	ck_assert(all_eq(m1, SZ - 512, 512, 9));
	/* rewriting an owned sector */
	wr(m1, 8192, 512, 10);
	ck_assert(all_eq(m1, 8192, 512, 10));
	/* nobody else saw it */
	ck_assert(all_eq(m2, 0, 4096, 1));
	ck_assert(all_eq(m2, 4096, 8192, 0x11));
	ck_assert(all_eq(mem, 0, 4096, 1));
	ck_assert(all_eq(c, 8192, 1024, 0x11));
	/* later ops on the crash device do not change an earlier materialisation */
	wr(c, 0, 8192, 3);
	ck_assert_int_eq(o2_blockdev_flush(c), 0);
	ck_assert(all_eq(m2, 0, 4096, 1));
	ck_assert(all_eq(m2, 4096, 4096, 0x11));
	/* range checks of the generic layer */
	uint8_t b[512];
	ck_assert_int_eq(o2_blockdev_write(m1, b, 512, SZ), -ENXIO);
	ck_assert_int_eq(o2_blockdev_read(m1, b, 100, 0), -EINVAL);
	/* the crash device goes first; the materialised ones keep working */
	o2_blockdev_free(c);
	o2_blockdev_free(mem);
	ck_assert(all_eq(m2, 0, 4096, 1));
	wr(m2, 4096, 512, 4);
	ck_assert(all_eq(m2, 4096, 512, 4));
	ck_assert(all_eq(m1, 0, 512, 5));
	o2_blockdev_free(m1);
	o2_blockdev_free(m2);
}
END_TEST

/* Many materialisations of many writes: cheap, and each as the rules say. */
START_TEST(crash_many)
{
	struct o2_blockdev *mem, *c, *m;
	uint8_t *buf = malloc(65536);
	size_t flush_at[64], nflush = 0;

	ck_assert_int_eq(o2_blockdev_new_memory(64u * SZ, &mem), 0);
	ck_assert_int_eq(o2_crashdev_new(mem, &c), 0);
	for (unsigned i = 0; i < 2000; i++) {
		size_t len = (1 + i % 16) * 4096;

		fill(buf, len, (uint8_t)(i % 251 + 1));
		ck_assert_int_eq(o2_blockdev_write(c, buf, len, (uint64_t)(i * 7919 % 16000) * 4096), 0);
		if (i % 40 == 39) {
			flush_at[nflush++] = o2_crashdev_nops(c);
			ck_assert_int_eq(o2_blockdev_flush(c), 0);
		}
	}
	/* after the last flush with seed 0 and 1: the inner device as it was then */
	size_t last = flush_at[nflush - 1];
	uint8_t *a = malloc(64u * SZ), *b = malloc(64u * SZ);

	ck_assert_int_eq(o2_blockdev_read(mem, a, 64u * SZ, 0), 0);
	for (unsigned rep = 0; rep < 60; rep++) {
		ck_assert_int_eq(o2_crashdev_materialise(c, last + 1, rep, &m), 0);
		if (rep < 2) {
			ck_assert_int_eq(o2_blockdev_read(m, b, 64u * SZ, 0), 0);
			ck_assert(memcmp(a, b, 64u * SZ) == 0);
		}
		o2_blockdev_free(m);
	}
	free(a);
	free(b);
	free(buf);
	o2_blockdev_free(c);
	o2_blockdev_free(mem);
}
END_TEST

/* ---- the fault device ---- */

START_TEST(fault_passthrough)
{
	struct o2_blockdev *mem = mem_with(0), *f;
	struct o2_fault_counts fc;
	uint8_t b[4096];

	ck_assert_int_eq(o2_faultdev_new(mem, &f), 0);
	ck_assert_uint_eq(f->size, SZ);
	wr(f, 4096, 4096, 3);
	ck_assert(all_eq(mem, 4096, 4096, 3));
	ck_assert(all_eq(f, 4096, 4096, 3));
	ck_assert_int_eq(o2_blockdev_flush(f), 0);
	o2_faultdev_counts(f, &fc);
	ck_assert_uint_eq(fc.reads, 1);
	ck_assert_uint_eq(fc.writes, 1);
	ck_assert_uint_eq(fc.flushes, 1);
	ck_assert_uint_eq(fc.failed, 0);
	/* the generic checks come first and are not counted */
	ck_assert_int_eq(o2_blockdev_read(f, b, 100, 0), -EINVAL);
	o2_faultdev_counts(f, &fc);
	ck_assert_uint_eq(fc.reads, 1);
	o2_blockdev_free(f);
	o2_blockdev_free(mem);
}
END_TEST

START_TEST(fault_nth)
{
	struct o2_blockdev *mem = mem_with(0), *f;
	struct o2_fault_counts fc;
	uint8_t b[4096];

	ck_assert_int_eq(o2_faultdev_new(mem, &f), 0);
	o2_faultdev_set_plan(f, &(struct o2_fault_plan){ .fail_read = 2, .fail_write = 3,
							 .fail_flush = 1 });
	ck_assert_int_eq(o2_blockdev_read(f, b, 512, 0), 0);
	ck_assert_int_eq(o2_blockdev_read(f, b, 512, 0), -EIO);
	ck_assert_int_eq(o2_blockdev_read(f, b, 512, 0), 0);
	ck_assert_int_eq(o2_blockdev_flush(f), -EIO);
	ck_assert_int_eq(o2_blockdev_flush(f), 0);
	wr(f, 0, 512, 1);
	wr(f, 512, 512, 2);
	fill(b, 4096, 3);
	ck_assert_int_eq(o2_blockdev_write(f, b, 4096, 4096), -EIO);
	ck_assert(all_eq(mem, 4096, 4096, 0)); /* nothing of the failed write */
	wr(f, 4096, 512, 4);		       /* not sticky: the device lives on */
	o2_faultdev_counts(f, &fc);
	ck_assert_uint_eq(fc.reads, 3);
	ck_assert_uint_eq(fc.writes, 4);
	ck_assert_uint_eq(fc.flushes, 2);
	ck_assert_uint_eq(fc.failed, 3);
	/* a new plan restarts the counts */
	o2_faultdev_set_plan(f, &(struct o2_fault_plan){ .fail_write = 1 });
	o2_faultdev_counts(f, &fc);
	ck_assert_uint_eq(fc.writes + fc.reads + fc.flushes + fc.failed, 0);
	ck_assert_int_eq(o2_blockdev_write(f, b, 512, 0), -EIO);
	o2_blockdev_free(f);
	o2_blockdev_free(mem);
}
END_TEST

START_TEST(fault_sticky_short)
{
	struct o2_blockdev *mem = mem_with(0), *f;
	struct o2_fault_counts fc;
	uint8_t b[8192];

	ck_assert_int_eq(o2_faultdev_new(mem, &f), 0);
	o2_faultdev_set_plan(f, &(struct o2_fault_plan){ .fail_write = 2, .sticky = 1,
							 .short_write = 1 });
	wr(f, 0, 512, 1);
	fill(b, 8192, 2);
	ck_assert_int_eq(o2_blockdev_write(f, b, 5 * 512, 8192), -EIO);
	/* half of five sectors, rounded down: two */
	ck_assert(all_eq(mem, 8192, 1024, 2));
	ck_assert(all_eq(mem, 9216, 1536, 0));
	/* dead: writes and flushes fail, reads work */
	ck_assert_int_eq(o2_blockdev_write(f, b, 512, 0), -EIO);
	ck_assert_int_eq(o2_blockdev_flush(f), -EIO);
	ck_assert(all_eq(f, 0, 512, 1));
	o2_faultdev_counts(f, &fc);
	ck_assert_uint_eq(fc.failed, 3);
	ck_assert_uint_eq(fc.writes, 3);
	/* a one-sector short write stores nothing */
	o2_faultdev_set_plan(f, &(struct o2_fault_plan){ .fail_write = 1, .short_write = 1 });
	ck_assert_int_eq(o2_blockdev_write(f, b, 512, 0), -EIO);
	ck_assert(all_eq(mem, 0, 512, 1));
	/* a sticky flush failure kills writes too */
	o2_faultdev_set_plan(f, &(struct o2_fault_plan){ .fail_flush = 1, .sticky = 1 });
	ck_assert_int_eq(o2_blockdev_flush(f), -EIO);
	ck_assert_int_eq(o2_blockdev_write(f, b, 512, 0), -EIO);
	o2_blockdev_free(f);
	o2_blockdev_free(mem);
}
END_TEST

/* fault over crash over memory: only what reached the crash device is recorded. */
START_TEST(fault_over_crash)
{
	struct o2_blockdev *mem = mem_with(0), *c, *f, *m;

	ck_assert_int_eq(o2_crashdev_new(mem, &c), 0);
	ck_assert_int_eq(o2_faultdev_new(c, &f), 0);
	o2_faultdev_set_plan(f, &(struct o2_fault_plan){ .fail_write = 2, .short_write = 1 });
	wr(f, 0, 4096, 1);
	uint8_t b[4096];
	fill(b, 4096, 2);
	ck_assert_int_eq(o2_blockdev_write(f, b, 4096, 4096), -EIO);
	ck_assert_int_eq(o2_blockdev_flush(f), 0);
	ck_assert_uint_eq(o2_crashdev_nops(c), 3); /* write, the short half, flush */
	ck_assert_int_eq(o2_crashdev_materialise(c, 3, 0, &m), 0);
	ck_assert(all_eq(m, 0, 4096, 1));
	ck_assert(all_eq(m, 4096, 2048, 2));
	ck_assert(all_eq(m, 6144, 2048, 0));
	o2_blockdev_free(m);
	o2_blockdev_free(f);
	o2_blockdev_free(c);
	o2_blockdev_free(mem);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("crashdev");
	TCase *tc = tcase_create("crash");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, crash_records_ops);
	tcase_add_test(tc, crash_points);
	tcase_add_test(tc, crash_torn);
	tcase_add_test(tc, crash_cow);
	tcase_add_test(tc, crash_many);
	suite_add_tcase(s, tc);
	tc = tcase_create("fault");
	tcase_add_test(tc, fault_passthrough);
	tcase_add_test(tc, fault_nth);
	tcase_add_test(tc, fault_sticky_short);
	tcase_add_test(tc, fault_over_crash);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
