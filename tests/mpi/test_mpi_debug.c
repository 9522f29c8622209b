/* The run-time collective checks and the flight recorder on the mpi
 * communicator (under mpirun): with CCG_DEBUG_COLLECTIVES the ranks'
 * fingerprints are exchanged through MPI, so a rank whose all-reduce has
 * another shape or reduce_op (the same bytes: MPI alone lets it through)
 * fails in that collective on every rank, naming both ranks and nodes; a
 * matching program passes with the checks on and its recorder holds the
 * call; a rank that stops early leaves the others a timeout whose message
 * carries the recorder. */
#include <stdlib.h>

#include "mpi/mpi_test_util.h"

#define DEADLINE 0.5

/* x [8] reshaped to [d0, d1] and all-reduced over tp with `op`, named
 * `node`; with `then_gather`, the result is also all-gathered. */
static ccg_graph *program(int world, int64_t d0, int64_t d1, ccg_reduce_op op,
                          const char *node, bool then_gather) {
  char mesh[32];
  snprintf(mesh, sizeof mesh, "tp=%d", world);
  ccg_graph *g = ccg_test_graph(mesh);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8]"), r, y;
  int64_t dims[2] = {d0, d1};
  assert_ok(g, ccg_reshape_to(g, x, dims, 2, &r));
  ccg_node_desc d = CCG_NODE_DESC_INIT;
  d.op = "AllReduce";
  d.domain = "ccgraph";
  d.name = node;
  d.inputs = &r;
  d.n_inputs = 1;
  const char *axes[] = {"tp"};
  ccg_attr attrs[] = {CCG_ATTR_SS("mesh_axes", axes, 1),
                      CCG_ATTR_I("group_size", world),
                      CCG_ATTR_S("reduce_op", ccg_reduce_op_name(op))};
  d.attrs = attrs;
  d.n_attrs = 3;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &d, &n));
  y = ccg_node_output(g, n, 0);
  if (then_gather)
    assert_ok(g, ccg_all_gather(g, y, "tp", 0, NULL, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  return g;
}

typedef struct outcome {
  ccg_status st;
  char msg[2048];
  ccg_flight_entry rec[4];
  size_t n_rec;
} outcome;

static void run(ccg_graph *g, bool debug, outcome *o) {
  ccg_comm *c = NULL;
  assert_ok(NULL, ccg_comm_mpi_new(&c));
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[64];
  ccg_exec_tensor in = XT_F32("x", x, 8);
  ccg_exec_tensor t =
      xt_out(ccg_value_name(g, ccg_graph_output(g, 0)), out, sizeof out);
  ccg_exec_options opt = CCG_EXEC_OPTIONS_INIT;
  opt.rank = ccg_comm_rank(c);
  opt.comm = c;
  opt.deadline_s = DEADLINE;
  opt.debug_collectives = debug;
  opt.flight_records = 4;
  ccg_exec *x0 = NULL;
  assert_ok(g, ccg_exec_create(g, &opt, &x0));
  o->st = ccg_exec_run(x0, &in, 1, &t, 1);
  snprintf(o->msg, sizeof o->msg, "%s", ccg_last_error(x0));
  o->n_rec = ccg_exec_flight_record(x0, o->rec, 4);
  ccg_exec_free(x0);
  ccg_comm_free(c);
#ifdef CCG_HAVE_MPI
  MPI_Barrier(MPI_COMM_WORLD); /* late failure notices go with their comm */
#endif
}

static void expect(const outcome *o, ccg_status want, const char *a,
                   const char *b) {
  if (o->st != want)
    fail_msg("rank %d: %s (%s), expected %s", mt_rank, ccg_status_name(o->st),
             o->msg, ccg_status_name(want));
  if ((a && !strstr(o->msg, a)) || (b && !strstr(o->msg, b)))
    fail_msg("rank %d: message \"%s\" lacks \"%s\" or \"%s\"", mt_rank, o->msg,
             a ? a : "", b ? b : "");
}

int main(void) {
  ccg_comm *probe = NULL;
  if (!mt_start(&probe))
    return MT_SKIP;
  int world = ccg_comm_size(probe);
  ccg_comm_free(probe);
  if (world < 2) {
    printf("SKIP: run under mpirun with at least 2 ranks\n");
#ifdef CCG_HAVE_MPI
    MPI_Finalize();
#endif
    return MT_SKIP;
  }
  outcome o;
  bool odd = mt_rank == 1;

  /* Rank 1 reduces a [4,2] view of the same 8 elements. */
  ccg_graph *g = odd ? program(world, 4, 2, CCG_REDUCE_SUM, "ar_b", false)
                     : program(world, 2, 4, CCG_REDUCE_SUM, "ar_a", false);
  run(g, false, &o);
  expect(&o, CCG_STATUS_OK, NULL, NULL); /* MPI moves the bytes regardless */
  run(g, true, &o);
  expect(&o, CCG_STATUS_COMM, "collective check (call #0): shape differs",
         "AllReduce 'ar_a' f32 [2,4] on rank 0, but AllReduce 'ar_b' f32 "
         "[4,2] on rank 1");
  assert_int_equal(o.n_rec, 1);
  assert_int_equal(o.rec[0].state, CCG_FLIGHT_FAILED);
  ccg_graph_free(g);

  /* Rank 1 takes the maximum where the others sum. */
  g = program(world, 2, 4, odd ? CCG_REDUCE_MAX : CCG_REDUCE_SUM,
              odd ? "m" : "s", false);
  run(g, true, &o);
  expect(&o, CCG_STATUS_COMM, "reduce_op differs", "on rank 1");
  ccg_graph_free(g);

  /* A matching program passes with the checks on. */
  g = program(world, 2, 4, CCG_REDUCE_SUM, "ar", true);
  run(g, true, &o);
  expect(&o, CCG_STATUS_OK, NULL, NULL);
  assert_int_equal(o.n_rec, 2);
  assert_true(strcmp(o.rec[0].op, "AllReduce") == 0 &&
              strcmp(o.rec[0].node, "ar") == 0 &&
              o.rec[0].state == CCG_FLIGHT_COMPLETED &&
              o.rec[0].group_size == world);
  assert_true(strcmp(o.rec[1].op, "AllGather") == 0 &&
              o.rec[1].state == CCG_FLIGHT_COMPLETED);
  ccg_graph_free(g);

  /* The last rank stops after the all-reduce: the others time out (or are
   * told) in the all-gather, and rank 0's message carries its recorder. */
  g = program(world, 2, 4, CCG_REDUCE_SUM, "first", mt_rank != world - 1);
  run(g, false, &o);
  if (mt_rank == world - 1) {
    expect(&o, CCG_STATUS_OK, NULL, NULL);
  } else {
    /* the first waiting rank to time out tells the others, so any of them
     * may see COMM instead of its own timeout */
    if (o.st != CCG_STATUS_TIMEOUT && o.st != CCG_STATUS_COMM)
      fail_msg("rank %d: %s (%s)", mt_rank, ccg_status_name(o.st), o.msg);
    char rec[128];
    snprintf(rec, sizeof rec,
             "[flight recorder of rank %d: #0 AllReduce 'first' [2,4] "
             "completed; #1 AllGather '",
             mt_rank);
    expect(&o, o.st, "AllGather", rec);
  }
  ccg_graph_free(g);

  if (mt_rank == 0)
    printf("mpi collective checks: mismatches caught on %d ranks\n", world);
#ifdef CCG_HAVE_MPI
  MPI_Finalize();
#endif
  return 0;
}
