/*
 * The HTTP server on the simulator, through the public API only, over
 * random and PCT schedules of two workers:
 *
 *   - pipelined requests behind a handler that sleeps, ending with one
 *     that closes the connection: every response in order, then the close;
 *     meanwhile an idle connection is closed by the idle timeout;
 *   - the system shut down while a handler sleeps, with requests waiting
 *     behind it and a request half sent: nothing leaks, nothing breaks.
 *
 * A run must pass (no invariant failed, nothing leaked, no memory error)
 * and replay the same.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <stackhouse/http.h>
#include <stackhouse/scenario.h>
#include <stackhouse/sim.h>

/* ---- the server ---------------------------------------------------------------- */

typedef struct slow_locals {
  sh_future *f;
} slow_locals;

static sh_yield echo_query(sh_actor *self, sh_stack *st) {
  (void)self;
  const sh_http_request *r = sh_http_req(st);
  return sh_http_reply(st, 200, "text/plain", r->query.p, r->query.len);
}

/* Answers after as many ms as the query says. */
static sh_yield slow(sh_actor *self, sh_stack *st) {
  (void)self;
  slow_locals *l = sh_stack_locals(st);
  if (sh_stack_state(st) == SH_START) {
    l->f = sh_sleep(st, strtol(sh_http_req(st)->query.p, NULL, 10));
    return l->f != NULL ? sh_suspend(st, 1) : sh_throw(st, -ENOMEM);
  }
  return sh_http_reply(st, 200, "text/plain", "slow", 4);
}

static const sh_http_route routes[] = {
    {SH_HTTP_M(SH_HTTP_GET), "/q", echo_query},
    {SH_HTTP_M(SH_HTTP_GET), "/slow", slow},
};

#define IDLE_MS 40
#define PIPELINED 40

typedef struct world {
  sh_netaddr at;
  atomic_uint left;  /* clients still to finish */
  uint32_t answered; /* responses the pipelining client read, in order */
  bool closed[2];    /* each client's connection closed by the server */
  bool half;         /* the shutdown scenario */
} world;

static int serve(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  sh_http_config cfg = {.routes = routes,
                        .nroutes = sizeof(routes) / sizeof(routes[0]),
                        .locals_size = sizeof(slow_locals),
                        .idle_timeout_ms = IDLE_MS};
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  sh_http_server *srv;
  int rc = sh_http_serve(sys, &any, &cfg, &srv);
  return rc != 0 ? rc : sh_http_server_addr(srv, &wd->at);
}

/* ---- the clients ----------------------------------------------------------------- */

typedef struct client {
  sh_scn_actor base;
  char buf[16384];
  size_t len;
} client;

typedef struct client_locals {
  sh_future *f;
} client_locals;

/* The pipelined requests: a slow one, numbered ones, a closing one. */
static sh_bytes *pipeline(bool half) {
  sh_bytes *b = sh_bytes_new(NULL, 0);
  if (b == NULL) return NULL;
  char line[96];
  int n = snprintf(line, sizeof(line), "GET /slow?%d HTTP/1.1\r\nHost: x\r\n\r\n", half ? 1000 : 5);
  int rc = sh_buf_append(&b->buf, line, (size_t)n);
  for (int i = 0; rc == 0 && i < PIPELINED; i++) {
    n = snprintf(line, sizeof(line), "GET /q?%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
    rc = sh_buf_append(&b->buf, line, (size_t)n);
  }
  const char *last = half ? "GET /q?half HTTP/1.1\r\nHo"
                          : "GET /q?end HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  if (rc == 0) rc = sh_buf_append(&b->buf, last, strlen(last));
  if (rc != 0) {
    sh_msg_free(&b->hdr);
    return NULL;
  }
  return b;
}

enum { CONNECTED = 1, SLEPT };

/* Client 0 pipelines; client 1 connects and says nothing. */
static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  client_locals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case SH_START:
    l->f = sh_tcp_connect(st, &wd->at, NULL);
    return l->f != NULL ? sh_suspend(st, CONNECTED) : sh_throw(st, -ENOMEM);
  case CONNECTED: {
    SH_SCN_CHECK(s, !sh_future_failed(l->f), "connect: %d", sh_future_error(l->f));
    if (sh_future_failed(l->f) || sh_scn_id(self) == 1) break;
    sh_channel *ch = sh_future_reply(l->f, sh_channel_msg)->ch;
    sh_bytes *b = pipeline(wd->half);
    SH_SCN_CHECK(s, b != NULL && sh_channel_write(ch, &b->hdr) == 0, "the requests not sent");
    if (!wd->half) break;
    /* The slow handler sleeps, the others wait: shut down now. */
    l->f = sh_sleep(st, 3);
    return l->f != NULL ? sh_suspend(st, SLEPT) : sh_throw(st, -ENOMEM);
  }
  case SLEPT:
    sh_scn_done(s, sh_actor_system(self));
    break;
  }
  return sh_return(st, NULL);
}

