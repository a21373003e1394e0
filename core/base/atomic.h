/*
 * Atomic operations on shared words: the only way core code touches one.
 *
 * In production builds each is the <stdatomic.h> operation it names, with
 * the memory order it is given. In the simulator, where every fiber runs on
 * one OS thread and every atomic is therefore sequentially consistent, each
 * also tells the simulator's memory model (backend-sim/memmodel.c) what it
 * read and wrote: a load weaker than seq_cst may then be handed a value
 * another fiber overwrote lately, as a load on real hardware may read a
 * store not yet visible to it. A load ordered too weakly for the handshake
 * it is part of can thus fail a run in the simulator, as it would on a
 * weakly ordered machine (see docs/simulator.md, "Weak memory and atomic
 * points").
 *
 * The macros take a pointer to an _Atomic object of an integer, bool or
 * pointer type and evaluate each argument once. sh_atomic_init and
 * SH_MEM_FRESH mark memory that begins a new life; SH_MEM_HANDOFF and
 * SH_MEM_RECEIVE plain data handed from thread to thread.
 */
#ifndef SH_ATOMIC_H
#define SH_ATOMIC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef SH_SIM

#define sh_atomic_load(p, mo) atomic_load_explicit((p), (mo))
#define sh_atomic_store(p, v, mo) atomic_store_explicit((p), (v), (mo))
#define sh_atomic_exchange(p, v, mo) atomic_exchange_explicit((p), (v), (mo))
#define sh_atomic_fetch_add(p, v, mo) atomic_fetch_add_explicit((p), (v), (mo))
#define sh_atomic_fetch_sub(p, v, mo) atomic_fetch_sub_explicit((p), (v), (mo))
#define sh_atomic_cas(p, expected, desired, mo_ok, mo_fail)                                        \
  atomic_compare_exchange_strong_explicit((p), (expected), (desired), (mo_ok), (mo_fail))
#define sh_atomic_cas_weak(p, expected, desired, mo_ok, mo_fail)                                   \
  atomic_compare_exchange_weak_explicit((p), (expected), (desired), (mo_ok), (mo_fail))

#define SH_USER(call) (call)
#define SH_USER_VOID(call) call
#define SH_FROM_USER() ((void)0)
#define SH_MEM_FRESH(p, n) ((void)0)
#define SH_MEM_HANDOFF(p) ((void)0)
#define SH_MEM_RECEIVE(p, what) ((void)0)
#define sh_atomic_init(p, v) atomic_init((p), (v))

#else

/* The memory model's side of each operation (backend-sim/memmodel.c), only
 * while it is on (options.stale_permille > 0): off, an operation costs one
 * predicted branch more than in production. A word's value travels as 64
 * bits. */
extern bool sh_plat_mem_on;
/* A store or read-modify-write comes next: with options.atomic_points, a
 * scheduling point, so that a race between any load and the write after it
 * (a read-modify-write split in two, a check then an act) can be
 * scheduled. */
void sh_plat_mem_write_next(void);
/* n bytes at p begin a new life (just allocated or initialized): what the
 * model remembers of stores to them is forgotten, so that no load reads a
 * value of their earlier life (whose free happened before this). */
void sh_plat_mem_fresh(const volatile void *p, size_t n);
uint64_t sh_plat_mem_load(const volatile void *a, uint64_t now, memory_order mo);
/* A store of `after` over `before` with order mo: the value the word is to
 * hold (`after`, or the newer value of another fiber's store this one was
 * ordered before: a delayed store, memmodel.c). */
uint64_t sh_plat_mem_store(const volatile void *a, uint64_t before, uint64_t after,
                           memory_order mo);
void sh_plat_mem_rmw(const volatile void *a, uint64_t before, uint64_t after, memory_order mo);

