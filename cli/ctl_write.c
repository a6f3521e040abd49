/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ocfs2ctl offline write verbs: put, mkdir, rm, mv, ln.
 *
 * Each verb opens the image read-write on slot 0 (replaying that slot's
 * journal if a crash left it dirty), makes its changes through fscore's
 * write path and closes the volume, which commits and checkpoints
 * everything; a failure to close is reported as the verb's failure.  The
 * image must not be in use by anyone else (no daemon, no kernel mount).
 *
 * Paths inside the volume are absolute.  Parents are resolved with
 * o2_path_lookup; the last component is split off here so that a missing
 * parent, an over-long name and an existing entry get their own messages.
 * Where the destination names an existing directory, mv, ln and put act
 * inside it (as mv(1), ln(1) and cp(1) do).
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"
#include "json.h"
#include "progress.h"

#define NAME_MAX_O2 255
#define COPY_CHUNK (1u << 20)

/* ---- opening ---- */

int ctl_open_rw(struct ctl *c)
{
	struct o2_open_opts opts = { .flags = O2_OPEN_RDWR, .slot = 0 };
	char errbuf[256] = "";
	int ret;

	ret = o2_blockdev_open_file(c->image, O2_DEV_EXCLUSIVE, &c->dev);
	if (ret < 0) {
		c->dev = NULL;
		c->open_err = ret;
		snprintf(c->open_msg, sizeof(c->open_msg), "%s",
			 ret == -EBUSY ? "in use (mounted by ocfs2d?)" : strerror(-ret));
		return ctl_fail(c, "%s: %s", c->image, c->open_msg);
	}
	ret = o2_fs_open_opts(c->dev, &opts, &c->fs, errbuf, sizeof(errbuf));
	if (ret < 0) {
		c->fs = NULL;
		o2_blockdev_free(c->dev);
		c->dev = NULL;
		c->open_err = ret;
		if (ret == -ENODATA) {
			snprintf(c->open_msg, sizeof(c->open_msg), "not an OCFS2 volume");
			return ctl_fail(c, "%s is not an OCFS2 volume", c->image);
		}
		snprintf(c->open_msg, sizeof(c->open_msg), "%s", errbuf[0] ? errbuf : strerror(-ret));
		return ctl_fail(c, "%s: %s", c->image, c->open_msg);
	}
	return CTL_EXIT_OK;
}

/*
 * Close the volume (commit and checkpoint).  A failure is the verb's
 * failure, unless it has failed already (then the first message stands).
 */
int ctl_close_rw(struct ctl *c, int status)
{
	int ret;

	if (!c->fs)
		return status;
	ret = o2_fs_close(c->fs);
	c->fs = NULL;
	if (ret < 0 && status == CTL_EXIT_OK)
		return ctl_fail(c, "closing %s: %s (the journal is left for the next open to replay)",
				c->image, strerror(-ret));
	return status;
}

/* ---- paths ---- */

/* The words for a failed fscore call on PATH, as one line. */
static int fail_op(struct ctl *c, const char *path, int err)
{
	switch (err) {
	case -EEXIST:
		return ctl_fail(c, "%s: already exists", path);
	case -ENOENT:
		return ctl_fail(c, "%s: no such file or directory", path);
	case -ENOTDIR:
		return ctl_fail(c, "%s: a component of the path is not a directory", path);
	case -EISDIR:
		return ctl_fail(c, "%s: is a directory", path);
	case -ENOTEMPTY:
		return ctl_fail(c, "%s: directory not empty", path);
	case -ENAMETOOLONG:
		return ctl_fail(c, "%s: name too long (at most %d bytes)", path, NAME_MAX_O2);
	case -ENOSPC:
		return ctl_fail(c, "%s: no space left on the volume", path);
	case -EMLINK:
		return ctl_fail(c, "%s: too many links", path);
	case -EROFS:
		return ctl_fail(c, "%s: the volume has turned read-only: %s", path,
				c->fs ? strerror(-o2_fs_readonly_reason(c->fs)) : "");
	default:
		return ctl_fail(c, "%s: %s", path, ctl_strerror(c, err));
	}
}

/* A path inside the volume, split into its parent and last component. */
struct vpath {
	char *full;   /* normalised: no trailing '/' (except the root) */
	char *parent; /* "/" or "/a/b" */
	const char *name;
	size_t len;
	uint64_t parent_ino;
};

static void vpath_free(struct vpath *p)
{
	free(p->full);
	free(p->parent);
	memset(p, 0, sizeof(*p));
}

/*
 * Check and split path: absolute, not the root, last component not "."
 * or "..", at most 255 bytes.  Reports failures.
 */
