/* Executor micro-benchmarks: per-node overhead on a chain of tiny ops
 * against a direct loop doing the same arithmetic, one MatMul node against
 * a direct cblas_sgemm call, and the local communicator's all-reduce (bus
 * bandwidth by the nccl-tests formula, against memcpy bandwidth in the same
 * run, and the latency of an 8-byte all-reduce). Started under mpirun in
 * a build with MPI, it first measures the same all-reduce figures on the
 * mpi communicator next to a direct MPI_Allreduce (every rank takes part;
 * rank 0 then runs the rest and prints). Prints a table and one JSON
 * line.
 * usage: bench_exec_micro [--chain N] [--mm M] [--ar-mb MB] [--ranks R]
 *                         [--iters K] */
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "bench_exec_micro"
#include "bench_util.h"
#include "ccgraph/ccgraph.h"

#ifdef CCG_HAVE_MPI
#include <mpi.h>
#endif

static ccg_exec *compile(ccg_graph *g, int rank, ccg_comm *comm) {
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.rank = rank;
  o.comm = comm;
  ccg_exec *x;
  CHECK(g, ccg_exec_create(g, &o, &x));
  return x;
}

static ccg_exec_tensor input(const char *name, const float *data, int rank,
                             int64_t d0, int64_t d1) {
  ccg_exec_tensor t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.tensor.dtype = CCG_DTYPE_F32;
  t.tensor.rank = rank;
  t.tensor.dims[0] = d0;
  t.tensor.dims[1] = d1;
  t.tensor.data = data;
  return t;
}

/* ---- per-node overhead ----------------------------------------------------
 */

/* Relu, Neg, Relu, Neg, ... on 4 floats: every node but the first runs in
 * place, so the time is the executor's dispatch plus 4 elements of work. */
static void chain(int n, int iters, double *node_ns, double *direct_ns) {
  ccg_graph *g;
  CHECK(NULL, ccg_graph_new(NULL, &g));
  ccg_shape s = CCG_SHAPE(4);
  ccg_value_id v;
  CHECK(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &s, &v));
  for (int i = 0; i < n; i++)
    CHECK(g, i % 2 ? ccg_neg(g, v, &v) : ccg_relu(g, v, &v));
  CHECK(g, ccg_graph_add_output(g, v));
  ccg_exec *x = compile(g, 0, NULL);
  float in[4] = {1, -2, 3, -4};
  ccg_exec_tensor t = input("x", in, 1, 4, 0);
  CHECK(x, ccg_exec_run(x, &t, 1, NULL, 0));
  double t0 = bench_now();
  for (int k = 0; k < iters; k++)
    CHECK(x, ccg_exec_run(x, &t, 1, NULL, 0));
  *node_ns = (bench_now() - t0) / iters / n * 1e9;
  volatile float sink = 0;
  float buf[4];
  t0 = bench_now();
  for (int k = 0; k < iters; k++) {
    memcpy(buf, in, sizeof buf);
    for (int i = 0; i < n; i++)
      for (int e = 0; e < 4; e++)
        buf[e] = i % 2 ? -buf[e] : (buf[e] > 0 ? buf[e] : 0);
    sink += buf[0];
  }
  *direct_ns = (bench_now() - t0) / iters / n * 1e9;
  (void)sink;
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* ---- MatMul against sgemm
 * ---------------------------------------------------- */

