/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The name hash of indexed directories: the ext3 "TEA" hash.  The name is
 * cut into 16-byte pieces; each piece, packed big-end-first into four 32-bit
 * words padded with a value made from the length, runs 16 TEA rounds over a
 * state seeded from the superblock.  major = state[0], minor = state[1].
 * "." and ".." hash to 0/0.  Name bytes are taken as signed chars, as
 * ocfs2-tools on x86 takes them (fsck.ocfs2 is the judge).
 */
#include "internal.h"

#define TEA_DELTA 0x9E3779B9u

static void tea_rounds(uint32_t state[4], const uint32_t in[4])
{
	uint32_t sum = 0, b0 = state[0], b1 = state[1];

	for (int n = 0; n < 16; n++) {
		sum += TEA_DELTA;
		b0 += ((b1 << 4) + in[0]) ^ (b1 + sum) ^ ((b1 >> 5) + in[1]);
		b1 += ((b0 << 4) + in[2]) ^ (b0 + sum) ^ ((b0 >> 5) + in[3]);
	}
	state[0] += b0;
	state[1] += b1;
}

/* Pack up to 16 bytes of the remaining name (remaining = len) into 4 words. */
static void pack_piece(const signed char *p, int remaining, uint32_t out[4])
{
	uint32_t pad = (uint32_t)remaining | ((uint32_t)remaining << 8);
	uint32_t val = pad;
	int n = remaining < 16 ? remaining : 16, w = 0;

	pad |= pad << 16;
	val = pad;
	for (int i = 0; i < n; i++) {
		if (i % 4 == 0)
			val = pad;
		val = (uint32_t)(int32_t)p[i] + (val << 8);
		if (i % 4 == 3) {
			out[w++] = val;
			val = pad;
		}
	}
	if (w < 4)
		out[w++] = val;
	while (w < 4)
		out[w++] = pad;
}

void o2_dx_hash(const struct o2_fs *fs, const char *name, size_t len, uint32_t *ret_major,
		uint32_t *ret_minor)
{
	uint32_t state[4], in[4];
	const signed char *p = (const signed char *)name;
	int left = (int)len;

	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.')) {
		*ret_major = 0;
		*ret_minor = 0;
		return;
	}
	for (int i = 0; i < 4; i++)
		state[i] = fs->dx_seed[i];
	while (left > 0) {
		pack_piece(p, left, in);
		tea_rounds(state, in);
		left -= 16;
		p += 16;
	}
	*ret_major = state[0];
	*ret_minor = state[1];
}
