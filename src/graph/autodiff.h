/* autodiff.h — reverse-mode differentiation over the op table. */
#ifndef TT_AUTODIFF_H
#define TT_AUTODIFF_H
#include "ops/ops.h"
/* Appends the backward of `loss` to g. For each wrt[i], grads[i] receives
 * its gradient value (NULL when the loss does not depend on it). */
tt_err tt_autodiff(tt_graph *g, tt_value *loss, int n, tt_value *const *wrt, tt_value **grads);
#endif
