/* ops.h — the builder functions model code calls, the ops' attribute structs
 * and the op table. The ops are listed once, in op_list.h (id, name, attribute
 * size); each op family's file (matmul.c, attention.c, norms.c, moe.c, ...)
 * holds its builders (shape inference), FLOP counts, backward rules and its
 * ops' definitions (the flags the passes and the executor read). Backends
 * register kernels against the ids, their tables expanded from the same list.
 *
 * Activations are 2-D: (N, D) with N = B*T tokens. Attention-family ops
 * carry B and T as attributes. */
#ifndef TT_OPS_H
#define TT_OPS_H

#include <math.h>

#include "ir/graph.h"
#include "ops/dropout.h"

/* The op ids, from the list (its comments say what each op takes and makes) */
typedef enum {
#define TT_OP(ID, name, attrs_bytes) TT_OP_##ID,
#define TT_COMM(ID, name, attrs_bytes) TT_OP_##ID,
#include "ops/op_list.h"
#undef TT_OP
#undef TT_COMM
    TT_OP_COUNT
} tt_op_id;

/* ---- attributes: one struct per op family ---------------------------------- */
typedef struct {
    int ta, tb;      /* op(A) = A^T when ta, op(B) = B^T when tb */
} tt_matmul_attrs;

typedef struct {
    int group;       /* features per normalised run (rmsnorm); the row length for add_rmsnorm */
    double eps;
} tt_norm_attrs;

typedef struct {
    int H, hd;
    int inverse;     /* rotate by -angle: the backward */
    double scale;    /* cos and sin multiplied by it (YaRN's attention factor; 1 otherwise) */
    int rot;         /* partial rotary (Phi-3): only each head's first rot features rotate, the rest pass; 0: all */
} tt_rope_attrs;

/* The features of a head that rotate: rot, or all (an odd last one excepted) */
static inline int tt_rope_rot(const tt_rope_attrs *a) { return a->rot > 0 ? a->rot : a->hd - a->hd % 2; }

typedef struct {
    int B, T, H, Hk, hd;
    int window;        /* sliding window (0: none) */
    double rope_scale; /* attention_qkv with RoPE inside: the cos/sin scale */
    int Tmax;          /* attention_kv: the cache's positions */
    double softmax_scale; /* the scores' scale; 0: 1 / sqrt(hd) (tt_attn_softmax_scale) */
    int hdv;              /* attention, attention_kv: the values' (and output's) width a head; 0: hd */
    double softcap;       /* Gemma 2: each score s becomes softcap * tanh(s / softcap) before the softmax; 0: none */
} tt_attn_attrs;

/* The values' width of a head */
static inline int tt_attn_v_width(const tt_attn_attrs *a) { return a->hdv > 0 ? a->hdv : a->hd; }

typedef struct {
    int ignore_index;
    double softcap; /* Gemma 2: each logit z becomes softcap * tanh(z / softcap); 0: none */
} tt_ce_attrs;

typedef struct {
    int H, w, c0, cw;       /* slice, place: heads, the head's width, the columns taken */
    int sum_heads, deinterleave;
    int wa, wb, bcast;      /* concat: the widths of a and b in a head; b one head for all */
} tt_head_attrs;

typedef struct {
    double beta1, beta2, eps, weight_decay;
} tt_adamw_attrs;

typedef struct {
    double max_norm; /* <= 0: no clipping */
} tt_clip_attrs;

typedef struct {
    double s;
} tt_scale_attrs;

typedef struct {
    double alpha, limit; /* GPT-OSS's clamped SwiGLU: the sigmoid's gain, the clamp */
} tt_swiglu_attrs;

#define TT_ADD_SCALED_MAX_PARTS 4
typedef struct {
    double s;
    int k;                              /* the b's */
    int c0[TT_ADD_SCALED_MAX_PARTS];    /* the first column of a that b_i adds to */
} tt_add_scaled_attrs;

typedef struct {
    double p;      /* the probability of dropping an element, in (0, 1) */
    uint64_t site; /* the call site's constant: different sites draw different masks */
} tt_dropout_attrs;

typedef enum { TT_SCORE_SOFTMAX = 0, TT_SCORE_SIGMOID } tt_score_func;

