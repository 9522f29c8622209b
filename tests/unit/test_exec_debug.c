/* Run-time collective checks and the flight recorder on the local
 * communicator: per-rank graphs that disagree in ways the communicator
 * alone does not see (same element count in another shape, another
 * reduce_op) run silently without checks and fail in that collective,
 * naming both ranks and nodes, with them (option or CCG_DEBUG_COLLECTIVES);
 * uneven all-to-all sizes that disagree; a message received in another
 * shape of the same size; a stalled rank's timeout carries
 * the flight recorder, which the API also returns. The same checks on the
 * mpi communicator wait for it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>

#include "test_util.h"

#include "exec_test_util.h"
#include "verify_programs.h"

#define DEADLINE 0.3

typedef struct job {
  ccg_graph *g;
  ccg_comm *comm;
  int rank;
  bool debug;
  size_t records;
  const char *input; /* name of the one f32 input */
  int64_t dims[2];
  float out[64];
  ccg_status st;
  char msg[1024];
  ccg_flight_entry rec[8];
  size_t n_rec;
} job;

static void *job_main(void *arg) {
  job *j = arg;
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.rank = j->rank;
  o.comm = j->comm;
  o.deadline_s = DEADLINE;
  o.debug_collectives = j->debug;
  o.flight_records = j->records;
  ccg_exec *x = NULL;
  j->st = ccg_exec_create(j->g, &o, &x);
  if (j->st != CCG_STATUS_OK) {
    snprintf(j->msg, sizeof j->msg, "%s", ccg_last_error(j->g));
    return NULL;
  }
  static const float data[256];
  int rank = j->dims[1] ? 2 : 1;
  ccg_exec_tensor in = xt_in(j->input, CCG_DTYPE_F32, data, rank, j->dims);
  ccg_exec_tensor out = xt_out(ccg_value_name(j->g, ccg_graph_output(j->g, 0)),
                               j->out, sizeof j->out);
  j->st = ccg_exec_run(x, &in, 1, &out, 1);
  snprintf(j->msg, sizeof j->msg, "%s", ccg_last_error(x));
  j->n_rec = ccg_exec_flight_record(x, j->rec, 8);
  ccg_exec_free(x);
  return NULL;
}

static void run_jobs(job *jobs, int n) {
  ccg_comm *c = NULL;
  assert_ok(NULL, ccg_comm_local_new(n, &c));
  pthread_t th[4];
  for (int r = 0; r < n; r++) {
    jobs[r].comm = c;
    jobs[r].rank = r;
    assert_int_equal(pthread_create(&th[r], NULL, job_main, &jobs[r]), 0);
  }
  for (int r = 0; r < n; r++)
    assert_int_equal(pthread_join(th[r], NULL), 0);
  ccg_comm_free(c);
}

/* x [8] reshaped to `dims`, then all-reduced with `op`. */
static ccg_graph *reshaped_all_reduce(int64_t d0, int64_t d1, ccg_reduce_op op,
                                      const char *name) {
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8]");
  const int64_t dims[] = {d0, d1};
  assert_ok(g, ccg_reshape_to(g, x, dims, 2, &x));
  ccg_node_desc nd = CCG_NODE_DESC_INIT;
  const char *axes[] = {"tp"};
  ccg_attr attrs[] = {CCG_ATTR_SS("mesh_axes", axes, 1),
                      CCG_ATTR_I("group_size", 2),
                      CCG_ATTR_S("reduce_op", ccg_reduce_op_name(op))};
  nd.op = "AllReduce";
  nd.domain = "ccgraph";
  nd.name = name;
  nd.inputs = &x;
  nd.n_inputs = 1;
  nd.attrs = attrs;
  nd.n_attrs = 3;
  ccg_node_id n;
  assert_ok(g, ccg_graph_add_node(g, &nd, &n));
  assert_ok(g, ccg_graph_add_output(g, ccg_node_output(g, n, 0)));
  return g;
}

static void two_jobs(job *jobs, ccg_graph *g0, ccg_graph *g1, bool debug) {
  memset(jobs, 0, 2 * sizeof *jobs);
  for (int r = 0; r < 2; r++) {
    jobs[r].g = r ? g1 : g0;
    jobs[r].debug = debug;
    jobs[r].records = 32;
    jobs[r].input = "x";
    jobs[r].dims[0] = 8;
  }
  run_jobs(jobs, 2);
}

static void expect_msg(const job *j, ccg_status want,
                       const char *const *frags) {
  if (j->st != want)
    fail_msg("rank %d: %s (%s), expected %s", j->rank, ccg_status_name(j->st),
             j->msg, ccg_status_name(want));
  for (const char *const *f = frags; *f; f++)
    if (!strstr(j->msg, *f))
      fail_msg("rank %d: message \"%s\" lacks \"%s\"", j->rank, j->msg, *f);
}

#define EXPECT(j, st, ...)                                                     \
  expect_msg((j), (st), (const char *[]){__VA_ARGS__, NULL})

