/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The slot map: which node holds which slot.  Legacy format: one le16 node
 * number per slot, 0xFFFF for empty.  Extended format: {u8 valid, pad[3],
 * le32 node} per slot.
 */
#include <stdlib.h>

#include "error.h"
#include "internal.h"

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

	r = o2_sysfile_lookup(fs, O2_SYS_SLOT_MAP, 0, &blkno);
	if (r < 0)
		return r;
	r = o2_inode_get(fs, blkno, &ino);
	if (r < 0)
		return r;
	if (ino->info.size < need) {
		r = o2_corrupt(fs, blkno, "slot map of %llu bytes cannot hold %u slots",
			       (unsigned long long)ino->info.size, n);
		goto out;
	}
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
