/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Model-based test of the fscore write path, judged by the real tools.
 *
 * Random configurations: a fresh volume from mkfs.ocfs2 (feature level x
 * block size x cluster size), a directory /TOP, then thousands of random
 * operations (create, mknod, mkdir, symlink, link, unlink, rmdir, rename in
 * every form, write, truncate, fallocate, chmod/chown, open references,
 * sync) applied to fscore and to the model (model.c).  Every result must be
 * one the model allows.  After each batch: fscore's read API against the
 * model, close, fsck.ocfs2 -fn (must print what it printed for the fresh
 * volume), reopen, fscore again, debugfs.ocfs2 rdump of /TOP against the
 * model, debugfs.ocfs2 stat of a sample.  At the end everything is deleted
 * and no cluster or inode may have leaked.
 *
 * Growth cases: an extent tree of depth >= 2, a directory of 100,000
 * entries (indexed), a 5 GiB sparse file on a 1 GiB volume, and a volume
 * filled to -ENOSPC and emptied again.  And orphans left by a crash.
 *
 * Usage: test_model CASE (see the table below).  Environment:
 *   O2_MODEL_OPS      operations per random case (default 4000)
 *   O2_MODEL_BATCH    operations per batch (default 250; 400 for 1 MiB clusters)
 *   O2_MODEL_TIMES    0: do not judge atime/mtime/ctime (default 1: POSIX rules)
 *   O2_MODEL_SEED     seed (default: fixed per case; "random": from the clock)
 *   O2_MODEL_TRACE    1: print every operation
 *   O2_MODEL_SKIP     operation kinds to leave out, e.g. "symlink,fallocate"
 *                     ("exchange": renames without RENAME_EXCHANGE)
 *   O2_MODEL_VERBOSE  1: a line after every batch
 *   O2_MODEL_KEEP     1: keep the temporary directory (always kept on failure)
 *   O2_MODEL_TMPDIR   where to put it (default /tmp)
 *   O2_MODEL_DIR_ENTRIES  entries of the big directory (default 100000)
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>

#include "model.h"
#include "../testenv.h"

#define SKIP_CODE 77
#define KIB 1024ull
#define MIB (1024ull * 1024)
#define GIB (1024ull * MIB)
#define NAME_MAX_O2 255

struct cfg {
	const char *name;
	const char *level; /* --fs-feature-level */
	unsigned bs, cs;
	const char *journal;
	uint64_t size;
	bool acl; /* opened with O2_OPEN_ACL: POSIX ACL operations and rules too */
};

static const struct cfg random_cfgs[] = {
	{ "default-b512-c4k", "default", 512, 4096, "4M", 256 * MIB, false },
	{ "default-b512-c1m", "default", 512, 1 << 20, "16M", 512 * MIB, false },
	{ "default-b4096-c4k", "default", 4096, 4096, "4M", 256 * MIB, false },
	{ "default-b4096-c1m", "default", 4096, 1 << 20, "16M", 512 * MIB, false },
	{ "maxcompat-b512-c4k", "max-compat", 512, 4096, "4M", 256 * MIB, false },
	{ "maxcompat-b512-c1m", "max-compat", 512, 1 << 20, "16M", 512 * MIB, false },
	{ "maxcompat-b4096-c4k", "max-compat", 4096, 4096, "4M", 256 * MIB, false },
	{ "maxcompat-b4096-c1m", "max-compat", 4096, 1 << 20, "16M", 512 * MIB, false },
	{ "maxfeat-b512-c4k", "max-features", 512, 4096, "4M", 256 * MIB, false },
	{ "maxfeat-b512-c1m", "max-features", 512, 1 << 20, "16M", 512 * MIB, false },
	{ "maxfeat-b4096-c4k", "max-features", 4096, 4096, "4M", 256 * MIB, false },
	{ "maxfeat-b4096-c1m", "max-features", 4096, 1 << 20, "16M", 512 * MIB, false },
	{ "acl-b4096-c4k", "default", 4096, 4096, "4M", 256 * MIB, true },
	{ "acl-b512-c4k", "default", 512, 4096, "4M", 256 * MIB, true },
};

static const char *g_case;

/* ---- environment ---- */

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *s = getenv(name);

	if (!s || !*s)
		return def;
	return strtoull(s, NULL, 0);
}

static uint64_t case_seed(const char *name)
{
	const char *s = getenv("O2_MODEL_SEED");
	uint64_t h = 1469598103934665603ull;

	if (s && !strcmp(s, "random")) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		return (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec;
	}
	if (s && *s)
		return strtoull(s, NULL, 0);
	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 1099511628211ull;
	return h;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the run ---- */

#define LOG_LINES 40

struct run {
	const char *name;
	struct vol v;
	struct model m;
	struct rng r;
	uint64_t seed;
	unsigned long opno, nops, batch_size;
	unsigned long steps; /* random operations chosen (opno counts every fscore call) */
	unsigned batch;
	bool trace;
	bool unwritten; /* the volume has unwritten extents (fallocate) */
	bool sparse;	/* ... and sparse files (punching holes) */
	bool reflink;	/* ... and refcount trees (reflinks) */
	uint64_t max_file;   /* largest file the random ops make */
	uint64_t max_data;   /* total bytes the model may hold */
	uint64_t budget_clusters;
	/* the volume is full: any call may say -ENOSPC, having changed nothing */
	bool full;
	unsigned long full_enospc;
	uint64_t total_clusters;
	uint8_t *wbuf;
	char log[LOG_LINES][320];
	unsigned long counts[32];
	/* coverage, sampled at the end of each batch */
	size_t max_dir_entries;
	unsigned max_block_dirs, max_indexed_dirs, max_extent_depth;
	/* extended attributes: results of setxattr, most on one inode, in which stores */
	unsigned long xattr_set_ok, xattr_enospc, xattr_long_values;
	unsigned long xattr_bursts, xattr_burst_sets; /* many attributes on one inode at once */
	unsigned long acl_set_ok, acl_inherited; /* ACL cases */
	size_t max_xattrs;
	unsigned xattr_inline_inodes, xattr_block_inodes;
	double t0;
	unsigned nfamilies; /* reflinks: sets of files sharing a refcount tree */
	uint64_t max_refcount_records; /* in all trees at once, sampled */
	unsigned long reflinks_ok, shared_changes; /* made; writes and truncates of their files */
	unsigned long reflink_xattrs, reflink_shared_values; /* attributes copied, values shared */
};

static void logop(struct run *rn, const char *f, ...) __attribute__((format(printf, 2, 3)));

static void logop(struct run *rn, const char *f, ...)
{
	va_list ap;
	char *slot = rn->log[rn->opno % LOG_LINES];
	int n = snprintf(slot, sizeof(rn->log[0]), "#%lu @%llu.%09llu ", rn->opno,
			 (unsigned long long)(rn->v.clock_ns / 1000000000),
			 (unsigned long long)(rn->v.clock_ns % 1000000000));

	va_start(ap, f);
	vsnprintf(slot + n, sizeof(rn->log[0]) - (size_t)n, f, ap);
	va_end(ap);
	if (rn->trace)
		fprintf(stderr, "[%s] %s\n", rn->name, slot);
}

static void mfail(struct run *rn, const char *f, ...) __attribute__((format(printf, 2, 3), noreturn));

static void mfail(struct run *rn, const char *f, ...)
{
	va_list ap;
	char *msg = NULL;

	va_start(ap, f);
	if (vasprintf(&msg, f, ap) < 0)
		msg = NULL;
	va_end(ap);
	fprintf(stderr, "\n==== model test %s FAILED: seed 0x%" PRIx64 ", op #%lu (batch %u) ====\n",
		rn->name, rn->seed, rn->opno, rn->batch);
	fprintf(stderr, "%s\n", msg ? msg : "(no message)");
	fprintf(stderr, "last operations (oldest first):\n");
	for (unsigned long i = rn->opno + 1 > LOG_LINES ? rn->opno + 1 - LOG_LINES : 0;
	     i <= rn->opno; i++)
		if (rn->log[i % LOG_LINES][0])
			fprintf(stderr, "  %s\n", rn->log[i % LOG_LINES]);
	fprintf(stderr,
		"volume kept in %s (mkfs.ocfs2 -M local %s)\n"
		"reproduce: O2_MODEL_SEED=0x%" PRIx64 " O2_MODEL_OPS=%lu O2_MODEL_BATCH=%lu%s%s "
		"O2_MODEL_TRACE=1 tests/model/test_model %s\n",
		rn->v.dir, rn->v.mkfs_args, rn->seed, rn->nops,
		rn->batch_size,
		getenv("O2_MODEL_SKIP") ? " O2_MODEL_SKIP=" : "",
		getenv("O2_MODEL_SKIP") ? getenv("O2_MODEL_SKIP") : "", rn->name);
	fflush(stderr);
	ck_abort_msg("%s: seed 0x%" PRIx64 " op #%lu: %.400s", rn->name, rn->seed, rn->opno,
		     msg ? msg : "");
	abort(); /* not reached */
}

static void tick_clock(struct run *rn)
{
	rn->v.clock_ns += 1000000ull * rng_range(&rn->r, 1, 1500) + rng_below(&rn->r, 1000);
	rn->m.now = (int64_t)rn->v.clock_ns;
}

/* The result r of an fscore call against the model's expectation. */
static void check_result(struct run *rn, const char *what, int r, const struct expect *e)
{
	char a[64], b[160];

	/* the handle's message belongs to damage and I/O errors (else it may be stale) */
	bool say = (r == -EUCLEAN || r == -EIO || r == -EROFS) && rn->v.fs;

	if (rn->full && rn->v.fs && o2_fs_readonly_reason(rn->v.fs))
		mfail(rn, "%s on the full volume: %d, and the volume turned read-only: %s", what, r,
		      o2_fs_error(rn->v.fs));
	if (rn->full && r == -ENOSPC) {
		rn->full_enospc++;
		return;
	}
	if (!expect_allows(e, r))
		mfail(rn, "%s: fscore returned %s, the model expects %s%s%s", what,
		      err_str(r, a, sizeof(a)), expect_str(e, b, sizeof(b)),
		      say ? "; fscore says: " : "", say ? o2_fs_error(rn->v.fs) : "");
}

static char *quote_name(const char *name, size_t len)
{
	char *s = malloc(len * 4 + 16), *p = s;

	if (!s)
		abort();
	if (len > 40) {
		p += sprintf(p, "<%zu bytes:", len);
		for (size_t i = 0; i < 12; i++)
			*p++ = (name[i] >= 32 && name[i] < 127) ? name[i] : '?';
		p += sprintf(p, "...>");
		*p = '\0';
		return s;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c >= 32 && c < 127 && c != '\\')
			*p++ = (char)c;
		else
			p += sprintf(p, "\\x%02x", c);
	}
	*p = '\0';
	return s;
}

/* ---- picking ---- */

static const char *type_name(enum m_type t)
{
	static const char *const names[] = { "file", "dir", "symlink", "fifo", "socket", "chrdev" };

	return names[t];
}

static const char *const special_names[] = {
	"with space", "caf\xc3\xa9-utf8", "bin\xff\xfe", ".hidden", "dot.file", "a-b_c", "x",
};

/* A name into buf (>= 320 bytes): mostly a small pool so that names collide. */
static size_t pick_name(struct run *rn, char *buf)
{
	unsigned k = (unsigned)rng_below(&rn->r, 100);

	if (k < 76)
		return (size_t)sprintf(buf, "n%02u", (unsigned)rng_below(&rn->r, 24));
	if (k < 84) /* the names of bulk entries */
		return (size_t)sprintf(buf, "b%03u", (unsigned)rng_below(&rn->r, 600));
	if (k < 90) {
		static const size_t lens[] = { 255, 254, 200, 100 };
		size_t len = lens[rng_below(&rn->r, 4)];

		for (size_t i = 0; i < len; i++)
			buf[i] = (char)('a' + (i * 7 + len) % 26);
		buf[len] = '\0';
		return len;
	}
	if (k < 93) {
		size_t len = (size_t)rng_range(&rn->r, NAME_MAX_O2 + 1, 300);

		memset(buf, 'Z', len);
		buf[len] = '\0';
		return len;
	}
	return (size_t)sprintf(buf, "%s",
			       special_names[rng_below(&rn->r, sizeof(special_names) /
								   sizeof(special_names[0]))]);
}

static unsigned dir_depth(const struct m_inode *d)
{
	unsigned n = 0;

	for (; d->parent; d = d->parent)
		n++;
	return n;
}

/* A random live inode of type t (linked, or open orphans if allowed); NULL if none. */
static struct m_inode *pick_inode(struct run *rn, int type, bool orphans_too)
{
	size_t n = rn->m.nall, start;

	if (!n)
		return NULL;
	start = (size_t)rng_below(&rn->r, n);
	for (size_t i = 0; i < n; i++) {
		struct m_inode *in = rn->m.all[(start + i) % n];

		if (type >= 0 && in->type != (enum m_type)type)
			continue;
		if (in->nlink == 0 && !orphans_too)
			continue;
		return in;
	}
	return NULL;
}

static unsigned count_type(struct run *rn, enum m_type t)
{
	unsigned n = 0;

	for (size_t i = 0; i < rn->m.nall; i++)
		n += rn->m.all[i]->type == t && rn->m.all[i]->nlink;
	return n;
}

/*
 * A directory to operate in (sometimes a regular file or symlink, to
 * provoke -ENOTDIR).  *notdir tells which.
 */
static struct m_inode *pick_dir(struct run *rn, bool *notdir)
{
	struct m_inode *d;

	*notdir = false;
	if (rng_pct(&rn->r, 3)) {
		d = pick_inode(rn, rng_pct(&rn->r, 70) ? M_REG : M_LNK, false);
		if (d) {
			*notdir = true;
			return d;
		}
	}
	d = pick_inode(rn, M_DIR, false);
	return d ? d : rn->m.top;
}

/* An entry name in dir: an existing one with probability pct, else from the pool. */
static size_t pick_entry_name(struct run *rn, struct m_inode *dir, unsigned pct, char *buf)
{
	if (dir->type == M_DIR && dir->nents && rng_pct(&rn->r, pct)) {
		struct m_dirent *de = &dir->ents[rng_below(&rn->r, dir->nents)];

		memcpy(buf, de->name, de->len);
		buf[de->len] = '\0';
		return de->len;
	}
	return pick_name(rn, buf);
}

static uint16_t pick_perm(struct run *rn, bool dir)
{
	static const uint16_t common[] = { 0644, 0600, 0755, 0700, 0777, 0400, 0444, 0711 };

	if (rng_pct(&rn->r, 70))
		return common[rng_below(&rn->r, sizeof(common) / sizeof(common[0]))];
	if (rng_pct(&rn->r, 10))
		return (uint16_t)((rng_below(&rn->r, 01000)) | S_ISVTX);
	(void)dir;
	return (uint16_t)rng_below(&rn->r, 01000);
}

static void pick_owner(struct run *rn, uint32_t *uid, uint32_t *gid)
{
	static const uint32_t ids[] = { 0, 0, 0, 1000, 65534, 4242 };

	*uid = ids[rng_below(&rn->r, 6)];
	*gid = ids[rng_below(&rn->r, 6)];
}

/* Whether the model may grow (space and memory budgets). */
static bool may_grow(struct run *rn)
{
	if (rn->full)
		return true;
	return model_cluster_estimate(&rn->m) < rn->budget_clusters &&
	       rn->m.data_bytes < rn->max_data && rn->m.nall < 1200;
}

/* ---- verification of freed and orphaned inodes ---- */

struct orphan_find {
	uint64_t ino;
	bool found;
};

static int orphan_find_fn(const struct o2_dirent *de, void *arg)
{
	struct orphan_find *a = arg;
	bool dot = (de->name_len == 1 && de->name[0] == '.') ||
		   (de->name_len == 2 && de->name[0] == '.' && de->name[1] == '.');

	if (de->ino == a->ino && !dot)
		a->found = true;
	return 0;
}

/* Whether slot 0's orphan directory has an entry for ino. */
static bool orphan_dir_has(struct run *rn, uint64_t ino)
{
	struct orphan_find a = { ino, false };
	struct o2_inode *od;
	uint64_t blk;
	int r;

	r = o2_sysfile_lookup(rn->v.fs, O2_SYS_ORPHAN_DIR, 0, &blk);
	if (r < 0)
		mfail(rn, "o2_sysfile_lookup(orphan_dir:0000): %d", r);
	r = o2_inode_get(rn->v.fs, blk, &od);
	if (r < 0)
		mfail(rn, "orphan dir: o2_inode_get: %d: %s", r, o2_fs_error(rn->v.fs));
	r = o2_dir_iterate(rn->v.fs, od, orphan_find_fn, &a);
	o2_inode_unref(od);
	if (r < 0)
		mfail(rn, "orphan dir: o2_dir_iterate: %d: %s", r, o2_fs_error(rn->v.fs));
	return a.found;
}

