// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ocfs2ctl mount, umount and mounts: the runtime verbs, through ocfs2d.
 *
 *   mount [-o OPTS] [--foreground] DEVICE MOUNTPOINT
 *   umount [-f] MOUNTPOINT
 *   mounts
 *
 * They talk to a running ocfs2d over its control socket (see
 * daemon/control.c for the protocol).  mount starts a daemon when none is
 * running (one that exits after its last volume is unmounted); with
 * --foreground it runs ocfs2d for this one volume in the foreground
 * instead.  umount of a volume served by a foreground ocfs2d unmounts it
 * directly and waits until the daemon has closed the device.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "json.h"

#define CONTROL_DEFAULT "/run/ocfs2d/control"
#define REPLY_MAX 65536

static int fail(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(const char *verb, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ocfs2ctl: %s: ", verb);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CTL_EXIT_FAIL;
}

static int usage(const char *verb, const char *args)
{
	fprintf(stderr, "ocfs2ctl: %s: usage: ocfs2ctl %s %s\n", verb, verb, args);
	return CTL_EXIT_USAGE;
}

static const char *control_path(void)
{
	const char *p = getenv("OCFS2D_CONTROL");

	return p && *p ? p : CONTROL_DEFAULT;
}

/* Connect to the daemon: the socket fd, or -errno. */
static int connect_control(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = control_path();
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

/*
 * Send one request and read the whole answer into buf (NUL-terminated).
 * Returns 0, or -errno if the daemon could not be reached.
 */
static int request(int fd, const char *req, char *buf, size_t len)
{
	size_t got = 0, n = strlen(req);

	for (size_t off = 0; off < n;) {
		ssize_t w = write(fd, req + off, n - off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		off += (size_t)w;
	}
	shutdown(fd, SHUT_WR);
	while (got + 1 < len) {
		ssize_t r = read(fd, buf + got, len - 1 - got);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	buf[got] = '\0';
	return 0;
}

/*
 * The final status line of an answer: 0 for OK (*msg its message), or the
 * errno of ERR (*msg its message).  A malformed answer is -EPROTO.
 */
static int answer_status(char *buf, const char **msg)
{
	char *last = NULL;

	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
		last = line;
	*msg = "";
	if (!last)
		return -EPROTO;
	if (!strncmp(last, "OK\t", 3) || !strcmp(last, "OK")) {
		*msg = last[2] ? last + 3 : "";
		return 0;
	}
	if (!strncmp(last, "ERR\t", 4)) {
		char *end;
		long e = strtol(last + 4, &end, 10);

		if (*end == '\t' && e > 0) {
			*msg = end + 1;
			return (int)-e;
		}
	}
	return -EPROTO;
}

/* Where ocfs2d is: $OCFS2D, next to us (installed or in the build tree), or PATH. */
static char *find_daemon(void)
{
	const char *env = getenv("OCFS2D");
	char self[PATH_MAX], cand[PATH_MAX + 32];
	ssize_t n;

	if (env && *env)
		return strdup(env);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');

		if (slash) {
			*slash = '\0';
			const char *rel[] = { "/ocfs2d", "/../daemon/ocfs2d", "/../sbin/ocfs2d" };

			for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
				snprintf(cand, sizeof(cand), "%s%s", self, rel[i]);
				if (access(cand, X_OK) == 0)
					return strdup(cand);
			}
		}
	}
	return strdup("ocfs2d");
}

/*
 * Run ocfs2d with args (it detaches once ready); its exit status or -1.  Its
 * output goes to ocfs2d.log next to the control socket, not to ours: a
 * caller reading our output through a pipe must not wait on the daemon.
 */
static int run_daemon(char *const *args)
{
	char log[PATH_MAX];
	const char *ctl = control_path(), *slash = strrchr(ctl, '/');
	pid_t pid;
	int st;

	snprintf(log, sizeof(log), "%.*s/ocfs2d.log", slash ? (int)(slash - ctl) : 1,
		 slash ? ctl : ".");
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

		if (fd < 0 && slash && slash != ctl) {
			/* the socket's directory may not exist yet */
			char dir[PATH_MAX];

			snprintf(dir, sizeof(dir), "%.*s", (int)(slash - ctl), ctl);
			mkdir(dir, 0755);
			fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		}
		if (fd < 0)
			fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execvp(args[0], args);
		fprintf(stderr, "ocfs2ctl: cannot run %s: %s\n", args[0], strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool bad_field(const char *s)
{
	return strpbrk(s, "\t\n") != NULL;
}

/* The daemon's answer: its message, or a JSON object with the paths. */
static int print_result(bool json, const char *device, const char *mnt, const char *msg)
{
	if (json) {
		struct json_writer j;

		json_init(&j, stdout);
		json_object_begin(&j, NULL);
		if (device)
			json_string(&j, "device", device);
		json_string(&j, "mountpoint", mnt);
		json_string(&j, "message", msg);
		json_object_end(&j);
		json_finish(&j);
	} else {
		printf("%s\n", msg);
	}
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

static int do_mount(bool json, const char *opts, bool foreground, const char *device,
		    const char *mnt)
{
	char *buf, *daemon;
	const char *msg;
	int fd, r;

	if (bad_field(device) || bad_field(mnt) || bad_field(opts))
		return fail("mount", "tabs and newlines are not allowed in paths or options");
	daemon = find_daemon();
	if (foreground) {
		char *args[] = { daemon, "-f", "-o", (char *)opts, (char *)device, (char *)mnt, NULL };

		fflush(NULL);
		execvp(daemon, args);
		int e = errno;

		free(daemon);
		return fail("mount", "cannot run ocfs2d: %s", strerror(e));
	}
	fd = connect_control();
	if (fd == -ENOENT || fd == -ECONNREFUSED) {
		char *args[] = { daemon, "--server", "--exit-when-idle", NULL };
		int st = run_daemon(args);

		if (st != 0) {
			free(daemon);
			return fail("mount", "could not start ocfs2d (%s exited with %d; see ocfs2d.log "
				    "next to %s)", args[0], st, control_path());
		}
		fd = connect_control();
	}
	free(daemon);
	if (fd < 0)
		return fail("mount", "cannot reach ocfs2d at %s: %s", control_path(), strerror(-fd));
	size_t reqlen = strlen(device) + strlen(mnt) + strlen(opts) + 16;
	char *req = malloc(reqlen);

	buf = malloc(REPLY_MAX);
	if (!req || !buf) {
		free(req);
		free(buf);
		close(fd);
		return fail("mount", "%s", strerror(ENOMEM));
	}
	snprintf(req, reqlen, "MOUNT\t%s\t%s\t%s\n", device, mnt, opts);
	r = request(fd, req, buf, REPLY_MAX);
	close(fd);
	free(req);
	if (r == 0)
		r = answer_status(buf, &msg);
	else
		msg = strerror(-r);
	if (r < 0) {
		int st = fail("mount", "%s", msg[0] ? msg : strerror(-r));

		free(buf);
		return st;
	}
	int st = print_result(json, device, mnt, msg);

	free(buf);
	return st;
}

/* The mount source of a FUSE ocfs2 mount at mnt (from mountinfo), or NULL. */
static char *ocfs2_mount_source(const char *mnt)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192], *src = NULL;

	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		char path[4096], fstype[256], source[4096];
		char *sep = strstr(line, " - ");

		if (!sep || sscanf(line, "%*u %*u %*s %*s %4095s", path) != 1)
			continue;
		if (sscanf(sep + 3, "%255s %4095s", fstype, source) != 2)
			continue;
		if (!strcmp(path, mnt) && !strcmp(fstype, "fuse.ocfs2")) {
			free(src);
			src = strdup(source);
		}
	}
	fclose(f);
	return src;
}

/*
 * A volume served by a foreground ocfs2d: unmount it here, then wait (up to
 * a minute) for the daemon to close the device, which it holds flocked.
 */
static int umount_direct(const char *mnt, bool force)
{
	char *src = ocfs2_mount_source(mnt);

	if (!src)
		return fail("umount", "%s: no ocfs2d volume is mounted there", mnt);
	if (umount2(mnt, force ? MNT_DETACH : 0) < 0) {
		int e = errno;

		free(src);
		return fail("umount", "%s: %s%s", mnt, strerror(e),
			    e == EBUSY ? " (files are open or a process works in it; -f detaches)"
				       : "");
	}
	int fd = open(src, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		for (int i = 0; i < 600 && flock(fd, LOCK_EX | LOCK_NB) < 0; i++) {
			struct timespec ts = { 0, 100000000 };

			nanosleep(&ts, NULL);
		}
		close(fd);
	}
	printf("%s unmounted\n", src);
	free(src);
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

static int do_umount(bool json, bool force, const char *mnt_arg)
{
	char mnt[PATH_MAX], *buf;
	const char *msg;
	int fd, r;

	if (!realpath(mnt_arg, mnt))
		return fail("umount", "%s: %s", mnt_arg, strerror(errno));
	if (bad_field(mnt))
		return fail("umount", "tabs and newlines are not allowed in paths");
	fd = connect_control();
	if (fd < 0)
		return umount_direct(mnt, force);
	buf = malloc(REPLY_MAX);
	char req[PATH_MAX + 32];

	if (!buf) {
		close(fd);
		return fail("umount", "%s", strerror(ENOMEM));
	}
	snprintf(req, sizeof(req), "UMOUNT\t%s\t%d\n", mnt, force ? 1 : 0);
	r = request(fd, req, buf, REPLY_MAX);
	close(fd);
	if (r == 0)
		r = answer_status(buf, &msg);
	else
		msg = strerror(-r);
	if (r == -ENOENT) {
		free(buf);
		return umount_direct(mnt, force); /* not that daemon's: a foreground one */
	}
	if (r < 0) {
		int st = fail("umount", "%s", msg[0] ? msg : strerror(-r));

		free(buf);
		return st;
	}
	int st = print_result(json, NULL, mnt, msg);

	free(buf);
	return st;
}

static int do_mounts(bool json)
{
	char *buf = malloc(REPLY_MAX);
	int fd = connect_control(), r;
	struct json_writer j;

	if (!buf) {
		if (fd >= 0)
			close(fd);
		return fail("mounts", "%s", strerror(ENOMEM));
	}
	if (json) {
		json_init(&j, stdout);
		json_array_begin(&j, NULL);
	}
	if (fd >= 0) {
		r = request(fd, "LIST\n", buf, REPLY_MAX);
		close(fd);
		if (r < 0) {
			free(buf);
			return fail("mounts", "ocfs2d: %s", strerror(-r));
		}
		for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
			char *f[4] = { 0 };
			unsigned n = 0;

			for (char *p = line; n < 4; n++) {
				f[n] = p;
				p = strchr(p, '\t');
				if (!p) {
					n++;
					break;
				}
				*p++ = '\0';
			}
			if (n != 4 || strcmp(f[0], "VOL"))
				continue;
			if (json) {
				json_object_begin(&j, NULL);
				json_string(&j, "device", f[1]);
				json_string(&j, "mountpoint", f[2]);
				json_string(&j, "mode", f[3]);
				json_object_end(&j);
			} else {
				printf("%s on %s (%s)\n", f[1], f[2], f[3]);
			}
		}
	} else if (!json) {
		printf("ocfs2d is not running (no control socket at %s)\n", control_path());
	}
	if (json) {
		json_array_end(&j);
		json_finish(&j);
	}
	free(buf);
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

int ctl_daemon_reflink(const char *image, const char *src, const char *dst, uint64_t *ret_ino,
		       char *msg, size_t msglen)
{
	char *abs = realpath(image, NULL), *req = NULL, *buf = NULL;
	const char *m = "";
	int fd, r;

	msg[0] = '\0';
	if (!abs)
		return 1; /* the offline path reports it */
	fd = connect_control();
	if (fd < 0) {
		free(abs);
		return 1; /* no daemon: nothing of it is mounted */
	}
	buf = malloc(REPLY_MAX);
	if (!buf || asprintf(&req, "REFLINK\t%s\t%s\t%s\n", abs, src, dst) < 0) {
		r = -ENOMEM;
		req = NULL;
	} else if (strchr(src, '\t') || strchr(dst, '\t') || strchr(src, '\n') ||
		   strchr(dst, '\n')) {
		r = -EINVAL;
		m = "a path with a tab or a newline cannot be sent to ocfs2d";
	} else {
		r = request(fd, req, buf, REPLY_MAX);
		if (r == 0)
			r = answer_status(buf, &m);
	}
	close(fd);
	if (r == -ENXIO) {
		r = 1; /* the daemon does not serve this image */
	} else if (r == 0) {
		*ret_ino = strtoull(m, NULL, 10);
	} else {
		snprintf(msg, msglen, "%s", *m ? m : strerror(-r));
	}
	free(abs);
	free(req);
	free(buf);
	return r;
}

int ctl_mount_main(int argc, char **argv, bool json)
{
	const char *verb = argv[0];
	const char *opts = "";
	bool foreground = false, force = false;
	char *pos[3];
	int npos = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--json")) {
			json = true;
		} else if (!strcmp(a, "-o") && !strcmp(verb, "mount")) {
			if (++i >= argc)
				return usage(verb, "[-o OPTIONS] [--foreground] DEVICE MOUNTPOINT");
			opts = argv[i];
		} else if (!strncmp(a, "-o", 2) && a[2] && !strcmp(verb, "mount")) {
			opts = a + 2;
		} else if (!strcmp(a, "--foreground") && !strcmp(verb, "mount")) {
			foreground = true;
		} else if ((!strcmp(a, "-f") || !strcmp(a, "--force")) && !strcmp(verb, "umount")) {
			force = true;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "ocfs2ctl: %s: unknown option '%s' (try --help)\n", verb, a);
			return CTL_EXIT_USAGE;
		} else if (npos < 3) {
			pos[npos++] = argv[i];
		} else {
			npos++;
		}
	}
	if (!strcmp(verb, "mount")) {
		if (npos != 2)
			return usage(verb, "[-o OPTIONS] [--foreground] DEVICE MOUNTPOINT");
		if (geteuid() != 0)
			return fail(verb, "must be run as root");
		return do_mount(json, opts, foreground, pos[0], pos[1]);
	}
	if (!strcmp(verb, "umount")) {
		if (npos != 1)
			return usage(verb, "[-f] MOUNTPOINT");
		if (geteuid() != 0)
			return fail(verb, "must be run as root");
		return do_umount(json, force, pos[0]);
	}
	if (npos != 0)
		return usage(verb, "");
	return do_mounts(json);
}
