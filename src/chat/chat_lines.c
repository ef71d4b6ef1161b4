/* chat_lines.c — `titan tokenize --chat`: each line of a chat JSONL file (messages, ShareGPT's
 * conversations, or TRL's prompt/completion) rendered with the model's chat template and printed as
 * one JSON string a line (--render), as its token ids, or as ids and target flags (--mask); a
 * conversation the template rejects prints {"error": ...} and the run goes on; a line that is not
 * a conversation stops it with the file and line. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "chat/chat_internal.h"
#include "chat/chat_sample.h"
#include "chat/chat_template.h"
#include "core/core.h"
#include "tokenizer/tokenizer.h"

/* ShareGPT's "from" to a role */
static const char *sharegpt_role(const char *from)
{
    static const char *const map[][2] = {{"human", "user"}, {"user", "user"}, {"gpt", "assistant"},
                                         {"assistant", "assistant"}, {"system", "system"}, {"tool", "tool"},
                                         {"function_call", "assistant"}, {"observation", "tool"}};
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (!strcmp(map[i][0], from)) return map[i][1];
    return NULL;
}

/* the roles chat data uses: OpenAI's four, and the ones published templates read besides (Llama
 * 3.1's ipython for tool results, OpenAI's developer, the older function) */
static int known_role(const char *r)
{
    static const char *const roles[] = {"system", "user", "assistant", "tool", "ipython", "developer", "function"};
    for (size_t i = 0; i < sizeof roles / sizeof *roles; i++)
        if (!strcmp(r, roles[i])) return 1;
    return 0;
}

tt_err tt_chat_conversation_of(const cJSON *line, cJSON **messages, const cJSON **tools, int *first_trained)
{
    *messages = NULL;
    *tools = NULL;
    if (first_trained) *first_trained = 0;
    if (cJSON_IsArray(line)) { /* a bare list of messages */
        *messages = cJSON_Duplicate(line, 1);
        return *messages ? 0 : tt_errorf("out of memory");
    }
    if (!cJSON_IsObject(line)) return tt_errorf("a line is not a JSON object with \"messages\"");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(line, "messages"),
                *conv = cJSON_GetObjectItemCaseSensitive(line, "conversations"),
                *prompt = cJSON_GetObjectItemCaseSensitive(line, "prompt"),
                *completion = cJSON_GetObjectItemCaseSensitive(line, "completion");
    *tools = cJSON_GetObjectItemCaseSensitive(line, "tools");
    if (m) {
        if (!cJSON_IsArray(m)) return tt_errorf("\"messages\" is not a list");
        *messages = cJSON_Duplicate(m, 1);
    } else if (conv) { /* ShareGPT: {from, value} */
        if (!cJSON_IsArray(conv)) return tt_errorf("\"conversations\" is not a list");
        *messages = cJSON_CreateArray();
        const cJSON *c;
        int i = 0;
        cJSON_ArrayForEach(c, conv)
        {
            const cJSON *from = cJSON_GetObjectItemCaseSensitive(c, "from"), *value = cJSON_GetObjectItemCaseSensitive(c, "value");
            const char *role = cJSON_IsString(from) ? sharegpt_role(from->valuestring) : NULL;
            if (!role) {
                cJSON_Delete(*messages);
                *messages = NULL;
                return cJSON_IsString(from) ? tt_errorf("conversations[%d]: unknown \"from\": \"%.60s\" (human, gpt, system, tool)", i,
                                                        from->valuestring)
                                            : tt_errorf("conversations[%d] has no \"from\"", i);
            }
            cJSON *msg = cJSON_CreateObject();
            cJSON_AddItemToArray(*messages, msg);
            cJSON_AddStringToObject(msg, "role", role);
            cJSON_AddItemToObject(msg, "content", value ? cJSON_Duplicate(value, 1) : cJSON_CreateString(""));
            i++;
        }
    } else if (prompt && completion) { /* TRL's conversational prompt/completion */
        if (!cJSON_IsArray(prompt) || !cJSON_IsArray(completion))
            return tt_errorf("\"prompt\" and \"completion\" are not lists of messages");
        *messages = cJSON_Duplicate(prompt, 1);
        if (first_trained) *first_trained = cJSON_GetArraySize(prompt); /* only the completion is trained */
        const cJSON *c;
        cJSON_ArrayForEach(c, completion) cJSON_AddItemToArray(*messages, cJSON_Duplicate(c, 1));
    } else {
        return tt_errorf("a line has neither \"messages\", \"conversations\" nor \"prompt\" and \"completion\"");
    }
    if (!*messages) return tt_errorf("out of memory");
    const cJSON *msg;
    int i = 0;
    cJSON_ArrayForEach(msg, *messages)
    {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        if (!cJSON_IsObject(msg) || !cJSON_IsString(role)) {
            cJSON_Delete(*messages);
            *messages = NULL;
            return tt_errorf("message %d is not an object with a string \"role\"", i);
        }
        if (!known_role(role->valuestring)) {
            tt_errorf("message %d: unknown role \"%.60s\" (system, user, assistant, tool, ipython, developer, function)", i, role->valuestring);
            cJSON_Delete(*messages);
            *messages = NULL;
            return -1;
        }
        i++;
    }
    return 0;
}

