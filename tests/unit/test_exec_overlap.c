/* Overlap of communication and compute (ccg_exec_options.overlap): the
 * same bits with it on and off on 2 and 4 ranks and on dp=2,tp=2, for
 * collectives between compute, mapping forwards and backwards and
 * point-to-point; a collective's buffers are not reused while it may still
 * run; a compute failure while collectives are in flight ends every rank. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <pthread.h>
#include <time.h>

#include "test_util.h"
#include "exec_test_util.h"
#include "exec_ranks.h"
#include "exec/internal.h"

/* Runs g with overlap off and on, 3 steps each, and compares every output
 * of every rank bit for bit. */
static void same_bits(ccg_graph *g, const char *what) {
  xr_result off, on;
  xr_run(g, 0, 3, NULL, &off);
  xr_run(g, 1, 3, NULL, &on);
  for (int r = 0; r < off.n; r++)
    for (size_t i = 0; i < off.R[r].n_out; i++)
      if (off.R[r].got_bytes[i] != on.R[r].got_bytes[i] ||
          memcmp(off.R[r].got[i], on.R[r].got[i], off.R[r].got_bytes[i]))
        fail_msg("%s: rank %d output %zu differs with overlap on", what, r, i);
  xr_free(&off);
  xr_free(&on);
}

/* Collectives between independent compute: an all-reduce of a MatMul while
 * a Tanh chain runs, an all-gather and a reduce-scatter of that chain on a
 * middle axis, an all-to-all, and a second all-reduce over `outer`. */
static ccg_graph *interleaved(const char *mesh, const char *outer) {
  ccg_graph *g = ccg_test_graph(mesh);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8,12]");
  ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F32, "[12,12]");
  ccg_value_id h, a, e, gth, rs, m, o, t, q;
  assert_ok(g, ccg_matmul(g, x, w, &h));
  assert_ok(g, ccg_all_reduce(g, h, "tp", CCG_REDUCE_SUM, &a));
  assert_ok(g, ccg_tanh(g, x, &e));
  assert_ok(g, ccg_mul(g, e, x, &e));
  assert_ok(g, ccg_add(g, e, x, &e));
  assert_ok(g, ccg_all_gather(g, e, "tp", 1, NULL, &gth));
  assert_ok(g, ccg_exp(g, gth, &gth));
  assert_ok(g, ccg_reduce_scatter(g, gth, "tp", 1, CCG_REDUCE_SUM, NULL, &rs));
  assert_ok(g, ccg_all_to_all(g, e, "tp", 0, 1, NULL, NULL, &t));
  assert_ok(g, ccg_add(g, a, rs, &m));
  assert_ok(g, ccg_all_reduce(g, m, outer, CCG_REDUCE_MAX, &o));
  assert_ok(g, ccg_relu(g, e, &q));
  assert_ok(g, ccg_graph_add_output(g, o));
  assert_ok(g, ccg_graph_add_output(g, q));
  assert_ok(g, ccg_graph_add_output(g, t));
  return g;
}

static void test_interleaved(void **state) {
  (void)state;
  const char *cases[][2] = {{"tp=2", "tp"},
                            {"tp=4", "tp"},
                            {"dp=2,tp=2", "dp"},
                            {"dp=2,tp=2", "dp,tp"}};
  for (size_t i = 0; i < 4; i++) {
    ccg_graph *g = interleaved(cases[i][0], cases[i][1]);
    same_bits(g, cases[i][0]);
    ccg_graph_free(g);
  }
}

/* Mapping forwards and backwards with compute between them. */
static ccg_graph *mappings(const char *mesh) {
  ccg_graph *g = ccg_test_graph(mesh);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4,8]");
  ccg_value_id w = ccg_test_input(g, "w", CCG_DTYPE_F32, "[8,8]");
  ccg_value_id y, h, z, u, dz, dx, out[4];
  size_t no = 4;
  assert_ok(
      g, ccg_mapping_apply(g, "megatron.gather_from_sequence_parallel_region",
                           NULL, &x, 1, out, &no));
  y = out[0];
  assert_ok(g, ccg_matmul(g, y, w, &h));
  assert_ok(g, ccg_gelu(g, h, "tanh", &h));
  no = 4;
  assert_ok(g, ccg_mapping_apply(
                   g, "megatron.reduce_scatter_to_sequence_parallel_region",
                   NULL, &h, 1, out, &no));
  z = out[0];
  no = 4;
  assert_ok(g, ccg_mapping_apply(g, "megatron.all_to_all_sp2hp", NULL, &z, 1,
                                 out, &no));
  u = out[0];
  assert_ok(g, ccg_mul(g, z, z, &dz));
  ccg_mapping_grad_args ga = CCG_MAPPING_GRAD_ARGS_INIT;
  ga.inputs = &h;
  ga.n_inputs = 1;
  ga.outputs = &z;
  ga.n_outputs = 1;
  ga.grad_outputs = &dz;
  assert_ok(g, ccg_mapping_apply_backward(
                   g, "megatron.reduce_scatter_to_sequence_parallel_region",
                   &ga, &dx));
  assert_ok(g, ccg_graph_add_output(g, u));
  assert_ok(g, ccg_graph_add_output(g, dx));
  return g;
}

