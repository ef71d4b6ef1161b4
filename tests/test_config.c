/* test_config.c — the run configuration: defaults, recipes, command-line
 * precedence, flavors, error messages, the TOML round trip, and every recipe in configs/. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "harness.h"
#include "config/flavors.h"
#include "titan/config.h"

#define HAS(needle) strstr(tt_last_error(), needle)

static int load(tt_config *c, const char *text) { return tt_config_load_string(c, text, strlen(text), "x.toml"); }

/* Values equal, whatever the explicitly-set flags say. */
static bool same_values(const tt_config *a, const tt_config *b)
{
    return memcmp(a, b, offsetof(tt_config, set_by_user_)) == 0;
}

/* to_toml, load the text into fresh defaults, compare: the same values. */
static bool round_trip(const tt_config *c)
{
    char *text = tt_config_to_toml(c);
    if (!text) return false;
    tt_config d;
    tt_config_defaults(&d);
    bool ok = tt_config_load_string(&d, text, strlen(text), "emitted.toml") == 0;
    if (!ok) fprintf(stderr, "reload failed: %s\n", tt_last_error());
    ok = ok && same_values(c, &d);
    free(text);
    return ok;
}

static void test_defaults(void)
{
    tt_config c;
    tt_config_defaults(&c);
    CHECK(!strcmp(c.job.dump_folder, "./outputs"));
    CHECK(c.model.name == TT_MODEL_LLAMA && !strcmp(c.model.flavor, "debugmodel"));
    CHECK(c.model.dim == 128 && c.model.n_layers == 4 && c.model.n_heads == 4 && c.model.n_kv_heads == 4);
    CHECK(c.model.ffn_dim == 384 && c.model.vocab_size == 258 && c.model.rope_theta == 10000.0);
    CHECK(!c.model.tie_embeddings && c.model.rope_scaling == TT_ROPE_SCALING_NONE);
    CHECK(c.training.steps == 600 && c.training.seq_len == 256 && c.training.local_batch_size == 16);
    CHECK(c.training.global_batch_size == -1 && c.training.max_norm == 1.0);
    CHECK(!strcmp(c.training.dataset, "synthetic") && c.training.exec_mode == TT_EXEC_GRAPH);
    CHECK(c.synthetic.seed == 1234);
    CHECK(c.optimizer.name == TT_OPTIMIZER_ADAMW && c.optimizer.lr == 3e-3);
    CHECK(c.optimizer.beta1 == 0.9 && c.optimizer.beta2 == 0.95 && c.optimizer.eps == 1e-8);
    CHECK(c.optimizer.weight_decay == 0.1);
    CHECK(c.lr_scheduler.warmup_steps == 30 && c.lr_scheduler.decay_type == TT_LR_DECAY_COSINE);
    CHECK(!c.lr_scheduler.has_decay_ratio && c.lr_scheduler.min_lr_factor == 0.1);
    CHECK(c.validation.steps == -1 && c.validation.freq == 100);
    CHECK(!strcmp(c.checkpoint.folder, "checkpoint") && c.checkpoint.load_step == -1);
    CHECK(!c.checkpoint.fallback_to_previous && c.checkpoint.keep_latest_k == 2);
    CHECK(c.metrics.log_freq == 10 && c.metrics.peak_tflops == 0);
    CHECK(!tt_config_is_set(&c, "training.steps") && !tt_config_is_set(&c, "model.dim"));
    CHECK_MSG(tt_config_finalize(&c) == 0, "%s", tt_last_error());
    CHECK(c.model.head_dim == 32 && c.validation.local_batch_size == 16 && c.training.dataset_path[0] == 0);
    char buf[64];
    CHECK(tt_config_get(&c, "optimizer.lr", buf, sizeof buf) == 0 && !strcmp(buf, "0.003"));
    CHECK(tt_config_get(&c, "lr_scheduler.decay_type", buf, sizeof buf) == 0 && !strcmp(buf, "cosine"));
    CHECK(tt_config_get(&c, "optimizer.lrr", buf, sizeof buf) != 0);
    CHECK(tt_config_get(&c, "job.dump_folder", buf, 4) != 0); /* buffer too small */
    /* the backend: cpu by default; its default compute dtype unless the key is set */
    CHECK(!strcmp(c.training.backend, "cpu"));
    tt_config r;
    tt_config_defaults(&r);
    CHECK(tt_config_set(&r, "training.backend", "ref", "cli") == 0 && tt_config_finalize(&r) == 0);
    CHECK(r.training.mixed_precision_param == TT_PARAM_FLOAT32); /* the reference kernels compute in fp32 */
    tt_config_defaults(&r);
    CHECK(tt_config_set(&r, "training.backend", "ref", "cli") == 0 &&
          tt_config_set(&r, "training.mixed_precision_param", "bfloat16", "cli") == 0 && tt_config_finalize(&r) == 0);
    CHECK(r.training.mixed_precision_param == TT_PARAM_BFLOAT16);
    tt_config_defaults(&r);
    CHECK(tt_config_set(&r, "training.backend", "tpu", "cli") == 0 && tt_config_finalize(&r) != 0 &&
          strstr(tt_last_error(), "training.backend: unknown backend 'tpu' (available: cpu, ref)"));
}

