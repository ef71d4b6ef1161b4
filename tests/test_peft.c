/* test_peft.c — PEFT's adapter_config.json: a config as PEFT writes it reads
 * as the file says; each field titan does not honour is refused naming the
 * file, the field and its value; write -> read gives the config back; PEFT's
 * target-module match and tensor names. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hf/peft.h"

#define FIXTURE TITAN_SOURCE_DIR "/tests/fixtures/peft"
#define WHAT "x/adapter_config.json"
#define HAS(needle) (strstr(tt_last_error(), needle) != NULL)

static cJSON *fixture(void)
{
    char *text = th_read_file(FIXTURE "/adapter_config.json", NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!j) {
        fprintf(stderr, "cannot read %s\n", FIXTURE "/adapter_config.json");
        exit(1);
    }
    return j;
}

static tt_err parse_json(const cJSON *j, tt_peft_config *c)
{
    char *text = cJSON_Print(j);
    tt_err rc = tt_peft_config_parse(text, strlen(text), WHAT, c);
    free(text);
    return rc;
}

/* The fixture with key set to value (JSON text), or removed (value NULL), parsed. */
static tt_err variant(const char *key, const char *value, tt_peft_config *c)
{
    cJSON *j = fixture();
    cJSON_DeleteItemFromObjectCaseSensitive(j, key);
    if (value) {
        cJSON *v = cJSON_Parse(value);
        if (!v) {
            fprintf(stderr, "bad test value %s\n", value);
            exit(1);
        }
        cJSON_AddItemToObject(j, key, v);
    }
    tt_err rc = parse_json(j, c);
    cJSON_Delete(j);
    return rc;
}

/* The fixture reads as what the file holds (the expected values come from the file itself). */
static void test_fixture(void)
{
    tt_peft_config c;
    tt_err rc = tt_peft_config_read(FIXTURE, &c);
    CHECK_MSG(rc == 0, "%s", tt_last_error());
    if (rc) return;
    cJSON *j = fixture();
    CHECK(c.r == cJSON_GetObjectItem(j, "r")->valueint);
    CHECK(c.alpha == cJSON_GetObjectItem(j, "lora_alpha")->valuedouble);
    CHECK(c.dropout == cJSON_GetObjectItem(j, "lora_dropout")->valuedouble && c.dropout > 0);
    CHECK(c.use_rslora == cJSON_IsTrue(cJSON_GetObjectItem(j, "use_rslora")));
    CHECK(c.fan_in_fan_out == cJSON_IsTrue(cJSON_GetObjectItem(j, "fan_in_fan_out")));
    CHECK(!strcmp(c.base_model, cJSON_GetObjectItem(j, "base_model_name_or_path")->valuestring));
    const cJSON *t = cJSON_GetObjectItem(j, "target_modules");
    CHECK(!c.all_linear && c.n_targets == cJSON_GetArraySize(t) && c.n_targets > 1);
    for (int i = 0; i < c.n_targets && i < cJSON_GetArraySize(t); i++)
        CHECK(!strcmp(c.targets[i], cJSON_GetArrayItem(t, i)->valuestring));
    cJSON_Delete(j);

    CHECK(tt_peft_config_read(TITAN_SOURCE_DIR "/tests/fixtures", &c) != 0 && HAS("fixtures/adapter_config.json") &&
          HAS("cannot open"));
}

/* key = value (JSON; NULL: the key removed), what the message says, and how it shows the value
 * (NULL: as cJSON prints it, cut to 60 bytes; "": not at all) */
typedef struct { const char *key, *value, *says, *shown; } field_case;

