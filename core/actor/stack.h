/*
 * Stacks: the execution frame of one notice, ask or batch, and the rules
 * by which it resumes. A stack is a
 * state machine the actor's handler switches on; it suspends on futures of
 * the asks it made and is resumed by the house when they complete:
 *   - sh_suspend: when every pending future completed;
 *   - sh_suspend_any: when any one completed (a resumable state).
 * A future stays valid through the first invocation that runs after it
 * completed; that invocation's sh_suspend (or a move to another state)
 * recycles it. sh_suspend_any in the same state keeps completed futures
 * until the state changes. Returning recycles every future.
 */
#ifndef SH_STACK_H
#define SH_STACK_H

#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/stackhouse.h>

#include "base/list.h"

struct sh_house;

typedef enum sh_stack_kind {
  SH_STACK_NOTICE = 0,
  SH_STACK_ASK = 1,
  SH_STACK_BATCH_NOTICE = 2,
  SH_STACK_BATCH_ASK = 3,
  SH_STACK_CHANNEL = 4, /* a request from a channel: the class's channel handler */
} sh_stack_kind;

/* Where a stack reports how it ended, to the layer above that made it (a
 * channel's request stack, net/chanflow.c): set by its maker; the stack
 * code calls it and knows nothing else of it. */
typedef struct sh_stack_sink sh_stack_sink;
typedef struct sh_stack_sink_ops {
  /* The stack returned (reply, error 0) or threw (NULL, error): once.
   * Takes reply. */
  void (*result)(sh_stack_sink *s, sh_msg *reply, int error);
  /* The stack was freed: its last step, which may run other stacks. */
  void (*end)(sh_stack_sink *s);
} sh_stack_sink_ops;
struct sh_stack_sink {
  const sh_stack_sink_ops *ops;
};

/* One message of a batch, with what a reply needs captured when the
 * message was taken (the old design read them after recycling). */
typedef struct sh_batch_entry {
  sh_msg *msg;
  struct sh_house *reply_to;
  uint64_t ask_id;
  bool answered;
  int owed; /* a refusal its message carries when the stack finishes (stack.c) */
} sh_batch_entry;

struct sh_stack {
  sh_stack_kind kind;
  int state;
  int next_state;
  bool any;             /* suspended in a resumable state */
  bool barrier;         /* this stack holds its house's barrier */
  bool done;            /* returned or thrown */
  bool running;         /* inside a handler invocation */
  bool deferred;        /* ready again, waiting in its house's ready list */
  uint32_t epoch;       /* handler invocations so far */
  uint32_t fresh_done;  /* futures completed since this invocation began */
  uint32_t made;        /* futures made by this invocation */
  uint32_t failed_now;  /* of those, the ones that failed at once */
  uint32_t failing;     /* invocations in a row whose every future failed at once */
  struct sh_house *house;
  sh_list link;          /* the house's live stacks */
  sh_list ready_link;    /* the house's ready list, while deferred */

  sh_msg *msg;                 /* notice or ask (NULL for batches) */
  struct sh_house *reply_to;   /* ask: the asker, captured at dispatch */
  uint64_t ask_id;
  int owed; /* ask: a refusal its message carries when the stack finishes */
  sh_stack_sink *sink;         /* NULL, or where its end is reported (above) */

  sh_list pending;             /* uncompleted futures (sh_future.link) */
  sh_list completed;           /* completed futures, kept for the handler to read */
  uint32_t npending;           /* length of pending */

  sh_batch_entry *batch;       /* batch stacks: entries after the locals */
  uint32_t nbatch;
  _Alignas(16) unsigned char locals[];
};

/* A new stack for house h, or NULL (-ENOMEM). Batch stacks get room for
 * `batch_cap` entries. */
sh_stack *sh_stack_new(struct sh_house *h, sh_stack_kind kind, uint32_t batch_cap);
/* Runs the handler (first entry or resume) and handles the result: frees the
 * stack when it completed. A stack whose wait keeps being over at once (its
 * futures complete during the handler, e.g. puts with room) runs again at
 * once up to its house's max_per_run times, then is deferred: it waits in
 * the house's ready list for the next run (sh_stack_run_ready), so it cannot
 * hold its worker. One that keeps failing at once (every future it makes
 * fails during the handler: asks to a stopped actor in a loop) is failed
 * with -ELOOP after SH_STACK_MAX_FAILING invocations in a row. */
void sh_stack_run(sh_stack *st);
/* Runs up to `budget` deferred stacks of h, in the order deferred; how many
 * (at least one when any waits and budget > 0: dispatch.c checks both). */
uint32_t sh_stack_run_ready(struct sh_house *h, uint32_t budget);
/* One of st's futures completed: runs st if its wait is over (and it is
 * not running, done or deferred already). */
void sh_stack_wake(sh_stack *st);
/* A refusal that found no memory for an exception goes in the refused ask's
 * own message, which the stack no longer needs: called as it finishes
 * (stack.c). */
void sh_stack_pay_refusals(sh_stack *st);
/* Frees a stack that will never run again, answering nobody (the system is
 * being destroyed, or a batch is refused before it started: its caller
 * answers). */
void sh_stack_discard(sh_stack *st);

#endif
