/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * I/O errors, one at a time.
 *
 * The workload of crash_common.c runs on a fault device over a crash
 * device over memory, once for every write, every flush and every read it
 * issues (open and close included), failing that one: with the device
 * recovering or dead after it (sticky), and for writes also storing half
 * of the failing write first (short).  The call that met the error must
 * return it, the volume must turn read-only (reads excepted: a failed block
 * read is an error for that call only), every later transaction must get
 * -EROFS, and nothing more may reach the device.  The disk left behind,
 * as it is and as crashes just after could leave it, must then open
 * (replaying the journal) and hold a committed prefix that includes
 * everything made durable before the failure.
 *
 * The namespace workload of crash_common.c (ns_script: directories, files,
 * links, renames, extended attributes, holes punched, reflinks, orphans) runs the same way with
 * every write and every flush failing in turn, once or for good: the call
 * that met the fault must fail with -EIO or -EROFS, and the disk left
 * behind must replay, walk and close; fsck.ocfs2 -fn judges every
 * NS_FSCK_EVERY-th run.
 *
 * Then journal replay itself is interrupted by every read, write and flush
 * failing in turn: the open must fail cleanly, and replaying again - after
 * a crash that tears what the interrupted replay had not flushed - must
 * give exactly what an uninterrupted replay gives.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crash_common.h"
#include "../testenv.h"
#include "journal.h"

enum { VOL_4K, VOL_1K, VOL_REFLINK, NVOLS };

static struct vol_image vols[NVOLS];
static bool quick, fsck_ok;

/* fsck.ocfs2 judges the namespace runs this often */
#define NS_FSCK_EVERY 8

struct fault_totals {
	size_t runs, fired, points;
};

static struct wl_params fault_params(const struct vol_image *v)
{
	return (struct wl_params){
		.seed = 31,
		.handles = quick ? 40 : 110,
		.pool = 192,
		.kmax = 8,
		.big_pct = 8,
		.big_max = 160,
		.revoke_pct = 12,
		.sync_pct = 25,
	};
}

/*
 * One run with one planned fault.  Returns whether the fault fired (a
 * plan past the end of the workload does not).
 */
static bool fault_run(const struct vol_image *v, const struct workload *w,
		      const struct o2_fault_plan *plan, const char *what,
		      struct fault_totals *tot, struct o2_fault_counts *ret_counts)
{
	struct o2_blockdev *mem = vol_image_dev(v), *crash, *fault;
	struct fake_clock clk = { 1700000000ull * 1000000000ull };
	struct o2_fault_counts fc;
	struct model m;
	struct o2_fs *fs;
	char err[256];
	int r;

	model_for(v, &m, w->p.pool);
	ck_assert_int_eq(o2_crashdev_new(mem, &crash), 0);
	ck_assert_int_eq(o2_faultdev_new(crash, &fault), 0);
	o2_faultdev_set_plan(fault, plan);
	r = open_rw(fault, &clk, &fs, err, sizeof(err));
	if (r < 0) {
		o2_faultdev_counts(fault, &fc);
		ck_assert_msg(fc.failed > 0, "%s: open failed without a fault: %d %s", what, r, err);
		ck_assert_msg(err[0], "%s: open failed (%d) without a message", what, r);
	} else {
		struct wl_run run = { .fs = fs, .crash = crash, .datadev = crash, .fault = fault,
				      .clk = &clk, .m = &m };

		r = wl_execute(&run, w);
		if (r == 0) {
			r = o2_fs_close(fs);
			o2_faultdev_counts(fault, &fc);
			if (r == 0)
				model_durable_now(&m, crash);
			else
				ck_assert_msg(fc.failed > 0, "%s: close failed without a fault: %d",
					      what, r);
		} else {
			size_t nops = o2_crashdev_nops(crash);

			r = o2_fs_close(fs);
			ck_assert_msg(r < 0, "%s: close of a read-only volume succeeded", what);
			ck_assert_msg(o2_crashdev_nops(crash) == nops,
				      "%s: closing a read-only volume wrote to it", what);
		}
	}
	o2_faultdev_counts(fault, &fc);
	if (ret_counts)
		*ret_counts = fc;
	tot->runs++;
	if (fc.failed) {
		tot->fired++;
		judge_end(what, crash, &m, tot->runs, &(struct judge_opts){ .crashes = 2 },
			  &tot->points);
	}
	model_free(&m);
	o2_blockdev_free(fault);
	o2_blockdev_free(crash);
	o2_blockdev_free(mem);
	return fc.failed > 0;
}

