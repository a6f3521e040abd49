/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The OCFS2 metadata block check (metaecc): a CRC32 of the block and a
 * Hamming code over its bits that can repair one flipped bit.
 */
#ifndef O2_BLOCKCHECK_H
#define O2_BLOCKCHECK_H

#include <stddef.h>
#include <stdint.h>

/*
 * Compute the check of block[0..len) and store it at check (an 8-byte
 * struct o2_block_check inside the block; it is zeroed first).
 */
void o2_blockcheck_compute(void *block, size_t len, void *check);

/*
 * Verify the stored check.  Returns 0 if it matches, 1 if one bit was wrong
 * and has been corrected in block, -EBADMSG if the block cannot be trusted.
 * The stored check is left as it was.
 */
int o2_blockcheck_verify(void *block, size_t len, void *check);

/* The raw pieces, for tests. */
uint32_t o2_blockcheck_crc(const void *data, size_t len);
uint32_t o2_hamming_encode(const void *data, size_t len);

#endif
