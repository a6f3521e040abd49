// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * lockclient: a member of a CPG lock-service group for the cluster tests
 * (tests/cluster/test_cpg_locks.py), driving the real service over a
 * real corosync.
 *
 *   lockclient GROUP count FILE ITERATIONS LOCKNAME
 *       ITERATIONS times: take LOCKNAME in EX, read the decimal counter in
 *       FILE, wait a little, write it back plus one, lower the lock to NL
 *       with the counter in its value block.  Without mutual exclusion
 *       updates are lost; a value block that disagrees with the file, when
 *       valid, is an error (exit 3).
 *   lockclient GROUP hold LOCKNAME
 *       take LOCKNAME in EX, print "held", and keep it until killed.
 *   lockclient GROUP admin NODEID
 *       send FENCED for NODEID, then RECOVERED, and exit once the group has
 *       dropped its locks.
 *   lockclient GROUP rtt ITERATIONS LOCKNAME
 *       ITERATIONS times: take LOCKNAME in EX and lower it to NL, nothing
 *       between; print "rtt_us N", the mean time of one of those messages
 *       (each is one agreed CPG multicast delivered back to its sender),
 *       the cost a benchmark compares lock transfers with.
 *
 * Prints "synced" once the table has its state, "stale node N" when a member
 * of node N comes back from a partition.  Exit status: 0 done,
 * 2 usage, 3 a broken promise, 4 refused, 5 timed out, 6 corosync lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lockservice.h"

#define TIMEOUT_S 120

enum what { COUNT, HOLD, ADMIN, RTT };

struct client {
	GMainLoop *loop;
	struct o2ls *ls;
	enum what what;
	const char *file, *name;
	long left;
	uint32_t nodeid;
	long iterations;
	gint64 started;
	int status;
	unsigned invalid_lvbs;
};

static void finish(struct client *c, int status)
{
	c->status = status;
	g_main_loop_quit(c->loop);
}

static long read_counter(const char *path)
{
	char buf[32] = { 0 };
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n < 0 ? -1 : strtol(buf, NULL, 10);
}

static int write_counter(const char *path, long v)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%ld\n", v);
	int fd = open(path, O_WRONLY | O_TRUNC);
	if (fd < 0)
		return -1;
	ssize_t w = write(fd, buf, (size_t)n);
	close(fd);
	return w == n ? 0 : -1;
}

static void ask(struct client *c)
{
	if (o2ls_lock(c->ls, c->name, strlen(c->name), O2LT_EX, 0) < 0)
		finish(c, 6);
}

/* Under EX: the critical section the lock must protect. */
static void critical(struct client *c, const struct o2lt_event *ev)
{
	long v = read_counter(c->file);
	if (v < 0) {
		fprintf(stderr, "lockclient: cannot read %s\n", c->file);
		finish(c, 3);
		return;
	}
	if (ev->lvb_valid) {
		long in_lvb = 0;
		memcpy(&in_lvb, ev->lvb, sizeof(in_lvb));
		if (in_lvb != v) {
			fprintf(stderr, "lockclient: value block says %ld, file says %ld\n", in_lvb, v);
			finish(c, 3);
			return;
		}
	} else {
		c->invalid_lvbs++;
	}
	g_usleep(g_random_int_range(50, 400)); /* a window for anyone else to break in */
	if (write_counter(c->file, v + 1) < 0) {
		finish(c, 3);
		return;
	}
	uint8_t lvb[O2LT_LVB_LEN] = { 0 };
	long nv = v + 1;
	memcpy(lvb, &nv, sizeof(nv));
	if (o2ls_down(c->ls, c->name, strlen(c->name), O2LT_NL, lvb) < 0)
		finish(c, 6);
}

