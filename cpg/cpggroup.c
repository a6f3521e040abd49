// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * One CPG group in a GLib main context (see cpggroup.h).
 */
#include "cpggroup.h"

#include <corosync/cpg.h>
#include <errno.h>
#include <glib-unix.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define RETRY_MS 5
#define JOIN_TRIES 400 /* of RETRY_MS each: two seconds */

struct o2cg {
	cpg_handle_t h;
	struct cpg_name group;
	struct o2lt_member self;
	struct o2cg_callbacks cb;
	void *data;
	GMainContext *ctx;
	/*
	 * mu: the corosync handle (one caller at a time: dispatch on the
	 * group's own thread, multicasts from any) and what follows.
	 */
	GMutex mu;
	GSource *watch, *retry, *lost_src;
	GQueue out; /* GBytes *, in order */
	bool joined;
	gint lost;   /* set under mu; read by anyone */
	GQueue in;   /* struct input *: delivered by corosync, not yet fed to the callbacks */
};

/* A delivery or membership change, copied out of cpg_dispatch. */
struct input {
	struct o2lt_member from; /* deliver */
	GBytes *msg;		 /* deliver; NULL: a membership change */
	struct o2lt_confchg c;
};

G_DEFINE_QUARK(o2cg-error-quark, o2cg_error)

static void drop_source(GSource **src)
{
	if (*src) {
		g_source_destroy(*src);
		g_source_unref(*src);
		*src = NULL;
	}
}

static void input_free(gpointer p)
{
	struct input *in = p;

	if (in->msg)
		g_bytes_unref(in->msg);
	g_free((void *)in->c.members);
	g_free((void *)in->c.left);
	g_free((void *)in->c.left_reasons);
	g_free((void *)in->c.joined);
	g_free(in);
}

/* Mark the group lost, under mu: true the first time (the caller then runs lost()). */
static bool lose_locked(struct o2cg *cg)
{
	if (g_atomic_int_get(&cg->lost))
		return false;
	g_atomic_int_set(&cg->lost, 1);
	drop_source(&cg->watch);
	drop_source(&cg->retry);
	return true;
}

static gboolean on_retry(gpointer p);

/*
 * Multicast what is queued, in order; under mu.  True when this lost the
 * group (the caller runs lost() once it has let go of mu).
 */
static bool send_queued(struct o2cg *cg)
{
	while (!g_atomic_int_get(&cg->lost) && !g_queue_is_empty(&cg->out)) {
		GBytes *b = g_queue_peek_head(&cg->out);
		gsize len;
		struct iovec iov = { .iov_base = (void *)g_bytes_get_data(b, &len) };
		iov.iov_len = len;
		cs_error_t r = cpg_mcast_joined(cg->h, CPG_TYPE_AGREED, &iov, 1);
		if (r == CS_ERR_TRY_AGAIN) {
			if (!cg->retry) {
				cg->retry = g_timeout_source_new(RETRY_MS);
				g_source_set_callback(cg->retry, on_retry, cg, NULL);
				g_source_attach(cg->retry, cg->ctx);
			}
			return false;
		}
		if (r != CS_OK) {
			g_warning("cpg_mcast_joined: corosync error %d", r);
			return lose_locked(cg);
		}
		g_bytes_unref(g_queue_pop_head(&cg->out));
	}
	return false;
}

/* lost(), on the group's thread with no lock held (lose_locked said true). */
static void run_lost(struct o2cg *cg, bool lost_now)
{
	if (lost_now && cg->cb.lost)
		cg->cb.lost(cg->data);
}

static gboolean on_lost_later(gpointer p)
{
	struct o2cg *cg = p;

	g_mutex_lock(&cg->mu);
	g_source_unref(cg->lost_src);
	cg->lost_src = NULL;
	g_mutex_unlock(&cg->mu);
	run_lost(cg, true);
	return G_SOURCE_REMOVE;
}

static gboolean on_retry(gpointer p)
{
	struct o2cg *cg = p;

	g_mutex_lock(&cg->mu);
	if (cg->retry) {
		g_source_unref(cg->retry);
		cg->retry = NULL;
	}
	bool lost_now = send_queued(cg);
	g_mutex_unlock(&cg->mu);
	run_lost(cg, lost_now);
	return G_SOURCE_REMOVE;
}

