// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The cluster lock table (see locktab.h for the protocol).
 *
 * How it works: a table is a set of members (live, dead or fenced, each an
 * incarnation numbered in join order) and a hash of resources by name.  A
 * resource has one entry per member that holds or wants it, kept sorted by
 * incarnation, and two queues of entry pointers: conversions (entries that
 * hold a mode and want a higher one) and new requests.  Every input runs
 * the same steps on every member: change entries, then a grant pass on each
 * resource touched (regrant), then a blocking pass that tells holders in
 * the way of a queued request.  Work that spans resources (a member dying,
 * a recovery finishing) visits them sorted by name, so that the events come
 * out in the same order on every member, also on one that got its table
 * from a snapshot.
 */
#include "locktab.h"

#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#define MSG_MAGIC 0x544c324fu /* "O2LT" little-endian */
#define MSG_VERSION 1
#define HDR_LEN 24

enum msg_type {
	MSG_LOCK = 1,
	MSG_DOWN = 2,
	MSG_CANCEL = 3,
	MSG_FENCED = 4,
	MSG_RECOVERED = 5,
	MSG_SNAPSHOT = 6,
	MSG_BATCH = 7,
};

#define DOWN_F_LVB 0x1u
#define SNAP_F_ZLIB 0x1u /* the state after the snapshot's head is deflated */
#define LOCK_FLAGS (O2LT_F_NOQUEUE | O2LT_F_RECOVERY | O2LT_F_NOQUEUEBAST | O2LT_F_NEW)
#define NONE 0xff /* no mode (wire and entry fields) */

enum mstate { M_LIVE = 0, M_DEAD = 1, M_FENCED = 2, M_STALE = 3 };

struct member {
	uint64_t inc;
	struct o2lt_member id;
	enum mstate state;
	bool synced;
	uint64_t since_join; /* unsynced: inputs applied since it joined */
	uint64_t sender;     /* unsynced: incarnation that sends its snapshot */
	bool asked;          /* unsynced: that sender was asked to send it */
};

enum queue { Q_NONE = 0, Q_CONVERT = 1, Q_WAIT = 2 };

struct entry {
	struct member *m;
	int granted;   /* mode held, or NONE */
	int requested; /* mode wanted, or NONE */
	unsigned flags; /* of the latest request */
	unsigned held_flags; /* of the request that got what it holds */
	uint64_t reqid; /* of the latest request */
	int notified;  /* highest mode a BLOCKING event named, or NONE */
};

struct resource {
	uint8_t name[O2LT_NAME_MAX];
	size_t namelen;
	uint8_t lvb[O2LT_LVB_LEN];
	bool lvb_valid;
	GPtrArray *entries; /* struct entry *, sorted by member incarnation */
	GQueue convert;
	GQueue wait;
};

struct input {
	bool confchg;
	struct o2lt_member sender;
	uint8_t *msg;
	size_t len;
	GArray *members, *left, *reasons, *joined;
};

enum sync_state { S_NEW, S_WAITING, S_SYNCED, S_FAILED };

struct o2lt_table {
	struct o2lt_member self;
	o2lt_event_fn fn;
	void *data;
	enum sync_state sync;
	GPtrArray *members; /* struct member *, sorted by incarnation */
	GHashTable *res;    /* GBytes name -> struct resource * */
	uint64_t next_inc;
	/* waiting for a snapshot */
	GPtrArray *buffer; /* struct input * since our join */
	GArray *sources;   /* struct o2lt_member that may send us our state */
};

/* ---- little helpers ---- */

static const bool compat[3][3] = {
	/*          NL    PR     EX */
	/* NL */ { true, true, true },
	/* PR */ { true, true, false },
	/* EX */ { true, false, false },
};

const char *o2lt_mode_name(int mode)
{
	switch (mode) {
	case O2LT_NL: return "NL";
	case O2LT_PR: return "PR";
	case O2LT_EX: return "EX";
	case O2LT_UNLOCK: return "UNLOCK";
	default: return "?";
	}
}

static bool same_member(struct o2lt_member a, struct o2lt_member b)
{
	return a.nodeid == b.nodeid && a.pid == b.pid;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = v; p[1] = v >> 8; }
static void put32(uint8_t *p, uint32_t v) { put16(p, v); put16(p + 2, v >> 16); }
static void put64(uint8_t *p, uint64_t v) { put32(p, v); put32(p + 4, v >> 32); }
static uint16_t get16(const uint8_t *p) { return p[0] | (uint16_t)p[1] << 8; }
static uint32_t get32(const uint8_t *p) { return get16(p) | (uint32_t)get16(p + 2) << 16; }
static uint64_t get64(const uint8_t *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }

static void emit(struct o2lt_table *t, const struct o2lt_event *ev)
{
	if (t->fn)
		t->fn(ev, t->data);
}

static void emit_entry(struct o2lt_table *t, enum o2lt_event_type type, const struct resource *r,
		       const struct entry *e, int mode, int error)
{
	struct o2lt_event ev = {
		.type = type, .member = e->m->id, .reqid = e->reqid, .name = r->name,
		.namelen = r->namelen, .mode = mode, .error = error,
	};
	if (type == O2LT_EV_GRANTED) {
		ev.lvb = r->lvb;
		ev.lvb_valid = r->lvb_valid;
	}
	emit(t, &ev);
}

static void emit_refused(struct o2lt_table *t, struct o2lt_member to, uint64_t reqid,
			 const uint8_t *name, size_t namelen, int error)
{
	struct o2lt_event ev = { .type = O2LT_EV_REFUSED, .member = to, .reqid = reqid,
				 .name = name, .namelen = name ? namelen : 0, .mode = NONE,
				 .error = error };
	emit(t, &ev);
}

static void emit_member(struct o2lt_table *t, enum o2lt_event_type type, struct o2lt_member m)
{
	struct o2lt_event ev = { .type = type, .member = m, .mode = NONE };
	emit(t, &ev);
}

/* ---- members ---- */

static struct member *member_find_live(const struct o2lt_table *t, struct o2lt_member id)
{
	for (guint i = 0; i < t->members->len; i++) {
		struct member *m = t->members->pdata[i];
		if (m->state == M_LIVE && same_member(m->id, id))
			return m;
	}
	return NULL;
}

/* live or stale: in the group now */
static struct member *member_find_present(const struct o2lt_table *t, struct o2lt_member id)
{
	for (guint i = 0; i < t->members->len; i++) {
		struct member *m = t->members->pdata[i];
		if ((m->state == M_LIVE || m->state == M_STALE) && same_member(m->id, id))
			return m;
	}
	return NULL;
}

/* a dead incarnation of this very process, not yet recovered */
static bool member_has_dead(const struct o2lt_table *t, struct o2lt_member id)
{
	for (guint i = 0; i < t->members->len; i++) {
		struct member *m = t->members->pdata[i];
		if ((m->state == M_DEAD || m->state == M_FENCED) && same_member(m->id, id))
			return true;
	}
	return false;
}

static struct member *member_by_inc(const struct o2lt_table *t, uint64_t inc)
{
	for (guint i = 0; i < t->members->len; i++) {
		struct member *m = t->members->pdata[i];
		if (m->inc == inc)
			return m;
	}
	return NULL;
}

static struct member *member_add(struct o2lt_table *t, struct o2lt_member id, bool synced)
{
	struct member *m = g_new0(struct member, 1);
	m->inc = ++t->next_inc;
	m->id = id;
	m->state = M_LIVE;
	m->synced = synced;
	g_ptr_array_add(t->members, m);
	return m;
}

static void member_remove(struct o2lt_table *t, struct member *m)
{
	g_ptr_array_remove(t->members, m); /* keeps the order; frees m */
}

/* ---- resources ---- */

static GBytes *res_key(const void *name, size_t namelen)
{
	return g_bytes_new(name, namelen);
}

static void res_free(gpointer p)
{
	struct resource *r = p;
	g_queue_clear(&r->convert);
	g_queue_clear(&r->wait);
	g_ptr_array_free(r->entries, TRUE);
	g_free(r);
}

