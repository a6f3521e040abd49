// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The replicated file-lock table (see plocktab.h).
 *
 * State: the members in join order; per inode and namespace a resource
 * holding the granted locks in the order they were made; one queue of every
 * waiting request in arrival order.  Everything a decision looks at is
 * ordered by the input stream alone (never by a hash table's walk), so
 * that a table loaded from a snapshot decides as the sender's would.
 */
#include "plocktab.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <string.h>

#define MAGIC 0x50 /* 'P' */
#define VERSION 1
#define DEADLOCK_STEPS 10 /* owners followed at most, as Linux does */

enum kind {
	K_LOCK = 1,
	K_CANCEL = 2,
	K_DROP = 3,
	K_SNAPSHOT = 4,
};

struct member {
	struct o2lt_member id;
	bool synced;
	bool has_sender;
	struct o2lt_member sender; /* who sends it its snapshot (unsynced) */
	uint64_t join_at;	   /* the input that joined it */
};

struct res {
	uint64_t ino;
	int ns;
	GPtrArray *locks; /* struct o2pt_lock *, in the order they were made */
};

struct waiter {
	struct res *res;
	uint64_t reqid;
	unsigned flags;
	struct o2pt_lock want;
};

/* what an unsynced table keeps until its snapshot comes */
struct input {
	struct o2lt_member sender; /* messages */
	GBytes *msg;		   /* NULL: a confchg */
	struct o2lt_member *all;   /* members, left, joined, one after another */
	uint32_t *reasons;
	size_t n_members, n_left, n_joined;
};

struct o2pt_table {
	struct o2lt_member self;
	o2pt_event_fn fn;
	void *data;
	bool started, synced, failed;
	uint64_t inputs; /* inputs applied (synced tables agree on it) */
	GArray *members; /* struct member */
	GHashTable *res; /* (ino, ns) -> struct res */
	GQueue waiters;	 /* struct waiter *, in arrival order */
	/* unsynced */
	GQueue kept;	 /* struct input * */
	GArray *old;	 /* struct o2lt_member: who was there at our join */
};

static bool same_member(struct o2lt_member a, struct o2lt_member b)
{
	return a.nodeid == b.nodeid && a.pid == b.pid;
}

static bool same_owner(const struct o2pt_lock *a, const struct o2pt_lock *b)
{
	return same_member(a->member, b->member) && a->owner == b->owner;
}

static bool overlap(const struct o2pt_lock *a, const struct o2pt_lock *b)
{
	return a->start <= b->end && b->start <= a->end;
}

static bool conflicts(const struct o2pt_lock *held, const struct o2pt_lock *want)
{
	return !same_owner(held, want) && overlap(held, want) &&
	       (held->type == O2PT_WR || want->type == O2PT_WR);
}

/* ---- resources ---- */

static guint res_hash(gconstpointer k)
{
	const struct res *r = k;
	return g_int64_hash(&r->ino) ^ (guint)r->ns;
}

static gboolean res_equal(gconstpointer a, gconstpointer b)
{
	const struct res *x = a, *y = b;
	return x->ino == y->ino && x->ns == y->ns;
}

static void res_free(gpointer p)
{
	struct res *r = p;
	g_ptr_array_free(r->locks, TRUE);
	g_free(r);
}

static struct res *res_get(struct o2pt_table *t, uint64_t ino, int ns, bool make)
{
	struct res key = { .ino = ino, .ns = ns };
	struct res *r = g_hash_table_lookup(t->res, &key);
	if (!r && make) {
		r = g_new0(struct res, 1);
		r->ino = ino;
		r->ns = ns;
		r->locks = g_ptr_array_new_with_free_func(g_free);
		g_hash_table_add(t->res, r);
	}
	return r;
}

static bool res_waited(const struct o2pt_table *t, const struct res *r)
{
	for (GList *l = t->waiters.head; l; l = l->next)
		if (((struct waiter *)l->data)->res == r)
			return true;
	return false;
}

/* a resource with no lock and no waiter goes */
static void res_tidy(struct o2pt_table *t, struct res *r)
{
	if (r->locks->len == 0 && !res_waited(t, r))
		g_hash_table_remove(t->res, r);
}

static const struct o2pt_lock *first_conflict(const struct res *r, const struct o2pt_lock *want)
{
	for (guint i = 0; i < r->locks->len; i++) {
		const struct o2pt_lock *l = g_ptr_array_index(r->locks, i);
		if (conflicts(l, want))
			return l;
	}
	return NULL;
}

static void add_lock(struct res *r, const struct o2pt_lock *l)
{
	g_ptr_array_add(r->locks, g_memdup2(l, sizeof(*l)));
}

/*
 * What owner holds over [want->start, want->end] becomes want->type (or
 * nothing, for O2PT_UN): what it cuts is split, what it meets of its own
 * type is merged into it.  Linux's POSIX rules.
 */
static void posix_apply(struct res *r, const struct o2pt_lock *want)
{
	struct o2pt_lock n = *want;
	bool merged = true;

	while (n.type != O2PT_UN && merged) {
		merged = false;
		for (guint i = 0; i < r->locks->len; i++) {
			struct o2pt_lock *l = g_ptr_array_index(r->locks, i);
			bool touch = overlap(l, &n) || (l->end != O2PT_EOF && l->end + 1 == n.start) ||
				     (n.end != O2PT_EOF && n.end + 1 == l->start);
			if (!same_owner(l, &n) || l->type != n.type || !touch)
				continue;
			n.start = MIN(n.start, l->start);
			n.end = MAX(n.end, l->end);
			g_ptr_array_remove_index(r->locks, i);
			merged = true;
			break;
		}
	}
	for (guint i = 0; i < r->locks->len;) {
		struct o2pt_lock *l = g_ptr_array_index(r->locks, i);
		if (!same_owner(l, &n) || !overlap(l, &n)) {
			i++;
			continue;
		}
		struct o2pt_lock before = *l, after = *l;
		g_ptr_array_remove_index(r->locks, i);
		if (before.start < n.start) {
			before.end = n.start - 1;
			g_ptr_array_insert(r->locks, i++, g_memdup2(&before, sizeof(before)));
		}
		if (after.end > n.end) {
			after.start = n.end + 1;
			g_ptr_array_insert(r->locks, i++, g_memdup2(&after, sizeof(after)));
		}
	}
	if (n.type != O2PT_UN)
		add_lock(r, &n);
}

/* the owner's flock lock goes; true if it had one */
static bool flock_drop(struct res *r, const struct o2pt_lock *owner)
{
	for (guint i = 0; i < r->locks->len; i++)
		if (same_owner(g_ptr_array_index(r->locks, i), owner)) {
			g_ptr_array_remove_index(r->locks, i);
			return true;
		}
	return false;
}

static void grant(struct res *r, const struct o2pt_lock *want)
{
	if (r->ns == O2PT_POSIX) {
		posix_apply(r, want);
	} else {
		flock_drop(r, want);
		if (want->type != O2PT_UN)
			add_lock(r, want);
	}
}

/* ---- events ---- */

static void answer(struct o2pt_table *t, struct o2lt_member m, uint64_t reqid, int error,
		   const struct o2pt_lock *conflict)
{
	if (!same_member(m, t->self))
		return;
	struct o2pt_event ev = { .type = O2PT_EV_ANSWER, .member = m, .reqid = reqid,
				 .error = error };
	if (conflict) {
		ev.conflict = true;
		ev.lock = *conflict;
	}
	t->fn(&ev, t->data);
}

static void event(struct o2pt_table *t, enum o2pt_event_type type, struct o2lt_member m)
{
	struct o2pt_event ev = { .type = type, .member = m };
	t->fn(&ev, t->data);
}

/* ---- waiters ---- */

static void waiter_free(struct waiter *w)
{
	g_free(w);
}

/* Grant every waiter nothing stands in the way of, until none is left. */
static void wake(struct o2pt_table *t)
{
	bool granted = true;

	while (granted) {
		granted = false;
		for (GList *l = t->waiters.head; l;) {
			GList *next = l->next;
			struct waiter *w = l->data;
			if (!first_conflict(w->res, &w->want)) {
				g_queue_delete_link(&t->waiters, l);
				grant(w->res, &w->want);
				answer(t, w->want.member, w->reqid, 0, NULL);
				waiter_free(w);
				granted = true;
			}
			l = next;
		}
	}
}

static const struct waiter *waiting_owner(const struct o2pt_table *t, const struct o2pt_lock *o)
{
	for (GList *l = t->waiters.head; l; l = l->next) {
		const struct waiter *w = l->data;
		if (w->res->ns == O2PT_POSIX && same_owner(&w->want, o))
			return w;
	}
	return NULL;
}

/*
 * Would want, waiting for blocker, close a circle of POSIX owners each
 * waiting for the next?  Followed as Linux follows it: each owner's first
 * waiting request, the first lock in that request's way, a few steps.
 */
static bool deadlock(const struct o2pt_table *t, const struct o2pt_lock *want,
		     const struct o2pt_lock *blocker)
{
	for (int i = 0; i < DEADLOCK_STEPS && blocker; i++) {
		if (same_owner(blocker, want))
			return true;
		const struct waiter *w = waiting_owner(t, blocker);
		if (!w)
			return false;
		blocker = first_conflict(w->res, &w->want);
	}
	return false;
}

/* ---- members ---- */

static struct member *member_find(const struct o2pt_table *t, struct o2lt_member id)
{
	for (guint i = 0; i < t->members->len; i++) {
		struct member *m = &g_array_index(t->members, struct member, i);
		if (same_member(m->id, id))
			return m;
	}
	return NULL;
}

/* Everything of a member that is gone goes with it. */
static void member_purge(struct o2pt_table *t, struct o2lt_member id)
{
	for (GList *l = t->waiters.head; l;) {
		GList *next = l->next;
		struct waiter *w = l->data;
		if (same_member(w->want.member, id)) {
			g_queue_delete_link(&t->waiters, l);
			waiter_free(w);
		}
		l = next;
	}
	GHashTableIter it;
	gpointer k;
	g_hash_table_iter_init(&it, t->res);
	while (g_hash_table_iter_next(&it, &k, NULL)) {
		struct res *r = k;
		for (guint i = 0; i < r->locks->len;) {
			if (same_member(((struct o2pt_lock *)g_ptr_array_index(r->locks, i))->member, id))
				g_ptr_array_remove_index(r->locks, i);
			else
				i++;
		}
		if (r->locks->len == 0 && !res_waited(t, r))
			g_hash_table_iter_remove(&it);
	}
}

/* ---- messages ---- */

struct wr {
	uint8_t *p;
	size_t size, len;
	bool over;
};

/* with no buffer, only measure */
static void put(struct wr *w, const void *v, size_t n)
{
	if (!w->p) {
		w->len += n;
		return;
	}
	if (w->len + n > w->size) {
		w->over = true;
		return;
	}
	memcpy(w->p + w->len, v, n);
	w->len += n;
}

static void put8(struct wr *w, uint8_t v)
{
	put(w, &v, 1);
}

static void put32(struct wr *w, uint32_t v)
{
	v = GUINT32_TO_LE(v);
	put(w, &v, 4);
}

static void put64(struct wr *w, uint64_t v)
{
	v = GUINT64_TO_LE(v);
	put(w, &v, 8);
}

static void put_head(struct wr *w, enum kind k, uint64_t reqid)
{
	put8(w, MAGIC);
	put8(w, VERSION);
	put8(w, (uint8_t)k);
	put8(w, 0);
	put64(w, reqid);
}

static ssize_t finish(const struct wr *w)
{
	return w->over ? -ENOBUFS : (ssize_t)w->len;
}

struct rd {
	const uint8_t *p;
	size_t len, pos;
	bool bad;
};

static void get(struct rd *r, void *v, size_t n)
{
	if (r->bad || r->len - r->pos < n) {
		r->bad = true;
		memset(v, 0, n);
		return;
	}
	memcpy(v, r->p + r->pos, n);
	r->pos += n;
}

static uint8_t get8(struct rd *r)
{
	uint8_t v;
	get(r, &v, 1);
	return v;
}

static uint32_t get32(struct rd *r)
{
	uint32_t v;
	get(r, &v, 4);
	return GUINT32_FROM_LE(v);
}

static uint64_t get64(struct rd *r)
{
	uint64_t v;
	get(r, &v, 8);
	return GUINT64_FROM_LE(v);
}

static struct o2lt_member get_member(struct rd *r)
{
	struct o2lt_member m;
	m.nodeid = get32(r);
	m.pid = get32(r);
	return m;
}

static void put_member(struct wr *w, struct o2lt_member m)
{
	put32(w, m.nodeid);
	put32(w, m.pid);
}

static bool lock_ok(int ns, int type, uint64_t start, uint64_t end, bool unlock_ok)
{
	return (ns == O2PT_POSIX || ns == O2PT_FLOCK) &&
	       (type == O2PT_RD || type == O2PT_WR || (unlock_ok && type == O2PT_UN)) &&
	       start <= end;
}

ssize_t o2pt_msg_lock(void *buf, size_t size, uint64_t reqid, uint64_t ino, int ns,
		      uint64_t owner, int type, uint64_t start, uint64_t end, unsigned flags,
		      uint32_t pid)
{
	if (ns == O2PT_FLOCK)
		start = 0, end = O2PT_EOF;
	if (!lock_ok(ns, type, start, end, true) || (flags & ~(O2PT_F_WAIT | O2PT_F_TEST)) ||
	    (type == O2PT_UN && flags))
		return -EINVAL;
	struct wr w = { .p = buf, .size = size };
	put_head(&w, K_LOCK, reqid);
	put64(&w, ino);
	put64(&w, owner);
	put64(&w, start);
	put64(&w, end);
	put32(&w, pid);
	put8(&w, (uint8_t)ns);
	put8(&w, (uint8_t)type);
	put8(&w, (uint8_t)flags);
	put8(&w, 0);
	return finish(&w);
}

ssize_t o2pt_msg_cancel(void *buf, size_t size, uint64_t reqid, uint64_t wait_reqid)
{
	struct wr w = { .p = buf, .size = size };
	put_head(&w, K_CANCEL, reqid);
	put64(&w, wait_reqid);
	return finish(&w);
}

ssize_t o2pt_msg_drop(void *buf, size_t size, uint64_t reqid, uint64_t ino, int ns,
		      uint64_t owner)
{
	if (ns != O2PT_POSIX && ns != O2PT_FLOCK)
		return -EINVAL;
	struct wr w = { .p = buf, .size = size };
	put_head(&w, K_DROP, reqid);
	put64(&w, ino);
	put64(&w, owner);
	put8(&w, (uint8_t)ns);
	put8(&w, 0);
	put8(&w, 0);
	put8(&w, 0);
	return finish(&w);
}

/* ---- requests ---- */

static int do_lock(struct o2pt_table *t, struct o2lt_member from, uint64_t reqid, struct rd *r)
{
	uint64_t ino = get64(r);
	struct o2pt_lock want = { .member = from };
	want.owner = get64(r);
	want.start = get64(r);
	want.end = get64(r);
	want.pid = get32(r);
	int ns = get8(r);
	want.type = get8(r);
	unsigned flags = get8(r);
	get8(r);
	if (r->bad || r->pos != r->len || !lock_ok(ns, want.type, want.start, want.end, true) ||
	    (flags & ~(O2PT_F_WAIT | O2PT_F_TEST)) || (want.type == O2PT_UN && flags) ||
	    (ns == O2PT_FLOCK && (want.start != 0 || want.end != O2PT_EOF)))
		return -EBADMSG;

	if (flags & O2PT_F_TEST) {
		struct res *res = res_get(t, ino, ns, false);
		const struct o2pt_lock *c = res ? first_conflict(res, &want) : NULL;
		answer(t, from, reqid, 0, c);
		return 0;
	}
	struct res *res = res_get(t, ino, ns, true);
	if (want.type == O2PT_UN) {
		grant(res, &want);
		answer(t, from, reqid, 0, NULL);
		wake(t);
		res_tidy(t, res);
		return 0;
	}
	/* a flock conversion lets go of the old lock first, as Linux does */
	if (ns == O2PT_FLOCK) {
		for (guint i = 0; i < res->locks->len; i++) {
			struct o2pt_lock *l = g_ptr_array_index(res->locks, i);
			if (same_owner(l, &want) && l->type == want.type) {
				answer(t, from, reqid, 0, NULL);
				return 0;
			}
		}
		if (flock_drop(res, &want))
			wake(t);
	}
	const struct o2pt_lock *c = first_conflict(res, &want);
	if (!c) {
		grant(res, &want);
		answer(t, from, reqid, 0, NULL);
		wake(t); /* a downgrade may let others in */
		return 0;
	}
	if (!(flags & O2PT_F_WAIT)) {
		answer(t, from, reqid, -EAGAIN, c);
		res_tidy(t, res);
		return 0;
	}
	if (ns == O2PT_POSIX && deadlock(t, &want, c)) {
		answer(t, from, reqid, -EDEADLK, c);
		res_tidy(t, res);
		return 0;
	}
	struct waiter *w = g_new0(struct waiter, 1);
	w->res = res;
	w->reqid = reqid;
	w->flags = flags;
	w->want = want;
	g_queue_push_tail(&t->waiters, w);
	return 0;
}

static int do_cancel(struct o2pt_table *t, struct o2lt_member from, uint64_t reqid, struct rd *r)
{
	uint64_t wait_reqid = get64(r);
	if (r->bad || r->pos != r->len)
		return -EBADMSG;
	for (GList *l = t->waiters.head; l; l = l->next) {
		struct waiter *w = l->data;
		if (same_member(w->want.member, from) && w->reqid == wait_reqid) {
			struct res *res = w->res;
			g_queue_delete_link(&t->waiters, l);
			answer(t, from, wait_reqid, -EINTR, NULL);
			waiter_free(w);
			res_tidy(t, res);
			break;
		}
	}
	answer(t, from, reqid, 0, NULL);
	return 0;
}

static int do_drop(struct o2pt_table *t, struct o2lt_member from, uint64_t reqid, struct rd *r)
{
	uint64_t ino = get64(r);
	struct o2pt_lock o = { .member = from };
	o.owner = get64(r);
	int ns = get8(r);
	get8(r), get8(r), get8(r);
	if (r->bad || r->pos != r->len || (ns != O2PT_POSIX && ns != O2PT_FLOCK))
		return -EBADMSG;
	struct res *res = res_get(t, ino, ns, false);
	if (res) {
		bool dropped = false;
		for (guint i = 0; i < res->locks->len;) {
			if (same_owner(g_ptr_array_index(res->locks, i), &o)) {
				g_ptr_array_remove_index(res->locks, i);
				dropped = true;
			} else {
				i++;
			}
		}
		if (dropped)
			wake(t);
		res_tidy(t, res);
	}
	answer(t, from, reqid, 0, NULL);
	return 0;
}

/* ---- snapshots ---- */

static void put_lock(struct wr *w, const struct o2pt_lock *l)
{
	put_member(w, l->member);
	put64(w, l->owner);
	put64(w, l->start);
	put64(w, l->end);
	put32(w, l->pid);
	put8(w, (uint8_t)l->type);
}

static bool get_lock(struct rd *r, struct o2pt_lock *l, bool unlock_ok)
{
	l->member = get_member(r);
	l->owner = get64(r);
	l->start = get64(r);
	l->end = get64(r);
	l->pid = get32(r);
	l->type = get8(r);
	return !r->bad && lock_ok(O2PT_POSIX, l->type, l->start, l->end, unlock_ok);
}

static int res_cmp(gconstpointer a, gconstpointer b)
{
	const struct res *x = *(struct res *const *)a, *y = *(struct res *const *)b;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->ns - y->ns;
}

/* the resources in (ino, ns) order: a walk that does not depend on the hash */
static GPtrArray *res_sorted(const struct o2pt_table *t)
{
	GPtrArray *a = g_ptr_array_new();
	GHashTableIter it;
	gpointer k;
	g_hash_table_iter_init(&it, t->res);
	while (g_hash_table_iter_next(&it, &k, NULL))
		g_ptr_array_add(a, k);
	g_ptr_array_sort(a, res_cmp);
	return a;
}

static void put_state(struct wr *w, const struct o2pt_table *t)
{
	put32(w, t->members->len);
	for (guint i = 0; i < t->members->len; i++) {
		const struct member *m = &g_array_index(t->members, struct member, i);
		put_member(w, m->id);
		put8(w, m->synced);
		put8(w, m->has_sender);
		put_member(w, m->sender);
		put64(w, m->join_at);
	}
	g_autoptr(GPtrArray) rs = res_sorted(t);
	put32(w, rs->len);
	for (guint i = 0; i < rs->len; i++) {
		const struct res *r = g_ptr_array_index(rs, i);
		put64(w, r->ino);
		put8(w, (uint8_t)r->ns);
		put32(w, r->locks->len);
		for (guint j = 0; j < r->locks->len; j++)
			put_lock(w, g_ptr_array_index(r->locks, j));
	}
	put32(w, t->waiters.length);
	for (GList *l = t->waiters.head; l; l = l->next) {
		const struct waiter *wt = l->data;
		put64(w, wt->res->ino);
		put8(w, (uint8_t)wt->res->ns);
		put64(w, wt->reqid);
		put8(w, (uint8_t)wt->flags);
		put_lock(w, &wt->want);
	}
}

int o2pt_snapshot(struct o2pt_table *t, struct o2lt_member target, void **ret_msg,
		  size_t *ret_len)
{
	struct member *m = member_find(t, target);
	if (!t->synced)
		return -EAGAIN;
	if (!m || m->synced)
		return -ENOENT;
	/* measure, then write */
	struct wr w = { .p = NULL, .size = 0 };
	for (int pass = 0; pass < 2; pass++) {
		put_head(&w, K_SNAPSHOT, 0);
		put_member(&w, target);
		put64(&w, t->inputs - m->join_at); /* inputs after the join it holds */
		put64(&w, t->inputs);
		put_state(&w, t);
		if (pass == 0) {
			if (w.len > O2PT_MSG_MAX)
				return -EMSGSIZE;
			w = (struct wr){ .p = g_malloc(w.len), .size = w.len };
		}
	}
	*ret_msg = w.p;
	*ret_len = w.len;
	return 0;
}

/* The state in a snapshot, into t (which holds nothing yet).  false: unusable. */
static bool load_state(struct o2pt_table *t, struct rd *r)
{
	uint32_t n = get32(r);
	if (r->bad || n > (r->len - r->pos) / 25)
		return false;
	for (uint32_t i = 0; i < n; i++) {
		struct member m = { .id = get_member(r) };
		m.synced = get8(r) != 0;
		m.has_sender = get8(r) != 0;
		m.sender = get_member(r);
		m.join_at = get64(r);
		if (r->bad || member_find(t, m.id))
			return false;
		g_array_append_val(t->members, m);
	}
	n = get32(r);
	if (r->bad || n > (r->len - r->pos) / 13)
		return false;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t ino = get64(r);
		int ns = get8(r);
		uint32_t nl = get32(r);
		if (r->bad || (ns != O2PT_POSIX && ns != O2PT_FLOCK) || res_get(t, ino, ns, false) ||
		    nl == 0 || nl > (r->len - r->pos) / 37)
			return false;
		struct res *res = res_get(t, ino, ns, true);
		for (uint32_t j = 0; j < nl; j++) {
			struct o2pt_lock l;
			if (!get_lock(r, &l, false) || !member_find(t, l.member))
				return false;
			add_lock(res, &l);
		}
	}
	n = get32(r);
	if (r->bad || n > (r->len - r->pos) / 55)
		return false;
	for (uint32_t i = 0; i < n; i++) {
		struct waiter *w = g_new0(struct waiter, 1);
		uint64_t ino = get64(r);
		int ns = get8(r);
		w->reqid = get64(r);
		w->flags = get8(r);
		g_queue_push_tail(&t->waiters, w); /* freed with the table if bad */
		if (r->bad || (ns != O2PT_POSIX && ns != O2PT_FLOCK) ||
		    !get_lock(r, &w->want, false) || !member_find(t, w->want.member))
			return false;
		w->res = res_get(t, ino, ns, true);
	}
	if (r->pos != r->len)
		return false;
	char why[128];
	return o2pt_check(t, why, sizeof(why)) == 0;
}

