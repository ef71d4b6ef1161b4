/* test_sizes.c — sizes a config implies are checked against the memory they
 * need before anything big is allocated: a config.json of 10^9 layers is
 * refused at once (the key, the bytes needed, the bytes available), as is a
 * train state past the machine's memory; an 8B model's declarations (what
 * `titan plan` builds) still pass; a bad shape names its key and value. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "harness.h"
#include "hf/hf_config.h"
#include "train/state.h"

/* the message says what needed the memory, how much, and how much there is */
static int says_bytes(const char *msg, const char *key)
{
    return strstr(msg, key) && strstr(msg, "needs ") && strstr(msg, " bytes (") &&
           strstr(msg, "of memory are available");
}

static void test_mem_check(void)
{
    size_t avail = tt_mem_available();
    printf("memory available: %zu bytes (%.1f GiB)\n", avail, (double)avail / (1 << 30));
    CHECK(avail > 0); /* Linux has /proc/meminfo */
    CHECK(tt_mem_check(1, "one byte") == 0);
    CHECK(tt_mem_check(SIZE_MAX / 2, "half the address space for %s", "a test") != 0);
    CHECK_MSG(says_bytes(tt_last_error(), "half the address space for a test"), "%s", tt_last_error());
}

/* A config.json with 10^9 layers: refused in well under a second, before the
 * parameter table is built (it took 17 s and 5.5 GB to fail before). */
static void test_billion_layers(void)
{
    static const char *const configs[] = {
        "{\"architectures\": [\"GPT2LMHeadModel\"], \"model_type\": \"gpt2\", \"n_embd\": 48, \"n_head\": 4, "
        "\"n_layer\": 1000000000, \"n_positions\": 64, \"vocab_size\": 640, \"layer_norm_epsilon\": 1e-5}",
        "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 64, "
        "\"intermediate_size\": 128, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
        "\"num_hidden_layers\": 1000000000, \"vocab_size\": 640, \"rms_norm_eps\": 1e-5, "
        "\"max_position_embeddings\": 128}",
    };
    for (int i = 0; i < 2; i++) {
        tt_hf_config hc;
        int parsed = tt_hf_config_parse(configs[i], strlen(configs[i]), "big/config.json", &hc) == 0;
        CHECK_MSG(parsed, "%s", tt_last_error());
        if (!parsed) continue;
        CHECK(hc.model.n_layers == 1000000000);
        double t0 = tt_now();
        tt_model *m = tt_model_new_ext(&hc.model, &hc.ext);
        double dt = tt_now() - t0;
        CHECK(m == NULL);
        CHECK_MSG(says_bytes(tt_last_error(), "n_layers = 1000000000"), "%s", tt_last_error());
        CHECK_MSG(tt_peak_rss_bytes() < ((size_t)1 << 30), "peak RSS %zu bytes", tt_peak_rss_bytes());
        printf("%s refused in %.1f ms: %s\n", i ? "llama" : "gpt2", dt * 1e3, tt_last_error());
        tt_model_free(m);
    }
}

/* The declarations of Llama 3 8B (what titan plan builds: no weights) pass,
 * and lay out the published parameter count; its train state (128 GB) is
 * refused before any of it is allocated, unless the machine has that much. */
static void test_8b(void)
{
    tt_model_cfg c = {TT_ARCH_LLAMA, 4096, 32, 32, 8, 128, 14336, 128256, 8192, 1e-5, {500000, 0, 0, 0, 0, 0},
                      0, 0, 0, 0, {0}, {0}};
    tt_model *m = tt_model_new(&c);
    CHECK_MSG(m != NULL, "%s", tt_last_error());
    if (!m) return;
    CHECK(m->numel == 8030261248ull);
    const tt_backend *be = tt_backend_get("cpu");
    tt_queue *q = be ? be->queue_new() : NULL;
    CHECK(be && q);
    if (q && tt_mem_available() < 4 * m->numel * sizeof(float)) {
        tt_train_state s;
        CHECK(tt_state_init(&s, m, be, q, 1) != 0);
        CHECK_MSG(says_bytes(tt_last_error(), "weights, gradients and two AdamW moments of the model's 8030261248 "
                                              "parameters (dim 4096, n_layers 32, ffn_dim 14336, vocab_size 128256)"),
                  "%s", tt_last_error());
        char want[64];
        snprintf(want, sizeof want, "needs %zu bytes", (size_t)4 * m->numel * sizeof(float));
        CHECK_MSG(strstr(tt_last_error(), want), "%s", tt_last_error());
    }
    /* a model-only run (generation, export) needs the weights alone */
    c.vocab_size = 1 << 24;
    c.dim = 1 << 16;
    c.n_heads = 512;
    c.n_kv_heads = 512;
    tt_model *huge = tt_model_new(&c); /* 2 x 2^40 embedding floats: declared, never allocated */
    CHECK_MSG(huge != NULL, "%s", tt_last_error());
    if (huge && q) {
        tt_train_state s;
        CHECK(tt_state_init(&s, huge, be, q, 0) != 0);
        CHECK_MSG(says_bytes(tt_last_error(), "train state: the fp32 weights of the model's"), "%s", tt_last_error());
    }
    tt_model_free(huge);
    if (q) be->queue_free(q);
    tt_model_free(m);
}

/* Shapes that are not positive name their key and value; a layout past the
 * addressable floats names the parameter. */
static void test_bad_shapes(void)
{
    const tt_model_cfg good = {TT_ARCH_LLAMA, 32, 2, 4, 2, 8, 48, 40, 64, 1e-5, {10000, 0, 0, 0, 0, 0}, 0, 0, 0, 0, {0}, {0}};
    tt_model *ok = tt_model_new(&good);
    CHECK(ok != NULL);
    tt_model_free(ok);
    static const struct {
        const char *key, *want;
        int value;
    } cases[] = {
        {"dim", "model: dim must be positive (got 0)", 0},
        {"n_layers", "model: n_layers must be positive (got -3)", -3},
        {"n_heads", "model: n_heads must be positive (got 0)", 0},
        {"ffn_dim", "model: ffn_dim must be positive (got -1)", -1},
        {"vocab_size", "model: vocab_size must be positive (got 0)", 0},
    };
    tt_model_cfg c;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        c = good;
        int *field = !strcmp(cases[i].key, "dim")        ? &c.dim
                     : !strcmp(cases[i].key, "n_layers") ? &c.n_layers
                     : !strcmp(cases[i].key, "n_heads")  ? &c.n_heads
                     : !strcmp(cases[i].key, "ffn_dim")  ? &c.ffn_dim
                                                         : &c.vocab_size;
        *field = cases[i].value;
        CHECK(tt_model_new(&c) == NULL);
        CHECK_MSG(strcmp(tt_last_error(), cases[i].want) == 0, "\"%s\", want \"%s\"", tt_last_error(), cases[i].want);
    }
    c = good; /* 2 x 2^30 x (2^31 - 1) floats: more than 2^61 */
    c.dim = 1 << 30;
    c.n_heads = 1 << 26;
    c.n_kv_heads = 1 << 26;
    c.head_dim = 16;
    c.vocab_size = 0x7fffffff;
    CHECK(tt_model_new(&c) == NULL);
    CHECK_MSG(strstr(tt_last_error(), "takes the layout past"), "%s", tt_last_error());
}

int main(void)
{
    test_mem_check();
    test_billion_layers();
    test_8b();
    test_bad_shapes();
    return th_done("test_sizes");
}
