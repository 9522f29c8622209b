/* ccgraph graph layer: the IR. A graph is SPMD: it describes what every rank
 * of a device mesh runs, with per-rank (local) shapes. Values and nodes are
 * addressed by ids; everything lives in the graph's arena and is freed with
 * ccg_graph_free. A graph is not thread-safe; two graphs never interfere. */
#ifndef CCGRAPH_GRAPH_H
#define CCGRAPH_GRAPH_H

#include <stdbool.h>
#include <stdio.h>

#include "ccgraph/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- dtypes ------------------------------------------------------------ */

/* X(NAME, short name, element size in bytes) */
#define CCG_DTYPE_LIST(X)                                                      \
  X(UNDEFINED, "undefined", 0)                                                 \
  X(F32, "f32", 4)                                                             \
  X(F16, "f16", 2)                                                             \
  X(BF16, "bf16", 2)                                                           \
  X(F64, "f64", 8)                                                             \
  X(I64, "i64", 8)                                                             \
  X(I32, "i32", 4)                                                             \
  X(I8, "i8", 1)                                                               \
  X(U8, "u8", 1)                                                               \
  X(BOOL, "bool", 1)

/* clang-format off */
typedef enum ccg_dtype {
#define CCG__DTYPE_ENUM(name, str, size) CCG_DTYPE_##name,
  CCG_DTYPE_LIST(CCG__DTYPE_ENUM)
#undef CCG__DTYPE_ENUM
  CCG_DTYPE_COUNT
} ccg_dtype;
/* clang-format on */

/* "f32", ...; "invalid" out of range. Static string. */
CCG_API const char *ccg_dtype_name(ccg_dtype dt);
/* Element size in bytes; 0 for UNDEFINED or out of range. */
CCG_API size_t ccg_dtype_size(ccg_dtype dt);
/* Parses a short name ("bf16"). CCG_STATUS_PARSE if unknown. */
CCG_API ccg_status ccg_dtype_parse(const char *name, ccg_dtype *out);
CCG_API bool ccg_dtype_is_float(ccg_dtype dt);
CCG_API bool ccg_dtype_is_int(ccg_dtype dt);

/* ---- shapes ------------------------------------------------------------ */

#define CCG_MAX_RANK 8
#define CCG_DIM_SYMBOLIC (-1)

/* A dim is a number (size >= 0, sym NULL) or a symbol (size ==
 * CCG_DIM_SYMBOLIC, sym set). Symbols are monomials over named dims, written
 * canonically: "batch", "2*seq", "batch*seq", "seq/4". A symbol of the form
 * "tp{3,5,4,4}" is rank-dependent: its value on the r-th rank of the group
 * over the named mesh axes is the r-th number (uneven collectives). */
typedef struct ccg_dim {
  int64_t size;
  const char *sym;
} ccg_dim;

/* A plain value. Symbols in shapes read from a graph are borrowed from it;
 * shapes passed to a graph are copied in. */
typedef struct ccg_shape {
  int rank;
  ccg_dim dims[CCG_MAX_RANK];
} ccg_shape;

/* A shape of `rank` numeric dims (rank is clamped to 0..CCG_MAX_RANK). */
CCG_API ccg_shape ccg_shape_make(int rank, const int64_t *dims);
#define CCG_SHAPE(...)                                                         \
  ccg_shape_make(                                                              \
      (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),         \
      (const int64_t[]){__VA_ARGS__})
#define CCG_SCALAR_SHAPE ccg_shape_make(0, NULL)
/* Dim constructors. ccg_dim_sym keeps the pointer (copied on entry into a
 * graph). */
CCG_API ccg_dim ccg_dim_num(int64_t size);
CCG_API ccg_dim ccg_dim_sym(const char *sym);
CCG_API bool ccg_dim_is_sym(ccg_dim d);
CCG_API bool ccg_dim_equal(ccg_dim a, ccg_dim b);
CCG_API bool ccg_shape_equal(const ccg_shape *a, const ccg_shape *b);
/* True if every dim is a number. */
CCG_API bool ccg_shape_is_static(const ccg_shape *s);
/* Number of elements; CCG_STATUS_SHAPE if symbolic or on overflow. */
CCG_API ccg_status ccg_shape_numel(const ccg_shape *s, int64_t *out);
/* Writes "[batch,4,16]" (snprintf semantics: returns the length needed). */
CCG_API int ccg_shape_format(const ccg_shape *s, char *buf, size_t size);

/* ---- tensors (initializer data, tensor attributes) --------------------- */

/* Concrete data. `data` is borrowed where passed in (the graph copies it) and
 * borrowed from the graph where read out. Little-endian, row-major. */
typedef struct ccg_tensor {
  ccg_dtype dtype;
  int rank;
  int64_t dims[CCG_MAX_RANK];
  const void *data;
} ccg_tensor;

/* Byte size of a tensor's data; CCG_STATUS_SHAPE on negative dims or
 * overflow. */
CCG_API ccg_status ccg_tensor_nbytes(const ccg_tensor *t, size_t *out);

/* ---- device mesh ------------------------------------------------------- */

#define CCG_MAX_MESH_AXES 4
#define CCG_MESH_NAME_MAX 16

/* An N-D mesh of named axes; ranks are row-major over the axes. A set of axes
 * is a bit mask (bit i = axis i). */
typedef struct ccg_mesh {
  int ndims;
  int64_t sizes[CCG_MAX_MESH_AXES];
  char names[CCG_MAX_MESH_AXES][CCG_MESH_NAME_MAX];
} ccg_mesh;

/* Parses "tp=4" or "dp=2,tp=2". Names: [A-Za-z_][A-Za-z0-9_]*, unique, at
 * most 15 characters; sizes >= 1; product fits in int32. Errors go to the
 * thread's context (ccg_last_error(NULL)) and name the offending part. */
CCG_API ccg_status ccg_mesh_parse(const char *spec, ccg_mesh *out);
/* Writes "dp=2,tp=2" (snprintf semantics). */
CCG_API int ccg_mesh_format(const ccg_mesh *m, char *buf, size_t size);
CCG_API int64_t ccg_mesh_world_size(const ccg_mesh *m);
/* Index of the axis called `name`, or -1. */
CCG_API int ccg_mesh_axis(const ccg_mesh *m, const char *name);
/* Mask of a comma-separated list of axis names ("dp,tp");
 * CCG_STATUS_INVALID_ARG (thread context) naming an unknown or repeated axis.
 */
CCG_API ccg_status ccg_mesh_axes_mask(const ccg_mesh *m, const char *axes,
                                      unsigned *mask);
/* Ranks in the group over `mask` (the product of those axes' sizes). */
CCG_API int64_t ccg_mesh_group_size(const ccg_mesh *m, unsigned mask);
/* Coordinates of a global rank. CCG_STATUS_INVALID_ARG if out of range. */
CCG_API ccg_status ccg_mesh_coords(const ccg_mesh *m, int64_t rank,
                                   int64_t coords[CCG_MAX_MESH_AXES]);
/* Position of `rank` in its group over `mask`: the row-major coordinate along
 * those axes. -1 if rank is out of range. */
CCG_API int64_t ccg_mesh_rank_in_group(const ccg_mesh *m, int64_t rank,
                                       unsigned mask);
/* The global ranks of `rank`'s group over `mask`, in group order; `ranks`
 * holds ccg_mesh_group_size(m, mask) entries. */
