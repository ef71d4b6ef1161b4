/* test_chat_mask.c — what a conversation trains, derived by hand: for ChatML and Llama 3's template
 * on a three-turn conversation, the bytes written in [brackets] below are the trained ones (each
 * assistant reply and its end-of-turn marker), the cuts are the user turns that follow a reply and
 * the repeated prefix is the system message. Checked in bytes (the byte tokenizer: a token a byte)
 * and in tokens, on the fixture tokenizers of Qwen2 and Llama 3 (byte-level BPE with the templates'
 * special tokens): each special token is one id, and each run of flagged tokens decodes to one
 * bracketed span. Also: TRL's
 * prompt/completion trains the completion only, --train-on all trains every token but the first,
 * {% generation %} blocks decide when a template has them, a template that rewrites earlier turns
 * gives one sample per turn, and a conversation with no assistant turn gives none. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_sample.h"
#include "chat/chat_template.h"
#include "core/core.h"
#include "harness.h"
#include "tokenizer/tokenizer.h"

static const char CHATML[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* Meta-Llama-3-8B-Instruct's published template */
static const char LLAMA3[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

static const char CONV[] =
    "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"},"
    " {\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"content\": \"How are you?\"},"
    " {\"role\": \"assistant\", \"content\": \"Fine.\"}, {\"role\": \"user\", \"content\": \"Bye\"},"
    " {\"role\": \"assistant\", \"content\": \"Bye!\"}]";

/* by hand: [trained], ~ a cut (where a later piece may start), ^ the end of the repeated prefix */
static const char CHATML_WANT[] =
    "<|im_start|>system\nBe brief.<|im_end|>\n^<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    "[Hello!<|im_end|>\n]~<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n[Fine.<|im_end|>\n]"
    "~<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n[Bye!<|im_end|>\n]";
static const char LLAMA3_WANT[] =
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>^<|start_header_id|>user"
    "<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n[Hello!<|eot_id|>]~"
    "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|><|start_header_id|>assistant"
    "<|end_header_id|>\n\n[Fine.<|eot_id|>]~<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n[Bye!<|eot_id|>]";

/* A hand-marked text into its plain text, flags per byte, cuts and prefix. */
typedef struct {
    char text[1024];
    uint8_t flag[1024];
    size_t n, cut[8], prefix;
    int n_cuts;
} marked;

static void unmark(const char *s, marked *m)
{
    memset(m, 0, sizeof *m);
    int in = 0;
    for (; *s; s++) {
        if (*s == '[' || *s == ']') in = *s == '[';
        else if (*s == '~') m->cut[m->n_cuts++] = m->n;
        else if (*s == '^') m->prefix = m->n;
        else m->flag[m->n] = (uint8_t)in, m->text[m->n++] = *s;
    }
}

static tt_chat_template *parse(const char *src)
{
    tt_chat_template *t = tt_chat_template_parse(src, strlen(src), "test template");
    CHECK_MSG(t != NULL, "%s", tt_last_error());
    return t;
}

static int samples(const char *tpl, const char *conv, int first, tt_chat_train_on on, tt_chat_samples *ss)
{
    tt_chat_template *t = parse(tpl);
    tt_chat_specials sp = {.bos = "<|begin_of_text|>", .eos = "<|eot_id|>"};
    cJSON *m = cJSON_Parse(conv);
    int rc = t && m ? tt_chat_samples_of(t, &sp, m, NULL, first, on, ss, NULL) : -1;
    CHECK_MSG(rc == 0, "%s", tt_last_error());
    cJSON_Delete(m);
    tt_chat_template_free(t);
    return rc;
}

