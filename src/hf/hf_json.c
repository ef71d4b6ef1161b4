/* hf_json.c — typed access to config.json's keys (hf_config_internal.h): each value checked, and an error that
 * names the file and the key. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf/hf_json.h"

const cJSON *hf_present(const cJSON *o, const char *key)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return v && !cJSON_IsNull(v) ? v : NULL;
}

void hf_json_snip(const cJSON *v, char *buf, size_t cap)
{
    char *t = cJSON_PrintUnformatted(v);
    snprintf(buf, cap, "%s", t ? t : "?");
    if (t && strlen(t) >= cap && cap > 4) memcpy(buf + cap - 4, "...", 4);
    free(t);
}

/* A double as the shortest decimal that reads back as exactly it. cJSON's own
 * printing keeps 15 digits whenever they read back within an epsilon, which
 * turns a YaRN factor such as 256 / 28 into another number. */
cJSON *hf_real_item(double x)
{
    char buf[40];
    if (!isfinite(x) || (x == floor(x) && fabs(x) < 1e15)) return cJSON_CreateNumber(x);
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    return cJSON_CreateRaw(buf);
}

void hf_add_real(cJSON *o, const char *key, double x) { cJSON_AddItemToObject(o, key, hf_real_item(x)); }

/* The same, written as a JSON float even when whole ("5.0"): for keys transformers' config classes type as float
 * and validate strictly, which refuse 5 */
void hf_add_float(cJSON *o, const char *key, double x)
{
    char buf[40];
    if (isfinite(x) && x == floor(x) && fabs(x) < 1e15) {
        snprintf(buf, sizeof buf, "%.1f", x);
        cJSON_AddItemToObject(o, key, cJSON_CreateRaw(buf));
    } else
        hf_add_real(o, key, x);
}

tt_err hf_get_int(const char *path, const cJSON *o, const char *key, int def, int min, int *out)
{
    const cJSON *v = hf_present(o, key);
    if (!v) {
        *out = def;
        return 0;
    }
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d == floor(d) && d >= min && d <= INT_MAX)) {
        char got[64];
        hf_json_snip(v, got, sizeof got);
        return tt_errorf("%s: key '%s' must be an integer in [%d, %d] (got %s)", path, key, min, INT_MAX, got);
    }
    *out = (int)d;
    return 0;
}

/* A positive finite number (JSON's 1e999 reads as infinity). */
tt_err hf_get_pos(const char *path, const cJSON *o, const char *key, double def, double *out)
{
    const cJSON *v = hf_present(o, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isfinite(v->valuedouble)) {
        char got[64];
        hf_json_snip(v, got, sizeof got);
        return tt_errorf("%s: key '%s' must be a positive finite number (got %s)", path, key, got);
    }
    *out = v->valuedouble;
    return 0;
}

tt_err hf_get_bool(const char *path, const cJSON *o, const char *key, int def, int *out)
{
    const cJSON *v = hf_present(o, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsBool(v)) return tt_errorf("%s: key '%s' must be true or false", path, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

tt_err hf_get_str(const char *path, const cJSON *o, const char *key, const char *def, const char **out)
{
    const cJSON *v = hf_present(o, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsString(v)) return tt_errorf("%s: key '%s' must be a string", path, key);
    *out = v->valuestring;
    return 0;
}
