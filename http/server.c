/*
 * The HTTP server (http.h): its life and its statistics. sh_http_serve
 * checks the configuration, makes the server's memory (the server, its
 * connection actors' counters, its routes' lengths) and the options of its
 * connections' channels (the codec, codec.c, at the head of each; the
 * status that answers a stack without a response), and starts a TCP
 * server whose connection actors (conn.c) serve them, routing each
 * request (route.c). The last of sh_http_serve and the actors to let go
 * of the server frees it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "route.h"

/* ---- the server's life ------------------------------------------------------- */

void sh_http_server_release(sh_http_server *s) {
  if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) free(s);
}

/* ---- the channel's options ------------------------------------------------------------- */

/* Requests are no barriers: head-of-line keeps the responses in order. */
static bool no_barrier(const sh_msg *m) {
  (void)m;
  return false;
}

/* A stack without a response still answers, in its turn. */
static sh_msg *fallback(sh_channel *ch, int error) {
  uint16_t status = 500;
  switch (error) {
  case -ETIMEDOUT: status = 504; break;
  case -EAGAIN:
  case -EBUSY:
  case -ENOBUFS:
  case -ESHUTDOWN:
  case -ECONNREFUSED: status = 503; break;
  default: break;
  }
  sh_http_response *r = sh_http_response_status(status, false);
  /* Nothing to answer with: the order of responses would be lost. */
  if (r == NULL) sh_channel_close(ch);
  return r != NULL ? &r->hdr : NULL;
}

/* ---- serving ------------------------------------------------------------------------------ */

static int validate(const sh_http_config *c) {
  /* A request names its route in 16 bits (sh_http_request's priv_.route). */
  if ((c->routes == NULL && c->nroutes > 0) || c->nroutes > UINT16_MAX || c->max_head < 256 ||
      c->max_head > 65535 || c->max_inflight > SH_HTTP_MAX_INFLIGHT ||
      c->idle_timeout_ms < SH_FOREVER || c->instances == 0 || c->locals_size > SH_HTTP_MAX_LOCALS ||
      strlen(c->server_name) > SH_HTTP_MAX_NAME ||
      c->server_name[strcspn(c->server_name, "\r\n")] != '\0')
    return -EINVAL;
  return sh_http_routes_valid(c->routes, c->nroutes) ? 0 : -EINVAL;
}

static sh_http_config with_defaults(const sh_http_config *in) {
  sh_http_config c = *in;
  if (c.instances == 0) c.instances = SH_SPAWN_PER_WORKER;
  if (c.idle_timeout_ms == 0) c.idle_timeout_ms = 60000;
  if (c.max_head == 0) c.max_head = 8192;
  if (c.max_body == 0) c.max_body = 1u << 20;
  if (c.max_inflight == 0) c.max_inflight = 16;
  if (c.server_name == NULL) c.server_name = "stackhouse";
  return c;
}

static void setup(sh_http_server *s) {
  s->opts = (sh_channel_opts){
      .handlers = {&sh_http_codec},
      .nhandlers = 1,
      .max_stack_inflight = s->cfg.max_inflight,
      .stack_barrier = no_barrier,
      .head_of_line = true,
      .max_pending_stacks = SH_HTTP_MAX_PENDING,
      /* The channel's defaults, spelled out: the codec reads them. */
      .write_high = 64u << 10,
      .write_low = 16u << 10,
      .write_limit = 4u << 20,
      .fallback_reply = fallback,
  };
  int n = snprintf(s->server_line, sizeof(s->server_line), "Server: %s\r\nDate: ",
                   s->cfg.server_name);
  s->server_line_len = (uint32_t)n;
  atomic_init(&s->refs, 1);
}

/* The server, its actors' counters and its routes' lengths in one block,
 * aligned for the counters' cache lines. */
static sh_http_server *server_new(const sh_http_config *c, uint32_t nactors) {
  size_t head = (sizeof(sh_http_server) + SH_HTTP_LINE - 1) / SH_HTTP_LINE * SH_HTTP_LINE;
  size_t counters = sizeof(sh_http_counters) * nactors;
  size_t size = head + counters + sizeof(uint32_t) * c->nroutes;
  size = (size + SH_HTTP_LINE - 1) / SH_HTTP_LINE * SH_HTTP_LINE;
  sh_http_server *s = aligned_alloc(SH_HTTP_LINE, size);
  if (s == NULL) return NULL;
  memset(s, 0, size);
  s->cfg = *c;
  s->max_actors = nactors;
  s->counters = (sh_http_counters *)(void *)((char *)s + head);
  s->plen = (uint32_t *)(void *)((char *)s->counters + counters);
  for (uint32_t i = 0; i < c->nroutes; i++) s->plen[i] = (uint32_t)strlen(c->routes[i].path);
  setup(s);
  return s;
}

int sh_http_serve(sh_system *sys, const sh_netaddr *at, const sh_http_config *cfg,
                  sh_http_server **out) {
  if (sys == NULL || at == NULL || cfg == NULL) return -EINVAL;
  sh_http_config c = with_defaults(cfg);
  int rc = validate(&c);
  if (rc != 0) return rc;
  uint32_t nactors = c.instances == SH_SPAWN_PER_WORKER ? sh_system_workers(sys) : c.instances;
  sh_http_server *s = server_new(&c, nactors);
  if (s == NULL) return -ENOMEM;
  rc = sh_tcp_serve(sys, at, sh_http_actor_class(c.locals_size), s, c.instances, &s->opts, &s->tcp);
  if (rc == 0 && out != NULL) *out = s;
  /* Its actors hold it from here (or, when the spawn failed, let it go). */
  sh_http_server_release(s);
  return rc;
}

int sh_http_server_addr(const sh_http_server *s, sh_netaddr *out) {
  if (s == NULL || out == NULL) return -EINVAL;
  return sh_tcp_server_addr(s->tcp, out);
}

static uint64_t get(const atomic_uint_fast64_t *c) {
  return atomic_load_explicit(c, memory_order_relaxed);
}

int sh_http_server_stats(const sh_http_server *s, sh_http_stats *out) {
  if (s == NULL || out == NULL) return -EINVAL;
  *out = (sh_http_stats){.open = atomic_load_explicit(&s->open, memory_order_relaxed)};
  for (uint32_t i = 0; i < s->max_actors; i++) {
    const sh_http_counters *n = &s->counters[i];
    out->connections += get(&n->connections);
    out->refused += get(&n->refused);
    out->requests += get(&n->requests);
    out->bad += get(&n->bad);
    out->timeouts += get(&n->timeouts);
  }
  return 0;
}
