// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The cluster lock table (cpg/locktab.h): grants and blocking events, FIFO
 * order, conversions, try-locks, cancels, value blocks, DOWN errors, member
 * failure / fencing / recovery, clean leaves, joins through snapshots (also
 * when the sender dies or nobody is left to send), partitions that merge
 * (state conflicts, stale members), hostile messages and membership
 * changes, and the message encoders.
 *
 * A small simulated CPG group feeds every member's table the same inputs in
 * the same order.  After every input each table must pass o2lt_check, the
 * synced tables must dump the same text, and the tables that were synced
 * before the input must have reported the same events for it (the table is
 * deterministic: that is the whole protocol).  Snapshots a table is asked
 * to send go to an outbox and are multicast after the current input, as a
 * daemon would do.
 */
#include "locktab.h"

#include <check.h>
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* the simulated group                                                       */
/* ------------------------------------------------------------------------ */

#define MAX_NODES 8
#define ANY_REQID UINT64_MAX
#define ANY_MODE (-1000)

/* One event as a table reported it (copied: the pointers die with the callback). */
struct rec {
	enum o2lt_event_type type;
	struct o2lt_member member;
	uint64_t reqid;
	uint8_t name[O2LT_NAME_MAX];
	size_t namelen;
	int mode;
	int error;
	bool has_lvb;
	uint8_t lvb[O2LT_LVB_LEN];
	bool lvb_valid;
};

struct node {
	struct o2lt_member id;
	struct o2lt_table *t;
	bool present;	 /* in the group: gets every input */
	bool was_synced; /* synced before the current input */
	GArray *step;	 /* struct rec: what the current input made the table say */
	GArray *recent;	 /* struct rec: what it said during the current action */
	GArray *all;	 /* struct rec: everything it ever said */
	int rc;		 /* what the current input returned on this table */
};

/* a message a table asked to multicast (a snapshot) */
struct outmsg {
	struct o2lt_member sender;
	void *msg;
	size_t len;
};

static struct node nodes[MAX_NODES];
static struct o2lt_member group[MAX_NODES]; /* the CPG membership, in join order */
static size_t n_group;
static GQueue outbox;
/* keep snapshots in the outbox until deliver_held(), to put traffic before them */
static bool hold;

static bool same_member(struct o2lt_member a, struct o2lt_member b)
{
	return a.nodeid == b.nodeid && a.pid == b.pid;
}

static const char *ev_name(enum o2lt_event_type type)
{
	switch (type) {
	case O2LT_EV_GRANTED: return "GRANTED";
	case O2LT_EV_REFUSED: return "REFUSED";
	case O2LT_EV_DOWNED: return "DOWNED";
	case O2LT_EV_BLOCKING: return "BLOCKING";
	case O2LT_EV_NODE_FAILED: return "NODE_FAILED";
	case O2LT_EV_NODE_FENCED: return "NODE_FENCED";
	case O2LT_EV_NODE_RECOVERED: return "NODE_RECOVERED";
	case O2LT_EV_SEND_SNAPSHOT: return "SEND_SNAPSHOT";
	case O2LT_EV_SYNCED: return "SYNCED";
	case O2LT_EV_SYNC_FAILED: return "SYNC_FAILED";
	case O2LT_EV_STATE_CONFLICT: return "STATE_CONFLICT";
	case O2LT_EV_QUEUED: return "QUEUED";
	default: return "(newer event)"; /* the table may grow new events */
	}
}

static void outmsg_free(gpointer p)
{
	struct outmsg *m = p;
	g_free(m->msg);
	g_free(m);
}

static void on_event(const struct o2lt_event *ev, void *data)
{
	struct node *nd = data;
	struct rec r = {
		.type = ev->type, .member = ev->member, .reqid = ev->reqid, .mode = ev->mode,
		.error = ev->error, .lvb_valid = ev->lvb_valid,
	};

	ck_assert_uint_le(ev->namelen, O2LT_NAME_MAX);
	if (ev->name) {
		memcpy(r.name, ev->name, ev->namelen);
		r.namelen = ev->namelen;
	}
	if (ev->type == O2LT_EV_GRANTED) {
		ck_assert_msg(ev->lvb != NULL, "GRANTED without a value block");
		memcpy(r.lvb, ev->lvb, O2LT_LVB_LEN);
		r.has_lvb = true;
	}
	g_array_append_val(nd->step, r);
	if (ev->type == O2LT_EV_SEND_SNAPSHOT) {
		/* the contract: take it now, from inside the callback */
		struct outmsg *m = g_new0(struct outmsg, 1);
		int rc = o2lt_snapshot(nd->t, ev->member, &m->msg, &m->len);
		ck_assert_msg(rc == 0, "o2lt_snapshot for %u/%u returned %d", ev->member.nodeid,
			      ev->member.pid, rc);
		m->sender = nd->id;
		g_queue_push_tail(&outbox, m);
	}
}

static void setup(void)
{
	memset(nodes, 0, sizeof(nodes));
	for (int i = 0; i < MAX_NODES; i++) {
		nodes[i].id = (struct o2lt_member){ .nodeid = (uint32_t)i + 1, .pid = 1000 + (uint32_t)i };
		nodes[i].step = g_array_new(FALSE, FALSE, sizeof(struct rec));
		nodes[i].recent = g_array_new(FALSE, FALSE, sizeof(struct rec));
		nodes[i].all = g_array_new(FALSE, FALSE, sizeof(struct rec));
	}
	n_group = 0;
	g_queue_init(&outbox);
	hold = false;
}

static void teardown(void)
{
	for (int i = 0; i < MAX_NODES; i++) {
		o2lt_free(nodes[i].t);
		g_array_unref(nodes[i].step);
		g_array_unref(nodes[i].recent);
		g_array_unref(nodes[i].all);
	}
	memset(nodes, 0, sizeof(nodes));
	g_queue_clear_full(&outbox, outmsg_free);
}

static char *dump_of(int i)
{
	return o2lt_dump(nodes[i].t);
}

/* ---- one input, checked ---- */

static void input_begin(void)
{
	for (int i = 0; i < MAX_NODES; i++) {
		struct node *nd = &nodes[i];
		g_array_set_size(nd->step, 0);
		nd->rc = 0;
		nd->was_synced = nd->present && o2lt_synced(nd->t);
	}
}

static bool rec_same(const struct rec *a, const struct rec *b)
{
	return a->type == b->type && same_member(a->member, b->member) && a->reqid == b->reqid &&
	       a->namelen == b->namelen && !memcmp(a->name, b->name, a->namelen) &&
	       a->mode == b->mode && a->error == b->error && a->has_lvb == b->has_lvb &&
	       a->lvb_valid == b->lvb_valid && (!a->has_lvb || !memcmp(a->lvb, b->lvb, O2LT_LVB_LEN));
}

/* events every synced table must report alike (not the ones about its own sync) */
static bool shared_event(const struct rec *r)
{
	return r->type != O2LT_EV_SEND_SNAPSHOT && r->type != O2LT_EV_SYNCED &&
	       r->type != O2LT_EV_SYNC_FAILED && r->type != O2LT_EV_STATE_CONFLICT;
}

static void compare_events(int ref, int i)
{
	const GArray *a = nodes[ref].step, *b = nodes[i].step;
	guint x = 0, y = 0;
	for (;;) {
		while (x < a->len && !shared_event(&g_array_index(a, struct rec, x)))
			x++;
		while (y < b->len && !shared_event(&g_array_index(b, struct rec, y)))
			y++;
		if (x == a->len || y == b->len)
			break;
		const struct rec *p = &g_array_index(a, struct rec, x), *q = &g_array_index(b, struct rec, y);
		ck_assert_msg(rec_same(p, q),
			      "nodes %d and %d reported different events for one input: %s about %u/%u req %" PRIu64 " vs %s about %u/%u req %" PRIu64,
			      ref, i, ev_name(p->type), p->member.nodeid, p->member.pid, p->reqid,
			      ev_name(q->type), q->member.nodeid, q->member.pid, q->reqid);
		x++;
		y++;
	}
	ck_assert_msg(x == a->len && y == b->len,
		      "nodes %d and %d reported a different number of events for one input", ref, i);
}

static void input_end(void)
{
	int ref = -1, ref_ev = -1;
	char *ref_dump = NULL;
	for (int i = 0; i < MAX_NODES; i++) {
		struct node *nd = &nodes[i];
		if (!nd->present)
			continue;
		char why[256] = "";
		ck_assert_msg(o2lt_check(nd->t, why, sizeof(why)) == 0, "table of node %d: %s", i, why);
		if (o2lt_synced(nd->t)) {
			char *d = dump_of(i);
			if (!ref_dump) {
				ref_dump = d;
				ref = i;
			} else {
				ck_assert_msg(strcmp(ref_dump, d) == 0,
					      "synced tables differ; node %d:\n%s\nnode %d:\n%s", ref,
					      ref_dump, i, d);
				g_free(d);
			}
		}
		if (nd->was_synced && o2lt_synced(nd->t)) {
			if (ref_ev < 0)
				ref_ev = i;
			else
				compare_events(ref_ev, i);
		}
		g_array_append_vals(nd->recent, nd->step->data, nd->step->len);
		g_array_append_vals(nd->all, nd->step->data, nd->step->len);
	}
	g_free(ref_dump);
}

/* a new action: the event assertions look at what it (and its snapshots) caused */
static void action_begin(void)
{
	for (int i = 0; i < MAX_NODES; i++)
		g_array_set_size(nodes[i].recent, 0);
}

static void deliver_input(struct o2lt_member sender, const void *msg, size_t len)
{
	input_begin();
	for (int i = 0; i < MAX_NODES; i++)
		if (nodes[i].present)
			nodes[i].rc = o2lt_deliver(nodes[i].t, sender, msg, len);
	input_end();
}

static void expect_rc_all(int line, int rc)
{
	for (int i = 0; i < MAX_NODES; i++)
		if (nodes[i].present)
			ck_assert_msg(nodes[i].rc == rc, "line %d: node %d returned %d, wanted %d", line,
				      i, nodes[i].rc, rc);
}

/* multicast whatever the tables asked to send, in order, each its own input */
static void flush(void)
{
	struct outmsg *m;
	while ((m = g_queue_pop_head(&outbox))) {
		deliver_input(m->sender, m->msg, m->len);
		expect_rc_all(__LINE__, 0);
		outmsg_free(m);
	}
}

static void deliver_held(void)
{
	action_begin();
	flush();
}

static void mcast(int who, const void *msg, ssize_t len)
{
	ck_assert_int_gt(len, 0);
	action_begin();
	deliver_input(nodes[who].id, msg, (size_t)len);
	expect_rc_all(__LINE__, 0);
	if (!hold)
		flush();
}

/* ---- membership ---- */

/* a member that leaves, and why */
struct gone {
	int who;
	uint32_t reason;
};

static void node_start(int i)
{
	struct node *nd = &nodes[i];
	ck_assert_msg(nd->t == NULL, "node %d joined twice", i);
	nd->t = o2lt_new(nd->id, on_event, nd);
	ck_assert_ptr_nonnull(nd->t);
}

/* a dead or departed member never sends what it had not sent yet */
static void outbox_drop_from(struct o2lt_member id)
{
	for (GList *l = outbox.head; l;) {
		GList *next = l->next;
		struct outmsg *m = l->data;
		if (same_member(m->sender, id)) {
			outmsg_free(m);
			g_queue_delete_link(&outbox, l);
		}
		l = next;
	}
}

static void confchg_all(const struct o2lt_confchg *c)
{
	action_begin();
	input_begin();
	for (int i = 0; i < MAX_NODES; i++)
		if (nodes[i].present)
			nodes[i].rc = o2lt_confchg(nodes[i].t, c);
	input_end();
	expect_rc_all(__LINE__, 0);
	if (!hold)
		flush();
}

static void change(const int *joined, size_t nj, const struct gone *left, size_t nl)
{
	struct o2lt_member members[MAX_NODES], lm[MAX_NODES], jm[MAX_NODES];
	uint32_t reasons[MAX_NODES];
	size_t nm = 0;

	for (size_t i = 0; i < n_group; i++) {
		bool leaving = false;
		for (size_t j = 0; j < nl; j++)
			leaving |= same_member(group[i], nodes[left[j].who].id);
		if (!leaving)
			members[nm++] = group[i];
	}
	for (size_t j = 0; j < nl; j++) {
		struct node *nd = &nodes[left[j].who];
		ck_assert_msg(nd->present, "node %d is not in the group", left[j].who);
		lm[j] = nd->id;
		reasons[j] = left[j].reason;
		nd->present = false;
		outbox_drop_from(nd->id);
	}
	for (size_t j = 0; j < nj; j++) {
		node_start(joined[j]);
		nodes[joined[j]].present = true;
		jm[j] = nodes[joined[j]].id;
		members[nm++] = jm[j];
	}
	memcpy(group, members, nm * sizeof(members[0]));
	n_group = nm;
	struct o2lt_confchg c = {
		.members = members, .n_members = nm, .left = lm, .left_reasons = reasons,
		.n_left = nl, .joined = jm, .n_joined = nj,
	};
	confchg_all(&c);
}

#define JOIN(...)                                                                 \
	change((const int[]){ __VA_ARGS__ }, sizeof((const int[]){ __VA_ARGS__ }) / \
						  sizeof(int), NULL, 0)
#define GONE(who, reason) change(NULL, 0, &(const struct gone){ (who), (reason) }, 1)

/* ---- lock traffic ---- */

static void req_lock(int who, const char *name, int mode, unsigned flags, uint64_t reqid)
{
	uint8_t buf[O2LT_MSG_SMALL];
	mcast(who, buf, o2lt_msg_lock(buf, sizeof(buf), reqid, name, strlen(name), mode, flags));
}

static void req_down(int who, const char *name, int mode, const uint8_t *lvb, uint64_t reqid)
{
	uint8_t buf[O2LT_MSG_SMALL];
	mcast(who, buf, o2lt_msg_down(buf, sizeof(buf), reqid, name, strlen(name), mode, lvb));
}

static void req_cancel(int who, const char *name, uint64_t reqid)
{
	uint8_t buf[O2LT_MSG_SMALL];
	mcast(who, buf, o2lt_msg_cancel(buf, sizeof(buf), reqid, name, strlen(name)));
}

static void req_fenced(int who, uint32_t nodeid, uint64_t reqid)
{
	uint8_t buf[O2LT_MSG_SMALL];
	mcast(who, buf, o2lt_msg_fenced(buf, sizeof(buf), reqid, nodeid));
}

static void req_recovered(int who, uint32_t nodeid, uint64_t reqid)
{
	uint8_t buf[O2LT_MSG_SMALL];
	mcast(who, buf, o2lt_msg_recovered(buf, sizeof(buf), reqid, nodeid));
}

/* ---- what the tables said ---- */

static bool rec_matches(const struct rec *r, int about, enum o2lt_event_type type, const char *name)
{
	if (r->type != type || !same_member(r->member, nodes[about].id))
		return false;
	return !name || (r->namelen == strlen(name) && !memcmp(r->name, name, r->namelen));
}

/* how many events of type about member `about` (and lock name, unless NULL) */
static unsigned count_in(const GArray *a, int about, enum o2lt_event_type type, const char *name)
{
	unsigned n = 0;
	for (guint i = 0; i < a->len; i++)
		n += rec_matches(&g_array_index(a, struct rec, i), about, type, name);
	return n;
}

/* ... that table `on` reported during the last action */
static unsigned count_on(int on, int about, enum o2lt_event_type type, const char *name)
{
	return count_in(nodes[on].recent, about, type, name);
}

/* ... addressed to who, by who's own table (what its daemon acts on) */
static unsigned count_ev(int who, enum o2lt_event_type type, const char *name)
{
	return count_on(who, who, type, name);
}

/* where in table on's events of the last action one appears, or -1 */
static int position_on(int on, int about, enum o2lt_event_type type, const char *name)
{
	const GArray *a = nodes[on].recent;
	for (guint i = 0; i < a->len; i++)
		if (rec_matches(&g_array_index(a, struct rec, i), about, type, name))
			return (int)i;
	return -1;
}

/* exactly one such event for who in the last action; it has these fields */
static const struct rec *expect_ev(int line, int who, enum o2lt_event_type type, const char *name,
				   int mode, uint64_t reqid, int error)
{
	const struct rec *found = NULL;
	unsigned n = 0;
	const GArray *a = nodes[who].recent;
	for (guint i = 0; i < a->len; i++) {
		const struct rec *r = &g_array_index(a, struct rec, i);
		if (rec_matches(r, who, type, name)) {
			found = r;
			n++;
		}
	}
	ck_assert_msg(n == 1, "line %d: node %d got %u %s events for lock %s, wanted 1", line, who,
		      n, ev_name(type), name ? name : "(any)");
	if (mode != ANY_MODE)
		ck_assert_msg(found->mode == mode, "line %d: node %d %s %s: mode %s, wanted %s", line,
			      who, ev_name(type), name ? name : "", o2lt_mode_name(found->mode),
			      o2lt_mode_name(mode));
	if (reqid != ANY_REQID)
		ck_assert_msg(found->reqid == reqid,
			      "line %d: node %d %s %s: reqid %" PRIu64 ", wanted %" PRIu64, line, who,
			      ev_name(type), name ? name : "", found->reqid, reqid);
	if (type == O2LT_EV_REFUSED)
		ck_assert_msg(found->error == error, "line %d: node %d REFUSED %s: error %d, wanted %d",
			      line, who, name ? name : "", found->error, error);
	return found;
}

