/* op_list.h — every op once, in id order: its id, name and attribute size, and whether it is a collective. The op
 * ids (ops.h), names (op_common.c), op table (op_table.c) and every backend's kernel table are expanded from it.
 *
 * TT_OP(ID, name, attrs_bytes): an op a backend runs, so every backend needs a kernel k_<name> for it;
 * TT_COMM(ID, name, attrs_bytes): a collective, run by the executor on the dist layer (no kernel). attrs_bytes: the size
 * of its attribute struct, 0 for none. No include guard: an includer defines both macros and includes the list where it
 * wants it expanded. Each op's comment says what it takes and makes. */

/* in: ids (N) i32, table (V,D)   out: (N,D) */
TT_OP(EMBEDDING, embedding, 0)
/* in: ids, dout (N,D)   out: dtable (V,D) (accumulable) */
TT_OP(EMBEDDING_BWD, embedding_bwd, 0)
/* in: A, B   tt_matmul_attrs   out: C (M,N) (accumulable). Products in bf16
   (fp32 sums) when A or B is bf16; C fp32 or bf16 */
TT_OP(MATMUL, matmul, sizeof(tt_matmul_attrs))
/* in: x (N,D), b (D)   out: y */
TT_OP(BIAS_ADD, bias_add, 0)
/* in: dy (N,D)   out: db (D) */
TT_OP(BIAS_GRAD, bias_grad, 0)
/* in: a, b (same shape)   out: y */
TT_OP(ADD, add, 0)
/* in: x (N,D), w (G)  tt_norm_attrs: normalise each run of G features
   (G = D: whole rows; G = head_dim: per head)   out: y, rstd (N*D/G) */
TT_OP(RMSNORM, rmsnorm, sizeof(tt_norm_attrs))
/* in: x, w, rstd, dy [, dres: a gradient added to dx]   out: dx, dw */
TT_OP(RMSNORM_BWD, rmsnorm_bwd, sizeof(tt_norm_attrs))
/* in: x, w, b  tt_norm_attrs   out: y, mean (N), rstd (N) */
TT_OP(LAYERNORM, layernorm, sizeof(tt_norm_attrs))
/* in: x, w, mean, rstd, dy   out: dx, dw, db */
TT_OP(LAYERNORM_BWD, layernorm_bwd, sizeof(tt_norm_attrs))
/* in: x (N,H*hd), pos (N) i32, inv_freq (hd/2)  tt_rope_attrs   out: y */
TT_OP(ROPE, rope, sizeof(tt_rope_attrs))
/* in: q (N,H*hd), k (N,Hk*hd), v (N,Hk*hdv), doc (N) i32  tt_attn_attrs (hdv: 0 = hd)
   out: o (N,H*hdv), lse (B,H,T) (-inf for a row that sees no key) */
TT_OP(ATTENTION, attention, sizeof(tt_attn_attrs))
/* in: q, k, v, doc, o, lse, do   out: dq, dk, dv */
TT_OP(ATTENTION_BWD, attention_bwd, sizeof(tt_attn_attrs))
/* generation: in: q (B*Tq,H*hd), k_new (B*Tq,Hk*hd), v_new (B*Tq,Hk*hdv),
   cache_k (B,Tmax,Hk*hd), cache_v (B,Tmax,Hk*hdv) state, start (1) i32 input
   tt_attn_attrs (T = Tq, Tmax)
   writes k_new/v_new into the caches at rows [start, start+Tq)
   out: o (B*Tq,H*hdv), lse (B,H,Tq) */
TT_OP(ATTENTION_KV, attention_kv, sizeof(tt_attn_attrs))
/* in: a, b   out: silu(a)*b
   or in: ab (N, 2F) with a = columns [0, F), b = [F, 2F) [, off (E+1) i32]   out: (N, F);
   with off, only the rows before off[E] (grouped experts' rows in a larger buffer), the
   rest 0 */
