/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * File data on the device: writing bytes at a device offset and filling
 * new clusters with data and zeros.  Both file writes (file.c) and xattr
 * values kept in clusters (xattr_write.c) put data here, so it sits below
 * both rather than inside file.c, which calls xattr_write.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "error.h"
#include "internal.h"

/* Write bytes of file data at a byte offset on the device (read-modify-write of edge blocks). */
int o2_data_write(struct o2_fs *fs, uint64_t dev_off, const uint8_t *buf, size_t len)
{
	uint32_t bs = fs->bs;
	uint64_t first = dev_off & ~(uint64_t)(bs - 1);
	uint64_t end = (dev_off + len + bs - 1) & ~(uint64_t)(bs - 1);
	size_t span = (size_t)(end - first);
	uint8_t *tmp;
	int r;

	if ((dev_off % bs) == 0 && (len % bs) == 0) {
		r = o2_blockdev_write_data(fs->dev, buf, len, dev_off, fs->io_owner);
		return r < 0 ? o2_fs_abort(fs, r, "writing file data") : 0;
	}
	tmp = o2_malloc(span);
	if (!tmp)
		return -ENOMEM;
	r = o2_blockdev_read_data(fs->dev, tmp, bs, first, fs->io_owner);
	if (r == 0 && span > bs)
		r = o2_blockdev_read_data(fs->dev, tmp + span - bs, bs, end - bs, fs->io_owner);
	if (r == 0) {
		memcpy(tmp + (dev_off - first), buf, len);
		r = o2_blockdev_write_data(fs->dev, tmp, span, first, fs->io_owner);
		if (r < 0)
			r = o2_fs_abort(fs, r, "writing file data");
	}
	free(tmp);
	return r;
}

static const uint8_t zeros[256 << 10];

int o2_data_dev_write(struct o2_fs *fs, const void *buf, size_t len, uint64_t dev_off)
{
	int r = o2_blockdev_write_data(fs->dev, buf, len, dev_off, fs->io_owner);

	return r < 0 ? o2_fs_abort(fs, r, "writing file data") : 0;
}

/*
 * Write whole new clusters: blkno holds file clusters cpos..cpos+n, which
 * get the fill's bytes where it covers them and zeros elsewhere - each
 * block written once, data straight from the caller's buffer where it
 * covers whole blocks.
 */
int o2_fill_clusters(struct o2_fs *fs, uint64_t blkno, uint32_t cpos, uint32_t n,
		     const struct o2_fill *f)
{
	uint64_t cs = (uint64_t)cpos << fs->cbits, ce = cs + ((uint64_t)n << fs->cbits);
	uint64_t fs_end = f ? f->off + f->len : 0, bs = fs->bs, pos = cs;
	uint8_t *bounce = NULL;
	int r = 0;

	while (pos < ce && r == 0) {
		uint64_t dev = (blkno << fs->bits) + (pos - cs);
		uint64_t ds = f && f->off > pos ? f->off : pos, de = fs_end < ce ? fs_end : ce;

		if (!f || ds >= de) { /* no data from here on */
			uint64_t k = ce - pos < sizeof(zeros) ? ce - pos : sizeof(zeros);

			r = o2_data_dev_write(fs, zeros, (size_t)k, dev);
			pos += k;
		} else if ((ds & ~(bs - 1)) > pos) { /* zeros up to the data's first block */
			uint64_t k = (ds & ~(bs - 1)) - pos;

			if (k > sizeof(zeros))
				k = sizeof(zeros);
			r = o2_data_dev_write(fs, zeros, (size_t)k, dev);
			pos += k;
		} else if (ds == pos && de - pos >= bs) { /* whole blocks of data */
			uint64_t k = (de - pos) & ~(bs - 1);

			r = o2_data_dev_write(fs, f->src + (pos - f->off), (size_t)k, dev);
			pos += k;
		} else { /* a block part data, part zeros */
			if (!bounce && !(bounce = o2_malloc(bs)))
				return -ENOMEM;
			uint64_t e = de < pos + bs ? de : pos + bs;

			memset(bounce, 0, bs);
			memcpy(bounce + (ds - pos), f->src + (ds - f->off), (size_t)(e - ds));
			r = o2_data_dev_write(fs, bounce, (size_t)bs, dev);
			pos += bs;
		}
	}
	free(bounce);
	return r;
}

/* The fill's bytes that fall in clusters cpos..cpos+n, already written, at blkno. */
int o2_fill_existing(struct o2_fs *fs, uint64_t blkno, uint32_t cpos, uint32_t n,
		     const struct o2_fill *f)
{
	uint64_t cs = (uint64_t)cpos << fs->cbits, ce = cs + ((uint64_t)n << fs->cbits);
	uint64_t ds = f->off > cs ? f->off : cs, de = f->off + f->len < ce ? f->off + f->len : ce;

	if (ds >= de)
		return 0;
	return o2_data_write(fs, (blkno << fs->bits) + (ds - cs), f->src + (ds - f->off),
			  (size_t)(de - ds));
}

int o2_data_fill(struct o2_fs *fs, uint64_t blkno, uint32_t clusters, const void *src, size_t len)
{
	struct o2_fill f = { 0, len, src };

	return o2_fill_clusters(fs, blkno, 0, clusters, &f);
}
