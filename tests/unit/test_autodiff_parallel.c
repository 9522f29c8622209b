/* Sharded gradients equal unsharded ones. Each model is built twice: plain
 * (one rank, no collectives) and sharded with the mapping library on a
 * tp=W mesh (W = 2 and 4). Both are differentiated by ccg_backward from
 * loss = sum(y * R), run (the sharded one on W local ranks), and rank r's
 * gradient of every parameter and input must equal chunk r (along the
 * parameter's sharded dim) of the unsharded gradient, or all of it for
 * replicated ones. f32; tolerance 1e-4 absolute + 1e-3 relative (the sums
 * differ in order). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "fd_check.h"
#include "core/error.h"

#define MAXP 8
#define MAXW 4

/* A parameter or input: full dims, and the dim each rank holds a chunk of
 * (-1: replicated). */
typedef struct pspec {
  const char *name;
  int rank;
  int64_t dims[5];
  int axis;
} pspec;

typedef ccg_status (*model_fn)(ccg_graph *g, bool sharded,
                               const ccg_value_id *p, ccg_value_id *y);

typedef struct model {
  const char *name;
  size_t n;
  pspec p[MAXP];
  model_fn build;
} model;

static int64_t count(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++)
    n *= dims[i];
  return n;
}

/* Chunk r of W along `axis` of a row-major tensor. */
static void chunk(const float *full, int rank, const int64_t *dims, int axis,
                  int w, int r, float *out) {
  int64_t outer = 1, inner = 1, d = dims[axis], c = d / w;
  for (int i = 0; i < rank; i++)
    if (i < axis)
      outer *= dims[i];
    else if (i > axis)
      inner *= dims[i];
  for (int64_t o = 0; o < outer; o++)
    memcpy(out + o * c * inner, full + (o * d + r * c) * inner,
           (size_t)(c * inner) * sizeof *out);
}

static void local_dims(const pspec *s, int w, int64_t *dims) {
  for (int i = 0; i < s->rank; i++)
    dims[i] = s->dims[i] / (i == s->axis ? w : 1);
}

/* Adds inputs, the model, and the loss; differentiates for every input. */
static ccg_graph *build(const model *m, int w) {
  char mesh[16];
  snprintf(mesh, sizeof mesh, "tp=%d", w);
  ccg_graph *g = ccg_test_graph(w > 1 ? mesh : NULL);
  ccg_value_id p[MAXP], y;
  const char *names[MAXP];
  for (size_t i = 0; i < m->n; i++) {
    int64_t d[5];
    local_dims(&m->p[i], w, d);
    ccg_shape s = ccg_shape_make(m->p[i].rank, d);
    assert_ok(g,
              ccg_graph_add_input(g, m->p[i].name, CCG_DTYPE_F32, &s, &p[i]));
    names[i] = m->p[i].name;
  }
  assert_ok(g, m->build(g, w > 1, p, &y));
  fd_add_loss(g, y, CCG_DTYPE_F32, 77, names, m->n);
  return g;
}

