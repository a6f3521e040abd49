// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * A clustered volume's place in its cluster (see cluster.h).
 *
 * How it works.  cluster_join starts the service thread, which owns a
 * GMainContext of its own: the CPG lock service (cpg/lockservice.h) and
 * the lock cache (cpg/lockcache.h) run there, and nowhere else.  The
 * mount path, on the caller's thread, takes and drops locks through the
 * cache, which blocks it until the service answers; what it needs to know
 * of the service side (who is in the group) it asks for by running a
 * function there and waiting for it.
 *
 * Who may take which slot.  Under the super lock EX, every slot the slot
 * map says is held is one of these:
 *   - ours (this node's id): a daemon of ours that died left it; take it
 *     again (fscore replays its journal), unless that daemon is still in
 *     the group, alive or frozen;
 *   - held by a live member: another node uses the volume; this one
 *     mounts beside it, on a slot of its own;
 *   - held by a member that died and is not yet recovered: refused, its
 *     locks are frozen until it is fenced;
 *   - held by a node not in the group: try its journal lock without
 *     waiting; a dirty journal needs recovery (refused for now), a clean
 *     one is a claim left by a crash before its journal was used, and the
 *     slot is free.
 * A free slot whose journal still holds transactions also needs recovery.
 */
#include "cluster.h"

#include <errno.h>
#include <gio/gio.h>
#include <stdio.h>
#include <string.h>

#include "corosync.h"
#include "lockcache.h"
#include "lockname.h"
#include "lockservice.h"
#include "mountopts.h"

#define SYNC_TIMEOUT_S 30
#define DROP_TIMEOUT_MS 15000

enum cluster_state { C_JOINING, C_SYNCED, C_FAILED };

struct cluster {
	char *device;
	char *name; /* the cluster's name, as corosync and the volume agree */
	char group[64];
	GMainContext *ctx;
	GMainLoop *loop;
	GThread *thread;
	struct o2ls *ls; /* service side only */
	struct o2lc *lc;
	struct o2lt_member self;

	GMutex mu;
	GCond cond;
	enum cluster_state state;
	char *why; /* C_FAILED: what went wrong */
	bool lost; /* corosync went away */

	struct o2lc_res *super, *journal;
	bool super_held, journal_held;
	/* the global bitmap (its M lock is the last system file's in the order) */
	uint64_t bitmap_blkno;
	uint32_t bitmap_gen;
	/*
	 * This slot's inode and extent allocators and orphan directory, in
	 * block order: every change holds their locks (other nodes take them
	 * only to free into them); its local-alloc window and truncate log,
	 * whose locks are held for the mount; and what the mount holds until
	 * it is done (the global bitmap's and the slot's locks: a mount
	 * flushes into them what a crash left).
	 */
	uint64_t own_blk[3];
	uint32_t own_gen[3];
	unsigned nown;
	struct cluster_hold slot_files[2];
	struct held mount_held;

	/* the filesystem's side of inode locks (cluster_set_fs) */
	const struct cluster_fs_ops *fs_ops;
	void *fs_arg;

	/* orphans found open on another node: block number to struct
	 * orphan_wait (cluster_orphans_due; its caller's thread only) */
	GHashTable *orphan_waits;
};

/* ---- the service side ---- */

static int64_t be_lock(void *be, const void *name, size_t len, int mode, unsigned flags)
{
	return o2ls_lock(be, name, len, mode, flags);
}

static int64_t be_down(void *be, const void *name, size_t len, int mode, const void *lvb)
{
	return o2ls_down(be, name, len, mode, lvb);
}

static int64_t be_cancel(void *be, const void *name, size_t len)
{
	return o2ls_cancel(be, name, len);
}

static int64_t be_lock_batch(void *be, const struct o2lc_lockreq *reqs, size_t n)
{
	g_autofree struct o2ls_lockreq *v = g_new(struct o2ls_lockreq, n);

	G_STATIC_ASSERT(O2LC_BATCH_MAX <= O2LS_BATCH_MAX);
	for (size_t i = 0; i < n; i++)
		v[i] = (struct o2ls_lockreq){ reqs[i].name, reqs[i].namelen, reqs[i].mode,
					      reqs[i].flags };
	return o2ls_lock_batch(be, v, n);
}

static const struct o2lc_backend backend = { be_lock, be_down, be_cancel, be_lock_batch };

static void set_state(struct cluster *c, enum cluster_state st, const char *why)
{
	g_mutex_lock(&c->mu);
	if (c->state == C_JOINING || st == C_FAILED) {
		c->state = st;
		if (why && !c->why)
			c->why = g_strdup(why);
	}
	g_cond_broadcast(&c->cond);
	g_mutex_unlock(&c->mu);
}

static void on_event(const struct o2lt_event *ev, void *data)
{
	struct cluster *c = data;

	switch (ev->type) {
	case O2LT_EV_SYNCED:
		set_state(c, C_SYNCED, NULL);
		break;
	case O2LT_EV_SYNC_FAILED:
		set_state(c, C_FAILED, "every member that could send this node the lock state left "
				       "before it did; try again");
		break;
	case O2LT_EV_STATE_CONFLICT:
		g_critical("%s: another member sent this node a lock state although it had one: "
			   "two groups formed apart; this node stops using its locks",
			   c->device);
		set_state(c, C_FAILED, "the lock group split and merged (state conflict)");
		break;
	case O2LT_EV_NODE_FAILED:
		g_warning("%s: node %u (pid %u) failed holding locks on the volume: they stay "
			  "frozen until it is fenced",
			  c->device, ev->member.nodeid, ev->member.pid);
		break;
	default:
		break;
	}
	if (c->lc)
		o2lc_event(c->lc, ev);
}

static void on_lost(void *data)
{
	struct cluster *c = data;

	g_critical("%s: the connection to corosync is gone: this node's cluster locks are void "
		   "(the other nodes will fence it)",
		   c->device);
	g_mutex_lock(&c->mu);
	c->lost = true;
	g_mutex_unlock(&c->mu);
	set_state(c, C_FAILED, "the connection to corosync is gone");
	if (c->lc)
		o2lc_lost(c->lc);
}

static const struct o2ls_callbacks service_cb = { on_event, on_lost };

static gpointer service_main(gpointer p)
{
	struct cluster *c = p;
	GError *e = NULL;

	g_main_context_push_thread_default(c->ctx);
	c->ls = o2ls_new(c->group, &service_cb, c, &e);
	if (!c->ls) {
		set_state(c, C_FAILED, e->message);
		g_error_free(e);
		g_main_context_pop_thread_default(c->ctx);
		return NULL;
	}
	c->self = o2ls_self(c->ls);
	c->lc = o2lc_new(&backend, c->ls);
	g_main_loop_run(c->loop);

	/* leaving: whatever is still cached goes back first, then a clean leave */
	int r = c->lost ? -ENOTCONN : o2lc_drop_all(c->lc, c->ctx, DROP_TIMEOUT_MS);

	if (r < 0 && r != -ENOTCONN)
		g_warning("%s: dropping the cluster locks: %s", c->device, g_strerror(-r));
	o2lc_free(c->lc);
	c->lc = NULL;
	o2ls_free(c->ls);
	c->ls = NULL;
	g_main_context_pop_thread_default(c->ctx);
	return NULL;
}

/* Run fn(arg) on the service side and wait for it. */
struct on_service {
	struct cluster *c;
	void (*fn)(struct cluster *c, void *arg);
	void *arg;
	bool done;
};

static gboolean on_service_run(gpointer p)
{
	struct on_service *s = p;

	s->fn(s->c, s->arg);
	g_mutex_lock(&s->c->mu);
	s->done = true;
	g_cond_broadcast(&s->c->cond);
	g_mutex_unlock(&s->c->mu);
	return G_SOURCE_REMOVE;
}

static void call_on_service(struct cluster *c, void (*fn)(struct cluster *, void *), void *arg)
{
	struct on_service s = { c, fn, arg, false };

	g_main_context_invoke(c->ctx, on_service_run, &s);
	g_mutex_lock(&c->mu);
	while (!s.done)
		g_cond_wait(&c->cond, &c->mu);
	g_mutex_unlock(&c->mu);
}

struct members {
	struct o2lt_member_info *m;
	size_t n;
};

static void get_members(struct cluster *c, void *arg)
{
	struct members *ms = arg;
	size_t n = o2ls_members(c->ls, NULL, 0);

	ms->m = g_new0(struct o2lt_member_info, n ? n : 1);
	ms->n = o2ls_members(c->ls, ms->m, n);
}

/* ---- joining ---- */

static void cluster_free(struct cluster *c)
{
	if (c->thread) {
		g_main_loop_quit(c->loop);
		g_thread_join(c->thread);
	}
	g_main_loop_unref(c->loop);
	g_main_context_unref(c->ctx);
	if (c->orphan_waits)
		g_hash_table_destroy(c->orphan_waits);
	g_mutex_clear(&c->mu);
	g_cond_clear(&c->cond);
	g_free(c->why);
	g_free(c->name);
	g_free(c->device);
	g_free(c);
}

struct cluster *cluster_join(const char *device, const struct o2_super_info *si, GError **err)
{
	g_autoptr(GError) e = NULL;
	g_autofree char *name = o2cs_cluster_name(&e);
	char ls_name[33];

	if (!name) {
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_NOT_CONNECTED,
			    "%s is formatted for the %s cluster stack%s%s%s, so it is mounted through "
			    "the cluster, and %s (to mount it on this node alone, knowing that no "
			    "other node uses it, add the option nocluster)",
			    device, si->stack[0] ? si->stack : "o2cb",
			    si->cluster_name[0] ? " (cluster \"" : "", si->cluster_name,
			    si->cluster_name[0] ? "\")" : "", e->message);
		return NULL;
	}
	if (si->cluster_name[0] && strcmp(name, si->cluster_name) != 0) {
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
			    "%s belongs to cluster \"%s\", but this node's corosync runs cluster "
			    "\"%s\" (totem.cluster_name): refused (tunefs.ocfs2 "
			    "--update-cluster-stack moves a volume that no node uses)",
			    device, si->cluster_name, name);
		return NULL;
	}

	struct cluster *c = g_new0(struct cluster, 1);

	c->device = g_strdup(device);
	c->name = g_steal_pointer(&name);
	o2_lockspace_name(si->uuid, ls_name);
	snprintf(c->group, sizeof(c->group), "ocfs2d:%s", ls_name);
	c->ctx = g_main_context_new();
	c->loop = g_main_loop_new(c->ctx, FALSE);
	g_mutex_init(&c->mu);
	g_cond_init(&c->cond);
	c->thread = g_thread_new("ocfs2d-cluster", service_main, c);

	gint64 until = g_get_monotonic_time() + SYNC_TIMEOUT_S * G_TIME_SPAN_SECOND;

	g_mutex_lock(&c->mu);
	while (c->state == C_JOINING)
		if (!g_cond_wait_until(&c->cond, &c->mu, until))
			break;
	enum cluster_state st = c->state;
	g_autofree char *why = g_strdup(c->why);

	g_mutex_unlock(&c->mu);
	if (st != C_SYNCED) {
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "%s: joining the volume's lock group %s: %s", device, c->group,
			    st == C_JOINING ? "no lock state from the other members within 30 s"
					    : why);
		cluster_free(c);
		return NULL;
	}
	char lname[O2_LOCKNAME_LEN + 1];
	size_t len = o2_lockname(O2_LOCK_SUPER, 2, 0, lname);

	c->super = o2lc_res_get(c->lc, lname, len, NULL, NULL);
	g_message("%s: joined lock group %s of cluster \"%s\" as node %u", device, c->group,
		  c->name, c->self.nodeid);
	return c;
}

