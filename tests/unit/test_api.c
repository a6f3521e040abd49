/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The D-Bus API's vocabulary (dbus/api.h, dbus/mountopts.h): mount options
 * in both forms, the method argument parsers, errors and object paths.
 * The daemon end to end, on a real bus, is tests/dbus.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <gio/gio.h>

#include "api.h"

static struct mount_opts parsed(const char *s)
{
	struct mount_opts o;
	g_autoptr(GError) err = NULL;

	mount_opts_default(&o);
	ck_assert_msg(mount_opts_parse(s, &o, &err), "%s: %s", s, err ? err->message : "");
	return o;
}

static void refused(const char *s, const char *what)
{
	struct mount_opts o;
	g_autoptr(GError) err = NULL;

	mount_opts_default(&o);
	ck_assert_msg(!mount_opts_parse(s, &o, &err), "%s was accepted", s);
	ck_assert(g_error_matches(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT));
	ck_assert_msg(strstr(err->message, what), "%s: %s", s, err->message);
}

START_TEST(test_option_strings)
{
	struct mount_opts d, o;

	mount_opts_default(&d);
	o = parsed("");
	ck_assert(mount_opts_equal(&o, &d));
	o = parsed("ro,allow_other,commit=30,slot=3,entry_timeout=0.25,nouser_xattr,acl,uring");
	ck_assert(o.ro && o.allow_other && o.nouser_xattr && o.acl && o.uring);
	ck_assert_uint_eq(o.commit_s, 30);
	ck_assert_uint_eq(o.slot, 3);
	ck_assert(o.entry_timeout == 0.25);
	o = parsed("ro,rw,defaults,_netdev,noatime,,");
	ck_assert(!o.ro);
	/* every user by default, as a kernel filesystem; noallow_other: root only */
	ck_assert(d.allow_other);
	o = parsed("noallow_other");
	ck_assert(!o.allow_other);
	o = parsed("noallow_other,allow_other");
	ck_assert(o.allow_other);
	/* the kernel's flags: nosuid and nodev as libfuse has them, exec */
	ck_assert(d.nosuid && d.nodev && !d.noexec);
	o = parsed("suid,dev,noexec");
	ck_assert(!o.nosuid && !o.nodev && o.noexec);
	/* the ends of each range */
	o = parsed("commit=1,threads=64,poll=100000,slot=254,attr_timeout=86400");
	ck_assert_uint_eq(o.threads, 64);
	o = parsed("localalloc=16");
	ck_assert_uint_eq(o.localalloc_mb, 16);
	refused("localalloc=65537", "localalloc");
	refused("commit=0", "bad value for mount option commit");
	refused("commit=3601", "commit");
	refused("threads=65", "threads");
	refused("threads=0", "threads");
	refused("slot=255", "slot");
	refused("slot=-1", "slot");
	refused("slot= 1", "slot");
	refused("commit=99999999999999999999", "commit");
	refused("entry_timeout=-1", "entry_timeout");
	refused("entry_timeout=nan", "entry_timeout");
	refused("entry_timeout=inf", "entry_timeout");
	refused("entry_timeout=86400.5", "entry_timeout");
	refused("entry_timeout", "entry_timeout");
	refused("ro=1", "ro");
	refused("bogus", "unknown mount option \"bogus\"");
	refused("acl,noxattr", "exclude each other");
}
END_TEST

START_TEST(test_option_round_trip)
{
	const char *cases[] = { "", "ro,allow_other,debug", "noallow_other,suid,dev,noexec", "noacl,noxattr,nouser_xattr",
				"entry_timeout=0.1,attr_timeout=1e-3,commit=3600,poll=0,threads=1",
				"acl,uring,slot=7", "writeback_cache,commit=60" };

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		struct mount_opts o = parsed(cases[i]);
		g_autofree char *s = mount_opts_to_string(&o);
		struct mount_opts back = parsed(s);

		ck_assert_msg(mount_opts_equal(&o, &back), "%s -> %s", cases[i], s);
	}
	struct mount_opts d;

	mount_opts_default(&d);
	g_autofree char *s = mount_opts_to_string(&d);

	ck_assert_str_eq(s, "rw,allow_other,user_xattr,noacl,xattr,nouring,nowriteback_cache,nosuid,nodev,exec,"
			    "entry_timeout=1,attr_timeout=1,"
			    "commit=5,slot=0,poll=200,threads=16,lock_cache=65536,localalloc=0");
}
END_TEST