static void test_mappings(void **state) {
  (void)state;
  const char *meshes[] = {"tp=2", "tp=4", "dp=2,tp=2"};
  for (size_t i = 0; i < 3; i++) {
    ccg_graph *g = mappings(meshes[i]);
    same_bits(g, meshes[i]);
    ccg_graph_free(g);
  }
}

/* Send/Recv and a ring permute along pp with compute between. */
static void test_point_to_point(void **state) {
  (void)state;
  const char *meshes[] = {"pp=2", "pp=4", "dp=2,pp=2"};
  for (size_t i = 0; i < 3; i++) {
    ccg_graph *g = ccg_test_graph(meshes[i]);
    ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[6]"), r, p, s;
    ccg_shape sh = CCG_SHAPE(6);
    assert_ok(g, ccg_send(g, x, "pp", 1, 0, NULL));
    assert_ok(g, ccg_sigmoid(g, x, &s));
    assert_ok(g, ccg_recv(g, "pp", -1, 0, CCG_DTYPE_F32, &sh, &r));
    assert_ok(g, ccg_collective_permute(g, s, "pp", 1, true, &p));
    assert_ok(g, ccg_add(g, r, p, &r));
    assert_ok(g, ccg_graph_add_output(g, r));
    same_bits(g, meshes[i]);
    ccg_graph_free(g);
  }
}

/* ---- the memory plan ---------------------------------------------------- */

/* Whether arena value v's bytes overlap those of w. */
static bool overlaps(const ccg__xval *v, const ccg__xval *w) {
  return v->nbytes && w->nbytes && v->offset < w->offset + w->nbytes &&
         w->offset < v->offset + v->nbytes;
}

/* Counts the arena values made while a collective may still run (after
 * its step, before the step that waits for it) that share bytes with one
 * of its buffers. */
static int reused_in_flight(const ccg_exec *x, bool *any_comm) {
  int bad = 0;
  for (size_t s = 0; s < x->n_steps; s++) {
    const ccg__xnode *n = &x->steps[s];
    if (!n->comm)
      continue;
    *any_comm = true;
    for (uint32_t i = 0; i < n->n_in + n->n_out; i++) {
      ccg_value_id id = i < n->n_in ? n->in[i] : n->out[i - n->n_in];
      if (id == CCG_NONE || x->vals[id].kind != CCG__V_ARENA)
        continue;
      for (size_t t = s + 1; t < (size_t)n->join; t++)
        for (uint32_t k = 0; k < x->steps[t].n_out; k++) {
          const ccg__xval *w = &x->vals[x->steps[t].out[k]];
          if (w->kind == CCG__V_ARENA && overlaps(&x->vals[id], w))
            bad++;
        }
    }
  }
  return bad;
}

/* y = AllReduce(Relu(x)); b = Neg(x) is made while the all-reduce runs;
 * out = y + b waits for it. Without overlap b takes the dead Relu's
 * buffer; with it, that buffer lives until `out`. */
