/* Tensors between the IR and TensorProto: raw little-endian data on the way
 * out (inline or in an external data file), every standard encoding on the
 * way in, with the checks a file from anywhere needs (dims, lengths, and
 * external data confined to the model's folder). */
/* MAP_POPULATE is a Linux extension (glibc: _DEFAULT_SOURCE). */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/internal.h"

#ifndef MAP_POPULATE
#define MAP_POPULATE 0
#endif

/* ---- export ------------------------------------------------------------- */

static Onnx__StringStringEntryProto *entry(ccg_arena *a, const char *k,
                                           const char *v) {
  Onnx__StringStringEntryProto *e = ccg__arena_alloc(a, sizeof *e, 8);
  if (!e)
    return NULL;
  onnx__string_string_entry_proto__init(e);
  e->key = (char *)k;
  e->value = ccg__arena_strdup(a, v);
  return e->value ? e : NULL;
}

static ccg_status write_external(ccg_ctx *ctx, ccg_arena *a,
                                 const ccg_tensor *t, size_t nbytes,
                                 const char *name, ccg__onnx_ext *ext,
                                 Onnx__TensorProto *tp) {
  if (!ext->file) {
    ext->file = fopen(ext->tmp_path, "wb");
    if (!ext->file)
      return ccg__error(ctx, CCG_STATUS_IO, "external data file '%s': %s",
                        ext->tmp_path, strerror(errno));
  }
  /* Each tensor starts 64-byte aligned, so that readers can map the file
   * and use the data in place. */
  static const uint8_t zeros[64];
  size_t pad = (size_t)(-ext->offset & 63);
  if ((pad && fwrite(zeros, 1, pad, ext->file) != pad) ||
      (nbytes && fwrite(t->data, 1, nbytes, ext->file) != nbytes))
    return ccg__error(ctx, CCG_STATUS_IO,
                      "external data file '%s': writing initializer '%s': %s",
                      ext->tmp_path, name, strerror(errno));
  ext->offset += pad;
  char off[32], len[32];
  snprintf(off, sizeof off, "%llu", (unsigned long long)ext->offset);
  snprintf(len, sizeof len, "%zu", nbytes);
  tp->external_data = ccg__arena_calloc(a, 3, sizeof *tp->external_data);
  if (!tp->external_data ||
      !(tp->external_data[0] = entry(a, "location", ext->location)) ||
      !(tp->external_data[1] = entry(a, "offset", off)) ||
      !(tp->external_data[2] = entry(a, "length", len)))
    return ccg__error(ctx, CCG_STATUS_OOM, "exporting initializer '%s'", name);
  tp->n_external_data = 3;
  tp->has_data_location = 1;
  tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  ext->offset += nbytes;
  ext->used = true;
  return CCG_STATUS_OK;
}

ccg_status ccg__onnx_tensor_out(ccg_ctx *ctx, ccg_arena *a, const ccg_tensor *t,
                                const char *name, ccg__onnx_ext *ext,
                                size_t threshold, Onnx__TensorProto *tp) {
  size_t nbytes = 0;
  if (ccg_tensor_nbytes(t, &nbytes) != CCG_STATUS_OK)
    return ccg__error(ctx, CCG_STATUS_SHAPE, "tensor '%s' has an invalid shape",
                      name);
  tp->n_dims = (size_t)t->rank;
  tp->dims = (int64_t *)t->dims;
  tp->has_data_type = 1;
  tp->data_type = ccg__onnx_dtype_code(t->dtype);
  tp->name = (char *)name;
  if (ext && nbytes > threshold)
    return write_external(ctx, a, t, nbytes, name, ext, tp);
  tp->has_raw_data = 1;
  tp->raw_data.len = nbytes;
  tp->raw_data.data = (uint8_t *)t->data;
  return CCG_STATUS_OK;
}

/* ---- import ------------------------------------------------------------- */

/* "location" must name a regular file inside base_dir: relative, no "..",
 * no symlink on the way. */
