/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Transactions and the JBD2 journal.
 *
 * How it works.  The log is the journal file's blocks [first, maxlen), used
 * as a ring.  A commit writes, from the head: descriptor blocks whose tags
 * name the home block of each copy that follows them (copies that begin
 * with the JBD2 magic are escaped), revoke blocks, then - after a flush that
 * makes the copies and any ordered file data durable - a commit block, and
 * flushes again.  The journal superblock's s_start/s_sequence name the
 * oldest transaction replay must start from; 0 means the log is empty.
 *
 * Committed blocks stay dirty in the cache until a checkpoint writes them
 * home.  Checkpointing is all-or-nothing: commit the running transaction,
 * write every logged block home, flush, then mark the log empty.  Nothing
 * uncommitted ever reaches its home location, so after a crash the volume
 * is its last checkpoint plus the committed transactions replay adds: a
 * committed prefix.
 *
 * A block revoked by a transaction still in the log is never logged again
 * until the log has been checkpointed: fsck.ocfs2 1.8.7 loops forever
 * replaying a block logged after a revoke of it, and the kernel would
 * accept such a log, so we never write one.
 *
 * One exception to "nothing uncommitted goes home": a running transaction
 * of inode times alone may be written home unlogged when a checkpoint or
 * write-back asks for it (home_times, below).  Checkpointing does not need
 * the running transaction: a buffer changed again after its commit keeps
 * its committed content in b->frozen for the checkpoint to write.
 *
 * Any write or flush error aborts the journal: the volume turns read-only
 * and nothing more is written, so the device keeps a replayable state.
 *
 * fsync.  Each inode changed by a transaction not yet durable has an entry
 * saying which transaction changed it last (the kernel's i_sync_tid) and
 * which last changed more than its times (i_datasync_tid).  fsync waits for
 * the first, fdatasync for the second; neither commits for an inode whose
 * changes are durable already, and then only the device is flushed, for
 * the file data written in place.  Entries go once their transaction is
 * durable.
 *
 * A commit can also run in steps, so that a caller holding a lock around
 * fscore can drop it while the device flushes (o2_journal_sync_step): the
 * copies are written and the transaction counts as committed in memory (a
 * new one runs), but it is "in flight" until a flush covers the copies,
 * its commit block is written ("sealed") and a second flush covers that.
 * Whatever needs it durable - a checkpoint (nothing may go home before its
 * transaction is durable), o2_fs_sync - finishes it first, with flushes of
 * its own.  Flushes are known by the device's write count when they
 * started: a flush covers every write completed before it.
 *
 * Batching.  fsck.ocfs2 (1.8.7) knows neither JBD2's checksums nor its
 * async commit (it refuses the feature bits, and replays any commit block
 * it finds without looking at a checksum), so a commit block may only be
 * written once a flush made its transaction's log durable, and each commit
 * needs two flushes from start to durable.  They can be shared: the next
 * commit's log may go out while the previous commit block waits for its
 * flush, so one flush makes the older transaction durable and the newer
 * one's log with it.  Under concurrent fsyncs a commit then costs one flush
 * of its own.  A crash before that flush loses both, neither having been
 * acknowledged: replay stops at the older commit block's place.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "blockcheck.h"
#include "error.h"
#include "jmap.h"
#include "journal.h"

struct o2_journal {
	struct o2_trans_watch watch; /* o2_journal_watch */
	struct o2_jmap map;
	uint32_t head;	   /* next log block to write */
	uint32_t tail;	   /* s_start on disk; 0 = empty */
	uint32_t next_tid; /* sequence of the running transaction */
	bool sb_dirty;	   /* in-memory tail/sequence differ from the disk */
	bool home_kept;	   /* every committed block is home, but the log still
			      replays them (o2_journal_write_home) */
	bool times_only;   /* the running transaction changes inode times alone */
	/* the running transaction */
	struct o2_list running;
	unsigned nrunning;
	uint64_t *revokes;
	unsigned nrevokes, revokes_cap;
	unsigned credits; /* reserved by open handles and committed-to-running ones */
	unsigned handles;
	uint64_t started_ns; /* when the running transaction got its first block */
	/* logged, not yet checkpointed */
	struct o2_list checkpoint;
	unsigned ncheckpoint;
	/* blocks revoked by committed transactions still in the log */
	uint64_t *live_revokes;
	unsigned nlive_revokes, live_revokes_cap;
	struct o2_journal_stats st;
	/* durability (see "fsync" above) */
	uint32_t durable_tid;	 /* every transaction before this one is durable */
	uint64_t durable_writes; /* device writes a completed flush covered */
	bool inflight;		 /* a commit's log is written, its commit block not yet */
	uint32_t inflight_tid;
	uint64_t inflight_writes; /* the flush it waits for must cover these */
	bool sealed;		 /* a commit block is written but not yet durable */
	uint32_t sealed_tid;
	uint64_t sealed_writes;	 /* ... durable once a flush covers these */
	/* inodes changed by transactions not yet durable: open addressing */
	struct o2_itid *itab;
	unsigned itab_cap, itab_n;
	bool untracked;		/* memory ran out recording one: every fsync commits */
	uint32_t untracked_tid;
	uint8_t *scratch; /* one block */
	uint8_t *batch;	  /* contiguous writes */
	unsigned batch_cap, batch_n;
	uint64_t batch_phys;
};

struct o2_trans {
	struct o2_fs *fs;
	unsigned credits, used;
	bool joined; /* a buffer already in the running transaction was added: it may change */
	bool times_only; /* inode blocks it logs change their times only */
};

/* The last transactions that changed an inode (ino 0: a free slot). */
struct o2_itid {
	uint64_t ino;
	uint32_t sync_tid, data_tid;
	bool data; /* data_tid is set */
};

#define BATCH_BLOCKS 64u

uint64_t o2_now_ns(const struct o2_fs *fs)
{
	struct timespec ts;

	if (fs->opts.now_ns)
		return fs->opts.now_ns(fs->opts.clock_arg);
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Room for one more entry in *v (n used of *cap). */
static int reserve_blkno(uint64_t **v, unsigned n, unsigned *cap)
{
	if (n == *cap) {
		unsigned ncap = *cap ? *cap * 2 : 64;
		uint64_t *nv = o2_realloc(*v, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = ncap;
	}
	return 0;
}

static int push_blkno(uint64_t **v, unsigned *n, unsigned *cap, uint64_t blkno)
{
	int r = reserve_blkno(v, *n, cap);

	if (r < 0)
		return r;
	(*v)[(*n)++] = blkno;
	return 0;
}

static bool has_blkno(const uint64_t *v, unsigned n, uint64_t blkno)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i] == blkno)
			return true;
	return false;
}