/* Each refusal names the file, the field, the value where there is one, and why. */
static void test_refusals(void)
{
    static const field_case refused[] = {
        {"peft_type", "\"IA3\"", "titan reads LoRA adapters only", NULL},
        {"peft_type", "\"LOHA\"", "LOHA", NULL},
        {"peft_type", "\"LOKR\"", "LOKR", NULL},
        {"peft_type", "\"ADALORA\"", "ADALORA", NULL},
        {"peft_type", "\"VERA\"", "VERA", NULL},
        {"peft_type", "\"lora\"", "\"LORA\"", NULL},
        {"peft_type", NULL, "missing", NULL},
        {"use_dora", "true", "DoRA", NULL},
        {"bias", "\"all\"", "titan trains no biases", NULL},
        {"bias", "\"lora_only\"", "\"lora_only\"", NULL},
        {"modules_to_save", "[\"lm_head\"]", "not whole modules", NULL},
        {"layers_to_transform", "[0, 1]", "only some layers", NULL},
        {"layers_to_transform", "[]", "only some layers", NULL},
        {"layers_to_transform", "3", "only some layers", NULL},
        {"layers_pattern", "\"layers\"", "only some layers", NULL},
        {"rank_pattern", "{\"q_proj\": 8}", "per-module ranks", NULL},
        {"alpha_pattern", "{\"q_proj\": 8}", "per-module alphas", NULL},
        {"target_parameters", "[\"mlp.experts.gate_up_proj\"]", "target_parameters", NULL},
        {"exclude_modules", "[\"k_proj\"]", "excluding modules", NULL},
        {"exclude_modules", "\".*k_proj\"", "excluding modules", NULL},
        {"trainable_token_indices", "[1, 2]", "trainable tokens", NULL},
        {"layer_replication", "[[0, 2], [1, 3]]", "layer replication", NULL},
        {"megatron_config", "{\"num_layers\": 2}", "Megatron", NULL},
        {"loftq_config", "{\"loftq_bits\": 4}", "LoftQ", NULL},
        {"use_qalora", "true", "QA-LoRA", NULL},
        {"lora_bias", "true", "bias on lora_B", NULL},
        {"alora_invocation_tokens", "[5, 6]", "aLoRA", NULL},
        {"velora_config", "{}", "VeLoRA", NULL},
        {"use_bdlora", "{\"target_modules_bd_a\": []}", "block-diagonal", NULL},
        {"init_lora_weights", "\"pissa\"", "changes the base weights", NULL},
        {"init_lora_weights", "\"pissa_niter_4\"", "changes the base weights", NULL},
        {"init_lora_weights", "\"olora\"", "changes the base weights", NULL},
        {"init_lora_weights", "\"loftq\"", "changes the base weights", NULL},
        {"init_lora_weights", "\"mica\"", "freezes lora_B", NULL},
        {"init_lora_weights", "\"kaiming\"", "not an initialisation titan knows", NULL},
        {"task_type", "\"SEQ_CLS\"", "causal language models", NULL},
        {"use_foo", "true", "which titan does not know", NULL},
        {"use_foo", "16", "which titan does not know", NULL},
        {"r", "0", "integer in [1,", NULL},
        {"r", "-4", "integer in [1,", NULL},
        {"r", "8.5", "integer in [1,", NULL},
        {"r", "\"8\"", "integer in [1,", NULL},
        {"r", "3e9", "integer in [1,", NULL},
        {"r", NULL, "missing", NULL},
        {"r", "null", "missing", NULL},
        {"lora_alpha", "\"16\"", "finite number", NULL},
        {"lora_alpha", NULL, "missing", NULL},
        {"lora_dropout", "1.0", "[0, 1)", NULL},
        {"lora_dropout", "-0.1", "[0, 1)", NULL},
        {"lora_dropout", "\"0.1\"", "[0, 1)", NULL},
        {"use_rslora", "1", "true or false", NULL},
        {"fan_in_fan_out", "\"yes\"", "true or false", NULL},
        {"target_modules", "\".*(q|v)_proj\"", "regular expression", NULL},
        {"target_modules", "[]", "at least one", NULL},
        {"target_modules", "[\"q_proj\", 3]", "module name", "has 3"},
        {"target_modules", "[\"\"]", "module name", "has \"\""},
        {"target_modules", "[\"all-linear\"]", "in a list", "\"all-linear\""},
        {"target_modules", "{\"q_proj\": 1}", "list of module names", NULL},
        {"target_modules", NULL, "missing", NULL},
        {"target_modules",
         "[\"model.layers.0.self_attn.a_very_long_module_name_that_goes_past_sixty_three_bytes\"]", "longer than 63",
         "\"model.layers.0.self_attn.a_very_long"},
        {"base_model_name_or_path", "7", "string or null", NULL},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const field_case *f = &refused[i];
        tt_peft_config c;
        memset(&c, 0xab, sizeof c);
        tt_err rc = variant(f->key, f->value, &c);
        char field[64];
        snprintf(field, sizeof field, "field '%s'", f->key);
        int value_named = 1;
        if (f->value && strcmp(f->value, "null") && !(f->shown && !f->shown[0])) {
            cJSON *v = cJSON_Parse(f->value);
            char *printed = cJSON_PrintUnformatted(v), shown[61];
            snprintf(shown, sizeof shown, "%s", f->shown ? f->shown : printed);
            value_named = HAS(shown);
            free(printed);
            cJSON_Delete(v);
        }
        CHECK_MSG(rc != 0 && HAS(WHAT ": ") && HAS(field) && value_named && HAS(f->says), "%s = %s: %s", f->key,
                  f->value ? f->value : "(absent)", rc ? tt_last_error() : "accepted");
        CHECK(c.r == 0 && c.n_targets == 0); /* nothing half-read is left behind */
    }

    /* 33 different names, and a base model path of 1024 bytes */
    char list[33 * 16 + 8] = "[", path[1100];
    for (int i = 0; i < 33; i++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"m%d\"", i ? "," : "", i);
    strcat(list, "]");
    tt_peft_config c;
    CHECK_MSG(variant("target_modules", list, &c) != 0 && HAS("more than 32 names"), "%s", tt_last_error());
    snprintf(path, sizeof path, "\"%01024d\"", 0);
    CHECK_MSG(variant("base_model_name_or_path", path, &c) != 0 && HAS("1024 bytes"), "%s", tt_last_error());
}

