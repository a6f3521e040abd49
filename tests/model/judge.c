/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The judges of the model test: volumes made by mkfs.ocfs2, fsck.ocfs2's
 * verdict, debugfs.ocfs2's rdump and stat, and fscore's own read API, each
 * compared with the model.  Every judge returns NULL or a malloc'd
 * description of the first difference, naming the path.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model.h"
#include "../testenv.h"

#define TOOL_PATH "PATH=\"$PATH:/usr/sbin:/sbin\" "

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));

static char *fmt(const char *f, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, f);
	if (vasprintf(&s, f, ap) < 0)
		abort();
	va_end(ap);
	return s;
}

int judge_run(const char *cmd, char **out)
{
	char *full = fmt("%s 2>&1", cmd);
	FILE *p = popen(full, "r");
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap);
	int st;

	free(full);
	if (!p || !buf)
		abort();
	for (;;) {
		size_t n;

		if (cap - len < 4096) {
			cap *= 2;
			buf = realloc(buf, cap);
			if (!buf)
				abort();
		}
		n = fread(buf + len, 1, cap - len - 1, p);
		if (n == 0)
			break;
		len += n;
	}
	buf[len] = '\0';
	st = pclose(p);
	if (out)
		*out = buf;
	else
		free(buf);
	return st;
}

bool judge_have_tools(void)
{
	return system(TOOL_PATH "command -v mkfs.ocfs2 >/dev/null 2>&1 && "
			  "command -v fsck.ocfs2 >/dev/null 2>&1 && "
			  "command -v debugfs.ocfs2 >/dev/null 2>&1") == 0;
}

/* ---- volumes ---- */

/* out with every occurrence of the image path replaced by "IMAGE" (in place). */
static void strip_image_path(char *out, const char *image)
{
	size_t il = strlen(image);
	char *p;

	while (il && (p = strstr(out, image))) {
		memcpy(p, "IMAGE", 5);
		memmove(p + 5, p + il, strlen(p + il) + 1);
	}
}

static uint64_t vol_now(void *arg)
{
	return ((struct vol *)arg)->clock_ns;
}

void vol_make(struct vol *v, const char *name, uint64_t size, const char *mkfs_args)
{
	const char *tmp = getenv("O2_MODEL_TMPDIR");
	char *cmd, *out;
	int fd, st;

	memset(v, 0, sizeof(*v));
	snprintf(v->dir, sizeof(v->dir), "%s/o2model-%s-XXXXXX", tmp && *tmp ? tmp : test_tmpdir(), name);
	ck_assert_msg(mkdtemp(v->dir) != NULL, "mkdtemp %s: %s", v->dir, strerror(errno));
	snprintf(v->image, sizeof(v->image), "%s/vol.img", v->dir);
	snprintf(v->mkfs_args, sizeof(v->mkfs_args), "%s", mkfs_args);
	fd = open(v->image, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_msg(fd >= 0 && ftruncate(fd, (off_t)size) == 0, "%s: %s", v->image,
		      strerror(errno));
	close(fd);
	cmd = fmt(TOOL_PATH "mkfs.ocfs2 -q -M local %s %s </dev/null", mkfs_args, v->image);
	st = judge_run(cmd, &out);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s failed (status 0x%x): %s", cmd,
		      st, out);
	free(cmd);
	free(out);
	cmd = fmt(TOOL_PATH "fsck.ocfs2 -fn %s", v->image);
	st = judge_run(cmd, &out);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
			      strstr(out, "All passes succeeded."),
		      "fsck.ocfs2 of the fresh volume (mkfs %s) failed: %s", mkfs_args, out);
	strip_image_path(out, v->image);
	ck_assert_msg(strlen(out) < sizeof(v->fsck_fresh), "fsck output too long");
	snprintf(v->fsck_fresh, sizeof(v->fsck_fresh), "%s", out);
	free(cmd);
	free(out);
	v->clock_ns = 1700000000ull * 1000000000ull;
	vol_quota_baseline(v);
}

void vol_open(struct vol *v)
{
	struct o2_open_opts o = {
		.flags = O2_OPEN_RDWR | (v->acl ? O2_OPEN_ACL : 0),
		.slot = 0,
		.now_ns = vol_now,
		.clock_arg = v,
	};
	char err[256] = "";
	int r;

	r = o2_blockdev_open_file(v->image, 0, &v->dev);
	ck_assert_msg(r == 0, "open %s: %d", v->image, r);
	r = o2_fs_open_opts(v->dev, &o, &v->fs, err, sizeof(err));
	ck_assert_msg(r == 0, "o2_fs_open_opts(%s, RDWR): %d: %s", v->image, r, err);
}

void vol_close(struct vol *v)
{
	int r;

	if (!v->fs)
		return;
	r = o2_fs_close(v->fs);
	v->fs = NULL;
	o2_blockdev_free(v->dev);
	v->dev = NULL;
	ck_assert_msg(r == 0, "o2_fs_close(%s): %d", v->image, r);
}

void vol_cleanup(struct vol *v, bool keep)
{
	const char *k = getenv("O2_MODEL_KEEP");
	char *cmd;

	if (v->fs) {
		o2_fs_close(v->fs);
		v->fs = NULL;
	}
	if (v->dev) {
		o2_blockdev_free(v->dev);
		v->dev = NULL;
	}
	if (keep || (k && *k && strcmp(k, "0"))) {
		fprintf(stderr, "model: keeping %s\n", v->dir);
		return;
	}
	cmd = fmt("rm -rf '%s'", v->dir);
	judge_run(cmd, NULL);
	free(cmd);
}

/* ---- fsck ---- */