static GVariant *params(const char *text)
{
	g_autoptr(GError) err = NULL;
	GVariant *v = g_variant_parse(NULL, text, NULL, NULL, &err);

	ck_assert_msg(v, "%s: %s", text, err ? err->message : "");
	return g_variant_ref_sink(v);
}

/* Mount with these parameters: the error's D-Bus name, or "" if accepted. */
static char *mount_error(const char *text, struct o2d_mount_req *ret)
{
	g_autoptr(GVariant) p = params(text);
	g_autoptr(GError) err = NULL;
	struct o2d_mount_req req;

	if (o2d_parse_mount(p, &req, &err)) {
		if (ret)
			*ret = req;
		else
			o2d_mount_req_clear(&req);
		return g_strdup("");
	}
	ck_assert_ptr_null(req.device);
	return g_dbus_error_encode_gerror(err);
}

#define ERR(x) "org.ocfs2d.Daemon1.Error." x
#define DBUS_INVALID_ARGS "org.freedesktop.DBus.Error.InvalidArgs"

static void mount_is(const char *text, const char *want)
{
	g_autofree char *got = mount_error(text, NULL);

	ck_assert_msg(!strcmp(got, want), "%s: got \"%s\", want \"%s\"", text, got, want);
}

START_TEST(test_mount_args)
{
	struct o2d_mount_req req;
	g_autofree char *ok = mount_error("('/dev/sdb', '/mnt/a', {'options': <'ro,commit=9'>, "
					  "'commit': <uint32 12>, 'allow_other': <true>, "
					  "'entry_timeout': <0.5>, 'auth.no_user_interaction': <true>})",
					  &req);

	ck_assert_str_eq(ok, "");
	ck_assert_str_eq(req.device, "/dev/sdb");
	ck_assert_str_eq(req.mountpoint, "/mnt/a");
	/* the typed keys come after the string */
	ck_assert(req.opts.ro && req.opts.allow_other);
	ck_assert_uint_eq(req.opts.commit_s, 12);
	ck_assert(req.opts.entry_timeout == 0.5);
	o2d_mount_req_clear(&req);

	mount_is("('/dev/sdb', '/mnt/a', @a{sv} {})", "");
	mount_is("('dev/sdb', '/mnt/a', @a{sv} {})", ERR("InvalidArgument"));
	mount_is("('/dev/sdb', '', @a{sv} {})", ERR("InvalidArgument"));
	mount_is("('/dev/sdb', '/mnt/a', {'bogus': <1>})", ERR("OptionNotPermitted"));
	mount_is("('/dev/sdb', '/mnt/a', {'rw': <true>})", ERR("OptionNotPermitted"));
	mount_is("('/dev/sdb', '/mnt/a', {'commit': <'5'>})", DBUS_INVALID_ARGS);
	mount_is("('/dev/sdb', '/mnt/a', {'commit': <5>})", DBUS_INVALID_ARGS); /* int32 */
	mount_is("('/dev/sdb', '/mnt/a', {'ro': <'yes'>})", DBUS_INVALID_ARGS);
	mount_is("('/dev/sdb', '/mnt/a', {'options': <5>})", DBUS_INVALID_ARGS);
	mount_is("('/dev/sdb', '/mnt/a', {'auth.no_user_interaction': <1>})", DBUS_INVALID_ARGS);
	mount_is("('/dev/sdb', '/mnt/a', {'commit': <uint32 0>})", ERR("InvalidArgument"));
	mount_is("('/dev/sdb', '/mnt/a', {'entry_timeout': <-1.0>})", ERR("InvalidArgument"));
	mount_is("('/dev/sdb', '/mnt/a', {'options': <'bogus'>})", ERR("InvalidArgument"));
	mount_is("('/dev/sdb', '/mnt/a', {'acl': <true>, 'xattr': <false>})",
		 ERR("InvalidArgument"));
	mount_is("('/dev/sdb', '/mnt/a')", DBUS_INVALID_ARGS);
	mount_is("(1, '/mnt/a', @a{sv} {})", DBUS_INVALID_ARGS);
	mount_is("'/dev/sdb'", DBUS_INVALID_ARGS);

	/* lengths: a name of 255 bytes passes, 256 does not; paths end at 4095 */
	g_autofree char *n255 = g_strnfill(255, 'n');
	g_autofree char *n256 = g_strnfill(256, 'n');
	g_autofree char *t1 = g_strdup_printf("('/d/%s', '/m', @a{sv} {})", n255);
	g_autofree char *t2 = g_strdup_printf("('/d/%s', '/m', @a{sv} {})", n256);
	GString *deep = g_string_new("/");

	while (deep->len < 4096)
		g_string_append(deep, "abcdefg/");
	g_autofree char *t3 = g_strdup_printf("('/d', '%s', @a{sv} {})", deep->str);

	g_string_free(deep, TRUE);
	mount_is(t1, "");
	mount_is(t2, ERR("InvalidArgument"));
	mount_is(t3, ERR("InvalidArgument"));
}
END_TEST