static void report(const char *name, const struct vol_image *v, const struct fault_totals *t,
		   const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%s (%s): %zu runs, %zu faults injected, crash points checked: %zu, %.1f s\n", name,
	       v->name, t->runs, t->fired, t->points,
	       (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9);
	fflush(stdout);
}

/* The I/O counts of a clean run, to know how far to go. */
static struct o2_fault_counts baseline(const struct vol_image *v, const struct workload *w)
{
	struct fault_totals t = { 0 };
	struct o2_fault_counts fc;

	ck_assert(!fault_run(v, w, &(struct o2_fault_plan){ 0 }, "no fault", &t, &fc));
	ck_assert_uint_gt(fc.writes, 50);
	ck_assert_uint_gt(fc.flushes, 20);
	return fc;
}

static const struct vol_image *vol_of(int i)
{
	return &vols[i ? VOL_1K : VOL_4K];
}

START_TEST(fail_each_write)
{
	const struct vol_image *v = vol_of(_i);
	struct wl_params p = fault_params(v);
	struct fault_totals t = { 0 };
	struct workload w;
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	wl_generate(&w, &p);
	struct o2_fault_counts base = baseline(v, &w);

	for (uint64_t n = 1; n <= base.writes; n++) {
		if (!fault_n_selected(n, base.writes))
			continue;
		for (unsigned variant = 0; variant < 4; variant++) {
			struct o2_fault_plan plan = { .fail_write = n, .sticky = variant & 1,
						      .short_write = !!(variant & 2) };
			char what[96];

			snprintf(what, sizeof(what), "write %llu of %llu failing%s%s",
				 (unsigned long long)n, (unsigned long long)base.writes,
				 plan.sticky ? " (sticky)" : "", plan.short_write ? " (short)" : "");
			ck_assert_msg(fault_run(v, &w, &plan, what, &t, NULL), "%s: never fired", what);
		}
	}
	report("write faults", v, &t, &t0);
	wl_free(&w);
}
END_TEST

START_TEST(fail_each_flush)
{
	const struct vol_image *v = vol_of(_i);
	struct wl_params p = fault_params(v);
	struct fault_totals t = { 0 };
	struct workload w;
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	wl_generate(&w, &p);
	struct o2_fault_counts base = baseline(v, &w);

	for (uint64_t n = 1; n <= base.flushes; n++) {
		if (!fault_n_selected(n, base.flushes))
			continue;
		for (int sticky = 0; sticky < 2; sticky++) {
			struct o2_fault_plan plan = { .fail_flush = n, .sticky = sticky };
			char what[96];

			snprintf(what, sizeof(what), "flush %llu of %llu failing%s",
				 (unsigned long long)n, (unsigned long long)base.flushes,
				 sticky ? " (sticky)" : "");
			ck_assert_msg(fault_run(v, &w, &plan, what, &t, NULL), "%s: never fired", what);
		}
	}
	report("flush faults", v, &t, &t0);
	wl_free(&w);
}
END_TEST

START_TEST(fail_each_read)
{
	const struct vol_image *v = vol_of(_i);
	struct wl_params p = fault_params(v);
	struct fault_totals t = { 0 };
	struct workload w;
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	wl_generate(&w, &p);
	struct o2_fault_counts base = baseline(v, &w);

	for (uint64_t n = 1; n <= base.reads; n++) {
		if (!fault_n_selected(n, base.reads))
			continue;
		struct o2_fault_plan plan = { .fail_read = n, .sticky = (int)(n & 1) };
		char what[96];

		snprintf(what, sizeof(what), "read %llu of %llu failing", (unsigned long long)n,
			 (unsigned long long)base.reads);
		ck_assert_msg(fault_run(v, &w, &plan, what, &t, NULL), "%s: never fired", what);
	}
	report("read faults", v, &t, &t0);
	wl_free(&w);
}
END_TEST

/* ---- the namespace workload ---- */

/*
 * After a call: a fault during it must show as its error, which must be
 * -EIO or -EROFS (a short write is how a write reports an error after
 * some progress).  False on the first error.
 */
