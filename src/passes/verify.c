/* verify: replays every rank's communication calls under the executor's
 * blocking semantics and reports the first disagreement.
 *
 * Model (docs/verify.md): a collective blocks until every rank of its group
 * is at a collective on the same group (mesh-axis mask); the k-th collective
 * a rank issues on a group meets the k-th of every other member, and then
 * they must agree. A Send posts into its sender->receiver channel and goes
 * on while fewer than `p2p_buffer` of its messages wait there (0: it waits
 * for the Recv); a Recv takes the oldest message of its channel, which must
 * carry its tag, dtype and shape. At the end of a run each rank waits until
 * its sends are received. When no rank can move and some have not finished,
 * the waits are followed from the first stuck rank: to a finished rank (a
 * missing collective, an unmatched Send or Recv) or around a cycle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "passes/events.h"

static const char *const kind_names[] = {
#define CCG__KIND_STR(name, str) str,
    CCG_VERIFY_KIND_LIST(CCG__KIND_STR)
#undef CCG__KIND_STR
};
_Static_assert(sizeof kind_names / sizeof kind_names[0] ==
                   CCG_VERIFY_KIND_COUNT,
               "one name per verify kind");

const char *ccg_verify_kind_name(ccg_verify_kind k) {
  return (unsigned)k < CCG_VERIFY_KIND_COUNT ? kind_names[k] : "invalid";
}

/* A FIFO of messages (the sender's events) on one directed channel. */
typedef struct chan {
  const ccg__cev **q;
  size_t head, tail, cap;
  int64_t sent, taken;
} chan;

typedef struct sim {
  ccg__program *p;
  int W;
  size_t *pc;
  bool *done;
  chan *ch; /* [from * W + to] */
  int buffer;
  size_t calls;
  ccg_verify_report *rep;
} sim;

static chan *chan_of(sim *s, int64_t from, int64_t to) {
  return &s->ch[from * s->W + to];
}

static const ccg__cev *cur(const sim *s, int r) {
  return s->pc[r] < s->p->n_ev[r] ? &s->p->ev[r][s->pc[r]] : NULL;
}

/* Records the disagreement; returns -1 (stop). */
static int report(sim *s, ccg_verify_kind kind, const ccg__cev *a,
                  const ccg__cev *b, int rank_b, int64_t pos, const char *fmt,
                  ...) CCG_PRINTF(7, 8);
static int report(sim *s, ccg_verify_kind kind, const ccg__cev *a,
                  const ccg__cev *b, int rank_b, int64_t pos, const char *fmt,
                  ...) {
  ccg_verify_report *r = s->rep;
  r->kind = kind;
  r->rank_a = a->rank;
  r->rank_b = b ? b->rank : rank_b;
  snprintf(r->node_a, sizeof r->node_a, "%s", a->node);
  snprintf(r->node_b, sizeof r->node_b, "%s", b ? b->node : "");
  r->position = pos;
  if (ccg__is_p2p(a->op))
    snprintf(r->group, sizeof r->group, "%d->%lld",
             a->op == CCG_OP_SEND ? a->rank : (int)a->peer,
             (long long)(a->op == CCG_OP_SEND ? a->peer : a->rank));
  else
    ccg__group_str(s->p, a, r->group, sizeof r->group);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
  return -1;
}

/* ---- collectives ----------------------------------------------------------
 */

/* "AllReduce 'mlp/AllReduce_3' on rank 1" */
#define WHO(e) ccg_op_name((e)->op), (e)->node, (e)->rank
#define WHO_FMT "%s '%s' on rank %d"

static int coll_header(const sim *s, const ccg__cev *a, char *buf,
                       size_t size) {
  char g[96];
  return snprintf(buf, size, "position %lld of the collectives over %s",
                  (long long)a->pos, ccg__group_str(s->p, a, g, sizeof g));
}

