// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Mount options, table-driven so that the string form and the D-Bus form
 * cannot drift apart: each option has a kind (flag, seconds, count), a
 * range, and a field of struct mount_opts.
 */

#include <math.h>
#include <stddef.h>
#include <string.h>

#include <gio/gio.h>

#include "api.h"
#include "mountopts.h"

enum opt_kind { OPT_FLAG, OPT_SECONDS, OPT_COUNT, OPT_IGNORED };

struct opt_def {
	const char *name;	/* the option; for a flag, the setting that makes it true */
	const char *negation;	/* a flag's opposite ("rw" for "ro"), or NULL */
	enum opt_kind kind;
	size_t offset;		/* of the field in struct mount_opts */
	bool inverted;		/* a flag whose field says the opposite (user_xattr: !nouser_xattr) */
	unsigned min, max;	/* counts; seconds are 0 to 86400 */
};

#define FIELD(f) offsetof(struct mount_opts, f)
#define SECONDS_MAX 86400.0

static const struct opt_def opt_defs[] = {
	{ "ro", "rw", OPT_FLAG, FIELD(ro), false, 0, 0 },
	/* every user may enter, the kernel checking modes (default_permissions);
	   noallow_other: only the mounting user, root (FUSE's own default) */
	{ "allow_other", "noallow_other", OPT_FLAG, FIELD(allow_other), false, 0, 0 },
	{ "debug", NULL, OPT_FLAG, FIELD(debug), false, 0, 0 },
	{ "user_xattr", "nouser_xattr", OPT_FLAG, FIELD(nouser_xattr), true, 0, 0 },
	{ "acl", "noacl", OPT_FLAG, FIELD(acl), false, 0, 0 },
	{ "xattr", "noxattr", OPT_FLAG, FIELD(noxattr), true, 0, 0 },
	{ "uring", "nouring", OPT_FLAG, FIELD(uring), false, 0, 0 },
	{ "writeback_cache", "nowriteback_cache", OPT_FLAG, FIELD(writeback_cache), false, 0, 0 },
	/* the kernel's per-mount flags (mount(8) adds them for fstab's user) */
	{ "nosuid", "suid", OPT_FLAG, FIELD(nosuid), false, 0, 0 },
	{ "nodev", "dev", OPT_FLAG, FIELD(nodev), false, 0, 0 },
	{ "noexec", "exec", OPT_FLAG, FIELD(noexec), false, 0, 0 },
	{ "entry_timeout", NULL, OPT_SECONDS, FIELD(entry_timeout), false, 0, 0 },
	{ "attr_timeout", NULL, OPT_SECONDS, FIELD(attr_timeout), false, 0, 0 },
	{ "commit", NULL, OPT_COUNT, FIELD(commit_s), false, 1, 3600 },
	{ "slot", NULL, OPT_COUNT, FIELD(slot), false, 0, 254 },
	/* kernel OCFS2's spelling of the same (an alias: never written back) */
	{ "preferred_slot", NULL, OPT_COUNT, FIELD(slot), false, 0, 254 },
	{ "nocluster", NULL, OPT_FLAG, FIELD(nocluster), false, 0, 0 },
	{ "localflocks", NULL, OPT_FLAG, FIELD(localflocks), false, 0, 0 },
	{ "norecovery", NULL, OPT_FLAG, FIELD(norecovery), false, 0, 0 },
	{ "poll", NULL, OPT_COUNT, FIELD(poll_us), false, 0, 100000 },
	{ "threads", NULL, OPT_COUNT, FIELD(threads), false, 1, 64 },
	{ "lock_cache", NULL, OPT_COUNT, FIELD(lock_cache), false, 16, 10000000 },
	/* kernel OCFS2's: too large for the volume falls back to the default */
	{ "localalloc", NULL, OPT_COUNT, FIELD(localalloc_mb), false, 0, 65536 },
	/* accepted for fstab habits; nothing to do */
	{ "defaults", NULL, OPT_IGNORED, 0, false, 0, 0 },
	{ "noatime", NULL, OPT_IGNORED, 0, false, 0, 0 },
	{ "relatime", NULL, OPT_IGNORED, 0, false, 0, 0 },
	{ "_netdev", NULL, OPT_IGNORED, 0, false, 0, 0 },
	{ "nofail", NULL, OPT_IGNORED, 0, false, 0, 0 },
};