uint32_t cluster_nodeid(const struct cluster *c)
{
	return c->self.nodeid;
}

const char *cluster_name(const struct cluster *c)
{
	return c->name;
}

const char *cluster_group(const struct cluster *c)
{
	return c->group;
}

size_t cluster_members(struct cluster *c, struct o2lt_member_info **ret)
{
	struct members ms;

	call_on_service(c, get_members, &ms);
	*ret = ms.m;
	return ms.n;
}

void cluster_lock_stats(struct cluster *c, struct o2lc_stats *ret)
{
	o2lc_stats(c->lc, ret);
}

/* ---- locks ---- */

/* Take r in mode for one local user; nothing is cached under these locks. */
static int take(struct o2lc_res *r, int mode, unsigned flags)
{
	int rc = o2lc_lock(r, mode, flags);

	if (rc == O2LC_REFRESH) {
		o2lc_refresh_done(r, true);
		rc = 0;
	}
	return rc;
}

/* Describe the dead members of the group, for a message ("" if none). */
static char *dead_members(struct cluster *c)
{
	struct members ms;
	GString *s = g_string_new(NULL);

	ms.n = cluster_members(c, &ms.m);
	for (size_t i = 0; i < ms.n; i++)
		if (ms.m[i].state == O2LT_MEMBER_DEAD || ms.m[i].state == O2LT_MEMBER_FENCED)
			g_string_append_printf(s, "%s%u", s->len ? ", " : "", ms.m[i].id.nodeid);
	g_free(ms.m);
	return g_string_free(s, FALSE);
}

