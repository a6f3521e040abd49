/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * How it works: a hash table of buffers by block number, and an LRU list of
 * the clean ones.  A referenced, dirty or logged buffer is off the LRU list
 * and cannot be evicted; trimming runs whenever a buffer is added.
 */
#include <stdlib.h>
#include <string.h>

#include "blockcheck.h"
#include "cache.h"
#include "error.h"
#include "internal.h"
#include "o2fs/losses.h"

struct o2_cache {
	struct o2_buf **table;
	size_t nbuckets, count, max_clean;
	struct o2_list lru;
	size_t nclean_lru;
	struct o2_cache_stats st;
	uint8_t *ra_buf;	/* read_ahead's device reads, kept: fresh memory faults */
	uint8_t *pool;		/* spare block buffers, each holding the next's address */
	size_t npool;
	unsigned unlocked;	/* o2_cache_unlocked_reads depth */
	/* o2_cache_lost: a buffer's seen is checked against them at its next use */
	struct o2_losses losses;
};

/*
 * Block buffers go back to a pool, not to malloc, and stay there until the
 * cache goes (at most max_clean of them): a cache that evicts as fast as it
 * reads, a journal that freezes and thaws copies, would otherwise have
 * malloc trim its heap and hand the same memory back fresh.  Fresh memory
 * costs a page fault per block at first touch, which on some virtual
 * machines (shadow paging) is 10 us: more than reading a block the kernel
 * caches.  The pool can also be filled when the cache is made (prefill).
 * Under AddressSanitizer a pooled buffer is poisoned, so that a use after
 * release is still caught.
 */
#if defined(__SANITIZE_ADDRESS__)
#define O2_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define O2_ASAN 1
#endif
#endif
#ifdef O2_ASAN
#include <sanitizer/asan_interface.h>
#define POOL_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define POOL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POOL_POISON(p, n) ((void)(p), (void)(n))
#define POOL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static size_t bucket_in(size_t nbuckets, uint64_t blkno)
{
	uint64_t v = blkno * 0x9E3779B97F4A7C15ULL;

	return (size_t)(v >> 20) & (nbuckets - 1);
}

static size_t bucket(const struct o2_cache *c, uint64_t blkno)
{
	return bucket_in(c->nbuckets, blkno);
}

/*
 * Make n block buffers and touch them now, so their first use does not
 * fault.  Plain malloc, not o2_malloc: this only moves work earlier, and
 * an allocation test plan must not count (or fail) thousands of these.
 */
static void prefill(struct o2_fs *fs, size_t n)
{
	for (size_t i = 0; i < n && fs->cache->npool < fs->cache->max_clean; i++) {
		uint8_t *p = malloc(fs->bs);

		if (!p)
			break;
		memset(p, 0, fs->bs);
		o2_cache_block_put(fs, p);
	}
}

int o2_cache_init(struct o2_fs *fs, size_t max_clean, size_t prefill_blocks)
{
	struct o2_cache *c = o2_calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->nbuckets = 1024;
	c->table = o2_calloc(c->nbuckets, sizeof(*c->table));
	if (!c->table) {
		free(c);
		return -ENOMEM;
	}
	c->max_clean = max_clean ? max_clean : 1;
	o2_list_init(&c->lru);
	fs->cache = c;
	prefill(fs, prefill_blocks);
	return 0;
}

static uint8_t *block_get(struct o2_fs *fs, bool optional)
{
	struct o2_cache *c = fs->cache;
	uint8_t *p = c->pool;

	if (!p)
		return optional ? o2_malloc_optional(fs->bs) : o2_malloc(fs->bs);
	POOL_UNPOISON(p, fs->bs);
	memcpy(&c->pool, p, sizeof(c->pool));
	c->npool--;
	return p;
}

uint8_t *o2_cache_block_get(struct o2_fs *fs)
{
	return block_get(fs, false);
}

void o2_cache_block_put(struct o2_fs *fs, uint8_t *p)
{
	struct o2_cache *c = fs->cache;

	if (!p)
		return;
	if (c->npool >= c->max_clean) {
		free(p);
		return;
	}
	memcpy(p, &c->pool, sizeof(c->pool));
	POOL_POISON(p, fs->bs);
	c->pool = p;
	c->npool++;
}