START_TEST(test_other_args)
{
	g_autoptr(GError) err = NULL;
	struct o2d_unmount_req u;
	struct o2d_reflink_req r;
	g_autoptr(GVariant) p1 = params("({'force': <true>},)");
	g_autoptr(GVariant) p2 = params("({'force': <'yes'>},)");
	g_autoptr(GVariant) p3 = params("({'lazy': <true>},)");
	g_autoptr(GVariant) p4 = params("('/a/b', '/c', @a{sv} {})");
	g_autoptr(GVariant) p5 = params("('a/b', '/c', @a{sv} {})");
	g_autoptr(GVariant) p6 = params("('/a/b', '/c', {'force': <true>})");

	ck_assert(o2d_parse_unmount(p1, &u, NULL) && u.force);
	ck_assert(!o2d_parse_unmount(p2, &u, &err));
	ck_assert(g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS));
	g_clear_error(&err);
	ck_assert(!o2d_parse_unmount(p3, &u, &err));
	ck_assert(g_error_matches(err, O2D_ERROR, O2D_ERROR_OPTION_NOT_PERMITTED));
	g_clear_error(&err);
	ck_assert(!o2d_parse_unmount(p4, &u, &err));
	ck_assert(g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS));
	g_clear_error(&err);
	ck_assert(o2d_parse_reflink(p4, &r, NULL));
	ck_assert_str_eq(r.source, "/a/b");
	ck_assert_str_eq(r.destination, "/c");
	o2d_reflink_req_clear(&r);
	ck_assert(!o2d_parse_reflink(p5, &r, &err));
	ck_assert(g_error_matches(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT));
	g_clear_error(&err);
	ck_assert(!o2d_parse_reflink(p6, &r, &err));
	ck_assert(g_error_matches(err, O2D_ERROR, O2D_ERROR_OPTION_NOT_PERMITTED));
	g_clear_error(&err);
	ck_assert(!o2d_parse_reflink(NULL, &r, NULL));
	/* ClusterState: options only, none but auth.* known */
	g_autoptr(GVariant) p7 = params("(@a{sv} {},)");
	g_autoptr(GVariant) p8 = params("({'auth.no_user_interaction': <true>},)");

	ck_assert(o2d_parse_cluster_state(p7, NULL));
	ck_assert(o2d_parse_cluster_state(p8, NULL));
	ck_assert(!o2d_parse_cluster_state(p1, &err));
	ck_assert(g_error_matches(err, O2D_ERROR, O2D_ERROR_OPTION_NOT_PERMITTED));
	g_clear_error(&err);
	ck_assert(!o2d_parse_cluster_state(p4, &err));
	ck_assert(g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS));
	ck_assert(!o2d_parse_cluster_state(NULL, NULL));
	g_clear_error(&err);
	/* Statistics: the same, options only, none but auth.* known */
	g_autoptr(GVariant) p9 = params("({'reset': <true>},)");
	g_autoptr(GVariant) p10 = params("({'auth.no_user_interaction': <'yes'>},)");
	g_autoptr(GVariant) p11 = params("@a{sv} {}");

	ck_assert(o2d_parse_statistics(p7, NULL));
	ck_assert(o2d_parse_statistics(p8, NULL));
	ck_assert(!o2d_parse_statistics(p9, &err));
	ck_assert(g_error_matches(err, O2D_ERROR, O2D_ERROR_OPTION_NOT_PERMITTED));
	g_clear_error(&err);
	ck_assert(!o2d_parse_statistics(p10, &err));
	ck_assert(g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS));
	g_clear_error(&err);
	ck_assert(!o2d_parse_statistics(p4, &err));
	ck_assert(g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS));
	g_clear_error(&err);
	ck_assert(!o2d_parse_statistics(p11, &err)); /* not a tuple */
	ck_assert(g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS));
	ck_assert(!o2d_parse_statistics(NULL, NULL));
	g_clear_error(&err);
	/* Status: the same again */
	ck_assert(o2d_parse_status(p7, NULL));
	ck_assert(o2d_parse_status(p8, NULL));
	ck_assert(!o2d_parse_status(p9, &err));
	ck_assert(g_error_matches(err, O2D_ERROR, O2D_ERROR_OPTION_NOT_PERMITTED));
	g_clear_error(&err);
	ck_assert(!o2d_parse_status(p11, &err));
	ck_assert(g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS));
	ck_assert(!o2d_parse_status(NULL, NULL));
}
END_TEST

