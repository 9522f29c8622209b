/* A forward+backward graph (a Megatron GPT block with tensor and sequence
 * parallelism, differentiated by ccg_backward) on the mpi communicator
 * (under mpirun) gives the same bits as on local ranks: the output, the
 * input's gradient and gradients of sharded, replicated and
 * sequence-parallel parameters. */
#include "mpi/mpi_test_util.h"

enum { S = 8, B = 2, H = 16, HEADS = 4, F = 32 };

typedef struct param {
  const char *name;
  int rank;
  int64_t d0, d1; /* d1 of a matrix; the /W dim is marked by div */
  int div;        /* 0: none, 1: d0 / W, 2: d1 / W, 3: d1 = 3 H / W */
} param;

static const param params[] = {
    {"ln1.scale", 1, H, 0, 0},   {"ln1.bias", 1, H, 0, 0},
    {"qkv.weight", 2, H, 0, 3},  {"qkv.bias", 1, 0, 0, 4},
    {"proj.weight", 2, H, H, 1}, {"proj.bias", 1, H, 0, 0},
    {"ln2.scale", 1, H, 0, 0},   {"ln2.bias", 1, H, 0, 0},
    {"fc1.weight", 2, H, F, 2},  {"fc1.bias", 1, F, 0, 1},
    {"fc2.weight", 2, F, H, 1},  {"fc2.bias", 1, H, 0, 0},
};
#define NPARAM (sizeof params / sizeof params[0])

static void build(mt_rank_run *j, int rank, const void *arg) {
  int w = *(const int *)arg;
  char mesh[16];
  snprintf(mesh, sizeof mesh, "tp=%d", w);
  ccg_graph *g = ccg_test_graph(mesh);
  j->g = g;
  int64_t xd[3] = {S / w, B, H};
  ccg_shape xs = {3, {ccg_dim_num(S / w), ccg_dim_num(B), ccg_dim_num(H)}};
  ccg_value_id x, dy, v[NPARAM], y, loss;
  assert_ok(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x));
  assert_ok(g, ccg_graph_add_input(g, "dy", CCG_DTYPE_F32, &xs, &dy));
  for (size_t i = 0; i < NPARAM; i++) {
    const param *p = &params[i];
    int64_t d0 = p->d0, d1 = p->d1;
    if (p->div == 1)
      d0 /= w;
    else if (p->div == 2)
      d1 /= w;
    else if (p->div == 3)
      d1 = 3 * H / w;
    else if (p->div == 4)
      d0 = 3 * H / w;
    size_t n = (size_t)d0 * (size_t)(p->rank == 2 ? d1 : 1);
    float *data = malloc(n * sizeof *data);
    assert_true(data != NULL);
    xt_fill(data, n, (uint32_t)(100 * rank + (int)i + 1));
    ccg_tensor t = {CCG_DTYPE_F32, p->rank, {d0, d1}, data};
    assert_ok(g, ccg_graph_add_initializer(g, p->name, &t, &v[i]));
    free(data);
  }
  ccg_megatron_gpt_block_params bp = {v[0],  v[1],  v[2],    v[3], v[4],
                                      v[5],  v[6],  v[7],    v[8], v[9],
                                      v[10], v[11], CCG_NONE};
  ccg_megatron_gpt_block_options bo = CCG_MEGATRON_GPT_BLOCK_OPTIONS_INIT;
  bo.sequence_parallel = true;
  bo.heads = HEADS;
  assert_ok(g, ccg_megatron_gpt_block(g, x, &bp, &bo, &y));
  assert_ok(g, ccg_mul(g, y, dy, &loss));
  assert_ok(g, ccg_reduce_sum(g, loss, NULL, 0, false, &loss));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_backward_options bw = CCG_BACKWARD_OPTIONS_INIT;
  bw.loss = loss;
  assert_ok(g, ccg_backward(g, &bw)); /* every float initializer */
  mt_input(j, "x", CCG_DTYPE_F32, 3, xd, (uint32_t)(7 + rank));
  mt_input(j, "dy", CCG_DTYPE_F32, 3, xd, (uint32_t)(70 + rank));
  mt_output(j, ccg_value_name(g, y));
  static const char *const grads[] = {"grad/qkv.weight", "grad/fc2.weight",
                                      "grad/ln1.scale", "grad/proj.bias",
                                      "grad/fc1.bias"};
  for (size_t i = 0; i < sizeof grads / sizeof *grads; i++)
    mt_output(j, grads[i]);
}

int main(void) {
  ccg_comm *mpi = NULL;
  if (!mt_start(&mpi))
    return MT_SKIP;
  int w = ccg_comm_size(mpi);
  if (w < 2 || HEADS % w != 0) {
    printf("SKIP: needs 2 or 4 ranks under mpirun, has %d\n", w);
    ccg_comm_free(mpi);
    return MT_SKIP;
  }
  mt_check("GPT block forward+backward", build, &w, mpi);
  if (mt_rank == 0)
    printf("mpi backward: the block's forward+backward on %d ranks equals "
           "local bit for bit\n",
           w);
  ccg_comm_free(mpi);
  return 0;
}