static void free_buf(struct o2_fs *fs, struct o2_buf *b)
{
	o2_cache_block_put(fs, b->frozen);
	o2_cache_block_put(fs, b->data);
	free(b);
}

void o2_cache_destroy(struct o2_fs *fs)
{
	struct o2_cache *c = fs->cache;

	if (!c)
		return;
	for (size_t i = 0; i < c->nbuckets; i++) {
		struct o2_buf *b = c->table[i], *next;

		for (; b; b = next) {
			next = b->hnext;
			free(b->frozen);
			free(b->data);
			free(b);
		}
	}
	while (c->pool) {
		uint8_t *p = c->pool;

		POOL_UNPOISON(p, fs->bs);
		memcpy(&c->pool, p, sizeof(c->pool));
		free(p);
	}
	free(c->table);
	free(c->ra_buf);
	free(c);
	fs->cache = NULL;
}

static void grow_table(struct o2_cache *c)
{
	size_t nb = c->nbuckets * 2;
	struct o2_buf **nt = o2_calloc(nb, sizeof(*nt));

	if (!nt)
		return; /* keep the longer chains */
	for (size_t i = 0; i < c->nbuckets; i++) {
		struct o2_buf *b = c->table[i], *next;

		for (; b; b = next) {
			size_t k = bucket_in(nb, b->blkno);

			next = b->hnext;
			b->hnext = nt[k];
			nt[k] = b;
		}
	}
	free(c->table);
	c->table = nt;
	c->nbuckets = nb;
}

static void unhash(struct o2_cache *c, struct o2_buf *b)
{
	struct o2_buf **pp = &c->table[bucket(c, b->blkno)];

	while (*pp && *pp != b)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = b->hnext;
	c->count--;
}

struct o2_buf *o2_cache_peek(struct o2_fs *fs, uint64_t blkno)
{
	struct o2_cache *c = fs->cache;
	struct o2_buf *b = c->table[bucket(c, blkno)];

	while (b && b->blkno != blkno)
		b = b->hnext;
	return b;
}

static bool evictable(const struct o2_buf *b)
{
	return b->refs == 0 && !b->dirty && !b->in_running && !b->in_log;
}

static void lru_remove(struct o2_cache *c, struct o2_buf *b)
{
	if (o2_list_linked(&b->lru)) {
		o2_list_del(&b->lru);
		c->nclean_lru--;
	}
}

static void trim(struct o2_fs *fs)
{
	struct o2_cache *c = fs->cache;

	while (c->nclean_lru > c->max_clean) {
		struct o2_buf *b = o2_container_of(c->lru.next, struct o2_buf, lru);

		lru_remove(c, b);
		unhash(c, b);
		free_buf(fs, b);
		c->st.evictions++;
	}
}

/* optional: for read-ahead, whose failure nobody sees (mem.h) */
static int alloc_buf_as(struct o2_fs *fs, uint64_t blkno, uint8_t kind, bool optional,
			struct o2_buf **ret)
{
	struct o2_buf *b = optional ? o2_calloc_optional(1, sizeof(*b)) : o2_calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->data = block_get(fs, optional);
	if (!b->data) {
		free(b);
		return -ENOMEM;
	}
	b->blkno = blkno;
	b->kind = kind;
	o2_list_init(&b->lru);
	o2_list_init(&b->tlink);
	o2_list_init(&b->clink);
	*ret = b;
	return 0;
}

static int alloc_buf(struct o2_fs *fs, uint64_t blkno, uint8_t kind, struct o2_buf **ret)
{
	return alloc_buf_as(fs, blkno, kind, false, ret);
}

static void insert(struct o2_cache *c, struct o2_buf *b)
{
	size_t k;

	if (c->count + 1 > c->nbuckets * 2)
		grow_table(c);
	k = bucket(c, b->blkno);
	b->hnext = c->table[k];
	c->table[k] = b;
	c->count++;
}

/*
 * The cache verifies a block's check when it reads the block, so it is the
 * one that knows where each kind keeps it (the journal asks it too, when
 * it computes checks on commit).
 */