static ccg_status confine(const ccg__onnx_src *src, const char *role,
                          const char *loc, char *path, size_t size) {
  if (!*loc)
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: %s: external data has an empty location", src->what,
                      role);
  if (loc[0] == '/' || strchr(loc, '\\'))
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: %s: external data location '%s' is not a relative "
                      "path inside the model's folder",
                      src->what, role, loc);
  for (const char *p = loc; *p;) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.')
      return ccg__error(NULL, CCG_STATUS_PARSE,
                        "%s: %s: external data location '%s' leaves the "
                        "model's folder ('..')",
                        src->what, role, loc);
    p += n + (e ? 1 : 0);
  }
  int len = snprintf(path, size, "%s/%s", src->base_dir, loc);
  if (len < 0 || (size_t)len >= size)
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: %s: external data location '%s' is too long",
                      src->what, role, loc);
  /* Every component below base_dir must be a real directory or file. */
  size_t base = strlen(src->base_dir) + 1;
  for (size_t i = base; i <= (size_t)len; i++) {
    if (path[i] != '/' && path[i] != '\0')
      continue;
    char c = path[i];
    path[i] = '\0';
    struct stat st;
    int rc = lstat(path, &st);
    int err = errno;
    path[i] = c;
    if (rc != 0)
      return ccg__error(NULL, CCG_STATUS_IO, "%s: %s: external data '%s': %s",
                        src->what, role, loc, strerror(err));
    if (S_ISLNK(st.st_mode))
      return ccg__error(NULL, CCG_STATUS_PARSE,
                        "%s: %s: external data location '%s' goes through a "
                        "symbolic link",
                        src->what, role, loc);
  }
  return CCG_STATUS_OK;
}

static ccg_status parse_u64(const ccg__onnx_src *src, const char *role,
                            const char *key, const char *text, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (!*text || *end || errno || text[0] == '-')
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: %s: external data %s '%s' is not a byte count",
                      src->what, role, key, text);
  *out = v;
  return CCG_STATUS_OK;
}

static void unmap(void *p, size_t n) { munmap(p, n); }

/* The whole file, mapped read-only once per import and given to the graph
 * being built; NULL (no error) where mapping is not possible. */
static const uint8_t *mapped_file(ccg__onnx_src *src, ccg_arena *a, int fd,
                                  const struct stat *sb) {
  for (ccg__onnx_map *m = src->maps; m; m = m->next)
    if (m->dev == sb->st_dev && m->ino == sb->st_ino)
      return m->base;
  size_t len = (size_t)sb->st_size;
  ccg__onnx_map *m = ccg__arena_alloc(a, sizeof *m, 8);
  if (!m || !len)
    return NULL;
  /* MAP_POPULATE: the weights are resident when import returns, as after a
   * read, but shared with the page cache instead of copied. */
  void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED)
    return NULL;
  if (ccg__graph_own(src->owner, unmap, p, len) != CCG_STATUS_OK)
    return NULL; /* unmapped already; the caller reads instead */
  *m = (ccg__onnx_map){sb->st_dev, sb->st_ino, p, len, src->maps};
  src->maps = m;
  return p;
}

