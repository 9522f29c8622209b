/* Gradients of programs whose ranks run different graphs, on local ranks
 * sharing one communicator, against the unsharded model differentiated by
 * the same pass: 2- and 4-stage pipelines joined by ColossalAI's
 * send_forward / recv_forward (the gradient comes back by the mirrored Recv
 * / Send), and MoE-style uneven all-to-alls on 2 and 4 ranks
 * (megatron.all_to_all with each rank's split sizes, empty chunks
 * included; tokens go to the rank of their expert and come back). f32;
 * tolerance 1e-4 absolute + 1e-3 relative. */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "fd_check.h"

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

/* ---- pipeline ------------------------------------------------------------
 * y = tanh(...tanh(x w0) w1 ...) w_{n-1}: stage i computes its product (and
 * tanh but the last), receiving from stage i-1 and sending to stage i+1 by
 * ColossalAI's recv_forward / send_forward; the gradients come back by the
 * mirrored Send / Recv. */

/* by_peer: the stages talk through plain Send / Recv naming their peer's
 * index on pp (ccg_send_peer, ccg_recv_peer) instead of the mapping. */
static void pipeline(int n, bool by_peer) {
  enum { MAXS = 4 };
  assert_true(n >= 2 && n <= MAXS);
  float x[16], w[MAXS][16];
  xt_fill(x, 16, 1);
  char wn[MAXS][16], gn[MAXS][32];
  const char *names[MAXS + 1] = {"x"};
  for (int i = 0; i < n; i++) {
    xt_fill(w[i], 16, (uint32_t)(2 + i));
    snprintf(wn[i], sizeof wn[i], "w%d", i);
    snprintf(gn[i], sizeof gn[i], "grad/w%d", i);
    names[i + 1] = wn[i];
  }
  /* unsharded */
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id h = input(g, "x", 4, 4);
  for (int i = 0; i < n; i++) {
    assert_ok(g, ccg_matmul(g, h, input(g, wn[i], 4, 4), &h));
    if (i < n - 1)
      assert_ok(g, ccg_tanh(g, h, &h));
  }
  fd_add_loss(g, h, CCG_DTYPE_F32, 9, names, (size_t)n + 1);
  float want[MAXS + 1][16], got[MAXS + 1][16];
  ccg_exec_tensor in[MAXS + 1], out[MAXS + 1];
  in[0] = XT_F32("x", x, 4, 4);
  out[0] = xt_out("grad/x", want[0], 64);
  for (int i = 0; i < n; i++) {
    in[i + 1] = XT_F32(wn[i], w[i], 4, 4);
    out[i + 1] = xt_out(gn[i], want[i + 1], 64);
  }
  assert_ok(g, xt_run1(g, in, (size_t)n + 1, out, (size_t)n + 1));
  ccg_graph_free(g);

  char mesh[16], spec[96];
  snprintf(mesh, sizeof mesh, "pp=%d", n);
  ccg_graph *st[MAXS];
  rank_job jobs[MAXS];
  memset(jobs, 0, sizeof jobs);
  for (int i = 0; i < n; i++) {
    ccg_graph *s = st[i] = ccg_test_graph(mesh);
    size_t k = 1;
    if (i == 0) {
      h = input(s, "x", 4, 4);
    } else if (by_peer) {
      ccg_shape hs = CCG_SHAPE(4, 4);
      assert_ok(s, ccg_recv_peer(s, "pp", i - 1, 7, CCG_DTYPE_F32, &hs, &h));
    } else {
      snprintf(spec, sizeof spec,
               "{\"stage\":%d,\"num_stages\":%d,\"input_tensor_shape\":[4,4]}",
               i, n);
      assert_ok(s, ccg_mapping_apply(s, "colossal.recv_forward", spec, NULL, 0,
                                     &h, &k));
    }
    assert_ok(s, ccg_matmul(s, h, input(s, wn[i], 4, 4), &h));
    if (i < n - 1) {
      ccg_value_id none[1];
      assert_ok(s, ccg_tanh(s, h, &h));
      snprintf(spec, sizeof spec, "{\"stage\":%d,\"num_stages\":%d}", i, n);
      k = 1;
      ccg_node_id sn;
      if (by_peer)
        assert_ok(s, ccg_send_peer(s, h, "pp", i + 1, 7, &sn));
      else
        assert_ok(s, ccg_mapping_apply(s, "colossal.send_forward", spec, &h, 1,
                                       none, &k));
      ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
      o.wrt = i == 0 ? names : names + i + 1;
      o.n_wrt = i == 0 ? 2 : 1;
      assert_ok(s, ccg_backward(s, &o));
    } else {
      fd_add_loss(s, h, CCG_DTYPE_F32, 9, names + i + 1, 1);
    }
    jobs[i].g = s;
    size_t ni = 0;
    if (i == 0) {
      jobs[i].in[ni++] = in[0];
      jobs[i].out[jobs[i].n_out++] = xt_out("grad/x", got[0], 64);
    }
    jobs[i].in[ni++] = in[i + 1];
    jobs[i].n_in = ni;
    jobs[i].out[jobs[i].n_out++] = xt_out(gn[i], got[i + 1], 64);
  }
  /* the stages' communication matches before anything runs */
  ccg_verify_report rep;
  assert_int_equal(ccg_verify_program(st, (size_t)n, NULL, &rep),
                   CCG_STATUS_OK);
  run_ranks(jobs, n);
  for (int i = 0; i <= n; i++) {
    char what[96];
    snprintf(what, sizeof what, "%d stages: %s", n, i ? gn[i - 1] : "grad/x");
    xt_close(got[i], want[i], 16, 1e-4, 1e-3, what);
  }
  for (int i = 0; i < n; i++)
    ccg_graph_free(st[i]);
}

