/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_ops: sequences of write operations must never break the volume.
 *
 * Input byte 0 picks the volume (fz_volume: made once per process by
 * fscore's mkfs) and the open options (a tiny metadata cache or the default
 * one); the rest is decoded into up to MAX_OPS operations, each an opcode
 * byte and its arguments: create, mkdir, write, truncate, rename (plain,
 * noreplace, exchange), unlink, rmdir, link, symlink, fallocate, setattr,
 * open/close references (unlink while open makes orphans), many creates in
 * one directory (inline -> block -> indexed directories), sync, tick, a
 * close-and-reopen, a crash point (a copy of the device as it is now), and
 * setting and removing extended attributes (any type, invalid ones too;
 * names from a small pool or from the input, empty, long or with high
 * bytes; flags; values from empty to past 64 KiB).  Inodes and directories
 * are named by index into the ones made so far.  The xattr opcodes come
 * after the older ones, so inputs made before them decode as they did
 * (but for opcode bytes of 18 and up).
 *
 * Findings (abort):
 *   - an operation fails with -EUCLEAN, -EIO or -EROFS, or an error the API
 *     does not list (our own output rejected by our own checks);
 *   - o2_fs_close fails, or after it a read-only open, o2_fs_walk, or a
 *     second read-write open and close fail;
 *   - the content of the first regular file created differs from a model
 *     of it (writes, truncates, fallocate within its first 256 KiB);
 *   - an xattr call fails other than as the API says for its arguments
 *     (-EEXIST/-ENODATA only where the model agrees, -ENOSPC, and the
 *     argument errors exactly where expected), or after a close the
 *     attributes of an inode differ from a model of them (values, count);
 *   - the crash copy cannot be recovered by a read-write open (replay) or
 *     then fails the walk.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

#define MAX_OPS 48
#define MAX_INODES 64
#define MAX_CREATES 400
#define MODEL_CAP (256u << 10)
#define MAX_IO (64u << 10)
#define XM_MAX 64		/* attributes the xattr model follows */
#define XV_LIT 32		/* value bytes taken from the input */
#define XV_BUF (O2_XATTR_VALUE_MAX + 512)

enum op {
	OP_CREATE,
	OP_MKDIR,
	OP_WRITE,
	OP_TRUNCATE,
	OP_RENAME,
	OP_UNLINK,
	OP_RMDIR,
	OP_LINK,
	OP_SYMLINK,
	OP_FALLOCATE,
	OP_SETATTR,
	OP_REF,
	OP_MANY,
	OP_SYNC,
	OP_TICK,
	OP_REMOUNT,
	OP_CRASH,
	OP_WRITE2, /* writes are the most useful: a second opcode for them */
	OP_SETXATTR,
	OP_RMXATTR,
	OP_SETXATTR2,
	OP_REFLINK,
	OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
	"create", "mkdir", "write", "truncate", "rename", "unlink", "rmdir", "link", "symlink",
	"fallocate", "setattr", "ref", "many", "sync", "tick", "remount", "crash", "write",
	"setxattr", "removexattr", "setxattr", "reflink",
};

/* A value: lit[0..nlit), then bytes made from pat (regenerated to compare). */
struct xval {
	uint32_t size;
	uint8_t pat, nlit;
	uint8_t lit[XV_LIT];
};

/* One attribute the model expects on inode ino of generation gen. */
struct xattr_model {
	uint64_t ino;
	uint32_t gen;
	uint8_t type, name_len;
	char name[O2_XATTR_NAME_MAX];
	struct xval v;
};

/* An inode whose attributes were changed: the model knows all of them. */
struct xattr_inode {
	uint64_t ino;
	uint32_t gen;
};

struct state {
	const struct fz_volume *vol;
	struct fz_dev *fzdev;
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	struct o2_open_opts opts;
	uint64_t clock;
	uint64_t ino[MAX_INODES];
	bool is_dir[MAX_INODES];
	unsigned n;
	uint64_t refs[16];
	unsigned nrefs;
	unsigned creates;
	uint8_t *snap; /* the last crash point */
	uint8_t *io;
	/* the model of one regular file */
	uint64_t model_ino;
	uint32_t model_gen;
	bool model_valid;
	uint64_t model_size;
	uint8_t *model;
	/* the model of extended attributes */
	bool has_xattr; /* the volume has the feature */
	bool sparse;    /* the volume has the feature (else no hole punching, as the kernel) */
	bool xm_valid;	/* false once more than the model holds were made */
	struct xattr_model xm[XM_MAX];
	unsigned nxm;
	struct xattr_inode xi[XM_MAX];
	unsigned nxi;
	uint8_t *xbuf, *xbuf2; /* XV_BUF bytes each */
	unsigned opno;
	const char *opname;
};

/* ---- findings ---- */

