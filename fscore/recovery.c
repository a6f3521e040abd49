/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Journal replay.
 *
 * How it works: three passes over the log from s_start, as JBD2 recovery
 * does.  SCAN follows blocks whose header carries the expected sequence:
 * descriptors (skipping their copies), revoke blocks, and commit blocks,
 * each of which closes one transaction and moves the expected sequence on;
 * whatever follows the last commit block is an unfinished transaction and
 * is ignored.  REVOKE collects, for each revoked block, the newest sequence
 * that revoked it.  REPLAY writes each copy home unless a revoke at the
 * same or a later sequence covers it.  Only after the writes are flushed
 * does the journal superblock say "empty", so an interrupted replay can
 * simply run again.  That is also what lets the open's replay_progress
 * hook stop it anywhere (-ECANCELED): what it leaves is what a crash
 * during the replay would leave.
 */
#include <stdlib.h>

#include "error.h"
#include "jmap.h"
#include "journal.h"

/* JBD2 sequence numbers wrap: compare by signed difference. */
static bool tid_gt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

/* ---- block -> newest revoking sequence ---- */

struct revoke_map {
	uint64_t *keys;
	uint32_t *seqs;
	size_t cap, n;
};

static size_t rhash(uint64_t v, size_t cap)
{
	return (size_t)((v * 0x9E3779B97F4A7C15ULL) >> 17) & (cap - 1);
}

static int revoke_set(struct revoke_map *m, uint64_t blk, uint32_t seq)
{
	size_t i;

	if ((m->n + 1) * 2 > m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 256;
		uint64_t *nk = o2_calloc(ncap, sizeof(*nk));
		uint32_t *ns = o2_calloc(ncap, sizeof(*ns));

		if (!nk || !ns) {
			free(nk);
			free(ns);
			return -ENOMEM;
		}
		for (size_t k = 0; k < m->cap; k++) {
			if (!m->keys[k])
				continue;
			i = rhash(m->keys[k], ncap);
			while (nk[i])
				i = (i + 1) & (ncap - 1);
			nk[i] = m->keys[k];
			ns[i] = m->seqs[k];
		}
		free(m->keys);
		free(m->seqs);
		m->keys = nk;
		m->seqs = ns;
		m->cap = ncap;
	}
	/* block 0 is never journaled: store blk+1 so 0 marks an empty slot */
	for (i = rhash(blk + 1, m->cap); m->keys[i]; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == blk + 1) {
			if (tid_gt(seq, m->seqs[i]))
				m->seqs[i] = seq;
			return 0;
		}
	}
	m->keys[i] = blk + 1;
	m->seqs[i] = seq;
	m->n++;
	return 0;
}

static bool revoked(const struct revoke_map *m, uint64_t blk, uint32_t seq)
{
	if (!m->cap)
		return false;
	for (size_t i = rhash(blk + 1, m->cap); m->keys[i]; i = (i + 1) & (m->cap - 1))
		if (m->keys[i] == blk + 1)
			return !tid_gt(seq, m->seqs[i]);
	return false;
}

/* ---- walking the log ---- */

struct replay {
	struct o2_fs *fs;
	struct o2_jmap *m;
	uint8_t *buf, *data;
	struct revoke_map revokes;
	struct o2_replay_stats st;
	uint32_t end_seq; /* first sequence that did not commit */
	uint64_t total;	  /* blocks the committed transactions hold (SCAN) */
	uint64_t pending; /* of which the transaction being scanned holds */
	uint64_t done;	  /* blocks replayed or skipped (REPLAY) */
};

/* Tell the open's replay_progress hook; -ECANCELED if it says stop. */
static int replay_report(struct replay *rp)
{
	const struct o2_open_opts *o = &rp->fs->opts;

	if (!o->replay_progress)
		return 0;
	return o->replay_progress(o->progress_arg, rp->done, rp->total) ? -ECANCELED : 0;
}

static uint32_t next_pos(const struct o2_jmap *m, uint32_t pos)
{
	return pos + 1 >= m->maxlen ? m->first : pos + 1;
}

static int read_log(struct replay *rp, uint32_t pos, uint8_t *buf)
{
	uint64_t phys;
	int r;

	if (o2_jmap_phys(rp->m, pos, &phys) < 0)
		return o2_corrupt(rp->fs, rp->m->inode_blkno, "journal block %u is not mapped", pos);
	r = o2_blockdev_read(rp->fs->dev, buf, rp->fs->bs, phys << rp->fs->bits);
	if (r < 0)
		return o2_fail(rp->fs, r, "reading journal block %u: %s", pos, strerror(-r));
	return 0;
}

