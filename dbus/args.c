// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The API's errors and argument parsers (see api.h).  GDBus has already
 * checked each call's signature against the introspection data when a
 * handler runs; the parsers check it again, so that they are safe on any
 * GVariant (the fuzz target hands them whatever a message decodes to).
 */

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "api.h"

static const GDBusErrorEntry error_entries[] = {
	{ O2D_ERROR_FAILED, "org.ocfs2d.Daemon1.Error.Failed" },
	{ O2D_ERROR_NOT_AUTHORIZED, "org.ocfs2d.Daemon1.Error.NotAuthorized" },
	{ O2D_ERROR_INVALID_ARGUMENT, "org.ocfs2d.Daemon1.Error.InvalidArgument" },
	{ O2D_ERROR_OPTION_NOT_PERMITTED, "org.ocfs2d.Daemon1.Error.OptionNotPermitted" },
	{ O2D_ERROR_ALREADY_MOUNTED, "org.ocfs2d.Daemon1.Error.AlreadyMounted" },
	{ O2D_ERROR_NOT_MOUNTED, "org.ocfs2d.Daemon1.Error.NotMounted" },
	{ O2D_ERROR_DEVICE_BUSY, "org.ocfs2d.Daemon1.Error.DeviceBusy" },
	{ O2D_ERROR_NOT_FOUND, "org.ocfs2d.Daemon1.Error.NotFound" },
	{ O2D_ERROR_READ_ONLY, "org.ocfs2d.Daemon1.Error.ReadOnly" },
	{ O2D_ERROR_EXISTS, "org.ocfs2d.Daemon1.Error.Exists" },
	{ O2D_ERROR_NOT_CANCELABLE, "org.ocfs2d.Daemon1.Error.NotCancelable" },
	{ O2D_ERROR_CANCELLED, "org.ocfs2d.Daemon1.Error.Cancelled" },
};

GQuark o2d_error_quark(void)
{
	static gsize quark;

	g_dbus_error_register_error_domain("o2d-error-quark", &quark, error_entries,
					   G_N_ELEMENTS(error_entries));
	return (GQuark)quark;
}

static const struct {
	int err;
	enum o2d_error code;
} errno_map[] = {
	{ EPERM, O2D_ERROR_NOT_AUTHORIZED },	{ EACCES, O2D_ERROR_NOT_AUTHORIZED },
	{ EINVAL, O2D_ERROR_INVALID_ARGUMENT }, { ENAMETOOLONG, O2D_ERROR_INVALID_ARGUMENT },
	{ EEXIST, O2D_ERROR_EXISTS },		{ EBUSY, O2D_ERROR_DEVICE_BUSY },
	{ ENOENT, O2D_ERROR_NOT_FOUND },	{ ENXIO, O2D_ERROR_NOT_MOUNTED },
	{ EROFS, O2D_ERROR_READ_ONLY },		{ ECANCELED, O2D_ERROR_CANCELLED },
};

enum o2d_error o2d_error_from_errno(int e)
{
	for (size_t i = 0; i < G_N_ELEMENTS(errno_map); i++)
		if (errno_map[i].err == e)
			return errno_map[i].code;
	return O2D_ERROR_FAILED;
}

int o2d_error_to_errno(const GError *e)
{
	if (e->domain == O2D_ERROR) {
		for (size_t i = 0; i < G_N_ELEMENTS(errno_map); i++)
			if ((int)errno_map[i].code == e->code)
				return errno_map[i].err;
		if (e->code == O2D_ERROR_OPTION_NOT_PERMITTED)
			return EINVAL;
		return EIO;
	}
	if (e->domain == G_DBUS_ERROR) {
		switch (e->code) {
		case G_DBUS_ERROR_INVALID_ARGS:
			return EINVAL;
		case G_DBUS_ERROR_ACCESS_DENIED:
		case G_DBUS_ERROR_AUTH_FAILED:
			return EACCES;
		case G_DBUS_ERROR_NO_REPLY:
		case G_DBUS_ERROR_TIMEOUT:
			return ETIMEDOUT;
		default:
			return EIO;
		}
	}
	return EIO;
}

static bool check_tuple(GVariant *params, const char *type, const char *method, GError **err)
{
	if (params && g_variant_is_of_type(params, G_VARIANT_TYPE(type)))
		return true;
	g_set_error(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS, "%s takes %s, not %s", method,
		    type, params ? g_variant_get_type_string(params) : "nothing");
	return false;
}

/*
 * A path the API takes: absolute, at most O2D_PATH_MAX bytes, no name in it
 * longer than O2D_NAME_MAX.  what names it in the error.
 */