static void test_plan_keeps_buffers(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[256]"), a, y, b, o;
  assert_ok(g, ccg_relu(g, x, &a));
  assert_ok(g, ccg_all_reduce(g, a, "tp", CCG_REDUCE_SUM, &y));
  assert_ok(g, ccg_neg(g, x, &b));
  assert_ok(g, ccg_exp(g, b, &b));
  assert_ok(g, ccg_add(g, y, b, &o));
  assert_ok(g, ccg_graph_add_output(g, o));
  ccg_comm *c;
  assert_ok(NULL, ccg_comm_local_new(2, &c));
  for (int ov = 0; ov < 2; ov++) {
    ccg_exec_options opt = CCG_EXEC_OPTIONS_INIT;
    opt.comm = c;
    opt.overlap = ov;
    ccg_exec *x0;
    assert_ok(g, ccg_exec_create(g, &opt, &x0));
    bool any = false;
    if (ov) {
      assert_int_equal(reused_in_flight(x0, &any), 0);
      assert_true(any);
    } else {
      /* without overlap the all-reduce's input is reused by the Neg made
       * after it: the case the plan must refuse under overlap */
      const ccg__xnode *ar = NULL;
      for (size_t s = 0; s < x0->n_steps; s++)
        if (x0->steps[s].op == CCG_OP_ALL_REDUCE)
          ar = &x0->steps[s];
      assert_non_null(ar);
      const ccg__xval *in = &x0->vals[ar->in[0]];
      bool reused = false;
      for (size_t s = 0; s < x0->n_steps; s++)
        if (&x0->steps[s] > ar && x0->steps[s].op == CCG_OP_NEG)
          reused = overlaps(in, &x0->vals[x0->steps[s].out[0]]);
      assert_true(reused);
    }
    ccg_exec_free(x0);
  }
  ccg_comm_free(c);
  /* and the results agree */
  same_bits(g, "plan");
  ccg_graph_free(g);
}

/* The plans of the interleaved and mapping graphs keep every in-flight
 * buffer too. */
static void test_plan_in_flight_all(void **state) {
  (void)state;
  ccg_graph *gs[2] = {interleaved("dp=2,tp=2", "dp"), mappings("tp=4")};
  for (int i = 0; i < 2; i++) {
    int n = (int)ccg_mesh_world_size(ccg_graph_mesh(gs[i]));
    ccg_comm *c;
    assert_ok(NULL, ccg_comm_local_new(n, &c));
    for (int r = 0; r < n; r++) {
      ccg_exec_options opt = CCG_EXEC_OPTIONS_INIT;
      opt.comm = c;
      opt.rank = r;
      opt.overlap = 1;
      ccg_exec *x;
      assert_ok(gs[i], ccg_exec_create(gs[i], &opt, &x));
      bool any = false;
      assert_int_equal(reused_in_flight(x, &any), 0);
      assert_true(any);
      ccg_exec_free(x);
    }
    ccg_comm_free(c);
    ccg_graph_free(gs[i]);
  }
}

/* ---- failures ----------------------------------------------------------- */

/* Rank 2's Gather fails on its own data after the first all-reduce was
 * posted; the others wait at the second and return COMM naming it, within
 * the deadline. */
static void test_compute_failure_in_flight(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=4");
  ccg_value_id t = ccg_test_input(g, "table", CCG_DTYPE_F32, "[4]");
  ccg_value_id i = ccg_test_input(g, "idx", CCG_DTYPE_I64, "[2]"), a, v, y, o;
  assert_ok(g, ccg_all_reduce(g, t, "tp", CCG_REDUCE_SUM, &a));
  assert_ok(g, ccg_gather(g, t, i, 0, &v));
  assert_ok(g, ccg_all_reduce(g, v, "tp", CCG_REDUCE_SUM, &y));
  assert_ok(g, ccg_add(g, a, a, &o));
  assert_ok(g, ccg_graph_add_output(g, o));
  assert_ok(g, ccg_graph_add_output(g, y));
  const char *node = ccg_node_name(g, ccg_value_producer(g, y));
  float table[4] = {1, 2, 3, 4}, out[4][4], out2[4][2];
  int64_t idx[4][2] = {{0, 1}, {1, 2}, {9, 0}, {3, 3}};
  ccg_exec_tensor in[4][2], tout[4][2];
  const ccg_exec_tensor *pin[4];
  ccg_exec_tensor *pout[4];
  for (int r = 0; r < 4; r++) {
    in[r][0] = XT_F32("table", table, 4);
    in[r][1] = xt_in("idx", CCG_DTYPE_I64, idx[r], 1, (const int64_t[]){2});
    tout[r][0] = xt_out(ccg_value_name(g, o), out[r], sizeof out[r]);
    tout[r][1] = xt_out(ccg_value_name(g, y), out2[r], sizeof out2[r]);
    pin[r] = in[r];
    pout[r] = tout[r];
  }
  ccg_exec_options opt = CCG_EXEC_OPTIONS_INIT;
  opt.deadline_s = 0.5;
  opt.overlap = 1;
  ccg_status rs[4];
  assert_fails(g, CCG_STATUS_INVALID_ARG,
               ccg_exec_run_local(g, 4, &opt, pin, 2, pout, 2, rs), "rank 2",
               "(Gather)", "index 9", node);
  for (int r = 0; r < 4; r++)
    assert_int_equal(rs[r], r == 2 ? CCG_STATUS_INVALID_ARG : CCG_STATUS_COMM);
  idx[2][0] = 2;
  assert_ok(g, ccg_exec_run_local(g, 4, &opt, pin, 2, pout, 2, rs));
  for (int r = 0; r < 4; r++) {
    assert_true(out[r][3] == 2 * 16);
    assert_true(out2[r][0] == 1 + 2 + 3 + 4);
  }
  ccg_graph_free(g);
}

