/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Cluster-wide flock(2) and POSIX (fcntl) locks of a clustered volume
 * (docs/ARCHITECTURE.md, "File locks"): the daemon's side of the file-lock
 * service (cpg/plockservice.h), on a thread and main context of its own.
 *
 * The FUSE lock operations hand their request here and return; the answer
 * is sent from the file-lock thread when the group has decided (a waiting
 * F_SETLKW or LOCK_EX answers when granted, or EINTR when the kernel
 * interrupts it).  Files are named by their inode (block) number, owners
 * by FUSE's lock owner, so that every node names them alike.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

struct flocks;

/*
 * Join the file-lock group of the volume whose lock group is group, and wait
 * (a few seconds at most) until this node has the group's locks.  NULL with
 * *err set if corosync refuses.
 */
struct flocks *flocks_new(const char *group, GError **err);
/* Leave the group (every lock this node held goes) and free; NULL is fine. */
void flocks_free(struct flocks *f);

/* F_GETLK, F_SETLK/F_SETLKW (sleep), flock(2): each answers req. */
void flocks_getlk(struct flocks *f, fuse_req_t req, uint64_t ino, uint64_t owner,
		  const struct flock *lk);
void flocks_setlk(struct flocks *f, fuse_req_t req, uint64_t ino, uint64_t owner,
		  const struct flock *lk, bool sleep);
void flocks_flock(struct flocks *f, fuse_req_t req, uint64_t ino, uint64_t owner, int op);
/* A close: owner's POSIX locks on ino go before req is answered. */
void flocks_flush(struct flocks *f, fuse_req_t req, uint64_t ino, uint64_t owner);
/* The last close of an open file that took flock locks: they go (no answer). */
void flocks_release(struct flocks *f, uint64_t ino, uint64_t owner);
