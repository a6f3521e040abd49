// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The CPG lock service (see lockservice.h): the glue between corosync's
 * CPG and the lock table.  CPG's deliver and confchg callbacks feed the
 * table; the table's events go to the caller or, for snapshots, back out
 * to the group.  Outgoing messages wait in a queue and go out in order;
 * when corosync answers CS_ERR_TRY_AGAIN (flow control, or a membership
 * change in progress) a short timer tries again.
 */
#include "lockservice.h"

#include <corosync/cpg.h>
#include <errno.h>
#include <glib-unix.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define RETRY_MS 5
#define JOIN_TRIES 400 /* of RETRY_MS each: two seconds */

struct o2ls {
	cpg_handle_t h;
	struct cpg_name group;
	struct o2lt_member self;
	struct o2lt_table *t;
	struct o2ls_callbacks cb;
	void *data;
	GMainContext *ctx; /* the thread-default context at o2ls_new */
	GSource *watch, *retry;
	GQueue out; /* GBytes * to multicast, in order */
	uint64_t next_reqid;
	bool lost;
};

G_DEFINE_QUARK(o2ls-error-quark, o2ls_error)

static void drop_source(GSource **src)
{
	if (*src) {
		g_source_destroy(*src);
		g_source_unref(*src);
		*src = NULL;
	}
}

static void lose(struct o2ls *ls)
{
	if (ls->lost)
		return;
	ls->lost = true;
	drop_source(&ls->watch);
	drop_source(&ls->retry);
	if (ls->cb.lost)
		ls->cb.lost(ls->data);
}

static gboolean flush(gpointer p);

/* Send what waits, in order; on TRY_AGAIN come back in a moment. */
static void send_queued(struct o2ls *ls)
{
	while (!ls->lost && !g_queue_is_empty(&ls->out)) {
		GBytes *b = g_queue_peek_head(&ls->out);
		gsize len;
		struct iovec iov = { .iov_base = (void *)g_bytes_get_data(b, &len) };
		iov.iov_len = len;
		cs_error_t r = cpg_mcast_joined(ls->h, CPG_TYPE_AGREED, &iov, 1);
		if (r == CS_ERR_TRY_AGAIN) {
			if (!ls->retry) {
				ls->retry = g_timeout_source_new(RETRY_MS);
				g_source_set_callback(ls->retry, flush, ls, NULL);
				g_source_attach(ls->retry, ls->ctx);
			}
			return;
		}
		if (r != CS_OK) {
			g_warning("cpg_mcast_joined: corosync error %d", r);
			lose(ls);
			return;
		}
		g_bytes_unref(g_queue_pop_head(&ls->out));
	}
}

static gboolean flush(gpointer p)
{
	struct o2ls *ls = p;
	g_source_unref(ls->retry);
	ls->retry = NULL;
	send_queued(ls);
	return G_SOURCE_REMOVE;
}

static void post(struct o2ls *ls, const void *msg, size_t len)
{
	g_queue_push_tail(&ls->out, g_bytes_new(msg, len));
	if (!ls->retry)
		send_queued(ls);
}

static bool for_me(const struct o2ls *ls, const struct o2lt_event *ev)
{
	switch (ev->type) {
	case O2LT_EV_GRANTED:
	case O2LT_EV_REFUSED:
	case O2LT_EV_DOWNED:
	case O2LT_EV_BLOCKING:
		return ev->member.nodeid == ls->self.nodeid && ev->member.pid == ls->self.pid;
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
		post(ls, msg, len);
		g_free(msg);
		return;
	}
	if (for_me(ls, ev) && ls->cb.event)
		ls->cb.event(ev, ls->data);
}

static struct o2ls *of_handle(cpg_handle_t h)
{
	void *ctx = NULL;
	cpg_context_get(h, &ctx);
	return ctx;
}

static void on_deliver(cpg_handle_t h, const struct cpg_name *group, uint32_t nodeid,
		       uint32_t pid, void *msg, size_t len)
{
	struct o2ls *ls = of_handle(h);
	if (!ls || ls->lost)
		return;
	int r = o2lt_deliver(ls->t, (struct o2lt_member){ nodeid, pid }, msg, len);
	if (r == -EBADMSG)
		g_warning("member %u/%u sent a malformed lock message (%zu bytes): ignored",
			  nodeid, pid, len);
	else if (r == -EPERM)
		g_debug("message from stale member %u/%u ignored", nodeid, pid);
}

