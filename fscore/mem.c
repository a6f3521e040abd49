/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Counted heap allocations that a test plan can make fail (see mem.h). */
#include <errno.h>
#include <stdlib.h>

#include "mem.h"

/* Process-wide and unlocked on purpose: see mem.h. */
static uint64_t alloc_count;
static uint64_t alloc_fail_at = UINT64_MAX; /* the count that fails; MAX: none */
static uint64_t alloc_nfailed, alloc_nabsorbed;
static bool alloc_sticky;

/* The common path is the increment and the compare; the rest only runs under a plan. */
static bool alloc_fails(void)
{
	if (__builtin_expect(++alloc_count < alloc_fail_at, 1))
		return false;
	if (!alloc_sticky)
		alloc_fail_at = UINT64_MAX; /* one-shot: later allocations succeed */
	alloc_nfailed++;
	return true;
}

void *o2_malloc(size_t size)
{
	return alloc_fails() ? NULL : malloc(size);
}

void *o2_calloc(size_t nmemb, size_t size)
{
	return alloc_fails() ? NULL : calloc(nmemb, size);
}

void *o2_malloc_optional(size_t size)
{
	if (alloc_fails()) {
		alloc_nabsorbed++;
		return NULL;
	}
	return malloc(size);
}

void *o2_calloc_optional(size_t nmemb, size_t size)
{
	if (alloc_fails()) {
		alloc_nabsorbed++;
		return NULL;
	}
	return calloc(nmemb, size);
}

void *o2_realloc(void *ptr, size_t size)
{
	return alloc_fails() ? NULL : realloc(ptr, size);
}

int o2_memalign(void **ret, size_t align, size_t size)
{
	return alloc_fails() ? ENOMEM : posix_memalign(ret, align, size);
}

void o2_alloc_fail_plan(uint64_t nth, bool sticky)
{
	alloc_count = 0;
	alloc_nfailed = 0;
	alloc_nabsorbed = 0;
	alloc_fail_at = nth ? nth : UINT64_MAX;
	alloc_sticky = sticky;
}

uint64_t o2_alloc_count(void)
{
	return alloc_count;
}

uint64_t o2_alloc_failed(void)
{
	return alloc_nfailed - alloc_nabsorbed;
}

uint64_t o2_alloc_fired(void)
{
	return alloc_nfailed;
}
