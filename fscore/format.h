/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * OCFS2 and JBD2 on-disk structures, as ocfs2d defines them.
 *
 * Every OCFS2 field is little-endian and every JBD2 field big-endian; the
 * types say which, and the accessors below convert.  Each field carries its
 * byte offset in a comment.  tests/unit/test_layout.c compares every size and
 * offset here with the system's ocfs2-kernel/ocfs2_fs.h.
 */
#ifndef O2_FORMAT_H
#define O2_FORMAT_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>

typedef uint16_t o2le16;
typedef uint32_t o2le32;
typedef uint64_t o2le64;
typedef uint32_t o2be32;
typedef uint64_t o2be64;

static inline uint16_t le16(o2le16 v) { return le16toh(v); }
static inline uint32_t le32(o2le32 v) { return le32toh(v); }
static inline uint64_t le64(o2le64 v) { return le64toh(v); }
static inline uint32_t be32(o2be32 v) { return be32toh(v); }
static inline uint64_t be64(o2be64 v) { return be64toh(v); }
static inline o2le16 cpu_le16(uint16_t v) { return htole16(v); }
static inline o2le32 cpu_le32(uint32_t v) { return htole32(v); }
static inline o2le64 cpu_le64(uint64_t v) { return htole64(v); }
static inline o2be32 cpu_be32(uint32_t v) { return htobe32(v); }
static inline o2be64 cpu_be64(uint64_t v) { return htobe64(v); }

#define O2_SUPER_BLKNO 2
#define O2_MIN_BLOCK_BITS 9
#define O2_MAX_BLOCK_BITS 12
#define O2_MIN_CLUSTER_BITS 12
#define O2_MAX_CLUSTER_BITS 20
#define O2_MAX_SLOTS 255
#define O2_MAX_NAME_LEN 255
#define O2_LABEL_LEN 64
#define O2_UUID_LEN 16

#define O2_SIG_SUPER "OCFSV2"
#define O2_SIG_INODE "INODE01"
#define O2_SIG_EXTENT "EXBLK01"
#define O2_SIG_GROUP "GROUP01"
#define O2_SIG_XATTR "XATTR01"
#define O2_SIG_DIRTRL "DIRTRL1"
#define O2_SIG_DXROOT "DXDIR01"
#define O2_SIG_DXLEAF "DXLEAF1"
#define O2_SIG_REFCNT "REFCNT1"

/* i_flags */
#define O2_FL_VALID 0x0001
#define O2_FL_ORPHANED 0x0004
#define O2_FL_SYSTEM 0x0010
#define O2_FL_SUPER 0x0020
#define O2_FL_LOCAL_ALLOC 0x0040
#define O2_FL_BITMAP 0x0080
#define O2_FL_JOURNAL 0x0100
#define O2_FL_HEARTBEAT 0x0200
#define O2_FL_CHAIN 0x0400
#define O2_FL_DEALLOC 0x0800
#define O2_FL_QUOTA 0x1000
#define O2_FL_DIO_ORPHANED 0x2000

/* i_dyn_features */
#define O2_DYN_INLINE_DATA 0x0001
#define O2_DYN_HAS_XATTR 0x0002
#define O2_DYN_INLINE_XATTR 0x0004
#define O2_DYN_INDEXED_DIR 0x0008
#define O2_DYN_HAS_REFCOUNT 0x0010

/* leaf extent flags */
#define O2_EXT_UNWRITTEN 0x01
#define O2_EXT_REFCOUNTED 0x02

/* journal inode ij_flags */
#define O2_JOURNAL_DIRTY 0x0001

/* dx_root flags */
#define O2_DX_INLINE 0x01

/* directory entry file types */
enum {
	O2_FT_UNKNOWN = 0,
	O2_FT_REG = 1,
	O2_FT_DIR = 2,
	O2_FT_CHR = 3,
	O2_FT_BLK = 4,
	O2_FT_FIFO = 5,
	O2_FT_SOCK = 6,
	O2_FT_LNK = 7,
	O2_FT_MAX = 8,
};

struct o2_block_check {
	o2le32 crc32e; /* 0x00 */
	o2le16 ecc; /* 0x04 */
	o2le16 reserved; /* 0x06 */
} __attribute__((packed));

