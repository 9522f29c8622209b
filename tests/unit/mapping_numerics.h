/* Multi-rank numerics of mappings on the local communicator: a mapping's
 * graph runs on every rank of a mesh, and each rank's outputs are compared
 * with a reference computed without communication by the same executor on
 * one rank, from the inputs of the rank's whole group (the unsharded
 * computation, written with plain ops from docs/mappings.md). Include after
 * test_util.h and exec_test_util.h. */
#ifndef CCG_MAPPING_NUMERICS_H
#define CCG_MAPPING_NUMERICS_H

#include <pthread.h>

#include "ccgraph/dtensor.h"

#define MN_MAXR 4
#define MN_MAXIO 8
#define MN_MAXN 8192 /* elements of any one tensor */

/* ---- running every rank ------------------------------------------------- */

/* The ranks of one run: graph per rank (the same pointer for SPMD graphs),
 * inputs by name with concrete dims, outputs with their dims. */
typedef struct mn_io {
  int n_in, n_out;
  const char *in_name[MN_MAXIO];
  int in_rank[MN_MAXIO];
  int64_t in_dims[MN_MAXIO][CCG_MAX_RANK];
  float in[MN_MAXIO][MN_MAXN];
  const char *out_name[MN_MAXIO];
  ccg_exec_tensor out_t[MN_MAXIO];
  float out[MN_MAXIO][MN_MAXN];
} mn_io;

typedef struct mn_job {
  ccg_exec *x;
  mn_io *io;
  ccg_status st;
  char msg[1024];
} mn_job;

static void *mn_main(void *arg) {
  mn_job *j = arg;
  ccg_exec_tensor in[MN_MAXIO];
  for (int i = 0; i < j->io->n_in; i++)
    in[i] = xt_in(j->io->in_name[i], CCG_DTYPE_F32, j->io->in[i],
                  j->io->in_rank[i], j->io->in_dims[i]);
  for (int i = 0; i < j->io->n_out; i++)
    j->io->out_t[i] =
        xt_out(j->io->out_name[i], j->io->out[i], sizeof j->io->out[i]);
  j->st = ccg_exec_run(j->x, in, (size_t)j->io->n_in, j->io->out_t,
                       (size_t)j->io->n_out);
  if (j->st != CCG_STATUS_OK)
    snprintf(j->msg, sizeof j->msg, "%s", ccg_last_error(j->x));
  return NULL;
}

/* Runs n ranks (graph gs[r], io[r]) on a fresh local communicator (none for
 * one rank); fails the test naming `what` on any error. */
static void mn_run(ccg_graph *const *gs, int n, mn_io *io, const char *what) {
  ccg_comm *c = NULL;
  if (n > 1)
    assert_ok(NULL, ccg_comm_local_new(n, &c));
  mn_job jobs[MN_MAXR];
  memset(jobs, 0, sizeof jobs);
  for (int r = 0; r < n; r++) {
    ccg_exec_tensor shapes[MN_MAXIO];
    for (int i = 0; i < io[r].n_in; i++)
      shapes[i] = xt_in(io[r].in_name[i], CCG_DTYPE_F32, NULL, io[r].in_rank[i],
                        io[r].in_dims[i]);
    ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
    o.rank = r;
    o.comm = c;
    o.deadline_s = 30;
    o.input_shapes = shapes;
    o.n_input_shapes = (size_t)io[r].n_in;
    if (ccg_exec_create(gs[r], &o, &jobs[r].x) != CCG_STATUS_OK)
      fail_msg("%s: rank %d: %s", what, r, ccg_last_error(gs[r]));
    jobs[r].io = &io[r];
  }
  pthread_t th[MN_MAXR];
  for (int r = 0; r < n; r++)
    assert_int_equal(pthread_create(&th[r], NULL, mn_main, &jobs[r]), 0);
  for (int r = 0; r < n; r++)
    assert_int_equal(pthread_join(th[r], NULL), 0);
  for (int r = 0; r < n; r++)
    ccg_exec_free(jobs[r].x);
  ccg_comm_free(c);
  for (int r = 0; r < n; r++)
    if (jobs[r].st != CCG_STATUS_OK)
      fail_msg("%s: rank %d: %s", what, r, jobs[r].msg);
}

