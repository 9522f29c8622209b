/* NumPy .npy files for `ccgraph run`: the magic "\x93NUMPY", a version,
 * the header's length and a Python dict literal {'descr': '<f4',
 * 'fortran_order': False, 'shape': (2, 3), }, then the data in C order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

typedef struct npy_type {
  const char *descr; /* as written; '=' and '<' read alike for these */
  ccg_dtype dtype;
} npy_type;

static const npy_type types[] = {
    {"<f4", CCG_DTYPE_F32}, {"<f2", CCG_DTYPE_F16},  {"<f8", CCG_DTYPE_F64},
    {"<i8", CCG_DTYPE_I64}, {"<i4", CCG_DTYPE_I32},  {"|i1", CCG_DTYPE_I8},
    {"|u1", CCG_DTYPE_U8},  {"|b1", CCG_DTYPE_BOOL},
};
#define N_TYPES (sizeof types / sizeof types[0])

static int bad(const char *cmd, const char *path, const char *what) {
  fprintf(stderr, "ccgraph %s: %s: %s\n", cmd, path, what);
  return EXIT_BAD_INPUT;
}

/* The value after 'key': in the header dict, or NULL. */
static const char *field(const char *h, const char *key) {
  char k[32];
  snprintf(k, sizeof k, "'%s'", key);
  const char *p = strstr(h, k);
  if (!p)
    return NULL;
  p += strlen(k);
  while (*p == ' ' || *p == ':')
    p++;
  return p;
}

static int parse_header(const char *cmd, const char *path, const char *h,
                        ccg_tensor *t) {
  const char *d = field(h, "descr"), *f = field(h, "fortran_order"),
             *s = field(h, "shape");
  if (!d || !f || !s || *d != '\'' || *s != '(')
    return bad(cmd, path,
               "not a NumPy .npy header (descr, fortran_order "
               "and shape are needed)");
  char descr[8] = "";
  const char *e = strchr(d + 1, '\'');
  if (!e || e - d - 1 >= (long)sizeof descr)
    return bad(cmd, path, "bad descr in the .npy header");
  memcpy(descr, d + 1, (size_t)(e - d - 1));
  if (descr[0] == '=')
    descr[0] = descr[1] == 'b' || descr[2] == '1' ? '|' : '<';
  if (descr[0] == '<' && descr[2] == '1' && descr[3] == '\0')
    descr[0] = '|';
  const npy_type *ty = NULL;
  for (size_t i = 0; i < N_TYPES; i++)
    if (strcmp(types[i].descr, descr) == 0)
      ty = &types[i];
  if (!ty) {
    fprintf(stderr,
            "ccgraph %s: %s: NumPy dtype '%s' is not supported (big-endian "
            "or a type ccgraph lacks)\n",
            cmd, path, descr);
    return EXIT_BAD_INPUT;
  }
  if (strncmp(f, "True", 4) == 0)
    return bad(cmd, path,
               "Fortran-order array: save it C-ordered "
               "(numpy.ascontiguousarray)");
  if (strncmp(f, "False", 5) != 0)
    return bad(cmd, path, "bad fortran_order in the .npy header");
  t->dtype = ty->dtype;
  t->rank = 0;
  for (const char *p = s + 1; *p != ')';) {
    while (*p == ' ' || *p == ',')
      p++;
    if (*p == ')')
      break;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || errno || v < 0)
      return bad(cmd, path, "bad shape in the .npy header");
    if (t->rank == CCG_MAX_RANK)
      return bad(cmd, path, "more dims than ccgraph's 8");
    t->dims[t->rank++] = v;
    p = end;
    if (!*p)
      return bad(cmd, path, "unterminated shape in the .npy header");
  }
  return EXIT_OK;
}

