/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Shared by the fuzz targets (tests/fuzz/fuzz_*.c): the libFuzzer entry
 * point, small deterministic volumes made with o2_mkfs, a byte reader for
 * decoding inputs, the sparse image format, and a read-only "exercise
 * everything" pass over an open volume.
 *
 * A finding is a crash: a sanitizer report, or abort() through fz_fail()
 * when a target's own invariant does not hold.
 */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "o2fs/o2fs.h"

/* The libFuzzer interface, implemented once per target. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Print a message naming the invariant that broke, then abort(). */
__attribute__((noreturn, format(printf, 1, 2))) void fz_fail(const char *fmt, ...);

/* With FUZZ_DEBUG set in the environment: print to stderr (what an input did). */
__attribute__((format(printf, 1, 2))) void fz_debug(const char *fmt, ...);

/* ---- volumes made by fscore's own mkfs ---- */

/* The volume configurations the write-side targets choose from (input byte 0). */
enum fz_config {
	FZ_CFG_512,	     /* 512-byte blocks, 4K clusters, default features */
	FZ_CFG_4K,	     /* 4K blocks and clusters, default features */
	FZ_CFG_512_ECC,	     /* 512-byte blocks, max-features (metaecc) */
	FZ_CFG_1K_COMPAT,    /* 1K blocks, max-compat (no inline data, no indexed dirs) */
	FZ_CFG_COUNT
};

/* every volume: one slot, a 4 MiB journal; 8 to 16 MiB */
#define FZ_VOL_MAX_BYTES (16u << 20)

struct fz_volume {
	const uint8_t *data; /* size bytes, pristine: copy before changing */
	size_t size;
	struct o2_mkfs_info info;
	uint64_t journal_inode;	      /* journal:0000 */
	uint64_t journal_blkno;	      /* first block of its log */
	uint64_t journal_blocks;      /* blocks in the log (contiguous) */
};

/* The volume of a configuration, made on first use (deterministic: fixed UUID, clock). */
const struct fz_volume *fz_volume(enum fz_config cfg);

/* A deterministic clock for o2_open_opts.now_ns: arg is a uint64_t counter. */
uint64_t fz_clock(void *arg);

/* ---- reusable memory devices ----
 *
 * Allocating and zeroing a fresh 16 MiB memory device for every input
 * costs more than most inputs do; these devices live as long as the process
 * and remember which 64 KiB regions were written, so that fz_dev_reset only
 * restores those.  A device of size bytes starts as base[0..size) (zeros
 * when base is NULL) and goes back to it at each reset.  Reads and writes
 * outside the device or not aligned to sectors fail as o2_blockdev's do.
 */
struct fz_dev;

struct fz_dev *fz_dev_new(const uint8_t *base, size_t size);
struct o2_blockdev *fz_dev_blockdev(struct fz_dev *d);
/* The device's bytes; whoever changes them directly marks the range. */
uint8_t *fz_dev_mem(struct fz_dev *d);
void fz_dev_mark(struct fz_dev *d, size_t off, size_t len);
/* Back to base; a new base (same size) may be given, or NULL to keep it. */
void fz_dev_reset(struct fz_dev *d, const uint8_t *base);
/* Make dst (zero base) hold what src (zero base, same size) holds. */
void fz_dev_copy(struct fz_dev *dst, const struct fz_dev *src);

/* ---- reading input bytes ---- */

struct fz_reader {
	const uint8_t *p;
	size_t left;
};

uint8_t fz_u8(struct fz_reader *r);	/* 0 once the input is exhausted */
uint16_t fz_u16(struct fz_reader *r);
uint32_t fz_u32(struct fz_reader *r);

/* ---- sparse images (fuzz_open_walk inputs) ----
 *
 * Byte 0 is a set of FZ_IMG_* flags; then records, each
 *   u32 le first sector (taken modulo the device's sectors), u16 le count,
 *   count * 512 bytes of data
 * applied in order to a zeroed device of FZ_IMG_DEV_BYTES (16 MiB).  The last record
 * may be cut short.  This keeps seeds small: only the sectors that hold
 * something are stored.
 */
#define FZ_IMG_DEV_BYTES (16u << 20)
#define FZ_IMG_FIX_CHECKS 0x01 /* recompute metaecc checks of recognised blocks */
#define FZ_IMG_RDWR 0x02       /* also open read-write (replay, orphans...) on a copy */

/* Decode onto a device of FZ_IMG_DEV_BYTES (zeroed). Returns the flags byte. */
uint8_t fz_image_decode(const uint8_t *data, size_t size, struct fz_dev *d);

/*
 * Encode mem[0..len) (a multiple of 512) with flags: runs of non-zero
 * sectors, gaps of up to two zero sectors merged.  Returns a malloc'd
 * buffer and its length in *ret_len.
 */
uint8_t *fz_image_encode(const uint8_t *mem, size_t len, uint8_t flags, size_t *ret_len);

/*
 * Recompute the metaecc block check of every block of bs bytes that starts
 * with a signature fscore checks (inode, extent block, group, dx root and
 * leaf, xattr, refcount) or ends with a directory trailer (only in the
 * regions changed since the last reset: a zero base has no blocks).
 */
void fz_fix_checks(struct fz_dev *d, unsigned bs);

/* ---- exercising an open volume ---- */

/*
 * Call every read-only entry point on the volume: the walk, every
 * directory from / and // (bounded), every inode they name (extents, maps,
 * reads, readlink, lookups), system files, chain walks, the slot map,
 * journal infos, statfs, path lookups.  Results are checked only for the
 * API's promises (a result inside the device, a message with -EUCLEAN ...):
 * damage is allowed to make any call fail.  Returns o2_fs_walk's result.
 */
int fz_exercise(struct o2_fs *fs);

/* Write a file (used by make_seeds and the driver). 0 or -errno. */
int fz_write_file(const char *path, const void *data, size_t len);

/* A failed open must give an error it may give, with a message (naming a block for -EUCLEAN). */
void fz_check_open_failure(int r, const char *err, const char *what);

#endif