static void check(struct state *s, long r, const char *what)
{
	static const int ok[] = { ENOSPC, EEXIST, ENOENT, ENOTDIR, EISDIR, ENOTEMPTY,
				  ENAMETOOLONG, EMLINK, EINVAL, EPERM, EFBIG, EXDEV, EBUSY,
				  ENODEV /* fallocate on a symlink, FIFO...: as fallocate(2) */ };

	fz_debug("op %u %s: %s -> %ld %s", s->opno, s->opname, what, r, r < 0 ? o2_fs_error(s->fs) : "");
	if (r >= 0)
		return;
	/* a full refcount tree, or a volume without them, is refused by design */
	if (r == -EOPNOTSUPP && s->fs && strstr(o2_fs_error(s->fs), "refcount"))
		return;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (r == -ok[i])
			return;
	fz_fail("op %u (%s): %s returned %ld (%s); message: %s", s->opno, s->opname, what, r,
		strerror((int)-r), s->fs ? o2_fs_error(s->fs) : "");
}

static void open_rw(struct state *s, struct o2_blockdev *dev, struct o2_fs **ret, const char *why)
{
	char err[512] = "";
	int r = o2_fs_open_opts(dev, &s->opts, ret, err, sizeof(err));

	if (r < 0)
		fz_fail("op %u: read-write open (%s) failed: %d %s", s->opno, why, r, err);
}

/* ---- the xattr model ---- */

static void xval_fill(const struct xval *v, uint8_t *buf)
{
	for (uint32_t i = 0; i < v->size; i++)
		buf[i] = i < v->nlit ? v->lit[i] : (uint8_t)(v->pat + i * 13 + (i >> 8));
}

/* Whether ino is in use on fs, and its generation. */
static bool inode_gen(struct o2_fs *fs, uint64_t ino, uint32_t *ret_gen)
{
	struct o2_inode *in;
	bool ok;

	if (o2_inode_get(fs, ino, &in) < 0)
		return false;
	ok = (o2_inode_info(in)->flags & O2_INODE_VALID) != 0;
	*ret_gen = o2_inode_info(in)->generation;
	o2_inode_unref(in);
	return ok;
}

static int count_xattr(const struct o2_xattr *x, void *arg)
{
	(void)x;
	(*(unsigned *)arg)++;
	return 0;
}

/* The attributes of every inode the model follows, as fs (read-only) has them. */
static void xattr_verify(struct state *s, struct o2_fs *fs, const char *why)
{
	if (!s->xm_valid)
		return;
	for (unsigned i = 0; i < s->nxm; i++) {
		const struct xattr_model *m = &s->xm[i];
		uint32_t gen;

		if (!inode_gen(fs, m->ino, &gen) || gen != m->gen)
			continue; /* freed since: its attributes went with it */
		ssize_t n = o2_xattr_get(fs, m->ino, m->type, m->name, m->name_len, NULL, 0);
		if (n != (ssize_t)m->v.size)
			fz_fail("xattr model (%s): inode %llu type %u name %.*s: size %zd, expected "
				"%u (%s)", why, (unsigned long long)m->ino, m->type, m->name_len,
				m->name, n, m->v.size, o2_fs_error(fs));
		if (!n)
			continue;
		n = o2_xattr_get(fs, m->ino, m->type, m->name, m->name_len, s->xbuf, m->v.size);
		if (n != (ssize_t)m->v.size)
			fz_fail("xattr model (%s): inode %llu: reading %.*s gave %zd of %u bytes (%s)",
				why, (unsigned long long)m->ino, m->name_len, m->name, n, m->v.size,
				o2_fs_error(fs));
		xval_fill(&m->v, s->xbuf2);
		if (memcmp(s->xbuf, s->xbuf2, m->v.size))
			fz_fail("xattr model (%s): inode %llu: the value of %.*s (%u bytes) differs",
				why, (unsigned long long)m->ino, m->name_len, m->name, m->v.size);
	}
	for (unsigned i = 0; i < s->nxi; i++) {
		const struct xattr_inode *xi = &s->xi[i];
		struct o2_inode *in;
		unsigned want = 0, have = 0;
		uint32_t gen;

		if (!inode_gen(fs, xi->ino, &gen) || gen != xi->gen)
			continue;
		for (unsigned k = 0; k < s->nxm; k++)
			want += s->xm[k].ino == xi->ino && s->xm[k].gen == xi->gen;
		if (o2_inode_get(fs, xi->ino, &in) < 0)
			fz_fail("xattr model (%s): inode %llu cannot be read: %s", why,
				(unsigned long long)xi->ino, o2_fs_error(fs));
		int r = o2_xattr_iterate(fs, in, count_xattr, &have);
		o2_inode_unref(in);
		if (r < 0 || have != want)
			fz_fail("xattr model (%s): inode %llu has %u attributes, expected %u (%d %s)",
				why, (unsigned long long)xi->ino, have, want, r, o2_fs_error(fs));
	}
}

