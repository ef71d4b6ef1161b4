/* test_nan_loss.c — a NaN loss stops training with the run's own message
 * naming the step, in graph, eager and debug modes. The model starts from a
 * Hugging Face folder the test writes whose output head holds one NaN, so the
 * first step's loss is NaN (and nothing before it is). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hf/hf_model.h"
#include "titan/config.h"
#include "titan/titan.h"

static int set(tt_config *c, const char *key, const char *value)
{
    int rc = tt_config_set(c, key, value, "test");
    CHECK_MSG(rc == 0, "%s = %s: %s", key, value, tt_last_error());
    return rc;
}

/* A small llama over the byte tokenizer's 258 ids, its head poisoned. */
static int write_model(const char *dir)
{
    tt_model_cfg mc;
    memset(&mc, 0, sizeof mc);
    mc.arch = TT_ARCH_LLAMA;
    mc.dim = 32, mc.n_layers = 1, mc.n_heads = 2, mc.n_kv_heads = 2, mc.head_dim = 16, mc.ffn_dim = 48;
    mc.vocab_size = 258, mc.max_seq_len = 256, mc.norm_eps = 1e-5, mc.rope.theta = 10000;
    tt_model *m = tt_model_new(&mc);
    float *w = m ? th_alloc(m->numel, sizeof(float)) : NULL;
    tt_param_store host = tt_model_host_store(w);
    int head = m ? tt_model_find(m, "output.weight") : -1;
    int rc = !m || head < 0 || tt_model_init_weights(m, 1, &host);
    if (!rc) {
        w[m->params[head].offset] = NAN; /* one logit of every row is NaN: so is each row's loss */
        rc = tt_hf_export(m, dir, NULL, &host);
    }
    CHECK_MSG(rc == 0, "writing the model: %s", tt_last_error());
    free(w);
    tt_model_free(m);
    return rc;
}

static void check_mode(const char *tmp, const char *mode, const char *want)
{
    tt_config *c = th_alloc(1, sizeof *c);
    char path[4200];
    tt_config_defaults(c);
    snprintf(path, sizeof path, "%s/run-%s", tmp, mode);
    int rc = set(c, "job.dump_folder", path);
    snprintf(path, sizeof path, "%s/model", tmp);
    rc |= set(c, "model.hf_assets_path", path) | set(c, "checkpoint.initial_load_in_hf", "true");
    rc |= set(c, "training.steps", "3") | set(c, "training.local_batch_size", "2") | set(c, "training.seq_len", "256");
    rc |= set(c, "synthetic.train_tokens", "20000") | set(c, "synthetic.val_tokens", "2000");
    rc |= set(c, "validation.enable", "false") | set(c, "checkpoint.enable", "false");
    rc |= set(c, "generate.max_new_tokens", "0") | set(c, "metrics.log_freq", "1") | set(c, "training.exec_mode", mode);
    rc |= tt_config_finalize(c);
    CHECK_MSG(rc == 0, "config: %s", tt_last_error());
    if (!rc) {
        rc = tt_train(c);
        const char *e = tt_last_error();
        CHECK_MSG(rc != 0, "%s mode: training on a NaN loss did not stop", mode);
        CHECK_MSG(rc != 0 && strstr(e, "step 1:") == e && strstr(e, want) && strstr(e, "NaN"),
                  "%s mode: the error is \"%s\", not the run's message for step 1 (\"%s\")", mode, e, want);
        printf("%s mode: %s\n", mode, e);
    }
    free(c);
}

int main(void)
{
    char tmp[] = "/tmp/titan_nan_XXXXXX", dir[64];
    if (!mkdtemp(tmp)) return th_skip("test_nan_loss", "no temporary folder");
    snprintf(dir, sizeof dir, "%s/model", tmp);
    if (write_model(dir) == 0) {
        check_mode(tmp, "graph", "loss is NaN; stopping before the optimizer applies it");
        check_mode(tmp, "eager", "loss is NaN; stopping before the optimizer applies it");
        /* debug mode checks every node's outputs: it names the first one with a NaN */
        check_mode(tmp, "debug", "non-finite values in the micro-step, stopping before the optimizer applies them");
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return th_done("test_nan_loss");
}
