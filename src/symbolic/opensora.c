/* Open-Sora's sequence-parallel communications (opensora/acceleration/
 * communications.py): the Ulysses all-to-all and the split/gather pair
 * whose backward may scale the gradient. */
#include <math.h>
#include <string.h>

#include "symbolic/internal.h"

typedef struct params {
  const char *group;
  int64_t scatter_dim, gather_dim; /* all_to_all */
  int64_t dim;                     /* split / gather */
  ccg_grad_scale grad_scale;
} params;

static bool parse_grad_scale(const json_t *v, void *field, char *why,
                             size_t n) {
  ccg_grad_scale *s = field;
  if (json_is_number(v) && isfinite(json_number_value(v))) {
    *s = (ccg_grad_scale){CCG_GRAD_SCALE_FACTOR, json_number_value(v)};
    return true;
  }
  const char *t = json_string_value(v);
  if (t && strcmp(t, "up") == 0) {
    *s = (ccg_grad_scale){CCG_GRAD_SCALE_UP, 0};
    return true;
  }
  if (t && strcmp(t, "down") == 0) {
    *s = (ccg_grad_scale){CCG_GRAD_SCALE_DOWN, 0};
    return true;
  }
  snprintf(why, n, "must be \"up\", \"down\" or a finite number");
  return false;
}

/* Canonical: a factor is always written as a real (1 -> 1.0). */
static json_t *emit_grad_scale(const void *field) {
  const ccg_grad_scale *s = field;
  if (s->kind == CCG_GRAD_SCALE_UP)
    return json_string("up");
  if (s->kind == CCG_GRAD_SCALE_DOWN)
    return json_string("down");
  return json_real(s->factor);
}

#define GROUP                                                                  \
  CCG__PARAM(params, group, "group", STRING, "\"sp\"",                         \
             "mesh axes of the sequence-parallel group")
#define DIM                                                                    \
  CCG__PARAM(params, dim, "dim", INT, NULL, "the dim split or gathered")
#define GRAD_SCALE                                                             \
  CCG__PARAM_CUSTOM_SPEC(params, grad_scale, "grad_scale", parse_grad_scale,   \
                         emit_grad_scale, "1",                                 \
                         "\"up\" (gradient x W), \"down\" (/ W) or a factor")

static const ccg__param_spec p_all_to_all[] = {
    GROUP,
    CCG__PARAM(params, scatter_dim, "scatter_dim", INT, "2",
               "dim split into W chunks and sent"),
    CCG__PARAM(params, gather_dim, "gather_dim", INT, "1",
               "dim the received chunks are concatenated along"),
};
static const ccg__param_spec p_split_gather[] = {GROUP, DIM, GRAD_SCALE};

/* ---- all_to_all ---------------------------------------------------------- */

static ccg_status a2a(ccg__mcall *c, ccg_value_id x, int64_t scatter,
                      int64_t gather, ccg_value_id *y) {
  const params *p = c->params;
  int64_t w;
  int s, g;
  CCG_CHECK(ccg__mgroup_dim(c, p->group, x, scatter, "scatter_dim", &w, &s));
  CCG_CHECK(ccg__mdim(c, x, gather, "gather_dim", &g));
  if (w == 1)
    return ccg_identity(c->g, x, y);
  return ccg__mall_to_all(c, x, p->group, w, s, g, y);
}

static ccg_status a2a_forward(ccg__mcall *c, const ccg_value_id *in,
                              size_t n_in, ccg_value_id *out, size_t *n_out) {
  (void)n_in;
  const params *p = c->params;
  CCG_CHECK(a2a(c, in[0], p->scatter_dim, p->gather_dim, &out[0]));
  *n_out = 1;
  return CCG_STATUS_OK;
}

static ccg_status a2a_backward(ccg__mcall *c, const ccg_value_id *in,
                               size_t n_in, const ccg_value_id *out,
                               const ccg_value_id *gout, size_t n_out,
                               ccg_value_id *gin) {
  (void)in, (void)n_in, (void)out, (void)n_out;
  const params *p = c->params;
  return a2a(c, gout[0], p->gather_dim, p->scatter_dim, &gin[0]);
}

