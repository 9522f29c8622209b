/* Data parallelism through routing by data (src/passes/data_parallel_routing.c,
 * docs/parallelism.md "Routing by data"): a small MoE-like block over a
 * batch of 4 rows, on dp=2. NonZero picks the rows whose gate is positive
 * (one of rank 0's two rows, both of rank 1's: positions within each
 * rank's chunk), Gather takes them, an expert MatMul and Sigmoid run on
 * them, an Expand to the shape of x[0:1, :] (a Slice of the chunk's rows
 * that only Shape reads, as Mixtral's index_add has), and ScatterElements adds
 * them into a table of the batch's rows made from constants (distinct values,
 * so a table cut at the wrong rows, or positions read as global ones, give
 * other results). Each rank's output rows, its mean loss averaged over the
 * ranks and the expert's all-reduced gradient equal the unsharded model's (1e-5
 * relative). Nodes that would combine the chunk-local rows, a MatMul over the
 * batch, and a chunk-local graph output are errors naming the value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"

enum { B = 4, H = 3 };

static const float X[B * H] = {1, 0.5f,  -1, -1,   2, 0.25f,
                               2, -0.5f, 1,  0.5f, 1, -2};
static const float WG[H] = {1, 0, 0}; /* gate = x[:, 0] */
static const float W[H * H] = {0.5f, -1, 0.25f, 1, 0.5f, -0.5f, -2, 1, 0.75f};
static const float TABLE[B * H] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f,
                                   0.7f, 0.8f, 0.9f, 1.0f, 1.1f, 1.2f};

/* What the variants put between the expert and the scatter, or in place of
 * the routing. */
typedef enum variant {
  ROUTED,        /* the block as described */
  SUM_ROUTED,    /* adds the sum over the routed rows (combines them) */
  GRAM_ROUTED,   /* a MatMul of the routed rows by themselves */
  OUTPUT_ROUTED, /* the routed rows as a graph output */
  GRAM_BATCH     /* no routing: x^T x, a MatMul over the batch */
} variant;

static ccg_value_id cst_i64(ccg_graph *g, int rank, const int64_t *v,
                            int64_t n) {
  ccg_tensor t = {CCG_DTYPE_I64, rank, {n}, v};
  ccg_value_id c;
  assert_ok(g, ccg_constant(g, &t, &c));
  return c;
}

static ccg_graph *model(variant k) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,3]"), wg, w, y;
  ccg_tensor twg = {CCG_DTYPE_F32, 2, {H, 1}, WG};
  ccg_tensor tw = {CCG_DTYPE_F32, 2, {H, H}, W};
  assert_ok(g, ccg_graph_add_initializer(g, "wg", &twg, &wg));
  assert_ok(g, ccg_graph_add_initializer(g, "w", &tw, &w));
  if (k == GRAM_BATCH) {
    const int64_t perm[2] = {1, 0};
    ccg_value_id xt;
    assert_ok(g, ccg_transpose(g, x, perm, 2, &xt));
    assert_ok(g, ccg_matmul(g, xt, x, &y));
    assert_ok(g, ccg_matmul(g, x, y, &y));
  } else {
    ccg_value_id gate, zero, mask, nz, rows_at, rows, h;
    static const float z0 = 0;
    ccg_tensor tz = {CCG_DTYPE_F32, 0, {0}, &z0};
    assert_ok(g, ccg_matmul(g, x, wg, &gate));
    assert_ok(g, ccg_constant(g, &tz, &zero));
    ccg_value_id gin[2] = {gate, zero};
    assert_ok(g, xt_node(g, "Greater", "mask", gin, 2, NULL, 0, 1, &mask));
    assert_ok(g, xt_node(g, "NonZero", "nz", &mask, 1, NULL, 0, 1, &nz));
    const int64_t first = 0;
    assert_ok(g, ccg_gather(g, nz, cst_i64(g, 0, &first, 1), 0, &rows_at));
    assert_ok(g, ccg_gather(g, x, rows_at, 0, &rows));
    assert_ok(g, ccg_matmul(g, rows, w, &h));
    assert_ok(g, ccg_sigmoid(g, h, &h));
    if (k == SUM_ROUTED) {
      const int64_t ax = 0;
      ccg_value_id s;
      assert_ok(g, ccg_reduce_sum(g, h, &ax, 1, true, &s));
      assert_ok(g, ccg_add(g, h, s, &h));
    } else if (k == GRAM_ROUTED) {
      const int64_t perm[2] = {1, 0};
      ccg_value_id ht, gram;
      assert_ok(g, ccg_transpose(g, h, perm, 2, &ht));
      assert_ok(g, ccg_matmul(g, ht, h, &gram));
      assert_ok(g, ccg_matmul(g, h, gram, &h));
    } else if (k == OUTPUT_ROUTED) {
      assert_ok(g, ccg_graph_add_output(g, xt_named(g, h, "routed")));
    }
    /* index_add's expand of the rows to the shape of x[0:1, :], read
     * only by Shape (the chunk's first row on each rank) */
    const int64_t s0 = 0, e1 = 1, one = 1;
    ccg_value_id row, row_shape, at, shp, table;
    assert_ok(g, ccg_slice(g, x, &s0, &e1, &s0, NULL, 1, &row));
    assert_ok(g, ccg_shape_of(g, row, 0, 2, &row_shape));
    assert_ok(g, ccg_expand(g, h, row_shape, &h));
    assert_ok(g, ccg_unsqueeze(g, rows_at, &one, 1, &at));
    assert_ok(g, ccg_shape_of(g, h, 0, 2, &shp));
    assert_ok(g, ccg_expand(g, at, shp, &at));
    ccg_tensor tt = {CCG_DTYPE_F32, 2, {B, H}, TABLE};
    assert_ok(g, ccg_constant(g, &tt, &table));
    ccg_value_id sin[3] = {table, at, h}, back;
    ccg_attr axis = {.name = "axis", .type = CCG_ATTR_INT, .i = 0};
    assert_ok(g, xt_node(g, "ScatterElements", "scatter", sin, 3, &axis, 1, 1,
                         &back));
    assert_ok(g, ccg_add(g, x, back, &y));
  }
  ccg_value_id sq, loss;
  y = xt_named(g, y, "y");
  assert_ok(g, ccg_graph_add_output(g, y));
  assert_ok(g, ccg_mul(g, y, y, &sq));
  assert_ok(g, ccg_reduce_mean(g, sq, NULL, 0, false, &loss));
  assert_ok(g, ccg_graph_add_output(g, xt_named(g, loss, "loss")));
  return g;
}

