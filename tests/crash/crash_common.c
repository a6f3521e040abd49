/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Volumes, the seeded workload and the crash model shared by the crash and fault tests. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crash_common.h"
#include "../testenv.h"
#include "journal.h"

#define TOOL_PATH "PATH=\"$PATH:/usr/sbin:/sbin\" "

/* ---- volumes ---- */

bool have_mkfs(void)
{
	return system(TOOL_PATH "command -v mkfs.ocfs2 >/dev/null 2>&1") == 0;
}

void vol_image_make(struct vol_image *v, const char *name, uint64_t size, const char *args)
{
	char dir[256], path[300], cmd[700];
	struct stat st;
	int fd, st_code;

	snprintf(v->name, sizeof(v->name), "%s", name);
	snprintf(dir, sizeof(dir), "%s/o2crash-XXXXXX", test_tmpdir());
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/vol.img", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
		perror(path);
		exit(1);
	}
	close(fd);
	snprintf(cmd, sizeof(cmd), TOOL_PATH "mkfs.ocfs2 -q -M local %s %s </dev/null >/dev/null 2>&1",
		 args, path);
	st_code = system(cmd);
	if (!WIFEXITED(st_code) || WEXITSTATUS(st_code) != 0) {
		fprintf(stderr, "%s: mkfs.ocfs2 %s failed (status %d)\n", name, args, st_code);
		exit(1);
	}
	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(path);
		exit(1);
	}
	v->size = (size_t)st.st_size;
	v->data = malloc(v->size);
	if (!v->data) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (size_t done = 0; done < v->size;) {
		ssize_t n = pread(fd, v->data + done, v->size - done, (off_t)done);

		if (n <= 0) {
			perror(path);
			exit(1);
		}
		done += (size_t)n;
	}
	close(fd);
	unlink(path);
	rmdir(dir);
}

void vol_image_free(struct vol_image *v)
{
	free(v->data);
	v->data = NULL;
}

struct o2_blockdev *vol_image_dev(const struct vol_image *v)
{
	struct o2_blockdev *dev;

	ck_assert_int_eq(o2_blockdev_new_memory_from(v->data, v->size, v->size, &dev), 0);
	return dev;
}

static uint64_t fake_now(void *arg)
{
	return ((struct fake_clock *)arg)->ns;
}

int open_rw(struct o2_blockdev *dev, struct fake_clock *clk, struct o2_fs **ret, char *err,
	    size_t errlen)
{
	struct o2_open_opts o = {
		.flags = O2_OPEN_RDWR,
		.slot = 0,
		.commit_interval_ms = 5000,
		.now_ns = fake_now,
		.clock_arg = clk,
	};

	return o2_fs_open_opts(dev, &o, ret, err, errlen);
}

/* ---- randomness ---- */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static unsigned below(uint64_t *s, unsigned n)
{
	return n ? (unsigned)(splitmix(s) % n) : 0;
}

/* ---- the workload script ---- */

static struct wl_step *push_step(struct workload *w, enum step_kind kind)
{
	if (w->nsteps == w->scap) {
		w->scap = w->scap ? w->scap * 2 : 256;
		w->steps = realloc(w->steps, w->scap * sizeof(*w->steps));
		ck_assert_ptr_nonnull(w->steps);
	}
	w->steps[w->nsteps] = (struct wl_step){ .kind = kind };
	return &w->steps[w->nsteps++];
}

static void push_ref(struct workload *w, unsigned target, bool bnew, bool magic)
{
	if (w->nrefs == w->rcap) {
		w->rcap = w->rcap ? w->rcap * 2 : 1024;
		w->refs = realloc(w->refs, w->rcap * sizeof(*w->refs));
		ck_assert_ptr_nonnull(w->refs);
	}
	w->refs[w->nrefs++] = (struct wl_ref){ target, bnew, magic };
}

