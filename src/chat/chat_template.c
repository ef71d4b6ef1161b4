/* chat_template.c — the public entry of src/chat/: parse a template, render a conversation as
 * transformers' apply_chat_template does (its message normalisation first), and read a model
 * folder's template and special tokens. */
#include "chat/chat_template.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chat/chat_internal.h"
#include "core/core.h"

tt_chat_template *tt_chat_template_parse(const char *src, size_t len, const char *name)
{
    tt_chat_template *t = calloc(1, sizeof *t);
    if (!t) {
        tt_errorf("out of memory");
        return NULL;
    }
    snprintf(t->name, sizeof t->name, "%s", name ? name : "chat template");
    jtokens toks = {0};
    tt_err rc = tt_chat_lex(src ? src : "", src ? len : 0, t->name, &t->arena, &toks) ||
                tt_chat_parse_tokens(t, &toks);
    free(toks.t);
    if (rc) {
        tt_chat_template_free(t);
        return NULL;
    }
    return t;
}

void tt_chat_template_free(tt_chat_template *t)
{
    if (!t) return;
    ja_free(&t->arena);
    free(t);
}

void tt_chat_spans_free(tt_chat_spans *s)
{
    if (!s) return;
    free(s->start);
    free(s->end);
    memset(s, 0, sizeof *s);
}

/* transformers' _normalize_chat_messages (keys whose value is None dropped) and
 * _alias_reasoning_fields (thinking and reasoning_content filled from the first reasoning field) */
static int normalise_message(jarena *a, jv m, jv *out)
{
    static const char *const reasoning_fields[] = {"reasoning_content", "thinking", "reasoning"};
    const jdict *d = m.u.d;
    jv reasoning = jv_undef(NULL);
    for (int k = 0; k < 3 && reasoning.kind == JV_UNDEF; k++) {
        jv v;
        if (jv_dict_get_str(d, reasoning_fields[k], &v) && v.kind != JV_NONE) reasoning = v;
    }
    jdict *n = jv_dict_new(a, d->n + 2);
    if (!n) return -1;
    jv k_thinking, k_rc;
    if (jv_cstr(a, "thinking", &k_thinking) || jv_cstr(a, "reasoning_content", &k_rc)) return -1;
    if (reasoning.kind != JV_UNDEF) jv_dict_set(n, k_thinking, reasoning);
    for (size_t i = 0; i < d->n; i++)
        if (d->vals[i].kind != JV_NONE) jv_dict_set(n, d->keys[i], d->vals[i]);
    if (reasoning.kind != JV_UNDEF) jv_dict_set(n, k_rc, reasoning);
    *out = (jv){JV_DICT, 0, 0, {.d = n}};
    return 0;
}

