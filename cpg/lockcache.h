/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The lock cache: cluster locks held the way OCFS2 holds them
 * (docs/ARCHITECTURE.md, "Cluster locks").
 *
 * A lock service (the CPG one, later libdlm) grants a node a mode on a
 * name; asking it costs a round of messages.  The cache sits between the
 * daemon's filesystem work and that service.  Local users take a lock
 * (o2lc_lock) and drop it (o2lc_unlock) as often as they like; the cache
 * asks the service only when it holds less than they need, and when the
 * last local user is gone it keeps what it was granted.  It lowers a lock
 * only when another node asks (a BLOCKING event), and only once no local
 * user is in that node's way: first the resource's downconvert callback
 * runs (write back what the lock protected; leaving EX, fill the value
 * block), then the service is told.  A local user that arrives while
 * another node waits does not jump ahead of it if its mode is in that
 * node's way, so a busy node cannot starve the others.
 *
 * Modes are between nodes, as in OCFS2: any number of local users may hold
 * a resource at once, in PR or in EX; EX keeps other nodes out, not other
 * local users.  Exclusion among local users is the caller's (ocfs2d's
 * volume lock), taken after the cluster lock.
 *
 * After the cache regains a mode of at least PR from below, whatever a
 * local user cached under the lock may be stale: the first local user gets
 * O2LC_REFRESH from o2lc_lock and must bring its state up to date (from
 * the value block or the disk) and then call o2lc_refresh_done; other local
 * users wait for that.  A failed refresh leaves the next user to try again.
 *
 * Two nodes that both hold PR and both want EX would wait for each other
 * forever (a conversion deadlock); the cache cancels its own pending
 * conversion when it is asked to lower a lock while converting, lowers it,
 * and asks again after.
 *
 * Threads.  o2lc_event runs in the lock service's main context (the
 * cache's "service side"); the backend is called from whatever thread
 * decides a request, the service side's included, under the cache's
 * mutex, so it must be thread-safe and must not call back into the cache.
 * o2lc_lock, o2lc_unlock, o2lc_refresh_done and o2lc_lvb may be called
 * from any other thread and block; o2lc_lock must never be called from
 * the service side.
 * Downconvert callbacks run on a thread of the cache's own, never on the
 * service side or a caller's thread, with no cache lock held: they may take
 * the filesystem's locks and wait for other work (a FUSE invalidation that
 * makes the kernel write dirty pages back, for instance).
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "locktab.h"

#define O2LC_LVB_LEN O2LT_LVB_LEN
#define O2LC_NAME_MAX O2LT_NAME_MAX

/* o2lc_lock flags */
#define O2LC_NOQUEUE 0x1u /* -EAGAIN rather than wait for another node */
/*
 * The caller may hold what the resource's invalidate callback waits for
 * (a FUSE request that holds a page lock): while that callback runs it
 * takes the lock in the mode the cache still holds, even though another
 * node waits (see o2lc_res_ops.invalidate).
 */
#define O2LC_ADMIT 0x2u
/*
 * With O2LT_EX: when another node wants PR, lower this lock to NL rather
 * than PR, until it next goes to NL.  For a node that may write the
 * resource's data, so that it never waits to convert from PR to EX while
 * holding a page lock that an invalidation of its own would wait for.
 */
#define O2LC_NOPR 0x4u
/*
 * With O2LC_NOQUEUE: a try refused because other nodes hold the lock still
 * tells them (O2LT_F_NOQUEUEBAST), so that one that only caches it lets it
 * go and the next try may pass.
 */
#define O2LC_TELL 0x8u
/*
 * Never wait: -EWOULDBLOCK where o2lc_lock would wait, having first asked
 * the service as o2lc_prefetch would (not with NOQUEUE: a try is not
 * turned into a queued request), so that the o2lc_lock without TRY that
 * follows, on whatever thread, finds the request on its way.  For a thread
 * that must not wait but may hand its work to one that can.
 */
#define O2LC_TRY 0x10u

/* o2lc_lock's answer when the caller must refresh (see above) */
#define O2LC_REFRESH 1

/*
 * What the cache asks of the lock service: the request functions of
 * lockservice.h (or another backend's), each returning a request id > 0
 * whose outcome comes back through o2lc_event, or -errno.  Called from
 * any thread, under the cache's mutex (see Threads above), never
 * waiting for an answer.
 */
struct o2lc_lockreq {
	const void *name;
	size_t namelen;
	int mode;
	unsigned flags;
};

struct o2lc_backend {
	int64_t (*lock)(void *be, const void *name, size_t namelen, int mode, unsigned flags);
	int64_t (*down)(void *be, const void *name, size_t namelen, int new_mode, const void *lvb);
	int64_t (*cancel)(void *be, const void *name, size_t namelen);
	/*
	 * Optional: n lock requests in one message, applied in order; their
	 * ids are the one returned and the n - 1 after it (at most
	 * O2LC_BATCH_MAX).  How new locks are announced when there are many
	 * (o2lc_settle): NULL, one lock call each.
	 */
	int64_t (*lock_batch)(void *be, const struct o2lc_lockreq *reqs, size_t n);
};
#define O2LC_BATCH_MAX 1024