/* Whether a snapshot's state is one a joiner can load (every member asks alike). */
static bool snapshot_ok(const struct o2pt_table *t, const void *msg, size_t len)
{
	struct rd r = { .p = msg, .len = len, .pos = 20 };
	get64(&r), get64(&r);
	if (r.bad)
		return false;
	struct o2pt_table *scratch = o2pt_new(t->self, t->fn, t->data);
	bool ok = load_state(scratch, &r);
	o2pt_free(scratch);
	return ok;
}

/* ---- the table ---- */

struct o2pt_table *o2pt_new(struct o2lt_member self, o2pt_event_fn fn, void *data)
{
	struct o2pt_table *t = g_new0(struct o2pt_table, 1);
	t->self = self;
	t->fn = fn;
	t->data = data;
	t->members = g_array_new(FALSE, TRUE, sizeof(struct member));
	t->res = g_hash_table_new_full(res_hash, res_equal, res_free, NULL);
	g_queue_init(&t->waiters);
	g_queue_init(&t->kept);
	t->old = g_array_new(FALSE, TRUE, sizeof(struct o2lt_member));
	return t;
}

static void input_free(gpointer p)
{
	struct input *in = p;
	if (in->msg)
		g_bytes_unref(in->msg);
	g_free(in->all);
	g_free(in->reasons);
	g_free(in);
}

