/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Output helpers for ocfs2ctl; see print.h. */

#include "print.h"

#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "o2fs/o2fs.h"

const struct flag_name print_inode_flags[] = {
	{ O2_INODE_VALID, "Valid" },
	{ 0x0002, "Unused2" },
	{ O2_INODE_ORPHANED, "Orphaned" },
	{ 0x0008, "Unused3" },
	{ O2_INODE_SYSTEM, "System" },
	{ O2_INODE_SUPER, "Superblock" },
	{ O2_INODE_LOCAL_ALLOC, "Localalloc" },
	{ O2_INODE_BITMAP, "Allocbitmap" },
	{ O2_INODE_JOURNAL, "Journal" },
	{ O2_INODE_HEARTBEAT, "Heartbeat" },
	{ O2_INODE_CHAIN, "Chain" },
	{ O2_INODE_DEALLOC, "Dealloc" },
	{ O2_INODE_QUOTA, "Quota" },
	{ O2_INODE_DIO_ORPHANED, "DioOrphaned" },
	{ 0, NULL },
};

const struct flag_name print_dyn_features[] = {
	{ O2_INODE_DYN_INLINE_DATA, "InlineData" },
	{ O2_INODE_DYN_HAS_XATTR, "HasXattr" },
	{ O2_INODE_DYN_INLINE_XATTR, "InlineXattr" },
	{ O2_INODE_DYN_INDEXED_DIR, "IndexedDir" },
	{ O2_INODE_DYN_HAS_REFCOUNT, "Refcounted" },
	{ 0, NULL },
};

const struct flag_name print_journal_flags[] = {
	{ 0x1, "Dirty" },
	{ 0, NULL },
};

const struct flag_name print_extent_flags[] = {
	{ O2_EXTENT_UNWRITTEN, "Unwritten" },
	{ O2_EXTENT_REFCOUNTED, "Refcounted" },
	{ 0, NULL },
};

const char *print_flag_name(const struct flag_name *table, uint32_t bit)
{
	for (; table->name; table++)
		if (table->bit == bit)
			return table->name;
	return NULL;
}

void print_flags_human(FILE *out, const struct flag_name *table, uint32_t value)
{
	for (unsigned i = 0; i < 32; i++) {
		uint32_t bit = UINT32_C(1) << i;
		const char *name;

		if (!(value & bit))
			continue;
		name = print_flag_name(table, bit);
		fputc(' ', out);
		if (name)
			fputs(name, out);
		else
			fprintf(out, "0x%x", bit);
	}
}

void print_flags_json(struct json_writer *w, const char *key, const struct flag_name *table,
		      uint32_t value)
{
	json_array_begin(w, key);
	for (unsigned i = 0; i < 32; i++) {
		uint32_t bit = UINT32_C(1) << i;
		const char *name;
		char hex[16];

		if (!(value & bit))
			continue;
		name = print_flag_name(table, bit);
		if (!name) {
			snprintf(hex, sizeof(hex), "0x%x", bit);
			name = hex;
		}
		json_string(w, NULL, name);
	}
	json_array_end(w);
}

void print_features_human(FILE *out, int cls, uint32_t value)
{
	for (unsigned i = 0; i < 32; i++) {
		uint32_t bit = UINT32_C(1) << i;
		const char *name;

		if (!(value & bit))
			continue;
		name = o2_feature_name((enum o2_feature_class)cls, bit);
		fputc(' ', out);
		if (name)
			fputs(name, out);
		else
			fprintf(out, "0x%x", bit);
	}
}

void print_features_json(struct json_writer *w, const char *key, int cls, uint32_t value)
{
	json_array_begin(w, key);
	for (unsigned i = 0; i < 32; i++) {
		uint32_t bit = UINT32_C(1) << i;
		const char *name;
		char hex[16];

		if (!(value & bit))
			continue;
		name = o2_feature_name((enum o2_feature_class)cls, bit);
		if (!name) {
			snprintf(hex, sizeof(hex), "0x%x", bit);
			name = hex;
		}
		json_string(w, NULL, name);
	}
	json_array_end(w);
}

void print_uuid(const uint8_t uuid[16], char buf[33])
{
	static const char hex[] = "0123456789ABCDEF";

	for (unsigned i = 0; i < 16; i++) {
		buf[2 * i] = hex[uuid[i] >> 4];
		buf[2 * i + 1] = hex[uuid[i] & 0xF];
	}
	buf[32] = '\0';
}

