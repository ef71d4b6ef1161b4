/* peft.c — PEFT's LoRA adapter_config.json, read and written from one table
 * of every field PEFT's LoraConfig has (as of PEFT 0.21) with what titan does
 * with it; PEFT's target-module match and its saved tensor names. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hf/peft.h"
#include "formats/safetensors.h" /* tt_read_file, tt_write_file_atomic, tt_utf8_invalid_at, tt_mkdir_p */

#define CONFIG_FILE "adapter_config.json"
/* target_modules as PEFT saves "all-linear" is every linear's full name: a few hundred in a big model */
#define CONFIG_LIMIT ((size_t)16 << 20)
#define PREFIX "base_model.model."

typedef enum {
    R_OWN,   /* titan's own: read by read_own_fields and written from the config */
    R_ANY,   /* harmless at any value (metadata, or an initialisation that only acts through init_lora_weights) */
    R_NULL,  /* titan does not honour it: null or absent only */
    R_EMPTY, /* null, [] or {} only */
    R_FALSE, /* false, null or absent only */
} field_rule;

typedef struct {
    const char *name;
    field_rule rule;
    /* its JSON as titan writes it (PEFT's default); NULL: not written (a field newer than PEFT 0.17, which
       an older PEFT would warn about, or for R_OWN fields one written from the config) */
    const char *write;
    const char *why; /* what a set value asks of titan, for R_NULL, R_EMPTY and R_FALSE */
} peft_field;

/* Sorted by name: looked up with bsearch, written in this order (PEFT writes with sort_keys=True). */
static const peft_field fields[] = {
    {"alora_invocation_tokens", R_NULL, NULL, "activated LoRA (aLoRA) is not supported"},
    {"alpha_pattern", R_EMPTY, "{}", "per-module alphas are not supported (titan has one lora_alpha)"},
    {"arrow_config", R_NULL, NULL, "Arrow routing between LoRA adapters is not supported"},
    {"auto_mapping", R_ANY, "null", NULL},
    {"base_model_name_or_path", R_OWN, NULL, NULL},
    {"bias", R_OWN, "\"none\"", NULL},
    {"corda_config", R_ANY, "null", NULL},
    {"ensure_weight_tying", R_ANY, NULL, NULL},
    {"eva_config", R_ANY, "null", NULL},
    {"exclude_modules", R_EMPTY, "null", "excluding modules from target_modules is not supported"},
    {"fan_in_fan_out", R_OWN, NULL, NULL},
    {"inference_mode", R_ANY, "true", NULL},
    {"init_lora_weights", R_OWN, "true", NULL},
    {"kasa_config", R_NULL, NULL, "KaSA is not supported"},
    {"layer_replication", R_NULL, "null", "layer replication is not supported"},
    {"layers_pattern", R_NULL, "null", "adapting only some layers is not supported"},
    /* [] too: PEFT before 0.18 reads an empty list as "no layer" */
    {"layers_to_transform", R_NULL, "null", "adapting only some layers is not supported"},
    {"loftq_config", R_EMPTY, "{}", "LoftQ (an adapter for a quantized, changed base) is not supported"},
    {"lora_alpha", R_OWN, NULL, NULL},
    {"lora_bias", R_FALSE, "false", "a bias on lora_B is not supported"},
    {"lora_dropout", R_OWN, NULL, NULL},
    {"lora_ga_config", R_ANY, NULL, NULL},
    {"megatron_config", R_EMPTY, "null", "Megatron's parallel layers are not supported"},
    {"megatron_core", R_ANY, "\"megatron.core\"", NULL},
    {"modules_to_save", R_EMPTY, "null", "titan trains and saves the LoRA adapters only, not whole modules"},
    {"monteclora_config", R_NULL, NULL, "MonteCLoRA is not supported"},
    {"peft_type", R_OWN, "\"LORA\"", NULL},
    {"peft_version", R_ANY, NULL, NULL},
    {"qalora_group_size", R_ANY, "16", NULL},
    {"r", R_OWN, NULL, NULL},
    {"rank_pattern", R_EMPTY, "{}", "per-module ranks are not supported (titan has one r)"},
    {"revision", R_ANY, "null", NULL},
    {"runtime_config", R_ANY, NULL, NULL},
    {"target_modules", R_OWN, NULL, NULL},
    {"target_parameters", R_EMPTY, "null", "LoRA on parameters (target_parameters) is not supported"},
    {"task_type", R_OWN, "\"CAUSAL_LM\"", NULL},
    {"trainable_token_indices", R_NULL, "null", "trainable tokens are not supported"},
    {"use_bdlora", R_NULL, NULL, "block-diagonal LoRA is not supported"},
    {"use_dora", R_FALSE, "false", "DoRA (weight-decomposed LoRA) is not supported"},
    {"use_qalora", R_FALSE, "false", "QA-LoRA is not supported"},
    {"use_rslora", R_OWN, NULL, NULL},
    {"velora_config", R_NULL, NULL, "VeLoRA is not supported"},
};
#define N_FIELDS ((int)(sizeof fields / sizeof fields[0]))

