/*
 * Channel pipelines of several stages, drawn (pipestage.h): a TCP echo
 * server and a UDP echo channel, each with its own drawn stack of stages
 * (transform, split, merge, tag, drop, pass on, and in some runs a stage
 * that fails), and a plain client that sends a reference stream over TCP
 * (netref.h: byte k a function of k, in drawn writes, then a shutdown) and
 * numbered datagrams of distinct sizes over UDP, and checks the echoes.
 *
 * What is checked:
 *   - every stage runs in the order net.h gives: inbound head to tail
 *     through the stages that have an inbound, outbound tail to head
 *     through those that have an outbound (each message's stamp);
 *   - the tail sees the stream, byte for byte, xored with every XOR
 *     stage's mask (the stages' transforms, in any split or merge), and
 *     only requests: the TAG stages' unasked responses are dropped at the
 *     tail, their requests arrive unless a DROP stage above swallowed them,
 *     as many as were due; a mark the tail writes is swallowed by DROP on
 *     its way out (one reaching the head would close the channel);
 *   - the far end gets the stream back exactly (the masks cancel);
 *   - a stage that fails closes the channel with its error, and nothing
 *     past its threshold went through it; without a failing stage (and
 *     without faults) the channel closes cleanly with every byte (every
 *     datagram) across;
 *   - the closed callbacks run once per stage, tail first, with the close's
 *     error.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include <stackhouse/net.h>
#include <stackhouse/scenario.h>

#include "netref.h"
#include "pipestage.h"

#define KEY_TCP 0x5150u
#define KEY_UDP 0x7000u
#define MAX_LEN 12000u
#define MAX_DGRAMS 20u
#define DGRAM_STEP 61u /* datagram k holds 1 + k * DGRAM_STEP bytes: its size names it */
/* Rounds of the UDP client: it sends every datagram not yet echoed, then
 * naps; past the longest partition (200 ms) and any run of losses. */
#define UDP_ROUNDS 60u
#define UDP_NAP_MS 5

/* The server's side of a channel: its stages' record first (channel data). */
typedef struct srvside {
  ps_chan pc;
  uint64_t at_tail; /* TCP: stream bytes the tail saw */
  uint32_t marks_at_tail;
  nr_events ev;
} srvside;

typedef struct world {
  ps_plan tcp, udp;
  uint32_t ndgrams, chunk_max;
  srvside stcp, sudp;
  sh_netaddr tcp_at, udp_at;
  const sh_addr *client;
  /* the client */
  sh_channel *ctcp, *cudp;
  bool opening_udp; /* the client's UDP OPEN comes inside its open */
  uint64_t echoed;
  uint32_t got[MAX_DGRAMS], unique, rounds;
  atomic_bool udp_closed; /* the server's UDP side closed: no more echoes */
  nr_events cev;
  atomic_uint left;
  char desc[2][200];
} world;

/* ---- the server ------------------------------------------------------------------- */

/* The UDP side (instance 1, spawned after the TCP server listens): opens
 * its channel, then starts the client, which reads both addresses after
 * that start. */
static void server_mount(sh_actor *self) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  if (sh_scn_id(self) != 1) return;
  sh_channel_opts o = {0};
  ps_opts(&wd->udp, &o);
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  sh_channel *ch;
  int rc = sh_udp_open(self, &any, &o, &ch);
  if (rc == 0) sh_channel_local(ch, &wd->udp_at);
  SH_SCN_CHECK(s, rc == 0 || sh_scn_fault_error(s, rc), "udp open: %d", rc);
  int krc = sh_scn_kick(wd->client);
  SH_SCN_CHECK(s, krc == 0 || sh_scn_fault_error(s, krc), "kick: %d", krc);
}

static void server_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  srvside *sd = sh_channel_data(ch);
  if (ev == SH_CHANNEL_OPEN && sd == NULL) {
    sd = sh_scn_id(self) == 1 ? &wd->sudp : &wd->stcp;
    SH_SCN_CHECK(s, !sd->ev.open, "%s: a second channel", sd->pc.who);
    sh_channel_set_data(ch, sd);
  }
  if (sd == NULL) return;
  nr_note(s, &sd->ev, sd->pc.who, 0, ev, error);
  /* seq_cst: read by the client's actor. */
  if (sd == &wd->sudp && ev == SH_CHANNEL_CLOSED) atomic_store(&wd->udp_closed, true);
}

/* The echo of a TCP request: its bytes, checked, go back. */
static sh_msg *tcp_echo(sh_scn *s, world *wd, sh_bytes *b) {
  ps_check(s, &b->buf, KEY_TCP, ps_mask(&wd->tcp), &wd->stcp.at_tail, "tcp tail");
  sh_bytes *r = sh_bytes_new(NULL, 0);
  if (r != NULL && sh_buf_move(&r->buf, &b->buf, sh_buf_len(&b->buf)) != 0) {
    sh_msg_free(&r->hdr);
    r = NULL;
  }
  return r != NULL ? &r->hdr : NULL;
}