/* A read-only open of dev must work and the walk must accept the volume. */
static void verify(struct state *s, struct o2_blockdev *dev, const char *why, bool full)
{
	struct o2_fs *fs;
	struct o2_walk_stats st;
	char err[512] = "";
	int r = o2_fs_open(dev, O2_OPEN_RDONLY, &fs, err, sizeof(err));

	if (r < 0)
		fz_fail("op %u: read-only open (%s) failed: %d %s", s->opno, why, r, err);
	r = full ? fz_exercise(fs) : o2_fs_walk(fs, &st);
	if (r < 0)
		fz_fail("op %u: o2_fs_walk (%s) rejects the volume: %d %s", s->opno, why, r,
			o2_fs_error(fs));
	xattr_verify(s, fs, why);

	/* the model file */
	if (full && s->model_ino && s->model_valid) {
		struct o2_inode *ino;

		if (o2_inode_get(fs, s->model_ino, &ino) == 0) {
			const struct o2_inode_info *in = o2_inode_info(ino);

			if ((in->flags & O2_INODE_VALID) && in->generation == s->model_gen &&
			    S_ISREG(in->mode)) {
				if (in->size != s->model_size)
					fz_fail("model file %llu (%s): size %llu, expected %llu",
						(unsigned long long)s->model_ino, why,
						(unsigned long long)in->size,
						(unsigned long long)s->model_size);
				uint8_t *buf = malloc(MODEL_CAP);
				if (!buf)
					fz_fail("out of memory");
				ssize_t n = o2_inode_read(fs, ino, 0, buf, MODEL_CAP);
				if (n != (ssize_t)s->model_size)
					fz_fail("model file %llu (%s): read %zd of %llu bytes: %s",
						(unsigned long long)s->model_ino, why, n,
						(unsigned long long)s->model_size, o2_fs_error(fs));
				for (uint64_t i = 0; i < s->model_size; i++)
					if (buf[i] != s->model[i])
						fz_fail("model file %llu (%s): byte %llu is %#x, expected "
							"%#x",
							(unsigned long long)s->model_ino, why,
							(unsigned long long)i, buf[i], s->model[i]);
				free(buf);
			}
			o2_inode_unref(ino);
		}
	}
	o2_fs_close(fs);
}

/* ---- choosing arguments ---- */

static uint64_t pick_ino(struct state *s, struct fz_reader *r)
{
	return s->ino[fz_u8(r) % s->n];
}

static uint64_t pick_dir(struct state *s, struct fz_reader *r)
{
	unsigned k = fz_u8(r), ndirs = 0;

	if (s->is_dir[k % s->n])
		return s->ino[k % s->n]; /* an index into the table that names a directory */
	for (unsigned i = 0; i < s->n; i++)
		ndirs += s->is_dir[i];
	k %= ndirs;
	for (unsigned i = 0; i < s->n; i++)
		if (s->is_dir[i] && k-- == 0)
			return s->ino[i];
	return s->ino[0];
}

/* Whether ino is an inode in use (not freed by an unlink or rmdir). */
static bool live(struct state *s, uint64_t ino)
{
	struct o2_inode *in;
	bool ok;

	if (o2_inode_get(s->fs, ino, &in) < 0)
		return false;
	ok = (o2_inode_info(in)->flags & O2_INODE_VALID) != 0;
	o2_inode_unref(in);
	return ok;
}

/* A name: mostly short ones from a small set, so that operations meet. */
static size_t pick_name(struct fz_reader *r, char *buf)
{
	uint8_t k = fz_u8(r);

	if (k < 224) {
		return (size_t)snprintf(buf, 16, "%c%u", "fdsl"[k & 3], (k >> 2) % 16);
	}
	if (k == 224)
		return (size_t)snprintf(buf, 4, ".");
	if (k == 225)
		return (size_t)snprintf(buf, 4, "..");
	/* long names: 200..256 bytes */
	size_t len = 200 + (size_t)(k - 226) * 2;
	if (len > 256)
		len = 256;
	memset(buf, 'L', len);
	buf[len - 1] = (char)('a' + (k & 15));
	buf[len] = '\0';
	return len;
}

static uint64_t pick_off(struct fz_reader *r)
{
	uint64_t v = fz_u16(r);

	switch (fz_u8(r) & 7) {
	case 0:
	case 1:
	case 2:
		return v;		/* inline-data sizes, first clusters */
	case 3:
	case 4:
		return v * 4;		/* the model's 256 KiB */
	case 5:
		return v * 512;		/* 32 MiB: sparse files, deeper trees */
	case 6:
		return v << 20;		/* 64 GiB */
	default:
		return v << 34;		/* 2^50: limits */
	}
}

static void add_ino(struct state *s, uint64_t ino, bool dir)
{
	if (s->n < MAX_INODES) {
		s->ino[s->n] = ino;
		s->is_dir[s->n] = dir;
		s->n++;
	}
}

/* ---- the model file ---- */