static struct resource *res_find(const struct o2lt_table *t, const void *name, size_t namelen)
{
	g_autoptr(GBytes) key = res_key(name, namelen);
	return g_hash_table_lookup(t->res, key);
}

static struct resource *res_get(struct o2lt_table *t, const void *name, size_t namelen)
{
	struct resource *r = res_find(t, name, namelen);
	if (r)
		return r;
	r = g_new0(struct resource, 1);
	memcpy(r->name, name, namelen);
	r->namelen = namelen;
	r->entries = g_ptr_array_new_with_free_func(g_free);
	g_queue_init(&r->convert);
	g_queue_init(&r->wait);
	g_hash_table_insert(t->res, res_key(name, namelen), r);
	return r;
}

static void res_drop_if_empty(struct o2lt_table *t, struct resource *r)
{
	if (r->entries->len)
		return;
	g_autoptr(GBytes) key = res_key(r->name, r->namelen);
	g_hash_table_remove(t->res, key);
}

static int res_cmp(gconstpointer a, gconstpointer b)
{
	const struct resource *x = *(struct resource *const *)a, *y = *(struct resource *const *)b;
	int c = memcmp(x->name, y->name, MIN(x->namelen, y->namelen));
	if (c)
		return c;
	return x->namelen < y->namelen ? -1 : x->namelen > y->namelen;
}

/* Every resource, sorted by name (the caller frees the array, not the resources). */
static GPtrArray *res_sorted(const struct o2lt_table *t)
{
	GPtrArray *a = g_ptr_array_new();
	GHashTableIter it;
	gpointer v;
	g_hash_table_iter_init(&it, t->res);
	while (g_hash_table_iter_next(&it, NULL, &v))
		g_ptr_array_add(a, v);
	g_ptr_array_sort(a, res_cmp);
	return a;
}

static struct entry *entry_find(const struct resource *r, const struct member *m)
{
	for (guint i = 0; i < r->entries->len; i++) {
		struct entry *e = r->entries->pdata[i];
		if (e->m == m)
			return e;
	}
	return NULL;
}

static struct entry *entry_add(struct resource *r, struct member *m)
{
	struct entry *e = g_new0(struct entry, 1);
	e->m = m;
	e->granted = NONE;
	e->requested = NONE;
	e->notified = NONE;
	guint i = 0;
	while (i < r->entries->len && ((struct entry *)r->entries->pdata[i])->m->inc < m->inc)
		i++;
	g_ptr_array_insert(r->entries, i, e);
	return e;
}

static void entry_remove(struct resource *r, struct entry *e)
{
	g_queue_remove(&r->convert, e);
	g_queue_remove(&r->wait, e);
	g_ptr_array_remove(r->entries, e); /* frees it */
}

/* e's request goes: the entry with it if it held nothing, else back to what it holds */
static void drop_request(struct resource *r, struct entry *e)
{
	if (e->granted == NONE) {
		entry_remove(r, e);
	} else {
		g_queue_remove(&r->convert, e);
		e->requested = NONE;
	}
}

/* Put a RECOVERY request ahead of every other, behind earlier RECOVERY ones. */
static void queue_add(GQueue *q, struct entry *e)
{
	if (!(e->flags & O2LT_F_RECOVERY)) {
		g_queue_push_tail(q, e);
		return;
	}
	guint i = 0;
	for (GList *l = q->head; l && (((struct entry *)l->data)->flags & O2LT_F_RECOVERY); l = l->next)
		i++;
	g_queue_push_nth(q, e, (gint)i);
}

/* ---- granting ---- */

/* May e hold mode next to every other holder of r? */
static bool fits(const struct resource *r, const struct entry *e, int mode)
{
	for (guint i = 0; i < r->entries->len; i++) {
		const struct entry *h = r->entries->pdata[i];
		if (h == e || h->granted == NONE)
			continue;
		if (h->m->state == M_FENCED && (e->flags & O2LT_F_RECOVERY))
			continue;
		if (!compat[h->granted][mode])
			return false;
	}
	return true;
}

/* Is e, queued, grantable now under the DLM's ordering rules? */
static bool grantable(const struct resource *r, const struct entry *e)
{
	if (!fits(r, e, e->requested))
		return false;
	if (e->granted != NONE || (e->flags & O2LT_F_RECOVERY))
		return true;
	/* new requests: none while conversions wait, and first come first served */
	return r->convert.length == 0 && r->wait.head && r->wait.head->data == e;
}

static void grant(struct o2lt_table *t, struct resource *r, struct entry *e)
{
	g_queue_remove(e->granted == NONE ? &r->wait : &r->convert, e);
	e->granted = e->requested;
	e->held_flags = e->flags;
	e->requested = NONE;
	e->notified = NONE;
	emit_entry(t, O2LT_EV_GRANTED, r, e, e->granted, 0);
}

/* Grant whatever the rules allow, until nothing changes. */
static void grant_pass(struct o2lt_table *t, struct resource *r)
{
	bool changed;
	do {
		changed = false;
		for (GList *l = r->convert.head; l;) {
			struct entry *e = l->data;
			l = l->next;
			if (grantable(r, e)) {
				grant(t, r, e);
				changed = true;
			}
		}
		for (GList *l = r->wait.head; l;) {
			struct entry *e = l->data;
			l = l->next;
			if (grantable(r, e)) {
				grant(t, r, e);
				changed = true;
			} else if (!(e->flags & O2LT_F_RECOVERY)) {
				break;
			}
		}
	} while (changed);
}

/* The highest mode queued on r that live holder h stands in the way of, or NONE. */
static int blocking_mode(const struct resource *r, const struct entry *h)
{
	int want = NONE;
	const GQueue *qs[2] = { &r->convert, &r->wait };
	for (int k = 0; k < 2; k++) {
		for (const GList *l = qs[k]->head; l; l = l->next) {
			const struct entry *q = l->data;
			if (q == h || compat[h->granted][q->requested])
				continue;
			if (want == NONE || q->requested > want)
				want = q->requested;
		}
	}
	return want;
}

static void blocking_pass(struct o2lt_table *t, struct resource *r)
{
	for (guint i = 0; i < r->entries->len; i++) {
		struct entry *h = r->entries->pdata[i];
		if (h->granted == NONE || h->m->state != M_LIVE)
			continue;
		int want = blocking_mode(r, h);
		if (want != NONE && (h->notified == NONE || want > h->notified)) {
			h->notified = want;
			emit_entry(t, O2LT_EV_BLOCKING, r, h, want, 0);
		}
	}
}

static void regrant(struct o2lt_table *t, struct resource *r)
{
	grant_pass(t, r);
	blocking_pass(t, r);
	res_drop_if_empty(t, r);
}

static void regrant_all(struct o2lt_table *t)
{
	g_autoptr(GPtrArray) all = res_sorted(t);
	for (guint i = 0; i < all->len; i++)
		regrant(t, all->pdata[i]);
}

/*
 * Take every lock of m away (a clean leave, or a recovered member).  Value
 * blocks under an EX it held are not to be trusted: it never wrote them back.
 */
static void drop_member_locks(struct o2lt_table *t, struct member *m, bool invalidate_ex)
{
	g_autoptr(GPtrArray) all = res_sorted(t);
	for (guint i = 0; i < all->len; i++) {
		struct resource *r = all->pdata[i];
		struct entry *e = entry_find(r, m);
		if (!e)
			continue;
		if (e->granted == O2LT_EX && invalidate_ex)
			r->lvb_valid = false;
		entry_remove(r, e);
	}
}

/* m died: its queued requests go, its NL locks go, its PR and EX locks freeze. */
static void fail_member(struct o2lt_table *t, struct member *m)
{
	g_autoptr(GPtrArray) all = res_sorted(t);
	m->state = M_DEAD;
	m->synced = false;
	m->since_join = 0;
	m->sender = 0;
	m->asked = false;
	for (guint i = 0; i < all->len; i++) {
		struct resource *r = all->pdata[i];
		struct entry *e = entry_find(r, m);
		if (!e)
			continue;
		if (e->granted == NONE || e->granted == O2LT_NL) {
			entry_remove(r, e);
			continue;
		}
		if (e->requested != NONE) {
			g_queue_remove(&r->convert, e);
			e->requested = NONE;
		}
		e->notified = NONE;
		/* it may have changed what the value block describes without writing it
		 * back: whoever gets the lock next (the recovery first) reads the disk */
		if (e->granted == O2LT_EX)
			r->lvb_valid = false;
	}
}

