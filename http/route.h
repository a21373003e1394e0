/*
 * The HTTP server's routing (route.c): which route of the server's table
 * takes a request, and the answer to one that none takes.
 */
#ifndef SH_HTTP_ROUTE_H
#define SH_HTTP_ROUTE_H

#include <stackhouse/http.h>

/* Whether each of n routes has a handler and a path that starts with '/'
 * (or is "*"). */
bool sh_http_routes_valid(const sh_http_route *routes, uint32_t n);

/* The connection actors' channel handler: every entry of every request's
 * stack. Routes the request on its first entry (or answers it: a parse
 * error's status, 404, 405, 501), then runs its route's handler. */
sh_yield sh_http_dispatch(sh_actor *self, sh_stack *st);

#endif
