/* chat.c — conversations with a model: `titan generate --chat` (one user
 * message, one reply) and `titan chat` (a loop over the lines of a stream,
 * each a user message). Each turn renders the whole history with the model's
 * chat template as transformers' apply_chat_template(messages,
 * add_generation_prompt=True) does, encodes the text without the tokenizer's
 * own special tokens (the template writes them), generates until an
 * end-of-turn id, and keeps the reply in the history. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/chat_template.h"
#include "commands/generate.h"
#include "core/core.h"
#include "formats/safetensors.h" /* tt_utf8_invalid_at */

#define CHAT_LINE_MAX (16u << 20) /* the longest message line titan chat reads */

typedef struct {
    tt_generator gen;
    tt_chat_template *t;
    tt_chat_specials sp;
    cJSON *history; /* [system], then user and assistant messages */
    int n_system;   /* 1 when the history starts with the system message */
    const tt_chat_opts *o;
    FILE *log;
} chat_session;

/* One turn's prompt: the rendered text and its ids */
typedef struct {
    char *text;
    size_t len;
    int32_t *ids;
    size_t n, cap;
} chat_prompt;

static void prompt_free(chat_prompt *p)
{
    free(p->text);
    free(p->ids);
    memset(p, 0, sizeof *p);
}

static tt_err add_message(cJSON *messages, const char *role, const char *content)
{
    cJSON *m = cJSON_CreateObject();
    if (!m || !cJSON_AddStringToObject(m, "role", role) || !cJSON_AddStringToObject(m, "content", content)) {
        cJSON_Delete(m);
        return tt_errorf("out of memory");
    }
    cJSON_AddItemToArray(messages, m);
    return 0;
}

/* The template first (a missing one is found before any weight is read), then the model. */
static tt_err session_open(chat_session *s, const tt_config *cfg, const tt_chat_opts *o, int from_hf, FILE *log)
{
    memset(s, 0, sizeof *s);
    s->o = o;
    s->log = log;
    const char *dir = cfg->model.hf_assets_path[0] ? cfg->model.hf_assets_path : NULL;
    if (!dir && !o->chat_template)
        return tt_errorf("a chat needs a chat template: the model has no Hugging Face folder (model.hf_assets_path "
                         "/ --hf DIR) to take one from; give one with --chat-template FILE");
    if (tt_chat_template_open(dir, o->chat_template, &s->t, &s->sp)) return -1;
    if (!(s->history = cJSON_CreateArray())) return tt_errorf("out of memory");
    if (o->system) {
        if (tt_utf8_invalid_at(o->system, strlen(o->system)) != strlen(o->system))
            return tt_errorf("the system message is not UTF-8");
        if (add_message(s->history, "system", o->system)) return -1;
        s->n_system = 1;
    }
    return tt_generator_open(&s->gen, cfg, from_hf);
}

static void session_close(chat_session *s)
{
    tt_generator_close(&s->gen);
    tt_chat_template_free(s->t);
    tt_chat_specials_free(&s->sp);
    cJSON_Delete(s->history);
    memset(s, 0, sizeof *s);
}

/* text as a JSON string on the log (the escaping of tokenize --chat --render's lines) */
static void log_json_string(FILE *log, const char *label, const char *text)
{
    cJSON *j = cJSON_CreateString(text);
    char *t = j ? cJSON_PrintUnformatted(j) : NULL;
    fprintf(log, "%s: %s\n", label, t ? t : "?");
    free(t);
    cJSON_Delete(j);
}

static void log_ids(FILE *log, const char *label, const int32_t *ids, size_t n)
{
    fprintf(log, "%s:", label);
    for (size_t i = 0; i < n; i++) fprintf(log, " %d", ids[i]);
}

/* The messages h rendered with the generation prompt and encoded as apply_chat_template(tokenize=True) does */
static tt_err render_prompt(const chat_session *s, const cJSON *h, chat_prompt *p)
{
    prompt_free(p);
    if (tt_chat_render(s->t, h, NULL, 1, &s->sp, NULL, &p->text, &p->len, NULL, NULL)) return -1;
    if (tt_tokenizer_encode(s->gen.tk, p->text, p->len, 0, &p->ids, &p->n, &p->cap))
        return tt_error_prefix("the rendered conversation: ");
    return 0;
}

