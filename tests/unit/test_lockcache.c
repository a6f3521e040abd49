// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The lock cache (daemon/lockcache.h) over the real lock table.
 *
 * A group of members lives in this one process: each has a lock table
 * (cpg/locktab.h) and a cache on top of it.  What a cache sends goes onto
 * one ordered bus and is delivered to every table in that order, as CPG
 * would; each table's events for its own member go to its cache.  The bus,
 * the tables and the caches' service side run on a service thread with a
 * main loop of its own; the test's local users are other threads, as the
 * daemon's FUSE workers are.  The cluster suite runs the same cache over
 * real corosync (tests/cluster).
 *
 * The resources model what a cluster filesystem keeps under a lock: a
 * "disk" value that every member can read, a per-member cached copy that
 * is good only while the lock is held at PR or better, written back on
 * downconvert from EX, refreshed after regaining the lock.  Lost updates,
 * stale reads and deadlocks are what these tests look for.
 */
#include "lockcache.h"
#include "lockname.h"

#include <check.h>
#include <errno.h>
#include <glib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 3
#define WAIT_S 30

struct member {
	struct o2lt_member id;
	struct o2lt_table *t;
	struct o2lc *c;
	bool synced;
	int64_t next_reqid;
	/* the state this member caches under lock "counter" */
	uint64_t cached;
	GMutex mu; /* local users' exclusion (the cache's EX is between members) */
	int fail_downconverts; /* make this many downconverts fail first */
	unsigned downconverts_seen;
};

struct busmsg {
	struct o2lt_member sender;
	void *data;
	size_t len;
};

static struct member mem[N];
static int n_members;
static GMainContext *ctx;
static GMainLoop *loop;
static GThread *svc;
/* the bus: members post from any thread (the cache sends from its callers') */
static GMutex bus_mu;
static GQueue bus;
static bool pump_queued;
static uint64_t disk; /* what the "disk" holds for lock "counter" */
static GMutex disk_mu;

/* ---- the service thread ---- */

static gpointer svc_main(gpointer p)
{
	(void)p;
	g_main_context_push_thread_default(ctx);
	g_main_loop_run(loop);
	g_main_context_pop_thread_default(ctx);
	return NULL;
}

struct call {
	void (*fn)(void *);
	void *arg;
	bool done;
	GMutex mu;
	GCond cond;
};

static gboolean call_run(gpointer p)
{
	struct call *cl = p;
	cl->fn(cl->arg);
	g_mutex_lock(&cl->mu);
	cl->done = true;
	g_cond_signal(&cl->cond);
	g_mutex_unlock(&cl->mu);
	return G_SOURCE_REMOVE;
}

/* run fn(arg) on the service thread and wait for it */
static void on_service(void (*fn)(void *), void *arg)
{
	struct call cl = { .fn = fn, .arg = arg };
	g_mutex_init(&cl.mu);
	g_cond_init(&cl.cond);
	g_main_context_invoke(ctx, call_run, &cl);
	g_mutex_lock(&cl.mu);
	while (!cl.done)
		g_cond_wait(&cl.cond, &cl.mu);
	g_mutex_unlock(&cl.mu);
	g_mutex_clear(&cl.mu);
	g_cond_clear(&cl.cond);
}

static void bus_send(struct o2lt_member sender, const void *data, size_t len);

static void on_event(const struct o2lt_event *ev, void *data)
{
	struct member *m = data;
	switch (ev->type) {
	case O2LT_EV_SYNCED:
		m->synced = true;
		break;
	case O2LT_EV_SEND_SNAPSHOT: {
		void *msg;
		size_t len;
		ck_assert_int_eq(o2lt_snapshot(m->t, ev->member, &msg, &len), 0);
		bus_send(m->id, msg, len);
		g_free(msg);
		break;
	}
	default:
		if (ev->member.nodeid == m->id.nodeid && ev->member.pid == m->id.pid && m->c)
			o2lc_event(m->c, ev);
		break;
	}
}

/* deliver everything on the bus to every table, in order */
static gboolean pump(gpointer p)
{
	(void)p;
	struct busmsg *b;
	for (;;) {
		g_mutex_lock(&bus_mu);
		b = g_queue_pop_head(&bus);
		if (!b)
			pump_queued = false;
		g_mutex_unlock(&bus_mu);
		if (!b)
			break;
		for (int i = 0; i < n_members; i++)
			ck_assert_int_eq(o2lt_deliver(mem[i].t, b->sender, b->data, b->len), 0);
		g_free(b->data);
		g_free(b);
	}
	return G_SOURCE_REMOVE;
}

static void bus_send(struct o2lt_member sender, const void *data, size_t len)
{
	struct busmsg *b = g_new(struct busmsg, 1);
	b->sender = sender;
	b->data = g_memdup2(data, len);
	b->len = len;
	g_mutex_lock(&bus_mu);
	g_queue_push_tail(&bus, b);
	if (!pump_queued) {
		pump_queued = true;
		GSource *s = g_idle_source_new();
		g_source_set_callback(s, pump, NULL, NULL);
		g_source_attach(s, ctx);
		g_source_unref(s);
	}
	g_mutex_unlock(&bus_mu);
}

/* ---- the backend: the lock table's encoders onto the bus ---- */

static int64_t be_send(struct member *m, ssize_t len, const uint8_t *buf)
{
	if (len < 0)
		return len;
	bus_send(m->id, buf, (size_t)len);
	return m->next_reqid - 1;
}

static int64_t be_lock(void *be, const void *name, size_t namelen, int mode, unsigned flags)
{
	struct member *m = be;
	uint8_t buf[O2LT_MSG_SMALL];
	return be_send(m, o2lt_msg_lock(buf, sizeof(buf), (uint64_t)m->next_reqid++, name, namelen, mode, flags),
		       buf);
}

static int64_t be_down(void *be, const void *name, size_t namelen, int new_mode, const void *lvb)
{
	struct member *m = be;
	uint8_t buf[O2LT_MSG_SMALL];
	return be_send(m, o2lt_msg_down(buf, sizeof(buf), (uint64_t)m->next_reqid++, name, namelen,
					new_mode, lvb), buf);
}

static int64_t be_cancel(void *be, const void *name, size_t namelen)
{
	struct member *m = be;
	uint8_t buf[O2LT_MSG_SMALL];
	return be_send(m, o2lt_msg_cancel(buf, sizeof(buf), (uint64_t)m->next_reqid++, name, namelen), buf);
}

/* new locks announced together: one BATCH on the bus */
static int64_t be_lock_batch(void *be, const struct o2lc_lockreq *reqs, size_t n)
{
	struct member *m = be;
	size_t cap = n * O2LT_MSG_SMALL, len = 0;
	g_autofree uint8_t *locks = g_malloc(cap);
	g_autofree uint8_t *buf = g_malloc(cap + O2LT_MSG_SMALL);
	int64_t first = m->next_reqid;

	for (size_t i = 0; i < n; i++) {
		ssize_t l = o2lt_msg_lock(locks + len, cap - len, (uint64_t)m->next_reqid++,
					  reqs[i].name, reqs[i].namelen, reqs[i].mode, reqs[i].flags);
		if (l < 0)
			return l;
		len += (size_t)l;
	}
	ssize_t l = o2lt_msg_batch(buf, cap + O2LT_MSG_SMALL, locks, len);
	if (l < 0)
		return l;
	bus_send(m->id, buf, (size_t)l);
	return first;
}

