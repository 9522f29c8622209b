/* Gradients of programs whose ranks run different graphs, on local ranks
 * sharing one communicator, against the unsharded model differentiated by
 * the same pass: a 2-stage pipeline joined by ColossalAI's send_forward /
 * recv_forward (the gradient comes back by the mirrored Recv / Send), and a
 * MoE-style uneven all-to-all (megatron.all_to_all with each rank's split
 * sizes; tokens go to the rank of their expert and come back). f32;
 * tolerance 1e-4 absolute + 1e-3 relative. */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "autodiff_test_util.h"

#define MAXT 3

typedef struct rank_job {
  ccg_graph *g;
  int rank;
  ccg_comm *comm;
  ccg_exec_tensor in[MAXT], out[MAXT];
  size_t n_in, n_out;
  ccg_status st;
  char err[512];
} rank_job;

static void *run_rank(void *p) {
  rank_job *j = p;
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.rank = j->rank;
  o.comm = j->comm;
  o.input_shapes = j->in;
  o.n_input_shapes = j->n_in;
  o.deadline_s = 30.0;
  ccg_exec *x = NULL;
  j->st = ccg_exec_create(j->g, &o, &x);
  if (j->st != CCG_STATUS_OK) {
    snprintf(j->err, sizeof j->err, "%s", ccg_last_error(j->g));
    return NULL;
  }
  j->st = ccg_exec_run(x, j->in, j->n_in, j->out, j->n_out);
  if (j->st != CCG_STATUS_OK)
    snprintf(j->err, sizeof j->err, "%s", ccg_last_error(x));
  ccg_exec_free(x);
  return NULL;
}

static void run_ranks(rank_job *jobs, int n) {
  ccg_comm *comm = NULL;
  assert_int_equal(ccg_comm_local_new(n, &comm), CCG_STATUS_OK);
  pthread_t t[4];
  for (int r = 0; r < n; r++) {
    jobs[r].rank = r;
    jobs[r].comm = comm;
    assert_int_equal(pthread_create(&t[r], NULL, run_rank, &jobs[r]), 0);
  }
  for (int r = 0; r < n; r++)
    pthread_join(t[r], NULL);
  ccg_comm_free(comm);
  for (int r = 0; r < n; r++)
    if (jobs[r].st != CCG_STATUS_OK)
      fail_msg("rank %d: %s", r, jobs[r].err);
}

static ccg_value_id input(ccg_graph *g, const char *name, int64_t d0,
                          int64_t d1) {
  ccg_shape s = CCG_SHAPE(d0, d1);
  ccg_value_id v;
  assert_ok(g, ccg_graph_add_input(g, name, CCG_DTYPE_F32, &s, &v));
  return v;
}

/* ---- 2-stage pipeline ------------------------------------------------------
 */

static void test_pipeline_two_stages(void **state) {
  (void)state;
  float x[16], w1[16], w2[16], R[16];
  xt_fill(x, 16, 1), xt_fill(w1, 16, 2), xt_fill(w2, 16, 3), xt_fill(R, 16, 9);
  /* unsharded: y = tanh(x w1) w2 */
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id h, y;
  assert_ok(g, ccg_matmul(g, input(g, "x", 4, 4), input(g, "w1", 4, 4), &h));
  assert_ok(g, ccg_tanh(g, h, &h));
  assert_ok(g, ccg_matmul(g, h, input(g, "w2", 4, 4), &y));
  const char *all[3] = {"x", "w1", "w2"};
  ad_add_loss(g, y, 9, all, 3);
  float want[3][16], got[3][16];
  ccg_exec_tensor in[3] = {XT_F32("x", x, 4, 4), XT_F32("w1", w1, 4, 4),
                           XT_F32("w2", w2, 4, 4)};
  ccg_exec_tensor out[3] = {xt_out("grad/x", want[0], 64),
                            xt_out("grad/w1", want[1], 64),
                            xt_out("grad/w2", want[2], 64)};
  assert_ok(g, xt_run1(g, in, 3, out, 3));
  ccg_graph_free(g);

  /* stage 0: h = tanh(x w1), sent forward; its gradient comes back */
  ccg_graph *s0 = ccg_test_graph("pp=2"), *s1 = ccg_test_graph("pp=2");
  assert_ok(s0,
            ccg_matmul(s0, input(s0, "x", 4, 4), input(s0, "w1", 4, 4), &h));
  assert_ok(s0, ccg_tanh(s0, h, &h));
  size_t n = 1;
  ccg_value_id none[1];
  n = 1;
  assert_ok(s0, ccg_mapping_apply(s0, "colossal.send_forward", "{\"stage\":0}",
                                  &h, 1, none, &n));
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  o.wrt = all;
  o.n_wrt = 2;
  assert_ok(s0, ccg_backward(s0, &o));
  /* stage 1: y = recv w2 */
  n = 1;
  assert_ok(s1, ccg_mapping_apply(s1, "colossal.recv_forward",
                                  "{\"stage\":1,\"input_tensor_shape\":[4,4]}",
                                  NULL, 0, &h, &n));
  assert_ok(s1, ccg_matmul(s1, h, input(s1, "w2", 4, 4), &y));
  ad_add_loss(s1, y, 9, all + 2, 1);

  rank_job jobs[2];
  memset(jobs, 0, sizeof jobs);
  jobs[0].g = s0;
  jobs[0].in[0] = in[0], jobs[0].in[1] = in[1], jobs[0].n_in = 2;
  jobs[0].out[0] = xt_out("grad/x", got[0], 64);
  jobs[0].out[1] = xt_out("grad/w1", got[1], 64);
  jobs[0].n_out = 2;
  jobs[1].g = s1;
  jobs[1].in[0] = in[2], jobs[1].n_in = 1;
  jobs[1].out[0] = xt_out("grad/w2", got[2], 64);
  jobs[1].n_out = 1;
  run_ranks(jobs, 2);
  xt_close(got[0], want[0], 16, 1e-4, 1e-3, "stage 0 grad/x");
  xt_close(got[1], want[1], 16, 1e-4, 1e-3, "stage 0 grad/w1");
  xt_close(got[2], want[2], 16, 1e-4, 1e-3, "stage 1 grad/w2");
  ccg_graph_free(s0);
  ccg_graph_free(s1);
}

