/* MoE-style token routing with an uneven all-to-all over ep=W ranks, one
 * expert per rank. Rank r holds T_r tokens [T_r, D], already grouped by
 * the expert they go to: count[r][e] tokens for expert e (uneven, some
 * zero). Then
 *   dispatch: all_to_all with input splits count[r][*] and output splits
 *             count[*][r] (megatron.all_to_all): rank e receives every
 *             rank's tokens for expert e, rank 0's first
 *   expert:   tanh(tokens @ W_e), W_e [D, D] lives on rank e only
 *   combine:  the inverse all_to_all (the split lists swapped): each token
 *             comes back to the rank and place it started from.
 * The split lists differ per rank, so each rank has its own graph; they
 * run together with ccg_exec_run_local_ranks. The dispatched tokens and
 * the outputs are checked against the routing computed directly in C.
 * With --out DIR each rank's graph is written as DIR/moe_alltoall.rank<r>.onnx,
 * which `ccgraph verify DIR` checks.
 * usage: moe_alltoall [--ep W] [--out DIR] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ccgraph/ccgraph.h>

enum { D = 8, MAXW = 4, MAXT = 64 };

/* Tokens rank r sends to expert e: uneven and deterministic. */
static int64_t count(int r, int e) { return (r * 3 + e * 5 + 1) % 4; }

static float value(int64_t i, int seed, float scale) {
  return scale * (float)((i * 7919 + seed * 104729) % 97 - 48) / 48;
}

/* Rank r's graph: dispatch, its expert, combine. Outputs "dispatched" and
 * "y". Errors are on *out. */
static ccg_status build(int w, int r, const float *wexp, ccg_graph **out) {
  ccg_graph *g;
  ccg_status st = ccg_graph_new(NULL, &g);
  if (st)
    return st;
  *out = g;
  char spec[16];
  snprintf(spec, sizeof spec, "ep=%d", w);
  ccg_mesh mesh;
  if ((st = ccg_mesh_parse(spec, &mesh)) || (st = ccg_graph_set_mesh(g, &mesh)))
    return st;
  int64_t in_split[MAXW], out_split[MAXW], tokens = 0;
  for (int e = 0; e < w; e++) {
    in_split[e] = count(r, e);
    out_split[e] = count(e, r);
    tokens += in_split[e];
  }
  ccg_shape xs = {2, {ccg_dim_num(tokens), ccg_dim_num(D)}};
  ccg_tensor wt = {CCG_DTYPE_F32, 2, {D, D}, wexp};
  ccg_value_id x, we, h, y;
  if ((st = ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x)) ||
      (st = ccg_graph_add_initializer(g, "expert.weight", &wt, &we)) ||
      (st = ccg_megatron_all_to_all(g, x, "ep", out_split, w, in_split, w,
                                    &h)) ||
      (st = ccg_graph_add_output(g, h)) || (st = ccg_matmul(g, h, we, &y)) ||
      (st = ccg_tanh(g, y, &y)) ||
      (st = ccg_megatron_all_to_all(g, y, "ep", in_split, w, out_split, w,
                                    &y)) ||
      (st = ccg_graph_add_output(g, y)) || (st = ccg_graph_validate(g)))
    return st;
  return CCG_STATUS_OK;
}

