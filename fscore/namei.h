/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The namespace, write side (namei.c): what reflink.c and the open/close
 * code build on - new inodes, orphans, open references.
 */
#ifndef O2_NAMEI_H
#define O2_NAMEI_H

#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "extent_write.h"
#include "internal.h"

struct o2_buf;
struct o2_trans;

/* Credits of one operation on names: two directories, an inode, allocations. */
#define O2_NAMEI_CREDITS (O2_TREE_CREDITS + 2 * O2_ALLOC_CREDITS + 16)

/* 0, or why name cannot be a new entry (-ENOENT, -ENAMETOOLONG, -EINVAL, -EEXIST). */
int o2_check_name(const char *name, size_t len);
/* Inside t: a new in-use inode of mode from the inode allocator, logged in *ret. */
int o2_new_inode(struct o2_trans *t, struct o2_fs *fs, uint16_t mode, uint32_t uid,
		 uint32_t gid, uint64_t rdev, struct o2_buf **ret);
/* The name ino has in the orphan directory (16 hex digits and a NUL, 17 bytes). */
struct o2_resv;
/*
 * Add to want what adding name to directory dir takes (o2_dir_add_need);
 * -EEXIST if the name is there.
 */
int o2_name_need(struct o2_fs *fs, uint64_t dir, const char *name, size_t len,
		 struct o2_resv *want);
/* Free orphan ino and its entry in the orphan directory, a transaction at a time. */
int o2_reap_orphan(struct o2_fs *fs, uint64_t ino);
/* The same, its entry in orphan directory orphan_dir (another slot's). */
int o2_reap_orphan_from(struct o2_fs *fs, uint64_t ino, uint64_t orphan_dir);
/*
 * Shared volumes (o2_fs_orphans, o2_fs_free_orphan): the orphans of this
 * slot and those of other slots whose last reference here went
 * (o2_inode_close_ref noted them), none open here; and freeing one.
 */
int o2_orphans_list(struct o2_fs *fs, uint64_t **ret, size_t *n);
int o2_orphan_free(struct o2_fs *fs, uint64_t ino, uint32_t gen);

/* Open references and orphans (called by super.c on open and close). */
struct o2_openref {
	struct o2_openref *next;
	uint64_t ino;
	unsigned refs;
};
void o2_openrefs_free(struct o2_fs *fs);
/* Drop every open reference, freeing the orphans they kept. */
int o2_openrefs_close_all(struct o2_fs *fs);
/* Free every orphan this slot's orphan directory holds. */
int o2_orphans_process(struct o2_fs *fs);


#endif
