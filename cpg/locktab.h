/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The cluster lock table: the state machine of ocfs2d's own lock service.
 *
 * Every member of a volume's CPG group keeps one table.  Corosync delivers
 * the same messages and membership changes to every member in one agreed
 * order; each member feeds them to its table (o2lt_deliver, o2lt_confchg),
 * and since the table is deterministic, every member reaches the same grant
 * decisions without any further exchange.  What a decision means for a
 * member comes out as events (granted, refused, blocking, node failed...);
 * each daemon acts on the events addressed to itself and ignores the rest.
 *
 * Locks are DLM locks reduced to what OCFS2 uses: modes NL, PR and EX, one
 * lock per member and name, a 64-byte value block, try-locks (NOQUEUE,
 * and NOQUEUEBAST: a refused try that still tells the holders in its way),
 * conversions, cancel.  A member that wants a lock multicasts a LOCK
 * message; a member that lowers or drops one multicasts DOWN (with the value
 * block when it leaves EX).  Grants follow the DLM rules: conversions first
 * and in order, new requests strictly first come first served, NL at once.
 * When a request waits, every holder in its way gets one BLOCKING event
 * naming the mode wanted (the DLM's blocking AST), again only if the wanted
 * mode rises.
 *
 * Failures (docs/ARCHITECTURE.md, "Node failure"): a member that leaves through
 * NODEDOWN or PROCDOWN is dead; its queued requests go, and the locks it
 * held stay granted to it, frozen, so nobody can take what it may have been
 * changing.  A FENCED message (sent by a member that saw pacemaker confirm
 * the fencing) marks it fenced: from then on a request flagged RECOVERY
 * passes over its frozen locks (the recovering node takes the super lock and
 * the dead slot's journal lock this way).  A RECOVERED message, sent when the
 * journal is replayed, drops its locks and grants whoever waited for them.
 * The value blocks of locks it held in EX are marked invalid when it dies
 * (it never wrote them back); what the recovery writes in them stays.  A member that
 * leaves through LEAVE has unmounted cleanly: whatever it still held is
 * released at once.
 *
 * A member that joins a running group starts unsynced: it keeps every input
 * it is given until a SNAPSHOT of the table arrives for it, from a member
 * that was in the group when it joined or that it saw get its state since.  The lowest
 * synced member sends it, taken at the moment it applies the join (or at a
 * later membership change, if the first sender dies first); the snapshot
 * names how many inputs after the join it already contains, so the joiner
 * drops those and applies the rest.  If every member that could send it
 * leaves first, the joiner reports SYNC_FAILED and must rejoin.  Requests a
 * member sends before it is synced are refused (-EAGAIN) on every table,
 * and it may not even hear of that (the answer can fall in the part of the
 * stream its snapshot covers): send requests only after SYNCED.
 *
 * A partition heals when corosync merges the rings again, and the members
 * of each side come back to the other with the tables they kept.  Each side
 * still has the other's members dead (not recovered: a fenced node does not
 * come back with the same process), so a member that joins under the
 * nodeid and pid of a dead incarnation is a stale member: STALE_MEMBER is
 * reported, it gets no snapshot, whatever it sends is refused, and it stays
 * ignored until it leaves.  While a stale member is in the group, nobody
 * sends a joiner its snapshot (it could get either side's): joiners wait
 * until one side has left.  Both sides see the other so; which side goes on
 * is the daemon's decision (the side that kept quorum; the other must stop
 * and wait for its fencing).  Groups that formed apart without knowing each
 * other (corosync starts a node on a ring of its own and merges it a moment
 * later) send each other snapshots instead: a synced table sent a snapshot
 * for itself reports STATE_CONFLICT, and its member must stop using its
 * locks and leave (join the group only once quorate to avoid that).

 * The table never trusts a message: anything malformed or contrary to the
 * protocol is refused the same way on every member (-EBADMSG from
 * o2lt_deliver, or a REFUSED event to its sender), never a crash.
 *
 * Threads: none of its own; one caller at a time.  Events are delivered by
 * callback from inside o2lt_deliver/o2lt_confchg; the callback must not call
 * back into the table, except o2lt_snapshot for a SEND_SNAPSHOT event,
 * which must be called from that callback (the snapshot is the table at that
 * point of the stream).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define O2LT_NAME_MAX 64
#define O2LT_LVB_LEN 64
/* the largest message o2lt_deliver takes (snapshots included) */
#define O2LT_MSG_MAX (16u << 20)
/*
 * Snapshots whose state is larger than O2LT_SNAP_PLAIN_MAX bytes travel
 * deflated (zlib): about 123 bytes a lock held by one member before, a
 * tenth of that or less after, so that a group holding hundreds of
 * thousands of locks still fits a joiner's snapshot in one message.  The
 * state itself may not exceed O2LT_SNAP_STATE_MAX bytes (what a joiner
 * allocates to inflate it).
 */
#define O2LT_SNAP_PLAIN_MAX 512u
#define O2LT_SNAP_STATE_MAX (1024u << 20)

enum o2lt_mode {
	O2LT_NL = 0,
	O2LT_PR = 1,
	O2LT_EX = 2,
	O2LT_UNLOCK = 0xff, /* DOWN only: drop the lock */
};

/* LOCK flags */
#define O2LT_F_NOQUEUE 0x1u  /* refuse with -EAGAIN rather than wait */
#define O2LT_F_RECOVERY 0x2u /* pass over locks of fenced dead members */
/* with NOQUEUE: refused all the same, but every holder in the way gets its
 * BLOCKING event, as if the request had waited (the DLM's NOQUEUEBAST) */
#define O2LT_F_NOQUEUEBAST 0x4u
/*
 * The sender uses the lock already: it names something the sender has
 * just made, which no other member can know of yet (a new inode's locks:
 * the kernel's o2dlm makes those locally too, LKM_LOCAL).  Handled as any
 * request; if it cannot be granted at once, its sender is told so
 * (QUEUED), since it believes it holds the lock.
 */
#define O2LT_F_NEW 0x8u

/* A CPG member: a process on a node. */
struct o2lt_member {
	uint32_t nodeid;
	uint32_t pid;
};

/* The reasons corosync gives for a member leaving or joining (cpg.h). */
enum o2lt_reason {
	O2LT_REASON_JOIN = 1,
	O2LT_REASON_LEAVE = 2,
	O2LT_REASON_NODEDOWN = 3,
	O2LT_REASON_NODEUP = 4,
	O2LT_REASON_PROCDOWN = 5,
};

/* A configuration change, as CPG's confchg callback gives it. */
struct o2lt_confchg {
	const struct o2lt_member *members; /* everyone in the group now */
	size_t n_members;
	const struct o2lt_member *left;
	const uint32_t *left_reasons; /* enum o2lt_reason, one per left member */
	size_t n_left;
	const struct o2lt_member *joined;
	size_t n_joined;
};

enum o2lt_event_type {
	O2LT_EV_GRANTED,	 /* member holds name at mode (lvb: the value block) */
	O2LT_EV_REFUSED,	 /* member's request reqid failed with error */
	O2LT_EV_DOWNED,		 /* member's DOWN reqid took effect (mode: now held, or UNLOCK) */
	O2LT_EV_BLOCKING,	 /* member holds name in the way of a request for mode */
	O2LT_EV_NODE_FAILED,	 /* member died holding locks: fence, then recover it */
	O2LT_EV_NODE_FENCED,	 /* member's fencing was confirmed (FENCED) */
	O2LT_EV_NODE_RECOVERED, /* member's locks were dropped (RECOVERED) */
	O2LT_EV_SEND_SNAPSHOT,	 /* this table must send member a snapshot: call o2lt_snapshot now */
	O2LT_EV_SYNCED,		 /* this table has its state (first member, or snapshot applied) */
	O2LT_EV_SYNC_FAILED,	 /* nobody is left who could send this table its state: rejoin */
	O2LT_EV_STATE_CONFLICT,	 /* another member sent this synced table a snapshot: see below */
	O2LT_EV_STALE_MEMBER,	 /* member came back from a partition: ignored until it leaves */
	O2LT_EV_QUEUED,		 /* member's NEW request reqid waits for another holder */
};

struct o2lt_event {
	enum o2lt_event_type type;
	struct o2lt_member member; /* whom it concerns */
	uint64_t reqid;		   /* GRANTED/REFUSED/DOWNED: the request's id */
	const uint8_t *name;	   /* lock name, or NULL */
	size_t namelen;
	int mode;		   /* GRANTED: mode held; BLOCKING: mode wanted; DOWNED: mode now */
	int error;		   /* REFUSED: -EAGAIN, -ECANCELED, -EBUSY, -EINVAL, -ENOENT */
	const uint8_t *lvb;	   /* GRANTED: O2LT_LVB_LEN bytes */
	bool lvb_valid;		   /* GRANTED: the value block was written and is still good */
};

typedef void (*o2lt_event_fn)(const struct o2lt_event *ev, void *data);

struct o2lt_table;

/*
 * A new, unsynced table for the member self.  Its first o2lt_confchg must be
 * the one in which self joins.  Returns NULL only if memory ran out.
 */
struct o2lt_table *o2lt_new(struct o2lt_member self, o2lt_event_fn fn, void *data);
void o2lt_free(struct o2lt_table *t);

/*
 * Apply one message multicast by sender.  -EBADMSG: malformed, nothing
 * changed (every member rejects it the same way); -EPERM: the sender is not
 * a live member (a stale one), ignored; -EPROTO: a snapshot this table
 * could not use (it fails to sync); 0 otherwise, including protocol misuse
 * that became a REFUSED event for the sender.
 */
int o2lt_deliver(struct o2lt_table *t, struct o2lt_member sender, const void *msg, size_t len);

/*
 * Apply a configuration change.  -EINVAL: inconsistent with itself (a member
 * both left and present, a joined member missing from the list, ...) or, on
 * an unsynced table, a first change that does not have self joining; nothing
 * changed.
 */
int o2lt_confchg(struct o2lt_table *t, const struct o2lt_confchg *c);

/* Whether the table has its state (until then, no events but SYNC_*). */
bool o2lt_synced(const struct o2lt_table *t);

/* What the table knows of a member. */
enum o2lt_member_state {
	O2LT_MEMBER_LIVE,   /* in the group */
	O2LT_MEMBER_DEAD,   /* failed: its locks are frozen until it is fenced */
	O2LT_MEMBER_FENCED, /* failed and fenced: recovery may pass its locks */
	O2LT_MEMBER_STALE,  /* back from a healed partition: ignored */
};

struct o2lt_member_info {
	struct o2lt_member id;
	enum o2lt_member_state state;
	bool synced; /* LIVE: has its state (may send requests) */
};

/*
 * Every member the table knows, live ones and failed ones not yet
 * recovered, in the order they joined: fills up to n entries of buf and
 * returns how many there are.  Meaningful once synced.
 */
size_t o2lt_members(const struct o2lt_table *t, struct o2lt_member_info *buf, size_t n);

/*
 * The message that gives target this table's state, at this point of the
 * stream (see SEND_SNAPSHOT).  *ret_msg is g_malloc'ed; the caller
 * multicasts and g_free's it.  -ENOENT: target is not a member waiting for
 * a snapshot; -EAGAIN: this table is not synced; -EMSGSIZE: the state is
 * over O2LT_SNAP_STATE_MAX, or does not fit in O2LT_MSG_MAX even deflated.
 */
int o2lt_snapshot(struct o2lt_table *t, struct o2lt_member target, void **ret_msg, size_t *ret_len);

/*
 * Message encoders.  Each writes into buf (size bytes) and returns the
 * length, -EINVAL for a bad argument (name longer than O2LT_NAME_MAX, mode
 * out of range) or -ENOBUFS if size is too small.  O2LT_MSG_SMALL bytes are
 * always enough.
 */
#define O2LT_MSG_SMALL (24 + 4 + O2LT_NAME_MAX + O2LT_LVB_LEN)
ssize_t o2lt_msg_lock(void *buf, size_t size, uint64_t reqid, const void *name, size_t namelen,
		      int mode, unsigned flags);
/* new_mode: O2LT_NL, O2LT_PR or O2LT_UNLOCK; lvb NULL or the value to store (leaving EX) */
ssize_t o2lt_msg_down(void *buf, size_t size, uint64_t reqid, const void *name, size_t namelen,
		      int new_mode, const void *lvb);
ssize_t o2lt_msg_cancel(void *buf, size_t size, uint64_t reqid, const void *name, size_t namelen);
/*
 * BATCH: LOCK messages (as o2lt_msg_lock made them, len bytes one after
 * another) in one message, applied in order as if sent one by one - the
 * announcement of many new inodes' locks at once.  A batch with anything
 * but well-formed LOCK messages in it is refused whole (-EBADMSG).  Needs
 * HDR (24) + len bytes.
 */
ssize_t o2lt_msg_batch(void *buf, size_t size, const void *locks, size_t len);
ssize_t o2lt_msg_fenced(void *buf, size_t size, uint64_t reqid, uint32_t nodeid);
ssize_t o2lt_msg_recovered(void *buf, size_t size, uint64_t reqid, uint32_t nodeid);

/*
 * Check the table's invariants (modes granted together are compatible, the
 * queues hold what they should, ...).  0, or -EUCLEAN with a description in
 * why.  For tests and fuzzing: a table only ever changes through its inputs,
 * so a failure is a bug in the table.
 */
int o2lt_check(const struct o2lt_table *t, char *why, size_t whylen);

/* The whole state as canonical text (g_malloc'ed): equal tables, equal text. */
char *o2lt_dump(const struct o2lt_table *t);

const char *o2lt_mode_name(int mode);