static int field_cmp(const void *key, const void *f) { return strcmp(key, ((const peft_field *)f)->name); }
static const peft_field *field_of(const char *name)
{
    return bsearch(name, fields, (size_t)N_FIELDS, sizeof fields[0], field_cmp);
}

/* A value for a message: its JSON, cut at 80 bytes. */
static const char *snip(const cJSON *v, char buf[96])
{
    if (cJSON_IsNumber(v) && !isfinite(v->valuedouble)) { /* cJSON would print it as null */
        snprintf(buf, 96, "%g", v->valuedouble);
        return buf;
    }
    char *t = cJSON_PrintUnformatted(v);
    if (!t) return "?";
    if (strlen(t) > 80) memcpy(t + 77, "...", 4);
    snprintf(buf, 96, "%s", t);
    free(t);
    return buf;
}

static int is_null(const cJSON *v) { return !v || cJSON_IsNull(v); }
static int is_empty(const cJSON *v)
{
    return is_null(v) || ((cJSON_IsArray(v) || cJSON_IsObject(v)) && !v->child);
}
/* What a field left at PEFT's default looks like, for a field titan does not know. */
static int default_like(const cJSON *v)
{
    return is_empty(v) || cJSON_IsFalse(v) || (cJSON_IsString(v) && !v->valuestring[0]);
}

/* ---- reading ------------------------------------------------------------- */
/* Python's json takes the last of duplicate keys and cJSON the first: refuse them, so both read one config. */
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static tt_err check_unique_keys(const cJSON *j, const char *what)
{
    int n = cJSON_GetArraySize(j);
    const char **keys = malloc(sizeof *keys * (size_t)(n > 0 ? n : 1));
    if (!keys) return tt_errorf("%s: out of memory", what);
    int k = 0;
    for (const cJSON *c = j->child; c && k < n; c = c->next) keys[k++] = c->string;
    qsort(keys, (size_t)k, sizeof *keys, cmp_str);
    tt_err rc = 0;
    for (int i = 1; i < k && !rc; i++)
        if (!strcmp(keys[i - 1], keys[i])) rc = tt_errorf("%s: field '%s' appears twice", what, keys[i]);
    free(keys);
    return rc;
}

/* Every field but titan's own against its rule, in file order (the first offender is named). */
static tt_err check_rules(const cJSON *j, const char *what)
{
    char b[96];
    for (const cJSON *v = j->child; v; v = v->next) {
        const peft_field *f = field_of(v->string);
        if (!f) {
            if (default_like(v)) continue;
            return tt_errorf("%s: field '%s' is %s, which titan does not know (it reads the LoRA fields of "
                             "PEFT up to 0.21, and an unknown field only when null, false or empty)",
                             what, v->string, snip(v, b));
        }
        int ok = f->rule == R_OWN || f->rule == R_ANY || (f->rule == R_NULL && is_null(v)) ||
                 (f->rule == R_EMPTY && is_empty(v)) || (f->rule == R_FALSE && (is_null(v) || cJSON_IsFalse(v)));
        if (!ok) return tt_errorf("%s: field '%s' is %s: %s", what, f->name, snip(v, b), f->why);
    }
    return 0;
}

static const cJSON *get(const cJSON *j, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return is_null(v) ? NULL : v;
}

static tt_err read_bool(const cJSON *j, const char *what, const char *key, int *out)
{
    const cJSON *v = get(j, key);
    char b[96];
    if (v && !cJSON_IsBool(v)) return tt_errorf("%s: field '%s' is %s: must be true or false", what, key, snip(v, b));
    *out = cJSON_IsTrue(v);
    return 0;
}

/* A list longer than TT_PEFT_MAX_TARGETS: PEFT saves an "all-linear" adapter with every adapted module's full name
 * (224 for an 8B Llama). Kept as the set of their last names ("q_proj", ...): the adapter's tensors say which modules
 * it adapts, so the list only names kinds. (Called with a list already checked name by name: strings, none
 * "all-linear", each shorter than a target.) */