/*
 * The super lock EX.  Its holders hold it only while they mount or
 * unmount, and a node that holds it cached lowers it when asked, so the
 * wait is short, unless a node died holding it: its locks stay frozen until
 * it is fenced and recovered.  A group with a dead member is refused at
 * once rather than left waiting for that.
 */
static bool super_lock(struct cluster *c, GError **err)
{
	g_autofree char *dead = dead_members(c);
	int r;

	if (dead[0]) {
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_BUSY,
			    "%s: node %s died with the volume in use and is not yet recovered: "
			    "its locks stay frozen until it is fenced",
			    c->device, dead);
		return false;
	}
	r = take(c->super, O2LT_EX, 0);
	if (r < 0) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r),
			    "%s: taking the super lock: %s", c->device, g_strerror(-r));
		return false;
	}
	c->super_held = true;
	return true;
}

static void super_unlock(struct cluster *c)
{
	if (c->super_held) {
		o2lc_unlock(c->super, O2LT_EX);
		c->super_held = false;
	}
}

/* The journal lock of slot: the M lock of its journal inode. */
static int journal_res(struct cluster *c, struct o2_fs *fs, unsigned slot,
		       struct o2lc_res **ret)
{
	struct o2_inode *ino;
	uint64_t blkno;
	char lname[O2_LOCKNAME_LEN + 1];
	int r = o2_sysfile_lookup(fs, O2_SYS_JOURNAL, slot, &blkno);

	if (r < 0)
		return r;
	r = o2_inode_get(fs, blkno, &ino);
	if (r < 0)
		return r;
	size_t len = o2_lockname(O2_LOCK_META, blkno, o2_inode_info(ino)->generation, lname);

	o2_inode_unref(ino);
	*ret = o2lc_res_get(c->lc, lname, len, NULL, NULL);
	return *ret ? 0 : -EINVAL;
}

static int lock_slot_files(struct cluster *c, struct o2_fs *fs, unsigned slot, bool rw);

static bool fs_error(struct cluster *c, struct o2_fs *fs, int r, const char *what,
		     unsigned slot, GError **err)
{
	const char *msg = o2_fs_error(fs);

	g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r), "%s: %s of slot %u: %s",
		    c->device, what, slot, msg[0] ? msg : g_strerror(-r));
	return false;
}

static const struct o2lt_member_info *member_on(const struct members *ms, uint32_t nodeid,
						const struct o2lt_member *not)
{
	for (size_t i = 0; i < ms->n; i++) {
		const struct o2lt_member_info *m = &ms->m[i];

		if (m->id.nodeid != nodeid || m->state == O2LT_MEMBER_STALE)
			continue;
		if (not && m->id.nodeid == not->nodeid && m->id.pid == not->pid)
			continue;
		return m;
	}
	return NULL;
}

/*
 * Judge slot i, which the slot map gives to node: sets *ret_ours for this
 * node's own slot, *ret_free for a claim a crash left behind.
 */
