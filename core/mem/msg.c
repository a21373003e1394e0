/*
 * Message allocation. The header is intrusive, so a message is one pooled
 * object: alloc, fill, send; the receiver's runtime frees it when done.
 */
#include "mem/msg.h"
#include "base/atomic.h"

#include <stackhouse/net.h>
#include <string.h>

#include "base/check.h"
#include "mem/mem.h"

/* stackhouse.h shows C++ a plain pointer where C has sh_msg *_Atomic: both
 * languages see one layout only while the two are alike. */
_Static_assert(sizeof(sh_msg *_Atomic) == sizeof(sh_msg *) &&
                   _Alignof(sh_msg *_Atomic) == _Alignof(sh_msg *),
               "sh_msg.next: an atomic pointer must be laid out as a plain one");

const sh_msg_type sh_exception_type = {"sh_exception", sizeof(sh_exception), SH_REPLY, 0, NULL,
                                       NULL};
SH_MSG_DEFINE(sh_args, SH_NOTICE, 0);

sh_msg *sh_msg_alloc(const sh_msg_type *t) {
  SH_FROM_USER();
  if (t == NULL || t->size < sizeof(sh_msg)) return NULL;
  sh_msg *m = sh_mem_alloc(t->size);
  if (m == NULL) return NULL;
  /* An unzeroed type's creator initialises its body: zeroing a large
   * message per send would cost more than the send. */
  memset(m, 0, t->flags & SH_MSG_UNZEROED ? sizeof(sh_msg) : t->size);
  m->type = t;
  return m;
}

sh_msg *sh_msg_fill(sh_msg *m, const void *init, size_t size) {
  SH_FROM_USER();
  if (m == NULL) return NULL;
  SH_ASSERT(size == m->type->size);
  memcpy((unsigned char *)m + sizeof(sh_msg), (const unsigned char *)init + sizeof(sh_msg),
         size - sizeof(sh_msg));
  return m;
}

void sh_msg_free(sh_msg *m) {
  SH_FROM_USER();
  if (m == NULL) return;
  if (m->type->drop != NULL) SH_USER_VOID(m->type->drop(m));
  sh_mem_free(m);
}

/* The id that matches a response to its request (net.h). */
void sh_msg_set_id(sh_msg *m, uint64_t id) {
  if (m != NULL) m->id = id;
}

uint64_t sh_msg_id(const sh_msg *m) { return m != NULL ? m->id : 0; }