static tt_err last_names(const cJSON *v, const char *what, tt_peft_config *o)
{
    /* the full names read so far are replaced whole: no byte of one left after a shorter last name's end, so the
     * config is the same as when its last names are read (an export's, written back) */
    memset(o->targets, 0, sizeof o->targets);
    o->n_targets = 0;
    for (const cJSON *t = v->child; t; t = t->next) {
        const char *dot = strrchr(t->valuestring, '.'), *s = dot ? dot + 1 : t->valuestring;
        int dup = 0;
        for (int i = 0; i < o->n_targets && !dup; i++) dup = !strcmp(o->targets[i], s);
        if (dup) continue;
        if (!s[0] || !strcasecmp(s, "all-linear"))
            return tt_errorf("%s: field 'target_modules' has more than %d names, and '%.60s' has no last name a "
                             "module can have", what, TT_PEFT_MAX_TARGETS, t->valuestring);
        if (o->n_targets == TT_PEFT_MAX_TARGETS)
            return tt_errorf("%s: field 'target_modules' has more than %d names, and more than %d kinds of module "
                             "by their last names (titan's TT_PEFT_MAX_TARGETS)",
                             what, TT_PEFT_MAX_TARGETS, TT_PEFT_MAX_TARGETS);
        snprintf(o->targets[o->n_targets++], sizeof o->targets[0], "%s", s);
    }
    return 0;
}

/* One of PEFT's names for the initialisation; those that change the base or freeze B are refused. */
static tt_err read_init(const cJSON *j, const char *what)
{
    const cJSON *v = get(j, "init_lora_weights");
    if (!v || cJSON_IsBool(v)) return 0;
    char b[96];
    const char *s = cJSON_IsString(v) ? v->valuestring : "";
    if (!strcasecmp(s, "gaussian") || !strcmp(s, "orthogonal") || !strcmp(s, "eva")) return 0; /* A and B only */
    const char *why = "not an initialisation titan knows (true, false, \"gaussian\", \"orthogonal\", \"eva\")";
    if (!strncasecmp(s, "pissa", 5) || !strcasecmp(s, "olora") || !strcasecmp(s, "corda") ||
        !strcasecmp(s, "loftq") || !strcasecmp(s, "lora_ga"))
        why = "it changes the base weights, so the adapter applies only to PEFT's changed base (save it with "
              "path_initial_model_for_weight_conversion for a plain LoRA adapter)";
    else if (!strcasecmp(s, "mica"))
        why = "MiCA freezes lora_B, which titan would train";
    return tt_errorf("%s: field 'init_lora_weights' is %s: %s", what, snip(v, b), why);
}

static tt_err read_targets(const cJSON *j, const char *what, tt_peft_config *o)
{
    const cJSON *v = get(j, "target_modules");
    char b[96];
    if (!v) return tt_errorf("%s: field 'target_modules' is missing (or null): titan needs the modules' names", what);
    if (cJSON_IsString(v)) {
        if (!strcasecmp(v->valuestring, "all-linear")) {
            o->all_linear = 1;
            return 0;
        }
        return tt_errorf("%s: field 'target_modules' is %s: a string is a regular expression to PEFT, which "
                         "titan does not match; give a list of module names, or \"all-linear\"",
                         what, snip(v, b));
    }
    if (!cJSON_IsArray(v)) return tt_errorf("%s: field 'target_modules' is %s: must be a list of module names or "
                                            "\"all-linear\"", what, snip(v, b));
    if (!v->child) return tt_errorf("%s: field 'target_modules' is []: titan needs at least one module", what);
    /* every name checked before any is kept: a list past the limit is read again by its last names */
    for (const cJSON *t = v->child; t; t = t->next) {
        if (!cJSON_IsString(t) || !t->valuestring[0])
            return tt_errorf("%s: field 'target_modules' has %s: each must be a module name", what, snip(t, b));
        if (!strcasecmp(t->valuestring, "all-linear"))
            return tt_errorf("%s: field 'target_modules' has \"all-linear\" in a list, where PEFT reads it as a "
                             "module's name; write it as the string \"all-linear\"", what);
        if (strlen(t->valuestring) >= sizeof o->targets[0])
            return tt_errorf("%s: field 'target_modules' has %s: longer than %zu bytes", what, snip(t, b),
                             sizeof o->targets[0] - 1);
    }
    for (const cJSON *t = v->child; t; t = t->next) {
        const char *s = t->valuestring;
        int dup = 0;
        for (int i = 0; i < o->n_targets && !dup; i++) dup = !strcmp(o->targets[i], s);
        if (dup) continue; /* PEFT keeps a set */
        if (o->n_targets == TT_PEFT_MAX_TARGETS) return last_names(v, what, o);
        snprintf(o->targets[o->n_targets++], sizeof o->targets[0], "%s", s);
    }
    return 0;
}

