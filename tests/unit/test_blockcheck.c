/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Metaecc block check: CRC32 + Hamming code (fscore/blockcheck.h).
 *
 * - known CRC vectors and a naive reference Hamming encoder of our own;
 * - compute, then verify, on random blocks of every block size;
 * - one flipped data bit is corrected (and the buffer restored); two flipped
 *   bits are refused and the buffer left as it was given;
 * - the checks that the real mkfs.ocfs2 stored on a max-features volume
 *   (superblock, root and system inodes, group descriptors, directory
 *   trailers, dx roots) verify, and recomputing them gives the same bytes.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blockcheck.h"
#include "format.h"
#include "../testenv.h"

/* A small deterministic PRNG (xorshift64*), so failures reproduce. */
static uint64_t rng_state;

static void rng_seed(uint64_t s)
{
	rng_state = s * 0x9E3779B97F4A7C15ull + 1;
}

static uint64_t rng_next(void)
{
	uint64_t x = rng_state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545F4914F6CDD1Dull;
}

static void random_block(uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(rng_next() >> 56);
}

static void flip(uint8_t *buf, size_t bit)
{
	buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
}

/* Where in a test block we keep the check: an inode's i_check. */
#define CHECK_OFF offsetof(struct o2_dinode, i_check)
#define CHECK_BITS_LO (CHECK_OFF * 8)
#define CHECK_BITS_HI ((CHECK_OFF + sizeof(struct o2_block_check)) * 8)

static int in_check(size_t bit)
{
	return bit >= CHECK_BITS_LO && bit < CHECK_BITS_HI;
}

/*
 * Reference Hamming encoder, written from the definition: data bit i
 * (LSB-first, byte by byte) takes the i-th 1-based code position that is not
 * a power of two; the parity is the XOR of the positions of all set bits.
 */
static uint32_t ref_hamming(const uint8_t *d, size_t len)
{
	uint32_t parity = 0, pos = 0;

	for (size_t i = 0; i < len * 8; i++) {
		do
			pos++;
		while ((pos & (pos - 1)) == 0);
		if (d[i / 8] & (1u << (i % 8)))
			parity ^= pos;
	}
	return parity;
}

START_TEST(test_crc_vectors)
{
	/* CRC-32/ISO-HDLC of "123456789" is 0xCBF43926; ours has no final xor. */
	ck_assert_uint_eq(o2_blockcheck_crc("123456789", 9), ~0xCBF43926u);
	/* The empty message: the seed itself. */
	ck_assert_uint_eq(o2_blockcheck_crc("", 0), 0xFFFFFFFFu);
	/* 32 zero bytes: CRC-32 is 0x190A55AD. */
	uint8_t z[32] = { 0 };
	ck_assert_uint_eq(o2_blockcheck_crc(z, sizeof(z)), ~0x190A55ADu);
}
END_TEST

START_TEST(test_hamming_reference)
{
	uint8_t buf[4096];

	/* Single bits: the encoding of bit i is its code position. */
	ck_assert_uint_eq(ref_hamming((const uint8_t[]){ 0x01 }, 1), 3);
	ck_assert_uint_eq(ref_hamming((const uint8_t[]){ 0x02 }, 1), 5);
	ck_assert_uint_eq(ref_hamming((const uint8_t[]){ 0x04 }, 1), 6);
	ck_assert_uint_eq(ref_hamming((const uint8_t[]){ 0x08 }, 1), 7);
	ck_assert_uint_eq(ref_hamming((const uint8_t[]){ 0x10 }, 1), 9);
	for (size_t bit = 0; bit < 4096 * 8; bit += 1 + bit / 64) {
		memset(buf, 0, sizeof(buf));
		flip(buf, bit);
		ck_assert_msg(o2_hamming_encode(buf, sizeof(buf)) == ref_hamming(buf, sizeof(buf)),
			      "bit %zu: %u vs reference %u", bit, o2_hamming_encode(buf, sizeof(buf)),
			      ref_hamming(buf, sizeof(buf)));
	}
	/* The last bit of the largest block: every bit. */
	memset(buf, 0, sizeof(buf));
	flip(buf, 4096 * 8 - 1);
	ck_assert_uint_eq(o2_hamming_encode(buf, sizeof(buf)), ref_hamming(buf, sizeof(buf)));
	ck_assert_uint_lt(o2_hamming_encode(buf, sizeof(buf)), 1u << 16);

	rng_seed(1);
	for (int n = 0; n < 64; n++) {
		size_t len = 1 + rng_next() % sizeof(buf);
		random_block(buf, len);
		ck_assert_uint_eq(o2_hamming_encode(buf, len), ref_hamming(buf, len));
	}
}
END_TEST

