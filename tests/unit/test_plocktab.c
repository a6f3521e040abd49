// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The replicated file-lock table (cpg/plocktab.h): POSIX ranges granted,
 * refused, split, merged, upgraded and downgraded per owner; F_GETLK's
 * conflict; waiters queued and granted; cancels; deadlocks; flock locks
 * and their conversions; owners dropped; members leaving; joiners synced
 * through snapshots (also when the first sender leaves); malformed
 * messages.
 *
 * A small simulated group delivers every message and membership change to
 * every present member's table in one order.  After each input every
 * table must pass o2pt_check and the synced tables must dump the same text
 * (the table is deterministic: that is the whole protocol).
 */
#include "plocktab.h"

#include <check.h>
#include <errno.h>
#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES 4

struct ans {
	uint64_t reqid;
	int error;
	bool conflict;
	struct o2pt_lock lock;
};

struct node {
	struct o2lt_member id;
	struct o2pt_table *t;
	bool present;
	GArray *answers; /* struct ans */
	uint64_t next_reqid;
	int rc;		 /* what the last input returned here */
};

struct outmsg {
	struct o2lt_member sender;
	void *msg;
	size_t len;
};

static struct node nodes[MAX_NODES];
static GQueue outbox;
static bool hold; /* keep snapshots back until release_held() */
static uint32_t leave_reason = O2LT_REASON_LEAVE; /* how members leave in confchg() */

static void on_event(const struct o2pt_event *ev, void *data)
{
	struct node *n = data;
	if (ev->type == O2PT_EV_ANSWER) {
		struct ans a = { ev->reqid, ev->error, ev->conflict, ev->lock };
		g_array_append_val(n->answers, a);
	} else if (ev->type == O2PT_EV_SEND_SNAPSHOT) {
		struct outmsg *m = g_new0(struct outmsg, 1);
		m->sender = n->id;
		ck_assert_int_eq(o2pt_snapshot(n->t, ev->member, &m->msg, &m->len), 0);
		g_queue_push_tail(&outbox, m);
	}
}

static void check_all(void)
{
	g_autofree char *ref = NULL;
	for (int i = 0; i < MAX_NODES; i++) {
		char why[256];
		if (!nodes[i].present)
			continue;
		ck_assert_msg(o2pt_check(nodes[i].t, why, sizeof(why)) == 0, "node %d: %s", i, why);
		if (!o2pt_synced(nodes[i].t))
			continue;
		char *d = o2pt_dump(nodes[i].t);
		if (!ref)
			ref = d;
		else {
			ck_assert_str_eq(d, ref);
			g_free(d);
		}
	}
}

static void deliver_raw(int from, const void *msg, size_t len)
{
	for (int i = 0; i < MAX_NODES; i++)
		if (nodes[i].present)
			nodes[i].rc = o2pt_deliver(nodes[i].t, nodes[from].id, msg, len);
	check_all();
}

static void pump(void)
{
	while (!hold && !g_queue_is_empty(&outbox)) {
		struct outmsg *m = g_queue_pop_head(&outbox);
		int from = -1;
		for (int i = 0; i < MAX_NODES; i++)
			if (nodes[i].present && nodes[i].id.nodeid == m->sender.nodeid)
				from = i;
		if (from >= 0) /* a sender that left: CPG never delivers it */
			deliver_raw(from, m->msg, m->len);
		g_free(m->msg);
		g_free(m);
	}
}

static void release_held(void)
{
	hold = false;
	pump();
}

static void send(int from, const void *msg, ssize_t len)
{
	ck_assert_int_gt(len, 0);
	deliver_raw(from, msg, (size_t)len);
	pump();
}