/* peft_type, task_type, r, lora_alpha, lora_dropout, bias, the two flags, target_modules, base model. */
static tt_err read_own_fields(const cJSON *j, const char *what, tt_peft_config *o)
{
    char b[96];
    const cJSON *v = get(j, "task_type");
    if (v && !(cJSON_IsString(v) && !strcmp(v->valuestring, "CAUSAL_LM")))
        return tt_errorf("%s: field 'task_type' is %s: titan trains causal language models (CAUSAL_LM)", what,
                         snip(v, b));

    if (!(v = get(j, "r"))) return tt_errorf("%s: field 'r' is missing (or null)", what);
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d == floor(d) && d >= 1 && d <= INT_MAX))
        return tt_errorf("%s: field 'r' is %s: must be an integer in [1, %d]", what, snip(v, b), INT_MAX);
    o->r = (int)d;

    if (!(v = get(j, "lora_alpha"))) return tt_errorf("%s: field 'lora_alpha' is missing (or null)", what);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return tt_errorf("%s: field 'lora_alpha' is %s: must be a finite number", what, snip(v, b));
    o->alpha = v->valuedouble;

    if ((v = get(j, "lora_dropout"))) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble < 1))
            return tt_errorf("%s: field 'lora_dropout' is %s: must be a number in [0, 1)", what, snip(v, b));
        o->dropout = v->valuedouble;
    }
    if ((v = get(j, "bias")) && !(cJSON_IsString(v) && !strcmp(v->valuestring, "none")))
        return tt_errorf("%s: field 'bias' is %s: titan trains no biases (bias \"none\")", what, snip(v, b));
    if (read_bool(j, what, "use_rslora", &o->use_rslora) || read_bool(j, what, "fan_in_fan_out", &o->fan_in_fan_out) ||
        read_init(j, what) || read_targets(j, what, o))
        return -1;

    if ((v = get(j, "base_model_name_or_path"))) {
        if (!cJSON_IsString(v))
            return tt_errorf("%s: field 'base_model_name_or_path' is %s: must be a string or null", what, snip(v, b));
        if (strlen(v->valuestring) >= sizeof o->base_model)
            return tt_errorf("%s: field 'base_model_name_or_path' is %zu bytes, more than %zu", what,
                             strlen(v->valuestring), sizeof o->base_model - 1);
        snprintf(o->base_model, sizeof o->base_model, "%s", v->valuestring);
    }
    return 0;
}

static tt_err parse_object(const cJSON *j, const char *what, tt_peft_config *o)
{
    char b[96];
    if (!cJSON_IsObject(j)) return tt_errorf("%s: not a JSON object", what);
    if (check_unique_keys(j, what)) return -1;
    /* the type first: another PEFT type's fields would otherwise be named as unknown */
    const cJSON *v = get(j, "peft_type");
    if (!v) return tt_errorf("%s: field 'peft_type' is missing (or null): titan reads LoRA adapters (\"LORA\")", what);
    if (!cJSON_IsString(v) || strcmp(v->valuestring, "LORA"))
        return tt_errorf("%s: field 'peft_type' is %s: titan reads LoRA adapters only (peft_type \"LORA\"), not "
                         "other PEFT methods", what, snip(v, b));
    return check_rules(j, what) || read_own_fields(j, what, o) ? -1 : 0;
}

tt_err tt_peft_config_parse(const char *json, size_t len, const char *what, tt_peft_config *out)
{
    memset(out, 0, sizeof *out);
    if (!what) what = CONFIG_FILE;
    if (!json) return tt_errorf("%s: no text", what);
    const char *nul = memchr(json, 0, len);
    if (nul) return tt_errorf("%s: has a NUL byte at %zu", what, (size_t)(nul - json));
    size_t bad = tt_utf8_invalid_at(json, len);
    if (bad < len) return tt_errorf("%s: not valid UTF-8 at byte %zu", what, bad);
    char *text = malloc(len + 1);
    if (!text) return tt_errorf("%s: out of memory", what);
    memcpy(text, json, len);
    text[len] = 0;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(text, &end, 1); /* 1: nothing but white space after the object */
    size_t at = end ? (size_t)(end - text) : 0;
    free(text);
    if (!j) return tt_errorf("%s: not valid JSON (at byte %zu)", what, at);
    tt_err rc = parse_object(j, what, out);
    cJSON_Delete(j);
    if (rc) memset(out, 0, sizeof *out);
    return rc;
}

