/* A two-stage ColossalAI-style pipeline on a pp=2 mesh, one graph per
 * stage (rank r runs stage r):
 *   stage 0: h = tanh(x @ W1)           x [B, H], W1 [H, F]
 *            send_tensor_meta(h), send_forward(h)
 *   stage 1: recv_tensor_meta, h = recv_forward
 *            y = tanh(h @ W2), loss = sum(y)       W2 [F, H]
 * The backward (ccg_backward with p2p) adds the other direction: stage 1
 * sends the gradient of h back (send_backward), stage 0 receives it
 * (recv_backward) and finishes the gradients of x and W1. Both stages run
 * together with ccg_exec_run_local_ranks and are compared with the same
 * two stages run as one graph on one rank: y and every gradient. The shape
 * that arrives with the tensor meta is printed and checked too. With --out
 * DIR each stage is written as DIR/pipeline_2stage.rank<r>.onnx, which
 * `ccgraph verify DIR` checks.
 * usage: pipeline_2stage [--out DIR] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ccgraph/ccgraph.h>

enum { B = 4, H = 8, F = 16, NMETA = 7 };

static void fill(float *v, int64_t n, int seed, float scale) {
  for (int64_t i = 0; i < n; i++)
    v[i] = scale * (float)((i * 7919 + seed * 104729) % 97 - 48) / 48;
}

static ccg_status weight(ccg_graph *g, const char *name, int64_t rows,
                         int64_t cols, const float *data, ccg_value_id *v) {
  ccg_tensor t = {CCG_DTYPE_F32, 2, {rows, cols}, data};
  return ccg_graph_add_initializer(g, name, &t, v);
}

/* stage: 0 or 1 of the pipeline, or -1 for both on one rank. */
static ccg_status build(int stage, const float *w1, const float *w2,
                        ccg_graph **out) {
  ccg_graph *g;
  ccg_mesh mesh;
  ccg_status st = ccg_graph_new(NULL, &g);
  if (st)
    return st;
  *out = g;
  if (stage >= 0 && ((st = ccg_mesh_parse("pp=2", &mesh)) ||
                     (st = ccg_graph_set_mesh(g, &mesh))))
    return st;
  ccg_shape xs = {2, {ccg_dim_num(B), ccg_dim_num(H)}};
  ccg_shape hs = {2, {ccg_dim_num(B), ccg_dim_num(F)}};
  ccg_colossal_stage s = CCG_COLOSSAL_STAGE_INIT;
  s.stage = stage;
  s.input_tensor_shape = &hs;
  ccg_backward_options bo = CCG_BACKWARD_OPTIONS_INIT;
  const char *const wrt0[] = {"x", "W1"}, *const wrt1[] = {"W2"},
                    *const wrt_all[] = {"x", "W1", "W2"};
  ccg_value_id x, a, b, h, y, meta[NMETA];
  if (stage <= 0) {
    if ((st = ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x)) ||
        (st = weight(g, "W1", H, F, w1, &a)) ||
        (st = ccg_matmul(g, x, a, &h)) || (st = ccg_tanh(g, h, &h)) ||
        (st = ccg_graph_add_output(g, h)))
      return st;
  }
  if (stage == 0) {
    if ((st = ccg_colossal_send_tensor_meta(g, &h, 1, &s)) ||
        (st = ccg_colossal_send_forward(g, h, &s)))
      return st;
    bo.wrt = wrt0, bo.n_wrt = 2; /* seeded by the Send: loss stays NONE */
    if ((st = ccg_backward(g, &bo)))
      return st;
    return ccg_graph_validate(g);
  }
  if (stage == 1) {
    const int64_t ndims = 2;
    size_t n_meta = 0;
    if ((st = ccg_colossal_recv_tensor_meta(g, &ndims, 1, &s, meta, &n_meta)) ||
        (st = ccg_colossal_recv_forward(g, &s, &h)))
      return st;
    /* the meta values (count, ndims, dims, dtype) as one i64 output */
    const int64_t flat = -1;
    for (size_t i = 0; i < n_meta; i++)
      if ((st = ccg_reshape_to(g, meta[i], &flat, 1, &meta[i])))
        return st;
    if ((st = ccg_concat(g, meta, n_meta, 0, &meta[0])) ||
        (st = ccg_graph_add_output(g, meta[0])))
      return st;
  }
  if ((st = weight(g, "W2", F, H, w2, &b)) || (st = ccg_matmul(g, h, b, &y)) ||
      (st = ccg_tanh(g, y, &y)) || (st = ccg_graph_add_output(g, y)))
    return st;
  bo.loss = y; /* the sum of y's elements */
  bo.wrt = stage < 0 ? wrt_all : wrt1;
  bo.n_wrt = stage < 0 ? 3 : 1;
  if ((st = ccg_backward(g, &bo)) || (st = ccg_graph_validate(g)))
    return st;
  return CCG_STATUS_OK;
}

static ccg_exec_tensor tensor_out(const char *name, void *dst, size_t bytes) {
  ccg_exec_tensor t;
  memset(&t, 0, sizeof t);
  t.name = name, t.dst = dst, t.dst_bytes = bytes;
  return t;
}

static double max_diff(const float *a, const float *b, int n) {
  double worst = 0;
  for (int i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]);
    worst = d > worst || d != d ? d : worst;
  }
  return worst;
}