/* An inode just freed must be gone: o2_inode_get fails, no orphan entry. */
static void verify_gone(struct run *rn, uint64_t ino, const char *what)
{
	struct o2_inode *x;
	int r = o2_inode_get(rn->v.fs, ino, &x);

	if (r == 0) {
		uint32_t fl = o2_inode_info(x)->flags, links = o2_inode_info(x)->links;

		o2_inode_unref(x);
		mfail(rn, "%s: inode %" PRIu64 " should be freed, but o2_inode_get still reads it "
			 "(flags 0x%x, links %u)",
		     what, ino, fl, links);
	}
	if (orphan_dir_has(rn, ino))
		mfail(rn, "%s: freed inode %" PRIu64 " is still in the orphan directory", what, ino);
}

/* An unlinked, still-open inode: readable, links 0, in the orphan directory. */
static void verify_orphan(struct run *rn, struct m_inode *in, const char *what)
{
	struct o2_inode *x;
	int r = o2_inode_get(rn->v.fs, in->ino, &x);

	if (r < 0)
		mfail(rn, "%s: open unlinked inode %" PRIu64 " unreadable: %d: %s", what, in->ino, r,
		     o2_fs_error(rn->v.fs));
	const struct o2_inode_info *info = o2_inode_info(x);

	if (info->links != 0 || info->size != in->size)
		mfail(rn, "%s: open unlinked inode %" PRIu64 ": links %u size %" PRIu64
			 ", want 0 and %" PRIu64,
		     what, in->ino, info->links, info->size, in->size);
	if (in->size) {
		uint8_t *b = malloc(in->size);
		ssize_t got = o2_inode_read(rn->v.fs, x, 0, b, in->size);

		if (got != (ssize_t)in->size || memcmp(b, in->data, in->size))
			mfail(rn, "%s: open unlinked inode %" PRIu64 ": data differs (read %zd of %" PRIu64
				 ")",
			     what, in->ino, got, in->size);
		free(b);
	}
	o2_inode_unref(x);
	if (!orphan_dir_has(rn, in->ino))
		mfail(rn, "%s: open unlinked inode %" PRIu64 " is not in the orphan directory", what,
		     in->ino);
}

/* After the model dropped a link of in (pointer may be stale if freed). */
static void after_drop(struct run *rn, uint64_t ino, bool freed, struct m_inode *in,
		       const char *what)
{
	if (freed)
		verify_gone(rn, ino, what);
	else if (in->nlink == 0)
		verify_orphan(rn, in, what);
}

/* Drop a link in the model and verify fscore agrees on the inode's fate. */
static void drop_link_checked(struct run *rn, struct m_inode *in, const char *what)
{
	uint64_t ino = in->ino;
	bool freed = (in->type == M_DIR || in->nlink <= 1) && in->open_refs == 0;

	model_drop_link(&rn->m, in);
	after_drop(rn, ino, freed, freed ? NULL : in, what);
}

/* ---- operations ---- */

enum op {
	OP_CREATE,
	OP_MKNOD,
	OP_MKDIR,
	OP_SYMLINK,
	OP_LINK,
	OP_UNLINK,
	OP_RMDIR,
	OP_RENAME,
	OP_WRITE,
	OP_TRUNCATE,
	OP_FALLOCATE,
	OP_SETATTR,
	OP_OPEN,
	OP_CLOSE,
	OP_SYNC,
	OP_BULK,
	OP_PURGE,
	OP_SCATTER,
	OP_SETXATTR,
	OP_RMXATTR,
	OP_SETACL,
	OP_REFLINK,
	OP_XATTRS,
	OP_COUNT
};

static const char *const op_names[] = {
	"create", "mknod", "mkdir", "symlink", "link", "unlink", "rmdir", "rename",
	"write", "truncate", "fallocate", "setattr", "open", "close", "sync", "bulk", "purge",
	"scatter", "setxattr", "rmxattr", "setacl", "reflink", "xattrs",
};

static void note_new_ino(struct run *rn, uint64_t ino, const char *what)
{
	for (size_t i = 0; i < rn->m.nall; i++)
		if (rn->m.all[i]->ino == ino)
			mfail(rn, "%s: fscore gave inode %" PRIu64 ", which is still in use", what, ino);
	if (ino == 0 || ino == rn->m.top->ino)
		mfail(rn, "%s: fscore gave inode %" PRIu64, what, ino);
}

static bool has_xattrs(struct run *rn)
{
	return o2_fs_super(rn->v.fs)->feature_incompat & O2_FEATURE_INCOMPAT_XATTR;
}

/* ---- POSIX ACLs (cases opened with O2_OPEN_ACL), the rules written again ---- */

#define T_USER_OBJ 0x01
#define T_USER 0x02
#define T_GROUP_OBJ 0x04
#define T_GROUP 0x08
#define T_MASK 0x10
#define T_OTHER 0x20
#define NO_ID 0xffffffffu

struct tacl {
	uint16_t tag, perm;
	uint32_t id;
};

static size_t tacl_decode(const uint8_t *v, size_t len, struct tacl *out)
{
	size_t n = len / 8;

	for (size_t i = 0; i < n; i++)
		out[i] = (struct tacl){ (uint16_t)(v[8 * i] | v[8 * i + 1] << 8),
					(uint16_t)(v[8 * i + 2] | v[8 * i + 3] << 8),
					(uint32_t)v[8 * i + 4] | (uint32_t)v[8 * i + 5] << 8 |
						(uint32_t)v[8 * i + 6] << 16 | (uint32_t)v[8 * i + 7] << 24 };
	return n;
}

static size_t tacl_encode(const struct tacl *a, size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t *p = out + 8 * i;

		p[0] = (uint8_t)a[i].tag, p[1] = (uint8_t)(a[i].tag >> 8);
		p[2] = (uint8_t)a[i].perm, p[3] = (uint8_t)(a[i].perm >> 8);
		for (int k = 0; k < 4; k++)
			p[4 + k] = (uint8_t)(a[i].id >> (8 * k));
	}
	return 8 * n;
}

static struct tacl *tacl_find(struct tacl *a, size_t n, uint16_t tag)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].tag == tag)
			return &a[i];
	return NULL;
}

/* The class that stands for the group in the mode: the mask if there is one. */
static struct tacl *tacl_group_class(struct tacl *a, size_t n)
{
	struct tacl *m = tacl_find(a, n, T_MASK);

	return m ? m : tacl_find(a, n, T_GROUP_OBJ);
}

/* Mode bits an access ACL gives; true when three entries say it all. */
static bool tacl_to_mode(struct tacl *a, size_t n, uint16_t *mode)
{
	*mode = (uint16_t)((*mode & ~0777) | tacl_find(a, n, T_USER_OBJ)->perm << 6 |
			   tacl_group_class(a, n)->perm << 3 | tacl_find(a, n, T_OTHER)->perm);
	return n == 3;
}

/* A random valid ACL: sorted by tag and id, a mask when anything is named. */
static size_t tacl_random(struct run *rn, struct tacl *a)
{
	static const uint32_t ids[] = { 7, 1000, 4242, 65534 };
	size_t n = 0;
	unsigned users = (unsigned)rng_below(&rn->r, 3), groups = (unsigned)rng_below(&rn->r, 3);

	a[n++] = (struct tacl){ T_USER_OBJ, (uint16_t)rng_below(&rn->r, 8), NO_ID };
	for (unsigned i = 0, k = (unsigned)rng_below(&rn->r, 2); i < users; i++, k++)
		a[n++] = (struct tacl){ T_USER, (uint16_t)rng_below(&rn->r, 8), ids[k] };
	a[n++] = (struct tacl){ T_GROUP_OBJ, (uint16_t)rng_below(&rn->r, 8), NO_ID };
	for (unsigned i = 0, k = (unsigned)rng_below(&rn->r, 2); i < groups; i++, k++)
		a[n++] = (struct tacl){ T_GROUP, (uint16_t)rng_below(&rn->r, 8), ids[k] };
	if (users || groups || rng_pct(&rn->r, 30))
		a[n++] = (struct tacl){ T_MASK, (uint16_t)rng_below(&rn->r, 8), NO_ID };
	a[n++] = (struct tacl){ T_OTHER, (uint16_t)rng_below(&rn->r, 8), NO_ID };
	return n;
}

static void op_setacl(struct run *rn)
{
	unsigned type = rng_pct(&rn->r, 60) ? O2_XATTR_ACL_ACCESS : O2_XATTR_ACL_DEFAULT;
	/* default ACLs mostly where they belong, so that new inodes inherit them */
	struct m_inode *in = type == O2_XATTR_ACL_DEFAULT && rng_pct(&rn->r, 85) ?
				     pick_inode(rn, M_DIR, false) : pick_inode(rn, -1, true);
	struct tacl a[12];
	uint8_t value[4 + 12 * 8], raw[12 * 8];
	size_t n = 0, len = 0;
	bool remove = rng_pct(&rn->r, 15);
	struct expect e = { 0 };
	char what[200];
	int r;

	if (!in || in->type == M_LNK)
		return;
	if (!remove) {
		n = tacl_random(rn, a);
		len = tacl_encode(a, n, raw);
		value[0] = 2, value[1] = value[2] = value[3] = 0;
		memcpy(value + 4, raw, len);
	}
	uint16_t mode = in->perm;
	bool equiv = type == O2_XATTR_ACL_ACCESS && n && tacl_to_mode(a, n, &mode);
	struct m_xattr *old = model_xattr_find(in, type, "", 0);
	size_t need = 20 + model_xattr_bytes(in, old) + model_xattr_entry_bytes(0, len);
	bool may_enospc = n && !equiv && need > rn->m.block_size - 48;

	if (!has_xattrs(rn))
		expect_add(&e, -EOPNOTSUPP);
	else if (type == O2_XATTR_ACL_DEFAULT && in->type != M_DIR && n)
		expect_add(&e, -EACCES);
	snprintf(what, sizeof(what), "setacl(inode %" PRIu64 ", %s, %zu entries%s)", in->ino,
		 type == O2_XATTR_ACL_ACCESS ? "access" : "default", n, remove ? ", remove" : "");
	logop(rn, "%s", what);
	r = o2_acl_set(rn->v.fs, in->ino, type, remove ? NULL : value, remove ? 0 : 4 + len);
	if (!(e.nerr == 0 && may_enospc && r == -ENOSPC))
		check_result(rn, what, r, &e);
	if (r < 0)
		return;
	/* removing an ACL that is not there changes nothing, not even ctime */
	if (!n && !old)
		return;
	rn->acl_set_ok++;
	model_xattr_set(in, type, "", 0, n && !equiv ? raw : NULL, len);
	if (type == O2_XATTR_ACL_ACCESS && n)
		in->perm = (uint16_t)((in->perm & ~0777) | (mode & 0777));
	model_touch_c(&rn->m, in);
}

/*
 * A new inode of *mode in dir (ACL cases): the ACLs it inherits, *mode cut
 * down by them, or by umask when dir has no default ACL.
 */
static void acl_inherit(struct run *rn, struct m_inode *dir, struct m_inode *in, uint16_t umask)
{
	struct m_xattr *d = model_xattr_find(dir, O2_XATTR_ACL_DEFAULT, "", 0);
	struct tacl a[12];
	uint8_t raw[12 * 8];

	if (!rn->v.acl)
		return;
	if (!d) {
		in->perm &= (uint16_t)~(umask & 0777);
		return;
	}
	size_t n = tacl_decode(d->value, d->size, a);

	rn->acl_inherited++;
	if (in->type == M_DIR)
		model_xattr_set(in, O2_XATTR_ACL_DEFAULT, "", 0, d->value, d->size);
	/* each class keeps what both the ACL and the mode grant */
	struct tacl *uo = tacl_find(a, n, T_USER_OBJ), *ot = tacl_find(a, n, T_OTHER);
	struct tacl *gc = tacl_group_class(a, n);
	uint16_t m = in->perm;

	uo->perm &= (m >> 6) & 7;
	gc->perm &= (m >> 3) & 7;
	ot->perm &= m & 7;
	in->perm = (uint16_t)((m & ~0777) | uo->perm << 6 | gc->perm << 3 | ot->perm);
	if (n > 3)
		model_xattr_set(in, O2_XATTR_ACL_ACCESS, "", 0, raw, tacl_encode(a, n, raw));
}

/* chmod in an ACL case: the access ACL's owner, group class and other follow. */
static void acl_chmod(struct run *rn, struct m_inode *in)
{
	struct m_xattr *x = model_xattr_find(in, O2_XATTR_ACL_ACCESS, "", 0);
	struct tacl a[12];
	uint8_t raw[12 * 8];

	if (!rn->v.acl || !x)
		return;
	size_t n = tacl_decode(x->value, x->size, a);

	tacl_find(a, n, T_USER_OBJ)->perm = (in->perm >> 6) & 7;
	tacl_group_class(a, n)->perm = (in->perm >> 3) & 7;
	tacl_find(a, n, T_OTHER)->perm = in->perm & 7;
	model_xattr_set(in, O2_XATTR_ACL_ACCESS, "", 0, raw, tacl_encode(a, n, raw));
}

static uint16_t pick_umask(struct run *rn)
{
	static const uint16_t masks[] = { 0, 022, 027, 077 };

	return rn->v.acl ? masks[rng_below(&rn->r, 4)] : 0;
}

static void op_create(struct run *rn, bool mknod)
{
	char name[320], *q, what[512];
	bool notdir;
	struct m_inode *dir = pick_dir(rn, &notdir);
	size_t len = pick_entry_name(rn, dir, 15, name);
	struct expect e = { 0 };
	enum m_type t = M_REG;
	struct o2_new_inode ni = { 0 };
	uint64_t ino = 0;
	int r;

	if (mknod) {
		static const enum m_type kinds[] = { M_FIFO, M_SOCK, M_CHR };

		t = kinds[rng_below(&rn->r, 3)];
		if (t == M_CHR)
			ni.rdev = makedev((unsigned)rng_range(&rn->r, 1, 300),
					  (unsigned)rng_range(&rn->r, 0, 70000));
	}
	ni.mode = (uint16_t)(model_type_bits(t) | pick_perm(rn, false));
	ni.umask = pick_umask(rn);
	pick_owner(rn, &ni.uid, &ni.gid);
	if (len > NAME_MAX_O2)
		expect_add(&e, -ENAMETOOLONG);
	if (notdir)
		expect_add(&e, -ENOTDIR);
	else if (len <= NAME_MAX_O2 && model_lookup(dir, name, len))
		expect_add(&e, -EEXIST);
	q = quote_name(name, len);
	snprintf(what, sizeof(what), "%s(dir %" PRIu64 " \"%s\", mode 0%o)",
		 mknod ? "mknod" : "create", dir->ino, q, ni.mode);
	free(q);
	logop(rn, "%s", what);
	r = o2_create(rn->v.fs, dir->ino, name, len, &ni, &ino);
	check_result(rn, what, r, &e);
	if (r < 0)
		return;
	note_new_ino(rn, ino, what);
	struct m_inode *in = model_new_inode(&rn->m, t, ino, ni.mode);

	in->uid = ni.uid;
	in->gid = ni.gid;
	in->rdev = ni.rdev;
	in->nlink = 1;
	acl_inherit(rn, dir, in, ni.umask);
	model_add_entry(dir, name, len, in);
	model_touch_mc(&rn->m, dir);
}

static void op_mkdir(struct run *rn)
{
	char name[320], *q, what[512];
	bool notdir;
	struct m_inode *dir = pick_dir(rn, &notdir);
	size_t len;
	struct expect e = { 0 };
	struct o2_new_inode ni = { 0 };
	uint64_t ino = 0;
	int r;

	if (!notdir && dir_depth(dir) >= 7)
		dir = rn->m.top;
	len = pick_entry_name(rn, dir, 15, name);
	ni.mode = (uint16_t)(S_IFDIR | pick_perm(rn, true));
	ni.umask = pick_umask(rn);
	pick_owner(rn, &ni.uid, &ni.gid);
	if (len > NAME_MAX_O2)
		expect_add(&e, -ENAMETOOLONG);
	if (notdir)
		expect_add(&e, -ENOTDIR);
	else if (len <= NAME_MAX_O2 && model_lookup(dir, name, len))
		expect_add(&e, -EEXIST);
	q = quote_name(name, len);
	snprintf(what, sizeof(what), "mkdir(dir %" PRIu64 " \"%s\", mode 0%o)", dir->ino, q,
		 ni.mode);
	free(q);
	logop(rn, "%s", what);
	r = o2_mkdir(rn->v.fs, dir->ino, name, len, &ni, &ino);
	check_result(rn, what, r, &e);
	if (r < 0)
		return;
	note_new_ino(rn, ino, what);
	struct m_inode *in = model_new_inode(&rn->m, M_DIR, ino, ni.mode);

	in->uid = ni.uid;
	in->gid = ni.gid;
	in->nlink = 2;
	acl_inherit(rn, dir, in, ni.umask);
	model_add_entry(dir, name, len, in);
	dir->nlink++;
	model_touch_mc(&rn->m, dir);
}

