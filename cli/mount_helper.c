// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mount.fuse.ocfs2 and umount.fuse.ocfs2 (a link to the same program):
 * the helpers mount(8) and umount(8) run for filesystems of type
 * fuse.ocfs2, so that `mount -t fuse.ocfs2 DEVICE DIR`, an /etc/fstab line
 * and a plain `umount DIR` work.  They take the path ocfs2ctl mount and
 * umount take (ctl_mount.c): the daemon's D-Bus API on its control socket,
 * starting ocfs2d if none runs; umount returns once the volume is closed,
 * its journal empty.
 *
 * mount(8) runs   mount.fuse.ocfs2 DEVICE DIR [-sfnv] [-N NS] [-o OPTIONS] [-t TYPE]
 * umount(8) runs  umount.fuse.ocfs2 DIR [-flnrv] [-N NS] [-t TYPE]
 *
 * OPTIONS are the fstab line's, less what mount(8) keeps for itself:
 * options that only matter to mount(8) (user, noauto, x-..., ...) are
 * dropped here, the rest go to ocfs2d, which refuses one it does not know
 * (-s, sloppy: dropped with a warning instead).  Exit status as mount(8)
 * documents it: 0, 1 bad usage or not root, 32 the mount failed.
 */

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "ctl.h"
#include "mountopts.h"

#define EX_USAGE 1
#define EX_FAIL 32

static const char *self = "mount.fuse.ocfs2";

static int usage(bool umount)
{
	if (umount)
		fprintf(stderr, "usage: %s DIR [-flnrv] [-t fuse.ocfs2]\n", self);
	else
		fprintf(stderr, "usage: %s DEVICE DIR [-sfnv] [-o OPTIONS] [-t fuse.ocfs2]\n", self);
	return EX_USAGE;
}

/* Whether an option is mount(8)'s own business, not the filesystem's. */
static bool mount8_option(const char *o)
{
	static const char *const names[] = { "user", "users", "nouser", "owner", "group",
					     "auto", "noauto", "defaults", NULL };
	static const char *const prefixes[] = { "user=", "x-", "comment=", "helper=", NULL };

	for (size_t i = 0; names[i]; i++)
		if (!strcmp(o, names[i]))
			return true;
	for (size_t i = 0; prefixes[i]; i++)
		if (!strncmp(o, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

/* The options for ocfs2d: mount(8)'s own dropped, unknown ones too if sloppy. */
static char *daemon_options(const char *opts, bool sloppy)
{
	g_auto(GStrv) parts = g_strsplit(opts ? opts : "", ",", -1);
	GString *out = g_string_new(NULL);

	for (char **p = parts; *p; p++) {
		g_autofree char *name = g_strndup(*p, strcspn(*p, "="));

		if (!**p || mount8_option(*p))
			continue;
		if (sloppy && !mount_opt_known(name)) {
			fprintf(stderr, "%s: ignoring unknown option \"%s\" (-s)\n", self, *p);
			continue;
		}
		g_string_append_printf(out, "%s%s", out->len ? "," : "", *p);
	}
	return g_string_free(out, FALSE);
}

static bool our_type(const char *t)
{
	return !strcmp(t, "fuse.ocfs2") || !strcmp(t, "ocfs2") || !strcmp(t, "fuseblk.ocfs2");
}

int main(int argc, char **argv)
{
	const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	bool umount = !strncmp(base, "umount", 6);
	bool sloppy = false, fake = false, verbose = false, force = false;
	const char *opts = NULL;
	int c;

	self = umount ? "umount.fuse.ocfs2" : "mount.fuse.ocfs2";
	opterr = 0;
	while ((c = getopt(argc, argv, umount ? "flnrvN:t:" : "sfnvN:o:t:")) != -1) {
		switch (c) {
		case 's':
			sloppy = true;
			break;
		case 'f':
			/* mount -f: fake it; umount -f: force */
			if (umount)
				force = true;
			else
				fake = true;
			break;
		case 'l':
			force = true; /* lazy: detach, as ocfs2ctl umount -f does */
			break;
		case 'n':
		case 'r':
			break; /* no mtab to write; read-only remount on failure: not ours */
		case 'v':
			verbose = true;
			break;
		case 'o':
			opts = optarg;
			break;
		case 't':
			if (!our_type(optarg)) {
				fprintf(stderr, "%s: type %s is not ours (fuse.ocfs2)\n", self, optarg);
				return EX_USAGE;
			}
			break;
		case 'N':
			fprintf(stderr, "%s: -N (another mount namespace) is not supported: run mount "
				"in that namespace instead\n", self);
			return EX_USAGE;
		default:
			fprintf(stderr, "%s: unknown option -%c\n", self, optopt);
			return usage(umount);
		}
	}
	if (argc - optind != (umount ? 1 : 2))
		return usage(umount);
	if (geteuid() != 0) {
		fprintf(stderr, "%s: only root can %s ocfs2d volumes (ocfs2d serves them as root; "
			"the fstab options user and users are not supported)\n", self,
			umount ? "unmount" : "mount");
		return EX_USAGE;
	}
	ctl_mount_speaker(self, verbose);
	if (umount)
		return ctl_umount_volume(argv[optind], force) == CTL_EXIT_OK ? 0 : EX_FAIL;

	g_autofree char *dopts = daemon_options(opts, sloppy);

	if (fake) {
		if (verbose)
			printf("%s: would mount %s on %s (-o %s)\n", self, argv[optind],
			       argv[optind + 1], dopts);
		return 0;
	}
	return ctl_mount_volume(dopts, argv[optind], argv[optind + 1]) == CTL_EXIT_OK ? 0 : EX_FAIL;
}
