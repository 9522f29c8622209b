/* Golden tests of mappings (include after <cmocka.h> and test_util.h).
 *
 * A case builds a graph named after it on a mesh, with inputs of the given
 * shapes ("x" for one input, else "x0", "x1", ...), applies a mapping by
 * name with JSON params, makes its outputs graph outputs, adds one graph
 * input "grad/<output name>" per output, runs the mapping's backward rule
 * from the tag the forward left (its params and instance, as a backward
 * pass would), makes the input gradients graph outputs, validates, and
 * compares the JSON dump byte for byte with
 * tests/data/golden/mappings/<system>/<name>.json. With CCG_UPDATE_GOLDEN=1
 * in the environment the file is (re)written instead. */
#ifndef CCG_MAPPING_GOLDEN_H
#define CCG_MAPPING_GOLDEN_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ccgraph/ccgraph.h"

#define GOLDEN_MAX_IO 8

typedef struct golden_case {
  const char *system;  /* folder: "megatron" */
  const char *name;    /* file stem and graph name: "copy_to_tp4" */
  const char *mesh;    /* "tp=4", "dp=2,tp=2" */
  const char *mapping; /* registry name */
  const char *params;  /* JSON object text or NULL */
  const char *shapes[GOLDEN_MAX_IO]; /* input shapes, NULL-terminated */
  ccg_dtype dtype;                   /* UNDEFINED = f32 */
} golden_case;

/* Adds case c's inputs: "x" for one, else "x0", "x1", ...; returns the
 * count. */
static inline size_t golden_inputs(ccg_graph *g, const golden_case *c,
                                   ccg_dtype dt, ccg_value_id *in) {
  size_t n = 0;
  while (n < GOLDEN_MAX_IO && c->shapes[n])
    n++;
  for (size_t i = 0; i < n; i++) {
    char name[16];
    if (n == 1)
      snprintf(name, sizeof name, "x");
    else
      snprintf(name, sizeof name, "x%zu", i);
    in[i] = ccg_test_input(g, name, dt, c->shapes[i]);
  }
  return n;
}

/* The forward of case c on a fresh graph: inputs added, outputs returned. */
static inline ccg_graph *golden_forward(const golden_case *c, ccg_value_id *in,
                                        size_t *n_in, ccg_value_id *out,
                                        size_t *n_out) {
  ccg_graph *g = ccg_test_graph_named(c->name, c->mesh);
  ccg_dtype dt = c->dtype == CCG_DTYPE_UNDEFINED ? CCG_DTYPE_F32 : c->dtype;
  *n_in = golden_inputs(g, c, dt, in);
  *n_out = GOLDEN_MAX_IO;
  assert_ok(g,
            ccg_mapping_apply(g, c->mapping, c->params, in, *n_in, out, n_out));
  return g;
}

/* The tag of the node producing v (NULL if none). */
static inline const ccg_tag *golden_tag_of(ccg_graph *g, ccg_value_id v) {
  ccg_node_id n = ccg_value_producer(g, v);
  return n == CCG_NONE ? NULL : ccg_node_tag(g, n);
}

/* Adds grad inputs and runs the backward from the forward's tag. With
 * `unread_inputs`, inputs that the forward reads in no node (an edge
 * stage's no-op send) may be missing from the instance's inputs found from
 * the tags, which are then the others in the same order. */
