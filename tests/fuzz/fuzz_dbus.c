/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_dbus: hostile input for the D-Bus API's argument parsing
 * (dbus/api.h, dbus/mountopts.h): what a caller on the system bus or the
 * control socket can hand ocfs2d.
 *
 * The first byte picks how the rest is read:
 *   0  a D-Bus message on the wire, decoded by GDBus as the daemon's
 *      connection decodes it; a method call to one of the API's methods
 *      goes to that method's parser
 *   1  a method (next byte: Mount, Unmount or Reflink) and its parameters
 *      as serialized GVariant data, loaded as untrusted
 *   2  a GVariant in text form, of any type, handed to every parser
 *   3  a mount option string (as `ocfs2ctl mount -o` passes it)
 *   4  one option by name with a value in text form (a{sv} entry)
 *   5  an object path and a mount point, mapped to each other
 *
 * A finding is a crash, a leak, or a broken promise: a parser that accepts
 * arguments must hand back absolute paths of legal length and options that
 * pass their checks and survive being written out and read back; one that
 * refuses them must say why with an error of the API's or D-Bus's own,
 * which GDBus can name on the bus.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gio/gio.h>

#include "api.h"
#include "fuzz_common.h"

#define FINDING(...)                                               \
	do {                                                       \
		fprintf(stderr, "fuzz_dbus: finding: " __VA_ARGS__); \
		fputc('\n', stderr);                               \
		abort();                                           \
	} while (0)

/*
 * The methods whose parsers are fuzzed.  Mode 1 picks among the first
 * M_RAW_COUNT only, so that the seeds and past findings keep the method
 * they were found with; the jobs' parsers get messages and text.
 */
enum method { M_MOUNT, M_UNMOUNT, M_REFLINK, M_RAW_COUNT, M_FORMAT = M_RAW_COUNT, M_CHECK,
	      M_CANCEL, M_COUNT };

static const char *const param_types[M_COUNT] = { "(ssa{sv})", "(a{sv})", "(ssa{sv})",
						  "(sa{sv})",  "(sa{sv})", "(a{sv})" };

static void check_path(const char *p, const char *what)
{
	size_t len = strlen(p);

	if (p[0] != '/' || len > O2D_PATH_MAX)
		FINDING("accepted %s of %zu bytes: %.80s", what, len, p);
	for (const char *s = p; *s;) {
		size_t n = strcspn(s, "/");

		if (n > O2D_NAME_MAX)
			FINDING("accepted %s with a name of %zu bytes", what, n);
		s += n;
		s += strspn(s, "/");
	}
}

static void check_opts(const struct mount_opts *o)
{
	g_autoptr(GError) err = NULL;
	struct mount_opts back;

	if (!mount_opts_check(o, &err))
		FINDING("accepted options that fail their checks: %s", err->message);
	g_autofree char *s = mount_opts_to_string(o);

	mount_opts_default(&back);
	/* the string must say everything, defaults included */
	back.ro = !o->ro;
	back.nouser_xattr = !o->nouser_xattr;
	back.acl = !o->acl;
	back.noxattr = !o->noxattr;
	back.uring = !o->uring;
	if (!mount_opts_parse(s, &back, &err))
		FINDING("options written as \"%s\" do not read back: %s", s, err->message);
	if (!mount_opts_equal(o, &back))
		FINDING("options written as \"%s\" read back different", s);
}

/* A refusal must carry an error GDBus can put on the bus by name. */
static void check_refusal(GError *err, const char *what)
{
	if (!err || !err->message || !err->message[0])
		FINDING("%s refused without a message", what);
	if (err->domain != O2D_ERROR && err->domain != G_DBUS_ERROR)
		FINDING("%s refused with a foreign error domain: %s", what, err->message);
	g_autofree char *name = g_dbus_error_encode_gerror(err);

	if (!g_str_has_prefix(name, "org.ocfs2d.Daemon1.Error.") &&
	    !g_str_has_prefix(name, "org.freedesktop.DBus.Error."))
		FINDING("%s refused with an unnamed error %s: %s", what, name, err->message);
}

