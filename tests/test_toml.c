/* test_toml.c — the TOML reader: every accepted form gives the right entries,
 * every rejected form fails with "name:LINE:", and junk never crashes it. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "harness.h"
#include "formats/toml.h"

static tt_toml_doc *parse(const char *text) { return tt_toml_parse(text, strlen(text), "t.toml"); }

static const tt_toml_value *get(const tt_toml_doc *d, const char *key)
{
    const tt_toml_entry *e = tt_toml_get(d, key);
    if (!e) fprintf(stderr, "missing key %s\n", key);
    return e ? &e->value : NULL;
}

static void test_accepted(void)
{
    const char *text = "# a comment line\n"
                       "title = \"t\\\"q\\\\ \\n\\t\\u00e9\\U0001F600\" # trailing comment\n"
                       "lit = 'C:\\path\\no\\escapes'\n"
                       "  indented\t=\t-17\n"
                       "big = 1_000_000\n"
                       "plus = +5\n"
                       "zero = 0\n"
                       "min = -9223372036854775808\n"
                       "\n"
                       "[training]\n"
                       "steps = 40\n"
                       "lr = 3e-3\n"
                       "f2 = 6.02E+23\n"
                       "f3 = -0.5\n"
                       "f4 = 1e-05\n"
                       "f5 = 1_0.2_5\n"
                       "on = true\n"
                       "off = false\n"
                       "[ a . b ]\n"
                       "\"quoted key\" = 1\n"
                       "'lit.key' = 2\n"
                       "x.y.z = 3\n"
                       "x.w = 4\n"
                       "\"bare\" = 5\n"
                       "[arrays]\n"
                       "one = [1, 2, 3]\n"
                       "empty = []\n"
                       "multi = [  # comment\n"
                       "  \"a\",\n"
                       "\n"
                       "  \"b\", # another\n"
                       "]\n"
                       "after = 7\r\n"
                       "floats = [1.5, 2.0]\r\n";
    tt_toml_doc *d = parse(text);
    CHECK_MSG(d != NULL, "%s", tt_last_error());
    if (!d) return;
    const tt_toml_value *v;
    CHECK((v = get(d, "title")) && v->type == TT_TOML_STRING &&
          !strcmp(v->str, "t\"q\\ \n\t\xC3\xA9\xF0\x9F\x98\x80"));
    CHECK((v = get(d, "lit")) && !strcmp(v->str, "C:\\path\\no\\escapes"));
    CHECK((v = get(d, "indented")) && v->type == TT_TOML_INT && v->i == -17 && v->line == 4);
    CHECK((v = get(d, "big")) && v->i == 1000000);
    CHECK((v = get(d, "plus")) && v->i == 5);
    CHECK((v = get(d, "zero")) && v->i == 0);
    CHECK((v = get(d, "min")) && v->i == INT64_MIN);
    CHECK((v = get(d, "training.steps")) && v->type == TT_TOML_INT && v->i == 40);
    CHECK((v = get(d, "training.lr")) && v->type == TT_TOML_FLOAT && v->f == 3e-3);
    CHECK((v = get(d, "training.f2")) && v->f == 6.02e23);
    CHECK((v = get(d, "training.f3")) && v->f == -0.5);
    CHECK((v = get(d, "training.f4")) && v->f == 1e-5);
    CHECK((v = get(d, "training.f5")) && v->f == 10.25);
    CHECK((v = get(d, "training.on")) && v->type == TT_TOML_BOOL && v->b);
    CHECK((v = get(d, "training.off")) && v->type == TT_TOML_BOOL && !v->b);
    CHECK((v = get(d, "a.b.\"quoted key\"")) && v->i == 1);
    CHECK((v = get(d, "a.b.\"lit.key\"")) && v->i == 2);
    CHECK((v = get(d, "a.b.x.y.z")) && v->i == 3);
    CHECK((v = get(d, "a.b.x.w")) && v->i == 4);
    CHECK((v = get(d, "a.b.bare")) && v->i == 5); /* a quoted key that could be bare is bare */
    CHECK((v = get(d, "arrays.one")) && v->type == TT_TOML_ARRAY && v->n_items == 3 && v->items[2].i == 3);
    CHECK((v = get(d, "arrays.empty")) && v->type == TT_TOML_ARRAY && v->n_items == 0);
    CHECK((v = get(d, "arrays.multi")) && v->n_items == 2 && !strcmp(v->items[1].str, "b") && v->line == 28);
    const tt_toml_entry *e = tt_toml_get(d, "arrays.after");
    CHECK(e && e->line == 33 && e->value.i == 7);
    CHECK((v = get(d, "arrays.floats")) && v->n_items == 2 && v->items[0].type == TT_TOML_FLOAT && v->items[1].f == 2.0);
    CHECK(d->n == 25);
    CHECK(!strcmp(d->entries[0].key, "title") && d->entries[0].line == 2); /* document order */
    tt_toml_free(d);

    /* empty documents, comments only, a byte order mark, headers for implicit tables */
    const char *ok[] = {"", "\n\n", "# only\n# comments", "\xEF\xBB\xBFk = 1", "[a.b.c]\n[a]\nx = 1\n",
                        "[a]\nb.c = 1\n[a.b.d]\ne = 2\n", "[a.b.c]\n[a]\nb.x = 1\n", "k = \"\"\nj = ''\n",
                        "k = 1 # no newline at end"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        d = parse(ok[i]);
        CHECK_MSG(d != NULL, "'%s': %s", ok[i], tt_last_error());
        tt_toml_free(d);
    }
}