static bool ns_fault_ok(struct ns_run *run, const char *name, long r, bool ok)
{
	struct o2_fault_counts fc;

	o2_faultdev_counts(run->arg, &fc);
	ck_assert_msg(!(fc.failed > run->failed_before && ok), "%s returned %ld although an I/O "
		      "failed during it", name, r);
	run->failed_before = fc.failed;
	if (ok)
		return true;
	ck_assert_msg(fc.failed > 0, "%s failed with %ld (%s) without an I/O fault", name, r,
		      o2_fs_error(run->fs));
	ck_assert_msg(r >= 0 || r == -EIO || r == -EROFS, "%s failed with %ld (%s) after an I/O "
		      "fault", name, r, o2_fs_error(run->fs));
	run->err = r;
	run->failed_call = name;
	return false;
}

/*
 * The namespace workload on the 4K volume with one planned fault, then the
 * disk replayed, walked and closed without faults (and judged by fsck if
 * asked).  Returns whether the fault fired; *ret_counts gets the I/O counts.
 */
static bool ns_fault_run(bool reflinks, const struct o2_fault_plan *plan, const char *what,
			 bool fsck, struct fault_totals *tot, struct o2_fault_counts *ret_counts)
{
	const struct vol_image *v = &vols[reflinks ? VOL_REFLINK : VOL_4K];
	struct o2_blockdev *mem = vol_image_dev(v), *fault;
	struct fake_clock clk = { 1700000000ull * 1000000000ull };
	struct o2_fault_counts fc;
	struct o2_walk_stats ws;
	struct o2_fs *fs;
	char err[256] = "";
	int r;

	ck_assert_int_eq(o2_faultdev_new(mem, &fault), 0);
	o2_faultdev_set_plan(fault, plan);
	r = open_rw(fault, &clk, &fs, err, sizeof(err));
	if (r < 0) {
		o2_faultdev_counts(fault, &fc);
		ck_assert_msg(fc.failed > 0 && err[0], "%s: open failed: %d %s", what, r, err);
	} else {
		struct ns_run run = { .fs = fs, .judge = ns_fault_ok, .arg = fault };
		bool ro;

		if (reflinks)
			ns_reflink_script(&run);
		else
			ns_script(&run);
		ro = o2_fs_readonly_reason(fs) < 0;
		o2_faultdev_counts(fault, &fc);
		ck_assert_msg(!run.failed_call || fc.failed > 0, "%s: stopped without a fault", what);
		r = o2_fs_close(fs);
		ck_assert_msg(!(ro && r == 0), "%s: close of a read-only volume succeeded", what);
		if (r < 0 && !ro) {
			struct o2_fault_counts after;

			o2_faultdev_counts(fault, &after);
			ck_assert_msg(after.failed > fc.failed, "%s: close failed with %d without a "
				      "fault during it", what, r);
		}
	}
	o2_faultdev_counts(fault, &fc);
	if (ret_counts)
		*ret_counts = fc;
	o2_blockdev_free(fault);
	tot->runs++;
	tot->fired += fc.failed > 0;

	/* the disk as the fault left it: it replays, walks and closes; fsck agrees */
	r = open_rw(mem, &clk, &fs, err, sizeof(err));
	ck_assert_msg(r == 0, "%s, then without faults: open failed: %d %s", what, r, err);
	r = o2_fs_walk(fs, &ws);
	ck_assert_msg(r == 0, "%s, then without faults: walk failed: %d %s", what, r,
		      o2_fs_error(fs));
	ck_assert_int_eq(o2_fs_close(fs), 0);
	tot->points++;
	if (fsck && fsck_ok)
		judge_fsck(what, mem);
	o2_blockdev_free(mem);
	return fc.failed > 0;
}

/*
 * _i: 0 every write failing in turn (once, for good, short), 1 every flush
 * (once, for good), in ns_script on the 4K volume; 2 and 3 the same in
 * ns_reflink_script on the 1K volume.
 */