static int vpath_split(struct ctl *c, const char *path, struct vpath *ret)
{
	size_t n = strlen(path);
	char *slash;

	memset(ret, 0, sizeof(*ret));
	if (path[0] != '/')
		return ctl_fail(c, "%s: not an absolute path (paths in the volume start with '/')",
				path);
	if (path[1] == '/')
		return ctl_fail(c, "%s: the system directory cannot be changed", path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	ret->full = strndup(path, n);
	if (!ret->full)
		return ctl_fail(c, "%s", strerror(ENOMEM));
	if (n == 1) {
		vpath_free(ret);
		return ctl_fail(c, "%s: the root directory cannot be used here", path);
	}
	slash = strrchr(ret->full, '/');
	ret->name = slash + 1;
	ret->len = strlen(ret->name);
	ret->parent = slash == ret->full ? strdup("/") : strndup(ret->full, (size_t)(slash - ret->full));
	if (!ret->parent) {
		vpath_free(ret);
		return ctl_fail(c, "%s", strerror(ENOMEM));
	}
	if (!strcmp(ret->name, ".") || !strcmp(ret->name, "..")) {
		int st = ctl_fail(c, "%s: '%s' cannot be created or removed", path, ret->name);

		vpath_free(ret);
		return st;
	}
	if (ret->len > NAME_MAX_O2) {
		int st = ctl_fail(c, "%s: name too long (%zu bytes, at most %d)", path, ret->len,
				  NAME_MAX_O2);

		vpath_free(ret);
		return st;
	}
	return CTL_EXIT_OK;
}

/* The inode's mode (0 and a report on failure). */
static int inode_mode(struct ctl *c, const char *path, uint64_t ino, uint16_t *ret_mode)
{
	struct o2_inode *inode;
	int ret = o2_inode_get(c->fs, ino, &inode);

	if (ret < 0)
		return fail_op(c, path, ret);
	*ret_mode = o2_inode_info(inode)->mode;
	o2_inode_unref(inode);
	return CTL_EXIT_OK;
}

/* Resolve p's parent: it must exist and be a directory.  Reports failures. */
static int vpath_parent(struct ctl *c, struct vpath *p)
{
	uint16_t mode;
	int ret, st;

	ret = o2_path_lookup(c->fs, p->parent, &p->parent_ino);
	if (ret == -ENOENT)
		return ctl_fail(c, "%s: parent directory %s does not exist", p->full, p->parent);
	if (ret == -ENOTDIR)
		return ctl_fail(c, "%s: a component of %s is not a directory", p->full, p->parent);
	if (ret < 0)
		return fail_op(c, p->parent, ret);
	st = inode_mode(c, p->parent, p->parent_ino, &mode);
	if (st)
		return st;
	if (!S_ISDIR(mode))
		return ctl_fail(c, "%s: %s is not a directory", p->full, p->parent);
	return CTL_EXIT_OK;
}

/*
 * Look name up in directory dir: 0 and *ret_ino and *ret_mode, -ENOENT, or
 * another -errno (not reported).
 */
static int lookup_child(struct ctl *c, uint64_t dir, const char *name, size_t len,
			uint64_t *ret_ino, uint16_t *ret_mode)
{
	struct o2_inode *d, *x;
	struct o2_dirent de;
	int ret;

	ret = o2_inode_get(c->fs, dir, &d);
	if (ret < 0)
		return ret;
	ret = o2_dir_lookup(c->fs, d, name, len, &de);
	o2_inode_unref(d);
	if (ret < 0)
		return ret;
	ret = o2_inode_get(c->fs, de.ino, &x);
	if (ret < 0)
		return ret;
	*ret_ino = de.ino;
	*ret_mode = o2_inode_info(x)->mode;
	o2_inode_unref(x);
	return 0;
}

/*
 * "If the destination is an existing directory, act inside it": replace
 * dst by dst/base(src) when dst names a directory.  src_base is the last
 * component of the source.  Reports failures.
 */
static int into_dir(struct ctl *c, struct vpath *dst, const char *src_base)
{
	uint64_t ino;
	uint16_t mode;
	char *full;
	int ret;

	ret = lookup_child(c, dst->parent_ino, dst->name, dst->len, &ino, &mode);
	if (ret == -ENOENT)
		return CTL_EXIT_OK;
	if (ret < 0)
		return fail_op(c, dst->full, ret);
	if (!S_ISDIR(mode))
		return CTL_EXIT_OK;
	if (asprintf(&full, "%s/%s", dst->full, src_base) < 0)
		return ctl_fail(c, "%s", strerror(ENOMEM));
	vpath_free(dst);
	ret = vpath_split(c, full, dst);
	free(full);
	if (ret)
		return ret;
	return vpath_parent(c, dst);
}

/*
 * Split a destination: the root directory ("/", "//"...) stands for
 * "/BASE" (the destination is a directory, so the source goes inside).
 */
static int dst_split(struct ctl *c, const char *path, const char *base, struct vpath *ret)
{
	char *full;
	int st;

	if (path[0] != '/' || path[strspn(path, "/")] != '\0' || !base[0])
		return vpath_split(c, path, ret);
	if (asprintf(&full, "/%s", base) < 0)
		return ctl_fail(c, "%s", strerror(ENOMEM));
	st = vpath_split(c, full, ret);
	free(full);
	return st;
}

/* The last component of a host or volume path ("a/b/" -> "b"), into buf. */
static const char *base_name(const char *path, char *buf, size_t len)
{
	size_t n = strlen(path);
	const char *s;

	while (n > 1 && path[n - 1] == '/')
		n--;
	s = path + n;
	while (s > path && s[-1] != '/')
		s--;
	snprintf(buf, len, "%.*s", (int)(path + n - s), s);
	return buf;
}

static void json_done(struct ctl *c, const char *verb, const char *path, uint64_t ino)
{
	struct json_writer w;

	json_init(&w, stdout);
	json_object_begin(&w, NULL);
	json_string(&w, "verb", verb);
	json_string(&w, "image", c->image);
	json_string(&w, "path", path);
	json_uint(&w, "inode", ino);
	json_object_end(&w);
	json_finish(&w);
}

/* ---- mkdir ---- */

static int mkdir_one(struct ctl *c, uint64_t parent, const char *path, const char *name,
		     size_t len, uint64_t *ret_ino)
{
	struct o2_new_inode ni = { .mode = S_IFDIR | 0755, .uid = getuid(), .gid = getgid() };
	int ret = o2_mkdir(c->fs, parent, name, len, &ni, ret_ino);

	if (ret < 0)
		return fail_op(c, path, ret);
	return CTL_EXIT_OK;
}

/* mkdir -p: every missing component; existing directories are fine. */
static int mkdir_parents(struct ctl *c, const char *path, uint64_t *ret_ino)
{
	uint64_t cur = o2_fs_super(c->fs)->root_blkno;
	const char *p = path;
	int status;

	while (*p) {
		const char *end;
		size_t len;
		uint64_t ino;
		uint16_t mode;
		char *sofar;
		int ret;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		end = strchr(p, '/');
		len = end ? (size_t)(end - p) : strlen(p);
		sofar = strndup(path, (size_t)(p - path) + len);
		if (!sofar)
			return ctl_fail(c, "%s", strerror(ENOMEM));
		if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.')) {
			status = ctl_fail(c, "%s: '.' and '..' are not allowed in the path", path);
			free(sofar);
			return status;
		}
		if (len > NAME_MAX_O2) {
			status = ctl_fail(c, "%s: name too long (%zu bytes, at most %d)", sofar, len,
					  NAME_MAX_O2);
			free(sofar);
			return status;
		}
		ret = lookup_child(c, cur, p, len, &ino, &mode);
		if (ret == 0 && !S_ISDIR(mode)) {
			status = ctl_fail(c, "%s: exists and is not a directory", sofar);
			free(sofar);
			return status;
		}
		if (ret == -ENOENT) {
			status = mkdir_one(c, cur, sofar, p, len, &ino);
			if (status) {
				free(sofar);
				return status;
			}
		} else if (ret < 0) {
			status = fail_op(c, sofar, ret);
			free(sofar);
			return status;
		}
		free(sofar);
		cur = ino;
		p += len;
	}
	*ret_ino = cur;
	return CTL_EXIT_OK;
}

