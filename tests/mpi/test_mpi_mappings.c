/* Every entry of the mapping registry, forward and backward, on the mpi
 * communicator (under mpirun on 2 or 4 ranks; on 4 also on a 2 x 2 mesh),
 * compared bit for bit with the same graphs on the local communicator. A
 * registry entry without a case here fails the test. Pipeline entries run
 * with their counterpart on the neighbouring stages (each rank's graph is
 * built for its own stage), so every send meets its receive. The gradient
 * fed to each backward is the forward output itself. */
#include "mpi/mpi_test_util.h"

#define MAXIN 5

typedef struct mcase {
  const char *map;    /* registry name */
  char group;         /* 't' (tp), 's' (sp), 'p' (pp: stage from the rank) */
  const char *params; /* "%d" takes the stage for 'p' */
  const char *shapes[MAXIN];
  const char *placed;  /* placements of input 0 on the group axis, or NULL */
  const char *partner; /* applied after, on the same rank ('p'), or NULL */
  const char *pparams;
  const char *pshapes[MAXIN];
} mcase;

#define PP(extra)                                                              \
  "{\"stage\": %d, \"input_tensor_shape\": [2,8], \"output_grad_shape\": "     \
  "[2,8]" extra "}"
#define MG(n, ...)                                                             \
  {                                                                            \
    "megatron." n, 't', NULL, {__VA_ARGS__}, NULL, NULL, NULL, { NULL }        \
  }
#define OS(n, params, shape)                                                   \
  {                                                                            \
    "opensora." n, 's', params, {shape}, NULL, NULL, NULL, { NULL }            \
  }
#define CO(n, params, shape)                                                   \
  {                                                                            \
    "colossal." n, 't', params, {shape}, NULL, NULL, NULL, { NULL }            \
  }
#define PL(n, partner, pshape, ...)                                            \
  {                                                                            \
    "colossal." n, 'p', PP(""), {__VA_ARGS__}, NULL, partner,                  \
        partner ? PP("") : NULL, {                                             \
      pshape                                                                   \
    }                                                                          \
  }
#define DT(n, params, placed, ...)                                             \
  {                                                                            \
    "dtensor." n, 't', params, {__VA_ARGS__}, placed, NULL, NULL, { NULL }     \
  }
#define LIN "[2,4,16]"