void wl_generate(struct workload *w, const struct wl_params *p)
{
	unsigned nt = 1 + p->pool;
	bool *avail = calloc(nt, sizeof(bool)), *fresh = calloc(nt, sizeof(bool));
	unsigned *cand = calloc(nt, sizeof(unsigned)), *pending = calloc(nt, sizeof(unsigned));
	uint64_t rng = p->seed * 0x2545F4914F6CDD1Dull + 1;

	ck_assert(avail && fresh && cand && pending);
	memset(w, 0, sizeof(*w));
	w->p = *p;
	w->ntargets = nt;
	for (unsigned i = 1; i < nt; i++)
		avail[i] = fresh[i] = true;

	for (unsigned hc = 0; hc < p->handles; hc++) {
		unsigned nc = 0, n, npend = 0;
		bool big = below(&rng, 100) < p->big_pct;

		for (unsigned i = 1; i < nt; i++)
			if (avail[i])
				cand[nc++] = i;
		n = big ? p->big_max / 2 + below(&rng, p->big_max / 2 + 1) : 1 + below(&rng, p->kmax);
		if (n > nc)
			n = nc;
		/* n distinct blocks: a partial shuffle */
		for (unsigned i = 0; i < n; i++) {
			unsigned j = i + below(&rng, nc - i), tmp = cand[i];

			cand[i] = cand[j];
			cand[j] = tmp;
		}
		struct wl_step *s = push_step(w, ST_HANDLE);

		s->clock_ms = below(&rng, 1500);
		s->first = (unsigned)w->nrefs;
		for (unsigned i = 0; i < n; i++) {
			unsigned t = cand[i];

			push_ref(w, t, fresh[t], below(&rng, 8) == 0);
			fresh[t] = false;
			/* the root inode somewhere among them, a third of the time */
			if (i == n / 2 && below(&rng, 3) == 0)
				push_ref(w, 0, false, false);
		}
		if (n == 0)
			push_ref(w, 0, false, false);
		s->n = (unsigned)(w->nrefs - s->first);

		/* free a block or two that has been used */
		s->rfirst = (unsigned)w->nrefs;
		if (below(&rng, 100) < p->revoke_pct) {
			unsigned want = 1 + below(&rng, 2);

			for (unsigned tries = 0; tries < 8 && want; tries++) {
				unsigned t = 1 + below(&rng, p->pool);
				bool dup = false;

				if (!avail[t] || fresh[t])
					continue;
				for (size_t k = s->rfirst; k < w->nrefs; k++)
					dup |= w->refs[k].target == t;
				if (dup)
					continue;
				push_ref(w, t, false, false);
				want--;
				if (below(&rng, 2)) {
					/* reused as file data once the revoke is committed */
					avail[t] = false;
					pending[npend++] = t;
				} else {
					/* reallocated as metadata: a new block */
					fresh[t] = true;
				}
			}
		}
		s->nrev = (unsigned)(w->nrefs - s->rfirst);

		if (npend) {
			push_step(w, below(&rng, 2) ? ST_SYNC : ST_COMMIT);
			for (unsigned i = 0; i < npend; i++) {
				struct wl_step *d = push_step(w, ST_DATA);

				d->target = pending[i];
				avail[pending[i]] = true;
			}
		}
		if (below(&rng, 100) < p->sync_pct)
			push_step(w, ST_SYNC);
		if (below(&rng, 100) < 2)
			push_step(w, ST_CHECKPOINT);
		if (below(&rng, 100) < 3)
			push_step(w, ST_TICK)->clock_ms = 6000;
		if (below(&rng, 100) < 3)
			push_step(w, ST_COMMIT);
		if (below(&rng, 100) < 4)
			push_step(w, ST_HOME);
		if (below(&rng, 100) < 1)
			push_step(w, ST_FORGET);
	}
	free(avail);
	free(fresh);
	free(cand);
	free(pending);
}

void wl_free(struct workload *w)
{
	free(w->steps);
	free(w->refs);
	memset(w, 0, sizeof(*w));
}

/* ---- the model ---- */

uint64_t block_hash(const uint8_t *buf, uint32_t bs, uint8_t kind)
{
	size_t skip = kind == O2_META_INODE ? offsetof(struct o2_dinode, i_check) / 8 : SIZE_MAX;
	uint64_t h = 0x84222325CBF29CE4ull ^ bs;

	for (size_t i = 0; i < bs / 8; i++) {
		uint64_t v;

		if (i == skip)
			continue;
		memcpy(&v, buf + i * 8, 8);
		h = (h ^ v) * 0x100000001B3ull;
		h ^= h >> 29;
	}
	return h ^ (h >> 32);
}

static void add_version(struct target *t, uint32_t h, bool wild, uint64_t hash)
{
	if (t->nv == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 16;
		t->v = realloc(t->v, t->cap * sizeof(*t->v));
		ck_assert_ptr_nonnull(t->v);
	}
	t->v[t->nv++] = (struct version){ h, wild, hash };
}

struct group_span {
	uint64_t blkno;
	uint16_t bits;
};

struct group_list {
	struct group_span g[64];
	unsigned n;
};

static int collect_group(unsigned chain, const struct o2_group_info *g, void *arg)
{
	struct group_list *l = arg;

	ck_assert_uint_lt(l->n, 64);
	l->g[l->n++] = (struct group_span){ g->blkno, g->bits };
	return 0;
}

