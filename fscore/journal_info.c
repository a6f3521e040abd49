/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The JBD2 superblock of a slot's journal, read and validated. */
#include <stdlib.h>

#include "error.h"
#include "internal.h"
#include "jmap.h"
#include "meta.h"

int o2_journal_info(struct o2_fs *fs, unsigned slot, struct o2_journal_info *ret)
{
	struct o2_inode *ji;
	struct o2_extent ext;
	uint64_t blkno;
	struct o2_journal_info j;
	uint8_t *buf = NULL;
	int r;

	r = o2_journal_inode_get(fs, slot, &ji);
	if (r < 0)
		return r;
	blkno = ji->info.blkno;
	r = o2_inode_map(fs, ji, 0, &ext);
	if (r < 0)
		goto out;
	if (ext.blkno == 0) {
		r = o2_corrupt(fs, blkno, "journal has no block 0");
		goto out;
	}
	buf = o2_malloc(fs->bs);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	r = o2_read_blocks(fs, ext.blkno, 1, buf);
	if (r < 0)
		goto out;
	const struct jbd2_superblock *js = (const struct jbd2_superblock *)buf;
	uint32_t type = be32(js->s_header.h_blocktype);

	if (be32(js->s_header.h_magic) != JBD2_MAGIC) {
		r = o2_corrupt(fs, ext.blkno, "journal superblock of slot %u has bad magic 0x%08x",
			       slot, be32(js->s_header.h_magic));
		goto out;
	}
	if (type != JBD2_SUPERBLOCK_V1 && type != JBD2_SUPERBLOCK_V2) {
		r = o2_corrupt(fs, ext.blkno, "journal superblock has block type %u", type);
		goto out;
	}
	j = (struct o2_journal_info){
		.block_size = be32(js->s_blocksize),
		.maxlen = be32(js->s_maxlen),
		.first = be32(js->s_first),
		.sequence = be32(js->s_sequence),
		.start = be32(js->s_start),
		.errno_ = be32(js->s_errno),
		.nr_users = be32(js->s_nr_users),
		.ij_flags = ji->info.journal_flags,
		.recovery_generation = ji->info.journal_recovery_generation,
		.inode_blkno = blkno,
	};
	if (type == JBD2_SUPERBLOCK_V2) {
		j.feature_compat = be32(js->s_feature_compat);
		j.feature_incompat = be32(js->s_feature_incompat);
		j.feature_ro_compat = be32(js->s_feature_ro_compat);
		memcpy(j.uuid, js->s_uuid, 16);
	}
	if (j.block_size != fs->bs || j.maxlen == 0 ||
	    j.maxlen > (ji->info.size >> fs->bits) || j.first == 0 ||
	    j.first >= j.maxlen || j.start >= j.maxlen) {
		r = o2_corrupt(fs, ext.blkno, "journal superblock geometry is wrong (block size %u, "
			       "%u blocks, first %u, start %u; inode holds %llu blocks)",
			       j.block_size, j.maxlen, j.first, j.start,
			       (unsigned long long)(ji->info.size >> fs->bits));
		goto out;
	}
	*ret = j;
	r = 0;
out:
	free(buf);
	o2_inode_unref(ji);
	return r;
}

int o2_journal_state(struct o2_fs *fs, unsigned slot, bool *ret_dirty, bool *ret_pending)
{
	struct o2_journal_info ji;
	int r = o2_journal_info(fs, slot, &ji);

	if (r < 0)
		return r;
	*ret_dirty = ji.ij_flags & O2_JOURNAL_DIRTY;
	/* JBD2: a log whose start is 0 has nothing to replay */
	*ret_pending = *ret_dirty && ji.start != 0;
	return 0;
}
