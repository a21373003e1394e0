/*
 * Hierarchical timer wheel (contract in wheel.h).
 *
 * Placement. Ticks are read as base-64 digits, one per level. An entry sits
 * at the lowest level L at which its expiry tick agrees with now_tick on
 * every digit above L; since it is later than now, its digit L is then
 * strictly ahead of now's, so every occupied slot lies ahead of the current
 * position at its level and its entries share one "boundary": the tick at
 * which now reaches that digit with zeros below. At a boundary the slot is
 * re-placed relative to the new now, which moves each entry strictly lower,
 * down to the due list once its tick has come. Entries that disagree with
 * now above the top level wait in the overflow list, which is re-placed at
 * the multiple of 64^4 ticks that starts the window of its earliest entry:
 * a lower bound on that expiry is kept on add and recomputed whenever the
 * list is re-placed (a removal only leaves it lower, which costs a stop).
 * Windows with nothing in them are skipped like empty slots.
 *
 * The due list holds entries whose tick is not after now_tick: those added
 * with a past expiry and those a `max` limit left unfired. Both therefore
 * fire at the very next advance, ahead of anything still in the slots.
 *
 * Skipping. Because occupied slots are always ahead, the next tick with any
 * work is the boundary of the first occupied slot found scanning level 0
 * upwards (every boundary of level L comes before the next one of level
 * L + 1). advance jumps straight there, so a jump of hours costs a scan of
 * slot heads per occupied slot, not a step per tick. next_ns uses the same
 * scan: a boundary is never after the expiries of the entries it holds.
 *
 * The lists are the core's (list.h); an unlinked entry has NULL links,
 * which is what sh_wheel_linked tests and what add and remove assert on.
 */
#include "time/wheel.h"

#include "base/check.h"

#define DIGIT_BITS 6u
#define DIGIT_MASK ((uint64_t)SH_WHEEL_SLOTS - 1u)
_Static_assert(SH_WHEEL_SLOTS == 1u << DIGIT_BITS, "slot index is one base-64 digit");

static sh_wheel_link *entry_of(sh_list *node) { return SH_LIST_ENTRY(node, sh_wheel_link, node); }

static unsigned level_shift(unsigned level) { return DIGIT_BITS * level; }

/* Level SH_WHEEL_LEVELS stands for the overflow list. */
static uint64_t span_mask(unsigned level) { return (1ull << level_shift(level)) - 1u; }

static uint64_t digit(uint64_t tick, unsigned level) {
  return (tick >> level_shift(level)) & DIGIT_MASK;
}

/* Rounds up so that an entry never fires before its expiry; written without
 * expire_ns + TICK - 1 so that expiries near UINT64_MAX do not wrap. */
static uint64_t ns_to_tick_up(uint64_t ns) {
  return ns / SH_WHEEL_TICK_NS + (ns % SH_WHEEL_TICK_NS != 0);
}

static sh_list *list_for(sh_wheel *w, uint64_t tick) {
  if (tick <= w->now_tick) return &w->due;
  for (unsigned level = 0; level < SH_WHEEL_LEVELS; level++) {
    if (((tick ^ w->now_tick) & ~span_mask(level + 1)) == 0)
      return &w->slots[level][digit(tick, level)];
  }
  return &w->overflow;
}

/* Marks the slot `head` is (if it is one) as holding entries. */
static void mark(sh_wheel *w, const sh_list *head, bool on) {
  const sh_list *first = &w->slots[0][0];
  if (head < first || head >= first + SH_WHEEL_LEVELS * SH_WHEEL_SLOTS) return;
  size_t i = (size_t)(head - first);
  uint64_t bit = 1ull << (i % SH_WHEEL_SLOTS);
  if (on)
    w->occupied[i / SH_WHEEL_SLOTS] |= bit;
  else
    w->occupied[i / SH_WHEEL_SLOTS] &= ~bit;
}