/* Elements rank a's event sends to group rank j of an AllToAll. */
static int64_t a2a_chunk(const ccg__cev *e, bool send, int j, int64_t *dim,
                         bool *numeric) {
  const ccg__vshape *v = send ? e->in : e->out;
  int axis = send ? e->axis : e->axis2;
  const int64_t *list = send ? e->split : e->split2;
  char buf[CCG__VSYM_MAX * 4];
  int64_t rest;
  *numeric = ccg__vshape_numel(v, axis, &rest, buf, sizeof buf);
  if (list)
    *dim = list[j];
  else
    *dim = v->d[axis].n >= 0 ? v->d[axis].n / e->gsize : -1;
  return *dim >= 0 ? rest * *dim : -1;
}

/* "axis 0", "split_axis 1, concat_axis 0", "shift 1, rotate 1" */
static const char *axis_str(const ccg__cev *e, char *buf, size_t size) {
  if (e->op == CCG_OP_ALL_TO_ALL)
    snprintf(buf, size, "split_axis %d, concat_axis %d", e->axis, e->axis2);
  else if (e->op == CCG_OP_COLLECTIVE_PERMUTE)
    snprintf(buf, size, "shift %lld, rotate %lld", (long long)e->shift,
             (long long)e->rotate);
  else
    snprintf(buf, size, "axis %d", e->axis);
  return buf;
}

/* Checks group rank 0's call a against b; 0 if they agree. */
static int coll_compare(sim *s, const ccg__cev *a, const ccg__cev *b) {
  /* the header is text for a report only: made when one is */
  char h[160], sa[160], sb[160];
#define H (coll_header(s, a, h, sizeof h), h)
  if (a->op != b->op)
    return report(s, CCG_VERIFY_OP, a, b, -1, a->pos,
                  "op mismatch at %s: " WHO_FMT " but " WHO_FMT, H, WHO(a),
                  WHO(b));
  if (a->dtype != b->dtype)
    return report(
        s, CCG_VERIFY_DTYPE, a, b, -1, a->pos,
        "dtype mismatch at %s: " WHO_FMT " is %s but " WHO_FMT " is %s", H,
        WHO(a), ccg_dtype_name(a->dtype), WHO(b), ccg_dtype_name(b->dtype));
  if (a->rop != b->rop)
    return report(s, CCG_VERIFY_REDUCE_OP, a, b, -1, a->pos,
                  "reduce_op mismatch at %s: " WHO_FMT
                  " reduces with %s but " WHO_FMT " with %s",
                  H, WHO(a), ccg_reduce_op_name((ccg_reduce_op)a->rop), WHO(b),
                  ccg_reduce_op_name((ccg_reduce_op)b->rop));
  if (a->root != b->root)
    return report(s, CCG_VERIFY_ROOT, a, b, -1, a->pos,
                  "root mismatch at %s: " WHO_FMT " has root %lld but " WHO_FMT
                  " has root %lld",
                  H, WHO(a), (long long)a->root, WHO(b), (long long)b->root);
  if (a->axis != b->axis || a->axis2 != b->axis2 || a->shift != b->shift ||
      a->rotate != b->rotate) {
    char xa[64], xb[64];
    return report(
        s, CCG_VERIFY_AXIS, a, b, -1, a->pos,
        "axis mismatch at %s: " WHO_FMT " works on %s but " WHO_FMT " on %s", H,
        WHO(a), axis_str(a, xa, sizeof xa), WHO(b), axis_str(b, xb, sizeof xb));
  }
  int W = a->gsize;
  if (a->op == CCG_OP_ALL_GATHER || a->op == CCG_OP_REDUCE_SCATTER) {
    bool both = a->split && b->split;
    if ((a->split != NULL) != (b->split != NULL) ||
        (both && memcmp(a->split, b->split, (size_t)W * sizeof(int64_t))))
      return report(s, CCG_VERIFY_SPLITS, a, b, -1, a->pos,
                    "split_sizes mismatch at %s: " WHO_FMT " and " WHO_FMT
                    " split dim %d differently",
                    H, WHO(a), WHO(b), a->axis);
  }
  const ccg__vshape *va = a->op == CCG_OP_RECV ? a->out : a->in;
  const ccg__vshape *vb = b->op == CCG_OP_RECV ? b->out : b->in;
  int skip = -1;
  if (a->op == CCG_OP_ALL_GATHER || a->op == CCG_OP_ALL_TO_ALL)
    skip = a->axis; /* each rank's own share along it */
  /* equal shapes have equal counts: the count's text (formatted) is made
   * only when they differ */
  if (ccg__vshape_equal(va, vb, skip))
    return 0;
  char ca[CCG__VSYM_MAX * 4], cb[CCG__VSYM_MAX * 4];
  int64_t na, nb;
  bool numa = ccg__vshape_numel(va, skip, &na, ca, sizeof ca);
  bool numb = ccg__vshape_numel(vb, skip, &nb, cb, sizeof cb);
  if (numa != numb || na != nb || strcmp(ca, cb) != 0)
    return report(s, CCG_VERIFY_COUNT, a, b, -1, a->pos,
                  "count mismatch at %s: " WHO_FMT " has %s (%lld%s%s "
                  "elements%s) but " WHO_FMT " has %s (%lld%s%s elements%s)",
                  H, WHO(a), ccg__vshape_str(va, sa, sizeof sa), (long long)na,
                  numa ? "" : "*", ca, skip >= 0 ? " besides its share" : "",
                  WHO(b), ccg__vshape_str(vb, sb, sizeof sb), (long long)nb,
                  numb ? "" : "*", cb, skip >= 0 ? " besides its share" : "");
  if (!ccg__vshape_equal(va, vb, skip))
    return report(s, CCG_VERIFY_SHAPE, a, b, -1, a->pos,
                  "shape mismatch at %s: " WHO_FMT " has %s but " WHO_FMT
                  " has %s",
                  H, WHO(a), ccg__vshape_str(va, sa, sizeof sa), WHO(b),
                  ccg__vshape_str(vb, sb, sizeof sb));
#undef H
  return 0;
}