/* Whether the cluster holding blkno is free in the global bitmap. */
static bool block_is_free(struct o2_fs *fs, const struct group_list *l, uint8_t *buf,
			  uint64_t blkno)
{
	uint64_t cluster = blkno >> fs->bpc_bits;

	for (unsigned i = 0; i < l->n; i++) {
		uint64_t first = l->g[i].blkno == fs->info.first_cluster_group
					 ? 0 : l->g[i].blkno >> fs->bpc_bits;

		if (cluster < first || cluster >= first + l->g[i].bits)
			continue;
		ck_assert_int_eq(o2_read_meta(fs, l->g[i].blkno, O2_META_GROUP, buf), 0);
		uint64_t bit = cluster - first;

		return !((((const struct o2_group_desc *)buf)->bg_bitmap[bit / 8] >> (bit % 8)) & 1);
	}
	return false;
}

void model_init(struct model *m, struct o2_fs *fs, unsigned pool)
{
	struct group_list groups = { .n = 0 };
	struct o2_inode *bm;
	uint64_t bm_blk;
	uint8_t *buf = malloc(fs->bs);

	memset(m, 0, sizeof(*m));
	m->bs = fs->bs;
	m->nt = 1 + pool;
	m->t = calloc(m->nt, sizeof(*m->t));
	ck_assert(buf && m->t);
	ck_assert_int_eq(o2_sysfile_lookup(fs, O2_SYS_GLOBAL_BITMAP, 0, &bm_blk), 0);
	ck_assert_int_eq(o2_inode_get(fs, bm_blk, &bm), 0);
	ck_assert_int_eq(o2_chain_walk(fs, bm, collect_group, &groups), 0);
	o2_inode_unref(bm);

	m->t[0].blkno = fs->info.root_blkno;
	m->t[0].kind = O2_META_INODE;
	for (unsigned i = 1; i < m->nt; i++) {
		m->t[i].blkno = fs->nblocks - pool - 1 + i;
		m->t[i].kind = O2_META_PLAIN;
		ck_assert_msg(block_is_free(fs, &groups, buf, m->t[i].blkno),
			      "target block %llu is not free space", (unsigned long long)m->t[i].blkno);
	}
	for (unsigned i = 0; i < m->nt; i++) {
		ck_assert_int_eq(o2_blockdev_read(fs->dev, buf, fs->bs, m->t[i].blkno << fs->bits), 0);
		add_version(&m->t[i], 0, false, block_hash(buf, fs->bs, m->t[i].kind));
	}
	m->bcap = 1024;
	m->begin_op = calloc(m->bcap, sizeof(*m->begin_op));
	ck_assert_ptr_nonnull(m->begin_op);
	free(buf);
}

void model_free(struct model *m)
{
	for (unsigned i = 0; i < m->nt; i++)
		free(m->t[i].v);
	free(m->t);
	free(m->begin_op);
	free(m->dur);
	memset(m, 0, sizeof(*m));
}

static uint32_t model_begin(struct model *m, struct o2_blockdev *crash)
{
	uint32_t h = ++m->nh;

	if (h >= m->bcap) {
		m->bcap *= 2;
		m->begin_op = realloc(m->begin_op, m->bcap * sizeof(*m->begin_op));
		ck_assert_ptr_nonnull(m->begin_op);
	}
	m->begin_op[h] = o2_crashdev_nops(crash);
	return h;
}

void model_durable_now(struct model *m, struct o2_blockdev *crash)
{
	if (m->ndur == m->dcap) {
		m->dcap = m->dcap ? m->dcap * 2 : 256;
		m->dur = realloc(m->dur, m->dcap * sizeof(*m->dur));
		ck_assert_ptr_nonnull(m->dur);
	}
	m->dur[m->ndur++] = (struct durable){ o2_crashdev_nops(crash), m->h_ended };
}

