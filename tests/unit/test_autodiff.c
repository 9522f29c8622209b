/* Every op's gradient rule against central finite differences: each case
 * builds y = f(inputs) in f64, the loss sum(y * w) with a fixed random w,
 * differentiates it with ccg_backward, and compares every element of every
 * input's gradient with (L(x + h) - L(x - h)) / 2h. Elementwise, reduction,
 * shape and index kernels compute f64 in double: h = 1e-6, tolerance 1e-6
 * absolute + 1e-5 relative. MatMul, Gemm, Softmax and LayerNormalization
 * compute in f32 even for f64 data: h = 1e-3, tolerance 3e-3 + 2e-2
 * relative ("loose"). Shapes include broadcast operands. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "fd_check.h"
#include "graph/internal.h"

typedef struct grad_case {
  const char *name;
  size_t n_in;
  fd_arg in[3];
  fd_body body;
  bool loose;
} grad_case;

/* ---- bodies -------------------------------------------------------------- */

#define BIN(nm, fn)                                                            \
  static ccg_status nm(ccg_graph *g, const ccg_value_id *in, const void *ctx,  \
                       ccg_value_id *y) {                                      \
    (void)ctx;                                                                 \
    return fn(g, in[0], in[1], y);                                             \
  }
#define UN(nm, fn)                                                             \
  static ccg_status nm(ccg_graph *g, const ccg_value_id *in, const void *ctx,  \
                       ccg_value_id *y) {                                      \
    (void)ctx;                                                                 \
    return fn(g, in[0], y);                                                    \
  }
BIN(b_add, ccg_add)
BIN(b_sub, ccg_sub)
BIN(b_mul, ccg_mul)
BIN(b_div, ccg_div)
BIN(b_pow, ccg_pow)
BIN(b_matmul, ccg_matmul)
UN(b_neg, ccg_neg)
UN(b_relu, ccg_relu)
UN(b_tanh, ccg_tanh)
UN(b_erf, ccg_erf)
UN(b_sigmoid, ccg_sigmoid)
UN(b_exp, ccg_exp)
UN(b_log, ccg_log)
UN(b_sqrt, ccg_sqrt)
UN(b_identity, ccg_identity)