/* The value of *p's type, without _Atomic (the comma drops qualifiers). */
#define SH_ATOMIC_T(p) __typeof__((void)0, *(p))
#define SH_ATOMIC_U64(v) ((uint64_t)(uintptr_t)(v))
#define SH_ATOMIC_NOW(p) SH_ATOMIC_U64(atomic_load_explicit((p), memory_order_relaxed))

#define SH_MEM_FRESH(p, n)                                                                         \
  (__builtin_expect(sh_plat_mem_on, 0) ? sh_plat_mem_fresh((p), (n)) : (void)0)

/* Plain (non-atomic) data that one thread writes and hands to another
 * through an atomic: the writer marks it handed off once written, before
 * the atomic that hands it over; the receiver marks it received right
 * after the atomic it learned of it by. The simulator checks that the
 * writer's writes happen before the receipt (the handing atomic is a
 * release its receiver acquires), which finds an order weakened on the
 * handing path even though the data itself is not modelled. */
void sh_plat_mem_handoff(const volatile void *p);
void sh_plat_mem_receive(const volatile void *p, const char *what);
#define SH_MEM_HANDOFF(p)                                                                          \
  (__builtin_expect(sh_plat_mem_on, 0) ? sh_plat_mem_handoff(p) : (void)0)
#define SH_MEM_RECEIVE(p, what)                                                                    \
  (__builtin_expect(sh_plat_mem_on, 0) ? sh_plat_mem_receive((p), (what)) : (void)0)
#define sh_atomic_init(p, v)                                                                       \
  __extension__({                                                                                  \
    __auto_type sh_ip_ = (p);                                                                      \
    atomic_init(sh_ip_, (v));                                                                      \
    SH_MEM_FRESH(sh_ip_, sizeof(*sh_ip_));                                                         \
  })

#define sh_atomic_load(p, mo)                                                                      \
  __extension__({                                                                                  \
    __auto_type sh_lp_ = (p);                                                                      \
    memory_order sh_lmo_ = (mo);                                                                   \
    SH_ATOMIC_T(sh_lp_) sh_lv_ = atomic_load_explicit(sh_lp_, sh_lmo_);                            \
    if (__builtin_expect(sh_plat_mem_on, 0))                                                       \
      sh_lv_ = (SH_ATOMIC_T(sh_lp_))(uintptr_t)sh_plat_mem_load(sh_lp_, SH_ATOMIC_U64(sh_lv_),     \
                                                                sh_lmo_);                          \
    sh_lv_;                                                                                        \
  })

#define sh_atomic_store(p, v, mo)                                                                  \
  __extension__({                                                                                  \
    __auto_type sh_sp_ = (p);                                                                      \
    SH_ATOMIC_T(sh_sp_) sh_snew_ = (v);                                                            \
    if (__builtin_expect(sh_plat_mem_on, 0)) {                                                     \
      sh_plat_mem_write_next();                                                                    \
      memory_order sh_smo_ = (mo);                                                                 \
      uint64_t sh_sold_ = SH_ATOMIC_NOW(sh_sp_);                                                   \
      atomic_store_explicit(sh_sp_, sh_snew_, sh_smo_);                                            \
      uint64_t sh_skeep_ = sh_plat_mem_store(sh_sp_, sh_sold_, SH_ATOMIC_U64(sh_snew_), sh_smo_);  \
      if (sh_skeep_ != SH_ATOMIC_U64(sh_snew_))                                                    \
        atomic_store_explicit(sh_sp_, (SH_ATOMIC_T(sh_sp_))(uintptr_t)sh_skeep_,                   \
                              memory_order_relaxed);                                               \
    } else {                                                                                       \
      atomic_store_explicit(sh_sp_, sh_snew_, (mo));                                               \
    }                                                                                              \
  })

/* A read-modify-write `op` of *sh_rp_ with order sh_rmo_ (its result is the
 * value before): the model hears what it read and what it left. */
