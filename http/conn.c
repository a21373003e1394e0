/*
 * The HTTP server's connection actors (conn.h): their life, the records of
 * their connections (reused from one connection to the next), the events
 * of those connections (open, writable, end of stream, closed), the
 * refusal of one past max_connections, and, on one periodic timer that
 * runs while an actor has connections, the Date header and the idle
 * timeout of its connections.
 */
#define _POSIX_C_SOURCE 200809L
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "route.h"

/* Closed connections' records an actor keeps for the next ones. */
#define FREE_RECORDS 256u

/* ---- Date ---------------------------------------------------------------------- */

/* RFC 7231's IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT". */
static void format_date(char out[SH_HTTP_DATE_LEN + 1], int64_t ms) {
  static const char days[] = "SunMonTueWedThuFriSat";
  static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char y[16];
  int yn = snprintf(y, sizeof(y), "%04d", tm.tm_year + 1900);
  if (yn != 4) memcpy(y, "9999", 5);
  char *p = out;
  memcpy(p, days + 3 * tm.tm_wday, 3);
  p[3] = ',';
  p[4] = ' ';
  p[5] = (char)('0' + tm.tm_mday / 10);
  p[6] = (char)('0' + tm.tm_mday % 10);
  p[7] = ' ';
  memcpy(p + 8, months + 3 * tm.tm_mon, 3);
  p[11] = ' ';
  memcpy(p + 12, y, 4);
  p[16] = ' ';
  const int hms[3] = {tm.tm_hour, tm.tm_min, tm.tm_sec};
  for (int i = 0; i < 3; i++) {
    p[17 + 3 * i] = (char)('0' + hms[i] / 10);
    p[18 + 3 * i] = (char)('0' + hms[i] % 10);
    p[19 + 3 * i] = i < 2 ? ':' : ' ';
  }
  memcpy(p + 26, "GMT", 4);
}

/* ---- idle connections ------------------------------------------------------------ */

/* Armed connections are appended as they arm, so the list stays ordered
 * by armed_at and the sweep stops at the first one not yet due. */
void sh_http_conn_arm(sh_http_conn *c) {
  sh_http_actor *a = c->actor;
  if (c->armed_at >= 0) return;
  c->armed_at = sh_clock_ms();
  c->armed_pending = sh_channel_pending_bytes(c->ch);
  c->next = NULL;
  c->prev = a->armed_tail;
  if (a->armed_tail != NULL) a->armed_tail->next = c;
  else a->armed_head = c;
  a->armed_tail = c;
}

void sh_http_conn_disarm(sh_http_conn *c) {
  sh_http_actor *a = c->actor;
  if (c->armed_at < 0) return;
  if (c->prev != NULL) c->prev->next = c->next;
  else a->armed_head = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  else a->armed_tail = c->prev;
  c->prev = c->next = NULL;
  c->armed_at = -1;
}

static void sweep(sh_http_actor *a) {
  int64_t idle = a->srv->cfg.idle_timeout_ms;
  if (idle == SH_FOREVER) return;
  int64_t now = sh_clock_ms();
  sh_http_conn *c;
  /* Bounded by the armed connections: each turn disarms one, and one armed
   * again goes behind every due one (its armed_at is now, and idle > 0):
   * at most one turn per open connection. */
  uint32_t turns = 0, open = a->nconns;
  while ((c = a->armed_head) != NULL && now - c->armed_at >= idle) {
    assert(++turns <= open);
    (void)open;
    size_t pending = sh_channel_pending_bytes(c->ch);
    bool draining = pending > 0 && pending < c->armed_pending;
    sh_http_conn_disarm(c);
    /* A peer still reading its responses is slow, not idle: a timeout
     * counts from its last progress (closing would drop what it asked for). */
    if (draining) {
      sh_http_conn_arm(c);
      continue;
    }
    sh_http_count(&a->n->timeouts);
    sh_channel_close(c->ch);
  }
}

/* The Date header, and the cached response head that holds it. */
static void refresh_date(sh_http_actor *a) {
  format_date(a->date, sh_time_ms());
  a->pre.valid = false;
}

/* The timer runs only while the actor has connections, so that an idle
 * server is quiet (and a finished simulation has nothing left to run). */
static void ticking_start(sh_http_actor *a) {
  refresh_date(a);
  int64_t idle = a->srv->cfg.idle_timeout_ms, period = 1000;
  if (idle != SH_FOREVER && idle / 2 < period) period = idle / 2 > 0 ? idle / 2 : 1;
  /* No timer (no memory): a stale Date and no idle timeout, nothing worse. */
  a->ticking = sh_timer_start(&a->base, period, period, NULL, &a->timer) == 0;
}

static void ticking_stop(sh_http_actor *a) {
  if (a->ticking) (void)sh_timer_cancel(&a->base, a->timer);
  a->ticking = false;
}

static void actor_tick(sh_actor *self, uint64_t id, void *arg) {
  (void)id;
  (void)arg;
  sh_http_actor *a = (sh_http_actor *)self;
  refresh_date(a);
  sweep(a);
}

/* ---- connections ------------------------------------------------------------------ */

static sh_http_conn *conn_new(sh_http_actor *a, sh_channel *ch) {
  sh_http_conn *c = a->free;
  if (c != NULL) {
    a->free = c->next;
    a->nfree--;
  } else if ((c = malloc(sizeof(*c))) == NULL) {
    return NULL;
  }
  *c = (sh_http_conn){.actor = a, .ch = ch, .armed_at = -1};
  return c;
}