static ccg_status b_gelu(ccg_graph *g, const ccg_value_id *in, const void *ctx,
                         ccg_value_id *y) {
  (void)ctx;
  return ccg_gelu(g, in[0], "none", y);
}
static ccg_status b_gelu_tanh(ccg_graph *g, const ccg_value_id *in,
                              const void *ctx, ccg_value_id *y) {
  (void)ctx;
  return ccg_gelu(g, in[0], "tanh", y);
}
/* x used twice: the two contributions are summed. */
static ccg_status b_reuse(ccg_graph *g, const ccg_value_id *in, const void *ctx,
                          ccg_value_id *y) {
  (void)ctx;
  ccg_value_id t;
  CCG_CHECK(ccg_mul(g, in[0], in[0], &t));
  CCG_CHECK(ccg_tanh(g, in[0], y));
  return ccg_add(g, t, *y, y);
}
static ccg_status b_where(ccg_graph *g, const ccg_value_id *in, const void *ctx,
                          ccg_value_id *y) {
  (void)ctx;
  ccg_value_id c;
  CCG_CHECK(ccg_relu(g, in[0], &c)); /* positive where x > 0 */
  CCG_CHECK(ccg_cast(g, c, CCG_DTYPE_BOOL, &c));
  return ccg_where(g, c, in[1], in[2], y);
}
static ccg_status b_cast(ccg_graph *g, const ccg_value_id *in, const void *ctx,
                         ccg_value_id *y) {
  (void)ctx;
  ccg_value_id t;
  CCG_CHECK(ccg_cast(g, in[0], CCG_DTYPE_F32, &t));
  CCG_CHECK(ccg_mul(g, t, t, &t));
  return ccg_cast(g, t, CCG_DTYPE_F64, y);
}
static ccg_status b_dropout(ccg_graph *g, const ccg_value_id *in,
                            const void *ctx, ccg_value_id *y) {
  (void)ctx;
  CCG_CHECK(ccg_dropout(g, in[0], 0.1f, y));
  return ccg_mul(g, *y, *y, y);
}
static ccg_status b_gemm(ccg_graph *g, const ccg_value_id *in, const void *ctx,
                         ccg_value_id *y) {
  (void)ctx;
  return ccg_gemm(g, in[0], in[1], in[2], 0.75f, 1.5f, true, true, y);
}
static ccg_status b_gemm_plain(ccg_graph *g, const ccg_value_id *in,
                               const void *ctx, ccg_value_id *y) {
  (void)ctx;
  return ccg_gemm(g, in[0], in[1], in[2], 1.0f, 0.5f, false, false, y);
}
static ccg_status b_softmax(ccg_graph *g, const ccg_value_id *in,
                            const void *ctx, ccg_value_id *y) {
  (void)ctx;
  return ccg_softmax(g, in[0], 1, y);
}
static ccg_status b_layer_norm(ccg_graph *g, const ccg_value_id *in,
                               const void *ctx, ccg_value_id *y) {
  (void)ctx;
  return ccg_layer_norm(g, in[0], in[1], in[2], -1, 1e-5f, y);
}
static ccg_status b_layer_norm2(ccg_graph *g, const ccg_value_id *in,
                                const void *ctx, ccg_value_id *y) {
  (void)ctx;
  return ccg_layer_norm(g, in[0], in[1], CCG_NONE, 1, 1e-5f, y);
}
static ccg_status b_reduce_sum(ccg_graph *g, const ccg_value_id *in,
                               const void *ctx, ccg_value_id *y) {
  (void)ctx;
  int64_t ax = 1;
  return ccg_reduce_sum(g, in[0], &ax, 1, false, y);
}
static ccg_status b_reduce_mean(ccg_graph *g, const ccg_value_id *in,
                                const void *ctx, ccg_value_id *y) {
  (void)ctx;
  int64_t ax[2] = {0, -1};
  return ccg_reduce_mean(g, in[0], ax, 2, true, y);
}
static ccg_status b_reduce_max(ccg_graph *g, const ccg_value_id *in,
                               const void *ctx, ccg_value_id *y) {
  (void)ctx;
  int64_t ax = 1;
  return ccg_reduce_max(g, in[0], &ax, 1, false, y);
}
static ccg_status b_reshape(ccg_graph *g, const ccg_value_id *in,
                            const void *ctx, ccg_value_id *y) {
  (void)ctx;
  int64_t d[2] = {3, -1};
  return ccg_reshape_to(g, in[0], d, 2, y);
}
static ccg_status b_transpose(ccg_graph *g, const ccg_value_id *in,
                              const void *ctx, ccg_value_id *y) {
  (void)ctx;
  int64_t p[3] = {2, 0, 1};
  return ccg_transpose(g, in[0], p, 3, y);
}
static ccg_status b_concat(ccg_graph *g, const ccg_value_id *in,
                           const void *ctx, ccg_value_id *y) {
  (void)ctx;
  return ccg_concat(g, in, 2, 1, y);
}
/* Parts 0 and 2 used, part 1 not: its gradient is zeros. */
static ccg_status b_split(ccg_graph *g, const ccg_value_id *in, const void *ctx,
                          ccg_value_id *y) {
  (void)ctx;
  ccg_value_id p[3];
  int64_t sizes[3] = {1, 2, 1};
  CCG_CHECK(ccg_split(g, in[0], 1, sizes, 3, p));
  CCG_CHECK(ccg_mul(g, p[0], p[0], &p[0]));
  return ccg_add(g, p[0], p[2], y);
}
static ccg_status b_slice(ccg_graph *g, const ccg_value_id *in, const void *ctx,
                          ccg_value_id *y) {
  (void)ctx;
  int64_t st[2] = {1, -4}, en[2] = {3, 4};
  return ccg_slice(g, in[0], st, en, NULL, NULL, 2, y);
}
static ccg_status b_slice_steps(ccg_graph *g, const ccg_value_id *in,
                                const void *ctx, ccg_value_id *y) {
  (void)ctx;
  int64_t st[2] = {-1, 1}, en[2] = {0, 7}, ax[2] = {1, 0}, sp[2] = {-2, 2};
  return ccg_slice(g, in[0], st, en, ax, sp, 2, y);
}
static ccg_status b_gather(ccg_graph *g, const ccg_value_id *in,
                           const void *ctx, ccg_value_id *y) {
  (void)ctx;
  int64_t idx[4] = {0, -1, 2, 0};
  ccg_tensor t = {CCG_DTYPE_I64, 2, {2, 2}, idx};
  ccg_value_id iv;
  CCG_CHECK(ccg_constant(g, &t, &iv));
  return ccg_gather(g, in[0], iv, 1, y);
}
/* rows 0 and 2 (twice, added) get fixed updates; reduction from a flag */
static ccg_status scatter(ccg_graph *g, const ccg_value_id *in, const char *red,
                          ccg_value_id *y) {
  int64_t idx[3] = {0, -1, 2};
  double upd[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  ccg_tensor ti = {CCG_DTYPE_I64, 2, {strcmp(red, "add") ? 2 : 3, 1}, idx};
  ccg_tensor tu = {CCG_DTYPE_F64, 2, {ti.dims[0], 4}, upd};
  ccg_value_id iv, uv;
  CCG_CHECK(ccg_constant(g, &ti, &iv));
  CCG_CHECK(ccg_constant(g, &tu, &uv));
  CCG_CHECK(ccg_scatter_nd(g, in[0], iv, uv, red, y));
  return ccg_mul(g, *y, *y, y);
}
static ccg_status b_scatter_add(ccg_graph *g, const ccg_value_id *in,
                                const void *ctx, ccg_value_id *y) {
  (void)ctx;
  return scatter(g, in, "add", y);
}
static ccg_status b_scatter_none(ccg_graph *g, const ccg_value_id *in,
                                 const void *ctx, ccg_value_id *y) {
  (void)ctx;
  return scatter(g, in, "none", y);
}
/* updates as the variable: rows 0 and 2 of fixed data, row 0 twice where
 * the reduction adds */
static ccg_status scatter_updates(ccg_graph *g, const ccg_value_id *in,
                                  const char *red, ccg_value_id *y) {
  int64_t idx[3] = {0, -1, 0};
  double data[12] = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12};
  ccg_tensor ti = {CCG_DTYPE_I64, 2, {strcmp(red, "add") ? 2 : 3, 1}, idx};
  ccg_tensor td = {CCG_DTYPE_F64, 2, {3, 4}, data};
  ccg_value_id iv, dv;
  CCG_CHECK(ccg_constant(g, &ti, &iv));
  CCG_CHECK(ccg_constant(g, &td, &dv));
  CCG_CHECK(ccg_scatter_nd(g, dv, iv, in[0], red, y));
  return ccg_mul(g, *y, *y, y);
}
static ccg_status b_scatter_updates_add(ccg_graph *g, const ccg_value_id *in,
                                        const void *ctx, ccg_value_id *y) {
  (void)ctx;
  return scatter_updates(g, in, "add", y);
}
static ccg_status b_scatter_updates_none(ccg_graph *g, const ccg_value_id *in,
                                         const void *ctx, ccg_value_id *y) {
  (void)ctx;
  return scatter_updates(g, in, "none", y);
}
/* slices [1,-1] and [0,2] (twice: their gradients add) of a [2,3,2] x */
static ccg_status b_gather_nd(ccg_graph *g, const ccg_value_id *in,
                              const void *ctx, ccg_value_id *y) {
  (void)ctx;
  int64_t idx[6] = {1, -1, 0, 2, 0, 2};
  ccg_tensor ti = {CCG_DTYPE_I64, 2, {3, 2}, idx};
  ccg_value_id iv;
  CCG_CHECK(ccg_constant(g, &ti, &iv));
  CCG_CHECK(ccg_gather_nd(g, in[0], iv, y));
  return ccg_mul(g, *y, *y, y);
}
static ccg_status b_expand(ccg_graph *g, const ccg_value_id *in,
                           const void *ctx, ccg_value_id *y) {
  (void)ctx;
  int64_t d[3] = {2, 3, 4};
  ccg_tensor t = {CCG_DTYPE_I64, 1, {3}, d};
  ccg_value_id s;
  CCG_CHECK(ccg_constant(g, &t, &s));
  return ccg_expand(g, in[0], s, y);
}
static ccg_status b_squeeze(ccg_graph *g, const ccg_value_id *in,
                            const void *ctx, ccg_value_id *y) {
  (void)ctx;
  int64_t a = 1, b = 0;
  CCG_CHECK(ccg_squeeze(g, in[0], &a, 1, y));
  CCG_CHECK(ccg_unsqueeze(g, *y, &b, 1, y));
  return ccg_exp(g, *y, y);
}

