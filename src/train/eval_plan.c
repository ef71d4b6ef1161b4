/* eval_plan.c — `titan eval` (loss and perplexity of a checkpoint) and
 * `titan plan` (sizes, FLOPs and memory of a config, allocating nothing
 * big: activations are measured by building and planning the step graph
 * without binding any buffers). */
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

/* Activation bytes of one micro-step under an activation checkpointing mode,
 * from the memory plan of a graph whose parameters are declared but never
 * allocated. */
static tt_err plan_activations(const tt_model_cfg *mc, int B, int T, tt_ac_mode ac, size_t *arena, size_t *naive,
                               tt_remat_stats *rs)
{
    tt_model m;
    if (tt_model_declare_only(mc, &m)) return -1;
    tt_graph *g = tt_graph_new();
    tt_value **vals = calloc((size_t)m.n_params, sizeof *vals), **grads = calloc((size_t)m.n_params, sizeof *grads);
    tt_err rc = -1;
    if (g && vals && grads && tt_model_bind(g, &m, vals) == 0) {
        int64_t n = (int64_t)B * T, one = 1;
        tt_fwd_inputs in = {B, T, tt_graph_input(g, "ids", TT_I32, 1, &n), tt_graph_input(g, "pos", TT_I32, 1, &n),
                            tt_graph_input(g, "doc", TT_I32, 1, &n), NULL, NULL, NULL};
        tt_value *tg = tt_graph_input(g, "targets", TT_I32, 1, &n), *sc = tt_graph_input(g, "scale", TT_F32, 1, &one);
        tt_value *head = NULL, *h = tt_model_forward(g, &m, vals, &in, &head);
        tt_value *loss = tt_ce_linear(g, h, head, tg, sc, -100);
        int n_fwd = g->n_nodes;
        tt_memplan plan;
        if (!g->failed && tt_autodiff(g, loss, m.n_params, vals, grads) == 0 && tt_remat(g, n_fwd, ac, rs) == 0 &&
            tt_memplan_build(g, &plan) == 0) {
            *arena = plan.arena_bytes;
            *naive = plan.naive_bytes;
            tt_memplan_free(&plan);
            rc = 0;
        }
    }
    free(vals);
    free(grads);
    tt_graph_free(g);
    free(m.params);
    return rc;
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
    size_t arenas[3] = {0}, naives[3] = {0};
    tt_remat_stats rs[3];
    for (int k = 0; k < 3; k++)
        if (plan_activations(&mc, B, T, (tt_ac_mode)k, &arenas[k], &naives[k], &rs[k])) return -1;
    size_t arena = arenas[ac], naive = naives[ac];
    double pb = 4.0 * (double)n;
    fprintf(out, "model        %s, flavor %s: dim %d, %d layers, %d heads (%d kv, head_dim %d), ffn %d, vocab %d, %s\n",
            tt_arch_name(mc.arch), c->model.flavor, mc.dim, mc.n_layers, mc.n_heads, mc.n_kv_heads, mc.head_dim,
            mc.ffn_dim, mc.vocab_size, mc.tie_embeddings ? "tied embeddings" : "untied embeddings");
    fprintf(out, "parameters   %lld (%.3f B); %lld do matmuls\n", (long long)n, n / 1e9, (long long)mm);
    fprintf(out, "FLOPs/token  %.4g (6*N + 12*L*d*T at seq_len %d); %.4g per step of %d x %d tokens\n", fpt, T,
            fpt * B * T, B, T);
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
                tt_ac_mode_name((tt_ac_mode)k), gib((double)arenas[k]),
                arenas[0] ? 100.0 * (double)arenas[k] / (double)arenas[0] : 0.0, rs[k].nodes,
                rs[k].graph_flops > 0 ? 100 * rs[k].flops / rs[k].graph_flops : 0.0, k == (int)ac ? "   <- configured" : "");
    return 0;
}