static void confchg(const int *joined, int nj, const int *left, int nl)
{
	struct o2lt_member members[MAX_NODES], j[MAX_NODES], l[MAX_NODES];
	uint32_t reasons[MAX_NODES];
	size_t nm = 0;
	for (int i = 0; i < nl; i++) {
		l[i] = nodes[left[i]].id;
		reasons[i] = leave_reason;
		nodes[left[i]].present = false;
	}
	for (int i = 0; i < nj; i++) {
		j[i] = nodes[joined[i]].id;
		nodes[joined[i]].present = true;
	}
	for (int i = 0; i < MAX_NODES; i++)
		if (nodes[i].present)
			members[nm++] = nodes[i].id;
	struct o2lt_confchg c = { members, nm, l, reasons, (size_t)nl, j, (size_t)nj };
	for (int i = 0; i < MAX_NODES; i++)
		if (nodes[i].present)
			ck_assert_int_eq(o2pt_confchg(nodes[i].t, &c), 0);
	for (int i = 0; i < nl; i++) {
		/* a member that left starts again from nothing if it comes back */
		struct node *n = &nodes[left[i]];
		o2pt_free(n->t);
		n->t = o2pt_new(n->id, on_event, n);
	}
	check_all();
	pump();
}

static void join(int i)
{
	confchg(&i, 1, NULL, 0);
}

static void leave(int i)
{
	confchg(NULL, 0, &i, 1);
}

static void setup(void)
{
	g_queue_init(&outbox);
	hold = false;
	leave_reason = O2LT_REASON_LEAVE;
	for (int i = 0; i < MAX_NODES; i++) {
		nodes[i].id = (struct o2lt_member){ .nodeid = (uint32_t)i + 1, .pid = 100 };
		nodes[i].t = o2pt_new(nodes[i].id, on_event, &nodes[i]);
		nodes[i].present = false;
		nodes[i].answers = g_array_new(FALSE, TRUE, sizeof(struct ans));
		nodes[i].next_reqid = 1;
	}
}

static void teardown(void)
{
	for (int i = 0; i < MAX_NODES; i++) {
		o2pt_free(nodes[i].t);
		g_array_free(nodes[i].answers, TRUE);
	}
	while (!g_queue_is_empty(&outbox)) {
		struct outmsg *m = g_queue_pop_head(&outbox);
		g_free(m->msg);
		g_free(m);
	}
}

/* a group of n members, all synced */
static void group_of(int n)
{
	int all[MAX_NODES];
	for (int i = 0; i < n; i++)
		all[i] = i;
	confchg(all, n, NULL, 0);
	for (int i = 0; i < n; i++)
		ck_assert(o2pt_synced(nodes[i].t));
}

static const struct ans *answer_of(int node, uint64_t reqid)
{
	GArray *a = nodes[node].answers;
	const struct ans *found = NULL;
	for (guint i = 0; i < a->len; i++)
		if (g_array_index(a, struct ans, i).reqid == reqid) {
			ck_assert_msg(!found, "two answers to request %llu", (unsigned long long)reqid);
			found = &g_array_index(a, struct ans, i);
		}
	return found;
}

#define INO 4242

/* a request; returns its id */
static uint64_t lk(int node, int ns, uint64_t owner, int type, uint64_t start, uint64_t end,
		   unsigned flags)
{
	uint8_t buf[O2PT_MSG_SMALL];
	uint64_t id = nodes[node].next_reqid++;
	send(node, buf, o2pt_msg_lock(buf, sizeof(buf), id, INO, ns, owner, type, start, end,
				      flags, 1000 + (uint32_t)owner));
	return id;
}

/* a request that must be answered at once with error */
static void lk_now(int node, int ns, uint64_t owner, int type, uint64_t start, uint64_t end,
		   unsigned flags, int error)
{
	uint64_t id = lk(node, ns, owner, type, start, end, flags);
	const struct ans *a = answer_of(node, id);
	ck_assert_msg(a, "no answer from node %d", node);
	ck_assert_int_eq(a->error, error);
}

static uint64_t lk_waits(int node, int ns, uint64_t owner, int type, uint64_t start,
			 uint64_t end)
{
	uint64_t id = lk(node, ns, owner, type, start, end, O2PT_F_WAIT);
	ck_assert_msg(!answer_of(node, id), "answered, not waiting");
	return id;
}

