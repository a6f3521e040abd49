// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The daemon's registry of mounted volumes (daemon/registry.h), alone.
 *
 * registry.c needs nothing of the daemon but volume_ref and volume_unref,
 * so this file stands in for them with counting versions over volumes
 * that are only names: what is checked is that the registry keeps the
 * claims, entries and early goings apart, hands references out and back
 * as it says, runs its callbacks only when it says, and wakes its waiters.
 */
#include "registry.h"

#include <check.h>
#include <glib.h>
#include <string.h>

/* ---- stand-ins for volume.c ---- */

struct volume *volume_ref(struct volume *v)
{
	g_atomic_int_inc(&v->refs);
	return v;
}

/* The test owns the volumes: the count only has to come back down. */
void volume_unref(struct volume *v)
{
	g_atomic_int_add(&v->refs, -1);
}

static struct volume *fake_volume(const char *mnt)
{
	struct volume *v = g_new0(struct volume, 1);

	v->mountpoint = g_strdup(mnt);
	v->refs = 1; /* the mounter's, which an entry takes over */
	return v;
}

static void fake_volume_free(struct volume *v)
{
	g_free(v->mountpoint);
	g_free(v);
}

static struct mounted *entry_for(struct volume *v)
{
	struct mounted *m = g_new0(struct mounted, 1);

	m->v = v;
	m->path = g_strdup_printf("/o%s", v->mountpoint);
	return m;
}

/* A callback that counts its calls and keeps the last entry it saw. */
struct seen {
	int calls;
	struct mounted *last;
};

static void see(struct mounted *m, void *arg)
{
	struct seen *s = arg;

	s->calls++;
	s->last = m;
}

static void set_unmounting(struct mounted *m, void *arg)
{
	m->unmounting = true;
}

START_TEST(test_claims)
{
	struct registry *r = registry_new();

	ck_assert(registry_claim(r, "/mnt/a"));
	ck_assert_msg(!registry_claim(r, "/mnt/a"), "a second Mount on a claimed mount point");
	ck_assert(registry_claim(r, "/mnt/b"));
	registry_unclaim(r, "/mnt/a");
	ck_assert_msg(registry_claim(r, "/mnt/a"), "a mount point is free again once unclaimed");
	ck_assert_uint_eq(registry_count(r), 0);
	registry_free(r);
}
END_TEST

START_TEST(test_add_find_remove)
{
	struct registry *r = registry_new();
	struct volume *v = fake_volume("/mnt/a");
	struct mounted *m = entry_for(v);
	struct seen added = { 0 }, removed = { 0 };
	const char *state;
	bool ro = true;

	ck_assert(registry_claim(r, "/mnt/a"));
	ck_assert(registry_add(r, "/mnt/a", m, see, &added));
	ck_assert_int_eq(added.calls, 1);
	ck_assert_ptr_eq(added.last, m);
	ck_assert_uint_eq(registry_count(r), 1);
	ck_assert_msg(!registry_claim(r, "/mnt/a"), "a mounted mount point cannot be claimed");

	struct volume *found = registry_find(r, "/mnt/a");

	ck_assert_ptr_eq(found, v);
	ck_assert_int_eq(v->refs, 2);
	volume_unref(found);
	ck_assert_ptr_null(registry_find(r, "/mnt/b"));

	registry_read_state(r, m, &ro, &state);
	ck_assert(!ro);
	ck_assert_str_eq(state, "mounted");
	ck_assert(registry_update(r, v, set_unmounting, NULL));
	registry_read_state(r, m, &ro, &state);
	ck_assert_str_eq(state, "unmounting");
	m->unmounting = false;
	m->turned_ro = true;
	registry_read_state(r, m, &ro, &state);
	ck_assert_str_eq(state, "read-only");

	registry_remove(r, v, see, &removed);
	ck_assert_int_eq(removed.calls, 1);
	ck_assert_ptr_eq(removed.last, m);
	ck_assert_uint_eq(registry_count(r), 0);
	ck_assert_ptr_null(registry_find(r, "/mnt/a"));
	ck_assert_msg(!registry_update(r, v, set_unmounting, NULL),
		      "an update of a volume no longer registered");
	/* the entry is the caller's now, with the mounter's reference */
	ck_assert_int_eq(v->refs, 1);
	mounted_free(m);
	ck_assert_int_eq(v->refs, 0);
	fake_volume_free(v);
	registry_free(r);
}
END_TEST