#define KNOWN_LIST                                                                            \
	"ro, rw, allow_other, noallow_other, entry_timeout=S, attr_timeout=S, commit=S, slot=N, " \
	"preferred_slot=N, nocluster, localflocks, norecovery, poll=USEC, threads=N, lock_cache=N, " \
	"localalloc=MB, user_xattr, " \
	"nouser_xattr, acl, " \
	"noacl, xattr, noxattr, uring, nouring, writeback_cache, nowriteback_cache, nosuid, " \
	"suid, nodev, dev, noexec, exec, debug"

void mount_opts_default(struct mount_opts *o)
{
	*o = (struct mount_opts){ .allow_other = true, .entry_timeout = 1.0, .attr_timeout = 1.0,
				  .commit_s = 5, .poll_us = 200, .threads = 16, .lock_cache = 65536,
				  /* libfuse's own defaults, as mount(8) makes them for users */
				  .nosuid = true, .nodev = true };
}

static bool *flag_field(struct mount_opts *o, const struct opt_def *d)
{
	return (bool *)((char *)o + d->offset);
}

static void set_flag(struct mount_opts *o, const struct opt_def *d, bool on)
{
	*flag_field(o, d) = d->inverted ? !on : on;
}

static bool set_seconds(struct mount_opts *o, const struct opt_def *d, double v)
{
	if (!isfinite(v) || v < 0 || v > SECONDS_MAX)
		return false;
	*(double *)((char *)o + d->offset) = v;
	return true;
}

static bool set_count(struct mount_opts *o, const struct opt_def *d, guint64 v)
{
	if (v < d->min || v > d->max)
		return false;
	*(unsigned *)((char *)o + d->offset) = (unsigned)v;
	return true;
}

/* The definition for a name; *negated if it is a flag's opposite. */
static const struct opt_def *find_def(const char *name, bool *negated)
{
	for (size_t i = 0; i < G_N_ELEMENTS(opt_defs); i++) {
		const struct opt_def *d = &opt_defs[i];

		if (!strcmp(name, d->name)) {
			*negated = false;
			return d;
		}
		if (d->negation && !strcmp(name, d->negation)) {
			*negated = true;
			return d;
		}
	}
	return NULL;
}

bool mount_opt_known(const char *name)
{
	bool negated;

	return find_def(name, &negated) != NULL;
}

static bool parse_one(struct mount_opts *o, const char *key, const char *val)
{
	bool negated;
	const struct opt_def *d = find_def(key, &negated);
	char *end;

	if (!d)
		return false;
	switch (d->kind) {
	case OPT_IGNORED:
		return true;
	case OPT_FLAG:
		if (val)
			return false;
		set_flag(o, d, !negated);
		return true;
	case OPT_SECONDS: {
		if (!val || !*val)
			return false;
		double v = g_ascii_strtod(val, &end);

		return !*end && set_seconds(o, d, v);
	}
	case OPT_COUNT: {
		/* digits only: strtoull would take a sign or spaces */
		if (!val || !*val || strspn(val, "0123456789") != strlen(val) || strlen(val) > 10)
			return false;
		guint64 v = g_ascii_strtoull(val, &end, 10);

		return set_count(o, d, v);
	}
	}
	return false;
}

bool mount_opts_parse(const char *s, struct mount_opts *o, GError **err)
{
	g_auto(GStrv) parts = g_strsplit(s ? s : "", ",", -1);

	for (char **p = parts; *p; p++) {
		char *key = *p, *val = strchr(key, '=');
		bool negated;

		if (!*key)
			continue;
		if (val)
			*val++ = '\0';
		if (parse_one(o, key, val))
			continue;
		if (!find_def(key, &negated)) {
			g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
				    "unknown mount option \"%s%s%s\" (known: " KNOWN_LIST ")", key,
				    val ? "=" : "", val ? val : "");
		} else {
			g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
				    "bad value for mount option %s: \"%s\"", key, val ? val : "");
		}
		return false;
	}
	return mount_opts_check(o, err);
}

