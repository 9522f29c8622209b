/* The f32 array math of vecmath.h: a scalar table over libm, and AVX2 + FMA
 * and AVX-512F tables from one body (vecmath_simd.h) compiled for each set
 * through target attributes, so the library runs on any x86-64 and takes
 * the widest vectors the CPU has. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/cpu/vecmath.h"
#include "exec/kernels_math.h"

/* ---- scalar ------------------------------------------------------------- */

/* The plain loops, also the vector tables' Pow. */
static void ccg__bin_scalar(ccg_op op, const float *a, size_t sa,
                            const float *b, size_t sb, float *o, size_t n) {
  switch (op) {
  case CCG_OP_ADD:
    for (size_t i = 0; i < n; i++)
      o[i] = a[i * sa] + b[i * sb];
    break;
  case CCG_OP_SUB:
    for (size_t i = 0; i < n; i++)
      o[i] = a[i * sa] - b[i * sb];
    break;
  case CCG_OP_MUL:
    for (size_t i = 0; i < n; i++)
      o[i] = a[i * sa] * b[i * sb];
    break;
  case CCG_OP_DIV:
    for (size_t i = 0; i < n; i++)
      o[i] = a[i * sa] / b[i * sb];
    break;
  default: /* POW */
    for (size_t i = 0; i < n; i++)
      o[i] = ccg__powf(a[i * sa], b[i * sb]);
    break;
  }
}

#define SCALAR_MAP(name, expr)                                                 \
  static void name##_scalar(const float *x, float *y, size_t n) {              \
    for (size_t i = 0; i < n; i++)                                             \
      y[i] = expr(x[i]);                                                       \
  }

SCALAR_MAP(exp, expf)
SCALAR_MAP(log, logf)
SCALAR_MAP(erf, erff)
SCALAR_MAP(tanh, tanhf)
SCALAR_MAP(sigmoid, ccg__sigmoidf)
SCALAR_MAP(gelu_erf, ccg__gelu_erff)
SCALAR_MAP(gelu_tanh, ccg__gelu_tanhf)

#undef SCALAR_MAP

static const ccg__vm scalar_table = {
    .isa = CCG__ISA_SCALAR,
    .name = "scalar",
    .exp = exp_scalar,
    .log = log_scalar,
    .erf = erf_scalar,
    .tanh = tanh_scalar,
    .sigmoid = sigmoid_scalar,
    .gelu_erf = gelu_erf_scalar,
    .gelu_tanh = gelu_tanh_scalar,
    .bin = ccg__bin_scalar,
};

#if defined(__x86_64__) && defined(__GNUC__)
#define CCG__VM_X86 1
#include <immintrin.h>

/* ---- AVX2 + FMA --------------------------------------------------------- */

#define V __m256
#define VI __m256i
#define W 8
#define FN(name) name##_avx2
#define VM_FN static inline __attribute__((target("avx2,fma")))
#define ISA CCG__ISA_AVX2
#define NAME "avx2"
#define SET1(f) _mm256_set1_ps(f)
#define ISET1(i) _mm256_set1_epi32(i)
#define LDU(p) _mm256_loadu_ps(p)
#define STU(p, v) _mm256_storeu_ps(p, v)
#define ADD(a, b) _mm256_add_ps(a, b)
#define SUB(a, b) _mm256_sub_ps(a, b)
#define MUL(a, b) _mm256_mul_ps(a, b)
#define DIV(a, b) _mm256_div_ps(a, b)
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define MAX(a, b) _mm256_max_ps(a, b)
#define MIN(a, b) _mm256_min_ps(a, b)
#define ROUND(a)                                                               \
  _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define CVTI(a) _mm256_cvtps_epi32(a)