static bool judge_held_slot(struct cluster *c, struct o2_fs *fs, const struct members *ms,
			    unsigned i, uint32_t node, bool *ret_ours, bool *ret_free,
			    GError **err)
{
	const struct o2lt_member_info *m = member_on(ms, node, &c->self);
	bool dirty, pending;
	int r;

	*ret_ours = *ret_free = false;
	if (m && m->state == O2LT_MEMBER_LIVE) {
		if (node == c->self.nodeid) {
			g_set_error(err, G_IO_ERROR, G_IO_ERROR_BUSY,
				    "%s is already mounted on this node (node %u, slot %u) by the "
				    "ocfs2d with pid %u",
				    c->device, node, i, m->id.pid);
			return false;
		}
		return true; /* a live node's slot: taken; this node mounts beside it */
	}
	if (m) {
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_BUSY,
			    "%s: node %u died holding slot %u (its ocfs2d, pid %u, failed): its "
			    "locks stay frozen until it is fenced and its journal recovered",
			    c->device, node, i, m->id.pid);
		return false;
	}
	if (node == c->self.nodeid) {
		*ret_ours = true; /* our daemon died; fscore replays the journal */
		return true;
	}
	/* not in the group: its journal lock says whether anyone still has the slot */
	struct o2lc_res *jr;

	r = journal_res(c, fs, i, &jr);
	if (r < 0)
		return fs_error(c, fs, r, "looking up the journal", i, err);
	r = take(jr, O2LT_EX, O2LC_NOQUEUE);
	if (r == -EAGAIN) {
		o2lc_res_forget(jr);
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_BUSY,
			    "%s: the journal of slot %u (node %u) is locked by another node "
			    "(recovering it?)",
			    c->device, i, node);
		return false;
	}
	if (r < 0) {
		o2lc_res_forget(jr);
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r),
			    "%s: locking the journal of slot %u: %s", c->device, i, g_strerror(-r));
		return false;
	}
	r = o2_journal_state(fs, i, &dirty, &pending);
	o2lc_unlock(jr, O2LT_EX);
	/*
	 * Not kept cached: the slot's owner (or whoever claims it next) takes
	 * this lock for its mount, and a cached EX here would stand in its way.
	 */
	o2lc_res_forget(jr);
	if (r < 0)
		return fs_error(c, fs, r, "reading the journal", i, err);
	if (dirty) {
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_BUSY,
			    "%s: node %u crashed with the volume mounted: the journal of slot %u "
			    "needs recovery, which ocfs2d does not do yet (with no node using the "
			    "volume, replay it with fsck.ocfs2 -fy)",
			    c->device, node, i);
		return false;
	}
	*ret_free = true; /* claimed, never used: a crash between the two */
	return true;
}

bool cluster_lock_journal(struct cluster *c, struct o2_fs *fs, unsigned slot, GError **err)
{
	int r = journal_res(c, fs, slot, &c->journal);

	if (r < 0)
		return fs_error(c, fs, r, "looking up the journal", slot, err);
	/*
	 * Waiting, not trying: another node may still have it cached from
	 * judging this slot (it lowers it when asked).  No dead member can
	 * hold it frozen: super_lock refused the mount if there were one.
	 */
	r = take(c->journal, O2LT_EX, 0);
	if (r < 0) {
		o2lc_res_forget(c->journal);
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r),
			    "%s: locking the journal of slot %u: %s", c->device, slot, g_strerror(-r));
		return false;
	}
	c->journal_held = true;
	return true;
}

void cluster_unlock_journal(struct cluster *c)
{
	if (c->journal_held) {
		o2lc_unlock(c->journal, O2LT_EX);
		o2lc_res_forget(c->journal);
		c->journal_held = false;
	}
}

bool cluster_mount_slot(struct cluster *c, struct o2_fs *fs, const struct mount_opts *opts,
			unsigned *ret_slot, GError **err)
{
	const struct o2_super_info *si = o2_fs_super(fs);
	g_autofree struct o2_slotmap_info *sm = g_new0(struct o2_slotmap_info, 1);
	g_autofree bool *is_free = g_new0(bool, si->max_slots);
	struct members ms = { 0 };
	int ours = -1, chosen = -1;
	bool ok = false;
	int r;

	if (!super_lock(c, err))
		return false;
	r = o2_slotmap_read(fs, sm);
	if (r < 0) {
		fs_error(c, fs, r, "reading the slot map", 0, err);
		return false;
	}
	ms.n = cluster_members(c, &ms.m);
	for (unsigned i = 0; i < sm->nslots; i++) {
		bool mine, stale;

		if (!sm->slots[i].valid) {
			is_free[i] = true;
			continue;
		}
		if (!judge_held_slot(c, fs, &ms, i, sm->slots[i].node, &mine, &stale, err))
			goto out;
		if (mine)
			ours = (int)i;
		is_free[i] = stale;
	}
	if (ours >= 0)
		chosen = ours;
	else if (opts->slot < sm->nslots && is_free[opts->slot])
		chosen = (int)opts->slot;
	else
		for (unsigned i = 0; i < sm->nslots && chosen < 0; i++)
			if (is_free[i])
				chosen = (int)i;
	if (chosen < 0) {
		GString *who = g_string_new(NULL);

		for (unsigned i = 0; i < sm->nslots; i++)
			g_string_append_printf(who, "%sslot %u: node %u", i ? ", " : "", i,
					       sm->slots[i].node);
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_NO_SPACE,
			    "%s: every slot is taken (%s); tunefs.ocfs2 -N adds slots", c->device,
			    who->str);
		g_string_free(who, TRUE);
		goto out;
	}
	/* a free slot whose journal still has transactions belongs to a crashed node */
	for (unsigned i = 0; i < sm->nslots; i++) {
		bool dirty, pending;

		if (!is_free[i] || sm->slots[i].valid || (int)i == chosen)
			continue;
		r = o2_journal_state(fs, i, &dirty, &pending);
		if (r < 0) {
			fs_error(c, fs, r, "reading the journal", i, err);
			goto out;
		}
		if (pending) {
			g_set_error(err, G_IO_ERROR, G_IO_ERROR_BUSY,
				    "%s: the journal of slot %u needs recovery (a node crashed with "
				    "the volume mounted), which ocfs2d does not do yet (with no node "
				    "using the volume, replay it with fsck.ocfs2 -fy)",
				    c->device, i);
			goto out;
		}
	}
	if (!opts->ro && !cluster_lock_journal(c, fs, (unsigned)chosen, err))
		goto out;
	/*
	 * Opening the slot read-write flushes its truncate log and gives back
	 * its window and empty groups into the global bitmap, which the other
	 * writers change under its lock; a read-only mount may replay its
	 * slot's journal.
	 */
	r = lock_slot_files(c, fs, (unsigned)chosen, !opts->ro);
	if (r < 0) {
		cluster_release(&c->mount_held);
		for (unsigned i = 0; i < G_N_ELEMENTS(c->slot_files); i++)
			cluster_unlock(&c->slot_files[i]);
		cluster_unlock_journal(c);
		fs_error(c, fs, r, "locking the slot's system files", (unsigned)chosen, err);
		goto out;
	}
	*ret_slot = (unsigned)chosen;
	ok = true;