typedef enum { TT_AUX_BALANCE = 0, TT_AUX_SEQUENCE, TT_AUX_Z } tt_aux_kind;
typedef struct {
    int kind;           /* tt_aux_kind */
    int E, k, B, T;     /* experts, slots; the sequences of the batch (sequence-wise) */
    double coef;
} tt_moe_aux_attrs;

/* the most experts an MoE layer may have (kernels keep a token's scores on the stack) */
#define TT_MOE_MAX_EXPERTS 1024

typedef struct {
    int E, k;           /* experts, and slots a token */
    int score_func;     /* tt_score_func */
    int route_norm;     /* the k weights over their sum */
    int n_group, topk_group; /* group-limited routing (DeepSeek): 0 or 1 group = none */
    double route_scale; /* the weights times this */
} tt_moe_attrs;

/* Expert parallelism: E experts over the ep ranks of a group, El = E / ep on each; group rank r holds
 * experts [r*El, (r+1)*El). */
typedef struct {
    int E, ep, rank;    /* experts in all, ranks of the expert-parallel group, this rank's index in it */
    int64_t row;        /* elements a token row (the model dim) */
    int64_t recv_rows;  /* the rows of this rank's receive buffer */
} tt_moe_ep_attrs;

typedef struct {
    int group;     /* tt_group_id of dist/dist.h: world, shard or replicate */
    int reduce;    /* tt_reduce_op: sum or max */
    int root;      /* broadcast: the group rank whose x everyone gets */
    char what[48]; /* names the transfer in errors and the watchdog's message: "layers.3 params" */
} tt_comm_attrs;

#define TT_ATTRS(n, type) ((const type *)(n)->attrs)

/* ---- facts about ops, read by the passes and the executor ------------------ */
enum {
    TT_OPF_PURE = 1u << 0,      /* a function of its inputs only: activation checkpointing may recompute it */
    TT_OPF_KEEP_SELECTIVE = 1u << 1, /* selective checkpointing keeps its outputs (matmuls, attention,
                                        lookups: TorchTitan's op policy); full recomputes them */
    TT_OPF_LOSS = 1u << 2,      /* output 0 is a scalar loss that may be a root of autodiff */
    TT_OPF_COMM = 1u << 3,      /* a collective: the executor starts it on the dist layer (no backend kernel) */
};

/* An op's facts, defined beside its builder in its family's file (tt_op_def_<name>); its name and attribute size are
 * the list's (op_list.h) */
typedef struct tt_op_def {
    unsigned flags;          /* TT_OPF_* */
    unsigned acc_outs;       /* bit k: output k may be accumulated into (node->accumulate) */
    unsigned writes_ins;     /* bit k: the op writes input k in place (accumulators, optimizer state, KV cache) */
    unsigned neg_inf_outs;   /* bit k: output k may hold -inf legitimately (attention's logsumexp) */
    /* FLOPs of one run of the node (multiply-add = 2) */
    double (*flops)(const tt_node *n);
    /* Emit the nodes of the backward: gout[i] is the gradient of output i
     * (NULL: none), set gin[j] for each input that has one. */
    void (*backward)(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin);
} tt_op_def;

/* Every op's definition by id (op_table.c): tt_ops[op]->flags */
extern const tt_op_def *const tt_ops[TT_OP_COUNT];
const char *tt_op_name(int op);

/* The gradient seed of a loss root: autodiff passes it as gout for the loss
 * output of a TT_OPF_LOSS op, whose backward knows its upstream gradient is 1. */
extern tt_value tt_loss_seed;

/* ---- op semantics every backend shares ------------------------------------- */
/* The dtype a node computes in: its first floating-point input's (the
 * activations; an embedding's table), else its first floating-point
 * output's, else fp32 (an op on integers only). Backends say
 * which (op, dtype) pairs they run in these terms. */
tt_dtype tt_node_dtype(const tt_node *n);
/* clip_coef: max_norm / (norm + 1e-6) when max_norm > 0 and the norm exceeds
 * it, else 1 (torch.nn.utils.clip_grad_norm_). */
static inline double tt_clip_coef(double sumsq, double max_norm)
{
    double norm = sumsq > 0 ? sqrt(sumsq) : 0;
    return max_norm > 0 && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
}
/* ce_linear made a block of rows at a time (the whole vocabulary's logits
 * for each, as the cpu backend does): the rows of one block, when a block
 * holds at most max_logits logits and at least 64 rows, and the N rows are
 * split into even blocks (no sliver at the end). `bench gemm` names the
 * head's products by it. */
