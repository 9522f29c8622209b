/* The pipeline split (ccg_pipeline_split) of a model whose loss is a mean
 * that counts positions unequally: SoftmaxCrossEntropyLoss with an
 * ignore_index, NegativeLogLikelihoodLoss with class weights (with and
 * without an ignore_index), and the cross entropy written out as a masked
 * sum over the count of valid labels (plain, and scaled and shifted). The
 * microbatches have different numbers of ignored targets (one microbatch
 * none valid at all): the stages' loss and every parameter gradient equal
 * the unsplit model's (1e-5 relative), which the mean of the
 * microbatches' means would not give. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"

enum { B = 4, H = 8, L = 2, MAXS = 2, NIN = 2 };

typedef enum loss_kind {
  SCE_IGNORE,     /* SoftmaxCrossEntropyLoss, ignore_index -1 */
  NLL_WEIGHT,     /* NegativeLogLikelihoodLoss, class weights */
  NLL_WEIGHT_IGN, /* both */
  WRITTEN_OUT,    /* sum of per-position losses / count of valid labels */
  WRITTEN_AFFINE, /* the same, times -0.5 plus 0.25 */
} loss_kind;

static float wdata[L + 1][H * H];
static const float class_w[H] = {0.5f,  1.0f, 1.5f, 2.0f,
                                 0.25f, 1.0f, 3.0f, 0.75f};

static void fill(float *v, int n, int seed) {
  for (int i = 0; i < n; i++)
    v[i] = 0.4f * (float)((i * 7919 + seed * 104729) % 97 - 48) / 48.0f;
}

static ccg_value_id loss_node(ccg_graph *g, const char *op, ccg_value_id x,
                              ccg_value_id t, ccg_value_id w, const char *red,
                              bool ignore) {
  ccg_attr attrs[2];
  size_t na = 0;
  attrs[na++] = CCG_ATTR_S("reduction", red);
  if (ignore)
    attrs[na++] = CCG_ATTR_I("ignore_index", -1);
  ccg_value_id in[3] = {x, t, w};
  ccg_node_desc nd = CCG_NODE_DESC_INIT;
  nd.op = op;
  nd.name = "loss_node";
  nd.inputs = in;
  nd.n_inputs = w == CCG_NONE ? 2 : 3;
  nd.attrs = attrs;
  nd.n_attrs = na;
  nd.n_outputs = 1;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &nd, &n));
  return ccg_node_output(g, n, 0);
}

/* sum(SCE none) / sum(t != -1), as HF writes a loss averaged over the
 * labels that are not -100. */
static ccg_value_id written_out(ccg_graph *g, ccg_value_id h, ccg_value_id t) {
  ccg_value_id per =
      loss_node(g, "SoftmaxCrossEntropyLoss", h, t, CCG_NONE, "none", true);
  int64_t m1 = -1;
  ccg_tensor ct = {CCG_DTYPE_I64, 0, {0}, &m1};
  ccg_value_id c, diff, valid, cnt, num, y;
  assert_ok(g, ccg_constant(g, &ct, &c));
  assert_ok(g, ccg_sub(g, t, c, &diff));
  assert_ok(g, ccg_cast(g, diff, CCG_DTYPE_BOOL, &valid));
  assert_ok(g, ccg_cast(g, valid, CCG_DTYPE_F32, &valid));
  assert_ok(g, ccg_reduce_sum(g, valid, NULL, 0, false, &cnt));
  assert_ok(g, ccg_reduce_sum(g, per, NULL, 0, false, &num));
  assert_ok(g, ccg_div(g, num, cnt, &y));
  return y;
}

/* x [B, H], t [B] -> (embed: tanh(x W_in)) -> L layers tanh(h W_i) -> the
 * loss of `kind` over the H classes. */
