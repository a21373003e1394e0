/*
 * bridge_try: every sh_bridge_* call from an outside thread, against a
 * bounded mailbox held full and against mailboxes with room, each result
 * checked against bridge.h and stackhouse.h.
 *
 * The thread first sends to an unbounded actor (with room, every send is
 * 0) and tries the refusals of misuse (-EINVAL: a notice type asked, an
 * ask type noticed, no address, a bad timeout; a _try leaves the message
 * the caller's, the others free it). Then it holds a bounded actor in a
 * barrier (a notice whose stack sleeps until the thread releases it), so
 * that nothing leaves its mailboxes, and fills them with the _try forms:
 * each of the first `capacity` tries is 0, with a ticket above the last
 * one, the next is -EAGAIN and the message still the thread's; a blocking
 * ask with a timeout ends -ETIMEDOUT, a blocking notice with SH_NOWAIT
 * -EAGAIN, both freeing the message; the mailbox figures say the depth is
 * the capacity and count every refusal. Some runs park a second thread in
 * sh_bridge_ask (SH_FOREVER) on the full mailbox: the figures show it
 * waiting, and it gets its room and its reply after the release.
 *
 * After the release every ask sent is answered once: the replies (and,
 * apart, the exceptions: an ask may say to throw) of one actor come in the
 * order that actor answered them (bridge.h: in the order they arrived),
 * each carries its own ask's value, sh_bridge_pending counts down to 0 and
 * then sh_bridge_recv says -ENOMSG. Every notice admitted is handled once,
 * none refused is handled, and every message made is freed exactly once.
 */
#include <errno.h>
#include <stdatomic.h>

#include <stackhouse/bridge.h>
#include <stackhouse/probe.h>
#include <stackhouse/scenario.h>

#define BT_MSGS 64u       /* serials of one run; every send below takes one */
#define BT_LOG 32u        /* answers one actor logs */
#define BT_POLLS 100000u  /* yields a thread spends waiting for a state it expects */
#define BT_HOLD_NAPS 5000u /* 1 ms naps of the barrier before it gives up */
#define BT_THROWN (-EPROTO)
#define BT_VALUE(serial) (0x5bd1e995ull * (serial) + 7u)

enum { BT_ANSWER, BT_THROW, BT_FIN }; /* BT_FIN: a notice, the last to its actor */
/* Whom an ask is logged for: the unbounded actor, the held one, the held one
 * asked by the parked thread (its own bridge, its own order). */
enum { T_OPEN, T_HELD, T_PARKED, T_TARGETS };

typedef struct bt_log {
  uint32_t serial[BT_LOG];
  atomic_uint n; /* release: the entry, then the count (read by the thread) */
} bt_log;

typedef struct world {
  sh_scn *s;
  sh_system *sys;
  const sh_addr *to[T_TARGETS];
  uint32_t ask_cap, notice_cap; /* the held actor's */
  bool parked;                  /* a second thread waits for room */
  atomic_uint next_serial;
  atomic_uchar freed[BT_MSGS], handled[BT_MSGS], admitted[BT_MSGS];
  atomic_bool holding, release;
  bt_log replied[T_TARGETS], thrown[T_TARGETS];
  sh_thread *t, *t2;
  atomic_uint left;
} world;

typedef struct bt_msg {
  sh_msg hdr;
  world *wd;
  uint32_t serial, what, target;
  bool hold;
} bt_msg;

static void bt_drop(sh_msg *m) {
  bt_msg *b = (bt_msg *)m;
  if (b->serial < BT_MSGS) atomic_fetch_add(&b->wd->freed[b->serial], 1);
}

typedef bt_msg bt_ask;
typedef bt_msg bt_note;
static SH_MSG_DEFINE_DROP(bt_ask, SH_ASK, 0, bt_drop);
static SH_MSG_DEFINE_DROP(bt_note, SH_NOTICE, 0, bt_drop);