static const struct o2lc_backend backend = { be_lock, be_down, be_cancel, be_lock_batch };

/* members join one at a time, each synced (by snapshot) before the next */
static void form_group(void *arg)
{
	int n = *(int *)arg;
	struct o2lt_member all[N];
	for (int i = 0; i < n; i++) {
		struct member *m = &mem[i];
		m->id = (struct o2lt_member){ .nodeid = (uint32_t)i + 1, .pid = 100 + (uint32_t)i };
		m->next_reqid = 1;
		m->t = o2lt_new(m->id, on_event, m);
		ck_assert_ptr_nonnull(m->t);
		all[i] = m->id;
		n_members = i + 1;
		struct o2lt_confchg cc = { .members = all, .n_members = (size_t)i + 1,
					   .joined = &all[i], .n_joined = 1 };
		for (int j = 0; j <= i; j++)
			ck_assert_int_eq(o2lt_confchg(mem[j].t, &cc), 0);
		pump(NULL);
		ck_assert_msg(m->synced, "member %d did not sync", i);
		m->c = o2lc_new(&backend, m);
	}
}

static void setup(void)
{
	memset(mem, 0, sizeof(mem));
	n_members = 0;
	disk = 0;
	g_queue_init(&bus);
	pump_queued = false;
	ctx = g_main_context_new();
	loop = g_main_loop_new(ctx, FALSE);
	svc = g_thread_new("service", svc_main, NULL);
	int n = N;
	on_service(form_group, &n);
}

static void free_all(void *arg)
{
	(void)arg;
	for (int i = 0; i < n_members; i++) {
		o2lc_free(mem[i].c);
		mem[i].c = NULL;
	}
}

static void free_tables(void *arg)
{
	(void)arg;
	pump(NULL);
	for (int i = 0; i < n_members; i++)
		o2lt_free(mem[i].t);
}

static void teardown(void)
{
	on_service(free_all, NULL);
	on_service(free_tables, NULL); /* after the sends the caches left queued */
	g_main_loop_quit(loop);
	g_thread_join(svc);
	g_main_loop_unref(loop);
	g_main_context_unref(ctx);
	struct busmsg *b;
	while ((b = g_queue_pop_head(&bus))) {
		g_free(b->data);
		g_free(b);
	}
}

/* ---- the modelled filesystem state under lock "counter" ---- */

static int counter_downconvert(struct o2lc_res *r, int from, int to, uint8_t *lvb, void *data)
{
	(void)r;
	(void)to;
	struct member *m = data;
	m->downconverts_seen++;
	if (m->fail_downconverts > 0) {
		m->fail_downconverts--;
		return -EIO;
	}
	if (from == O2LT_EX) {
		g_mutex_lock(&disk_mu);
		disk = m->cached; /* write back */
		g_mutex_unlock(&disk_mu);
		memcpy(lvb, &m->cached, sizeof(m->cached));
	}
	return 0;
}

static const struct o2lc_res_ops counter_ops = { .downconvert = counter_downconvert };

static struct o2lc_res *counter(int i)
{
	struct o2lc_res *r = o2lc_res_get(mem[i].c, "counter", 7, &counter_ops, &mem[i]);
	ck_assert_ptr_nonnull(r);
	return r;
}

/* take the counter lock for member i, refreshing from the value block (or the disk) */
static int take(int i, int mode, unsigned flags)
{
	struct o2lc_res *r = counter(i);
	int rc = o2lc_lock(r, mode, flags);
	if (rc == O2LC_REFRESH) {
		uint8_t lvb[O2LC_LVB_LEN];
		if (o2lc_lvb(r, lvb)) {
			memcpy(&mem[i].cached, lvb, sizeof(mem[i].cached));
			g_mutex_lock(&disk_mu);
			ck_assert_uint_eq(mem[i].cached, disk); /* the value block agrees with the disk */
			g_mutex_unlock(&disk_mu);
		} else {
			g_mutex_lock(&disk_mu);
			mem[i].cached = disk;
			g_mutex_unlock(&disk_mu);
		}
		o2lc_refresh_done(r, true);
		rc = 0;
	}
	return rc;
}

static struct o2lc_stats stats(int i)
{
	struct o2lc_stats st;
	o2lc_stats(mem[i].c, &st);
	return st;
}

/* ---- tests ---- */

/* Lock names read back as written; anything else is refused. */
START_TEST(test_lockname_parse)
{
	char buf[O2_LOCKNAME_LEN + 1], type;
	uint64_t blkno;
	uint32_t gen;
	size_t len = o2_lockname(O2_LOCK_META, 0xfedcba9876543210ull, 0x89abcdefu, buf);

	ck_assert_str_eq(buf, "M000000fedcba987654321089abcdef");
	ck_assert_int_eq(o2_lockname_parse(buf, len, &type, &blkno, &gen), 0);
	ck_assert_int_eq(type, 'M');
	ck_assert_uint_eq(blkno, 0xfedcba9876543210ull);
	ck_assert_uint_eq(gen, 0x89abcdefu);
	o2_lockname(O2_LOCK_RENAME, 0, 0, buf);
	ck_assert_int_eq(o2_lockname_parse(buf, len, &type, &blkno, &gen), 0);
	ck_assert_uint_eq(blkno, 0);
	ck_assert_int_eq(o2_lockname_parse(buf, len - 1, &type, &blkno, &gen), -EINVAL);
	ck_assert_int_eq(o2_lockname_parse("M000001fedcba987654321089abcdef", len, &type, &blkno,
					   &gen), -EINVAL);
	ck_assert_int_eq(o2_lockname_parse("M000000fedcba98765432108FFFFFFF", len, &type, &blkno,
					   &gen), -EINVAL);
	ck_assert_int_eq(o2_lockname_parse("M000000fedcba98765432x089abcdef", len, &type, &blkno,
					   &gen), -EINVAL);
}
END_TEST

START_TEST(test_cached_after_last_user)
{
	for (int k = 0; k < 1000; k++) {
		ck_assert_int_eq(take(0, k % 2 ? O2LT_PR : O2LT_EX, 0), 0);
		if (k % 2 == 0)
			mem[0].cached++;
		o2lc_unlock(counter(0), k % 2 ? O2LT_PR : O2LT_EX);
	}
	struct o2lc_stats st = stats(0);
	ck_assert_uint_eq(st.locks, 1000);
	ck_assert_uint_eq(st.requests, 1); /* one EX grant served all of them */
	ck_assert_uint_eq(st.downconverts, 0);
	ck_assert_int_eq(o2lc_res_mode(counter(0)), O2LT_EX);
	ck_assert_uint_eq(mem[0].cached, 500);
	ck_assert_uint_eq(disk, 0); /* nobody asked: nothing written back yet */
	ck_assert_uint_le(st.waits, 1); /* at most the first, for its grant */
	ck_assert_uint_eq(st.writeback_us, 0);

	/* another member reads: member 0 writes back and goes to PR */
	ck_assert_int_eq(take(1, O2LT_PR, 0), 0);
	ck_assert_uint_eq(mem[1].cached, 500);
	ck_assert_uint_eq(disk, 500);
	ck_assert_int_eq(o2lc_res_mode(counter(0)), O2LT_PR);
	/* member 1 waited for the grant, behind member 0's write-back */
	ck_assert_uint_ge(stats(1).waits, 1);
	o2lc_unlock(counter(1), O2LT_PR);
	/* both keep PR: reading again costs nothing on either */
	ck_assert_int_eq(take(0, O2LT_PR, 0), 0);
	ck_assert_int_eq(take(1, O2LT_PR, 0), 0);
	o2lc_unlock(counter(0), O2LT_PR);
	o2lc_unlock(counter(1), O2LT_PR);
	ck_assert_uint_eq(stats(1).requests, 1);
	ck_assert_uint_eq(stats(0).requests, 1);
}
END_TEST

