/* Private: what the vision family's shape rules (vision.c) share with its
 * gradient rules (vision_grad.c). */
#ifndef CCG_GRAPH_VISION_H
#define CCG_GRAPH_VISION_H

#include "exec/vision_math.h"
#include "graph/internal.h"

/* A windowed node's geometry with its pads resolved: `in` and `out` are the
 * spatial dims of X and Y; pb and pe the begin and end pads in the sense of
 * vision_math.h's ccg__win (for ConvTranspose, on Y). */
typedef struct ccg__vgeo {
  int nsp;
  ccg__autopad ap;
  bool ceil;
  int64_t group;
  int64_t in[CCG_MAX_RANK], out[CCG_MAX_RANK], k[CCG_MAX_RANK];
  int64_t st[CCG_MAX_RANK], dil[CCG_MAX_RANK];
  int64_t pb[CCG_MAX_RANK], pe[CCG_MAX_RANK], opad[CCG_MAX_RANK];
} ccg__vgeo;

/* Reads and checks the window attributes of a Conv, ConvTranspose, MaxPool
 * or AveragePool node (ix: being inferred, or gx: being differentiated; the
 * other NULL) over X's shape x and W's shape w (the convolutions), and
 * resolves pads and output dims. Errors name the node. */
ccg_status ccg__vision_geo(ccg__infer *ix, ccg__grad *gx, ccg_op op,
                           const ccg_shape *x, const ccg_shape *w,
                           ccg__vgeo *geo);

ccg_status ccg__grad_conv(ccg__grad *gx);
ccg_status ccg__grad_pool(ccg__grad *gx);

#endif