START_TEST(ns_fail_each_io)
{
	struct fault_totals t = { 0 };
	struct o2_fault_counts base;
	struct timespec t0;
	bool flush = _i & 1, reflinks = _i >= 2;
	unsigned variants = flush ? 2 : 4;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert(!ns_fault_run(reflinks, &(struct o2_fault_plan){ 0 }, "namespace, no fault",
				true, &t, &base));
	ck_assert_uint_gt(base.writes, 20);
	uint64_t total = flush ? base.flushes : base.writes;

	for (uint64_t n = 1; n <= total; n++) {
		if (!fault_n_selected(n, total))
			continue;
		for (unsigned variant = 0; variant < variants; variant++) {
			struct o2_fault_plan plan = { .sticky = variant & 1,
						      .short_write = !!(variant & 2) };
			char what[96];

			if (flush)
				plan.fail_flush = n;
			else
				plan.fail_write = n;
			snprintf(what, sizeof(what), "namespace, %s %llu of %llu failing%s%s",
				 flush ? "flush" : "write", (unsigned long long)n,
				 (unsigned long long)total, plan.sticky ? " (sticky)" : "",
				 plan.short_write ? " (short)" : "");
			bool fsck = (n % NS_FSCK_EVERY == 0 && variant == 0) || n + 2 > total;
			ck_assert_msg(ns_fault_run(reflinks, &plan, what, fsck, &t, NULL),
				      "%s: never fired", what);
		}
	}
	report(reflinks ? (flush ? "reflink flush faults" : "reflink write faults")
			: (flush ? "namespace flush faults" : "namespace write faults"),
	       &vols[reflinks ? VOL_REFLINK : VOL_4K], &t, &t0);
}
END_TEST

/* Every read of opening a clean volume failing: a clean error, then a clean open. */
START_TEST(fail_open_reads)
{
	const struct vol_image *v = vol_of(_i);
	struct o2_blockdev *mem = vol_image_dev(v), *fault;
	struct fake_clock clk = { 1700000000ull * 1000000000ull };
	unsigned fired = 0, tolerated = 0;

	ck_assert_int_eq(o2_faultdev_new(mem, &fault), 0);
	for (uint64_t n = 1; n < 100000; n++) {
		bool any = false;

		for (int rw = 0; rw < 2; rw++) {
			struct o2_fault_counts fc;
			struct o2_fs *fs;
			char err[256];
			int r;

			o2_faultdev_set_plan(fault, &(struct o2_fault_plan){ .fail_read = n });
			r = rw ? open_rw(fault, &clk, &fs, err, sizeof(err))
			       : o2_fs_open(fault, O2_OPEN_RDONLY, &fs, err, sizeof(err));
			o2_faultdev_counts(fault, &fc);
			if (!fc.failed) {
				ck_assert_int_eq(r, 0);
				ck_assert_int_eq(o2_fs_close(fs), 0);
				continue;
			}
			any = true;
			fired++;
			if (r == 0) {
				/* the superblock probe reads candidate places that may fail */
				tolerated++;
				ck_assert_int_eq(o2_fs_close(fs), 0);
				continue;
			}
			ck_assert_msg(err[0], "read %llu: open failed (%d) without a message",
				      (unsigned long long)n, r);
			/* the device works again: so does the volume */
			o2_faultdev_set_plan(fault, &(struct o2_fault_plan){ 0 });
			r = open_rw(fault, &clk, &fs, err, sizeof(err));
			ck_assert_msg(r == 0, "after read %llu failed: %d %s", (unsigned long long)n, r,
				      err);
			ck_assert_int_eq(o2_fs_close(fs), 0);
		}
		if (!any)
			break;
	}
	printf("open read faults (%s): %u, %u of them on superblock candidates the probe "
	       "passes over\n", v->name, fired, tolerated);
	o2_blockdev_free(fault);
	o2_blockdev_free(mem);
}
END_TEST

/* ---- interrupted replay ---- */

struct dirty_base {
	struct o2_blockdev *mem, *crash;
	struct model m;
	struct workload w;
	size_t point; /* the crash point the dirty disk comes from */
	uint64_t *ref; /* target hashes after an uninterrupted replay */
};