#define S(nm, r, ...)                                                          \
  { nm, r, {__VA_ARGS__}, -1, 1 }
#define P(nm, r, ...)                                                          \
  { nm, r, {__VA_ARGS__}, 0.5, 1.5 }

static const grad_case cases[] = {
    {"add", 2, {S("a", 2, 2, 3), S("b", 1, 3)}, b_add, false},
    {"sub", 2, {S("a", 3, 2, 1, 3), S("b", 2, 4, 1)}, b_sub, false},
    {"mul", 2, {S("a", 2, 2, 3), S("b", 2, 2, 1)}, b_mul, false},
    {"div", 2, {S("a", 2, 2, 3), P("b", 1, 3)}, b_div, false},
    {"pow", 2, {P("a", 2, 2, 3), S("b", 1, 3)}, b_pow, false},
    {"neg", 1, {S("x", 2, 2, 3)}, b_neg, false},
    {"relu", 1, {S("x", 2, 3, 4)}, b_relu, false},
    {"gelu", 1, {S("x", 2, 2, 5)}, b_gelu, false},
    {"gelu_tanh", 1, {S("x", 2, 2, 5)}, b_gelu_tanh, false},
    {"tanh", 1, {S("x", 1, 6)}, b_tanh, false},
    {"erf", 1, {S("x", 1, 6)}, b_erf, false},
    {"sigmoid", 1, {S("x", 1, 6)}, b_sigmoid, false},
    {"exp", 1, {S("x", 1, 6)}, b_exp, false},
    {"log", 1, {P("x", 1, 6)}, b_log, false},
    {"sqrt", 1, {P("x", 1, 6)}, b_sqrt, false},
    {"identity", 1, {S("x", 1, 4)}, b_identity, false},
    {"reuse", 1, {S("x", 2, 2, 3)}, b_reuse, false},
    {"where",
     3,
     {S("c", 2, 2, 3), S("x", 2, 2, 3), S("y", 1, 3)},
     b_where,
     false},
    {"cast", 1, {S("x", 1, 5)}, b_cast, true},
    {"dropout", 1, {S("x", 1, 5)}, b_dropout, false},
    {"matmul_batched",
     2,
     {S("a", 3, 2, 3, 4), S("b", 2, 4, 2)},
     b_matmul,
     true},
    {"matmul_weight_rank4",
     2,
     {S("a", 4, 2, 2, 3, 4), S("b", 2, 4, 2)},
     b_matmul,
     true},
    {"matmul_broadcast",
     2,
     {S("a", 4, 2, 1, 2, 3), S("b", 3, 2, 3, 2)},
     b_matmul,
     true},
    {"matmul_vec", 2, {S("a", 1, 3), S("b", 3, 2, 3, 2)}, b_matmul, true},
    {"matmul_vec_right", 2, {S("a", 2, 2, 3), S("b", 1, 3)}, b_matmul, true},
    {"gemm_trans",
     3,
     {S("a", 2, 3, 2), S("b", 2, 4, 3), S("c", 1, 4)},
     b_gemm,
     true},
    {"gemm",
     3,
     {S("a", 2, 2, 3), S("b", 2, 3, 4), S("c", 2, 2, 1)},
     b_gemm_plain,
     true},
    {"softmax", 1, {S("x", 3, 2, 4, 2)}, b_softmax, true},
    {"layer_norm",
     3,
     {S("x", 3, 2, 2, 4), S("s", 1, 4), S("b", 1, 4)},
     b_layer_norm,
     true},
    {"layer_norm_axis1",
     2,
     {S("x", 3, 2, 3, 2), S("s", 2, 3, 2)},
     b_layer_norm2,
     true},
    {"reduce_sum", 1, {S("x", 3, 2, 3, 2)}, b_reduce_sum, false},
    {"reduce_mean", 1, {S("x", 3, 2, 3, 2)}, b_reduce_mean, false},
    {"reduce_max", 1, {S("x", 3, 2, 3, 2)}, b_reduce_max, false},
    {"reshape", 1, {S("x", 3, 2, 3, 2)}, b_reshape, false},
    {"transpose", 1, {S("x", 3, 2, 3, 4)}, b_transpose, false},
    {"concat", 2, {S("a", 2, 2, 3), S("b", 2, 2, 1)}, b_concat, false},
    {"split", 1, {S("x", 2, 2, 4)}, b_split, false},
    {"slice", 1, {S("x", 2, 4, 5)}, b_slice, false},
    {"slice_steps", 1, {S("x", 2, 6, 7)}, b_slice_steps, false},
    {"gather", 1, {S("x", 2, 2, 3)}, b_gather, false},
    {"scatter_nd_add", 1, {S("x", 2, 3, 4)}, b_scatter_add, false},
    {"scatter_nd_none", 1, {S("x", 2, 3, 4)}, b_scatter_none, false},
    {"scatter_nd_updates_add",
     1,
     {S("u", 2, 3, 4)},
     b_scatter_updates_add,
     false},
    {"scatter_nd_updates_none",
     1,
     {S("u", 2, 2, 4)},
     b_scatter_updates_none,
     false},
    {"gather_nd", 1, {S("x", 3, 2, 3, 2)}, b_gather_nd, false},
    {"expand", 1, {S("x", 2, 3, 1)}, b_expand, false},
    {"squeeze_unsqueeze", 1, {S("x", 3, 2, 1, 3)}, b_squeeze, false},
};