CCG_API ccg_status ccg_mesh_group_ranks(const ccg_mesh *m, int64_t rank,
                                        unsigned mask, int64_t *ranks);

/* ---- placements -------------------------------------------------------- */

typedef enum ccg_reduce_op {
  CCG_REDUCE_SUM,
  CCG_REDUCE_PROD,
  CCG_REDUCE_MIN,
  CCG_REDUCE_MAX,
  CCG_REDUCE_AVG,
  CCG_REDUCE_OP_COUNT
} ccg_reduce_op;

/* "sum", "prod", "min", "max", "avg". */
CCG_API const char *ccg_reduce_op_name(ccg_reduce_op op);
CCG_API ccg_status ccg_reduce_op_parse(const char *name, ccg_reduce_op *out);

typedef enum ccg_placement_kind {
  CCG_PLACEMENT_REPLICATE,
  CCG_PLACEMENT_SHARD,
  CCG_PLACEMENT_PARTIAL,
  CCG_PLACEMENT_KIND_COUNT
} ccg_placement_kind;

/* One mesh axis' placement of a value: Replicate, Shard(dim) or
 * Partial(reduce_op), as in DTensor. */
typedef struct ccg_placement {
  ccg_placement_kind kind;
  int dim;              /* SHARD: the tensor dim (normalized, >= 0) */
  ccg_reduce_op reduce; /* PARTIAL */
} ccg_placement;

/* ---- attributes -------------------------------------------------------- */

#define CCG_ATTR_TYPE_LIST(X)                                                  \
  X(INT, "int")                                                                \
  X(FLOAT, "float")                                                            \
  X(STRING, "string")                                                          \
  X(INTS, "ints")                                                              \
  X(FLOATS, "floats")                                                          \
  X(STRINGS, "strings")                                                        \
  X(TENSOR, "tensor")

/* clang-format off */
typedef enum ccg_attr_type {
#define CCG__ATTR_ENUM(name, str) CCG_ATTR_##name,
  CCG_ATTR_TYPE_LIST(CCG__ATTR_ENUM)
#undef CCG__ATTR_ENUM
  CCG_ATTR_TYPE_COUNT
} ccg_attr_type;
/* clang-format on */

CCG_API const char *ccg_attr_type_name(ccg_attr_type t);

/* A typed attribute. Only the field of `type` is read (`n` counts the list
 * types). Passed in: borrowed and copied. Read out: borrowed from the graph. */
typedef struct ccg_attr {
  const char *name;
  ccg_attr_type type;
  int64_t i;
  float f;
  const char *s;
  const int64_t *ints;
  const float *floats;
  const char *const *strings;
  size_t n;
  const ccg_tensor *t;
} ccg_attr;

#define CCG_ATTR_I(nm, v)                                                      \
  ((ccg_attr){.name = (nm), .type = CCG_ATTR_INT, .i = (v)})
#define CCG_ATTR_F(nm, v)                                                      \
  ((ccg_attr){.name = (nm), .type = CCG_ATTR_FLOAT, .f = (v)})
#define CCG_ATTR_S(nm, v)                                                      \
  ((ccg_attr){.name = (nm), .type = CCG_ATTR_STRING, .s = (v)})
#define CCG_ATTR_IS(nm, p, cnt)                                                \
  ((ccg_attr){.name = (nm), .type = CCG_ATTR_INTS, .ints = (p), .n = (cnt)})
#define CCG_ATTR_FS(nm, p, cnt)                                                \
  ((ccg_attr){.name = (nm), .type = CCG_ATTR_FLOATS, .floats = (p), .n = (cnt)})
#define CCG_ATTR_SS(nm, p, cnt)                                                \
  ((ccg_attr){                                                                 \
      .name = (nm), .type = CCG_ATTR_STRINGS, .strings = (p), .n = (cnt)})
#define CCG_ATTR_T(nm, p)                                                      \
  ((ccg_attr){.name = (nm), .type = CCG_ATTR_TENSOR, .t = (p)})

/* ---- the op registry --------------------------------------------------- */

/* X(ID, ONNX name, domain, min inputs, max inputs, min outputs, max outputs).
 * Domain "" is the default ONNX domain (the op's newest version unless its
 * doc in docs/ops.md says otherwise); "ccgraph" is ours. -1 = unbounded.
 * One list per op family: the family's file in src/graph/ gives each op its
 * attributes, shape rule, gradient rule, shard rule and ONNX versions, and
 * the executors' family files its kernels (ccg_op_family). */
/* elementwise.c: arithmetic, Where, Cast, Dropout; math.c: rounding, sign,
 * Clip, trigonometry; activations.c: the other activations */
#define CCG_OP_LIST_ELEMENTWISE(X)                                             \
  X(IDENTITY, "Identity", "", 1, 1, 1, 1)                                      \
  X(ADD, "Add", "", 2, 2, 1, 1)                                                \
  X(SUB, "Sub", "", 2, 2, 1, 1)                                                \
  X(MUL, "Mul", "", 2, 2, 1, 1)                                                \
  X(DIV, "Div", "", 2, 2, 1, 1)                                                \
  X(POW, "Pow", "", 2, 2, 1, 1)                                                \
  X(NEG, "Neg", "", 1, 1, 1, 1)                                                \
  X(RELU, "Relu", "", 1, 1, 1, 1)                                              \
  X(GELU, "Gelu", "", 1, 1, 1, 1)                                              \
  X(TANH, "Tanh", "", 1, 1, 1, 1)                                              \
  X(ERF, "Erf", "", 1, 1, 1, 1)                                                \
  X(SIGMOID, "Sigmoid", "", 1, 1, 1, 1)                                        \
  X(EXP, "Exp", "", 1, 1, 1, 1)                                                \
  X(LOG, "Log", "", 1, 1, 1, 1)                                                \
  X(SQRT, "Sqrt", "", 1, 1, 1, 1)                                              \
  X(WHERE, "Where", "", 3, 3, 1, 1)                                            \
  X(CAST, "Cast", "", 1, 1, 1, 1)                                              \
  X(DROPOUT, "Dropout", "", 1, 3, 1, 2)                                        \
  X(RECIPROCAL, "Reciprocal", "", 1, 1, 1, 1)                                  \
  X(ABS, "Abs", "", 1, 1, 1, 1)                                                \
  X(FLOOR, "Floor", "", 1, 1, 1, 1)                                            \
  X(CEIL, "Ceil", "", 1, 1, 1, 1)                                              \
  X(ROUND, "Round", "", 1, 1, 1, 1)                                            \
  X(SIGN, "Sign", "", 1, 1, 1, 1)                                              \
  X(CLIP, "Clip", "", 1, 3, 1, 1)                                              \
  X(COS, "Cos", "", 1, 1, 1, 1)                                                \
  X(SIN, "Sin", "", 1, 1, 1, 1)                                                \
  X(TAN, "Tan", "", 1, 1, 1, 1)                                                \
  X(ASIN, "Asin", "", 1, 1, 1, 1)                                              \
  X(ACOS, "Acos", "", 1, 1, 1, 1)                                              \
  X(ATAN, "Atan", "", 1, 1, 1, 1)                                              \
  X(SINH, "Sinh", "", 1, 1, 1, 1)                                              \
  X(COSH, "Cosh", "", 1, 1, 1, 1)                                              \
  X(ASINH, "Asinh", "", 1, 1, 1, 1)                                            \
  X(ACOSH, "Acosh", "", 1, 1, 1, 1)                                            \
  X(ATANH, "Atanh", "", 1, 1, 1, 1)                                            \
  X(SOFTPLUS, "Softplus", "", 1, 1, 1, 1)                                      \
  X(SOFTSIGN, "Softsign", "", 1, 1, 1, 1)                                      \
  X(LEAKY_RELU, "LeakyRelu", "", 1, 1, 1, 1)                                   \
  X(ELU, "Elu", "", 1, 1, 1, 1)                                                \
  X(SELU, "Selu", "", 1, 1, 1, 1)                                              \
  X(CELU, "Celu", "", 1, 1, 1, 1)                                              \
  X(HARD_SIGMOID, "HardSigmoid", "", 1, 1, 1, 1)                               \
  X(HARD_SWISH, "HardSwish", "", 1, 1, 1, 1)                                   \
  X(MISH, "Mish", "", 1, 1, 1, 1)                                              \
  X(THRESHOLDED_RELU, "ThresholdedRelu", "", 1, 1, 1, 1)                       \
  X(SHRINK, "Shrink", "", 1, 1, 1, 1)

