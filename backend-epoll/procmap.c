/*
 * Clusters of processes (proc.h): the shared mapping, the address map the
 * socket seam applies, and where the program's functions live.
 *
 * Addresses: node K of this process's clusters answers at 127.N.0.K on
 * loopback, where N (1..254) is a /16 this process claimed by binding a
 * UDP socket to 127.N.255.254:64999 for its life (another process's claim
 * fails with EADDRINUSE, so two test programs running clusters at once
 * never share addresses; the kernel drops a claim with its process). What
 * goes to the kernel turns a node's declared address into its loopback
 * one, and what comes back turns it back; in a node process 0.0.0.0 and
 * 127.0.0.1 are its own address, a bind to another node's is refused, and
 * connects and datagrams leave from its own, so its peers see the
 * declared address as the simulator shows it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, dl_iterate_phdr */
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <link.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/check.h"
#include "proc.h"

sh_proc_shm *_Atomic sh_proc_shared;
uint32_t sh_proc_self;

/* The first /16 tried: spread by pid, so claims rarely collide. */
static int claim_net(uint32_t *out) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  uint32_t first = 1 + (uint32_t)getpid() % 254;
  /* Bounded: 254 /16s. */
  for (uint32_t i = 0; i < 254; i++) {
    uint32_t net = 1 + (first - 1 + i) % 254;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(64999),
                             .sin_addr.s_addr = htonl(127u << 24 | net << 16 | 0xfffeu)};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
      *out = net; /* fd stays open (close-on-exec): the claim */
      return 0;
    }
    if (errno != EADDRINUSE) break;
  }
  int err = errno;
  close(fd);
  return -(err != 0 ? err : EADDRINUSE);
}