static void test_finite_differences(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    fd_check_body(cases[i].name, cases[i].in, cases[i].n_in, cases[i].body,
                  NULL, cases[i].loose ? FD_LOOSE : FD_TIGHT);
}

/* Every wanted weight gets its grad/<name> (name_grads makes the names a
 * few weights ahead, into a ring): 40 weights of 40 different shapes, the
 * odd ones unused (their gradients are zeros), as graph outputs. */
static void test_many_weights_named(void **state) {
  (void)state;
  enum { N = 40 };
  ccg_graph *g = ccg_test_graph(NULL);
  static float data[N];
  ccg_value_id w[N], loss = CCG_NONE;
  for (int i = 0; i < N; i++) {
    char name[32];
    snprintf(name, sizeof name, "w%d", i);
    ccg_tensor t = {CCG_DTYPE_F32, 1, {i + 1}, data};
    assert_ok(g, ccg_graph_add_initializer(g, name, &t, &w[i]));
    if (i % 2)
      continue;
    ccg_value_id sq, s;
    assert_ok(g, ccg_mul(g, w[i], w[i], &sq));
    assert_ok(g, ccg_reduce_sum(g, sq, NULL, 0, false, &s));
    if (loss == CCG_NONE)
      loss = s;
    else
      assert_ok(g, ccg_add(g, loss, s, &loss));
  }
  size_t outs = ccg_graph_num_outputs(g);
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  o.loss = loss;
  o.add_outputs = true;
  assert_ok(g, ccg_backward(g, &o));
  assert_ok(g, ccg_graph_validate(g));
  assert_int_equal(ccg_graph_num_outputs(g), outs + N);
  for (int i = 0; i < N; i++) {
    char name[32];
    snprintf(name, sizeof name, "grad/w%d", i);
    ccg_value_id v;
    assert_ok(g, ccg_graph_find_value(g, name, &v));
    assert_int_equal(ccg_node_op(g, ccg_value_producer(g, v)), CCG_OP_IDENTITY);
    const ccg_shape *sh = ccg_value_shape(g, v);
    assert_int_equal(sh->rank, 1);
    assert_int_equal(sh->dims[0].size, i + 1);
    assert_int_equal(ccg_graph_output(g, outs + (size_t)i), v);
  }
  ccg_graph_free(g);
}

