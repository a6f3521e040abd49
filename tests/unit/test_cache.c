/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fscore's block cache (fscore/cache.c) as a shared volume uses it: a block
 * read under its cluster lock stays cached until the caller drops it, and
 * one read without the lock (o2_fs_unlocked_reads) is never trusted by a
 * later read.  "Another node" here is a write to the device behind the
 * cache, as another node's would be.
 */
#include <check.h>
#include <string.h>
#include <sys/stat.h>

#include "../testenv.h"
#include "unit_vol.h"
/* fscore's private headers: the on-disk inode, to change it behind the cache */
#include "format.h"
#include "internal.h"

/* Set the root inode's uid on the device itself, not through the cache. */
static void set_uid_behind(struct uv *v, uint64_t blk, uint32_t uid)
{
	uint8_t *img = o2_blockdev_memory_data(v->dev);
	struct o2_dinode *di = (struct o2_dinode *)(img + blk * v->g.bs);

	di->i_uid = cpu_le32(uid);
}

static uint32_t uid_now(struct o2_fs *fs, uint64_t blk)
{
	struct o2_inode *in;
	uint32_t uid;

	ck_assert_int_eq(o2_inode_get(fs, blk, &in), 0);
	uid = o2_inode_info(in)->uid;
	o2_inode_unref(in);
	return uid;
}

START_TEST(unlocked_read_not_trusted)
{
	static const struct uv_geom g = { .bs = 4096, .cs = 4096 };
	struct uv v;

	uv_make(&v, &g);
	struct o2_fs *fs = v.fs;
	uint64_t root = o2_fs_super(fs)->root_blkno;

	/* under the lock: cached, a change behind it is not seen (a lock
	 * the other node would have had to take away first) */
	ck_assert_int_eq(uid_now(fs, root), 0);
	set_uid_behind(&v, root, 11);
	ck_assert_int_eq(uid_now(fs, root), 0);

	/* an unlocked read goes to the device, even for a block cached from
	 * a locked read (that lock may have named the block's previous inode) */
	o2_fs_unlocked_reads(fs, true);
	ck_assert_int_eq(uid_now(fs, root), 11);
	o2_fs_unlocked_reads(fs, false);
	/* ... and what it cached is read again by the next read, locked or not */
	set_uid_behind(&v, root, 22);
	ck_assert_int_eq(uid_now(fs, root), 22);
	/* which, under the lock, is trusted again */
	set_uid_behind(&v, root, 33);
	ck_assert_int_eq(uid_now(fs, root), 22);

	/* nested calls: marked until the outermost ends */
	o2_fs_unlocked_reads(fs, true);
	o2_fs_unlocked_reads(fs, true);
	o2_fs_unlocked_reads(fs, false);
	ck_assert_int_eq(uid_now(fs, root), 33);
	o2_fs_unlocked_reads(fs, false);
	set_uid_behind(&v, root, 0);
	ck_assert_int_eq(uid_now(fs, root), 0);

	/* this handle's own changes not yet home are what an unlocked read sees */
	struct o2_setattr sa = { .uid = 44 };

	ck_assert_int_eq(o2_setattr(fs, root, &sa, O2_SET_UID), 0);
	set_uid_behind(&v, root, 55);
	o2_fs_unlocked_reads(fs, true);
	ck_assert_int_eq(uid_now(fs, root), 44);
	o2_fs_unlocked_reads(fs, false);
	set_uid_behind(&v, root, 44);

	uv_finish(&v, "after the unlocked reads", true);
	uv_free(&v);
}
END_TEST

/*
 * A lock lost (o2_fs_lost): the blocks it covers are read again at their
 * next use, another inode's stay cached, and a lost lock of no known
 * owner (o2_fs_drop_cached with 0) takes every clean block.
 */
