/* config.c — the run configuration: the table of every key (type, field,
 * range, default, help; config_keys.c) drives loading TOML, command-line
 * overrides, the flavor merge, validation, printing back to TOML and the
 * help text. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/core.h"
#include "formats/toml.h"
#include "config/config_keys.h"
#include "config/flavors.h"
#include "titan/config.h"

/* enum fields are written through int pointers (store, set_text) */
_Static_assert(sizeof(tt_model_name) == sizeof(int) && sizeof(tt_decay_type) == sizeof(int) &&
                   sizeof(tt_ac_mode) == sizeof(int) && sizeof(tt_reshard_mode) == sizeof(int) &&
                   sizeof(tt_fault_kind) == sizeof(int) && sizeof(tt_export_dtype) == sizeof(int),
               "enum size");

static int find_key(const char *key)
{
    for (size_t i = 0; i < tt_cfg_n_keys; i++)
        if (!strcmp(tt_cfg_keys[i].key, key)) return (int)i;
    return -1;
}

static void *field(tt_config *c, const cfg_key *k) { return (char *)c + k->off; }
static const void *cfield(const tt_config *c, const cfg_key *k) { return (const char *)c + k->off; }

bool tt_config_is_set(const tt_config *c, const char *key)
{
    int i = find_key(key);
    return i >= 0 && c->set_by_user_[i];
}

/* set_by_user_: 0 unset, 1 by a recipe file, OVERRIDDEN by the command line or tt_config_set */
#define OVERRIDDEN 2

bool tt_config_is_overridden(const tt_config *c, const char *key)
{
    int i = find_key(key);
    return i >= 0 && c->set_by_user_[i] == OVERRIDDEN;
}

const char *tt_config_key_name(size_t i) { return i < tt_cfg_n_keys ? tt_cfg_keys[i].key : NULL; }

/* ---- text building ---------------------------------------------------------- */

typedef struct {
    char *d;
    size_t n, cap;
    bool oom;
} tbuf;