static void expect_dump(int node, const char *want)
{
	g_autofree char *d = o2pt_dump(nodes[node].t);
	/* the lines after the member list */
	const char *p = strstr(d, "\nposix");
	const char *q = strstr(d, "\nflock");
	const char *w = strstr(d, "\nwait");
	const char *first = p;
	if (!first || (q && q < first))
		first = q;
	if (!first || (w && w < first))
		first = w;
	ck_assert_str_eq(first ? first + 1 : "", want);
}

START_TEST(test_posix_ranges)
{
	group_of(2);
	lk_now(0, O2PT_POSIX, 1, O2PT_WR, 0, 99, 0, 0);
	lk_now(1, O2PT_POSIX, 2, O2PT_WR, 100, 199, 0, 0);	   /* disjoint */
	lk_now(1, O2PT_POSIX, 2, O2PT_RD, 50, 120, 0, -EAGAIN);	   /* overlaps node 0's */
	lk_now(0, O2PT_POSIX, 3, O2PT_WR, 10, 10, 0, -EAGAIN);	   /* another owner, same node */
	lk_now(0, O2PT_POSIX, 1, O2PT_RD, 0, 49, 0, 0);		   /* downgrade a part */
	lk_now(1, O2PT_POSIX, 2, O2PT_RD, 10, 20, 0, 0);	   /* shared now */
	expect_dump(0, "posix 4242 1/100:1 WR 50-99 pid 1001\n"
		       "posix 4242 2/100:2 WR 100-199 pid 1002\n"
		       "posix 4242 1/100:1 RD 0-49 pid 1001\n"
		       "posix 4242 2/100:2 RD 10-20 pid 1002\n");
	/* F_GETLK: the conflict, its owner and pid */
	uint64_t id = lk(1, O2PT_POSIX, 2, O2PT_WR, 0, 60, O2PT_F_TEST);
	const struct ans *a = answer_of(1, id);
	ck_assert(a && a->error == 0 && a->conflict);
	ck_assert_int_eq(a->lock.member.nodeid, 1);
	ck_assert_int_eq(a->lock.pid, 1001);
	ck_assert_int_eq(a->lock.type, O2PT_WR);
	ck_assert(a->lock.start == 50 && a->lock.end == 99);
	id = lk(1, O2PT_POSIX, 2, O2PT_RD, 0, 40, O2PT_F_TEST);
	a = answer_of(1, id);
	ck_assert(a && !a->conflict);
	/* a test never changes anything */
	expect_dump(1, "posix 4242 1/100:1 WR 50-99 pid 1001\n"
		       "posix 4242 2/100:2 WR 100-199 pid 1002\n"
		       "posix 4242 1/100:1 RD 0-49 pid 1001\n"
		       "posix 4242 2/100:2 RD 10-20 pid 1002\n");
}
END_TEST

START_TEST(test_posix_split_merge)
{
	group_of(1);
	lk_now(0, O2PT_POSIX, 1, O2PT_WR, 0, 99, 0, 0);
	lk_now(0, O2PT_POSIX, 1, O2PT_UN, 40, 59, 0, 0); /* a hole: two locks */
	expect_dump(0, "posix 4242 1/100:1 WR 0-39 pid 1001\n"
		       "posix 4242 1/100:1 WR 60-99 pid 1001\n");
	lk_now(0, O2PT_POSIX, 1, O2PT_WR, 40, 59, 0, 0); /* filled: one again */
	expect_dump(0, "posix 4242 1/100:1 WR 0-99 pid 1001\n");
	lk_now(0, O2PT_POSIX, 1, O2PT_RD, 50, 59, 0, 0); /* a downgrade in the middle: three */
	expect_dump(0, "posix 4242 1/100:1 WR 0-49 pid 1001\n"
		       "posix 4242 1/100:1 WR 60-99 pid 1001\n"
		       "posix 4242 1/100:1 RD 50-59 pid 1001\n");
	lk_now(0, O2PT_POSIX, 1, O2PT_RD, 100, 109, 0, 0); /* touching another type: apart */
	lk_now(0, O2PT_POSIX, 1, O2PT_RD, 200, O2PT_EOF, 0, 0);
	lk_now(0, O2PT_POSIX, 1, O2PT_RD, 110, 199, 0, 0); /* bridges two RD locks */
	expect_dump(0, "posix 4242 1/100:1 WR 0-49 pid 1001\n"
		       "posix 4242 1/100:1 WR 60-99 pid 1001\n"
		       "posix 4242 1/100:1 RD 50-59 pid 1001\n"
		       "posix 4242 1/100:1 RD 100-18446744073709551615 pid 1001\n");
	lk_now(0, O2PT_POSIX, 1, O2PT_WR, 0, O2PT_EOF, 0, 0); /* an upgrade of everything */
	expect_dump(0, "posix 4242 1/100:1 WR 0-18446744073709551615 pid 1001\n");
	lk_now(0, O2PT_POSIX, 1, O2PT_UN, 0, O2PT_EOF, 0, 0);
	expect_dump(0, "");
}
END_TEST