/* Drop the oldest exchange after the system message: its messages up to the next user message. 0 when the
 * only user message left is the last one (the one being answered). */
static int drop_oldest(cJSON *h, int n_system)
{
    const int n = cJSON_GetArraySize(h);
    int next = n_system + 1;
    while (next < n) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(h, next), "role");
        if (cJSON_IsString(role) && !strcmp(role->valuestring, "user")) break;
        next++;
    }
    if (next >= n) return 0;
    for (int k = n_system; k < next; k++) cJSON_DeleteItemFromArray(h, n_system);
    return 1;
}

/* The prompt for h (its last message the user's) within the model's positions: while the prompt and max_new
 * new tokens exceed them, the oldest exchange is dropped (the system message stays); when the prompt alone
 * leaves fewer, the reply gets what is left. The user is told of both on the log. */
static tt_err fit_prompt(chat_session *s, cJSON *h, chat_prompt *p, int *max_new)
{
    const int ctx = tt_generator_context(&s->gen);
    int dropped = 0;
    *max_new = s->gen.cfg->generate.max_new_tokens;
    for (;;) {
        if (render_prompt(s, h, p)) return -1;
        if (!ctx || (int64_t)p->n + *max_new <= ctx || !drop_oldest(h, s->n_system)) break;
        dropped++;
    }
    if (dropped)
        fprintf(s->log,
                "chat: the conversation and a reply of generate.max_new_tokens %d no longer fit the model's %d "
                "positions: dropped the oldest %d exchange%s%s\n",
                *max_new, ctx, dropped, dropped == 1 ? "" : "s", s->n_system ? " (the system message is kept)" : "");
    if (ctx && p->n >= (size_t)ctx)
        return tt_errorf("the message with the template takes %zu tokens, and the model has %d positions: none is "
                         "left for a reply",
                         p->n, ctx);
    if (ctx && (int64_t)p->n + *max_new > ctx) {
        fprintf(s->log, "chat: the reply is cut to %d tokens: the prompt takes %zu of the model's %d positions\n",
                ctx - (int)p->n, p->n, ctx);
        *max_new = ctx - (int)p->n;
    }
    return 0;
}

/* The reply as the history keeps it: valid UTF-8 without NUL bytes (a byte-level model can end on a partial
 * character), each bad byte U+FFFD as decoding with errors="replace" would give, so the next turn encodes. */
static char *history_text(const char *s, size_t len)
{
    char *out = malloc(3 * len + 1), *o = out;
    if (!out) return NULL;
    while (len) {
        size_t ok = tt_utf8_invalid_at(s, len);
        const char *nul = memchr(s, 0, ok);
        if (nul) ok = (size_t)(nul - s);
        memcpy(o, s, ok), o += ok, s += ok, len -= ok;
        if (len) memcpy(o, "\xEF\xBF\xBD", 3), o += 3, s++, len--;
    }
    *o = 0;
    return out;
}

/* One turn: the user's message added to the history, the reply streamed to out and added after it. A turn
 * that cannot be answered (the template refuses the conversation, the message does not fit) leaves the
 * history as it was and sets *refused; other errors (the model's) are the caller's to stop on. */
static tt_err chat_turn(chat_session *s, const char *message, FILE *out, int *refused)
{
    *refused = 0;
    chat_prompt p = {0};
    tt_gen_reply reply = {0};
    cJSON *h = cJSON_Duplicate(s->history, 1);
    int max_new = 0;
    tt_err rc = h ? add_message(h, "user", message) : tt_errorf("out of memory");
    if (!rc && tt_utf8_invalid_at(message, strlen(message)) != strlen(message))
        rc = tt_errorf("the message is not UTF-8");
    if (!rc && fit_prompt(s, h, &p, &max_new)) rc = -1;
    *refused = rc != 0;
    if (!rc && s->o->verbose) {
        log_json_string(s->log, "prompt", p.text);
        log_ids(s->log, "prompt ids", p.ids, p.n);
        fputc('\n', s->log);
    }
    if (!rc) rc = tt_generator_reply(&s->gen, p.ids, (int)p.n, max_new, out, &reply);
    char *kept = rc ? NULL : history_text(reply.text, reply.len);
    if (!rc && (!kept || add_message(h, "assistant", kept))) rc = tt_errorf("out of memory");
    if (!rc && s->o->verbose) {
        log_json_string(s->log, "reply", reply.text);
        log_ids(s->log, "reply ids", reply.ids, (size_t)reply.n);
        if (reply.end_id >= 0) fprintf(s->log, " (ended by end-of-turn id %d)\n", reply.end_id);
        else fprintf(s->log, " (%d new tokens: the most allowed)\n", max_new);
    }
    if (!rc) { /* the turn is whole: the history is the new one */
        cJSON_Delete(s->history);
        s->history = h;
        h = NULL;
    }
    fflush(s->log);
    free(kept);
    cJSON_Delete(h);
    tt_gen_reply_free(&reply);
    prompt_free(&p);
    return rc;
}