static void op_symlink(struct run *rn)
{
	char name[320], *q, what[512], target[4096];
	bool notdir;
	struct m_inode *dir = pick_dir(rn, &notdir);
	size_t len = pick_entry_name(rn, dir, 15, name), tlen;
	struct expect e = { 0 };
	struct o2_new_inode ni = { 0 };
	uint64_t ino = 0, k = rng_below(&rn->r, 100);
	int r;

	if (k < 55)
		tlen = (size_t)rng_range(&rn->r, 1, 40);
	else if (k < 85)
		tlen = (size_t)rng_range(&rn->r, 1400, 1600);
	else
		tlen = (size_t)rng_range(&rn->r, 41, 3000);
	for (size_t i = 0; i < tlen; i++) {
		static const char cs[] = "abcdefghijklmnopqrstuvwxyz0123456789/._-";

		target[i] = cs[rng_below(&rn->r, sizeof(cs) - 1)];
	}
	target[tlen] = '\0';
	ni.mode = S_IFLNK | 0777;
	pick_owner(rn, &ni.uid, &ni.gid);
	if (len > NAME_MAX_O2)
		expect_add(&e, -ENAMETOOLONG);
	if (notdir)
		expect_add(&e, -ENOTDIR);
	else if (len <= NAME_MAX_O2 && model_lookup(dir, name, len))
		expect_add(&e, -EEXIST);
	q = quote_name(name, len);
	snprintf(what, sizeof(what), "symlink(dir %" PRIu64 " \"%s\" -> %zu-byte target)", dir->ino,
		 q, tlen);
	free(q);
	logop(rn, "%s", what);
	r = o2_symlink(rn->v.fs, dir->ino, name, len, target, &ni, &ino);
	check_result(rn, what, r, &e);
	if (r < 0)
		return;
	note_new_ino(rn, ino, what);
	struct m_inode *in = model_new_inode(&rn->m, M_LNK, ino, 0777);

	in->uid = ni.uid;
	in->gid = ni.gid;
	in->nlink = 1;
	in->target = strdup(target);
	model_add_entry(dir, name, len, in);
	model_touch_mc(&rn->m, dir);
}

static void op_link(struct run *rn)
{
	char name[320], *q, what[512];
	bool notdir;
	struct m_inode *src = NULL, *dir;
	size_t len;
	struct expect e = { 0 };
	int r;

	if (rng_pct(&rn->r, 8))
		src = pick_inode(rn, M_DIR, false);
	if (!src)
		src = pick_inode(rn, rng_pct(&rn->r, 75) ? M_REG : -1, false);
	if (!src)
		return;
	dir = pick_dir(rn, &notdir);
	len = pick_entry_name(rn, dir, 10, name);
	if (len > NAME_MAX_O2)
		expect_add(&e, -ENAMETOOLONG);
	if (notdir)
		expect_add(&e, -ENOTDIR);
	else if (len <= NAME_MAX_O2 && model_lookup(dir, name, len))
		expect_add(&e, -EEXIST);
	if (src->type == M_DIR)
		expect_add(&e, -EPERM);
	q = quote_name(name, len);
	snprintf(what, sizeof(what), "link(inode %" PRIu64 " (links %u), dir %" PRIu64 " \"%s\")",
		 src->ino, src->nlink, dir->ino, q);
	free(q);
	logop(rn, "%s", what);
	r = o2_link(rn->v.fs, src->ino, dir->ino, name, len);
	check_result(rn, what, r, &e);
	if (r < 0)
		return;
	src->nlink++;
	model_add_entry(dir, name, len, src);
	model_touch_c(&rn->m, src);
	model_touch_mc(&rn->m, dir);
}

static void op_unlink(struct run *rn)
{
	char name[320], *q, what[512];
	bool notdir;
	struct m_inode *dir = pick_dir(rn, &notdir);
	size_t len = pick_entry_name(rn, dir, 75, name);
	struct m_dirent *de = NULL;
	struct expect e = { 0 };
	int r;

	if (len > NAME_MAX_O2) {
		expect_add(&e, -ENAMETOOLONG);
		expect_add(&e, -ENOENT);
	}
	if (notdir)
		expect_add(&e, -ENOTDIR);
	else if (len <= NAME_MAX_O2 && !(de = model_lookup(dir, name, len)))
		expect_add(&e, -ENOENT);
	else if (de && de->ino->type == M_DIR)
		expect_add(&e, -EISDIR);
	q = quote_name(name, len);
	snprintf(what, sizeof(what), "unlink(dir %" PRIu64 " \"%s\"%s%s%s)", dir->ino, q,
		 de ? " " : ", absent", de ? type_name(de->ino->type) : "",
		 de && de->ino->open_refs ? ", open" : "");
	free(q);
	logop(rn, "%s", what);
	r = o2_unlink(rn->v.fs, dir->ino, name, len);
	check_result(rn, what, r, &e);
	if (r < 0)
		return;
	struct m_inode *in = de->ino;

	model_del_entry(dir, de);
	model_touch_mc(&rn->m, dir);
	drop_link_checked(rn, in, what);
}

static void op_rmdir(struct run *rn)
{
	char name[320], *q, what[512];
	bool notdir;
	struct m_inode *dir = pick_dir(rn, &notdir);
	size_t len;
	struct m_dirent *de = NULL;
	struct expect e = { 0 };
	int r;

	/* mostly aim at directories */
	if (!notdir && rng_pct(&rn->r, 70)) {
		struct m_inode *d = pick_inode(rn, M_DIR, false);

		if (d && d != rn->m.top)
			dir = d->parent;
	}
	len = pick_entry_name(rn, dir, 80, name);
	if (len > NAME_MAX_O2) {
		expect_add(&e, -ENAMETOOLONG);
		expect_add(&e, -ENOENT);
	}
	if (notdir)
		expect_add(&e, -ENOTDIR);
	else if (len <= NAME_MAX_O2 && !(de = model_lookup(dir, name, len)))
		expect_add(&e, -ENOENT);
	else if (de && de->ino->type != M_DIR)
		expect_add(&e, -ENOTDIR);
	else if (de && de->ino->nents)
		expect_add(&e, -ENOTEMPTY);
	q = quote_name(name, len);
	snprintf(what, sizeof(what), "rmdir(dir %" PRIu64 " \"%s\"%s)", dir->ino, q,
		 de && de->ino->type == M_DIR ? (de->ino->nents ? ", not empty" : ", empty") : "");
	free(q);
	logop(rn, "%s", what);
	r = o2_rmdir(rn->v.fs, dir->ino, name, len);
	check_result(rn, what, r, &e);
	if (r < 0)
		return;
	struct m_inode *in = de->ino;

	model_del_entry(dir, de);
	dir->nlink--;
	model_touch_mc(&rn->m, dir);
	drop_link_checked(rn, in, what);
}

/* A directory in the subtree of d (d itself included). */
static struct m_inode *pick_subdir(struct run *rn, struct m_inode *d)
{
	for (unsigned depth = 0; depth < 8; depth++) {
		unsigned nd = model_subdirs(d);

		if (!nd || rng_pct(&rn->r, 35))
			return d;
		unsigned k = (unsigned)rng_below(&rn->r, nd);

		for (size_t i = 0; i < d->nents; i++)
			if (d->ents[i].ino->type == M_DIR && k-- == 0) {
				d = d->ents[i].ino;
				break;
			}
	}
	return d;
}

/* O2_MODEL_SKIP may name "exchange": renames without RENAME_EXCHANGE. */
static bool skip_exchange(void)
{
	const char *skip = getenv("O2_MODEL_SKIP");

	return skip && strstr(skip, "exchange");
}

static void op_rename(struct run *rn)
{
	char n1[320], n2[320], *q1, *q2, what[800];
	bool nd1, nd2;
	struct m_inode *d1 = pick_dir(rn, &nd1), *d2;
	size_t l1 = pick_entry_name(rn, d1, 85, n1), l2;
	struct m_dirent *s = NULL, *t = NULL;
	struct expect e = { 0 };
	unsigned flags = 0, k = (unsigned)rng_below(&rn->r, 100);
	int r;

	if (k < 14)
		flags = O2_RENAME_NOREPLACE;
	else if (k < 30 && !skip_exchange())
		flags = O2_RENAME_EXCHANGE;
	if (!nd1 && l1 <= NAME_MAX_O2)
		s = model_lookup(d1, n1, l1);
	/* sometimes move a directory into its own subtree */
	if (s && s->ino->type == M_DIR && rng_pct(&rn->r, 12)) {
		d2 = pick_subdir(rn, s->ino);
		nd2 = false;
	} else if (rng_pct(&rn->r, 30)) {
		d2 = d1;
		nd2 = nd1;
	} else {
		d2 = pick_dir(rn, &nd2);
	}
	l2 = pick_entry_name(rn, d2, flags == O2_RENAME_EXCHANGE ? 80 : 40, n2);
	if (!nd2 && l2 <= NAME_MAX_O2)
		t = model_lookup(d2, n2, l2);

	if (l1 > NAME_MAX_O2 || l2 > NAME_MAX_O2) {
		expect_add(&e, -ENAMETOOLONG);
		if (l1 > NAME_MAX_O2)
			expect_add(&e, -ENOENT);
	}
	if (nd1 || nd2)
		expect_add(&e, -ENOTDIR);
	if (!nd1 && l1 <= NAME_MAX_O2 && !s)
		expect_add(&e, -ENOENT);
	if (s && !nd2 && l2 <= NAME_MAX_O2) {
		struct m_inode *a = s->ino, *b = t ? t->ino : NULL;

		if (flags == O2_RENAME_EXCHANGE) {
			if (!b) {
				expect_add(&e, -ENOENT);
			} else if (a != b) {
				if (a->type == M_DIR && model_is_descendant(d2, a))
					expect_add(&e, -EINVAL);
				if (b->type == M_DIR && model_is_descendant(d1, b))
					expect_add(&e, -EINVAL);
			}
		} else {
			if (b && flags == O2_RENAME_NOREPLACE)
				expect_add(&e, -EEXIST);
			if (a->type == M_DIR && model_is_descendant(d2, a))
				expect_add(&e, -EINVAL);
			if (b && b != a) {
				if (a->type == M_DIR && b->type != M_DIR)
					expect_add(&e, -ENOTDIR);
				if (a->type != M_DIR && b->type == M_DIR)
					expect_add(&e, -EISDIR);
				if (b->type == M_DIR && b->nents)
					expect_add(&e, -ENOTEMPTY);
			}
		}
	}
	q1 = quote_name(n1, l1);
	q2 = quote_name(n2, l2);
	char sdesc[64] = " [absent]", tdesc[64] = "";

	if (s)
		snprintf(sdesc, sizeof(sdesc), " [%s %" PRIu64 "]", type_name(s->ino->type),
			 s->ino->ino);
	if (t)
		snprintf(tdesc, sizeof(tdesc), " [%s%s %" PRIu64 "%s]",
			 t->ino->type == M_DIR ? (t->ino->nents ? "non-empty " : "empty ") : "",
			 type_name(t->ino->type), t->ino->ino,
			 s && s->ino == t->ino ? ", same inode" : "");
	snprintf(what, sizeof(what),
		 "rename(dir %" PRIu64 " \"%s\"%s -> dir %" PRIu64 " \"%s\"%s, flags %s)", d1->ino,
		 q1, sdesc, d2->ino, q2, tdesc,
		 flags == O2_RENAME_EXCHANGE ? "EXCHANGE" :
		 flags == O2_RENAME_NOREPLACE ? "NOREPLACE" : "0");
	free(q1);
	free(q2);
	logop(rn, "%s", what);
	r = o2_rename(rn->v.fs, d1->ino, n1, l1, d2->ino, n2, l2, flags);
	check_result(rn, what, r, &e);
	if (r < 0)
		return;

	struct m_inode *a = s->ino, *b = t ? t->ino : NULL;

	if (a == b)
		return; /* the same inode: nothing happens */
	/*
	 * Both directories get mtime and ctime, the moved inodes ctime; a
	 * directory that changes parent has its ".." rewritten, which may or
	 * may not count as a change of its mtime.
	 */
	model_touch_mc(&rn->m, d1);
	model_touch_mc(&rn->m, d2);
	model_touch_c(&rn->m, a);
	if (a->type == M_DIR && d1 != d2)
		model_times_unknown(a, true, false);
	if (flags == O2_RENAME_EXCHANGE) {
		model_touch_c(&rn->m, b);
		if (b->type == M_DIR && d1 != d2)
			model_times_unknown(b, true, false);
		s->ino = b;
		t->ino = a;
		if (d1 != d2) {
			if (a->type == M_DIR) {
				d1->nlink--;
				d2->nlink++;
				a->parent = d2;
			}
			if (b->type == M_DIR) {
				d2->nlink--;
				d1->nlink++;
				b->parent = d1;
			}
		}
		return;
	}
	if (b) {
		model_del_entry(d2, t);
		if (b->type == M_DIR)
			d2->nlink--;
	}
	/* the victim's removal may have moved the source entry */
	s = model_lookup(d1, n1, l1);
	model_del_entry(d1, s);
	model_add_entry(d2, n2, l2, a);
	if (a->type == M_DIR && d1 != d2) {
		d1->nlink--;
		d2->nlink++;
	}
	if (b)
		drop_link_checked(rn, b, what);
}

static struct m_inode *pick_file_for_data(struct run *rn, bool *isdir)
{
	struct m_inode *in = NULL;

	*isdir = false;
	if (rng_pct(&rn->r, 2)) {
		in = pick_inode(rn, M_DIR, false);
		if (in) {
			*isdir = true;
			return in;
		}
	}
	return pick_inode(rn, M_REG, true);
}

static void op_truncate(struct run *rn, bool shrink_only);

static void op_write(struct run *rn)
{
	bool isdir;
	struct m_inode *in;
	uint64_t off, len, cs = rn->m.cluster_size, k;
	struct expect e = { 0 };
	char what[256];
	ssize_t r;

	if (!may_grow(rn)) {
		op_truncate(rn, true);
		return;
	}
	in = pick_file_for_data(rn, &isdir);
	if (!in)
		return;
	k = rng_below(&rn->r, 100);
	if (k < 45)
		off = rng_below(&rn->r, (isdir ? 0 : in->size) + 1);
	else if (k < 70)
		off = rng_below(&rn->r, rn->max_file);
	else
		off = rng_below(&rn->r, rn->max_file / cs + 1) * cs - rng_below(&rn->r, 600);
	if (off > rn->max_file)
		off = 0;
	k = rng_below(&rn->r, 100);
	if (k < 50)
		len = rng_range(&rn->r, 1, 600);
	else if (k < 80)
		len = rng_range(&rn->r, 1, 3 * cs < 64 * KIB ? 3 * cs : 64 * KIB);
	else
		len = rng_range(&rn->r, 1, 200 * KIB);
	if (off + len > rn->max_file)
		len = off < rn->max_file ? rn->max_file - off : 1;
	if (isdir) {
		expect_add(&e, -EISDIR);
		expect_add(&e, -EINVAL);
	}
	rng_fill(rn->seed ^ (rn->opno * 0x9E3779B97F4A7C15ull), rn->wbuf, len);
	snprintf(what, sizeof(what), "write(inode %" PRIu64 "%s, off %" PRIu64 ", len %" PRIu64
		 "; size %" PRIu64 ")",
		 in->ino, isdir ? " [dir]" : in->nlink ? "" : " [open orphan]", off, len,
		 isdir ? 0 : in->size);
	logop(rn, "%s", what);
	r = o2_write(rn->v.fs, in->ino, off, rn->wbuf, len);
	if (isdir || r < 0) {
		check_result(rn, what, r < 0 ? (int)r : 0, &e);
		if (r >= 0 && isdir)
			mfail(rn, "%s: writing a directory returned %zd", what, r);
		return;
	}
	/* a full volume may take part of it */
	if ((uint64_t)r != len && !(rn->full && r > 0))
		mfail(rn, "%s: returned %zd, want %" PRIu64, what, r, len);
	model_write(&rn->m, in, off, rn->wbuf, (size_t)r);
	rn->shared_changes += in->family != 0;
}

static void op_truncate(struct run *rn, bool shrink_only)
{
	bool isdir;
	struct m_inode *in = pick_file_for_data(rn, &isdir);
	uint64_t size, k = rng_below(&rn->r, 100);
	struct expect e = { 0 };
	char what[256];
	bool via_setattr = rng_pct(&rn->r, 40);
	int r;

	if (!in)
		return;
	if (isdir && shrink_only)
		return;
	if (k < 40 || shrink_only)
		size = in->size ? rng_below(&rn->r, in->size) : 0;
	else if (k < 70)
		size = in->size + rng_range(&rn->r, 1, rn->max_file / 4);
	else if (k < 85)
		size = in->size;
	else
		size = 0;
	if (size > rn->max_file)
		size = rn->max_file;
	if (isdir) {
		expect_add(&e, -EISDIR);
		expect_add(&e, -EINVAL);
	}
	snprintf(what, sizeof(what), "%s(inode %" PRIu64 "%s, %" PRIu64 " -> %" PRIu64 ")",
		 via_setattr ? "setattr-size" : "truncate", in->ino,
		 isdir ? " [dir]" : in->nlink ? "" : " [open orphan]", isdir ? 0 : in->size, size);
	logop(rn, "%s", what);
	if (via_setattr) {
		struct o2_setattr sa = { .size = size };

		r = o2_setattr(rn->v.fs, in->ino, &sa, O2_SET_SIZE);
	} else {
		r = o2_truncate(rn->v.fs, in->ino, size);
	}
	check_result(rn, what, r, &e);
	if (r == 0) {
		model_truncate(&rn->m, in, size);
		rn->shared_changes += in->family != 0;
	}
}