static void tb_printf(tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tb_printf(tbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (b->n + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + (size_t)n + 1) cap *= 2;
        char *d = realloc(b->d, cap);
        if (!d) {
            b->oom = true;
            return;
        }
        b->d = d;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->d + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

/* The shortest decimal text that reads back as exactly x, shaped as a TOML
 * float (always with '.' or an exponent). */
static void format_float(double x, char *buf, size_t size)
{
    if (x == floor(x) && fabs(x) < 1e15) { /* whole numbers read best as 10000.0 */
        snprintf(buf, size, "%.1f", x);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    if (!strpbrk(buf, ".eEn")) strncat(buf, ".0", size - strlen(buf) - 1);
}

static void format_range(const cfg_key *k, char *buf, size_t size)
{
    bool is_int = k->type == K_INT || k->type == K_I64;
    bool unbounded = isinf(k->hi) || (is_int && k->hi >= BIG);
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, "%.15g", k->lo);
    snprintf(hi, sizeof hi, "%.15g", k->hi);
    if (unbounded) snprintf(buf, size, "%s %s", k->flags & LO_OPEN ? ">" : ">=", lo);
    else
        snprintf(buf, size, "in %c%s, %s%c", k->flags & LO_OPEN ? '(' : '[', lo, hi, k->flags & HI_OPEN ? ')' : ']');
    if (k->flags & NEG1) strncat(buf, " or -1", size - strlen(buf) - 1);
}

static void format_choices(const cfg_key *k, char *buf, size_t size)
{
    buf[0] = 0;
    for (int i = 0; k->choices[i]; i++) {
        if (i) strncat(buf, ", ", size - strlen(buf) - 1);
        strncat(buf, k->choices[i], size - strlen(buf) - 1);
    }
}

/* A TOML basic string with every byte that needs it escaped. */
static void put_toml_string(tbuf *b, const char *s)
{
    tb_printf(b, "\"");
    for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
        if (*q == '"' || *q == '\\') tb_printf(b, "\\%c", *q);
        else if (*q == '\n') tb_printf(b, "\\n");
        else if (*q == '\t') tb_printf(b, "\\t");
        else if (*q < 0x20 || *q == 0x7f) tb_printf(b, "\\u%04X", *q);
        else tb_printf(b, "%c", *q);
    }
    tb_printf(b, "\"");
}

/* Append key k's value, as TOML (strings quoted) or as plain text. */
static void put_value(tbuf *b, const tt_config *c, const cfg_key *k, bool toml)
{
    const void *p = cfield(c, k);
    char num[64];
    switch (k->type) {
    case K_INT: tb_printf(b, "%d", *(const int *)p); break;
    case K_I64: tb_printf(b, "%lld", (long long)*(const int64_t *)p); break;
    case K_FLOAT:
        format_float(*(const double *)p, num, sizeof num);
        tb_printf(b, "%s", num);
        break;
    case K_BOOL: tb_printf(b, "%s", *(const bool *)p ? "true" : "false"); break;
    case K_STRING:
        if (toml) put_toml_string(b, (const char *)p);
        else tb_printf(b, "%s", (const char *)p);
        break;
    case K_ENUM: {
        int v = *(const int *)p, n = 0;
        while (k->choices[n]) n++;
        const char *name = v >= 0 && v < n ? k->choices[v] : "?";
        tb_printf(b, toml ? "\"%s\"" : "%s", name);
        break;
    }
    }
}

/* Copy a string that fits, zeroing the rest of the field, so equal configs
 * compare equal byte for byte. */
static void put_str(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    memset(dst, 0, size);
    memcpy(dst, src, n < size ? n : size - 1);
}

/* ---- setting one key ------------------------------------------------------------ */

static bool in_range(const cfg_key *k, double x)
{
    if ((k->flags & NEG1) && x == -1) return true;
    if (isnan(x)) return false;
    if ((k->flags & LO_OPEN) ? x <= k->lo : x < k->lo) return false;
    if ((k->flags & HI_OPEN) ? x >= k->hi : x > k->hi) return false;
    return true;
}

static const char *expected(const cfg_key *k)
{
    switch (k->type) {
    case K_INT:
    case K_I64: return "an integer";
    case K_FLOAT: return "a number";
    case K_BOOL: return "true or false";
    case K_STRING: return "a string";
    case K_ENUM: return "a string";
    }
    return "?";
}

/* Store a parsed value into key ki; where ("file:LINE" or "command line")
 * starts error messages. */
static int store(tt_config *c, int ki, const tt_toml_value *v, const char *where)
{
    const cfg_key *k = &tt_cfg_keys[ki];
    void *p = field(c, k);
    char buf[256];
    bool type_ok = false;
    switch (k->type) {
    case K_INT:
    case K_I64: type_ok = v->type == TT_TOML_INT; break;
    case K_FLOAT: type_ok = v->type == TT_TOML_INT || v->type == TT_TOML_FLOAT; break;
    case K_BOOL: type_ok = v->type == TT_TOML_BOOL; break;
    case K_STRING:
        type_ok = v->type == TT_TOML_STRING || (v->type == TT_TOML_ARRAY && k->flags & LIST &&
                                                (!v->n_items || v->items[0].type == TT_TOML_STRING));
        break;
    case K_ENUM: type_ok = v->type == TT_TOML_STRING; break;
    }
    if (!type_ok) {
        if (k->type == K_ENUM) format_choices(k, buf, sizeof buf);
        return tt_errorf("%s: %s: expected %s%s%s%s, got %s %s", where, k->key, expected(k),
                         k->type == K_ENUM ? " (one of: " : "", k->type == K_ENUM ? buf : "",
                         k->type == K_ENUM ? ")" : "",
                         v->type == TT_TOML_INT || v->type == TT_TOML_ARRAY ? "an" : "a", tt_toml_type_name(v->type));
    }
    if (k->type == K_INT || k->type == K_I64 || k->type == K_FLOAT) {
        double x = v->type == TT_TOML_INT ? (double)v->i : v->f;
        if (!in_range(k, x)) {
            char num[64];
            format_range(k, buf, sizeof buf);
            if (x > k->hi && k->type != K_FLOAT && k->hi >= BIG) /* written ">= lo" by format_range: say the bound */
                snprintf(buf, sizeof buf, "%s %.0f", k->flags & HI_OPEN ? "<" : "<=", k->hi);
            if (v->type == TT_TOML_INT) snprintf(num, sizeof num, "%lld", (long long)v->i);
            else format_float(v->f, num, sizeof num);
            return tt_errorf("%s: %s = %s is out of range (must be %s)", where, k->key, num, buf);
        }
        if (k->type == K_INT) *(int *)p = (int)v->i;
        else if (k->type == K_I64) *(int64_t *)p = v->i;
        else *(double *)p = x;
    } else if (k->type == K_BOOL) {
        *(bool *)p = v->b;
    } else if (k->type == K_STRING && v->type == TT_TOML_ARRAY) { /* a list key: its items, comma-separated */
        size_t n = 0;
        for (size_t i = 0; i < v->n_items; i++) {
            const size_t len = strlen(v->items[i].str);
            if (strchr(v->items[i].str, ',') || !len)
                return tt_errorf("%s: %s: item %zu ('%.64s') is empty or holds a comma", where, k->key, i + 1,
                                 v->items[i].str);
            if (n + len + 1 >= k->size)
                return tt_errorf("%s: %s: value too long (at most %zu bytes in all)", where, k->key, k->size - 1);
            memcpy((char *)p + n, v->items[i].str, len);
            n += len;
            ((char *)p)[n++] = ',';
        }
        ((char *)p)[n ? n - 1 : 0] = 0;
    } else if (k->type == K_STRING) {
        size_t n = strlen(v->str);
        if (n >= k->size) return tt_errorf("%s: %s: value too long (%zu bytes, at most %zu)", where, k->key, n, k->size - 1);
        put_str(p, k->size, v->str);
    } else {
        int i;
        for (i = 0; k->choices[i]; i++)
            if (!strcmp(k->choices[i], v->str)) break;
        if (!v->str[0] && !strcmp(k->choices[0], "auto")) i = 0; /* TorchTitan leaves such keys empty for "decide" */
        if (!k->choices[i]) {
            format_choices(k, buf, sizeof buf);
            return tt_errorf("%s: %s: unknown value '%.64s' (allowed: %s)", where, k->key, v->str, buf);
        }
        *(int *)p = i;
    }
    if (k->flags & OPTIONAL) *(bool *)((char *)c + k->has_off) = true;
    c->set_by_user_[ki] = 1;
    return 0;
}

/* Set key ki from command-line text. */
static int set_text(tt_config *c, int ki, const char *value, const char *where)
{
    const cfg_key *k = &tt_cfg_keys[ki];
    if (!value) return tt_errorf("%s: %s: no value", where, k->key);
    if ((k->flags & OPTIONAL) && !strcmp(value, "none")) {
        *(bool *)((char *)c + k->has_off) = false;
        memset(field(c, k), 0, k->size);
        c->set_by_user_[ki] = 1;
        return 0;
    }
    tt_toml_value v = {0};
    if (k->type == K_STRING || k->type == K_ENUM) {
        if (!tt_toml_valid_utf8(value, strlen(value))) return tt_errorf("%s: %s: value is not valid UTF-8", where, k->key);
        v.type = TT_TOML_STRING;
        v.str = (char *)value; /* borrowed: not cleared below */
        return store(c, ki, &v, where);
    }
    if (tt_toml_parse_scalar(value, &v))
        return tt_errorf("%s: %s: expected %s, got '%.64s'", where, k->key, expected(k), value);
    int r = store(c, ki, &v, where);
    tt_toml_value_clear(&v);
    return r;
}

/* ---- suggestions for misspelt keys ---------------------------------------------------- */

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 96 || lb > 96) return 1000;
    size_t row[97];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* The registered key closest to an unknown one, or NULL: a small edit
 * distance, or the same name in another section (training.lr -> optimizer.lr). */