static void clear_state(struct o2pt_table *t)
{
	g_queue_clear_full(&t->waiters, (GDestroyNotify)waiter_free);
	g_hash_table_remove_all(t->res);
	g_array_set_size(t->members, 0);
}

void o2pt_free(struct o2pt_table *t)
{
	if (!t)
		return;
	clear_state(t);
	g_hash_table_destroy(t->res);
	g_array_free(t->members, TRUE);
	g_queue_clear_full(&t->kept, input_free);
	g_array_free(t->old, TRUE);
	g_free(t);
}

bool o2pt_synced(const struct o2pt_table *t)
{
	return t->synced;
}

static bool in_list(const struct o2lt_member *l, size_t n, struct o2lt_member m)
{
	for (size_t i = 0; i < n; i++)
		if (same_member(l[i], m))
			return true;
	return false;
}

static bool confchg_ok(const struct o2lt_confchg *c)
{
	for (size_t i = 0; i < c->n_left; i++)
		if (in_list(c->members, c->n_members, c->left[i]))
			return false;
	for (size_t i = 0; i < c->n_joined; i++)
		if (!in_list(c->members, c->n_members, c->joined[i]))
			return false;
	return true;
}

/* Whoever still waits for a snapshot gets a sender, if it lost its own. */
static void assign_senders(struct o2pt_table *t)
{
	struct member *first = NULL;
	for (guint i = 0; i < t->members->len && !first; i++) {
		struct member *m = &g_array_index(t->members, struct member, i);
		if (m->synced)
			first = m;
	}
	for (guint i = 0; i < t->members->len; i++) {
		struct member *m = &g_array_index(t->members, struct member, i);
		if (m->synced || (m->has_sender && member_find(t, m->sender)) || !first)
			continue;
		m->has_sender = true;
		m->sender = first->id;
		if (same_member(first->id, t->self))
			event(t, O2PT_EV_SEND_SNAPSHOT, m->id);
	}
}

