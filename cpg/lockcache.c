// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The lock cache (lockcache.h): local users, cached modes, downconverts on
 * request from other nodes.
 *
 * One mutex guards the whole cache and one condition wakes its waiters:
 * the fast path (the mode is cached, nobody else waits) is a lock, two
 * checks and an unlock.  Every state change goes through this file's
 * service-side functions (events, sends) or a local user's call, under
 * that mutex, and ends with kick(): broadcast, and queue a downconvert if
 * one is now due.  Requests go to the backend at once, under that mutex,
 * from whatever thread makes them (a local user's, the service side's,
 * the downconvert thread's): no wake-up of another thread stands between
 * a decision and its message.
 *
 * Per resource, at most one thing is in flight with the service at a time:
 * our lock request (pending), our downconvert (down_to), plus possibly a
 * cancel of the pending request.  The downconvert thread runs the
 * resources' callbacks; while one runs (dc_running) no local user may take
 * the resource, since what is being written back must not change.
 *
 * Lifetime.  Each o2lc_res_get is a reference; a resource nobody references
 * (refs 0) sits on the cache's LRU, least recently put first.  It is
 * dropped (DOWN to UNLOCK, after the downconvert callback if it held PR or
 * EX and was refreshed) when it was forgotten, or when the LRU is longer
 * than the limit, and only once it is idle: no reference, no holder,
 * nothing in flight (res_busy).  A drop commits at
 * once (dropping, dc_running or down_to set: local users wait) and ends
 * when the service confirms (DOWNED); the resource is then freed, unless
 * someone took a reference meanwhile: it then stays, granted nothing, and
 * that user's o2lc_lock asks the service again.  Only kick() frees, and
 * only the resource it was called for; trim() frees others, so it runs
 * only where no caller keeps a pointer to an unreferenced resource.
 */
#include "lockcache.h"

#include <errno.h>
#include <string.h>

#define NONE (-1)
/* ask()'s flag for o2lc_lock_new's request (beside o2lc_lock's) */
#define LC_NEW 0x10000u
/* locks held as new that may wait unannounced (then all are asked for) */
#define UNANNOUNCED_MAX 1024u
#define RETRY_US (G_USEC_PER_SEC)

struct o2lc {
	const struct o2lc_backend *backend;
	void *be;
	GMutex mu;
	GCond cond;
	unsigned waiters; /* local users waiting on cond: none, no wake-up to pay */
	unsigned unsettled; /* o2lc_lock_new locks not yet in the service's order */
	GQueue unannounced; /* of those, the ones not even asked for yet (r) */
	GHashTable *res; /* struct res_key (the resource's own) -> struct o2lc_res */
	bool lost;
	struct o2lc_stats stats;
	GThread *dc_thread;
	GAsyncQueue *dcq; /* resources to downconvert; the cache itself = stop */
	GThreadPool *inval_pool; /* invalidate callbacks (inval_main) */
	unsigned retries; /* resources with dc_retry_at set */
	GQueue lru;	  /* unreferenced resources not being dropped, least recent first */
	unsigned limit;	  /* at most this many on the lru (0: no bound) */
};

/* A name, as c->res knows resources: a lookup's key lives on its caller's stack. */
struct res_key {
	const uint8_t *name;
	size_t len;
};

struct o2lc_res {
	struct o2lc *c;
	struct res_key key; /* its name (in name_store) */
	const struct o2lc_res_ops *ops;
	void *data;

	int granted;	    /* what the service granted us, or NONE */
	int pending;	    /* mode of our lock request in flight, or NONE */
	int64_t pending_id; /* its request id (0 until sent) */
	unsigned pending_seq;
	unsigned prefetch_seq; /* pending_seq of a request no caller waits on (o2lc_prefetch), or 0 */
	int done_error;	    /* how request done_seq ended */
	unsigned done_seq;
	bool cancelling;    /* a cancel of the pending request is out */
	int down_to;	    /* our downconvert in flight, or NONE */
	int64_t down_id;
	bool down_lvb;	    /* it stores r->lvb (leaving EX after a write-back) */
	bool finishing;	    /* granted; the local user who asked has not taken it yet */
	int blocked;	    /* the mode another node waits for, or NONE */
	unsigned holders[3]; /* local users by mode (PR, EX used) */
	bool need_refresh, refreshing;
	bool inval_running; /* its invalidate callback runs (inval_main) */
	bool inval_done;    /* and has run since a local user last took it */
	unsigned admitted;  /* local users taken while it ran */
	bool no_pr;	    /* O2LC_NOPR: lower EX to NL, never PR */
	bool made_here;	    /* held as new (o2lc_lock_new) before the service placed the request */
	bool unannounced;   /* and not asked for yet (on c->unannounced, through ann_link) */
	GList *ann_link;
	bool dc_queued, dc_running;
	gint64 dc_retry_at; /* after a failed callback: when to try again, or 0 */
	gint64 blocked_at;  /* the last BLOCKING event for it (monotonic), or 0 */
	uint8_t lvb[O2LC_LVB_LEN];
	bool lvb_valid;
	unsigned refs;	    /* o2lc_res_get's not yet put */
	bool forget;	    /* drop it as soon as it is idle */
	bool dropping;	    /* being dropped: DOWN to UNLOCK, then freed */
	GList *lru_link;    /* its link on c->lru (data: r) */
	bool on_lru;
	uint8_t name_store[]; /* name */
};

struct send {
	struct o2lc_res *r;
	int mode;
	unsigned flags;
};

static bool compatible(int a, int b)
{
	return a == O2LT_NL || b == O2LT_NL || (a == O2LT_PR && b == O2LT_PR);
}

/* Whether a local user holds r in a mode in the way of mode. */
static bool holders_in_way(const struct o2lc_res *r, int mode)
{
	return (r->holders[O2LT_EX] && !compatible(O2LT_EX, mode)) ||
	       (r->holders[O2LT_PR] && !compatible(O2LT_PR, mode));
}

/* The mode to lower r to so that another node can have `wanted`. */
static int target_for(int granted, int wanted)
{
	if (wanted == O2LT_EX)
		return O2LT_NL;
	if (wanted == O2LT_PR && granted == O2LT_EX)
		return O2LT_PR;
	return NONE;
}

/* Whether r has anything in flight; under c->mu. */
static bool res_busy(const struct o2lc_res *r)
{
	return r->unannounced || r->inval_running || r->refreshing || r->pending != NONE || r->finishing || r->dc_queued || r->dc_running ||
	       r->down_to != NONE || r->dc_retry_at;
}

/* Nobody uses r and nothing is in flight: it may be dropped. */
static bool res_idle(const struct o2lc_res *r)
{
	return !r->refs && !r->holders[O2LT_PR] && !r->holders[O2LT_EX] && !r->dropping &&
	       !res_busy(r);
}

static void lru_remove(struct o2lc_res *r)
{
	if (r->on_lru) {
		g_queue_unlink(&r->c->lru, r->lru_link);
		r->on_lru = false;
	}
}

static void lru_add(struct o2lc_res *r)
{
	lru_remove(r);
	g_queue_push_tail_link(&r->c->lru, r->lru_link);
	r->on_lru = true;
}

static void send_down(struct o2lc_res *r);
static void send_cancel(struct o2lc_res *r);

/*
 * Whether r's invalidate callback must run before r goes lower: it has
 * one, holds PR or EX, has been used (refreshed) and has not run since.
 */
static bool needs_inval(const struct o2lc_res *r)
{
	return r->ops && r->ops->invalidate && !r->inval_done && !r->need_refresh &&
	       (r->granted == O2LT_PR || r->granted == O2LT_EX);
}

static void start_inval(struct o2lc_res *r)
{
	r->inval_running = true;
	r->admitted = 0;
	g_thread_pool_push(r->c->inval_pool, r, NULL);
}

/* The mode another node waits for, as far as r must go for it. */
static int blocked_mode(struct o2lc_res *r)
{
	if (r->no_pr && r->blocked == O2LT_PR && r->granted == O2LT_EX)
		r->blocked = O2LT_EX;
	return r->blocked;
}

/*
 * Drop r (idle, or dropping and idle again after a failed step): free it
 * now if it holds nothing, else write back (downconvert thread) and send
 * DOWN to UNLOCK.  Under c->mu; may free r.
 */
static void drop_go(struct o2lc_res *r)
{
	struct o2lc *c = r->c;
	if (!r->dropping && needs_inval(r)) {
		start_inval(r); /* then trim or drop_due come back */
		return;
	}
	lru_remove(r);
	if (r->granted == NONE) {
		c->stats.drops++;
		g_hash_table_remove(c->res, &r->key); /* frees r */
		return;
	}
	r->dropping = true;
	r->dc_running = true; /* local users wait from here on */
	r->blocked = NONE;    /* whoever waits gets more than it asked */
	if (r->granted >= O2LT_PR && !r->need_refresh && r->ops && r->ops->downconvert) {
		r->dc_queued = true;
		g_async_queue_push(c->dcq, r);
	} else {
		r->down_to = O2LT_UNLOCK;
		r->down_id = 0;
		r->down_lvb = false;
		send_down(r);
	}
}

/*
 * Drop the least recently used idle resources while the LRU is longer
 * than the limit.  Under c->mu; frees resources, so its caller must keep
 * no pointer to an unreferenced one.
 */
static void trim(struct o2lc *c)
{
	if (!c->limit || c->lost)
		return;
	GList *l = c->lru.head;
	while (l && c->lru.length > c->limit) {
		GList *next = l->next;
		struct o2lc_res *r = l->data;
		if (res_idle(r))
			drop_go(r);
		l = next;
	}
}

/* A drop that has not committed a step is given up: r stays. */
static void drop_abandon(struct o2lc_res *r)
{
	r->dropping = false;
	if (!r->refs)
		lru_add(r);
}

/* Continue or start r's drop if it is due; under c->mu; may free r. */
static void drop_due(struct o2lc_res *r)
{
	if (r->c->lost)
		return;
	if (r->dropping) {
		if (res_busy(r))
			return; /* a step is in flight */
		if (r->refs || r->holders[O2LT_PR] || r->holders[O2LT_EX]) {
			/* taken again meanwhile: it stays, its users ask again */
			drop_abandon(r);
			return;
		}
		drop_go(r); /* the next step, or the end */
		return;
	}
	if (r->forget && res_idle(r))
		drop_go(r);
}

/* kick's part for another node waiting on r */
static void kick_blocked(struct o2lc_res *r);

/*
 * Called under c->mu after any change to r: wake waiters, start what
 * another node waiting on us needs (a cancel of our own conversion, or a
 * downconvert once no local user is in its way), and go on with r's drop
 * if one is due.  May free r if nobody references it: the caller must not
 * touch r after unless it holds a reference.
 */
static void kick(struct o2lc_res *r)
{
	if (r->c->waiters)
		g_cond_broadcast(&r->c->cond);
	kick_blocked(r);
	drop_due(r);
}

/*
 * The resource whose invalidation this thread has just finished (NULL:
 * none): its downconvert, if that is next, runs here rather than on the
 * downconvert thread, saving a wake-up on the way to another node.
 */
static __thread struct o2lc_res *dc_here;
static __thread bool dc_here_taken;

static void kick_blocked(struct o2lc_res *r)
{
	struct o2lc *c = r->c;
	if (r->blocked == NONE || c->lost || r->granted == NONE)
		return;
	int to = target_for(r->granted, blocked_mode(r));
	if (to == NONE || to >= r->granted) {
		r->blocked = NONE; /* already out of its way */
		return;
	}
	if (r->inval_running)
		return;
	if (needs_inval(r) && !r->dropping && !r->dc_running && !r->dc_queued &&
	    r->down_to == NONE) {
		start_inval(r);
		return;
	}
	if (holders_in_way(r, r->blocked) || r->refreshing || r->finishing || r->dc_queued ||
	    r->dc_running || r->down_to != NONE || r->dc_retry_at)
		return;
	if (r->pending != NONE) {
		/* our conversion waits, maybe on that node, which waits on us */
		if (!r->cancelling && r->pending_id > 0 && !r->made_here)
			send_cancel(r);
		return;
	}
	r->dc_queued = true;
	if (dc_here == r) {
		/* the invalidation thread that kicked it goes on with it */
		dc_here_taken = true;
		return;
	}
	g_async_queue_push(c->dcq, r);
}

/*
 * A downconvert failed (the write-back, or the service refused it): the
 * lock stays as it is and the downconvert thread tries again RETRY_US
 * later.  Under c->mu.
 */
static void retry_later(struct o2lc_res *r)
{
	r->dc_running = false;
	r->dc_retry_at = g_get_monotonic_time() + RETRY_US;
	r->c->retries++;
	g_async_queue_push(r->c->dcq, r->c); /* wake the thread to time it */
}

/*
 * r's request as new has its place in the service's order (or failed:
 * held says whether r is still held), so no other node can be first to
 * it any more.  Under c->mu.
 */
static void settled(struct o2lc_res *r, bool held)
{
	if (!r->made_here)
		return;
	r->made_here = false;
	r->c->unsettled--;
	if (!held) {
		g_critical("lock %.*s: the service refused a lock this node took as new; "
			   "what it guards may have been used unlocked",
			   (int)r->key.len, (const char *)r->key.name);
		r->granted = NONE;
	}
	if (r->c->waiters)
		g_cond_broadcast(&r->c->cond);
}

/* ---- requests to the service: under c->mu, from any thread ---- */

/* s's request went to the service as id, or failed with it. */
static void lock_sent(struct o2lc *c, const struct send *s, int64_t id)
{
	struct o2lc_res *r = s->r;

	if (id < 0) {
		r->done_error = (int)id;
		r->done_seq = r->pending_seq;
		r->pending = NONE;
		settled(r, false);
	} else {
		r->pending_id = id;
		c->stats.requests++;
	}
	kick(r);
}

static void send_lock(struct o2lc *c, const struct send *s)
{
	struct o2lc_res *r = s->r;

	lock_sent(c, s, c->lost ? -ENOTCONN
				: c->backend->lock(c->be, r->key.name, r->key.len, s->mode, s->flags));
}

/* The requests of v (struct send, at most O2LC_BATCH_MAX) in one message. */
static void send_lock_batch(struct o2lc *c, const struct send *v, size_t n)
{
	g_autofree struct o2lc_lockreq *reqs = g_new(struct o2lc_lockreq, n);

	for (size_t i = 0; i < n; i++)
		reqs[i] = (struct o2lc_lockreq){ v[i].r->key.name, v[i].r->key.len, v[i].mode,
						 v[i].flags };
	int64_t id = c->lost ? -ENOTCONN : c->backend->lock_batch(c->be, reqs, n);
	for (size_t i = 0; i < n; i++)
		lock_sent(c, &v[i], id < 0 ? id : id + (int64_t)i);
	if (id >= 0)
		c->stats.batched += n - 1;
}

/* Cancel r's pending request (another node waits on us, maybe on it). */
static void send_cancel(struct o2lc_res *r)
{
	struct o2lc *c = r->c;

	if (c->lost)
		return;
	r->cancelling = true;
	c->stats.cancels++;
	int64_t id = c->backend->cancel(c->be, r->key.name, r->key.len);
	if (id < 0) {
		g_warning("lock %.*s: cancel failed: %s", (int)r->key.len, (const char *)r->key.name,
			  g_strerror((int)-id));
		r->cancelling = false;
	}
}

/* r's downconvert to r->down_to (r->lvb with it if down_lvb); the caller kicks. */
static void send_down(struct o2lc_res *r)
{
	struct o2lc *c = r->c;
	int64_t id = -ENOTCONN;

	if (!c->lost)
		id = c->backend->down(c->be, r->key.name, r->key.len, r->down_to,
				      r->down_lvb ? r->lvb : NULL);
	if (id < 0) {
		if (!c->lost)
			g_warning("lock %.*s: downconvert failed: %s", (int)r->key.len,
				  (const char *)r->key.name, g_strerror((int)-id));
		r->down_to = NONE;
		retry_later(r);
	} else {
		r->down_id = id;
		c->stats.downconverts++;
	}
}

/* ---- the service side ---- */

static struct o2lc_res *res_find(struct o2lc *c, const uint8_t *name, size_t namelen)
{
	if (!name || !namelen)
		return NULL;
	struct res_key k = { name, namelen };

	return g_hash_table_lookup(c->res, &k);
}

static void granted(struct o2lc_res *r, const struct o2lt_event *ev)
{
	if (r->pending == NONE || ev->reqid != (uint64_t)r->pending_id)
		return; /* not ours to wait for (an answer to a duplicate) */
	if ((r->granted == NONE || r->granted < O2LT_PR) && ev->mode >= O2LT_PR)
		r->need_refresh = true;
	r->granted = ev->mode;
	r->pending = NONE;
	r->cancelling = false;
	/* its asker uses it once before anyone takes it away; a prefetch has
	   none, and nothing holds back another node's downconvert for it */
	r->finishing = r->pending_seq != r->prefetch_seq;
	r->prefetch_seq = 0;
	r->done_error = 0;
	r->done_seq = r->pending_seq;
	if (ev->lvb)
		memcpy(r->lvb, ev->lvb, O2LC_LVB_LEN);
	r->lvb_valid = ev->lvb && ev->lvb_valid;
	settled(r, true);
}

static void refused(struct o2lc_res *r, const struct o2lt_event *ev)
{
	if (r->pending != NONE && ev->reqid == (uint64_t)r->pending_id) {
		r->pending = NONE;
		r->cancelling = false;
		r->prefetch_seq = 0;
		r->done_error = ev->error;
		r->done_seq = r->pending_seq;
		settled(r, false);
	} else if (r->down_to != NONE && ev->reqid == (uint64_t)r->down_id) {
		g_warning("lock %.*s: the service refused a downconvert: %s", (int)r->key.len,
			  (const char *)r->key.name, g_strerror(-ev->error));
		r->down_to = NONE;
		retry_later(r);
	}
	/* else: a cancel that came too late (-ENOENT); nothing to do */
}

static void downed(struct o2lc_res *r, const struct o2lt_event *ev)
{
	if (r->down_to == NONE || ev->reqid != (uint64_t)r->down_id)
		return;
	r->granted = ev->mode == O2LT_UNLOCK ? NONE : ev->mode;
	r->down_to = NONE;
	r->dc_running = false;
	r->inval_done = false;
	if (r->granted == NONE || r->granted == O2LT_NL)
		r->no_pr = false;
	if (r->blocked != NONE && (r->granted == NONE || compatible(r->granted, r->blocked)))
		r->blocked = NONE;
}

void o2lc_event(struct o2lc *c, const struct o2lt_event *ev)
{
	switch (ev->type) {
	case O2LT_EV_GRANTED:
	case O2LT_EV_REFUSED:
	case O2LT_EV_DOWNED:
	case O2LT_EV_BLOCKING:
	case O2LT_EV_QUEUED:
		break;
	default:
		return;
	}
	g_mutex_lock(&c->mu);
	struct o2lc_res *r = c->lost ? NULL : res_find(c, ev->name, ev->namelen);
	if (r) {
		switch (ev->type) {
		case O2LT_EV_GRANTED:
			granted(r, ev);
			break;
		case O2LT_EV_REFUSED:
			refused(r, ev);
			break;
		case O2LT_EV_DOWNED:
			downed(r, ev);
			break;
		case O2LT_EV_QUEUED:
			if (r->made_here && r->pending != NONE && ev->reqid == (uint64_t)r->pending_id) {
				/* a name used before (a generation come round
				   again): its holder lets go at the BLOCKING the
				   table sent it, and it caches only what was */
				g_warning("lock %.*s: made here, but another node still holds it",
					  (int)r->key.len, (const char *)r->key.name);
				settled(r, true);
			}
			break;
		default:
			c->stats.blocking++;
			r->blocked_at = g_get_monotonic_time();
			if (r->blocked == NONE || ev->mode > r->blocked)
				r->blocked = ev->mode;
			break;
		}
		kick(r); /* r may be gone now */
	}
	trim(c);
	g_mutex_unlock(&c->mu);
}

void o2lc_lost(struct o2lc *c)
{
	g_mutex_lock(&c->mu);
	c->lost = true;
	g_cond_broadcast(&c->cond);
	g_mutex_unlock(&c->mu);
}

/* ---- the downconvert thread ---- */

/* The write-back of a drop (drop_go), then its DOWN to UNLOCK. */
static void drop_writeback(struct o2lc *c, struct o2lc_res *r)
{
	if (c->lost || r->granted == NONE) {
		r->dc_running = false;
		kick(r);
		return;
	}
	int from = r->granted;
	uint8_t lvb[O2LC_LVB_LEN];
	if (r->lvb_valid)
		memcpy(lvb, r->lvb, sizeof(lvb));
	else
		memset(lvb, 0, sizeof(lvb));
	g_mutex_unlock(&c->mu);
	gint64 t0 = g_get_monotonic_time();
	int rc = r->ops->downconvert(r, from, O2LT_NL, lvb, r->data);
	gint64 spent = g_get_monotonic_time() - t0;
	g_mutex_lock(&c->mu);
	c->stats.writeback_us += (uint64_t)spent;
	if (rc < 0) {
		g_warning("lock %.*s: writing back before dropping it failed: %s; trying again",
			  (int)r->key.len, (const char *)r->key.name, g_strerror(-rc));
		retry_later(r); /* then drop_due decides again: a user may have come */
	} else {
		r->down_lvb = from == O2LT_EX;
		if (r->down_lvb) {
			memcpy(r->lvb, lvb, sizeof(lvb));
			r->lvb_valid = true;
		}
		r->down_to = O2LT_UNLOCK;
		r->down_id = 0;
		send_down(r);
	}
	kick(r);
}

static void downconvert(struct o2lc *c, struct o2lc_res *r)
{
	g_mutex_lock(&c->mu);
	r->dc_queued = false;
	if (r->dropping && r->dc_running) {
		/* the drop's own write-back, queued by drop_go */
		drop_writeback(c, r);
		g_mutex_unlock(&c->mu);
		return;
	}
	if (r->dropping) {
		/* a downconvert another node asked for while a failed drop waited
		   to be tried again: a local user may hold r by now, so the
		   drop gives way and this is an ordinary downconvert */
		drop_abandon(r);
	}
	int to = r->blocked == NONE ? NONE : target_for(r->granted, blocked_mode(r));
	if (c->lost || to == NONE || r->granted == NONE || to >= r->granted || r->pending != NONE ||
	    r->down_to != NONE || r->dc_running || holders_in_way(r, r->blocked) || r->refreshing ||
	    r->finishing || r->inval_running || needs_inval(r)) {
		kick(r);
		g_mutex_unlock(&c->mu);
		return;
	}
	int from = r->granted;
	r->dc_running = true; /* local users wait from here on */
	/* granted but never refreshed: nothing cached under it is good, so
	   nothing is written back and the value block stays as it was */
	bool writeback = !r->need_refresh;
	uint8_t lvb[O2LC_LVB_LEN];
	if (r->lvb_valid)
		memcpy(lvb, r->lvb, sizeof(lvb));
	else
		memset(lvb, 0, sizeof(lvb));
	g_mutex_unlock(&c->mu);

	gint64 t0 = g_get_monotonic_time();
	int rc = writeback && r->ops && r->ops->downconvert ?
		 r->ops->downconvert(r, from, to, lvb, r->data) : 0;
	gint64 spent = g_get_monotonic_time() - t0;

	g_mutex_lock(&c->mu);
	c->stats.writeback_us += (uint64_t)spent;
	if (rc < 0) {
		g_warning("lock %.*s: writing back before lowering it failed: %s; trying again",
			  (int)r->key.len, (const char *)r->key.name, g_strerror(-rc));
		retry_later(r);
	} else {
		r->down_lvb = from == O2LT_EX && writeback;
		if (r->down_lvb) {
			memcpy(r->lvb, lvb, sizeof(lvb));
			r->lvb_valid = true;
		}
		r->down_to = to;
		r->down_id = 0;
		send_down(r);
	}
	kick(r);
	g_mutex_unlock(&c->mu);
}

/* Resources whose failed downconvert is due again; called under c->mu. */
static gint64 retry_due(struct o2lc *c, GPtrArray *due)
{
	gint64 now = g_get_monotonic_time(), next = 0;
	GHashTableIter it;
	gpointer k, v;
	g_hash_table_iter_init(&it, c->res);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct o2lc_res *r = v;
		if (!r->dc_retry_at)
			continue;
		if (r->dc_retry_at <= now) {
			r->dc_retry_at = 0;
			c->retries--;
			g_ptr_array_add(due, r);
		} else if (!next || r->dc_retry_at < next) {
			next = r->dc_retry_at;
		}
	}
	return next;
}

