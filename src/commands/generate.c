/* generate.c — text generation with a KV cache: a prefill graph over the
 * prompt and a one-token decode graph, built by the same model code. */
#include <stdlib.h>
#include <string.h>

#include "commands/generate.h"
#include "commands/sampler.h"
#include "core/core.h"
#include "tokenizer/tokenizer_byte.h"
#include "train/run_open.h"

typedef struct {
    tt_graph *g;
    tt_exec *exec;
    tt_value *ids, *pos, *start;
    tt_value *logits; /* (T, V) */
} gen_graph;

/* A graph over T new tokens with the weights of s and the KV caches in
 * `cache` (per layer k (1, Tmax, kv heads x hd) then v (1, Tmax, kv heads x
 * the values' width)). */
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
    const tt_attn_dims ad = tt_model_attn_dims(c);
    const int64_t krow = (int64_t)ad.kv_heads * ad.hd, vrow = (int64_t)ad.kv_heads * ad.v; /* a position's */
    for (int l = 0; l < c->n_layers && !rc; l++)
        for (int h = 0; h < 2; h++) {
            const int64_t shape[3] = {1, Tmax, h ? vrow : krow};
            tt_value *v = kv[h * c->n_layers + l] = tt_value_new(g, TT_ROLE_STATE, TT_F32, 3, shape);
            if (!v) {
                rc = -1;
                break;
            }
            snprintf(v->name, sizeof v->name, "kv_cache.%d.%c", l, h ? 'v' : 'k');
            const size_t at = (size_t)l * (size_t)Tmax * (size_t)(krow + vrow) + (h ? (size_t)Tmax * (size_t)krow : 0);
            tt_value_bind(v, (tt_mem){cache, at * sizeof(float)});
        }
    if (!rc) {
        const int64_t n = T, one = 1;
        gg->ids = tt_graph_input(g, "ids", TT_I32, 1, &n);
        gg->pos = tt_graph_input(g, "pos", TT_I32, 1, &n);
        gg->start = tt_graph_input(g, "start", TT_I32, 1, &one);
        tt_fwd_inputs in = {.B = 1, .T = T, .ids = gg->ids, .pos = gg->pos, .cache_k = kv, .cache_v = kv + c->n_layers,
                             .start = gg->start};
        tt_value *head = NULL, *h = tt_model_forward(g, m, vals, &in, &head);
        gg->logits = tt_model_logits(g, m, h, head);
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
static int is_stop(int tok, const tt_hf_end_of_turn *stop)
{
    for (int i = 0; i < stop->n; i++)
        if (tok == stop->ids[i]) return 1;
    return 0;
}

/* The positions a model can attend over: GPT-2's learned position table
 * (n_positions) is a hard limit; RoPE has none. 0 = no limit. */
static int model_positions(const tt_model_cfg *c) { return c->arch == TT_ARCH_GPT2 ? c->max_seq_len : 0; }

int tt_generator_context(const tt_generator *g) { return g->model->cfg.max_seq_len > 0 ? g->model->cfg.max_seq_len : 0; }

void tt_gen_reply_free(tt_gen_reply *r)
{
    free(r->ids);
    free(r->text);
    memset(r, 0, sizeof *r);
}

/* The reply so far: one more id, and the text printed for it */
static tt_err reply_add(tt_gen_reply *r, int id, const char *piece, size_t len)
{
    if (id >= 0) {
        int32_t *ids = realloc(r->ids, ((size_t)r->n + 1) * sizeof *ids);
        if (!ids) return tt_errorf("out of memory");
        r->ids = ids;
        r->ids[r->n++] = id;
    }
    char *text = realloc(r->text, r->len + len + 1);
    if (!text) return tt_errorf("out of memory");
    r->text = text;
    memcpy(r->text + r->len, piece, len);
    r->len += len;
    r->text[r->len] = 0;
    return 0;
}

/* Continue the n_prompt ids (n_prompt >= 1, checked against the vocabulary
 * and the positions) by up to max_new tokens; echo (may be NULL) is printed
 * first, then the new tokens as they come, then a newline. reply (may be
 * NULL) receives the new ids and their text. */
static tt_err generate_ids(tt_generator *gen, const int32_t *prompt_ids, int n_prompt, int max_new, const char *echo,
                           FILE *out, tt_gen_reply *reply)
{
    const tt_model *m = gen->model;
    tt_train_state *s = gen->weights;
    const tt_model_cfg *c = &m->cfg;
    const tt_generate_config *gc = &gen->cfg->generate;
    /* the model's vocabulary may be padded past the tokenizer's: sample only real tokens */
    int V = tt_tokenizer_vocab_size(gen->tk) < c->vocab_size ? tt_tokenizer_vocab_size(gen->tk) : c->vocab_size;
    int Tp = n_prompt, Tmax = Tp + max_new;
    if (reply) memset(reply, 0, sizeof *reply), reply->end_id = -1;
    /* the KV cache: per layer k (Tmax, kv heads x hd) and v (Tmax, kv heads x the values' width), fp32 */
    const tt_attn_dims ad = tt_model_attn_dims(c);
    size_t kv_bytes;
    if (tt_mul_size((size_t)c->n_layers * (size_t)Tmax, (size_t)ad.kv_heads * (size_t)(ad.hd + ad.v) * sizeof(float),
                    &kv_bytes))
        return tt_errorf("the generation KV cache of %d positions overflows", Tmax);
    if (tt_mem_check(kv_bytes, "the generation KV cache of prompt %d + generate.max_new_tokens %d positions (%d "
                               "layers, %d kv heads of %d key and %d value columns, fp32)",
                     Tp, max_new, c->n_layers, ad.kv_heads, ad.hd, ad.v))
        return -1;
    tt_tok_stream *ts = tt_tok_stream_new(gen->tk, 1);
    tt_buf *cache = s->be->alloc(kv_bytes ? kv_bytes : 1);
    float *row = malloc((size_t)c->vocab_size * sizeof *row);
    gen_graph pre = {0}, dec = {0};
    tt_sampler smp = {0};
    tt_err rc = -1;
    if (!ts || !cache || !row || tt_sampler_init(&smp, c->vocab_size)) goto done;
    if (build_gen(&pre, m, s, Tp, Tmax, cache, gen->cfg->training.exec_mode) ||
        build_gen(&dec, m, s, 1, Tmax, cache, gen->cfg->training.exec_mode))
        goto done;
    if (gen_step(&pre, prompt_ids, Tp, 0, row, c->vocab_size)) goto done;
    if (echo) fputs(echo, out);
    const char *piece;
    size_t plen;
    for (int i = 0; i < max_new; i++) {
        int tok;
        if (tt_sample(&smp, row, V, (float)gc->temperature, gc->top_k, (float)gc->top_p, &gen->rng, &tok)) goto done;
        if (is_stop(tok, &gen->stop)) {
            if (reply) reply->end_id = tok;
            break;
        }
        if (tt_tok_stream_feed(ts, tok, &piece, &plen) || (reply && reply_add(reply, tok, piece, plen))) goto done;
        fwrite(piece, 1, plen, out); /* streamed as the tokens come */
        fflush(out);
        tt_work_progress(); /* a run's closing sample: the other ranks wait for rank 0 */
        if (i == max_new - 1) break;
        const int32_t t32 = tok;
        if (gen_step(&dec, &t32, 1, Tp + i, row, c->vocab_size)) goto done;
    }
    if (tt_tok_stream_finish(ts, &piece, &plen) || (reply && reply_add(reply, -1, piece, plen))) goto done;
    fwrite(piece, 1, plen, out);
    fputc('\n', out);
    fflush(out);
    rc = 0;
done:
    tt_tok_stream_free(ts);
    free_gen(&pre);
    free_gen(&dec);
    tt_sampler_free(&smp);
    if (cache) s->be->free(cache);
    free(row);
    if (rc && reply) tt_gen_reply_free(reply);
    return rc;
}

static tt_err check_prompt_ids(const tt_model_cfg *c, const int32_t *ids, size_t n)
{
    if (n > (1u << 30)) return tt_errorf("the prompt has %zu tokens, more than %u", n, 1u << 30);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= c->vocab_size)
            return tt_errorf("prompt token %d is outside the model's %d-token vocabulary", ids[i], c->vocab_size);
    return 0;
}