/* logic.c: comparisons, logic, bitwise ops, variadic Min/Max/Sum/Mean, Mod */
#define CCG_OP_LIST_LOGIC(X)                                                   \
  X(EQUAL, "Equal", "", 2, 2, 1, 1)                                            \
  X(LESS, "Less", "", 2, 2, 1, 1)                                              \
  X(LESS_OR_EQUAL, "LessOrEqual", "", 2, 2, 1, 1)                              \
  X(GREATER, "Greater", "", 2, 2, 1, 1)                                        \
  X(GREATER_OR_EQUAL, "GreaterOrEqual", "", 2, 2, 1, 1)                        \
  X(NOT, "Not", "", 1, 1, 1, 1)                                                \
  X(AND, "And", "", 2, 2, 1, 1)                                                \
  X(OR, "Or", "", 2, 2, 1, 1)                                                  \
  X(XOR, "Xor", "", 2, 2, 1, 1)                                                \
  X(IS_NAN, "IsNaN", "", 1, 1, 1, 1)                                           \
  X(IS_INF, "IsInf", "", 1, 1, 1, 1)                                           \
  X(MIN, "Min", "", 1, -1, 1, 1)                                               \
  X(MAX, "Max", "", 1, -1, 1, 1)                                               \
  X(SUM, "Sum", "", 1, -1, 1, 1)                                               \
  X(MEAN, "Mean", "", 1, -1, 1, 1)                                             \
  X(MOD, "Mod", "", 2, 2, 1, 1)                                                \
  X(PRELU, "PRelu", "", 2, 2, 1, 1)                                            \
  X(BIT_SHIFT, "BitShift", "", 2, 2, 1, 1)                                     \
  X(BITWISE_AND, "BitwiseAnd", "", 2, 2, 1, 1)                                 \
  X(BITWISE_OR, "BitwiseOr", "", 2, 2, 1, 1)                                   \
  X(BITWISE_XOR, "BitwiseXor", "", 2, 2, 1, 1)                                 \
  X(BITWISE_NOT, "BitwiseNot", "", 1, 1, 1, 1)

/* matmul.c */
#define CCG_OP_LIST_MATMUL(X)                                                  \
  X(MATMUL, "MatMul", "", 2, 2, 1, 1)                                          \
  X(GEMM, "Gemm", "", 2, 3, 1, 1)

/* norm.c: softmaxes and normalizations */
#define CCG_OP_LIST_NORM(X)                                                    \
  X(SOFTMAX, "Softmax", "", 1, 1, 1, 1)                                        \
  X(LAYER_NORM, "LayerNormalization", "", 2, 3, 1, 3)                          \
  X(LOG_SOFTMAX, "LogSoftmax", "", 1, 1, 1, 1)                                 \
  X(HARDMAX, "Hardmax", "", 1, 1, 1, 1)                                        \
  X(RMS_NORM, "RMSNormalization", "", 2, 2, 1, 1)                              \
  X(BATCH_NORM, "BatchNormalization", "", 5, 5, 1, 3)                          \
  X(INSTANCE_NORM, "InstanceNormalization", "", 3, 3, 1, 1)                    \
  X(GROUP_NORM, "GroupNormalization", "", 3, 3, 1, 1)                          \
  X(MVN, "MeanVarianceNormalization", "", 1, 1, 1, 1)                          \
  X(ROTARY_EMBEDDING, "RotaryEmbedding", "", 3, 4, 1, 1)                       \
  X(ATTENTION, "Attention", "", 3, 6, 1, 4)

/* reduce.c */
#define CCG_OP_LIST_REDUCE(X)                                                  \
  X(REDUCE_SUM, "ReduceSum", "", 1, 1, 1, 1)                                   \
  X(REDUCE_MEAN, "ReduceMean", "", 1, 1, 1, 1)                                 \
  X(REDUCE_MAX, "ReduceMax", "", 1, 1, 1, 1)                                   \
  X(REDUCE_MIN, "ReduceMin", "", 1, 1, 1, 1)                                   \
  X(REDUCE_PROD, "ReduceProd", "", 1, 1, 1, 1)                                 \
  X(REDUCE_L1, "ReduceL1", "", 1, 1, 1, 1)                                     \
  X(REDUCE_L2, "ReduceL2", "", 1, 1, 1, 1)                                     \
  X(REDUCE_SUM_SQUARE, "ReduceSumSquare", "", 1, 1, 1, 1)                      \
  X(REDUCE_LOG_SUM, "ReduceLogSum", "", 1, 1, 1, 1)                            \
  X(REDUCE_LOG_SUM_EXP, "ReduceLogSumExp", "", 1, 1, 1, 1)

/* loss.c: training losses */
#define CCG_OP_LIST_LOSS(X)                                                    \
  X(SOFTMAX_CROSS_ENTROPY_LOSS, "SoftmaxCrossEntropyLoss", "", 2, 3, 1, 2)     \
  X(NEGATIVE_LOG_LIKELIHOOD_LOSS, "NegativeLogLikelihoodLoss", "", 2, 3, 1, 1)

/* shape.c, layout.c (Transpose, Concat, Split) */
#define CCG_OP_LIST_SHAPE(X)                                                   \
  X(RESHAPE, "Reshape", "", 2, 2, 1, 1)                                        \
  X(TRANSPOSE, "Transpose", "", 1, 1, 1, 1)                                    \
  X(CONCAT, "Concat", "", 1, -1, 1, 1)                                         \
  X(SPLIT, "Split", "", 1, 1, 1, -1)                                           \
  X(UNSQUEEZE, "Unsqueeze", "", 1, 1, 1, 1)                                    \
  X(SQUEEZE, "Squeeze", "", 1, 1, 1, 1)                                        \
  X(EXPAND, "Expand", "", 2, 2, 1, 1)                                          \
  X(SHAPE, "Shape", "", 1, 1, 1, 1)                                            \
  X(CONSTANT, "Constant", "", 0, 0, 1, 1)                                      \
  X(CONSTANT_OF_SHAPE, "ConstantOfShape", "", 1, 1, 1, 1)

