/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Allocation failures, one at a time.
 *
 * fscore's heap allocations are counted (fscore/mem.h).  The workload of
 * crash_common.c - open read-write, the transactions, syncs, commits and
 * checkpoints, close - runs once for every allocation N it makes, with
 * allocation N returning NULL: once (one-shot), or with every later one
 * failing too (sticky), until a run makes fewer than N allocations.
 *
 * The call that met the failure must return an error: -ENOMEM, or -EROFS
 * once the volume turned read-only (then it must stay so and write
 * nothing).  An open that fails says why.  Close always releases the
 * handle - ASan/UBSan runs of this suite find any leak - and, when the
 * one-shot failure left the volume read-write, must succeed.  The disk
 * left behind, opened with allocations working again (replaying the
 * journal), as it is and after a crash at its end, must hold a committed
 * prefix that includes everything made durable (the model of
 * crash_common.c), open, walk and close; fsck.ocfs2 -fn judges it too for
 * every 25th N and the last few.
 *
 * That workload only reaches the journal and the block cache, so a second
 * one does the same with the namespace and file calls (ns_script): there
 * the disk left behind must replay, walk and close, and fsck.ocfs2 -fn, the
 * main judge of it, runs for every 5th N and the last few.  Every N is run
 * in both workloads (the sanitizer builds sample them: O2_FAULT_STRIDE in
 * crash_common.h); O2_ENOMEM_FROM=N starts at N and O2_ENOMEM_TRACE=1
 * names the call that failed in each run (for debugging).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "crash_common.h"
#include "../testenv.h"

static struct vol_image vol, rvol; /* rvol: 1K blocks, for ns_reflink_script */
static bool fsck_ok;

/* fsck.ocfs2 judges the namespace runs this often (the main judge of them) */
#define NS_FSCK_EVERY 5

struct enomem_totals {
	size_t runs, fired, open_failed, ro, points, fscks;
};

static struct wl_params enomem_params(void)
{
	return (struct wl_params){
		.seed = 41,
		.handles = 60,
		.pool = 128,
		.kmax = 8,
		.big_pct = 8,
		.big_max = 160,
		.revoke_pct = 15,
		.sync_pct = 25,
	};
}

/*
 * One run with allocation nth failing (nth 0: none).  Returns the
 * allocations it made; *fired says whether the planned failure happened.
 */
static uint64_t enomem_run(const struct workload *w, uint64_t nth, bool sticky, bool fsck,
			   struct enomem_totals *tot, bool *fired)
{
	struct o2_blockdev *mem = vol_image_dev(&vol), *crash;
	struct fake_clock clk = { 1700000000ull * 1000000000ull };
	struct judge_opts jo = { .crashes = 1, .walk = true, .fsck = fsck };
	struct model m;
	struct o2_fs *fs;
	uint64_t count;
	char err[256] = "", what[96];
	int r;

	snprintf(what, sizeof(what), "allocation %llu failing%s", (unsigned long long)nth,
		 sticky ? " (sticky)" : "");
	model_for(&vol, &m, w->p.pool);
	ck_assert_int_eq(o2_crashdev_new(mem, &crash), 0);

	o2_alloc_fail_plan(nth, sticky);
	r = open_rw(crash, &clk, &fs, err, sizeof(err));
	if (r < 0) {
		ck_assert_msg(o2_alloc_failed() > 0, "%s: open failed without an allocation "
			      "failing: %d %s", what, r, err);
		ck_assert_msg(r == -ENOMEM, "%s: open failed with %d (%s), not -ENOMEM", what, r,
			      err);
		ck_assert_msg(err[0], "%s: open failed (%d) without a message", what, r);
		tot->open_failed++;
	} else {
		struct wl_run run = { .fs = fs, .crash = crash, .datadev = crash, .clk = &clk,
				      .m = &m, .alloc_faults = true };
		uint64_t failed_before;
		bool ro;
		size_t nops;

		r = wl_execute(&run, w);
		if (getenv("O2_ENOMEM_TRACE"))
			fprintf(stderr, "%s: step %zu: %s: %d (%s)\n", what, run.step,
			       run.failed_call ? run.failed_call : "-", r, o2_fs_error(fs));
		ro = o2_fs_readonly_reason(fs) < 0;
		nops = o2_crashdev_nops(crash);
		failed_before = o2_alloc_failed();
		r = o2_fs_close(fs);
		if (ro) {
			tot->ro++;
			ck_assert_msg(r < 0, "%s: close of a read-only volume succeeded", what);
			ck_assert_msg(o2_crashdev_nops(crash) == nops,
				      "%s: closing a read-only volume wrote to it", what);
		} else if (r == 0) {
			model_durable_now(&m, crash);
		} else {
			ck_assert_msg(o2_alloc_failed() > failed_before,
				      "%s: close failed with %d although no allocation failed "
				      "during it", what, r);
			ck_assert_msg(r == -ENOMEM || r == -EROFS, "%s: close failed with %d, not "
				      "-ENOMEM", what, r);
		}
	}
	count = o2_alloc_count();
	*fired = o2_alloc_fired() > 0;
	o2_alloc_fail_plan(0, false);