static void apply_confchg(struct o2pt_table *t, const struct o2lt_confchg *c)
{
	t->inputs++;
	for (size_t i = 0; i < c->n_left; i++) {
		member_purge(t, c->left[i]);
		for (guint j = 0; j < t->members->len; j++)
			if (same_member(g_array_index(t->members, struct member, j).id, c->left[i])) {
				g_array_remove_index(t->members, j);
				break;
			}
	}
	for (size_t i = 0; i < c->n_joined; i++) {
		if (member_find(t, c->joined[i]))
			continue;
		struct member m = { .id = c->joined[i], .join_at = t->inputs };
		g_array_append_val(t->members, m);
	}
	wake(t);
	assign_senders(t);
}

static int apply_msg(struct o2pt_table *t, struct o2lt_member from, const void *msg, size_t len)
{
	struct rd r = { .p = msg, .len = len };
	t->inputs++;
	uint8_t magic = get8(&r), version = get8(&r), kind = get8(&r);
	get8(&r);
	uint64_t reqid = get64(&r);
	if (r.bad || magic != MAGIC || version != VERSION)
		return -EBADMSG;
	struct member *m = member_find(t, from);
	if (!m)
		return -EPERM;
	if (kind == K_SNAPSHOT) {
		struct o2lt_member target = get_member(&r);
		struct member *tm = r.bad ? NULL : member_find(t, target);
		if (r.bad || !snapshot_ok(t, msg, len))
			return -EBADMSG; /* its target stays unsynced here as at the joiner */
		if (tm && !tm->synced) {
			tm->synced = true;
			tm->has_sender = false;
			if (same_member(target, t->self))
				event(t, O2PT_EV_SYNCED, t->self);
		}
		return 0;
	}
	if (kind != K_LOCK && kind != K_CANCEL && kind != K_DROP)
		return -EBADMSG;
	if (!m->synced) {
		answer(t, from, reqid, -EINVAL, NULL);
		return 0;
	}
	switch (kind) {
	case K_LOCK:
		return do_lock(t, from, reqid, &r);
	case K_CANCEL:
		return do_cancel(t, from, reqid, &r);
	default:
		return do_drop(t, from, reqid, &r);
	}
}

