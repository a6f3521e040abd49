/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * How it works: the check is {le32 crc, le16 ecc, le16 0}.  crc is the
 * little-endian CRC32 seeded with ~0 and not inverted at the end (zlib's
 * crc32 inverts both ways, so it is ~crc32(0, ...)).  ecc is a Hamming code:
 * data bit i (LSB-first, byte by byte) sits at 1-based code position p(i),
 * the i-th position that is not a power of two; ecc is the XOR of p(i) over
 * all set bits.  On a CRC mismatch the XOR of the stored and recomputed ecc
 * names the code position of a single flipped bit.  Both are computed with
 * the check field zeroed.
 */
#include <errno.h>
#include <string.h>
#include <zlib.h>

#include "blockcheck.h"
#include "format.h"

uint32_t o2_blockcheck_crc(const void *data, size_t len)
{
	uLong c = crc32(0L, Z_NULL, 0);

	c = crc32(c, data, (uInt)len);
	return ~(uint32_t)c;
}

/* Code position of data bit i. */
static uint32_t code_pos(uint32_t i)
{
	uint32_t b = i + 1;

	/* each power of two at or below the position pushes it up by one */
	for (uint32_t p = 1; p <= b; p <<= 1)
		b++;
	return b;
}

uint32_t o2_hamming_encode(const void *data, size_t len)
{
	const uint8_t *d = data;
	uint32_t parity = 0;
	/* Positions grow monotonically with i; track the next power of two. */
	uint32_t next_pow = 4, pos_base = 2; /* data bit 0 -> 3 */

	for (size_t byte = 0; byte < len; byte++) {
		uint8_t v = d[byte];

		for (unsigned bit = 0; bit < 8; bit++) {
			uint32_t pos = (uint32_t)(byte * 8 + bit) + 1 + pos_base;

			while (pos >= next_pow) {
				pos_base++;
				pos++;
				next_pow <<= 1;
			}
			if (v & (1u << bit))
				parity ^= pos;
		}
	}
	return parity;
}

static int popcount32(uint32_t v)
{
	return __builtin_popcount(v);
}

/* Data bit index for a code position that is not a power of two. */
static uint32_t data_index(uint32_t pos)
{
	uint32_t npow = 0;

	for (uint32_t p = 1; p <= pos; p <<= 1)
		npow++;
	return pos - npow - 1;
}

void o2_blockcheck_compute(void *block, size_t len, void *check)
{
	struct o2_block_check *bc = check;

	memset(bc, 0, sizeof(*bc));
	uint32_t crc = o2_blockcheck_crc(block, len);
	uint32_t ecc = o2_hamming_encode(block, len);

	bc->crc32e = cpu_le32(crc);
	bc->ecc = cpu_le16((uint16_t)ecc);
}

int o2_blockcheck_verify(void *block, size_t len, void *check)
{
	struct o2_block_check *bc = check;
	struct o2_block_check saved = *bc;
	uint32_t want_crc = le32(saved.crc32e);
	uint32_t syndrome;
	int r = 0;

	memset(bc, 0, sizeof(*bc));
	if (o2_blockcheck_crc(block, len) == want_crc)
		goto out;

	syndrome = o2_hamming_encode(block, len) ^ le16(saved.ecc);
	r = -EBADMSG;
	if (syndrome == 0 || popcount32(syndrome) == 1)
		goto out; /* a parity bit, or nothing we can name */
	uint32_t idx = data_index(syndrome);

	if (idx >= len * 8 || code_pos(idx) != syndrome)
		goto out;
	((uint8_t *)block)[idx / 8] ^= (uint8_t)(1u << (idx % 8));
	if (o2_blockcheck_crc(block, len) == want_crc) {
		r = 1;
	} else {
		((uint8_t *)block)[idx / 8] ^= (uint8_t)(1u << (idx % 8));
	}
out:
	*bc = saved;
	return r;
}
