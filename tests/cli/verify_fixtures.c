/* Writes the programs of tests/unit/verify_programs.h as ONNX files for the
 * verify and cost CLI tests: per-rank folders (<name>.rank<r>.onnx), stage
 * files and one SPMD model, correct and mutated.
 * usage: verify_fixtures OUTDIR */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "unit/verify_programs.h"

static int write_rank(ccg_graph *g, const char *dir, const char *name,
                      int rank) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.rank%d.onnx", dir, name, rank);
  ccg_onnx_export_options o = CCG_ONNX_EXPORT_OPTIONS_INIT;
  o.rank = rank;
  ccg_status st = g ? ccg_onnx_export_file(g, path, &o) : CCG_STATUS_INTERNAL;
  if (st != CCG_STATUS_OK)
    fprintf(stderr, "verify_fixtures: %s: %s\n", path,
            g ? ccg_last_error(g) : "no graph");
  ccg_graph_free(g);
  return st == CCG_STATUS_OK ? 0 : 1;
}

static int write_file(ccg_graph *g, const char *dir, const char *file) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  ccg_status st = g ? ccg_onnx_export_file(g, path, NULL) : CCG_STATUS_INTERNAL;
  if (st != CCG_STATUS_OK)
    fprintf(stderr, "verify_fixtures: %s: %s\n", path,
            g ? ccg_last_error(g) : "no graph");
  ccg_graph_free(g);
  return st == CCG_STATUS_OK ? 0 : 1;
}

static const char *sub(const char *out, const char *name, char *buf,
                       size_t size) {
  snprintf(buf, size, "%s/%s", out, name);
  if (mkdir(buf, 0755) != 0 && errno != EEXIST)
    perror(buf);
  return buf;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: verify_fixtures OUTDIR\n");
    return 1;
  }
  const char *out = argv[1];
  char d[1024];
  int bad = 0;
  if (mkdir(out, 0755) != 0 && errno != EEXIST)
    perror(out);
  static const struct {
    const char *dir, *mesh;
    int world;
    vmut m;
    int mut_rank;
  } mlps[] = {
      {"mlp", "tp=2", 2, VM_NONE, -1},
      {"mlp_dtype", "tp=2", 2, VM_DTYPE, 1},
      {"mlp_missing", "tp=4", 4, VM_MISSING, 3},
      {"mlp_group", "dp=2,tp=2", 4, VM_GROUP, 1},
  };
  for (size_t i = 0; i < sizeof mlps / sizeof mlps[0]; i++) {
    sub(out, mlps[i].dir, d, sizeof d);
    for (int r = 0; r < mlps[i].world; r++)
      bad |= write_rank(vp_mlp(mlps[i].mesh, r, mlps[i].m, mlps[i].mut_rank), d,
                        "mlp", r);
  }
  bad |= write_file(vp_mlp("tp=4", 0, VM_NONE, -1), out, "spmd_tp4.onnx");
  for (int k = 0; k < 2; k++) {
    sub(out, k ? "moe_splits" : "moe", d, sizeof d);
    for (int r = 0; r < 2; r++)
      bad |= write_rank(vp_moe(r, k ? VM_SPLITS : VM_NONE, 1), d, "moe", r);
  }
  static const struct {
    const char *dir;
    vmut m;
    int stage;
  } pipes[] = {{"pipe", VM_NONE, -1},
               {"pipe_cycle", VM_P2P_CYCLE, 0},
               {"pipe_unmatched", VM_UNMATCHED_SEND, 0}};
  for (size_t i = 0; i < sizeof pipes / sizeof pipes[0]; i++) {
    sub(out, pipes[i].dir, d, sizeof d);
    bad |= write_file(vp_pipeline(0, pipes[i].m, pipes[i].stage), d,
                      "stage0.onnx");
    bad |= write_file(vp_pipeline(1, pipes[i].m, pipes[i].stage), d,
                      "stage1.onnx");
  }
  /* an all-reduce of [batch,4]: cost needs batch bound */
  ccg_graph *g = vp_graph("sym", "tp=2");
  ccg_shape s = {2, {ccg_dim_sym("batch"), ccg_dim_num(4)}};
  ccg_value_id x, y;
  if (!g || ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &s, &x) ||
      ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y) ||
      ccg_graph_add_output(g, y))
    bad = 1;
  bad |= write_file(g, out, "sym.onnx");
  sub(out, "two", d, sizeof d);
  bad |= write_rank(vp_mlp("tp=2", 0, VM_NONE, -1), d, "a", 0);
  bad |= write_rank(vp_mlp("tp=2", 0, VM_NONE, -1), d, "b", 0);
  /* a Partial value sliced where a reduce-scatter was meant */
  sub(out, "placement", d, sizeof d);
  for (int r = 0; r < 2; r++) {
    ccg_graph *pg = vp_graph("placement", "tp=2");
    ccg_shape ps = {2, {ccg_dim_num(4), ccg_dim_num(4)}};
    ccg_placement pp = {CCG_PLACEMENT_PARTIAL, 0, CCG_REDUCE_SUM};
    ccg_placement s0 = {CCG_PLACEMENT_SHARD, 0, CCG_REDUCE_SUM};
    ccg_value_id px, py;
    if (!pg || ccg_graph_add_input(pg, "grad_w", CCG_DTYPE_F32, &ps, &px) ||
        ccg_value_set_placements(pg, px, &pp, 1) ||
        ccg_shard_slice(pg, px, "tp", 0, NULL, &py) ||
        ccg_value_set_placements(pg, py, &s0, 1) ||
        ccg_graph_add_output(pg, py))
      bad = 1;
    bad |= write_rank(pg, d, "bad", r);
  }
  sub(out, "gap", d, sizeof d);
  bad |= write_rank(vp_mlp("tp=4", 0, VM_NONE, -1), d, "x", 0);
  bad |= write_rank(vp_mlp("tp=4", 2, VM_NONE, -1), d, "x", 2);
  return bad;
}