TT_OP(SWIGLU, swiglu, 0)
/* in: a, b, dy   out: da, db;  or in: ab, dy [, off]   out: dab (N, 2F) (rows as above) */
TT_OP(SWIGLU_BWD, swiglu_bwd, 0)
/* in: x   out: y */
TT_OP(GELU, gelu, 0)
/* in: x, dy   out: dx */
TT_OP(GELU_BWD, gelu_bwd, 0)
/* in: a, b   out: gelu(a) * b, GELU's tanh form (GeGLU: Gemma's gelu_pytorch_tanh gate) */
TT_OP(GEGLU, geglu, 0)
/* in: a, b, dy   out: da, db */
TT_OP(GEGLU_BWD, geglu_bwd, 0)
/* in: x   tt_scale_attrs (s: the cap)   out: y = s tanh(x / s) (Gemma 2's soft-capped logits) */
TT_OP(SOFTCAP, softcap, sizeof(tt_scale_attrs))
/* in: x, dy   tt_scale_attrs   out: dx = dy (1 - tanh(x / s)^2) */
TT_OP(SOFTCAP_BWD, softcap_bwd, sizeof(tt_scale_attrs))
/* in: ab (N, 2F) with gate a = columns [0, F), up b = [F, 2F) [, off (E+1) i32]   tt_swiglu_attrs
   out: (N, F): (clamp(b, -limit, limit) + 1) * g * sigmoid(alpha * g), g = min(a, limit) (GPT-OSS's
   experts); with off, only the rows before off[E], the rest 0 */
TT_OP(SWIGLU_CLAMP, swiglu_clamp, sizeof(tt_swiglu_attrs))
/* in: ab, dy [, off]   tt_swiglu_attrs   out: dab (N, 2F) (rows as above; 0 where a clamp holds) */
TT_OP(SWIGLU_CLAMP_BWD, swiglu_clamp_bwd, sizeof(tt_swiglu_attrs))
/* in: h (N,D), W (V,D), targets (N) i32, scale (1) f32  tt_ce_attrs
   out: loss (1) = scale * sum of token losses; as a loss root also
   dh (N,D) and dW (V,D) (accumulable) from the same chunk loop */
TT_OP(CE_LINEAR, ce_linear, sizeof(tt_ce_attrs))
/* in: acc (state), g   acc += g (in place)   out: none */
TT_OP(ACCUM, accum, 0)
/* in: g [, prev (1)]   out: (1) f32 = prev + sum of squares of g */
TT_OP(SUMSQ, sumsq, 0)
/* attention on one qkv buffer (N, (H+2Hk)*hd): q, k, v its column ranges,
   RoPE applied to q and k inside when pos is given.
   in: qkv, doc [, pos (N) i32, inv_freq (hd/2)]
   tt_attn_attrs (rope_scale: the cos/sin scale)   out: o (N,H*hd), lse */
TT_OP(ATTENTION_QKV, attention_qkv, sizeof(tt_attn_attrs))
/* in: qkv, doc, o, lse, do [, pos, inv_freq]   out: dqkv */
TT_OP(ATTENTION_QKV_BWD, attention_qkv_bwd, sizeof(tt_attn_attrs))
/* the residual add and the norm after it: in: x, d, w  tt_norm_attrs
   out: y = x + d, h = rmsnorm(y) w, rstd (N) */
TT_OP(ADD_RMSNORM, add_rmsnorm, sizeof(tt_norm_attrs))
/* in: p, g, m, v, clip (1) f32, hp (2) f64 input = [lr, step]
   [, decay (S, 2) i64 const: weight decay only inside these element
   ranges, sorted]   tt_adamw_attrs
   g is multiplied by clip, then p, m, v are updated in place and g is
   zeroed for the next accumulation.  out: none. One node may update
   every parameter of a model through its flat buffers. */
TT_OP(ADAMW, adamw, sizeof(tt_adamw_attrs))
/* in: sumsq (1) f32   tt_clip_attrs   out: coef (1) f32: the factor that
   brings the global gradient norm sqrt(sumsq) down to max_norm
   (tt_clip_coef), 1 when max_norm <= 0 or the norm is below it */
TT_OP(CLIP_COEF, clip_coef, sizeof(tt_clip_attrs))
/* in: x   out: y, x's values in y's dtype (f32 <-> bf16, rounded to nearest even) */
TT_OP(CAST, cast, 0)
/* in: none   out: y, all zeros (a gradient buffer made anew each micro-step) */
TT_OP(ZERO, zero, 0)
/* in: x   tt_scale_attrs   out: y = s x (LoRA's alpha / r on its adapter's output) */
TT_OP(SCALE, scale, sizeof(tt_scale_attrs))
/* in: a (N, W), b_1..b_k (N, w_i)   tt_add_scaled_attrs   out: y = a, plus s b_i on columns [c0_i, c0_i + w_i)
   (a LoRA-adapted linear layer's output: the base's, fused q/k/v or gate/up included, plus each adapter's term on
   its part's columns; kept by selective activation checkpointing, as a matmul's output is) */