struct worker {
	int member;
	int iterations;
	GThread *thread;
};

static gpointer increment(gpointer p)
{
	struct worker *w = p;
	for (int k = 0; k < w->iterations; k++) {
		ck_assert_int_eq(take(w->member, O2LT_EX, 0), 0);
		g_mutex_lock(&mem[w->member].mu);
		uint64_t v = mem[w->member].cached;
		if (k % 7 == 0)
			g_usleep(100);
		mem[w->member].cached = v + 1;
		g_mutex_unlock(&mem[w->member].mu);
		o2lc_unlock(counter(w->member), O2LT_EX);
		if (k % 5 == 0) { /* a reader in between */
			ck_assert_int_eq(take(w->member, O2LT_PR, 0), 0);
			o2lc_unlock(counter(w->member), O2LT_PR);
		}
	}
	return NULL;
}

static uint64_t final_value(int i)
{
	ck_assert_int_eq(take(i, O2LT_PR, 0), 0);
	uint64_t v = mem[i].cached;
	o2lc_unlock(counter(i), O2LT_PR);
	return v;
}

START_TEST(test_no_lost_update)
{
	/* two threads on each member: local users share the cached lock, and
	   the members take turns through downconverts */
	struct worker w[2 * N];
	for (int i = 0; i < 2 * N; i++) {
		w[i] = (struct worker){ .member = i % N, .iterations = 300 };
		w[i].thread = g_thread_new("worker", increment, &w[i]);
	}
	for (int i = 0; i < 2 * N; i++)
		g_thread_join(w[i].thread);
	for (int i = 0; i < N; i++)
		ck_assert_uint_eq(final_value(i), 2 * N * 300);
	uint64_t requests = 0, locks = 0, downconverts = 0;
	for (int i = 0; i < N; i++) {
		struct o2lc_stats st = stats(i);
		requests += st.requests;
		locks += st.locks;
		downconverts += st.downconverts;
	}
	ck_assert_uint_ge(downconverts, 1);
	ck_assert_uint_lt(requests, locks); /* local users shared grants */
}
END_TEST

struct taker {
	int member, mode;
	int rc;
	gint done;
	GThread *thread;
};

static gpointer take_thread(gpointer p)
{
	struct taker *t = p;
	t->rc = take(t->member, t->mode, 0);
	g_atomic_int_set(&t->done, 1);
	return NULL;
}

static void start_taker(struct taker *t, int member, int mode)
{
	*t = (struct taker){ .member = member, .mode = mode };
	t->thread = g_thread_new("taker", take_thread, t);
}

static bool wait_done(struct taker *t, unsigned ms)
{
	for (unsigned k = 0; k < ms / 5 && !g_atomic_int_get(&t->done); k++)
		g_usleep(5000);
	return g_atomic_int_get(&t->done);
}

START_TEST(test_holder_in_the_way)
{
	ck_assert_int_eq(take(0, O2LT_PR, 0), 0);
	ck_assert_int_eq(take(1, O2LT_PR, 0), 0); /* PR is shared */
	o2lc_unlock(counter(1), O2LT_PR);
	/* member 0 still uses it: member 1 may not have EX */
	ck_assert_int_eq(take(1, O2LT_EX, O2LC_NOQUEUE), -EAGAIN);
	struct taker t;
	start_taker(&t, 2, O2LT_EX);
	ck_assert(!wait_done(&t, 300));
	o2lc_unlock(counter(0), O2LT_PR); /* the last user leaves: it goes */
	ck_assert(wait_done(&t, WAIT_S * 1000));
	g_thread_join(t.thread);
	ck_assert_int_eq(t.rc, 0);
	mem[2].cached = 42;
	o2lc_unlock(counter(2), O2LT_EX);
	ck_assert_uint_eq(final_value(0), 42);
	ck_assert_uint_eq(final_value(1), 42);
}
END_TEST

START_TEST(test_conversion_deadlock)
{
	/* both hold PR cached, then both want EX at once: each conversion waits
	   on the other's PR until one cancels.  Whether a round deadlocks is
	   the threads' timing (one may convert before the other asks): at
	   least 20 rounds, and more until one did, up to 400 */
	int round;

	for (round = 0; round < 400 && (round < 20 || stats(0).cancels + stats(1).cancels == 0);
	     round++) {
		ck_assert_int_eq(take(0, O2LT_PR, 0), 0);
		ck_assert_int_eq(take(1, O2LT_PR, 0), 0);
		o2lc_unlock(counter(0), O2LT_PR);
		o2lc_unlock(counter(1), O2LT_PR);
		struct taker a, b;
		start_taker(&a, 0, O2LT_EX);
		start_taker(&b, 1, O2LT_EX);
		/* whoever gets it first lets the other in when it unlocks */
		struct taker *first = NULL, *second = NULL;
		for (int k = 0; k < WAIT_S * 200 && !first; k++) {
			if (g_atomic_int_get(&a.done))
				first = &a, second = &b;
			else if (g_atomic_int_get(&b.done))
				first = &b, second = &a;
			else
				g_usleep(5000);
		}
		ck_assert_msg(first, "round %d: neither conversion was granted (deadlock)", round);
		ck_assert_int_eq(first->rc, 0);
		mem[first->member].cached++;
		o2lc_unlock(counter(first->member), O2LT_EX);
		ck_assert_msg(wait_done(second, WAIT_S * 1000), "round %d: the second never got EX", round);
		ck_assert_int_eq(second->rc, 0);
		mem[second->member].cached++;
		o2lc_unlock(counter(second->member), O2LT_EX);
		g_thread_join(a.thread);
		g_thread_join(b.thread);
	}
	ck_assert_uint_eq(final_value(2), 2 * (uint64_t)round);
	ck_assert_uint_ge(stats(0).cancels + stats(1).cancels, 1);
}
END_TEST

static gint hammering;

static gpointer hammer(gpointer p)
{
	(void)p;
	while (g_atomic_int_get(&hammering)) {
		ck_assert_int_eq(take(0, O2LT_EX, 0), 0);
		g_mutex_lock(&mem[0].mu);
		mem[0].cached++;
		g_mutex_unlock(&mem[0].mu);
		o2lc_unlock(counter(0), O2LT_EX);
	}
	return NULL;
}

