// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_locktab: the cluster lock table (cpg/locktab.h) under a simulated
 * CPG group whose members, messages and membership changes come from the
 * input (format: fuzz_locktab.h).
 *
 * Every member has its own table, and every table gets the same inputs in
 * the same order, as corosync gives them.  Messages go through a shared
 * queue (the "mail") and are delivered when the input says so, so that
 * joins, deaths and snapshots interleave with lock traffic; snapshots a
 * table asks to send join the mail like any message.  Raw and mutated
 * messages and self-contradicting membership changes are the hostile part,
 * and so are partitions: members cut off keep their tables, and when they
 * merge back both sides must see the conflict (STATE_CONFLICT) and leave.
 *
 * A finding is a crash, a sanitizer report, or one of these broken after
 * any input: a table's own invariants (o2lt_check); synced tables that
 * differ (o2lt_dump); tables that were synced before an input reporting
 * different events for it, or different results; two live members told
 * they hold incompatible modes of one lock; a table that refuses a change
 * that every member must take, or takes one that contradicts itself.
 */
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "fuzz_locktab.h"
#include "locktab.h"

#define MAX_OPS 400
#define MAX_MAIL 256

struct belief {
	int held;      /* mode the member was told it holds, -1 none */
	bool pending;  /* a request of its own waits */
	uint64_t reqid; /* of that request */
	int want;      /* highest mode a BLOCKING named since the last change, -1 */
};

struct slot {
	bool in;
	struct o2lt_table *t;
	struct o2lt_member id;
	bool failed_sync;
	bool tainted; /* took a damaged snapshot, or merged back: its state is its own */
	bool away;    /* cut off from the group (in is false meanwhile) */
	GString *events; /* what the table said during the current input */
	struct belief b[LT_NAMES];
	uint64_t next_reqid;
	struct sim *sim;
};

struct mail {
	int slot;
	struct o2lt_member from;
	uint8_t *msg;
	size_t len;
	bool mutated;
};

struct sim {
	struct slot s[LT_SLOTS];
	GQueue mail;
	uint32_t next_pid;
};

static const uint8_t *name_of(unsigned i, size_t *len)
{
	/* an inode meta lock, a dentry lock (binary, with a NUL), the super lock,
	 * a journal lock and a name of the largest size */
	static const uint8_t dentry[31] = { 'N', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0',
					    '0', '0', '0', '0', '1', '0', 0, 0, 0, 0, 0, 0, 0, 0, 0x30, 0x0c };
	static const char *const text[] = { "M0000000000000000000b0000007bcd", NULL,
					    "S000000000000000000000200000000",
					    "M00000000000000000000120000abcd",
					    "X123456789012345678901234567890123456789012345678901234567890123" };
	i %= LT_NAMES;
	if (i == 1) {
		*len = sizeof(dentry);
		return dentry;
	}
	*len = strlen(text[i]);
	return (const uint8_t *)text[i];
}

static int name_index(const uint8_t *name, size_t len)
{
	for (unsigned i = 0; i < LT_NAMES; i++) {
		size_t l;
		const uint8_t *n = name_of(i, &l);
		if (l == len && !memcmp(n, name, len))
			return (int)i;
	}
	return -1;
}

static struct slot *slot_of(struct sim *sim, struct o2lt_member id)
{
	for (int i = 0; i < LT_SLOTS; i++)
		if (sim->s[i].in && sim->s[i].id.nodeid == id.nodeid && sim->s[i].id.pid == id.pid)
			return &sim->s[i];
	return NULL;
}

static struct mail *post(struct sim *sim, int slot, const void *msg, size_t len)
{
	if (sim->mail.length >= MAX_MAIL)
		return NULL;
	struct mail *m = g_new0(struct mail, 1);
	m->slot = slot;
	m->from = sim->s[slot].id;
	m->msg = g_memdup2(msg, len);
	m->len = len;
	g_queue_push_tail(&sim->mail, m);
	return m;
}

