/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * POSIX ACLs, as OCFS2 keeps them and as POSIX says they behave.
 *
 * OCFS2 stores an inode's access ACL and a directory's default ACL as
 * extended attributes of their own types (2 and 3) with an empty name;
 * the value is the list of entries (le16 tag, le16 perm, le32 id) with no
 * header.  The xattr interface (system.posix_acl_*) carries the same
 * entries after a 4-byte version header (2): the conversion is that
 * header.
 *
 * The rules tie an ACL to the mode: setting an access ACL sets the
 * permission bits from it (owner, mask or group, other), and an ACL that
 * says no more than the mode is not stored at all; chmod rewrites the
 * ACL's owner, mask (or group) and other entries; a new inode in a
 * directory with a default ACL starts from that ACL, cut down by the mode
 * it is created with (the umask does not apply then), and a new directory
 * inherits the default ACL itself.  All of it happens only on volumes
 * opened with O2_OPEN_ACL, as kernel OCFS2 does it only when mounted with
 * "acl".
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "error.h"
#include "inode_write.h"
#include "internal.h"
#include "journal.h"
#include "write.h"

/* The xattr interface's header: a version, then entries as OCFS2 keeps them. */
#define ACL_XATTR_VERSION 2
#define ACL_HEADER 4u
#define ACL_ENTRY sizeof(struct o2_acl_entry)

struct acl_entry {
	uint16_t tag, perm;
	uint32_t id;
};

struct acl {
	struct acl_entry *e;
	unsigned n;
};

/*
 * Entries as POSIX requires them: each tag known, perms rwx only, one
 * USER_OBJ, GROUP_OBJ and OTHER, a MASK when there are named entries and
 * at most one, named entries in ascending id order without repeats (the
 * order the kernel keeps them in: by tag, then id).
 */
static bool acl_valid(const struct acl *a)
{
	unsigned seen = 0, named = 0;
	int prev_tag = 0;
	uint32_t prev_id = 0;

	for (unsigned i = 0; i < a->n; i++) {
		const struct acl_entry *x = &a->e[i];

		if (x->perm & ~7u)
			return false;
		switch (x->tag) {
		case O2_ACL_USER_OBJ:
		case O2_ACL_GROUP_OBJ:
		case O2_ACL_MASK:
		case O2_ACL_OTHER:
			if (seen & x->tag)
				return false;
			break;
		case O2_ACL_USER:
		case O2_ACL_GROUP:
			named++;
			if (x->id == O2_ACL_UNDEFINED_ID || (prev_tag == x->tag && x->id <= prev_id))
				return false;
			break;
		default:
			return false;
		}
		if (x->tag < prev_tag)
			return false;
		seen |= x->tag;
		prev_tag = x->tag;
		prev_id = x->id;
	}
	if ((seen & (O2_ACL_USER_OBJ | O2_ACL_GROUP_OBJ | O2_ACL_OTHER)) !=
	    (O2_ACL_USER_OBJ | O2_ACL_GROUP_OBJ | O2_ACL_OTHER))
		return false;
	return !named || (seen & O2_ACL_MASK);
}

/* Parse the entries at p (no header); -EINVAL if they do not make an ACL. */
static int acl_parse(const uint8_t *p, size_t len, struct acl *a)
{
	if (len % ACL_ENTRY || len == 0)
		return -EINVAL;
	a->n = (unsigned)(len / ACL_ENTRY);
	a->e = o2_malloc(a->n * sizeof(*a->e));
	if (!a->e)
		return -ENOMEM;
	for (unsigned i = 0; i < a->n; i++) {
		struct o2_acl_entry d;

		memcpy(&d, p + i * ACL_ENTRY, sizeof(d));
		a->e[i] = (struct acl_entry){ le16(d.e_tag), le16(d.e_perm), le32(d.e_id) };
	}
	if (!acl_valid(a)) {
		free(a->e);
		a->e = NULL;
		return -EINVAL;
	}
	return 0;
}