static void check_model(const model *m, int w) {
  float *full[MAXP], *want[MAXP];
  ccg_exec_tensor in1[MAXP], out1[MAXP];
  char gname[MAXP][64];
  for (size_t i = 0; i < m->n; i++) {
    size_t n = (size_t)count(m->p[i].rank, m->p[i].dims);
    full[i] = malloc(n * sizeof(float));
    want[i] = malloc(n * sizeof(float));
    xt_fill(full[i], n, (uint32_t)(11 + i));
    in1[i] =
        xt_in(m->p[i].name, CCG_DTYPE_F32, full[i], m->p[i].rank, m->p[i].dims);
    snprintf(gname[i], sizeof gname[i], "grad/%s", m->p[i].name);
    out1[i] = xt_out(gname[i], want[i], n * sizeof(float));
  }
  ccg_graph *g1 = build(m, 1);
  assert_ok(g1, xt_run1(g1, in1, m->n, out1, m->n));
  ccg_graph_free(g1);

  ccg_graph *g = build(m, w);
  float *shard[MAXW][MAXP], *got[MAXW][MAXP];
  ccg_exec_tensor in[MAXW][MAXP], out[MAXW][MAXP];
  const ccg_exec_tensor *pin[MAXW];
  ccg_exec_tensor *pout[MAXW];
  for (int r = 0; r < w; r++) {
    for (size_t i = 0; i < m->n; i++) {
      int64_t d[5];
      local_dims(&m->p[i], w, d);
      size_t n = (size_t)count(m->p[i].rank, d);
      shard[r][i] = malloc(n * sizeof(float));
      got[r][i] = malloc(n * sizeof(float));
      if (m->p[i].axis >= 0)
        chunk(full[i], m->p[i].rank, m->p[i].dims, m->p[i].axis, w, r,
              shard[r][i]);
      else
        memcpy(shard[r][i], full[i], n * sizeof(float));
      in[r][i] =
          xt_in(m->p[i].name, CCG_DTYPE_F32, shard[r][i], m->p[i].rank, d);
      out[r][i] = xt_out(gname[i], got[r][i], n * sizeof(float));
    }
    pin[r] = in[r];
    pout[r] = out[r];
  }
  assert_ok(g, ccg_exec_run_local(g, w, NULL, pin, m->n, pout, m->n, NULL));
  for (int r = 0; r < w; r++) {
    for (size_t i = 0; i < m->n; i++) {
      int64_t d[5];
      local_dims(&m->p[i], w, d);
      size_t n = (size_t)count(m->p[i].rank, d);
      float *exp = malloc(n * sizeof(float));
      if (m->p[i].axis >= 0)
        chunk(want[i], m->p[i].rank, m->p[i].dims, m->p[i].axis, w, r, exp);
      else
        memcpy(exp, want[i], n * sizeof(float));
      char what[128];
      snprintf(what, sizeof what, "%s tp=%d rank %d %s", m->name, w, r,
               gname[i]);
      xt_close(got[r][i], exp, n, 1e-4, 1e-3, what);
      free(exp);
      free(shard[r][i]);
      free(got[r][i]);
    }
  }
  for (size_t i = 0; i < m->n; i++) {
    free(full[i]);
    free(want[i]);
  }
  ccg_graph_free(g);
}

/* ---- models ---------------------------------------------------------------
 */

/* Megatron MLP: y = Gelu(x W1 + b1) W2 + b2, column- then row-parallel. */
static ccg_status mlp(ccg_graph *g, bool sharded, const ccg_value_id *p,
                      ccg_value_id *y) {
  ccg_value_id h;
  if (!sharded) {
    CCG_CHECK(ccg_matmul(g, p[0], p[1], &h));
    CCG_CHECK(ccg_add(g, h, p[2], &h));
    CCG_CHECK(ccg_gelu(g, h, "none", &h));
    CCG_CHECK(ccg_matmul(g, h, p[3], &h));
    return ccg_add(g, h, p[4], y);
  }
  ccg_megatron_linear_options o = CCG_MEGATRON_LINEAR_OPTIONS_INIT;
  CCG_CHECK(ccg_megatron_column_parallel_linear(g, p[0], p[1], p[2], &o, &h));
  CCG_CHECK(ccg_gelu(g, h, "none", &h));
  return ccg_megatron_row_parallel_linear(g, h, p[3], p[4], &o, y);
}

/* The same under sequence parallelism: x arrives as a sequence shard,
 * LayerNorm runs on it with its scale and bias marked as
 * sequence-parallel parameters, the column layer all-gathers the sequence,
 * the row layer reduce-scatters it, and the output is gathered again
 * (backward: keep the chunk) so that the loss is replicated. */
static ccg_status mlp_sp(ccg_graph *g, bool sharded, const ccg_value_id *p,
                         ccg_value_id *y) {
  ccg_value_id h, gam = p[5], bet = p[6];
  if (sharded) {
    CCG_CHECK(ccg_mark_sequence_parallel_param(g, gam, NULL, &gam));
    CCG_CHECK(ccg_mark_sequence_parallel_param(g, bet, NULL, &bet));
  }
  CCG_CHECK(ccg_layer_norm(g, p[0], gam, bet, -1, 1e-5f, &h));
  if (!sharded)
    return mlp(g, false, (ccg_value_id[]){h, p[1], p[2], p[3], p[4]}, y);
  ccg_megatron_linear_options o = CCG_MEGATRON_LINEAR_OPTIONS_INIT;
  o.sequence_parallel = true;
  CCG_CHECK(ccg_megatron_column_parallel_linear(g, h, p[1], p[2], &o, &h));
  CCG_CHECK(ccg_gelu(g, h, "none", &h));
  CCG_CHECK(ccg_megatron_row_parallel_linear(g, h, p[3], p[4], &o, &h));
  return ccg_megatron_gather_from_sequence_parallel_region(g, h, NULL, false,
                                                           NULL, 0, y);
}

