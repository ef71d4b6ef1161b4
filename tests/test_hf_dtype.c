/* test_hf_dtype.c — the dtype of a Hugging Face export: bf16 folders hold
 * each fp32 weight rounded to nearest even (checked against a rounding
 * written here, by distance, and against an fp32 export of the same model),
 * say bfloat16 in config.json, shard by their halved sizes and load back
 * through titan's own loader; checkpoint.export_dtype's auto picks the source
 * folder's dtype (config.json, else its tensors), and bad values are refused. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "hf/hf_model.h"
#include "formats/safetensors.h"
#include "train/export.h"

#define FIX TITAN_SOURCE_DIR "/tests/fixtures/hf"
static char tmp_root[64];
static const char *export_root; /* tmp_root, or $TITAN_HF_EXPORT_DIR (kept for tests/hf_roundtrip.py) */

/* The bf16 nearest to a finite f, ties to the even mantissa, found by
 * comparing the distances to the two bf16 values around it (not by the bit
 * trick the library uses). */
static uint16_t nearest_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1); /* |lo| <= |f| < |hi|, same sign */
    if ((u & 0xffffu) == 0) return lo;
    double dl = fabs((double)f - tt_bf16_to_f32(lo)), dh = fabs((double)tt_bf16_to_f32(hi) - f);
    if (dl != dh) return dl < dh ? lo : hi;
    return (lo & 1) ? hi : lo;
}

/* The library's rounding (what export writes) on values halfway between two
 * bf16 values, which random weights hardly hit: the even one wins. */
static void test_ties(void)
{
    const uint32_t bits[] = {0x3f808000u, 0x3f818000u, 0xbf808000u, 0xbf818000u, 0x00018000u, 0x7f7e8000u,
                             0x3f808001u, 0x3f807fffu, 0x80000000u};
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
        float f;
        memcpy(&f, &bits[i], 4);
        CHECK_MSG(tt_f32_to_bf16(f) == nearest_bf16(f), "0x%08x: 0x%04x, want 0x%04x", bits[i], tt_f32_to_bf16(f),
                  nearest_bf16(f));
    }
    CHECK(nearest_bf16(1.00390625f) == 0x3f80 && nearest_bf16(1.01171875f) == 0x3f82); /* 1 + 2^-8, 1 + 3 x 2^-8 */
}

static int is_bf16(const tt_st_tensor *t) { return strcmp(t->dtype, "BF16") == 0; }

/* Every tensor of the bf16 folder is BF16 and holds the nearest bf16 of the
 * fp32 folder's tensor of the same name, bit for bit; both have the same names. */
static void check_rounded(const char *name, const char *f32_dir, const char *bf16_dir)
{
    tt_safetensors *a = tt_st_open_dir(f32_dir), *b = tt_st_open_dir(bf16_dir);
    CHECK_MSG(a && b, "%s: %s", name, tt_last_error());
    if (!a || !b) {
        tt_st_close(a), tt_st_close(b);
        return;
    }
    CHECK_MSG(tt_st_count(a) == tt_st_count(b), "%s: %d fp32 tensors, %d bf16", name, tt_st_count(a), tt_st_count(b));
    size_t bytes_a = 0, bytes_b = 0, values = 0, moved = 0;
    int bad = 0;
    for (int i = 0; i < tt_st_count(b); i++) {
        const tt_st_tensor *tb = tt_st_get(b, i), *ta = tt_st_find(a, tb->name);
        CHECK_MSG(ta && is_bf16(tb) && !strcmp(ta->dtype, "F32"), "%s: tensor '%s' (%s)", name, tb->name, tb->dtype);
        if (!ta || !is_bf16(tb) || ta->ndim != tb->ndim || memcmp(ta->shape, tb->shape, sizeof ta->shape)) {
            bad++;
            continue;
        }
        size_t n = ta->nbytes / 4;
        CHECK(tb->nbytes == 2 * n);
        bytes_a += ta->nbytes, bytes_b += tb->nbytes;
        for (size_t k = 0; k < n; k++) {
            float f;
            uint16_t h;
            memcpy(&f, (const char *)ta->data + 4 * k, 4);
            memcpy(&h, (const char *)tb->data + 2 * k, 2);
            if (h != nearest_bf16(f) && bad++ < 5)
                fprintf(stderr, "%s: %s[%zu] = %.9g written as bf16 0x%04x, want 0x%04x\n", name, tb->name, k, f, h,
                        nearest_bf16(f));
            moved += tt_bf16_to_f32(h) != f;
        }
        values += n;
    }
    CHECK_MSG(bad == 0, "%s: %d tensors or values are not the nearest bf16 of the fp32 export", name, bad);
    CHECK(values > 0 && bytes_b * 2 == bytes_a);
    CHECK_MSG(moved > values / 2, "%s: only %zu of %zu values changed: the fp32 weights were bf16 already?", name,
              moved, values);
    tt_st_close(a), tt_st_close(b);
}

