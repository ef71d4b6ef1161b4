/* eval_plan.c — `titan eval` (loss and perplexity of a checkpoint) and
 * `titan plan` (sizes, FLOPs and memory of a config, allocating nothing
 * big: activations are measured by building and planning the real step
 * graph with no memory behind it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/autodiff.h"
#include "graph/passes/remat.h"
#include "train/run.h"

tt_err tt_eval(const tt_config *cfg, double *loss, double *ppl, long *tokens)
{
    tt_run r;
    if (tt_run_open(&r, cfg, TT_RUN_EVAL)) return -1;
    tt_err rc = 0;
    if (!r.val_loader) rc = tt_errorf("no validation data: set validation.dataset_path (or use the synthetic corpus)");
    else if (!(rc = tt_run_validate(&r, loss, tokens))) {
        *ppl = exp(*loss);
        tt_log("eval step %ld: loss %.4f  perplexity %.3f  tokens %ld", r.step, *loss, *ppl, *tokens);
        if (r.builtin_corpus)
            tt_log("corpus floor %.4f, unigram %.4f: gap closed %.1f%%, loss/floor %.3f", r.corpus.floor_nats,
                   r.corpus.unigram_nats, 100 * (r.corpus.unigram_nats - *loss) / r.corpus.gap_nats,
                   *loss / r.corpus.floor_nats);
    }
    tt_run_close(&r);
    return rc;
}

/* What planning one micro-step graph tells: its arena, and what the passes did. */
typedef struct {
    size_t arena, naive;
    tt_fuse_stats fused;
    int folded;
    tt_remat_stats remat;
} step_plan;

/* One micro-step under an activation checkpointing mode, from the memory plan
 * of the step graph the run would build (the same passes, the configured
 * dtype). The graph binds no memory: planning reads shapes and lifetimes,
 * never values. */
static tt_err plan_activations(const tt_model_cfg *mc, int B, int T, tt_dtype dt, tt_ac_mode ac, step_plan *out)
{
    tt_model *m = tt_model_new(mc);
    if (!m) return -1;
    tt_step_cfg sc = {.B = B, .T = T, .act_dtype = dt};
    tt_step_graph sg;
    tt_memplan plan;
    tt_err rc = tt_build_micro_graph(&sg, m, &sc, 1, ac);
    if (!rc && !(rc = tt_memplan_build(sg.g, &plan))) {
        *out = (step_plan){plan.arena_bytes, plan.naive_bytes, sg.fused, sg.folded, sg.remat};
        tt_memplan_free(&plan);
    }
    if (!rc) tt_step_graph_free(&sg);
    tt_model_free(m);
    return rc;
}

tt_err tt_plan_ac_arenas(const tt_config *c, const tt_model_cfg *mc, size_t arenas[3])
{
    const tt_dtype dt = tt_config_act_dtype(c);
    for (int k = 0; k < 3; k++) {
        step_plan sp;
        if (plan_activations(mc, c->training.local_batch_size, c->training.seq_len, dt, (tt_ac_mode)k, &sp)) return -1;
        arenas[k] = sp.arena;
    }
    return 0;
}

static double gib(double b) { return b / (1024.0 * 1024.0 * 1024.0); }

tt_err tt_plan(const tt_config *c, FILE *out)
{
    tt_model_cfg mc;
    if (tt_model_cfg_from_config(c, &mc, NULL, NULL)) return -1;
    int64_t mm = 0, n = tt_model_count_params(&mc, &mm);
    if (n <= 0) return tt_error_prefix("model: ");
    int B = c->training.local_batch_size, T = c->training.seq_len;
    double fpt = tt_model_flops_per_token(&mc, T);
    tt_ac_mode ac = c->activation_checkpoint.mode;
    if ((unsigned)ac > TT_AC_FULL) return tt_errorf("activation_checkpoint.mode: unknown mode %d", (int)ac);
    /* every activation checkpointing mode, to show what each saves */
    const tt_dtype dt = tt_config_act_dtype(c);
    step_plan sp[3];
    for (int k = 0; k < 3; k++)
        if (plan_activations(&mc, B, T, dt, (tt_ac_mode)k, &sp[k])) return -1;
    size_t arena = sp[ac].arena, naive = sp[ac].naive;
    double pb = 4.0 * (double)n;
    fprintf(out, "model        %s, flavor %s: dim %d, %d layers, %d heads (%d kv, head_dim %d), ffn %d, vocab %d, %s\n",
            tt_arch_name(mc.arch), c->model.flavor, mc.dim, mc.n_layers, mc.n_heads, mc.n_kv_heads, mc.head_dim,
            mc.ffn_dim, mc.vocab_size, mc.tie_embeddings ? "tied embeddings" : "untied embeddings");
    fprintf(out, "parameters   %lld (%.3f B); %lld do matmuls\n", (long long)n, n / 1e9, (long long)mm);
    fprintf(out, "FLOPs/token  %.4g (6*N + 12*L*d*T at seq_len %d); %.4g per step of %d x %d tokens\n", fpt, T,
            fpt * B * T, B, T);
    fprintf(out, "step graph   compute %s; fused %d qkv + RoPE into attention, %d gate/up, %d add + rmsnorm; "
                 "%d gradient accumulations folded into their matmuls\n",
            dt == TT_BF16 ? "bf16 (fp32 master weights)" : "fp32", sp[0].fused.qkv, sp[0].fused.gate_up,
            sp[0].fused.add_norm, sp[0].folded);
    fprintf(out, "memory (fp32 master weights, AdamW):\n");
    fprintf(out, "  params      %10.3f GiB\n", gib(pb));
    fprintf(out, "  grads       %10.3f GiB\n", gib(pb));
    fprintf(out, "  optimizer   %10.3f GiB (exp_avg, exp_avg_sq)\n", gib(2 * pb));
    fprintf(out, "  activations %10.3f GiB planned arena (%.3f GiB without reuse), activation_checkpoint.mode %s\n",
            gib((double)arena), gib((double)naive), tt_ac_mode_name(ac));
    fprintf(out, "  total       %10.3f GiB\n", gib(4 * pb + (double)arena));
    fprintf(out, "activation checkpointing (planned arena of one micro-step; recomputation is not in MFU):\n");
    for (int k = 0; k < 3; k++)
        fprintf(out, "  %-10s %10.3f GiB (%5.1f%% of none)  %5d nodes recomputed, +%.2f%% FLOPs%s\n",
                tt_ac_mode_name((tt_ac_mode)k), gib((double)sp[k].arena),
                sp[0].arena ? 100.0 * (double)sp[k].arena / (double)sp[0].arena : 0.0, sp[k].remat.nodes,
                sp[k].remat.graph_flops > 0 ? 100 * sp[k].remat.flops / sp[k].remat.graph_flops : 0.0,
                k == (int)ac ? "   <- configured" : "");
    return 0;
}
