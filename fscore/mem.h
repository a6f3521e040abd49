/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fscore's heap allocations go through these wrappers so that tests can
 * make any one of them fail: every caller must turn a NULL into -ENOMEM
 * and leave the handle closable without leaks, and the only way to know
 * that it does is to try each allocation in turn.
 *
 * The counter and the plan are process-wide plain globals, guarded by
 * nothing: fscore is single-threaded per volume, and only tests set a
 * plan (a program using several volumes from several threads must never
 * call o2_alloc_fail_plan).  Without a plan an allocation costs one
 * increment and one compare more than the libc call.
 *
 * The test devices (blockdev_crash.c, blockdev_fault.c) are instruments,
 * not the filesystem, and call libc directly so a plan never hits them.
 */
#ifndef O2_MEM_H
#define O2_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void *o2_malloc(size_t size);
void *o2_calloc(size_t nmemb, size_t size);
/*
 * An allocation whose failure the caller absorbs without a visible effect
 * (read-ahead): a plan can make it fail like any other, but such a failure
 * counts in o2_alloc_fired but not in o2_alloc_failed: no caller has an
 * error to return.
 */
void *o2_malloc_optional(size_t size);
void *o2_calloc_optional(size_t nmemb, size_t size);
/* As realloc: on failure ptr is left alone. */
void *o2_realloc(void *ptr, size_t size);
/* As posix_memalign: 0 or ENOMEM (positive), *ret untouched on failure. */
int o2_memalign(void **ret, size_t align, size_t size);

/*
 * Tests only.  Count allocations from now on, and make the nth of them
 * (1-based) return NULL; with sticky, every later one too.  nth 0 clears
 * the plan (allocations are still counted).
 */
void o2_alloc_fail_plan(uint64_t nth, bool sticky);
/* Allocations attempted since the last o2_alloc_fail_plan. */
uint64_t o2_alloc_count(void);
/* Allocations the plan made fail since it was set, optional ones excepted. */
uint64_t o2_alloc_failed(void);
/* The same, optional ones included: whether the plan was reached at all. */
uint64_t o2_alloc_fired(void);

#endif