static void expect_none(int line, int who, enum o2lt_event_type type, const char *name)
{
	unsigned n = count_ev(who, type, name);
	ck_assert_msg(n == 0, "line %d: node %d got %u %s events for lock %s, wanted none", line, who,
		      n, ev_name(type), name ? name : "(any)");
}

/* nothing at all addressed to who in the last action */
static void expect_quiet(int line, int who)
{
	const GArray *a = nodes[who].recent;
	for (guint i = 0; i < a->len; i++) {
		const struct rec *r = &g_array_index(a, struct rec, i);
		ck_assert_msg(!same_member(r->member, nodes[who].id),
			      "line %d: node %d got an unexpected %s event", line, who, ev_name(r->type));
	}
}

#define GRANTED(who, name, mode, reqid) expect_ev(__LINE__, who, O2LT_EV_GRANTED, name, mode, reqid, 0)
#define REFUSED(who, name, reqid, err) expect_ev(__LINE__, who, O2LT_EV_REFUSED, name, ANY_MODE, reqid, err)
#define DOWNED(who, name, mode, reqid) expect_ev(__LINE__, who, O2LT_EV_DOWNED, name, mode, reqid, 0)
#define BLOCKING(who, name, mode) expect_ev(__LINE__, who, O2LT_EV_BLOCKING, name, mode, ANY_REQID, 0)
#define NO_EV(who, type, name) expect_none(__LINE__, who, type, name)
#define QUIET(who) expect_quiet(__LINE__, who)

/* every present table reported exactly n events of type about member `about` */
static void expect_everywhere(int line, int about, enum o2lt_event_type type, unsigned n)
{
	for (int i = 0; i < MAX_NODES; i++)
		if (nodes[i].present && o2lt_synced(nodes[i].t))
			ck_assert_msg(count_on(i, about, type, NULL) == n,
				      "line %d: node %d reported %u %s about node %d, wanted %u", line, i,
				      count_on(i, about, type, NULL), ev_name(type), about, n);
}

#define EVERYWHERE(about, type, n) expect_everywhere(__LINE__, about, type, n)

/*
 * Whether node i's dump has the lock: the dump writes one "lock <hex name>"
 * line per resource, and a resource exists while somebody holds or wants it.
 */
static bool dump_has_lock(int i, const char *name)
{
	GString *s = g_string_new("\nlock ");
	for (const char *p = name; *p; p++)
		g_string_append_printf(s, "%02x", (unsigned char)*p);
	char *d = dump_of(i);
	bool found = false;
	for (const char *p = d; (p = strstr(p, s->str)); p += s->len)
		if (p[s->len] == '\n' || p[s->len] == ' ')
			found = true;
	g_free(d);
	g_string_free(s, TRUE);
	return found;
}

/* run a block and check that no synced table's state changed */
struct dumps {
	char *d[MAX_NODES];
};

static void dumps_take(struct dumps *s)
{
	for (int i = 0; i < MAX_NODES; i++)
		s->d[i] = nodes[i].present ? dump_of(i) : NULL;
}

static void dumps_same(int line, struct dumps *s)
{
	for (int i = 0; i < MAX_NODES; i++) {
		if (!s->d[i])
			continue;
		char *now = dump_of(i);
		ck_assert_msg(strcmp(now, s->d[i]) == 0, "line %d: node %d changed:\n%s\nnow:\n%s",
			      line, i, s->d[i], now);
		g_free(now);
		g_free(s->d[i]);
		s->d[i] = NULL;
	}
}

static void lvb_fill(uint8_t *lvb, uint8_t seed)
{
	for (int i = 0; i < O2LT_LVB_LEN; i++)
		lvb[i] = (uint8_t)(seed + 7 * i);
}

/* ------------------------------------------------------------------------ */
/* the wire format, for forging bad messages                                 */
/* ------------------------------------------------------------------------ */

/*
 * Mirrored from what the encoders write (test_encoders checks that forge
 * and the encoders agree byte for byte): a 24-byte little-endian header
 * (magic "O2LT", version 1, type, flags u16, total length u32, reserved
 * u32, reqid u64), then for LOCK/DOWN/CANCEL: mode, name length, two
 * reserved bytes, the name [, the value block]; for FENCED/RECOVERED: nodeid
 * u32, reserved u32; for SNAPSHOT: target nodeid, pid, cut, then the state.
 */
#define W_HDR 24
#define W_VERSION 4
#define W_TYPE 5
#define W_FLAGS 6
#define W_LEN 8
#define W_RESERVED 12
#define W_LOCK 1
#define W_DOWN 2
#define W_CANCEL 3
#define W_FENCED 4
#define W_RECOVERED 5
#define W_SNAPSHOT 6

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void forge_header(uint8_t *b, unsigned type, unsigned flags, size_t len, uint64_t reqid)
{
	memset(b, 0, W_HDR);
	memcpy(b, "O2LT", 4);
	b[W_VERSION] = 1;
	b[W_TYPE] = (uint8_t)type;
	put_le(b + W_FLAGS, flags, 2);
	put_le(b + W_LEN, len, 4);
	put_le(b + 16, reqid, 8);
}

/* a LOCK/DOWN/CANCEL with any name length byte and any name */
static size_t forge_named(uint8_t *b, unsigned type, unsigned flags, uint64_t reqid, unsigned mode,
			  unsigned namelen_byte, const void *name, size_t namelen, const uint8_t *lvb)
{
	size_t len = W_HDR + 4 + namelen + (lvb ? O2LT_LVB_LEN : 0);
	forge_header(b, type, flags, len, reqid);
	b[W_HDR] = (uint8_t)mode;
	b[W_HDR + 1] = (uint8_t)namelen_byte;
	b[W_HDR + 2] = b[W_HDR + 3] = 0;
	memcpy(b + W_HDR + 4, name, namelen);
	if (lvb)
		memcpy(b + W_HDR + 4 + namelen, lvb, O2LT_LVB_LEN);
	return len;
}

static void set_len(uint8_t *b, size_t len)
{
	put_le(b + W_LEN, len, 4);
}

/* ------------------------------------------------------------------------ */
/* helpers for hostile input                                                 */
/* ------------------------------------------------------------------------ */

/* a rejected message: rc (-EBADMSG, -EPERM) everywhere, nothing changed, nothing said */
static void expect_rejected(int line, int rc, struct o2lt_member sender, const void *msg, size_t len)
{
	struct dumps s;
	dumps_take(&s);
	action_begin();
	deliver_input(sender, msg, len);
	for (int i = 0; i < MAX_NODES; i++) {
		if (!nodes[i].present)
			continue;
		ck_assert_msg(nodes[i].rc == rc, "line %d: node %d returned %d, wanted %d", line, i,
			      nodes[i].rc, rc);
		ck_assert_msg(nodes[i].recent->len == 0, "line %d: node %d said %s", line, i,
			      ev_name(g_array_index(nodes[i].recent, struct rec, 0).type));
	}
	dumps_same(line, &s);
}

#define BADMSG(msg, len) expect_rejected(__LINE__, -EBADMSG, nodes[0].id, msg, len)

/* a self-contradicting membership change: -EINVAL everywhere, nothing changed */
static void expect_bad_confchg(int line, const struct o2lt_confchg *c)
{
	struct dumps s;
	dumps_take(&s);
	action_begin();
	input_begin();
	for (int i = 0; i < MAX_NODES; i++)
		if (nodes[i].present)
			nodes[i].rc = o2lt_confchg(nodes[i].t, c);
	input_end();
	for (int i = 0; i < MAX_NODES; i++) {
		if (!nodes[i].present)
			continue;
		ck_assert_msg(nodes[i].rc == -EINVAL, "line %d: node %d returned %d, wanted -EINVAL",
			      line, i, nodes[i].rc);
		ck_assert_msg(nodes[i].recent->len == 0, "line %d: node %d said something", line, i);
	}
	dumps_same(line, &s);
}

#define BADCHG(...) expect_bad_confchg(__LINE__, &(const struct o2lt_confchg){ __VA_ARGS__ })

/* an event callback that only counts */
static void count_event(const struct o2lt_event *ev, void *data)
{
	unsigned *n = data;
	(void)ev;
	(*n)++;
}

/* the one snapshot in the outbox, which must be for target */
static struct outmsg *take_snapshot_for(int target)
{
	ck_assert_uint_eq(g_queue_get_length(&outbox), 1);
	struct outmsg *m = g_queue_pop_head(&outbox);
	const uint8_t *b = m->msg;
	ck_assert_uint_ge(m->len, W_HDR + 16);
	ck_assert_uint_eq(b[W_TYPE], W_SNAPSHOT);
	ck_assert_uint_eq(get_le(b + W_HDR, 4), nodes[target].id.nodeid);
	ck_assert_uint_eq(get_le(b + W_HDR + 4, 4), nodes[target].id.pid);
	return m;
}

/* -EPROTO and SYNC_FAILED for the joiner, 0 for everyone else */
static void deliver_bad_snapshot(int line, struct o2lt_member sender, const uint8_t *msg, size_t len,
				 int joiner)
{
	action_begin();
	deliver_input(sender, msg, len);
	for (int i = 0; i < MAX_NODES; i++) {
		if (!nodes[i].present)
			continue;
		int want = i == joiner ? -EPROTO : 0;
		ck_assert_msg(nodes[i].rc == want, "line %d: node %d returned %d, wanted %d", line, i,
			      nodes[i].rc, want);
	}
	ck_assert_msg(count_ev(joiner, O2LT_EV_SYNC_FAILED, NULL) == 1, "line %d: no SYNC_FAILED", line);
	ck_assert(!o2lt_synced(nodes[joiner].t));
}

/*
 * Snapshot layout (as o2lt_snapshot writes it, after the header): target
 * nodeid u32, pid u32, cut u64, next incarnation u64, members u32,
 * resources u32; 40 bytes per member; per resource: name length u8, lvb
 * valid u8, entries u16, name, lvb, 24 bytes per entry (incarnation u64,
 * reqid u64, granted, requested, queue, flags, notified, 3 zero bytes).
 */
#define S_NM 24
#define S_HEAD 32
#define S_MEMBER 40
#define S_ENTRY 24

/* what a lone joiner's table said */
struct probe {
	unsigned synced, failed, other;
};

static void probe_event(const struct o2lt_event *ev, void *data)
{
	struct probe *p = data;
	if (ev->type == O2LT_EV_SYNCED)
		p->synced++;
	else if (ev->type == O2LT_EV_SYNC_FAILED)
		p->failed++;
	else
		p->other++;
}

/*
 * A fresh joiner that sees its join and then msg: returns what o2lt_deliver
 * did, and checks the table holds together whatever happened.
 */