static void model_start(struct state *s, uint64_t ino)
{
	struct o2_inode *in;

	if (s->model_ino || o2_inode_get(s->fs, ino, &in) < 0)
		return;
	s->model_ino = ino;
	s->model_gen = o2_inode_info(in)->generation;
	s->model_valid = true;
	s->model_size = 0;
	o2_inode_unref(in);
}

static void model_resize(struct state *s, uint64_t size)
{
	if (size > MODEL_CAP) {
		s->model_valid = false;
		return;
	}
	if (size > s->model_size)
		memset(s->model + s->model_size, 0, size - s->model_size);
	s->model_size = size;
}

/* ---- operations ---- */

static void do_write(struct state *s, struct fz_reader *r)
{
	uint64_t ino = pick_ino(s, r), off = pick_off(r);
	size_t len = fz_u16(r) % (MAX_IO + 1);
	uint8_t pat = fz_u8(r);

	if (!live(s, ino))
		return;
	for (size_t i = 0; i < len; i++)
		s->io[i] = (uint8_t)(pat + i * 7 + (i >> 9));
	ssize_t n = o2_write(s->fs, ino, off, s->io, len);
	check(s, n, "o2_write");
	if (n > (ssize_t)len)
		fz_fail("op %u: o2_write of %zu bytes returned %zd", s->opno, len, n);
	if (ino == s->model_ino && s->model_valid && n >= 0) {
		if (off + (uint64_t)n > MODEL_CAP) {
			s->model_valid = false;
		} else {
			/* a write of nothing changes nothing, the size included */
			if (n > 0 && off + (uint64_t)n > s->model_size)
				model_resize(s, off + (uint64_t)n);
			memcpy(s->model + off, s->io, (size_t)n);
		}
		/* a failed or short write may still have grown the file: stop modelling */
		if ((size_t)n != len)
			s->model_valid = false;
	}
	if (n < 0 && ino == s->model_ino)
		s->model_valid = false;
}

static void do_truncate(struct state *s, struct fz_reader *r, bool setattr)
{
	uint64_t ino = pick_ino(s, r), size = pick_off(r);
	int ret;

	if (!live(s, ino))
		return;
	if (setattr) {
		struct o2_setattr a = { 0 };
		uint8_t m = fz_u8(r);
		unsigned mask = O2_SET_CTIME;

		a.mode = (uint16_t)(fz_u16(r) & 07777);
		a.uid = fz_u8(r);
		a.gid = fz_u8(r);
		a.size = size;
		a.atime.sec = (int64_t)fz_u32(r) - 0x7fffffff;
		a.atime.nsec = fz_u32(r) % 1000000000u;
		a.mtime = a.atime;
		a.ctime.sec = 1767225600;
		if (m & 1)
			mask |= O2_SET_MODE;
		if (m & 2)
			mask |= O2_SET_UID;
		if (m & 4)
			mask |= O2_SET_GID;
		if (m & 8)
			mask |= O2_SET_SIZE;
		if (m & 16)
			mask |= O2_SET_ATIME;
		if (m & 32)
			mask |= O2_SET_MTIME;
		ret = o2_setattr(s->fs, ino, &a, mask);
		check(s, ret, "o2_setattr");
		if (!(mask & O2_SET_SIZE))
			return;
	} else {
		ret = o2_truncate(s->fs, ino, size);
		check(s, ret, "o2_truncate");
	}
	if (ino == s->model_ino && s->model_valid) {
		if (ret == 0)
			model_resize(s, size);
		else
			s->model_valid = false;
	}
}

static void do_fallocate(struct state *s, struct fz_reader *r)
{
	uint64_t ino = pick_ino(s, r);
	uint8_t m = fz_u8(r);
	/* bit 0: KEEP_SIZE; bits 0 and 1: punch a hole */
	unsigned mode = ((m & 1) ? O2_FALLOC_KEEP_SIZE : 0) | ((m & 3) == 3 ? O2_FALLOC_PUNCH_HOLE : 0);
	uint64_t off = pick_off(r), len = (uint64_t)fz_u16(r) * (fz_u8(r) & 1 ? 1 : 64);

	if (!live(s, ino))
		return;
	int ret = o2_fallocate(s->fs, ino, mode, off, len);
	if (ret == -EOPNOTSUPP && (mode & O2_FALLOC_PUNCH_HOLE) && !s->sparse)
		return; /* no holes without the sparse feature */
	check(s, ret, "o2_fallocate");
	if (ino == s->model_ino && s->model_valid) {
		if (ret < 0) {
			s->model_valid = false;
		} else if (mode & O2_FALLOC_PUNCH_HOLE) {
			if (off < s->model_size)
				memset(s->model + off, 0,
				       (size_t)((off + len < s->model_size ? off + len : s->model_size) - off));
		} else if (!(mode & O2_FALLOC_KEEP_SIZE) && off + len > s->model_size) {
			model_resize(s, off + len);
		}
	}
}