static void conn_free(sh_http_actor *a, sh_http_conn *c) {
  sh_http_conn_disarm(c);
  if (a->nfree >= FREE_RECORDS) {
    free(c);
    return;
  }
  c->next = a->free;
  a->free = c;
  a->nfree++;
}

/* Past max_connections: 503 at once, and the close after it. */
static void refuse(sh_http_conn *c) {
  c->refused = true;
  sh_http_count(&c->actor->n->refused);
  sh_http_response *r = sh_http_response_status(503, true);
  if (r == NULL || sh_channel_write(c->ch, &r->hdr) != 0) sh_channel_close(c->ch);
}

/* A connection takes a place under max_connections: false past it.
 * Relaxed: the count orders no other memory, and a compare-exchange
 * always sees its latest value, so the limit is exact. */
static bool admit(sh_http_server *s) {
  unsigned n = atomic_load_explicit(&s->served, memory_order_relaxed);
  do {
    if (n >= s->cfg.max_connections) return false;
  } while (!atomic_compare_exchange_weak_explicit(&s->served, &n, n + 1, memory_order_relaxed,
                                                  memory_order_relaxed));
  return true;
}

static void opened(sh_http_actor *a, sh_channel *ch) {
  sh_http_server *s = a->srv;
  sh_http_count(&a->n->connections);
  atomic_fetch_add_explicit(&s->open, 1, memory_order_relaxed);
  sh_http_conn *c = conn_new(a, ch);
  if (c == NULL) {
    sh_channel_close(ch);
    return;
  }
  sh_channel_set_data(ch, c);
  sh_http_conn_arm(c);
  if (s->cfg.max_connections != 0 && !admit(s)) refuse(c);
}

static void actor_event(sh_actor *self, sh_channel *ch, int event, int error) {
  (void)error;
  sh_http_actor *a = (sh_http_actor *)self;
  if (event == SH_CHANNEL_OPEN) {
    if (a->nconns++ == 0) ticking_start(a);
    opened(a, ch);
  } else if (event == SH_CHANNEL_WRITABLE || event == SH_CHANNEL_EOF) {
    sh_http_conn *c = sh_channel_data(ch);
    if (c == NULL) return;
    if (event == SH_CHANNEL_EOF) {
      c->eof = true;
    } else if (c->armed_at >= 0) {
      /* The peer read its responses down to the low watermark: progress,
       * and the rest is taken at once or read slowly (the sweep's rule).
       * Else a buffer that empties between two sweeps would look idle
       * since it was armed, and close as soon as it drained. */
      sh_http_conn_disarm(c);
      sh_http_conn_arm(c);
    }
    sh_http_codec_resume(ch);
  } else if (event == SH_CHANNEL_CLOSED) {
    if (a->nconns > 0 && --a->nconns == 0) ticking_stop(a);
    atomic_fetch_sub_explicit(&a->srv->open, 1, memory_order_relaxed);
    sh_http_conn *c = sh_channel_data(ch);
    if (c != NULL && !c->refused && a->srv->cfg.max_connections != 0)
      atomic_fetch_sub_explicit(&a->srv->served, 1, memory_order_relaxed);
    if (c != NULL) conn_free(a, c);
    sh_channel_set_data(ch, NULL);
  }
}

/* ---- the actor's life ---------------------------------------------------------------- */

static int actor_init(sh_actor *self, void *arg) {
  sh_http_actor *a = (sh_http_actor *)self;
  /* Everything after the runtime's part starts empty. */
  memset((char *)a + sizeof(a->base), 0, sizeof(*a) - sizeof(a->base));
  sh_http_server *s = a->srv = arg;
  unsigned i = atomic_fetch_add_explicit(&s->nactors, 1, memory_order_relaxed);
  /* One slot per instance spawned: never short. */
  if (i >= s->max_actors) return -ENOSPC;
  a->n = &s->counters[i];
  atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
  return 0;
}

static void actor_stop(sh_actor *self) {
  sh_http_actor *a = (sh_http_actor *)self;
  sh_http_conn *c;
  while ((c = a->free) != NULL) {
    a->free = c->next;
    free(c);
  }
  sh_http_server_release(a->srv);
}

/* ---- the class ------------------------------------------------------------------------- */

/* The connection actors' classes, one per size of stack locals: the
 * runtime reads an actor's class until the system is freed, after the
 * server's memory went with the last stop, so the classes are static. */
#define HTTP_CLASS(locals)                                                                   \
  {.name = "http", .size = sizeof(sh_http_actor), .locals_size = (locals), .kind = SH_IO_ACTOR, \
   .init = actor_init, .stop = actor_stop, .timeout = actor_tick,                              \
   .channel = sh_http_dispatch, .channel_event = actor_event}
static const sh_actor_class classes[] = {
    HTTP_CLASS(0),    HTTP_CLASS(64),    HTTP_CLASS(256),   HTTP_CLASS(1024),
    HTTP_CLASS(4096), HTTP_CLASS(16384), HTTP_CLASS(SH_HTTP_MAX_LOCALS),
};
#undef HTTP_CLASS

const sh_actor_class *sh_http_actor_class(size_t locals_size) {
  size_t i = 0;
  while (classes[i].locals_size < locals_size) i++;
  return &classes[i];
}