/* A message with a fresh serial; NULL when out of memory. */
static bt_msg *bt_new(world *wd, const sh_msg_type *t, uint32_t target, uint32_t what) {
  uint32_t serial = atomic_fetch_add(&wd->next_serial, 1);
  if (!SH_SCN_CHECK(wd->s, serial < BT_MSGS, "serials exhausted")) return NULL;
  bt_msg *m = (bt_msg *)sh_msg_alloc(t);
  if (m == NULL) return NULL;
  m->wd = wd;
  m->serial = serial;
  m->target = target;
  m->what = what;
  return m;
}

/* ---- the actors ----------------------------------------------------------- */

typedef struct bt_locals {
  sh_future *f;
  uint32_t naps;
} bt_locals;

static void log_add(sh_scn *s, bt_log *l, uint32_t serial) {
  uint32_t n = atomic_load_explicit(&l->n, memory_order_relaxed);
  if (!SH_SCN_CHECK(s, n < BT_LOG, "answer log full")) return;
  l->serial[n] = serial;
  atomic_store_explicit(&l->n, n + 1, memory_order_release);
}

static sh_yield bt_ask_handler(sh_actor *self, sh_stack *st) {
  (void)self;
  bt_msg *m = sh_stack_msg_as(st, bt_msg);
  world *wd = m->wd;
  atomic_fetch_add(&wd->handled[m->serial], 1);
  /* One actor answers in turn: what it logs here is the order it answers. */
  log_add(wd->s, m->what == BT_THROW ? &wd->thrown[m->target] : &wd->replied[m->target],
          m->serial);
  if (m->what == BT_THROW) return sh_throw(st, BT_THROWN);
  return sh_scn_answer(st, BT_VALUE(m->serial));
}

/* A plain notice is counted; the hold naps until the thread releases it. */
static sh_yield bt_notice_handler(sh_actor *self, sh_stack *st) {
  (void)self;
  bt_msg *m = sh_stack_msg_as(st, bt_msg);
  world *wd = m->wd;
  bt_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    atomic_fetch_add(&wd->handled[m->serial], 1);
    /* Notices of one sender are handled in order: the last says all were. */
    if (m->what == BT_FIN) sh_scn_count_down(wd->s, wd->sys, &wd->left);
    if (!m->hold) return sh_return(st, NULL);
    atomic_store(&wd->holding, true);
  }
  bool go = atomic_load(&wd->release);
  SH_SCN_CHECK(wd->s, go || l->naps < BT_HOLD_NAPS, "the barrier was never released");
  if (go || l->naps++ >= BT_HOLD_NAPS) return sh_return(st, NULL);
  l->f = sh_sleep(st, 1);
  return l->f != NULL ? sh_suspend(st, 1) : sh_return(st, NULL);
}

static bool bt_is_hold(sh_actor *self, const sh_msg *m) {
  (void)self;
  return sh_msg_is(m, &bt_note_type) && ((const bt_msg *)m)->hold;
}

#define BT_CLASS(name_, asks, notices)                                                   \
  {.name = name_, .size = sizeof(sh_actor), .locals_size = sizeof(bt_locals),            \
   .ask = bt_ask_handler, .notice = bt_notice_handler, .barrier = bt_is_hold,            \
   .ask_capacity = (asks), .notice_capacity = (notices)}

static const sh_actor_class open_class = BT_CLASS("bridge_try_open", 0, 0);
static const sh_actor_class held_classes[3] = {
    BT_CLASS("bridge_try_held1", 1, 2), BT_CLASS("bridge_try_held2", 2, 1),
    BT_CLASS("bridge_try_held3", 3, 2)};

/* ---- the thread's bookkeeping ---------------------------------------------- */

typedef struct bt_pending {
  uint64_t ticket, last_ticket;
  uint32_t serial[BT_MSGS], what[BT_MSGS], target[BT_MSGS];
  uint64_t tickets[BT_MSGS];
  uint32_t n;
  uint32_t seen_replied[T_TARGETS], seen_thrown[T_TARGETS];
} bt_pending;

/* What the thread keeps of a message it sends: once sent, it is the
 * runtime's, and may be handled and freed before the send returns. */
