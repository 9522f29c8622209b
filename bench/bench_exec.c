/* Executor throughput on a transformer-style MLP block forward
 * (LayerNorm -> MatMul + bias -> Gelu -> MatMul -> AllReduce over tp -> bias
 * -> residual), tensor-parallel: on 1 rank (whole weights) and on 4 local
 * ranks (tp=4, weight shards). Prints the memory plan (peak against the
 * naive sum and max-live), the step time, the largest difference between
 * the two runs' outputs. Then a whole transformer block forward+backward
 * (transformer_block.h) on 1 rank and on tp local ranks: the memory plan,
 * and the step time with overlap of communication and compute off and on
 * (whose outputs must be the same bits). A table and one JSON line.
 * usage: bench_exec [--tokens N] [--hidden H] [--iters K] [--ranks TP]
 *                   [--block-tokens N] [--block-hidden H] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "bench_exec"
#include "bench_util.h"
#include "ccgraph/ccgraph.h"
#include "transformer_block.h"

typedef struct sizes {
  int64_t tokens, hidden, ffn; /* ffn: this rank's share of 4*hidden */
} sizes;

/* An empty graph on the mesh tp=`tp`. */
static ccg_graph *tp_graph(int tp) {
  ccg_graph *g;
  ccg_mesh m;
  char spec[32];
  snprintf(spec, sizeof spec, "tp=%d", tp);
  CHECK(NULL, ccg_graph_new(NULL, &g));
  CHECK(NULL, ccg_mesh_parse(spec, &m));
  CHECK(g, ccg_graph_set_mesh(g, &m));
  return g;
}

/* The block for a tp group of `tp` ranks; returns the output value. */
static ccg_graph *build(int tp, const sizes *s, ccg_value_id *out) {
  ccg_graph *g = tp_graph(tp);
  int64_t f = s->ffn;
  ccg_value_id x, ln_s, ln_b, w1, b1, w2, b2, h;
  ccg_shape xs = {2, {{s->tokens, NULL}, {s->hidden, NULL}}};
  ccg_shape hs = CCG_SHAPE(s->hidden);
  ccg_shape w1s = {2, {{s->hidden, NULL}, {f, NULL}}};
  ccg_shape b1s = {1, {{f, NULL}}};
  ccg_shape w2s = {2, {{f, NULL}, {s->hidden, NULL}}};
  CHECK(g, ccg_graph_add_input(g, "x", CCG_DTYPE_F32, &xs, &x));
  CHECK(g, ccg_graph_add_input(g, "ln_scale", CCG_DTYPE_F32, &hs, &ln_s));
  CHECK(g, ccg_graph_add_input(g, "ln_bias", CCG_DTYPE_F32, &hs, &ln_b));
  CHECK(g, ccg_graph_add_input(g, "w1", CCG_DTYPE_F32, &w1s, &w1));
  CHECK(g, ccg_graph_add_input(g, "b1", CCG_DTYPE_F32, &b1s, &b1));
  CHECK(g, ccg_graph_add_input(g, "w2", CCG_DTYPE_F32, &w2s, &w2));
  CHECK(g, ccg_graph_add_input(g, "b2", CCG_DTYPE_F32, &hs, &b2));
  CHECK(g, ccg_layer_norm(g, x, ln_s, ln_b, -1, 1e-5f, &h));
  CHECK(g, ccg_matmul(g, h, w1, &h));
  CHECK(g, ccg_add(g, h, b1, &h));
  CHECK(g, ccg_gelu(g, h, "tanh", &h));
  CHECK(g, ccg_matmul(g, h, w2, &h));
  CHECK(g, ccg_all_reduce(g, h, "tp", CCG_REDUCE_SUM, &h));
  CHECK(g, ccg_add(g, h, b2, &h));
  CHECK(g, ccg_add(g, h, x, &h));
  CHECK(g, ccg_graph_add_output(g, h));
  *out = h;
  return g;
}

static void fill(float *v, size_t n, uint32_t seed, float scale) {
  uint32_t s = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    v[i] = ((float)((s >> 8) & 0xffffff) / 8388608.0f - 1.0f) * scale;
  }
}

/* Whole weights, and the shards of rank r of tp (columns of w1 and b1,
 * rows of w2). */
typedef struct weights {
  float *x, *ln_s, *ln_b, *w1, *b1, *w2, *b2;
} weights;

