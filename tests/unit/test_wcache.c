// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The write-back cache in front of a clustered volume's device
 * (daemon/wcache.c), alone, over a memory device.
 *
 * A model of what was written says what every read must return; the
 * memory device behind says what reached the disk: nothing a flush or the
 * bound did not send, everything once one did.  Writes are random in
 * place and length (whole sectors, pages in part, the device's last page,
 * which is short), with reads of random ranges between them.
 */
#include <check.h>
#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../testenv.h"
#include "ocfs2d.h"

/* without a record per byte: Check writes one for each assertion that passes */
#define REQUIRE_BYTE(c, i, direct)                                                          \
	do {                                                                                 \
		if (!(c))                                                                    \
			ck_abort_msg("byte %zu of the file differs (O_DIRECT %d)", (i), (direct)); \
	} while (0)

#define SIZE ((1u << 20) + 1536u) /* the last page is 1536 bytes */
#define SECTOR 512u
#define PAGE_BYTES 4096u

static uint8_t model[SIZE];
/* the cache, over a device that counts (and fails on demand), over memory */
static struct o2_blockdev *mem, *fault, *dev;

static void open_cache(size_t limit)
{
	ck_assert_int_eq(o2_blockdev_new_memory(SIZE, &mem), 0);
	ck_assert_int_eq(o2_faultdev_new(mem, &fault), 0);
	memset(model, 0, sizeof(model));
	ck_assert_int_eq(wcache_new(fault, limit, &dev), 0);
}

static void close_cache(void)
{
	o2_blockdev_free(dev); /* and fault with it, which borrows mem */
	o2_blockdev_free(mem);
}

/* Flushes that reached the disk. */
static uint64_t disk_flushes(void)
{
	struct o2_fault_counts n;

	o2_faultdev_counts(fault, &n);
	return n.flushes;
}

static uint8_t *disk(void)
{
	return o2_blockdev_memory_data(mem);
}

/* A random range of whole sectors: [*off, *off + *len). */
static void some_range(GRand *rnd, size_t max, uint64_t *off, size_t *len)
{
	uint64_t nsec = SIZE / SECTOR;
	uint64_t s = (uint64_t)g_rand_int_range(rnd, 0, (gint32)nsec);
	uint64_t n = 1 + (uint64_t)g_rand_int_range(rnd, 0, (gint32)(max / SECTOR));

	if (s + n > nsec)
		n = nsec - s;
	*off = s * SECTOR;
	*len = (size_t)(n * SECTOR);
}

static void write_some(GRand *rnd, size_t max)
{
	static uint8_t buf[64 << 10];
	uint64_t off;
	size_t len;

	some_range(rnd, max, &off, &len);
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)g_rand_int(rnd);
	/* metadata (no owner) or some inode's data */
	if (g_rand_boolean(rnd))
		ck_assert_int_eq(o2_blockdev_write(dev, buf, len, off), 0);
	else
		ck_assert_int_eq(o2_blockdev_write_data(dev, buf, len, off,
							(uint64_t)g_rand_int_range(rnd, 0, 3)), 0);
	memcpy(model + off, buf, len);
}

static void read_some(GRand *rnd)
{
	static uint8_t buf[64 << 10];
	uint64_t off;
	size_t len;

	some_range(rnd, sizeof(buf), &off, &len);
	/* metadata reads and data reads alike (the data's from clean copies too) */
	if (g_rand_boolean(rnd))
		ck_assert_int_eq(o2_blockdev_read(dev, buf, len, off), 0);
	else
		ck_assert_int_eq(o2_blockdev_read_data(dev, buf, len, off,
						       (uint64_t)g_rand_int_range(rnd, 0, 3)), 0);
	ck_assert_msg(memcmp(buf, model + off, len) == 0, "read of %zu bytes at %llu differs", len,
		      (unsigned long long)off);
}