/* data.c, rearrange.c (Tile, Pad, DepthToSpace, SpaceToDepth), einsum.c */
#define CCG_OP_LIST_DATA(X)                                                    \
  X(RANGE, "Range", "", 3, 3, 1, 1)                                            \
  X(TRILU, "Trilu", "", 1, 2, 1, 1)                                            \
  X(CUMSUM, "CumSum", "", 2, 2, 1, 1)                                          \
  X(FLATTEN, "Flatten", "", 1, 1, 1, 1)                                        \
  X(SIZE, "Size", "", 1, 1, 1, 1)                                              \
  X(CAST_LIKE, "CastLike", "", 2, 2, 1, 1)                                     \
  X(TILE, "Tile", "", 2, 2, 1, 1)                                              \
  X(PAD, "Pad", "", 2, 4, 1, 1)                                                \
  X(ONE_HOT, "OneHot", "", 3, 3, 1, 1)                                         \
  X(DEPTH_TO_SPACE, "DepthToSpace", "", 1, 1, 1, 1)                            \
  X(SPACE_TO_DEPTH, "SpaceToDepth", "", 1, 1, 1, 1)                            \
  X(EINSUM, "Einsum", "", 1, -1, 1, 1)                                         \
  X(EYE_LIKE, "EyeLike", "", 1, 1, 1, 1)

/* index.c */
#define CCG_OP_LIST_INDEX(X)                                                   \
  X(SLICE, "Slice", "", 3, 5, 1, 1)                                            \
  X(GATHER, "Gather", "", 2, 2, 1, 1)                                          \
  X(SCATTER_ND, "ScatterND", "", 3, 3, 1, 1)                                   \
  X(GATHER_ND, "GatherND", "", 2, 2, 1, 1)

/* select.c: GatherElements, ScatterElements, TopK, ArgMax/ArgMin, NonZero */
#define CCG_OP_LIST_SELECT(X)                                                  \
  X(ARG_MAX, "ArgMax", "", 1, 1, 1, 1)                                         \
  X(ARG_MIN, "ArgMin", "", 1, 1, 1, 1)                                         \
  X(GATHER_ELEMENTS, "GatherElements", "", 2, 2, 1, 1)                         \
  X(SCATTER_ELEMENTS, "ScatterElements", "", 3, 3, 1, 1)                       \
  X(TOP_K, "TopK", "", 2, 2, 2, 2)                                             \
  X(NON_ZERO, "NonZero", "", 1, 1, 1, 1)                                       \
  X(COMPRESS, "Compress", "", 2, 2, 1, 1)

/* vision.c: convolutions, pooling, Resize */
#define CCG_OP_LIST_VISION(X)                                                  \
  X(CONV, "Conv", "", 2, 3, 1, 1)                                              \
  X(CONV_TRANSPOSE, "ConvTranspose", "", 2, 3, 1, 1)                           \
  X(MAX_POOL, "MaxPool", "", 1, 1, 1, 2)                                       \
  X(AVERAGE_POOL, "AveragePool", "", 1, 1, 1, 1)                               \
  X(GLOBAL_AVERAGE_POOL, "GlobalAveragePool", "", 1, 1, 1, 1)                  \
  X(GLOBAL_MAX_POOL, "GlobalMaxPool", "", 1, 1, 1, 1)                          \
  X(RESIZE, "Resize", "", 1, 4, 1, 1)

/* collective.c */
#define CCG_OP_LIST_COLLECTIVE(X)                                              \
  X(ALL_REDUCE, "AllReduce", "ccgraph", 1, 1, 1, 1)                            \
  X(ALL_GATHER, "AllGather", "ccgraph", 1, 1, 1, 1)                            \
  X(REDUCE_SCATTER, "ReduceScatter", "ccgraph", 1, 1, 1, 1)                    \
  X(ALL_TO_ALL, "AllToAll", "ccgraph", 1, 1, 1, 1)                             \
  X(SHARD_SLICE, "ShardSlice", "ccgraph", 1, 1, 1, 1)                          \
  X(BROADCAST, "Broadcast", "ccgraph", 1, 1, 1, 1)                             \
  X(REDUCE, "Reduce", "ccgraph", 1, 1, 1, 1)                                   \
  X(SEND, "Send", "ccgraph", 1, 1, 0, 0)                                       \
  X(RECV, "Recv", "ccgraph", 0, 0, 1, 1)                                       \
  X(COLLECTIVE_PERMUTE, "CollectivePermute", "ccgraph", 1, 1, 1, 1)

#define CCG_OP_LIST(X)                                                         \
  CCG_OP_LIST_ELEMENTWISE(X)                                                   \
  CCG_OP_LIST_LOGIC(X)                                                         \
  CCG_OP_LIST_MATMUL(X)                                                        \
  CCG_OP_LIST_NORM(X)                                                          \
  CCG_OP_LIST_REDUCE(X)                                                        \
  CCG_OP_LIST_LOSS(X)                                                          \
  CCG_OP_LIST_SHAPE(X)                                                         \
  CCG_OP_LIST_DATA(X)                                                          \
  CCG_OP_LIST_INDEX(X)                                                         \
  CCG_OP_LIST_SELECT(X)                                                        \
  CCG_OP_LIST_VISION(X)                                                        \
  CCG_OP_LIST_COLLECTIVE(X)

/* The op families, in CCG_OP_LIST's order: which family file of each layer
 * holds an op's rules and kernels. */
#define CCG_OP_FAMILY_LIST(X)                                                  \
  X(ELEMENTWISE, "elementwise")                                                \
  X(LOGIC, "logic")                                                            \
  X(MATMUL, "matmul")                                                          \
  X(NORM, "norm")                                                              \
  X(REDUCE, "reduce")                                                          \
  X(LOSS, "loss")                                                              \
  X(SHAPE, "shape")                                                            \
  X(DATA, "data")                                                              \
  X(INDEX, "index")                                                            \
  X(SELECT, "select")                                                          \
  X(VISION, "vision")                                                          \
  X(COLLECTIVE, "collective")

/* clang-format off */
typedef enum ccg_op {
#define CCG__OP_ENUM(id, name, domain, imin, imax, omin, omax) CCG_OP_##id,
  CCG_OP_LIST(CCG__OP_ENUM)
#undef CCG__OP_ENUM
  CCG_OP_COUNT
} ccg_op;
/* clang-format on */

/* clang-format off */
typedef enum ccg_op_family {
#define CCG__OP_FAMILY_ENUM(id, name) CCG_OP_FAMILY_##id,
  CCG_OP_FAMILY_LIST(CCG__OP_FAMILY_ENUM)
#undef CCG__OP_FAMILY_ENUM
  CCG_OP_FAMILY_COUNT
} ccg_op_family;
/* clang-format on */

/* How the shard pass carries placements through an op (and what the
 * placement check expects of it). */
typedef enum ccg_op_shard {
  CCG_OP_SHARD_REPLICATE, /* no rule: inputs are made replicated first */
  CCG_OP_SHARD_KEEP,      /* one data input, element i -> element i: a
                             placement goes through unchanged */
  CCG_OP_SHARD_BROADCAST, /* elementwise over broadcast inputs: Shard(d)
                             of the output's dims is kept */
  CCG_OP_SHARD_OWN,       /* the shard pass has a rule of its own */
  CCG_OP_SHARD_COUNT
} ccg_op_shard;