static void mail_free(gpointer p)
{
	struct mail *m = p;
	g_free(m->msg);
	g_free(m);
}

static void on_event(const struct o2lt_event *ev, void *data)
{
	struct slot *me = data;
	fz_debug("  slot %d: event %d for %u/%u mode %d error %d\n", (int)(me - me->sim->s), ev->type,
		 ev->member.nodeid, ev->member.pid, ev->mode, ev->error);
	/* what only this table is told is not compared */
	if (ev->type != O2LT_EV_SEND_SNAPSHOT && ev->type != O2LT_EV_SYNCED &&
	    ev->type != O2LT_EV_SYNC_FAILED && ev->type != O2LT_EV_STATE_CONFLICT)
		g_string_append_printf(me->events, "%d %u/%u %" G_GUINT64_FORMAT " %d %d %d %d|", ev->type,
			       ev->member.nodeid, ev->member.pid, ev->reqid,
			       ev->name ? name_index(ev->name, ev->namelen) : -2, ev->mode, ev->error,
			       ev->type == O2LT_EV_GRANTED ? (ev->lvb_valid ? ev->lvb[0] : -1) : 0);
	switch (ev->type) {
	case O2LT_EV_SEND_SNAPSHOT: {
		void *msg;
		size_t len;
		int r = o2lt_snapshot(me->t, ev->member, &msg, &len);
		if (r < 0)
			fz_fail("snapshot for %u/%u: %d", ev->member.nodeid, ev->member.pid, r);
		fz_debug("  slot %d: snapshot for %u/%u, %zu bytes%s\n", (int)(me - me->sim->s),
			 ev->member.nodeid, ev->member.pid, len,
			 len > 7 && (((const uint8_t *)msg)[6] & 1) ? ", deflated" : "");
		struct mail *m = post(me->sim, (int)(me - me->sim->s), msg, len);
		g_free(msg);
		/* a table with a damaged state passes it on */
		if (m && me->tainted)
			m->mutated = true;
		break;
	}
	case O2LT_EV_SYNC_FAILED:
	case O2LT_EV_STATE_CONFLICT:
		me->failed_sync = true;
		break;
	default:
		break;
	}
}

/* The beliefs of each live member, from the events of one table that was synced. */
static void learn(struct sim *sim, const char *events)
{
	g_auto(GStrv) evs = g_strsplit(events, "|", -1);
	for (char **e = evs; *e && **e; e++) {
		int type, name, mode, err, lvb;
		unsigned nodeid, pid;
		uint64_t reqid;
		if (sscanf(*e, "%d %u/%u %" SCNu64 " %d %d %d %d", &type, &nodeid, &pid, &reqid, &name,
			   &mode, &err, &lvb) != 8)
			fz_fail("event text %s", *e);
		struct slot *s = slot_of(sim, (struct o2lt_member){ nodeid, pid });
		if (!s || name < 0)
			continue;
		struct belief *b = &s->b[name];
		switch (type) {
		case O2LT_EV_GRANTED:
			b->held = mode;
			if (b->pending && b->reqid == reqid)
				b->pending = false;
			b->want = -1;
			break;
		case O2LT_EV_REFUSED:
			if (b->pending && b->reqid == reqid)
				b->pending = false;
			break;
		case O2LT_EV_DOWNED:
			b->held = mode == O2LT_UNLOCK ? -1 : mode;
			b->want = -1;
			break;
		case O2LT_EV_BLOCKING:
			if (mode > b->want)
				b->want = mode;
			break;
		default:
			break;
		}
	}
}

