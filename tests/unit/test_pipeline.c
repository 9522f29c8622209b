/* The pipeline split (ccg_pipeline_split) on a C-built model of L layers
 * "layers.<i>" (h = tanh(h W_i)) between an input projection and a mean
 * loss: the schedule steps of GPipe and 1F1B; the order in which each stage
 * graph, differentiated by ccg_backward, issues its Send/Recv (microbatch
 * forwards and backwards in the schedule's order, also after an ONNX
 * round trip); loss and every parameter gradient of the stages run on
 * local ranks equal the unsplit model's (1e-5 relative), with the loss a
 * mean and a sum over the batch; the bubble
 * fraction; bad stage specs, stage counts and microbatch counts. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"

enum { B = 4, H = 8, L = 4, MAXS = 4 };

static float wdata[L + 1][H * H];

static void fill(float *v, int n, int seed) {
  for (int i = 0; i < n; i++)
    v[i] = 0.4f * (float)((i * 7919 + seed * 104729) % 97 - 48) / 48.0f;
}

/* The loss sums over the batch instead of averaging (the microbatches'
 * losses are then summed, not averaged). */
static bool sum_loss;

/* x [B, H] -> (embed: x W_in) -> L layers -> loss = mean(h) (sum(h) with
 * sum_loss); layer 0 repeats its tanh(h W) `heavy` times. */
static ccg_graph *model_heavy(const char *mesh, int heavy) {
  ccg_graph *g;
  assert_ok(NULL, ccg_graph_new(NULL, &g));
  if (mesh) {
    ccg_mesh m;
    assert_ok(NULL, ccg_mesh_parse(mesh, &m));
    assert_ok(g, ccg_graph_set_mesh(g, &m));
  }
  ccg_shape xs = CCG_SHAPE(B, H);
  ccg_value_id h, w, loss;
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &h));
  for (int i = 0; i <= L; i++) {
    char name[32];
    snprintf(name, sizeof name, i == 0 ? "embed.weight" : "layers.%d.w", i - 1);
    ccg_tensor t = {CCG_DTYPE_F32, 2, {H, H}, wdata[i]};
    assert_ok(g, ccg_graph_add_initializer(g, name, &t, &w));
    char scope[32];
    snprintf(scope, sizeof scope, i == 0 ? "embed" : "layers.%d", i - 1);
    assert_ok(g, ccg_graph_push_scope(g, scope));
    for (int k = 0; k < (i == 1 ? heavy : 1); k++) {
      assert_ok(g, ccg_matmul(g, h, w, &h));
      assert_ok(g, ccg_tanh(g, h, &h));
    }
    ccg_graph_pop_scope(g);
  }
  if (sum_loss)
    assert_ok(g, ccg_reduce_sum(g, h, NULL, 0, false, &loss));
  else
    assert_ok(g, ccg_reduce_mean(g, h, NULL, 0, false, &loss));
  assert_ok(g, ccg_value_set_name(g, loss, "loss"));
  assert_ok(g, ccg_graph_add_output(g, loss));
  return g;
}

static ccg_graph *model(const char *mesh) { return model_heavy(mesh, 1); }

static void split(ccg_graph *g, int64_t M, ccg_pipeline_schedule sch,
                  ccg_graph ***st, size_t *n) {
  ccg_pipeline_options o = CCG_PIPELINE_OPTIONS_INIT;
  o.microbatches = M;
  o.schedule = sch;
  assert_ok(g, ccg_pipeline_split(g, &o, st, n, NULL));
}

static void backward(ccg_graph *g) {
  ccg_backward_options bo = CCG_BACKWARD_OPTIONS_INIT;
  ccg_value_id l;
  if (ccg_graph_find_value(g, "loss", &l) == CCG_STATUS_OK)
    bo.loss = l;
  assert_ok(g, ccg_backward(g, &bo));
}