/* ---- split / gather with a scaled gradient ------------------------------ */

static uint16_t f16_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  int32_t e = (int32_t)((x >> 23) & 0xffu);
  if (e == 0xff)
    return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  e = e - 127 + 15;
  if (e >= 31)
    return (uint16_t)(sign | 0x7c00u);
  uint32_t shift = 13;
  if (e <= 0) { /* subnormal half */
    if (e < -10)
      return (uint16_t)sign;
    mant |= 0x800000u;
    shift = (uint32_t)(14 - e);
    e = 0;
  }
  uint32_t h = ((uint32_t)e << 10) + (mant >> shift);
  uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (h & 1u)))
    h++; /* carries into the exponent correctly */
  return (uint16_t)(sign | h);
}

static uint16_t bf16_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

/* A scalar constant of x's float dtype. */
static ccg_status scalar(ccg__mcall *c, ccg_value_id like, double v,
                         ccg_value_id *out) {
  ccg_dtype dt = ccg_value_dtype(c->g, like);
  union {
    float f;
    double d;
    uint16_t h;
  } u;
  switch (dt) {
  case CCG_DTYPE_F32:
    u.f = (float)v;
    break;
  case CCG_DTYPE_F64:
    u.d = v;
    break;
  case CCG_DTYPE_F16:
    u.h = f16_bits((float)v);
    break;
  case CCG_DTYPE_BF16:
    u.h = bf16_bits((float)v);
    break;
  default:
    return ccg__mfail(c, CCG_STATUS_DTYPE,
                      "gradient '%s' is %s; grad_scale needs a float type",
                      ccg_value_name(c->g, like), ccg_dtype_name(dt));
  }
  ccg_tensor t = {dt, 0, {0}, &u};
  return ccg_constant(c->g, &t, out);
}

/* grad x W ("up"), / W ("down") or x factor; nothing when that is x 1. */
static ccg_status scale(ccg__mcall *c, ccg_value_id g, int64_t w,
                        ccg_value_id *out) {
  const params *p = c->params;
  ccg_grad_scale s = p->grad_scale;
  double f = s.kind == CCG_GRAD_SCALE_FACTOR ? s.factor : (double)w;
  *out = g;
  if (f == 1.0)
    return CCG_STATUS_OK;
  ccg_value_id k;
  CCG_CHECK(scalar(c, g, f, &k));
  if (s.kind == CCG_GRAD_SCALE_DOWN)
    return ccg_div(c->g, g, k, out);
  return ccg_mul(c->g, g, k, out);
}

typedef enum { SPLIT, GATHER } kind;

/* Keep chunk r of dim (divisible) or gather along it; W = 1 gives an
 * Identity unless an earlier node of the same step already stands in. */
static ccg_status split_or_gather(ccg__mcall *c, kind k, ccg_value_id x,
                                  bool have_node, ccg_value_id *y) {
  const params *p = c->params;
  int64_t w;
  int dim;
  CCG_CHECK(ccg__mgroup_dim(c, p->group, x, p->dim, "dim", &w, &dim));
  if (k == SPLIT)
    CCG_CHECK(ccg__mdivisible(c, x, dim, w, p->group));
  if (w == 1) {
    *y = x;
    return have_node ? CCG_STATUS_OK : ccg_identity(c->g, x, y);
  }
  if (k == SPLIT)
    return ccg_shard_slice(c->g, x, p->group, dim, NULL, y);
  return ccg_all_gather(c->g, x, p->group, dim, NULL, y);
}

static ccg_status scaled_backward(ccg__mcall *c, kind k, ccg_value_id g,
                                  ccg_value_id *gin) {
  const params *p = c->params;
  int64_t w;
  CCG_CHECK(ccg__mgroup(c, p->group, &w));
  ccg_value_id v;
  CCG_CHECK(scale(c, g, w, &v));
  return split_or_gather(c, k, v, v != g, gin);
}

static ccg_status split_forward(ccg__mcall *c, const ccg_value_id *in,
                                size_t n_in, ccg_value_id *out, size_t *n_out) {
  (void)n_in;
  CCG_CHECK(split_or_gather(c, SPLIT, in[0], false, &out[0]));
  *n_out = 1;
  return CCG_STATUS_OK;
}

