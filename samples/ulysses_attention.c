/* Ulysses sequence-parallel attention (DeepSpeed Ulysses, as Open-Sora's
 * acceleration.communications.all_to_all) over sp=W ranks. Each rank holds
 * N/W of the sequence of a fused projection qkv [B, N/W, 3, H, D]:
 *   all_to_all: scatter the heads (dim 3), gather the sequence (dim 1)
 *               -> [B, N, 3, H/W, D]: the whole sequence, H/W heads
 *   attention:  softmax(q k^T / sqrt(D)) v per head, over all N positions
 *   all_to_all: scatter the sequence (dim 1), gather the heads (dim 2)
 *               -> [B, N/W, H, D]: the rank's positions, every head
 * Heads are independent, so each rank computes exactly its heads' share
 * of the unsharded attention. The W ranks run locally and every rank's
 * output is compared with its rows of the unsharded attention on one
 * rank. With --out DIR it also writes one ONNX model per rank, which
 * `ccgraph verify DIR` checks.
 * usage: ulysses_attention [--sp W] [--out DIR] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ccgraph/ccgraph.h>

enum { B = 2, N = 8, H = 4, D = 8, MAXW = 4 };

/* Attention on mesh sp=w (w = 1: the unsharded attention, no
 * communication). Errors are on *out. */
static ccg_status build(int w, ccg_graph **out) {
  ccg_graph *g;
  ccg_status st = ccg_graph_new(NULL, &g);
  if (st)
    return st;
  *out = g;
  char spec[16];
  snprintf(spec, sizeof spec, "sp=%d", w);
  ccg_mesh mesh;
  if ((st = ccg_mesh_parse(spec, &mesh)) || (st = ccg_graph_set_mesh(g, &mesh)))
    return st;
  int64_t dims[5] = {B, N / w, 3, H, D};
  ccg_shape qs = ccg_shape_make(5, dims);
  const float scale = 1.0f / sqrtf((float)D);
  ccg_tensor ts = {CCG_DTYPE_F32, 0, {0}, &scale};
  const int64_t axis2 = 2, heads_first[4] = {0, 2, 1, 3};
  const int64_t back[4] = {0, 2, 1, 3}, kt[4] = {0, 1, 3, 2};
  ccg_value_id qkv, parts[3], q, k, v, s, y;
  if ((st = ccg_graph_add_input(g, "qkv", CCG_DTYPE_F32, &qs, &qkv)))
    return st;
  if (w > 1 && (st = ccg_opensora_all_to_all(g, qkv, "sp", 3, 1, &qkv)))
    return st; /* [B, N, 3, H/W, D] */
  if ((st = ccg_split(g, qkv, 2, NULL, 3, parts)))
    return st;
  for (int i = 0; i < 3; i++) /* [B, N, 1, H/W, D] -> [B, H/W, N, D] */
    if ((st = ccg_squeeze(g, parts[i], &axis2, 1, &parts[i])) ||
        (st = ccg_transpose(g, parts[i], heads_first, 4, &parts[i])))
      return st;
  q = parts[0], k = parts[1], v = parts[2];
  if ((st = ccg_transpose(g, k, kt, 4, &k)) || (st = ccg_matmul(g, q, k, &s)) ||
      (st = ccg_constant(g, &ts, &y)) || (st = ccg_mul(g, s, y, &s)) ||
      (st = ccg_softmax(g, s, 3, &s)) || (st = ccg_matmul(g, s, v, &y)) ||
      (st = ccg_transpose(g, y, back, 4, &y))) /* [B, N, H/W, D] */
    return st;
  if (w > 1 && (st = ccg_opensora_all_to_all(g, y, "sp", 1, 2, &y)))
    return st; /* [B, N/W, H, D] */
  if ((st = ccg_graph_add_output(g, y)) || (st = ccg_graph_validate(g)))
    return st;
  return CCG_STATUS_OK;
}