/* The echo of a datagram: its size names it, its bytes are checked. */
static sh_msg *udp_echo(sh_scn *s, world *wd, sh_datagram *d) {
  size_t len = sh_buf_len(&d->buf);
  uint32_t k = len > 0 ? (uint32_t)((len - 1) / DGRAM_STEP) : UINT32_MAX;
  if (!SH_SCN_CHECK(s, len > 0 && (len - 1) % DGRAM_STEP == 0 && k < wd->ndgrams,
                    "udp tail: a datagram of %zu bytes", len))
    return NULL;
  uint64_t at = 0;
  ps_check(s, &d->buf, KEY_UDP + k, ps_mask(&wd->udp), &at, "udp tail");
  sh_datagram *r = sh_datagram_new(&d->peer, NULL, 0);
  if (r != NULL && sh_buf_move(&r->buf, &d->buf, len) != 0) {
    sh_msg_free(&r->hdr);
    r = NULL;
  }
  return r != NULL ? &r->hdr : NULL;
}

static sh_yield server_channel(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  sh_channel *ch = sh_stack_channel(st);
  srvside *sd = sh_channel_data(ch);
  sh_msg *m = sh_stack_msg(st);
  if (sd == NULL) return sh_return(st, NULL);
  const ps_plan *p = sd->pc.plan;
  SH_SCN_CHECK(s, sh_msg_id(m) == ps_tail_stamp(p), "%s: a request stamped %llu, want %llu",
               sd->pc.who, (unsigned long long)sh_msg_id(m),
               (unsigned long long)ps_tail_stamp(p));
  if (ps_body(m) == NULL) {
    SH_SCN_CHECK(s, ps_is_mark(m) && m->type->kind == SH_NOTICE, "%s: a %s reached a stack",
                 sd->pc.who, m->type->name);
    sd->marks_at_tail++;
    return sh_return(st, NULL);
  }
  sh_msg *r = p->udp ? udp_echo(s, wd, (sh_datagram *)m) : tcp_echo(s, wd, (sh_bytes *)m);
  bool drops = false;
  for (uint32_t i = 0; i < p->n; i++) drops |= p->st[i].kind == PS_DROP;
  if (r != NULL && drops) {
    sh_msg *mark = ps_mark_new(p);
    int rc = mark != NULL ? sh_channel_write(ch, mark) : -ENOMEM;
    SH_SCN_CHECK(s, rc == 0 || sh_scn_fault_error(s, rc) || (rc == -EPIPE && sd->pc.failed),
                 "%s: a mark for DROP: %d", sd->pc.who, rc);
  }
  if (r != NULL) sh_msg_set_id(r, ps_from_tail(p));
  return sh_return(st, r);
}

static const sh_actor_class server_class = {
    .name = "pipe_server",
    .size = sizeof(sh_scn_actor),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .mount = server_mount,
    .channel = server_channel,
    .channel_event = server_event,
};

/* ---- the client --------------------------------------------------------------------- */

typedef struct clocals {
  sh_future *f;
  bool last;
} clocals;

enum { C_CONNECTED = 1, C_NAP };

static void open_udp(sh_actor *self, sh_scn *s, world *wd) {
  if (wd->udp_at.port == 0) return;
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  wd->opening_udp = true;
  int rc = sh_udp_open(self, &any, NULL, &wd->cudp);
  wd->opening_udp = false;
  SH_SCN_CHECK(s, rc == 0 || sh_scn_fault_error(s, rc), "client udp open: %d", rc);
}

/* Every datagram not echoed yet (all of them in the first round). */
static void send_datagrams(sh_scn *s, world *wd) {
  int rc = 0;
  for (uint32_t k = 0; rc == 0 && k < wd->ndgrams; k++) {
    if (wd->got[k] != 0) continue;
    sh_datagram *d = sh_datagram_new(&wd->udp_at, NULL, 0);
    rc = d == NULL ? -ENOMEM : nr_fill(&d->buf, KEY_UDP + k, 0, 0, 1 + k * DGRAM_STEP);
    if (rc == 0) rc = sh_channel_write(wd->cudp, &d->hdr);
    else if (d != NULL) sh_msg_free(&d->hdr);
  }
  SH_SCN_CHECK(s, rc == 0 || sh_scn_fault_error(s, rc), "datagram: %d", rc);
}

/* Whether the UDP client goes on: echoes missing and the server's side
 * open (once closed, one more round lets the last echoes in). */
static bool udp_more(world *wd, bool *last) {
  if (wd->cudp == NULL || wd->unique == wd->ndgrams || wd->rounds >= UDP_ROUNDS || *last)
    return false;
  /* seq_cst: a flag of the other actor's; the nap orders nothing else. */
  *last = atomic_load(&wd->udp_closed);
  return true;
}

