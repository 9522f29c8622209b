/* Finite-difference check of gradient rules for the reduce and loss tests
 * (include after test_util.h and exec_test_util.h): y built over f64 inputs
 * (and any other inputs, held fixed), the loss sum(y * w) with a fixed
 * random w, ccg_backward for the inputs named in `wrt`, and every element of
 * each gradient compared with the central difference (L(x+h) - L(x-h)) / 2h
 * within atol + rtol * |fd|. */
#ifndef CCG_FD_CHECK_H
#define CCG_FD_CHECK_H

#include "ccgraph/autodiff.h"

#define FD_MAX_IN 4

typedef struct fd_input {
  const char *name;
  ccg_dtype dtype; /* f64: may be in wrt; others are held fixed */
  int rank;
  int64_t dims[CCG_MAX_RANK];
  void *data; /* caller's; f64 entries are perturbed in place and restored */
  bool wrt;
} fd_input;

static inline size_t fd_numel(const fd_input *in) {
  size_t n = 1;
  for (int d = 0; d < in->rank; d++)
    n *= (size_t)in->dims[d];
  return n;
}

static inline double fd_loss(ccg_exec *x, ccg_exec_tensor *tin, size_t n_in) {
  double loss = 0;
  ccg_exec_tensor out = xt_out("fd_loss", &loss, sizeof loss);
  assert_ok(x, ccg_exec_run(x, tin, n_in, &out, 1));
  return loss;
}

/* g holds the inputs (added by the caller under in[i].name) and y. */
static inline void fd_check(ccg_graph *g, ccg_value_id y, fd_input *in,
                            size_t n_in, double h, double atol, double rtol,
                            const char *what) {
  ccg_shape ys = *ccg_value_shape(g, y);
  ccg_tensor wt = {CCG_DTYPE_F64, ys.rank, {0}, NULL};
  size_t yn = 1;
  for (int d = 0; d < ys.rank; d++)
    yn *= (size_t)(wt.dims[d] = ys.dims[d].size);
  double *wd = malloc((yn ? yn : 1) * sizeof *wd);
  float *wf = malloc((yn ? yn : 1) * sizeof *wf);
  xt_fill(wf, yn, 99);
  for (size_t i = 0; i < yn; i++)
    wd[i] = wf[i];
  wt.data = wd;
  ccg_value_id w, loss;
  assert_ok(g, ccg_graph_add_initializer(g, "fd_w", &wt, &w));
  assert_ok(g, ccg_mul(g, y, w, &loss));
  assert_ok(g, ccg_reduce_sum(g, loss, NULL, 0, false, &loss));
  const char *ln[1] = {"fd_loss"};
  ccg_node_desc nd = CCG_NODE_DESC_INIT;
  nd.op = "Identity";
  nd.inputs = &loss;
  nd.n_inputs = 1;
  nd.output_names = ln;
  assert_ok(g, ccg_graph_add_node(g, &nd, NULL));
  assert_ok(g, ccg_graph_find_value(g, "fd_loss", &loss));
  assert_ok(g, ccg_graph_add_output(g, loss));
  const char *names[FD_MAX_IN];
  size_t n_wrt = 0;
  ccg_exec_tensor tin[FD_MAX_IN];
  assert_true(n_in <= FD_MAX_IN);
  for (size_t i = 0; i < n_in; i++) {
    if (in[i].wrt)
      names[n_wrt++] = in[i].name;
    tin[i] = xt_in(in[i].name, in[i].dtype, in[i].data, in[i].rank, in[i].dims);
  }
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  o.loss = loss;
  o.wrt = names;
  o.n_wrt = n_wrt;
  assert_ok(g, ccg_backward(g, &o));
  assert_ok(g, ccg_graph_validate(g));
  ccg_exec_options eo = CCG_EXEC_OPTIONS_INIT;
  eo.input_shapes = tin;
  eo.n_input_shapes = n_in;
  ccg_exec *x = NULL;
  assert_ok(g, ccg_exec_create(g, &eo, &x));
  for (size_t i = 0; i < n_in; i++) {
    if (!in[i].wrt)
      continue;
    size_t n = fd_numel(&in[i]);
    double *grad = malloc((n ? n : 1) * sizeof *grad), *v = in[i].data;
    char gname[64];
    snprintf(gname, sizeof gname, "grad/%s", in[i].name);
    ccg_exec_tensor out = xt_out(gname, grad, n * sizeof *grad);
    assert_ok(x, ccg_exec_run(x, tin, n_in, &out, 1));
    for (size_t k = 0; k < n; k++) {
      double keep = v[k];
      v[k] = keep + h;
      double lp = fd_loss(x, tin, n_in);
      v[k] = keep - h;
      double lm = fd_loss(x, tin, n_in);
      v[k] = keep;
      double fd = (lp - lm) / (2 * h);
      if (!(fabs(fd - grad[k]) <= atol + rtol * fabs(fd)))
        fail_msg("%s: d loss / d %s[%zu] is %.10g; finite difference %.10g",
                 what, in[i].name, k, grad[k], fd);
    }
    free(grad);
  }
  ccg_exec_free(x);
  free(wd);
  free(wf);
}

#endif