struct o2lc;
struct o2lc_res;

struct o2lc_res_ops {
	/*
	 * The lock goes from mode `from` to `to` (NL, or PR from EX): write
	 * back what `from` protected so that another node can see it.  Leaving
	 * EX, lvb (O2LC_LVB_LEN bytes) holds the value block the lock was
	 * granted with (zeros if it had none), and what the callback leaves
	 * there is stored with the lock.  Return 0, or -errno: the lock then
	 * stays as it is, the error is logged, and the downconvert is tried
	 * again a second later (another node keeps waiting meanwhile, as it
	 * must: nothing written under the lock may be lost).
	 * May be NULL (nothing to write back; the value block is kept).
	 */
	int (*downconvert)(struct o2lc_res *r, int from, int to, uint8_t *lvb, void *data);
	/*
	 * Before the lock goes lower for another node, or is dropped (held
	 * in PR or EX and refreshed): make what the caller caches under it
	 * outside the cache's control go - the kernel's page cache, whose
	 * invalidation waits for page locks that requests in flight hold
	 * while they wait for this lock.  It runs on a thread of its own (a
	 * pool: never the downconvert thread, so other resources' downconverts
	 * go on), with no cache lock held, before local users are drained;
	 * meanwhile local users that pass O2LC_ADMIT take the lock in the mode
	 * still held, and if any did (or any other local user took it), it is
	 * run again, up to four times, since they may have cached anew.
	 * The downconvert that follows it, if another node waits, runs on
	 * the same pool thread.  May be NULL.
	 */
	void (*invalidate)(struct o2lc_res *r, void *data);
};

/*
 * A cache over one lock service.  Called on the service side; be is passed
 * to the backend functions.
 */
struct o2lc *o2lc_new(const struct o2lc_backend *backend, void *be);

/*
 * Feed it every event the lock service delivers for this member (the
 * others are ignored).  Service side.
 */
void o2lc_event(struct o2lc *c, const struct o2lt_event *ev);

/*
 * The service is gone (corosync lost, the member expelled): every lock is
 * void.  Waiting and later o2lc_lock calls fail with -ENOTCONN.  Service
 * side.
 */
void o2lc_lost(struct o2lc *c);

/*
 * Drop every cached lock and wait until the service confirms, running
 * ctx's main loop iterations meanwhile (ctx: the service side's context,
 * owned by the caller's thread).  What is in flight (a downconvert another
 * node asked for) ends first; a resource left in EX is written back
 * through its callback.  Call before a clean leave of the lock service.
 * 0, -EBUSY (a local user still holds a resource; nothing dropped),
 * -ETIMEDOUT, or -ENOTCONN.
 */
int o2lc_drop_all(struct o2lc *c, GMainContext *ctx, unsigned timeout_ms);

/* Free the cache (after o2lc_drop_all, or o2lc_lost).  Service side. */
void o2lc_free(struct o2lc *c);

/*
 * The resource named name (1..O2LC_NAME_MAX bytes), created on first use
 * with ops/data (later calls for the same name get the same resource while
 * it exists, and their ops/data are ignored).  Each call takes a reference
 * that o2lc_res_put or o2lc_res_forget gives back; o2lc_lock, o2lc_unlock,
 * o2lc_refresh_done, o2lc_lvb and o2lc_res_mode may be called only while
 * holding one, and a local user holds its reference until after its
 * o2lc_unlock.  A resource that was never put lives as long as the cache.
 * NULL for a bad name.  Any thread.
 */
struct o2lc_res *o2lc_res_get(struct o2lc *c, const void *name, size_t namelen,
			      const struct o2lc_res_ops *ops, void *data);

/*
 * Lock lifetime (docs/ARCHITECTURE.md, "Cluster locks"): idle locks are
 * dropped so that the replicated lock table stays small.
 *
 * o2lc_res_put gives a reference back; r must not be used after it.  A
 * resource nobody references stays cached (the lock is kept, as after its
 * last local user) on the cache's LRU, least recently put first.
 * o2lc_res_forget does the same and asks that the lock be dropped as soon
 * as nobody references the resource (FUSE's FORGET, an inode's eviction).
 * o2lc_set_limit bounds the LRU: when more than n resources are cached
 * unreferenced, the least recently put are dropped (0, the default: no
 * bound).  A later o2lc_res_get of a forgotten resource cancels the forget.
 *
 * Dropping: never while the resource is referenced, held, or has anything
 * in flight (a request, a conversion, a refresh, a downconvert another
 * node asked for or its retry); those are dropped once that ends.  The
 * downconvert callback runs first if the lock is held in PR or EX and was
 * refreshed (from, O2LT_NL; leaving EX, the value block it leaves is
 * stored), then the service is told (DOWN to UNLOCK); once it confirms,
 * the resource is freed and a later o2lc_res_get makes a new one.  If the
 * callback fails, the drop is tried again a second later, as a downconvert;
 * until then the lock is still held, and a local user who takes it (or a
 * downconvert another node asks for) makes the drop give way.
 *
 * Races: an o2lc_res_get of the same name while a drop is under way gets
 * the resource being dropped; a drop whose write-back has begun is not
 * undone (a failed one aside, as above): that
 * user's o2lc_lock waits until the service has confirmed it, then asks the
 * service again (and gets O2LC_REFRESH), so nobody ever believes it holds
 * a lock the service has dropped.  The resource then stays.  Any thread
 * (they never block).
 */
