/* generate.c — text generation with a KV cache: a prefill graph over the
 * prompt and a one-token decode graph, built by the same model code. */
#include <stdlib.h>
#include <string.h>

#include "train/run.h"
#include "train/sampler.h"

typedef struct {
    tt_graph *g;
    tt_exec *exec;
    tt_value *ids, *pos, *start;
    tt_value *logits; /* (T, V) */
} gen_graph;

/* A graph over T new tokens with the weights of s and the KV caches in
 * `cache` (per layer k then v, each (1, Tmax, Hk*hd)). */
static tt_err build_gen(gen_graph *gg, const tt_model *m, tt_train_state *s, int T, int Tmax, tt_buf *cache,
                        tt_exec_mode mode)
{
    memset(gg, 0, sizeof *gg);
    const tt_model_cfg *c = &m->cfg;
    tt_graph *g = gg->g = tt_graph_new();
    tt_value **vals = calloc((size_t)m->n_params + 1, sizeof *vals), **units = calloc((size_t)m->n_units + 1, sizeof *units);
    tt_value **kv = calloc(2 * (size_t)c->n_layers + 1, sizeof *kv);
    tt_err rc = g && vals && units && kv ? tt_model_bind(g, m, vals, units) : tt_errorf("out of memory");
    for (int k = 0; k < m->n_units && !rc; k++) tt_value_bind(units[k], tt_state_unit_mem(s, TT_STATE_PARAM, k));
    const int64_t kvrow = (int64_t)c->n_kv_heads * c->head_dim, shape[3] = {1, Tmax, kvrow};
    for (int l = 0; l < c->n_layers && !rc; l++)
        for (int h = 0; h < 2; h++) {
            tt_value *v = kv[h * c->n_layers + l] = tt_value_new(g, TT_ROLE_STATE, TT_F32, 3, shape);
            if (!v) {
                rc = -1;
                break;
            }
            snprintf(v->name, sizeof v->name, "kv_cache.%d.%c", l, h ? 'v' : 'k');
            tt_value_bind(v, (tt_mem){cache, (size_t)(2 * l + h) * (size_t)Tmax * (size_t)kvrow * sizeof(float)});
        }
    if (!rc) {
        const int64_t n = T, one = 1;
        gg->ids = tt_graph_input(g, "ids", TT_I32, 1, &n);
        gg->pos = tt_graph_input(g, "pos", TT_I32, 1, &n);
        gg->start = tt_graph_input(g, "start", TT_I32, 1, &one);
        tt_fwd_inputs in = {1, T, gg->ids, gg->pos, NULL, kv, kv + c->n_layers, gg->start};
        tt_value *head = NULL, *h = tt_model_forward(g, m, vals, &in, &head);
        gg->logits = tt_linear(g, h, head, NULL);
        tt_graph_mark_output(g, gg->logits);
        if (g->failed || !(gg->exec = tt_exec_new(g, s->be, s->q, mode))) rc = -1;
    }
    free(vals);
    free(units);
    free(kv);
    return rc;
}

/* Run one graph over the tokens ids[0..T) at positions from start; row
 * receives the logits of the last one. */
static tt_err gen_step(gen_graph *gg, const int32_t *ids, int T, int start, float *row, int V)
{
    int32_t *pos = malloc((size_t)T * sizeof *pos);
    if (!pos) return tt_errorf("out of memory");
    for (int t = 0; t < T; t++) pos[t] = start + t;
    const int32_t st = start;
    tt_err rc = tt_exec_write(gg->exec, gg->ids, ids, (size_t)T * sizeof *ids) ||
                tt_exec_write(gg->exec, gg->pos, pos, (size_t)T * sizeof *pos) ||
                tt_exec_write(gg->exec, gg->start, &st, sizeof st) || tt_exec_run(gg->exec) ||
                tt_exec_read_range(gg->exec, gg->logits, (size_t)(T - 1) * V * sizeof(float), row, (size_t)V * sizeof(float));
    free(pos);
    return rc ? -1 : 0;
}

static void free_gen(gen_graph *gg)
{
    tt_exec_free(gg->exec);
    tt_graph_free(gg->g);
}

/* Is tok one of the ids that end generation? */
static int is_stop(int tok, const int *stop, int n_stop)
{
    for (int i = 0; i < n_stop; i++)
        if (tok == stop[i]) return 1;
    return 0;
}