/* AllToAll: group rank i sends in_splits[j] to j, which expects
 * out_splits[i] from i; every ordered pair, itself included. */
static int a2a_pairs(sim *s, const ccg__cev *e) {
  char h[160];
  coll_header(s, e, h, sizeof h);
  for (int i = 0; i < e->gsize; i++)
    for (int j = 0; j < e->gsize; j++) {
      const ccg__cev *x = cur(s, (int)e->group[i]);
      const ccg__cev *y = cur(s, (int)e->group[j]);
      int64_t dx, dy;
      bool nx, ny;
      int64_t cx = a2a_chunk(x, true, j, &dx, &nx);
      int64_t cy = a2a_chunk(y, false, i, &dy, &ny);
      if (nx && ny && cx != cy)
        return report(s, CCG_VERIFY_SPLITS, x, y, -1, x->pos,
                      "split mismatch at %s: " WHO_FMT
                      " sends in_splits[%d]=%lld (%lld elements) to rank %d, "
                      "but " WHO_FMT " expects out_splits[%d]=%lld (%lld "
                      "elements) from it",
                      h, WHO(x), j, (long long)dx, (long long)cx, y->rank,
                      WHO(y), i, (long long)dy, (long long)cy);
    }
  return 0;
}

/* Rank r is at collective e: if the whole group is there, checks and moves
 * everyone on. 1 moved, 0 blocked, -1 mismatch. */
static int step_coll(sim *s, const ccg__cev *e) {
  const ccg__cev *first = NULL;
  for (int i = 0; i < e->gsize; i++) {
    const ccg__cev *q = cur(s, (int)e->group[i]);
    if (!q || ccg__is_p2p(q->op) || q->key != e->key)
      return 0;
    if (!first)
      first = q;
  }
  for (int i = 1; i < e->gsize; i++)
    if (coll_compare(s, first, cur(s, (int)e->group[i])) < 0)
      return -1;
  if (e->op == CCG_OP_ALL_TO_ALL && a2a_pairs(s, first) < 0)
    return -1;
  for (int i = 0; i < e->gsize; i++)
    s->pc[e->group[i]]++;
  s->calls += (size_t)e->gsize;
  return 1;
}

/* ---- point to point --------------------------------------------------------
 */

