/* generate.c — text generation with a KV cache: a prefill graph over the
 * prompt and a one-token decode graph, built by the same model code. */
#include <stdlib.h>
#include <string.h>

#include "train/run.h"
#include "train/sampler.h"

typedef struct {
    tt_graph *g;
    tt_exec *exec;
    tt_value *logits; /* (B*T, V) */
    int32_t *ids, *pos, start;
} gen_graph;

static tt_err build_gen(gen_graph *gg, const tt_model *m, int T, tt_tensor *ck, tt_tensor *cv, const tt_backend *be,
                        tt_exec_mode mode)
{
    memset(gg, 0, sizeof *gg);
    const tt_model_cfg *c = &m->cfg;
    tt_graph *g = gg->g = tt_graph_new();
    tt_value **vals = calloc((size_t)m->n_params, sizeof *vals);
    tt_value **kv = calloc(2 * (size_t)c->n_layers, sizeof *kv);
    gg->ids = tt_alloc((size_t)T * 4);
    gg->pos = tt_alloc((size_t)T * 4);
    if (!g || !vals || !kv || !gg->ids || !gg->pos) {
        free(vals);
        free(kv);
        return -1;
    }
    tt_model_bind(g, m, vals);
    for (int l = 0; l < c->n_layers; l++) {
        kv[l] = tt_graph_bind(g, TT_ROLE_STATE, &ck[l]);
        kv[c->n_layers + l] = tt_graph_bind(g, TT_ROLE_STATE, &cv[l]);
    }
    int64_t n = T, one = 1;
    tt_fwd_inputs in = {1, T, tt_graph_input(g, "ids", TT_I32, 1, &n), tt_graph_input(g, "pos", TT_I32, 1, &n), NULL,
                        kv, kv + c->n_layers, tt_graph_input(g, "start", TT_I32, 1, &one)};
    if (in.ids) in.ids->data = gg->ids;
    if (in.pos) in.pos->data = gg->pos;
    if (in.start) in.start->data = &gg->start;
    tt_value *head = NULL, *h = tt_model_forward(g, m, vals, &in, &head);
    gg->logits = tt_linear(g, h, head, NULL);
    tt_graph_mark_output(g, gg->logits);
    free(vals);
    free(kv);
    if (g->failed || !(gg->exec = tt_exec_new(g, be, mode))) return -1;
    return 0;
}

static void free_gen(gen_graph *gg)
{
    tt_exec_free(gg->exec);
    tt_graph_free(gg->g);
    tt_free(gg->ids);
    tt_free(gg->pos);
}

/* Is tok one of the ids that end generation? */
static int is_stop(int tok, const int *stop, int n_stop)
{
    for (int i = 0; i < n_stop; i++)
        if (tok == stop[i]) return 1;
    return 0;
}

tt_err tt_generate_from(const tt_model *m, const tt_tokenizer *tk, const int *stop, int n_stop, const tt_config *cfg,
                        const char *prompt, FILE *out)
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
    const tt_backend *be = tt_backend_get("cpu");
    int L = c->n_layers;
    size_t kvrow = (size_t)c->n_kv_heads * c->head_dim;
    tt_tensor *ck = calloc((size_t)L, sizeof *ck), *cv = calloc((size_t)L, sizeof *cv);
    float *cache = tt_alloc(2 * (size_t)L * Tmax * kvrow * sizeof(float));
    gen_graph pre = {0}, dec = {0};
    tt_sampler smp = {0};
    tt_err rc = -1;
    if (!ts || !ck || !cv || !cache || !be || tt_sampler_init(&smp, c->vocab_size)) goto done;
    for (int l = 0; l < L; l++) { /* (1, Tmax, Hk*hd) per layer */
        tt_tensor *t[2] = {&ck[l], &cv[l]};
        for (int k = 0; k < 2; k++) {
            snprintf(t[k]->name, sizeof t[k]->name, "kv_cache.%d.%c", l, k ? 'v' : 'k');
            t[k]->dtype = TT_F32;
            t[k]->ndim = 3;
            t[k]->shape[0] = 1;
            t[k]->shape[1] = Tmax;
            t[k]->shape[2] = (int64_t)kvrow;
            t[k]->data = cache + ((size_t)(2 * l + k) * Tmax * kvrow);
        }
    }
    if (build_gen(&pre, m, Tp, ck, cv, be, cfg->training.exec_mode) || build_gen(&dec, m, 1, ck, cv, be, cfg->training.exec_mode))
        goto done;
    memcpy(pre.ids, prompt_ids, (size_t)Tp * sizeof(int32_t));
    for (int t = 0; t < Tp; t++) pre.pos[t] = t;
    pre.start = 0;
    if (tt_exec_run(pre.exec)) goto done;
    fputs(prompt, out);
    const float *row = (const float *)pre.logits->data + (size_t)(Tp - 1) * c->vocab_size;
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
        dec.ids[0] = tok;
        dec.pos[0] = Tp + i;
        dec.start = Tp + i;
        if (tt_exec_run(dec.exec)) goto done;
        row = (const float *)dec.logits->data;
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
    tt_free(cache);
    free(ck);
    free(cv);
    return rc;
}

/* The run's tokenizer: the HF folder's tokenizer.json, or the byte tokenizer. */
tt_err tt_run_generate(const tt_run *r, const char *prompt, FILE *out)
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
    tt_err rc = tt_generate_from(r->model, tk, stop, n_stop, r->cfg, prompt, out);
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