tt_err tt_generate_from(const tt_model *m, tt_train_state *s, const tt_tokenizer *tk, const int *stop, int n_stop,
                        const tt_config *cfg, const char *prompt, FILE *out)
{
    const tt_model_cfg *c = &m->cfg;
    const tt_generate_config *gc = &cfg->generate;
    int32_t *prompt_ids = NULL;
    size_t n_prompt = 0, cap_prompt = 0;
    if (tt_tokenizer_encode(tk, prompt, strlen(prompt), 1, &prompt_ids, &n_prompt, &cap_prompt))
        return tt_error_prefix("prompt: ");
    if (n_prompt == 0) {
        free(prompt_ids);
        return tt_errorf("the prompt is empty and the tokenizer adds no BOS token: give a prompt");
    }
    /* the model's vocabulary may be padded past the tokenizer's: sample only real tokens */
    int V = tt_tokenizer_vocab_size(tk) < c->vocab_size ? tt_tokenizer_vocab_size(tk) : c->vocab_size;
    int Tp = (int)n_prompt, Tmax = Tp + gc->max_new_tokens;
    for (size_t i = 0; i < n_prompt; i++)
        if (prompt_ids[i] >= c->vocab_size) {
            free(prompt_ids);
            return tt_errorf("prompt token %d is outside the model's %d-token vocabulary", prompt_ids[i], c->vocab_size);
        }
    if (c->arch == TT_ARCH_GPT2 && Tmax > c->max_seq_len) {
        free(prompt_ids);
        return tt_errorf("prompt (%d tokens) + generate.max_new_tokens (%d) exceed the model's %d positions", Tp,
                         gc->max_new_tokens, c->max_seq_len);
    }
    tt_tok_stream *ts = tt_tok_stream_new(tk, 1);
    const size_t kv_bytes = 2 * (size_t)c->n_layers * Tmax * (size_t)c->n_kv_heads * c->head_dim * sizeof(float);
    tt_buf *cache = s->be->alloc(kv_bytes ? kv_bytes : 1);
    float *row = malloc((size_t)c->vocab_size * sizeof *row);
    gen_graph pre = {0}, dec = {0};
    tt_sampler smp = {0};
    tt_err rc = -1;
    if (!ts || !cache || !row || tt_sampler_init(&smp, c->vocab_size)) goto done;
    if (build_gen(&pre, m, s, Tp, Tmax, cache, cfg->training.exec_mode) ||
        build_gen(&dec, m, s, 1, Tmax, cache, cfg->training.exec_mode))
        goto done;
    if (gen_step(&pre, prompt_ids, Tp, 0, row, c->vocab_size)) goto done;
    fputs(prompt, out);
    tt_rng rng = {(uint64_t)gc->seed, 0};
    for (int i = 0; i < gc->max_new_tokens; i++) {
        int tok;
        if (tt_sample(&smp, row, V, (float)gc->temperature, gc->top_k, (float)gc->top_p, &rng, &tok)) goto done;
        if (is_stop(tok, stop, n_stop)) break;
        const char *piece;
        size_t plen;
        if (tt_tok_stream_feed(ts, tok, &piece, &plen)) goto done;
        fwrite(piece, 1, plen, out); /* streamed as the tokens come */
        fflush(out);
        if (i == gc->max_new_tokens - 1) break;
        const int32_t t32 = tok;
        if (gen_step(&dec, &t32, 1, Tp + i, row, c->vocab_size)) goto done;
    }
    const char *piece;
    size_t plen;
    if (tt_tok_stream_finish(ts, &piece, &plen)) goto done;
    fwrite(piece, 1, plen, out);
    fputc('\n', out);
    rc = 0;
done:
    tt_tok_stream_free(ts);
    free(prompt_ids);
    free_gen(&pre);
    free_gen(&dec);
    tt_sampler_free(&smp);
    if (cache) s->be->free(cache);
    free(row);
    return rc;
}

/* The run's tokenizer: the HF folder's tokenizer.json, or the byte tokenizer. */
tt_err tt_run_generate(tt_run *r, const char *prompt, FILE *out)
{
    char path[TT_CONFIG_PATH_MAX + 32];
    tt_tokenizer *tk;
    if (r->has_hf) {
        snprintf(path, sizeof path, "%s/tokenizer.json", r->cfg->model.hf_assets_path);
        tk = tt_tokenizer_load(path);
    } else {
        tk = tt_tokenizer_byte_new();
    }
    if (!tk) return -1;
    int stop[TT_HF_MAX_EOS + 1], n_stop = 0;
    if (tt_tokenizer_eos_id(tk) >= 0) stop[n_stop++] = tt_tokenizer_eos_id(tk);
    for (int i = 0; r->has_hf && i < r->hf.n_eos; i++) stop[n_stop++] = r->hf.eos_token_ids[i];
    tt_err rc = tt_generate_from(r->model, &r->state, tk, stop, n_stop, r->cfg, prompt, out);
    tt_tokenizer_free(tk);
    return rc;
}

tt_err tt_generate(const tt_config *cfg, const char *prompt, int from_hf, FILE *out)
{
    tt_run r;
    if (tt_run_open(&r, cfg, from_hf ? TT_RUN_HF : TT_RUN_MODEL)) return -1;
    tt_err rc = tt_run_generate(&r, prompt, out);
    tt_run_close(&r);
    return rc;
}
