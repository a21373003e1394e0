/*
 * A scripted HTTP/1.1 client for the HTTP scenarios: an IO actor that
 * opens connections to a server, writes each one's bytes in the chunks
 * and pauses its script says, parses the responses that come back
 * (status line, headers, Content-Length framing), however the network
 * splits them, and tells the script of each response and of the close.
 *
 * A scenario's state (sh_scn_state) begins with an hc_world; each
 * connection is an hc_conn of its array, started by hc_start. The
 * workload ends once every connection has ended for good (its script's
 * `closed` said not to connect again): hc_world.left counts them down,
 * and, when hc_world.server is set, the server has closed its ends.
 */
#ifndef SCN_HTTP_CLIENT_H
#define SCN_HTTP_CLIENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackhouse/http.h>
#include <stackhouse/net.h>
#include <stackhouse/scenario.h>

/* Bytes of a response head, and of a body, the client keeps; the longest
 * body it takes. A head holds a Content-Type and an extra header of a few
 * KiB at most (http_conformance's, past the codec's staging buffer). */
#define HC_HEAD_MAX 8192u
#define HC_BODY_MAX 512u
#define HC_BODY_LIMIT (1u << 24)

/* FNV-1a's offset basis: the sums of an hc_resp start from it. */
#define HC_SUM0 2166136261u

typedef struct hc_resp {
  uint16_t status;
  bool close; /* "Connection: close" */
  bool allow; /* an Allow header */
  bool keep_alive; /* "Connection: keep-alive" */
  char allow_v[64];        /* the Allow header's value (cut to fit) */
  uint32_t declared;       /* its Content-Length */
  uint32_t body_len;       /* all of it (0 for a bodiless one) */
  uint32_t body_sum;       /* FNV-1a of all of it (HC_SUM0 for none) */
  /* The header lines the client does not read itself (Content-Type, X-*):
   * their bytes, and the FNV-1a of "name: value\n" of each, in order. */
  uint32_t xlen, xsum;
  char body[HC_BODY_MAX];  /* its first bytes */
} hc_resp;

/* A response being read: its head so far, then its body so far. */
typedef struct hc_parser {
  char head[HC_HEAD_MAX];
  uint32_t head_len;
  bool in_body;
  uint32_t need; /* body bytes declared */
  hc_resp r;
} hc_parser;

typedef struct hc_conn hc_conn;

/* A connection's script; every hook is optional but chunk. */
typedef struct hc_ops {
  /* How many bytes of out (from sent) to write next, after a pause of
   * *pause_ms (0: none); 0 bytes: the script writes no more. */
  size_t (*chunk)(hc_conn *c, int64_t *pause_ms);
  /* What the client does once the script writes no more. */
  enum { HC_KEEP, HC_SHUTDOWN, HC_CLOSE } after;
  /* A pause before each read is parsed (a slow reader) [0]. */
  int64_t read_pause_ms;
  void (*response)(hc_conn *c, const hc_resp *r);
  /* Asked once a response's head is whole: true when it has no body
   * whatever its Content-Length says (the answer to a HEAD). */
  bool (*bodiless)(hc_conn *c);
  /* The connection ended (error: the channel's, or the connect's); true:
   * connect again and write out from c->resume. */
  bool (*closed)(hc_conn *c, int error);
} hc_ops;

struct hc_conn {
  /* The scenario's. */
  const hc_ops *ops;
  uint32_t index;
  const char *out; /* the bytes to write */
  size_t out_len;
  size_t resume;   /* where a new connection starts writing out */
  void *user;
  /* The client's. */
  sh_scn *s;
  sh_channel *ch;  /* NULL while not connected */
  uint32_t gen;    /* connections made */
  bool closing;    /* hc_close called; the channel's hook not yet */
  size_t sent;     /* bytes of out written */
  bool ended;
  int error;       /* the last close's */
  uint32_t responses; /* on this connection */
  int64_t t_connect, t_written, t_response, t_close; /* sh_clock_ms of each */
  hc_parser p;
};

typedef struct hc_world {
  hc_conn *conns;
  uint32_t nconns;
  atomic_uint left; /* connections not yet ended for good */
  const sh_addr *client;
  /* Set: hc_start connects none of the connections; the scenario starts
   * each with hc_connect. */
  bool manual;
  sh_netaddr at;    /* the server */
  /* When set, the workload ends only once the server has no connection
   * open (it must close its ends soon after the clients closed theirs). */
  const sh_http_server *server;
  /* The server's stats once it had none open (the handle is gone after
   * the system's shutdown, so a verify reads these). */
  bool drained;
  sh_http_stats stats;
} hc_world;

/* Spawns the client and starts every connection of w (w->conns, nconns,
 * at set; left is set here). */
int hc_start(sh_scn *s, sh_system *sys, hc_world *w);

/* Connects connection i of w (a world started with `manual`). */
int hc_connect(hc_world *w, uint32_t i);

/* Serves HTTP with cfg on a port of loopback (*srv), then starts the
 * connections conns[0..n) of w against it (hc_start). */
int hc_serve(sh_scn *s, sh_system *sys, const sh_http_config *cfg, sh_http_server **srv,
             hc_world *w, hc_conn *conns, uint32_t n);

/* A script's chunk: all that is left, at once. */
size_t hc_whole(hc_conn *c, int64_t *pause_ms);

/* For a connection whose responses come in request order: checks that r
 * answers request *next with `status` (and, for a 200, with body[0..n))
 * and keeps the connection; then counts it (*next), and closes the
 * connection after the last of total. On a failed check it closes the
 * connection and returns false. */
bool hc_in_order(hc_conn *c, const hc_resp *r, uint32_t *next, uint32_t total, uint16_t status,
                 const char *body, size_t n);

/* Closes c's channel now (from a script's hook). */
void hc_close(hc_conn *c);

/* A response so far (the partial one at a close): false when its head
 * says `status` and its body so far is not a prefix of body. */
bool hc_partial_matches(const hc_conn *c, uint16_t status, const char *body, size_t n);

/* A check that no fault excuses (a response to another request, or out
 * of order, is never a fault's doing): where SH_SCN_CHECK would be
 * excused (a faulty run after a fault fired), it prints its message and
 * aborts (FAIL:assert). */
bool hc_strict_at(sh_scn *s, bool cond, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
#define HC_STRICT(s, cond, ...) hc_strict_at((s), (cond), __FILE__, __LINE__, __VA_ARGS__)

#endif