static void compute_verify_size(size_t bs, uint64_t seed, size_t every)
{
	uint8_t *blk = malloc(bs), *orig = malloc(bs), *damaged = malloc(bs);
	struct o2_block_check stored;

	rng_seed(seed);
	random_block(blk, bs);
	o2_blockcheck_compute(blk, bs, blk + CHECK_OFF);
	struct o2_block_check *bc = (struct o2_block_check *)(blk + CHECK_OFF);
	ck_assert_uint_eq(le16(bc->reserved), 0);
	memcpy(orig, blk, bs);
	memcpy(&stored, bc, sizeof(stored));

	/* The stored crc is the crc of the block with a zeroed check. */
	memset(bc, 0, sizeof(*bc));
	ck_assert_uint_eq(le32(stored.crc32e), o2_blockcheck_crc(blk, bs));
	ck_assert_uint_eq(le16(stored.ecc), ref_hamming(blk, bs) & 0xFFFF);
	ck_assert_uint_eq(le16(stored.ecc), o2_hamming_encode(blk, bs) & 0xFFFF);
	memcpy(bc, &stored, sizeof(stored));

	/* A clean block verifies, unchanged. */
	ck_assert_int_eq(o2_blockcheck_verify(blk, bs, blk + CHECK_OFF), 0);
	ck_assert_mem_eq(blk, orig, bs);

	/* One flipped data bit: corrected. */
	for (size_t bit = 0; bit < bs * 8; bit += every) {
		size_t b = bit;
		if (every > 1)
			b = bit + rng_next() % every;
		if (b >= bs * 8 || in_check(b))
			continue;
		flip(blk, b);
		int r = o2_blockcheck_verify(blk, bs, blk + CHECK_OFF);
		ck_assert_msg(r == 1, "bs %zu bit %zu: verify gave %d, expected 1 (corrected)", bs, b,
			      r);
		ck_assert_msg(memcmp(blk, orig, bs) == 0, "bs %zu bit %zu: not restored", bs, b);
	}
	/* The first and last data bits, and the bits around the check. */
	const size_t edges[] = { 0, 1, 7, 8, CHECK_BITS_LO - 1, CHECK_BITS_HI, bs * 8 - 1,
				 bs * 8 - 8 };
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
		flip(blk, edges[i]);
		ck_assert_int_eq(o2_blockcheck_verify(blk, bs, blk + CHECK_OFF), 1);
		ck_assert_mem_eq(blk, orig, bs);
	}

	/* Two flipped data bits: refused, and the buffer left as given. */
	for (int n = 0; n < 300; n++) {
		size_t a, b;
		do {
			a = rng_next() % (bs * 8);
			b = rng_next() % (bs * 8);
		} while (a == b || in_check(a) || in_check(b));
		flip(blk, a);
		flip(blk, b);
		memcpy(damaged, blk, bs);
		int r = o2_blockcheck_verify(blk, bs, blk + CHECK_OFF);
		ck_assert_msg(r == -EBADMSG, "bs %zu bits %zu,%zu: verify gave %d, expected -EBADMSG",
			      bs, a, b, r);
		ck_assert_msg(memcmp(blk, damaged, bs) == 0, "bs %zu bits %zu,%zu: buffer changed", bs,
			      a, b);
		memcpy(blk, orig, bs);
	}
	/* Two adjacent bits and a whole flipped byte. */
	flip(blk, 100);
	flip(blk, 101);
	ck_assert_int_eq(o2_blockcheck_verify(blk, bs, blk + CHECK_OFF), -EBADMSG);
	memcpy(blk, orig, bs);
	blk[bs - 1] ^= 0xFF;
	ck_assert_int_eq(o2_blockcheck_verify(blk, bs, blk + CHECK_OFF), -EBADMSG);
	memcpy(blk, orig, bs);

	/*
	 * Damage in the stored check.  A flipped CRC bit cannot be repaired
	 * (the kernel gives -EIO too) and must not "correct" good data; a
	 * flipped ECC bit does not matter while the CRC matches.
	 */
	for (size_t bit = 0; bit < 32; bit++) {
		flip(blk, CHECK_BITS_LO + bit);
		memcpy(damaged, blk, bs);
		ck_assert_int_eq(o2_blockcheck_verify(blk, bs, blk + CHECK_OFF), -EBADMSG);
		ck_assert_mem_eq(blk, damaged, bs);
		memcpy(blk, orig, bs);
	}
	for (size_t bit = 32; bit < 48; bit++) {
		flip(blk, CHECK_BITS_LO + bit);
		memcpy(damaged, blk, bs);
		ck_assert_int_eq(o2_blockcheck_verify(blk, bs, blk + CHECK_OFF), 0);
		ck_assert_mem_eq(blk, damaged, bs);
		memcpy(blk, orig, bs);
	}

	/* One data bit and the crc both wrong: refused. */
	flip(blk, 5);
	flip(blk, CHECK_BITS_LO + 3);
	ck_assert_int_eq(o2_blockcheck_verify(blk, bs, blk + CHECK_OFF), -EBADMSG);
	memcpy(blk, orig, bs);

	/* An all-zero check on a non-zero block (a volume without metaecc). */
	memset(bc, 0, sizeof(*bc));
	ck_assert_int_eq(o2_blockcheck_verify(blk, bs, blk + CHECK_OFF), -EBADMSG);

	free(blk);
	free(orig);
	free(damaged);
}