static void test_load_and_override(void)
{
    tt_config c;
    tt_config_defaults(&c);
    const char *recipe = "# recipe\n"
                         "[training]\n"
                         "steps = 100\n"
                         "seq_len = 512\n"
                         "[optimizer]\n"
                         "lr = 1  # an integer is fine for a float key\n"
                         "[model]\n"
                         "flavor = \"llama_288\"\n"
                         "dim = 96\n";
    CHECK_MSG(load(&c, recipe) == 0, "%s", tt_last_error());
    CHECK(c.training.steps == 100 && c.training.seq_len == 512 && c.optimizer.lr == 1.0);
    CHECK(tt_config_is_set(&c, "training.steps") && !tt_config_is_set(&c, "training.seed"));
    CHECK(tt_config_finalize(&c) == 0);
    /* the flavor fills what the recipe left, the recipe wins where it spoke */
    CHECK(c.model.dim == 96 && c.model.n_layers == 6 && c.model.n_heads == 6 && c.model.vocab_size == 32000);
    CHECK(c.model.head_dim == 16 && c.model.tie_embeddings);

    /* the command line: --config first wherever it stands, then overrides in order */
    /* a file of its own (mkstemps), as tests may run at once (ctest -j) */
    char path[] = "/tmp/titan_test_config_XXXXXX.toml";
    int fd = mkstemps(path, 5);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    CHECK(f != NULL);
    if (!f) {
        if (fd >= 0) close(fd), remove(path);
        return;
    }
    fputs(recipe, f);
    fclose(f);
    char *argv[] = {"--training.steps", "40", "prompt-word", "--config", path,
                    "--optimizer.lr=3e-4", "--model.n_layers", "2", "--checkpoint.enable", "--training.steps=41",
                    "--validation.enable", "false", "--", "--not-a-flag"};
    int argc = (int)(sizeof argv / sizeof argv[0]), n_rest = -1;
    char *rest[16];
    tt_config_defaults(&c);
    CHECK_MSG(tt_config_parse_args(&c, argc, argv, &n_rest, rest) == 0, "%s", tt_last_error());
    CHECK(c.training.steps == 41 && c.training.seq_len == 512 && c.optimizer.lr == 3e-4);
    CHECK(c.checkpoint.enable && !c.validation.enable);
    CHECK(n_rest == 2 && !strcmp(rest[0], "prompt-word") && !strcmp(rest[1], "--not-a-flag"));
    CHECK(tt_config_finalize(&c) == 0);
    CHECK(c.model.n_layers == 2 && c.model.dim == 96 && c.model.n_heads == 6); /* CLI > file > flavor */

    /* errors leave the config unchanged and name the flag */
    tt_config before = c;
    char *bad1[] = {"--training.steps", "5", "--training.stpes", "4"};
    CHECK(tt_config_parse_args(&c, 4, bad1, NULL, NULL) != 0 && HAS("'--training.stpes'") &&
          HAS("did you mean '--training.steps'"));
    CHECK(memcmp(&before, &c, sizeof c) == 0);
    char *bad2[] = {"--training.steps"};
    CHECK(tt_config_parse_args(&c, 1, bad2, NULL, NULL) != 0 && HAS("needs a value"));
    char *bad3[] = {"stray"};
    CHECK(tt_config_parse_args(&c, 1, bad3, NULL, NULL) != 0 && HAS("'stray'"));
    char *bad4[] = {"-x"};
    CHECK(tt_config_parse_args(&c, 1, bad4, NULL, NULL) != 0 && HAS("'-x'"));
    char *bad5[] = {"--config", "/nonexistent.toml"};
    CHECK(tt_config_parse_args(&c, 2, bad5, NULL, NULL) != 0 && HAS("/nonexistent.toml"));
    char *bad6[] = {"--training.steps", "abc"};
    CHECK(tt_config_parse_args(&c, 2, bad6, NULL, NULL) != 0 && HAS("command line: training.steps") &&
          HAS("integer"));
    char *bad7[] = {"--config=a.toml", "--job.config_file", "b.toml"};
    CHECK(tt_config_parse_args(&c, 3, bad7, NULL, NULL) != 0 && HAS("twice"));
    CHECK(memcmp(&before, &c, sizeof c) == 0);
    remove(path);

    /* tt_config_set: typed parsing, "none" for optional keys, origin in messages */
    tt_config_defaults(&c);
    CHECK(tt_config_set(&c, "lr_scheduler.decay_ratio", "0.8", "command line") == 0);
    CHECK(c.lr_scheduler.has_decay_ratio && c.lr_scheduler.decay_ratio == 0.8);
    CHECK(tt_config_set(&c, "lr_scheduler.decay_ratio", "none", "command line") == 0);
    CHECK(!c.lr_scheduler.has_decay_ratio && c.lr_scheduler.decay_ratio == 0);
    CHECK(tt_config_set(&c, "generate.prompt", "Once upon", "command line") == 0 &&
          !strcmp(c.generate.prompt, "Once upon"));
    CHECK(tt_config_set(&c, "training.exec_mode", "eager", "cli") == 0 && c.training.exec_mode == TT_EXEC_EAGER);
    CHECK(tt_config_set(&c, "training.seed", "1_000", "cli") == 0 && c.training.seed == 1000);
    CHECK(tt_config_set(&c, "training.steps", "1.5", "cli") != 0 && HAS("cli: training.steps") && HAS("float"));
    CHECK(tt_config_set(&c, "model.tie_embeddings", "yes", "cli") != 0 && HAS("true or false"));
    CHECK(tt_config_set(&c, "optimizer.beta1", "1.0", "cli") != 0 && HAS("in [0, 1)"));
    CHECK(tt_config_set(&c, "optimizer.lr", "nan", "cli") != 0);
    CHECK(tt_config_set(&c, "job.description", "\xFF", "cli") != 0 && HAS("UTF-8"));
    char longv[2000];
    memset(longv, 'a', sizeof longv - 1);
    longv[sizeof longv - 1] = 0;
    CHECK(tt_config_set(&c, "job.dump_folder", longv, "cli") != 0 && HAS("too long"));
    CHECK(tt_config_set(&c, "nope", "1", "cli") != 0 && HAS("unknown key 'nope'"));
    CHECK(tt_config_set(&c, "training.lr", "1", "cli") != 0 && HAS("did you mean 'optimizer.lr'"));
}

