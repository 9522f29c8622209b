/* Private: the per-element arithmetic of the Reduce* ops, as static inline
 * functions for the host and, under nvcc, the device: an accumulator starts
 * at ccg__rd_init, takes each reduced element through ccg__rd_step (in
 * input order) and ends through ccg__rd_final; the GPU splits long
 * reductions into parts joined by ccg__rd_merge. Both backends call these,
 * so the CPU tests check what the GPU computes. */
#ifndef CCG_EXEC_REDUCE_MATH_H
#define CCG_EXEC_REDUCE_MATH_H

#include "exec/kernels_math.h"

/* The reduction kinds; Mean is a Sum with a division at the end, L2 and
 * LogSum finish a SumSquare and a Sum. */
typedef enum ccg__rd_kind {
  CCG__RD_SUM,
  CCG__RD_MEAN,
  CCG__RD_MAX,
  CCG__RD_MIN,
  CCG__RD_PROD,
  CCG__RD_L1,
  CCG__RD_L2,
  CCG__RD_SUM_SQUARE,
  CCG__RD_LOG_SUM,
  CCG__RD_LOG_SUM_EXP,
} ccg__rd_kind;

CCG_HD static inline ccg__rd_kind ccg__rd_kind_of(ccg_op op) {
  switch (op) {
  case CCG_OP_REDUCE_MEAN:
    return CCG__RD_MEAN;
  case CCG_OP_REDUCE_MAX:
    return CCG__RD_MAX;
  case CCG_OP_REDUCE_MIN:
    return CCG__RD_MIN;
  case CCG_OP_REDUCE_PROD:
    return CCG__RD_PROD;
  case CCG_OP_REDUCE_L1:
    return CCG__RD_L1;
  case CCG_OP_REDUCE_L2:
    return CCG__RD_L2;
  case CCG_OP_REDUCE_SUM_SQUARE:
    return CCG__RD_SUM_SQUARE;
  case CCG_OP_REDUCE_LOG_SUM:
    return CCG__RD_LOG_SUM;
  case CCG_OP_REDUCE_LOG_SUM_EXP:
    return CCG__RD_LOG_SUM_EXP;
  default:
    return CCG__RD_SUM;
  }
}

/* LogSumExp takes two passes: the maximum first (a MAX reduction), then the
 * sum of exp(x - max), so large inputs do not overflow. */
CCG_HD static inline bool ccg__rd_two_pass(ccg__rd_kind k) {
  return k == CCG__RD_LOG_SUM_EXP;
}

CCG_HD static inline double ccg__rd_init_f64(ccg__rd_kind k) {
  switch (k) {
  case CCG__RD_MAX:
    return -INFINITY;
  case CCG__RD_MIN:
    return INFINITY;
  case CCG__RD_PROD:
    return 1.0;
  default:
    return 0.0;
  }
}

/* The kinds whose step below is acc + v (Sum, Mean and LogSum): a caller
 * may take a row of such accumulators a vector at a time, the same
 * additions in the same order. */
CCG_HD static inline bool ccg__rd_step_adds(ccg__rd_kind k) {
  return k == CCG__RD_SUM || k == CCG__RD_MEAN || k == CCG__RD_LOG_SUM;
}

/* One element v into acc; `shift` is LogSumExp's maximum (else unused). A
 * NaN wins Max and Min, as in numpy. */
CCG_HD static inline double ccg__rd_step_f64(ccg__rd_kind k, double acc,
                                             double v, double shift) {
  switch (k) {
  case CCG__RD_MAX:
    return (v > acc || v != v) ? v : acc;
  case CCG__RD_MIN:
    return (v < acc || v != v) ? v : acc;
  case CCG__RD_PROD:
    return acc * v;
  case CCG__RD_L1:
    return acc + fabs(v);
  case CCG__RD_L2:
  case CCG__RD_SUM_SQUARE:
    return acc + v * v;
  case CCG__RD_LOG_SUM_EXP:
    return acc + exp(v - shift);
  default:
    return acc + v;
  }
}

/* The result from the accumulator over `count` elements. A shift that is
 * infinite (all -inf, or an inf input) is the result itself. */
CCG_HD static inline double ccg__rd_final_f64(ccg__rd_kind k, double acc,
                                              int64_t count, double shift) {
  switch (k) {
  case CCG__RD_MEAN:
    return count ? acc / (double)count : NAN;
  case CCG__RD_L2:
    return sqrt(acc);
  case CCG__RD_LOG_SUM:
    return log(acc);
  case CCG__RD_LOG_SUM_EXP:
    return (shift == INFINITY || shift == -INFINITY) ? shift : shift + log(acc);
  default:
    return acc;
  }
}

/* Two accumulators of parts of the same elements into one (a worker's
 * part: index_math.h's ccg__reduce_part_*). A NaN wins Max and Min, as in
 * ccg__rd_step_f64. */
CCG_HD static inline double ccg__rd_merge_f64(ccg__rd_kind k, double a,
                                              double b) {
  switch (k) {
  case CCG__RD_MAX:
  case CCG__RD_MIN:
  case CCG__RD_PROD: /* a part's result joins like one more element */
    return ccg__rd_step_f64(k, a, b, 0.0);
  default: /* every other kind sums its elements' terms */
    return a + b;
  }
}

/* Integers (Sum, Mean, Max, Min, Prod, L1, SumSquare) wrap in int64 as
 * two's complement, as numpy's int64 does. */
CCG_HD static inline int64_t ccg__rd_init_i64(ccg__rd_kind k) {
  switch (k) {
  case CCG__RD_MAX:
    return INT64_MIN;
  case CCG__RD_MIN:
    return INT64_MAX;
  case CCG__RD_PROD:
    return 1;
  default:
    return 0;
  }
}

CCG_HD static inline int64_t ccg__rd_step_i64(ccg__rd_kind k, int64_t acc,
                                              int64_t v) {
  uint64_t ua = (uint64_t)acc, uv = (uint64_t)v;
  switch (k) {
  case CCG__RD_MAX:
    return v > acc ? v : acc;
  case CCG__RD_MIN:
    return v < acc ? v : acc;
  case CCG__RD_PROD:
    return (int64_t)(ua * uv);
  case CCG__RD_L1:
    return (int64_t)(ua + (v < 0 ? 0 - uv : uv));
  case CCG__RD_SUM_SQUARE:
    return (int64_t)(ua + uv * uv);
  default:
    return (int64_t)(ua + uv);
  }
}

CCG_HD static inline int64_t ccg__rd_merge_i64(ccg__rd_kind k, int64_t a,
                                               int64_t b) {
  switch (k) {
  case CCG__RD_MAX:
  case CCG__RD_MIN:
  case CCG__RD_PROD:
    return ccg__rd_step_i64(k, a, b);
  default: /* Sum, Mean, L1 and SumSquare add their parts */
    return (int64_t)((uint64_t)a + (uint64_t)b);
  }
}

CCG_HD static inline int64_t ccg__rd_final_i64(ccg__rd_kind k, int64_t acc,
                                               int64_t count) {
  if (k == CCG__RD_MEAN)
    return count ? acc / count : 0;
  return acc;
}

/* Whether the kind is defined for integer inputs (L2, LogSum and LogSumExp
 * are float only here). */
CCG_HD static inline bool ccg__rd_int_ok(ccg__rd_kind k) {
  return k != CCG__RD_L2 && k != CCG__RD_LOG_SUM && k != CCG__RD_LOG_SUM_EXP;
}

#endif
