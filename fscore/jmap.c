/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Loading a slot's journal geometry. */
#include <stdlib.h>

#include "error.h"
#include "jmap.h"
#include "meta.h"

#define JBD2_KNOWN_INCOMPAT (JBD2_INCOMPAT_REVOKE | JBD2_INCOMPAT_64BIT)

struct collect {
	struct o2_jmap *m;
	unsigned cap;
	uint32_t bpc;
	int err;
};

static int collect_ext(const struct o2_extent *ext, uint64_t eb_blkno, void *arg)
{
	struct collect *c = arg;
	struct o2_jmap *m = c->m;

	if (!ext)
		return 0;
	if (m->next == c->cap) {
		unsigned ncap = c->cap ? c->cap * 2 : 8;
		struct o2_jmap_ext *ne = o2_realloc(m->ext, ncap * sizeof(*ne));

		if (!ne) {
			c->err = -ENOMEM;
			return 1;
		}
		m->ext = ne;
		c->cap = ncap;
	}
	m->ext[m->next++] = (struct o2_jmap_ext){ ext->cpos * c->bpc, ext->clusters * c->bpc,
						  ext->blkno };
	return 0;
}

int o2_jmap_phys(const struct o2_jmap *m, uint32_t lblk, uint64_t *ret_phys)
{
	unsigned lo = 0, hi = m->next;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		const struct o2_jmap_ext *e = &m->ext[mid];

		if (lblk < e->lstart)
			hi = mid;
		else if (lblk - e->lstart >= e->count)
			lo = mid + 1;
		else {
			*ret_phys = e->phys + (lblk - e->lstart);
			return 0;
		}
	}
	return -ENOENT;
}

int o2_journal_inode_get(struct o2_fs *fs, unsigned slot, struct o2_inode **ret)
{
	struct o2_inode *ji;
	uint64_t blkno;
	int r = o2_sysfile_lookup(fs, O2_SYS_JOURNAL, slot, &blkno);

	if (r < 0)
		return r;
	r = o2_inode_get(fs, blkno, &ji);
	if (r < 0)
		return r;
	if (!(ji->info.flags & O2_FL_JOURNAL) || ji->info.kind != O2_ID2_EXTENTS) {
		o2_inode_unref(ji);
		return o2_corrupt(fs, blkno, "journal inode lacks the Journal flag or an extent list");
	}
	*ret = ji;
	return 0;
}

void o2_jmap_free(struct o2_jmap *m)
{
	free(m->ext);
	m->ext = NULL;
	m->next = 0;
}

