/* fuzz_ckpt_layout.c — libFuzzer target for a sharded checkpoint's layout
 * (meta.json's "layout", train/ckpt_layout.c): the input is a meta.json; its
 * "config" builds the model the layout is checked against (small models
 * only), and the layout is read. No input may crash it or make it allocate
 * what the model does not bound; a layout it accepts covers every parameter
 * exactly once. Seeds: tests/fuzz/seeds/ckpt_meta (a one-rank run's
 * meta.json, a 2-rank FSDP run's and a 2-rank expert-parallel run's);
 * dictionary: ckpt_meta.dict. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "config/resolve.h"
#include "core/core.h"
#include "train/ckpt_layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The model of a meta.json's config, when it is small; NULL otherwise */
static tt_model *model_of(const cJSON *meta)
{
    const cJSON *jc = cJSON_GetObjectItem(meta, "config");
    if (!cJSON_IsString(jc)) return NULL;
    static tt_config c;
    tt_config_defaults(&c);
    tt_model_cfg mc;
    tt_model_ext ext;
    if (tt_config_load_string(&c, jc->valuestring, strlen(jc->valuestring), "config") || tt_config_finalize(&c) ||
        tt_model_cfg_from_config(&c, &mc, &ext, NULL))
        return NULL;
    if (mc.n_layers > 8 || mc.dim > 256 || mc.vocab_size > 4096 || mc.ffn_dim > 1024 || mc.moe.n_experts > 64 ||
        mc.moe.ffn_dim > 1024)
        return NULL; /* a small model: the layout's checks are what is fuzzed */
    return tt_model_new_ext(&mc, &ext);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *meta = cJSON_ParseWithLength((const char *)data, size);
    tt_model *m = meta ? model_of(meta) : NULL;
    if (m) {
        tt_sharding sh;
        if (tt_ckpt_layout_read(cJSON_GetObjectItem(meta, "layout"), m, &sh, "fuzz") == 0) {
            /* accepted: the buckets' padded sizes are multiples of the ranks that slice them */
            for (int b = 0; b < sh.n_buckets; b++)
                if (sh.buckets[b].padded % tt_sharding_group_size(&sh, b)) __builtin_trap();
            tt_sharding_free(&sh);
        } else if (!strstr(tt_last_error(), "fuzz")) {
            __builtin_trap(); /* every error names the checkpoint */
        }
        tt_model_free(m);
    }
    cJSON_Delete(meta);
    return 0;
}