struct o2_extent_rec {
	o2le32 cpos; /* 0x00 */
	union {
		o2le32 int_clusters; /* 0x04 interior records */
		struct {
			o2le16 leaf_clusters; /* 0x04 */
			uint8_t reserved1; /* 0x06 */
			uint8_t flags; /* 0x07 */
		} __attribute__((packed));
	};
	o2le64 blkno; /* 0x08 */
} __attribute__((packed));

struct o2_extent_list {
	o2le16 tree_depth; /* 0x00 */
	o2le16 count; /* 0x02 */
	o2le16 next_free_rec; /* 0x04 */
	o2le16 reserved1; /* 0x06 */
	o2le64 reserved2; /* 0x08 */
	struct o2_extent_rec recs[]; /* 0x10 */
} __attribute__((packed));

struct o2_chain_rec {
	o2le32 c_free; /* 0x00 */
	o2le32 c_total; /* 0x04 */
	o2le64 c_blkno; /* 0x08 */
} __attribute__((packed));

struct o2_chain_list {
	o2le16 cl_cpg; /* 0x00 */
	o2le16 cl_bpc; /* 0x02 */
	o2le16 cl_count; /* 0x04 */
	o2le16 cl_next_free_rec; /* 0x06 */
	o2le64 cl_reserved1; /* 0x08 */
	struct o2_chain_rec cl_recs[]; /* 0x10 */
} __attribute__((packed));

struct o2_truncate_rec {
	o2le32 t_start; /* 0x00 */
	o2le32 t_clusters; /* 0x04 */
} __attribute__((packed));

struct o2_truncate_log {
	o2le16 tl_count; /* 0x00 */
	o2le16 tl_used; /* 0x02 */
	o2le32 tl_reserved1; /* 0x04 */
	struct o2_truncate_rec tl_recs[]; /* 0x08 */
} __attribute__((packed));

struct o2_extent_block {
	uint8_t h_signature[8]; /* 0x00 */
	struct o2_block_check h_check; /* 0x08 */
	o2le16 h_suballoc_slot; /* 0x10 */
	o2le16 h_suballoc_bit; /* 0x12 */
	o2le32 h_fs_generation; /* 0x14 */
	o2le64 h_blkno; /* 0x18 */
	o2le64 h_suballoc_loc; /* 0x20 */
	o2le64 h_next_leaf_blk; /* 0x28 */
	struct o2_extent_list h_list; /* 0x30 */
} __attribute__((packed));

struct o2_extended_slot {
	uint8_t es_valid; /* 0x00 */
	uint8_t es_reserved1[3]; /* 0x01 */
	o2le32 es_node_num; /* 0x04 */
} __attribute__((packed));

struct o2_cluster_info {
	uint8_t ci_stack[4]; /* 0x00 */
	uint8_t ci_stackflags; /* 0x04 */
	uint8_t ci_reserved[3]; /* 0x05 */
	uint8_t ci_cluster[16]; /* 0x08 */
} __attribute__((packed));

/* Lives at dinode id2 (0xC0); offsets are relative to id2. */
struct o2_super_block {
	o2le16 s_major_rev_level; /* 0x00 */
	o2le16 s_minor_rev_level; /* 0x02 */
	o2le16 s_mnt_count; /* 0x04 */
	o2le16 s_max_mnt_count; /* 0x06 */
	o2le16 s_state; /* 0x08 */
	o2le16 s_errors; /* 0x0A */
	o2le32 s_checkinterval; /* 0x0C */
	o2le64 s_lastcheck; /* 0x10 */
	o2le32 s_creator_os; /* 0x18 */
	o2le32 s_feature_compat; /* 0x1C */
	o2le32 s_feature_incompat; /* 0x20 */
	o2le32 s_feature_ro_compat; /* 0x24 */
	o2le64 s_root_blkno; /* 0x28 */
	o2le64 s_system_dir_blkno; /* 0x30 */
	o2le32 s_blocksize_bits; /* 0x38 */
	o2le32 s_clustersize_bits; /* 0x3C */
	o2le16 s_max_slots; /* 0x40 */
	o2le16 s_tunefs_flag; /* 0x42 */
	o2le32 s_uuid_hash; /* 0x44 */
	o2le64 s_first_cluster_group; /* 0x48 */
	uint8_t s_label[O2_LABEL_LEN]; /* 0x50 */
	uint8_t s_uuid[O2_UUID_LEN]; /* 0x90 */
	struct o2_cluster_info s_cluster_info; /* 0xA0 */
	o2le16 s_xattr_inline_size; /* 0xB8 */
	o2le16 s_reserved0; /* 0xBA */
	o2le32 s_dx_seed[3]; /* 0xBC */
	o2le64 s_reserved2[15]; /* 0xC8 */
} __attribute__((packed));