int cli_npy_read(const char *cmd, const char *path, ccg_tensor *out) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "ccgraph %s: %s: %s\n", cmd, path, strerror(errno));
    return EXIT_BAD_INPUT;
  }
  int rc = EXIT_OK;
  unsigned char pre[12];
  char *h = NULL;
  void *data = NULL;
  size_t n = fread(pre, 1, 10, f), hlen = 0, skip = 10;
  if (n < 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    rc = bad(cmd, path, "not a NumPy .npy file (no \\x93NUMPY magic)");
    goto out;
  }
  if (pre[6] == 1) {
    hlen = pre[8] | (size_t)pre[9] << 8;
  } else if (pre[6] == 2 || pre[6] == 3) {
    if (fread(pre + 10, 1, 2, f) != 2) {
      rc = bad(cmd, path, "truncated .npy header");
      goto out;
    }
    hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 |
           (size_t)pre[11] << 24;
    skip = 12;
  } else {
    rc = bad(cmd, path, "unknown .npy format version");
    goto out;
  }
  if (hlen > 1 << 20 || !(h = malloc(hlen + 1)) ||
      fread(h, 1, hlen, f) != hlen) {
    rc = bad(cmd, path, "truncated or oversized .npy header");
    goto out;
  }
  h[hlen] = '\0';
  if ((rc = parse_header(cmd, path, h, out)) != EXIT_OK)
    goto out;
  size_t bytes;
  if (ccg_tensor_nbytes(out, &bytes) != CCG_STATUS_OK) {
    rc = bad(cmd, path, "the shape's size overflows");
    goto out;
  }
  if (fseek(f, 0, SEEK_END) != 0 || ftell(f) < 0 ||
      (size_t)ftell(f) - skip - hlen != bytes) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "holds %ld bytes of data, its shape and dtype need %zu",
             ftell(f) < 0 ? -1L : ftell(f) - (long)(skip + hlen), bytes);
    rc = bad(cmd, path, msg);
    goto out;
  }
  if (!(data = malloc(bytes ? bytes : 1)) ||
      fseek(f, (long)(skip + hlen), SEEK_SET) != 0 ||
      fread(data, 1, bytes, f) != bytes) {
    rc = bad(cmd, path, "cannot read its data");
    goto out;
  }
  out->data = data;
  data = NULL;
out:
  free(h);
  free(data);
  fclose(f);
  return rc;
}

int cli_npy_write(const char *cmd, const char *path, const ccg_tensor *t) {
  const char *descr = NULL;
  for (size_t i = 0; i < N_TYPES; i++)
    if (types[i].dtype == t->dtype)
      descr = types[i].descr;
  if (!descr) {
    fprintf(stderr, "ccgraph %s: %s: NumPy has no %s type\n", cmd, path,
            ccg_dtype_name(t->dtype));
    return EXIT_RUNTIME;
  }
  char shape[256] = "";
  size_t used = 0;
  for (int d = 0; d < t->rank; d++)
    used += (size_t)snprintf(shape + used, sizeof shape - used, "%lld,%s",
                             (long long)t->dims[d], d + 1 < t->rank ? " " : "");
  if (t->rank > 1)
    shape[used - 1] = '\0'; /* (2, 3), but (4,) for one dim */
  char h[512];
  int n = snprintf(h, sizeof h,
                   "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                   descr, shape);
  size_t total = 10 + (size_t)n + 1, pad = (64 - total % 64) % 64;
  memset(h + n, ' ', pad);
  h[n + (int)pad] = '\n';
  size_t hlen = (size_t)n + pad + 1, bytes;
  ccg_tensor_nbytes(t, &bytes);
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    fprintf(stderr, "ccgraph %s: %s: %s\n", cmd, path, strerror(errno));
    return EXIT_RUNTIME;
  }
  unsigned char pre[10] = {0x93,
                           'N',
                           'U',
                           'M',
                           'P',
                           'Y',
                           1,
                           0,
                           (unsigned char)(hlen & 0xff),
                           (unsigned char)(hlen >> 8)};
  bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(h, 1, hlen, f) == hlen &&
            (!bytes || fwrite(t->data, 1, bytes, f) == bytes);
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    fprintf(stderr, "ccgraph %s: writing %s: %s\n", cmd, path, strerror(errno));
    unlink(tmp);
    return EXIT_RUNTIME;
  }
  return EXIT_OK;
}