void print_mode_string(uint16_t mode, char buf[11])
{
	switch (mode & S_IFMT) {
	case S_IFDIR:
		buf[0] = 'd';
		break;
	case S_IFLNK:
		buf[0] = 'l';
		break;
	case S_IFCHR:
		buf[0] = 'c';
		break;
	case S_IFBLK:
		buf[0] = 'b';
		break;
	case S_IFIFO:
		buf[0] = 'f';
		break;
	case S_IFSOCK:
		buf[0] = 's';
		break;
	default:
		buf[0] = '-';
		break;
	}
	buf[1] = (mode & S_IRUSR) ? 'r' : '-';
	buf[2] = (mode & S_IWUSR) ? 'w' : '-';
	if (mode & S_ISUID)
		buf[3] = (mode & S_IXUSR) ? 's' : 'S';
	else
		buf[3] = (mode & S_IXUSR) ? 'x' : '-';
	buf[4] = (mode & S_IRGRP) ? 'r' : '-';
	buf[5] = (mode & S_IWGRP) ? 'w' : '-';
	if (mode & S_ISGID)
		buf[6] = (mode & S_IXGRP) ? 's' : 'S';
	else
		buf[6] = (mode & S_IXGRP) ? 'x' : '-';
	buf[7] = (mode & S_IROTH) ? 'r' : '-';
	buf[8] = (mode & S_IWOTH) ? 'w' : '-';
	if (mode & S_ISVTX)
		buf[9] = (mode & S_IXOTH) ? 't' : 'T';
	else
		buf[9] = (mode & S_IXOTH) ? 'x' : '-';
	buf[10] = '\0';
}

const char *print_mode_type_name(uint16_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "regular";
	case S_IFDIR:
		return "directory";
	case S_IFCHR:
		return "char";
	case S_IFBLK:
		return "block";
	case S_IFIFO:
		return "fifo";
	case S_IFLNK:
		return "symlink";
	case S_IFSOCK:
		return "socket";
	default:
		return "unknown";
	}
}

const char *print_dirent_type_name(uint8_t type)
{
	switch (type) {
	case O2_DT_REG:
		return "regular";
	case O2_DT_DIR:
		return "directory";
	case O2_DT_CHR:
		return "char";
	case O2_DT_BLK:
		return "block";
	case O2_DT_FIFO:
		return "fifo";
	case O2_DT_SOCK:
		return "socket";
	case O2_DT_LNK:
		return "symlink";
	default:
		return "unknown";
	}
}

/* localtime_r of a 64-bit time; false when it does not fit. */
static bool print_localtime(int64_t sec, struct tm *tm)
{
	time_t t = (time_t)sec;

	if ((int64_t)t != sec)
		return false;
	return localtime_r(&t, tm) != NULL;
}

void print_ls_time(int64_t sec, char *buf, size_t len)
{
	static const char *const months[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	struct tm tm;

	if (!print_localtime(sec, &tm) || tm.tm_mon < 0 || tm.tm_mon > 11) {
		snprintf(buf, len, "%16s", "?");
		return;
	}
	snprintf(buf, len, "%2d-%s-%d %02d:%02d", tm.tm_mday, months[tm.tm_mon],
		 tm.tm_year + 1900, tm.tm_hour, tm.tm_min);
}

void print_ctime(int64_t sec, char *buf, size_t len)
{
	struct tm tm;

	if (!print_localtime(sec, &tm) || strftime(buf, len, "%a %b %e %H:%M:%S %Y", &tm) == 0)
		snprintf(buf, len, "?");
}

size_t print_base64(const uint8_t *in, size_t len, char *out)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;
	size_t i;

	for (i = 0; i + 3 <= len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];

		out[o++] = alphabet[(v >> 18) & 63];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = alphabet[(v >> 6) & 63];
		out[o++] = alphabet[v & 63];
	}
	if (len - i == 1) {
		uint32_t v = (uint32_t)in[i] << 16;

		out[o++] = alphabet[(v >> 18) & 63];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = '=';
		out[o++] = '=';
	} else if (len - i == 2) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;

		out[o++] = alphabet[(v >> 18) & 63];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = alphabet[(v >> 6) & 63];
		out[o++] = '=';
	}
	out[o] = '\0';
	return o;
}