#define TT_CE_BLOCK_LOGITS ((size_t)64 << 20)
static inline int tt_ce_block_rows(int N, int V, size_t max_logits)
{
    if (N <= 0 || V <= 0) return N > 0 ? N : 0;
    const size_t fit = max_logits / (size_t)V;
    int R = fit > (size_t)N ? N : (int)fit;
    if (R < 64) R = 64;
    if (R > N) R = N;
    const int blocks = (N + R - 1) / R;
    return (N + blocks - 1) / blocks;
}
/* The scale of attention scores: softmax_scale, or 1 / sqrt(hd) when it is 0 */
static inline double tt_attn_softmax_scale(const tt_attn_attrs *a)
{
    return a->softmax_scale > 0 ? a->softmax_scale : 1.0 / sqrt((double)a->hd);
}
/* attention_kv: the rows [start, start + Tq) must fit the cache. */
tt_err tt_attention_kv_check(const tt_node *n, int32_t start);
/* embedding and ce_linear: every id in [0, V), or equal to `allowed`. */
tt_err tt_check_ids(const int32_t *ids, int64_t n, int64_t V, int32_t allowed, const char *what);

/* grouped_matmul: offsets (E+1) must rise from 0 to at most the M rows. */
tt_err tt_moe_check_offsets(const int32_t *offsets, int E, int64_t M);
/* row_gather: idx (R) in [-1, M) and inv (M) in [-1, R), each the other's partial inverse. */
tt_err tt_row_gather_check(const int32_t *idx, int64_t R, const int32_t *inv, int64_t M);
/* moe_ep_plan: every rank's offsets rise from 0, and the rows this rank receives fit its receive buffer. */
tt_err tt_moe_ep_check(const int32_t *offs_all, const tt_moe_ep_attrs *a);

/* ---- builders (return NULL after recording an error on the graph) ------- */
tt_value *tt_embedding(tt_graph *g, tt_value *ids, tt_value *table);
/* C = op(A) op(B), C bf16 when A or B is; tt_matmul_to names C's dtype (fp32
 * or bf16: a weight gradient from bf16 activations is fp32) */
tt_value *tt_matmul(tt_graph *g, tt_value *a, tt_value *b, int ta, int tb);
tt_value *tt_matmul_to(tt_graph *g, tt_value *a, tt_value *b, int ta, int tb, tt_dtype out);
/* y = x W^T (+ b): W is (out, in) as in PyTorch's nn.Linear */
tt_value *tt_linear(tt_graph *g, tt_value *x, tt_value *w, tt_value *b);
/* y (N, D) + b (D) */
tt_value *tt_bias_add(tt_graph *g, tt_value *y, tt_value *b);
tt_value *tt_add(tt_graph *g, tt_value *a, tt_value *b);
tt_value *tt_rmsnorm(tt_graph *g, tt_value *x, tt_value *w, double eps);
/* RMSNorm over each group of `group` consecutive features (Qwen3's q/k norm) */
tt_value *tt_rmsnorm_groups(tt_graph *g, tt_value *x, tt_value *w, double eps, int group);
tt_value *tt_layernorm(tt_graph *g, tt_value *x, tt_value *w, tt_value *b, double eps);
/* x (N, H*hd); inv_freq (hd/2) const */
tt_value *tt_rope(tt_graph *g, tt_value *x, tt_value *pos, tt_value *inv_freq, int H, int hd);
/* the same with cos and sin multiplied by scale (YaRN's attention factor) */
tt_value *tt_rope_scaled(tt_graph *g, tt_value *x, tt_value *pos, tt_value *inv_freq, int H, int hd, double scale);
/* partial rotary: each head's first rot features (even, < hd) rotate with inv_freq's rot/2 frequencies */
tt_value *tt_rope_partial(tt_graph *g, tt_value *x, tt_value *pos, tt_value *inv_freq, int H, int hd, int rot,
                          double scale);
tt_value *tt_attention(tt_graph *g, tt_value *q, tt_value *k, tt_value *v, tt_value *doc, int B, int T,
                       int H, int Hk, int hd, int window);
tt_value *tt_attention_kv(tt_graph *g, tt_value *q, tt_value *k, tt_value *v, tt_value *cache_k,
                          tt_value *cache_v, tt_value *start, int B, int Tq, int H, int Hk, int hd,
                          int window);
