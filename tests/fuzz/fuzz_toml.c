/* fuzz_toml.c — libFuzzer target for the TOML reader and the config loader:
 * no input may crash them, and any config that loads must survive
 * to_toml -> load with the same values. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "formats/toml.h"
#include "titan/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tt_toml_doc *doc = tt_toml_parse((const char *)data, size, "fuzz.toml");
    if (doc) {
        /* touch every entry so the sanitizers see any bad pointer */
        size_t total = 0;
        for (size_t i = 0; i < doc->n; i++) {
            total += strlen(doc->entries[i].key);
            const tt_toml_value *v = &doc->entries[i].value;
            if (v->type == TT_TOML_STRING) total += strlen(v->str);
            for (size_t j = 0; j < v->n_items; j++)
                if (v->items[j].type == TT_TOML_STRING) total += strlen(v->items[j].str);
        }
        if (total == (size_t)-1) __builtin_trap();
    }
    tt_toml_free(doc);

    tt_config c;
    tt_config_defaults(&c);
    if (tt_config_load_string(&c, (const char *)data, size, "fuzz.toml") != 0) return 0;
    tt_config_finalize(&c); /* may fail; either way the struct must print and reload */
    char *text = tt_config_to_toml(&c);
    if (!text) return 0;
    tt_config d;
    tt_config_defaults(&d);
    if (tt_config_load_string(&d, text, strlen(text), "emitted.toml") != 0) __builtin_trap();
    if (memcmp(&c, &d, offsetof(tt_config, set_by_user_)) != 0) __builtin_trap();
    free(text);
    return 0;
}
