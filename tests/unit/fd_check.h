/* The backward-pass tests' one finite-difference checker and loss builder
 * (include after test_util.h and exec_test_util.h). A check builds y over
 * f64 inputs (and any other inputs, held fixed), the loss sum(y * w) with a
 * fixed random w, ccg_backward for the inputs in `wrt`, and compares every
 * element of each gradient with the central difference
 * (L(x+h) - L(x-h)) / 2h within atol + rtol * |fd|. */
#ifndef CCG_FD_CHECK_H
#define CCG_FD_CHECK_H

#include "ccgraph/autodiff.h"

#define FD_MAX_IN 5

/* Step and tolerance of a check. */
typedef struct fd_tol {
  double h, atol, rtol;
} fd_tol;

/* Kernels that compute f64 in double. */
#define FD_TIGHT ((fd_tol){1e-6, 1e-6, 1e-5})
/* Kernels that compute in f32 even for f64 data (MatMul, Softmax, ...). */
#define FD_LOOSE ((fd_tol){1e-3, 3e-3, 2e-2})

typedef struct fd_input {
  const char *name;
  ccg_dtype dtype; /* f64: may be in wrt; others are held fixed */
  int rank;
  int64_t dims[CCG_MAX_RANK];
  void *data; /* caller's; f64 entries are perturbed in place and restored */
  bool wrt;
} fd_input;

static inline size_t fd_numel(int rank, const int64_t *dims) {
  size_t n = 1;
  for (int d = 0; d < rank; d++)
    n *= (size_t)dims[d];
  return n;
}

/* n doubles from xt_fill(seed), mapped from [-1, 1) onto [lo, hi). */
static inline void fd_fill(double *v, size_t n, uint32_t seed, double lo,
                           double hi) {
  float *f = malloc((n ? n : 1) * sizeof *f);
  xt_fill(f, n, seed);
  for (size_t i = 0; i < n; i++)
    v[i] = lo + (hi - lo) * 0.5 * (f[i] + 1.0);
  free(f);
}

/* ccg_backward of loss for the inputs named in wrt. */
static inline ccg_status fd_backward(ccg_graph *g, ccg_value_id loss,
                                     const char *const *wrt, size_t n_wrt) {
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  o.loss = loss;
  o.wrt = wrt;
  o.n_wrt = n_wrt;
  return ccg_backward(g, &o);
}

/* loss = sum(y * w), w an initializer "fd_w" of y's (static) shape and
 * dtype dt (F32 or F64) holding xt_fill(seed); then ccg_backward for wrt
 * and a validity check. Returns the loss. */
static inline ccg_value_id fd_add_loss(ccg_graph *g, ccg_value_id y,
                                       ccg_dtype dt, uint32_t seed,
                                       const char *const *wrt, size_t n_wrt) {
  ccg_shape s = *ccg_value_shape(g, y);
  ccg_tensor t = {dt, s.rank, {0}, NULL};
  for (int d = 0; d < s.rank; d++)
    t.dims[d] = s.dims[d].size;
  size_t n = fd_numel(t.rank, t.dims);
  void *w = malloc((n ? n : 1) * sizeof(double));
  if (dt == CCG_DTYPE_F64)
    fd_fill(w, n, seed, -1, 1);
  else
    xt_fill((float *)w, n, seed);
  t.data = w;
  ccg_value_id wv, loss;
  assert_ok(g, ccg_graph_add_initializer(g, "fd_w", &t, &wv));
  free(w);
  assert_ok(g, ccg_mul(g, y, wv, &loss));
  assert_ok(g, ccg_reduce_sum(g, loss, NULL, 0, false, &loss));
  assert_ok(g, fd_backward(g, loss, wrt, n_wrt));
  assert_ok(g, ccg_graph_validate(g));
  return loss;
}

static inline double fd_loss(ccg_exec *x, const char *name,
                             ccg_exec_tensor *tin, size_t n_in) {
  double loss = 0;
  ccg_exec_tensor out = xt_out(name, &loss, sizeof loss);
  assert_ok(x, ccg_exec_run(x, tin, n_in, &out, 1));
  return loss;
}