int main(int argc, char **argv) {
  int w = 2;
  const char *out = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--sp") == 0 && i + 1 < argc) {
      w = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else {
      fprintf(stderr, "usage: ulysses_attention [--sp W] [--out DIR]\n");
      return 1;
    }
  }
  if (w < 2 || w > MAXW || H % w != 0 || N % w != 0) {
    fprintf(stderr,
            "ulysses_attention: sp=%d must be 2..%d and divide %d heads and "
            "sequence %d\n",
            w, MAXW, H, N);
    return 2;
  }
  /* Deterministic data; the full qkv, then rank r's positions of it. */
  enum { ROW = 3 * H * D, OUT_ROW = H * D };
  static float qkv[B * N * ROW], part[MAXW][B * N * ROW], want[B * N * OUT_ROW],
      got[MAXW][B * N * OUT_ROW];
  for (int i = 0; i < B * N * ROW; i++)
    qkv[i] = (float)((i * 7919) % 97 - 48) / 48;
  int n = N / w;
  for (int r = 0; r < w; r++)
    for (int b = 0; b < B; b++)
      memcpy(part[r] + (size_t)b * n * ROW, qkv + ((size_t)b * N + r * n) * ROW,
             (size_t)n * ROW * sizeof(float));

  ccg_graph *ref = NULL, *g = NULL;
  ccg_status st = build(1, &ref);
  ccg_exec_tensor in[MAXW], o[MAXW];
  const ccg_exec_tensor *inp[MAXW];
  ccg_exec_tensor *outp[MAXW];
  memset(in, 0, sizeof in);
  memset(o, 0, sizeof o);
  if (!st) {
    in[0].name = "qkv";
    in[0].tensor = (ccg_tensor){CCG_DTYPE_F32, 5, {B, N, 3, H, D}, qkv};
    o[0].name = ccg_value_name(ref, ccg_graph_output(ref, 0));
    o[0].dst = want, o[0].dst_bytes = sizeof want;
    inp[0] = in, outp[0] = o;
    st = ccg_exec_run_local(ref, 1, NULL, inp, 1, outp, 1, NULL);
  }
  if (!st && !(st = build(w, &g))) {
    for (int r = 0; r < w; r++) {
      in[r].name = "qkv";
      in[r].tensor = (ccg_tensor){CCG_DTYPE_F32, 5, {B, n, 3, H, D}, part[r]};
      o[r].name = ccg_value_name(g, ccg_graph_output(g, 0));
      o[r].dst = got[r], o[r].dst_bytes = sizeof got[r];
      inp[r] = &in[r], outp[r] = &o[r];
    }
    st = ccg_exec_run_local(g, w, NULL, inp, 1, outp, 1, NULL);
  }
  if (!st && out)
    st = ccg_onnx_export_ranks(g, out, "ulysses_attention", NULL);
  if (st) {
    const char *msg = ccg_last_error(g ? g : ref);
    fprintf(stderr, "ulysses_attention: %s: %s\n", ccg_status_name(st),
            msg && *msg ? msg : ccg_last_error(NULL));
    ccg_graph_free(g);
    ccg_graph_free(ref);
    return 3;
  }
  /* Rank r's [B, N/W, H, D] against rows r*N/W.. of the unsharded output. */
  double worst = 0, big = 0;
  for (int r = 0; r < w; r++)
    for (int b = 0; b < B; b++)
      for (int i = 0; i < n * OUT_ROW; i++) {
        float a = got[r][(size_t)b * n * OUT_ROW + i];
        float e = want[((size_t)b * N + r * n) * OUT_ROW + i];
        double d = fabs((double)a - e);
        worst = d > worst || d != d ? d : worst;
        big = fmax(big, fabs(e));
      }
  int rc = worst <= 1e-5 ? 0 : 3;
  printf("max |difference| %.3g (values up to %.3g)\n", worst, big);
  printf("%s: sp=%d Ulysses attention (%d heads, sequence %d) %s the "
         "unsharded attention\n",
         rc ? "FAIL" : "ok", w, H, N, rc ? "differs from" : "equals");
  ccg_graph_free(g);
  ccg_graph_free(ref);
  return rc;
}