static void test_pipeline_two_stages(void **state) {
  (void)state;
  pipeline(2, false);
}

static void test_pipeline_four_stages(void **state) {
  (void)state;
  pipeline(4, false);
  pipeline(4, true);
}

/* ---- MoE-style uneven all-to-all --------------------------------------------
 * W ranks hold tokens[r] tokens each, sorted by expert; expert e lives on
 * rank e. Rank r sends in_splits[r][e] tokens to expert e, which scales
 * them by its weight row and applies tanh; the results return to their
 * ranks. Unsharded: the same with every token's expert row gathered. */

typedef struct moe_case {
  int W;
  int64_t tokens[4];
  int64_t in_splits[4][4]; /* [rank][expert] */
} moe_case;

static void moe(const moe_case *c) {
  enum { MAXW = 4, MAXTOK = 32 };
  int W = c->W;
  int64_t total = 0, expert_of[MAXTOK], out_splits[MAXW][MAXW];
  for (int r = 0; r < W; r++)
    for (int e = 0; e < W; e++) {
      out_splits[e][r] = c->in_splits[r][e];
      for (int64_t t = 0; t < c->in_splits[r][e]; t++)
        expert_of[total++] = e;
    }
  float x[MAXTOK * 4], E[MAXW * 4], R[MAXTOK * 4];
  xt_fill(x, (size_t)total * 4, 4), xt_fill(E, (size_t)W * 4, 5),
      xt_fill(R, (size_t)total * 4, 6);
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id idx, s, y;
  ccg_tensor it = {CCG_DTYPE_I64, 1, {total}, expert_of};
  assert_ok(g, ccg_constant(g, &it, &idx));
  assert_ok(g, ccg_gather(g, input(g, "E", W, 4), idx, 0, &s));
  assert_ok(g, ccg_mul(g, input(g, "x", total, 4), s, &y));
  assert_ok(g, ccg_tanh(g, y, &y));
  const char *all[2] = {"x", "E"};
  /* the loss sum(y * R), R fixed (as fd_add_loss would with its own seed) */
  ccg_tensor rt = {CCG_DTYPE_F32, 2, {total, 4}, R};
  ccg_value_id rv, loss;
  assert_ok(g, ccg_graph_add_initializer(g, "R", &rt, &rv));
  assert_ok(g, ccg_mul(g, y, rv, &loss));
  assert_ok(g, ccg_reduce_sum(g, loss, NULL, 0, false, &loss));
  ccg_backward_options bo = CCG_BACKWARD_OPTIONS_INIT;
  bo.loss = loss;
  bo.wrt = all;
  bo.n_wrt = 2;
  assert_ok(g, ccg_backward(g, &bo));
  float want_x[MAXTOK * 4], want_e[MAXW * 4];
  ccg_exec_tensor in[2] = {XT_F32("x", x, total, 4), XT_F32("E", E, W, 4)};
  ccg_exec_tensor out[2] = {
      xt_out("grad/x", want_x, (size_t)total * 4 * sizeof(float)),
      xt_out("grad/E", want_e, (size_t)W * 4 * sizeof(float))};
  assert_ok(g, xt_run1(g, in, 2, out, 2));
  ccg_graph_free(g);

  char mesh[16];
  snprintf(mesh, sizeof mesh, "tp=%d", W);
  ccg_graph *gr[MAXW];
  rank_job jobs[MAXW];
  memset(jobs, 0, sizeof jobs);
  float got_x[MAXW][MAXTOK * 4], got_e[MAXW][4];
  int64_t first = 0;
  for (int r = 0; r < W; r++) {
    ccg_graph *h = gr[r] = ccg_test_graph(mesh);
    ccg_value_id v, e = input(h, "E", 1, 4);
    assert_ok(h, ccg_megatron_all_to_all(h, input(h, "x", c->tokens[r], 4),
                                         "tp", out_splits[r], (size_t)W,
                                         c->in_splits[r], (size_t)W, &v));
    assert_ok(h, ccg_mul(h, v, e, &v));
    assert_ok(h, ccg_tanh(h, v, &v));
    assert_ok(h, ccg_megatron_all_to_all(h, v, "tp", c->in_splits[r], (size_t)W,
                                         out_splits[r], (size_t)W, &v));
    ccg_shape ys = *ccg_value_shape(h, v);
    assert_int_equal(ys.dims[0].size, c->tokens[r]);
    /* rank r's share of R: its own tokens' rows */
    ccg_tensor t = {CCG_DTYPE_F32, 2, {c->tokens[r], 4}, R + first * 4};
    assert_ok(h, ccg_graph_add_initializer(h, "R", &t, &rv));
    assert_ok(h, ccg_mul(h, v, rv, &loss));
    assert_ok(h, ccg_reduce_sum(h, loss, NULL, 0, false, &loss));
    ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
    o.loss = loss;
    o.wrt = all;
    o.n_wrt = 2;
    assert_ok(h, ccg_backward(h, &o));
    jobs[r].g = h;
    jobs[r].in[0] = XT_F32("x", x + first * 4, c->tokens[r], 4);
    jobs[r].in[1] = XT_F32("E", E + 4 * r, 1, 4);
    jobs[r].n_in = 2;
    jobs[r].out[0] = xt_out("grad/x", got_x[r], sizeof got_x[r]);
    jobs[r].out[1] = xt_out("grad/E", got_e[r], sizeof got_e[r]);
    jobs[r].n_out = 2;
    first += c->tokens[r];
  }
  run_ranks(jobs, W);
  first = 0;
  for (int r = 0; r < W; r++) {
    char what[48];
    snprintf(what, sizeof what, "W=%d rank %d grad/x", W, r);
    xt_close(got_x[r], want_x + first * 4, (size_t)c->tokens[r] * 4, 1e-4, 1e-3,
             what);
    snprintf(what, sizeof what, "W=%d rank %d grad/E", W, r);
    xt_close(got_e[r], want_e + 4 * r, 4, 1e-4, 1e-3, what);
    first += c->tokens[r];
    ccg_graph_free(gr[r]);
  }
}

static void test_moe_uneven_all_to_all(void **state) {
  (void)state;
  const moe_case two = {2, {3, 5}, {{1, 2}, {3, 2}}};
  moe(&two);
}

/* Four ranks, uneven everywhere, with empty chunks (rank 2 sends nothing
 * to expert 0, rank 3 nothing to experts 1 and 2). */
static void test_moe_four_ranks(void **state) {
  (void)state;
  const moe_case four = {
      4,
      {3, 5, 2, 4},
      {{1, 1, 0, 1}, {2, 1, 1, 1}, {0, 1, 1, 0}, {3, 0, 0, 1}}};
  moe(&four);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pipeline_two_stages),
      cmocka_unit_test(test_pipeline_four_stages),
      cmocka_unit_test(test_moe_uneven_all_to_all),
      cmocka_unit_test(test_moe_four_ranks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
