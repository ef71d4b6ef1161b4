/* plan.c — `titan plan`: the model plan of a config (train/model_plan.h),
 * printed for people or as the JSON a training run writes to plan.json. */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "train/model_plan.h"

static double gib(double b) { return b / (1024.0 * 1024.0 * 1024.0); }

tt_err tt_plan_json(const tt_config *c, FILE *out)
{
    tt_model_plan p;
    if (tt_model_plan_build(c, &p)) return -1;
    cJSON *o = tt_model_plan_json(&p, c);
    char *text = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!text) return tt_errorf("out of memory printing the plan");
    fprintf(out, "%s\n", text);
    free(text);
    return 0;
}

tt_err tt_plan(const tt_config *c, FILE *out)
{
    tt_model_plan p;
    if (tt_model_plan_build(c, &p)) return -1;
    const tt_model_cfg *mc = &p.mc;
    const int B = p.B, T = p.T;
    const double fpt = p.flops_per_token;
    const tt_plan_ac *sp = p.modes, *cur = &p.modes[p.ac];
    fprintf(out, "model        %s, %s %s: dim %d, %d layers, %d heads (%d kv, head_dim %d), ffn %d, vocab %d, %s\n",
            tt_arch_name(mc->arch), c->model.hf_assets_path[0] ? "from" : "flavor", tt_model_plan_source(c), mc->dim,
            mc->n_layers, mc->n_heads, mc->n_kv_heads, mc->head_dim, mc->ffn_dim, mc->vocab_size,
            mc->tie_embeddings ? "tied embeddings" : "untied embeddings");
    fprintf(out, "parameters   %lld (%.3f B); %lld do matmuls\n", (long long)p.params, p.params / 1e9,
            (long long)p.matmul_params);
    if (mc->moe.n_experts > 0) {
        char moe[320];
        tt_model_moe_describe(mc, &p.ext, moe, sizeof moe);
        fprintf(out, "experts      %s\n", moe);
        fprintf(out, "             weights of all parameters %.3f GiB, of the active ones %.3f GiB (fp32); FLOPs and MFU "
                     "count the active ones\n", gib(4.0 * (double)p.params), gib(4.0 * (double)p.active_params));
    }
    fprintf(out, "FLOPs/token  %.4g (%s at seq_len %d); %.4g per step of %d x %d tokens\n", fpt,
            mc->mla.kv_lora_rank > 0 ? "6*N + 6*L*H*(d_qk+d_v)*T" : "6*N + 12*L*d*T", T,
            fpt * B * T, B, T);
    fprintf(out, "step graph   compute %s; fused %d qkv + RoPE into attention, %d gate/up, %d add + rmsnorm; "
                 "%d gradient accumulations folded into their matmuls\n",
            p.dtype == TT_BF16 ? "bf16 (fp32 master weights)" : "fp32", p.fused.qkv, p.fused.gate_up,
            p.fused.add_norm, p.folded);
    if (p.lora) {
        fprintf(out, "LoRA         %d linear layers adapted, %lld adapter parameters (%.3f%% of the model's); the base "
                     "frozen, its linear weights in %s\n",
                p.lora_targets, (long long)p.adapter_params, 100.0 * (double)p.adapter_params / (double)p.params,
                p.lora_base_dtype == TT_BF16 ? "bf16" : "fp32");
        fprintf(out, "memory (a frozen base, fp32 adapters, AdamW on the adapters):\n");
        fprintf(out, "  params      %10.3f GiB (the frozen base %.3f GiB, the adapters %.3f GiB)\n", gib(p.param_bytes),
                gib(p.frozen_bytes), gib(p.param_bytes - p.frozen_bytes));
    } else {
        fprintf(out, "memory (fp32 master weights, AdamW):\n");
        fprintf(out, "  params      %10.3f GiB\n", gib(p.param_bytes));
        if (p.w16_bytes > 0)
            fprintf(out, "  bf16 copy   %10.3f GiB (the weights rounded for the bf16 products)\n", gib(p.w16_bytes));
    }
    fprintf(out, "  grads       %10.3f GiB\n", gib(p.grad_bytes));
    fprintf(out, "  optimizer   %10.3f GiB (exp_avg, exp_avg_sq)\n", gib(p.optim_bytes));
    fprintf(out, "  activations %10.3f GiB planned arena (%.3f GiB without reuse), activation_checkpoint.mode %s\n",
            gib((double)cur->arena), gib((double)cur->naive), tt_ac_mode_name(p.ac));
    fprintf(out, "  total       %10.3f GiB\n", gib(p.param_bytes + p.w16_bytes + p.grad_bytes + p.optim_bytes + (double)cur->arena));
    if (p.replicas * p.shards > 1) {
        const double rank_total = p.rank_state_bytes + (double)cur->arena,
                     sent = p.accum * (p.gather_bytes + p.exchange_bytes) + p.reduce_bytes;
        char experts[64] = "";
        if (p.ep > 1) snprintf(experts, sizeof experts, ", experts over %d", p.ep);
        fprintf(out, "per rank of %d (%d replicas x %d shards%s; %d buckets%s):\n", p.replicas * p.shards, p.replicas,
                p.shards, experts, p.n_buckets, p.accum > 1 ? ", micro-steps accumulating" : "");
        if (p.lora)
            fprintf(out, "  state       %10.3f GiB (the frozen base's slices %.3f GiB in its dtypes; the adapters' "
                         "slices of weights, gradients and moments%s)\n",
                    gib(p.rank_state_bytes), gib(p.rank_frozen_bytes),
                    p.full_grad_bytes > 0 ? ", and the full gradients it accumulates" : "");
        else
            fprintf(out, "  state       %10.3f GiB (its slices of weights, gradients and moments%s%s)\n",
                    gib(p.rank_state_bytes), p.full_grad_bytes > 0 ? ", and the full gradients it accumulates" : "",
                    p.w16_bytes > 0 ? ", and the weights' bf16 copy" : "");
        fprintf(out, "  activations %10.3f GiB planned arena of the FSDP step graph (gathered weights included)\n",
                gib((double)cur->arena));
        fprintf(out, "  total       %10.3f GiB\n", gib(rank_total));
        fprintf(out, "  sends       %10.3f GiB per step: all-gathers %.3f GiB x %d micro-steps, reductions %.3f GiB "
                     "(ring algorithms)\n",
                gib(sent), gib(p.gather_bytes), p.accum, gib(p.reduce_bytes));
        if (p.ep > 1)
            fprintf(out, "  exchanges   %10.3f GiB per step of that: tokens to and from the experts' ranks, %.3f GiB x %d "
                         "micro-steps (all-to-all, forward and backward, tokens spread evenly over the experts)\n",
                    gib(p.accum * p.exchange_bytes), gib(p.exchange_bytes), p.accum);
    }
    fprintf(out, "activation checkpointing (planned arena of one micro-step; recomputation is not in MFU):\n");
    for (int k = 0; k < 3; k++)
        fprintf(out, "  %-10s %10.3f GiB (%5.1f%% of none)  %5d nodes recomputed, +%.2f%% FLOPs%s\n",
                tt_ac_mode_name((tt_ac_mode)k), gib((double)sp[k].arena),
                sp[0].arena ? 100.0 * (double)sp[k].arena / (double)sp[0].arena : 0.0, sp[k].remat.nodes,
                sp[k].remat.graph_flops > 0 ? 100 * sp[k].remat.flops / sp[k].remat.graph_flops : 0.0,
                k == (int)p.ac ? "   <- configured" : "");
    return 0;
}