static void test_shape_mismatch(void **state) {
  (void)state;
  ccg_graph *g0 = reshaped_all_reduce(2, 4, CCG_REDUCE_SUM, "ar_a");
  ccg_graph *g1 = reshaped_all_reduce(4, 2, CCG_REDUCE_SUM, "ar_b");
  job jobs[2];
  /* the same 8 elements: the communicator alone lets it through */
  two_jobs(jobs, g0, g1, false);
  EXPECT(&jobs[0], CCG_STATUS_OK, "");
  EXPECT(&jobs[1], CCG_STATUS_OK, "");
  two_jobs(jobs, g0, g1, true);
  for (int r = 0; r < 2; r++) {
    char who[64];
    snprintf(who, sizeof who, "rank %d: node 'ar_%c' (AllReduce)", r,
             r ? 'b' : 'a');
    EXPECT(&jobs[r], CCG_STATUS_COMM, who,
           "collective check (call #0): shape differs: AllReduce 'ar_a' f32 "
           "[2,4] on rank 0, but AllReduce 'ar_b' f32 [4,2] on rank 1");
    /* the recorder has the failed call too */
    assert_int_equal(jobs[r].n_rec, 1);
    assert_int_equal(jobs[r].rec[0].state, CCG_FLIGHT_FAILED);
  }
  ccg_graph_free(g0);
  ccg_graph_free(g1);
}

static void test_reduce_op_mismatch_env(void **state) {
  (void)state;
  ccg_graph *g0 = reshaped_all_reduce(2, 4, CCG_REDUCE_SUM, "s");
  ccg_graph *g1 = reshaped_all_reduce(2, 4, CCG_REDUCE_MAX, "m");
  job jobs[2];
  two_jobs(jobs, g0, g1, false);
  EXPECT(&jobs[0], CCG_STATUS_OK, "");
  assert_int_equal(setenv("CCG_DEBUG_COLLECTIVES", "1", 1), 0);
  two_jobs(jobs, g0, g1, false);
  assert_int_equal(unsetenv("CCG_DEBUG_COLLECTIVES"), 0);
  for (int r = 0; r < 2; r++)
    EXPECT(&jobs[r], CCG_STATUS_COMM, "reduce_op differs",
           "AllReduce 's' f32 [2,4] on rank 0, but AllReduce 'm' f32 [2,4] on "
           "rank 1");
  ccg_graph_free(g0);
  ccg_graph_free(g1);
}

/* With checks on, a matching program runs and computes as without. */
static void test_checks_pass_matching(void **state) {
  (void)state;
  ccg_graph *g0 = reshaped_all_reduce(2, 4, CCG_REDUCE_SUM, "ar");
  ccg_graph *g1 = reshaped_all_reduce(2, 4, CCG_REDUCE_SUM, "ar");
  job jobs[2];
  two_jobs(jobs, g0, g1, true);
  for (int r = 0; r < 2; r++) {
    EXPECT(&jobs[r], CCG_STATUS_OK, "");
    assert_int_equal(jobs[r].n_rec, 1);
    assert_int_equal(jobs[r].rec[0].seq, 0);
    assert_string_equal(jobs[r].rec[0].op, "AllReduce");
    assert_string_equal(jobs[r].rec[0].node, "ar");
    assert_string_equal(jobs[r].rec[0].shape, "[2,4]");
    assert_int_equal(jobs[r].rec[0].dtype, CCG_DTYPE_F32);
    assert_int_equal(jobs[r].rec[0].group_size, 2);
    assert_int_equal(jobs[r].rec[0].state, CCG_FLIGHT_COMPLETED);
    assert_true(jobs[r].rec[0].t_done_s >= jobs[r].rec[0].t_issued_s);
  }
  ccg_graph_free(g0);
  ccg_graph_free(g1);
}

/* Uneven all-to-all whose sizes disagree between the ranks. */
static void test_alltoall_splits(void **state) {
  (void)state;
  job jobs[2];
  memset(jobs, 0, sizeof jobs);
  for (int r = 0; r < 2; r++) {
    jobs[r].g = vp_moe(r, VM_SPLITS, 1);
    assert_non_null(jobs[r].g);
    jobs[r].debug = true;
    jobs[r].records = 4;
    jobs[r].input = "tokens";
    jobs[r].dims[0] = r ? 7 : 5;
    jobs[r].dims[1] = 16;
  }
  run_jobs(jobs, 2);
  for (int r = 0; r < 2; r++) {
    EXPECT(&jobs[r], CCG_STATUS_COMM, "split sizes differ",
           "AllToAll 'AllToAll_0' f32 [5,16] on rank 0 sends 48 elements to "
           "group rank 1, but AllToAll 'AllToAll_0' f32 [7,16] on rank 1 "
           "expects 32 from group rank 0");
    ccg_graph_free(jobs[r].g);
  }
}

/* Rank 1 stops after the first collective: rank 0 times out in the second,
 * and the message and the API give its recorder. */
