/* trace.h — one training step as a Chrome trace (the JSON chrome://tracing and
 * https://ui.perfetto.dev open), from the executors' per-node timings: what
 * `titan bench step --trace` and a run with profiling.enable_profiling write,
 * and what `titan report` reads back for its per-op profile. */
#ifndef TT_TRACE_H
#define TT_TRACE_H
#include "graph/exec.h"

/* One run of a graph in the step: its executor, and the start times and
 * durations (seconds, tt_now()) that tt_exec_set_timing had it fill, indexed
 * like the graph's nodes. */
typedef struct {
    const tt_exec *exec;
    const double *start, *dur;
    const char *graph;  /* "train_step", "optimizer": the event's cat when a node has no scope */
    int micro_step;     /* which micro-step of a step with gradient accumulation; -1 = not one */
} tt_trace_part;

/* Write the parts as one trace to path, atomically (tt_write_file_atomic):
 *   {"traceEvents": [{"name": op, "cat": scope (else graph), "ph": "X",
 *                     "ts": µs since the first part's first node, "dur": µs,
 *                     "pid": 0, "tid": 0,
 *                     "args": {"scope", "graph", ["micro_step"], "inputs": shapes, "gflop"}}, ...],
 *    "displayTimeUnit": "ms"}
 * one event per node of each part, in execution order. */
tt_err tt_trace_write(const char *path, const tt_trace_part *parts, int n_parts);

#endif