static struct o2lt_member *members_of(const struct cpg_address *l, size_t n)
{
	struct o2lt_member *m = g_new(struct o2lt_member, n ? n : 1);
	for (size_t i = 0; i < n; i++)
		m[i] = (struct o2lt_member){ l[i].nodeid, l[i].pid };
	return m;
}

static void on_confchg(cpg_handle_t h, const struct cpg_name *group,
		       const struct cpg_address *members, size_t n_members,
		       const struct cpg_address *left, size_t n_left,
		       const struct cpg_address *joined, size_t n_joined)
{
	struct o2ls *ls = of_handle(h);
	if (!ls || ls->lost)
		return;
	g_autofree struct o2lt_member *m = members_of(members, n_members);
	g_autofree struct o2lt_member *l = members_of(left, n_left);
	g_autofree struct o2lt_member *j = members_of(joined, n_joined);
	g_autofree uint32_t *reasons = g_new(uint32_t, n_left ? n_left : 1);
	for (size_t i = 0; i < n_left; i++) {
		reasons[i] = left[i].reason;
		/* a reason we do not know: the safe reading is a failure */
		if (reasons[i] != O2LT_REASON_LEAVE && reasons[i] != O2LT_REASON_NODEDOWN &&
		    reasons[i] != O2LT_REASON_PROCDOWN)
			reasons[i] = O2LT_REASON_PROCDOWN;
	}
	struct o2lt_confchg c = { .members = m, .n_members = n_members, .left = l,
				  .left_reasons = reasons, .n_left = n_left, .joined = j,
				  .n_joined = n_joined };
	int r = o2lt_confchg(ls->t, &c);
	if (r < 0) {
		/* corosync's view and ours part: nothing this member decides can be trusted */
		g_warning("membership change the lock table cannot apply (%s): leaving",
			  g_strerror(-r));
		lose(ls);
	}
}

static gboolean on_readable(gint fd, GIOCondition cond, gpointer p)
{
	struct o2ls *ls = p;
	cs_error_t r = cpg_dispatch(ls->h, CS_DISPATCH_ALL);
	if (r != CS_OK) {
		g_warning("cpg_dispatch: corosync error %d: the cluster connection is gone", r);
		lose(ls); /* destroys the watch: its callback may return anything now */
		return G_SOURCE_REMOVE;
	}
	if (!ls->retry)
		send_queued(ls);
	return G_SOURCE_CONTINUE;
}

static cpg_model_v1_data_t model = {
	.model = CPG_MODEL_V1,
	.cpg_deliver_fn = on_deliver,
	.cpg_confchg_fn = on_confchg,
};

struct o2ls *o2ls_new(const char *group, const struct o2ls_callbacks *cb, void *data,
		      GError **error)
{
	size_t glen = group ? strlen(group) : 0;
	if (glen == 0 || glen >= CPG_MAX_NAME_LENGTH) {
		g_set_error(error, O2LS_ERROR, EINVAL, "CPG group name of %zu bytes (1 to %d)", glen,
			    CPG_MAX_NAME_LENGTH - 1);
		return NULL;
	}
	struct o2ls *ls = g_new0(struct o2ls, 1);
	ls->group.length = (uint32_t)glen;
	memcpy(ls->group.value, group, glen);
	ls->cb = *cb;
	ls->data = data;
	g_queue_init(&ls->out);

	cs_error_t r = cpg_model_initialize(&ls->h, CPG_MODEL_V1, (cpg_model_data_t *)&model, ls);
	if (r != CS_OK) {
		g_set_error(error, O2LS_ERROR, ENOTCONN,
			    "cannot reach corosync's CPG service (error %d): is corosync running?", r);
		g_free(ls);
		return NULL;
	}
	unsigned int nodeid = 0;
	int fd = -1;
	if ((r = cpg_local_get(ls->h, &nodeid)) != CS_OK || (r = cpg_fd_get(ls->h, &fd)) != CS_OK) {
		g_set_error(error, O2LS_ERROR, EIO, "corosync CPG: error %d", r);
		cpg_finalize(ls->h);
		g_free(ls);
		return NULL;
	}
	ls->self = (struct o2lt_member){ nodeid, (uint32_t)getpid() };
	ls->t = o2lt_new(ls->self, on_table_event, ls);
	for (int i = 0; i < JOIN_TRIES; i++) {
		r = cpg_join(ls->h, &ls->group);
		if (r != CS_ERR_TRY_AGAIN)
			break;
		g_usleep(RETRY_MS * 1000);
	}
	if (r != CS_OK) {
		g_set_error(error, O2LS_ERROR, EIO, "cannot join CPG group %s: corosync error %d",
			    group, r);
		o2lt_free(ls->t);
		cpg_finalize(ls->h);
		g_free(ls);
		return NULL;
	}
	/* the thread-default context, not the global default one: the caller
	 * may run the service on a thread of its own */
	ls->ctx = g_main_context_ref_thread_default();
	ls->watch = g_unix_fd_source_new(fd, G_IO_IN | G_IO_HUP | G_IO_ERR);
	g_source_set_callback(ls->watch, G_SOURCE_FUNC(on_readable), ls, NULL);
	g_source_attach(ls->watch, ls->ctx);
	return ls;
}

