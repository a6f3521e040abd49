/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Volumes for the module unit tests: see unit_vol.h. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../testenv.h"
#include "unit_vol.h"

#define TOOL_PATH "PATH=\"$PATH:/usr/sbin:/sbin\" "

static int fake_random(void *arg, void *buf, size_t len)
{
	uint64_t *s = arg;
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(uv_rand(s) >> 24);
	return 0;
}

static uint64_t fake_clock(void *arg)
{
	(void)arg;
	return 1700000000ull * 1000000000ull;
}

uint64_t uv_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void uv_reopen(struct uv *v)
{
	struct o2_open_opts o = { .flags = O2_OPEN_RDWR, .slot = 0 };
	char err[512] = "";
	int r = o2_fs_open_opts(v->dev, &o, &v->fs, err, sizeof(err));

	ck_assert_msg(r == 0, "%s: open read-write: %d %s", v->what, r, err);
}

void uv_make(struct uv *v, const struct uv_geom *g)
{
	struct o2_mkfs_opts o;
	struct o2_features off = { 0 };
	uint64_t seed = g->bs * 31u + g->cs;
	char err[512] = "";
	int r;

	memset(v, 0, sizeof(*v));
	v->g = *g;
	if (!v->g.bytes)
		v->g.bytes = g->cs >= MiB ? 72 * MiB : 32 * MiB;
	snprintf(v->what, sizeof(v->what), "b%u c%u%s%s", g->bs,
		 g->cs >= MiB ? g->cs >> 20 : g->cs >> 10, g->cs >= MiB ? "M" : "K",
		 g->features ? " " : "");
	if (g->features)
		snprintf(v->what + strlen(v->what), sizeof(v->what) - strlen(v->what), "%s",
			 g->features);
	memset(&o, 0, sizeof(o));
	o.block_size = g->bs;
	o.cluster_size = g->cs;
	o.slots = 1;
	o.level = g->level;
	o.mount = O2_MKFS_MOUNT_LOCAL;
	o.journal_size = (g->cs >= MiB ? 9 : 4) * MiB;
	o.label = "unit";
	o.random = fake_random;
	o.random_arg = &seed;
	o.now_ns = fake_clock;
	if (g->features) {
		r = o2_mkfs_parse_features(g->features, &o.features_on, &off, err, sizeof(err));
		ck_assert_msg(r == 0, "%s: features: %s", v->what, err);
		o.features_off = off;
	}
	ck_assert_int_eq(o2_blockdev_new_memory(v->g.bytes, &v->dev), 0);
	r = o2_mkfs(v->dev, &o, NULL, NULL, &v->info, err, sizeof(err));
	ck_assert_msg(r == 0, "%s: mkfs: %d %s", v->what, r, err);
	uv_reopen(v);
}

void uv_close(struct uv *v)
{
	char err[512] = "";
	int r = o2_fs_close_why(v->fs, err, sizeof(err));

	v->fs = NULL;
	ck_assert_msg(r == 0, "%s: close: %d %s", v->what, r, err);
}

void uv_free(struct uv *v)
{
	if (v->fs)
		uv_close(v);
	o2_blockdev_free(v->dev);
	v->dev = NULL;
}

bool uv_have_fsck(void)
{
	static int have = -1;

	if (have < 0) {
		have = system(TOOL_PATH "command -v fsck.ocfs2 >/dev/null 2>&1") == 0;
		if (!have)
			fprintf(stderr, "fsck.ocfs2 is not installed: its checks are skipped\n");
	}
	return have;
}

void uv_walk(struct uv *v, const char *step)
{
	struct o2_walk_stats ws;
	int r = o2_fs_walk(v->fs, &ws);

	ck_assert_msg(r == 0, "%s: %s: walk: %d %s", v->what, step, r, o2_fs_error(v->fs));
}

/* Write the device to path, leaving holes where it is all zeros. */
static void write_image(struct uv *v, const char *path)
{
	const uint8_t *data = o2_blockdev_memory_data(v->dev);
	const size_t chunk = 64 * 1024;
	static const uint8_t zero[64 * 1024];
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	ck_assert_msg(fd >= 0, "%s: cannot create", path);
	ck_assert_msg(ftruncate(fd, (off_t)v->dev->size) == 0, "%s: cannot size", path);
	for (uint64_t off = 0; off < v->dev->size; off += chunk) {
		size_t n = v->dev->size - off < chunk ? (size_t)(v->dev->size - off) : chunk;

		if (memcmp(data + off, zero, n) == 0)
			continue;
		ck_assert_msg(pwrite(fd, data + off, n, (off_t)off) == (ssize_t)n,
			      "%s: write failed", path);
	}
	close(fd);
}

void uv_fsck(struct uv *v, const char *step, bool reopen)
{
	char dir[256], path[300], cmd[400], out[16384];
	size_t len = 0;
	FILE *p;
	int st;

	uv_walk(v, step);
	uv_close(v);
	if (uv_have_fsck()) {
		snprintf(dir, sizeof(dir), "%s/o2unit-XXXXXX", test_tmpdir());
		ck_assert(mkdtemp(dir));
		snprintf(path, sizeof(path), "%s/vol.img", dir);
		write_image(v, path);
		snprintf(cmd, sizeof(cmd), TOOL_PATH "fsck.ocfs2 -fn %s </dev/null 2>&1", path);
		p = popen(cmd, "r");
		ck_assert_ptr_nonnull(p);
		while (len + 1 < sizeof(out)) {
			size_t n = fread(out + len, 1, sizeof(out) - 1 - len, p);

			if (n == 0)
				break;
			len += n;
		}
		out[len] = '\0';
		while (fgetc(p) != EOF)
			; /* the rest, unread, must not block fsck */
		st = pclose(p);
		unlink(path);
		rmdir(dir);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
				      strstr(out, "All passes succeeded."),
			      "%s: %s: fsck.ocfs2 -fn: exit status %d:\n%.3000s", v->what, step,
			      WIFEXITED(st) ? WEXITSTATUS(st) : -1, out);
	}
	if (reopen)
		uv_reopen(v);
}

void uv_finish(struct uv *v, const char *step, bool fsck)
{
	if (fsck) {
		uv_fsck(v, step, false);
	} else {
		uv_walk(v, step);
		uv_close(v);
	}
}

uint64_t uv_gb_blkno;
bool uv_gb_held;

bool uv_lock_held(void *arg, uint64_t blkno, bool ex)
{
	(void)arg;
	(void)ex;
	return blkno != uv_gb_blkno || uv_gb_held;
}