START_TEST(test_no_starvation)
{
	/* member 0's local users take the lock back to back; another member's
	   request must still get in: a waiting node stops new local users */
	g_atomic_int_set(&hammering, 1);
	GThread *h1 = g_thread_new("hammer", hammer, NULL);
	GThread *h2 = g_thread_new("hammer", hammer, NULL);
	g_usleep(20000);
	for (int k = 0; k < 10; k++) {
		struct taker t;
		start_taker(&t, 1 + k % 2, O2LT_EX);
		ck_assert_msg(wait_done(&t, WAIT_S * 1000), "member %d starved", t.member);
		g_thread_join(t.thread);
		ck_assert_int_eq(t.rc, 0);
		mem[t.member].cached += 1000;
		o2lc_unlock(counter(t.member), O2LT_EX);
	}
	g_atomic_int_set(&hammering, 0);
	g_thread_join(h1);
	g_thread_join(h2);
	uint64_t v = final_value(1);
	ck_assert_uint_ge(v, 10000);
	ck_assert_uint_eq(v, final_value(2));
}
END_TEST

START_TEST(test_failed_writeback_retried)
{
	ck_assert_int_eq(take(0, O2LT_EX, 0), 0);
	mem[0].cached = 7;
	o2lc_unlock(counter(0), O2LT_EX);
	mem[0].fail_downconverts = 2;
	gint64 t0 = g_get_monotonic_time();
	ck_assert_int_eq(take(1, O2LT_PR, 0), 0);
	gint64 waited = g_get_monotonic_time() - t0;
	/* two failures, a second apart each: the data was not given up */
	ck_assert_uint_eq(mem[1].cached, 7);
	ck_assert_uint_eq(mem[0].downconverts_seen, 3);
	ck_assert_int_ge(waited, 2 * G_USEC_PER_SEC - 100000);
	o2lc_unlock(counter(1), O2LT_PR);
}
END_TEST

START_TEST(test_refresh_once)
{
	/* several local users arrive together after a regain: exactly one
	   refreshes, and the others wait for it */
	ck_assert_int_eq(take(1, O2LT_EX, 0), 0);
	mem[1].cached = 99;
	o2lc_unlock(counter(1), O2LT_EX);
	struct o2lc_res *r = counter(0);
	ck_assert_int_eq(o2lc_lock(r, O2LT_PR, 0), O2LC_REFRESH);
	struct taker t;
	start_taker(&t, 0, O2LT_PR);
	ck_assert(!wait_done(&t, 200)); /* waits for the refresh */
	o2lc_refresh_done(r, false);	 /* failed: the next user refreshes */
	ck_assert(wait_done(&t, WAIT_S * 1000));
	g_thread_join(t.thread);
	ck_assert_int_eq(t.rc, 0);
	ck_assert_uint_eq(mem[0].cached, 99);
	ck_assert_int_eq(o2lc_lock(r, O2LT_PR, 0), 0); /* refreshed by then */
	o2lc_unlock(r, O2LT_PR);
	o2lc_unlock(r, O2LT_PR);
	o2lc_unlock(r, O2LT_PR);
}
END_TEST

START_TEST(test_unrefreshed_not_written_back)
{
	/* member 1 writes 11; member 0 regains EX but its refresh fails: its
	   copy is stale, so lowering the lock must not write it back */
	ck_assert_int_eq(take(1, O2LT_EX, 0), 0);
	mem[1].cached = 11;
	o2lc_unlock(counter(1), O2LT_EX);
	mem[0].cached = 3; /* what member 0 last knew */
	struct o2lc_res *r = counter(0);
	ck_assert_int_eq(o2lc_lock(r, O2LT_EX, 0), O2LC_REFRESH);
	o2lc_refresh_done(r, false);
	o2lc_unlock(r, O2LT_EX);
	unsigned seen = mem[0].downconverts_seen;
	ck_assert_uint_eq(final_value(2), 11);
	ck_assert_uint_eq(mem[0].downconverts_seen, seen); /* no write-back asked */
	ck_assert_uint_eq(disk, 11);
}
END_TEST

static void lose(void *arg)
{
	o2lc_lost(mem[*(int *)arg].c);
}

START_TEST(test_lost)
{
	ck_assert_int_eq(take(0, O2LT_EX, 0), 0);
	struct taker t;
	start_taker(&t, 1, O2LT_EX);
	ck_assert(!wait_done(&t, 200));
	int one = 1;
	on_service(lose, &one);
	ck_assert(wait_done(&t, WAIT_S * 1000));
	g_thread_join(t.thread);
	ck_assert_int_eq(t.rc, -ENOTCONN);
	ck_assert_int_eq(take(1, O2LT_PR, 0), -ENOTCONN);
	o2lc_unlock(counter(0), O2LT_EX);
}
END_TEST

struct drop {
	int member;
	int rc;
};

static void drop(void *arg)
{
	struct drop *d = arg;
	d->rc = o2lc_drop_all(mem[d->member].c, ctx, WAIT_S * 1000);
}

START_TEST(test_drop_all)
{
	ck_assert_int_eq(take(0, O2LT_EX, 0), 0);
	struct drop d = { .member = 0 };
	on_service(drop, &d);
	ck_assert_int_eq(d.rc, -EBUSY); /* a local user still holds it */
	mem[0].cached = 5;
	o2lc_unlock(counter(0), O2LT_EX);
	on_service(drop, &d);
	ck_assert_int_eq(d.rc, 0);
	ck_assert_int_eq(o2lc_res_mode(counter(0)), -1);
	ck_assert_uint_eq(disk, 5);		 /* written back on the way out */
	ck_assert_uint_eq(final_value(2), 5); /* and the value block with it */
	/* member 0 has no entry left in the table: "member INC 1/100 ...",
	   and no "  INC holds ..." line */
	char *dump = o2lt_dump(mem[2].t);
	const char *line = strstr(dump, " 1/100 ");
	ck_assert_ptr_nonnull(line);
	while (line > dump && line[-1] != ' ')
		line--;
	char entry[32];
	snprintf(entry, sizeof(entry), "\n  %lu holds", strtoul(line, NULL, 10));
	ck_assert_msg(!strstr(dump, entry), "member 0 still holds a lock:\n%s", dump);
	g_free(dump);
}
END_TEST

/* ---- lock lifetime: forget, the LRU bound, drops racing new users ---- */

struct table_count {
	int member; /* whose entries */
	int table;  /* in whose table */
	unsigned n;
};

static void count_entries(void *arg)
{
	struct table_count *tc = arg;
	pump(NULL);
	char *dump = o2lt_dump(mem[tc->table].t);
	char pat[32];
	snprintf(pat, sizeof(pat), "\n  %d holds ", tc->member + 1); /* incarnations from 1 */
	tc->n = 0;
	for (const char *p = strstr(dump, pat); p; p = strstr(p + 1, pat))
		tc->n++;
	g_free(dump);
}

/* the locks member i has in the lock table, as member (i + 1) % N sees them */
static unsigned table_entries(int i)
{
	struct table_count tc = { .member = i, .table = (i + 1) % N };
	on_service(count_entries, &tc);
	return tc.n;
}

/* wait until member i's cache has at most n resources */
static bool wait_resources(int i, uint64_t n)
{
	for (int k = 0; k < WAIT_S * 200; k++) {
		if (stats(i).resources <= n)
			return true;
		g_usleep(5000);
	}
	return false;
}

