/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Where tests put their scratch files: $TMPDIR when set (scripts/test.sh
 * points it at a tmpfs of its own), else /tmp.
 */
#ifndef OCFS2D_TESTS_TESTTMP_H
#define OCFS2D_TESTS_TESTTMP_H

#include <stdlib.h>

static inline const char *test_tmpdir(void)
{
	const char *t = getenv("TMPDIR");
	return t && *t ? t : "/tmp";
}

#endif