static void apply_kept(struct o2pt_table *t, struct input *in)
{
	if (in->msg) {
		gsize len;
		const void *p = g_bytes_get_data(in->msg, &len);
		apply_msg(t, in->sender, p, len);
		return;
	}
	struct o2lt_confchg c = {
		.members = in->all, .n_members = in->n_members,
		.left = in->all + in->n_members, .left_reasons = in->reasons, .n_left = in->n_left,
		.joined = in->all + in->n_members + in->n_left, .n_joined = in->n_joined,
	};
	apply_confchg(t, &c);
}

/* An unsynced table's own snapshot came: load it, then what came after. */
static int load_snapshot(struct o2pt_table *t, struct o2lt_member from, const void *msg,
			 size_t len)
{
	struct rd r = { .p = msg, .len = len, .pos = 12 };
	get_member(&r);
	uint64_t skip = get64(&r), inputs = get64(&r);
	if (r.bad || skip > t->kept.length || !load_state(t, &r) || !member_find(t, t->self) ||
	    !member_find(t, from)) {
		clear_state(t);
		g_queue_clear_full(&t->kept, input_free);
		t->failed = true;
		event(t, O2PT_EV_SYNC_FAILED, t->self);
		return -EPROTO;
	}
	for (uint64_t i = 0; i < skip; i++)
		input_free(g_queue_pop_head(&t->kept));
	t->inputs = inputs;
	t->synced = true; /* the self entry says unsynced until the snapshot applies */
	struct input *in;
	while ((in = g_queue_pop_head(&t->kept))) {
		apply_kept(t, in);
		input_free(in);
	}
	return apply_msg(t, from, msg, len);
}

