// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * A write-back cache in front of a clustered volume's device.
 *
 * A clustered mount opens its device with O_DIRECT (no host page cache may
 * hide another node's writes, or write this node's late, after it died and
 * another node recovered its slot), so every write fscore makes would wait
 * for the disk: 0.3 ms for each 4 KiB a file is written, where a local
 * mount leaves it in the page cache.  This device keeps writes in the
 * daemon's memory instead, as a disk's volatile write cache does, and
 * sends them on at the next flush (o2_blockdev_flush, before the data is
 * durable), when they pass a bound (limit bytes), or when asked
 * (wcache_write_out: a lock leaving this node, so that the next node reads
 * what this one wrote).  Reads see the cached writes.
 *
 * What was sent of file data stays as a clean copy (and so does file data
 * read from the disk), up to a bound of its own, for reads of file data alone
 * (o2_blockdev_read_data: the caller holds the lock covering them).  A
 * metadata read, which may be made without a lock (an inode's generation,
 * to name its lock), never sees them.
 *
 * A copy is good while this node keeps the lock it was got under: another
 * node writes a block only under a lock this node must first give up (the
 * inode's whose data it is, or - for a block given to another use - its
 * old owner's, or the allocator's it went back through).  A page knows
 * the inode its clean sectors belong to (the owner the caller names; 0:
 * none named) and the epoch it was last known good in; wcache_lost stamps
 * an owner's loss (and, with 0, everyone's), and a page an owner's loss
 * may have made stale forgets its clean sectors when next used, as
 * fscore's block cache does (o2_fs_lost).  A copy serves only reads for
 * its own owner: a block this node freed and another reused keeps its old
 * owner's name, and never answers for the new one.  A page written with
 * no owner named (metadata, the journal) is not kept once sent; one read
 * for an owner after it was written so, while no lock was lost, serves
 * anyone until the next loss of any lock.
 *
 * Why it is safe: fscore is correct on any device whose writes may be
 * lost or reordered until a flush (the crash suite's model of a disk);
 * this is one.  Ordered data before a journal commit comes free: the
 * commit's first flush sends every cached write before its commit block.
 * It dies with the daemon, as a crashed node's page cache does: what a
 * SIGKILLed daemon had not flushed never reaches the disk, not even after
 * another node has recovered the slot.
 *
 * Pages are kept by sector (a bit each of what is known and what is to
 * send): a page may hold blocks of several owners (blocks smaller than a
 * page), and only the sectors this node wrote may ever be sent, never a
 * neighbour's read along with them.
 *
 * Threads: fscore calls read and write under the volume mutex, and may
 * flush without it (fsync): one mutex of the device's own guards the pages,
 * held while they are sent so that a read never sees the disk behind a
 * page that is leaving the cache.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <liburing.h>

#include "ocfs2d.h"
#include "o2fs/losses.h"

#define PAGE 4096u
#define SEND_MAX (1u << 20) /* bytes staged for one send */
#define SEND_RUNS 64	    /* runs sent at once (the ring's depth) */

struct wcache {
	struct o2_blockdev dev; /* first: what fscore is given */
	struct o2_blockdev *inner;
	unsigned ss, spp;  /* sector size, sectors a page */
	GMutex mu;
	GHashTable *pages; /* page index (uint64_t *) -> struct page */
	GPtrArray *dirty;  /* pages with sectors to send, in no order */
	GQueue clean;	   /* the other pages, oldest first */
	size_t bytes, limit; /* bytes of the dirty pages, and their bound */
	size_t clean_bytes, clean_limit;
	uint8_t *stage; /* SEND_MAX bytes, aligned for O_DIRECT */
	/* several runs at once through io_uring, when the inner device is a
	   file whose descriptor we may use (else one write after another) */
	struct io_uring ring;
	bool ring_ok;
	int fd, direct;
	struct page *spare; /* pages not in use (their link.next chains them) */
	GPtrArray *slabs;   /* struct slab: where every page comes from */
	uint64_t sent;	/* bytes sent on to the device so far */
	uint64_t together; /* of those, through the ring beside others */
	struct o2_losses losses; /* wcache_lost; a page's seen is checked against them */
};

struct page {
	uint64_t idx;
	uint32_t valid; /* sectors whose bytes are known (written or read) */
	uint32_t dirty; /* sectors written and not sent yet (within valid) */
	uint64_t owner; /* whose file data the clean sectors are (0: not named) */
	uint64_t seen;	/* the epoch they were last known good in */
	GList link;	/* on clean, when nothing is dirty */
	uint8_t *data;	/* aligned for O_DIRECT */
};

/*
 * Pages come from slabs of SLAB_PAGES, made as the cache first needs them
 * and kept until it goes: a checkpoint or a commit passes thousands of
 * pages through the cache, and fresh memory for each page costs the
 * allocator's work and a page fault - more than the copy into it.  So the
 * cache keeps what its busiest moment needed, which its bounds limit.
 */
#define SLAB_PAGES 256u

struct slab {
	uint8_t *mem; /* SLAB_PAGES pages, aligned for O_DIRECT */
	struct page pages[SLAB_PAGES];
};

/* pg leaves the cache (nothing of it to send).  Under mu. */
static void page_drop(struct wcache *w, struct page *pg)
{
	g_hash_table_remove(w->pages, &pg->idx);
	pg->link.next = (GList *)w->spare;
	w->spare = pg;
}

/* A new slab's pages onto spare; false: no memory.  Under mu. */
static bool slab_add(struct wcache *w)
{
	struct slab *sl = g_try_new0(struct slab, 1);
	void *mem;

	if (!sl)
		return false;
	/* populated at once: one call, rather than a fault a page */
	mem = mmap(NULL, (size_t)SLAB_PAGES * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (mem == MAP_FAILED) {
		g_free(sl);
		return false;
	}
	sl->mem = mem;
	for (unsigned i = 0; i < SLAB_PAGES; i++) {
		sl->pages[i].data = sl->mem + (size_t)i * PAGE;
		sl->pages[i].link.next = (GList *)w->spare;
		w->spare = &sl->pages[i];
	}
	g_ptr_array_add(w->slabs, sl);
	return true;
}

static void slab_free(gpointer p)
{
	struct slab *sl = p;

	munmap(sl->mem, (size_t)SLAB_PAGES * PAGE);
	g_free(sl);
}

static struct wcache *wc_of(struct o2_blockdev *dev)
{
	return (struct wcache *)dev;
}

/* The sectors of page idx that [off, off + len) covers, as a mask. */
static uint32_t mask_of(struct wcache *w, uint64_t idx, uint64_t off, size_t len)
{
	uint64_t ps = idx * PAGE, s = MAX(ps, off), e = MIN(ps + PAGE, off + len);
	unsigned a = (unsigned)((s - ps) / w->ss), b = (unsigned)((e - ps) / w->ss);

	return (uint32_t)(((1ull << b) - 1) & ~((1ull << a) - 1));
}

static void clean_remove(struct wcache *w, struct page *pg)
{
	g_queue_unlink(&w->clean, &pg->link);
	w->clean_bytes -= PAGE;
}

/* pg has nothing to send now: onto the clean queue, the oldest going past the bound. */
static void make_clean(struct wcache *w, struct page *pg)
{
	g_queue_push_tail_link(&w->clean, &pg->link);
	w->clean_bytes += PAGE;
	while (w->clean_bytes > w->clean_limit && w->clean.head) {
		struct page *old = w->clean.head->data;

		clean_remove(w, old);
		page_drop(w, old);
	}
}

/*
 * Forget pg's clean sectors if a loss since they were last known good may
 * have made them stale; they are good now otherwise.  Under mu.
 */
static void page_settle(struct wcache *w, struct page *pg)
{
	if ((pg->valid & ~pg->dirty) && o2_losses_suspect(&w->losses, pg->seen, pg->owner))
		pg->valid = pg->dirty;
	pg->seen = o2_losses_now(&w->losses);
}

/*
 * Sectors m of pg are now owner's (written or read for it): clean sectors
 * outside m that another owner's are forgotten, then the page is owner's.
 * Under mu, after page_settle.
 */
static void page_own(struct page *pg, uint32_t m, uint64_t owner)
{
	if (pg->owner != owner && (pg->valid & ~pg->dirty & ~m)) {
		if (!pg->owner) {
			/* good now (settled), and nobody's in particular: stays so */
			return;
		}
		pg->valid = pg->dirty | m;
	}
	pg->owner = owner;
}

/* Page idx, made (knowing nothing) if absent; NULL: no memory.  Under mu. */
static struct page *page_get(struct wcache *w, uint64_t idx, bool *made)
{
	struct page *pg = g_hash_table_lookup(w->pages, &idx);

	*made = false;
	if (pg)
		return pg;
	if (!w->spare && !slab_add(w))
		return NULL;
	pg = w->spare;
	w->spare = (struct page *)pg->link.next;
	*pg = (struct page){ .data = pg->data };
	pg->idx = idx;
	pg->link.data = pg;
	g_hash_table_insert(w->pages, &pg->idx, pg);
	*made = true;
	return pg;
}

/* Copy the dirty sectors of [off, off + len) over buf; whether there were any.  Under mu. */
static bool overlay_dirty(struct wcache *w, uint8_t *buf, size_t len, uint64_t off)
{
	bool any = false;

	if (!w->dirty->len)
		return false;
	for (uint64_t i = off / PAGE; i <= (off + len - 1) / PAGE; i++) {
		struct page *pg = g_hash_table_lookup(w->pages, &i);
		uint32_t m = pg ? pg->dirty & mask_of(w, i, off, len) : 0;

		for (unsigned k = 0; m && k < w->spp; k++) {
			if (!(m & (1u << k)))
				continue;
			memcpy(buf + (i * PAGE + k * w->ss - off), pg->data + k * w->ss, w->ss);
			any = true;
		}
	}
	return any;
}

static bool dirty_in(struct wcache *w, uint64_t off, size_t len)
{
	if (!w->dirty->len)
		return false;
	for (uint64_t i = off / PAGE; i <= (off + len - 1) / PAGE; i++) {
		struct page *pg = g_hash_table_lookup(w->pages, &i);

		if (pg && (pg->dirty & mask_of(w, i, off, len)))
			return true;
	}
	return false;
}

static int wc_read(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off)
{
	struct wcache *w = wc_of(dev);
	int r;

	g_mutex_lock(&w->mu);
	if (!dirty_in(w, off, len)) {
		/* nothing of it waits to be sent, and nothing leaves the disk behind us */
		g_mutex_unlock(&w->mu);
		return o2_blockdev_read(w->inner, buf, len, off);
	}
	r = o2_blockdev_read(w->inner, buf, len, off);
	if (r == 0)
		overlay_dirty(w, buf, len, off);
	g_mutex_unlock(&w->mu);
	return r;
}

static int wc_read_data(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off,
			uint64_t owner)
{
	struct wcache *w = wc_of(dev);
	uint64_t first = off / PAGE, last = (off + len - 1) / PAGE;
	bool all = true, made;
	int r;

	if (!owner)
		return wc_read(dev, buf, len, off); /* named by nobody: trusts no copy */
	g_mutex_lock(&w->mu);
	for (uint64_t i = first; i <= last && all; i++) {
		struct page *pg = g_hash_table_lookup(w->pages, &i);
		uint32_t m = mask_of(w, i, off, len);

		if (!pg) {
			all = false;
			break;
		}
		page_settle(w, pg);
		/* our own writes not sent yet are good for anyone */
		all = ((pg->owner == owner || !pg->owner ? pg->valid : pg->dirty) & m) == m;
	}
	if (all) {
		for (uint64_t i = first; i <= last; i++) {
			struct page *pg = g_hash_table_lookup(w->pages, &i);
			uint64_t ps = i * PAGE, s = MAX(ps, off), e = MIN(ps + PAGE, off + len);

			memcpy((uint8_t *)buf + (s - off), pg->data + (s - ps), (size_t)(e - s));
			page_own(pg, mask_of(w, i, off, len), owner);
		}
		g_mutex_unlock(&w->mu);
		return 0;
	}
	r = o2_blockdev_read(w->inner, buf, len, off);
	if (r == 0) {
		overlay_dirty(w, buf, len, off);
		/* what was read is known now: kept as a clean copy of owner's */
		for (uint64_t i = first; i <= last; i++) {
			uint32_t m = mask_of(w, i, off, len);
			struct page *pg = page_get(w, i, &made);

			if (!pg)
				break;
			page_settle(w, pg);
			page_own(pg, m, owner);
			m &= ~pg->dirty;
			if (m) {
				uint64_t ps = i * PAGE;
				int64_t shift = (int64_t)ps - (int64_t)off;

				/* buf holds the page from ps on (part of it when shift < 0) */
				for (unsigned k = 0; k < w->spp; k++)
					if (m & (1u << k))
						memcpy(pg->data + k * w->ss,
						       (uint8_t *)buf + shift + (int64_t)k * w->ss, w->ss);
				pg->valid |= m;
			}
			if (made)
				make_clean(w, pg);
		}
	}
	g_mutex_unlock(&w->mu);
	return r;
}

static int cmp_page(const void *a, const void *b)
{
	const struct page *x = *(struct page *const *)a, *y = *(struct page *const *)b;

	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* A run of contiguous dirty sectors staged for sending: stage[at, at + len) to off. */
struct run {
	uint64_t off;
	size_t at, len;
};

/* Whether the ring may write run x itself (O_DIRECT wants whole pages). */
static bool ring_may(const struct wcache *w, const struct run *x)
{
	return !w->direct || (x->off % PAGE == 0 && x->len % PAGE == 0 && x->at % PAGE == 0);
}

/*
 * Send the n staged runs; under mu.  Several at once go through the ring
 * together - the device works on them in parallel, which on a disk whose
 * every write takes a few hundred microseconds is most of a write-back's
 * time - and a run the ring cannot take, or did not write whole, is
 * written the ordinary way.
 */
static int send_runs(struct wcache *w, struct run *v, unsigned n)
{
	unsigned queued = 0;
	int r = 0;

	if (n > 1 && w->ring_ok) {
		for (unsigned i = 0; i < n; i++) {
			struct io_uring_sqe *sqe;

			if (!ring_may(w, &v[i]) || !(sqe = io_uring_get_sqe(&w->ring)))
				continue;
			io_uring_prep_write(sqe, w->fd, w->stage + v[i].at, (unsigned)v[i].len,
					    v[i].off);
			io_uring_sqe_set_data64(sqe, i);
			queued++;
		}
		int s = queued ? io_uring_submit(&w->ring) : 0;
		unsigned reap = s < 0 ? 0 : (unsigned)s;

		for (unsigned k = 0; k < reap; k++) {
			struct io_uring_cqe *cqe;
			int e = io_uring_wait_cqe(&w->ring, &cqe);

			if (e < 0) {
				r = e;
				break;
			}
			struct run *x = &v[io_uring_cqe_get_data64(cqe)];

			if (cqe->res < 0 && r == 0)
				r = cqe->res;
			else if (cqe->res >= 0 && (size_t)cqe->res == x->len) {
				w->together += x->len;
				x->len = 0; /* done */
			}
			io_uring_cqe_seen(&w->ring, cqe);
		}
		if (reap < queued) {
			/* the ring refused some: no more ring, those go the ordinary way */
			g_warning("io_uring took %u of %u writes (%s): writing one after another "
				  "from now on", reap, queued, s < 0 ? g_strerror(-s) : "short");
			io_uring_queue_exit(&w->ring);
			w->ring_ok = false;
		}
		if (r < 0)
			return r;
	}
	for (unsigned i = 0; i < n && r == 0; i++)
		if (v[i].len)
			r = o2_blockdev_write(w->inner, w->stage + v[i].at, v[i].len, v[i].off);
	return r;
}

/*
 * Send every dirty sector to the device in order, contiguous ones in one
 * write; under mu.  Pages become clean only once all of it is sent (a
 * failure leaves them all to send again).
 */
static int send_all(struct wcache *w)
{
	struct page **v = (struct page **)w->dirty->pdata;
	guint n = w->dirty->len;
	struct run runs[SEND_RUNS];
	unsigned nruns = 0;
	size_t used = 0; /* of stage, by the runs so far */
	uint64_t bytes = 0;
	int r = 0;

	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_page);
	for (guint i = 0; i < n && r == 0; i++) {
		for (unsigned k = 0; k < w->spp && r == 0; k++) {
			uint64_t at = v[i]->idx * PAGE + (uint64_t)k * w->ss;
			struct run *x = nruns ? &runs[nruns - 1] : NULL;

			if (!(v[i]->dirty & (1u << k)))
				continue;
			if (!x || x->off + x->len != at) {
				/* a new run, at a page boundary of the stage */
				size_t pos = (used + PAGE - 1) / PAGE * PAGE;

				if (nruns == SEND_RUNS || pos + w->ss > SEND_MAX) {
					r = send_runs(w, runs, nruns);
					nruns = 0;
					pos = 0;
				}
				x = &runs[nruns++];
				*x = (struct run){ .off = at, .at = pos, .len = 0 };
			} else if (x->at + x->len + w->ss > SEND_MAX) {
				/* the stage is full: send, and go on from its start */
				r = send_runs(w, runs, nruns);
				runs[0] = (struct run){ .off = at, .at = 0, .len = 0 };
				nruns = 1;
				x = &runs[0];
			}
			if (r < 0)
				break;
			memcpy(w->stage + x->at + x->len, v[i]->data + k * w->ss, w->ss);
			x->len += w->ss;
			used = x->at + x->len;
			bytes += w->ss;
		}
	}
	if (r == 0)
		r = send_runs(w, runs, nruns);
	if (r < 0)
		return r;
	w->sent += bytes;
	for (guint i = 0; i < n; i++) {
		/* what was sent is good now; older clean sectors may not be */
		page_settle(w, v[i]);
		v[i]->dirty = 0;
		w->bytes -= PAGE;
		/* a page of no named owner (the journal's, metadata going home)
		   is never read as file data: it would only push data out */
		if (v[i]->owner)
			make_clean(w, v[i]);
		else
			page_drop(w, v[i]);
	}
	g_ptr_array_set_size(w->dirty, 0);
	return 0;
}

/* A write of owner's file data (0: metadata, or data of no named owner). */
static int wc_write_data(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off,
			 uint64_t owner)
{
	struct wcache *w = wc_of(dev);
	bool made;
	int r = 0;

	g_mutex_lock(&w->mu);
	for (uint64_t i = off / PAGE; i <= (off + len - 1) / PAGE; i++) {
		struct page *pg = page_get(w, i, &made);
		uint64_t ps = i * PAGE, s = MAX(ps, off), e = MIN(ps + PAGE, off + len);

		if (!pg) {
			r = -ENOMEM;
			break;
		}
		page_settle(w, pg);
		page_own(pg, mask_of(w, i, off, len), owner);
		if (!pg->dirty) {
			if (!made)
				clean_remove(w, pg);
			g_ptr_array_add(w->dirty, pg);
			w->bytes += PAGE;
		}
		memcpy(pg->data + (s - ps), (const uint8_t *)buf + (s - off), (size_t)(e - s));
		pg->valid |= mask_of(w, i, off, len);
		pg->dirty |= mask_of(w, i, off, len);
	}
	/* past the bound: on to the device now (not durable until a flush) */
	if (r == 0 && w->bytes > w->limit)
		r = send_all(w);
	g_mutex_unlock(&w->mu);
	return r;
}

static int wc_write(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off)
{
	return wc_write_data(dev, buf, len, off, 0);
}

static int wc_flush(struct o2_blockdev *dev)
{
	struct wcache *w = wc_of(dev);
	int r;

	g_mutex_lock(&w->mu);
	r = send_all(w);
	g_mutex_unlock(&w->mu);
	return r < 0 ? r : o2_blockdev_flush(w->inner);
}

static void wc_destroy(struct o2_blockdev *dev)
{
	struct wcache *w = wc_of(dev);

	/* what no flush sent is lost, as a crashed node's page cache is: the
	   volume closed without one (an error), and its locks may be gone */
	if (w->bytes)
		g_warning("dropping writes to %zu pages never flushed to the device", w->bytes / PAGE);
	g_ptr_array_free(w->dirty, TRUE);
	g_hash_table_destroy(w->pages);
	g_ptr_array_free(w->slabs, TRUE);
	o2_blockdev_free(w->inner);
	free(w->stage);
	if (w->ring_ok)
		io_uring_queue_exit(&w->ring);
	g_mutex_clear(&w->mu);
	g_free(w);
}

static const struct o2_blockdev_ops wc_ops = {
	.read = wc_read,
	.write = wc_write,
	.flush = wc_flush,
	.destroy = wc_destroy,
	.read_data = wc_read_data,
	.write_data = wc_write_data,
};

int wcache_new(struct o2_blockdev *inner, size_t limit, struct o2_blockdev **ret)
{
	struct wcache *w;

	if (!inner->sector_size || PAGE % inner->sector_size || PAGE / inner->sector_size > 32)
		return -EINVAL;
	w = g_new0(struct wcache, 1);
	if (posix_memalign((void **)&w->stage, PAGE, SEND_MAX)) {
		g_free(w);
		return -ENOMEM;
	}
	w->dev.ops = &wc_ops;
	w->dev.size = inner->size;
	w->dev.sector_size = inner->sector_size;
	w->dev.read_only = inner->read_only;
	w->inner = inner;
	w->ss = inner->sector_size;
	w->spp = PAGE / w->ss;
	w->limit = limit;
	w->clean_limit = limit;
	g_mutex_init(&w->mu);
	w->pages = g_hash_table_new(g_int64_hash, g_int64_equal);
	w->slabs = g_ptr_array_new_with_free_func(slab_free);
	w->dirty = g_ptr_array_new();
	w->fd = o2_blockdev_file_fd(inner, &w->direct);
	/* no ring (an old kernel, a memory device): writes one after another */
	w->ring_ok = w->fd >= 0 && io_uring_queue_init(SEND_RUNS, &w->ring, 0) == 0;
	*ret = &w->dev;
	return 0;
}

int wcache_write_out(struct o2_blockdev *dev)
{
	struct wcache *w = wc_of(dev);
	int r;

	if (dev->ops != &wc_ops)
		return 0;
	g_mutex_lock(&w->mu);
	r = send_all(w);
	g_mutex_unlock(&w->mu);
	return r;
}

void wcache_drop_clean(struct o2_blockdev *dev)
{
	struct wcache *w = wc_of(dev);

	if (dev->ops != &wc_ops)
		return;
	g_mutex_lock(&w->mu);
	while (w->clean.head) {
		struct page *pg = w->clean.head->data;

		clean_remove(w, pg);
		page_drop(w, pg);
	}
	/* a dirty page knows only what it is to send */
	for (guint i = 0; i < w->dirty->len; i++) {
		struct page *pg = w->dirty->pdata[i];

		pg->valid = pg->dirty;
	}
	g_mutex_unlock(&w->mu);
}

void wcache_lost(struct o2_blockdev *dev, uint64_t owner)
{
	struct wcache *w = wc_of(dev);

	if (!owner) {
		wcache_drop_clean(dev);
		return;
	}
	if (dev->ops != &wc_ops)
		return;
	g_mutex_lock(&w->mu);
	o2_losses_stamp(&w->losses, owner);
	g_mutex_unlock(&w->mu);
}

void wcache_stats(struct o2_blockdev *dev, struct wcache_stats *st)
{
	struct wcache *w = wc_of(dev);

	*st = (struct wcache_stats){ 0 };
	if (dev->ops != &wc_ops)
		return;
	g_mutex_lock(&w->mu);
	st->cached = w->bytes;
	st->sent = w->sent;
	st->together = w->together;
	g_mutex_unlock(&w->mu);
}
