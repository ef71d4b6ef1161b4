/* test_hf_config.c — the config.json reader's refusals say the rule they
 * apply, and what fuzz_hf_config found stays fixed: an n_embd whose 4x MLP
 * overflows an int, a YaRN factor that export wrote back as another number,
 * layer_types read in quadratic time, and a window loop over every layer.
 * And the model.* keys set over a folder's config.json: applied, or refused
 * by name, never dropped. */
#include <stdlib.h>
#include <string.h>

#include "config/resolve.h"
#include "harness.h"
#include "hf/hf_config.h"

#define HAS(needle) (strstr(tt_last_error(), needle) != NULL)

static int parse(const char *json, tt_hf_config *c) { return tt_hf_config_parse(json, strlen(json), "x/config.json", c); }

static void test_messages(void)
{
    tt_hf_config c;
    /* 10^12 is >= 1: the message must name the bound it breaks */
    CHECK_MSG(parse("{\"model_type\": \"llama\", \"vocab_size\": 1000000000000}", &c) != 0 &&
                  HAS("x/config.json: key 'vocab_size' must be an integer in [1, 2147483647] (got 1000000000000)"),
              "%s", tt_last_error());
    CHECK_MSG(parse("{\"model_type\": \"llama\", \"num_hidden_layers\": 0}", &c) != 0 &&
                  HAS("key 'num_hidden_layers' must be an integer in [1, 2147483647] (got 0)"),
              "%s", tt_last_error());
    CHECK_MSG(parse("{\"model_type\": \"llama\", \"hidden_size\": 64.5}", &c) != 0 && HAS("'hidden_size'") &&
                  HAS("(got 64.5)"),
              "%s", tt_last_error());
    CHECK_MSG(parse("{\"model_type\": \"llama\", \"eos_token_id\": -1}", &c) != 0 &&
                  HAS("key 'eos_token_id' must be an integer in [0, 2147483647] (got -1)"),
              "%s", tt_last_error());
    /* JSON's 1e999 reads as infinity, which is positive */
    CHECK_MSG(parse("{\"model_type\": \"llama\", \"rms_norm_eps\": 1e999}", &c) != 0 &&
                  HAS("key 'rms_norm_eps' must be a positive finite number"),
              "%s", tt_last_error());
}

/* fuzz_hf_config: 4 * n_embd (the MLP width when n_inner is null) overflowed */
static void test_gpt2_wide(void)
{
    tt_hf_config c;
    CHECK_MSG(parse("{\"model_type\": \"gpt2\", \"n_embd\": 554563884, \"n_head\": 4}", &c) != 0 && HAS("n_embd 554563884") &&
                  HAS("4 * n_embd"),
              "%s", tt_last_error());
    /* with n_inner given, that width is not needed */
    CHECK_MSG(parse("{\"model_type\": \"gpt2\", \"n_embd\": 554563884, \"n_head\": 4, \"n_inner\": 8}", &c) == 0 &&
                  c.model.ffn_dim == 8,
              "%s", tt_last_error());
}

/* fuzz_hf_config: cJSON printed 256 / 28 with 15 digits, which reads back as
 * another double; export must write what it read */
static void test_written_back(void)
{
    static const char *const cfgs[] = {
        "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
        " \"num_hidden_layers\": 2, \"max_position_embeddings\": 256, \"rms_norm_eps\": 1.1e-6,"
        " \"rope_scaling\": {\"rope_type\": \"yarn\", \"original_max_position_embeddings\": 28}}",
        "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"rope_theta\": 500000.3,"
        " \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 7.1, \"low_freq_factor\": 0.3,"
        " \"high_freq_factor\": 3.3, \"original_max_position_embeddings\": 96}}",
        "{\"model_type\": \"gpt2\", \"n_embd\": 48, \"n_head\": 4, \"layer_norm_epsilon\": 3.3e-7}",
        /* -0.0 is falsy in Python's `x or default`: the default 0, +0 (fuzz_hf_config found it written back as
         * another model: -0.0 was kept, and not written) */
        "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
        " \"num_hidden_layers\": 2, \"max_position_embeddings\": 256,"
        " \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 64,"
        " \"mscale_all_dim\": -0.0, \"mscale\": -0.0, \"beta_fast\": -0.0}}",
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        tt_hf_config c, d;
        CHECK_MSG(parse(cfgs[i], &c) == 0, "config %zu: %s", i, tt_last_error());
        char *text = tt_hf_config_to_json(&c);
        CHECK_MSG(text != NULL, "config %zu: %s", i, tt_last_error());
        if (!text) continue;
        CHECK_MSG(parse(text, &d) == 0, "config %zu written back: %s", i, tt_last_error());
        const tt_rope_params *a = &c.model.rope, *b = &d.model.rope;
        CHECK_MSG(a->factor == b->factor && a->theta == b->theta && a->low_freq_factor == b->low_freq_factor &&
                      a->high_freq_factor == b->high_freq_factor && c.model.norm_eps == d.model.norm_eps &&
                      c.ext.rope.attention_factor == d.ext.rope.attention_factor,
                  "config %zu: factor %.17g -> %.17g, theta %.17g -> %.17g, eps %.17g -> %.17g, attention factor "
                  "%.17g -> %.17g\n%s",
                  i, a->factor, b->factor, a->theta, b->theta, c.model.norm_eps, d.model.norm_eps,
                  c.ext.rope.attention_factor, d.ext.rope.attention_factor, text);
        CHECK_MSG(memcmp(&c.model, &d.model, sizeof c.model) == 0 && memcmp(&c.ext, &d.ext, sizeof c.ext) == 0,
                  "config %zu: read back as another model", i);
        free(text);
    }
}