static void do_ref(struct state *s, struct fz_reader *r)
{
	uint8_t k = fz_u8(r);

	if ((k & 1) && s->nrefs) {
		unsigned i = (k >> 1) % s->nrefs;
		int ret = o2_inode_close_ref(s->fs, s->refs[i]);

		check(s, ret, "o2_inode_close_ref");
		s->refs[i] = s->refs[--s->nrefs];
		return;
	}
	uint64_t ino = pick_ino(s, r);
	if (s->nrefs >= 16 || !live(s, ino))
		return;
	int ret = o2_inode_open_ref(s->fs, ino);
	check(s, ret, "o2_inode_open_ref");
	if (ret == 0)
		s->refs[s->nrefs++] = ino;
}

static void do_many(struct state *s, struct fz_reader *r)
{
	uint64_t dir = pick_dir(s, r);
	unsigned count = fz_u8(r) % 128, base = fz_u8(r);
	struct o2_new_inode ni = { .mode = S_IFREG | 0644 };
	char name[32];

	if (!live(s, dir))
		return;
	for (unsigned i = 0; i < count && s->creates < MAX_CREATES; i++) {
		uint64_t ino;
		size_t len = (size_t)snprintf(name, sizeof(name), "many-%u-%u", base, i);

		s->creates++;
		int ret = o2_create(s->fs, dir, name, len, &ni, &ino);
		check(s, ret, "o2_create (many)");
		if (ret == -ENOSPC)
			break;
	}
}

/* ---- extended attributes ---- */

/*
 * An attribute name (after its prefix): mostly from a small pool, so that
 * sets, replaces and removes meet (the POSIX ACLs' names are empty); else
 * up to 255 bytes from the input (any bytes: high, NUL), or 256 (too long).
 */
static size_t pick_xname(struct fz_reader *r, unsigned type, char *buf)
{
	static const char *const pool[] = {
		"a", "b", "mime_type", "x.y.z", "\xc3\xa9t\xc3\xa9", "\x80\xff",
		"pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp", "",
	};
	uint8_t k = fz_u8(r);

	if (k < 200) {
		if (type == O2_XATTR_ACL_ACCESS || type == O2_XATTR_ACL_DEFAULT)
			return 0;
		strcpy(buf, pool[k % 8]);
		return strlen(buf);
	}
	if (k == 255) {
		memset(buf, 'N', O2_XATTR_NAME_MAX + 1);
		return O2_XATTR_NAME_MAX + 1;
	}
	size_t len = fz_u8(r);
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)fz_u8(r);
	return len;
}

/* A value size: empty, local (up to 80 bytes), around 80, a cluster or more, 64 KiB, too big. */
static uint32_t pick_xsize(struct fz_reader *r)
{
	uint8_t sel = fz_u8(r);

	switch (sel & 7) {
	case 0:
		return 0;
	case 1:
		return fz_u8(r) % 81;
	case 2:
		return 78 + fz_u8(r) % 6;
	case 3:
		return fz_u16(r) % 4200;
	case 4:
		return fz_u16(r);
	case 5:
		return O2_XATTR_VALUE_MAX - fz_u8(r) % 2;
	case 6: {
		uint32_t clusters = 1 + fz_u8(r) % 16;

		return 4096u * clusters - 1 + fz_u8(r) % 3; /* 4K clusters: a boundary */
	}
	default:
		return O2_XATTR_VALUE_MAX + 1 + fz_u8(r);
	}
}

static struct xattr_model *xm_find(struct state *s, uint64_t ino, uint32_t gen, unsigned type,
				   const char *name, size_t len)
{
	for (unsigned i = 0; i < s->nxm; i++) {
		struct xattr_model *m = &s->xm[i];

		if (m->ino == ino && m->gen == gen && m->type == type && m->name_len == len &&
		    !memcmp(m->name, name, len))
			return m;
	}
	return NULL;
}

/* Forget what the model knows of inodes freed since (their numbers come back). */
static void xm_prune(struct state *s)
{
	unsigned k = 0;
	uint32_t gen;

	for (unsigned i = 0; i < s->nxm; i++)
		if (inode_gen(s->fs, s->xm[i].ino, &gen) && gen == s->xm[i].gen)
			s->xm[k++] = s->xm[i];
	s->nxm = k;
	k = 0;
	for (unsigned i = 0; i < s->nxi; i++)
		if (inode_gen(s->fs, s->xi[i].ino, &gen) && gen == s->xi[i].gen)
			s->xi[k++] = s->xi[i];
	s->nxi = k;
}