START_TEST(test_posix_wait)
{
	group_of(3);
	lk_now(0, O2PT_POSIX, 1, O2PT_WR, 0, 9, 0, 0);
	uint64_t w1 = lk_waits(1, O2PT_POSIX, 2, O2PT_WR, 5, 5);
	uint64_t w2 = lk_waits(2, O2PT_POSIX, 3, O2PT_RD, 0, 0);
	uint64_t w3 = lk_waits(2, O2PT_POSIX, 4, O2PT_RD, 5, 5); /* behind the writer too */
	lk_now(0, O2PT_POSIX, 1, O2PT_UN, 1, 9, 0, 0);	 /* 0 stays held */
	/* w1 goes (5 is free), then w3 conflicts with it; w2 still waits for 0 */
	ck_assert(answer_of(1, w1) && answer_of(1, w1)->error == 0);
	ck_assert(!answer_of(2, w2) && !answer_of(2, w3));
	lk_now(0, O2PT_POSIX, 1, O2PT_UN, 0, 0, 0, 0);
	ck_assert(answer_of(2, w2) && answer_of(2, w2)->error == 0);
	ck_assert(!answer_of(2, w3));
	/* the owner's close drops everything it held: the last waiter goes */
	uint8_t buf[O2PT_MSG_SMALL];
	send(1, buf, o2pt_msg_drop(buf, sizeof(buf), 99, INO, O2PT_POSIX, 2));
	ck_assert(answer_of(1, 99) && answer_of(1, 99)->error == 0);
	ck_assert(answer_of(2, w3) && answer_of(2, w3)->error == 0);
	expect_dump(0, "posix 4242 3/100:3 RD 0-0 pid 1003\n"
		       "posix 4242 3/100:4 RD 5-5 pid 1004\n");
}
END_TEST

START_TEST(test_cancel)
{
	group_of(2);
	lk_now(0, O2PT_POSIX, 1, O2PT_WR, 0, O2PT_EOF, 0, 0);
	uint64_t w = lk_waits(1, O2PT_POSIX, 2, O2PT_WR, 0, 0);
	uint8_t buf[O2PT_MSG_SMALL];
	/* another member cannot cancel it */
	send(0, buf, o2pt_msg_cancel(buf, sizeof(buf), 50, w));
	ck_assert(!answer_of(1, w));
	send(1, buf, o2pt_msg_cancel(buf, sizeof(buf), 51, w));
	ck_assert(answer_of(1, w) && answer_of(1, w)->error == -EINTR);
	/* a cancel that comes too late changes nothing */
	send(1, buf, o2pt_msg_cancel(buf, sizeof(buf), 52, w));
	ck_assert(answer_of(1, 52) && answer_of(1, 52)->error == 0);
	expect_dump(0, "posix 4242 1/100:1 WR 0-18446744073709551615 pid 1001\n");
}
END_TEST