/* ---- shapes --------------------------------------------------------------
 */

/* A dim of a value on `rank`: a number, or a rank-dependent "axis{a,b,..}"
 * indexed by the rank's coordinate on that axis. */
static int64_t mn_dim(const ccg_mesh *m, int rank, ccg_dim d) {
  if (!d.sym)
    return d.size;
  const char *b = strchr(d.sym, '{');
  assert_non_null(b);
  char axis[CCG_MESH_NAME_MAX];
  snprintf(axis, sizeof axis, "%.*s", (int)(b - d.sym), d.sym);
  int a = ccg_mesh_axis(m, axis);
  assert_true(a >= 0);
  int64_t coords[CCG_MAX_MESH_AXES];
  assert_ok(NULL, ccg_mesh_coords(m, rank, coords));
  const char *p = b + 1;
  for (int64_t i = 0; i < coords[a]; i++) {
    p = strchr(p, ',');
    assert_non_null(p);
    p++;
  }
  return strtoll(p, NULL, 10);
}

static size_t mn_numel(int rank, const int64_t *dims) {
  size_t n = 1;
  for (int d = 0; d < rank; d++)
    n *= (size_t)dims[d];
  return n;
}

/* Adds graph input `name` of g as input i of io (dims on `rank`, data from
 * a seed). */
static void mn_add_input(ccg_graph *g, ccg_value_id v, int rank, mn_io *io,
                         uint32_t seed) {
  int i = io->n_in++;
  assert_true(i < MN_MAXIO);
  const ccg_shape *s = ccg_value_shape(g, v);
  io->in_name[i] = ccg_value_name(g, v);
  io->in_rank[i] = s->rank;
  for (int d = 0; d < s->rank; d++)
    io->in_dims[i][d] = mn_dim(ccg_graph_mesh(g), rank, s->dims[d]);
  size_t n = mn_numel(s->rank, io->in_dims[i]);
  assert_true(n <= MN_MAXN);
  xt_fill(io->in[i], n, seed);
}

/* ---- small helpers ------------------------------------------------------ */

/* A scalar f32 constant. */
static ccg_value_id mn_const(ccg_graph *g, float v) {
  ccg_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = CCG_DTYPE_F32;
  t.rank = 0;
  t.data = &v;
  ccg_value_id c;
  assert_ok(g, ccg_constant(g, &t, &c));
  return c;
}

/* got equals want element for element (dims too): exactly (atol = rtol =
 * 0; -0 equals 0) or within atol + rtol * |want|. */
static void mn_compare(const float *got, const int64_t *got_dims, int got_rank,
                       const float *want, const int64_t *want_dims,
                       int want_rank, double atol, double rtol,
                       const char *what) {
  if (got_rank != want_rank)
    fail_msg("%s: rank %d, expected %d", what, got_rank, want_rank);
  for (int d = 0; d < got_rank; d++)
    if (got_dims[d] != want_dims[d])
      fail_msg("%s: dim %d is %lld, expected %lld", what, d,
               (long long)got_dims[d], (long long)want_dims[d]);
  xt_close(got, want, mn_numel(got_rank, got_dims), atol, rtol, what);
}

/* Entries whose cases are written out in test_exec_mappings_layers.c (they
 * take several inputs, or a graph per pipeline stage); that test checks it
 * ran each, test_exec_mappings that the table and this list cover the
 * registry. */
static const char *const mn_layer_entries[] = {
    "colossal.send_forward",
    "colossal.recv_forward",
    "colossal.send_backward",
    "colossal.recv_backward",
    "colossal.send_forward_recv_backward",
    "colossal.send_backward_recv_forward",
    "colossal.send_forward_recv_forward",
    "colossal.send_backward_recv_backward",
    "colossal.send_forward_backward_recv_forward_backward",
    "colossal.send_tensor_meta",
    "colossal.recv_tensor_meta",
    "dtensor.colwise_parallel",
    "dtensor.rowwise_parallel",
    "dtensor.sequence_parallel",
    "dtensor.pairwise_parallel",
};
#define MN_N_LAYER_ENTRIES                                                     \
  (sizeof mn_layer_entries / sizeof mn_layer_entries[0])

#endif
