// SPDX-License-Identifier: GPL-2.0-or-later
/* OCFS2 lock names (see lockname.h). */
#include "lockname.h"

#include <stdio.h>

size_t o2_lockname(char type, uint64_t blkno, uint32_t generation, char *buf)
{
	snprintf(buf, O2_LOCKNAME_LEN + 1, "%c000000%016llx%08x", type, (unsigned long long)blkno,
		 (unsigned)generation);
	return O2_LOCKNAME_LEN;
}

void o2_lockspace_name(const uint8_t uuid[16], char buf[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(buf + 2 * i, 3, "%02X", uuid[i]);
}