static void place(sh_wheel *w, sh_wheel_link *l) {
  sh_list *head = list_for(w, l->expire_tick);
  if (head == &w->overflow && (sh_list_empty(head) || l->expire_tick < w->overflow_min_tick))
    w->overflow_min_tick = l->expire_tick;
  sh_list_push_back(head, &l->node);
  mark(w, head, true);
}

/* Entries that land back in the same list (only the overflow list takes
 * any back: a slot being re-placed is at now's digit, which place() never
 * picks) go behind the one that was last, and popping that one ends the
 * pass. Nothing else touches the list meanwhile: no callback runs here. */
static void replace_all(sh_wheel *w, sh_list *head) {
  if (sh_list_empty(head)) return;
  sh_list *last = head->prev, *n;
  do {
    n = sh_list_pop_front(head);
    place(w, entry_of(n));
  } while (n != last);
  SH_ASSERT(head == &w->overflow || sh_list_empty(head)); /* a slot takes none back */
}

/* Whether overflow_min_tick is at most every overflow expiry (wheel.h): a
 * walk of the overflow list, for the debug builds' check only. */
__attribute__((unused)) static bool overflow_min_holds(const sh_wheel *w) {
  for (const sh_list *n = sh_list_first(&w->overflow); n != NULL;
       n = sh_list_next(&w->overflow, n))
    if (SH_LIST_ENTRY(n, sh_wheel_link, node)->expire_tick < w->overflow_min_tick) return false;
  return true;
}

/* The first tick after now_tick at which a slot or the overflow list has to
 * be re-placed, or limit if that is earlier or there is none. */
static uint64_t next_event(const sh_wheel *w, uint64_t limit) {
  /* Every boundary of a level comes before the next one of the level
   * above: the first occupied slot found from level 0 up is the next. */
  for (unsigned level = 0; level < SH_WHEEL_LEVELS; level++) {
    uint64_t span_start = w->now_tick & ~span_mask(level + 1);
    uint64_t d = digit(w->now_tick, level);
    uint64_t ahead = d + 1 < SH_WHEEL_SLOTS ? w->occupied[level] & ~((2ull << d) - 1u) : 0;
    /* Bounded by the bits of a word: each turn drops one (a stale bit). */
    for (; ahead != 0; ahead &= ahead - 1) {
      uint64_t s = (uint64_t)__builtin_ctzll(ahead);
      uint64_t tick = span_start | s << level_shift(level);
      if (tick > limit) return limit;
      if (!sh_list_empty(&w->slots[level][s])) return tick;
    }
  }
  if (sh_list_empty(&w->overflow)) return limit;
  SH_DEBUG_ASSERT(overflow_min_holds(w));
  /* Stale bounds are consumed by the stop they cause, so this is ahead. */
  uint64_t tick = w->overflow_min_tick & ~span_mask(SH_WHEEL_LEVELS);
  SH_ASSERT(tick > w->now_tick);
  return tick < limit ? tick : limit;
}

/* Moves now to tick and re-places the lists whose boundary it is. A tick
 * that is not a boundary of a level is not one of any level above either. */
static void process_tick(sh_wheel *w, uint64_t tick) {
  w->now_tick = tick;
  w->steps++;
  for (unsigned level = 0; level <= SH_WHEEL_LEVELS; level++) {
    if ((tick & span_mask(level)) != 0) break;
    if (level == SH_WHEEL_LEVELS) w->overflow_min_tick = UINT64_MAX; /* entries put back set it */
    sh_list *head = level < SH_WHEEL_LEVELS ? &w->slots[level][digit(tick, level)] : &w->overflow;
    replace_all(w, head);
    mark(w, head, false); /* a slot re-placed takes none back (replace_all) */
  }
}

/* Fires, up to budget, the entries due when called. A marker closes that
 * batch: entries fire() makes due land behind it and wait for a later pass,
 * so a timer re-armed for "now" cannot keep one advance spinning, and what
 * the budget leaves stays ahead of them. fire() may remove any entry, so no
 * entry could serve as the end of the batch. The marker lives in the wheel,
 * not on the stack, so the due list never points into a dead frame; it keeps
 * due non-empty while fire() runs, so next_ns called from fire() says "due". */