/* Writes stay in the cache, reads see them, a flush sends them all. */
START_TEST(test_cached_until_flush)
{
	GRand *rnd = g_rand_new_with_seed(1);
	struct wcache_stats st;

	open_cache(64u << 20);
	for (int i = 0; i < 2000; i++) {
		write_some(rnd, 16 << 10);
		read_some(rnd);
	}
	/* the device's last page, short, written in part */
	uint8_t tail[SECTOR];

	memset(tail, 0xab, sizeof(tail));
	ck_assert_int_eq(o2_blockdev_write(dev, tail, SECTOR, SIZE - SECTOR), 0);
	memcpy(model + SIZE - SECTOR, tail, SECTOR);
	for (size_t i = 0; i < SIZE; i++)
		ck_assert_msg(disk()[i] == 0, "byte %zu reached the disk before a flush", i);
	wcache_stats(dev, &st);
	ck_assert_uint_gt(st.cached, 0);
	ck_assert_uint_eq(st.sent, 0);
	ck_assert_int_eq(o2_blockdev_flush(dev), 0);
	ck_assert_uint_eq(o2_blockdev_flushes(dev), 1);
	ck_assert_uint_eq(disk_flushes(), 1);
	ck_assert(memcmp(disk(), model, SIZE) == 0);
	wcache_stats(dev, &st);
	ck_assert_uint_eq(st.cached, 0);
	ck_assert_uint_gt(st.sent, 0);
	for (int i = 0; i < 200; i++)
		read_some(rnd);
	/* written out without a flush: on the disk, no flush counted */
	write_some(rnd, 16 << 10);
	ck_assert_int_eq(wcache_write_out(dev), 0);
	ck_assert(memcmp(disk(), model, SIZE) == 0);
	ck_assert_uint_eq(disk_flushes(), 1);
	close_cache();
	g_rand_free(rnd);
}
END_TEST

/* Past the bound, writes go on to the disk; reads still see the model. */
START_TEST(test_bound)
{
	GRand *rnd = g_rand_new_with_seed(2);
	struct wcache_stats st;

	open_cache(64u << 10);
	for (int i = 0; i < 3000; i++) {
		write_some(rnd, 32 << 10);
		read_some(rnd);
		wcache_stats(dev, &st);
		ck_assert_uint_le(st.cached, (64u << 10) + (32u << 10) + 4096);
	}
	ck_assert_uint_gt(st.sent, 0);
	ck_assert_uint_eq(disk_flushes(), 0);
	ck_assert_int_eq(o2_blockdev_flush(dev), 0);
	ck_assert(memcmp(disk(), model, SIZE) == 0);
	close_cache();
	g_rand_free(rnd);
}
END_TEST

static volatile gint stop;

static gpointer flusher(gpointer p)
{
	while (!g_atomic_int_get(&stop))
		ck_assert_int_eq(o2_blockdev_flush(dev), 0);
	return NULL;
}

/* fsync flushes without the volume's lock: reads and writes go on meanwhile. */
START_TEST(test_flush_beside_writes)
{
	GRand *rnd = g_rand_new_with_seed(3);

	open_cache(64u << 20);
	stop = 0;
	GThread *th = g_thread_new("flusher", flusher, NULL);

	for (int i = 0; i < 5000; i++) {
		write_some(rnd, 8 << 10);
		read_some(rnd);
	}
	g_atomic_int_set(&stop, 1);
	g_thread_join(th);
	ck_assert_uint_gt(disk_flushes(), 0);
	ck_assert_int_eq(o2_blockdev_flush(dev), 0);
	ck_assert(memcmp(disk(), model, SIZE) == 0);
	close_cache();
	g_rand_free(rnd);
}
END_TEST

/* A write the disk refuses: the flush fails, and nothing cached is lost. */
START_TEST(test_failed_send_kept)
{
	GRand *rnd = g_rand_new_with_seed(4);
	struct o2_fault_plan plan = { .fail_write = 1 };

	open_cache(64u << 20);
	for (int i = 0; i < 100; i++)
		write_some(rnd, 16 << 10);
	o2_faultdev_set_plan(fault, &plan);
	ck_assert_int_eq(o2_blockdev_flush(dev), -EIO);
	for (int i = 0; i < 100; i++)
		read_some(rnd);
	ck_assert_int_eq(o2_blockdev_flush(dev), 0);
	ck_assert(memcmp(disk(), model, SIZE) == 0);
	close_cache();
	g_rand_free(rnd);
}
END_TEST

/*
 * Clean copies answer reads of file data, never metadata reads, and go
 * at wcache_drop_clean; a sector written is sent alone, never its
 * neighbours in the page (another owner's blocks, changed meanwhile).
 */
