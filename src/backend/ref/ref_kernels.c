/* ref_kernels.c — instantiates the reference kernels of ref_kernels.inc for
 * float (_f32, what the ref backend runs) and double (_f64, for gradient checks). */
#include <math.h>

#include "backend/ref/ref_kernels.h"

#define T float
#define S f32
#include "ref_kernels.inc"
#undef T
#undef S

#define T double
#define S f64
#include "ref_kernels.inc"
#undef T
#undef S
