/* fuzz_safetensors.c — libFuzzer target: tt_st_parse on arbitrary bytes must
 * either fail with a message or give tensors that all lie inside the input,
 * tile its data section, and are found again by name. Each two tensors in a
 * row are also taken as an MXFP4 pair (blocks, scales; GPT-OSS's experts):
 * refused with a message, or dequantized to finite values. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/mxfp4.h"
#include "formats/safetensors.h"

/* blocks and scales dequantized, when they pair and are small */
static void try_mxfp4(const tt_st_tensor *b, const tt_st_tensor *s)
{
    int64_t lead, R, G, shape[TT_ST_MAX_DIMS];
    int nd;
    if (tt_mxfp4_shape("fuzz.safetensors", b, s, &lead, &R, &G, &nd, shape)) {
        if (!tt_last_error()[0]) __builtin_trap();
        return;
    }
    if (lead > 64 || R > 64 || G > 64) return; /* the pair's size is checked; its count of values kept small */
    const size_t n = (size_t)(lead * R * G * 32);
    float *out = malloc(n * sizeof *out);
    if (!out) return;
    if (tt_mxfp4_dequant("fuzz.safetensors", b, s, out, TT_F32) == 0) {
        for (size_t i = 0; i < n; i++)
            if (!isfinite(out[i])) __builtin_trap(); /* dequantized, but not a weight */
    } else if (!tt_last_error()[0])
        __builtin_trap();
    free(out);
}

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
    for (int i = 0; i + 1 < tt_st_count(st); i++) try_mxfp4(tt_st_get(st, i), tt_st_get(st, i + 1));
    if (total == (size_t)-1 && sink == 1) __builtin_trap(); /* keeps the reads */
    (void)tt_st_metadata(st, "format");
    tt_st_close(st);
    return 0;
}
