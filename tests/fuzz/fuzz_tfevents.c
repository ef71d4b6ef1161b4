/* fuzz_tfevents.c — libFuzzer target for the TensorBoard event file reader.
 * The first byte picks what the rest is: raw file bytes (even: the CRCs guard
 * the decoder), or (odd) a list of Event payloads, each after a length byte,
 * that the target frames with correct CRCs so the protobuf decoder sees them.
 * No input may crash the reader, and one it accepts must also be accepted cut
 * anywhere (a writer killed mid-record), with the whole records before the cut. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "formats/tfevents.h"

/* Frame each payload of `in` (a length byte, then that many bytes) as a TFRecord. */
static size_t frame(const uint8_t *in, size_t n, uint8_t *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len = in[i++];
        if (len > n - i) len = n - i;
        tt_tfrecord_header(len, out + o);
        memcpy(out + o + 12, in + i, len);
        uint32_t c = tt_crc32c_masked(in + i, len);
        for (int k = 0; k < 4; k++) out[o + 12 + len + k] = (uint8_t)(c >> (8 * k));
        o += 16 + len;
        i += len;
    }
    return o;
}

/* Parse the first `cut` bytes: must succeed with a prefix of full's scalars (all of them when exact). */
static void check_cut(const uint8_t *data, size_t cut, const tt_tb_events *full, int exact)
{
    tt_tb_events e;
    if (tt_tb_parse(data, cut, "cut.tfevents", &e) != TT_OK) __builtin_trap();
    if (e.n_records > full->n_records || e.n_scalars > full->n_scalars) __builtin_trap();
    if (exact && (e.n_records != full->n_records || e.n_scalars != full->n_scalars || e.tail_bytes != 0))
        __builtin_trap();
    for (size_t i = 0; i < e.n_scalars; i++)
        if (strcmp(e.scalars[i].tag, full->scalars[i].tag) != 0 || e.scalars[i].step != full->scalars[i].step)
            __builtin_trap();
    tt_tb_events_free(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    const uint8_t *buf = data + 1;
    size_t n = size - 1;
    uint8_t *framed = NULL;
    if (data[0] & 1) { /* at most 16 + 255 bytes of frame per payload byte pair */
        framed = malloc(17 * n + 1);
        if (!framed) return 0;
        n = frame(data + 1, n, framed);
        buf = framed;
    }
    tt_tb_events e;
    if (tt_tb_parse(buf, n, "fuzz.tfevents", &e) == TT_OK) {
        size_t total = strlen(e.file_version);
        for (size_t i = 0; i < e.n_scalars; i++) total += strlen(e.scalars[i].tag);
        if (total == (size_t)-1 || e.tail_bytes > n) __builtin_trap();
        check_cut(buf, n - e.tail_bytes, &e, 1); /* the whole records alone */
        check_cut(buf, (size_t)data[0] * n / 255, &e, 0);
        tt_tb_events_free(&e);
    }
    free(framed);
    return 0;
}