struct tag {
	uint64_t blkno;
	uint32_t flags;
};

/*
 * Parse the tags of a descriptor block.  Calls fn for each; returns the
 * number of tags, or -EUCLEAN for a malformed block.
 */
static int parse_tags(struct replay *rp, uint32_t pos, const uint8_t *desc,
		      int (*fn)(struct replay *rp, const struct tag *t, unsigned i, void *arg),
		      void *arg)
{
	unsigned tb = rp->m->tags64 ? 12 : 8, off = sizeof(struct jbd2_header), n = 0;
	uint32_t bs = rp->fs->bs;

	while (off + tb <= bs) {
		const struct jbd2_block_tag *jt = (const struct jbd2_block_tag *)(desc + off);
		struct tag t = { be32(jt->t_blocknr), be32(jt->t_flags) };

		if (rp->m->tags64)
			t.blkno |= (uint64_t)be32(jt->t_blocknr_high) << 32;
		off += tb;
		if (!(t.flags & JBD2_TAG_SAME_UUID))
			off += 16;
		if (fn) {
			int r = fn(rp, &t, n, arg);

			if (r < 0)
				return r;
		}
		n++;
		if (t.flags & JBD2_TAG_LAST)
			return (int)n;
	}
	if (n == 0)
		return o2_corrupt(rp->fs, rp->m->inode_blkno, "journal descriptor at log block %u "
				  "holds no tags", pos);
	return (int)n; /* the block ended without LAST_TAG: take what fit, as JBD2 does */
}

enum pass { PASS_SCAN, PASS_REVOKE, PASS_REPLAY };

struct replay_arg {
	uint32_t data_pos;
	uint32_t seq;
};

static int replay_tag(struct replay *rp, const struct tag *t, unsigned i, void *arg)
{
	struct replay_arg *a = arg;
	struct o2_fs *fs = rp->fs;
	uint32_t pos = a->data_pos;
	int r;

	for (unsigned k = 0; k < i; k++)
		pos = next_pos(rp->m, pos);
	if (t->blkno <= O2_SUPER_BLKNO - 1 || t->blkno >= fs->nblocks)
		return o2_corrupt(fs, rp->m->inode_blkno, "journal names home block %llu, outside "
				  "the volume", (unsigned long long)t->blkno);
	rp->done++;
	if (revoked(&rp->revokes, t->blkno, a->seq)) {
		rp->st.blocks_revoked++;
		return replay_report(rp);
	}
	r = read_log(rp, pos, rp->data);
	if (r < 0)
		return r;
	if (t->flags & JBD2_TAG_ESCAPE)
		*(o2be32 *)rp->data = cpu_be32(JBD2_MAGIC);
	r = o2_blockdev_write(fs->dev, rp->data, fs->bs, t->blkno << fs->bits);
	if (r < 0)
		return o2_fail(fs, r, "writing block %llu during replay: %s",
			       (unsigned long long)t->blkno, strerror(-r));
	/* the cache must not serve the version replay replaced */
	o2_cache_forget(fs, t->blkno);
	rp->st.blocks_replayed++;
	return replay_report(rp);
}

