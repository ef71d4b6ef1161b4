/* fuzz_shard.c — libFuzzer target for token shards: the in-memory validator
 * on any bytes, then (for images it accepts) the file reader and both loader
 * modes over them, which must never read out of bounds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"
#include "data/loader.h"
#include "data/shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tt_shard_header h;
    int ok = tt_shard_validate(data, size, "fuzz.bin", &h) == TT_OK;
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_shard_%ld.bin", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    /* the file path must agree with the in-memory check */
    tt_shard *s = tt_shard_open(path);
    if ((s != NULL) != ok) abort();
    if (s) {
        uint64_t sum = 0;
        for (uint64_t i = 0; i < s->hdr.token_count; i++) sum += tt_shard_token(s, i);
        if (s->hdr.token_count && sum == UINT64_MAX) abort(); /* keep the reads */
        tt_shard_close(s);
    }
    if (ok) {
        for (int mode = 0; mode < 2; mode++) {
            int T = 1 + (int)(size % 13), B = 1 + (int)(size % 3);
            tt_loader_cfg cfg = {path, T, B, size, (tt_loader_mode)mode, (int)(size % 2), 2};
            tt_loader *l = tt_loader_open(&cfg);
            if (!l) continue;
            tt_batch *b = tt_batch_new(B, T);
            for (int k = 0; b && k < 8 && tt_loader_next(l, b) == 1; k++)
                for (int i = 0; i < B * T; i++)
                    if (b->targets[i] != TT_IGNORE_INDEX && (uint32_t)b->targets[i] >= h.vocab_size) abort();
            tt_loader_state st = tt_loader_get_state(l);
            if (tt_loader_set_state(l, st) != TT_OK) abort();
            tt_batch_free(b);
            tt_loader_close(l);
        }
    }
    unlink(path);
    return 0;
}