typedef struct bt_sent {
  uint32_t serial, what, target;
} bt_sent;

static bt_sent sent_of(const bt_msg *m) { return (bt_sent){m->serial, m->what, m->target}; }

/* An ask the bridge took: its ticket is new and above every earlier one. */
static void took(world *wd, sh_bridge *b, bt_pending *p, bt_sent m, uint64_t ticket) {
  SH_SCN_CHECK(wd->s, ticket > p->last_ticket, "ticket %llu after %llu",
               (unsigned long long)ticket, (unsigned long long)p->last_ticket);
  p->last_ticket = ticket;
  p->tickets[p->n] = ticket;
  p->serial[p->n] = m.serial;
  p->what[p->n] = m.what;
  p->target[p->n++] = m.target;
  SH_SCN_CHECK_EQ(wd->s, sh_bridge_pending(b), p->n, "sh_bridge_pending after an ask");
}

/* The next entry of the actor's log of answers, which r must be. */
static void check_order(world *wd, bt_log *log, uint32_t *seen, uint32_t serial) {
  uint32_t n = atomic_load_explicit(&log->n, memory_order_acquire);
  bool ok = *seen < n && log->serial[*seen] == serial;
  SH_SCN_CHECK(wd->s, ok, "the answer to #%u came out of its actor's order", serial);
  if (*seen < n) (*seen)++;
}

static void got(world *wd, bt_pending *p, const sh_bridge_reply *r) {
  uint32_t i = 0;
  while (i < p->n && p->tickets[i] != r->ticket) i++;
  if (!SH_SCN_CHECK(wd->s, i < p->n, "a reply for ticket %llu, not pending",
                    (unsigned long long)r->ticket)) {
    sh_msg_free(r->msg);
    return;
  }
  uint32_t t = p->target[i], serial = p->serial[i];
  if (p->what[i] == BT_THROW) {
    SH_SCN_CHECK(wd->s, r->error == BT_THROWN && r->msg == NULL, "#%u: thrown, got %d", serial,
                 r->error);
    check_order(wd, &wd->thrown[t], &p->seen_thrown[t], serial);
  } else {
    bool ok = r->error == 0 && sh_msg_is(r->msg, &sh_scn_num_type) &&
              ((const sh_scn_num *)r->msg)->v == BT_VALUE(serial);
    SH_SCN_CHECK(wd->s, ok, "#%u: the reply (error %d) carries another value", serial, r->error);
    check_order(wd, &wd->replied[t], &p->seen_replied[t], serial);
  }
  sh_msg_free(r->msg);
  p->n--;
  p->tickets[i] = p->tickets[p->n];
  p->serial[i] = p->serial[p->n];
  p->what[i] = p->what[p->n];
  p->target[i] = p->target[p->n];
}

/* Receives every pending answer, then -ENOMSG. */
static void recv_all(world *wd, sh_bridge *b, bt_pending *p) {
  for (uint32_t k = 0; k < BT_MSGS && p->n > 0; k++) {
    sh_bridge_reply r;
    int64_t timeout = sh_scn_below(wd->s, 2) ? SH_FOREVER : 1000;
    int rc = sh_bridge_recv(b, timeout, &r);
    if (!SH_SCN_CHECK(wd->s, rc == 0, "sh_bridge_recv with %u pending: %d", p->n, rc)) return;
    got(wd, p, &r);
    SH_SCN_CHECK_EQ(wd->s, sh_bridge_pending(b), p->n, "sh_bridge_pending after a reply");
  }
  sh_bridge_reply r;
  int rc = sh_bridge_recv(b, SH_NOWAIT, &r);
  SH_SCN_CHECK(wd->s, rc == -ENOMSG, "sh_bridge_recv with nothing pending: %d", rc);
}

/* ---- the outside threads ----------------------------------------------------- */

/* A send the bridge took: handled once later (verify). */
static void admitted(world *wd, bt_sent m) { atomic_store(&wd->admitted[m.serial], 1); }

