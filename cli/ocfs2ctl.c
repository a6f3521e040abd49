/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ocfs2ctl: inspect OCFS2 volumes.  The offline verbs here link fscore and
 * read an image or device directly, read-only.
 *
 * Option handling: --json, --help and --version are global and may stand
 * anywhere on the line; -l belongs to ls; "--" ends the options.  The first
 * positional argument is the verb.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

#ifndef OCFS2CTL_VERSION
#define OCFS2CTL_VERSION "unknown"
#endif

struct verb {
	const char *name;
	int (*fn)(struct ctl *c, int argc, char **argv);
	int min_args, max_args;
	const char *args;
	const char *help;
};

static const struct verb verbs[] = {
	{ "info", verb_info, 1, 1, "IMAGE", "superblock, features, space, journals" },
	{ "ls", verb_ls, 1, 2, "[-l] IMAGE [PATH]", "list a directory in on-disk order" },
	{ "stat", verb_stat, 2, 2, "IMAGE PATH|<INODE>", "every field of one inode" },
	{ "cat", verb_cat, 2, 2, "IMAGE PATH|<INODE>", "a regular file's data to stdout" },
	{ "slots", verb_slots, 1, 1, "IMAGE|MOUNTPOINT",
	  "the slot map (of a mounted volume: with its cluster's members and lock counts)" },
	{ "check", verb_check, 1, 1, "[--via-daemon] IMAGE", "read-only structural verification" },
	{ "put", verb_put, 3, 3, "[-rf] IMAGE SRC DST", "copy a host file or tree (-r, with progress) in" },
	{ "mkdir", verb_mkdir, 2, 2, "[-p] IMAGE PATH", "make a directory (-p: and parents)" },
	{ "rm", verb_rm, 2, 2, "[-rdf] IMAGE PATH", "remove a file, empty dir (-d), tree (-r)" },
	{ "mv", verb_mv, 3, 3, "IMAGE OLD NEW", "rename or move" },
	{ "ln", verb_ln, 3, 3, "[-s] IMAGE OLD NEW", "hard link, or symlink NEW -> OLD (-s)" },
	{ "reflink", verb_reflink, 3, 3, "IMAGE SRC DST", "a copy sharing SRC's clusters (CoW)" },
	{ "format", NULL, 1, 2, "[OPTIONS] DEVICE", "make a new volume (format --help)" },
	{ "mount", NULL, 2, 2, "[-o OPTS] [--foreground] DEVICE DIR", "serve a volume through ocfs2d" },
	{ "umount", NULL, 1, 1, "[-f] DIR", "unmount cleanly (-f: even if busy)" },
	{ "mounts", NULL, 0, 0, "", "volumes the running ocfs2d serves" },
	{ "status", NULL, 0, 0, "", "each served volume: state, cluster, journal, space" },
	{ "stats", NULL, 1, 1, "DIR", "a mounted volume's journal commits and device flushes" },
	{ "log", NULL, 0, 1, "[-n LINES] [DIR|DEVICE]", "ocfs2d's log, or one volume's lines of it" },
	{ "quota", NULL, 1, 7, "[-g] IMAGE|DIR | set|grace ...", "usage and limits (quota --help)" },
};

static void usage_full(FILE *out)
{
	fprintf(out,
		"Usage: ocfs2ctl [--json] VERB [ARGS]\n"
		"\n"
		"Inspect an OCFS2 volume (image file or block device), change it offline,\n"
		"make a new one (format), or serve it through the ocfs2d daemon (mount).\n"
		"\n"
		"Verbs:\n");
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(out, "  %-7s %-36s %s\n", verbs[i].name, verbs[i].args, verbs[i].help);
	fprintf(out,
		"\n"
		"Options:\n"
		"  --json       machine-readable output (schema: cli/README-json.md)\n"
		"  -l, --long   ls: long listing (inode, mode, links, uid, gid, size, mtime)\n"
		"  -r           put, rm: whole trees\n"
		"  -f           put: overwrite existing files; rm: a missing PATH is no error\n"
		"  -p           mkdir: make missing parents, an existing directory is fine\n"
		"  -d           rm: remove an empty directory\n"
		"  -s           ln: a symbolic link\n"
		"  -o OPTS      mount: ro, noallow_other (only root may enter; default:\n"
		"               every user, modes checked), entry_timeout=S, attr_timeout=S,\n"
		"               commit=S (default 5), slot=N, poll=USEC (default 200),\n"
		"               threads=N (with poll=0), lock_cache=N, localalloc=MB, nouser_xattr,\n"
		"               acl, noxattr, suid, dev (default nosuid, nodev), noexec,\n"
		"               localflocks, writeback_cache (local: the kernel keeps written\n"
		"               pages; errors show at fsync and close)\n"
		"  -n LINES     log: only the last LINES lines\n"
		"  --foreground mount: run ocfs2d in the foreground for this volume\n"
		"  --via-daemon check, format: let ocfs2d do it (a D-Bus job, started if\n"
		"               none runs), with a progress bar on a terminal; ^C cancels\n"
		"  --help       this text\n"
		"  --version    the version\n"
		"\n"
		"PATH is absolute from the root directory; \"//NAME\" names a file of the\n"
		"system directory (\"//\" is the system directory itself); \"<N>\" is inode N.\n"
		"\n"
		"Exit status: 0 success, 1 failure or corruption, 2 usage error.\n");
}