START_TEST(test_clean_copies)
{
	uint8_t a[PAGE_BYTES], b[PAGE_BYTES], got[PAGE_BYTES];

	open_cache(64u << 20);
	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	ck_assert_int_eq(o2_blockdev_write_data(dev, a, sizeof(a), 8192, 7), 0);
	ck_assert_int_eq(o2_blockdev_flush(dev), 0);
	/* another node changes the block after this node gave its lock up */
	memcpy(disk() + 8192, b, sizeof(b));
	ck_assert_int_eq(o2_blockdev_read_data(dev, got, sizeof(got), 8192, 7), 0);
	ck_assert(memcmp(got, a, sizeof(a)) == 0); /* the copy: no lock was lost yet */
	ck_assert_int_eq(o2_blockdev_read(dev, got, sizeof(got), 8192), 0);
	ck_assert(memcmp(got, b, sizeof(b)) == 0); /* metadata reads go to the disk */
	wcache_drop_clean(dev);
	ck_assert_int_eq(o2_blockdev_read_data(dev, got, sizeof(got), 8192, 7), 0);
	ck_assert(memcmp(got, b, sizeof(b)) == 0);
	/* read once, kept: the disk changing under it is not seen until a drop */
	memcpy(disk() + 8192, a, sizeof(a));
	ck_assert_int_eq(o2_blockdev_read_data(dev, got, sizeof(got), 8192, 7), 0);
	ck_assert(memcmp(got, b, sizeof(b)) == 0);
	wcache_drop_clean(dev);
	ck_assert_int_eq(o2_blockdev_read_data(dev, got, sizeof(got), 8192, 7), 0);
	ck_assert(memcmp(got, a, sizeof(a)) == 0);

	/* one sector of a page written; another node changes its neighbour */
	memset(disk() + 16384, 'o', PAGE_BYTES);
	ck_assert_int_eq(o2_blockdev_write(dev, b, SECTOR, 16384), 0);
	memset(disk() + 16384 + SECTOR, 'n', SECTOR);
	ck_assert_int_eq(o2_blockdev_flush(dev), 0);
	for (unsigned i = 0; i < SECTOR; i++) {
		ck_assert_uint_eq(disk()[16384 + i], 'b');
		ck_assert_uint_eq(disk()[16384 + SECTOR + i], 'n');
		ck_assert_uint_eq(disk()[16384 + 2 * SECTOR + i], 'o');
	}
	/* a data read of the page after: the written sector from the cache, the rest read */
	ck_assert_int_eq(o2_blockdev_read_data(dev, got, sizeof(got), 16384, 7), 0);
	ck_assert(memcmp(got, disk() + 16384, sizeof(got)) == 0);
	close_cache();
}
END_TEST

/*
 * Copies know their owner: a lock lost takes its owner's copies (and those
 * of no named owner), not another's, and a copy never answers a read for
 * another owner (the block went to another use).
 */
START_TEST(test_owners)
{
	uint8_t a[PAGE_BYTES], b[PAGE_BYTES], n[PAGE_BYTES], got[PAGE_BYTES];

	open_cache(64u << 20);
	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	memset(n, 'n', sizeof(n));
	ck_assert_int_eq(o2_blockdev_write_data(dev, a, sizeof(a), 8192, 11), 0);
	ck_assert_int_eq(o2_blockdev_write_data(dev, b, sizeof(b), 12288, 22), 0);
	ck_assert_int_eq(o2_blockdev_write(dev, a, sizeof(a), 16384), 0);
	ck_assert_int_eq(o2_blockdev_flush(dev), 0);
	/* another node writes all three, having taken 11's lock */
	memcpy(disk() + 8192, n, sizeof(n));
	memcpy(disk() + 12288, n, sizeof(n));
	memcpy(disk() + 16384, n, sizeof(n));
	wcache_lost(dev, 11);
	ck_assert_int_eq(o2_blockdev_read_data(dev, got, sizeof(got), 8192, 11), 0);
	ck_assert(memcmp(got, n, sizeof(n)) == 0);
	ck_assert_int_eq(o2_blockdev_read_data(dev, got, sizeof(got), 12288, 22), 0);
	ck_assert(memcmp(got, b, sizeof(b)) == 0); /* 22's lock is still here */
	/* a copy of no named owner went with the loss */
	ck_assert_int_eq(o2_blockdev_read_data(dev, got, sizeof(got), 16384, 33), 0);
	ck_assert(memcmp(got, n, sizeof(n)) == 0);
	/* 22's block read for 44 (freed here, reused): from the disk */
	ck_assert_int_eq(o2_blockdev_read_data(dev, got, sizeof(got), 12288, 44), 0);
	ck_assert(memcmp(got, n, sizeof(n)) == 0);
	/* now 44's: 22's loss leaves it, 44's takes it */
	memcpy(disk() + 12288, a, sizeof(a));
	wcache_lost(dev, 22);
	ck_assert_int_eq(o2_blockdev_read_data(dev, got, sizeof(got), 12288, 44), 0);
	ck_assert(memcmp(got, n, sizeof(n)) == 0);
	wcache_lost(dev, 44);
	ck_assert_int_eq(o2_blockdev_read_data(dev, got, sizeof(got), 12288, 44), 0);
	ck_assert(memcmp(got, a, sizeof(a)) == 0);
	/* a write not sent yet is good for any reader, whatever is lost */
	ck_assert_int_eq(o2_blockdev_write_data(dev, b, sizeof(b), 8192, 11), 0);
	wcache_lost(dev, 11);
	ck_assert_int_eq(o2_blockdev_read_data(dev, got, sizeof(got), 8192, 55), 0);
	ck_assert(memcmp(got, b, sizeof(b)) == 0);
	/* sent, the copy is 55's, the last reader to name an owner */
	ck_assert_int_eq(o2_blockdev_flush(dev), 0);
	memcpy(disk() + 8192, n, sizeof(n));
	ck_assert_int_eq(o2_blockdev_read_data(dev, got, sizeof(got), 8192, 55), 0);
	ck_assert(memcmp(got, b, sizeof(b)) == 0);
	wcache_lost(dev, 55);
	ck_assert_int_eq(o2_blockdev_read_data(dev, got, sizeof(got), 8192, 55), 0);
	ck_assert(memcmp(got, n, sizeof(n)) == 0);
	close_cache();
}
END_TEST

