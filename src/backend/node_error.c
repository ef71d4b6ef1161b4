/* node_error.c — the message prefix that names a node whose kernel failed
 * (its scope, op and input shapes), for the executor and for a queue's
 * worker alike. A file of its own: the table of backends (backend.c) calls
 * the implementations, and the host queue calls this, so the two stay apart. */
#include <stdio.h>

#include "backend/backend.h"

tt_err tt_backend_node_error(const tt_node *n)
{
    char shapes[512] = "";
    size_t k = 0;
    for (int i = 0; i < n->n_in && k < sizeof shapes - 64; i++) {
        char d[96];
        k += (size_t)snprintf(shapes + k, sizeof shapes - k, "%s%s", i ? ", " : "", tt_value_desc(n->in[i], d, sizeof d));
    }
    return tt_error_prefix("%s%s%s (inputs %s): ", n->scope, n->scope[0] ? ": " : "", tt_op_name(n->op), shapes);
}
