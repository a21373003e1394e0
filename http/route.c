/*
 * The HTTP server's routing: the route table of sh_http_config, kept as
 * given, with each path's length in the server's memory (plen). The first
 * route whose methods include the request's and whose path matches (the
 * same path, or a prefix when the route's ends in '*') takes it; a request
 * none takes is answered here: 404, 405 with Allow, or 501. dispatch, the
 * connection actors' channel handler, routes each request on its stack's
 * first entry and runs the route's handler on every entry.
 */
#include <string.h>

#include "conn.h"
#include "route.h"

bool sh_http_routes_valid(const sh_http_route *routes, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    const sh_http_route *r = &routes[i];
    if (r->path == NULL || r->handler == NULL || (r->path[0] != '/' && strcmp(r->path, "*") != 0))
      return false;
  }
  return true;
}

static bool path_matches(const char *route, size_t n, const sh_http_str *path) {
  if (n > 0 && route[n - 1] == '*') return path->len >= n - 1 && memcmp(route, path->p, n - 1) == 0;
  return path->len == n && memcmp(route, path->p, n) == 0;
}

/* The allowed methods of routes of a path, as an Allow header. */
static void allow_header(sh_http_response *r, uint32_t methods) {
  static const char *const names[] = {NULL,   "GET",     "HEAD",    "POST",  "PUT",
                                      "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};
  char v[96];
  size_t n = 0;
  for (uint32_t m = SH_HTTP_GET; m <= SH_HTTP_PATCH; m++) {
    if (!(methods & SH_HTTP_M(m))) continue;
    size_t l = strlen(names[m]);
    if (n > 0) {
      memcpy(v + n, ", ", 2);
      n += 2;
    }
    memcpy(v + n, names[m], l);
    n += l;
  }
  v[n] = '\0';
  (void)sh_http_response_header(r, "Allow", v);
}

/* A route's methods: one that takes GET takes HEAD too (the encoder drops
 * the body), as every general-purpose server must. */
static uint32_t methods_of(const sh_http_route *rt) {
  uint32_t m = rt->methods;
  return m & SH_HTTP_M(SH_HTTP_GET) ? m | SH_HTTP_M(SH_HTTP_HEAD) : m;
}

/* 404, 405 (with Allow) or 501 for a request no route takes. */
static sh_yield no_route(sh_http_actor *a, sh_stack *st, const sh_http_request *req) {
  const sh_http_server *s = a->srv;
  uint32_t allowed = 0;
  bool any_method = false;
  for (uint32_t i = 0; i < s->cfg.nroutes; i++) {
    const sh_http_route *rt = &s->cfg.routes[i];
    if (rt->methods == 0) any_method = true;
    if (path_matches(rt->path, s->plen[i], &req->path)) allowed |= methods_of(rt);
  }
  sh_http_count(&a->n->bad);
  uint16_t status = req->method == SH_HTTP_OTHER && !any_method ? 501 : allowed != 0 ? 405 : 404;
  sh_http_response *r = sh_http_response_status(status, false);
  if (r != NULL && status == 405) allow_header(r, allowed);
  return sh_return(st, r != NULL ? &r->hdr : NULL);
}

static int route_for(const sh_http_server *s, const sh_http_request *req, uint32_t m) {
  for (uint32_t i = 0; i < s->cfg.nroutes; i++) {
    const sh_http_route *rt = &s->cfg.routes[i];
    if ((rt->methods == 0 || (rt->methods & m)) && path_matches(rt->path, s->plen[i], &req->path))
      return (int)i;
  }
  return -1;
}

/* A GET route takes HEAD only when no route takes HEAD itself: one that
 * does, even listed after, is not shadowed. */
static int route_of(const sh_http_server *s, const sh_http_request *req) {
  int i = route_for(s, req, SH_HTTP_M(req->method));
  if (i < 0 && req->method == SH_HTTP_HEAD) i = route_for(s, req, SH_HTTP_M(SH_HTTP_GET));
  return i;
}

sh_yield sh_http_dispatch(sh_actor *self, sh_stack *st) {
  sh_http_actor *a = (sh_http_actor *)self;
  const sh_http_server *s = a->srv;
  sh_http_request *req = sh_http_req(st);
  if (req->priv_.route == 0) {
    if (req->priv_.status != 0) {
      sh_http_response *r = sh_http_response_status(req->priv_.status, true);
      return sh_return(st, r != NULL ? &r->hdr : NULL);
    }
    int i = route_of(s, req);
    if (i < 0) return no_route(a, st, req);
    req->priv_.route = (uint16_t)(i + 1);
  }
  return s->cfg.routes[req->priv_.route - 1].handler(self, st);
}