int verb_mkdir(struct ctl *c, int argc, char **argv)
{
	const char *path = argv[0];
	struct vpath vp = { 0 };
	uint64_t ino = 0;
	int status;

	(void)argc;
	if (path[0] != '/')
		return ctl_fail(c, "%s: not an absolute path (paths in the volume start with '/')",
				path);
	status = ctl_open_rw(c);
	if (status)
		return status;
	if (c->opt_parents) {
		status = mkdir_parents(c, path, &ino);
	} else {
		status = vpath_split(c, path, &vp);
		if (!status)
			status = vpath_parent(c, &vp);
		if (!status)
			status = mkdir_one(c, vp.parent_ino, vp.full, vp.name, vp.len, &ino);
	}
	vpath_free(&vp);
	status = ctl_close_rw(c, status);
	if (!status && c->json)
		json_done(c, "mkdir", path, ino);
	return status;
}

/* ---- rm ---- */

static int collect_names(const struct o2_dirent *de, void *arg)
{
	struct ctl_vec *v = arg;

	if ((de->name_len == 1 && de->name[0] == '.') ||
	    (de->name_len == 2 && de->name[0] == '.' && de->name[1] == '.'))
		return 0;
	return ctl_vec_push(v, de);
}

/* Remove everything inside directory ino (path for messages), depth first. */
static int remove_contents(struct ctl *c, uint64_t ino, const char *path, uint64_t *count)
{
	struct o2_inode *dir;
	struct ctl_vec names;
	int status = CTL_EXIT_OK, ret;

	ret = o2_inode_get(c->fs, ino, &dir);
	if (ret < 0)
		return fail_op(c, path, ret);
	ctl_vec_init(&names, sizeof(struct o2_dirent));
	/* names first: the directory changes as entries go */
	ret = o2_dir_iterate(c->fs, dir, collect_names, &names);
	o2_inode_unref(dir);
	if (ret < 0) {
		status = ret == -ENOMEM ? ctl_fail(c, "%s", strerror(ENOMEM)) : fail_op(c, path, ret);
		goto out;
	}
	for (size_t i = 0; i < names.len && !status; i++) {
		const struct o2_dirent *de = CTL_VEC_AT(&names, struct o2_dirent, i);
		char *child;

		if (asprintf(&child, "%s/%.*s", strcmp(path, "/") ? path : "", (int)de->name_len,
			     de->name) < 0) {
			status = ctl_fail(c, "%s", strerror(ENOMEM));
			break;
		}
		if (de->type == O2_DT_DIR) {
			status = remove_contents(c, de->ino, child, count);
			if (!status) {
				ret = o2_rmdir(c->fs, ino, de->name, de->name_len);
				if (ret < 0)
					status = fail_op(c, child, ret);
			}
		} else {
			ret = o2_unlink(c->fs, ino, de->name, de->name_len);
			if (ret < 0)
				status = fail_op(c, child, ret);
		}
		if (!status)
			(*count)++;
		free(child);
	}
out:
	ctl_vec_free(&names);
	return status;
}