/* ---- messages ---- */

struct msg {
	enum msg_type type;
	unsigned flags;
	uint64_t reqid;
	const uint8_t *body;
	size_t bodylen;
};

static ssize_t put_header(uint8_t *b, size_t size, size_t len, enum msg_type type, unsigned flags,
			  uint64_t reqid)
{
	if (size < len)
		return -ENOBUFS;
	memset(b, 0, HDR_LEN);
	put32(b, MSG_MAGIC);
	b[4] = MSG_VERSION;
	b[5] = type;
	put16(b + 6, flags);
	put32(b + 8, len);
	put64(b + 16, reqid);
	return (ssize_t)len;
}

static int parse_header(const void *buf, size_t len, struct msg *m)
{
	const uint8_t *b = buf;
	if (len < HDR_LEN || len > O2LT_MSG_MAX)
		return -EBADMSG;
	if (get32(b) != MSG_MAGIC || b[4] != MSG_VERSION || get32(b + 8) != len ||
	    get32(b + 12) != 0)
		return -EBADMSG;
	m->type = b[5];
	m->flags = get16(b + 6);
	m->reqid = get64(b + 16);
	m->body = b + HDR_LEN;
	m->bodylen = len - HDR_LEN;
	return 0;
}

/* LOCK, DOWN and CANCEL bodies: mode, name length, two zero bytes, name[, lvb] */
static ssize_t msg_named(void *buf, size_t size, enum msg_type type, unsigned flags,
			 uint64_t reqid, const void *name, size_t namelen, int mode, const void *lvb)
{
	if (!name || namelen == 0 || namelen > O2LT_NAME_MAX)
		return -EINVAL;
	size_t len = HDR_LEN + 4 + namelen + (lvb ? O2LT_LVB_LEN : 0);
	ssize_t n = put_header(buf, size, len, type, flags, reqid);
	if (n < 0)
		return n;
	uint8_t *b = (uint8_t *)buf + HDR_LEN;
	b[0] = (uint8_t)mode;
	b[1] = (uint8_t)namelen;
	put16(b + 2, 0);
	memcpy(b + 4, name, namelen);
	if (lvb)
		memcpy(b + 4 + namelen, lvb, O2LT_LVB_LEN);
	return n;
}

ssize_t o2lt_msg_lock(void *buf, size_t size, uint64_t reqid, const void *name, size_t namelen,
		      int mode, unsigned flags)
{
	if (mode < O2LT_NL || mode > O2LT_EX || (flags & ~LOCK_FLAGS))
		return -EINVAL;
	return msg_named(buf, size, MSG_LOCK, flags, reqid, name, namelen, mode, NULL);
}

ssize_t o2lt_msg_down(void *buf, size_t size, uint64_t reqid, const void *name, size_t namelen,
		      int new_mode, const void *lvb)
{
	if (new_mode != O2LT_NL && new_mode != O2LT_PR && new_mode != O2LT_UNLOCK)
		return -EINVAL;
	return msg_named(buf, size, MSG_DOWN, lvb ? DOWN_F_LVB : 0, reqid, name, namelen,
			 new_mode, lvb);
}

ssize_t o2lt_msg_cancel(void *buf, size_t size, uint64_t reqid, const void *name, size_t namelen)
{
	return msg_named(buf, size, MSG_CANCEL, 0, reqid, name, namelen, 0, NULL);
}

static ssize_t msg_node(void *buf, size_t size, enum msg_type type, uint64_t reqid, uint32_t nodeid)
{
	ssize_t n = put_header(buf, size, HDR_LEN + 8, type, 0, reqid);
	if (n >= 0) {
		put32((uint8_t *)buf + HDR_LEN, nodeid);
		put32((uint8_t *)buf + HDR_LEN + 4, 0);
	}
	return n;
}

/* BATCH body: whole LOCK messages one after another (the header's reqid is 0) */
ssize_t o2lt_msg_batch(void *buf, size_t size, const void *locks, size_t len)
{
	if (!locks || len == 0 || len > O2LT_MSG_MAX - HDR_LEN)
		return -EINVAL;
	ssize_t n = put_header(buf, size, HDR_LEN + len, MSG_BATCH, 0, 0);
	if (n >= 0)
		memcpy((uint8_t *)buf + HDR_LEN, locks, len);
	return n;
}

ssize_t o2lt_msg_fenced(void *buf, size_t size, uint64_t reqid, uint32_t nodeid)
{
	return msg_node(buf, size, MSG_FENCED, reqid, nodeid);
}

ssize_t o2lt_msg_recovered(void *buf, size_t size, uint64_t reqid, uint32_t nodeid)
{
	return msg_node(buf, size, MSG_RECOVERED, reqid, nodeid);
}

struct named {
	int mode;
	const uint8_t *name;
	size_t namelen;
	const uint8_t *lvb;
};

static int parse_named(const struct msg *m, bool lvb, struct named *n)
{
	if (m->bodylen < 4)
		return -EBADMSG;
	n->mode = m->body[0];
	n->namelen = m->body[1];
	n->name = m->body + 4;
	if (n->namelen == 0 || n->namelen > O2LT_NAME_MAX || get16(m->body + 2) != 0 ||
	    m->bodylen != 4 + n->namelen + (lvb ? O2LT_LVB_LEN : 0))
		return -EBADMSG;
	n->lvb = lvb ? n->name + n->namelen : NULL;
	return 0;
}

static int parse_node(const struct msg *m, uint32_t *nodeid)
{
	if (m->bodylen != 8 || m->flags || get32(m->body + 4) != 0)
		return -EBADMSG;
	*nodeid = get32(m->body);
	return 0;
}

/* ---- applying messages to a synced table ---- */

static int apply_lock(struct o2lt_table *t, struct member *s, const struct msg *m)
{
	struct named n;
	if (parse_named(m, false, &n) || n.mode > O2LT_EX || (m->flags & ~LOCK_FLAGS))
		return -EBADMSG;
	struct resource *r = res_get(t, n.name, n.namelen);
	struct entry *e = entry_find(r, s);
	if (e && e->requested != NONE) {
		emit_refused(t, s->id, m->reqid, n.name, n.namelen, -EBUSY);
		return 0;
	}
	if (e && n.mode <= e->granted) {
		if (n.mode < e->granted) {
			emit_refused(t, s->id, m->reqid, n.name, n.namelen, -EINVAL);
		} else {
			e->reqid = m->reqid;
			emit_entry(t, O2LT_EV_GRANTED, r, e, e->granted, 0);
		}
		return 0;
	}
	if (!e)
		e = entry_add(r, s);
	e->requested = n.mode;
	e->flags = m->flags;
	e->reqid = m->reqid;
	if (e->granted == NONE && n.mode == O2LT_NL) {
		e->granted = O2LT_NL; /* compatible with everything: never waits */
		e->held_flags = e->flags;
		e->requested = NONE;
		emit_entry(t, O2LT_EV_GRANTED, r, e, O2LT_NL, 0);
		return 0;
	}
	queue_add(e->granted == NONE ? &r->wait : &r->convert, e);
	grant_pass(t, r);
	if ((m->flags & O2LT_F_NOQUEUE) && e->requested != NONE) {
		/* told while it is still queued: the holders it waited behind */
		if (m->flags & O2LT_F_NOQUEUEBAST)
			blocking_pass(t, r);
		emit_entry(t, O2LT_EV_REFUSED, r, e, NONE, -EAGAIN);
		drop_request(r, e);
		grant_pass(t, r);
	} else if ((m->flags & O2LT_F_NEW) && e->requested != NONE) {
		emit_entry(t, O2LT_EV_QUEUED, r, e, n.mode, 0);
	}
	blocking_pass(t, r);
	res_drop_if_empty(t, r);
	return 0;
}

