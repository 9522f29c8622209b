/* Lone TensorProto files (.pb): what ONNX's test data holds for inputs and
 * expected outputs, and what `ccgraph run --input NAME=FILE.pb` reads. The
 * decoding is the model reader's (ccg__onnx_tensor_in) behind the same
 * wire-format scan and byte cap; only the framing differs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/internal.h"
#include "onnx/wire.h"

ccg_status ccg__onnx_dir_of(const char *path, char **dir, const char **base) {
  *dir = strdup(path);
  if (!*dir)
    return ccg__error(NULL, CCG_STATUS_OOM, "%s", path);
  char *slash = strrchr(*dir, '/');
  *base = ".";
  if (slash == *dir)
    *base = "/";
  else if (slash) {
    *slash = '\0';
    *base = *dir;
  }
  return CCG_STATUS_OK;
}

/* Unpacks and converts one TensorProto; the result's data and name are
 * copied out of the protobuf memory into malloc'd blocks. */
static ccg_status decode(const char *path, const uint8_t *data, size_t size,
                         const char *base_dir, size_t max_bytes,
                         ccg_tensor *out, char **name) {
  if (ccg__onnx_wire_check_tensor(data, size) != CCG_STATUS_OK)
    return ccg__error_prefix(NULL, "%s", path);
  ccg__onnx_cap cap;
  ccg__onnx_capped_allocator_init(&cap, max_bytes);
  Onnx__TensorProto *tp =
      onnx__tensor_proto__unpack(ccg__onnx_capped_allocator(&cap), size, data);
  ccg_status st = CCG_STATUS_OK;
  if (!tp) {
    st = ccg__onnx_cap_exceeded(&cap)
             ? ccg__error(NULL, CCG_STATUS_OOM,
                          "%s: decoding the tensor needs more than the "
                          "byte cap of %zu",
                          path, max_bytes)
             : ccg__error(NULL, CCG_STATUS_PARSE,
                          "%s: not an ONNX tensor (the protobuf wire format "
                          "does not decode as a TensorProto)",
                          path);
    ccg__onnx_cap_release(&cap);
    return st;
  }
  ccg_arena a;
  ccg__arena_init(&a, NULL, 0);
  ccg__onnx_src src = {path, base_dir, max_bytes > size ? max_bytes - size : 0,
                       NULL, NULL};
  const char *tname = tp->name ? tp->name : "";
  char role[160];
  snprintf(role, sizeof role, "tensor '%.120s'", tname);
  ccg_tensor t;
  size_t nbytes = 0;
  void *copy = NULL;
  char *ncopy = NULL;
  CCG_CHECK_GOTO(ccg__onnx_tensor_in(&src, &a, tp, role, true, NULL, &t), st,
                 done);
  if (t.dtype == CCG_DTYPE_BOOL) {
    /* Stored as bytes; anything but 0 and 1 would be read as a third
     * truth value by the kernels. */
    size_t n = 0;
    CCG_CHECK_GOTO(ccg_tensor_nbytes(&t, &n), st, done);
    const uint8_t *b = t.data;
    for (size_t i = 0; i < n; i++)
      if (b[i] > 1) {
        st = ccg__error(NULL, CCG_STATUS_PARSE,
                        "%s: %s: BOOL element %zu holds %u (0 or 1 expected)",
                        path, role, i, b[i]);
        goto done;
      }
  }
  CCG_CHECK_GOTO(ccg_tensor_nbytes(&t, &nbytes), st, done);
  /* 64-byte aligned like every buffer the executor plans. */
  copy = aligned_alloc(64, (nbytes + 63) / 64 * 64 + 64);
  ncopy = name ? strdup(tname) : NULL;
  if (!copy || (name && !ncopy)) {
    st = ccg__error(NULL, CCG_STATUS_OOM, "%s: %zu bytes of tensor data", path,
                    nbytes);
    goto done;
  }
  if (nbytes)
    memcpy(copy, t.data, nbytes);
  t.data = copy;
  *out = t;
  if (name)
    *name = ncopy;
  copy = NULL;
  ncopy = NULL;
done:
  free(copy);
  free(ncopy);
  ccg__arena_free(&a);
  ccg__onnx_cap_release(&cap);
  return st;
}

ccg_status ccg_onnx_tensor_read_file(const char *path,
                                     const ccg_onnx_import_options *opts,
                                     ccg_tensor *out, char **name) {
  if (!path || !out)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ONNX tensor read: no file name or output tensor");
  memset(out, 0, sizeof *out);
  if (name)
    *name = NULL;
  ccg_onnx_import_options o;
  CCG_CHECK(ccg__onnx_import_opts(opts, &o));
  size_t max_bytes = o.max_bytes;
  ccg__onnx_file f;
  ccg_status st = ccg__onnx_file_read(path, max_bytes, &f);
  char *dir = NULL;
  const char *base = NULL;
  if (st == CCG_STATUS_OK)
    st = ccg__onnx_dir_of(path, &dir, &base);
  if (st == CCG_STATUS_OK)
    st = decode(path, f.data, f.size, base, max_bytes, out, name);
  free(dir);
  ccg__onnx_file_free(&f);
  return st;
}

void ccg_onnx_tensor_free(ccg_tensor *t) {
  if (!t)
    return;
  free((void *)t->data);
  t->data = NULL;
}

ccg_status ccg_onnx_tensor_write_file(const char *path, const ccg_tensor *t,
                                      const char *name) {
  if (!path || !t)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "ONNX tensor write: no file name or tensor");
  if (t->rank < 0 || t->rank > CCG_MAX_RANK)
    return ccg__error(NULL, CCG_STATUS_SHAPE, "%s: tensor rank %d (0..%d)",
                      path, t->rank, CCG_MAX_RANK);
  if (ccg__onnx_dtype_code(t->dtype) == 0)
    return ccg__error(NULL, CCG_STATUS_DTYPE,
                      "%s: tensor dtype %d has no ONNX type", path,
                      (int)t->dtype);
  size_t nbytes = 0;
  if (ccg_tensor_nbytes(t, &nbytes) != CCG_STATUS_OK)
    return ccg__error_prefix(NULL, "%s", path);
  if (nbytes && !t->data)
    return ccg__error(NULL, CCG_STATUS_INVALID_ARG,
                      "%s: tensor of %zu bytes has no data", path, nbytes);
  ccg_arena a;
  ccg__arena_init(&a, NULL, 0);
  Onnx__TensorProto tp;
  onnx__tensor_proto__init(&tp);
  ccg_status st =
      ccg__onnx_tensor_out(NULL, &a, t, name ? name : "", NULL, SIZE_MAX, &tp);
  uint8_t *buf = NULL;
  size_t size = 0;
  if (st == CCG_STATUS_OK) {
    size = onnx__tensor_proto__get_packed_size(&tp);
    buf = malloc(size ? size : 1);
    if (!buf)
      st = ccg__error(NULL, CCG_STATUS_OOM, "%s: %zu bytes", path, size);
    else
      onnx__tensor_proto__pack(&tp, buf);
  }
  ccg__arena_free(&a);
  if (st != CCG_STATUS_OK) {
    free(buf);
    return ccg__error_prefix(NULL, "%s", path);
  }
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(buf);
    return ccg__error(NULL, CCG_STATUS_IO, "%s: %s", path, strerror(errno));
  }
  bool ok = fwrite(buf, 1, size, f) == size;
  int err = errno;
  if (fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  free(buf);
  if (!ok) {
    remove(path);
    return ccg__error(NULL, CCG_STATUS_IO, "%s: writing: %s", path,
                      strerror(err));
  }
  return CCG_STATUS_OK;
}