out:
	g_free(ms.m);
	if (!ok)
		super_unlock(c);
	return ok;
}

void cluster_mount_done(struct cluster *c)
{
	cluster_release(&c->mount_held);
	super_unlock(c);
}

void cluster_bitmap(const struct cluster *c, uint64_t *blkno, uint32_t *gen)
{
	*blkno = c->bitmap_blkno;
	*gen = c->bitmap_gen;
}

bool cluster_unmount_begin(struct cluster *c, GError **err)
{
	return super_lock(c, err);
}

void cluster_leave(struct cluster *c)
{
	if (!c)
		return;
	cluster_release(&c->mount_held);
	for (unsigned i = 0; i < G_N_ELEMENTS(c->slot_files); i++)
		cluster_unlock(&c->slot_files[i]);
	super_unlock(c);
	cluster_unlock_journal(c);
	/* the service loop ends: it drops what is cached and leaves cleanly */
	cluster_free(c);
}

/* ---- the locks of filesystem operations ---- */

void cluster_set_fs(struct cluster *c, const struct cluster_fs_ops *ops, void *arg)
{
	c->fs_arg = arg;
	c->fs_ops = ops;
}

/*
 * Another node wants an inode lock this node holds (or the cache drops an
 * idle one).  Leaving EX, everything this node changed goes home first, so
 * that the other node reads it from the disk; our journal is one log for
 * every inode, so all of it is written back, as the kernel's checkpoint on
 * downconvert does.  Only a lock leaving this node (for NL) needs the log
 * emptied too: one kept at PR still keeps every other node from writing
 * what it covers, so a replay of our log cannot undo another node's work.
 * Leaving for NL, whatever is cached may go stale.
 */
static int inode_downconvert(struct o2lc_res *r, int from, int to, uint8_t *lvb, void *data)
{
	struct cluster *c = data;
	size_t len;
	const uint8_t *name = o2lc_res_name(r, &len);
	uint64_t blkno = 0;
	uint32_t gen;
	char type;
	int rc = 0;

	if (!c->fs_ops)
		return 0;
	if (o2_lockname_parse(name, len, &type, &blkno, &gen) < 0)
		blkno = 0;
	if (from == O2LT_EX)
		rc = c->fs_ops->writeback(c->fs_arg, to == O2LT_NL ? O2_WB_ALL : O2_WB_HOME);
	else if (to == O2LT_NL)
		rc = c->fs_ops->writeback(c->fs_arg, O2_WB_LOG);
	/* the inode as it is home now, for the next node (its refresh) */
	G_STATIC_ASSERT(O2_INODE_LVB_LEN <= O2LC_LVB_LEN);
	if (rc == 0 && from == O2LT_EX) {
		memset(lvb, 0, O2LC_LVB_LEN);
		if (blkno)
			c->fs_ops->lvb(c->fs_arg, blkno, lvb);
	}
	if (rc == 0 && to == O2LT_NL)
		c->fs_ops->lost(c->fs_arg, blkno);
	return rc;
}

/* The kernel's pages of the inode go before its lock does. */
static void inode_invalidate(struct o2lc_res *r, void *data)
{
	struct cluster *c = data;
	size_t len;
	const uint8_t *name = o2lc_res_name(r, &len);
	uint64_t blkno;
	uint32_t gen;
	char type;

	if (c->fs_ops && c->fs_ops->invalidate && o2_lockname_parse(name, len, &type, &blkno, &gen) == 0)
		c->fs_ops->invalidate(c->fs_arg, blkno);
}

static const struct o2lc_res_ops inode_res_ops = { inode_downconvert, inode_invalidate };

static struct o2lc_res *inode_res(struct cluster *c, uint64_t blkno, uint32_t gen)
{
	char lname[O2_LOCKNAME_LEN + 1];
	size_t len = o2_lockname(O2_LOCK_META, blkno, gen, lname);

	return o2lc_res_get(c->lc, lname, len, &inode_res_ops, c);
}

