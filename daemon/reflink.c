// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Reflinks on a mounted volume, asked for by path through the D-Bus API
 * (Volume.Reflink) rather than through the kernel, which has no FUSE
 * request for one.
 *
 * It works on the volume as the FUSE operations do - under the volume
 * lock, on fscore - and afterwards tells the kernel what it changed behind
 * the kernel's back, so that its caches stay right.
 */

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "ocfs2d.h"

/*
 * Resolve an absolute path inside the volume (v->lock held): with ret_name
 * NULL, the inode path names; otherwise its parent directory, with
 * *ret_name pointing at the last component (inside path).  0 or -errno.
 */
static int resolve_locked(struct volume *v, const char *path, uint64_t *ret,
			  const char **ret_name)
{
	const char *slash = strrchr(path, '/');

	if (path[0] != '/')
		return -EINVAL;
	if (!ret_name)
		return o2_path_lookup(v->fs, path, ret);
	g_autofree char *parent = g_strndup(path, (gsize)(slash - path));

	*ret_name = slash + 1;
	return o2_path_lookup(v->fs, parent[0] ? parent : "/", ret);
}

int reflink_by_path(struct volume *v, const char *src, const char *dst, uint64_t *ret_ino,
		    char **ret_msg)
{
	struct o2_inode *in;
	uint64_t sino = 0, pino = 0, ino = 0;
	const char *name = NULL;
	int r;

	*ret_msg = NULL;
	if (v->opts.ro)
		return -EROFS;
	if (v->cluster) {
		/* it would change inodes without their cluster locks */
		*ret_msg = g_strdup("reflinks are not yet made on a clustered volume");
		return -EOPNOTSUPP;
	}
	/* the copy shares what the source holds, written pages included */
	volume_take_kernel_pages(v);
	g_mutex_lock(&v->lock);
	r = resolve_locked(v, src, &sino, NULL);
	if (r == 0)
		r = o2_inode_get(v->fs, sino, &in);
	if (r < 0) {
		*ret_msg = g_strdup_printf("%s: %s", src, g_strerror(-r));
		goto out;
	}
	const struct o2_inode_info *info = o2_inode_info(in);
	/* the copy is owned as the source is, as cp --reflink -p would leave it */
	struct o2_new_inode ni = { .mode = info->mode, .uid = info->uid, .gid = info->gid };

	o2_inode_unref(in);
	if (!S_ISREG(ni.mode)) {
		r = S_ISDIR(ni.mode) ? -EISDIR : -EINVAL;
		*ret_msg = g_strdup_printf("%s: %s", src,
					   S_ISDIR(ni.mode) ? "is a directory" : "not a regular file");
		goto out;
	}
	/* an existing directory takes the source's name, as cp does */
	uint64_t d;

	if (resolve_locked(v, dst, &d, NULL) == 0 && o2_inode_get(v->fs, d, &in) == 0) {
		bool dir = S_ISDIR(o2_inode_info(in)->mode);

		o2_inode_unref(in);
		if (dir) {
			pino = d;
			name = strrchr(src, '/') + 1;
		}
	}
	if (!name)
		r = resolve_locked(v, dst, &pino, &name);
	if (r == 0)
		r = o2_reflink(v->fs, sino, pino, name, strlen(name), &ni, &ino);
	/* the caller is told it exists: it must survive a crash from now on */
	if (r == 0)
		r = o2_fs_sync(v->fs);
	if (r < 0)
		*ret_msg = g_strdup_printf("%s: %s", dst,
					   r == -EOPNOTSUPP || r == -EUCLEAN ? o2_fs_error(v->fs)
									     : g_strerror(-r));
	volume_note_locked(v, "reflink", r);
out:
	g_mutex_unlock(&v->lock);
	if (r == 0) {
		/* the kernel may hold a negative entry for the name, the
		 * directory's size and times changed, and a listing of it it
		 * keeps (op_opendir) lacks the name */
		session_notify_inval_entry(v, volume_node_id(v, pino), name);
		session_notify_inval_inode(v, volume_node_id(v, pino), 0, 0);
		*ret_ino = ino;
	}
	return r;
}