#define CCG_DOMAIN_ONNX ""
#define CCG_DOMAIN_CCGRAPH "ccgraph"

/* Registry look-ups. ccg_op_find returns CCG_STATUS_UNSUPPORTED (thread
 * context) naming op and domain when absent. Names are static strings. */
CCG_API ccg_status ccg_op_find(const char *domain, const char *name,
                               ccg_op *out);
CCG_API const char *ccg_op_name(ccg_op op);
CCG_API const char *ccg_op_domain(ccg_op op);
CCG_API bool ccg_op_is_collective(ccg_op op);
/* The family an op belongs to (its list in CCG_OP_LIST). */
CCG_API ccg_op_family ccg_op_family_of(ccg_op op);
CCG_API const char *ccg_op_family_name(ccg_op_family f);
/* The op's shard rule kind. */
CCG_API ccg_op_shard ccg_op_shard_rule(ccg_op op);
/* Ops of the default ONNX domain: the lowest ai.onnx opset whose version of
 * the op means what the IR's op means (import refuses older ones by name);
 * 0 for ops of other domains. */
CCG_API int ccg_op_onnx_since(ccg_op op);
/* The dtypes of the op's main data input its rules take, one bit per
 * ccg_dtype (1u << CCG_DTYPE_F32, ...); 0 when the op does not say. */
CCG_API unsigned ccg_op_dtypes(ccg_op op);
/* Whether the op has a gradient rule (the backward pass can cross it). */
CCG_API bool ccg_op_has_grad(ccg_op op);
CCG_API const char *ccg_op_shard_name(ccg_op_shard s);

/* Arity; -1 max means unbounded. */
CCG_API void ccg_op_arity(ccg_op op, int *min_in, int *max_in, int *min_out,
                          int *max_out);
/* The op's attributes, in declaration order: name, type, whether required,
 * and the default used when absent (NULL `dflt` for required ones or list
 * defaults that are empty). Returns the count; i past it gives NULL name. */
CCG_API size_t ccg_op_num_attrs(ccg_op op);
CCG_API const char *ccg_op_attr_info(ccg_op op, size_t i, ccg_attr_type *type,
                                     bool *required);

/* ---- graphs ------------------------------------------------------------ */

typedef struct ccg_graph ccg_graph;
typedef uint32_t ccg_value_id;
typedef uint32_t ccg_node_id;
#define CCG_NONE UINT32_MAX

typedef enum ccg_value_kind {
  CCG_VALUE_INPUT,
  CCG_VALUE_INITIALIZER,
  CCG_VALUE_NODE_OUTPUT,
  CCG_VALUE_KIND_COUNT
} ccg_value_kind;

typedef struct ccg_graph_options {
  size_t size;                    /* sizeof(ccg_graph_options) */
  const char *name;               /* default "graph" */
  const ccg_allocator *allocator; /* default libc; copied */
} ccg_graph_options;
#define CCG_GRAPH_OPTIONS_INIT                                                 \
  { sizeof(ccg_graph_options), NULL, NULL }

/* A new empty graph. "new": free with ccg_graph_free. opts may be NULL.
 * Failures go to the thread's context. */
CCG_API ccg_status ccg_graph_new(const ccg_graph_options *opts,
                                 ccg_graph **out);
CCG_API void ccg_graph_free(ccg_graph *g);
/* Borrowed. */
CCG_API const char *ccg_graph_name(const ccg_graph *g);

/* The graph's device mesh (copied). Collectives need one; it can be set
 * once before the first collective and then only to an equal mesh. */
CCG_API ccg_status ccg_graph_set_mesh(ccg_graph *g, const ccg_mesh *mesh);
/* Borrowed; NULL if none was set. */
CCG_API const ccg_mesh *ccg_graph_mesh(const ccg_graph *g);

/* Graph metadata: string key/value pairs the model carries (ONNX
 * ModelProto.metadata_props under keys of its own, such as the shard pass's
 * "ccgraph.shard.provenance"). Setting a key again replaces its value;
 * strings are copied. */
CCG_API ccg_status ccg_graph_set_meta(ccg_graph *g, const char *key,
                                      const char *value);
/* Borrowed; NULL when the graph has no such key. */
CCG_API const char *ccg_graph_meta(const ccg_graph *g, const char *key);
/* The i-th pair (in the order first set): its key, value into *value;
 * NULL past the last. */
CCG_API const char *ccg_graph_meta_at(const ccg_graph *g, size_t i,
                                      const char **value);

/* Graph inputs, initializers (weights; data copied into the graph) and
 * outputs. Names must be unique across all values of the graph. */
CCG_API ccg_status ccg_graph_add_input(ccg_graph *g, const char *name,
                                       ccg_dtype dtype, const ccg_shape *shape,
                                       ccg_value_id *out);
CCG_API ccg_status ccg_graph_add_initializer(ccg_graph *g, const char *name,
                                             const ccg_tensor *data,
                                             ccg_value_id *out);
CCG_API ccg_status ccg_graph_add_output(ccg_graph *g, ccg_value_id v);

/* Name scopes prefix the names of nodes created afterwards:
 * push("layers.0"), push("mlp") makes "/layers.0/mlp/MatMul_3", the form
 * torch.onnx.export writes. */
CCG_API ccg_status ccg_graph_push_scope(ccg_graph *g, const char *name);
CCG_API void ccg_graph_pop_scope(ccg_graph *g);

CCG_API size_t ccg_graph_num_values(const ccg_graph *g);
CCG_API size_t ccg_graph_num_nodes(const ccg_graph *g);
CCG_API size_t ccg_graph_num_inputs(const ccg_graph *g);
CCG_API size_t ccg_graph_num_outputs(const ccg_graph *g);
CCG_API size_t ccg_graph_num_initializers(const ccg_graph *g);
CCG_API ccg_value_id ccg_graph_input(const ccg_graph *g, size_t i);
CCG_API ccg_value_id ccg_graph_output(const ccg_graph *g, size_t i);
CCG_API ccg_value_id ccg_graph_initializer(const ccg_graph *g, size_t i);
/* Renames value v (the name is copied); INVALID_ARG naming both when
 * another value has that name. */
CCG_API ccg_status ccg_value_set_name(ccg_graph *g, ccg_value_id v,
                                      const char *name);
/* CCG_STATUS_INVALID_ARG (on g) naming the value if absent. */
CCG_API ccg_status ccg_graph_find_value(ccg_graph *g, const char *name,
                                        ccg_value_id *out);
CCG_API ccg_status ccg_graph_find_node(ccg_graph *g, const char *name,
                                       ccg_node_id *out);

/* Value accessors. Out-of-range ids give NULL / UNDEFINED / CCG_NONE.
 * Pointers returned (names, shapes, data) are borrowed: names and data live
 * as long as the graph, a shape pointer only until the next value is added
 * (copy the ccg_shape to keep it; its symbols live as long as the graph). */
