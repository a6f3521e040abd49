/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Inodes, write side (inode_write.c): the cached inode block and edits to it. */
#ifndef O2_INODE_WRITE_H
#define O2_INODE_WRITE_H

#include <stdbool.h>
#include <stdint.h>

#include "extent_write.h"
#include "internal.h"

/* The cached block of an in-use inode (validated); -ENOENT if not in use. */
int o2_inode_buf(struct o2_fs *fs, uint64_t ino, struct o2_buf **ret);
struct o2_dinode *o2_buf_dinode(struct o2_buf *b);
void o2_inode_owner(struct o2_buf *ib, struct o2_tree_owner *o);
/* A fresh generation number (inodes, refcount trees). */
uint32_t o2_new_generation(struct o2_fs *fs);
/* Set mtime and/or ctime to now (the caller has logged the block). */
void o2_touch(struct o2_fs *fs, struct o2_dinode *di, bool mtime, bool ctime);
/* Bytes the inline xattr area takes at the end of the inode block (0: none). */
unsigned o2_inode_xattr_room(const struct o2_dinode *di);
/* Turn id2 into an empty extent list (inline data gone), keeping the inline xattr area. */
void o2_inode_to_extent_list(struct o2_fs *fs, struct o2_dinode *di);
/* The directory-entry file type of an inode of this mode. */
uint8_t o2_mode_ftype(uint16_t mode);
/* The link count, both halves of it. */
uint32_t o2_links_of(const struct o2_dinode *di);
void o2_set_links(struct o2_dinode *di, uint32_t n);

#endif
