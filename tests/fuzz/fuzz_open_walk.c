/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_open_walk: the input is a volume image in the sparse format of
 * fuzz_common.h (a flags byte, then runs of sectors) on an 8 MiB memory
 * device.  The image is opened read-only and every read-only call runs on
 * it (fz_exercise: the walk, every directory and file, system files, chain
 * walks, slot map, journal infos).  With FZ_IMG_FIX_CHECKS the metaecc
 * checks of recognised blocks are recomputed first, so that damage reaches
 * the structural checks behind them; with FZ_IMG_RDWR a copy is also opened
 * read-write (journal replay, truncate log, local alloc, orphans), walked
 * and closed.
 *
 * Any result is allowed except a crash, a sanitizer report, or a broken
 * API promise (see fz_exercise).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

static void debug_open(int r, const char *err, const char *what)
{
	fz_debug("%s: %d %s", what, r, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz_dev *dev, *copy;
	struct o2_fs *fs = NULL;
	char err[512];
	uint8_t flags;
	int r;

	if (!dev) {
		dev = fz_dev_new(NULL, FZ_IMG_DEV_BYTES);
		copy = fz_dev_new(NULL, FZ_IMG_DEV_BYTES);
	}
	fz_dev_reset(dev, NULL);
	flags = fz_image_decode(data, size, dev);
	uint8_t *mem = fz_dev_mem(dev);

	if (flags & FZ_IMG_FIX_CHECKS) {
		/* the block size the superblock claims, if any; else 512 */
		unsigned bs = 512;
		for (unsigned b = 512; b <= 4096; b <<= 1)
			if (memcmp(mem + 2 * b, "OCFSV2", 6) == 0) {
				bs = b;
				break;
			}
		fz_fix_checks(dev, bs);
	}

	if (flags & FZ_IMG_RDWR) {
		struct o2_open_opts o = { .flags = O2_OPEN_RDWR, .slot = 0 };
		uint64_t t = 0;

		o.now_ns = fz_clock;
		o.clock_arg = &t;
		fz_dev_reset(copy, NULL);
		fz_dev_copy(copy, dev);
		err[0] = '\0';
		r = o2_fs_open_opts(fz_dev_blockdev(copy), &o, &fs, err, sizeof(err));
		if (r < 0) {
			debug_open(r, err, "read-write open");
			fz_check_open_failure(r, err, "read-write o2_fs_open_opts");
		} else {
			fz_exercise(fs);
			o2_fs_close(fs);
			fs = NULL;
		}
	}

	err[0] = '\0';
	r = o2_fs_open(fz_dev_blockdev(dev), O2_OPEN_RDONLY, &fs, err, sizeof(err));
	if (r < 0) {
		debug_open(r, err, "open");
		fz_check_open_failure(r, err, "o2_fs_open");
	} else {
		fz_exercise(fs);
		o2_fs_close(fs);
	}
	return 0;
}