static const char *suggest(const char *key)
{
    const char *best = NULL;
    size_t best_d = 3;
    const char *dot = strrchr(key, '.');
    for (size_t i = 0; i < tt_cfg_n_keys; i++) {
        size_t d = edit_distance(key, tt_cfg_keys[i].key);
        if (d < best_d) best_d = d, best = tt_cfg_keys[i].key;
    }
    if (best || !dot) return best;
    for (size_t i = 0; i < tt_cfg_n_keys; i++)
        if (!strcmp(strrchr(tt_cfg_keys[i].key, '.'), dot)) return tt_cfg_keys[i].key;
    return NULL;
}

/* "unknown key 'x'" (or "unknown option '--x'" for a command-line flag) */
static int unknown_key(const char *where, bool flag, const char *key)
{
    const char *s = suggest(key), *what = flag ? "option" : "key", *dash = flag ? "--" : "";
    if (s) return tt_errorf("%s: unknown %s '%s%.200s' (did you mean '%s%s'?)", where, what, dash, key, dash, s);
    return tt_errorf("%s: unknown %s '%s%.200s' (`titan help keys` lists the keys)", where, what, dash, key);
}

/* ---- public: defaults, load, set, arguments ------------------------------------------------ */

static void apply_flavor(tt_config *c, const tt_flavor *fl)
{
    for (size_t i = 0; i < tt_cfg_n_keys; i++) {
        const cfg_key *k = &tt_cfg_keys[i];
        if (!(k->flags & FLAVOR) || c->set_by_user_[i]) continue;
        const char *src = (const char *)&fl->shape + (k->off - offsetof(tt_config, model));
        memcpy(field(c, k), src, k->size);
    }
}

