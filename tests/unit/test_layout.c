/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Layout test: every on-disk struct of fscore/format.h against the system's
 * <ocfs2-kernel/ocfs2_fs.h> and <ocfs2/jbd2.h> (installed by ocfs2-tools-dev).
 *
 * For every field we compare the byte offset and the field size; for every
 * struct the total size; then the sizes derived from the block size
 * (records per inode, per extent block, ...) against the header's own
 * inline helpers at every block size; and the on-disk constants (feature
 * bits, flags, signatures) that fscore defines itself.
 *
 * This is the only file in the tree that includes the system headers.
 */
#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <linux/types.h>
#include <ocfs2-kernel/sparse_endian_types.h>
/* The header defines static lookup tables we never use. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wsign-compare"
#include <ocfs2-kernel/ocfs2_fs.h>
#include <ocfs2/jbd2.h>
#pragma GCC diagnostic pop

#include "format.h"
#include "o2fs/o2fs.h"

#define MSIZE(type, member) sizeof(((type *)0)->member)

/*
 * Offset and size of one field.  A field that is a flexible or zero-length
 * array has no usable size; FIELD_OFF checks its offset only.
 */
#define FIELD(ours, ofield, theirs, tfield)                                                     \
	do {                                                                                    \
		ck_assert_msg(offsetof(ours, ofield) == offsetof(theirs, tfield),               \
			      "%s: offset of %s is %zu, %s.%s is at %zu", #ours, #ofield,        \
			      (size_t)offsetof(ours, ofield), #theirs, #tfield,                  \
			      (size_t)offsetof(theirs, tfield));                                \
		ck_assert_msg(MSIZE(ours, ofield) == MSIZE(theirs, tfield),                     \
			      "%s: size of %s is %zu, %s.%s has %zu", #ours, #ofield,            \
			      MSIZE(ours, ofield), #theirs, #tfield, MSIZE(theirs, tfield));    \
		nfields++;                                                                      \
	} while (0)

#define FIELD_OFF(ours, ofield, theirs, tfield)                                                 \
	do {                                                                                    \
		ck_assert_msg(offsetof(ours, ofield) == offsetof(theirs, tfield),               \
			      "%s: offset of %s is %zu, %s.%s is at %zu", #ours, #ofield,        \
			      (size_t)offsetof(ours, ofield), #theirs, #tfield,                  \
			      (size_t)offsetof(theirs, tfield));                                \
		nfields++;                                                                      \
	} while (0)

#define SIZE(ours, theirs)                                                                      \
	ck_assert_msg(sizeof(ours) == sizeof(theirs), "sizeof(%s) = %zu, sizeof(%s) = %zu",     \
		      #ours, sizeof(ours), #theirs, sizeof(theirs))

/* The offset must also match what format.h's comment on the field says. */
#define AT(ours, ofield, off)                                                                   \
	ck_assert_msg(offsetof(ours, ofield) == (off), "%s.%s at %zu, expected 0x%x", #ours,    \
		      #ofield, (size_t)offsetof(ours, ofield), (unsigned)(off))

static unsigned nfields;

START_TEST(test_block_check)
{
	FIELD(struct o2_block_check, crc32e, struct ocfs2_block_check, bc_crc32e);
	FIELD(struct o2_block_check, ecc, struct ocfs2_block_check, bc_ecc);
	FIELD(struct o2_block_check, reserved, struct ocfs2_block_check, bc_reserved1);
	SIZE(struct o2_block_check, struct ocfs2_block_check);
}
END_TEST

START_TEST(test_extents)
{
	FIELD(struct o2_extent_rec, cpos, struct ocfs2_extent_rec, e_cpos);
	FIELD(struct o2_extent_rec, int_clusters, struct ocfs2_extent_rec, e_int_clusters);
	FIELD(struct o2_extent_rec, leaf_clusters, struct ocfs2_extent_rec, e_leaf_clusters);
	FIELD(struct o2_extent_rec, reserved1, struct ocfs2_extent_rec, e_reserved1);
	FIELD(struct o2_extent_rec, flags, struct ocfs2_extent_rec, e_flags);
	FIELD(struct o2_extent_rec, blkno, struct ocfs2_extent_rec, e_blkno);
	SIZE(struct o2_extent_rec, struct ocfs2_extent_rec);

	FIELD(struct o2_extent_list, tree_depth, struct ocfs2_extent_list, l_tree_depth);
	FIELD(struct o2_extent_list, count, struct ocfs2_extent_list, l_count);
	FIELD(struct o2_extent_list, next_free_rec, struct ocfs2_extent_list, l_next_free_rec);
	FIELD(struct o2_extent_list, reserved1, struct ocfs2_extent_list, l_reserved1);
	FIELD(struct o2_extent_list, reserved2, struct ocfs2_extent_list, l_reserved2);
	FIELD_OFF(struct o2_extent_list, recs, struct ocfs2_extent_list, l_recs);
	SIZE(struct o2_extent_list, struct ocfs2_extent_list);

	FIELD(struct o2_extent_block, h_signature, struct ocfs2_extent_block, h_signature);
	FIELD(struct o2_extent_block, h_check, struct ocfs2_extent_block, h_check);
	FIELD(struct o2_extent_block, h_suballoc_slot, struct ocfs2_extent_block, h_suballoc_slot);
	FIELD(struct o2_extent_block, h_suballoc_bit, struct ocfs2_extent_block, h_suballoc_bit);
	FIELD(struct o2_extent_block, h_fs_generation, struct ocfs2_extent_block, h_fs_generation);
	FIELD(struct o2_extent_block, h_blkno, struct ocfs2_extent_block, h_blkno);
	FIELD(struct o2_extent_block, h_suballoc_loc, struct ocfs2_extent_block, h_suballoc_loc);
	FIELD(struct o2_extent_block, h_next_leaf_blk, struct ocfs2_extent_block, h_next_leaf_blk);
	FIELD(struct o2_extent_block, h_list, struct ocfs2_extent_block, h_list);
	FIELD_OFF(struct o2_extent_block, h_list.recs, struct ocfs2_extent_block, h_list.l_recs);
	SIZE(struct o2_extent_block, struct ocfs2_extent_block);

	AT(struct o2_extent_block, h_check, 0x08);
	AT(struct o2_extent_block, h_blkno, 0x18);
	AT(struct o2_extent_block, h_next_leaf_blk, 0x28);
	AT(struct o2_extent_block, h_list, 0x30);
}
END_TEST

START_TEST(test_chains_and_logs)
{
	FIELD(struct o2_chain_rec, c_free, struct ocfs2_chain_rec, c_free);
	FIELD(struct o2_chain_rec, c_total, struct ocfs2_chain_rec, c_total);
	FIELD(struct o2_chain_rec, c_blkno, struct ocfs2_chain_rec, c_blkno);
	SIZE(struct o2_chain_rec, struct ocfs2_chain_rec);

	FIELD(struct o2_chain_list, cl_cpg, struct ocfs2_chain_list, cl_cpg);
	FIELD(struct o2_chain_list, cl_bpc, struct ocfs2_chain_list, cl_bpc);
	FIELD(struct o2_chain_list, cl_count, struct ocfs2_chain_list, cl_count);
	FIELD(struct o2_chain_list, cl_next_free_rec, struct ocfs2_chain_list, cl_next_free_rec);
	FIELD(struct o2_chain_list, cl_reserved1, struct ocfs2_chain_list, cl_reserved1);
	FIELD_OFF(struct o2_chain_list, cl_recs, struct ocfs2_chain_list, cl_recs);
	SIZE(struct o2_chain_list, struct ocfs2_chain_list);

	FIELD(struct o2_truncate_rec, t_start, struct ocfs2_truncate_rec, t_start);
	FIELD(struct o2_truncate_rec, t_clusters, struct ocfs2_truncate_rec, t_clusters);
	SIZE(struct o2_truncate_rec, struct ocfs2_truncate_rec);

	FIELD(struct o2_truncate_log, tl_count, struct ocfs2_truncate_log, tl_count);
	FIELD(struct o2_truncate_log, tl_used, struct ocfs2_truncate_log, tl_used);
	FIELD(struct o2_truncate_log, tl_reserved1, struct ocfs2_truncate_log, tl_reserved1);
	FIELD_OFF(struct o2_truncate_log, tl_recs, struct ocfs2_truncate_log, tl_recs);
	SIZE(struct o2_truncate_log, struct ocfs2_truncate_log);

	FIELD(struct o2_local_alloc, la_bm_off, struct ocfs2_local_alloc, la_bm_off);
	FIELD(struct o2_local_alloc, la_size, struct ocfs2_local_alloc, la_size);
	FIELD(struct o2_local_alloc, la_reserved1, struct ocfs2_local_alloc, la_reserved1);
	FIELD(struct o2_local_alloc, la_reserved2, struct ocfs2_local_alloc, la_reserved2);
	FIELD_OFF(struct o2_local_alloc, la_bitmap, struct ocfs2_local_alloc, la_bitmap);
	SIZE(struct o2_local_alloc, struct ocfs2_local_alloc);

	FIELD(struct o2_inline_data, id_count, struct ocfs2_inline_data, id_count);
	FIELD(struct o2_inline_data, id_reserved0, struct ocfs2_inline_data, id_reserved0);
	FIELD(struct o2_inline_data, id_reserved1, struct ocfs2_inline_data, id_reserved1);
	FIELD_OFF(struct o2_inline_data, id_data, struct ocfs2_inline_data, id_data);
	SIZE(struct o2_inline_data, struct ocfs2_inline_data);
}
END_TEST

START_TEST(test_slots_and_cluster_info)
{
	/* Legacy slot map: an array of le16. */
	ck_assert_uint_eq(sizeof(((struct ocfs2_slot_map *)0)->sm_slots[0]), 2);

	FIELD(struct o2_extended_slot, es_valid, struct ocfs2_extended_slot, es_valid);
	FIELD(struct o2_extended_slot, es_reserved1, struct ocfs2_extended_slot, es_reserved1);
	FIELD(struct o2_extended_slot, es_node_num, struct ocfs2_extended_slot, es_node_num);
	SIZE(struct o2_extended_slot, struct ocfs2_extended_slot);
	ck_assert_uint_eq(sizeof(struct o2_extended_slot),
			  sizeof(((struct ocfs2_slot_map_extended *)0)->se_slots[0]));

	FIELD(struct o2_cluster_info, ci_stack, struct ocfs2_cluster_info, ci_stack);
	FIELD(struct o2_cluster_info, ci_stackflags, struct ocfs2_cluster_info, ci_stackflags);
	ck_assert_uint_eq(offsetof(struct o2_cluster_info, ci_reserved),
			  offsetof(struct ocfs2_cluster_info, ci_reserved1));
	ck_assert_uint_eq(MSIZE(struct o2_cluster_info, ci_reserved),
			  MSIZE(struct ocfs2_cluster_info, ci_reserved1) +
				  MSIZE(struct ocfs2_cluster_info, ci_reserved2) +
				  MSIZE(struct ocfs2_cluster_info, ci_reserved3));
	ck_assert_uint_eq(offsetof(struct ocfs2_cluster_info, ci_reserved3),
			  offsetof(struct o2_cluster_info, ci_reserved) + 2);
	FIELD(struct o2_cluster_info, ci_cluster, struct ocfs2_cluster_info, ci_cluster);
	SIZE(struct o2_cluster_info, struct ocfs2_cluster_info);
}
END_TEST

START_TEST(test_super_block)
{
#define SB(f) FIELD(struct o2_super_block, f, struct ocfs2_super_block, f)
	SB(s_major_rev_level);
	SB(s_minor_rev_level);
	SB(s_mnt_count);
	SB(s_max_mnt_count);
	SB(s_state);
	SB(s_errors);
	SB(s_checkinterval);
	SB(s_lastcheck);
	SB(s_creator_os);
	SB(s_feature_compat);
	SB(s_feature_incompat);
	SB(s_feature_ro_compat);
	SB(s_root_blkno);
	SB(s_system_dir_blkno);
	SB(s_blocksize_bits);
	SB(s_clustersize_bits);
	SB(s_max_slots);
	SB(s_tunefs_flag);
	SB(s_uuid_hash);
	SB(s_first_cluster_group);
	SB(s_label);
	SB(s_uuid);
	SB(s_cluster_info);
	SB(s_xattr_inline_size);
	SB(s_reserved0);
	SB(s_dx_seed);
	SB(s_reserved2);
#undef SB
	SIZE(struct o2_super_block, struct ocfs2_super_block);
	/* The superblock must fit the smallest block inside its dinode. */
	ck_assert_uint_eq(offsetof(struct o2_dinode, id2.i_super) + sizeof(struct o2_super_block),
			  512);
	AT(struct o2_super_block, s_feature_compat, 0x1C);
	AT(struct o2_super_block, s_root_blkno, 0x28);
	AT(struct o2_super_block, s_blocksize_bits, 0x38);
	AT(struct o2_super_block, s_label, 0x50);
	AT(struct o2_super_block, s_uuid, 0x90);
	AT(struct o2_super_block, s_cluster_info, 0xA0);
	AT(struct o2_super_block, s_dx_seed, 0xBC);
}
END_TEST

START_TEST(test_dinode)
{
#define DI(f) FIELD(struct o2_dinode, f, struct ocfs2_dinode, f)
	DI(i_signature);
	DI(i_generation);
	DI(i_suballoc_slot);
	DI(i_suballoc_bit);
	DI(i_links_count_hi);
	DI(i_xattr_inline_size);
	DI(i_clusters);
	DI(i_uid);
	DI(i_gid);
	DI(i_size);
	DI(i_mode);
	DI(i_links_count);
	DI(i_flags);
	DI(i_atime);
	DI(i_ctime);
	DI(i_mtime);
	DI(i_dtime);
	DI(i_blkno);
	DI(i_last_eb_blk);
	DI(i_fs_generation);
	DI(i_atime_nsec);
	DI(i_ctime_nsec);
	DI(i_mtime_nsec);
	DI(i_attr);
	DI(i_orphaned_slot);
	DI(i_dyn_features);
	DI(i_xattr_loc);
	DI(i_check);
	DI(i_dx_root);
	DI(i_refcount_loc);
	DI(i_suballoc_loc);
	DI(i_dio_orphaned_slot);
	DI(i_reserved1);
	DI(i_reserved2);
	DI(id1);
	DI(id1.bitmap1);
	DI(id1.bitmap1.i_used);
	DI(id1.bitmap1.i_total);
	DI(id1.journal1);
	DI(id1.journal1.ij_flags);
	DI(id1.journal1.ij_recovery_generation);
	DI(id2.i_super);
	DI(id2.i_lab);
	DI(id2.i_chain);
	DI(id2.i_list);
	DI(id2.i_dealloc);
	DI(id2.i_data);
	DI(id2.i_super.s_root_blkno);
	DI(id2.i_lab.la_bm_off);
	DI(id2.i_chain.cl_next_free_rec);
#undef DI
	FIELD(struct o2_dinode, id2.i_list.next_free_rec, struct ocfs2_dinode,
	      id2.i_list.l_next_free_rec);
	FIELD(struct o2_dinode, id1.i_rdev, struct ocfs2_dinode, id1.dev1.i_rdev);
	FIELD(struct o2_dinode, id1, struct ocfs2_dinode, id1.i_pad1);
	FIELD_OFF(struct o2_dinode, id2, struct ocfs2_dinode, id2);
	FIELD_OFF(struct o2_dinode, id2.i_symlink, struct ocfs2_dinode, id2.i_symlink);
	FIELD_OFF(struct o2_dinode, id2.i_list.recs, struct ocfs2_dinode, id2.i_list.l_recs);
	FIELD_OFF(struct o2_dinode, id2.i_chain.cl_recs, struct ocfs2_dinode, id2.i_chain.cl_recs);
	FIELD_OFF(struct o2_dinode, id2.i_dealloc.tl_recs, struct ocfs2_dinode,
		  id2.i_dealloc.tl_recs);
	FIELD_OFF(struct o2_dinode, id2.i_data.id_data, struct ocfs2_dinode, id2.i_data.id_data);
	FIELD_OFF(struct o2_dinode, id2.i_lab.la_bitmap, struct ocfs2_dinode, id2.i_lab.la_bitmap);
	SIZE(struct o2_dinode, struct ocfs2_dinode);

	AT(struct o2_dinode, i_flags, 0x2C);
	AT(struct o2_dinode, i_blkno, 0x50);
	AT(struct o2_dinode, i_dyn_features, 0x76);
	AT(struct o2_dinode, i_check, 0x80);
	AT(struct o2_dinode, i_suballoc_loc, 0x98);
	AT(struct o2_dinode, id1, 0xB8);
	AT(struct o2_dinode, id2, 0xC0);
}
END_TEST

START_TEST(test_directories)
{
	FIELD(struct o2_dir_entry, inode, struct ocfs2_dir_entry, inode);
	FIELD(struct o2_dir_entry, rec_len, struct ocfs2_dir_entry, rec_len);
	FIELD(struct o2_dir_entry, name_len, struct ocfs2_dir_entry, name_len);
	FIELD(struct o2_dir_entry, file_type, struct ocfs2_dir_entry, file_type);
	FIELD(struct o2_dir_entry, name, struct ocfs2_dir_entry, name);
	SIZE(struct o2_dir_entry, struct ocfs2_dir_entry);
	ck_assert_uint_eq(O2_DIR_MEMBER_LEN, OCFS2_DIR_MEMBER_LEN);
	for (unsigned n = 1; n <= 255; n++)
		ck_assert_uint_eq(O2_DIR_REC_LEN(n), OCFS2_DIR_REC_LEN(n));

#define TR(f) FIELD(struct o2_dir_trailer, f, struct ocfs2_dir_block_trailer, f)
	TR(db_compat_inode);
	TR(db_compat_rec_len);
	TR(db_compat_name_len);
	TR(db_reserved0);
	TR(db_reserved1);
	TR(db_free_rec_len);
	TR(db_signature);
	TR(db_reserved2);
	TR(db_free_next);
	TR(db_blkno);
	TR(db_parent_dinode);
	TR(db_check);
#undef TR
	SIZE(struct o2_dir_trailer, struct ocfs2_dir_block_trailer);
	AT(struct o2_dir_trailer, db_check, 0x38);
	ck_assert_uint_eq(sizeof(struct o2_dir_trailer), 64);

	FIELD(struct o2_dx_entry, dx_major_hash, struct ocfs2_dx_entry, dx_major_hash);
	FIELD(struct o2_dx_entry, dx_minor_hash, struct ocfs2_dx_entry, dx_minor_hash);
	FIELD(struct o2_dx_entry, dx_dirent_blk, struct ocfs2_dx_entry, dx_dirent_blk);
	SIZE(struct o2_dx_entry, struct ocfs2_dx_entry);

	FIELD(struct o2_dx_entry_list, de_reserved, struct ocfs2_dx_entry_list, de_reserved);
	FIELD(struct o2_dx_entry_list, de_count, struct ocfs2_dx_entry_list, de_count);
	FIELD(struct o2_dx_entry_list, de_num_used, struct ocfs2_dx_entry_list, de_num_used);
	FIELD_OFF(struct o2_dx_entry_list, de_entries, struct ocfs2_dx_entry_list, de_entries);
	SIZE(struct o2_dx_entry_list, struct ocfs2_dx_entry_list);

#define DR(f) FIELD(struct o2_dx_root_block, f, struct ocfs2_dx_root_block, f)
	DR(dr_signature);
	DR(dr_check);
	DR(dr_suballoc_slot);
	DR(dr_suballoc_bit);
	DR(dr_fs_generation);
	DR(dr_blkno);
	DR(dr_last_eb_blk);
	DR(dr_clusters);
	DR(dr_flags);
	DR(dr_reserved0);
	DR(dr_reserved1);
	DR(dr_dir_blkno);
	DR(dr_num_entries);
	DR(dr_reserved2);
	DR(dr_free_blk);
	DR(dr_suballoc_loc);
	DR(dr_reserved3);
	DR(dr_list);
	DR(dr_entries);
#undef DR
	FIELD_OFF(struct o2_dx_root_block, dr_list.recs, struct ocfs2_dx_root_block, dr_list.l_recs);
	FIELD_OFF(struct o2_dx_root_block, dr_entries.de_entries, struct ocfs2_dx_root_block,
		  dr_entries.de_entries);
	SIZE(struct o2_dx_root_block, struct ocfs2_dx_root_block);

#define DL(f) FIELD(struct o2_dx_leaf, f, struct ocfs2_dx_leaf, f)
	DL(dl_signature);
	DL(dl_check);
	DL(dl_blkno);
	DL(dl_fs_generation);
	DL(dl_reserved0);
	DL(dl_reserved1);
	DL(dl_list);
#undef DL
	FIELD_OFF(struct o2_dx_leaf, dl_list.de_entries, struct ocfs2_dx_leaf, dl_list.de_entries);
	SIZE(struct o2_dx_leaf, struct ocfs2_dx_leaf);
}
END_TEST

START_TEST(test_group_desc)
{
#define GD(f) FIELD(struct o2_group_desc, f, struct ocfs2_group_desc, f)
	GD(bg_signature);
	GD(bg_size);
	GD(bg_bits);
	GD(bg_free_bits_count);
	GD(bg_chain);
	GD(bg_generation);
	GD(bg_reserved1);
	GD(bg_next_group);
	GD(bg_parent_dinode);
	GD(bg_blkno);
	GD(bg_check);
	GD(bg_reserved2);
	GD(bg_bitmap_filler);
	GD(bg_list);
#undef GD
	FIELD_OFF(struct o2_group_desc, bg_bitmap, struct ocfs2_group_desc, bg_bitmap);
	FIELD_OFF(struct o2_group_desc, bg_list.recs, struct ocfs2_group_desc, bg_list.l_recs);
	SIZE(struct o2_group_desc, struct ocfs2_group_desc);
	ck_assert_uint_eq(O2_MAX_BG_BITMAP_SIZE, OCFS2_MAX_BG_BITMAP_SIZE);
	AT(struct o2_group_desc, bg_check, 0x30);
	AT(struct o2_group_desc, bg_bitmap, 0x40);
	AT(struct o2_group_desc, bg_list, 0x140);
}
END_TEST

START_TEST(test_refcount)
{
	FIELD(struct o2_refcount_rec, r_cpos, struct ocfs2_refcount_rec, r_cpos);
	FIELD(struct o2_refcount_rec, r_clusters, struct ocfs2_refcount_rec, r_clusters);
	FIELD(struct o2_refcount_rec, r_refcount, struct ocfs2_refcount_rec, r_refcount);
	SIZE(struct o2_refcount_rec, struct ocfs2_refcount_rec);

	FIELD(struct o2_refcount_list, rl_count, struct ocfs2_refcount_list, rl_count);
	FIELD(struct o2_refcount_list, rl_used, struct ocfs2_refcount_list, rl_used);
	FIELD(struct o2_refcount_list, rl_reserved2, struct ocfs2_refcount_list, rl_reserved2);
	FIELD(struct o2_refcount_list, rl_reserved1, struct ocfs2_refcount_list, rl_reserved1);
	FIELD_OFF(struct o2_refcount_list, rl_recs, struct ocfs2_refcount_list, rl_recs);
	SIZE(struct o2_refcount_list, struct ocfs2_refcount_list);

#define RF(f) FIELD(struct o2_refcount_block, f, struct ocfs2_refcount_block, f)
	RF(rf_signature);
	RF(rf_suballoc_slot);
	RF(rf_suballoc_bit);
	RF(rf_fs_generation);
	RF(rf_blkno);
	RF(rf_parent);
	RF(rf_check);
	RF(rf_last_eb_blk);
	RF(rf_count);
	RF(rf_flags);
	RF(rf_clusters);
	RF(rf_cpos);
	RF(rf_generation);
	RF(rf_reserved0);
	RF(rf_suballoc_loc);
	RF(rf_reserved1);
	RF(rf_records);
	RF(rf_list);
#undef RF
	FIELD_OFF(struct o2_refcount_block, rf_records.rl_recs, struct ocfs2_refcount_block,
		  rf_records.rl_recs);
	FIELD_OFF(struct o2_refcount_block, rf_list.recs, struct ocfs2_refcount_block,
		  rf_list.l_recs);
	SIZE(struct o2_refcount_block, struct ocfs2_refcount_block);
	AT(struct o2_refcount_block, rf_check, 0x20);
	AT(struct o2_refcount_block, rf_records, 0x80);
}
END_TEST

START_TEST(test_xattr)
{
	FIELD(struct o2_xattr_entry, xe_name_hash, struct ocfs2_xattr_entry, xe_name_hash);
	FIELD(struct o2_xattr_entry, xe_name_offset, struct ocfs2_xattr_entry, xe_name_offset);
	FIELD(struct o2_xattr_entry, xe_name_len, struct ocfs2_xattr_entry, xe_name_len);
	FIELD(struct o2_xattr_entry, xe_type, struct ocfs2_xattr_entry, xe_type);
	FIELD(struct o2_xattr_entry, xe_value_size, struct ocfs2_xattr_entry, xe_value_size);
	SIZE(struct o2_xattr_entry, struct ocfs2_xattr_entry);

	FIELD(struct o2_xattr_header, xh_count, struct ocfs2_xattr_header, xh_count);
	FIELD(struct o2_xattr_header, xh_free_start, struct ocfs2_xattr_header, xh_free_start);
	FIELD(struct o2_xattr_header, xh_name_value_len, struct ocfs2_xattr_header,
	      xh_name_value_len);
	FIELD(struct o2_xattr_header, xh_num_buckets, struct ocfs2_xattr_header, xh_num_buckets);
	FIELD(struct o2_xattr_header, xh_check, struct ocfs2_xattr_header, xh_check);
	FIELD_OFF(struct o2_xattr_header, xh_entries, struct ocfs2_xattr_header, xh_entries);
	SIZE(struct o2_xattr_header, struct ocfs2_xattr_header);

	FIELD(struct o2_xattr_value_root, xr_clusters, struct ocfs2_xattr_value_root, xr_clusters);
	FIELD(struct o2_xattr_value_root, xr_reserved0, struct ocfs2_xattr_value_root,
	      xr_reserved0);
	FIELD(struct o2_xattr_value_root, xr_last_eb_blk, struct ocfs2_xattr_value_root,
	      xr_last_eb_blk);
	FIELD(struct o2_xattr_value_root, xr_list, struct ocfs2_xattr_value_root, xr_list);
	FIELD_OFF(struct o2_xattr_value_root, xr_list.recs, struct ocfs2_xattr_value_root,
		  xr_list.l_recs);
	SIZE(struct o2_xattr_value_root, struct ocfs2_xattr_value_root);

	FIELD(struct o2_xattr_tree_root, xt_clusters, struct ocfs2_xattr_tree_root, xt_clusters);
	FIELD(struct o2_xattr_tree_root, xt_reserved0, struct ocfs2_xattr_tree_root,
	      xt_reserved0);
	FIELD(struct o2_xattr_tree_root, xt_last_eb_blk, struct ocfs2_xattr_tree_root,
	      xt_last_eb_blk);
	FIELD(struct o2_xattr_tree_root, xt_list, struct ocfs2_xattr_tree_root, xt_list);
	SIZE(struct o2_xattr_tree_root, struct ocfs2_xattr_tree_root);

#define XB(f) FIELD(struct o2_xattr_block, f, struct ocfs2_xattr_block, f)
	XB(xb_signature);
	XB(xb_suballoc_slot);
	XB(xb_suballoc_bit);
	XB(xb_fs_generation);
	XB(xb_blkno);
	XB(xb_check);
	XB(xb_flags);
	XB(xb_reserved0);
	XB(xb_reserved1);
	XB(xb_suballoc_loc);
	XB(xb_attrs);
	XB(xb_attrs.xb_header);
	XB(xb_attrs.xb_root);
#undef XB
	FIELD_OFF(struct o2_xattr_block, xb_attrs.xb_root.xt_list.recs, struct ocfs2_xattr_block,
		  xb_attrs.xb_root.xt_list.l_recs);
	SIZE(struct o2_xattr_block, struct ocfs2_xattr_block);
	AT(struct o2_xattr_block, xb_check, 0x18);
	/* POSIX ACL entries (fs/ocfs2/acl.h; not in the installed headers) */
	AT(struct o2_acl_entry, e_tag, 0x00);
	AT(struct o2_acl_entry, e_perm, 0x02);
	AT(struct o2_acl_entry, e_id, 0x04);
	ck_assert_uint_eq(sizeof(struct o2_acl_entry), 8);
}
END_TEST

/*
 * JBD2 against <ocfs2/jbd2.h>.  That header includes cleanly (it needs only
 * stdint and the __be types), so no hard-coded offsets are needed.
 */
START_TEST(test_jbd2)
{
	FIELD(struct jbd2_header, h_magic, journal_header_t, h_magic);
	FIELD(struct jbd2_header, h_blocktype, journal_header_t, h_blocktype);
	FIELD(struct jbd2_header, h_sequence, journal_header_t, h_sequence);
	SIZE(struct jbd2_header, journal_header_t);

#define JS(f) FIELD(struct jbd2_superblock, f, journal_superblock_t, f)
	JS(s_header);
	JS(s_blocksize);
	JS(s_maxlen);
	JS(s_first);
	JS(s_sequence);
	JS(s_start);
	JS(s_errno);
	JS(s_feature_compat);
	JS(s_feature_incompat);
	JS(s_feature_ro_compat);
	JS(s_uuid);
	JS(s_nr_users);
	JS(s_dynsuper);
	JS(s_max_transaction);
	JS(s_max_trans_data);
	JS(s_padding);
	JS(s_users);
#undef JS
	SIZE(struct jbd2_superblock, journal_superblock_t);
	ck_assert_uint_eq(sizeof(struct jbd2_superblock), 0x400);

#define CH(f) FIELD(struct jbd2_commit_header, f, struct commit_header, f)
	CH(h_magic);
	CH(h_blocktype);
	CH(h_sequence);
	CH(h_chksum_type);
	CH(h_chksum_size);
	CH(h_padding);
	CH(h_chksum);
	CH(h_commit_sec);
	CH(h_commit_nsec);
#undef CH
	/*
	 * The system's struct commit_header is not packed: it carries 4 bytes
	 * of tail padding after h_commit_nsec (to align its be64).  Ours is
	 * packed, so compare against the end of its last field instead.
	 */
	ck_assert_uint_eq(sizeof(struct jbd2_commit_header),
			  offsetof(struct commit_header, h_commit_nsec) +
				  MSIZE(struct commit_header, h_commit_nsec));

	FIELD(struct jbd2_block_tag, t_blocknr, journal_block_tag_t, t_blocknr);
	FIELD(struct jbd2_block_tag, t_flags, journal_block_tag_t, t_flags);
	FIELD(struct jbd2_block_tag, t_blocknr_high, journal_block_tag_t, t_blocknr_high);
	SIZE(struct jbd2_block_tag, journal_block_tag_t);
	ck_assert_uint_eq(offsetof(struct jbd2_block_tag, t_blocknr_high), JBD2_TAG_SIZE32);
	ck_assert_uint_eq(sizeof(struct jbd2_block_tag), JBD2_TAG_SIZE64);

	FIELD(struct jbd2_revoke_header, r_header, journal_revoke_header_t, r_header);
	FIELD(struct jbd2_revoke_header, r_count, journal_revoke_header_t, r_count);
	SIZE(struct jbd2_revoke_header, journal_revoke_header_t);

	ck_assert_uint_eq(JBD2_MAGIC, JBD2_MAGIC_NUMBER);
	ck_assert_uint_eq(JBD2_INCOMPAT_REVOKE, JBD2_FEATURE_INCOMPAT_REVOKE);
	ck_assert_uint_eq(JBD2_INCOMPAT_64BIT, JBD2_FEATURE_INCOMPAT_64BIT);
	ck_assert_uint_eq(JBD2_INCOMPAT_ASYNC_COMMIT, JBD2_FEATURE_INCOMPAT_ASYNC_COMMIT);
	ck_assert_uint_eq(JBD2_TAG_ESCAPE, JBD2_FLAG_ESCAPE);
	ck_assert_uint_eq(JBD2_TAG_SAME_UUID, JBD2_FLAG_SAME_UUID);
	ck_assert_uint_eq(JBD2_TAG_DELETED, JBD2_FLAG_DELETED);
	ck_assert_uint_eq(JBD2_TAG_LAST, JBD2_FLAG_LAST_TAG);
}
END_TEST

/* Sizes derived from the block size, at every block size. */
START_TEST(test_derived_counts)
{
	for (unsigned bits = 9; bits <= 12; bits++) {
		int bs = 1 << bits;
		ck_assert_int_eq((int)o2_extent_recs_per_inode(bs), ocfs2_extent_recs_per_inode(bs));
		ck_assert_int_eq((int)o2_extent_recs_per_eb(bs), ocfs2_extent_recs_per_eb(bs));
		ck_assert_int_eq((int)o2_chain_recs_per_inode(bs), ocfs2_chain_recs_per_inode(bs));
		ck_assert_int_eq((int)o2_truncate_recs_per_inode(bs),
				 ocfs2_truncate_recs_per_inode(bs));
		ck_assert_int_eq((int)o2_inline_max(bs), ocfs2_max_inline_data_with_xattr(bs, NULL));
		ck_assert_int_eq((int)o2_fast_symlink_max(bs), ocfs2_fast_symlink_chars(bs));
		ck_assert_int_eq((int)o2_local_alloc_max(bs), ocfs2_local_alloc_size(bs));
		ck_assert_int_eq((int)o2_dx_entries_per_leaf(bs), ocfs2_dx_entries_per_leaf(bs));
		ck_assert_int_eq((int)o2_dx_entries_per_root(bs), ocfs2_dx_entries_per_root(bs));
		ck_assert_int_eq((int)o2_extent_recs_per_dx_root(bs),
				 ocfs2_extent_recs_per_dx_root(bs));
		ck_assert_int_eq((int)o2_extent_recs_per_gd(bs), ocfs2_extent_recs_per_gd(bs));
		/* A cluster group's bitmap runs to the end of the block. */
		ck_assert_int_eq(bs - (int)offsetof(struct o2_group_desc, bg_bitmap),
				 ocfs2_group_bitmap_size(bs, 0, 0));
	}

	/* The well-known 4 KiB values, as mkfs.ocfs2's volumes have them. */
	ck_assert_uint_eq(o2_extent_recs_per_inode(4096), 243);
	ck_assert_uint_eq(o2_extent_recs_per_eb(4096), 252);
	ck_assert_uint_eq(o2_chain_recs_per_inode(4096), 243);
	ck_assert_uint_eq(o2_truncate_recs_per_inode(4096), 487);
	ck_assert_uint_eq(o2_local_alloc_max(4096), 3888);
	ck_assert_uint_eq(o2_inline_max(4096), 3896);
	ck_assert_uint_eq(o2_dx_entries_per_leaf(4096), 253);
	ck_assert_uint_eq(o2_dx_entries_per_root(4096), 243);
	ck_assert_uint_eq(o2_extent_recs_per_dx_root(4096), 243);
	ck_assert_uint_eq((4096 - offsetof(struct o2_group_desc, bg_bitmap)) * 8, 32256);

	/* And at 512 bytes, where everything is tightest. */
	ck_assert_uint_eq(o2_extent_recs_per_inode(512), 19);
	ck_assert_uint_eq(o2_extent_recs_per_eb(512), 28);
	ck_assert_uint_eq(o2_truncate_recs_per_inode(512), 39);
	ck_assert_uint_eq(o2_local_alloc_max(512), 304);
}
END_TEST

START_TEST(test_constants)
{
	ck_assert_int_eq(O2_SUPER_BLKNO, OCFS2_SUPER_BLOCK_BLKNO);
	ck_assert_int_eq(1 << O2_MIN_BLOCK_BITS, OCFS2_MIN_BLOCKSIZE);
	ck_assert_int_eq(1 << O2_MAX_BLOCK_BITS, OCFS2_MAX_BLOCKSIZE);
	ck_assert_int_eq(1 << O2_MIN_CLUSTER_BITS, OCFS2_MIN_CLUSTERSIZE);
	ck_assert_int_eq(1 << O2_MAX_CLUSTER_BITS, OCFS2_MAX_CLUSTERSIZE);
	ck_assert_int_eq(O2_MAX_SLOTS, OCFS2_MAX_SLOTS);
	ck_assert_int_eq(O2_MAX_NAME_LEN, OCFS2_MAX_FILENAME_LEN);
	ck_assert_int_eq(O2_LABEL_LEN, OCFS2_MAX_VOL_LABEL_LEN);
	ck_assert_int_eq(O2_UUID_LEN, OCFS2_VOL_UUID_LEN);

	ck_assert_str_eq(O2_SIG_SUPER, OCFS2_SUPER_BLOCK_SIGNATURE);
	ck_assert_str_eq(O2_SIG_INODE, OCFS2_INODE_SIGNATURE);
	ck_assert_str_eq(O2_SIG_EXTENT, OCFS2_EXTENT_BLOCK_SIGNATURE);
	ck_assert_str_eq(O2_SIG_GROUP, OCFS2_GROUP_DESC_SIGNATURE);
	ck_assert_str_eq(O2_SIG_XATTR, OCFS2_XATTR_BLOCK_SIGNATURE);
	ck_assert_str_eq(O2_SIG_DIRTRL, OCFS2_DIR_TRAILER_SIGNATURE);
	ck_assert_str_eq(O2_SIG_DXROOT, OCFS2_DX_ROOT_SIGNATURE);
	ck_assert_str_eq(O2_SIG_DXLEAF, OCFS2_DX_LEAF_SIGNATURE);
	ck_assert_str_eq(O2_SIG_REFCNT, OCFS2_REFCOUNT_BLOCK_SIGNATURE);

	/* i_flags, in both spellings fscore has. */
	static const struct {
		uint32_t ours, pub, theirs;
	} fl[] = {
		{ O2_FL_VALID, O2_INODE_VALID, OCFS2_VALID_FL },
		{ O2_FL_ORPHANED, O2_INODE_ORPHANED, OCFS2_ORPHANED_FL },
		{ O2_FL_SYSTEM, O2_INODE_SYSTEM, OCFS2_SYSTEM_FL },
		{ O2_FL_SUPER, O2_INODE_SUPER, OCFS2_SUPER_BLOCK_FL },
		{ O2_FL_LOCAL_ALLOC, O2_INODE_LOCAL_ALLOC, OCFS2_LOCAL_ALLOC_FL },
		{ O2_FL_BITMAP, O2_INODE_BITMAP, OCFS2_BITMAP_FL },
		{ O2_FL_JOURNAL, O2_INODE_JOURNAL, OCFS2_JOURNAL_FL },
		{ O2_FL_HEARTBEAT, O2_INODE_HEARTBEAT, OCFS2_HEARTBEAT_FL },
		{ O2_FL_CHAIN, O2_INODE_CHAIN, OCFS2_CHAIN_FL },
		{ O2_FL_DEALLOC, O2_INODE_DEALLOC, OCFS2_DEALLOC_FL },
		{ O2_FL_QUOTA, O2_INODE_QUOTA, OCFS2_QUOTA_FL },
		{ O2_FL_DIO_ORPHANED, O2_INODE_DIO_ORPHANED, OCFS2_DIO_ORPHANED_FL },
		{ O2_DYN_INLINE_DATA, O2_INODE_DYN_INLINE_DATA, OCFS2_INLINE_DATA_FL },
		{ O2_DYN_HAS_XATTR, O2_INODE_DYN_HAS_XATTR, OCFS2_HAS_XATTR_FL },
		{ O2_DYN_INLINE_XATTR, O2_INODE_DYN_INLINE_XATTR, OCFS2_INLINE_XATTR_FL },
		{ O2_DYN_INDEXED_DIR, O2_INODE_DYN_INDEXED_DIR, OCFS2_INDEXED_DIR_FL },
		{ O2_DYN_HAS_REFCOUNT, O2_INODE_DYN_HAS_REFCOUNT, OCFS2_HAS_REFCOUNT_FL },
		{ O2_EXT_UNWRITTEN, O2_EXTENT_UNWRITTEN, OCFS2_EXT_UNWRITTEN },
		{ O2_EXT_REFCOUNTED, O2_EXTENT_REFCOUNTED, OCFS2_EXT_REFCOUNTED },
	};
	for (size_t i = 0; i < sizeof(fl) / sizeof(fl[0]); i++) {
		ck_assert_msg(fl[i].ours == fl[i].theirs && fl[i].pub == fl[i].theirs,
			      "flag %zu: format.h 0x%x, o2fs.h 0x%x, system 0x%x", i, fl[i].ours,
			      fl[i].pub, fl[i].theirs);
	}
	ck_assert_int_eq(O2_JOURNAL_DIRTY, OCFS2_JOURNAL_DIRTY_FL);
	ck_assert_int_eq(O2_DX_INLINE, OCFS2_DX_FLAG_INLINE);

	static const struct {
		uint32_t ours, theirs;
	} feat[] = {
		{ O2_FEATURE_COMPAT_BACKUP_SB, OCFS2_FEATURE_COMPAT_BACKUP_SB },
		{ O2_FEATURE_COMPAT_JBD2_SB, OCFS2_FEATURE_COMPAT_JBD2_SB },
		{ O2_FEATURE_INCOMPAT_HEARTBEAT_DEV, OCFS2_FEATURE_INCOMPAT_HEARTBEAT_DEV },
		{ O2_FEATURE_INCOMPAT_RESIZE_INPROG, OCFS2_FEATURE_INCOMPAT_RESIZE_INPROG },
		{ O2_FEATURE_INCOMPAT_LOCAL_MOUNT, OCFS2_FEATURE_INCOMPAT_LOCAL_MOUNT },
		{ O2_FEATURE_INCOMPAT_SPARSE_ALLOC, OCFS2_FEATURE_INCOMPAT_SPARSE_ALLOC },
		{ O2_FEATURE_INCOMPAT_TUNEFS_INPROG, OCFS2_FEATURE_INCOMPAT_TUNEFS_INPROG },
		{ O2_FEATURE_INCOMPAT_INLINE_DATA, OCFS2_FEATURE_INCOMPAT_INLINE_DATA },
		{ O2_FEATURE_INCOMPAT_USERSPACE_STACK, OCFS2_FEATURE_INCOMPAT_USERSPACE_STACK },
		{ O2_FEATURE_INCOMPAT_EXTENDED_SLOT_MAP, OCFS2_FEATURE_INCOMPAT_EXTENDED_SLOT_MAP },
		{ O2_FEATURE_INCOMPAT_XATTR, OCFS2_FEATURE_INCOMPAT_XATTR },
		{ O2_FEATURE_INCOMPAT_INDEXED_DIRS, OCFS2_FEATURE_INCOMPAT_INDEXED_DIRS },
		{ O2_FEATURE_INCOMPAT_META_ECC, OCFS2_FEATURE_INCOMPAT_META_ECC },
		{ O2_FEATURE_INCOMPAT_REFCOUNT_TREE, OCFS2_FEATURE_INCOMPAT_REFCOUNT_TREE },
		{ O2_FEATURE_INCOMPAT_DISCONTIG_BG, OCFS2_FEATURE_INCOMPAT_DISCONTIG_BG },
		{ O2_FEATURE_INCOMPAT_CLUSTERINFO, OCFS2_FEATURE_INCOMPAT_CLUSTERINFO },
		{ O2_FEATURE_INCOMPAT_APPEND_DIO, OCFS2_FEATURE_INCOMPAT_APPEND_DIO },
		{ O2_FEATURE_RO_COMPAT_UNWRITTEN, OCFS2_FEATURE_RO_COMPAT_UNWRITTEN },
		{ O2_FEATURE_RO_COMPAT_USRQUOTA, OCFS2_FEATURE_RO_COMPAT_USRQUOTA },
		{ O2_FEATURE_RO_COMPAT_GRPQUOTA, OCFS2_FEATURE_RO_COMPAT_GRPQUOTA },
	};
	for (size_t i = 0; i < sizeof(feat) / sizeof(feat[0]); i++)
		ck_assert_msg(feat[i].ours == feat[i].theirs, "feature %zu: ours 0x%x, system 0x%x",
			      i, feat[i].ours, feat[i].theirs);

	ck_assert_int_eq(O2_FT_UNKNOWN, OCFS2_FT_UNKNOWN);
	ck_assert_int_eq(O2_FT_REG, OCFS2_FT_REG_FILE);
	ck_assert_int_eq(O2_FT_DIR, OCFS2_FT_DIR);
	ck_assert_int_eq(O2_FT_CHR, OCFS2_FT_CHRDEV);
	ck_assert_int_eq(O2_FT_BLK, OCFS2_FT_BLKDEV);
	ck_assert_int_eq(O2_FT_FIFO, OCFS2_FT_FIFO);
	ck_assert_int_eq(O2_FT_SOCK, OCFS2_FT_SOCK);
	ck_assert_int_eq(O2_FT_LNK, OCFS2_FT_SYMLINK);
	ck_assert_int_eq(O2_FT_MAX, OCFS2_FT_MAX);
	/* The public dirent types are the on-disk ones. */
	ck_assert_int_eq(O2_DT_LNK, OCFS2_FT_SYMLINK);
	ck_assert_int_eq(O2_DT_REG, OCFS2_FT_REG_FILE);
}
END_TEST

/* System file names and their order against the system's table. */
START_TEST(test_sysfile_names)
{
	ck_assert_int_eq(O2_SYS_COUNT, NUM_SYSTEM_INODES);
	for (int t = 0; t < NUM_SYSTEM_INODES; t++) {
		for (unsigned slot = 0; slot < 3; slot++) {
			char ours[64], theirs[64];
			o2_sysfile_name((enum o2_sysfile)t, slot, ours, sizeof(ours));
			ocfs2_sprintf_system_inode_name(theirs, sizeof(theirs), t, (int)slot);
			ck_assert_str_eq(ours, theirs);
			ck_assert_int_eq(o2_sysfile_is_per_slot((enum o2_sysfile)t),
					 !ocfs2_system_inode_is_global(t));
		}
	}
}
END_TEST

static Suite *layout_suite(void)
{
	Suite *s = suite_create("layout");
	TCase *tc = tcase_create("structs");
	tcase_add_test(tc, test_block_check);
	tcase_add_test(tc, test_extents);
	tcase_add_test(tc, test_chains_and_logs);
	tcase_add_test(tc, test_slots_and_cluster_info);
	tcase_add_test(tc, test_super_block);
	tcase_add_test(tc, test_dinode);
	tcase_add_test(tc, test_directories);
	tcase_add_test(tc, test_group_desc);
	tcase_add_test(tc, test_refcount);
	tcase_add_test(tc, test_xattr);
	tcase_add_test(tc, test_jbd2);
	suite_add_tcase(s, tc);
	tc = tcase_create("derived");
	tcase_add_test(tc, test_derived_counts);
	tcase_add_test(tc, test_constants);
	tcase_add_test(tc, test_sysfile_names);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(layout_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