/* Format, Check, Cancel: typed options into a request, or a named refusal. */
START_TEST(test_job_args)
{
	g_autoptr(GError) err = NULL;
	struct o2d_format_req f;
	struct o2d_check_req c;
	g_autoptr(GVariant) p1 = params("('/dev/sdb', {'label': <'data'>, 'block_size': <uint32 4096>, "
					 "'slots': <uint32 4>, 'journal_size': <uint64 67108864>, "
					 "'local': <true>, 'force': <true>, 'features': <'metaecc'>, "
					 "'auth.no_user_interaction': <true>})");
	g_autoptr(GVariant) p2 = params("('/dev/sdb', {'block_size': <'4k'>})");
	g_autoptr(GVariant) p3 = params("('/dev/sdb', {'mkfs': <true>})");
	g_autoptr(GVariant) p4 = params("('sdb', @a{sv} {})");
	g_autoptr(GVariant) p5 = params("('/dev/sdb', {'label': <'0123456789012345678901234567890123456789"
					 "012345678901234567890123'>})");
	g_autoptr(GVariant) p6 = params("('/dev/sdb', @a{sv} {})");
	g_autoptr(GVariant) p7 = params("(@a{sv} {},)");

	ck_assert(o2d_parse_format(p1, &f, NULL));
	ck_assert_str_eq(f.device, "/dev/sdb");
	ck_assert_str_eq(f.label, "data");
	ck_assert_str_eq(f.features, "metaecc");
	ck_assert_uint_eq(f.block_size, 4096);
	ck_assert_uint_eq(f.slots, 4);
	ck_assert_uint_eq(f.journal_size, 67108864);
	ck_assert(f.local && f.force && !f.cluster_stack && !f.type);
	o2d_format_req_clear(&f);
	ck_assert(!o2d_parse_format(p2, &f, &err));
	ck_assert(g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS));
	g_clear_error(&err);
	ck_assert(!o2d_parse_format(p3, &f, &err));
	ck_assert(g_error_matches(err, O2D_ERROR, O2D_ERROR_OPTION_NOT_PERMITTED));
	g_clear_error(&err);
	ck_assert(!o2d_parse_format(p4, &f, &err));
	ck_assert(g_error_matches(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT));
	g_clear_error(&err);
	ck_assert(!o2d_parse_format(p5, &f, &err)); /* 64 bytes */
	ck_assert(g_error_matches(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT));
	g_clear_error(&err);
	ck_assert(!o2d_parse_format(p7, &f, &err));
	ck_assert(g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS));
	g_clear_error(&err);
	ck_assert(o2d_parse_check(p6, &c, NULL));
	ck_assert_str_eq(c.device, "/dev/sdb");
	o2d_check_req_clear(&c);
	ck_assert(!o2d_parse_check(p1, &c, &err)); /* Check takes no mkfs options */
	ck_assert(g_error_matches(err, O2D_ERROR, O2D_ERROR_OPTION_NOT_PERMITTED));
	g_clear_error(&err);
	ck_assert(!o2d_parse_check(p4, &c, &err));
	ck_assert(g_error_matches(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT));
	g_clear_error(&err);
	ck_assert(o2d_parse_cancel(p7, NULL));
	ck_assert(!o2d_parse_cancel(p6, &err));
	ck_assert(g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS));
	ck_assert(!o2d_parse_format(NULL, &f, NULL));
	ck_assert(!o2d_parse_check(NULL, &c, NULL));
}
END_TEST

