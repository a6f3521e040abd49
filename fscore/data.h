/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Writing file data to the device (data.c). */
#ifndef O2_DATA_H
#define O2_DATA_H

#include <stddef.h>
#include <stdint.h>

struct o2_fs;

/* What a write puts into the file: len bytes of src at file offset off. */
struct o2_fill {
	uint64_t off;
	size_t len;
	const uint8_t *src;
};

/*
 * Write len bytes of file data at byte offset dev_off on the device,
 * reading and rewriting the edge blocks when they are partial.  A failed
 * write aborts the volume (o2_fs_abort) as file data does.
 */
int o2_data_write(struct o2_fs *fs, uint64_t dev_off, const uint8_t *buf, size_t len);
/* Write whole blocks of buf at dev_off (a failure aborts the volume). */
int o2_data_dev_write(struct o2_fs *fs, const void *buf, size_t len, uint64_t dev_off);
/*
 * New clusters cpos..cpos+n of a file, at blkno: f's bytes where it
 * covers them, zeros elsewhere (f may be NULL: all zeros).
 */
int o2_fill_clusters(struct o2_fs *fs, uint64_t blkno, uint32_t cpos, uint32_t n,
		     const struct o2_fill *f);
/* f's bytes that fall in the already written clusters cpos..cpos+n at blkno. */
int o2_fill_existing(struct o2_fs *fs, uint64_t blkno, uint32_t cpos, uint32_t n,
		     const struct o2_fill *f);
/*
 * Write len bytes of src at the start of clusters new clusters from blkno,
 * zeros after them: data written before the transaction mapping them ends
 * (a failed write aborts the volume, as file data does).
 */
int o2_data_fill(struct o2_fs *fs, uint64_t blkno, uint32_t clusters, const void *src, size_t len);

#endif