static inline void golden_backward_of(ccg_graph *g, const golden_case *c,
                                      const ccg_value_id *in, size_t n_in,
                                      const ccg_value_id *out, size_t n_out,
                                      bool unread_inputs) {
  ccg_value_id gout[GOLDEN_MAX_IO], gin[GOLDEN_MAX_IO];
  const ccg_tag *tag = NULL;
  for (size_t i = 0; i < n_out; i++) {
    assert_ok(g, ccg_graph_add_output(g, out[i]));
    if (!tag)
      tag = golden_tag_of(g, out[i]);
  }
  for (size_t i = 0; i < n_out; i++) {
    char name[256];
    snprintf(name, sizeof name, "grad/%s", ccg_value_name(g, out[i]));
    ccg_shape s = *ccg_value_shape(g, out[i]);
    assert_ok(g, ccg_graph_add_input(g, name, ccg_value_dtype(g, out[i]), &s,
                                     &gout[i]));
  }
  /* A backward pass sees only the tags: the instance's inputs and outputs
   * found from them must be the ones the call took and gave. */
  if (tag) {
    ccg_value_id ti[GOLDEN_MAX_IO], to[GOLDEN_MAX_IO];
    size_t nti = GOLDEN_MAX_IO, nto = GOLDEN_MAX_IO;
    assert_ok(g, ccg_mapping_instance_io(g, tag->instance, ti, &nti, to, &nto));
    size_t k = 0;
    for (size_t i = 0; i < n_in && k < nti; i++)
      k += ti[k] == in[i];
    assert_int_equal(k, nti);
    if (!unread_inputs)
      assert_int_equal(nti, n_in);
    assert_int_equal(nto, n_out);
    assert_memory_equal(to, out, n_out * sizeof *out);
    assert_string_equal(tag->mapping, c->mapping);
  }
  ccg_mapping_grad_args a = CCG_MAPPING_GRAD_ARGS_INIT;
  a.params = tag ? tag->params : c->params;
  a.instance = tag ? tag->instance : 0;
  a.inputs = in;
  a.n_inputs = n_in;
  a.outputs = out;
  a.n_outputs = n_out;
  a.grad_outputs = gout;
  assert_ok(g, ccg_mapping_apply_backward(g, c->mapping, &a, gin));
  for (size_t i = 0; i < n_in; i++)
    if (gin[i] != CCG_NONE)
      assert_ok(g, ccg_graph_add_output(g, gin[i]));
}

static inline void golden_backward(ccg_graph *g, const golden_case *c,
                                   const ccg_value_id *in, size_t n_in,
                                   const ccg_value_id *out, size_t n_out) {
  golden_backward_of(g, c, in, n_in, out, n_out, false);
}

/* g validated, as a JSON dump ("new"); g is freed. */
static inline char *golden_dump_of(ccg_graph *g) {
  char *text = NULL;
  assert_ok(g, ccg_graph_validate(g));
  assert_ok(g, ccg_graph_dump_string(g, CCG_DUMP_JSON, &text));
  ccg_graph_free(g);
  return text;
}

/* Forward + backward of case c, validated, as a JSON dump ("new"). */
static inline char *golden_dump(const golden_case *c) {
  ccg_value_id in[GOLDEN_MAX_IO], out[GOLDEN_MAX_IO];
  size_t n_in, n_out;
  ccg_graph *g = golden_forward(c, in, &n_in, out, &n_out);
  golden_backward(g, c, in, n_in, out, n_out);
  return golden_dump_of(g);
}

static inline char *golden_read(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *buf = NULL;
  size_t len = 0, cap = 0, got;
  do {
    if (len + 4096 + 1 > cap) {
      cap = (len + 4096 + 1) * 2;
      char *nb = realloc(buf, cap);
      if (!nb)
        break;
      buf = nb;
    }
    got = fread(buf + len, 1, cap - len - 1, f);
    len += got;
  } while (got > 0);
  fclose(f);
  if (buf)
    buf[len] = '\0';
  return buf;
}

/* Fails at the first line where want and got differ. */
static inline void golden_compare(const char *path, const char *want,
                                  const char *got) {
  if (strcmp(want, got) == 0)
    return;
  int line = 1;
  const char *w = want, *g = got;
  while (*w && *w == *g) {
    line += *w == '\n';
    w++, g++;
  }
  const char *we = strchr(w, '\n'), *ge = strchr(g, '\n');
  fail_msg("%s differs at line %d:\n  golden: %.*s\n  got:    %.*s\n"
           "(CCG_UPDATE_GOLDEN=1 rewrites it; review the diff)",
           path, line, we ? (int)(we - w) : (int)strlen(w), w,
           ge ? (int)(ge - g) : (int)strlen(g), g);
}

/* Checks (or with CCG_UPDATE_GOLDEN=1 writes) `got` ("new"; freed here)
 * against tests/data/golden/mappings/<system>/<name>.json. */
static inline void golden_check_text(const char *system, const char *name,
                                     char *got) {
  char path[1024], dir[1024];
  snprintf(path, sizeof path, "%s/golden/mappings/%s/%s.json",
           CCG_TEST_DATA_DIR, system, name);
  const char *upd = getenv("CCG_UPDATE_GOLDEN");
  if (upd && strcmp(upd, "1") == 0) {
    snprintf(dir, sizeof dir, "%s/golden/mappings", CCG_TEST_DATA_DIR);
    mkdir(dir, 0777);
    snprintf(dir, sizeof dir, "%s/golden/mappings/%s", CCG_TEST_DATA_DIR,
             system);
    mkdir(dir, 0777);
    FILE *f = fopen(path, "wb");
    if (!f || fputs(got, f) < 0 || fclose(f) != 0)
      fail_msg("cannot write %s: %s", path, strerror(errno));
    free(got);
    return;
  }
  char *want = golden_read(path);
  if (!want) {
    free(got);
    fail_msg("golden file %s is missing (CCG_UPDATE_GOLDEN=1 writes it)", path);
  }
  golden_compare(path, want, got);
  free(want);
  free(got);
}

