/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Metadata block reads, the checks every self-describing block shares,
 * and direct writes home.  The reads and checks used to live with the
 * open/close code (and the write with the journal), which made every
 * module call up into the code that orchestrates it.
 */
#include <errno.h>
#include <string.h>

#include "blockcheck.h"
#include "error.h"
#include "internal.h"
#include "meta.h"

static int read_blocks(struct o2_fs *fs, uint64_t blkno, unsigned count, void *buf, bool data)
{
	size_t len = (size_t)count << fs->bits;
	int r;

	/* a range past the end is a bad pointer on disk, not an I/O error */
	if (blkno >= fs->nblocks || count > fs->nblocks - blkno)
		return o2_corrupt(fs, blkno, "lies beyond the end of the device (%llu blocks)",
				  (unsigned long long)fs->nblocks);
	r = data && fs->io_owner ? o2_blockdev_read_data(fs->dev, buf, len, blkno << fs->bits,
							 fs->io_owner)
		 : o2_blockdev_read(fs->dev, buf, len, blkno << fs->bits);
	if (r < 0)
		return o2_fail(fs, r, "block %llu: read failed: %s", (unsigned long long)blkno,
			       strerror(-r));
	return 0;
}

int o2_read_blocks(struct o2_fs *fs, uint64_t blkno, unsigned count, void *buf)
{
	return read_blocks(fs, blkno, count, buf, false);
}

int o2_read_data_blocks(struct o2_fs *fs, uint64_t blkno, unsigned count, void *buf)
{
	return read_blocks(fs, blkno, count, buf, true);
}

int o2_read_meta(struct o2_fs *fs, uint64_t blkno, enum o2_meta_kind kind, void *buf)
{
	struct o2_buf *b;
	int r = o2_bread(fs, blkno, (uint8_t)kind, &b);

	if (r < 0)
		return r;
	memcpy(buf, b->data, fs->bs);
	o2_brelse(fs, b);
	return 0;
}

int o2_check_meta_head(struct o2_fs *fs, uint64_t blkno, const char *what, const uint8_t *sig_field,
		       const char *sig, uint64_t rec_blkno, uint32_t rec_generation)
{
	if (!o2_sig_ok(sig_field, sig))
		return o2_corrupt(fs, blkno, "bad %s signature", what);
	if (rec_blkno != blkno)
		return o2_corrupt(fs, blkno, "%s records its block number as %llu", what,
				  (unsigned long long)rec_blkno);
	if (rec_generation != fs->info.fs_generation)
		return o2_corrupt(fs, blkno, "%s fs generation 0x%x is not the volume's 0x%x", what,
				  rec_generation, fs->info.fs_generation);
	return 0;
}

int o2_write_meta_direct(struct o2_fs *fs, struct o2_buf *b)
{
	int r;

	if (fs->ro_reason)
		return -EROFS;
	o2_meta_seal(fs, b);
	r = o2_blockdev_write(fs->dev, b->data, fs->bs, b->blkno << fs->bits);
	if (r < 0)
		return o2_fs_abort(fs, r, "writing a metadata block");
	return 0;
}
