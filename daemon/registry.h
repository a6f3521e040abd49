/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The registry of mounted volumes, as the D-Bus API shows them
 * (dbus_server.c owns one): which volume is mounted where, which mount
 * points a Mount in progress has claimed, and the state each volume's
 * Volume object shows.
 *
 * Threads: method handlers (GDBus worker threads), the volumes' FUSE
 * threads and the main loop all use it; every function takes the
 * registry's own mutex.  A callback a function takes runs under that
 * mutex: it may change an entry's state fields and queue main-loop work,
 * and must not call the registry again.  Work a callback queues is thereby
 * ordered with the other callbacks' - above all before the main-loop work
 * of the removal of the same entry, which frees it.
 */
#ifndef OCFS2D_REGISTRY_H
#define OCFS2D_REGISTRY_H

#include <glib.h>
#include <stdbool.h>

#include "ocfs2d.h"

/* A mounted volume as the API shows it. */
struct mounted {
	struct volume *v; /* a reference: the mounter's */
	char *path;	  /* its object path */
	/* fixed once registered */
	char *uuid, *label, *stack, *options;
	char *cluster_name; /* "" unless mounted through a cluster */
	uint32_t node_id;
	unsigned slot, max_slots, block_size, cluster_size;
	guint64 size;
	/* state: changed only by registry_update's callback (under the
	 * registry's mutex), read with registry_read_state */
	bool ro;	/* mounted read-only, or turned so */
	bool turned_ro; /* an error turned it read-only (State "read-only") */
	bool unmounting;
};

/* Drop m's volume reference and free it (an entry no longer registered). */
void mounted_free(struct mounted *m);

struct registry;
typedef void (*registry_fn)(struct mounted *m, void *arg);

/* An empty registry; registry_free frees it with any entries left. */
struct registry *registry_new(void);
void registry_free(struct registry *r);

/*
 * Claim the mount point mnt for a Mount in progress: false if a volume is
 * registered there or another Mount has claimed it.  A claim ends with
 * registry_unclaim (the Mount failed) or registry_add.
 */
bool registry_claim(struct registry *r, const char *mnt);
void registry_unclaim(struct registry *r, const char *mnt);
/*
 * Register m under its volume's mount point, ending the claim on claimed:
 * true, and then(m, arg) (unless then is NULL) under the mutex.  false if
 * m's volume has already gone (registry_remove came first): nothing is
 * registered and m stays the caller's.
 */
bool registry_add(struct registry *r, const char *claimed, struct mounted *m, registry_fn then,
		  void *arg);
/*
 * Volume v has closed: remove its entry and hand it to then(m, arg) under
 * the mutex (the entry is then's to free, on the main loop).  If v was not
 * registered (its Mount has not finished), remember it, so that
 * registry_add refuses it.  Either way wakes registry_wait_gone and
 * registry_wait_removal.
 */
void registry_remove(struct registry *r, struct volume *v, registry_fn then, void *arg);

/* The volume registered on mount point mnt, referenced (volume_unref it), or NULL. */
struct volume *registry_find(struct registry *r, const char *mnt);
/* If v is registered: fn(its entry, arg) under the mutex, and true. */
bool registry_update(struct registry *r, struct volume *v, registry_fn fn, void *arg);
/* fn(entry, arg) for every entry, under the mutex. */
void registry_foreach(struct registry *r, registry_fn fn, void *arg);
/* How many volumes are registered. */
unsigned registry_count(struct registry *r);
/* m's state: *ro, and its State property ("mounted", "read-only", "unmounting"). */
void registry_read_state(struct registry *r, const struct mounted *m, bool *ro,
			 const char **state);

/* Wait until v is not registered (its registry_remove has run). */
void registry_wait_gone(struct registry *r, struct volume *v);
/* If anything is registered, wait for the next registry_remove (of any volume). */
void registry_wait_removal(struct registry *r);

#endif
