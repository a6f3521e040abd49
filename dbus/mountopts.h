/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Mount options: the one vocabulary that `ocfs2d -o`, `ocfs2ctl mount -o`
 * and the D-Bus Manager.Mount options share.  As a string they are
 * "a,b=c,..." (mount(8) -o); over D-Bus each option travels under its own
 * name with its own type (flags b, seconds d, counts u).
 */
#ifndef OCFS2D_MOUNTOPTS_H
#define OCFS2D_MOUNTOPTS_H

#include <glib.h>
#include <stdbool.h>

struct mount_opts {
	bool ro;
	bool allow_other;
	bool debug;		/* libfuse's request trace on stderr */
	double entry_timeout;	/* seconds the kernel may cache names */
	double attr_timeout;	/* seconds the kernel may cache attributes */
	unsigned commit_s;	/* commit interval */
	unsigned slot;		/* journal slot (cluster mounts: the one preferred if free) */
	bool norecovery;	/* ro: do not replay a dirty journal first (shows older data) */
	bool nocluster;		/* a clustered volume mounted without the cluster: the
				   operator vouches that no other node uses it */
	unsigned poll_us;	/* spin this long for the next request (0: sleep at once) */
	unsigned threads;	/* FUSE worker threads at most (1: one thread, no hand-offs) */
	bool nouser_xattr;	/* refuse user.* extended attributes */
	bool acl;		/* POSIX ACLs (kernel OCFS2's default is noacl) */
	bool noxattr;		/* serve no extended attributes at all */
	bool uring;		/* serve through FUSE io_uring queues (uring.c) */
	bool nosuid;		/* set-ID bits and file capabilities not honoured (default) */
	bool nodev;		/* device files not opened (default) */
	bool noexec;		/* nothing on the volume executed */
	unsigned lock_cache;	/* clustered: idle cluster locks kept cached at most */
	unsigned localalloc_mb;	/* the local alloc window in MiB (0: the kernel's default) */
	bool localflocks;	/* clustered: flock and POSIX locks kept on this node only */
	bool writeback_cache;	/* local: the kernel keeps written pages, sizes and times and
				   hands them over in batches (errors show at fsync and close) */
};

void mount_opts_default(struct mount_opts *o);
/*
 * Parse "a,b=c,..." into o (on top of what it holds); false with *err set
 * (O2D_ERROR_INVALID_ARGUMENT) on an unknown option or a bad value.
 */
bool mount_opts_parse(const char *s, struct mount_opts *o, GError **err);
/*
 * Apply one option given as a D-Bus value (the type its kind wants).  Returns
 * 1 if applied; 0 if no option has that name; -1 with *err set if the value
 * has the wrong type (G_DBUS_ERROR_INVALID_ARGS) or is out of range
 * (O2D_ERROR_INVALID_ARGUMENT).
 */
int mount_opts_apply_variant(struct mount_opts *o, const char *name, GVariant *value,
			     GError **err);
/* Whether name (without "=value") is an option of the table, or a flag's opposite. */
bool mount_opt_known(const char *name);
/* Checks across options (acl needs xattrs); false with *err set. */
bool mount_opts_check(const struct mount_opts *o, GError **err);
/* The options as a string that mount_opts_parse reads back to the same options. */
char *mount_opts_to_string(const struct mount_opts *o);
/* Whether two option sets are the same. */
bool mount_opts_equal(const struct mount_opts *a, const struct mount_opts *b);

#endif
