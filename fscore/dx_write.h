/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Indexed directories, write side (fscore private).  See dx_write.c. */
#ifndef O2_DX_WRITE_H
#define O2_DX_WRITE_H

#include "internal.h"

struct o2_trans;

/* Give a block directory an index of all its entries (and its free list). */
int o2_dx_create(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib);
/* Index a name just placed in directory block dirent_blk. */
struct o2_resv;
/*
 * Add to want what o2_dx_insert of name (or o2_dx_create, for a directory
 * with no index yet) would allocate: nothing while the name's leaf has
 * room, else a rebuild's leaves and blocks.  Reads only.
 */
int o2_dx_insert_need(struct o2_fs *fs, struct o2_buf *dib, const char *name, size_t len,
		      struct o2_resv *want);
int o2_dx_insert(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib, const char *name,
		 size_t len, uint64_t dirent_blk);
/* Drop a name removed from directory block dirent_blk. */
int o2_dx_remove(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib, const char *name,
		 size_t len, uint64_t dirent_blk);
/* A directory block changed: update its trailer's hole and the free list. */
int o2_dx_block_changed(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib,
			struct o2_buf *b);
/* Free the index of a directory being deleted. */
int o2_dx_destroy(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib);

#endif