START_TEST(test_forget_drops)
{
	struct o2lc_res *r = counter(0);
	ck_assert_int_eq(take(0, O2LT_EX, 0), 0);
	mem[0].cached = 9;
	o2lc_unlock(r, O2LT_EX);
	o2lc_res_put(r); /* take()'s reference */
	ck_assert_uint_eq(table_entries(0), 1);
	ck_assert_uint_eq(stats(0).unused, 0); /* test's reference still out */
	unsigned seen = mem[0].downconverts_seen;
	o2lc_res_forget(r);
	ck_assert(wait_resources(0, 0));
	ck_assert_uint_eq(mem[0].downconverts_seen, seen + 1); /* written back first */
	ck_assert_uint_eq(disk, 9);
	ck_assert_uint_eq(table_entries(0), 0); /* gone from the table */
	struct o2lc_stats st = stats(0);
	ck_assert_uint_eq(st.drops, 1);
	ck_assert_uint_eq(st.unused, 0);
	/* a new resource: it asks the service again and refreshes */
	ck_assert_uint_eq(final_value(2), 9);
	r = counter(0);
	ck_assert_int_eq(o2lc_res_mode(r), -1);
	mem[0].cached = 0;
	ck_assert_int_eq(o2lc_lock(r, O2LT_PR, 0), O2LC_REFRESH);
	o2lc_refresh_done(r, true);
	o2lc_unlock(r, O2LT_PR);
	ck_assert_uint_eq(stats(0).requests, 2);
}
END_TEST

START_TEST(test_forget_waits_for_holder)
{
	/* forgotten while another reference holds it: dropped only when that
	   one goes, never under a holder */
	struct o2lc_res *a = counter(0), *b = counter(0);
	ck_assert_ptr_eq(a, b);
	ck_assert_int_eq(o2lc_lock(a, O2LT_EX, 0), O2LC_REFRESH);
	o2lc_refresh_done(a, true);
	o2lc_res_forget(b);
	g_usleep(50000);
	ck_assert_int_eq(o2lc_res_mode(a), O2LT_EX);
	ck_assert_uint_eq(stats(0).drops, 0);
	mem[0].cached = 4;
	o2lc_unlock(a, O2LT_EX);
	g_usleep(50000);
	ck_assert_uint_eq(stats(0).drops, 0); /* still referenced: kept */
	ck_assert_int_eq(o2lc_res_mode(a), O2LT_EX);
	ck_assert_uint_eq(table_entries(0), 1);
	ck_assert_uint_eq(stats(0).downconverts, 0);
	o2lc_res_put(a);
	ck_assert(wait_resources(0, 0));
	ck_assert_uint_eq(disk, 4);
}
END_TEST

static int named_downconvert(struct o2lc_res *r, int from, int to, uint8_t *lvb, void *data)
{
	(void)r;
	(void)to;
	(void)lvb;
	(void)from;
	struct member *m = data;
	m->downconverts_seen++;
	return 0;
}

static const struct o2lc_res_ops named_ops = { .downconvert = named_downconvert };

START_TEST(test_lru_bound)
{
	enum { LIMIT = 10, NAMES = 200 };
	o2lc_set_limit(mem[0].c, LIMIT);
	for (int k = 0; k < NAMES; k++) {
		char name[32];
		int len = snprintf(name, sizeof(name), "M%030d", k);
		struct o2lc_res *r = o2lc_res_get(mem[0].c, name, (size_t)len, &named_ops, &mem[0]);
		int rc = o2lc_lock(r, k % 3 ? O2LT_PR : O2LT_EX, 0);
		ck_assert_int_eq(rc, O2LC_REFRESH);
		o2lc_refresh_done(r, true);
		o2lc_unlock(r, k % 3 ? O2LT_PR : O2LT_EX);
		o2lc_res_put(r);
		ck_assert_uint_le(stats(0).unused, LIMIT);
	}
	ck_assert(wait_resources(0, LIMIT));
	struct o2lc_stats st = stats(0);
	ck_assert_uint_eq(st.drops, NAMES - LIMIT);
	ck_assert_uint_eq(st.unused, LIMIT);
	ck_assert_uint_eq(table_entries(0), LIMIT);
	ck_assert_uint_eq(mem[0].downconverts_seen, NAMES - LIMIT); /* each one's write-back */
	/* the most recent ones stayed: taking them again costs no request */
	uint64_t req = st.requests;
	for (int k = NAMES - LIMIT; k < NAMES; k++) {
		char name[32];
		int len = snprintf(name, sizeof(name), "M%030d", k);
		struct o2lc_res *r = o2lc_res_get(mem[0].c, name, (size_t)len, &named_ops, &mem[0]);
		ck_assert_int_eq(o2lc_lock(r, O2LT_PR, 0), 0);
		o2lc_unlock(r, O2LT_PR);
		o2lc_res_put(r);
	}
	ck_assert_uint_eq(stats(0).requests, req);
	/* a smaller bound drops at once */
	o2lc_set_limit(mem[0].c, 2);
	ck_assert(wait_resources(0, 2));
	ck_assert_uint_eq(table_entries(0), 2);
}
END_TEST

/*
 * Many threads on every member lock names from a small set, each a counter
 * under its lock, while a bound of one unreferenced resource (and forgets)
 * drop them all the time: no increment may be lost, whatever order drops,
 * write-backs, new users of the same name and other members' requests
 * come in.
 */
#define RNAMES 4

struct slot {
	int member, name;
};

static uint64_t rdisk[RNAMES], rcached[N][RNAMES];
static struct slot slots[N][RNAMES];

static int slot_downconvert(struct o2lc_res *r, int from, int to, uint8_t *lvb, void *data)
{
	(void)r;
	(void)to;
	struct slot *sl = data;
	if (from == O2LT_EX) {
		g_mutex_lock(&disk_mu);
		rdisk[sl->name] = rcached[sl->member][sl->name];
		g_mutex_unlock(&disk_mu);
		memcpy(lvb, &rcached[sl->member][sl->name], sizeof(uint64_t));
	}
	return 0;
}

static const struct o2lc_res_ops slot_ops = { .downconvert = slot_downconvert };

static struct o2lc_res *slot_get(int i, int n)
{
	char name[8];
	snprintf(name, sizeof(name), "slot%d", n);
	return o2lc_res_get(mem[i].c, name, strlen(name), &slot_ops, &slots[i][n]);
}

static void slot_take(int i, int n, struct o2lc_res *r, int mode)
{
	int rc = o2lc_lock(r, mode, 0);
	ck_assert_int_ge(rc, 0);
	if (rc == O2LC_REFRESH) {
		uint8_t lvb[O2LC_LVB_LEN];
		uint64_t v;
		g_mutex_lock(&disk_mu);
		if (o2lc_lvb(r, lvb)) {
			memcpy(&v, lvb, sizeof(v));
			ck_assert_uint_eq(v, rdisk[n]);
		} else {
			v = rdisk[n];
		}
		g_mutex_unlock(&disk_mu);
		g_mutex_lock(&mem[i].mu);
		rcached[i][n] = v;
		g_mutex_unlock(&mem[i].mu);
		o2lc_refresh_done(r, true);
	}
}

static gint rincrements[RNAMES];