static gpointer dc_main(gpointer p)
{
	struct o2lc *c = p;
	gint64 next = 0;
	for (;;) {
		gpointer item = next ? g_async_queue_timeout_pop(c->dcq, MAX(next - g_get_monotonic_time(), 1))
				     : g_async_queue_pop(c->dcq);
		if (item == c) {
			g_mutex_lock(&c->mu);
			bool stop = c->lost;
			g_mutex_unlock(&c->mu);
			if (stop)
				return NULL;
		} else if (item) {
			downconvert(c, item);
		}
		GPtrArray *due = g_ptr_array_new();
		g_mutex_lock(&c->mu);
		next = c->retries && !c->lost ? retry_due(c, due) : 0;
		for (guint i = 0; i < due->len; i++)
			kick(due->pdata[i]); /* frees none of the others */
		trim(c);
		g_mutex_unlock(&c->mu);
		g_ptr_array_free(due, TRUE);
	}
}

/*
 * The invalidate callback of r, on a pool thread: again while local users
 * took r during a run (they may have cached what the run had passed), at
 * most INVAL_RUNS times; then r goes on to its downconvert or drop.
 */
#define INVAL_RUNS 4

static void inval_main(gpointer p, gpointer unused)
{
	struct o2lc_res *r = p;
	struct o2lc *c = r->c;
	(void)unused;
	for (int run = 0; run < INVAL_RUNS; run++) {
		r->ops->invalidate(r, r->data);
		g_mutex_lock(&c->mu);
		bool again = r->admitted && !c->lost;
		r->admitted = 0;
		if (!again || run + 1 == INVAL_RUNS) {
			r->inval_running = false;
			r->inval_done = true;
			dc_here = r;
			dc_here_taken = false;
			kick(r); /* r may be gone now, unless its downconvert is ours */
			dc_here = NULL;
			bool dc = dc_here_taken;
			trim(c);
			g_mutex_unlock(&c->mu);
			/* queued to this thread: r stays (dc_queued) until it has run */
			if (dc)
				downconvert(c, r);
			return;
		}
		g_mutex_unlock(&c->mu);
	}
}

