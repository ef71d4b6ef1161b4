/* frozen.c — the frozen base of a LoRA run (see frozen.h). */
#include <stdlib.h>
#include <string.h>

#include "train/frozen.h"

tt_err tt_frozen_init(tt_frozen_base *f, const tt_model *base, tt_dtype linear_dtype, const tt_backend *be, tt_queue *q)
{
    memset(f, 0, sizeof *f);
    f->be = be, f->q = q, f->base = base;
    if (tt_frozen_layout_new(base, linear_dtype, &f->layout)) return -1;
    const size_t bytes = f->layout.bytes ? f->layout.bytes : 1;
    if (tt_mem_check(bytes, "the frozen base of LoRA (%zu parameters, linear weights in %s)", base->numel,
                     tt_dtype_name(linear_dtype)) ||
        !(f->buf = be->alloc(bytes)) || be->zero(q, (tt_mem){f->buf, 0}, bytes) || be->finish(q)) {
        tt_frozen_free(f);
        return tt_error_prefix("the frozen base (%zu bytes): ", bytes);
    }
    return 0;
}

void tt_frozen_free(tt_frozen_base *f)
{
    if (f->buf) f->be->free(f->buf);
    tt_frozen_layout_free(&f->layout);
    memset(f, 0, sizeof *f);
}

tt_mem tt_frozen_unit_mem(const tt_frozen_base *f, int unit) { return (tt_mem){f->buf, f->layout.unit_offset[unit]}; }

static tt_mem param_mem(const tt_frozen_base *f, const tt_model *m, int i)
{
    return (tt_mem){f->buf, f->layout.unit_offset[m->params[i].unit] + f->layout.offset[i]};
}

static tt_err store_read(void *ctx, const tt_model *m, int i, float *dst)
{
    tt_frozen_base *f = ctx;
    const size_t n = (size_t)tt_param_numel(&m->params[i]);
    if (f->layout.dtype[i] == TT_F32) return tt_backend_read(f->be, f->q, dst, param_mem(f, m, i), n * sizeof(float));
    uint16_t *h = malloc((n ? n : 1) * sizeof *h);
    tt_err rc = h ? tt_backend_read(f->be, f->q, h, param_mem(f, m, i), n * sizeof *h)
                  : tt_errorf("out of memory reading '%s'", m->params[i].name);
    for (size_t k = 0; k < n && !rc; k++) dst[k] = tt_bf16_to_f32(h[k]);
    free(h);
    return rc;
}

static tt_err store_write(void *ctx, const tt_model *m, int i, const float *src)
{
    tt_frozen_base *f = ctx;
    const size_t n = (size_t)tt_param_numel(&m->params[i]);
    if (f->layout.dtype[i] == TT_F32) return tt_backend_write(f->be, f->q, param_mem(f, m, i), src, n * sizeof(float));
    uint16_t *h = malloc((n ? n : 1) * sizeof *h);
    if (!h) return tt_errorf("out of memory writing '%s'", m->params[i].name);
    for (size_t k = 0; k < n; k++) h[k] = tt_f32_to_bf16(src[k]);
    tt_err rc = tt_backend_write(f->be, f->q, param_mem(f, m, i), h, n * sizeof *h);
    free(h);
    return rc;
}

tt_param_store tt_frozen_store(tt_frozen_base *f) { return (tt_param_store){f, store_read, store_write}; }

tt_err tt_frozen_hash(tt_frozen_base *f, uint64_t *hash)
{
    uint64_t h = 1469598103934665603ull;
    size_t most = 1;
    for (int u = 0; u < f->base->n_units; u++)
        if (f->layout.unit_bytes[u] > most) most = f->layout.unit_bytes[u];
    unsigned char *b = malloc(most);
    tt_err rc = b ? 0 : tt_errorf("out of memory hashing the frozen base");
    for (int u = 0; u < f->base->n_units && !rc; u++) {
        const size_t n = f->layout.unit_bytes[u];
        if ((rc = tt_backend_read(f->be, f->q, b, tt_frozen_unit_mem(f, u), n))) break;
        /* FNV-1a over 8-byte words (a unit's bytes are a multiple of 64): a base of gigabytes hashes at start-up
         * in about a second */
        for (size_t k = 0; k + 8 <= n; k += 8) {
            uint64_t w;
            memcpy(&w, b + k, 8);
            h = (h ^ w) * 1099511628211ull;
        }
    }
    free(b);
    *hash = h;
    return rc;
}
