/*
 * The production platform backend: core/plat.h on Linux.
 *
 * One pthread per worker, and one per sh_plat_thread_start (a program's own
 * thread; events are a mutex and a condvar). Each worker owns an epoll instance and an eventfd
 * registered in it; waiting is epoll_wait on that instance and waking is a
 * write to the eventfd. The eventfd is a counter, so a wake sent before the
 * wait leaves it readable and the wait returns at once: no wake is lost.
 * Sockets join the same epoll set (net.c), so their readiness ends a wait
 * too, and the wait reports it (sh_plat_wait: a worker's sleep and its IO
 * poll are one call).
 *
 * No global mutable state: everything lives in sh_plat or in thread-locals.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setname_np, getrandom, SYS_gettid */
#endif

#include "plat.h"
#include "base/check.h"

#include "net.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Events fetched per epoll_wait. Anything not fetched in one call is fetched
 * by the next (an edge-triggered socket stays on the ready list until it is
 * fetched; the eventfd is level-triggered), so a small array costs nothing
 * in correctness. */
#define SH_PLAT_MAX_EVENTS 8

/* sh_plat_worker_index when the thread is not one of our workers. */
#define SH_PLAT_NOT_A_WORKER UINT32_MAX

typedef struct sh_plat_worker {
  sh_plat *plat;   /* back pointer, so the thread start routine needs one arg */
  uint32_t index;
  int epfd;        /* -1 when not created */
  int evfd;        /* -1 when not created */
  pthread_t thread;
  bool started;    /* thread created and not yet joined */
} sh_plat_worker;

struct sh_plat {
  sh_plat_entry entry;
  void *ctx;
  sh_net_state net;
  uint32_t nworkers;
  sh_plat_worker workers[];
};

struct sh_plat_event {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* on CLOCK_MONOTONIC, the clock of sh_plat_now_ns */
  bool set;          /* under mu */
};

struct sh_plat_thread {
  pthread_t thread;
  void (*fn)(void *arg);
  void *arg;
};

_Thread_local void *sh_plat_tls_local; /* plat.h reads it inline */
static _Thread_local uint32_t sh_plat_tls_worker = SH_PLAT_NOT_A_WORKER;
static _Thread_local uint64_t sh_plat_tls_rng;
static _Thread_local bool sh_plat_tls_rng_seeded;
/* The platform whose workers this thread drives (sh_plat_current). */
static _Thread_local sh_plat *sh_plat_tls_plat;

/* ---- creation ------------------------------------------------------------ */

static void sh_plat_close_fds(sh_plat *p) {
  for (uint32_t i = 0; i < p->nworkers; i++) {
    if (p->workers[i].evfd >= 0) close(p->workers[i].evfd);
    if (p->workers[i].epfd >= 0) close(p->workers[i].epfd);
    p->workers[i].evfd = -1;
    p->workers[i].epfd = -1;
  }
}

/* Creates worker w's epoll set with its eventfd in it. On failure the fds
 * already made stay in w (for sh_plat_close_fds) and -errno is returned. */
static int sh_plat_worker_init(sh_plat_worker *w) {
  w->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (w->epfd < 0) return -errno;
  w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (w->evfd < 0) return -errno;
  /* data.ptr NULL marks the wakeup fd; registered sockets will carry their
   * own non-NULL pointer. Level-triggered so an undrained wake fires again. */
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &ev) < 0) return -errno;
  return 0;
}

/* The socket state (net.h): its lock, and no slot yet. */
static int sh_plat_net_init(sh_net_state *st) {
  memset(st, 0, sizeof *st);
  return -pthread_mutex_init(&st->mu, NULL);
}

static void sh_plat_net_free(sh_net_state *st) {
  pthread_mutex_destroy(&st->mu);
  free(st->slots);
  st->slots = NULL;
  st->nslots = 0;
}

int sh_plat_new(uint32_t workers, sh_plat **out) {
  assert(out != NULL);
  if (workers < 1) return -EINVAL;
  sh_plat *p = calloc(1, sizeof *p + (size_t)workers * sizeof p->workers[0]);
  if (p == NULL) return -ENOMEM;
  p->nworkers = workers;
  int rc = sh_plat_net_init(&p->net);
  if (rc < 0) {
    free(p);
    return rc;
  }
  /* Mark every fd absent first so a failure half way can close just what exists. */
  for (uint32_t i = 0; i < workers; i++) {
    p->workers[i].plat = p;
    p->workers[i].index = i;
    p->workers[i].epfd = -1;
    p->workers[i].evfd = -1;
  }
  for (uint32_t i = 0; i < workers; i++) {
    rc = sh_plat_worker_init(&p->workers[i]);
    if (rc < 0) {
      sh_plat_close_fds(p);
      sh_plat_net_free(&p->net);
      free(p);
      return rc;
    }
  }
  *out = p;
  return 0;
}