tt_err tt_chat_render(const tt_chat_template *t, const cJSON *messages, const cJSON *tools,
                      int add_generation_prompt, const tt_chat_specials *sp, const tt_chat_limits *lim,
                      char **out, size_t *out_len, tt_chat_spans *gen, int *raised)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    if (raised) *raised = 0;
    if (gen) gen->n = 0;
    jarena a = {0};
    a.limit = lim && lim->max_memory ? lim->max_memory : (size_t)256 << 20;
    jbuf root = {0};
    root.limit = lim && lim->max_output ? lim->max_output : (size_t)64 << 20;
    jrender r = {t, &a, &root, &root, gen, 0, lim && lim->max_steps ? lim->max_steps : 10000000, 0,
                 lim ? lim->now : 0, 0, 0};
    tt_err rc = -1;
    jv_too_deep = 0;
    jframe *f = jr_frame_new(&r, NULL);
    jv msgs, tl = jv_none(), v;
    if (!f) goto done;
    if (!messages || !cJSON_IsArray(messages)) {
        tt_errorf("the messages are not a JSON array");
        goto done;
    }
    if (tt_chat_value_from_json(&a, messages, &msgs, 0)) goto done;
    for (size_t i = 0; i < msgs.u.l->n; i++) {
        jv *m = (jv *)&msgs.u.l->v[i];
        if (m->kind != JV_DICT) {
            tt_errorf("message %zu is not a JSON object (chat messages should be dicts)", i);
            goto done;
        }
        if (normalise_message(&a, *m, m)) goto done;
    }
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools)) {
            tt_errorf("the tools are not a JSON array");
            goto done;
        }
        if (tt_chat_value_from_json(&a, tools, &tl, 0)) goto done;
        for (size_t i = 0; i < tl.u.l->n; i++)
            if (tl.u.l->v[i].kind != JV_DICT) {
                tt_errorf("tool %zu is not a JSON object (a JSON schema)", i);
                goto done;
            }
    }
    if (jr_frame_set(&r, f, "messages", msgs) || jr_frame_set(&r, f, "tools", tl) ||
        jr_frame_set(&r, f, "documents", jv_none()) ||
        jr_frame_set(&r, f, "add_generation_prompt", jv_bool(add_generation_prompt)))
        goto done;
    if (sp) {
        const char *names[] = {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"};
        const char *vals[] = {sp->bos, sp->eos, sp->unk, sp->pad, sp->sep, sp->cls, sp->mask};
        for (int k = 0; k < 7; k++)
            if (vals[k] && (jv_cstr(&a, vals[k], &v) || jr_frame_set(&r, f, names[k], v))) goto done;
    }
    if (jr_exec(&r, f, &t->body) || jr_step(&r, NULL)) goto done;
    *out = root.p ? root.p : calloc(1, 1);
    if (!*out) {
        tt_errorf("out of memory");
        goto done;
    }
    if (out_len) *out_len = root.len;
    /* A {% generation %} inside a macro or a block set is measured where transformers measures it,
     * at the end of the top-level text when it ran; what became of the macro's text (a filter such
     * as |length, or nothing) can leave that range past the end. Cut it there: transformers' mask
     * then runs to the last token, and a range that starts past the end marks nothing. */
    for (int i = 0; gen && i < gen->n; i++) {
        if (gen->end[i] > root.len) gen->end[i] = root.len;
        if (gen->start[i] > gen->end[i]) gen->start[i] = gen->end[i];
    }
    root.p = NULL;
    rc = 0;
done:
    if (rc && raised) *raised = r.raised;
    if (rc && gen) gen->n = 0;
    jb_free(&root);
    ja_free(&a);
    return rc;
}

/* ---- a model folder ------------------------------------------------------------------------------ */

static cJSON *read_json_file(const char *path, int *missing)
{
    *missing = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        *missing = errno == ENOENT;
        if (!*missing) tt_errorf("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 65536 + 1 > cap) {
            cap = cap ? cap * 2 : 131072;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(fp);
                tt_errorf("out of memory reading %s", path);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, 65536, fp);
        len += got;
        if (got < 65536) break;
    }
    fclose(fp);
    buf[len] = 0;
    cJSON *j = cJSON_ParseWithLength(buf, len);
    free(buf);
    if (!j) tt_errorf("%s: not valid JSON", path);
    return j;
}

static int read_text(const char *path, char **src, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return tt_errorf("%s: cannot open: %s", path, strerror(errno));
    jbuf b = {0};
    char tmp[65536];
    size_t got;
    int rc = 0;
    while (!rc && (got = fread(tmp, 1, sizeof tmp, fp)) > 0) rc = jb_put(&b, tmp, got);
    fclose(fp);
    if (rc) return jb_free(&b), -1;
    *src = b.p ? b.p : calloc(1, 1);
    *len = b.len;
    return *src ? 0 : tt_errorf("out of memory");
}

