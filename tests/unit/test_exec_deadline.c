/* Deadlines on the local communicator: a rank that fails, skips a
 * collective, arrives late, calls another collective or never sends makes
 * the others return COMM or TIMEOUT within the deadline plus one second,
 * naming the collective and the node; every thread is joined. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <time.h>

#include "test_util.h"
#include "exec_test_util.h"

#define DEADLINE 0.5

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct job {
  ccg_graph *g;
  ccg_comm *comm;
  int rank;
  double delay_s; /* sleep before running: a stalled rank */
  ccg_status st;
  char msg[1024];
  double elapsed;
} job;

static void *job_main(void *arg) {
  job *j = arg;
  double t0 = now_s();
  if (j->delay_s > 0) {
    struct timespec d = {
        (time_t)j->delay_s,
        (long)((j->delay_s - (double)(time_t)j->delay_s) * 1e9)};
    nanosleep(&d, NULL);
  }
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.rank = j->rank;
  o.comm = j->comm;
  o.deadline_s = DEADLINE;
  ccg_exec *x = NULL;
  j->st = ccg_exec_create(j->g, &o, &x);
  if (j->st != CCG_STATUS_OK) {
    snprintf(j->msg, sizeof j->msg, "%s", ccg_last_error(j->g));
    return NULL;
  }
  float in[4] = {1, 2, 3, 4};
  ccg_exec_tensor t = XT_F32("x", in, 4);
  j->st = ccg_exec_run(x, &t, 1, NULL, 0);
  snprintf(j->msg, sizeof j->msg, "%s", ccg_last_error(x));
  ccg_exec_free(x);
  j->elapsed = now_s() - t0;
  return NULL;
}

/* Runs one graph per rank on a fresh communicator, each in its thread. */
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

static ccg_graph *with_all_reduce(const char **node) {
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]"), y;
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  *node = ccg_node_name(g, ccg_value_producer(g, y));
  return g;
}

static ccg_graph *without_collective(void) {
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]"), y;
  assert_ok(g, ccg_relu(g, x, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  return g;
}

static void expect(const job *j, ccg_status want, const char *a,
                   const char *b) {
  if (j->st != want)
    fail_msg("rank %d: %s (%s), expected %s", j->rank, ccg_status_name(j->st),
             j->msg, ccg_status_name(want));
  if ((a && !strstr(j->msg, a)) || (b && !strstr(j->msg, b)))
    fail_msg("rank %d: message \"%s\" lacks \"%s\" or \"%s\"", j->rank, j->msg,
             a ? a : "", b ? b : "");
  if (j->elapsed > DEADLINE + 1.0)
    fail_msg("rank %d took %.2f s (deadline %.1f s)", j->rank, j->elapsed,
             DEADLINE);
}

/* Rank 1 never calls the all-reduce: rank 0 times out naming it. */
static void test_skipped_collective_times_out(void **state) {
  (void)state;
  const char *node;
  job jobs[2] = {{.g = with_all_reduce(&node)}, {.g = without_collective()}};
  run_jobs(jobs, 2);
  expect(&jobs[0], CCG_STATUS_TIMEOUT, "AllReduce", node);
  assert_non_null(strstr(jobs[0].msg, "rank 1"));
  assert_true(jobs[0].elapsed >= DEADLINE);
  expect(&jobs[1], CCG_STATUS_OK, NULL, NULL);
  ccg_graph_free(jobs[0].g);
  ccg_graph_free(jobs[1].g);
}

/* Rank 1 arrives after the deadline: rank 0 has timed out, and rank 1 is
 * told so at once instead of waiting again. */
static void test_late_rank(void **state) {
  (void)state;
  const char *node, *node1;
  /* one graph per thread: compiling reads and checks the graph, which is
   * not thread-safe */
  ccg_graph *g = with_all_reduce(&node), *g1 = with_all_reduce(&node1);
  job jobs[2] = {{.g = g}, {.g = g1, .delay_s = DEADLINE + 0.3}};
  run_jobs(jobs, 2);
  expect(&jobs[0], CCG_STATUS_TIMEOUT, "AllReduce", node);
  expect(&jobs[1], CCG_STATUS_COMM, "AllReduce", "rank 0 failed");
  ccg_graph_free(g);
  ccg_graph_free(g1);
}

/* Different collectives meet: both sides refuse, naming both nodes. */
static void test_mismatched_collectives(void **state) {
  (void)state;
  const char *node;
  ccg_graph *g0 = with_all_reduce(&node);
  ccg_graph *g1 = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g1, "x", CCG_DTYPE_F32, "[4]"), y;
  assert_ok(g1, ccg_all_gather(g1, x, "tp", 0, NULL, &y));
  job jobs[2] = {{.g = g0}, {.g = g1}};
  run_jobs(jobs, 2);
  for (int r = 0; r < 2; r++) {
    expect(&jobs[r], CCG_STATUS_COMM, "AllReduce", "AllGather");
    assert_true(jobs[r].elapsed < DEADLINE);
  }
  ccg_graph_free(g0);
  ccg_graph_free(g1);
}

