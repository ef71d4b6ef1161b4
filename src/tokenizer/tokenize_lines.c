/* tokenize_lines.c — `titan tokenize` (tt_tokenize): each line of text to a
 * line of token ids, or each line of ids back to text, with the byte
 * tokenizer or a tokenizer.json; errors name the input, the line and the id. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tokenizer/bpe_internal.h" /* which ids below the vocabulary size a tokenizer.json leaves out */
#include "tokenizer/tokenizer.h"

typedef struct {
    const tt_tokenize_opts *o;
    const tt_tokenizer *tok;
    const char *tok_name; /* for errors: "the byte tokenizer" or the tokenizer.json path */
    FILE *out;
    int32_t *ids; /* one line's ids, grown as needed */
    size_t n_ids, cap_ids;
    char *text; /* encode: the ids of one line as text */
    size_t cap_text;
} tok_job;

static tt_err grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return tt_errorf("out of memory (%zu bytes)", c * elem);
    *p = q;
    *cap = c;
    return 0;
}

/* One line of text (without its '\n') -> "id id id\n". */
static tt_err encode_line(tok_job *j, const char *line, size_t len)
{
    if (tt_tokenizer_encode(j->tok, line, len, !j->o->no_special, &j->ids, &j->n_ids, &j->cap_ids)) return -1;
    size_t at = 0;
    if (grow((void **)&j->text, &j->cap_text, j->n_ids * 12 + 2, 1)) return -1; /* "-2147483648 " is 12 bytes */
    for (size_t i = 0; i < j->n_ids; i++)
        at += (size_t)snprintf(j->text + at, j->cap_text - at, i ? " %d" : "%d", (int)j->ids[i]);
    j->text[at++] = '\n';
    return fwrite(j->text, 1, at, j->out) == at ? 0 : tt_errorf("writing the output: %s", strerror(errno));
}

/* One line of ids (separated by spaces, tabs or commas) -> its text and '\n'. */
static tt_err decode_line(tok_job *j, const char *line)
{
    int vocab = tt_tokenizer_vocab_size(j->tok);
    j->n_ids = 0;
    for (const char *p = line;;) {
        while (*p == ' ' || *p == '\t' || *p == ',' || *p == '\r') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long id = strtol(p, &end, 10);
        size_t tok_len = strcspn(p, " \t,\r");
        if (end == p || (size_t)(end - p) != tok_len)
            return tt_errorf("'%.*s' is not a token id (ids are integers separated by spaces)", (int)(tok_len < 40 ? tok_len : 40),
                             p);
        if (errno == ERANGE || id < 0 || id >= vocab)
            return tt_errorf("id %.*s is outside the vocabulary [0, %d) of %s", (int)(tok_len < 40 ? tok_len : 40), p,
                             vocab, j->tok_name);
        if (j->tok->kind == TOK_BPE && !(j->tok->id_flags[id] & TOK_ID_PRESENT))
            return tt_errorf("id %ld is not in the vocabulary of %s (no token has it)", id, j->tok_name);
        if (grow((void **)&j->ids, &j->cap_ids, j->n_ids + 1, sizeof *j->ids)) return -1;
        j->ids[j->n_ids++] = (int32_t)id;
        p = end;
    }
    char *text = NULL;
    size_t len = 0;
    if (tt_tokenizer_decode(j->tok, j->ids, j->n_ids, j->o->no_special, &text, &len)) return -1;
    int ok = fwrite(text, 1, len, j->out) == len && fputc('\n', j->out) != EOF;
    free(text);
    return ok ? 0 : tt_errorf("writing the output: %s", strerror(errno));
}

/* Every line of one input; errors get "NAME:LINE: " in front. */
static tt_err run_stream(tok_job *j, FILE *f, const char *name)
{
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    tt_err rc = 0;
    errno = 0;
    for (ssize_t n; !rc && (n = getline(&line, &cap, f)) >= 0;) {
        lineno++;
        if (n > 0 && line[n - 1] == '\n') line[--n] = 0;
        if (j->o->decode) {
            if (strlen(line) != (size_t)n) rc = tt_errorf("a NUL byte in a line of ids");
            else rc = decode_line(j, line);
        } else {
            rc = encode_line(j, line, (size_t)n);
        }
        if (rc) tt_error_prefix("%s:%ld: ", name, lineno);
        else if (fflush(j->out)) rc = tt_errorf("writing the output: %s", strerror(errno)); /* a pipe sees each line */
    }
    if (!rc && ferror(f)) rc = tt_errorf("%s: cannot read line %ld: %s", name, lineno + 1, strerror(errno));
    free(line);
    return rc;
}

tt_err tt_tokenize(const tt_tokenize_opts *o, FILE *in, FILE *out)
{
    const char *path = o->tokenizer && strcmp(o->tokenizer, "byte") ? o->tokenizer : NULL;
    tok_job j = {o, NULL, path ? path : "the byte tokenizer", out, NULL, 0, 0, NULL, 0};
    tt_tokenizer *tok = path ? tt_tokenizer_load(path) : tt_tokenizer_byte_new();
    if (!tok) return -1;
    j.tok = tok;
    tt_err rc = 0;
    /* every file is opened before anything is written: a missing one fails at once */
    int n = o->n_inputs;
    FILE **files = calloc((size_t)(n > 0 ? n : 1), sizeof *files);
    if (!files) rc = tt_errorf("out of memory");
    for (int i = 0; i < n && !rc; i++) {
        const char *p = o->inputs[i];
        files[i] = strcmp(p, "-") ? fopen(p, "rb") : in;
        if (!files[i]) rc = tt_errorf("%s: cannot open: %s", p, strerror(errno));
    }
    if (!rc && n == 0) rc = run_stream(&j, in, "<stdin>");
    for (int i = 0; i < n && !rc; i++) rc = run_stream(&j, files[i], strcmp(o->inputs[i], "-") ? o->inputs[i] : "<stdin>");
    for (int i = 0; files && i < n; i++)
        if (files[i] && files[i] != in) fclose(files[i]);
    free(files);
    free(j.ids);
    free(j.text);
    tt_tokenizer_free(tok);
    return rc;
}
