/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Chain allocators, read side.  An allocator inode holds chain records;
 * each heads a singly linked list of group descriptors, each with a bitmap
 * of bg_bits bits.  The global bitmap's groups cover clusters; suballocator
 * groups cover blocks (bit 0 is the descriptor itself).
 *
 * A damaged chain may loop; the walk bounds the number of groups by what the
 * volume could hold.
 */
#include <stdlib.h>

#include "error.h"
#include "internal.h"
#include "meta.h"

static unsigned count_set(const uint8_t *bm, unsigned bits)
{
	unsigned n = 0, full = bits / 8;

	for (unsigned i = 0; i < full; i++)
		n += (unsigned)__builtin_popcount(bm[i]);
	if (bits % 8)
		n += (unsigned)__builtin_popcount(bm[full] & ((1u << (bits % 8)) - 1));
	return n;
}

static uint16_t longest_free_run(const uint8_t *bm, unsigned bits)
{
	unsigned best = 0, run = 0;

	for (unsigned i = 0; i < bits; i++) {
		if (bm[i / 8] & (1u << (i % 8))) {
			run = 0;
			continue;
		}
		if (++run > best)
			best = run;
	}
	return (uint16_t)best;
}

static int check_group(struct o2_fs *fs, struct o2_inode *alloc, unsigned chain, uint64_t blk,
		       const uint8_t *buf, struct o2_group_info *g)
{
	const struct o2_group_desc *gd = (const struct o2_group_desc *)buf;
	unsigned room = fs->bs - offsetof(struct o2_group_desc, bg_bitmap);

	if (!o2_sig_ok(gd->bg_signature, O2_SIG_GROUP))
		return o2_corrupt(fs, blk, "bad group descriptor signature");
	if (le64(gd->bg_blkno) != blk)
		return o2_corrupt(fs, blk, "group descriptor records its block number as %llu",
				  (unsigned long long)le64(gd->bg_blkno));
	if (le64(gd->bg_parent_dinode) != alloc->info.blkno)
		return o2_corrupt(fs, blk, "group descriptor names parent %llu, not %llu",
				  (unsigned long long)le64(gd->bg_parent_dinode),
				  (unsigned long long)alloc->info.blkno);
	if (le32(gd->bg_generation) != fs->info.fs_generation)
		return o2_corrupt(fs, blk, "group descriptor generation 0x%x is not the volume's",
				  le32(gd->bg_generation));
	if (le16(gd->bg_chain) != chain)
		return o2_corrupt(fs, blk, "group descriptor on chain %u says chain %u", chain,
				  le16(gd->bg_chain));
	g->blkno = blk;
	g->chain = (uint16_t)chain;
	g->bits = le16(gd->bg_bits);
	g->free_bits = le16(gd->bg_free_bits_count);
	g->size = le16(gd->bg_size);
	g->generation = le32(gd->bg_generation);
	g->next_group = le64(gd->bg_next_group);
	g->parent = le64(gd->bg_parent_dinode);
	g->check_crc32 = le32(gd->bg_check.crc32e);
	g->check_ecc = le16(gd->bg_check.ecc);
	if (g->size > room || (uint32_t)g->bits > (uint32_t)g->size * 8)
		return o2_corrupt(fs, blk, "group descriptor claims %u bits in a %u-byte bitmap "
				  "(room for %u bytes)", g->bits, g->size, room);
	if (g->bits == 0 || g->free_bits > g->bits)
		return o2_corrupt(fs, blk, "group descriptor has %u free of %u bits", g->free_bits,
				  g->bits);
	if (g->bits % alloc->info.chain_bpc)
		return o2_corrupt(fs, blk, "group of %u bits is not whole clusters of %u bits",
				  g->bits, alloc->info.chain_bpc);
	unsigned used = count_set(gd->bg_bitmap, g->bits);

	if (used != (unsigned)g->bits - g->free_bits)
		return o2_corrupt(fs, blk, "group bitmap has %u bits set, the descriptor says %u",
				  used, g->bits - g->free_bits);
	g->contig_free = longest_free_run(gd->bg_bitmap, g->bits);
	g->discontig = g->size == O2_MAX_BG_BITMAP_SIZE &&
		       offsetof(struct o2_group_desc, bg_bitmap) + g->size ==
			       offsetof(struct o2_group_desc, bg_list) &&
		       le16(gd->bg_list.next_free_rec) != 0;
	if (g->discontig) {
		int r = o2_check_extent_list(fs, blk, &gd->bg_list, o2_extent_recs_per_gd(fs->bs),
					     "discontiguous group");
		if (r < 0)
			return r;
	}
	return 0;
}

int o2_chain_walk(struct o2_fs *fs, struct o2_inode *alloc, o2_group_fn fn, void *arg)
{
	const struct o2_inode_info *in = &alloc->info;
	uint64_t max_groups, seen = 0, sum_total = 0, sum_free = 0;
	uint8_t *buf;
	int r = 0;

	if (in->kind != O2_ID2_CHAIN)
		return o2_fail(fs, -EINVAL, "inode %llu is not a chain allocator",
			       (unsigned long long)in->blkno);
	/* each group covers at least one cluster of the device */
	max_groups = (fs->nblocks >> fs->bpc_bits) + 1;
	buf = o2_malloc(fs->bs);
	if (!buf)
		return -ENOMEM;
	for (unsigned c = 0; c < in->chain_next_free && r == 0; c++) {
		struct o2_chain_rec_info rec;
		uint64_t chain_total = 0, chain_free = 0;

		o2_inode_chain_rec(alloc, c, &rec);
		for (uint64_t blk = rec.blkno; blk; ) {
			struct o2_group_info g;

			if (++seen > max_groups) {
				r = o2_corrupt(fs, in->blkno, "chain %u loops (more groups than the "
					       "volume can hold)", c);
				break;
			}
			if (blk <= O2_SUPER_BLKNO || blk >= fs->nblocks) {
				r = o2_corrupt(fs, in->blkno, "chain %u links to block %llu, outside "
					       "the volume", c, (unsigned long long)blk);
				break;
			}
			r = o2_read_meta(fs, blk, O2_META_GROUP, buf);
			if (r < 0)
				break;
			r = check_group(fs, alloc, c, blk, buf, &g);
			if (r < 0)
				break;
			chain_total += g.bits;
			chain_free += g.free_bits;
			if (fn) {
				r = fn(c, &g, arg);
				if (r)
					break;
			}
			if (g.next_group == blk) {
				r = o2_corrupt(fs, blk, "group descriptor links to itself");
				break;
			}
			blk = g.next_group;
		}
		if (r)
			break;
		if (chain_total != rec.total || chain_free != rec.free) {
			r = o2_corrupt(fs, in->blkno, "chain %u records %u free of %u bits, its groups "
				       "hold %llu free of %llu", c, rec.free, rec.total,
				       (unsigned long long)chain_free, (unsigned long long)chain_total);
			break;
		}
		sum_total += chain_total;
		sum_free += chain_free;
	}
	free(buf);
	if (r)
		return r;
	if (sum_total != in->bitmap_total || sum_total - sum_free != in->bitmap_used)
		return o2_corrupt(fs, in->blkno, "allocator records %u used of %u bits, its chains "
				  "hold %llu used of %llu", in->bitmap_used, in->bitmap_total,
				  (unsigned long long)(sum_total - sum_free),
				  (unsigned long long)sum_total);
	return 0;
}
