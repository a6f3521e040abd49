/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Jobs: work that takes a while, shown by dbus_server.c as a Job object.
 * Two kinds share what a job shows (progress, expected end, whether it may
 * be cancelled) and how it ends:
 *
 *  - work on a device that is not mounted (a format, a check), run on a
 *    thread of its own for the API's Manager.Format and Manager.Check;
 *  - work a method call does on its own thread and reports here (a mount,
 *    which may replay a journal; an unmount, which commits and
 *    checkpoints it): job_new_attached, job_progress, job_commit, job_end.
 *
 * A job is judged before it starts: job_new_format and job_new_check
 * refuse a missing device, one that is mounted (by ocfs2d, which holds
 * its flock, or by the kernel: /proc/self/mountinfo), bad options; then
 * the job holds the device open with its flock for its whole life, so
 * nothing mounts or formats it meanwhile.  The thread reports progress
 * and the end through callbacks (on the job's thread; the callee moves
 * them to its main loop).  Nothing here knows D-Bus.
 */
#ifndef OCFS2D_JOB_H
#define OCFS2D_JOB_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "api.h"

struct job;

/* What a job shows: read with job_snapshot (any thread). */
struct job_view {
	double progress;	 /* 0..1 */
	gint64 expected_end_us;	 /* wall clock, 0 while unknown */
	bool cancelable;
};

/*
 * Called on the job's thread: its progress or cancelability changed
 * (at most every 1% or 200 ms), or it ended (done, once, last).
 */
typedef void (*job_fn)(struct job *j, void *arg);

/*
 * A format of req->device as req says, or NULL with *err set: NotFound,
 * DeviceBusy (mounted, or another job's), InvalidArgument (options
 * o2_mkfs_plan refuses), Exists (the device holds a volume or other data
 * and req->force is false).
 */
struct job *job_new_format(const struct o2d_format_req *req, GError **err);
/* A check of req->device: NotFound, DeviceBusy. */
struct job *job_new_check(const struct o2d_check_req *req, GError **err);

/*
 * A job whose work its caller does (operation "mount" or "unmount"),
 * cancelable or not at first.  After job_start the worker reports with
 * job_progress and job_commit and ends it with job_end.
 */
struct job *job_new_attached(const char *operation, const char *device, bool cancelable);

/*
 * The worker's side (its own thread): done of total units are done.
 * Whether the job was asked to stop (the worker then stops and ends it
 * with "cancelled").
 */
bool job_progress(struct job *j, uint64_t done, uint64_t total);
/*
 * The worker passes the point after which stopping is not safe: true,
 * and Cancelable turns false; false if it was asked to stop first (it
 * then stops).
 */
bool job_commit(struct job *j);
/* An attached job's end (message copied): done is called, once. */
void job_end(struct job *j, bool success, const char *message);

/* "format", "check", "mount" or "unmount"; the device as the caller named it. */
bool job_attached(const struct job *j); /* its caller does the work (job_new_attached) */
const char *job_operation(const struct job *j);
const char *job_device(const struct job *j);

/* Start the work on a thread of its own (an attached job: the clock and
 * the callbacks only); changed and done as above. */
void job_start(struct job *j, job_fn changed, job_fn done, void *arg);
void job_snapshot(struct job *j, struct job_view *ret);
/*
 * Ask the job to stop: true if it will (it then ends with success false,
 * "cancelled"), false if it may not any more (a format that writes, a
 * mount past its safe point, an unmount).
 */
bool job_cancel(struct job *j);
/* After done: the outcome (valid until job_free). */
bool job_success(const struct job *j);
const char *job_message(const struct job *j);
/* Wait for the thread (after done) and free the job. */
void job_free(struct job *j);

#endif