int ctl_fail(struct ctl *c, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "ocfs2ctl: %s: ", c->verb ? c->verb : "error");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CTL_EXIT_FAIL;
}

const char *ctl_strerror(const struct ctl *c, int err)
{
	if ((err == -EUCLEAN || err == -EOPNOTSUPP) && c->fs) {
		/* fscore's message says which block, or what is not supported */
		const char *msg = o2_fs_error(c->fs);

		if (msg && *msg)
			return msg;
		return err == -EUCLEAN ? "filesystem corrupted" : strerror(-err);
	}
	if (err >= 0)
		return "unexpected result";
	return strerror(-err);
}

int ctl_open(struct ctl *c)
{
	char errbuf[256] = "";
	int ret;

	ret = o2_blockdev_open_file(c->image, O2_DEV_RDONLY, &c->dev);
	if (ret < 0) {
		c->dev = NULL;
		c->open_err = ret;
		snprintf(c->open_msg, sizeof(c->open_msg), "%s", strerror(-ret));
		return ctl_fail(c, "%s: %s", c->image, c->open_msg);
	}
	ret = o2_fs_open(c->dev, O2_OPEN_RDONLY, &c->fs, errbuf, sizeof(errbuf));
	if (ret < 0) {
		c->fs = NULL;
		o2_blockdev_free(c->dev);
		c->dev = NULL;
		c->open_err = ret;
		if (ret == -ENODATA) {
			snprintf(c->open_msg, sizeof(c->open_msg), "not an OCFS2 volume");
			return ctl_fail(c, "%s is not an OCFS2 volume", c->image);
		}
		snprintf(c->open_msg, sizeof(c->open_msg), "%s", errbuf[0] ? errbuf : strerror(-ret));
		return ctl_fail(c, "%s: %s", c->image, c->open_msg);
	}
	return CTL_EXIT_OK;
}

void ctl_close(struct ctl *c)
{
	if (c->fs)
		o2_fs_close(c->fs);
	if (c->dev)
		o2_blockdev_free(c->dev);
	c->fs = NULL;
	c->dev = NULL;
}

/* Parse "<N>"; false if spec is not of that form. */
static bool parse_inode_number(const char *spec, uint64_t *ret)
{
	size_t len = strlen(spec);
	uint64_t v = 0;

	if (len < 3 || spec[0] != '<' || spec[len - 1] != '>')
		return false;
	for (size_t i = 1; i < len - 1; i++) {
		if (spec[i] < '0' || spec[i] > '9')
			return false;
		uint64_t digit = (uint64_t)(spec[i] - '0');

		if (v > (UINT64_MAX - digit) / 10)
			return false;
		v = v * 10 + digit;
	}
	*ret = v;
	return true;
}

int ctl_get_inode(struct ctl *c, const char *spec, struct o2_inode **ret_inode)
{
	uint64_t blkno;
	int ret;

	if (spec[0] == '<') {
		if (!parse_inode_number(spec, &blkno))
			return ctl_fail(c, "%s: not an inode number (want <N>)", spec);
	} else {
		char *path = NULL;

		if (spec[0] != '/') {
			if (asprintf(&path, "/%s", spec) < 0)
				return ctl_fail(c, "%s", strerror(ENOMEM));
		}
		ret = o2_path_lookup(c->fs, path ? path : spec, &blkno);
		free(path);
		if (ret < 0)
			return ctl_fail(c, "%s: %s", spec, ctl_strerror(c, ret));
	}
	ret = o2_inode_get(c->fs, blkno, ret_inode);
	if (ret == -ERANGE)
		return ctl_fail(c, "%s: inode %" PRIu64 " is outside the volume", spec, blkno);
	if (ret < 0)
		return ctl_fail(c, "%s: %s", spec, ctl_strerror(c, ret));
	return CTL_EXIT_OK;
}

int ctl_finish_stdout(struct ctl *c, int status)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		int err = errno ? errno : EIO;

		if (status == CTL_EXIT_OK)
			return ctl_fail(c, "writing output: %s", strerror(err));
	}
	return status;
}

void ctl_vec_init(struct ctl_vec *v, size_t elsize)
{
	v->data = NULL;
	v->len = 0;
	v->cap = 0;
	v->elsize = elsize;
}

int ctl_vec_push(struct ctl_vec *v, const void *elem)
{
	if (v->len == v->cap) {
		size_t ncap = v->cap ? v->cap * 2 : 16;
		void *n;

		if (ncap > SIZE_MAX / v->elsize)
			return -ENOMEM;
		n = realloc(v->data, ncap * v->elsize);
		if (!n)
			return -ENOMEM;
		v->data = n;
		v->cap = ncap;
	}
	memcpy((char *)v->data + v->len * v->elsize, elem, v->elsize);
	v->len++;
	return 0;
}

