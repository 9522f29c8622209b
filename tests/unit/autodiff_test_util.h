/* Helpers for the backward-pass tests (include after exec_test_util.h). */
#ifndef CCG_AUTODIFF_TEST_UTIL_H
#define CCG_AUTODIFF_TEST_UTIL_H

/* loss = sum(y * R), R an f32 initializer "R" of y's (static) shape filled
 * from `seed`; then ccg_backward for `wrt` and a validity check. */
static inline void ad_add_loss(ccg_graph *g, ccg_value_id y, uint32_t seed,
                               const char *const *wrt, size_t n_wrt) {
  ccg_shape s = *ccg_value_shape(g, y);
  ccg_tensor t = {CCG_DTYPE_F32, s.rank, {0}, NULL};
  int64_t n = 1;
  for (int d = 0; d < s.rank; d++)
    n *= t.dims[d] = s.dims[d].size;
  float *rd = malloc((size_t)n * sizeof *rd);
  xt_fill(rd, (size_t)n, seed);
  t.data = rd;
  ccg_value_id r, loss;
  assert_ok(g, ccg_graph_add_initializer(g, "R", &t, &r));
  free(rd);
  assert_ok(g, ccg_mul(g, y, r, &loss));
  assert_ok(g, ccg_reduce_sum(g, loss, NULL, 0, false, &loss));
  ccg_backward_options o = CCG_BACKWARD_OPTIONS_INIT;
  o.loss = loss;
  o.wrt = wrt;
  o.n_wrt = n_wrt;
  assert_ok(g, ccg_backward(g, &o));
  assert_ok(g, ccg_graph_validate(g));
}

#endif