static int try_snapshot(const struct o2lt_confchg *join, struct o2lt_member joiner,
			struct o2lt_member sender, const uint8_t *msg, size_t len)
{
	struct probe p = { 0 };
	char why[256] = "";
	struct o2lt_table *t = o2lt_new(joiner, probe_event, &p);
	ck_assert_int_eq(o2lt_confchg(t, join), 0);
	int rc = o2lt_deliver(t, sender, msg, len);
	ck_assert_msg(rc == 0 || rc == -EPROTO, "o2lt_deliver returned %d", rc);
	ck_assert_msg(o2lt_check(t, why, sizeof(why)) == 0, "after a damaged snapshot: %s", why);
	ck_assert_uint_eq(p.failed, rc == -EPROTO);
	ck_assert_uint_eq(p.synced, o2lt_synced(t));
	ck_assert(!(p.synced && p.failed));
	g_free(o2lt_dump(t));
	o2lt_free(t);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* tests                                                                     */
/* ------------------------------------------------------------------------ */

/* 1. Members that form the group together all start synced and empty. */
START_TEST(test_first_members)
{
	node_start(0);
	ck_assert(!o2lt_synced(nodes[0].t));
	o2lt_free(nodes[0].t);
	nodes[0].t = NULL;

	JOIN(0, 1, 2);
	for (int i = 0; i < 3; i++) {
		ck_assert(o2lt_synced(nodes[i].t));
		ck_assert_uint_eq(count_ev(i, O2LT_EV_SYNCED, NULL), 1);
		/* the only thing said: SYNCED, to itself */
		ck_assert_uint_eq(nodes[i].recent->len, 1);
		char *d = dump_of(i);
		ck_assert_msg(strstr(d, "\nlock ") == NULL, "a fresh table has locks:\n%s", d);
		g_free(d);
	}

	/* whoever joins later is synced by a snapshot, not by the change */
	JOIN(3);
	ck_assert(o2lt_synced(nodes[3].t));
	ck_assert_uint_eq(count_ev(3, O2LT_EV_SYNCED, NULL), 1);
	ck_assert_uint_eq(count_on(0, 3, O2LT_EV_SEND_SNAPSHOT, NULL), 1);
}
END_TEST

START_TEST(test_single_member)
{
	JOIN(0);
	ck_assert(o2lt_synced(nodes[0].t));
	ck_assert_uint_eq(count_ev(0, O2LT_EV_SYNCED, NULL), 1);
	req_lock(0, "a", O2LT_EX, 0, 1);
	GRANTED(0, "a", O2LT_EX, 1);
}
END_TEST

/* 2. Compatible grants, waits, BLOCKING once per rise of the wanted mode. */
START_TEST(test_grants_and_blocking)
{
	JOIN(0, 1, 2, 3);

	req_lock(0, "a", O2LT_PR, 0, 1);
	GRANTED(0, "a", O2LT_PR, 1);
	req_lock(1, "a", O2LT_PR, 0, 2);
	GRANTED(1, "a", O2LT_PR, 2);
	NO_EV(0, O2LT_EV_BLOCKING, NULL);

	/* EX waits behind the two PR; each holder is told once */
	req_lock(2, "a", O2LT_EX, 0, 3);
	NO_EV(2, O2LT_EV_GRANTED, NULL);
	BLOCKING(0, "a", O2LT_EX);
	BLOCKING(1, "a", O2LT_EX);
	QUIET(2);

	/* unrelated input: nobody is told again */
	req_lock(3, "b", O2LT_EX, 0, 4);
	GRANTED(3, "b", O2LT_EX, 4);
	NO_EV(0, O2LT_EV_BLOCKING, NULL);
	NO_EV(1, O2LT_EV_BLOCKING, NULL);

	/* another waiter for a lower mode: the wanted mode did not rise */
	req_lock(3, "a", O2LT_PR, 0, 5);
	NO_EV(3, O2LT_EV_GRANTED, NULL);
	NO_EV(0, O2LT_EV_BLOCKING, NULL);
	NO_EV(1, O2LT_EV_BLOCKING, NULL);

	/* holders go down: NL is in nobody's way, EX comes when the last PR goes */
	req_down(0, "a", O2LT_NL, NULL, 6);
	DOWNED(0, "a", O2LT_NL, 6);
	NO_EV(2, O2LT_EV_GRANTED, NULL);
	NO_EV(0, O2LT_EV_BLOCKING, NULL);
	NO_EV(1, O2LT_EV_BLOCKING, NULL);

	req_down(1, "a", O2LT_UNLOCK, NULL, 7);
	DOWNED(1, "a", O2LT_UNLOCK, 7);
	GRANTED(2, "a", O2LT_EX, 3);
	NO_EV(3, O2LT_EV_GRANTED, NULL);
	BLOCKING(2, "a", O2LT_PR); /* 3's PR waits for it */
	NO_EV(0, O2LT_EV_BLOCKING, NULL);

	req_down(2, "a", O2LT_PR, NULL, 8);
	DOWNED(2, "a", O2LT_PR, 8);
	GRANTED(3, "a", O2LT_PR, 5);

	/* a rising wanted mode: EX holder told PR, then EX, then nothing more */
	req_lock(0, "c", O2LT_EX, 0, 10);
	GRANTED(0, "c", O2LT_EX, 10);
	req_lock(1, "c", O2LT_PR, 0, 11);
	BLOCKING(0, "c", O2LT_PR);
	req_lock(2, "c", O2LT_EX, 0, 12);
	BLOCKING(0, "c", O2LT_EX);
	req_lock(3, "c", O2LT_PR, 0, 13);
	NO_EV(0, O2LT_EV_BLOCKING, NULL);

	/* after a DOWN the lock is a new grant: still in the way, told again */
	req_down(0, "c", O2LT_PR, NULL, 14);
	DOWNED(0, "c", O2LT_PR, 14);
	GRANTED(1, "c", O2LT_PR, 11);
	NO_EV(3, O2LT_EV_GRANTED, NULL); /* behind the waiting EX */
	BLOCKING(0, "c", O2LT_EX);
	BLOCKING(1, "c", O2LT_EX);

	req_down(0, "c", O2LT_UNLOCK, NULL, 15);
	NO_EV(2, O2LT_EV_GRANTED, NULL);
	req_down(1, "c", O2LT_UNLOCK, NULL, 16);
	GRANTED(2, "c", O2LT_EX, 12);
	BLOCKING(2, "c", O2LT_PR);
}
END_TEST

/* 3. New requests are first come first served; NL never waits. */
START_TEST(test_fifo)
{
	JOIN(0, 1, 2, 3);

	req_lock(0, "a", O2LT_PR, 0, 1);
	req_lock(1, "a", O2LT_EX, 0, 2);
	NO_EV(1, O2LT_EV_GRANTED, NULL);
	/* compatible with the holder, but an EX waits ahead of it */
	req_lock(2, "a", O2LT_PR, 0, 3);
	NO_EV(2, O2LT_EV_GRANTED, NULL);
	/* NL is compatible with everything: at once */
	req_lock(3, "a", O2LT_NL, 0, 4);
	GRANTED(3, "a", O2LT_NL, 4);

	req_down(0, "a", O2LT_UNLOCK, NULL, 5);
	GRANTED(1, "a", O2LT_EX, 2);
	NO_EV(2, O2LT_EV_GRANTED, NULL);
	BLOCKING(1, "a", O2LT_PR);
	NO_EV(3, O2LT_EV_BLOCKING, NULL); /* NL is in nobody's way */
	req_down(1, "a", O2LT_UNLOCK, NULL, 6);
	GRANTED(2, "a", O2LT_PR, 3);

	/* a queue of four: granted strictly in order, compatible ones together */
	req_lock(0, "b", O2LT_EX, 0, 10);
	req_lock(1, "b", O2LT_EX, 0, 11);
	req_lock(2, "b", O2LT_PR, 0, 12);
	req_lock(3, "b", O2LT_PR, 0, 13);
	req_down(0, "b", O2LT_UNLOCK, NULL, 14);
	GRANTED(1, "b", O2LT_EX, 11);
	NO_EV(2, O2LT_EV_GRANTED, NULL);
	NO_EV(3, O2LT_EV_GRANTED, NULL);
	req_down(1, "b", O2LT_UNLOCK, NULL, 15);
	GRANTED(2, "b", O2LT_PR, 12);
	GRANTED(3, "b", O2LT_PR, 13);
	int p2 = position_on(0, 2, O2LT_EV_GRANTED, "b"), p3 = position_on(0, 3, O2LT_EV_GRANTED, "b");
	ck_assert_int_ge(p2, 0);
	ck_assert_int_lt(p2, p3);
}
END_TEST

/* 4. Conversions: up from NL, ahead of new requests, and the misuse refusals. */
START_TEST(test_conversions)
{
	JOIN(0, 1, 2);

	req_lock(0, "a", O2LT_NL, 0, 1);
	GRANTED(0, "a", O2LT_NL, 1);
	req_lock(0, "a", O2LT_EX, 0, 2);
	GRANTED(0, "a", O2LT_EX, 2);
	req_lock(1, "a", O2LT_NL, 0, 3);
	GRANTED(1, "a", O2LT_NL, 3);

	/* a new EX request first, then 1's conversion NL->EX */
	req_lock(2, "a", O2LT_EX, 0, 4);
	BLOCKING(0, "a", O2LT_EX);
	req_lock(1, "a", O2LT_EX, 0, 5);
	NO_EV(1, O2LT_EV_GRANTED, NULL);
	NO_EV(0, O2LT_EV_BLOCKING, NULL);

	/* the conversion goes first, although the new request came earlier */
	req_down(0, "a", O2LT_UNLOCK, NULL, 6);
	GRANTED(1, "a", O2LT_EX, 5);
	NO_EV(2, O2LT_EV_GRANTED, NULL);
	BLOCKING(1, "a", O2LT_EX);

	/* asking for less than is held: refused, nothing changes */
	struct dumps s;
	dumps_take(&s);
	req_lock(1, "a", O2LT_PR, 0, 7);
	REFUSED(1, "a", 7, -EINVAL);
	req_lock(1, "a", O2LT_NL, 0, 8);
	REFUSED(1, "a", 8, -EINVAL);
	dumps_same(__LINE__, &s);

	/* the mode held: granted again, under the new reqid */
	req_lock(1, "a", O2LT_EX, 0, 9);
	GRANTED(1, "a", O2LT_EX, 9);

	/* a second request while one waits: -EBUSY, the first stays queued */
	req_lock(2, "a", O2LT_PR, 0, 10);
	REFUSED(2, "a", 10, -EBUSY);
	req_down(1, "a", O2LT_UNLOCK, NULL, 11);
	GRANTED(2, "a", O2LT_EX, 4);

	/* a second request while a conversion waits: -EBUSY too */
	req_lock(0, "b", O2LT_PR, 0, 20);
	req_lock(1, "b", O2LT_PR, 0, 21);
	req_lock(0, "b", O2LT_EX, 0, 22);
	NO_EV(0, O2LT_EV_GRANTED, NULL);
	req_lock(0, "b", O2LT_EX, 0, 23);
	REFUSED(0, "b", 23, -EBUSY);
	req_lock(2, "b", O2LT_PR, 0, 24); /* new request, behind the conversion */
	NO_EV(2, O2LT_EV_GRANTED, NULL);
	req_down(1, "b", O2LT_UNLOCK, NULL, 25);
	GRANTED(0, "b", O2LT_EX, 22);
	NO_EV(2, O2LT_EV_GRANTED, NULL);
}
END_TEST

/* 5. NOQUEUE: refused rather than queued, no BLOCKING (unless NOQUEUEBAST), held mode kept. */
START_TEST(test_noqueue)
{
	JOIN(0, 1, 2);

	req_lock(0, "a", O2LT_EX, 0, 1);
	req_lock(1, "a", O2LT_PR, O2LT_F_NOQUEUE, 2);
	REFUSED(1, "a", 2, -EAGAIN);
	NO_EV(1, O2LT_EV_GRANTED, NULL);
	NO_EV(0, O2LT_EV_BLOCKING, NULL);
	/* it left nothing behind: no lock to drop, and the holder was never told */
	req_down(1, "a", O2LT_UNLOCK, NULL, 3);
	REFUSED(1, "a", 3, -ENOENT);
	req_lock(2, "a", O2LT_PR, 0, 4);
	BLOCKING(0, "a", O2LT_PR);

	/* grantable: granted */
	req_lock(1, "b", O2LT_PR, O2LT_F_NOQUEUE, 5);
	GRANTED(1, "b", O2LT_PR, 5);
	req_lock(2, "b", O2LT_PR, 0, 6);
	GRANTED(2, "b", O2LT_PR, 6);

	/* a NOQUEUE conversion that cannot be granted keeps the mode held */
	req_lock(1, "b", O2LT_EX, O2LT_F_NOQUEUE, 7);
	REFUSED(1, "b", 7, -EAGAIN);
	NO_EV(2, O2LT_EV_BLOCKING, NULL);
	req_down(1, "b", O2LT_NL, NULL, 8); /* only works if PR is still held */
	DOWNED(1, "b", O2LT_NL, 8);
	req_lock(1, "b", O2LT_PR, 0, 9);
	GRANTED(1, "b", O2LT_PR, 9);

	/* compatible with the holders but behind a waiting EX: refused */
	req_lock(0, "c", O2LT_PR, 0, 10);
	req_lock(1, "c", O2LT_EX, 0, 11);
	req_lock(2, "c", O2LT_PR, O2LT_F_NOQUEUE, 12);
	REFUSED(2, "c", 12, -EAGAIN);

	/* NOQUEUE NL never waits */
	req_lock(2, "a", O2LT_NL, O2LT_F_NOQUEUE, 13);
	REFUSED(2, "a", 13, -EBUSY); /* 2 still waits for PR on a */
	req_lock(1, "a", O2LT_NL, O2LT_F_NOQUEUE, 14);
	GRANTED(1, "a", O2LT_NL, 14);

	/* NOQUEUEBAST: refused too, but each holder in the way is told */
	req_lock(0, "d", O2LT_PR, 0, 15);
	GRANTED(0, "d", O2LT_PR, 15);
	req_lock(1, "d", O2LT_PR, 0, 16);
	GRANTED(1, "d", O2LT_PR, 16);
	req_lock(2, "d", O2LT_EX, O2LT_F_NOQUEUE | O2LT_F_NOQUEUEBAST, 17);
	REFUSED(2, "d", 17, -EAGAIN);
	BLOCKING(0, "d", O2LT_EX);
	BLOCKING(1, "d", O2LT_EX);
	NO_EV(2, O2LT_EV_GRANTED, NULL);
	/* once the holders go, the next try is granted */
	req_down(0, "d", O2LT_UNLOCK, NULL, 18);
	req_down(1, "d", O2LT_NL, NULL, 19);
	req_lock(2, "d", O2LT_EX, O2LT_F_NOQUEUE | O2LT_F_NOQUEUEBAST, 20);
	GRANTED(2, "d", O2LT_EX, 20);
}
END_TEST

/*
 * NEW: a request whose sender holds the lock already (a name it has just
 * made).  Granted at once as any other when nobody holds it, with nothing
 * more said; one that must wait (the name was used before and someone
 * still caches it) is QUEUED for its sender, the holder is told, and it
 * is granted once the holder lets go.
 */
START_TEST(test_new)
{
	JOIN(0, 1, 2);

	req_lock(0, "n", O2LT_EX, O2LT_F_NEW, 1);
	GRANTED(0, "n", O2LT_EX, 1);
	NO_EV(0, O2LT_EV_QUEUED, NULL);
	req_lock(1, "n", O2LT_PR, 0, 2);
	BLOCKING(0, "n", O2LT_PR);

	req_lock(2, "o", O2LT_PR, 0, 3);
	GRANTED(2, "o", O2LT_PR, 3);
	req_lock(0, "o", O2LT_EX, O2LT_F_NEW, 4);
	expect_ev(__LINE__, 0, O2LT_EV_QUEUED, "o", O2LT_EX, 4, 0);
	BLOCKING(2, "o", O2LT_EX);
	NO_EV(0, O2LT_EV_GRANTED, "o");
	req_down(2, "o", O2LT_NL, NULL, 5);
	GRANTED(0, "o", O2LT_EX, 4);

	/* compatible with the holders: granted, not queued */
	req_lock(1, "p", O2LT_PR, 0, 6);
	req_lock(2, "p", O2LT_PR, O2LT_F_NEW, 7);
	GRANTED(2, "p", O2LT_PR, 7);
	NO_EV(2, O2LT_EV_QUEUED, NULL);
}
END_TEST

/* A BATCH of LOCKs: as if sent one by one; anything malformed in it refuses it whole. */
START_TEST(test_batch)
{
	uint8_t locks[4 * O2LT_MSG_SMALL], buf[24 + sizeof(locks)];
	size_t len = 0;
	ssize_t n;

	JOIN(0, 1, 2);
	req_lock(1, "c", O2LT_PR, 0, 1);
	GRANTED(1, "c", O2LT_PR, 1);
	n = o2lt_msg_lock(locks + len, sizeof(locks) - len, 2, "a", 1, O2LT_EX, O2LT_F_NEW);
	len += (size_t)n;
	n = o2lt_msg_lock(locks + len, sizeof(locks) - len, 3, "b", 1, O2LT_PR, O2LT_F_NEW);
	len += (size_t)n;
	n = o2lt_msg_lock(locks + len, sizeof(locks) - len, 4, "c", 1, O2LT_EX, O2LT_F_NEW);
	len += (size_t)n;
	mcast(0, buf, o2lt_msg_batch(buf, sizeof(buf), locks, len));
	GRANTED(0, "a", O2LT_EX, 2);
	GRANTED(0, "b", O2LT_PR, 3);
	expect_ev(__LINE__, 0, O2LT_EV_QUEUED, "c", O2LT_EX, 4, 0);
	BLOCKING(1, "c", O2LT_EX);
	req_down(1, "c", O2LT_NL, NULL, 5);
	GRANTED(0, "c", O2LT_EX, 4);

	/* a good LOCK, then a DOWN, then one cut short: nothing of it applies */
	struct dumps d;
	size_t good;

	dumps_take(&d);
	len = (size_t)o2lt_msg_lock(locks, sizeof(locks), 6, "d", 1, O2LT_EX, 0);
	good = len;
	len += (size_t)o2lt_msg_down(locks + len, sizeof(locks) - len, 7, "a", 1, O2LT_NL, NULL);
	n = o2lt_msg_batch(buf, sizeof(buf), locks, len);
	ck_assert_int_gt(n, 0);
	action_begin();
	deliver_input(nodes[2].id, buf, (size_t)n);
	expect_rc_all(__LINE__, -EBADMSG);
	n = o2lt_msg_batch(buf, sizeof(buf), locks, good + 10);
	action_begin();
	deliver_input(nodes[2].id, buf, (size_t)n);
	expect_rc_all(__LINE__, -EBADMSG);
	dumps_same(__LINE__, &d);
	/* a batch inside a batch is no LOCK either */
	n = o2lt_msg_batch(buf, sizeof(buf), locks, good);
	memcpy(locks, buf, (size_t)n);
	n = o2lt_msg_batch(buf, sizeof(buf), locks, (size_t)n);
	action_begin();
	deliver_input(nodes[2].id, buf, (size_t)n);
	expect_rc_all(__LINE__, -EBADMSG);
	dumps_same(__LINE__, &d);
	ck_assert_int_eq(o2lt_msg_batch(buf, sizeof(buf), locks, 0), -EINVAL);
	ck_assert_int_eq(o2lt_msg_batch(buf, 30, locks, good), -ENOBUFS);
}
END_TEST

/* 6. CANCEL of a waiting request, of a conversion, of nothing; deadlock way out. */
START_TEST(test_cancel)
{
	JOIN(0, 1, 2);

	req_lock(0, "a", O2LT_EX, 0, 1);
	req_lock(1, "a", O2LT_PR, 0, 2);
	BLOCKING(0, "a", O2LT_PR);
	req_cancel(1, "a", 3);
	REFUSED(1, "a", 2, -ECANCELED); /* the request's reqid, not the cancel's */
	ck_assert_uint_eq(count_ev(1, O2LT_EV_REFUSED, NULL), 1);
	req_down(1, "a", O2LT_UNLOCK, NULL, 4);
	REFUSED(1, "a", 4, -ENOENT);

	/* a pending conversion: cancelled, the held PR stays */
	req_lock(0, "b", O2LT_PR, 0, 5);
	req_lock(1, "b", O2LT_PR, 0, 6);
	req_lock(1, "b", O2LT_EX, 0, 7);
	BLOCKING(0, "b", O2LT_EX);
	req_cancel(1, "b", 8);
	REFUSED(1, "b", 7, -ECANCELED);
	NO_EV(1, O2LT_EV_DOWNED, NULL);
	req_down(1, "b", O2LT_NL, NULL, 9);
	DOWNED(1, "b", O2LT_NL, 9);

	/* nothing pending, or no lock at all: -ENOENT under the cancel's reqid */
	struct dumps s;
	dumps_take(&s);
	req_cancel(1, "b", 10);
	REFUSED(1, "b", 10, -ENOENT);
	req_cancel(2, "zz", 11);
	REFUSED(2, "zz", 11, -ENOENT);
	dumps_same(__LINE__, &s);

	/* the head of the queue goes: the next waiter is granted */
	req_lock(0, "c", O2LT_PR, 0, 12);
	req_lock(1, "c", O2LT_EX, 0, 13);
	req_lock(2, "c", O2LT_PR, 0, 14);
	NO_EV(2, O2LT_EV_GRANTED, NULL);
	req_cancel(1, "c", 15);
	REFUSED(1, "c", 13, -ECANCELED);
	GRANTED(2, "c", O2LT_PR, 14);

	/* conversion deadlock: both PR holders want EX; one backs off */
	req_lock(0, "d", O2LT_PR, 0, 20);
	req_lock(1, "d", O2LT_PR, 0, 21);
	req_lock(0, "d", O2LT_EX, 0, 22);
	BLOCKING(1, "d", O2LT_EX);
	req_lock(1, "d", O2LT_EX, 0, 23);
	BLOCKING(0, "d", O2LT_EX);
	NO_EV(0, O2LT_EV_GRANTED, NULL);
	NO_EV(1, O2LT_EV_GRANTED, NULL);
	req_cancel(1, "d", 24);
	REFUSED(1, "d", 23, -ECANCELED);
	NO_EV(0, O2LT_EV_GRANTED, NULL); /* 1 still holds PR */
	req_down(1, "d", O2LT_NL, NULL, 25);
	DOWNED(1, "d", O2LT_NL, 25);
	GRANTED(0, "d", O2LT_EX, 22);
}
END_TEST

/* 7. The value block: written leaving EX, carried by the next grants. */
START_TEST(test_lvb)
{
	uint8_t l1[O2LT_LVB_LEN], l2[O2LT_LVB_LEN], l3[O2LT_LVB_LEN];
	const struct rec *r;
	lvb_fill(l1, 1);
	lvb_fill(l2, 2);
	lvb_fill(l3, 3);
	JOIN(0, 1);

	req_lock(0, "a", O2LT_EX, 0, 1);
	r = GRANTED(0, "a", O2LT_EX, 1);
	ck_assert(!r->lvb_valid);
	req_down(0, "a", O2LT_NL, l1, 2);
	DOWNED(0, "a", O2LT_NL, 2);
	req_lock(1, "a", O2LT_PR, 0, 3);
	r = GRANTED(1, "a", O2LT_PR, 3);
	ck_assert(r->lvb_valid);
	ck_assert_mem_eq(r->lvb, l1, O2LT_LVB_LEN);

	/* only EX may write it */
	struct dumps s;
	dumps_take(&s);
	req_down(1, "a", O2LT_NL, l2, 4);
	REFUSED(1, "a", 4, -EINVAL);
	req_down(1, "a", O2LT_UNLOCK, l2, 5);
	REFUSED(1, "a", 5, -EINVAL);
	dumps_same(__LINE__, &s);
	req_lock(1, "a", O2LT_PR, 0, 6);
	r = GRANTED(1, "a", O2LT_PR, 6);
	ck_assert(r->lvb_valid);
	ck_assert_mem_eq(r->lvb, l1, O2LT_LVB_LEN);

	/* 0 converts NL->EX: gets the value when 1 goes */
	req_lock(0, "a", O2LT_EX, 0, 7);
	BLOCKING(1, "a", O2LT_EX);
	req_down(1, "a", O2LT_UNLOCK, NULL, 8);
	r = GRANTED(0, "a", O2LT_EX, 7);
	ck_assert(r->lvb_valid);
	ck_assert_mem_eq(r->lvb, l1, O2LT_LVB_LEN);

	/* EX -> PR with a value */
	req_down(0, "a", O2LT_PR, l2, 9);
	DOWNED(0, "a", O2LT_PR, 9);
	req_lock(1, "a", O2LT_PR, 0, 10);
	r = GRANTED(1, "a", O2LT_PR, 10);
	ck_assert_mem_eq(r->lvb, l2, O2LT_LVB_LEN);

	/* EX -> UNLOCK with a value, handed to the waiter */
	req_down(1, "a", O2LT_UNLOCK, NULL, 11);
	req_lock(0, "a", O2LT_EX, 0, 12);
	GRANTED(0, "a", O2LT_EX, 12);
	req_lock(1, "a", O2LT_PR, 0, 13);
	req_down(0, "a", O2LT_UNLOCK, l3, 14);
	r = GRANTED(1, "a", O2LT_PR, 13);
	ck_assert(r->lvb_valid);
	ck_assert_mem_eq(r->lvb, l3, O2LT_LVB_LEN);

	/* a DOWN from EX without a value keeps the old one */
	req_lock(0, "a", O2LT_NL, 0, 15);
	req_lock(0, "a", O2LT_EX, 0, 16);
	req_down(1, "a", O2LT_UNLOCK, NULL, 17);
	r = GRANTED(0, "a", O2LT_EX, 16);
	ck_assert_mem_eq(r->lvb, l3, O2LT_LVB_LEN);
	req_down(0, "a", O2LT_NL, NULL, 18);
	req_lock(1, "a", O2LT_PR, 0, 19);
	r = GRANTED(1, "a", O2LT_PR, 19);
	ck_assert(r->lvb_valid);
	ck_assert_mem_eq(r->lvb, l3, O2LT_LVB_LEN);

	/* from NL: no value either */
	req_lock(0, "b", O2LT_NL, 0, 20);
	req_down(0, "b", O2LT_UNLOCK, l1, 21);
	REFUSED(0, "b", 21, -EINVAL);
}
END_TEST

/* 8. DOWN refused: not held, conversion pending, not lower. */
START_TEST(test_down_errors)
{
	JOIN(0, 1);
	struct dumps s;

	req_lock(1, "a", O2LT_PR, 0, 1);
	req_lock(0, "b", O2LT_PR, 0, 2);
	req_lock(1, "b", O2LT_PR, 0, 3);
	req_lock(0, "b", O2LT_EX, 0, 4);
	req_lock(0, "c", O2LT_PR, 0, 5);
	req_lock(0, "d", O2LT_NL, 0, 6);

	dumps_take(&s);
	req_down(0, "x", O2LT_NL, NULL, 10); /* no such lock anywhere */
	REFUSED(0, "x", 10, -ENOENT);
	req_down(0, "a", O2LT_UNLOCK, NULL, 11); /* someone else's lock */
	REFUSED(0, "a", 11, -ENOENT);
	req_down(0, "b", O2LT_NL, NULL, 12); /* conversion pending */
	REFUSED(0, "b", 12, -EBUSY);
	req_down(0, "b", O2LT_UNLOCK, NULL, 13);
	REFUSED(0, "b", 13, -EBUSY);
	req_down(0, "c", O2LT_PR, NULL, 14); /* same mode */
	REFUSED(0, "c", 14, -EINVAL);
	req_down(0, "d", O2LT_NL, NULL, 15);
	REFUSED(0, "d", 15, -EINVAL);
	req_down(0, "d", O2LT_PR, NULL, 16); /* higher */
	REFUSED(0, "d", 16, -EINVAL);
	dumps_same(__LINE__, &s);

	req_down(0, "d", O2LT_UNLOCK, NULL, 17);
	DOWNED(0, "d", O2LT_UNLOCK, 17);
	req_down(0, "c", O2LT_NL, NULL, 18);
	DOWNED(0, "c", O2LT_NL, 18);
}
END_TEST

/*
 * 9. A member dies: queued requests go, NL goes, PR/EX freeze; FENCED lets
 * RECOVERY requests pass; RECOVERED drops the frozen locks and invalidates
 * the value blocks under its EX.
 */
START_TEST(test_failure_and_recovery)
{
	uint8_t la[O2LT_LVB_LEN], lb[O2LT_LVB_LEN];
	const struct rec *r;
	struct dumps s;
	const uint32_t dead = nodes[3].id.nodeid;
	lvb_fill(la, 0x10);
	lvb_fill(lb, 0x20);
	JOIN(0, 1, 2, 3);

	req_lock(3, "n", O2LT_NL, 0, 1);
	req_lock(3, "p", O2LT_PR, 0, 2);
	/* x and y: 3 holds EX over a value it wrote */
	req_lock(3, "x", O2LT_EX, 0, 3);
	req_down(3, "x", O2LT_NL, la, 4);
	req_lock(3, "x", O2LT_EX, 0, 5);
	r = GRANTED(3, "x", O2LT_EX, 5);
	ck_assert(r->lvb_valid);
	req_lock(3, "y", O2LT_EX, 0, 6);
	req_down(3, "y", O2LT_NL, lb, 7);
	req_lock(3, "y", O2LT_EX, 0, 8);
	/* q: 3's EX request waits behind 0's PR, and 1's PR waits behind it */
	req_lock(0, "q", O2LT_PR, 0, 9);
	req_lock(3, "q", O2LT_EX, 0, 10);
	req_lock(1, "q", O2LT_PR, 0, 11);
	NO_EV(1, O2LT_EV_GRANTED, NULL);
	/* waiters on 3's locks */
	req_lock(0, "x", O2LT_PR, 0, 12);
	req_lock(1, "p", O2LT_EX, 0, 13);
	req_lock(1, "y", O2LT_PR, 0, 14);

	GONE(3, O2LT_REASON_NODEDOWN);
	EVERYWHERE(3, O2LT_EV_NODE_FAILED, 1);
	EVERYWHERE(3, O2LT_EV_BLOCKING, 0); /* nobody to tell */
	GRANTED(1, "q", O2LT_PR, 11); /* 3's request went */
	NO_EV(0, O2LT_EV_GRANTED, NULL);
	NO_EV(1, O2LT_EV_GRANTED, "p");
	NO_EV(1, O2LT_EV_GRANTED, "y");
	for (int i = 0; i < 3; i++) {
		ck_assert_msg(!dump_has_lock(i, "n"), "node %d: the dead member's NL lock stayed", i);
		ck_assert(dump_has_lock(i, "p"));
		ck_assert(dump_has_lock(i, "x"));
		ck_assert(dump_has_lock(i, "y"));
	}
	/* its frozen locks still stand in the way of new requests */
	req_lock(2, "p", O2LT_EX, O2LT_F_NOQUEUE, 15);
	REFUSED(2, "p", 15, -EAGAIN);

	/* a RECOVERY request before the fencing waits like any other */
	req_lock(2, "x", O2LT_EX, O2LT_F_RECOVERY, 17);
	NO_EV(2, O2LT_EV_GRANTED, NULL);

	req_fenced(0, dead, 18);
	EVERYWHERE(3, O2LT_EV_NODE_FENCED, 1);
	r = GRANTED(2, "x", O2LT_EX, 17); /* passes over the frozen EX */
	ck_assert_msg(!r->lvb_valid, "the recovery got the value block a dead EX holder left");
	NO_EV(0, O2LT_EV_GRANTED, NULL); /* 0's PR still waits */
	BLOCKING(2, "x", O2LT_PR);

	/* after the fencing: RECOVERY passes, a normal request still waits */
	req_lock(2, "p", O2LT_EX, O2LT_F_RECOVERY, 19);
	r = GRANTED(2, "p", O2LT_EX, 19);
	ck_assert(!r->lvb_valid);
	NO_EV(1, O2LT_EV_GRANTED, NULL);
	/* the recovery writes the value block back; the dead EX still holds 1 off */
	uint8_t lr[O2LT_LVB_LEN];
	lvb_fill(lr, 0x77);
	req_down(2, "p", O2LT_NL, lr, 27);
	DOWNED(2, "p", O2LT_NL, 27);
	NO_EV(1, O2LT_EV_GRANTED, NULL);
	req_lock(0, "y", O2LT_PR, 0, 20);
	NO_EV(0, O2LT_EV_GRANTED, NULL);
	EVERYWHERE(3, O2LT_EV_BLOCKING, 0);

	req_recovered(1, dead, 21);
	EVERYWHERE(3, O2LT_EV_NODE_RECOVERED, 1);
	/* y: the frozen EX is gone, and with it the value it may have changed */
	r = GRANTED(1, "y", O2LT_PR, 14);
	ck_assert_msg(!r->lvb_valid, "value block under a dead member's EX still valid");
	r = GRANTED(0, "y", O2LT_PR, 20);
	ck_assert(!r->lvb_valid);
	/* p: the value the recovery wrote stands; x: the recovering EX is in the way */
	r = GRANTED(1, "p", O2LT_EX, 13);
	ck_assert_msg(r->lvb_valid, "RECOVERED voided what the recovery wrote");
	ck_assert_mem_eq(r->lvb, lr, O2LT_LVB_LEN);
	NO_EV(0, O2LT_EV_GRANTED, "x");
	req_down(2, "x", O2LT_UNLOCK, NULL, 22);
	r = GRANTED(0, "x", O2LT_PR, 12);
	ck_assert_msg(!r->lvb_valid, "value block under a dead member's EX still valid");
	req_down(2, "p", O2LT_UNLOCK, NULL, 23);
	DOWNED(2, "p", O2LT_UNLOCK, 23);

	/* it is gone for good: nothing left to recover */
	dumps_take(&s);
	req_fenced(0, dead, 24);
	EVERYWHERE(3, O2LT_EV_NODE_FENCED, 0);
	req_recovered(0, dead, 25);
	REFUSED(0, NULL, 25, -ENOENT);
	dumps_same(__LINE__, &s);
	/* nor is there any other dead member */
	req_recovered(0, 77, 26);
	REFUSED(0, NULL, 26, -ENOENT);

	/* the dead member's messages are not taken */
	uint8_t buf[O2LT_MSG_SMALL];
	ssize_t n = o2lt_msg_lock(buf, sizeof(buf), 27, "z", 1, O2LT_EX, 0);
	expect_rejected(__LINE__, -EPERM, nodes[3].id, buf, (size_t)n);
}
END_TEST

/*
 * RECOVERED for a member that died but was never fenced: nothing to
 * recover yet.  -ENOENT to the sender, as for a node that is not dead at
 * all; -EINVAL is for a node that died again after its FENCED
 * (test_double_death).
 */
START_TEST(test_recovered_before_fenced)
{
	struct dumps s;
	JOIN(0, 1, 2);
	req_lock(2, "a", O2LT_EX, 0, 1);
	req_lock(0, "a", O2LT_PR, 0, 2);
	GONE(2, O2LT_REASON_NODEDOWN);

	dumps_take(&s);
	req_recovered(1, nodes[2].id.nodeid, 3);
	REFUSED(1, NULL, 3, -ENOENT);
	EVERYWHERE(2, O2LT_EV_NODE_RECOVERED, 0);
	NO_EV(0, O2LT_EV_GRANTED, NULL);
	dumps_same(__LINE__, &s);
}
END_TEST

/* FENCED is for one node: other dead nodes stay unfenced. */
START_TEST(test_fenced_per_node)
{
	JOIN(0, 1, 2, 3);
	req_lock(2, "a", O2LT_EX, 0, 1);
	req_lock(3, "b", O2LT_EX, 0, 2);
	change(NULL, 0,
	       (const struct gone[]){ { 2, O2LT_REASON_NODEDOWN }, { 3, O2LT_REASON_NODEDOWN } }, 2);
	EVERYWHERE(2, O2LT_EV_NODE_FAILED, 1);
	EVERYWHERE(3, O2LT_EV_NODE_FAILED, 1);
	req_lock(0, "a", O2LT_EX, O2LT_F_RECOVERY, 3);
	req_lock(0, "b", O2LT_EX, O2LT_F_RECOVERY, 4);
	NO_EV(0, O2LT_EV_GRANTED, NULL);

	req_fenced(1, nodes[2].id.nodeid, 5);
	EVERYWHERE(2, O2LT_EV_NODE_FENCED, 1);
	EVERYWHERE(3, O2LT_EV_NODE_FENCED, 0);
	GRANTED(0, "a", O2LT_EX, 3);
	NO_EV(0, O2LT_EV_GRANTED, "b");

	req_fenced(1, nodes[3].id.nodeid, 6);
	EVERYWHERE(3, O2LT_EV_NODE_FENCED, 1);
	EVERYWHERE(2, O2LT_EV_NODE_FENCED, 0);
	GRANTED(0, "b", O2LT_EX, 4);

	/* RECOVERED is for one node too */
	req_down(0, "b", O2LT_UNLOCK, NULL, 7);
	req_lock(1, "b", O2LT_PR, 0, 8);
	req_recovered(1, nodes[2].id.nodeid, 9);
	EVERYWHERE(2, O2LT_EV_NODE_RECOVERED, 1);
	EVERYWHERE(3, O2LT_EV_NODE_RECOVERED, 0);
	NO_EV(1, O2LT_EV_GRANTED, NULL); /* 3's EX is still there */
	req_recovered(1, nodes[3].id.nodeid, 10);
	EVERYWHERE(3, O2LT_EV_NODE_RECOVERED, 1);
	GRANTED(1, "b", O2LT_PR, 8);
}
END_TEST

/* PROCDOWN is a death as well; a waiting RECOVERY request is granted by FENCED. */
START_TEST(test_procdown)
{
	JOIN(0, 1, 2);
	req_lock(2, "a", O2LT_EX, 0, 1);
	req_lock(2, "b", O2LT_PR, 0, 2);
	req_lock(0, "b", O2LT_EX, 0, 3);
	req_lock(1, "a", O2LT_PR, 0, 4);
	req_lock(2, "c", O2LT_NL, 0, 5);

	GONE(2, O2LT_REASON_PROCDOWN);
	EVERYWHERE(2, O2LT_EV_NODE_FAILED, 1);
	NO_EV(0, O2LT_EV_GRANTED, NULL);
	NO_EV(1, O2LT_EV_GRANTED, NULL);
	ck_assert(!dump_has_lock(0, "c"));

	req_lock(0, "a", O2LT_EX, O2LT_F_RECOVERY, 6);
	NO_EV(0, O2LT_EV_GRANTED, NULL);
	req_fenced(1, nodes[2].id.nodeid, 7);
	EVERYWHERE(2, O2LT_EV_NODE_FENCED, 1);
	GRANTED(0, "a", O2LT_EX, 6);
	NO_EV(1, O2LT_EV_GRANTED, NULL);
	req_recovered(0, nodes[2].id.nodeid, 8);
	EVERYWHERE(2, O2LT_EV_NODE_RECOVERED, 1);
	GRANTED(0, "b", O2LT_EX, 3);
	NO_EV(1, O2LT_EV_GRANTED, NULL); /* a: behind 0's EX */
	req_down(0, "a", O2LT_UNLOCK, NULL, 9);
	GRANTED(1, "a", O2LT_PR, 4);
}
END_TEST

/* A member that vanishes from the list without a leave record has failed. */
START_TEST(test_member_vanishes)
{
	JOIN(0, 1, 2);
	req_lock(2, "a", O2LT_EX, 0, 1);
	req_lock(0, "a", O2LT_PR, 0, 2);

	struct o2lt_member members[] = { nodes[0].id, nodes[1].id };
	struct o2lt_confchg c = { .members = members, .n_members = 2 };
	nodes[2].present = false;
	group[0] = members[0];
	group[1] = members[1];
	n_group = 2;
	confchg_all(&c);
	EVERYWHERE(2, O2LT_EV_NODE_FAILED, 1);
	NO_EV(0, O2LT_EV_GRANTED, NULL);
}
END_TEST

/*
 * A lock granted under RECOVERY next to a fenced member's EX stays rightly
 * held when its holder then asks, without RECOVERY, for more: the request
 * waits like any other, and the grant keeps what justified it (fuzz_locktab
 * found the flags of the new request overwriting those of the grant).
 */
START_TEST(test_recovery_grant_then_convert)
{
	JOIN(0, 1, 2);
	req_lock(2, "q", O2LT_EX, 0, 1);
	GONE(2, O2LT_REASON_NODEDOWN);
	req_fenced(1, nodes[2].id.nodeid, 2);
	req_lock(0, "q", O2LT_PR, O2LT_F_RECOVERY, 3);
	GRANTED(0, "q", O2LT_PR, 3);
	req_lock(0, "q", O2LT_EX, 0, 4); /* not a recovery request: waits */
	NO_EV(0, O2LT_EV_GRANTED, NULL);
	req_lock(1, "q", O2LT_PR, 0, 5); /* nor may anyone else pass the frozen EX */
	NO_EV(1, O2LT_EV_GRANTED, NULL);
	req_recovered(1, nodes[2].id.nodeid, 6);
	GRANTED(0, "q", O2LT_EX, 4);
	NO_EV(1, O2LT_EV_GRANTED, NULL);
}
END_TEST

/* A node dies twice: RECOVERED is refused until its new incarnation is fenced. */
START_TEST(test_double_death)
{
	struct dumps s;
	const uint32_t nid = nodes[2].id.nodeid;
	JOIN(0, 1, 2);
	req_lock(2, "a", O2LT_EX, 0, 1);
	req_lock(0, "a", O2LT_PR, 0, 2);

	GONE(2, O2LT_REASON_NODEDOWN);
	req_fenced(0, nid, 3);
	EVERYWHERE(2, O2LT_EV_NODE_FENCED, 1);

	/* the node comes back (a new process) before it was recovered, and dies again */
	nodes[3].id = (struct o2lt_member){ .nodeid = nid, .pid = nodes[2].id.pid + 1 };
	JOIN(3);
	ck_assert(o2lt_synced(nodes[3].t));
	ck_assert_uint_eq(count_on(3, 2, O2LT_EV_NODE_FAILED, NULL), 1);
	ck_assert_uint_eq(count_on(3, 2, O2LT_EV_NODE_FENCED, NULL), 1);
	req_lock(3, "b", O2LT_EX, 0, 4);
	GRANTED(3, "b", O2LT_EX, 4);
	req_lock(1, "b", O2LT_PR, 0, 5);
	GONE(3, O2LT_REASON_NODEDOWN);
	EVERYWHERE(3, O2LT_EV_NODE_FAILED, 1);

	dumps_take(&s);
	req_recovered(1, nid, 6);
	REFUSED(1, NULL, 6, -EINVAL);
	EVERYWHERE(2, O2LT_EV_NODE_RECOVERED, 0);
	EVERYWHERE(3, O2LT_EV_NODE_RECOVERED, 0);
	dumps_same(__LINE__, &s);

	req_fenced(0, nid, 7);
	EVERYWHERE(3, O2LT_EV_NODE_FENCED, 1);
	EVERYWHERE(2, O2LT_EV_NODE_FENCED, 0); /* already fenced */
	req_recovered(1, nid, 8);
	EVERYWHERE(2, O2LT_EV_NODE_RECOVERED, 1);
	EVERYWHERE(3, O2LT_EV_NODE_RECOVERED, 1);
	GRANTED(0, "a", O2LT_PR, 2);
	GRANTED(1, "b", O2LT_PR, 5);
}
END_TEST

/* 10. A clean leave releases everything at once, no failure. */
START_TEST(test_clean_leave)
{
	JOIN(0, 1, 2);
	req_lock(2, "a", O2LT_EX, 0, 1);
	req_lock(0, "a", O2LT_PR, 0, 2);
	req_lock(2, "b", O2LT_PR, 0, 3);
	req_lock(1, "c", O2LT_PR, 0, 4);
	req_lock(2, "c", O2LT_EX, 0, 5);
	req_lock(0, "c", O2LT_PR, 0, 6); /* behind 2's EX */
	req_lock(2, "d", O2LT_NL, 0, 7);
	NO_EV(0, O2LT_EV_GRANTED, NULL);

	GONE(2, O2LT_REASON_LEAVE);
	EVERYWHERE(2, O2LT_EV_NODE_FAILED, 0);
	GRANTED(0, "a", O2LT_PR, 2);
	GRANTED(0, "c", O2LT_PR, 6);
	ck_assert(!dump_has_lock(0, "b"));
	ck_assert(!dump_has_lock(0, "d"));
	req_lock(1, "b", O2LT_EX, O2LT_F_NOQUEUE, 8);
	GRANTED(1, "b", O2LT_EX, 8);

	/* nothing to fence or recover */
	req_fenced(0, nodes[2].id.nodeid, 9);
	EVERYWHERE(2, O2LT_EV_NODE_FENCED, 0);
	req_recovered(0, nodes[2].id.nodeid, 10);
	REFUSED(0, NULL, 10, -ENOENT);
}
END_TEST

/*
 * 11. A joiner gets its state from the oldest synced member, keeps the
 * traffic around the snapshot, and ends like the others.
 */
START_TEST(test_join_snapshot)
{
	uint8_t l1[O2LT_LVB_LEN], l2[O2LT_LVB_LEN];
	const struct rec *r;
	lvb_fill(l1, 0x31);
	lvb_fill(l2, 0x32);
	JOIN(0, 1);
	req_lock(0, "a", O2LT_EX, 0, 1);
	req_down(0, "a", O2LT_NL, l1, 2);
	req_lock(0, "a", O2LT_EX, 0, 3);
	req_lock(1, "a", O2LT_PR, 0, 4); /* waits */
	req_lock(1, "b", O2LT_PR, 0, 5);
	req_lock(0, "c", O2LT_NL, 0, 6);

	hold = true;
	JOIN(2);
	ck_assert_uint_eq(count_on(0, 2, O2LT_EV_SEND_SNAPSHOT, NULL), 1);
	ck_assert_uint_eq(count_on(1, 2, O2LT_EV_SEND_SNAPSHOT, NULL), 0);
	ck_assert_uint_eq(g_queue_get_length(&outbox), 1);
	ck_assert(!o2lt_synced(nodes[2].t));
	ck_assert_uint_eq(nodes[2].recent->len, 0);

	/* traffic before the snapshot: the joiner keeps it and says nothing;
	 * what it asks before it is synced is refused everywhere */
	req_lock(2, "b", O2LT_EX, 0, 10);
	ck_assert_uint_eq(count_on(0, 2, O2LT_EV_REFUSED, "b"), 1);
	NO_EV(1, O2LT_EV_BLOCKING, "b");
	req_lock(2, "d", O2LT_PR, 0, 11);
	ck_assert_uint_eq(count_on(0, 2, O2LT_EV_REFUSED, "d"), 1);
	ck_assert(!dump_has_lock(0, "d"));
	req_down(0, "a", O2LT_NL, l2, 12);
	GRANTED(1, "a", O2LT_PR, 4);
	ck_assert_uint_eq(nodes[2].all->len, 0);

	deliver_held();
	ck_assert(o2lt_synced(nodes[2].t));
	ck_assert_uint_eq(count_ev(2, O2LT_EV_SYNCED, NULL), 1);
	/* the snapshot was taken at its join: its own table says so too */
	REFUSED(2, "b", 10, -EAGAIN);
	REFUSED(2, "d", 11, -EAGAIN);
	NO_EV(2, O2LT_EV_GRANTED, NULL);
	char *d0 = dump_of(0), *d2 = dump_of(2);
	ck_assert_str_eq(d0, d2);
	g_free(d0);
	g_free(d2);

	/* traffic after */
	hold = false;
	req_lock(2, "b", O2LT_EX, 0, 17);
	BLOCKING(1, "b", O2LT_EX);
	req_down(1, "b", O2LT_UNLOCK, NULL, 13);
	GRANTED(2, "b", O2LT_EX, 17);
	req_lock(2, "a", O2LT_PR, 0, 14);
	r = GRANTED(2, "a", O2LT_PR, 14);
	ck_assert(r->lvb_valid);
	ck_assert_mem_eq(r->lvb, l2, O2LT_LVB_LEN);
	req_lock(0, "b", O2LT_PR, 0, 15);
	BLOCKING(2, "b", O2LT_PR);
	req_down(2, "b", O2LT_UNLOCK, NULL, 16);
	GRANTED(0, "b", O2LT_PR, 15);

	/* the joiner is a full member: it can send the next one its state */
	GONE(0, O2LT_REASON_LEAVE);
	GONE(1, O2LT_REASON_LEAVE);
	JOIN(3);
	ck_assert_uint_eq(count_on(2, 3, O2LT_EV_SEND_SNAPSHOT, NULL), 1);
	ck_assert(o2lt_synced(nodes[3].t));
}
END_TEST

/* Two members join in one change; another joins while one still waits. */
START_TEST(test_join_several)
{
	JOIN(0, 1);
	req_lock(0, "a", O2LT_PR, 0, 1);
	req_lock(1, "a", O2LT_EX, 0, 2);

	hold = true;
	JOIN(2, 3);
	ck_assert_uint_eq(count_on(0, 2, O2LT_EV_SEND_SNAPSHOT, NULL), 1);
	ck_assert_uint_eq(count_on(0, 3, O2LT_EV_SEND_SNAPSHOT, NULL), 1);
	req_lock(3, "a", O2LT_NL, 0, 3); /* not synced yet: refused */
	JOIN(4);
	ck_assert_uint_eq(count_on(0, 4, O2LT_EV_SEND_SNAPSHOT, NULL), 1);
	req_lock(2, "b", O2LT_EX, 0, 4);
	req_down(0, "a", O2LT_UNLOCK, NULL, 5);
	deliver_held();
	for (int i = 2; i <= 4; i++)
		ck_assert_msg(o2lt_synced(nodes[i].t), "node %d did not sync", i);
	ck_assert_uint_eq(count_in(nodes[3].all, 3, O2LT_EV_REFUSED, "a"), 1);
	ck_assert_uint_eq(count_in(nodes[2].all, 2, O2LT_EV_REFUSED, "b"), 1);
	ck_assert_uint_eq(count_in(nodes[3].all, 3, O2LT_EV_GRANTED, NULL), 0);
	ck_assert_uint_eq(count_in(nodes[2].all, 2, O2LT_EV_GRANTED, NULL), 0);
	ck_assert(!dump_has_lock(0, "b"));
	hold = false;
	req_lock(4, "a", O2LT_PR, 0, 6);
	NO_EV(4, O2LT_EV_GRANTED, NULL);
	BLOCKING(1, "a", O2LT_PR);
	req_down(1, "a", O2LT_PR, NULL, 7);
	GRANTED(4, "a", O2LT_PR, 6);
}
END_TEST

/* The designated sender dies before sending: the next oldest sends. */
START_TEST(test_join_sender_dies)
{
	JOIN(0, 1, 2);
	req_lock(1, "a", O2LT_PR, 0, 1);
	req_lock(0, "a", O2LT_EX, 0, 2);
	req_lock(0, "c", O2LT_EX, 0, 3);

	hold = true;
	JOIN(3);
	ck_assert_uint_eq(count_on(0, 3, O2LT_EV_SEND_SNAPSHOT, NULL), 1);
	/*
	 * traffic the next sender's snapshot will already contain: the joiner
	 * must skip all of it (applied again, 1 would end up waiting for e)
	 */
	req_lock(2, "f", O2LT_NL, 0, 9);
	req_lock(1, "e", O2LT_EX, 0, 10);
	req_down(1, "e", O2LT_UNLOCK, NULL, 11);
	req_lock(2, "e", O2LT_EX, 0, 12);
	GONE(0, O2LT_REASON_NODEDOWN); /* its snapshot never went out */
	ck_assert_uint_eq(count_on(1, 3, O2LT_EV_SEND_SNAPSHOT, NULL), 1);
	ck_assert_uint_eq(count_on(2, 3, O2LT_EV_SEND_SNAPSHOT, NULL), 0);
	ck_assert_uint_eq(g_queue_get_length(&outbox), 1);
	ck_assert(!o2lt_synced(nodes[3].t));

	deliver_held();
	ck_assert(o2lt_synced(nodes[3].t));
	/* it learns of the death from the snapshot: it has to take part */
	ck_assert_uint_eq(count_on(3, 0, O2LT_EV_NODE_FAILED, NULL), 1);
	req_lock(3, "b", O2LT_EX, 0, 20);
	GRANTED(3, "b", O2LT_EX, 20);
	req_lock(3, "c", O2LT_PR, 0, 21); /* behind the dead member's EX */
	NO_EV(3, O2LT_EV_GRANTED, "c");

	hold = false;
	req_fenced(1, nodes[0].id.nodeid, 22);
	EVERYWHERE(0, O2LT_EV_NODE_FENCED, 1);
	req_recovered(3, nodes[0].id.nodeid, 23);
	EVERYWHERE(0, O2LT_EV_NODE_RECOVERED, 1);
	GRANTED(3, "c", O2LT_PR, 21);
}
END_TEST

/*
 * The joiner's own requests between its join and the point a re-designated
 * sender took its snapshot: the answers fall in the part of the stream the
 * snapshot covers, where its table never sees them.  So they are refused
 * on every table and it holds nothing it could not hear of; after SYNCED
 * it asks again and is answered as usual.
 */
START_TEST(test_join_sender_dies_early_requests)
{
	JOIN(0, 1, 2);
	req_lock(1, "busy", O2LT_EX, 0, 1);

	hold = true;
	JOIN(3);
	req_lock(3, "free", O2LT_PR, 0, 30);
	ck_assert_uint_eq(count_on(1, 3, O2LT_EV_REFUSED, "free"), 1);
	ck_assert_uint_eq(count_on(1, 3, O2LT_EV_GRANTED, "free"), 0);
	req_lock(2, "free", O2LT_EX, 0, 31); /* nobody in its way */
	ck_assert_uint_eq(count_on(1, 2, O2LT_EV_GRANTED, "free"), 1);
	ck_assert_uint_eq(count_on(1, 3, O2LT_EV_BLOCKING, "free"), 0);
	req_lock(3, "busy", O2LT_PR, 0, 32);
	ck_assert_uint_eq(count_on(1, 3, O2LT_EV_REFUSED, "busy"), 1);
	GONE(0, O2LT_REASON_NODEDOWN);
	deliver_held();
	ck_assert(o2lt_synced(nodes[3].t));
	/* nothing held, nothing waiting: nothing it missed can matter */
	ck_assert_uint_eq(count_in(nodes[3].all, 3, O2LT_EV_GRANTED, NULL), 0);
	char *d1 = dump_of(1), *d3 = dump_of(3);
	ck_assert_str_eq(d1, d3);
	g_free(d1);
	g_free(d3);

	hold = false;
	req_lock(3, "busy", O2LT_PR, 0, 33);
	NO_EV(3, O2LT_EV_GRANTED, "busy");
	req_down(1, "busy", O2LT_UNLOCK, NULL, 34);
	GRANTED(3, "busy", O2LT_PR, 33);
	req_lock(3, "free", O2LT_PR, 0, 35);
	BLOCKING(2, "free", O2LT_PR);
}
END_TEST

/* Every member that could send the state leaves first: SYNC_FAILED. */
START_TEST(test_join_no_source)
{
	JOIN(0, 1);
	req_lock(0, "a", O2LT_EX, 0, 1);
	hold = true;
	JOIN(2);
	GONE(0, O2LT_REASON_NODEDOWN);
	ck_assert_uint_eq(count_on(1, 2, O2LT_EV_SEND_SNAPSHOT, NULL), 1);
	NO_EV(2, O2LT_EV_SYNC_FAILED, NULL);
	GONE(1, O2LT_REASON_LEAVE);
	ck_assert_uint_eq(count_ev(2, O2LT_EV_SYNC_FAILED, NULL), 1);
	ck_assert(!o2lt_synced(nodes[2].t));
	ck_assert_uint_eq(nodes[2].all->len, 1);
}
END_TEST

START_TEST(test_join_no_source_at_once)
{
	JOIN(0, 1, 2);
	hold = true;
	JOIN(3);
	change(NULL, 0,
	       (const struct gone[]){ { 0, O2LT_REASON_PROCDOWN }, { 1, O2LT_REASON_LEAVE },
				      { 2, O2LT_REASON_NODEDOWN } },
	       3);
	ck_assert_uint_eq(count_ev(3, O2LT_EV_SYNC_FAILED, NULL), 1);
	ck_assert(!o2lt_synced(nodes[3].t));
	/* a failed table takes further input quietly */
	req_lock(3, "a", O2LT_EX, 0, 1);
	ck_assert_uint_eq(nodes[3].recent->len, 0);
}
END_TEST

/* Hostile messages delivered while a joiner waits do not break its sync. */
START_TEST(test_join_with_garbage)
{
	uint8_t buf[512];
	size_t n;
	JOIN(0, 1);
	req_lock(0, "a", O2LT_PR, 0, 1);
	hold = true;
	JOIN(2);

	/* bad bodies behind good headers: the joiner can only keep them */
	n = forge_named(buf, W_LOCK, 0, 2, 3, 1, "a", 1, NULL);
	action_begin();
	deliver_input(nodes[1].id, buf, n);
	ck_assert_int_eq(nodes[0].rc, -EBADMSG);
	ck_assert_int_eq(nodes[1].rc, -EBADMSG);
	n = forge_named(buf, 9, 0, 3, 0, 1, "a", 1, NULL);
	deliver_input(nodes[1].id, buf, n);
	ck_assert_int_eq(nodes[0].rc, -EBADMSG);
	/* from a non-member */
	n = (size_t)o2lt_msg_lock(buf, sizeof(buf), 4, "a", 1, O2LT_EX, 0);
	deliver_input((struct o2lt_member){ 99, 99 }, buf, n);
	ck_assert_int_eq(nodes[0].rc, -EPERM);
	/* bad headers */
	buf[0] ^= 0xff;
	deliver_input(nodes[1].id, buf, n);
	expect_rc_all(__LINE__, -EBADMSG);
	deliver_input(nodes[1].id, buf, 10);
	expect_rc_all(__LINE__, -EBADMSG);

	req_lock(1, "a", O2LT_EX, 0, 5);
	deliver_held();
	ck_assert(o2lt_synced(nodes[2].t));
	hold = false;
	req_down(0, "a", O2LT_UNLOCK, NULL, 6);
	GRANTED(1, "a", O2LT_EX, 5);
}
END_TEST

/* 12a. Malformed messages. */
START_TEST(test_hostile_messages)
{
	uint8_t b[512], good[512], gnode[64], lvb[O2LT_LVB_LEN] = { 0 };
	char longname[O2LT_NAME_MAX + 2];
	size_t n;
	memset(longname, 'L', sizeof(longname));

	JOIN(0, 1, 2);
	req_lock(0, "a", O2LT_EX, 0, 1);
	req_lock(1, "a", O2LT_PR, 0, 2);
	req_lock(2, "b", O2LT_PR, 0, 3);
	GONE(2, O2LT_REASON_NODEDOWN);
	JOIN(3);

	const size_t glen = (size_t)o2lt_msg_lock(good, sizeof(good), 10, "a", 1, O2LT_PR, 0);

	/* truncated, empty, too long for the length field */
	BADMSG(NULL, 0);
	BADMSG(good, 1);
	BADMSG(good, W_HDR - 1);
	BADMSG(good, glen - 1);
	memcpy(b, good, glen);
	set_len(b, glen - 1);
	BADMSG(b, glen - 1); /* the body is one byte short of its name */
	memcpy(b, good, glen);
	b[glen] = 'x';
	set_len(b, glen + 1);
	BADMSG(b, glen + 1); /* one byte too many */
	/* the length field disagrees with the length */
	for (int d = -1; d <= 1; d += 2) {
		memcpy(b, good, glen);
		set_len(b, glen + (size_t)d);
		BADMSG(b, glen);
	}
	memcpy(b, good, glen);
	set_len(b, 0);
	BADMSG(b, glen);
	/* magic, version */
	for (int i = 0; i < 4; i++) {
		memcpy(b, good, glen);
		b[i] ^= 0x20;
		BADMSG(b, glen);
	}
	memcpy(b, good, glen);
	b[W_VERSION] = 2;
	BADMSG(b, glen);
	memcpy(b, good, glen);
	b[W_VERSION] = 0;
	BADMSG(b, glen);
	/* unknown types */
	const unsigned types[] = { 0, 7, 8, 0x80, 0xff };
	for (size_t i = 0; i < G_N_ELEMENTS(types); i++) {
		memcpy(b, good, glen);
		b[W_TYPE] = (uint8_t)types[i];
		BADMSG(b, glen);
	}
	/* reserved header bytes */
	for (int i = W_RESERVED; i < W_RESERVED + 4; i++) {
		memcpy(b, good, glen);
		b[i] = 1;
		BADMSG(b, glen);
	}
	/* name lengths 0 and beyond the maximum */
	n = forge_named(b, W_LOCK, 0, 11, O2LT_PR, 0, "", 0, NULL);
	BADMSG(b, n);
	n = forge_named(b, W_LOCK, 0, 11, O2LT_PR, O2LT_NAME_MAX + 1, longname, O2LT_NAME_MAX + 1, NULL);
	BADMSG(b, n);
	n = forge_named(b, W_DOWN, 0, 11, O2LT_NL, 0, "", 0, NULL);
	BADMSG(b, n);
	n = forge_named(b, W_CANCEL, 0, 11, 0, O2LT_NAME_MAX + 1, longname, O2LT_NAME_MAX + 1, NULL);
	BADMSG(b, n);
	/* a name length byte that disagrees with the body */
	n = forge_named(b, W_LOCK, 0, 11, O2LT_PR, 2, "a", 1, NULL);
	BADMSG(b, n);
	/* modes out of range */
	const unsigned lock_modes[] = { 3, 4, 0x7f, 0xfe, O2LT_UNLOCK };
	for (size_t i = 0; i < G_N_ELEMENTS(lock_modes); i++) {
		n = forge_named(b, W_LOCK, 0, 12, lock_modes[i], 1, "a", 1, NULL);
		BADMSG(b, n);
	}
	const unsigned down_modes[] = { O2LT_EX, 3, 0xfe };
	for (size_t i = 0; i < G_N_ELEMENTS(down_modes); i++) {
		n = forge_named(b, W_DOWN, 0, 12, down_modes[i], 1, "a", 1, NULL);
		BADMSG(b, n);
	}
	n = forge_named(b, W_CANCEL, 0, 12, 1, 1, "a", 1, NULL);
	BADMSG(b, n);
	/* unknown flags */
	const unsigned lock_flags[] = { 0x10, 0x20, 0x100, 0x8000 };
	for (size_t i = 0; i < G_N_ELEMENTS(lock_flags); i++) {
		n = forge_named(b, W_LOCK, lock_flags[i], 13, O2LT_PR, 1, "a", 1, NULL);
		BADMSG(b, n);
	}
	n = forge_named(b, W_DOWN, 0x2, 13, O2LT_NL, 1, "a", 1, NULL);
	BADMSG(b, n);
	n = forge_named(b, W_CANCEL, 0x1, 13, 0, 1, "a", 1, NULL);
	BADMSG(b, n);
	/* DOWN: value block flag and value block disagree */
	n = forge_named(b, W_DOWN, 0x1, 14, O2LT_NL, 1, "a", 1, NULL);
	BADMSG(b, n);
	n = forge_named(b, W_DOWN, 0, 14, O2LT_NL, 1, "a", 1, lvb);
	BADMSG(b, n);
	/* reserved body bytes */
	for (int i = 2; i < 4; i++) {
		memcpy(b, good, glen);
		b[W_HDR + i] = 1;
		BADMSG(b, glen);
	}
	/* FENCED / RECOVERED: flags, reserved bytes, body sizes */
	const unsigned node_types[] = { W_FENCED, W_RECOVERED };
	for (size_t k = 0; k < G_N_ELEMENTS(node_types); k++) {
		n = (size_t)(node_types[k] == W_FENCED ? o2lt_msg_fenced(b, sizeof(b), 15, 3)
						       : o2lt_msg_recovered(b, sizeof(b), 15, 3));
		memcpy(gnode, b, n);
		b[W_FLAGS] = 1;
		BADMSG(b, n);
		for (int i = 4; i < 8; i++) {
			memcpy(b, gnode, n);
			b[W_HDR + i] = 1;
			BADMSG(b, n);
		}
		memcpy(b, gnode, n);
		set_len(b, W_HDR + 4);
		BADMSG(b, W_HDR + 4);
		memcpy(b, gnode, n);
		memset(b + n, 0, 4);
		set_len(b, n + 4);
		BADMSG(b, n + 4);
	}
	/* SNAPSHOT: too short to name its target, or with a flag other than
	   deflated (1) */
	forge_header(b, W_SNAPSHOT, 0, W_HDR + 8, 0);
	memset(b + W_HDR, 0, 8);
	BADMSG(b, W_HDR + 8);
	forge_header(b, W_SNAPSHOT, 2, W_HDR + 16, 0);
	memset(b + W_HDR, 0, 16);
	BADMSG(b, W_HDR + 16);
	forge_header(b, W_SNAPSHOT, 3, W_HDR + 16, 0);
	BADMSG(b, W_HDR + 16);
	/* longer than any message may be */
	{
		uint8_t *huge = g_malloc0(O2LT_MSG_MAX + 1);
		memcpy(huge, good, glen);
		set_len(huge, O2LT_MSG_MAX + 1);
		BADMSG(huge, O2LT_MSG_MAX + 1);
		g_free(huge);
	}
	/* senders that are not live members: ignored, -EPERM */
	expect_rejected(__LINE__, -EPERM, (struct o2lt_member){ 99, 99 }, good, glen);
	expect_rejected(__LINE__, -EPERM, (struct o2lt_member){ nodes[0].id.nodeid, 4242 }, good, glen);
	expect_rejected(__LINE__, -EPERM, nodes[2].id, good, glen); /* dead */

	/* after all that, the group still works */
	req_lock(3, "a", O2LT_PR, 0, 16);
	NO_EV(3, O2LT_EV_GRANTED, NULL);
	req_down(0, "a", O2LT_PR, NULL, 17);
	GRANTED(3, "a", O2LT_PR, 16);
}
END_TEST

/* 12b. Self-contradicting membership changes. */
START_TEST(test_hostile_confchg)
{
	JOIN(0, 1, 2);
	req_lock(0, "a", O2LT_EX, 0, 1);
	req_lock(1, "a", O2LT_PR, 0, 2);

	const struct o2lt_member m012[] = { nodes[0].id, nodes[1].id, nodes[2].id };
	const struct o2lt_member m0112[] = { nodes[0].id, nodes[1].id, nodes[1].id, nodes[2].id };
	const struct o2lt_member m0123[] = { nodes[0].id, nodes[1].id, nodes[2].id, nodes[3].id };
	const struct o2lt_member l3[] = { nodes[3].id };
	const struct o2lt_member l33[] = { nodes[3].id, nodes[3].id };
	const struct o2lt_member l2[] = { nodes[2].id };
	const uint32_t r_leave[] = { O2LT_REASON_LEAVE, O2LT_REASON_LEAVE };
	const uint32_t r_zero[] = { 0 }, r_six[] = { 6 }, r_big[] = { 0x80000003u };

	expect_bad_confchg(__LINE__, NULL);
	/* an empty group: without the table's own member */
	BADCHG(.members = NULL, .n_members = 0);
	/* a member both left and present */
	BADCHG(.members = m012, .n_members = 3, .left = l2, .left_reasons = r_leave, .n_left = 1);
	/* a member listed twice */
	BADCHG(.members = m0112, .n_members = 4);
	/* joined, but not listed */
	BADCHG(.members = m012, .n_members = 3, .joined = l3, .n_joined = 1);
	/* joined twice */
	BADCHG(.members = m0123, .n_members = 4, .joined = l33, .n_joined = 2);
	/* left twice */
	BADCHG(.members = m012, .n_members = 3, .left = l33, .left_reasons = r_leave, .n_left = 2);
	/* reasons corosync does not give */
	BADCHG(.members = m012, .n_members = 3, .left = l3, .left_reasons = r_zero, .n_left = 1);
	BADCHG(.members = m012, .n_members = 3, .left = l3, .left_reasons = r_six, .n_left = 1);
	BADCHG(.members = m012, .n_members = 3, .left = l3, .left_reasons = r_big, .n_left = 1);
	/* counts without arrays */
	BADCHG(.members = NULL, .n_members = 2);
	BADCHG(.members = m012, .n_members = 3, .left = l3, .left_reasons = NULL, .n_left = 1);
	BADCHG(.members = m0123, .n_members = 4, .joined = NULL, .n_joined = 1);

	/* a synced table is never told of a group without itself */
	{
		struct dumps s;
		dumps_take(&s);
		const struct o2lt_member m01[] = { nodes[0].id, nodes[1].id };
		const struct o2lt_confchg c = { .members = m01, .n_members = 2, .left = l2,
						.left_reasons = r_leave, .n_left = 1 };
		ck_assert_int_eq(o2lt_confchg(nodes[2].t, &c), -EINVAL);
		dumps_same(__LINE__, &s);
	}

	/* after all that, the group still works */
	GONE(1, O2LT_REASON_LEAVE);
	req_lock(2, "a", O2LT_PR, 0, 3);
	NO_EV(2, O2LT_EV_GRANTED, NULL);
	NO_EV(0, O2LT_EV_BLOCKING, NULL); /* told PR already, for 1's request */
	req_down(0, "a", O2LT_UNLOCK, NULL, 4);
	GRANTED(2, "a", O2LT_PR, 3);
}
END_TEST

/* A table before its first change: only its own join is taken. */
START_TEST(test_new_table)
{
	unsigned n_events = 0;
	const struct o2lt_member me = { 5, 500 }, other = { 6, 600 };
	struct o2lt_table *t = o2lt_new(me, count_event, &n_events);
	uint8_t buf[O2LT_MSG_SMALL];
	char why[128];
	void *msg = NULL;
	size_t len = 0;

	ck_assert_ptr_nonnull(t);
	ck_assert(!o2lt_synced(t));
	ck_assert_int_eq(o2lt_check(t, why, sizeof(why)), 0);
	ssize_t n = o2lt_msg_lock(buf, sizeof(buf), 1, "a", 1, O2LT_EX, 0);
	ck_assert_int_eq(o2lt_deliver(t, me, buf, (size_t)n), -EBADMSG);
	ck_assert_int_eq(o2lt_snapshot(t, other, &msg, &len), -EAGAIN);
	ck_assert_ptr_null(msg);

	/* a first change in which it does not join */
	const struct o2lt_member both[] = { me, other }, others[] = { other };
	const struct o2lt_confchg c1 = { .members = both, .n_members = 2, .joined = others, .n_joined = 1 };
	ck_assert_int_eq(o2lt_confchg(t, &c1), -EINVAL);
	ck_assert(!o2lt_synced(t));
	ck_assert_uint_eq(n_events, 0);

	/* its own join, with a member already there: it waits for a snapshot */
	const struct o2lt_member mine[] = { me };
	const struct o2lt_confchg c2 = { .members = both, .n_members = 2, .joined = mine, .n_joined = 1 };
	ck_assert_int_eq(o2lt_confchg(t, &c2), 0);
	ck_assert(!o2lt_synced(t));
	ck_assert_int_eq(o2lt_snapshot(t, other, &msg, &len), -EAGAIN);
	ck_assert_int_eq(o2lt_deliver(t, other, buf, (size_t)n), 0);
	ck_assert_uint_eq(n_events, 0);
	ck_assert_int_eq(o2lt_check(t, why, sizeof(why)), 0);
	o2lt_free(t);
	o2lt_free(NULL);
}
END_TEST

/* o2lt_snapshot is for members waiting for one, from synced tables only. */
START_TEST(test_snapshot_misuse)
{
	void *msg = NULL;
	size_t len = 0;
	JOIN(0, 1);
	ck_assert_int_eq(o2lt_snapshot(nodes[0].t, nodes[1].id, &msg, &len), -ENOENT);
	ck_assert_int_eq(o2lt_snapshot(nodes[0].t, nodes[0].id, &msg, &len), -ENOENT);
	ck_assert_int_eq(o2lt_snapshot(nodes[0].t, (struct o2lt_member){ 9, 9 }, &msg, &len), -ENOENT);
	hold = true;
	JOIN(2);
	ck_assert_int_eq(o2lt_snapshot(nodes[2].t, nodes[0].id, &msg, &len), -EAGAIN);
	ck_assert_ptr_null(msg);
	/* any synced table could make it (only one is asked) */
	ck_assert_int_eq(o2lt_snapshot(nodes[1].t, nodes[2].id, &msg, &len), 0);
	ck_assert_ptr_nonnull(msg);
	ck_assert_uint_gt(len, W_HDR);
	g_free(msg);
}
END_TEST

/*
 * The snapshot for node 2 of a table of three members whose first lock,
 * "s", has two PR holders (and nres locks in all): where the two entries
 * are.  Asserts first that the layout is the one these tests know.
 */
static struct outmsg *snapshot_two_holders(size_t nres, uint8_t **e0, uint8_t **e1)
{
	struct outmsg *m = take_snapshot_for(2);
	uint8_t *body = (uint8_t *)m->msg + W_HDR;
	const size_t nm = get_le(body + S_NM, 4), nr = get_le(body + S_NM + 4, 4);
	uint8_t *res = body + S_HEAD + nm * S_MEMBER;
	*e0 = res + 4 + 1 + O2LT_LVB_LEN;
	*e1 = *e0 + S_ENTRY;
	ck_assert_msg(nm == 3 && nr == nres && res[0] == 1 && res[4] == 's' &&
			      get_le(res + 2, 2) == 2 && (*e0)[16] == O2LT_PR && (*e1)[16] == O2LT_PR &&
			      (nres > 1 || *e1 + S_ENTRY == (uint8_t *)m->msg + m->len),
		      "the snapshot layout is not the one this test knows");
	return m;
}

/*
 * 12c. Malformed snapshots for a joiner: -EPROTO and SYNC_FAILED for it,
 * no harm to anyone; a new process of that node can join again.
 */
START_TEST(test_bad_snapshot_conflict)
{
	JOIN(0, 1);
	req_lock(0, "s", O2LT_PR, 0, 1);
	req_lock(1, "s", O2LT_PR, 0, 2);
	hold = true;
	JOIN(2);
	uint8_t *e0, *e1;
	struct outmsg *m = snapshot_two_holders(1, &e0, &e1);

	/* two holders, one now EX: they conflict */
	uint8_t *bad = g_memdup2(m->msg, m->len);
	bad[e0 + 16 - (uint8_t *)m->msg] = O2LT_EX;
	deliver_bad_snapshot(__LINE__, m->sender, bad, m->len, 2);
	g_free(bad);
	/* the others go on */
	hold = false;
	req_lock(0, "s", O2LT_EX, 0, 3);
	BLOCKING(1, "s", O2LT_EX);

	/* the node's new process joins and syncs */
	GONE(2, O2LT_REASON_LEAVE);
	nodes[3].id = (struct o2lt_member){ nodes[2].id.nodeid, nodes[2].id.pid + 1 };
	JOIN(3);
	ck_assert(o2lt_synced(nodes[3].t));
	outmsg_free(m);
}
END_TEST

START_TEST(test_bad_snapshot_variants)
{
	JOIN(0, 1);
	req_lock(0, "s", O2LT_PR, 0, 1);
	req_lock(1, "s", O2LT_PR, 0, 2);
	req_lock(1, "t", O2LT_EX, 0, 3);
	hold = true;
	JOIN(2);
	uint8_t *e0, *e1;
	struct outmsg *m = snapshot_two_holders(2, &e0, &e1);

	/* one member's entry twice */
	uint8_t *bad = g_memdup2(m->msg, m->len);
	memcpy(bad + (e1 - (uint8_t *)m->msg), e0, 8);
	deliver_bad_snapshot(__LINE__, m->sender, bad, m->len, 2);
	g_free(bad);
	outmsg_free(m);
}
END_TEST

/* Truncations and bit flips of a real snapshot, each given to a fresh joiner. */
START_TEST(test_bad_snapshot_fuzz)
{
	uint8_t l1[O2LT_LVB_LEN];
	lvb_fill(l1, 0x55);
	JOIN(0, 1, 3);
	/* a state with some of everything: holders, queues, an lvb, a fenced member */
	req_lock(0, "s", O2LT_PR, 0, 1);
	req_lock(1, "s", O2LT_PR, 0, 2);
	req_lock(1, "s", O2LT_EX, 0, 3);
	req_lock(3, "t", O2LT_EX, 0, 4);
	req_down(3, "t", O2LT_NL, l1, 5);
	req_lock(3, "t", O2LT_EX, 0, 6);
	req_lock(0, "t", O2LT_PR, 0, 7);
	req_lock(3, "u", O2LT_PR, 0, 8);
	GONE(3, O2LT_REASON_NODEDOWN);
	req_fenced(0, nodes[3].id.nodeid, 9);
	req_lock(1, "t", O2LT_EX, O2LT_F_RECOVERY, 10);
	hold = true;
	JOIN(2);
	struct outmsg *m = take_snapshot_for(2);
	const struct o2lt_member joined[] = { nodes[2].id };
	const struct o2lt_confchg join = { .members = group, .n_members = n_group,
					   .joined = joined, .n_joined = 1 };

	/* the real one works on a fresh joiner */
	ck_assert_int_eq(try_snapshot(&join, nodes[2].id, m->sender, m->msg, m->len), 0);

	uint8_t *b = g_malloc(m->len);
	/* every truncation that still names its target */
	for (size_t len = W_HDR + 16; len < m->len; len++) {
		memcpy(b, m->msg, len);
		set_len(b, len);
		ck_assert_msg(try_snapshot(&join, nodes[2].id, m->sender, b, len) == -EPROTO,
			      "a snapshot cut to %zu of %zu bytes was taken", len, m->len);
	}
	/* the cut beyond what the joiner has */
	memcpy(b, m->msg, m->len);
	b[W_HDR + 8] = 1;
	ck_assert_int_eq(try_snapshot(&join, nodes[2].id, m->sender, b, m->len), -EPROTO);
	/* flips anywhere in the body: taken or refused, never a broken table */
	const uint8_t masks[] = { 0x01, 0x02, 0x80, 0xff };
	for (size_t i = W_HDR; i < m->len; i++) {
		for (size_t k = 0; k < G_N_ELEMENTS(masks); k++) {
			memcpy(b, m->msg, m->len);
			b[i] ^= masks[k];
			try_snapshot(&join, nodes[2].id, m->sender, b, m->len);
		}
	}
	g_free(b);

	/* and the real one, delivered to everyone, syncs the real joiner */
	g_queue_push_head(&outbox, m);
	deliver_held();
	ck_assert(o2lt_synced(nodes[2].t));
	ck_assert_uint_eq(count_on(2, 3, O2LT_EV_NODE_FAILED, NULL), 1);
	ck_assert_uint_eq(count_on(2, 3, O2LT_EV_NODE_FENCED, NULL), 1);
	hold = false;
	req_recovered(2, nodes[3].id.nodeid, 11);
	EVERYWHERE(3, O2LT_EV_NODE_RECOVERED, 1);
}
END_TEST

/*
 * 12e. A state large enough travels deflated (flag 1): it syncs a joiner
 * like a plain one; damaged, truncated, or naming a length it does not
 * inflate to, it fails the joiner's sync (never a broken table).
 */
START_TEST(test_bad_deflated_snapshot)
{
	JOIN(0, 1);
	uint64_t id = 1;
	for (int k = 0; k < 40; k++) {
		char name[32];
		snprintf(name, sizeof(name), "M%030d", k);
		req_lock(k % 2, name, k % 3 ? O2LT_PR : O2LT_EX, 0, id++);
	}
	hold = true;
	JOIN(2);
	struct outmsg *m = take_snapshot_for(2);
	const uint8_t *mb = m->msg;
	ck_assert_uint_eq(get_le(mb + 6, 2), 1); /* deflated */
	ck_assert_uint_lt(m->len, 40 * (4 + 31 + O2LT_LVB_LEN + S_ENTRY) / 4);
	const struct o2lt_member joined[] = { nodes[2].id };
	const struct o2lt_confchg join = { .members = group, .n_members = n_group,
					   .joined = joined, .n_joined = 1 };
	ck_assert_int_eq(try_snapshot(&join, nodes[2].id, m->sender, m->msg, m->len), 0);

	uint8_t *b = g_malloc(m->len + 16);
	for (size_t len = W_HDR + 16; len < m->len; len++) {
		memcpy(b, m->msg, len);
		set_len(b, len);
		ck_assert_msg(try_snapshot(&join, nodes[2].id, m->sender, b, len) == -EPROTO,
			      "a deflated snapshot cut to %zu of %zu bytes was taken", len, m->len);
	}
	/* garbage after the stream */
	memcpy(b, m->msg, m->len);
	memset(b + m->len, 0, 16);
	set_len(b, m->len + 16);
	ck_assert_int_eq(try_snapshot(&join, nodes[2].id, m->sender, b, m->len + 16), -EPROTO);
	/* the state's length: one more, one less, none, a bomb; the pad set */
	const size_t at = W_HDR + 16;
	const uint32_t raw = (uint32_t)get_le(mb + at, 4);
	const uint32_t lens[] = { raw + 1, raw - 1, 0, 0xffffffffu, (uint32_t)m->len * 2000 };
	for (size_t i = 0; i < G_N_ELEMENTS(lens); i++) {
		memcpy(b, m->msg, m->len);
		put_le(b + at, lens[i], 4);
		ck_assert_int_eq(try_snapshot(&join, nodes[2].id, m->sender, b, m->len), -EPROTO);
	}
	memcpy(b, m->msg, m->len);
	b[at + 5] = 1;
	ck_assert_int_eq(try_snapshot(&join, nodes[2].id, m->sender, b, m->len), -EPROTO);
	/* the plain flag on deflated data, and flips anywhere */
	memcpy(b, m->msg, m->len);
	b[6] = 0;
	ck_assert_int_eq(try_snapshot(&join, nodes[2].id, m->sender, b, m->len), -EPROTO);
	for (size_t i = W_HDR; i < m->len; i++) {
		memcpy(b, m->msg, m->len);
		b[i] ^= 0x10;
		try_snapshot(&join, nodes[2].id, m->sender, b, m->len);
	}
	g_free(b);

	g_queue_push_head(&outbox, m);
	deliver_held();
	ck_assert(o2lt_synced(nodes[2].t));
	char *d0 = dump_of(0), *d2 = dump_of(2);
	ck_assert_str_eq(d0, d2);
	g_free(d0);
	g_free(d2);
	hold = false;
}
END_TEST

/*
 * 12f. Joining a big group: three members hold 50,000 locks each (a
 * hundred thousand inodes cached, and then some); a fourth joins and
 * gets its state in one snapshot, quickly.  Driven without the recording
 * harness (its per-event records would dominate).
 */
struct big {
	struct o2lt_table *t;
	struct o2lt_member id;
	bool synced;
	void *snap;
	size_t snaplen;
	uint64_t granted;
};

static void big_event(const struct o2lt_event *ev, void *data)
{
	struct big *b = data;
	if (ev->type == O2LT_EV_SYNCED)
		b->synced = true;
	else if (ev->type == O2LT_EV_GRANTED && ev->member.pid == b->id.pid)
		b->granted++;
	else if (ev->type == O2LT_EV_SEND_SNAPSHOT)
		ck_assert_int_eq(o2lt_snapshot(b->t, ev->member, &b->snap, &b->snaplen), 0);
}

START_TEST(test_big_join)
{
	enum { M = 4, PER = 50000 };
	struct big g[M];
	struct o2lt_member ids[M];
	for (int i = 0; i < M; i++) {
		ids[i] = (struct o2lt_member){ (uint32_t)i + 1, 1000 + (uint32_t)i };
		g[i] = (struct big){ .id = ids[i] };
		g[i].t = o2lt_new(ids[i], big_event, &g[i]);
	}
	struct o2lt_confchg c = { .members = ids, .n_members = 3, .joined = ids, .n_joined = 3 };
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(o2lt_confchg(g[i].t, &c), 0);
	/* each member its own inode locks, PR or EX, some with a value block */
	uint8_t buf[O2LT_MSG_SMALL], lvb[O2LT_LVB_LEN];
	for (int i = 0; i < 3; i++) {
		for (uint64_t k = 0; k < PER; k++) {
			char name[32];
			snprintf(name, sizeof(name), "M000000%016" PRIx64 "%08x", 1000 + k * 3 + (uint64_t)i, 7u);
			ssize_t n = o2lt_msg_lock(buf, sizeof(buf), k + 1, name, 31, k % 4 ? O2LT_PR : O2LT_EX, 0);
			for (int j = 0; j < 3; j++)
				ck_assert_int_eq(o2lt_deliver(g[j].t, ids[i], buf, (size_t)n), 0);
			if (k % 16 == 0 && k % 4 == 0) { /* EX to NL with a value block */
				memset(lvb, 0, sizeof(lvb));
				memcpy(lvb, &k, sizeof(k));
				n = o2lt_msg_down(buf, sizeof(buf), PER + k + 1, name, 31, O2LT_NL, lvb);
				for (int j = 0; j < 3; j++)
					ck_assert_int_eq(o2lt_deliver(g[j].t, ids[i], buf, (size_t)n), 0);
			}
		}
	}
	for (int i = 0; i < 3; i++)
		ck_assert_uint_eq(g[i].granted, PER);
	/* the fourth joins */
	struct o2lt_confchg j = { .members = ids, .n_members = 4, .joined = &ids[3], .n_joined = 1 };
	gint64 t0 = g_get_monotonic_time();
	ck_assert_int_eq(o2lt_confchg(g[3].t, &j), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(o2lt_confchg(g[i].t, &j), 0);
	gint64 t1 = g_get_monotonic_time();
	ck_assert_ptr_nonnull(g[0].snap); /* the oldest member sends it */
	ck_assert_uint_le(g[0].snaplen, O2LT_MSG_MAX);
	/* a request in between: the snapshot does not contain it */
	ssize_t n = o2lt_msg_lock(buf, sizeof(buf), 9999999, "late", 4, O2LT_PR, 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(o2lt_deliver(g[i].t, ids[1], buf, (size_t)n), 0);
	gint64 t2 = g_get_monotonic_time();
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(o2lt_deliver(g[i].t, ids[0], g[0].snap, g[0].snaplen), 0);
	gint64 t3 = g_get_monotonic_time();
	ck_assert(g[3].synced);
	char *d0 = o2lt_dump(g[0].t), *d3 = o2lt_dump(g[3].t);
	ck_assert(strcmp(d0, d3) == 0);
	ck_assert_ptr_nonnull(strstr(d3, "lock 6c617465")); /* "late", applied after */
	g_free(d0);
	g_free(d3);
	fprintf(stderr, "big join: %d locks, snapshot %zu bytes (deflated), taken in %.3f s "
		"(with the join), applied in %.3f s\n", 3 * PER, g[0].snaplen,
		(double)(t1 - t0) / 1e6, (double)(t3 - t2) / 1e6);
	ck_assert_int_lt(t3 - t2, 20 * G_USEC_PER_SEC);
	g_free(g[0].snap);
	for (int i = 0; i < M; i++)
		o2lt_free(g[i].t);
}
END_TEST

/* 12d. The encoders: layout, limits, errors. */
START_TEST(test_encoders)
{
	uint8_t b[O2LT_MSG_SMALL + 8], f[O2LT_MSG_SMALL + 8], lvb[O2LT_LVB_LEN];
	char name[O2LT_NAME_MAX + 1];
	ssize_t n;
	size_t fl;
	memset(name, 'n', sizeof(name));
	lvb_fill(lvb, 9);

	/* the forger in this file writes what the encoders write */
	n = o2lt_msg_lock(b, sizeof(b), 0x1122334455667788ull, "abc", 3, O2LT_PR, O2LT_F_NOQUEUE);
	fl = forge_named(f, W_LOCK, O2LT_F_NOQUEUE, 0x1122334455667788ull, O2LT_PR, 3, "abc", 3, NULL);
	ck_assert_int_eq(n, (ssize_t)fl);
	ck_assert_mem_eq(b, f, fl);
	n = o2lt_msg_down(b, sizeof(b), 7, "abc", 3, O2LT_NL, lvb);
	fl = forge_named(f, W_DOWN, 1, 7, O2LT_NL, 3, "abc", 3, lvb);
	ck_assert_int_eq(n, (ssize_t)fl);
	ck_assert_mem_eq(b, f, fl);
	n = o2lt_msg_down(b, sizeof(b), 7, "abc", 3, O2LT_UNLOCK, NULL);
	fl = forge_named(f, W_DOWN, 0, 7, O2LT_UNLOCK, 3, "abc", 3, NULL);
	ck_assert_int_eq(n, (ssize_t)fl);
	ck_assert_mem_eq(b, f, fl);
	n = o2lt_msg_cancel(b, sizeof(b), 8, "abc", 3);
	fl = forge_named(f, W_CANCEL, 0, 8, 0, 3, "abc", 3, NULL);
	ck_assert_int_eq(n, (ssize_t)fl);
	ck_assert_mem_eq(b, f, fl);
	n = o2lt_msg_fenced(b, sizeof(b), 9, 0xa1b2c3d4u);
	forge_header(f, W_FENCED, 0, W_HDR + 8, 9);
	put_le(f + W_HDR, 0xa1b2c3d4u, 4);
	put_le(f + W_HDR + 4, 0, 4);
	ck_assert_int_eq(n, W_HDR + 8);
	ck_assert_mem_eq(b, f, W_HDR + 8);
	n = o2lt_msg_recovered(b, sizeof(b), 9, 0xa1b2c3d4u);
	f[W_TYPE] = W_RECOVERED;
	ck_assert_int_eq(n, W_HDR + 8);
	ck_assert_mem_eq(b, f, W_HDR + 8);

	/* the largest messages fit O2LT_MSG_SMALL */
	ck_assert_int_gt(o2lt_msg_lock(b, O2LT_MSG_SMALL, 1, name, O2LT_NAME_MAX, O2LT_EX,
				       O2LT_F_NOQUEUE | O2LT_F_RECOVERY), 0);
	ck_assert_int_eq(o2lt_msg_down(b, O2LT_MSG_SMALL, 1, name, O2LT_NAME_MAX, O2LT_NL, lvb),
			 O2LT_MSG_SMALL);
	ck_assert_int_gt(o2lt_msg_cancel(b, O2LT_MSG_SMALL, 1, name, O2LT_NAME_MAX), 0);

	/* bad arguments */
	ck_assert_int_eq(o2lt_msg_lock(b, sizeof(b), 1, name, O2LT_NAME_MAX + 1, O2LT_PR, 0), -EINVAL);
	ck_assert_int_eq(o2lt_msg_lock(b, sizeof(b), 1, name, 0, O2LT_PR, 0), -EINVAL);
	ck_assert_int_eq(o2lt_msg_lock(b, sizeof(b), 1, NULL, 1, O2LT_PR, 0), -EINVAL);
	ck_assert_int_eq(o2lt_msg_lock(b, sizeof(b), 1, "a", 1, 3, 0), -EINVAL);
	ck_assert_int_eq(o2lt_msg_lock(b, sizeof(b), 1, "a", 1, -1, 0), -EINVAL);
	ck_assert_int_eq(o2lt_msg_lock(b, sizeof(b), 1, "a", 1, O2LT_UNLOCK, 0), -EINVAL);
	ck_assert_int_eq(o2lt_msg_lock(b, sizeof(b), 1, "a", 1, O2LT_PR, 0x10), -EINVAL);
	ck_assert_int_eq(o2lt_msg_down(b, sizeof(b), 1, name, O2LT_NAME_MAX + 1, O2LT_NL, NULL), -EINVAL);
	ck_assert_int_eq(o2lt_msg_down(b, sizeof(b), 1, "a", 1, O2LT_EX, NULL), -EINVAL);
	ck_assert_int_eq(o2lt_msg_down(b, sizeof(b), 1, "a", 1, 3, NULL), -EINVAL);
	ck_assert_int_eq(o2lt_msg_down(b, sizeof(b), 1, "a", 1, -1, NULL), -EINVAL);
	ck_assert_int_eq(o2lt_msg_cancel(b, sizeof(b), 1, name, O2LT_NAME_MAX + 1), -EINVAL);
	ck_assert_int_eq(o2lt_msg_cancel(b, sizeof(b), 1, name, 0), -EINVAL);

	/* too small a buffer; the exact size is enough */
	n = o2lt_msg_lock(b, sizeof(b), 1, "abc", 3, O2LT_PR, 0);
	ck_assert_int_eq(o2lt_msg_lock(b, (size_t)n - 1, 1, "abc", 3, O2LT_PR, 0), -ENOBUFS);
	ck_assert_int_eq(o2lt_msg_lock(b, (size_t)n, 1, "abc", 3, O2LT_PR, 0), n);
	ck_assert_int_eq(o2lt_msg_lock(b, 0, 1, "abc", 3, O2LT_PR, 0), -ENOBUFS);
	n = o2lt_msg_down(b, sizeof(b), 1, "abc", 3, O2LT_NL, lvb);
	ck_assert_int_eq(o2lt_msg_down(b, (size_t)n - 1, 1, "abc", 3, O2LT_NL, lvb), -ENOBUFS);
	ck_assert_int_eq(o2lt_msg_down(b, (size_t)n, 1, "abc", 3, O2LT_NL, lvb), n);
	n = o2lt_msg_cancel(b, sizeof(b), 1, "abc", 3);
	ck_assert_int_eq(o2lt_msg_cancel(b, (size_t)n - 1, 1, "abc", 3), -ENOBUFS);
	ck_assert_int_eq(o2lt_msg_fenced(b, W_HDR + 7, 1, 2), -ENOBUFS);
	ck_assert_int_eq(o2lt_msg_fenced(b, W_HDR + 8, 1, 2), W_HDR + 8);
	ck_assert_int_eq(o2lt_msg_recovered(b, W_HDR + 7, 1, 2), -ENOBUFS);
	ck_assert_int_eq(o2lt_msg_recovered(b, W_HDR + 8, 1, 2), W_HDR + 8);

	ck_assert_str_eq(o2lt_mode_name(O2LT_NL), "NL");
	ck_assert_str_eq(o2lt_mode_name(O2LT_PR), "PR");
	ck_assert_str_eq(o2lt_mode_name(O2LT_EX), "EX");
	ck_assert_str_eq(o2lt_mode_name(O2LT_UNLOCK), "UNLOCK");
}
END_TEST

/* Names are bytes: the longest, and ones with NULs, are separate locks. */
START_TEST(test_binary_names)
{
	uint8_t buf[O2LT_MSG_SMALL];
	const uint8_t n1[3] = { 'x', 0, 'y' }, n2[3] = { 'x', 0, 'z' };
	uint8_t longest[O2LT_NAME_MAX];
	memset(longest, 0xee, sizeof(longest));
	JOIN(0, 1);

	mcast(0, buf, o2lt_msg_lock(buf, sizeof(buf), 1, n1, 3, O2LT_EX, 0));
	mcast(1, buf, o2lt_msg_lock(buf, sizeof(buf), 2, n2, 3, O2LT_EX, 0));
	ck_assert_uint_eq(nodes[1].recent->len, 1);
	const struct rec *r = &g_array_index(nodes[1].recent, struct rec, 0);
	ck_assert_int_eq(r->type, O2LT_EV_GRANTED);
	ck_assert_uint_eq(r->namelen, 3);
	ck_assert_mem_eq(r->name, n2, 3);
	mcast(1, buf, o2lt_msg_lock(buf, sizeof(buf), 3, longest, O2LT_NAME_MAX, O2LT_EX, 0));
	r = &g_array_index(nodes[1].recent, struct rec, 0);
	ck_assert_int_eq(r->type, O2LT_EV_GRANTED);
	ck_assert_uint_eq(r->namelen, O2LT_NAME_MAX);
	mcast(0, buf, o2lt_msg_lock(buf, sizeof(buf), 4, longest, O2LT_NAME_MAX - 1, O2LT_EX, 0));
	r = &g_array_index(nodes[0].recent, struct rec, 0);
	ck_assert_int_eq(r->type, O2LT_EV_GRANTED); /* a prefix is another lock */
	mcast(0, buf, o2lt_msg_lock(buf, sizeof(buf), 5, longest, O2LT_NAME_MAX, O2LT_PR, 0));
	ck_assert_uint_eq(count_ev(0, O2LT_EV_GRANTED, NULL), 0);
	ck_assert_uint_eq(count_ev(1, O2LT_EV_BLOCKING, NULL), 1);
}
END_TEST

/*
 * Two partitions merge, each with a synced table of its own: each side sees
 * the other join and sends it a snapshot, and both report STATE_CONFLICT.
 * (Each side gets its own view of the change, so this test feeds the tables
 * by hand: their states differ by design.)
 */
START_TEST(test_partition_merge)
{
	char why[256] = "";
	JOIN(0);
	req_lock(0, "a", O2LT_EX, 0, 1);
	/* node 1 forms a group of its own */
	node_start(1);
	nodes[1].present = true;
	const struct o2lt_member only1[] = { nodes[1].id };
	const struct o2lt_confchg alone = { .members = only1, .n_members = 1, .joined = only1,
					    .n_joined = 1 };
	ck_assert_int_eq(o2lt_confchg(nodes[1].t, &alone), 0);
	ck_assert(o2lt_synced(nodes[1].t));
	uint8_t buf[O2LT_MSG_SMALL];
	ssize_t n = o2lt_msg_lock(buf, sizeof(buf), 2, "a", 1, O2LT_EX, 0);
	ck_assert_int_eq(o2lt_deliver(nodes[1].t, nodes[1].id, buf, (size_t)n), 0);

	/* the merge: each side sees the other join */
	const struct o2lt_member both[] = { nodes[0].id, nodes[1].id };
	const struct o2lt_confchg to0 = { .members = both, .n_members = 2, .joined = both + 1,
					  .n_joined = 1 };
	const struct o2lt_confchg to1 = { .members = both, .n_members = 2, .joined = both,
					  .n_joined = 1 };
	input_begin();
	ck_assert_int_eq(o2lt_confchg(nodes[0].t, &to0), 0);
	ck_assert_int_eq(o2lt_confchg(nodes[1].t, &to1), 0);
	ck_assert_uint_eq(count_in(nodes[0].step, 1, O2LT_EV_SEND_SNAPSHOT, NULL), 1);
	ck_assert_uint_eq(count_in(nodes[1].step, 0, O2LT_EV_SEND_SNAPSHOT, NULL), 1);
	ck_assert_uint_eq(g_queue_get_length(&outbox), 2);

	/* both snapshots reach both tables, in one order */
	struct outmsg *m;
	while ((m = g_queue_pop_head(&outbox))) {
		for (int i = 0; i < 2; i++) {
			int rc = o2lt_deliver(nodes[i].t, m->sender, m->msg, m->len);
			ck_assert_msg(rc == 0, "node %d returned %d", i, rc);
			ck_assert_msg(o2lt_check(nodes[i].t, why, sizeof(why)) == 0, "node %d: %s", i, why);
		}
		outmsg_free(m);
	}
	for (int i = 0; i < 2; i++)
		ck_assert_msg(count_in(nodes[i].step, i, O2LT_EV_STATE_CONFLICT, NULL) == 1,
			      "node %d did not report the conflict", i);
	nodes[1].present = false;
}
END_TEST

/*
 * A partition heals: the dead member comes back under the same nodeid and
 * pid, with the table it kept.  It is stale: reported, sent no snapshot,
 * ignored (-EPERM) until it leaves; its dead incarnation is still fenced and
 * recovered as usual.  (Its own table is on the other side of the story and
 * is not fed here.)
 */
START_TEST(test_stale_member)
{
	JOIN(0, 1, 2);
	req_lock(2, "a", O2LT_EX, 0, 1);
	req_lock(0, "a", O2LT_PR, 0, 2);
	GONE(2, O2LT_REASON_NODEDOWN);
	EVERYWHERE(2, O2LT_EV_NODE_FAILED, 1);

	/* the rings merge: 2 is back in the group */
	group[n_group++] = nodes[2].id;
	const struct o2lt_member back[] = { nodes[2].id };
	const struct o2lt_confchg heal = { .members = group, .n_members = n_group, .joined = back,
					   .n_joined = 1 };
	confchg_all(&heal);
	EVERYWHERE(2, O2LT_EV_STALE_MEMBER, 1);
	EVERYWHERE(2, O2LT_EV_SEND_SNAPSHOT, 0);
	ck_assert_uint_eq(g_queue_get_length(&outbox), 0);

	/* whatever it sends is ignored */
	uint8_t buf[O2LT_MSG_SMALL];
	ssize_t n = o2lt_msg_down(buf, sizeof(buf), 3, "a", 1, O2LT_UNLOCK, NULL);
	expect_rejected(__LINE__, -EPERM, nodes[2].id, buf, (size_t)n);
	n = o2lt_msg_lock(buf, sizeof(buf), 4, "b", 1, O2LT_EX, 0);
	expect_rejected(__LINE__, -EPERM, nodes[2].id, buf, (size_t)n);

	/* a member joining now waits: with two tables in the group, nobody sends */
	JOIN(3);
	ck_assert(!o2lt_synced(nodes[3].t));
	EVERYWHERE(3, O2LT_EV_SEND_SNAPSHOT, 0);

	/* it leaves: no failure of its own, the dead incarnation is recovered */
	n_group = 0;
	for (int i = 0; i < 4; i++)
		if (i != 2)
			group[n_group++] = nodes[i].id;
	const uint32_t why[] = { O2LT_REASON_LEAVE };
	const struct o2lt_confchg gone = { .members = group, .n_members = n_group, .left = back,
					   .left_reasons = why, .n_left = 1 };
	confchg_all(&gone);
	ck_assert_uint_eq(count_on(0, 2, O2LT_EV_NODE_FAILED, NULL), 0);
	ck_assert_uint_eq(count_on(1, 2, O2LT_EV_NODE_FAILED, NULL), 0);
	/* one table again: the joiner gets it, and learns of the death from it */
	ck_assert(o2lt_synced(nodes[3].t));
	ck_assert_uint_eq(count_in(nodes[3].all, 2, O2LT_EV_NODE_FAILED, NULL), 1);
	ck_assert_uint_eq(count_in(nodes[3].all, 2, O2LT_EV_STALE_MEMBER, NULL), 0);
	NO_EV(0, O2LT_EV_GRANTED, NULL);
	req_fenced(1, nodes[2].id.nodeid, 5);
	EVERYWHERE(2, O2LT_EV_NODE_FENCED, 1);
	req_recovered(1, nodes[2].id.nodeid, 6);
	EVERYWHERE(2, O2LT_EV_NODE_RECOVERED, 1);
	GRANTED(0, "a", O2LT_PR, 2);
}
END_TEST

/* for test_join_during_partition: tables outside the lockstep harness */
struct side_table {
	struct o2lt_table *t;
	GBytes *snapshot; /* the last one it was asked to send */
};

static void side_event(const struct o2lt_event *ev, void *data)
{
	struct side_table *st = data;
	if (ev->type != O2LT_EV_SEND_SNAPSHOT)
		return;
	void *msg;
	size_t len;
	ck_assert_int_eq(o2lt_snapshot(st->t, ev->member, &msg, &len), 0);
	if (st->snapshot)
		g_bytes_unref(st->snapshot);
	st->snapshot = g_bytes_new_take(msg, len);
}

/*
 * A member joins one side of a partition; when it heals, the other side,
 * which has a table of its own, sends it a snapshot too, and first.  The
 * joiner must take its state only from its own side (fuzz_locktab found a
 * joiner taking the other side's).
 */
START_TEST(test_join_during_partition)
{
	const struct o2lt_member a = { 1, 1 }, b = { 2, 2 }, j = { 3, 3 };
	struct side_table ta = { 0 }, tb = { 0 }, tj = { 0 };
	ta.t = o2lt_new(a, side_event, &ta);
	tb.t = o2lt_new(b, side_event, &tb);
	tj.t = o2lt_new(j, side_event, &tj);
	const struct o2lt_member ab[] = { a, b }, aj[] = { a, j }, abj[] = { a, b, j };
	const uint32_t down[] = { O2LT_REASON_NODEDOWN };
	struct o2lt_confchg c = { .members = ab, .n_members = 2, .joined = ab, .n_joined = 2 };
	ck_assert_int_eq(o2lt_confchg(ta.t, &c), 0);
	ck_assert_int_eq(o2lt_confchg(tb.t, &c), 0);
	/* the partition: each side sees the other go down */
	c = (struct o2lt_confchg){ .members = &a, .n_members = 1, .left = &b, .left_reasons = down,
				   .n_left = 1 };
	ck_assert_int_eq(o2lt_confchg(ta.t, &c), 0);
	c = (struct o2lt_confchg){ .members = &b, .n_members = 1, .left = &a, .left_reasons = down,
				   .n_left = 1 };
	ck_assert_int_eq(o2lt_confchg(tb.t, &c), 0);
	/* j joins a's side: a is asked for its snapshot, which is not delivered yet */
	c = (struct o2lt_confchg){ .members = aj, .n_members = 2, .joined = &j, .n_joined = 1 };
	ck_assert_int_eq(o2lt_confchg(ta.t, &c), 0);
	ck_assert_int_eq(o2lt_confchg(tj.t, &c), 0);
	ck_assert_ptr_nonnull(ta.snapshot);
	/* the rings merge */
	c = (struct o2lt_confchg){ .members = abj, .n_members = 3, .joined = &b, .n_joined = 1 };
	ck_assert_int_eq(o2lt_confchg(ta.t, &c), 0);
	ck_assert_int_eq(o2lt_confchg(tj.t, &c), 0);
	c = (struct o2lt_confchg){ .members = abj, .n_members = 3, .joined = aj, .n_joined = 2 };
	ck_assert_int_eq(o2lt_confchg(tb.t, &c), 0);
	/* b has j as a joiner of its own, but with a stale member there it asks nobody */
	ck_assert_ptr_null(tb.snapshot);
	/* should b's snapshot come first anyway, a ignores it (b is stale to it), j must too */
	void *bm;
	size_t blen;
	ck_assert_int_eq(o2lt_snapshot(tb.t, j, &bm, &blen), 0);
	tb.snapshot = g_bytes_new_take(bm, blen);
	gsize len;
	const void *m = g_bytes_get_data(tb.snapshot, &len);
	ck_assert_int_eq(o2lt_deliver(ta.t, b, m, len), -EPERM);
	ck_assert_int_eq(o2lt_deliver(tj.t, b, m, len), 0);
	ck_assert_msg(!o2lt_synced(tj.t), "the joiner took the state of the other side");
	m = g_bytes_get_data(ta.snapshot, &len);
	ck_assert_int_eq(o2lt_deliver(ta.t, a, m, len), 0);
	ck_assert_int_eq(o2lt_deliver(tj.t, a, m, len), 0);
	ck_assert(o2lt_synced(tj.t));
	char *da = o2lt_dump(ta.t), *dj = o2lt_dump(tj.t);
	ck_assert_str_eq(da, dj);
	g_free(da);
	g_free(dj);
	struct side_table *all[] = { &ta, &tb, &tj };
	for (int i = 0; i < 3; i++) {
		o2lt_free(all[i]->t);
		if (all[i]->snapshot)
			g_bytes_unref(all[i]->snapshot);
	}
}
END_TEST

/* A synced table is never sent its own snapshot in one group: no conflict. */
START_TEST(test_no_conflict_in_one_group)
{
	JOIN(0, 1);
	JOIN(2);
	JOIN(3, 4);
	for (int i = 0; i <= 4; i++)
		ck_assert_uint_eq(count_in(nodes[i].all, i, O2LT_EV_STATE_CONFLICT, NULL), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *locktab_suite(void)
{
	Suite *s = suite_create("locktab");
	TCase *tc = tcase_create("locks");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_first_members);
	tcase_add_test(tc, test_single_member);
	tcase_add_test(tc, test_grants_and_blocking);
	tcase_add_test(tc, test_fifo);
	tcase_add_test(tc, test_conversions);
	tcase_add_test(tc, test_noqueue);
	tcase_add_test(tc, test_new);
	tcase_add_test(tc, test_batch);
	tcase_add_test(tc, test_cancel);
	tcase_add_test(tc, test_lvb);
	tcase_add_test(tc, test_down_errors);
	tcase_add_test(tc, test_binary_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("failure");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_failure_and_recovery);
	tcase_add_test(tc, test_recovery_grant_then_convert);
	tcase_add_test(tc, test_recovered_before_fenced);
	tcase_add_test(tc, test_fenced_per_node);
	tcase_add_test(tc, test_procdown);
	tcase_add_test(tc, test_member_vanishes);
	tcase_add_test(tc, test_double_death);
	tcase_add_test(tc, test_clean_leave);
	suite_add_tcase(s, tc);

	tc = tcase_create("join");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_join_snapshot);
	tcase_add_test(tc, test_join_several);
	tcase_add_test(tc, test_join_sender_dies);
	tcase_add_test(tc, test_join_sender_dies_early_requests);
	tcase_add_test(tc, test_join_no_source);
	tcase_add_test(tc, test_join_no_source_at_once);
	tcase_add_test(tc, test_join_with_garbage);
	tcase_add_test(tc, test_partition_merge);
	tcase_add_test(tc, test_stale_member);
	tcase_add_test(tc, test_join_during_partition);
	tcase_add_test(tc, test_no_conflict_in_one_group);
	suite_add_tcase(s, tc);

	tc = tcase_create("big");
	tcase_set_timeout(tc, 280);
	tcase_add_test(tc, test_big_join);
	suite_add_tcase(s, tc);

	tc = tcase_create("hostile");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_hostile_messages);
	tcase_add_test(tc, test_hostile_confchg);
	tcase_add_test(tc, test_new_table);
	tcase_add_test(tc, test_snapshot_misuse);
	tcase_add_test(tc, test_bad_snapshot_conflict);
	tcase_add_test(tc, test_bad_snapshot_variants);
	tcase_add_test(tc, test_bad_snapshot_fuzz);
	tcase_add_test(tc, test_bad_deflated_snapshot);
	tcase_add_test(tc, test_encoders);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(locktab_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
