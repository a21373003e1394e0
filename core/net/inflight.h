/*
 * A channel's inflight queues (net.h): for each direction a pending FIFO and
 * an inflight list, with the rules that say when a pending item starts:
 *   - at most max_inflight items are inflight;
 *   - a barrier item starts only when nothing is inflight, and while it is
 *     inflight nothing else starts;
 *   - items start in the order they were added (a pending head that may not
 *     start holds back those behind it).
 * Futures (actor -> network requests) finish when their response is matched:
 * the oldest inflight (FIFO) or the inflight one with the response's id.
 * Stacks (network -> actor requests) finish when their handler completes;
 * with head-of-line ordering a finished stack's result is released only once
 * every stack that arrived before it released its own.
 * Pure and single-threaded: the channel's actor owns it. Items are embedded
 * in the channel's records; this module never allocates.
 */
#ifndef SH_INFLIGHT_H
#define SH_INFLIGHT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/list.h"

typedef enum sh_ifl_where { SH_IFL_NONE = 0, SH_IFL_PENDING, SH_IFL_INFLIGHT } sh_ifl_where;

typedef struct sh_ifl_item {
  sh_list link;       /* in pending or inflight */
  uint64_t seq;       /* order of sh_ifl_add */
  uint64_t id;        /* for matching by id (set by the caller) */
  bool barrier;
  bool done;          /* stacks: finished, its result held for its turn */
  sh_ifl_where where;
} sh_ifl_item;

typedef struct sh_ifl_queue {
  sh_list pending, inflight; /* both in sh_ifl_add order */
  uint32_t npending, ninflight;
  uint32_t max_inflight;     /* >= 1 */
  uint32_t barriers_inflight;
  bool head_of_line;         /* stacks: release results in arrival order */
  uint64_t next_seq;
} sh_ifl_queue;

void sh_ifl_init(sh_ifl_queue *q, uint32_t max_inflight, bool head_of_line);
/* Appends it to pending. */
void sh_ifl_add(sh_ifl_queue *q, sh_ifl_item *it, bool barrier);
/* The pending head, moved to inflight, if the rules let it start now;
 * else NULL. Call until NULL after every add and every finish. */
sh_ifl_item *sh_ifl_start(sh_ifl_queue *q);
/* Futures: the inflight item a response answers (the oldest, or by_id: the
 * one with that id), removed from inflight; NULL when none. */
sh_ifl_item *sh_ifl_match(sh_ifl_queue *q, bool by_id, uint64_t id);
/* Stacks: inflight item `it` finished (done = true). */
void sh_ifl_finish(sh_ifl_queue *q, sh_ifl_item *it);
/* Stacks: the next finished item whose result may be released now
 * (head_of_line: the oldest inflight, if it finished; else any finished
 * one, oldest first), removed from inflight; NULL when none. */
sh_ifl_item *sh_ifl_release(sh_ifl_queue *q);
/* Removes it from wherever it is (its own pending or inflight list). */
void sh_ifl_remove(sh_ifl_queue *q, sh_ifl_item *it);
/* For closing: the next item of any kind (pending first, then inflight),
 * removed; NULL when the queue is empty. */
sh_ifl_item *sh_ifl_pop_any(sh_ifl_queue *q);

#endif