static int apply_down(struct o2lt_table *t, struct member *s, const struct msg *m)
{
	struct named n;
	if ((m->flags & ~DOWN_F_LVB) || parse_named(m, m->flags & DOWN_F_LVB, &n) ||
	    (n.mode != O2LT_NL && n.mode != O2LT_PR && n.mode != O2LT_UNLOCK))
		return -EBADMSG;
	struct resource *r = res_find(t, n.name, n.namelen);
	struct entry *e = r ? entry_find(r, s) : NULL;
	int err = 0;
	if (!e || e->granted == NONE)
		err = e ? -EBUSY : -ENOENT;
	else if (e->requested != NONE)
		err = -EBUSY;
	else if (n.mode != O2LT_UNLOCK && n.mode >= e->granted)
		err = -EINVAL;
	else if (n.lvb && e->granted != O2LT_EX)
		err = -EINVAL;
	if (err) {
		emit_refused(t, s->id, m->reqid, n.name, n.namelen, err);
		return 0;
	}
	if (n.lvb) {
		memcpy(r->lvb, n.lvb, O2LT_LVB_LEN);
		r->lvb_valid = true;
	}
	e->reqid = m->reqid;
	if (n.mode == O2LT_UNLOCK) {
		struct o2lt_event ev = { .type = O2LT_EV_DOWNED, .member = s->id, .reqid = m->reqid,
					 .name = r->name, .namelen = r->namelen, .mode = O2LT_UNLOCK };
		entry_remove(r, e);
		emit(t, &ev);
	} else {
		e->granted = n.mode;
		e->notified = NONE;
		emit_entry(t, O2LT_EV_DOWNED, r, e, n.mode, 0);
	}
	regrant(t, r);
	return 0;
}

static int apply_cancel(struct o2lt_table *t, struct member *s, const struct msg *m)
{
	struct named n;
	if (m->flags || parse_named(m, false, &n) || n.mode != 0)
		return -EBADMSG;
	struct resource *r = res_find(t, n.name, n.namelen);
	struct entry *e = r ? entry_find(r, s) : NULL;
	if (!e || e->requested == NONE) {
		emit_refused(t, s->id, m->reqid, n.name, n.namelen, -ENOENT);
		return 0;
	}
	emit_entry(t, O2LT_EV_REFUSED, r, e, NONE, -ECANCELED);
	drop_request(r, e);
	regrant(t, r);
	return 0;
}

static int apply_fenced(struct o2lt_table *t, const struct msg *m)
{
	uint32_t nodeid;
	if (parse_node(m, &nodeid))
		return -EBADMSG;
	bool any = false;
	for (guint i = 0; i < t->members->len; i++) {
		struct member *x = t->members->pdata[i];
		if (x->id.nodeid == nodeid && x->state == M_DEAD) {
			x->state = M_FENCED;
			emit_member(t, O2LT_EV_NODE_FENCED, x->id);
			any = true;
		}
	}
	if (any)
		regrant_all(t); /* RECOVERY requests may pass now */
	return 0;
}

static int apply_recovered(struct o2lt_table *t, struct member *s, const struct msg *m)
{
	uint32_t nodeid;
	if (parse_node(m, &nodeid))
		return -EBADMSG;
	bool fenced = false, dead = false;
	for (guint i = 0; i < t->members->len; i++) {
		struct member *x = t->members->pdata[i];
		if (x->id.nodeid != nodeid)
			continue;
		fenced |= x->state == M_FENCED;
		dead |= x->state == M_DEAD;
	}
	if (!fenced || dead) {
		/* nothing fenced to recover; or the node died again since its
		 * FENCED, and that death is not fenced yet */
		emit_refused(t, s->id, m->reqid, NULL, 0, fenced ? -EINVAL : -ENOENT);
		return 0;
	}
	for (guint i = 0; i < t->members->len;) {
		struct member *x = t->members->pdata[i];
		if (x->id.nodeid != nodeid || x->state != M_FENCED) {
			i++;
			continue;
		}
		struct o2lt_member id = x->id;
		/* the value blocks were voided at its death; what the recovery
		 * wrote since under RECOVERY is good */
		drop_member_locks(t, x, false);
		member_remove(t, x);
		emit_member(t, O2LT_EV_NODE_RECOVERED, id);
	}
	regrant_all(t);
	return 0;
}

/*
 * snapshot body: target nodeid, pid, cut, then the state (see o2lt_snapshot);
 * with SNAP_F_ZLIB, the state's length (u32), four zero bytes and the state
 * as one zlib stream.  Every member reads the head; only the target reads
 * the state (a state that does not inflate fails its sync, as one that does
 * not decode does).
 */
#define SNAP_HEAD 16
#define SNAP_ZHEAD (SNAP_HEAD + 8)

static int snapshot_target(const struct msg *m, struct o2lt_member *target, uint64_t *cut)
{
	if (m->bodylen < SNAP_HEAD || (m->flags & ~SNAP_F_ZLIB))
		return -EBADMSG;
	target->nodeid = get32(m->body);
	target->pid = get32(m->body + 4);
	*cut = get64(m->body + 8);
	return 0;
}

static int apply_snapshot_seen(struct o2lt_table *t, const struct msg *m)
{
	struct o2lt_member target;
	uint64_t cut;
	if (snapshot_target(m, &target, &cut))
		return -EBADMSG;
	struct member *x = member_find_live(t, target);
	if (same_member(target, t->self) && x && x->synced)
		emit_member(t, O2LT_EV_STATE_CONFLICT, t->self);
	if (x && !x->synced) {
		x->synced = true;
		x->since_join = 0;
		x->sender = 0;
		x->asked = false;
	}
	return 0;
}

static void count_input(struct o2lt_table *t)
{
	for (guint i = 0; i < t->members->len; i++) {
		struct member *x = t->members->pdata[i];
		if (x->state == M_LIVE && !x->synced)
			x->since_join++;
	}
}

/*
 * The LOCK messages of a BATCH, in order: fn(t, s, inner) for each, once
 * every one has been found well formed (a batch is refused whole, before
 * any of it is applied).  -EBADMSG for a malformed one.
 */
static int batch_each(struct o2lt_table *t, struct member *s, const struct msg *m,
		      void (*fn)(struct o2lt_table *, struct member *, const struct msg *))
{
	for (int pass = 0; pass < 2; pass++) {
		size_t at = 0;

		if (m->flags || m->reqid || m->bodylen == 0)
			return -EBADMSG;
		while (at < m->bodylen) {
			struct msg in;
			struct named n;

			if (m->bodylen - at < HDR_LEN)
				return -EBADMSG;
			size_t l = get32(m->body + at + 8);
			if (l < HDR_LEN || l > m->bodylen - at || parse_header(m->body + at, l, &in) ||
			    in.type != MSG_LOCK || parse_named(&in, false, &n) || n.mode > O2LT_EX ||
			    (in.flags & ~LOCK_FLAGS))
				return -EBADMSG;
			if (pass)
				fn(t, s, &in);
			at += l;
		}
	}
	return 0;
}

static void batch_lock(struct o2lt_table *t, struct member *s, const struct msg *in)
{
	(void)apply_lock(t, s, in); /* checked well formed already */
}

static void batch_refuse(struct o2lt_table *t, struct member *s, const struct msg *in)
{
	struct named n = { 0 };

	(void)parse_named(in, false, &n);
	emit_refused(t, s->id, in->reqid, n.name, n.namelen, -EAGAIN);
}

