/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Quotas (usrquota, grpquota), in OCFS2's two kinds of quota file.
 *
 * Counting.  The journal shows us every inode block before a handle
 * changes it (o2_journal_watch): we note its owner, group and clusters, and
 * once no handle is open any more we compare them with what the block holds
 * then.  So every change is counted exactly as fsck.ocfs2 counts usage -
 * allocation, truncation, chown, creation, deletion, reflink - without a
 * call at each place that makes one.  A block first noted in a batch keeps
 * that first note until the batch ends, so nested handles count once.
 *
 * Where changes wait.  The change of each id since the last fold is kept in
 * memory and in an entry of this slot's local quota file (struct
 * o2_local_dqblk: id, space change, inode change), written in the same
 * running transaction as the change itself, so a crash replays both or
 * neither.  Only entries the file already has are used there (a handle
 * of quota blocks alone, run as the last handle ends: it must not allocate
 * in the middle of someone else's operation); an id that finds none waits
 * in memory until the next sync grows the file.
 *
 * Folding.  On the sync interval (the global file's dqi_syncms), at sync
 * and at close, each id's change is added to its entry in the global file
 * (inserted into the radix tree if new) and its local entry is freed, in
 * one transaction, under the global file's cluster lock.  A local file
 * left in use (a crash) is read at open: its entries are changes not yet
 * folded, and the next fold takes them.  At a clean close every entry is
 * free and the local file is marked clean, as the kernel leaves it.
 *
 * Left for later: limits (reading them, EDQUOT, grace times), deleting
 * global entries that fall to zero (they stay, harmless), dqb_use_count
 * (left as found: ocfs2d nodes do not pin entries), and recovering another
 * slot's local file.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "error.h"
#include "extent_write.h"
#include "inode_write.h"
#include "journal.h"
#include "quota.h"
#include "reserve.h"

#define QTYPES 2
/* Free local entries a sync leaves (it grows the file to them). */
#define LOCAL_LOW 64u
/* Ids written to the local file in one handle. */
#define SETTLE_BATCH 32u

struct qdq {
	uint32_t id;
	bool used;	/* table slot in use */
	bool dirty;	/* space/inodes not yet in the local entry */
	int64_t space;	/* bytes: change not yet folded */
	int64_t inodes;
	int64_t entry;	/* local entry index, -1: none */
	/* the global entry as last read (known): limits, usage, grace deadlines */
	bool known;
	uint64_t gspace, ginodes, bsoft, bhard, isoft, ihard, btime, itime;
};

struct qtype {
	bool on;
	uint32_t bgrace, igrace; /* seconds, from the global file's info */
	uint64_t gino, lino; /* the global file's and this slot's local file's inodes */
	uint32_t chunks, blocks; /* the local file's info (we alone write it) */
	uint32_t free_entries;	 /* free entries in the local file's blocks */
	struct qdq *tab;
	unsigned cap, n, ndirty;
};

struct qsnap {
	struct o2_buf *b;
	uint32_t uid, gid, clusters;
	bool counted;
};

struct o2_quota {
	struct o2_fs *fs;
	struct qtype t[QTYPES];
	struct qsnap *snaps;
	unsigned nsnaps, capsnaps;
	bool settling, due;
	uint32_t syncms;
	uint64_t synced_ns;
};

static const char *const type_name[QTYPES] = { "user", "group" };

/* ---- the table of ids with changes ---- */

static unsigned slot_of(uint32_t id, unsigned cap)
{
	return (unsigned)((id * 0x9E3779B1u) & (cap - 1));
}

static struct qdq *find(struct qtype *t, uint32_t id)
{
	if (!t->cap)
		return NULL;
	for (unsigned i = slot_of(id, t->cap);; i = (i + 1) & (t->cap - 1)) {
		if (!t->tab[i].used)
			return NULL;
		if (t->tab[i].id == id)
			return &t->tab[i];
	}
}

static struct qdq *place(struct qdq *tab, unsigned cap, uint32_t id)
{
	unsigned i = slot_of(id, cap);

	while (tab[i].used)
		i = (i + 1) & (cap - 1);
	tab[i] = (struct qdq){ .id = id, .used = true, .entry = -1 };
	return &tab[i];
}

/* Rebuild the table at cap slots, keeping the ids keep says to. */
static int rebuild(struct qtype *t, unsigned cap, bool (*keep)(const struct qdq *))
{
	struct qdq *tab = o2_calloc(cap, sizeof(*tab));

	if (!tab)
		return -ENOMEM;
	t->n = t->ndirty = 0;
	for (unsigned i = 0; i < t->cap; i++) {
		const struct qdq *d = &t->tab[i];

		if (!d->used || !keep(d))
			continue;
		*place(tab, cap, d->id) = *d;
		t->n++;
		t->ndirty += d->dirty;
	}
	free(t->tab);
	t->tab = tab;
	t->cap = cap;
	return 0;
}

static bool keep_all(const struct qdq *d)
{
	(void)d;
	return true;
}

static bool keep_pending(const struct qdq *d)
{
	return d->entry >= 0 || d->space || d->inodes;
}

/* Changes wait for a fold (in memory or in local entries). */
static bool pending(const struct qtype *t)
{
	for (unsigned i = 0; i < t->cap; i++)
		if (t->tab[i].used && (t->tab[i].entry >= 0 || t->tab[i].space || t->tab[i].inodes))
			return true;
	return false;
}

static int get(struct qtype *t, uint32_t id, struct qdq **ret)
{
	struct qdq *d = find(t, id);

	if (!d) {
		if ((t->n + 1) * 2 > t->cap) {
			int r = rebuild(t, t->cap ? t->cap * 2 : 64, keep_all);

			if (r < 0)
				return r;
		}
		d = place(t->tab, t->cap, id);
		t->n++;
	}
	*ret = d;
	return 0;
}

static int charge(struct qtype *t, uint32_t id, int64_t space, int64_t inodes)
{
	struct qdq *d;
	int r;

	if (!t->on || (!space && !inodes))
		return 0;
	r = get(t, id, &d);
	if (r < 0)
		return r;
	d->space += space;
	d->inodes += inodes;
	if (!d->dirty) {
		d->dirty = true;
		t->ndirty++;
	}
	return 0;
}

/* ---- quota file blocks ---- */

/* Block lblk of quota file ino (new: a fresh zeroed block logged in tr). */
static int qblock(struct o2_fs *fs, struct o2_trans *tr, uint64_t ino, uint32_t lblk, bool new,
		  struct o2_buf **ret)
{
	struct o2_buf *ib;
	struct o2_extent ext;
	int r;

	*ret = NULL;
	r = o2_bread(fs, ino, O2_META_INODE, &ib);
	if (r < 0)
		return r;
	struct o2_dinode *di = o2_buf_dinode(ib);

	if (!(le32(di->i_flags) & O2_FL_QUOTA) || (le16(di->i_dyn_features) & O2_DYN_INLINE_DATA)) {
		o2_brelse(fs, ib);
		return o2_corrupt(fs, ino, "is not a quota file");
	}
	if (((uint64_t)lblk << fs->bits) >= le64(di->i_size)) {
		o2_brelse(fs, ib);
		return o2_corrupt(fs, ino, "quota file of %llu bytes has no block %u",
				  (unsigned long long)le64(di->i_size), lblk);
	}
	r = o2_tree_map(fs, &(struct o2_tree_root){ ino, &di->id2.i_list, le16(di->id2.i_list.count) },
			lblk >> fs->bpc_bits, &ext);
	o2_brelse(fs, ib);
	if (r < 0)
		return r;
	if (!ext.blkno)
		return o2_corrupt(fs, ino, "quota file has a hole at block %u", lblk);
	uint64_t blk = ext.blkno + (lblk & ((1u << fs->bpc_bits) - 1));

	if (new)
		return o2_trans_bnew(tr, fs, blk, O2_META_QUOTA, ret);
	return o2_bread(fs, blk, O2_META_QUOTA, ret);
}

/* qblock, then logged in tr. */
static int qblock_log(struct o2_fs *fs, struct o2_trans *tr, uint64_t ino, uint32_t lblk,
		      struct o2_buf **ret)
{
	int r = qblock(fs, NULL, ino, lblk, false, ret);

	if (r == 0 && (r = o2_trans_add(tr, *ret)) < 0) {
		o2_brelse(fs, *ret);
		*ret = NULL;
	}
	return r;
}

/* Give quota file ino at least blocks blocks of clusters (its own handles). */
static int extend_to(struct o2_fs *fs, uint64_t ino, uint32_t blocks)
{
	for (;;) {
		struct o2_buf *ib;
		struct o2_tree_owner o;
		struct o2_trans *tr;
		uint32_t meta, spare, start, got;
		int r = o2_bread(fs, ino, O2_META_INODE, &ib);

		if (r < 0)
			return r;
		struct o2_dinode *di = o2_buf_dinode(ib);
		uint32_t have = le32(di->i_clusters);

		if (((uint64_t)have << fs->bpc_bits) >= blocks) {
			o2_brelse(fs, ib);
			return 0;
		}
		uint32_t want = (uint32_t)((((uint64_t)blocks + (1u << fs->bpc_bits) - 1) >>
					     fs->bpc_bits) - have);

		o2_inode_owner(ib, &o);
		r = o2_tree_meta_need(fs, &o, have, 1, &meta);
		if (r == 0)
			r = o2_reserve(fs, &(struct o2_resv){ .clusters = 1, .meta = meta }, &spare);
		if (r == 0)
			r = o2_trans_begin(fs, O2_TREE_CREDITS + O2_ALLOC_CREDITS + 2, &tr);
		if (r < 0) {
			o2_brelse(fs, ib);
			return r;
		}
		if (want > spare + 1)
			want = spare + 1;
		r = o2_trans_add(tr, ib);
		if (r == 0)
			r = o2_clusters_alloc(tr, fs, 1, want, &start, &got);
		if (r == 0)
			r = o2_tree_insert(tr, fs, &o, &(struct o2_extent){
							      have, got, (uint64_t)start << fs->bpc_bits, 0 });
		if (r == 0)
			di->i_clusters = cpu_le32(have + got);
		o2_brelse(fs, ib);
		r = o2_trans_finish(tr, r);
		if (r < 0)
			return r;
	}
}

/* Set quota file ino's size to blocks blocks (in tr). */
static int set_size(struct o2_fs *fs, struct o2_trans *tr, uint64_t ino, uint32_t blocks)
{
	struct o2_buf *ib;
	int r = o2_bread(fs, ino, O2_META_INODE, &ib);

	if (r == 0)
		r = o2_trans_add(tr, ib);
	if (r == 0)
		o2_buf_dinode(ib)->i_size = cpu_le64((uint64_t)blocks << fs->bits);
	if (ib)
		o2_brelse(fs, ib);
	return r;
}

/* ---- the local file ---- */

static uint32_t chunk_block(const struct o2_fs *fs, uint32_t c)
{
	return 1 + (o2_local_chunk_blocks(fs->bs) + 1) * c;
}

/* Entries chunk c maps in the blocks the file has. */
static uint32_t chunk_len(const struct o2_fs *fs, const struct qtype *t, uint32_t c)
{
	uint32_t epb = o2_local_dq_per_block(fs->bs);

	if (c + 1 < t->chunks)
		return o2_local_chunk_blocks(fs->bs) * epb;
	return (t->blocks - chunk_block(fs, c) - 1) * epb;
}

static void entry_place(const struct o2_fs *fs, int64_t e, uint32_t *lblk, size_t *off)
{
	uint32_t epb = o2_local_dq_per_block(fs->bs), per = o2_local_chunk_blocks(fs->bs) * epb;
	uint32_t c = (uint32_t)(e / per), i = (uint32_t)(e % per);

	*lblk = chunk_block(fs, c) + 1 + i / epb;
	*off = (size_t)(i % epb) * sizeof(struct o2_local_dqblk);
}

static uint32_t *chunk_free(struct o2_buf *hb)
{
	return (uint32_t *)hb->data;
}

static int read_local_info(struct o2_fs *fs, struct qtype *t, unsigned type, struct o2_buf **ret)
{
	struct o2_buf *b;
	int r = qblock(fs, NULL, t->lino, 0, false, &b);

	if (r < 0)
		return r;
	const struct o2_local_dqinfo *li = (const void *)(b->data + O2_QINFO_OFF);

	if (le32(*(o2le32 *)b->data) != O2_LOCAL_QMAGIC(type)) {
		o2_brelse(fs, b);
		return o2_corrupt(fs, t->lino, "local %s quota file has a bad magic number",
				  type_name[type]);
	}
	t->chunks = le32(li->dqi_chunks);
	t->blocks = le32(li->dqi_blocks);
	if (!t->chunks || t->blocks <= chunk_block(fs, t->chunks - 1) ||
	    t->blocks > chunk_block(fs, t->chunks - 1) + 1 + o2_local_chunk_blocks(fs->bs)) {
		o2_brelse(fs, b);
		return o2_corrupt(fs, t->lino, "local %s quota file: %u chunks do not fit its %u blocks",
				  type_name[type], t->chunks, t->blocks);
	}
	*ret = b;
	return 0;
}

static bool bit_test(const uint8_t *map, uint32_t i)
{
	return map[i >> 3] & (1u << (i & 7));
}

/* Load the entries in use (changes a crash left unfolded) and count the free ones. */
static int load_local(struct o2_fs *fs, struct qtype *t)
{
	uint32_t per = o2_local_chunk_blocks(fs->bs) * o2_local_dq_per_block(fs->bs);

	t->free_entries = 0;
	for (uint32_t c = 0; c < t->chunks; c++) {
		struct o2_buf *hb;
		uint32_t len = chunk_len(fs, t, c), used = 0;
		int r = qblock(fs, NULL, t->lino, chunk_block(fs, c), false, &hb);

		if (r < 0)
			return r;
		for (uint32_t i = 0; i < len && r == 0; i++) {
			const uint8_t *map = hb->data + 4;
			struct o2_buf *eb;
			uint32_t lblk;
			size_t off;
			struct qdq *d;

			if (!bit_test(map, i))
				continue;
			used++;
			entry_place(fs, (int64_t)c * per + i, &lblk, &off);
			r = qblock(fs, NULL, t->lino, lblk, false, &eb);
			if (r < 0)
				break;
			const struct o2_local_dqblk *e = (const void *)(eb->data + off);

			r = get(t, (uint32_t)le64(e->dqb_id), &d);
			if (r == 0 && d->entry >= 0)
				r = o2_corrupt(fs, t->lino, "local quota file has two entries of id %u",
					       d->id);
			if (r == 0) {
				d->space = (int64_t)le64(e->dqb_spacemod);
				d->inodes = (int64_t)le64(e->dqb_inodemod);
				d->entry = (int64_t)c * per + i;
			}
			o2_brelse(fs, eb);
		}
		if (r == 0 && le32(*chunk_free(hb)) != len - used)
			r = o2_corrupt(fs, t->lino, "local quota chunk %u counts %u free entries, "
				       "its bitmap %u", c, le32(*chunk_free(hb)), len - used);
		o2_brelse(fs, hb);
		if (r < 0)
			return r;
		t->free_entries += len - used;
	}
	return 0;
}

/* Take a free local entry for d (in tr): -ENOSPC when the file has none. */
static int entry_take(struct o2_fs *fs, struct o2_trans *tr, struct qtype *t, struct qdq *d)
{
	uint32_t per = o2_local_chunk_blocks(fs->bs) * o2_local_dq_per_block(fs->bs);

	if (!t->free_entries)
		return -ENOSPC;
	for (uint32_t c = 0; c < t->chunks; c++) {
		struct o2_buf *hb;
		uint32_t len = chunk_len(fs, t, c);
		int r = qblock(fs, NULL, t->lino, chunk_block(fs, c), false, &hb);

		if (r < 0)
			return r;
		if (!le32(*chunk_free(hb))) {
			o2_brelse(fs, hb);
			continue;
		}
		uint8_t *map = hb->data + 4;
		uint32_t i = 0;

		while (i < len && bit_test(map, i))
			i++;
		if (i == len) {
			o2_brelse(fs, hb);
			return o2_corrupt(fs, t->lino, "local quota chunk %u counts free entries "
					  "but has none", c);
		}
		r = o2_trans_add(tr, hb);
		if (r == 0) {
			map[i >> 3] |= (uint8_t)(1u << (i & 7));
			*chunk_free(hb) = cpu_le32(le32(*chunk_free(hb)) - 1);
			d->entry = (int64_t)c * per + i;
			t->free_entries--;
		}
		o2_brelse(fs, hb);
		return r;
	}
	return o2_corrupt(fs, t->lino, "local quota file counts free entries but has none");
}

/* Write d's change into its entry; with release, free the entry instead. */
static int entry_put(struct o2_fs *fs, struct o2_trans *tr, struct qtype *t, struct qdq *d,
		     bool release)
{
	uint32_t per = o2_local_chunk_blocks(fs->bs) * o2_local_dq_per_block(fs->bs);
	struct o2_buf *eb;
	uint32_t lblk;
	size_t off;
	int r;

	entry_place(fs, d->entry, &lblk, &off);
	r = qblock_log(fs, tr, t->lino, lblk, &eb);
	if (r < 0)
		return r;
	struct o2_local_dqblk *e = (void *)(eb->data + off);

	if (release) {
		memset(e, 0, sizeof(*e));
	} else {
		e->dqb_id = cpu_le64(d->id);
		e->dqb_spacemod = cpu_le64((uint64_t)d->space);
		e->dqb_inodemod = cpu_le64((uint64_t)d->inodes);
	}
	o2_brelse(fs, eb);
	if (!release)
		return 0;

	struct o2_buf *hb;
	uint32_t c = (uint32_t)(d->entry / per), i = (uint32_t)(d->entry % per);

	r = qblock_log(fs, tr, t->lino, chunk_block(fs, c), &hb);
	if (r < 0)
		return r;
	hb->data[4 + (i >> 3)] &= (uint8_t)~(1u << (i & 7));
	*chunk_free(hb) = cpu_le32(le32(*chunk_free(hb)) + 1);
	o2_brelse(fs, hb);
	d->entry = -1;
	t->free_entries++;
	return 0;
}

/* Grow the local file by a block of entries (a new chunk when the last is full). */
static int local_grow(struct o2_fs *fs, struct qtype *t)
{
	uint32_t last = chunk_block(fs, t->chunks - 1);
	bool chunk = t->blocks - last - 1 == o2_local_chunk_blocks(fs->bs);
	uint32_t nb = t->blocks + (chunk ? 2 : 1);
	struct o2_trans *tr;
	struct o2_buf *b, *hb;
	int r = extend_to(fs, t->lino, nb);

	if (r == 0)
		r = o2_trans_begin(fs, 4, &tr);
	if (r < 0)
		return r;
	r = set_size(fs, tr, t->lino, nb);
	if (r == 0 && chunk) {
		r = qblock(fs, tr, t->lino, t->blocks, true, &hb);
		if (r == 0) {
			*chunk_free(hb) = cpu_le32(o2_local_dq_per_block(fs->bs));
			o2_brelse(fs, hb);
		}
	} else if (r == 0) {
		r = qblock_log(fs, tr, t->lino, last, &hb);
		if (r == 0) {
			*chunk_free(hb) = cpu_le32(le32(*chunk_free(hb)) +
						   o2_local_dq_per_block(fs->bs));
			o2_brelse(fs, hb);
		}
	}
	if (r == 0)
		r = qblock(fs, tr, t->lino, nb - 1, true, &b);
	if (r == 0)
		o2_brelse(fs, b);
	if (r == 0)
		r = qblock_log(fs, tr, t->lino, 0, &b);
	if (r == 0) {
		struct o2_local_dqinfo *li = (void *)(b->data + O2_QINFO_OFF);

		t->chunks += chunk;
		t->blocks = nb;
		li->dqi_chunks = cpu_le32(t->chunks);
		li->dqi_blocks = cpu_le32(t->blocks);
		t->free_entries += o2_local_dq_per_block(fs->bs);
		o2_brelse(fs, b);
	}
	return o2_trans_finish(tr, r);
}

/* Set or clear the local file's clean flag. */
static int local_mark(struct o2_fs *fs, struct qtype *t, bool clean)
{
	struct o2_trans *tr;
	struct o2_buf *b;
	int r = qblock(fs, NULL, t->lino, 0, false, &b);

	if (r < 0)
		return r;
	struct o2_local_dqinfo *li = (void *)(b->data + O2_QINFO_OFF);
	uint32_t flags = le32(li->dqi_flags);
	uint32_t want = clean ? flags | O2_OLQF_CLEAN : flags & ~O2_OLQF_CLEAN;

	if (want != flags) {
		r = o2_trans_begin(fs, 1, &tr);
		if (r == 0) {
			r = o2_trans_add(tr, b);
			if (r == 0)
				li->dqi_flags = cpu_le32(want);
			r = o2_trans_finish(tr, r);
		}
	}
	o2_brelse(fs, b);
	return r;
}

/* ---- counting ---- */

static bool counted(const struct o2_fs *fs, const struct o2_buf *b, struct qsnap *s)
{
	const struct o2_dinode *di = (const void *)b->data;
	uint32_t flags = le32(di->i_flags);

	s->uid = le32(di->i_uid);
	s->gid = le32(di->i_gid);
	s->clusters = le32(di->i_clusters);
	return o2_sig_ok(di->i_signature, O2_SIG_INODE) && (flags & O2_FL_VALID) &&
	       le32(di->i_fs_generation) == fs->info.fs_generation &&
	       (!(flags & O2_FL_SYSTEM) || b->blkno == fs->info.root_blkno);
}

static int watch_add(void *arg, struct o2_buf *b)
{
	struct o2_quota *q = arg;
	struct o2_fs *fs = q->fs;
	const struct o2_dinode *di = (const void *)b->data;
	struct qsnap s;

	if (b->quota_watched)
		return 0;
	s.counted = counted(fs, b, &s);
	/* system files are never counted, and stay system files */
	if (!s.counted && o2_sig_ok(di->i_signature, O2_SIG_INODE) &&
	    (le32(di->i_flags) & O2_FL_SYSTEM))
		return 0;
	if (q->nsnaps == q->capsnaps) {
		unsigned cap = q->capsnaps ? q->capsnaps * 2 : 16;
		struct qsnap *n = o2_realloc(q->snaps, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		q->snaps = n;
		q->capsnaps = cap;
	}
	s.b = b;
	b->refs++;
	b->quota_watched = true;
	q->snaps[q->nsnaps++] = s;
	return 0;
}

/* Write the changes waiting in memory into local entries (no handle open). */
static int settle(struct o2_quota *q)
{
	struct o2_fs *fs = q->fs;
	int r = 0;

	q->settling = true;
	for (unsigned ty = 0; ty < QTYPES && r == 0; ty++) {
		struct qtype *t = &q->t[ty];
		unsigned i = 0;

		while (t->ndirty && r == 0) {
			struct o2_trans *tr;
			unsigned done = 0, skipped = 0;

			r = o2_trans_begin(fs, 2 * SETTLE_BATCH, &tr);
			if (r < 0)
				break;
			for (; i < t->cap && done < SETTLE_BATCH && r == 0; i++) {
				struct qdq *d = &t->tab[i];

				if (!d->used || !d->dirty)
					continue;
				if (d->entry < 0 && !d->space && !d->inodes) {
					d->dirty = false;
					t->ndirty--;
					continue;
				}
				if (d->entry < 0) {
					r = entry_take(fs, tr, t, d);
					if (r == -ENOSPC) {
						/* waits in memory for the next sync */
						r = 0;
						skipped++;
						continue;
					}
				}
				if (r == 0)
					r = entry_put(fs, tr, t, d, false);
				if (r == 0) {
					d->dirty = false;
					t->ndirty--;
					done++;
				}
			}
			r = o2_trans_finish(tr, r);
			if (i == t->cap)
				break;
		}
	}
	q->settling = false;
	return r;
}

static int watch_done(void *arg)
{
	struct o2_quota *q = arg;
	struct o2_fs *fs = q->fs;
	int r = 0;

	if (q->settling)
		return 0;
	for (unsigned i = 0; i < q->nsnaps; i++) {
		struct qsnap *was = &q->snaps[i], now;
		struct o2_buf *b = was->b;

		now.counted = counted(fs, b, &now);
		for (unsigned ty = 0; ty < QTYPES && r == 0; ty++) {
			struct qtype *t = &q->t[ty];

			if (was->counted)
				r = charge(t, ty ? was->gid : was->uid,
					   -((int64_t)was->clusters << fs->cbits), -1);
			if (r == 0 && now.counted)
				r = charge(t, ty ? now.gid : now.uid,
					   (int64_t)now.clusters << fs->cbits, 1);
		}
		b->quota_watched = false;
		o2_brelse(fs, b);
	}
	q->nsnaps = 0;
	if (r < 0)
		return o2_fail(fs, r, "out of memory counting quota usage");
	return q->t[0].ndirty || q->t[1].ndirty ? settle(q) : 0;
}

/* ---- the global file ---- */

struct ginfo {
	struct o2_buf *hb; /* block 0, logged */
	uint32_t blocks, free_blk, free_entry;
};

static int ginfo_read(struct o2_fs *fs, uint64_t ino, unsigned type, struct o2_buf *hb,
		      struct ginfo *g)
{
	const struct o2_global_dqinfo *gi = (const void *)(hb->data + O2_QINFO_OFF);

	if (le32(*(o2le32 *)hb->data) != O2_GLOBAL_QMAGIC(type) ||
	    le32(*(o2le32 *)(hb->data + 4)) > O2_QUOTA_VERSION)
		return o2_corrupt(fs, ino, "global %s quota file has a bad header", type_name[type]);
	g->hb = hb;
	g->blocks = le32(gi->dqi_blocks);
	g->free_blk = le32(gi->dqi_free_blk);
	g->free_entry = le32(gi->dqi_free_entry);
	if (g->blocks <= O2_QT_TREEOFF || g->free_blk >= g->blocks || g->free_entry >= g->blocks)
		return o2_corrupt(fs, ino, "global %s quota file's info is out of range",
				  type_name[type]);
	return 0;
}

static void ginfo_write(struct ginfo *g)
{
	struct o2_global_dqinfo *gi = (void *)(g->hb->data + O2_QINFO_OFF);

	gi->dqi_blocks = cpu_le32(g->blocks);
	gi->dqi_free_blk = cpu_le32(g->free_blk);
	gi->dqi_free_entry = cpu_le32(g->free_entry);
}

static bool gref_ok(const struct ginfo *g, uint32_t ref)
{
	return ref >= O2_QT_TREEOFF && ref < g->blocks;
}

/* A fresh zeroed block of the global file, off its free list, logged. */
static int gblock_new(struct o2_fs *fs, struct o2_trans *tr, uint64_t ino, struct ginfo *g,
		      uint32_t *blk, struct o2_buf **ret)
{
	struct o2_buf *b;
	int r;

	if (!g->free_blk)
		return o2_fail(fs, -ENOSPC, "the global quota file ran out of the blocks set "
			       "aside for this change");
	r = qblock(fs, NULL, ino, g->free_blk, false, &b);
	if (r < 0)
		return r;
	uint32_t next = le32(((struct o2_qt_leaf_header *)b->data)->dqdh_next_free);

	o2_brelse(fs, b);
	if (next && !gref_ok(g, next))
		return o2_corrupt(fs, ino, "quota free block list points outside the file");
	*blk = g->free_blk;
	g->free_blk = next;
	return qblock(fs, tr, ino, *blk, true, ret);
}

/*
 * At least need blocks on the global file's free list: the file grows by
 * the blocks missing, each put on the list (its own handles; a quota file
 * holds no clusters past its size, and its info counts every block).
 */
static int global_room(struct o2_fs *fs, uint64_t ino, unsigned type, unsigned need)
{
	unsigned have = 0, max = o2_journal_max_credits(fs) - 4;
	struct o2_buf *hb;
	struct ginfo g;
	int r = qblock(fs, NULL, ino, 0, false, &hb);

	if (r < 0)
		return r;
	r = ginfo_read(fs, ino, type, hb, &g);
	o2_brelse(fs, hb);
	for (uint32_t blk = g.free_blk; r == 0 && blk && have < need; have++) {
		struct o2_buf *b;

		r = qblock(fs, NULL, ino, blk, false, &b);
		if (r < 0)
			return r;
		blk = le32(((struct o2_qt_leaf_header *)b->data)->dqdh_next_free);
		o2_brelse(fs, b);
		if (blk && !gref_ok(&g, blk))
			return o2_corrupt(fs, ino, "quota free block list points outside the file");
	}
	while (r == 0 && have < need) {
		unsigned add = need - have < max ? need - have : max;
		struct o2_trans *tr;

		r = extend_to(fs, ino, g.blocks + add);
		if (r == 0)
			r = o2_trans_begin(fs, add + 2, &tr);
		if (r < 0)
			return r;
		r = qblock_log(fs, tr, ino, 0, &hb);
		if (r == 0)
			r = ginfo_read(fs, ino, type, hb, &g);
		if (r == 0)
			r = set_size(fs, tr, ino, g.blocks + add);
		for (unsigned k = 0; r == 0 && k < add; k++) {
			struct o2_buf *b;

			r = qblock(fs, tr, ino, g.blocks, true, &b);
			if (r < 0)
				break;
			((struct o2_qt_leaf_header *)b->data)->dqdh_next_free = cpu_le32(g.free_blk);
			o2_brelse(fs, b);
			g.free_blk = g.blocks++;
		}
		if (hb) {
			if (r == 0)
				ginfo_write(&g);
			o2_brelse(fs, hb);
			hb = NULL;
		}
		r = o2_trans_finish(tr, r);
		have += add;
	}
	return r;
}

static bool dq_unused(const struct o2_global_dqblk *e)
{
	static const struct o2_global_dqblk zero;

	return memcmp(e, &zero, sizeof(zero)) == 0;
}

/* The free-entry list: take leaf blk (header h) off it. */
static int gleaf_unlink(struct o2_fs *fs, struct o2_trans *tr, uint64_t ino, struct ginfo *g,
			struct o2_qt_leaf_header *h)
{
	uint32_t next = le32(h->dqdh_next_free), prev = le32(h->dqdh_prev_free);
	struct o2_buf *b;
	int r;

	if ((next && !gref_ok(g, next)) || (prev && !gref_ok(g, prev)))
		return o2_corrupt(fs, ino, "quota free entry list points outside the file");
	if (next) {
		r = qblock_log(fs, tr, ino, next, &b);
		if (r < 0)
			return r;
		((struct o2_qt_leaf_header *)b->data)->dqdh_prev_free = cpu_le32(prev);
		o2_brelse(fs, b);
	}
	if (prev) {
		r = qblock_log(fs, tr, ino, prev, &b);
		if (r < 0)
			return r;
		((struct o2_qt_leaf_header *)b->data)->dqdh_next_free = cpu_le32(next);
		o2_brelse(fs, b);
	} else {
		g->free_entry = next;
	}
	h->dqdh_next_free = h->dqdh_prev_free = 0;
	return 0;
}

/* A free entry in a leaf, marked taken: *leaf its block (logged), *ret the entry. */
static int gentry_new(struct o2_fs *fs, struct o2_trans *tr, uint64_t ino, struct ginfo *g,
		      uint32_t *leaf, struct o2_buf **lb, struct o2_global_dqblk **ret)
{
	unsigned per = o2_global_dq_per_block(fs->bs);
	int r;

	if (g->free_entry) {
		*leaf = g->free_entry;
		r = qblock_log(fs, tr, ino, *leaf, lb);
	} else {
		r = gblock_new(fs, tr, ino, g, leaf, lb);
		if (r == 0)
			g->free_entry = *leaf;
	}
	if (r < 0)
		return r;
	struct o2_qt_leaf_header *h = (void *)(*lb)->data;
	struct o2_global_dqblk *e = (void *)((*lb)->data + sizeof(*h));
	unsigned n = le16(h->dqdh_entries), i = 0;

	if (n >= per) {
		r = o2_corrupt(fs, ino, "full quota leaf %u is on the free entry list", *leaf);
		goto fail;
	}
	if (n + 1 >= per && (r = gleaf_unlink(fs, tr, ino, g, h)) < 0)
		goto fail;
	while (i < per && !dq_unused(&e[i]))
		i++;
	if (i == per) {
		r = o2_corrupt(fs, ino, "quota leaf %u counts %u entries but has no free one",
			       *leaf, n);
		goto fail;
	}
	h->dqdh_entries = cpu_le16((uint16_t)(n + 1));
	*ret = &e[i];
	return 0;
fail:
	o2_brelse(fs, *lb);
	return r;
}

static unsigned gindex(const struct o2_fs *fs, uint32_t id, unsigned depth)
{
	uint32_t epb = o2_qt_refs_per_block(fs->bs);

	for (unsigned d = o2_qt_depth(fs->bs) - depth - 1; d; d--)
		id /= epb;
	return id % epb;
}

/*
 * Id's entry in the global file: *lb its leaf (logged if tr), *ret the
 * entry in it.  With tr, a missing entry is inserted (tree blocks and
 * leaf as needed); without, -ENOENT.
 */
static int gentry(struct o2_fs *fs, struct o2_trans *tr, uint64_t ino, struct ginfo *g, uint32_t id,
		  struct o2_buf **lb, struct o2_global_dqblk **ret)
{
	unsigned depth = o2_qt_depth(fs->bs), per = o2_global_dq_per_block(fs->bs);
	uint32_t blk = O2_QT_TREEOFF;
	int r;

	for (unsigned d = 0; d < depth; d++) {
		struct o2_buf *b;
		unsigned i = gindex(fs, id, d);

		r = qblock(fs, NULL, ino, blk, false, &b);
		if (r < 0)
			return r;
		uint32_t ref = le32(((o2le32 *)b->data)[i]);

		if (ref && !gref_ok(g, ref)) {
			o2_brelse(fs, b);
			return o2_corrupt(fs, ino, "quota tree block %u points outside the file", blk);
		}
		if (ref && d + 1 == depth) {
			o2_brelse(fs, b);
			r = tr ? qblock_log(fs, tr, ino, ref, lb) : qblock(fs, NULL, ino, ref, false, lb);
			if (r < 0)
				return r;
			struct o2_global_dqblk *e = (void *)((*lb)->data + sizeof(struct o2_qt_leaf_header));

			for (unsigned k = 0; k < per; k++) {
				if (!dq_unused(&e[k]) && le32(e[k].dqb_id) == id) {
					*ret = &e[k];
					return 0;
				}
			}
			o2_brelse(fs, *lb);
			return o2_corrupt(fs, ino, "quota leaf %u holds no entry of id %u", ref, id);
		}
		if (!ref && !tr) {
			o2_brelse(fs, b);
			return -ENOENT;
		}
		if (!ref) {
			struct o2_buf *nb = NULL;
			struct o2_global_dqblk *e = NULL;

			r = o2_trans_add(tr, b);
			if (r == 0 && d + 1 == depth)
				r = gentry_new(fs, tr, ino, g, &ref, lb, &e);
			else if (r == 0)
				r = gblock_new(fs, tr, ino, g, &ref, &nb);
			if (r == 0)
				((o2le32 *)b->data)[i] = cpu_le32(ref);
			if (nb)
				o2_brelse(fs, nb);
			o2_brelse(fs, b);
			if (r < 0)
				return r;
			if (e) {
				e->dqb_id = cpu_le32(id);
				*ret = e;
				return 0;
			}
		} else {
			o2_brelse(fs, b);
		}
		blk = ref;
	}
	return o2_corrupt(fs, ino, "quota tree ends above its leaves");
}

static uint64_t add_clamped(uint64_t v, int64_t d)
{
	if (d < 0 && (uint64_t)-d > v)
		return 0;
	return v + (uint64_t)d;
}

/* Blocks one insertion may take: a tree block per level below the root, and a leaf. */
static unsigned insert_blocks(const struct o2_fs *fs)
{
	return o2_qt_depth(fs->bs);
}

/* d's global entry as read (or written) now. */
static void learn(struct qdq *d, const struct o2_global_dqblk *e)
{
	d->known = true;
	d->gspace = le64(e->dqb_curspace);
	d->ginodes = le64(e->dqb_curinodes);
	d->bsoft = le64(e->dqb_bsoftlimit);
	d->bhard = le64(e->dqb_bhardlimit);
	d->isoft = le64(e->dqb_isoftlimit);
	d->ihard = le64(e->dqb_ihardlimit);
	d->btime = le64(e->dqb_btime);
	d->itime = le64(e->dqb_itime);
}

/*
 * A grace deadline as it should stand: none while usage is within the
 * soft limit; once over it, the one already running, else the one this
 * node started (mine), else one from now.
 */
static uint64_t deadline(uint64_t usage, uint64_t soft, uint64_t cur, uint64_t mine, uint64_t now,
			 uint32_t grace)
{
	if (!soft || usage <= soft)
		return 0;
	if (cur)
		return cur;
	return mine ? mine : now + grace;
}

static uint64_t now_s(struct o2_fs *fs)
{
	return o2_now_ns(fs) / 1000000000ull;
}

/* Ids of the next batch (table slots from i on) the global file has no entry of. */
static unsigned new_ids(struct o2_quota *q, struct qtype *t, unsigned type, unsigned i,
			unsigned batch)
{
	struct o2_fs *fs = q->fs;
	struct o2_buf *hb, *lb;
	struct o2_global_dqblk *e;
	struct ginfo g;
	unsigned done = 0, n = 0;

	if (qblock(fs, NULL, t->gino, 0, false, &hb) < 0)
		return batch;
	int r = ginfo_read(fs, t->gino, type, hb, &g);

	o2_brelse(fs, hb);
	for (; r == 0 && i < t->cap && done < batch; i++) {
		const struct qdq *d = &t->tab[i];

		if (!d->used || (d->entry < 0 && !d->space && !d->inodes))
			continue;
		done++;
		r = gentry(fs, NULL, t->gino, &g, d->id, &lb, &e);
		if (r == 0)
			o2_brelse(fs, lb);
		n += r == -ENOENT;
		if (r == -ENOENT)
			r = 0;
	}
	/* a damaged file: room for all, and the fold reports the damage */
	return r < 0 ? batch : n;
}

/* Fold type t's changes into its global file (its lock held, no handle open). */
static int fold(struct o2_quota *q, unsigned type)
{
	struct o2_fs *fs = q->fs;
	struct qtype *t = &q->t[type];
	unsigned depth = o2_qt_depth(fs->bs);
	unsigned per_id = 2 * depth + 8, batch = (o2_journal_max_credits(fs) - 8) / per_id;
	unsigned i = 0;
	int r = 0;

	if (batch > 32)
		batch = 32;
	if (!batch)
		batch = 1;
	while (r == 0 && i < t->cap) {
		struct o2_trans *tr;
		struct o2_buf *hb = NULL;
		struct ginfo g;
		unsigned done = 0;

		/* room for the batch's insertions, before anything changes */
		r = global_room(fs, t->gino, type, insert_blocks(fs) * new_ids(q, t, type, i, batch));
		if (r == 0)
			r = o2_trans_begin(fs, batch * per_id + 4, &tr);
		if (r < 0)
			return r;
		r = qblock_log(fs, tr, t->gino, 0, &hb);
		if (r == 0)
			r = ginfo_read(fs, t->gino, type, hb, &g);
		for (; r == 0 && i < t->cap && done < batch; i++) {
			struct qdq *d = &t->tab[i];
			struct o2_buf *lb;
			struct o2_global_dqblk *e;

			if (!d->used || (d->entry < 0 && !d->space && !d->inodes))
				continue;
			done++;
			r = gentry(fs, tr, t->gino, &g, d->id, &lb, &e);
			if (r < 0)
				break;
			uint64_t sp = add_clamped(le64(e->dqb_curspace), d->space);
			uint64_t in = add_clamped(le64(e->dqb_curinodes), d->inodes);

			e->dqb_curspace = cpu_le64(sp);
			e->dqb_curinodes = cpu_le64(in);
			e->dqb_btime = cpu_le64(deadline(sp, le64(e->dqb_bsoftlimit), le64(e->dqb_btime),
							 d->known ? d->btime : 0, now_s(fs), t->bgrace));
			e->dqb_itime = cpu_le64(deadline(in, le64(e->dqb_isoftlimit), le64(e->dqb_itime),
							 d->known ? d->itime : 0, now_s(fs), t->igrace));
			/* an all-zero entry reads as free: id 0 keeps a use count */
			if (dq_unused(e))
				e->dqb_use_count = cpu_le32(1);
			learn(d, e);
			o2_brelse(fs, lb);
			if (d->entry >= 0)
				r = entry_put(fs, tr, t, d, true);
			if (r == 0) {
				d->space = d->inodes = 0;
				if (d->dirty) {
					d->dirty = false;
					t->ndirty--;
				}
			}
		}
		if (hb) {
			if (r == 0)
				ginfo_write(&g);
			o2_brelse(fs, hb);
		}
		r = o2_trans_finish(tr, r);
	}
	/*
	 * Limits are read again at the next use of each id: another node may
	 * have set them (their usage and deadlines too) since this node read them.
	 */
	if (r == 0)
		r = rebuild(t, t->cap ? t->cap : 64, keep_pending);
	return r;
}

/* ---- open, close, sync ---- */

static int type_open(struct o2_fs *fs, struct o2_quota *q, unsigned type)
{
	struct qtype *t = &q->t[type];
	struct o2_buf *b;
	struct ginfo g;
	int r;

	t->on = true;
	r = o2_sysfile_lookup(fs, O2_SYS_USER_QUOTA + type, 0, &t->gino);
	if (r == 0)
		r = o2_sysfile_lookup(fs, O2_SYS_LOCAL_USER_QUOTA + type, fs->opts.slot, &t->lino);
	if (r == 0)
		r = qblock(fs, NULL, t->gino, 0, false, &b);
	if (r < 0)
		return r;
	r = ginfo_read(fs, t->gino, type, b, &g);
	if (r == 0) {
		const struct o2_global_dqinfo *gi = (const void *)(b->data + O2_QINFO_OFF);

		if (!q->syncms)
			q->syncms = le32(gi->dqi_syncms);
		t->bgrace = le32(gi->dqi_bgrace);
		t->igrace = le32(gi->dqi_igrace);
	}
	o2_brelse(fs, b);
	if (r == 0)
		r = read_local_info(fs, t, type, &b);
	if (r < 0)
		return r;
	o2_brelse(fs, b);
	r = load_local(fs, t);
	if (r == 0)
		r = local_mark(fs, t, false);
	return r;
}

int o2_quota_open(struct o2_fs *fs)
{
	uint32_t on = fs->info.feature_ro_compat &
		      (O2_FEATURE_RO_COMPAT_USRQUOTA | O2_FEATURE_RO_COMPAT_GRPQUOTA);
	struct o2_quota *q;
	int r = 0;

	if (!on || !fs->journal)
		return 0;
	q = o2_calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->fs = fs;
	fs->quota = q;
	if (on & O2_FEATURE_RO_COMPAT_USRQUOTA)
		r = type_open(fs, q, 0);
	if (r == 0 && (on & O2_FEATURE_RO_COMPAT_GRPQUOTA))
		r = type_open(fs, q, 1);
	if (r < 0) {
		o2_quota_free(fs);
		return r;
	}
	if (!q->syncms)
		q->syncms = 10000;
	q->synced_ns = o2_now_ns(fs);
	o2_journal_watch(fs, &(struct o2_trans_watch){ watch_add, watch_done, q });
	/* entries for the first changes; on a shared volume the first sync
	 * makes them (growing may need the global bitmap's lock) */
	for (unsigned ty = 0; ty < QTYPES && r == 0 && !fs->opts.lock_held; ty++)
		while (r == 0 && q->t[ty].on && q->t[ty].free_entries < LOCAL_LOW)
			r = local_grow(fs, &q->t[ty]);
	return r;
}

bool o2_quota_due(struct o2_fs *fs)
{
	struct o2_quota *q = fs->quota;

	if (!q || q->due)
		return q && q->due;
	if (!pending(&q->t[0]) && !pending(&q->t[1]))
		return false;
	q->due = o2_now_ns(fs) - q->synced_ns >= (uint64_t)q->syncms * 1000000ull;
	return q->due;
}

int o2_quota_sync(struct o2_fs *fs, bool if_locked)
{
	struct o2_quota *q = fs->quota;
	int r = 0;

	if (!q || fs->ro_reason)
		return 0;
	for (unsigned ty = 0; ty < QTYPES; ty++) {
		if (!q->t[ty].on || (!pending(&q->t[ty]) && q->t[ty].free_entries >= LOCAL_LOW))
			continue;
		if (if_locked && !o2_lock_have(fs, q->t[ty].gino, true))
			return 0;
		r = o2_lock_need(fs, q->t[ty].gino, true);
		if (r < 0)
			return r;
	}
	for (unsigned ty = 0; ty < QTYPES && r == 0; ty++) {
		struct qtype *t = &q->t[ty];

		if (!t->on)
			continue;
		while (r == 0 && t->free_entries < LOCAL_LOW)
			r = local_grow(fs, t);
		if (r == 0 && pending(t))
			r = fold(q, ty);
	}
	if (r == 0) {
		q->due = false;
		q->synced_ns = o2_now_ns(fs);
	}
	return r;
}

int o2_quota_close(struct o2_fs *fs)
{
	struct o2_quota *q = fs->quota;
	int r;

	if (!q)
		return 0;
	r = o2_quota_sync(fs, true);
	for (unsigned ty = 0; ty < QTYPES && r == 0; ty++)
		if (q->t[ty].on && !pending(&q->t[ty]))
			r = local_mark(fs, &q->t[ty], true);
	o2_quota_free(fs);
	return r;
}

void o2_quota_free(struct o2_fs *fs)
{
	struct o2_quota *q = fs->quota;

	if (!q)
		return;
	if (fs->journal)
		o2_journal_watch(fs, NULL);
	for (unsigned i = 0; i < q->nsnaps; i++) {
		q->snaps[i].b->quota_watched = false;
		o2_brelse(fs, q->snaps[i].b);
	}
	free(q->snaps);
	for (unsigned ty = 0; ty < QTYPES; ty++)
		free(q->t[ty].tab);
	free(q);
	fs->quota = NULL;
}

/* ---- limits ---- */

/* d's global entry, read once (under the global file's lock, in PR at least). */
static int load_id(struct o2_quota *q, unsigned type, struct qdq *d)
{
	struct o2_fs *fs = q->fs;
	struct qtype *t = &q->t[type];
	struct o2_buf *hb, *lb;
	struct o2_global_dqblk *e;
	struct ginfo g;
	int r;

	if (d->known)
		return 0;
	r = o2_lock_need(fs, t->gino, false);
	if (r == 0)
		r = qblock(fs, NULL, t->gino, 0, false, &hb);
	if (r < 0)
		return r;
	r = ginfo_read(fs, t->gino, type, hb, &g);
	o2_brelse(fs, hb);
	if (r < 0)
		return r;
	r = gentry(fs, NULL, t->gino, &g, d->id, &lb, &e);
	if (r == -ENOENT) {
		d->known = true;
		return 0;
	}
	if (r < 0)
		return r;
	learn(d, e);
	o2_brelse(fs, lb);
	return 0;
}

/* Whether d may take inodes more, and how much of space (*space lowered to it). */
static int check_one(struct o2_fs *fs, struct qtype *t, struct qdq *d, uint64_t inodes,
		     uint64_t *space)
{
	uint64_t now = now_s(fs);
	uint64_t iuse = add_clamped(d->ginodes, d->inodes), use = add_clamped(d->gspace, d->space);

	if (inodes) {
		if (d->ihard && iuse + inodes > d->ihard)
			return -EDQUOT;
		if (d->isoft && iuse + inodes > d->isoft) {
			if (d->itime && now >= d->itime)
				return -EDQUOT;
			if (!d->itime)
				d->itime = now + t->igrace;
		}
	}
	if (!*space)
		return 0;
	if (d->bhard && use + *space > d->bhard)
		*space = d->bhard > use ? d->bhard - use : 0;
	if (d->bsoft && use + *space > d->bsoft) {
		if (d->btime && now >= d->btime)
			*space = d->bsoft > use ? d->bsoft - use : 0;
		else if (!d->btime)
			d->btime = now + t->bgrace;
	}
	return *space ? 0 : -EDQUOT;
}

int o2_quota_check(struct o2_fs *fs, uint32_t uid, uint32_t gid, uint64_t space, uint64_t inodes,
		   uint64_t *ret_space)
{
	struct o2_quota *q = fs->quota;
	uint64_t allowed = space;
	int r = 0;

	if (ret_space)
		*ret_space = space;
	if (!q || (!space && !inodes))
		return 0;
	for (unsigned ty = 0; ty < QTYPES && r == 0; ty++) {
		struct qtype *t = &q->t[ty];
		struct qdq *d;

		if (!t->on || (ty ? gid : uid) == O2_QUOTA_NOID)
			continue;
		r = get(t, ty ? gid : uid, &d);
		if (r == 0)
			r = load_id(q, ty, d);
		if (r == 0)
			r = check_one(fs, t, d, inodes, &allowed);
	}
	if (r == 0 && !ret_space && allowed < space)
		r = -EDQUOT;
	if (r == 0 && ret_space)
		*ret_space = allowed;
	return r;
}

static int qtype_of(struct o2_fs *fs, unsigned type, struct qtype **ret)
{
	struct o2_quota *q = fs->quota;

	if (type >= QTYPES)
		return -EINVAL;
	if (!(fs->info.feature_ro_compat &
	      (type ? O2_FEATURE_RO_COMPAT_GRPQUOTA : O2_FEATURE_RO_COMPAT_USRQUOTA)))
		return -EOPNOTSUPP;
	if (!q || !fs->journal)
		return -EROFS;
	*ret = &q->t[type];
	return 0;
}

int o2_quota_set_limits(struct o2_fs *fs, unsigned type, uint32_t id, const struct o2_dquot *lim)
{
	struct qtype *t;
	struct o2_trans *tr;
	struct o2_buf *hb, *lb;
	struct o2_global_dqblk *e;
	struct qdq *d;
	struct ginfo g;
	int r = qtype_of(fs, type, &t);

	if (r == 0)
		r = o2_lock_need(fs, t->gino, true);
	if (r == 0)
		r = get(t, id, &d);
	if (r == 0)
		r = global_room(fs, t->gino, type, insert_blocks(fs));
	if (r == 0)
		r = o2_trans_begin(fs, 2 * o2_qt_depth(fs->bs) + 8, &tr);
	if (r < 0)
		return r;
	r = qblock_log(fs, tr, t->gino, 0, &hb);
	if (r == 0)
		r = ginfo_read(fs, t->gino, type, hb, &g);
	if (r == 0)
		r = gentry(fs, tr, t->gino, &g, id, &lb, &e);
	if (r == 0) {
		uint64_t sp = add_clamped(le64(e->dqb_curspace), d->space);
		uint64_t in = add_clamped(le64(e->dqb_curinodes), d->inodes);

		e->dqb_bsoftlimit = cpu_le64(lim->bsoft);
		e->dqb_bhardlimit = cpu_le64(lim->bhard);
		e->dqb_isoftlimit = cpu_le64(lim->isoft);
		e->dqb_ihardlimit = cpu_le64(lim->ihard);
		e->dqb_btime = cpu_le64(deadline(sp, lim->bsoft, le64(e->dqb_btime), 0, now_s(fs),
						 t->bgrace));
		e->dqb_itime = cpu_le64(deadline(in, lim->isoft, le64(e->dqb_itime), 0, now_s(fs),
						 t->igrace));
		if (dq_unused(e))
			e->dqb_use_count = cpu_le32(1);
		learn(d, e);
		o2_brelse(fs, lb);
		ginfo_write(&g);
	}
	if (hb)
		o2_brelse(fs, hb);
	return o2_trans_finish(tr, r);
}

int o2_quota_grace(struct o2_fs *fs, unsigned type, bool set, uint32_t *bgrace, uint32_t *igrace)
{
	struct qtype *t;
	struct o2_trans *tr;
	struct o2_buf *hb;
	int r;

	if (!set) {
		uint64_t ino;

		if (type >= QTYPES)
			return -EINVAL;
		if (!(fs->info.feature_ro_compat &
		      (type ? O2_FEATURE_RO_COMPAT_GRPQUOTA : O2_FEATURE_RO_COMPAT_USRQUOTA)))
			return -EOPNOTSUPP;
		r = o2_sysfile_lookup(fs, O2_SYS_USER_QUOTA + type, 0, &ino);
		if (r == 0)
			r = qblock(fs, NULL, ino, 0, false, &hb);
		if (r < 0)
			return r;
		const struct o2_global_dqinfo *gi = (const void *)(hb->data + O2_QINFO_OFF);

		*bgrace = le32(gi->dqi_bgrace);
		*igrace = le32(gi->dqi_igrace);
		o2_brelse(fs, hb);
		return 0;
	}
	r = qtype_of(fs, type, &t);
	if (r == 0)
		r = o2_lock_need(fs, t->gino, true);
	if (r == 0)
		r = o2_trans_begin(fs, 1, &tr);
	if (r < 0)
		return r;
	r = qblock_log(fs, tr, t->gino, 0, &hb);
	if (r == 0) {
		struct o2_global_dqinfo *gi = (void *)(hb->data + O2_QINFO_OFF);

		gi->dqi_bgrace = cpu_le32(*bgrace);
		gi->dqi_igrace = cpu_le32(*igrace);
		t->bgrace = *bgrace;
		t->igrace = *igrace;
		o2_brelse(fs, hb);
	}
	return o2_trans_finish(tr, r);
}

/* ---- reading ---- */

struct walk {
	struct o2_fs *fs;
	uint64_t ino;
	unsigned type;
	struct ginfo g;
	uint32_t *leaves; /* leaves seen (several references may share one) */
	size_t nleaves, capleaves;
	int (*fn)(void *arg, const struct o2_dquot *dq);
	void *arg;
};

static void report_of(const struct o2_global_dqblk *e, const struct qdq *d, struct o2_dquot *dq)
{
	*dq = (struct o2_dquot){
		.id = le32(e->dqb_id),
		.space = le64(e->dqb_curspace),
		.inodes = le64(e->dqb_curinodes),
		.bsoft = le64(e->dqb_bsoftlimit),
		.bhard = le64(e->dqb_bhardlimit),
		.isoft = le64(e->dqb_isoftlimit),
		.ihard = le64(e->dqb_ihardlimit),
		.btime = le64(e->dqb_btime),
		.itime = le64(e->dqb_itime),
	};
	if (d) {
		dq->space = add_clamped(dq->space, d->space);
		dq->inodes = add_clamped(dq->inodes, d->inodes);
		/* a grace period this node started goes to the file at the next fold */
		if (d->known && !dq->btime)
			dq->btime = deadline(dq->space, dq->bsoft, 0, d->btime, 0, 0);
		if (d->known && !dq->itime)
			dq->itime = deadline(dq->inodes, dq->isoft, 0, d->itime, 0, 0);
	}
}

static int walk_block(struct walk *w, uint32_t blk, unsigned d)
{
	struct o2_fs *fs = w->fs;
	struct qtype *t = fs->quota ? &fs->quota->t[w->type] : NULL;
	unsigned depth = o2_qt_depth(fs->bs), refs = o2_qt_refs_per_block(fs->bs);
	struct o2_buf *b;
	int r = qblock(fs, NULL, w->ino, blk, false, &b);

	if (r < 0)
		return r;
	if (d == depth) {
		const struct o2_global_dqblk *e = (const void *)(b->data + sizeof(struct o2_qt_leaf_header));

		for (unsigned k = 0; k < o2_global_dq_per_block(fs->bs) && r == 0; k++) {
			struct o2_dquot dq;

			if (dq_unused(&e[k]))
				continue;
			report_of(&e[k], t ? find(t, le32(e[k].dqb_id)) : NULL, &dq);
			r = w->fn(w->arg, &dq);
		}
		o2_brelse(fs, b);
		return r;
	}
	uint32_t *v = o2_malloc(refs * sizeof(*v));

	if (!v) {
		o2_brelse(fs, b);
		return -ENOMEM;
	}
	for (unsigned k = 0; k < refs; k++)
		v[k] = le32(((const o2le32 *)b->data)[k]);
	o2_brelse(fs, b);
	for (unsigned k = 0; k < refs && r == 0; k++) {
		bool seen = false;

		if (!v[k])
			continue;
		if (!gref_ok(&w->g, v[k])) {
			r = o2_corrupt(fs, w->ino, "quota tree block %u points outside the file", blk);
			break;
		}
		if (d + 1 == depth) {
			for (size_t j = 0; j < w->nleaves && !seen; j++)
				seen = w->leaves[j] == v[k];
			if (seen)
				continue;
			if (w->nleaves == w->capleaves) {
				size_t cap = w->capleaves ? w->capleaves * 2 : 64;
				uint32_t *n = o2_realloc(w->leaves, cap * sizeof(*n));

				if (!n) {
					r = -ENOMEM;
					break;
				}
				w->leaves = n;
				w->capleaves = cap;
			}
			w->leaves[w->nleaves++] = v[k];
		}
		r = walk_block(w, v[k], d + 1);
	}
	free(v);
	return r;
}

int o2_fs_quota_iterate(struct o2_fs *fs, unsigned type,
			int (*fn)(void *arg, const struct o2_dquot *dq), void *arg)
{
	uint32_t bit = type ? O2_FEATURE_RO_COMPAT_GRPQUOTA : O2_FEATURE_RO_COMPAT_USRQUOTA;
	struct walk w = { .fs = fs, .type = type, .fn = fn, .arg = arg };
	struct qtype *t = fs->quota ? &fs->quota->t[type] : NULL;
	struct o2_buf *hb;
	int r;

	if (type >= QTYPES)
		return -EINVAL;
	if (!(fs->info.feature_ro_compat & bit))
		return -EOPNOTSUPP;
	r = o2_sysfile_lookup(fs, O2_SYS_USER_QUOTA + type, 0, &w.ino);
	if (r == 0)
		r = qblock(fs, NULL, w.ino, 0, false, &hb);
	if (r < 0)
		return r;
	r = ginfo_read(fs, w.ino, type, hb, &w.g);
	o2_brelse(fs, hb);
	if (r == 0)
		r = walk_block(&w, O2_QT_TREEOFF, 0);
	free(w.leaves);
	/* ids with changes here but no global entry yet */
	for (unsigned i = 0; r == 0 && t && i < t->cap; i++) {
		const struct qdq *d = &t->tab[i];
		struct o2_buf *lb;
		struct o2_global_dqblk *e;
		struct o2_dquot dq;
		int f;

		if (!d->used || (!d->space && !d->inodes))
			continue;
		r = qblock(fs, NULL, w.ino, 0, false, &hb);
		if (r < 0)
			break;
		r = ginfo_read(fs, w.ino, type, hb, &w.g);
		o2_brelse(fs, hb);
		if (r < 0)
			break;
		f = gentry(fs, NULL, w.ino, &w.g, d->id, &lb, &e);
		if (f == 0) {
			o2_brelse(fs, lb);
			continue;
		}
		if (f != -ENOENT) {
			r = f;
			break;
		}
		report_of(&(struct o2_global_dqblk){ .dqb_id = cpu_le32(d->id) }, d, &dq);
		r = fn(arg, &dq);
	}
	return r;
}