TT_OP(ADD_SCALED, add_scaled, sizeof(tt_add_scaled_attrs))
/* in: x, rng (2) i64 input = [seed, counter]   tt_dropout_attrs (p, site)
   out: y = x * keep / (1 - p), keep drawn from (seed, counter, site, element) (ops/dropout.h);
   its backward is the same op on dy (the same mask) */
TT_OP(DROPOUT, dropout, sizeof(tt_dropout_attrs))

/* Per-head column moves (tt_head_attrs): x (N, H*w) is H heads of w columns a row. */
/* in: x   out: (N, H*cw): columns [c0, c0+cw) of every head; with deinterleave in the
   order c0, c0+2, ..., c0+1, c0+3, ... (interleaved RoPE pairs as rotate-half ones); with
   sum_heads (N, cw), their sum over the heads */
TT_OP(HEAD_SLICE, head_slice, sizeof(tt_head_attrs))
/* the slice's transpose: in: y (N, H*cw), or (N, cw) with sum_heads (every head the same)
   out: (N, H*w), y in those columns, zeros elsewhere */
TT_OP(HEAD_PLACE, head_place, sizeof(tt_head_attrs))
/* in: a (N, H*wa), b (N, H*wb), or (N, wb) with bcast (every head the same)
   out: (N, H*(wa+wb)): each head's a columns, then its b columns */
TT_OP(HEAD_CONCAT, head_concat, sizeof(tt_head_attrs))

/* Mixture-of-Experts (tt_moe_attrs). N tokens, E experts, k slots a token; a (token, slot) pair is
 * the assignment a = t*k + s, and M = N*k assignments are sorted by expert into rows r. Dropless: every
 * assignment gets a row. */
/* in: logits (N,E) [, bias (E) f32: added to the scores for selection only]
   out: weight (N,k) (logits' dtype), expert (N,k) i32, scores (N,E) (logits' dtype)
   scores = softmax or sigmoid of the logits; the k experts of the highest scores
   (+ bias), within the best topk_group of n_group groups when n_group > 1, in
   descending order, ties to the lower expert; weight = route_scale * score, over
   the sum of the k scores (+1e-20) when route_norm */
TT_OP(MOE_ROUTE, moe_route, sizeof(tt_moe_attrs))
/* in: scores, expert, dweight [, dscores: a gradient of the scores too]   out: dlogits (N,E) */
TT_OP(MOE_ROUTE_BWD, moe_route_bwd, sizeof(tt_moe_attrs))
/* tt_moe_aux_attrs: a load-balancing loss of one MoE layer, scale (1) f32 times coef times
   balance (Switch, Mixtral): E sum_e f_e P_e, f_e = the tokens routed to e over N, P_e = the
   mean over tokens of its normalised score s_te / sum_j s_tj
   sequence (DeepSeek-V3): the mean over the B sequences of sum_e f'_e P'_e, f'_e = E / (k T)
   times the sequence's tokens routed to e, P'_e the sequence's mean normalised score
   (both in: scores (N,E), expert (N,k) i32, scale)
   z (router z-loss): the mean over tokens of logsumexp(logits)^2   (in: logits (N,E), scale)
   out: loss (1); as a loss root also the gradient of input 0 (N,E) */
TT_OP(MOE_AUX_LOSS, moe_aux_loss, sizeof(tt_moe_aux_attrs))
/* in: expert (N,k) i32   out: perm (M) i32: the assignment of each row; pos (M) i32:
   the row of each assignment; offsets (E+1) i32: expert e's rows are
   [offsets[e], offsets[e+1]). A stable sort: rows of one expert in assignment order */
TT_OP(MOE_SORT, moe_sort, sizeof(tt_moe_attrs))
/* in: x (N,D), perm, pos [, weight (N,k)]   out: xs (M,D), xs[r] = x[perm[r]/k]
   (times weight[perm[r]]: the gate applied to the experts' input) */
TT_OP(MOE_PERMUTE, moe_permute, sizeof(tt_moe_attrs))
/* in: ys (M,D), perm, pos [, weight (N,k)]   out: y (N,D), y[t] = the sum over s = 0..k-1,
   in that order, of ys[pos[t*k+s]] (times weight[t,s]): a gather, no atomics */