/* Format's options that ocfs2ctl format's offline-looking flags map to. */
START_TEST(test_format_every_option)
{
	g_autoptr(GError) err = NULL;
	struct o2d_format_req f;
	static const guint8 uuid[16] = { 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
					 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10 };
	g_autoptr(GVariant) all = params(
		"('/dev/sdb', {'uuid': <'01234567-89AB-cdef-fedc-ba9876543210'>, "
		"'dx_seed': <@au [1, 2, 3]>, 'generation': <uint32 0>, 'time': <uint64 1700000000>, "
		"'volume_size': <uint64 1048576>, 'journal64': <false>, 'local': <false>, "
		"'dry_run': <true>})");
	g_autoptr(GVariant) none = params("('/dev/sdb', @a{sv} {})");
	static const char *const bad[][2] = {
		{ "('/dev/sdb', {'uuid': <'0123456789abcdef0123456789abcdeg'>})", "uuid" },
		{ "('/dev/sdb', {'uuid': <'0123456789abcdef0123456789abcdef00'>})", "uuid" },
		{ "('/dev/sdb', {'uuid': <''>})", "uuid" },
		{ "('/dev/sdb', {'dx_seed': <@au [1, 2]>})", "dx_seed" },
		{ "('/dev/sdb', {'dx_seed': <@au [1, 2, 3, 4]>})", "dx_seed" },
		{ "('/dev/sdb', {'time': <uint64 18446744073709551615>})", "time" },
	};

	ck_assert(o2d_parse_format(all, &f, NULL));
	ck_assert(f.have_uuid && !memcmp(f.uuid, uuid, 16));
	ck_assert(f.have_dx_seed && f.dx_seed[0] == 1 && f.dx_seed[1] == 2 && f.dx_seed[2] == 3);
	ck_assert(f.have_generation && f.generation == 0);
	ck_assert(f.have_time && f.time == 1700000000);
	ck_assert_uint_eq(f.volume_size, 1048576);
	ck_assert(f.have_journal64 && !f.journal64);
	ck_assert(f.have_local && !f.local);
	ck_assert(f.dry_run && !f.force);
	o2d_format_req_clear(&f);
	/* absent is not false: mkfs then decides */
	ck_assert(o2d_parse_format(none, &f, NULL));
	ck_assert(!f.have_uuid && !f.have_dx_seed && !f.have_generation && !f.have_time &&
		  !f.have_journal64 && !f.have_local && !f.dry_run && !f.volume_size);
	o2d_format_req_clear(&f);
	for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
		g_autoptr(GVariant) p = params(bad[i][0]);

		ck_assert_msg(!o2d_parse_format(p, &f, &err), "%s", bad[i][0]);
		ck_assert(g_error_matches(err, O2D_ERROR, O2D_ERROR_INVALID_ARGUMENT));
		ck_assert_msg(strstr(err->message, bad[i][1]), "%s: %s", bad[i][0], err->message);
		g_clear_error(&err);
	}
	/* the wrong type is the bus's InvalidArgs, naming the option */
	g_autoptr(GVariant) wrong = params("('/dev/sdb', {'dx_seed': <'1,2,3'>})");

	ck_assert(!o2d_parse_format(wrong, &f, &err));
	ck_assert(g_error_matches(err, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS));
	ck_assert(strstr(err->message, "dx_seed"));
	g_clear_error(&err);
	/* a cancelled Mount crosses the bus by name, as ECANCELED */
	g_autoptr(GError) remote = g_dbus_error_new_for_dbus_error(
		"org.ocfs2d.Daemon1.Error.Cancelled", "cancelled");

	ck_assert(g_error_matches(remote, O2D_ERROR, O2D_ERROR_CANCELLED));
	ck_assert_int_eq(o2d_error_to_errno(remote), ECANCELED);
	ck_assert_int_eq(o2d_error_from_errno(ECANCELED), O2D_ERROR_CANCELLED);
}
END_TEST