static void parse(enum method m, GVariant *params)
{
	g_autoptr(GError) err = NULL;

	switch (m) {
	case M_MOUNT: {
		struct o2d_mount_req req;

		if (!o2d_parse_mount(params, &req, &err)) {
			check_refusal(err, "Mount");
			break;
		}
		check_path(req.device, "device");
		check_path(req.mountpoint, "mount point");
		check_opts(&req.opts);
		o2d_mount_req_clear(&req);
		break;
	}
	case M_UNMOUNT: {
		struct o2d_unmount_req req;

		if (!o2d_parse_unmount(params, &req, &err))
			check_refusal(err, "Unmount");
		break;
	}
	case M_REFLINK: {
		struct o2d_reflink_req req;

		if (!o2d_parse_reflink(params, &req, &err)) {
			check_refusal(err, "Reflink");
			break;
		}
		check_path(req.source, "source");
		check_path(req.destination, "destination");
		o2d_reflink_req_clear(&req);
		break;
	}
	case M_FORMAT: {
		struct o2d_format_req req;

		if (!o2d_parse_format(params, &req, &err)) {
			check_refusal(err, "Format");
			break;
		}
		check_path(req.device, "device");
		if (req.label && strlen(req.label) > 63)
			FINDING("Format accepted a label of %zu bytes", strlen(req.label));
		o2d_format_req_clear(&req);
		break;
	}
	case M_CHECK: {
		struct o2d_check_req req;

		if (!o2d_parse_check(params, &req, &err)) {
			check_refusal(err, "Check");
			break;
		}
		check_path(req.device, "device");
		o2d_check_req_clear(&req);
		break;
	}
	case M_CANCEL:
		if (!o2d_parse_cancel(params, &err))
			check_refusal(err, "Cancel");
		break;
	case M_COUNT:
		break;
	}
}

/* As the daemon's connection: decode a message; route a call to the API's parsers. */
static void from_message(const uint8_t *data, size_t size)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(GDBusMessage) msg = NULL;

	if (size < 16 || g_dbus_message_bytes_needed((guchar *)data, size, NULL) != (gssize)size)
		return;
	msg = g_dbus_message_new_from_blob((guchar *)data, size, G_DBUS_CAPABILITY_FLAGS_NONE,
					   &err);
	if (!msg || g_dbus_message_get_message_type(msg) != G_DBUS_MESSAGE_TYPE_METHOD_CALL)
		return;
	const char *iface = g_dbus_message_get_interface(msg);
	const char *member = g_dbus_message_get_member(msg);
	const char *path = g_dbus_message_get_path(msg);
	GVariant *body = g_dbus_message_get_body(msg);
	g_autoptr(GVariant) empty = NULL;

	if (!member || !path)
		return;
	if (!body)
		body = empty = g_variant_ref_sink(g_variant_new("()"));
	if (g_strcmp0(iface, O2D_MANAGER_IFACE) == 0 && !strcmp(member, "Mount")) {
		parse(M_MOUNT, body);
	} else if (g_strcmp0(iface, O2D_MANAGER_IFACE) == 0 && !strcmp(member, "Format")) {
		parse(M_FORMAT, body);
	} else if (g_strcmp0(iface, O2D_MANAGER_IFACE) == 0 && !strcmp(member, "Check")) {
		parse(M_CHECK, body);
	} else if (g_strcmp0(iface, O2D_JOB_IFACE) == 0 && !strcmp(member, "Cancel")) {
		parse(M_CANCEL, body);
	} else if (g_strcmp0(iface, O2D_VOLUME_IFACE) == 0) {
		/* the daemon finds the volume by its object path */
		g_autofree char *mnt = o2d_volume_mountpoint(path);

		if (mnt && mnt[0] != '/')
			FINDING("object path %s maps to a relative mount point", path);
		if (!strcmp(member, "Unmount"))
			parse(M_UNMOUNT, body);
		else if (!strcmp(member, "Reflink"))
			parse(M_REFLINK, body);
	}
}