/* the byte tokenizer: flags, cuts and prefix are the hand-marked ones, byte for byte */
static void check_bytes(const char *name, const char *tpl, const char *want)
{
    marked m;
    unmark(want, &m);
    tt_chat_samples ss;
    if (samples(tpl, CONV, 0, TT_CHAT_TRAIN_ASSISTANT, &ss)) return;
    CHECK_MSG(ss.n == 1 && !ss.per_turn, "%s: %d samples", name, ss.n);
    tt_tokenizer *tok = tt_tokenizer_byte_new();
    tt_chat_tokens tk = {0};
    CHECK(tt_chat_tokens_of(tok, &ss.s[0], &tk) == 0);
    CHECK_MSG(tk.n == m.n && !memcmp(ss.s[0].text, m.text, m.n), "%s: rendered\n%.*s", name, (int)ss.s[0].len,
              ss.s[0].text);
    int bad = 0;
    for (size_t i = 0; i < tk.n && i < m.n; i++) bad += tk.mask[i] != m.flag[i];
    CHECK_MSG(bad == 0, "%s: %d flags differ from the hand-marked ones", name, bad);
    CHECK_MSG(tk.prefix == m.prefix && tk.n_cuts == m.n_cuts, "%s: prefix %llu (want %zu), %d cuts (want %d)", name,
              (unsigned long long)tk.prefix, m.prefix, tk.n_cuts, m.n_cuts);
    for (int k = 0; k < tk.n_cuts && k < m.n_cuts; k++) CHECK(tk.cut[k] == m.cut[k]);
    tt_chat_tokens_free(&tk);
    tt_tokenizer_free(tok);
    tt_chat_samples_free(&ss);
}

static void test_variants(void)
{
    tt_chat_samples ss;
    tt_tokenizer *tok = tt_tokenizer_byte_new();
    tt_chat_tokens tk = {0};
    /* TRL's prompt/completion: the prompt's assistant turns (the first two) are not trained */
    if (!samples(CHATML, CONV, 6, TT_CHAT_TRAIN_ASSISTANT, &ss)) {
        CHECK(ss.n == 1 && ss.s[0].n_ranges == 1);
        CHECK(ss.n == 1 && !strncmp(ss.s[0].text + ss.s[0].rstart[0], "Bye!<|im_end|>\n", ss.s[0].rend[0] - ss.s[0].rstart[0]));
        tt_chat_samples_free(&ss);
    }
    /* --train-on all: every token but the first */
    if (!samples(CHATML, CONV, 0, TT_CHAT_TRAIN_ALL, &ss)) {
        CHECK(ss.n == 1 && tt_chat_tokens_of(tok, &ss.s[0], &tk) == 0 && tk.n_trained == (int64_t)tk.n - 1 && !tk.mask[0]);
        tt_chat_samples_free(&ss);
    }
    /* no assistant turn: nothing to train, no sample; with --train-on all, one */
    static const char user_only[] = "[{\"role\": \"user\", \"content\": \"Hi\"}]";
    if (!samples(CHATML, user_only, 0, TT_CHAT_TRAIN_ASSISTANT, &ss)) {
        CHECK(ss.n == 0);
        tt_chat_samples_free(&ss);
    }
    if (!samples(CHATML, user_only, 0, TT_CHAT_TRAIN_ALL, &ss)) {
        CHECK(ss.n == 1);
        tt_chat_samples_free(&ss);
    }
    /* {% generation %} decides: here only the reply, not its end-of-turn marker */
    static const char gen[] = "{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' %}{% generation %}"
                              "{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}</s>{% endfor %}";
    if (!samples(gen, CONV, 0, TT_CHAT_TRAIN_ASSISTANT, &ss)) {
        CHECK(ss.n == 1 && ss.s[0].n_ranges == 3);
        for (int r = 0; ss.n == 1 && r < ss.s[0].n_ranges; r++) CHECK(ss.s[0].text[ss.s[0].rend[r]] == '<');
        tt_chat_samples_free(&ss);
    }
    /* a template that drops earlier replies (as Qwen3's drops earlier reasoning): one sample per turn, each
     * trained on its last reply only */
    static const char drops[] = "{% for m in messages %}{% if m.role != 'assistant' or loop.last %}<{{ m.role }}>"
                                "{{ m.content }}</s>{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>"
                                "{% endif %}";
    if (!samples(drops, CONV, 0, TT_CHAT_TRAIN_ASSISTANT, &ss)) {
        CHECK(ss.n == 3 && ss.per_turn);
        static const char *const last[3] = {"Hello!</s>", "Fine.</s>", "Bye!</s>"};
        for (int i = 0; ss.n == 3 && i < 3; i++)
            CHECK(ss.s[i].n_ranges == 1 && ss.s[i].rend[0] == ss.s[i].len &&
                  !strcmp(ss.s[i].text + ss.s[i].rstart[0], last[i]));
        tt_chat_samples_free(&ss);
    }
    tt_chat_tokens_free(&tk);
    tt_tokenizer_free(tok);
}

