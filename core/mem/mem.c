/*
 * Pool-or-malloc allocation for runtime objects (see mem.h).
 */
#include "mem/mem.h"

void *sh_mem_alloc(size_t size) { return sh_pool_alloc(sh_mem_pool(), size); }

void sh_mem_free(void *p) { sh_pool_free(sh_mem_pool(), p); }
