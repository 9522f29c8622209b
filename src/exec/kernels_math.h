/* Private: per-element arithmetic of the kernels, as static inline functions
 * that compile for the host and, under nvcc, for the device too (CCG_HD), so
 * the CPU tests cover the GPU kernels' arithmetic. */
#ifndef CCG_EXEC_KERNELS_MATH_H
#define CCG_EXEC_KERNELS_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ccgraph/graph.h"

#include "core/half.h"

/* ---- activations ---------------------------------------------------------
 */

CCG_HD static inline float ccg__sigmoidf(float x) {
  /* Never exponentiates a large positive number: no overflow to inf/inf. */
  if (x >= 0.0f)
    return 1.0f / (1.0f + expf(-x));
  float e = expf(x);
  return e / (1.0f + e);
}

CCG_HD static inline float ccg__reluf(float x) { return x > 0.0f ? x : 0.0f; }

/* Gelu, erf form: x/2 (1 + erf(x / sqrt 2)). */
CCG_HD static inline float ccg__gelu_erff(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

/* Gelu, tanh form: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
CCG_HD static inline float ccg__gelu_tanhf(float x) {
  float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

/* Attributes of the unary ops, read once at preparation: a and b are
 * alpha and beta (Selu: alpha, gamma; Shrink: bias, lambd); tanh_gelu picks
 * Gelu's tanh form. Passed by value to the CUDA kernel. */
typedef struct ccg__unp {
  float a, b;
  bool tanh_gelu;
} ccg__unp;

/* The activations below give a NaN input what ONNX's reference
 * implementation gives: NaN, except ThresholdedRelu and Shrink (0, from
 * where(x > alpha, x, 0)); comparisons select, never fmaxf/fminf. */

/* ln(1 + e^x) without overflow for large x. */
CCG_HD static inline float ccg__softplusf(float x) {
  return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

CCG_HD static inline float ccg__softsignf(float x) {
  return x / (1.0f + fabsf(x));
}

CCG_HD static inline float ccg__leaky_reluf(float x, float alpha) {
  return x >= 0.0f ? x : alpha * x;
}

CCG_HD static inline float ccg__eluf(float x, float alpha) {
  return x >= 0.0f ? x : alpha * expm1f(x);
}

CCG_HD static inline float ccg__seluf(float x, float alpha, float gamma) {
  return x > 0.0f ? gamma * x : gamma * alpha * expm1f(x);
}

/* max(0, x) + min(0, alpha (e^(x/alpha) - 1)) */
CCG_HD static inline float ccg__celuf(float x, float alpha) {
  float neg = alpha * expm1f(x / alpha);
  return (x > 0.0f ? x : 0.0f) + (neg > 0.0f ? 0.0f : neg);
}

/* max(0, min(1, alpha x + beta)) */
CCG_HD static inline float ccg__hard_sigmoidf(float x, float alpha,
                                              float beta) {
  float v = alpha * x + beta;
  return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}

CCG_HD static inline float ccg__hard_swishf(float x) {
  return x * ccg__hard_sigmoidf(x, 1.0f / 6.0f, 0.5f);
}

CCG_HD static inline float ccg__mishf(float x) {
  return x * tanhf(ccg__softplusf(x));
}

CCG_HD static inline float ccg__thresholded_reluf(float x, float alpha) {
  return x > alpha ? x : 0.0f;
}

CCG_HD static inline float ccg__shrinkf(float x, float bias, float lambd) {
  return x < -lambd ? x + bias : x > lambd ? x - bias : 0.0f;
}

/* -1, 1, 0 for both zeros (as numpy's sign, ONNX's reference), NaN for
 * NaN. */
CCG_HD static inline float ccg__signf(float x) {
  return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x == x ? 0.0f : x;
}

/* Clip: x < lo gives lo, then x > hi gives hi (so hi wins when lo > hi, as
 * min(max(x, lo), hi) does); NaN stays NaN. */
CCG_HD static inline float ccg__clipf(float x, float lo, float hi) {
  x = x < lo ? lo : x;
  return x > hi ? hi : x;
}
CCG_HD static inline double ccg__clipd(double x, double lo, double hi) {
  x = x < lo ? lo : x;
  return x > hi ? hi : x;
}
CCG_HD static inline int64_t ccg__clipi(int64_t x, int64_t lo, int64_t hi) {
  x = x < lo ? lo : x;
  return x > hi ? hi : x;
}

/* ONNX Pow on floats. */
CCG_HD static inline float ccg__powf(float a, float b) { return powf(a, b); }

/* Integer power by squaring; negative exponents give 0 except for bases 1
 * and -1 (as numpy does for integer arrays, without raising). */
CCG_HD static inline int64_t ccg__powi(int64_t a, int64_t b) {
  if (b < 0)
    return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  uint64_t r = 1, base = (uint64_t)a;
  while (b) {
    if (b & 1)
      r *= base;
    base *= base;
    b >>= 1;
  }
  return (int64_t)r;
}

/* ---- elements of any dtype -----------------------------------------------
 * Bool and u8 read as 0/1 and 0..255; integer stores wrap (two's
 * complement), as ONNX Cast does in practice. */

CCG_HD static inline double ccg__ld_f64(ccg_dtype dt, const void *p, size_t i) {
  switch (dt) {
  case CCG_DTYPE_F32:
    return ((const float *)p)[i];
  case CCG_DTYPE_F16:
    return ccg__f16_to_f32(((const uint16_t *)p)[i]);
  case CCG_DTYPE_BF16:
    return ccg__bf16_to_f32(((const uint16_t *)p)[i]);
  case CCG_DTYPE_F64:
    return ((const double *)p)[i];
  case CCG_DTYPE_I64:
    return (double)((const int64_t *)p)[i];
  case CCG_DTYPE_I32:
    return ((const int32_t *)p)[i];
  case CCG_DTYPE_I8:
    return ((const int8_t *)p)[i];
  case CCG_DTYPE_U8:
  case CCG_DTYPE_BOOL:
    return ((const uint8_t *)p)[i];
  default:
    return 0.0;
  }
}

/* Truncates toward zero, saturating; NaN gives 0. */
CCG_HD static inline int64_t ccg__f64_to_i64(double v) {
  if (!(v == v))
    return 0;
  if (v >= 9.2233720368547758e18)
    return INT64_MAX;
  if (v <= -9.2233720368547758e18)
    return INT64_MIN;
  return (int64_t)v;
}

CCG_HD static inline int64_t ccg__ld_i64(ccg_dtype dt, const void *p,
                                         size_t i) {
  switch (dt) {
  case CCG_DTYPE_I64:
    return ((const int64_t *)p)[i];
  case CCG_DTYPE_I32:
    return ((const int32_t *)p)[i];
  case CCG_DTYPE_I8:
    return ((const int8_t *)p)[i];
  case CCG_DTYPE_U8:
  case CCG_DTYPE_BOOL:
    return ((const uint8_t *)p)[i];
  default:
    return ccg__f64_to_i64(ccg__ld_f64(dt, p, i));
  }
}

CCG_HD static inline void ccg__st_f64(ccg_dtype dt, void *p, size_t i,
                                      double v) {
  switch (dt) {
  case CCG_DTYPE_F32:
    ((float *)p)[i] = (float)v;
    break;
  case CCG_DTYPE_F16:
    ((uint16_t *)p)[i] = ccg__f32_to_f16((float)v);
    break;
  case CCG_DTYPE_BF16:
    ((uint16_t *)p)[i] = ccg__f32_to_bf16((float)v);
    break;
  case CCG_DTYPE_F64:
    ((double *)p)[i] = v;
    break;
  default:
    break;
  }
}

CCG_HD static inline void ccg__st_i64(ccg_dtype dt, void *p, size_t i,
                                      int64_t v) {
  switch (dt) {
  case CCG_DTYPE_I64:
    ((int64_t *)p)[i] = v;
    break;
  case CCG_DTYPE_I32:
    ((int32_t *)p)[i] = (int32_t)(uint32_t)(uint64_t)v;
    break;
  case CCG_DTYPE_I8:
    ((int8_t *)p)[i] = (int8_t)(uint8_t)(uint64_t)v;
    break;
  case CCG_DTYPE_U8:
    ((uint8_t *)p)[i] = (uint8_t)(uint64_t)v;
    break;
  case CCG_DTYPE_BOOL:
    ((uint8_t *)p)[i] = v != 0;
    break;
  default:
    ccg__st_f64(dt, p, i, (double)v);
    break;
  }
}

/* f32 math on f32/f16/bf16 storage (others through double). */
CCG_HD static inline float ccg__ld_f32(ccg_dtype dt, const void *p, size_t i) {
  switch (dt) {
  case CCG_DTYPE_F32:
    return ((const float *)p)[i];
  case CCG_DTYPE_F16:
    return ccg__f16_to_f32(((const uint16_t *)p)[i]);
  case CCG_DTYPE_BF16:
    return ccg__bf16_to_f32(((const uint16_t *)p)[i]);
  default:
    return (float)ccg__ld_f64(dt, p, i);
  }
}

CCG_HD static inline void ccg__st_f32(ccg_dtype dt, void *p, size_t i,
                                      float v) {
  switch (dt) {
  case CCG_DTYPE_F32:
    ((float *)p)[i] = v;
    break;
  case CCG_DTYPE_F16:
    ((uint16_t *)p)[i] = ccg__f32_to_f16(v);
    break;
  case CCG_DTYPE_BF16:
    ((uint16_t *)p)[i] = ccg__f32_to_bf16(v);
    break;
  default:
    ccg__st_f64(dt, p, i, (double)v);
    break;
  }
}

/* ---- elementwise arithmetic ----------------------------------------------
 * Floats compute in f32 (f16/bf16 are storage), f64 in double, integers in
 * int64 with wrapping arithmetic. */

typedef enum ccg__math {
  CCG__MATH_F32,
  CCG__MATH_F64,
  CCG__MATH_I64
} ccg__math;

CCG_HD static inline ccg__math ccg__math_of(ccg_dtype dt) {
  if (dt == CCG_DTYPE_F64)
    return CCG__MATH_F64;
  return dt == CCG_DTYPE_F32 || dt == CCG_DTYPE_F16 || dt == CCG_DTYPE_BF16
             ? CCG__MATH_F32
             : CCG__MATH_I64;
}

CCG_HD static inline float ccg__bin_f32(ccg_op op, float a, float b) {
  switch (op) {
  case CCG_OP_ADD:
    return a + b;
  case CCG_OP_SUB:
    return a - b;
  case CCG_OP_MUL:
    return a * b;
  case CCG_OP_DIV:
    return a / b;
  default: /* POW */
    return ccg__powf(a, b);
  }
}

CCG_HD static inline float ccg__un_f32(ccg_op op, ccg__unp p, float a) {
  switch (op) {
  case CCG_OP_NEG:
    return -a;
  case CCG_OP_RELU:
    return ccg__reluf(a);
  case CCG_OP_GELU:
    return p.tanh_gelu ? ccg__gelu_tanhf(a) : ccg__gelu_erff(a);
  case CCG_OP_TANH:
    return tanhf(a);
  case CCG_OP_ERF:
    return erff(a);
  case CCG_OP_SIGMOID:
    return ccg__sigmoidf(a);
  case CCG_OP_EXP:
    return expf(a);
  case CCG_OP_LOG:
    return logf(a);
  case CCG_OP_RECIPROCAL:
    return 1.0f / a;
  case CCG_OP_ABS:
    return fabsf(a);
  case CCG_OP_FLOOR:
    return floorf(a);
  case CCG_OP_CEIL:
    return ceilf(a);
  case CCG_OP_ROUND: /* the default rounding mode: half to even */
    return rintf(a);
  case CCG_OP_SIGN:
    return ccg__signf(a);
  case CCG_OP_COS:
    return cosf(a);
  case CCG_OP_SIN:
    return sinf(a);
  case CCG_OP_TAN:
    return tanf(a);
  case CCG_OP_ASIN:
    return asinf(a);
  case CCG_OP_ACOS:
    return acosf(a);
  case CCG_OP_ATAN:
    return atanf(a);
  case CCG_OP_SINH:
    return sinhf(a);
  case CCG_OP_COSH:
    return coshf(a);
  case CCG_OP_ASINH:
    return asinhf(a);
  case CCG_OP_ACOSH:
    return acoshf(a);
  case CCG_OP_ATANH:
    return atanhf(a);
  case CCG_OP_SOFTPLUS:
    return ccg__softplusf(a);
  case CCG_OP_SOFTSIGN:
    return ccg__softsignf(a);
  case CCG_OP_LEAKY_RELU:
    return ccg__leaky_reluf(a, p.a);
  case CCG_OP_ELU:
    return ccg__eluf(a, p.a);
  case CCG_OP_SELU:
    return ccg__seluf(a, p.a, p.b);
  case CCG_OP_CELU:
    return ccg__celuf(a, p.a);
  case CCG_OP_HARD_SIGMOID:
    return ccg__hard_sigmoidf(a, p.a, p.b);
  case CCG_OP_HARD_SWISH:
    return ccg__hard_swishf(a);
  case CCG_OP_MISH:
    return ccg__mishf(a);
  case CCG_OP_THRESHOLDED_RELU:
    return ccg__thresholded_reluf(a, p.a);
  case CCG_OP_SHRINK:
    return ccg__shrinkf(a, p.a, p.b);
  default: /* SQRT */
    return sqrtf(a);
  }
}

CCG_HD static inline double ccg__bin_f64(ccg_op op, double a, double b) {
  switch (op) {
  case CCG_OP_ADD:
    return a + b;
  case CCG_OP_SUB:
    return a - b;
  case CCG_OP_MUL:
    return a * b;
  case CCG_OP_DIV:
    return a / b;
  default:
    return pow(a, b);
  }
}

CCG_HD static inline double ccg__softplus(double x) {
  return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

CCG_HD static inline double ccg__hard_sigmoid(double x, double alpha,
                                              double beta) {
  double v = alpha * x + beta;
  return v < 0 ? 0 : v > 1 ? 1 : v;
}

/* The f32 activations in double (their comments above); the attributes
 * are floats in ONNX, widened. */
CCG_HD static inline double ccg__act_f64(ccg_op op, ccg__unp p, double a) {
  double al = p.a, be = p.b, t;
  switch (op) {
  case CCG_OP_SOFTPLUS:
    return ccg__softplus(a);
  case CCG_OP_SOFTSIGN:
    return a / (1.0 + fabs(a));
  case CCG_OP_LEAKY_RELU:
    return a >= 0 ? a : al * a;
  case CCG_OP_ELU:
    return a >= 0 ? a : al * expm1(a);
  case CCG_OP_SELU:
    return a > 0 ? be * a : be * al * expm1(a);
  case CCG_OP_CELU:
    t = al * expm1(a / al);
    return (a > 0 ? a : 0) + (t > 0 ? 0 : t);
  case CCG_OP_HARD_SIGMOID:
    return ccg__hard_sigmoid(a, al, be);
  case CCG_OP_HARD_SWISH:
    return a * ccg__hard_sigmoid(a, 1.0 / 6.0, 0.5);
  case CCG_OP_MISH:
    return a * tanh(ccg__softplus(a));
  case CCG_OP_THRESHOLDED_RELU:
    return a > al ? a : 0;
  default: /* SHRINK */
    return a < -be ? a + al : a > be ? a - al : 0;
  }
}

CCG_HD static inline double ccg__un_f64(ccg_op op, ccg__unp p, double a) {
  switch (op) {
  case CCG_OP_NEG:
    return -a;
  case CCG_OP_RELU:
    return a > 0 ? a : 0;
  case CCG_OP_GELU:
    if (p.tanh_gelu)
      return 0.5 * a *
             (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));
    return 0.5 * a * (1.0 + erf(a * 0.7071067811865476));
  case CCG_OP_TANH:
    return tanh(a);
  case CCG_OP_ERF:
    return erf(a);
  case CCG_OP_SIGMOID:
    return a >= 0 ? 1.0 / (1.0 + exp(-a)) : exp(a) / (1.0 + exp(a));
  case CCG_OP_EXP:
    return exp(a);
  case CCG_OP_LOG:
    return log(a);
  case CCG_OP_SQRT:
    return sqrt(a);
  case CCG_OP_RECIPROCAL:
    return 1.0 / a;
  case CCG_OP_ABS:
    return fabs(a);
  case CCG_OP_FLOOR:
    return floor(a);
  case CCG_OP_CEIL:
    return ceil(a);
  case CCG_OP_ROUND:
    return rint(a);
  case CCG_OP_SIGN:
    return a > 0 ? 1.0 : a < 0 ? -1.0 : a == a ? 0.0 : a;
  case CCG_OP_COS:
    return cos(a);
  case CCG_OP_SIN:
    return sin(a);
  case CCG_OP_TAN:
    return tan(a);
  case CCG_OP_ASIN:
    return asin(a);
  case CCG_OP_ACOS:
    return acos(a);
  case CCG_OP_ATAN:
    return atan(a);
  case CCG_OP_SINH:
    return sinh(a);
  case CCG_OP_COSH:
    return cosh(a);
  case CCG_OP_ASINH:
    return asinh(a);
  case CCG_OP_ACOSH:
    return acosh(a);
  case CCG_OP_ATANH:
    return atanh(a);
  default:
    return ccg__act_f64(op, p, a);
  }
}

/* Wrapping; division truncates; false on division by zero. */
CCG_HD static inline bool ccg__bin_i64(ccg_op op, int64_t a, int64_t b,
                                       int64_t *o) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (op) {
  case CCG_OP_ADD:
    *o = (int64_t)(ua + ub);
    return true;
  case CCG_OP_SUB:
    *o = (int64_t)(ua - ub);
    return true;
  case CCG_OP_MUL:
    *o = (int64_t)(ua * ub);
    return true;
  case CCG_OP_DIV:
    if (b == 0)
      return false;
    *o = (a == INT64_MIN && b == -1) ? INT64_MIN : a / b;
    return true;
  default:
    *o = ccg__powi(a, b);
    return true;
  }
}

/* The unary ops on integers: Neg, Abs (wrapping, as two's complement
 * does), Relu, Sign, and Shrink through double. */
CCG_HD static inline int64_t ccg__un_i64(ccg_op op, ccg__unp p, int64_t v) {
  switch (op) {
  case CCG_OP_NEG:
    return (int64_t)(0u - (uint64_t)v);
  case CCG_OP_ABS:
    return v < 0 ? (int64_t)(0u - (uint64_t)v) : v;
  case CCG_OP_SIGN:
    return (v > 0) - (v < 0);
  case CCG_OP_SHRINK:
    return ccg__f64_to_i64(ccg__act_f64(op, p, (double)v));
  default: /* RELU */
    return v > 0 ? v : 0;
  }
}

/* One element of a binary op: a[ia] op b[ib] into o[io], computed in the
 * output's math. False only for an integer division by zero. */
CCG_HD static inline bool ccg__bin_elem(ccg_op op, ccg_dtype da, const void *a,
                                        size_t ia, ccg_dtype db, const void *b,
                                        size_t ib, ccg_dtype dout, void *o,
                                        size_t io) {
  switch (ccg__math_of(dout)) {
  case CCG__MATH_F32:
    ccg__st_f32(
        dout, o, io,
        ccg__bin_f32(op, ccg__ld_f32(da, a, ia), ccg__ld_f32(db, b, ib)));
    return true;
  case CCG__MATH_F64:
    ccg__st_f64(
        dout, o, io,
        ccg__bin_f64(op, ccg__ld_f64(da, a, ia), ccg__ld_f64(db, b, ib)));
    return true;
  default:
    break;
  }
  if (op == CCG_OP_POW && ccg__math_of(db) != CCG__MATH_I64) {
    /* an integer base to a float power: computed in double, truncated */
    ccg__st_i64(
        dout, o, io,
        ccg__f64_to_i64(pow(ccg__ld_f64(da, a, ia), ccg__ld_f64(db, b, ib))));
    return true;
  }
  int64_t r;
  if (!ccg__bin_i64(op, ccg__ld_i64(da, a, ia), ccg__ld_i64(db, b, ib), &r))
    return false;
  ccg__st_i64(dout, o, io, r);
  return true;
}

/* One element of a unary op: o[i] = op(a[i]). */
CCG_HD static inline void ccg__un_elem(ccg_op op, ccg__unp p, ccg_dtype da,
                                       const void *a, ccg_dtype dout, void *o,
                                       size_t i) {
  switch (ccg__math_of(dout)) {
  case CCG__MATH_F32:
    ccg__st_f32(dout, o, i, ccg__un_f32(op, p, ccg__ld_f32(da, a, i)));
    break;
  case CCG__MATH_F64:
    ccg__st_f64(dout, o, i, ccg__un_f64(op, p, ccg__ld_f64(da, a, i)));
    break;
  default:
    ccg__st_i64(dout, o, i, ccg__un_i64(op, p, ccg__ld_i64(da, a, i)));
    break;
  }
}

/* One element of Clip over a's dtype dt: lo and hi point to one element of
 * dt each, or are NULL (that side unbounded: an infinite or extreme bound
 * that no element passes). */
CCG_HD static inline void ccg__clip_elem(ccg_dtype dt, const void *a, void *o,
                                         size_t i, const void *lo,
                                         const void *hi) {
  switch (ccg__math_of(dt)) {
  case CCG__MATH_F32:
    ccg__st_f32(dt, o, i,
                ccg__clipf(ccg__ld_f32(dt, a, i),
                           lo ? ccg__ld_f32(dt, lo, 0) : -INFINITY,
                           hi ? ccg__ld_f32(dt, hi, 0) : INFINITY));
    break;
  case CCG__MATH_F64:
    ccg__st_f64(dt, o, i,
                ccg__clipd(ccg__ld_f64(dt, a, i),
                           lo ? ccg__ld_f64(dt, lo, 0) : -(double)INFINITY,
                           hi ? ccg__ld_f64(dt, hi, 0) : (double)INFINITY));
    break;
  default:
    ccg__st_i64(dt, o, i,
                ccg__clipi(ccg__ld_i64(dt, a, i),
                           lo ? ccg__ld_i64(dt, lo, 0) : INT64_MIN,
                           hi ? ccg__ld_i64(dt, hi, 0) : INT64_MAX));
    break;
  }
}

/* One element of Cast (from != to): to bool is "nonzero", to floats
 * through double, to integers through int64 (floats truncate, saturate). */
CCG_HD static inline void ccg__cast_elem(ccg_dtype from, const void *a,
                                         ccg_dtype to, void *o, size_t i) {
  bool from_float = ccg__math_of(from) != CCG__MATH_I64;
  if (to == CCG_DTYPE_BOOL)
    ((uint8_t *)o)[i] = from_float ? ccg__ld_f64(from, a, i) != 0.0
                                   : ccg__ld_i64(from, a, i) != 0;
  else if (ccg__math_of(to) != CCG__MATH_I64)
    ccg__st_f64(to, o, i, ccg__ld_f64(from, a, i));
  else
    ccg__st_i64(to, o, i, ccg__ld_i64(from, a, i));
}

/* ---- reductions ----------------------------------------------------------
 * Floats accumulate in double, integers in int64; Max keeps a NaN. */

/* ScatterND's reductions: o[i] = o[i] (+, *, max, min: red 1..4) u[j];
 * floats in double, integers wrapping. */
CCG_HD static inline void ccg__combine_elem(int red, ccg_dtype dt, void *o,
                                            size_t i, ccg_dtype du,
                                            const void *u, size_t j) {
  if (ccg__math_of(dt) != CCG__MATH_I64) {
    double a = ccg__ld_f64(dt, o, i), b = ccg__ld_f64(du, u, j);
    double v = red == 1   ? a + b
               : red == 2 ? a * b
               : red == 3 ? fmax(a, b)
                          : fmin(a, b);
    ccg__st_f64(dt, o, i, v);
    return;
  }
  int64_t a = ccg__ld_i64(dt, o, i), b = ccg__ld_i64(du, u, j);
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  int64_t v = red == 1   ? (int64_t)(ua + ub)
              : red == 2 ? (int64_t)(ua * ub)
              : red == 3 ? (a > b ? a : b)
                         : (a < b ? a : b);
  ccg__st_i64(dt, o, i, v);
}

/* ---- rows of Softmax and LayerNormalization ------------------------------
 * One line of `len` elements from `base` with `stride`; f32 math with sums
 * in double. Each loop over a line is a *_part function for worker k0 of
 * ks, taking elements k0, k0 + ks, ...: the CPU runs a line with one
 * worker (0 of 1); the GPU splits long lines over a warp or a block and
 * combines the parts in a fixed order (cuda/coop.cuh), so its sums differ
 * from the CPU's only by the order of double additions. */

/* The largest element of a worker's part (-inf for none), shifted out of
 * the exponentials of Softmax and LogSoftmax so that they do not overflow.
 * A NaN is passed over here; it reaches the sum of exponentials and makes
 * the whole line NaN. */
CCG_HD static inline float ccg__line_max_part(ccg_dtype di, const void *in,
                                              size_t base, size_t len,
                                              size_t stride, size_t k0,
                                              size_t ks) {
  float mx = -INFINITY;
  for (size_t k = k0; k < len; k += ks) {
    float v = ccg__ld_f32(di, in, base + k * stride);
    mx = v > mx ? v : mx;
  }
  return mx;
}

/* Softmax's sum of exp(x - mx) over a worker's part. */
CCG_HD static inline double ccg__softmax_sum_part(ccg_dtype di, const void *in,
                                                  size_t base, size_t len,
                                                  size_t stride, float mx,
                                                  size_t k0, size_t ks) {
  double sum = 0.0;
  for (size_t k = k0; k < len; k += ks)
    sum += expf(ccg__ld_f32(di, in, base + k * stride) - mx);
  return sum;
}

CCG_HD static inline void
ccg__softmax_store_part(ccg_dtype di, const void *in, ccg_dtype dout, void *out,
                        size_t base, size_t len, size_t stride, float mx,
                        float inv, size_t k0, size_t ks) {
  for (size_t k = k0; k < len; k += ks) {
    size_t j = base + k * stride;
    ccg__st_f32(dout, out, j, expf(ccg__ld_f32(di, in, j) - mx) * inv);
  }
}

CCG_HD static inline void ccg__softmax_line(ccg_dtype di, const void *in,
                                            ccg_dtype dout, void *out,
                                            size_t base, size_t len,
                                            size_t stride) {
  if (len == 0)
    return;
  float mx = ccg__line_max_part(di, in, base, len, stride, 0, 1);
  float inv =
      (float)(1.0 / ccg__softmax_sum_part(di, in, base, len, stride, mx, 0, 1));
  ccg__softmax_store_part(di, in, dout, out, base, len, stride, mx, inv, 0, 1);
}

/* Sum of a worker's part of `len` contiguous elements from base, and of
 * their squared distances from `mean`. */
CCG_HD static inline double ccg__row_sum_part(ccg_dtype di, const void *in,
                                              size_t base, size_t len,
                                              size_t k0, size_t ks) {
  double sum = 0.0;
  for (size_t k = k0; k < len; k += ks)
    sum += ccg__ld_f32(di, in, base + k);
  return sum;
}

CCG_HD static inline double ccg__row_sqdev_part(ccg_dtype di, const void *in,
                                                size_t base, size_t len,
                                                double mean, size_t k0,
                                                size_t ks) {
  double var = 0.0;
  for (size_t k = k0; k < len; k += ks) {
    double d = ccg__ld_f32(di, in, base + k) - mean;
    var += d * d;
  }
  return var;
}

/* LayerNormalization's inverse standard deviation from the summed squared
 * distances of `len` elements. */
CCG_HD static inline float ccg__layer_norm_invstd(double sqdev, size_t len,
                                                  float eps) {
  double var = len ? sqdev / (double)len : 0.0;
  return (float)(1.0 / sqrt(var + (double)eps));
}

CCG_HD static inline void
ccg__layer_norm_store_part(ccg_dtype di, const void *in, ccg_dtype dout,
                           void *out, size_t base, size_t len,
                           const float *scale, const float *bias, float m,
                           float invstd, size_t k0, size_t ks) {
  for (size_t k = k0; k < len; k += ks)
    ccg__st_f32(dout, out, base + k,
                (ccg__ld_f32(di, in, base + k) - m) * invstd * scale[k] +
                    bias[k]);
}

/* Normalizes row `row` (len contiguous elements) with scale and bias (len
 * f32 each); mean and inverse standard deviation come back. */
CCG_HD static inline void
ccg__layer_norm_line(ccg_dtype di, const void *in, ccg_dtype dout, void *out,
                     size_t row, size_t len, const float *scale,
                     const float *bias, float eps, float *mean_out,
                     float *invstd_out) {
  size_t base = row * len;
  double sum = ccg__row_sum_part(di, in, base, len, 0, 1);
  double mean = len ? sum / (double)len : 0.0;
  float invstd = ccg__layer_norm_invstd(
      ccg__row_sqdev_part(di, in, base, len, mean, 0, 1), len, eps);
  float m = (float)mean;
  ccg__layer_norm_store_part(di, in, dout, out, base, len, scale, bias, m,
                             invstd, 0, 1);
  *mean_out = m;
  *invstd_out = invstd;
}

#endif
