/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * faultshim: a test-only LD_PRELOAD module that makes one image file look
 * like a flaky disk to ocfs2d (device-mapper is not available here).
 *
 * It interposes the calls fscore's file block device makes (pread, pwrite,
 * fdatasync; the 64-bit and vector variants and fsync too, in case), and
 * for a file descriptor open on the image counts each call by kind:
 * read, write, flush.  Which descriptor is the image's is decided by
 * fstat on each call (st_dev/st_ino against the image's, taken once):
 * descriptor numbers are reused, the inode is not.
 *
 * It also makes fscore's Nth heap allocation fail (kind alloc): fscore
 * counts its allocations itself (fscore/mem.h), and ocfs2d exports the
 * four functions of that plan (daemon/test-symbols.list) so that this
 * module, loaded first, can set the plan before main runs.
 *
 * Environment (all read once, at the first call):
 *   OCFS2D_FAULT_DEV=PATH      the image; without it no I/O is counted
 *   OCFS2D_FAULT=KIND:N[:sticky][:short]
 *                              KIND is read, write or flush; the Nth call of
 *                              that kind (from 1) fails with EIO.  sticky:
 *                              every later one of that kind fails too.
 *                              short (writes): the failing write first
 *                              stores its first half (whole 512-byte
 *                              sectors), as a disk that dies mid-request.
 *                              KIND alloc: fscore's Nth allocation from
 *                              process start returns NULL (sticky as above).
 *   OCFS2D_FAULT_COUNT=PATH    at exit, write "read R\nwrite W\nflush F\n",
 *                              "alloc A\n" (fscore's allocations),
 *                              "fired K\n" (faults injected) and, for alloc,
 *                              "alloc_failed F\n" (those a caller saw: an
 *                              optional allocation's failure is absorbed)
 *   OCFS2D_FAULT_FIRED=PATH    created when the first I/O fault is injected
 *                              (the test learns when it happened; an
 *                              allocation's failure is seen by fscore alone,
 *                              so for alloc only "fired" at exit tells)
 *
 * Thread-safe: the counters are atomics; the set-up runs once.
 */
/* define pread and pread64 both, not pread twice (the build sets 64-bit offsets) */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum kind { K_READ, K_WRITE, K_FLUSH, K_ALLOC, K_NONE };

static const char *const kind_names[] = { "read", "write", "flush", "alloc" };

/* fscore's allocation plan (fscore/mem.h), found in ocfs2d at run time */
static struct {
	void (*plan)(uint64_t nth, bool sticky);
	uint64_t (*count)(void);
	uint64_t (*failed)(void);
	uint64_t (*fired)(void);
} o2mem;

static struct {
	bool active;	   /* the image was found */
	dev_t dev;
	ino_t ino;
	enum kind fault_kind;
	unsigned long fault_n;
	bool sticky, short_write;
	const char *count_path, *fired_path;
} cfg = { .fault_kind = K_NONE };

static unsigned long counts[3];
static unsigned long fired;
static pthread_once_t once = PTHREAD_ONCE_INIT;

typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*preadv_fn)(int, const struct iovec *, int, off_t);
typedef int (*sync_fn)(int);

static pread_fn real_pread, real_pread64;
static pwrite_fn real_pwrite, real_pwrite64;
static preadv_fn real_preadv, real_preadv64, real_pwritev, real_pwritev64;
static sync_fn real_fsync, real_fdatasync;

static void *next(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

static void parse_fault(const char *s)
{
	char buf[128], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", s);
	tok = strtok_r(buf, ":", &save);
	if (!tok)
		return;
	for (int k = 0; k < K_NONE; k++)
		if (!strcmp(tok, kind_names[k]))
			cfg.fault_kind = (enum kind)k;
	if (cfg.fault_kind == K_NONE) {
		fprintf(stderr, "faultshim: unknown fault kind in OCFS2D_FAULT=%s\n", s);
		abort();
	}
	tok = strtok_r(NULL, ":", &save);
	cfg.fault_n = tok ? strtoul(tok, NULL, 10) : 0;
	if (!cfg.fault_n) {
		fprintf(stderr, "faultshim: OCFS2D_FAULT=%s needs a count from 1\n", s);
		abort();
	}
	while ((tok = strtok_r(NULL, ":", &save))) {
		if (!strcmp(tok, "sticky"))
			cfg.sticky = true;
		else if (!strcmp(tok, "short"))
			cfg.short_write = true;
		else {
			fprintf(stderr, "faultshim: unknown flag %s in OCFS2D_FAULT\n", tok);
			abort();
		}
	}
}

static void setup(void)
{
	const char *dev = getenv("OCFS2D_FAULT_DEV"), *fault = getenv("OCFS2D_FAULT");
	struct stat st;

	real_pread = (pread_fn)next("pread");
	real_pread64 = (pread_fn)next("pread64");
	real_pwrite = (pwrite_fn)next("pwrite");
	real_pwrite64 = (pwrite_fn)next("pwrite64");
	real_preadv = (preadv_fn)next("preadv");
	real_preadv64 = (preadv_fn)next("preadv64");
	real_pwritev = (preadv_fn)next("pwritev");
	real_pwritev64 = (preadv_fn)next("pwritev64");
	real_fsync = (sync_fn)next("fsync");
	real_fdatasync = (sync_fn)next("fdatasync");
	cfg.count_path = getenv("OCFS2D_FAULT_COUNT");
	cfg.fired_path = getenv("OCFS2D_FAULT_FIRED");
	if (fault && *fault)
		parse_fault(fault);
	o2mem.plan = (void (*)(uint64_t, bool))dlsym(RTLD_DEFAULT, "o2_alloc_fail_plan");
	o2mem.count = (uint64_t (*)(void))dlsym(RTLD_DEFAULT, "o2_alloc_count");
	o2mem.failed = (uint64_t (*)(void))dlsym(RTLD_DEFAULT, "o2_alloc_failed");
	o2mem.fired = (uint64_t (*)(void))dlsym(RTLD_DEFAULT, "o2_alloc_fired");
	if (cfg.fault_kind == K_ALLOC) {
		if (!o2mem.plan || !o2mem.count || !o2mem.failed || !o2mem.fired) {
			fprintf(stderr, "faultshim: OCFS2D_FAULT=%s: this program does not export "
				"fscore's allocation plan (o2_alloc_fail_plan)\n", fault);
			abort();
		}
		o2mem.plan(cfg.fault_n, cfg.sticky);
	}
	if (dev && stat(dev, &st) == 0) {
		cfg.dev = st.st_dev;
		cfg.ino = st.st_ino;
		cfg.active = true;
	} else if (dev) {
		fprintf(stderr, "faultshim: cannot stat OCFS2D_FAULT_DEV=%s: %s\n", dev, strerror(errno));
	}
}

static bool is_image(int fd)
{
	struct stat st;
	int saved = errno;
	bool yes;

	pthread_once(&once, setup);
	if (!cfg.active)
		return false;
	yes = fstat(fd, &st) == 0 && st.st_dev == cfg.dev && st.st_ino == cfg.ino;
	errno = saved;
	return yes;
}

static void note_fired(enum kind k, unsigned long n)
{
	if (__atomic_fetch_add(&fired, 1, __ATOMIC_SEQ_CST) == 0 && cfg.fired_path) {
		int fd = open(cfg.fired_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd >= 0) {
			char line[64];
			int len = snprintf(line, sizeof(line), "%s %lu\n", kind_names[k], n);

			if (write(fd, line, (size_t)len) < 0)
				(void)0; /* the test then sees an empty file: fired all the same */
			close(fd);
		}
	}
	fprintf(stderr, "faultshim: %s #%lu fails with EIO%s\n", kind_names[k], n,
		k == K_WRITE && cfg.short_write ? " (half of it written)" : "");
}

/* Count one call of kind k on the image: true if it must fail. */
static bool count(enum kind k, unsigned long *nth)
{
	unsigned long n = __atomic_add_fetch(&counts[k], 1, __ATOMIC_SEQ_CST);

	*nth = n;
	if (k != cfg.fault_kind)
		return false;
	return n == cfg.fault_n || (cfg.sticky && n > cfg.fault_n);
}

static ssize_t fail(void)
{
	errno = EIO;
	return -1;
}

ssize_t pread(int fd, void *buf, size_t len, off_t off)
{
	unsigned long n;

	pthread_once(&once, setup);
	if (is_image(fd) && count(K_READ, &n)) {
		note_fired(K_READ, n);
		return fail();
	}
	return real_pread(fd, buf, len, off);
}

ssize_t pread64(int fd, void *buf, size_t len, off64_t off)
{
	unsigned long n;

	pthread_once(&once, setup);
	if (is_image(fd) && count(K_READ, &n)) {
		note_fired(K_READ, n);
		return fail();
	}
	return real_pread64(fd, buf, len, off);
}

/* The failing write: nothing stored, or (short) its first half. */
static ssize_t failed_write(pwrite_fn fn, int fd, const void *buf, size_t len, off_t off,
			    unsigned long n)
{
	note_fired(K_WRITE, n);
	if (cfg.short_write) {
		size_t half = len / 2 / 512 * 512;

		if (half)
			(void)fn(fd, buf, half, off);
	}
	return fail();
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	unsigned long n;

	pthread_once(&once, setup);
	if (is_image(fd) && count(K_WRITE, &n))
		return failed_write(real_pwrite, fd, buf, len, off, n);
	return real_pwrite(fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off64_t off)
{
	unsigned long n;

	pthread_once(&once, setup);
	if (is_image(fd) && count(K_WRITE, &n))
		return failed_write(real_pwrite64, fd, buf, len, off, n);
	return real_pwrite64(fd, buf, len, off);
}

/* The vector forms: counted, failed whole (fscore does not use them today). */
ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	unsigned long n;

	pthread_once(&once, setup);
	if (is_image(fd) && count(K_READ, &n)) {
		note_fired(K_READ, n);
		return fail();
	}
	return real_preadv(fd, iov, cnt, off);
}

ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
	unsigned long n;

	pthread_once(&once, setup);
	if (is_image(fd) && count(K_READ, &n)) {
		note_fired(K_READ, n);
		return fail();
	}
	return real_preadv64(fd, iov, cnt, off);
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	unsigned long n;

	pthread_once(&once, setup);
	if (is_image(fd) && count(K_WRITE, &n)) {
		note_fired(K_WRITE, n);
		return fail();
	}
	return real_pwritev(fd, iov, cnt, off);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
	unsigned long n;

	pthread_once(&once, setup);
	if (is_image(fd) && count(K_WRITE, &n)) {
		note_fired(K_WRITE, n);
		return fail();
	}
	return real_pwritev64(fd, iov, cnt, off);
}

int fsync(int fd)
{
	unsigned long n;

	pthread_once(&once, setup);
	if (is_image(fd) && count(K_FLUSH, &n)) {
		note_fired(K_FLUSH, n);
		return (int)fail();
	}
	return real_fsync(fd);
}

int fdatasync(int fd)
{
	unsigned long n;

	pthread_once(&once, setup);
	if (is_image(fd) && count(K_FLUSH, &n)) {
		note_fired(K_FLUSH, n);
		return (int)fail();
	}
	return real_fdatasync(fd);
}

/* An allocation plan must be in place before the program's first allocation. */
__attribute__((constructor)) static void early_setup(void)
{
	pthread_once(&once, setup);
}

__attribute__((destructor)) static void report(void)
{
	FILE *f;

	pthread_once(&once, setup);
	if (!cfg.count_path)
		return;
	f = fopen(cfg.count_path, "w");
	if (!f)
		return;
	for (int k = 0; k < 3; k++)
		fprintf(f, "%s %lu\n", kind_names[k], __atomic_load_n(&counts[k], __ATOMIC_SEQ_CST));
	if (o2mem.count)
		fprintf(f, "alloc %llu\n", (unsigned long long)o2mem.count());
	if (cfg.fault_kind == K_ALLOC)	/* failures a caller saw (not read-ahead's) */
		fprintf(f, "alloc_failed %llu\n", (unsigned long long)o2mem.failed());
	fprintf(f, "fired %llu\n", cfg.fault_kind == K_ALLOC
		? (unsigned long long)o2mem.fired()
		: (unsigned long long)__atomic_load_n(&fired, __ATOMIC_SEQ_CST));
	fclose(f);
}