static void matmul(int m, int iters, double *node_ms, double *direct_ms) {
  ccg_graph *g;
  CHECK(NULL, ccg_graph_new(NULL, &g));
  ccg_shape s = CCG_SHAPE(m, m);
  ccg_value_id a, b, c;
  CHECK(g, ccg_graph_add_input(g, "a", CCG_DTYPE_F32, &s, &a));
  CHECK(g, ccg_graph_add_input(g, "b", CCG_DTYPE_F32, &s, &b));
  CHECK(g, ccg_matmul(g, a, b, &c));
  CHECK(g, ccg_graph_add_output(g, c));
  ccg_exec *x = compile(g, 0, NULL);
  size_t n = (size_t)m * (size_t)m;
  float *av = malloc(n * 4), *bv = malloc(n * 4), *cv = malloc(n * 4);
  if (!av || !bv || !cv)
    exit(3);
  for (size_t i = 0; i < n; i++) {
    av[i] = (float)(i % 7) * 0.1f;
    bv[i] = (float)(i % 5) * 0.2f;
  }
  ccg_exec_tensor t[2] = {input("a", av, 2, m, m), input("b", bv, 2, m, m)};
  CHECK(x, ccg_exec_run(x, t, 2, NULL, 0));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f, av, m,
              bv, m, 0.0f, cv, m);
  /* interleaved, best of each: the machine is shared */
  *node_ms = *direct_ms = 1e30;
  for (int k = 0; k < iters; k++) {
    double t0 = bench_now();
    CHECK(x, ccg_exec_run(x, t, 2, NULL, 0));
    double t1 = bench_now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f, av, m,
                bv, m, 0.0f, cv, m);
    double t2 = bench_now();
    *node_ms = (t1 - t0) * 1e3 < *node_ms ? (t1 - t0) * 1e3 : *node_ms;
    *direct_ms = (t2 - t1) * 1e3 < *direct_ms ? (t2 - t1) * 1e3 : *direct_ms;
  }
  free(av);
  free(bv);
  free(cv);
  ccg_exec_free(x);
  ccg_graph_free(g);
}

/* ---- local all-reduce ---------------------------------------------------- */

typedef struct ar_job {
  ccg_exec *x;
  int iters;
  int64_t count;
  double per_op_s;
} ar_job;

static void *ar_main(void *arg) {
  ar_job *j = arg;
  ccg_exec *x = j->x;
  float *in = malloc((size_t)j->count * sizeof(float));
  if (!in)
    exit(3);
  /* real pages with data, as an all-reduce of computed values reads */
  for (int64_t i = 0; i < j->count; i++)
    in[i] = (float)(i % 97) * 0.25f;
  ccg_exec_tensor t = input("x", in, 1, j->count, 0);
  CHECK(x, ccg_exec_run(x, &t, 1, NULL, 0));
  double t0 = bench_now();
  for (int k = 0; k < j->iters; k++)
    CHECK(x, ccg_exec_run(x, &t, 1, NULL, 0));
  j->per_op_s = (bench_now() - t0) / j->iters;
  free(in);
  return NULL;
}

/* Seconds per all-reduce of `count` floats over `ranks` local ranks (the
 * slowest rank's mean). */
static double all_reduce(int ranks, int64_t count, int iters) {
  ccg_graph *g;
  ccg_mesh m;
  char spec[32];
  snprintf(spec, sizeof spec, "tp=%d", ranks);
  CHECK(NULL, ccg_graph_new(NULL, &g));
  CHECK(NULL, ccg_mesh_parse(spec, &m));
  CHECK(g, ccg_graph_set_mesh(g, &m));
  ccg_shape s = CCG_SHAPE(count);
  ccg_value_id x, y;
  CHECK(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &s, &x));
  CHECK(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
  CHECK(g, ccg_graph_add_output(g, y));
  ccg_comm *comm;
  CHECK(NULL, ccg_comm_local_new(ranks, &comm));
  ar_job jobs[16];
  pthread_t th[16];
  /* compiled here, one rank after the other: graphs are not thread-safe */
  for (int r = 0; r < ranks; r++)
    jobs[r] = (ar_job){compile(g, r, comm), iters, count, 0};
  for (int r = 0; r < ranks; r++)
    if (pthread_create(&th[r], NULL, ar_main, &jobs[r]))
      exit(3);
  double worst = 0;
  for (int r = 0; r < ranks; r++) {
    pthread_join(th[r], NULL);
    worst = jobs[r].per_op_s > worst ? jobs[r].per_op_s : worst;
    ccg_exec_free(jobs[r].x);
  }
  ccg_comm_free(comm);
  ccg_graph_free(g);
  return worst;
}

#define REPEATS 5

/* ---- mpi all-reduce ------------------------------------------------------ */

typedef struct mpi_figs {
  int ranks;
  double bus_gbs, direct_bus_gbs, lat_us, direct_lat_us;
} mpi_figs;

#ifdef CCG_HAVE_MPI
static bool under_mpirun(void) {
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") ||
         getenv("PMI_SIZE");
}

