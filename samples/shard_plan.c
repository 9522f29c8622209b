/* A DTensor-style JSON plan applied to an imported ONNX model, with the
 * public C API only: the model (as torch.onnx.export writes it; module
 * paths come from its node names) is sharded over a mesh by the plan, every
 * rank of the sharded program runs as a thread, and each rank's outputs are
 * compared with the unsharded model's. Inputs are generated: floats in
 * [-1, 1), integers (token ids) in 0..15.
 * usage: shard_plan MODEL.onnx PLAN.json [--mesh tp=N] [--sequence-parallel]
 *                   [--out DIR]
 * Exit status 0 when every rank's outputs equal the unsharded ones within
 * 1e-5, 2 for a model, plan or mesh that does not fit, 3 otherwise. With
 * --out DIR it also writes one ONNX model per rank (`ccgraph verify DIR`). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ccgraph/ccgraph.h>

#define MAXR 8
#define MAXIO 16

static int fail(const char *what, ccg_status st, const char *msg) {
  fprintf(stderr, "shard_plan: %s: %s\n", what, msg);
  return st == CCG_STATUS_OOM || st == CCG_STATUS_COMM ||
                 st == CCG_STATUS_TIMEOUT || st == CCG_STATUS_INTERNAL
             ? 3
             : 2;
}

/* Inputs of g, generated once (the sharded ranks slice nothing: the plan's
 * models take the global inputs, as `ccgraph run` gives them). */