struct o2_local_alloc {
	o2le32 la_bm_off; /* 0x00 */
	o2le16 la_size; /* 0x04 */
	o2le16 la_reserved1; /* 0x06 */
	o2le64 la_reserved2; /* 0x08 */
	uint8_t la_bitmap[]; /* 0x10 */
} __attribute__((packed));

struct o2_inline_data {
	o2le16 id_count; /* 0x00 */
	o2le16 id_reserved0; /* 0x02 */
	o2le32 id_reserved1; /* 0x04 */
	uint8_t id_data[]; /* 0x08 */
} __attribute__((packed));

struct o2_dinode {
	uint8_t i_signature[8]; /* 0x00 */
	o2le32 i_generation; /* 0x08 */
	o2le16 i_suballoc_slot; /* 0x0C */
	o2le16 i_suballoc_bit; /* 0x0E */
	o2le16 i_links_count_hi; /* 0x10 */
	o2le16 i_xattr_inline_size; /* 0x12 */
	o2le32 i_clusters; /* 0x14 */
	o2le32 i_uid; /* 0x18 */
	o2le32 i_gid; /* 0x1C */
	o2le64 i_size; /* 0x20 */
	o2le16 i_mode; /* 0x28 */
	o2le16 i_links_count; /* 0x2A */
	o2le32 i_flags; /* 0x2C */
	o2le64 i_atime; /* 0x30 */
	o2le64 i_ctime; /* 0x38 */
	o2le64 i_mtime; /* 0x40 */
	o2le64 i_dtime; /* 0x48 */
	o2le64 i_blkno; /* 0x50 */
	o2le64 i_last_eb_blk; /* 0x58 */
	o2le32 i_fs_generation; /* 0x60 */
	o2le32 i_atime_nsec; /* 0x64 */
	o2le32 i_ctime_nsec; /* 0x68 */
	o2le32 i_mtime_nsec; /* 0x6C */
	o2le32 i_attr; /* 0x70 */
	o2le16 i_orphaned_slot; /* 0x74 */
	o2le16 i_dyn_features; /* 0x76 */
	o2le64 i_xattr_loc; /* 0x78 */
	struct o2_block_check i_check; /* 0x80 */
	o2le64 i_dx_root; /* 0x88 */
	o2le64 i_refcount_loc; /* 0x90 */
	o2le64 i_suballoc_loc; /* 0x98 */
	o2le16 i_dio_orphaned_slot; /* 0xA0 */
	o2le16 i_reserved1[3]; /* 0xA2 */
	o2le64 i_reserved2[2]; /* 0xA8 */
	union {
		o2le64 i_rdev; /* 0xB8 device nodes */
		struct {
			o2le32 i_used; /* 0xB8 bitmap inodes */
			o2le32 i_total; /* 0xBC */
		} __attribute__((packed)) bitmap1;
		struct {
			o2le32 ij_flags; /* 0xB8 journal inodes */
			o2le32 ij_recovery_generation; /* 0xBC */
		} __attribute__((packed)) journal1;
	} id1;
	union {
		struct o2_super_block i_super; /* 0xC0 */
		struct o2_local_alloc i_lab; /* 0xC0 */
		struct o2_chain_list i_chain; /* 0xC0 */
		struct o2_extent_list i_list; /* 0xC0 */
		struct o2_truncate_log i_dealloc; /* 0xC0 */
		struct o2_inline_data i_data; /* 0xC0 */
		uint8_t i_symlink[0]; /* 0xC0 */
	} id2;
} __attribute__((packed));

struct o2_dir_entry {
	o2le64 inode; /* 0x00 */
	o2le16 rec_len; /* 0x08 */
	uint8_t name_len; /* 0x0A */
	uint8_t file_type; /* 0x0B */
	char name[O2_MAX_NAME_LEN]; /* 0x0C */
} __attribute__((packed));

#define O2_DIR_MEMBER_LEN 12
#define O2_DIR_REC_LEN(n) (((n) + O2_DIR_MEMBER_LEN + 3) & ~3u)