/* the same two with the scores scaled by softmax_scale instead of 1 / sqrt(hd) (0: that), soft-capped:
 * s -> softcap * tanh(s / softcap) (0: not), and with attention sinks (NULL: none): GPT-OSS's learned logit a
 * head, sinks (H) a weight, that joins each row's softmax denominator and takes no value (the row's
 * probabilities over its keys then sum to less than 1) */
tt_value *tt_attention_scaled(tt_graph *g, tt_value *q, tt_value *k, tt_value *v, tt_value *doc, int B, int T,
                              int H, int Hk, int hd, int window, double softmax_scale, double softcap,
                              tt_value *sinks);
tt_value *tt_attention_kv_scaled(tt_graph *g, tt_value *q, tt_value *k, tt_value *v, tt_value *cache_k,
                                 tt_value *cache_v, tt_value *start, int B, int Tq, int H, int Hk, int hd,
                                 int window, double softmax_scale, double softcap, tt_value *sinks);
tt_value *tt_swiglu(tt_graph *g, tt_value *a, tt_value *b);
/* silu(ab[:, :F]) * ab[:, F:] of one (N, 2F) value: gate and up from one matmul */
tt_value *tt_swiglu_fused(tt_graph *g, tt_value *ab);
/* The same over the rows before off[E] alone (off: a grouped matmul's (E+1) i32 offsets, its rows in a buffer
 * planned larger, as expert parallelism's receive buffer is); the rest of the output is zero. */
tt_value *tt_swiglu_fused_rows(tt_graph *g, tt_value *ab, tt_value *off);
/* GPT-OSS's experts' activation on one (N, 2F) gate/up value: (clamp(up, -limit, limit) + 1) * g * sigmoid(alpha g)
 * with g = min(gate, limit); over the rows before off[E] when off is given (as tt_swiglu_fused_rows) */
tt_value *tt_swiglu_clamped_rows(tt_graph *g, tt_value *ab, tt_value *off, double alpha, double limit);
/* Whether a swiglu node (or its backward) takes gate and up as one (N, 2F) value, and the rows it computes: all N,
 * or off[E] of its offsets input (off: that input's host copy; an error when it is outside [0, N]). */
int tt_swiglu_is_fused(const tt_node *n);
tt_err tt_swiglu_rows(const tt_node *n, const int32_t *off, int64_t *rows);
/* attention over the column ranges of qkv (N, (H+2Hk)*hd); pos and inv_freq
 * NULL: no RoPE, else RoPE (cos/sin times rope_scale) on q and k inside */
tt_value *tt_attention_qkv(tt_graph *g, tt_value *qkv, tt_value *doc, tt_value *pos, tt_value *inv_freq,
                           double rope_scale, int B, int T, int H, int Hk, int hd, int window);
/* y = x + d and h = rmsnorm(y) in one node; returns h, *y_out = y */
tt_value *tt_add_rmsnorm(tt_graph *g, tt_value *x, tt_value *d, tt_value *w, double eps, tt_value **y_out);
tt_value *tt_gelu(tt_graph *g, tt_value *x);
/* gelu(a) * b (tanh form): GeGLU's gate times up */
tt_value *tt_geglu(tt_graph *g, tt_value *a, tt_value *b);
/* scale * sum of cross-entropy over targets != ignore_index */
tt_value *tt_ce_linear(tt_graph *g, tt_value *h, tt_value *w, tt_value *targets, tt_value *scale,
                       int ignore_index);
/* the same over soft-capped logits: z -> softcap * tanh(z / softcap) (0: not) */
tt_value *tt_ce_linear_capped(tt_graph *g, tt_value *h, tt_value *w, tt_value *targets, tt_value *scale,
                              int ignore_index, double softcap);
