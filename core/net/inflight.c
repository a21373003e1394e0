/*
 * A channel's inflight queues (contract in inflight.h).
 *
 * Every operation is O(1) except two scans of the inflight list, both
 * bounded by ninflight, itself at most max_inflight (a channel's small
 * configured window): matching a response by id (ids are the peer's, in no
 * order the queue could index without allocating), and releasing without
 * head-of-line ordering (the oldest finished item, wherever it sits).
 *
 * An item's `where` says which list holds it, so removal needs no search and
 * misuse (adding an item twice, finishing one that is not inflight) is
 * caught by a compare. Finished stacks stay inflight until released: a
 * result still held counts against max_inflight and keeps a barrier waiting.
 */
#include "net/inflight.h"

#include "base/check.h"
#include "base/model.h"

static sh_ifl_item *item_of(sh_list *node) {
  return node == NULL ? NULL : SH_LIST_ENTRY(node, sh_ifl_item, link);
}

#ifdef SH_DEBUG
/* Whether `it` is on `head`: the costlier check that an item given to this
 * queue belongs to it, not to another direction's or channel's. */
static bool on_list(const sh_list *head, const sh_ifl_item *it) {
  for (const sh_list *n = sh_list_first(head); n != NULL; n = sh_list_next(head, n))
    if (n == &it->link) return true;
  return false;
}

static bool in_queue(const sh_ifl_queue *q, const sh_ifl_item *it) {
  return on_list(it->where == SH_IFL_PENDING ? &q->pending : &q->inflight, it);
}
#endif

/* Unlinks it from its list and takes it off that list's counts. */
static void take(sh_ifl_queue *q, sh_ifl_item *it) {
  SH_ASSERT(it->where == SH_IFL_PENDING || it->where == SH_IFL_INFLIGHT);
  SH_DEBUG_ASSERT(in_queue(q, it));
  sh_list_remove(&it->link);
  if (it->where == SH_IFL_PENDING) {
    SH_ASSERT(q->npending > 0);
    q->npending--;
  } else {
    SH_ASSERT(q->ninflight > 0);
    q->ninflight--;
    if (it->barrier) q->barriers_inflight--;
  }
  it->where = SH_IFL_NONE;
}

static sh_ifl_item *take_or_null(sh_ifl_queue *q, sh_ifl_item *it) {
  if (it != NULL) take(q, it);
  return it;
}

void sh_ifl_init(sh_ifl_queue *q, uint32_t max_inflight, bool head_of_line) {
  SH_ASSERT(max_inflight >= 1);
  sh_list_init(&q->pending);
  sh_list_init(&q->inflight);
  q->npending = q->ninflight = 0;
  q->max_inflight = max_inflight;
  q->barriers_inflight = 0;
  q->head_of_line = head_of_line;
  q->next_seq = 0;
  SH_MODEL_NOTE(SH_MODEL_IFL_INIT, q, max_inflight, head_of_line);
}

void sh_ifl_add(sh_ifl_queue *q, sh_ifl_item *it, bool barrier) {
  SH_ASSERT(it->where == SH_IFL_NONE && !sh_list_linked(&it->link));
  it->seq = q->next_seq++;
  it->barrier = barrier;
  it->done = false;
  it->where = SH_IFL_PENDING;
  sh_list_push_back(&q->pending, &it->link);
  q->npending++;
  SH_MODEL_NOTE(SH_MODEL_IFL_ADD, q, it->seq, barrier);
}

/* The rules of inflight.h for the pending head `it`. */
static bool may_start(const sh_ifl_queue *q, const sh_ifl_item *it) {
  if (q->ninflight >= q->max_inflight || q->barriers_inflight > 0) return false;
  return !it->barrier || q->ninflight == 0;
}

sh_ifl_item *sh_ifl_start(sh_ifl_queue *q) {
  sh_ifl_item *it = item_of(sh_list_first(&q->pending));
  if (it == NULL || !may_start(q, it)) return NULL;
  take(q, it);
  it->where = SH_IFL_INFLIGHT;
  sh_list_push_back(&q->inflight, &it->link);
  q->ninflight++;
  SH_ASSERT(q->ninflight <= q->max_inflight); /* inflight.h; may_start keeps it */
  if (it->barrier) q->barriers_inflight++;
  SH_MODEL_NOTE(SH_MODEL_IFL_START, q, it->seq, 0);
  return it;
}

/* The oldest inflight item with that id: a scan bounded by ninflight. */
static sh_ifl_item *find_id(const sh_ifl_queue *q, uint64_t id) {
  uint32_t k = 0;
  for (sh_list *n = sh_list_first(&q->inflight); n != NULL; n = sh_list_next(&q->inflight, n)) {
    SH_ASSERT(k++ < q->ninflight);
    if (item_of(n)->id == id) return item_of(n);
  }
  return NULL;
}

sh_ifl_item *sh_ifl_match(sh_ifl_queue *q, bool by_id, uint64_t id) {
  sh_ifl_item *it = by_id ? find_id(q, id) : item_of(sh_list_first(&q->inflight));
  if (it != NULL) SH_MODEL_NOTE(SH_MODEL_IFL_MATCH, q, it->seq, by_id);
  return take_or_null(q, it);
}

void sh_ifl_finish(sh_ifl_queue *q, sh_ifl_item *it) {
  SH_ASSERT(it->where == SH_IFL_INFLIGHT && !it->done);
  SH_DEBUG_ASSERT(in_queue(q, it));
  (void)q; /* only the test builds' check and the model read it */
  it->done = true;
  SH_MODEL_NOTE(SH_MODEL_IFL_FINISH, q, it->seq, 0);
}

/* The oldest finished inflight item: a scan bounded by ninflight. */
static sh_ifl_item *oldest_done(const sh_ifl_queue *q) {
  uint32_t k = 0;
  for (sh_list *n = sh_list_first(&q->inflight); n != NULL; n = sh_list_next(&q->inflight, n)) {
    SH_ASSERT(k++ < q->ninflight);
    if (item_of(n)->done) return item_of(n);
  }
  return NULL;
}

sh_ifl_item *sh_ifl_release(sh_ifl_queue *q) {
  sh_ifl_item *it;
  if (q->head_of_line) {
    it = item_of(sh_list_first(&q->inflight));
    if (it != NULL && !it->done) it = NULL;
  } else {
    it = oldest_done(q);
  }
  if (it != NULL) SH_MODEL_NOTE(SH_MODEL_IFL_RELEASE, q, it->seq, 0);
  return take_or_null(q, it);
}

void sh_ifl_remove(sh_ifl_queue *q, sh_ifl_item *it) {
  SH_MODEL_NOTE(SH_MODEL_IFL_GONE, q, it->seq, 0);
  take(q, it);
}

sh_ifl_item *sh_ifl_pop_any(sh_ifl_queue *q) {
  sh_ifl_item *it = item_of(sh_list_first(&q->pending));
  if (it == NULL) it = item_of(sh_list_first(&q->inflight));
  if (it != NULL) SH_MODEL_NOTE(SH_MODEL_IFL_GONE, q, it->seq, 0);
  return take_or_null(q, it);
}