void o2cg_post(struct o2cg *cg, const void *msg, size_t len)
{
	bool lost_now = false;

	g_mutex_lock(&cg->mu);
	if (!g_atomic_int_get(&cg->lost)) {
		g_queue_push_tail(&cg->out, g_bytes_new(msg, len));
		if (!cg->retry)
			lost_now = send_queued(cg);
	}
	if (lost_now) {
		/* the caller may hold what lost() takes: it runs on the group's thread */
		cg->lost_src = g_idle_source_new();
		g_source_set_callback(cg->lost_src, on_lost_later, cg, NULL);
		g_source_attach(cg->lost_src, cg->ctx);
	}
	g_mutex_unlock(&cg->mu);
}

static struct o2cg *of_handle(cpg_handle_t h)
{
	void *ctx = NULL;
	cpg_context_get(h, &ctx);
	return ctx;
}

/* corosync's callbacks run inside cpg_dispatch, under mu: they only copy */
static void on_deliver(cpg_handle_t h, const struct cpg_name *group, uint32_t nodeid,
		       uint32_t pid, void *msg, size_t len)
{
	struct o2cg *cg = of_handle(h);
	if (!cg)
		return;
	struct input *in = g_new0(struct input, 1);
	in->from = (struct o2lt_member){ nodeid, pid };
	in->msg = g_bytes_new(msg, len);
	g_queue_push_tail(&cg->in, in);
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
	struct o2cg *cg = of_handle(h);
	if (!cg)
		return;
	uint32_t *reasons = g_new(uint32_t, n_left ? n_left : 1);
	for (size_t i = 0; i < n_left; i++) {
		reasons[i] = left[i].reason;
		/* a reason we do not know: the safe reading is a failure */
		if (reasons[i] != O2LT_REASON_LEAVE && reasons[i] != O2LT_REASON_NODEDOWN &&
		    reasons[i] != O2LT_REASON_PROCDOWN)
			reasons[i] = O2LT_REASON_PROCDOWN;
	}
	struct input *in = g_new0(struct input, 1);
	in->c = (struct o2lt_confchg){ .members = members_of(members, n_members),
				       .n_members = n_members,
				       .left = members_of(left, n_left),
				       .left_reasons = reasons,
				       .n_left = n_left,
				       .joined = members_of(joined, n_joined),
				       .n_joined = n_joined };
	g_queue_push_tail(&cg->in, in);
}

/* Feed what cpg_dispatch copied out to the callbacks, in order, without mu. */
static void feed(struct o2cg *cg)
{
	struct input *in;

	while ((in = g_queue_pop_head(&cg->in))) {
		if (g_atomic_int_get(&cg->lost)) {
			input_free(in);
			continue;
		}
		if (in->msg) {
			gsize len;
			const void *msg = g_bytes_get_data(in->msg, &len);
			cg->cb.deliver(in->from, msg, len, cg->data);
		} else {
			int r = cg->cb.confchg(&in->c, cg->data);

			if (r < 0) {
				g_warning("membership change of %.*s the table cannot apply (%s): "
					  "leaving",
					  (int)cg->group.length, cg->group.value, g_strerror(-r));
				g_mutex_lock(&cg->mu);
				bool lost_now = lose_locked(cg);
				g_mutex_unlock(&cg->mu);
				run_lost(cg, lost_now);
			}
		}
		input_free(in);
	}
}

static gboolean on_readable(gint fd, GIOCondition cond, gpointer p)
{
	struct o2cg *cg = p;
	bool lost_now = false;

	g_mutex_lock(&cg->mu);
	cs_error_t r = cpg_dispatch(cg->h, CS_DISPATCH_ALL);
	if (r != CS_OK) {
		g_warning("cpg_dispatch: corosync error %d: the cluster connection is gone", r);
		lost_now = lose_locked(cg);
	} else if (!cg->retry) {
		lost_now = send_queued(cg);
	}
	g_mutex_unlock(&cg->mu);
	feed(cg);
	run_lost(cg, lost_now);
	return r == CS_OK ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
}

static cpg_model_v1_data_t model = {
	.model = CPG_MODEL_V1,
	.cpg_deliver_fn = on_deliver,
	.cpg_confchg_fn = on_confchg,
};