/* y = cap * tanh(x / cap), elementwise (Gemma 2's soft-capped logits) */
tt_value *tt_softcap(tt_graph *g, tt_value *x, double cap);
void tt_accum(tt_graph *g, tt_value *acc, tt_value *grad);
/* Chains one grad at a time: total = tt_sumsq(g, grad_k, total_so_far_or_NULL) */
tt_value *tt_sumsq(tt_graph *g, tt_value *grad, tt_value *prev);
/* x in another dtype (f32 <-> bf16) */
tt_value *tt_cast(tt_graph *g, tt_value *x, tt_dtype to);
/* A value of zeros, made by a node */
tt_value *tt_zeros(tt_graph *g, tt_dtype dt, int ndim, const int64_t *shape);
/* y = s x, in x's dtype (products in fp32, bf16 rounded once) */
tt_value *tt_scale(tt_graph *g, tt_value *x, double s);
/* y = a + s b, in a's dtype (b's cast to it if it differs) */
tt_value *tt_add_scaled(tt_graph *g, tt_value *a, tt_value *b, double s);
/* y = a (N, W) plus s b_i (N, w_i) on a's columns [c0_i, c0_i + w_i), for k <= TT_ADD_SCALED_MAX_PARTS parts that do not
 * overlap, in a's dtype (each b cast to it if it differs) */
tt_value *tt_add_scaled_cols(tt_graph *g, tt_value *a, int k, tt_value *const *b, const int *c0, double s);
/* Dropout: y = x * keep / (1 - p), x any float value, keep(i) = u(i) >= p with u(i) in [0, 1) drawn from
 * (seed, counter, site, i) (ops/dropout.h: the same bits on every backend). rng: an i64 (2) value [seed, counter]
 * the host writes before each run (the trainer: training.seed and the micro-step, so a resumed run draws the same
 * masks); site: a constant of the call site, so that two adapters draw different masks. p = 0 is the identity:
 * x itself, no node, rng unused (may be NULL); p outside [0, 1) is refused. Pure (activation checkpointing may
 * recompute it); its backward is the same op on dy with the same rng and site: the same mask. */
tt_value *tt_dropout(tt_graph *g, tt_value *x, tt_value *rng, double p, uint64_t site);
/* Mixture-of-Experts: the route of each token, the sort of its assignments
 * by expert, the rows in expert order and back, and the experts' matmuls.
 * route returns the weights and sets *expert, *scores (either may be NULL to
 * ignore); bias: NULL or (E) f32. */
tt_value *tt_moe_route(tt_graph *g, tt_value *logits, tt_value *bias, const tt_moe_attrs *a, tt_value **expert,
                       tt_value **scores);
/* perm, pos (N*k) and offsets (E+1) of the assignments in expert order */
tt_err tt_moe_sort(tt_graph *g, tt_value *expert, int E, tt_value **perm, tt_value **pos, tt_value **offsets);
/* weight: NULL (no gate here) or (N,k) */
tt_value *tt_moe_permute(tt_graph *g, tt_value *x, tt_value *perm, tt_value *pos, tt_value *weight, int k);
tt_value *tt_moe_combine(tt_graph *g, tt_value *ys, tt_value *perm, tt_value *pos, tt_value *weight, int k);
tt_value *tt_moe_rowdot(tt_graph *g, tt_value *a, tt_value *b, tt_value *pos, int k, tt_dtype out);
/* Per-head columns: the slice of columns [c0, c0+cw) of each of H heads of w columns (deinterleave, sum_heads:
 * see TT_OP_HEAD_SLICE), and each head's a then b (b_bcast: b is one head, the same for all). */
tt_value *tt_head_slice(tt_graph *g, tt_value *x, int H, int w, int c0, int cw, int sum_heads, int deinterleave);
tt_value *tt_head_concat(tt_graph *g, tt_value *a, tt_value *b, int H, int b_bcast);
/* the slice's transpose (its backward): y back into those columns, zeros elsewhere */
tt_value *tt_head_place(tt_graph *g, tt_value *y, const tt_head_attrs *a);
/* a load-balancing or z loss of one MoE layer: in is the scores (balance, sequence) or the logits (z);
 * expert NULL for z; scale (1) f32 */
tt_value *tt_moe_aux_loss(tt_graph *g, tt_value *in, tt_value *expert, tt_value *scale, const tt_moe_aux_attrs *a);
/* y = x w[e]^T (tb) or x w[e], row group by row group */
tt_value *tt_grouped_matmul(tt_graph *g, tt_value *x, tt_value *w, tt_value *offsets, int tb);
tt_value *tt_grouped_matmul_wgrad(tt_graph *g, tt_value *a, tt_value *b, tt_value *offsets, int E, tt_dtype out);
/* y plus expert e's bias b[e] (E, C) on its rows (GPT-OSS's experts' biases); rows past offsets[E] unchanged */
tt_value *tt_grouped_bias_add(tt_graph *g, tt_value *y, tt_value *b, tt_value *offsets);
/* Expert parallelism. y (R, D) = the rows idx (R) i32 of x (M, D), a zero row where idx is -1; inv (M) i32 is
 * idx's partial inverse (TT_OP_ROW_GATHER), by which the backward gathers: dx = tt_row_gather(g, dy, inv, idx). */
