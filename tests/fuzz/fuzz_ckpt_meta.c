/* fuzz_ckpt_meta.c — libFuzzer target: the structural check of a
 * checkpoint's meta.json on arbitrary bytes fails cleanly or accepts. */
#include <stdint.h>

#include "formats/ckpt_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (tt_ckpt_meta_validate((const char *)data, size, "meta.json") != 0 && !tt_last_error()[0]) __builtin_trap();
    (void)tt_xxh64(data, size, 0);
    return 0;
}