/* d loss / d in[i] for every element against the central difference. */
static inline void fd_compare(ccg_exec *x, const char *lname, fd_input *in,
                              size_t i, ccg_exec_tensor *tin, size_t n_in,
                              fd_tol tol, const char *what) {
  size_t n = fd_numel(in[i].rank, in[i].dims);
  double *grad = malloc((n ? n : 1) * sizeof *grad), *v = in[i].data;
  char gname[64];
  snprintf(gname, sizeof gname, "grad/%s", in[i].name);
  ccg_exec_tensor out = xt_out(gname, grad, n * sizeof *grad);
  assert_ok(x, ccg_exec_run(x, tin, n_in, &out, 1));
  for (size_t k = 0; k < n; k++) {
    double keep = v[k];
    v[k] = keep + tol.h;
    double lp = fd_loss(x, lname, tin, n_in);
    v[k] = keep - tol.h;
    double lm = fd_loss(x, lname, tin, n_in);
    v[k] = keep;
    double fd = (lp - lm) / (2 * tol.h);
    if (!(fabs(fd - grad[k]) <= tol.atol + tol.rtol * fabs(fd)))
      fail_msg("%s: d loss / d %s[%zu] is %.10g; finite difference %.10g", what,
               in[i].name, k, grad[k], fd);
  }
  free(grad);
}

/* g holds the inputs (added by the caller under in[i].name) and y; the
 * check adds the loss (with w from seed 99) and the backward pass to g. */
static inline void fd_check(ccg_graph *g, ccg_value_id y, fd_input *in,
                            size_t n_in, fd_tol tol, const char *what) {
  const char *names[FD_MAX_IN];
  size_t n_wrt = 0;
  ccg_exec_tensor tin[FD_MAX_IN];
  assert_true(n_in <= FD_MAX_IN);
  for (size_t i = 0; i < n_in; i++) {
    if (in[i].wrt)
      names[n_wrt++] = in[i].name;
    tin[i] = xt_in(in[i].name, in[i].dtype, in[i].data, in[i].rank, in[i].dims);
  }
  ccg_value_id loss = fd_add_loss(g, y, CCG_DTYPE_F64, 99, names, n_wrt);
  assert_ok(g, ccg_graph_add_output(g, loss));
  const char *lname = ccg_value_name(g, loss);
  ccg_exec_options eo = CCG_EXEC_OPTIONS_INIT;
  eo.input_shapes = tin;
  eo.n_input_shapes = n_in;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &eo, &x));
  for (size_t i = 0; i < n_in; i++)
    if (in[i].wrt)
      fd_compare(x, lname, in, i, tin, n_in, tol, what);
  ccg_exec_free(x);
}

/* An f64 input of a check, filled from [lo, hi). */
typedef struct fd_arg {
  const char *name;
  int rank;
  int64_t dims[5];
  double lo, hi;
} fd_arg;

/* y = body(g, inputs, ctx): the function whose gradients are checked. */
typedef ccg_status (*fd_body)(ccg_graph *g, const ccg_value_id *in,
                              const void *ctx, ccg_value_id *y);

/* fd_check of body over fresh f64 inputs args[0..n), all in wrt, input i
 * filled with seed 7 i + 3; the graph is built and freed here. */
static inline void fd_check_body(const char *what, const fd_arg *args, size_t n,
                                 fd_body body, const void *ctx, fd_tol tol) {
  ccg_graph *g = ccg_test_graph(NULL);
  ccg_value_id id[FD_MAX_IN], y;
  fd_input in[FD_MAX_IN];
  assert_true(n <= FD_MAX_IN);
  for (size_t i = 0; i < n; i++) {
    const fd_arg *a = &args[i];
    ccg_shape s = ccg_shape_make(a->rank, a->dims);
    assert_ok(g, ccg_graph_add_input(g, a->name, CCG_DTYPE_F64, &s, &id[i]));
    size_t m = fd_numel(a->rank, a->dims);
    in[i] = (fd_input){a->name, CCG_DTYPE_F64, a->rank, {0}, NULL, true};
    memcpy(in[i].dims, a->dims, (size_t)a->rank * sizeof *a->dims);
    in[i].data = malloc((m ? m : 1) * sizeof(double));
    fd_fill(in[i].data, m, (uint32_t)(7 * i + 3), a->lo, a->hi);
  }
  assert_ok(g, body(g, id, ctx, &y));
  fd_check(g, y, in, n, tol, what);
  for (size_t i = 0; i < n; i++)
    free(in[i].data);
  ccg_graph_free(g);
}

#endif
