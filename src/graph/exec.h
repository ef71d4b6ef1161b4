/* exec.h — runs a recorded graph on a backend in one of three modes. The
 * executor resolves every value to backend memory: activations in the
 * planned arena (graph mode) or one allocation each (eager and debug), roots
 * bound with tt_value_bind where the caller put them, and the rest (inputs,
 * constants, unbound parameters) in memory of its own, constants uploaded
 * once. The host writes inputs and reads outputs through copies. */
#ifndef TT_EXEC_H
#define TT_EXEC_H
#include "backend/backend.h"
#include "graph/passes/memplan.h"
#include "titan/modes.h"

/* tt_exec_mode (titan/modes.h, training.exec_mode):
 *   TT_EXEC_DEBUG  node by node, one allocation per value, every output checked
 *                  for NaN/Inf (the run uses it with the ref backend)
 *   TT_EXEC_EAGER  node by node, one allocation per value
 *   TT_EXEC_GRAPH  one static memory plan, no allocation per run */

typedef struct tt_exec tt_exec;
/* q: the queue to run on, shared by the executors and copies of one run so
 * their work is ordered; NULL: the executor makes its own. */
tt_exec *tt_exec_new(tt_graph *g, const tt_backend *be, tt_queue *q, tt_exec_mode mode);
/* The same, running in the arena of `with` (graph mode, the same backend,
 * never run at the same time, outliving this one) when it is big enough, else
 * in its own: two graphs of one step that run one after the other need one
 * arena. */
tt_exec *tt_exec_new_sharing(tt_graph *g, const tt_backend *be, tt_queue *q, tt_exec_mode mode, tt_exec *with);
tt_err tt_exec_run(tt_exec *e);
void tt_exec_free(tt_exec *e);
/* Upload bytes into a non-activation value (an input, a parameter, a state
 * value, or a view of one): bytes must be its size. */
tt_err tt_exec_write(tt_exec *e, const tt_value *v, const void *src, size_t bytes);
/* Download a value after a run: a non-activation value, or an activation the
 * graph marks as an output. Waits for the queue. */
tt_err tt_exec_read(tt_exec *e, const tt_value *v, void *dst, size_t bytes);
/* The same for bytes [off, off + bytes) of the value (one row of logits). */
tt_err tt_exec_read_range(tt_exec *e, const tt_value *v, size_t off, void *dst, size_t bytes);
/* The memory a value resolves to now (non-activation values and, in graph
 * mode, every value). */
tt_err tt_exec_mem(const tt_exec *e, const tt_value *v, tt_mem *out);
/* Bytes of the planned arena (graph mode) or the planned peak the eager
 * executor would have if it used the plan (other modes report the plan too). */
size_t tt_exec_arena_bytes(const tt_exec *e);
double tt_exec_flops(const tt_exec *e);
/* Profiling: when set, each run writes every node's start time (seconds,
 * tt_now()) and duration into start[node id] and dur[node id]; NULL stops.
 * The times are the host's: while timing, the executor waits for each node's
 * work (a finish after it), so they are exact on any queue. */
void tt_exec_set_timing(tt_exec *e, double *start, double *dur);
/* While timing: the seconds spent between nodes advancing collectives in
 * flight (not in any node's duration) since the last call. */
double tt_exec_take_progress_seconds(tt_exec *e);
const tt_graph *tt_exec_graph(const tt_exec *e);
/* The first node whose output had a NaN or Inf in the last run (debug mode),
 * or NULL: the run names it beside the step. */
const tt_node *tt_exec_nonfinite(const tt_exec *e);
#endif