/* Misuse: -EINVAL; a _try leaves the message the caller's (freed here, once:
 * verify), the blocking forms take and free it. */
static void misuse(world *wd, sh_bridge *b) {
  sh_scn *s = wd->s;
  const sh_addr *to = wd->to[T_OPEN];
  bt_msg *n = bt_new(wd, &bt_note_type, T_OPEN, BT_ANSWER);
  bt_msg *a = bt_new(wd, &bt_ask_type, T_OPEN, BT_ANSWER);
  if (n == NULL || a == NULL) {
    sh_msg_free(n != NULL ? &n->hdr : NULL);
    sh_msg_free(a != NULL ? &a->hdr : NULL);
    return;
  }
  uint64_t ticket = 0;
  int rc[4] = {sh_bridge_ask_try(b, to, &n->hdr, &ticket), sh_bridge_notice_try(b, to, &a->hdr),
               sh_bridge_ask_try(b, NULL, &a->hdr, &ticket),
               sh_bridge_notice_try(NULL, to, &n->hdr)};
  for (uint32_t i = 0; i < 4; i++)
    SH_SCN_CHECK(s, rc[i] == -EINVAL, "misused _try %u: %d, want -EINVAL", i, rc[i]);
  SH_SCN_CHECK(s, ticket == 0 && sh_bridge_pending(b) == 0, "a refused ask left a ticket");
  int r1 = sh_bridge_ask(b, to, &n->hdr, SH_FOREVER, &ticket); /* a notice type */
  int r2 = sh_bridge_notice(b, to, &a->hdr, -5);                /* a bad timeout */
  SH_SCN_CHECK(s, r1 == -EINVAL && r2 == -EINVAL, "misused blocking sends: %d %d", r1, r2);
}

/* One send to actor t: form 0 ask_try, 1 ask, 2 notice_try, 3 notice. */
static int send_one(world *wd, sh_bridge *b, bt_pending *p, uint32_t t, uint32_t form,
                    int64_t timeout) {
  bool ask = form < 2;
  bt_msg *m = bt_new(wd, ask ? &bt_ask_type : &bt_note_type, t,
                     ask && sh_scn_below(wd->s, 4) == 0 ? BT_THROW : BT_ANSWER);
  if (m == NULL) return -ENOMEM;
  uint64_t ticket = 0;
  const sh_addr *to = wd->to[t];
  bt_sent sent = sent_of(m);
  int rc;
  switch (form) {
  case 0: rc = sh_bridge_ask_try(b, to, &m->hdr, &ticket); break;
  case 1: rc = sh_bridge_ask(b, to, &m->hdr, timeout, &ticket); break;
  case 2: rc = sh_bridge_notice_try(b, to, &m->hdr); break;
  default: rc = sh_bridge_notice(b, to, &m->hdr, timeout); break;
  }
  if (rc == 0 && ask) took(wd, b, p, sent, ticket);
  if (rc == 0) admitted(wd, sent);
  /* A refused _try left it ours (bridge.h); the others freed it. */
  if (rc != 0 && (form == 0 || form == 2)) sh_msg_free(&m->hdr);
  return rc;
}

/* With room (an unbounded mailbox) every form is 0. */
static void to_open(world *wd, sh_bridge *b, bt_pending *p) {
  uint32_t n = 1 + (uint32_t)sh_scn_below(wd->s, 6);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t form = (uint32_t)sh_scn_below(wd->s, 4);
    int64_t timeout = sh_scn_below(wd->s, 2) ? SH_FOREVER : SH_NOWAIT;
    int rc = send_one(wd, b, p, T_OPEN, form, timeout);
    SH_SCN_CHECK(wd->s, rc == 0, "form %u with room: %d", form, rc);
  }
}

/* Polls (bounded) until cond(wd) holds; false if it never did. */
static bool await(world *wd, bool (*cond)(world *wd)) {
  for (uint32_t i = 0; i < BT_POLLS; i++) {
    if (cond(wd)) return true;
    sh_yield_cpu();
  }
  return cond(wd);
}