/* "S101 R101 ...": the Send/Recv of g in its topological order. */
static void comm_order(ccg_graph *g, char *buf, size_t size) {
  size_t n = ccg_graph_num_nodes(g), used = 0;
  ccg_node_id *order = malloc(n * sizeof *order);
  assert_non_null(order);
  assert_ok(g, ccg_graph_topo_order(g, order));
  buf[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    ccg_op op = ccg_node_op(g, order[i]);
    int64_t tag;
    if (op != CCG_OP_SEND && op != CCG_OP_RECV)
      continue;
    assert_ok(g, ccg_node_attr_int(g, order[i], "tag", &tag));
    used +=
        (size_t)snprintf(buf + used, size - used, "%s%c%lld", used ? " " : "",
                         op == CCG_OP_SEND ? 'S' : 'R', (long long)tag);
  }
  free(order);
}

static void test_steps(void **state) {
  (void)state;
  /* every step once, a microbatch's forward before its backward */
  for (int sch = 0; sch < CCG_PIPELINE_SCHEDULE_COUNT; sch++)
    for (int64_t p = 1; p <= 4; p++)
      for (int64_t M = 1; M <= 6; M++)
        for (int64_t s = 0; s < p; s++) {
          int seen[12] = {0};
          for (int64_t m = 0; m < M; m++) {
            int64_t f = ccg_pipeline_step(sch, p, s, M, m, false);
            int64_t b = ccg_pipeline_step(sch, p, s, M, m, true);
            assert_true(f >= 0 && f < 2 * M && b >= 0 && b < 2 * M);
            assert_true(f < b);
            seen[f]++, seen[b]++;
          }
          for (int64_t k = 0; k < 2 * M; k++)
            assert_int_equal(seen[k], 1);
        }
  /* 1F1B, 2 stages, 4 microbatches: stage 0 warms up with one forward */
  const int64_t want_f[4] = {0, 1, 3, 5}, want_b[4] = {2, 4, 6, 7};
  for (int m = 0; m < 4; m++) {
    assert_int_equal(ccg_pipeline_step(CCG_PIPELINE_1F1B, 2, 0, 4, m, false),
                     want_f[m]);
    assert_int_equal(ccg_pipeline_step(CCG_PIPELINE_1F1B, 2, 0, 4, m, true),
                     want_b[m]);
    assert_int_equal(ccg_pipeline_step(CCG_PIPELINE_1F1B, 2, 1, 4, m, false),
                     2 * m);
    assert_int_equal(ccg_pipeline_step(CCG_PIPELINE_GPIPE, 2, 1, 4, m, true),
                     4 + m);
  }
}

static void test_bubble(void **state) {
  (void)state;
  const double eq[4] = {1, 1, 1, 1}, uneq[2] = {1, 3};
  assert_true(fabs(ccg_pipeline_bubble(eq, 4, 8) - 3.0 / 11.0) < 1e-12);
  assert_true(fabs(ccg_pipeline_bubble(eq, 2, 1) - 0.5) < 1e-12);
  /* T = 4 + 3*3 = 13; busy 4 stage-units of 4 microbatches over 2 x 13 */
  assert_true(fabs(ccg_pipeline_bubble(uneq, 2, 4) - (1.0 - 16.0 / 26.0)) <
              1e-12);
}

/* Stage 0 (sends forward, receives gradients) and stage 1 of a 2-stage
 * split, 4 microbatches: tags 101..104 are microbatches 0..3 of boundary
 * 0. */