static void acl_store(const struct acl *a, uint8_t *p)
{
	for (unsigned i = 0; i < a->n; i++) {
		struct o2_acl_entry d = { cpu_le16(a->e[i].tag), cpu_le16(a->e[i].perm),
					  cpu_le32(a->e[i].id) };

		memcpy(p + i * ACL_ENTRY, &d, sizeof(d));
	}
}

/* The permission bits the ACL implies; true if the mode says all it says. */
static bool acl_mode(const struct acl *a, uint16_t *mode)
{
	uint16_t m = 0;
	bool equiv = true;

	for (unsigned i = 0; i < a->n; i++) {
		const struct acl_entry *x = &a->e[i];

		switch (x->tag) {
		case O2_ACL_USER_OBJ:
			m |= (uint16_t)((x->perm & 7) << 6);
			break;
		case O2_ACL_GROUP_OBJ:
			m |= (uint16_t)((x->perm & 7) << 3);
			break;
		case O2_ACL_OTHER:
			m |= x->perm & 7;
			break;
		case O2_ACL_MASK: /* sorted after GROUP_OBJ: the mask is what the group bits show */
			m = (uint16_t)((m & ~070) | (x->perm & 7) << 3);
			equiv = false;
			break;
		default:
			equiv = false;
			break;
		}
	}
	*mode = (uint16_t)((*mode & ~0777) | m);
	return equiv;
}

/* A new inode's ACL from its directory's default: cut down by mode, and mode by it. */
static bool acl_create_masq(struct acl *a, uint16_t *mode)
{
	struct acl_entry *group = NULL, *mask = NULL;
	uint16_t m = *mode;
	bool equiv = true;

	for (unsigned i = 0; i < a->n; i++) {
		struct acl_entry *x = &a->e[i];

		switch (x->tag) {
		case O2_ACL_USER_OBJ:
			x->perm &= (m >> 6) & 7;
			m &= (uint16_t)((x->perm << 6) | ~0700);
			break;
		case O2_ACL_OTHER:
			x->perm &= m & 7;
			m &= (uint16_t)(x->perm | ~07);
			break;
		case O2_ACL_GROUP_OBJ:
			group = x;
			break;
		case O2_ACL_MASK:
			mask = x;
			equiv = false;
			break;
		default:
			equiv = false;
			break;
		}
	}
	struct acl_entry *g = mask ? mask : group;

	g->perm &= (m >> 3) & 7;
	m &= (uint16_t)((g->perm << 3) | ~070);
	*mode = (uint16_t)((*mode & ~0777) | (m & 0777));
	return equiv;
}

/* chmod: the owner, mask (or group) and other entries follow the new mode. */
static void acl_chmod(struct acl *a, uint16_t mode)
{
	struct acl_entry *group = NULL, *mask = NULL;

	for (unsigned i = 0; i < a->n; i++) {
		struct acl_entry *x = &a->e[i];

		if (x->tag == O2_ACL_USER_OBJ)
			x->perm = (mode >> 6) & 7;
		else if (x->tag == O2_ACL_OTHER)
			x->perm = mode & 7;
		else if (x->tag == O2_ACL_GROUP_OBJ)
			group = x;
		else if (x->tag == O2_ACL_MASK)
			mask = x;
	}
	(mask ? mask : group)->perm = (mode >> 3) & 7;
}

struct acl_find {
	struct o2_fs *fs;
	unsigned type;
	struct acl *a;
	int r;
};

/* The entry of the ACL's type (its name is empty): read and parsed in one pass. */
static int acl_found(const struct o2_xattr *x, void *arg)
{
	struct acl_find *f = arg;
	uint8_t *buf;

	if (x->type != f->type)
		return 0;
	buf = o2_malloc(x->value_size ? (size_t)x->value_size : 1);
	f->r = buf ? o2_xattr_read_value(f->fs, x, buf) : -ENOMEM;
	if (f->r == 0)
		f->r = acl_parse(buf, (size_t)x->value_size, f->a);
	free(buf);
	return 1;
}

