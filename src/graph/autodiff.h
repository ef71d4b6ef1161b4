/* autodiff.h — reverse-mode differentiation over the op table. */
#ifndef TT_AUTODIFF_H
#define TT_AUTODIFF_H
#include "ops/ops.h"
/* Appends to g the backward of the sum of the losses: a main loss and, for
 * example, weighted auxiliary losses (each is output 0 of a TT_OPF_LOSS op,
 * whose weight the op applies). For each wrt[i], grads[i] receives its
 * gradient value (NULL when no loss depends on it). */
tt_err tt_autodiff(tt_graph *g, int n_loss, tt_value *const *losses, int n, tt_value *const *wrt, tt_value **grads);
#endif