START_TEST(test_deadlock)
{
	group_of(2);
	lk_now(0, O2PT_POSIX, 1, O2PT_WR, 0, 0, 0, 0);
	lk_now(1, O2PT_POSIX, 2, O2PT_WR, 1, 1, 0, 0);
	uint64_t w = lk_waits(0, O2PT_POSIX, 1, O2PT_WR, 1, 1);
	/* owner 2 waiting for 0 would close the circle */
	uint64_t id = lk(1, O2PT_POSIX, 2, O2PT_WR, 0, 0, O2PT_F_WAIT);
	ck_assert(answer_of(1, id) && answer_of(1, id)->error == -EDEADLK);
	/* a third owner waiting for 0 is no deadlock */
	lk_waits(1, O2PT_POSIX, 3, O2PT_WR, 0, 0);
	/* flock locks know no deadlocks, as on Linux */
	lk_now(0, O2PT_FLOCK, 1, O2PT_WR, 0, 0, 0, 0);
	lk_waits(1, O2PT_FLOCK, 2, O2PT_WR, 0, 0);
	ck_assert(!answer_of(0, w));
}
END_TEST

START_TEST(test_flock)
{
	group_of(3);
	lk_now(0, O2PT_FLOCK, 1, O2PT_RD, 0, 0, 0, 0);
	lk_now(1, O2PT_FLOCK, 2, O2PT_RD, 0, 0, 0, 0); /* shared across nodes */
	lk_now(2, O2PT_FLOCK, 3, O2PT_WR, 0, 0, 0, -EAGAIN);
	/* POSIX locks are another namespace */
	lk_now(2, O2PT_POSIX, 3, O2PT_WR, 0, O2PT_EOF, 0, 0);
	uint64_t w = lk_waits(2, O2PT_FLOCK, 3, O2PT_WR, 0, 0);
	/* a conversion drops the old lock first: node 0 goes SH -> EX, waits */
	uint64_t c = lk_waits(0, O2PT_FLOCK, 1, O2PT_WR, 0, 0);
	expect_dump(0, "posix 4242 3/100:3 WR 0-18446744073709551615 pid 1003\n"
		       "flock 4242 2/100:2 RD 0-18446744073709551615 pid 1002\n"
		       "wait flock 4242 3/100:3 WR 0-18446744073709551615 req 3\n"
		       "wait flock 4242 1/100:1 WR 0-18446744073709551615 req 2\n");
	lk_now(1, O2PT_FLOCK, 2, O2PT_RD, 0, 0, 0, 0); /* the same type again: a no-op */
	lk_now(1, O2PT_FLOCK, 2, O2PT_UN, 0, 0, 0, 0);
	/* the first waiter gets it */
	ck_assert(answer_of(2, w) && answer_of(2, w)->error == 0);
	ck_assert(!answer_of(0, c));
	/* the release of the open file drops its flock lock */
	uint8_t buf[O2PT_MSG_SMALL];
	send(2, buf, o2pt_msg_drop(buf, sizeof(buf), 77, INO, O2PT_FLOCK, 3));
	ck_assert(answer_of(0, c) && answer_of(0, c)->error == 0);
	/* two owners on one node conflict */
	lk_now(0, O2PT_FLOCK, 9, O2PT_RD, 0, 0, 0, -EAGAIN);
}
END_TEST

START_TEST(test_member_leaves)
{
	group_of(3);
	lk_now(0, O2PT_POSIX, 1, O2PT_WR, 0, 9, 0, 0);
	lk_now(0, O2PT_FLOCK, 1, O2PT_WR, 0, 0, 0, 0);
	uint64_t w1 = lk_waits(1, O2PT_POSIX, 2, O2PT_WR, 0, 0);
	uint64_t w2 = lk_waits(1, O2PT_FLOCK, 2, O2PT_RD, 0, 0);
	lk_waits(2, O2PT_POSIX, 3, O2PT_WR, 0, 0);
	leave(2); /* its waiter goes with it */
	leave(0); /* its locks go: the waiters are granted */
	ck_assert(answer_of(1, w1) && answer_of(1, w1)->error == 0);
	ck_assert(answer_of(1, w2) && answer_of(1, w2)->error == 0);
	expect_dump(1, "posix 4242 2/100:2 WR 0-0 pid 1002\n"
		       "flock 4242 2/100:2 RD 0-18446744073709551615 pid 1002\n");
}
END_TEST