tt_value *tt_row_gather(tt_graph *g, tt_value *x, tt_value *idx, tt_value *inv);
/* The exchange plan of expert parallelism, from offs_all (ep*(E+1)) i32: every group rank's moe_sort offsets
 * (an all_gather of them), in group-rank order. With o = this rank's offsets and
 * c[i][j] = offs_all[i][rank*El + j + 1] - offs_all[i][rank*El + j] (the rows source rank i sends for local
 * expert j):
 *   counts[0..3]: scounts, sdispls, rcounts, rdispls (ep) i64 in elements (rows * row), tt_all_to_allv's:
 *     scounts[d] = (o[(d+1)*El] - o[d*El]) * row, sdispls[d] = o[d*El] * row (the sorted rows are in global
 *     expert order, so each destination's rows lie together); rcounts[i] = sum_j c[i][j] * row, rdispls[i]
 *     their prefix sum. The receive buffer is source-major: source 0's rows (its rows for local expert 0,
 *     then 1, ...), then source 1's, ...
 *   loc_off (El+1) i32: the offsets of the same rows expert-major, loc_off[j] = sum_{j'<j} sum_i c[i][j'];
 *   to_src (recv_rows) i32: the source-major row of each expert-major row, -1 past the rows received;
 *   to_exp (recv_rows) i32: the expert-major row of each source-major row, -1 past them.
 * to_src and to_exp are each other's partial inverse (tt_row_gather's idx and inv); rows of one (source,
 * expert) run keep their order. A run fails when this rank receives more than recv_rows rows. */
tt_err tt_moe_ep_plan(tt_graph *g, tt_value *offs_all, const tt_moe_ep_attrs *a, tt_value **counts,
                      tt_value **loc_off, tt_value **to_src, tt_value **to_exp);

/* Collectives: each records the start node and returns its output, valid only after tt_comm_wait;
 * into: the root value to write (a state buffer), or NULL for a new activation. group is a
 * tt_group_id of dist/dist.h and group_size its size; what names the transfer. */
tt_value *tt_all_gather(tt_graph *g, tt_value *x, tt_value *into, int group, int group_size, const char *what);
tt_value *tt_reduce_scatter(tt_graph *g, tt_value *x, tt_value *into, int group, int group_size, const char *what);
tt_value *tt_all_reduce(tt_graph *g, tt_value *x, tt_value *into, int group, int reduce, const char *what);
tt_value *tt_broadcast(tt_graph *g, tt_value *x, tt_value *into, int group, int root, const char *what);
/* y has `recv` elements, (recv / D, D) rows when x is (M, D) (recv a multiple of D), else 1-D; the counts and
 * displacements are (group) i64 values, in elements. y is zero where nothing lands. Its backward is the
 * reverse exchange (the receive counts sent, the send counts received). */
tt_value *tt_all_to_allv(tt_graph *g, tt_value *x, tt_value *scounts, tt_value *sdispls, tt_value *rcounts,
                         tt_value *rdispls, int64_t recv, int group, const char *what);
/* The wait of a started collective: a view of its output (of `started`'s root) that readers read. */
tt_value *tt_comm_wait(tt_graph *g, tt_value *started);

/* The clipping factor of a squared global gradient norm (1 when max_norm <= 0) */
tt_value *tt_clip_coef_of(tt_graph *g, tt_value *sumsq, double max_norm);
/* clip: (1) f32 factor the gradient is multiplied by; hp: (2) f64 [lr, step];
 * decay: NULL (decay everything) or (S, 2) i64 ranges of p's elements that decay;
 * p16: NULL, or a persistent bf16 value of p's shape the op writes the new p into, rounded (the bf16 products'
 * copy of the weights, tt_state_alloc_w16): the op's output, which it writes in the same pass */
void tt_adamw(tt_graph *g, tt_value *p, tt_value *grad, tt_value *m, tt_value *v, tt_value *clip,
              tt_value *hp, tt_value *decay, tt_value *p16, double beta1, double beta2, double eps,
              double weight_decay);

#endif
