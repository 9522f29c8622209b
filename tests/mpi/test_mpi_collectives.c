/* Every collective primitive on the mpi communicator (run under mpirun on
 * 2 or 4 ranks; on 4 also a dp=2,tp=2 mesh), each compared bit for bit with
 * the same graphs on the local communicator: AllReduce with every reduce_op
 * and several dtypes (below and above the all-reduce's small-message size),
 * AllGather / ReduceScatter / ShardSlice on leading and non-leading axes
 * with uneven sizes, AllToAll on several split/concat axes with uneven
 * splits, Broadcast, Reduce, Send/Recv and CollectivePermute. */
#include "mpi/mpi_test_util.h"

typedef enum kind {
  K_ALL_REDUCE,
  K_ALL_GATHER,
  K_REDUCE_SCATTER,
  K_SHARD_SLICE,
  K_ALL_TO_ALL,
  K_ALL_TO_ALL_3D,
  K_BCAST_REDUCE,
  K_SEND_RECV,
  K_PERMUTE,
} kind;

typedef struct ccase {
  kind k;
  const char *mesh, *axes;
  ccg_reduce_op op;
  ccg_dtype dt;
  int64_t count; /* AllReduce */
  int axis, axis2;
  bool uneven;
  int64_t shift;
  bool rotate;
} ccase;

/* The group of `axes` seen from rank r. */
static void group(ccg_graph *g, const char *axes, int r, int *gs, int *gi) {
  const ccg_mesh *m = ccg_graph_mesh(g);
  unsigned mask;
  if (ccg_mesh_axes_mask(m, axes, &mask) != CCG_STATUS_OK)
    fail_msg("axes %s: %s", axes, ccg_last_error(NULL));
  *gs = (int)ccg_mesh_group_size(m, mask);
  *gi = (int)ccg_mesh_rank_in_group(m, r, mask);
}

/* Per group rank sizes: uneven {1,3} / {1,3,0,2}, or 2 each. */
static void sizes_of(int gs, bool uneven, int64_t *s) {
  static const int64_t u[8] = {1, 3, 0, 2, 2, 1, 3, 1};
  for (int i = 0; i < gs; i++)
    s[i] = uneven ? u[i] : 2;
}

/* "axes{a,b,..}" for uneven sizes, else the number. */
static const char *sym(const char *axes, int gs, const int64_t *s, bool uneven,
                       char *buf, size_t size) {
  if (!uneven) {
    snprintf(buf, size, "%lld", (long long)s[0]);
    return buf;
  }
  int at = snprintf(buf, size, "%s{", axes); /* "dp,tp" is spelled dp.tp */
  for (char *p = buf; *p; p++)
    *p = *p == ',' ? '.' : *p;
  for (int i = 0; i < gs; i++)
    at += snprintf(buf + at, size - (size_t)at, "%s%lld", i ? "," : "",
                   (long long)s[i]);
  snprintf(buf + at, size - (size_t)at, "}");
  return buf;
}

static int64_t sum(const int64_t *s, int n) {
  int64_t t = 0;
  for (int i = 0; i < n; i++)
    t += s[i];
  return t;
}

