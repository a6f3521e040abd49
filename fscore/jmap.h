/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A slot's journal: its geometry and the map from log blocks to disk blocks. */
#ifndef O2_JMAP_H
#define O2_JMAP_H

#include "internal.h"

struct o2_jmap_ext {
	uint32_t lstart, count;
	uint64_t phys;
};

struct o2_jmap {
	uint64_t inode_blkno;
	uint32_t ij_flags, recovery_generation;
	uint32_t maxlen, first;
	uint32_t start, tail_seq; /* s_start, s_sequence */
	bool tags64, revoke_feature;
	uint8_t uuid[16];
	uint64_t sb_phys;
	struct o2_jmap_ext *ext;
	unsigned next;
};

/*
 * Load slot's journal: the inode, its extents (which must map every block
 * of the log) and the JBD2 superblock.  -EUCLEAN on damage, -EOPNOTSUPP for
 * JBD2 features fscore does not implement.
 */
/*
 * The one lookup of a slot's journal inode (the map and o2_journal_info
 * both use it): -EUCLEAN naming the inode if it lacks the journal flag or
 * an extent list.  The caller unrefs *ret.
 */
int o2_journal_inode_get(struct o2_fs *fs, unsigned slot, struct o2_inode **ret);
int o2_jmap_load(struct o2_fs *fs, unsigned slot, struct o2_jmap *ret);
int o2_jmap_phys(const struct o2_jmap *m, uint32_t lblk, uint64_t *ret_phys);
void o2_jmap_free(struct o2_jmap *m);

/* Set or clear OCFS2_JOURNAL_DIRTY_FL on a journal inode durably, optionally bumping the recovery generation. */
int o2_journal_set_dirty(struct o2_fs *fs, uint64_t inode_blkno, bool dirty, bool bump_gen);

#endif