void tt_config_defaults(tt_config *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < tt_cfg_n_keys; i++)
        if (tt_cfg_keys[i].dflt && set_text(c, (int)i, tt_cfg_keys[i].dflt, "default"))
            tt_warn("config: bad default: %s", tt_last_error()); /* a bug in the table; test_config catches it */
    memset(c->set_by_user_, 0, sizeof c->set_by_user_);
    apply_flavor(c, tt_flavor_default(c->model.name));
}

tt_err tt_config_load_string(tt_config *c, const char *text, size_t len, const char *name)
{
    if (!name) name = "<config>";
    tt_toml_doc *doc = tt_toml_parse(text, len, name);
    if (!doc) return -1;
    tt_config t = *c;
    int r = 0;
    for (size_t i = 0; i < doc->n && !r; i++) {
        const tt_toml_entry *e = &doc->entries[i];
        char where[1100];
        snprintf(where, sizeof where, "%s:%d", name, e->line);
        int ki = find_key(e->key);
        r = ki < 0 ? unknown_key(where, false, e->key) : store(&t, ki, &e->value, where);
    }
    tt_toml_free(doc);
    if (!r) *c = t;
    return r;
}

tt_err tt_config_load_file(tt_config *c, const char *path)
{
    size_t len;
    char *text = tt_toml_read_file(path, &len);
    if (!text) return -1;
    int r = tt_config_load_string(c, text, len, path);
    free(text);
    return r;
}

tt_err tt_config_set(tt_config *c, const char *key, const char *value, const char *origin)
{
    const char *where = origin ? origin : "config";
    int ki = key ? find_key(key) : -1;
    if (ki < 0) return unknown_key(where, false, key ? key : "");
    if (set_text(c, ki, value, where)) return -1;
    c->set_by_user_[ki] = OVERRIDDEN;
    return 0;
}

tt_err tt_config_get(const tt_config *c, const char *key, char *buf, size_t size)
{
    int ki = find_key(key);
    if (ki < 0) return unknown_key("config", false, key);
    tbuf b = {0};
    put_value(&b, c, &tt_cfg_keys[ki], false);
    int r = 0;
    if (b.oom || !b.d) r = tt_errorf("out of memory");
    else if (b.n >= size) r = tt_errorf("%s: value longer than the buffer", key);
    else memcpy(buf, b.d, b.n + 1);
    free(b.d);
    return r;
}

tt_err tt_config_parse_args(tt_config *c, int argc, char **argv, int *n_rest, char **rest)
{
    const char *config = NULL;
    int *pair_key = malloc(((size_t)argc + 1) * sizeof *pair_key);
    const char **pair_val = malloc(((size_t)argc + 1) * sizeof *pair_val);
    int n_pairs = 0, nr = 0, r = -1;
    bool after_dashdash = false;
    if (!pair_key || !pair_val) {
        tt_errorf("out of memory");
        goto done;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (after_dashdash || a[0] != '-' || a[1] == 0) { /* positional ("-" alone too) */
            if (!rest) {
                tt_errorf("command line: unexpected argument '%.200s'", a);
                goto done;
            }
            rest[nr++] = argv[i];
            continue;
        }
        if (!strcmp(a, "--")) {
            after_dashdash = true;
            continue;
        }
        if (a[1] != '-') {
            tt_errorf("command line: unknown option '%.200s' (options are --section.key)", a);
            goto done;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        char key[128];
        if (len >= sizeof key) len = sizeof key - 1; /* too long to be a key: reported unknown */
        memcpy(key, name, len);
        key[len] = 0;
        bool is_config = !strcmp(key, "config") || !strcmp(key, "job.config_file");
        int ki = is_config ? -1 : find_key(key);
        if (!is_config && ki < 0) {
            unknown_key("command line", true, key);
            goto done;
        }
        const char *val = eq ? eq + 1 : NULL;
        if (!val && !is_config && tt_cfg_keys[ki].type == K_BOOL) {
            /* a bare boolean flag means true; an explicit true/false may follow */
            val = "true";
            if (i + 1 < argc && (!strcmp(argv[i + 1], "true") || !strcmp(argv[i + 1], "false"))) val = argv[++i];
        }
        if (!val) {
            if (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2)) {
                tt_errorf("command line: option '--%s' needs a value (use --%s=VALUE for values starting with --)",
                          key, key);
                goto done;
            }
            val = argv[++i];
        }
        if (is_config) {
            if (config) {
                tt_errorf("command line: --config given twice ('%.200s' and '%.200s')", config, val);
                goto done;
            }
            config = val;
        } else {
            pair_key[n_pairs] = ki;
            pair_val[n_pairs++] = val;
        }
    }
    /* the recipe first, then the overrides in the order given */
    tt_config t = *c;
    if (config && tt_config_load_file(&t, config)) goto done;
    for (int i = 0; i < n_pairs; i++) {
        if (set_text(&t, pair_key[i], pair_val[i], "command line")) goto done;
        t.set_by_user_[pair_key[i]] = OVERRIDDEN;
    }
    *c = t;
    if (n_rest) *n_rest = nr;
    r = 0;
done:
    free(pair_key);
    free((void *)pair_val);
    return r;
}

