/*
 * Promises and the per-actor future dispatcher. A promise is its own future
 * (what sh_ask returns) and its own hash node: the table chains through the
 * promise, so tracking an ask allocates nothing besides the pooled promise.
 * The table maps ask id -> promise, keeps an exact count (it feeds the
 * "no pending promise" priority rule), grows at load factor 2 and shrinks
 * when mostly empty.
 */
#ifndef SH_PROMISE_H
#define SH_PROMISE_H

#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

struct sh_timer;
struct sh_waiter;

struct sh_future {
  sh_future *hnext;           /* dispatcher chain */
  sh_future *prev, *next;     /* the stack's pending or completed list */
  sh_stack *stack;
  uint64_t id;                /* ask id: the dispatcher key */
  sh_msg *reply;              /* owned until taken */
  struct sh_timer *timer;     /* ask timeout, NULL when none or gone */
  struct sh_waiter *waiter;   /* queued at a full mailbox's gate, NULL when not */
  uint32_t epoch;             /* the stack invocation that made it */
  int32_t error;
  bool done;
  bool put;                   /* sh_put's: done once the notice is in the mailbox */
  bool returning;             /* its waiter was popped: the waiter's return decides */
  bool kept;                  /* its house stopped; kept for that return (house.c) */
};

typedef struct sh_dispatcher {
  sh_future **buckets;
  uint32_t mask;      /* buckets - 1, a power of two minus one */
  uint32_t count;     /* promises in the table: exact */
  uint32_t initial;   /* the capacity it starts with and never shrinks below */
} sh_dispatcher;

#define SH_DISPATCHER_INITIAL 8
#define SH_DISPATCHER_LOAD 2

int sh_dispatcher_init(sh_dispatcher *d, uint32_t initial);
void sh_dispatcher_destroy(sh_dispatcher *d);
/* Adds f (keyed by f->id, unique among pending promises). Growing may fail
 * to allocate: the table then stays as it is (longer chains), never loses f. */
void sh_dispatcher_push(sh_dispatcher *d, sh_future *f);
/* The promise for id, left in the table; NULL when unknown. */
sh_future *sh_dispatcher_find(const sh_dispatcher *d, uint64_t id);
/* Removes and returns the promise for id; NULL when unknown. */
sh_future *sh_dispatcher_pop(sh_dispatcher *d, uint64_t id);
/* Removes and returns some promise not marked `kept`, the lowest bucket
 * first (deterministic: ids are per-actor counters, never addresses). NULL
 * when there is none. */
sh_future *sh_dispatcher_pop_any(sh_dispatcher *d);
static inline uint32_t sh_dispatcher_count(const sh_dispatcher *d) { return d->count; }
static inline uint32_t sh_dispatcher_capacity(const sh_dispatcher *d) { return d->mask + 1; }

#endif