static int deliver_synced(struct o2lt_table *t, struct o2lt_member sender, const void *buf,
			  size_t len)
{
	struct msg m;
	int err = parse_header(buf, len, &m);
	if (err)
		return err;
	count_input(t); /* a joiner buffers whatever has a header: count the same */
	struct member *s = member_find_live(t, sender);
	if (!s)
		return -EPERM; /* a stale member (or, never from CPG, a stranger) */
	if (!s->synced && m.type != MSG_SNAPSHOT) {
		/*
		 * Whatever a member asks before its table has its state may be
		 * answered in the part of the stream its snapshot covers, where it
		 * would never hear of it: it holds nothing until it is synced.
		 */
		struct named n;
		if (m.type == MSG_BATCH)
			return batch_each(t, s, &m, batch_refuse);
		bool named = (m.type == MSG_LOCK || m.type == MSG_DOWN || m.type == MSG_CANCEL) &&
			     !parse_named(&m, m.type == MSG_DOWN && (m.flags & DOWN_F_LVB), &n);
		emit_refused(t, s->id, m.reqid, named ? n.name : NULL, named ? n.namelen : 0, -EAGAIN);
		return 0;
	}
	switch (m.type) {
	case MSG_LOCK: return apply_lock(t, s, &m);
	case MSG_DOWN: return apply_down(t, s, &m);
	case MSG_CANCEL: return apply_cancel(t, s, &m);
	case MSG_FENCED: return apply_fenced(t, &m);
	case MSG_RECOVERED: return apply_recovered(t, s, &m);
	case MSG_SNAPSHOT: return apply_snapshot_seen(t, &m);
	case MSG_BATCH: return batch_each(t, s, &m, batch_lock);
	default: return -EBADMSG;
	}
}

/* ---- membership ---- */

static bool in_list(const struct o2lt_member *l, size_t n, struct o2lt_member id)
{
	for (size_t i = 0; i < n; i++)
		if (same_member(l[i], id))
			return true;
	return false;
}

static int confchg_valid(const struct o2lt_confchg *c)
{
	if ((c->n_members && !c->members) || (c->n_left && (!c->left || !c->left_reasons)) ||
	    (c->n_joined && !c->joined))
		return -EINVAL;
	for (size_t i = 0; i < c->n_members; i++)
		if (in_list(c->members, i, c->members[i]))
			return -EINVAL;
	for (size_t i = 0; i < c->n_left; i++) {
		if (in_list(c->left, i, c->left[i]) || in_list(c->members, c->n_members, c->left[i]))
			return -EINVAL;
		if (c->left_reasons[i] < O2LT_REASON_JOIN || c->left_reasons[i] > O2LT_REASON_PROCDOWN)
			return -EINVAL;
	}
	for (size_t i = 0; i < c->n_joined; i++)
		if (in_list(c->joined, i, c->joined[i]) ||
		    !in_list(c->members, c->n_members, c->joined[i]))
			return -EINVAL;
	return 0;
}

static void member_leaves(struct o2lt_table *t, struct member *x, uint32_t reason)
{
	if (reason == O2LT_REASON_LEAVE) {
		drop_member_locks(t, x, true);
		member_remove(t, x);
		return;
	}
	fail_member(t, x);
	emit_member(t, O2LT_EV_NODE_FAILED, x->id);
}

/*
 * Choose who sends each waiting joiner its snapshot: the oldest synced live
 * member.  While stale members are in the group, two tables are (a healed
 * partition): nobody is asked until one side has left, or a joiner could
 * get either.
 */
static void designate_senders(struct o2lt_table *t, GArray *send_to)
{
	struct member *oldest = NULL;
	bool stale = false;
	for (guint i = 0; i < t->members->len; i++) {
		struct member *x = t->members->pdata[i];
		if (x->state == M_LIVE && x->synced && !oldest)
			oldest = x;
		stale |= x->state == M_STALE;
	}
	for (guint i = 0; i < t->members->len; i++) {
		struct member *x = t->members->pdata[i];
		if (x->state != M_LIVE || x->synced)
			continue;
		struct member *cur = x->sender ? member_by_inc(t, x->sender) : NULL;
		if (!cur || cur->state != M_LIVE) {
			x->sender = oldest ? oldest->inc : 0;
			x->asked = false;
		}
		if (x->asked || !x->sender || stale)
			continue;
		x->asked = true;
		if (same_member(oldest->id, t->self))
			g_array_append_val(send_to, x->id);
	}
}

static int confchg_synced(struct o2lt_table *t, const struct o2lt_confchg *c)
{
	count_input(t);
	for (size_t i = 0; i < c->n_left; i++) {
		struct member *x = member_find_present(t, c->left[i]);
		if (x && x->state == M_STALE)
			member_remove(t, x);
		else if (x)
			member_leaves(t, x, c->left_reasons[i]);
	}
	/* members the change forgot to list as leaving: failed, or gone if stale */
	for (guint i = t->members->len; i-- > 0;) {
		struct member *x = t->members->pdata[i];
		if (in_list(c->members, c->n_members, x->id))
			continue;
		if (x->state == M_STALE)
			member_remove(t, x);
		else if (x->state == M_LIVE)
			member_leaves(t, x, O2LT_REASON_PROCDOWN); /* keeps x in the array */
	}
	/* joined, or listed without our knowing them: new unsynced members, or
	 * stale ones back from a partition with a table of their own */
	for (size_t i = 0; i < c->n_members; i++) {
		if (member_find_present(t, c->members[i]))
			continue;
		if (member_has_dead(t, c->members[i])) {
			member_add(t, c->members[i], false)->state = M_STALE;
			emit_member(t, O2LT_EV_STALE_MEMBER, c->members[i]);
		} else {
			member_add(t, c->members[i], false);
		}
	}
	regrant_all(t);
	g_autoptr(GArray) send_to = g_array_new(FALSE, FALSE, sizeof(struct o2lt_member));
	designate_senders(t, send_to);
	for (guint i = 0; i < send_to->len; i++)
		emit_member(t, O2LT_EV_SEND_SNAPSHOT, g_array_index(send_to, struct o2lt_member, i));
	return 0;
}

/* ---- joining: buffering, snapshots ---- */

static void input_free(gpointer p)
{
	struct input *in = p;
	g_free(in->msg);
	if (in->confchg) {
		g_array_unref(in->members);
		g_array_unref(in->left);
		g_array_unref(in->reasons);
		g_array_unref(in->joined);
	}
	g_free(in);
}

static GArray *copy_members(const struct o2lt_member *l, size_t n)
{
	GArray *a = g_array_sized_new(FALSE, FALSE, sizeof(struct o2lt_member), (guint)n);
	if (n)
		g_array_append_vals(a, l, (guint)n);
	return a;
}

static void sources_drop(struct o2lt_table *t, struct o2lt_member id)
{
	for (guint i = 0; i < t->sources->len; i++)
		if (same_member(g_array_index(t->sources, struct o2lt_member, i), id))
			g_array_remove_index(t->sources, i--);
}

static void sync_failed(struct o2lt_table *t)
{
	t->sync = S_FAILED;
	g_ptr_array_set_size(t->buffer, 0);
	emit_member(t, O2LT_EV_SYNC_FAILED, t->self);
}

static void become_synced(struct o2lt_table *t)
{
	t->sync = S_SYNCED;
	emit_member(t, O2LT_EV_SYNCED, t->self);
	for (guint i = 0; i < t->members->len; i++) {
		struct member *x = t->members->pdata[i];
		if (x->state == M_DEAD || x->state == M_FENCED)
			emit_member(t, O2LT_EV_NODE_FAILED, x->id);
		if (x->state == M_FENCED)
			emit_member(t, O2LT_EV_NODE_FENCED, x->id);
		if (x->state == M_STALE)
			emit_member(t, O2LT_EV_STALE_MEMBER, x->id);
	}
}

/* the first change we see: ours, joining */
static int confchg_join(struct o2lt_table *t, const struct o2lt_confchg *c)
{
	if (!in_list(c->joined, c->n_joined, t->self))
		return -EINVAL;
	if (c->n_joined == c->n_members) {
		/* nobody was here: we all start with the same empty table */
		for (size_t i = 0; i < c->n_members; i++)
			member_add(t, c->members[i], true);
		become_synced(t);
		return 0;
	}
	for (size_t i = 0; i < c->n_members; i++)
		if (!in_list(c->joined, c->n_joined, c->members[i]))
			g_array_append_val(t->sources, c->members[i]);
	t->sync = S_WAITING;
	return 0;
}

static int load_snapshot(struct o2lt_table *t, const struct msg *m, uint64_t *ret_cut);