static void test_order(void **state) {
  (void)state;
  static const char *const want[2][2] = {
      {"S101 S102 S103 S104 R101 R102 R103 R104",
       "R101 R102 R103 R104 S101 S102 S103 S104"},
      {"S101 S102 R101 S103 R102 S104 R103 R104",
       "R101 S101 R102 S102 R103 S103 R104 S104"}};
  for (int sch = 0; sch < CCG_PIPELINE_SCHEDULE_COUNT; sch++) {
    ccg_graph *g = model("pp=2"), **st;
    size_t n;
    split(g, 4, (ccg_pipeline_schedule)sch, &st, &n);
    assert_int_equal(n, 2);
    for (size_t s = 0; s < n; s++) {
      char got[256];
      backward(st[s]);
      comm_order(st[s], got, sizeof got);
      if (strcmp(got, want[sch][s]) != 0)
        fail_msg("%s stage %zu: %s, want %s",
                 ccg_pipeline_schedule_name((ccg_pipeline_schedule)sch), s, got,
                 want[sch][s]);
      /* the order survives export and import (IR 8: model metadata) */
      void *buf;
      size_t size;
      ccg_graph *back;
      assert_ok(st[s], ccg_onnx_export_buffer(st[s], NULL, &buf, &size));
      assert_ok(NULL, ccg_onnx_import_buffer(buf, size, NULL, NULL, &back));
      free(buf);
      comm_order(back, got, sizeof got);
      assert_string_equal(got, want[sch][s]);
      ccg_pipeline_info info;
      assert_true(ccg_pipeline_info_of(back, &info));
      assert_int_equal(info.stage, (int64_t)s);
      assert_int_equal(info.microbatches, 4);
      assert_int_equal(info.schedule, sch);
      ccg_graph_free(back);
    }
    ccg_pipeline_stages_free(st, n);
    ccg_graph_free(g);
  }
}

/* Runs the stages on local ranks: the last stage's loss and every stage's
 * parameter gradients against the unsplit model's. */
static void check_numerics(const char *mesh, int64_t M,
                           ccg_pipeline_schedule sch) {
  static float x[B * H];
  fill(x, B * H, 7);
  ccg_graph *ref = model(NULL);
  backward(ref);
  enum { NO = L + 2 };
  static float want[NO][H * H];
  const char *names[NO] = {"loss",
                           "grad/embed.weight",
                           "grad/layers.0.w",
                           "grad/layers.1.w",
                           "grad/layers.2.w",
                           "grad/layers.3.w"};
  ccg_exec_tensor in = {"x", {CCG_DTYPE_F32, 2, {B, H}, x}, NULL, 0};
  ccg_exec_tensor ro[NO];
  assert_int_equal(xt_bind_held(ref, names, NO, want[0], H * H, ro), NO);
  const ccg_exec_tensor *rin[1] = {&in};
  ccg_exec_tensor *rout[1] = {ro};
  assert_ok(NULL, ccg_exec_run_local(ref, 1, NULL, rin, 1, rout, NO, NULL));

  ccg_graph *g = model(mesh), **st;
  size_t n;
  split(g, M, sch, &st, &n);
  int world = (int)ccg_mesh_world_size(ccg_graph_mesh(g));
  ccg_graph *ranks[MAXS];
  const ccg_exec_tensor *inp[MAXS];
  ccg_exec_tensor outs[MAXS][NO], *outp[MAXS];
  size_t nis[MAXS], nos[MAXS];
  static float got[MAXS][NO][H * H];
  for (size_t s = 0; s < n; s++)
    backward(st[s]);
  for (int r = 0; r < world; r++) {
    ranks[r] = st[r]; /* pp is the only axis */
    inp[r] = &in;
    nis[r] = ccg_graph_num_inputs(ranks[r]);
    nos[r] = xt_bind_held(ranks[r], names, NO, got[r][0], H * H, outs[r]);
    outp[r] = outs[r];
  }
  assert_ok(NULL, ccg_exec_run_local_program(ranks, world, NULL, 1, inp, nis,
                                             outp, nos, NULL, NULL));
  for (int k = 0; k < NO; k++) {
    size_t r = xt_sole_holder(ranks, (size_t)world, names[k]);
    char what[160];
    snprintf(what, sizeof what, "%s M=%lld %s: %s on rank %zu", mesh,
             (long long)M, ccg_pipeline_schedule_name(sch), names[k], r);
    xt_close(got[r][k], want[k], k == 0 ? 1 : H * H, 1e-5, 1e-5, what);
  }
  ccg_pipeline_stages_free(st, n);
  ccg_graph_free(g);
  ccg_graph_free(ref);
}

