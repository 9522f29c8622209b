/* Private: the vector tables' bodies, written once over the macros that
 * vecmath.c defines for each instruction set before including this file
 * (V: the float vector, VI: the int vector, MK: a lane mask, W: lanes,
 * FN(name): the set's function name, VM_FN: static with the set's target
 * attribute). Not a header of its own: no include guard. */

/* ---- the functions, one vector at a time -------------------------------
 * exp: x = n ln2 + r, |r| <= ln2/2, ln2 split so n ln2 is exact; e^r by
 * Cephes' expf polynomial; 2^n applied in two halves so that results below
 * 2^-126 round once into the denormals and n = 128 overflows to inf. The
 * clamps keep n in [-150, 128]; NaN comes back at the end. */
VM_FN V FN(v_exp)(V x0) {
  /* below -104 the result rounds to 0 (as the clamp's would): those lanes
   * compute e^0 instead, since a product that underflows costs the CPU a
   * microcode assist per instruction (masked attention scores, padded
   * tails) */
  MK dead = CMPLT(x0, SET1(-104.0f));
  V x = SEL(dead, SET1(0.0f), MIN(x0, SET1(89.0f)));
  V n = ROUND(MUL(x, SET1(1.44269504088896341f)));
  V r = FMA(n, SET1(-0.693359375f), x);
  r = FMA(n, SET1(2.12194440e-4f), r);
  V p = SET1(1.9875691500e-4f);
  p = FMA(p, r, SET1(1.3981999507e-3f));
  p = FMA(p, r, SET1(8.3334519073e-3f));
  p = FMA(p, r, SET1(4.1665795894e-2f));
  p = FMA(p, r, SET1(1.6666665459e-1f));
  p = FMA(p, r, SET1(5.0000001201e-1f));
  p = FMA(p, MUL(r, r), ADD(r, SET1(1.0f)));
  VI ni = CVTI(n);
  VI n1 = SRAI(ni, 1);
  VI n2 = ISUB(ni, n1);
  V s1 = CASTF(SLLI(IADD(n1, ISET1(127)), 23));
  V s2 = CASTF(SLLI(IADD(n2, ISET1(127)), 23));
  V y = SEL(dead, SET1(0.0f), MUL(MUL(p, s1), s2));
  return SEL(ISNAN(x0), ADD(x0, x0), y);
}

/* log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) by Cephes' logf
 * polynomial, e ln2 added in two parts; denormals scaled by 2^23 first.
 * x < 0 and NaN give NaN, 0 gives -inf, inf gives inf. */
VM_FN V FN(v_log)(V x0) {
  MK tiny = CMPLT(x0, SET1(1.17549435e-38f));
  V x = SEL(tiny, MUL(x0, SET1(8388608.0f)), x0);
  VI bits = BITS(x);
  V e = CVTF(ISUB(SRLI(bits, 23), ISET1(126)));
  e = SEL(tiny, SUB(e, SET1(23.0f)), e);
  V m = CASTF(IOR(IAND(bits, ISET1(0x007fffff)), ISET1(0x3f000000)));
  MK lo = CMPLT(m, SET1(0.707106781186547524f));
  e = SEL(lo, SUB(e, SET1(1.0f)), e);
  V f = SUB(SEL(lo, ADD(m, m), m), SET1(1.0f));
  V z = MUL(f, f);
  V p = SET1(7.0376836292e-2f);
  p = FMA(p, f, SET1(-1.1514610310e-1f));
  p = FMA(p, f, SET1(1.1676998740e-1f));
  p = FMA(p, f, SET1(-1.2420140846e-1f));
  p = FMA(p, f, SET1(1.4249322787e-1f));
  p = FMA(p, f, SET1(-1.6668057665e-1f));
  p = FMA(p, f, SET1(2.0000714765e-1f));
  p = FMA(p, f, SET1(-2.4999993993e-1f));
  p = FMA(p, f, SET1(3.3333331174e-1f));
  V y = MUL(MUL(f, z), p);
  y = FMA(e, SET1(-2.12194440e-4f), y);
  y = FMA(SET1(-0.5f), z, y);
  V r = FMA(e, SET1(0.693359375f), ADD(f, y));
  r = SEL(CMPEQ(x0, SET1(0.0f)), SET1(-INFINITY), r);
  r = SEL(CMPEQ(x0, SET1(INFINITY)), x0, r);
  return SEL(CMPLT(x0, SET1(0.0f)), SET1(NAN), SEL(ISNAN(x0), ADD(x0, x0), r));
}