/*
 * A snapshot for us arrived (it is the last input in the buffer): take it,
 * then apply what came after the point it was taken at.
 */
static int take_snapshot(struct o2lt_table *t, const struct msg *m)
{
	uint64_t cut;
	int err = load_snapshot(t, m, &cut);
	if (err) {
		sync_failed(t);
		return -EPROTO;
	}
	g_autoptr(GPtrArray) rest = t->buffer;
	t->buffer = g_ptr_array_new_with_free_func(input_free);
	g_array_set_size(t->sources, 0);
	become_synced(t);
	for (guint i = (guint)cut; i < rest->len; i++) {
		struct input *in = rest->pdata[i];
		if (in->confchg) {
			struct o2lt_confchg c = {
				.members = (void *)in->members->data, .n_members = in->members->len,
				.left = (void *)in->left->data, .left_reasons = (void *)in->reasons->data,
				.n_left = in->left->len, .joined = (void *)in->joined->data,
				.n_joined = in->joined->len,
			};
			confchg_synced(t, &c);
		} else {
			deliver_synced(t, in->sender, in->msg, in->len);
		}
	}
	return 0;
}

static int deliver_waiting(struct o2lt_table *t, struct o2lt_member sender, const void *buf,
			   size_t len)
{
	struct msg m;
	int err = parse_header(buf, len, &m);
	if (err)
		return err;
	struct input *in = g_new0(struct input, 1);
	in->sender = sender;
	in->msg = g_memdup2(buf, len);
	in->len = len;
	g_ptr_array_add(t->buffer, in);
	if (m.type != MSG_SNAPSHOT)
		return 0;
	struct o2lt_member target;
	uint64_t cut;
	if (snapshot_target(&m, &target, &cut))
		return 0; /* the synced members reject it too, when we replay it */
	if (same_member(target, t->self)) {
		/*
		 * Only from a member that could have the group's state: one that
		 * was here when we joined, or that we saw get its state since.  A
		 * member back from a partition has a table of its own.
		 */
		bool source = false;
		for (guint i = 0; i < t->sources->len && !source; i++)
			source = same_member(g_array_index(t->sources, struct o2lt_member, i), sender);
		return source ? take_snapshot(t, &m) : 0;
	}
	/* that member has its state now: it could send us ours */
	sources_drop(t, target);
	g_array_append_val(t->sources, target);
	return 0;
}

static int confchg_waiting(struct o2lt_table *t, const struct o2lt_confchg *c)
{
	struct input *in = g_new0(struct input, 1);
	in->confchg = true;
	in->members = copy_members(c->members, c->n_members);
	in->left = copy_members(c->left, c->n_left);
	in->reasons = g_array_sized_new(FALSE, FALSE, sizeof(uint32_t), (guint)c->n_left);
	if (c->n_left)
		g_array_append_vals(in->reasons, c->left_reasons, (guint)c->n_left);
	in->joined = copy_members(c->joined, c->n_joined);
	g_ptr_array_add(t->buffer, in);
	for (size_t i = 0; i < c->n_left; i++)
		sources_drop(t, c->left[i]);
	for (guint i = 0; i < t->sources->len; i++)
		if (!in_list(c->members, c->n_members, g_array_index(t->sources, struct o2lt_member, i)))
			g_array_remove_index(t->sources, i--);
	if (t->sources->len == 0)
		sync_failed(t);
	return 0;
}

/* ---- snapshots: encoding and decoding ---- */

#define SNAP_MEMBER 40
#define SNAP_RES 4
#define SNAP_ENTRY 24

static void append(GByteArray *b, const void *p, size_t n)
{
	g_byte_array_append(b, p, (guint)n);
}

/* the entries of r in canonical order: held only (by incarnation), conversions, requests */
static GPtrArray *entries_canonical(const struct resource *r)
{
	GPtrArray *a = g_ptr_array_new();
	for (guint i = 0; i < r->entries->len; i++) {
		struct entry *e = r->entries->pdata[i];
		if (e->requested == NONE)
			g_ptr_array_add(a, e);
	}
	for (GList *l = r->convert.head; l; l = l->next)
		g_ptr_array_add(a, l->data);
	for (GList *l = r->wait.head; l; l = l->next)
		g_ptr_array_add(a, l->data);
	return a;
}

static enum queue entry_queue(const struct entry *e)
{
	if (e->requested == NONE)
		return Q_NONE;
	return e->granted == NONE ? Q_WAIT : Q_CONVERT;
}

static int snapshot_deflate(GByteArray *b);

int o2lt_snapshot(struct o2lt_table *t, struct o2lt_member target, void **ret_msg, size_t *ret_len)
{
	if (t->sync != S_SYNCED)
		return -EAGAIN;
	struct member *x = member_find_live(t, target);
	if (!x || x->synced)
		return -ENOENT;
	g_autoptr(GPtrArray) all = res_sorted(t);
	GByteArray *b = g_byte_array_new();
	uint8_t tmp[SNAP_MEMBER];

	g_byte_array_set_size(b, HDR_LEN);
	put32(tmp, target.nodeid);
	put32(tmp + 4, target.pid);
	put64(tmp + 8, x->since_join);
	put64(tmp + 16, t->next_inc);
	put32(tmp + 24, t->members->len);
	put32(tmp + 28, all->len);
	append(b, tmp, 32);
	for (guint i = 0; i < t->members->len; i++) {
		const struct member *y = t->members->pdata[i];
		memset(tmp, 0, sizeof(tmp));
		put64(tmp, y->inc);
		put32(tmp + 8, y->id.nodeid);
		put32(tmp + 12, y->id.pid);
		tmp[16] = y->state;
		tmp[17] = y->synced;
		tmp[18] = y->asked;
		put64(tmp + 24, y->since_join);
		put64(tmp + 32, y->sender);
		append(b, tmp, SNAP_MEMBER);
	}
	for (guint i = 0; i < all->len; i++) {
		const struct resource *r = all->pdata[i];
		g_autoptr(GPtrArray) es = entries_canonical(r);
		memset(tmp, 0, sizeof(tmp));
		tmp[0] = (uint8_t)r->namelen;
		tmp[1] = r->lvb_valid;
		put16(tmp + 2, es->len);
		append(b, tmp, SNAP_RES);
		append(b, r->name, r->namelen);
		append(b, r->lvb, O2LT_LVB_LEN);
		for (guint j = 0; j < es->len; j++) {
			const struct entry *e = es->pdata[j];
			memset(tmp, 0, sizeof(tmp));
			put64(tmp, e->m->inc);
			put64(tmp + 8, e->reqid);
			tmp[16] = (uint8_t)e->granted;
			tmp[17] = (uint8_t)e->requested;
			tmp[18] = entry_queue(e);
			tmp[19] = (uint8_t)e->flags;
			tmp[20] = (uint8_t)e->notified;
			tmp[21] = (uint8_t)e->held_flags;
			append(b, tmp, SNAP_ENTRY);
		}
	}
	unsigned flags = 0;
	if (b->len - HDR_LEN > O2LT_SNAP_PLAIN_MAX) {
		int err = snapshot_deflate(b);
		if (err) {
			g_byte_array_free(b, TRUE);
			return err;
		}
		flags = SNAP_F_ZLIB;
	}
	if (b->len > O2LT_MSG_MAX) {
		g_byte_array_free(b, TRUE);
		return -EMSGSIZE;
	}
	size_t len = b->len;
	put_header(b->data, len, len, MSG_SNAPSHOT, flags, 0);
	*ret_len = len;
	*ret_msg = g_byte_array_free(b, FALSE);
	return 0;
}

/*
 * Deflate what follows the snapshot's head in b (header and body so far),
 * in place.  -EMSGSIZE if the state is beyond O2LT_SNAP_STATE_MAX.
 */
