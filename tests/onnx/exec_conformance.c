/* Runs ONNX's node tests (Debian's libonnx-testdata) through the importer
 * and the executor and compares every output with the stored one, with the
 * tolerance of ONNX's own backend tests (rtol 1e-3, atol 1e-7, NaNs equal;
 * integers and bools exact).
 * usage: exec_conformance [--device cuda] NODE_TEST_DIR [SUBSTRING]
 * With --device cuda every executor runs on the GPU; where none can be used
 * it prints why (the CUDA error text) and exits 77 (skipped).
 * A test is `unsupported` when the importer or the executor refuses it with
 * CCG_STATUS_UNSUPPORTED (the reason is printed); any other failure, a
 * missing output or a mismatch is `failed`. Ends with one line
 * "conformance: N passed, M failed, K unsupported". Exit status 1 when a
 * test failed or fewer than CCG_CONFORMANCE_MIN_PASS passed (on either
 * device). */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ccgraph/ccgraph.h"
#include "exec/kernels_math.h"

/* Tests that must pass, on either device. */
#define CCG_CONFORMANCE_MIN_PASS 734
#define MAX_TENSORS 64
#define RTOL 1e-3
#define EXIT_SKIP 77

static ccg_device device = CCG_DEVICE_CPU;
#define ATOL 1e-7

typedef enum verdict { PASSED, FAILED, UNSUPPORTED } verdict;

typedef struct result {
  char *name;
  verdict v;
  char why[1024];
} result;

static verdict say(result *r, verdict v, const char *fmt, ...) CCG_PRINTF(3, 4);
static verdict say(result *r, verdict v, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->why, sizeof r->why, fmt, ap);
  va_end(ap);
  r->v = v;
  return v;
}

