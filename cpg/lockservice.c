// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The CPG lock service (see lockservice.h): the glue between corosync's
 * CPG and the lock table.  CPG's deliver and confchg callbacks feed the
 * table; the table's events go to the caller or, for snapshots, back out
 * to the group.  The CPG plumbing is cpggroup.c's: outgoing messages wait
 * in a queue and go out in order; when corosync answers CS_ERR_TRY_AGAIN
 * (flow control, or a membership change in progress) a short timer tries
 * again.
 */
#include "lockservice.h"

#include <errno.h>
#include <string.h>

#include "cpggroup.h"

struct o2ls {
	struct o2cg *cg;
	struct o2lt_table *t;
	struct o2ls_callbacks cb;
	void *data;
	/*
	 * Requests go out from any thread (cpggroup.h): send_mu numbers them
	 * and posts them in one step, so that ids go out in order; synced
	 * mirrors the table's, which only the service side reads.
	 */
	GMutex send_mu;
	uint64_t next_reqid;
	gint synced;
};

G_DEFINE_QUARK(o2ls-error-quark, o2ls_error)

static bool for_me(const struct o2ls *ls, const struct o2lt_event *ev)
{
	struct o2lt_member self = o2cg_self(ls->cg);
	switch (ev->type) {
	case O2LT_EV_GRANTED:
	case O2LT_EV_REFUSED:
	case O2LT_EV_DOWNED:
	case O2LT_EV_BLOCKING:
	case O2LT_EV_QUEUED:
		return ev->member.nodeid == self.nodeid && ev->member.pid == self.pid;
	default:
		return true;
	}
}

static void on_table_event(const struct o2lt_event *ev, void *data)
{
	struct o2ls *ls = data;
	if (ev->type == O2LT_EV_SEND_SNAPSHOT) {
		void *msg;
		size_t len;
		int r = o2lt_snapshot(ls->t, ev->member, &msg, &len);
		if (r < 0) {
			/* the joiner waits for another sender, or fails and rejoins */
			g_warning("no snapshot for member %u/%u: %s", ev->member.nodeid,
				  ev->member.pid, g_strerror(-r));
			return;
		}
		o2cg_post(ls->cg, msg, len);
		g_free(msg);
		return;
	}
	if (ev->type == O2LT_EV_SYNCED)
		g_atomic_int_set(&ls->synced, 1); /* before anyone hears of it */
	if (for_me(ls, ev) && ls->cb.event)
		ls->cb.event(ev, ls->data);
}

static void on_deliver(struct o2lt_member from, const void *msg, size_t len, void *data)
{
	struct o2ls *ls = data;
	int r = o2lt_deliver(ls->t, from, msg, len);
	if (r == -EBADMSG)
		g_warning("member %u/%u sent a malformed lock message (%zu bytes): ignored",
			  from.nodeid, from.pid, len);
	else if (r == -EPERM)
		g_debug("message from stale member %u/%u ignored", from.nodeid, from.pid);
}

/* < 0: corosync's view and ours part; nothing this member decides can be trusted */
static int on_confchg(const struct o2lt_confchg *c, void *data)
{
	struct o2ls *ls = data;
	return o2lt_confchg(ls->t, c);
}

static void on_lost(void *data)
{
	struct o2ls *ls = data;
	if (ls->cb.lost)
		ls->cb.lost(ls->data);
}

static const struct o2cg_callbacks cg_callbacks = {
	.deliver = on_deliver,
	.confchg = on_confchg,
	.lost = on_lost,
};

/* the group's errors carry errno codes: the same, in this service's domain */
static void own_error(GError **error, GError *e)
{
	g_set_error_literal(error, O2LS_ERROR, e->code, e->message);
	g_error_free(e);
}

struct o2ls *o2ls_new(const char *group, const struct o2ls_callbacks *cb, void *data,
		      GError **error)
{
	GError *e = NULL;
	struct o2ls *ls = g_new0(struct o2ls, 1);
	ls->cb = *cb;
	ls->data = data;
	g_mutex_init(&ls->send_mu);
	ls->cg = o2cg_new(group, &cg_callbacks, ls, &e);
	if (!ls->cg) {
		own_error(error, e);
		g_free(ls);
		return NULL;
	}
	/* the table first: the join's confchg is its first input */
	ls->t = o2lt_new(o2cg_self(ls->cg), on_table_event, ls);
	if (!o2cg_join(ls->cg, &e)) {
		own_error(error, e);
		o2ls_free(ls);
		return NULL;
	}
	return ls;
}

