// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cacheclient: a member of a CPG lock-service group whose locks go through
 * the daemon's lock cache (daemon/lockcache.h), for the cluster tests
 * (tests/cluster/test_cpg_locks.py, case "cache").
 *
 *   cacheclient GROUP FILE THREADS ITERATIONS LOCKNAME
 *
 * The decimal counter in FILE plays a block on the shared disk, and each
 * process keeps a copy of it that is good only under the lock, as a
 * filesystem caches metadata: refreshed (from the value block, checked
 * against FILE) when the lock is regained, written back to FILE and the
 * value block when another node makes the cache lower it from EX.
 * THREADS local users each add one ITERATIONS times under EX (and a mutex:
 * EX is between nodes); every fourth time they first read it under PR (the
 * cached mode is then PR or EX, and two nodes doing that at once need the
 * cache's conversion-deadlock handling).  A value lower than one this
 * process saw before is a stale copy.  Then the cache drops its locks, writing the counter back,
 * and the member leaves cleanly.
 *
 * Before that, each member takes a lock of its own (LOCKNAME.PID) that
 * nobody else asks for, 2 * ITERATIONS times: the cache must ask the
 * service once.
 *
 * Prints "synced", "private LOCKS REQUESTS" (the lock of its own), then
 * "done LOCKS REQUESTS DOWNCONVERTS CANCELS" (in all).
 *
 *   cacheclient GROUP many BASE COUNT THREADS LIMIT HOLD
 *
 * Lock lifetime (cases "bigjoin" and "lru"): THREADS local users take
 * COUNT distinct inode locks between them (OCFS2 names of blocks BASE to
 * BASE + COUNT - 1, every fourth in EX, else PR), each once, giving the
 * resource back after (o2lc_res_put; every tenth forgotten instead when
 * LIMIT is set); LIMIT > 0 bounds the cache's unreferenced resources.
 * Prints "taken COUNT REQUESTS DROPS RESOURCES UNUSED MAXUNUSED SECONDS"
 * (MAXUNUSED: the most unreferenced resources seen after any put), and
 * with HOLD 1 keeps its locks until SIGTERM, then drops them and leaves.
 *
 *   cacheclient GROUP join
 *
 * Joins, prints "synced SECONDS" (from joining to having the table's
 * state, snapshot included) and leaves.
 *
 * Exit
 * status: 0 done, 2 usage, 3 a broken promise (the value block disagrees
 * with the file, a stale copy, a refused lock), 5 timed out,
 * 6 corosync lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib-unix.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lockcache.h"
#include "lockservice.h"

#define TIMEOUT_S 150

static struct {
	GMainLoop *loop;
	struct o2ls *ls;
	struct o2lc *lc;
	struct o2lc_res *res;
	const char *file, *name;
	long iterations;
	int threads;
	gint running;
	gint status;
	uint64_t cached; /* the copy of FILE, good under the lock */
	uint64_t seen;	 /* the highest value read: the counter never goes back */
	GMutex mu;
	/* "many" and "join" */
	enum { CACHE, MANY, JOIN } what;
	uint64_t base;
	long count;
	unsigned limit;
	bool hold;
	gint next;	   /* the next lock a "many" user takes */
	uint64_t maxunused; /* under mu */
	gint64 t0;
} cl;

static void fail(int status, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void fail(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "cacheclient: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	g_atomic_int_compare_and_exchange(&cl.status, 0, status);
}

static long read_counter(void)
{
	char buf[32] = { 0 };
	int fd = open(cl.file, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n < 0 ? -1 : strtol(buf, NULL, 10);
}

static int write_counter(uint64_t v)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%" G_GUINT64_FORMAT "\n", v);
	int fd = open(cl.file, O_WRONLY | O_TRUNC);
	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, buf, (size_t)n);
	int err = w == n ? 0 : -EIO;
	if (close(fd) < 0 && !err)
		err = -errno;
	return err;
}

/* the downconvert thread: write back, and say it in the value block */
static int writeback(struct o2lc_res *r, int from, int to, uint8_t *lvb, void *data)
{
	(void)r;
	(void)to;
	(void)data;
	if (from != O2LT_EX)
		return 0;
	int err = write_counter(cl.cached);
	if (err)
		return err;
	memcpy(lvb, &cl.cached, sizeof(cl.cached));
	return 0;
}

static const struct o2lc_res_ops ops = { .downconvert = writeback };

static bool take(int mode)
{
	int rc = o2lc_lock(cl.res, mode, 0);
	if (rc < 0) {
		fail(rc == -ENOTCONN ? 6 : 3, "lock %s: %s", o2lt_mode_name(mode), g_strerror(-rc));
		return false;
	}
	if (rc == O2LC_REFRESH) {
		long on_disk = read_counter();
		uint8_t lvb[O2LC_LVB_LEN];
		uint64_t in_lvb;
		bool valid = o2lc_lvb(cl.res, lvb);
		memcpy(&in_lvb, lvb, sizeof(in_lvb));
		if (on_disk < 0 || (valid && in_lvb != (uint64_t)on_disk)) {
			fail(3, "value block says %" G_GUINT64_FORMAT " (valid %d), file says %ld",
			     in_lvb, valid, on_disk);
			o2lc_refresh_done(cl.res, false);
			o2lc_unlock(cl.res, mode);
			return false;
		}
		cl.cached = (uint64_t)on_disk;
		o2lc_refresh_done(cl.res, true);
	}
	return true;
}

static gpointer worker(gpointer p)
{
	(void)p;
	for (long k = 0; k < cl.iterations && !g_atomic_int_get(&cl.status); k++) {
		if (k % 4 == 0) {
			if (!take(O2LT_PR))
				break;
			g_mutex_lock(&cl.mu);
			if (cl.cached < cl.seen)
				fail(3, "read %" G_GUINT64_FORMAT " under PR after %" G_GUINT64_FORMAT
				     ": a stale copy", cl.cached, cl.seen);
			cl.seen = cl.cached;
			g_mutex_unlock(&cl.mu);
			g_usleep(g_random_int_range(20, 200));
			o2lc_unlock(cl.res, O2LT_PR);
		}
		if (!take(O2LT_EX))
			break;
		g_mutex_lock(&cl.mu); /* EX is between nodes: local users exclude each other */
		uint64_t v = cl.cached;
		if (v < cl.seen)
			fail(3, "read %" G_GUINT64_FORMAT " under EX after %" G_GUINT64_FORMAT
			     ": a stale copy", v, cl.seen);
		g_usleep(g_random_int_range(20, 200)); /* a window for anyone to break in */
		cl.cached = v + 1;
		cl.seen = v + 1;
		g_mutex_unlock(&cl.mu);
		o2lc_unlock(cl.res, O2LT_EX);
	}
	if (g_atomic_int_dec_and_test(&cl.running))
		g_main_loop_quit(cl.loop);
	return NULL;
}

/*
 * First a lock of this member's own, that nobody else wants: taken and
 * dropped 2 * ITERATIONS times, it costs one request.  Then the workers.
 */
static gpointer private_phase(gpointer p)
{
	(void)p;
	char name[O2LC_NAME_MAX];
	snprintf(name, sizeof(name), "%s.%d", cl.name, (int)getpid());
	struct o2lc_res *r = o2lc_res_get(cl.lc, name, strlen(name), NULL, NULL);
	struct o2lc_stats before, after;
	o2lc_stats(cl.lc, &before);
	for (long k = 0; k < 2 * cl.iterations; k++) {
		int mode = k % 2 ? O2LT_PR : O2LT_EX;
		int rc = r ? o2lc_lock(r, mode, 0) : -EINVAL;
		if (rc < 0) {
			fail(3, "lock %s %s: %s", name, o2lt_mode_name(mode), g_strerror(-rc));
			break;
		}
		if (rc == O2LC_REFRESH)
			o2lc_refresh_done(r, true);
		o2lc_unlock(r, mode);
	}
	o2lc_stats(cl.lc, &after);
	printf("private %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT "\n", after.locks - before.locks,
	       after.requests - before.requests);
	fflush(stdout);
	g_atomic_int_set(&cl.running, cl.threads);
	for (int i = 0; i < cl.threads; i++)
		g_thread_unref(g_thread_new("user", worker, NULL));
	return NULL;
}

/* "many": one local user's share of the distinct locks */
static gpointer many_worker(gpointer p)
{
	(void)p;
	for (;;) {
		long k = g_atomic_int_add(&cl.next, 1);
		if (k >= cl.count || g_atomic_int_get(&cl.status))
			break;
		char name[O2LC_NAME_MAX];
		int len = snprintf(name, sizeof(name), "M000000%016" PRIx64 "%08x", cl.base + (uint64_t)k,
				   0x5eedu);
		struct o2lc_res *r = o2lc_res_get(cl.lc, name, (size_t)len, NULL, NULL);
		int mode = k % 4 ? O2LT_PR : O2LT_EX;
		int rc = r ? o2lc_lock(r, mode, 0) : -EINVAL;
		if (rc < 0) {
			fail(rc == -ENOTCONN ? 6 : 3, "lock %s %s: %s", name, o2lt_mode_name(mode),
			     g_strerror(-rc));
			break;
		}
		if (rc == O2LC_REFRESH)
			o2lc_refresh_done(r, true);
		o2lc_unlock(r, mode);
		if (cl.limit && k % 10 == 0)
			o2lc_res_forget(r);
		else
			o2lc_res_put(r);
		if (cl.limit) {
			struct o2lc_stats st;
			o2lc_stats(cl.lc, &st);
			g_mutex_lock(&cl.mu);
			cl.maxunused = MAX(cl.maxunused, st.unused);
			g_mutex_unlock(&cl.mu);
		}
	}
	if (g_atomic_int_dec_and_test(&cl.running)) {
		/* the drops still in flight end first */
		struct o2lc_stats st;
		for (int i = 0; i < 3000; i++) {
			o2lc_stats(cl.lc, &st);
			if (!cl.limit || st.resources <= cl.limit)
				break;
			g_usleep(10000);
		}
		printf("taken %ld %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT
		       " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " %.3f\n", cl.count, st.requests,
		       st.drops, st.resources, st.unused, cl.maxunused,
		       (double)(g_get_monotonic_time() - cl.t0) / 1e6);
		fflush(stdout);
		if (!cl.hold)
			g_main_loop_quit(cl.loop);
	}
	return NULL;
}

static gboolean on_term(gpointer data)
{
	(void)data;
	g_main_loop_quit(cl.loop);
	return G_SOURCE_REMOVE;
}

static void on_event(const struct o2lt_event *ev, void *data)
{
	(void)data;
	switch (ev->type) {
	case O2LT_EV_SYNCED:
		if (cl.what == JOIN) {
			printf("synced %.3f\n", (double)(g_get_monotonic_time() - cl.t0) / 1e6);
			fflush(stdout);
			g_main_loop_quit(cl.loop);
			break;
		}
		printf("synced\n");
		fflush(stdout);
		if (cl.what == MANY) {
			cl.t0 = g_get_monotonic_time();
			o2lc_set_limit(cl.lc, cl.limit);
			g_atomic_int_set(&cl.running, cl.threads);
			for (int i = 0; i < cl.threads; i++)
				g_thread_unref(g_thread_new("user", many_worker, NULL));
			break;
		}
		cl.res = o2lc_res_get(cl.lc, cl.name, strlen(cl.name), &ops, NULL);
		g_thread_unref(g_thread_new("private", private_phase, NULL));
		break;
	case O2LT_EV_SYNC_FAILED:
	case O2LT_EV_STATE_CONFLICT:
		fail(3, "lost the table's state (event %d)", ev->type);
		g_main_loop_quit(cl.loop);
		break;
	default:
		o2lc_event(cl.lc, ev);
		break;
	}
}

static void on_lost(void *data)
{
	(void)data;
	fail(6, "corosync is gone");
	o2lc_lost(cl.lc);
}

static guint timer;

static gboolean on_timeout(gpointer data)
{
	(void)data;
	timer = 0;
	fail(5, "timed out");
	o2lc_lost(cl.lc);
	return G_SOURCE_REMOVE;
}

static int64_t be_lock(void *be, const void *name, size_t namelen, int mode, unsigned flags)
{
	return o2ls_lock(be, name, namelen, mode, flags);
}

static int64_t be_down(void *be, const void *name, size_t namelen, int new_mode, const void *lvb)
{
	return o2ls_down(be, name, namelen, new_mode, lvb);
}

static int64_t be_cancel(void *be, const void *name, size_t namelen)
{
	return o2ls_cancel(be, name, namelen);
}

static const struct o2lc_backend backend = { be_lock, be_down, be_cancel, NULL };

int main(int argc, char **argv)
{
	if (argc == 8 && strcmp(argv[2], "many") == 0) {
		cl.what = MANY;
		cl.base = g_ascii_strtoull(argv[3], NULL, 10);
		cl.count = strtol(argv[4], NULL, 10);
		cl.threads = atoi(argv[5]);
		cl.limit = (unsigned)atoi(argv[6]);
		cl.hold = atoi(argv[7]) != 0;
		if (cl.count < 1 || cl.threads < 1) {
			fprintf(stderr, "cacheclient: bad COUNT or THREADS\n");
			return 2;
		}
	} else if (argc == 3 && strcmp(argv[2], "join") == 0) {
		cl.what = JOIN;
	} else if (argc != 6) {
		fprintf(stderr, "usage: cacheclient GROUP FILE THREADS ITERATIONS LOCKNAME\n"
			"       cacheclient GROUP many BASE COUNT THREADS LIMIT HOLD\n"
			"       cacheclient GROUP join\n");
		return 2;
	} else {
		cl.file = argv[2];
		cl.threads = atoi(argv[3]);
		cl.iterations = strtol(argv[4], NULL, 10);
		cl.name = argv[5];
		if (cl.threads < 1 || cl.iterations < 1 || !*cl.name) {
			fprintf(stderr, "cacheclient: bad THREADS, ITERATIONS or LOCKNAME\n");
			return 2;
		}
	}
	cl.t0 = g_get_monotonic_time();
	g_unix_signal_add(SIGTERM, on_term, NULL);
	cl.loop = g_main_loop_new(NULL, FALSE);
	struct o2ls_callbacks cb = { .event = on_event, .lost = on_lost };
	g_autoptr(GError) err = NULL;
	cl.ls = o2ls_new(argv[1], &cb, NULL, &err);
	if (!cl.ls) {
		fprintf(stderr, "cacheclient: %s\n", err->message);
		return 6;
	}
	cl.lc = o2lc_new(&backend, cl.ls);
	timer = g_timeout_add_seconds(cl.what == MANY ? 2 * TIMEOUT_S : TIMEOUT_S, on_timeout, NULL);
	g_main_loop_run(cl.loop);
	/* wait for the users that are still running (after a failure) */
	while (g_atomic_int_get(&cl.running) > 0)
		g_main_context_iteration(NULL, TRUE);
	int status = g_atomic_int_get(&cl.status);
	if (!status && cl.what == MANY && cl.hold)
		printf("dropping\n");
	if (!status) {
		int rc = o2lc_drop_all(cl.lc, NULL, 120000);
		if (rc < 0)
			fail(rc == -ENOTCONN ? 6 : 3, "dropping the locks: %s", g_strerror(-rc));
		struct o2lc_stats st;
		o2lc_stats(cl.lc, &st);
		printf("done %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " %"
		       G_GUINT64_FORMAT "\n", st.locks, st.requests, st.downconverts, st.cancels);
		status = g_atomic_int_get(&cl.status);
	}
	if (timer)
		g_source_remove(timer);
	o2lc_free(cl.lc);
	if (!status)
		o2ls_free(cl.ls); /* a clean leave: everything is written back */
	else
		_exit(status); /* no clean leave: let the others see a failure */
	g_main_loop_unref(cl.loop);
	return 0;
}