static ccg_status read_external(ccg__onnx_src *src, ccg_arena *a,
                                const Onnx__TensorProto *tp, const char *role,
                                size_t nbytes, bool *mapped, void **data) {
  const char *loc = NULL;
  uint64_t off = 0, len = UINT64_MAX;
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = tp->external_data[i];
    const char *k = e->key ? e->key : "", *v = e->value ? e->value : "";
    if (strcmp(k, "location") == 0)
      loc = v;
    else if (strcmp(k, "offset") == 0)
      CCG_CHECK(parse_u64(src, role, "offset", v, &off));
    else if (strcmp(k, "length") == 0)
      CCG_CHECK(parse_u64(src, role, "length", v, &len));
  }
  if (!loc)
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: %s: external data without a location", src->what,
                      role);
  if (!src->base_dir)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "%s: %s: external data '%s' refused: no base folder "
                      "was given for a model read from memory",
                      src->what, role, loc);
  char path[4096];
  CCG_CHECK(confine(src, role, loc, path, sizeof path));
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return ccg__error(NULL, CCG_STATUS_IO, "%s: %s: external data '%s': %s",
                      src->what, role, loc, strerror(errno));
  ccg_status st = CCG_STATUS_OK;
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    st = ccg__error(NULL, CCG_STATUS_PARSE,
                    "%s: %s: external data '%s' is not a regular file",
                    src->what, role, loc);
    goto out;
  }
  uint64_t fsize = (uint64_t)sb.st_size;
  if (len == UINT64_MAX)
    len = off <= fsize ? fsize - off : 0;
  if (off > fsize || len > fsize - off) {
    st = ccg__error(NULL, CCG_STATUS_PARSE,
                    "%s: %s: external data '%s': offset %llu + length %llu "
                    "is past the end of the file (%llu bytes)",
                    src->what, role, loc, (unsigned long long)off,
                    (unsigned long long)len, (unsigned long long)fsize);
    goto out;
  }
  if (len != nbytes) {
    st = ccg__error(NULL, CCG_STATUS_PARSE,
                    "%s: %s: external data '%s' has %llu bytes, the shape "
                    "needs %zu",
                    src->what, role, loc, (unsigned long long)len, nbytes);
    goto out;
  }
  if (nbytes > src->max_bytes) {
    st = ccg__error(NULL, CCG_STATUS_OOM,
                    "%s: %s: external data of %zu bytes is over the "
                    "import's byte cap",
                    src->what, role, nbytes);
    goto out;
  }
  src->max_bytes -= nbytes;
  if (mapped && src->owner && off % 64 == 0 && nbytes) {
    const uint8_t *base = mapped_file(src, a, fd, &sb);
    if (base) {
      *data = (void *)(base + off);
      *mapped = true;
      goto out;
    }
  }
  uint8_t *buf = ccg__arena_alloc(a, nbytes, 64);
  if (!buf) {
    st = ccg__error(NULL, CCG_STATUS_OOM, "%s: %s: %zu bytes of external data",
                    src->what, role, nbytes);
    goto out;
  }
  for (size_t done = 0; done < nbytes;) {
    ssize_t r = pread(fd, buf + done, nbytes - done, (off_t)(off + done));
    if (r <= 0) {
      st = ccg__error(NULL, CCG_STATUS_IO,
                      "%s: %s: reading external data '%s': %s", src->what, role,
                      loc, r == 0 ? "unexpected end" : strerror(errno));
      goto out;
    }
    done += (size_t)r;
  }
  *data = buf;
out:
  close(fd);
  return st;
}

/* The typed-field encodings: which field holds a dtype and how to widen. */
static ccg_status typed_data(const ccg__onnx_src *src, ccg_arena *a,
                             const Onnx__TensorProto *tp, const char *role,
                             ccg_dtype dt, size_t numel, void **data) {
  size_t have = 0;
  switch (dt) {
  case CCG_DTYPE_F32:
    have = tp->n_float_data;
    break;
  case CCG_DTYPE_F64:
    have = tp->n_double_data;
    break;
  case CCG_DTYPE_I64:
    have = tp->n_int64_data;
    break;
  default:
    have = tp->n_int32_data;
    break;
  }
  if (have != numel)
    return ccg__error(NULL, CCG_STATUS_PARSE,
                      "%s: %s has %zu typed data elements, the shape needs %zu",
                      src->what, role, have, numel);
  size_t es = ccg_dtype_size(dt);
  uint8_t *buf = ccg__arena_alloc(a, numel * es, 64);
  if (!buf)
    return ccg__error(NULL, CCG_STATUS_OOM, "%s: %s", src->what, role);
  for (size_t i = 0; i < numel; i++) {
    switch (dt) {
    case CCG_DTYPE_F32:
      memcpy(buf + 4 * i, &tp->float_data[i], 4);
      break;
    case CCG_DTYPE_F64:
      memcpy(buf + 8 * i, &tp->double_data[i], 8);
      break;
    case CCG_DTYPE_I64:
      memcpy(buf + 8 * i, &tp->int64_data[i], 8);
      break;
    case CCG_DTYPE_I32:
      memcpy(buf + 4 * i, &tp->int32_data[i], 4);
      break;
    case CCG_DTYPE_F16:
    case CCG_DTYPE_BF16: {
      uint16_t h = (uint16_t)tp->int32_data[i];
      memcpy(buf + 2 * i, &h, 2);
      break;
    }
    case CCG_DTYPE_BOOL:
      buf[i] = tp->int32_data[i] != 0;
      break;
    default: /* I8, U8 */
      buf[i] = (uint8_t)tp->int32_data[i];
      break;
    }
  }
  *data = buf;
  return CCG_STATUS_OK;
}

