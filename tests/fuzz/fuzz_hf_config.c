/* fuzz_hf_config.c — libFuzzer target for the Hugging Face config.json
 * reader: no input may crash it or make it run long; a config it accepts has
 * a usable shape, and when titan can write it back as config.json
 * (tt_hf_config_to_json, what export writes), reading that gives the same
 * model. Seeds: tests/fixtures/hf/ (config.json of each folder); dictionary:
 * hf_config.dict. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "hf/hf_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tt_hf_config c, d;
    if (tt_hf_config_parse((const char *)data, size, "fuzz/config.json", &c) != 0) {
        if (!strstr(tt_last_error(), "fuzz/config.json")) __builtin_trap(); /* every error names the file */
        return 0;
    }
    const tt_model_cfg *m = &c.model;
    if (m->dim < 1 || m->n_layers < 1 || m->n_heads < 1 || m->n_kv_heads < 1 || m->head_dim < 1 || m->ffn_dim < 1 ||
        m->vocab_size < 1 || m->max_seq_len < 1 || m->n_heads % m->n_kv_heads || !(m->norm_eps > 0) ||
        c.n_eos < 0 || c.n_eos > TT_HF_MAX_EOS)
        __builtin_trap(); /* accepted, but not a shape a model can have */
    /* writing is linear in the layers (Qwen's layer_types): only models that can exist are exported */
    if (m->n_layers > 4096) return 0;
    char *text = tt_hf_config_to_json(&c);
    if (!text) return 0; /* no class can express it: refused with a message */
    if (tt_hf_config_parse(text, strlen(text), "fuzz/written.json", &d) != 0) __builtin_trap();
    c.ext.n_mtp_layers = 0; /* an export holds no multi-token-prediction layer (titan trains the main ones only) */
    c.ext.hf_vlm = 0;       /* nor a vision tower: a Gemma3ForConditionalGeneration's language model exports alone */
    c.ext.hf_mxfp4 = 0;     /* nor quantized experts: GPT-OSS's MXFP4 ones are written dequantized */
    if (d.family != c.family || memcmp(&d.model, &c.model, sizeof c.model) ||
        memcmp(&d.ext, &c.ext, sizeof c.ext) || d.bos_token_id != c.bos_token_id || d.n_eos != c.n_eos ||
        memcmp(d.eos_token_ids, c.eos_token_ids, sizeof c.eos_token_ids) || d.has_pad != c.has_pad ||
        d.pad_token_id != c.pad_token_id)
        __builtin_trap(); /* written back, read as another model */
    free(text);
    return 0;
}