int verb_rm(struct ctl *c, int argc, char **argv)
{
	struct vpath vp = { 0 };
	uint64_t ino, count = 0;
	uint16_t mode;
	int status, ret;

	(void)argc;
	status = vpath_split(c, argv[0], &vp);
	if (status)
		return status;
	status = ctl_open_rw(c);
	if (status)
		goto out;
	ret = o2_path_lookup(c->fs, vp.parent, &vp.parent_ino);
	if (ret == 0)
		ret = lookup_child(c, vp.parent_ino, vp.name, vp.len, &ino, &mode);
	if (ret == -ENOENT && c->opt_force)
		goto out_close; /* rm -f: nothing to do */
	if (ret < 0) {
		status = fail_op(c, vp.full, ret);
		goto out_close;
	}
	if (S_ISDIR(mode)) {
		if (!c->opt_recursive && !c->opt_dir) {
			status = ctl_fail(c, "%s: is a directory (use -d for an empty one, -r for a tree)",
					  vp.full);
			goto out_close;
		}
		if (c->opt_recursive)
			status = remove_contents(c, ino, vp.full, &count);
		if (!status) {
			ret = o2_rmdir(c->fs, vp.parent_ino, vp.name, vp.len);
			if (ret == -ENOTEMPTY)
				status = ctl_fail(c, "%s: directory not empty (use -r to remove a tree)",
						  vp.full);
			else if (ret < 0)
				status = fail_op(c, vp.full, ret);
		}
	} else {
		ret = o2_unlink(c->fs, vp.parent_ino, vp.name, vp.len);
		if (ret < 0)
			status = fail_op(c, vp.full, ret);
	}
	if (!status)
		count++;
out_close:
	status = ctl_close_rw(c, status);
	if (!status && c->json) {
		struct json_writer w;

		json_init(&w, stdout);
		json_object_begin(&w, NULL);
		json_string(&w, "verb", "rm");
		json_string(&w, "image", c->image);
		json_string(&w, "path", vp.full);
		json_uint(&w, "removed", count);
		json_object_end(&w);
		json_finish(&w);
	}
out:
	vpath_free(&vp);
	return status;
}

/* ---- mv ---- */

int verb_mv(struct ctl *c, int argc, char **argv)
{
	struct vpath from = { 0 }, to = { 0 };
	char base[PATH_MAX];
	uint64_t ino = 0;
	uint16_t mode;
	int status, ret;

	(void)argc;
	status = vpath_split(c, argv[0], &from);
	if (!status)
		status = dst_split(c, argv[1], base_name(from.full, base, sizeof(base)), &to);
	if (status)
		goto out;
	status = ctl_open_rw(c);
	if (status)
		goto out;
	status = vpath_parent(c, &from);
	if (!status)
		status = vpath_parent(c, &to);
	if (status)
		goto out_close;
	ret = lookup_child(c, from.parent_ino, from.name, from.len, &ino, &mode);
	if (ret < 0) {
		status = fail_op(c, from.full, ret);
		goto out_close;
	}
	if (strcmp(from.full, to.full)) {
		status = into_dir(c, &to, base_name(from.full, base, sizeof(base)));
		if (status)
			goto out_close;
	}
	ret = o2_rename(c->fs, from.parent_ino, from.name, from.len, to.parent_ino, to.name, to.len,
			0);
	if (ret == -EINVAL && S_ISDIR(mode))
		status = ctl_fail(c, "cannot move %s into itself (%s)", from.full, to.full);
	else if (ret == -ENOTEMPTY)
		status = ctl_fail(c, "%s: directory not empty", to.full);
	else if (ret == -ENOTDIR)
		status = ctl_fail(c, "%s: cannot replace a non-directory with directory %s", to.full,
				  from.full);
	else if (ret == -EISDIR)
		status = ctl_fail(c, "%s: cannot replace a directory with non-directory %s", to.full,
				  from.full);
	else if (ret < 0)
		status = fail_op(c, to.full, ret);
out_close:
	status = ctl_close_rw(c, status);
	if (!status && c->json)
		json_done(c, "mv", to.full, ino);
out:
	vpath_free(&from);
	vpath_free(&to);
	return status;
}

