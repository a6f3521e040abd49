/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Block-device interface: memory and file devices (and a loop block device
 * where the machine lets us make one).  Round trips, bounds, alignment,
 * read-only devices, sizes.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "o2fs/blockdev.h"

#define MiB (1024u * 1024u)

/* Deterministic pattern: byte i of a buffer at device offset off. */
static uint8_t pattern(uint64_t off, unsigned seed)
{
	uint64_t x = (off + 1) * 0x9E3779B97F4A7C15ull ^ seed;
	return (uint8_t)(x >> 29);
}

static void fill(uint8_t *buf, size_t len, uint64_t off, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(off + i, seed);
}

static int check_pattern(const uint8_t *buf, size_t len, uint64_t off, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern(off + i, seed))
			return 0;
	return 1;
}

static char *make_temp(uint64_t size)
{
	char *path = strdup("/tmp/o2test-blockdev-XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	close(fd);
	return path;
}

/*
 * The generic contract, run against any device of at least 1 MiB that is
 * writable.
 */
static void exercise_device(struct o2_blockdev *dev)
{
	uint8_t *buf = malloc(64 * 1024), *out = malloc(64 * 1024);
	uint64_t size = dev->size;

	ck_assert_uint_eq(dev->sector_size, 512);
	ck_assert_uint_eq(size % dev->sector_size, 0);
	ck_assert_uint_ge(size, MiB);

	/* Round trips at the start, the middle and the very end. */
	const uint64_t offs[] = { 0, 512, 4096, size / 2, size - 65536, size - 4096, size - 512 };
	const size_t lens[] = { 512, 4096, 65536, 1024, 65536, 4096, 512 };
	for (unsigned i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		fill(buf, lens[i], offs[i], i);
		ck_assert_int_eq(o2_blockdev_write(dev, buf, lens[i], offs[i]), 0);
	}
	/* each flush that reaches the device is counted (memory has none) */
	uint64_t flushes = dev->flushes;

	ck_assert_int_eq(o2_blockdev_flush(dev), 0);
	ck_assert_uint_eq(dev->flushes, flushes + (dev->ops->flush ? 1 : 0));
	for (unsigned i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		/* Later writes overlap earlier ones; check only what stayed. */
		int overwritten = 0;
		for (unsigned j = i + 1; j < sizeof(offs) / sizeof(offs[0]); j++)
			if (offs[j] < offs[i] + lens[i] && offs[i] < offs[j] + lens[j])
				overwritten = 1;
		if (overwritten)
			continue;
		memset(out, 0xEE, lens[i]);
		ck_assert_int_eq(o2_blockdev_read(dev, out, lens[i], offs[i]), 0);
		ck_assert_msg(check_pattern(out, lens[i], offs[i], i), "round trip %u at %llu", i,
			      (unsigned long long)offs[i]);
	}

	/* Unaligned buffers are fine; unaligned offsets and lengths are not. */
	fill(buf + 1, 512, 8192, 77);
	ck_assert_int_eq(o2_blockdev_write(dev, buf + 1, 512, 8192), 0);
	memset(out, 0, 1024);
	ck_assert_int_eq(o2_blockdev_read(dev, out + 3, 512, 8192), 0);
	ck_assert(check_pattern(out + 3, 512, 8192, 77));

	ck_assert_int_eq(o2_blockdev_read(dev, out, 512, 1), -EINVAL);
	ck_assert_int_eq(o2_blockdev_read(dev, out, 511, 0), -EINVAL);
	ck_assert_int_eq(o2_blockdev_read(dev, out, 513, 0), -EINVAL);
	ck_assert_int_eq(o2_blockdev_read(dev, out, 512, 256), -EINVAL);
	ck_assert_int_eq(o2_blockdev_write(dev, buf, 512, 100), -EINVAL);
	ck_assert_int_eq(o2_blockdev_write(dev, buf, 100, 0), -EINVAL);

	/* Bounds. */
	ck_assert_int_eq(o2_blockdev_read(dev, out, 512, size), -ENXIO);
	ck_assert_int_eq(o2_blockdev_read(dev, out, 1024, size - 512), -ENXIO);
	ck_assert_int_eq(o2_blockdev_read(dev, out, 512, size + 512), -ENXIO);
	ck_assert_int_eq(o2_blockdev_read(dev, out, 512, UINT64_MAX - 511), -ENXIO);
	ck_assert_int_eq(o2_blockdev_read(dev, out, 512, (uint64_t)1 << 62), -ENXIO);
	ck_assert_int_eq(o2_blockdev_write(dev, buf, 512, size), -ENXIO);
	ck_assert_int_eq(o2_blockdev_write(dev, buf, 4096, size - 2048), -ENXIO);
	/* A length that would wrap the offset around. */
	ck_assert_int_eq(o2_blockdev_read(dev, out, (size_t)0 - 512, 512), -ENXIO);
	/* The failed write changed nothing at the end. */
	ck_assert_int_eq(o2_blockdev_read(dev, out, 512, size - 512), 0);
	ck_assert(check_pattern(out, 512, size - 512, 6));

	/* Zero-length I/O inside the device is a no-op success. */
	ck_assert_int_eq(o2_blockdev_read(dev, out, 0, 0), 0);
	ck_assert_int_eq(o2_blockdev_read(dev, out, 0, size), 0);
	ck_assert_int_eq(o2_blockdev_write(dev, buf, 0, 512), 0);

	free(buf);
	free(out);
}

START_TEST(test_memory_basic)
{
	struct o2_blockdev *dev = NULL;

	ck_assert_int_eq(o2_blockdev_new_memory(4 * MiB, &dev), 0);
	ck_assert_ptr_nonnull(dev);
	ck_assert_uint_eq(dev->size, 4 * MiB);
	ck_assert(!dev->read_only);
	ck_assert_ptr_nonnull(o2_blockdev_memory_data(dev));

	/* Fresh memory reads as zeros. */
	uint8_t buf[4096];
	memset(buf, 0xAA, sizeof(buf));
	ck_assert_int_eq(o2_blockdev_read(dev, buf, sizeof(buf), 2 * MiB), 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		ck_assert_uint_eq(buf[i], 0);

	exercise_device(dev);

	/* The backing store is what was written. */
	uint8_t *mem = o2_blockdev_memory_data(dev);
	ck_assert(check_pattern(mem + 8192, 512, 8192, 77));
	mem[12345] = 0x5A;
	ck_assert_int_eq(o2_blockdev_read(dev, buf, 512, 12288), 0);
	ck_assert_uint_eq(buf[12345 - 12288], 0x5A);
	o2_blockdev_free(dev);
}
END_TEST

START_TEST(test_memory_sizes)
{
	struct o2_blockdev *dev = NULL;

	/* Sizes are rounded down to whole sectors. */
	ck_assert_int_eq(o2_blockdev_new_memory(1000, &dev), 0);
	ck_assert_uint_eq(dev->size, 512);
	uint8_t buf[1024];
	ck_assert_int_eq(o2_blockdev_read(dev, buf, 512, 0), 0);
	ck_assert_int_eq(o2_blockdev_read(dev, buf, 1024, 0), -ENXIO);
	o2_blockdev_free(dev);

	/* A zero-sized device: every non-empty I/O is past the end. */
	dev = NULL;
	ck_assert_int_eq(o2_blockdev_new_memory(0, &dev), 0);
	ck_assert_uint_eq(dev->size, 0);
	ck_assert_int_eq(o2_blockdev_read(dev, buf, 512, 0), -ENXIO);
	ck_assert_int_eq(o2_blockdev_write(dev, buf, 512, 0), -ENXIO);
	o2_blockdev_free(dev);

	dev = NULL;
	ck_assert_int_eq(o2_blockdev_new_memory(511, &dev), 0);
	ck_assert_uint_eq(dev->size, 0);
	ck_assert_int_eq(o2_blockdev_read(dev, buf, 512, 0), -ENXIO);
	o2_blockdev_free(dev);

	/* Freeing NULL is allowed. */
	o2_blockdev_free(NULL);
}
END_TEST

START_TEST(test_memory_from)
{
	struct o2_blockdev *dev = NULL;
	uint8_t src[3000];
	uint8_t buf[4096];

	fill(src, sizeof(src), 0, 9);
	/* A copy padded with zeros to the size. */
	ck_assert_int_eq(o2_blockdev_new_memory_from(src, sizeof(src), 8192, &dev), 0);
	ck_assert_uint_eq(dev->size, 8192);
	ck_assert_int_eq(o2_blockdev_read(dev, buf, 4096, 0), 0);
	ck_assert(check_pattern(buf, sizeof(src), 0, 9));
	for (size_t i = sizeof(src); i < 4096; i++)
		ck_assert_uint_eq(buf[i], 0);
	/* It is a copy: writes do not reach the source. */
	memset(buf, 0, 512);
	ck_assert_int_eq(o2_blockdev_write(dev, buf, 512, 0), 0);
	ck_assert(check_pattern(src, sizeof(src), 0, 9));
	o2_blockdev_free(dev);

	/* Data longer than the device is cut at the (rounded) size. */
	dev = NULL;
	ck_assert_int_eq(o2_blockdev_new_memory_from(src, sizeof(src), 2000, &dev), 0);
	ck_assert_uint_eq(dev->size, 1536);
	ck_assert_int_eq(o2_blockdev_read(dev, buf, 1536, 0), 0);
	ck_assert(check_pattern(buf, 1536, 0, 9));
	o2_blockdev_free(dev);

	/* Nothing to copy. */
	dev = NULL;
	ck_assert_int_eq(o2_blockdev_new_memory_from(NULL, 0, 4096, &dev), 0);
	ck_assert_int_eq(o2_blockdev_read(dev, buf, 4096, 0), 0);
	for (size_t i = 0; i < 4096; i++)
		ck_assert_uint_eq(buf[i], 0);
	o2_blockdev_free(dev);
}
END_TEST

START_TEST(test_memory_huge)
{
	struct o2_blockdev *dev = NULL;

	/* An impossible size fails cleanly. */
	int r = o2_blockdev_new_memory(UINT64_MAX, &dev);
	ck_assert_int_eq(r, -ENOMEM);
	ck_assert_ptr_null(dev);
}
END_TEST

START_TEST(test_file_basic)
{
	char *path = make_temp(4 * MiB + 100); /* not a whole number of sectors */
	struct o2_blockdev *dev = NULL;

	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_ptr_nonnull(dev);
	ck_assert_uint_eq(dev->size, 4 * MiB);
	ck_assert(!dev->read_only);
	ck_assert_ptr_null(o2_blockdev_memory_data(dev));
	exercise_device(dev);
	o2_blockdev_free(dev);

	/* What was written is in the file, at the same offsets. */
	int fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	uint8_t buf[512];
	ck_assert_int_eq(pread(fd, buf, 512, 8192), 512);
	ck_assert(check_pattern(buf, 512, 8192, 77));
	close(fd);

	/* Reopened, the data is still there. */
	dev = NULL;
	ck_assert_int_eq(o2_blockdev_open_file(path, O2_DEV_RDONLY, &dev), 0);
	ck_assert(dev->read_only);
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(o2_blockdev_read(dev, buf, 512, 8192), 0);
	ck_assert(check_pattern(buf, 512, 8192, 77));
	o2_blockdev_free(dev);

	unlink(path);
	free(path);
}
END_TEST

START_TEST(test_file_direct)
{
	char *path = make_temp(2 * MiB);
	struct o2_blockdev *dev = NULL;

	int r = o2_blockdev_open_file(path, O2_DEV_DIRECT, &dev);
	if (r == -EINVAL) {
		/* tmpfs and some overlay filesystems refuse O_DIRECT. */
		fprintf(stderr, "O_DIRECT not supported on /tmp; direct I/O test skipped\n");
		unlink(path);
		free(path);
		return;
	}
	ck_assert_int_eq(r, 0);
	/* exercise_device uses unaligned buffers and 512-byte I/O on purpose. */
	exercise_device(dev);
	o2_blockdev_free(dev);
	unlink(path);
	free(path);
}
END_TEST

START_TEST(test_file_readonly)
{
	char *path = make_temp(MiB);
	struct o2_blockdev *dev = NULL;
	uint8_t buf[4096];

	fill(buf, sizeof(buf), 4096, 3);
	int fd = open(path, O_WRONLY);
	ck_assert_int_eq(pwrite(fd, buf, sizeof(buf), 4096), (ssize_t)sizeof(buf));
	close(fd);

	ck_assert_int_eq(o2_blockdev_open_file(path, O2_DEV_RDONLY, &dev), 0);
	ck_assert(dev->read_only);
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(o2_blockdev_read(dev, buf, sizeof(buf), 4096), 0);
	ck_assert(check_pattern(buf, sizeof(buf), 4096, 3));
	ck_assert_int_eq(o2_blockdev_write(dev, buf, sizeof(buf), 0), -EROFS);
	ck_assert_int_eq(o2_blockdev_write(dev, buf, 512, MiB - 512), -EROFS);
	/* Flushing a read-only device is harmless, and not counted. */
	ck_assert_int_eq(o2_blockdev_flush(dev), 0);
	ck_assert_uint_eq(dev->flushes, 0);
	/* Out-of-range reads still fail with -ENXIO. */
	ck_assert_int_eq(o2_blockdev_read(dev, buf, 512, MiB), -ENXIO);
	o2_blockdev_free(dev);

	/* The file is unchanged. */
	fd = open(path, O_RDONLY);
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	for (size_t i = 0; i < sizeof(buf); i++)
		ck_assert_uint_eq(buf[i], 0);
	close(fd);

	/* A file we may only read cannot be opened for writing (unless root). */
	ck_assert_int_eq(chmod(path, 0444), 0);
	dev = NULL;
	int r = o2_blockdev_open_file(path, 0, &dev);
	if (geteuid() != 0) {
		ck_assert_int_eq(r, -EACCES);
		ck_assert_ptr_null(dev);
	} else if (r == 0) {
		o2_blockdev_free(dev);
	}
	dev = NULL;
	ck_assert_int_eq(o2_blockdev_open_file(path, O2_DEV_RDONLY, &dev), 0);
	o2_blockdev_free(dev);

	unlink(path);
	free(path);
}
END_TEST

START_TEST(test_memory_readonly_flag)
{
	struct o2_blockdev *dev = NULL;
	uint8_t buf[512] = { 1 };

	/* read_only is part of the interface: the generic layer enforces it. */
	ck_assert_int_eq(o2_blockdev_new_memory(MiB, &dev), 0);
	dev->read_only = 1;
	ck_assert_int_eq(o2_blockdev_write(dev, buf, 512, 0), -EROFS);
	ck_assert_uint_eq(o2_blockdev_memory_data(dev)[0], 0);
	ck_assert_int_eq(o2_blockdev_read(dev, buf, 512, 0), 0);
	o2_blockdev_free(dev);
}
END_TEST

START_TEST(test_file_errors)
{
	struct o2_blockdev *dev = NULL;

	ck_assert_int_eq(o2_blockdev_open_file("/nonexistent/o2test/image", 0, &dev), -ENOENT);
	ck_assert_ptr_null(dev);
	ck_assert_int_eq(o2_blockdev_open_file("/nonexistent/o2test/image", O2_DEV_RDONLY, &dev),
			 -ENOENT);

	/* A directory is not a device. */
	int r = o2_blockdev_open_file("/tmp", O2_DEV_RDONLY, &dev);
	ck_assert_int_lt(r, 0);
	ck_assert_ptr_null(dev);
	r = o2_blockdev_open_file("/tmp", 0, &dev);
	ck_assert_int_lt(r, 0);
	ck_assert_ptr_null(dev);

	/* Neither is a character device. */
	r = o2_blockdev_open_file("/dev/null", 0, &dev);
	ck_assert_int_lt(r, 0);
	ck_assert_ptr_null(dev);
}
END_TEST

START_TEST(test_file_empty)
{
	char *path = make_temp(0);
	struct o2_blockdev *dev = NULL;
	uint8_t buf[512];

	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_uint_eq(dev->size, 0);
	ck_assert_int_eq(o2_blockdev_read(dev, buf, 512, 0), -ENXIO);
	ck_assert_int_eq(o2_blockdev_write(dev, buf, 512, 0), -ENXIO);
	o2_blockdev_free(dev);

	/* A file under one sector is an empty device, too. */
	int fd = open(path, O_WRONLY);
	ck_assert_int_eq(ftruncate(fd, 300), 0);
	close(fd);
	dev = NULL;
	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_uint_eq(dev->size, 0);
	ck_assert_int_eq(o2_blockdev_read(dev, buf, 512, 0), -ENXIO);
	o2_blockdev_free(dev);

	unlink(path);
	free(path);
}
END_TEST

START_TEST(test_file_shrunk)
{
	/* The file shrinks under an open device: reads fail cleanly. */
	char *path = make_temp(MiB);
	struct o2_blockdev *dev = NULL;
	uint8_t buf[4096];

	ck_assert_int_eq(o2_blockdev_open_file(path, 0, &dev), 0);
	ck_assert_int_eq(truncate(path, 4096), 0);
	ck_assert_int_eq(o2_blockdev_read(dev, buf, 4096, 0), 0);
	int r = o2_blockdev_read(dev, buf, 4096, 8192);
	ck_assert_int_lt(r, 0);
	o2_blockdev_free(dev);
	unlink(path);
	free(path);
}
END_TEST

static int run_quiet(const char *cmd)
{
	int st = system(cmd);
	return (st != -1 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
}

/* A real block device through a loop device, where we may make one. */
START_TEST(test_loop_device)
{
	if (geteuid() != 0 || access("/dev/loop-control", W_OK) != 0 ||
	    run_quiet("command -v losetup >/dev/null 2>&1") != 0) {
		fprintf(stderr, "loop device test skipped: needs root, /dev/loop-control, losetup\n");
		return;
	}
	char *path = make_temp(8 * MiB);
	char cmd[256], loop[64] = "";
	snprintf(cmd, sizeof(cmd), "losetup -f --show %s 2>/dev/null", path);
	FILE *p = popen(cmd, "r");
	if (!p || !fgets(loop, sizeof(loop), p)) {
		if (p)
			pclose(p);
		fprintf(stderr, "loop device test skipped: losetup failed\n");
		unlink(path);
		free(path);
		return;
	}
	pclose(p);
	loop[strcspn(loop, "\n")] = 0;
	struct stat st;
	if (stat(loop, &st) != 0 || !S_ISBLK(st.st_mode)) {
		fprintf(stderr, "loop device test skipped: %s is not a block device here\n", loop);
		snprintf(cmd, sizeof(cmd), "losetup -d %s", loop);
		run_quiet(cmd);
		unlink(path);
		free(path);
		return;
	}

	struct o2_blockdev *dev = NULL;
	int r = o2_blockdev_open_file(loop, 0, &dev);
	if (r == 0) {
		ck_assert_uint_eq(dev->size, 8 * MiB);
		exercise_device(dev);
		o2_blockdev_free(dev);
	}
	snprintf(cmd, sizeof(cmd), "losetup -d %s", loop);
	run_quiet(cmd);
	unlink(path);
	free(path);
	ck_assert_int_eq(r, 0);
}
END_TEST

static Suite *blockdev_suite(void)
{
	Suite *s = suite_create("blockdev");
	TCase *tc = tcase_create("memory");
	tcase_add_test(tc, test_memory_basic);
	tcase_add_test(tc, test_memory_sizes);
	tcase_add_test(tc, test_memory_from);
	tcase_add_test(tc, test_memory_huge);
	tcase_add_test(tc, test_memory_readonly_flag);
	suite_add_tcase(s, tc);
	tc = tcase_create("file");
	tcase_add_test(tc, test_file_basic);
	tcase_add_test(tc, test_file_direct);
	tcase_add_test(tc, test_file_readonly);
	tcase_add_test(tc, test_file_errors);
	tcase_add_test(tc, test_file_empty);
	tcase_add_test(tc, test_file_shrunk);
	tcase_add_test(tc, test_loop_device);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(blockdev_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