static int p2p_compare(sim *s, const ccg__cev *snd, const ccg__cev *rcv,
                       int64_t pos) {
  char sa[160], sb[160];
  ccg_verify_kind k = CCG_VERIFY_OK;
  if (snd->tag != rcv->tag)
    k = CCG_VERIFY_TAG;
  else if (snd->dtype != rcv->dtype)
    k = CCG_VERIFY_DTYPE;
  else if (!ccg__vshape_equal(snd->in, rcv->out, -1))
    k = CCG_VERIFY_SHAPE;
  if (k == CCG_VERIFY_OK)
    return 0;
  return report(
      s, k, snd, rcv, -1, pos,
      "%s mismatch on message %lld from rank %d to rank %d: " WHO_FMT
      " sends tag %lld, %s %s but " WHO_FMT " receives tag %lld, %s %s",
      ccg_verify_kind_name(k), (long long)pos, snd->rank, rcv->rank, WHO(snd),
      (long long)snd->tag, ccg_dtype_name(snd->dtype),
      ccg__vshape_str(snd->in, sa, sizeof sa), WHO(rcv), (long long)rcv->tag,
      ccg_dtype_name(rcv->dtype), ccg__vshape_str(rcv->out, sb, sizeof sb));
}

static bool chan_push(chan *c, const ccg__cev *e) {
  if (c->tail == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 8;
    const ccg__cev **q = realloc(c->q, cap * sizeof *q);
    if (!q)
      return false;
    c->q = q;
    c->cap = cap;
  }
  c->q[c->tail++] = e;
  c->sent++;
  return true;
}

static int step_send(sim *s, int r, const ccg__cev *e) {
  chan *c = chan_of(s, r, e->peer);
  if ((int64_t)(c->tail - c->head) < s->buffer) {
    if (!chan_push(c, e)) {
      ccg__error(NULL, CCG_STATUS_OOM, "verify: out of memory");
      return -2;
    }
    s->pc[r]++;
    s->calls++;
    return 1;
  }
  /* rendezvous: the receiver is at its Recv and nothing is queued before */
  const ccg__cev *q = cur(s, (int)e->peer);
  if (s->buffer == 0 && c->tail == c->head && q && q->op == CCG_OP_RECV &&
      q->peer == r && (int)e->peer != r) {
    if (p2p_compare(s, e, q, c->sent) < 0)
      return -1;
    c->sent++;
    c->taken++;
    s->pc[r]++;
    s->pc[e->peer]++;
    s->calls += 2;
    return 1;
  }
  return 0;
}

static int step_recv(sim *s, int r, const ccg__cev *e) {
  chan *c = chan_of(s, e->peer, r);
  if (c->head < c->tail) {
    const ccg__cev *snd = c->q[c->head];
    if (p2p_compare(s, snd, e, c->taken) < 0)
      return -1;
    c->head++;
    c->taken++;
    s->pc[r]++;
    s->calls++;
    return 1;
  }
  const ccg__cev *q = cur(s, (int)e->peer);
  if (s->buffer == 0 && q && q->op == CCG_OP_SEND && q->peer == r)
    return step_send(s, (int)e->peer, q);
  return 0;
}

/* The end of a run: every send of r received. */
static int step_end(sim *s, int r) {
  for (int d = 0; d < s->W; d++) {
    chan *c = chan_of(s, r, d);
    if (c->head < c->tail)
      return 0;
  }
  s->done[r] = true;
  return 1;
}

static int step(sim *s, int r) {
  if (s->done[r])
    return 0;
  const ccg__cev *e = cur(s, r);
  if (!e)
    return step_end(s, r);
  if (e->op == CCG_OP_SEND)
    return step_send(s, r, e);
  if (e->op == CCG_OP_RECV)
    return step_recv(s, r, e);
  return step_coll(s, e);
}

/* ---- when nobody can move --------------------------------------------------
 */

/* The rank r waits for, and (for an unreceived send) the message. */
static int waits_for(sim *s, int r, const ccg__cev **msg, int64_t *msg_pos) {
  const ccg__cev *e = cur(s, r);
  *msg = NULL;
  if (!e) {
    for (int d = 0; d < s->W; d++) {
      chan *c = chan_of(s, r, d);
      if (c->head < c->tail) {
        *msg = c->q[c->head];
        *msg_pos = c->taken;
        return d;
      }
    }
    return -1;
  }
  if (e->op == CCG_OP_SEND) {
    chan *c = chan_of(s, r, e->peer);
    *msg = c->head < c->tail ? c->q[c->head] : e;
    *msg_pos = c->taken;
    return (int)e->peer;
  }
  if (e->op == CCG_OP_RECV)
    return (int)e->peer;
  for (int i = 0; i < e->gsize; i++) {
    const ccg__cev *q = cur(s, (int)e->group[i]);
    if (!q || ccg__is_p2p(q->op) || q->key != e->key)
      return (int)e->group[i];
  }
  return -1;
}