static ccg_status gather_backward(ccg__mcall *c, const ccg_value_id *in,
                                  size_t n_in, const ccg_value_id *out,
                                  const ccg_value_id *gout, size_t n_out,
                                  ccg_value_id *gin) {
  (void)in, (void)n_in, (void)out, (void)n_out;
  return scaled_backward(c, GATHER, gout[0], &gin[0]);
}

static ccg_status gather_forward(ccg__mcall *c, const ccg_value_id *in,
                                 size_t n_in, ccg_value_id *out,
                                 size_t *n_out) {
  (void)n_in;
  CCG_CHECK(split_or_gather(c, GATHER, in[0], false, &out[0]));
  *n_out = 1;
  return CCG_STATUS_OK;
}

static ccg_status split_backward(ccg__mcall *c, const ccg_value_id *in,
                                 size_t n_in, const ccg_value_id *out,
                                 const ccg_value_id *gout, size_t n_out,
                                 ccg_value_id *gin) {
  (void)in, (void)n_in, (void)out, (void)n_out;
  return scaled_backward(c, SPLIT, gout[0], &gin[0]);
}

/* ---- the table ---------------------------------------------------------- */

const ccg__mapping_def ccg__opensora_mappings[] = {
    {"opensora.all_to_all",
     "split scatter_dim into W chunks, AllToAll, concatenate along "
     "gather_dim (W axis moved to the front: AllToAll on dim 0)",
     "the same with scatter_dim and gather_dim swapped",
     CCG__PARAMS(p_all_to_all), sizeof(params), 1, 1, 1, a2a_forward,
     a2a_backward, NULL},
    {"opensora.split_forward_gather_backward",
     "keep chunk r of dim (divisible)",
     "scale the gradient (\"up\" x W, \"down\" / W, or a factor), then "
     "AllGather along dim",
     CCG__PARAMS(p_split_gather), sizeof(params), 1, 1, 1, split_forward,
     gather_backward, NULL},
    {"opensora.gather_forward_split_backward", "AllGather along dim",
     "scale the gradient (\"up\" x W, \"down\" / W, or a factor), then keep "
     "chunk r of dim",
     CCG__PARAMS(p_split_gather), sizeof(params), 1, 1, 1, gather_forward,
     split_backward, NULL},
};

const size_t ccg__opensora_mappings_count =
    sizeof ccg__opensora_mappings / sizeof ccg__opensora_mappings[0];

/* ---- typed entry points: ccg_mapping_apply with the same parameters ----- */

static json_t *dims_params(const char *group, const char *k1, int64_t v1,
                           const char *k2, json_t *v2) {
  json_t *o = ccg__mset(ccg__mparams_group(group), k1, json_integer(v1));
  return ccg__mset(o, k2, v2);
}

static json_t *grad_scale_json(ccg_grad_scale s) { return emit_grad_scale(&s); }

ccg_status ccg_opensora_all_to_all(ccg_graph *g, ccg_value_id x,
                                   const char *group, int64_t scatter_dim,
                                   int64_t gather_dim, ccg_value_id *out) {
  return ccg__mapply1(g, "opensora.all_to_all",
                      dims_params(group, "scatter_dim", scatter_dim,
                                  "gather_dim", json_integer(gather_dim)),
                      x, out);
}

ccg_status ccg_opensora_split_forward_gather_backward(
    ccg_graph *g, ccg_value_id x, const char *group, int64_t dim,
    ccg_grad_scale grad_scale, ccg_value_id *out) {
  return ccg__mapply1(
      g, "opensora.split_forward_gather_backward",
      dims_params(group, "dim", dim, "grad_scale", grad_scale_json(grad_scale)),
      x, out);
}

ccg_status ccg_opensora_gather_forward_split_backward(
    ccg_graph *g, ccg_value_id x, const char *group, int64_t dim,
    ccg_grad_scale grad_scale, ccg_value_id *out) {
  return ccg__mapply1(
      g, "opensora.gather_forward_split_backward",
      dims_params(group, "dim", dim, "grad_scale", grad_scale_json(grad_scale)),
      x, out);
}
