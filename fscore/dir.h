/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Directories (fscore private): the read side (dir.c) and the entry write
 * side (dir_write.c), which checks entries with the read side's scanner.
 */
#ifndef O2_DIR_H
#define O2_DIR_H

#include <stdbool.h>
#include <stdint.h>

#include "internal.h"

struct o2_buf;
struct o2_trans;

/* ---- dir.c: reading directories and the dx index ---- */

/* Whether this directory's blocks carry trailers (metaecc or indexed). */
bool o2_dir_has_trailer(const struct o2_fs *fs, const struct o2_inode *dir);

/* Called for each live entry; non-zero stops the scan and is returned. */
typedef int (*o2_dir_entry_fn)(const struct o2_dir_entry *de, uint64_t blk, void *arg);
/*
 * The one check of directory entries, for readers and writers alike: the
 * entries of one directory block (or the inline area, size bytes at data)
 * must each fit, be 4-aligned, hold their name, not run past the end, and
 * a live one must have a name, a known file type and an inode inside the
 * volume.  -EUCLEAN naming block blk at the first that does not; else fn
 * is called for every live entry in order.
 */
int o2_dir_scan_entries(struct o2_fs *fs, uint64_t blk, const uint8_t *data, unsigned size,
			o2_dir_entry_fn fn, void *arg);

/* The dx index: read and validate its root and leaves. */
int o2_dx_read_root(struct o2_fs *fs, struct o2_inode *dir, uint8_t *buf);
int o2_dx_read_leaf(struct o2_fs *fs, uint64_t blk, uint8_t *buf);
/* Block of the dx_leaf that holds a hash, per the format's placement rule. */
int o2_dx_leaf_for_hash(struct o2_fs *fs, uint64_t dx_root, const uint8_t *root_buf,
			uint32_t major, uint32_t minor, uint64_t *ret_blk);

/* ---- dir_write.c: changing directory entries ---- */

/* Where an entry was found: what it names, and where it sits. */
struct o2_dir_slot {
	uint64_t ino;
	uint8_t type;
	uint64_t blk; /* 0: inline */
	unsigned off;
};

/*
 * -ENOTDIR unless dib (the directory's cached inode block) is a directory,
 * -EUCLEAN if it is indexed on a volume without indexed-dirs.
 */
int o2_dir_check_changeable(struct o2_fs *fs, struct o2_buf *dib);
struct o2_resv;
/*
 * Add to want what o2_dir_add of name would allocate: nothing while a
 * block (or the inline area) has room, else a directory block, the extent
 * blocks mapping it and the index's growth.  Reads only.
 */
int o2_dir_add_need(struct o2_fs *fs, struct o2_buf *dib, const char *name, size_t len,
		    struct o2_resv *want);
/*
 * Inside t: add the entry name -> ino (file type type) to directory dib,
 * growing it as needed (out of the inode, by a block, into its index).
 * A block it looks at must pass o2_dir_scan_entries (-EUCLEAN otherwise).
 */
int o2_dir_add(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib, const char *name,
	       size_t len, uint64_t ino, uint8_t type);
/*
 * Find name in directory dib (through the index when it has one):
 * -ENOENT if absent, -EUCLEAN if a block searched fails o2_dir_scan_entries.
 */
int o2_dir_find(struct o2_fs *fs, struct o2_buf *dib, const char *name, size_t len,
		struct o2_dir_slot *ret);
/* Inside t: remove the entry o2_dir_find found at f (and from the index). */
int o2_dir_remove(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib, const char *name,
		  size_t len, const struct o2_dir_slot *f);
/* Inside t: point the entry o2_dir_find found at f to another inode. */
int o2_dir_retarget(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *dib,
		    const struct o2_dir_slot *f, uint64_t ino, uint8_t type);
/* Inside t: give the new directory in ib its "." and ".." (and its index). */
int o2_dir_init(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, uint64_t parent);
/* The name of inode ino's entry in an orphan directory (16 hex digits; buf: 17 bytes). */
void o2_orphan_name(uint64_t ino, char *buf);

#endif
