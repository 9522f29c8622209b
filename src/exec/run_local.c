/* ccg_exec_run_local: every rank of a mesh as a thread of this process on a
 * fresh local communicator. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/comm/comm.h"
#include "exec/exec_create.h"

typedef struct rank_job {
  ccg_graph *g;
  ccg_exec_options opts;
  const ccg_exec_tensor *inputs;
  size_t n_inputs;
  ccg_exec_tensor *outputs;
  size_t n_outputs;
  ccg_status st;
  ccg_ctx err;
} rank_job;

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
  j->st = ccg_exec_run(x, j->inputs, j->n_inputs, j->outputs, j->n_outputs);
  if (j->st != CCG_STATUS_OK)
    ccg__error_copy(&j->err, (const ccg_ctx *)x);
  ccg_exec_free(x);
  return NULL;
}

ccg_status ccg_exec_run_local(ccg_graph *g, int nranks,
                              const ccg_exec_options *opts,
                              const ccg_exec_tensor *const *inputs,
                              size_t n_inputs, ccg_exec_tensor *const *outputs,
                              size_t n_outputs, ccg_status *rank_status) {
  if (!g || nranks < 1 || (n_inputs && !inputs) || (n_outputs && !outputs))
    return ccg__error(g ? (ccg_ctx *)g : NULL, CCG_STATUS_INVALID_ARG,
                      "ccg_exec_run_local: bad arguments");
  ccg_ctx *gctx = (ccg_ctx *)g;
  const ccg_mesh *mesh = ccg_graph_mesh(g);
  int64_t world = mesh ? ccg_mesh_world_size(mesh) : 1;
  if (nranks != world)
    return ccg__error(gctx, CCG_STATUS_INVALID_ARG,
                      "graph '%s' has a world of %lld ranks, not %d",
                      ccg_graph_name(g), (long long)world, nranks);
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < n_outputs; i++)
      if (!outputs[r][i].dst)
        return ccg__error(gctx, CCG_STATUS_INVALID_ARG,
                          "rank %d output '%s' has no dst buffer", r,
                          outputs[r][i].name ? outputs[r][i].name : "(null)");
  /* once, before the threads: validation uses the graph's scratch space */
  if (ccg_graph_validate(g) != CCG_STATUS_OK)
    return ccg__error_prefix(gctx, "cannot compile");
  ccg_comm *comm = NULL;
  if (ccg_comm_local_new(nranks, &comm) != CCG_STATUS_OK)
    return ccg__error(gctx, ccg_last_status(NULL), "%s", ccg_last_error(NULL));
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
    *j = (rank_job){g,
                    o,
                    n_inputs ? inputs[r] : NULL,
                    n_inputs,
                    n_outputs ? outputs[r] : NULL,
                    n_outputs,
                    CCG_STATUS_OK};
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
  for (int r = 0; r < nranks; r++) {
    if (started[r])
      pthread_join(threads[r], NULL);
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
out:
  free(jobs);
  free(threads);
  free(started);
  ccg_comm_free(comm);
  return st;
}