/* DTensor styles: colwise (R -> S(-1)), Gelu, rowwise (S(-1) -> R). */
static ccg_status dtensor_mlp(ccg_graph *g, bool sharded, const ccg_value_id *p,
                              ccg_value_id *y) {
  if (!sharded)
    return mlp(g, false, p, y);
  ccg_dtensor_style_options o = CCG_DTENSOR_STYLE_OPTIONS_INIT;
  ccg_value_id h;
  CCG_CHECK(ccg_dtensor_colwise_parallel(g, p[0], p[1], p[2], &o, &h));
  CCG_CHECK(ccg_gelu(g, h, "none", &h));
  return ccg_dtensor_rowwise_parallel(g, h, p[3], p[4], &o, y);
}

/* Ulysses attention: qkv [B, N/W, 3, H, D] -> all-to-all (scatter heads,
 * gather sequence) -> attention on H/W heads over the whole sequence ->
 * all-to-all (scatter sequence, gather heads) -> [B, N/W, H, D], gathered
 * along the sequence (backward: keep the chunk) for a replicated loss. */
static ccg_status ulysses(ccg_graph *g, bool sharded, const ccg_value_id *p,
                          ccg_value_id *y) {
  ccg_value_id v = p[0], qkv[3], s;
  if (sharded)
    CCG_CHECK(ccg_opensora_all_to_all(g, v, "tp", 3, 1, &v));
  CCG_CHECK(ccg_split(g, v, 2, NULL, 3, qkv));
  int64_t two = 2, perm[4] = {0, 2, 1, 3}, kt[4] = {0, 1, 3, 2};
  for (int i = 0; i < 3; i++) {
    CCG_CHECK(ccg_squeeze(g, qkv[i], &two, 1, &qkv[i]));
    CCG_CHECK(ccg_transpose(g, qkv[i], perm, 4, &qkv[i])); /* B,h,N,D */
  }
  CCG_CHECK(ccg_transpose(g, qkv[1], kt, 4, &s));
  CCG_CHECK(ccg_matmul(g, qkv[0], s, &s));
  ccg_value_id scale;
  float k = 0.70710678f;
  ccg_tensor t = {CCG_DTYPE_F32, 0, {0}, &k};
  CCG_CHECK(ccg_constant(g, &t, &scale));
  CCG_CHECK(ccg_mul(g, s, scale, &s));
  CCG_CHECK(ccg_softmax(g, s, -1, &s));
  CCG_CHECK(ccg_matmul(g, s, qkv[2], &v));
  CCG_CHECK(ccg_transpose(g, v, perm, 4, &v)); /* B,N,h,D */
  if (sharded) {
    CCG_CHECK(ccg_opensora_all_to_all(g, v, "tp", 1, 2, &v));
    CCG_CHECK(ccg_opensora_gather_forward_split_backward(
        g, v, "tp", 1, CCG_GRAD_SCALE_NONE, &v));
  }
  int64_t flat[2] = {2 * 4, 4 * 2};
  return ccg_reshape_to(g, v, flat, 2, y);
}

/* Untagged collectives (the replicated-loss convention): x is sliced by
 * columns, scaled by this rank's part of v, multiplied by this rank's rows
 * of w2 (a partial sum), reduce-scattered by rows, tanh, all-to-all back
 * to column chunks and all-gathered: y = tanh((x * v) w2) on every rank. */
static ccg_status raw(ccg_graph *g, bool sharded, const ccg_value_id *p,
                      ccg_value_id *y) {
  ccg_value_id h = p[0];
  if (sharded)
    CCG_CHECK(ccg_shard_slice(g, h, "tp", 1, NULL, &h));
  CCG_CHECK(ccg_mul(g, h, p[1], &h));
  CCG_CHECK(ccg_matmul(g, h, p[2], &h));
  if (sharded)
    CCG_CHECK(ccg_reduce_scatter(g, h, "tp", 0, CCG_REDUCE_SUM, NULL, &h));
  CCG_CHECK(ccg_tanh(g, h, &h));
  if (!sharded) {
    *y = h;
    return CCG_STATUS_OK;
  }
  CCG_CHECK(ccg_all_to_all(g, h, "tp", 1, 0, NULL, NULL, &h));
  return ccg_all_gather(g, h, "tp", 1, NULL, y);
}