/* ---- which transactions are durable, and which inodes they changed ---- */

/* JBD2 sequence numbers wrap: compare them by their difference. */
static bool tid_durable(const struct o2_journal *j, uint32_t tid)
{
	return (int32_t)(tid - j->durable_tid) < 0;
}

static unsigned itab_slot(uint64_t ino, unsigned cap)
{
	return (unsigned)((ino * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static struct o2_itid *itab_find(const struct o2_journal *j, uint64_t ino)
{
	if (!j->itab_cap)
		return NULL;
	for (unsigned i = itab_slot(ino, j->itab_cap);; i = (i + 1) & (j->itab_cap - 1)) {
		if (j->itab[i].ino == ino)
			return &j->itab[i];
		if (!j->itab[i].ino)
			return NULL;
	}
}

/* Put e into a table with room (no entry for e->ino yet). */
static void itab_put(struct o2_itid *tab, unsigned cap, const struct o2_itid *e)
{
	unsigned i = itab_slot(e->ino, cap);

	while (tab[i].ino)
		i = (i + 1) & (cap - 1);
	tab[i] = *e;
}

static bool itid_live(const struct o2_journal *j, const struct o2_itid *e)
{
	return !tid_durable(j, e->sync_tid) || (e->data && !tid_durable(j, e->data_tid));
}

/*
 * A table of cap slots holding the entries still needed (cap a power of
 * two).  Optional memory: without it every fsync commits (untracked), so
 * no caller has an error to return.
 */
static int itab_rebuild(struct o2_journal *j, unsigned cap)
{
	struct o2_itid *tab = o2_calloc_optional(cap, sizeof(*tab));
	unsigned n = 0;

	if (!tab)
		return -ENOMEM;
	for (unsigned i = 0; i < j->itab_cap; i++)
		if (j->itab[i].ino && itid_live(j, &j->itab[i])) {
			itab_put(tab, cap, &j->itab[i]);
			n++;
		}
	free(j->itab);
	j->itab = tab;
	j->itab_cap = cap;
	j->itab_n = n;
	return 0;
}

/* Drop what durable transactions made unneeded. */
static void itab_prune(struct o2_journal *j)
{
	if (j->untracked && tid_durable(j, j->untracked_tid))
		j->untracked = false;
	if (!j->itab_n)
		return;
	for (unsigned i = 0; i < j->itab_cap; i++)
		if (j->itab[i].ino && itid_live(j, &j->itab[i])) {
			/*
			 * Some remain (the running transaction's, after a commit
			 * in flight); if memory runs out, stale entries only cost
			 * a lookup.
			 */
			itab_rebuild(j, j->itab_cap);
			return;
		}
	/* a burst of changes (an untar) must not leave every commit a long scan */
	if (j->itab_cap > 4096) {
		free(j->itab);
		j->itab = NULL;
		j->itab_cap = 0;
	} else {
		memset(j->itab, 0, j->itab_cap * sizeof(*j->itab));
	}
	j->itab_n = 0;
}

void o2_trans_mark_inode(struct o2_trans *t, uint64_t ino, bool data)
{
	struct o2_journal *j = t->fs->journal;
	uint32_t tid = j->next_tid;
	struct o2_itid *e = itab_find(j, ino);

	if (!e) {
		if ((j->itab_n + 1) * 2 > j->itab_cap &&
		    itab_rebuild(j, j->itab_cap ? j->itab_cap * 2 : 64) < 0) {
			/* not knowing which inode changed, every fsync must commit */
			j->untracked = true;
			j->untracked_tid = tid;
			return;
		}
		itab_put(j->itab, j->itab_cap, &(struct o2_itid){ .ino = ino, .sync_tid = tid });
		j->itab_n++;
		e = itab_find(j, ino);
	}
	e->sync_tid = tid;
	if (data) {
		e->data_tid = tid;
		e->data = true;
	}
}

void o2_trans_times_only(struct o2_trans *t)
{
	t->times_only = true;
}

bool o2_journal_inode_pending(const struct o2_fs *fs, uint64_t ino, bool datasync,
			      uint32_t *ret_tid)
{
	const struct o2_journal *j = fs->journal;
	const struct o2_itid *e;
	bool pending = false;

	if (!j)
		return false;
	e = itab_find(j, ino);
	if (e && !datasync && !tid_durable(j, e->sync_tid)) {
		*ret_tid = e->sync_tid;
		pending = true;
	} else if (e && e->data && !tid_durable(j, e->data_tid)) {
		*ret_tid = e->data_tid;
		pending = true;
	}
	if (j->untracked && !tid_durable(j, j->untracked_tid) &&
	    (!pending || (int32_t)(j->untracked_tid - *ret_tid) > 0)) {
		*ret_tid = j->untracked_tid;
		pending = true;
	}
	return pending;
}

bool o2_journal_newest_tid(const struct o2_fs *fs, uint32_t *ret_tid)
{
	const struct o2_journal *j = fs->journal;

	if (!j)
		return false;
	if (j->nrunning || j->nrevokes)
		*ret_tid = j->next_tid;
	else if (j->inflight)
		*ret_tid = j->inflight_tid;
	else if (j->sealed)
		*ret_tid = j->sealed_tid;
	else
		return false;
	return true;
}

uint64_t o2_journal_durable_writes(const struct o2_fs *fs)
{
	return fs->journal ? fs->journal->durable_writes : 0;
}

void o2_journal_flushed(struct o2_fs *fs, uint64_t writes)
{
	struct o2_journal *j = fs->journal;

	if (j && writes > j->durable_writes)
		j->durable_writes = writes;
}

/* Flush the device, noting which writes it covered. */
static int dev_flush(struct o2_fs *fs)
{
	uint64_t writes = fs->dev->writes;
	int r = o2_blockdev_flush(fs->dev);

	if (r == 0)
		o2_journal_flushed(fs, writes);
	return r;
}

/* ---- geometry ---- */

static unsigned tag_bytes(const struct o2_journal *j)
{
	return j->map.tags64 ? 12 : 8;
}

/* Tags that fit one descriptor block, keeping room for a UUID as JBD2 does. */
static unsigned tags_per_desc(const struct o2_fs *fs, const struct o2_journal *j)
{
	return (fs->bs - sizeof(struct jbd2_header) - 16) / tag_bytes(j);
}

/*
 * Revoke records per revoke block.  fsck.ocfs2 1.8.7 computes the number
 * of records as (r_count - 16) / sizeof(pointer) and reads them as 4-byte
 * words, so it sees only the first half of a block's records (and, in
 * 64-bit journals, their high and low words as separate blocks).  We write
 * every record twice - the block's records, then the same records again -
 * so that fsck's reading covers each block once (plus harmless revokes of
 * block 0 in 64-bit journals) while JBD2 reads every record as it should.
 */
static unsigned revokes_per_block(const struct o2_fs *fs, const struct o2_journal *j)
{
	return (fs->bs - sizeof(struct jbd2_revoke_header)) / (j->map.tags64 ? 8 : 4) / 2;
}

static uint32_t ring_size(const struct o2_journal *j)
{
	return j->map.maxlen - j->map.first;
}

static uint32_t log_used(const struct o2_journal *j)
{
	if (!j->tail)
		return 0;
	return (j->head + ring_size(j) - j->tail) % ring_size(j);
}

static uint32_t log_next(const struct o2_journal *j, uint32_t pos)
{
	return pos + 1 == j->map.maxlen ? j->map.first : pos + 1;
}

/* Log blocks a transaction of nbufs copies and nrev revokes takes. */
static unsigned commit_size(const struct o2_fs *fs, const struct o2_journal *j, unsigned nbufs,
			    unsigned nrev)
{
	unsigned tpd = tags_per_desc(fs, j), rpb = revokes_per_block(fs, j);

	return (nbufs + tpd - 1) / tpd + nbufs + (nrev + rpb - 1) / rpb + 1;
}

unsigned o2_journal_max_credits(const struct o2_fs *fs)
{
	const struct o2_journal *j = fs->journal;

	return j ? ring_size(j) / 4 : 0;
}

/* ---- writing the log ---- */

static int batch_flush(struct o2_fs *fs, struct o2_journal *j)
{
	int r = 0;

	if (j->batch_n) {
		r = o2_blockdev_write(fs->dev, j->batch, (size_t)j->batch_n << fs->bits,
				      j->batch_phys << fs->bits);
		j->st.log_blocks_written += j->batch_n;
		j->batch_n = 0;
	}
	return r;
}

/* Queue one block for physical block phys, batching contiguous runs. */
static int batch_add(struct o2_fs *fs, struct o2_journal *j, uint64_t phys, const void *data)
{
	int r;

	if (j->batch_n && (j->batch_n == j->batch_cap || phys != j->batch_phys + j->batch_n)) {
		r = batch_flush(fs, j);
		if (r < 0)
			return r;
	}
	if (!j->batch_n)
		j->batch_phys = phys;
	memcpy(j->batch + ((size_t)j->batch_n << fs->bits), data, fs->bs);
	j->batch_n++;
	return 0;
}

/* Append one block to the log at the head. */
static int log_append(struct o2_fs *fs, struct o2_journal *j, const void *data)
{
	uint64_t phys;
	int r = o2_jmap_phys(&j->map, j->head, &phys);

	if (r < 0)
		return o2_corrupt(fs, j->map.inode_blkno, "journal block %u is not mapped", j->head);
	r = batch_add(fs, j, phys, data);
	if (r < 0)
		return r;
	j->head = log_next(j, j->head);
	return 0;
}

static void fill_header(void *block, uint32_t type, uint32_t seq)
{
	struct jbd2_header *h = block;

	h->h_magic = cpu_be32(JBD2_MAGIC);
	h->h_blocktype = cpu_be32(type);
	h->h_sequence = cpu_be32(seq);
}

static int write_sb(struct o2_fs *fs, struct o2_journal *j, uint32_t start, uint32_t seq,
		    uint32_t add_incompat)
{
	int r;

	r = o2_blockdev_read(fs->dev, j->scratch, fs->bs, j->map.sb_phys << fs->bits);
	if (r < 0)
		return r;
	struct jbd2_superblock *sb = (struct jbd2_superblock *)j->scratch;

	sb->s_start = cpu_be32(start);
	sb->s_sequence = cpu_be32(seq);
	if (add_incompat && be32(sb->s_header.h_blocktype) == JBD2_SUPERBLOCK_V2)
		sb->s_feature_incompat = cpu_be32(be32(sb->s_feature_incompat) | add_incompat);
	r = o2_blockdev_write(fs->dev, j->scratch, fs->bs, j->map.sb_phys << fs->bits);
	if (r == 0)
		j->sb_dirty = false;
	return r;
}

/*
 * Write the running transaction's copies and revokes into the log (not yet
 * flushed, no commit block).
 */
static int write_log(struct o2_fs *fs, struct o2_journal *j)
{
	unsigned tpd = tags_per_desc(fs, j), tb = tag_bytes(j);
	uint32_t tid = j->next_tid;
	struct o2_list *pos;
	uint8_t *desc = j->scratch;
	int r = 0;

	/* The first commit into an empty log must make replay start here. */
	if (!j->tail) {
		r = write_sb(fs, j, j->head, tid, 0);
		if (r < 0)
			return r;
		j->tail = j->head;
	}

	/* descriptors and copies, tpd at a time */
	pos = j->running.next;
	while (pos != &j->running) {
		struct o2_list *group = pos;
		unsigned n = 0;
		uint8_t *p;

		memset(desc, 0, fs->bs);
		fill_header(desc, JBD2_DESCRIPTOR_BLOCK, tid);
		p = desc + sizeof(struct jbd2_header);
		for (; pos != &j->running && n < tpd; pos = pos->next, n++) {
			struct o2_buf *b = o2_container_of(pos, struct o2_buf, tlink);
			struct jbd2_block_tag *tag = (struct jbd2_block_tag *)p;
			uint32_t flags = 0;

			o2_meta_seal(fs, b);
			if (be32(*(const o2be32 *)b->data) == JBD2_MAGIC)
				flags |= JBD2_TAG_ESCAPE;
			if (n)
				flags |= JBD2_TAG_SAME_UUID;
			if (n + 1 == tpd || pos->next == &j->running)
				flags |= JBD2_TAG_LAST;
			tag->t_blocknr = cpu_be32((uint32_t)b->blkno);
			tag->t_flags = cpu_be32(flags);
			if (j->map.tags64)
				tag->t_blocknr_high = cpu_be32((uint32_t)(b->blkno >> 32));
			p += tb;
			if (!n) {
				memcpy(p, j->map.uuid, 16);
				p += 16;
			}
		}
		r = log_append(fs, j, desc);
		if (r < 0)
			return r;
		for (struct o2_list *q = group; q != pos; q = q->next) {
			struct o2_buf *b = o2_container_of(q, struct o2_buf, tlink);

			if (be32(*(const o2be32 *)b->data) == JBD2_MAGIC) {
				memcpy(desc, b->data, fs->bs);
				memset(desc, 0, 4);
				r = log_append(fs, j, desc);
			} else {
				r = log_append(fs, j, b->data);
			}
			if (r < 0)
				return r;
		}
	}

	/* revoke records */
	for (unsigned i = 0; i < j->nrevokes;) {
		unsigned rpb = revokes_per_block(fs, j), rs = j->map.tags64 ? 8 : 4, n = 0;
		uint8_t *p;

		memset(desc, 0, fs->bs);
		fill_header(desc, JBD2_REVOKE_BLOCK, tid);
		p = desc + sizeof(struct jbd2_revoke_header);
		for (; i < j->nrevokes && n < rpb; i++, n++, p += rs) {
			if (rs == 8)
				*(o2be64 *)p = cpu_be64(j->revokes[i]);
			else
				*(o2be32 *)p = cpu_be32((uint32_t)j->revokes[i]);
		}
		/* the same records again, for fsck.ocfs2 1.8.7 (see revokes_per_block) */
		memcpy(p, desc + sizeof(struct jbd2_revoke_header), (size_t)n * rs);
		((struct jbd2_revoke_header *)desc)->r_count =
			cpu_be32((uint32_t)(sizeof(struct jbd2_revoke_header) + 2 * n * rs));
		r = log_append(fs, j, desc);
		if (r < 0)
			return r;
	}
	return batch_flush(fs, j);
}

/* The commit block of transaction tid, at the head (not yet flushed). */
static int write_commit_block(struct o2_fs *fs, struct o2_journal *j, uint32_t tid)
{
	uint64_t now = o2_now_ns(fs);
	uint8_t *desc = j->scratch;
	struct jbd2_commit_header *ch = (struct jbd2_commit_header *)desc;
	int r;

	memset(desc, 0, fs->bs);
	fill_header(desc, JBD2_COMMIT_BLOCK, tid);
	ch->h_commit_sec = cpu_be64(now / 1000000000ull);
	ch->h_commit_nsec = cpu_be32((uint32_t)(now % 1000000000ull));
	r = log_append(fs, j, desc);
	return r < 0 ? r : batch_flush(fs, j);
}

/*
 * Advance the commits in flight as far as the flushes done so far allow:
 * a sealed commit whose commit block a flush covers is durable; once a
 * flush covers a commit's copies (and the ordered data written before
 * them), its commit block is written.  The sealed one is always the older:
 * the newer's copies were written after its commit block, so the flush
 * that lets the newer be sealed has made the older durable first.  0 when
 * nothing is in flight any more, 1 when a flush is still needed
 * (*ret_writes: the writes it must cover).
 */
static int inflight_advance(struct o2_fs *fs, struct o2_journal *j, uint64_t *ret_writes)
{
	int r;

	if (!j->inflight && !j->sealed)
		return 0;
	if (fs->ro_reason)
		return -EROFS;
	if (j->sealed && j->durable_writes >= j->sealed_writes) {
		j->sealed = false;
		j->durable_tid = j->sealed_tid + 1;
		itab_prune(j);
	}
	if (j->inflight && j->durable_writes >= j->inflight_writes && !j->sealed) {
		r = write_commit_block(fs, j, j->inflight_tid);
		if (r < 0)
			return o2_fs_abort(fs, r, "committing a transaction");
		j->inflight = false;
		j->sealed = true;
		j->sealed_tid = j->inflight_tid;
		j->sealed_writes = fs->dev->writes;
	}
	if (j->inflight)
		*ret_writes = j->inflight_writes;
	else if (j->sealed)
		*ret_writes = j->sealed_writes;
	else
		return 0;
	return 1;
}

/* Make the commits in flight durable now, flushing here. */
static int inflight_finish(struct o2_fs *fs, struct o2_journal *j)
{
	uint64_t need;
	int r;

	while ((r = inflight_advance(fs, j, &need)) == 1) {
		r = dev_flush(fs);
		if (r < 0)
			return o2_fs_abort(fs, r, "committing a transaction");
	}
	return r;
}

/*
 * Write the running transaction to the log and count it committed in
 * memory (a new one runs); it is in flight until inflight_advance has
 * made it durable.  At most one commit waits for its copies to be flushed
 * (inflight) and one, older, for its commit block (sealed): see
 * "Batching" above.
 */
static int commit_start(struct o2_fs *fs)
{
	struct o2_journal *j = fs->journal;
	struct o2_list *pos, *tmp;
	int r;

	r = write_log(fs, j);
	if (r < 0)
		return o2_fs_abort(fs, r, "committing a transaction");
	for (unsigned i = 0; i < j->nrevokes; i++) {
		struct o2_buf *b = o2_cache_peek(fs, j->revokes[i]);

		r = push_blkno(&j->live_revokes, &j->nlive_revokes, &j->live_revokes_cap,
			       j->revokes[i]);
		if (r < 0)
			return o2_fs_abort(fs, r, "recording revokes");
		/* the revoke is durable now: the block no longer needs writing home */
		if (b && b->revoked && b->in_log && !b->in_running) {
			o2_list_del(&b->clink);
			j->ncheckpoint--;
			b->in_log = false;
			b->revoked = false;
			o2_cache_block_put(fs, b->frozen);
			b->frozen = NULL;
			o2_cache_mark_clean(fs, b);
			o2_cache_forget(fs, b->blkno);
		}
	}
	o2_list_for_each_safe(pos, tmp, &j->running) {
		struct o2_buf *b = o2_container_of(pos, struct o2_buf, tlink);

		o2_list_del(&b->tlink);
		b->in_running = false;
		b->dirty = true;
		o2_cache_block_put(fs, b->frozen);
		b->frozen = NULL;
		if (!b->in_log) {
			b->in_log = true;
			o2_list_add_tail(&j->checkpoint, &b->clink);
			j->ncheckpoint++;
		}
		o2_brelse(fs, b);
	}
	j->nrunning = 0;
	j->nrevokes = 0;
	j->credits = 0;
	j->inflight = true;
	j->inflight_tid = j->next_tid;
	j->inflight_writes = fs->dev->writes;
	j->next_tid++;
	j->st.commits++;
	return 0;
}

int o2_journal_commit(struct o2_fs *fs)
{
	struct o2_journal *j = fs->journal;
	int r;

	if (!j)
		return 0;
	if (fs->ro_reason)
		return -EROFS;
	if (j->handles)
		return o2_fail(fs, -EBUSY, "cannot commit while a transaction handle is open");
	/*
	 * Commits become durable in order: one whose copies wait for a flush
	 * goes first; one waiting only for its commit block's flush shares
	 * the flush that covers this one's copies.
	 */
	if (j->inflight) {
		r = inflight_finish(fs, j);
		if (r < 0)
			return r;
	}
	if (!j->nrunning && !j->nrevokes)
		return inflight_finish(fs, j);
	r = commit_start(fs);
	return r < 0 ? r : inflight_finish(fs, j);
}

int o2_journal_sync_step(struct o2_fs *fs, uint32_t tid, uint64_t *ret_writes)
{
	struct o2_journal *j = fs->journal;
	int r;

	if (!j)
		return 0;
	for (;;) {
		if (fs->ro_reason)
			return -EROFS;
		if (tid_durable(j, tid))
			return 0;
		r = inflight_advance(fs, j, ret_writes);
		if (r < 0)
			return r;
		if (tid_durable(j, tid))
			return 0;
		if (tid != j->next_tid || j->inflight) {
			/* tid is in flight, or the running one must wait to start */
			if (r == 0)
				return o2_fail(fs, -EIO, "transaction %u is neither durable nor "
					       "in flight", tid);
			return 1;
		}
		/*
		 * tid is the running transaction.  Empty, it has nothing to
		 * make durable: what the inode's change logged was revoked.
		 */
		if (!j->nrunning && !j->nrevokes)
			return 0;
		if (j->handles)
			return o2_fail(fs, -EBUSY, "cannot commit while a transaction handle is open");
		/* its copies may go out while an older commit block waits */
		r = commit_start(fs);
		if (r < 0)
			return r;
	}
}

bool o2_journal_unsynced(const struct o2_fs *fs)
{
	const struct o2_journal *j = fs->journal;

	return j && (j->nrunning || j->nrevokes || j->inflight || j->sealed);
}

static int cmp_blkno(const void *a, const void *b)
{
	const struct o2_buf *x = *(struct o2_buf *const *)a, *y = *(struct o2_buf *const *)b;

	return x->blkno < y->blkno ? -1 : x->blkno > y->blkno;
}

/*
 * Write every committed block home and, unless keep_log, mark the log
 * empty.  The running transaction is left alone: buffers it changed again
 * go home with their committed (frozen) content.  A kept log still names
 * the blocks home already, so replay writes them again: the same content,
 * harmless while nobody else may have changed them since (see
 * o2_journal_write_home).
 */
static int checkpoint(struct o2_fs *fs, bool keep_log)
{
	struct o2_journal *j = fs->journal;
	struct o2_buf **v = NULL;
	struct o2_list *pos, *tmp;
	unsigned n = 0;
	int r;

	if (fs->ro_reason)
		return -EROFS;
	/* nothing goes home before the transaction that logged it is durable */
	r = inflight_finish(fs, j);
	if (r < 0)
		return r;
	if (!j->ncheckpoint && (keep_log || (!j->tail && !j->sb_dirty)))
		return 0;
	if (j->ncheckpoint && fs->opts.before_home) {
		r = fs->opts.before_home(fs->opts.cluster_arg);
		if (r < 0)
			return o2_fail(fs, r, "checkpointing the journal: the cluster did not settle "
				       "the new inodes' locks");
	}
	if (j->ncheckpoint) {
		v = o2_malloc(j->ncheckpoint * sizeof(*v));
		if (!v)
			return -ENOMEM;
		o2_list_for_each_safe(pos, tmp, &j->checkpoint)
			v[n++] = o2_container_of(pos, struct o2_buf, clink);
		qsort(v, n, sizeof(*v), cmp_blkno);
	}
	/* blocks home, in block order, batched where contiguous */
	for (unsigned i = 0; i < n; i++) {
		r = batch_add(fs, j, v[i]->blkno, v[i]->frozen ? v[i]->frozen : v[i]->data);
		if (r < 0)
			goto out_abort;
		/* a closing volume's watcher (o2_fs_close_progress) sees it go */
		if (fs->close_progress)
			(void)fs->close_progress(fs->close_arg, i + 1, n + 1);
	}
	r = batch_flush(fs, j);
	if (r == 0 && !keep_log)
		r = dev_flush(fs);
	if (r < 0)
		goto out_abort;
	/*
	 * Only now may the log forget them - durably, before the next commit
	 * writes over the old log.
	 */
	if (!keep_log) {
		r = write_sb(fs, j, 0, j->next_tid, 0);
		if (r == 0)
			r = dev_flush(fs);
		if (r < 0)
			goto out_abort;
		j->tail = 0;
		j->nlive_revokes = 0;
	}
	j->home_kept = keep_log;
	for (unsigned i = 0; i < n; i++) {
		o2_list_del(&v[i]->clink);
		v[i]->in_log = false;
		v[i]->revoked = false;
		o2_cache_block_put(fs, v[i]->frozen);
		v[i]->frozen = NULL;
		if (!v[i]->in_running)
			o2_cache_mark_clean(fs, v[i]);
	}
	j->ncheckpoint = 0;
	j->st.checkpoints++;
	free(v);
	return 0;

out_abort:
	free(v);
	return o2_fs_abort(fs, r, "checkpointing the journal");
}

/*
 * A running transaction that changed nothing but the times of inode blocks
 * whose home copies are current (not in the log: no committed change of
 * theirs waits to go home) may skip the log and go home as it is: each
 * such block differs from its home copy in its first sector alone (times
 * and block check, offsets 0x30-0x87), which a device writes whole, so a
 * crash leaves either time, never a torn block.  No flush: what was never
 * fsynced need not be durable, and an fsync of the inode flushes (its
 * transaction number stays the running one's, so a later fsync commits
 * whatever runs then and flushes, which covers these writes).  This is
 * what lets a lock leave a node that only overwrote file data without a
 * commit and its flushes ("Cluster locks" in ARCHITECTURE.md, Coherence).
 */
static int home_times(struct o2_fs *fs)
{
	struct o2_journal *j = fs->journal;
	struct o2_list *pos, *tmp;
	int r;

	if (!j->times_only || !j->nrunning || j->nrevokes || j->handles)
		return 0;
	for (pos = j->running.next; pos != &j->running; pos = pos->next) {
		struct o2_buf *b = o2_container_of(pos, struct o2_buf, tlink);

		if (b->kind != O2_META_INODE || b->in_log || b->frozen)
			return 0;
	}
	for (pos = j->running.next; pos != &j->running; pos = pos->next) {
		struct o2_buf *b = o2_container_of(pos, struct o2_buf, tlink);

		o2_meta_seal(fs, b);
		r = batch_add(fs, j, b->blkno, b->data);
		if (r < 0)
			return o2_fs_abort(fs, r, "writing inode times home");
	}
	r = batch_flush(fs, j);
	if (r < 0)
		return o2_fs_abort(fs, r, "writing inode times home");
	o2_list_for_each_safe(pos, tmp, &j->running) {
		struct o2_buf *b = o2_container_of(pos, struct o2_buf, tlink);

		o2_list_del(&b->tlink);
		b->in_running = false;
		o2_cache_mark_clean(fs, b);
		o2_brelse(fs, b);
	}
	j->nrunning = 0;
	j->credits = 0;
	j->times_only = false;
	j->st.times_home++;
	return 0;
}

static int checkpoint_committed(struct o2_fs *fs)
{
	return checkpoint(fs, false);
}

int o2_journal_checkpoint(struct o2_fs *fs)
{
	int r;

	if (!fs->journal)
		return 0;
	r = home_times(fs);
	if (r == 0)
		r = o2_journal_commit(fs);
	return r < 0 ? r : checkpoint_committed(fs);
}

int o2_journal_write_home(struct o2_fs *fs)
{
	int r;

	if (!fs->journal)
		return 0;
	r = home_times(fs);
	if (r == 0)
		r = o2_journal_commit(fs);
	return r < 0 ? r : checkpoint(fs, true);
}

int o2_journal_forget_home(struct o2_fs *fs)
{
	if (!fs->journal || !fs->journal->home_kept)
		return 0;
	return checkpoint_committed(fs);
}

/* ---- handles ---- */

static bool commit_due(const struct o2_fs *fs, const struct o2_journal *j)
{
	uint64_t interval = (uint64_t)(fs->opts.commit_interval_ms ? fs->opts.commit_interval_ms
								     : 5000) * 1000000ull;

	return j->nrunning && o2_now_ns(fs) - j->started_ns >= interval;
}

bool o2_journal_pending(const struct o2_fs *fs)
{
	const struct o2_journal *j = fs->journal;

	return j && (j->nrunning || j->nrevokes);
}

bool o2_journal_idle_or_due(const struct o2_fs *fs)
{
	const struct o2_journal *j = fs->journal;

	return j && !j->handles && (!j->nrunning || commit_due(fs, j));
}

bool o2_journal_in_handle(const struct o2_fs *fs)
{
	return fs->journal && fs->journal->handles;
}

void o2_journal_watch(struct o2_fs *fs, const struct o2_trans_watch *w)
{
	fs->journal->watch = w ? *w : (struct o2_trans_watch){ 0 };
}

int o2_trans_begin(struct o2_fs *fs, unsigned credits, struct o2_trans **ret)
{
	struct o2_journal *j = fs->journal;
	struct o2_trans *t;
	int r;

	if (!j || fs->ro_reason)
		return -EROFS;
	if (credits == 0 || credits > o2_journal_max_credits(fs))
		return o2_fail(fs, -ENOSPC, "a transaction of %u blocks exceeds the journal's limit "
			       "of %u", credits, o2_journal_max_credits(fs));
	if (!j->handles && j->credits + credits > o2_journal_max_credits(fs)) {
		r = o2_journal_commit(fs);
		if (r < 0)
			return r;
	}
	/* room for the running transaction grown by these credits, revokes included */
	unsigned need = commit_size(fs, j, j->credits + credits, j->nrevokes + credits);

	if (log_used(j) + need + 1 > ring_size(j)) {
		r = j->handles ? checkpoint_committed(fs) : o2_journal_checkpoint(fs);
		if (r < 0)
			return r;
	}
	fs->err[0] = '\0'; /* a failure inside says its own cause */
	t = o2_calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->fs = fs;
	t->credits = credits;
	j->credits += credits;
	j->handles++;
	*ret = t;
	return 0;
}

static void cancel_revoke(struct o2_journal *j, uint64_t blkno)
{
	for (unsigned i = 0; i < j->nrevokes; i++) {
		if (j->revokes[i] == blkno) {
			j->revokes[i] = j->revokes[--j->nrevokes];
			return;
		}
	}
}

int o2_trans_add(struct o2_trans *t, struct o2_buf *b)
{
	struct o2_fs *fs = t->fs;
	struct o2_journal *j = fs->journal;

	if (fs->ro_reason)
		return -EROFS;
	if (j->watch.add && b->kind == O2_META_INODE) {
		int r = j->watch.add(j->watch.arg, b);

		if (r < 0)
			return r;
	}
	/* an inode's own block changes: its fsync must commit this transaction */
	if (b->kind == O2_META_INODE)
		o2_trans_mark_inode(t, b->blkno, !t->times_only);
	bool times = t->times_only && b->kind == O2_META_INODE;

	if (b->in_running) {
		j->times_only = j->times_only && times;
		t->joined = true;
		return 0;
	}
	if (t->used >= t->credits)
		return o2_fail(fs, -ENOSPC, "transaction logged more than its %u credits (block %llu)",
			       t->credits, (unsigned long long)b->blkno);
	/* a revoke of this block still in the log must not precede a new copy */
	if (has_blkno(j->live_revokes, j->nlive_revokes, b->blkno)) {
		int r = checkpoint_committed(fs);

		if (r < 0)
			return r;
	}
	if (b->in_log && !b->frozen) {
		b->frozen = o2_cache_block_get(fs);
		if (!b->frozen)
			return -ENOMEM;
		memcpy(b->frozen, b->data, fs->bs);
	}
	t->used++;
	cancel_revoke(j, b->blkno);
	b->revoked = false;
	b->in_running = true;
	b->refs++;
	o2_list_add_tail(&j->running, &b->tlink);
	j->times_only = (j->nrunning || j->nrevokes ? j->times_only : true) && times;
	if (!j->nrunning++)
		j->started_ns = o2_now_ns(fs);
	return 0;
}

int o2_trans_bnew(struct o2_trans *t, struct o2_fs *fs, uint64_t blkno, uint8_t kind,
		  struct o2_buf **ret)
{
	struct o2_buf *b;
	int r = o2_bnew(fs, blkno, kind, &b);

	if (r < 0)
		return r;
	r = o2_trans_add(t, b);
	if (r < 0) {
		o2_brelse(fs, b);
		return r;
	}
	*ret = b;
	return 0;
}

int o2_trans_revoke(struct o2_trans *t, uint64_t blkno)
{
	struct o2_fs *fs = t->fs;
	struct o2_journal *j = fs->journal;
	struct o2_buf *b = o2_cache_peek(fs, blkno);
	uint8_t *frozen = NULL;

	if (fs->ro_reason)
		return -EROFS;
	j->times_only = false;
	/*
	 * A log kept by o2_journal_write_home still replays blocks nothing
	 * here remembers (they went home, and may have left the cache): it is
	 * emptied first, rather than have a replay write a freed block over
	 * its next use.
	 */
	if (j->home_kept && (!b || !b->in_log)) {
		int r = checkpoint_committed(fs);

		if (r < 0)
			return r;
	}
	if (!b)
		return 0; /* not cached, so not in the log: nothing to revoke */
	/*
	 * Allocate before changing anything: running out of memory must leave
	 * the block in the transaction as it was, not dropped from it with no
	 * revoke recorded.
	 */
	if (b->in_log) {
		if (!b->frozen && !(frozen = o2_cache_block_get(fs)))
			return -ENOMEM;
		if (!has_blkno(j->revokes, j->nrevokes, blkno) &&
		    reserve_blkno(&j->revokes, j->nrevokes, &j->revokes_cap) < 0) {
			o2_cache_block_put(fs, frozen);
			return -ENOMEM;
		}
	}
	if (b->in_running) {
		o2_list_del(&b->tlink);
		b->in_running = false;
		j->nrunning--;
		o2_brelse(fs, b);
	}
	if (!b->in_log) {
		/* no live log copy: nothing to revoke */
		o2_cache_mark_clean(fs, b);
		o2_cache_forget(fs, blkno);
		return 0;
	}
	/*
	 * Until this revoke commits, a checkpoint must still write the block's
	 * committed content home: keep it queued.
	 */
	b->revoked = true;
	if (frozen) {
		memcpy(frozen, b->data, fs->bs);
		b->frozen = frozen;
	}
	if (has_blkno(j->revokes, j->nrevokes, blkno))
		return 0;
	/* room was reserved above: this cannot fail */
	return push_blkno(&j->revokes, &j->nrevokes, &j->revokes_cap, blkno);
}

int o2_trans_end(struct o2_trans *t)
{
	struct o2_fs *fs = t->fs;
	struct o2_journal *j = fs->journal;

	/* unused credits go back */
	j->credits -= t->credits - t->used;
	j->handles--;
	free(t);
	if (fs->ro_reason)
		return -EROFS;
	if (!j->handles && j->watch.done) {
		int r = j->watch.done(j->watch.arg);

		if (r < 0)
			return r;
	}
	if (!j->handles && commit_due(fs, j))
		return o2_journal_commit(fs);
	return 0;
}

int o2_trans_finish(struct o2_trans *t, int r)
{
	struct o2_fs *fs = t->fs;

	/*
	 * A failure after blocks were changed leaves them half done: never
	 * commit that.  The volume turns read-only; the disk keeps its last
	 * committed state.
	 */
	if (r < 0 && (t->used || t->joined) && !fs->ro_reason) {
		char cause[sizeof(fs->err)];

		/* keep the message that names the cause (a damaged block, say) */
		snprintf(cause, sizeof(cause), "%s", fs->err);
		if (cause[0]) {
			fs->ro_reason = r;
			o2_fail(fs, r, "%s; the operation stopped halfway and the volume is now "
				"read-only", cause);
		} else {
			o2_fs_abort(fs, r, "an operation, halfway through,");
		}
	}
	int e = o2_trans_end(t);

	return r < 0 ? r : e;
}

/* ---- attaching ---- */

int o2_journal_open(struct o2_fs *fs, unsigned slot)
{
	struct o2_journal *j;
	int r;

	r = o2_journal_recover(fs, slot, NULL);
	if (r < 0)
		return r;
	j = o2_calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	r = o2_jmap_load(fs, slot, &j->map);
	if (r < 0)
		goto out_free;
	j->scratch = o2_malloc(fs->bs);
	j->batch_cap = BATCH_BLOCKS;
	j->batch = o2_malloc((size_t)j->batch_cap << fs->bits);
	if (!j->scratch || !j->batch) {
		r = -ENOMEM;
		goto out_free;
	}
	o2_list_init(&j->running);
	o2_list_init(&j->checkpoint);
	j->next_tid = j->map.tail_seq;
	j->durable_tid = j->next_tid;
	j->head = j->map.first;
	j->tail = 0;
	/*
	 * The log is empty (recovered or clean): say so on disk before using
	 * it.  Revoke records may follow, so the journal declares them.
	 */
	r = write_sb(fs, j, 0, j->next_tid, JBD2_INCOMPAT_REVOKE);
	if (r < 0)
		goto out_abort;
	fs->journal = j;
	r = o2_journal_set_dirty(fs, j->map.inode_blkno, true, false);
	if (r < 0) {
		fs->journal = NULL;
		goto out_free;
	}
	return 0;

out_abort:
	o2_fs_abort(fs, r, "opening the journal");
out_free:
	o2_jmap_free(&j->map);
	free(j->scratch);
	free(j->batch);
	free(j);
	return r;
}

void o2_journal_abandon(struct o2_fs *fs)
{
	struct o2_journal *j = fs->journal;
	struct o2_list *pos, *tmp;

	if (!j)
		return;
	o2_list_for_each_safe(pos, tmp, &j->running) {
		struct o2_buf *b = o2_container_of(pos, struct o2_buf, tlink);

		o2_list_del(&b->tlink);
		b->in_running = false;
		b->refs--;
	}
	o2_list_for_each_safe(pos, tmp, &j->checkpoint) {
		struct o2_buf *b = o2_container_of(pos, struct o2_buf, clink);

		o2_list_del(&b->clink);
		b->in_log = false;
	}
	o2_jmap_free(&j->map);
	free(j->live_revokes);
	free(j->revokes);
	free(j->itab);
	free(j->scratch);
	free(j->batch);
	free(j);
	fs->journal = NULL;
}

int o2_journal_close(struct o2_fs *fs)
{
	struct o2_journal *j = fs->journal;
	int r;

	if (!j)
		return 0;
	if (fs->ro_reason) {
		o2_journal_abandon(fs);
		return -EROFS;
	}
	r = o2_journal_checkpoint(fs);
	if (r == 0)
		r = o2_journal_set_dirty(fs, j->map.inode_blkno, false, false);
	o2_journal_abandon(fs);
	return r;
}

void o2_journal_stats(const struct o2_fs *fs, struct o2_journal_stats *ret)
{
	const struct o2_journal *j = fs->journal;

	if (!j) {
		memset(ret, 0, sizeof(*ret));
		return;
	}
	*ret = j->st;
	ret->head = j->head;
	ret->tail = j->tail;
	ret->next_tid = j->next_tid;
	ret->ring_blocks = ring_size(j);
}