/* Patterns choose what to differentiate; only what those gradients need
 * is built; integer values carry none; a value nothing depends on gets
 * zeros; failures name what is at fault and leave the graph unchanged. */
static void test_options_and_errors(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3]");
  ccg_value_id w1 = ccg_test_input(g, "layers.0.w", CCG_DTYPE_F32, "[3]");
  ccg_value_id w2 = ccg_test_input(g, "layers.1.w", CCG_DTYPE_F32, "[3]");
  ccg_value_id n = ccg_test_input(g, "n", CCG_DTYPE_I64, "[3]");
  ccg_value_id y, loss, v;
  assert_ok(g, ccg_mul(g, x, w1, &y));
  assert_ok(g, ccg_exp(g, y, &y));
  assert_ok(g, ccg_reduce_sum(g, y, NULL, 0, false, &loss));
  size_t nodes = ccg_graph_num_nodes(g), values = ccg_graph_num_values(g);
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  o.loss = loss;
  const char *bad[1] = {"nope.*"};
  o.wrt = bad;
  o.n_wrt = 1;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_backward(g, &o), "nope.*",
               "matches no float");
  const char *ints[1] = {"n"};
  o.wrt = ints;
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_backward(g, &o), "'n'");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  assert_int_equal(ccg_graph_num_values(g), values);
  (void)n;
  const char *layers[1] = {"layers.*"};
  o.wrt = layers;
  assert_ok(g, ccg_backward(g, &o));
  assert_ok(g, ccg_graph_find_value(g, "grad/layers.0.w", &v));
  assert_ok(g, ccg_graph_find_value(g, "grad/layers.1.w", &v));
  assert_int_equal(ccg_node_op(g, ccg_value_producer(g, v)), CCG_OP_IDENTITY);
  assert_fails(g, CCG_STATUS_INVALID_ARG, ccg_graph_find_value(g, "grad/x", &v),
               "grad/x");
  /* x's gradient was not asked for: no node multiplies dy by w1. */
  for (size_t i = nodes; i < ccg_graph_num_nodes(g); i++)
    for (size_t k = 0; k < ccg_node_num_inputs(g, (ccg_node_id)i); k++)
      assert_true(ccg_node_input(g, (ccg_node_id)i, k) != w1);
  (void)w2;
  ccg_graph_free(g);

  /* a gradient through LayerNormalization's Mean output has no rule */
  g = ccg_test_graph(NULL);
  x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[2,3]");
  w1 = ccg_test_input(g, "s", CCG_DTYPE_F32, "[3]");
  ccg_value_id in[2] = {x, w1}, outs[2];
  ccg_node_desc nd = CCG_NODE_DESC_INIT;
  nd.op = "LayerNormalization";
  nd.name = "ln";
  nd.inputs = in;
  nd.n_inputs = 2;
  nd.n_outputs = 2;
  assert_ok(g, ccg_graph_add_node(g, &nd, NULL));
  outs[1] = ccg_node_output(g, 0, 1);
  assert_ok(g, ccg_reduce_sum(g, outs[1], NULL, 0, false, &loss));
  nodes = ccg_graph_num_nodes(g);
  o = (ccg_backward_options)CCG_BACKWARD_OPTIONS_INIT;
  o.loss = loss;
  const char *xs[1] = {"x"};
  o.wrt = xs;
  o.n_wrt = 1;
  assert_fails(g, CCG_STATUS_UNSUPPORTED, ccg_backward(g, &o), "node 'ln'",
               "LayerNormalization", "Mean");
  assert_int_equal(ccg_graph_num_nodes(g), nodes);
  ccg_graph_free(g);
}

