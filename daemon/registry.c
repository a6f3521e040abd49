// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The registry of mounted volumes (registry.h): three sets under one
 * mutex, and a condition for those who wait for a volume to go.
 *
 * A volume can close before its Mount has registered it (umount(8) right
 * after the mount, or an aborted connection): registry_remove then finds
 * nothing to remove, so it remembers the volume in gone_early, and the
 * Mount's registry_add, finding it there, refuses to register a volume
 * that no one would ever remove.
 */

#include "registry.h"

struct registry {
	GMutex lock;
	GCond cond;		/* broadcast by every registry_remove */
	GHashTable *by_mnt;	/* v->mountpoint -> struct mounted * */
	GHashTable *gone_early;	/* struct volume *: gone before registered */
	GHashTable *claimed;	/* mount points (owned copies) Mounts in progress hold */
};

void mounted_free(struct mounted *m)
{
	volume_unref(m->v);
	g_free(m->path);
	g_free(m->uuid);
	g_free(m->label);
	g_free(m->stack);
	g_free(m->options);
	g_free(m->cluster_name);
	g_free(m);
}

struct registry *registry_new(void)
{
	struct registry *r = g_new0(struct registry, 1);

	g_mutex_init(&r->lock);
	g_cond_init(&r->cond);
	/* keyed by the volume's own string: the entry lives no longer than it */
	r->by_mnt = g_hash_table_new_full(g_str_hash, g_str_equal, NULL,
					  (GDestroyNotify)mounted_free);
	r->gone_early = g_hash_table_new(NULL, NULL);
	r->claimed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	return r;
}

void registry_free(struct registry *r)
{
	if (!r)
		return;
	g_hash_table_destroy(r->by_mnt);
	g_hash_table_destroy(r->gone_early);
	g_hash_table_destroy(r->claimed);
	g_mutex_clear(&r->lock);
	g_cond_clear(&r->cond);
	g_free(r);
}

/* v's entry, if v is the volume registered on its mount point (under the lock). */
static struct mounted *entry_of_locked(struct registry *r, struct volume *v)
{
	struct mounted *m = g_hash_table_lookup(r->by_mnt, v->mountpoint);

	return m && m->v == v ? m : NULL;
}

bool registry_claim(struct registry *r, const char *mnt)
{
	g_mutex_lock(&r->lock);
	/* a second Mount on one mount point does not wait for the first: it fails */
	bool taken = g_hash_table_contains(r->by_mnt, mnt) || g_hash_table_contains(r->claimed, mnt);

	if (!taken)
		g_hash_table_add(r->claimed, g_strdup(mnt));
	g_mutex_unlock(&r->lock);
	return !taken;
}

void registry_unclaim(struct registry *r, const char *mnt)
{
	g_mutex_lock(&r->lock);
	g_hash_table_remove(r->claimed, mnt);
	g_mutex_unlock(&r->lock);
}

bool registry_add(struct registry *r, const char *claimed, struct mounted *m, registry_fn then,
		  void *arg)
{
	g_mutex_lock(&r->lock);
	g_hash_table_remove(r->claimed, claimed);
	bool early = g_hash_table_remove(r->gone_early, m->v);

	if (!early) {
		g_hash_table_insert(r->by_mnt, m->v->mountpoint, m);
		if (then)
			then(m, arg);
	}
	g_mutex_unlock(&r->lock);
	return !early;
}

void registry_remove(struct registry *r, struct volume *v, registry_fn then, void *arg)
{
	g_mutex_lock(&r->lock);
	struct mounted *m = entry_of_locked(r, v);

	if (m) {
		/* the entry is then's now: take it out without freeing it */
		g_hash_table_steal(r->by_mnt, v->mountpoint);
		then(m, arg);
	} else {
		g_hash_table_add(r->gone_early, v);
	}
	g_cond_broadcast(&r->cond);
	g_mutex_unlock(&r->lock);
}

struct volume *registry_find(struct registry *r, const char *mnt)
{
	struct volume *v = NULL;

	g_mutex_lock(&r->lock);
	struct mounted *m = g_hash_table_lookup(r->by_mnt, mnt);

	if (m)
		v = volume_ref(m->v);
	g_mutex_unlock(&r->lock);
	return v;
}

bool registry_update(struct registry *r, struct volume *v, registry_fn fn, void *arg)
{
	g_mutex_lock(&r->lock);
	struct mounted *m = entry_of_locked(r, v);

	if (m)
		fn(m, arg);
	g_mutex_unlock(&r->lock);
	return m != NULL;
}

void registry_foreach(struct registry *r, registry_fn fn, void *arg)
{
	GHashTableIter it;
	gpointer val;

	g_mutex_lock(&r->lock);
	g_hash_table_iter_init(&it, r->by_mnt);
	while (g_hash_table_iter_next(&it, NULL, &val))
		fn(val, arg);
	g_mutex_unlock(&r->lock);
}

unsigned registry_count(struct registry *r)
{
	g_mutex_lock(&r->lock);
	unsigned n = g_hash_table_size(r->by_mnt);

	g_mutex_unlock(&r->lock);
	return n;
}

void registry_read_state(struct registry *r, const struct mounted *m, bool *ro,
			 const char **state)
{
	g_mutex_lock(&r->lock);
	*ro = m->ro;
	*state = m->unmounting ? "unmounting" : m->turned_ro ? "read-only" : "mounted";
	g_mutex_unlock(&r->lock);
}

void registry_wait_gone(struct registry *r, struct volume *v)
{
	g_mutex_lock(&r->lock);
	while (entry_of_locked(r, v))
		g_cond_wait(&r->cond, &r->lock);
	g_mutex_unlock(&r->lock);
}

void registry_wait_removal(struct registry *r)
{
	g_mutex_lock(&r->lock);
	/* one wake-up is enough: the caller looks again at what is left */
	if (g_hash_table_size(r->by_mnt))
		g_cond_wait(&r->cond, &r->lock);
	g_mutex_unlock(&r->lock);
}