/* A disk whose journal holds many committed transactions: the workload, crashed before close. */
static void dirty_base_make(const struct vol_image *v, struct dirty_base *b)
{
	struct wl_params p = fault_params(v);
	struct fake_clock clk = { 1700000000ull * 1000000000ull };
	struct o2_journal_stats js;
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	char err[256], msg[2048];
	uint32_t h;

	p.seed = 77;
	p.handles = 60;
	p.big_pct = 0; /* many small transactions in the log, no checkpoint */
	memset(b, 0, sizeof(*b));
	b->mem = vol_image_dev(v);
	ck_assert_int_eq(o2_crashdev_new(b->mem, &b->crash), 0);
	ck_assert_int_eq(open_rw(b->crash, &clk, &fs, err, sizeof(err)), 0);
	model_init(&b->m, fs, p.pool);
	wl_generate(&b->w, &p);
	struct wl_run run = { .fs = fs, .crash = b->crash, .datadev = b->crash, .clk = &clk,
			      .m = &b->m };
	ck_assert_int_eq(wl_execute(&run, &b->w), 0);
	ck_assert_int_eq(o2_fs_sync(fs), 0);
	model_durable_now(&b->m, b->crash);
	o2_journal_stats(fs, &js);
	ck_assert_uint_gt(js.commits, 10);
	b->point = o2_crashdev_nops(b->crash);
	o2_fs_abandon(fs); /* the crash */

	/* the reference: an uninterrupted replay */
	b->ref = calloc(b->m.nt, sizeof(*b->ref));
	ck_assert_int_eq(o2_crashdev_materialise(b->crash, b->point, 0, &dev), 0);
	ck_assert_int_eq(open_rw(dev, &clk, &fs, err, sizeof(err)), 0);
	ck_assert_msg(model_judge(&b->m, dev, b->point, &h, msg, sizeof(msg)), "%s", msg);
	ck_assert_uint_eq(h, b->m.nh); /* everything was synced */
	model_read(&b->m, dev, b->ref);
	ck_assert_int_eq(o2_fs_close(fs), 0);
	o2_blockdev_free(dev);
}

static void dirty_base_free(struct dirty_base *b)
{
	free(b->ref);
	model_free(&b->m);
	wl_free(&b->w);
	o2_blockdev_free(b->crash);
	o2_blockdev_free(b->mem);
}

/* Replay the dirty disk under a plan.  Returns whether the fault fired. */
static bool replay_run(struct dirty_base *b, const struct o2_fault_plan *plan, const char *what,
		       struct fault_totals *tot)
{
	struct fake_clock clk = { 1800000000ull * 1000000000ull };
	struct o2_blockdev *disk, *crash, *fault, *dev;
	struct o2_fault_counts fc;
	uint64_t *got = calloc(b->m.nt, sizeof(*got));
	struct o2_fs *fs;
	char err[256];
	int r;

	ck_assert_int_eq(o2_crashdev_materialise(b->crash, b->point, 0, &disk), 0);
	ck_assert_int_eq(o2_crashdev_new(disk, &crash), 0);
	ck_assert_int_eq(o2_faultdev_new(crash, &fault), 0);
	o2_faultdev_set_plan(fault, plan);
	r = open_rw(fault, &clk, &fs, err, sizeof(err));
	o2_faultdev_counts(fault, &fc);
	tot->runs++;
	if (!fc.failed || (plan->fail_read && r == 0)) {
		/* no fault, or a read the superblock probe may pass over */
		ck_assert_msg(r == 0, "%s: open failed without a fault: %d %s", what, r, err);
		model_read(&b->m, crash, got);
		ck_assert_msg(memcmp(got, b->ref, b->m.nt * sizeof(*got)) == 0,
			      "%s: the volume differs from an uninterrupted replay", what);
		o2_faultdev_set_plan(fault, &(struct o2_fault_plan){ 0 });
		ck_assert_int_eq(o2_fs_close(fs), 0);
		tot->fired += fc.failed > 0;
	} else {
		tot->fired++;
		ck_assert_msg(r < 0, "%s: the open succeeded", what);
		ck_assert_msg(err[0], "%s: open failed (%d) without a message", what, r);
		if (plan->fail_read) {
			/* the same disk, a working device: the replay runs again */
			o2_faultdev_set_plan(fault, &(struct o2_fault_plan){ 0 });
			r = open_rw(fault, &clk, &fs, err, sizeof(err));
			ck_assert_msg(r == 0, "%s, then without faults: %d %s", what, r, err);
			model_read(&b->m, crash, got);
			ck_assert_msg(memcmp(got, b->ref, b->m.nt * sizeof(*got)) == 0,
				      "%s, then without faults: the volume differs from an "
				      "uninterrupted replay", what);
			ck_assert_int_eq(o2_fs_close(fs), 0);
			tot->points++;
		} else {
			/* a crash after the interrupted replay, then replay again */
			for (unsigned k = 0; k < 3; k++) {
				uint64_t seed = k ? crash_seed(tot->runs * 5 + k) : 0;

				ck_assert_int_eq(o2_crashdev_materialise(crash, o2_crashdev_nops(crash),
									 seed, &dev), 0);
				r = open_rw(dev, &clk, &fs, err, sizeof(err));
				ck_assert_msg(r == 0, "%s, a crash (seed %llu), a new replay: %d %s",
					      what, (unsigned long long)seed, r, err);
				model_read(&b->m, dev, got);
				ck_assert_msg(memcmp(got, b->ref, b->m.nt * sizeof(*got)) == 0,
					      "%s, a crash (seed %llu), a new replay: the volume "
					      "differs from an uninterrupted replay", what,
					      (unsigned long long)seed);
				ck_assert_int_eq(o2_fs_close(fs), 0);
				o2_blockdev_free(dev);
				tot->points++;
			}
		}
	}
	free(got);
	o2_blockdev_free(fault);
	o2_blockdev_free(crash);
	o2_blockdev_free(disk);
	return fc.failed > 0;
}