static void test_errors(void)
{
    tt_config c;
    tt_config_defaults(&c);
    tt_config before = c;
    CHECK(load(&c, "[training]\nsteps = 5\n\nstpes = 3\n") != 0 &&
          HAS("x.toml:4: unknown key 'training.stpes' (did you mean 'training.steps'?)"));
    CHECK(memcmp(&before, &c, sizeof c) == 0); /* nothing applied, not even steps = 5 */
    CHECK(load(&c, "[training]\nsteps = \"ten\"\n") != 0 && HAS("x.toml:2: training.steps: expected an integer, got a string"));
    CHECK(load(&c, "[training]\nsteps = [1]\n") != 0 && HAS("got an array"));
    CHECK(load(&c, "[training]\nsteps = 0\n") != 0 && HAS("x.toml:2: training.steps = 0 is out of range (must be >= 1)"));
    /* past the upper bound the message names that bound, not ">= 1" */
    CHECK(load(&c, "[training]\nsteps = 1000000000000\n") != 0 &&
          HAS("x.toml:2: training.steps = 1000000000000 is out of range (must be <= 1000000000)"));
    CHECK(load(&c, "[synthetic]\nseed = 10000000000000000\n") != 0 && HAS("(must be <= 9007199254740992)"));
    CHECK(load(&c, "[model]\nvocab_size = 1000000000000\n") != 0 && HAS("(must be in [1, 16777216])"));
    CHECK(load(&c, "[optimizer]\nlr = 0.0\n") != 0 && HAS("must be > 0"));
    CHECK(load(&c, "[optimizer]\nbeta2 = 1\n") != 0 && HAS("in [0, 1)"));
    CHECK(load(&c, "[checkpoint]\nload_step = -2\n") != 0 && HAS("or -1"));
    CHECK(load(&c, "[checkpoint]\nload_step = -1\n") == 0);
    CHECK(load(&c, "[lr_scheduler]\ndecay_type = \"exp\"\n") != 0 &&
          HAS("x.toml:2: lr_scheduler.decay_type: unknown value 'exp' (allowed: linear, sqrt, cosine)"));
    CHECK(load(&c, "[model]\nname = 3\n") != 0 && HAS("one of: llama, gpt2"));
    CHECK(load(&c, "[training]\nmax_norm = true\n") != 0 && HAS("expected a number, got a boolean"));
    CHECK(load(&c, "[training]\nsteps = 1\nsteps = 2\n") != 0 && HAS("x.toml:3: duplicate key"));
    CHECK(load(&c, "[parallelism]\ndata_parallel_shard_degre = 2\n") != 0 &&
          HAS("unknown key 'parallelism.data_parallel_shard_degre' (did you mean "
              "'parallelism.data_parallel_shard_degree'?)"));
    CHECK(tt_config_load_file(&c, "/nonexistent/r.toml") != 0 && HAS("/nonexistent/r.toml"));

    /* cross-key checks in finalize */
    struct {
        const char *text, *needle;
    } bad[] = {
        {"[model]\nn_kv_heads = 3\n", "not a multiple of model.n_kv_heads = 3"},
        {"[model]\ndim = 130\n", "model.dim = 130 is not divisible by model.n_heads = 4 (flavor 'debugmodel')"},
        {"[training]\nlocal_batch_size = 16\nglobal_batch_size = 24\n", "not a multiple of training.local_batch_size"},
        {"[model]\nflavor = \"gpt2_124m\"\n[training]\nseq_len = 2048\n", "exceeds model.max_seq_len = 1024"},
        {"[model]\nflavor = \"nosuch\"\n", "unknown flavor 'nosuch' for model llama (known: debugmodel, llama3_debug"},
        {"[model]\nname = \"gpt2\"\nflavor = \"llama3_8b\"\n", "is a llama flavor but model.name is 'gpt2'"},
        {"[model]\nvocab_size = 100\n", "byte tokenizer"},
        {"[model]\nname = \"gpt2\"\nn_kv_heads = 2\n", "grouped-query"},
        {"[model]\nrope_scaling = \"llama3\"\nrope_low_freq_factor = 4.0\n", "must exceed"},
        {"[training]\ndataset = \"a.bin\"\ndataset_path = \"b.bin\"\n", "disagree"},
        {"[training]\ndataset = \"\"\n", "empty"},
        {"[training]\nseq_len = 1024\n[synthetic]\ntrain_tokens = 1000\n", "synthetic.train_tokens"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tt_config_defaults(&c);
        CHECK_MSG(load(&c, bad[i].text) == 0, "%s", tt_last_error());
        before = c;
        CHECK_MSG(tt_config_finalize(&c) != 0 && HAS(bad[i].needle), "case %zu: got '%s'", i, tt_last_error());
        CHECK(memcmp(&before, &c, sizeof c) == 0);
    }
}

static void test_flavors(void)
{
    tt_config c;
    /* real published shapes */
    tt_config_defaults(&c);
    CHECK(tt_config_set(&c, "model.flavor", "llama3_8b", "t") == 0 && tt_config_finalize(&c) == 0);
    CHECK(c.model.dim == 4096 && c.model.n_layers == 32 && c.model.n_heads == 32 && c.model.n_kv_heads == 8);
    CHECK(c.model.ffn_dim == 14336 && c.model.vocab_size == 128256 && c.model.rope_theta == 500000.0);
    CHECK(c.model.rope_scaling == TT_ROPE_SCALING_LLAMA3 && c.model.rope_factor == 8.0 &&
          c.model.rope_low_freq_factor == 1.0 && c.model.rope_high_freq_factor == 4.0 &&
          c.model.rope_original_max_position_embeddings == 8192 && c.model.head_dim == 128);
    tt_config_defaults(&c);
    CHECK(tt_config_set(&c, "model.flavor", "llama3_1b", "t") == 0 && tt_config_finalize(&c) == 0);
    CHECK(c.model.dim == 2048 && c.model.n_layers == 16 && c.model.n_heads == 32 && c.model.n_kv_heads == 8 &&
          c.model.ffn_dim == 8192 && c.model.tie_embeddings && c.model.rope_factor == 32.0 && c.model.head_dim == 64);
    tt_config_defaults(&c);
    CHECK(tt_config_set(&c, "model.flavor", "qwen3_0.6b", "t") == 0 && tt_config_finalize(&c) == 0);
    CHECK(c.model.head_dim == 128 && c.model.dim == 1024 && c.model.qk_norm && !c.model.qkv_bias);
    tt_config_defaults(&c);
    CHECK(tt_config_set(&c, "model.flavor", "qwen2_0.5b", "t") == 0 && tt_config_finalize(&c) == 0);
    CHECK(c.model.qkv_bias && c.model.n_heads == 14 && c.model.n_kv_heads == 2 && c.model.head_dim == 64);

    /* model.name follows a flavor of another model; a model alone gets its default flavor */
    tt_config_defaults(&c);
    CHECK(tt_config_set(&c, "model.flavor", "gpt2_124m", "t") == 0 && tt_config_finalize(&c) == 0);
    CHECK(c.model.name == TT_MODEL_GPT2 && c.model.dim == 768 && c.model.vocab_size == 50304 &&
          c.model.max_seq_len == 1024 && c.model.tie_embeddings);
    tt_config_defaults(&c);
    CHECK(tt_config_set(&c, "model.name", "gpt2", "t") == 0 && tt_config_finalize(&c) == 0);
    CHECK(!strcmp(c.model.flavor, "gpt2_debug") && c.model.dim == 128 && c.model.ffn_dim == 512);
    /* finalize again after a flavor change: unset shape keys follow the new flavor */
    CHECK(tt_config_set(&c, "model.flavor", "gpt2_350m", "t") == 0 && tt_config_finalize(&c) == 0);
    CHECK(c.model.dim == 1024 && c.model.n_layers == 24 && c.model.head_dim == 64);

    /* names are unique across models, and each model has a default */
    size_t n = tt_flavor_count();
    CHECK(n >= 15);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) CHECK(strcmp(tt_flavor_at(i)->name, tt_flavor_at(j)->name));
    CHECK(tt_flavor_default(TT_MODEL_LLAMA) == tt_flavor_find("debugmodel"));
    CHECK(tt_flavor_default(TT_MODEL_GPT2) == tt_flavor_find("gpt2_debug"));
    /* every flavor finalizes (shapes consistent) and round-trips */
    for (size_t i = 0; i < n; i++) {
        tt_config_defaults(&c);
        CHECK(tt_config_set(&c, "model.flavor", tt_flavor_at(i)->name, "t") == 0);
        CHECK_MSG(tt_config_finalize(&c) == 0, "%s: %s", tt_flavor_at(i)->name, tt_last_error());
        CHECK(round_trip(&c));
    }
}