/*
 * o2lc_lock, but a thread about to wait for another node tells the volume
 * first (cluster_fs_ops.waiting: a thread serving requests one after
 * another hands its place on), having asked for the lock already.
 */
static int lock_res(struct cluster *c, struct o2lc_res *r, int mode, unsigned flags)
{
	int rc = o2lc_lock(r, mode, flags | O2LC_TRY);

	if (rc != -EWOULDBLOCK)
		return rc;
	if (c->fs_ops && c->fs_ops->waiting)
		c->fs_ops->waiting(c->fs_arg);
	return o2lc_lock(r, mode, flags);
}

/*
 * Take r (just got) in mode into h.  An inode lock regained refreshes
 * inode blkno (its block may have been read without the lock); a system
 * file's (sys) counts as lost until now: every cached block it covers is
 * read again (its groups and directory blocks may have been read,
 * unlocked, for an estimate).
 */
static int hold_res(struct cluster *c, struct o2lc_res *r, uint64_t blkno, int mode, bool sys,
		    unsigned lcflags, struct cluster_hold *h)
{
	int rc;

	if (!r)
		return -EINVAL;
	rc = lock_res(c, r, mode, lcflags);
	if (rc == O2LC_REFRESH) {
		if (sys && c->fs_ops)
			c->fs_ops->lost(c->fs_arg, blkno);
		else if (blkno && c->fs_ops) {
			uint8_t lvb[O2LC_LVB_LEN];

			c->fs_ops->refresh(c->fs_arg, blkno, o2lc_lvb(r, lvb) ? lvb : NULL);
		}
		o2lc_refresh_done(r, true);
		rc = 0;
	}
	if (rc < 0) {
		o2lc_res_put(r);
		return rc == -ENOTCONN ? -EIO : rc;
	}
	h->res = r;
	h->mode = mode;
	return 0;
}

int cluster_lock_inode(struct cluster *c, uint64_t blkno, uint32_t gen, int mode,
		       struct cluster_hold *h)
{
	return hold_res(c, inode_res(c, blkno, gen), blkno, mode, false, 0, h);
}

int cluster_lock_inode_cached(struct cluster *c, uint64_t blkno, uint32_t gen,
			      struct cluster_hold *h)
{
	struct o2lc_res *r = inode_res(c, blkno, gen);
	int rc;

	if (!r)
		return -EINVAL;
	/* a try that asks nothing: held already, or not at all */
	rc = o2lc_lock(r, O2LT_PR, O2LC_TRY | O2LC_NOQUEUE);
	if (rc == O2LC_REFRESH) {
		/* regained, not refreshed: not for this caller (it holds the volume mutex) */
		o2lc_refresh_done(r, false);
		o2lc_unlock(r, O2LT_PR);
		rc = -EWOULDBLOCK;
	}
	if (rc < 0) {
		o2lc_res_put(r);
		return rc;
	}
	h->res = r;
	h->mode = O2LT_PR;
	return 0;
}

int cluster_lock_inode_flags(struct cluster *c, uint64_t blkno, uint32_t gen, int mode,
			     unsigned flags, struct cluster_hold *h)
{
	unsigned lcflags = (flags & CLUSTER_ADMIT ? O2LC_ADMIT : 0) |
			   (flags & CLUSTER_WRITER ? O2LC_NOPR : 0);

	return hold_res(c, inode_res(c, blkno, gen), blkno, mode, false, lcflags, h);
}

/* ---- system files' locks ---- */

/* The operation running on this thread: what fscore's lock_held asks about. */
static __thread struct held *op_held;

static int sysfile(struct o2_fs *fs, enum o2_sysfile type, unsigned slot, uint64_t *blkno,
		   uint32_t *gen)
{
	struct o2_inode *ino;
	int r = o2_sysfile_lookup(fs, type, slot, blkno);

	if (r == 0)
		r = o2_inode_get(fs, *blkno, &ino);
	if (r < 0)
		return r;
	*gen = o2_inode_info(ino)->generation;
	o2_inode_unref(ino);
	return 0;
}

/*
 * The slot's system files (rw: the slot is written) and the global
 * bitmap, read from fs, and their locks as cluster_mount_slot says.
 */
static int lock_slot_files(struct cluster *c, struct o2_fs *fs, unsigned slot, bool rw)
{
	static const enum o2_sysfile own[] = { O2_SYS_INODE_ALLOC, O2_SYS_EXTENT_ALLOC,
					       O2_SYS_ORPHAN_DIR };
	static const enum o2_sysfile kept[] = { O2_SYS_LOCAL_ALLOC, O2_SYS_TRUNCATE_LOG };
	int r = sysfile(fs, O2_SYS_GLOBAL_BITMAP, 0, &c->bitmap_blkno, &c->bitmap_gen);

	/* read-only too: a mount that replays its slot first opens it read-write */
	c->nown = 0;
	for (unsigned i = 0; r == 0 && i < G_N_ELEMENTS(own); i++) {
		unsigned j = c->nown++;

		r = sysfile(fs, own[i], slot, &c->own_blk[j], &c->own_gen[j]);
		/* block order */
		for (; r == 0 && j && c->own_blk[j - 1] > c->own_blk[j]; j--) {
			uint64_t b = c->own_blk[j];
			uint32_t g = c->own_gen[j];

			c->own_blk[j] = c->own_blk[j - 1], c->own_gen[j] = c->own_gen[j - 1];
			c->own_blk[j - 1] = b, c->own_gen[j - 1] = g;
		}
	}
	for (unsigned i = 0; rw && r == 0 && i < G_N_ELEMENTS(kept); i++) {
		uint64_t blkno;
		uint32_t gen;

		r = sysfile(fs, kept[i], slot, &blkno, &gen);
		if (r == 0)
			r = hold_res(c, inode_res(c, blkno, gen), blkno, O2LT_EX, true, 0,
				     &c->slot_files[i]);
	}
	if (r == 0)
		r = cluster_hold_own(c, &c->mount_held);
	if (r == 0)
		r = cluster_hold_sys(c, &c->mount_held, c->bitmap_blkno, c->bitmap_gen, O2LT_EX);
	return r;
}