static int make_inputs(ccg_graph *g, ccg_exec_tensor *in, void **data) {
  size_t n = ccg_graph_num_inputs(g);
  uint32_t seed = 12345;
  for (size_t i = 0; i < n; i++) {
    ccg_value_id v = ccg_graph_input(g, i);
    const ccg_shape *s = ccg_value_shape(g, v);
    ccg_dtype dt = ccg_value_dtype(g, v);
    memset(&in[i], 0, sizeof in[i]);
    in[i].name = ccg_value_name(g, v);
    in[i].tensor.dtype = dt;
    in[i].tensor.rank = s->rank;
    size_t numel = 1;
    for (int d = 0; d < s->rank; d++) {
      if (s->dims[d].sym)
        return fail("input", CCG_STATUS_SHAPE, "symbolic input dims");
      numel *= (size_t)(in[i].tensor.dims[d] = s->dims[d].size);
    }
    data[i] = calloc(numel + 1, ccg_dtype_size(dt));
    if (!data[i])
      return fail("input", CCG_STATUS_OOM, "out of memory");
    for (size_t k = 0; k < numel; k++) {
      seed = seed * 1664525u + 1013904223u;
      if (dt == CCG_DTYPE_F32)
        ((float *)data[i])[k] = (float)(seed >> 8) / 8388608.0f - 1.0f;
      else if (dt == CCG_DTYPE_I64)
        ((int64_t *)data[i])[k] = (int64_t)((seed >> 8) % 16);
      else if (dt == CCG_DTYPE_I32)
        ((int32_t *)data[i])[k] = (int32_t)((seed >> 8) % 16);
      else
        return fail("input", CCG_STATUS_DTYPE,
                    "inputs must be f32, i32 or i64");
    }
    in[i].tensor.data = data[i];
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *model = NULL, *planf = NULL, *mesh_spec = "tp=2", *out = NULL;
  bool sp = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--mesh") == 0 && i + 1 < argc)
      mesh_spec = argv[++i];
    else if (strcmp(argv[i], "--sequence-parallel") == 0)
      sp = true;
    else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
      out = argv[++i];
    else if (!model)
      model = argv[i];
    else if (!planf)
      planf = argv[i];
    else
      model = NULL, i = argc;
  }
  if (!model || !planf) {
    fprintf(stderr, "usage: shard_plan MODEL.onnx PLAN.json [--mesh tp=N] "
                    "[--sequence-parallel] [--out DIR]\n");
    return 2;
  }
  ccg_graph *g = NULL, *s = NULL;
  ccg_plan *plan = NULL;
  ccg_mesh mesh;
  ccg_status st;
  if ((st = ccg_onnx_import_file(model, NULL, &g)) != CCG_STATUS_OK)
    return fail(model, st, ccg_last_error(NULL));
  if ((st = ccg_plan_load(planf, &plan)) != CCG_STATUS_OK ||
      (st = ccg_mesh_parse(mesh_spec, &mesh)) != CCG_STATUS_OK) {
    ccg_graph_free(g);
    return fail(planf, st, ccg_last_error(NULL));
  }
  int world = (int)ccg_mesh_world_size(&mesh);
  ccg_shard_options so = CCG_SHARD_OPTIONS_INIT;
  so.sequence_parallel = sp;
  int rc = 0;
  if (world > MAXR)
    rc = fail(mesh_spec, CCG_STATUS_INVALID_ARG, "at most 8 ranks here");
  else if ((st = ccg_shard_apply(g, plan, &mesh, &so, &s, NULL)) !=
           CCG_STATUS_OK)
    rc = fail("shard", st, ccg_last_error(g));
  else if (out && (st = ccg_onnx_export_ranks(s, out, "sharded", NULL)) !=
                      CCG_STATUS_OK)
    rc = fail(out, st, ccg_last_error(s));
  size_t ni = ccg_graph_num_inputs(g), no = ccg_graph_num_outputs(g);
  ccg_exec_tensor in[MAXIO], ref[MAXIO], got[MAXR][MAXIO];
  void *data[MAXIO] = {0};
  if (!rc && (ni > MAXIO || no > MAXIO))
    rc = fail(model, CCG_STATUS_INVALID_ARG, "more than 16 inputs or outputs");
  if (!rc)
    rc = make_inputs(g, in, data);
  /* the unsharded model on one rank, then every rank of the sharded one */
  memset(ref, 0, sizeof ref);
  memset(got, 0, sizeof got);
  for (size_t i = 0; i < no; i++) {
    ref[i].name = ccg_value_name(g, ccg_graph_output(g, i));
    for (int r = 0; r < world && r < MAXR; r++)
      got[r][i].name = ref[i].name;
  }
  const ccg_exec_tensor *ins[MAXR];
  ccg_exec_tensor *outs[MAXR];
  for (int r = 0; r < MAXR; r++) {
    ins[r] = in;
    outs[r] = got[r];
  }
  ccg_exec_tensor *refp = ref;
  if (!rc && ccg_exec_run_local_ranks(&g, 1, NULL, 1, ins, ni, &refp, no, NULL,
                                      NULL) != CCG_STATUS_OK)
    rc = fail("unsharded run", CCG_STATUS_INTERNAL, ccg_last_error(NULL));
  ccg_graph *ranks[MAXR];
  for (int r = 0; r < world && r < MAXR; r++)
    ranks[r] = s;
  if (!rc && ccg_exec_run_local_ranks(ranks, world, NULL, 1, ins, ni, outs, no,
                                      NULL, NULL) != CCG_STATUS_OK)
    rc = fail("sharded run", CCG_STATUS_INTERNAL, ccg_last_error(NULL));
  double worst = 0;
  size_t compared = 0;
  for (int r = 0; !rc && r < world; r++)
    for (size_t i = 0; i < no; i++) {
      const ccg_tensor *a = &got[r][i].tensor, *b = &ref[i].tensor;
      size_t n = 1;
      bool same = a->rank == b->rank && a->dtype == CCG_DTYPE_F32 &&
                  b->dtype == CCG_DTYPE_F32;
      for (int d = 0; same && d < a->rank; d++) {
        same = a->dims[d] == b->dims[d];
        n *= (size_t)a->dims[d];
      }
      if (!same)
        continue; /* a sharded output: its rank holds a part */
      for (size_t k = 0; k < n; k++) {
        double d = fabs((double)((const float *)a->data)[k] -
                        (double)((const float *)b->data)[k]);
        worst = d > worst || isnan(d) ? d : worst;
      }
      compared++;
    }
  if (!rc) {
    printf("%s on %s%s: %zu outputs of %d ranks against the unsharded model, "
           "max |diff| %.3g\n",
           model, mesh_spec, sp ? " (sequence parallel)" : "", compared, world,
           worst);
    if (!compared || worst > 1e-5) {
      printf("FAILED: %s\n", compared ? "above 1e-5" : "nothing to compare");
      rc = 3;
    } else {
      printf("ok: the sharded ranks equal the unsharded model\n");
    }
  }
  for (size_t i = 0; i < no; i++) {
    free((void *)ref[i].tensor.data);
    for (int r = 0; r < world && r < MAXR; r++)
      free((void *)got[r][i].tensor.data);
  }
  for (size_t i = 0; i < ni; i++)
    free(data[i]);
  ccg_graph_free(s);
  ccg_graph_free(g);
  ccg_plan_free(plan);
  return rc;
}