static void shard(const weights *full, const sizes *s, int tp, int r,
                  weights *out) {
  int64_t H = s->hidden, F = 4 * H, f = F / tp;
  *out = *full;
  out->w1 = malloc((size_t)(H * f) * sizeof(float));
  out->b1 = malloc((size_t)f * sizeof(float));
  out->w2 = malloc((size_t)(f * H) * sizeof(float));
  if (!out->w1 || !out->b1 || !out->w2)
    exit(3);
  for (int64_t i = 0; i < H; i++)
    memcpy(out->w1 + i * f, full->w1 + i * F + r * f,
           (size_t)f * sizeof(float));
  memcpy(out->b1, full->b1 + r * f, (size_t)f * sizeof(float));
  memcpy(out->w2, full->w2 + r * f * H, (size_t)(f * H) * sizeof(float));
}

static void inputs(const weights *w, const sizes *s, ccg_exec_tensor *t) {
  int64_t H = s->hidden, f = s->ffn;
  const struct {
    const char *name;
    const float *data;
    int rank;
    int64_t d0, d1;
  } spec[7] = {{"x", w->x, 2, s->tokens, H},  {"ln_scale", w->ln_s, 1, H, 0},
               {"ln_bias", w->ln_b, 1, H, 0}, {"w1", w->w1, 2, H, f},
               {"b1", w->b1, 1, f, 0},        {"w2", w->w2, 2, f, H},
               {"b2", w->b2, 1, H, 0}};
  for (int i = 0; i < 7; i++) {
    memset(&t[i], 0, sizeof t[i]);
    t[i].name = spec[i].name;
    t[i].tensor.dtype = CCG_DTYPE_F32;
    t[i].tensor.rank = spec[i].rank;
    t[i].tensor.dims[0] = spec[i].d0;
    t[i].tensor.dims[1] = spec[i].d1;
    t[i].tensor.data = spec[i].data;
  }
}

typedef struct rank_job {
  ccg_graph *g;
  ccg_value_id out;
  ccg_comm *comm;
  int rank, iters;
  const sizes *s;
  weights w;
  float *result;
  double step_s;
  ccg_exec_memory mem;
  ccg_exec *x; /* compiled before the threads start (creation is serial) */
} rank_job;

static void *rank_main(void *arg) {
  rank_job *j = arg;
  ccg_exec_tensor in[7];
  inputs(&j->w, j->s, in);
  ccg_exec *x = j->x;
  CHECK(x, ccg_exec_memory_info(x, &j->mem));
  size_t bytes = (size_t)(j->s->tokens * j->s->hidden) * sizeof(float);
  ccg_exec_tensor out = {ccg_value_name(j->g, j->out), {0}, j->result, bytes};
  CHECK(x, ccg_exec_run(x, in, 7, &out, 1)); /* warm-up */
  double t0 = bench_now();
  for (int i = 0; i < j->iters; i++)
    CHECK(x, ccg_exec_run(x, in, 7, NULL, 0));
  j->step_s = (bench_now() - t0) / j->iters;
  ccg_exec_free(x);
  return NULL;
}

/* Runs the block on tp ranks as threads; rank 0's output into result. */
static rank_job run(int tp, const sizes *full_sizes, const weights *w,
                    int iters, float *result) {
  sizes s = *full_sizes;
  s.ffn = 4 * s.hidden / tp;
  ccg_value_id out;
  ccg_graph *g = build(tp, &s, &out);
  ccg_comm *comm = NULL;
  if (tp > 1)
    CHECK(NULL, ccg_comm_local_new(tp, &comm));
  rank_job jobs[8];
  pthread_t th[8];
  size_t bytes = (size_t)(s.tokens * s.hidden) * sizeof(float);
  /* every executor compiled here, one after another: compiling from
   * several threads at once is not safe on one graph (exec.h) */
  for (int r = 0; r < tp; r++) {
    jobs[r] = (rank_job){g, out, comm, r, iters, &s, *w, NULL, 0, {0}, NULL};
    if (tp > 1)
      shard(w, full_sizes, tp, r, &jobs[r].w);
    jobs[r].result = r == 0 ? result : malloc(bytes);
    if (!jobs[r].result)
      exit(3);
    ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
    o.rank = r;
    o.comm = comm;
    CHECK(g, ccg_exec_create(g, &o, &jobs[r].x));
  }
  for (int r = 0; r < tp; r++)
    if (pthread_create(&th[r], NULL, rank_main, &jobs[r]))
      exit(3);
  for (int r = 0; r < tp; r++)
    pthread_join(th[r], NULL);
  rank_job worst = jobs[0];
  for (int r = 0; r < tp; r++) {
    if (jobs[r].step_s > worst.step_s)
      worst.step_s = jobs[r].step_s;
    if (r)
      free(jobs[r].result);
    if (tp > 1) {
      free(jobs[r].w.w1);
      free(jobs[r].w.b1);
      free(jobs[r].w.w2);
    }
  }
  ccg_comm_free(comm);
  ccg_graph_free(g);
  worst.s = full_sizes;
  return worst;
}