/* The stream in drawn writes, then the end of it. */
static void send_stream(sh_scn *s, world *wd, sh_channel *ch) {
  int rc = 0;
  /* Bounded by the stream's length: each write takes at least a byte. */
  for (uint64_t at = 0; rc == 0 && at < wd->tcp.len;) {
    uint64_t n = 1 + sh_scn_below(s, wd->chunk_max);
    if (n > wd->tcp.len - at) n = wd->tcp.len - at;
    sh_bytes *b = nr_bytes(KEY_TCP, 0, at, n);
    rc = b == NULL ? -ENOMEM : sh_channel_write(ch, &b->hdr);
    at += n;
  }
  if (rc == 0) rc = sh_channel_shutdown(ch);
  SH_SCN_CHECK(s, rc == 0 || sh_scn_fault_error(s, rc) || rc == -EPIPE, "stream: %d", rc);
}

static sh_yield client_notice(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  clocals *l = sh_stack_locals(st);
  switch (sh_stack_state(st)) {
  case SH_START:
    open_udp(self, s, wd);
    l->f = sh_tcp_connect(st, &wd->tcp_at, NULL);
    return l->f != NULL ? sh_suspend(st, C_CONNECTED) : sh_throw(st, -ENOMEM);
  case C_CONNECTED:
    if (sh_future_failed(l->f)) {
      int rc = sh_future_error(l->f);
      SH_SCN_CHECK(s, sh_scn_fault_error(s, rc), "connect: %d", rc);
      sh_scn_count_down(s, sh_actor_system(self), &wd->left);
    } else {
      send_stream(s, wd, sh_future_reply(l->f, sh_channel_msg)->ch);
    }
    break;
  default:
    break;
  }
  /* Bounded by UDP_ROUNDS rounds. */
  if (udp_more(wd, &l->last)) {
    if (!l->last) send_datagrams(s, wd);
    wd->rounds++;
    l->f = sh_sleep(st, UDP_NAP_MS);
    if (l->f != NULL) return sh_suspend(st, C_NAP);
  }
  sh_scn_count_down(s, sh_actor_system(self), &wd->left);
  return sh_return(st, NULL);
}

static sh_yield client_channel(sh_actor *self, sh_stack *st) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  if (sh_stack_channel(st) == wd->ctcp) {
    ps_check(s, &sh_stack_msg_as(st, sh_bytes)->buf, KEY_TCP, 0, &wd->echoed, "tcp echo");
    return sh_return(st, NULL);
  }
  sh_datagram *d = sh_stack_msg_as(st, sh_datagram);
  size_t len = sh_buf_len(&d->buf);
  uint32_t k = len > 0 ? (uint32_t)((len - 1) / DGRAM_STEP) : UINT32_MAX;
  uint64_t at = 0;
  bool whole = len > 0 && (len - 1) % DGRAM_STEP == 0 && k < wd->ndgrams;
  if (SH_SCN_CHECK(s, whole, "udp echo: a datagram of %zu bytes", len) &&
      ps_check(s, &d->buf, KEY_UDP + k, 0, &at, "udp echo") && wd->got[k]++ == 0)
    wd->unique++;
  return sh_return(st, NULL);
}

static void client_event(sh_actor *self, sh_channel *ch, int ev, int error) {
  sh_scn *s = sh_scn_of(self);
  world *wd = sh_scn_state(s);
  if (wd->opening_udp) return;
  if (ch == wd->cudp) {
    if (ev == SH_CHANNEL_CLOSED) wd->cudp = NULL;
    return;
  }
  if (ev == SH_CHANNEL_OPEN) wd->ctcp = ch;
  if (ch != wd->ctcp) return;
  nr_note(s, &wd->cev, "tcp client", 0, ev, error);
  if (ev != SH_CHANNEL_CLOSED) return;
  wd->ctcp = NULL;
  sh_scn_count_down(s, sh_actor_system(self), &wd->left);
}

static const sh_actor_class client_class = {
    .name = "pipe_client",
    .size = sizeof(sh_scn_actor),
    .locals_size = sizeof(clocals),
    .kind = SH_IO_ACTOR,
    .init = sh_scn_actor_init,
    .notice = client_notice,
    .channel = client_channel,
    .channel_event = client_event,
};

/* ---- the run -------------------------------------------------------------------------- */