void o2lc_res_put(struct o2lc_res *r);
void o2lc_res_forget(struct o2lc_res *r);
void o2lc_set_limit(struct o2lc *c, unsigned n);

/*
 * Take the resource in mode (O2LT_PR or O2LT_EX) for one local user.
 * 0: held; O2LC_REFRESH: held, refresh and call o2lc_refresh_done;
 * -EAGAIN: NOQUEUE and another node is in the way; -EWOULDBLOCK: TRY and
 * it would wait; -ENOTCONN: the service is gone; -EINVAL: bad mode.  Any
 * thread but the service side.
 */
int o2lc_lock(struct o2lc_res *r, int mode, unsigned flags);

/*
 * Ask the service for mode on r now, without waiting (o2lc_lock's flags
 * but NOQUEUE and TELL): a later o2lc_lock finds the request on its way or
 * answered, so that several locks one operation needs cost one round of
 * messages, not one each.  Nothing is asked if r is held in mode already,
 * a request or a downconvert is under way, or another node waits for r in
 * a mode in the way.  What a prefetch was granted is cached as after a
 * last unlock: a downconvert another node asks for does not wait for the
 * o2lc_lock that was meant to follow, which then asks again.  So a
 * prefetch adds no wait to any cycle and may precede locks taken before
 * it in the lock order.  Any thread but the service side; never blocks.
 */
void o2lc_prefetch(struct o2lc_res *r, int mode, unsigned flags);

/*
 * Take a lock on something this node has just made, which no other node
 * can know of until this node puts it where they can read it (a new
 * inode: the kernel's o2dlm makes its locks locally, LKM_LOCAL): if the
 * cache knows nothing of r, it is held in mode at once, with no message
 * waited for and nothing to refresh, and asked for with O2LT_F_NEW
 * meanwhile.  Otherwise as o2lc_lock.  Before this node lets another read
 * what names such a lock (writes it home), o2lc_settle.  Any thread but
 * the service side.
 */
int o2lc_lock_new(struct o2lc_res *r, int mode, unsigned flags);

/*
 * If r is held as new, the service never heard of it and no local user
 * holds it: let it go without a message (what it guards was never written
 * where another node could find it) and return true.  Else false.
 */
bool o2lc_forget_unannounced(struct o2lc_res *r);

/*
 * Wait until every o2lc_lock_new request has its place in the service's
 * order: from then on no other node's request for those locks can come
 * before this node's.  It waits for the service, never for another node.
 * 0, or -ENOTCONN once the service is gone.
 */
int o2lc_settle(struct o2lc *c);

/* The refresh after O2LC_REFRESH is over: ok false lets the next user retry. */
void o2lc_refresh_done(struct o2lc_res *r, bool ok);

/* The local user drops what o2lc_lock gave it (same mode). */
void o2lc_unlock(struct o2lc_res *r, int mode);

/*
 * The value block as the lock was last granted (copied into lvb); returns
 * whether it is valid.  Call while holding the resource.
 */
bool o2lc_lvb(struct o2lc_res *r, uint8_t *lvb);

/* Counters, for tests and status. */
struct o2lc_stats {
	uint64_t locks;		/* o2lc_lock calls that succeeded */
	uint64_t requests;	/* lock requests sent to the service */
	uint64_t batched;	/* of those, sent in a batch's message after its first */
	uint64_t downconverts;	/* downconverts sent to the service */
	uint64_t cancels;	/* conversions cancelled to break a deadlock */
	uint64_t blocking;	/* BLOCKING events received */
	uint64_t drops;		/* unreferenced resources dropped and freed (forgotten or LRU) */
	uint64_t resources;	/* now: resources in the cache */
	uint64_t unused;	/* now: of those, unreferenced and not being dropped (the LRU) */
	uint64_t waits;		/* o2lc_lock calls that had to wait (a message, a downconvert) */
	uint64_t wait_us;	/* the time they waited, in all */
	uint64_t writeback_us;	/* time in downconvert callbacks (writing back), in all */
};
void o2lc_stats(struct o2lc *c, struct o2lc_stats *st);

/* The mode the cache holds for r now (O2LT_NL..O2LT_EX, or -1 none). */
int o2lc_res_mode(struct o2lc_res *r);

/*
 * Whether another node asked for r (a BLOCKING event) in the last
 * within_us microseconds: a lock that moves between nodes, whose holder
 * may write back early what the next node will want.  Any thread.
 */
bool o2lc_res_contended(struct o2lc_res *r, gint64 within_us);

/* r's name (its length in *len), as long as r exists.  Any thread. */
const uint8_t *o2lc_res_name(const struct o2lc_res *r, size_t *len);
