/* test_chat_template.c — the C chat template renderer (src/chat/) against transformers' own
 * rendering: the published templates of ../shared/fixtures/chat_templates over the conversations
 * of tests/fixtures/chat/real.json, and one case per construct (tests/fixtures/chat/cases.json),
 * byte for byte, errors included (both from tools/gen_chat_fixtures.py); every filter, test and
 * method of the subset must have run; the bounds and the refusals name what they stop. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_internal.h"
#include "chat/chat_template.h"
#include "harness.h"

#define FIXTURES TITAN_SOURCE_DIR "/tests/fixtures/chat"

static cJSON *read_json(const char *path)
{
    size_t len;
    char *text = th_read_file(path, &len);
    if (!text) return NULL;
    cJSON *j = cJSON_ParseWithLength(text, len);
    if (j && tt_chat_json_keep_numbers(j, text, len)) {
        cJSON_Delete(j);
        j = NULL;
    }
    free(text);
    return j;
}

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static tt_chat_specials specials_of(const cJSON *doc)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(doc, "specials");
    tt_chat_specials sp = {str_of(s, "bos_token"), str_of(s, "eos_token"), str_of(s, "unk_token"),
                           str_of(s, "pad_token"), NULL, NULL, NULL};
    return sp;
}

/* Render and compare with one expected record ({output} or {error, raised}); 1 when it matched. */
static int check_one(const char *what, const tt_chat_template *t, const cJSON *messages, const cJSON *tools, int agp,
                     const tt_chat_specials *sp, const tt_chat_limits *lim, const cJSON *want)
{
    char *out = NULL;
    size_t len = 0;
    int raised = 0;
    tt_chat_spans gen = {0};
    tt_err rc = tt_chat_render(t, messages, tools, agp, sp, lim, &out, &len, &gen, &raised);
    const char *exp_out = str_of(want, "output"), *exp_err = str_of(want, "error");
    int ok = 1;
    if (exp_out) {
        ok = rc == 0 && len == strlen(exp_out) && memcmp(out, exp_out, len) == 0;
        CHECK_MSG(ok, "%s: rendered %s%s%s\n--- want ---\n%s\n---", what, rc ? "an error: " : "\n--- got ---\n",
                  rc ? tt_last_error() : out, rc ? "" : "", exp_out);
        const cJSON *spans = cJSON_GetObjectItemCaseSensitive(want, "generation");
        if (ok && spans) {
            int n = cJSON_GetArraySize(spans), same = n == gen.n;
            for (int i = 0; same && i < n; i++) {
                const cJSON *s = cJSON_GetArrayItem(spans, i);
                same = (size_t)cJSON_GetArrayItem(s, 0)->valuedouble == gen.start[i] &&
                       (size_t)cJSON_GetArrayItem(s, 1)->valuedouble == gen.end[i];
            }
            CHECK_MSG(same, "%s: %d generation ranges, want %d (or the ranges differ)", what, gen.n, n);
            ok = same;
        }
    } else if (exp_err) {
        int want_raised = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(want, "raised"));
        if (want_raised) {
            ok = rc != 0 && raised && strcmp(tt_last_error(), exp_err) == 0;
            CHECK_MSG(ok, "%s: want raise_exception(\"%s\"), got %s", what, exp_err, rc ? tt_last_error() : out);
        } else {
            ok = rc != 0 && !raised;
            CHECK_MSG(ok, "%s: want an error like jinja2's (%s), got %s", what, exp_err, rc ? tt_last_error() : out);
        }
    }
    free(out);
    tt_chat_spans_free(&gen);
    return ok;
}

static const cJSON *conversation(const cJSON *doc, const char *name)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "conversations"))
    {
        const char *n = str_of(c, "name");
        if (n && !strcmp(n, name)) return c;
    }
    return NULL;
}

static void test_real(void)
{
    const char *shared = th_shared_dir();
    if (!shared) {
        th_skip_part("the published templates (../shared is absent)");
        return;
    }
    cJSON *doc = read_json(FIXTURES "/real.json");
    CHECK_MSG(doc != NULL, "cannot read %s/real.json", FIXTURES);
    if (!doc) return;
    tt_chat_specials sp = specials_of(doc);
    int n = 0, good = 0;
    char last[256] = "";
    tt_chat_template *t = NULL;
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(doc, "results"))
    {
        const char *tname = str_of(r, "template"), *cname = str_of(r, "conversation");
        if (!tname || !cname) continue;
        if (strcmp(tname, last)) {
            tt_chat_template_free(t);
            char path[1024];
            snprintf(path, sizeof path, "%s/fixtures/chat_templates/%s", shared, tname);
            size_t len;
            char *src = th_read_file(path, &len);
            CHECK_MSG(src != NULL, "cannot read %s", path);
            t = src ? tt_chat_template_parse(src, len, tname) : NULL;
            CHECK_MSG(!src || t, "%s: %s", tname, tt_last_error());
            free(src);
            snprintf(last, sizeof last, "%s", tname);
        }
        if (!t) continue;
        const cJSON *c = conversation(doc, cname);
        int agp = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "add_generation_prompt"));
        char what[512];
        snprintf(what, sizeof what, "%s over %s%s", tname, cname, agp ? " (add_generation_prompt)" : "");
        n++;
        good += check_one(what, t, cJSON_GetObjectItemCaseSensitive(c, "messages"),
                          cJSON_GetObjectItemCaseSensitive(c, "tools"), agp, &sp, NULL, r);
    }
    tt_chat_template_free(t);
    printf("test_chat_template: %d of %d renderings of the published templates match transformers\n", good, n);
    cJSON_Delete(doc);
}