/* ---- ln, reflink ---- */

/*
 * The new name of ln or reflink: dst (a directory takes target's base
 * name), its parent resolved, the volume open for writing.  On failure
 * the volume is closed again.
 */
static int link_open(struct ctl *c, const char *target, const char *dst, struct vpath *to)
{
	char base[PATH_MAX];
	int status;

	base_name(target, base, sizeof(base));
	status = dst_split(c, dst, base, to);
	if (status)
		return status;
	status = ctl_open_rw(c);
	if (status)
		return status;
	status = vpath_parent(c, to);
	if (!status)
		status = into_dir(c, to, base);
	return status ? ctl_close_rw(c, status) : CTL_EXIT_OK;
}

int verb_ln(struct ctl *c, int argc, char **argv)
{
	const char *target = argv[0];
	struct vpath to = { 0 };
	uint64_t ino = 0, src;
	uint16_t mode;
	int status, ret;

	(void)argc;
	if (!c->opt_symbolic && target[0] != '/')
		return ctl_fail(c, "%s: not an absolute path (paths in the volume start with '/')",
				target);
	if (c->opt_symbolic && (!*target || strlen(target) >= PATH_MAX))
		return ctl_fail(c, "symlink target must be 1 to %d bytes", PATH_MAX - 1);
	status = link_open(c, target, argv[1], &to);
	if (status)
		goto out;
	if (c->opt_symbolic) {
		struct o2_new_inode ni = { .mode = S_IFLNK | 0777, .uid = getuid(), .gid = getgid() };

		ret = o2_symlink(c->fs, to.parent_ino, to.name, to.len, target, &ni, &ino);
		if (ret < 0)
			status = fail_op(c, to.full, ret);
		goto out_close;
	}
	ret = o2_path_lookup(c->fs, target, &src);
	if (ret < 0) {
		status = fail_op(c, target, ret);
		goto out_close;
	}
	status = inode_mode(c, target, src, &mode);
	if (status)
		goto out_close;
	if (S_ISDIR(mode)) {
		status = ctl_fail(c, "%s: hard links to directories are not allowed", target);
		goto out_close;
	}
	ret = o2_link(c->fs, src, to.parent_ino, to.name, to.len);
	if (ret < 0)
		status = fail_op(c, to.full, ret);
	ino = src;
out_close:
	status = ctl_close_rw(c, status);
	if (!status && c->json)
		json_done(c, c->opt_symbolic ? "ln -s" : "ln", to.full, ino);
out:
	vpath_free(&to);
	return status;
}

int verb_reflink(struct ctl *c, int argc, char **argv)
{
	const char *target = argv[0];
	struct vpath to = { 0 };
	struct o2_inode *in;
	uint64_t ino = 0, src;
	int status, ret;

	(void)argc;
	if (target[0] != '/')
		return ctl_fail(c, "%s: not an absolute path (paths in the volume start with '/')",
				target);
	/* a volume ocfs2d has mounted: the daemon makes it */
	char msg[512];

	ret = ctl_daemon_reflink(c->image, target, argv[1], &ino, msg, sizeof(msg));
	if (ret <= 0) {
		if (ret < 0)
			return ctl_fail(c, "%s", msg);
		if (c->json)
			json_done(c, "reflink", argv[1], ino);
		return CTL_EXIT_OK;
	}
	status = link_open(c, target, argv[1], &to);
	if (status)
		goto out;
	ret = o2_path_lookup(c->fs, target, &src);
	if (ret == 0)
		ret = o2_inode_get(c->fs, src, &in);
	if (ret < 0) {
		status = fail_op(c, target, ret);
		goto out_close;
	}
	const struct o2_inode_info *info = o2_inode_info(in);
	/* as cp -p --reflink: the copy keeps the mode and owner */
	struct o2_new_inode ni = { .mode = info->mode, .uid = info->uid, .gid = info->gid };
	uint16_t type = info->mode & S_IFMT;

	o2_inode_unref(in);
	if (type != S_IFREG) {
		status = type == S_IFDIR ? fail_op(c, target, -EISDIR) :
					   ctl_fail(c, "%s: not a regular file", target);
		goto out_close;
	}
	ret = o2_reflink(c->fs, src, to.parent_ino, to.name, to.len, &ni, &ino);
	if (ret < 0)
		status = fail_op(c, to.full, ret);
out_close:
	status = ctl_close_rw(c, status);
	if (!status && c->json)
		json_done(c, "reflink", to.full, ino);
out:
	vpath_free(&to);
	return status;
}