struct o2_dir_trailer {
	o2le64 db_compat_inode; /* 0x00 */
	o2le16 db_compat_rec_len; /* 0x08 */
	uint8_t db_compat_name_len; /* 0x0A */
	uint8_t db_reserved0; /* 0x0B */
	o2le16 db_reserved1; /* 0x0C */
	o2le16 db_free_rec_len; /* 0x0E */
	uint8_t db_signature[8]; /* 0x10 */
	o2le64 db_reserved2; /* 0x18 */
	o2le64 db_free_next; /* 0x20 */
	o2le64 db_blkno; /* 0x28 */
	o2le64 db_parent_dinode; /* 0x30 */
	struct o2_block_check db_check; /* 0x38 */
} __attribute__((packed));

struct o2_dx_entry {
	o2le32 dx_major_hash; /* 0x00 */
	o2le32 dx_minor_hash; /* 0x04 */
	o2le64 dx_dirent_blk; /* 0x08 */
} __attribute__((packed));

struct o2_dx_entry_list {
	o2le32 de_reserved; /* 0x00 */
	o2le16 de_count; /* 0x04 */
	o2le16 de_num_used; /* 0x06 */
	struct o2_dx_entry de_entries[]; /* 0x08 */
} __attribute__((packed));

struct o2_dx_root_block {
	uint8_t dr_signature[8]; /* 0x00 */
	struct o2_block_check dr_check; /* 0x08 */
	o2le16 dr_suballoc_slot; /* 0x10 */
	o2le16 dr_suballoc_bit; /* 0x12 */
	o2le32 dr_fs_generation; /* 0x14 */
	o2le64 dr_blkno; /* 0x18 */
	o2le64 dr_last_eb_blk; /* 0x20 */
	o2le32 dr_clusters; /* 0x28 */
	uint8_t dr_flags; /* 0x2C */
	uint8_t dr_reserved0; /* 0x2D */
	o2le16 dr_reserved1; /* 0x2E */
	o2le64 dr_dir_blkno; /* 0x30 */
	o2le32 dr_num_entries; /* 0x38 */
	o2le32 dr_reserved2; /* 0x3C */
	o2le64 dr_free_blk; /* 0x40 */
	o2le64 dr_suballoc_loc; /* 0x48 */
	o2le64 dr_reserved3[14]; /* 0x50 */
	union {
		struct o2_extent_list dr_list; /* 0xC0 */
		struct o2_dx_entry_list dr_entries; /* 0xC0 */
	};
} __attribute__((packed));

struct o2_dx_leaf {
	uint8_t dl_signature[8]; /* 0x00 */
	struct o2_block_check dl_check; /* 0x08 */
	o2le64 dl_blkno; /* 0x10 */
	o2le32 dl_fs_generation; /* 0x18 */
	o2le32 dl_reserved0; /* 0x1C */
	o2le64 dl_reserved1; /* 0x20 */
	struct o2_dx_entry_list dl_list; /* 0x28 */
} __attribute__((packed));

#define O2_MAX_BG_BITMAP_SIZE 256

struct o2_group_desc {
	uint8_t bg_signature[8]; /* 0x00 */
	o2le16 bg_size; /* 0x08 */
	o2le16 bg_bits; /* 0x0A */
	o2le16 bg_free_bits_count; /* 0x0C */
	o2le16 bg_chain; /* 0x0E */
	o2le32 bg_generation; /* 0x10 */
	o2le32 bg_reserved1; /* 0x14 (contig free bits in newer tools) */
	o2le64 bg_next_group; /* 0x18 */
	o2le64 bg_parent_dinode; /* 0x20 */
	o2le64 bg_blkno; /* 0x28 */
	struct o2_block_check bg_check; /* 0x30 */
	o2le64 bg_reserved2; /* 0x38 */
	union {
		uint8_t bg_bitmap[0]; /* 0x40 */
		struct {
			uint8_t bg_bitmap_filler[O2_MAX_BG_BITMAP_SIZE]; /* 0x40 */
			struct o2_extent_list bg_list; /* 0x140 */
		} __attribute__((packed));
	};
} __attribute__((packed));

struct o2_refcount_rec {
	o2le64 r_cpos; /* 0x00 */
	o2le32 r_clusters; /* 0x08 */
	o2le32 r_refcount; /* 0x0C */
} __attribute__((packed));

struct o2_refcount_list {
	o2le16 rl_count; /* 0x00 */
	o2le16 rl_used; /* 0x02 */
	o2le32 rl_reserved2; /* 0x04 */
	o2le64 rl_reserved1; /* 0x08 */
	struct o2_refcount_rec rl_recs[]; /* 0x10 */
} __attribute__((packed));