static bool snapshot_for_me(const struct o2pt_table *t, const void *msg, size_t len)
{
	const uint8_t *p = msg;
	if (len < 20 || p[0] != MAGIC || p[1] != VERSION || p[2] != K_SNAPSHOT)
		return false;
	struct rd r = { .p = msg, .len = len, .pos = 12 };
	return same_member(get_member(&r), t->self);
}

int o2pt_deliver(struct o2pt_table *t, struct o2lt_member sender, const void *msg, size_t len)
{
	if (t->failed || !t->started)
		return 0;
	if (len > O2PT_MSG_MAX)
		len = 0; /* too large to trust: refused like any malformed message */
	if (t->synced)
		return apply_msg(t, sender, msg, len);
	/* a malformed one is kept as any input: every synced table refuses it too */
	if (snapshot_for_me(t, msg, len) && snapshot_ok(t, msg, len))
		return load_snapshot(t, sender, msg, len);
	struct input *in = g_new0(struct input, 1);
	in->sender = sender;
	in->msg = g_bytes_new(msg, len);
	g_queue_push_tail(&t->kept, in);
	return 0;
}

int o2pt_confchg(struct o2pt_table *t, const struct o2lt_confchg *c)
{
	if (!confchg_ok(c))
		return -EINVAL;
	if (t->failed)
		return 0;
	if (t->synced) {
		apply_confchg(t, c);
		return 0;
	}
	if (!t->started) {
		if (!in_list(c->joined, c->n_joined, t->self))
			return -EINVAL;
		t->started = true;
		bool alone = true;
		for (size_t i = 0; i < c->n_members; i++)
			if (!in_list(c->joined, c->n_joined, c->members[i])) {
				g_array_append_val(t->old, c->members[i]);
				alone = false;
			}
		if (alone) {
			/* a new group: everyone in it starts with nothing, synced */
			t->inputs = 1;
			for (size_t i = 0; i < c->n_members; i++) {
				struct member m = { .id = c->members[i], .synced = true, .join_at = 1 };
				g_array_append_val(t->members, m);
			}
			t->synced = true;
			event(t, O2PT_EV_SYNCED, t->self);
		}
		return 0;
	}
	/* unsynced: keep it; fail if nobody who could send us our state is left */
	for (size_t i = 0; i < c->n_left; i++)
		for (guint j = 0; j < t->old->len; j++)
			if (same_member(g_array_index(t->old, struct o2lt_member, j), c->left[i])) {
				g_array_remove_index(t->old, j);
				break;
			}
	struct input *in = g_new0(struct input, 1);
	size_t n = c->n_members + c->n_left + c->n_joined;
	in->all = g_new(struct o2lt_member, n ? n : 1);
	memcpy(in->all, c->members, c->n_members * sizeof(*c->members));
	memcpy(in->all + c->n_members, c->left, c->n_left * sizeof(*c->left));
	memcpy(in->all + c->n_members + c->n_left, c->joined, c->n_joined * sizeof(*c->joined));
	in->reasons = g_new0(uint32_t, c->n_left ? c->n_left : 1);
	in->n_members = c->n_members;
	in->n_left = c->n_left;
	in->n_joined = c->n_joined;
	g_queue_push_tail(&t->kept, in);
	if (t->old->len == 0) {
		g_queue_clear_full(&t->kept, input_free);
		t->failed = true;
		event(t, O2PT_EV_SYNC_FAILED, t->self);
	}
	return 0;
}

