/* weights16.h — the bf16 products of a mixed-precision step read a bf16 copy
 * of the trained weights instead of rounding the fp32 masters themselves. */
#ifndef TT_WEIGHTS16_H
#define TT_WEIGHTS16_H
#include "ops/ops.h"

/* Every matmul, grouped matmul and fused linear + cross-entropy that computes
 * in bf16 (its other operand is bf16) and reads an fp32 weight of units[u]
 * reads instead the same elements of units16[u]: a bf16 root of the unit's
 * size the pass makes (TT_ROLE_FROZEN: nothing here writes it; the caller
 * binds it to the weights' rounding, which the optimizer keeps). The GEMM
 * rounds an fp32 weight to bf16 as it packs it, so the products are the same
 * bit for bit; what goes is the rounding, and half the bytes read. Weight
 * gradients stay fp32, made by the nodes autodiff made: run after it (and
 * after remat, whose recomputed products read weights too). units16 has
 * n_units entries, NULL where a unit's weights are read by no such product.
 * *rewired: how many operands now read the copy (may be NULL). */
tt_err tt_weights16(tt_graph *g, tt_value *const *units, tt_value **units16, int n_units, int *rewired);

#endif