tt_err tt_chat_template_from_hf_dir(const char *dir, char **src, size_t *len, char *name, size_t name_cap)
{
    char path[4200], jinja[4200];
    int missing;
    struct stat st;
    *src = NULL, *len = 0;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    snprintf(jinja, sizeof jinja, "%s/chat_template.jinja", dir);
    cJSON *cfg = read_json_file(path, &missing);
    if (!cfg && !missing) return -1;
    if (stat(jinja, &st) == 0) { /* as transformers loads a folder: the file takes priority over the config's key */
        cJSON_Delete(cfg);
        if (name) snprintf(name, name_cap, "%s", jinja);
        return read_text(jinja, src, len);
    }
    const cJSON *ct = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "chat_template") : NULL;
    const char *text = NULL;
    if (cJSON_IsString(ct)) {
        text = ct->valuestring;
    } else if (cJSON_IsArray(ct)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, ct)
        {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name"), *tp = cJSON_GetObjectItemCaseSensitive(e, "template");
            if (cJSON_IsString(n) && !strcmp(n->valuestring, "default") && cJSON_IsString(tp)) text = tp->valuestring;
        }
        if (!text) {
            cJSON_Delete(cfg);
            return tt_errorf("%s: chat_template is a list of named templates without one named \"default\"", path);
        }
    } else if (ct && !cJSON_IsNull(ct)) {
        cJSON_Delete(cfg);
        return tt_errorf("%s: chat_template is neither a string nor a list of {name, template}", path);
    }
    if (!text) {
        cJSON_Delete(cfg);
        return tt_errorf("%s has no chat template (neither tokenizer_config.json's chat_template nor "
                         "chat_template.jinja); give one with --chat-template FILE",
                         dir);
    }
    *len = strlen(text);
    *src = malloc(*len + 1);
    if (*src) memcpy(*src, text, *len + 1);
    if (name) snprintf(name, name_cap, "%s (chat_template)", path);
    cJSON_Delete(cfg);
    return *src ? 0 : tt_errorf("out of memory");
}

tt_err tt_chat_template_open(const char *hf_dir, const char *file, tt_chat_template **t, tt_chat_specials *sp)
{
    *t = NULL;
    memset(sp, 0, sizeof *sp);
    if (!hf_dir && !file) return tt_errorf("a chat needs a model folder (--hf DIR) or a template (--chat-template FILE)");
    char *src = NULL, name[4400] = "";
    size_t len = 0;
    tt_err rc;
    if (file) {
        rc = read_text(file, &src, &len);
        snprintf(name, sizeof name, "%s", file);
    } else {
        rc = tt_chat_template_from_hf_dir(hf_dir, &src, &len, name, sizeof name);
    }
    if (!rc && hf_dir) rc = tt_chat_specials_from_hf_dir(hf_dir, sp);
    if (!rc && !(*t = tt_chat_template_parse(src, len, name))) rc = -1;
    free(src);
    if (rc) tt_chat_specials_free(sp);
    return rc;
}

tt_err tt_chat_specials_from_hf_dir(const char *dir, tt_chat_specials *sp)
{
    memset(sp, 0, sizeof *sp);
    char path[4200];
    int missing;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    cJSON *cfg = read_json_file(path, &missing);
    if (!cfg) return missing ? 0 : -1;
    static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token",
                                       "mask_token"};
    const char **slots[] = {&sp->bos, &sp->eos, &sp->unk, &sp->pad, &sp->sep, &sp->cls, &sp->mask};
    for (int k = 0; k < 7; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, keys[k]);
        if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (!cJSON_IsString(v)) continue;
        char *s = malloc(strlen(v->valuestring) + 1);
        if (!s) {
            cJSON_Delete(cfg);
            tt_chat_specials_free(sp);
            return tt_errorf("out of memory");
        }
        strcpy(s, v->valuestring);
        *slots[k] = s;
    }
    cJSON_Delete(cfg);
    return 0;
}

void tt_chat_specials_free(tt_chat_specials *sp)
{
    free((char *)sp->bos), free((char *)sp->eos), free((char *)sp->unk), free((char *)sp->pad);
    free((char *)sp->sep), free((char *)sp->cls), free((char *)sp->mask);
    memset(sp, 0, sizeof *sp);
}