static bool check_path(const char *p, const char *what, GError **err)
{
	size_t len = strlen(p);

	if (p[0] != '/') {
		g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
			    "the %s must be an absolute path, not \"%.64s\"", what, p);
		return false;
	}
	if (len > O2D_PATH_MAX) {
		g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
			    "the %s is %zu bytes long; paths end at %d", what, len, O2D_PATH_MAX);
		return false;
	}
	for (const char *s = p; *s;) {
		size_t n = strcspn(s, "/");

		if (n > O2D_NAME_MAX) {
			g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
				    "the %s has a name of %zu bytes; names end at %d", what, n,
				    O2D_NAME_MAX);
			return false;
		}
		s += n;
		s += strspn(s, "/");
	}
	return true;
}

/*
 * Walk an a{sv} of options: auth.no_user_interaction is every method's;
 * each other key goes to take (which returns 1 if it knew the key, 0 if
 * not, -1 with *err set); a key nobody knows is OptionNotPermitted.
 */
typedef int (*option_fn)(const char *key, GVariant *value, void *arg, GError **err);

static bool walk_options(GVariant *options, const char *method, option_fn take, void *arg,
			 GError **err)
{
	GVariantIter it;
	const char *key;
	GVariant *value;

	g_variant_iter_init(&it, options);
	while (g_variant_iter_next(&it, "{&sv}", &key, &value)) {
		g_autoptr(GVariant) v = value;
		int r = 0;

		if (!strcmp(key, "auth.no_user_interaction")) {
			if (!g_variant_is_of_type(v, G_VARIANT_TYPE_BOOLEAN)) {
				g_set_error(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS,
					    "option auth.no_user_interaction wants a boolean");
				return false;
			}
			continue;
		}
		if (take)
			r = take(key, v, arg, err);
		if (r < 0)
			return false;
		if (r == 0) {
			g_set_error(err, O2D_ERROR, O2D_ERROR_OPTION_NOT_PERMITTED,
				    "%s has no option \"%.64s\"", method, key);
			return false;
		}
	}
	return true;
}

static int take_mount_option(const char *key, GVariant *value, void *arg, GError **err)
{
	struct mount_opts *o = arg;

	/* the string form was applied first */
	if (!strcmp(key, "options"))
		return 1;
	return mount_opts_apply_variant(o, key, value, err);
}

bool o2d_parse_mount(GVariant *params, struct o2d_mount_req *req, GError **err)
{
	const char *device, *mountpoint;
	g_autoptr(GVariant) options = NULL;
	g_autoptr(GVariant) str = NULL;

	memset(req, 0, sizeof(*req));
	if (!check_tuple(params, "(ssa{sv})", "Mount", err))
		return false;
	g_variant_get(params, "(&s&s@a{sv})", &device, &mountpoint, &options);
	if (!check_path(device, "device", err) || !check_path(mountpoint, "mount point", err))
		return false;
	mount_opts_default(&req->opts);
	str = g_variant_lookup_value(options, "options", NULL);
	if (str && !g_variant_is_of_type(str, G_VARIANT_TYPE_STRING)) {
		g_set_error(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS,
			    "option \"options\" wants a string (as mount -o takes)");
		return false;
	}
	if (str && !mount_opts_parse(g_variant_get_string(str, NULL), &req->opts, err))
		return false;
	if (!walk_options(options, "Mount", take_mount_option, &req->opts, err) ||
	    !mount_opts_check(&req->opts, err))
		return false;
	req->device = g_strdup(device);
	req->mountpoint = g_strdup(mountpoint);
	return true;
}

void o2d_mount_req_clear(struct o2d_mount_req *req)
{
	g_clear_pointer(&req->device, g_free);
	g_clear_pointer(&req->mountpoint, g_free);
}

static int take_unmount_option(const char *key, GVariant *value, void *arg, GError **err)
{
	struct o2d_unmount_req *req = arg;

	if (strcmp(key, "force"))
		return 0;
	if (!g_variant_is_of_type(value, G_VARIANT_TYPE_BOOLEAN)) {
		g_set_error(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS,
			    "option force wants a boolean");
		return -1;
	}
	req->force = g_variant_get_boolean(value);
	return 1;
}

bool o2d_parse_unmount(GVariant *params, struct o2d_unmount_req *req, GError **err)
{
	g_autoptr(GVariant) options = NULL;

	memset(req, 0, sizeof(*req));
	if (!check_tuple(params, "(a{sv})", "Unmount", err))
		return false;
	g_variant_get(params, "(@a{sv})", &options);
	return walk_options(options, "Unmount", take_unmount_option, req, err);
}