/* ---- finalize: flavor merge, derived values, cross-key checks ------------------------------------ */

/* The dense families' block keys (OLMo 2, SmolLM3, Phi-3, Granite): a Llama block's, with grouped-query attention
 * (not GPT-2's, not Multi-head Latent Attention's, whose RoPE is its own) */
static tt_err check_block_keys(const tt_model_config *m)
{
    const double prf = m->partial_rotary_factor;
    const struct { const char *key; bool set; } k[] = {
        {"model.qk_norm_full", m->qk_norm_full},
        {"model.post_norms", m->post_norms},
        {"model.no_rope_interval", m->no_rope_interval > 0},
        {"model.partial_rotary_factor", prf > 0 && prf < 1},
        {"model.embedding_multiplier", m->embedding_multiplier > 0},
        {"model.residual_multiplier", m->residual_multiplier > 0},
        {"model.attention_multiplier", m->attention_multiplier > 0},
        {"model.logits_scaling", m->logits_scaling > 0},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        if (!k[i].set) continue;
        if (m->name == TT_MODEL_GPT2) return tt_errorf("%s: gpt2 has no such option (a llama block's)", k[i].key);
        if (m->kv_lora_rank > 0)
            return tt_errorf("%s: Multi-head Latent Attention (model.kv_lora_rank) has no such option", k[i].key);
    }
    if (m->qk_norm_full && !m->qk_norm) return tt_errorf("model.qk_norm_full needs model.qk_norm = true");
    if (prf > 0 && prf < 1) {
        const double rot = floor(m->head_dim * prf);
        if (rot < 2 || (int)rot % 2)
            return tt_errorf("model.partial_rotary_factor = %g turns %g of a head's %d features: RoPE needs an even "
                             "number of at least 2",
                             prf, rot, m->head_dim);
    }
    return 0;
}

/* " (from flavor X)" when the key came from the flavor, "" when set explicitly. */
static const char *origin_of(const tt_config *c, const char *key, char *buf, size_t size)
{
    if (tt_config_is_set(c, key)) return "";
    snprintf(buf, size, " (flavor '%s')", c->model.flavor);
    return buf;
}

static void list_flavors(tt_model_name model, char *buf, size_t size)
{
    buf[0] = 0;
    for (size_t i = 0; i < tt_flavor_count(); i++) {
        const tt_flavor *f = tt_flavor_at(i);
        if (f->shape.name != model) continue;
        if (buf[0]) strncat(buf, ", ", size - strlen(buf) - 1);
        strncat(buf, f->name, size - strlen(buf) - 1);
    }
}