tt_err tt_generate_chat(const tt_config *cfg, const tt_chat_opts *o, const char *message, int from_hf, FILE *out,
                        FILE *log)
{
    if (!message || !message[0])
        return tt_errorf("no message to answer: give one (quote it) or set generate.prompt");
    chat_session s;
    int refused;
    tt_err rc = session_open(&s, cfg, o, from_hf, log) || chat_turn(&s, message, out, &refused);
    session_close(&s);
    return rc;
}

/* One line of in into *buf (malloc'd, *cap bytes), up to CHAT_LINE_MAX bytes (a longer one is read to its end
 * and *too_long set), without its line end. 0 at the end of the stream. */
static int read_line(FILE *in, char **buf, size_t *cap, size_t *len, int *too_long)
{
    *len = 0;
    *too_long = 0;
    int c, any = 0;
    while ((c = getc(in)) != EOF) {
        any = 1;
        if (c == '\n') break;
        if (*len + 2 > *cap) {
            if (*cap >= CHAT_LINE_MAX) {
                *too_long = 1;
                continue;
            }
            size_t ncap = *cap ? 2 * *cap : 4096;
            char *nb = realloc(*buf, ncap);
            if (!nb) {
                *too_long = 1;
                continue;
            }
            *buf = nb, *cap = ncap;
        }
        (*buf)[(*len)++] = (char)c;
    }
    if (*len && (*buf)[*len - 1] == '\r') (*len)--;
    (*buf)[*len] = 0;
    return any;
}

static int blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t') return 0;
    return 1;
}

/* The history back to its system message */
static void reset_history(chat_session *s)
{
    while (cJSON_GetArraySize(s->history) > s->n_system) cJSON_DeleteItemFromArray(s->history, s->n_system);
}

tt_err tt_chat(const tt_config *cfg, const tt_chat_opts *o, int from_hf, FILE *in, FILE *out, FILE *log)
{
    chat_session s;
    if (session_open(&s, cfg, o, from_hf, log)) {
        session_close(&s);
        return -1;
    }
    const int tty = isatty(fileno(in));
    if (tty) fprintf(log, "chat: one message a line; /reset clears the history; end with Ctrl-D\n> ");
    size_t cap = 4096, len;
    char *line = malloc(cap);
    int too_long, n_messages = 0, n_refused = 0;
    tt_err rc = line ? 0 : tt_errorf("out of memory");
    while (!rc && read_line(in, &line, &cap, &len, &too_long)) {
        int refused = 1;
        if (too_long || strlen(line) != len) {
            n_messages++;
            if (too_long) tt_errorf("the line is longer than the %u MiB titan chat reads", CHAT_LINE_MAX >> 20);
            else tt_errorf("the line holds a NUL byte");
        } else if (!strcmp(line, "/reset")) {
            reset_history(&s);
            fprintf(log, "chat: the history is cleared%s\n", s.n_system ? " (the system message is kept)" : "");
            refused = 0;
        } else if (blank(line, len)) {
            refused = 0;
        } else {
            n_messages++;
            rc = chat_turn(&s, line, out, &refused);
        }
        if (refused) { /* said, and the conversation goes on without it; a failing model stops it */
            fprintf(log, "chat: error: %s: not answered\n", tt_last_error());
            n_refused++;
            rc = 0;
        }
        if (tty) fputs("> ", log);
        fflush(log);
    }
    free(line);
    session_close(&s);
    if (!rc && n_refused) rc = tt_errorf("%d of %d messages got no reply (the errors are above)", n_refused, n_messages);
    return rc;
}
