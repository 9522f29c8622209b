/* Helpers for the tests run under mpirun: every rank runs the same
 * program; a graph runs once on the mpi communicator (this process's rank)
 * and once on the local communicator (every rank as a thread, the same
 * graphs), and this rank's outputs must be equal bit for bit. A failed
 * check prints the rank and ends the whole job (MPI_Abort), so no rank is
 * left waiting. Built without MPI, main skips. */
#ifndef CCG_MPI_TEST_UTIL_H
#define CCG_MPI_TEST_UTIL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccgraph/ccgraph.h"

#define MT_SKIP 77 /* ctest SKIP_RETURN_CODE */

#ifdef CCG_HAVE_MPI
#include <mpi.h>
static inline void mt_abort(void) { MPI_Abort(MPI_COMM_WORLD, 1); }
#else
static inline void mt_abort(void) { exit(1); }
#endif

static int mt_rank = -1;

static inline void mt_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "rank %d: %s:%d: ", mt_rank, file, line);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  fflush(stderr);
  mt_abort();
}
#define fail_msg(...) mt_fail(__FILE__, __LINE__, __VA_ARGS__)
#define assert_true(c)                                                         \
  do {                                                                         \
    if (!(c))                                                                  \
      fail_msg("%s is false", #c);                                             \
  } while (0)
#define assert_int_equal(a, b)                                                 \
  do {                                                                         \
    long long a_ = (long long)(a), b_ = (long long)(b);                        \
    if (a_ != b_)                                                              \
      fail_msg("%s is %lld, expected %lld", #a, a_, b_);                       \
  } while (0)

#include "unit/test_util.h"

#include "unit/exec_test_util.h"
/* these programs link MPI and call it by its own names (exec/comm/mpi_dl.h) */
#define CCG__MPI_DIRECT
#include "exec/comm/mpi_comm.h"

#define MT_MAX_IO 8
#define MT_MAX_RANKS 8

/* One rank's run: its graph, inputs and where its outputs go. */
typedef struct mt_rank_run {
  ccg_graph *g;
  ccg_exec_tensor in[MT_MAX_IO];
  size_t n_in;
  const char *out_names[MT_MAX_IO];
  size_t n_out;
  void *out[MT_MAX_IO];
  size_t out_bytes[MT_MAX_IO];
  void *bufs[3 * MT_MAX_IO]; /* inputs' data and outputs, freed after */
  size_t n_bufs;
  ccg_comm *comm;
  int rank;
  double deadline_s;
  ccg_status st;
  char msg[1024];
} mt_rank_run;

/* Creates, runs once, frees; status and message kept in j. */
static inline void mt_run(mt_rank_run *j) {
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.rank = j->rank;
  o.comm = j->comm;
  o.deadline_s = j->deadline_s > 0 ? j->deadline_s : 30;
  o.input_shapes = j->in;
  o.n_input_shapes = j->n_in;
  ccg_exec *x = NULL;
  j->st = ccg_exec_create(j->g, &o, &x);
  if (j->st != CCG_STATUS_OK) {
    snprintf(j->msg, sizeof j->msg, "%s", ccg_last_error(j->g));
    return;
  }
  ccg_exec_tensor outs[MT_MAX_IO];
  for (size_t i = 0; i < j->n_out; i++)
    outs[i] = xt_out(j->out_names[i], j->out[i], j->out_bytes[i]);
  /* the mpi communicator's receive space is readied at create: a run
   * allocates nothing */
  bool mpi = j->comm && strcmp(ccg_comm_name(j->comm), "mpi") == 0;
  size_t before = mpi ? ((const ccg__mpi *)j->comm)->scratch_bytes : 0;
  j->st = ccg_exec_run(x, j->in, j->n_in, outs, j->n_out);
  snprintf(j->msg, sizeof j->msg, "%s", ccg_last_error(x));
  size_t after = mpi ? ((const ccg__mpi *)j->comm)->scratch_bytes : 0;
  if (j->st == CCG_STATUS_OK && after != before) {
    j->st = CCG_STATUS_INTERNAL;
    snprintf(j->msg, sizeof j->msg,
             "the run grew the mpi communicator's receive space from %zu to "
             "%zu bytes (create should have reserved it)",
             before, after);
  }
  for (size_t i = 0; i < j->n_out && j->st == CCG_STATUS_OK; i++)
    ccg_tensor_nbytes(&outs[i].tensor, &j->out_bytes[i]);
  ccg_exec_free(x);
}

static inline void *mt_run_main(void *arg) {
  mt_run(arg);
  return NULL;
}

/* Every rank of `runs` as a thread on a fresh local communicator. */
static inline void mt_run_local(mt_rank_run *runs, int n) {
  ccg_comm *c = NULL;
  if (ccg_comm_local_new(n, &c) != CCG_STATUS_OK)
    fail_msg("local: %s", ccg_last_error(NULL));
  pthread_t th[MT_MAX_RANKS];
  for (int r = 0; r < n; r++) {
    runs[r].comm = c;
    runs[r].rank = r;
    if (pthread_create(&th[r], NULL, mt_run_main, &runs[r]) != 0)
      fail_msg("pthread_create");
  }
  for (int r = 0; r < n; r++)
    pthread_join(th[r], NULL);
  ccg_comm_free(c);
}

/* Adds input `name` of this run: dims given, data from `seed` (floats in
 * [-1, 1) in any float dtype's f32 image, small integers otherwise). */
static inline void mt_input(mt_rank_run *j, const char *name, ccg_dtype dt,
                            int rank, const int64_t *dims, uint32_t seed) {
  size_t n = 1, es = ccg_dtype_size(dt);
  for (int d = 0; d < rank; d++)
    n *= (size_t)dims[d];
  float *f = malloc((n + 1) * sizeof(float));
  char *data = malloc(n * es + 8);
  if (!f || !data)
    fail_msg("out of memory");
  xt_fill(f, n, seed);
  for (size_t i = 0; i < n; i++) {
    float v = f[i] * 3.0f;
    switch (dt) {
    case CCG_DTYPE_F32:
      memcpy(data + i * 4, &v, 4);
      break;
    case CCG_DTYPE_F64: {
      double w = (double)v * 1.0000001;
      memcpy(data + i * 8, &w, 8);
      break;
    }
    case CCG_DTYPE_BF16:
    case CCG_DTYPE_F16: {
      uint32_t b; /* the top half of the f32 bits: a valid bf16; as f16 a
                     finite pattern after masking the exponent's top bit */
      memcpy(&b, &v, 4);
      uint16_t h = (uint16_t)(b >> 16);
      if (dt == CCG_DTYPE_F16)
        h &= 0xbfff;
      memcpy(data + i * 2, &h, 2);
      break;
    }
    default: {
      int64_t w = (int64_t)(v * 1000.0f);
      if (es == 8)
        memcpy(data + i * 8, &w, 8);
      else if (es == 4) {
        int32_t x = (int32_t)w;
        memcpy(data + i * 4, &x, 4);
      } else if (es == 2) {
        int16_t x = (int16_t)w;
        memcpy(data + i * 2, &x, 2);
      } else {
        data[i] = (char)(w & 1);
      }
    }
    }
  }
  free(f);
  char *nm = malloc(strlen(name) + 1); /* the caller's may be on its stack */
  if (!nm)
    fail_msg("out of memory");
  strcpy(nm, name);
  j->bufs[j->n_bufs++] = data;
  j->bufs[j->n_bufs++] = nm;
  j->in[j->n_in++] = xt_in(nm, dt, data, rank, dims);
}

/* Reads graph output `name` after the run (1 MiB room). */
static inline void mt_output(mt_rank_run *j, const char *name) {
  size_t room = 1u << 20;
  void *b = calloc(1, room);
  if (!b)
    fail_msg("out of memory");
  j->bufs[j->n_bufs++] = b;
  j->out_names[j->n_out] = name;
  j->out[j->n_out] = b;
  j->out_bytes[j->n_out++] = room;
}

static inline void mt_free_run(mt_rank_run *j) {
  for (size_t i = 0; i < j->n_bufs; i++)
    free(j->bufs[i]);
  ccg_graph_free(j->g);
  memset(j, 0, sizeof *j);
}

/* Builds rank r's graph, inputs and outputs into j (j is zeroed). */
typedef void (*mt_build_fn)(mt_rank_run *j, int rank, const void *arg);

/* Runs one case on every rank: local (all ranks as threads, here) and mpi
 * (this rank); this rank's outputs must match bit for bit. */
static inline void mt_check(const char *what, mt_build_fn build,
                            const void *arg, ccg_comm *mpi) {
  int n = ccg_comm_size(mpi), me = ccg_comm_rank(mpi);
  static mt_rank_run loc[MT_MAX_RANKS], mine;
  for (int r = 0; r < n; r++) {
    memset(&loc[r], 0, sizeof loc[r]);
    build(&loc[r], r, arg);
  }
  mt_run_local(loc, n);
  for (int r = 0; r < n; r++)
    if (loc[r].st != CCG_STATUS_OK)
      fail_msg("%s: local rank %d: %s", what, r, loc[r].msg);
  memset(&mine, 0, sizeof mine);
  build(&mine, me, arg);
  mine.comm = mpi;
  mine.rank = me;
  mt_run(&mine);
  if (mine.st != CCG_STATUS_OK)
    fail_msg("%s: mpi: %s", what, mine.msg);
  for (size_t i = 0; i < mine.n_out; i++) {
    if (mine.out_bytes[i] != loc[me].out_bytes[i])
      fail_msg("%s: output '%s' has %zu bytes on mpi, %zu on local", what,
               mine.out_names[i], mine.out_bytes[i], loc[me].out_bytes[i]);
    const unsigned char *a = mine.out[i], *b = loc[me].out[i];
    for (size_t k = 0; k < mine.out_bytes[i]; k++)
      if (a[k] != b[k])
        fail_msg("%s: output '%s' byte %zu is %u on mpi, %u on local", what,
                 mine.out_names[i], k, a[k], b[k]);
  }
  mt_free_run(&mine);
  for (int r = 0; r < n; r++)
    mt_free_run(&loc[r]);
}

/* Starts the mpi communicator, or says why not and returns false. */
static inline bool mt_start(ccg_comm **mpi) {
  if (ccg_comm_mpi_new(mpi) != CCG_STATUS_OK) {
    printf("SKIP: %s\n", ccg_last_error(NULL));
    return false;
  }
  mt_rank = ccg_comm_rank(*mpi);
  return true;
}

#endif