tt_err tt_config_finalize(tt_config *c)
{
    tt_config t = *c;
    tt_model_config *m = &t.model;
    char list[1024], o1[96], o2[96];

    /* the flavor: model.name follows it unless set; each model has a default */
    const tt_flavor *fl = tt_flavor_find(m->flavor);
    bool flavor_set = tt_config_is_set(&t, "model.flavor"), name_set = tt_config_is_set(&t, "model.name");
    if (!flavor_set && (!fl || (name_set && fl->shape.name != m->name))) fl = tt_flavor_default(m->name);
    if (!fl) {
        list_flavors(m->name, list, sizeof list);
        return tt_errorf("model.flavor: unknown flavor '%s' for model %s (known: %s)", m->flavor,
                         tt_model_name_str(m->name), list);
    }
    if (fl->shape.name != m->name) {
        if (name_set) {
            list_flavors(m->name, list, sizeof list);
            return tt_errorf("model.flavor '%s' is a %s flavor but model.name is '%s' (its flavors: %s)", fl->name,
                             tt_model_name_str(fl->shape.name), tt_model_name_str(m->name), list);
        }
        m->name = fl->shape.name;
    }
    put_str(m->flavor, sizeof m->flavor, fl->name);
    apply_flavor(&t, fl);

    /* attention shape */
    if (m->head_dim == 0) {
        if (m->dim % m->n_heads)
            return tt_errorf("model.dim = %d%s is not divisible by model.n_heads = %d%s; set model.head_dim", m->dim,
                             origin_of(&t, "model.dim", o1, sizeof o1), m->n_heads,
                             origin_of(&t, "model.n_heads", o2, sizeof o2));
        m->head_dim = m->dim / m->n_heads;
    }
    if (m->n_heads % m->n_kv_heads)
        return tt_errorf("model.n_heads = %d%s is not a multiple of model.n_kv_heads = %d%s", m->n_heads,
                         origin_of(&t, "model.n_heads", o1, sizeof o1), m->n_kv_heads,
                         origin_of(&t, "model.n_kv_heads", o2, sizeof o2));
    if (m->rope_scaling == TT_ROPE_SCALING_LLAMA3 && m->rope_high_freq_factor <= m->rope_low_freq_factor)
        return tt_errorf("model.rope_high_freq_factor (%g) must exceed model.rope_low_freq_factor (%g)",
                         m->rope_high_freq_factor, m->rope_low_freq_factor);
    if (m->name == TT_MODEL_GPT2) {
        if (m->n_kv_heads != m->n_heads)
            return tt_errorf("model.n_kv_heads = %d: gpt2 has no grouped-query attention (n_heads = %d)",
                             m->n_kv_heads, m->n_heads);
        if (m->qk_norm) return tt_errorf("model.qk_norm: gpt2 has no q/k norm");
        if (m->rope_scaling != TT_ROPE_SCALING_NONE) return tt_errorf("model.rope_scaling: gpt2 has no RoPE");
        if (t.training.seq_len > m->max_seq_len)
            return tt_errorf("training.seq_len = %d exceeds model.max_seq_len = %d%s: gpt2 learns one embedding "
                             "per position",
                             t.training.seq_len, m->max_seq_len, origin_of(&t, "model.max_seq_len", o1, sizeof o1));
    }
    if (m->kv_lora_rank > 0) { /* Multi-head Latent Attention: heads of qk_nope + qk_rope, RoPE on qk_rope */
        if (m->name == TT_MODEL_GPT2) return tt_errorf("model.kv_lora_rank: gpt2 has no Multi-head Latent Attention");
        if (m->qk_nope_head_dim < 1 || m->qk_rope_head_dim < 2 || m->qk_rope_head_dim % 2 || m->v_head_dim < 1)
            return tt_errorf("model.kv_lora_rank = %d: Multi-head Latent Attention needs model.qk_nope_head_dim >= 1 "
                             "(%d), an even model.qk_rope_head_dim >= 2 (%d) and model.v_head_dim >= 1 (%d)",
                             m->kv_lora_rank, m->qk_nope_head_dim, m->qk_rope_head_dim, m->v_head_dim);
        if (m->qkv_bias || m->qk_norm)
            return tt_errorf("model.kv_lora_rank: Multi-head Latent Attention has no q/k/v biases or q/k norms");
        m->head_dim = m->qk_rope_head_dim;
        m->n_kv_heads = m->n_heads;
    }
    if (check_block_keys(m)) return -1;
    if (m->num_experts > 0) { /* Mixture-of-Experts */
        if (m->name == TT_MODEL_GPT2) return tt_errorf("model.num_experts: gpt2 has no MoE form");
        if (m->top_k < 1 || m->top_k > m->num_experts)
            return tt_errorf("model.top_k = %d%s must be between 1 and model.num_experts = %d%s", m->top_k,
                             origin_of(&t, "model.top_k", o1, sizeof o1), m->num_experts,
                             origin_of(&t, "model.num_experts", o2, sizeof o2));
        if (m->n_dense_layers >= m->n_layers)
            return tt_errorf("model.n_dense_layers = %d leaves no MoE layer of model.n_layers = %d", m->n_dense_layers,
                             m->n_layers);
        const int G = m->num_expert_groups, Gk = m->num_limited_groups;
        if (G > 1 && (m->num_experts % G || Gk < 1 || Gk > G || Gk * (m->num_experts / G) < m->top_k))
            return tt_errorf("model.num_expert_groups = %d, model.num_limited_groups = %d: the %d experts must split "
                             "evenly into the groups, and the limited groups must hold top_k = %d experts",
                             G, Gk, m->num_experts, m->top_k);
        if (m->moe_ffn_dim == 0) m->moe_ffn_dim = m->ffn_dim;
        if (m->decoder_sparse_step == 0) m->decoder_sparse_step = 1;
    }
    if (m->tokenizer == TT_TOKENIZER_BYTE && m->vocab_size < BYTE_TOKENIZER_VOCAB)
        return tt_errorf("model.vocab_size = %d%s is smaller than the byte tokenizer's %d tokens", m->vocab_size,
                         origin_of(&t, "model.vocab_size", o1, sizeof o1), BYTE_TOKENIZER_VOCAB);

    /* batches */
    tt_training_config *tr = &t.training;
    /* the backend, and its default compute dtype (bf16 where the hardware has bf16 arithmetic) */
    const tt_backend *be = tt_backend_get(tr->backend);
    if (!be) return tt_error_prefix("training.backend: ");
    if (!tt_config_is_set(&t, "training.mixed_precision_param"))
        tr->mixed_precision_param = be->default_dtype() == TT_BF16 ? TT_PARAM_BFLOAT16 : TT_PARAM_FLOAT32;
    if (tr->global_batch_size != -1 && tr->global_batch_size % tr->local_batch_size)
        return tt_errorf("training.global_batch_size = %d is not a multiple of training.local_batch_size = %d",
                         tr->global_batch_size, tr->local_batch_size);
    if (t.validation.local_batch_size == 0) t.validation.local_batch_size = tr->local_batch_size;
    if (t.parallelism.expert_parallel_degree > 1 && t.parallelism.expert_receive_factor > 0 &&
        t.parallelism.expert_receive_factor < 1)
        return tt_errorf("parallelism.expert_receive_factor = %g: below 1 a rank could not hold even its own tokens "
                         "(0 = the worst case)",
                         t.parallelism.expert_receive_factor);

    /* parallelism: data and expert parallelism (the mesh against the world: tt_parallel_resolve) */
    static const struct { const char *key, *what; size_t off; } missing[] = {
        {"parallelism.tensor_parallel_degree", "tensor", offsetof(tt_config, parallelism.tensor_parallel_degree)},
        {"parallelism.pipeline_parallel_degree", "pipeline", offsetof(tt_config, parallelism.pipeline_parallel_degree)},
        {"parallelism.context_parallel_degree", "context", offsetof(tt_config, parallelism.context_parallel_degree)},
    };
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        int deg = *(const int *)((const char *)&t + missing[i].off);
        if (deg != 1)
            return tt_errorf("%s = %d: %s parallelism does not exist in titan yet (set it to 1; titan parallelises "
                             "over data: parallelism.data_parallel_replicate_degree x data_parallel_shard_degree, "
                             "and over experts: parallelism.expert_parallel_degree)",
                             missing[i].key, deg, missing[i].what);
    }

    /* data source: training.dataset and its TorchTitan alias dataset_path */
    if (tr->dataset_path[0]) {
        if (!strcmp(tr->dataset, "synthetic")) { /* a path replaces the built-in corpus */
            put_str(tr->dataset, sizeof tr->dataset, tr->dataset_path);
        } else if (strcmp(tr->dataset, tr->dataset_path))
            return tt_errorf("training.dataset ('%.200s') and training.dataset_path ('%.200s') disagree; set one",
                             tr->dataset, tr->dataset_path);
    } else if (strcmp(tr->dataset, "synthetic"))
        put_str(tr->dataset_path, sizeof tr->dataset_path, tr->dataset);
    if (!tr->dataset[0]) return tt_errorf("training.dataset is empty (use \"synthetic\" or a shard path)");
    if (!strcmp(tr->dataset, "synthetic")) {
        if (t.synthetic.train_tokens <= tr->seq_len)
            return tt_errorf("synthetic.train_tokens = %lld must exceed training.seq_len = %d",
                             (long long)t.synthetic.train_tokens, tr->seq_len);
        if (t.validation.enable && !t.validation.dataset_path[0] && t.synthetic.val_tokens <= tr->seq_len)
            return tt_errorf("synthetic.val_tokens = %lld must exceed training.seq_len = %d for validation",
                             (long long)t.synthetic.val_tokens, tr->seq_len);
    }
    *c = t;
    return 0;
}

