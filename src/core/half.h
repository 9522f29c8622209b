/* Private: f16 and bf16 storage (IEEE binary16 and bfloat16) to and from
 * f32, as static inline functions for the host and, under nvcc, the device
 * (CCG_HD): the kernels' loads and stores (exec/kernels_math.h) and the
 * graph's dumps (graph/dump.c) read half floats the same way. */
#ifndef CCG_CORE_HALF_H
#define CCG_CORE_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define CCG_HD __host__ __device__
#else
#define CCG_HD
#endif

/* ---- f16 and bf16 storage ---------------------------------------------- */

CCG_HD static inline uint32_t ccg__f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

CCG_HD static inline float ccg__bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* IEEE binary16 to f32, exact (subnormals, infinities, NaN kept). */
CCG_HD static inline float ccg__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f)
    return ccg__bits_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    /* zero or subnormal: man * 2^-24 */
    float v = (float)man * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return ccg__bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

/* f32 to IEEE binary16, round to nearest even; overflow gives infinity, NaN
 * stays NaN. */
CCG_HD static inline uint16_t ccg__f32_to_f16(float f) {
  uint32_t u = ccg__f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t exp = (u >> 23) & 0xffu;
  uint32_t man = u & 0x7fffffu;
  if (exp == 0xff)
    return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
  int32_t e = (int32_t)exp - 127 + 15;
  if (e >= 0x1f)
    return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10)
      return sign; /* rounds to zero */
    man |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t half = 1u << (shift - 1);
    uint32_t rest = man & ((1u << shift) - 1u);
    uint32_t v = man >> shift;
    if (rest > half || (rest == half && (v & 1u)))
      v++;
    return (uint16_t)(sign | v);
  }
  uint32_t v = ((uint32_t)e << 10) | (man >> 13);
  uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (v & 1u)))
    v++; /* may carry into the exponent, up to infinity: correct */
  return (uint16_t)(sign | v);
}

CCG_HD static inline float ccg__bf16_to_f32(uint16_t b) {
  return ccg__bits_f32((uint32_t)b << 16);
}

/* f32 to bfloat16, round to nearest even; NaN stays a quiet NaN. */
CCG_HD static inline uint16_t ccg__f32_to_bf16(float f) {
  uint32_t u = ccg__f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

#endif
