/* fuzz_safetensors.c — libFuzzer target: tt_st_parse on arbitrary bytes must
 * either fail with a message or give tensors that all lie inside the input,
 * tile its data section, and are found again by name. */
#include <stdint.h>
#include <string.h>

#include "formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tt_safetensors *st = NULL;
    if (tt_st_parse(data, size, "fuzz.safetensors", &st) != 0) {
        if (!tt_last_error()[0]) __builtin_trap();
        return 0;
    }
    const uint8_t *end = data + size, *prev_end = NULL;
    size_t total = 0;
    uint8_t sink = 0; /* read the first and last byte: ASan checks they are mapped */
    for (int i = 0; i < tt_st_count(st); i++) {
        const tt_st_tensor *t = tt_st_get(st, i);
        const uint8_t *p = t->data;
        if (p < data + 8 || t->nbytes > (size_t)(end - p)) __builtin_trap(); /* outside the input */
        if (prev_end && p != prev_end) __builtin_trap();                     /* not in file order */
        prev_end = p + t->nbytes;
        if (tt_st_find(st, t->name) != t) __builtin_trap();                  /* names unique, index right */
        if (t->nbytes) sink ^= p[0] ^ p[t->nbytes - 1];
        total += t->nbytes;
    }
    if (tt_st_count(st) > 0 && prev_end != end) __builtin_trap(); /* the data must end the file */
    if (total == (size_t)-1 && sink == 1) __builtin_trap(); /* keeps the reads */
    (void)tt_st_metadata(st, "format");
    tt_st_close(st);
    return 0;
}