/* "a/b" into buf; false if it does not fit (the caller skips the entry). */
static int join(char *buf, size_t size, const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  if (na + 1 + nb + 1 > size)
    return 0;
  memcpy(buf, a, na);
  buf[na] = '/';
  memcpy(buf + na + 1, b, nb + 1);
  return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The tensors PREFIX_0.pb, PREFIX_1.pb, ... of one data set. */
typedef struct tensor_set {
  size_t n;
  ccg_tensor t[MAX_TENSORS];
  char *name[MAX_TENSORS];
} tensor_set;

static void set_free(tensor_set *s) {
  for (size_t i = 0; i < s->n; i++) {
    ccg_onnx_tensor_free(&s->t[i]);
    free(s->name[i]);
  }
  s->n = 0;
}

static ccg_status set_read(const char *dir, const char *prefix, tensor_set *s) {
  s->n = 0;
  for (size_t i = 0; i < MAX_TENSORS; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s_%zu.pb", dir, prefix, i);
    if (!is_file(path))
      break;
    ccg_status st =
        ccg_onnx_tensor_read_file(path, NULL, &s->t[i], &s->name[i]);
    if (st != CCG_STATUS_OK)
      return st;
    s->n = i + 1;
  }
  return CCG_STATUS_OK;
}

/* The graph value a stored tensor stands for: by its name when the graph
 * has it among `ids`, else by position. */
static const char *value_for(ccg_graph *g, size_t (*count)(const ccg_graph *),
                             ccg_value_id (*at)(const ccg_graph *, size_t),
                             const char *stored, size_t pos) {
  size_t n = count(g);
  for (size_t i = 0; stored && *stored && i < n; i++)
    if (strcmp(ccg_value_name(g, at(g, i)), stored) == 0)
      return stored;
  return pos < n ? ccg_value_name(g, at(g, pos)) : NULL;
}

static double element(const ccg_tensor *t, size_t i) {
  const uint8_t *p = t->data;
  switch (t->dtype) {
  case CCG_DTYPE_F32: {
    float f;
    memcpy(&f, p + 4 * i, 4);
    return f;
  }
  case CCG_DTYPE_F64: {
    double d;
    memcpy(&d, p + 8 * i, 8);
    return d;
  }
  case CCG_DTYPE_F16:
  case CCG_DTYPE_BF16: {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return t->dtype == CCG_DTYPE_F16 ? ccg__f16_to_f32(h) : ccg__bf16_to_f32(h);
  }
  case CCG_DTYPE_I64: {
    int64_t v;
    memcpy(&v, p + 8 * i, 8);
    return (double)v;
  }
  case CCG_DTYPE_I32: {
    int32_t v;
    memcpy(&v, p + 4 * i, 4);
    return v;
  }
  case CCG_DTYPE_I8:
    return (int8_t)p[i];
  default: /* U8, BOOL */
    return p[i];
  }
}

static int is_float(ccg_dtype dt) {
  return dt == CCG_DTYPE_F32 || dt == CCG_DTYPE_F64 || dt == CCG_DTYPE_F16 ||
         dt == CCG_DTYPE_BF16;
}

static void dims_text(const ccg_tensor *t, char *buf, size_t size) {
  int n = snprintf(buf, size, "[");
  for (int d = 0; d < t->rank && n > 0 && (size_t)n < size; d++)
    n += snprintf(buf + n, size - (size_t)n, "%s%lld", d ? "," : "",
                  (long long)t->dims[d]);
  if (n > 0 && (size_t)n < size)
    snprintf(buf + n, size - (size_t)n, "]");
}

/* Compares got with want; on a mismatch says where into r. */
static verdict compare(result *r, const char *set, const char *out,
                       const ccg_tensor *got, const ccg_tensor *want) {
  char gd[128], wd[128];
  dims_text(got, gd, sizeof gd);
  dims_text(want, wd, sizeof wd);
  if (got->dtype != want->dtype)
    return say(r, FAILED, "%s: output '%s': dtype %s, expected %s", set, out,
               ccg_dtype_name(got->dtype), ccg_dtype_name(want->dtype));
  if (got->rank != want->rank ||
      memcmp(got->dims, want->dims, sizeof(int64_t) * (size_t)got->rank))
    return say(r, FAILED, "%s: output '%s': shape %s, expected %s", set, out,
               gd, wd);
  size_t bytes = 0;
  ccg_tensor_nbytes(want, &bytes);
  size_t n = bytes / ccg_dtype_size(want->dtype);
  for (size_t i = 0; i < n; i++) {
    double g = element(got, i), w = element(want, i);
    int ok;
    if (!is_float(want->dtype))
      ok = g == w;
    else if (isnan(w) || isnan(g))
      ok = isnan(w) && isnan(g);
    else if (isinf(w) || isinf(g))
      ok = g == w;
    else
      ok = fabs(g - w) <= ATOL + RTOL * fabs(w);
    if (!ok)
      return say(r, FAILED,
                 "%s: output '%s' %s: first mismatch at index %zu: got %.9g, "
                 "expected %.9g",
                 set, out, wd, i, g, w);
  }
  return PASSED;
}

/* Failures of the importer or the executor: UNSUPPORTED is a refusal. */
static verdict refused(result *r, ccg_status st, const char *stage,
                       const char *msg) {
  return say(r, st == CCG_STATUS_UNSUPPORTED ? UNSUPPORTED : FAILED,
             "%s: %s: %s", stage, ccg_status_name(st), msg);
}

static verdict run_set(result *r, ccg_graph *g, const char *dir,
                       const char *set) {
  tensor_set in = {0}, want = {0};
  ccg_exec_tensor xin[MAX_TENSORS], xout[MAX_TENSORS];
  ccg_exec *x = NULL;
  verdict v = PASSED;
  ccg_status st = set_read(dir, "input", &in);
  if (st == CCG_STATUS_OK)
    st = set_read(dir, "output", &want);
  if (st != CCG_STATUS_OK) {
    /* e.g. bfloat16 data stored as UINT16, a type ccgraph lacks */
    v = say(r, st == CCG_STATUS_UNSUPPORTED ? UNSUPPORTED : FAILED,
            "%s: reading the test data: %s: %s", set, ccg_status_name(st),
            ccg_last_error(NULL));
    goto out;
  }
  if (in.n != ccg_graph_num_inputs(g) || want.n != ccg_graph_num_outputs(g)) {
    v = say(r, FAILED,
            "%s: %zu inputs and %zu outputs stored, the imported graph has "
            "%zu and %zu",
            set, in.n, want.n, ccg_graph_num_inputs(g),
            ccg_graph_num_outputs(g));
    goto out;
  }
  memset(xin, 0, sizeof xin);
  memset(xout, 0, sizeof xout);
  for (size_t i = 0; i < in.n; i++) {
    xin[i].name =
        value_for(g, ccg_graph_num_inputs, ccg_graph_input, in.name[i], i);
    xin[i].tensor = in.t[i];
  }
  for (size_t i = 0; i < want.n; i++)
    xout[i].name =
        value_for(g, ccg_graph_num_outputs, ccg_graph_output, want.name[i], i);
  ccg_exec_options o = CCG_EXEC_OPTIONS_INIT;
  o.device = device;
  o.input_shapes = xin;
  o.n_input_shapes = in.n;
  st = ccg_exec_create(g, &o, &x);
  if (st != CCG_STATUS_OK) {
    v = refused(r, st, "executor", ccg_last_error(g));
    goto out;
  }
  st = ccg_exec_run(x, xin, in.n, xout, want.n);
  if (st != CCG_STATUS_OK) {
    v = refused(r, st, "run", ccg_last_error(x));
    goto out;
  }
  for (size_t i = 0; i < want.n && v == PASSED; i++)
    v = compare(r, set, xout[i].name, &xout[i].tensor, &want.t[i]);
out:
  ccg_exec_free(x);
  set_free(&in);
  set_free(&want);
  return v;
}

static verdict run_test(result *r, const char *dir) {
  char path[4096];
  if (!join(path, sizeof path, dir, "model.onnx"))
    return say(r, FAILED, "path too long");
  ccg_graph *g = NULL;
  ccg_status st = ccg_onnx_import_file(path, NULL, &g);
  if (st != CCG_STATUS_OK)
    return refused(r, st, "import", ccg_last_error(NULL));
  struct dirent **sets = NULL;
  int n = scandir(dir, &sets, NULL, by_name);
  verdict v = PASSED;
  int ran = 0;
  for (int i = 0; i < n; i++) {
    const char *s = sets[i]->d_name;
    if (v == PASSED && strncmp(s, "test_data_set_", 14) == 0 &&
        join(path, sizeof path, dir, s) && is_dir(path)) {
      v = run_set(r, g, path, s);
      ran++;
    }
    free(sets[i]);
  }
  free(sets);
  ccg_graph_free(g);
  if (v == PASSED && !ran)
    return say(r, FAILED, "no test_data_set_* folder");
  return v;
}

/* Can the device run anything? The executor's own refusal says why not. */
static bool device_usable(char *why, size_t size) {
  ccg_graph *g = NULL;
  ccg_exec *x = NULL;
  ccg_value_id a, o;
  ccg_shape s = ccg_shape_make(1, (int64_t[]){1});
  bool ok =
      ccg_graph_new(NULL, &g) == CCG_STATUS_OK &&
      ccg_graph_add_input(g, "a", CCG_DTYPE_F32, &s, &a) == CCG_STATUS_OK &&
      ccg_relu(g, a, &o) == CCG_STATUS_OK &&
      ccg_graph_add_output(g, o) == CCG_STATUS_OK;
  ccg_exec_options opts = CCG_EXEC_OPTIONS_INIT;
  opts.device = device;
  if (ok && ccg_exec_create(g, &opts, &x) != CCG_STATUS_OK) {
    snprintf(why, size, "%s", ccg_last_error(g));
    ok = false;
  }
  ccg_exec_free(x);
  ccg_graph_free(g);
  return ok;
}

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[1], "--device") == 0) {
    if (strcmp(argv[2], "cuda") != 0 && strcmp(argv[2], "cpu") != 0) {
      fprintf(stderr, "exec_conformance: --device %s: give cpu or cuda\n",
              argv[2]);
      return 2;
    }
    device = strcmp(argv[2], "cuda") == 0 ? CCG_DEVICE_CUDA : CCG_DEVICE_CPU;
    argv += 2;
    argc -= 2;
  }
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: exec_conformance [--device cuda] NODE_TEST_DIR "
                    "[SUBSTRING]\n");
    return 2;
  }
  char why[1024];
  if (!device_usable(why, sizeof why)) {
    printf("SKIP: the %s device cannot be used here: %s\n",
           device == CCG_DEVICE_CUDA ? "cuda" : "cpu", why);
    return EXIT_SKIP;
  }
  const char *root = argv[1], *filter = argc > 2 ? argv[2] : NULL;
  struct dirent **ents = NULL;
  int n = scandir(root, &ents, NULL, by_name);
  if (n < 0) {
    fprintf(stderr, "exec_conformance: cannot list '%s'\n", root);
    return 2;
  }
  result *res = calloc((size_t)n + 1, sizeof *res);
  size_t nres = 0, count[3] = {0, 0, 0};
  for (int i = 0; i < n; i++) {
    char dir[4096], model[4200];
    if (ents[i]->d_name[0] != '.' &&
        join(dir, sizeof dir, root, ents[i]->d_name) &&
        join(model, sizeof model, dir, "model.onnx") && is_file(model) &&
        (!filter || strstr(ents[i]->d_name, filter)) && res) {
      result *r = &res[nres++];
      r->name = strdup(ents[i]->d_name);
      count[run_test(r, dir)]++;
    }
    free(ents[i]);
  }
  free(ents);
  if (!res) {
    fprintf(stderr, "exec_conformance: out of memory\n");
    return 2;
  }
  printf("unsupported (%zu):\n", count[UNSUPPORTED]);
  for (size_t i = 0; i < nres; i++)
    if (res[i].v == UNSUPPORTED)
      printf("  %s: %s\n", res[i].name, res[i].why);
  printf("failed (%zu):\n", count[FAILED]);
  for (size_t i = 0; i < nres; i++)
    if (res[i].v == FAILED)
      printf("  FAIL %s: %s\n", res[i].name, res[i].why);
  printf("passed (%zu):", count[PASSED]);
  for (size_t i = 0; i < nres; i++)
    if (res[i].v == PASSED)
      printf(" %s", res[i].name);
  printf("\n");
  printf("conformance: %zu passed, %zu failed, %zu unsupported\n",
         count[PASSED], count[FAILED], count[UNSUPPORTED]);
  int rc = count[FAILED] ? 1 : 0;
  if (!filter && count[PASSED] < CCG_CONFORMANCE_MIN_PASS) {
    printf("fewer than the %d that must pass\n", CCG_CONFORMANCE_MIN_PASS);
    rc = 1;
  }
  for (size_t i = 0; i < nres; i++)
    free(res[i].name);
  free(res);
  return rc;
}
