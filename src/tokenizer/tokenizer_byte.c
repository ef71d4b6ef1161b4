/* tokenizer_byte.c — byte-level encode/decode with BOS/EOS ids past the bytes. */
#include <cjson/cJSON.h>

#include "tokenizer/tokenizer_byte.h"

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

/* GPT-2's byte-to-unicode map: printable bytes stand for themselves, the
 * others for 256, 257, ... in order, so every byte is one visible char. */
static unsigned byte_char(int b)
{
    int n = 0;
    for (int x = 0; x < 256; x++) {
        int printable = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255);
        if (x == b) return printable ? (unsigned)x : 256u + (unsigned)n;
        if (!printable) n++;
    }
    return 0;
}

static int put_utf8(char *p, unsigned c)
{
    if (c < 0x80) return p[0] = (char)c, 1;
    p[0] = (char)(0xC0 | (c >> 6));
    p[1] = (char)(0x80 | (c & 0x3F));
    return 2; /* every char of the map is below U+0800 */
}

/* {"type": "ByteLevel", ...} without prefix space or regex: bytes as they are */
static void add_byte_level(cJSON *parent, const char *key)
{
    cJSON *o = cJSON_AddObjectToObject(parent, key);
    cJSON_AddStringToObject(o, "type", "ByteLevel");
    cJSON_AddBoolToObject(o, "add_prefix_space", 0);
    cJSON_AddBoolToObject(o, "trim_offsets", 0);
    cJSON_AddBoolToObject(o, "use_regex", 0);
}

char *tt_byte_tokenizer_hf_json(void)
{
    cJSON *root = cJSON_CreateObject(), *vocab = cJSON_CreateObject(), *added = cJSON_CreateArray();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    const char *special[2] = {"<|bos|>", "<|eos|>"};
    for (int i = 0; i < 2; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "id", TT_BYTE_BOS + i);
        cJSON_AddStringToObject(t, "content", special[i]);
        cJSON_AddBoolToObject(t, "single_word", 0);
        cJSON_AddBoolToObject(t, "lstrip", 0);
        cJSON_AddBoolToObject(t, "rstrip", 0);
        cJSON_AddBoolToObject(t, "normalized", 0);
        cJSON_AddBoolToObject(t, "special", 1);
        cJSON_AddItemToArray(added, t);
    }
    cJSON_AddItemToObject(root, "added_tokens", added);
    cJSON_AddNullToObject(root, "normalizer");
    add_byte_level(root, "pre_tokenizer");
    /* BOS before every text, as the byte tokenizer's documents start */
    cJSON *post = cJSON_AddObjectToObject(root, "post_processor");
    cJSON_AddStringToObject(post, "type", "TemplateProcessing");
    cJSON *single = cJSON_AddArrayToObject(post, "single");
    cJSON *s0 = cJSON_CreateObject(), *s1 = cJSON_CreateObject();
    cJSON *sp = cJSON_AddObjectToObject(s0, "SpecialToken"), *sq = cJSON_AddObjectToObject(s1, "Sequence");
    cJSON_AddStringToObject(sp, "id", special[0]);
    cJSON_AddNumberToObject(sp, "type_id", 0);
    cJSON_AddStringToObject(sq, "id", "A");
    cJSON_AddNumberToObject(sq, "type_id", 0);
    cJSON_AddItemToArray(single, s0);
    cJSON_AddItemToArray(single, s1);
    cJSON *pair = cJSON_AddArrayToObject(post, "pair");
    cJSON_AddItemToArray(pair, cJSON_Duplicate(s0, 1));
    cJSON_AddItemToArray(pair, cJSON_Duplicate(s1, 1));
    cJSON *s2 = cJSON_CreateObject(), *sb = cJSON_AddObjectToObject(s2, "Sequence");
    cJSON_AddStringToObject(sb, "id", "B");
    cJSON_AddNumberToObject(sb, "type_id", 1);
    cJSON_AddItemToArray(pair, s2);
    cJSON *st = cJSON_AddObjectToObject(post, "special_tokens"), *sbos = cJSON_AddObjectToObject(st, special[0]);
    cJSON_AddStringToObject(sbos, "id", special[0]);
    cJSON *ids = cJSON_AddArrayToObject(sbos, "ids"), *toks = cJSON_AddArrayToObject(sbos, "tokens");
    cJSON_AddItemToArray(ids, cJSON_CreateNumber(TT_BYTE_BOS));
    cJSON_AddItemToArray(toks, cJSON_CreateString(special[0]));
    add_byte_level(root, "decoder");
    /* a BPE without merges: every byte is its own token, id = byte value */
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddNullToObject(model, "continuing_subword_prefix");
    cJSON_AddNullToObject(model, "end_of_word_suffix");
    cJSON_AddBoolToObject(model, "fuse_unk", 0);
    cJSON_AddBoolToObject(model, "byte_fallback", 0);
    cJSON_AddBoolToObject(model, "ignore_merges", 0);
    for (int b = 0; b < 256; b++) {
        char ch[4] = {0};
        put_utf8(ch, byte_char(b));
        cJSON_AddNumberToObject(vocab, ch, b);
    }
    cJSON_AddItemToObject(model, "vocab", vocab);
    cJSON_AddArrayToObject(model, "merges");
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) tt_errorf("out of memory");
    return text;
}