void o2ls_free(struct o2ls *ls)
{
	if (!ls)
		return;
	drop_source(&ls->watch);
	drop_source(&ls->retry);
	if (!ls->lost) {
		/* what is still queued goes first, so the others see it before the leave */
		for (int i = 0; i < JOIN_TRIES && !g_queue_is_empty(&ls->out) && !ls->lost; i++) {
			send_queued(ls);
			if (!g_queue_is_empty(&ls->out))
				g_usleep(RETRY_MS * 1000);
		}
		for (int i = 0; i < JOIN_TRIES && cpg_leave(ls->h, &ls->group) == CS_ERR_TRY_AGAIN; i++)
			g_usleep(RETRY_MS * 1000);
	}
	cpg_finalize(ls->h);
	g_queue_clear_full(&ls->out, (GDestroyNotify)g_bytes_unref);
	o2lt_free(ls->t);
	g_main_context_unref(ls->ctx);
	g_free(ls);
}

struct o2lt_member o2ls_self(const struct o2ls *ls)
{
	return ls->self;
}

bool o2ls_synced(const struct o2ls *ls)
{
	return o2lt_synced(ls->t);
}

size_t o2ls_members(const struct o2ls *ls, struct o2lt_member_info *buf, size_t n)
{
	return o2lt_members(ls->t, buf, n);
}

static int64_t sent(struct o2ls *ls, const uint8_t *buf, ssize_t len, uint64_t reqid)
{
	if (len < 0)
		return len;
	if (ls->lost)
		return -ENOTCONN;
	if (!o2lt_synced(ls->t))
		return -EAGAIN; /* the table would refuse it, maybe unheard (locktab.h) */
	post(ls, buf, (size_t)len);
	return (int64_t)reqid;
}

int64_t o2ls_lock(struct o2ls *ls, const void *name, size_t namelen, int mode, unsigned flags)
{
	uint8_t buf[O2LT_MSG_SMALL];
	uint64_t id = ++ls->next_reqid;
	return sent(ls, buf, o2lt_msg_lock(buf, sizeof(buf), id, name, namelen, mode, flags), id);
}

int64_t o2ls_down(struct o2ls *ls, const void *name, size_t namelen, int new_mode, const void *lvb)
{
	uint8_t buf[O2LT_MSG_SMALL];
	uint64_t id = ++ls->next_reqid;
	return sent(ls, buf, o2lt_msg_down(buf, sizeof(buf), id, name, namelen, new_mode, lvb), id);
}

int64_t o2ls_cancel(struct o2ls *ls, const void *name, size_t namelen)
{
	uint8_t buf[O2LT_MSG_SMALL];
	uint64_t id = ++ls->next_reqid;
	return sent(ls, buf, o2lt_msg_cancel(buf, sizeof(buf), id, name, namelen), id);
}

int64_t o2ls_fenced(struct o2ls *ls, uint32_t nodeid)
{
	uint8_t buf[O2LT_MSG_SMALL];
	uint64_t id = ++ls->next_reqid;
	return sent(ls, buf, o2lt_msg_fenced(buf, sizeof(buf), id, nodeid), id);
}

int64_t o2ls_recovered(struct o2ls *ls, uint32_t nodeid)
{
	uint8_t buf[O2LT_MSG_SMALL];
	uint64_t id = ++ls->next_reqid;
	return sent(ls, buf, o2lt_msg_recovered(buf, sizeof(buf), id, nodeid), id);
}