	tot->runs++;
	tot->fired += *fired;
	tot->fscks += fsck;
	judge_end(what, crash, &m, tot->runs, &jo, &tot->points);
	model_free(&m);
	o2_blockdev_free(crash);
	o2_blockdev_free(mem);
	return count;
}

static double since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* One run of a workload with allocation nth failing (0: none); returns its allocations. */
typedef uint64_t run_fn(const void *ctx, uint64_t nth, bool sticky, bool fsck,
			struct enomem_totals *t, bool *fired);

/*
 * A clean run (the judges must accept it), then one run per allocation
 * with that one failing, until a run makes fewer allocations than N.
 * fsck.ocfs2 judges every fsck_every-th N and the last few.  Returns the
 * allocations of the clean run.
 */
static uint64_t each_allocation(run_fn *run, const void *ctx, bool sticky, unsigned fsck_every,
				struct enomem_totals *t)
{
	bool fired;
	uint64_t total = run(ctx, 0, false, fsck_ok, t, &fired), n;

	ck_assert(!fired);
	n = getenv("O2_ENOMEM_FROM") ? strtoull(getenv("O2_ENOMEM_FROM"), NULL, 0) : 1;
	for (;; n++) {
		if (!fault_n_selected(n, total))
			continue;
		bool fsck = fsck_ok && (n % fsck_every == 0 || n + 3 > total);
		uint64_t count = run(ctx, n, sticky, fsck, t, &fired);

		ck_assert_msg(fired == (n <= count), "allocation %llu: fired %d of %llu",
			      (unsigned long long)n, fired, (unsigned long long)count);
		if (!fired)
			break;
	}
	/* the allocations before the failing one are those of a clean run */
	ck_assert_uint_eq(n, total + 1);
	return total;
}

static uint64_t crash_workload_run(const void *ctx, uint64_t nth, bool sticky, bool fsck,
				   struct enomem_totals *t, bool *fired)
{
	return enomem_run(ctx, nth, sticky, fsck, t, fired);
}

START_TEST(fail_each_allocation)
{
	bool sticky = _i;
	struct wl_params p = enomem_params();
	struct enomem_totals t = { 0 };
	struct workload w;
	struct timespec t0;
	uint64_t total;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	wl_generate(&w, &p);
	total = each_allocation(crash_workload_run, &w, sticky, 25, &t);
	ck_assert_uint_gt(total, 100);
	printf("allocation failures%s: %llu allocations failed in turn, %zu runs, %zu failed "
	       "opens, %zu turned read-only, %zu disks judged, %zu by fsck.ocfs2, %.1f s\n",
	       sticky ? " (sticky)" : "", (unsigned long long)total, t.runs, t.open_failed, t.ro,
	       t.points, t.fscks, since(&t0));
	fflush(stdout);
	wl_free(&w);
}
END_TEST

/* ---- the namespace workload ---- */

/*
 * After a call: an allocation that failed during it must show as its error,
 * which must be -ENOMEM or (read-only) -EROFS.  False on the first error.
 */
static bool ns_ok(struct ns_run *run, const char *name, long r, bool ok)
{
	uint64_t failed = o2_alloc_failed();

	ck_assert_msg(!(failed > run->failed_before && ok), "%s returned %ld although an "
		      "allocation failed during it", name, r);
	run->failed_before = failed;
	if (ok)
		return true;
	ck_assert_msg(failed > 0, "%s failed with %ld (%s) although no allocation failed", name, r,
		      o2_fs_error(run->fs));
	/* a short write is how a write reports an error after some progress */
	ck_assert_msg(r >= 0 || r == -ENOMEM || (r == -EROFS && o2_fs_readonly_reason(run->fs) < 0),
		      "%s failed with %ld (%s) after an allocation failed", name, r,
		      o2_fs_error(run->fs));
	run->err = r;
	run->failed_call = name;
	return false;
}

/* The namespace workload with allocation nth failing, judged by walk and fsck. */
static uint64_t ns_run(bool reflinks, uint64_t nth, bool sticky, bool fsck,
		       struct enomem_totals *tot, bool *fired)
{
	struct o2_blockdev *dev = vol_image_dev(reflinks ? &rvol : &vol);
	struct fake_clock clk = { 1700000000ull * 1000000000ull };
	struct o2_walk_stats ws;
	struct o2_fs *fs;
	uint64_t count;
	char err[256] = "", what[96];
	int r;

