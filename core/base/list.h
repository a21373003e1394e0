/*
 * An intrusive, circular, doubly linked list with a sentinel head: the one
 * list the core uses (a stack's futures, a house's live stacks and actor
 * timers, a gate's waiters, the timer wheel's slots). A node is embedded in
 * the object it links; SH_LIST_ENTRY gets the object back. Every operation
 * is O(1) and allocates nothing. A node that is in no list has NULL links
 * (zeroed memory is an unlinked node), which sh_list_linked tests.
 */
#ifndef SH_LIST_H
#define SH_LIST_H

#include <stdbool.h>
#include <stddef.h>

#include "base/check.h"

typedef struct sh_list {
  struct sh_list *prev, *next;
} sh_list;

/* The object of type T whose member `member` is the node `node`. */
#define SH_LIST_ENTRY(node, T, member) ((T *)(void *)((char *)(node) - offsetof(T, member)))

static inline void sh_list_init(sh_list *head) { head->prev = head->next = head; }
static inline bool sh_list_empty(const sh_list *head) { return head->next == head; }
static inline bool sh_list_linked(const sh_list *node) { return node->next != NULL; }

/* The first node after head, or NULL when the list is empty. */
static inline sh_list *sh_list_first(const sh_list *head) {
  return sh_list_empty(head) ? NULL : head->next;
}

/* The node after `node` in the list of `head`, or NULL at the end. */
static inline sh_list *sh_list_next(const sh_list *head, const sh_list *node) {
  return node->next == head ? NULL : node->next;
}

static inline void sh_list_insert_before(sh_list *at, sh_list *node) {
  SH_ASSERT(!sh_list_linked(node));
  node->prev = at->prev;
  node->next = at;
  at->prev->next = node;
  at->prev = node;
}

static inline void sh_list_push_back(sh_list *head, sh_list *node) {
  sh_list_insert_before(head, node);
}

static inline void sh_list_push_front(sh_list *head, sh_list *node) {
  sh_list_insert_before(head->next, node);
}

/* Unlinks node from whatever list holds it: no head is needed. */
static inline void sh_list_remove(sh_list *node) {
  SH_ASSERT(sh_list_linked(node));
  node->prev->next = node->next;
  node->next->prev = node->prev;
  node->prev = node->next = NULL;
}

/* Removes and returns the first node, or NULL when the list is empty. */
static inline sh_list *sh_list_pop_front(sh_list *head) {
  sh_list *n = sh_list_first(head);
  if (n != NULL) sh_list_remove(n);
  return n;
}

#endif
