/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The in-memory model of /TOP: inodes, entries, link counts and contents. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model.h"

/* ---- randomness ---- */

uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

uint64_t rng_below(struct rng *r, uint64_t n)
{
	return n ? rng_next(r) % n : 0;
}

uint64_t rng_range(struct rng *r, uint64_t lo, uint64_t hi)
{
	return lo + rng_below(r, hi - lo + 1);
}

bool rng_pct(struct rng *r, unsigned pct)
{
	return rng_below(r, 100) < pct;
}

void rng_fill(uint64_t seed, void *buf, size_t len)
{
	struct rng r = { seed };
	uint8_t *p = buf;

	while (len >= 8) {
		uint64_t v = rng_next(&r);

		memcpy(p, &v, 8);
		p += 8;
		len -= 8;
	}
	if (len) {
		uint64_t v = rng_next(&r);

		memcpy(p, &v, len);
	}
}

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (!q) {
		fprintf(stderr, "model: out of memory (%zu bytes)\n", n);
		abort();
	}
	return q;
}

/* ---- the tree ---- */

void model_init(struct model *m, uint32_t block_size, uint32_t cluster_size)
{
	memset(m, 0, sizeof(*m));
	m->block_size = block_size;
	m->cluster_size = cluster_size;
}

static void free_inode_mem(struct m_inode *in)
{
	for (size_t i = 0; i < in->nents; i++)
		free(in->ents[i].name);
	free(in->ents);
	free(in->data);
	free(in->target);
	for (size_t i = 0; i < in->nxattrs; i++)
		free(in->xattrs[i].value);
	free(in->xattrs);
	free(in);
}

void model_free(struct model *m)
{
	for (size_t i = 0; i < m->nall; i++)
		free_inode_mem(m->all[i]);
	free(m->all);
	memset(m, 0, sizeof(*m));
}

struct m_inode *model_new_inode(struct model *m, enum m_type type, uint64_t ino, uint16_t perm)
{
	struct m_inode *in = calloc(1, sizeof(*in));

	if (!in)
		abort();
	in->type = type;
	in->ino = ino;
	in->perm = perm & 07777;
	in->atime = in->mtime = in->ctime = m->now;
	if (m->nall == m->all_cap) {
		m->all_cap = m->all_cap ? m->all_cap * 2 : 64;
		m->all = xrealloc(m->all, m->all_cap * sizeof(*m->all));
	}
	in->index = m->nall;
	m->all[m->nall++] = in;
	return in;
}

void model_forget(struct model *m, struct m_inode *in)
{
	size_t i = in->index;

	m->data_bytes -= in->size;
	m->all[i] = m->all[--m->nall];
	m->all[i]->index = i;
	free_inode_mem(in);
}

struct m_dirent *model_lookup(struct m_inode *dir, const char *name, size_t len)
{
	for (size_t i = 0; i < dir->nents; i++)
		if (dir->ents[i].len == len && !memcmp(dir->ents[i].name, name, len))
			return &dir->ents[i];
	return NULL;
}

void model_add_entry(struct m_inode *dir, const char *name, size_t len, struct m_inode *in)
{
	char *n = malloc(len + 1);

	if (!n)
		abort();
	memcpy(n, name, len);
	n[len] = '\0';
	if (dir->nents == dir->ents_cap) {
		dir->ents_cap = dir->ents_cap ? dir->ents_cap * 2 : 8;
		dir->ents = xrealloc(dir->ents, dir->ents_cap * sizeof(*dir->ents));
	}
	dir->ents[dir->nents++] = (struct m_dirent){ n, len, in };
	if (in->type == M_DIR)
		in->parent = dir;
}

void model_del_entry(struct m_inode *dir, struct m_dirent *de)
{
	size_t i = (size_t)(de - dir->ents);

	free(de->name);
	dir->ents[i] = dir->ents[--dir->nents];
}

bool model_is_descendant(const struct m_inode *d, const struct m_inode *a)
{
	for (; d; d = d->parent)
		if (d == a)
			return true;
	return false;
}

unsigned model_subdirs(const struct m_inode *dir)
{
	unsigned n = 0;

	for (size_t i = 0; i < dir->nents; i++)
		n += dir->ents[i].ino->type == M_DIR;
	return n;
}

void model_touch_mc(const struct model *m, struct m_inode *in)
{
	in->mtime = in->ctime = m->now;
}

void model_touch_c(const struct model *m, struct m_inode *in)
{
	in->ctime = m->now;
}