/* a member that fails loses its file locks at once, as one that leaves (not frozen) */
START_TEST(test_member_fails)
{
	static const uint32_t reasons[] = { O2LT_REASON_NODEDOWN, O2LT_REASON_PROCDOWN };
	group_of(3);
	for (size_t i = 0; i < G_N_ELEMENTS(reasons); i++) {
		int holder = (int)i;
		lk_now(holder, O2PT_POSIX, 1, O2PT_WR, 0, O2PT_EOF, 0, 0);
		lk_now(holder, O2PT_FLOCK, 1, O2PT_WR, 0, 0, 0, 0);
		uint64_t w1 = lk_waits(2, O2PT_POSIX, 3, O2PT_RD, 7, 7);
		uint64_t w2 = lk_waits(2, O2PT_FLOCK, 3, O2PT_WR, 0, 0);
		leave_reason = reasons[i];
		leave(holder);
		ck_assert(answer_of(2, w1) && answer_of(2, w1)->error == 0);
		ck_assert(answer_of(2, w2) && answer_of(2, w2)->error == 0);
		uint8_t buf[O2PT_MSG_SMALL];
		send(2, buf, o2pt_msg_drop(buf, sizeof(buf), 1000 + i, INO, O2PT_POSIX, 3));
		send(2, buf, o2pt_msg_drop(buf, sizeof(buf), 2000 + i, INO, O2PT_FLOCK, 3));
		expect_dump(2, "");
	}
}
END_TEST

START_TEST(test_join_snapshot)
{
	group_of(2);
	lk_now(0, O2PT_POSIX, 1, O2PT_WR, 0, 9, 0, 0);
	lk_now(1, O2PT_FLOCK, 2, O2PT_RD, 0, 0, 0, 0);
	lk_waits(1, O2PT_POSIX, 2, O2PT_RD, 5, 20);
	hold = true; /* traffic between the join and the snapshot */
	join(2);
	ck_assert(!o2pt_synced(nodes[2].t));
	lk_now(0, O2PT_POSIX, 1, O2PT_UN, 0, 9, 0, 0);
	lk_now(0, O2PT_POSIX, 1, O2PT_WR, 100, 100, 0, 0);
	release_held();
	ck_assert(o2pt_synced(nodes[2].t));
	/* the joiner decides like the others (check_all compares the dumps) */
	lk_now(2, O2PT_POSIX, 3, O2PT_WR, 100, 100, 0, -EAGAIN);
	lk_now(2, O2PT_FLOCK, 3, O2PT_RD, 0, 0, 0, 0);
	lk_now(0, O2PT_POSIX, 1, O2PT_UN, 100, 100, 0, 0);
	lk_now(2, O2PT_POSIX, 3, O2PT_WR, 100, 100, 0, 0);
}
END_TEST

START_TEST(test_join_sender_leaves)
{
	group_of(2);
	lk_now(1, O2PT_POSIX, 2, O2PT_WR, 0, 9, 0, 0);
	hold = true;
	join(2);
	lk_now(1, O2PT_POSIX, 2, O2PT_RD, 20, 29, 0, 0);
	/* node 0 was to send the snapshot; it leaves before it goes out */
	leave(0);
	release_held(); /* node 0's snapshot is never delivered; node 1's is */
	ck_assert(o2pt_synced(nodes[2].t));
	lk_now(2, O2PT_POSIX, 3, O2PT_WR, 25, 25, 0, -EAGAIN);
	/* nobody left to send one: the joiner fails */
	hold = true;
	join(3);
	leave(1);
	leave(2);
	release_held();
	ck_assert(!o2pt_synced(nodes[3].t));
}
END_TEST

START_TEST(test_unsynced_requests)
{
	group_of(1);
	hold = true;
	join(1);
	/* node 1 sends before it is synced: refused everywhere (it may not hear it) */
	uint8_t buf[O2PT_MSG_SMALL];
	send(1, buf, o2pt_msg_lock(buf, sizeof(buf), 5, INO, O2PT_POSIX, 2, O2PT_WR, 0, 0, 0, 1));
	release_held();
	expect_dump(0, "");
}
END_TEST

