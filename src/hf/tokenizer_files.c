/* tokenizer_files.c — the tokenizer-side files an export copies from its
 * source folder, or writes from what the folder has, so that transformers'
 * AutoTokenizer loads the exported folder with the source's tokens, special
 * tokens and chat template. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chat/chat_template.h" /* tt_chat_json_keep_numbers, tt_chat_specials_from_hf_dir */
#include "formats/safetensors.h" /* tt_read_file, tt_write_file_atomic */
#include "hf/tokenizer_files.h"

#define TOKENIZER_FILE_MAX (1u << 30) /* tokenizer.json of a large vocabulary is tens of MB */
#define CONFIG_FILE_MAX (256u << 20)  /* tokenizer_config.json can list every added token */

static tt_err path_in(char *buf, size_t cap, const char *dir, const char *name)
{
    return snprintf(buf, cap, "%s/%s", dir, name) >= (int)cap ? tt_errorf("%s: path too long", dir) : 0;
}

/* 1 when path exists; 0 with *missing set when it does not (other stat errors: *missing 0) */
static int exists(const char *path, int *missing)
{
    struct stat st;
    const int ok = stat(path, &st) == 0;
    if (missing) *missing = !ok && errno == ENOENT;
    return ok;
}

static void numbers_as_literals(cJSON *v)
{
    for (; v; v = v->next) {
        if (cJSON_IsNumber(v) && v->valuestring) v->type = cJSON_Raw; /* printed as its valuestring */
        numbers_as_literals(v->child);
    }
}

cJSON *tt_hf_json_read_object(const char *path, size_t limit, int *missing)
{
    int absent;
    if (!exists(path, &absent) && absent) {
        if (missing) *missing = 1;
        return NULL;
    }
    if (missing) *missing = 0;
    size_t len;
    char *text = tt_read_file(path, limit, &len);
    if (!text) return NULL;
    cJSON *j = cJSON_ParseWithLength(text, len);
    tt_err rc = !j ? tt_errorf("%s: not valid JSON", path)
              : !cJSON_IsObject(j) ? tt_errorf("%s: not a JSON object", path)
              : tt_chat_json_keep_numbers(j, text, len);
    free(text);
    if (rc) {
        cJSON_Delete(j);
        return NULL;
    }
    numbers_as_literals(j->child);
    return j;
}

tt_err tt_hf_files_add(tt_hf_files *f, const char *name, char *data, size_t len)
{
    int k = 0;
    while (k < f->n && strcmp(f->f[k].name, name)) k++;
    if (k == TT_HF_MAX_FILES) {
        free(data);
        return tt_errorf("more than %d tokenizer files", TT_HF_MAX_FILES);
    }
    if (k < f->n) free(f->f[k].data);
    else f->n++;
    f->f[k] = (tt_hf_file){name, data, len};
    return 0;
}

const tt_hf_file *tt_hf_files_find(const tt_hf_files *f, const char *name)
{
    for (int k = 0; k < f->n; k++)
        if (!strcmp(f->f[k].name, name)) return &f->f[k];
    return NULL;
}

void tt_hf_files_free(tt_hf_files *f)
{
    for (int k = 0; k < f->n; k++) free(f->f[k].data);
    memset(f, 0, sizeof *f);
}

tt_err tt_hf_files_write(const char *dir, const tt_hf_files *f)
{
    char path[4200];
    for (int k = 0; k < f->n; k++)
        if (path_in(path, sizeof path, dir, f->f[k].name) || tt_write_file_atomic(path, f->f[k].data, f->f[k].len))
            return -1;
    return 0;
}

/* src_dir/name copied into the set; nothing when the source lacks it (*copied 0) */
static tt_err copy_in(tt_hf_files *f, const char *src_dir, const char *name, size_t limit, int *copied)
{
    char path[4200];
    *copied = 0;
    if (path_in(path, sizeof path, src_dir, name)) return -1;
    if (!exists(path, NULL)) return 0;
    size_t len;
    char *data = tt_read_file(path, limit, &len);
    if (!data || tt_hf_files_add(f, name, data, len)) return -1;
    *copied = 1;
    return 0;
}

/* a tree printed into the set */
static tt_err add_json(tt_hf_files *f, const char *name, const cJSON *j)
{
    char *text = cJSON_Print(j);
    if (!text) return tt_errorf("out of memory writing %s", name);
    return tt_hf_files_add(f, name, text, strlen(text));
}

static tt_err add_string(cJSON *o, const char *key, const char *s)
{
    return !s || cJSON_AddStringToObject(o, key, s) ? 0 : tt_errorf("out of memory");
}

/* tokenizer_config.json: the source's as it is when it holds the template (or when there is none to add), the
 * source's with chat_template.jinja's template added, or a new one */
