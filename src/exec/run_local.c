/* ccg_exec_run_local: every rank of a mesh as a thread of this process on a
 * fresh local communicator. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/comm/comm.h"
#include "exec/exec_create.h"

typedef struct rank_job {
  ccg_graph *g;
  ccg_exec_options opts;
  int steps;
  const ccg_exec_tensor *inputs;
  size_t n_inputs;
  ccg_exec_tensor *outputs;
  size_t n_outputs;
  ccg_status st;
  ccg_ctx err;
  double t_start, t_end; /* after compiling, after the last step */
} rank_job;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *rank_main(void *arg) {
  rank_job *j = arg;
  ccg_exec *x = NULL;
  j->opts.input_shapes = j->inputs;
  j->opts.n_input_shapes = j->n_inputs;
  j->st = ccg__exec_create(j->g, &j->opts, false, &j->err, &x);
  if (j->st != CCG_STATUS_OK) {
    j->opts.comm->vt->abort(j->opts.comm, j->opts.rank, j->err.msg);
    return NULL;
  }
  j->t_start = now_s();
  for (int s = 0; s < j->steps && j->st == CCG_STATUS_OK; s++)
    j->st = ccg_exec_run(x, j->inputs, j->n_inputs, j->outputs, j->n_outputs);
  j->t_end = now_s();
  /* Outputs without a dst get a copy of their own (run_local_ranks), or
   * NULL when the rank failed. */
  for (size_t i = 0; i < j->n_outputs; i++) {
    ccg_exec_tensor *o = &j->outputs[i];
    size_t n = 0;
    if (o->dst)
      continue;
    void *copy = NULL;
    if (j->st == CCG_STATUS_OK &&
        ccg_tensor_nbytes(&o->tensor, &n) == CCG_STATUS_OK &&
        !(copy = malloc(n ? n : 1)))
      j->st = ccg__error((ccg_ctx *)x, CCG_STATUS_OOM,
                         "rank %d: %zu bytes for output '%s'", j->opts.rank, n,
                         o->name);
    if (copy)
      memcpy(copy, o->tensor.data, n);
    o->tensor.data = copy;
  }
  if (j->st != CCG_STATUS_OK) /* no half set of copies */
    for (size_t i = 0; i < j->n_outputs; i++)
      if (!j->outputs[i].dst) {
        free((void *)j->outputs[i].tensor.data);
        j->outputs[i].tensor.data = NULL;
      }
  if (j->st != CCG_STATUS_OK)
    ccg__error_copy(&j->err, (const ccg_ctx *)x);
  ccg_exec_free(x);
  return NULL;
}

/* Runs graphs[r] as rank r (one graph for all when `shared`); errors go to
 * ectx. */
static ccg_status run_ranks(ccg_graph *const *graphs, bool shared, int nranks,
                            const ccg_exec_options *opts, int steps,
                            const ccg_exec_tensor *const *inputs,
                            size_t n_inputs, ccg_exec_tensor *const *outputs,
                            size_t n_outputs, const size_t *n_in_each,
                            const size_t *n_out_each, ccg_status *rank_status,
                            double *seconds, ccg_ctx *gctx) {
  /* once, before the threads: validation uses the graph's scratch space */
  for (int r = 0; r < (shared ? 1 : nranks); r++)
    if (ccg_graph_validate(graphs[r]) != CCG_STATUS_OK)
      return ccg__error(gctx, ccg_last_status(graphs[r]),
                        "rank %d: cannot compile: %s", r,
                        ccg_last_error(graphs[r]));
  ccg_comm *comm = NULL;
  if (ccg_comm_local_new(nranks, &comm) != CCG_STATUS_OK)
    return gctx ? ccg__error(gctx, ccg_last_status(NULL), "%s",
                             ccg_last_error(NULL))
                : ccg_last_status(NULL); /* already on the thread's context */
  rank_job *jobs = calloc((size_t)nranks, sizeof *jobs);
  pthread_t *threads = calloc((size_t)nranks, sizeof *threads);
  bool *started = calloc((size_t)nranks, sizeof *started);
  ccg_status st = CCG_STATUS_OK;
  if (!jobs || !threads || !started) {
    st = ccg__error(gctx, CCG_STATUS_OOM, "out of memory for %d ranks", nranks);
    goto out;
  }
  for (int r = 0; r < nranks; r++) {
    rank_job *j = &jobs[r];
    ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
    if (opts)
      memcpy(&o, opts, opts->size < sizeof o ? opts->size : sizeof o);
    o.rank = r;
    o.comm = comm;
    size_t ni = n_in_each ? n_in_each[r] : n_inputs;
    size_t no = n_out_each ? n_out_each[r] : n_outputs;
    *j = (rank_job){
        graphs[shared ? 0 : r], o,  steps,        ni ? inputs[r] : NULL, ni,
        no ? outputs[r] : NULL, no, CCG_STATUS_OK};
    ccg__ctx_init(&j->err);
    if (pthread_create(&threads[r], NULL, rank_main, j) != 0) {
      j->st = ccg__error(&j->err, CCG_STATUS_INTERNAL,
                         "cannot start the thread of rank %d", r);
      comm->vt->abort(comm, r, j->err.msg);
      continue;
    }
    started[r] = true;
  }
  char msg[CCG__ERRMSG_MAX] = "";
  size_t used = 0;
  ccg_status first = CCG_STATUS_OK;
  double t0 = 0, t1 = 0;
  for (int r = 0; r < nranks; r++) {
    if (started[r])
      pthread_join(threads[r], NULL);
    t0 = jobs[r].t_start > t0 ? jobs[r].t_start : t0;
    t1 = jobs[r].t_end > t1 ? jobs[r].t_end : t1;
    if (rank_status)
      rank_status[r] = jobs[r].st;
    if (jobs[r].st == CCG_STATUS_OK)
      continue;
    /* the root cause first: a rank that failed on its own, not by the
     * communicator's word */
    if (first == CCG_STATUS_OK ||
        (first == CCG_STATUS_COMM && jobs[r].st != CCG_STATUS_COMM))
      first = jobs[r].st;
    if (used < sizeof msg)
      used += (size_t)snprintf(msg + used, sizeof msg - used, "%s%s",
                               used ? "; " : "", jobs[r].err.msg);
  }
  if (first != CCG_STATUS_OK)
    st = ccg__error(gctx, first, "%s", msg);
  else if (seconds)
    *seconds = (t1 - t0) / steps; /* from the last rank ready to the last
                                     rank done */
out:
  free(jobs);
  free(threads);
  free(started);
  ccg_comm_free(comm);
  return st;
}