START_TEST(test_gone_early)
{
	struct registry *r = registry_new();
	struct volume *v = fake_volume("/mnt/a");
	struct mounted *m = entry_for(v);
	struct seen removed = { 0 }, added = { 0 };

	ck_assert(registry_claim(r, "/mnt/a"));
	/* the volume closes before its Mount registers it */
	registry_remove(r, v, see, &removed);
	ck_assert_int_eq(removed.calls, 0);
	ck_assert_msg(!registry_add(r, "/mnt/a", m, see, &added),
		      "a volume gone before it was registered is refused");
	ck_assert_int_eq(added.calls, 0);
	ck_assert_uint_eq(registry_count(r), 0);
	ck_assert_msg(registry_claim(r, "/mnt/a"), "the refused add ended the claim");
	mounted_free(m);
	fake_volume_free(v);
	registry_free(r);
}
END_TEST

/* Another volume on the same mount point is not the registered one. */
START_TEST(test_other_volume_same_mountpoint)
{
	struct registry *r = registry_new();
	struct volume *v = fake_volume("/mnt/a"), *w = fake_volume("/mnt/a");
	struct mounted *m = entry_for(v);
	struct seen removed = { 0 };

	ck_assert(registry_claim(r, "/mnt/a"));
	ck_assert(registry_add(r, "/mnt/a", m, NULL, NULL));
	ck_assert(!registry_update(r, w, set_unmounting, NULL));
	registry_remove(r, w, see, &removed);
	ck_assert_int_eq(removed.calls, 0);
	ck_assert_uint_eq(registry_count(r), 1);
	/* entries left are freed with the registry, their references dropped */
	registry_free(r);
	ck_assert_int_eq(v->refs, 0);
	fake_volume_free(v);
	fake_volume_free(w);
}
END_TEST

struct remover {
	struct registry *r;
	struct volume *v;
	struct seen removed;
};

static gpointer remove_later(gpointer arg)
{
	struct remover *x = arg;

	g_usleep(100 * 1000);
	registry_remove(x->r, x->v, see, &x->removed);
	return NULL;
}

START_TEST(test_waits)
{
	struct registry *r = registry_new();
	struct volume *v = fake_volume("/mnt/a");
	struct mounted *m = entry_for(v);
	struct remover x = { r, v, { 0 } };

	/* nothing registered: no wait */
	registry_wait_removal(r);
	ck_assert(registry_claim(r, "/mnt/a"));
	ck_assert(registry_add(r, "/mnt/a", m, NULL, NULL));

	GThread *t = g_thread_new("remover", remove_later, &x);

	registry_wait_gone(r, v);
	ck_assert_int_eq(x.removed.calls, 1);
	ck_assert_uint_eq(registry_count(r), 0);
	g_thread_join(t);
	mounted_free(m);

	/* wait_removal wakes on the next removal */
	v->refs = 1;
	m = entry_for(v);
	x.removed.calls = 0;
	ck_assert(registry_claim(r, "/mnt/a"));
	ck_assert(registry_add(r, "/mnt/a", m, NULL, NULL));
	t = g_thread_new("remover", remove_later, &x);
	registry_wait_removal(r);
	g_thread_join(t);
	ck_assert_int_eq(x.removed.calls, 1);
	mounted_free(m);
	fake_volume_free(v);
	registry_free(r);
}
END_TEST

static void collect(struct mounted *m, void *arg)
{
	g_ptr_array_add(arg, m);
}

START_TEST(test_foreach)
{
	struct registry *r = registry_new();
	struct volume *v[3] = { fake_volume("/a"), fake_volume("/b"), fake_volume("/c") };
	g_autoptr(GPtrArray) all = g_ptr_array_new();

	for (int i = 0; i < 3; i++) {
		ck_assert(registry_claim(r, v[i]->mountpoint));
		ck_assert(registry_add(r, v[i]->mountpoint, entry_for(v[i]), NULL, NULL));
	}
	registry_foreach(r, collect, all);
	ck_assert_uint_eq(all->len, 3);
	registry_free(r);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(v[i]->refs, 0);
		fake_volume_free(v[i]);
	}
}
END_TEST

static Suite *registry_suite(void)
{
	Suite *s = suite_create("registry");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_claims);
	tcase_add_test(tc, test_add_find_remove);
	tcase_add_test(tc, test_gone_early);
	tcase_add_test(tc, test_other_volume_same_mountpoint);
	tcase_add_test(tc, test_waits);
	tcase_add_test(tc, test_foreach);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(registry_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