/* ---- the cache ---- */

static guint key_hash(gconstpointer p)
{
	const struct res_key *k = p;
	guint h = 2166136261u; /* FNV-1a */

	for (size_t i = 0; i < k->len; i++)
		h = (h ^ k->name[i]) * 16777619u;
	return h;
}

static gboolean key_equal(gconstpointer a, gconstpointer b)
{
	const struct res_key *x = a, *y = b;

	return x->len == y->len && memcmp(x->name, y->name, x->len) == 0;
}

static void res_free(gpointer p)
{
	struct o2lc_res *r = p;
	g_list_free_1(r->lru_link);
	g_list_free_1(r->ann_link);
	g_free(r);
}

struct o2lc *o2lc_new(const struct o2lc_backend *backend, void *be)
{
	struct o2lc *c = g_new0(struct o2lc, 1);
	c->backend = backend;
	c->be = be;
	g_mutex_init(&c->mu);
	g_cond_init(&c->cond);
	c->res = g_hash_table_new_full(key_hash, key_equal, NULL, res_free);
	c->dcq = g_async_queue_new();
	c->dc_thread = g_thread_new("o2lc-downconvert", dc_main, c);
	/* each waits for the kernel, which waits for requests: no bound */
	c->inval_pool = g_thread_pool_new(inval_main, NULL, -1, FALSE, NULL);
	return c;
}