int main(int argc, char **argv) {
  int w = 2;
  const char *out = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--ep") == 0 && i + 1 < argc) {
      w = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else {
      fprintf(stderr, "usage: moe_alltoall [--ep W] [--out DIR]\n");
      return 1;
    }
  }
  if (w < 2 || w > MAXW) {
    fprintf(stderr, "moe_alltoall: ep=%d must be 2..%d\n", w, MAXW);
    return 2;
  }
  /* x[r]: rank r's tokens; wexp[e]: expert e's weight. */
  static float x[MAXW][MAXT * D], wexp[MAXW][D * D], disp[MAXW][MAXT * D],
      y[MAXW][MAXT * D];
  int64_t tokens[MAXW] = {0}, received[MAXW] = {0};
  for (int r = 0; r < w; r++)
    for (int e = 0; e < w; e++) {
      tokens[r] += count(r, e);
      received[e] += count(r, e);
    }
  for (int r = 0; r < w; r++) {
    for (int64_t i = 0; i < tokens[r] * D; i++)
      x[r][i] = value(i, r, 1.0f);
    for (int64_t i = 0; i < D * D; i++)
      wexp[r][i] = value(i, 10 + r, 0.5f);
  }

  ccg_graph *g[MAXW] = {NULL};
  ccg_exec_tensor in[MAXW], outs[MAXW][2];
  const ccg_exec_tensor *inp[MAXW];
  ccg_exec_tensor *outp[MAXW];
  ccg_status st = CCG_STATUS_OK;
  int bad = -1;
  for (int r = 0; r < w && !st; r++) {
    if ((st = build(w, r, wexp[r], &g[r]))) {
      bad = r;
      break;
    }
    memset(&in[r], 0, sizeof in[r]);
    in[r].name = "x";
    in[r].tensor = (ccg_tensor){CCG_DTYPE_F32, 2, {tokens[r], D}, x[r]};
    memset(outs[r], 0, sizeof outs[r]);
    outs[r][0].name = ccg_value_name(g[r], ccg_graph_output(g[r], 0));
    outs[r][0].dst = disp[r];
    outs[r][0].dst_bytes = sizeof disp[r];
    outs[r][1].name = ccg_value_name(g[r], ccg_graph_output(g[r], 1));
    outs[r][1].dst = y[r];
    outs[r][1].dst_bytes = sizeof y[r];
    inp[r] = &in[r];
    outp[r] = outs[r];
  }
  if (!st)
    st = ccg_exec_run_local_ranks(g, w, NULL, 1, inp, 1, outp, 2, NULL, NULL);
  for (int r = 0; r < w && !st && out; r++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/moe_alltoall.rank%d.onnx", out, r);
    if ((st = ccg_onnx_export_file(g[r], path, NULL)))
      bad = r;
  }
  if (st) {
    fprintf(stderr, "moe_alltoall: %s: %s\n", ccg_status_name(st),
            bad >= 0 ? ccg_last_error(g[bad]) : ccg_last_error(NULL));
    for (int r = 0; r < w; r++)
      ccg_graph_free(g[r]);
    return 3;
  }

  /* The routing in C: rank e receives, from each rank s in turn, the
   * count[s][e] tokens that s holds for e (they start at the sum of
   * count[s][0..e-1] in s's tokens). */
  double worst_disp = 0, worst_y = 0;
  for (int e = 0; e < w; e++) {
    int64_t row = 0;
    for (int s = 0; s < w; s++) {
      int64_t first = 0;
      for (int k = 0; k < e; k++)
        first += count(s, k);
      for (int64_t t = 0; t < count(s, e); t++, row++)
        for (int d = 0; d < D; d++) {
          const float *tok = x[s] + (first + t) * D;
          double diff = fabs(disp[e][row * D + d] - tok[d]);
          worst_disp = diff > worst_disp || diff != diff ? diff : worst_disp;
          /* the token's result, back on rank s in the same place */
          double acc = 0;
          for (int k = 0; k < D; k++)
            acc += (double)tok[k] * wexp[e][k * D + d];
          diff = fabs(y[s][(first + t) * D + d] - tanh(acc));
          worst_y = diff > worst_y || diff != diff ? diff : worst_y;
        }
    }
  }
  printf("ep=%d tokens per rank:", w);
  for (int r = 0; r < w; r++)
    printf(" %lld", (long long)tokens[r]);
  printf("; tokens per expert:");
  for (int e = 0; e < w; e++)
    printf(" %lld", (long long)received[e]);
  printf("\nmax |difference| dispatched %.3g, combined %.3g\n", worst_disp,
         worst_y);
  int rc = worst_disp == 0 && worst_y <= 1e-5 ? 0 : 3;
  printf("%s: uneven all-to-all routed every token to its expert and back\n",
         rc ? "FAIL" : "ok");
  for (int r = 0; r < w; r++)
    ccg_graph_free(g[r]);
  return rc;
}