START_TEST(test_every_block_size)
{
	/* Every bit at 512 and 1024; a random bit in each run of 7 or 29 above. */
	compute_verify_size(512, 512 + (uint64_t)_i, 1);
	compute_verify_size(1024, 1024 + (uint64_t)_i, 1);
	compute_verify_size(2048, 2048 + (uint64_t)_i, 7);
	compute_verify_size(4096, 4096 + (uint64_t)_i, 29);
}
END_TEST

START_TEST(test_check_elsewhere)
{
	/* The check may sit anywhere: a group descriptor, a trailer, the end. */
	const size_t offs[] = { offsetof(struct o2_group_desc, bg_check),
				offsetof(struct o2_extent_block, h_check),
				4096 - 64 + offsetof(struct o2_dir_trailer, db_check), 4096 - 8 };
	uint8_t blk[4096], orig[4096];

	rng_seed(99);
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		random_block(blk, sizeof(blk));
		o2_blockcheck_compute(blk, sizeof(blk), blk + offs[i]);
		memcpy(orig, blk, sizeof(blk));
		ck_assert_int_eq(o2_blockcheck_verify(blk, sizeof(blk), blk + offs[i]), 0);
		size_t bit = (offs[i] + 8) % sizeof(blk) * 8 + 3;
		flip(blk, bit);
		ck_assert_int_eq(o2_blockcheck_verify(blk, sizeof(blk), blk + offs[i]), 1);
		ck_assert_mem_eq(blk, orig, sizeof(blk));
	}
}
END_TEST

START_TEST(test_zero_block)
{
	uint8_t blk[512] = { 0 };

	o2_blockcheck_compute(blk, sizeof(blk), blk + CHECK_OFF);
	struct o2_block_check *bc = (struct o2_block_check *)(blk + CHECK_OFF);
	ck_assert_uint_eq(le16(bc->ecc), 0);
	ck_assert_uint_eq(le32(bc->crc32e), o2_blockcheck_crc((uint8_t[512]){ 0 }, 512));
	ck_assert_int_eq(o2_blockcheck_verify(blk, sizeof(blk), blk + CHECK_OFF), 0);
	flip(blk, 4000);
	ck_assert_int_eq(o2_blockcheck_verify(blk, sizeof(blk), blk + CHECK_OFF), 1);
	ck_assert_uint_eq(blk[500], 0);
}
END_TEST