/* Lines of a that are not lines of b, into s (at most max lines). */
static void lines_missing(const char *a, const char *b, const char *tag, char **s, unsigned max)
{
	const char *p = a;
	unsigned n = 0;

	while (*p && n < max) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		bool found = false;

		for (const char *q = b; *q;) {
			const char *qe = strchr(q, '\n');
			size_t ql = qe ? (size_t)(qe - q) : strlen(q);

			if (ql == len && !memcmp(p, q, len)) {
				found = true;
				break;
			}
			q += ql + (qe ? 1 : 0);
		}
		if (!found && len) {
			char *ns = fmt("%s%s %.*s\n", *s ? *s : "", tag, (int)len, p);

			free(*s);
			*s = ns;
			n++;
		}
		p += len + (e ? 1 : 0);
	}
}

char *judge_fsck(struct vol *v)
{
	char *cmd = fmt(TOOL_PATH "fsck.ocfs2 -fn %s", v->image), *out, *diff = NULL, *msg;
	int st = judge_run(cmd, &out);

	free(cmd);
	strip_image_path(out, v->image); /* a crash copy is judged against the original's */
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "All passes succeeded.") &&
	    !strcmp(out, v->fsck_fresh)) {
		free(out);
		return NULL;
	}
	lines_missing(out, v->fsck_fresh, "+", &diff, 40);
	lines_missing(v->fsck_fresh, out, "-", &diff, 10);
	msg = fmt("fsck.ocfs2 -fn %s: exit status %d, output differs from the fresh volume's "
		  "(+ new, - gone):\n%s",
		  v->image, WIFEXITED(st) ? WEXITSTATUS(st) : -1, diff ? diff : "(same lines)\n");
	free(diff);
	free(out);
	return msg;
}

/* ---- quota usage ---- */

struct dqs {
	struct o2_dquot *v;
	size_t n, cap;
};

static int collect_dq(void *arg, const struct o2_dquot *dq)
{
	struct dqs *d = arg;

	if (d->n == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 64;
		d->v = realloc(d->v, d->cap * sizeof(*d->v));
		if (!d->v)
			return -ENOMEM;
	}
	d->v[d->n++] = *dq;
	return 0;
}

/* Every id's usage in image's global quota file of type (read-only open). */
static char *quota_read(const char *image, unsigned type, struct dqs *out, bool *none)
{
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	char err[256] = "";
	int r = o2_blockdev_open_file(image, O2_DEV_RDONLY, &dev);

	if (r < 0)
		return fmt("open %s: %d", image, r);
	r = o2_fs_open(dev, 0, &fs, err, sizeof(err));
	if (r < 0) {
		o2_blockdev_free(dev);
		return fmt("o2_fs_open(%s): %d: %s", image, r, err);
	}
	r = o2_fs_quota_iterate(fs, type, collect_dq, out);
	*none = r == -EOPNOTSUPP;
	o2_fs_close(fs);
	o2_blockdev_free(dev);
	if (r < 0 && !*none)
		return fmt("%s: reading the %s quota file: %d", image, type ? "group" : "user", r);
	return NULL;
}

static const struct o2_dquot *dq_find(const struct dqs *d, uint32_t id)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].id == id)
			return &d->v[i];
	return NULL;
}

/*
 * Where image's quota usage differs from what fsck.ocfs2 -fy counts on a
 * copy of it: into v->qdiff (NULL: compared, message otherwise).
 */
static char *quota_diffs(struct vol *v, struct qdiff *out, unsigned *nout)
{
	char *copy = fmt("%s.quota", v->image), *cmd, *out_s, *msg = NULL;
	int st;

	*nout = 0;
	cmd = fmt("cp --sparse=always '%s' '%s' && " TOOL_PATH "fsck.ocfs2 -fy '%s'", v->image,
		  copy, copy);
	st = judge_run(cmd, &out_s);
	free(cmd);
	if (!WIFEXITED(st) || WEXITSTATUS(st) >= 4)
		msg = fmt("fsck.ocfs2 -fy of a copy (to recount quotas) failed: %s", out_s);
	free(out_s);
	for (unsigned type = 0; type < 2 && !msg; type++) {
		struct dqs ours = { 0 }, theirs = { 0 };
		bool none = false, none2 = false;

		msg = quota_read(v->image, type, &ours, &none);
		if (!msg)
			msg = quota_read(copy, type, &theirs, &none2);
		for (size_t pass = 0; pass < 2 && !msg && !none; pass++) {
			const struct dqs *a = pass ? &theirs : &ours, *b = pass ? &ours : &theirs;

			for (size_t i = 0; i < a->n && !msg; i++) {
				const struct o2_dquot *x = &a->v[i], *y = dq_find(b, x->id);
				const struct o2_dquot *mine = pass ? y : x, *fsck = pass ? x : y;
				int64_t ds = (int64_t)(fsck ? fsck->space : 0) - (int64_t)(mine ? mine->space : 0);
				int64_t di = (int64_t)(fsck ? fsck->inodes : 0) - (int64_t)(mine ? mine->inodes : 0);

				if ((!ds && !di) || (pass && y))
					continue;
				if (*nout == QDIFF_MAX) {
					msg = fmt("more than %d ids' quota usage differs", QDIFF_MAX);
					break;
				}
				out[(*nout)++] = (struct qdiff){ type, x->id, ds, di };
			}
		}
		free(ours.v);
		free(theirs.v);
	}
	unlink(copy);
	free(copy);
	return msg;
}

void vol_quota_baseline(struct vol *v)
{
	char *msg = quota_diffs(v, v->qbase, &v->nqbase);

	ck_assert_msg(msg == NULL, "quota baseline of the fresh volume: %s", msg);
}