typedef struct stall_job {
  ccg_graph *g;
  ccg_comm *comm;
  int rank;
  ccg_status st;
  char msg[1024];
  double elapsed;
} stall_job;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *stall_main(void *arg) {
  stall_job *j = arg;
  double t0 = now_s();
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.rank = j->rank;
  o.comm = j->comm;
  o.deadline_s = 0.5;
  o.overlap = 1;
  ccg_exec *x = NULL;
  j->st = ccg_exec_create(j->g, &o, &x);
  if (j->st == CCG_STATUS_OK) {
    float in[4] = {1, 2, 3, 4};
    ccg_exec_tensor t = XT_F32("x", in, 4);
    j->st = ccg_exec_run(x, &t, 1, NULL, 0);
    snprintf(j->msg, sizeof j->msg, "%s", ccg_last_error(x));
  }
  ccg_exec_free(x);
  j->elapsed = now_s() - t0;
  return NULL;
}

/* Runs the two jobs as ranks 0 and 1 of c, then frees c. */
static void run_two(stall_job *j, ccg_comm *c) {
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    j[r].comm = c;
    j[r].rank = r;
    assert_int_equal(pthread_create(&th[r], NULL, stall_main, &j[r]), 0);
  }
  for (int r = 0; r < 2; r++)
    assert_int_equal(pthread_join(th[r], NULL), 0);
  ccg_comm_free(c);
}

/* y = AllReduce(x) runs on the communication thread while Relu(x) runs;
 * Add(y, Relu(x)) waits for it. `with_ar` false: the rank skips the
 * all-reduce (a peer that never comes). */
static ccg_graph *posted_all_reduce(bool with_ar, const char **node) {
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]"), y, z, o;
  assert_ok(g, ccg_relu(g, x, &z));
  if (with_ar) {
    assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
    *node = ccg_node_name(g, ccg_value_producer(g, y));
    assert_ok(g, ccg_exp(g, z, &z));
    assert_ok(g, ccg_add(g, y, z, &o));
  } else {
    assert_ok(g, ccg_exp(g, z, &o));
  }
  assert_ok(g, ccg_graph_add_output(g, o));
  return g;
}

/* A timeout on the communication thread reaches the caller as TIMEOUT
 * naming the collective, its node and the missing rank, within the
 * deadline plus one second; the thread is joined (valgrind). */
static void test_timeout_on_comm_thread(void **state) {
  (void)state;
  const char *node = NULL, *unused;
  stall_job j[2] = {{.g = posted_all_reduce(true, &node)},
                    {.g = posted_all_reduce(false, &unused)}};
  /* the all-reduce is posted, not run by the calling thread */
  ccg_comm *c;
  assert_ok(NULL, ccg_comm_local_new(2, &c));
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.comm = c;
  o.overlap = 1;
  ccg_exec *e;
  assert_ok(j[0].g, ccg_exec_create(j[0].g, &o, &e));
  for (size_t s = 0; s < e->n_steps; s++)
    if (e->steps[s].comm)
      assert_true(e->steps[s].join > (int)s + 1);
  ccg_exec_free(e);
  run_two(j, c);
  assert_int_equal(j[0].st, CCG_STATUS_TIMEOUT);
  assert_non_null(strstr(j[0].msg, "AllReduce"));
  assert_non_null(strstr(j[0].msg, node));
  assert_non_null(strstr(j[0].msg, "rank 1"));
  assert_true(j[0].elapsed >= 0.5 && j[0].elapsed < 1.5);
  assert_int_equal(j[1].st, CCG_STATUS_OK);
  ccg_graph_free(j[0].g);
  ccg_graph_free(j[1].g);
}

