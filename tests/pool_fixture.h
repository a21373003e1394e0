/*
 * A pool of its own for the test thread, so that tests of the modules that
 * allocate through mem.h (buffers, pipelines) can count what they hold: a
 * thread that is not a worker would otherwise allocate with plain malloc,
 * which nothing counts. Use pool_fixture_setup / pool_fixture_teardown as a
 * cmocka test's setup and teardown: the teardown fails the test when an
 * object was not given back.
 */
#ifndef TESTS_POOL_FIXTURE_H
#define TESTS_POOL_FIXTURE_H

#include <stdint.h>

#include "plat.h"
#include "mem/pool.h"

static sh_pool fixture_pool;

/* Objects taken from the test's pool and not given back. */
static inline uint64_t pool_fixture_outstanding(void) { return sh_pool_outstanding(&fixture_pool); }
/* Allocations the test's pool served so far. */
static inline uint64_t pool_fixture_allocs(void) { return fixture_pool.allocs; }

static inline int pool_fixture_setup(void **state) {
  (void)state;
  sh_pool_init(&fixture_pool, 64, 4, 1000);
  sh_plat_set_local(&fixture_pool);
  return 0;
}

static inline int pool_fixture_teardown(void **state) {
  (void)state;
  uint64_t left = sh_pool_outstanding(&fixture_pool);
  sh_plat_set_local(NULL);
  sh_pool_destroy(&fixture_pool);
  return left == 0 ? 0 : -1;
}

#endif
