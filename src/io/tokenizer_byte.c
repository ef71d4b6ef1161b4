/* tokenizer_byte.c — byte-level encode/decode with BOS/EOS ids past the bytes. */
#include "io/tokenizer_byte.h"

#include "core/core.h"

tt_err tt_byte_encode(const void *bytes, size_t n, int flags, int32_t *ids, size_t cap, size_t *n_out)
{
    const uint8_t *b = bytes;
    size_t need = n + ((flags & TT_BYTE_ADD_BOS) ? 1 : 0) + ((flags & TT_BYTE_ADD_EOS) ? 1 : 0);
    if (need < n || need > cap)
        return tt_errorf("byte tokenizer: encoding %zu bytes needs %zu ids but the buffer holds %zu", n, need, cap);
    size_t k = 0;
    if (flags & TT_BYTE_ADD_BOS) ids[k++] = TT_BYTE_BOS;
    for (size_t i = 0; i < n; i++) ids[k++] = b[i];
    if (flags & TT_BYTE_ADD_EOS) ids[k++] = TT_BYTE_EOS;
    *n_out = k;
    return TT_OK;
}

tt_err tt_byte_decode(const int32_t *ids, size_t n, int flags, uint8_t *out, size_t cap, size_t *n_out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id == TT_BYTE_BOS || id == TT_BYTE_EOS) continue;
        if (id < 0 || id >= TT_BYTE_VOCAB) {
            if (flags & TT_BYTE_SKIP_INVALID) continue;
            return tt_errorf("byte tokenizer: id %d at position %zu is outside the vocabulary [0, %d)", id, i,
                             TT_BYTE_VOCAB);
        }
        if (k >= cap) return tt_errorf("byte tokenizer: decoded text does not fit in %zu bytes", cap);
        out[k++] = (uint8_t)id;
    }
    *n_out = k;
    return TT_OK;
}
