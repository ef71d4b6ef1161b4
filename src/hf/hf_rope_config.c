/* hf_rope_config.c — RoPE's keys of config.json (rope_theta with rope_scaling in transformers 4, rope_parameters in
 * 5): linear, llama3, YaRN and Phi-3's LongRoPE and partial rotation, read into tt_rope_params / tt_rope_ext and
 * written back. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hf/hf_json.h"
#include "hf/hf_rope_config.h"

/* LongRoPE's factors (Phi-3): `key` of d, a list of n positive numbers */
static tt_err read_factors(const char *dp, const cJSON *d, const char *key, int n, float *out)
{
    const cJSON *f = hf_present(d, key);
    if (!f) return tt_errorf("%s: key '%s' is missing", dp, key);
    if (!cJSON_IsArray(f) || cJSON_GetArraySize(f) != n)
        return tt_errorf("%s: key '%s' must be a list of %d numbers (one per rotated pair)", dp, key, n);
    int i = 0;
    for (const cJSON *e = f->child; e; e = e->next, i++) {
        /* kept as fp32, as transformers' tensor of them: it must be a positive finite float */
        const float v = cJSON_IsNumber(e) ? (float)e->valuedouble : 0;
        if (!(v > 0) || !isfinite(v))
            return tt_errorf("%s: %s[%d] must be a positive number a 32-bit float holds", dp, key, i);
        out[i] = v;
    }
    return 0;
}

/* Phi-3's rope: partial_rotary_factor (*rot: the features of a head that rotate, int(hd * factor)) and LongRoPE.
 * Other classes refuse a partial rotation. */
tt_err hf_read_rope(const char *path, const cJSON *j, int max_pos, double theta, int phi3, int hd, int *rot,
                        tt_rope_params *r, tt_rope_ext *x)
{
    const char *dn = "rope_parameters";
    const cJSON *d = hf_present(j, dn);
    if (!d) d = hf_present(j, dn = "rope_scaling");
    if (d && !cJSON_IsObject(d)) return tt_errorf("%s: key '%s' must be an object or null", path, dn);
    memset(r, 0, sizeof *r);
    memset(x, 0, sizeof *x);
    /* transformers 5 keeps rope_theta inside rope_parameters, and that one wins */
    double top;
    if (hf_get_pos(path, j, "rope_theta", theta, &top) || hf_get_pos(path, d, "rope_theta", top, &r->theta)) return -1;
    double prf;
    if (hf_get_pos(path, j, "partial_rotary_factor", 1, &prf) || hf_get_pos(path, d, "partial_rotary_factor", prf, &prf))
        return -1;
    *rot = hd;
    if (prf != 1 && !phi3) return tt_errorf("%s: partial_rotary_factor %g is not supported (only 1)", path, prf);
    if (prf != 1) {
        const double rd = floor(hd * prf); /* int(head_dim * partial_rotary_factor) */
        if (!(rd >= 2 && rd <= hd) || (int)rd % 2)
            return tt_errorf("%s: partial_rotary_factor %g rotates %g of a head's %d features: RoPE needs an even "
                             "number from 2 to %d", path, prf, rd, hd, hd);
        *rot = (int)rd;
    }
    const char *type = "default";
    if (d) {
        if (hf_get_str(path, d, "type", "default", &type) || hf_get_str(path, d, "rope_type", type, &type)) return -1;
        /* Phi-3's configuration reads the older "su" and "yarn" as longrope */
        if (phi3 && (!strcmp(type, "su") || !strcmp(type, "yarn"))) type = "longrope";
        if (!hf_present(d, "type") && !hf_present(d, "rope_type"))
            for (const cJSON *e = d->child; e; e = e->next)
                if (cJSON_IsObject(e))
                    return tt_errorf("%s: '%s' per layer type ('%s') is not supported", path, dn, e->string);
    }
    char dp[4200]; /* errors about the dict's keys name it: "DIR/config.json: rope_scaling: key ..." */
    snprintf(dp, sizeof dp, "%s: %s", path, dn);
    if (strcmp(type, "default") == 0) return 0;
    if (phi3 && strcmp(type, "longrope")) /* Phi3Config.validate_rope */
        return tt_errorf("%s: rope type '%s' is not supported for Phi3ForCausalLM (supported: default, longrope)", dp,
                         type);
    if (strcmp(type, "linear") == 0) {
        x->linear = 1;
        if (!hf_present(d, "factor")) return tt_errorf("%s: key 'factor' is missing", dp);
        return hf_get_pos(dp, d, "factor", 1, &r->factor);
    }
    if (strcmp(type, "llama3") == 0) {
        static const char *const need[] = {"factor", "low_freq_factor", "high_freq_factor"};
        for (int i = 0; i < 3; i++)
            if (!hf_present(d, need[i])) return tt_errorf("%s: key '%s' is missing", dp, need[i]);
        r->llama3 = 1;
        if (hf_get_pos(dp, d, "factor", 1, &r->factor) || hf_get_pos(dp, d, "low_freq_factor", 1, &r->low_freq_factor) ||
            hf_get_pos(dp, d, "high_freq_factor", 1, &r->high_freq_factor) ||
            hf_get_int(dp, d, "original_max_position_embeddings", max_pos, 1, &r->original_max_pos))
            return -1;
        if (!(r->high_freq_factor > r->low_freq_factor))
            return tt_errorf("%s: key 'high_freq_factor' must be greater than low_freq_factor", dp);
        return 0;
    }
    if (strcmp(type, "longrope") == 0 && phi3) {
        /* original_max_position_embeddings: the dict's, else config.json's own (Phi3Config keeps it there) */
        int top;
        double af = 0;
        if (*rot / 2 > TT_ROPE_MAX_FACTORS)
            return tt_errorf("%s: LongRoPE over %d rotated features a head: at most %d are supported", dp, *rot,
                             2 * TT_ROPE_MAX_FACTORS);
        if (hf_get_int(path, j, "original_max_position_embeddings", max_pos, 1, &top) ||
            hf_get_int(dp, d, "original_max_position_embeddings", top, 1, &r->original_max_pos) ||
            hf_get_pos(dp, d, "factor", (double)max_pos / r->original_max_pos, &r->factor) ||
            hf_get_pos(dp, d, "attention_factor", 0, &af) ||
            read_factors(dp, d, "short_factor", *rot / 2, x->short_factor) ||
            read_factors(dp, d, "long_factor", *rot / 2, x->long_factor))
            return -1;
        x->longrope = 1;
        /* _compute_longrope_parameters: sqrt(1 + ln(factor) / ln(original_max_position_embeddings)) past 1 */
        if (af == 0)
            af = r->factor <= 1 || r->original_max_pos <= 1
                     ? 1.0
                     : sqrt(1 + log(r->factor) / log((double)r->original_max_pos));
        x->attention_factor = af;
        return 0;
    }
    if (strcmp(type, "yarn") == 0) {
        x->yarn = 1;
        int trunc = 1;
        double af = 0, ms = 0, msa = 0;
        if (hf_get_int(dp, d, "original_max_position_embeddings", max_pos, 1, &r->original_max_pos) ||
            hf_get_pos(dp, d, "factor", (double)max_pos / r->original_max_pos, &r->factor) ||
            hf_get_pos(dp, d, "attention_factor", 0, &af) || hf_get_bool(dp, d, "truncate", 1, &trunc))
            return -1;
        /* beta_fast/beta_slow/mscale/mscale_all_dim: `x or default` in Python, so 0 is the default */
        static const char *const opt[] = {"beta_fast", "beta_slow", "mscale", "mscale_all_dim"};
        double *dst[] = {&x->beta_fast, &x->beta_slow, &ms, &msa};
        for (int i = 0; i < 4; i++) {
            const cJSON *v = hf_present(d, opt[i]);
            if (v && (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0))
                return tt_errorf("%s: key '%s' must be a non-negative number", dp, opt[i]);
            *dst[i] = v && v->valuedouble != 0 ? v->valuedouble : 0; /* -0.0 is falsy too: the default, +0 */
        }
        x->beta_fast = x->beta_fast ? x->beta_fast : 32;
        x->beta_slow = x->beta_slow ? x->beta_slow : 1;
        x->yarn_no_truncate = !trunc;
        x->mscale_all_dim = msa;
        if (af == 0 && ms && msa && r->factor > 1) /* get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) */
            af = (0.1 * ms * log(r->factor) + 1.0) / (0.1 * msa * log(r->factor) + 1.0);
        else if (af == 0)
            af = r->factor > 1 ? 0.1 * log(r->factor) + 1.0 : 1.0;
        x->attention_factor = af;
        return 0;
    }
    return tt_errorf("%s: rope type '%s' is not supported (supported: default, linear, llama3, yarn%s)", dp, type,
                     phi3 ? ", longrope" : "");
}

