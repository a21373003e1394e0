/*
 * What the scenarios of bounded mailboxes and of the outside-thread bridge
 * share (kilim.c: bounded_pipeline and bounded_fifo; bounded_stop.c;
 * bridge_steal.c): an item (the seq-th notice of a producer), CPU work per
 * item, giving up a stalled workload, a consumer's order check, and a
 * bounded mailbox's figures and bound. Defined in kilim.c.
 */
#ifndef SCN_KILIM_H
#define SCN_KILIM_H

#include <stdbool.h>
#include <stdint.h>

#include <stackhouse/scenario.h>

/* An item: the seq-th notice of producer `from`. */
typedef struct kl_item {
  sh_msg hdr;
  uint32_t from, seq;
} kl_item;
SH_MSG_DECLARE(kl_item);

/* CPU work per item, as in stealing.c: xorshift steps the compiler keeps. */
uint64_t kl_burn(uint64_t x, uint32_t steps);

/* A failure that stalls the workload (an item that will never come): end
 * the run so that it reports the check, not a hang. */
void kl_give_up(sh_actor *self);

/* A consumer's checks on an item: a known producer, and from each
 * producer the items come in the order put (next[from] is the seq due). */
bool kl_item_in_order(sh_scn *s, const char *who, uint32_t *next, uint32_t producers,
                      const kl_item *it);

/* The mailbox figures of instance 0; a failed read is a failed check. */
sh_mailbox_stats kl_box_stats(sh_scn *s, const sh_addr *a, sh_msg_kind kind);

/* A bounded mailbox never holds more than its capacity. */
void kl_check_bounded(sh_scn *s, const char *who, const sh_mailbox_stats *ms, uint32_t cap);

#endif