bool o2d_parse_reflink(GVariant *params, struct o2d_reflink_req *req, GError **err)
{
	const char *src, *dst;
	g_autoptr(GVariant) options = NULL;

	memset(req, 0, sizeof(*req));
	if (!check_tuple(params, "(ssa{sv})", "Reflink", err))
		return false;
	g_variant_get(params, "(&s&s@a{sv})", &src, &dst, &options);
	if (!check_path(src, "source", err) || !check_path(dst, "destination", err) ||
	    !walk_options(options, "Reflink", NULL, NULL, err))
		return false;
	req->source = g_strdup(src);
	req->destination = g_strdup(dst);
	return true;
}

/* Quota and SetQuota options: 1 taken, 0 unknown, -1 wrong type or value. */
struct quota_take {
	struct o2d_quota_req *req;
	bool set;
	unsigned limits, graces; /* how many of each were given */
};

static int take_quota_option(const char *key, GVariant *value, void *arg, GError **err)
{
	struct quota_take *q = arg;
	static const char *const limit_keys[] = { "block_soft", "block_hard", "inode_soft",
						  "inode_hard" };
	guint64 *limits[] = { &q->req->block_soft, &q->req->block_hard, &q->req->inode_soft,
			      &q->req->inode_hard };
	const char *want = NULL;

	if (!strcmp(key, "type")) {
		want = "s";
	} else if (q->set && (!strcmp(key, "id") || !strcmp(key, "block_grace") ||
			      !strcmp(key, "inode_grace"))) {
		want = "u";
	} else {
		for (unsigned i = 0; q->set && i < G_N_ELEMENTS(limit_keys) && !want; i++)
			if (!strcmp(key, limit_keys[i]))
				want = "t";
	}
	if (!want)
		return 0;
	if (!g_variant_is_of_type(value, G_VARIANT_TYPE(want))) {
		g_set_error(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS, "option %s wants type %s, not %s",
			    key, want, g_variant_get_type_string(value));
		return -1;
	}
	if (!strcmp(key, "type")) {
		const char *t = g_variant_get_string(value, NULL);

		if (strcmp(t, "user") && strcmp(t, "group")) {
			g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
				    "option type is \"user\" or \"group\", not \"%.32s\"", t);
			return -1;
		}
		q->req->type = !strcmp(t, "group");
	} else if (!strcmp(key, "id")) {
		q->req->have_id = true;
		q->req->id = g_variant_get_uint32(value);
		if (q->req->id == G_MAXUINT32) {
			g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
				    "option id 4294967295 is no user or group");
			return -1;
		}
	} else if (!strcmp(key, "block_grace") || !strcmp(key, "inode_grace")) {
		*(key[0] == 'b' ? &q->req->block_grace : &q->req->inode_grace) =
			g_variant_get_uint32(value);
		q->graces++;
	} else {
		for (unsigned i = 0; i < G_N_ELEMENTS(limit_keys); i++)
			if (!strcmp(key, limit_keys[i]))
				*limits[i] = g_variant_get_uint64(value);
		q->limits++;
	}
	return 1;
}

static bool parse_quota(GVariant *params, struct o2d_quota_req *req, bool set, GError **err)
{
	const char *method = set ? "SetQuota" : "Quota";
	g_autoptr(GVariant) options = NULL;
	struct quota_take q = { .req = req, .set = set };

	memset(req, 0, sizeof(*req));
	if (!check_tuple(params, "(a{sv})", method, err))
		return false;
	g_variant_get(params, "(@a{sv})", &options);
	if (!walk_options(options, method, take_quota_option, &q, err))
		return false;
	if (!set)
		return true;
	if ((q.limits && (!req->have_id || q.limits != 4)) || (req->have_id && q.limits != 4)) {
		g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
			    "SetQuota sets an id's limits with id and all four of block_soft, "
			    "block_hard, inode_soft and inode_hard");
		return false;
	}
	if (q.graces == 1) {
		g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
			    "SetQuota sets the grace periods with both block_grace and inode_grace");
		return false;
	}
	req->have_grace = q.graces == 2;
	if (!req->have_id && !req->have_grace) {
		g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
			    "SetQuota has nothing to set (an id and its limits, or grace periods)");
		return false;
	}
	return true;
}

bool o2d_parse_quota(GVariant *params, struct o2d_quota_req *req, GError **err)
{
	return parse_quota(params, req, false, err);
}

bool o2d_parse_set_quota(GVariant *params, struct o2d_quota_req *req, GError **err)
{
	return parse_quota(params, req, true, err);
}

