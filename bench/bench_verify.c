/* The verify pass and the run-time collective checks: verify time of an
 * SPMD program of N all-reduces alternating over dp and tp on dp=8 x tp=8
 * (64 ranks), and the latency of one 8-byte all-reduce step on 2 local
 * ranks with the flight recorder off, on (32 entries), and with the
 * fingerprint checks. Prints a table and one JSON line.
 * usage: bench_verify [--collectives N] [--iters K] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "bench_verify"
#include "bench_util.h"
#include "ccgraph/ccgraph.h"

static ccg_graph *mesh_graph(const char *spec) {
  ccg_graph *g = NULL;
  ccg_mesh m;
  if (ccg_graph_new(NULL, &g) != CCG_STATUS_OK ||
      ccg_mesh_parse(spec, &m) != CCG_STATUS_OK ||
      ccg_graph_set_mesh(g, &m) != CCG_STATUS_OK) {
    fprintf(stderr, "bench_verify: %s\n", ccg_last_error(NULL));
    exit(1);
  }
  return g;
}

/* x -> n all-reduces, alternating dp and tp. */
static ccg_graph *chain(const char *spec, int n, int64_t elems) {
  ccg_graph *g = mesh_graph(spec);
  ccg_shape s = ccg_shape_make(1, &elems);
  ccg_value_id x;
  ccg_status st = ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &s, &x);
  for (int i = 0; i < n && st == CCG_STATUS_OK; i++)
    st = ccg_all_reduce(g, x, strchr(spec, ',') && i % 2 ? "dp" : "tp",
                        CCG_REDUCE_SUM, &x);
  if (st == CCG_STATUS_OK)
    st = ccg_graph_add_output(g, x);
  if (st != CCG_STATUS_OK) {
    fprintf(stderr, "bench_verify: %s\n", ccg_last_error(g));
    exit(1);
  }
  return g;
}

typedef struct job {
  ccg_graph *g;
  ccg_comm *comm;
  int rank, iters;
  size_t records;
  bool debug;
  double secs;
  ccg_status st;
} job;

static void *job_main(void *arg) {
  job *j = arg;
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.rank = j->rank;
  o.comm = j->comm;
  o.flight_records = j->records;
  o.debug_collectives = j->debug;
  ccg_exec *x = NULL;
  j->st = ccg_exec_create(j->g, &o, &x);
  float in[2] = {1, 2};
  ccg_exec_tensor t;
  memset(&t, 0, sizeof t);
  t.name = "x";
  t.tensor.dtype = CCG_DTYPE_F32;
  t.tensor.rank = 1;
  t.tensor.dims[0] = 2;
  t.tensor.data = in;
  for (int i = 0; i < j->iters / 10 && j->st == CCG_STATUS_OK; i++)
    j->st = ccg_exec_run(x, &t, 1, NULL, 0); /* warm-up */
  double t0 = bench_now();
  for (int i = 0; i < j->iters && j->st == CCG_STATUS_OK; i++)
    j->st = ccg_exec_run(x, &t, 1, NULL, 0);
  j->secs = bench_now() - t0;
  ccg_exec_free(x);
  return NULL;
}

/* Microseconds per step of an 8-byte all-reduce on 2 local ranks. */
static double step_us(size_t records, bool debug, int iters) {
  ccg_comm *c = NULL;
  if (ccg_comm_local_new(2, &c) != CCG_STATUS_OK)
    exit(1);
  job jobs[2];
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    jobs[r] = (job){chain("tp=2", 1, 2), c, r, iters, records, debug, 0.0,
                    CCG_STATUS_OK};
    pthread_create(&th[r], NULL, job_main, &jobs[r]);
  }
  for (int r = 0; r < 2; r++)
    pthread_join(th[r], NULL);
  for (int r = 0; r < 2; r++) {
    if (jobs[r].st != CCG_STATUS_OK) {
      fprintf(stderr, "bench_verify: rank %d: %s\n", r,
              ccg_status_name(jobs[r].st));
      exit(1);
    }
    ccg_graph_free(jobs[r].g);
  }
  ccg_comm_free(c);
  return jobs[0].secs / iters * 1e6;
}

int main(int argc, char **argv) {
  int n = 1000, iters = 20000;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--collectives") == 0 && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
      iters = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_verify [--collectives N] [--iters K]\n");
      return 1;
    }
  }
  if (n < 1 || iters < 10) {
    fprintf(stderr, "bench_verify: --collectives >= 1, --iters >= 10\n");
    return 1;
  }
  ccg_graph *g = chain("dp=8,tp=8", n, 256);
  ccg_verify_report rep;
  double t0 = bench_now();
  ccg_status st = ccg_verify_program(&g, 1, NULL, &rep);
  double vs = bench_now() - t0;
  ccg_graph_free(g);
  if (st != CCG_STATUS_OK) {
    fprintf(stderr, "bench_verify: %s\n", ccg_last_error(NULL));
    return 1;
  }
  double off = step_us(0, false, iters), rec = step_us(32, false, iters);
  double dbg = step_us(32, true, iters);
  printf(
      "verify %d collectives x 64 ranks (%zu calls)   %.3f s  %.0f calls/s\n",
      n, rep.n_calls, vs, (double)rep.n_calls / vs);
  printf("8-byte all-reduce step, 2 ranks: recorder off   %.3f us\n", off);
  printf("                                 recorder on    %.3f us\n", rec);
  printf("                                 checks on      %.3f us\n", dbg);
  printf("{\"bench\":\"verify\",\"collectives\":%d,\"calls\":%zu,"
         "\"verify_s\":%.4f,\"step_us_off\":%.3f,\"step_us_recorder\":%.3f,"
         "\"step_us_checks\":%.3f}\n",
         n, rep.n_calls, vs, off, rec, dbg);
  return 0;
}