static void build(mt_rank_run *j, int r, const void *arg) {
  const ccase *c = arg;
  ccg_graph *g = ccg_test_graph(c->mesh);
  j->g = g;
  int gs, gi;
  group(g, c->axes, r, &gs, &gi);
  int64_t s[8], s2[8];
  sizes_of(gs, c->uneven, s);
  char b1[64], shape[160];
  uint32_t seed = (uint32_t)(r * 131 + c->k * 7 + 1);
  ccg_value_id x, y = CCG_NONE;
  ccg_dtype dt = c->dt ? c->dt : CCG_DTYPE_F32;
  switch (c->k) {
  case K_ALL_REDUCE:
    snprintf(shape, sizeof shape, "[%lld]", (long long)c->count);
    x = ccg_test_input(g, "x", dt, shape);
    assert_ok(g, ccg_all_reduce(g, x, c->axes, c->op, &y));
    mt_input(j, "x", dt, 1, (const int64_t[]){c->count}, seed);
    break;
  case K_ALL_GATHER: /* rank holds [s, 3] (axis 0) or [2, s] (axis 1) */
    sym(c->axes, gs, s, c->uneven, b1, sizeof b1);
    snprintf(shape, sizeof shape, c->axis ? "[2,%s]" : "[%s,3]", b1);
    x = ccg_test_input(g, "x", dt, shape);
    assert_ok(g,
              ccg_all_gather(g, x, c->axes, c->axis, c->uneven ? s : NULL, &y));
    mt_input(j, "x", dt, 2,
             c->axis ? (const int64_t[]){2, s[gi]}
                     : (const int64_t[]){s[gi], 3},
             seed);
    break;
  case K_REDUCE_SCATTER:
  case K_SHARD_SLICE: {
    int64_t t = sum(s, gs);
    snprintf(shape, sizeof shape, c->axis ? "[2,%lld]" : "[%lld,3]",
             (long long)t);
    x = ccg_test_input(g, "x", dt, shape);
    if (c->k == K_SHARD_SLICE)
      assert_ok(
          g, ccg_shard_slice(g, x, c->axes, c->axis, c->uneven ? s : NULL, &y));
    else
      assert_ok(g, ccg_reduce_scatter(g, x, c->axes, c->axis, c->op,
                                      c->uneven ? s : NULL, &y));
    mt_input(j, "x", dt, 2,
             c->axis ? (const int64_t[]){2, t} : (const int64_t[]){t, 3}, seed);
    break;
  }
  case K_ALL_TO_ALL: { /* [outs[r], 6] split on 1 (ins), concat on 0 */
    for (int i = 0; i < gs; i++)
      s2[i] = c->uneven ? s[(i + 1) % gs] + 1 : 2;
    if (c->uneven) /* the split dim must hold sum(ins) */
      for (int i = 0; i < gs; i++)
        s[i] = i % 2 ? 1 : 2;
    int64_t w = sum(s, gs);
    sym(c->axes, gs, s2, c->uneven, b1, sizeof b1);
    snprintf(shape, sizeof shape, "[%s,%lld]", b1, (long long)w);
    x = ccg_test_input(g, "x", dt, shape);
    assert_ok(g, ccg_all_to_all(g, x, c->axes, 1, 0, c->uneven ? s : NULL,
                                c->uneven ? s2 : NULL, &y));
    mt_input(j, "x", dt, 2, (const int64_t[]){s2[gi], w}, seed);
    break;
  }
  case K_ALL_TO_ALL_3D: /* [2, 4*gs, 3]: split axis, concat axis2 */
    snprintf(shape, sizeof shape, "[2,%d,3]", 4 * gs);
    x = ccg_test_input(g, "x", dt, shape);
    assert_ok(g,
              ccg_all_to_all(g, x, c->axes, c->axis, c->axis2, NULL, NULL, &y));
    mt_input(j, "x", dt, 3, (const int64_t[]){2, 4 * gs, 3}, seed);
    break;
  case K_BCAST_REDUCE: {
    ccg_value_id bb, rd;
    x = ccg_test_input(g, "x", dt, "[5]");
    assert_ok(g, ccg_broadcast(g, x, c->axes, gs - 1, &bb));
    assert_ok(g, ccg_reduce(g, x, c->axes, gs > 2 ? 1 : 0, c->op, &rd));
    assert_ok(g, ccg_concat(g, (const ccg_value_id[]){bb, rd}, 2, 0, &y));
    mt_input(j, "x", dt, 1, (const int64_t[]){5}, seed);
    break;
  }
  case K_SEND_RECV: { /* a ring forward: two tensors, matched by tag */
    ccg_value_id d, a, bb;
    ccg_node_id n1, n2;
    x = ccg_test_input(g, "x", dt, "[6]");
    assert_ok(g, ccg_neg(g, x, &d));
    assert_ok(g, ccg_send(g, x, c->axes, 1, 7, &n1));
    assert_ok(g, ccg_send(g, d, c->axes, 1, 8, &n2));
    ccg_shape sh = CCG_SHAPE(6);
    assert_ok(g, ccg_recv(g, c->axes, -1, 7, dt, &sh, &a));
    assert_ok(g, ccg_recv(g, c->axes, -1, 8, dt, &sh, &bb));
    assert_ok(g, ccg_concat(g, (const ccg_value_id[]){a, bb}, 2, 0, &y));
    mt_input(j, "x", dt, 1, (const int64_t[]){6}, seed);
    break;
  }
  case K_PERMUTE:
    x = ccg_test_input(g, "x", dt, "[3]");
    assert_ok(g,
              ccg_collective_permute(g, x, c->axes, c->shift, c->rotate, &y));
    mt_input(j, "x", dt, 1, (const int64_t[]){3}, seed);
    break;
  }
  assert_ok(g, ccg_graph_add_output(g, y));
  mt_output(j, ccg_value_name(g, y));
}

static void check(const ccase *c, ccg_comm *mpi) {
  char what[256];
  snprintf(what, sizeof what,
           "kind %d on %s over %s (op %s, %s, count %lld, axes %d/%d, "
           "uneven %d, shift %lld)",
           (int)c->k, c->mesh, c->axes, ccg_reduce_op_name(c->op),
           ccg_dtype_name(c->dt ? c->dt : CCG_DTYPE_F32), (long long)c->count,
           c->axis, c->axis2, c->uneven, (long long)c->shift);
  mt_check(what, build, c, mpi);
}