void sh_plat_free(sh_plat *p) {
  if (p == NULL) return;
  for (uint32_t i = 0; i < p->nworkers; i++)
    assert(!p->workers[i].started && "sh_plat_free before sh_plat_join");
  sh_plat_close_fds(p);
  sh_plat_net_free(&p->net);
  if (sh_plat_tls_plat == p) sh_plat_tls_plat = NULL;
  free(p);
}

sh_net_state *sh_plat_net(sh_plat *p) { return &p->net; }
int sh_plat_epfd(sh_plat *p, uint32_t w) { return p->workers[w].epfd; }
uint32_t sh_plat_nworkers(const sh_plat *p) { return p->nworkers; }
sh_plat *sh_plat_current(void) { return sh_plat_tls_plat; }

/* ---- threads ------------------------------------------------------------- */

static void *sh_plat_thread_main(void *arg) {
  sh_plat_worker *w = arg;
  /* The name is only a debugger aid: "sh-worker-N" must fit the 16-byte
   * kernel limit, so very large indices are truncated and failure ignored. */
  char name[16];
  snprintf(name, sizeof name, "sh-worker-%u", (unsigned)w->index);
  (void)pthread_setname_np(pthread_self(), name);
  sh_plat_tls_worker = w->index;
  sh_plat_tls_plat = w->plat;
  w->plat->entry(w->plat->ctx, w->index);
  return NULL;
}

int sh_plat_start(sh_plat *p, sh_plat_entry entry, void *ctx) {
  assert(p != NULL && entry != NULL);
  p->entry = entry;
  p->ctx = ctx;
  for (uint32_t i = 0; i < p->nworkers; i++) {
    sh_plat_worker *w = &p->workers[i];
    assert(!w->started && "sh_plat_start called twice without join");
    int rc = pthread_create(&w->thread, NULL, sh_plat_thread_main, w);
    /* pthread_create reports through its return value, not errno. The
     * threads already running are left alone: the caller stops and joins. */
    if (rc != 0) return -rc;
    w->started = true;
  }
  return 0;
}

void sh_plat_join(sh_plat *p) {
  assert(p != NULL);
  for (uint32_t i = 0; i < p->nworkers; i++) {
    sh_plat_worker *w = &p->workers[i];
    if (!w->started) continue;
    int rc = pthread_join(w->thread, NULL);
    assert(rc == 0);
    (void)rc;
    w->started = false;
  }
}


void sh_plat_set_local(void *ctx) { sh_plat_tls_local = ctx; }

/* ---- time and randomness ------------------------------------------------- */

uint32_t sh_plat_cpu_count(void) {
  /* The affinity mask, not the machine: a container or taskset may give us fewer. */
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return (uint32_t)n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (uint32_t)n : 1;
}