START_TEST(lost_lock_drops_its_blocks)
{
	static const struct uv_geom g = { .bs = 4096, .cs = 4096 };
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };
	uint64_t a, b;
	struct uv v;

	uv_make(&v, &g);
	struct o2_fs *fs = v.fs;
	uint64_t root = o2_fs_super(fs)->root_blkno;

	ck_assert_int_eq(o2_create(fs, root, "a", 1, &ni, &a), 0);
	ck_assert_int_eq(o2_create(fs, root, "b", 1, &ni, &b), 0);
	ck_assert_int_eq(o2_fs_writeback(fs, O2_WB_ALL), 0);
	ck_assert_int_eq(uid_now(fs, a), 0);
	ck_assert_int_eq(uid_now(fs, b), 0);

	set_uid_behind(&v, a, 7);
	set_uid_behind(&v, b, 8);
	o2_fs_lost(fs, a);
	ck_assert_int_eq(uid_now(fs, a), 7);
	ck_assert_int_eq(uid_now(fs, b), 0);
	/* read again after the loss: trusted until the next one */
	set_uid_behind(&v, a, 9);
	ck_assert_int_eq(uid_now(fs, a), 7);
	/* another owner's loss leaves both alone */
	o2_fs_lost(fs, root);
	ck_assert_int_eq(uid_now(fs, a), 7);
	ck_assert_int_eq(uid_now(fs, b), 0);
	o2_fs_drop_cached(fs, 0);
	ck_assert_int_eq(uid_now(fs, a), 9);
	ck_assert_int_eq(uid_now(fs, b), 8);
	set_uid_behind(&v, a, 0);
	set_uid_behind(&v, b, 0);

	uv_finish(&v, "after the lost locks", true);
	uv_free(&v);
}
END_TEST

/* Set an inode's mtime on the device itself, not through the cache. */
static void set_mtime_behind(struct uv *v, uint64_t blk, uint64_t sec)
{
	uint8_t *img = o2_blockdev_memory_data(v->dev);
	struct o2_dinode *di = (struct o2_dinode *)(img + blk * v->g.bs);

	di->i_mtime = cpu_le64(sec);
}

static int64_t mtime_now(struct o2_fs *fs, uint64_t blk)
{
	struct o2_inode *in;
	int64_t t;

	ck_assert_int_eq(o2_inode_get(fs, blk, &in), 0);
	t = o2_inode_info(in)->mtime.sec;
	o2_inode_unref(in);
	return t;
}

/* The value block describing what the device holds of blk now. */
static void lvb_of_device(struct o2_fs *fs, uint64_t blk, uint8_t *lvb)
{
	o2_fs_drop_cached(fs, blk);
	(void)uid_now(fs, blk);
	ck_assert(o2_inode_lvb(fs, blk, lvb));
}

/*
 * A regained inode lock and its value block (o2_inode_refresh): a cached
 * block that differs from the home copy the value block describes in its
 * times alone is kept, with the new times, and not read again; one that
 * differs in anything else, or with no value block, a blank one or
 * another generation's, is read again.  Nothing untrusted is described.
 */
START_TEST(lvb_refresh)
{
	static const struct uv_geom g = { .bs = 4096, .cs = 4096 };
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };
	uint8_t lvb[O2_INODE_LVB_LEN], other[O2_INODE_LVB_LEN], blank[O2_INODE_LVB_LEN] = { 0 };
	struct o2_fs_stats st;
	int64_t t0;
	uint64_t a;
	struct uv v;

	uv_make(&v, &g);
	struct o2_fs *fs = v.fs;
	uint64_t root = o2_fs_super(fs)->root_blkno;

	ck_assert_int_eq(o2_create(fs, root, "a", 1, &ni, &a), 0);
	/* changes not yet home: nothing to describe */
	ck_assert(!o2_inode_lvb(fs, a, lvb));
	ck_assert_int_eq(o2_fs_writeback(fs, O2_WB_ALL), 0);
	t0 = mtime_now(fs, a);

	/* another node changed the times: kept, new times, no read */
	set_mtime_behind(&v, a, (uint64_t)t0 + 100);
	lvb_of_device(fs, a, lvb);
	set_mtime_behind(&v, a, (uint64_t)t0);
	lvb_of_device(fs, a, other);
	set_mtime_behind(&v, a, (uint64_t)t0 + 100);
	o2_fs_lost(fs, a);
	/* lost: no longer known to be home */
	ck_assert(!o2_inode_lvb(fs, a, other));
	ck_assert(o2_inode_refresh(fs, a, lvb));
	set_uid_behind(&v, a, 5); /* not read again: not seen */
	ck_assert_int_eq(mtime_now(fs, a), t0 + 100);
	ck_assert_int_eq(uid_now(fs, a), 0);
	o2_fs_stats(fs, &st);
	ck_assert_uint_eq(st.lock_refreshes_kept, 1);

	/* the owner changed: read again */
	lvb_of_device(fs, a, lvb);
	set_uid_behind(&v, a, 0);
	o2_fs_drop_cached(fs, a);
	ck_assert_int_eq(uid_now(fs, a), 0);
	set_uid_behind(&v, a, 5);
	o2_fs_lost(fs, a);
	ck_assert(!o2_inode_refresh(fs, a, lvb));
	ck_assert_int_eq(uid_now(fs, a), 5);
	ck_assert(o2_inode_refresh(fs, a, lvb)); /* now it matches */

	/* no value block, a blank one, another generation's: read again */
	set_uid_behind(&v, a, 6);
	ck_assert(!o2_inode_refresh(fs, a, NULL));
	ck_assert_int_eq(uid_now(fs, a), 6);
	set_uid_behind(&v, a, 7);
	ck_assert(!o2_inode_refresh(fs, a, blank));
	ck_assert_int_eq(uid_now(fs, a), 7);
	lvb_of_device(fs, a, lvb);
	lvb[4] ^= 1; /* the generation */
	set_uid_behind(&v, a, 8);
	ck_assert(!o2_inode_refresh(fs, a, lvb));
	ck_assert_int_eq(uid_now(fs, a), 8);
	o2_fs_stats(fs, &st);
	ck_assert_uint_eq(st.lock_refreshes, 6);
	ck_assert_uint_eq(st.lock_refreshes_kept, 2);
	set_uid_behind(&v, a, 0);
	set_mtime_behind(&v, a, (uint64_t)t0);

	uv_finish(&v, "after the refreshes", true);
	uv_free(&v);
}
END_TEST