size_t o2_meta_check_offset(const struct o2_fs *fs, enum o2_meta_kind kind)
{
	switch (kind) {
	case O2_META_INODE:
		return offsetof(struct o2_dinode, i_check);
	case O2_META_EXTENT:
		return offsetof(struct o2_extent_block, h_check);
	case O2_META_GROUP:
		return offsetof(struct o2_group_desc, bg_check);
	case O2_META_DX_ROOT:
		return offsetof(struct o2_dx_root_block, dr_check);
	case O2_META_DX_LEAF:
		return offsetof(struct o2_dx_leaf, dl_check);
	case O2_META_DIR_BLOCK:
		return fs->bs - sizeof(struct o2_dir_trailer) + offsetof(struct o2_dir_trailer, db_check);
	case O2_META_XATTR:
		return offsetof(struct o2_xattr_block, xb_check);
	case O2_META_REFCOUNT:
		return offsetof(struct o2_refcount_block, rf_check);
	case O2_META_QUOTA:
		return fs->bs - O2_QBLK_RESERVED;
	case O2_META_PLAIN:
		break;
	}
	return 0;
}

void o2_meta_seal(struct o2_fs *fs, struct o2_buf *b)
{
	if (b->kind != O2_META_PLAIN && o2_has_incompat(fs, O2_FEATURE_INCOMPAT_META_ECC))
		o2_blockcheck_compute(b->data, fs->bs,
				      b->data + o2_meta_check_offset(fs, (enum o2_meta_kind)b->kind));
}

static int verify(struct o2_fs *fs, struct o2_buf *b, uint8_t kind)
{
	if (kind == O2_META_PLAIN || !o2_has_incompat(fs, O2_FEATURE_INCOMPAT_META_ECC))
		return 0;
	if (o2_blockcheck_verify(b->data, fs->bs, b->data + o2_meta_check_offset(fs, (enum o2_meta_kind)kind)) < 0)
		return o2_corrupt(fs, b->blkno, "metadata checksum mismatch");
	return 0;
}

/*
 * Inodes are read in runs: a group's inodes sit in consecutive blocks and
 * are usually wanted together (a directory listed, a tree walked), so a
 * missed inode block brings the uncached blocks after it in the same
 * device read.  Those wait unchecked (O2_META_PLAIN) on the LRU list and
 * are checked as what they are when first read as such.  Only uncached
 * blocks are read: a cached one may be newer than the disk.  Returns 1 when
 * b->data was filled, 0 when there is nothing to read ahead (or that read
 * failed: the caller reads the block alone and reports its own error).
 */
#define READ_AHEAD_BLOCKS 16

static int read_ahead(struct o2_fs *fs, struct o2_buf *b)
{
	struct o2_cache *c = fs->cache;
	unsigned n = 1;
	uint8_t *tmp;

	while (n < READ_AHEAD_BLOCKS && b->blkno + n < fs->nblocks &&
	       !o2_cache_peek(fs, b->blkno + n))
		n++;
	if (n == 1)
		return 0;
	if (!c->ra_buf)
		c->ra_buf = o2_malloc_optional((size_t)READ_AHEAD_BLOCKS << fs->bits);
	tmp = c->ra_buf;
	if (!tmp || o2_blockdev_read(fs->dev, tmp, (size_t)n << fs->bits, b->blkno << fs->bits) < 0)
		return 0;
	memcpy(b->data, tmp, fs->bs);
	for (unsigned i = 1; i < n; i++) {
		struct o2_buf *a;

		if (alloc_buf_as(fs, b->blkno + i, O2_META_PLAIN, true, &a) < 0)
			break;
		memcpy(a->data, tmp + ((size_t)i << fs->bits), fs->bs);
		insert(c, a);
		o2_list_add_tail(&c->lru, &a->lru);
		c->nclean_lru++;
		c->st.readahead++;
	}
	trim(fs);
	return 1;
}

/*
 * The inode whose cluster lock covers clean buffer b, as far as its
 * content names one: an inode block is its own; a directory block's
 * trailer and an indexed directory's root name their directory, a group
 * descriptor its allocator.  0: none known (an extent block, an xattr
 * block, ...).  A block changes owner only through a lock of its old
 * owner's (another node frees it) or a free of this node's, which forgets
 * it (o2_trans_revoke); a reused inode block is refreshed when its new
 * inode's lock is first taken.
 */