/* ---- against volumes made by the real mkfs.ocfs2 ---- */

static int have_mkfs(void)
{
	return system("command -v mkfs.ocfs2 >/dev/null 2>&1") == 0;
}

/* Make a max-features image; returns a malloc'd path, or NULL. */
static char *make_image(unsigned bs)
{
	char *path = strdup("/tmp/o2test-blockcheck-XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 256 << 20), 0);
	close(fd);
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
		 "mkfs.ocfs2 -q --fs-feature-level=max-features -b %u -C 4096 -J size=4M %s "
		 ">/dev/null 2>&1 </dev/null",
		 bs, path);
	int st = system(cmd);
	ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "mkfs.ocfs2 failed: %s",
		      cmd);
	return path;
}

struct scan_counts {
	unsigned inodes, groups, trailers, dx_roots, extents, super;
};

/* Verify one stored check, and that recomputing reproduces it exactly. */
static void verify_stored(uint8_t *blk, unsigned bs, size_t check_off, uint64_t blkno,
			  const char *what)
{
	uint8_t copy[4096];
	memcpy(copy, blk, bs);
	int r = o2_blockcheck_verify(blk, bs, blk + check_off);
	ck_assert_msg(r == 0, "%s at block %llu: stored check does not verify (%d)", what,
		      (unsigned long long)blkno, r);
	ck_assert_mem_eq(blk, copy, bs);
	o2_blockcheck_compute(copy, bs, copy + check_off);
	ck_assert_msg(memcmp(blk, copy, bs) == 0, "%s at block %llu: recomputed check differs",
		      what, (unsigned long long)blkno);
	/* Any one flipped bit outside the check is repaired. */
	size_t bit = (blkno * 131 + 17) % (bs * 8);
	if (bit / 8 >= check_off && bit / 8 < check_off + 8)
		bit = 0;
	memcpy(copy, blk, bs);
	flip(blk, bit);
	ck_assert_int_eq(o2_blockcheck_verify(blk, bs, blk + check_off), 1);
	ck_assert_mem_eq(blk, copy, bs);
}

static void scan_image(const char *path, unsigned bs, struct scan_counts *c)
{
	int fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	uint8_t *blk = malloc(bs);
	off_t size = lseek(fd, 0, SEEK_END);
	/* The metadata mkfs writes sits in the first 64 MiB of these volumes. */
	uint64_t nblocks = (uint64_t)(size < (64 << 20) ? size : (64 << 20)) / bs;

	memset(c, 0, sizeof(*c));
	for (uint64_t b = 0; b < nblocks; b++) {
		ck_assert_int_eq(pread(fd, blk, bs, (off_t)(b * bs)), (ssize_t)bs);
		if (!memcmp(blk, O2_SIG_SUPER, sizeof(O2_SIG_SUPER))) {
			ck_assert_uint_eq(b, O2_SUPER_BLKNO);
			verify_stored(blk, bs, offsetof(struct o2_dinode, i_check), b, "superblock");
			c->super++;
		} else if (!memcmp(blk, O2_SIG_INODE, sizeof(O2_SIG_INODE))) {
			verify_stored(blk, bs, offsetof(struct o2_dinode, i_check), b, "inode");
			c->inodes++;
		} else if (!memcmp(blk, O2_SIG_GROUP, sizeof(O2_SIG_GROUP))) {
			verify_stored(blk, bs, offsetof(struct o2_group_desc, bg_check), b,
				      "group descriptor");
			c->groups++;
		} else if (!memcmp(blk, O2_SIG_DXROOT, sizeof(O2_SIG_DXROOT))) {
			verify_stored(blk, bs, offsetof(struct o2_dx_root_block, dr_check), b,
				      "dx root");
			c->dx_roots++;
		} else if (!memcmp(blk, O2_SIG_EXTENT, sizeof(O2_SIG_EXTENT))) {
			verify_stored(blk, bs, offsetof(struct o2_extent_block, h_check), b,
				      "extent block");
			c->extents++;
		} else if (!memcmp(blk + bs - sizeof(struct o2_dir_trailer) +
					   offsetof(struct o2_dir_trailer, db_signature),
				   O2_SIG_DIRTRL, sizeof(O2_SIG_DIRTRL))) {
			verify_stored(blk, bs,
				      bs - sizeof(struct o2_dir_trailer) +
					      offsetof(struct o2_dir_trailer, db_check),
				      b, "directory block");
			c->trailers++;
		}
	}
	free(blk);
	close(fd);
}

