/* Shared helpers for the unit tests (include after <cmocka.h>). */
#ifndef CCG_TEST_UTIL_H
#define CCG_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccgraph/ccgraph.h"

/* Asserts a call's status, printing the graph's last error when it differs. */
#define assert_ok(g, expr)                                                     \
  do {                                                                         \
    ccg_status st_ = (expr);                                                   \
    if (st_ != CCG_STATUS_OK)                                                  \
      fail_msg("%s -> %s: %s", #expr, ccg_status_name(st_),                    \
               ccg_last_error(g));                                             \
  } while (0)

/* Asserts that a call fails with `want` and that the message contains every
 * given fragment (NULL-terminated list). */
#define assert_fails(g, want, expr, ...)                                       \
  ccg_test_assert_fails((g), (want), (expr), #expr, __FILE__, __LINE__,        \
                        (const char *[]){__VA_ARGS__, NULL})

static inline void ccg_test_assert_fails(const void *g, ccg_status want,
                                         ccg_status got, const char *expr,
                                         const char *file, int line,
                                         const char *const *frags) {
  const char *msg = ccg_last_error(g);
  if (got != want)
    fail_msg("%s:%d: %s gave %s, expected %s (message: %s)", file, line, expr,
             ccg_status_name(got), ccg_status_name(want), msg);
  for (const char *const *f = frags; *f; f++)
    if (!strstr(msg, *f))
      fail_msg("%s:%d: %s: message \"%s\" lacks \"%s\"", file, line, expr, msg,
               *f);
}

/* A graph called `name` (NULL: the default) with an optional mesh ("tp=4",
 * "dp=2,tp=2" or NULL). */
static inline ccg_graph *ccg_test_graph_named(const char *name,
                                              const char *mesh) {
  ccg_graph_options o = CCG_GRAPH_OPTIONS_INIT;
  o.name = name;
  ccg_graph *g = NULL;
  if (ccg_graph_new(&o, &g) != CCG_STATUS_OK)
    fail_msg("ccg_graph_new: %s", ccg_last_error(NULL));
  if (mesh) {
    ccg_mesh m;
    if (ccg_mesh_parse(mesh, &m) != CCG_STATUS_OK ||
        ccg_graph_set_mesh(g, &m) != CCG_STATUS_OK)
      fail_msg("mesh %s: %s", mesh, ccg_last_error(NULL));
  }
  return g;
}

static inline ccg_graph *ccg_test_graph(const char *mesh) {
  return ccg_test_graph_named(NULL, mesh);
}

/* Adds an f32 (or other dtype) input from a shape string such as
 * "[batch,4,16]" or "[tp{3,5},8]" ("[]" = scalar). Numbers become numeric
 * dims, anything else a symbol (at most 63 characters). */
static inline ccg_value_id ccg_test_input(ccg_graph *g, const char *name,
                                          ccg_dtype dt, const char *shape) {
  ccg_shape s;
  memset(&s, 0, sizeof s);
  static char syms[64][64];
  static int next_sym;
  const char *p = shape + 1;
  while (*p && *p != ']') {
    const char *e = p;
    while (*e && *e != ',' && *e != ']')
      e = *e == '{' && strchr(e, '}') ? strchr(e, '}') + 1 : e + 1;
    char tok[64];
    snprintf(tok, sizeof tok, "%.*s", (int)(e - p), p);
    char *end;
    long long v = strtoll(tok, &end, 10);
    if (*end == '\0' && end != tok) {
      s.dims[s.rank++] = ccg_dim_num(v);
    } else {
      char *slot = syms[next_sym++ % 64];
      snprintf(slot, 64, "%s", tok);
      s.dims[s.rank++] = ccg_dim_sym(slot);
    }
    p = *e == ',' ? e + 1 : e;
  }
  ccg_value_id v = CCG_NONE;
  if (ccg_graph_add_input(g, name, dt, &s, &v) != CCG_STATUS_OK)
    fail_msg("input %s %s: %s", name, shape, ccg_last_error(g));
  return v;
}

/* The value's shape as "[..]" in a static buffer (one call per statement). */
static inline const char *ccg_test_shape(ccg_graph *g, ccg_value_id v) {
  static char buf[256];
  ccg_shape_format(ccg_value_shape(g, v), buf, sizeof buf);
  return buf;
}

/* Unsets every variable the nccl communicator's launch reads (RANK,
 * WORLD_SIZE, CCG_RENDEZVOUS, mpirun's, ...), so a test sees only what it
 * sets itself. */
static inline void ccg_test_clear_launch_env(void) {
  static const char *const vars[] = {"RANK",
                                     "WORLD_SIZE",
                                     "LOCAL_RANK",
                                     "CCG_RENDEZVOUS",
                                     "MASTER_ADDR",
                                     "MASTER_PORT",
                                     "OMPI_COMM_WORLD_SIZE",
                                     "PMI_SIZE",
                                     "PMIX_RANK",
                                     "OMPI_COMM_WORLD_LOCAL_RANK",
                                     "MPI_LOCALRANKID"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    unsetenv(vars[i]);
}

#ifdef assert_non_null /* cmocka's tests (the MPI ones run without it) */
/* Whether a mapping of this process (/proc/self/maps) names `lib`: what
 * a library loaded on first use has or has not brought in. */
static inline bool ccg_test_mapped(const char *lib) {
  FILE *f = fopen("/proc/self/maps", "r");
  assert_non_null(f);
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof line, f))
    found = strstr(line, lib) != NULL;
  fclose(f);
  return found;
}
#endif

#endif
