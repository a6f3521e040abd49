/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The crash-recording test device and its materialised crash images.
 *
 * How it works.  o2_crashdev_new() copies the inner device once into a
 * snapshot.  Every write that then passes through is copied into an
 * append-only arena and recorded as an op {offset, length, data}; a flush
 * is an op without data.  Snapshot and arena live in a reference-counted
 * store shared by the crash device and every device materialised from it,
 * so a materialised device may outlive the crash device (the store goes
 * when its last user does).  Nothing in the store ever changes once
 * written: the snapshot is never written to, and arena data never moves.
 *
 * A materialised device is a copy-on-write view: a hash table from sector
 * number to the 512 bytes that sector holds, pointing either into the
 * store's arena (the recorded write that left the sector so) or into the
 * device's own pages (sectors written to the materialised device itself);
 * every sector not in the table reads from the snapshot.  Materialising
 * costs one table entry per recorded sector, never a copy of the volume.
 *
 * Not thread-safe: the devices, like every fscore object, belong to one
 * caller at a time.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "o2fs/blockdev.h"

#define SECTOR 512u
#define ARENA_CHUNK (1024u * 1024u)

/* ---- the shared store: snapshot and recorded write data ---- */

struct arena_chunk {
	struct arena_chunk *next;
	size_t used, cap;
	uint8_t data[];
};

struct crash_store {
	unsigned refs;
	uint64_t size;
	uint8_t *snap;
	struct arena_chunk *chunks; /* newest first */
};

static void store_unref(struct crash_store *s)
{
	if (!s || --s->refs)
		return;
	while (s->chunks) {
		struct arena_chunk *c = s->chunks;

		s->chunks = c->next;
		free(c);
	}
	free(s->snap);
	free(s);
}

/* Room for len bytes that will never move; NULL on -ENOMEM. */
static uint8_t *store_alloc(struct crash_store *s, size_t len)
{
	struct arena_chunk *c = s->chunks;
	uint8_t *p;

	if (!c || c->cap - c->used < len) {
		size_t cap = len > ARENA_CHUNK ? len : ARENA_CHUNK;

		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = cap;
		/* an oversized chunk goes second so the current one keeps filling */
		if (len > ARENA_CHUNK && s->chunks) {
			c->next = s->chunks->next;
			s->chunks->next = c;
		} else {
			c->next = s->chunks;
			s->chunks = c;
		}
	}
	p = c->data + c->used;
	c->used += len;
	return p;
}

/* ---- the recording device ---- */

struct crash_op {
	uint64_t off;
	size_t len;	     /* 0: a flush */
	const uint8_t *data; /* in the store */
};

struct crash_dev {
	struct o2_blockdev dev;
	struct o2_blockdev *inner;
	struct crash_store *store;
	struct crash_op *ops;
	size_t nops, cap;
};

static const struct o2_blockdev_ops crash_ops;

static struct crash_dev *to_crash(struct o2_blockdev *dev)
{
	return dev && dev->ops == &crash_ops ? (struct crash_dev *)dev : NULL;
}

static int crash_push(struct crash_dev *c, uint64_t off, size_t len, const uint8_t *data)
{
	if (c->nops == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 1024;
		struct crash_op *n = realloc(c->ops, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		c->ops = n;
		c->cap = ncap;
	}
	c->ops[c->nops++] = (struct crash_op){ off, len, data };
	return 0;
}

static int crash_read(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off)
{
	return o2_blockdev_read(((struct crash_dev *)dev)->inner, buf, len, off);
}

static int crash_write(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off)
{
	struct crash_dev *c = (struct crash_dev *)dev;
	uint8_t *copy;
	int r;

	/* reserve the op first so a recorded write is never missing from the log */
	if (c->nops == c->cap) {
		r = crash_push(c, 0, 0, NULL);
		if (r < 0)
			return r;
		c->nops--;
	}
	copy = store_alloc(c->store, len);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, buf, len);
	r = o2_blockdev_write(c->inner, buf, len, off);
	if (r < 0)
		return r; /* the arena keeps the unused copy; harmless */
	return crash_push(c, off, len, copy);
}

static int crash_flush(struct o2_blockdev *dev)
{
	struct crash_dev *c = (struct crash_dev *)dev;
	int r = o2_blockdev_flush(c->inner);

	if (r < 0)
		return r;
	return crash_push(c, 0, 0, NULL);
}

static void crash_destroy(struct o2_blockdev *dev)
{
	struct crash_dev *c = (struct crash_dev *)dev;

	store_unref(c->store);
	free(c->ops);
	free(c);
}

static const struct o2_blockdev_ops crash_ops = {
	.read = crash_read,
	.write = crash_write,
	.flush = crash_flush,
	.destroy = crash_destroy,
};

