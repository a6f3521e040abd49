/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The CPG lock service: a lock table (locktab.h) kept in step over a
 * corosync CPG group.
 *
 * o2ls_new joins the group (one per volume: name it after the volume UUID)
 * and hooks the CPG connection into the thread-default GLib main context.
 * Requests are multicast in agreed order and take effect when CPG delivers
 * them back, on every member at the same point of the stream; their
 * outcome comes to the callback as lock-table events.  The callback gets
 * the events addressed to this member (GRANTED, REFUSED, DOWNED, BLOCKING),
 * every member's NODE_* events, STALE_MEMBER, and SYNCED, SYNC_FAILED and
 * STATE_CONFLICT; snapshots for joiners are sent here, unseen.  Requests
 * wait for SYNCED: before it they fail with -EAGAIN.
 *
 * If corosync goes away (its connection fails) the callback's lost()
 * runs once; the service then does nothing more, and the caller must
 * treat every lock as gone: the other members will see this one fail.
 *
 * Threads: the callbacks run in the main context o2ls_new was called in,
 * and so must o2ls_members and o2ls_free.  The request functions
 * (o2ls_lock, o2ls_lock_batch, o2ls_down, o2ls_cancel, o2ls_fenced,
 * o2ls_recovered), o2ls_self and o2ls_synced may be called from any
 * thread, the callbacks included: a request goes to corosync from the
 * caller's thread, and requests go out in the order of their ids.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "locktab.h"

struct o2ls;

struct o2ls_callbacks {
	void (*event)(const struct o2lt_event *ev, void *data);
	void (*lost)(void *data);
};

#define O2LS_ERROR (o2ls_error_quark())
GQuark o2ls_error_quark(void);

/*
 * Join group (at most 127 bytes).  NULL with error set if corosync cannot
 * be reached or the join fails (the corosync error is in the message).
 */
struct o2ls *o2ls_new(const char *group, const struct o2ls_callbacks *cb, void *data,
		      GError **error);

/*
 * Leave the group and free.  A clean leave: the other members drop this
 * member's locks at once, so call it only once what they protected is on
 * disk (after a clean unmount).  After lost() there is no clean leave: the
 * others see this member fail, keep its locks frozen and fence its node.
 */
void o2ls_free(struct o2ls *ls);

struct o2lt_member o2ls_self(const struct o2ls *ls);
bool o2ls_synced(const struct o2ls *ls);
/* The members the table knows (o2lt_members); service side. */
size_t o2ls_members(const struct o2ls *ls, struct o2lt_member_info *buf, size_t n);

/*
 * Requests (see locktab.h for what each does).  Each returns the request
 * id its events will carry (> 0), or -EINVAL for a bad argument, -EAGAIN
 * before SYNCED, -ENOTCONN once corosync is gone.  Messages that corosync cannot take at once are
 * queued and sent in order.
 */
int64_t o2ls_lock(struct o2ls *ls, const void *name, size_t namelen, int mode, unsigned flags);
int64_t o2ls_down(struct o2ls *ls, const void *name, size_t namelen, int new_mode, const void *lvb);
int64_t o2ls_cancel(struct o2ls *ls, const void *name, size_t namelen);
/* One request of o2ls_lock_batch. */
struct o2ls_lockreq {
	const void *name;
	size_t namelen;
	int mode;
	unsigned flags;
};
/*
 * n LOCK requests in one message (locktab's BATCH), applied in order: their
 * ids are the returned one and the n - 1 after it.  At most
 * O2LS_BATCH_MAX of them.
 */
#define O2LS_BATCH_MAX 4096
int64_t o2ls_lock_batch(struct o2ls *ls, const struct o2ls_lockreq *reqs, size_t n);
int64_t o2ls_fenced(struct o2ls *ls, uint32_t nodeid);
int64_t o2ls_recovered(struct o2ls *ls, uint32_t nodeid);
