/* dtype.c — element types, their sizes and names, and bf16/f16 conversion. */
#include <string.h>

#include "core.h"

static const struct { const char *name; size_t size; } dtypes[TT_DTYPE_COUNT] = {
    [TT_F32] = {"f32", 4}, [TT_BF16] = {"bf16", 2}, [TT_F16] = {"f16", 2},
    [TT_I32] = {"i32", 4}, [TT_I64] = {"i64", 8},   [TT_F64] = {"f64", 8},
};

size_t tt_dtype_size(tt_dtype t) { return (unsigned)t < TT_DTYPE_COUNT ? dtypes[t].size : 0; }
const char *tt_dtype_name(tt_dtype t) { return (unsigned)t < TT_DTYPE_COUNT ? dtypes[t].name : "?"; }

int tt_dtype_from_name(const char *s, tt_dtype *out)
{
    for (int i = 0; i < TT_DTYPE_COUNT; i++)
        if (strcmp(s, dtypes[i].name) == 0) {
            *out = (tt_dtype)i;
            return 0;
        }
    return tt_errorf("unknown dtype '%s'", s);
}

float tt_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t tt_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                          /* nearest even */
    return (uint16_t)(u >> 16);
}

float tt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: renormalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            man &= 0x3ff;
            u = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}
