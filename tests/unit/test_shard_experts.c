/* expert_parallel on the zoo's Mixtral training export (TorchScript, 4
 * experts, top 2, 2 layers; tests/data/zoo/mixtral/ts_train): sharded at
 * tp=2 and tp=4 with the MoE blocks expert-parallel, differentiated by
 * ccg_backward and run on local ranks against the unsharded graph run by
 * the same executor. The loss is equal; rank r's expert slot j holds
 * expert r * 4/W + j, and its gradients equal that expert's; the router's
 * gradients (summed over the ranks) equal the unsharded ones; each rank
 * runs only its experts' MLPs; the provenance names slot 0's expert on
 * each rank ("params"). Tolerance 1e-4 of each tensor's largest
 * element. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"

#define MODEL CCG_TEST_DATA_DIR "/zoo/mixtral/ts_train/model.onnx"

enum { B = 2, S = 8, E = 4, H = 32, F = 64, MAXW = 4, NG = 4 };

static const char *const plan_json =
    "{\"model.layers.*.block_sparse_moe\": \"expert_parallel\"}";

/* grads compared: per layer the router and expert slot 0's w1 */
static void names(int layer, int expert, bool slot, char out[2][160]) {
  snprintf(out[0], 160, "grad/model.layers.%d.block_sparse_moe.gate.weight%s",
           layer, slot ? ".T" : "");
  if (slot)
    snprintf(out[1], 160,
             "grad/model.layers.%d.block_sparse_moe.experts.slot%d.w1."
             "weight.T",
             layer, expert);
  else
    snprintf(out[1], 160,
             "grad/model.layers.%d.block_sparse_moe.experts.%d.w1.weight",
             layer, expert);
}

static void rel_close(const float *got, const float *want, size_t n,
                      const char *what) {
  double scale = 0;
  for (size_t i = 0; i < n; i++)
    scale = fmax(scale, fabs((double)want[i]));
  xt_close(got, want, n, 1e-4 * scale, 0, what);
}

static void differentiate(ccg_graph *g) {
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  assert_ok(g, ccg_graph_find_value(g, "loss", &o.loss));
  assert_ok(g, ccg_backward(g, &o));
}

/* g's weight [rows, cols] read back transposed ([cols, rows]) */
static void transpose(const float *in, int64_t rows, int64_t cols, float *out) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++)
      out[j * rows + i] = in[i * cols + j];
}

