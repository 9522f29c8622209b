/* Vocab-parallel cross entropy: a colwise LM head whose logits stay
 * sharded on the vocabulary feeds SoftmaxCrossEntropyLoss. Sharded at tp=2
 * and tp=4, differentiated by ccg_backward and run on local ranks: the
 * loss equals the unsharded one, every rank's gradient of the head's
 * weight equals its columns of the unsharded gradient and the input's
 * gradient all of it, within 1e-4 of the largest element; the logits are
 * never gathered. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"

enum { N = 6, H = 8, V = 16, MAXW = 4 };

static size_t count_op(ccg_graph *g, ccg_op op) {
  size_t n = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(g); i++)
    n += ccg_node_op(g, (ccg_node_id)i) == op;
  return n;
}

/* x [N, H] @ head.weight [H, V] -> SoftmaxCrossEntropyLoss(labels). */
static ccg_graph *lm_model(const char *reduction, bool ignore) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[6,8]");
  ccg_value_id lab = ccg_test_input(g, "labels", CCG_DTYPE_I64, "[6]");
  float wd[H * V];
  xt_fill(wd, H * V, 3);
  for (size_t i = 0; i < H * V; i++)
    wd[i] *= 4.0f; /* logits of a few units: a max that matters */
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {H, V}, wd};
  ccg_value_id w, y, l;
  assert_ok(g, ccg_graph_add_initializer(g, "head.weight", &wt, &w));
  ccg_value_id in[2] = {x, w};
  assert_ok(g, xt_node(g, "MatMul", "/head/MatMul", in, 2, NULL, 0, 1, &y));
  in[0] = y, in[1] = lab;
  ccg_attr a[2] = {CCG_ATTR_S("reduction", reduction),
                   CCG_ATTR_I("ignore_index", -100)};
  assert_ok(g, xt_node(g, "SoftmaxCrossEntropyLoss", "/loss", in, 2, a,
                       ignore ? 2 : 1, 1, &l));
  assert_ok(g, ccg_graph_add_output(g, xt_named(g, l, "loss")));
  return g;
}

static const char *const wrt[] = {"head.weight", "x"};

static void differentiate(ccg_graph *g) {
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  assert_ok(g, ccg_graph_find_value(g, "loss", &o.loss));
  o.wrt = wrt;
  o.n_wrt = 2;
  assert_ok(g, ccg_backward(g, &o));
}

static void rel_close(const float *got, const float *want, size_t n,
                      const char *what) {
  double scale = 0;
  for (size_t i = 0; i < n; i++)
    scale = fmax(scale, fabs((double)want[i]));
  xt_close(got, want, n, 1e-4 * scale, 0, what);
}

/* labels: one per row, each rank's shard hit, -100 where `ignore` */
static void check(const char *reduction, bool ignore, int W) {
  float xd[N * H];
  int64_t lab[N] = {0, 15, 7, 8, 3, 12};
  if (ignore)
    lab[2] = -100;
  xt_fill(xd, N * H, 5);
  ccg_exec_tensor in[2] = {
      XT_F32("x", xd, N, H),
      xt_in("labels", CCG_DTYPE_I64, lab, 1, (const int64_t[]){N})};
  const char *names[3] = {"loss", "grad/head.weight", "grad/x"};
  size_t nloss = strcmp(reduction, "none") == 0 ? N : 1;
  size_t sizes[3] = {nloss, H * V, N * H};
  float want[3][H * V], got[MAXW][3][H * V];
  ccg_exec_tensor o1[3], o[MAXW][3], *op[MAXW];
  const ccg_exec_tensor *ins[MAXW];
  ccg_graph *g = lm_model(reduction, ignore);
  char mesh[16];
  snprintf(mesh, sizeof mesh, "tp=%d", W);
  ccg_graph *s = xt_shard(g, "{\"head\": \"colwise\"}", mesh);
  assert_int_equal(count_op(s, CCG_OP_ALL_GATHER), 0);
  assert_int_equal(count_op(s, CCG_OP_SOFTMAX_CROSS_ENTROPY_LOSS), 0);
  differentiate(g);
  differentiate(s);
  for (int i = 0; i < 3; i++) {
    o1[i] = xt_out(names[i], want[i], sizeof want[i]);
    for (int r = 0; r < W; r++)
      o[r][i] = xt_out(names[i], got[r][i], sizeof got[r][i]);
  }
  for (int r = 0; r < W; r++)
    op[r] = o[r], ins[r] = in;
  assert_ok(g, xt_run1(g, in, 2, o1, 3));
  assert_ok(s, ccg_exec_run_local(s, W, NULL, ins, 2, op, 3, NULL));
  int64_t c = V / W;
  for (int r = 0; r < W; r++) {
    float exp[H * V];
    for (int64_t i = 0; i < H; i++)
      memcpy(exp + i * c, want[1] + i * V + r * c, (size_t)c * sizeof *exp);
    char what[64];
    snprintf(what, sizeof what, "%s tp=%d rank %d", reduction, W, r);
    rel_close(got[r][0], want[0], sizes[0], what);
    rel_close(got[r][1], exp, (size_t)(H * c), what);
    rel_close(got[r][2], want[2], sizes[2], what);
  }
  ccg_graph_free(s);
  ccg_graph_free(g);
}

static void mean_with_ignore_index(void **state) {
  (void)state;
  check("mean", true, 2);
  check("mean", true, 4);
}

static void mean_sum_and_none(void **state) {
  (void)state;
  check("mean", false, 4);
  check("sum", true, 2);
  check("none", true, 4);
}

/* Logits gathered by the plan (output Replicate): the loss runs whole. */
static void gathered_logits_keep_the_plain_loss(void **state) {
  (void)state;
  ccg_graph *g = lm_model("mean", true);
  ccg_graph *s =
      xt_shard(g,
               "{\"head\": {\"style\": \"colwise\", \"output_layouts\": "
               "\"Replicate\"}}",
               "tp=2");
  assert_int_equal(count_op(s, CCG_OP_ALL_GATHER), 1);
  assert_int_equal(count_op(s, CCG_OP_SOFTMAX_CROSS_ENTROPY_LOSS), 1);
  ccg_graph_free(s);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(mean_with_ignore_index),
      cmocka_unit_test(mean_sum_and_none),
      cmocka_unit_test(gathered_logits_keep_the_plain_loss),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
