/* tokenizer_bpe.c — load a Hugging Face tokenizer.json with a BPE model. Every
 * field is checked; anything not implemented is refused by name with its JSON
 * path ("tokenizer.json: model.type 'Unigram' is not supported (BPE only)"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/core.h"
#include "tokenizer/bpe_internal.h"

#define PATH_MAX_LEN 256

/* ---- JSON field helpers: absent and null give the default ----------------- */

static const cJSON *field(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static int get_bool(const char *file, const cJSON *o, const char *path, const char *key, int def, int *out)
{
    const cJSON *v = field(o, key);
    if (!v) { *out = def; return 0; }
    if (!cJSON_IsBool(v)) return tt_errorf("%s: %s.%s must be true or false", file, path, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int get_str(const char *file, const cJSON *o, const char *path, const char *key, int required,
                   const char **out)
{
    const cJSON *v = field(o, key);
    *out = NULL;
    if (!v) return required ? tt_errorf("%s: %s.%s is missing", file, path, key) : 0;
    if (!cJSON_IsString(v)) return tt_errorf("%s: %s.%s must be a string", file, path, key);
    *out = v->valuestring;
    return 0;
}

/* an integer in [lo, hi] */
static int as_int(const char *file, const cJSON *v, const char *what, long lo, long hi, long *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return tt_errorf("%s: %s must be an integer", file, what);
    if (v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return tt_errorf("%s: %s = %.0f is out of range [%ld, %ld]", file, what, v->valuedouble, lo, hi);
    *out = (long)v->valuedouble;
    return 0;
}

static int get_int(const char *file, const cJSON *o, const char *path, const char *key, long lo, long hi, long def,
                   long *out)
{
    const cJSON *v = field(o, key);
    if (!v) { *out = def; return 0; }
    char what[PATH_MAX_LEN + 64];
    snprintf(what, sizeof what, "%s.%s", path, key);
    return as_int(file, v, what, lo, hi, out);
}

static const char *type_of(const char *file, const cJSON *o, const char *path)
{
    if (!cJSON_IsObject(o)) {
        tt_errorf("%s: %s must be an object", file, path);
        return NULL;
    }
    const char *ty;
    if (get_str(file, o, path, "type", 1, &ty)) return NULL;
    return ty;
}

/* one Unicode character (Metaspace replacement, Strip content) */
static int get_char(const char *file, const cJSON *o, const char *path, const char *key, uint32_t def, uint32_t *out)
{
    const char *s;
    if (get_str(file, o, path, key, 0, &s)) return -1;
    if (!s) { *out = def; return 0; }
    size_t n = strlen(s), adv = 0;
    if (n == 0 || tok_utf8_invalid_at(s, n) != n || (*out = tok_utf8_get(s, &adv), adv != n))
        return tt_errorf("%s: %s.%s must be exactly one character", file, path, key);
    return 0;
}

static int get_pattern(tt_tokenizer *t, const char *file, const cJSON *o, const char *path, tok_pattern *p)
{
    const cJSON *v = field(o, "pattern");
    const cJSON *s = v ? cJSON_GetObjectItemCaseSensitive(v, "String") : NULL;
    const cJSON *r = v ? cJSON_GetObjectItemCaseSensitive(v, "Regex") : NULL;
    char where[PATH_MAX_LEN + 16];
    snprintf(where, sizeof where, "%s.pattern", path);
    if (!cJSON_IsObject(v) || !(cJSON_IsString(s) || cJSON_IsString(r)))
        return tt_errorf("%s: %s must be {\"String\": ...} or {\"Regex\": ...}", file, where);
    const char *src = cJSON_IsString(s) ? s->valuestring : r->valuestring;
    if (tok_pattern_compile(p, src, strlen(src), cJSON_IsString(s), file, where)) return -1;
    if (p->re) {
        uint32_t caps = 0;
        pcre2_pattern_info(p->re, PCRE2_INFO_CAPTURECOUNT, &caps);
        if (caps + 1 > t->max_ovector) t->max_ovector = caps + 1;
    }
    return 0;
}

static int get_prepend_scheme(const char *file, const cJSON *o, const char *path, tok_prepend_scheme *out)
{
    const char *s;
    int legacy = 1;
    if (get_str(file, o, path, "prepend_scheme", 0, &s)) return -1;
    if (s) {
        if (!strcmp(s, "first")) *out = PREPEND_FIRST;
        else if (!strcmp(s, "always")) *out = PREPEND_ALWAYS;
        else if (!strcmp(s, "never")) *out = PREPEND_NEVER;
        else return tt_errorf("%s: %s.prepend_scheme '%s' is not one of first, always, never", file, path, s);
        return 0;
    }
    /* older files: add_prefix_space */
    if (get_bool(file, o, path, "add_prefix_space", 1, &legacy)) return -1;
    *out = legacy ? PREPEND_ALWAYS : PREPEND_NEVER;
    return 0;
}

/* ---- normalizer / pre_tokenizer / decoder / post_processor ----------------- */

static int parse_normalizer(tt_tokenizer *t, const char *file, const cJSON *o, const char *path)
{
    const char *ty = type_of(file, o, path);
    if (!ty) return -1;
    char sub[PATH_MAX_LEN];
    if (!strcmp(ty, "Sequence")) {
        const cJSON *arr = field(o, "normalizers");
        if (!cJSON_IsArray(arr)) return tt_errorf("%s: %s.normalizers must be an array", file, path);
        int i = 0;
        for (const cJSON *it = arr->child; it; it = it->next, i++) {
            snprintf(sub, sizeof sub, "%s.normalizers[%d]", path, i);
            if (parse_normalizer(t, file, it, sub)) return -1;
        }
        return 0;
    }
    if (t->n_norms == TOK_MAX_STAGES) return tt_errorf("%s: %s: more than %d normalizers", file, path, TOK_MAX_STAGES);
    tok_normalizer *nz = &t->norms[t->n_norms];
    const char *s;
    if (!strcmp(ty, "NFC")) nz->kind = NORM_NFC;
    else if (!strcmp(ty, "NFD")) nz->kind = NORM_NFD;
    else if (!strcmp(ty, "NFKC")) nz->kind = NORM_NFKC;
    else if (!strcmp(ty, "NFKD")) nz->kind = NORM_NFKD;
    else if (!strcmp(ty, "Prepend")) {
        nz->kind = NORM_PREPEND;
        if (get_str(file, o, path, "prepend", 1, &s) || !(nz->str = tt_strdup(s))) return -1;
        nz->str_n = strlen(s);
    } else if (!strcmp(ty, "Replace")) {
        nz->kind = NORM_REPLACE;
        if (get_pattern(t, file, o, path, &nz->pat)) return -1;
        t->n_norms++; /* owns the pattern from here */
        if (get_str(file, o, path, "content", 1, &s) || !(nz->str = tt_strdup(s))) return -1;
        nz->str_n = strlen(s);
        return 0;
    } else if (!strcmp(ty, "Strip")) {
        nz->kind = NORM_STRIP;
        if (get_bool(file, o, path, "strip_left", 0, &nz->left) || get_bool(file, o, path, "strip_right", 0, &nz->right))
            return -1;
    } else
        return tt_errorf("%s: %s.type '%s' is not supported (supported normalizers: NFC, NFD, NFKC, NFKD, Prepend, "
                         "Replace, Strip, Sequence)",
                         file, path, ty);
    t->n_norms++;
    return 0;
}

/* GPT-2's pre-tokenizer regex, used by ByteLevel with use_regex */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int parse_pretok(tt_tokenizer *t, const char *file, const cJSON *o, const char *path)
{
    const char *ty = type_of(file, o, path);
    if (!ty) return -1;
    char sub[PATH_MAX_LEN];
    if (!strcmp(ty, "Sequence")) {
        const cJSON *arr = field(o, "pretokenizers");
        if (!cJSON_IsArray(arr)) return tt_errorf("%s: %s.pretokenizers must be an array", file, path);
        int i = 0;
        for (const cJSON *it = arr->child; it; it = it->next, i++) {
            snprintf(sub, sizeof sub, "%s.pretokenizers[%d]", path, i);
            if (parse_pretok(t, file, it, sub)) return -1;
        }
        return 0;
    }
    if (t->n_pretoks == TOK_MAX_STAGES)
        return tt_errorf("%s: %s: more than %d pre-tokenizers", file, path, TOK_MAX_STAGES);
    if (t->n_pretoks > 0 && t->pretoks[t->n_pretoks - 1].kind == PRE_BYTE_LEVEL)
        return tt_errorf("%s: %s: a pre-tokenizer after ByteLevel is not supported (ByteLevel must come last)", file,
                         path);
    tok_pretok *pt = &t->pretoks[t->n_pretoks];
    if (!strcmp(ty, "ByteLevel")) {
        pt->kind = PRE_BYTE_LEVEL;
        if (get_bool(file, o, path, "add_prefix_space", 1, &pt->add_prefix_space) ||
            get_bool(file, o, path, "use_regex", 1, &pt->use_regex))
            return -1;
        if (pt->use_regex &&
            tok_pattern_compile(&pt->pat, GPT2_PATTERN, sizeof GPT2_PATTERN - 1, 0, file, path))
            return -1;
    } else if (!strcmp(ty, "Split")) {
        pt->kind = PRE_SPLIT;
        const char *b;
        if (get_pattern(t, file, o, path, &pt->pat)) return -1;
        t->n_pretoks++; /* owns the pattern from here */
        if (get_str(file, o, path, "behavior", 1, &b) || get_bool(file, o, path, "invert", 0, &pt->invert)) return -1;
        if (!strcmp(b, "Removed")) pt->behavior = SPLIT_REMOVED;
        else if (!strcmp(b, "Isolated")) pt->behavior = SPLIT_ISOLATED;
        else if (!strcmp(b, "MergedWithPrevious")) pt->behavior = SPLIT_MERGED_PREV;
        else if (!strcmp(b, "MergedWithNext")) pt->behavior = SPLIT_MERGED_NEXT;
        else if (!strcmp(b, "Contiguous")) pt->behavior = SPLIT_CONTIGUOUS;
        else
            return tt_errorf("%s: %s.behavior '%s' is not one of Removed, Isolated, MergedWithPrevious, "
                             "MergedWithNext, Contiguous",
                             file, path, b);
        return 0;
    } else if (!strcmp(ty, "Metaspace")) {
        pt->kind = PRE_METASPACE;
        uint32_t ch;
        if (get_char(file, o, path, "replacement", 0x2581, &ch) || get_prepend_scheme(file, o, path, &pt->prepend) ||
            get_bool(file, o, path, "split", 1, &pt->split))
            return -1;
        pt->repl_n = tok_utf8_put(ch, pt->repl);
        if (tok_pattern_compile(&pt->pat, pt->repl, (size_t)pt->repl_n, 1, file, path)) return -1;
    } else
        return tt_errorf("%s: %s.type '%s' is not supported (supported pre-tokenizers: ByteLevel, Split, Metaspace, "
                         "Sequence)",
                         file, path, ty);
    t->n_pretoks++;
    return 0;
}

static int parse_decoder(tt_tokenizer *t, const char *file, const cJSON *o, const char *path)
{
    const char *ty = type_of(file, o, path);
    if (!ty) return -1;
    char sub[PATH_MAX_LEN];
    if (!strcmp(ty, "Sequence")) {
        const cJSON *arr = field(o, "decoders");
        if (!cJSON_IsArray(arr)) return tt_errorf("%s: %s.decoders must be an array", file, path);
        int i = 0;
        for (const cJSON *it = arr->child; it; it = it->next, i++) {
            snprintf(sub, sizeof sub, "%s.decoders[%d]", path, i);
            if (parse_decoder(t, file, it, sub)) return -1;
        }
        return 0;
    }
    if (t->n_decs == TOK_MAX_STAGES) return tt_errorf("%s: %s: more than %d decoders", file, path, TOK_MAX_STAGES);
    tok_decoder *d = &t->decs[t->n_decs];
    long v = 0;
    if (!strcmp(ty, "ByteLevel")) d->kind = DEC_BYTE_LEVEL;
    else if (!strcmp(ty, "ByteFallback")) d->kind = DEC_BYTE_FALLBACK;
    else if (!strcmp(ty, "Fuse")) d->kind = DEC_FUSE;
    else if (!strcmp(ty, "Strip")) {
        d->kind = DEC_STRIP;
        if (get_char(file, o, path, "content", ' ', &d->ch) || get_int(file, o, path, "start", 0, 1 << 20, 0, &v))
            return -1;
        d->start = (int)v;
        if (get_int(file, o, path, "stop", 0, 1 << 20, 0, &v)) return -1;
        d->stop = (int)v;
    } else if (!strcmp(ty, "Replace")) {
        d->kind = DEC_REPLACE;
        const char *s;
        if (get_pattern(t, file, o, path, &d->pat)) return -1;
        t->n_decs++; /* owns the pattern from here */
        if (get_str(file, o, path, "content", 1, &s) || !(d->str = tt_strdup(s))) return -1;
        d->str_n = strlen(s);
        return 0;
    } else if (!strcmp(ty, "Metaspace")) {
        d->kind = DEC_METASPACE;
        if (get_char(file, o, path, "replacement", 0x2581, &d->ch) || get_prepend_scheme(file, o, path, &d->prepend))
            return -1;
    } else
        return tt_errorf("%s: %s.type '%s' is not supported (supported decoders: ByteLevel, ByteFallback, Fuse, "
                         "Strip, Replace, Metaspace, Sequence)",
                         file, path, ty);
    t->n_decs++;
    return 0;
}

static int append_ids(int32_t **arr, int *n, const int32_t *ids, int k, int at_front)
{
    if (k == 0) return 0;
    int32_t *p = realloc(*arr, (size_t)(*n + k + 1) * sizeof *p);
    if (!p) return tt_errorf("tokenizer: out of memory");
    if (at_front) {
        memmove(p + k, p, (size_t)*n * sizeof *p);
        memcpy(p, ids, (size_t)k * sizeof *p);
    } else memcpy(p + *n, ids, (size_t)k * sizeof *p);
    *arr = p;
    *n += k;
    return 0;
}

/* TemplateProcessing "single": special tokens before and after $A. Several
 * templates (in a Sequence) nest: a later one wraps the earlier result. */
static int parse_template(tt_tokenizer *t, const char *file, const cJSON *o, const char *path)
{
    const cJSON *single = field(o, "single"), *specials = field(o, "special_tokens");
    if (!cJSON_IsArray(single)) return tt_errorf("%s: %s.single must be an array", file, path);
    if (specials && !cJSON_IsObject(specials)) return tt_errorf("%s: %s.special_tokens must be an object", file, path);
    int32_t *pre = NULL, *post = NULL;
    int n_pre = 0, n_post = 0, n_a = 0, i = 0, rc = -1;
    for (const cJSON *it = single->child; it; it = it->next, i++) {
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
        const cJSON *sq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
        const char *id;
        char sub[PATH_MAX_LEN];
        snprintf(sub, sizeof sub, "%s.single[%d]", path, i);
        if (cJSON_IsObject(sq)) {
            snprintf(sub, sizeof sub, "%s.single[%d].Sequence", path, i);
            if (get_str(file, sq, sub, "id", 1, &id)) goto done;
            if (strcmp(id, "A") != 0) {
                tt_errorf("%s: %s.id '%s': the single template may only hold sequence A", file, sub, id);
                goto done;
            }
            n_a++;
            continue;
        }
        if (!cJSON_IsObject(st)) {
            tt_errorf("%s: %s must be {\"SpecialToken\": ...} or {\"Sequence\": ...}", file, sub);
            goto done;
        }
        snprintf(sub, sizeof sub, "%s.single[%d].SpecialToken", path, i);
        if (get_str(file, st, sub, "id", 1, &id)) goto done;
        const cJSON *def = specials ? cJSON_GetObjectItemCaseSensitive(specials, id) : NULL;
        const cJSON *ids = def ? field(def, "ids") : NULL;
        if (!cJSON_IsArray(ids)) {
            tt_errorf("%s: %s.special_tokens['%s'].ids is missing (the template names '%s')", file, path, id, id);
            goto done;
        }
        int j = 0;
        for (const cJSON *x = ids->child; x; x = x->next, j++) {
            char what[PATH_MAX_LEN + 80];
            long v = 0;
            snprintf(what, sizeof what, "%s.special_tokens['%.40s'].ids[%d]", path, id, j);
            if (as_int(file, x, what, 0, TOK_MAX_ID - 1, &v)) goto done;
            int32_t v32 = (int32_t)v;
            if (append_ids(n_a ? &post : &pre, n_a ? &n_post : &n_pre, &v32, 1, 0)) goto done;
        }
    }
    if (n_a != 1) {
        tt_errorf("%s: %s.single must hold sequence A exactly once", file, path);
        goto done;
    }
    if (append_ids(&t->tmpl_pre, &t->n_tmpl_pre, pre, n_pre, 1) ||
        append_ids(&t->tmpl_post, &t->n_tmpl_post, post, n_post, 0))
        goto done;
    rc = 0;
done:
    free(pre);
    free(post);
    return rc;
}

static int parse_post(tt_tokenizer *t, const char *file, const cJSON *o, const char *path)
{
    const char *ty = type_of(file, o, path);
    if (!ty) return -1;
    if (!strcmp(ty, "Sequence")) {
        const cJSON *arr = field(o, "processors");
        if (!cJSON_IsArray(arr)) return tt_errorf("%s: %s.processors must be an array", file, path);
        int i = 0;
        for (const cJSON *it = arr->child; it; it = it->next, i++) {
            char sub[PATH_MAX_LEN];
            snprintf(sub, sizeof sub, "%s.processors[%d]", path, i);
            if (parse_post(t, file, it, sub)) return -1;
        }
        return 0;
    }
    if (!strcmp(ty, "ByteLevel")) {
        /* it only trims offsets: the ids are the same either way */
        int trim = 1;
        if (get_bool(file, o, path, "trim_offsets", 1, &trim)) return -1;
        if (trim && !t->no_offsets[0])
            snprintf(t->no_offsets, sizeof t->no_offsets,
                     "%s: %s.trim_offsets = true is not supported by tt_tokenizer_encode_offsets (HF moves "
                     "token starts past leading spaces there); tt_tokenizer_encode is",
                     file, path);
        return 0;
    }
    if (!strcmp(ty, "TemplateProcessing")) return parse_template(t, file, o, path);
    return tt_errorf("%s: %s.type '%s' is not supported (supported post-processors: TemplateProcessing, ByteLevel, "
                     "Sequence)",
                     file, path, ty);
}

/* ---- model ------------------------------------------------------------------- */

static int parse_model(tt_tokenizer *t, const char *file, const cJSON *m, int32_t *max_id)
{
    if (!cJSON_IsObject(m)) return tt_errorf("%s: model is missing or not an object", file);
    const char *ty, *s;
    if (get_str(file, m, "model", "type", 0, &ty)) return -1;
    if (ty && strcmp(ty, "BPE") != 0) return tt_errorf("%s: model.type '%s' is not supported (BPE only)", file, ty);
    if (!ty && !field(m, "merges")) return tt_errorf("%s: model.type is missing and model has no merges (BPE only)", file);
    const cJSON *dr = field(m, "dropout");
    if (dr && (!cJSON_IsNumber(dr) || dr->valuedouble != 0))
        return tt_errorf("%s: model.dropout is not supported (BPE dropout is random; set it to null)", file);
    if (get_bool(file, m, "model", "fuse_unk", 0, &t->fuse_unk) ||
        get_bool(file, m, "model", "byte_fallback", 0, &t->byte_fallback) ||
        get_bool(file, m, "model", "ignore_merges", 0, &t->ignore_merges))
        return -1;
    if (get_str(file, m, "model", "unk_token", 0, &s)) return -1;
    if (s && !(t->unk_name = tt_strdup(s))) return -1;
    if (get_str(file, m, "model", "continuing_subword_prefix", 0, &s)) return -1;
    if (s && *s && !(t->cont_prefix = tt_strdup(s))) return -1;
    if (get_str(file, m, "model", "end_of_word_suffix", 0, &s)) return -1;
    if (s && *s && !(t->word_suffix = tt_strdup(s))) return -1;
    if (t->byte_fallback && (t->cont_prefix || t->word_suffix) && !t->no_offsets[0])
        /* HF's byte-fallback tokens then count the prefix / suffix bytes too, and later offsets drift */
        snprintf(t->no_offsets, sizeof t->no_offsets,
                 "%s: model.byte_fallback with a continuing_subword_prefix or end_of_word_suffix is not "
                 "supported by tt_tokenizer_encode_offsets (HF's offsets drift there); tt_tokenizer_encode is",
                 file);

    const cJSON *vocab = field(m, "vocab");
    if (!cJSON_IsObject(vocab)) return tt_errorf("%s: model.vocab is missing or not an object", file);
    *max_id = -1;
    for (const cJSON *it = vocab->child; it; it = it->next) {
        char what[96];
        long id = 0;
        snprintf(what, sizeof what, "model.vocab['%.60s']", it->string);
        if (as_int(file, it, what, 0, TOK_MAX_ID - 1, &id)) return -1;
        if (tok_strmap_put(&t->vocab, it->string, strlen(it->string), (int32_t)id)) return -1;
        if (id > *max_id) *max_id = (int32_t)id;
    }
    t->n_model = (int32_t)t->vocab.n;
    /* two strings with one id would make decoding ambiguous */
    int32_t *owner = malloc((size_t)(*max_id + 1) * sizeof *owner);
    if (!owner) return tt_errorf("%s: out of memory", file);
    for (int32_t i = 0; i <= *max_id; i++) owner[i] = -1;
    for (size_t i = 0; i < t->vocab.n; i++) {
        const tok_strent *e = &t->vocab.ents[i];
        if (owner[e->val] >= 0) {
            const tok_strent *o = &t->vocab.ents[owner[e->val]];
            tt_errorf("%s: model.vocab: id %d is given to both '%.*s' and '%.*s'", file, e->val, (int)(o->len > 60 ? 60 : o->len),
                      t->vocab.keys.p + o->off, (int)(e->len > 60 ? 60 : e->len), t->vocab.keys.p + e->off);
            free(owner);
            return -1;
        }
        owner[e->val] = (int32_t)i;
    }
    free(owner);

    const cJSON *merges = field(m, "merges");
    if (!cJSON_IsArray(merges)) return tt_errorf("%s: model.merges is missing or not an array", file);
    size_t n_merges = (size_t)cJSON_GetArraySize(merges), i = 0;
    int32_t *tri = malloc((n_merges * 3 + 1) * sizeof *tri);
    if (!tri) return tt_errorf("%s: out of memory (%zu merges)", file, n_merges);
    tok_buf joined = {0};
    size_t plen = t->cont_prefix ? strlen(t->cont_prefix) : 0;
    int rc = -1;
    for (const cJSON *it = merges->child; it; it = it->next, i++) {
        const char *a = NULL, *b = NULL;
        size_t an = 0, bn = 0;
        if (cJSON_IsString(it)) {
            /* "a b": HF splits on ' ' and wants exactly two parts */
            const char *sp = strchr(it->valuestring, ' ');
            if (sp && !strchr(sp + 1, ' ')) {
                a = it->valuestring;
                an = (size_t)(sp - a);
                b = sp + 1;
                bn = strlen(b);
            }
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) &&
                   cJSON_IsString(it->child->next)) {
            a = it->child->valuestring;
            an = strlen(a);
            b = it->child->next->valuestring;
            bn = strlen(b);
        }
        if (!a) {
            tt_errorf("%s: model.merges[%zu] must be a string \"a b\" (one space) or a pair [\"a\", \"b\"]", file, i);
            goto done;
        }
        int32_t ia = tok_strmap_get(&t->vocab, a, an), ib = tok_strmap_get(&t->vocab, b, bn);
        if (ia < 0 || ib < 0) {
            tt_errorf("%s: model.merges[%zu]: token '%.*s' is not in model.vocab", file, i, (int)(ia < 0 ? an : bn),
                      ia < 0 ? a : b);
            goto done;
        }
        if (bn < plen) {
            tt_errorf("%s: model.merges[%zu]: '%s' is shorter than continuing_subword_prefix", file, i, b);
            goto done;
        }
        joined.n = 0;
        if (tok_buf_put(&joined, a, an) || tok_buf_put(&joined, b + plen, bn - plen)) goto done;
        int32_t im = tok_strmap_get(&t->vocab, joined.p, joined.n);
        if (im < 0) {
            tt_errorf("%s: model.merges[%zu]: the merged token '%.*s' is not in model.vocab", file, i,
                      (int)(joined.n > 80 ? 80 : joined.n), joined.p);
            goto done;
        }
        tri[3 * i] = ia;
        tri[3 * i + 1] = ib;
        tri[3 * i + 2] = im;
    }
    rc = tok_pairs_build(t, tri, i);
done:
    tok_buf_free(&joined);
    free(tri);
    return rc;
}

/* ---- added tokens -------------------------------------------------------------- */

typedef struct { const char *content; tok_added a; } added_in;

static int parse_added(tt_tokenizer *t, const char *file, const cJSON *arr, added_in **out, int *n_out,
                       int32_t *max_id)
{
    *out = NULL;
    *n_out = 0;
    if (!arr) return 0;
    if (!cJSON_IsArray(arr)) return tt_errorf("%s: added_tokens must be an array", file);
    int n = cJSON_GetArraySize(arr), k = 0, i = 0;
    added_in *v = calloc((size_t)n + 1, sizeof *v);
    tok_strmap seen = {0};
    if (!v) return tt_errorf("%s: out of memory", file);
    int32_t max_added = -1;
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        char path[64];
        snprintf(path, sizeof path, "added_tokens[%d]", i);
        const char *content;
        long id = 0;
        int single = 0;
        tok_added a = {0};
        if (!cJSON_IsObject(it)) {
            tt_errorf("%s: %s must be an object", file, path);
            goto fail;
        }
        if (get_str(file, it, path, "content", 1, &content)) goto fail;
        const cJSON *idv = field(it, "id");
        char what[80];
        snprintf(what, sizeof what, "%s.id", path);
        if (!idv) {
            tt_errorf("%s: %s.id is missing", file, path);
            goto fail;
        }
        if (as_int(file, idv, what, 0, TOK_MAX_ID - 1, &id) || get_bool(file, it, path, "special", 0, &a.special) ||
            get_bool(file, it, path, "single_word", 0, &single) || get_bool(file, it, path, "lstrip", 0, &a.lstrip) ||
            get_bool(file, it, path, "rstrip", 0, &a.rstrip) ||
            get_bool(file, it, path, "normalized", !a.special, &a.normalized))
            goto fail;
        if (single) {
            tt_errorf("%s: %s.single_word = true is not supported ('%s')", file, path, content);
            goto fail;
        }
        if (!*content) continue; /* HF ignores empty added tokens */
        /* the id HF assigns: the existing one, else the next after the vocabulary */
        int32_t prev = tok_strmap_get(&seen, content, strlen(content));
        int32_t want = prev >= 0 ? v[prev].a.id : tok_strmap_get(&t->vocab, content, strlen(content));
        if (want < 0)
            want = max_added < 0 ? t->n_model : (max_added >= t->n_model || t->n_model == 0) ? max_added + 1 : t->n_model;
        if (id != want) {
            if (tok_strmap_get(&t->vocab, content, strlen(content)) >= 0)
                tt_errorf("%s: %s.id %ld for '%s' does not match model.vocab, which gives it id %d", file, path, id,
                          content, want);
            else
                tt_errorf("%s: %s.id %ld is out of range: '%s' is not in model.vocab, so HF tokenizers gives it id %d "
                          "(the next free id)",
                          file, path, id, content, want);
            goto fail;
        }
        if (want >= TOK_MAX_ID) {
            tt_errorf("%s: %s.id %d is out of range", file, path, want);
            goto fail;
        }
        a.id = want;
        if (want > max_added) max_added = want;
        if (want > *max_id) *max_id = want;
        if (prev >= 0) {
            v[prev].a = a; /* a repeated token keeps its id; HF takes the later flags */
            continue;
        }
        if (tok_strmap_put(&seen, content, strlen(content), k)) goto fail;
        v[k].content = content;
        v[k].a = a;
        k++;
    }
    tok_strmap_free(&seen);
    *out = v;
    *n_out = k;
    return 0;
fail:
    tok_strmap_free(&seen);
    free(v);
    return -1;
}

/* ---- tables -------------------------------------------------------------------- */

static int set_id_string(tt_tokenizer *t, int32_t id, const char *s, size_t n)
{
    if (t->id_blob.n + n > UINT32_MAX) return tt_errorf("tokenizer: vocabulary strings exceed 4 GiB");
    t->id_off[id] = (uint32_t)t->id_blob.n;
    t->id_len[id] = (uint32_t)n;
    t->id_flags[id] |= TOK_ID_PRESENT;
    return tok_buf_put(&t->id_blob, s, n);
}

static int build_tables(tt_tokenizer *t, const char *file, const added_in *ad, int n_ad)
{
    size_t n = (size_t)t->n_ids;
    t->id_off = calloc(n + 1, sizeof *t->id_off);
    t->id_len = calloc(n + 1, sizeof *t->id_len);
    t->id_flags = calloc(n + 1, 1);
    if (!t->id_off || !t->id_len || !t->id_flags) return tt_errorf("%s: out of memory", file);
    for (size_t i = 0; i < t->vocab.n; i++) {
        const tok_strent *e = &t->vocab.ents[i];
        if (set_id_string(t, e->val, t->vocab.keys.p + e->off, e->len)) return -1;
    }
    t->added = calloc((size_t)n_ad + 1, sizeof *t->added);
    if (!t->added) return tt_errorf("%s: out of memory", file);
    t->n_added = n_ad;
    tok_strmap special = {0};
    /* HF tokenizers (0.23) keeps a normalized added token by its normalized
     * form: that form is matched in normalized text and is what decoding sees
     * (Llama 2's "<s>" decodes through "\u2581<s>"); decoding skips only
     * strings equal to a special token's content, so such a token stays. */
    for (int i = 0; i < n_ad; i++) {
        const tok_added *a = &ad[i].a;
        const char *c = ad[i].content;
        t->added[i] = *a;
        if (a->special && tok_strmap_put(&special, c, strlen(c), a->id)) goto fail;
        if (!a->normalized) {
            if (set_id_string(t, a->id, c, strlen(c)) || tok_trie_add(&t->trie_raw, c, strlen(c), i)) goto fail;
            continue;
        }
        size_t nn;
        char *norm = tok_normalize_alloc(t, c, strlen(c), &nn);
        if (!norm) {
            tt_error_prefix("%s: added token '%s': ", file, c);
            goto fail;
        }
        int rc = set_id_string(t, a->id, norm, nn) || tok_trie_add(&t->trie_norm, norm, nn, i);
        free(norm);
        if (rc) goto fail;
    }
    /* decoding skips a token whose string is the content of a special token */
    for (int32_t id = 0; id < t->n_ids; id++)
        if ((t->id_flags[id] & TOK_ID_PRESENT) && tok_strmap_get(&special, t->id_blob.p + t->id_off[id], t->id_len[id]) >= 0)
            t->id_flags[id] |= TOK_ID_SPECIAL;
    tok_strmap_free(&special);
    /* fast paths for the model's first symbols */
    char u[8];
    for (int c = 0; c < 128; c++) {
        u[0] = (char)c;
        t->ascii_id[c] = tok_strmap_get(&t->vocab, u, 1);
    }
    t->bl_all = t->byte_level && !t->cont_prefix && !t->word_suffix;
    for (int b = 0; b < 256; b++) {
        snprintf(u, sizeof u, "<0x%02X>", b);
        t->bf_id[b] = tok_strmap_get(&t->vocab, u, 6);
        int un = tok_utf8_put(tok_byte_to_char(b), u);
        t->bl_id[b] = tok_strmap_get(&t->vocab, u, (size_t)un);
        if (t->bl_id[b] < 0) t->bl_all = 0;
    }
    /* SentencePiece vocabularies keep U+2581 at the start of tokens (or in
     * runs of it): then no merge crosses into a U+2581 that follows another
     * character, and long words can be cut there (bpe_model.c) */
    t->meta_cut = !t->byte_level && tok_strmap_get(&t->vocab, "\xe2\x96\x81", 3) >= 0;
    for (size_t i = 0; i < t->vocab.n && t->meta_cut; i++) {
        const tok_strent *e = &t->vocab.ents[i];
        const char *k = t->vocab.keys.p + e->off;
        for (size_t j = 1; j + 3 <= e->len; j++)
            if (!memcmp(k + j, "\xe2\x96\x81", 3) && !(j >= 3 && !memcmp(k + j - 3, "\xe2\x96\x81", 3))) {
                t->meta_cut = 0;
                break;
            }
    }
    if (t->n_decs && t->decs[0].kind == DEC_BYTE_LEVEL) {
        /* the ByteLevel decoder's bytes of every id, so decoding is a copy */
        t->bl_off = calloc((size_t)t->n_ids + 1, sizeof *t->bl_off);
        t->bl_len = calloc((size_t)t->n_ids + 1, sizeof *t->bl_len);
        if (!t->bl_off || !t->bl_len) goto fail;
        for (int32_t id = 0; id < t->n_ids; id++) {
            if (!(t->id_flags[id] & TOK_ID_PRESENT)) continue;
            const char *k = t->id_blob.p + t->id_off[id];
            size_t n = t->id_len[id], at = t->bl_blob.n;
            int all = 1;
            for (size_t j = 0; j < n && all;) {
                size_t adv;
                int byte = tok_char_byte(tok_utf8_get(k + j, &adv));
                j += adv;
                char c = (char)byte;
                if (byte < 0) all = 0;
                else if (tok_buf_put(&t->bl_blob, &c, 1)) goto fail;
            }
            if (!all) { /* a character outside the byte map: the token is UTF-8 as it is */
                t->bl_blob.n = at;
                if (tok_buf_put(&t->bl_blob, k, n)) goto fail;
            }
            if (t->bl_blob.n > UINT32_MAX) {
                tt_errorf("%s: vocabulary strings exceed 4 GiB", file);
                goto fail;
            }
            t->bl_off[id] = (uint32_t)at;
            t->bl_len[id] = (uint32_t)(t->bl_blob.n - at);
        }
    }
    t->unk_id = -1;
    if (t->unk_name) {
        t->unk_id = tok_strmap_get(&t->vocab, t->unk_name, strlen(t->unk_name));
        if (t->unk_id < 0) t->unk_id = -2; /* HF fails only when the unk token is needed */
    }
    if (t->byte_level && t->ignore_merges) {
        /* whole pre-tokens are raw bytes here: index the vocabulary by bytes */
        tok_buf bytes = {0};
        for (size_t i = 0; i < t->vocab.n; i++) {
            const tok_strent *e = &t->vocab.ents[i];
            const char *s = t->vocab.keys.p + e->off;
            bytes.n = 0;
            int ok = 1;
            for (size_t j = 0; j < e->len && ok;) {
                size_t adv;
                int byte = tok_char_byte(tok_utf8_get(s + j, &adv));
                j += adv;
                if (byte < 0) ok = 0;
                else {
                    char c = (char)byte;
                    if (tok_buf_put(&bytes, &c, 1)) ok = -1;
                }
            }
            if (ok < 0 || (ok && tok_strmap_put(&t->vocab_bytes, bytes.p, bytes.n, e->val))) {
                tok_buf_free(&bytes);
                return -1;
            }
        }
        tok_buf_free(&bytes);
    }
    return 0;
fail:
    tok_strmap_free(&special);
    return -1;
}

int tok_bpe_token_id(const tt_tokenizer *t, const char *token)
{
    size_t n = strlen(token);
    for (int i = 0; i < t->n_added; i++) {
        int32_t id = t->added[i].id;
        if (t->id_len[id] == n && memcmp(t->id_blob.p + t->id_off[id], token, n) == 0) return id;
    }
    return tok_strmap_get(&t->vocab, token, n);
}

static int32_t find_named(const tt_tokenizer *t, const char *const *names)
{
    for (int i = 0; names[i]; i++) {
        int id = tok_bpe_token_id(t, names[i]);
        if (id >= 0) return id;
    }
    return -1;
}

/* ---- entry points ------------------------------------------------------------------ */

void tok_bpe_free(tt_tokenizer *t)
{
    if (!t) return;
    tok_strmap_free(&t->vocab);
    tok_strmap_free(&t->vocab_bytes);
    free(t->id_off);
    free(t->id_len);
    free(t->id_flags);
    tok_buf_free(&t->id_blob);
    free(t->pairs);
    free(t->unk_name);
    free(t->cont_prefix);
    free(t->word_suffix);
    free(t->added);
    tok_trie_free(&t->trie_raw);
    tok_trie_free(&t->trie_norm);
    for (int i = 0; i < t->n_norms; i++) {
        tok_pattern_free(&t->norms[i].pat);
        free(t->norms[i].str);
    }
    for (int i = 0; i < t->n_pretoks; i++) tok_pattern_free(&t->pretoks[i].pat);
    for (int i = 0; i < t->n_decs; i++) {
        tok_pattern_free(&t->decs[i].pat);
        free(t->decs[i].str);
    }
    free(t->tmpl_pre);
    free(t->tmpl_post);
    free(t->bl_off);
    free(t->bl_len);
    tok_buf_free(&t->bl_blob);
    while (t->pool) {
        tok_scratch *sc = t->pool;
        t->pool = sc->pool_next;
        tok_scratch_free(sc);
    }
    pthread_mutex_destroy(&t->pool_lock);
    free(t);
}

static void json_error_position(const char *json, size_t len, int *line, int *col)
{
    const char *at = cJSON_GetErrorPtr();
    *line = 1;
    *col = 1;
    if (!at || at < json || at > json + len) return;
    for (const char *p = json; p < at; p++) {
        if (*p == '\n') { ++*line; *col = 1; }
        else ++*col;
    }
}

tt_tokenizer *tok_bpe_parse(const char *json, size_t len, const char *file)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        int line, col;
        json_error_position(json, len, &line, &col);
        tt_errorf("%s: malformed JSON near line %d, column %d", file, line, col);
        return NULL;
    }
    tt_tokenizer *t = calloc(1, sizeof *t);
    added_in *ad = NULL;
    int n_ad = 0;
    if (!t) {
        tt_errorf("%s: out of memory", file);
        goto fail_root;
    }
    t->kind = TOK_BPE;
    pthread_mutex_init(&t->pool_lock, NULL);
    t->bos = t->eos = -1;
    if (!cJSON_IsObject(root)) {
        tt_errorf("%s: the top level is not a JSON object", file);
        goto fail;
    }
    const char *ver;
    if (get_str(file, root, "tokenizer", "version", 0, &ver)) goto fail;
    if (ver && strcmp(ver, "1.0") != 0) {
        tt_errorf("%s: version '%s' is not supported (1.0 only)", file, ver);
        goto fail;
    }
    if (field(root, "truncation")) tt_warn("%s: 'truncation' is set; titan never truncates, so it is ignored", file);
    if (field(root, "padding")) tt_warn("%s: 'padding' is set; titan never pads, so it is ignored", file);

    int32_t max_id = -1;
    if (parse_model(t, file, field(root, "model"), &max_id)) goto fail;
    const cJSON *o;
    if ((o = field(root, "normalizer")) && parse_normalizer(t, file, o, "normalizer")) goto fail;
    if ((o = field(root, "pre_tokenizer")) && parse_pretok(t, file, o, "pre_tokenizer")) goto fail;
    t->byte_level = t->n_pretoks > 0 && t->pretoks[t->n_pretoks - 1].kind == PRE_BYTE_LEVEL;
    if ((o = field(root, "post_processor")) && parse_post(t, file, o, "post_processor")) goto fail;
    if ((o = field(root, "decoder"))) {
        if (parse_decoder(t, file, o, "decoder")) goto fail;
    } else t->dec_join_space = 1;
    t->dec_fuse_at = t->n_decs;
    for (int k = 0; k < t->n_decs; k++)
        if (t->decs[k].kind == DEC_FUSE || t->decs[k].kind == DEC_BYTE_LEVEL) {
            t->dec_fuse_at = k;
            break;
        }
    if (tok_dec_check(t, file)) goto fail;
    if (parse_added(t, file, field(root, "added_tokens"), &ad, &n_ad, &max_id)) goto fail;
    t->n_ids = max_id + 1;
    if (build_tables(t, file, ad, n_ad)) goto fail;
    for (int i = 0; i < t->n_tmpl_pre + t->n_tmpl_post; i++) {
        int32_t id = i < t->n_tmpl_pre ? t->tmpl_pre[i] : t->tmpl_post[i - t->n_tmpl_pre];
        if (id >= t->n_ids || !(t->id_flags[id] & TOK_ID_PRESENT)) {
            tt_errorf("%s: post_processor: template id %d is not in the vocabulary (size %d)", file, id, t->n_ids);
            goto fail;
        }
    }
    static const char *const bos_names[] = {"<s>", "<|begin_of_text|>", "<|startoftext|>", "<bos>", "<|endoftext|>",
                                            NULL};
    static const char *const eos_names[] = {"</s>", "<|end_of_text|>", "<|endoftext|>", "<|im_end|>", "<eos>", NULL};
    t->bos = t->n_tmpl_pre ? t->tmpl_pre[0] : find_named(t, bos_names);
    t->eos = t->n_tmpl_post ? t->tmpl_post[t->n_tmpl_post - 1] : find_named(t, eos_names);
    free(ad);
    cJSON_Delete(root);
    return t;
fail:
    free(ad);
    tok_bpe_free(t);
fail_root:
    cJSON_Delete(root);
    return NULL;
}
