/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Volumes for the module unit tests (test_alloc, test_extent, test_dir):
 * made by fscore's own mkfs on a memory device, opened read-write, and
 * judged at the end by fsck.ocfs2 -fn when it is installed.
 */
#ifndef OCFS2D_TESTS_UNIT_VOL_H
#define OCFS2D_TESTS_UNIT_VOL_H

#include <stdbool.h>
#include <stdint.h>

#include "o2fs/o2fs.h"

#define MiB (1024ull * 1024ull)

struct uv_geom {
	unsigned bs, cs;
	uint64_t bytes;	  /* device size; 0: chosen by cluster size */
	enum o2_mkfs_level level;
	const char *features; /* --fs-features list, or NULL */
};

struct uv {
	struct uv_geom g;
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	struct o2_mkfs_info info;
	char what[96]; /* "b4096 c1M": for messages */
};

/* Make and open (read-write, slot 0) a volume of this geometry. */
void uv_make(struct uv *v, const struct uv_geom *g);
/* Close it cleanly (the close must succeed). */
void uv_close(struct uv *v);
/* Open it again read-write. */
void uv_reopen(struct uv *v);
/* Close if open, and free the device. */
void uv_free(struct uv *v);

/* Whether fsck.ocfs2 is installed (once per process; says so when not). */
bool uv_have_fsck(void);
/*
 * Close the volume, write its image to a temporary file, and require
 * fsck.ocfs2 -fn to find it clean; skipped, with a message, without fsck.
 * The volume is reopened afterwards if reopen.
 */
void uv_fsck(struct uv *v, const char *step, bool reopen);
/* The end of a case: uv_fsck (without reopening) if fsck, else uv_walk and a clean close. */
void uv_finish(struct uv *v, const char *step, bool fsck);
/* And o2_fs_walk, our own reader's full check, on the open volume. */
void uv_walk(struct uv *v, const char *step);

/*
 * The daemon's rule for system files' cluster locks, as fscore sees it
 * (o2_open_opts.lock_held = uv_lock_held): this slot's own files are held
 * for the mount, the global bitmap (block uv_gb_blkno) only while
 * uv_gb_held says so - by an operation that asked for it.
 */
extern uint64_t uv_gb_blkno;
extern bool uv_gb_held;
bool uv_lock_held(void *arg, uint64_t blkno, bool ex);

/*
 * Checks for hot loops: Check's ck_assert_* write a record to the runner
 * for every assertion that passes (a system call each), which made these
 * tests spend most of their time in write(2); these say nothing unless
 * they fail.
 */
#define REQUIRE(c, ...)                                                                        \
	do {                                                                                   \
		if (!(c))                                                                      \
			ck_abort_msg(__VA_ARGS__);                                             \
	} while (0)
#define REQUIRE_T(c) REQUIRE(c, "%s:%d: %s", __FILE__, __LINE__, #c)
#define REQUIRE_OP(a, op, b)                                                                   \
	do {                                                                                   \
		long long a_ = (long long)(a), b_ = (long long)(b);                            \
		if (!(a_ op b_))                                                               \
			ck_abort_msg("%s:%d: %s %s %s: %lld vs %lld", __FILE__, __LINE__, #a,  \
				     #op, #b, a_, b_);                                         \
	} while (0)
#define REQUIRE_EQ(a, b) REQUIRE_OP(a, ==, b)

/* A deterministic generator for the tests' choices. */
uint64_t uv_rand(uint64_t *state);

#endif