#define CASTF(i) _mm256_castsi256_ps(i)
#define IADD(a, b) _mm256_add_epi32(a, b)
#define ISUB(a, b) _mm256_sub_epi32(a, b)
#define SRAI(a, k) _mm256_srai_epi32(a, k)
#define SLLI(a, k) _mm256_slli_epi32(a, k)
#define SRLI(a, k) _mm256_srli_epi32(a, k)
#define IAND(a, b) _mm256_and_si256(a, b)
#define IOR(a, b) _mm256_or_si256(a, b)
#define CVTF(i) _mm256_cvtepi32_ps(i)
#define BITS(a) _mm256_castps_si256(a)
#define MK __m256
#define CMPEQ(a, b) _mm256_cmp_ps(a, b, _CMP_EQ_OQ)
#define SIGNBIT _mm256_set1_ps(-0.0f)
#define ABS(a) _mm256_andnot_ps(SIGNBIT, a)
#define NEG(a) _mm256_xor_ps(SIGNBIT, a)
#define COPYSIGN(mag, s)                                                       \
  _mm256_or_ps(_mm256_andnot_ps(SIGNBIT, mag), _mm256_and_ps(SIGNBIT, s))
#define CMPLT(a, b) _mm256_cmp_ps(a, b, _CMP_LT_OQ)
#define CMPGE(a, b) _mm256_cmp_ps(a, b, _CMP_GE_OQ)
#define ISNAN(a) _mm256_cmp_ps(a, a, _CMP_UNORD_Q)
#define SEL(m, a, b) _mm256_blendv_ps(b, a, m)
#define VD __m256d
#define DSET1(f) _mm256_set1_pd(f)
#define DSTU(p, v) _mm256_storeu_pd(p, v)
#define DADD(a, b) _mm256_add_pd(a, b)
#define DSUB(a, b) _mm256_sub_pd(a, b)
#define DFMA(a, b, c) _mm256_fmadd_pd(a, b, c)
#define CVTLO(v) _mm256_cvtps_pd(_mm256_castps256_ps128(v))
#define CVTHI(v) _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))
/* the first k lanes (k < W); loads of the others read nothing and give 0 */
#define TAILMASK(k)                                                            \
  _mm256_cmp_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7),                        \
                _mm256_set1_ps((float)(k)), _CMP_LT_OQ)
#define LDM(p, m) _mm256_maskload_ps(p, _mm256_castps_si256(m))
#define ANY(m) (_mm256_movemask_ps(m) != 0)
#define STM(p, m, v) _mm256_maskstore_ps(p, _mm256_castps_si256(m), v)

#include "exec/cpu/vecmath_simd.h"

#undef V
#undef VI
#undef W
#undef FN
#undef VM_FN
#undef ISA
#undef NAME
#undef SET1
#undef ISET1
#undef LDU
#undef STU
#undef ADD
#undef SUB
#undef MUL
#undef DIV
#undef FMA
#undef MAX
#undef MIN
#undef ROUND
#undef CVTI
#undef CASTF
#undef IADD
#undef ISUB
#undef SRAI
#undef SLLI
#undef SRLI
#undef IAND
#undef IOR
#undef CVTF
#undef BITS
#undef MK
#undef CMPEQ
#undef SIGNBIT
#undef ABS
#undef NEG
#undef COPYSIGN
#undef CMPLT
#undef CMPGE
#undef ISNAN
#undef SEL
#undef VD
#undef DSET1
#undef DSTU
#undef DADD
#undef DSUB
#undef DFMA
#undef CVTLO
#undef CVTHI
#undef TAILMASK
#undef ANY
#undef LDM
#undef STM

/* ---- AVX-512F: the float bit operations go through the integer ones
 * (the float forms are AVX512DQ) */

#define V __m512
#define VI __m512i
#define W 16
#define FN(name) name##_avx512
#define VM_FN static inline __attribute__((target("avx512f")))
#define ISA CCG__ISA_AVX512
#define NAME "avx512"
#define SET1(f) _mm512_set1_ps(f)
#define ISET1(i) _mm512_set1_epi32(i)
#define LDU(p) _mm512_loadu_ps(p)
#define STU(p, v) _mm512_storeu_ps(p, v)
#define ADD(a, b) _mm512_add_ps(a, b)
#define SUB(a, b) _mm512_sub_ps(a, b)
#define MUL(a, b) _mm512_mul_ps(a, b)
#define DIV(a, b) _mm512_div_ps(a, b)
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define MAX(a, b) _mm512_max_ps(a, b)
#define MIN(a, b) _mm512_min_ps(a, b)
#define ROUND(a)                                                               \
  _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define CVTI(a) _mm512_cvtps_epi32(a)