static uint64_t owner_of(const struct o2_fs *fs, const struct o2_buf *b)
{
	switch (b->kind) {
	case O2_META_INODE:
		return b->blkno;
	case O2_META_DIR_BLOCK: {
		const struct o2_dir_trailer *t =
			(const void *)(b->data + fs->bs - sizeof(struct o2_dir_trailer));

		if (memcmp(t->db_signature, O2_SIG_DIRTRL, sizeof(O2_SIG_DIRTRL)) == 0)
			return le64(t->db_parent_dinode);
		return 0;
	}
	case O2_META_GROUP: {
		const struct o2_group_desc *g = (const void *)b->data;

		if (memcmp(g->bg_signature, O2_SIG_GROUP, sizeof(O2_SIG_GROUP)) == 0)
			return le64(g->bg_parent_dinode);
		return 0;
	}
	case O2_META_DX_ROOT: {
		const struct o2_dx_root_block *d = (const void *)b->data;

		if (memcmp(d->dr_signature, O2_SIG_DXROOT, sizeof(O2_SIG_DXROOT)) == 0)
			return le64(d->dr_dir_blkno);
		return 0;
	}
	default:
		return 0;
	}
}

/* A clean buffer some lock lost since its content was known good may be stale. */
static bool suspect(const struct o2_fs *fs, struct o2_buf *b)
{
	const struct o2_cache *c = fs->cache;

	if (b->seen >= c->losses.last || b->dirty || b->in_running || b->in_log)
		return false;
	if (o2_losses_suspect(&c->losses, b->seen, owner_of(fs, b)))
		return true;
	b->seen = o2_losses_now(&c->losses); /* known good now */
	return false;
}

/* Drop b from the cache unless it is in use or logged. */
static bool forget_buf(struct o2_fs *fs, struct o2_buf *b)
{
	struct o2_cache *c = fs->cache;

	if (b->refs || b->in_running || b->in_log)
		return false;
	lru_remove(c, b);
	unhash(c, b);
	free_buf(fs, b);
	return true;
}

int o2_bread(struct o2_fs *fs, uint64_t blkno, uint8_t kind, struct o2_buf **ret)
{
	struct o2_cache *c = fs->cache;
	struct o2_buf *b = o2_cache_peek(fs, blkno);
	int r;

	/* a block read without its lock is not trusted, and a read without
	   its lock trusts no clean copy: read it again */
	if (b && (b->unlocked || c->unlocked || suspect(fs, b)) && !b->dirty && forget_buf(fs, b))
		b = NULL;
	if (b) {
		c->st.hits++;
		/* a clean block first read as another kind: check it as this one too */
		if (b->kind != kind && kind != O2_META_PLAIN && !b->dirty && !b->in_running) {
			r = verify(fs, b, kind);
			if (r < 0)
				return r;
			b->kind = kind;
		}
		lru_remove(c, b);
		b->refs++;
		*ret = b;
		return 0;
	}
	c->st.misses++;
	if (blkno >= fs->nblocks)
		return o2_corrupt(fs, blkno, "lies beyond the end of the device (%llu blocks)",
				  (unsigned long long)fs->nblocks);
	r = alloc_buf(fs, blkno, kind, &b);
	if (r < 0)
		return r;
	if (kind != O2_META_INODE || (fs->opts.flags & O2_OPEN_SHARED) || read_ahead(fs, b) <= 0)
		r = o2_blockdev_read(fs->dev, b->data, fs->bs, blkno << fs->bits);
	if (r < 0) {
		free_buf(fs, b);
		return o2_fail(fs, r, "block %llu: read failed: %s", (unsigned long long)blkno,
			       strerror(-r));
	}
	r = verify(fs, b, kind);
	if (r < 0) {
		free_buf(fs, b);
		return r;
	}
	b->refs = 1;
	b->unlocked = c->unlocked > 0;
	b->seen = o2_losses_now(&c->losses);
	insert(c, b);
	*ret = b;
	return 0;
}