/* ---- checks ---- */

#define FAIL(...) (g_snprintf(why, whylen, __VA_ARGS__), -EUCLEAN)

int o2pt_check(const struct o2pt_table *t, char *why, size_t whylen)
{
	GHashTableIter it;
	gpointer k;
	g_hash_table_iter_init(&it, t->res);
	while (g_hash_table_iter_next(&it, &k, NULL)) {
		const struct res *r = k;
		for (guint i = 0; i < r->locks->len; i++) {
			const struct o2pt_lock *a = g_ptr_array_index(r->locks, i);
			if (a->type != O2PT_RD && a->type != O2PT_WR)
				return FAIL("inode %" PRIu64 ": a lock of type %d", r->ino, a->type);
			if (a->start > a->end)
				return FAIL("inode %" PRIu64 ": an empty range", r->ino);
			if (r->ns == O2PT_FLOCK && (a->start != 0 || a->end != O2PT_EOF))
				return FAIL("inode %" PRIu64 ": a flock lock of part of the file", r->ino);
			for (guint j = i + 1; j < r->locks->len; j++) {
				const struct o2pt_lock *b = g_ptr_array_index(r->locks, j);
				if (conflicts(a, b))
					return FAIL("inode %" PRIu64 ": conflicting locks both granted",
						    r->ino);
				if (!same_owner(a, b))
					continue;
				if (r->ns == O2PT_FLOCK)
					return FAIL("inode %" PRIu64 ": two flock locks of one owner",
						    r->ino);
				if (overlap(a, b))
					return FAIL("inode %" PRIu64 ": one owner's locks overlap",
						    r->ino);
				if (a->type == b->type &&
				    ((a->end != O2PT_EOF && a->end + 1 == b->start) ||
				     (b->end != O2PT_EOF && b->end + 1 == a->start)))
					return FAIL("inode %" PRIu64 ": touching locks not merged",
						    r->ino);
			}
			if (!member_find(t, a->member))
				return FAIL("inode %" PRIu64 ": a lock of no member", r->ino);
		}
		if (r->locks->len == 0 && !res_waited(t, r))
			return FAIL("inode %" PRIu64 ": an empty resource kept", r->ino);
	}
	for (GList *l = t->waiters.head; l; l = l->next) {
		const struct waiter *w = l->data;
		if (!first_conflict(w->res, &w->want))
			return FAIL("a waiter nothing is in the way of");
		if (!member_find(t, w->want.member))
			return FAIL("a waiter of no member");
	}
	return 0;
}