ccg_status ccg_exec_run_local(ccg_graph *g, int nranks,
                              const ccg_exec_options *opts,
                              const ccg_exec_tensor *const *inputs,
                              size_t n_inputs, ccg_exec_tensor *const *outputs,
                              size_t n_outputs, ccg_status *rank_status) {
  if (!g || nranks < 1 || (n_inputs && !inputs) || (n_outputs && !outputs))
    return ccg__error(g ? (ccg_ctx *)g : NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_exec_run_local: bad arguments");
  const ccg_mesh *mesh = ccg_graph_mesh(g);
  int64_t world = mesh ? ccg_mesh_world_size(mesh) : 1;
  if (nranks != world)
    return ccg__error((ccg_ctx *)g, CCG_STATUS_INVALID_ARG,
                      "graph '%s' has a world of %lld ranks, not %d",
                      ccg_graph_name(g), (long long)world, nranks);
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < n_outputs; i++)
      if (!outputs[r][i].dst)
        return ccg__error((ccg_ctx *)g, CCG_STATUS_INVALID_ARG,
                          "rank %d output '%s' has no dst buffer", r,
                          outputs[r][i].name ? outputs[r][i].name : "(null)");
  return run_ranks(&g, true, nranks, opts, 1, inputs, n_inputs, outputs,
                   n_outputs, NULL, NULL, rank_status, NULL, (ccg_ctx *)g);
}

static ccg_status run_program(ccg_graph *const *graphs, int nranks,
                              const ccg_exec_options *opts, int steps,
                              const ccg_exec_tensor *const *inputs,
                              size_t n_inputs, ccg_exec_tensor *const *outputs,
                              size_t n_outputs, const size_t *n_in_each,
                              const size_t *n_out_each, ccg_status *rank_status,
                              double *seconds) {
  bool any_in = n_inputs > 0, any_out = n_outputs > 0;
  for (int r = 0; r < nranks && (n_in_each || n_out_each); r++) {
    any_in |= n_in_each && n_in_each[r] > 0;
    any_out |= n_out_each && n_out_each[r] > 0;
  }
  if (!graphs || nranks < 1 || steps < 1 || (any_in && !inputs) ||
      (any_out && !outputs))
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_exec_run_local_ranks: bad arguments");
  for (int r = 0; r < nranks; r++) {
    if (!graphs[r])
      return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                        "ccg_exec_run_local_ranks: no graph for rank %d", r);
    const ccg_mesh *mesh = ccg_graph_mesh(graphs[r]);
    int64_t world = mesh ? ccg_mesh_world_size(mesh) : 1;
    if (world != nranks)
      return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                        "rank %d's graph '%s' has a world of %lld ranks, not "
                        "%d",
                        r, ccg_graph_name(graphs[r]), (long long)world, nranks);
  }
  return run_ranks(graphs, false, nranks, opts, steps, inputs, n_inputs,
                   outputs, n_outputs, n_in_each, n_out_each, rank_status,
                   seconds, NULL);
}

ccg_status ccg_exec_run_local_ranks(ccg_graph *const *graphs, int nranks,
                                    const ccg_exec_options *opts, int steps,
                                    const ccg_exec_tensor *const *inputs,
                                    size_t n_inputs,
                                    ccg_exec_tensor *const *outputs,
                                    size_t n_outputs, ccg_status *rank_status,
                                    double *seconds) {
  return run_program(graphs, nranks, opts, steps, inputs, n_inputs, outputs,
                     n_outputs, NULL, NULL, rank_status, seconds);
}

ccg_status ccg_exec_run_local_program(
    ccg_graph *const *graphs, int nranks, const ccg_exec_options *opts,
    int steps, const ccg_exec_tensor *const *inputs, const size_t *n_inputs,
    ccg_exec_tensor *const *outputs, const size_t *n_outputs,
    ccg_status *rank_status, double *seconds) {
  if (!n_inputs || !n_outputs)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_exec_run_local_program: NULL counts");
  return run_program(graphs, nranks, opts, steps, inputs, 0, outputs, 0,
                     n_inputs, n_outputs, rank_status, seconds);
}