/* Fields whose value PEFT's defaults leave harmless, and spellings PEFT accepts. */
static void test_accepted(void)
{
    static const field_case accepted[] = {
        {"revision", "\"main\"", NULL, NULL},
        {"auto_mapping", "{\"base_model_class\": \"LlamaForCausalLM\"}", NULL, NULL},
        {"inference_mode", "false", NULL, NULL},
        {"init_lora_weights", "false", NULL, NULL},
        {"init_lora_weights", "\"gaussian\"", NULL, NULL},
        {"init_lora_weights", "\"eva\"", NULL, NULL},
        {"eva_config", "{\"rho\": 2.0}", NULL, NULL},
        {"peft_version", "\"0.17.1\"", NULL, NULL},
        {"runtime_config", "{\"ephemeral_gpu_offload\": false}", NULL, NULL},
        {"modules_to_save", "[]", NULL, NULL},
        {"rank_pattern", "null", NULL, NULL},
        {"exclude_modules", "[]", NULL, NULL},
        {"use_dora", "null", NULL, NULL},
        {"task_type", "null", NULL, NULL},
        {"task_type", NULL, NULL, NULL},
        {"bias", NULL, NULL, NULL},
        {"lora_dropout", NULL, NULL, NULL},
        {"base_model_name_or_path", "null", NULL, NULL},
        {"enable_lora", "null", NULL, NULL}, /* fields of old PEFT versions, at their defaults */
        {"merge_weights", "false", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        tt_peft_config c;
        tt_err rc = variant(accepted[i].key, accepted[i].value, &c);
        CHECK_MSG(rc == 0 && c.r > 0 && c.n_targets > 0, "%s = %s: %s", accepted[i].key,
                  accepted[i].value ? accepted[i].value : "(absent)", tt_last_error());
    }
    tt_peft_config c;
    CHECK(variant("lora_dropout", NULL, &c) == 0 && c.dropout == 0);
    CHECK(variant("base_model_name_or_path", "null", &c) == 0 && c.base_model[0] == 0);
    /* "all-linear" as PEFT compares it (lower-cased); duplicates are one target, as in PEFT's set */
    CHECK(variant("target_modules", "\"ALL-Linear\"", &c) == 0 && c.all_linear && c.n_targets == 0);
    CHECK(variant("target_modules", "[\"q_proj\", \"v_proj\", \"q_proj\"]", &c) == 0 && c.n_targets == 2 &&
          !strcmp(c.targets[1], "v_proj"));
    char list[32 * 70 + 8] = "[", name[64];
    memset(name, 'x', 63);
    name[63] = 0;
    for (int i = 0; i < TT_PEFT_MAX_TARGETS; i++) {
        name[0] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef"[i];
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", i ? "," : "", name);
    }
    strcat(list, "]");
    CHECK_MSG(variant("target_modules", list, &c) == 0 && c.n_targets == TT_PEFT_MAX_TARGETS &&
                  strlen(c.targets[31]) == 63,
              "%s", tt_last_error());
    /* PEFT's all-linear as full names, past the limit: the set of their last names */
    char full[80 * 48 + 8] = "[";
    for (int l = 0; l < 40; l++)
        snprintf(full + strlen(full), sizeof full - strlen(full), "%s\"model.layers.%d.self_attn.%s_proj\"",
                 l ? "," : "", l / 2, l % 2 ? "q" : "v");
    strcat(full, "]");
    CHECK_MSG(variant("target_modules", full, &c) == 0 && c.n_targets == 2 && !strcmp(c.targets[0], "v_proj") &&
                  !strcmp(c.targets[1], "q_proj"),
              "%s", tt_last_error());
    /* written (the last names) and read back: the same config, byte for byte (the full names read before the limit
     * left their tails after the last names' ends; the fuzz campaign found it) */
    tt_peft_config back;
    char *text = tt_peft_config_to_json(&c);
    CHECK(text && tt_peft_config_parse(text, strlen(text), "written.json", &back) == 0 && !memcmp(&c, &back, sizeof c));
    free(text);
    /* past the limit, every name is still checked: a number after the 32nd (read as a NULL name before), and a last
     * name "all-linear" (accepted, then not writable) */
    full[strlen(full) - 1] = 0;
    char more[80 * 48 + 64];
    snprintf(more, sizeof more, "%s, 7]", full);
    CHECK_MSG(variant("target_modules", more, &c) != 0 && strstr(tt_last_error(), "each must be a module name"), "%s",
              tt_last_error());
    snprintf(more, sizeof more, "%s, \"model.layers.0.all-linear\"]", full);
    CHECK_MSG(variant("target_modules", more, &c) != 0 && strstr(tt_last_error(), "no last name a module can have"),
              "%s", tt_last_error());
}

/* What is not a config at all. */
static void test_not_json(void)
{
    static const char *const texts[] = {
        "", "[]", "{\"r\": 8", "{\"peft_type\": \"LORA\"} x",
        "{\"peft_type\": \"LORA\", \"use_dora\": false, \"use_dora\": true}",
    };
    static const char *const says[] = {"not valid JSON", "not a JSON object", "not valid JSON", "not valid JSON",
                                       "field 'use_dora' appears twice"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        tt_peft_config c;
        CHECK_MSG(tt_peft_config_parse(texts[i], strlen(texts[i]), WHAT, &c) != 0 && HAS(WHAT) && HAS(says[i]),
                  "%s: %s", texts[i], tt_last_error());
    }
    tt_peft_config c;
    CHECK(tt_peft_config_parse("{\"r\": 8}\0{}", 11, WHAT, &c) != 0 && HAS("NUL byte at 8"));
    CHECK(tt_peft_config_parse("{\"r\": \"\xff\"}", 10, WHAT, &c) != 0 && HAS("not valid UTF-8 at byte 7"));
    /* JSON's 1e999 reads as infinity (cJSON would print it back as null, so it is not a variant above) */
    const char *inf = "{\"peft_type\": \"LORA\", \"r\": 8, \"lora_alpha\": 1e999, \"target_modules\": [\"q\"]}";
    CHECK_MSG(tt_peft_config_parse(inf, strlen(inf), WHAT, &c) != 0 && HAS("field 'lora_alpha'") && HAS("finite number"),
              "%s", tt_last_error());
}

static tt_peft_config sample(void)
{
    tt_peft_config c;
    memset(&c, 0, sizeof c);
    c.r = 12;
    c.alpha = 24.5;
    c.dropout = 0.1;
    c.use_rslora = 1;
    c.fan_in_fan_out = 1;
    c.n_targets = 3;
    strcpy(c.targets[0], "c_attn");
    strcpy(c.targets[1], "mlp.c_fc");
    strcpy(c.targets[2], "we\"ird\\name");
    strcpy(c.base_model, "/models/gpt2 \"small\"");
    return c;
}

static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* Is key's value in the JSON text written exactly as want? */
static int raw_is(const char *text, const char *key, const char *want)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *at = text ? strstr(text, k) : NULL;
    if (!at) return 0;
    at += strlen(k);
    at += strspn(at, " \t");
    size_t n = strcspn(at, ",\n");
    return n == strlen(want) && !strncmp(at, want, n);
}

