/* Runs every rank of a graph as a thread on one local communicator, each
 * with its own executor (created here one after the other: graphs are not
 * thread-safe), for several steps; keeps every graph output of the first
 * step and checks that later steps give the same bits. Include after
 * test_util.h and exec_test_util.h. */
#ifndef CCG_EXEC_RANKS_H
#define CCG_EXEC_RANKS_H

#include <pthread.h>

#define XR_MAXR 8
#define XR_MAXIO 8

typedef struct xr_rank {
  ccg_exec *x;
  int steps;
  ccg_exec_tensor in[XR_MAXIO];
  size_t n_in;
  ccg_exec_tensor out[XR_MAXIO];
  size_t n_out;
  void *got[XR_MAXIO]; /* first step's outputs, malloc'd */
  size_t got_bytes[XR_MAXIO];
  bool unstable; /* a later step differed */
  ccg_status st;
  char msg[1024];
} xr_rank;

static void *xr_main(void *arg) {
  xr_rank *r = arg;
  for (int s = 0; s < r->steps; s++) {
    r->st = ccg_exec_run(r->x, r->in, r->n_in, r->out, r->n_out);
    if (r->st != CCG_STATUS_OK) {
      snprintf(r->msg, sizeof r->msg, "%s", ccg_last_error(r->x));
      return NULL;
    }
    for (size_t i = 0; i < r->n_out; i++) {
      const ccg_tensor *t = &r->out[i].tensor;
      size_t bytes = ccg_dtype_size(t->dtype);
      for (int d = 0; d < t->rank; d++)
        bytes *= (size_t)t->dims[d];
      if (s == 0) {
        r->got[i] = malloc(bytes ? bytes : 1);
        r->got_bytes[i] = bytes;
        if (r->got[i] && bytes)
          memcpy(r->got[i], t->data, bytes);
      } else if (bytes != r->got_bytes[i] ||
                 (bytes && memcmp(r->got[i], t->data, bytes) != 0)) {
        r->unstable = true;
      }
    }
  }
  return NULL;
}

/* The ranks' results: R[r].got[i] is graph output i of rank r. */
typedef struct xr_result {
  int n;
  xr_rank R[XR_MAXR];
} xr_result;

/* Per-rank input data: fill(rank, input index, data, numel). */
typedef void (*xr_fill_fn)(int rank, size_t input, float *data, size_t n);

static void xr_default_fill(int rank, size_t input, float *data, size_t n) {
  xt_fill(data, n, (uint32_t)(1000 * rank + (int)input + 1));
}

/* Runs g (f32 inputs with numeric shapes, the same on every rank) on all
 * ranks of its mesh with `overlap`, `steps` times. Fails the test on any
 * error or on a step that differs from the first. */
static void xr_run(ccg_graph *g, int overlap, int steps, xr_fill_fn fill,
                   xr_result *res) {
  const ccg_mesh *m = ccg_graph_mesh(g);
  int n = m ? (int)ccg_mesh_world_size(m) : 1;
  assert_true(n <= XR_MAXR);
  memset(res, 0, sizeof *res);
  res->n = n;
  ccg_comm *c = NULL;
  if (n > 1)
    assert_ok(NULL, ccg_comm_local_new(n, &c));
  size_t n_in = ccg_graph_num_inputs(g), n_out = ccg_graph_num_outputs(g);
  assert_true(n_in <= XR_MAXIO && n_out <= XR_MAXIO);
  float *data[XR_MAXR][XR_MAXIO];
  for (int r = 0; r < n; r++) {
    xr_rank *k = &res->R[r];
    k->steps = steps;
    k->n_in = n_in;
    k->n_out = n_out;
    for (size_t i = 0; i < n_in; i++) {
      ccg_value_id v = ccg_graph_input(g, i);
      const ccg_shape *s = ccg_value_shape(g, v);
      int64_t dims[CCG_MAX_RANK];
      size_t numel = 1;
      for (int d = 0; d < s->rank; d++) {
        assert_null(s->dims[d].sym);
        dims[d] = s->dims[d].size;
        numel *= (size_t)dims[d];
      }
      data[r][i] = malloc((numel ? numel : 1) * sizeof(float));
      assert_non_null(data[r][i]);
      (fill ? fill : xr_default_fill)(r, i, data[r][i], numel);
      k->in[i] =
          xt_in(ccg_value_name(g, v), CCG_DTYPE_F32, data[r][i], s->rank, dims);
    }
    for (size_t i = 0; i < n_out; i++) {
      memset(&k->out[i], 0, sizeof k->out[i]);
      k->out[i].name = ccg_value_name(g, ccg_graph_output(g, i));
    }
    ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
    o.rank = r;
    o.comm = c;
    o.deadline_s = 30;
    o.overlap = overlap;
    assert_ok(g, ccg_exec_create(g, &o, &k->x));
  }
  pthread_t th[XR_MAXR];
  for (int r = 0; r < n; r++)
    assert_int_equal(pthread_create(&th[r], NULL, xr_main, &res->R[r]), 0);
  for (int r = 0; r < n; r++)
    assert_int_equal(pthread_join(th[r], NULL), 0);
  for (int r = 0; r < n; r++) {
    ccg_exec_free(res->R[r].x);
    res->R[r].x = NULL;
    for (size_t i = 0; i < n_in; i++)
      free(data[r][i]);
  }
  ccg_comm_free(c);
  for (int r = 0; r < n; r++) {
    if (res->R[r].st != CCG_STATUS_OK)
      fail_msg("rank %d: %s", r, res->R[r].msg);
    if (res->R[r].unstable)
      fail_msg("rank %d: a later step gave other bits than the first", r);
  }
}

static void xr_free(xr_result *res) {
  for (int r = 0; r < res->n; r++)
    for (size_t i = 0; i < res->R[r].n_out; i++)
      free(res->R[r].got[i]);
}

#endif