struct o2_refcount_block {
	uint8_t rf_signature[8]; /* 0x00 */
	o2le16 rf_suballoc_slot; /* 0x08 */
	o2le16 rf_suballoc_bit; /* 0x0A */
	o2le32 rf_fs_generation; /* 0x0C */
	o2le64 rf_blkno; /* 0x10 */
	o2le64 rf_parent; /* 0x18 */
	struct o2_block_check rf_check; /* 0x20 */
	o2le64 rf_last_eb_blk; /* 0x28 */
	o2le32 rf_count; /* 0x30 */
	o2le32 rf_flags; /* 0x34 */
	o2le32 rf_clusters; /* 0x38 */
	o2le32 rf_cpos; /* 0x3C */
	o2le32 rf_generation; /* 0x40 */
	o2le32 rf_reserved0; /* 0x44 */
	o2le64 rf_suballoc_loc; /* 0x48 */
	o2le64 rf_reserved1[6]; /* 0x50 */
	union {
		struct o2_refcount_list rf_records; /* 0x80 */
		struct o2_extent_list rf_list; /* 0x80 */
	};
} __attribute__((packed));

struct o2_xattr_entry {
	o2le32 xe_name_hash; /* 0x00 */
	o2le16 xe_name_offset; /* 0x04 */
	uint8_t xe_name_len; /* 0x06 */
	uint8_t xe_type; /* 0x07 */
	o2le64 xe_value_size; /* 0x08 */
} __attribute__((packed));

struct o2_xattr_header {
	o2le16 xh_count; /* 0x00 */
	o2le16 xh_free_start; /* 0x02 */
	o2le16 xh_name_value_len; /* 0x04 */
	o2le16 xh_num_buckets; /* 0x06 */
	struct o2_block_check xh_check; /* 0x08 */
	struct o2_xattr_entry xh_entries[]; /* 0x10 */
} __attribute__((packed));

struct o2_xattr_value_root {
	o2le32 xr_clusters; /* 0x00 */
	o2le32 xr_reserved0; /* 0x04 */
	o2le64 xr_last_eb_blk; /* 0x08 */
	struct o2_extent_list xr_list; /* 0x10 */
} __attribute__((packed));

struct o2_xattr_tree_root {
	o2le32 xt_clusters; /* 0x00 */
	o2le32 xt_reserved0; /* 0x04 */
	o2le64 xt_last_eb_blk; /* 0x08 */
	struct o2_extent_list xt_list; /* 0x10 */
} __attribute__((packed));

struct o2_xattr_block {
	uint8_t xb_signature[8]; /* 0x00 */
	o2le16 xb_suballoc_slot; /* 0x08 */
	o2le16 xb_suballoc_bit; /* 0x0A */
	o2le32 xb_fs_generation; /* 0x0C */
	o2le64 xb_blkno; /* 0x10 */
	struct o2_block_check xb_check; /* 0x18 */
	o2le16 xb_flags; /* 0x20 */
	o2le16 xb_reserved0; /* 0x22 */
	o2le32 xb_reserved1; /* 0x24 */
	o2le64 xb_suballoc_loc; /* 0x28 */
	union {
		struct o2_xattr_header xb_header; /* 0x30 */
		struct o2_xattr_tree_root xb_root; /* 0x30 */
	} xb_attrs;
} __attribute__((packed));

/* ---- POSIX ACLs: xattr types 2 and 3 with an empty name, these entries, no header ---- */

struct o2_acl_entry {
	o2le16 e_tag; /* 0x00 */
	o2le16 e_perm; /* 0x02 */
	o2le32 e_id; /* 0x04: the user or group; (u32)-1 where the tag names none */
} __attribute__((packed));

enum {
	O2_ACL_USER_OBJ = 0x01,
	O2_ACL_USER = 0x02,
	O2_ACL_GROUP_OBJ = 0x04,
	O2_ACL_GROUP = 0x08,
	O2_ACL_MASK = 0x10,
	O2_ACL_OTHER = 0x20,
};
#define O2_ACL_UNDEFINED_ID 0xffffffffu

/* ---- JBD2 (big-endian) ---- */