static void test_roundtrip(void)
{
    char tmpl[] = "/tmp/test_peft.XXXXXX";
    const char *root = mkdtemp(tmpl);
    CHECK(root != NULL);
    if (!root) return;
    char dir[256];
    snprintf(dir, sizeof dir, "%s/adapter", root);
    tt_peft_config a = sample(), b;
    CHECK_MSG(tt_peft_config_write(dir, &a) == 0, "%s", tt_last_error());
    CHECK_MSG(tt_peft_config_read(dir, &b) == 0, "%s", tt_last_error());
    CHECK(!memcmp(&a, &b, sizeof a));
    CHECK(dir_entries(dir) == 1); /* no temporary file left */

    /* all-linear, whole numbers, no base model; written over the first */
    memset(&a, 0, sizeof a);
    a.r = 8;
    a.alpha = 16;
    a.all_linear = 1;
    CHECK_MSG(tt_peft_config_write(dir, &a) == 0 && tt_peft_config_read(dir, &b) == 0, "%s", tt_last_error());
    CHECK(!memcmp(&a, &b, sizeof a));

    /* the written keys are sorted, each is one PEFT writes (the fixture's), with PEFT's types */
    char path[300];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    char *text = th_read_file(path, NULL);
    cJSON *w = text ? cJSON_Parse(text) : NULL, *fx = fixture();
    CHECK(w != NULL);
    int n = 0;
    for (const cJSON *k = w ? w->child : NULL; k; k = k->next, n++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(fx, k->string);
        CHECK_MSG(f != NULL, "titan writes '%s', which PEFT does not", k->string);
        CHECK_MSG(!f || (f->type & 0xff) == (k->type & 0xff) || !strcmp(k->string, "base_model_name_or_path") ||
                      !strcmp(k->string, "target_modules"),
                  "'%s' has another JSON type than PEFT writes", k->string);
        CHECK_MSG(!k->next || strcmp(k->string, k->next->string) < 0, "'%s' before '%s'", k->string, k->next->string);
    }
    CHECK(n >= 30);
    /* as Python writes them: lora_alpha an int, lora_dropout a float */
    CHECK(raw_is(text, "lora_alpha", "16") && raw_is(text, "lora_dropout", "0.0") &&
          raw_is(text, "target_modules", "\"all-linear\"") && raw_is(text, "base_model_name_or_path", "null"));
    cJSON_Delete(w);
    cJSON_Delete(fx);
    free(text);

    /* what parse would refuse, write refuses, naming the file and the field */
    static const char *const says[] = {"'r'", "'lora_dropout'", "'target_modules'", "'target_modules'", "'target_modules'",
                                       "'lora_alpha'"};
    for (int i = 0; i < 6; i++) {
        a = sample();
        if (i == 0) a.r = 0;
        if (i == 1) a.dropout = 1;
        if (i == 2) a.n_targets = 0;
        if (i == 3) strcpy(a.targets[2], "c_attn");
        if (i == 4) a.all_linear = 1;
        if (i == 5) a.alpha = NAN;
        CHECK_MSG(tt_peft_config_write(dir, &a) != 0 && HAS(path) && HAS(says[i]), "case %d: %s", i, tt_last_error());
    }
    th_rm_tree(root);
}