#define P1(nm, d0, ax)                                                         \
  { nm, 1, {d0}, ax }
#define P2(nm, d0, d1, ax)                                                     \
  { nm, 2, {d0, d1}, ax }

static const model mlp_model = {"mlp",
                                5,
                                {P2("x", 4, 4, -1), P2("w1", 4, 8, 1),
                                 P1("b1", 8, 0), P2("w2", 8, 4, 0),
                                 P1("b2", 4, -1)},
                                mlp};

static const model mlp_sp_model = {
    "mlp_sp",
    7,
    {P2("x", 8, 4, 0), P2("w1", 4, 8, 1), P1("b1", 8, 0), P2("w2", 8, 4, 0),
     P1("b2", 4, -1), P1("gamma", 4, -1), P1("beta", 4, -1)},
    mlp_sp};

static const model dtensor_model = {"dtensor_colwise_rowwise",
                                    5,
                                    {P2("x", 4, 4, -1), P2("w1", 4, 8, 1),
                                     P1("b1", 8, 0), P2("w2", 8, 4, 0),
                                     P1("b2", 4, -1)},
                                    dtensor_mlp};

static const model ulysses_model = {
    "ulysses", 1, {{"qkv", 5, {2, 4, 3, 4, 2}, 1}}, ulysses};

static const model raw_model = {
    "untagged_collectives",
    3,
    {P2("x", 4, 4, -1), P1("v", 4, 0), P2("w2", 4, 4, 0)},
    raw};

static void test_untagged_collectives(void **state) {
  (void)state;
  check_model(&raw_model, 2);
  check_model(&raw_model, 4);
}

static void test_dtensor_styles(void **state) {
  (void)state;
  check_model(&dtensor_model, 2);
  check_model(&dtensor_model, 4);
}

static void test_ulysses_attention(void **state) {
  (void)state;
  check_model(&ulysses_model, 2);
  check_model(&ulysses_model, 4);
}

static void test_megatron_mlp(void **state) {
  (void)state;
  check_model(&mlp_model, 2);
  check_model(&mlp_model, 4);
}

static void test_megatron_mlp_sequence_parallel(void **state) {
  (void)state;
  check_model(&mlp_sp_model, 2);
  check_model(&mlp_sp_model, 4);
}

/* The memory plan of the forward+backward graph reuses buffers: the
 * planned arena is smaller than the sum of every intermediate (printed). */
static void test_backward_memory_plan(void **state) {
  (void)state;
  ccg_graph *g = build(&mlp_sp_model, 1);
  ccg_exec_tensor in[MAXP];
  float *data[MAXP];
  for (size_t i = 0; i < mlp_sp_model.n; i++) {
    const pspec *p = &mlp_sp_model.p[i];
    data[i] = calloc((size_t)count(p->rank, p->dims), sizeof(float));
    in[i] = xt_in(p->name, CCG_DTYPE_F32, data[i], p->rank, p->dims);
  }
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.input_shapes = in;
  o.n_input_shapes = mlp_sp_model.n;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &o, &x));
  ccg_exec_memory m;
  assert_ok(x, ccg_exec_memory_info(x, &m));
  print_message("forward+backward LayerNorm-MLP: %zu nodes, peak %zu bytes, "
                "naive %zu, max live %zu\n",
                ccg_graph_num_nodes(g), m.peak_bytes, m.naive_bytes,
                m.max_live_bytes);
  assert_true(m.peak_bytes < m.naive_bytes / 2);
  assert_true(m.peak_bytes >= m.max_live_bytes);
  ccg_exec_free(x);
  for (size_t i = 0; i < mlp_sp_model.n; i++)
    free(data[i]);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_megatron_mlp),
      cmocka_unit_test(test_megatron_mlp_sequence_parallel),
      cmocka_unit_test(test_dtensor_styles),
      cmocka_unit_test(test_untagged_collectives),
      cmocka_unit_test(test_ulysses_attention),
      cmocka_unit_test(test_backward_memory_plan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