static int64_t key_count(const sim *s, int r, unsigned key) {
  int64_t n = 0;
  for (size_t i = 0; i < s->p->n_ev[r]; i++)
    n += !ccg__is_p2p(s->p->ev[r][i].op) && s->p->ev[r][i].key == key;
  return n;
}

/* r waits for q, which has finished. */
static int report_finished(sim *s, int r, int q, const ccg__cev *msg,
                           int64_t msg_pos) {
  const ccg__cev *e = cur(s, r);
  if (msg)
    return report(s, CCG_VERIFY_UNMATCHED_SEND, msg, NULL, q, msg_pos,
                  "unmatched send: " WHO_FMT
                  " (message %lld to rank %d, tag %lld) is never received: "
                  "rank %d finishes without a matching Recv",
                  WHO(msg), (long long)msg_pos, q, (long long)msg->tag, q);
  if (e->op == CCG_OP_RECV) {
    chan *c = chan_of(s, q, r);
    return report(s, CCG_VERIFY_UNMATCHED_RECV, e, NULL, q, c->taken,
                  "unmatched recv: " WHO_FMT
                  " waits for message %lld from rank %d (tag %lld), but rank "
                  "%d finishes without sending it",
                  WHO(e), (long long)c->taken, q, (long long)e->tag, q);
  }
  char h[160];
  coll_header(s, e, h, sizeof h);
  return report(s, CCG_VERIFY_MISSING, e, NULL, q, e->pos,
                "missing collective at %s: " WHO_FMT
                " has no partner on rank %d, which issues only %lld "
                "collectives over that group",
                h, WHO(e), q, (long long)key_count(s, q, e->key));
}

static int describe_wait(sim *s, int r, char *buf, size_t size) {
  const ccg__cev *e = cur(s, r);
  const ccg__cev *msg;
  int64_t mp;
  int q = waits_for(s, r, &msg, &mp);
  if (!e)
    return snprintf(buf, size,
                    "rank %d at the end of its run waits for rank %d to "
                    "receive '%s'",
                    r, q, msg ? msg->node : "");
  char g[96] = "";
  if (!ccg__is_p2p(e->op))
    ccg__group_str(s->p, e, g, sizeof g);
  return snprintf(buf, size, "rank %d at %s '%s'%s%s waits for rank %d", r,
                  ccg_op_name(e->op), e->node, *g ? " over " : "", g, q);
}