static void test_match(void)
{
    tt_peft_config c;
    memset(&c, 0, sizeof c);
    c.n_targets = 4;
    strcpy(c.targets[0], "q_proj");
    strcpy(c.targets[1], "self_attn.v_proj");
    strcpy(c.targets[2], "model.layers.0.mlp.down_proj");
    strcpy(c.targets[3], "self_attn.q_proj"); /* also matches what target 0 does: the first wins */
    CHECK(tt_peft_match(&c, "model.layers.0.self_attn.q_proj") == 0);
    CHECK(tt_peft_match(&c, "q_proj") == 0);
    CHECK(tt_peft_match(&c, "model.layers.0.self_attn.xq_proj") == -1);
    CHECK(tt_peft_match(&c, "model.layers.0.self_attn.q_proj_x") == -1);
    CHECK(tt_peft_match(&c, "model.layers.3.self_attn.v_proj") == 1);
    CHECK(tt_peft_match(&c, "model.layers.3.cross_attn.v_proj") == -1);
    CHECK(tt_peft_match(&c, "model.layers.3.xself_attn.v_proj") == -1);
    CHECK(tt_peft_match(&c, "model.layers.0.mlp.down_proj") == 2);
    CHECK(tt_peft_match(&c, "model.layers.10.mlp.down_proj") == -1);
    CHECK(tt_peft_match(&c, "proj") == -1);
    CHECK(tt_peft_match(&c, "") == -1);
    c.all_linear = 1;
    c.n_targets = 0;
    CHECK(tt_peft_match(&c, "model.layers.0.self_attn.q_proj") == -1);
}

