/*
 * Message memory and the runtime's own message types. Messages come from
 * the calling worker's pool (mem.h); freeing returns them to their
 * creator's pool.
 */
#ifndef SH_MSG_H
#define SH_MSG_H

#include <stackhouse/stackhouse.h>

/* An exception reply: the asker's future fails with hdr.error. */
typedef struct sh_exception {
  sh_msg hdr;
} sh_exception;
extern const sh_msg_type sh_exception_type;

#endif