char *judge_quota(struct vol *v)
{
	struct qdiff d[QDIFF_MAX];
	unsigned n;
	char *msg = quota_diffs(v, d, &n);

	if (msg)
		return msg;
	/* what mkfs.ocfs2 left uncounted (lost+found's inode) stays so */
	for (unsigned i = 0; i < n; i++) {
		bool base = false;

		for (unsigned j = 0; j < v->nqbase && !base; j++)
			base = !memcmp(&d[i], &v->qbase[j], sizeof(d[i]));
		if (!base)
			return fmt("%s quota of id %u: fsck.ocfs2 counts %+" PRId64 " bytes and %+" PRId64
				   " inodes more than ocfs2d's file holds", d[i].type ? "group" : "user",
				   d[i].id, d[i].space, d[i].inodes);
	}
	for (unsigned j = 0; j < v->nqbase; j++) {
		bool found = false;

		for (unsigned i = 0; i < n && !found; i++)
			found = !memcmp(&d[i], &v->qbase[j], sizeof(d[i]));
		if (!found)
			return fmt("%s quota of id %u: the fresh volume's difference from fsck.ocfs2's "
				   "count (%+" PRId64 " bytes, %+" PRId64 " inodes) went",
				   v->qbase[j].type ? "group" : "user", v->qbase[j].id,
				   v->qbase[j].space, v->qbase[j].inodes);
	}
	return NULL;
}

/* ---- fscore ---- */

struct collected {
	struct o2_dirent *v;
	size_t n, cap;
};

static int collect_dirent(const struct o2_dirent *de, void *arg)
{
	struct collected *c = arg;

	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 64;
		c->v = realloc(c->v, c->cap * sizeof(*c->v));
		if (!c->v)
			return -ENOMEM;
	}
	c->v[c->n++] = *de;
	return 0;
}

static int cmp_name(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	if (c)
		return c;
	return al < bl ? -1 : al > bl;
}

static int cmp_o2_dirent(const void *a, const void *b)
{
	const struct o2_dirent *x = a, *y = b;

	return cmp_name(x->name, x->name_len, y->name, y->name_len);
}

static int cmp_m_dirent_ptr(const void *a, const void *b)
{
	const struct m_dirent *x = *(const struct m_dirent *const *)a;
	const struct m_dirent *y = *(const struct m_dirent *const *)b;

	return cmp_name(x->name, x->len, y->name, y->len);
}

/* The model directory's entries sorted by name (optionally only those rdump writes). */
static const struct m_dirent **sorted_entries(const struct m_inode *dir, bool dumped_only,
					      size_t *ret_n)
{
	const struct m_dirent **s = malloc((dir->nents + 1) * sizeof(*s));
	size_t n = 0;

	if (!s)
		abort();
	for (size_t i = 0; i < dir->nents; i++) {
		enum m_type t = dir->ents[i].ino->type;

		if (dumped_only && t != M_REG && t != M_DIR && t != M_LNK)
			continue;
		s[n++] = &dir->ents[i];
	}
	if (n > 1)
		qsort(s, n, sizeof(*s), cmp_m_dirent_ptr);
	*ret_n = n;
	return s;
}

struct fscore_judge {
	struct vol *v;
	const struct model *m;
	bool *seen; /* by model index */
	uint8_t *buf;
	size_t buflen;
};

static char *check_data(struct fscore_judge *j, struct o2_inode *ino, const struct m_inode *in,
			const char *path)
{
	uint64_t off = 0;

	while (off < in->size) {
		size_t want = in->size - off > j->buflen ? j->buflen : (size_t)(in->size - off);
		ssize_t got = o2_inode_read(j->v->fs, ino, off, j->buf, want);

		if (got != (ssize_t)want)
			return fmt("%s: o2_inode_read(off %" PRIu64 ", %zu) returned %zd (size %" PRIu64
				   ")",
				   path, off, want, got, in->size);
		if (memcmp(j->buf, in->data + off, want)) {
			size_t k = 0;

			while (j->buf[k] == in->data[off + k])
				k++;
			return fmt("%s: data differs at byte %" PRIu64 " (fscore 0x%02x, model 0x%02x; "
				   "size %" PRIu64 ")",
				   path, off + k, j->buf[k], in->data[off + k], in->size);
		}
		off += want;
	}
	/* nothing past the end */
	ssize_t got = o2_inode_read(j->v->fs, ino, in->size, j->buf, 1);

	if (got != 0)
		return fmt("%s: o2_inode_read at i_size %" PRIu64 " returned %zd, want 0", path,
			   in->size, got);
	return NULL;
}

struct xattr_judge {
	struct fscore_judge *j;
	const struct m_inode *in;
	const char *path;
	size_t seen;
	char *msg;
};

static int judge_one_xattr(const struct o2_xattr *x, void *arg)
{
	struct xattr_judge *xj = arg;
	const struct m_xattr *want = NULL;

	for (size_t i = 0; i < xj->in->nxattrs; i++)
		if (xj->in->xattrs[i].type == x->type && xj->in->xattrs[i].name_len == x->name_len &&
		    !memcmp(xj->in->xattrs[i].name, x->name, x->name_len))
			want = &xj->in->xattrs[i];
	if (!want) {
		xj->msg = fmt("%s (inode %" PRIu64 "): xattr type %u \"%.*s\" not in the model",
			      xj->path, xj->in->ino, x->type, x->name_len, x->name);
		return 1;
	}
	if (x->value_size != want->size) {
		xj->msg = fmt("%s (inode %" PRIu64 "): xattr \"%.*s\" has %" PRIu64 " bytes, model %zu",
			      xj->path, xj->in->ino, x->name_len, x->name, x->value_size, want->size);
		return 1;
	}
	int r = o2_xattr_read_value(xj->j->v->fs, x, xj->j->buf);

	if (r < 0 || memcmp(xj->j->buf, want->value, want->size)) {
		xj->msg = fmt("%s (inode %" PRIu64 "): xattr \"%.*s\": value differs from the "
			      "model (read %d)", xj->path, xj->in->ino, x->name_len, x->name, r);
		return 1;
	}
	xj->seen++;
	return 0;
}