uint64_t sh_plat_now_ns(void) {
  struct timespec ts;
  int rc = clock_gettime(CLOCK_MONOTONIC, &ts);
  assert(rc == 0); /* CLOCK_MONOTONIC cannot fail on Linux */
  (void)rc;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t sh_plat_wall_ns(void) {
  struct timespec ts;
  int rc = clock_gettime(CLOCK_REALTIME, &ts);
  assert(rc == 0); /* CLOCK_REALTIME cannot fail on Linux */
  (void)rc;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The splitmix64 output function: a bijective avalanche mix. */
static uint64_t sh_plat_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* A seed from the kernel; if getrandom is unavailable or would block (early
 * boot), mix the clocks and the thread id so threads still get distinct
 * streams. Addresses are not used, to keep ASLR secrets out of the output. */
static uint64_t sh_plat_seed(void) {
  uint64_t seed;
  if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == (ssize_t)sizeof seed) return seed;
  struct timespec mono, real;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  uint64_t tid = (uint64_t)syscall(SYS_gettid);
  seed = sh_plat_mix64((uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec);
  seed = sh_plat_mix64(seed ^ ((uint64_t)real.tv_sec * 1000000000u + (uint64_t)real.tv_nsec));
  return sh_plat_mix64(seed ^ tid);
}

uint64_t sh_plat_random(void) {
  if (!sh_plat_tls_rng_seeded) {
    sh_plat_tls_rng = sh_plat_seed();
    sh_plat_tls_rng_seeded = true;
  }
  /* splitmix64: a Weyl sequence through the mix; every seed is a full-period stream. */
  sh_plat_tls_rng += UINT64_C(0x9e3779b97f4a7c15);
  return sh_plat_mix64(sh_plat_tls_rng);
}

/* ---- waiting and waking ---------------------------------------------------- */

/* epoll_wait's timeout for an absolute deadline: -1 for none, 0 if past (a
 * poll, SH_PLAT_POLL without reading the clock), else the remaining time
 * rounded UP to whole ms so the wait is never early. Very far deadlines
 * are capped at INT_MAX ms, an allowed spurious return. */
static int sh_plat_timeout_ms(uint64_t deadline_ns) {
  if (deadline_ns == SH_PLAT_NO_DEADLINE) return -1;
  if (deadline_ns == SH_PLAT_POLL) return 0;
  uint64_t now = sh_plat_now_ns();
  if (deadline_ns <= now) return 0;
  uint64_t rem = deadline_ns - now;
  uint64_t ms = rem / 1000000u + (rem % 1000000u != 0);
  return ms > (uint64_t)INT_MAX ? INT_MAX : (int)ms;
}

/* Resets the wakeup counter. EAGAIN means it was already drained, which is
 * fine. A wake landing between epoll_wait and this read is absorbed, but the
 * wait is returning anyway and the core rechecks its state after every wait. */
static void sh_plat_drain(int evfd) {
  uint64_t n;
  ssize_t r = read(evfd, &n, sizeof n);
  assert(r == (ssize_t)sizeof n || errno == EAGAIN || errno == EINTR);
  (void)r;
}

/* An epoll event's bits as core/netplat.h names them. */
static uint32_t sh_plat_io_bits(uint32_t ep) {
  uint32_t ev = 0;
  if (ep & EPOLLIN) ev |= SH_IO_IN;
  if (ep & EPOLLOUT) ev |= SH_IO_OUT;
  if (ep & (EPOLLRDHUP | EPOLLHUP)) ev |= SH_IO_HUP;
  if (ep & EPOLLERR) ev |= SH_IO_ERR;
  return ev;
}

/* Reports the socket events among evs[0..n) to fn, at once (nothing
 * fetched is kept); drains the wakeup eventfd if it is among them and the
 * fetch could sleep (a poll leaves a wake for the next sleep). How many. */
static uint32_t sh_plat_report(sh_plat_worker *wk, const struct epoll_event *evs, int n,
                               bool could_sleep, sh_net_ready_fn fn) {
  SH_ASSERT(n <= SH_PLAT_MAX_EVENTS); /* epoll fills at most the array it was given */
  uint32_t got = 0;
  for (int i = 0; i < n; i++) {
    if (evs[i].data.ptr == NULL) {
      if (could_sleep) sh_plat_drain(wk->evfd);
      continue;
    }
    assert(fn != NULL && "sh_net_set_ready before a socket is watched");
    fn(evs[i].data.ptr, sh_plat_io_bits(evs[i].events));
    got++;
  }
  return got;
}

uint32_t sh_plat_wait(sh_plat *p, uint32_t w, uint64_t deadline_ns, uint32_t max) {
  assert(p != NULL && w < p->nworkers && max > 0);
  /* Only worker w waits on w; threads that are not workers (tests, a
   * single-threaded driver) may wait on any index. */
  assert(sh_plat_tls_worker == SH_PLAT_NOT_A_WORKER || sh_plat_tls_worker == w);
  sh_plat_tls_plat = p;
  sh_plat_worker *wk = &p->workers[w];
  struct epoll_event evs[SH_PLAT_MAX_EVENTS];
  /* Only the first epoll_wait may sleep; the next ones take what else is
   * ready while a full batch says there may be more. */
  int timeout = sh_plat_timeout_ms(deadline_ns);
  uint32_t done = 0;
  for (;;) { /* bounded by max: each pass reports at least one, or ends */
    uint32_t room = max - done;
    int want = room < SH_PLAT_MAX_EVENTS ? (int)room : SH_PLAT_MAX_EVENTS;
    int n = epoll_wait(wk->epfd, evs, want, timeout);
    /* EINTR (a signal) is an allowed spurious return; anything else is a bad fd. */
    assert(n >= 0 || errno == EINTR);
    uint32_t got = sh_plat_report(wk, evs, n, timeout != 0, p->net.ready);
    SH_ASSERT(got <= (uint32_t)want); /* a report per event epoll gave, at most */
    done += got;
    SH_ASSERT(done <= max); /* at most `max` reports (plat.h) */
    if (n != want || got == 0 || done == max) return done;
    timeout = 0;
  }
}

void sh_plat_wake(sh_plat *p, uint32_t w) {
  assert(p != NULL && w < p->nworkers);
  uint64_t one = 1;
  ssize_t r = write(p->workers[w].evfd, &one, sizeof one);
  /* EAGAIN: the counter is saturated, so the fd is already readable and the
   * wake is delivered anyway. */
  assert(r == (ssize_t)sizeof one || errno == EAGAIN);
  (void)r;
}

void sh_plat_yield_cpu(void) { sched_yield(); }

void sh_plat_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* ---- events ------------------------------------------------------------ */

/* The condvar's timed waits take absolute times on sh_plat_now_ns's clock,
 * so a deadline passes through unconverted (and a change of the wall clock
 * cannot stretch or cut a wait). */
static int sh_plat_cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t attr;
  int rc = pthread_condattr_init(&attr);
  if (rc != 0) return -rc;
  rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  if (rc == 0) rc = pthread_cond_init(cv, &attr);
  pthread_condattr_destroy(&attr);
  return -rc;
}

int sh_plat_event_new(sh_plat_event **out) {
  assert(out != NULL);
  sh_plat_event *e = calloc(1, sizeof *e);
  if (e == NULL) return -ENOMEM;
  int rc = pthread_mutex_init(&e->mu, NULL);
  if (rc != 0) {
    free(e);
    return -rc;
  }
  rc = sh_plat_cond_init_monotonic(&e->cv);
  if (rc != 0) {
    pthread_mutex_destroy(&e->mu);
    free(e);
    return rc;
  }
  *out = e;
  return 0;
}

void sh_plat_event_free(sh_plat_event *e) {
  if (e == NULL) return;
  pthread_cond_destroy(&e->cv);
  pthread_mutex_destroy(&e->mu);
  free(e);
}

/* Broadcasts while holding the mutex, so a waiter cannot return (and free
 * the event) until the setter is done with the condvar; the setter's last
 * touch is the unlock, which POSIX allows to race with destroy. */
void sh_plat_event_set(sh_plat_event *e) {
  assert(e != NULL);
  pthread_mutex_lock(&e->mu);
  e->set = true;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
}

void sh_plat_event_reset(sh_plat_event *e) {
  assert(e != NULL);
  pthread_mutex_lock(&e->mu);
  e->set = false;
  pthread_mutex_unlock(&e->mu);
}

void sh_plat_event_wait(sh_plat_event *e) {
  (void)sh_plat_event_wait_until(e, SH_PLAT_NO_DEADLINE);
}

int sh_plat_event_wait_until(sh_plat_event *e, uint64_t deadline_ns) {
  assert(e != NULL);
  struct timespec at = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                        .tv_nsec = (long)(deadline_ns % 1000000000u)};
  pthread_mutex_lock(&e->mu);
  /* Not bounded by a count: each pass ends with a set, the deadline, or a
   * spurious condvar wakeup, after which the conditions are checked again.
   * The clock is read again rather than trusting ETIMEDOUT, so a timed-out
   * return is never before the deadline on sh_plat_now_ns. */
  while (!e->set) {
    if (deadline_ns == SH_PLAT_NO_DEADLINE) {
      pthread_cond_wait(&e->cv, &e->mu);
      continue;
    }
    if (sh_plat_now_ns() >= deadline_ns) break;
    int rc = pthread_cond_timedwait(&e->cv, &e->mu, &at);
    assert(rc == 0 || rc == ETIMEDOUT);
    (void)rc;
  }
  int rc = e->set ? 0 : -ETIMEDOUT;
  pthread_mutex_unlock(&e->mu);
  return rc;
}

/* ---- threads that are not workers ---------------------------------------- */

static void *sh_plat_thread_run(void *arg) {
  sh_plat_thread *t = arg;
  /* Only a debugger aid, like the workers' names; failure is ignored. */
  (void)pthread_setname_np(pthread_self(), "sh-thread");
  t->fn(t->arg);
  return NULL;
}

int sh_plat_thread_start(void (*fn)(void *arg), void *arg, sh_plat_thread **out) {
  if (fn == NULL || out == NULL) return -EINVAL;
  sh_plat_thread *t = calloc(1, sizeof *t);
  if (t == NULL) return -ENOMEM;
  t->fn = fn;
  t->arg = arg;
  /* pthread_create reports through its return value, not errno. */
  int rc = pthread_create(&t->thread, NULL, sh_plat_thread_run, t);
  if (rc != 0) {
    free(t);
    return -rc;
  }
  *out = t;
  return 0;
}

void sh_plat_thread_join(sh_plat_thread *t) {
  assert(t != NULL);
  int rc = pthread_join(t->thread, NULL);
  assert(rc == 0);
  (void)rc;
  free(t);
}