int main(int argc, char **argv) {
  const char *out = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else {
      fprintf(stderr, "usage: pipeline_2stage [--out DIR]\n");
      return 1;
    }
  }
  static float x[B * H], w1[H * F], w2[F * H];
  static float want[5][H * F], got[5][H * F]; /* y, dx, dW1, dW2, h */
  static int64_t meta[16];
  fill(x, B * H, 1, 1.0f);
  fill(w1, H * F, 2, 0.5f);
  fill(w2, F * H, 3, 0.5f);
  const char *names[5] = {NULL, "grad/x", "grad/W1", "grad/W2", NULL};

  ccg_graph *ref = NULL, *st0 = NULL, *st1 = NULL;
  ccg_status st = build(-1, w1, w2, &ref);
  ccg_graph *bad = ref;
  ccg_exec_tensor in = {"x", {CCG_DTYPE_F32, 2, {B, H}, x}, NULL, 0};
  const ccg_exec_tensor *inp[2] = {&in, NULL};
  ccg_exec_tensor o_ref[5], o0[3], o1[3];
  ccg_exec_tensor *outp[2] = {o0, o1};
  if (!st) {
    names[0] = ccg_value_name(ref, ccg_graph_output(ref, 1));
    names[4] = ccg_value_name(ref, ccg_graph_output(ref, 0));
    for (int k = 0; k < 5; k++)
      o_ref[k] = tensor_out(names[k], want[k], sizeof want[k]);
    ccg_exec_tensor *p = o_ref;
    st = ccg_exec_run_local(ref, 1, NULL, inp, 1, &p, 5, NULL);
  }
  if (!st && (st = build(0, w1, w2, &st0)))
    bad = st0;
  if (!st && (st = build(1, w1, w2, &st1)))
    bad = st1;
  if (!st) {
    o0[0] = tensor_out("grad/x", got[1], sizeof got[1]);
    o0[1] = tensor_out("grad/W1", got[2], sizeof got[2]);
    /* Stage 0 also returns the activation it sent; both stages return
     * three tensors (the run takes the same count on every rank). */
    o0[2] = tensor_out(ccg_value_name(st0, ccg_graph_output(st0, 0)), got[4],
                       sizeof got[4]);
    o1[0] = tensor_out(ccg_value_name(st1, ccg_graph_output(st1, 0)), meta,
                       sizeof meta);
    o1[1] = tensor_out(ccg_value_name(st1, ccg_graph_output(st1, 1)), got[0],
                       sizeof got[0]);
    o1[2] = tensor_out("grad/W2", got[3], sizeof got[3]);
    /* Stage 1 has no graph input (its activations arrive from stage 0):
     * it is given its weight W2 instead, which replaces the stored data
     * for this run, as a training loop would after each optimizer step. */
    ccg_exec_tensor w2_in = {"W2", {CCG_DTYPE_F32, 2, {F, H}, w2}, NULL, 0};
    ccg_graph *stages[2] = {st0, st1};
    const ccg_exec_tensor *stage_in[2] = {&in, &w2_in};
    st = ccg_exec_run_local_ranks(stages, 2, NULL, 1, stage_in, 1, outp, 3,
                                  NULL, NULL);
  }
  for (int r = 0; r < 2 && !st && out; r++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/pipeline_2stage.rank%d.onnx", out, r);
    if ((st = ccg_onnx_export_file(r ? st1 : st0, path, NULL)))
      bad = r ? st1 : st0;
  }
  int rc = 0;
  if (st) {
    const char *msg = bad ? ccg_last_error(bad) : "";
    fprintf(stderr, "pipeline_2stage: %s: %s\n", ccg_status_name(st),
            msg && *msg ? msg : ccg_last_error(NULL));
    rc = 3;
  } else {
    printf("tensor meta received by stage 1 (count, ndims, dims, dtype):");
    const ccg_shape *ms = ccg_value_shape(st1, ccg_graph_output(st1, 0));
    for (int64_t j = 0; j < ms->dims[0].size && j < 16; j++)
      printf(" %lld", (long long)meta[j]);
    /* one tensor, 2 dims, [B, F], ONNX FLOAT (1) */
    const int64_t meta_want[5] = {1, 2, B, F, 1};
    if (ms->dims[0].size != 5 || memcmp(meta, meta_want, sizeof meta_want))
      rc = 3;
    printf("\n");
    const int n[5] = {B * H, B * H, H * F, F * H, B * F};
    const char *what[5] = {"y", "grad/x", "grad/W1", "grad/W2", "h"};
    for (int k = 0; k < 5; k++) {
      double d = max_diff(got[k], want[k], n[k]);
      double big = 0;
      for (int i = 0; i < n[k]; i++)
        big = fmax(big, fabs(want[k][i]));
      printf("max |difference| %-8s %.3g (values up to %.3g)\n", what[k], d,
             big);
      if (!(d <= 1e-5))
        rc = 3;
    }
    printf("%s: 2-stage pipeline %s the single graph\n", rc ? "FAIL" : "ok",
           rc ? "differs from" : "equals");
  }
  ccg_graph_free(ref);
  ccg_graph_free(st0);
  ccg_graph_free(st1);
  return rc;
}
