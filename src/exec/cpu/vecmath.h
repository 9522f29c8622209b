/* Private: f32 math over arrays for the CPU kernels, in one table per
 * instruction set (scalar, AVX2 + FMA, AVX-512F), chosen when an executor
 * is created from what the CPU has, capped by the environment variable
 * CCG_CPU_ISA (scalar, avx2 or avx512).
 *
 * The scalar table calls libm per element (expf, erff, tanhf and the
 * kernels_math.h formulas, which the CUDA kernels share). The
 * vector tables evaluate their own polynomials, within these bounds
 * (tests/unit/test_vecmath.c checks them against libm in double over every
 * magnitude; an ulp is that of the exact result, 2^-149 in the denormals):
 *   exp      2 ulp (measured 1.10), overflow to inf above 88.72, denormal
 *            results from -87.3, 0 below -103.97;
 *   log      2 ulp (measured 0.72); NaN below 0, -inf at 0;
 *   erf      3 ulp (measured 2.25);
 *   tanh     2 ulp (measured 1.23; glibc's tanhf: 1.92);
 *   sigmoid  3 ulp (measured 2.39; denormal results below -87.3);
 * each keeps NaN and gives the limits at +-inf; erf and tanh keep -0.
 * Every map is elementwise: an element's result does not depend on
 * where in the array it sits (fused and unfused runs give the same bits). */
#ifndef CCG_EXEC_CPU_VECMATH_H
#define CCG_EXEC_CPU_VECMATH_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "ccgraph/graph.h"

typedef enum ccg__isa {
  CCG__ISA_SCALAR,
  CCG__ISA_AVX2,
  CCG__ISA_AVX512,
  CCG__ISA_COUNT
} ccg__isa;

/* y[i] = f(x[i]) for i < n; y may be x. */
typedef void (*ccg__vm_map)(const float *x, float *y, size_t n);

typedef struct ccg__vm {
  ccg__isa isa;
  const char *name; /* as CCG_CPU_ISA spells it */
  ccg__vm_map exp, log, erf, tanh, sigmoid;
  /* Gelu as kernels_math.h's ccg__gelu_erff and ccg__gelu_tanhf */
  ccg__vm_map gelu_erf, gelu_tanh;
  /* o[i] = a[i*sa] op b[i*sb] for Add, Sub, Mul, Div, Pow; strides 0 or 1;
   * o may be a or b (same elements) */
  void (*bin)(ccg_op op, const float *a, size_t sa, const float *b, size_t sb,
              float *o, size_t n);
  /* Rows (Softmax, LayerNormalization, RMSNormalization). NULL in the
   * scalar table, whose kernels keep the lines the GPU shares
   * (kernels_math.h, norm_math.h). max ignores NaN as `v > m ? v : m`
   * does; sums accumulate in double. */
  float (*max)(const float *x, size_t n);
  /* y[i] = exp(x[i] - shift); returns the sum of the y[i] */
  double (*exp_sum)(const float *x, float shift, float *y, size_t n);
  void (*scale)(float *y, float s, size_t n); /* y[i] *= s */
  double (*sum)(const float *x, size_t n);
  double (*sum_sqdev)(const float *x, double mean, size_t n);
  /* y[i] = (x[i] - mean) * invstd * scale[i] + bias[i] (bias may be NULL:
   * 0); y may be x */
  void (*affine)(const float *x, float *y, size_t n, float mean, float invstd,
                 const float *scale, const float *bias);
} ccg__vm;

/* True if this CPU runs isa's table. */
bool ccg__isa_supported(ccg__isa isa);
/* isa's table (borrowed, static); the CPU must support it. */
const ccg__vm *ccg__vm_of(ccg__isa isa);
/* The widest table the CPU supports, capped by CCG_CPU_ISA when set; an
 * unknown value is INVALID_ARG on err naming it. Thread-safe. */
ccg_status ccg__vm_select(ccg_ctx *err, const ccg__vm **out);

#endif