static void op_fallocate(struct run *rn)
{
	bool isdir;
	struct m_inode *in;
	uint64_t off, len, cs = rn->m.cluster_size;
	unsigned mode = rng_pct(&rn->r, 50) ? O2_FALLOC_KEEP_SIZE : 0;
	struct expect e = { 0 };
	char what[256];
	int r;

	if (!may_grow(rn))
		return;
	in = pick_file_for_data(rn, &isdir);
	if (!in || isdir)
		return;
	off = rng_below(&rn->r, in->size + 2 * cs);
	len = rng_range(&rn->r, 1, 3 * cs);
	if (off + len > rn->max_file)
		return;
	/*
	 * fsck.ocfs2 1.8.7 counts unwritten extents as data and flags a file
	 * whose last allocated cluster starts at or past i_size
	 * (INODE_SPARSE_SIZE), although the kernel makes exactly that for
	 * KEEP_SIZE past the end.  So KEEP_SIZE stays within the clusters
	 * the size already reaches into.
	 */
	if (mode == O2_FALLOC_KEEP_SIZE) {
		uint64_t lim = (in->size + cs - 1) / cs * cs;

		if (off >= lim)
			off = in->size ? rng_below(&rn->r, in->size) : 0;
		if (off + len > lim)
			len = lim > off ? lim - off : 0;
		if (!len)
			return;
	}
	if (!rn->unwritten)
		expect_add(&e, -EOPNOTSUPP);
	snprintf(what, sizeof(what), "fallocate(inode %" PRIu64 ", %s, off %" PRIu64 ", len %" PRIu64
		 "; size %" PRIu64 ")",
		 in->ino, mode ? "KEEP_SIZE" : "0", off, len, in->size);
	logop(rn, "%s", what);
	r = o2_fallocate(rn->v.fs, in->ino, mode, off, len);
	if (r == 0 && !rn->unwritten)
		e.nerr = 0; /* allocating zeroed clusters instead is fine too */
	check_result(rn, what, r, &e);
	if (r < 0)
		return;
	if (!mode && off + len > in->size)
		model_truncate(&rn->m, in, off + len);
	if (in->alloc_end < off + len)
		in->alloc_end = off + len;
	model_times_unknown(in, true, true); /* no rule for fallocate */
}

/* Punch a hole: what it covers below the size reads as zeros, the size stays. */
static void op_punch(struct run *rn)
{
	bool isdir;
	struct m_inode *in = pick_file_for_data(rn, &isdir);
	uint64_t off, len, cs = rn->m.cluster_size;
	struct expect e = { 0 };
	char what[256];
	int r;

	if (!in || isdir)
		return;
	off = rng_below(&rn->r, in->size + 2 * cs);
	len = rng_pct(&rn->r, 30) ? rng_range(&rn->r, 1, cs) : rng_range(&rn->r, 1, in->size + 2 * cs);
	if (!rn->sparse)
		expect_add(&e, -EOPNOTSUPP);
	snprintf(what, sizeof(what), "punch hole(inode %" PRIu64 ", off %" PRIu64 ", len %" PRIu64
		 "; size %" PRIu64 ")", in->ino, off, len, in->size);
	logop(rn, "%s", what);
	r = o2_fallocate(rn->v.fs, in->ino, O2_FALLOC_PUNCH_HOLE | O2_FALLOC_KEEP_SIZE, off, len);
	check_result(rn, what, r, &e);
	if (r < 0)
		return;
	if (off < in->size) {
		uint64_t end = off + len < in->size ? off + len : in->size;

		memset(in->data + off, 0, (size_t)(end - off));
	}
	model_touch_mc(&rn->m, in);
}

static void op_setattr(struct run *rn)
{
	struct m_inode *in = pick_inode(rn, -1, false);
	struct o2_setattr sa = { 0 };
	unsigned mask = 0;
	char what[256];
	struct expect e = { 0 };
	int r;

	if (!in || in->type == M_LNK)
		return;
	if (rng_pct(&rn->r, 80)) {
		mask |= O2_SET_MODE;
		sa.mode = pick_perm(rn, in->type == M_DIR);
	}
	if (!mask || rng_pct(&rn->r, 30)) {
		mask |= O2_SET_UID | O2_SET_GID;
		pick_owner(rn, &sa.uid, &sa.gid);
	}
	snprintf(what, sizeof(what), "setattr(inode %" PRIu64 ", mode 0%o uid %u gid %u, mask 0x%x)",
		 in->ino, sa.mode, sa.uid, sa.gid, mask);
	logop(rn, "%s", what);
	r = o2_setattr(rn->v.fs, in->ino, &sa, mask);
	check_result(rn, what, r, &e);
	model_touch_c(&rn->m, in);
	if (mask & O2_SET_MODE) {
		in->perm = sa.mode & 07777;
		acl_chmod(rn, in);
	}
	if (mask & O2_SET_UID) {
		in->uid = sa.uid;
		in->gid = sa.gid;
	}
}

/* ---- extended attributes ---- */

/* A name from a small pool (so that names recur), now and then a long one. */
static size_t pick_xattr_name(struct run *rn, unsigned *type, char *buf)
{
	static const char *const pool[] = { "a", "b", "mime_type", "selinux", "\xc3\xa9t\xc3\xa9",
					    "\xff", "checksum.sha256" };
	static const unsigned types[] = { O2_XATTR_USER, O2_XATTR_USER, O2_XATTR_USER,
					  O2_XATTR_TRUSTED, O2_XATTR_SECURITY };
	size_t len;

	/* POSIX ACLs: no name (raw bytes only where ACLs are not in force) */
	if (!rn->v.acl && rng_pct(&rn->r, 5)) {
		*type = rng_pct(&rn->r, 50) ? O2_XATTR_ACL_ACCESS : O2_XATTR_ACL_DEFAULT;
		return 0;
	}
	*type = types[rng_below(&rn->r, 5)];
	if (rng_pct(&rn->r, 5)) {
		len = (size_t)rng_range(&rn->r, 100, O2_XATTR_NAME_MAX);
		memset(buf, 'n', len);
		buf[0] = (char)('a' + rng_below(&rn->r, 3));
		return len;
	}
	const char *n = pool[rng_below(&rn->r, sizeof(pool) / sizeof(pool[0]))];

	len = strlen(n);
	memcpy(buf, n, len);
	return len;
}

static size_t pick_xattr_size(struct run *rn)
{
	if (rng_pct(&rn->r, 55))
		return (size_t)rng_below(&rn->r, 81); /* kept in the store */
	if (rng_pct(&rn->r, 85) || !may_grow(rn))
		return (size_t)rng_range(&rn->r, 81, 5000);
	return (size_t)rng_range(&rn->r, 5001, O2_XATTR_VALUE_MAX);
}

/* Mostly an inode that has attributes already, so that stores fill up. */
static struct m_inode *pick_xattr_inode(struct run *rn)
{
	size_t n = rn->m.nall, start = (size_t)rng_below(&rn->r, n ? n : 1);

	if (n && rng_pct(&rn->r, 60))
		for (size_t i = 0; i < n; i++)
			if (rn->m.all[(start + i) % n]->nxattrs)
				return rn->m.all[(start + i) % n];
	return pick_inode(rn, -1, true);
}

static void op_setxattr(struct run *rn)
{
	struct m_inode *in = pick_xattr_inode(rn);
	char name[O2_XATTR_NAME_MAX], what[512];
	unsigned type, flags = 0;
	struct expect e = { 0 };
	size_t len, size;
	int r;

	if (!in)
		return;
	len = pick_xattr_name(rn, &type, name);
	size = pick_xattr_size(rn);
	if (rng_pct(&rn->r, 20))
		flags = rng_pct(&rn->r, 50) ? O2_XATTR_CREATE : O2_XATTR_REPLACE;
	rng_fill(rn->seed ^ rn->opno, rn->wbuf, size);

	struct m_xattr *old = model_xattr_find(in, type, name, len);
	/* neither store can fail to hold it while everything would fit the block alone */
	size_t need = 20 + model_xattr_bytes(in, old) + model_xattr_entry_bytes(len, size);
	size_t block_room = rn->m.block_size - 48;

	/* a long value wants one contiguous run of clusters */
	bool may_enospc = need > block_room || (size > 80 && (size > rn->m.cluster_size ||
							      !may_grow(rn)));

	if (!has_xattrs(rn))
		expect_add(&e, -EOPNOTSUPP);
	else if (old && (flags & O2_XATTR_CREATE))
		expect_add(&e, -EEXIST);
	else if (!old && (flags & O2_XATTR_REPLACE))
		expect_add(&e, -ENODATA);
	char *q = quote_name(name, len);

	snprintf(what, sizeof(what), "setxattr(inode %" PRIu64 ", type %u, %s, %zu bytes, flags %u)",
		 in->ino, type, q, size, flags);
	free(q);
	logop(rn, "%s", what);
	r = o2_xattr_set(rn->v.fs, in->ino, type, name, len, rn->wbuf, size, flags);
	if (!(e.nerr == 0 && may_enospc && r == -ENOSPC))
		check_result(rn, what, r, &e);
	rn->xattr_set_ok += r == 0;
	rn->xattr_enospc += r == -ENOSPC;
	rn->xattr_long_values += r == 0 && size > 80;
	if (r == 0) {
		model_xattr_set(in, type, name, len, rn->wbuf, size);
		model_touch_c(&rn->m, in);
	}
}

/*
 * A burst: many attributes on one inode (20 to 400 set, some removed),
 * names of every length: past what a block holds, so that the block is
 * indexed into buckets, which fill and split.
 */
static void op_xattrs(struct run *rn)
{
	struct m_inode *in = pick_xattr_inode(rn);
	unsigned k = (unsigned)rng_range(&rn->r, 20, 400);
	/* each value past 80 bytes takes a cluster of its own */
	bool long_ok = rn->m.cluster_size <= 65536 && may_grow(rn);
	char what[512];

	if (!in || !has_xattrs(rn))
		return;
	for (unsigned i = 0; i < k; i++) {
		char name[O2_XATTR_NAME_MAX];
		unsigned type = rng_pct(&rn->r, 80) ? O2_XATTR_USER : O2_XATTR_TRUSTED;
		size_t len = (size_t)snprintf(name, sizeof(name), "x%04x.", (unsigned)rng_below(&rn->r, 4096));
		size_t extra = (size_t)rng_below(&rn->r, rng_pct(&rn->r, 20) ? O2_XATTR_NAME_MAX - len : 24);
		size_t size = long_ok && rng_pct(&rn->r, 15) ? (size_t)rng_range(&rn->r, 81, 3000)
							      : (size_t)rng_below(&rn->r, 81);
		struct m_xattr *old;
		int r;

		memset(name + len, 'a' + (int)(i % 26), extra);
		len += extra;
		rng_fill(rn->seed ^ rn->opno ^ i, rn->wbuf, size);
		old = model_xattr_find(in, type, name, len);
		if (old && rng_pct(&rn->r, 30)) {
			snprintf(what, sizeof(what), "xattrs: remove(inode %" PRIu64 ", type %u, %zu-byte name)",
				 in->ino, type, len);
			logop(rn, "%s", what);
			r = o2_xattr_remove(rn->v.fs, in->ino, type, name, len);
			check_result(rn, what, r, &(struct expect){ 0 });
			if (r == 0)
				model_xattr_set(in, type, name, len, NULL, 0);
			continue;
		}
		snprintf(what, sizeof(what), "xattrs: set(inode %" PRIu64 ", type %u, %zu-byte name, %zu bytes)",
			 in->ino, type, len, size);
		logop(rn, "%s", what);
		r = o2_xattr_set(rn->v.fs, in->ino, type, name, len, rn->wbuf, size, 0);
		/* space runs out only for a value's clusters, or a bucket's */
		if (r == -ENOSPC && !may_grow(rn))
			break;
		check_result(rn, what, r, &(struct expect){ 0 });
		if (r < 0)
			break;
		model_xattr_set(in, type, name, len, rn->wbuf, size);
		rn->xattr_burst_sets++;
	}
	model_touch_c(&rn->m, in);
	rn->xattr_bursts++;
}

static void op_rmxattr(struct run *rn)
{
	struct m_inode *in = pick_xattr_inode(rn);
	char name[O2_XATTR_NAME_MAX], what[512];
	struct expect e = { 0 };
	unsigned type;
	size_t len;
	int r;

	if (!in)
		return;
	if (in->nxattrs && rng_pct(&rn->r, 85)) {
		const struct m_xattr *x = &in->xattrs[rng_below(&rn->r, in->nxattrs)];

		type = x->type;
		len = x->name_len;
		memcpy(name, x->name, len);
	} else {
		len = pick_xattr_name(rn, &type, name);
	}
	if (!has_xattrs(rn))
		expect_add(&e, -EOPNOTSUPP);
	else if (!model_xattr_find(in, type, name, len))
		expect_add(&e, -ENODATA);
	char *q = quote_name(name, len);

	snprintf(what, sizeof(what), "removexattr(inode %" PRIu64 ", type %u, %s)", in->ino, type, q);
	free(q);
	logop(rn, "%s", what);
	r = o2_xattr_remove(rn->v.fs, in->ino, type, name, len);
	check_result(rn, what, r, &e);
	if (r == 0) {
		model_xattr_set(in, type, name, len, NULL, 0);
		model_touch_c(&rn->m, in);
	}
}
static unsigned total_refs(struct run *rn)
{
	unsigned n = 0;

	for (size_t i = 0; i < rn->m.nall; i++)
		n += rn->m.all[i]->open_refs;
	return n;
}

static void op_open(struct run *rn)
{
	struct m_inode *in;
	char what[128];
	struct expect e = { 0 };
	int r;

	if (total_refs(rn) >= 8)
		return;
	in = pick_inode(rn, M_REG, false);
	if (!in)
		return;
	snprintf(what, sizeof(what), "open_ref(inode %" PRIu64 ", refs %u)", in->ino, in->open_refs);
	logop(rn, "%s", what);
	r = o2_inode_open_ref(rn->v.fs, in->ino);
	check_result(rn, what, r, &e);
	in->open_refs++;
}

static void close_ref(struct run *rn, struct m_inode *in)
{
	char what[160];
	struct expect e = { 0 };
	uint64_t ino = in->ino;
	bool freed = in->open_refs == 1 && in->nlink == 0;
	int r;

	snprintf(what, sizeof(what), "close_ref(inode %" PRIu64 ", refs %u, links %u)", in->ino,
		 in->open_refs, in->nlink);
	logop(rn, "%s", what);
	if (freed) /* the last look at an orphan: still all there */
		verify_orphan(rn, in, what);
	r = o2_inode_close_ref(rn->v.fs, in->ino);
	check_result(rn, what, r, &e);
	in->open_refs--;
	if (freed) {
		model_forget(&rn->m, in);
		verify_gone(rn, ino, what);
	}
}

static void op_close(struct run *rn)
{
	size_t n = rn->m.nall, start = (size_t)rng_below(&rn->r, n ? n : 1);

	for (size_t i = 0; i < n; i++) {
		struct m_inode *in = rn->m.all[(start + i) % n];

		if (in->open_refs) {
			close_ref(rn, in);
			return;
		}
	}
}

/*
 * Many entries in one directory at once, so that directories leave inline
 * data, grow to several blocks and (with indexed-dirs) get a real index:
 * empty files and hard links (entries without inodes), names b000-b599.
 * Each entry is an operation of its own.
 */