/* Where a system file's lock comes in the order: block order, the global bitmap last. */
static uint64_t sys_rank(const struct cluster *c, uint64_t blkno)
{
	return blkno == c->bitmap_blkno ? UINT64_MAX : blkno;
}

static int take_sys(struct cluster *c, struct held *hd, uint64_t blkno, uint32_t gen, int mode)
{
	unsigned i = hd->n;
	int r;

	if (i == HELD_MAX)
		return -EINVAL;
	r = hold_res(c, inode_res(c, blkno, gen), blkno, mode, true, 0, &hd->h[i]);
	if (r < 0)
		return r;
	hd->blk[i] = blkno;
	hd->gen[i] = gen;
	hd->sys[i] = true;
	hd->n++;
	return 0;
}

int cluster_hold_sys(struct cluster *c, struct held *hd, uint64_t blkno, uint32_t gen, int mode)
{
	struct {
		uint64_t blkno;
		uint32_t gen;
		int mode;
	} later[HELD_MAX];
	unsigned nl = 0;
	int r;

	op_held = hd;
	for (unsigned i = 0; i < hd->n; i++)
		if (hd->sys[i] && hd->blk[i] == blkno && hd->h[i].mode >= mode)
			return 0;
	/*
	 * What comes after it in the order goes meanwhile, so that no two
	 * nodes wait for each other's (a lock named in a weaker mode is taken
	 * again in the stronger).
	 */
	while (hd->n && hd->sys[hd->n - 1] &&
	       sys_rank(c, hd->blk[hd->n - 1]) >= sys_rank(c, blkno)) {
		unsigned i = --hd->n;

		if (hd->blk[i] == blkno) {
			mode = MAX(mode, hd->h[i].mode);
		} else {
			later[nl].blkno = hd->blk[i];
			later[nl].gen = hd->gen[i];
			later[nl++].mode = hd->h[i].mode;
		}
		cluster_unlock(&hd->h[i]);
	}
	r = take_sys(c, hd, blkno, gen, mode);
	while (r == 0 && nl--)
		r = take_sys(c, hd, later[nl].blkno, later[nl].gen, later[nl].mode);
	return r;
}

int cluster_hold_own(struct cluster *c, struct held *hd)
{
	int r = 0;

	for (unsigned i = 0; i < c->nown && r == 0; i++)
		r = cluster_hold_sys(c, hd, c->own_blk[i], c->own_gen[i], O2LT_EX);
	return r;
}

bool cluster_drop_sys(struct held *hd)
{
	bool any = false;

	while (hd->n && hd->sys[hd->n - 1]) {
		cluster_unlock(&hd->h[--hd->n]);
		any = true;
	}
	return any;
}

void cluster_held_use(struct held *hd)
{
	op_held = hd;
}

void cluster_release(struct held *hd)
{
	while (hd->n)
		cluster_unlock(&hd->h[--hd->n]);
	hd->retries = 0;
	if (op_held == hd)
		op_held = NULL;
}

int cluster_write_back(struct cluster *c)
{
	return c && c->fs_ops ? c->fs_ops->writeback(c->fs_arg, O2_WB_HOME) : 0;
}

bool cluster_held_contended(const struct held *hd, uint64_t blkno)
{
	for (unsigned i = 0; i < hd->n; i++)
		if (hd->blk[i] == blkno && !hd->sys[i] && hd->h[i].res)
			return o2lc_res_contended(hd->h[i].res, CLUSTER_CONTENDED_US);
	return false;
}

bool cluster_sys_held(uint64_t blkno, bool ex)
{
	const struct held *hd = op_held;

	for (unsigned i = 0; hd && i < hd->n; i++)
		if (hd->sys[i] && hd->blk[i] == blkno && hd->h[i].mode >= (ex ? O2LT_EX : O2LT_PR))
			return true;
	return false;
}

void cluster_unlock(struct cluster_hold *h)
{
	if (!h->res)
		return;
	o2lc_unlock(h->res, h->mode);
	o2lc_res_put(h->res);
	h->res = NULL;
}

/* The rename lock: no inode of its own, nothing cached under it. */
int cluster_lock_rename(struct cluster *c, struct cluster_hold *h)
{
	char lname[O2_LOCKNAME_LEN + 1];
	size_t len = o2_lockname(O2_LOCK_RENAME, 0, 0, lname);

	return hold_res(c, o2lc_res_get(c->lc, lname, len, NULL, NULL), 0, O2LT_EX, false, 0, h);
}

/*
 * Open locks: a node that has an inode open holds its O lock PR, and keeps
 * it cached after the last close, as the kernel's OCFS2 keeps it while the
 * inode is in its cache: opening it again costs no message (a FUSE FORGET
 * does not drop it: the kernel forgets an inode at each new epoch, and
 * looks it up again at once).  The node about to free an inode whose
 * last name is gone tries it EX without waiting, and keeps
 * the inode as an orphan if anyone holds it; the try tells the holders
 * (O2LC_TELL), and one that only caches the lock lets it go, so that the
 * orphan scan's next try frees it.  They cache nothing and write nothing
 * back (no callback), so a try may run under the volume mutex.
 */