static void check(int W) {
  int64_t ids[B * S], labels[B * S];
  for (int i = 0; i < B * S; i++) {
    ids[i] = (i * 37 + 11) % 256;
    labels[i] = (i * 53 + 5) % 256;
  }
  const int64_t dims[2] = {B, S};
  ccg_exec_tensor in[2] = {xt_in("input_ids", CCG_DTYPE_I64, ids, 2, dims),
                           xt_in("labels", CCG_DTYPE_I64, labels, 2, dims)};
  ccg_graph *g = NULL;
  assert_ok(NULL, ccg_onnx_import_file(MODEL, NULL, &g));
  char mesh[16];
  snprintf(mesh, sizeof mesh, "tp=%d", W);
  ccg_graph *s = xt_shard(g, plan_json, mesh);
  size_t mm = 0;
  for (size_t i = 0; i < ccg_graph_num_nodes(s); i++)
    mm += ccg_node_op(s, (ccg_node_id)i) == CCG_OP_MATMUL &&
          strstr(ccg_node_name(s, (ccg_node_id)i), "/experts.") != NULL;
  assert_int_equal(mm, 2 * 3 * (E / W)); /* layers x (w1, w2, w3) x slots */
  /* the provenance names each rank's expert of slot 0's w1 */
  char want[1024] = "\"params\":[";
  for (int r = 0; r < W; r++)
    snprintf(want + strlen(want), sizeof want - strlen(want),
             "%s\"model.layers.0.block_sparse_moe.experts.%d.w1.weight\"",
             r ? "," : "", r * (E / W));
  strcat(want, "]");
  const char *prov = ccg_graph_meta(s, CCG_SHARD_PROVENANCE);
  assert_non_null(prov);
  assert_non_null(strstr(prov, want));
  differentiate(g);
  differentiate(s);

  /* unsharded: the loss, every expert's w1 and the routers, per layer */
  float want_loss, want_gate[2][H * E], want_w1[2][E][F * H];
  ccg_exec_tensor o1[1 + 2 + 2 * E];
  char nm[2][E][2][160];
  size_t k = 0;
  o1[k++] = xt_out("loss", &want_loss, sizeof want_loss);
  for (int l = 0; l < 2; l++)
    for (int e = 0; e < E; e++) {
      names(l, e, false, nm[l][e]);
      if (e == 0)
        o1[k++] = xt_out(nm[l][0][0], want_gate[l], sizeof want_gate[l]);
      o1[k++] = xt_out(nm[l][e][1], want_w1[l][e], sizeof want_w1[l][e]);
    }
  assert_ok(g, xt_run1(g, in, 2, o1, k));

  /* sharded: the loss, the router and slot 0's w1 per layer */
  float loss[MAXW], gate[MAXW][2][H * E], w1[MAXW][2][H * F];
  char snm[2][2][160];
  ccg_exec_tensor outs[MAXW][5], *op[MAXW];
  const ccg_exec_tensor *ins[MAXW];
  for (int l = 0; l < 2; l++)
    names(l, 0, true, snm[l]);
  for (int r = 0; r < W; r++) {
    outs[r][0] = xt_out("loss", &loss[r], sizeof loss[r]);
    for (int l = 0; l < 2; l++) {
      outs[r][1 + 2 * l] = xt_out(snm[l][0], gate[r][l], sizeof gate[r][l]);
      outs[r][2 + 2 * l] = xt_out(snm[l][1], w1[r][l], sizeof w1[r][l]);
    }
    op[r] = outs[r];
    ins[r] = in;
  }
  assert_ok(s, ccg_exec_run_local(s, W, NULL, ins, 2, op, 5, NULL));
  for (int r = 0; r < W; r++) {
    char what[96];
    snprintf(what, sizeof what, "tp=%d rank %d loss", W, r);
    rel_close(&loss[r], &want_loss, 1, what);
    for (int l = 0; l < 2; l++) {
      float t[H * F];
      transpose(want_gate[l], E, H, t);
      snprintf(what, sizeof what, "tp=%d rank %d layer %d router", W, r, l);
      rel_close(gate[r][l], t, H * E, what);
      transpose(want_w1[l][r * (E / W)], F, H, t);
      snprintf(what, sizeof what, "tp=%d rank %d layer %d expert %d w1", W, r,
               l, r * (E / W));
      rel_close(w1[r][l], t, H * F, what);
    }
  }
  ccg_graph_free(s);
  ccg_graph_free(g);
}

static void mixtral_tp2(void **state) {
  (void)state;
  check(2);
}

static void mixtral_tp4(void **state) {
  (void)state;
  check(4);
}

/* 4 experts do not divide among 3 ranks, and an entry naming an expert's
 * Linear inside the module: errors naming them. */
static void plan_errors(void **state) {
  (void)state;
  ccg_graph *g = NULL;
  assert_ok(NULL, ccg_onnx_import_file(MODEL, NULL, &g));
  ccg_plan *plan = NULL;
  assert_ok(NULL, ccg_plan_parse(plan_json, &plan));
  ccg_mesh m;
  assert_ok(NULL, ccg_mesh_parse("tp=3", &m));
  ccg_graph *out = NULL;
  assert_fails(g, CCG_STATUS_SHAPE,
               ccg_shard_apply(g, plan, &m, NULL, &out, NULL),
               "expert_parallel: the 4 experts of "
               "'model.layers.0.block_sparse_moe' do not divide among tp=3");
  assert_null(out);
  ccg_plan_free(plan);
  /* a colwise expert inside the expert_parallel module */
  assert_ok(NULL,
            ccg_plan_parse("{\"model.layers.*.block_sparse_moe.experts.*.w1\": "
                           "\"colwise\", \"model.layers.*.block_sparse_moe\": "
                           "\"expert_parallel\"}",
                           &plan));
  assert_ok(NULL, ccg_mesh_parse("tp=2", &m));
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_shard_apply(g, plan, &m, NULL, &out, NULL),
               "names 'model.layers.0.block_sparse_moe.experts.0.w1' inside "
               "the expert_parallel module");
  assert_null(out);
  ccg_plan_free(plan);
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(mixtral_tp2),
      cmocka_unit_test(mixtral_tp4),
      cmocka_unit_test(plan_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