#define CASTF(i) _mm512_castsi512_ps(i)
#define IADD(a, b) _mm512_add_epi32(a, b)
#define ISUB(a, b) _mm512_sub_epi32(a, b)
#define SRAI(a, k) _mm512_srai_epi32(a, k)
#define SLLI(a, k) _mm512_slli_epi32(a, k)
#define SRLI(a, k) _mm512_srli_epi32(a, k)
#define IAND(a, b) _mm512_and_si512(a, b)
#define IOR(a, b) _mm512_or_si512(a, b)
#define CVTF(i) _mm512_cvtepi32_ps(i)
#define MK __mmask16
#define CMPEQ(a, b) _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ)
#define BITS(a) _mm512_castps_si512(a)
#define SIGNBIT _mm512_set1_epi32((int)0x80000000u)
#define ABS(a) CASTF(_mm512_andnot_si512(SIGNBIT, BITS(a)))
#define NEG(a) CASTF(_mm512_xor_si512(SIGNBIT, BITS(a)))
#define COPYSIGN(mag, s)                                                       \
  CASTF(_mm512_or_si512(_mm512_andnot_si512(SIGNBIT, BITS(mag)),               \
                        _mm512_and_si512(SIGNBIT, BITS(s))))
#define CMPLT(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
#define CMPGE(a, b) _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ)
#define ISNAN(a) _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q)
#define SEL(m, a, b) _mm512_mask_blend_ps(m, b, a)
#define VD __m512d
#define DSET1(f) _mm512_set1_pd(f)
#define DSTU(p, v) _mm512_storeu_pd(p, v)
#define DADD(a, b) _mm512_add_pd(a, b)
#define DSUB(a, b) _mm512_sub_pd(a, b)
#define DFMA(a, b, c) _mm512_fmadd_pd(a, b, c)
#define CVTLO(v) _mm512_cvtps_pd(_mm512_castps512_ps256(v))
#define CVTHI(v)                                                               \
  _mm512_cvtps_pd(                                                             \
      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)))
#define TAILMASK(k) ((__mmask16)((1u << (k)) - 1u))
#define LDM(p, m) _mm512_maskz_loadu_ps(m, p)
#define ANY(m) ((m) != 0)
#define STM(p, m, v) _mm512_mask_storeu_ps(p, m, v)

#include "exec/cpu/vecmath_simd.h"

#endif

/* ---- choice ------------------------------------------------------------- */

bool ccg__isa_supported(ccg__isa isa) {
  switch (isa) {
  case CCG__ISA_SCALAR:
    return true;
#ifdef CCG__VM_X86
  case CCG__ISA_AVX2:
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  case CCG__ISA_AVX512:
    return __builtin_cpu_supports("avx512f");
#endif
  default:
    return false;
  }
}

const ccg__vm *ccg__vm_of(ccg__isa isa) {
  switch (isa) {
#ifdef CCG__VM_X86
  case CCG__ISA_AVX2:
    return &table_avx2;
  case CCG__ISA_AVX512:
    return &table_avx512;
#endif
  default:
    return &scalar_table;
  }
}

static const char *const isa_names[] = {"scalar", "avx2", "avx512"};
_Static_assert(sizeof isa_names / sizeof *isa_names == CCG__ISA_COUNT,
               "one name per instruction set");

ccg_status ccg__vm_select(ccg_ctx *err, const ccg__vm **out) {
  int cap = CCG__ISA_COUNT - 1;
  const char *env = getenv("CCG_CPU_ISA");
  if (env && *env) {
    for (cap = 0; cap < CCG__ISA_COUNT; cap++)
      if (strcmp(env, isa_names[cap]) == 0)
        break;
    if (cap == CCG__ISA_COUNT)
      return ccg__error(err, CCG_STATUS_INVALID_ARG,
                        "CCG_CPU_ISA is '%s': give scalar, avx2 or avx512",
                        env);
  }
  int isa = cap;
  while (isa > 0 && !ccg__isa_supported((ccg__isa)isa))
    isa--;
  *out = ccg__vm_of((ccg__isa)isa);
  return CCG_STATUS_OK;
}
