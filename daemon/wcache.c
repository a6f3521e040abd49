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
 * Why it is safe: fscore is correct on any device whose writes may be
 * lost or reordered until a flush (the crash suite's model of a disk);
 * this is one.  Ordered data before a journal commit comes free: the
 * commit's first flush sends every cached write before its commit block.
 * It dies with the daemon, as a crashed node's page cache does: what a
 * SIGKILLed daemon had not flushed never reaches the disk, not even after
 * another node has recovered the slot.
 *
 * Threads: fscore calls read and write under the volume mutex, and may
 * flush without it (fsync): one mutex of the device's own guards the pages,
 * held while they are sent so that a read never sees the disk behind a
 * page that is leaving the cache.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ocfs2d.h"

#define PAGE 4096u
#define SEND_MAX (1u << 20) /* bytes sent in one write */

struct wcache {
	struct o2_blockdev dev; /* first: what fscore is given */
	struct o2_blockdev *inner;
	GMutex mu;
	GHashTable *pages; /* page index (uint64_t *) -> struct page */
	size_t bytes, limit;
	uint8_t *stage;	   /* SEND_MAX bytes, aligned for O_DIRECT */
	uint64_t sent;	   /* bytes sent on to the device so far */
};

struct page {
	uint64_t idx;
	uint32_t len; /* PAGE, or less for the last page of the device */
	uint8_t *data; /* aligned for O_DIRECT */
};

static void page_free(gpointer p)
{
	struct page *pg = p;

	free(pg->data);
	g_free(pg);
}

static struct wcache *wc_of(struct o2_blockdev *dev)
{
	return (struct wcache *)dev;
}

/* Whether any page of [off, off + len) is cached; under mu. */
static bool cached_in(struct wcache *w, uint64_t off, size_t len)
{
	if (!g_hash_table_size(w->pages))
		return false;
	for (uint64_t i = off / PAGE; i <= (off + len - 1) / PAGE; i++)
		if (g_hash_table_contains(w->pages, &i))
			return true;
	return false;
}

static int wc_read(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off)
{
	struct wcache *w = wc_of(dev);
	int r;

	if (!len)
		return 0;
	g_mutex_lock(&w->mu);
	if (!cached_in(w, off, len)) {
		/* nothing of it cached, and nothing leaves the disk behind us */
		g_mutex_unlock(&w->mu);
		return o2_blockdev_read(w->inner, buf, len, off);
	}
	r = o2_blockdev_read(w->inner, buf, len, off);
	for (uint64_t i = off / PAGE; r == 0 && i <= (off + len - 1) / PAGE; i++) {
		struct page *pg = g_hash_table_lookup(w->pages, &i);

		if (pg) {
			uint64_t ps = i * PAGE, s = MAX(ps, off), e = MIN(ps + pg->len, off + len);

			memcpy((uint8_t *)buf + (s - off), pg->data + (s - ps), (size_t)(e - s));
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

/*
 * Send every cached page to the device in block order, contiguous pages in
 * one write; under mu.  A page leaves the cache only once it is sent.
 */
static int send_all(struct wcache *w)
{
	guint n = g_hash_table_size(w->pages);
	struct page **v;
	GHashTableIter it;
	gpointer val;
	guint i = 0, j;
	int r = 0;

	if (!n)
		return 0;
	v = g_new(struct page *, n);
	g_hash_table_iter_init(&it, w->pages);
	while (g_hash_table_iter_next(&it, NULL, &val))
		v[i++] = val;
	qsort(v, n, sizeof(*v), cmp_page);
	for (i = 0; i < n && r == 0; i = j) {
		size_t len = v[i]->len;

		memcpy(w->stage, v[i]->data, v[i]->len);
		for (j = i + 1; j < n && v[j - 1]->len == PAGE && v[j]->idx == v[j - 1]->idx + 1 &&
				len + v[j]->len <= SEND_MAX;
		     j++) {
			memcpy(w->stage + len, v[j]->data, v[j]->len);
			len += v[j]->len;
		}
		r = o2_blockdev_write(w->inner, w->stage, len, v[i]->idx * PAGE);
		if (r < 0)
			break;
		w->sent += len;
		for (guint k = i; k < j; k++) {
			w->bytes -= v[k]->len;
			g_hash_table_remove(w->pages, &v[k]->idx);
		}
	}
	g_free(v);
	return r;
}

static int wc_write(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off)
{
	struct wcache *w = wc_of(dev);
	int r = 0;

	if (!len)
		return 0;
	g_mutex_lock(&w->mu);
	for (uint64_t i = off / PAGE; i <= (off + len - 1) / PAGE; i++) {
		struct page *pg = g_hash_table_lookup(w->pages, &i);
		uint64_t ps = i * PAGE, s = MAX(ps, off);
		uint32_t plen = (uint32_t)MIN((uint64_t)PAGE, dev->size - ps);
		uint64_t e = MIN(ps + plen, off + len);

		if (!pg) {
			pg = g_new0(struct page, 1);
			pg->idx = i;
			pg->len = plen;
			if (posix_memalign((void **)&pg->data, PAGE, PAGE)) {
				g_free(pg);
				r = -ENOMEM;
				break;
			}
			/* a page written in part: the rest as the disk has it */
			if ((s > ps || e < ps + plen) &&
			    (r = o2_blockdev_read(w->inner, pg->data, plen, ps)) < 0) {
				page_free(pg);
				break;
			}
			g_hash_table_insert(w->pages, &pg->idx, pg);
			w->bytes += plen;
		}
		memcpy(pg->data + (s - ps), (const uint8_t *)buf + (s - off), (size_t)(e - s));
	}
	/* past the bound: on to the device now (not durable until a flush) */
	if (r == 0 && w->bytes > w->limit)
		r = send_all(w);
	g_mutex_unlock(&w->mu);
	return r;
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
		g_warning("dropping %zu bytes of writes never flushed to the device", w->bytes);
	g_hash_table_destroy(w->pages);
	o2_blockdev_free(w->inner);
	free(w->stage);
	g_mutex_clear(&w->mu);
	g_free(w);
}

static const struct o2_blockdev_ops wc_ops = {
	.read = wc_read,
	.write = wc_write,
	.flush = wc_flush,
	.destroy = wc_destroy,
};

int wcache_new(struct o2_blockdev *inner, size_t limit, struct o2_blockdev **ret)
{
	struct wcache *w = g_new0(struct wcache, 1);

	if (posix_memalign((void **)&w->stage, PAGE, SEND_MAX)) {
		g_free(w);
		return -ENOMEM;
	}
	w->dev.ops = &wc_ops;
	w->dev.size = inner->size;
	w->dev.sector_size = inner->sector_size;
	w->dev.read_only = inner->read_only;
	w->inner = inner;
	w->limit = limit;
	g_mutex_init(&w->mu);
	w->pages = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, page_free);
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

void wcache_stats(struct o2_blockdev *dev, uint64_t *cached, uint64_t *sent)
{
	struct wcache *w = wc_of(dev);

	*cached = *sent = 0;
	if (dev->ops != &wc_ops)
		return;
	g_mutex_lock(&w->mu);
	*cached = w->bytes;
	*sent = w->sent;
	g_mutex_unlock(&w->mu);
}