static tt_err tokenizer_config(tt_hf_files *f, const char *src_dir, cJSON *tc, const char *tc_path, const char *jinja,
                               const char *bos, const char *eos)
{
    int copied;
    const cJSON *ct = tc ? cJSON_GetObjectItemCaseSensitive(tc, "chat_template") : NULL;
    if (tc && (!jinja || (ct && !cJSON_IsNull(ct)))) {
        if (copy_in(f, src_dir, "tokenizer_config.json", CONFIG_FILE_MAX, &copied)) return -1;
        return copied ? 0 : tt_errorf("%s: cannot open: %s", tc_path, strerror(errno));
    }
    cJSON *own = tc ? NULL : cJSON_CreateObject(), *o = tc ? tc : own;
    tt_err rc = o ? 0 : tt_errorf("out of memory");
    if (!rc && own) /* what AutoTokenizer needs to load tokenizer.json alone */
        rc = add_string(o, "tokenizer_class", "PreTrainedTokenizerFast") || add_string(o, "bos_token", bos) ||
             add_string(o, "eos_token", eos);
    if (!rc && jinja) {
        cJSON_DeleteItemFromObjectCaseSensitive(o, "chat_template"); /* a null one */
        rc = add_string(o, "chat_template", jinja);
    }
    if (!rc) rc = add_json(f, "tokenizer_config.json", o);
    cJSON_Delete(own);
    return rc;
}

/* special_tokens_map.json from tokenizer_config.json's special tokens, or bos and eos without it */
static tt_err special_tokens_map(tt_hf_files *f, const char *src_dir, int has_tc, const char *bos, const char *eos)
{
    tt_chat_specials sp = {0};
    if (has_tc && tt_chat_specials_from_hf_dir(src_dir, &sp)) return -1;
    cJSON *o = cJSON_CreateObject();
    tt_err rc = o ? 0 : tt_errorf("out of memory");
    if (!rc && has_tc)
        rc = add_string(o, "bos_token", sp.bos) || add_string(o, "eos_token", sp.eos) ||
             add_string(o, "unk_token", sp.unk) || add_string(o, "sep_token", sp.sep) ||
             add_string(o, "pad_token", sp.pad) || add_string(o, "cls_token", sp.cls) ||
             add_string(o, "mask_token", sp.mask);
    else if (!rc)
        rc = add_string(o, "bos_token", bos) || add_string(o, "eos_token", eos);
    if (!rc) rc = add_json(f, "special_tokens_map.json", o);
    cJSON_Delete(o);
    tt_chat_specials_free(&sp);
    return rc;
}

tt_err tt_hf_tokenizer_files(const char *src_dir, const char *bos, const char *eos, tt_hf_files *out)
{
    memset(out, 0, sizeof *out);
    char tc_path[4200], jinja_path[4200];
    int missing, copied, jinja_copied;
    if (path_in(tc_path, sizeof tc_path, src_dir, "tokenizer_config.json") ||
        path_in(jinja_path, sizeof jinja_path, src_dir, "chat_template.jinja"))
        return -1;
    cJSON *tc = tt_hf_json_read_object(tc_path, CONFIG_FILE_MAX, &missing);
    if (!tc && !missing) return -1;
    tt_err rc = copy_in(out, src_dir, "tokenizer.json", TOKENIZER_FILE_MAX, &copied) ||
                copy_in(out, src_dir, "chat_template.jinja", CONFIG_FILE_MAX, &jinja_copied);
    const tt_hf_file *jf = tt_hf_files_find(out, "chat_template.jinja");
    char *jinja = NULL;
    if (!rc && jf && !(jinja = malloc(jf->len + 1))) rc = tt_errorf("out of memory");
    if (jinja) memcpy(jinja, jf->data, jf->len), jinja[jf->len] = 0;
    if (jinja && strlen(jinja) != jf->len) /* it goes into tokenizer_config.json as a JSON string */
        rc = tt_errorf("%s: holds a NUL byte", jinja_path);
    if (!rc) rc = tokenizer_config(out, src_dir, tc, tc_path, jinja, bos, eos);
    /* the template of tokenizer_config.json as chat_template.jinja too (one string; not a list of named ones) */
    const cJSON *ct = tc ? cJSON_GetObjectItemCaseSensitive(tc, "chat_template") : NULL;
    if (!rc && !jinja_copied && cJSON_IsString(ct)) {
        const size_t n = strlen(ct->valuestring);
        char *t = malloc(n + 1);
        rc = t ? tt_hf_files_add(out, "chat_template.jinja", memcpy(t, ct->valuestring, n + 1), n)
               : tt_errorf("out of memory");
    }
    if (!rc) rc = copy_in(out, src_dir, "special_tokens_map.json", CONFIG_FILE_MAX, &copied);
    if (!rc && !copied) rc = special_tokens_map(out, src_dir, tc != NULL, bos, eos);
    free(jinja);
    cJSON_Delete(tc);
    if (rc) tt_hf_files_free(out);
    return rc;
}