/* Every primitive over one mesh and group. */
static int run_group(const char *mesh, const char *axes, ccg_comm *mpi) {
  int n = 0;
  for (int op = 0; op < CCG_REDUCE_OP_COUNT; op++)
    for (int big = 0; big < 2; big++) {
      ccase c = {K_ALL_REDUCE, mesh, axes, (ccg_reduce_op)op};
      c.count = big ? 5003 : 37;
      check(&c, mpi), n++;
    }
  const ccg_dtype dts[] = {CCG_DTYPE_I64, CCG_DTYPE_BF16, CCG_DTYPE_F16,
                           CCG_DTYPE_F64, CCG_DTYPE_I32};
  for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
    for (int big = 0; big < 2; big++) {
      ccase c = {K_ALL_REDUCE, mesh, axes, CCG_REDUCE_SUM, dts[d]};
      c.count = big ? 9001 : 19;
      if (dts[d] == CCG_DTYPE_F64)
        c.op = CCG_REDUCE_AVG;
      check(&c, mpi), n++;
    }
  for (int axis = 0; axis < 2; axis++)
    for (int uneven = 0; uneven < 2; uneven++) {
      ccase c = {K_ALL_GATHER, mesh, axes};
      c.axis = axis;
      c.uneven = uneven;
      check(&c, mpi), n++;
      c.k = K_SHARD_SLICE;
      check(&c, mpi), n++;
      c.k = K_REDUCE_SCATTER;
      const ccg_reduce_op ops[3] = {CCG_REDUCE_SUM, CCG_REDUCE_MAX,
                                    CCG_REDUCE_AVG};
      for (int o = 0; o < 3; o++) {
        c.op = ops[o];
        check(&c, mpi), n++;
      }
    }
  for (int uneven = 0; uneven < 2; uneven++) {
    ccase c = {K_ALL_TO_ALL, mesh, axes};
    c.uneven = uneven;
    check(&c, mpi), n++;
  }
  const int axes3[3][2] = {{1, 0}, {1, 2}, {1, 1}};
  for (int a = 0; a < 3; a++) {
    ccase c = {K_ALL_TO_ALL_3D, mesh, axes};
    c.axis = axes3[a][0];
    c.axis2 = axes3[a][1];
    check(&c, mpi), n++;
  }
  ccase b = {K_BCAST_REDUCE, mesh, axes, CCG_REDUCE_SUM};
  check(&b, mpi), n++;
  b.op = CCG_REDUCE_MAX;
  check(&b, mpi), n++;
  /* one mesh axis, |shift| below its size */
  const int64_t shifts[3] = {1, -1, 2};
  ccg_mesh m;
  assert_ok(NULL, ccg_mesh_parse(mesh, &m));
  unsigned mask;
  assert_ok(NULL, ccg_mesh_axes_mask(&m, axes, &mask));
  int64_t gs = ccg_mesh_group_size(&m, mask);
  if (!strchr(axes, ',')) {
    ccase s = {K_SEND_RECV, mesh, axes};
    check(&s, mpi), n++;
  }
  for (int i = 0; i < 3 && !strchr(axes, ','); i++)
    for (int rot = 0; rot < 2 && shifts[i] < gs; rot++) {
      ccase p = {K_PERMUTE, mesh, axes};
      p.shift = shifts[i];
      p.rotate = rot;
      check(&p, mpi), n++;
    }
  return n;
}

int main(void) {
  ccg_comm *mpi = NULL;
  if (!mt_start(&mpi))
    return MT_SKIP;
  int world = ccg_comm_size(mpi), n = 0;
  if (world != 2 && world != 4) {
    if (mt_rank == 0)
      printf("SKIP: run under mpirun -np 2 or -np 4 (world size %d)\n", world);
    ccg_comm_free(mpi);
    return MT_SKIP;
  }
  char mesh[32];
  snprintf(mesh, sizeof mesh, "tp=%d", world);
  n += run_group(mesh, "tp", mpi);
  if (world == 4) {
    n += run_group("dp=2,tp=2", "tp", mpi);
    n += run_group("dp=2,tp=2", "dp", mpi);
    n += run_group("dp=2,tp=2", "dp,tp", mpi);
  }
  ccg_comm_free(mpi);
  if (mt_rank == 0)
    printf("mpi collectives: %d cases on %d ranks equal to local, bit for "
           "bit\n",
           n, world);
  return 0;
}
