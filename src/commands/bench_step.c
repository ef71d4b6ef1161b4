/* bench_step.c — `titan bench step`: times the real training step (micro
 * step + optimizer) of a config on random tokens, and with --profile breaks
 * the step down by op and by scope and writes a Chrome trace of one step.
 * Under an MPI launcher every rank runs the FSDP step of the config's mesh on
 * tokens of its own; rank 0 reports the slowest rank's step, and with
 * --profile the time the ranks spend starting collectives and blocked in
 * their waits (the same with comm.overlap false measures the collectives
 * themselves), and each rank writes its own trace. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/resolve.h"
#include "dist/dist.h"
#include "train/parallel.h"
#include "train/metrics.h"
#include "train/model_plan.h"
#include "train/step_graph.h"
#include "train/trace.h"

typedef struct {
    char name[64];
    double sec, flops, bytes;
    long calls;
} bucket;

static bucket *find_bucket(bucket *b, int *n, int cap, const char *name)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(b[i].name, name)) return &b[i];
    if (*n == cap) return NULL;
    memset(&b[*n], 0, sizeof b[*n]);
    snprintf(b[*n].name, sizeof b[*n].name, "%s", name);
    return &b[(*n)++];
}

/* "layers.3.attention" -> "layers.*.attention": one row for all blocks */
static void scope_group(const char *scope, char *out, size_t n)
{
    size_t k = 0;
    for (const char *p = scope; *p && k + 2 < n; p++) {
        if (isdigit((unsigned char)*p) && p > scope && p[-1] == '.') {
            while (isdigit((unsigned char)p[1])) p++;
            out[k++] = '*';
        } else {
            out[k++] = *p;
        }
    }
    out[k] = 0;
    if (!k) snprintf(out, n, "(none)");
}

static double node_bytes(const tt_node *nd)
{
    double b = 0;
    for (int i = 0; i < nd->n_in; i++) b += (double)tt_value_bytes(nd->in[i]);
    for (int i = 0; i < nd->n_out; i++) b += (double)tt_value_bytes(nd->out[i]);
    return b;
}