/*
 * A directory listing's stamp (o2_fs_dir_stamp): it holds until this
 * handle changes some directory's entries or a lock covering the
 * directory is lost - not when another inode's lock is.
 */
START_TEST(dir_stamp)
{
	static const struct uv_geom g = { .bs = 4096, .cs = 4096 };
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 }, di = { .mode = S_IFDIR | 0755 };
	struct o2_dir_stamp st;
	uint64_t d, a, b;
	struct uv v;

	uv_make(&v, &g);
	struct o2_fs *fs = v.fs;
	uint64_t root = o2_fs_super(fs)->root_blkno;

	ck_assert_int_eq(o2_mkdir(fs, root, "d", 1, &di, &d), 0);
	ck_assert_int_eq(o2_create(fs, d, "a", 1, &ni, &a), 0);
	o2_fs_dir_stamp(fs, &st);
	ck_assert(o2_fs_dir_unchanged(fs, d, &st));
	ck_assert_int_eq(o2_write(fs, a, 0, "x", 1), 1); /* not a directory change */
	o2_fs_lost(fs, a);
	ck_assert(o2_fs_dir_unchanged(fs, d, &st));
	/* a change in another directory counts too */
	ck_assert_int_eq(o2_create(fs, root, "b", 1, &ni, &b), 0);
	ck_assert(!o2_fs_dir_unchanged(fs, d, &st));
	o2_fs_dir_stamp(fs, &st);
	ck_assert_int_eq(o2_unlink(fs, root, "b", 1), 0);
	ck_assert(!o2_fs_dir_unchanged(fs, d, &st));
	o2_fs_dir_stamp(fs, &st);
	ck_assert_int_eq(o2_rename(fs, d, "a", 1, d, "c", 1, 0), 0);
	ck_assert(!o2_fs_dir_unchanged(fs, d, &st));
	/* the directory's lock lost, or every lock */
	o2_fs_dir_stamp(fs, &st);
	o2_fs_lost(fs, d);
	ck_assert(!o2_fs_dir_unchanged(fs, d, &st));
	o2_fs_dir_stamp(fs, &st);
	o2_fs_drop_cached(fs, 0);
	ck_assert(!o2_fs_dir_unchanged(fs, d, &st));
	o2_fs_dir_stamp(fs, &st);
	o2_fs_lost(fs, 0);
	ck_assert(!o2_fs_dir_unchanged(fs, d, &st));

	uv_finish(&v, "after the stamps", true);
	uv_free(&v);
}
END_TEST

int main(void)
{
	test_env_init();
	Suite *s = suite_create("cache");
	TCase *tc = tcase_create("shared");

	tcase_add_test(tc, unlocked_read_not_trusted);
	tcase_add_test(tc, lost_lock_drops_its_blocks);
	tcase_add_test(tc, lvb_refresh);
	tcase_add_test(tc, dir_stamp);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? 1 : 0;
}
