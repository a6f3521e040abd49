/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Seeds for fuzz_dbus (input format in fuzz_dbus.c): the calls ocfs2ctl
 * and a management UI make, as wire messages, as serialized and text
 * GVariants, plus mount option strings, option values and object paths.
 *
 *   fuzz_make_dbus_seeds CORPUS_DIR     writes CORPUS_DIR/fuzz_dbus/seed-*
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gio/gio.h>

#include "api.h"

static char *dir;
static unsigned count;

static void put(const char *name, guint8 mode, const void *data, size_t len)
{
	g_autofree char *path = g_strdup_printf("%s/seed-%u-%s", dir, mode, name);
	g_autofree guint8 *buf = g_malloc(len + 1);
	g_autoptr(GError) err = NULL;

	buf[0] = mode;
	memcpy(buf + 1, data, len);
	if (!g_file_set_contents(path, (const char *)buf, (gssize)len + 1, &err)) {
		fprintf(stderr, "fuzz_make_dbus_seeds: %s\n", err->message);
		exit(1);
	}
	count++;
}

static void put_str(const char *name, guint8 mode, const char *s)
{
	put(name, mode, s, strlen(s));
}

/* One call, three ways: on the wire, serialized, in text. */
static void call(const char *name, const char *path, const char *iface, const char *member,
		 const char *method_index, GVariant *params)
{
	g_autoptr(GDBusMessage) msg = g_dbus_message_new_method_call(O2D_BUS_NAME, path, iface,
								     member);
	g_autoptr(GError) err = NULL;
	gsize len;

	g_variant_ref_sink(params);
	g_dbus_message_set_body(msg, params);
	g_dbus_message_set_serial(msg, 7);
	g_autofree guchar *blob = g_dbus_message_to_blob(msg, &len, G_DBUS_CAPABILITY_FLAGS_NONE,
							 &err);
	if (!blob) {
		fprintf(stderr, "fuzz_make_dbus_seeds: %s: %s\n", name, err->message);
		exit(1);
	}
	put(name, 0, blob, len);

	g_autofree char *sname = g_strconcat(name, "-data", NULL);
	GString *data = g_string_new(method_index);

	g_string_append_len(data, g_variant_get_data(params), (gssize)g_variant_get_size(params));
	put(sname, 1, data->str, data->len);
	g_string_free(data, TRUE);

	g_autofree char *tname = g_strconcat(name, "-text", NULL);
	g_autofree char *text = g_variant_print(params, TRUE);

	put_str(tname, 2, text);
	g_variant_unref(params);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	dir = g_build_filename(argv[1], "fuzz_dbus", NULL);
	if (g_mkdir_with_parents(dir, 0755) < 0) {
		fprintf(stderr, "fuzz_make_dbus_seeds: %s: %s\n", dir, g_strerror(errno));
		return 1;
	}
	g_autofree char *vol = o2d_volume_path("/mnt/ocfs2");

	/* as ocfs2ctl mount -o sends it */
	call("mount-ctl", O2D_MANAGER_PATH, O2D_MANAGER_IFACE, "Mount", "\x00",
	     g_variant_new_parsed("('/dev/sdb1', '/mnt/ocfs2', {'options': <'ro,commit=5,acl'>})"));
	/* typed options, as a management UI sends them */
	call("mount-typed", O2D_MANAGER_PATH, O2D_MANAGER_IFACE, "Mount", "\x00",
	     g_variant_new_parsed("('/srv/vol.img', '/mnt/ocfs2', {'ro': <false>, "
				  "'entry_timeout': <0.5>, 'commit': <uint32 10>, 'threads': <uint32 4>, "
				  "'allow_other': <true>, 'auth.no_user_interaction': <true>})"));
	call("mount-plain", O2D_MANAGER_PATH, O2D_MANAGER_IFACE, "Mount", "\x00",
	     g_variant_new_parsed("('/dev/sdb1', '/mnt/ocfs2', @a{sv} {})"));
	call("unmount-force", vol, O2D_VOLUME_IFACE, "Unmount", "\x01",
	     g_variant_new_parsed("({'force': <true>},)"));
	call("unmount", vol, O2D_VOLUME_IFACE, "Unmount", "\x01",
	     g_variant_new_parsed("(@a{sv} {},)"));
	call("reflink", vol, O2D_VOLUME_IFACE, "Reflink", "\x02",
	     g_variant_new_parsed("('/dir/file', '/dir/copy', @a{sv} {})"));

	put_str("options", 3, "ro,allow_other,entry_timeout=0.25,attr_timeout=2,commit=30,slot=3");
	put_str("options-xattr", 3, "nouser_xattr,noacl,noxattr,uring,poll=0,threads=1,_netdev");
	struct mount_opts o;

	mount_opts_default(&o);
	g_autofree char *defaults = mount_opts_to_string(&o);

	put_str("options-defaults", 3, defaults);
	put_str("option-commit", 4, "commit=uint32 7");
	put_str("option-timeout", 4, "attr_timeout=1.5");
	put_str("option-ro", 4, "ro=true");
	put_str("paths", 5, vol);
	put_str("paths-plain", 5, "mnt/ocfs2 volume");
	printf("%u seeds in %s\n", count, dir);
	g_free(dir);
	return 0;
}
