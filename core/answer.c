/*
 * Answering: how a stack ends (sh_return, sh_throw) and what its asker
 * hears; a batch ask stack answers each ask of its batch, with copies of
 * one reply where the handler gave one for all.
 */
#include "chanhooks.h"
#include "check.h"
#include "atomic.h"
#include "house.h"
#include "msg.h"
#include "stack.h"

static bool is_reply(const sh_msg *m) { return m != NULL && m->type->kind == SH_REPLY; }

/* Refuses the ask of batch entry e, or of an ask stack. Without memory for
 * an exception the ask's own message carries the refusal, but only once the
 * stack finishes (sh_stack_pay_refusals): until its handler returns, the
 * handler may still read the message, which the asker frees. */
static void refuse_entry(sh_batch_entry *e, int error) {
  if (!sh_house_refuse(e->reply_to, e->ask_id, error)) e->owed = error;
}

static void refuse_stack(sh_stack *st, int error) {
  if (!sh_house_refuse(st->reply_to, st->ask_id, error)) st->owed = error;
}

void sh_stack_pay_refusals(sh_stack *st) {
  if (st->owed != 0) {
    sh_house_refuse_in(st->reply_to, st->ask_id, st->owed, st->msg);
    st->msg = NULL;
  }
  for (uint32_t i = 0; i < st->nbatch; i++) {
    sh_batch_entry *e = &st->batch[i];
    if (e->owed == 0) continue;
    sh_house_refuse_in(e->reply_to, e->ask_id, e->owed, e->msg);
    e->msg = NULL;
  }
}

/* A copy of reply for one more asker of a batch; NULL when it cannot be copied. */
static sh_msg *copy_reply(const sh_msg *reply) {
  if (reply->type->drop != NULL) return NULL; /* owns resources: a shallow copy would double-free */
  sh_msg *c = sh_msg_alloc(reply->type);
  if (c == NULL) return NULL;
  return sh_msg_fill(c, reply, reply->type->size);
}

/* Answers every ask of the batch not answered yet: with copies of reply
 * (the last one gets reply itself), or with `error` when reply is NULL. A
 * reply that cannot be copied (its type owns resources, or no memory) fails
 * the asks it could not reach with -EINVAL / -ENOMEM. */
static void answer_batch(sh_stack *st, sh_msg *reply, int error) {
  uint32_t last = st->nbatch;
  for (uint32_t i = 0; i < st->nbatch; i++)
    if (!st->batch[i].answered) last = i;
  /* Bounded by the batch (at most the house's max_batch entries). */
  SH_ASSERT(st->nbatch <= st->house->max_batch);
  for (uint32_t i = 0; i < st->nbatch; i++) {
    sh_batch_entry *e = &st->batch[i];
    if (e->answered) continue;
    e->answered = true;
    if (reply == NULL) {
      refuse_entry(e, error);
    } else if (i == last) {
      sh_house_reply(e->reply_to, e->ask_id, reply);
      reply = NULL;
    } else {
      sh_msg *r = copy_reply(reply);
      if (r != NULL)
        sh_house_reply(e->reply_to, e->ask_id, r);
      else
        refuse_entry(e, reply->type->drop != NULL ? -EINVAL : -ENOMEM);
    }
  }
  sh_msg_free(reply); /* no ask was left to answer */
}

sh_yield sh_return(sh_stack *st, sh_msg *reply) {
  SH_FROM_USER();
  SH_ASSERT(st != NULL && !st->done);
  st->done = true;
  switch (st->kind) {
  case SH_STACK_ASK:
    if (is_reply(reply)) {
      sh_house_reply(st->reply_to, st->ask_id, reply);
    } else {
      refuse_stack(st, reply == NULL ? -ENODATA : -EINVAL);
      sh_msg_free(reply);
    }
    break;
  case SH_STACK_BATCH_ASK:
    if (reply != NULL && !is_reply(reply)) {
      sh_msg_free(reply);
      reply = NULL;
    }
    answer_batch(st, reply, -ENODATA);
    break;
  case SH_STACK_CHANNEL:
    sh_chanflow_result(st, reply, 0); /* written to the channel in its turn */
    break;
  default:
    sh_msg_free(reply); /* nobody to answer for a notice */
    break;
  }
  return SH_RETURN;
}

sh_yield sh_throw(sh_stack *st, int error) {
  SH_FROM_USER();
  SH_ASSERT(st != NULL && !st->done);
  if (error >= 0) error = -EPROTO;
  st->done = true;
  if (st->kind == SH_STACK_ASK) refuse_stack(st, error);
  if (st->kind == SH_STACK_BATCH_ASK) answer_batch(st, NULL, error);
  if (st->kind == SH_STACK_CHANNEL) sh_chanflow_result(st, NULL, error);
  return SH_RETURN;
}

int sh_batch_reply(sh_stack *st, size_t i, sh_msg *reply) {
  SH_FROM_USER();
  if (st == NULL || st->kind != SH_STACK_BATCH_ASK || i >= st->nbatch || !is_reply(reply) ||
      st->batch[i].answered || st->done) {
    sh_msg_free(reply);
    return -EINVAL;
  }
#ifdef SH_MUTANT_answer_batch_reply_unmarked
  /* Planted bug: the entry is not marked answered: the stack's end answers it again. */
#else
  st->batch[i].answered = true;
#endif
  sh_house_reply(st->batch[i].reply_to, st->batch[i].ask_id, reply);
  return 0;
}