int sh_proc_map_make(sh_proc_shm **out, int *fd_out) {
  uint32_t net = 0;
  int rc = claim_net(&net);
  if (rc != 0) return rc;
  /* Close-on-exec: a node's spawn hands it over (procnode.c), nothing
   * else the program runs gets it. */
  int fd = memfd_create("stackhouse-cluster", MFD_CLOEXEC);
  if (fd < 0) return -errno;
  if (ftruncate(fd, (off_t)sizeof(sh_proc_shm)) != 0) {
    rc = -errno;
    close(fd);
    return rc;
  }
  sh_proc_shm *m = mmap(NULL, sizeof(sh_proc_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    rc = -errno;
    close(fd);
    return rc;
  }
  m->net = net;
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  rc = -pthread_mutex_init(&m->mu, &a);
  pthread_mutexattr_destroy(&a);
  if (rc != 0) {
    munmap(m, sizeof(sh_proc_shm));
    close(fd);
    return rc;
  }
  *out = m;
  *fd_out = fd;
  return 0;
}

void sh_proc_ring_lock(sh_proc_shm *m) {
  int rc = pthread_mutex_lock(&m->mu);
  /* Its owner died holding it (a crash mid-tell): the ring is whole, as
   * an event counts only once `tail` moved past it. */
  if (rc == EOWNERDEAD) rc = pthread_mutex_consistent(&m->mu);
  SH_ASSERT(rc == 0);
}

/* ---- addresses ---------------------------------------------------------------------- */

uint32_t sh_proc_addr_out(uint32_t ip) {
  sh_proc_shm *m = atomic_load_explicit(&sh_proc_shared, memory_order_acquire);
  if (m == NULL) return ip;
  /* A node's "any" and its loopback are its own address, as a machine's. */
  if ((ip == INADDR_ANY || ip == INADDR_LOOPBACK) && sh_proc_self != 0)
    return m->node[sh_proc_self].lo;
  uint32_t n = atomic_load_explicit(&m->n, memory_order_acquire);
  for (uint32_t k = 1; k <= n && k <= SH_NODE_MAX; k++)
    if (m->node[k].ip == ip) return m->node[k].lo;
  return ip;
}

uint32_t sh_proc_addr_in(uint32_t ip) {
  sh_proc_shm *m = atomic_load_explicit(&sh_proc_shared, memory_order_acquire);
  if (m == NULL || ip >> 16 != (127u << 8 | m->net)) return ip;
  uint32_t n = atomic_load_explicit(&m->n, memory_order_acquire);
  for (uint32_t k = 1; k <= n && k <= SH_NODE_MAX; k++)
    if (m->node[k].lo == ip) return m->node[k].ip;
  return ip;
}

bool sh_proc_addr_foreign(uint32_t ip) {
  sh_proc_shm *m = atomic_load_explicit(&sh_proc_shared, memory_order_acquire);
  if (m == NULL || sh_proc_self == 0 || ip == m->node[sh_proc_self].ip) return false;
  uint32_t n = atomic_load_explicit(&m->n, memory_order_acquire);
  for (uint32_t k = 1; k <= n && k <= SH_NODE_MAX; k++)
    if (m->node[k].ip == ip) return true;
  return false;
}

/* Descriptors (below 65536) a node process has given its source address
 * already, so a datagram socket's sends after the first cost no bind. A
 * descriptor's bit is cleared when a socket is made on it. Relaxed: a bit
 * is only the calling socket's owner's, one thread at a time. */
#define SH_PROC_FDS 65536
static _Atomic uint64_t sourced[SH_PROC_FDS / 64];

void sh_proc_socket_made(int fd) {
  if (sh_proc_self == 0 || fd < 0 || fd >= SH_PROC_FDS) return;
  atomic_fetch_and_explicit(&sourced[fd / 64], ~(1ull << (fd % 64)), memory_order_relaxed);
}

void sh_proc_source(int fd, uint32_t to) {
  sh_proc_shm *m = atomic_load_explicit(&sh_proc_shared, memory_order_acquire);
  /* Only toward loopback: the kernel routes nothing else from a loopback
   * source (a node's connect to a real host leaves as the machine's). */
  if (m == NULL || sh_proc_self == 0 || to >> 24 != 127) return;
  uint64_t bit = 1ull << (fd % 64);
  bool known = fd >= 0 && fd < SH_PROC_FDS;
  if (known && (atomic_load_explicit(&sourced[fd / 64], memory_order_relaxed) & bit) != 0) return;
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_addr.s_addr = htonl(m->node[sh_proc_self].lo)};
  /* EINVAL: bound already (by the node's own sh_net_bind); left as it is. */
  (void)bind(fd, (struct sockaddr *)&sa, sizeof sa);
  if (known) atomic_fetch_or_explicit(&sourced[fd / 64], bit, memory_order_relaxed);
}

/* ---- where functions live --------------------------------------------------------- */

typedef struct find {
  uintptr_t addr;
  uint32_t index;
  bool found;
  sh_proc_loc loc;
} find;

static int find_obj(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  find *f = arg;
  uint32_t i = f->index++;
  if (f->found) return 1;
  /* By locating: the object whose loaded segment holds the address. */
  for (int k = 0; k < info->dlpi_phnum; k++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && f->addr >= lo && f->addr < lo + ph->p_memsz) {
      f->loc = (sh_proc_loc){.obj = i, .off = f->addr - info->dlpi_addr};
      f->found = true;
      return 1;
    }
  }
  return 0;
}

int sh_proc_locate(const void *fn, sh_proc_loc *out) {
  find f = {.addr = (uintptr_t)fn};
  dl_iterate_phdr(find_obj, &f);
  if (!f.found) return -ENOENT;
  *out = f.loc;
  return 0;
}

typedef struct base {
  uint32_t want, index;
  uintptr_t addr;
  bool found;
} base;

static int base_of(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  base *b = arg;
  if (b->index++ != b->want) return 0;
  b->addr = info->dlpi_addr;
  b->found = true;
  return 1;
}

void *sh_proc_resolve(const sh_proc_loc *loc) {
  base b = {.want = loc->obj};
  dl_iterate_phdr(base_of, &b);
  return b.found ? (void *)(b.addr + loc->off) : NULL;
}