/* Takes the whole responses at the start of the buffer, checking each. */
static void take_responses(client *c, sh_scn *s, world *wd) {
  char *end;
  while ((end = memmem(c->buf, c->len, "\r\n\r\n", 4)) != NULL) {
    size_t hl = (size_t)(end - c->buf) + 4;
    const char *cl = memmem(c->buf, hl, "Content-Length: ", 16);
    size_t bl = cl != NULL ? (size_t)strtoul(cl + 16, NULL, 10) : 0;
    if (c->len < hl + bl) return;
    char want[16];
    uint32_t i = wd->answered++;
    if (i == 0) snprintf(want, sizeof(want), "slow");
    else if (i <= PIPELINED) snprintf(want, sizeof(want), "%u", i - 1);
    else snprintf(want, sizeof(want), "end");
    SH_SCN_CHECK(s, strncmp(c->buf, "HTTP/1.1 200 OK\r\n", 17) == 0, "response %u: %.12s", i, c->buf);
    SH_SCN_CHECK(s, bl == strlen(want) && memcmp(c->buf + hl, want, bl) == 0,
                 "response %u: body %.*s, want %s", i, (int)bl, c->buf + hl, want);
    memmove(c->buf, c->buf + hl + bl, c->len - hl - bl);
    c->len -= hl + bl;
  }
}

static sh_yield client_channel(sh_actor *self, sh_stack *st) {
  client *c = (client *)self;
  sh_scn *s = sh_scn_of(self);
  sh_bytes *b = sh_stack_msg_as(st, sh_bytes);
  size_t n = sh_buf_len(&b->buf);
  SH_SCN_CHECK(s, c->len + n <= sizeof(c->buf), "responses past the client's buffer");
  if (c->len + n <= sizeof(c->buf)) c->len += sh_buf_peek(&b->buf, 0, c->buf + c->len, n);
  take_responses(c, s, sh_scn_state(s));
  return sh_return(st, NULL);
}

static void client_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  (void)ch, (void)error;
  if (ev != SH_CHANNEL_CLOSED) return;
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  wd->closed[sh_scn_id(self)] = true;
  if (!wd->half) sh_scn_count_down(s, sh_actor_system(self), &wd->left);
}

static const sh_actor_class client_class = {
    .name = "review_http_client",
    .size = sizeof(client),
    .locals_size = sizeof(client_locals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = client_notice,
    .channel = client_channel,
    .channel_event = client_event,
};

static int start_clients(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  atomic_store(&wd->left, 2);
  int rc = serve(s, sys);
  return rc != 0 ? rc : sh_scn_spawn_each(s, sys, &client_class, 2, SH_SCN_EACH_KICK, NULL);
}

/* ---- pipelined, then closed; an idle connection timed out ---------------------- */

static void pc_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  SH_SCN_CHECK_EQ(s, wd->answered, PIPELINED + 2, "responses");
  SH_SCN_CHECK(s, wd->closed[0] && wd->closed[1], "closed: %d %d", wd->closed[0], wd->closed[1]);
}

static const sh_scenario review_http_pipeline_close = {
    .name = "review_http_pipeline_close",
    .summary = "HTTP: pipelined requests behind a slow one, a closing one last; an idle one timed out",
    .flags = SH_SCN_NO_FAULTS,
    .state_size = sizeof(world),
    .setup = start_clients,
    .verify = pc_verify,
};
SH_SCENARIO(review_http_pipeline_close);

/* ---- shut down while a handler sleeps --------------------------------------------- */

static int sd_setup(sh_scn *s, sh_system *sys) {
  ((world *)sh_scn_state(s))->half = true;
  return start_clients(s, sys);
}

static void sd_verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  /* The slow request sleeps a second: nothing answered before the shutdown. */
  SH_SCN_CHECK_EQ(s, wd->answered, 0, "responses");
}

static const sh_scenario review_http_shutdown_sleeping = {
    .name = "review_http_shutdown_sleeping",
    .summary = "HTTP: the system shut down while a handler sleeps and requests wait",
    /* The shutdown must meet the handler asleep: no idle stretch. */
    .flags = SH_SCN_NO_FAULTS | SH_SCN_NO_IDLE,
    .state_size = sizeof(world),
    .setup = sd_setup,
    .verify = sd_verify,
};
SH_SCENARIO(review_http_shutdown_sleeping);

/* ---- the tests --------------------------------------------------------------------- */

/* Each seed twice: a run must pass, and replay to the same trace (nothing
 * in the server may depend on pointers, the real clock or libc's random). */
static void run_seeds(const char *name) {
  for (uint64_t seed = 1; seed <= 16; seed++) {
    sh_sim_options o;
    sh_sim_options_default(&o);
    o.seed = seed;
    o.strategy = seed % 2 ? SH_SIM_RANDOM : SH_SIM_PCT;
    sh_sim_result r, again;
    assert_int_equal(sh_sim_run(name, &o, &r), 0);
    if (!r.ok) fail_msg("%s seed %llu: %s %s", name, (unsigned long long)seed, r.kind, r.detail);
    assert_int_equal(sh_sim_run(name, &o, &again), 0);
    assert_int_equal(again.hash, r.hash);
  }
}

static void test_pipeline_close(void **state) {
  (void)state;
  run_seeds("review_http_pipeline_close");
}

static void test_shutdown_sleeping(void **state) {
  (void)state;
  run_seeds("review_http_shutdown_sleeping");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pipeline_close),
      cmocka_unit_test(test_shutdown_sleeping),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