static gpointer random_worker(gpointer p)
{
	struct worker *w = p;
	GRand *rand = g_rand_new_with_seed((guint32)(w->member * 7919 + w->iterations + GPOINTER_TO_INT(w->thread)));
	for (int k = 0; k < w->iterations; k++) {
		int n = g_rand_int_range(rand, 0, RNAMES);
		struct o2lc_res *r = slot_get(w->member, n);
		if (g_rand_int_range(rand, 0, 4) == 0) {
			slot_take(w->member, n, r, O2LT_PR);
			o2lc_unlock(r, O2LT_PR);
		} else {
			slot_take(w->member, n, r, O2LT_EX);
			g_mutex_lock(&mem[w->member].mu);
			uint64_t v = rcached[w->member][n];
			if (k % 7 == 0)
				g_usleep(50);
			rcached[w->member][n] = v + 1;
			g_mutex_unlock(&mem[w->member].mu);
			g_atomic_int_inc(&rincrements[n]);
			o2lc_unlock(r, O2LT_EX);
		}
		if (g_rand_int_range(rand, 0, 5) == 0)
			o2lc_res_forget(r);
		else
			o2lc_res_put(r);
	}
	g_rand_free(rand);
	return NULL;
}

START_TEST(test_drops_no_lost_update)
{
	memset(rdisk, 0, sizeof(rdisk));
	memset(rcached, 0, sizeof(rcached));
	memset(rincrements, 0, sizeof(rincrements));
	for (int i = 0; i < N; i++) {
		for (int n = 0; n < RNAMES; n++)
			slots[i][n] = (struct slot){ i, n };
		o2lc_set_limit(mem[i].c, 1);
	}
	enum { THREADS = 3 };
	struct worker w[THREADS * N];
	for (int i = 0; i < THREADS * N; i++) {
		w[i] = (struct worker){ .member = i % N, .iterations = 400 + i };
		w[i].thread = g_thread_new("worker", random_worker, &w[i]);
	}
	for (int i = 0; i < THREADS * N; i++)
		g_thread_join(w[i].thread);
	uint64_t drops = 0;
	for (int i = 0; i < N; i++) {
		for (int n = 0; n < RNAMES; n++) {
			struct o2lc_res *r = slot_get(i, n);
			slot_take(i, n, r, O2LT_PR);
			ck_assert_msg(rcached[i][n] == (uint64_t)g_atomic_int_get(&rincrements[n]),
				      "member %d name %d: %" G_GUINT64_FORMAT " of %d increments", i, n,
				      rcached[i][n], g_atomic_int_get(&rincrements[n]));
			o2lc_unlock(r, O2LT_PR);
			o2lc_res_put(r);
		}
		drops += stats(i).drops;
	}
	ck_assert_uint_ge(drops, 100); /* the bound did drop, often */
	for (int i = 0; i < N; i++) {
		ck_assert(wait_resources(i, 1));
		ck_assert_uint_le(table_entries(i), 1);
	}
}
END_TEST

START_TEST(test_drop_then_new_user)
{
	/* a user takes the name again while its drop is in flight (the
	   write-back is slow): it waits for the drop, then asks again */
	ck_assert_int_eq(take(0, O2LT_EX, 0), 0);
	mem[0].cached = 21;
	struct o2lc_res *r = counter(0);
	o2lc_unlock(r, O2LT_EX);
	o2lc_res_put(r);
	mem[0].fail_downconverts = 1; /* the drop's write-back fails once: a second's retry */
	o2lc_res_forget(r);
	g_usleep(100000);
	unsigned seen = mem[0].downconverts_seen;
	ck_assert_uint_eq(seen, 1);
	/* during the retry wait the lock is still held: a new user may take it
	   (the drop is then abandoned) */
	r = counter(0);
	ck_assert_int_eq(o2lc_lock(r, O2LT_EX, 0), 0);
	mem[0].cached++;
	o2lc_unlock(r, O2LT_EX);
	g_usleep(1200000);
	ck_assert_int_eq(o2lc_res_mode(r), O2LT_EX); /* kept: it was wanted again */
	ck_assert_uint_eq(stats(0).drops, 0);
	/* now a drop that commits: the new user waits it out and asks again
	   (its refresh reads the disk: the table forgets a value block nobody
	   holds a lock for) */
	uint64_t req = stats(0).requests;
	o2lc_res_forget(r);
	ck_assert_int_eq(take(0, O2LT_PR, 0), 0);
	r = counter(0);
	ck_assert_uint_eq(mem[0].cached, 22);
	ck_assert_uint_eq(stats(0).requests, req + 1); /* asked the service again */
	ck_assert_uint_eq(disk, 22);
	o2lc_unlock(r, O2LT_PR);
	o2lc_res_put(r);
	ck_assert_uint_eq(final_value(1), 22);
	o2lc_res_put(r);
}
END_TEST

START_TEST(test_drop_gives_way)
{
	/* a drop whose write-back failed waits a second to try again; a local
	   user takes the lock meanwhile, and another node asks for PR: the
	   downconvert to PR that follows must not finish the drop under it */
	ck_assert_int_eq(take(0, O2LT_EX, 0), 0);
	mem[0].cached = 30;
	struct o2lc_res *r = counter(0);
	o2lc_unlock(r, O2LT_EX);
	o2lc_res_put(r);
	mem[0].fail_downconverts = 1;
	o2lc_res_forget(r);
	g_usleep(100000);
	ck_assert_uint_eq(mem[0].downconverts_seen, 1);
	r = counter(0);
	ck_assert_int_eq(o2lc_lock(r, O2LT_PR, 0), 0);
	struct taker t;
	start_taker(&t, 1, O2LT_PR);
	ck_assert(wait_done(&t, WAIT_S * 1000));
	g_thread_join(t.thread);
	ck_assert_int_eq(t.rc, 0);
	ck_assert_uint_eq(mem[1].cached, 30);
	ck_assert_int_eq(o2lc_res_mode(r), O2LT_PR); /* still held, as its user believes */
	ck_assert_uint_eq(table_entries(0), 1);
	ck_assert_uint_eq(stats(0).drops, 0);
	o2lc_unlock(r, O2LT_PR);
	o2lc_unlock(counter(1), O2LT_PR);
	o2lc_res_put(r);
	ck_assert_uint_eq(stats(0).unused, 1); /* back on the LRU */
}
END_TEST

START_TEST(test_bad_arguments)
{
	ck_assert_ptr_null(o2lc_res_get(mem[0].c, "", 0, NULL, NULL));
	char big[O2LC_NAME_MAX + 1];
	memset(big, 'x', sizeof(big));
	ck_assert_ptr_null(o2lc_res_get(mem[0].c, big, sizeof(big), NULL, NULL));
	ck_assert_ptr_nonnull(o2lc_res_get(mem[0].c, big, O2LC_NAME_MAX, NULL, NULL));
	struct o2lc_res *r = counter(0);
	ck_assert_ptr_eq(r, counter(0));
	ck_assert_int_eq(o2lc_lock(r, O2LT_NL, 0), -EINVAL);
	ck_assert_int_eq(o2lc_lock(r, 7, 0), -EINVAL);
}
END_TEST

/* r's mode once its cache has seen the service's answer (delivered after
   the other member's grant, maybe). */
static int mode_after(struct o2lc_res *r, int want)
{
	int m = o2lc_res_mode(r);
	for (int k = 0; k < WAIT_S * 200 && m != want; k++) {
		g_usleep(5000);
		m = o2lc_res_mode(r);
	}
	return m;
}

/*
 * Pages: a resource whose invalidate callback, like the kernel's page
 * cache invalidation, waits for a "page lock" that a reader in flight
 * holds while it waits for the same cluster lock.
 */