static void check_beliefs(const struct sim *sim)
{
	for (int n = 0; n < LT_NAMES; n++)
		for (int i = 0; i < LT_SLOTS; i++)
			for (int j = 0; j < i; j++) {
				const struct slot *a = &sim->s[i], *b = &sim->s[j];
				if (!a->in || !b->in || a->tainted || b->tainted)
					continue;
				int x = a->b[n].held, y = b->b[n].held;
				if (x < 0 || y < 0 || x == O2LT_NL || y == O2LT_NL)
					continue;
				if (x == O2LT_EX || y == O2LT_EX)
					fz_fail("lock %d: slot %d told %s, slot %d told %s", n, i,
						o2lt_mode_name(x), j, o2lt_mode_name(y));
			}
}

static void slot_clear(struct slot *s)
{
	o2lt_free(s->t);
	if (s->events)
		g_string_free(s->events, TRUE);
	memset(s, 0, sizeof(*s));
}

static void check_all(struct sim *sim)
{
	char why[256];
	g_autofree char *ref_dump = NULL;
	int ref = -1;
	for (int i = 0; i < LT_SLOTS; i++) {
		struct slot *s = &sim->s[i];
		if (s->away && o2lt_check(s->t, why, sizeof(why)) < 0)
			fz_fail("slot %d table, cut off: %s", i, why);
		if (!s->in)
			continue;
		if (o2lt_check(s->t, why, sizeof(why)) < 0)
			fz_fail("slot %d table: %s", i, why);
		if (!o2lt_synced(s->t) || s->tainted)
			continue;
		char *d = o2lt_dump(s->t);
		if (!ref_dump) {
			ref_dump = d;
			ref = i;
			continue;
		}
		if (strcmp(d, ref_dump))
			fz_fail("tables of slots %d and %d differ:\n%s---\n%s", ref, i, ref_dump, d);
		g_free(d);
	}
	check_beliefs(sim);
}

/*
 * Before an input: which tables are synced.  After it: those must have said
 * the same, and the beliefs learn from the first of them.
 */
static void begin(struct sim *sim, bool synced[LT_SLOTS])
{
	for (int i = 0; i < LT_SLOTS; i++) {
		struct slot *s = &sim->s[i];
		synced[i] = s->in && o2lt_synced(s->t) && !s->tainted;
		if (s->in)
			g_string_truncate(s->events, 0);
	}
}

static void end(struct sim *sim, const bool synced[LT_SLOTS], const int *results)
{
	int ref = -1;
	for (int i = 0; i < LT_SLOTS; i++) {
		struct slot *s = &sim->s[i];
		if (!synced[i] || !s->in || !o2lt_synced(s->t))
			continue;
		if (ref < 0) {
			ref = i;
			continue;
		}
		if (strcmp(s->events->str, sim->s[ref].events->str))
			fz_fail("events differ: slot %d said %s, slot %d said %s", ref,
				sim->s[ref].events->str, i, s->events->str);
		if (results && results[i] != results[ref])
			fz_fail("results differ: %d and %d", results[ref], results[i]);
	}
	if (ref >= 0)
		learn(sim, sim->s[ref].events->str);
	check_all(sim);
}

/*
 * A damaged message is the same input to every table, except a snapshot:
 * a joiner that takes a damaged one has a state nobody else has.
 */
static void deliver(struct sim *sim, struct o2lt_member from, const void *msg, size_t len,
		    bool mutated)
{
	bool synced[LT_SLOTS];
	int results[LT_SLOTS] = { 0 };
	begin(sim, synced);
	for (int i = 0; i < LT_SLOTS; i++) {
		struct slot *s = &sim->s[i];
		if (!s->in)
			continue;
		bool was = o2lt_synced(s->t);
		results[i] = o2lt_deliver(s->t, from, msg, len);
		if (mutated && !was && o2lt_synced(s->t))
			s->tainted = true;
	}
	end(sim, synced, results);
}

static void deliver_mail(struct sim *sim, unsigned n)
{
	while (n-- && !g_queue_is_empty(&sim->mail)) {
		struct mail *m = g_queue_pop_head(&sim->mail);
		deliver(sim, m->from, m->msg, m->len, m->mutated);
		mail_free(m);
	}
}

