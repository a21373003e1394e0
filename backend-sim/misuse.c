/*
 * Misuse of the simulator (misuse.h): the failures that name who left the
 * simulated world, and how a culprit is described.
 *
 * Every fiber of a simulation runs on the OS thread that made its platform.
 * A call that blocks that thread (a real sleep, a real lock, a join) stops
 * every fiber with it, and the virtual clock does not see the time pass; a
 * real thread of the program's own runs beside the fibers, unseen by the
 * scheduler. Either gives a stall or a wrong result that no seed repeats,
 * so the run ends at once: FAIL:blocking or FAIL:thread.
 */
#include "misuse.h"
#include "node.h"

#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static sh_simrun *const S = &sh_simrun_state;

_Thread_local bool sh_simmisuse_sim_thread __attribute__((tls_model("initial-exec")));

void sh_simmisuse_bind(void) { sh_simmisuse_sim_thread = true; }

void sh_simmisuse_unbind(void) { sh_simmisuse_sim_thread = false; }

bool sh_simmisuse_simulating_here(void) {
  /* The thread test first: another thread must not read the run's state,
   * which the simulation's thread may be freeing. */
  return sh_simmisuse_sim_thread && sh_simrun_active() != NULL && !S->failing;
}

void sh_simmisuse_fiber_name(const sh_simtab *p, uint32_t i, char *buf, size_t cap) {
  const sh_simrun_fiber *f = &p->f[i];
  const char *node = f->node != 0 ? sh_simnode_name(f->node) : "";
  const char *sp = f->node != 0 ? " " : "";
  if (f->kind == SH_SIMRUN_WORKER)
    snprintf(buf, cap, "%s%sworker %u", node, sp, f->worker);
  else if (f->kind == SH_SIMRUN_OUTSIDE)
    snprintf(buf, cap, "the outside thread");
  else
    snprintf(buf, cap, "%s%sthread fiber %u", node, sp, i - p->root->nworkers - 1);
}

/* What addr2line wants: an offset into a position-independent object, the
 * address itself in a fixed-address executable. */
static uintptr_t file_address(const Dl_info *in, uintptr_t a) {
  const ElfW(Ehdr) *eh = in->dli_fbase;
  return eh != NULL && eh->e_type == ET_DYN ? a - (uintptr_t)eh : a;
}

void sh_simmisuse_locate(const void *addr, char *buf, size_t cap) {
  /* A return address may be one past its function's last byte (a call to
   * a noreturn function): look up the call instruction instead. */
  uintptr_t a = (uintptr_t)addr - 1;
  Dl_info in;
  const ElfW(Sym) *sym = NULL;
  if (dladdr1((void *)a, &in, (void **)&sym, RTLD_DL_SYMENT) == 0 || in.dli_fname == NULL) {
    snprintf(buf, cap, "0x%lx", (unsigned long)addr);
    return;
  }
  /* dladdr names the nearest exported symbol below the address, which is
   * the wrong function for a static one: only a symbol that spans it. */
  uintptr_t s = (uintptr_t)in.dli_saddr;
  bool named = in.dli_sname != NULL && sym != NULL && a >= s && a < s + sym->st_size;
  int n = 0;
  if (named) n = snprintf(buf, cap, "%s+0x%lx, ", in.dli_sname, (unsigned long)(a + 1 - s));
  if (n < 0 || (size_t)n >= cap) return;
  snprintf(buf + n, cap - (size_t)n, "addr2line -e %s 0x%lx", in.dli_fname,
           (unsigned long)file_address(&in, a));
}

/* The whole call chain, for the lines the one-line detail has no room for. */
static void backtrace_to_stderr(const char *title) {
  void *frames[32];
  int n = backtrace(frames, 32);
  dprintf(STDERR_FILENO, "%s\n", title);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
}

void sh_simmisuse_foreign_thread(const char *entry, const void *caller) {
  char at[160], d[512];
  sh_simmisuse_locate(caller, at, sizeof(at));
  snprintf(d, sizeof(d),
           "%s entered from OS thread %d, not the simulation's (use sh_plat threads or a "
           "scenario's outside thread): at %s",
           entry, (int)gettid(), at);
  backtrace_to_stderr("simulation: the foreign thread's backtrace:");
  sh_simrun_fail("thread", d);
}

void sh_simmisuse_blocking(const char *call, const void *caller) {
  char who[32], at[160], d[512];
  sh_simmisuse_fiber_name(S->tab, S->tab->cur, who, sizeof(who));
  sh_simmisuse_locate(caller, at, sizeof(at));
  snprintf(d, sizeof(d),
           "%s called by %s at %s (a real wait or thread stalls or escapes the simulation)",
           call, who, at);
  backtrace_to_stderr("simulation: the blocking call's backtrace:");
  sh_simrun_fail("blocking", d);
}