/* ---- put ---- */

struct put_link {
	dev_t dev;
	ino_t ino;
	uint64_t o2ino;
};

struct put_state {
	struct ctl *c;
	uint8_t *buf;
	struct ctl_vec links; /* struct put_link: host files with several links */
	uint64_t files, dirs, symlinks, special, hard_links, bytes;
	/* put -r's progress: sizes and entries (not directories) of the tree */
	struct progress prog;
	uint64_t total_bytes, total_entries;
	uint64_t done_bytes; /* the sizes of the files copied so far */
};

/* What the tree under path holds: entries other than directories, and their sizes. */
static void put_count(const char *path, uint64_t *entries, uint64_t *bytes)
{
	struct stat st;
	DIR *d;
	struct dirent *e;

	if (lstat(path, &st) < 0)
		return;
	if (!S_ISDIR(st.st_mode)) {
		(*entries)++;
		if (S_ISREG(st.st_mode))
			*bytes += (uint64_t)st.st_size;
		return;
	}
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char *sub;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (asprintf(&sub, "%s/%s", path, e->d_name) < 0)
			break;
		put_count(sub, entries, bytes);
		free(sub);
	}
	closedir(d);
}

/*
 * Show how far put -r is: in_file bytes into the file being copied; 100%
 * only once all is (final), with what it copied.
 */
static void put_progress(struct put_state *ps, uint64_t in_file, bool final)
{
	uint64_t done = ps->done_bytes + in_file;
	uint64_t entries = ps->files + ps->symlinks + ps->special + ps->hard_links;
	char d[32], t[32], detail[128];
	double f;

	if (ps->prog.off)
		return;
	/* by bytes; by entries for a tree of empty files */
	f = ps->total_bytes ? (double)done / (double)ps->total_bytes
	    : ps->total_entries ? (double)entries / (double)ps->total_entries
				: 1;
	if (!final && f > 0.999)
		f = 0.999;
	progress_size(d, sizeof(d), done);
	progress_size(t, sizeof(t), ps->total_bytes);
	snprintf(detail, sizeof(detail), "%s of %s, %" PRIu64 " of %" PRIu64 " files", d, t,
		 entries, ps->total_entries);
	progress_show(&ps->prog, f, -1, detail);
}

static int set_times(struct put_state *ps, const char *path, uint64_t ino, const struct stat *st)
{
	struct o2_setattr sa = {
		.atime = { st->st_atim.tv_sec, (uint32_t)st->st_atim.tv_nsec },
		.mtime = { st->st_mtim.tv_sec, (uint32_t)st->st_mtim.tv_nsec },
	};
	int ret = o2_setattr(ps->c->fs, ino, &sa, O2_SET_ATIME | O2_SET_MTIME);

	if (ret < 0)
		return fail_op(ps->c, path, ret);
	return CTL_EXIT_OK;
}

/* Copy the data of host fd (size bytes) into inode ino, skipping holes. */
static int copy_data(struct put_state *ps, int fd, const char *src, const char *dst, uint64_t ino,
		     uint64_t size)
{
	off_t pos = 0;
	bool sparse_ok = true;
	int ret;

	while ((uint64_t)pos < size) {
		off_t data = pos, hole;

		if (sparse_ok) {
			data = lseek(fd, pos, SEEK_DATA);
			if (data < 0 && errno == ENXIO)
				break; /* only a hole remains */
			if (data < 0) {
				sparse_ok = false; /* no SEEK_DATA here: copy everything */
				data = pos;
			}
		}
		hole = sparse_ok ? lseek(fd, data, SEEK_HOLE) : (off_t)size;
		if (hole < 0)
			hole = (off_t)size;
		pos = data;
		while (pos < hole) {
			size_t want = (uint64_t)(hole - pos) < COPY_CHUNK ? (size_t)(hole - pos) :
									    COPY_CHUNK;
			ssize_t n = pread(fd, ps->buf, want, pos);
			ssize_t w;

			if (n < 0)
				return ctl_fail(ps->c, "%s: reading: %s", src, strerror(errno));
			if (n == 0) {
				hole = pos; /* the file shrank under us */
				size = (uint64_t)pos;
				break;
			}
			w = o2_write(ps->c->fs, ino, (uint64_t)pos, ps->buf, (size_t)n);
			if (w < 0)
				return fail_op(ps->c, dst, (int)w);
			if (w != n)
				return ctl_fail(ps->c, "%s: short write at offset %lld (no space left?)",
						dst, (long long)pos);
			ps->bytes += (uint64_t)n;
			pos += n;
			put_progress(ps, (uint64_t)pos, false);
		}
	}
	/* the size, when the file ends in a hole */
	ret = o2_truncate(ps->c->fs, ino, size);
	if (ret < 0)
		return fail_op(ps->c, dst, ret);
	return CTL_EXIT_OK;
}