START_TEST(test_malformed)
{
	group_of(2);
	lk_now(0, O2PT_POSIX, 1, O2PT_WR, 0, 9, 0, 0);
	uint8_t buf[O2PT_MSG_SMALL];
	ssize_t len = o2pt_msg_lock(buf, sizeof(buf), 9, INO, O2PT_POSIX, 2, O2PT_WR, 0, 0, 0, 1);
	ck_assert_int_gt(len, 0);
	/* every truncation, a byte too many */
	for (ssize_t l = 0; l < len; l++) {
		deliver_raw(1, buf, (size_t)l);
		ck_assert_int_eq(nodes[0].rc, -EBADMSG);
		ck_assert_int_eq(nodes[1].rc, -EBADMSG);
	}
	uint8_t big[O2PT_MSG_SMALL + 1];
	memcpy(big, buf, (size_t)len);
	big[len] = 0;
	deliver_raw(1, big, (size_t)len + 1);
	ck_assert_int_eq(nodes[1].rc, -EBADMSG);
	/* bad fields: version, kind, namespace, type, flags, range */
	static const struct {
		size_t off;
		uint8_t val;
	} bad[] = { { 1, 9 }, { 2, 0 }, { 2, 99 }, { 48, 7 }, { 49, 3 }, { 50, 0x80 } };
	for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
		uint8_t m[O2PT_MSG_SMALL];
		memcpy(m, buf, (size_t)len);
		m[bad[i].off] = bad[i].val;
		deliver_raw(1, m, (size_t)len);
		ck_assert_msg(nodes[0].rc == -EBADMSG, "field at %zu", bad[i].off);
	}
	/* start after end */
	uint8_t m[O2PT_MSG_SMALL];
	memcpy(m, buf, (size_t)len);
	m[28] = 5; /* start = 5, end = 0 */
	deliver_raw(1, m, (size_t)len);
	ck_assert_int_eq(nodes[0].rc, -EBADMSG);
	/* random bytes, some of them well-formed: never a crash, tables alike */
	GRand *rnd = g_rand_new_with_seed(24);
	for (int i = 0; i < 2000; i++) {
		uint8_t r[96];
		size_t l = (size_t)g_rand_int_range(rnd, 0, sizeof(r));
		for (size_t k = 0; k < l; k++)
			r[k] = (uint8_t)g_rand_int(rnd);
		if (l > 2 && i % 2)
			r[0] = 0x50, r[1] = 1, r[2] = (uint8_t)g_rand_int_range(rnd, 1, 5);
		deliver_raw(1, r, l);
	}
	g_rand_free(rnd);
	/* a bad snapshot for a joiner: refused everywhere, the joiner waits for the real one */
	hold = true;
	join(2);
	uint8_t snap[20] = { 0x50, 1, 4, 0 };
	snap[12] = 3, snap[16] = 100; /* for node 3 (index 2), truncated */
	deliver_raw(1, snap, sizeof(snap));
	ck_assert_int_eq(nodes[0].rc, -EBADMSG);
	ck_assert_int_eq(nodes[1].rc, -EBADMSG);
	ck_assert(!o2pt_synced(nodes[2].t));
	release_held();
	ck_assert(o2pt_synced(nodes[2].t));
	expect_dump(2, "posix 4242 1/100:1 WR 0-9 pid 1001\n");
	/* the encoders refuse what they cannot say */
	ck_assert_int_eq(o2pt_msg_lock(buf, sizeof(buf), 1, 1, 7, 1, O2PT_WR, 0, 0, 0, 1), -EINVAL);
	ck_assert_int_eq(o2pt_msg_lock(buf, sizeof(buf), 1, 1, 0, 1, O2PT_WR, 9, 0, 0, 1), -EINVAL);
	ck_assert_int_eq(o2pt_msg_lock(buf, 10, 1, 1, 0, 1, O2PT_WR, 0, 0, 0, 1), -ENOBUFS);
	ck_assert_int_eq(o2pt_msg_drop(buf, sizeof(buf), 1, 1, 5, 1), -EINVAL);
}
END_TEST