/* The inode's ACL of this type as kept on disk; a->n == 0 if it has none. */
static int acl_read(struct o2_fs *fs, uint64_t ino, unsigned type, struct acl *a)
{
	struct acl_find f = { fs, type, a, 0 };
	int r;

	memset(a, 0, sizeof(*a));
	r = o2_xattr_iterate_blkno(fs, ino, acl_found, &f);
	if (r < 0)
		return r;
	if (f.r == -EINVAL)
		return o2_corrupt(fs, ino, "its %s ACL is not a valid ACL",
				  type == O2_XATTR_ACL_ACCESS ? "access" : "default");
	return f.r;
}

/* ---- the xattr interface ---- */

ssize_t o2_acl_get(struct o2_fs *fs, uint64_t ino, unsigned type, void *buf, size_t size)
{
	struct acl a;
	ssize_t need;
	int r;

	if (type != O2_XATTR_ACL_ACCESS && type != O2_XATTR_ACL_DEFAULT)
		return -EINVAL;
	r = acl_read(fs, ino, type, &a);
	if (r < 0)
		return r;
	if (!a.n)
		return -ENODATA;
	need = (ssize_t)(ACL_HEADER + a.n * ACL_ENTRY);
	if (size && (size_t)need > size) {
		free(a.e);
		return -ERANGE;
	}
	if (size) {
		o2le32 v = cpu_le32(ACL_XATTR_VERSION);

		memcpy(buf, &v, sizeof(v));
		acl_store(&a, (uint8_t *)buf + ACL_HEADER);
	}
	free(a.e);
	return need;
}

/* Parse an ACL in the xattr format; an empty one (a header alone) is none. */
static int acl_from_xattr(const void *value, size_t size, struct acl *a)
{
	memset(a, 0, sizeof(*a));
	o2le32 v;

	if (!value || size < ACL_HEADER)
		return -EINVAL;
	memcpy(&v, value, sizeof(v));
	if (le32(v) != ACL_XATTR_VERSION)
		return -EINVAL;
	if (size == ACL_HEADER)
		return 0;
	return acl_parse((const uint8_t *)value + ACL_HEADER, size - ACL_HEADER, a);
}

/*
 * Inside t: store a (or remove the ACL when a is NULL or empty).  1 if the
 * inode changed, 0 if there was no ACL to remove.
 */
static int acl_put(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib, unsigned type,
		   const struct acl *a)
{
	uint8_t small[O2_ACL_INLINE_BYTES], *buf = small;
	size_t len = a ? a->n * ACL_ENTRY : 0;
	int r;

	if (!len) {
		r = o2_xattr_change_in(t, fs, ib, type, "", 0, NULL, 0, 0);
		return r == -ENODATA ? 0 : r < 0 ? r : 1;
	}
	if (len > sizeof(small) && !(buf = o2_malloc(len)))
		return -ENOMEM;
	acl_store(a, buf);
	r = o2_xattr_change_in(t, fs, ib, type, "", 0, buf, len, 0);
	if (buf != small)
		free(buf);
	return r < 0 ? r : 1;
}

