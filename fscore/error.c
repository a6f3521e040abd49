/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Error reporting.  Kept apart from the open/close code so that the
 * lowest layers (block reads, the cache) can report without calling up
 * into the module that orchestrates them.
 */
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>

#include "error.h"
#include "internal.h"

/* The message is prefix then the formatted text, cut to the handle's buffer. */
static void vset(struct o2_fs *fs, const char *prefix, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
static void vset(struct o2_fs *fs, const char *prefix, const char *fmt, va_list ap)
{
	int n = snprintf(fs->err, sizeof(fs->err), "%s", prefix);

	if (n < 0 || (size_t)n >= sizeof(fs->err))
		return;
	vsnprintf(fs->err + n, sizeof(fs->err) - (size_t)n, fmt, ap);
}

int o2_corrupt(struct o2_fs *fs, uint64_t blkno, const char *fmt, ...)
{
	char prefix[48];
	va_list ap;

	snprintf(prefix, sizeof(prefix), "block %llu: ", (unsigned long long)blkno);
	va_start(ap, fmt);
	vset(fs, prefix, fmt, ap);
	va_end(ap);
	return -EUCLEAN;
}

int o2_fail(struct o2_fs *fs, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vset(fs, "", fmt, ap);
	va_end(ap);
	return err;
}

int o2_errbuf_set(char *errbuf, size_t errlen, int err, const char *fmt, ...)
{
	va_list ap;

	if (errbuf && errlen) {
		va_start(ap, fmt);
		vsnprintf(errbuf, errlen, fmt, ap);
		va_end(ap);
	}
	return err;
}

const char *o2_fs_error(const struct o2_fs *fs)
{
	return fs->err;
}

int o2_fs_abort(struct o2_fs *fs, int err, const char *what)
{
	/*
	 * Stopped for a cluster lock before anything changed: run again once
	 * it is held (inside a changed transaction o2_lock_need left a
	 * message, and o2_trans_finish turns the volume read-only itself).
	 */
	if (err == -O2_ENEEDLOCK)
		return err;
	if (!fs->ro_reason) {
		fs->ro_reason = err;
		o2_fail(fs, err, "%s failed (%s); the volume is now read-only", what, strerror(-err));
	}
	return err;
}