int o2_jmap_load(struct o2_fs *fs, unsigned slot, struct o2_jmap *ret)
{
	struct o2_jmap m = { 0 };
	struct collect c = { .m = &m, .bpc = 1u << fs->bpc_bits };
	struct o2_inode *ji = NULL;
	uint8_t *buf = NULL;
	uint64_t blkno;
	int r;

	r = o2_journal_inode_get(fs, slot, &ji);
	if (r < 0)
		return r;
	blkno = ji->info.blkno;
	m.inode_blkno = blkno;
	m.ij_flags = ji->info.journal_flags;
	m.recovery_generation = ji->info.journal_recovery_generation;
	r = o2_inode_walk_extents(fs, ji, collect_ext, &c);
	if (r > 0)
		r = c.err;
	if (r < 0)
		goto out;
	for (unsigned i = 1; i < m.next; i++)
		if (m.ext[i].lstart < m.ext[i - 1].lstart + m.ext[i - 1].count) {
			r = o2_corrupt(fs, blkno, "journal extents overlap");
			goto out;
		}
	if (o2_jmap_phys(&m, 0, &m.sb_phys) < 0) {
		r = o2_corrupt(fs, blkno, "journal has no block 0");
		goto out;
	}
	buf = o2_malloc(fs->bs);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	r = o2_blockdev_read(fs->dev, buf, fs->bs, m.sb_phys << fs->bits);
	if (r < 0) {
		r = o2_fail(fs, r, "reading the journal superblock of slot %u: %s", slot,
			    strerror(-r));
		goto out;
	}
	const struct jbd2_superblock *sb = (const struct jbd2_superblock *)buf;
	uint32_t type = be32(sb->s_header.h_blocktype), incompat = 0;

	if (be32(sb->s_header.h_magic) != JBD2_MAGIC ||
	    (type != JBD2_SUPERBLOCK_V1 && type != JBD2_SUPERBLOCK_V2)) {
		r = o2_corrupt(fs, m.sb_phys, "slot %u: not a JBD2 journal superblock", slot);
		goto out;
	}
	if (type == JBD2_SUPERBLOCK_V2) {
		incompat = be32(sb->s_feature_incompat);
		memcpy(m.uuid, sb->s_uuid, 16);
	}
	if (incompat & ~JBD2_KNOWN_INCOMPAT) {
		r = o2_fail(fs, -EOPNOTSUPP, "slot %u: the journal uses JBD2 features 0x%x that "
			    "ocfs2d does not implement", slot, incompat & ~JBD2_KNOWN_INCOMPAT);
		goto out;
	}
	m.tags64 = incompat & JBD2_INCOMPAT_64BIT;
	m.revoke_feature = incompat & JBD2_INCOMPAT_REVOKE;
	m.maxlen = be32(sb->s_maxlen);
	m.first = be32(sb->s_first);
	m.start = be32(sb->s_start);
	m.tail_seq = be32(sb->s_sequence);
	if (be32(sb->s_blocksize) != fs->bs || m.first == 0 || m.maxlen < m.first + 8 ||
	    m.start >= m.maxlen ||
	    (uint64_t)m.maxlen > (ji->info.size >> fs->bits)) {
		r = o2_corrupt(fs, m.sb_phys, "slot %u: journal geometry is wrong (block size %u, "
			       "%u blocks from %u, start %u; the inode holds %llu blocks)",
			       slot, be32(sb->s_blocksize), m.maxlen, m.first, m.start,
			       (unsigned long long)(ji->info.size >> fs->bits));
		goto out;
	}
	for (uint32_t b = 0; b < m.maxlen;) {
		uint64_t phys;

		if (o2_jmap_phys(&m, b, &phys) < 0) {
			r = o2_corrupt(fs, blkno, "journal block %u is not mapped", b);
			goto out;
		}
		/* skip to the end of this extent */
		for (unsigned i = 0; i < m.next; i++)
			if (b >= m.ext[i].lstart && b - m.ext[i].lstart < m.ext[i].count) {
				b = m.ext[i].lstart + m.ext[i].count;
				break;
			}
	}
	*ret = m;
	m.ext = NULL;
	r = 0;
out:
	free(buf);
	o2_jmap_free(&m);
	o2_inode_unref(ji);
	return r;
}

int o2_journal_set_dirty(struct o2_fs *fs, uint64_t inode_blkno, bool dirty, bool bump_gen)
{
	struct o2_buf *b;
	int r = o2_bread(fs, inode_blkno, O2_META_INODE, &b);

	if (r < 0)
		return r;
	struct o2_dinode *di = (struct o2_dinode *)b->data;
	uint32_t flags = le32(di->id1.journal1.ij_flags);

	flags = dirty ? flags | O2_JOURNAL_DIRTY : flags & ~(uint32_t)O2_JOURNAL_DIRTY;
	di->id1.journal1.ij_flags = cpu_le32(flags);
	if (bump_gen)
		di->id1.journal1.ij_recovery_generation =
			cpu_le32(le32(di->id1.journal1.ij_recovery_generation) + 1);
	r = o2_write_meta_direct(fs, b);
	if (r == 0) {
		r = o2_blockdev_flush(fs->dev);
		if (r < 0)
			r = o2_fs_abort(fs, r, "flushing the journal inode");
	}
	o2_brelse(fs, b);
	return r;
}
