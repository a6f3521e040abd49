/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The file-lock service: a file-lock table (plocktab.h) kept in step over a
 * CPG group of its own (one per volume, beside the cluster lock group).
 *
 * o2ps_new joins the group and hooks the CPG connection into the
 * thread-default GLib main context; o2ps_post multicasts a message made by
 * the o2pt_msg_* encoders (their request ids are the caller's), in order.
 * The table's ANSWER events for this member, SYNCED and SYNC_FAILED come to
 * the callback; snapshots for joiners are sent here, unseen.  If corosync
 * goes away, lost() runs once and nothing more happens: every answer still
 * awaited will never come.
 *
 * Threads: everything in the main context o2ps_new was called in,
 * o2ps_post included.
 */
#pragma once

#include <glib.h>

#include "plocktab.h"

struct o2ps;

struct o2ps_callbacks {
	void (*event)(const struct o2pt_event *ev, void *data);
	void (*lost)(void *data);
};

/* NULL with error set if corosync cannot be reached or the join fails. */
struct o2ps *o2ps_new(const char *group, const struct o2ps_callbacks *cb, void *data,
		      GError **error);
/* Leave the group (cleanly: the others drop this member's locks) and free. */
void o2ps_free(struct o2ps *ps);
struct o2lt_member o2ps_self(const struct o2ps *ps);
bool o2ps_synced(const struct o2ps *ps);
/* -EAGAIN before SYNCED, -ENOTCONN once corosync is gone, 0 when queued */
int o2ps_post(struct o2ps *ps, const void *msg, size_t len);
