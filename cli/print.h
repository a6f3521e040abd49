/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Helpers shared by the human and JSON output of ocfs2ctl: names of flag
 * bits, mode strings, times, UUIDs, base64.
 */
#ifndef OCFS2CTL_PRINT_H
#define OCFS2CTL_PRINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "json.h"

/* One named bit of a flag word; tables end with {0, NULL}. */
struct flag_name {
	uint32_t bit;
	const char *name;
};

extern const struct flag_name print_inode_flags[];	/* i_flags, debugfs spelling */
extern const struct flag_name print_dyn_features[];	/* i_dyn_features */
extern const struct flag_name print_journal_flags[];	/* ij_flags */
extern const struct flag_name print_extent_flags[];	/* e_flags of leaf records */

/*
 * The name of bit in a table, or NULL.  A bit without a name is written as
 * "0x%x" by the printers below.
 */
const char *print_flag_name(const struct flag_name *table, uint32_t bit);

/* " Valid System Chain": each name set in value preceded by a space. */
void print_flags_human(FILE *out, const struct flag_name *table, uint32_t value);
/* A JSON array of the names of the bits set in value. */
void print_flags_json(struct json_writer *w, const char *key, const struct flag_name *table,
		      uint32_t value);

/* The superblock feature bits of one class, by o2_feature_name. */
void print_features_human(FILE *out, int cls, uint32_t value);
void print_features_json(struct json_writer *w, const char *key, int cls, uint32_t value);

/* 32 uppercase hex digits and a NUL into buf[33]. */
void print_uuid(const uint8_t uuid[16], char buf[33]);

/* "drwxr-xr-x" (debugfs spelling: 'f' for FIFOs) into buf[11]. */
void print_mode_string(uint16_t mode, char buf[11]);

/* "regular", "directory", "char", "block", "fifo", "symlink", "socket", "unknown". */
const char *print_mode_type_name(uint16_t mode);
/* The same names for a directory entry's O2_DT_* type. */
const char *print_dirent_type_name(uint8_t type);

/* " 3-Dec-2026 06:09" as debugfs's ls -l prints mtime (local time). */
void print_ls_time(int64_t sec, char *buf, size_t len);
/* "Thu Dec  3 06:09:28 2026" (local time); "?" when out of range. */
void print_ctime(int64_t sec, char *buf, size_t len);

/* Base64 (RFC 4648, padded) of len bytes into out, which holds 4*ceil(len/3)+1. */
size_t print_base64(const uint8_t *in, size_t len, char *out);

#endif