void o2lc_free(struct o2lc *c)
{
	if (!c)
		return;
	g_mutex_lock(&c->mu);
	c->lost = true;
	g_cond_broadcast(&c->cond);
	g_mutex_unlock(&c->mu);
	/* invalidations end once the requests they wait for fail (lost) */
	g_thread_pool_free(c->inval_pool, FALSE, TRUE);
	g_async_queue_push(c->dcq, c);
	g_thread_join(c->dc_thread);
	g_hash_table_destroy(c->res);
	g_async_queue_unref(c->dcq);
	g_cond_clear(&c->cond);
	g_mutex_clear(&c->mu);
	g_free(c);
}

static bool all_dropped(struct o2lc *c)
{
	GHashTableIter it;
	gpointer k, v;
	g_hash_table_iter_init(&it, c->res);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct o2lc_res *r = v;
		if (r->granted != NONE || r->down_to != NONE)
			return false;
	}
	return true;
}

/* r, held as new and unknown to the service, goes without a message; under c->mu. */
static void let_go_unannounced(struct o2lc_res *r)
{
	g_queue_unlink(&r->c->unannounced, r->ann_link);
	r->unannounced = false;
	r->made_here = false;
	r->c->unsettled--;
	r->granted = NONE;
}

/*
 * Locks held as new that the service never heard of, and that no local
 * user holds: let go without a message (drop_all: this node leaves, and
 * what they guard was written home after a settle, or never will be).
 */