static int setup(sh_scn *s, sh_system *sys) {
  world *wd = sh_scn_state(s);
  uint64_t len = sh_scn_below(s, 4) == 0 ? sh_scn_below(s, 64) : sh_scn_below(s, MAX_LEN + 1);
  ps_draw(s, &wd->tcp, len, false);
  wd->ndgrams = 1 + (uint32_t)sh_scn_below(s, MAX_DGRAMS);
  ps_draw(s, &wd->udp, wd->ndgrams, true);
  wd->chunk_max = 1 + (uint32_t)sh_scn_below(s, 5000);
  wd->stcp.pc = (ps_chan){.s = s, .plan = &wd->tcp, .who = wd->desc[0]};
  wd->sudp.pc = (ps_chan){.s = s, .plan = &wd->udp, .who = wd->desc[1]};
  memcpy(wd->desc[0], "tcp ", 4);
  ps_describe(&wd->tcp, wd->desc[0] + 4, sizeof wd->desc[0] - 4);
  memcpy(wd->desc[1], "udp ", 4);
  ps_describe(&wd->udp, wd->desc[1] + 4, sizeof wd->desc[1] - 4);
  atomic_store(&wd->left, 2); /* the TCP client's close, the UDP naps' end */
  int rc = sh_scn_spawn(s, sys, &client_class, 1, 1, &wd->client);
  sh_channel_opts o = {0};
  ps_opts(&wd->tcp, &o);
  sh_tcp_server *srv = NULL;
  sh_netaddr any = {.ip = 0x7f000001, .port = 0};
  const sh_scn_arg arg = {s, 0};
  if (rc == 0) rc = sh_tcp_serve(sys, &any, &server_class, (void *)&arg, 1, &o, &srv);
  if (rc == 0) rc = sh_tcp_server_addr(srv, &wd->tcp_at);
  /* The UDP side's mount kicks the client once both sides listen. */
  const sh_addr *udp_side;
  if (rc == 0) rc = sh_scn_spawn(s, sys, &server_class, 1, 1, &udp_side);
  return rc;
}

/* What a side's stages and its close say, against its plan. */
static void verify_side(sh_scn *s, const srvside *sd, uint64_t through, uint64_t due) {
  const ps_plan *p = sd->pc.plan;
  /* A fault may cut the run before the side opened or got its plan. */
  if (!sd->ev.open || p == NULL) return;
  int fail = ps_fail_at(p);
  bool clean = !sh_scn_faulty(s);
  SH_SCN_CHECK(s, sd->pc.closed_calls == p->n && sd->pc.closed_err == sd->ev.err,
               "%s: %u closed calls with %d, closed with %d", sd->pc.who, sd->pc.closed_calls,
               sd->pc.closed_err, sd->ev.err);
  SH_SCN_CHECK(s, !sd->pc.failed || sd->ev.err == p->fail_err,
               "%s: a stage failed, the channel closed with %d", sd->pc.who, sd->ev.err);
  if (fail >= 0) {
    SH_SCN_CHECK(s, through <= p->st[fail].param, "%s: %llu through a stage that fails past %u",
                 sd->pc.who, (unsigned long long)through, p->st[fail].param);
    SH_SCN_CHECK(s, !clean || sd->pc.failed, "%s: the failing stage never failed", sd->pc.who);
    return;
  }
  SH_SCN_CHECK(s, !clean || through == due, "%s: %llu echoed, want %llu", sd->pc.who,
               (unsigned long long)through, (unsigned long long)due);
  /* UDP: a datagram the network doubled, or one sent again, may still
   * wait in the server's queue at the end; a mark never comes from nowhere. */
  bool exact = clean && !p->udp;
  SH_SCN_CHECK(s, sd->marks_at_tail <= sd->pc.marks_due &&
                      (!exact || sd->marks_at_tail == sd->pc.marks_due),
               "%s: %u marks reached the tail, %u due", sd->pc.who, sd->marks_at_tail,
               sd->pc.marks_due);
  SH_SCN_CHECK(s, due == 0 || sd->pc.calls > 0, "%s: no stage ran", sd->pc.who);
}

static void verify(sh_scn *s, sh_system *sys, const sh_stats *st) {
  (void)sys, (void)st;
  world *wd = sh_scn_state(s);
  verify_side(s, &wd->stcp, wd->echoed, wd->tcp.len);
  if (ps_fail_at(&wd->tcp) < 0 && wd->stcp.ev.open && !sh_scn_faulty(s))
    SH_SCN_CHECK(s, wd->stcp.ev.err == 0 && wd->cev.closed && wd->cev.err == 0,
                 "%s: closed with %d, the client with %d", wd->desc[0], wd->stcp.ev.err,
                 wd->cev.err);
  verify_side(s, &wd->sudp, wd->unique, wd->ndgrams);
}

static const sh_scenario net_pipe = {
    .name = "net_pipe",
    .summary = "drawn pipeline stages over TCP and UDP: order, transforms, drops, a failing stage",
    .flags = SH_SCN_NET,
    .state_size = sizeof(world),
    .setup = setup,
    .verify = verify,
};
SH_SCENARIO(net_pipe);
