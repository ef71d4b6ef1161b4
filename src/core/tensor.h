/* tensor.h — a named, shaped, owned buffer: how parameters, optimizer state
 * and gradient accumulators live outside any one graph. */
#ifndef TT_TENSOR_H
#define TT_TENSOR_H

#include "core.h"

#define TT_MAX_DIMS 4

typedef struct {
    char name[96];
    tt_dtype dtype;
    int ndim;
    int64_t shape[TT_MAX_DIMS];
    void *data;   /* not owned: points into a unit buffer or an allocation */
} tt_tensor;

static inline int64_t tt_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}
static inline size_t tt_tensor_bytes(const tt_tensor *t)
{
    return (size_t)tt_numel(t->ndim, t->shape) * tt_dtype_size(t->dtype);
}

#endif
