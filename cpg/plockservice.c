// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The file-lock service (see plockservice.h): corosync's CPG deliver and
 * confchg callbacks feed the file-lock table; its answers go to the caller,
 * its snapshots back out to the group.  The CPG plumbing (the send queue,
 * retries on CS_ERR_TRY_AGAIN, membership lists) is the lock service's
 * (cpggroup.h).
 */
#include "plockservice.h"

#include <errno.h>
#include <string.h>

#include "cpggroup.h"

struct o2ps {
	struct o2cg *cg;
	struct o2pt_table *t;
	struct o2ps_callbacks cb;
	void *data;
};

static void on_table_event(const struct o2pt_event *ev, void *data)
{
	struct o2ps *ps = data;
	if (ev->type == O2PT_EV_SEND_SNAPSHOT) {
		void *msg;
		size_t len;
		int r = o2pt_snapshot(ps->t, ev->member, &msg, &len);
		if (r < 0) {
			g_warning("no file-lock snapshot for member %u/%u: %s", ev->member.nodeid,
				  ev->member.pid, g_strerror(-r));
			return;
		}
		o2cg_post(ps->cg, msg, len);
		g_free(msg);
		return;
	}
	if (ps->cb.event)
		ps->cb.event(ev, ps->data);
}

static void on_deliver(struct o2lt_member from, const void *msg, size_t len, void *data)
{
	struct o2ps *ps = data;
	int r = o2pt_deliver(ps->t, from, msg, len);
	if (r == -EBADMSG)
		g_warning("member %u/%u sent a malformed file-lock message (%zu bytes): ignored",
			  from.nodeid, from.pid, len);
	else if (r == -EPROTO)
		g_warning("member %u/%u sent a file-lock snapshot this node cannot use",
			  from.nodeid, from.pid);
}

static int on_confchg(const struct o2lt_confchg *c, void *data)
{
	struct o2ps *ps = data;
	return o2pt_confchg(ps->t, c);
}

static void on_lost(void *data)
{
	struct o2ps *ps = data;
	if (ps->cb.lost)
		ps->cb.lost(ps->data);
}

static const struct o2cg_callbacks cg_callbacks = {
	.deliver = on_deliver,
	.confchg = on_confchg,
	.lost = on_lost,
};

struct o2ps *o2ps_new(const char *group, const struct o2ps_callbacks *cb, void *data,
		      GError **error)
{
	struct o2ps *ps = g_new0(struct o2ps, 1);
	ps->cb = *cb;
	ps->data = data;
	ps->cg = o2cg_new(group, &cg_callbacks, ps, error);
	if (!ps->cg) {
		g_free(ps);
		return NULL;
	}
	/* the table first: the join's confchg is its first input */
	ps->t = o2pt_new(o2cg_self(ps->cg), on_table_event, ps);
	if (!o2cg_join(ps->cg, error)) {
		o2ps_free(ps);
		return NULL;
	}
	return ps;
}

void o2ps_free(struct o2ps *ps)
{
	if (!ps)
		return;
	o2cg_free(ps->cg);
	o2pt_free(ps->t);
	g_free(ps);
}

struct o2lt_member o2ps_self(const struct o2ps *ps)
{
	return o2cg_self(ps->cg);
}

bool o2ps_synced(const struct o2ps *ps)
{
	return o2pt_synced(ps->t);
}

int o2ps_post(struct o2ps *ps, const void *msg, size_t len)
{
	if (o2cg_lost(ps->cg))
		return -ENOTCONN;
	if (!o2pt_synced(ps->t))
		return -EAGAIN;
	o2cg_post(ps->cg, msg, len);
	return 0;
}
