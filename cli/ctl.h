/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ocfs2ctl internals: the state of one invocation and the verbs.
 *
 * Every verb returns the process exit status: 0 success, 1 failure (after
 * one line on stderr, "ocfs2ctl: VERB: WHAT"), 2 usage error.
 */
#ifndef OCFS2CTL_CTL_H
#define OCFS2CTL_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "o2fs/o2fs.h"

#define CTL_EXIT_OK 0
#define CTL_EXIT_FAIL 1
#define CTL_EXIT_USAGE 2

struct ctl {
	const char *verb;
	const char *image;
	bool json;
	bool long_list; /* ls -l */
	/* write verbs (ctl_write.c) */
	bool opt_recursive; /* -r: put, rm */
	bool opt_force;	    /* -f: put (overwrite), rm (a missing path is fine) */
	bool opt_parents;   /* -p: mkdir */
	bool opt_dir;	    /* -d: rm (an empty directory) */
	bool opt_symbolic;  /* -s: ln */
	bool via_daemon;    /* --via-daemon: check */
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	/* Why ctl_open() failed: -errno and the message it printed. */
	int open_err;
	char open_msg[256];
};

/* Print "ocfs2ctl: VERB: message" on stderr; returns CTL_EXIT_FAIL. */
int ctl_fail(struct ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * The words for a failure -err of an fscore call on c->fs: the volume's
 * message for -EUCLEAN (corruption), strerror otherwise.
 */
const char *ctl_strerror(const struct ctl *c, int err);

/* Open c->image read-only; on failure report it and return CTL_EXIT_FAIL. */
int ctl_open(struct ctl *c);
void ctl_close(struct ctl *c);
/* Open c->image read-write, exclusively (ctl_write.c); close it, reporting a failure. */
int ctl_open_rw(struct ctl *c);
int ctl_close_rw(struct ctl *c, int status);

/*
 * Resolve an inode argument: "<N>" is inode (block) number N, anything
 * else a path from the root ("//name" from the system directory; a path
 * without a leading '/' is taken from the root).  Reports failures.
 */
int ctl_get_inode(struct ctl *c, const char *spec, struct o2_inode **ret_inode);

/* Flush stdout; report a write error.  Returns the exit status. */
int ctl_finish_stdout(struct ctl *c, int status);

/* A growable array of fixed-size elements. */
struct ctl_vec {
	void *data;
	size_t len, cap, elsize;
};
void ctl_vec_init(struct ctl_vec *v, size_t elsize);
/* Append a copy of *elem; -ENOMEM. */
int ctl_vec_push(struct ctl_vec *v, const void *elem);
void ctl_vec_free(struct ctl_vec *v);
#define CTL_VEC_AT(v, type, i) (&((type *)(v)->data)[i])

/* The verbs: args are the positional arguments after the verb. */
int verb_info(struct ctl *c, int argc, char **argv);
int verb_slots(struct ctl *c, int argc, char **argv);
int verb_check(struct ctl *c, int argc, char **argv);
int verb_ls(struct ctl *c, int argc, char **argv);
int verb_stat(struct ctl *c, int argc, char **argv);
int verb_cat(struct ctl *c, int argc, char **argv);
/* Offline write verbs (ctl_write.c): open the image read-write on slot 0. */
int verb_put(struct ctl *c, int argc, char **argv);
int verb_mkdir(struct ctl *c, int argc, char **argv);
int verb_rm(struct ctl *c, int argc, char **argv);
int verb_mv(struct ctl *c, int argc, char **argv);
int verb_ln(struct ctl *c, int argc, char **argv);
int verb_reflink(struct ctl *c, int argc, char **argv);

/*
 * format parses its own command line (mkfs.ocfs2's options): argv[0] is
 * "format"; json says --json came before the verb.  Returns the exit status.
 */
int ctl_format_main(int argc, char **argv, bool json);
/* mount, umount, mounts, status, stats, log (ctl_mount.c): argv[0] is the verb. */
int ctl_mount_main(int argc, char **argv, bool json);
/*
 * The same mount and umount for mount.fuse.ocfs2 (mount_helper.c), which
 * first names itself for the messages (default "ocfs2ctl") and says
 * whether results ("DEV mounted on DIR") are printed.  Both return the
 * exit status; the caller checks for root.
 */
void ctl_mount_speaker(const char *name, bool results);
int ctl_mount_volume(const char *opts, const char *device, const char *mnt);
int ctl_umount_volume(const char *mnt, bool force);
/*
 * A reflink on image while a running ocfs2d serves it (paths inside the
 * volume): 0 and *ret_ino when done, -errno with msg when it failed, 1 when
 * no daemon serves image (the caller opens it itself).
 */
int ctl_daemon_reflink(const char *image, const char *src, const char *dst, uint64_t *ret_ino,
		       char *msg, size_t msglen);

/*
 * `ocfs2ctl slots MOUNTPOINT`: the cluster of the volume a running ocfs2d
 * serves there (its lock group's members, the slot map now, the lock
 * cache's counters), asked of the daemon.  An exit status.
 */
int ctl_daemon_cluster_state(const char *mountpoint, bool json);
/*
 * Quotas of a volume ocfs2d serves at mountpoint (ctl_mount.c), through
 * Volume.Quota and Volume.SetQuota: report every id of type (0 users, 1
 * groups) into *ret (g_free it), or set id's limits (id not NULL) and/or
 * the grace periods (grace: {block, inode} seconds).  Exit status; a
 * failure is reported.
 */
int ctl_daemon_quota(const char *mountpoint, unsigned type, struct o2_dquot **ret, size_t *ret_n,
		     uint32_t *bgrace, uint32_t *igrace);
int ctl_daemon_set_quota(const char *mountpoint, unsigned type, const uint32_t *id,
			 const struct o2_dquot *lim, const uint32_t *grace);
/* ocfs2ctl quota (ctl_quota.c): report and set quotas, offline or through ocfs2d. */
int ctl_quota_main(int argc, char **argv, bool json);

/*
 * format or check (verb) of device through the running ocfs2d (started if
 * none runs): the daemon's Format or Check with options (an a{sv}, NULL
 * for none, floating references are taken), its progress as a bar on a
 * terminal (plain lines otherwise; none with json or quiet), ^C cancelling
 * it, and its outcome.  An exit status.
 */
struct _GVariant;
int ctl_daemon_job(const char *verb, const char *device, struct _GVariant *options, bool json,
		   bool silent);

#endif