/* ---- transformer block forward+backward -------------------------------- */

#define MAX_TP 8

typedef struct block_rank {
  ccg_exec *x;
  int iters, n_in, n_out;
  ccg_exec_tensor in[16];
  ccg_exec_tensor out[24];
  float *data[16];
  double step_s;
} block_rank;

static void *block_main(void *arg) {
  block_rank *b = arg;
  CHECK(b->x, ccg_exec_run(b->x, b->in, (size_t)b->n_in, NULL, 0));
  /* the best step: the machine may be shared */
  b->step_s = 1e30;
  for (int i = 0; i < b->iters; i++) {
    double t0 = bench_now();
    CHECK(b->x, ccg_exec_run(b->x, b->in, (size_t)b->n_in, NULL, 0));
    double t = bench_now() - t0;
    b->step_s = t < b->step_s ? t : b->step_s;
  }
  /* the last step's outputs, kept in the executor until it is freed */
  CHECK(b->x,
        ccg_exec_run(b->x, b->in, (size_t)b->n_in, b->out, (size_t)b->n_out));
  return NULL;
}

typedef struct block_result {
  ccg_exec_memory mem; /* rank 0 */
  double step_s;       /* the slowest rank's best step */
  uint64_t digest;     /* of every output of every rank */
} block_result;