static void op_bulk(struct run *rn)
{
	struct m_inode *dir = pick_inode(rn, M_DIR, false);
	unsigned n = (unsigned)rng_range(&rn->r, 20, 200);

	if (!dir)
		return;
	for (unsigned i = 0; i < n && may_grow(rn); i++) {
		char name[16], what[160];
		size_t len = (size_t)sprintf(name, "b%03u", (unsigned)rng_below(&rn->r, 600));
		struct m_inode *src = rng_pct(&rn->r, 60) ? pick_inode(rn, M_REG, false) : NULL;
		struct expect e = { 0 };
		uint64_t ino = 0;
		int r;

		if (i)
			rn->opno++;
		tick_clock(rn);
		if (model_lookup(dir, name, len))
			expect_add(&e, -EEXIST);
		if (src) {
			snprintf(what, sizeof(what), "link(inode %" PRIu64 ", dir %" PRIu64 " \"%s\") [bulk]",
				 src->ino, dir->ino, name);
			logop(rn, "%s", what);
			r = o2_link(rn->v.fs, src->ino, dir->ino, name, len);
		} else {
			struct o2_new_inode ni = { .mode = S_IFREG | 0644 };

			snprintf(what, sizeof(what), "create(dir %" PRIu64 " \"%s\") [bulk]", dir->ino,
				 name);
			logop(rn, "%s", what);
			r = o2_create(rn->v.fs, dir->ino, name, len, &ni, &ino);
		}
		check_result(rn, what, r, &e);
		if (r < 0)
			continue;
		if (!src) {
			note_new_ino(rn, ino, what);
			src = model_new_inode(&rn->m, M_REG, ino, 0644);
			acl_inherit(rn, dir, src, 0);
		} else {
			model_touch_c(&rn->m, src);
		}
		src->nlink++;
		model_add_entry(dir, name, len, src);
		model_touch_mc(&rn->m, dir);
	}
}

/*
 * Small writes one cluster apart: more extents than the inode holds (19 at
 * 512-byte blocks, 243 at 4 KiB), so later operations work on a tree of
 * depth 1.  4 KiB clusters only (at 1 MiB each extent costs a megabyte).
 */
static void op_scatter(struct run *rn)
{
	uint64_t cs = rn->m.cluster_size, base;
	unsigned n = rn->m.block_size == 512 ? (unsigned)rng_range(&rn->r, 20, 60) :
					       (unsigned)rng_range(&rn->r, 200, 280);
	struct m_inode *in;

	if (cs > 4096 || !may_grow(rn) || 2ull * n * cs >= rn->max_file)
		return;
	in = pick_inode(rn, M_REG, true);
	if (!in)
		return;
	base = rng_below(&rn->r, (rn->max_file - 2ull * n * cs) / cs) * cs;
	for (unsigned i = 0; i < n; i++) {
		uint64_t off = base + 2ull * i * cs + rng_below(&rn->r, cs - 512);
		size_t len = (size_t)rng_range(&rn->r, 1, 512);
		char what[200];
		ssize_t r;

		if (i)
			rn->opno++;
		tick_clock(rn);
		rng_fill(rn->seed ^ (rn->opno * 0x9E3779B97F4A7C15ull), rn->wbuf, len);
		snprintf(what, sizeof(what), "write(inode %" PRIu64 ", off %" PRIu64 ", len %zu) [scatter]",
			 in->ino, off, len);
		logop(rn, "%s", what);
		r = o2_write(rn->v.fs, in->ino, off, rn->wbuf, len);
		if (r != (ssize_t)len)
			mfail(rn, "%s: returned %zd%s%s", what, r, r < 0 ? ": " : "",
			      r < 0 ? o2_fs_error(rn->v.fs) : "");
		model_write(&rn->m, in, off, rn->wbuf, len);
	}
}

/* Remove most non-directory entries of one directory (directories shrink). */
static void op_purge(struct run *rn)
{
	struct m_inode *dir = pick_inode(rn, M_DIR, false);
	unsigned pct = (unsigned)rng_range(&rn->r, 50, 100), done = 0;

	if (!dir)
		return;
	for (size_t i = dir->nents; i-- > 0;) {
		struct m_dirent *de;
		struct m_inode *in;
		char what[400], *q;
		struct expect e = { 0 };
		int r;

		if (i >= dir->nents)
			continue;
		de = &dir->ents[i];
		in = de->ino;
		if (in->type == M_DIR || !rng_pct(&rn->r, pct))
			continue;
		if (done++)
			rn->opno++;
		tick_clock(rn);
		q = quote_name(de->name, de->len);
		snprintf(what, sizeof(what), "unlink(dir %" PRIu64 " \"%s\" %s) [purge]", dir->ino, q,
			 type_name(in->type));
		free(q);
		logop(rn, "%s", what);
		r = o2_unlink(rn->v.fs, dir->ino, de->name, de->len);
		check_result(rn, what, r, &e);
		model_del_entry(dir, de);
		model_touch_mc(&rn->m, dir);
		drop_link_checked(rn, in, what);
	}
}

/*
 * Small writes to every other cluster of a file that shares them: each
 * copy splits a refcount record, so trees outgrow their root block.
 */
static void cow_scatter(struct run *rn, struct m_inode *in)
{
	uint64_t cs = rn->m.cluster_size, clusters = in->size / cs;

	for (uint64_t c = 1, n = 0; c < clusters && n < 60; c += 2) {
		uint64_t off = c * cs + rng_below(&rn->r, cs - 16);
		size_t len = (size_t)rng_range(&rn->r, 1, 16);
		char what[200];
		ssize_t r;
		bool data = false;

		/* clusters holding data (holes are not shared) */
		for (uint64_t b = c * cs; b < (c + 1) * cs && !data; b += 8)
			data = in->data[b] != 0;
		if (!data)
			continue;
		n++;

		rn->opno++;
		tick_clock(rn);
		rng_fill(rn->seed ^ (rn->opno * 0x9E3779B97F4A7C15ull), rn->wbuf, len);
		snprintf(what, sizeof(what), "write(inode %" PRIu64 ", off %" PRIu64 ", len %zu) "
			 "[copy on write]", in->ino, off, len);
		logop(rn, "%s", what);
		r = o2_write(rn->v.fs, in->ino, off, rn->wbuf, len);
		if (rn->full && r < (ssize_t)len) {
			/* a full volume: the copy may not fit, the rest changes nothing */
			struct expect e = { 0 };

			check_result(rn, what, r < 0 ? (int)r : 0, &e);
			if (r <= 0)
				return;
			len = (uint64_t)r;
		} else if (r != (ssize_t)len) {
			mfail(rn, "%s: returned %zd (%s)", what, r, r < 0 ? o2_fs_error(rn->v.fs) : "");
		}
		model_write(&rn->m, in, off, rn->wbuf, len);
		rn->shared_changes++;
	}
}

static bool reflink_candidate(const struct run *rn, const struct m_inode *in, bool fam_only)
{
	return in->type == M_REG && in->nlink && in->size > rn->m.block_size &&
	       (!fam_only || in->family);
}

/*
 * A reflink of a regular file: a new file sharing its data until either
 * changes it; mode and owner as given, new times, the source's xattrs but
 * its ACLs (values kept in clusters shared until either changes them).
 */
static void op_reflink(struct run *rn)
{
	char name[320], *q, what[512];
	bool notdir;
	struct m_inode *src = pick_inode(rn, M_REG, false), *dir;
	struct o2_new_inode ni = { 0 };
	struct expect e = { 0 };
	uint64_t ino = 0;
	size_t len;
	int r;

	/*
	 * Mostly files past inline size (inline data is copied, not shared),
	 * often ones already sharing: families of three and more.
	 */
	bool fam_only = rn->nfamilies && rng_pct(&rn->r, 60);

	for (int pass = 0; pass < 2 && rng_pct(&rn->r, 90); pass++, fam_only = false) {
		size_t n = 0, k;

		for (size_t i = 0; i < rn->m.nall; i++)
			n += reflink_candidate(rn, rn->m.all[i], fam_only);
		if (!n)
			continue;
		k = (size_t)rng_below(&rn->r, n);
		for (size_t i = 0; i < rn->m.nall; i++)
			if (reflink_candidate(rn, rn->m.all[i], fam_only) && !k--)
				src = rn->m.all[i];
		break;
	}
	if (!src || !may_grow(rn))
		return;
	unsigned fam = src->family;
	dir = pick_dir(rn, &notdir);
	len = pick_entry_name(rn, dir, 10, name);
	ni.mode = (uint16_t)(S_IFREG | pick_perm(rn, false));
	pick_owner(rn, &ni.uid, &ni.gid);
	if (len > NAME_MAX_O2)
		expect_add(&e, -ENAMETOOLONG);
	else if (!rn->reflink)
		expect_add(&e, -EOPNOTSUPP);
	if (notdir)
		expect_add(&e, -ENOTDIR);
	else if (len <= NAME_MAX_O2 && model_lookup(dir, name, len))
		expect_add(&e, -EEXIST);
	q = quote_name(name, len);
	snprintf(what, sizeof(what), "reflink(inode %" PRIu64 " (%" PRIu64 " bytes), dir %" PRIu64
		 " \"%s\", mode 0%o)", src->ino, src->size, dir->ino, q, ni.mode);
	free(q);
	logop(rn, "%s", what);
	r = o2_reflink(rn->v.fs, src->ino, dir->ino, name, len, &ni, &ino);
	check_result(rn, what, r, &e);
	if (r < 0)
		return;
	rn->reflinks_ok++;
	note_new_ino(rn, ino, what);
	struct m_inode *in = model_new_inode(&rn->m, M_REG, ino, ni.mode);

	in->uid = ni.uid;
	in->gid = ni.gid;
	in->nlink = 1;
	if (src->size)
		model_write(&rn->m, in, 0, src->data, (size_t)src->size);
	in->alloc_end = src->alloc_end;
	/* the attributes too, but the POSIX ACLs (values in clusters shared) */
	for (size_t i = 0; i < src->nxattrs; i++) {
		const struct m_xattr *x = &src->xattrs[i];

		if (x->type == O2_XATTR_ACL_ACCESS || x->type == O2_XATTR_ACL_DEFAULT)
			continue;
		model_xattr_set(in, x->type, x->name, x->name_len, x->value ? x->value : (const uint8_t *)"",
				x->size);
		rn->reflink_xattrs++;
		rn->reflink_shared_values += x->size > 80;
	}
	if (!fam)
		fam = src->family = ++rn->nfamilies;
	in->family = fam;
	model_add_entry(dir, name, len, in);
	model_touch_mc(&rn->m, dir);
	if (rng_pct(&rn->r, 50))
		cow_scatter(rn, rng_pct(&rn->r, 50) ? in : src);
}

static void run_op(struct run *rn)
{
	static unsigned weights[OP_COUNT] = {
		[OP_CREATE] = 12, [OP_MKNOD] = 2,  [OP_MKDIR] = 6,    [OP_SYMLINK] = 5,
		[OP_LINK] = 5,	  [OP_UNLINK] = 10, [OP_RMDIR] = 6,   [OP_RENAME] = 16,
		[OP_WRITE] = 22,  [OP_TRUNCATE] = 8, [OP_FALLOCATE] = 2, [OP_SETATTR] = 3,
		[OP_OPEN] = 3,	  [OP_CLOSE] = 3,   [OP_SYNC] = 1,	 [OP_BULK] = 1,
		[OP_PURGE] = 1,   [OP_SCATTER] = 1, [OP_SETXATTR] = 5, [OP_RMXATTR] = 2,
		[OP_SETACL] = 6,  [OP_REFLINK] = 4, [OP_XATTRS] = 1,
	};
	static bool weights_set;
	unsigned total = 0, k;
	enum op op = OP_CREATE;

	if (!weights_set) {
		/* O2_MODEL_SKIP=symlink,fallocate,...: leave kinds out (to isolate a bug) */
		const char *skip = getenv("O2_MODEL_SKIP");

		for (int i = 0; skip && i < OP_COUNT; i++) {
			size_t l = strlen(op_names[i]);

			for (const char *p = skip; (p = strstr(p, op_names[i])); p += l)
				if ((p == skip || p[-1] == ',') && (p[l] == ',' || p[l] == '\0'))
					weights[i] = 0;
		}
		weights_set = true;
	}
	for (int i = 0; i < OP_COUNT; i++)
		total += weights[i];
	k = (unsigned)rng_below(&rn->r, total);
	for (int i = 0; i < OP_COUNT; i++) {
		if (k < weights[i]) {
			op = (enum op)i;
			break;
		}
		k -= weights[i];
	}
	/* keep within the space, memory and shape budgets */
	if ((op == OP_CREATE || op == OP_MKNOD || op == OP_SYMLINK || op == OP_LINK) &&
	    !may_grow(rn))
		op = OP_UNLINK;
	if (op == OP_MKDIR && (!may_grow(rn) || count_type(rn, M_DIR) >= 40))
		op = OP_RMDIR;
	/* a full volume stays full: deletions only now and then */
	if (rn->full && (op == OP_UNLINK || op == OP_RMDIR || op == OP_PURGE || op == OP_RMXATTR ||
			 op == OP_TRUNCATE) && !rng_pct(&rn->r, 5))
		op = OP_WRITE;
	/* (the bulk kinds are many writes and creates that must all succeed) */
	if (rn->full && (op == OP_BULK || op == OP_SCATTER))
		op = OP_WRITE;
	tick_clock(rn);
	rn->counts[op]++;
	switch (op) {
	case OP_CREATE:
		op_create(rn, false);
		break;
	case OP_MKNOD:
		op_create(rn, true);
		break;
	case OP_MKDIR:
		op_mkdir(rn);
		break;
	case OP_SYMLINK:
		op_symlink(rn);
		break;
	case OP_LINK:
		op_link(rn);
		break;
	case OP_UNLINK:
		op_unlink(rn);
		break;
	case OP_RMDIR:
		op_rmdir(rn);
		break;
	case OP_RENAME:
		op_rename(rn);
		break;
	case OP_WRITE:
		op_write(rn);
		break;
	case OP_TRUNCATE:
		op_truncate(rn, false);
		break;
	case OP_FALLOCATE:
		if (rng_pct(&rn->r, 40))
			op_punch(rn);
		else
			op_fallocate(rn);
		break;
	case OP_SETATTR:
		op_setattr(rn);
		break;
	case OP_REFLINK:
		op_reflink(rn);
		break;
	case OP_XATTRS:
		op_xattrs(rn);
		break;
	case OP_OPEN:
		op_open(rn);
		break;
	case OP_CLOSE:
		op_close(rn);
		break;
	case OP_BULK:
		if (may_grow(rn))
			op_bulk(rn);
		else
			op_purge(rn);
		break;
	case OP_PURGE:
		op_purge(rn);
		break;
	case OP_SCATTER:
		op_scatter(rn);
		break;
	case OP_SETXATTR:
		op_setxattr(rn);
		break;
	case OP_RMXATTR:
		op_rmxattr(rn);
		break;
	case OP_SETACL:
		if (rn->v.acl)
			op_setacl(rn);
		break;
	case OP_SYNC: {
		struct expect e = { 0 };

		logop(rn, "sync");
		check_result(rn, "o2_fs_sync", o2_fs_sync(rn->v.fs), &e);
		break;
	}
	case OP_COUNT:
		break;
	}
	if (rng_pct(&rn->r, 2)) {
		struct expect e = { 0 };

		rn->v.clock_ns += 6ull * 1000000000ull;
		rn->m.now = (int64_t)rn->v.clock_ns;
		check_result(rn, "o2_fs_tick", o2_fs_tick(rn->v.fs), &e);
	}
}

/* ---- space accounting ---- */

struct space {
	uint64_t free_clusters, free_inodes, used_clusters;
	uint32_t alloc_clusters; /* clusters held by the suballocators */
	uint32_t ia_used, ea_used, gia_used;
};

static uint32_t sysfile_field(struct run *rn, enum o2_sysfile t, bool used)
{
	uint64_t blk;
	struct o2_inode *x;
	uint32_t v;
	int r = o2_sysfile_lookup(rn->v.fs, t, 0, &blk);

	if (r < 0)
		mfail(rn, "o2_sysfile_lookup(%d): %d", t, r);
	r = o2_inode_get(rn->v.fs, blk, &x);
	if (r < 0)
		mfail(rn, "system inode %" PRIu64 ": %d: %s", blk, r, o2_fs_error(rn->v.fs));
	v = used ? o2_inode_info(x)->bitmap_used : o2_inode_info(x)->clusters;
	o2_inode_unref(x);
	return v;
}

static struct space get_space(struct run *rn)
{
	struct o2_statfs sf;
	struct space s = { 0 };
	int r = o2_statfs(rn->v.fs, &sf);

	if (r < 0)
		mfail(rn, "o2_statfs: %d", r);
	s.free_clusters = sf.free_clusters;
	s.free_inodes = sf.free_inodes;
	s.used_clusters = o2_fs_super(rn->v.fs)->used_clusters;
	s.ia_used = sysfile_field(rn, O2_SYS_INODE_ALLOC, true);
	s.ea_used = sysfile_field(rn, O2_SYS_EXTENT_ALLOC, true);
	s.gia_used = sysfile_field(rn, O2_SYS_GLOBAL_INODE_ALLOC, true);
	s.alloc_clusters = sysfile_field(rn, O2_SYS_INODE_ALLOC, false) +
			   sysfile_field(rn, O2_SYS_EXTENT_ALLOC, false) +
			   sysfile_field(rn, O2_SYS_GLOBAL_INODE_ALLOC, false);
	/* quota files grow with the ids they hold and never shrink, as the
	 * suballocators' groups do */
	if (o2_fs_super(rn->v.fs)->feature_ro_compat & O2_FEATURE_RO_COMPAT_USRQUOTA)
		s.alloc_clusters += sysfile_field(rn, O2_SYS_USER_QUOTA, false) +
				    sysfile_field(rn, O2_SYS_LOCAL_USER_QUOTA, false);
	if (o2_fs_super(rn->v.fs)->feature_ro_compat & O2_FEATURE_RO_COMPAT_GRPQUOTA)
		s.alloc_clusters += sysfile_field(rn, O2_SYS_GROUP_QUOTA, false) +
				    sysfile_field(rn, O2_SYS_LOCAL_GROUP_QUOTA, false);
	return s;
}