struct o2cg *o2cg_new(const char *group, const struct o2cg_callbacks *cb, void *data,
		      GError **error)
{
	size_t glen = group ? strlen(group) : 0;
	if (glen == 0 || glen >= CPG_MAX_NAME_LENGTH) {
		g_set_error(error, O2CG_ERROR, EINVAL,
			    "CPG group name of %zu bytes (1 to %d)", glen, CPG_MAX_NAME_LENGTH - 1);
		return NULL;
	}
	struct o2cg *cg = g_new0(struct o2cg, 1);
	cg->group.length = (uint32_t)glen;
	memcpy(cg->group.value, group, glen);
	cg->cb = *cb;
	cg->data = data;
	g_queue_init(&cg->out);
	g_queue_init(&cg->in);
	g_mutex_init(&cg->mu);
	cs_error_t r = cpg_model_initialize(&cg->h, CPG_MODEL_V1, (cpg_model_data_t *)&model, cg);
	if (r != CS_OK) {
		g_set_error(error, O2CG_ERROR, ENOTCONN,
			    "cannot reach corosync's CPG service (error %d): is corosync running?", r);
		g_mutex_clear(&cg->mu);
		g_free(cg);
		return NULL;
	}
	unsigned int nodeid = 0;
	if ((r = cpg_local_get(cg->h, &nodeid)) != CS_OK) {
		g_set_error(error, O2CG_ERROR, EIO, "corosync CPG: error %d", r);
		cpg_finalize(cg->h);
		g_mutex_clear(&cg->mu);
		g_free(cg);
		return NULL;
	}
	cg->self = (struct o2lt_member){ nodeid, (uint32_t)getpid() };
	return cg;
}

bool o2cg_join(struct o2cg *cg, GError **error)
{
	int fd = -1;
	cs_error_t r = cpg_fd_get(cg->h, &fd);
	for (int i = 0; r == CS_OK && i < JOIN_TRIES; i++) {
		r = cpg_join(cg->h, &cg->group);
		if (r != CS_ERR_TRY_AGAIN)
			break;
		g_usleep(RETRY_MS * 1000);
	}
	if (r != CS_OK) {
		g_set_error(error, O2CG_ERROR, EIO,
			    "cannot join CPG group %.*s: corosync error %d", (int)cg->group.length,
			    cg->group.value, r);
		return false;
	}
	cg->joined = true;
	cg->ctx = g_main_context_ref_thread_default();
	cg->watch = g_unix_fd_source_new(fd, G_IO_IN | G_IO_HUP | G_IO_ERR);
	g_source_set_callback(cg->watch, G_SOURCE_FUNC(on_readable), cg, NULL);
	g_source_attach(cg->watch, cg->ctx);
	return true;
}

void o2cg_free(struct o2cg *cg)
{
	if (!cg)
		return;
	/* nobody sends any more: the group's users are gone */
	g_mutex_lock(&cg->mu);
	drop_source(&cg->watch);
	drop_source(&cg->retry);
	drop_source(&cg->lost_src);
	if (cg->joined && !cg->lost) {
		for (int i = 0; i < JOIN_TRIES && !g_queue_is_empty(&cg->out) && !cg->lost; i++) {
			send_queued(cg);
			if (!g_queue_is_empty(&cg->out))
				g_usleep(RETRY_MS * 1000);
		}
		for (int i = 0; i < JOIN_TRIES && cpg_leave(cg->h, &cg->group) == CS_ERR_TRY_AGAIN; i++)
			g_usleep(RETRY_MS * 1000);
	}
	cpg_finalize(cg->h);
	g_mutex_unlock(&cg->mu);
	g_mutex_clear(&cg->mu);
	g_queue_clear_full(&cg->out, (GDestroyNotify)g_bytes_unref);
	g_queue_clear_full(&cg->in, input_free);
	if (cg->ctx)
		g_main_context_unref(cg->ctx);
	g_free(cg);
}

struct o2lt_member o2cg_self(const struct o2cg *cg)
{
	return cg->self;
}

bool o2cg_lost(const struct o2cg *cg)
{
	return g_atomic_int_get(&cg->lost);
}