/* Rank 1 fails (a Gather index out of range: x = 1..4 cast to indices into
 * 4 elements) before its all-reduce: rank 0's, posted to its communication
 * thread, returns COMM naming the collective, the node and rank 1's
 * failure, well within the deadline. */
static void test_peer_failure_on_comm_thread(void **state) {
  (void)state;
  const char *node = NULL;
  ccg_graph *g1 = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g1, "x", CCG_DTYPE_F32, "[4]"), v, y, ix;
  assert_ok(g1, ccg_cast(g1, x, CCG_DTYPE_I64, &ix));
  assert_ok(g1, ccg_gather(g1, x, ix, 0, &v));
  assert_ok(g1, ccg_all_reduce(g1, v, "tp", CCG_REDUCE_SUM, &y));
  assert_ok(g1, ccg_graph_add_output(g1, y));
  stall_job j[2] = {{.g = posted_all_reduce(true, &node)}, {.g = g1}};
  ccg_comm *c;
  assert_ok(NULL, ccg_comm_local_new(2, &c));
  run_two(j, c);
  assert_int_equal(j[1].st, CCG_STATUS_INVALID_ARG);
  assert_int_equal(j[0].st, CCG_STATUS_COMM);
  assert_non_null(strstr(j[0].msg, node));
  assert_non_null(strstr(j[0].msg, "rank 1 failed"));
  assert_non_null(strstr(j[0].msg, "Gather"));
  assert_true(j[0].elapsed < 0.5);
  ccg_graph_free(j[0].g);
  ccg_graph_free(g1);
}

/* An executor with overlap but no collective to run starts no thread, and
 * one whose communicator is NULL neither. */