/* LongRoPE's dict (Phi-3): both factor lists (n each), the context they switch at, and the cos/sin scale */
static cJSON *longrope_to_json(const tt_rope_params *r, const tt_rope_ext *x, int n)
{
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "rope_type", "longrope");
    const char *names[2] = {"short_factor", "long_factor"};
    const float *f[2] = {x->short_factor, x->long_factor};
    for (int k = 0; k < 2; k++) {
        cJSON *a = cJSON_AddArrayToObject(d, names[k]);
        for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, hf_real_item((double)f[k][i]));
    }
    hf_add_real(d, "factor", r->factor);
    cJSON_AddNumberToObject(d, "original_max_position_embeddings", r->original_max_pos);
    hf_add_real(d, "attention_factor", tt_rope_attention_scale(r, x));
    return d;
}

cJSON *hf_rope_to_json(const tt_rope_params *r, const tt_rope_ext *x, int rot)
{
    if (x->longrope) return longrope_to_json(r, x, rot / 2);
    if (!x->linear && !r->llama3 && !x->yarn) return cJSON_CreateNull();
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "rope_type", x->linear ? "linear" : r->llama3 ? "llama3" : "yarn");
    hf_add_real(d, "factor", r->factor);
    if (r->llama3) {
        hf_add_real(d, "low_freq_factor", r->low_freq_factor);
        hf_add_real(d, "high_freq_factor", r->high_freq_factor);
    }
    if (r->llama3 || x->yarn) cJSON_AddNumberToObject(d, "original_max_position_embeddings", r->original_max_pos);
    if (x->yarn) {
        hf_add_real(d, "beta_fast", x->beta_fast ? x->beta_fast : 32);
        hf_add_real(d, "beta_slow", x->beta_slow ? x->beta_slow : 1);
        hf_add_real(d, "attention_factor", tt_rope_attention_scale(r, x));
        if (x->mscale_all_dim > 0) hf_add_real(d, "mscale_all_dim", x->mscale_all_dim);
        if (x->yarn_no_truncate) cJSON_AddFalseToObject(d, "truncate");
    }
    return d;
}