static void test_round_trip(void)
{
    tt_config c;
    tt_config_defaults(&c);
    CHECK(round_trip(&c)); /* before finalize too */
    CHECK(tt_config_set(&c, "generate.prompt", "line1\nq\"uote\\ tab\t bell\x07 \xC3\xA9", "t") == 0);
    CHECK(tt_config_set(&c, "job.description", "'single' # not a comment", "t") == 0);
    CHECK(tt_config_set(&c, "lr_scheduler.decay_ratio", "0.25", "t") == 0);
    CHECK(tt_config_set(&c, "optimizer.lr", "1.2345678901234567e-4", "t") == 0);
    CHECK(tt_config_set(&c, "optimizer.weight_decay", "0.1", "t") == 0);
    CHECK(tt_config_set(&c, "model.norm_eps", "1e-6", "t") == 0);
    CHECK(tt_config_set(&c, "synthetic.train_tokens", "123456789012", "t") == 0);
    CHECK(tt_config_set(&c, "training.exec_mode", "debug", "t") == 0);
    CHECK(tt_config_set(&c, "model.flavor", "llama3_debug", "t") == 0);
    CHECK(tt_config_finalize(&c) == 0);
    CHECK(round_trip(&c));
    /* a reloaded effective config finalizes to itself */
    char *text = tt_config_to_toml(&c);
    tt_config d;
    tt_config_defaults(&d);
    CHECK(text && tt_config_load_string(&d, text, strlen(text), "e.toml") == 0 && tt_config_finalize(&d) == 0);
    CHECK(same_values(&c, &d));
    free(text);
    /* a real difference is seen */
    d.optimizer.lr *= 2;
    CHECK(!same_values(&c, &d));
}