#define JBD2_MAGIC 0xC03B3998u
#define JBD2_DESCRIPTOR_BLOCK 1
#define JBD2_COMMIT_BLOCK 2
#define JBD2_SUPERBLOCK_V1 3
#define JBD2_SUPERBLOCK_V2 4
#define JBD2_REVOKE_BLOCK 5

#define JBD2_INCOMPAT_REVOKE 0x1
#define JBD2_INCOMPAT_64BIT 0x2
#define JBD2_INCOMPAT_ASYNC_COMMIT 0x4

#define JBD2_TAG_ESCAPE 1
#define JBD2_TAG_SAME_UUID 2
#define JBD2_TAG_DELETED 4
#define JBD2_TAG_LAST 8

struct jbd2_header {
	o2be32 h_magic; /* 0x00 */
	o2be32 h_blocktype; /* 0x04 */
	o2be32 h_sequence; /* 0x08 */
} __attribute__((packed));

struct jbd2_superblock {
	struct jbd2_header s_header; /* 0x00 */
	o2be32 s_blocksize; /* 0x0C */
	o2be32 s_maxlen; /* 0x10 */
	o2be32 s_first; /* 0x14 */
	o2be32 s_sequence; /* 0x18 */
	o2be32 s_start; /* 0x1C */
	o2be32 s_errno; /* 0x20 */
	o2be32 s_feature_compat; /* 0x24 */
	o2be32 s_feature_incompat; /* 0x28 */
	o2be32 s_feature_ro_compat; /* 0x2C */
	uint8_t s_uuid[16]; /* 0x30 */
	o2be32 s_nr_users; /* 0x40 */
	o2be32 s_dynsuper; /* 0x44 */
	o2be32 s_max_transaction; /* 0x48 */
	o2be32 s_max_trans_data; /* 0x4C */
	o2be32 s_padding[44]; /* 0x50 */
	uint8_t s_users[16 * 48]; /* 0x100 */
} __attribute__((packed));

struct jbd2_commit_header {
	o2be32 h_magic; /* 0x00 */
	o2be32 h_blocktype; /* 0x04 */
	o2be32 h_sequence; /* 0x08 */
	uint8_t h_chksum_type; /* 0x0C */
	uint8_t h_chksum_size; /* 0x0D */
	uint8_t h_padding[2]; /* 0x0E */
	o2be32 h_chksum[8]; /* 0x10 */
	o2be64 h_commit_sec; /* 0x30 */
	o2be32 h_commit_nsec; /* 0x38 */
} __attribute__((packed));

struct jbd2_block_tag {
	o2be32 t_blocknr; /* 0x00 */
	o2be32 t_flags; /* 0x04 */
	o2be32 t_blocknr_high; /* 0x08 (64BIT journals only) */
} __attribute__((packed));

struct jbd2_revoke_header {
	struct jbd2_header r_header; /* 0x00 */
	o2be32 r_count; /* 0x0C bytes used in this block */
} __attribute__((packed));

/* ---- sizes derived from the block size ---- */

static inline unsigned o2_extent_recs_per_inode(unsigned bs)
{
	return (bs - offsetof(struct o2_dinode, id2.i_list.recs)) / sizeof(struct o2_extent_rec);
}

static inline unsigned o2_extent_recs_per_eb(unsigned bs)
{
	return (bs - offsetof(struct o2_extent_block, h_list.recs)) / sizeof(struct o2_extent_rec);
}

static inline unsigned o2_chain_recs_per_inode(unsigned bs)
{
	return (bs - offsetof(struct o2_dinode, id2.i_chain.cl_recs)) / sizeof(struct o2_chain_rec);
}

static inline unsigned o2_truncate_recs_per_inode(unsigned bs)
{
	return (bs - offsetof(struct o2_dinode, id2.i_dealloc.tl_recs)) /
	       sizeof(struct o2_truncate_rec);
}

static inline unsigned o2_inline_max(unsigned bs)
{
	return bs - offsetof(struct o2_dinode, id2.i_data.id_data);
}

static inline unsigned o2_fast_symlink_max(unsigned bs)
{
	return bs - offsetof(struct o2_dinode, id2.i_symlink);
}

static inline unsigned o2_local_alloc_max(unsigned bs)
{
	return bs - offsetof(struct o2_dinode, id2.i_lab.la_bitmap);
}

static inline unsigned o2_dx_entries_per_leaf(unsigned bs)
{
	return (bs - offsetof(struct o2_dx_leaf, dl_list.de_entries)) / sizeof(struct o2_dx_entry);
}

