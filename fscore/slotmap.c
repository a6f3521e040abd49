/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The slot map: which node holds which slot.  Legacy format: one le16 node
 * number per slot, 0xFFFF for empty.  Extended format: {u8 valid, pad[3],
 * le32 node} per slot.
 *
 * The slot map is file data, not journaled metadata: a node changes its
 * entry in place, under the cluster's super lock, and flushes it before it
 * goes on (the kernel does the same).  A node claims its slot before it
 * marks its journal in use and gives it back after the journal is clean, so
 * a crash in between leaves at worst a claimed slot with a clean journal,
 * which the next mounter may take as free.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "internal.h"
#include "meta.h"

/*
 * The slot map's inode, checked to hold at least need bytes of data (in
 * extents, for in_place: written where it lies).
 */
static int slotmap_inode(struct o2_fs *fs, size_t need, bool in_place, struct o2_inode **ret)
{
	struct o2_inode *ino;
	uint64_t blkno;
	int r = o2_sysfile_lookup(fs, O2_SYS_SLOT_MAP, 0, &blkno);

	if (r < 0)
		return r;
	r = o2_inode_get(fs, blkno, &ino);
	if (r < 0)
		return r;
	if ((in_place && ino->info.kind != O2_ID2_EXTENTS) || ino->info.size < need) {
		r = o2_corrupt(fs, blkno, "slot map of %llu bytes cannot hold %u slots",
			       (unsigned long long)ino->info.size, fs->info.max_slots);
		o2_inode_unref(ino);
		return r;
	}
	*ret = ino;
	return 0;
}

int o2_slotmap_read(struct o2_fs *fs, struct o2_slotmap_info *ret)
{
	bool extended = o2_has_incompat(fs, O2_FEATURE_INCOMPAT_EXTENDED_SLOT_MAP);
	unsigned n = fs->info.max_slots;
	size_t need = (size_t)n * (extended ? sizeof(struct o2_extended_slot) : 2);
	struct o2_inode *ino;
	uint8_t *data = NULL;
	uint64_t blkno;
	ssize_t got;
	int r;

	r = slotmap_inode(fs, need, false, &ino);
	if (r < 0)
		return r;
	blkno = ino->info.blkno;
	data = o2_malloc(need);
	if (!data) {
		r = -ENOMEM;
		goto out;
	}
	got = o2_inode_read(fs, ino, 0, data, need);
	if (got < 0) {
		r = (int)got;
		goto out;
	}
	if ((size_t)got != need) {
		r = o2_corrupt(fs, blkno, "slot map is short");
		goto out;
	}
	ret->extended = extended;
	ret->nslots = n;
	for (unsigned i = 0; i < n; i++) {
		if (extended) {
			const struct o2_extended_slot *es = (const struct o2_extended_slot *)data + i;

			ret->slots[i].valid = es->es_valid != 0;
			ret->slots[i].node = le32(es->es_node_num);
		} else {
			uint16_t node = le16(((const o2le16 *)data)[i]);

			ret->slots[i].valid = node != 0xFFFF;
			ret->slots[i].node = node;
		}
	}
	r = 0;
out:
	free(data);
	o2_inode_unref(ino);
	return r;
}

int o2_slotmap_set(struct o2_fs *fs, unsigned slot, bool valid, uint32_t node)
{
	bool extended = o2_has_incompat(fs, O2_FEATURE_INCOMPAT_EXTENDED_SLOT_MAP);
	size_t esize = extended ? sizeof(struct o2_extended_slot) : 2;
	uint64_t off = (uint64_t)slot * esize;
	struct o2_inode *ino;
	struct o2_extent ext;
	uint8_t *blk = NULL;
	uint64_t blkno, phys;
	int r;

	if (slot >= fs->info.max_slots)
		return o2_fail(fs, -EINVAL, "slot %u does not exist (the volume has %u)", slot,
			       fs->info.max_slots);
	if (!extended && valid && node >= 0xFFFF)
		return o2_fail(fs, -EINVAL, "node %u does not fit the legacy slot map", node);
	if (fs->dev->read_only)
		return -EROFS;
	r = slotmap_inode(fs, off + esize, true, &ino);
	if (r < 0)
		return r;
	blkno = ino->info.blkno;
	r = o2_inode_map(fs, ino, (uint32_t)(off >> fs->cbits), &ext);
	if (r < 0)
		goto out;
	if (ext.blkno == 0 || (ext.flags & O2_EXTENT_UNWRITTEN)) {
		r = o2_corrupt(fs, blkno, "slot map has no block for slot %u", slot);
		goto out;
	}
	/* the block of the cluster that holds the entry (entries never straddle blocks) */
	phys = ext.blkno + (((off & (fs->cs - 1))) >> fs->bits);
	blk = o2_malloc(fs->bs);
	if (!blk) {
		r = -ENOMEM;
		goto out;
	}
	r = o2_read_blocks(fs, phys, 1, blk);
	if (r < 0)
		goto out;
	uint8_t *e = blk + (off & (fs->bs - 1));

	if (extended) {
		struct o2_extended_slot es = { 0 };

		es.es_valid = valid ? 1 : 0;
		es.es_node_num = cpu_le32(valid ? node : 0);
		memcpy(e, &es, sizeof(es));
	} else {
		o2le16 v = cpu_le16(valid ? (uint16_t)node : 0xFFFF);

		memcpy(e, &v, sizeof(v));
	}
	r = o2_blockdev_write(fs->dev, blk, fs->bs, phys << fs->bits);
	if (r == 0)
		r = o2_blockdev_flush(fs->dev);
	if (r < 0)
		r = o2_fail(fs, r, "writing slot %u of the slot map (block %llu): %s", slot,
			    (unsigned long long)phys, strerror(-r));
out:
	free(blk);
	o2_inode_unref(ino);
	return r;
}
