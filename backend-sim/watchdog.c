/*
 * The real-time watchdog (watchdog.h). A POSIX timer on CLOCK_MONOTONIC
 * signals the simulation's thread every quarter of the limit; the handler
 * compares the step counter with what it saw the last time, and after four
 * ticks in a row without a step it fails the run from inside the hung
 * fiber, where a backtrace shows the loop.
 *
 * The timer is one per process and thread, made at the first arming and
 * kept (a run arms and disarms it: two system calls). A child of fork has
 * no timers, and a simulation may run on another thread than the last one:
 * either makes a new timer. The failure is reported from the signal
 * handler, which is not async-signal-safe past the backtrace; it is the
 * best there is for a process that would otherwise run until killed, and
 * the interrupted code, a loop, holds no lock in the common case.
 */
#include "watchdog.h"

#include <execinfo.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "misuse.h"
#include "run.h"

/* Older C libraries name the target thread's field only by its union. */
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

/* Ticks per limit: a hang is reported within 1 to 1.25 limits. */
#define TICKS 4

static sh_simrun *const S = &sh_simrun_state;

static struct {
  volatile sig_atomic_t armed;
  uint64_t limit_ms;
  uint64_t seen_steps; /* the step counter at the last tick */
  unsigned idle_ticks; /* ticks in a row that saw no step */
  bool made;           /* timer exists, for process pid and thread tid */
  timer_t timer;
  pid_t pid, tid;
  bool installed; /* the handler */
} W;

/* The interrupted instruction, where the machine's context gives it. */
static const void *interrupted_at(const void *uc) {
  const ucontext_t *u = uc;
#if defined(__x86_64__)
  return (const void *)u->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
  return (const void *)u->uc_mcontext.pc;
#else
  (void)u;
  return NULL;
#endif
}

static __attribute__((noreturn)) void fail_hang(const void *uc) {
  sh_simwatchdog_disarm();
  char who[32], at[160], d[512];
  sh_simtab *p = S->tab;
  sh_simmisuse_fiber_name(p, p->cur, who, sizeof(who));
  const char *where = p->f[p->cur].where;
  const void *pc = interrupted_at(uc);
  /* locate() looks up pc - 1, meant for return addresses: pass pc + 1. */
  if (pc != NULL) sh_simmisuse_locate((const char *)pc + 1, at, sizeof(at));
  else snprintf(at, sizeof(at), "(see the backtrace on stderr)");
  snprintf(d, sizeof(d),
           "no scheduling point for %llu ms of real time: %s runs, its last scheduling point "
           "\"%s\"; at %s",
           (unsigned long long)W.limit_ms, who, where != NULL ? where : "(none yet)", at);
  static const char title[] = "simulation: the hung fiber's backtrace:\n";
  (void)!write(STDERR_FILENO, title, sizeof(title) - 1);
  void *frames[32];
  backtrace_symbols_fd(frames, backtrace(frames, 32), STDERR_FILENO);
  sh_simrun_fail("hang", d);
}

static void on_tick(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)si;
  if (!W.armed || S->tab == NULL) return;
  if (S->steps != W.seen_steps) {
    W.seen_steps = S->steps;
    W.idle_ticks = 0;
    return;
  }
  if (++W.idle_ticks >= TICKS) fail_hang(uc);
}

static int install(void) {
  if (W.installed) return 0;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_tick;
  /* SA_RESTART: a tick must not fail the simulation's own system calls. */
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SH_SIMWATCHDOG_SIGNAL, &sa, NULL) != 0) return -1;
  /* backtrace() loads the unwinder on its first call, which allocates:
   * not in the signal handler. */
  void *frame[1];
  (void)backtrace(frame, 1);
  W.installed = true;
  return 0;
}

static int make_timer(void) {
  pid_t pid = getpid(), tid = gettid();
  if (W.made && W.pid == pid && W.tid == tid) return 0;
  if (W.made && W.pid == pid) timer_delete(W.timer);
  W.made = false;
  struct sigevent ev;
  memset(&ev, 0, sizeof(ev));
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SH_SIMWATCHDOG_SIGNAL;
  ev.sigev_notify_thread_id = tid;
  if (timer_create(CLOCK_MONOTONIC, &ev, &W.timer) != 0) return -1;
  W.made = true;
  W.pid = pid;
  W.tid = tid;
  return 0;
}

static void set_period(uint64_t ms) {
  struct itimerspec t;
  t.it_value.tv_sec = (time_t)(ms / 1000);
  t.it_value.tv_nsec = (long)(ms % 1000) * 1000000;
  t.it_interval = t.it_value;
  timer_settime(W.timer, 0, &t, NULL);
}

void sh_simwatchdog_arm(uint64_t limit_ms) {
  if (limit_ms == 0) return;
  /* Without a timer the run goes unwatched, as before the watchdog. */
  if (install() != 0 || make_timer() != 0) return;
  W.limit_ms = limit_ms;
  W.seen_steps = S->steps;
  W.idle_ticks = 0;
  W.armed = 1;
  uint64_t period = limit_ms / TICKS;
  set_period(period > 0 ? period : 1);
}

void sh_simwatchdog_disarm(void) {
  if (!W.armed) return;
  W.armed = 0;
  set_period(0);
}