static int put_tree(struct put_state *ps, const char *src, uint64_t parent, const char *dst,
		    const char *name, size_t len, bool top);

static int put_dir_entries(struct put_state *ps, const char *src, uint64_t dir, const char *dst)
{
	struct dirent **ents = NULL;
	int n, status = CTL_EXIT_OK;

	n = scandir(src, &ents, NULL, alphasort);
	if (n < 0)
		return ctl_fail(ps->c, "%s: %s", src, strerror(errno));
	for (int i = 0; i < n; i++) {
		const char *nm = ents[i]->d_name;
		char *s = NULL, *d = NULL;

		if (status || !strcmp(nm, ".") || !strcmp(nm, ".."))
			goto next;
		if (strlen(nm) > NAME_MAX_O2) {
			status = ctl_fail(ps->c, "%s/%s: name too long for OCFS2 (at most %d bytes)",
					  src, nm, NAME_MAX_O2);
			goto next;
		}
		if (asprintf(&s, "%s/%s", src, nm) < 0 ||
		    asprintf(&d, "%s/%s", strcmp(dst, "/") ? dst : "", nm) < 0) {
			status = ctl_fail(ps->c, "%s", strerror(ENOMEM));
			goto next;
		}
		status = put_tree(ps, s, dir, d, nm, strlen(nm), false);
next:
		free(s);
		free(d);
		free(ents[i]);
	}
	free(ents);
	return status;
}

/*
 * Copy host path src to name in directory parent (dst is its volume path).
 * An existing destination: a directory is merged into; anything else needs
 * -f (regular files are overwritten in place, other kinds replaced).
 */
static int put_tree(struct put_state *ps, const char *src, uint64_t parent, const char *dst,
		    const char *name, size_t len, bool top)
{
	struct ctl *c = ps->c;
	struct o2_new_inode ni;
	struct stat st;
	uint64_t ino = 0, old_ino;
	uint16_t old_mode = 0;
	bool exists;
	int status, ret, fd;

	if (lstat(src, &st) < 0)
		return ctl_fail(c, "%s: %s", src, strerror(errno));
	if (S_ISDIR(st.st_mode) && top && !c->opt_recursive)
		return ctl_fail(c, "%s: is a directory (use -r to copy a tree)", src);
	ret = lookup_child(c, parent, name, len, &old_ino, &old_mode);
	if (ret < 0 && ret != -ENOENT)
		return fail_op(c, dst, ret);
	exists = ret == 0;
	ni = (struct o2_new_inode){ .mode = (uint16_t)st.st_mode, .uid = st.st_uid, .gid = st.st_gid };

	if (S_ISDIR(st.st_mode)) {
		if (exists && !S_ISDIR(old_mode))
			return ctl_fail(c, "%s: exists and is not a directory", dst);
		if (exists) {
			ino = old_ino;
		} else {
			ret = o2_mkdir(c->fs, parent, name, len, &ni, &ino);
			if (ret < 0)
				return fail_op(c, dst, ret);
			ps->dirs++;
		}
		status = put_dir_entries(ps, src, ino, dst);
		if (!status && !exists)
			status = set_times(ps, dst, ino, &st);
		return status;
	}

	if (exists) {
		if (S_ISDIR(old_mode))
			return ctl_fail(c, "%s: is a directory, cannot overwrite it with %s", dst, src);
		if (!c->opt_force)
			return ctl_fail(c, "%s: already exists (use -f to overwrite)", dst);
		if (!S_ISREG(st.st_mode) || !S_ISREG(old_mode)) {
			ret = o2_unlink(c->fs, parent, name, len);
			if (ret < 0)
				return fail_op(c, dst, ret);
			exists = false;
		}
	}

	/* a second name of a host file copied already: a hard link here too */
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1 && !exists) {
		for (size_t i = 0; i < ps->links.len; i++) {
			struct put_link *l = CTL_VEC_AT(&ps->links, struct put_link, i);

			if (l->dev == st.st_dev && l->ino == st.st_ino) {
				ret = o2_link(c->fs, l->o2ino, parent, name, len);
				if (ret < 0)
					return fail_op(c, dst, ret);
				ps->hard_links++;
				if (S_ISREG(st.st_mode))
					ps->done_bytes += (uint64_t)st.st_size;
				put_progress(ps, 0, false);
				return CTL_EXIT_OK;
			}
		}
	}

	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlink(src, target, sizeof(target) - 1);

		if (n < 0)
			return ctl_fail(c, "%s: %s", src, strerror(errno));
		target[n] = '\0';
		ret = o2_symlink(c->fs, parent, name, len, target, &ni, &ino);
		if (ret < 0)
			return fail_op(c, dst, ret);
		ps->symlinks++;
	} else if (S_ISREG(st.st_mode)) {
		fd = open(src, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return ctl_fail(c, "%s: %s", src, strerror(errno));
		if (exists) {
			struct o2_setattr sa = { .mode = st.st_mode & 07777, .uid = st.st_uid,
						 .gid = st.st_gid };

			ino = old_ino;
			ret = o2_truncate(c->fs, ino, 0);
			if (ret == 0)
				ret = o2_setattr(c->fs, ino, &sa, O2_SET_MODE | O2_SET_UID | O2_SET_GID);
		} else {
			ret = o2_create(c->fs, parent, name, len, &ni, &ino);
		}
		if (ret < 0) {
			close(fd);
			return fail_op(c, dst, ret);
		}
		status = copy_data(ps, fd, src, dst, ino, (uint64_t)st.st_size);
		close(fd);
		if (status)
			return status;
		ps->files++;
		ps->done_bytes += (uint64_t)st.st_size;
	} else {
		ni.rdev = (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) ? st.st_rdev : 0;
		ret = o2_create(c->fs, parent, name, len, &ni, &ino);
		if (ret < 0)
			return fail_op(c, dst, ret);
		ps->special++;
	}
	put_progress(ps, 0, false);
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		struct put_link l = { st.st_dev, st.st_ino, ino };

		if (ctl_vec_push(&ps->links, &l) < 0)
			return ctl_fail(c, "%s", strerror(ENOMEM));
	}
	if (!S_ISLNK(st.st_mode))
		return set_times(ps, dst, ino, &st);
	return CTL_EXIT_OK;
}