/* Seconds per all-reduce of `count` floats (the slowest rank's mean): the
 * executor on the mpi communicator, or MPI_Allreduce itself. */
static double mpi_all_reduce(ccg_comm *comm, int64_t count, int iters,
                             bool direct) {
  int ranks = ccg_comm_size(comm);
  ccg_graph *g;
  ccg_mesh m;
  char spec[32];
  snprintf(spec, sizeof spec, "tp=%d", ranks);
  CHECK(NULL, ccg_graph_new(NULL, &g));
  CHECK(NULL, ccg_mesh_parse(spec, &m));
  CHECK(g, ccg_graph_set_mesh(g, &m));
  ccg_shape s = CCG_SHAPE(count);
  ccg_value_id x, y;
  CHECK(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &s, &x));
  CHECK(g, ccg_all_reduce(g, x, "tp", CCG_REDUCE_SUM, &y));
  CHECK(g, ccg_graph_add_output(g, y));
  ccg_exec *ex = compile(g, ccg_comm_rank(comm), comm);
  float *in = calloc((size_t)count, sizeof(float));
  float *out = calloc((size_t)count, sizeof(float));
  if (!in || !out)
    exit(3);
  ccg_exec_tensor t = input("x", in, 1, count, 0);
  double t0 = 0;
  for (int k = -2; k < iters; k++) {
    if (k == 0) {
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = bench_now();
    }
    if (direct)
      MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else
      CHECK(ex, ccg_exec_run(ex, &t, 1, NULL, 0));
  }
  double mine = (bench_now() - t0) / iters, worst = 0;
  MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  free(in);
  free(out);
  ccg_exec_free(ex);
  ccg_graph_free(g);
  return worst;
}

/* The mpi figures when started under mpirun; false otherwise. Ranks other
 * than 0 then wait (sleeping) for rank 0 to finish and exit. */
static bool mpi_bench(int64_t count, int iters, mpi_figs *f) {
  if (!under_mpirun())
    return false;
  ccg_comm *comm;
  CHECK(NULL, ccg_comm_mpi_new(&comm));
  int n = ccg_comm_size(comm);
  f->ranks = n;
  double bytes = (double)count * 4, bus = 2.0 * (n - 1) / n;
  f->bus_gbs = bytes * bus / mpi_all_reduce(comm, count, iters, false) * 1e-9;
  f->direct_bus_gbs =
      bytes * bus / mpi_all_reduce(comm, count, iters, true) * 1e-9;
  f->lat_us = mpi_all_reduce(comm, 2, iters * 50, false) * 1e6;
  f->direct_lat_us = mpi_all_reduce(comm, 2, iters * 50, true) * 1e6;
  int rank = ccg_comm_rank(comm);
  ccg_comm_free(comm);
  if (rank != 0) {
    /* out of rank 0's way: its single-process figures follow */
    MPI_Request r;
    int done = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    while (!done) {
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
      struct timespec d = {0, 1000000};
      nanosleep(&d, NULL);
    }
    exit(0);
  }
  return true;
}