int o2_acl_set(struct o2_fs *fs, uint64_t ino, unsigned type, const void *value, size_t size)
{
	struct o2_trans *t;
	struct o2_buf *ib;
	struct acl a = { 0 };
	int r, e;

	if (!fs->journal)
		return -EROFS;
	if (type != O2_XATTR_ACL_ACCESS && type != O2_XATTR_ACL_DEFAULT)
		return -EINVAL;
	if (!(fs->opts.flags & O2_OPEN_ACL))
		return -EOPNOTSUPP;
	if (value) {
		r = acl_from_xattr(value, size, &a);
		if (r < 0)
			return r;
	}
	r = o2_trans_begin_freeing(fs, O2_XATTR_SET_CREDITS + 2, &t);
	if (r < 0) {
		free(a.e);
		return r;
	}
	r = o2_inode_buf(fs, ino, &ib);
	if (r == 0) {
		struct o2_dinode *di = o2_buf_dinode(ib);
		uint16_t mode = le16(di->i_mode);

		r = o2_check_writable(fs, di, false);
		if (r == 0 && type == O2_XATTR_ACL_DEFAULT && !S_ISDIR(mode) && a.n)
			r = -EACCES;
		/* an access ACL the mode says all of is the mode */
		bool equiv = type == O2_XATTR_ACL_ACCESS && a.n && acl_mode(&a, &mode);

		if (r == 0)
			r = acl_put(t, fs, ib, type, equiv ? NULL : &a);
		/* an access ACL sets the mode; removing no ACL changes nothing */
		bool set_mode = type == O2_XATTR_ACL_ACCESS && a.n;

		if (r > 0 || (r == 0 && set_mode)) {
			r = o2_trans_add(t, ib);
			if (r == 0 && set_mode)
				di->i_mode = cpu_le16(mode);
			if (r == 0)
				o2_touch(fs, di, false, true);
		}
		o2_brelse(fs, ib);
	}
	free(a.e);
	e = o2_trans_finish(t, r);
	return r < 0 ? r : e;
}

/* ---- what the write path calls ---- */

int o2_acl_inherit_plan(struct o2_fs *fs, uint64_t dir, uint16_t *mode, uint16_t umask,
			struct o2_acl_inherit *ret)
{
	struct acl d;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (!(fs->opts.flags & O2_OPEN_ACL))
		return 0;
	r = acl_read(fs, dir, O2_XATTR_ACL_DEFAULT, &d);
	if (r < 0)
		return r;
	if (!d.n) { /* no default ACL: the umask applies */
		*mode = (uint16_t)(*mode & ~(umask & 0777));
		return 0;
	}
	if (S_ISDIR(*mode)) {
		ret->deflt_len = d.n * ACL_ENTRY;
		ret->deflt = o2_malloc(ret->deflt_len);
		if (!ret->deflt) {
			free(d.e);
			return -ENOMEM;
		}
		acl_store(&d, ret->deflt);
	}
	if (!acl_create_masq(&d, mode)) {
		ret->access_len = d.n * ACL_ENTRY;
		ret->access = o2_malloc(ret->access_len);
		if (!ret->access) {
			free(d.e);
			o2_acl_inherit_free(ret);
			return -ENOMEM;
		}
		acl_store(&d, ret->access);
	}
	free(d.e);
	return 0;
}

int o2_acl_inherit_apply(struct o2_trans *t, struct o2_fs *fs, struct o2_buf *ib,
			 const struct o2_acl_inherit *in)
{
	int r = 0;

	if (in->deflt)
		r = o2_xattr_change_in(t, fs, ib, O2_XATTR_ACL_DEFAULT, "", 0, in->deflt,
				       in->deflt_len, 0);
	if (r == 0 && in->access)
		r = o2_xattr_change_in(t, fs, ib, O2_XATTR_ACL_ACCESS, "", 0, in->access,
				       in->access_len, 0);
	return r;
}

void o2_acl_inherit_free(struct o2_acl_inherit *in)
{
	free(in->access);
	free(in->deflt);
	memset(in, 0, sizeof(*in));
}

int o2_acl_chmod_plan(struct o2_fs *fs, uint64_t ino, uint16_t mode, uint8_t **ret, size_t *ret_len)
{
	struct acl a;
	int r;

	*ret = NULL;
	*ret_len = 0;
	if (!(fs->opts.flags & O2_OPEN_ACL))
		return 0;
	r = acl_read(fs, ino, O2_XATTR_ACL_ACCESS, &a);
	if (r < 0 || !a.n)
		return r;
	acl_chmod(&a, mode);
	*ret_len = a.n * ACL_ENTRY;
	*ret = o2_malloc(*ret_len);
	if (*ret)
		acl_store(&a, *ret);
	free(a.e);
	return *ret ? 0 : -ENOMEM;
}