static struct {
	GMutex mu;
	GCond cond;
	bool page_locked;     /* the reader's page lock */
	bool inval_started;
	unsigned inval_runs;
	bool inval_timed_out; /* the callback gave up waiting: a deadlock */
} pg;

static void paged_invalidate(struct o2lc_res *r, void *data)
{
	(void)r;
	(void)data;
	gint64 until = g_get_monotonic_time() + 5 * G_TIME_SPAN_SECOND;
	g_mutex_lock(&pg.mu);
	pg.inval_started = true;
	pg.inval_runs++;
	g_cond_broadcast(&pg.cond);
	while (pg.page_locked)
		if (!g_cond_wait_until(&pg.cond, &pg.mu, until)) {
			pg.inval_timed_out = true;
			break;
		}
	g_mutex_unlock(&pg.mu);
}

static const struct o2lc_res_ops paged_ops = { .invalidate = paged_invalidate };

static struct o2lc_res *paged(int i)
{
	struct o2lc_res *r = o2lc_res_get(mem[i].c, "paged", 5, &paged_ops, &mem[i]);
	ck_assert_ptr_nonnull(r);
	return r;
}

static int take_paged(int i, int mode, unsigned flags)
{
	int rc = o2lc_lock(paged(i), mode, flags);
	if (rc == O2LC_REFRESH) {
		o2lc_refresh_done(paged(i), true);
		rc = 0;
	}
	return rc;
}

struct reader {
	unsigned flags;
	int rc;
	bool took_during_inval;
};

/* A read in flight: holds its page lock, then asks for the cluster lock
   once another node's request has started the invalidation. */
static gpointer reader_main(gpointer p)
{
	struct reader *rd = p;
	g_mutex_lock(&pg.mu);
	while (!pg.inval_started)
		g_cond_wait(&pg.cond, &pg.mu);
	g_mutex_unlock(&pg.mu);
	rd->rc = take_paged(0, O2LT_PR, rd->flags);
	g_mutex_lock(&pg.mu);
	rd->took_during_inval = rd->rc == 0 && !pg.inval_timed_out;
	pg.page_locked = false; /* the read is answered: its page unlocks */
	g_cond_broadcast(&pg.cond);
	g_mutex_unlock(&pg.mu);
	if (rd->rc == 0)
		o2lc_unlock(paged(0), O2LT_PR);
	return NULL;
}

static void paged_round(unsigned reader_flags, struct reader *rd)
{
	memset(&pg.inval_started, 0, sizeof(pg) - offsetof(__typeof__(pg), inval_started));
	ck_assert_int_eq(take_paged(0, O2LT_PR, 0), 0); /* member 0 caches pages */
	o2lc_unlock(paged(0), O2LT_PR);
	pg.page_locked = true;
	*rd = (struct reader){ .flags = reader_flags };
	GThread *t = g_thread_new("reader", reader_main, rd);
	/* member 1 wants EX: member 0 must drop its pages first */
	ck_assert_int_eq(take_paged(1, O2LT_EX, 0), 0);
	o2lc_unlock(paged(1), O2LT_EX);
	g_thread_join(t);
}

/* A read holding a page lock passes while the invalidation waits for it. */
START_TEST(test_invalidate_admits)
{
	struct reader rd;
	paged_round(O2LC_ADMIT, &rd);
	ck_assert_int_eq(rd.rc, 0);
	ck_assert(rd.took_during_inval);
	ck_assert(!pg.inval_timed_out);
	/* the reader may have cached a page the run had passed: it ran again */
	ck_assert_uint_ge(pg.inval_runs, 2);
	ck_assert_int_eq(mode_after(paged(0), O2LT_NL), O2LT_NL);
}
END_TEST

/* Without O2LC_ADMIT the same read waits, and the invalidation with it. */
START_TEST(test_invalidate_without_admit_waits)
{
	struct reader rd;
	paged_round(0, &rd);
	ck_assert(pg.inval_timed_out);
	ck_assert_int_eq(rd.rc, 0); /* it got the lock only after member 1 */
}
END_TEST

/* A writer's EX goes straight to NL when another node wants PR. */
START_TEST(test_nopr_lowers_to_nl)
{
	ck_assert_int_eq(take(0, O2LT_EX, O2LC_NOPR), 0);
	o2lc_unlock(counter(0), O2LT_EX);
	ck_assert_int_eq(take(1, O2LT_PR, 0), 0);
	o2lc_unlock(counter(1), O2LT_PR);
	ck_assert_int_eq(mode_after(counter(0), O2LT_NL), O2LT_NL);
	/* without it, EX goes to PR */
	ck_assert_int_eq(take(2, O2LT_EX, 0), 0);
	o2lc_unlock(counter(2), O2LT_EX);
	ck_assert_int_eq(take(0, O2LT_PR, 0), 0);
	o2lc_unlock(counter(0), O2LT_PR);
	ck_assert_int_eq(mode_after(counter(2), O2LT_PR), O2LT_PR);
}
END_TEST

/*
 * A prefetch asks without waiting; the lock that follows finds it granted.
 * What a prefetch got that nobody took yet gives way to another member
 * at once (no user is in its way), and the next lock asks again.
 */
START_TEST(test_prefetch)
{
	struct o2lc_res *r = counter(0);

	o2lc_prefetch(r, O2LT_EX, 0);
	ck_assert_int_eq(mode_after(r, O2LT_EX), O2LT_EX);
	ck_assert_uint_eq(stats(0).requests, 1);
	ck_assert_int_eq(take(0, O2LT_EX, 0), 0);
	ck_assert_uint_eq(stats(0).waits, 0); /* granted before it was wanted */
	ck_assert_uint_eq(stats(0).requests, 1);
	mem[0].cached++;
	/* held in the mode asked for: nothing more goes out */
	o2lc_prefetch(r, O2LT_PR, 0);
	o2lc_prefetch(r, O2LT_EX, 0);
	o2lc_unlock(r, O2LT_EX);
	ck_assert_uint_eq(stats(0).requests, 1);

	/* member 1 prefetches and never takes it: member 0 still gets it back */
	struct o2lc_res *r1 = counter(1);

	o2lc_prefetch(r1, O2LT_EX, 0);
	ck_assert_int_eq(mode_after(r1, O2LT_EX), O2LT_EX);
	ck_assert_uint_eq(disk, 1); /* member 0 wrote back for it */
	ck_assert_int_eq(take(0, O2LT_EX, 0), 0);
	/* member 1's table may hear of its own DOWN after member 0's grant */
	ck_assert_int_eq(mode_after(r1, O2LT_NL), O2LT_NL);
	mem[0].cached++;
	o2lc_unlock(r, O2LT_EX);
	/* and member 1's lock after that asks again, and sees both updates */
	ck_assert_uint_eq(final_value(1), 2);
	ck_assert_uint_eq(stats(1).requests, 2);
	/* bad modes are ignored */
	o2lc_prefetch(r1, O2LT_NL, 0);
	o2lc_prefetch(r1, 7, 0);
	ck_assert_uint_eq(stats(1).requests, 2);
}
END_TEST

/*
 * O2LC_TRY never waits: where o2lc_lock would, it answers -EWOULDBLOCK,
 * having asked as a prefetch does, so that the lock that follows (on any
 * thread) finds the request on its way.  With NOQUEUE it asks nothing.
 */