static char *space_str(const struct space *s)
{
	char *p = NULL;

	if (asprintf(&p,
		     "free clusters %" PRIu64 ", free inodes %" PRIu64 ", bitmap used %" PRIu64
		     ", suballocator clusters %u, inode bits used %u, extent blocks used %u",
		     s->free_clusters, s->free_inodes, s->used_clusters, s->alloc_clusters,
		     s->ia_used, s->ea_used) < 0)
		abort();
	return p;
}

/*
 * No leak: with everything deleted the same inode and extent-block bits are
 * used as before, and free clusters plus the clusters the suballocators
 * grew by are what they were (exact equality when strict).
 */
static void check_space(struct run *rn, const struct space *before, const struct space *after,
			bool strict, const char *when)
{
	bool ok = after->ia_used == before->ia_used && after->ea_used == before->ea_used &&
		  after->gia_used == before->gia_used &&
		  after->free_clusters + after->alloc_clusters ==
			  before->free_clusters + before->alloc_clusters;

	if (strict)
		ok = ok && after->free_clusters == before->free_clusters &&
		     after->free_inodes == before->free_inodes &&
		     after->used_clusters == before->used_clusters;
	if (!ok) {
		char *a = space_str(before), *b = space_str(after);

		mfail(rn, "%s: space leaked:\n  before: %s\n  after:  %s", when, a, b);
	}
}

/* ---- batches ---- */

static void judge_or_fail(struct run *rn, char *msg, const char *when)
{
	if (msg)
		mfail(rn, "%s: %s", when, msg);
}

static void close_all_refs(struct run *rn)
{
	for (size_t i = 0; i < rn->m.nall;) {
		struct m_inode *in = rn->m.all[i];

		if (in->open_refs) {
			close_ref(rn, in);
			i = 0; /* the array may have been reordered */
			continue;
		}
		i++;
	}
}

/* The judges, at the end of a batch. */
/* What shapes the volume reached: directories out of inline data, indexed, deep trees. */
static void sample_coverage(struct run *rn)
{
	unsigned block_dirs = 0, indexed = 0, inl = 0, blk = 0;

	for (size_t i = 0; i < rn->m.nall; i++) {
		struct m_inode *in = rn->m.all[i];
		struct o2_inode *x;

		if (in->type == M_DIR && in->nents > rn->max_dir_entries)
			rn->max_dir_entries = in->nents;
		if (in->nxattrs > rn->max_xattrs)
			rn->max_xattrs = in->nxattrs;
		if ((in->type != M_DIR && in->type != M_REG) || o2_inode_get(rn->v.fs, in->ino, &x))
			continue;
		const struct o2_inode_info *info = o2_inode_info(x);

		if (in->type == M_DIR) {
			block_dirs += info->kind == O2_ID2_EXTENTS;
			indexed += (info->dyn_features & O2_INODE_DYN_INDEXED_DIR) != 0;
		}
		inl += (info->dyn_features & O2_INODE_DYN_INLINE_XATTR) != 0;
		blk += info->xattr_loc != 0;
		if (info->kind == O2_ID2_EXTENTS && info->list_depth > rn->max_extent_depth)
			rn->max_extent_depth = info->list_depth;
		o2_inode_unref(x);
	}
	if (block_dirs > rn->max_block_dirs)
		rn->max_block_dirs = block_dirs;
	if (indexed > rn->max_indexed_dirs)
		rn->max_indexed_dirs = indexed;
	if (inl > rn->xattr_inline_inodes)
		rn->xattr_inline_inodes = inl;
	if (blk > rn->xattr_block_inodes)
		rn->xattr_block_inodes = blk;
	struct o2_walk_stats st;

	if (rn->nfamilies && o2_fs_walk(rn->v.fs, &st) == 0 &&
	    st.refcount_records > rn->max_refcount_records)
		rn->max_refcount_records = st.refcount_records;
}

static void end_batch(struct run *rn)
{
	bool verbose = getenv("O2_MODEL_VERBOSE") != NULL;
	double t[8];

	t[0] = now_s();
	/* open orphans included (their data, links 0, the orphaned flag) */
	judge_or_fail(rn, judge_fscore(&rn->v, &rn->m), "fscore read-back before close");
	close_all_refs(rn);
	t[1] = now_s();
	vol_close(&rn->v);
	t[2] = now_s();
	judge_or_fail(rn, judge_fsck(&rn->v), "fsck after close");
	judge_or_fail(rn, judge_quota(&rn->v), "quota usage after close");
	t[3] = now_s();
	vol_open(&rn->v);
	t[4] = now_s();
	judge_or_fail(rn, judge_fscore(&rn->v, &rn->m), "fscore read-back after reopen");
	t[5] = now_s();
	judge_or_fail(rn, judge_rdump(&rn->v, &rn->m), "debugfs rdump");
	t[6] = now_s();
	judge_or_fail(rn, judge_debugfs_stat(&rn->v, &rn->m, &rn->r, 6), "debugfs stat");
	judge_or_fail(rn, judge_debugfs_xattr(&rn->v, &rn->m, 24), "debugfs xattr");
	t[7] = now_s();
	sample_coverage(rn);
	if (verbose)
		fprintf(stderr,
			"[%s] batch %u judged: read-back %.1f s, close %.1f s, fsck %.1f s, open %.1f s, "
			"read-back %.1f s, rdump %.1f s, stat %.1f s\n",
			rn->name, rn->batch, t[1] - t[0], t[2] - t[1], t[3] - t[2], t[4] - t[3],
			t[5] - t[4], t[6] - t[5], t[7] - t[6]);
}

static void run_init(struct run *rn, const char *name, uint64_t size, const char *mkfs_args)
{
	memset(rn, 0, sizeof(*rn));
	rn->name = name;
	rn->seed = case_seed(name);
	rn->r.s = rn->seed;
	rn->trace = env_u64("O2_MODEL_TRACE", 0) != 0;
	rn->t0 = now_s();
	vol_make(&rn->v, name, size, mkfs_args);
}

/* Open the fresh volume, make /TOP, set up the model. */
static void run_start(struct run *rn)
{
	struct o2_new_inode ni = { .mode = S_IFDIR | 0755 };
	const struct o2_super_info *sb;
	struct expect e = { 0 };
	uint64_t ino;
	int r;

	vol_open(&rn->v);
	sb = o2_fs_super(rn->v.fs);
	model_init(&rn->m, sb->block_size, sb->cluster_size);
	rn->m.now = (int64_t)rn->v.clock_ns;
	rn->unwritten = sb->feature_ro_compat & O2_FEATURE_RO_COMPAT_UNWRITTEN;
	rn->sparse = sb->feature_incompat & O2_FEATURE_INCOMPAT_SPARSE_ALLOC;
	rn->reflink = sb->feature_incompat & O2_FEATURE_INCOMPAT_REFCOUNT_TREE;
	rn->total_clusters = sb->total_clusters;
	logop(rn, "mkdir /TOP");
	r = o2_mkdir(rn->v.fs, sb->root_blkno, "TOP", 3, &ni, &ino);
	check_result(rn, "mkdir(/, \"TOP\")", r, &e);
	rn->m.top = model_new_inode(&rn->m, M_DIR, ino, 0755);
	rn->m.top->nlink = 2;
	rn->v.top_ino = ino;
}

/* Delete everything below dir (depth first) through fscore and the model. */
static void delete_tree(struct run *rn, struct m_inode *dir)
{
	while (dir->nents) {
		struct m_dirent *de = &dir->ents[dir->nents - 1];
		struct m_inode *in = de->ino;
		char what[400], *q = quote_name(de->name, de->len);
		struct expect e = { 0 };
		int r;

		if (in->type == M_DIR)
			delete_tree(rn, in);
		de = &dir->ents[dir->nents - 1];
		snprintf(what, sizeof(what), "%s(dir %" PRIu64 " \"%s\") [cleanup]",
			 in->type == M_DIR ? "rmdir" : "unlink", dir->ino, q);
		free(q);
		rn->opno++;
		logop(rn, "%s", what);
		if (in->type == M_DIR)
			r = o2_rmdir(rn->v.fs, dir->ino, de->name, de->len);
		else
			r = o2_unlink(rn->v.fs, dir->ino, de->name, de->len);
		check_result(rn, what, r, &e);
		model_del_entry(dir, de);
		if (in->type == M_DIR)
			dir->nlink--;
		model_touch_mc(&rn->m, dir);
		drop_link_checked(rn, in, what);
	}
}

static void remove_top(struct run *rn)
{
	struct expect e = { 0 };
	int r;

	delete_tree(rn, rn->m.top);
	logop(rn, "rmdir /TOP");
	r = o2_rmdir(rn->v.fs, o2_fs_super(rn->v.fs)->root_blkno, "TOP", 3);
	check_result(rn, "rmdir(/, \"TOP\")", r, &e);
	model_forget(&rn->m, rn->m.top);
	rn->m.top = NULL;
}

static void print_summary(struct run *rn, const char *extra)
{
	if (rn->steps)
		fprintf(stderr, "[%s] seed 0x%" PRIx64 ": %lu ops (%lu fscore calls) in %u batches, "
			"%.1f s%s%s\n",
			rn->name, rn->seed, rn->steps, rn->opno, rn->batch, now_s() - rn->t0,
			extra ? "; " : "", extra ? extra : "");
	else
		fprintf(stderr, "[%s] seed 0x%" PRIx64 ": %lu fscore calls, %u judged batches, %.1f s%s%s\n",
			rn->name, rn->seed, rn->opno, rn->batch, now_s() - rn->t0, extra ? "; " : "",
			extra ? extra : "");
	if (!rn->counts[OP_WRITE])
		return; /* a growth case: no random operations */
	fprintf(stderr, "  ops:");
	for (int i = 0; i < OP_COUNT; i++)
		fprintf(stderr, " %s=%lu", op_names[i], rn->counts[i]);
	fprintf(stderr,
		"\n  reached: a directory of %zu entries, %u block directories (%u indexed) at once, "
		"extent tree depth %u\n",
		rn->max_dir_entries, rn->max_block_dirs, rn->max_indexed_dirs, rn->max_extent_depth);
	if (rn->reflink)
		fprintf(stderr, "  reflinks: %lu made in %u families, %lu writes and truncates of "
			"their files, up to %" PRIu64 " refcount records at once (a root block "
			"holds %u); %lu xattrs copied, %lu values in clusters shared\n",
			rn->reflinks_ok, rn->nfamilies, rn->shared_changes, rn->max_refcount_records,
			(rn->m.block_size - 144) / 16, rn->reflink_xattrs, rn->reflink_shared_values);
	fprintf(stderr, "  xattr bursts: %lu, %lu attributes set in them\n", rn->xattr_bursts,
		rn->xattr_burst_sets);
	fprintf(stderr, "  xattrs: %lu set (%lu in clusters), %lu ENOSPC, up to %zu on one inode, "
		"%u inodes with an inline store and %u with a block at once\n", rn->xattr_set_ok,
		rn->xattr_long_values, rn->xattr_enospc, rn->max_xattrs, rn->xattr_inline_inodes,
		rn->xattr_block_inodes);
	if (rn->v.acl)
		fprintf(stderr, "  ACLs: %lu set or removed, %lu inodes made under a default ACL\n",
			rn->acl_set_ok, rn->acl_inherited);
}

/* ---- the random cases ---- */

static void random_case(const struct cfg *c)
{
	struct run rn;
	char args[200];
	unsigned long nops = (unsigned long)env_u64("O2_MODEL_OPS", 4000);
	/* fsck.ocfs2 of a 1 MiB-cluster volume takes seconds: fewer, longer batches there */
	unsigned long batch = (unsigned long)env_u64("O2_MODEL_BATCH", c->cs >= MIB ? 400 : 250);
	struct space fresh, end;

	if (batch == 0)
		batch = 300;
	snprintf(args, sizeof(args), "--fs-feature-level=%s -b %u -C %u -J size=%s", c->level,
		 c->bs, c->cs, c->journal);
	run_init(&rn, c->name, c->size, args);
	rn.v.acl = c->acl;
	rn.nops = nops;
	rn.batch_size = batch;
	fprintf(stderr, "[%s] seed 0x%" PRIx64 ", %lu ops in batches of %lu, mkfs %s, %s\n",
		c->name, rn.seed, nops, batch, args, rn.v.dir);
	vol_open(&rn.v);
	fresh = get_space(&rn);
	vol_close(&rn.v);
	run_start(&rn);
	rn.m.check_times = env_u64("O2_MODEL_TIMES", 1) != 0;
	rn.max_file = c->cs >= MIB ? 3 * MIB : 2560 * KIB;
	rn.max_data = 64 * MIB;
	rn.budget_clusters = fresh.free_clusters / 2;
	rn.wbuf = malloc(rn.max_file + 1);
	ck_assert(rn.wbuf != NULL);

	/* steps: random operations; bulk, purge and scatter count once but log each call */
	while (rn.steps < nops) {
		unsigned long end_step = rn.steps + batch < nops ? rn.steps + batch : nops;

		rn.batch++;
		while (rn.steps < end_step) {
			rn.steps++;
			rn.opno++;
			run_op(&rn);
		}
		end_batch(&rn);
		if (rn.trace || getenv("O2_MODEL_VERBOSE"))
			fprintf(stderr, "[%s] batch %u done: %lu ops, %zu inodes, %" PRIu64
				" data bytes, ~%" PRIu64 " clusters, %.1f s\n",
				c->name, rn.batch, rn.opno, rn.m.nall, rn.m.data_bytes,
				model_cluster_estimate(&rn.m), now_s() - rn.t0);
	}
	/* delete everything: nothing may have leaked */
	remove_top(&rn);
	vol_close(&rn.v);
	judge_or_fail(&rn, judge_fsck(&rn.v), "fsck after deleting everything");
	vol_open(&rn.v);
	end = get_space(&rn);
	check_space(&rn, &fresh, &end, false, "after deleting everything, close and reopen");
	vol_close(&rn.v);
	print_summary(&rn, NULL);
	free(rn.wbuf);
	model_free(&rn.m);
	vol_cleanup(&rn.v, false);
}

START_TEST(test_random)
{
	for (size_t i = 0; i < sizeof(random_cfgs) / sizeof(random_cfgs[0]); i++)
		if (!strcmp(g_case, random_cfgs[i].name))
			random_case(&random_cfgs[i]);
}
END_TEST

/* ---- growth: an extent tree of depth >= 2 ---- */

static int count_leaf(const struct o2_extent *x, uint64_t eb, void *arg)
{
	unsigned *n = arg;

	if (x)
		n[0]++;
	else
		n[1]++;
	return 0;
}

static void check_depth(struct run *rn, struct m_inode *in, unsigned min_depth,
			unsigned want_extents, const char *when)
{
	struct o2_inode *x;
	unsigned n[2] = { 0, 0 };
	int r = o2_inode_get(rn->v.fs, in->ino, &x);

	if (r < 0)
		mfail(rn, "%s: o2_inode_get: %d", when, r);
	const struct o2_inode_info *info = o2_inode_info(x);

	r = o2_inode_walk_extents(rn->v.fs, x, count_leaf, n);
	if (r < 0)
		mfail(rn, "%s: o2_inode_walk_extents: %d: %s", when, r, o2_fs_error(rn->v.fs));
	fprintf(stderr, "[%s] %s: depth %u, %u leaf extents, %u extent blocks, %u clusters\n",
		rn->name, when, info->list_depth, n[0], n[1], info->clusters);
	if (info->kind != O2_ID2_EXTENTS || info->list_depth < min_depth)
		mfail(rn, "%s: extent tree depth %u (kind %d), want >= %u", when, info->list_depth,
		     info->kind, min_depth);
	if (want_extents && n[0] != want_extents)
		mfail(rn, "%s: %u leaf extents, want %u", when, n[0], want_extents);
	o2_inode_unref(x);
}

