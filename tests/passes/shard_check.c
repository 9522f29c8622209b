/* Shards an ONNX model with a plan at a given tp (optionally sequence
 * parallel), runs every rank on local threads and the unsharded model on
 * one, and compares every output of every rank with the unsharded one.
 * usage: shard_check MODEL.onnx PLAN.json TP [sp] ; exit 1 above 1e-5. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccgraph/ccgraph.h"

#define MAXR 8

int main(int argc, char **argv) {
  if (argc < 4)
    return 2;
  int tp = atoi(argv[3]);
  bool sp = argc > 4 && strcmp(argv[4], "sp") == 0;
  ccg_graph *g = NULL, *s = NULL;
  ccg_plan *plan = NULL;
  char spec[32];
  snprintf(spec, sizeof spec, "tp=%d", tp);
  ccg_mesh mesh;
  if (ccg_onnx_import_file(argv[1], NULL, &g) ||
      ccg_plan_load(argv[2], &plan) || ccg_mesh_parse(spec, &mesh) ||
      tp > MAXR) {
    fprintf(stderr, "setup: %s\n", ccg_last_error(NULL));
    return 2;
  }
  ccg_shard_options o = CCG_SHARD_OPTIONS_INIT;
  o.sequence_parallel = sp;
  if (ccg_shard_apply(g, plan, &mesh, &o, &s, NULL)) {
    fprintf(stderr, "shard: %s\n", ccg_last_error(g));
    return 1;
  }
  /* ids [2,8] in [0,128) */
  int64_t ids[16];
  for (int i = 0; i < 16; i++)
    ids[i] = (i * 37 + 11) % 128;
  ccg_exec_tensor in = {"ids", {CCG_DTYPE_I64, 2, {2, 8}, ids}, NULL, 0};
  size_t n = 2 * 8 * 128;
  float *ref = calloc(n, sizeof *ref), *got = calloc(n * MAXR, sizeof *got);
  ccg_exec_tensor rout = {"logits", {0}, ref, n * sizeof *ref};
  ccg_exec *x = NULL;
  ccg_exec_options xo = CCG_EXEC_OPTIONS_INIT;
  xo.input_shapes = &in;
  xo.n_input_shapes = 1;
  if (ccg_exec_create(g, &xo, &x) || ccg_exec_run(x, &in, 1, &rout, 1)) {
    fprintf(stderr, "reference: %s\n", ccg_last_error(g));
    return 1;
  }
  ccg_exec_free(x);
  const ccg_exec_tensor *ins[MAXR];
  ccg_exec_tensor outs[MAXR], *outp[MAXR];
  for (int r = 0; r < tp; r++) {
    ins[r] = &in;
    outs[r] =
        (ccg_exec_tensor){"logits", {0}, got + (size_t)r * n, n * sizeof *got};
    outp[r] = &outs[r];
  }
  if (ccg_exec_run_local(s, tp, NULL, ins, 1, outp, 1, NULL)) {
    fprintf(stderr, "sharded run: %s\n", ccg_last_error(s));
    return 1;
  }
  double md = 0;
  for (int r = 0; r < tp; r++)
    for (size_t i = 0; i < n; i++) {
      double d = fabs((double)got[(size_t)r * n + i] - (double)ref[i]);
      md = d > md || isnan(d) ? d : md;
    }
  printf("%s tp=%d%s: max abs diff of logits over %d ranks: %.3g "
         "(tolerance 1e-5)\n",
         argv[1], tp, sp ? " sequence parallel" : "", tp, md);
  free(ref);
  free(got);
  ccg_graph_free(s);
  ccg_graph_free(g);
  ccg_plan_free(plan);
  return md <= 1e-5 ? 0 : 1;
}