/* Many layers: a 200,000-entry layer_types (read in quadratic time once,
 * minutes) and 10^9 layers without one (a window loop ran over all of them)
 * read correctly. No timing is asserted (tests never time code); a return of
 * the quadratic reader would show as this test taking minutes. */
static void test_many_layers(void)
{
    enum { L = 200000 };
    const char *head = "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
                       " \"use_sliding_window\": true, \"sliding_window\": 8, \"max_window_layers\": 0, "
                       "\"num_hidden_layers\": 200000, \"layer_types\": [";
    size_t cap = strlen(head) + (size_t)L * 22 + 8, at = 0;
    char *json = th_alloc(cap, 1);
    at += (size_t)snprintf(json, cap, "%s", head);
    for (int l = 0; l < L; l++) at += (size_t)snprintf(json + at, cap - at, "%s\"sliding_attention\"", l ? "," : "");
    snprintf(json + at, cap - at, "]}");
    tt_hf_config c;
    CHECK_MSG(parse(json, &c) == 0 && c.model.n_layers == L && c.model.window == 8, "%s", tt_last_error());
    free(json);
    CHECK_MSG(parse("{\"model_type\": \"qwen2\", \"use_sliding_window\": true, \"sliding_window\": 8,"
                    " \"num_hidden_layers\": 1000000000}",
                    &c) == 0 && c.model.window == 8,
              "%s", tt_last_error());
}

/* The model a config resolves to, from fixture folder `fix` with the keys kv (NULL-terminated pairs): 0 or -1. */
static int resolve(const char *fix, const char *const *kv, tt_model_cfg *o)
{
    tt_config *c = th_alloc(1, sizeof *c);
    tt_config_defaults(c);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/hf/%s", TITAN_SOURCE_DIR, fix);
    int rc = tt_config_set(c, "model.hf_assets_path", dir, "test");
    for (int i = 0; kv[i] && !rc; i += 2) rc = tt_config_set(c, kv[i], kv[i + 1], "test");
    if (!rc) rc = tt_model_cfg_from_config(c, o, NULL, NULL);
    free(c);
    return rc;
}

static void test_model_keys_over_folder(void)
{
    tt_model_cfg o;
    /* applied: the context, the routing scale, the router losses */
    CHECK_MSG(resolve("qwen3_moe", (const char *[]){"model.max_seq_len", "100", "model.route_scale", "2.5",
                                                    "model.router_aux_loss_coef", "0.01", "model.load_balance_coeff",
                                                    "0", NULL},
                      &o) == 0,
              "%s", tt_last_error());
    CHECK(o.max_seq_len == 100 && o.moe.route_scale == 2.5f && o.moe.aux_coef == 0.01);
    CHECK_MSG(resolve("deepseek_v3", (const char *[]){"model.load_balance_coeff", "1e-3", NULL}, &o) == 0 &&
                  o.moe.has_bias,
              "%s", tt_last_error());
    /* refused by name: what the folder gives, and what means nothing for it */
    CHECK_MSG(resolve("qwen3_moe", (const char *[]){"model.dim", "64", NULL}, &o) != 0 &&
                  HAS("model.dim is given on the command line, but model.hf_assets_path ") &&
                  HAS("qwen3_moe gives the architecture"),
              "%s", tt_last_error());
    CHECK_MSG(resolve("llama", (const char *[]){"model.flavor", "debugmodel", NULL}, &o) != 0 &&
                  HAS("model.flavor is given on the command line"),
              "%s", tt_last_error());
    CHECK_MSG(resolve("llama", (const char *[]){"model.route_scale", "2", NULL}, &o) != 0 &&
                  HAS("model.route_scale is given, but ") && HAS("has no experts"),
              "%s", tt_last_error());
    CHECK_MSG(resolve("gpt2", (const char *[]){"model.max_seq_len", "32", NULL}, &o) != 0 &&
                  HAS("model.max_seq_len is given, but ") && HAS("GPT-2 whose"),
              "%s", tt_last_error());
    CHECK_MSG(resolve("qwen3_moe", (const char *[]){"model.load_balance_coeff", "1e-3", NULL}, &o) != 0 &&
                  HAS("model.load_balance_coeff = 0.001, but the routers of ") &&
                  HAS("(Qwen3MoeForCausalLM) have no selection bias"),
              "%s", tt_last_error());
    /* the default coefficient is not refused (the run's log says it does nothing) */
    CHECK_MSG(resolve("qwen3_moe", (const char *[]){NULL}, &o) == 0 && !o.moe.has_bias, "%s", tt_last_error());
}

int main(void)
{
    test_messages();
    test_gpt2_wide();
    test_written_back();
    test_many_layers();
    test_model_keys_over_folder();
    return th_done("test_hf_config");
}
