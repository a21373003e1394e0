/*
 * The C library's blocking calls, as a simulated program sees them: each
 * fails the run (FAIL:blocking, misuse.c) when called on the simulation's
 * OS thread while a simulation runs, and is the real call otherwise.
 *
 * How they take the place of the C library's: the definitions below are in
 * libstackhouse-sim.a, so a program whose own code calls one of them links
 * this object in, and the linker binds the program's calls here (an
 * executable's definition comes before a shared library's). The C library's
 * own internal calls and the shared libraries' (the sanitizer runtimes
 * among them) keep theirs. The real function is looked up once: a
 * sanitizer's interceptor first (a sanitizer runtime linked into the
 * program defines it weakly, which these definitions replace, and
 * pthread_create must still go through it), else the next definition after
 * the program's (RTLD_NEXT: a sanitizer runtime loaded as a shared library,
 * or the C library).
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "misuse.h"

/* Every call replaced here, by name. */
#define SH_BLOCKING_CALLS(X)                                                        \
  X(nanosleep) X(clock_nanosleep) X(usleep) X(sleep) X(sched_yield) X(poll) X(select) \
  X(epoll_wait) X(pthread_create) X(pthread_join) X(pthread_cond_wait)               \
  X(pthread_cond_timedwait) X(pthread_mutex_lock) X(pthread_mutex_trylock)

#define SH_REAL_ID(fn) SH_REAL_##fn,
#define SH_REAL_NAME(fn) #fn,
enum { SH_BLOCKING_CALLS(SH_REAL_ID) SH_REAL_COUNT };
static const char *const real_names[SH_REAL_COUNT] = {SH_BLOCKING_CALLS(SH_REAL_NAME)};
static void *_Atomic reals[SH_REAL_COUNT];

/* The real function of call `id`. */
static void *real_fn(int id) {
  void *fn = atomic_load_explicit(&reals[id], memory_order_acquire);
  if (fn != NULL) return fn;
  char interceptor[64];
  snprintf(interceptor, sizeof(interceptor), "__interceptor_%s", real_names[id]);
  fn = dlsym(RTLD_DEFAULT, interceptor);
  if (fn == NULL) fn = dlsym(RTLD_NEXT, real_names[id]);
  if (fn == NULL) {
    /* Cannot happen with a C library that has the call; nothing to forward to. */
    dprintf(STDERR_FILENO, "stackhouse-sim: %s not found in the C library\n", real_names[id]);
    abort();
  }
  atomic_store_explicit(&reals[id], fn, memory_order_release);
  return fn;
}

/* All of them before main: a sanitizer runtime linked into the program
 * calls these definitions too (sched_yield while its leak check has
 * stopped the world and holds the allocator's locks), where a first lookup,
 * which allocates, would deadlock. */
__attribute__((constructor)) static void find_reals(void) {
  for (int id = 0; id < SH_REAL_COUNT; id++) (void)real_fn(id);
}

#define SH_REAL(fn) ((__typeof__(&fn))real_fn(SH_REAL_##fn))

/* The body of a replacement: fails the run if `blocks` while simulating on
 * this thread, else calls the real function with the same arguments. */
#define SH_FORWARD(fn, blocks, ...)                                                 \
  do {                                                                              \
    if ((blocks) && sh_simmisuse_simulating_here())                                 \
      sh_simmisuse_blocking(#fn, __builtin_return_address(0));                      \
    return SH_REAL(fn)(__VA_ARGS__);                                                \
  } while (0)

/* ---- sleeps and yields: time that passes outside the virtual clock --------- */

int nanosleep(const struct timespec *req, struct timespec *rem) {
  SH_FORWARD(nanosleep, true, req, rem);
}

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem) {
  SH_FORWARD(clock_nanosleep, true, clock, flags, req, rem);
}

int usleep(useconds_t us) { SH_FORWARD(usleep, true, us); }

unsigned sleep(unsigned s) { SH_FORWARD(sleep, true, s); }

/* On one OS thread there is nobody to yield to: a loop of these is a poll
 * that never lets the fibers it waits for run. */
int sched_yield(void) { SH_FORWARD(sched_yield, true); }

/* ---- waits for file descriptors, with a timeout (a zero timeout is a poll) ---- */

int poll(struct pollfd *fds, nfds_t n, int timeout_ms) {
  SH_FORWARD(poll, timeout_ms != 0, fds, n, timeout_ms);
}

int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *timeout) {
  bool zero = timeout != NULL && timeout->tv_sec == 0 && timeout->tv_usec == 0;
  SH_FORWARD(select, !zero, n, r, w, e, timeout);
}

int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout_ms) {
  SH_FORWARD(epoll_wait, timeout_ms != 0, epfd, ev, max, timeout_ms);
}

/* ---- real threads and their synchronisation ----------------------------------- */

/* A real thread runs beside the fibers, unseen by the scheduler. */
int pthread_create(pthread_t *restrict t, const pthread_attr_t *restrict attr,
                   void *(*fn)(void *), void *restrict arg) {
  SH_FORWARD(pthread_create, true, t, attr, fn, arg);
}

int pthread_join(pthread_t t, void **ret) { SH_FORWARD(pthread_join, true, t, ret); }

/* Only a signal from another OS thread could end these waits. */
int pthread_cond_wait(pthread_cond_t *restrict c, pthread_mutex_t *restrict m) {
  SH_FORWARD(pthread_cond_wait, true, c, m);
}

int pthread_cond_timedwait(pthread_cond_t *restrict c, pthread_mutex_t *restrict m,
                           const struct timespec *restrict abstime) {
  SH_FORWARD(pthread_cond_timedwait, true, c, m, abstime);
}

int pthread_mutex_lock(pthread_mutex_t *m) {
  if (sh_simmisuse_simulating_here()) {
    /* A free mutex is taken as usual; one that another fiber holds is never
     * released while this one waits, as the holder cannot run. */
    int rc = SH_REAL(pthread_mutex_trylock)(m);
    if (rc != EBUSY) return rc;
    sh_simmisuse_blocking("pthread_mutex_lock", __builtin_return_address(0));
  }
  return SH_REAL(pthread_mutex_lock)(m);
}
