/*
 * Fibers: stacks and a context switch for the simulator's logical workers.
 * On x86-64 the switch is a few instructions of assembly (callee-saved
 * registers, stack pointer, SSE and x87 control words) and makes no system
 * call; swapcontext() would save and restore the signal mask with a system
 * call on every switch. Other architectures, and builds with CET shadow
 * stacks, fall back to ucontext.
 *
 * Under AddressSanitizer every switch is announced to it
 * (__sanitizer_start/finish_switch_fiber), so stack checks follow the fiber.
 * The simulator is not meant to run under ThreadSanitizer (it is one thread).
 */
#ifndef SH_SIM_FIBER_H
#define SH_SIM_FIBER_H

#include <stdbool.h>
#include <stddef.h>

/* The assembly switch does not maintain CET shadow stacks: a build that
 * enables them (-fcf-protection with shadow stacks) takes ucontext. */
#if defined(__x86_64__) && !(defined(__CET__) && (__CET__ & 2))
#define SH_FIBER_ASM 1
#else
#define SH_FIBER_ASM 0
#include <ucontext.h>
#endif

typedef struct sh_fiber {
#if SH_FIBER_ASM
  void *sp;            /* saved stack pointer while switched out */
#else
  ucontext_t uc;
#endif
  void *stack;         /* mapping (guard page first); NULL for the thread's own stack */
  size_t map_size;
  const void *bottom;  /* usable stack, for the sanitizer */
  size_t size;
  void *fake_stack;    /* the sanitizer's fake stack while switched out */
} sh_fiber;

/* The calling thread's own stack as a fiber (to switch away from and back). */
void sh_fiber_init_self(sh_fiber *f);

/* A new fiber that will run fn(arg) on a stack of `size` bytes (plus a guard
 * page) when first switched to. fn must never return: a finished fiber
 * switches away for good with sh_fiber_exit_to. -errno on failure. */
int sh_fiber_init(sh_fiber *f, size_t size, void (*fn)(void *), void *arg);

/* Frees the stack; f must not be running. */
void sh_fiber_destroy(sh_fiber *f);

/* Saves the current context into `from` and runs `to`; returns when someone
 * switches back to `from`. */
void sh_fiber_switch(sh_fiber *from, sh_fiber *to);

/* Like sh_fiber_switch, for a fiber that will never run again. */
__attribute__((noreturn)) void sh_fiber_exit_to(sh_fiber *from, sh_fiber *to);

/* A fiber's fn calls this first: completes the switch that started it. */
void sh_fiber_started(void);

/* A stack size that suits the build (sanitizers need more). */
size_t sh_fiber_default_stack(void);

#endif