/* A Recv whose Send never comes. */
static void test_missing_send(void **state) {
  (void)state;
  ccg_graph *g1 = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g1, "x", CCG_DTYPE_F32, "[4]"), r, s;
  ccg_shape sh = CCG_SHAPE(4);
  assert_ok(g1, ccg_recv(g1, "tp", 1, 3, CCG_DTYPE_F32, &sh, &r));
  assert_ok(g1, ccg_add(g1, x, r, &s));
  job jobs[2] = {{.g = without_collective()}, {.g = g1}};
  run_jobs(jobs, 2);
  expect(&jobs[0], CCG_STATUS_OK, NULL, NULL);
  expect(&jobs[1], CCG_STATUS_TIMEOUT, "Recv",
         ccg_node_name(g1, ccg_value_producer(g1, r)));
  ccg_graph_free(jobs[0].g);
  ccg_graph_free(g1);
}

/* A Send nobody receives: the run's final flush times out. */
static void test_unreceived_send(void **state) {
  (void)state;
  ccg_graph *g0 = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g0, "x", CCG_DTYPE_F32, "[4]");
  ccg_node_id sn;
  assert_ok(g0, ccg_send(g0, x, "tp", 1, 0, &sn));
  job jobs[2] = {{.g = g0}, {.g = without_collective()}};
  run_jobs(jobs, 2);
  expect(&jobs[0], CCG_STATUS_TIMEOUT, "Send", "rank 1");
  ccg_graph_free(g0);
  ccg_graph_free(jobs[1].g);
}

/* ccg_exec_run_local: rank 2's Gather fails on its own data; the other
 * three return COMM within the deadline naming the all-reduce. */
static void test_run_local_failed_rank(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=4");
  ccg_value_id t = ccg_test_input(g, "table", CCG_DTYPE_F32, "[4]");
  ccg_value_id i = ccg_test_input(g, "idx", CCG_DTYPE_I64, "[2]"), v, y;
  assert_ok(g, ccg_gather(g, t, i, 0, &v));
  assert_ok(g, ccg_all_reduce(g, v, "tp", CCG_REDUCE_SUM, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  const char *node = ccg_node_name(g, ccg_value_producer(g, y));
  float table[4] = {1, 2, 3, 4}, out[4][2];
  int64_t idx[4][2] = {{0, 1}, {1, 2}, {9, 0}, {3, 3}};
  ccg_exec_tensor in[4][2], tout[4];
  const ccg_exec_tensor *pin[4];
  ccg_exec_tensor *pout[4];
  for (int r = 0; r < 4; r++) {
    in[r][0] = XT_F32("table", table, 4);
    in[r][1] = xt_in("idx", CCG_DTYPE_I64, idx[r], 1, (const int64_t[]){2});
    tout[r] = xt_out(ccg_value_name(g, y), out[r], sizeof out[r]);
    pin[r] = in[r];
    pout[r] = &tout[r];
  }
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.deadline_s = DEADLINE;
  ccg_status rs[4];
  double t0 = now_s();
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_exec_run_local(g, 4, &o, pin, 2, pout, 1, rs), "rank 2",
               "(Gather)", "index 9", node);
  assert_true(now_s() - t0 < DEADLINE + 1.0);
  for (int r = 0; r < 4; r++)
    assert_int_equal(rs[r], r == 2 ? CCG_STATUS_INVALID_ARG : CCG_STATUS_COMM);
  /* the same graph runs once every rank's data is good */
  idx[2][0] = 2;
  assert_ok(g, ccg_exec_run_local(g, 4, &o, pin, 2, pout, 1, rs));
  for (int r = 0; r < 4; r++) { /* table[idx] summed over the ranks */
    assert_true(out[r][0] == 1 + 2 + 3 + 4);
    assert_true(out[r][1] == 2 + 3 + 1 + 4);
  }
  ccg_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_skipped_collective_times_out),
      cmocka_unit_test(test_late_rank),
      cmocka_unit_test(test_mismatched_collectives),
      cmocka_unit_test(test_missing_send),
      cmocka_unit_test(test_unreceived_send),
      cmocka_unit_test(test_run_local_failed_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