bool o2d_parse_cluster_state(GVariant *params, GError **err)
{
	g_autoptr(GVariant) options = NULL;

	if (!check_tuple(params, "(a{sv})", "ClusterState", err))
		return false;
	g_variant_get(params, "(@a{sv})", &options);
	return walk_options(options, "ClusterState", NULL, NULL, err);
}

bool o2d_parse_statistics(GVariant *params, GError **err)
{
	g_autoptr(GVariant) options = NULL;

	if (!check_tuple(params, "(a{sv})", "Statistics", err))
		return false;
	g_variant_get(params, "(@a{sv})", &options);
	return walk_options(options, "Statistics", NULL, NULL, err);
}

/*
 * Format's options with a shape of their own: uuid (s, 32 hex digits,
 * dashes allowed, as mkfs.ocfs2 -U takes it) and dx_seed (au, three
 * numbers).  1 taken, -1 wrong type or value.
 */
static int take_format_special(const char *key, GVariant *value, struct o2d_format_req *req,
			       GError **err)
{
	bool uuid = !strcmp(key, "uuid");
	const char *want = uuid ? "s" : "au";

	if (!g_variant_is_of_type(value, G_VARIANT_TYPE(want))) {
		g_set_error(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS,
			    "Format option %s wants type %s, not %s", key, want,
			    g_variant_get_type_string(value));
		return -1;
	}
	if (uuid) {
		const char *s = g_variant_get_string(value, NULL);
		unsigned n = 0;

		for (const char *c = s; *c && n <= 32; c++) {
			if (*c == '-')
				continue;
			if (!g_ascii_isxdigit(*c)) {
				n = 33;
				break;
			}
			if (n < 32)
				req->uuid[n / 2] = (guint8)(req->uuid[n / 2] << 4 | g_ascii_xdigit_value(*c));
			n++;
		}
		if (n != 32) {
			g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
				    "Format option uuid \"%.64s\": 32 hex digits expected (dashes "
				    "allowed)", s);
			return -1;
		}
		req->have_uuid = true;
		return 1;
	}
	gsize n = 0;
	const guint32 *seed = g_variant_get_fixed_array(value, &n, sizeof(guint32));

	if (n != 3) {
		g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
			    "Format option dx_seed: three numbers expected, not %zu", (size_t)n);
		return -1;
	}
	memcpy(req->dx_seed, seed, sizeof(req->dx_seed));
	req->have_dx_seed = true;
	return 1;
}

/* A typed option of Format: 1 taken, 0 not Format's, -1 wrong type. */
static int take_format_option(const char *key, GVariant *value, void *arg, GError **err)
{
	struct o2d_format_req *req = arg;
	static const struct {
		const char *key, *type;
		size_t off;
	} keys[] = {
#define OPT(k, t, field) { k, t, offsetof(struct o2d_format_req, field) }
		OPT("label", "s", label),
		OPT("type", "s", type),
		OPT("feature_level", "s", feature_level),
		OPT("features", "s", features),
		OPT("cluster_stack", "s", cluster_stack),
		OPT("cluster_name", "s", cluster_name),
		OPT("block_size", "u", block_size),
		OPT("cluster_size", "u", cluster_size),
		OPT("slots", "u", slots),
		OPT("journal_size", "t", journal_size),
		OPT("volume_size", "t", volume_size),
		OPT("generation", "u", generation),
		OPT("time", "t", time),
		OPT("local", "b", local),
		OPT("journal64", "b", journal64),
		OPT("force", "b", force),
		OPT("dry_run", "b", dry_run),
#undef OPT
	};

	if (!strcmp(key, "uuid") || !strcmp(key, "dx_seed"))
		return take_format_special(key, value, req, err);

	for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
		void *field = (char *)req + keys[i].off;

		if (strcmp(key, keys[i].key))
			continue;
		if (!g_variant_is_of_type(value, G_VARIANT_TYPE(keys[i].type))) {
			g_set_error(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS,
				    "Format option %s wants type %s, not %s", key, keys[i].type,
				    g_variant_get_type_string(value));
			return -1;
		}
		switch (keys[i].type[0]) {
		case 's':
			g_free(*(char **)field);
			*(char **)field = g_variant_dup_string(value, NULL);
			break;
		case 'u':
			*(guint32 *)field = g_variant_get_uint32(value);
			break;
		case 't':
			*(guint64 *)field = g_variant_get_uint64(value);
			break;
		default:
			*(bool *)field = g_variant_get_boolean(value);
			break;
		}
		/* the options whose absence says something of its own */
		req->have_local |= !strcmp(key, "local");
		req->have_journal64 |= !strcmp(key, "journal64");
		req->have_generation |= !strcmp(key, "generation");
		req->have_time |= !strcmp(key, "time");
		return 1;
	}
	return 0;
}