void model_times_unknown(struct m_inode *in, bool mtime, bool ctime)
{
	if (mtime)
		in->mtime = -1;
	if (ctime)
		in->ctime = -1;
}

void model_drop_link(struct model *m, struct m_inode *in)
{
	model_touch_c(m, in); /* if it lives on, its ctime is the unlink's */
	if (in->nlink)
		in->nlink--;
	if (in->type == M_DIR)
		in->nlink = 0; /* a removed directory has no link left */
	if (in->nlink == 0 && in->open_refs == 0)
		model_forget(m, in);
}

void model_write(struct model *m, struct m_inode *in, uint64_t off, const void *buf, size_t len)
{
	uint64_t end = off + len;

	if (end > in->cap) {
		size_t ncap = in->cap ? in->cap : 4096;

		while (ncap < end)
			ncap *= 2;
		in->data = xrealloc(in->data, ncap);
		memset(in->data + in->cap, 0, ncap - in->cap);
		in->cap = ncap;
	}
	memcpy(in->data + off, buf, len);
	if (len)
		model_touch_mc(m, in);
	if (end > in->size) {
		m->data_bytes += end - in->size;
		in->size = end;
	}
	if (in->alloc_end < in->size)
		in->alloc_end = in->size;
}

void model_truncate(struct model *m, struct m_inode *in, uint64_t size)
{
	/* a size change stamps mtime and ctime; setting the same size may or may not */
	if (size != in->size)
		model_touch_mc(m, in);
	else
		model_times_unknown(in, true, true);
	if (size < in->size) {
		/* bytes past the new size must read as zeros if it grows again */
		memset(in->data + size, 0, in->size - size);
		m->data_bytes -= in->size - size;
		in->size = size;
		in->alloc_end = size;
		return;
	}
	if (size > in->cap) {
		size_t ncap = in->cap ? in->cap : 4096;

		while (ncap < size)
			ncap *= 2;
		in->data = xrealloc(in->data, ncap);
		memset(in->data + in->cap, 0, ncap - in->cap);
		in->cap = ncap;
	}
	m->data_bytes += size - in->size;
	in->size = size;
	if (in->alloc_end < size)
		in->alloc_end = size;
}

char *model_path(const struct m_inode *dir, const char *name, size_t len)
{
	const struct m_inode *chain[256];
	size_t n = 0, total = 0;
	char *p, *out;

	for (const struct m_inode *d = dir; d && n < 256; d = d->parent)
		chain[n++] = d;
	/* each ancestor below TOP contributes "/" + its name in its parent */
	char *buf = malloc(65536);

	if (!buf)
		abort();
	p = buf;
	p += sprintf(p, "/TOP");
	for (size_t i = n; i-- > 0;) {
		const struct m_inode *d = chain[i];

		if (!d->parent)
			continue; /* TOP itself */
		for (size_t k = 0; k < d->parent->nents; k++)
			if (d->parent->ents[k].ino == d) {
				*p++ = '/';
				memcpy(p, d->parent->ents[k].name, d->parent->ents[k].len);
				p += d->parent->ents[k].len;
				break;
			}
	}
	if (name) {
		*p++ = '/';
		memcpy(p, name, len);
		p += len;
	}
	*p = '\0';
	total = (size_t)(p - buf);
	out = malloc(total + 1);
	if (!out)
		abort();
	memcpy(out, buf, total + 1);
	free(buf);
	return out;
}

uint64_t model_cluster_estimate(const struct model *m)
{
	uint64_t cs = m->cluster_size, total = 0;

	for (size_t i = 0; i < m->nall; i++) {
		const struct m_inode *in = m->all[i];

		switch (in->type) {
		case M_REG:
			total += (in->alloc_end + cs - 1) / cs + 1;
			break;
		case M_DIR: {
			uint64_t bytes = 2 * m->block_size;

			for (size_t k = 0; k < in->nents; k++)
				bytes += 16 + ((in->ents[k].len + 3) & ~3ull);
			/* an indexed directory also has its index blocks */
			total += 2 * ((bytes * 2 + cs - 1) / cs) + 1;
			break;
		}
		case M_LNK:
			total += (strlen(in->target) + cs) / cs;
			break;
		default:
			break;
		}
		for (size_t k = 0; k < in->nxattrs; k++)
			if (in->xattrs[k].size > 80)
				total += (in->xattrs[k].size + cs - 1) / cs;
	}
	return total;
}

