/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Lost cluster locks, remembered by epoch: what a cache of blocks (fscore's
 * metadata cache, the daemon's write-back cache) needs to know, at a
 * block's next use, whether a lock lost since the block was last known good
 * may have made it stale - without walking the cache at each loss.  An
 * owner's loss stamps its slot (owners sharing a slot only cost each other
 * a read); a loss of every owner stamps them all.  A block notes the epoch
 * it was last known good in (o2_losses_now) and the inode whose lock
 * covers it (0: none named, suspect after any loss).
 */
#ifndef O2FS_LOSSES_H
#define O2FS_LOSSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define O2_LOSS_SLOTS 4096

struct o2_losses {
	uint64_t epoch; /* losses so far */
	uint64_t last;	/* the epoch of the newest loss */
	uint64_t all;	/* the epoch of the newest loss of every owner */
	uint64_t slot[O2_LOSS_SLOTS];
};

static inline size_t o2_losses_slot(uint64_t owner)
{
	return (size_t)((owner * 0x9E3779B97F4A7C15ull) >> 20) & (O2_LOSS_SLOTS - 1);
}

/* The lock of inode owner went; 0: every owner's did. */
static inline void o2_losses_stamp(struct o2_losses *l, uint64_t owner)
{
	l->last = ++l->epoch;
	if (owner)
		l->slot[o2_losses_slot(owner)] = l->epoch;
	else
		l->all = l->epoch;
}

static inline uint64_t o2_losses_now(const struct o2_losses *l)
{
	return l->epoch;
}

/* Whether a loss since epoch seen may cover what owner's lock covers. */
static inline bool o2_losses_suspect(const struct o2_losses *l, uint64_t seen, uint64_t owner)
{
	if (seen >= l->last)
		return false;
	return !owner || seen < l->all || seen < l->slot[o2_losses_slot(owner)];
}

#endif
