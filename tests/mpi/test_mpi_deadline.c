/* Deadlines and failures on the mpi communicator (under mpirun): a rank
 * that stalls past the deadline before a collective makes the others
 * return TIMEOUT or COMM within the deadline plus one second, and is told
 * at once when it arrives; a rank whose kernel fails makes the others
 * return COMM naming their collective and node and the failed rank, long
 * before the deadline; a Recv whose Send never comes and a Send nobody
 * receives time out naming the peer. After each, a fresh communicator runs
 * cleanly. The program initializes MPI itself at MPI_THREAD_SERIALIZED, so
 * the communicator serializes its MPI calls behind its lock. */
#include <time.h>

#include "mpi/mpi_test_util.h"

#define DEADLINE 0.5

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_s(double s) {
  struct timespec d = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&d, NULL);
}

/* table[idx] on every rank, all-reduced over tp. */
static ccg_graph *gather_all_reduce(int world, const char **node) {
  char mesh[32];
  snprintf(mesh, sizeof mesh, "tp=%d", world);
  ccg_graph *g = ccg_test_graph(mesh);
  ccg_value_id t = ccg_test_input(g, "table", CCG_DTYPE_F32, "[4]");
  ccg_value_id i = ccg_test_input(g, "idx", CCG_DTYPE_I64, "[2]"), v, y;
  assert_ok(g, ccg_gather(g, t, i, 0, &v));
  assert_ok(g, ccg_all_reduce(g, v, "tp", CCG_REDUCE_SUM, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  *node = ccg_node_name(g, ccg_value_producer(g, y));
  return g;
}

/* Runs the graph on this rank with idx, after sleeping `delay`. */
static ccg_status run(ccg_graph *g, ccg_comm *c, int64_t i0, double deadline,
                      double delay, float *out, char *msg, size_t size) {
  float table[4] = {1, 2, 3, 4};
  int64_t idx[2] = {i0, 1};
  ccg_exec_tensor in[2] = {
      XT_F32("table", table, 4),
      xt_in("idx", CCG_DTYPE_I64, idx, 1, (const int64_t[]){2})};
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.rank = ccg_comm_rank(c);
  o.comm = c;
  o.deadline_s = deadline;
  ccg_exec *x = NULL;
  ccg_status st = ccg_exec_create(g, &o, &x);
  if (st != CCG_STATUS_OK) {
    snprintf(msg, size, "%s", ccg_last_error(g));
    return st;
  }
  if (delay > 0)
    sleep_s(delay);
  ccg_exec_tensor t = xt_out(
      ccg_graph_num_outputs(g) ? ccg_value_name(g, ccg_graph_output(g, 0)) : "",
      out, 2 * sizeof(float));
  st = ccg_exec_run(x, in, 2, &t, 1);
  snprintf(msg, size, "%s", ccg_last_error(x));
  ccg_exec_free(x);
  return st;
}

static void expect_msg(const char *msg, const char *a, const char *b) {
  if ((a && !strstr(msg, a)) || (b && !strstr(msg, b)))
    fail_msg("message \"%s\" lacks \"%s\" or \"%s\"", msg, a ? a : "",
             b ? b : "");
}

/* A clean run on a fresh communicator: every rank's idx {r % 4, 1}. */
static void clean_run(ccg_graph *g, int world) {
  ccg_comm *c = NULL;
  assert_ok(NULL, ccg_comm_mpi_new(&c));
  float out[2];
  char msg[1024];
  ccg_status st = run(g, c, mt_rank % 4, 30, 0, out, msg, sizeof msg);
  if (st != CCG_STATUS_OK)
    fail_msg("clean run: %s", msg);
  float want0 = 0;
  for (int r = 0; r < world; r++)
    want0 += (float)(r % 4 + 1);
  assert_true(out[0] == want0 && out[1] == 2.0f * (float)world);
  ccg_comm_free(c);
}

/* The last rank sleeps past the deadline before its run. */
static void stalled_rank(ccg_graph *g, const char *node, int world) {
  ccg_comm *c = NULL;
  assert_ok(NULL, ccg_comm_mpi_new(&c));
  bool late = mt_rank == world - 1;
  float out[2];
  char msg[1024];
  double t0 = now_s();
  ccg_status st =
      run(g, c, 0, DEADLINE, late ? DEADLINE + 0.4 : 0, out, msg, sizeof msg);
  double took = now_s() - t0 - (late ? DEADLINE + 0.4 : 0);
  if (late) {
    if (st != CCG_STATUS_COMM)
      fail_msg("stalled rank: %s (%s), expected COMM", ccg_status_name(st),
               msg);
    expect_msg(msg, "AllReduce", node);
    expect_msg(msg, "failed", "deadline");
  } else {
    if (st != CCG_STATUS_TIMEOUT && st != CCG_STATUS_COMM)
      fail_msg("waiting rank: %s (%s), expected TIMEOUT or COMM",
               ccg_status_name(st), msg);
    expect_msg(msg, "AllReduce", node);
    if (st == CCG_STATUS_TIMEOUT)
      expect_msg(msg, "within the deadline", NULL);
  }
  if (took > DEADLINE + 1.0)
    fail_msg("took %.2f s (deadline %.1f s): %s", took, DEADLINE, msg);
  ccg_comm_free(c);
}

/* Rank 1's Gather fails on index 9: the others return COMM naming it. */
static void failed_kernel(ccg_graph *g, const char *node) {
  ccg_comm *c = NULL;
  assert_ok(NULL, ccg_comm_mpi_new(&c));
  float out[2];
  char msg[1024];
  double t0 = now_s();
  ccg_status st =
      run(g, c, mt_rank == 1 ? 9 : 0, 20.0, 0, out, msg, sizeof msg);
  double took = now_s() - t0;
  if (mt_rank == 1) {
    if (st != CCG_STATUS_INVALID_ARG)
      fail_msg("failing rank: %s (%s)", ccg_status_name(st), msg);
    expect_msg(msg, "Gather", "index 9");
  } else {
    if (st != CCG_STATUS_COMM)
      fail_msg("rank %d: %s (%s), expected COMM", mt_rank, ccg_status_name(st),
               msg);
    expect_msg(msg, "AllReduce", node);
    expect_msg(msg, "rank 1 failed", "index 9");
    /* told, not timed out: far below the 20 s deadline */
    if (took > 1.0 + 1.0)
      fail_msg("took %.2f s", took);
  }
  ccg_comm_free(c);
}

/* Rank 0 receives from rank 1 (or sends to it, `send`), which runs a
 * graph without the counterpart: rank 0 times out naming the op and rank
 * 1; rank 1 is done. */
static void missing_peer(int world, bool send) {
  char mesh[32];
  snprintf(mesh, sizeof mesh, "tp=%d", world);
  ccg_graph *g = ccg_test_graph(mesh);
  ccg_value_id x = ccg_test_input(g, "table", CCG_DTYPE_F32, "[4]"), y = x;
  ccg_node_id sn;
  if (mt_rank == 0 && send) {
    assert_ok(g, ccg_send(g, x, "tp", 1, 3, &sn));
  } else if (mt_rank == 0) {
    ccg_shape sh = CCG_SHAPE(4);
    assert_ok(g, ccg_recv(g, "tp", 1, 3, CCG_DTYPE_F32, &sh, &y));
  }
  ccg_value_id out;
  assert_ok(g, ccg_relu(g, y, &out));
  assert_ok(g, ccg_graph_add_output(g, out));
  ccg_comm *c = NULL;
  assert_ok(NULL, ccg_comm_mpi_new(&c));
  float table[4] = {1, 2, 3, 4}, res[4];
  ccg_exec_tensor in = XT_F32("table", table, 4);
  ccg_exec_tensor o = xt_out(ccg_value_name(g, out), res, sizeof res);
  ccg_exec_options opt = CCG_EXEC_OPTIONS_INIT;
  opt.rank = mt_rank;
  opt.comm = c;
  opt.deadline_s = DEADLINE;
  ccg_exec *x0 = NULL;
  assert_ok(g, ccg_exec_create(g, &opt, &x0));
  double t0 = now_s();
  ccg_status st = ccg_exec_run(x0, &in, 1, &o, 1);
  double took = now_s() - t0;
  const char *msg = ccg_last_error(x0);
  if (mt_rank == 0) {
    if (st != CCG_STATUS_TIMEOUT)
      fail_msg("%s: %s (%s), expected TIMEOUT", send ? "Send" : "Recv",
               ccg_status_name(st), msg);
    expect_msg(msg, send ? "Send" : "Recv", "rank 1 did not complete");
    if (took < DEADLINE || took > DEADLINE + 1.0)
      fail_msg("took %.2f s (deadline %.1f s)", took, DEADLINE);
  } else if (st != CCG_STATUS_OK) {
    fail_msg("rank %d: %s (%s)", mt_rank, ccg_status_name(st), msg);
  }
  ccg_exec_free(x0);
  ccg_comm_free(c);
  ccg_graph_free(g);
  /* rank 0's notice may arrive after the others are done: drop it with
   * that communicator before the next step */
#ifdef CCG_HAVE_MPI
  MPI_Barrier(MPI_COMM_WORLD);
#endif
}

int main(void) {
#ifdef CCG_HAVE_MPI
  int provided = 0;
  MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
#endif
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
  const char *node;
  ccg_graph *g = gather_all_reduce(world, &node);
  clean_run(g, world);
  stalled_rank(g, node, world);
  clean_run(g, world);
  failed_kernel(g, node);
  clean_run(g, world);
  missing_peer(world, false);
  clean_run(g, world);
  missing_peer(world, true);
  clean_run(g, world);
  ccg_graph_free(g);
  if (mt_rank == 0)
    printf("mpi deadlines: stalled and failed ranks reported on %d ranks\n",
           world);
#ifdef CCG_HAVE_MPI
  MPI_Finalize();
#endif
  return 0;
}