static void on_event(const struct o2lt_event *ev, void *data)
{
	struct client *c = data;
	switch (ev->type) {
	case O2LT_EV_SYNCED:
		printf("synced\n");
		fflush(stdout);
		if (c->what == ADMIN && o2ls_fenced(c->ls, c->nodeid) < 0)
			finish(c, 6);
		else if (c->what != ADMIN) {
			c->started = g_get_monotonic_time();
			ask(c); /* requests wait for the table's state */
		}
		break;
	case O2LT_EV_SYNC_FAILED:
	case O2LT_EV_STATE_CONFLICT:
		fprintf(stderr, "lockclient: lost the table's state (event %d)\n", ev->type);
		finish(c, 3);
		break;
	case O2LT_EV_GRANTED:
		if (ev->mode != O2LT_EX)
			break;
		if (c->what == HOLD) {
			printf("held\n");
			fflush(stdout);
		} else if (c->what == RTT) {
			if (o2ls_down(c->ls, c->name, strlen(c->name), O2LT_NL, NULL) < 0)
				finish(c, 6);
		} else {
			critical(c, ev);
		}
		break;
	case O2LT_EV_DOWNED:
		if (--c->left > 0) {
			ask(c);
			break;
		}
		if (c->what == RTT) {
			double us = (double)(g_get_monotonic_time() - c->started);

			printf("rtt_us %.1f\n", us / (2.0 * (double)c->iterations));
		}
		finish(c, 0);
		break;
	case O2LT_EV_REFUSED:
		fprintf(stderr, "lockclient: request %" G_GUINT64_FORMAT " refused: %s\n", ev->reqid,
			g_strerror(-ev->error));
		finish(c, 4);
		break;
	case O2LT_EV_STALE_MEMBER:
		printf("stale node %u\n", ev->member.nodeid);
		fflush(stdout);
		break;
	case O2LT_EV_NODE_FENCED:
		if (c->what == ADMIN && ev->member.nodeid == c->nodeid &&
		    o2ls_recovered(c->ls, c->nodeid) < 0)
			finish(c, 6);
		break;
	case O2LT_EV_NODE_RECOVERED:
		if (c->what == ADMIN && ev->member.nodeid == c->nodeid)
			finish(c, 0);
		break;
	default:
		break;
	}
}

static void on_lost(void *data)
{
	fprintf(stderr, "lockclient: corosync is gone\n");
	finish(data, 6);
}

static gboolean on_timeout(gpointer data)
{
	fprintf(stderr, "lockclient: timed out\n");
	finish(data, 5);
	return G_SOURCE_REMOVE;
}

int main(int argc, char **argv)
{
	struct client c = { .status = 0 };
	if (argc == 6 && !strcmp(argv[2], "count")) {
		c.what = COUNT;
		c.file = argv[3];
		c.left = strtol(argv[4], NULL, 10);
		c.name = argv[5];
	} else if (argc == 4 && !strcmp(argv[2], "hold")) {
		c.what = HOLD;
		c.name = argv[3];
	} else if (argc == 5 && !strcmp(argv[2], "rtt")) {
		c.what = RTT;
		c.iterations = c.left = strtol(argv[3], NULL, 10);
		c.name = argv[4];
		if (c.left <= 0)
			return 2;
	} else if (argc == 4 && !strcmp(argv[2], "admin")) {
		c.what = ADMIN;
		c.nodeid = (uint32_t)strtoul(argv[3], NULL, 10);
	} else {
		fprintf(stderr, "usage: lockclient GROUP count FILE ITERATIONS LOCKNAME | "
				"hold LOCKNAME | admin NODEID | rtt ITERATIONS LOCKNAME\n");
		return 2;
	}
	c.loop = g_main_loop_new(NULL, FALSE);
	struct o2ls_callbacks cb = { .event = on_event, .lost = on_lost };
	g_autoptr(GError) err = NULL;
	c.ls = o2ls_new(argv[1], &cb, &c, &err);
	if (!c.ls) {
		fprintf(stderr, "lockclient: %s\n", err->message);
		return 6;
	}
	g_timeout_add_seconds(TIMEOUT_S, on_timeout, &c);
	g_main_loop_run(c.loop);
	if (c.what == COUNT)
		printf("done, %u grants without a valid value block\n", c.invalid_lvbs);
	o2ls_free(c.ls);
	g_main_loop_unref(c.loop);
	return c.status;
}