/* Gather's gradient with indices of a symbolic count (MoE routing gathers
 * the rows NonZero picks): the scatter-add views dy with -1 and runs with
 * the count bound at run time. */
static void test_gather_symbolic_indices(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,3]");
  ccg_value_id q = ccg_test_input(g, "q", CCG_DTYPE_I64, "[n]");
  ccg_value_id y, loss, gx;
  assert_ok(g, ccg_gather(g, x, q, 0, &y));
  assert_ok(g, ccg_reduce_sum(g, y, NULL, 0, false, &loss));
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  o.loss = loss;
  const char *xs[1] = {"x"};
  o.wrt = xs;
  o.n_wrt = 1;
  assert_ok(g, ccg_backward(g, &o));
  assert_ok(g, ccg_graph_find_value(g, "grad/x", &gx));
  assert_string_equal(ccg_test_shape(g, gx), "[4,3]");
  const float xd[12] = {0};
  const int64_t qd[3] = {0, 2, -4};
  ccg_exec_tensor in[2] = {
      XT_F32("x", xd, 4, 3),
      xt_in("q", CCG_DTYPE_I64, qd, 1, (const int64_t[]){3})};
  float got[12];
  const float want[12] = {2, 2, 2, 0, 0, 0, 1, 1, 1, 0, 0, 0};
  ccg_exec_tensor out = xt_out("grad/x", got, sizeof got);
  assert_ok(g, xt_run1(g, in, 2, &out, 1));
  xt_close(got, want, 12, 0, 0, "grad/x");
  ccg_graph_free(g);
}

