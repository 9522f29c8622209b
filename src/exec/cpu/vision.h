/* Private: the vision family's preparation shared by the CPU kernels
 * (cpu/vision.c) and the CUDA launches (cuda/gpu_vision.c). */
#ifndef CCG_EXEC_CPU_VISION_H
#define CCG_EXEC_CPU_VISION_H

#include "exec/internal.h"
#include "exec/vision_math.h"

/* The window geometry a prepared Conv, ConvTranspose or pool node keeps in
 * its parameters (exec arena). */
const ccg__win *ccg__win_of(const ccg__xnode *n);
/* The same for a prepared Resize node. */
const ccg__rsz *ccg__rsz_of(const ccg__xnode *n);
/* Its geometry with the roi fed or computed at run time (n->p.i0 > 0)
 * read from `roi` where the kernel runs: host memory on the CPU, device
 * memory on the GPU. */
ccg__rsz ccg__rsz_with_roi(const ccg_exec *x, const ccg__xnode *n,
                           const void *roi);

#endif