/* The inode's extended attributes: exactly the model's, values too. */
static char *check_xattrs(struct fscore_judge *j, struct o2_inode *ino, const struct m_inode *in,
			  const char *path)
{
	struct xattr_judge xj = { j, in, path, 0, NULL };
	int r = o2_xattr_iterate(j->v->fs, ino, judge_one_xattr, &xj);

	if (xj.msg)
		return xj.msg;
	if (r < 0)
		return fmt("%s (inode %" PRIu64 "): o2_xattr_iterate: %d: %s", path, in->ino, r,
			   o2_fs_error(j->v->fs));
	if (xj.seen != in->nxattrs)
		return fmt("%s (inode %" PRIu64 "): %zu xattrs, model %zu", path, in->ino, xj.seen,
			   in->nxattrs);
	return NULL;
}

static char *check_inode(struct fscore_judge *j, const struct m_inode *in, const char *path)
{
	struct o2_inode *ino;
	const struct o2_inode_info *info;
	char *msg = NULL;
	int r;

	r = o2_inode_get(j->v->fs, in->ino, &ino);
	if (r < 0)
		return fmt("%s: o2_inode_get(%" PRIu64 "): %d: %s", path, in->ino, r,
			   o2_fs_error(j->v->fs));
	info = o2_inode_info(ino);
	if (info->mode != (model_type_bits(in->type) | in->perm)) {
		msg = fmt("%s (inode %" PRIu64 "): mode 0%o, model 0%o", path, in->ino, info->mode,
			  model_type_bits(in->type) | in->perm);
		goto out;
	}
	if (info->links != in->nlink) {
		msg = fmt("%s (inode %" PRIu64 "): links %u, model %u", path, in->ino, info->links,
			  in->nlink);
		goto out;
	}
	if (info->uid != in->uid || info->gid != in->gid) {
		msg = fmt("%s (inode %" PRIu64 "): uid/gid %u/%u, model %u/%u", path, in->ino,
			  info->uid, info->gid, in->uid, in->gid);
		goto out;
	}
	if (j->m->check_times) {
		const struct {
			const char *name;
			struct o2_timespec got;
			int64_t want;
		} t[3] = { { "atime", info->atime, in->atime },
			   { "mtime", info->mtime, in->mtime },
			   { "ctime", info->ctime, in->ctime } };

		for (int k = 0; k < 3; k++) {
			int64_t got = t[k].got.sec * 1000000000ll + t[k].got.nsec;

			if (t[k].want >= 0 && got != t[k].want) {
				msg = fmt("%s (inode %" PRIu64 "): %s %lld.%09u, model %lld.%09lld", path,
					  in->ino, t[k].name, (long long)t[k].got.sec, t[k].got.nsec,
					  (long long)(t[k].want / 1000000000),
					  (long long)(t[k].want % 1000000000));
				goto out;
			}
		}
	}
	if (in->nlink == 0 && !(info->flags & O2_INODE_ORPHANED)) {
		msg = fmt("%s (inode %" PRIu64 "): unlinked while open but not flagged orphaned "
			  "(flags 0x%x)",
			  path, in->ino, info->flags);
		goto out;
	}
	switch (in->type) {
	case M_REG:
		if (info->size != in->size) {
			msg = fmt("%s (inode %" PRIu64 "): size %" PRIu64 ", model %" PRIu64, path,
				  in->ino, info->size, in->size);
			goto out;
		}
		msg = check_data(j, ino, in, path);
		break;
	case M_LNK: {
		char t[8192];

		if (info->size != strlen(in->target)) {
			msg = fmt("%s (symlink %" PRIu64 "): size %" PRIu64 ", target length %zu", path,
				  in->ino, info->size, strlen(in->target));
			goto out;
		}
		r = o2_inode_readlink(j->v->fs, ino, t, sizeof(t));
		if (r < 0 || strcmp(t, in->target))
			msg = fmt("%s (symlink %" PRIu64 "): readlink %d \"%.60s...\" (%zu bytes), "
				  "model \"%.60s...\" (%zu bytes)",
				  path, in->ino, r, r < 0 ? "" : t, r < 0 ? 0 : strlen(t), in->target,
				  strlen(in->target));
		break;
	}
	case M_CHR:
		if (info->rdev != in->rdev)
			msg = fmt("%s (inode %" PRIu64 "): rdev 0x%" PRIx64 ", model 0x%" PRIx64, path,
				  in->ino, info->rdev, in->rdev);
		break;
	default:
		break;
	}
	if (!msg)
		msg = check_xattrs(j, ino, in, path);
out:
	o2_inode_unref(ino);
	return msg;
}