static uint32_t fire_due(sh_wheel *w, uint32_t budget, void (*fire)(sh_wheel_link *, void *),
                         void *ctx) {
  sh_list *marker = &w->fire_mark;
  SH_ASSERT(!sh_list_linked(marker) && "advance called from fire");
  sh_list_push_back(&w->due, marker);
  uint32_t fired = 0;
  while (fired < budget && sh_list_first(&w->due) != marker) {
    sh_wheel_link *l = entry_of(sh_list_pop_front(&w->due));
    SH_ASSERT(l->expire_tick <= w->now_tick && w->count > 0); /* never before its time */
    w->count--;
    fired++;
    fire(l, ctx);
  }
  sh_list_remove(marker);
  return fired;
}

void sh_wheel_init(sh_wheel *w, uint64_t now_ns) {
  for (unsigned level = 0; level < SH_WHEEL_LEVELS; level++) {
    for (unsigned s = 0; s < SH_WHEEL_SLOTS; s++) sh_list_init(&w->slots[level][s]);
  }
  sh_list_init(&w->overflow);
  sh_list_init(&w->due);
  w->fire_mark.prev = w->fire_mark.next = NULL;
  w->now_tick = now_ns / SH_WHEEL_TICK_NS;
  for (unsigned level = 0; level < SH_WHEEL_LEVELS; level++) w->occupied[level] = 0;
  w->overflow_min_tick = UINT64_MAX;
  w->count = 0;
  w->steps = 0;
}

void sh_wheel_add(sh_wheel *w, sh_wheel_link *l, uint64_t expire_ns) {
  SH_ASSERT(!sh_wheel_linked(l) && "adding a linked entry (or links not zeroed)");
  l->expire_tick = ns_to_tick_up(expire_ns);
  place(w, l);
  w->count++;
}

void sh_wheel_remove(sh_wheel *w, sh_wheel_link *l) {
  SH_ASSERT(sh_wheel_linked(l) && "removing an entry that is not in a wheel");
  SH_ASSERT(w->count > 0);
  sh_list_remove(&l->node);
  w->count--;
  /* The list an entry is in is the one list_for names for it now (a slot
   * is re-placed when now reaches it): an emptied slot's bit goes. */
  sh_list *head = list_for(w, l->expire_tick);
  if (sh_list_empty(head)) mark(w, head, false);
}

uint32_t sh_wheel_advance(sh_wheel *w, uint64_t now_ns, uint32_t max,
                          void (*fire)(sh_wheel_link *l, void *ctx), void *ctx) {
  uint64_t target = now_ns / SH_WHEEL_TICK_NS;
  uint32_t budget = max ? max : UINT32_MAX;
  uint32_t fired = fire_due(w, budget, fire, ctx);
  /* Each pass moves now_tick strictly forward and never beyond target. */
  while (fired < budget && w->now_tick < target) {
    uint64_t tick = next_event(w, target);
    SH_ASSERT(tick > w->now_tick && tick <= target);
    process_tick(w, tick);
    fired += fire_due(w, budget - fired, fire, ctx);
  }
  SH_ASSERT(fired <= budget); /* at most `max` (wheel.h) */
  return fired;
}

uint64_t sh_wheel_next_ns(const sh_wheel *w) {
  if (w->count == 0) return UINT64_MAX;
  /* Due entries may have expired at any time up to now; 0 is never later. */
  if (!sh_list_empty(&w->due)) return 0;
  uint64_t tick = next_event(w, UINT64_MAX);
  /* Only ticks of expiries within the last partial tick of the ns range
   * overflow here, and those can never be reached anyway. */
  return tick > UINT64_MAX / SH_WHEEL_TICK_NS ? UINT64_MAX : tick * SH_WHEEL_TICK_NS;
}