static int snapshot_deflate(GByteArray *b)
{
	size_t at = HDR_LEN + SNAP_HEAD, raw = b->len - at;
	if (raw > O2LT_SNAP_STATE_MAX)
		return -EMSGSIZE;
	uLongf zlen = compressBound((uLong)raw);
	uint8_t *z = g_malloc(SNAP_ZHEAD - SNAP_HEAD + zlen);
	/* level 1: the state is mostly zeros and repeated name prefixes, which
	   the fastest level squeezes nearly as well as the best */
	if (compress2(z + 8, &zlen, b->data + at, (uLong)raw, 1) != Z_OK) {
		g_free(z);
		return -ENOMEM;
	}
	put32(z, (uint32_t)raw);
	put32(z + 4, 0);
	g_byte_array_set_size(b, (guint)at);
	append(b, z, 8 + zlen);
	g_free(z);
	return 0;
}

static bool mode_ok(int mode, bool none_ok)
{
	return mode <= O2LT_EX || (none_ok && mode == NONE);
}

/* Decode the state into t (which must be empty); -EPROTO if it does not hold together. */
static int decode_state(struct o2lt_table *t, const uint8_t *p, size_t n, uint64_t *ret_cut)
{
	if (n < 32)
		return -EPROTO;
	uint64_t cut = get64(p + 8), next_inc = get64(p + 16);
	uint32_t nm = get32(p + 24), nr = get32(p + 28);
	p += 32;
	n -= 32;
	if (nm > n / SNAP_MEMBER)
		return -EPROTO;
	for (uint32_t i = 0; i < nm; i++, p += SNAP_MEMBER, n -= SNAP_MEMBER) {
		struct member *x = g_new0(struct member, 1);
		x->inc = get64(p);
		x->id.nodeid = get32(p + 8);
		x->id.pid = get32(p + 12);
		x->state = p[16];
		x->synced = p[17];
		x->asked = p[18];
		x->since_join = get64(p + 24);
		x->sender = get64(p + 32);
		g_ptr_array_add(t->members, x);
		if (p[16] > M_STALE || p[17] > 1 || p[18] > 1 || p[19] || get32(p + 20) || x->inc == 0 ||
		    x->inc > next_inc ||
		    (i && x->inc <= ((struct member *)t->members->pdata[i - 1])->inc))
			return -EPROTO;
	}
	t->next_inc = next_inc;
	const struct resource *prev = NULL;
	for (uint32_t i = 0; i < nr; i++) {
		if (n < SNAP_RES)
			return -EPROTO;
		size_t namelen = p[0], ne = get16(p + 2);
		bool lvb_valid = p[1];
		if (namelen == 0 || namelen > O2LT_NAME_MAX || p[1] > 1 || ne == 0 ||
		    n < SNAP_RES + namelen + O2LT_LVB_LEN + ne * SNAP_ENTRY)
			return -EPROTO;
		const uint8_t *name = p + SNAP_RES;
		if (res_find(t, name, namelen))
			return -EPROTO;
		struct resource *r = res_get(t, name, namelen);
		if (prev && res_cmp(&prev, &r) >= 0)
			return -EPROTO;
		prev = r;
		memcpy(r->lvb, name + namelen, O2LT_LVB_LEN);
		r->lvb_valid = lvb_valid;
		const uint8_t *q = name + namelen + O2LT_LVB_LEN;
		for (size_t j = 0; j < ne; j++, q += SNAP_ENTRY) {
			struct member *x = member_by_inc(t, get64(q));
			int granted = q[16], requested = q[17], notified = q[20];
			enum queue qu = q[18];
			unsigned flags = q[19], held_flags = q[21];
			if (!x || entry_find(r, x) || !mode_ok(granted, true) ||
			    !mode_ok(requested, true) || !mode_ok(notified, true) ||
			    (flags & ~LOCK_FLAGS) || (held_flags & ~LOCK_FLAGS) || get16(q + 22) ||
			    qu != entry_queue(&(struct entry){ .granted = granted, .requested = requested }))
				return -EPROTO;
			struct entry *e = entry_add(r, x);
			e->reqid = get64(q + 8);
			e->granted = granted;
			e->requested = requested;
			e->flags = flags;
			e->held_flags = held_flags;
			e->notified = notified;
			if (qu == Q_CONVERT)
				g_queue_push_tail(&r->convert, e);
			else if (qu == Q_WAIT)
				g_queue_push_tail(&r->wait, e);
		}
		size_t used = SNAP_RES + namelen + O2LT_LVB_LEN + ne * SNAP_ENTRY;
		p += used;
		n -= used;
	}
	if (n)
		return -EPROTO;
	*ret_cut = cut;
	return 0;
}

static void table_clear(struct o2lt_table *t)
{
	g_hash_table_remove_all(t->res);
	g_ptr_array_set_size(t->members, 0);
	t->next_inc = 0;
}

/*
 * The body of a deflated snapshot as it was before deflating (g_malloc'ed,
 * length in *ret_len), or NULL if it does not inflate to exactly the length
 * it names, with nothing after the stream.
 */
static uint8_t *snapshot_inflate(const struct msg *m, size_t *ret_len)
{
	if (m->bodylen < SNAP_ZHEAD)
		return NULL;
	const uint8_t *zs = m->body + SNAP_ZHEAD;
	size_t zn = m->bodylen - SNAP_ZHEAD;
	uint32_t raw = get32(m->body + SNAP_HEAD);
	/* deflate expands by at most 1032 to 1: refuse a length no stream
	   of this size could give before allocating it */
	if (get32(m->body + SNAP_HEAD + 4) || raw == 0 || raw > O2LT_SNAP_STATE_MAX ||
	    raw / 1032 > zn)
		return NULL;
	uint8_t *out = g_try_malloc(SNAP_HEAD + (size_t)raw);
	if (!out)
		return NULL;
	memcpy(out, m->body, SNAP_HEAD);
	uLongf outlen = raw;
	uLong inlen = (uLong)zn;
	if (uncompress2(out + SNAP_HEAD, &outlen, zs, &inlen) != Z_OK || outlen != raw ||
	    inlen != zn) {
		g_free(out);
		return NULL;
	}
	*ret_len = SNAP_HEAD + (size_t)raw;
	return out;
}

static int load_snapshot(struct o2lt_table *t, const struct msg *m, uint64_t *ret_cut)
{
	uint64_t cut;
	char why[160];
	const uint8_t *body = m->body;
	size_t bodylen = m->bodylen;
	g_autofree uint8_t *inflated = NULL;
	if (m->flags & SNAP_F_ZLIB) {
		inflated = snapshot_inflate(m, &bodylen);
		if (!inflated)
			return -EPROTO;
		body = inflated;
	}
	/* the snapshot is the last input; the ones before it are what it may contain */
	int err = decode_state(t, body, bodylen, &cut);
	struct member *me = err ? NULL : member_find_live(t, t->self);
	if (err || !me || me->synced || cut >= t->buffer->len ||
	    o2lt_check(t, why, sizeof(why)) < 0) {
		table_clear(t);
		return -EPROTO;
	}
	*ret_cut = cut;
	return 0;
}

/* ---- the public entry points ---- */

struct o2lt_table *o2lt_new(struct o2lt_member self, o2lt_event_fn fn, void *data)
{
	struct o2lt_table *t = g_new0(struct o2lt_table, 1);
	t->self = self;
	t->fn = fn;
	t->data = data;
	t->sync = S_NEW;
	t->members = g_ptr_array_new_with_free_func(g_free);
	t->res = g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref,
				       res_free);
	t->buffer = g_ptr_array_new_with_free_func(input_free);
	t->sources = g_array_new(FALSE, FALSE, sizeof(struct o2lt_member));
	return t;
}

void o2lt_free(struct o2lt_table *t)
{
	if (!t)
		return;
	g_hash_table_destroy(t->res);
	g_ptr_array_free(t->members, TRUE);
	g_ptr_array_free(t->buffer, TRUE);
	g_array_free(t->sources, TRUE);
	g_free(t);
}

bool o2lt_synced(const struct o2lt_table *t)
{
	return t->sync == S_SYNCED;
}

int o2lt_deliver(struct o2lt_table *t, struct o2lt_member sender, const void *msg, size_t len)
{
	if (!msg && len)
		return -EBADMSG;
	switch (t->sync) {
	case S_SYNCED: return deliver_synced(t, sender, msg, len);
	case S_WAITING: return deliver_waiting(t, sender, msg, len);
	case S_NEW: return -EBADMSG; /* nothing can come before our own join */
	case S_FAILED: return 0;
	}
	return 0;
}

