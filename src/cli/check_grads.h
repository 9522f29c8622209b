/* Private to the tool: run --check of per-rank gradients through the
 * shard pass's provenance metadata (check_grads.c). */
#ifndef CCG_CLI_CHECK_GRADS_H
#define CCG_CLI_CHECK_GRADS_H

#include "cli/cli.h"

/* run --check's tolerance: absolute (rtol < 0) or relative. */
typedef struct cli_tolerance {
  double atol, rtol;
} cli_tolerance;

/* Compares rank r's "grad/<weight>" outputs (have) with the reference's
 * "grad/<parameter>" outputs (ref) through g's CCG_SHARD_PROVENANCE
 * metadata: per parameter, the sum of its uses' gradients against the
 * reference's elements they all reach. Sets handled[i] for every output
 * it owns (the caller skips those), raises *worst and counts compared
 * parameters in *n_cmp, each parameter's largest difference measured by
 * cli_diff_measure against the reference elements it reaches. EXIT_BAD_INPUT,
 * printed as "ccgraph run: WHAT rank R: ...", when the metadata is malformed or
 * a gradient is not the part it names, or when it is missing and the rank's
 * gradients are not the reference's by name. */
int cli_check_grads(const command *self, const char *what, ccg_graph *g, int r,
                    const ccg_exec_tensor *have, size_t n_have,
                    const ccg_exec_tensor *ref, size_t n_ref, bool *handled,
                    const cli_tolerance *tol, double *worst, size_t *n_cmp);

/* A tensor's largest |difference| as run --check measures it: as it is
 * (rtol < 0; accepted up to atol), or divided by atol + rtol x the
 * reference tensor's largest magnitude `scale` (accepted up to 1, as
 * numpy.allclose per element but with the tensor's max as the scale). */
double cli_diff_measure(const cli_tolerance *tol, double diff, double scale);

#endif