static void test_names(void)
{
    static const char *const modules[] = {"model.layers.0.self_attn.q_proj", "transformer.h.11.attn.c_attn", "x"};
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 2; b++) {
            char name[256], module[128];
            int half = -1;
            CHECK_MSG(tt_peft_tensor_name(modules[i], b, name, sizeof name) == 0, "%s", tt_last_error());
            CHECK(!strncmp(name, "base_model.model.", 17) && strstr(name, modules[i]) == name + 17 &&
                  !strcmp(name + 17 + strlen(modules[i]), b ? ".lora_B.weight" : ".lora_A.weight"));
            CHECK_MSG(tt_peft_tensor_parse(name, module, sizeof module, &half) == 0, "%s", tt_last_error());
            CHECK(!strcmp(module, modules[i]) && half == b);
        }
    char name[256], module[64];
    int b = 0;
    CHECK(tt_peft_tensor_name("model.layers.0.self_attn.q_proj", 0, name, 40) != 0 && HAS("more than 39") && !name[0]);
    CHECK(tt_peft_tensor_name("model..q_proj", 0, name, sizeof name) != 0 && HAS("'model..q_proj'"));
    CHECK(tt_peft_tensor_name("", 1, name, sizeof name) != 0);
    CHECK(tt_peft_tensor_name("q_proj", 2, name, sizeof name) != 0 && HAS("half 2"));

    static const char *const bad[] = {
        "base_model.model.model.embed_tokens.lora_embedding_A",
        "base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector.weight",
        "base_model.model.model.layers.0.self_attn.q_proj.lora_B.bias",
        "base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight",
        "model.layers.0.self_attn.q_proj.lora_A.weight",
        "base_model.model..lora_A.weight",
        "base_model.model.lora_A.weight",
        "base_model.model.model.layers.0.self_attn.q_proj.weight",
    };
    static const char *const hints[] = {"embedding", "DoRA", "lora_bias", "adapter's name", "another prefix", "", "",
                                        ""};
    for (int i = 0; i < 8; i++)
        CHECK_MSG(tt_peft_tensor_parse(bad[i], module, sizeof module, &b) != 0 && HAS(bad[i]) && HAS(hints[i]) &&
                      HAS("not a LoRA weight as PEFT saves it"),
                  "%s: %s", bad[i], tt_last_error());
    CHECK(tt_peft_tensor_parse("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", module, 8, &b) != 0 &&
          HAS("more than 7"));
}

int main(void)
{
    test_fixture();
    test_refusals();
    test_accepted();
    test_not_json();
    test_roundtrip();
    test_match();
    test_names();
    return th_done("test_peft");
}