/* erf: |x| < 0.9: x P(x^2); above: 1 - exp(Q(|x| - 1)) with Q fitted to
 * log(erfc) on [0.9, 4] (erf(4) rounds to 1 in f32), sign restored. Both
 * fits are weighted least squares iterated towards minimax (relative
 * error 1.2e-8 and 2.7e-9 in exact arithmetic). */
VM_FN V FN(v_erf)(V x) {
  V a = ABS(x);
  V z = MUL(x, x);
  V p = SET1(-0.0006111427643879577f);
  p = FMA(p, z, SET1(0.005016258416212144f));
  p = FMA(p, z, SET1(-0.026781981075957126f));
  p = FMA(p, z, SET1(0.11282230809623686f));
  p = FMA(p, z, SET1(-0.3761253256611721f));
  p = FMA(p, z, SET1(1.1283791553670193f));
  V small = MUL(x, p);
  /* the second fit only where a lane needs it: Gelu's inputs are mostly
   * small (the same bits either way) */
  if (!ANY(CMPGE(a, SET1(0.9f))))
    return SEL(ISNAN(x), ADD(x, x), small);
  V t = SUB(MIN(a, SET1(4.0f)), SET1(1.0f));
  V q = SET1(-5.807567671212155e-08f);
  q = FMA(q, t, SET1(8.103391943015126e-07f));
  q = FMA(q, t, SET1(-3.1211747891224384e-06f));
  q = FMA(q, t, SET1(-1.7663219932864682e-05f));
  q = FMA(q, t, SET1(0.0002908704381767366f));
  q = FMA(q, t, SET1(-0.002019773051234226f));
  q = FMA(q, t, SET1(0.010053193753111759f));
  q = FMA(q, t, SET1(-0.041565499307550345f));
  q = FMA(q, t, SET1(-0.8431070464925833f));
  q = FMA(q, t, SET1(-2.6389674671923826f));
  q = FMA(q, t, SET1(-1.849605511419887f));
  V big = COPYSIGN(SUB(SET1(1.0f), FN(v_exp)(q)), x);
  V r = SEL(CMPLT(a, SET1(0.9f)), small, big);
  return SEL(ISNAN(x), ADD(x, x), r);
}

/* tanh: |x| < 0.55: x + x^3 P(x^2) (fitted as erf's); above: 1 - 2 /
 * (e^(2|x|) + 1), |x| capped at 10 (above 9.01 tanh rounds to 1), sign
 * restored. */
VM_FN V FN(v_tanh)(V x) {
  V a = ABS(x);
  V z = MUL(x, x);
  V p = SET1(0.002399001524805935f);
  p = FMA(p, z, SET1(-0.008416795892566394f));
  p = FMA(p, z, SET1(0.021783768800581502f));
  p = FMA(p, z, SET1(-0.05395979254179315f));
  p = FMA(p, z, SET1(0.13333294634244006f));
  p = FMA(p, z, SET1(-0.3333333274187656f));
  V small = FMA(MUL(x, z), p, x);
  V e = FN(v_exp)(MUL(SET1(2.0f), MIN(a, SET1(10.0f))));
  V big = SUB(SET1(1.0f), DIV(SET1(2.0f), ADD(e, SET1(1.0f))));
  /* the sign copied onto both: x + x^3 P(x^2) is +0 at x = -0 */
  V r = COPYSIGN(SEL(CMPLT(a, SET1(0.55f)), small, big), x);
  return SEL(ISNAN(x), ADD(x, x), r);
}