/* Everyone in the group (members), and the change, to every table. */
static void confchg(struct sim *sim, const struct o2lt_confchg *c, const bool joining[LT_SLOTS])
{
	bool synced[LT_SLOTS];
	begin(sim, synced);
	for (int i = 0; i < LT_SLOTS; i++) {
		if (!sim->s[i].in)
			continue;
		int r = o2lt_confchg(sim->s[i].t, c);
		if (r < 0)
			fz_fail("slot %d refused a membership change: %d%s", i, r,
				joining[i] ? " (its join)" : "");
	}
	end(sim, synced, NULL);
}

static size_t group(const struct sim *sim, struct o2lt_member *out)
{
	size_t n = 0;
	for (int i = 0; i < LT_SLOTS; i++)
		if (sim->s[i].in)
			out[n++] = sim->s[i].id;
	return n;
}

static void op_join(struct sim *sim, uint8_t a)
{
	bool joining[LT_SLOTS] = { false };
	struct o2lt_member joined[2], members[LT_SLOTS];
	size_t nj = 0;
	int want[2] = { (a & 7) % LT_SLOTS, ((a >> 3) & 7) % LT_SLOTS };
	for (int k = 0; k < 2; k++) {
		struct slot *s = &sim->s[want[k]];
		if (s->in || s->away)
			continue;
		s->in = true;
		s->sim = sim;
		s->id = (struct o2lt_member){ .nodeid = (uint32_t)(want[k] % 4 + 1), .pid = ++sim->next_pid };
		s->events = g_string_new(NULL);
		s->t = o2lt_new(s->id, on_event, s);
		for (int n = 0; n < LT_NAMES; n++)
			s->b[n] = (struct belief){ .held = -1, .want = -1 };
		joining[want[k]] = true;
		joined[nj++] = s->id;
	}
	if (!nj)
		return;
	struct o2lt_confchg c = { .members = members, .n_members = group(sim, members),
				  .joined = joined, .n_joined = nj };
	confchg(sim, &c, joining);
}

static void drop_mail_of(struct sim *sim, struct o2lt_member id)
{
	for (GList *l = sim->mail.head; l;) {
		struct mail *m = l->data;
		GList *next = l->next;
		if (m->from.nodeid == id.nodeid && m->from.pid == id.pid) {
			mail_free(m);
			g_queue_delete_link(&sim->mail, l);
		}
		l = next;
	}
}

static void leave(struct sim *sim, int slot, uint32_t reason, bool flush_first)
{
	struct slot *s = &sim->s[slot];
	if (!s->in)
		return;
	struct o2lt_member id = s->id;
	/* virtual synchrony: what it sent arrives before its leaving, or never */
	while (flush_first) {
		flush_first = false;
		for (GList *k = sim->mail.head; k; k = k->next) {
			struct mail *m = k->data;
			flush_first |= m->from.nodeid == id.nodeid && m->from.pid == id.pid;
		}
		if (flush_first)
			deliver_mail(sim, 1);
	}
	drop_mail_of(sim, id);
	slot_clear(s);
	struct o2lt_member members[LT_SLOTS];
	bool joining[LT_SLOTS] = { false };
	struct o2lt_confchg c = { .members = members, .n_members = group(sim, members),
				  .left = &id, .left_reasons = &reason, .n_left = 1 };
	if (c.n_members)
		confchg(sim, &c, joining);
}

static void leave_failed_syncs(struct sim *sim)
{
	for (int i = 0; i < LT_SLOTS; i++)
		if (sim->s[i].in && sim->s[i].failed_sync)
			leave(sim, i, O2LT_REASON_LEAVE, false);
}

static int live_slot(struct sim *sim, uint8_t a)
{
	int i = a % LT_SLOTS;
	return sim->s[i].in ? i : -1;
}