static ccg_graph *model(const char *mesh, loss_kind kind) {
  ccg_graph *g;
  assert_ok(NULL, ccg_graph_new(NULL, &g));
  if (mesh) {
    ccg_mesh m;
    assert_ok(NULL, ccg_mesh_parse(mesh, &m));
    assert_ok(g, ccg_graph_set_mesh(g, &m));
  }
  ccg_shape xs = CCG_SHAPE(B, H), ts = CCG_SHAPE(B);
  ccg_value_id h, t, w, loss;
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &h));
  assert_ok(g, ccg_graph_add_input(g, "t", CCG_DTYPE_I64, &ts, &t));
  for (int i = 0; i <= L; i++) {
    char name[32], scope[32];
    snprintf(name, sizeof name, i == 0 ? "embed.weight" : "layers.%d.w", i - 1);
    snprintf(scope, sizeof scope, i == 0 ? "embed" : "layers.%d", i - 1);
    ccg_tensor wt = {CCG_DTYPE_F32, 2, {H, H}, wdata[i]};
    assert_ok(g, ccg_graph_add_initializer(g, name, &wt, &w));
    assert_ok(g, ccg_graph_push_scope(g, scope));
    assert_ok(g, ccg_matmul(g, h, w, &h));
    assert_ok(g, ccg_tanh(g, h, &h));
    ccg_graph_pop_scope(g);
  }
  /* an initializer, as exports store a loss's class weights: it gets a
   * gradient output, zero on both sides */
  ccg_tensor cw = {CCG_DTYPE_F32, 1, {H}, (void *)class_w};
  ccg_value_id wc = CCG_NONE;
  if (kind == NLL_WEIGHT || kind == NLL_WEIGHT_IGN)
    assert_ok(g, ccg_graph_add_initializer(g, "class_weight", &cw, &wc));
  switch (kind) {
  case SCE_IGNORE:
    loss =
        loss_node(g, "SoftmaxCrossEntropyLoss", h, t, CCG_NONE, "mean", true);
    break;
  case NLL_WEIGHT:
  case NLL_WEIGHT_IGN:
    loss = loss_node(g, "NegativeLogLikelihoodLoss", h, t, wc, "mean",
                     kind == NLL_WEIGHT_IGN);
    break;
  default: {
    loss = written_out(g, h, t);
    if (kind == WRITTEN_AFFINE) {
      float a = -0.5f, c = 0.25f;
      ccg_tensor ta = {CCG_DTYPE_F32, 0, {0}, &a},
                 tc = {CCG_DTYPE_F32, 0, {0}, &c};
      ccg_value_id va, vc;
      assert_ok(g, ccg_constant(g, &ta, &va));
      assert_ok(g, ccg_constant(g, &tc, &vc));
      assert_ok(g, ccg_mul(g, loss, va, &loss));
      assert_ok(g, ccg_add(g, loss, vc, &loss));
    }
  }
  }
  assert_ok(g, ccg_value_set_name(g, loss, "loss"));
  assert_ok(g, ccg_graph_add_output(g, loss));
  return g;
}

static void backward(ccg_graph *g) {
  ccg_backward_options bo = CCG_BACKWARD_OPTIONS_INIT;
  ccg_value_id l;
  if (ccg_graph_find_value(g, "loss", &l) == CCG_STATUS_OK)
    bo.loss = l;
  assert_ok(g, ccg_backward(g, &bo));
}

enum { NO = L + 3 };
static const char *names[NO] = {"loss", "grad/embed.weight", "grad/layers.0.w",
                                "grad/layers.1.w", "grad/class_weight"};

/* The stages of the model split into M microbatches on pp=2, run on local
 * ranks with targets t, against the unsplit model: loss and gradients. */