static int write_json_string(FILE *out, const char *s, size_t n, const char *key)
{
    jarena a = {0};
    jbuf b = {0};
    jv v;
    int rc = jv_str(&a, s, n, &v) || (key && jb_printf(&b, "{\"%s\": ", key)) ||
             jv_write_json(&b, v, 0, NULL, NULL, NULL, 0) || (key && jb_putc(&b, '}')) || jb_putc(&b, '\n');
    if (!rc && fwrite(b.p, 1, b.len, out) != b.len) rc = tt_errorf("writing the output: %s", strerror(errno));
    jb_free(&b);
    ja_free(&a);
    return rc ? -1 : 0;
}

typedef struct {
    const tt_tokenize_opts *o;
    const tt_chat_template *t;
    const tt_chat_specials *sp;
    const tt_tokenizer *tok;
    FILE *out;
    tt_chat_tokens tk; /* reused from line to line */
    jbuf line;
} chat_job;

/* ids (or flags when flags is set) as one line of numbers */
static tt_err write_numbers(chat_job *j, const tt_chat_tokens *tk, int flags)
{
    j->line.len = 0;
    for (size_t i = 0; i < tk->n; i++)
        if (jb_printf(&j->line, i ? " %d" : "%d", flags ? (int)tk->mask[i] : (int)tk->ids[i])) return -1;
    if (jb_putc(&j->line, '\n')) return -1;
    return fwrite(j->line.p, 1, j->line.len, j->out) == j->line.len ? 0 : tt_errorf("writing the output: %s", strerror(errno));
}

/* --mask: each sample's ids and flags; a conversation with nothing to train, its ids and zeros */
static tt_err write_masks(chat_job *j, const cJSON *messages, const cJSON *tools, int first)
{
    tt_chat_samples ss = {0};
    const tt_chat_train_on on = j->o->train_on_all ? TT_CHAT_TRAIN_ALL : TT_CHAT_TRAIN_ASSISTANT;
    if (tt_chat_samples_of(j->t, j->sp, messages, tools, first, on, &ss, NULL))
        return write_json_string(j->out, tt_last_error(), strlen(tt_last_error()), "error");
    tt_err rc = 0;
    tt_chat_sample whole = {0};
    if (ss.n == 0) {
        rc = tt_chat_render(j->t, messages, tools, 0, j->sp, NULL, &whole.text, &whole.len, NULL, NULL);
        if (rc) {
            tt_chat_samples_free(&ss);
            return write_json_string(j->out, tt_last_error(), strlen(tt_last_error()), "error");
        }
    }
    for (int i = 0; !rc && i < (ss.n ? ss.n : 1); i++)
        rc = tt_chat_tokens_of(j->tok, ss.n ? &ss.s[i] : &whole, &j->tk) || write_numbers(j, &j->tk, 0) ||
             write_numbers(j, &j->tk, 1);
    free(whole.text);
    tt_chat_samples_free(&ss);
    return rc;
}

cJSON *tt_chat_parse_line(const char *line, size_t len)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    if (!root) {
        tt_errorf("malformed JSON");
        return NULL;
    }
    while (end < line + len && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')) end++;
    if (end < line + len) { /* two objects on a line, or garbage after one */
        cJSON_Delete(root);
        tt_errorf("malformed JSON: text after the conversation's closing brace, at byte %zu", (size_t)(end - line));
        return NULL;
    }
    return root;
}