/* The gradient of a 2-D weight under activations with batch dims
 * (symbolic here, as torch exports them) is one product over the rows,
 * x flattened to [b*s, 3] transposed times dy flattened to [b*s, 2]: no
 * per-batch products of the weight's size summed by a ReduceSum. */
static void test_matmul_weight_grad_rows(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[b,s,3]");
  const float wd[6] = {1, -1, 2, 0.5f, -2, 3};
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {3, 2}, wd};
  ccg_value_id w, y, gw;
  assert_ok(g, ccg_graph_add_initializer(g, "w", &wt, &w));
  assert_ok(g, ccg_matmul(g, x, w, &y));
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  o.loss = y;
  assert_ok(g, ccg_backward(g, &o));
  assert_ok(g, ccg_graph_find_value(g, "grad/w", &gw));
  assert_string_equal(ccg_test_shape(g, gw), "[3,2]");
  for (size_t n = 0; n < ccg_graph_num_nodes(g); n++)
    assert_int_not_equal(ccg_node_op(g, (ccg_node_id)n), CCG_OP_REDUCE_SUM);
  /* d sum(x w) / dw[k][j] = the sum of x[..., k] over every row */
  const float xd[12] = {1, 2, 3, 4, 5, 6, -1, -2, -3, 0.5f, 0.25f, 2};
  ccg_exec_tensor in = XT_F32("x", xd, 2, 2, 3);
  float got[6];
  const float want[6] = {4.5f, 4.5f, 5.25f, 5.25f, 8, 8};
  ccg_exec_tensor out = xt_out("grad/w", got, sizeof got);
  assert_ok(g, xt_run1(g, &in, 1, &out, 1));
  xt_close(got, want, 6, 0, 0, "grad/w");
  ccg_graph_free(g);
}

/* ScatterND's kernel, each reduction: rows 0 and 2 of [3,2] (row 0 twice
 * where repeats are defined, i.e. not for none). */