static void test_numerics(void **state) {
  (void)state;
  check_numerics("pp=2", 1, CCG_PIPELINE_1F1B);
  check_numerics("pp=2", 4, CCG_PIPELINE_1F1B);
  check_numerics("pp=2", 2, CCG_PIPELINE_GPIPE);
  check_numerics("pp=4", 4, CCG_PIPELINE_1F1B);
  check_numerics("pp=4", 2, CCG_PIPELINE_GPIPE);
  sum_loss = true;
  check_numerics("pp=2", 2, CCG_PIPELINE_1F1B);
  check_numerics("pp=4", 4, CCG_PIPELINE_GPIPE);
  sum_loss = false;
}

/* Balanced by estimated cost: equal layers split evenly; a layer six
 * times as heavy as the others takes a stage of its own. */
static void test_balance(void **state) {
  (void)state;
  static const struct {
    const char *mesh;
    int heavy;
    const char *last0, *first1;
  } cases[] = {{"pp=2", 1, "layers.1", "layers.2"},
               {"pp=4", 1, "layers.0", "layers.1"},
               {"pp=2", 6, "layers.0", "layers.1"}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    ccg_graph *g = model_heavy(cases[c].mesh, cases[c].heavy), **st;
    size_t n;
    ccg_pipeline_options o = CCG_PIPELINE_OPTIONS_INIT;
    ccg_pipeline_report rep;
    assert_ok(g, ccg_pipeline_split(g, &o, &st, &n, &rep));
    assert_int_equal(rep.n_layers, L);
    assert_string_equal(rep.first_layer[0], "layers.0");
    assert_string_equal(rep.last_layer[0], cases[c].last0);
    assert_string_equal(rep.first_layer[1], cases[c].first1);
    assert_string_equal(rep.last_layer[n - 1], "layers.3");
    ccg_pipeline_stages_free(st, n);
    ccg_graph_free(g);
  }
}

static void test_bad_input(void **state) {
  (void)state;
  ccg_graph *g = model("pp=2"), **st = NULL;
  size_t n = 0;
  ccg_pipeline_options o = CCG_PIPELINE_OPTIONS_INIT;
  o.stages = "layers.0-layers.1|layers.2-layers.7";
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_pipeline_split(g, &o, &st, &n, NULL),
               "names 'layers.7', which is no layer");
  o.stages = "layers.0|layers.2-layers.3";
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_pipeline_split(g, &o, &st, &n, NULL), "stage 1",
               "must start at layer layers.1");
  o.stages = NULL;
  o.microbatches = 3;
  assert_fails(g, CCG_STATUS_SHAPE, ccg_pipeline_split(g, &o, &st, &n, NULL),
               "3 microbatches do not divide the batch of 4");
  assert_null(st);
  ccg_graph_free(g);
  g = model("pp=8");
  o.microbatches = 1;
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_pipeline_split(g, &o, &st, &n, NULL),
               "8 stages on axis 'pp' but the model has 4 layers");
  ccg_graph_free(g);
  g = model("tp=2");
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_pipeline_split(g, &o, &st, &n, NULL), "no mesh axis 'pp'");
  ccg_graph_free(g);
  /* given stages: layers 0-2 on stage 0 */
  g = model("pp=2");
  o.stages = "layers.0-layers.2|layers.3";
  ccg_pipeline_report rep;
  assert_ok(g, ccg_pipeline_split(g, &o, &st, &n, &rep));
  assert_string_equal(rep.last_layer[0], "layers.2");
  assert_string_equal(rep.first_layer[1], "layers.3");
  ccg_pipeline_stages_free(st, n);
  ccg_graph_free(g);
}

int main(void) {
  for (int i = 0; i <= L; i++)
    fill(wdata[i], H * H, i + 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_steps),   cmocka_unit_test(test_bubble),
      cmocka_unit_test(test_order),   cmocka_unit_test(test_numerics),
      cmocka_unit_test(test_balance), cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
