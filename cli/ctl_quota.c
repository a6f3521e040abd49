// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ocfs2ctl quota: what repquota(8) and setquota(8) do, for OCFS2 quota
 * files (FUSE has no quotactl).  On an image or device it works offline
 * through fscore; on a mount point, through the ocfs2d that serves it
 * (Volume.Quota, Volume.SetQuota), which folds its own changes in.
 *
 *   ocfs2ctl quota [-u|-g] IMAGE|DIR                     report every id
 *   ocfs2ctl quota set [-u|-g] IMAGE|DIR ID BSOFT BHARD ISOFT IHARD
 *   ocfs2ctl quota grace [-u|-g] IMAGE|DIR BGRACE IGRACE
 *
 * Sizes are KiB as setquota takes them, or a number with K, M, G or T;
 * grace periods are seconds, or a number with s, m, h or d.
 */

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ctl.h"
#include "json.h"

static void quota_help(FILE *out)
{
	fprintf(out,
		"Usage: ocfs2ctl quota [-u|-g] [--json] IMAGE|MOUNTPOINT\n"
		"       ocfs2ctl quota set [-u|-g] IMAGE|MOUNTPOINT ID BSOFT BHARD ISOFT IHARD\n"
		"       ocfs2ctl quota grace [-u|-g] IMAGE|MOUNTPOINT BGRACE IGRACE\n"
		"Report usage and limits of every user (-u, the default) or group (-g), set\n"
		"one id's limits, or set the grace periods.  ID: a number or a user (group)\n"
		"name; sizes in KiB, or with K, M, G or T; inode counts as numbers; 0: no\n"
		"limit; grace in seconds, or with s, m, h or d.  A MOUNTPOINT goes through\n"
		"the ocfs2d that serves it; an IMAGE or device is read or changed offline.\n");
}

static int qusage(const char *why)
{
	fprintf(stderr, "ocfs2ctl: quota: %s\n", why);
	quota_help(stderr);
	return CTL_EXIT_USAGE;
}

/* A number with an optional suffix from units (each a letter and its multiplier). */
static bool parse_scaled(const char *s, uint64_t plain, const char *letters,
			 const uint64_t *mult, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return false;
	uint64_t m = plain;

	if (*end) {
		const char *l = strchr(letters, *end);

		if (!l || end[1])
			return false;
		m = mult[l - letters];
	}
	if (v && m > UINT64_MAX / v)
		return false;
	*ret = v * m;
	return true;
}

static bool parse_size(const char *s, uint64_t *ret)
{
	static const uint64_t mult[] = { 1ull << 10, 1ull << 10, 1ull << 20, 1ull << 20, 1ull << 30,
					 1ull << 30, 1ull << 40, 1ull << 40 };

	return parse_scaled(s, 1024, "KkMmGgTt", mult, ret);
}

static bool parse_count(const char *s, uint64_t *ret)
{
	return parse_scaled(s, 1, "", NULL, ret);
}

static bool parse_grace(const char *s, uint32_t *ret)
{
	static const uint64_t mult[] = { 1, 60, 3600, 86400 };
	uint64_t v;

	if (!parse_scaled(s, 1, "smhd", mult, &v) || v > UINT32_MAX)
		return false;
	*ret = (uint32_t)v;
	return true;
}

static bool parse_id(const char *s, unsigned type, uint32_t *ret)
{
	uint64_t v;

	if (parse_count(s, &v)) {
		if (v >= UINT32_MAX)
			return false;
		*ret = (uint32_t)v;
		return true;
	}
	if (type) {
		const struct group *g = getgrnam(s);

		if (g)
			*ret = (uint32_t)g->gr_gid;
		return g != NULL;
	}
	const struct passwd *p = getpwnam(s);

	if (p)
		*ret = (uint32_t)p->pw_uid;
	return p != NULL;
}