/* The model after a successful set (v) or remove (v NULL). */
static void xm_update(struct state *s, uint64_t ino, uint32_t gen, unsigned type,
		      const char *name, size_t len, const struct xval *v)
{
	struct xattr_model *m = xm_find(s, ino, gen, type, name, len);
	bool known = false;

	for (unsigned i = 0; i < s->nxi; i++)
		known |= s->xi[i].ino == ino && s->xi[i].gen == gen;
	if ((!known && s->nxi == XM_MAX) || (v && !m && s->nxm == XM_MAX)) {
		xm_prune(s); /* moves entries: find this one again */
		m = xm_find(s, ino, gen, type, name, len);
	}
	if (!known) {
		if (s->nxi == XM_MAX) {
			s->xm_valid = false;
			return;
		}
		s->xi[s->nxi++] = (struct xattr_inode){ ino, gen };
	}
	if (!v) {
		if (m)
			*m = s->xm[--s->nxm];
		return;
	}
	if (!m) {
		if (s->nxm == XM_MAX) {
			s->xm_valid = false;
			return;
		}
		m = &s->xm[s->nxm++];
		m->ino = ino;
		m->gen = gen;
		m->type = (uint8_t)type;
		m->name_len = (uint8_t)len;
		memcpy(m->name, name, len);
	}
	m->v = *v;
}

/*
 * Set (or remove) one attribute.  With a valid argument set the result must
 * be what the model says (-EEXIST, -ENODATA or success; a set may also meet
 * -ENOSPC); with invalid ones, one of their documented errors.
 */
static void do_xattr(struct state *s, struct fz_reader *r, bool remove)
{
	static const unsigned types[8] = { O2_XATTR_USER,     O2_XATTR_USER,
					   O2_XATTR_ACL_ACCESS, O2_XATTR_ACL_DEFAULT,
					   O2_XATTR_TRUSTED,  O2_XATTR_SECURITY,
					   O2_XATTR_USER,     0 };
	static const unsigned flag_sets[4] = { 0, O2_XATTR_CREATE, O2_XATTR_REPLACE,
					       O2_XATTR_CREATE | O2_XATTR_REPLACE };
	char name[O2_XATTR_NAME_MAX + 2];
	struct xval v = { 0 };
	uint64_t ino = pick_ino(s, r);
	uint8_t t = fz_u8(r);
	unsigned type = types[t & 7], flags = flag_sets[(t >> 3) & 3];
	bool null_value = false;
	size_t len;
	uint32_t gen;
	long ret;

	if ((t & 7) == 7 && (t >> 5))
		type = O2_XATTR_SECURITY + (t >> 5); /* 6..12: no such type */
	len = pick_xname(r, type, name);
	if (!remove) {
		v.size = pick_xsize(r);
		v.pat = fz_u8(r);
		v.nlit = (uint8_t)(fz_u8(r) % (XV_LIT + 1));
		if (v.nlit > v.size)
			v.nlit = (uint8_t)v.size;
		for (unsigned i = 0; i < v.nlit; i++)
			v.lit[i] = fz_u8(r);
		null_value = v.size == 0 && (t & 0x80);
	}
	if (!inode_gen(s->fs, ino, &gen))
		return;
	if (!remove)
		xval_fill(&v, s->xbuf);
	ret = remove ? o2_xattr_remove(s->fs, ino, type, name, len)
		     : o2_xattr_set(s->fs, ino, type, name, len, null_value ? NULL : s->xbuf,
				    v.size, flags);
	fz_debug("op %u %s: inode %llu type %u name %zu bytes size %u flags %u -> %ld %s",
		 s->opno, s->opname, (unsigned long long)ino, type, len, v.size, flags, ret,
		 ret < 0 ? o2_fs_error(s->fs) : "");

	/* the argument errors, any of those that apply */
	bool bad_type = type == 0 || type > O2_XATTR_SECURITY;
	bool acl = type == O2_XATTR_ACL_ACCESS || type == O2_XATTR_ACL_DEFAULT;
	bool null_bad = !remove && null_value && v.size; /* NULL with a size */
	bool arg_err = !s->has_xattr || bad_type || len > O2_XATTR_NAME_MAX || (!len != acl) ||
		       null_bad || (!remove && v.size > O2_XATTR_VALUE_MAX);
	const char *what = remove ? "o2_xattr_remove" : "o2_xattr_set";

	if (arg_err) {
		if ((!s->has_xattr && ret == -EOPNOTSUPP) ||
		    (s->has_xattr && bad_type && ret == -EINVAL) ||
		    (s->has_xattr && len > O2_XATTR_NAME_MAX && ret == -ERANGE) ||
		    (s->has_xattr && (!len != acl || null_bad) && ret == -EINVAL) ||
		    (s->has_xattr && !remove && v.size > O2_XATTR_VALUE_MAX && ret == -E2BIG))
			return;
		fz_fail("op %u (%s): %s with invalid arguments (type %u, name of %zu bytes, "
			"value of %u) returned %ld (%s)", s->opno, s->opname, what, type, len,
			v.size, ret, o2_fs_error(s->fs));
	}

	/* valid arguments: the model says what must happen */
	bool exists = xm_find(s, ino, gen, type, name, len) != NULL;
	long want = 0;

	if (remove)
		want = exists ? 0 : -ENODATA;
	else if ((flags & O2_XATTR_CREATE) && exists)
		want = -EEXIST;
	else if ((flags & O2_XATTR_REPLACE) && !exists)
		want = -ENODATA;
	if (!s->xm_valid) {
		if (ret == 0 || ret == -EEXIST || ret == -ENODATA || (!remove && ret == -ENOSPC))
			return;
	} else if (ret == want || (want == 0 && !remove && ret == -ENOSPC)) {
		if (ret == 0)
			xm_update(s, ino, gen, type, name, len, remove ? NULL : &v);
		return;
	}
	fz_fail("op %u (%s): %s on inode %llu (type %u, name of %zu bytes, value of %u, flags %u; "
		"the model expects %ld) returned %ld (%s)", s->opno, s->opname, what,
		(unsigned long long)ino, type, len, v.size, flags, want, ret, o2_fs_error(s->fs));
}

