/* lora.h — the LoRA pass: every matmul x W^T whose frozen weight W is an
 * adapted linear layer (or, after fusion, several back to back: q/k/v,
 * gate/up) gets its adapters' low-rank term added to its output:
 *     y = x W^T + s (drop(x) A^T) B^T
 * The pass knows a weight by (unit, byte range), never by address. */
#ifndef TT_LORA_PASS_H
#define TT_LORA_PASS_H
#include "ops/ops.h"

/* One adapted weight: its bytes [offset, offset + bytes) in the root of graph unit `unit`, and its adapter's
 * A (r, in) and B (out, r) values (views of the adapters' units). The parts of one module (GPT-2's c_attn: q, k
 * and v) are sites with one A, each B a view of the module's B's rows, and one adapter id. */
typedef struct {
    int unit;
    size_t offset, bytes;
    tt_value *A, *B;
    int adapter;        /* its dropout mask's stream: one per module, as PEFT's dropout is the module's */
    const char *module; /* named in errors */
} tt_lora_site;

typedef struct {
    int n_sites;
    const tt_lora_site *sites;
    double scale;    /* s: alpha / r, or alpha / sqrt(r) */
    double dropout;  /* on each adapter's input; > 0 needs rng */
    tt_value *rng;   /* i64 [2] (seed, counter), written before each run: the dropout masks */
} tt_lora_pass_cfg;

/* Runs after fusion, before autodiff. Every site must be found under exactly one matmul, or the pass fails naming
 * its module. *applied receives the matmuls rewritten (may be NULL). */
tt_err tt_lora_pass(tt_graph *g, const tt_lora_pass_cfg *c, int *applied);
#endif
