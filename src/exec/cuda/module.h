/* Private: the CUDA kernels' module, libccgraph_cuda.so (the *.cu files),
 * loaded with the CUDA runtime when a GPU is first asked for (dynlib.h).
 * nvcc's objects register their kernels with the CUDA runtime from static
 * constructors, so while they were part of libccgraph every process mapped
 * libcudart and ran its start-up (docs/gpu.md, "Loading"). The module
 * exports one function, CCG__CUDA_MODULE_ENTRY, which hands out the
 * launchers (kernels*.h); the host C files reach them through the table
 * that ccg__cuda_module_load fills: after this header, a launcher's name
 * is its table entry. A launcher missing from the list is a call the
 * library cannot resolve, and libccgraph's link (--no-undefined) fails. */
#ifndef CCG_EXEC_CUDA_MODULE_H
#define CCG_EXEC_CUDA_MODULE_H

#include "ccgraph/core.h"
#include "exec/cuda/kernels.h"
#include "exec/cuda/kernels_datafam.h"
#include "exec/cuda/kernels_logic.h"
#include "exec/cuda/kernels_loss.h"
#include "exec/cuda/kernels_norm.h"
#include "exec/cuda/kernels_select.h"
#include "exec/cuda/kernels_vision.h"

#define CCG__CU_FNS(X)                                                         \
  X(ccg__cu_arg)                                                               \
  X(ccg__cu_attention)                                                         \
  X(ccg__cu_attn_present)                                                      \
  X(ccg__cu_batch_norm)                                                        \
  X(ccg__cu_batch_norm_train)                                                  \
  X(ccg__cu_binary)                                                            \
  X(ccg__cu_cast)                                                              \
  X(ccg__cu_clip)                                                              \
  X(ccg__cu_col2im)                                                            \
  X(ccg__cu_compress)                                                          \
  X(ccg__cu_conv_bias)                                                         \
  X(ccg__cu_cumsum)                                                            \
  X(ccg__cu_einsum)                                                            \
  X(ccg__cu_expand_param)                                                      \
  X(ccg__cu_eye)                                                               \
  X(ccg__cu_fill)                                                              \
  X(ccg__cu_gather)                                                            \
  X(ccg__cu_gather_elems)                                                      \
  X(ccg__cu_gather_nd)                                                         \
  X(ccg__cu_gemm_bias)                                                         \
  X(ccg__cu_group_norm)                                                        \
  X(ccg__cu_im2col)                                                            \
  X(ccg__cu_layer_norm)                                                        \
  X(ccg__cu_logic_binary)                                                      \
  X(ccg__cu_logic_unary)                                                       \
  X(ccg__cu_loss)                                                              \
  X(ccg__cu_mvn)                                                               \
  X(ccg__cu_nonzero)                                                           \
  X(ccg__cu_onehot)                                                            \
  X(ccg__cu_pack)                                                              \
  X(ccg__cu_pool)                                                              \
  X(ccg__cu_range)                                                             \
  X(ccg__cu_reduce)                                                            \
  X(ccg__cu_remap)                                                             \
  X(ccg__cu_resize)                                                            \
  X(ccg__cu_rms_norm)                                                          \
  X(ccg__cu_rope)                                                              \
  X(ccg__cu_scatter_elems)                                                     \
  X(ccg__cu_scatter_nd)                                                        \
  X(ccg__cu_slice_copy)                                                        \
  X(ccg__cu_slice_setup)                                                       \
  X(ccg__cu_softmax)                                                           \
  X(ccg__cu_softmax_op)                                                        \
  X(ccg__cu_store_ints)                                                        \
  X(ccg__cu_strided_copy)                                                      \
  X(ccg__cu_top_k)                                                             \
  X(ccg__cu_unary)                                                             \
  X(ccg__cu_where)

#ifdef __cplusplus
#define CCG__CU_FIELD(f) decltype(&f) p_##f;
#else
#define CCG__CU_FIELD(f) __typeof__(&f) p_##f;
#endif
/* What the module hands out. version and size come first: a module of
 * another build is refused before any launcher is taken from it. */
typedef struct ccg__cuda_module {
  const char *version; /* CCG_VERSION_STRING of the module's build */
  size_t size;         /* sizeof(ccg__cuda_module) there */
  CCG__CU_FNS(CCG__CU_FIELD)
} ccg__cuda_module;
#undef CCG__CU_FIELD

/* The module's one exported function (module.cu). */
#define CCG__CUDA_MODULE_ENTRY "ccg__cuda_module_get"
typedef const ccg__cuda_module *(*ccg__cuda_module_get_fn)(void);

#ifndef __CUDACC__
#include "core/error.h"

/* Filled by ccg__cuda_module_load. */
extern ccg__cuda_module ccg__cu_fn;

/* Loads the CUDA runtime (ccg__cudart_load), then the module, once per
 * process (thread-safe): from the directory of the library or program
 * that holds ccgraph, else where the build put it, else the install's
 * library directory. CCG_STATUS_BACKEND naming what is missing (the
 * runtime, the module and each place looked in, a module of another
 * build), every time it is asked for. Before any launcher is called. */