static void test_cases(void)
{
    cJSON *doc = read_json(FIXTURES "/cases.json");
    CHECK_MSG(doc != NULL, "cannot read %s/cases.json", FIXTURES);
    if (!doc) return;
    tt_chat_specials sp = specials_of(doc);
    tt_chat_limits lim = {0};
    lim.now = (int64_t)cJSON_GetObjectItemCaseSensitive(doc, "now_epoch_utc")->valuedouble;
    const cJSON *defaults = cJSON_GetObjectItemCaseSensitive(doc, "default_messages"), *c;
    int n = 0, good = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "cases"))
    {
        const char *name = str_of(c, "name"), *src = str_of(c, "template"), *refused = str_of(c, "refused");
        if (!name || !src) continue;
        n++;
        tt_chat_template *t = tt_chat_template_parse(src, strlen(src), name);
        if (refused) {
            /* outside the subset: refused by name, with the line and column, at parse or render */
            char *out = NULL;
            int rc = -1;
            if (t) rc = tt_chat_render(t, defaults, NULL, 0, &sp, &lim, &out, NULL, NULL, NULL);
            const char *e = tt_last_error();
            int ok = rc != 0 && strstr(e, "unsupported construct") && strstr(e, refused) && strstr(e, ":1:");
            CHECK_MSG(ok, "case %s: want a refusal naming '%s' at line:column, got %s", name, refused,
                      rc ? e : out);
            good += ok;
            free(out);
            tt_chat_template_free(t);
            continue;
        }
        if (!t) {
            int ok = str_of(c, "error") != NULL && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "raised"));
            CHECK_MSG(ok, "case %s: does not parse: %s", name, tt_last_error());
            good += ok;
            continue;
        }
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(c, "messages");
        good += check_one(name, t, msgs ? msgs : defaults, cJSON_GetObjectItemCaseSensitive(c, "tools"),
                          cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt")), &sp, &lim, c);
        tt_chat_template_free(t);
    }
    printf("test_chat_template: %d of %d construct cases match jinja2\n", good, n);
    cJSON_Delete(doc);
    /* every filter, test and method of the subset ran in some case */
    for (int i = 0; i < tt_chat_n_filters(); i++)
        CHECK_MSG(tt_chat_filter_hits[i] > 0, "the filter '%s' was never exercised", tt_chat_filter_names[i]);
    for (int i = 0; i < tt_chat_n_tests(); i++)
        CHECK_MSG(tt_chat_test_hits[i] > 0, "the test '%s' was never exercised", tt_chat_test_names[i]);
    for (int i = 0; i < tt_chat_n_methods(); i++)
        CHECK_MSG(tt_chat_method_hits[i] > 0, "the method '%s' was never exercised", tt_chat_method_names[i]);
}

/* the bounds and errors name what stopped the rendering */
static void test_errors(void)
{
    cJSON *msgs = cJSON_Parse("[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"hi\"}]}]");
    tt_chat_specials sp = {0};
    char *out = NULL;
    struct {
        const char *src, *want;
        uint64_t steps;
        size_t output;
        int raised;
    } cases[] = {
        {"{% for i in range(100000) %}{% endfor %}", "steps", 1000, 0, 0},
        {"{% for i in range(1000) %}xxxxxxxxxx{% endfor %}", "bound on a rendering", 0, 100, 0},
        {"{{ 'x' * 1000 }}", "bound on output", 0, 100, 0},
        {"a\n  {{ raise_exception('Roles must alternate') }}", "Roles must alternate", 0, 0, 1},
        {"{{ '<|user|>' + messages[0]['content'] }}", "t:1:", 0, 0, 0},
        {"line one\n{% include 'x.jinja' %}", "t:2:4: unsupported construct: the 'include' statement", 0, 0, 0},
        {"{{ x | urlencode }}", "t:1:8: unsupported construct: the filter 'urlencode'", 0, 0, 0},
        {"{{ messages.append(1) }}", "unsupported construct: the list method 'append'", 0, 0, 0},
        {"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "nested more than", 0, 0, 0},
        {"{% set ns = namespace(x=[]) %}{% for i in range(3000) %}{% set ns.x = [ns.x] %}{% endfor %}"
         "{{ ns.x == ns.x }}",
         "nested more than 500 deep", 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tt_chat_template *t = tt_chat_template_parse(cases[i].src, strlen(cases[i].src), "t");
        tt_chat_limits lim = {cases[i].steps, cases[i].output, 0, 0};
        int raised = 0;
        tt_err rc = t ? tt_chat_render(t, msgs, NULL, 0, &sp, &lim, &out, NULL, NULL, &raised) : -1;
        const char *e = tt_last_error();
        CHECK_MSG(rc != 0 && strstr(e, cases[i].want) && raised == cases[i].raised, "'%s': want an error with '%s'%s, got %s",
                  cases[i].src, cases[i].want, cases[i].raised ? " from raise_exception" : "", rc ? e : out);
        if (cases[i].raised) CHECK_MSG(!strcmp(e, cases[i].want), "the raised message is exactly the template's: %s", e);
        free(out);
        out = NULL;
        tt_chat_template_free(t);
    }
    /* statements nested past the bound are refused at parse time, not by the stack */
    jbuf deep = {0};
    for (int i = 0; i < 1000; i++) jb_puts(&deep, "{% if true %}");
    tt_chat_template *t = tt_chat_template_parse(deep.p, deep.len, "deep");
    CHECK_MSG(!t && strstr(tt_last_error(), "nests too deep"), "1000 nested ifs: %s", t ? "parsed" : tt_last_error());
    tt_chat_template_free(t);
    jb_free(&deep);
    cJSON_Delete(msgs);
}

int main(void)
{
    test_real();
    test_cases();
    test_errors();
    return th_done("test_chat_template");
}