static void send_lock(struct sim *sim, int i, unsigned name, int mode, unsigned flags)
{
	uint8_t buf[O2LT_MSG_SMALL];
	size_t nl;
	const uint8_t *n = name_of(name, &nl);
	struct slot *s = &sim->s[i];
	uint64_t reqid = ++s->next_reqid;
	ssize_t len = o2lt_msg_lock(buf, sizeof(buf), reqid, n, nl, mode, flags);
	if (len < 0)
		fz_fail("encoding a lock: %zd", len);
	if (!s->b[name].pending) {
		s->b[name].pending = true;
		s->b[name].reqid = reqid;
	}
	post(sim, i, buf, (size_t)len);
}

static void send_down(struct sim *sim, int i, unsigned name, int mode, const uint8_t *lvb)
{
	uint8_t buf[O2LT_MSG_SMALL];
	size_t nl;
	const uint8_t *n = name_of(name, &nl);
	ssize_t len = o2lt_msg_down(buf, sizeof(buf), ++sim->s[i].next_reqid, n, nl, mode, lvb);
	if (len < 0)
		fz_fail("encoding a down: %zd", len);
	post(sim, i, buf, (size_t)len);
}

static void send_cancel(struct sim *sim, int i, unsigned name)
{
	uint8_t buf[O2LT_MSG_SMALL];
	size_t nl;
	const uint8_t *n = name_of(name, &nl);
	ssize_t len = o2lt_msg_cancel(buf, sizeof(buf), ++sim->s[i].next_reqid, n, nl);
	if (len < 0)
		fz_fail("encoding a cancel: %zd", len);
	post(sim, i, buf, (size_t)len);
}

/* What dlmglue does with a blocking notice: cancel a conversion in the way, or lower the lock. */
static void react(struct sim *sim, int i)
{
	struct slot *s = &sim->s[i];
	for (unsigned n = 0; n < LT_NAMES; n++) {
		struct belief *b = &s->b[n];
		if (b->want < 0 || b->held < 0)
			continue;
		if (b->pending) {
			send_cancel(sim, i, n);
			continue;
		}
		int to = b->want == O2LT_EX ? O2LT_NL : O2LT_PR;
		if (to >= b->held)
			continue;
		uint8_t lvb[O2LT_LVB_LEN];
		memset(lvb, (int)(s->next_reqid & 0xff), sizeof(lvb));
		send_down(sim, i, n, to, b->held == O2LT_EX ? lvb : NULL);
	}
}

/* The same change to the tables cut off (their events are their own). */
static void confchg_away(struct sim *sim, const struct o2lt_confchg *c)
{
	for (int i = 0; i < LT_SLOTS; i++) {
		struct slot *s = &sim->s[i];
		if (!s->away)
			continue;
		g_string_truncate(s->events, 0);
		int r = o2lt_confchg(s->t, c);
		if (r < 0)
			fz_fail("slot %d, cut off, refused a membership change: %d", i, r);
	}
}

static size_t away_group(const struct sim *sim, struct o2lt_member *out)
{
	size_t n = 0;
	for (int i = 0; i < LT_SLOTS; i++)
		if (sim->s[i].away)
			out[n++] = sim->s[i].id;
	return n;
}

static void op_split(struct sim *sim, uint8_t mask)
{
	struct o2lt_member here[LT_SLOTS], there[LT_SLOTS];
	uint32_t down[LT_SLOTS];
	bool none[LT_SLOTS] = { false };
	size_t nt = 0;
	if (away_group(sim, there))
		return; /* one cut at a time */
	for (int i = 0; i < LT_SLOTS; i++)
		if (sim->s[i].in && (mask >> i & 1))
			nt++;
	size_t nh = group(sim, here);
	if (!nt || nt == nh)
		return;
	for (int i = 0; i < LT_SLOTS; i++) {
		struct slot *s = &sim->s[i];
		if (s->in && (mask >> i & 1)) {
			drop_mail_of(sim, s->id); /* never delivered */
			s->in = false;
			s->away = true;
			fz_debug("  split: slot %d cut off\n", i);
		}
		down[i] = O2LT_REASON_NODEDOWN;
	}
	nh = group(sim, here);
	nt = away_group(sim, there);
	struct o2lt_confchg c = { .members = here, .n_members = nh, .left = there,
				  .left_reasons = down, .n_left = nt };
	confchg(sim, &c, none);
	struct o2lt_confchg d = { .members = there, .n_members = nt, .left = here,
				  .left_reasons = down, .n_left = nh };
	confchg_away(sim, &d);
}