static const mcase cases[] = {
    MG("copy_to_tensor_model_parallel_region", "[8,16]"),
    MG("reduce_from_tensor_model_parallel_region", "[8,16]"),
    MG("scatter_to_tensor_model_parallel_region", "[4,2,16]"),
    MG("gather_from_tensor_model_parallel_region", "[4,2,4]"),
    MG("scatter_to_sequence_parallel_region", "[16,2,8]"),
    MG("gather_from_sequence_parallel_region", "[4,2,8]"),
    {"megatron.gather_from_sequence_parallel_region",
     't',
     "{\"tensor_parallel_output_grad\": false}",
     {"[4,2,8]"},
     NULL,
     NULL,
     NULL,
     {NULL}},
    MG("reduce_scatter_to_sequence_parallel_region", "[16,2,8]"),
    MG("all_gather_last_dim_from_tensor_parallel_region", "[4,2,4]"),
    MG("reduce_scatter_last_dim_to_tensor_parallel_region", "[4,2,16]"),
    MG("all_to_all", "[16,8]"),
    MG("all_to_all_sp2hp", "[4,2,16]"),
    MG("all_to_all_hp2sp", "[16,2,4]"),
    MG("reduce", "[8,16]"),
    MG("split_along_last_dim", "[4,2,16]"),
    MG("split_along_first_dim", "[16,2,8]"),
    MG("gather_along_last_dim", "[4,2,4]"),
    MG("gather_along_first_dim", "[4,2,8]"),
    MG("reduce_scatter_along_last_dim", "[4,2,16]"),
    MG("reduce_scatter_along_first_dim", "[16,2,8]"),
    MG("sequence_parallel_param", "[16]"),
    OS("all_to_all", NULL, "[2,4,8,16]"),
    OS("all_to_all", "{\"scatter_dim\": 1, \"gather_dim\": 2}", "[2,16,2,16]"),
    OS("split_forward_gather_backward", "{\"dim\": 1, \"grad_scale\": \"up\"}",
       "[2,16,8]"),
    OS("gather_forward_split_backward",
       "{\"dim\": 1, \"grad_scale\": \"down\"}", "[2,4,8]"),
    {"ddp.all_reduce_grad",
     't',
     "{\"group\": \"tp\"}",
     {"[4,8]"},
     NULL,
     NULL,
     NULL,
     {NULL}},
    {"fsdp.all_gather_param",
     't',
     "{\"group\": \"tp\", \"dim\": 1}",
     {"[4,8]"},
     NULL,
     NULL,
     NULL,
     {NULL}},
    {"ddp.batch_chunk",
     't',
     "{\"group\": \"tp\"}",
     {"[8,8]"},
     NULL,
     NULL,
     NULL,
     {NULL}},
    {"ddp.all_reduce_bucket",
     't',
     "{\"group\": \"tp\", \"reduce\": \"sum\"}",
     {"[4,8]"},
     NULL,
     NULL,
     NULL,
     {NULL}},
    {"fsdp.reduce_scatter_bucket",
     't',
     "{\"group\": \"tp\", \"dims\": [1, 0]}",
     {"[4,8]", "[8,4]"},
     NULL,
     NULL,
     NULL,
     {NULL}},
    CO("all_gather", "{\"dim\": 1}", "[4,8]"),
    CO("reduce_scatter", "{\"dim\": 0}", "[8,8]"),
    CO("reduce_scatter", "{\"dim\": 1, \"op\": \"max\"}", "[2,8]"),
    CO("all_reduce", NULL, "[4,8]"),
    CO("all_reduce", "{\"op\": \"avg\"}", "[4,8]"),
    CO("broadcast", "{\"src\": 1}", "[4,8]"),
    CO("reduce", "{\"dst\": 1, \"op\": \"max\"}", "[4,8]"),
    CO("ring_forward", NULL, "[4,8]"),
    PL("send_forward", "colossal.recv_forward", NULL, "[2,8]"),
    PL("send_backward", "colossal.recv_backward", NULL, "[2,8]"),
    PL("send_forward_recv_backward", "colossal.send_backward_recv_forward",
       "[2,8]", "[2,8]"),
    PL("send_forward_recv_forward", NULL, NULL, "[2,8]"),
    PL("send_backward_recv_backward", NULL, NULL, "[2,8]"),
    PL("send_forward_backward_recv_forward_backward", NULL, NULL, "[2,8]",
       "[2,8]"),
    {"colossal.send_tensor_meta",
     'p',
     "{\"stage\": %d}",
     {"[2,8]", "[3,16,4]"},
     NULL,
     "colossal.recv_tensor_meta",
     "{\"stage\": %d, \"ndims\": [2, 3]}",
     {NULL}},
    DT("redistribute", "{\"from\": \"Shard(0)\", \"to\": \"Replicate\"}", NULL,
       "[4,8]"),
    DT("redistribute", "{\"from\": \"Replicate\", \"to\": \"Shard(1)\"}", NULL,
       "[2,16,8]"),
    DT("redistribute", "{\"from\": \"Partial\", \"to\": \"Shard(0)\"}", NULL,
       "[16,8]"),
    DT("redistribute", "{\"from\": \"Shard(0)\", \"to\": \"Shard(1)\"}", NULL,
       "[4,16]"),
    DT("redistribute", "{\"from\": \"Replicate\", \"to\": \"Partial\"}", NULL,
       "[4,8]"),
    DT("redistribute", "{\"from\": \"Partial(max)\", \"to\": \"Replicate\"}",
       NULL, "[4,8]"),
    /* 'D': the 2 x 2 mesh only (one placement per mesh axis) */
    {"dtensor.redistribute",
     'D',
     "{\"from\": [\"Shard(0)\", \"Shard(1)\"], \"to\": [\"Replicate\", "
     "\"Replicate\"]}",
     {"[4,8]"},
     NULL,
     NULL,
     NULL,
     {NULL}},
    {"dtensor.redistribute",
     'D',
     "{\"from\": [\"Partial\", \"Shard(1)\"], \"to\": [\"Shard(0)\", "
     "\"Replicate\"]}",
     {"[4,8]"},
     NULL,
     NULL,
     NULL,
     {NULL}},
    DT("colwise_parallel", NULL, NULL, LIN, "[16,8]", "[8]"),
    DT("rowwise_parallel", NULL, NULL, "[2,4,4]", "[4,16]", "[16]"),
    DT("sequence_parallel", NULL, NULL, LIN, "[16]", "[16]"),
    DT("pairwise_parallel", NULL, NULL, LIN, "[16,8]", "[8]", "[8,16]", "[16]"),
    DT("make_input_shard_1d", "{\"dim\": 1}", "Replicate", "[8,16]"),
    DT("make_input_shard_1d_last_dim", NULL, "Replicate", "[8,16]"),
    DT("make_input_replicate_1d", NULL, "Shard(0)", "[4,16]"),
    DT("make_input_reshard_replicate", NULL, NULL, "[4,16]"),
    DT("make_output_shard_1d", "{\"dim\": 0}", "Partial", "[8,16]"),
    DT("make_output_replicate_1d", NULL, "Shard(1)", "[8,4]"),
    DT("make_output_tensor", NULL, "Partial", "[8,16]"),
    DT("make_sharded_output_tensor", NULL, "Shard(0)", "[2,16]"),
    DT("make_output_reshard_tensor", NULL, "Partial", "[8,16]"),
};
#define N_CASES (sizeof cases / sizeof cases[0])