bool o2d_parse_format(GVariant *params, struct o2d_format_req *req, GError **err)
{
	const char *device;
	g_autoptr(GVariant) options = NULL;

	memset(req, 0, sizeof(*req));
	if (!check_tuple(params, "(sa{sv})", "Format", err))
		return false;
	g_variant_get(params, "(&s@a{sv})", &device, &options);
	if (!check_path(device, "device", err) ||
	    !walk_options(options, "Format", take_format_option, req, err)) {
		o2d_format_req_clear(req);
		return false;
	}
	if (req->label && strlen(req->label) > 63) {
		g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
			    "Format option label: at most 63 bytes, not %zu", strlen(req->label));
		o2d_format_req_clear(req);
		return false;
	}
	/* as ocfs2ctl format --time takes it: nanoseconds must fit 64 bits */
	if (req->have_time && req->time > G_MAXINT64 / G_GINT64_CONSTANT(1000000000)) {
		g_set_error(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT,
			    "Format option time %" G_GUINT64_FORMAT ": seconds since the epoch "
			    "expected", req->time);
		o2d_format_req_clear(req);
		return false;
	}
	req->device = g_strdup(device);
	return true;
}

void o2d_format_req_clear(struct o2d_format_req *req)
{
	g_clear_pointer(&req->device, g_free);
	g_clear_pointer(&req->label, g_free);
	g_clear_pointer(&req->type, g_free);
	g_clear_pointer(&req->feature_level, g_free);
	g_clear_pointer(&req->features, g_free);
	g_clear_pointer(&req->cluster_stack, g_free);
	g_clear_pointer(&req->cluster_name, g_free);
}

bool o2d_parse_check(GVariant *params, struct o2d_check_req *req, GError **err)
{
	const char *device;
	g_autoptr(GVariant) options = NULL;

	memset(req, 0, sizeof(*req));
	if (!check_tuple(params, "(sa{sv})", "Check", err))
		return false;
	g_variant_get(params, "(&s@a{sv})", &device, &options);
	if (!check_path(device, "device", err) || !walk_options(options, "Check", NULL, NULL, err))
		return false;
	req->device = g_strdup(device);
	return true;
}

void o2d_check_req_clear(struct o2d_check_req *req)
{
	g_clear_pointer(&req->device, g_free);
}

bool o2d_parse_cancel(GVariant *params, GError **err)
{
	g_autoptr(GVariant) options = NULL;

	if (!check_tuple(params, "(a{sv})", "Cancel", err))
		return false;
	g_variant_get(params, "(@a{sv})", &options);
	return walk_options(options, "Cancel", NULL, NULL, err);
}

bool o2d_parse_status(GVariant *params, GError **err)
{
	g_autoptr(GVariant) options = NULL;

	if (!check_tuple(params, "(a{sv})", "Status", err))
		return false;
	g_variant_get(params, "(@a{sv})", &options);
	return walk_options(options, "Status", NULL, NULL, err);
}

void o2d_reflink_req_clear(struct o2d_reflink_req *req)
{
	g_clear_pointer(&req->source, g_free);
	g_clear_pointer(&req->destination, g_free);
}

/* The object path name of "/" (escaping never makes it: it escapes '_'). */
#define ROOT_NAME "_root"

char *o2d_volume_path(const char *mountpoint)
{
	const char *rel = mountpoint[0] == '/' ? mountpoint + 1 : mountpoint;
	g_autofree char *esc = *rel ? g_dbus_escape_object_path(rel) : g_strdup(ROOT_NAME);

	return g_strconcat(O2D_VOLUMES_PATH "/", esc, NULL);
}

char *o2d_volume_mountpoint(const char *object_path)
{
	static const char prefix[] = O2D_VOLUMES_PATH "/";

	if (!g_variant_is_object_path(object_path) || strncmp(object_path, prefix, strlen(prefix)))
		return NULL;
	const char *esc = object_path + strlen(prefix);

	if (!*esc || strchr(esc, '/'))
		return NULL;
	if (!strcmp(esc, ROOT_NAME))
		return g_strdup("/");
	g_autofree guint8 *raw = g_dbus_unescape_object_path(esc);

	if (!raw)
		return NULL;
	/* only the one way o2d_volume_path writes each name (an escaped NUL
	 * would cut it short, an escaped letter is another spelling) */
	g_autofree char *again = g_dbus_escape_object_path_bytestring(raw);

	if (strcmp(again, esc))
		return NULL;
	return g_strconcat("/", (const char *)raw, NULL);
}
