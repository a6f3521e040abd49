/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The environment of test programs that run the real ocfs2-tools.
 */
#ifndef OCFS2D_TESTS_TESTENV_H
#define OCFS2D_TESTS_TESTENV_H

#include <stdlib.h>

/* Where tests put scratch files: $TMPDIR when set (scripts/test.sh points it
 * at a tmpfs of its own), else /tmp. */
static inline const char *test_tmpdir(void)
{
	const char *t = getenv("TMPDIR");
	return t && *t ? t : "/tmp";
}

/*
 * Call first in main().  meson test sets MALLOC_PERTURB_, and glibc has
 * taken it for this process by now (our code keeps the poisoned heap); the
 * tools we start must not inherit it: it makes fsck.ocfs2 ten times slower
 * (1 s -> 12 s on a model volume), which set the pace of whole suites.
 */
static inline void test_env_init(void)
{
	unsetenv("MALLOC_PERTURB_");
}

#endif
