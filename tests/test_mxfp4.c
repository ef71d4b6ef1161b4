/* test_mxfp4.c — GPT-OSS's MXFP4 expert weights (formats/mxfp4.c) against transformers' own dequantizer: the
 * fixture (tools/gen_mxfp4_fixture.py) holds a packed weight, every FP4 code in both nibbles and scales from 2^-127
 * to 2^125, and what convert_moe_packed_tensors makes of it in bf16 and fp32; titan's must equal both bit for bit.
 * Then the pairs that cannot be a weight (E8M0's NaN scale, a value past fp32, shapes and dtypes that do not pair)
 * are refused by name. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "formats/mxfp4.h"
#include "formats/safetensors.h"

#define FIXTURE TITAN_SOURCE_DIR "/tests/fixtures/mxfp4/experts.safetensors"

static const tt_st_tensor *need(const tt_safetensors *st, const char *name)
{
    const tt_st_tensor *t = tt_st_find(st, name);
    CHECK_MSG(t != NULL, "the fixture has no '%s'", name);
    return t;
}

/* titan's dequantization in dt equals the fixture's tensor `want` bit for bit */
static void check_dtype(const tt_st_tensor *b, const tt_st_tensor *s, const tt_st_tensor *want, tt_dtype dt)
{
    int64_t lead, R, G, shape[TT_ST_MAX_DIMS];
    int ndim;
    CHECK(tt_mxfp4_shape(FIXTURE, b, s, &lead, &R, &G, &ndim, shape) == 0);
    CHECK(lead == 3 && R == 5 && G == 2 && ndim == 3 && shape[0] == 3 && shape[1] == 64 && shape[2] == 5);
    CHECK(want->ndim == 3 && want->shape[0] == shape[0] && want->shape[1] == shape[1] && want->shape[2] == shape[2]);
    void *out = calloc(want->nbytes, 1);
    CHECK(out && tt_mxfp4_dequant(FIXTURE, b, s, out, dt) == 0);
    CHECK_MSG(out && !memcmp(out, want->data, want->nbytes), "%s: titan's dequantized values differ from transformers'",
              tt_dtype_name(dt));
    free(out);
}

/* a copy of t with its data replaced */
static tt_st_tensor with_data(const tt_st_tensor *t, const void *data)
{
    tt_st_tensor c = *t;
    c.data = data;
    return c;
}

static void expect_error(const tt_st_tensor *b, const tt_st_tensor *s, const char *what)
{
    float *out = calloc(3 * 64 * 5, sizeof(float));
    const tt_err rc = tt_mxfp4_dequant(FIXTURE, b, s, out, TT_F32);
    CHECK_MSG(rc != 0 && strstr(tt_last_error(), what), "expected an error saying '%s', got %d: %s", what, rc,
              rc ? tt_last_error() : "(none)");
    free(out);
}

int main(void)
{
    tt_safetensors *st = tt_st_open(FIXTURE);
    CHECK_MSG(st != NULL, "%s", tt_last_error());
    if (!st) return th_done("test_mxfp4");
    const tt_st_tensor *b = need(st, "experts.gate_up_proj_blocks"), *s = need(st, "experts.gate_up_proj_scales");
    const tt_st_tensor *w16 = need(st, "want_bf16"), *w32 = need(st, "want_f32");
    if (b && s && w16 && w32) {
        check_dtype(b, s, w32, TT_F32);
        check_dtype(b, s, w16, TT_BF16);

        uint8_t sc[3 * 5 * 2], bl[3 * 5 * 2 * 16];
        memcpy(sc, s->data, sizeof sc);
        memcpy(bl, b->data, sizeof bl);
        /* E8M0's NaN, named with the group it scales */
        sc[7] = 255;
        tt_st_tensor s2 = with_data(s, sc);
        expect_error(b, &s2, "[0, 3, 1] is 255, E8M0's NaN");
        /* 2^127 times a code of 4 or 6 is past fp32 (and bf16): a 0x77 byte holds two sixes */
        sc[7] = 254, bl[7 * 16] = 0x77;
        tt_st_tensor b2 = with_data(b, bl);
        expect_error(&b2, &s2, "past fp32's range");
        /* ... while 2^127 times halves is finite: group 1 of expert 0's row 3, its values 0.5 (low nibbles) and
         * -0.5 (high), become rows 32, 33, ... of the output's column 3 */
        memset(bl + 7 * 16, 0x91, 16);
        float *out = calloc(3 * 64 * 5, sizeof(float));
        CHECK(out && tt_mxfp4_dequant(FIXTURE, &b2, &s2, out, TT_F32) == 0 && out[32 * 5 + 3] == 0x1p126f &&
              out[33 * 5 + 3] == -0x1p126f && out[63 * 5 + 3] == -0x1p126f);
        free(out);

        /* shapes and dtypes that do not pair */
        tt_st_tensor bad = *s;
        bad.shape[2] = 3;
        expect_error(b, &bad, "do not pair");
        bad = *b;
        bad.shape[3] = 8;
        expect_error(&bad, s, "do not pair");
        bad = *s;
        strcpy(bad.dtype, "I8");
        expect_error(b, &bad, "do not pair");
        bad = *b;
        bad.ndim = 2;
        expect_error(&bad, s, "do not pair");
        float one;
        CHECK(tt_mxfp4_dequant(FIXTURE, b, s, &one, TT_F64) != 0 && strstr(tt_last_error(), "fp32 or bf16"));
    }
    tt_st_close(st);
    return th_done("test_mxfp4");
}
