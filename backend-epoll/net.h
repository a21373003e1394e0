/*
 * What backend-epoll/plat.c and backend-epoll/net.c share: the socket half
 * of the platform state (core/netplat.h on Linux).
 *
 * Sockets join their worker's epoll set, next to its wakeup eventfd, so a
 * parked worker wakes for readiness too. sh_plat_park cannot report what it
 * fetched (reports come only from sh_net_poll), and an edge-triggered event
 * once fetched is not fetched again: park keeps it in the worker's stash,
 * which the next sh_net_poll reports first.
 *
 * sh_net_close must drop a closed socket's stashed reports, but an epoll
 * event carries only the token, and the token's memory may be reused by
 * the time the stash is read. So the state keeps, per descriptor, which
 * worker watches it with which token (written by sh_net_watch on any
 * thread, under a mutex), and sh_net_close, on the watching worker's
 * thread, drops that token's reports from the stash at once.
 */
#ifndef SH_EPOLL_NET_H
#define SH_EPOLL_NET_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "netplat.h"

/* Events fetched per epoll_wait, by park and by sh_net_poll; also the
 * stash's size, as a park fetches at most the room left in it. */
#define SH_NET_BATCH 8

/* Reports a park fetched for the next sh_net_poll, oldest first. Touched
 * by the worker's own thread only. */
typedef struct sh_net_stash {
  uint32_t n;
  struct sh_net_report {
    void *token;
    uint32_t events; /* SH_IO_* */
  } ev[SH_NET_BATCH];
} sh_net_stash;

/* Who watches a descriptor: token NULL when nobody does. */
typedef struct sh_net_slot {
  void *token;
  uint32_t worker;
} sh_net_slot;

/* A platform's socket state. */
typedef struct sh_net_state {
  sh_net_ready_fn ready; /* set before the workers start, then only read */
  pthread_mutex_t mu;    /* guards slots and nslots */
  sh_net_slot *slots;    /* indexed by descriptor, grown on demand */
  size_t nslots;
} sh_net_state;

/* net.c, for plat.c. */
int sh_net_state_init(sh_net_state *st);
void sh_net_state_free(sh_net_state *st);
/* Keeps a socket event a park fetched (the stash has room: park asks
 * epoll_wait for no more than that). */
void sh_net_stash_event(sh_net_stash *stash, const struct epoll_event *ev);
/* The calling thread drives p's workers from now on (a worker thread, or a
 * single-threaded driver that parks and polls): sh_net_close finds the
 * watching worker's state through it. */
void sh_net_thread_enter(sh_plat *p);
/* p is being freed: the calling thread forgets it. */
void sh_net_thread_forget(sh_plat *p);

/* plat.c, for net.c. */
sh_net_state *sh_plat_net(sh_plat *p);
sh_net_stash *sh_plat_stash(sh_plat *p, uint32_t w);
int sh_plat_epfd(sh_plat *p, uint32_t w);
uint32_t sh_plat_nworkers(const sh_plat *p);

#endif