static char *check_dir(struct fscore_judge *j, const struct m_inode *dir, uint64_t parent_ino)
{
	char *path = model_path(dir, NULL, 0), *msg = NULL;
	struct collected c = { 0 };
	const struct m_dirent **ms = NULL;
	struct o2_inode *dino = NULL;
	size_t nm, ndot = 0, k = 0;
	int r;

	msg = check_inode(j, dir, path);
	if (msg)
		goto out;
	j->seen[dir->index] = true;
	r = o2_inode_get(j->v->fs, dir->ino, &dino);
	if (r < 0) {
		msg = fmt("%s: o2_inode_get: %d", path, r);
		goto out;
	}
	r = o2_dir_iterate(j->v->fs, dino, collect_dirent, &c);
	if (r < 0) {
		msg = fmt("%s: o2_dir_iterate: %d: %s", path, r, o2_fs_error(j->v->fs));
		goto out;
	}
	/* "." and "..", then the rest sorted */
	for (size_t i = 0; i < c.n; i++) {
		struct o2_dirent *d = &c.v[i];

		if (d->name_len == 1 && d->name[0] == '.') {
			if (d->ino != dir->ino) {
				msg = fmt("%s: \".\" names inode %" PRIu64 ", not %" PRIu64, path,
					  d->ino, dir->ino);
				goto out;
			}
			ndot++;
		} else if (d->name_len == 2 && d->name[0] == '.' && d->name[1] == '.') {
			if (d->ino != parent_ino) {
				msg = fmt("%s: \"..\" names inode %" PRIu64 ", not the parent %" PRIu64,
					  path, d->ino, parent_ino);
				goto out;
			}
			ndot++;
		} else {
			c.v[k++] = *d;
		}
	}
	if (ndot != 2) {
		msg = fmt("%s: %zu entries named \".\" or \"..\", want 2", path, ndot);
		goto out;
	}
	if (k > 1)
		qsort(c.v, k, sizeof(*c.v), cmp_o2_dirent);
	ms = sorted_entries(dir, false, &nm);
	for (size_t a = 0, b = 0; a < k || b < nm;) {
		int cmp = a == k ? 1 : b == nm ? -1 :
			  cmp_name(c.v[a].name, c.v[a].name_len, ms[b]->name, ms[b]->len);

		if (cmp < 0) {
			msg = fmt("%s: fscore lists \"%.*s\" (inode %" PRIu64 "), the model has no such "
				  "entry",
				  path, (int)c.v[a].name_len, c.v[a].name, c.v[a].ino);
			goto out;
		}
		if (cmp > 0) {
			msg = fmt("%s: entry \"%.*s\" (inode %" PRIu64 ") missing from o2_dir_iterate",
				  path, (int)ms[b]->len, ms[b]->name, ms[b]->ino->ino);
			goto out;
		}
		if (c.v[a].ino != ms[b]->ino->ino || c.v[a].type != model_dt(ms[b]->ino->type)) {
			msg = fmt("%s/%.*s: entry names inode %" PRIu64 " type %u, model %" PRIu64
				  " type %u",
				  path, (int)ms[b]->len, ms[b]->name, c.v[a].ino, c.v[a].type,
				  ms[b]->ino->ino, model_dt(ms[b]->ino->type));
			goto out;
		}
		a++;
		b++;
	}
	/* lookups: every name when few, a sample when many */
	for (size_t i = 0; i < nm; i += nm > 2000 ? nm / 500 : 1) {
		struct o2_dirent de;

		r = o2_dir_lookup(j->v->fs, dino, ms[i]->name, ms[i]->len, &de);
		if (r < 0 || de.ino != ms[i]->ino->ino) {
			msg = fmt("%s/%.*s: o2_dir_lookup: %d, inode %" PRIu64 ", model %" PRIu64, path,
				  (int)ms[i]->len, ms[i]->name, r, r < 0 ? 0 : de.ino, ms[i]->ino->ino);
			goto out;
		}
	}
	for (size_t i = 0; i < nm; i++) {
		const struct m_inode *ch = ms[i]->ino;

		if (ch->type == M_DIR) {
			msg = check_dir(j, ch, dir->ino);
		} else if (!j->seen[ch->index]) {
			char *cp = model_path(dir, ms[i]->name, ms[i]->len);

			j->seen[ch->index] = true;
			msg = check_inode(j, ch, cp);
			free(cp);
		}
		if (msg)
			goto out;
	}
out:
	if (dino)
		o2_inode_unref(dino);
	free(ms);
	free(c.v);
	free(path);
	return msg;
}

char *judge_fscore(struct vol *v, const struct model *m)
{
	struct fscore_judge j = { .v = v, .m = m };
	uint64_t top;
	char *msg = NULL;
	int r;

	r = o2_path_lookup(v->fs, "/TOP", &top);
	if (r < 0 || top != m->top->ino)
		return fmt("o2_path_lookup(/TOP): %d, inode %" PRIu64 ", model %" PRIu64, r,
			   r < 0 ? 0 : top, m->top->ino);
	j.seen = calloc(m->nall + 1, 1);
	j.buflen = 1 << 20;
	j.buf = malloc(j.buflen);
	if (!j.seen || !j.buf)
		abort();
	msg = check_dir(&j, m->top, o2_fs_super(v->fs)->root_blkno);
	/* open orphans and anything not reached from /TOP */
	for (size_t i = 0; !msg && i < m->nall; i++) {
		const struct m_inode *in = m->all[i];

		if (j.seen[i])
			continue;
		if (in->nlink != 0) {
			msg = fmt("model inode %" PRIu64 " (links %u) not reachable from /TOP", in->ino,
				  in->nlink);
			break;
		}
		char *p = fmt("<orphan inode %" PRIu64 ">", in->ino);

		msg = check_inode(&j, in, p);
		free(p);
	}
	free(j.seen);
	free(j.buf);
	return msg;
}

/* ---- rdump ---- */