int o2_crashdev_new(struct o2_blockdev *inner, struct o2_blockdev **ret_dev)
{
	struct crash_dev *c;
	struct crash_store *s;
	int r;

	if (inner->sector_size != SECTOR || inner->size % SECTOR)
		return -EINVAL;
	if (inner->size > SIZE_MAX)
		return -ENOMEM;
	c = calloc(1, sizeof(*c));
	s = calloc(1, sizeof(*s));
	if (!c || !s) {
		r = -ENOMEM;
		goto out_free;
	}
	s->refs = 1;
	s->size = inner->size;
	s->snap = malloc(inner->size ? (size_t)inner->size : 1);
	if (!s->snap) {
		r = -ENOMEM;
		goto out_free;
	}
	r = o2_blockdev_read(inner, s->snap, (size_t)inner->size, 0);
	if (r < 0)
		goto out_free;
	c->dev.ops = &crash_ops;
	c->dev.size = inner->size;
	c->dev.sector_size = SECTOR;
	c->dev.read_only = inner->read_only;
	c->inner = inner;
	c->store = s;
	*ret_dev = &c->dev;
	return 0;

out_free:
	if (s)
		free(s->snap);
	free(s);
	free(c);
	return r;
}

size_t o2_crashdev_nops(struct o2_blockdev *dev)
{
	struct crash_dev *c = to_crash(dev);

	return c ? c->nops : 0;
}

int o2_crashdev_op_is_flush(struct o2_blockdev *dev, size_t i)
{
	struct crash_dev *c = to_crash(dev);

	return c && i < c->nops && c->ops[i].len == 0;
}

/* ---- the materialised (copy-on-write) device ---- */

struct cow_slot {
	uint64_t key; /* sector + 1; 0 = empty */
	uint8_t *ptr; /* the sector's 512 bytes */
	bool owned;   /* ptr is in this device's pages (writable) */
};

struct cow_page {
	struct cow_page *next;
	size_t used;
	uint8_t data[];
};

#define COW_PAGE_BYTES (64u * 1024u)

struct cow_dev {
	struct o2_blockdev dev;
	struct crash_store *store;
	struct cow_slot *tab;
	size_t cap, n;
	struct cow_page *pages;
};

static size_t cow_hash(uint64_t key, size_t cap)
{
	return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 23) & (cap - 1);
}

static struct cow_slot *cow_find(const struct cow_dev *w, uint64_t sector)
{
	uint64_t key = sector + 1;

	for (size_t i = cow_hash(key, w->cap);; i = (i + 1) & (w->cap - 1)) {
		if (w->tab[i].key == key)
			return &w->tab[i];
		if (!w->tab[i].key)
			return NULL;
	}
}

static int cow_grow(struct cow_dev *w)
{
	size_t ncap = w->cap * 2;
	struct cow_slot *nt = calloc(ncap, sizeof(*nt));

	if (!nt)
		return -ENOMEM;
	for (size_t k = 0; k < w->cap; k++) {
		size_t i;

		if (!w->tab[k].key)
			continue;
		for (i = cow_hash(w->tab[k].key, ncap); nt[i].key; i = (i + 1) & (ncap - 1))
			;
		nt[i] = w->tab[k];
	}
	free(w->tab);
	w->tab = nt;
	w->cap = ncap;
	return 0;
}

/* The slot for sector, created empty (ptr NULL) if there is none. */
static int cow_slot_get(struct cow_dev *w, uint64_t sector, struct cow_slot **ret)
{
	uint64_t key = sector + 1;
	size_t i;
	int r;

	if ((w->n + 1) * 2 > w->cap) {
		r = cow_grow(w);
		if (r < 0)
			return r;
	}
	for (i = cow_hash(key, w->cap); w->tab[i].key; i = (i + 1) & (w->cap - 1)) {
		if (w->tab[i].key == key) {
			*ret = &w->tab[i];
			return 0;
		}
	}
	w->tab[i] = (struct cow_slot){ .key = key };
	w->n++;
	*ret = &w->tab[i];
	return 0;
}

/* Point sector at recorded (immutable) data. */
static int cow_map(struct cow_dev *w, uint64_t sector, const uint8_t *data)
{
	struct cow_slot *s;
	int r = cow_slot_get(w, sector, &s);

	if (r < 0)
		return r;
	/* only materialising maps recorded data, before any private page exists */
	s->ptr = (uint8_t *)(uintptr_t)data;
	s->owned = false;
	return 0;
}