static void remount(struct state *s, const char *why)
{
	int r = o2_fs_close(s->fs);

	s->fs = NULL;
	s->nrefs = 0; /* references end with the mount; orphans wait for the next open */
	if (r < 0)
		fz_fail("op %u: o2_fs_close (%s) failed: %d", s->opno, why, r);
	verify(s, s->dev, why, false);
	open_rw(s, s->dev, &s->fs, why);
}

static void run_op(struct state *s, struct fz_reader *r)
{
	enum op op = (enum op)(fz_u8(r) % OP_COUNT);
	struct o2_new_inode ni = { 0 };
	char name[300], name2[300];
	size_t len, len2;
	uint64_t dir, dir2, ino;
	int ret;

	s->opname = op_names[op];
	switch (op) {
	case OP_CREATE: {
		static const uint16_t types[] = { S_IFREG, S_IFREG, S_IFREG, S_IFIFO,
						  S_IFCHR, S_IFBLK, S_IFSOCK, S_IFREG };
		dir = pick_dir(s, r);
		len = pick_name(r, name);
		uint8_t t = fz_u8(r);
		ni.mode = (uint16_t)(types[t & 7] | 0644);
		ni.uid = t >> 3;
		ni.rdev = t;
		if (!live(s, dir))
			return;
		ret = o2_create(s->fs, dir, name, len, &ni, &ino);
		check(s, ret, "o2_create");
		if (ret == 0) {
			add_ino(s, ino, false);
			if (S_ISREG(ni.mode))
				model_start(s, ino);
		}
		s->creates++;
		break;
	}
	case OP_MKDIR:
		dir = pick_dir(s, r);
		len = pick_name(r, name);
		ni.mode = S_IFDIR | 0755;
		if (!live(s, dir))
			return;
		ret = o2_mkdir(s->fs, dir, name, len, &ni, &ino);
		check(s, ret, "o2_mkdir");
		if (ret == 0)
			add_ino(s, ino, true);
		s->creates++;
		break;
	case OP_WRITE:
	case OP_WRITE2:
		do_write(s, r);
		break;
	case OP_TRUNCATE:
		do_truncate(s, r, false);
		break;
	case OP_SETATTR:
		do_truncate(s, r, true);
		break;
	case OP_RENAME: {
		static const unsigned flags[] = { 0, 0, O2_RENAME_NOREPLACE, O2_RENAME_EXCHANGE };
		dir = pick_dir(s, r);
		len = pick_name(r, name);
		dir2 = pick_dir(s, r);
		len2 = pick_name(r, name2);
		unsigned f = flags[fz_u8(r) & 3];
		if (!live(s, dir) || !live(s, dir2))
			return;
		ret = o2_rename(s->fs, dir, name, len, dir2, name2, len2, f);
		check(s, ret, "o2_rename");
		break;
	}
	case OP_UNLINK:
		dir = pick_dir(s, r);
		len = pick_name(r, name);
		if (!live(s, dir))
			return;
		ret = o2_unlink(s->fs, dir, name, len);
		check(s, ret, "o2_unlink");
		break;
	case OP_RMDIR:
		dir = pick_dir(s, r);
		len = pick_name(r, name);
		if (!live(s, dir))
			return;
		ret = o2_rmdir(s->fs, dir, name, len);
		check(s, ret, "o2_rmdir");
		break;
	case OP_LINK:
		ino = pick_ino(s, r);
		dir = pick_dir(s, r);
		len = pick_name(r, name);
		if (!live(s, dir) || !live(s, ino))
			return;
		ret = o2_link(s->fs, ino, dir, name, len);
		check(s, ret, "o2_link");
		break;
	case OP_SYMLINK: {
		char target[5000];
		dir = pick_dir(s, r);
		len = pick_name(r, name);
		size_t tlen = fz_u16(r) % sizeof(target);
		if (tlen == 0)
			tlen = 1;
		for (size_t i = 0; i < tlen; i++)
			target[i] = (char)('a' + i % 26);
		target[tlen] = '\0';
		if (tlen >= sizeof(target))
			target[sizeof(target) - 1] = '\0';
		if (!live(s, dir))
			return;
		ret = o2_symlink(s->fs, dir, name, len, target, &ni, &ino);
		check(s, ret, "o2_symlink");
		if (ret == 0)
			add_ino(s, ino, false);
		s->creates++;
		break;
	}
	case OP_REFLINK:
		ino = pick_ino(s, r);
		dir = pick_dir(s, r);
		len = pick_name(r, name);
		if (!live(s, dir) || !live(s, ino) || s->creates >= MAX_CREATES)
			return;
		ni.mode = S_IFREG | 0640;
		ret = o2_reflink(s->fs, ino, dir, name, len, &ni, &ino);
		check(s, ret, "o2_reflink");
		if (ret == 0)
			add_ino(s, ino, false);
		s->creates++;
		break;
	case OP_FALLOCATE:
		do_fallocate(s, r);
		break;
	case OP_REF:
		do_ref(s, r);
		break;
	case OP_MANY:
		do_many(s, r);
		break;
	case OP_SYNC:
		check(s, o2_fs_sync(s->fs), "o2_fs_sync");
		break;
	case OP_TICK:
		s->clock += (uint64_t)fz_u8(r) * 100000000ull; /* up to 25 s */
		check(s, o2_fs_tick(s->fs), "o2_fs_tick");
		break;
	case OP_REMOUNT:
		remount(s, "remount");
		break;
	case OP_CRASH:
		if (!s->snap)
			s->snap = malloc(s->vol->size);
		if (!s->snap)
			fz_fail("out of memory");
		memcpy(s->snap, fz_dev_mem(s->fzdev), s->vol->size);
		break;
	case OP_SETXATTR:
	case OP_SETXATTR2:
		do_xattr(s, r, false);
		break;
	case OP_RMXATTR:
		do_xattr(s, r, true);
		break;
	case OP_COUNT:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz_dev *devs[FZ_CFG_COUNT];
	struct fz_reader r = { data, size };
	struct state *s;
	uint8_t cfg;

	if (size < 1)
		return 0;
	s = calloc(1, sizeof(*s));
	if (!s)
		fz_fail("out of memory");
	cfg = fz_u8(&r);
	s->vol = fz_volume((enum fz_config)(cfg % FZ_CFG_COUNT));
	s->opts.flags = O2_OPEN_RDWR;
	s->opts.slot = 0;
	s->opts.cache_blocks = (cfg & 0x80) ? 32 : 0;
	s->opts.now_ns = fz_clock;
	s->opts.clock_arg = &s->clock;
	s->io = malloc(MAX_IO);
	s->model = calloc(1, MODEL_CAP);
	s->xbuf = malloc(XV_BUF);
	s->xbuf2 = malloc(XV_BUF);
	if (!s->io || !s->model || !s->xbuf || !s->xbuf2)
		fz_fail("out of memory");
	if (!devs[cfg % FZ_CFG_COUNT])
		devs[cfg % FZ_CFG_COUNT] = fz_dev_new(s->vol->data, s->vol->size);
	s->fzdev = devs[cfg % FZ_CFG_COUNT];
	fz_dev_reset(s->fzdev, NULL);
	s->dev = fz_dev_blockdev(s->fzdev);
	open_rw(s, s->dev, &s->fs, "first");
	s->has_xattr = (o2_fs_super(s->fs)->feature_incompat & O2_FEATURE_INCOMPAT_XATTR) != 0;
	s->sparse = (o2_fs_super(s->fs)->feature_incompat & O2_FEATURE_INCOMPAT_SPARSE_ALLOC) != 0;
	s->xm_valid = true;

	s->ino[0] = o2_fs_super(s->fs)->root_blkno;
	s->is_dir[0] = true;
	s->n = 1;
	if (o2_path_lookup(s->fs, "/lost+found", &s->ino[1]) == 0) {
		s->is_dir[1] = true;
		s->n = 2;
	}

	for (s->opno = 0; s->opno < MAX_OPS && r.left; s->opno++)
		run_op(s, &r);

	s->opname = "end";
	remount(s, "close at the end");
	int ret = o2_fs_close(s->fs);
	s->fs = NULL;
	if (ret < 0)
		fz_fail("o2_fs_close after the remount failed: %d", ret);
	verify(s, s->dev, "after the last close", true);

	/* the crash point: recovery must give a volume the walk accepts */
	if (s->snap) {
		struct o2_blockdev *cd;
		struct o2_fs *fs;

		s->model_valid = false;
		s->xm_valid = false; /* any committed prefix: not the model's state */
		if (o2_blockdev_new_memory_from(s->snap, s->vol->size, s->vol->size, &cd) < 0)
			fz_fail("out of memory");
		open_rw(s, cd, &fs, "crash copy: recovery");
		ret = o2_fs_close(fs);
		if (ret < 0)
			fz_fail("crash copy: o2_fs_close after recovery failed: %d", ret);
		verify(s, cd, "crash copy, after recovery", true);
		o2_blockdev_free(cd);
	}

	free(s->snap);
	free(s->io);
	free(s->model);
	free(s->xbuf);
	free(s->xbuf2);
	free(s);
	return 0;
}