typedef struct run_arg {
  const mcase *c;
  const char *mesh, *axis;
} run_arg;

/* Applies `map` forward, then its backward with the float outputs as their
 * own gradients; every output and input gradient becomes a graph output. */
static void apply(ccg_graph *g, const char *map, const char *params,
                  const ccg_value_id *in, size_t n_in, ccg_value_id *out,
                  size_t *n_out, ccg_value_id *grads, size_t *n_grads) {
  *n_out = MT_MAX_IO;
  assert_ok(g, ccg_mapping_apply(g, map, params, in, n_in, out, n_out));
  const ccg_tag *tag = NULL;
  ccg_value_id gout[MT_MAX_IO];
  for (size_t i = 0; i < *n_out; i++) {
    ccg_node_id p = ccg_value_producer(g, out[i]);
    if (!tag && p != CCG_NONE)
      tag = ccg_node_tag(g, p);
    gout[i] =
        ccg_dtype_is_float(ccg_value_dtype(g, out[i])) ? out[i] : CCG_NONE;
  }
  ccg_mapping_grad_args a = CCG_MAPPING_GRAD_ARGS_INIT;
  a.params = tag ? tag->params : params;
  a.instance = tag ? tag->instance : 0;
  a.inputs = in;
  a.n_inputs = n_in;
  a.outputs = out;
  a.n_outputs = *n_out;
  a.grad_outputs = gout;
  assert_ok(g, ccg_mapping_apply_backward(g, map, &a, grads));
  *n_grads = n_in;
}

static void add_output(mt_rank_run *j, ccg_graph *g, ccg_value_id v) {
  if (v == CCG_NONE)
    return;
  for (size_t i = 0; i < ccg_graph_num_outputs(g); i++)
    if (ccg_graph_output(g, i) == v)
      return;
  assert_ok(g, ccg_graph_add_output(g, v));
  mt_output(j, ccg_value_name(g, v));
}

/* Inputs named x<k><i> of numeric shapes; data by rank. */
static size_t add_inputs(mt_rank_run *j, ccg_graph *g, const char *const *sh,
                         int k, int r, ccg_value_id *in) {
  size_t n = 0;
  while (n < MAXIN && sh[n]) {
    char name[16];
    snprintf(name, sizeof name, "x%d%zu", k, n);
    in[n] = ccg_test_input(g, name, CCG_DTYPE_F32, sh[n]);
    const ccg_shape *s = ccg_value_shape(g, in[n]);
    int64_t dims[CCG_MAX_RANK];
    for (int d = 0; d < s->rank; d++)
      dims[d] = s->dims[d].size;
    mt_input(j, name, CCG_DTYPE_F32, s->rank, dims,
             (uint32_t)(r * 977 + k * 31 + (int)n + 5));
    n++;
  }
  return n;
}

