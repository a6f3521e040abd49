/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_replay: journal recovery on hostile logs.  Input byte 0 picks one of
 * the small volumes fscore's mkfs makes (fz_volume, made once per process);
 * the rest of the input replaces the start of the slot-0 journal (its JBD2
 * superblock first, then the log; the remainder of the journal is zero) and
 * the journal inode is marked dirty, as a crash leaves it.  A read-write
 * open then replays the log; whatever it accepts is exercised, closed, and
 * opened and exercised again read-only.
 *
 * The log may write anything anywhere, so any error is allowed; only
 * crashes, sanitizer reports and broken API promises are findings.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blockcheck.h"
#include "format.h"
#include "fuzz_common.h"

static void debug_open(int r, const char *err, const char *what)
{
	fz_debug("%s: %d %s", what, r, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	static struct fz_dev *devs[FZ_CFG_COUNT];
	const enum fz_config cfg = (enum fz_config)(data[0] % FZ_CFG_COUNT);
	const struct fz_volume *v = fz_volume(cfg);
	const unsigned bs = v->info.block_size;
	struct o2_blockdev *dev;
	struct o2_fs *fs = NULL;
	struct o2_open_opts o = { .flags = O2_OPEN_RDWR, .slot = 0 };
	uint64_t t = 0;
	char err[512];
	int r;

	data++;
	size--;
	if (!devs[cfg])
		devs[cfg] = fz_dev_new(v->data, v->size);
	fz_dev_reset(devs[cfg], NULL);
	dev = fz_dev_blockdev(devs[cfg]);
	uint8_t *mem = fz_dev_mem(devs[cfg]);

	/* the log: input first, zeros after */
	size_t jbytes = (size_t)v->journal_blocks * bs;
	uint8_t *log = mem + v->journal_blkno * bs;
	size_t n = size < jbytes ? size : jbytes;
	memcpy(log, data, n);
	memset(log + n, 0, jbytes - n);
	fz_dev_mark(devs[cfg], (size_t)v->journal_blkno * bs, jbytes);

	/* left dirty by a crash */
	struct o2_dinode *ji = (struct o2_dinode *)(mem + v->journal_inode * bs);
	ji->id1.journal1.ij_flags = cpu_le32(le32(ji->id1.journal1.ij_flags) | O2_JOURNAL_DIRTY);
	if (v->info.features.incompat & O2_FEATURE_INCOMPAT_META_ECC)
		o2_blockcheck_compute(ji, bs, &ji->i_check);
	fz_dev_mark(devs[cfg], (size_t)v->journal_inode * bs, bs);

	o.now_ns = fz_clock;
	o.clock_arg = &t;
	err[0] = '\0';
	r = o2_fs_open_opts(dev, &o, &fs, err, sizeof(err));
	if (r < 0) {
		debug_open(r, err, "replay open");
		fz_check_open_failure(r, err, "read-write o2_fs_open_opts (replay)");
		return 0;
	}
	fz_exercise(fs);
	o2_fs_close(fs);

	err[0] = '\0';
	r = o2_fs_open(dev, O2_OPEN_RDONLY, &fs, err, sizeof(err));
	if (r < 0) {
		fz_check_open_failure(r, err, "o2_fs_open after replay");
	} else {
		fz_exercise(fs);
		o2_fs_close(fs);
	}
	return 0;
}