CCG_API const char *ccg_value_name(const ccg_graph *g, ccg_value_id v);
CCG_API ccg_dtype ccg_value_dtype(const ccg_graph *g, ccg_value_id v);
CCG_API const ccg_shape *ccg_value_shape(const ccg_graph *g, ccg_value_id v);
CCG_API ccg_value_kind ccg_value_kind_of(const ccg_graph *g, ccg_value_id v);
/* The node producing v, CCG_NONE for inputs and initializers. */
CCG_API ccg_node_id ccg_value_producer(const ccg_graph *g, ccg_value_id v);
/* Initializer data (borrowed); NULL for other values. */
CCG_API const ccg_tensor *ccg_value_data(const ccg_graph *g, ccg_value_id v);
/* Per-rank initializer data: the weight shard `rank` (a global rank of the
 * mesh; 0 without one) holds, for per-rank export. It must have the
 * initializer's dtype and dims; data is copied into the graph. Ranks without
 * their own data use the common data. Errors (on g) name the value and rank.
 */
CCG_API ccg_status ccg_graph_set_initializer_rank_data(ccg_graph *g,
                                                       ccg_value_id v,
                                                       int64_t rank,
                                                       const ccg_tensor *t);
/* The data rank `rank` holds (its own, else the common data); borrowed. NULL
 * for values that are not initializers. */
CCG_API const ccg_tensor *ccg_value_rank_data(const ccg_graph *g,
                                              ccg_value_id v, int64_t rank);
/* True if rank `rank` has data of its own for v. */
CCG_API bool ccg_value_has_rank_data(const ccg_graph *g, ccg_value_id v,
                                     int64_t rank);
/* Known contents of a small integer value (a shape computed from Shape,
 * Gather, Concat, ... or a constant): up to CCG_MAX_RANK elements, each a
 * number or a symbol. Returns the element count, or -1 if not known. */
CCG_API int ccg_value_known(const ccg_graph *g, ccg_value_id v, ccg_dim *elems);

/* Placements: one per mesh axis (n == the mesh's ndims). Shard dims are
 * checked against the value's rank and normalized. */
CCG_API ccg_status ccg_value_set_placements(ccg_graph *g, ccg_value_id v,
                                            const ccg_placement *p, int n);
/* Copies the placements into p (CCG_MAX_MESH_AXES entries); returns their
 * count, 0 when the value has none. */
CCG_API int ccg_value_placements(const ccg_graph *g, ccg_value_id v,
                                 ccg_placement *p);

/* A node, for generic construction (importers, passes). Optional inputs
 * that are omitted are CCG_NONE. Output names may be NULL (or a NULL entry)
 * for generated names "<node>_output_<i>". The name may be NULL for
 * "<scope>/<Op>_<k>". Shapes and dtypes of the outputs are inferred; an
 * error names the node, the op and the values at fault and leaves the graph
 * unchanged. */
typedef struct ccg_node_desc {
  size_t size; /* sizeof(ccg_node_desc) */
  const char *op;
  const char *domain; /* NULL or "" = ONNX */
  const char *name;
  const ccg_value_id *inputs;
  size_t n_inputs;
  const ccg_attr *attrs;
  size_t n_attrs;
  size_t n_outputs;
  const char *const *output_names;
} ccg_node_desc;
#define CCG_NODE_DESC_INIT                                                     \
  { sizeof(ccg_node_desc), NULL, NULL, NULL, NULL, 0, NULL, 0, 1, NULL }

CCG_API ccg_status ccg_graph_add_node(ccg_graph *g, const ccg_node_desc *desc,
                                      ccg_node_id *out);

/* The consumer index: the uses of value v as a node input, in the order
 * the nodes were added (a node reading v in two slots appears twice). The
 * graph keeps it as nodes are added, so a pass may add nodes while it
 * iterates. ccg_value_next_use: start with *cursor = 0; each call gives
 * the next use's node and input slot (either may be NULL) and returns
 * true, then false after the last. */
CCG_API size_t ccg_value_num_uses(const ccg_graph *g, ccg_value_id v);
CCG_API bool ccg_value_next_use(const ccg_graph *g, ccg_value_id v,
                                size_t *cursor, ccg_node_id *node,
                                size_t *slot);

/* Node accessors (borrowed). */
CCG_API ccg_op ccg_node_op(const ccg_graph *g, ccg_node_id n);
CCG_API const char *ccg_node_name(const ccg_graph *g, ccg_node_id n);
CCG_API size_t ccg_node_num_inputs(const ccg_graph *g, ccg_node_id n);
CCG_API ccg_value_id ccg_node_input(const ccg_graph *g, ccg_node_id n,
                                    size_t i);
CCG_API size_t ccg_node_num_outputs(const ccg_graph *g, ccg_node_id n);
CCG_API ccg_value_id ccg_node_output(const ccg_graph *g, ccg_node_id n,
                                     size_t i);
CCG_API size_t ccg_node_num_attrs(const ccg_graph *g, ccg_node_id n);
/* The i-th written attribute, in the order written; NULL past the end. */
CCG_API const ccg_attr *ccg_node_attr_at(const ccg_graph *g, ccg_node_id n,
                                         size_t i);
/* The written attribute `name`, or NULL if it was not written. */
CCG_API const ccg_attr *ccg_node_attr(const ccg_graph *g, ccg_node_id n,
                                      const char *name);
/* Reads an int/float/string attribute, falling back to the op's default.
 * CCG_STATUS_INVALID_ARG (on g) if absent with no default or of another
 * type. */
CCG_API ccg_status ccg_node_attr_int(ccg_graph *g, ccg_node_id n,
                                     const char *name, int64_t *out);
CCG_API ccg_status ccg_node_attr_float(ccg_graph *g, ccg_node_id n,
                                       const char *name, float *out);
CCG_API ccg_status ccg_node_attr_string(ccg_graph *g, ccg_node_id n,
                                        const char *name, const char **out);

/* Mapping tags: which mapping inserted a node. `instance` groups the nodes
 * of one application of a mapping; `params` is the mapping's parameters as
 * a JSON object text (or NULL); `backward` marks nodes its backward rule
 * inserted. Strings are copied. */
typedef struct ccg_tag {
  const char *mapping;
  uint32_t instance;
  const char *params;
  bool backward;
} ccg_tag;
CCG_API ccg_status ccg_node_set_tag(ccg_graph *g, ccg_node_id n,
                                    const ccg_tag *tag);
/* Borrowed; NULL when the node has no tag. */
CCG_API const ccg_tag *ccg_node_tag(const ccg_graph *g, ccg_node_id n);

/* Node metadata: string key/value pairs a model carries per node (ONNX
 * NodeProto.metadata_props, such as torch's "pkg.torch.onnx.name_scopes",
 * the module path the shard pass matches plans on). Setting a key again
 * replaces its value; strings are copied. */
CCG_API ccg_status ccg_node_set_meta(ccg_graph *g, ccg_node_id n,
                                     const char *key, const char *value);
/* Borrowed; NULL when the node has no such key. */
CCG_API const char *ccg_node_meta(const ccg_graph *g, ccg_node_id n,
                                  const char *key);
/* The i-th pair (in the order first set): its key, value into *value;
 * NULL past the last. */
CCG_API const char *ccg_node_meta_at(const ccg_graph *g, ccg_node_id n,
                                     size_t i, const char **value);

/* ---- pinning symbolic dims --------------------------------------------- */

/* Gives named symbolic dims numbers: every graph input dim that is one of
 * the symbols (or a monomial of them: "2*seq", "batch*seq") becomes
 * names[i] = values[i], and every shape rule runs again, so the shapes and
 * known contents computed from them (Shape, Reshape targets) are numbers
 * too; symbols not named stay. Node and value ids, names, metadata and
 * placements stay. On success *g is the pinned graph, which owns the old
 * one (freed with it; its initializer data is shared); on failure *g is
 * unchanged and the error (on *g) names the fault: a name no input dim
 * uses, a value below 1, one name given two values, a dim that would not
 * be a whole number, a node whose shape rule the numbers contradict. */
