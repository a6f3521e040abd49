/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The metadata block cache.  Every metadata block fscore reads or changes
 * lives here while in use.  A buffer is dirty from the moment a transaction
 * logs it until checkpointing writes it home; dirty buffers are never
 * evicted, so a read always sees the newest version, journaled or not.
 * Clean, unreferenced buffers are evicted least recently used first once
 * the cache holds more than its limit.
 */
#ifndef O2_CACHE_H
#define O2_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "list.h"

struct o2_fs;
struct o2_trans_state;

/* Where a metadata block keeps its block check. */
enum o2_meta_kind {
	O2_META_INODE,
	O2_META_EXTENT,
	O2_META_GROUP,
	O2_META_DX_ROOT,
	O2_META_DX_LEAF,
	O2_META_DIR_BLOCK, /* with a trailer */
	O2_META_XATTR,
	O2_META_REFCOUNT,
	O2_META_QUOTA, /* a quota file's block: the check in its last 8 bytes */
	O2_META_PLAIN = 0xff, /* no block check */
};

/* Byte offset of the block check in a block of this kind. */
size_t o2_meta_check_offset(const struct o2_fs *fs, enum o2_meta_kind kind);

struct o2_buf {
	uint64_t blkno;
	uint8_t *data;
	uint8_t *frozen;     /* committed content while data holds uncommitted changes */
	unsigned refs;
	uint8_t kind;	     /* enum o2_meta_kind or O2_META_PLAIN */
	bool dirty;	     /* newer than the home location */
	bool in_running;     /* logged in the running transaction */
	bool in_log;	     /* logged in a committed, not yet checkpointed transaction */
	bool revoked;	     /* in_log, and revoked by the running transaction */
	bool quota_watched;  /* its quota owners were noted in this batch (quota.c) */
	bool unlocked;	     /* read without the cluster lock that covers it: a
				later read takes it from the device again */
	uint64_t seen;	     /* cache epoch when the content was last known good
				(o2_cache_lost) */
	struct o2_buf *hnext; /* hash chain */
	struct o2_list lru;  /* clean buffers, least recently used first */
	struct o2_list tlink; /* the running transaction's buffers */
	struct o2_list clink; /* buffers waiting for checkpoint */
};

/*
 * Reads made while o2_cache_unlocked_reads() is on (depth > 0) come from
 * the device unless this handle has changes to the block not yet home
 * (logged or dirty), and leave it marked: no read trusts it later.  A
 * shared volume's caller reads some inodes without their locks (to learn
 * a generation, at a FORGET); another node may change such a block at any
 * moment, and nothing would drop the cached copy before the block's own
 * lock is next taken.  A clean copy is not trusted either: an inode's lock
 * is named by its generation, so the copy may have been read under the
 * lock of the inode that used the block before (freed and reused since).
 */
void o2_cache_unlocked_reads(struct o2_fs *fs, bool on);

struct o2_cache_stats {
	uint64_t hits, misses, evictions, readahead;
	size_t buffers, dirty;
};

/* max_clean: clean buffers kept; prefill: block buffers made ready now. */
int o2_cache_init(struct o2_fs *fs, size_t max_clean, size_t prefill);
/* A block-sized buffer (NULL: out of memory), and giving one back. */
uint8_t *o2_cache_block_get(struct o2_fs *fs);
void o2_cache_block_put(struct o2_fs *fs, uint8_t *p);
/* Free every buffer.  Dirty ones are dropped: checkpoint first. */
void o2_cache_destroy(struct o2_fs *fs);

/*
 * Get block blkno, reading it if it is not cached and verifying its check
 * (metaecc) for kind.  The buffer is referenced; drop it with o2_brelse().
 */
int o2_bread(struct o2_fs *fs, uint64_t blkno, uint8_t kind, struct o2_buf **ret);
/*
 * Get block blkno zero-filled without reading it (a newly allocated block).
 * Like any change, this must be followed by o2_trans_add() before commit.
 */
int o2_bnew(struct o2_fs *fs, uint64_t blkno, uint8_t kind, struct o2_buf **ret);
void o2_brelse(struct o2_fs *fs, struct o2_buf *b);
/* The cached buffer for blkno if there is one (not referenced). */
struct o2_buf *o2_cache_peek(struct o2_fs *fs, uint64_t blkno);
/* Forget a cached block (it was freed, or rewritten behind the cache). */
void o2_cache_forget(struct o2_fs *fs, uint64_t blkno);
/* Forget every clean block (another node may have changed the disk). */
void o2_cache_drop_clean(struct o2_fs *fs);
/*
 * The cluster lock of inode owner went (another node may change what it
 * covers): a clean block that names owner (its inode block, its directory
 * blocks) or names no owner is read again at its next use; owner 0: every
 * clean block is.  Blocks with changes not yet home are kept.
 */
void o2_cache_lost(struct o2_fs *fs, uint64_t owner);
/* The epoch of losses now, and whether a loss since epoch may cover owner. */
uint64_t o2_cache_epoch(const struct o2_fs *fs);
bool o2_cache_lost_since(const struct o2_fs *fs, uint64_t owner, uint64_t epoch);
/* A buffer went clean (written home, or forgotten): it may be evicted again. */
void o2_cache_mark_clean(struct o2_fs *fs, struct o2_buf *b);
/* Compute b's block check for its kind, if the volume has metaecc and the kind has one. */
void o2_meta_seal(struct o2_fs *fs, struct o2_buf *b);
/*
 * Whether clean buffer b is known to hold what is home now (read or
 * written under the locks that cover it, none lost since), and making it
 * so (its content was checked against what the lock's value block says).
 */
bool o2_cache_trusted(struct o2_fs *fs, struct o2_buf *b);
void o2_cache_vouch(struct o2_fs *fs, struct o2_buf *b);
void o2_cache_stats(const struct o2_fs *fs, struct o2_cache_stats *ret);

#endif
