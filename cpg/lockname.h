/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * OCFS2's cluster lock names, spelled as kernel OCFS2 spells them so that
 * `debugfs.ocfs2 decode` reads ours: a type letter, six '0's, the block
 * number in 16 hex digits and a generation in 8 (31 bytes, no NUL sent).
 * The lockspace (our CPG group) is the volume UUID in 32 uppercase hex
 * digits.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define O2_LOCKNAME_LEN 31

/* lock types (the first letter) */
#define O2_LOCK_SUPER 'S'  /* the superblock: blkno 2, generation 0 */
#define O2_LOCK_META 'M'   /* an inode's metadata */
#define O2_LOCK_RW 'W'     /* an inode's data, for writes */
#define O2_LOCK_OPEN 'O'   /* an inode is open somewhere */
#define O2_LOCK_RENAME 'R' /* cross-directory renames: blkno 0, generation 0 */
#define O2_LOCK_ORPHAN_SCAN 'P'
#define O2_LOCK_REFCOUNT 'T'

/*
 * Write the name of lock type for (blkno, generation) into buf, which
 * holds at least O2_LOCKNAME_LEN + 1 bytes (NUL-terminated for logs);
 * returns O2_LOCKNAME_LEN, the length to send.
 */
size_t o2_lockname(char type, uint64_t blkno, uint32_t generation, char *buf);

/*
 * Read a name o2_lockname wrote (len bytes, no NUL needed): 0, or -EINVAL
 * if it is not one.
 */
int o2_lockname_parse(const void *name, size_t len, char *type, uint64_t *blkno,
		      uint32_t *generation);

/* The lockspace name of a volume: 32 uppercase hex digits of uuid, NUL-terminated. */
void o2_lockspace_name(const uint8_t uuid[16], char buf[33]);
