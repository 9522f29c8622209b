/* Private: a program's communication calls per rank, in the executor's
 * order, with shapes evaluated on that rank. Shared by the verify and cost
 * passes. */
#ifndef CCG_PASSES_EVENTS_H
#define CCG_PASSES_EVENTS_H

#include "ccgraph/verify.h"
#include "core/arena.h"

#define CCG__VSYM_MAX 48

/* A dim on one rank: a number (n >= 0) or the text of what stays symbolic
 * (at most CCG__VSYM_MAX - 1 characters; "" for a number). The text lives
 * in the program's arena: a dim is 16 bytes, so a large program's calls
 * stay small. */
typedef struct ccg__vdim {
  int64_t n;
  const char *s;
} ccg__vdim;

typedef struct ccg__vshape {
  int rank;
  ccg__vdim d[CCG_MAX_RANK];
} ccg__vshape;

/* One communication call of one rank. */
typedef struct ccg__cev {
  ccg_op op;
  const char *node;
  int rank;        /* global */
  unsigned key;    /* mesh-axis mask of the group */
  int gsize, gidx; /* group size and this rank's place in it */
  int64_t *group;  /* global ranks in group order */
  ccg_dtype dtype;
  /* input 0 (Send, ...) and output 0 (Recv, ...), never NULL: one copy
   * per rank and graph shape, shared by the rank's calls of that shape */
  const ccg__vshape *in, *out;
  int rop;         /* reduce op, -1 if none */
  int64_t root;    /* -1 if none */
  int axis, axis2; /* normalized; -1 if none */
  int64_t shift, rotate;
  const int64_t *split, *split2; /* per group rank sizes, NULL = even */
  int64_t peer, tag;             /* Send/Recv: global peer */
  int64_t pos; /* place among this rank's calls on `key` (collectives) */
} ccg__cev;

typedef struct ccg__program {
  ccg_arena arena;
  const ccg_verify_options *opts;
  const ccg_mesh *mesh;
  int world;
  ccg_graph **graph_of; /* per rank */
  size_t *n_ev;         /* per rank */
  ccg__cev **ev;        /* per rank */
} ccg__program;

/* Builds every rank's calls. Errors go to the thread's context. On failure
 * *p is released. */
ccg_status ccg__program_load(ccg__program *p, ccg_graph *const *graphs,
                             size_t n, const ccg_verify_options *opts);
void ccg__program_release(ccg__program *p);

/* "[4,tp{..}]"-style text of an evaluated shape. */
const char *ccg__vshape_str(const ccg__vshape *s, char *buf, size_t size);
bool ccg__vshape_equal(const ccg__vshape *a, const ccg__vshape *b,
                       int skip_axis);
/* Elements of s with dim `skip_axis` left out (-1: none): a number when
 * every dim is one (true), else false with the symbolic text in buf. */
bool ccg__vshape_numel(const ccg__vshape *s, int skip_axis, int64_t *num,
                       char *buf, size_t size);
/* "tp [0 1]" */
const char *ccg__group_str(const ccg__program *p, const ccg__cev *e, char *buf,
                           size_t size);
bool ccg__is_p2p(ccg_op op);

#endif