int mount_opts_apply_variant(struct mount_opts *o, const char *name, GVariant *value,
			     GError **err)
{
	static const char *const type_of[] = {
		[OPT_FLAG] = "b", [OPT_SECONDS] = "d", [OPT_COUNT] = "u", [OPT_IGNORED] = "b"
	};
	bool negated;
	const struct opt_def *d = find_def(name, &negated);
	bool ok = true;

	/* over D-Bus a flag goes by its own name, with false for its opposite */
	if (!d || negated)
		return 0;
	if (!g_variant_is_of_type(value, G_VARIANT_TYPE(type_of[d->kind]))) {
		g_set_error(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS,
			    "mount option %s wants a value of type '%s', not '%s'", name,
			    type_of[d->kind], g_variant_get_type_string(value));
		return -1;
	}
	switch (d->kind) {
	case OPT_IGNORED:
		break;
	case OPT_FLAG:
		set_flag(o, d, g_variant_get_boolean(value));
		break;
	case OPT_SECONDS:
		ok = set_seconds(o, d, g_variant_get_double(value));
		break;
	case OPT_COUNT:
		ok = set_count(o, d, g_variant_get_uint32(value));
		break;
	}
	if (!ok) {
		g_autofree char *shown = g_variant_print(value, FALSE);

		g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
			    "bad value for mount option %s: %s", name, shown);
		return -1;
	}
	return 1;
}

bool mount_opts_check(const struct mount_opts *o, GError **err)
{
	if (o->acl && o->noxattr) {
		g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
			    "mount options acl and noxattr exclude each other (ACLs are xattrs)");
		return false;
	}
	return true;
}

char *mount_opts_to_string(const struct mount_opts *o)
{
	GString *s = g_string_new(NULL);
	char num[G_ASCII_DTOSTR_BUF_SIZE];

	for (size_t i = 0; i < G_N_ELEMENTS(opt_defs); i++) {
		const struct opt_def *d = &opt_defs[i];
		const char *p = (const char *)o + d->offset;
		g_autofree char *piece = NULL;

		if (i > 0 && opt_defs[i - 1].kind == d->kind && opt_defs[i - 1].offset == d->offset)
			continue; /* an alias of the option before it */

		switch (d->kind) {
		case OPT_FLAG: {
			bool on = *(const bool *)p != d->inverted;

			/* a flag with no opposite is only named when set */
			if (on || d->negation)
				piece = g_strdup(on ? d->name : d->negation);
			break;
		}
		case OPT_SECONDS:
			piece = g_strdup_printf("%s=%s", d->name,
						g_ascii_dtostr(num, sizeof(num), *(const double *)p));
			break;
		case OPT_COUNT:
			piece = g_strdup_printf("%s=%u", d->name, *(const unsigned *)p);
			break;
		case OPT_IGNORED:
			break;
		}
		if (piece)
			g_string_append_printf(s, "%s%s", s->len ? "," : "", piece);
	}
	return g_string_free(s, FALSE);
}

bool mount_opts_equal(const struct mount_opts *a, const struct mount_opts *b)
{
	return a->ro == b->ro && a->allow_other == b->allow_other && a->debug == b->debug &&
	       a->entry_timeout == b->entry_timeout && a->attr_timeout == b->attr_timeout &&
	       a->commit_s == b->commit_s && a->slot == b->slot && a->poll_us == b->poll_us &&
	       a->threads == b->threads && a->nouser_xattr == b->nouser_xattr &&
	       a->acl == b->acl && a->noxattr == b->noxattr && a->uring == b->uring &&
	       a->nocluster == b->nocluster && a->localflocks == b->localflocks &&
	       a->norecovery == b->norecovery &&
	       a->nosuid == b->nosuid && a->nodev == b->nodev && a->noexec == b->noexec &&
	       a->lock_cache == b->lock_cache && a->localalloc_mb == b->localalloc_mb &&
	       a->writeback_cache == b->writeback_cache;
}