START_TEST(test_try)
{
	struct o2lc_res *r = counter(0);

	ck_assert_int_eq(take(0, O2LT_EX, O2LC_TRY), -EWOULDBLOCK);
	ck_assert_int_eq(mode_after(r, O2LT_EX), O2LT_EX);
	ck_assert_uint_eq(stats(0).requests, 1);
	ck_assert_int_eq(take(0, O2LT_EX, O2LC_TRY), 0); /* cached now: no wait */
	ck_assert_uint_eq(stats(0).waits, 0);
	mem[0].cached++;
	o2lc_unlock(r, O2LT_EX);

	/* member 1 holds it: tries wait for nobody and ask only once */
	ck_assert_int_eq(take(1, O2LT_EX, 0), 0);
	mem[1].cached++;
	ck_assert_int_eq(take(0, O2LT_PR, O2LC_TRY), -EWOULDBLOCK);
	ck_assert_int_eq(take(0, O2LT_PR, O2LC_TRY), -EWOULDBLOCK);
	ck_assert_int_eq(take(0, O2LT_PR, O2LC_TRY | O2LC_NOQUEUE), -EWOULDBLOCK);
	o2lc_unlock(counter(1), O2LT_EX);
	ck_assert_int_eq(mode_after(r, O2LT_PR), O2LT_PR);
	ck_assert_int_eq(take(0, O2LT_PR, O2LC_TRY), 0);
	ck_assert_uint_eq(mem[0].cached, 2); /* refreshed: member 1's update seen */
	o2lc_unlock(r, O2LT_PR);
	ck_assert_uint_eq(stats(0).requests, 2);
	ck_assert_uint_eq(stats(0).waits, 0);

	/* a NOQUEUE try of a lock not held sends nothing */
	struct o2lc_res *r2 = counter(2);

	ck_assert_int_eq(take(2, O2LT_PR, O2LC_TRY | O2LC_NOQUEUE), -EWOULDBLOCK);
	ck_assert_uint_eq(stats(2).requests, 0);
	ck_assert_int_eq(o2lc_res_mode(r2), -1);
}
END_TEST

/*
 * A lock on something just made is held at once, with no wait and no
 * refresh; o2lc_settle returns once the service has placed the request.
 * A name another member still caches (used before) is queued there: the
 * holder is told and lets go, and the maker is granted it in the end.
 */
START_TEST(test_lock_new)
{
	struct o2lc_res *r = counter(0);

	ck_assert_int_eq(o2lc_lock_new(r, O2LT_EX, 0), 0);
	ck_assert_int_eq(o2lc_res_mode(r), O2LT_EX);
	mem[0].cached++;
	g_usleep(20000);
	ck_assert_uint_eq(stats(0).requests, 0); /* asked for only when settling */
	ck_assert_int_eq(o2lc_settle(mem[0].c), 0);
	ck_assert_uint_eq(stats(0).requests, 1);
	ck_assert_uint_eq(stats(0).waits, 0);
	o2lc_unlock(r, O2LT_EX);
	/* known now: as o2lc_lock */
	ck_assert_int_eq(o2lc_lock_new(r, O2LT_EX, 0), 0);
	o2lc_unlock(r, O2LT_EX);
	ck_assert_uint_eq(stats(0).requests, 1);
	/* member 1 sees member 0's update */
	ck_assert_int_eq(take(1, O2LT_PR, 0), 0);
	ck_assert_uint_eq(mem[1].cached, 1);
	o2lc_unlock(counter(1), O2LT_PR);
	ck_assert_int_eq(mode_after(r, O2LT_PR), O2LT_PR);

	/* member 2 has never seen it, but members 0 and 1 cache it */
	struct o2lc_res *r2 = counter(2);

	ck_assert_int_eq(o2lc_lock_new(r2, O2LT_EX, 0), 0);
	ck_assert_int_eq(o2lc_settle(mem[2].c), 0);
	ck_assert_int_eq(mode_after(r, O2LT_NL), O2LT_NL);
	ck_assert_int_eq(mode_after(counter(1), O2LT_NL), O2LT_NL);
	o2lc_unlock(r2, O2LT_EX);
	ck_assert_int_eq(o2lc_lock(r2, O2LT_EX, 0), 0); /* granted in the end, no refresh */
	o2lc_unlock(r2, O2LT_EX);
	ck_assert_int_eq(o2lc_lock_new(r, 7, 0), -EINVAL);

	/* one never asked for and held by nobody goes without a message */
	struct o2lc_res *f = o2lc_res_get(mem[2].c, "fresh", 5, NULL, NULL);
	uint64_t before = stats(2).requests;

	ck_assert_int_eq(o2lc_lock_new(f, O2LT_PR, 0), 0);
	ck_assert(!o2lc_forget_unannounced(f)); /* held */
	o2lc_unlock(f, O2LT_PR);
	ck_assert(o2lc_forget_unannounced(f));
	ck_assert(!o2lc_forget_unannounced(f));
	ck_assert_int_eq(o2lc_res_mode(f), -1);
	ck_assert_int_eq(o2lc_settle(mem[2].c), 0);
	ck_assert_uint_eq(stats(2).requests, before);
	o2lc_res_forget(f);

	/* a lock held as new and wanted higher is asked for at once */
	struct o2lc_res *o = o2lc_res_get(mem[1].c, "other", 5, NULL, NULL);

	ck_assert_int_eq(o2lc_lock_new(o, O2LT_PR, 0), 0);
	ck_assert_int_eq(o2lc_lock(o, O2LT_EX, 0), 0);
	ck_assert_int_eq(o2lc_settle(mem[1].c), 0);
	o2lc_unlock(o, O2LT_EX);
	o2lc_unlock(o, O2LT_PR);
	o2lc_res_put(o);
}
END_TEST

static Suite *lockcache_suite(void)
{
	Suite *s = suite_create("lockcache");
	TCase *tc = tcase_create("cache");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_lockname_parse);
	tcase_add_test(tc, test_cached_after_last_user);
	tcase_add_test(tc, test_no_lost_update);
	tcase_add_test(tc, test_holder_in_the_way);
	tcase_add_test(tc, test_conversion_deadlock);
	tcase_add_test(tc, test_no_starvation);
	tcase_add_test(tc, test_failed_writeback_retried);
	tcase_add_test(tc, test_refresh_once);
	tcase_add_test(tc, test_unrefreshed_not_written_back);
	tcase_add_test(tc, test_lost);
	tcase_add_test(tc, test_drop_all);
	tcase_add_test(tc, test_bad_arguments);
	tcase_add_test(tc, test_forget_drops);
	tcase_add_test(tc, test_forget_waits_for_holder);
	tcase_add_test(tc, test_lru_bound);
	tcase_add_test(tc, test_drops_no_lost_update);
	tcase_add_test(tc, test_drop_then_new_user);
	tcase_add_test(tc, test_drop_gives_way);
	tcase_add_test(tc, test_invalidate_admits);
	tcase_add_test(tc, test_invalidate_without_admit_waits);
	tcase_add_test(tc, test_nopr_lowers_to_nl);
	tcase_add_test(tc, test_prefetch);
	tcase_add_test(tc, test_try);
	tcase_add_test(tc, test_lock_new);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(lockcache_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