static void check(loss_kind kind, int64_t M, const int64_t *t) {
  static float x[B * H];
  fill(x, B * H, 7);
  ccg_exec_tensor in[NIN] = {
      {"x", {CCG_DTYPE_F32, 2, {B, H}, x}, NULL, 0},
      {"t", {CCG_DTYPE_I64, 1, {B}, (void *)t}, NULL, 0}};
  bool weights = kind == NLL_WEIGHT || kind == NLL_WEIGHT_IGN;
  int no = weights ? NO : NO - 1;
  ccg_graph *ref = model(NULL, kind);
  backward(ref);
  static float want[NO][H * H];
  ccg_exec_tensor ro[NO];
  assert_int_equal(xt_bind_held(ref, names, (size_t)no, want[0], H * H, ro),
                   no);
  const ccg_exec_tensor *rin[1] = {in};
  ccg_exec_tensor *rout[1] = {ro};
  assert_ok(NULL,
            ccg_exec_run_local(ref, 1, NULL, rin, NIN, rout, (size_t)no, NULL));
  assert_true(isfinite(want[0][0]));

  ccg_graph *g = model("pp=2", kind), **st;
  size_t n;
  ccg_pipeline_options o = CCG_PIPELINE_OPTIONS_INIT;
  o.microbatches = M;
  assert_ok(g, ccg_pipeline_split(g, &o, &st, &n, NULL));
  assert_int_equal(n, MAXS);
  static float got[MAXS][NO][H * H];
  ccg_exec_tensor ins[MAXS][NIN], outs[MAXS][NO];
  const ccg_exec_tensor *inp[MAXS];
  ccg_exec_tensor *outp[MAXS];
  size_t nis[MAXS], nos[MAXS];
  for (size_t r = 0; r < n; r++) {
    backward(st[r]);
    nis[r] = 0;
    for (int i = 0; i < NIN; i++) {
      ccg_value_id v;
      if (ccg_graph_find_value(st[r], in[i].name, &v) == CCG_STATUS_OK)
        ins[r][nis[r]++] = in[i];
    }
    nos[r] = xt_bind_held(st[r], names, (size_t)no, got[r][0], H * H, outs[r]);
    inp[r] = ins[r];
    outp[r] = outs[r];
  }
  /* a stage that waits for a message never sent fails fast */
  ccg_exec_options eo = CCG_EXEC_OPTIONS_INIT;
  eo.deadline_s = 20.0;
  assert_ok(NULL, ccg_exec_run_local_program(st, (int)n, &eo, 1, inp, nis, outp,
                                             nos, NULL, NULL));
  for (int k = 0; k < no; k++) {
    size_t r = xt_sole_holder(st, n, names[k]);
    char what[200];
    snprintf(what, sizeof what,
             "loss kind %d M=%lld t={%lld,%lld,%lld,%lld}: %s on stage %zu",
             (int)kind, (long long)M, (long long)t[0], (long long)t[1],
             (long long)t[2], (long long)t[3], names[k], r);
    xt_close(got[r][k], want[k],
             k == 0        ? 1
             : k == NO - 1 ? H
                           : H * H,
             1e-5, 1e-5, what);
  }
  ccg_pipeline_stages_free(st, n);
  ccg_graph_free(g);
  ccg_graph_free(ref);
}

/* Targets: microbatches of 2 with 1 and 2 valid; with 2 and 0 valid (a
 * microbatch whose mean alone is 0/0); of 1 with 0, 1, 0, 1 valid. */
static const int64_t uneven[B] = {-1, 2, 5, 1}, empty[B] = {3, 4, -1, -1},
                     sparse[B] = {-1, 6, -1, 0}, full[B] = {1, 2, 5, 1};

static void test_ignore_index(void **state) {
  (void)state;
  check(SCE_IGNORE, 2, uneven);
  check(SCE_IGNORE, 2, empty);
  check(SCE_IGNORE, 4, sparse);
  check(SCE_IGNORE, 1, uneven);
}

static void test_class_weights(void **state) {
  (void)state;
  check(NLL_WEIGHT, 2, full);
  check(NLL_WEIGHT, 4, full);
  check(NLL_WEIGHT_IGN, 2, uneven);
  check(NLL_WEIGHT_IGN, 2, empty);
}

static void test_written_out(void **state) {
  (void)state;
  check(WRITTEN_OUT, 2, uneven);
  check(WRITTEN_OUT, 2, empty);
  check(WRITTEN_AFFINE, 4, sparse);
}

int main(void) {
  for (int i = 0; i <= L; i++)
    fill(wdata[i], H * H, i + 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ignore_index),
      cmocka_unit_test(test_class_weights),
      cmocka_unit_test(test_written_out),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