void o2_cache_unlocked_reads(struct o2_fs *fs, bool on)
{
	struct o2_cache *c = fs->cache;

	if (on)
		c->unlocked++;
	else if (c->unlocked)
		c->unlocked--;
}

int o2_bnew(struct o2_fs *fs, uint64_t blkno, uint8_t kind, struct o2_buf **ret)
{
	struct o2_cache *c = fs->cache;
	struct o2_buf *b = o2_cache_peek(fs, blkno);
	int r;

	if (blkno >= fs->nblocks)
		return o2_corrupt(fs, blkno, "lies beyond the end of the device (%llu blocks)",
				  (unsigned long long)fs->nblocks);
	if (b) {
		/* a logged block keeps its committed content for the checkpoint */
		if (b->in_log && !b->in_running && !b->frozen) {
			b->frozen = block_get(fs, false);
			if (!b->frozen)
				return -ENOMEM;
			memcpy(b->frozen, b->data, fs->bs);
		}
		lru_remove(c, b);
		b->refs++;
	} else {
		r = alloc_buf(fs, blkno, kind, &b);
		if (r < 0)
			return r;
		b->refs = 1;
		insert(c, b);
	}
	memset(b->data, 0, fs->bs);
	b->kind = kind;
	b->unlocked = false;
	b->seen = o2_losses_now(&c->losses);
	*ret = b;
	return 0;
}

void o2_cache_mark_clean(struct o2_fs *fs, struct o2_buf *b)
{
	struct o2_cache *c = fs->cache;

	b->dirty = false;
	b->seen = o2_losses_now(&c->losses); /* what this handle wrote is what is home */
	if (evictable(b) && !o2_list_linked(&b->lru)) {
		o2_list_add_tail(&c->lru, &b->lru);
		c->nclean_lru++;
		trim(fs);
	}
}

bool o2_cache_trusted(struct o2_fs *fs, struct o2_buf *b)
{
	if (b->dirty || b->in_running || b->in_log)
		return false;
	return !b->unlocked && !fs->cache->unlocked && !suspect(fs, b);
}

void o2_cache_vouch(struct o2_fs *fs, struct o2_buf *b)
{
	b->unlocked = false;
	b->seen = o2_losses_now(&fs->cache->losses);
}

void o2_brelse(struct o2_fs *fs, struct o2_buf *b)
{
	struct o2_cache *c = fs->cache;

	if (!b)
		return;
	if (b->refs)
		b->refs--;
	if (evictable(b) && !o2_list_linked(&b->lru)) {
		o2_list_add_tail(&c->lru, &b->lru);
		c->nclean_lru++;
		trim(fs);
	}
}

void o2_cache_forget(struct o2_fs *fs, uint64_t blkno)
{
	struct o2_buf *b = o2_cache_peek(fs, blkno);

	if (b)
		forget_buf(fs, b);
}

void o2_cache_drop_clean(struct o2_fs *fs)
{
	struct o2_cache *c = fs->cache;
	struct o2_list *pos, *tmp;

	o2_list_for_each_safe(pos, tmp, &c->lru) {
		struct o2_buf *b = o2_container_of(pos, struct o2_buf, lru);

		lru_remove(c, b);
		unhash(c, b);
		free_buf(fs, b);
	}
}

void o2_cache_lost(struct o2_fs *fs, uint64_t owner)
{
	o2_losses_stamp(&fs->cache->losses, owner);
}

uint64_t o2_cache_epoch(const struct o2_fs *fs)
{
	return o2_losses_now(&fs->cache->losses);
}

bool o2_cache_lost_since(const struct o2_fs *fs, uint64_t owner, uint64_t epoch)
{
	return o2_losses_suspect(&fs->cache->losses, epoch, owner);
}

void o2_cache_stats(const struct o2_fs *fs, struct o2_cache_stats *ret)
{
	const struct o2_cache *c = fs->cache;
	size_t dirty = 0;

	for (size_t i = 0; i < c->nbuckets; i++)
		for (const struct o2_buf *b = c->table[i]; b; b = b->hnext)
			dirty += b->dirty || b->in_running || b->in_log;
	*ret = c->st;
	ret->buffers = c->count;
	ret->dirty = dirty;
}