static int by_time(const void *a, const void *b)
{
    double x = ((const bucket *)a)->sec, y = ((const bucket *)b)->sec;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* One row a bucket, slowest first: its time and share of the step, then the roofline: its GFLOP/s and GB/s, each
 * also as a fraction of the peak (gflops) and of the memory bandwidth (gbps; 0: not measured, "-") */
static void print_buckets(FILE *out, const char *title, bucket *b, int n, double total, double gflops, double gbps)
{
    if (!out) return;
    qsort(b, (size_t)n, sizeof *b, by_time);
    fprintf(out, "\n%-28s %8s %7s %10s %9s %7s %9s %7s\n", title, "ms/step", "share", "calls/step", "GFLOP/s", "%peak",
            "GB/s", "%bw");
    for (int i = 0; i < n; i++) {
        const double f = b[i].sec > 0 ? b[i].flops / b[i].sec / 1e9 : 0, m = b[i].sec > 0 ? b[i].bytes / b[i].sec / 1e9 : 0;
        char pf[16] = "-", pm[16] = "-";
        if (gflops > 0) snprintf(pf, sizeof pf, "%.1f%%", 100 * f / gflops);
        if (gbps > 0) snprintf(pm, sizeof pm, "%.1f%%", 100 * m / gbps);
        fprintf(out, "%-28s %8.2f %6.1f%% %10ld %9.1f %7s %9.1f %7s\n", b[i].name, 1e3 * b[i].sec,
                100 * b[i].sec / total, b[i].calls, f, pf, m, pm);
    }
}

/* The slowest rank's figure (one process: its own). */
static tt_err rank_max(tt_dist *d, double *x, size_t n)
{
    return tt_dist_world(d) > 1 ? tt_dist_all_reduce(d, TT_GROUP_WORLD, x, n, TT_F64, TT_REDUCE_MAX, "bench step") : 0;
}

/* path.json -> path.rank<r>.json: one trace a rank. */
static void rank_path(char *buf, size_t n, const char *path, int rank, int world)
{
    const char *dot = strrchr(path, '.');
    if (world == 1) snprintf(buf, n, "%s", path);
    else if (dot && !strchr(dot, '/')) snprintf(buf, n, "%.*s.rank%d%s", (int)(dot - path), path, rank, dot);
    else snprintf(buf, n, "%s.rank%d", path, rank);
}

/* --host-check: the device's peak (GFLOP/s in dt), memory bandwidth (GB/s) and two threads' round trip (ns)
 * measured now, caching nothing; 0 for a figure that could not be measured (a warning, not an error: the steps'
 * own figures stand without it) */
typedef struct {
    double gflops, gbps, rt_ns;
} host_speed;

static host_speed host_now(const tt_backend *be, tt_dtype dt)
{
    host_speed h = {0, 0, 0};
    tt_backend_peak pk;
    if (be->peak(-0.5, &pk)) tt_warn("bench step --host-check: measuring the peak failed: %s", tt_last_error());
    else h.gflops = pk.gflops[dt] > 0 ? pk.gflops[dt] : pk.gflops[TT_F32];
    if (be->bandwidth && be->bandwidth(0, &h.gbps)) {
        tt_warn("bench step --host-check: measuring the memory bandwidth failed: %s", tt_last_error());
        h.gbps = 0;
    }
    if (be->core_round_trip && be->core_round_trip(&h.rt_ns)) {
        tt_warn("bench step --host-check: measuring the threads' round trip failed: %s", tt_last_error());
        h.rt_ns = 0;
    }
    return h;
}

tt_err tt_bench_step(const tt_config *c, int steps, int warmup, int profile, int host_check, const char *trace_path,
                     FILE *out)
{
    tt_model_cfg mc;
    tt_model_ext ext;
    tt_dist *d = NULL;
    if (tt_model_cfg_from_config(c, &mc, &ext, NULL) || tt_parallel_join(c, &d)) return -1;
    const int rank = tt_dist_rank(d), world = tt_dist_world(d);
    if (rank != 0) out = NULL; /* rank 0 reports */
    int B = c->training.local_batch_size, T = c->training.seq_len;
    const tt_backend *be = tt_config_backend(c);
    tt_queue *q = be ? be->queue_new() : NULL;
    tt_model *m = tt_model_new_ext(&mc, &ext);
    tt_sharding sh = {0};
    tt_train_state st = {0};
    tt_lora lora = {0};
    tt_frozen_base fb = {0};
    tt_lora_spec spec;
    const int use_lora = tt_config_lora_on(c);
    tt_step_graph tr = {0}, op = {0};
    size_t n = (size_t)B * T;
    int32_t *ids = tt_alloc(n * 4), *tgt = tt_alloc(n * 4), *pos = tt_alloc(n * 4), *doc = tt_alloc(n * 4);
    tt_step_cfg sc = {.B = B, .T = T, .act_dtype = tt_config_act_dtype(c)};
    double *st_[2] = {0}, *du[2] = {0}, *acc[2] = {0}, *each = NULL; /* each: the timed steps' seconds */
    bucket *ops = calloc(TT_OP_COUNT, sizeof *ops), *scopes = calloc(256, sizeof *scopes);
    tt_err rc = -1;
    const int ep = tt_dist_group_size(d, TT_GROUP_EXPERT);
    const size_t bucket_bytes = (size_t)c->parallelism.fsdp_bucket_bytes;
    if (!q || !m || !ids || !tgt || !pos || !doc || !ops || !scopes ||
        (use_lora && (tt_parallel_check_lora(ep) || tt_config_lora_spec(c, &spec) || tt_lora_new(m, &spec, &lora))))
        goto done;
    /* the state of what trains (the model, or LoRA's adapters) laid out over the mesh as a run lays it out */
    const tt_model *trained = use_lora ? lora.adapters : m;
    if (tt_sharding_init(&sh, trained, tt_dist_group_size(d, TT_GROUP_SHARD), tt_dist_group_size(d, TT_GROUP_REPLICATE),
                         tt_dist_group_rank(d, TT_GROUP_SHARD), ep, bucket_bytes))
        goto done;
    const tt_sharding *mesh = world > 1 ? &sh : NULL;
    if (use_lora) { /* over a frozen base sliced the same way (random: the speed does not depend on the values) */
        tt_param_store base = {0};
        if (tt_frozen_init_sharded(&fb, m, tt_config_lora_base_dtype(c), mesh, bucket_bytes, be, q) ||
            ((base = tt_frozen_store(&fb)), tt_model_init_weights(m, (uint64_t)c->training.seed, &base)))
            goto done;
        sc.lora = &lora, sc.frozen = &fb;
    }
    if (tt_state_init_sharded(&st, trained, mesh, be, q, 1)) goto done;
    if (world > 1) { /* the FSDP step of the mesh, as a run builds it */
        tt_parallel_step_cfg(c, &sh, &sc);
    }
    tt_param_store weights = tt_state_store(&st, TT_STATE_PARAM);
    if (tt_model_init_weights(trained, (uint64_t)c->training.seed, &weights)) goto done;
    if (tt_step_use_weights16(&sc, &st)) goto done; /* the bf16 weight copy a run keeps, where it keeps one */
    /* random tokens over the whole vocabulary, one document per row: the cost of a step does not depend on the
     * text (bench/side_by_side.py's PyTorch side draws the same way: torch.randint(0, V)); each rank its own */
    tt_rng r = {(uint64_t)c->training.seed + (uint64_t)rank, 0};
    const int V = mc.vocab_size;
    for (size_t i = 0; i < n; i++) {
        ids[i] = (int32_t)tt_rng_below(&r, (uint64_t)V);
        tgt[i] = (int32_t)tt_rng_below(&r, (uint64_t)V);
        pos[i] = (int32_t)(i % (size_t)T);
        doc[i] = 0;
    }
    tt_adamw_cfg ac = {c->optimizer.beta1, c->optimizer.beta2, c->optimizer.eps, c->optimizer.weight_decay,
                       c->training.max_norm};
    if (tt_build_micro_step(&tr, m, &st, &sc, 1, c->training.exec_mode, c->activation_checkpoint.mode, NULL) ||
        tt_build_optim_step(&op, trained, &st, &ac, c->training.exec_mode) ||
        tt_step_set_batch(&tr, ids, tgt, pos, doc, 1.0f / (float)n, 1.0f) ||
        tt_step_set_rng(&tr, (uint64_t)c->training.seed, 0))
        goto done;
    for (int k = 0; k < 2; k++) {
        int nn = (k ? op.g : tr.g)->n_nodes;
        st_[k] = calloc((size_t)nn, sizeof(double));
        du[k] = calloc((size_t)nn, sizeof(double));
        acc[k] = calloc((size_t)nn, sizeof(double));
        if (!st_[k] || !du[k] || !acc[k]) goto done;
    }
    double fpt = tt_model_flops_per_token(&mc, T);
    int64_t matmul_params = 0;
    tt_model_count_params(&mc, &matmul_params);
    if (use_lora) fpt = tt_lora_flops_per_token(fpt, matmul_params, (int64_t)lora.adapters->numel);
    tt_backend_peak pk = {0};
    int bf16 = sc.act_dtype == TT_BF16;
    double peak = c->metrics.peak_tflops > 0 ? c->metrics.peak_tflops * 1e3
                : be->peak(0, &pk)            ? 0
                : pk.gflops[sc.act_dtype] > 0 ? pk.gflops[sc.act_dtype]
                                              : pk.gflops[TT_F32];
    char waits[160];
    if (out)
        fprintf(out, "bench step: %s %s%s, %d x %d tokens, backend %s, exec %s, compute %s, activation checkpoint %s, "
                     "%d warmup + %d timed steps, %d threads, OpenMP waits: %s\n",
                tt_arch_name(mc.arch), c->model.hf_assets_path[0] ? "from " : "", tt_model_plan_source(c), B, T, be->name,
                c->training.exec_mode == TT_EXEC_GRAPH ? "graph" : "eager/debug",
                bf16 ? "bf16 (fp32 master weights)" : "fp32", tt_ac_mode_name(c->activation_checkpoint.mode), warmup,
                steps, tt_num_threads(), tt_openmp_wait_desc(waits, sizeof waits));
    if (out && use_lora)
        fprintf(out, "LoRA      rank %d on %d linear layers (%zu adapter parameters), the base frozen in %s; model FLOPs "
                     "6 N less the frozen weights' gradients (2 N) plus the adapters' 6 a parameter\n",
                lora.rank, lora.n_targets, lora.adapters->numel, fb.layout.dtype[0] == TT_BF16 ? "bf16" : "fp32");
    if (out && world > 1)
        fprintf(out, "ranks     %d: %d replicas x %d shards%s, %d buckets, overlap %s; each rank %d x %d tokens of its "
                     "own, figures are the slowest rank's\n",
                world, sh.replicas, sh.shards, sh.ep > 1 ? " (experts split over the shards)" : "", sh.n_buckets,
                c->comm.overlap ? "on" : "off (comm.overlap false)", B, T);
    int32_t lo = ids[0], hi = ids[0]; /* what was drawn, so a test sees it */
    for (size_t i = 0; i < n; i++) lo = ids[i] < lo ? ids[i] : lo, hi = ids[i] > hi ? ids[i] : hi;
    if (out)
        fprintf(out, "tokens    uniform over all %d ids of the vocabulary (drawn: %d..%d), one causal document a row\n",
                V, lo, hi);
    /* the roofline's second limit, measured before the steps so that it disturbs none */
    double gbps = 0;
    if (profile && be->bandwidth && be->bandwidth(0, &gbps)) goto done;
    /* --host-check: the peak loop (which touches no memory and splits no work) and the memory bandwidth, before
     * the warm-up steps (as the bandwidth above: before the arena's pages are touched, so that the check's
     * buffers do not raise the peak RSS) and just after the timed steps, and each step's time. A shared or
     * throttled host slows those loops with the step: a slow run beside slow loops is the host's; slow steps
     * beside steady loops, or one slow step among fast ones, point at the step itself or at a burst between
     * the checks. */
    const host_speed before = host_check ? host_now(be, sc.act_dtype) : (host_speed){0, 0, 0};
    if (host_check && !(each = calloc((size_t)steps, sizeof *each))) {
        tt_errorf("bench step: out of memory");
        goto done;
    }
    for (int s = 0; s < warmup; s++)
        if (tt_optim_set_hp(&op, c->optimizer.lr, s + 1) || tt_exec_run(tr.exec) || tt_exec_run(op.exec)) goto done;
    if (world > 1 && tt_dist_barrier(d, "bench step: the timed steps start together")) goto done;
    double total = 0, best = 1e30, progress = 0;
    int nn0 = tr.g->n_nodes, nn1 = op.g->n_nodes;
    for (int s = 0; s < steps; s++) {
        if (profile) {
            tt_exec_set_timing(tr.exec, st_[0], du[0]);
            tt_exec_set_timing(op.exec, st_[1], du[1]);
        }
        double t0 = tt_now(), loss;
        /* the host writes the step number and reads the loss, as training does */
        if (tt_optim_set_hp(&op, c->optimizer.lr, s + 1) || tt_exec_run(tr.exec) || tt_step_loss(&tr, &loss) ||
            tt_exec_run(op.exec))
            goto done;
        double dt = tt_now() - t0;
        total += dt;
        if (each) each[s] = dt;
        if (profile) progress += (tt_exec_take_progress_seconds(tr.exec) + tt_exec_take_progress_seconds(op.exec)) / steps;
        if (dt < best) best = dt;
        if (!profile) continue;
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < (k ? nn1 : nn0); i++) acc[k][i] += du[k][i] / steps;
    }
    const double rss = (double)tt_peak_rss_bytes(); /* before the check's buffers could raise it */
    const host_speed after = host_check ? host_now(be, sc.act_dtype) : (host_speed){0, 0, 0};
    double times[2] = {total, best};
    if (rank_max(d, times, 2)) goto done;
    total = times[0], best = times[1];
    double mean = total / steps, tps = (double)n / mean;
    if (out) {
        fprintf(out, "step      %.2f ms mean, %.2f ms best\n", 1e3 * mean, 1e3 * best);
        if (world > 1) fprintf(out, "tokens/s  %.0f a rank, %.0f all ranks (mean)\n", tps, tps * world);
        else fprintf(out, "tokens/s  %.0f (mean)\n", tps);
    }
    /* MFU by the formula (full attention) and with attention as executed (causal), never above 100% as a fact */
    const char *source = c->metrics.peak_tflops > 0 ? "config" : pk.source ? pk.source : "none";
    tt_mfu f;
    tt_mfu_judge(tps, fpt, tt_batch_flops_attention_executed(&mc, &ext, fpt, doc, B, T) / (double)n, peak, source, &f);
    char mfu[32] = "n/a", mfu_x[32] = "n/a";
    if (isfinite(f.mfu)) snprintf(mfu, sizeof mfu, "%.2f%%", f.mfu);
    if (isfinite(f.mfu_executed)) snprintf(mfu_x, sizeof mfu_x, "%.2f%%", f.mfu_executed);
    if (out) {
        fprintf(out, "TFLOP/s   %.3f   MFU %s of %.4g GFLOP/s %s peak (%s); %s with attention as executed (causal)%s\n",
                tps * fpt / 1e12, mfu, peak, bf16 ? "bf16" : "f32", source, mfu_x, world > 1 ? ", a rank" : "");
        if (f.note[0]) fprintf(out, "          MFU not stated: %s\n", f.note);
        fprintf(out, "memory    %.1f MiB peak RSS, %.1f MiB planned arena, %.1f MiB parameters + grads + AdamW%s%s\n",
                rss / 1048576.0, tt_exec_arena_bytes(tr.exec) / 1048576.0,
                (16.0 * (double)st.numel + (double)tt_frozen_rank_bytes(&fb)) / 1048576.0,
                world > 1 ? " (this rank's slices)" : "", use_lora ? " (the adapters'; the frozen base's weights)" : "");
        if (host_check) {
            fprintf(out, "host      peak loop %.1f GFLOP/s %s and memory %.1f GB/s before the steps, %.1f and %.1f after%s "
                         "(MFU is against %.4g)\n",
                    before.gflops, bf16 ? "bf16" : "f32", before.gbps, after.gflops, after.gbps,
                    world > 1 ? ", rank 0's" : "", peak);
            if (before.rt_ns > 0 || after.rt_ns > 0)
                fprintf(out, "          a cache line's round trip between two threads %.0f ns before, %.0f after%s\n",
                        before.rt_ns, after.rt_ns, world > 1 ? " (rank 0's)" : "");
            fprintf(out, "each step");
            for (int s = 0; s < steps; s++) fprintf(out, " %.2f", 1e3 * each[s]);
            fprintf(out, " ms%s\n", world > 1 ? " (rank 0's)" : "");
        }
    }
    if (profile && world > 1) { /* the collectives, from the per-node timings (the slowest rank's) */
        /* starting them, blocked in their waits, advancing them between nodes; then the same two of expert
         * parallelism's token exchanges (the collectives on the expert group) */
        double cm[5] = {0, 0, progress, 0, 0};
        for (int k = 0; k < 2; k++) {
            const tt_graph *g = k ? op.g : tr.g;
            for (int i = 0; i < g->n_nodes; i++) {
                const tt_node *nd = g->nodes[i];
                if (!(tt_ops[nd->op]->flags & TT_OPF_COMM)) continue;
                const int w = nd->op == TT_OP_COMM_WAIT;
                cm[w] += acc[k][i];
                if (TT_ATTRS(nd, tt_comm_attrs)->group == TT_GROUP_EXPERT) cm[3 + w] += acc[k][i];
            }
        }
        if (rank_max(d, cm, 5)) goto done;
        const double all = cm[0] + cm[1] + cm[2];
        if (out)
            fprintf(out, "comm      %.2f ms a step starting collectives, %.2f ms blocked in their waits, %.2f ms "
                         "advancing them between nodes: %.2f ms (%.1f%% of the step)\n",
                    1e3 * cm[0], 1e3 * cm[1], 1e3 * cm[2], 1e3 * all, 100 * all / mean);
        if (out && sh.ep > 1)
            fprintf(out, "exchange  %.2f ms a step starting the token exchanges (experts over %d), %.2f ms blocked in "
                         "their waits\n",
                    1e3 * cm[3], sh.ep, 1e3 * cm[4]);
    }
    if (profile) {
        int n_ops = 0, n_scopes = 0;
        double in_nodes = 0;
        for (int k = 0; k < 2; k++) {
            const tt_graph *g = k ? op.g : tr.g;
            for (int i = 0; i < g->n_nodes; i++) {
                const tt_node *nd = g->nodes[i];
                char grp[64];
                scope_group(nd->scope, grp, sizeof grp);
                bucket *b[2] = {find_bucket(ops, &n_ops, TT_OP_COUNT, tt_op_name(nd->op)),
                                find_bucket(scopes, &n_scopes, 256, grp)};
                for (int j = 0; j < 2; j++) {
                    if (!b[j]) continue;
                    b[j]->sec += acc[k][i];
                    b[j]->flops += tt_ops[nd->op]->flops(nd);
                    b[j]->bytes += node_bytes(nd);
                    b[j]->calls++;
                }
                in_nodes += acc[k][i];
            }
        }
        if (out)
            fprintf(out, "\nprofile: %.1f%% of the step is inside kernels (the rest: executor and timing overhead)\n"
                         "roofline: %.4g GFLOP/s %s peak (%s), %.1f GB/s memory (measured before the steps); bytes are "
                         "each node's operands, read and written once\n",
                    100 * in_nodes / mean, peak, bf16 ? "bf16" : "f32", source, gbps);
        print_buckets(out, "op", ops, n_ops, mean, peak, gbps);
        print_buckets(out, "scope", scopes, n_scopes, mean, peak, gbps);
    }
    if (profile && trace_path && trace_path[0]) { /* Chrome trace of the last timed step, one a rank */
        const tt_trace_part parts[2] = {{tr.exec, st_[0], du[0], "train_step", -1},
                                        {op.exec, st_[1], du[1], "optimizer", -1}};
        char path[4096];
        rank_path(path, sizeof path, trace_path, rank, world);
        if (tt_trace_write(path, parts, 2)) goto done;
        if (out)
            fprintf(out, "\ntrace of one step written to %s%s (open it in https://ui.perfetto.dev or chrome://tracing)\n",
                    path, world > 1 ? " and the other ranks' beside it" : "");
    }
    rc = 0;
done:
    tt_step_graph_free(&tr);
    tt_step_graph_free(&op);
    if (st.be) tt_state_free(&st);
    if (fb.buf) tt_frozen_free(&fb);
    tt_lora_free(&lora);
    tt_sharding_free(&sh);
    if (q) be->queue_free(q);
    tt_model_free(m);
    free(each);
    for (int k = 0; k < 2; k++) {
        free(st_[k]);
        free(du[k]);
        free(acc[k]);
    }
    free(ops);
    free(scopes);
    tt_free(ids);
    tt_free(tgt);
    tt_free(pos);
    tt_free(doc);
    return rc;
}