START_TEST(interrupted_replay)
{
	const struct vol_image *v = vol_of(_i);
	struct fault_totals t = { 0 };
	struct dirty_base b;
	struct timespec t0;
	char what[96];

	clock_gettime(CLOCK_MONOTONIC, &t0);
	dirty_base_make(v, &b);
	for (uint64_t n = 1;; n++) {
		snprintf(what, sizeof(what), "replay with read %llu failing", (unsigned long long)n);
		if (!replay_run(&b, &(struct o2_fault_plan){ .fail_read = n }, what, &t))
			break;
	}
	for (uint64_t n = 1;; n++) {
		bool fired = false;

		for (unsigned variant = 0; variant < 4; variant++) {
			struct o2_fault_plan plan = { .fail_write = n, .sticky = variant & 1,
						      .short_write = !!(variant & 2) };

			snprintf(what, sizeof(what), "replay with write %llu failing%s%s",
				 (unsigned long long)n, plan.sticky ? " (sticky)" : "",
				 plan.short_write ? " (short)" : "");
			fired |= replay_run(&b, &plan, what, &t);
		}
		if (!fired)
			break;
	}
	for (uint64_t n = 1;; n++) {
		bool fired = false;

		for (int sticky = 0; sticky < 2; sticky++) {
			snprintf(what, sizeof(what), "replay with flush %llu failing%s",
				 (unsigned long long)n, sticky ? " (sticky)" : "");
			fired |= replay_run(&b, &(struct o2_fault_plan){ .fail_flush = n,
									.sticky = sticky },
					    what, &t);
		}
		if (!fired)
			break;
	}
	report("interrupted replay", v, &t, &t0);
	dirty_base_free(&b);
}
END_TEST

int main(int argc, char **argv)
{
	test_env_init();
	SRunner *sr;
	Suite *s;
	TCase *tc;
	int failed, nv;

	for (int i = 1; i < argc; i++)
		quick |= strcmp(argv[i], "--quick") == 0;
	if (!have_mkfs()) {
		printf("SKIP: mkfs.ocfs2 (ocfs2-tools) is not installed\n");
		return SKIP_CODE;
	}
	fsck_ok = have_fsck();
	vol_image_make(&vols[VOL_4K], "4k", 16u << 20, "-b 4096 -C 4096 -J size=4M");
	vol_image_make(&vols[VOL_1K], "1k", 8u << 20, "-b 1024 -C 4096 -J size=4M");
	vol_image_make(&vols[VOL_REFLINK], "1k-reflink", 16u << 20, "-b 1024 -C 4096 -J size=4M");
	nv = quick ? 1 : 2;

	s = suite_create("fault");
	tc = tcase_create("write");
	tcase_set_timeout(tc, 900);
	tcase_add_loop_test(tc, fail_each_write, 0, nv);
	suite_add_tcase(s, tc);
	tc = tcase_create("flush");
	tcase_set_timeout(tc, 900);
	tcase_add_loop_test(tc, fail_each_flush, 0, nv);
	suite_add_tcase(s, tc);
	tc = tcase_create("read");
	tcase_set_timeout(tc, 900);
	tcase_add_loop_test(tc, fail_each_read, 0, nv);
	tcase_add_loop_test(tc, fail_open_reads, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("ns");
	tcase_set_timeout(tc, 900);
	tcase_add_loop_test(tc, ns_fail_each_io, 0, 4);
	suite_add_tcase(s, tc);
	tc = tcase_create("replay");
	tcase_set_timeout(tc, 900);
	tcase_add_loop_test(tc, interrupted_replay, 0, 2);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	for (int i = 0; i < NVOLS; i++)
		vol_image_free(&vols[i]);
	return failed ? 1 : 0;
}
