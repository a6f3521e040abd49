// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Cluster-wide file locks (see flock.h).
 *
 * One thread per clustered volume runs a GMainContext with the file-lock
 * service in it.  FUSE worker threads never wait: they note the request
 * as pending under its request id, queue the message and wake the thread,
 * which multicasts it; the table's answer (on that thread) finds the
 * pending request and replies.  An interrupted waiting request sends a
 * CANCEL for it; whichever the table applies first, the grant or the
 * cancel, is the answer (a lock granted just before the signal is kept,
 * as the kernel's own F_SETLKW does when the grant wins).
 *
 * F_GETLK reports the pid of a lock held on this node, and 0 for one held
 * on another node: FUSE translates the pid we give through the caller's
 * PID namespace, so another machine's pid would name some local process
 * (kernel OCFS2 reports the negated remote pid; FUSE cannot carry that).
 *
 * A close sends a DROP only for an owner this node has locked with on
 * that inode (the set "used"), so that closes of files nobody locks cost
 * no message.
 */
#include "flock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>

#include "plockservice.h"

#define SYNC_WAIT_US (10 * G_USEC_PER_SEC)

enum kind {
	K_LOCK,	  /* answered 0 or an error */
	K_GETLK,  /* answered with the lock in the way */
	K_REPLY0, /* answered 0 (a close) */
};

struct pending {
	fuse_req_t req;
	enum kind kind;
	uint64_t reqid;
	bool sent, interrupted, cancelled;
};

struct outmsg {
	uint64_t reqid; /* 0: nobody waits for the answer */
	GBytes *msg;
};

struct flocks {
	GThread *thread;
	GMainContext *ctx;
	GMainLoop *loop;
	struct o2ps *ps;
	char *group;
	GError *start_error;

	GMutex mu; /* everything below */
	GCond cond;
	bool started, synced, lost;
	struct o2lt_member self;
	uint64_t next_reqid;
	GHashTable *pending; /* reqid -> struct pending */
	GQueue out;	     /* struct outmsg *, to multicast in order */
	GHashTable *used;    /* "ns:ino:owner" strings this node locked with */
};

static void outmsg_free(gpointer p)
{
	struct outmsg *m = p;
	g_bytes_unref(m->msg);
	g_free(m);
}

static int fuse_errno(int error)
{
	switch (error) {
	case 0:
	case -EAGAIN:
	case -EDEADLK:
	case -EINTR:
		return -error;
	default:
		return ENOLCK; /* -EINVAL: refused as sent before we were synced */
	}
}

static char *used_key(int ns, uint64_t ino, uint64_t owner)
{
	return g_strdup_printf("%d:%" G_GUINT64_FORMAT ":%" G_GUINT64_FORMAT, ns, ino, owner);
}

/* ---- the file-lock thread ---- */

static void reply(struct flocks *f, struct pending *p, const struct o2pt_event *ev)
{
	if (p->kind == K_GETLK && ev && ev->error == 0) {
		struct flock lk = { .l_type = F_UNLCK, .l_whence = SEEK_SET };
		if (ev->conflict) {
			lk.l_type = ev->lock.type == O2PT_WR ? F_WRLCK : F_RDLCK;
			lk.l_start = (off_t)ev->lock.start;
			lk.l_len = ev->lock.end >= (uint64_t)INT64_MAX
					   ? 0
					   : (off_t)(ev->lock.end - ev->lock.start + 1);
			bool mine = ev->lock.member.nodeid == f->self.nodeid &&
				    ev->lock.member.pid == f->self.pid;
			lk.l_pid = mine ? (pid_t)ev->lock.pid : 0;
		}
		fuse_reply_lock(p->req, &lk);
	} else if (p->kind == K_REPLY0) {
		fuse_reply_err(p->req, 0);
	} else {
		fuse_reply_err(p->req, ev ? fuse_errno(ev->error) : ENOLCK);
	}
	g_free(p);
}

/*
 * Every request still waiting fails: the group is gone.  Requests not yet
 * queued are left to their FUSE thread (it is registering the interrupt
 * callback on them), unless all: nothing is served any more.
 */
static void fail_all(struct flocks *f, bool all)
{
	GHashTableIter it;
	gpointer v;
	GSList *failed = NULL;
	g_mutex_lock(&f->mu);
	g_hash_table_iter_init(&it, f->pending);
	while (g_hash_table_iter_next(&it, NULL, &v)) {
		struct pending *p = v;
		if (all || p->sent) {
			failed = g_slist_prepend(failed, p);
			g_hash_table_iter_steal(&it);
		}
	}
	g_mutex_unlock(&f->mu);
	for (GSList *l = failed; l; l = l->next)
		reply(f, l->data, NULL);
	g_slist_free(failed);
}

static void on_event(const struct o2pt_event *ev, void *data)
{
	struct flocks *f = data;
	if (ev->type == O2PT_EV_SYNCED || ev->type == O2PT_EV_SYNC_FAILED) {
		if (ev->type == O2PT_EV_SYNC_FAILED)
			g_warning("%s: nobody was left to give this node the cluster's file locks: "
				  "file locks fail with ENOLCK until the next mount", f->group);
		g_mutex_lock(&f->mu);
		f->synced = ev->type == O2PT_EV_SYNCED;
		f->lost = !f->synced;
		g_cond_broadcast(&f->cond);
		g_mutex_unlock(&f->mu);
		return;
	}
	if (ev->type != O2PT_EV_ANSWER)
		return;
	g_mutex_lock(&f->mu);
	struct pending *p = g_hash_table_lookup(f->pending, &ev->reqid);
	if (p)
		g_hash_table_steal(f->pending, &ev->reqid);
	g_mutex_unlock(&f->mu);
	if (p)
		reply(f, p, ev);
}

static void on_lost(void *data)
{
	struct flocks *f = data;
	g_warning("%s: the cluster connection is gone: file locks fail with ENOLCK", f->group);
	g_mutex_lock(&f->mu);
	f->lost = true;
	g_mutex_unlock(&f->mu);
	fail_all(f, false);
}

static const struct o2ps_callbacks ps_callbacks = { .event = on_event, .lost = on_lost };

/* multicast what the FUSE threads queued */
static gboolean drain(gpointer data)
{
	struct flocks *f = data;
	GQueue q = G_QUEUE_INIT;
	g_mutex_lock(&f->mu);
	q = f->out;
	g_queue_init(&f->out);
	g_mutex_unlock(&f->mu);
	struct outmsg *m;
	while ((m = g_queue_pop_head(&q))) {
		gsize len;
		const void *p = g_bytes_get_data(m->msg, &len);
		if (o2ps_post(f->ps, p, len) < 0 && m->reqid) {
			g_mutex_lock(&f->mu);
			struct pending *pd = g_hash_table_lookup(f->pending, &m->reqid);
			if (pd)
				g_hash_table_steal(f->pending, &m->reqid);
			g_mutex_unlock(&f->mu);
			if (pd)
				reply(f, pd, NULL);
		}
		outmsg_free(m);
	}
	return G_SOURCE_REMOVE;
}

static gpointer flock_main(gpointer data)
{
	struct flocks *f = data;
	g_main_context_push_thread_default(f->ctx);
	f->ps = o2ps_new(f->group, &ps_callbacks, f, &f->start_error);
	g_mutex_lock(&f->mu);
	f->started = true;
	if (f->ps)
		f->self = o2ps_self(f->ps);
	g_cond_broadcast(&f->cond);
	g_mutex_unlock(&f->mu);
	if (f->ps)
		g_main_loop_run(f->loop);
	o2ps_free(f->ps); /* a clean leave: the others drop our locks */
	f->ps = NULL;
	g_main_context_pop_thread_default(f->ctx);
	return NULL;
}

static gboolean quit(gpointer data)
{
	struct flocks *f = data;
	drain(f);
	g_main_loop_quit(f->loop);
	return G_SOURCE_REMOVE;
}

struct flocks *flocks_new(const char *group, GError **err)
{
	struct flocks *f = g_new0(struct flocks, 1);
	g_mutex_init(&f->mu);
	g_cond_init(&f->cond);
	f->group = g_strdup_printf("%s:flock", group);
	f->ctx = g_main_context_new();
	f->loop = g_main_loop_new(f->ctx, FALSE);
	f->pending = g_hash_table_new(g_int64_hash, g_int64_equal);
	f->used = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	g_queue_init(&f->out);
	f->thread = g_thread_new("ocfs2d-flock", flock_main, f);

	gint64 until = g_get_monotonic_time() + SYNC_WAIT_US;
	g_mutex_lock(&f->mu);
	while (!f->started)
		g_cond_wait(&f->cond, &f->mu);
	while (f->ps && !f->synced && !f->lost && g_cond_wait_until(&f->cond, &f->mu, until))
		;
	bool synced = f->synced;
	g_mutex_unlock(&f->mu);
	if (!f->ps) {
		g_propagate_prefixed_error(err, g_steal_pointer(&f->start_error),
					   "cluster file locks: ");
		flocks_free(f);
		return NULL;
	}
	if (!synced)
		g_warning("%s: not yet given the cluster's file locks: they fail with ENOLCK "
			  "until then", f->group);
	return f;
}

void flocks_free(struct flocks *f)
{
	if (!f)
		return;
	if (f->thread) {
		g_main_context_invoke(f->ctx, quit, f);
		g_thread_join(f->thread);
	}
	fail_all(f, true);
	g_queue_clear_full(&f->out, outmsg_free); /* empty unless the thread never ran */
	g_hash_table_destroy(f->pending);
	g_hash_table_destroy(f->used);
	g_main_loop_unref(f->loop);
	g_main_context_unref(f->ctx);
	g_clear_error(&f->start_error);
	g_mutex_clear(&f->mu);
	g_cond_clear(&f->cond);
	g_free(f->group);
	g_free(f);
}

/* ---- the FUSE side ---- */

/* queue a message (under mu); the caller wakes the thread */
static void queue_msg(struct flocks *f, uint64_t reqid, const uint8_t *buf, ssize_t len)
{
	struct outmsg *m = g_new0(struct outmsg, 1);
	m->reqid = reqid;
	m->msg = g_bytes_new(buf, (size_t)len);
	g_queue_push_tail(&f->out, m);
}

static void kick(struct flocks *f)
{
	g_main_context_invoke(f->ctx, drain, f);
}

static void queue_cancel(struct flocks *f, struct pending *p)
{
	uint8_t buf[O2PT_MSG_SMALL];
	if (p->cancelled)
		return;
	p->cancelled = true;
	queue_msg(f, 0, buf, o2pt_msg_cancel(buf, sizeof(buf), ++f->next_reqid, p->reqid));
}

static void on_interrupt(fuse_req_t req, void *data)
{
	struct flocks *f = data;
	GHashTableIter it;
	gpointer v;
	g_mutex_lock(&f->mu);
	g_hash_table_iter_init(&it, f->pending);
	while (g_hash_table_iter_next(&it, NULL, &v)) {
		struct pending *p = v;
		if (p->req != req)
			continue;
		p->interrupted = true;
		if (p->sent)
			queue_cancel(f, p);
		break;
	}
	g_mutex_unlock(&f->mu);
	kick(f);
}

/*
 * Send a lock request for req: the answer comes from the file-lock thread.
 * Interruptible if it may wait.
 */
static void request(struct flocks *f, fuse_req_t req, enum kind kind, uint64_t ino, int ns,
		    uint64_t owner, int type, uint64_t start, uint64_t end, unsigned flags,
		    uint32_t pid)
{
	uint8_t buf[O2PT_MSG_SMALL];
	g_mutex_lock(&f->mu);
	if (f->lost || !f->synced) {
		g_mutex_unlock(&f->mu);
		fuse_reply_err(req, ENOLCK);
		return;
	}
	uint64_t reqid = ++f->next_reqid;
	ssize_t len = o2pt_msg_lock(buf, sizeof(buf), reqid, ino, ns, owner, type, start, end,
				    flags, pid);
	if (len < 0) {
		g_mutex_unlock(&f->mu);
		fuse_reply_err(req, EINVAL);
		return;
	}
	struct pending *p = g_new0(struct pending, 1);
	p->req = req;
	p->kind = kind;
	p->reqid = reqid;
	g_hash_table_insert(f->pending, &p->reqid, p);
	if (type != O2PT_UN && !(flags & O2PT_F_TEST))
		g_hash_table_add(f->used, used_key(ns, ino, owner));
	g_mutex_unlock(&f->mu);

	/* before sending: the answer frees req (and it may call back at once) */
	if (flags & O2PT_F_WAIT)
		fuse_req_interrupt_func(req, on_interrupt, f);
	g_mutex_lock(&f->mu);
	queue_msg(f, reqid, buf, len); /* if corosync is gone, its post fails and answers */
	p->sent = true;
	if (p->interrupted)
		queue_cancel(f, p);
	g_mutex_unlock(&f->mu);
	kick(f);
}

static void range_of(const struct flock *lk, uint64_t *start, uint64_t *end)
{
	*start = lk->l_start < 0 ? 0 : (uint64_t)lk->l_start;
	if (lk->l_len <= 0 || (uint64_t)lk->l_len > (uint64_t)INT64_MAX - *start)
		*end = O2PT_EOF; /* the kernel sends whole ranges: l_len 0 is "to the end" */
	else
		*end = *start + (uint64_t)lk->l_len - 1;
}

static int type_of(short t)
{
	return t == F_WRLCK ? O2PT_WR : t == F_RDLCK ? O2PT_RD : O2PT_UN;
}

void flocks_getlk(struct flocks *f, fuse_req_t req, uint64_t ino, uint64_t owner,
		  const struct flock *lk)
{
	uint64_t s, e;
	range_of(lk, &s, &e);
	int type = type_of(lk->l_type);
	if (type == O2PT_UN) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	request(f, req, K_GETLK, ino, O2PT_POSIX, owner, type, s, e, O2PT_F_TEST,
		(uint32_t)lk->l_pid);
}

void flocks_setlk(struct flocks *f, fuse_req_t req, uint64_t ino, uint64_t owner,
		  const struct flock *lk, bool sleep)
{
	uint64_t s, e;
	range_of(lk, &s, &e);
	int type = type_of(lk->l_type);
	request(f, req, K_LOCK, ino, O2PT_POSIX, owner, type, s, e,
		sleep && type != O2PT_UN ? O2PT_F_WAIT : 0, (uint32_t)lk->l_pid);
}

void flocks_flock(struct flocks *f, fuse_req_t req, uint64_t ino, uint64_t owner, int op)
{
	int how = op & ~LOCK_NB;
	int type = how == LOCK_EX ? O2PT_WR : how == LOCK_SH ? O2PT_RD : O2PT_UN;
	if (how != LOCK_EX && how != LOCK_SH && how != LOCK_UN) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	unsigned flags = type != O2PT_UN && !(op & LOCK_NB) ? O2PT_F_WAIT : 0;
	request(f, req, K_LOCK, ino, O2PT_FLOCK, owner, type, 0, O2PT_EOF, flags,
		(uint32_t)fuse_req_ctx(req)->pid);
}

/* Drop owner's locks in ns on ino if it ever took any here; req (if any) answered after. */
static void drop(struct flocks *f, fuse_req_t req, uint64_t ino, int ns, uint64_t owner)
{
	uint8_t buf[O2PT_MSG_SMALL];
	g_autofree char *key = used_key(ns, ino, owner);
	g_mutex_lock(&f->mu);
	if (f->lost || !f->synced || !g_hash_table_remove(f->used, key)) {
		g_mutex_unlock(&f->mu);
		if (req)
			fuse_reply_err(req, 0);
		return;
	}
	uint64_t reqid = ++f->next_reqid;
	if (req) {
		struct pending *p = g_new0(struct pending, 1);
		p->req = req;
		p->kind = K_REPLY0;
		p->reqid = reqid;
		p->sent = true;
		g_hash_table_insert(f->pending, &p->reqid, p);
	}
	queue_msg(f, req ? reqid : 0, buf, o2pt_msg_drop(buf, sizeof(buf), reqid, ino, ns, owner));
	g_mutex_unlock(&f->mu);
	kick(f);
}

void flocks_flush(struct flocks *f, fuse_req_t req, uint64_t ino, uint64_t owner)
{
	drop(f, req, ino, O2PT_POSIX, owner);
}

void flocks_release(struct flocks *f, uint64_t ino, uint64_t owner)
{
	drop(f, NULL, ino, O2PT_FLOCK, owner);
}