/* Checks (or with CCG_UPDATE_GOLDEN=1 writes) the golden file of case c. */
static inline void golden_check(const golden_case *c) {
  golden_check_text(c->system, c->name, golden_dump(c));
}

/* Case c's forward must fail with `want` and a message holding every
 * fragment, leaving the graph as it was. */
#define golden_fails(c, want, ...)                                             \
  golden_fails_impl((c), (want), __FILE__, __LINE__,                           \
                    (const char *[]){__VA_ARGS__, NULL})

static inline void golden_fails_impl(const golden_case *c, ccg_status want,
                                     const char *file, int line,
                                     const char *const *frags) {
  ccg_graph *g = ccg_test_graph_named(c->name, c->mesh);
  ccg_value_id in[GOLDEN_MAX_IO], out[GOLDEN_MAX_IO];
  size_t n_out = GOLDEN_MAX_IO;
  size_t n = golden_inputs(g, c, CCG_DTYPE_F32, in);
  size_t values = ccg_graph_num_values(g), nodes = ccg_graph_num_nodes(g);
  ccg_status st =
      ccg_mapping_apply(g, c->mapping, c->params, in, n, out, &n_out);
  ccg_test_assert_fails(g, want, st, c->name, file, line, frags);
  if (ccg_graph_num_values(g) != values || ccg_graph_num_nodes(g) != nodes)
    fail_msg("%s:%d: %s: the failed call left %zu values and %zu nodes "
             "behind",
             file, line, c->name, ccg_graph_num_values(g) - values,
             ccg_graph_num_nodes(g) - nodes);
  ccg_graph_free(g);
}

/* A typed call's dump and the by-name call's (both "new", freed here) must
 * be the same text; the failure shows both. */
static inline void golden_same_text(char *typed, char *by_name,
                                    const char *what) {
  if (strcmp(typed, by_name) != 0)
    fail_msg("%s: typed call differs from the by-name call:\n%s\n---\n%s", what,
             typed, by_name);
  free(typed);
  free(by_name);
}

/* The typed function `call` on one input "x" of case c's shape gives the
 * graph the by-name call of case c gives (a graph named "typed"), the
 * backward from the tags included when `backward`. */
static inline void golden_same_as_typed(const golden_case *c,
                                        ccg_status (*call)(ccg_graph *,
                                                           ccg_value_id,
                                                           ccg_value_id *),
                                        bool backward) {
  ccg_value_id in[GOLDEN_MAX_IO], out[GOLDEN_MAX_IO];
  size_t n_in, n_out;
  ccg_graph *a = golden_forward(c, in, &n_in, out, &n_out);
  if (backward)
    golden_backward(a, c, in, n_in, out, n_out);
  ccg_graph *b = ccg_test_graph_named(c->name, c->mesh);
  ccg_value_id x = ccg_test_input(b, "x", CCG_DTYPE_F32, c->shapes[0]), y;
  assert_ok(b, call(b, x, &y));
  if (backward)
    golden_backward(b, c, &x, 1, &y, 1);
  golden_same_text(golden_dump_of(b), golden_dump_of(a), c->mapping);
}

/* Runs the group `group`: one test per case (`run` with the case as its
 * state), then `more`. */
static inline int golden_run(const char *group, const golden_case *cases,
                             size_t n, CMUnitTestFunction run,
                             const struct CMUnitTest *more, size_t n_more) {
  struct CMUnitTest *tests = calloc(n + n_more, sizeof *tests);
  if (!tests)
    return 1;
  for (size_t i = 0; i < n; i++)
    tests[i] =
        (struct CMUnitTest){cases[i].name, run, NULL, NULL, (void *)&cases[i]};
  memcpy(tests + n, more, n_more * sizeof *more);
  int rc = _cmocka_run_group_tests(group, tests, n + n_more, NULL, NULL);
  free(tests);
  return rc;
}

#endif
