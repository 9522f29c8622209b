/* Private: per-element arithmetic of the logic family (comparisons, logic,
 * IsNaN/IsInf, Min/Max/Sum/Mean, Mod, PRelu, bitwise ops), as static inline
 * functions for the host and, under nvcc, the device, so that the CPU tests
 * check what the GPU kernels compute. Both operands of a binary op have one
 * dtype (the shape rules check it). */
#ifndef CCG_EXEC_LOGIC_MATH_H
#define CCG_EXEC_LOGIC_MATH_H

#include "exec/kernels_math.h"

/* Comparisons: floats in double (exact for every float dtype, NaN compares
 * false), integers in int64 (u8 and bool read as 0..255). */
CCG_HD static inline bool ccg__lg_compare(ccg_op op, ccg_dtype dt,
                                          const void *a, size_t ia,
                                          const void *b, size_t ib) {
  if (ccg__math_of(dt) != CCG__MATH_I64) {
    double x = ccg__ld_f64(dt, a, ia), y = ccg__ld_f64(dt, b, ib);
    switch (op) {
    case CCG_OP_EQUAL:
      return x == y;
    case CCG_OP_LESS:
      return x < y;
    case CCG_OP_LESS_OR_EQUAL:
      return x <= y;
    case CCG_OP_GREATER:
      return x > y;
    default: /* GREATER_OR_EQUAL */
      return x >= y;
    }
  }
  int64_t x = ccg__ld_i64(dt, a, ia), y = ccg__ld_i64(dt, b, ib);
  switch (op) {
  case CCG_OP_EQUAL:
    return x == y;
  case CCG_OP_LESS:
    return x < y;
  case CCG_OP_LESS_OR_EQUAL:
    return x <= y;
  case CCG_OP_GREATER:
    return x > y;
  default:
    return x >= y;
  }
}

/* ONNX Mod on integers: fmod 1 truncates (C's %, the sign of the dividend),
 * fmod 0 floors (the sign of the divisor, Python's %). b != 0. */
CCG_HD static inline int64_t ccg__lg_mod_i64(int64_t a, int64_t b, bool fmod) {
  if (b == -1)
    return 0; /* also INT64_MIN % -1, which C leaves undefined */
  int64_t r = a % b;
  if (!fmod && r != 0 && ((r < 0) != (b < 0)))
    r += b;
  return r;
}

/* Min and Max keep a NaN (as numpy's minimum/maximum and torch do). */
CCG_HD static inline double ccg__lg_minmax_f64(bool is_max, double x,
                                               double y) {
  if (x != x)
    return x;
  if (y != y)
    return y;
  return is_max ? (y > x ? y : x) : (y < x ? y : x);
}

/* Shifts past the element's width give 0 (ONNX leaves them open; numpy's
 * uint8 does the same). */
CCG_HD static inline uint64_t ccg__lg_shift(uint64_t x, uint64_t s, bool left,
                                            unsigned bits) {
  if (s >= bits)
    return 0;
  uint64_t mask = bits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << bits) - 1);
  return (left ? x << s : x >> s) & mask;
}

/* Float results of the arithmetic ops: f32 math for f32/f16/bf16 (what
 * the elementwise kernels do), double for f64. */
CCG_HD static inline void ccg__lg_float_elem(ccg_op op, int64_t param,
                                             ccg_dtype dt, const void *a,
                                             size_t ia, const void *b,
                                             size_t ib, void *o, size_t io) {
  if (op == CCG_OP_MIN || op == CCG_OP_MAX || op == CCG_OP_MOD) {
    /* exact in double for every float dtype */
    double x = ccg__ld_f64(dt, a, ia), y = ccg__ld_f64(dt, b, ib);
    ccg__st_f64(dt, o, io,
                op == CCG_OP_MOD ? fmod(x, y)
                                 : ccg__lg_minmax_f64(op == CCG_OP_MAX, x, y));
    return;
  }
  (void)param;
  if (dt == CCG_DTYPE_F64) {
    double x = ccg__ld_f64(dt, a, ia), y = ccg__ld_f64(dt, b, ib);
    ccg__st_f64(dt, o, io, op == CCG_OP_PRELU ? (x < 0 ? y * x : x) : x + y);
    return;
  }
  float x = ccg__ld_f32(dt, a, ia), y = ccg__ld_f32(dt, b, ib);
  ccg__st_f32(dt, o, io, op == CCG_OP_PRELU ? (x < 0.0f ? y * x : x) : x + y);
}