static void mpi_done(void) {
  MPI_Request r;
  MPI_Ibarrier(MPI_COMM_WORLD, &r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
}
#else
static bool mpi_bench(int64_t count, int iters, mpi_figs *f) {
  (void)count, (void)iters, (void)f;
  return false;
}
static void mpi_done(void) {}
#endif

static double memcpy_gbs(size_t bytes, int iters) {
  char *a = malloc(bytes), *b = malloc(bytes);
  if (!a || !b)
    exit(3);
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  double t0 = bench_now();
  for (int k = 0; k < iters; k++)
    memcpy(k % 2 ? a : b, k % 2 ? b : a, bytes);
  double s = (bench_now() - t0) / iters;
  free(a);
  free(b);
  return (double)bytes / s * 1e-9;
}

int main(int argc, char **argv) {
  int n_chain = 10000, mm = 512, ranks = 4, iters = 20;
  double ar_mb = 16;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--chain") == 0 && i + 1 < argc)
      n_chain = atoi(argv[++i]);
    else if (strcmp(argv[i], "--mm") == 0 && i + 1 < argc)
      mm = atoi(argv[++i]);
    else if (strcmp(argv[i], "--ar-mb") == 0 && i + 1 < argc)
      ar_mb = atof(argv[++i]);
    else if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc)
      ranks = atoi(argv[++i]);
    else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
      iters = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_exec_micro [--chain N] [--mm M] "
                      "[--ar-mb MB] [--ranks R] [--iters K]\n");
      return 1;
    }
  }
  if (n_chain < 1 || mm < 1 || ranks < 2 || ranks > 16 || iters < 1 ||
      !(ar_mb > 0)) {
    fprintf(stderr, "bench_exec_micro: sizes and iters must be positive, "
                    "2..16 ranks\n");
    return 1;
  }
  double node_ns, direct_ns, mm_node, mm_direct;
  int64_t count = (int64_t)(ar_mb * 1048576.0 / 4.0);
  size_t bytes = (size_t)count * 4;
  mpi_figs mf = {0};
  bool have_mpi = mpi_bench(count, iters, &mf);
  chain(n_chain, iters, &node_ns, &direct_ns);
  matmul(mm, iters, &mm_node, &mm_direct);
  /* best of a few repeats, interleaved with memcpy: the machine is
   * shared */
  double ar_s = 1e30, cpy = 0, lat_s = 1e30;
  for (int k = 0; k < REPEATS; k++) {
    double a = all_reduce(ranks, count, iters), c = memcpy_gbs(bytes, iters);
    double l = all_reduce(ranks, 2, iters * 50);
    ar_s = a < ar_s ? a : ar_s;
    cpy = c > cpy ? c : cpy;
    lat_s = l < lat_s ? l : lat_s;
  }
  double bus = (double)bytes / ar_s * 2.0 * (ranks - 1) / ranks * 1e-9;
  printf("%-34s %14s %14s %8s\n", "measure", "executor", "direct", "ratio");
  printf("%-34s %11.1f ns %11.1f ns %8.2f\n", "per node, chain of tiny ops",
         node_ns, direct_ns, node_ns / direct_ns);
  printf("%-34s %11.3f ms %11.3f ms %8.3f\n", "MatMul node vs cblas_sgemm",
         mm_node, mm_direct, mm_node / mm_direct);
  printf("%-34s %10.2f GB/s %10.2f GB/s %8.2f\n",
         "all-reduce bus bw vs memcpy bw", bus, cpy, bus / cpy);
  printf("%-34s %11.2f us\n", "all-reduce latency (8 bytes)", lat_s * 1e6);
  if (have_mpi) {
    printf("%-34s %14s %14s\n", "mpi communicator", "ccgraph mpi",
           "MPI_Allreduce");
    printf("%-34s %10.2f GB/s %10.2f GB/s %8.2f\n", "all-reduce bus bw",
           mf.bus_gbs, mf.direct_bus_gbs, mf.bus_gbs / mf.direct_bus_gbs);
    printf("%-34s %11.2f us %11.2f us %8.2f\n", "all-reduce latency (8 bytes)",
           mf.lat_us, mf.direct_lat_us, mf.lat_us / mf.direct_lat_us);
  }
  printf("{\"bench\":\"exec_micro\",\"chain\":%d,\"node_ns\":%.2f,"
         "\"direct_ns\":%.2f,\"mm\":%d,\"mm_node_ms\":%.4f,"
         "\"mm_sgemm_ms\":%.4f,\"ranks\":%d,\"ar_bytes\":%zu,"
         "\"ar_bus_gbs\":%.3f,\"memcpy_gbs\":%.3f,\"ar_8b_us\":%.3f",
         n_chain, node_ns, direct_ns, mm, mm_node, mm_direct, ranks, bytes, bus,
         cpy, lat_s * 1e6);
  if (have_mpi)
    printf(",\"mpi_ranks\":%d,\"mpi_ar_bus_gbs\":%.3f,"
           "\"mpi_direct_bus_gbs\":%.3f,\"mpi_ar_8b_us\":%.3f,"
           "\"mpi_direct_8b_us\":%.3f",
           mf.ranks, mf.bus_gbs, mf.direct_bus_gbs, mf.lat_us,
           mf.direct_lat_us);
  printf("}\n");
  fflush(stdout);
  if (have_mpi)
    mpi_done();
  return 0;
}
