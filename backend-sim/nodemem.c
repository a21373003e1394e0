/* TEMPORARY stand-in until the nodemem branch lands. */
#include "nodemem.h"
#include <stdlib.h>
static uint32_t owner;
bool sh_simnodemem_available(void) { return false; }
void sh_simnodemem_set_owner(uint32_t o) { owner = o; }
uint32_t sh_simnodemem_owner(void) { return owner; }
size_t sh_simnodemem_release(uint32_t o, void (*each)(void *ptr, size_t size, void *ctx), void *ctx) { (void)o; (void)each; (void)ctx; return 0; }
uint64_t sh_simnodemem_bytes(uint32_t o) { (void)o; return 0; }
uint64_t sh_simnodemem_count(uint32_t o) { (void)o; return 0; }
uint64_t sh_simnodemem_peak(uint32_t o) { (void)o; return 0; }
void sh_simnodemem_reset(void) {}
void *sh_simraw_malloc(size_t n) { return malloc(n); }
void *sh_simraw_calloc(size_t n, size_t sz) { return calloc(n, sz); }
void *sh_simraw_realloc(void *p, size_t n) { return realloc(p, n); }
void sh_simraw_free(void *p) { free(p); }