static void forget_unannounced(struct o2lc *c)
{
	GList *l = c->unannounced.head;

	while (l) {
		GList *next = l->next;
		struct o2lc_res *r = l->data;

		if (!r->holders[O2LT_PR] && !r->holders[O2LT_EX])
			let_go_unannounced(r);
		l = next;
	}
}

int o2lc_drop_all(struct o2lc *c, GMainContext *ctx, unsigned timeout_ms)
{
	gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
	GHashTableIter it;
	gpointer k, v;
	int err;
	/* let what is in flight (a downconvert another node asked for) end */
	for (;;) {
		g_mutex_lock(&c->mu);
		err = c->lost ? -ENOTCONN : 0;
		forget_unannounced(c);
		bool busy = false;
		g_hash_table_iter_init(&it, c->res);
		while (!err && g_hash_table_iter_next(&it, &k, &v)) {
			struct o2lc_res *r = v;
			if (r->holders[O2LT_PR] || r->holders[O2LT_EX])
				err = -EBUSY;
			busy |= res_busy(r);
		}
		if (!err && busy && g_get_monotonic_time() >= deadline)
			err = -ETIMEDOUT;
		if (err) {
			g_mutex_unlock(&c->mu);
			return err;
		}
		if (!busy)
			break; /* with c->mu held: nothing starts before the marks below */
		g_mutex_unlock(&c->mu);
		g_main_context_iteration(ctx, FALSE);
		g_usleep(1000);
	}
	/* hold every resource against local users while it goes */
	GPtrArray *ex = g_ptr_array_new();
	g_hash_table_iter_init(&it, c->res);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct o2lc_res *r = v;
		if (r->granted == NONE || r->down_to != NONE)
			continue;
		r->dc_running = true;
		r->down_lvb = false;
		if (r->granted == O2LT_EX && !r->need_refresh)
			g_ptr_array_add(ex, r);
	}
	g_mutex_unlock(&c->mu);
	/* leaving EX: the value block is what the callback says */
	for (guint i = 0; i < ex->len; i++) {
		struct o2lc_res *r = ex->pdata[i];
		uint8_t lvb[O2LC_LVB_LEN] = { 0 };
		if (r->lvb_valid)
			memcpy(lvb, r->lvb, sizeof(lvb));
		if (r->ops && r->ops->downconvert && r->ops->downconvert(r, O2LT_EX, O2LT_NL, lvb, r->data) < 0)
			continue; /* dropped anyway: the caller has written everything back */
		g_mutex_lock(&c->mu);
		memcpy(r->lvb, lvb, sizeof(lvb));
		r->lvb_valid = true;
		r->down_lvb = true;
		g_mutex_unlock(&c->mu);
	}
	g_ptr_array_free(ex, TRUE);
	g_mutex_lock(&c->mu);
	g_hash_table_iter_init(&it, c->res);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		struct o2lc_res *r = v;
		if (r->granted == NONE || r->down_to != NONE)
			continue;
		int64_t id = c->backend->down(c->be, r->key.name, r->key.len, O2LT_UNLOCK,
					      r->down_lvb ? r->lvb : NULL);
		if (id < 0) {
			err = (int)id;
			break;
		}
		r->down_to = O2LT_UNLOCK;
		r->down_id = id;
		c->stats.downconverts++;
	}
	g_mutex_unlock(&c->mu);
	for (;;) {
		g_mutex_lock(&c->mu);
		bool done = all_dropped(c), lost = c->lost;
		g_mutex_unlock(&c->mu);
		if (done || err)
			break;
		if (lost) {
			err = -ENOTCONN;
			break;
		}
		if (g_get_monotonic_time() >= deadline) {
			err = -ETIMEDOUT;
			break;
		}
		g_main_context_iteration(ctx, FALSE);
		g_usleep(1000);
	}
	return err;
}