int verb_put(struct ctl *c, int argc, char **argv)
{
	const char *src = argv[0];
	struct put_state ps = { .c = c };
	struct vpath to = { 0 };
	char base[PATH_MAX];
	struct stat st;
	int status;

	(void)argc;
	if (lstat(src, &st) < 0)
		return ctl_fail(c, "%s: %s", src, strerror(errno));
	if (S_ISDIR(st.st_mode) && !c->opt_recursive)
		return ctl_fail(c, "%s: is a directory (use -r to copy a tree)", src);
	base_name(src, base, sizeof(base));
	if (strlen(base) > NAME_MAX_O2)
		return ctl_fail(c, "%s: name too long for OCFS2 (at most %d bytes)", src, NAME_MAX_O2);
	status = dst_split(c, argv[1], strcmp(base, ".") && strcmp(base, "..") ? base : "", &to);
	if (status)
		return status;
	ps.buf = malloc(COPY_CHUNK);
	if (!ps.buf) {
		status = ctl_fail(c, "%s", strerror(ENOMEM));
		goto out;
	}
	ctl_vec_init(&ps.links, sizeof(struct put_link));
	status = ctl_open_rw(c);
	if (status)
		goto out;
	status = vpath_parent(c, &to);
	/* "put -r IMAGE dir/. DST" and the like copy the contents into DST itself */
	if (!status && base[0] && strcmp(base, "/") && strcmp(base, ".") && strcmp(base, ".."))
		status = into_dir(c, &to, base);
	/*
	 * put -r shows how far it is: a bar on a terminal, a line per tenth
	 * otherwise (not with --json, whose document is all it prints)
	 */
	progress_init(&ps.prog, "Copying", "put", true, !c->opt_recursive || c->json);
	if (!ps.prog.off)
		put_count(src, &ps.total_entries, &ps.total_bytes);
	if (!status)
		status = put_tree(&ps, src, to.parent_ino, to.full, to.name, to.len, true);
	if (!status)
		put_progress(&ps, 0, true);
	progress_end(&ps.prog);
	status = ctl_close_rw(c, status);
	if (!status && c->json) {
		struct json_writer w;

		json_init(&w, stdout);
		json_object_begin(&w, NULL);
		json_string(&w, "verb", "put");
		json_string(&w, "image", c->image);
		json_string(&w, "source", src);
		json_string(&w, "path", to.full);
		json_uint(&w, "files", ps.files);
		json_uint(&w, "directories", ps.dirs);
		json_uint(&w, "symlinks", ps.symlinks);
		json_uint(&w, "special", ps.special);
		json_uint(&w, "hard_links", ps.hard_links);
		json_uint(&w, "bytes", ps.bytes);
		json_object_end(&w);
		json_finish(&w);
	}
out:
	ctl_vec_free(&ps.links);
	free(ps.buf);
	vpath_free(&to);
	return status;
}