tt_err tt_peft_config_read(const char *dir, tt_peft_config *out)
{
    memset(out, 0, sizeof *out);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, CONFIG_FILE) >= (int)sizeof path)
        return tt_errorf("%s: path too long", dir);
    size_t len = 0;
    char *text = tt_read_file(path, CONFIG_LIMIT, &len);
    if (!text) return -1;
    tt_err rc = tt_peft_config_parse(text, len, path, out);
    free(text);
    return rc;
}

/* ---- writing ------------------------------------------------------------- */
/* A number as Python writes it: the shortest decimal that reads back as exactly x; a whole number as an
 * int (lora_alpha's type) is 32, as a float (lora_dropout's) 0.0. Raw text: cJSON's own printing keeps 15
 * digits whenever they read back within an epsilon, which is another number. */
static cJSON *number(double x, int as_float)
{
    char buf[40];
    if (x == floor(x) && fabs(x) < 1e15) snprintf(buf, sizeof buf, as_float ? "%.1f" : "%.0f", x);
    else
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, x);
            if (strtod(buf, NULL) == x) break;
        }
    return cJSON_CreateRaw(buf);
}

static cJSON *own_value(const char *name, const tt_peft_config *c)
{
    if (!strcmp(name, "r")) return cJSON_CreateNumber(c->r);
    if (!strcmp(name, "lora_alpha")) return number(c->alpha, 0);
    if (!strcmp(name, "lora_dropout")) return number(c->dropout, 1);
    if (!strcmp(name, "use_rslora")) return cJSON_CreateBool(c->use_rslora);
    if (!strcmp(name, "fan_in_fan_out")) return cJSON_CreateBool(c->fan_in_fan_out);
    if (!strcmp(name, "base_model_name_or_path"))
        return c->base_model[0] ? cJSON_CreateString(c->base_model) : cJSON_CreateNull();
    if (c->all_linear) return cJSON_CreateString("all-linear"); /* target_modules */
    cJSON *list = cJSON_CreateArray();
    for (int i = 0; list && i < c->n_targets; i++)
        if (!cJSON_AddItemToArray(list, cJSON_CreateString(c->targets[i]))) {
            cJSON_Delete(list);
            return NULL;
        }
    return list;
}

/* c is a config parse could have returned: what parse refuses, write refuses too. */
static tt_err check_config(const tt_peft_config *c)
{
    if (c->r < 1) return tt_errorf("field 'r' is %d: must be >= 1", c->r);
    if (!isfinite(c->alpha)) return tt_errorf("field 'lora_alpha' is %g: must be finite", c->alpha);
    if (!(c->dropout >= 0 && c->dropout < 1)) return tt_errorf("field 'lora_dropout' is %g: must be in [0, 1)", c->dropout);
    if (c->all_linear ? c->n_targets != 0 : c->n_targets < 1 || c->n_targets > TT_PEFT_MAX_TARGETS)
        return tt_errorf("field 'target_modules': %d names%s (1 to %d, or all_linear and none)", c->n_targets,
                         c->all_linear ? " with all_linear" : "", TT_PEFT_MAX_TARGETS);
    for (int i = 0; i < c->n_targets; i++) {
        const char *s = c->targets[i];
        size_t n = strnlen(s, sizeof c->targets[i]);
        if (n == 0 || n == sizeof c->targets[i] || tt_utf8_invalid_at(s, n) < n || !strcasecmp(s, "all-linear"))
            return tt_errorf("field 'target_modules': name %d is empty, not NUL-terminated, not UTF-8 or "
                             "\"all-linear\"", i);
        for (int k = 0; k < i; k++)
            if (!strcmp(c->targets[k], s)) return tt_errorf("field 'target_modules': '%s' twice", s);
    }
    size_t n = strnlen(c->base_model, sizeof c->base_model);
    if (n == sizeof c->base_model || tt_utf8_invalid_at(c->base_model, n) < n)
        return tt_errorf("field 'base_model_name_or_path': not NUL-terminated or not valid UTF-8");
    return 0;
}