START_TEST(test_extent_depth)
{
	struct run rn;
	struct expect e = { 0 };
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };
	struct space before, after;
	uint64_t ino, cs = 4096;
	unsigned n = 700; /* > 19 * 28 = 532 records: depth 2 at -b 512 */
	uint8_t blk[512];
	int r;

	if (!judge_have_tools()) {
		printf("SKIP\n");
		return;
	}
	run_init(&rn, "extent-depth", 256 * MIB, "-b 512 -C 4096 -J size=4M");
	run_start(&rn);
	before = get_space(&rn);
	r = o2_create(rn.v.fs, rn.m.top->ino, "deep", 4, &ni, &ino);
	check_result(&rn, "create deep", r, &e);
	struct m_inode *in = model_new_inode(&rn.m, M_REG, ino, 0644);

	in->nlink = 1;
	model_add_entry(rn.m.top, "deep", 4, in);
	/*
	 * The first extent starts past a hole: the leftmost records of the
	 * interior nodes must still start at cluster 0 (the kernel's and
	 * libocfs2's path search send a lookup before the first record to
	 * the rightmost leaf otherwise, and read the hole as ending there).
	 */
	for (unsigned i = 0; i < n; i++) {
		uint64_t off = (2 * i + 3) * cs + (i % 7) * 512;

		rn.opno++;
		tick_clock(&rn);
		rng_fill(rn.seed + i, blk, sizeof(blk));
		logop(&rn, "write(deep, off %" PRIu64 ", 512)", off);
		ssize_t w = o2_write(rn.v.fs, ino, off, blk, sizeof(blk));

		if (w != (ssize_t)sizeof(blk))
			mfail(&rn, "write(deep, off %" PRIu64 ", 512) returned %zd: %s", off, w,
			     w < 0 ? o2_fs_error(rn.v.fs) : "");
		model_write(&rn.m, in, off, blk, sizeof(blk));
	}
	rn.batch++;
	check_depth(&rn, in, 2, n, "after 700 separate extents");
	end_batch(&rn);
	check_depth(&rn, in, 2, n, "after reopen");

	/* fill a few holes: neighbouring extents may merge, the data must stay */
	for (unsigned i = 0; i < 60; i++) {
		uint64_t off = (2 * (i * 11 % n) + 4) * cs;

		rn.opno++;
		rng_fill(rn.seed ^ (0x1000 + i), blk, sizeof(blk));
		logop(&rn, "write(deep, off %" PRIu64 ", 512) [hole]", off);
		ssize_t w = o2_write(rn.v.fs, ino, off, blk, sizeof(blk));

		if (w != (ssize_t)sizeof(blk))
			mfail(&rn, "write(deep, off %" PRIu64 ") returned %zd", off, w);
		model_write(&rn.m, in, off, blk, sizeof(blk));
	}
	rn.batch++;
	end_batch(&rn);

	/*
	 * Punch holes through the tree: inside one extent (a record split in
	 * two), across ~30 leaves' worth of records (many steps, leaves and an
	 * interior node emptied), over the leftmost leaf (the leading hole
	 * grows: the leftmost path still starts at 0) and over the rightmost
	 * leaf, each judged like any batch.
	 */
	static const uint64_t holes[][2] = {
		{ (2 * 100 + 3) * 4096 + 700, 100 },
		{ (2 * 150 + 3) * 4096 + 1000, 250 * 2 * 4096 },
		{ 0, (2 * 30 + 3) * 4096 + 5 },
		{ (2 * 680 + 3) * 4096 + 1, 100 * 4096 },
	};

	for (unsigned i = 0; i < sizeof(holes) / sizeof(holes[0]); i++) {
		uint64_t off = holes[i][0], end = off + holes[i][1];

		rn.opno++;
		tick_clock(&rn);
		logop(&rn, "punch hole(deep, off %" PRIu64 ", len %" PRIu64 ")", off, holes[i][1]);
		r = o2_fallocate(rn.v.fs, ino, O2_FALLOC_PUNCH_HOLE | O2_FALLOC_KEEP_SIZE, off, holes[i][1]);
		check_result(&rn, rn.log[rn.opno % LOG_LINES], r, &e);
		if (end > in->size)
			end = in->size;
		memset(in->data + off, 0, (size_t)(end - off));
		model_touch_mc(&rn.m, in);
		rn.batch++;
		end_batch(&rn);
	}

	/* shrink through the tree: half, a few clusters, nothing */
	static const uint64_t sizes[] = { 350 * 2 * 4096 + 100, 12 * 4096, 0 };

	for (unsigned i = 0; i < 3; i++) {
		rn.opno++;
		logop(&rn, "truncate(deep, %" PRIu64 ")", sizes[i]);
		r = o2_truncate(rn.v.fs, ino, sizes[i]);
		check_result(&rn, rn.log[rn.opno % LOG_LINES], r, &e);
		model_truncate(&rn.m, in, sizes[i]);
		rn.batch++;
		end_batch(&rn);
	}
	check_depth(&rn, in, 0, 0, "after truncating to 0");
	/* all the extent blocks and clusters came back */
	remove_top(&rn);
	vol_close(&rn.v);
	judge_or_fail(&rn, judge_fsck(&rn.v), "fsck after removing the file");
	vol_open(&rn.v);
	after = get_space(&rn);
	(void)before;
	{
		/* compare with the volume before the file (TOP still existed then) */
		struct space b2 = before;

		b2.ia_used--; /* TOP was counted before; it is gone now */
		check_space(&rn, &b2, &after, false, "after removing the deep file");
	}
	vol_close(&rn.v);
	print_summary(&rn, NULL);
	model_free(&rn.m);
	vol_cleanup(&rn.v, false);
}
END_TEST

/* ---- growth: a directory of 100,000 entries ---- */

/*
 * The judges for the big directory: rdump of 100,000 files costs minutes
 * (debugfs.ocfs2 writes, chowns and stamps each), so debugfs "ls" checks
 * the names and inode numbers instead; fscore's read-back, fsck and a stat
 * sample as usual.
 */
static void big_dir_judge(struct run *rn, struct m_inode *dir)
{
	double t[6];

	t[0] = now_s();
	judge_or_fail(rn, judge_fscore(&rn->v, &rn->m), "fscore read-back before close");
	vol_close(&rn->v);
	t[1] = now_s();
	judge_or_fail(rn, judge_fsck(&rn->v), "fsck after close");
	t[2] = now_s();
	judge_or_fail(rn, judge_debugfs_ls(&rn->v, dir, "/TOP/big"), "debugfs ls");
	t[3] = now_s();
	vol_open(&rn->v);
	judge_or_fail(rn, judge_fscore(&rn->v, &rn->m), "fscore read-back after reopen");
	t[4] = now_s();
	judge_or_fail(rn, judge_debugfs_stat(&rn->v, &rn->m, &rn->r, 20), "debugfs stat");
	t[5] = now_s();
	fprintf(stderr,
		"[big-dir] %zu entries judged: read-back and close %.1f s, fsck %.1f s, debugfs ls "
		"%.1f s, read-back %.1f s, stat %.1f s\n",
		dir->nents, t[1] - t[0], t[2] - t[1], t[3] - t[2], t[4] - t[3], t[5] - t[4]);
}

START_TEST(test_big_dir)
{
	struct run rn;
	struct expect e = { 0 };
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };
	unsigned n = (unsigned)env_u64("O2_MODEL_DIR_ENTRIES", 100000);
	uint64_t dino, ino;
	struct m_inode *dir;
	char name[64];
	double t, t_create, t_check, t_unlink;
	int r;

	if (!judge_have_tools()) {
		printf("SKIP\n");
		return;
	}
	run_init(&rn, "big-dir", 1 * GIB, "--fs-feature-level=default -b 4096 -C 4096 -J size=16M");
	run_start(&rn);
	r = o2_mkdir(rn.v.fs, rn.m.top->ino, "big", 3, &(struct o2_new_inode){ .mode = S_IFDIR | 0755 },
		     &dino);
	check_result(&rn, "mkdir big", r, &e);
	dir = model_new_inode(&rn.m, M_DIR, dino, 0755);
	dir->nlink = 2;
	model_add_entry(rn.m.top, "big", 3, dir);
	rn.m.top->nlink++;

	t = now_s();
	for (unsigned i = 0; i < n; i++) {
		size_t len = (size_t)snprintf(name, sizeof(name), "entry-%06u-%x", i,
					      (unsigned)(rng_next(&rn.r) & 0xffff));

		rn.opno++;
		if (i % 64 == 0)
			tick_clock(&rn);
		if (rn.trace)
			logop(&rn, "create(big, \"%s\")", name);
		else
			snprintf(rn.log[rn.opno % LOG_LINES], sizeof(rn.log[0]),
				 "#%lu create(big, \"%s\")", rn.opno, name);
		r = o2_create(rn.v.fs, dino, name, len, &ni, &ino);
		if (r < 0)
			mfail(&rn, "create(big, \"%s\") [entry %u]: %d: %s", name, i, r,
			     o2_fs_error(rn.v.fs));
		struct m_inode *in = model_new_inode(&rn.m, M_REG, ino, 0644);

		in->nlink = 1;
		model_add_entry(dir, name, len, in);
		if ((i + 1) % 20000 == 0)
			fprintf(stderr, "[big-dir] %u entries, %.1f s\n", i + 1, now_s() - t);
	}
	t_create = now_s() - t;
	{
		struct o2_inode *x;

		r = o2_inode_get(rn.v.fs, dino, &x);
		ck_assert_int_eq(r, 0);
		if (n >= 1000 && !(o2_inode_info(x)->dyn_features & O2_INODE_DYN_INDEXED_DIR))
			mfail(&rn, "/TOP/big with %u entries is not indexed (dyn_features 0x%x)", n,
			     o2_inode_info(x)->dyn_features);
		o2_inode_unref(x);
	}
	t = now_s();
	rn.batch++;
	big_dir_judge(&rn, dir);
	t_check = now_s() - t;

	/* remove every other entry, then judge again */
	t = now_s();
	{
		size_t k = 0;

		for (size_t i = 0; i < dir->nents; i++) {
			struct m_dirent de = dir->ents[i];

			if (i % 2 == 0) {
				rn.opno++;
				snprintf(rn.log[rn.opno % LOG_LINES], sizeof(rn.log[0]),
					 "#%lu unlink(big, \"%s\")", rn.opno, de.name);
				r = o2_unlink(rn.v.fs, dino, de.name, de.len);
				if (r < 0)
					mfail(&rn, "unlink(big, \"%s\"): %d: %s", de.name, r,
					     o2_fs_error(rn.v.fs));
				free(de.name);
				de.ino->nlink = 0;
				model_forget(&rn.m, de.ino);
			} else {
				dir->ents[k++] = de;
			}
		}
		dir->nents = k;
	}
	t_unlink = now_s() - t;
	rn.batch++;
	big_dir_judge(&rn, dir);
	{
		char extra[256];

		snprintf(extra, sizeof(extra),
			 "%u entries: create %.1f s, judge (read-back, fsck, ls) %.1f s, unlink half "
			 "%.1f s",
			 n, t_create, t_check, t_unlink);
		vol_close(&rn.v);
		print_summary(&rn, extra);
	}
	model_free(&rn.m);
	vol_cleanup(&rn.v, false);
}
END_TEST

/* ---- growth: a 5 GiB sparse file on a 1 GiB volume ---- */

struct sparse_write {
	uint64_t off, len, seed;
};

/* Expected bytes of [off, off+len) of the sparse file into buf. */
static void sparse_expect(const struct sparse_write *w, unsigned nw, uint64_t size, uint64_t off,
			  uint8_t *buf, size_t len, uint8_t *tmp)
{
	memset(buf, 0, len);
	for (unsigned i = 0; i < nw; i++) {
		uint64_t a = w[i].off, b = w[i].off + w[i].len;

		if (b > size)
			b = size;
		if (b <= off || a >= off + len || a >= b)
			continue;
		rng_fill(w[i].seed, tmp, w[i].len);
		uint64_t s = a > off ? a : off, t = b < off + len ? b : off + len;

		memcpy(buf + (s - off), tmp + (s - a), t - s);
	}
}

static void sparse_verify(struct run *rn, uint64_t ino, const struct sparse_write *w, unsigned nw,
			  uint64_t size, const char *when)
{
	struct o2_inode *x;
	size_t chunk = 4 * MIB;
	uint8_t *got = malloc(chunk), *want = malloc(chunk), *tmp = malloc(64 * KIB);
	int r = o2_inode_get(rn->v.fs, ino, &x);

	ck_assert(got && want && tmp);
	if (r < 0)
		mfail(rn, "%s: o2_inode_get: %d", when, r);
	if (o2_inode_info(x)->size != size)
		mfail(rn, "%s: size %" PRIu64 ", want %" PRIu64, when, o2_inode_info(x)->size, size);
	for (uint64_t off = 0; off < size; off += chunk) {
		size_t len = size - off < chunk ? (size_t)(size - off) : chunk;
		ssize_t n = o2_inode_read(rn->v.fs, x, off, got, len);

		if (n != (ssize_t)len)
			mfail(rn, "%s: o2_inode_read(off %" PRIu64 ", %zu) = %zd", when, off, len, n);
		sparse_expect(w, nw, size, off, want, len, tmp);
		if (memcmp(got, want, len)) {
			size_t k = 0;

			while (got[k] == want[k])
				k++;
			mfail(rn, "%s: data differs at byte %" PRIu64 " (fscore 0x%02x, want 0x%02x)",
			     when, off + k, got[k], want[k]);
		}
	}
	o2_inode_unref(x);
	free(got);
	free(want);
	free(tmp);
}

/* debugfs.ocfs2 cat of the sparse file, streamed (the volume must be closed). */
static void sparse_cat(struct run *rn, const struct sparse_write *w, unsigned nw, uint64_t size,
		       const char *when)
{
	size_t chunk = 4 * MIB;
	uint8_t *got = malloc(chunk), *want = malloc(chunk), *tmp = malloc(64 * KIB);
	char cmd[600];
	FILE *p;
	uint64_t off = 0;

	ck_assert(got && want && tmp);

	snprintf(cmd, sizeof(cmd),
		 "PATH=\"$PATH:/usr/sbin:/sbin\" debugfs.ocfs2 -R 'cat /TOP/sparse' %s 2>/dev/null",
		 rn->v.image);
	p = popen(cmd, "r");
	ck_assert(p != NULL);
	for (;;) {
		size_t len = fread(got, 1, chunk, p);

		if (len == 0)
			break;
		if (off + len > size)
			mfail(rn, "%s: debugfs cat gave more than %" PRIu64 " bytes", when, size);
		sparse_expect(w, nw, size, off, want, len, tmp);
		if (memcmp(got, want, len)) {
			size_t k = 0;

			while (got[k] == want[k])
				k++;
			mfail(rn, "%s: debugfs cat differs at byte %" PRIu64 " (0x%02x, want 0x%02x)",
			     when, off + k, got[k], want[k]);
		}
		off += len;
	}
	pclose(p);
	if (off != size)
		mfail(rn, "%s: debugfs cat gave %" PRIu64 " bytes, want %" PRIu64, when, off, size);
	free(got);
	free(want);
	free(tmp);
}

START_TEST(test_sparse)
{
	struct run rn;
	struct expect e = { 0 };
	struct o2_new_inode ni = { .mode = S_IFREG | 0640 };
	static struct sparse_write w[] = {
		{ 0, 4096, 1 },
		{ 1 * GIB + 123, 8192, 2 },
		{ 2 * GIB + 512 * MIB, 4096, 3 },
		{ 4 * GIB - 100, 200, 4 },	  /* across the 32-bit byte boundary */
		{ 16 * GIB / 4 + 4096 * 3, 5000, 5 },
		{ 5 * GIB - 4096, 4096, 6 },	  /* the last block: size 5 GiB */
	};
	unsigned nw = sizeof(w) / sizeof(w[0]);
	uint8_t buf[8192];
	uint64_t ino, size = 0;
	struct space s0, s1;
	double t0;
	int r;

	if (!judge_have_tools()) {
		printf("SKIP\n");
		return;
	}
	run_init(&rn, "sparse-5g", 1 * GIB, "--fs-feature-level=default -b 4096 -C 4096 -J size=4M");
	run_start(&rn);
	s0 = get_space(&rn);
	r = o2_create(rn.v.fs, rn.m.top->ino, "sparse", 6, &ni, &ino);
	check_result(&rn, "create sparse", r, &e);
	for (unsigned i = 0; i < nw; i++) {
		rn.opno++;
		rng_fill(w[i].seed, buf, w[i].len);
		logop(&rn, "write(sparse, off %" PRIu64 ", %" PRIu64 ")", w[i].off, w[i].len);
		ssize_t n = o2_write(rn.v.fs, ino, w[i].off, buf, w[i].len);

		if (n != (ssize_t)w[i].len)
			mfail(&rn, "write(sparse, off %" PRIu64 ", %" PRIu64 ") = %zd: %s", w[i].off,
			     w[i].len, n, n < 0 ? o2_fs_error(rn.v.fs) : "");
		if (w[i].off + w[i].len > size)
			size = w[i].off + w[i].len;
	}
	s1 = get_space(&rn);
	fprintf(stderr, "[sparse-5g] size %" PRIu64 ", free clusters %" PRIu64 " -> %" PRIu64 "\n",
		size, s0.free_clusters, s1.free_clusters);
	if (s0.free_clusters - s1.free_clusters > 64)
		mfail(&rn, "a sparse file with 6 small writes took %" PRIu64 " clusters",
		     s0.free_clusters - s1.free_clusters);
	t0 = now_s();
	sparse_verify(&rn, ino, w, nw, size, "open, after the writes");
	fprintf(stderr, "[sparse-5g] fscore read-back of %" PRIu64 " bytes: %.1f s\n", size,
		now_s() - t0);
	vol_close(&rn.v);
	judge_or_fail(&rn, judge_fsck(&rn.v), "fsck");
	t0 = now_s();
	sparse_cat(&rn, w, nw, size, "debugfs cat after close");
	fprintf(stderr, "[sparse-5g] debugfs cat: %.1f s\n", now_s() - t0);
	vol_open(&rn.v);
	sparse_verify(&rn, ino, w, nw, size, "after reopen");

	/* down to 3 GiB, then up to 6 GiB: a hole to the end */
	rn.opno++;
	logop(&rn, "truncate(sparse, 3 GiB)");
	check_result(&rn, "truncate(sparse, 3 GiB)", o2_truncate(rn.v.fs, ino, 3 * GIB), &e);
	size = 3 * GIB;
	rn.opno++;
	logop(&rn, "truncate(sparse, 6 GiB)");
	check_result(&rn, "truncate(sparse, 6 GiB)", o2_truncate(rn.v.fs, ino, 6 * GIB), &e);
	/* writes past 3 GiB were cut away */
	for (unsigned i = 0; i < nw; i++)
		if (w[i].off >= 3 * GIB)
			w[i].len = 0;
	size = 6 * GIB;
	sparse_verify(&rn, ino, w, nw, size, "after truncate down and up");
	vol_close(&rn.v);
	judge_or_fail(&rn, judge_fsck(&rn.v), "fsck after truncating");
	sparse_cat(&rn, w, nw, size, "debugfs cat after truncate down and up");
	vol_open(&rn.v);
	sparse_verify(&rn, ino, w, nw, size, "after truncate down and up, reopened");
	rn.opno++;
	check_result(&rn, "unlink sparse", o2_unlink(rn.v.fs, rn.m.top->ino, "sparse", 6), &e);
	vol_close(&rn.v);
	judge_or_fail(&rn, judge_fsck(&rn.v), "fsck after unlinking");
	vol_open(&rn.v);
	s1 = get_space(&rn);
	check_space(&rn, &s0, &s1, false, "after unlinking the sparse file");
	vol_close(&rn.v);
	print_summary(&rn, NULL);
	model_free(&rn.m);
	vol_cleanup(&rn.v, false);
}
END_TEST

