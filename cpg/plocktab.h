/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The replicated table of file locks: flock(2) locks and POSIX (fcntl)
 * byte-range locks held through a clustered volume, kept the same on every
 * node (docs/ARCHITECTURE.md, "File locks").
 *
 * As with the cluster lock table (locktab.h), every member of a CPG group
 * runs one table and feeds it the same agreed stream of messages and
 * membership changes (o2pt_deliver, o2pt_confchg), so every member makes
 * the same decisions without asking anyone.  A member that wants a lock,
 * wants one dropped, or asks which lock is in the way multicasts a
 * message; when the message comes back, every table applies it, and the
 * table of the member that sent it answers it with one ANSWER event
 * (the others stay silent).  A request that must wait answers later, when
 * it is granted, cancelled or refused for a deadlock.
 *
 * Locks belong to owners: a member (a daemon) and a number the member
 * gives (FUSE's lock owner: the process's files for POSIX locks, the open
 * file for flock), so two processes on one node conflict as on any Linux
 * filesystem.  Two namespaces per inode, as on Linux: flock locks and POSIX
 * locks never conflict with each other.
 *
 * POSIX locks follow Linux: an owner's locks never conflict with each
 * other; a new lock replaces what the owner held over its range (an
 * upgrade, a downgrade, a hole punched by an unlock), neighbouring and
 * overlapping locks of one type merge, and an unlock splits what it cuts.
 * A request that cannot be granted at once fails with -EAGAIN, or waits
 * (WAIT); a waiting request whose owner is, through a chain of owners
 * waiting for each other, waited for by the holder in its way fails with
 * -EDEADLK, as Linux's F_SETLKW does.  flock locks cover the whole file,
 * one per owner; changing its type drops the old lock first (Linux does
 * the same: the conversion is not atomic).  Waiters are granted whenever
 * nothing conflicts, scanned in arrival order each time a lock goes or
 * shrinks; like Linux, a later waiter may pass an earlier one.
 *
 * Members: every lock and waiter of a member that leaves the group, for
 * whatever reason, goes at once (see the design's "File locks" for why a
 * failed node's file locks need not wait for its fencing).  A member that
 * joins a running group starts unsynced; the lowest synced member sends
 * it a SNAPSHOT taken when it applies the join (or, should that member
 * leave first, when the next one applies that leave); the snapshot names
 * how many inputs after the join it holds, the joiner drops those from
 * what it kept meanwhile and applies the rest.  If every member that was
 * there at the join leaves before a snapshot comes, SYNC_FAILED.
 *
 * Nothing from a peer is trusted: a malformed message is refused with
 * -EBADMSG on every member alike, never a crash; a snapshot whose state
 * does not load is refused by every member alike too, so its joiner stays
 * unsynced everywhere and waits for the one its sender owes it.
 *
 * Threads: none; one caller at a time.  Events come out of o2pt_deliver
 * and o2pt_confchg; the callback may call only o2pt_snapshot (for
 * SEND_SNAPSHOT) back into the table.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "locktab.h" /* struct o2lt_member, struct o2lt_confchg */

/* the largest message o2pt_deliver takes (snapshots included) */
#define O2PT_MSG_MAX (16u << 20)
/* every request fits in this many bytes */
#define O2PT_MSG_SMALL 80

enum o2pt_ns {
	O2PT_POSIX = 0,
	O2PT_FLOCK = 1,
};

enum o2pt_type {
	O2PT_RD = 0, /* shared: F_RDLCK, LOCK_SH */
	O2PT_WR = 1, /* exclusive: F_WRLCK, LOCK_EX */
	O2PT_UN = 2, /* unlock */
};

/* lock request flags */
#define O2PT_F_WAIT 0x1u /* wait rather than fail with -EAGAIN */
#define O2PT_F_TEST 0x2u /* only say what is in the way (F_GETLK); nothing changes */

#define O2PT_EOF UINT64_MAX /* a range's end: to the end of the file, whatever it grows to */

struct o2pt_lock {
	struct o2lt_member member;
	uint64_t owner;
	uint64_t start, end; /* inclusive */
	uint32_t pid;	     /* the process that took it (as the member saw it) */
	int type;	     /* O2PT_RD or O2PT_WR */
};

enum o2pt_event_type {
	O2PT_EV_ANSWER,	       /* member's request reqid is done: error, conflict */
	O2PT_EV_SEND_SNAPSHOT, /* send member a snapshot: call o2pt_snapshot now */
	O2PT_EV_SYNCED,	       /* this table has its state */
	O2PT_EV_SYNC_FAILED,   /* nobody is left to send it: this table is useless */
};

struct o2pt_event {
	enum o2pt_event_type type;
	struct o2lt_member member;
	uint64_t reqid;
	/*
	 * ANSWER: 0, -EAGAIN (a try met a conflict), -EDEADLK, -EINTR (the
	 * waiting request was cancelled), -EINVAL (a request the protocol
	 * forbids, such as one sent before this member was synced).
	 */
	int error;
	/* ANSWER to a TEST: whether a lock is in the way, and which */
	bool conflict;
	struct o2pt_lock lock;
};

typedef void (*o2pt_event_fn)(const struct o2pt_event *ev, void *data);

struct o2pt_table;

struct o2pt_table *o2pt_new(struct o2lt_member self, o2pt_event_fn fn, void *data);
void o2pt_free(struct o2pt_table *t);

/*
 * Apply one message multicast by sender: -EBADMSG if malformed (nothing
 * changed, the same on every member), -EPERM if the sender is not a member,
 * 0 otherwise (misuse becomes an ANSWER with -EINVAL).
 */
int o2pt_deliver(struct o2pt_table *t, struct o2lt_member sender, const void *msg, size_t len);
/* Apply a membership change: -EINVAL if inconsistent (nothing changed). */
int o2pt_confchg(struct o2pt_table *t, const struct o2lt_confchg *c);

bool o2pt_synced(const struct o2pt_table *t);

/* The snapshot for target, during its SEND_SNAPSHOT event (g_malloc'ed). */
int o2pt_snapshot(struct o2pt_table *t, struct o2lt_member target, void **msg, size_t *len);

/*
 * Message encoders: the length written, -EINVAL for a bad argument,
 * -ENOBUFS if size is short (O2PT_MSG_SMALL always does).
 *
 * lock: ns, type (O2PT_RD, O2PT_WR, or O2PT_UN to unlock), the range
 * [start, end] (flock: ignored, the whole file), flags, the pid to report.
 */
ssize_t o2pt_msg_lock(void *buf, size_t size, uint64_t reqid, uint64_t ino, int ns,
		      uint64_t owner, int type, uint64_t start, uint64_t end, unsigned flags,
		      uint32_t pid);
/* cancel: the sender's waiting request wait_reqid answers -EINTR (if it still waits) */
ssize_t o2pt_msg_cancel(void *buf, size_t size, uint64_t reqid, uint64_t wait_reqid);
/* drop: every lock of owner on ino in ns goes (close, process exit) */
ssize_t o2pt_msg_drop(void *buf, size_t size, uint64_t reqid, uint64_t ino, int ns,
		      uint64_t owner);

/* Invariants (an owner's POSIX locks disjoint and unmerged, grants compatible, ...): 0 or -EUCLEAN. */
int o2pt_check(const struct o2pt_table *t, char *why, size_t whylen);
/* The whole state as canonical text (g_malloc'ed): equal tables, equal text. */
char *o2pt_dump(const struct o2pt_table *t);
