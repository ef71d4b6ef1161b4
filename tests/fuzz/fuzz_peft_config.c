/* fuzz_peft_config.c — libFuzzer target for PEFT's adapter_config.json reader
 * and tensor names: no input may crash them; every error names the source; a
 * config it accepts is one titan can use, and writing it (what export
 * writes) and reading that gives the same config; the same bytes as a tensor
 * name, when they parse, are what tt_peft_tensor_name gives back. Seed:
 * tests/fixtures/peft/adapter_config.json; dictionary: peft_config.dict. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "hf/peft.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_config(const uint8_t *data, size_t size)
{
    tt_peft_config c, d;
    if (tt_peft_config_parse((const char *)data, size, "fuzz/adapter_config.json", &c) != 0) {
        if (!strstr(tt_last_error(), "fuzz/adapter_config.json")) __builtin_trap(); /* every error names the file */
        return;
    }
    if (c.r < 1 || !isfinite(c.alpha) || !(c.dropout >= 0 && c.dropout < 1) ||
        (c.all_linear ? c.n_targets != 0 : c.n_targets < 1 || c.n_targets > TT_PEFT_MAX_TARGETS) ||
        !memchr(c.base_model, 0, sizeof c.base_model))
        __builtin_trap(); /* accepted, but not a config titan can use */
    for (int i = 0; i < c.n_targets; i++) {
        if (!c.targets[i][0] || !memchr(c.targets[i], 0, sizeof c.targets[i])) __builtin_trap();
        {
            int m = tt_peft_match(&c, c.targets[i]);
            if (m < 0 || m > i) __builtin_trap(); /* a target matches itself, or an earlier one does */
        }
    }
    char *text = tt_peft_config_to_json(&c);
    if (!text) __builtin_trap(); /* read, but export could not write it */
    if (tt_peft_config_parse(text, strlen(text), "fuzz/written.json", &d) != 0 || memcmp(&c, &d, sizeof c))
        __builtin_trap(); /* written back, read as another config */
    free(text);
}

static void check_name(const uint8_t *data, size_t size)
{
    char name[512], module[512], back[600];
    size_t n = size < sizeof name - 1 ? size : sizeof name - 1;
    memcpy(name, data, n);
    name[n] = 0;
    int b = -1;
    if (tt_peft_tensor_parse(name, module, sizeof module, &b) != 0) {
        if (!strstr(tt_last_error(), "tensor '")) __builtin_trap();
        return;
    }
    if ((b != 0 && b != 1) || tt_peft_tensor_name(module, b, back, sizeof back) != 0 || strcmp(back, name))
        __builtin_trap(); /* parsed, but the name it gives back is another */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_config(data, size);
    check_name(data, size);
    return 0;
}