/* FNV-1a over bytes: equal digests for equal outputs. */
static uint64_t digest(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

/* The block on tp local ranks (tp = 1: one rank, no communicator). */
static block_result run_block(int tp, int64_t T, int64_t H, int iters,
                              int overlap) {
  ccg_graph *g = tp_graph(tp);
  tb_fwd f;
  block_forward(g, T, H, tp, &f);
  block_backward(g, T, H, &f);
  ccg_comm *comm = NULL;
  if (tp > 1)
    CHECK(NULL, ccg_comm_local_new(tp, &comm));
  block_rank ranks[MAX_TP];
  memset(ranks, 0, sizeof ranks);
  int n_in = (int)ccg_graph_num_inputs(g),
      n_out = (int)ccg_graph_num_outputs(g);
  if (n_in > 16 || n_out > 24)
    exit(3);
  for (int r = 0; r < tp; r++) {
    block_rank *b = &ranks[r];
    b->iters = iters;
    b->n_in = n_in;
    b->n_out = n_out;
    for (int i = 0; i < n_in; i++) {
      ccg_value_id v = ccg_graph_input(g, (size_t)i);
      const ccg_shape *sh = ccg_value_shape(g, v);
      size_t numel = 1;
      memset(&b->in[i], 0, sizeof b->in[i]);
      b->in[i].name = ccg_value_name(g, v);
      b->in[i].tensor.dtype = CCG_DTYPE_F32;
      b->in[i].tensor.rank = sh->rank;
      for (int d = 0; d < sh->rank; d++) {
        b->in[i].tensor.dims[d] = sh->dims[d].size;
        numel *= (size_t)sh->dims[d].size;
      }
      b->data[i] = malloc(numel * sizeof(float));
      if (!b->data[i])
        exit(3);
      fill(b->data[i], numel, (uint32_t)(100 * r + i), 0.5f);
      b->in[i].tensor.data = b->data[i];
    }
    for (int i = 0; i < n_out; i++) {
      memset(&b->out[i], 0, sizeof b->out[i]);
      b->out[i].name = ccg_value_name(g, ccg_graph_output(g, (size_t)i));
    }
    ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
    o.rank = r;
    o.comm = comm;
    o.overlap = overlap;
    CHECK(g, ccg_exec_create(g, &o, &b->x));
  }
  pthread_t th[MAX_TP];
  for (int r = 0; r < tp; r++)
    if (pthread_create(&th[r], NULL, block_main, &ranks[r]))
      exit(3);
  block_result res = {{0}, 0, 14695981039346656037ull};
  for (int r = 0; r < tp; r++)
    pthread_join(th[r], NULL);
  CHECK(ranks[0].x, ccg_exec_memory_info(ranks[0].x, &res.mem));
  for (int r = 0; r < tp; r++) {
    block_rank *b = &ranks[r];
    res.step_s = b->step_s > res.step_s ? b->step_s : res.step_s;
    for (int i = 0; i < n_out; i++) {
      const ccg_tensor *t = &b->out[i].tensor;
      size_t n = ccg_dtype_size(t->dtype);
      for (int d = 0; d < t->rank; d++)
        n *= (size_t)t->dims[d];
      res.digest = digest(res.digest, t->data, n);
    }
    ccg_exec_free(b->x);
    for (int i = 0; i < n_in; i++)
      free(b->data[i]);
  }
  ccg_comm_free(comm);
  ccg_graph_free(g);
  return res;
}

static void block_row(const char *label, const block_result *b) {
  printf("%-22s %12zu %12zu %12zu %10.3f %10.3f %10.3f\n", label,
         b->mem.peak_bytes, b->mem.naive_bytes, b->mem.max_live_bytes,
         (double)b->mem.peak_bytes / (double)b->mem.naive_bytes,
         (double)b->mem.peak_bytes / (double)b->mem.max_live_bytes,
         b->step_s * 1e3);
}

static void block_json(const char *key, const block_result *b) {
  printf("\"%s\":{\"peak_bytes\":%zu,\"naive_bytes\":%zu,"
         "\"max_live_bytes\":%zu,\"peak_over_naive\":%.4f,"
         "\"peak_over_max_live\":%.4f,\"step_ms\":%.4f}",
         key, b->mem.peak_bytes, b->mem.naive_bytes, b->mem.max_live_bytes,
         (double)b->mem.peak_bytes / (double)b->mem.naive_bytes,
         (double)b->mem.peak_bytes / (double)b->mem.max_live_bytes,
         b->step_s * 1e3);
}

int main(int argc, char **argv) {
  sizes s = {256, 256, 0};
  int iters = 20, tp = 2;
  int64_t bt = 256, bh = 256;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--tokens") == 0 && i + 1 < argc)
      s.tokens = atol(argv[++i]);
    else if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc)
      tp = atoi(argv[++i]);
    else if (strcmp(argv[i], "--block-tokens") == 0 && i + 1 < argc)
      bt = atol(argv[++i]);
    else if (strcmp(argv[i], "--block-hidden") == 0 && i + 1 < argc)
      bh = atol(argv[++i]);
    else if (strcmp(argv[i], "--hidden") == 0 && i + 1 < argc)
      s.hidden = atol(argv[++i]);
    else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
      iters = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_exec [--tokens N] [--hidden H] "
                      "[--iters K] [--ranks TP] [--block-tokens N] "
                      "[--block-hidden H]\n");
      return 1;
    }
  }
  if (s.tokens < 1 || s.hidden < 4 || s.hidden % 4 || iters < 1 || tp < 1 ||
      tp > MAX_TP || bt < 1 || bh < tp || bh % tp) {
    fprintf(stderr,
            "bench_exec: tokens >= 1, hidden a multiple of 4, "
            "iters >= 1, 1..%d ranks dividing the block's hidden\n",
            MAX_TP);
    return 1;
  }
  int64_t H = s.hidden, F = 4 * H, T = s.tokens;
  weights w = {malloc((size_t)(T * H) * 4), malloc((size_t)H * 4),
               malloc((size_t)H * 4),       malloc((size_t)(H * F) * 4),
               malloc((size_t)F * 4),       malloc((size_t)(F * H) * 4),
               malloc((size_t)H * 4)};
  float *r1 = malloc((size_t)(T * H) * 4), *r4 = malloc((size_t)(T * H) * 4);
  if (!w.x || !w.ln_s || !w.ln_b || !w.w1 || !w.b1 || !w.w2 || !w.b2 || !r1 ||
      !r4)
    return 3;
  fill(w.x, (size_t)(T * H), 1, 1.0f);
  fill(w.ln_s, (size_t)H, 2, 1.0f);
  fill(w.ln_b, (size_t)H, 3, 0.1f);
  fill(w.w1, (size_t)(H * F), 4, 0.05f);
  fill(w.b1, (size_t)F, 5, 0.1f);
  fill(w.w2, (size_t)(F * H), 6, 0.05f);
  fill(w.b2, (size_t)H, 7, 0.1f);
  rank_job one = run(1, &s, &w, iters, r1);
  rank_job four = run(4, &s, &w, iters, r4);
  double diff = 0;
  for (int64_t i = 0; i < T * H; i++) {
    double d = r1[i] > r4[i] ? r1[i] - r4[i] : r4[i] - r1[i];
    diff = d > diff ? d : diff;
  }
  double flops = 2.0 * 2.0 * (double)T * (double)H * (double)F;
  printf("MLP block forward: tokens %lld, hidden %lld, ffn %lld, %d iters\n",
         (long long)T, (long long)H, (long long)F, iters);
  printf("%-8s %12s %12s %12s %6s %10s %10s\n", "ranks", "peak B", "naive B",
         "max-live B", "peak/naive", "step ms", "GFLOP/s");
  const rank_job *rows[2] = {&one, &four};
  for (int k = 0; k < 2; k++) {
    const rank_job *j = rows[k];
    printf("%-8d %12zu %12zu %12zu %6.2f %10.3f %10.2f\n", k ? 4 : 1,
           j->mem.peak_bytes, j->mem.naive_bytes, j->mem.max_live_bytes,
           (double)j->mem.peak_bytes / (double)j->mem.naive_bytes,
           j->step_s * 1e3, flops / j->step_s * 1e-9);
  }
  printf("max |out(1 rank) - out(4 ranks)| = %.3g\n", diff);
  block_result b1 = run_block(1, bt, bh, iters, 0);
  block_result off = run_block(tp, bt, bh, iters, 0);
  block_result on = run_block(tp, bt, bh, iters, 1);
  bool same = off.digest == on.digest;
  /* off and on again, interleaved; the best of each */
  for (int k = 1; k < 3; k++) {
    block_result a = run_block(tp, bt, bh, iters, 0);
    block_result b = run_block(tp, bt, bh, iters, 1);
    same = same && a.digest == off.digest && b.digest == off.digest;
    off.step_s = a.step_s < off.step_s ? a.step_s : off.step_s;
    on.step_s = b.step_s < on.step_s ? b.step_s : on.step_s;
  }
  printf("\ntransformer block forward+backward: tokens %lld, hidden %lld, "
         "%d iters\n",
         (long long)bt, (long long)bh, iters);
  printf("%-22s %12s %12s %12s %10s %10s %10s\n", "ranks", "peak B", "naive B",
         "max-live B", "peak/naive", "peak/live", "step ms");
  char l_off[48], l_on[48];
  snprintf(l_off, sizeof l_off, "%d, overlap off", tp);
  snprintf(l_on, sizeof l_on, "%d, overlap on", tp);
  block_row("1", &b1);
  block_row(l_off, &off);
  block_row(l_on, &on);
  printf("overlap on/off step time %.3f; outputs %s\n", on.step_s / off.step_s,
         same ? "the same bits" : "DIFFER");
  printf("{\"bench\":\"exec\",\"tokens\":%lld,\"hidden\":%lld,\"iters\":%d,"
         "\"rank1\":{\"peak_bytes\":%zu,\"naive_bytes\":%zu,"
         "\"max_live_bytes\":%zu,\"step_ms\":%.4f},"
         "\"rank4\":{\"peak_bytes\":%zu,\"naive_bytes\":%zu,"
         "\"max_live_bytes\":%zu,\"step_ms\":%.4f},\"max_abs_diff\":%.3g",
         (long long)T, (long long)H, iters, one.mem.peak_bytes,
         one.mem.naive_bytes, one.mem.max_live_bytes, one.step_s * 1e3,
         four.mem.peak_bytes, four.mem.naive_bytes, four.mem.max_live_bytes,
         four.step_s * 1e3, diff);
  printf(",\"block\":{\"tokens\":%lld,\"hidden\":%lld,\"ranks\":%d,",
         (long long)bt, (long long)bh, tp);
  block_json("rank1", &b1);
  printf(",");
  block_json("overlap_off", &off);
  printf(",");
  block_json("overlap_on", &on);
  printf(",\"overlap_same_bits\":%s}}\n", same ? "true" : "false");
  free(w.x);
  free(w.ln_s);
  free(w.ln_b);
  free(w.w1);
  free(w.b1);
  free(w.w2);
  free(w.b2);
  free(r1);
  free(r4);
  return diff < 1e-3 && same ? 0 : 2;
}
