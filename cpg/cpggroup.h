/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * One corosync CPG group, joined and served in a GLib main context: the
 * plumbing under a replicated table (the lock service's and the file-lock
 * service's).
 *
 * o2cg_new connects to corosync and learns this member's id; o2cg_join
 * joins the group and hooks the connection into the thread-default main
 * context.  Deliveries and membership changes come to the callbacks in
 * CPG's agreed order; o2cg_post multicasts in order, queueing what
 * corosync cannot take at once (CS_ERR_TRY_AGAIN) and trying again in a
 * moment.  If corosync goes away, or a membership change is refused by
 * the confchg callback (it returns < 0), lost() runs once and the group
 * does nothing more.
 *
 * Threads.  The callbacks run in that main context, with no lock of the
 * group's held (what cpg_dispatch hands over is copied out first), so
 * they may post.  o2cg_post and o2cg_lost may be called from any thread:
 * a message goes to corosync from the caller's thread at once, without a
 * wake-up of the group's, and messages posted one after another by any
 * threads go out in the order of their calls.
 */
#pragma once

#include <glib.h>
#include <stddef.h>

#include "locktab.h" /* struct o2lt_member, struct o2lt_confchg */

struct o2cg;

struct o2cg_callbacks {
	void (*deliver)(struct o2lt_member from, const void *msg, size_t len, void *data);
	int (*confchg)(const struct o2lt_confchg *c, void *data);
	void (*lost)(void *data);
};

#define O2CG_ERROR (o2cg_error_quark())
GQuark o2cg_error_quark(void);

/* NULL with error set (O2CG_ERROR, an errno code) if corosync cannot be reached. */
struct o2cg *o2cg_new(const char *group, const struct o2cg_callbacks *cb, void *data,
		      GError **error);
bool o2cg_join(struct o2cg *cg, GError **error);
/* Leave (what is queued goes first) unless lost, and free. */
void o2cg_free(struct o2cg *cg);
struct o2lt_member o2cg_self(const struct o2cg *cg);
bool o2cg_lost(const struct o2cg *cg);
void o2cg_post(struct o2cg *cg, const void *msg, size_t len);