#define SH_ATOMIC_RMW(p, mo, op)                                                                   \
  __extension__({                                                                                  \
    __auto_type sh_rp_ = (p);                                                                      \
    memory_order sh_rmo_ = (mo);                                                                   \
    if (__builtin_expect(sh_plat_mem_on, 0)) sh_plat_mem_write_next();                             \
    SH_ATOMIC_T(sh_rp_) sh_rold_ = op;                                                             \
    if (__builtin_expect(sh_plat_mem_on, 0))                                                       \
      sh_plat_mem_rmw(sh_rp_, SH_ATOMIC_U64(sh_rold_), SH_ATOMIC_NOW(sh_rp_), sh_rmo_);           \
    sh_rold_;                                                                                      \
  })

#define sh_atomic_exchange(p, v, mo)                                                               \
  SH_ATOMIC_RMW(p, mo, atomic_exchange_explicit(sh_rp_, (v), sh_rmo_))
#define sh_atomic_fetch_add(p, v, mo)                                                              \
  SH_ATOMIC_RMW(p, mo, atomic_fetch_add_explicit(sh_rp_, (v), sh_rmo_))
#define sh_atomic_fetch_sub(p, v, mo)                                                              \
  SH_ATOMIC_RMW(p, mo, atomic_fetch_sub_explicit(sh_rp_, (v), sh_rmo_))

/* A compare-and-exchange reads the newest value whether it succeeds or not
 * (a strong one never fails spuriously, so a failure saw a different
 * value); a failure is a read with mo_fail. */
#define SH_ATOMIC_CAS(p, expected, desired, mo_ok, mo_fail, cas)                                   \
  __extension__({                                                                                  \
    __auto_type sh_cp_ = (p);                                                                      \
    __auto_type sh_ce_ = (expected);                                                               \
    if (__builtin_expect(sh_plat_mem_on, 0)) sh_plat_mem_write_next();                             \
    uint64_t sh_cwas_ = SH_ATOMIC_U64(*sh_ce_);                                                    \
    bool sh_cok_ = cas(sh_cp_, sh_ce_, (desired), (mo_ok), (mo_fail));                             \
    if (__builtin_expect(sh_plat_mem_on, 0)) {                                                     \
      if (sh_cok_)                                                                                 \
        sh_plat_mem_rmw(sh_cp_, sh_cwas_, SH_ATOMIC_NOW(sh_cp_), (mo_ok));                         \
      else                                                                                         \
        sh_plat_mem_rmw(sh_cp_, SH_ATOMIC_U64(*sh_ce_), SH_ATOMIC_U64(*sh_ce_), (mo_fail));        \
    }                                                                                              \
    sh_cok_;                                                                                       \
  })

#define sh_atomic_cas(p, expected, desired, mo_ok, mo_fail)                                        \
  SH_ATOMIC_CAS(p, expected, desired, mo_ok, mo_fail, atomic_compare_exchange_strong_explicit)
#define sh_atomic_cas_weak(p, expected, desired, mo_ok, mo_fail)                                   \
  SH_ATOMIC_CAS(p, expected, desired, mo_ok, mo_fail, atomic_compare_exchange_weak_explicit)

/* The boundary with the program's own code. What the program
 * synchronizes with (its own atomics and locks) the model cannot see, so
 * the fiber is taken to have seen everything so far each time the
 * program's code gives control to the runtime: a call of the public API
 * (SH_FROM_USER, first in each), the return of a handler, filter or hook
 * the runtime called (SH_USER, SH_USER_VOID). */
void sh_plat_mem_sync(void);
#define SH_FROM_USER() (__builtin_expect(sh_plat_mem_on, 0) ? sh_plat_mem_sync() : (void)0)
#define SH_USER(call)                                                                              \
  __extension__({                                                                                  \
    __typeof__(call) sh_ur_ = (call);                                                              \
    SH_FROM_USER();                                                                                \
    sh_ur_;                                                                                        \
  })
#define SH_USER_VOID(call)                                                                         \
  do {                                                                                             \
    call;                                                                                          \
    SH_FROM_USER();                                                                                \
  } while (0)

#endif

#endif