/* ---- MoE-style uneven all-to-all --------------------------------------------
 * Two ranks hold 3 and 5 tokens; expert e lives on rank e. Rank 0 routes
 * token 0 to expert 0 and tokens 1-2 to expert 1, rank 1 tokens 0-2 to
 * expert 0 and 3-4 to expert 1. An expert scales its tokens by its weight
 * row and applies tanh; the results return to their ranks. Unsharded: the
 * same with every token's expert row gathered. */

static void test_moe_uneven_all_to_all(void **state) {
  (void)state;
  const int64_t tokens[2] = {3, 5}, in_splits[2][2] = {{1, 2}, {3, 2}},
                out_splits[2][2] = {{1, 3}, {2, 2}};
  const int64_t expert_of[8] = {0, 1, 1, 0, 0, 0, 1, 1};
  float x[32], E[8], R[32];
  xt_fill(x, 32, 4), xt_fill(E, 8, 5), xt_fill(R, 32, 6);
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id idx, s, y;
  ccg_tensor it = {CCG_DTYPE_I64, 1, {8}, expert_of};
  assert_ok(g, ccg_constant(g, &it, &idx));
  assert_ok(g, ccg_gather(g, input(g, "E", 2, 4), idx, 0, &s));
  assert_ok(g, ccg_mul(g, input(g, "x", 8, 4), s, &y));
  assert_ok(g, ccg_tanh(g, y, &y));
  const char *all[2] = {"x", "E"};
  ad_add_loss(g, y, 6, all, 2);
  float want_x[32], want_e[8];
  ccg_exec_tensor in[2] = {XT_F32("x", x, 8, 4), XT_F32("E", E, 2, 4)};
  ccg_exec_tensor out[2] = {xt_out("grad/x", want_x, sizeof want_x),
                            xt_out("grad/E", want_e, sizeof want_e)};
  assert_ok(g, xt_run1(g, in, 2, out, 2));
  ccg_graph_free(g);

  ccg_graph *gr[2];
  rank_job jobs[2];
  memset(jobs, 0, sizeof jobs);
  float got_x[2][32], got_e[2][4];
  for (int r = 0; r < 2; r++) {
    ccg_graph *h = gr[r] = ccg_test_graph("tp=2");
    ccg_value_id v, e = input(h, "E", 1, 4);
    assert_ok(h,
              ccg_megatron_all_to_all(h, input(h, "x", tokens[r], 4), "tp",
                                      out_splits[r], 2, in_splits[r], 2, &v));
    assert_ok(h, ccg_mul(h, v, e, &v));
    assert_ok(h, ccg_tanh(h, v, &v));
    assert_ok(h, ccg_megatron_all_to_all(h, v, "tp", in_splits[r], 2,
                                         out_splits[r], 2, &v));
    /* rank r's share of R: its own tokens' rows */
    ccg_shape ys = *ccg_value_shape(h, v);
    assert_int_equal(ys.dims[0].size, tokens[r]);
    float *rr = R + (r ? tokens[0] * 4 : 0);
    ccg_tensor t = {CCG_DTYPE_F32, 2, {tokens[r], 4}, rr};
    ccg_value_id rv, loss;
    assert_ok(h, ccg_graph_add_initializer(h, "R", &t, &rv));
    assert_ok(h, ccg_mul(h, v, rv, &loss));
    assert_ok(h, ccg_reduce_sum(h, loss, NULL, 0, false, &loss));
    ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
    o.loss = loss;
    o.wrt = all;
    o.n_wrt = 2;
    assert_ok(h, ccg_backward(h, &o));
    jobs[r].g = h;
    jobs[r].in[0] = XT_F32("x", x + (r ? tokens[0] * 4 : 0), tokens[r], 4);
    jobs[r].in[1] = XT_F32("E", E + 4 * r, 1, 4);
    jobs[r].n_in = 2;
    jobs[r].out[0] = xt_out("grad/x", got_x[r], sizeof got_x[r]);
    jobs[r].out[1] = xt_out("grad/E", got_e[r], sizeof got_e[r]);
    jobs[r].n_out = 2;
  }
  run_ranks(jobs, 2);
  xt_close(got_x[0], want_x, 12, 1e-4, 1e-3, "rank 0 grad/x");
  xt_close(got_x[1], want_x + 12, 20, 1e-4, 1e-3, "rank 1 grad/x");
  xt_close(got_e[0], want_e, 4, 1e-4, 1e-3, "rank 0 grad/E");
  xt_close(got_e[1], want_e + 4, 4, 1e-4, 1e-3, "rank 1 grad/E");
  ccg_graph_free(gr[0]);
  ccg_graph_free(gr[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pipeline_two_stages),
      cmocka_unit_test(test_moe_uneven_all_to_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