static struct o2lc_res *open_res(struct cluster *c, uint64_t blkno, uint32_t gen)
{
	char lname[O2_LOCKNAME_LEN + 1];
	size_t len = o2_lockname(O2_LOCK_OPEN, blkno, gen, lname);

	return o2lc_res_get(c->lc, lname, len, NULL, NULL);
}

int cluster_open_hold(struct cluster *c, uint64_t blkno, uint32_t gen, struct cluster_hold *h)
{
	return hold_res(c, open_res(c, blkno, gen), 0, O2LT_PR, false, 0, h);
}

/* Take r as new in mode and leave it cached: whether it is held now. */
static bool made_res(struct o2lc_res *r, int mode, unsigned flags)
{
	int rc;

	if (!r)
		return false;
	rc = o2lc_lock_new(r, mode, flags | O2LC_TRY);
	if (rc == O2LC_REFRESH)
		o2lc_refresh_done(r, false); /* known before: the next user refreshes */
	if (rc >= 0)
		o2lc_unlock(r, mode);
	o2lc_res_put(r);
	return rc == 0;
}

bool cluster_made(struct cluster *c, uint64_t blkno, uint32_t gen, bool file)
{
	if (file)
		made_res(open_res(c, blkno, gen), O2LT_PR, 0);
	return made_res(inode_res(c, blkno, gen), O2LT_EX, file ? O2LC_NOPR : 0);
}

int cluster_settle(struct cluster *c)
{
	return c->lc && o2lc_settle(c->lc) < 0 ? -EIO : 0;
}

int cluster_open_elsewhere(struct cluster *c, uint64_t blkno, uint32_t gen)
{
	struct o2lc_res *r = open_res(c, blkno, gen);
	int rc;

	if (!r)
		return -EINVAL;
	/* made here and never written home: nobody else can have it open */
	if (o2lc_forget_unannounced(r)) {
		o2lc_res_forget(r);
		return 0;
	}
	rc = lock_res(c, r, O2LT_EX, O2LC_NOQUEUE | O2LC_TELL);
	if (rc == O2LC_REFRESH) {
		o2lc_refresh_done(r, true);
		rc = 0;
	}
	if (rc == 0)
		o2lc_unlock(r, O2LT_EX);
	o2lc_res_forget(r);
	return rc == 0 ? 0 : rc == -EAGAIN ? 1 : rc;
}

/*
 * How long an orphan another node holds open is left alone: the first
 * look waits one second, each look that finds it still open twice as
 * long, up to a minute.  The node that closes it last frees it itself
 * (o2_fs_orphans lists another slot's orphan whose last reference was
 * there), so these looks only matter when that node went away without
 * freeing it; a look each second would cost a message each second for
 * as long as the file stays open.
 */
#define ORPHAN_WAIT_FIRST_US G_USEC_PER_SEC
#define ORPHAN_WAIT_MAX_US (60 * G_USEC_PER_SEC)

struct orphan_wait {
	uint64_t blkno;
	uint32_t gen;
	gint64 next;	/* monotonic time of the next look */
	gint64 wait;	/* how long the next finding "still open" waits */
	bool seen;	/* in the current list (the rest are gone) */
};

size_t cluster_orphans_due(struct cluster *c, uint64_t *blknos, uint32_t *gens, size_t n)
{
	gint64 now = g_get_monotonic_time();
	GHashTableIter it;
	gpointer val;
	size_t due = 0;

	if (!c->orphan_waits)
		c->orphan_waits = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
	g_hash_table_iter_init(&it, c->orphan_waits);
	while (g_hash_table_iter_next(&it, NULL, &val))
		((struct orphan_wait *)val)->seen = false;
	for (size_t i = 0; i < n; i++) {
		struct orphan_wait *w = g_hash_table_lookup(c->orphan_waits, &blknos[i]);
		int r;

		if (w && w->gen != gens[i]) {
			/* another inode in the same block: its own waits */
			g_hash_table_remove(c->orphan_waits, &blknos[i]);
			w = NULL;
		}
		if (w && now < w->next) {
			w->seen = true;
			continue;
		}
		r = cluster_open_elsewhere(c, blknos[i], gens[i]);
		if (r == 1) {
			if (!w) {
				w = g_new0(struct orphan_wait, 1);
				w->blkno = blknos[i];
				w->gen = gens[i];
				w->wait = ORPHAN_WAIT_FIRST_US;
				g_hash_table_insert(c->orphan_waits, &w->blkno, w);
			}
			w->next = now + w->wait;
			w->wait = MIN(w->wait * 2, ORPHAN_WAIT_MAX_US);
			w->seen = true;
			continue;
		}
		/* free to lock (or the try failed: the locked pass says why) */
		if (w)
			g_hash_table_remove(c->orphan_waits, &blknos[i]);
		blknos[due] = blknos[i];
		gens[due] = gens[i];
		due++;
	}
	g_hash_table_iter_init(&it, c->orphan_waits);
	while (g_hash_table_iter_next(&it, NULL, &val))
		if (!((struct orphan_wait *)val)->seen)
			g_hash_table_iter_remove(&it);
	return due;
}

void cluster_set_lock_cache(struct cluster *c, unsigned n)
{
	o2lc_set_limit(c->lc, n);
}
