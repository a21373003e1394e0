/* TEMPORARY stand-in until the nodemem branch lands. */
#ifndef SH_SIM_NODEMEM_H
#define SH_SIM_NODEMEM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#define SH_SIMNODEMEM_MAX_OWNERS 64
bool sh_simnodemem_available(void);
void sh_simnodemem_set_owner(uint32_t owner);
uint32_t sh_simnodemem_owner(void);
size_t sh_simnodemem_release(uint32_t owner, void (*each)(void *ptr, size_t size, void *ctx), void *ctx);
uint64_t sh_simnodemem_bytes(uint32_t owner);
uint64_t sh_simnodemem_count(uint32_t owner);
uint64_t sh_simnodemem_peak(uint32_t owner);
void sh_simnodemem_reset(void);
void *sh_simraw_malloc(size_t n);
void *sh_simraw_calloc(size_t n, size_t sz);
void *sh_simraw_realloc(void *p, size_t n);
void sh_simraw_free(void *p);
#endif