static int report_stuck(sim *s) {
  int start = 0;
  while (s->done[start])
    start++;
  for (int r = start; r < s->W; r++) {
    if (s->done[r])
      continue;
    const ccg__cev *msg;
    int64_t mp;
    int q = waits_for(s, r, &msg, &mp);
    if (q >= 0 && s->done[q])
      return report_finished(s, r, q, msg, mp);
  }
  /* every stuck rank waits for another stuck one: follow to a cycle */
  int *seen = calloc((size_t)s->W, sizeof *seen);
  if (!seen) {
    ccg__error(NULL, CCG_STATUS_OOM, "verify: out of memory");
    return -2;
  }
  int r = start, step_no = 1;
  while (r >= 0 && !seen[r]) {
    seen[r] = step_no++;
    const ccg__cev *msg;
    int64_t mp;
    r = waits_for(s, r, &msg, &mp);
  }
  if (r < 0) { /* every stuck rank waits for someone: not reached */
    free(seen);
    ccg__error(NULL, CCG_STATUS_INTERNAL,
               "verify: rank %d is stuck but waits for no rank", start);
    return -3;
  }
  int a = r;
  const ccg__cev *ea = cur(s, a), *msg;
  int64_t mp;
  int b = waits_for(s, a, &msg, &mp);
  const ccg__cev *eb = cur(s, b);
  int back = waits_for(s, b, &msg, &mp);
  free(seen);
  if (ea && eb && back == a && !ccg__is_p2p(ea->op) && !ccg__is_p2p(eb->op) &&
      ea->key != eb->key) {
    char ga[96], gb[96];
    return report(
        s, CCG_VERIFY_GROUP, ea, eb, -1, ea->pos,
        "group mismatch: " WHO_FMT " is over %s (position %lld) while " WHO_FMT
        " is over %s (position %lld); each waits for the other",
        WHO(ea), ccg__group_str(s->p, ea, ga, sizeof ga), (long long)ea->pos,
        WHO(eb), ccg__group_str(s->p, eb, gb, sizeof gb), (long long)eb->pos);
  }
  char text[sizeof s->rep->message];
  size_t used = (size_t)snprintf(text, sizeof text,
                                 "deadlock: a cycle of blocking waits: ");
  int x = a;
  do {
    if (used < sizeof text)
      used += (size_t)describe_wait(s, x, text + used, sizeof text - used);
    x = waits_for(s, x, &msg, &mp);
    if (used < sizeof text)
      used += (size_t)snprintf(text + used, sizeof text - used, "%s",
                               x == a ? "" : "; ");
  } while (x != a);
  static const ccg__cev end = {.node = "(end of run)"};
  ccg__cev ea_end = end, eb_end = end;
  ea_end.rank = a;
  eb_end.rank = b;
  return report(s, CCG_VERIFY_DEADLOCK, ea ? ea : &ea_end, eb ? eb : &eb_end,
                -1, ea ? ea->pos : 0, "%s", text);
}

/* ---- entry ------------------------------------------------------------------
 */

static ccg_status simulate(sim *s) {
  for (;;) {
    bool moved = false;
    for (int r = 0; r < s->W; r++) {
      int k;
      while ((k = step(s, r)) > 0)
        moved = true;
      if (k == -1)
        return CCG_STATUS_COMM;
      if (k == -2)
        return CCG_STATUS_OOM;
    }
    if (!moved)
      break;
  }
  for (int r = 0; r < s->W; r++)
    if (!s->done[r]) {
      int k = report_stuck(s);
      return k == -2   ? CCG_STATUS_OOM
             : k == -3 ? CCG_STATUS_INTERNAL
                       : CCG_STATUS_COMM;
    }
  return CCG_STATUS_OK;
}

ccg_status ccg_verify_program(ccg_graph *const *graphs, size_t n,
                              const ccg_verify_options *opts,
                              ccg_verify_report *report_out) {
  ccg_verify_options o = CCG_VERIFY_OPTIONS_INIT;
  if (opts)
    memcpy(&o, opts, opts->size < sizeof o ? opts->size : sizeof o);
  ccg_verify_report local;
  ccg_verify_report *rep = report_out ? report_out : &local;
  memset(rep, 0, sizeof *rep);
  rep->rank_a = rep->rank_b = -1;
  if (o.p2p_buffer < 0)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "p2p_buffer must be >= 0 (got %d)", o.p2p_buffer);
  ccg__program p;
  CCG_CHECK(ccg__program_load(&p, graphs, n, &o));
  sim s = {&p, p.world, NULL, NULL, NULL, o.p2p_buffer, 0, rep};
  s.pc = calloc((size_t)p.world, sizeof *s.pc);
  s.done = calloc((size_t)p.world, sizeof *s.done);
  s.ch = calloc((size_t)p.world * (size_t)p.world, sizeof *s.ch);
  ccg_status st;
  if (!s.pc || !s.done || !s.ch)
    st = ccg__error(NULL, CCG_STATUS_OOM, "verify: out of memory");
  else
    st = simulate(&s);
  rep->n_calls = s.calls;
  if (st == CCG_STATUS_COMM)
    ccg__error(NULL, st, "%s", rep->message);
  for (size_t i = 0; s.ch && i < (size_t)p.world * (size_t)p.world; i++)
    free(s.ch[i].q);
  free(s.ch);
  free(s.pc);
  free(s.done);
  ccg__program_release(&p);
  return st;
}