/* ---- output: TOML and help ------------------------------------------------------------- */

static size_t section_len(const char *key) { return (size_t)(strchr(key, '.') - key); }

char *tt_config_to_toml(const tt_config *c)
{
    tbuf b = {0};
    tb_printf(&b, "# titan configuration: every key's effective value\n");
    for (size_t i = 0; i < tt_cfg_n_keys; i++) {
        const cfg_key *k = &tt_cfg_keys[i];
        size_t sl = section_len(k->key);
        if (i == 0 || sl != section_len(tt_cfg_keys[i - 1].key) || strncmp(k->key, tt_cfg_keys[i - 1].key, sl))
            tb_printf(&b, "\n[%.*s]\n", (int)sl, k->key);
        if ((k->flags & OPTIONAL) && !*(const bool *)((const char *)c + k->has_off)) {
            tb_printf(&b, "# %s: unset\n", k->key + sl + 1);
            continue;
        }
        tb_printf(&b, "%s = ", k->key + sl + 1);
        put_value(&b, c, k, true);
        tb_printf(&b, "\n");
    }
    if (b.oom) {
        free(b.d);
        tt_errorf("out of memory");
        return NULL;
    }
    return b.d;
}

void tt_config_print_help(FILE *f)
{
    char buf[256];
    fprintf(f, "Configuration keys: in a TOML recipe as [section] key = value, or on the command line as\n"
               "--section.key VALUE (or --section.key=VALUE); the command line wins over the recipe.\n");
    for (size_t i = 0; i < tt_cfg_n_keys; i++) {
        const cfg_key *k = &tt_cfg_keys[i];
        size_t sl = section_len(k->key);
        if (i == 0 || sl != section_len(tt_cfg_keys[i - 1].key) || strncmp(k->key, tt_cfg_keys[i - 1].key, sl))
            fprintf(f, "\n[%.*s]\n", (int)sl, k->key);
        switch (k->type) {
        case K_INT:
        case K_I64: format_range(k, buf, sizeof buf); fprintf(f, "  --%s  integer %s", k->key, buf); break;
        case K_FLOAT: format_range(k, buf, sizeof buf); fprintf(f, "  --%s  float %s", k->key, buf); break;
        case K_BOOL: fprintf(f, "  --%s  true|false", k->key); break;
        case K_STRING: fprintf(f, "  --%s  string", k->key); break;
        case K_ENUM:
            fprintf(f, "  --%s  ", k->key);
            for (int j = 0; k->choices[j]; j++) fprintf(f, "%s%s", j ? "|" : "", k->choices[j]);
            break;
        }
        if (k->flags & HARDWARE) fprintf(f, "  (default: this machine's, see below)\n");
        else if (k->dflt) fprintf(f, k->type == K_STRING ? "  (default \"%s\")\n" : "  (default %s)\n", k->dflt);
        else fprintf(f, "  (default: %s)\n", (k->flags & FLAVOR) ? "from model.flavor" : "unset");
        fprintf(f, "        %s\n", k->help);
    }
    fprintf(f, "\nModel flavors (model.flavor; the first of each model is its default):\n");
    for (size_t i = 0; i < tt_flavor_count(); i++) {
        const tt_flavor *fl = tt_flavor_at(i);
        const tt_model_config *s = &fl->shape;
        char heads[32];
        snprintf(heads, sizeof heads, "%d/%d", s->n_heads, s->n_kv_heads);
        fprintf(f, "  %-5s %-13s dim %-5d layers %-3d heads %-6s ffn %-6d vocab %-6d%s%s%s\n",
                tt_model_name_str(s->name), fl->name, s->dim, s->n_layers, heads, s->ffn_dim, s->vocab_size,
                s->tie_embeddings ? "  tied" : "", s->qkv_bias && s->name != TT_MODEL_GPT2 ? "  qkv_bias" : "",
                s->qk_norm ? "  qk_norm" : "");
    }
}