/*
 * Over a file, the runs of one send go together through io_uring: what
 * reaches the file is what was written, with O_DIRECT (whole pages by the
 * ring, the rest the ordinary way) where the file system takes it and
 * without.  Scattered pages make more runs than one submission holds.
 */
START_TEST(test_ring)
{
	static uint8_t back[SIZE], page[PAGE_BYTES];
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/wcache-ring-XXXXXX", test_tmpdir());
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	for (int direct = 0; direct < 2; direct++) {
		GRand *rnd = g_rand_new_with_seed(7 + (unsigned)direct);
		struct o2_blockdev *file;
		struct wcache_stats st;
		int r;

		ck_assert_int_eq(ftruncate(fd, 0), 0);
		ck_assert_int_eq(ftruncate(fd, SIZE), 0);
		r = o2_blockdev_open_file(path, direct ? O2_DEV_DIRECT : 0, &file);
		if (direct && r == -EINVAL) {
			printf("no O_DIRECT under %s: the ring is tested without it only\n", path);
			g_rand_free(rnd);
			break;
		}
		ck_assert_int_eq(r, 0);
		ck_assert_int_eq(wcache_new(file, 64u << 20, &dev), 0);
		memset(model, 0, sizeof(model));
		for (unsigned k = 0; k < 200; k++) {
			uint64_t off = (uint64_t)((k * 7) % 250) * PAGE_BYTES;

			memset(page, (int)(k + 1), sizeof(page));
			ck_assert_int_eq(o2_blockdev_write(dev, page, sizeof(page), off), 0);
			memcpy(model + off, page, sizeof(page));
		}
		for (int i = 0; i < 300; i++)
			write_some(rnd, 16 << 10);
		ck_assert_int_eq(wcache_write_out(dev), 0);
		wcache_stats(dev, &st);
		ck_assert_uint_eq(st.cached, 0);
		ck_assert_uint_gt(st.together, 0);
		ck_assert_uint_le(st.together, st.sent);
		ck_assert(pread(fd, back, SIZE, 0) == (ssize_t)SIZE);
		for (size_t i = 0; i < SIZE; i++)
			REQUIRE_BYTE(back[i] == model[i], i, direct);
		o2_blockdev_free(dev);
		g_rand_free(rnd);
	}
	close(fd);
	unlink(path);
}
END_TEST

static Suite *wcache_suite(void)
{
	Suite *s = suite_create("wcache");
	TCase *tc = tcase_create("cache");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_cached_until_flush);
	tcase_add_test(tc, test_bound);
	tcase_add_test(tc, test_flush_beside_writes);
	tcase_add_test(tc, test_failed_send_kept);
	tcase_add_test(tc, test_clean_copies);
	tcase_add_test(tc, test_owners);
	tcase_add_test(tc, test_ring);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_env_init();
	SRunner *sr = srunner_create(wcache_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);

	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