	snprintf(what, sizeof(what), "namespace, allocation %llu failing%s",
		 (unsigned long long)nth, sticky ? " (sticky)" : "");
	o2_alloc_fail_plan(nth, sticky);
	r = open_rw(dev, &clk, &fs, err, sizeof(err));
	if (r < 0) {
		ck_assert_msg(o2_alloc_failed() > 0 && r == -ENOMEM && err[0],
			      "%s: open failed: %d %s", what, r, err);
		tot->open_failed++;
	} else {
		struct ns_run run = { .fs = fs, .judge = ns_ok };
		bool ro;

		if (reflinks)
			ns_reflink_script(&run);
		else
			ns_script(&run);
		if (getenv("O2_ENOMEM_TRACE"))
			fprintf(stderr, "%s: %s: %ld (%s)\n", what,
				run.failed_call ? run.failed_call : "-", run.err, o2_fs_error(fs));
		ro = o2_fs_readonly_reason(fs) < 0;
		tot->ro += ro;
		run.failed_before = o2_alloc_failed();
		r = o2_fs_close(fs);
		ck_assert_msg(!(ro && r == 0), "%s: close of a read-only volume succeeded", what);
		ck_assert_msg(r == 0 || ro || o2_alloc_failed() > run.failed_before,
			      "%s: close failed with %d although no allocation failed during it",
			      what, r);
	}
	count = o2_alloc_count();
	*fired = o2_alloc_fired() > 0;
	o2_alloc_fail_plan(0, false);
	tot->runs++;
	tot->fired += *fired;

	/* allocations work again: the volume replays, walks, closes; fsck agrees */
	r = open_rw(dev, &clk, &fs, err, sizeof(err));
	ck_assert_msg(r == 0, "%s, then without failures: open failed: %d %s", what, r, err);
	r = o2_fs_walk(fs, &ws);
	ck_assert_msg(r == 0, "%s, then without failures: walk failed: %d %s", what, r,
		      o2_fs_error(fs));
	ck_assert_int_eq(o2_fs_close(fs), 0);
	tot->points++;
	if (fsck) {
		judge_fsck(what, dev);
		tot->fscks++;
	}
	o2_blockdev_free(dev);
	return count;
}

static uint64_t ns_workload_run(const void *ctx, uint64_t nth, bool sticky, bool fsck,
				struct enomem_totals *t, bool *fired)
{
	return ns_run(ctx != NULL, nth, sticky, fsck, t, fired);
}

/* _i: 0 one allocation failing, 1 every one from there on; 2 as 0 in ns_reflink_script */
START_TEST(namespace_each_allocation)
{
	bool sticky = _i == 1, reflinks = _i == 2;
	struct enomem_totals t = { 0 };
	struct timespec t0;
	uint64_t total;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	total = each_allocation(ns_workload_run, reflinks ? &rvol : NULL, sticky, NS_FSCK_EVERY,
				&t);
	printf("%s allocation failures%s: %llu allocations failed in turn, %zu runs, "
	       "%zu failed opens, %zu turned read-only, %zu disks walked, %zu by fsck.ocfs2, "
	       "%.1f s\n", reflinks ? "reflink" : "namespace", sticky ? " (sticky)" : "",
	       (unsigned long long)total, t.runs,
	       t.open_failed, t.ro, t.points, t.fscks, since(&t0));
	fflush(stdout);
}
END_TEST

int main(void)
{
	test_env_init();
	SRunner *sr;
	Suite *s;
	TCase *tc;
	int failed;

	if (!have_mkfs()) {
		printf("SKIP: mkfs.ocfs2 (ocfs2-tools) is not installed\n");
		return SKIP_CODE;
	}
	fsck_ok = have_fsck();
	if (!fsck_ok)
		printf("fsck.ocfs2 is not installed: the disks are judged by fscore only\n");
	vol_image_make(&vol, "4k", 16u << 20, "-b 4096 -C 4096 -J size=4M");
	vol_image_make(&rvol, "1k-reflink", 16u << 20, "-b 1024 -C 4096 -J size=4M");

	s = suite_create("enomem");
	tc = tcase_create("oneshot");
	tcase_set_timeout(tc, 900);
	tcase_add_loop_test(tc, fail_each_allocation, 0, 1);
	suite_add_tcase(s, tc);
	tc = tcase_create("sticky");
	tcase_set_timeout(tc, 900);
	tcase_add_loop_test(tc, fail_each_allocation, 1, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("ns-oneshot");
	tcase_set_timeout(tc, 900);
	tcase_add_loop_test(tc, namespace_each_allocation, 0, 1);
	tcase_add_loop_test(tc, namespace_each_allocation, 2, 3);
	suite_add_tcase(s, tc);
	tc = tcase_create("ns-sticky");
	tcase_set_timeout(tc, 900);
	tcase_add_loop_test(tc, namespace_each_allocation, 1, 2);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	vol_image_free(&vol);
	vol_image_free(&rvol);
	return failed ? 1 : 0;
}