/* Every tensor of the bf16 export equals the bf16 source folder's tensor of
 * that name byte for byte: bf16 -> fp32 -> bf16 is exact. */
static void check_same_as_source(const char *name, const char *src_dir, const char *out_dir)
{
    tt_safetensors *a = tt_st_open_dir(src_dir), *b = tt_st_open_dir(out_dir);
    CHECK_MSG(a && b, "%s: %s", name, tt_last_error());
    for (int i = 0; a && b && i < tt_st_count(b); i++) {
        const tt_st_tensor *tb = tt_st_get(b, i), *ta = tt_st_find(a, tb->name);
        CHECK_MSG(ta && is_bf16(ta) && is_bf16(tb) && ta->nbytes == tb->nbytes &&
                      memcmp(ta->data, tb->data, tb->nbytes) == 0,
                  "%s: tensor '%s' differs from the source's", name, tb->name);
    }
    CHECK(a && b && tt_st_count(a) == tt_st_count(b));
    tt_st_close(a), tt_st_close(b);
}

static int count_shards(const char *dir)
{
    int n = 0;
    for (int k = 1; k < 100; k++) {
        char p[4300];
        struct stat sb;
        snprintf(p, sizeof p, "%s/model-%05d-of-%05d.safetensors", dir, 1, k);
        if (stat(p, &sb) == 0) n = k;
    }
    return n;
}

/* Export a fixture in fp32 and in bf16 (the same shard limit), and check the
 * bf16 folder: the rounding, config.json, the shards, titan loading it. */
static void test_bf16_export(const char *name, size_t shard)
{
    char src[4200], f32_dir[4200], bf16_dir[4200];
    snprintf(src, sizeof src, FIX "/%s", name);
    snprintf(f32_dir, sizeof f32_dir, "%s/f32-%s", tmp_root, name);
    snprintf(bf16_dir, sizeof bf16_dir, "%s/export-%s-bf16", export_root, name);
    tt_hf_config hc;
    float *w = NULL;
    tt_model *m = tt_hf_load(src, &hc, &w);
    CHECK_MSG(m != NULL, "%s: %s", name, tt_last_error());
    if (!m) return;
    tt_hf_export_opts o = tt_hf_export_defaults();
    CHECK(o.dtype == TT_F32);
    o.family = hc.family;
    o.max_shard_bytes = shard;
    o.bos_token_id = hc.bos_token_id;
    o.n_eos = hc.n_eos;
    memcpy(o.eos_token_ids, hc.eos_token_ids, sizeof o.eos_token_ids);
    tt_param_store store = tt_model_host_store(w);
    CHECK_MSG(tt_hf_export(m, f32_dir, &o, &store) == 0, "%s fp32: %s", name, tt_last_error());
    o.dtype = TT_BF16;
    CHECK_MSG(tt_hf_export(m, bf16_dir, &o, &store) == 0, "%s bf16: %s", name, tt_last_error());

    int bf16_source = tt_hf_weights_dtype(src, hc.torch_dtype) == TT_BF16;
    if (bf16_source) check_same_as_source(name, src, bf16_dir);
    else check_rounded(name, f32_dir, bf16_dir);
    if (shard) { /* both sharded; the bf16 folder in about half as many shards */
        int n32 = count_shards(f32_dir), n16 = count_shards(bf16_dir);
        printf("%-16s shards of %zu bytes: fp32 %d, bf16 %d\n", name, shard, n32, n16);
        CHECK_MSG(n16 > 1 && n32 > n16, "%s: %d fp32 shards, %d bf16", name, n32, n16);
    }

    /* config.json says bfloat16; titan loads the folder, as the bf16 values */
    char p[4300];
    snprintf(p, sizeof p, "%s/config.json", bf16_dir);
    char *text = th_read_file(p, NULL);
    CHECK_MSG(text && strstr(text, "\"torch_dtype\":\t\"bfloat16\""), "%s: %s", p, text ? text : "unreadable");
    free(text);
    tt_hf_config hc2;
    float *w2 = NULL;
    tt_model *m2 = tt_hf_load(bf16_dir, &hc2, &w2);
    CHECK_MSG(m2 != NULL, "%s reloaded: %s", name, tt_last_error());
    if (m2) {
        CHECK(!strcmp(hc2.torch_dtype, "bfloat16") && tt_hf_weights_dtype(bf16_dir, hc2.torch_dtype) == TT_BF16);
        CHECK(hc2.family == hc.family && m2->numel == m->numel);
        size_t bad = 0;
        for (size_t i = 0; i < m->numel && m2->numel == m->numel; i++) {
            float want = tt_bf16_to_f32(nearest_bf16(w[i]));
            bad += memcmp(&w2[i], &want, 4) != 0;
        }
        CHECK_MSG(bad == 0, "%s: %zu reloaded weights are not the bf16 rounding of the originals", name, bad);
        tt_model_free(m2);
        tt_free(w2);
    }
    tt_model_free(m);
    tt_free(w);
}

