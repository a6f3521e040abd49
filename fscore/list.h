/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A circular doubly linked list with a sentinel head, embedded in its items. */
#ifndef O2_LIST_H
#define O2_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct o2_list {
	struct o2_list *prev, *next;
};

static inline void o2_list_init(struct o2_list *h)
{
	h->prev = h->next = h;
}

static inline bool o2_list_empty(const struct o2_list *h)
{
	return h->next == h;
}

/* Whether an item initialised with o2_list_init is on some list. */
static inline bool o2_list_linked(const struct o2_list *n)
{
	return n->next != n;
}

static inline void o2_list_add_tail(struct o2_list *h, struct o2_list *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static inline void o2_list_del(struct o2_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	o2_list_init(n);
}

#define o2_container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

#define o2_list_for_each_safe(pos, tmp, head)                                                     \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head);                          \
	     (pos) = (tmp), (tmp) = (pos)->next)

#endif