char *o2pt_dump(const struct o2pt_table *t)
{
	GString *s = g_string_new(NULL);
	g_string_append_printf(s, "inputs %" PRIu64 "\n", t->inputs);
	for (guint i = 0; i < t->members->len; i++) {
		const struct member *m = &g_array_index(t->members, struct member, i);
		g_string_append_printf(s, "member %u/%u%s\n", m->id.nodeid, m->id.pid,
				       m->synced ? "" : " unsynced");
	}
	g_autoptr(GPtrArray) rs = res_sorted(t);
	for (guint i = 0; i < rs->len; i++) {
		const struct res *r = g_ptr_array_index(rs, i);
		for (guint j = 0; j < r->locks->len; j++) {
			const struct o2pt_lock *l = g_ptr_array_index(r->locks, j);
			g_string_append_printf(s, "%s %" PRIu64 " %u/%u:%" PRIu64 " %s %" PRIu64
					       "-%" PRIu64 " pid %u\n",
					       r->ns == O2PT_FLOCK ? "flock" : "posix", r->ino,
					       l->member.nodeid, l->member.pid, l->owner,
					       l->type == O2PT_WR ? "WR" : "RD", l->start, l->end,
					       l->pid);
		}
	}
	for (GList *l = t->waiters.head; l; l = l->next) {
		const struct waiter *w = l->data;
		g_string_append_printf(s, "wait %s %" PRIu64 " %u/%u:%" PRIu64 " %s %" PRIu64
				       "-%" PRIu64 " req %" PRIu64 "\n",
				       w->res->ns == O2PT_FLOCK ? "flock" : "posix", w->res->ino,
				       w->want.member.nodeid, w->want.member.pid, w->want.owner,
				       w->want.type == O2PT_WR ? "WR" : "RD", w->want.start,
				       w->want.end, w->reqid);
	}
	return g_string_free(s, FALSE);
}
