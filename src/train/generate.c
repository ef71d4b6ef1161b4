/* generate.c — text generation with a KV cache: a prefill graph over the
 * prompt and a one-token decode graph, built by the same model code. */
#include <stdlib.h>
#include <string.h>

#include "io/tokenizer_byte.h"
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

static void emit(FILE *out, int32_t tok)
{
    uint8_t b;
    size_t nb = 0;
    if (tt_byte_decode(&tok, 1, TT_BYTE_SKIP_INVALID, &b, 1, &nb) == 0 && nb) fputc(b, out);
    fflush(out);
}

tt_err tt_generate_from(const tt_model *m, const tt_config *cfg, const char *prompt, FILE *out)
{
    const tt_model_cfg *c = &m->cfg;
    const tt_generate_config *gc = &cfg->generate;
    size_t plen = strlen(prompt);
    int Tp = (int)plen + 1, Tmax = Tp + gc->max_new_tokens;
    if (c->arch == TT_ARCH_GPT2 && Tmax > c->max_seq_len)
        return tt_errorf("prompt (%d tokens) + generate.max_new_tokens (%d) exceed model.max_seq_len (%d)", Tp,
                         gc->max_new_tokens, c->max_seq_len);
    const tt_backend *be = tt_backend_get("cpu");
    int L = c->n_layers;
    size_t kvrow = (size_t)c->n_kv_heads * c->head_dim;
    tt_tensor *ck = calloc((size_t)L, sizeof *ck), *cv = calloc((size_t)L, sizeof *cv);
    float *cache = tt_alloc(2 * (size_t)L * Tmax * kvrow * sizeof(float));
    gen_graph pre = {0}, dec = {0};
    tt_sampler smp = {0};
    tt_err rc = -1;
    if (!ck || !cv || !cache || !be || tt_sampler_init(&smp, c->vocab_size)) goto done;
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
    size_t n_ids = 0;
    if (tt_byte_encode(prompt, plen, TT_BYTE_ADD_BOS, pre.ids, (size_t)Tp, &n_ids)) goto done;
    for (int t = 0; t < Tp; t++) pre.pos[t] = t;
    pre.start = 0;
    if (tt_exec_run(pre.exec)) goto done;
    fputs(prompt, out);
    const float *row = (const float *)pre.logits->data + (size_t)(Tp - 1) * c->vocab_size;
    tt_rng rng = {(uint64_t)gc->seed, 0};
    for (int i = 0; i < gc->max_new_tokens; i++) {
        int tok;
        if (tt_sample(&smp, row, c->vocab_size, (float)gc->temperature, gc->top_k, (float)gc->top_p, &rng, &tok)) goto done;
        if (tok == TT_BYTE_EOS) break;
        emit(out, tok);
        if (i == gc->max_new_tokens - 1) break;
        dec.ids[0] = tok;
        dec.pos[0] = Tp + i;
        dec.start = Tp + i;
        if (tt_exec_run(dec.exec)) goto done;
        row = (const float *)dec.logits->data;
    }
    fputc('\n', out);
    rc = 0;
done:
    free_gen(&pre);
    free_gen(&dec);
    tt_sampler_free(&smp);
    tt_free(cache);
    free(ck);
    free(cv);
    return rc;
}

tt_err tt_generate(const tt_config *cfg, const char *prompt, int from_hf, FILE *out)
{
    tt_run r;
    if (tt_run_open(&r, cfg, from_hf ? TT_RUN_HF : TT_RUN_MODEL)) return -1;
    tt_err rc = tt_generate_from(r.model, cfg, prompt, out);
    tt_run_close(&r);
    return rc;
}