static int collect_revokes(struct replay *rp, uint32_t pos, const uint8_t *blk, uint32_t seq)
{
	const struct jbd2_revoke_header *rh = (const struct jbd2_revoke_header *)blk;
	unsigned rs = rp->m->tags64 ? 8 : 4;
	uint32_t count = be32(rh->r_count);

	if (count < sizeof(*rh) || count > rp->fs->bs)
		return o2_corrupt(rp->fs, rp->m->inode_blkno, "journal revoke block at log block %u "
				  "claims %u bytes", pos, count);
	for (uint32_t off = sizeof(*rh); off + rs <= count; off += rs) {
		uint64_t b = rs == 8 ? be64(*(const o2be64 *)(blk + off))
				     : be32(*(const o2be32 *)(blk + off));
		int r = revoke_set(&rp->revokes, b, seq);

		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * One pass over the log.  PASS_SCAN finds where committed transactions
 * end (rp->end_seq); the others stop there.
 */
static int do_pass(struct replay *rp, enum pass pass)
{
	const struct o2_jmap *m = rp->m;
	uint32_t pos = m->start, seq = m->tail_seq;
	uint32_t ring = m->maxlen - m->first, walked = 0;

	while (pass == PASS_SCAN || tid_gt(rp->end_seq, seq)) {
		int r = read_log(rp, pos, rp->buf);
		const struct jbd2_header *h = (const struct jbd2_header *)rp->buf;

		if (r < 0)
			return r;
		if (be32(h->h_magic) != JBD2_MAGIC || be32(h->h_sequence) != seq) {
			if (pass == PASS_SCAN)
				break;
			return o2_corrupt(rp->fs, m->inode_blkno, "journal changed during replay at "
					  "log block %u", pos);
		}
		uint32_t type = be32(h->h_blocktype);

		if (type == JBD2_DESCRIPTOR_BLOCK) {
			struct replay_arg a = { next_pos(m, pos), seq };
			int n = parse_tags(rp, pos, rp->buf, pass == PASS_REPLAY ? replay_tag : NULL,
					   &a);

			if (n < 0)
				return n;
			/* a torn descriptor of an unfinished transaction: the log ends here */
			if (pass == PASS_SCAN && walked + (uint32_t)n + 1 > ring)
				break;
			if (pass == PASS_SCAN)
				rp->pending += (uint64_t)n;
			for (int k = 0; k <= n; k++)
				pos = next_pos(m, pos);
			walked += (uint32_t)n + 1;
		} else if (type == JBD2_REVOKE_BLOCK) {
			if (pass == PASS_REVOKE) {
				r = collect_revokes(rp, pos, rp->buf, seq);
				if (r < 0)
					return r;
			}
			pos = next_pos(m, pos);
			walked++;
		} else if (type == JBD2_COMMIT_BLOCK) {
			pos = next_pos(m, pos);
			walked++;
			seq++;
			if (pass == PASS_SCAN) {
				rp->st.transactions++;
				rp->total += rp->pending;
				rp->pending = 0;
			}
		} else {
			if (pass == PASS_SCAN)
				break; /* not a log block we know: the log ends here */
			return o2_corrupt(rp->fs, m->inode_blkno, "journal block %u has type %u", pos,
					  type);
		}
		if (walked > ring)
			return o2_corrupt(rp->fs, m->inode_blkno, "journal log runs around the ring "
					  "without ending");
	}
	if (pass == PASS_SCAN)
		rp->end_seq = seq;
	return 0;
}

int o2_journal_recover(struct o2_fs *fs, unsigned slot, struct o2_replay_stats *ret)
{
	struct o2_jmap m;
	struct replay rp = { .fs = fs, .m = &m };
	int r;

	if (fs->ro_reason)
		return -EROFS;
	if (!(fs->flags & O2_OPEN_RDWR))
		return o2_fail(fs, -EROFS, "journal replay needs the volume open read-write");
	r = o2_jmap_load(fs, slot, &m);
	if (r < 0)
		return r;
	rp.st.first_seq = rp.st.next_seq = m.tail_seq;
	if (!(m.ij_flags & O2_JOURNAL_DIRTY))
		goto out_done; /* cleanly closed: nothing to do */
	rp.buf = o2_malloc(fs->bs);
	rp.data = o2_malloc(fs->bs);
	if (!rp.buf || !rp.data) {
		r = -ENOMEM;
		goto out;
	}
	if (m.start && m.start < m.first) {
		r = o2_corrupt(fs, m.sb_phys, "slot %u: the log starts at block %u, before its "
			       "first block %u", slot, m.start, m.first);
		goto out;
	}
	if (m.start) {
		r = replay_report(&rp);
		if (r == 0)
			r = do_pass(&rp, PASS_SCAN);
		if (r == 0)
			r = replay_report(&rp);
		if (r == 0)
			r = do_pass(&rp, PASS_REVOKE);
		if (r == 0)
			r = do_pass(&rp, PASS_REPLAY);
		if (r < 0)
			goto out;
		rp.st.next_seq = rp.end_seq;
	}
	/* replayed blocks durable, then the log empty, then the inode clean */
	r = o2_blockdev_flush(fs->dev);
	if (r == 0) {
		r = o2_blockdev_read(fs->dev, rp.buf, fs->bs, m.sb_phys << fs->bits);
		if (r == 0) {
			struct jbd2_superblock *sb = (struct jbd2_superblock *)rp.buf;

			sb->s_start = 0;
			sb->s_sequence = cpu_be32(rp.st.next_seq);
			r = o2_blockdev_write(fs->dev, rp.buf, fs->bs, m.sb_phys << fs->bits);
		}
		if (r == 0)
			r = o2_blockdev_flush(fs->dev);
	}
	if (r < 0) {
		r = o2_fs_abort(fs, r, "journal replay");
		goto out;
	}
	r = o2_journal_set_dirty(fs, m.inode_blkno, false, true);
	if (r < 0)
		goto out;
out_done:
	if (ret)
		*ret = rp.st;
	r = 0;
out:
	free(rp.buf);
	free(rp.data);
	free(rp.revokes.keys);
	free(rp.revokes.seqs);
	o2_jmap_free(&m);
	return r;
}