static bool is_mountpoint(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---- report ---- */

struct rows {
	struct o2_dquot *v;
	size_t n, cap;
};

static int collect(void *arg, const struct o2_dquot *dq)
{
	struct rows *r = arg;

	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		struct o2_dquot *n = realloc(r->v, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		r->v = n;
		r->cap = cap;
	}
	r->v[r->n++] = *dq;
	return 0;
}

static int by_id(const void *a, const void *b)
{
	uint32_t x = ((const struct o2_dquot *)a)->id, y = ((const struct o2_dquot *)b)->id;

	return x < y ? -1 : x > y;
}

/* What is left of a grace period, as repquota says it. */
static void grace_left(uint64_t deadline, time_t now, char *buf, size_t len)
{
	if (!deadline) {
		buf[0] = '\0';
		return;
	}
	if ((time_t)deadline <= now) {
		snprintf(buf, len, "none");
		return;
	}
	uint64_t left = (uint64_t)deadline - (uint64_t)now;

	if (left >= 86400)
		snprintf(buf, len, "%" PRIu64 "days", (left + 86399) / 86400);
	else
		snprintf(buf, len, "%02" PRIu64 ":%02" PRIu64, left / 3600, (left % 3600 + 59) / 60);
}

static void grace_words(uint32_t s, char *buf, size_t len)
{
	if (s && s % 86400 == 0)
		snprintf(buf, len, "%udays", s / 86400);
	else if (s && s % 3600 == 0)
		snprintf(buf, len, "%uhours", s / 3600);
	else if (s && s % 60 == 0)
		snprintf(buf, len, "%uminutes", s / 60);
	else
		snprintf(buf, len, "%useconds", s);
}

static void print_report(const char *where, unsigned type, struct rows *r, uint32_t bgrace,
			 uint32_t igrace, bool json)
{
	time_t now = time(NULL);

	qsort(r->v, r->n, sizeof(*r->v), by_id);
	if (json) {
		struct json_writer w;

		json_init(&w, stdout);
		json_object_begin(&w, NULL);
		json_string(&w, "volume", where);
		json_string(&w, "type", type ? "group" : "user");
		json_uint(&w, "block_grace", bgrace);
		json_uint(&w, "inode_grace", igrace);
		json_array_begin(&w, "ids");
		for (size_t i = 0; i < r->n; i++) {
			const struct o2_dquot *d = &r->v[i];

			json_object_begin(&w, NULL);
			json_uint(&w, "id", d->id);
			json_uint(&w, "space", d->space);
			json_uint(&w, "inodes", d->inodes);
			json_uint(&w, "block_soft", d->bsoft);
			json_uint(&w, "block_hard", d->bhard);
			json_uint(&w, "inode_soft", d->isoft);
			json_uint(&w, "inode_hard", d->ihard);
			json_uint(&w, "block_grace_ends", d->btime);
			json_uint(&w, "inode_grace_ends", d->itime);
			json_object_end(&w);
		}
		json_array_end(&w);
		json_object_end(&w);
		json_finish(&w);
		return;
	}
	char bg[32], ig[32];

	grace_words(bgrace, bg, sizeof(bg));
	grace_words(igrace, ig, sizeof(ig));
	printf("*** Report for %s quotas on %s\n", type ? "group" : "user", where);
	printf("Block grace time: %s; Inode grace time: %s\n", bg, ig);
	printf("%-20s     %12s %12s %12s %7s %9s %9s %9s %7s\n", "", "KiB used", "soft", "hard",
	       "grace", "files", "soft", "hard", "grace");
	for (size_t i = 0; i < r->n; i++) {
		const struct o2_dquot *d = &r->v[i];
		char name[32], bl[48], il[48];
		const char *nm = NULL;

		if (!d->space && !d->inodes && !d->bsoft && !d->bhard && !d->isoft && !d->ihard)
			continue;
		if (type) {
			const struct group *g = getgrgid((gid_t)d->id);

			nm = g ? g->gr_name : NULL;
		} else {
			const struct passwd *p = getpwuid((uid_t)d->id);

			nm = p ? p->pw_name : NULL;
		}
		if (nm)
			snprintf(name, sizeof(name), "%.31s", nm);
		else
			snprintf(name, sizeof(name), "#%u", d->id);
		grace_left(d->btime, now, bl, sizeof(bl));
		grace_left(d->itime, now, il, sizeof(il));
		printf("%-20s %c%c  %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %7s %9" PRIu64
		       " %9" PRIu64 " %9" PRIu64 " %7s\n",
		       name, d->bsoft && d->space > d->bsoft ? '+' : '-',
		       d->isoft && d->inodes > d->isoft ? '+' : '-', (d->space + 1023) / 1024,
		       d->bsoft / 1024, d->bhard / 1024, bl, d->inodes, d->isoft, d->ihard, il);
	}
}

static int report(struct ctl *c, unsigned type)
{
	struct rows r = { 0 };
	uint32_t bgrace = 0, igrace = 0;
	int status, e;

	if (is_mountpoint(c->image)) {
		status = ctl_daemon_quota(c->image, type, &r.v, &r.n, &bgrace, &igrace);
		if (status)
			return status;
	} else {
		status = ctl_open(c);
		if (status)
			return status;
		e = o2_fs_quota_grace(c->fs, type, false, &bgrace, &igrace);
		if (e == 0)
			e = o2_fs_quota_iterate(c->fs, type, collect, &r);
		if (e < 0) {
			status = e == -EOPNOTSUPP
					 ? ctl_fail(c, "%s keeps no %s quotas (format it with usrquota, "
						 "grpquota or --fs-feature-level=max-features)",
						 c->image, type ? "group" : "user")
					 : ctl_fail(c, "%s: %s", c->image, ctl_strerror(c, e));
			ctl_close(c);
			free(r.v);
			return status;
		}
		ctl_close(c);
	}
	print_report(c->image, type, &r, bgrace, igrace, c->json);
	free(r.v);
	return ctl_finish_stdout(c, CTL_EXIT_OK);
}

/* ---- set, grace ---- */

static int set(struct ctl *c, unsigned type, const uint32_t *id, const struct o2_dquot *lim,
	       const uint32_t *grace)
{
	int status, e = 0;

	if (is_mountpoint(c->image))
		return ctl_daemon_set_quota(c->image, type, id, lim, grace);
	status = ctl_open_rw(c);
	if (status)
		return status;
	if (id)
		e = o2_fs_quota_set_limits(c->fs, type, *id, lim);
	if (e == 0 && grace) {
		uint32_t b = grace[0], i = grace[1];

		e = o2_fs_quota_grace(c->fs, type, true, &b, &i);
	}
	if (e < 0)
		status = e == -EOPNOTSUPP
				 ? ctl_fail(c, "%s keeps no %s quotas", c->image, type ? "group" : "user")
				 : ctl_fail(c, "%s: %s", c->image, ctl_strerror(c, e));
	return ctl_close_rw(c, status);
}

int ctl_quota_main(int argc, char **argv, bool json)
{
	struct ctl c = { .verb = "quota", .json = json };
	const char *pos[8];
	int npos = 0;
	unsigned type = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-u") || !strcmp(a, "--user"))
			type = 0;
		else if (!strcmp(a, "-g") || !strcmp(a, "--group"))
			type = 1;
		else if (!strcmp(a, "--json"))
			c.json = true;
		else if (!strcmp(a, "--help") || !strcmp(a, "-h"))
			return quota_help(stdout), CTL_EXIT_OK;
		else if (a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9'))
			return qusage("unknown option");
		else if (npos == (int)(sizeof(pos) / sizeof(pos[0])))
			return qusage("too many arguments");
		else
			pos[npos++] = a;
	}
	if (npos >= 1 && !strcmp(pos[0], "set")) {
		struct o2_dquot lim = { 0 };
		uint32_t id;

		if (npos != 7)
			return qusage("set takes IMAGE|MOUNTPOINT ID BSOFT BHARD ISOFT IHARD");
		c.image = pos[1];
		if (!parse_id(pos[2], type, &id))
			return qusage(type ? "ID is a group number or name" : "ID is a user number or name");
		if (!parse_size(pos[3], &lim.bsoft) || !parse_size(pos[4], &lim.bhard))
			return qusage("BSOFT and BHARD are sizes (KiB, or with K, M, G or T)");
		if (!parse_count(pos[5], &lim.isoft) || !parse_count(pos[6], &lim.ihard))
			return qusage("ISOFT and IHARD are numbers of inodes");
		if ((lim.bhard && lim.bsoft > lim.bhard) || (lim.ihard && lim.isoft > lim.ihard))
			return qusage("a soft limit is above its hard limit");
		return set(&c, type, &id, &lim, NULL);
	}
	if (npos >= 1 && !strcmp(pos[0], "grace")) {
		uint32_t g[2];

		if (npos != 4)
			return qusage("grace takes IMAGE|MOUNTPOINT BGRACE IGRACE");
		c.image = pos[1];
		if (!parse_grace(pos[2], &g[0]) || !parse_grace(pos[3], &g[1]))
			return qusage("BGRACE and IGRACE are seconds, or a number with s, m, h or d");
		return set(&c, type, NULL, NULL, g);
	}
	if (npos != 1)
		return qusage(npos ? "report takes one IMAGE or MOUNTPOINT" : "no IMAGE or MOUNTPOINT");
	c.image = pos[0];
	return report(&c, type);
}