/*
 * Random traffic on up to four members, which leave (cleanly or not) and
 * join again, some joiners' snapshots held back behind more traffic, with
 * now and then a message of random bytes: every table stays sound and the
 * synced ones agree (check_all, after every input).
 */
START_TEST(test_random)
{
	static const uint32_t reasons[] = { O2LT_REASON_LEAVE, O2LT_REASON_NODEDOWN,
					    O2LT_REASON_PROCDOWN };
	group_of(3);
	GRand *rnd = g_rand_new_with_seed(2024);
	int held_for = 0, joins = 0;
	for (int i = 0; i < 4000; i++) {
		int node = g_rand_int_range(rnd, 0, MAX_NODES);
		int ns = g_rand_int_range(rnd, 0, 2);
		uint64_t owner = (uint64_t)g_rand_int_range(rnd, 1, 4);
		int type = g_rand_int_range(rnd, 0, 3);
		uint64_t s = (uint64_t)g_rand_int_range(rnd, 0, 40);
		uint64_t e = g_rand_int_range(rnd, 0, 10) ? s + (uint64_t)g_rand_int_range(rnd, 0, 20)
							  : O2PT_EOF;
		unsigned flags = type == O2PT_UN ? 0 : (unsigned)g_rand_int_range(rnd, 0, 4);
		int what = g_rand_int_range(rnd, 0, 100);
		uint8_t buf[O2PT_MSG_SMALL];
		if (held_for > 0 && --held_for == 0)
			release_held();
		if (what < 2) {
			int present = 0;
			for (int k = 0; k < MAX_NODES; k++)
				present += nodes[k].present;
			if (!nodes[node].present) {
				hold = held_for == 0 && g_rand_boolean(rnd);
				if (hold)
					held_for = g_rand_int_range(rnd, 1, 8);
				join(node);
				joins++;
			} else if (present > 1) {
				leave_reason = reasons[g_rand_int_range(rnd, 0, 3)];
				leave(node);
			}
			continue;
		}
		if (!nodes[node].present)
			continue;
		if (what == 2) {
			uint8_t r[64];
			size_t l = (size_t)g_rand_int_range(rnd, 0, sizeof(r));
			for (size_t k = 0; k < l; k++)
				r[k] = (uint8_t)g_rand_int(rnd);
			deliver_raw(node, r, l);
			pump();
			continue;
		}
		if (!o2pt_synced(nodes[node].t))
			continue; /* the daemon sends nothing before it is synced */
		if (what < 8) {
			send(node, buf, o2pt_msg_drop(buf, sizeof(buf), nodes[node].next_reqid++, INO,
						      ns, owner));
		} else if (what < 12) {
			uint64_t back = (uint64_t)g_rand_int_range(rnd, 1, 10);
			uint64_t target = nodes[node].next_reqid > back ? nodes[node].next_reqid - back : 1;
			send(node, buf, o2pt_msg_cancel(buf, sizeof(buf), nodes[node].next_reqid++,
							target));
		} else {
			lk(node, ns, owner, type, s, e, flags);
		}
	}
	release_held();
	ck_assert_int_gt(joins, 10);
	for (int k = 0; k < MAX_NODES; k++)
		ck_assert(!nodes[k].present || o2pt_synced(nodes[k].t));
	g_rand_free(rnd);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("plocktab");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_posix_ranges);
	tcase_add_test(tc, test_posix_split_merge);
	tcase_add_test(tc, test_posix_wait);
	tcase_add_test(tc, test_cancel);
	tcase_add_test(tc, test_deadlock);
	tcase_add_test(tc, test_flock);
	tcase_add_test(tc, test_member_leaves);
	tcase_add_test(tc, test_member_fails);
	tcase_add_test(tc, test_join_snapshot);
	tcase_add_test(tc, test_join_sender_leaves);
	tcase_add_test(tc, test_unsynced_requests);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_random);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