ccg_status ccg__onnx_tensor_in(ccg__onnx_src *src, ccg_arena *a,
                               const Onnx__TensorProto *tp, const char *role,
                               bool borrow_raw, bool *mapped, ccg_tensor *t) {
  memset(t, 0, sizeof *t);
  if (mapped)
    *mapped = false;
  if (tp->segment)
    return ccg__error(NULL, CCG_STATUS_UNSUPPORTED,
                      "%s: %s is a segment of a larger tensor", src->what,
                      role);
  int64_t code = tp->has_data_type ? tp->data_type : 0;
  if (!ccg__onnx_dtype_from_code(code, &t->dtype))
    return ccg__error(NULL, CCG_STATUS_UNSUPPORTED,
                      "%s: %s has data type %s (%lld), which ccgraph does not "
                      "support",
                      src->what, role, ccg__onnx_dtype_code_name(code),
                      (long long)code);
  if (tp->n_dims > CCG_MAX_RANK)
    return ccg__error(NULL, CCG_STATUS_UNSUPPORTED,
                      "%s: %s has rank %zu (at most %d)", src->what, role,
                      tp->n_dims, CCG_MAX_RANK);
  t->rank = (int)tp->n_dims;
  int64_t numel = 1;
  for (size_t i = 0; i < tp->n_dims; i++) {
    int64_t d = tp->dims[i];
    if (d < 0)
      return ccg__error(NULL, CCG_STATUS_PARSE, "%s: %s has dim %zu = %lld",
                        src->what, role, i, (long long)d);
    if (!ccg__mul_i64(numel, d, &numel))
      return ccg__error(NULL, CCG_STATUS_PARSE,
                        "%s: %s: element count overflows at dim %zu", src->what,
                        role, i);
    t->dims[i] = d;
  }
  size_t nbytes;
  if ((uint64_t)numel > SIZE_MAX / 8 ||
      !ccg__mul_size((size_t)numel, ccg_dtype_size(t->dtype), &nbytes))
    return ccg__error(NULL, CCG_STATUS_PARSE, "%s: %s: byte size overflows",
                      src->what, role);
  void *data = NULL;
  if (tp->has_data_location &&
      tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    CCG_CHECK(read_external(src, a, tp, role, nbytes, mapped, &data));
  } else if (tp->has_raw_data) {
    if (tp->raw_data.len != nbytes)
      return ccg__error(NULL, CCG_STATUS_PARSE,
                        "%s: %s has %zu bytes of raw_data, its shape and type "
                        "need %zu",
                        src->what, role, tp->raw_data.len, nbytes);
    /* Copied to aligned memory unless the caller only copies it on:
     * readers may load elements from it. */
    data = borrow_raw ? (void *)tp->raw_data.data
                      : ccg__arena_memdup(a, tp->raw_data.data, nbytes, 64);
    if (!data && nbytes)
      return ccg__error(NULL, CCG_STATUS_OOM, "%s: %s", src->what, role);
  } else if (numel > 0) {
    CCG_CHECK(typed_data(src, a, tp, role, t->dtype, (size_t)numel, &data));
  }
  t->data = data;
  return CCG_STATUS_OK;
}
