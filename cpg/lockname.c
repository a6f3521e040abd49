// SPDX-License-Identifier: GPL-2.0-or-later
/* OCFS2 lock names (see lockname.h). */
#include "lockname.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* v's n low hex digits, lowercase, at s (most significant first). */
static void put_hex(char *s, uint64_t v, unsigned n)
{
	static const char digits[] = "0123456789abcdef";

	while (n--) {
		s[n] = digits[v & 0xf];
		v >>= 4;
	}
}

/* Every operation names several locks: no snprintf for each. */
size_t o2_lockname(char type, uint64_t blkno, uint32_t generation, char *buf)
{
	buf[0] = type;
	memset(buf + 1, '0', 6);
	put_hex(buf + 7, blkno, 16);
	put_hex(buf + 23, generation, 8);
	buf[O2_LOCKNAME_LEN] = '\0';
	return O2_LOCKNAME_LEN;
}

void o2_lockspace_name(const uint8_t uuid[16], char buf[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(buf + 2 * i, 3, "%02X", uuid[i]);
}

/* The value of n hex digits at s, or -1 if one is not a lowercase hex digit. */
static int64_t hex_field(const char *s, unsigned n)
{
	int64_t v = 0;

	for (unsigned i = 0; i < n; i++) {
		char ch = s[i];
		int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;

		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

int o2_lockname_parse(const void *name, size_t len, char *type, uint64_t *blkno,
		      uint32_t *generation)
{
	const char *s = name;
	int64_t hi, lo, gen;

	if (len != O2_LOCKNAME_LEN || memcmp(s + 1, "000000", 6) != 0)
		return -EINVAL;
	/* 16 digits do not fit a signed 64-bit value: two halves */
	hi = hex_field(s + 7, 8);
	lo = hex_field(s + 15, 8);
	gen = hex_field(s + 23, 8);
	if (hi < 0 || lo < 0 || gen < 0)
		return -EINVAL;
	*type = s[0];
	*blkno = (uint64_t)hi << 32 | (uint64_t)lo;
	*generation = (uint32_t)gen;
	return 0;
}