CCG_API ccg_status ccg_graph_pin_dims(ccg_graph **g, const char *const *names,
                                      const int64_t *values, size_t n);

/* ---- checks, order, dumps ---------------------------------------------- */

/* Checks the whole graph: unique names and single assignment, every input
 * defined, no cycle, every node's dtypes and shapes consistent with its op's
 * rule, outputs and placements valid. The first problem found is reported
 * (on g) naming node, op and value. */
CCG_API ccg_status ccg_graph_validate(ccg_graph *g);

/* Schedule slots: node metadata with a decimal number. Among the nodes
 * ready to run, the topological order takes those of the lowest slot first
 * (a node without one is slot 0), so a pipeline stage's microbatches run
 * in its schedule's order. The backward pass gives the nodes it derives
 * from a node that has CCG_META_GRAD_SLOT that number as their slot. */
#define CCG_META_SLOT "ccgraph.slot"
#define CCG_META_GRAD_SLOT "ccgraph.grad_slot"

/* A topological order of all nodes, the same for equal graphs (ready nodes
 * by slot, ties go to the node created first). `order` holds
 * ccg_graph_num_nodes(g) entries. CCG_STATUS_INVALID_ARG naming a node on a
 * cycle. */
CCG_API ccg_status ccg_graph_topo_order(ccg_graph *g, ccg_node_id *order);

typedef enum ccg_dump_format {
  CCG_DUMP_TEXT,
  CCG_DUMP_JSON,
  CCG_DUMP_DOT,
  CCG_DUMP_FORMAT_COUNT
} ccg_dump_format;

/* Parses "text", "json" or "dot". */
CCG_API ccg_status ccg_dump_format_parse(const char *name,
                                         ccg_dump_format *out);
/* Writes the graph: text (one line per node), JSON (stable: same graph, same
 * bytes; for golden tests) or Graphviz DOT (collectives drawn distinctly,
 * edges labelled with shapes). */
CCG_API ccg_status ccg_graph_dump(ccg_graph *g, ccg_dump_format fmt, FILE *out);
/* The same into a string. "new": free with free(). */
CCG_API ccg_status ccg_graph_dump_string(ccg_graph *g, ccg_dump_format fmt,
                                         char **out);

/* ---- typed builders ---------------------------------------------------- */
/* Each adds one node in the current scope and returns its (first) output in
 * *out. They validate eagerly: a bad shape, dtype, axis or group returns a
 * status whose message (ccg_last_error(g)) names the node, the op and the
 * values at fault, and leaves the graph unchanged. Axes may be negative
 * (counted from the end). */

/* elementwise.c: ONNX broadcasting for the binary ops and Where. */
CCG_API ccg_status ccg_identity(ccg_graph *g, ccg_value_id x,
                                ccg_value_id *out);
CCG_API ccg_status ccg_add(ccg_graph *g, ccg_value_id a, ccg_value_id b,
                           ccg_value_id *out);
CCG_API ccg_status ccg_sub(ccg_graph *g, ccg_value_id a, ccg_value_id b,
                           ccg_value_id *out);
CCG_API ccg_status ccg_mul(ccg_graph *g, ccg_value_id a, ccg_value_id b,
                           ccg_value_id *out);
CCG_API ccg_status ccg_div(ccg_graph *g, ccg_value_id a, ccg_value_id b,
                           ccg_value_id *out);
CCG_API ccg_status ccg_pow(ccg_graph *g, ccg_value_id a, ccg_value_id b,
                           ccg_value_id *out);
CCG_API ccg_status ccg_neg(ccg_graph *g, ccg_value_id x, ccg_value_id *out);
CCG_API ccg_status ccg_relu(ccg_graph *g, ccg_value_id x, ccg_value_id *out);
/* approximate: "none" (erf form) or "tanh". */
CCG_API ccg_status ccg_gelu(ccg_graph *g, ccg_value_id x,
                            const char *approximate, ccg_value_id *out);
CCG_API ccg_status ccg_tanh(ccg_graph *g, ccg_value_id x, ccg_value_id *out);
CCG_API ccg_status ccg_erf(ccg_graph *g, ccg_value_id x, ccg_value_id *out);
CCG_API ccg_status ccg_sigmoid(ccg_graph *g, ccg_value_id x, ccg_value_id *out);
CCG_API ccg_status ccg_exp(ccg_graph *g, ccg_value_id x, ccg_value_id *out);
CCG_API ccg_status ccg_log(ccg_graph *g, ccg_value_id x, ccg_value_id *out);
CCG_API ccg_status ccg_sqrt(ccg_graph *g, ccg_value_id x, ccg_value_id *out);
CCG_API ccg_status ccg_where(ccg_graph *g, ccg_value_id cond, ccg_value_id x,
                             ccg_value_id y, ccg_value_id *out);
CCG_API ccg_status ccg_cast(ccg_graph *g, ccg_value_id x, ccg_dtype to,
                            ccg_value_id *out);
/* Inference-mode dropout (identity); `ratio` is recorded. */
CCG_API ccg_status ccg_dropout(ccg_graph *g, ccg_value_id x, float ratio,
                               ccg_value_id *out);

/* matmul.c: MatMul with numpy semantics (batched, broadcast, 1-D operands);
 * Gemm Y = alpha * A' B' + beta * C with C broadcast to [M,N] (c may be
 * CCG_NONE). */
CCG_API ccg_status ccg_matmul(ccg_graph *g, ccg_value_id a, ccg_value_id b,
                              ccg_value_id *out);
CCG_API ccg_status ccg_gemm(ccg_graph *g, ccg_value_id a, ccg_value_id b,
                            ccg_value_id c, float alpha, float beta,
                            bool trans_a, bool trans_b, ccg_value_id *out);

/* norm.c */
CCG_API ccg_status ccg_softmax(ccg_graph *g, ccg_value_id x, int64_t axis,
                               ccg_value_id *out);
/* Normalizes over dims [axis, rank); scale (and bias, may be CCG_NONE) have
 * the normalized shape or broadcast to it. */
CCG_API ccg_status ccg_layer_norm(ccg_graph *g, ccg_value_id x,
                                  ccg_value_id scale, ccg_value_id bias,
                                  int64_t axis, float epsilon,
                                  ccg_value_id *out);

/* reduce.c: axes NULL/0 reduces over all dims. */
CCG_API ccg_status ccg_reduce_sum(ccg_graph *g, ccg_value_id x,
                                  const int64_t *axes, size_t n_axes,
                                  bool keepdims, ccg_value_id *out);
CCG_API ccg_status ccg_reduce_mean(ccg_graph *g, ccg_value_id x,
                                   const int64_t *axes, size_t n_axes,
                                   bool keepdims, ccg_value_id *out);
CCG_API ccg_status ccg_reduce_max(ccg_graph *g, ccg_value_id x,
                                  const int64_t *axes, size_t n_axes,
                                  bool keepdims, ccg_value_id *out);

/* shape.c, layout.c (Transpose, Concat, Split) */
/* Reshape to the contents of the i64 value `shape` (0 copies the input dim,
 * -1 is inferred). */