/* The source dtype: config.json's torch_dtype / dtype, else the tensors'. */
static void test_source_dtype(void)
{
    tt_hf_config hc;
    CHECK(tt_hf_config_read(FIX "/llama_bias_bf16", &hc) == 0);
    CHECK(tt_hf_weights_dtype(FIX "/llama_bias_bf16", hc.torch_dtype) == TT_BF16);
    CHECK(tt_hf_config_read(FIX "/llama", &hc) == 0);
    CHECK(tt_hf_weights_dtype(FIX "/llama", hc.torch_dtype) == TT_F32);
    /* no dtype in config.json: the first floating-point tensor's */
    CHECK(tt_hf_weights_dtype(FIX "/llama_bias_bf16", "") == TT_BF16);
    CHECK(tt_hf_weights_dtype(FIX "/llama_bias_bf16", NULL) == TT_BF16);
    CHECK(tt_hf_weights_dtype(FIX "/qwen3", "") == TT_F32); /* sharded */
    CHECK(tt_hf_weights_dtype(FIX "/llama", "float16") == TT_F16);
    CHECK(tt_hf_weights_dtype(tmp_root, "") == TT_F32); /* no weights at all */
}

/* checkpoint.export_dtype: auto is the source's bf16 or fp32 (fp32 without a
 * source folder), an explicit value wins; unknown values name the key. */
static void test_run_dtype(void)
{
    static const struct { const char *value, *src; tt_dtype want; } cases[] = {
        {"auto", FIX "/llama_bias_bf16", TT_BF16}, {"", FIX "/llama_bias_bf16", TT_BF16},
        {"auto", FIX "/llama", TT_F32},            {"auto", NULL, TT_F32},
        {"float32", FIX "/llama_bias_bf16", TT_F32}, {"bfloat16", FIX "/llama", TT_BF16},
        {"bfloat16", NULL, TT_BF16},
    };
    tt_config *c = calloc(1, sizeof *c);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tt_config_defaults(c);
        CHECK(c->checkpoint.export_dtype == TT_EXPORT_DTYPE_AUTO);
        CHECK_MSG(tt_config_set(c, "checkpoint.export_dtype", cases[i].value, "test") == 0, "%s", tt_last_error());
        tt_run r;
        memset(&r, 0, sizeof r);
        r.cfg = c;
        if (cases[i].src) {
            snprintf(c->model.hf_assets_path, sizeof c->model.hf_assets_path, "%s", cases[i].src);
            r.has_hf = tt_hf_config_read(cases[i].src, &r.hf) == 0;
        }
        CHECK_MSG(tt_run_export_dtype(&r) == cases[i].want, "export_dtype '%s', source %s: %s", cases[i].value,
                  cases[i].src ? cases[i].src : "none", tt_dtype_name(tt_run_export_dtype(&r)));
        char buf[32];
        CHECK(tt_config_get(c, "checkpoint.export_dtype", buf, sizeof buf) == 0 &&
              !strcmp(buf, cases[i].value[0] ? cases[i].value : "auto"));
    }
    tt_config_defaults(c);
    CHECK(tt_config_set(c, "checkpoint.export_dtype", "float8", "--dtype") != 0);
    CHECK_MSG(strstr(tt_last_error(), "checkpoint.export_dtype") && strstr(tt_last_error(), "float8") &&
                  strstr(tt_last_error(), "bfloat16"),
              "%s", tt_last_error());
    free(c);

    /* the writer itself takes f32 or bf16 only */
    tt_hf_config hc;
    float *w = NULL;
    tt_model *m = tt_hf_load(FIX "/llama", &hc, &w);
    CHECK(m != NULL);
    if (m) {
        tt_hf_export_opts o = tt_hf_export_defaults();
        o.dtype = TT_F16;
        tt_param_store store = tt_model_host_store(w);
        char out[200];
        snprintf(out, sizeof out, "%s/f16", tmp_root);
        CHECK(tt_hf_export(m, out, &o, &store) != 0 && strstr(tt_last_error(), "f16"));
        char p[300];
        snprintf(p, sizeof p, "%s/config.json", out);
        struct stat sb;
        CHECK(stat(p, &sb) != 0); /* refused before writing anything */
    }
    tt_model_free(m);
    tt_free(w);
}

int main(void)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/titan_test_hf_dtype_XXXXXX");
    if (!mkdtemp(tmp_root)) return th_skip("test_hf_dtype", "cannot create a temporary directory");
    export_root = getenv("TITAN_HF_EXPORT_DIR") ? getenv("TITAN_HF_EXPORT_DIR") : tmp_root;
    /* fp32 sources; a bf16 one; GPT-2's transposed and fused tensors; stacked experts; sharded */
    test_ties();
    test_bf16_export("llama", 0);
    test_bf16_export("llama_bias_bf16", 0);
    test_bf16_export("gpt2", 0);
    test_bf16_export("qwen3_moe_packed", 0);
    test_bf16_export("qwen3", 20000);
    test_source_dtype();
    test_run_dtype();
    th_rm_tree(tmp_root);
    return th_done("test_hf_dtype");
}