/* sigmoid as ccg__sigmoidf: e = exp(-|x|) never overflows; 1 / (1 + e) for
 * x >= 0, e / (1 + e) below (NaN: e is NaN). */
VM_FN V FN(v_sigmoid)(V x) {
  V e = FN(v_exp)(NEG(ABS(x)));
  V d = DIV(SET1(1.0f), ADD(SET1(1.0f), e));
  return SEL(CMPGE(x, SET1(0.0f)), d, MUL(e, d));
}

VM_FN V FN(v_gelu_erf)(V x) {
  V e = FN(v_erf)(MUL(x, SET1(0.70710678118654752f)));
  return MUL(MUL(SET1(0.5f), x), ADD(SET1(1.0f), e));
}

VM_FN V FN(v_gelu_tanh)(V x) {
  V c = MUL(MUL(MUL(SET1(0.044715f), x), x), x);
  V t = FN(v_tanh)(MUL(SET1(0.79788456080286536f), ADD(x, c)));
  return MUL(MUL(SET1(0.5f), x), ADD(SET1(1.0f), t));
}

/* ---- maps over arrays: the tail goes through a padded vector so that
 * every element takes the same path */
#define VM_MAP(name)                                                           \
  VM_FN void FN(name)(const float *x, float *y, size_t n) {                    \
    size_t i = 0;                                                              \
    for (; i + W <= n; i += W)                                                 \
      STU(y + i, FN(v_##name)(LDU(x + i)));                                    \
    if (i < n) {                                                               \
      float t[W] = {0};                                                        \
      memcpy(t, x + i, (n - i) * sizeof(float));                               \
      STU(t, FN(v_##name)(LDU(t)));                                            \
      memcpy(y + i, t, (n - i) * sizeof(float));                               \
    }                                                                          \
  }

VM_MAP(exp)
VM_MAP(log)
VM_MAP(erf)
VM_MAP(tanh)
VM_MAP(sigmoid)
VM_MAP(gelu_erf)
VM_MAP(gelu_tanh)

#undef VM_MAP

/* ---- binary arithmetic: IEEE's single rounding, so the scalar tail gives
 * the vector lanes' bits */
#define VM_BIN(VOP, sop)                                                       \
  do {                                                                         \
    size_t i = 0;                                                              \
    if (sa && sb)                                                              \
      for (; i + W <= n; i += W)                                               \
        STU(o + i, VOP(LDU(a + i), LDU(b + i)));                               \
    else if (sa) {                                                             \
      V vb = SET1(b[0]);                                                       \
      for (; i + W <= n; i += W)                                               \
        STU(o + i, VOP(LDU(a + i), vb));                                       \
    } else if (sb) {                                                           \
      V va = SET1(a[0]);                                                       \
      for (; i + W <= n; i += W)                                               \
        STU(o + i, VOP(va, LDU(b + i)));                                       \
    }                                                                          \
    for (; i < n; i++)                                                         \
      o[i] = a[i * sa] sop b[i * sb];                                          \
  } while (0)

VM_FN void FN(bin)(ccg_op op, const float *a, size_t sa, const float *b,
                   size_t sb, float *o, size_t n) {
  switch (op) {
  case CCG_OP_ADD:
    VM_BIN(ADD, +);
    break;
  case CCG_OP_SUB:
    VM_BIN(SUB, -);
    break;
  case CCG_OP_MUL:
    VM_BIN(MUL, *);
    break;
  case CCG_OP_DIV:
    VM_BIN(DIV, /);
    break;
  default:
    ccg__bin_scalar(op, a, sa, b, sb, o, n);
    break;
  }
}

#undef VM_BIN

/* ---- rows ---------------------------------------------------------------
 * Sums accumulate in lanes of doubles (each float widened exactly), added
 * at the end: as the scalar lines' double sums, up to the order. */

VM_FN double FN(hsum)(VD v) {
  double t[W / 2];
  DSTU(t, v);
  double s = 0.0;
  for (int k = 0; k < W / 2; k++)
    s += t[k];
  return s;
}

VM_FN float FN(max)(const float *x, size_t n) {
  if (n == 0)
    return -INFINITY;
  float m = x[0];
  size_t i = 0;
  if (n >= W) {
    V acc = LDU(x);
    for (i = W; i + W <= n; i += W)
      acc = MAX(LDU(x + i), acc); /* MAX(v, acc) keeps acc when v is NaN */
    float t[W];
    STU(t, acc);
    m = t[0];
    for (int k = 1; k < W; k++)
      m = t[k] > m ? t[k] : m;
  }
  for (; i < n; i++)
    m = x[i] > m ? x[i] : m;
  return m;
}

VM_FN double FN(exp_sum)(const float *x, float shift, float *y, size_t n) {
  V sh = SET1(shift);
  VD acc = DSET1(0.0);
  size_t i = 0;
  for (; i + W <= n; i += W) {
    V e = FN(v_exp)(SUB(LDU(x + i), sh));
    STU(y + i, e);
    acc = DADD(acc, DADD(CVTLO(e), CVTHI(e)));
  }
  if (i < n) { /* masked: short rows (attention over a few tokens) are all
                * tail; the lanes past the end are e^-inf = 0 */
    MK m = TAILMASK(n - i);
    V e = FN(v_exp)(SEL(m, SUB(LDM(x + i, m), sh), SET1(-INFINITY)));
    STM(y + i, m, e);
    acc = DADD(acc, DADD(CVTLO(e), CVTHI(e)));
  }
  return FN(hsum)(acc);
}

VM_FN void FN(scale)(float *y, float s, size_t n) {
  V vs = SET1(s);
  size_t i = 0;
  for (; i + W <= n; i += W)
    STU(y + i, MUL(LDU(y + i), vs));
  if (i < n) {
    MK m = TAILMASK(n - i);
    STM(y + i, m, MUL(LDM(y + i, m), vs));
  }
}

VM_FN double FN(sum)(const float *x, size_t n) {
  VD acc = DSET1(0.0);
  size_t i = 0;
  for (; i + W <= n; i += W) {
    V v = LDU(x + i);
    acc = DADD(acc, DADD(CVTLO(v), CVTHI(v)));
  }
  double s = FN(hsum)(acc);
  for (; i < n; i++)
    s += x[i];
  return s;
}

VM_FN double FN(sum_sqdev)(const float *x, double mean, size_t n) {
  VD lo = DSET1(0.0), hi = DSET1(0.0), m = DSET1(mean);
  size_t i = 0;
  for (; i + W <= n; i += W) {
    V v = LDU(x + i);
    VD dl = DSUB(CVTLO(v), m), dh = DSUB(CVTHI(v), m);
    lo = DFMA(dl, dl, lo);
    hi = DFMA(dh, dh, hi);
  }
  double s = FN(hsum)(DADD(lo, hi));
  for (; i < n; i++) {
    double d = (double)x[i] - mean;
    s += d * d;
  }
  return s;
}

VM_FN void FN(affine)(const float *x, float *y, size_t n, float mean,
                      float invstd, const float *scale, const float *bias) {
  V m = SET1(mean), is = SET1(invstd);
  size_t i = 0;
  for (; i + W <= n; i += W) {
    V v = MUL(MUL(SUB(LDU(x + i), m), is), LDU(scale + i));
    STU(y + i, bias ? ADD(v, LDU(bias + i)) : v);
  }
  for (; i < n; i++) {
    float v = (x[i] - mean) * invstd * scale[i];
    y[i] = bias ? v + bias[i] : v;
  }
}

static const ccg__vm FN(table) = {
    .isa = ISA,
    .name = NAME,
    .exp = FN(exp),
    .log = FN(log),
    .erf = FN(erf),
    .tanh = FN(tanh),
    .sigmoid = FN(sigmoid),
    .gelu_erf = FN(gelu_erf),
    .gelu_tanh = FN(gelu_tanh),
    .bin = FN(bin),
    .max = FN(max),
    .exp_sum = FN(exp_sum),
    .scale = FN(scale),
    .sum = FN(sum),
    .sum_sqdev = FN(sum_sqdev),
    .affine = FN(affine),
};