static char *to_json(const tt_peft_config *c)
{
    if (check_config(c)) return NULL;
    cJSON *j = cJSON_CreateObject();
    int ok = j != NULL;
    for (int i = 0; ok && i < N_FIELDS; i++) { /* in the table's order: sorted, as PEFT writes */
        const peft_field *f = &fields[i];
        if (f->rule != R_OWN && !f->write) continue;
        ok = cJSON_AddItemToObject(j, f->name, f->write ? cJSON_CreateRaw(f->write) : own_value(f->name, c));
    }
    char *text = ok ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!text) tt_errorf("out of memory");
    return text;
}

char *tt_peft_config_to_json(const tt_peft_config *c)
{
    char *text = to_json(c);
    if (!text) tt_error_prefix(CONFIG_FILE ": ");
    return text;
}

tt_err tt_peft_config_write(const char *dir, const tt_peft_config *c)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, CONFIG_FILE) >= (int)sizeof path)
        return tt_errorf("%s: path too long", dir);
    char *text = to_json(c);
    if (!text) return tt_error_prefix("%s: ", path);
    tt_err rc = tt_mkdir_p(dir);
    if (!rc) rc = tt_write_file_atomic(path, text, strlen(text));
    free(text);
    return rc;
}

/* ---- target modules and tensor names ------------------------------------ */
int tt_peft_match(const tt_peft_config *c, const char *module)
{
    size_t n = strlen(module);
    int count = c->n_targets < 0 ? 0 : c->n_targets > TT_PEFT_MAX_TARGETS ? TT_PEFT_MAX_TARGETS : c->n_targets;
    for (int i = 0; i < count; i++) {
        const char *t = c->targets[i];
        size_t k = strnlen(t, sizeof c->targets[i]);
        if (k == 0 || k > n) continue;
        if ((k == n || module[n - k - 1] == '.') && !memcmp(module + n - k, t, k)) return i;
    }
    return -1;
}

/* A module's name: non-empty, no empty component ("a..b", a leading or trailing dot). */
static int module_ok(const char *s, size_t n)
{
    if (n == 0 || s[0] == '.' || s[n - 1] == '.') return 0;
    for (size_t i = 1; i < n; i++)
        if (s[i] == '.' && s[i - 1] == '.') return 0;
    return 1;
}

tt_err tt_peft_tensor_name(const char *module, int b, char *out, size_t cap)
{
    if (cap) out[0] = 0;
    if (b != 0 && b != 1) return tt_errorf("module '%.200s': adapter half %d is not 0 (lora_A) or 1 (lora_B)", module, b);
    if (!module_ok(module, strlen(module)))
        return tt_errorf("module '%.200s': not a module name (empty, or an empty component)", module);
    int n = snprintf(out, cap, PREFIX "%s.lora_%c.weight", module, b ? 'B' : 'A');
    if (n < 0 || (size_t)n >= cap) {
        if (cap) out[0] = 0;
        return tt_errorf("module '%.200s': its lora_%c tensor name is %d bytes, more than %zu", module, b ? 'B' : 'A',
                         n, cap ? cap - 1 : 0);
    }
    return 0;
}

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

tt_err tt_peft_tensor_parse(const char *name, char *module, size_t cap, int *b)
{
    if (cap) module[0] = 0;
    size_t n = strlen(name), p = strlen(PREFIX), s = strlen(".lora_A.weight");
    int half = ends_with(name, n, ".lora_A.weight") ? 0 : ends_with(name, n, ".lora_B.weight") ? 1 : -1;
    if (half < 0 || n < p + s || memcmp(name, PREFIX, p) || !module_ok(name + p, n - p - s)) {
        const char *hint = "";
        if (strstr(name, "lora_magnitude_vector")) hint = ": DoRA's magnitude vector (DoRA is not supported)";
        else if (strstr(name, "lora_embedding_")) hint = ": an embedding's adapter (titan adapts linear layers)";
        else if (ends_with(name, n, ".bias")) hint = ": a bias (lora_bias is not supported)";
        else if (strstr(name, ".lora_A.") || strstr(name, ".lora_B."))
            hint = ": the adapter's name left in, or another prefix than PEFT's";
        return tt_errorf("tensor '%.300s': not a LoRA weight as PEFT saves it (" PREFIX
                         "<module>.lora_A.weight or .lora_B.weight)%s", name, hint);
    }
    size_t m = n - p - s;
    if (m >= cap) return tt_errorf("tensor '%.300s': module name of %zu bytes, more than %zu", name, m, cap ? cap - 1 : 0);
    memcpy(module, name + p, m);
    module[m] = 0;
    *b = half;
    return 0;
}