struct m_xattr *model_xattr_find(struct m_inode *in, unsigned type, const char *name, size_t len)
{
	for (size_t i = 0; i < in->nxattrs; i++)
		if (in->xattrs[i].type == type && in->xattrs[i].name_len == len &&
		    !memcmp(in->xattrs[i].name, name, len))
			return &in->xattrs[i];
	return NULL;
}

void model_xattr_set(struct m_inode *in, unsigned type, const char *name, size_t len,
		     const void *value, size_t size)
{
	struct m_xattr *x = model_xattr_find(in, type, name, len);

	if (!value) {
		if (x) {
			free(x->value);
			*x = in->xattrs[--in->nxattrs];
		}
		return;
	}
	if (!x) {
		in->xattrs = xrealloc(in->xattrs, (in->nxattrs + 1) * sizeof(*in->xattrs));
		x = &in->xattrs[in->nxattrs++];
		memset(x, 0, sizeof(*x));
		x->type = (uint8_t)type;
		x->name_len = (uint8_t)len;
		memcpy(x->name, name, len);
	}
	free(x->value);
	x->value = malloc(size ? size : 1);
	if (!x->value)
		abort();
	memcpy(x->value, value, size);
	x->size = size;
}

size_t model_xattr_entry_bytes(size_t name_len, size_t size)
{
	/* entry, name, then the value (up to 80 bytes) or a value root of one extent */
	return 16 + ((name_len + 3) & ~(size_t)3) + (size <= 80 ? (size + 3) & ~(size_t)3 : 48);
}

size_t model_xattr_bytes(const struct m_inode *in, const struct m_xattr *skip)
{
	size_t n = 0;

	for (size_t i = 0; i < in->nxattrs; i++)
		if (&in->xattrs[i] != skip)
			n += model_xattr_entry_bytes(in->xattrs[i].name_len, in->xattrs[i].size);
	return n;
}

uint16_t model_type_bits(enum m_type t)
{
	switch (t) {
	case M_REG:
		return S_IFREG;
	case M_DIR:
		return S_IFDIR;
	case M_LNK:
		return S_IFLNK;
	case M_FIFO:
		return S_IFIFO;
	case M_SOCK:
		return S_IFSOCK;
	case M_CHR:
		return S_IFCHR;
	}
	return 0;
}

uint8_t model_dt(enum m_type t)
{
	switch (t) {
	case M_REG:
		return O2_DT_REG;
	case M_DIR:
		return O2_DT_DIR;
	case M_LNK:
		return O2_DT_LNK;
	case M_FIFO:
		return O2_DT_FIFO;
	case M_SOCK:
		return O2_DT_SOCK;
	case M_CHR:
		return O2_DT_CHR;
	}
	return O2_DT_UNKNOWN;
}

/* ---- expectations ---- */

void expect_add(struct expect *e, int err)
{
	for (unsigned i = 0; i < e->nerr; i++)
		if (e->errs[i] == err)
			return;
	if (e->nerr < sizeof(e->errs) / sizeof(e->errs[0]))
		e->errs[e->nerr++] = err;
}

bool expect_allows(const struct expect *e, int result)
{
	if (e->nerr == 0)
		return result == 0;
	for (unsigned i = 0; i < e->nerr; i++)
		if (e->errs[i] == result)
			return true;
	return false;
}

static const char *errno_name(int e)
{
	switch (e) {
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case EIO: return "EIO";
	case ENOMEM: return "ENOMEM";
	case EEXIST: return "EEXIST";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case EINVAL: return "EINVAL";
	case ENOSPC: return "ENOSPC";
	case EROFS: return "EROFS";
	case EMLINK: return "EMLINK";
	case ENAMETOOLONG: return "ENAMETOOLONG";
	case ENOTEMPTY: return "ENOTEMPTY";
	case EUCLEAN: return "EUCLEAN";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EFBIG: return "EFBIG";
	case ERANGE: return "ERANGE";
	default: return "E?";
	}
}

const char *err_str(int err, char *buf, size_t len)
{
	if (err >= 0)
		snprintf(buf, len, "%d", err);
	else
		snprintf(buf, len, "%d (%s)", err, errno_name(-err));
	return buf;
}

const char *expect_str(const struct expect *e, char *buf, size_t len)
{
	size_t off = 0;

	if (e->nerr == 0) {
		snprintf(buf, len, "0");
		return buf;
	}
	buf[0] = '\0';
	for (unsigned i = 0; i < e->nerr && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%d (%s)", i ? " or " : "",
					e->errs[i], errno_name(-e->errs[i]));
	return buf;
}
