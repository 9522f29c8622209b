/* ONNX type codes, dialect names and IR versions. */
#include <assert.h>
#include <strings.h>

#include "onnx/internal.h"

/* IR dtype -> TensorProto.DataType, indexed by ccg_dtype. */
static const int32_t dtype_codes[] = {
    [CCG_DTYPE_UNDEFINED] = ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED,
    [CCG_DTYPE_F32] = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
    [CCG_DTYPE_F16] = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16,
    [CCG_DTYPE_BF16] = ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16,
    [CCG_DTYPE_F64] = ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE,
    [CCG_DTYPE_I64] = ONNX__TENSOR_PROTO__DATA_TYPE__INT64,
    [CCG_DTYPE_I32] = ONNX__TENSOR_PROTO__DATA_TYPE__INT32,
    [CCG_DTYPE_I8] = ONNX__TENSOR_PROTO__DATA_TYPE__INT8,
    [CCG_DTYPE_U8] = ONNX__TENSOR_PROTO__DATA_TYPE__UINT8,
    [CCG_DTYPE_BOOL] = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL,
};
static_assert(sizeof dtype_codes / sizeof dtype_codes[0] == CCG_DTYPE_COUNT,
              "one ONNX code per dtype");

int32_t ccg__onnx_dtype_code(ccg_dtype dt) {
  return (unsigned)dt < CCG_DTYPE_COUNT ? dtype_codes[dt] : 0;
}

bool ccg__onnx_dtype_from_code(int64_t code, ccg_dtype *out) {
  for (int i = 1; i < CCG_DTYPE_COUNT; i++)
    if (dtype_codes[i] == code) {
      *out = (ccg_dtype)i;
      return true;
    }
  return false;
}

const char *ccg__onnx_dtype_code_name(int64_t code) {
  const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
      &onnx__tensor_proto__data_type__descriptor, (int)code);
  return code >= INT32_MIN && code <= INT32_MAX && v ? v->name : "unknown";
}

int64_t ccg__onnx_ir_version(int64_t opset) {
  /* The IR version that came out with each opset (ONNX's release table). */
  if (opset >= 24)
    return 12;
  if (opset >= 23)
    return 11;
  if (opset >= 21)
    return 10;
  if (opset >= 19)
    return 9;
  return 8;
}

static const char *const dialect_names[] = {"ccgraph", "ort"};
static_assert(sizeof dialect_names / sizeof dialect_names[0] ==
                  CCG_ONNX_DIALECT_COUNT,
              "one name per dialect");

const char *ccg_onnx_dialect_name(ccg_onnx_dialect d) {
  return (unsigned)d < CCG_ONNX_DIALECT_COUNT ? dialect_names[d] : "invalid";
}

ccg_status ccg_onnx_dialect_parse(const char *name, ccg_onnx_dialect *out) {
  for (int i = 0; name && i < CCG_ONNX_DIALECT_COUNT; i++)
    if (strcasecmp(name, dialect_names[i]) == 0) {
      *out = (ccg_onnx_dialect)i;
      return CCG_STATUS_OK;
    }
  return ccg__error(NULL, CCG_STATUS_PARSE,
                    "unknown ONNX dialect '%s' (expected ccgraph or ort)",
                    name ? name : "(null)");
}
