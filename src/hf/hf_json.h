/* hf_json.h — typed access to config.json's keys for the readers and writers of src/hf/: each value checked, and
 * an error that names the file (path) and the key. A key that is absent or null takes the default; "present"
 * means neither. */
#ifndef TT_HF_JSON_H
#define TT_HF_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "core/core.h"

const cJSON *hf_present(const cJSON *o, const char *key);
/* v printed compactly into buf, cut with "..." to fit cap */
void hf_json_snip(const cJSON *v, char *buf, size_t cap);
/* A double as the shortest decimal that reads back as exactly it */
cJSON *hf_real_item(double x);
void hf_add_real(cJSON *o, const char *key, double x);
/* The same, written as a JSON float even when whole ("5.0"), for keys transformers types as float strictly */
void hf_add_float(cJSON *o, const char *key, double x);
tt_err hf_get_int(const char *path, const cJSON *o, const char *key, int def, int min, int *out);
/* A positive finite number (JSON's 1e999 reads as infinity). */
tt_err hf_get_pos(const char *path, const cJSON *o, const char *key, double def, double *out);
tt_err hf_get_bool(const char *path, const cJSON *o, const char *key, int def, int *out);
tt_err hf_get_str(const char *path, const cJSON *o, const char *key, const char *def, const char **out);

#endif