static void test_stalled_rank_recorder(void **state) {
  (void)state;
  ccg_graph *g0 = reshaped_all_reduce(2, 4, CCG_REDUCE_SUM, "first");
  ccg_value_id y = ccg_graph_output(g0, 0), z;
  assert_ok(g0, ccg_all_gather(g0, y, "tp", 0, NULL, &z));
  ccg_graph *g1 = reshaped_all_reduce(2, 4, CCG_REDUCE_SUM, "first");
  job jobs[2];
  two_jobs(jobs, g0, g1, false);
  EXPECT(&jobs[0], CCG_STATUS_TIMEOUT, "AllGather",
         "did not reach the same collective within the deadline",
         "[flight recorder of rank 0: #0 AllReduce 'first' [2,4] completed; "
         "#1 AllGather '",
         "[2,4] failed]");
  EXPECT(&jobs[1], CCG_STATUS_OK, "");
  assert_int_equal(jobs[0].n_rec, 2);
  assert_int_equal(jobs[0].rec[0].state, CCG_FLIGHT_COMPLETED);
  assert_int_equal(jobs[0].rec[1].state, CCG_FLIGHT_FAILED);
  assert_string_equal(jobs[0].rec[1].op, "AllGather");
  assert_true(jobs[0].rec[1].t_done_s - jobs[0].rec[1].t_issued_s >= DEADLINE);
  assert_int_equal(ccg_exec_flight_record(NULL, jobs[0].rec, 8), 0);
  assert_string_equal(ccg_flight_state_name(CCG_FLIGHT_ISSUED), "issued");
  assert_string_equal(ccg_flight_state_name(CCG_FLIGHT_STATE_COUNT), "invalid");
  /* no recorder: the message has none either */
  memset(jobs, 0, sizeof jobs);
  for (int r = 0; r < 2; r++) {
    jobs[r].g = r ? g1 : g0;
    jobs[r].input = "x";
    jobs[r].dims[0] = 8;
  }
  run_jobs(jobs, 2);
  EXPECT(&jobs[0], CCG_STATUS_TIMEOUT, "AllGather");
  assert_null(strstr(jobs[0].msg, "flight recorder"));
  assert_int_equal(jobs[0].n_rec, 0);
  ccg_graph_free(g0);
  ccg_graph_free(g1);
}

/* Rank 0 sends x [8] as [2,4]; rank 1 receives [d0,d1] (same bytes). */
static ccg_graph *p2p_rank(int rank, int64_t d0, int64_t d1) {
  ccg_graph *g = ccg_test_graph("pp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8]"), y;
  if (rank == 0) {
    const int64_t dims[] = {2, 4};
    ccg_value_id r;
    ccg_node_desc nd = CCG_NODE_DESC_INIT;
    assert_ok(g, ccg_reshape_to(g, x, dims, 2, &r));
    const ccg_attr attrs[] = {CCG_ATTR_S("mesh_axis", "pp"),
                              CCG_ATTR_I("peer_offset", 1),
                              CCG_ATTR_I("tag", 3)};
    nd.op = "Send";
    nd.domain = "ccgraph";
    nd.name = "s";
    nd.inputs = &r;
    nd.n_inputs = 1;
    nd.attrs = attrs;
    nd.n_attrs = 3;
    nd.n_outputs = 0;
    ccg_node_id n;
    assert_ok(g, ccg_graph_add_node(g, &nd, &n));
    assert_ok(g, ccg_relu(g, x, &y));
  } else {
    ccg_shape s = CCG_SHAPE(d0, d1);
    assert_ok(g, ccg_recv(g, "pp", -1, 3, CCG_DTYPE_F32, &s, &y));
  }
  assert_ok(g, ccg_graph_add_output(g, y));
  return g;
}

static void test_p2p_shape(void **state) {
  (void)state;
  ccg_graph *g0 = p2p_rank(0, 0, 0), *ok = p2p_rank(1, 2, 4);
  ccg_graph *bad = p2p_rank(1, 4, 2);
  job jobs[2];
  two_jobs(jobs, g0, ok, true);
  EXPECT(&jobs[0], CCG_STATUS_OK, "");
  EXPECT(&jobs[1], CCG_STATUS_OK, "");
  assert_int_equal(jobs[1].n_rec, 1);
  assert_string_equal(jobs[1].rec[0].op, "Recv");
  two_jobs(jobs, g0, bad, false); /* same bytes: the communicator agrees */
  EXPECT(&jobs[1], CCG_STATUS_OK, "");
  two_jobs(jobs, g0, bad, true);
  EXPECT(&jobs[1], CCG_STATUS_COMM, "rank 1: node '",
         "collective check (call #0): shape differs: Send 's' f32 [2,4] on "
         "rank 0 sends it, but Recv '",
         "f32 [4,2] on rank 1 receives it");
  ccg_graph_free(g0);
  ccg_graph_free(ok);
  ccg_graph_free(bad);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shape_mismatch),
      cmocka_unit_test(test_reduce_op_mismatch_env),
      cmocka_unit_test(test_checks_pass_matching),
      cmocka_unit_test(test_alltoall_splits),
      cmocka_unit_test(test_stalled_rank_recorder),
      cmocka_unit_test(test_p2p_shape),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
