/*
 * What backend-epoll/plat.c and backend-epoll/net.c share: the socket half
 * of the platform state (core/netplat.h on Linux). The calls go one way:
 * net.c asks plat.c for the state below and a worker's epoll set; plat.c
 * calls nothing of net.c.
 *
 * Sockets join their worker's epoll set, next to its wakeup eventfd, so a
 * sleeping worker wakes for readiness too. The worker's wait (plat.c,
 * sh_plat_wait) is the only caller of epoll_wait and hands every socket
 * event it fetched to the readiness function before it returns: nothing
 * fetched waits anywhere, so a close has nothing to take back.
 *
 * sh_net_close takes a socket out of the epoll set it is in (a close does
 * that only once no other descriptor shares the socket, and a descriptor
 * inherited by a child process would keep reporting a token whose memory
 * is gone). An epoll event carries only the token, so the state keeps, per
 * descriptor, which worker watches it (written by sh_net_watch on any
 * thread, under a mutex).
 */
#ifndef SH_EPOLL_NET_H
#define SH_EPOLL_NET_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "netplat.h"

/* Who watches a descriptor: token NULL when nobody does. */
typedef struct sh_net_slot {
  void *token;
  uint32_t worker;
} sh_net_slot;

/* A platform's socket state; plat.c makes and frees it. */
typedef struct sh_net_state {
  sh_net_ready_fn ready; /* set before the workers start, then only read */
  pthread_mutex_t mu;    /* guards slots and nslots */
  sh_net_slot *slots;    /* indexed by descriptor, grown on demand */
  size_t nslots;
} sh_net_state;

/* plat.c, for net.c. */
sh_net_state *sh_plat_net(sh_plat *p);
int sh_plat_epfd(sh_plat *p, uint32_t w);
uint32_t sh_plat_nworkers(const sh_plat *p);
/* The platform whose workers the calling thread drives (a worker thread,
 * or a thread that drives one by calling sh_plat_wait), or NULL:
 * sh_net_close's way to the state of the socket it closes. */
sh_plat *sh_plat_current(void);

#endif