CCG_API ccg_status ccg_reshape(ccg_graph *g, ccg_value_id x, ccg_value_id shape,
                               ccg_value_id *out);
/* Reshape to constant dims (adds an i64 initializer for them). */
CCG_API ccg_status ccg_reshape_to(ccg_graph *g, ccg_value_id x,
                                  const int64_t *dims, size_t n,
                                  ccg_value_id *out);
/* perm NULL reverses the dims. */
CCG_API ccg_status ccg_transpose(ccg_graph *g, ccg_value_id x,
                                 const int64_t *perm, size_t n,
                                 ccg_value_id *out);
CCG_API ccg_status ccg_concat(ccg_graph *g, const ccg_value_id *xs, size_t n,
                              int64_t axis, ccg_value_id *out);
/* Splits into n_outputs parts; sizes NULL means equal parts (the dim must
 * divide), else n_outputs sizes summing to the dim. outs holds n_outputs. */
CCG_API ccg_status ccg_split(ccg_graph *g, ccg_value_id x, int64_t axis,
                             const int64_t *sizes, size_t n_outputs,
                             ccg_value_id *outs);
/* Constant-bound slice (adds i64 initializers); axes NULL = 0..n-1, steps
 * NULL = 1. */
CCG_API ccg_status ccg_slice(ccg_graph *g, ccg_value_id x,
                             const int64_t *starts, const int64_t *ends,
                             const int64_t *axes, const int64_t *steps,
                             size_t n, ccg_value_id *out);
CCG_API ccg_status ccg_gather(ccg_graph *g, ccg_value_id data,
                              ccg_value_id indices, int64_t axis,
                              ccg_value_id *out);
/* ONNX ScatterND (opset 16; max and min from 18): a copy of data with the
 * slices named by the rows of i64 indices [..., k] replaced by (reduction
 * "none") or combined ("add", "mul", "max", "min") with the matching slices
 * of updates [..., data dims k..]. */
CCG_API ccg_status ccg_scatter_nd(ccg_graph *g, ccg_value_id data,
                                  ccg_value_id indices, ccg_value_id updates,
                                  const char *reduction, ccg_value_id *out);
/* ONNX GatherND (opset 13, batch_dims 0): the slices of data named by the
 * rows of i64 indices [..., k], shaped indices.shape[:-1] + data.shape[k:]
 * (ScatterND's updates' gradient, and ScatterND adds its own). */
CCG_API ccg_status ccg_gather_nd(ccg_graph *g, ccg_value_id data,
                                 ccg_value_id indices, ccg_value_id *out);
CCG_API ccg_status ccg_unsqueeze(ccg_graph *g, ccg_value_id x,
                                 const int64_t *axes, size_t n,
                                 ccg_value_id *out);
/* axes NULL/0 removes every dim of size 1. */
CCG_API ccg_status ccg_squeeze(ccg_graph *g, ccg_value_id x,
                               const int64_t *axes, size_t n,
                               ccg_value_id *out);
CCG_API ccg_status ccg_expand(ccg_graph *g, ccg_value_id x, ccg_value_id shape,
                              ccg_value_id *out);
/* Shape(x)[start:end] as an i64 vector (end past the rank clamps). */
CCG_API ccg_status ccg_shape_of(ccg_graph *g, ccg_value_id x, int64_t start,
                                int64_t end, ccg_value_id *out);
CCG_API ccg_status ccg_constant(ccg_graph *g, const ccg_tensor *value,
                                ccg_value_id *out);
/* value: a one-element tensor (NULL = f32 zero). */
CCG_API ccg_status ccg_constant_of_shape(ccg_graph *g, ccg_value_id shape,
                                         const ccg_tensor *value,
                                         ccg_value_id *out);

/* collective.c: `axes` names the mesh axes of the group ("tp", "dp,tp");
 * the group size comes from the graph's mesh. Split-size lists hold one
 * entry per rank of the group and must sum to the gathered dim (NULL =
 * even split, which must divide). */
CCG_API ccg_status ccg_all_reduce(ccg_graph *g, ccg_value_id x,
                                  const char *axes, ccg_reduce_op op,
                                  ccg_value_id *out);
CCG_API ccg_status ccg_all_gather(ccg_graph *g, ccg_value_id x,
                                  const char *axes, int64_t axis,
                                  const int64_t *split_sizes,
                                  ccg_value_id *out);
CCG_API ccg_status ccg_reduce_scatter(ccg_graph *g, ccg_value_id x,
                                      const char *axes, int64_t axis,
                                      ccg_reduce_op op,
                                      const int64_t *split_sizes,
                                      ccg_value_id *out);
/* Splits split_axis into chunks (in_splits sizes, or even), sends chunk j to
 * group rank j, and concatenates what arrives along concat_axis (out_splits
 * sizes, or even). The lists are this rank's, as in Megatron's all_to_all. */
CCG_API ccg_status ccg_all_to_all(ccg_graph *g, ccg_value_id x,
                                  const char *axes, int64_t split_axis,
                                  int64_t concat_axis, const int64_t *in_splits,
                                  const int64_t *out_splits, ccg_value_id *out);
CCG_API ccg_status ccg_shard_slice(ccg_graph *g, ccg_value_id x,
                                   const char *axes, int64_t axis,
                                   const int64_t *split_sizes,
                                   ccg_value_id *out);
CCG_API ccg_status ccg_broadcast(ccg_graph *g, ccg_value_id x, const char *axes,
                                 int64_t root, ccg_value_id *out);
/* Every rank gets an output of x's shape; only root's holds the reduction
 * (the others' content is unspecified). */
CCG_API ccg_status ccg_reduce(ccg_graph *g, ccg_value_id x, const char *axes,
                              int64_t root, ccg_reduce_op op,
                              ccg_value_id *out);
/* Point-to-point along one mesh axis to the rank at coordinate
 * (own + peer_offset) mod size. Send has no output; *out_node is its node. */
CCG_API ccg_status ccg_send(ccg_graph *g, ccg_value_id x, const char *axis,
                            int64_t peer_offset, int64_t tag,
                            ccg_node_id *out_node);
CCG_API ccg_status ccg_recv(ccg_graph *g, const char *axis, int64_t peer_offset,
                            int64_t tag, ccg_dtype dtype,
                            const ccg_shape *shape, ccg_value_id *out);
/* The same with the peer given by its index on `axis` (attribute "peer"):
 * for per-rank graphs, where every rank knows whom it talks to, such as
 * pipeline stages. */
CCG_API ccg_status ccg_send_peer(ccg_graph *g, ccg_value_id x, const char *axis,
                                 int64_t peer, int64_t tag,
                                 ccg_node_id *out_node);
CCG_API ccg_status ccg_recv_peer(ccg_graph *g, const char *axis, int64_t peer,
                                 int64_t tag, ccg_dtype dtype,
                                 const ccg_shape *shape, ccg_value_id *out);
/* Sends to coordinate own + shift and receives from own - shift along one
 * axis; rotate = 1 wraps around the ends (a ring), 0 leaves the edge ranks'
 * missing input zero. */
CCG_API ccg_status ccg_collective_permute(ccg_graph *g, ccg_value_id x,
                                          const char *axis, int64_t shift,
                                          bool rotate, ccg_value_id *out);

#ifdef __cplusplus
}
#endif
#endif