static char *rdump_file(const char *lpath, const char *path, const struct m_inode *in)
{
	int fd = open(lpath, O_RDONLY);
	uint8_t *buf;
	uint64_t off = 0;
	char *msg = NULL;

	if (fd < 0)
		return fmt("%s: rdump output %s: %s", path, lpath, strerror(errno));
	buf = malloc(1 << 20);
	if (!buf)
		abort();
	for (;;) {
		ssize_t n = read(fd, buf, 1 << 20);

		if (n < 0) {
			msg = fmt("%s: reading %s: %s", path, lpath, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		if (off + (uint64_t)n > in->size) {
			msg = fmt("%s: rdump wrote more than the model's %" PRIu64 " bytes", path,
				  in->size);
			break;
		}
		if (memcmp(buf, in->data + off, (size_t)n)) {
			size_t k = 0;

			while (buf[k] == in->data[off + k])
				k++;
			msg = fmt("%s: rdump data differs at byte %" PRIu64 " (debugfs 0x%02x, model "
				  "0x%02x; size %" PRIu64 ")",
				  path, off + k, buf[k], in->data[off + k], in->size);
			break;
		}
		off += (uint64_t)n;
	}
	if (!msg && off != in->size)
		msg = fmt("%s: rdump wrote %" PRIu64 " bytes, model size %" PRIu64, path, off,
			  in->size);
	free(buf);
	close(fd);
	return msg;
}

static int cmp_str_ptr(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;

	return cmp_name(x, strlen(x), y, strlen(y));
}

static char *rdump_check_attrs(struct vol *v, const char *lpath, const char *path,
			       const struct m_inode *in, const struct stat *st)
{
	struct o2_inode *ino;
	int64_t mtime = -1;

	if ((st->st_mode & 07777) != in->perm)
		return fmt("%s: rdump mode 0%o, model 0%o", path, st->st_mode & 07777, in->perm);
	if (st->st_uid != in->uid || st->st_gid != in->gid)
		return fmt("%s: rdump uid/gid %u/%u, model %u/%u", path, st->st_uid, st->st_gid,
			   in->uid, in->gid);
	if (v->fs && o2_inode_get(v->fs, in->ino, &ino) == 0) {
		mtime = o2_inode_info(ino)->mtime.sec;
		o2_inode_unref(ino);
		if (mtime != st->st_mtime)
			return fmt("%s: debugfs's mtime %lld, fscore's %lld", path,
				   (long long)st->st_mtime, (long long)mtime);
	}
	(void)lpath;
	return NULL;
}

/* The longest target a fast symlink holds (in its inode). */
static size_t fast_symlink_room(const struct vol *v)
{
	return o2_fs_super(v->fs)->block_size - 0xC0;
}

static char *rdump_dir(struct vol *v, const char *lpath, const struct m_inode *dir)
{
	char *path = model_path(dir, NULL, 0), *msg = NULL;
	const struct m_dirent **ms = NULL;
	char **names = NULL;
	size_t nn = 0, cap = 0, nm;
	struct stat st;
	DIR *d;
	struct dirent *e;

	if (lstat(lpath, &st) < 0 || !S_ISDIR(st.st_mode)) {
		msg = fmt("%s: rdump made no directory %s", path, lpath);
		goto out;
	}
	d = opendir(lpath);
	if (!d) {
		msg = fmt("%s: opendir %s: %s", path, lpath, strerror(errno));
		goto out;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (nn == cap) {
			cap = cap ? cap * 2 : 64;
			names = realloc(names, cap * sizeof(*names));
			if (!names)
				abort();
		}
		names[nn++] = strdup(e->d_name);
	}
	closedir(d);
	if (nn)
		qsort(names, nn, sizeof(*names), cmp_str_ptr);
	ms = sorted_entries(dir, true, &nm);
	for (size_t a = 0, b = 0; a < nn || b < nm;) {
		int cmp = a == nn ? 1 : b == nm ? -1 :
			  cmp_name(names[a], strlen(names[a]), ms[b]->name, ms[b]->len);

		if (cmp < 0) {
			msg = fmt("%s: rdump wrote \"%s\", which the model does not have", path,
				  names[a]);
			goto out;
		}
		if (cmp > 0) {
			msg = fmt("%s: rdump did not write \"%.*s\"", path, (int)ms[b]->len,
				  ms[b]->name);
			goto out;
		}
		a++;
		b++;
	}
	for (size_t i = 0; i < nm && !msg; i++) {
		const struct m_inode *in = ms[i]->ino;
		char *lp = fmt("%s/%s", lpath, ms[i]->name);
		char *cp = model_path(dir, ms[i]->name, ms[i]->len);

		if (lstat(lp, &st) < 0) {
			msg = fmt("%s: lstat %s: %s", cp, lp, strerror(errno));
		} else if (in->type == M_DIR) {
			msg = rdump_dir(v, lp, in);
		} else if (in->type == M_LNK) {
			char t[8192];
			ssize_t n = readlink(lp, t, sizeof(t) - 1);

			size_t tl = strlen(in->target);
			/*
			 * debugfs.ocfs2 reads an extent-based target into a buffer of whole
			 * blocks and uses it as a C string: when the target fills its blocks
			 * exactly (no room for a NUL in the buffer) what follows in its heap
			 * comes along.  Then only the first tl bytes are the target.
			 */
			if (n > 0 && (size_t)n > tl && tl >= fast_symlink_room(v) &&
			    tl % o2_fs_super(v->fs)->block_size == 0)
				n = (ssize_t)tl;
			if (!S_ISLNK(st.st_mode) || n < 0)
				msg = fmt("%s: rdump made no symlink", cp);
			else if ((t[n] = '\0', strcmp(t, in->target)))
				msg = fmt("%s: rdump symlink target \"%.60s...\" (%zd bytes), model "
					  "\"%.60s...\" (%zu bytes)",
					  cp, t, n, in->target, strlen(in->target));
		} else {
			if (!S_ISREG(st.st_mode))
				msg = fmt("%s: rdump made mode 0%o, want a regular file", cp,
					  st.st_mode);
			else if ((uint64_t)st.st_size != in->size)
				msg = fmt("%s: rdump size %lld, model %" PRIu64, cp,
					  (long long)st.st_size, in->size);
			else
				msg = rdump_file(lp, cp, in);
			if (!msg)
				msg = rdump_check_attrs(v, lp, cp, in, &st);
		}
		free(lp);
		free(cp);
	}
	if (!msg) {
		if (lstat(lpath, &st) == 0)
			msg = rdump_check_attrs(v, lpath, path, dir, &st);
	}
out:
	for (size_t i = 0; i < nn; i++)
		free(names[i]);
	free(names);
	free(ms);
	free(path);
	return msg;
}

char *judge_rdump(struct vol *v, const struct model *m)
{
	char *out_dir = fmt("%s/rdump", v->dir), *cmd, *out, *top, *msg;
	int st;

	cmd = fmt("rm -rf '%s' && mkdir '%s'", out_dir, out_dir);
	judge_run(cmd, NULL);
	free(cmd);
	cmd = fmt(TOOL_PATH "debugfs.ocfs2 -R 'rdump /TOP %s' %s", out_dir, v->image);
	st = judge_run(cmd, &out);
	top = fmt("%s/TOP", out_dir);
	msg = rdump_dir(v, top, m->top);
	if (msg || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char *full = fmt("%s\n  (%s: status 0x%x, said: %.2000s)",
				 msg ? msg : "rdump failed", cmd, st, out);

		free(msg);
		msg = full;
	}
	free(top);
	free(out);
	free(cmd);
	free(out_dir);
	return msg;
}

/* ---- debugfs stat ---- */

struct stat_pick {
	char *path;
	const struct m_inode *in;
};

static bool plain_name(const char *n, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		char c = n[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return len > 0;
}

static void gather_paths(const struct m_inode *dir, struct stat_pick **v, size_t *n, size_t *cap)
{
	for (size_t i = 0; i < dir->nents; i++) {
		const struct m_dirent *de = &dir->ents[i];

		if (!plain_name(de->name, de->len))
			continue;
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 64;
			*v = realloc(*v, *cap * sizeof(**v));
			if (!*v)
				abort();
		}
		(*v)[(*n)++] = (struct stat_pick){ model_path(dir, de->name, de->len), de->ino };
		if (de->ino->type == M_DIR)
			gather_paths(de->ino, v, n, cap);
	}
}

typedef char *(*debugfs_block_fn)(const struct stat_pick *pick, char *blk);

/*
 * One debugfs.ocfs2 session running "VERB PATH" for each pick; fn judges
 * each command's output (opened by the echoed "debugfs: VERB PATH", found
 * in order, so a path picked twice is judged twice).
 */
static char *debugfs_each(struct vol *v, const char *verb, struct stat_pick **pick, size_t np,
			  debugfs_block_fn fn)
{
	char *cmdfile = fmt("%s/debugfs.cmd", v->dir), *cmd, *out = NULL, *msg = NULL, *p;
	FILE *f = fopen(cmdfile, "w");

	ck_assert_msg(f != NULL, "%s: %s", cmdfile, strerror(errno));
	for (size_t i = 0; i < np; i++)
		fprintf(f, "%s %s\n", verb, pick[i]->path);
	fclose(f);
	cmd = fmt(TOOL_PATH "debugfs.ocfs2 -f %s %s", cmdfile, v->image);
	judge_run(cmd, &out);
	p = out;
	for (size_t i = 0; i < np && !msg; i++) {
		char *hdr = fmt("debugfs: %s %s\n", verb, pick[i]->path);
		char *blk = strstr(p, hdr), *next;

		if (!blk) {
			msg = fmt("%s: no debugfs %s output for it:\n%.1500s", pick[i]->path, verb, p);
			free(hdr);
			break;
		}
		blk += strlen(hdr);
		free(hdr);
		next = strstr(blk, "debugfs: ");
		if (next)
			*next = '\0';
		msg = fn(pick[i], blk);
		if (next) {
			*next = 'd';
			p = next;
		}
	}
	unlink(cmdfile);
	free(cmdfile);
	free(cmd);
	free(out);
	return msg;
}

static void free_paths(struct stat_pick *all, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(all[i].path);
	free(all);
}

static char *stat_vs_model(const struct stat_pick *pick, char *blk)
{
	const struct m_inode *in = pick->in;
	unsigned long long inode = 0, size = 0;
	unsigned mode = 0, links = 0, uid = 0, gid = 0;
	char *s;
	bool ok = true;

	s = strstr(blk, "Inode: ");
	ok = ok && s && sscanf(s, "Inode: %llu Mode: %o", &inode, &mode) == 2;
	s = strstr(blk, "User: ");
	ok = ok && s && sscanf(s, "User: %u", &uid) == 1;
	s = strstr(blk, "Group: ");
	ok = ok && s && sscanf(s, "Group: %u", &gid) == 1;
	/* the file size follows the group ("Extended Attributes Inline Size" comes before) */
	s = s ? strstr(s, "Size: ") : NULL;
	ok = ok && s && sscanf(s, "Size: %llu", &size) == 1;
	s = strstr(blk, "Links: ");
	ok = ok && s && sscanf(s, "Links: %u", &links) == 1;
	if (!ok)
		return fmt("%s: cannot parse debugfs stat:\n%.1500s", pick->path, blk);
	uint64_t want_size = in->type == M_REG ? in->size :
			     in->type == M_LNK ? strlen(in->target) : size;

	/* debugfs.ocfs2 prints only the 0777 bits of the mode */
	if (inode != in->ino || (mode & 0777) != (in->perm & 0777u) || links != in->nlink ||
	    uid != in->uid || gid != in->gid || size != want_size)
		return fmt("%s: debugfs stat says inode %llu mode 0%o links %u uid %u gid %u "
			   "size %llu; model inode %" PRIu64 " mode 0%o links %u uid %u gid %u "
			   "size %" PRIu64,
			   pick->path, inode, mode, links, uid, gid, size, in->ino, in->perm,
			   in->nlink, in->uid, in->gid, want_size);
	return NULL;
}

char *judge_debugfs_stat(struct vol *v, const struct model *m, struct rng *r, unsigned nsample)
{
	struct stat_pick *all = NULL, *pick[64];
	size_t n = 0, cap = 0, np = 0;
	char *msg = NULL;

	gather_paths(m->top, &all, &n, &cap);
	if (nsample > 64)
		nsample = 64;
	while (n && np < nsample)
		pick[np++] = &all[rng_below(r, n)];
	if (np)
		msg = debugfs_each(v, "stat", pick, np, stat_vs_model);
	free_paths(all, n);
	return msg;
}

/* ---- debugfs xattr ---- */

struct xattr_shape {
	unsigned type, name_len, inline_;
	unsigned long long value_len;
};

static int cmp_shape(const void *a, const void *b)
{
	const struct xattr_shape *x = a, *y = b;

	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	if (x->name_len != y->name_len)
		return x->name_len < y->name_len ? -1 : 1;
	if (x->value_len != y->value_len)
		return x->value_len < y->value_len ? -1 : 1;
	return (int)x->inline_ - (int)y->inline_;
}

/* One "xattr -v PATH" block: its entries' type, name length, value length, in-store flag. */
static char *xattr_vs_model(const struct stat_pick *pick, char *blk)
{
	const char *path = pick->path;
	const struct m_inode *in = pick->in;
	/* a burst may leave hundreds on one inode, in buckets */
	enum { XMAX = 4096 };
	struct xattr_shape *got = malloc(XMAX * sizeof(*got)), *want = malloc(XMAX * sizeof(*want));
	size_t ng = 0, nw = 0;
	char *msg = NULL;
	unsigned long long total = 0;
	const char *t;

	for (const char *l = blk; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		struct xattr_shape x;
		unsigned idx;

		while (*l == '\t' || *l == ' ')
			l++;
		if (!got || !want)
			abort();
		if (sscanf(l, "#%u %u %u %u %llu", &idx, &x.type, &x.inline_, &x.name_len,
			   &x.value_len) == 5) {
			if (ng == XMAX) {
				msg = fmt("%s: more than %d xattrs in debugfs output", path, XMAX);
				goto out;
			}
			got[ng++] = x;
		}
	}
	t = strstr(blk, "Extended attributes in total: ");
	if (!t || sscanf(t, "Extended attributes in total: %llu", &total) != 1) {
		msg = fmt("%s: cannot parse debugfs xattr:\n%.1500s", path, blk);
		goto out;
	}
	for (size_t i = 0; i < in->nxattrs && nw < XMAX; i++)
		want[nw++] = (struct xattr_shape){ in->xattrs[i].type, in->xattrs[i].name_len,
						   in->xattrs[i].size <= 80, in->xattrs[i].size };
	qsort(got, ng, sizeof(*got), cmp_shape);
	qsort(want, nw, sizeof(*want), cmp_shape);
	bool same = total == in->nxattrs && ng == nw;

	for (size_t i = 0; same && i < ng; i++)
		same = cmp_shape(&got[i], &want[i]) == 0;
	if (!same)
		msg = fmt("%s: debugfs xattr lists %zu entries (total %llu), the model %zu, or they "
			  "differ in type, name length, value length or placement:\n%.1500s", path, ng,
			  total, in->nxattrs, blk);
out:
	free(got);
	free(want);
	return msg;
}

char *judge_debugfs_xattr(struct vol *v, const struct model *m, unsigned nmax)
{
	struct stat_pick *all = NULL, *pick[64];
	size_t n = 0, cap = 0, np = 0;
	char *msg = NULL;

	gather_paths(m->top, &all, &n, &cap);
	if (nmax > 64)
		nmax = 64;
	for (size_t i = 0; i < n && np < nmax; i++)
		if (all[i].in->nxattrs)
			pick[np++] = &all[i];
	if (np)
		msg = debugfs_each(v, "xattr -v", pick, np, xattr_vs_model);
	free_paths(all, n);
	return msg;
}

/* ---- debugfs ls ---- */

struct ls_ent {
	char *name;
	uint64_t ino;
};

static int cmp_ls_ent(const void *a, const void *b)
{
	const struct ls_ent *x = a, *y = b;

	return cmp_name(x->name, strlen(x->name), y->name, strlen(y->name));
}

char *judge_debugfs_ls(struct vol *v, const struct m_inode *dir, const char *path)
{
	char *cmd = fmt(TOOL_PATH "debugfs.ocfs2 -R 'ls %s' %s", path, v->image), *out, *msg = NULL;
	struct ls_ent *ents = NULL;
	const struct m_dirent **ms;
	size_t n = 0, cap = 0, nm;
	char *line, *save = NULL;

	judge_run(cmd, &out);
	free(cmd);
	/* "\tINODE  REC_LEN  NAME_LEN  TYPE  NAME" per entry */
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long ino;
		unsigned reclen, namelen, type;
		int off = 0;

		if (sscanf(line, " %llu %u %u %u %n", &ino, &reclen, &namelen, &type, &off) != 4 ||
		    !off)
			continue;
		if (!strcmp(line + off, ".") || !strcmp(line + off, ".."))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			ents = realloc(ents, cap * sizeof(*ents));
			if (!ents)
				abort();
		}
		ents[n++] = (struct ls_ent){ line + off, ino };
	}
	if (n > 1)
		qsort(ents, n, sizeof(*ents), cmp_ls_ent);
	ms = sorted_entries(dir, false, &nm);
	for (size_t a = 0, b = 0; (a < n || b < nm) && !msg;) {
		int c = a == n ? 1 : b == nm ? -1 :
			cmp_name(ents[a].name, strlen(ents[a].name), ms[b]->name, ms[b]->len);

		if (c < 0)
			msg = fmt("%s: debugfs ls lists \"%s\", the model has no such entry", path,
				  ents[a].name);
		else if (c > 0)
			msg = fmt("%s: debugfs ls does not list \"%.*s\" (%zu entries listed, model %zu)",
				  path, (int)ms[b]->len, ms[b]->name, n, nm);
		else if (ents[a].ino != ms[b]->ino->ino)
			msg = fmt("%s/%s: debugfs ls says inode %" PRIu64 ", model %" PRIu64, path,
				  ents[a].name, ents[a].ino, ms[b]->ino->ino);
		a += c <= 0;
		b += c >= 0;
	}
	free(ms);
	free(ents);
	free(out);
	return msg;
}