/* a tokenizer.json with the template's special tokens (tests/fixtures/tokenizers/<name>): every
 * special token of the text is one id, and each run of flagged tokens decodes to one bracketed span */
static void check_tokens(const char *name, const char *tok_name, const char *tpl, const char *want,
                         const char *const *specials)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tests/fixtures/tokenizers/%s/tokenizer.json", TITAN_SOURCE_DIR, tok_name);
    tt_tokenizer *tok = tt_tokenizer_load(path);
    CHECK_MSG(tok != NULL, "%s", tt_last_error());
    tt_chat_samples ss;
    if (!tok || samples(tpl, CONV, 0, TT_CHAT_TRAIN_ASSISTANT, &ss)) {
        tt_tokenizer_free(tok);
        return;
    }
    tt_chat_tokens tk = {0};
    CHECK(ss.n == 1 && tt_chat_tokens_of(tok, &ss.s[0], &tk) == 0);
    for (int k = 0; specials[k]; k++) {
        int id = tt_tokenizer_token_id(tok, specials[k]), seen = 0;
        for (size_t i = 0; i < tk.n; i++) seen += tk.ids[i] == id;
        CHECK_MSG(id >= 0 && seen > 0, "%s: %s (id %d) is in the tokens %d times", name, specials[k], id, seen);
    }
    /* the bracketed spans, in order */
    const char *spans[8];
    size_t span_len[8];
    int n_spans = 0;
    for (const char *p = want; (p = strchr(p, '[')) && n_spans < 8; p++) {
        spans[n_spans] = p + 1;
        span_len[n_spans++] = (size_t)(strchr(p, ']') - p - 1);
    }
    int runs = 0;
    for (size_t i = 0; i < tk.n;) {
        if (!tk.mask[i]) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < tk.n && tk.mask[j]) j++;
        char *text = NULL;
        size_t len = 0;
        CHECK(tt_tokenizer_decode(tok, tk.ids + i, j - i, 0, &text, &len) == 0);
        CHECK_MSG(runs < n_spans && text && len == span_len[runs] && !memcmp(text, spans[runs], len),
                  "%s: trained run %d decodes to \"%s\"", name, runs, text ? text : "");
        free(text);
        runs++;
        i = j;
    }
    CHECK_MSG(runs == n_spans, "%s: %d trained runs, want %d", name, runs, n_spans);
    tt_chat_tokens_free(&tk);
    tt_chat_samples_free(&ss);
    tt_tokenizer_free(tok);
}

int main(void)
{
    check_bytes("ChatML", CHATML, CHATML_WANT);
    check_bytes("Llama 3", LLAMA3, LLAMA3_WANT);
    static const char *const chatml_specials[] = {"<|im_start|>", "<|im_end|>", NULL};
    static const char *const llama3_specials[] = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                                                  "<|eot_id|>", NULL};
    check_tokens("ChatML on the Qwen2 tokenizer", "qwen2", CHATML, CHATML_WANT, chatml_specials);
    check_tokens("Llama 3 on the Llama 3 tokenizer", "llama3", LLAMA3, LLAMA3_WANT, llama3_specials);
    test_variants();
    return th_done("test_chat_mask");
}