/* One element of a binary op of the family: o[io] = a[ia] op b[ib], inputs
 * of dtype dt, the output of dout. Min/Max/Sum/Mean run as a chain of
 * these over their inputs (Mean's division is ccg__logic_un_elem's).
 * `param`: Mod's fmod, BitShift's direction (1: left). False only for an
 * integer Mod by zero. */
CCG_HD static inline bool ccg__logic_bin_elem(ccg_op op, int64_t param,
                                              ccg_dtype dt, const void *a,
                                              size_t ia, const void *b,
                                              size_t ib, ccg_dtype dout,
                                              void *o, size_t io) {
  switch (op) {
  case CCG_OP_EQUAL:
  case CCG_OP_LESS:
  case CCG_OP_LESS_OR_EQUAL:
  case CCG_OP_GREATER:
  case CCG_OP_GREATER_OR_EQUAL:
    ((uint8_t *)o)[io] = ccg__lg_compare(op, dt, a, ia, b, ib);
    return true;
  case CCG_OP_AND:
  case CCG_OP_OR:
  case CCG_OP_XOR: {
    bool x = ((const uint8_t *)a)[ia] != 0, y = ((const uint8_t *)b)[ib] != 0;
    ((uint8_t *)o)[io] = op == CCG_OP_AND  ? (x && y)
                         : op == CCG_OP_OR ? (x || y)
                                           : (x != y);
    return true;
  }
  default:
    break;
  }
  if (ccg__math_of(dt) != CCG__MATH_I64) {
    ccg__lg_float_elem(op, param, dt, a, ia, b, ib, o, io);
    return true;
  }
  int64_t x = ccg__ld_i64(dt, a, ia), y = ccg__ld_i64(dt, b, ib), r;
  switch (op) {
  case CCG_OP_BITWISE_AND:
    r = x & y;
    break;
  case CCG_OP_BITWISE_OR:
    r = x | y;
    break;
  case CCG_OP_BITWISE_XOR:
    r = x ^ y;
    break;
  case CCG_OP_BIT_SHIFT:
    r = (int64_t)ccg__lg_shift((uint64_t)x, (uint64_t)y, param != 0,
                               dt == CCG_DTYPE_I64   ? 64u
                               : dt == CCG_DTYPE_I32 ? 32u
                                                     : 8u);
    break;
  case CCG_OP_MOD:
    if (y == 0)
      return false;
    r = ccg__lg_mod_i64(x, y, param != 0);
    break;
  case CCG_OP_PRELU: /* wrapping, as integer Mul */
    r = x < 0 ? (int64_t)((uint64_t)x * (uint64_t)y) : x;
    break;
  case CCG_OP_MIN:
    r = y < x ? y : x;
    break;
  case CCG_OP_MAX:
    r = y > x ? y : x;
    break;
  default: /* SUM, MEAN: integers are refused by their shape rules */
    r = (int64_t)((uint64_t)x + (uint64_t)y);
    break;
  }
  ccg__st_i64(dout, o, io, r);
  return true;
}

/* IsInf's param: bit 0 detect_negative, bit 1 detect_positive. */
#define CCG__ISINF_NEG 1
#define CCG__ISINF_POS 2

/* One element of a unary op of the family: o[i] = op(a[i]). Mean's final
 * step is one too: o[i] = a[i] / param (a and o may be the same). */
CCG_HD static inline void ccg__logic_un_elem(ccg_op op, int64_t param,
                                             ccg_dtype da, const void *a,
                                             ccg_dtype dout, void *o,
                                             size_t i) {
  switch (op) {
  case CCG_OP_NOT:
    ((uint8_t *)o)[i] = ((const uint8_t *)a)[i] == 0;
    break;
  case CCG_OP_IS_NAN: {
    double v = ccg__ld_f64(da, a, i);
    ((uint8_t *)o)[i] = v != v;
    break;
  }
  case CCG_OP_IS_INF: {
    double v = ccg__ld_f64(da, a, i);
    bool inf = v == (double)INFINITY || v == -(double)INFINITY;
    ((uint8_t *)o)[i] = inf && (v < 0 ? (param & CCG__ISINF_NEG) != 0
                                      : (param & CCG__ISINF_POS) != 0);
    break;
  }
  case CCG_OP_BITWISE_NOT:
    ccg__st_i64(dout, o, i, ~ccg__ld_i64(da, a, i));
    break;
  default: /* MEAN */
    if (da == CCG_DTYPE_F64)
      ccg__st_f64(dout, o, i, ccg__ld_f64(da, a, i) / (double)param);
    else
      ccg__st_f32(dout, o, i, ccg__ld_f32(da, a, i) / (float)param);
    break;
  }
}

#endif
