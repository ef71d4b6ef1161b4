/* generation_config.c — generation_config.json read and written, and the
 * end-of-turn ids a model folder gives. A chat model's generation_config.json
 * lists the token that ends an assistant's turn (Qwen's <|im_end|>, Llama 3's
 * <|eot_id|>) where config.json often names only the end of a document, so
 * generation stops at the union of what the folder says. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chat/chat_template.h" /* tt_chat_specials_from_hf_dir */
#include "formats/safetensors.h" /* tt_read_file */
#include "hf/generation_config.h"
#include "hf/tokenizer_files.h" /* tt_hf_json_read_object */

/* an id of eos_token_id: a non-negative integer below vocab_size (when known) */
static tt_err eos_id(const cJSON *v, const char *path, int vocab_size, int *out)
{
    const double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (!(d >= 0 && d == floor(d) && d <= INT_MAX)) {
        char *t = cJSON_PrintUnformatted(v);
        tt_errorf("%s: key 'eos_token_id' must be a non-negative integer or a list of them (got %.40s)", path,
                  t ? t : "?");
        free(t);
        return -1;
    }
    if (vocab_size > 0 && d >= vocab_size)
        return tt_errorf("%s: key 'eos_token_id': id %.0f is outside the model's vocabulary of %d tokens", path, d,
                         vocab_size);
    *out = (int)d;
    return 0;
}

tt_err tt_hf_generation_config_parse(const char *json, size_t len, const char *path, int vocab_size,
                                     tt_hf_generation_config *g)
{
    memset(g, 0, sizeof *g);
    g->present = 1;
    cJSON *j = cJSON_ParseWithLength(json, len);
    if (!j) return tt_errorf("%s: not valid JSON", path);
    tt_err rc = 0;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "eos_token_id");
    if (!cJSON_IsObject(j)) {
        rc = tt_errorf("%s: not a JSON object", path);
    } else if (cJSON_IsArray(e)) {
        if (cJSON_GetArraySize(e) > TT_HF_MAX_EOS)
            rc = tt_errorf("%s: key 'eos_token_id' lists %d ids, more than %d", path, cJSON_GetArraySize(e),
                           TT_HF_MAX_EOS);
        for (const cJSON *x = e->child; x && !rc; x = x->next) rc = eos_id(x, path, vocab_size, &g->eos_token_ids[g->n_eos++]);
    } else if (e && !cJSON_IsNull(e)) {
        rc = eos_id(e, path, vocab_size, &g->eos_token_ids[0]);
        g->n_eos = 1;
    }
    cJSON_Delete(j);
    if (rc) g->n_eos = 0;
    return rc;
}

/* <dir>/<name>; -1 + error when it does not fit */
static tt_err path_in(char *buf, size_t cap, const char *dir, const char *name)
{
    return snprintf(buf, cap, "%s/%s", dir, name) >= (int)cap ? tt_errorf("%s: path too long", dir) : 0;
}

tt_err tt_hf_generation_config_read(const char *dir, int vocab_size, tt_hf_generation_config *g)
{
    memset(g, 0, sizeof *g);
    char path[4200];
    struct stat st;
    if (path_in(path, sizeof path, dir, "generation_config.json")) return -1;
    if (stat(path, &st) != 0 && errno == ENOENT) return 0;
    size_t len;
    char *text = tt_read_file(path, 1u << 20, &len);
    if (!text) return -1;
    tt_err rc = tt_hf_generation_config_parse(text, len, path, vocab_size, g);
    free(text);
    return rc;
}

static void add_id(tt_hf_end_of_turn *e, int id)
{
    if (id < 0) return;
    for (int i = 0; i < e->n; i++)
        if (e->ids[i] == id) return;
    if (e->n < TT_HF_MAX_END_OF_TURN) e->ids[e->n++] = id; /* never full: the sources hold at most that many */
}

/* the id of tokenizer_config.json's eos_token, or -1 when the folder names none */
static tt_err tokenizer_config_eos(const char *dir, const tt_tokenizer *tk, int *id)
{
    *id = -1;
    tt_chat_specials sp;
    if (tt_chat_specials_from_hf_dir(dir, &sp)) return -1;
    tt_err rc = 0;
    if (sp.eos && (*id = tt_tokenizer_token_id(tk, sp.eos)) < 0)
        rc = tt_errorf("%s/tokenizer_config.json: key 'eos_token': \"%.60s\" is not a token of the model's tokenizer",
                       dir, sp.eos);
    tt_chat_specials_free(&sp);
    return rc;
}

tt_err tt_hf_end_of_turn_ids(const char *dir, const tt_hf_config *cfg, const tt_tokenizer *tk, tt_hf_end_of_turn *out)
{
    memset(out, 0, sizeof *out);
    if (dir) {
        tt_hf_generation_config g;
        int tc_eos;
        if (tt_hf_generation_config_read(dir, cfg ? cfg->model.vocab_size : 0, &g) ||
            tokenizer_config_eos(dir, tk, &tc_eos))
            return -1;
        for (int i = 0; i < g.n_eos; i++) add_id(out, g.eos_token_ids[i]);
        for (int i = 0; cfg && i < cfg->n_eos; i++) add_id(out, cfg->eos_token_ids[i]);
        add_id(out, tc_eos);
    }
    add_id(out, tt_tokenizer_eos_id(tk));
    return 0;
}

char *tt_hf_generation_config_json(const char *dir, int bos_token_id, const tt_hf_end_of_turn *eot)
{
    char path[4200];
    int missing = 1;
    cJSON *j = NULL;
    if (dir && (path_in(path, sizeof path, dir, "generation_config.json") ||
                (!(j = tt_hf_json_read_object(path, 1u << 20, &missing)) && !missing)))
        return NULL;
    if (!j) { /* what transformers writes from a model's config */
        j = cJSON_CreateObject();
        if (j) cJSON_AddTrueToObject(j, "_from_model_config");
        if (j && bos_token_id >= 0) cJSON_AddNumberToObject(j, "bos_token_id", bos_token_id);
    }
    cJSON *e = eot->n == 1 ? cJSON_CreateNumber(eot->ids[0]) : eot->n > 1 ? cJSON_CreateIntArray(eot->ids, eot->n) : NULL;
    if (j && e) {
        if (cJSON_GetObjectItemCaseSensitive(j, "eos_token_id")) cJSON_ReplaceItemInObjectCaseSensitive(j, "eos_token_id", e);
        else cJSON_AddItemToObject(j, "eos_token_id", e);
    } else {
        cJSON_Delete(e);
    }
    char *text = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!text) tt_errorf("out of memory");
    return text;
}