TT_OP(MOE_COMBINE, moe_combine, sizeof(tt_moe_attrs))
/* in: a (N,D), b (M,D), pos   out: (N,k): dot(a[t], b[pos[t*k+s]]) (the weights' gradient) */
TT_OP(MOE_ROWDOT, moe_rowdot, sizeof(tt_moe_attrs))
/* in: x (M,K), w, offsets (E+1) i32   tt_matmul_attrs (tb)   out: y (M,Nw): the rows of
   expert e times its matrix: w (E,Nw,K) and y = x w[e]^T when tb, else w (E,K,Nw) and
   y = x w[e]. Products in bf16 (fp32 sums) when x or w is bf16, as matmul. offsets[E] may
   be below M (a receive buffer planned at a bound): rows [offsets[E], M) of y are zero */
TT_OP(GROUPED_MATMUL, grouped_matmul, sizeof(tt_matmul_attrs))
/* in: a (M,P), b (M,Q), offsets   out: dw (E,P,Q) (accumulable): dw[e] = the
   transpose of expert e's rows of a, times its rows of b (0 for an expert with none);
   rows [offsets[E], M) are not read */
TT_OP(GROUPED_MATMUL_WGRAD, grouped_matmul_wgrad, 0)
/* in: y (M,C), b (E,C), offsets (E+1) i32   out: (M,C): expert e's rows of y plus b[e] (the experts'
   biases); rows [offsets[E], M) pass unchanged */
TT_OP(GROUPED_BIAS_ADD, grouped_bias_add, 0)
/* in: dy (M,C), offsets   out: db (E,C): the sum of expert e's rows of dy (0 for an
   expert with none); rows [offsets[E], M) are not read */
TT_OP(GROUPED_BIAS_GRAD, grouped_bias_grad, 0)

/* Expert parallelism: the experts split over the ep ranks of a group, tokens exchanged with all_to_allv. */
/* in: x (M,D), idx (R) i32, inv (M) i32   out: y (R,D): y[i] = x[idx[i]], a zero row where
   idx[i] = -1. idx and inv are each other's partial inverse (inv[idx[i]] = i where
   idx[i] >= 0, idx[inv[j]] = j where inv[j] >= 0), so the backward is again a gather:
   dx = row_gather(dy, inv, idx) */
TT_OP(ROW_GATHER, row_gather, 0)
/* tt_moe_ep_attrs   in: offs_all (ep*(E+1)) i32: the moe_sort offsets of every group rank,
   in group-rank order
   out: scounts, sdispls, rcounts, rdispls (ep) i64, in elements (all_to_allv's);
   loc_off (El+1) i32; to_src, to_exp (recv_rows) i32 (see tt_moe_ep_plan) */
TT_OP(MOE_EP_PLAN, moe_ep_plan, sizeof(tt_moe_ep_attrs))

/* Collectives (tt_comm_attrs): the executor runs them on the dist layer, not a backend kernel. A start
 * node writes its output asynchronously (into a view of the output's root); the wait node for it
 * (TT_OP_COMM_WAIT) makes that output valid, and every reader reads after the wait. */
/* in: x (n)   out: y (group x n): every rank's x in group-rank order */
TT_COMM(ALL_GATHER, all_gather, sizeof(tt_comm_attrs))
/* in: x (group x n)   out: y (n): this rank's n of the sum over the group */
TT_COMM(REDUCE_SCATTER, reduce_scatter, sizeof(tt_comm_attrs))
/* in: x (n)   out: y (n): the sum (or max) over the group */
TT_COMM(ALL_REDUCE, all_reduce, sizeof(tt_comm_attrs))
/* in: x (n)   out: y (n): the root's x on every rank */
TT_COMM(BROADCAST, broadcast, sizeof(tt_comm_attrs))
/* in: x, scounts, sdispls, rcounts, rdispls (group) i64   out: y (zero where nothing lands):
   rank i's x [sdispls[j], + scounts[j]) lands in rank j's y at rdispls[i] (elements) */
TT_COMM(ALL_TO_ALLV, all_to_allv, sizeof(tt_comm_attrs))
/* in: the start node's output, then its inputs (kept alive until the transfer ends)
   out: a view of the start's output root: what the readers read */
TT_COMM(COMM_WAIT, comm_wait, sizeof(tt_comm_attrs))
