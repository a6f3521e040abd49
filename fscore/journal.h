/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Transactions and the JBD2 journal (fscore private).
 *
 * A caller changes metadata like this:
 *
 *	o2_trans_begin(fs, credits, &t);     credits = blocks it may log
 *	o2_bread(fs, blkno, kind, &b);
 *	o2_trans_add(t, b);                  before changing b->data
 *	...change b->data...
 *	o2_brelse(fs, b);
 *	o2_trans_end(t);
 *
 * Handles join the one running transaction; it commits on o2_fs_sync(),
 * when the commit interval has passed, or when it grows too large or the
 * log is full.  File data is written to the device directly before the
 * metadata that refers to it is committed (ordered mode): the commit flushes
 * the device before writing its commit block.
 */
#ifndef O2_JOURNAL_H
#define O2_JOURNAL_H

#include "internal.h"

struct o2_trans;

/* Attach the slot's journal for writing: replay it if dirty, then mark it in use. */
int o2_journal_open(struct o2_fs *fs, unsigned slot);
/* Checkpoint everything, mark the log empty and the journal clean, detach. */
int o2_journal_close(struct o2_fs *fs);
/* Detach without writing anything (after a failure). */
void o2_journal_abandon(struct o2_fs *fs);

/* -EROFS once the volume turned read-only; -ENOSPC if credits exceed a transaction. */
/* Transactions (or revokes) wait in the running transaction. */
bool o2_journal_pending(const struct o2_fs *fs);
/* No handle open, and nothing running or the running transaction due for commit. */
bool o2_journal_idle_or_due(const struct o2_fs *fs);
/* A handle is open (so nothing may commit now). */
bool o2_journal_in_handle(const struct o2_fs *fs);
int o2_trans_begin(struct o2_fs *fs, unsigned credits, struct o2_trans **ret);
/* Log b in this transaction (call before changing it).  Holds a reference until commit. */
int o2_trans_add(struct o2_trans *t, struct o2_buf *b);
/* o2_bnew, joined to t: *ret is referenced, its contents are the caller's. */
int o2_trans_bnew(struct o2_trans *t, struct o2_fs *fs, uint64_t blkno, uint8_t kind,
		  struct o2_buf **ret);
/*
 * blkno was freed: drop any pending copy of it, and make sure replay will
 * not write an older logged copy over whatever the block holds next.
 */
int o2_trans_revoke(struct o2_trans *t, uint64_t blkno);
int o2_trans_end(struct o2_trans *t);
/*
 * End a handle after an operation whose result is r.  If r is an error and
 * the handle had logged blocks, the half-done change must not commit: the
 * volume turns read-only.  Returns r, or o2_trans_end's error.
 */
int o2_trans_finish(struct o2_trans *t, int r);

/*
 * Watching inode blocks change (quota accounting sits above the journal,
 * so it is called through these): add(arg, b) before o2_trans_add logs an
 * inode block b (which the handle is about to change); done(arg) whenever
 * the last open handle ended, before a commit the interval may call for.
 * Either may begin and end handles of its own (done is then called again
 * inside: it must guard itself).  An error from add fails the
 * o2_trans_add, one from done the o2_trans_end.  NULL: stop watching.
 */
struct o2_trans_watch {
	int (*add)(void *arg, struct o2_buf *b);
	int (*done)(void *arg);
	void *arg;
};
void o2_journal_watch(struct o2_fs *fs, const struct o2_trans_watch *w);

/* Commit the running transaction (no handle may be open). */
int o2_journal_commit(struct o2_fs *fs);

/*
 * What fsync needs (journal.c, "fsync").  o2_trans_add records each inode
 * block it logs as a change of that inode, and as more than a change of
 * its times unless the handle said o2_trans_times_only.  A change of a
 * file's data mapping that logs no inode block (an unwritten extent
 * marked written in an extent block) says so with o2_trans_mark_inode.
 */
void o2_trans_mark_inode(struct o2_trans *t, uint64_t ino, bool data);
void o2_trans_times_only(struct o2_trans *t);
/*
 * Whether inode ino has changes in a transaction that is not durable yet
 * (for datasync: changes beyond its times); *ret_tid the newest.
 */
bool o2_journal_inode_pending(const struct o2_fs *fs, uint64_t ino, bool datasync,
			      uint32_t *ret_tid);
/*
 * Make transaction tid durable, as far as possible without waiting for a
 * device flush: 0 once it is; 1 when it waits for a flush covering the
 * device's first *ret_writes writes (o2_journal_flushed tells of it).
 * May start a commit of the running transaction (no handle may be open).
 */
int o2_journal_sync_step(struct o2_fs *fs, uint32_t tid, uint64_t *ret_writes);
/* The newest transaction not yet durable (running or in flight), if any. */
bool o2_journal_newest_tid(const struct o2_fs *fs, uint32_t *ret_tid);
/* A flush that began when the device had completed `writes` writes has completed. */
void o2_journal_flushed(struct o2_fs *fs, uint64_t writes);
/* Device writes some completed flush covered. */
uint64_t o2_journal_durable_writes(const struct o2_fs *fs);
/* Something is running, or a commit is in flight. */
bool o2_journal_unsynced(const struct o2_fs *fs);
/* Commit, write every logged block home, and empty the log. */
int o2_journal_checkpoint(struct o2_fs *fs);
/*
 * Commit and write every logged block home, but leave the log as it is
 * on disk, saving its two flushes: after a crash, replay writes those
 * blocks home once more.  That is harmless only while no other node may
 * change them, i.e. while this node keeps, at least in PR, every cluster
 * lock it changed them under.  o2_journal_forget_home then empties the
 * log (if a kept one is pending), as o2_journal_checkpoint would: call it
 * before any such lock leaves this node.
 */
int o2_journal_write_home(struct o2_fs *fs);
int o2_journal_forget_home(struct o2_fs *fs);

/* Largest number of credits one transaction may take. */
unsigned o2_journal_max_credits(const struct o2_fs *fs);

struct o2_journal_stats {
	uint32_t head, tail, next_tid;
	uint32_t commits, checkpoints, log_blocks_written;
	uint32_t times_home; /* running transactions of inode times alone written home */
	uint32_t ring_blocks;
};
void o2_journal_stats(const struct o2_fs *fs, struct o2_journal_stats *ret);

/* Wall clock, from the open options. */
uint64_t o2_now_ns(const struct o2_fs *fs);


#endif