void o2ls_free(struct o2ls *ls)
{
	if (!ls)
		return;
	o2cg_free(ls->cg);
	o2lt_free(ls->t);
	g_mutex_clear(&ls->send_mu);
	g_free(ls);
}

struct o2lt_member o2ls_self(const struct o2ls *ls)
{
	return o2cg_self(ls->cg);
}

bool o2ls_synced(const struct o2ls *ls)
{
	return g_atomic_int_get(&ls->synced);
}

size_t o2ls_members(const struct o2ls *ls, struct o2lt_member_info *buf, size_t n)
{
	return o2lt_members(ls->t, buf, n);
}

/* Post buf (len bytes, or -errno from its encoder) as request reqid; under send_mu. */
static int64_t sent(struct o2ls *ls, const uint8_t *buf, ssize_t len, uint64_t reqid)
{
	if (len < 0)
		return len;
	if (o2cg_lost(ls->cg))
		return -ENOTCONN;
	if (!g_atomic_int_get(&ls->synced))
		return -EAGAIN; /* the table would refuse it, maybe unheard (locktab.h) */
	o2cg_post(ls->cg, buf, (size_t)len);
	ls->next_reqid = reqid;
	return (int64_t)reqid;
}

/* The small requests: encode(buf, id, args...) with the next id, posted. */
#define SEND_SMALL(ls, encode, ...)                                                          \
	({                                                                                   \
		uint8_t buf_[O2LT_MSG_SMALL];                                                \
		g_mutex_lock(&(ls)->send_mu);                                                \
		uint64_t id_ = (ls)->next_reqid + 1;                                         \
		int64_t r_ = sent((ls), buf_, encode(buf_, sizeof(buf_), id_, __VA_ARGS__), id_); \
		g_mutex_unlock(&(ls)->send_mu);                                              \
		r_;                                                                          \
	})

int64_t o2ls_lock(struct o2ls *ls, const void *name, size_t namelen, int mode, unsigned flags)
{
	return SEND_SMALL(ls, o2lt_msg_lock, name, namelen, mode, flags);
}

int64_t o2ls_lock_batch(struct o2ls *ls, const struct o2ls_lockreq *reqs, size_t n)
{
	if (n == 0 || n > O2LS_BATCH_MAX)
		return -EINVAL;
	size_t cap = n * O2LT_MSG_SMALL, len = 0;
	g_autofree uint8_t *locks = g_malloc(cap);
	g_autofree uint8_t *buf = g_malloc(cap + O2LT_MSG_SMALL);

	g_mutex_lock(&ls->send_mu);
	uint64_t first = ls->next_reqid + 1;
	for (size_t i = 0; i < n; i++) {
		ssize_t l = o2lt_msg_lock(locks + len, cap - len, first + i, reqs[i].name,
					  reqs[i].namelen, reqs[i].mode, reqs[i].flags);
		if (l < 0) {
			g_mutex_unlock(&ls->send_mu);
			return l;
		}
		len += (size_t)l;
	}
	int64_t r = sent(ls, buf, o2lt_msg_batch(buf, cap + O2LT_MSG_SMALL, locks, len),
			 first + n - 1);
	g_mutex_unlock(&ls->send_mu);
	return r < 0 ? r : (int64_t)first;
}

int64_t o2ls_down(struct o2ls *ls, const void *name, size_t namelen, int new_mode, const void *lvb)
{
	return SEND_SMALL(ls, o2lt_msg_down, name, namelen, new_mode, lvb);
}

int64_t o2ls_cancel(struct o2ls *ls, const void *name, size_t namelen)
{
	return SEND_SMALL(ls, o2lt_msg_cancel, name, namelen);
}

int64_t o2ls_fenced(struct o2ls *ls, uint32_t nodeid)
{
	return SEND_SMALL(ls, o2lt_msg_fenced, nodeid);
}

int64_t o2ls_recovered(struct o2ls *ls, uint32_t nodeid)
{
	return SEND_SMALL(ls, o2lt_msg_recovered, nodeid);
}