static void from_data(const uint8_t *data, size_t size)
{
	if (size < 1)
		return;
	enum method m = data[0] % M_RAW_COUNT;
	g_autoptr(GBytes) bytes = g_bytes_new(data + 1, size - 1);
	g_autoptr(GVariant) v = g_variant_ref_sink(
		g_variant_new_from_bytes(G_VARIANT_TYPE(param_types[m]), bytes, FALSE));

	parse(m, v);
	/* and its normal form, as a sender that checks its data would see it */
	g_autoptr(GVariant) normal = g_variant_get_normal_form(v);

	parse(m, normal);
}

static char *text(const uint8_t *data, size_t size)
{
	return g_strndup((const char *)data, size);
}

static void from_text(const uint8_t *data, size_t size)
{
	g_autofree char *s = text(data, size);
	g_autoptr(GVariant) v = g_variant_parse(NULL, s, NULL, NULL, NULL);

	if (!v)
		return;
	g_variant_ref_sink(v);
	for (int m = 0; m < M_COUNT; m++)
		parse(m, v);
}

static void from_option_string(const uint8_t *data, size_t size)
{
	g_autofree char *s = text(data, size);
	g_autoptr(GError) err = NULL;
	struct mount_opts o;

	mount_opts_default(&o);
	if (mount_opts_parse(s, &o, &err))
		check_opts(&o);
	else
		check_refusal(err, "an option string");
}

static void from_option_value(const uint8_t *data, size_t size)
{
	g_autofree char *s = text(data, size);
	char *sep = strchr(s, '=');
	g_autoptr(GError) err = NULL;
	struct mount_opts o;

	if (!sep)
		return;
	*sep = '\0';
	g_autoptr(GVariant) v = g_variant_parse(NULL, sep + 1, NULL, NULL, NULL);

	if (!v)
		return;
	g_variant_ref_sink(v);
	mount_opts_default(&o);
	int r = mount_opts_apply_variant(&o, s, v, &err);

	if (r < 0)
		check_refusal(err, "an option value");
	else if (err)
		FINDING("option %s: an error set but not reported", s);
	else if (r > 0)
		check_opts(&o);
}

static void from_paths(const uint8_t *data, size_t size)
{
	g_autofree char *s = text(data, size);
	g_autofree char *mnt = o2d_volume_mountpoint(s);

	if (mnt) {
		g_autofree char *back = o2d_volume_path(mnt);

		if (mnt[0] != '/')
			FINDING("object path %s maps to a relative mount point", s);
		if (!g_variant_is_object_path(back))
			FINDING("mount point %s maps to a bad object path %s", mnt, back);
	}
	/* any mount point (bytes, no NUL) maps to an object path and back */
	g_autofree char *abs = g_strconcat("/", s, NULL);
	g_autofree char *path = o2d_volume_path(abs);

	if (!g_variant_is_object_path(path))
		FINDING("mount point maps to a bad object path %s", path);
	g_autofree char *again = o2d_volume_mountpoint(path);

	if (!again || strcmp(again, abs))
		FINDING("mount point %.80s comes back from %s as %.80s", abs, path,
			again ? again : "(nothing)");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *rest = data + 1;
	size_t n = size - 1;

	switch (data[0] % 6) {
	case 0:
		from_message(rest, n);
		break;
	case 1:
		from_data(rest, n);
		break;
	case 2:
		from_text(rest, n);
		break;
	case 3:
		from_option_string(rest, n);
		break;
	case 4:
		from_option_value(rest, n);
		break;
	case 5:
		from_paths(rest, n);
		break;
	}
	return 0;
}