/* Each rejected form, the line the error must name, and a word of the message. */
static const struct {
    const char *text;
    int line;
    const char *needle;
} rejected[] = {
    {"a = 1\nt = {x = 1}\n", 2, "inline table"},
    {"a = \"\"\"\nmulti\n\"\"\"\n", 1, "multi-line"},
    {"\n\na = '''x'''\n", 3, "multi-line"},
    {"d = 1979-05-27\n", 1, "dates"},
    {"d = 1979-05-27T07:32:00Z\n", 1, "dates"},
    {"t = 07:32:00\n", 1, "times"},
    {"a = 1\nb = 2\na = 3\n", 3, "duplicate key 'a'"},
    {"[s]\nk = 1\n[t]\n[s]\n", 4, "defined twice"},
    {"[a]\nb.c = 1\n[a.b]\n", 3, "dotted keys"},
    {"[a.b]\nx = 1\n[a]\nb.y = 2\n", 4, "cannot add to table"},
    {"a = 1\n[a]\n", 2, "already a value"},
    {"a = 1\na.b = 2\n", 2, "already a value"},
    {"a.b = 1\na = 2\n", 2, "already a table"},
    {"[[fruit]]\n", 1, "arrays of tables"},
    {"a =\n", 1, "expected a value"},
    {"a = # nothing\n", 1, "expected a value"},
    {"a = \"open\n", 1, "unterminated string"},
    {"a = 'open\n", 1, "unterminated string"},
    {"a = \"\\q\"\n", 1, "invalid escape"},
    {"a = \"\\u12\"\n", 1, "hex digits"},
    {"a = \"\\uD800\"\n", 1, "unicode"},
    {"a = \"\\u0000\"\n", 1, "\\u0000"},
    {"a = \"\\U00110000\"\n", 1, "unicode"},
    {"a = 012\n", 1, "leading zeros"},
    {"a = 1__0\n", 1, "underscores"},
    {"a = _1\n", 1, "quoted"},
    {"a = 1_\n", 1, "underscores"},
    {"a = 1.\n", 1, "after '.'"},
    {"a = .5\n", 1, "quoted"},
    {"a = 1e\n", 1, "exponent"},
    {"a = [1, [2]]\n", 1, "nested arrays"},
    {"a = [1, 2.0]\n", 1, "mixes"},
    {"a = [1,\n2,\n\"x\"]\n", 3, "mixes"},
    {"a = [1, 2\n", 1, "unterminated array"},
    {"a = [1 2]\n", 1, "expected ','"},
    {"a = inf\n", 1, "inf and nan"},
    {"a = -nan\n", 1, "inf and nan"},
    {"a = 0x10\n", 1, "hexadecimal"},
    {"a = 9223372036854775808\n", 1, "out of range"},
    {"a = -9223372036854775809\n", 1, "out of range"},
    {"a = 1e400\n", 1, "out of range"},
    {"a = hello\n", 1, "strings must be quoted"},
    {"a = True\n", 1, "strings must be quoted"},
    {"a 1\n", 1, "expected '='"},
    {"a = 1 b = 2\n", 1, "one key = value per line"},
    {"[s] x = 1\n", 1, "unexpected"},
    {"= 1\n", 1, "expected a key"},
    {"a..b = 1\n", 1, "expected a key"},
    {"[a\n", 1, "expected ']'"},
    {"[]\n", 1, "expected a key"},
    {"a = \"tab\tok but bell \x07\"\n", 1, "control character"},
    {"# comment with \x01\n", 1, "control character"},
    {"a = 1\rb = 2\n", 1, "carriage return"},
    {"a = 1\nb = \"\xFF\"\n", 2, "UTF-8"},
    {"a = 1\n\nb = \"\xC0\xAF\"\n", 3, "UTF-8"},
    {"a = +\n", 1, "quoted"},
    {"a = -\n", 1, "quoted"},
};