tt_err tt_generator_reply(tt_generator *g, const int32_t *ids, int n, int max_new, FILE *out, tt_gen_reply *reply)
{
    if (n < 1) return tt_errorf("the prompt is empty");
    if (check_prompt_ids(&g->model->cfg, ids, (size_t)n)) return -1;
    return generate_ids(g, ids, n, max_new, NULL, out, reply);
}

/* Stream generate.max_new_tokens tokens continuing prompt, stopping at an
 * end-of-turn id. */
static tt_err generate_from(tt_generator *g, const char *prompt, FILE *out)
{
    const tt_model_cfg *c = &g->model->cfg;
    const tt_generate_config *gc = &g->cfg->generate;
    int32_t *prompt_ids = NULL;
    size_t n_prompt = 0, cap_prompt = 0;
    if (tt_tokenizer_encode(g->tk, prompt, strlen(prompt), 1, &prompt_ids, &n_prompt, &cap_prompt))
        return tt_error_prefix("prompt: ");
    tt_err rc = -1;
    const int positions = model_positions(c);
    if (n_prompt == 0)
        tt_errorf("the prompt is empty and the tokenizer adds no BOS token: give a prompt");
    else if (positions && (int64_t)n_prompt + gc->max_new_tokens > positions)
        tt_errorf("prompt (%zu tokens) + generate.max_new_tokens (%d) exceed the model's %d positions", n_prompt,
                  gc->max_new_tokens, positions);
    else if (!check_prompt_ids(c, prompt_ids, n_prompt))
        rc = generate_ids(g, prompt_ids, (int)n_prompt, gc->max_new_tokens, prompt, out, NULL);
    free(prompt_ids);
    return rc;
}