static void build(mt_rank_run *j, int r, const void *arg) {
  const run_arg *ra = arg;
  const mcase *c = ra->c;
  ccg_graph *g = ccg_test_graph(ra->mesh);
  j->g = g;
  const ccg_mesh *m = ccg_graph_mesh(g);
  int stage = 0;
  if (c->group == 'p') {
    int64_t co[CCG_MAX_MESH_AXES];
    assert_ok(NULL, ccg_mesh_coords(m, r, co));
    stage = (int)co[ccg_mesh_axis(m, "pp")];
  }
  char params[512], pparams[512];
  char grp[64];
  snprintf(params, sizeof params, c->params ? c->params : "{}", stage);
  /* the group key: every entry's own name for its axis */
  const char *key = strncmp(c->map, "dtensor.", 8) == 0 ? "mesh_axis" : "group";
  bool has_group = strncmp(c->map, "dtensor.redistribute", 20) != 0;
  if (has_group && strcmp(ra->axis, c->group == 's' ? "sp" : "tp") != 0 &&
      c->group != 'p') {
    size_t len = strlen(params);
    snprintf(grp, sizeof grp, "%s\"%s\": \"%s\"}", len > 2 ? ", " : "", key,
             ra->axis);
    snprintf(params + len - 1, sizeof params - len + 1, "%s", grp);
  }
  ccg_value_id in[MAXIN], out[MT_MAX_IO], grads[MAXIN];
  size_t n_in = add_inputs(j, g, c->shapes, 0, r, in), n_out, n_g;
  if (c->placed) {
    ccg_placement p[CCG_MAX_MESH_AXES];
    for (int d = 0; d < m->ndims; d++)
      assert_ok(NULL, ccg_placement_parse(strcmp(m->names[d], ra->axis) == 0
                                              ? c->placed
                                              : "Replicate",
                                          &p[d]));
    assert_ok(g, ccg_value_set_placements(g, in[0], p, m->ndims));
  }
  apply(g, c->map, params, in, n_in, out, &n_out, grads, &n_g);
  for (size_t i = 0; i < n_out; i++)
    add_output(j, g, out[i]);
  for (size_t i = 0; i < n_g; i++)
    add_output(j, g, grads[i]);
  if (c->partner) {
    snprintf(pparams, sizeof pparams, c->pparams, stage);
    n_in = add_inputs(j, g, c->pshapes, 1, r, in);
    apply(g, c->partner, pparams, in, n_in, out, &n_out, grads, &n_g);
    for (size_t i = 0; i < n_out; i++)
      add_output(j, g, out[i]);
    for (size_t i = 0; i < n_g; i++)
      add_output(j, g, grads[i]);
  }
}

/* The meshes a case runs on for this world size. */
static int meshes(const mcase *c, int world, const char *mesh[2],
                  const char *axis[2]) {
  static char one[32];
  const char *a = c->group == 's' ? "sp" : c->group == 'p' ? "pp" : "tp";
  if (c->group == 'D') {
    mesh[0] = "dp=2,tp=2";
    axis[0] = a;
    return world == 4;
  }
  bool one_axis = strncmp(c->map, "dtensor.redistribute", 20) == 0;
  snprintf(one, sizeof one, "%s=%d", a, world);
  mesh[0] = one;
  axis[0] = a;
  if (world != 4 || one_axis)
    return 1;
  mesh[1] = c->group == 's'   ? "dp=2,sp=2"
            : c->group == 'p' ? "dp=2,pp=2"
                              : "dp=2,tp=2";
  axis[1] = a;
  return 2;
}

int main(void) {
  ccg_comm *mpi = NULL;
  if (!mt_start(&mpi))
    return MT_SKIP;
  int world = ccg_comm_size(mpi), n = 0;
  if (world != 2 && world != 4) {
    printf("SKIP: run under mpirun -np 2 or -np 4 (world size %d)\n", world);
    ccg_comm_free(mpi);
    return MT_SKIP;
  }
  /* every registry entry has a case */
  for (size_t i = 0; i < ccg_mapping_count(); i++) {
    const char *name = ccg_mapping_name(ccg_mapping_at(i));
    bool found = false;
    for (size_t k = 0; k < N_CASES && !found; k++)
      found = strcmp(cases[k].map, name) == 0 ||
              (cases[k].partner && strcmp(cases[k].partner, name) == 0);
    if (!found)
      fail_msg("registry entry %s has no case in this test", name);
  }
  for (size_t k = 0; k < N_CASES; k++) {
    const mcase *c = &cases[k];
    const char *mesh[2], *axis[2];
    int nm = meshes(c, world, mesh, axis);
    for (int i = 0; i < nm; i++) {
      char what[256];
      snprintf(what, sizeof what, "%s %s on %s", c->map,
               c->params ? c->params : "", mesh[i]);
      run_arg ra = {c, mesh[i], axis[i]};
      mt_check(what, build, &ra, mpi);
      n++;
    }
  }
  ccg_comm_free(mpi);
  if (mt_rank == 0)
    printf("mpi mappings: %d runs (forward and backward) on %d ranks equal "
           "to local, bit for bit\n",
           n, world);
  return 0;
}
