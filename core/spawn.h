/*
 * Spawning actors (sh_spawn, sh_spawn_on) and freeing their houses.
 */
#ifndef SH_SPAWN_H
#define SH_SPAWN_H

#include "house.h"

/* Frees house h and everything it still holds (messages, gates, table,
 * actor); no worker may reach it any more, and it has no live stack. */
void sh_spawn_house_free(sh_house *h);

#endif