int o2lt_confchg(struct o2lt_table *t, const struct o2lt_confchg *c)
{
	if (!c || confchg_valid(c))
		return -EINVAL;
	switch (t->sync) {
	case S_NEW: return confchg_join(t, c);
	case S_WAITING: return confchg_waiting(t, c);
	case S_SYNCED:
		if (!in_list(c->members, c->n_members, t->self))
			return -EINVAL; /* corosync never tells us of a group we left */
		return confchg_synced(t, c);
	case S_FAILED: return 0;
	}
	return 0;
}

/* ---- checking and dumping ---- */

#define FAIL(...)                                   \
	do {                                        \
		snprintf(why, whylen, __VA_ARGS__); \
		return -EUCLEAN;                    \
	} while (0)

static int check_resource(const struct o2lt_table *t, const struct resource *r, char *why,
			  size_t whylen)
{
	guint nconv = 0, nwait = 0;
	if (r->namelen == 0 || r->namelen > O2LT_NAME_MAX || r->entries->len == 0)
		FAIL("resource of %zu bytes with %u entries", r->namelen, r->entries->len);
	for (guint i = 0; i < r->entries->len; i++) {
		const struct entry *e = r->entries->pdata[i];
		if (member_by_inc(t, e->m->inc) != e->m)
			FAIL("entry of a member not in the table");
		if (e->m->state == M_STALE)
			FAIL("entry of a stale member");
		if (i && ((struct entry *)r->entries->pdata[i - 1])->m->inc >= e->m->inc)
			FAIL("entries out of order or twice for one member");
		enum queue q = entry_queue(e);
		if (e->granted == NONE && e->requested == NONE)
			FAIL("entry that neither holds nor wants");
		if (q == Q_CONVERT && e->requested <= e->granted)
			FAIL("conversion from %s to %s", o2lt_mode_name(e->granted),
			     o2lt_mode_name(e->requested));
		if (q == Q_WAIT && e->requested == O2LT_NL)
			FAIL("NL request queued");
		if ((q == Q_CONVERT) != !!g_list_find(r->convert.head, e) ||
		    (q == Q_WAIT) != !!g_list_find(r->wait.head, e))
			FAIL("entry not in the queue its state says");
		nconv += q == Q_CONVERT;
		nwait += q == Q_WAIT;
		if (e->m->state != M_LIVE && (q != Q_NONE || e->granted < O2LT_PR))
			FAIL("dead member with a request or an NL lock");
		for (guint j = 0; j < i; j++) {
			const struct entry *f = r->entries->pdata[j];
			if (e->granted == NONE || f->granted == NONE || compat[e->granted][f->granted])
				continue;
			if ((e->m->state == M_FENCED && (f->held_flags & O2LT_F_RECOVERY)) ||
			    (f->m->state == M_FENCED && (e->held_flags & O2LT_F_RECOVERY)))
				continue;
			FAIL("%s and %s granted together", o2lt_mode_name(e->granted),
			     o2lt_mode_name(f->granted));
		}
	}
	if (nconv != r->convert.length || nwait != r->wait.length)
		FAIL("queues hold entries that are not the resource's");
	/* nothing left waiting that could be granted, nobody untold of a wait */
	for (guint i = 0; i < r->entries->len; i++) {
		const struct entry *e = r->entries->pdata[i];
		if (e->requested != NONE && grantable(r, e))
			FAIL("a grantable %s request still waits", o2lt_mode_name(e->requested));
		if (e->granted != NONE && e->m->state == M_LIVE) {
			int want = blocking_mode(r, e);
			if (want != NONE && (e->notified == NONE || e->notified < want))
				FAIL("a holder in the way of %s was not told", o2lt_mode_name(want));
		}
	}
	return 0;
}

int o2lt_check(const struct o2lt_table *t, char *why, size_t whylen)
{
	bool self = false;
	for (guint i = 0; i < t->members->len; i++) {
		const struct member *x = t->members->pdata[i];
		if (i && ((struct member *)t->members->pdata[i - 1])->inc >= x->inc)
			FAIL("members out of order");
		if (x->inc > t->next_inc)
			FAIL("member incarnation beyond the counter");
		if ((x->state == M_LIVE || x->state == M_STALE) && member_find_present(t, x->id) != x)
			FAIL("member %u/%u present twice", x->id.nodeid, x->id.pid);
		if (x->state == M_LIVE && same_member(x->id, t->self))
			self = true;
		if (x->state != M_LIVE && (x->synced || x->sender || x->since_join || x->asked))
			FAIL("dead member with sync state");
		if (x->synced && (x->sender || x->since_join || x->asked))
			FAIL("synced member with a sender");
	}
	if (t->sync == S_SYNCED && !self)
		FAIL("the table's own member is missing");
	GHashTableIter it;
	gpointer v;
	g_hash_table_iter_init(&it, t->res);
	while (g_hash_table_iter_next(&it, NULL, &v)) {
		int err = check_resource(t, v, why, whylen);
		if (err)
			return err;
	}
	return 0;
}

static void hex(GString *s, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		g_string_append_printf(s, "%02x", p[i]);
}

char *o2lt_dump(const struct o2lt_table *t)
{
	static const char *const states[] = { "live", "dead", "fenced", "stale" };
	static const char *const syncs[] = { "new", "waiting", "synced", "failed" };
	GString *s = g_string_new(NULL);
	g_string_append_printf(s, "table %s next %" G_GUINT64_FORMAT "\n", syncs[t->sync],
			       t->next_inc);
	for (guint i = 0; i < t->members->len; i++) {
		const struct member *x = t->members->pdata[i];
		g_string_append_printf(s, "member %" G_GUINT64_FORMAT " %u/%u %s%s", x->inc,
				       x->id.nodeid, x->id.pid, states[x->state],
				       x->synced ? " synced" : "");
		if (x->state == M_LIVE && !x->synced)
			g_string_append_printf(s, " since %" G_GUINT64_FORMAT " sender %" G_GUINT64_FORMAT "%s",
					       x->since_join, x->sender, x->asked ? " asked" : "");
		g_string_append_c(s, '\n');
	}
	g_autoptr(GPtrArray) all = res_sorted(t);
	for (guint i = 0; i < all->len; i++) {
		const struct resource *r = all->pdata[i];
		g_autoptr(GPtrArray) es = entries_canonical(r);
		g_string_append(s, "lock ");
		hex(s, r->name, r->namelen);
		if (r->lvb_valid) {
			g_string_append(s, " lvb ");
			hex(s, r->lvb, O2LT_LVB_LEN);
		}
		g_string_append_c(s, '\n');
		for (guint j = 0; j < es->len; j++) {
			const struct entry *e = es->pdata[j];
			g_string_append_printf(s, "  %" G_GUINT64_FORMAT " holds %s (flags %u) wants %s flags %u req %" G_GUINT64_FORMAT " told %s\n",
					       e->m->inc, e->granted == NONE ? "-" : o2lt_mode_name(e->granted),
					       e->held_flags,
					       e->requested == NONE ? "-" : o2lt_mode_name(e->requested),
					       e->flags, e->reqid,
					       e->notified == NONE ? "-" : o2lt_mode_name(e->notified));
		}
	}
	return g_string_free(s, FALSE);
}

size_t o2lt_members(const struct o2lt_table *t, struct o2lt_member_info *buf, size_t n)
{
	static const enum o2lt_member_state state_of[] = {
		[M_LIVE] = O2LT_MEMBER_LIVE,
		[M_DEAD] = O2LT_MEMBER_DEAD,
		[M_FENCED] = O2LT_MEMBER_FENCED,
		[M_STALE] = O2LT_MEMBER_STALE,
	};

	for (guint i = 0; i < t->members->len && i < n; i++) {
		const struct member *m = g_ptr_array_index(t->members, i);

		buf[i] = (struct o2lt_member_info){ m->id, state_of[m->state], m->synced };
	}
	return t->members->len;
}