/* ---- local users ---- */

struct o2lc_res *o2lc_res_get(struct o2lc *c, const void *name, size_t namelen,
			      const struct o2lc_res_ops *ops, void *data)
{
	if (!name || namelen == 0 || namelen > O2LC_NAME_MAX)
		return NULL;
	g_mutex_lock(&c->mu);
	struct o2lc_res *r = res_find(c, name, namelen);
	if (r) {
		/* wanted again: off the LRU; a drop under way goes on, and
		   this user's o2lc_lock waits for it and then asks again */
		lru_remove(r);
		r->forget = false;
	} else {
		r = g_malloc0(sizeof(*r) + namelen);
		r->c = c;
		memcpy(r->name_store, name, namelen);
		r->key = (struct res_key){ r->name_store, namelen };
		r->ops = ops;
		r->data = data;
		r->granted = r->pending = r->down_to = r->blocked = NONE;
		r->lru_link = g_list_alloc();
		r->lru_link->data = r;
		r->ann_link = g_list_alloc();
		r->ann_link->data = r;
		g_hash_table_insert(c->res, &r->key, r);
	}
	r->refs++;
	g_mutex_unlock(&c->mu);
	return r;
}

static void res_put(struct o2lc_res *r, bool forget)
{
	struct o2lc *c = r->c;
	g_mutex_lock(&c->mu);
	if (!r->refs) {
		g_critical("lock %.*s: put of a resource nobody references", (int)r->key.len,
			   (const char *)r->key.name);
		g_mutex_unlock(&c->mu);
		return;
	}
	if (forget)
		r->forget = true;
	if (!--r->refs && !r->dropping)
		lru_add(r);
	kick(r); /* r may be gone now */
	trim(c);
	g_mutex_unlock(&c->mu);
}

void o2lc_res_put(struct o2lc_res *r)
{
	res_put(r, false);
}

void o2lc_res_forget(struct o2lc_res *r)
{
	res_put(r, true);
}