static bool is_holding(world *wd) { return atomic_load(&wd->holding); }

static bool parked_waits(world *wd) {
  sh_mailbox_stats ms;
  return sh_mailbox_stats_get(wd->to[T_HELD], 0, SH_ASK, &ms) == 0 && ms.waiting == 1;
}

/* The mailbox figures of the held actor: depth at capacity, refusals counted. */
static void check_full(world *wd, sh_msg_kind kind, uint32_t cap, uint32_t refused) {
  sh_mailbox_stats ms;
  int rc = sh_mailbox_stats_get(wd->to[T_HELD], 0, kind, &ms);
  SH_SCN_CHECK(wd->s, rc == 0 && ms.capacity == cap && ms.depth == cap && ms.refused == refused,
               "%s mailbox: rc %d, capacity %u depth %u refused %llu, want %u %u %u",
               kind == SH_ASK ? "ask" : "notice", rc, ms.capacity, ms.depth,
               (unsigned long long)ms.refused, cap, cap, refused);
}

/* Fills the held actor's mailboxes; each send past the capacity is refused. */
static void fill(world *wd, sh_bridge *b, bt_pending *p) {
  sh_scn *s = wd->s;
  for (uint32_t i = 0; i < wd->ask_cap; i++)
    SH_SCN_CHECK(s, send_one(wd, b, p, T_HELD, 0, 0) == 0, "ask_try %u of %u", i, wd->ask_cap);
  int rc = send_one(wd, b, p, T_HELD, 0, 0);
  SH_SCN_CHECK(s, rc == -EAGAIN, "sh_bridge_ask_try, full: %d", rc);
  for (uint32_t i = 0; i < wd->notice_cap; i++)
    SH_SCN_CHECK(s, send_one(wd, b, p, T_HELD, 2, 0) == 0, "notice_try %u", i);
  rc = send_one(wd, b, p, T_HELD, 2, 0);
  SH_SCN_CHECK(s, rc == -EAGAIN, "sh_bridge_notice_try, full: %d", rc);
  rc = send_one(wd, b, p, T_HELD, 1, 1 + (int64_t)sh_scn_below(s, 3));
  SH_SCN_CHECK(s, rc == -ETIMEDOUT, "sh_bridge_ask with a timeout, full: %d", rc);
  rc = send_one(wd, b, p, T_HELD, 3, SH_NOWAIT);
  SH_SCN_CHECK(s, rc == -EAGAIN, "sh_bridge_notice SH_NOWAIT, full: %d", rc);
  check_full(wd, SH_ASK, wd->ask_cap, 2);
  check_full(wd, SH_NOTICE, wd->notice_cap, 2);
}

/* The parked thread: one ask that waits for room, then its reply. */
static void parked_main(void *arg) {
  world *wd = arg;
  sh_bridge *b = NULL;
  bt_pending p = {0};
  int rc = sh_bridge_new(wd->sys, &b);
  if (!SH_SCN_CHECK(wd->s, rc == 0, "sh_bridge_new: %d", rc)) return;
  bt_msg *m = bt_new(wd, &bt_ask_type, T_PARKED, BT_ANSWER);
  uint64_t ticket = 0;
  bt_sent sent = m != NULL ? sent_of(m) : (bt_sent){0};
  rc = m != NULL ? sh_bridge_ask(b, wd->to[T_HELD], &m->hdr, SH_FOREVER, &ticket) : -ENOMEM;
  SH_SCN_CHECK(wd->s, rc == 0, "a parked sh_bridge_ask: %d", rc);
  if (rc == 0) {
    took(wd, b, &p, sent, ticket);
    admitted(wd, sent);
  }
  recv_all(wd, b, &p);
  sh_bridge_free(b);
}