static tt_err render_line(chat_job *j, char *line, size_t len)
{
    cJSON *root = tt_chat_parse_line(line, len);
    if (!root) return -1;
    cJSON *messages = NULL;
    const cJSON *tools = NULL;
    int first = 0;
    tt_err rc = tt_chat_json_keep_numbers(root, line, len) || tt_chat_conversation_of(root, &messages, &tools, &first);
    if (!rc && j->o->mask) {
        rc = write_masks(j, messages, tools, first);
    } else if (!rc) {
        tt_chat_sample s = {0};
        if (tt_chat_render(j->t, messages, tools, j->o->add_generation_prompt, j->sp, NULL, &s.text, &s.len, NULL, NULL))
            /* the template rejects the conversation: said on its line, and the run goes on */
            rc = write_json_string(j->out, tt_last_error(), strlen(tt_last_error()), "error");
        else if (j->o->render)
            rc = write_json_string(j->out, s.text, s.len, NULL);
        else
            rc = tt_chat_tokens_of(j->tok, &s, &j->tk) || write_numbers(j, &j->tk, 0);
        free(s.text);
    }
    cJSON_Delete(messages);
    cJSON_Delete(root);
    return rc;
}

static tt_err run_file(chat_job *j, gzFile gz, const char *name)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    long lineno = 0;
    tt_err rc = buf ? 0 : tt_errorf("out of memory");
    while (!rc) {
        n = 0;
        int eof = 0;
        for (;;) { /* one whole line, however long */
            if (cap - n < 2) {
                char *nb = realloc(buf, cap *= 2);
                if (!nb) {
                    rc = tt_errorf("out of memory");
                    break;
                }
                buf = nb;
            }
            if (!gzgets(gz, buf + n, (int)(cap - n > (1u << 30) ? 1u << 30 : cap - n))) {
                int err;
                const char *msg = gzerror(gz, &err);
                if (err != Z_OK && err != Z_STREAM_END) rc = tt_errorf("%s: cannot read: %s", name, msg);
                eof = 1;
                break;
            }
            n += strlen(buf + n);
            if (n && buf[n - 1] == '\n') break;
        }
        if (rc || (eof && n == 0)) break;
        lineno++;
        while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = 0;
        size_t k = 0;
        while (k < n && (buf[k] == ' ' || buf[k] == '\t')) k++;
        if (k == n) continue; /* blank lines are skipped, as titan prepare does */
        rc = render_line(j, buf, n);
        if (rc) tt_error_prefix("%s:%ld: ", name, lineno);
        else if (fflush(j->out)) rc = tt_errorf("writing the output: %s", strerror(errno));
        if (eof) break;
    }
    free(buf);
    return rc;
}

tt_err tt_tokenize_chat(const tt_tokenize_opts *o, FILE *in, FILE *out)
{
    if (o->decode || o->no_special) return tt_errorf("--decode and --no-special do not go with --chat");
    if (!o->hf_dir && !o->chat_template) return tt_errorf("--chat needs --hf DIR or --chat-template FILE");
    if (o->mask && o->add_generation_prompt)
        return tt_errorf("--mask shows what training sees, which has no generation prompt: drop --add-generation-prompt");
    tt_chat_specials sp = {0};
    tt_chat_template *t = NULL;
    tt_err rc = tt_chat_template_open(o->hf_dir, o->chat_template, &t, &sp);
    tt_tokenizer *tok = NULL;
    if (!rc && !o->render) {
        tok = !o->tokenizer || !strcmp(o->tokenizer, "byte") ? tt_tokenizer_byte_new() : tt_tokenizer_load(o->tokenizer);
        if (!tok) rc = -1;
    }
    chat_job j = {o, t, &sp, tok, out, {0}, {0}};
    int n = o->n_inputs;
    gzFile *files = calloc((size_t)(n > 0 ? n : 1), sizeof *files);
    if (!rc && !files) rc = tt_errorf("out of memory");
    for (int i = 0; i < n && !rc; i++) { /* every file is opened before anything is written */
        const char *p = o->inputs[i];
        files[i] = strcmp(p, "-") ? gzopen(p, "rb") : gzdopen(dup(fileno(in)), "rb");
        if (!files[i]) rc = tt_errorf("%s: cannot open: %s", p, strerror(errno));
    }
    if (!rc && n == 0) {
        gzFile g = gzdopen(dup(fileno(in)), "rb");
        rc = g ? run_file(&j, g, "<stdin>") : tt_errorf("cannot read the standard input");
        if (g) gzclose(g);
    }
    for (int i = 0; i < n && !rc; i++) rc = run_file(&j, files[i], strcmp(o->inputs[i], "-") ? o->inputs[i] : "<stdin>");
    for (int i = 0; files && i < n; i++)
        if (files[i]) gzclose(files[i]);
    free(files);
    tt_chat_tokens_free(&j.tk);
    jb_free(&j.line);
    tt_tokenizer_free(tok);
    tt_chat_template_free(t);
    tt_chat_specials_free(&sp);
    return rc;
}