void o2lc_set_limit(struct o2lc *c, unsigned n)
{
	g_mutex_lock(&c->mu);
	c->limit = n;
	trim(c);
	g_mutex_unlock(&c->mu);
}

/* A local user takes r (granted at mode or above); unlocks c->mu. */
static int take_holder(struct o2lc_res *r, int mode)
{
	struct o2lc *c = r->c;
	r->holders[mode]++;
	/* it may cache anew: an invalidation running must run again, and a
	   finished one is no longer enough */
	if (r->inval_running)
		r->admitted++;
	else
		r->inval_done = false;
	c->stats.locks++;
	int ret = 0;
	if (r->need_refresh) {
		r->refreshing = true;
		ret = O2LC_REFRESH;
	}
	g_mutex_unlock(&c->mu);
	return ret;
}

/* Whether a lock request for r may go out now; under c->mu. */
static bool may_ask(const struct o2lc_res *r)
{
	return r->pending == NONE && !r->finishing && !r->dc_running && !r->dc_queued &&
	       r->down_to == NONE;
}

/* ask's bookkeeping: the request to send for r (r->pending_seq names it). */
static struct send ask_prepare(struct o2lc_res *r, int mode, unsigned flags)
{
	struct send s;

	if (r->unannounced) {
		/* held as new, unknown to the service: this request makes it known */
		g_queue_unlink(&r->c->unannounced, r->ann_link);
		r->unannounced = false;
		flags |= LC_NEW;
	}
	s.r = r;
	s.mode = mode;
	s.flags = flags & O2LC_NOQUEUE ? O2LT_F_NOQUEUE : 0;
	if ((flags & (O2LC_NOQUEUE | O2LC_TELL)) == (O2LC_NOQUEUE | O2LC_TELL))
		s.flags |= O2LT_F_NOQUEUEBAST;
	if (flags & LC_NEW)
		s.flags |= O2LT_F_NEW;
	r->pending = mode;
	r->pending_id = 0;
	if (!++r->pending_seq)
		++r->pending_seq;
	return s;
}

/*
 * Send a lock request for mode (o2lc_lock's flags): its sequence number.
 * The caller holds a reference to r (its kick frees none it does not).
 */
static unsigned ask(struct o2lc_res *r, int mode, unsigned flags)
{
	struct send s = ask_prepare(r, mode, flags);
	unsigned seq = r->pending_seq;

	send_lock(r->c, &s);
	return seq;
}

/*
 * o2lc_lock's work; *waited: when it first had to wait (0: it did not).
 * Returns with c->mu unlocked.
 */
static int lock_or_wait(struct o2lc_res *r, int mode, unsigned flags, gint64 *waited)
{
	struct o2lc *c = r->c;
	unsigned mine = 0; /* the request this call sent, if any */
	g_mutex_lock(&c->mu);
	for (;;) {
		if (c->lost) {
			g_mutex_unlock(&c->mu);
			return -ENOTCONN;
		}
		if (mine && (r->pending == NONE || r->pending_seq != mine)) {
			/* this call's request is over; if another's has ended since,
			   its outcome is gone: look again, as after a cancel */
			int err = r->done_seq == mine ? r->done_error : -ECANCELED;
			if (!err && r->refreshing)
				goto wait; /* another user refreshes what this one will use */
			mine = 0;
			if (!err) {
				/* granted for this call: it takes it now, whoever else
				   waits (nothing lowers it until it has) */
				r->finishing = false;
				if (r->granted >= mode && !r->dc_running && r->down_to == NONE)
					return take_holder(r, mode);
				kick(r);
				continue;
			}
			if (err == -EAGAIN && (flags & O2LC_NOQUEUE)) {
				g_mutex_unlock(&c->mu);
				return -EAGAIN;
			}
			if (err != -ECANCELED) {
				g_warning("lock %.*s: the service refused %s: %s", (int)r->key.len,
					  (const char *)r->key.name, o2lt_mode_name(mode), g_strerror(-err));
				g_mutex_unlock(&c->mu);
				return err == -ENOTCONN ? -ENOTCONN : -EIO;
			}
			/* cancelled to let another node go first: look again */
		}
		if ((flags & O2LC_NOPR) && mode == O2LT_EX)
			r->no_pr = true;
		bool may_go = r->blocked == NONE || compatible(mode, r->blocked);
		/* a user the running invalidation may wait for goes in the mode held */
		bool admit = (flags & O2LC_ADMIT) && r->inval_running;
		if ((may_go || admit) && !r->dc_running && r->down_to == NONE && r->granted != NONE &&
		    r->granted >= mode) {
			if (r->refreshing || r->finishing)
				goto wait;
			return take_holder(r, mode);
		}
		if (!may_go && (flags & O2LC_NOQUEUE)) {
			g_mutex_unlock(&c->mu);
			return -EAGAIN;
		}
		if (flags & O2LC_TRY) {
			/* asked as a prefetch: a grant nobody takes is cached,
			   holding back no other node */
			if (may_go && may_ask(r) && !(flags & O2LC_NOQUEUE))
				r->prefetch_seq = ask(r, mode, flags);
			g_mutex_unlock(&c->mu);
			return -EWOULDBLOCK;
		}
		if (may_go && may_ask(r) && !mine)
			mine = ask(r, mode, flags);
wait:
		if (flags & O2LC_TRY) {
			g_mutex_unlock(&c->mu);
			return -EWOULDBLOCK;
		}
		if (!*waited)
			*waited = g_get_monotonic_time();
		c->waiters++;
		g_cond_wait(&c->cond, &c->mu);
		c->waiters--;
	}
}

void o2lc_prefetch(struct o2lc_res *r, int mode, unsigned flags)
{
	struct o2lc *c = r->c;

	if (mode != O2LT_PR && mode != O2LT_EX)
		return;
	g_mutex_lock(&c->mu);
	if (!c->lost && !r->dropping && (r->granted == NONE || r->granted < mode) &&
	    (r->blocked == NONE || compatible(mode, r->blocked)) && may_ask(r)) {
		if ((flags & O2LC_NOPR) && mode == O2LT_EX)
			r->no_pr = true;
		r->prefetch_seq = ask(r, mode, flags & ~(O2LC_NOQUEUE | O2LC_TELL));
	}
	g_mutex_unlock(&c->mu);
}

