/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Metadata block I/O (meta.c): reading and checking blocks, and writing
 * one home directly.  Above the cache and error reporting, below every
 * module that reads or writes the format.
 */
#ifndef O2_META_H
#define O2_META_H

#include <stdint.h>

#include "cache.h"

struct o2_buf;
struct o2_fs;

/* Read count blocks at blkno; a range outside the volume is -EUCLEAN. */
int o2_read_blocks(struct o2_fs *fs, uint64_t blkno, unsigned count, void *buf);
/* The same for file data (o2_blockdev_read_data: a cache may answer it). */
int o2_read_data_blocks(struct o2_fs *fs, uint64_t blkno, unsigned count, void *buf);

/*
 * Copy one metadata block out of the cache (reading it if needed) and, on
 * metaecc volumes, verify (and where one bit is wrong, correct) its block
 * check.  O2_META_PLAIN (cache.h) reads a block that carries no check.
 */
int o2_read_meta(struct o2_fs *fs, uint64_t blkno, enum o2_meta_kind kind, void *buf);

/*
 * The head a self-describing metadata block carries: its signature, its
 * own block number and the volume's generation (what names the kind in
 * the message: "extent block", "xattr block", ...).  0 or -EUCLEAN.
 */
int o2_check_meta_head(struct o2_fs *fs, uint64_t blkno, const char *what, const uint8_t *sig_field,
		       const char *sig, uint64_t rec_blkno, uint32_t rec_generation);

/* Write one block home (used by the journal and by direct writes such as
 * the journal inode's flags).  Computes the block check first on metaecc
 * volumes when kind carries one. */
int o2_write_meta_direct(struct o2_fs *fs, struct o2_buf *b);

#endif