static void real_image(unsigned bs)
{
	if (!have_mkfs()) {
		fprintf(stderr, "mkfs.ocfs2 not installed: real-image check skipped\n");
		return;
	}
	char *path = make_image(bs);
	uint8_t *blk = malloc(bs);
	int fd = open(path, O_RDONLY);

	/* The superblock and the root inode, as the brief has it. */
	ck_assert_int_eq(pread(fd, blk, bs, 2 * (off_t)bs), (ssize_t)bs);
	struct o2_dinode *sb = (struct o2_dinode *)blk;
	ck_assert_mem_eq(sb->i_signature, O2_SIG_SUPER, sizeof(O2_SIG_SUPER));
	ck_assert(le32(sb->id2.i_super.s_feature_incompat) & 0x0800); /* metaecc */
	ck_assert_uint_ne(le32(sb->i_check.crc32e), 0);
	ck_assert_int_eq(o2_blockcheck_verify(blk, bs, &sb->i_check), 0);
	uint64_t root = le64(sb->id2.i_super.s_root_blkno);
	uint64_t sysdir = le64(sb->id2.i_super.s_system_dir_blkno);
	ck_assert_int_eq(pread(fd, blk, bs, (off_t)(root * bs)), (ssize_t)bs);
	ck_assert_mem_eq(blk, O2_SIG_INODE, sizeof(O2_SIG_INODE));
	ck_assert_int_eq(o2_blockcheck_verify(blk, bs, blk + offsetof(struct o2_dinode, i_check)),
			 0);
	ck_assert_int_eq(pread(fd, blk, bs, (off_t)(sysdir * bs)), (ssize_t)bs);
	ck_assert_int_eq(o2_blockcheck_verify(blk, bs, blk + offsetof(struct o2_dinode, i_check)),
			 0);
	close(fd);

	/* Then every metadata block mkfs wrote. */
	struct scan_counts c;
	scan_image(path, bs, &c);
	fprintf(stderr,
		"bs %u: verified super %u, inodes %u, groups %u, dir trailers %u, dx roots %u, "
		"extent blocks %u\n",
		bs, c.super, c.inodes, c.groups, c.trailers, c.dx_roots, c.extents);
	ck_assert_uint_eq(c.super, 1);
	ck_assert_uint_ge(c.inodes, 20);
	ck_assert_uint_ge(c.groups, 3);
	/*
	 * At 4 KiB every directory mkfs makes is inline; at 512 bytes the
	 * system directory needs blocks, each with a trailer.  mkfs makes no
	 * dx root and no extent block on these small volumes.
	 */
	if (bs == 512)
		ck_assert_uint_ge(c.trailers, 1);

	free(blk);
	unlink(path);
	free(path);
}

START_TEST(test_real_image_4096)
{
	real_image(4096);
}
END_TEST

START_TEST(test_real_image_512)
{
	real_image(512);
}
END_TEST

static Suite *blockcheck_suite(void)
{
	Suite *s = suite_create("blockcheck");
	TCase *tc = tcase_create("synthetic");
	tcase_add_test(tc, test_crc_vectors);
	tcase_add_test(tc, test_hamming_reference);
	tcase_add_loop_test(tc, test_every_block_size, 0, 3);
	tcase_add_test(tc, test_check_elsewhere);
	tcase_add_test(tc, test_zero_block);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	tc = tcase_create("mkfs");
	tcase_add_test(tc, test_real_image_4096);
	tcase_add_test(tc, test_real_image_512);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_env_init();
	SRunner *sr = srunner_create(blockcheck_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