START_TEST(test_errors_and_paths)
{
	/* names arrive as errors of the domain once it is registered */
	GQuark domain = o2d_error_quark();
	g_autoptr(GError) remote = g_dbus_error_new_for_dbus_error(ERR("DeviceBusy"), "busy");

	ck_assert_uint_eq(remote->domain, domain);

	ck_assert(g_error_matches(remote, O2D_ERROR, O2D_ERROR_DEVICE_BUSY));
	ck_assert_int_eq(o2d_error_to_errno(remote), EBUSY);
	ck_assert_int_eq(o2d_error_from_errno(ENOENT), O2D_ERROR_NOT_FOUND);
	ck_assert_int_eq(o2d_error_from_errno(E2BIG), O2D_ERROR_FAILED);

	const char *mnts[] = { "/mnt/ocfs2", "/", "//x", "/a_b/c d/\xc3\xa9", "/_root" };

	for (size_t i = 0; i < G_N_ELEMENTS(mnts); i++) {
		g_autofree char *path = o2d_volume_path(mnts[i]);
		g_autofree char *back = o2d_volume_mountpoint(path);

		ck_assert_msg(g_variant_is_object_path(path), "%s", path);
		ck_assert_msg(back && !strcmp(back, mnts[i]), "%s -> %s -> %s", mnts[i], path,
			      back ? back : "NULL");
	}
	g_autofree char *p = o2d_volume_path("/mnt/ocfs2");

	ck_assert_str_eq(p, "/org/ocfs2d/Daemon1/volumes/mnt_2focfs2");
	ck_assert_ptr_null(o2d_volume_mountpoint("/org/ocfs2d/Daemon1/Manager"));
	ck_assert_ptr_null(o2d_volume_mountpoint("/org/ocfs2d/Daemon1/volumes/a/b"));
	ck_assert_ptr_null(o2d_volume_mountpoint("/org/ocfs2d/Daemon1/volumes/a_00b"));
	ck_assert_ptr_null(o2d_volume_mountpoint("/org/ocfs2d/Daemon1/volumes/_61"));
	ck_assert_ptr_null(o2d_volume_mountpoint("not a path"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("api");
	TCase *tc = tcase_create("api");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_option_strings);
	tcase_add_test(tc, test_option_round_trip);
	tcase_add_test(tc, test_mount_args);
	tcase_add_test(tc, test_other_args);
	tcase_add_test(tc, test_job_args);
	tcase_add_test(tc, test_format_every_option);
	tcase_add_test(tc, test_errors_and_paths);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
