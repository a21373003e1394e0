/*
 * Fibers for the simulator (fiber.h).
 */
#include "fiber.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define SH_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SH_FIBER_ASAN 1
#endif
#endif

#ifdef SH_FIBER_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

/* The fiber we are switching away from: its sanitizer stack bounds are
 * learned from the side that resumes (the thread's own stack has no known
 * bounds until then). One thread only: the simulator's. */
static sh_fiber *switching_from;

size_t sh_fiber_default_stack(void) {
#ifdef SH_FIBER_ASAN
  return 4u << 20; /* ASan's redzones multiply frame sizes */
#else
  return 512u << 10;
#endif
}

void sh_fiber_init_self(sh_fiber *f) { memset(f, 0, sizeof(*f)); }

/* Called on the resumed side of every switch. */
static void finish_switch(sh_fiber *self) {
#ifdef SH_FIBER_ASAN
  const void *bottom;
  size_t size;
  __sanitizer_finish_switch_fiber(self != NULL ? self->fake_stack : NULL, &bottom, &size);
  if (switching_from != NULL && switching_from->stack == NULL) {
    switching_from->bottom = bottom;
    switching_from->size = size;
  }
#else
  (void)self;
#endif
  switching_from = NULL;
}

static void start_switch(sh_fiber *from, sh_fiber *to, bool exiting) {
  switching_from = from;
#ifdef SH_FIBER_ASAN
  __sanitizer_start_switch_fiber(exiting ? NULL : &from->fake_stack, to->bottom, to->size);
#else
  (void)to;
  (void)exiting;
#endif
}

void sh_fiber_started(void) { finish_switch(NULL); }

/* Below each stack: an inaccessible guard, large enough that a frame of up
 * to this size overflowing the stack faults instead of landing in the next
 * fiber's stack (gcc does not probe large frames without
 * -fstack-clash-protection). */
#define SH_FIBER_GUARD (64u << 10)

static int map_stack(sh_fiber *f, size_t size) {
  long page = sysconf(_SC_PAGESIZE);
  size_t pg = page > 0 ? (size_t)page : 4096;
  size_t guard = (SH_FIBER_GUARD + pg - 1) / pg * pg;
  size = (size + pg - 1) / pg * pg;
  void *m = mmap(NULL, size + guard, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (m == MAP_FAILED) return -errno;
  if (mprotect(m, guard, PROT_NONE) != 0) {
    int e = -errno;
    munmap(m, size + guard);
    return e;
  }
  f->stack = m;
  f->map_size = size + guard;
  f->bottom = (char *)m + guard;
  f->size = size;
  return 0;
}

void sh_fiber_destroy(sh_fiber *f) {
#ifdef SH_FIBER_ASAN
  /* A fiber destroyed half-way (a node's crash) never unwound its frames:
   * their redzones would stay poisoned for the next stack mapped here. */
  if (f->stack != NULL) __asan_unpoison_memory_region(f->stack, f->map_size);
#endif
  if (f->stack != NULL) munmap(f->stack, f->map_size);
  memset(f, 0, sizeof(*f));
}

#if SH_FIBER_ASM

/* sh_fiber_swap(void **save_sp, void *new_sp): pushes the callee-saved
 * registers and the MXCSR / x87 control words, saves the stack pointer,
 * loads the other one and pops the same frame from it. A new fiber's stack
 * is prepared with such a frame whose return address is the trampoline. */
void sh_fiber_swap(void **save_sp, void *new_sp);
__asm__(".pushsection .text\n"
        ".globl sh_fiber_swap\n"
        ".type sh_fiber_swap,@function\n"
        "sh_fiber_swap:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  stmxcsr (%rsp)\n"
        "  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n"
        "  fldcw 4(%rsp)\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size sh_fiber_swap,.-sh_fiber_swap\n"
        /* Entered by sh_fiber_swap's ret with r12 = arg, r13 = fn and a
         * 16-byte aligned stack, as a call expects. fn never returns. */
        ".type sh_fiber_trampoline,@function\n"
        "sh_fiber_trampoline:\n"
        "  movq %r12, %rdi\n"
        "  callq *%r13\n"
        "  ud2\n"
        ".size sh_fiber_trampoline,.-sh_fiber_trampoline\n"
        ".popsection\n");
void sh_fiber_trampoline(void);

int sh_fiber_init(sh_fiber *f, size_t size, void (*fn)(void *), void *arg) {
  memset(f, 0, sizeof(*f));
  int rc = map_stack(f, size);
  if (rc != 0) return rc;
  uintptr_t top = ((uintptr_t)f->bottom + f->size) & ~(uintptr_t)15;
  /* The frame sh_fiber_swap pops: control words, r15, r14, r13, r12, rbx,
   * rbp, return address; 16 bytes of slack above keep it aligned. */
  uint64_t *sp = (uint64_t *)(top - 80);
  /* The creator's MXCSR and x87 control word, as a new thread inherits them. */
  uint32_t mxcsr;
  uint16_t fpucw;
  __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
  __asm__ volatile("fnstcw %0" : "=m"(fpucw));
  sp[0] = mxcsr | ((uint64_t)fpucw << 32);
  sp[1] = 0;
  sp[2] = 0;
  sp[3] = (uint64_t)(uintptr_t)fn;
  sp[4] = (uint64_t)(uintptr_t)arg;
  sp[5] = 0;
  sp[6] = 0;
  sp[7] = (uint64_t)(uintptr_t)sh_fiber_trampoline;
  f->sp = sp;
  return 0;
}

void sh_fiber_switch(sh_fiber *from, sh_fiber *to) {
  start_switch(from, to, false);
  sh_fiber_swap(&from->sp, to->sp);
  finish_switch(from);
}

void sh_fiber_exit_to(sh_fiber *from, sh_fiber *to) {
  start_switch(from, to, true);
  sh_fiber_swap(&from->sp, to->sp);
  __builtin_unreachable();
}

#else /* portable fallback: ucontext (a signal-mask system call per switch) */

_Static_assert(sizeof(uintptr_t) == 8, "the ucontext fallback splits 64-bit pointers");

static void sh_fiber_uc_entry(unsigned fh, unsigned fl, unsigned ah, unsigned al) {
  void (*fn)(void *) = (void (*)(void *))(((uintptr_t)fh << 32) | fl);
  fn((void *)(((uintptr_t)ah << 32) | al));
}

int sh_fiber_init(sh_fiber *f, size_t size, void (*fn)(void *), void *arg) {
  memset(f, 0, sizeof(*f));
  int rc = map_stack(f, size);
  if (rc != 0) return rc;
  if (getcontext(&f->uc) != 0) {
    rc = -errno;
    sh_fiber_destroy(f);
    return rc;
  }
  f->uc.uc_stack.ss_sp = (void *)f->bottom;
  f->uc.uc_stack.ss_size = f->size;
  f->uc.uc_link = NULL;
  /* makecontext passes int arguments: split the pointers in two. */
  uintptr_t a = (uintptr_t)arg, p = (uintptr_t)fn;
  makecontext(&f->uc, (void (*)(void))sh_fiber_uc_entry, 4, (unsigned)(p >> 32), (unsigned)p,
              (unsigned)(a >> 32), (unsigned)a);
  return 0;
}

void sh_fiber_switch(sh_fiber *from, sh_fiber *to) {
  start_switch(from, to, false);
  swapcontext(&from->uc, &to->uc);
  finish_switch(from);
}

void sh_fiber_exit_to(sh_fiber *from, sh_fiber *to) {
  start_switch(from, to, true);
  setcontext(&to->uc);
  __builtin_unreachable();
}

#endif