static uint8_t *cow_page_alloc(struct cow_dev *w)
{
	struct cow_page *p = w->pages;

	if (!p || p->used + SECTOR > COW_PAGE_BYTES) {
		p = malloc(sizeof(*p) + COW_PAGE_BYTES);
		if (!p)
			return NULL;
		p->used = 0;
		p->next = w->pages;
		w->pages = p;
	}
	p->used += SECTOR;
	return p->data + p->used - SECTOR;
}

static int cow_read(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off)
{
	struct cow_dev *w = (struct cow_dev *)dev;
	uint8_t *out = buf;

	for (size_t done = 0; done < len; done += SECTOR) {
		const struct cow_slot *s = cow_find(w, (off + done) / SECTOR);

		memcpy(out + done, s ? s->ptr : w->store->snap + off + done, SECTOR);
	}
	return 0;
}

static int cow_write(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off)
{
	struct cow_dev *w = (struct cow_dev *)dev;
	const uint8_t *in = buf;

	for (size_t done = 0; done < len; done += SECTOR) {
		struct cow_slot *s;
		int r = cow_slot_get(w, (off + done) / SECTOR, &s);

		if (r < 0)
			return r;
		if (!s->owned) {
			uint8_t *p = cow_page_alloc(w);

			if (!p) {
				/* leave the sector as it was: an unmapped slot must not stay */
				if (!s->ptr)
					s->ptr = w->store->snap + off + done;
				return -ENOMEM;
			}
			s->ptr = p;
			s->owned = true;
		}
		memcpy(s->ptr, in + done, SECTOR);
	}
	return 0;
}

static int cow_flush(struct o2_blockdev *dev)
{
	return 0;
}

static void cow_destroy(struct o2_blockdev *dev)
{
	struct cow_dev *w = (struct cow_dev *)dev;

	while (w->pages) {
		struct cow_page *p = w->pages;

		w->pages = p->next;
		free(p);
	}
	free(w->tab);
	store_unref(w->store);
	free(w);
}

static const struct o2_blockdev_ops cow_ops = {
	.read = cow_read,
	.write = cow_write,
	.flush = cow_flush,
	.destroy = cow_destroy,
};

/* splitmix64: a small, good generator for the seeded choices */
static uint64_t mix_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static int map_write(struct cow_dev *w, const struct crash_op *op, uint64_t *rng)
{
	size_t nsec = op->len / SECTOR;
	uint64_t first = op->off / SECTOR;
	int r;

	/*
	 * Per unflushed write, one of: applied whole, dropped, or (several
	 * sectors) torn - each sector independently applied or not, which
	 * covers both a partial prefix and the reordering a disk may do.
	 */
	enum { APPLY, DROP, TEAR } what = APPLY;

	if (rng) {
		uint64_t x = mix_next(rng) % 3;

		what = x == 0 ? APPLY : x == 1 ? DROP : (nsec > 1 ? TEAR : APPLY);
	}
	if (what == DROP)
		return 0;
	for (size_t i = 0; i < nsec; i++) {
		if (what == TEAR && !(mix_next(rng) & 1))
			continue;
		r = cow_map(w, first + i, op->data + i * SECTOR);
		if (r < 0)
			return r;
	}
	return 0;
}

int o2_crashdev_materialise(struct o2_blockdev *dev, size_t point, uint64_t seed,
			    struct o2_blockdev **ret_dev)
{
	struct crash_dev *c = to_crash(dev);
	struct cow_dev *w;
	size_t last_flush = 0, i;
	bool have_flush = false;
	uint64_t rng;
	int r;

	if (!c)
		return -EINVAL;
	if (point > c->nops)
		return -ERANGE;
	for (i = point; i-- > 0;) {
		if (!c->ops[i].len) {
			last_flush = i;
			have_flush = true;
			break;
		}
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->cap = 1024;
	w->tab = calloc(w->cap, sizeof(*w->tab));
	if (!w->tab) {
		free(w);
		return -ENOMEM;
	}
	w->store = c->store;
	w->store->refs++;
	w->dev.ops = &cow_ops;
	w->dev.size = c->dev.size;
	w->dev.sector_size = SECTOR;

	/* everything before the last flush reached the disk, in order */
	for (i = 0; have_flush && i < last_flush; i++) {
		if (c->ops[i].len) {
			r = map_write(w, &c->ops[i], NULL);
			if (r < 0)
				goto out_free;
		}
	}
	/* the unflushed tail: as the seed chooses */
	rng = seed ^ ((uint64_t)point * 0xD1B54A32D192ED03ull);
	for (i = have_flush ? last_flush + 1 : 0; i < point; i++) {
		if (c->ops[i].len) {
			r = map_write(w, &c->ops[i], seed ? &rng : NULL);
			if (r < 0)
				goto out_free;
		}
	}
	*ret_dev = &w->dev;
	return 0;

out_free:
	cow_destroy(&w->dev);
	return r;
}