static void bt_main(void *arg) {
  world *wd = arg;
  sh_scn *s = wd->s;
  sh_bridge *b = NULL;
  bt_pending p = {0};
  int rc = sh_bridge_new(wd->sys, &b);
  if (!SH_SCN_CHECK(s, rc == 0, "sh_bridge_new: %d", rc)) return;
  misuse(wd, b);
  to_open(wd, b, &p);
  bt_msg *h = bt_new(wd, &bt_note_type, T_HELD, BT_ANSWER);
  if (h != NULL) h->hold = true;
  bt_sent hs = h != NULL ? sent_of(h) : (bt_sent){0};
  rc = h != NULL ? sh_bridge_notice(b, wd->to[T_HELD], &h->hdr, SH_FOREVER) : -ENOMEM;
  if (SH_SCN_CHECK(s, rc == 0, "the hold: %d", rc)) admitted(wd, hs);
  SH_SCN_CHECK(s, await(wd, is_holding), "the held actor never took its hold");
  fill(wd, b, &p);
  if (wd->parked) {
    rc = sh_thread_start(parked_main, wd, &wd->t2);
    SH_SCN_CHECK(s, rc == 0, "sh_thread_start: %d", rc);
    SH_SCN_CHECK(s, rc != 0 || await(wd, parked_waits), "the parked ask never waited");
    /* Room for nobody else while a sender waits (and the box is full). */
    SH_SCN_CHECK(s, send_one(wd, b, &p, T_HELD, 0, 0) == -EAGAIN, "ask_try past a waiter");
  }
  to_open(wd, b, &p);
  atomic_store(&wd->release, true);
  recv_all(wd, b, &p);
  if (wd->t2 != NULL) sh_thread_join(wd->t2);
  /* Last, to both: its handling says every earlier notice was handled. */
  for (uint32_t t = T_OPEN; t <= T_HELD; t++) {
    bt_msg *f = bt_new(wd, &bt_note_type, t, BT_FIN);
    bt_sent fs = f != NULL ? sent_of(f) : (bt_sent){0};
    rc = f != NULL ? sh_bridge_notice(b, wd->to[t], &f->hdr, SH_FOREVER) : -ENOMEM;
    if (SH_SCN_CHECK(s, rc == 0, "the last notice: %d", rc)) admitted(wd, fs);
  }
  sh_bridge_free(b);
}

/* ---- the run ---------------------------------------------------------------- */

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  wd->s = s;
  wd->sys = sys;
  uint32_t k = (uint32_t)sh_scn_below(s, 3);
  wd->ask_cap = held_classes[k].ask_capacity;
  wd->notice_cap = held_classes[k].notice_capacity;
  wd->parked = sh_scn_below(s, 2) == 0;
  atomic_store(&wd->left, 2); /* the last notices to both actors */
  int rc = sh_spawn(sys, &open_class, NULL, 1, &wd->to[T_OPEN]);
  if (rc == 0) rc = sh_spawn(sys, &held_classes[k], NULL, 1, &wd->to[T_HELD]);
  wd->to[T_PARKED] = wd->to[T_HELD];
  if (rc == 0) rc = sh_thread_start(bt_main, wd, &wd->t);
  return rc;
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys;
  (void)st;
  world *wd = sh_scn_state(s);
  if (wd->t != NULL) sh_thread_join(wd->t);
  uint32_t made = atomic_load(&wd->next_serial);
  for (uint32_t i = 0; i < made && i < BT_MSGS; i++)
    SH_SCN_CHECK(s, atomic_load(&wd->freed[i]) == 1, "message #%u freed %u times", i,
                 (unsigned)atomic_load(&wd->freed[i]));
  /* Admitted: handled once (the last notices came after); refused: never. */
  for (uint32_t i = 0; i < made && i < BT_MSGS; i++)
    SH_SCN_CHECK(s, atomic_load(&wd->handled[i]) == atomic_load(&wd->admitted[i]),
                 "message #%u: admitted %u, handled %u times", i,
                 (unsigned)atomic_load(&wd->admitted[i]), (unsigned)atomic_load(&wd->handled[i]));
}

static const sh_scenario bridge_try = {
    .name = "bridge_try",
    .summary = "every bridge call, the _try forms against full and free bounded mailboxes",
    .flags = SH_SCN_NO_FAULTS,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(bridge_try);