static void test_rejected(void)
{
    for (size_t i = 0; i < sizeof rejected / sizeof rejected[0]; i++) {
        tt_toml_doc *d = parse(rejected[i].text);
        char where[32];
        snprintf(where, sizeof where, "t.toml:%d: ", rejected[i].line);
        const char *msg = tt_last_error();
        CHECK_MSG(d == NULL, "case %zu accepted: %s", i, rejected[i].text);
        CHECK_MSG(d || (!strncmp(msg, where, strlen(where)) && strstr(msg, rejected[i].needle)),
                  "case %zu: want '%s...%s', got '%s'", i, where, rejected[i].needle, msg);
        tt_toml_free(d);
    }
    /* a NUL byte inside the given length */
    tt_toml_doc *d = tt_toml_parse("a = 1\n\0", 7, "t.toml");
    CHECK(d == NULL && strstr(tt_last_error(), "t.toml:2: NUL"));
    tt_toml_free(d);
    d = tt_toml_parse_file("/nonexistent/x.toml");
    CHECK(d == NULL && strstr(tt_last_error(), "/nonexistent/x.toml"));
}

static void test_scalar(void)
{
    tt_toml_value v;
    CHECK(tt_toml_parse_scalar("40", &v) == 0 && v.type == TT_TOML_INT && v.i == 40);
    CHECK(tt_toml_parse_scalar("-1", &v) == 0 && v.i == -1);
    CHECK(tt_toml_parse_scalar("3e-3", &v) == 0 && v.type == TT_TOML_FLOAT && v.f == 3e-3);
    CHECK(tt_toml_parse_scalar("true", &v) == 0 && v.type == TT_TOML_BOOL && v.b);
    CHECK(tt_toml_parse_scalar("\"s p\"", &v) == 0 && v.type == TT_TOML_STRING && !strcmp(v.str, "s p"));
    tt_toml_value_clear(&v);
    CHECK(tt_toml_parse_scalar("abc", &v) != 0);
    CHECK(tt_toml_parse_scalar("1 2", &v) != 0);
    CHECK(tt_toml_parse_scalar("", &v) != 0);
    CHECK(tt_toml_parse_scalar("[1]", &v) != 0);
    CHECK(tt_toml_parse_scalar("nan", &v) != 0 && !strstr(tt_last_error(), ".toml"));
    CHECK(tt_toml_is_bare_key("a_b-9") && !tt_toml_is_bare_key("a.b") && !tt_toml_is_bare_key(""));
}

/* Random bytes and random mutations of a valid document: must not crash
 * (the sanitizer build turns any overrun into a failure). */
static void test_junk(void)
{
    const char *seed = "[training]\nsteps = 40 # c\nlr = 3e-3\nname = \"x\\u00e9\"\na.b = [1, 2,\n 3]\n[s.t]\nk = 'v'\n";
    size_t n = strlen(seed);
    char buf[256];
    tt_rng rng = {7, 0};
    int parsed = 0;
    for (int it = 0; it < 20000; it++) {
        size_t len;
        if (it % 2) {
            len = (size_t)tt_rng_below(&rng, sizeof buf);
            for (size_t i = 0; i < len; i++) buf[i] = "[]=\"'#.,\n\\ a1e-_+{}tru\xC3\xA9\r"[tt_rng_below(&rng, 26)];
        } else {
            memcpy(buf, seed, n);
            len = n;
            int edits = 1 + (int)tt_rng_below(&rng, 4);
            for (int e = 0; e < edits; e++) buf[tt_rng_below(&rng, len)] = (char)tt_rng_below(&rng, 256);
        }
        tt_toml_doc *d = tt_toml_parse(buf, len, "junk");
        parsed += d != NULL;
        CHECK(d != NULL || !strncmp(tt_last_error(), "junk:", 5));
        tt_toml_free(d);
    }
    CHECK(parsed > 0); /* some mutations stay valid, so the loop is not all errors */
    tt_toml_doc *d = parse(seed);
    CHECK(d && d->n == 5);
    tt_toml_free(d);
}

int main(void)
{
    test_accepted();
    test_rejected();
    test_scalar();
    test_junk();
    return th_done("test_toml");
}
