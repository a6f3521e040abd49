/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Discontiguous block groups, judged by the real tools.
 *
 * A volume made by mkfs.ocfs2 with discontig-bg (the default feature
 * level) is filled with files of a few clusters each; every other file is
 * deleted, so the free space is many short runs and no run of a whole
 * suballocator group's clusters.  Then empty files are created until the
 * inode allocator must grow: fscore must piece the new group together from
 * the short runs (bg_list), hand out inodes from it, and leave a volume
 * fsck.ocfs2 -fn finds as clean as the fresh one.  Deleting everything
 * must give back every inode and cluster (the grown allocators keep their
 * groups, as the kernel's do).
 *
 * On a volume without discontig-bg the same fragmentation must give a clean
 * -ENOSPC instead, the volume staying writable and fsck-clean.
 *
 * Along the way the cluster counts o2_fs_super() reports must agree with
 * o2_statfs() on the open volume.
 *
 * Usage: test_discontig CASE (b512, b1k, b4k, nodiscontig).  Skips (77) without
 * ocfs2-tools.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model.h"
#include "../testenv.h"

#define SKIP_CODE 77
#define MIB (1024ull * 1024)

struct dcase {
	const char *name;
	const char *mkfs_args;
	uint64_t size;
	unsigned file_clusters; /* data files of this many clusters fragment the space */
	bool discontig;
};

static const struct dcase cases[] = {
	/* 512-byte descriptors list 11 runs: holes of 32 clusters piece a 256-cluster group */
	{ "b512", "--fs-feature-level=default -b 512 -C 4096 -J size=4M", 64 * MIB, 32, true },
	{ "b1k", "--fs-feature-level=default -b 1024 -C 4096 -J size=4M", 96 * MIB, 16, true },
	{ "b4k", "--fs-feature-level=default -b 4096 -C 4096 -J size=4M", 128 * MIB, 16, true },
	{ "nodiscontig", "--fs-feature-level=default --fs-features=nodiscontig-bg -b 4096 -C 4096 "
			 "-J size=4M", 128 * MIB, 16, false },
};

static const struct dcase *g_case;

struct counts {
	uint64_t free_clusters;
	uint32_t alloc_clusters; /* held by the slot's suballocators */
	uint32_t ia_used, ea_used; /* bits in use, less the groups' descriptors */
};

static int count_desc(unsigned chain, const struct o2_group_info *g, void *arg)
{
	(*(uint32_t *)arg)++;
	return 0;
}

/* Bits in use for inodes or extent blocks: each group's bit 0 is its descriptor. */
static uint32_t items_used(struct o2_fs *fs, struct o2_inode *alloc)
{
	uint32_t groups = 0;
	int r = o2_chain_walk(fs, alloc, count_desc, &groups);

	ck_assert_msg(r == 0, "chain walk: %d: %s", r, o2_fs_error(fs));
	return o2_inode_info(alloc)->bitmap_used - groups;
}

static struct o2_inode *sysfile(struct o2_fs *fs, enum o2_sysfile t)
{
	struct o2_inode *x;
	uint64_t blk;
	int r = o2_sysfile_lookup(fs, t, 0, &blk);

	ck_assert_msg(r == 0, "o2_sysfile_lookup(%d): %d", t, r);
	r = o2_inode_get(fs, blk, &x);
	ck_assert_msg(r == 0, "system inode %" PRIu64 ": %d: %s", blk, r, o2_fs_error(fs));
	return x;
}

/* statfs and o2_fs_super() must tell the same free clusters. */
static void check_super_counts(struct o2_fs *fs, const char *when)
{
	struct o2_statfs sf;
	const struct o2_super_info *si = o2_fs_super(fs);
	int r = o2_statfs(fs, &sf);

	ck_assert_msg(r == 0, "o2_statfs: %d", r);
	ck_assert_msg(si->total_clusters == sf.total_clusters &&
			      (uint64_t)(si->total_clusters - si->used_clusters) == sf.free_clusters,
		      "%s: o2_fs_super says %u used of %u, o2_statfs %" PRIu64 " free of %" PRIu64,
		      when, si->used_clusters, si->total_clusters, sf.free_clusters,
		      sf.total_clusters);
}

static struct counts get_counts(struct o2_fs *fs)
{
	struct counts c = { 0 };
	struct o2_statfs sf;
	struct o2_inode *ia = sysfile(fs, O2_SYS_INODE_ALLOC), *ea = sysfile(fs, O2_SYS_EXTENT_ALLOC);

	ck_assert_int_eq(o2_statfs(fs, &sf), 0);
	c.free_clusters = sf.free_clusters;
	c.alloc_clusters = o2_inode_info(ia)->clusters + o2_inode_info(ea)->clusters;
	c.ia_used = items_used(fs, ia);
	c.ea_used = items_used(fs, ea);
	o2_inode_unref(ia);
	o2_inode_unref(ea);
	check_super_counts(fs, "counting");
	return c;
}

struct groups_seen {
	unsigned groups, discontig;
	uint32_t discontig_used; /* bits handed out of discontiguous groups */
	uint64_t blknos[64];
};

static int count_group(unsigned chain, const struct o2_group_info *g, void *arg)
{
	struct groups_seen *s = arg;

	s->groups++;
	if (g->discontig) {
		if (s->discontig < 64)
			s->blknos[s->discontig] = g->blkno;
		s->discontig++;
		s->discontig_used += g->bits - g->free_bits;
	}
	return 0;
}

/* Walk the inode allocator's chains (validating them as the read path does). */
static struct groups_seen inode_groups(struct o2_fs *fs)
{
	struct groups_seen s = { 0 };
	struct o2_inode *ia = sysfile(fs, O2_SYS_INODE_ALLOC);
	int r = o2_chain_walk(fs, ia, count_group, &s);

	ck_assert_msg(r == 0, "inode_alloc chains: %d: %s", r, o2_fs_error(fs));
	o2_inode_unref(ia);
	return s;
}

static void judge(struct vol *v, const char *when)
{
	char *msg = judge_fsck(v);

	ck_assert_msg(msg == NULL, "%s: %s", when, msg);
}

static uint64_t make_dir(struct o2_fs *fs, const char *name)
{
	uint64_t ino;
	int r = o2_mkdir(fs, o2_fs_super(fs)->root_blkno, name, strlen(name),
			 &(struct o2_new_inode){ .mode = S_IFDIR | 0755 }, &ino);

	ck_assert_msg(r == 0, "mkdir /%s: %d: %s", name, r, o2_fs_error(fs));
	return ino;
}

/* Remove n names "<prefix>%05u" (every step-th from first) from dir. */
static void remove_names(struct o2_fs *fs, uint64_t dir, const char *prefix, unsigned first,
			 unsigned n, unsigned step)
{
	char name[32];

	for (unsigned i = first; i < n; i += step) {
		int len = snprintf(name, sizeof(name), "%s%05u", prefix, i);
		int r = o2_unlink(fs, dir, name, (size_t)len);

		ck_assert_msg(r == 0, "unlink %s: %d: %s", name, r, o2_fs_error(fs));
	}
}

START_TEST(test_discontig)
{
	const struct dcase *c = g_case;
	struct vol v;
	struct counts fresh, end;
	size_t fbytes = (size_t)c->file_clusters * 4096;
	uint8_t *buf = malloc(fbytes);
	unsigned nfiles = 0, nempty = 0;
	uint64_t ddir, edir;
	char name[32];
	int r = 0;

	ck_assert(buf != NULL);
	vol_make(&v, c->name, c->size, c->mkfs_args);
	vol_open(&v);
	fresh = get_counts(v.fs);
	ck_assert_msg(!!(o2_fs_super(v.fs)->feature_incompat & O2_FEATURE_INCOMPAT_DISCONTIG_BG) ==
			      c->discontig, "mkfs %s: discontig-bg is %s", c->mkfs_args,
		      c->discontig ? "off" : "on");
	ddir = make_dir(v.fs, "D");
	edir = make_dir(v.fs, "E");

	/* fill: files of a few clusters until the space runs out */
	for (;;) {
		uint64_t ino;
		int len = snprintf(name, sizeof(name), "f%05u", nfiles);
		ssize_t n;

		r = o2_create(v.fs, ddir, name, (size_t)len,
			      &(struct o2_new_inode){ .mode = S_IFREG | 0644 }, &ino);
		ck_assert_msg(r == 0 || r == -ENOSPC, "create %s: %d: %s", name, r,
			      o2_fs_error(v.fs));
		if (r < 0)
			break;
		nfiles++;
		memset(buf, (int)(nfiles & 0xff), fbytes);
		n = o2_write(v.fs, ino, 0, buf, fbytes);
		ck_assert_msg(n >= 0 || n == -ENOSPC, "write %s: %zd: %s", name, n,
			      o2_fs_error(v.fs));
		if (nfiles % 256 == 0)
			check_super_counts(v.fs, "filling");
		if (n != (ssize_t)fbytes)
			break;
	}
	check_super_counts(v.fs, "full");
	/* fragment: every other file goes */
	remove_names(v.fs, ddir, "f", 0, nfiles, 2);
	check_super_counts(v.fs, "fragmented");
	vol_close(&v);
	judge(&v, "fsck after filling and fragmenting");
	vol_open(&v);
	check_super_counts(v.fs, "reopened");

	/* inodes until the inode allocator has grown by a group pieced together */
	struct groups_seen before = inode_groups(v.fs), now = before;
	unsigned grow_at = 0;
	uint64_t last_ino = 0;

	for (;;) {
		uint64_t ino;
		int len = snprintf(name, sizeof(name), "e%05u", nempty);

		r = o2_create(v.fs, edir, name, (size_t)len,
			      &(struct o2_new_inode){ .mode = S_IFREG | 0644 }, &ino);
		ck_assert_msg(r == 0 || r == -ENOSPC, "create %s: %d: %s", name, r,
			      o2_fs_error(v.fs));
		if (r < 0)
			break;
		last_ino = ino;
		nempty++;
		if (nempty % 128 == 0 || grow_at) {
			now = inode_groups(v.fs);
			if (now.groups > before.groups && !grow_at)
				grow_at = nempty;
			/* a few hundred more from the new group, then stop */
			if (grow_at && nempty >= grow_at + 300)
				break;
		}
		ck_assert_msg(nempty < 20000, "20000 inodes and the inode allocator never grew");
	}
	now = inode_groups(v.fs);
	fprintf(stderr,
		"[%s] %u files of %u clusters, %u deleted; %u empty files; inode groups %u -> %u, "
		"discontiguous %u (%u bits used)%s\n",
		c->name, nfiles, c->file_clusters, (nfiles + 1) / 2, nempty, before.groups,
		now.groups, now.discontig, now.discontig_used, r == -ENOSPC ? ", then -ENOSPC" : "");
	if (c->discontig) {
		ck_assert_msg(now.discontig > before.discontig,
			      "no discontiguous inode group was made (%u empty files, last %d)",
			      nempty, r);
		ck_assert_msg(now.discontig_used > 1, "nothing allocated from the discontiguous group");
		/* the inodes name their group: the last one lives in it */
		struct o2_inode *x;
		uint64_t ino = last_ino;

		ck_assert_int_eq(o2_inode_get(v.fs, ino, &x), 0);
		bool in_discontig = false;

		for (unsigned i = 0; i < now.discontig && i < 64; i++)
			in_discontig |= o2_inode_info(x)->suballoc_loc == now.blknos[i];
		ck_assert_msg(in_discontig, "inode %" PRIu64 " (suballoc_loc %" PRIu64
			      ", bit %u) is not in a discontiguous group", ino,
			      o2_inode_info(x)->suballoc_loc, o2_inode_info(x)->suballoc_bit);
		o2_inode_unref(x);
	} else {
		ck_assert_msg(r == -ENOSPC && now.groups == before.groups,
			      "without discontig-bg the inode allocator grew on fragmented space");
		/* the volume is still writable: a name in a directory with room */
		r = o2_unlink(v.fs, edir, "e00000", 6);
		ck_assert_msg(r == 0, "unlink after -ENOSPC: %d: %s", r, o2_fs_error(v.fs));
		r = o2_create(v.fs, edir, "e00000", 6,
			      &(struct o2_new_inode){ .mode = S_IFREG | 0644 }, &(uint64_t){ 0 });
		ck_assert_msg(r == 0, "create after -ENOSPC: %d: %s", r, o2_fs_error(v.fs));
	}
	check_super_counts(v.fs, "inodes made");
	vol_close(&v);
	judge(&v, "fsck after growing the inode allocator");

	/* everything goes: the space must come back */
	vol_open(&v);
	remove_names(v.fs, edir, "e", 0, nempty, 1);
	remove_names(v.fs, ddir, "f", 1, nfiles, 2);
	r = o2_rmdir(v.fs, o2_fs_super(v.fs)->root_blkno, "D", 1);
	ck_assert_msg(r == 0, "rmdir /D: %d: %s", r, o2_fs_error(v.fs));
	r = o2_rmdir(v.fs, o2_fs_super(v.fs)->root_blkno, "E", 1);
	ck_assert_msg(r == 0, "rmdir /E: %d: %s", r, o2_fs_error(v.fs));
	check_super_counts(v.fs, "emptied");
	vol_close(&v);
	judge(&v, "fsck after deleting everything");
	vol_open(&v);
	end = get_counts(v.fs);
	ck_assert_msg(end.ia_used == fresh.ia_used && end.ea_used == fresh.ea_used &&
			      end.free_clusters + end.alloc_clusters ==
				      fresh.free_clusters + fresh.alloc_clusters,
		      "space leaked: fresh: %" PRIu64 " free clusters, %u in suballocators, %u inodes, "
		      "%u extent blocks; emptied: %" PRIu64 ", %u, %u, %u",
		      fresh.free_clusters, fresh.alloc_clusters, fresh.ia_used, fresh.ea_used,
		      end.free_clusters, end.alloc_clusters, end.ia_used, end.ea_used);
	vol_close(&v);
	free(buf);
	vol_cleanup(&v, false);
}
END_TEST

int main(int argc, char **argv)
{
	test_env_init();
	SRunner *sr;
	Suite *s;
	TCase *tc;
	int failed;

	for (size_t i = 0; argc == 2 && i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!strcmp(argv[1], cases[i].name))
			g_case = &cases[i];
	if (!g_case) {
		fprintf(stderr, "usage: test_discontig b512|b1k|b4k|nodiscontig\n");
		return 2;
	}
	if (!judge_have_tools()) {
		printf("SKIP: ocfs2-tools (mkfs.ocfs2, fsck.ocfs2, debugfs.ocfs2) are not installed\n");
		return SKIP_CODE;
	}
	s = suite_create("discontig");
	tc = tcase_create(g_case->name);
	tcase_set_timeout(tc, 1800);
	tcase_add_test(tc, test_discontig);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