void ctl_vec_free(struct ctl_vec *v)
{
	free(v->data);
	v->data = NULL;
	v->len = v->cap = 0;
}

static int usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One line on stderr for a usage error; returns CTL_EXIT_USAGE. */
static int usage_error(const char *verb, const char *fmt, ...)
{
	va_list ap;

	if (verb)
		fprintf(stderr, "ocfs2ctl: %s: ", verb);
	else
		fprintf(stderr, "ocfs2ctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CTL_EXIT_USAGE;
}

int main(int argc, char **argv)
{
	struct ctl c = { 0 };
	char **pos;
	int npos = 0;
	bool opts_done = false;
	bool help = false, version = false;
	const struct verb *verb = NULL;
	int status;

	/* format takes mkfs.ocfs2's options: it parses everything after the verb itself */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			c.json = true;
			continue;
		}
		if (argv[i][0] == '-' && argv[i][1])
			break;
		if (!strcmp(argv[i], "format"))
			return ctl_format_main(argc - i, argv + i, c.json);
		if (!strcmp(argv[i], "quota"))
			return ctl_quota_main(argc - i, argv + i, c.json);
		if (!strcmp(argv[i], "mount") || !strcmp(argv[i], "umount") ||
		    !strcmp(argv[i], "mounts") || !strcmp(argv[i], "log") ||
		    !strcmp(argv[i], "stats") || !strcmp(argv[i], "status"))
			return ctl_mount_main(argc - i, argv + i, c.json);
		break;
	}

	pos = calloc((size_t)argc + 1, sizeof(*pos));
	if (!pos) {
		fprintf(stderr, "ocfs2ctl: %s\n", strerror(ENOMEM));
		return CTL_EXIT_FAIL;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (opts_done || a[0] != '-' || a[1] == '\0') {
			pos[npos++] = argv[i];
			continue;
		}
		if (!strcmp(a, "--")) {
			opts_done = true;
		} else if (!strcmp(a, "--json")) {
			c.json = true;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			help = true;
		} else if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
			version = true;
		} else if (!strcmp(a, "--via-daemon")) {
			c.via_daemon = true;
		} else if (!strcmp(a, "-l") || !strcmp(a, "--long")) {
			c.long_list = true;
		} else if (a[1] != '-' && strspn(a + 1, "lrRfpds") == strlen(a + 1)) {
			/* short options of the verbs, clustered as in "-rf" */
			for (const char *o = a + 1; *o; o++) {
				c.long_list |= *o == 'l';
				c.opt_recursive |= *o == 'r' || *o == 'R';
				c.opt_force |= *o == 'f';
				c.opt_parents |= *o == 'p';
				c.opt_dir |= *o == 'd';
				c.opt_symbolic |= *o == 's';
			}
		} else {
			status = usage_error(npos ? pos[0] : NULL, "unknown option '%s' (try --help)", a);
			goto out_free_pos;
		}
	}

	if (help) {
		usage_full(stdout);
		status = ctl_finish_stdout(&c, CTL_EXIT_OK);
		goto out_free_pos;
	}
	if (version) {
		printf("ocfs2ctl %s\n", OCFS2CTL_VERSION);
		status = ctl_finish_stdout(&c, CTL_EXIT_OK);
		goto out_free_pos;
	}
	if (npos == 0) {
		status = usage_error(NULL, "usage: ocfs2ctl [--json] VERB [ARGS] (try --help)");
		goto out_free_pos;
	}
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (!strcmp(pos[0], verbs[i].name))
			verb = &verbs[i];
	if (!verb) {
		status = usage_error(pos[0], "unknown verb (try --help)");
		goto out_free_pos;
	}
	if (npos - 1 < verb->min_args || npos - 1 > verb->max_args) {
		status = usage_error(verb->name, "usage: ocfs2ctl [--json] %s %s", verb->name,
				     verb->args);
		goto out_free_pos;
	}
	if (!verb->fn) {
		status = usage_error(verb->name, "usage: ocfs2ctl [--json] format [OPTIONS] DEVICE "
				     "(try ocfs2ctl format --help)");
		goto out_free_pos;
	}
	if (c.via_daemon && verb->fn != verb_check) {
		status = usage_error(verb->name, "--via-daemon applies to check and format");
		goto out_free_pos;
	}
	if (c.long_list && verb->fn != verb_ls) {
		status = usage_error(verb->name, "-l only applies to ls");
		goto out_free_pos;
	}
	if ((c.opt_recursive && verb->fn != verb_put && verb->fn != verb_rm) ||
	    (c.opt_force && verb->fn != verb_put && verb->fn != verb_rm) ||
	    (c.opt_parents && verb->fn != verb_mkdir) || (c.opt_dir && verb->fn != verb_rm) ||
	    (c.opt_symbolic && verb->fn != verb_ln)) {
		status = usage_error(verb->name, "option not valid for %s (try --help)", verb->name);
		goto out_free_pos;
	}

	c.verb = verb->name;
	c.image = pos[1];
	status = verb->fn(&c, npos - 2, pos + 2);
	ctl_close(&c);
	status = ctl_finish_stdout(&c, status);

out_free_pos:
	free(pos);
	return status;
}