static void op_merge(struct sim *sim)
{
	struct o2lt_member here[LT_SLOTS], there[LT_SLOTS], all[LT_SLOTS];
	bool none[LT_SLOTS] = { false };
	size_t nt = away_group(sim, there), nh = group(sim, here);
	if (!nt)
		return;
	memcpy(all, here, nh * sizeof(*here));
	memcpy(all + nh, there, nt * sizeof(*there));
	if (nh) {
		struct o2lt_confchg c = { .members = all, .n_members = nh + nt, .joined = there,
					  .n_joined = nt };
		confchg(sim, &c, none);
	}
	struct o2lt_confchg d = { .members = all, .n_members = nh + nt, .joined = here,
				  .n_joined = nh };
	/* tainted before the change, so that the snapshots it makes them send are too */
	for (int i = 0; i < LT_SLOTS; i++)
		if (sim->s[i].away && nh > 0) /* alone, they are the group (as they were) */
			sim->s[i].tainted = true;
	confchg_away(sim, &d);
	for (int i = 0; i < LT_SLOTS; i++) {
		struct slot *s = &sim->s[i];
		if (s->away) {
			s->away = false;
			s->in = true;
			fz_debug("  merge: slot %d back%s\n", i, s->tainted ? ", tainted" : "");
		}
	}
}