uint32_t model_durable(const struct model *m, size_t p)
{
	size_t lo = 0, hi = m->ndur;

	/* the last record with nops <= p */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (m->dur[mid].nops <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? m->dur[lo - 1].h : 0;
}

uint32_t model_begun(const struct model *m, size_t p)
{
	uint32_t lo = 1, hi = m->nh + 1;

	/* the last handle that began before op p */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (m->begin_op[mid] < p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo - 1;
}

struct ival {
	uint32_t lo, hi;
};

/* The handles at which target t held content `hash`. */
static size_t target_ivals(const struct target *t, uint64_t hash, struct ival *out)
{
	size_t n = 0;

	for (size_t i = 0; i < t->nv; i++) {
		uint32_t lo = t->v[i].h, hi;

		if (i + 1 < t->nv && t->v[i + 1].h == lo)
			continue; /* replaced within the same handle */
		hi = i + 1 < t->nv ? t->v[i + 1].h - 1 : UINT32_MAX;
		if (!t->v[i].wild && t->v[i].hash != hash)
			continue;
		if (n && out[n - 1].hi + 1 == lo)
			out[n - 1].hi = hi;
		else
			out[n++] = (struct ival){ lo, hi };
	}
	return n;
}

static size_t intersect(const struct ival *a, size_t na, const struct ival *b, size_t nb,
			struct ival *out)
{
	size_t i = 0, j = 0, n = 0;

	while (i < na && j < nb) {
		uint32_t lo = a[i].lo > b[j].lo ? a[i].lo : b[j].lo;
		uint32_t hi = a[i].hi < b[j].hi ? a[i].hi : b[j].hi;

		if (lo <= hi)
			out[n++] = (struct ival){ lo, hi };
		if (a[i].hi < b[j].hi)
			i++;
		else
			j++;
	}
	return n;
}

/* The version of t in force after handle h. */
static const struct version *version_at(const struct target *t, uint32_t h)
{
	const struct version *v = &t->v[0];

	for (size_t i = 0; i < t->nv && t->v[i].h <= h; i++)
		v = &t->v[i];
	return v;
}

void model_read(const struct model *m, struct o2_blockdev *dev, uint64_t *hashes)
{
	uint8_t *buf = malloc(m->bs);

	ck_assert_ptr_nonnull(buf);
	for (unsigned i = 0; i < m->nt; i++) {
		ck_assert_int_eq(o2_blockdev_read(dev, buf, m->bs, m->t[i].blkno * m->bs), 0);
		hashes[i] = block_hash(buf, m->bs, m->t[i].kind);
	}
	free(buf);
}

bool model_judge(const struct model *m, struct o2_blockdev *dev, size_t p, uint32_t *ret_h,
		 char *msg, size_t msglen)
{
	uint32_t dur = model_durable(m, p), begun = model_begun(m, p);
	size_t maxv = 1, nl = 1, len = 0;
	uint64_t *hashes = calloc(m->nt, sizeof(*hashes));
	struct ival *l, *t, *tmp;
	bool ok;

	ck_assert_ptr_nonnull(hashes);
	for (unsigned i = 0; i < m->nt; i++)
		if (m->t[i].nv + 1 > maxv)
			maxv = m->t[i].nv + 1;
	l = malloc(maxv * sizeof(*l));
	t = malloc(maxv * sizeof(*t));
	tmp = malloc(maxv * sizeof(*tmp));
	ck_assert(l && t && tmp);
	model_read(m, dev, hashes);
	l[0] = (struct ival){ dur, begun };
	if (dur > begun)
		nl = 0;
	for (unsigned i = 0; i < m->nt && nl; i++) {
		size_t nt = target_ivals(&m->t[i], hashes[i], t);

		nl = intersect(l, nl, t, nt, tmp);
		memcpy(l, tmp, nl * sizeof(*l));
	}
	ok = nl > 0;
	if (ok) {
		*ret_h = l[nl - 1].hi;
	} else {
		len += (size_t)snprintf(msg + len, msglen - len,
					"crash point %zu: no handle in [%u (durable), %u (begun)] "
					"explains the volume;", p, dur, begun);
		for (unsigned i = 0; i < m->nt && len < msglen; i++) {
			const struct version *v = version_at(&m->t[i], dur);
			size_t nt = target_ivals(&m->t[i], hashes[i], t);

			if (v->wild || v->hash == hashes[i])
				continue;
			len += (size_t)snprintf(msg + len, msglen - len,
						" block %llu holds %s", (unsigned long long)m->t[i].blkno,
						nt ? "the content of handles" : "content of no handle");
			for (size_t k = 0; k < nt && k < 4 && len < msglen; k++)
				len += (size_t)snprintf(msg + len, msglen - len, " [%u,%d]", t[k].lo,
							t[k].hi == UINT32_MAX ? -1 : (int)t[k].hi);
			if (len < msglen)
				len += (size_t)snprintf(msg + len, msglen - len,
							" (version at %u made by handle %u);", dur, v->h);
		}
	}
	free(l);
	free(t);
	free(tmp);
	free(hashes);
	return ok;
}

/* ---- running the workload ---- */

/* Pattern of a block: (handle, block, kind of write), distinct in every sector. */
static void fill_block(uint8_t *p, uint32_t bs, uint32_t h, uint64_t blkno, bool magic, bool data)
{
	uint64_t s = ((uint64_t)h << 40) ^ blkno ^ (data ? 0xDA7A000000000000ull : 0);

	for (uint32_t i = 0; i < bs; i += 8) {
		uint64_t v = splitmix(&s);

		memcpy(p + i, &v, 8);
	}
	for (uint32_t off = 0; off < bs; off += 512) {
		memcpy(p + off, data ? "DATA" : "O2CR", 4);
		*(o2le32 *)(p + off + 4) = cpu_le32(h);
		*(o2le64 *)(p + off + 8) = cpu_le64(blkno);
	}
	if (magic)
		*(o2be32 *)p = cpu_be32(JBD2_MAGIC);
}

struct pre_call {
	uint32_t commits;
	uint64_t failed;
	uint64_t alloc_failed;
	size_t nops;
};

static void pre(struct wl_run *run, struct pre_call *pc)
{
	struct o2_journal_stats js;
	struct o2_fault_counts fc = { 0 };

	o2_journal_stats(run->fs, &js);
	if (run->fault)
		o2_faultdev_counts(run->fault, &fc);
	pc->commits = js.commits;
	pc->failed = fc.failed;
	pc->alloc_failed = o2_alloc_failed();
	pc->nops = o2_crashdev_nops(run->crash);
}

/* After an fs call: durability from commits, and faults must not vanish. */
static int post(struct wl_run *run, const struct pre_call *pc, const char *name, int r)
{
	struct o2_journal_stats js;
	struct o2_fault_counts fc = { 0 };

	o2_journal_stats(run->fs, &js);
	if (run->fault)
		o2_faultdev_counts(run->fault, &fc);
	ck_assert_msg(!(fc.failed > pc->failed && r >= 0),
		      "step %zu: %s returned %d although the device failed during it", run->step,
		      name, r);
	if (run->alloc_faults) {
		ck_assert_msg(!(o2_alloc_failed() > pc->alloc_failed && r >= 0),
			      "step %zu: %s returned %d although an allocation failed during it",
			      run->step, name, r);
		ck_assert_msg(r >= 0 || r == -ENOMEM || (r == -EROFS && run->fs->ro_reason),
			      "step %zu: %s returned %d (%s) after an allocation failed", run->step,
			      name, r, o2_fs_error(run->fs));
		ck_assert_msg(r >= 0 || o2_alloc_failed() > 0,
			      "step %zu: %s failed with %d (%s) although no allocation failed",
			      run->step, name, r, o2_fs_error(run->fs));
	}
	if (r == 0 && js.commits != pc->commits)
		model_durable_now(run->m, run->crash);
	if (r < 0 && !run->err) {
		run->err = r;
		run->failed_call = name;
	}
	return r;
}

/* A failed call turned the volume read-only: check it stays so and writes nothing. */
static void check_aborted(struct wl_run *run, int r)
{
	struct o2_fs *fs = run->fs;
	size_t nops = o2_crashdev_nops(run->crash);
	struct o2_trans *t;

	ck_assert_msg(o2_fs_readonly_reason(fs) < 0,
		      "step %zu: %s failed with %d (%s) but the volume is not read-only", run->step,
		      run->failed_call, r, o2_fs_error(fs));
	ck_assert_int_eq(o2_trans_begin(fs, 1, &t), -EROFS);
	ck_assert_int_eq(o2_fs_sync(fs), -EROFS);
	ck_assert_int_eq(o2_journal_commit(fs), -EROFS);
	ck_assert_int_eq(o2_journal_checkpoint(fs), -EROFS);
	ck_assert_msg(o2_crashdev_nops(run->crash) == nops, "a read-only volume wrote to its device");
}

static int do_handle(struct wl_run *run, const struct workload *w, const struct wl_step *s)
{
	struct o2_fs *fs = run->fs;
	struct model *m = run->m;
	struct pre_call pc;
	struct o2_trans *t;
	uint32_t h = model_begin(m, run->crash);
	int r, first_err = 0;

	pre(run, &pc);
	r = post(run, &pc, "o2_trans_begin", o2_trans_begin(fs, s->n, &t));
	if (r < 0)
		return r;
	for (unsigned i = 0; i < s->n; i++) {
		const struct wl_ref *ref = &w->refs[s->first + i];
		struct target *tg = &m->t[ref->target];
		struct o2_buf *b;

		pre(run, &pc);
		r = ref->bnew ? o2_bnew(fs, tg->blkno, tg->kind, &b)
			      : o2_bread(fs, tg->blkno, tg->kind, &b);
		if (r < 0 && !fs->ro_reason && run->fault) {
			struct o2_fault_counts fc;

			o2_faultdev_counts(run->fault, &fc);
			ck_assert_msg(fc.failed > pc.failed, "step %zu: reading block %llu: %d %s",
				      run->step, (unsigned long long)tg->blkno, r, o2_fs_error(fs));
			run->read_errors++;
			continue; /* a read error leaves the volume as it was: go on without it */
		}
		if (post(run, &pc, ref->bnew ? "o2_bnew" : "o2_bread", r) < 0) {
			first_err = r;
			break;
		}
		pre(run, &pc);
		r = post(run, &pc, "o2_trans_add", o2_trans_add(t, b));
		if (r < 0) {
			o2_brelse(fs, b);
			first_err = r;
			break;
		}
		if (tg->kind == O2_META_INODE) {
			struct o2_dinode *di = (struct o2_dinode *)b->data;

			di->i_mtime = cpu_le64(run->clk->ns / 1000000000ull);
			di->i_mtime_nsec = cpu_le32(h);
		} else {
			fill_block(b->data, fs->bs, h, tg->blkno, ref->magic, false);
		}
		add_version(tg, h, false, block_hash(b->data, fs->bs, tg->kind));
		o2_brelse(fs, b);
	}
	for (unsigned i = 0; i < s->nrev && !first_err; i++) {
		struct target *tg = &m->t[w->refs[s->rfirst + i].target];

		pre(run, &pc);
		r = post(run, &pc, "o2_trans_revoke", o2_trans_revoke(t, tg->blkno));
		if (r < 0) {
			first_err = r;
			break;
		}
		add_version(tg, h, true, 0);
	}
	m->h_ended = h;
	pre(run, &pc);
	r = post(run, &pc, "o2_trans_end", o2_trans_end(t));
	return first_err ? first_err : r;
}

static int do_data(struct wl_run *run, const struct wl_step *s)
{
	struct model *m = run->m;
	struct target *tg = &m->t[s->target];
	uint8_t *buf = malloc(m->bs);
	uint32_t h = model_begin(m, run->crash);

	ck_assert_ptr_nonnull(buf);
	fill_block(buf, m->bs, h, tg->blkno, false, true);
	ck_assert_int_eq(o2_blockdev_write(run->datadev, buf, m->bs, tg->blkno * m->bs), 0);
	add_version(tg, h, false, block_hash(buf, m->bs, tg->kind));
	m->h_ended = h;
	free(buf);
	return 0;
}

int wl_execute(struct wl_run *run, const struct workload *w)
{
	struct o2_fs *fs = run->fs;
	struct pre_call pc;
	int r = 0;

	run->err = 0;
	run->failed_call = NULL;
	for (run->step = 0; run->step < w->nsteps; run->step++) {
		const struct wl_step *s = &w->steps[run->step];

		run->clk->ns += (uint64_t)s->clock_ms * 1000000ull;
		pre(run, &pc);
		switch (s->kind) {
		case ST_HANDLE:
			r = do_handle(run, w, s);
			break;
		case ST_SYNC:
			r = post(run, &pc, "o2_fs_sync", o2_fs_sync(fs));
			if (r == 0)
				model_durable_now(run->m, run->crash);
			break;
		case ST_COMMIT:
			r = post(run, &pc, "o2_journal_commit", o2_journal_commit(fs));
			break;
		case ST_CHECKPOINT:
			r = post(run, &pc, "o2_journal_checkpoint", o2_journal_checkpoint(fs));
			break;
		case ST_TICK:
			r = post(run, &pc, "o2_fs_tick", o2_fs_tick(fs));
			break;
		case ST_HOME:
			r = post(run, &pc, "o2_journal_write_home", o2_journal_write_home(fs));
			break;
		case ST_FORGET:
			r = post(run, &pc, "o2_journal_forget_home", o2_journal_forget_home(fs));
			break;
		case ST_DATA:
			r = do_data(run, s);
			break;
		}
		if (r < 0)
			break;
	}
	if (run->err && !(run->alloc_faults && !fs->ro_reason)) {
		ck_assert_msg(fs->ro_reason, "step %zu: %s failed with %d (%s) without an I/O fault",
			      run->step, run->failed_call, run->err, o2_fs_error(fs));
		check_aborted(run, run->err);
	}
	return run->err;
}

/* ---- the namespace workload ---- */

#define NS(call)                                                                   \
	do {                                                                       \
		long r_ = (call);                                                  \
		if (!run->judge(run, #call, r_, r_ >= 0))                          \
			return;                                                    \
	} while (0)
#define NS_WRITE(ino, off, len)                                                       \
	do {                                                                          \
		long r_ = o2_write(fs, ino, off, data, len);                         \
		if (!run->judge(run, "o2_write(" #off ", " #len ")", r_, r_ == (long)(len))) \
			return;                                                       \
	} while (0)

void ns_script(struct ns_run *run)
{
	struct o2_fs *fs = run->fs;
	struct o2_new_inode fi = { .mode = S_IFREG | 0644 }, di = { .mode = S_IFDIR | 0755 };
	uint64_t root = o2_fs_super(fs)->root_blkno, d, e, f, x;
	static uint8_t data[40000];
	char name[64], target[400];

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + i / 251);
	memset(target, 't', sizeof(target) - 1);
	target[sizeof(target) - 1] = '\0';

	NS(o2_mkdir(fs, root, "d", 1, &di, &d));
	NS(o2_create(fs, d, "f", 1, &fi, &f));
	NS_WRITE(f, 0, 9000);
	NS_WRITE(f, 300000, 40000);
	/*
	 * xattrs: a short value and one in clusters in the inode's 256 bytes,
	 * the big one replaced (new clusters, the old through the truncate
	 * log), then more than the inode holds (the xattr block), one removed
	 */
	NS(o2_xattr_set(fs, f, O2_XATTR_USER, "short", 5, "value", 5, O2_XATTR_CREATE));
	NS(o2_xattr_set(fs, f, O2_XATTR_USER, "big", 3, data, 5000, 0));
	NS(o2_xattr_set(fs, f, O2_XATTR_USER, "big", 3, data + 7, 9000, O2_XATTR_REPLACE));
	for (unsigned i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "label-%u", i);
		NS(o2_xattr_set(fs, f, O2_XATTR_SECURITY, name, strlen(name), data + i, 80, 0));
	}
	NS(o2_xattr_set(fs, f, O2_XATTR_SECURITY, "label-3", 7, data + 9, 300, 0));
	NS(o2_xattr_remove(fs, f, O2_XATTR_USER, "short", 5));
	NS(o2_xattr_set(fs, d, O2_XATTR_ACL_DEFAULT, "", 0, data, 44, 0));
	for (unsigned i = 0; i < 60; i++) {
		snprintf(name, sizeof(name), "entry-with-a-long-name-%03u", i);
		NS(o2_create(fs, d, name, strlen(name), &fi, &x));
	}
	NS(o2_symlink(fs, d, "s", 1, target, &fi, &x));
	NS(o2_link(fs, f, root, "l", 1));
	NS(o2_rename(fs, d, "f", 1, root, "g", 1, 0));
	NS(o2_truncate(fs, f, 3000));
	NS(o2_fallocate(fs, f, 0, 65536, 65536));
	NS_WRITE(f, 70000, 5000);
	/*
	 * holes punched: whole clusters inside one extent (it splits), then
	 * across partial clusters at both edges and past the end of the file
	 */
	NS(o2_fallocate(fs, f, O2_FALLOC_PUNCH_HOLE | O2_FALLOC_KEEP_SIZE, 81920, 8192));
	NS(o2_fallocate(fs, f, O2_FALLOC_PUNCH_HOLE | O2_FALLOC_KEEP_SIZE, 1000, 70500));
	NS(o2_fallocate(fs, f, O2_FALLOC_PUNCH_HOLE | O2_FALLOC_KEEP_SIZE, 120000, 20000));
	/* a reflink (a refcount tree made, extents shared), then both changed */
	NS(o2_reflink(fs, f, d, "r", 1, &fi, &x));
	NS_WRITE(x, 66000, 3000);
	NS(o2_truncate(fs, f, 100000));
	NS(o2_fs_sync(fs));
	for (unsigned i = 0; i < 60; i += 2) {
		snprintf(name, sizeof(name), "entry-with-a-long-name-%03u", i);
		NS(o2_unlink(fs, d, name, strlen(name)));
	}
	/* a file whose last name goes while it has xattrs: they go with it */
	NS(o2_create(fs, root, "x", 1, &fi, &x));
	NS(o2_xattr_set(fs, x, O2_XATTR_TRUSTED, "v", 1, data, 20000, 0));
	NS(o2_xattr_set(fs, x, O2_XATTR_USER, "n", 1, data, 30, 0));
	NS(o2_fs_sync(fs));
	NS(o2_unlink(fs, root, "x", 1));
	NS(o2_mkdir(fs, d, "e", 1, &di, &e));
	NS(o2_rename(fs, d, "entry-with-a-long-name-001", 26, e, "moved", 5, 0));
	NS(o2_unlink(fs, e, "moved", 5));
	NS(o2_rmdir(fs, d, "e", 1));
	NS(o2_inode_open_ref(fs, f));
	NS(o2_unlink(fs, root, "g", 1));
	NS(o2_unlink(fs, root, "l", 1));
	NS_WRITE(f, 0, 20000); /* an orphan still takes writes */
	NS(o2_fs_sync(fs));
	NS(o2_inode_close_ref(fs, f)); /* freed, xattrs in its tail and block with it */
}

void ns_reflink_script(struct ns_run *run)
{
	struct o2_fs *fs = run->fs;
	struct o2_new_inode fi = { .mode = S_IFREG | 0644 };
	uint64_t root = o2_fs_super(fs)->root_blkno, f, x;
	static uint8_t data[64 * 4096];

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 13 + i / 4093 + 1);
	NS(o2_create(fs, root, "f", 1, &fi, &f));
	NS_WRITE(f, 0, sizeof(data));
	NS(o2_fs_sync(fs));
	NS(o2_reflink(fs, f, root, "x", 1, &fi, &x));
	for (unsigned i = 0; i < 30; i++) /* 61 records: a root of 55 grows, its leaf splits */
		NS_WRITE(x, (2 * i + 1) * 4096 + 100, 10);
	NS(o2_fs_sync(fs));
	NS(o2_truncate(fs, f, 20 * 4096 + 5));
	NS(o2_unlink(fs, root, "x", 1));
	NS(o2_fs_sync(fs));
	NS(o2_unlink(fs, root, "f", 1));
	NS(o2_fs_sync(fs));
}

/* ---- judging what a run left behind ---- */

void model_for(const struct vol_image *v, struct model *m, unsigned pool)
{
	struct o2_blockdev *dev = vol_image_dev(v);
	struct o2_fs *fs;
	char err[256];

	ck_assert_int_eq(o2_fs_open(dev, O2_OPEN_RDONLY, &fs, err, sizeof(err)), 0);
	model_init(m, fs, pool);
	o2_fs_close(fs);
	o2_blockdev_free(dev);
}

uint64_t crash_seed(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xFF51AFD7ED558CCDull;
	x ^= x >> 33;
	return x | 1;
}

void judge_end(const char *what, struct o2_blockdev *crash, const struct model *m, uint64_t salt,
	       const struct judge_opts *o, size_t *points)
{
	size_t p = o2_crashdev_nops(crash);

	for (unsigned k = 0; k <= o->crashes; k++) {
		uint64_t seed = k ? crash_seed(salt * 3 + k) : 0;
		struct fake_clock clk = { 1800000000ull * 1000000000ull };
		struct o2_walk_stats ws;
		struct o2_blockdev *dev;
		struct o2_inode *root;
		struct o2_fs *fs;
		char err[256], msg[2048];
		uint32_t h;
		int r;

		ck_assert_int_eq(o2_crashdev_materialise(crash, p, seed, &dev), 0);
		r = open_rw(dev, &clk, &fs, err, sizeof(err));
		ck_assert_msg(r == 0, "%s, then a crash (seed %llu): open failed: %d %s", what,
			      (unsigned long long)seed, r, err);
		ck_assert_int_eq(o2_inode_get(fs, m->t[0].blkno, &root), 0);
		o2_inode_unref(root);
		ck_assert_msg(model_judge(m, dev, p, &h, msg, sizeof(msg)), "%s, then a crash (seed "
			      "%llu): %s", what, (unsigned long long)seed, msg);
		if (o->walk) {
			r = o2_fs_walk(fs, &ws);
			ck_assert_msg(r == 0, "%s, then a crash (seed %llu): walk failed: %d %s",
				      what, (unsigned long long)seed, r, o2_fs_error(fs));
		}
		ck_assert_int_eq(o2_fs_close(fs), 0);
		if (o->fsck && k == 0)
			judge_fsck(what, dev);
		o2_blockdev_free(dev);
		(*points)++;
	}
}

bool fault_n_selected(uint64_t n, uint64_t total)
{
	const char *e = getenv("O2_FAULT_STRIDE");
	uint64_t stride = e ? strtoull(e, NULL, 0) : 1;

	return stride <= 1 || (n - 1) % stride == 0 || n + 3 > total;
}

bool have_fsck(void)
{
	return system(TOOL_PATH "command -v fsck.ocfs2 >/dev/null 2>&1") == 0;
}

void judge_fsck(const char *what, struct o2_blockdev *dev)
{
	char dir[256], path[300], cmd[400], out[16384];
	size_t len = 0, chunk = 1u << 20;
	uint8_t *buf = malloc(chunk);
	FILE *p;
	int fd, st;

	snprintf(dir, sizeof(dir), "%s/o2fsck-XXXXXX", test_tmpdir());
	ck_assert(buf && mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/vol.img", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_msg(fd >= 0, "%s: cannot create", path);
	for (uint64_t off = 0; off < dev->size; off += chunk) {
		size_t n = dev->size - off < chunk ? (size_t)(dev->size - off) : chunk;

		ck_assert_int_eq(o2_blockdev_read(dev, buf, n, off), 0);
		ck_assert_msg(pwrite(fd, buf, n, (off_t)off) == (ssize_t)n, "%s: write failed",
			      path);
	}
	close(fd);
	free(buf);
	/* as tests/model judges: exit status 0 and every pass succeeded */
	snprintf(cmd, sizeof(cmd), TOOL_PATH "fsck.ocfs2 -fn %s </dev/null 2>&1", path);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while (len + 1 < sizeof(out)) {
		size_t n = fread(out + len, 1, sizeof(out) - 1 - len, p);

		if (n == 0)
			break;
		len += n;
	}
	out[len] = '\0';
	while (fgetc(p) != EOF)
		; /* the rest, unread, must not block fsck */
	st = pclose(p);
	unlink(path);
	rmdir(dir);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "All passes succeeded."),
		      "%s: fsck.ocfs2 -fn: exit status %d:\n%.3000s", what, /* Check's limit */
		      WIFEXITED(st) ? WEXITSTATUS(st) : -1, out);
}