/* g on `mesh` with no plan (data parallel alone): the sharded graph, or
 * NULL with the status in *st. */
static ccg_graph *dp_shard(ccg_graph *g, ccg_status *st) {
  ccg_mesh m;
  assert_ok(NULL, ccg_mesh_parse("dp=2", &m));
  ccg_graph *out = NULL;
  *st = ccg_shard_apply(g, NULL, &m, NULL, &out, NULL);
  return out;
}

static void differentiate(ccg_graph *g) {
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  assert_ok(g, ccg_graph_find_value(g, "loss", &o.loss));
  assert_ok(g, ccg_backward(g, &o));
}

static void routed_rows(void **state) {
  (void)state;
  ccg_graph *g = model(ROUTED);
  ccg_status st;
  ccg_graph *s = dp_shard(g, &st);
  assert_ok(g, st);
  differentiate(g);
  differentiate(s);
  /* the unsharded model */
  float want_y[B * H], want_loss, want_gw[H * H];
  ccg_exec_tensor in = XT_F32("x", X, B, H);
  ccg_exec_tensor o1[3] = {xt_out("y", want_y, sizeof want_y),
                           xt_out("loss", &want_loss, sizeof want_loss),
                           xt_out("grad/w", want_gw, sizeof want_gw)};
  assert_ok(g, xt_run1(g, &in, 1, o1, 3));
  /* rank r: rows 2r, 2r + 1 */
  float y[2][2 * H], loss[2], gw[2][H * H];
  ccg_exec_tensor ins[2][1], outs[2][3];
  const ccg_exec_tensor *ip[2];
  ccg_exec_tensor *op[2];
  for (int r = 0; r < 2; r++) {
    ins[r][0] = XT_F32("x", X + r * 2 * H, 2, H);
    outs[r][0] = xt_out("y", y[r], sizeof y[r]);
    outs[r][1] = xt_out("loss", &loss[r], sizeof loss[r]);
    outs[r][2] = xt_out("grad/w", gw[r], sizeof gw[r]);
    ip[r] = ins[r];
    op[r] = outs[r];
  }
  assert_ok(s, ccg_exec_run_local(s, 2, NULL, ip, 1, op, 3, NULL));
  float mean = (loss[0] + loss[1]) / 2;
  xt_close(&mean, &want_loss, 1, 0, 1e-5, "mean of the ranks' losses");
  for (int r = 0; r < 2; r++) {
    char what[64];
    snprintf(what, sizeof what, "rank %d's rows of y", r);
    xt_close(y[r], want_y + r * 2 * H, 2 * H, 1e-6, 1e-5, what);
    snprintf(what, sizeof what, "rank %d's grad/w", r);
    xt_close(gw[r], want_gw, H * H, 1e-6, 1e-5, what);
  }
  ccg_graph_free(s);
  ccg_graph_free(g);
}

static void shard_fails(variant k, const char *a, const char *b) {
  ccg_graph *g = model(k);
  ccg_status st;
  ccg_graph *out = dp_shard(g, &st);
  assert_fails(g, CCG_STATUS_UNSUPPORTED, st, "data parallel", a, b);
  assert_null(out);
  ccg_graph_free(g);
}

static void refusals(void **state) {
  (void)state;
  shard_fails(SUM_ROUTED, "(ReduceSum)",
              "numbers positions within each dp rank's batch chunk");
  shard_fails(GRAM_ROUTED, "(MatMul)", "would contract over its positions");
  shard_fails(OUTPUT_ROUTED, "'routed'", "is a graph output");
  shard_fails(GRAM_BATCH, "(MatMul)", "part of a reduction over the batch");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(routed_rows),
      cmocka_unit_test(refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
