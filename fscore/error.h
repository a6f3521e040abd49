/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Error reporting (error.c), the bottom of fscore: every module records
 * why a call failed here, and nothing here calls another module.
 */
#ifndef O2_ERROR_H
#define O2_ERROR_H

#include <stddef.h>
#include <stdint.h>

struct o2_fs;

/*
 * Record "block BLKNO: <message>" on the handle and return -EUCLEAN: the
 * contract for every corruption fscore finds is that the message names
 * the block where it found it.
 */
int o2_corrupt(struct o2_fs *fs, uint64_t blkno, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Record a message that names no block; returns err (a -errno). */
int o2_fail(struct o2_fs *fs, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/*
 * Format a message into a caller's buffer (errbuf may be NULL or errlen 0:
 * nothing is written) and return err: for calls that have no handle yet
 * (open, mkfs) and so cannot use o2_fail.
 */
int o2_errbuf_set(char *errbuf, size_t errlen, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/*
 * Turn the volume read-only after an I/O error, recording why (the first
 * reason stays); returns err.
 */
int o2_fs_abort(struct o2_fs *fs, int err, const char *what);

#endif