/* The token an empty prompt starts from: the end-of-text token, which the
 * model saw between documents (the tokenizer's EOS, else config.json's BOS or
 * first EOS); -1 if there is none. */
static int start_token(const tt_run *r, const tt_tokenizer *tk)
{
    if (tt_tokenizer_eos_id(tk) >= 0) return tt_tokenizer_eos_id(tk);
    if (r->has_hf && r->hf.bos_token_id >= 0) return r->hf.bos_token_id;
    if (r->has_hf && r->hf.n_eos > 0) return r->hf.eos_token_ids[0];
    return -1;
}

/* A generator over the run r's model with the weights w: the run's tokenizer
 * (the HF folder's tokenizer.json, or the byte tokenizer) and the ids that end
 * a turn (tt_hf_end_of_turn_ids: the folder's generation_config.json,
 * config.json and tokenizer_config.json, and the tokenizer's EOS). */
static tt_err generator_init(tt_generator *g, const tt_run *r, tt_train_state *w)
{
    g->model = r->model;
    g->weights = w;
    g->cfg = r->cfg;
    g->rng = (tt_rng){(uint64_t)r->cfg->generate.seed, 0};
    const char *dir = r->has_hf ? r->cfg->model.hf_assets_path : NULL;
    if (dir) {
        char path[TT_CONFIG_PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/tokenizer.json", dir);
        g->tk = tt_tokenizer_load(path);
    } else {
        g->tk = tt_tokenizer_byte_new();
    }
    if (!g->tk || tt_hf_end_of_turn_ids(dir, r->has_hf ? &r->hf : NULL, g->tk, &g->stop)) {
        tt_tokenizer_free(g->tk);
        g->tk = NULL;
        return -1;
    }
    return 0;
}

tt_err tt_generator_open(tt_generator *g, const tt_config *cfg, int from_hf)
{
    memset(g, 0, sizeof *g);
    if (tt_run_open(&g->run, cfg, from_hf ? TT_RUN_HF : TT_RUN_MODEL)) return -1;
    g->opened = 1;
    tt_train_state *w;
    if (tt_run_whole_weights(&g->run, &g->gathered, &w) || generator_init(g, &g->run, w)) {
        tt_generator_close(g);
        return -1;
    }
    return 0;
}

void tt_generator_close(tt_generator *g)
{
    tt_tokenizer_free(g->tk);
    if (g->weights == &g->gathered) tt_state_free(&g->gathered);
    if (g->opened) tt_run_close(&g->run);
    memset(g, 0, sizeof *g);
}

static tt_err sample(tt_run *r, tt_train_state *w, FILE *out);

/* The closing sample fits itself to the model where `titan generate` would
 * refuse (a user asking for too much there should be told; a run that has
 * trained should not fail over its sample): an empty prompt starts from the
 * end-of-text token, and the new tokens stop at the model's last position. */
tt_err tt_run_sample(tt_run *r, FILE *out)
{
    tt_train_state gathered, *w;
    if (tt_run_whole_weights(r, &gathered, &w)) return -1;
    if (!w) return 0; /* rank 0 samples */
    tt_err rc = sample(r, w, out);
    if (w == &gathered) tt_state_free(&gathered);
    return rc;
}

static tt_err sample(tt_run *r, tt_train_state *w, FILE *out)
{
    const tt_model_cfg *c = &r->model->cfg;
    const tt_generate_config *gc = &r->cfg->generate;
    tt_generator g = {0};
    if (generator_init(&g, r, w)) return -1;
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    tt_err rc = tt_tokenizer_encode(g.tk, gc->prompt, strlen(gc->prompt), 1, &ids, &n, &cap)
                    ? tt_error_prefix("generate.prompt: ")
                    : 0;
    if (!rc && n == 0) {
        const int32_t t = start_token(r, g.tk);
        char *name = NULL;
        size_t len;
        if (t < 0)
            rc = tt_errorf("generate.prompt is empty, the tokenizer adds no BOS token and names no end-of-text "
                           "token to start from");
        else if (cap < 1) {
            free(ids);
            if (!(ids = malloc(sizeof *ids))) rc = tt_errorf("out of memory");
        }
        if (!rc) {
            ids[n++] = t;
            if (tt_tokenizer_decode(g.tk, &t, 1, 0, &name, &len)) name = NULL;
            tt_log("sample: generate.prompt encodes to no tokens (the tokenizer adds no BOS): starting from the "
                   "end-of-text token %s (id %d)",
                   name ? name : "?", t);
        }
        free(name);
    }
    if (!rc) rc = check_prompt_ids(c, ids, n);
    int max_new = gc->max_new_tokens;
    const int positions = model_positions(c);
    if (!rc && positions && (int64_t)n + max_new > positions) {
        if ((int64_t)n >= positions)
            rc = tt_errorf("generate.prompt takes %zu tokens: the model's %d positions leave none to generate", n,
                           positions);
        else {
            max_new = positions - (int)n;
            tt_log("sample: %d new tokens instead of generate.max_new_tokens %d: the model has %d positions and the "
                   "prompt takes %zu",
                   max_new, gc->max_new_tokens, positions, n);
        }
    }
    if (!rc) {
        tt_log("sample (generate.prompt \"%s\", temperature %.2f):", gc->prompt, gc->temperature);
        rc = generate_ids(&g, ids, (int)n, max_new, gc->prompt, out, NULL);
    }
    free(ids);
    tt_tokenizer_free(g.tk);
    return rc;
}

tt_err tt_generate(const tt_config *cfg, const char *prompt, int from_hf, FILE *out)
{
    tt_generator g;
    if (tt_generator_open(&g, cfg, from_hf)) return -1;
    tt_err rc = g.weights ? generate_from(&g, prompt, out) : 0;
    tt_generator_close(&g);
    return rc;
}