static inline unsigned o2_dx_entries_per_root(unsigned bs)
{
	return (bs - offsetof(struct o2_dx_root_block, dr_entries.de_entries)) /
	       sizeof(struct o2_dx_entry);
}

static inline unsigned o2_extent_recs_per_dx_root(unsigned bs)
{
	return (bs - offsetof(struct o2_dx_root_block, dr_list.recs)) / sizeof(struct o2_extent_rec);
}

static inline unsigned o2_extent_recs_per_gd(unsigned bs)
{
	return (bs - offsetof(struct o2_group_desc, bg_list.recs)) / sizeof(struct o2_extent_rec);
}


/*
 * Quota files.  Every block of a quota file ends in O2_QBLK_RESERVED bytes
 * holding its block check.  Block 0 of each starts with a header (magic,
 * version) and the file's info.  A global file (aquota.user, aquota.group)
 * holds a radix tree of ids from block O2_QT_TREEOFF: O2_QT_DEPTH levels
 * of le32 block references, then leaf blocks of o2_global_dqblk entries
 * after a leaf header.  A local file (aquota.user:NNNN) holds chunks: a
 * chunk header (free count, bitmap) and the blocks of o2_local_dqblk
 * entries it maps.
 */
#define O2_QBLK_RESERVED 8u
#define O2_QT_TREEOFF 1u
#define O2_GLOBAL_QMAGIC(t) (0x0cf52470u + (t))
#define O2_LOCAL_QMAGIC(t) (0x0cf524c0u + (t))
#define O2_QUOTA_VERSION 0u
#define O2_OLQF_CLEAN 0x1u

struct o2_global_dqinfo {
	o2le32 dqi_bgrace;     /* 0x08 in block 0 */
	o2le32 dqi_igrace;
	o2le32 dqi_syncms;
	o2le32 dqi_blocks;
	o2le32 dqi_free_blk;   /* first block of the free list */
	o2le32 dqi_free_entry; /* first leaf with a free entry */
};

struct o2_global_dqblk {
	o2le32 dqb_id;
	o2le32 dqb_use_count;
	o2le64 dqb_ihardlimit;
	o2le64 dqb_isoftlimit;
	o2le64 dqb_curinodes;
	o2le64 dqb_bhardlimit;
	o2le64 dqb_bsoftlimit;
	o2le64 dqb_curspace;
	o2le64 dqb_btime;
	o2le64 dqb_itime;
	o2le64 dqb_pad1;
	o2le64 dqb_pad2;
};

struct o2_qt_leaf_header {
	o2le32 dqdh_next_free;
	o2le32 dqdh_prev_free;
	o2le16 dqdh_entries;
	o2le16 dqdh_pad1;
	o2le32 dqdh_pad2;
};

struct o2_local_dqinfo {
	o2le32 dqi_flags; /* 0x08 in block 0 */
	o2le32 dqi_chunks;
	o2le32 dqi_blocks;
};

struct o2_local_dqblk {
	o2le64 dqb_id;
	o2le64 dqb_spacemod;
	o2le64 dqb_inodemod;
};

#define O2_QINFO_OFF 8u

static inline unsigned o2_qt_refs_per_block(unsigned bs)
{
	return (bs - O2_QBLK_RESERVED) / 4;
}

/* Levels of references above the leaves: enough for every 32-bit id. */
static inline unsigned o2_qt_depth(unsigned bs)
{
	uint64_t epb = o2_qt_refs_per_block(bs), n = epb;
	unsigned d = 1;

	while (n < (1ull << 32)) {
		n *= epb;
		d++;
	}
	return d;
}

static inline unsigned o2_global_dq_per_block(unsigned bs)
{
	return (bs - O2_QBLK_RESERVED - (unsigned)sizeof(struct o2_qt_leaf_header)) /
	       (unsigned)sizeof(struct o2_global_dqblk);
}

static inline unsigned o2_local_dq_per_block(unsigned bs)
{
	return (bs - O2_QBLK_RESERVED) / (unsigned)sizeof(struct o2_local_dqblk);
}

/* Entry blocks one chunk header maps (its bitmap: the rest of its block). */
static inline unsigned o2_local_chunk_blocks(unsigned bs)
{
	return ((bs - 4 - O2_QBLK_RESERVED) * 8) / o2_local_dq_per_block(bs);
}

#endif
