/* bpe_scratch.c — the pool of per-call scratch states that makes the
 * tokenizer.json encode and decode thread-safe, and the growing id output
 * (with, for offsets, where each id starts). */
#include <stdlib.h>

#include "core/core.h"
#include "tokenizer/bpe_internal.h"

tok_scratch *tok_scratch_get(tt_tokenizer *t)
{
    pthread_mutex_lock(&t->pool_lock);
    tok_scratch *sc = t->pool;
    if (sc) t->pool = sc->pool_next;
    pthread_mutex_unlock(&t->pool_lock);
    if (sc) return sc;
    sc = calloc(1, sizeof *sc);
    if (!sc) {
        tt_errorf("tokenizer: out of memory");
        return NULL;
    }
    sc->md = pcre2_match_data_create(t->max_ovector ? t->max_ovector : 1, NULL);
    sc->mc = pcre2_match_context_create(NULL);
    /* the JIT's default stack is 32 KiB on the machine stack; give it room */
    sc->js = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (!sc->md || !sc->mc || !sc->js) {
        tok_scratch_free(sc);
        tt_errorf("tokenizer: out of memory (regex state)");
        return NULL;
    }
    pcre2_jit_stack_assign(sc->mc, NULL, sc->js);
    return sc;
}

void tok_scratch_put(tt_tokenizer *t, tok_scratch *sc)
{
    pthread_mutex_lock(&t->pool_lock);
    sc->pool_next = t->pool;
    t->pool = sc;
    pthread_mutex_unlock(&t->pool_lock);
}

void tok_scratch_free(tok_scratch *sc)
{
    if (!sc) return;
    if (sc->md) pcre2_match_data_free(sc->md);
    if (sc->mc) pcre2_match_context_free(sc->mc);
    if (sc->js) pcre2_jit_stack_free(sc->js);
    for (int i = 0; i < 2; i++) tok_buf_free(&sc->norm[i]);
    for (int i = 0; i < TOK_MAX_STAGES; i++) tok_buf_free(&sc->pre[i]);
    tok_buf_free(&sc->tmp);
    free(sc->sym);
    free(sc->nid);
    free(sc->prev);
    free(sc->next);
    free(sc->rank);
    free(sc->heap);
    free(sc->sym_len);
    free(sc->tok_at);
    tok_cache *caches[2] = {&sc->cache, &sc->cache_offs};
    for (int i = 0; i < 2; i++) {
        free(caches[i]->ents);
        free(caches[i]->ids);
        free(caches[i]->starts);
        tok_buf_free(&caches[i]->keys);
    }
    free(sc->starts);
    tok_orig_free(&sc->raw_orig);
    for (int i = 0; i < 2; i++) tok_orig_free(&sc->norm_orig[i]);
    for (int i = 0; i < TOK_MAX_STAGES; i++) tok_orig_free(&sc->pre_orig[i]);
    free(sc);
}

int tok_out_grow(tok_scratch *sc)
{
    size_t cap = sc->out_cap ? sc->out_cap * 2 : 256;
    if (cap > SIZE_MAX / sizeof(int32_t)) return tt_errorf("tokenizer: too many ids");
    int32_t *p = realloc(sc->out, cap * sizeof *p);
    if (!p) return tt_errorf("tokenizer: out of memory (%zu ids)", cap);
    sc->out = p;
    sc->out_cap = cap;
    return 0;
}

int tok_starts_fit(tok_scratch *sc)
{
    if (sc->starts_cap >= sc->out_cap) return 0;
    uint32_t *p = realloc(sc->starts, sc->out_cap * sizeof *p);
    if (!p) return tt_errorf("tokenizer: out of memory (%zu offsets)", sc->out_cap);
    sc->starts = p;
    sc->starts_cap = sc->out_cap;
    return 0;
}