static void bad_confchg(struct sim *sim, uint8_t kind)
{
	struct o2lt_member members[LT_SLOTS + 1], other = { 99, 99 };
	size_t n = group(sim, members);
	uint32_t reason = O2LT_REASON_LEAVE;
	struct o2lt_confchg c = { .members = members, .n_members = n };
	switch (kind % 4) {
	case 0: /* someone both left and present */
		if (!n)
			return;
		c.left = &members[0];
		c.left_reasons = &reason;
		c.n_left = 1;
		break;
	case 1: /* a member twice */
		if (!n)
			return;
		members[n] = members[0];
		c.n_members = n + 1;
		break;
	case 2: /* joined but not a member */
		c.joined = &other;
		c.n_joined = 1;
		break;
	case 3: /* a reason corosync never gives */
		reason = 77;
		c.left = &other;
		c.left_reasons = &reason;
		c.n_left = 1;
		break;
	}
	char *before[LT_SLOTS] = { NULL };
	for (int i = 0; i < LT_SLOTS; i++)
		if (sim->s[i].in)
			before[i] = o2lt_dump(sim->s[i].t);
	for (int i = 0; i < LT_SLOTS; i++) {
		if (!sim->s[i].in)
			continue;
		int r = o2lt_confchg(sim->s[i].t, &c);
		if (r != -EINVAL)
			fz_fail("slot %d took a self-contradicting change (kind %u): %d", i, kind % 4, r);
		g_autofree char *after = o2lt_dump(sim->s[i].t);
		if (strcmp(after, before[i]))
			fz_fail("a refused change changed slot %d", i);
	}
	for (int i = 0; i < LT_SLOTS; i++)
		g_free(before[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_reader r = { data, size };
	struct sim sim;
	memset(&sim, 0, sizeof(sim));
	g_queue_init(&sim.mail);

	for (int ops = 0; ops < MAX_OPS && r.left; ops++) {
		uint8_t op = fz_u8(&r) % LT_OP_COUNT;
		uint8_t a = fz_u8(&r);
		int i;
		fz_debug("op %u %u\n", op, a);
		switch (op) {
		case LT_JOIN:
			op_join(&sim, a);
			break;
		case LT_LEAVE: {
			static const uint32_t reasons[3] = { O2LT_REASON_LEAVE, O2LT_REASON_NODEDOWN,
							     O2LT_REASON_PROCDOWN };
			uint8_t b = fz_u8(&r), c = fz_u8(&r);
			leave(&sim, a % LT_SLOTS, reasons[b % 3], c & 1);
			break;
		}
		case LT_LOCK: {
			uint8_t b = fz_u8(&r), c = fz_u8(&r);
			unsigned flags = (c & 4 ? O2LT_F_NOQUEUE : 0) | (c & 8 ? O2LT_F_RECOVERY : 0);
			if ((i = live_slot(&sim, a)) >= 0)
				send_lock(&sim, i, b % LT_NAMES, (c & 3) % 3, flags);
			break;
		}
		case LT_DOWN: {
			static const int modes[3] = { O2LT_NL, O2LT_PR, O2LT_UNLOCK };
			uint8_t b = fz_u8(&r), c = fz_u8(&r), d = fz_u8(&r);
			uint8_t lvb[O2LT_LVB_LEN];
			memset(lvb, d, sizeof(lvb));
			if ((i = live_slot(&sim, a)) >= 0)
				send_down(&sim, i, b % LT_NAMES, modes[(c & 3) % 3], c & 4 ? lvb : NULL);
			break;
		}
		case LT_CANCEL: {
			uint8_t b = fz_u8(&r);
			if ((i = live_slot(&sim, a)) >= 0)
				send_cancel(&sim, i, b % LT_NAMES);
			break;
		}
		case LT_FENCED:
		case LT_RECOVERED: {
			uint8_t b = fz_u8(&r), buf[O2LT_MSG_SMALL];
			ssize_t len = op == LT_FENCED
				? o2lt_msg_fenced(buf, sizeof(buf), 0, b % 6)
				: o2lt_msg_recovered(buf, sizeof(buf), 0, b % 6);
			if (len < 0)
				fz_fail("encoding a node message: %zd", len);
			if ((i = live_slot(&sim, a)) >= 0)
				post(&sim, i, buf, (size_t)len);
			break;
		}
		case LT_DELIVER:
			deliver_mail(&sim, a % 8 + 1);
			break;
		case LT_RAW: {
			uint8_t n = fz_u8(&r), buf[256];
			size_t len = MIN((size_t)n, r.left);
			memcpy(buf, r.p, len);
			r.p += len;
			r.left -= len;
			if ((i = live_slot(&sim, a)) >= 0)
				deliver(&sim, sim.s[i].id, buf, len, true);
			break;
		}
		case LT_MUTATE: {
			uint16_t off = (uint16_t)(a | fz_u8(&r) << 8);
			uint8_t x = fz_u8(&r);
			struct mail *m = g_queue_peek_head(&sim.mail);
			if (m && m->len) {
				m->msg[off % m->len] ^= x;
				m->mutated = true;
			}
			break;
		}
		case LT_BADCONF:
			bad_confchg(&sim, a);
			break;
		case LT_REACT:
			if ((i = live_slot(&sim, a)) >= 0)
				react(&sim, i);
			break;
		case LT_SPLIT:
			op_split(&sim, a);
			break;
		case LT_MERGE:
			op_merge(&sim);
			break;
		}
		leave_failed_syncs(&sim);
	}
	/* the rest of the mail, then everyone leaves, one at a time */
	op_merge(&sim);
	deliver_mail(&sim, MAX_MAIL);
	leave_failed_syncs(&sim);
	for (int i = 0; i < LT_SLOTS; i++)
		leave(&sim, i, i & 1 ? O2LT_REASON_NODEDOWN : O2LT_REASON_LEAVE, false);
	g_queue_clear_full(&sim.mail, mail_free);
	return 0;
}
