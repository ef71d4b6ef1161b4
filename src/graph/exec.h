/* exec.h — runs a recorded graph on a backend in one of three modes. */
#ifndef TT_EXEC_H
#define TT_EXEC_H
#include "backend/backend.h"
#include "graph/passes/memplan.h"
#include "titan/config.h"

/* tt_exec_mode (config.h, training.exec_mode):
 *   TT_EXEC_DEBUG  reference kernels node by node, every output checked for NaN/Inf
 *   TT_EXEC_EAGER  fast kernels node by node, one allocation per value
 *   TT_EXEC_GRAPH  fast kernels, one static memory plan, no allocation per run */

typedef struct tt_exec tt_exec;
tt_exec *tt_exec_new(tt_graph *g, const tt_backend *be, tt_exec_mode mode);
tt_err tt_exec_run(tt_exec *e);
void tt_exec_free(tt_exec *e);
/* Bytes of the planned arena (graph mode) or the planned peak the eager
 * executor would have if it used the plan (other modes report the plan too). */
size_t tt_exec_arena_bytes(const tt_exec *e);
double tt_exec_flops(const tt_exec *e);
/* Profiling: when set, each run writes every node's start time (seconds,
 * tt_now()) and duration into start[node id] and dur[node id]; NULL stops. */
void tt_exec_set_timing(tt_exec *e, double *start, double *dur);
const tt_graph *tt_exec_graph(const tt_exec *e);
#endif