ccg_status ccg__cuda_module_load(ccg_ctx *err);

#ifndef CCG__CUDA_MODULE_DIRECT
#define ccg__cu_arg (*ccg__cu_fn.p_ccg__cu_arg)
#define ccg__cu_attention (*ccg__cu_fn.p_ccg__cu_attention)
#define ccg__cu_attn_present (*ccg__cu_fn.p_ccg__cu_attn_present)
#define ccg__cu_batch_norm (*ccg__cu_fn.p_ccg__cu_batch_norm)
#define ccg__cu_batch_norm_train (*ccg__cu_fn.p_ccg__cu_batch_norm_train)
#define ccg__cu_binary (*ccg__cu_fn.p_ccg__cu_binary)
#define ccg__cu_cast (*ccg__cu_fn.p_ccg__cu_cast)
#define ccg__cu_clip (*ccg__cu_fn.p_ccg__cu_clip)
#define ccg__cu_col2im (*ccg__cu_fn.p_ccg__cu_col2im)
#define ccg__cu_compress (*ccg__cu_fn.p_ccg__cu_compress)
#define ccg__cu_conv_bias (*ccg__cu_fn.p_ccg__cu_conv_bias)
#define ccg__cu_cumsum (*ccg__cu_fn.p_ccg__cu_cumsum)
#define ccg__cu_einsum (*ccg__cu_fn.p_ccg__cu_einsum)
#define ccg__cu_expand_param (*ccg__cu_fn.p_ccg__cu_expand_param)
#define ccg__cu_eye (*ccg__cu_fn.p_ccg__cu_eye)
#define ccg__cu_fill (*ccg__cu_fn.p_ccg__cu_fill)
#define ccg__cu_gather (*ccg__cu_fn.p_ccg__cu_gather)
#define ccg__cu_gather_elems (*ccg__cu_fn.p_ccg__cu_gather_elems)
#define ccg__cu_gather_nd (*ccg__cu_fn.p_ccg__cu_gather_nd)
#define ccg__cu_gemm_bias (*ccg__cu_fn.p_ccg__cu_gemm_bias)
#define ccg__cu_group_norm (*ccg__cu_fn.p_ccg__cu_group_norm)
#define ccg__cu_im2col (*ccg__cu_fn.p_ccg__cu_im2col)
#define ccg__cu_layer_norm (*ccg__cu_fn.p_ccg__cu_layer_norm)
#define ccg__cu_logic_binary (*ccg__cu_fn.p_ccg__cu_logic_binary)
#define ccg__cu_logic_unary (*ccg__cu_fn.p_ccg__cu_logic_unary)
#define ccg__cu_loss (*ccg__cu_fn.p_ccg__cu_loss)
#define ccg__cu_mvn (*ccg__cu_fn.p_ccg__cu_mvn)
#define ccg__cu_nonzero (*ccg__cu_fn.p_ccg__cu_nonzero)
#define ccg__cu_onehot (*ccg__cu_fn.p_ccg__cu_onehot)
#define ccg__cu_pack (*ccg__cu_fn.p_ccg__cu_pack)
#define ccg__cu_pool (*ccg__cu_fn.p_ccg__cu_pool)
#define ccg__cu_range (*ccg__cu_fn.p_ccg__cu_range)
#define ccg__cu_reduce (*ccg__cu_fn.p_ccg__cu_reduce)
#define ccg__cu_remap (*ccg__cu_fn.p_ccg__cu_remap)
#define ccg__cu_resize (*ccg__cu_fn.p_ccg__cu_resize)
#define ccg__cu_rms_norm (*ccg__cu_fn.p_ccg__cu_rms_norm)
#define ccg__cu_rope (*ccg__cu_fn.p_ccg__cu_rope)
#define ccg__cu_scatter_elems (*ccg__cu_fn.p_ccg__cu_scatter_elems)
#define ccg__cu_scatter_nd (*ccg__cu_fn.p_ccg__cu_scatter_nd)
#define ccg__cu_slice_copy (*ccg__cu_fn.p_ccg__cu_slice_copy)
#define ccg__cu_slice_setup (*ccg__cu_fn.p_ccg__cu_slice_setup)
#define ccg__cu_softmax (*ccg__cu_fn.p_ccg__cu_softmax)
#define ccg__cu_softmax_op (*ccg__cu_fn.p_ccg__cu_softmax_op)
#define ccg__cu_store_ints (*ccg__cu_fn.p_ccg__cu_store_ints)
#define ccg__cu_strided_copy (*ccg__cu_fn.p_ccg__cu_strided_copy)
#define ccg__cu_top_k (*ccg__cu_fn.p_ccg__cu_top_k)
#define ccg__cu_unary (*ccg__cu_fn.p_ccg__cu_unary)
#define ccg__cu_where (*ccg__cu_fn.p_ccg__cu_where)
#endif
#endif

#endif