static void test_no_thread_without_collectives(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]"), y;
  assert_ok(g, ccg_relu(g, x, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_exec_options opt = CCG_EXEC_OPTIONS_INIT;
  opt.overlap = 1;
  ccg_exec *e;
  assert_ok(g, ccg_exec_create(g, &opt, &e));
  assert_null(e->ov);
  ccg_exec_free(e);
  ccg_graph_free(g);
}

/* Position of the node with op `op` in a schedule (the first). */
static size_t where(ccg_graph *g, const ccg_node_id *s, size_t n, ccg_op op) {
  for (size_t i = 0; i < n; i++)
    if (ccg_node_op(g, s[i]) == op)
      return i;
  fail_msg("no %s in the schedule", ccg_op_name(op));
  return n;
}

/* Under overlap a collective is posted as soon as its inputs are made, and
 * the compute the plain order ran before it and it does not need runs
 * after it; collectives keep their order; every node is still there. */
static void test_schedule(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[8]"), a, b, y, z, o;
  assert_ok(g, ccg_relu(g, x, &a));
  assert_ok(g, ccg_exp(g, x, &b));
  assert_ok(g, ccg_all_reduce(g, a, "tp", CCG_REDUCE_SUM, &y));
  assert_ok(g, ccg_all_gather(g, b, "tp", 0, NULL, &z));
  assert_ok(g, ccg_add(g, y, b, &o));
  assert_ok(g, ccg_graph_add_output(g, o));
  assert_ok(g, ccg_graph_add_output(g, z));
  ccg_comm *c;
  assert_ok(NULL, ccg_comm_local_new(2, &c));
  ccg_exec *e[2];
  const ccg_node_id *s[2];
  size_t n[2];
  for (int ov = 0; ov < 2; ov++) {
    ccg_exec_options opt = CCG_EXEC_OPTIONS_INIT;
    opt.comm = c;
    opt.overlap = ov;
    assert_ok(g, ccg_exec_create(g, &opt, &e[ov]));
    s[ov] = ccg_exec_schedule(e[ov], &n[ov]);
  }
  assert_int_equal(n[0], n[1]);
  /* the plain order runs Exp before the all-reduce; overlap after */
  assert_true(where(g, s[0], n[0], CCG_OP_EXP) <
              where(g, s[0], n[0], CCG_OP_ALL_REDUCE));
  assert_true(where(g, s[1], n[1], CCG_OP_EXP) >
              where(g, s[1], n[1], CCG_OP_ALL_REDUCE));
  /* the collectives in the same order, every node once */
  ccg_node_id cs[2][8];
  size_t nc[2] = {0, 0};
  for (int ov = 0; ov < 2; ov++)
    for (size_t i = 0; i < n[ov]; i++) {
      size_t k = 0;
      while (k < n[0] && s[0][k] != s[ov][i])
        k++;
      assert_true(k < n[0]);
      if (ccg_op_is_collective(ccg_node_op(g, s[ov][i])))
        cs[ov][nc[ov]++] = s[ov][i];
    }
  assert_int_equal(nc[0], 2);
  assert_int_equal(nc[1], 2);
  assert_memory_equal(cs[0], cs[1], 2 * sizeof(ccg_node_id));
  ccg_exec_free(e[0]);
  ccg_exec_free(e[1]);
  ccg_comm_free(c);
  same_bits(g, "schedule");
  ccg_graph_free(g);
}

/* CCG_EXEC_OVERLAP overrides the option both ways; other values do not. */
static void test_environment_overrides(void **state) {
  (void)state;
  ccg_graph *g = ccg_test_graph("tp=2");
  ccg_value_id x = ccg_test_input(g, "x", CCG_DTYPE_F32, "[4]"), y;
  assert_ok(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
  assert_ok(g, ccg_graph_add_output(g, y));
  ccg_comm *c;
  assert_ok(NULL, ccg_comm_local_new(2, &c));
  const struct {
    const char *env;
    int option;
    bool thread;
  } cases[] = {{NULL, 1, true},   {"0", 1, false},  {"1", 0, true},
               {"yes", 0, false}, {NULL, 0, false}, {"1", -1, true},
               {"0", -1, false}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (cases[i].env)
      setenv("CCG_EXEC_OVERLAP", cases[i].env, 1);
    else
      unsetenv("CCG_EXEC_OVERLAP");
    ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
    o.comm = c;
    o.overlap = cases[i].option;
    ccg_exec *e;
    assert_ok(g, ccg_exec_create(g, &o, &e));
    assert_int_equal(e->ov != NULL, cases[i].thread);
    ccg_exec_free(e);
  }
  unsetenv("CCG_EXEC_OVERLAP");
  ccg_comm_free(c);
  ccg_graph_free(g);
}

/* The default (-1) from the cores the process may use and the ranks it
 * runs: on with a core per rank and one per communication thread, off
 * with fewer; the option and CCG_EXEC_OVERLAP decide over it both ways. */
static void test_default_from_cores(void **state) {
  (void)state;
  const struct {
    int option;
    const char *env;
    int cores, ranks;
    bool on;
  } cases[] = {
      {-1, NULL, 2, 2, false}, /* two local ranks on two cores */
      {-1, NULL, 3, 2, false}, {-1, NULL, 4, 2, true}, {-1, NULL, 16, 4, true},
      {-1, NULL, 7, 4, false}, {-1, NULL, 2, 1, true}, /* one rank (mpi) */
      {-1, NULL, 1, 1, false}, {1, NULL, 1, 2, true},  /* asked for */
      {0, NULL, 64, 1, false}, {-1, "1", 1, 2, true},  {-1, "0", 64, 1, false},
      {0, "1", 1, 1, true},    {1, "0", 64, 1, false}, {-1, "yes", 4, 2, true},
      {-1, "", 2, 2, false},   {-1, NULL, 4, 0, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (ccg__overlap_wanted(cases[i].option, cases[i].env, cases[i].cores,
                            cases[i].ranks) != cases[i].on)
      fail_msg("option %d, CCG_EXEC_OVERLAP=%s, %d cores, %d ranks: want %s",
               cases[i].option, cases[i].env ? cases[i].env : "(unset)",
               cases[i].cores, cases[i].ranks, cases[i].on ? "on" : "off");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_interleaved),
      cmocka_unit_test(test_mappings),
      cmocka_unit_test(test_point_to_point),
      cmocka_unit_test(test_plan_keeps_buffers),
      cmocka_unit_test(test_plan_in_flight_all),
      cmocka_unit_test(test_compute_failure_in_flight),
      cmocka_unit_test(test_no_thread_without_collectives),
      cmocka_unit_test(test_environment_overrides),
      cmocka_unit_test(test_default_from_cores),
      cmocka_unit_test(test_schedule),
      cmocka_unit_test(test_timeout_on_comm_thread),
      cmocka_unit_test(test_peer_failure_on_comm_thread),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