int o2lc_lock(struct o2lc_res *r, int mode, unsigned flags)
{
	if (mode != O2LT_PR && mode != O2LT_EX)
		return -EINVAL;
	gint64 waited = 0;
	int rc = lock_or_wait(r, mode, flags, &waited);
	if (waited) {
		/* a relaxed add: a counter read now and then, by nobody who
		   would take c->mu just for it */
		__atomic_fetch_add(&r->c->stats.wait_us, (uint64_t)(g_get_monotonic_time() - waited),
				   __ATOMIC_RELAXED);
		__atomic_fetch_add(&r->c->stats.waits, 1, __ATOMIC_RELAXED);
	}
	return rc;
}

/*
 * Ask for every lock held as new and not asked for yet, in batches of one
 * message each where the backend has them; under c->mu.
 */
static void announce_all(struct o2lc *c)
{
	while (c->unannounced.head && c->backend->lock_batch) {
		g_autofree struct send *v = g_new(struct send, MIN(c->unannounced.length,
								    O2LC_BATCH_MAX));
		size_t n = 0;

		while (c->unannounced.head && n < O2LC_BATCH_MAX) {
			struct o2lc_res *r = c->unannounced.head->data;

			v[n++] = ask_prepare(r, r->granted, 0);
			r->prefetch_seq = r->pending_seq; /* nobody waits for the answer */
		}
		send_lock_batch(c, v, n);
	}
	while (c->unannounced.head) {
		struct o2lc_res *r = c->unannounced.head->data;
		struct send s = ask_prepare(r, r->granted, 0);

		r->prefetch_seq = r->pending_seq;
		send_lock(c, &s);
	}
}

int o2lc_lock_new(struct o2lc_res *r, int mode, unsigned flags)
{
	struct o2lc *c = r->c;

	if (mode != O2LT_PR && mode != O2LT_EX)
		return -EINVAL;
	g_mutex_lock(&c->mu);
	if (c->lost || r->granted != NONE || r->blocked != NONE || r->dropping ||
	    r->need_refresh || r->refreshing || !may_ask(r)) {
		/* the cache knows the name already: ask as anyone would */
		g_mutex_unlock(&c->mu);
		return o2lc_lock(r, mode, flags);
	}
	if ((flags & O2LC_NOPR) && mode == O2LT_EX)
		r->no_pr = true;
	/* nothing to refresh; asked for later, when this node settles */
	r->granted = mode;
	r->made_here = true;
	r->unannounced = true;
	g_queue_push_tail_link(&c->unannounced, r->ann_link);
	c->unsettled++;
	if (c->unannounced.length >= UNANNOUNCED_MAX)
		announce_all(c);
	return take_holder(r, mode);
}

bool o2lc_forget_unannounced(struct o2lc_res *r)
{
	struct o2lc *c = r->c;
	bool gone = false;

	g_mutex_lock(&c->mu);
	if (r->unannounced && !r->holders[O2LT_PR] && !r->holders[O2LT_EX]) {
		let_go_unannounced(r);
		gone = true;
	}
	g_mutex_unlock(&c->mu);
	return gone;
}

int o2lc_settle(struct o2lc *c)
{
	g_mutex_lock(&c->mu);
	if (!c->lost)
		announce_all(c);
	while (c->unsettled && !c->lost) {
		c->waiters++;
		g_cond_wait(&c->cond, &c->mu);
		c->waiters--;
	}
	int rc = c->unsettled ? -ENOTCONN : 0;
	g_mutex_unlock(&c->mu);
	return rc;
}

void o2lc_refresh_done(struct o2lc_res *r, bool ok)
{
	struct o2lc *c = r->c;
	g_mutex_lock(&c->mu);
	r->refreshing = false;
	if (ok)
		r->need_refresh = false;
	kick(r);
	g_mutex_unlock(&c->mu);
}

void o2lc_unlock(struct o2lc_res *r, int mode)
{
	struct o2lc *c = r->c;
	g_mutex_lock(&c->mu);
	if ((mode == O2LT_PR || mode == O2LT_EX) && r->holders[mode])
		r->holders[mode]--;
	else
		g_critical("lock %.*s: unlock of %s that is not held", (int)r->key.len,
			   (const char *)r->key.name, o2lt_mode_name(mode));
	kick(r);
	g_mutex_unlock(&c->mu);
}

bool o2lc_lvb(struct o2lc_res *r, uint8_t *lvb)
{
	g_mutex_lock(&r->c->mu);
	memcpy(lvb, r->lvb, O2LC_LVB_LEN);
	bool valid = r->lvb_valid;
	g_mutex_unlock(&r->c->mu);
	return valid;
}

void o2lc_stats(struct o2lc *c, struct o2lc_stats *st)
{
	g_mutex_lock(&c->mu);
	*st = c->stats;
	st->waits = __atomic_load_n(&c->stats.waits, __ATOMIC_RELAXED);
	st->wait_us = __atomic_load_n(&c->stats.wait_us, __ATOMIC_RELAXED);
	st->resources = g_hash_table_size(c->res);
	st->unused = c->lru.length;
	g_mutex_unlock(&c->mu);
}

const uint8_t *o2lc_res_name(const struct o2lc_res *r, size_t *len)
{
	*len = r->key.len;
	return r->key.name;
}

bool o2lc_res_contended(struct o2lc_res *r, gint64 within_us)
{
	g_mutex_lock(&r->c->mu);
	bool yes = r->blocked_at && g_get_monotonic_time() - r->blocked_at < within_us;
	g_mutex_unlock(&r->c->mu);
	return yes;
}

int o2lc_res_mode(struct o2lc_res *r)
{
	g_mutex_lock(&r->c->mu);
	int m = r->granted;
	g_mutex_unlock(&r->c->mu);
	return m;
}