static int is_toml(const char *name)
{
    size_t n = strlen(name);
    return n > 5 && !strcmp(name + n - 5, ".toml");
}

static void test_config_files(void)
{
    char dir[4096], path[4600];
    snprintf(dir, sizeof dir, "%s/configs", TITAN_SOURCE_DIR);
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "cannot open %s", dir);
    if (!d) return;
    int n = 0;
    bool saw_default = false;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!is_toml(e->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        tt_config c;
        tt_config_defaults(&c);
        CHECK_MSG(tt_config_load_file(&c, path) == 0, "%s", tt_last_error());
        CHECK_MSG(tt_config_finalize(&c) == 0, "%s: %s", e->d_name, tt_last_error());
        CHECK_MSG(round_trip(&c), "%s", e->d_name);
        if (!strcmp(e->d_name, "default.toml")) {
            saw_default = true;
            CHECK(c.model.name == TT_MODEL_LLAMA && !strcmp(c.model.flavor, "debugmodel"));
            CHECK(!strcmp(c.training.dataset, "synthetic") && c.validation.enable && c.checkpoint.enable);
        }
        if (!strcmp(e->d_name, "gpt2_124m.toml")) CHECK(c.model.name == TT_MODEL_GPT2 && c.model.vocab_size >= 258);
        n++;
    }
    closedir(d);
    CHECK(n >= 7 && saw_default);
}

int main(void)
{
    test_defaults();
    test_load_and_override();
    test_errors();
    test_flavors();
    test_round_trip();
    test_config_files();
    return th_done("test_config");
}