/* ---- growth: fill to -ENOSPC, then empty ---- */

/* Success or a clean -ENOSPC: the call changed nothing and the volume stays writable. */
static void expect_ok_or_enospc(struct run *rn, const char *what, long r)
{
	if (r < 0 && r != -ENOSPC)
		mfail(rn, "%s on a full volume: %ld (%s), want success or -ENOSPC", what, r,
		     o2_fs_error(rn->v.fs));
	if (o2_fs_readonly_reason(rn->v.fs))
		mfail(rn, "%s on a full volume: %ld, and the volume turned read-only: %s", what, r,
		      o2_fs_error(rn->v.fs));
}

START_TEST(test_enospc)
{
	struct run rn;
	struct space fresh, full, end;
	uint8_t *buf = malloc(MIB);
	unsigned nfiles = 0, nempty = 0;
	bool data_full = false;
	struct m_inode *first = NULL; /* a file with data, rewritten once the volume is full */
	char name[64];
	int r;

	if (!judge_have_tools()) {
		printf("SKIP\n");
		return;
	}
	ck_assert(buf != NULL);
	run_init(&rn, "enospc", 128 * MIB, "--fs-feature-level=default -b 4096 -C 4096 -J size=4M");
	vol_open(&rn.v);
	fresh = get_space(&rn);
	vol_close(&rn.v);
	run_start(&rn);
	rn.max_data = 1ull << 40;

	/* data: 1 MiB writes into files of 8 MiB until the space runs out */
	while (!data_full) {
		uint64_t ino;
		size_t len = (size_t)snprintf(name, sizeof(name), "data%03u", nfiles);

		rn.opno++;
		logop(&rn, "create(TOP, %s)", name);
		r = o2_create(rn.v.fs, rn.m.top->ino, name, len,
			      &(struct o2_new_inode){ .mode = S_IFREG | 0600 }, &ino);
		expect_ok_or_enospc(&rn, rn.log[rn.opno % LOG_LINES], r);
		if (r < 0)
			break;
		struct m_inode *in = model_new_inode(&rn.m, M_REG, ino, 0600);

		in->nlink = 1;
		model_add_entry(rn.m.top, name, len, in);
		nfiles++;
		if (!first)
			first = in;
		for (uint64_t off = 0; off < 8 * MIB;) {
			size_t want = MIB;
			ssize_t n;

			rn.opno++;
			rng_fill(rn.seed ^ rn.opno, buf, want);
			logop(&rn, "write(%s, off %" PRIu64 ", %zu)", name, off, want);
			n = o2_write(rn.v.fs, ino, off, buf, want);
			expect_ok_or_enospc(&rn, rn.log[rn.opno % LOG_LINES], n);
			if (n > 0) {
				model_write(&rn.m, in, off, buf, (size_t)n);
				off += (uint64_t)n;
			}
			if (n != (ssize_t)want) {
				/* squeeze: smaller writes until even a block fails */
				for (size_t small = 64 * KIB; small >= 4096; small /= 4) {
					for (;;) {
						rn.opno++;
						rng_fill(rn.seed ^ rn.opno, buf, small);
						logop(&rn, "write(%s, off %" PRIu64 ", %zu) [squeeze]",
						      name, off, small);
						n = o2_write(rn.v.fs, ino, off, buf, small);
						expect_ok_or_enospc(&rn, rn.log[rn.opno % LOG_LINES],
								    n);
						if (n > 0) {
							model_write(&rn.m, in, off, buf, (size_t)n);
							off += (uint64_t)n;
						}
						if (n != (ssize_t)small)
							break;
					}
				}
				data_full = true;
				break;
			}
		}
	}
	full = get_space(&rn);
	fprintf(stderr, "[enospc] data full after %u files, %" PRIu64 " bytes: free clusters %" PRIu64
		" of %" PRIu64 "\n",
		nfiles, rn.m.data_bytes, full.free_clusters, rn.total_clusters);
	if (full.free_clusters > rn.total_clusters / 20) {
		/* was statfs wrong, or the allocator?  The bitmap after a clean close tells. */
		char *a = space_str(&full), *b;
		struct space after;

		vol_close(&rn.v);
		vol_open(&rn.v);
		after = get_space(&rn);
		b = space_str(&after);
		mfail(&rn, "-ENOSPC for a 4 KiB write with %" PRIu64 " of %" PRIu64
			   " clusters free:\n  at -ENOSPC: %s\n  after close and reopen: %s",
		      full.free_clusters, rn.total_clusters, a, b);
	}

	/* inodes: empty files until that fails too (a full volume cannot grow its allocators) */
	for (;;) {
		uint64_t ino;
		size_t len = (size_t)snprintf(name, sizeof(name), "e%05u", nempty);

		rn.opno++;
		logop(&rn, "create(TOP, %s) [empty]", name);
		r = o2_create(rn.v.fs, rn.m.top->ino, name, len,
			      &(struct o2_new_inode){ .mode = S_IFREG | 0644 }, &ino);
		expect_ok_or_enospc(&rn, rn.log[rn.opno % LOG_LINES], r);
		if (r < 0)
			break;
		struct m_inode *in = model_new_inode(&rn.m, M_REG, ino, 0644);

		in->nlink = 1;
		model_add_entry(rn.m.top, name, len, in);
		if (++nempty > 200000)
			mfail(&rn, "200000 empty files on a full 128 MiB volume and no -ENOSPC");
	}
	/* a few more calls on the full volume: each succeeds or says -ENOSPC */
	{
		uint64_t ino;

		rn.opno++;
		logop(&rn, "mkdir(TOP, full-dir)");
		r = o2_mkdir(rn.v.fs, rn.m.top->ino, "full-dir", 8,
			     &(struct o2_new_inode){ .mode = S_IFDIR | 0755 }, &ino);
		expect_ok_or_enospc(&rn, "mkdir on a full volume", r);
		if (r == 0) {
			struct m_inode *in = model_new_inode(&rn.m, M_DIR, ino, 0755);

			in->nlink = 2;
			model_add_entry(rn.m.top, "full-dir", 8, in);
			rn.m.top->nlink++;
		}
		rn.opno++;
		logop(&rn, "symlink(TOP, full-link) 1500 bytes");
		char target[1501];

		memset(target, 't', 1500);
		target[1500] = '\0';
		r = o2_symlink(rn.v.fs, rn.m.top->ino, "full-link", 9, target,
			       &(struct o2_new_inode){ .mode = S_IFLNK | 0777 }, &ino);
		expect_ok_or_enospc(&rn, "long symlink on a full volume", r);
		if (r == 0) {
			struct m_inode *in = model_new_inode(&rn.m, M_LNK, ino, 0777);

			in->nlink = 1;
			in->target = strdup(target);
			model_add_entry(rn.m.top, "full-link", 9, in);
		}
	}
	/* still writable: allocated space takes new data */
	if (first && first->size) {
		size_t want = first->size < MIB ? (size_t)first->size : MIB;
		ssize_t n;

		rn.opno++;
		rng_fill(rn.seed ^ rn.opno, buf, want);
		logop(&rn, "write(data000, off 0, %zu) [allocated, full volume]", want);
		n = o2_write(rn.v.fs, first->ino, 0, buf, want);
		if (n != (ssize_t)want)
			mfail(&rn, "a write into allocated space on the full volume: %zd (%s)", n,
			      o2_fs_error(rn.v.fs));
		else
			model_write(&rn.m, first, 0, buf, want);
	}
	fprintf(stderr, "[enospc] inodes full after %u empty files\n", nempty);
	rn.batch++;
	end_batch(&rn);

	/*
	 * Every kind of operation on the full volume, at random: each
	 * succeeds or says -ENOSPC having changed nothing (the model, which
	 * a failed call leaves alone, is judged against the volume), and the
	 * volume stays writable.  Deletions among them make room now and
	 * then, which the next calls fill again.
	 */
	rn.max_file = 2560 * KIB;
	rn.wbuf = malloc(rn.max_file + 1);
	ck_assert(rn.wbuf != NULL);
	rn.full = true;
	for (unsigned i = 0; i < 1500; i++) {
		rn.steps++;
		rn.opno++;
		run_op(&rn);
	}
	rn.full = false;
	fprintf(stderr, "[enospc] 1500 random operations on the full volume: %lu said -ENOSPC\n",
		rn.full_enospc);
	if (rn.full_enospc < 20)
		mfail(&rn, "only %lu of 1500 operations on the full volume said -ENOSPC",
		      rn.full_enospc);
	rn.batch++;
	end_batch(&rn);

	/* empty it all, then the space must be exactly the fresh volume's */
	remove_top(&rn);
	vol_close(&rn.v);
	judge_or_fail(&rn, judge_fsck(&rn.v), "fsck after deleting everything");
	vol_open(&rn.v);
	end = get_space(&rn);
	check_space(&rn, &fresh, &end, true, "full volume emptied, closed and reopened");
	vol_close(&rn.v);
	print_summary(&rn, NULL);
	free(rn.wbuf);
	free(buf);
	model_free(&rn.m);
	vol_cleanup(&rn.v, false);
}
END_TEST

/* ---- an orphan left by a crash ---- */

/*
 * Files unlinked while open, then a crash (a copy of the image taken after
 * o2_fs_sync, the volume still open): the next read-write open must replay
 * the journal and free the orphans, giving back their inodes and clusters,
 * and leave a volume fsck.ocfs2 finds clean.
 */
START_TEST(test_orphan_crash)
{
	struct run rn;
	struct expect e = { 0 };
	struct space before, after;
	uint64_t inos[3];
	uint8_t *buf = malloc(256 * KIB);
	char crash[sizeof(rn.v.image)], cmd[900], *msg;
	struct vol cv;

	ck_assert(buf != NULL);
	run_init(&rn, "orphan-crash", 128 * MIB, "--fs-feature-level=default -b 4096 -C 4096 -J size=4M");
	run_start(&rn);
	before = get_space(&rn);
	for (unsigned i = 0; i < 3; i++) {
		char name[8];
		size_t len = (size_t)snprintf(name, sizeof(name), "o%u", i);

		rn.opno++;
		tick_clock(&rn);
		logop(&rn, "create, write %u KiB, open_ref, unlink %s", 64u << i, name);
		check_result(&rn, "create", o2_create(rn.v.fs, rn.m.top->ino, name, len,
						       &(struct o2_new_inode){ .mode = S_IFREG | 0600 },
						       &inos[i]), &e);
		rng_fill(rn.seed + i, buf, (64u << i) * KIB);
		if (o2_write(rn.v.fs, inos[i], 0, buf, (64u << i) * KIB) != (ssize_t)((64u << i) * KIB))
			mfail(&rn, "write to %s failed", name);
		check_result(&rn, "open_ref", o2_inode_open_ref(rn.v.fs, inos[i]), &e);
		check_result(&rn, "unlink", o2_unlink(rn.v.fs, rn.m.top->ino, name, len), &e);
	}
	check_result(&rn, "o2_fs_sync", o2_fs_sync(rn.v.fs), &e);
	/* the crash: the disk as it is now, journal dirty, orphans in the orphan dir */
	snprintf(crash, sizeof(crash), "%.*s/crash.img", (int)sizeof(crash) - 11, rn.v.dir);
	snprintf(cmd, sizeof(cmd), "cp --sparse=always '%s' '%s'", rn.v.image, crash);
	ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
	{
		/* a real crash image: the journal still marked in use */
		char *out;

		snprintf(cmd, sizeof(cmd),
			 "PATH=\"$PATH:/usr/sbin:/sbin\" debugfs.ocfs2 -R 'stat //journal:0000' '%s'",
			 crash);
		judge_run(cmd, &out);
		if (!strstr(out, "Journal Flags: Dirty"))
			mfail(&rn, "the crash copy's journal is not marked dirty:\n%s", out);
		free(out);
	}
	for (unsigned i = 0; i < 3; i++)
		check_result(&rn, "close_ref", o2_inode_close_ref(rn.v.fs, inos[i]), &e);
	vol_close(&rn.v);

	/* the crashed copy: open read-write (replay, orphan recovery), then judge */
	cv = rn.v;
	cv.dev = NULL;
	cv.fs = NULL;
	memcpy(cv.image, crash, sizeof(cv.image));
	rn.v = cv;
	vol_open(&rn.v);
	for (unsigned i = 0; i < 3; i++)
		verify_gone(&rn, inos[i], "orphan after crash recovery");
	vol_close(&rn.v);
	msg = judge_fsck(&rn.v);
	judge_or_fail(&rn, msg, "fsck of the recovered crash image");
	/* freed clusters may pass through the truncate log: count after a clean close */
	vol_open(&rn.v);
	after = get_space(&rn);
	check_space(&rn, &before, &after, false, "orphans freed by recovery, closed and reopened");
	vol_close(&rn.v);
	print_summary(&rn, NULL);
	free(buf);
	model_free(&rn.m);
	vol_cleanup(&rn.v, false);
}
END_TEST

/* ---- main ---- */

static void usage(void)
{
	fprintf(stderr, "usage: test_model CASE\ncases:");
	for (size_t i = 0; i < sizeof(random_cfgs) / sizeof(random_cfgs[0]); i++)
		fprintf(stderr, " %s", random_cfgs[i].name);
	fprintf(stderr, " extent-depth big-dir sparse-5g enospc orphan-crash\n");
}

int main(int argc, char **argv)
{
	test_env_init();
	SRunner *sr;
	Suite *s;
	TCase *tc;
	int failed;
	bool found = false;

	if (argc != 2) {
		usage();
		return 2;
	}
	g_case = argv[1];
	if (!judge_have_tools()) {
		printf("SKIP: ocfs2-tools (mkfs.ocfs2, fsck.ocfs2, debugfs.ocfs2) are not installed\n");
		return SKIP_CODE;
	}
	s = suite_create("model");
	tc = tcase_create(g_case);
	tcase_set_timeout(tc, 3600);
	for (size_t i = 0; i < sizeof(random_cfgs) / sizeof(random_cfgs[0]); i++)
		if (!strcmp(g_case, random_cfgs[i].name)) {
			tcase_add_test(tc, test_random);
			found = true;
		}
	if (!strcmp(g_case, "extent-depth")) {
		tcase_add_test(tc, test_extent_depth);
		found = true;
	} else if (!strcmp(g_case, "big-dir")) {
		tcase_add_test(tc, test_big_dir);
		found = true;
	} else if (!strcmp(g_case, "sparse-5g")) {
		tcase_add_test(tc, test_sparse);
		found = true;
	} else if (!strcmp(g_case, "enospc")) {
		tcase_add_test(tc, test_enospc);
		found = true;
	} else if (!strcmp(g_case, "orphan-crash")) {
		tcase_add_test(tc, test_orphan_crash);
		found = true;
	}
	if (!found) {
		usage();
		return 2;
	}
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