static void test_scatter_nd_kernel(void **state) {
  (void)state;
  static const char *const reds[] = {"none", "add", "mul", "max", "min"};
  const float data[6] = {1, -2, 3, 4, 5, -6}, upd[6] = {2, 2, -1, 7, 3, 3};
  const float want[5][6] = {{2, 2, 3, 4, -1, 7},
                            {6, 3, 3, 4, 4, 1},
                            {6, -12, 3, 4, -5, -42},
                            {3, 3, 3, 4, 5, 7},
                            {1, -2, 3, 4, -1, -6}};
  for (int r = 0; r < 5; r++) {
    ccg_graph *g = ccg_test_graph(NULL);
    bool none = r == 0;
    int64_t idx[3] = {0, 2, 0};
    ccg_tensor ti = {CCG_DTYPE_I64, 2, {none ? 2 : 3, 1}, idx};
    ccg_value_id d = ccg_test_input(g, "d", CCG_DTYPE_F32, "[3,2]");
    ccg_value_id u =
        ccg_test_input(g, "u", CCG_DTYPE_F32, none ? "[2,2]" : "[3,2]");
    ccg_value_id iv, y;
    assert_ok(g, ccg_constant(g, &ti, &iv));
    assert_ok(g, ccg_scatter_nd(g, d, iv, u, reds[r], &y));
    assert_ok(g, ccg_graph_add_output(g, y));
    float got[6];
    const float nu[6] = {2, 2, -1, 7};
    ccg_exec_tensor in[2] = {XT_F32("d", data, 3, 2),
                             none ? XT_F32("u", nu, 2, 2)
                                  : XT_F32("u", upd, 3, 2)};
    ccg_exec_tensor out = xt_out(ccg_value_name(g, y), got, sizeof got);
    assert_ok(g, xt_run1(g, in, 2, &out, 1));
    xt_close(got, want[r], 6, 0, 0, reds[r]);
    ccg_graph_free(g);
  }
}

/* The logic family's ops whose outputs are bool or integers only
 * (comparisons, logic, IsNaN/IsInf, bitwise): no gradient crosses them. */
static bool logic_no_gradient(int op) {
  switch (op) {
  case CCG_OP_EQUAL:
  case CCG_OP_LESS:
  case CCG_OP_LESS_OR_EQUAL:
  case CCG_OP_GREATER:
  case CCG_OP_GREATER_OR_EQUAL:
  case CCG_OP_NOT:
  case CCG_OP_AND:
  case CCG_OP_OR:
  case CCG_OP_XOR:
  case CCG_OP_IS_NAN:
  case CCG_OP_IS_INF:
  case CCG_OP_BIT_SHIFT:
  case CCG_OP_BITWISE_AND:
  case CCG_OP_BITWISE_OR:
  case CCG_OP_BITWISE_XOR:
  case CCG_OP_BITWISE_NOT:
    return true;
  default:
    return false;
  }
}

/* Every compute op has a gradient rule; only Shape, Constant and
 * ConstantOfShape, Range, Size and OneHot (integer, constant or index-made
 * outputs), the ops with bool or integer outputs, ArgMax, ArgMin and
 * NonZero (index outputs) and Compress (a data-dependent size) have none. */
static void test_every_op_has_a_rule(void **state) {
  (void)state;
  for (int op = 0; op < CCG_OP_COUNT; op++) {
    bool none = op == CCG_OP_SHAPE || op == CCG_OP_CONSTANT ||
                op == CCG_OP_CONSTANT_OF_SHAPE || logic_no_gradient(op) ||
                op == CCG_OP_ARG_MAX || op == CCG_OP_ARG_MIN ||
                op == CCG_OP_NON_ZERO || op == CCG_OP_COMPRESS ||
                op == CCG_OP_RANGE || op == CCG_OP_SIZE || op == CCG_OP_ONE_HOT;
    if ((ccg__op_info_of((ccg_op)op)->def->grad == NULL) != none)
      fail_msg("op %s: gradient rule %s", ccg_op_name((ccg_op)op),
               none ? "unexpected" : "missing");
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_finite_differences),
      cmocka_unit_test(test_options_and_errors),
      cmocka_unit_test(test_many_weights_named),
      cmocka_unit_test(test_every_op_has_a_rule),
      cmocka_unit_test(test_gather_symbolic_indices),
      cmocka_unit_test(test_matmul_weight_grad_rows),
      cmocka_unit_test(test_scatter_nd_kernel),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
