/* chat_sample.c — a conversation's training samples: its rendering, the trained byte ranges, the
 * cut points and the repeated prefix (see chat_sample.h), found by rendering its prefixes as
 * transformers' users do by hand: the i-th assistant turn is what render(messages[:i+1]) adds to
 * render(messages[:i], add_generation_prompt=True) (from where the two part, when a template's
 * generation prompt ends in whitespace its turns do not have). */
#include "chat/chat_sample.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat_internal.h" /* the template's has_generation */
#include "core/core.h"

typedef struct {
    char *p;
    size_t n;
} text;

/* Render messages[:k]. The sub-list holds references to the messages (nothing is copied). */
static tt_err render_first(const tt_chat_template *t, const tt_chat_specials *sp, const tt_chat_limits *lim,
                           const cJSON *messages, int k, const cJSON *tools, int add_gen, text *out,
                           tt_chat_spans *gen, int *raised)
{
    cJSON *sub = cJSON_CreateArray();
    if (!sub) return tt_errorf("out of memory");
    const cJSON *m = messages ? messages->child : NULL;
    for (int i = 0; i < k && m; i++, m = m->next)
        if (!cJSON_AddItemReferenceToArray(sub, (cJSON *)m)) {
            cJSON_Delete(sub);
            return tt_errorf("out of memory");
        }
    tt_err rc = tt_chat_render(t, sub, tools, add_gen, sp, lim, &out->p, &out->n, gen, raised);
    cJSON_Delete(sub);
    return rc;
}

static int is_prefix(const text *a, const text *b) { return a->n <= b->n && !memcmp(a->p, b->p, a->n); }

/* Where a reply starts: the end of the prompt p within the conversation q. Usually p is a prefix of
 * q; some templates end the generation prompt with whitespace the turn itself does not have (a
 * trim_blocks newline), and then the reply starts where the two part. */
static size_t reply_start(const text *p, const text *q)
{
    size_t i = 0;
    while (i < p->n && i < q->n && p->p[i] == q->p[i]) i++;
    return i;
}

static const char *role_of(const cJSON *m)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
    return cJSON_IsString(r) ? r->valuestring : "";
}

static tt_err push_size(size_t **v, int *n, size_t x)
{
    size_t *p = realloc(*v, sizeof **v * (size_t)(*n + 1));
    if (!p) return tt_errorf("out of memory");
    *v = p;
    p[(*n)++] = x;
    return 0;
}

static tt_err push_range(tt_chat_sample *s, size_t a, size_t b)
{
    if (a >= b) return 0; /* an empty reply trains nothing */
    int n = s->n_ranges;
    if (push_size(&s->rstart, &n, a)) return -1;
    n = s->n_ranges;
    if (push_size(&s->rend, &n, b)) return -1;
    s->n_ranges = n;
    return 0;
}

static void sample_free(tt_chat_sample *s)
{
    free(s->text), free(s->rstart), free(s->rend), free(s->cut);
    memset(s, 0, sizeof *s);
}

void tt_chat_samples_free(tt_chat_samples *s)
{
    for (int i = 0; s && i < s->n; i++) sample_free(&s->s[i]);
    if (s) free(s->s), memset(s, 0, sizeof *s);
}

static tt_chat_sample *add_sample(tt_chat_samples *out, text *whole)
{
    tt_chat_sample *p = realloc(out->s, sizeof *p * (size_t)(out->n + 1));
    if (!p) {
        tt_errorf("out of memory");
        return NULL;
    }
    out->s = p;
    tt_chat_sample *s = &p[out->n++];
    memset(s, 0, sizeof *s);
    s->text = whole->p, s->len = whole->n; /* the sample owns the text now */
    whole->p = NULL;
    return s;
}

/* The bytes every later piece repeats: the rendering of the leading system message (or of no
 * message, which is the template's opening such as a BOS), when the whole text starts with it. A
 * template that cannot render it (one that reads messages[0]) repeats nothing. */
static void find_prefix(const tt_chat_template *t, const tt_chat_specials *sp, const tt_chat_limits *lim,
                        const cJSON *messages, const cJSON *tools, tt_chat_sample *s)
{
    const cJSON *m0 = messages ? messages->child : NULL;
    int k = m0 && !strcmp(role_of(m0), "system");
    text pre = {0};
    const char *saved = tt_last_error();
    char keep[512];
    snprintf(keep, sizeof keep, "%s", saved ? saved : "");
    if (render_first(t, sp, lim, messages, k, tools, 0, &pre, NULL, NULL) == 0) {
        text whole = {s->text, s->len};
        if (is_prefix(&pre, &whole) && (s->n_ranges == 0 || pre.n <= s->rstart[0])) s->prefix = pre.n;
    }
    tt_errorf("%s", keep); /* a failed try is not this conversation's error */
    free(pre.p);
}

/* Per assistant turn i: p_i = render(messages[:i], add_generation_prompt) and q_i =
 * render(messages[:i+1]). The turn's range is [reply_start(p_i, q_i), |q_i|) when q_i is a prefix of
 * the whole. Returns 1 when that prefix property fails for some turn (the template rewrites earlier
 * turns), 0 when it holds, -1 on error. With ranges 0 the ranges are not kept
 * (they come from elsewhere) and only the cuts are. */
static int walk_turns(const tt_chat_template *t, const tt_chat_specials *sp, const tt_chat_limits *lim,
                      const cJSON *messages, const cJSON *tools, int first_trained, int ranges, tt_chat_sample *s,
                      int *raised)
{
    const text whole = {s->text, s->len};
    int i = 0, broken = 0;
    for (const cJSON *m = messages->child; m && !broken; m = m->next, i++) {
        if (strcmp(role_of(m), "assistant")) continue;
        text p = {0}, q = {0};
        int rc = render_first(t, sp, lim, messages, i, tools, 1, &p, NULL, raised) ||
                 render_first(t, sp, lim, messages, i + 1, tools, 0, &q, NULL, raised);
        if (rc) {
            free(p.p), free(q.p);
            return -1;
        }
        if (!is_prefix(&q, &whole)) {
            broken = 1;
        } else {
            if (ranges && i >= first_trained && push_range(s, reply_start(&p, &q), q.n)) rc = -1;
            /* a later piece may start at the user turn that follows this reply */
            if (!rc && m->next && !strcmp(role_of(m->next), "user") && q.n < whole.n &&
                (s->n_cuts == 0 || s->cut[s->n_cuts - 1] < q.n))
                rc = push_size(&s->cut, &s->n_cuts, q.n);
        }
        free(p.p), free(q.p);
        if (rc) return -1;
    }
    return broken;
}

/* The template rewrites earlier turns: one sample per trained assistant turn i, the rendering of
 * messages[:i+1] trained on what it adds to the prompt of messages[:i]. */
static tt_err per_turn(const tt_chat_template *t, const tt_chat_specials *sp, const tt_chat_limits *lim,
                       const cJSON *messages, const cJSON *tools, int first_trained, tt_chat_samples *out, int *raised)
{
    int i = 0;
    out->per_turn = 1;
    for (const cJSON *m = messages->child; m; m = m->next, i++) {
        if (i < first_trained || strcmp(role_of(m), "assistant")) continue;
        text p = {0}, q = {0};
        if (render_first(t, sp, lim, messages, i, tools, 1, &p, NULL, raised) ||
            render_first(t, sp, lim, messages, i + 1, tools, 0, &q, NULL, raised)) {
            free(p.p), free(q.p);
            return -1;
        }
        size_t a = reply_start(&p, &q);
        free(p.p);
        tt_chat_sample *s = add_sample(out, &q);
        free(q.p);
        if (!s || push_range(s, a, s->len)) return -1;
        find_prefix(t, sp, lim, messages, tools, s);
        if (s->n_ranges == 0) sample_free(s), out->n--; /* an empty reply: nothing to train */
    }
    return 0;
}

tt_err tt_chat_samples_of(const tt_chat_template *t, const tt_chat_specials *sp, const cJSON *messages,
                          const cJSON *tools, int first_trained, tt_chat_train_on on, tt_chat_samples *out,
                          int *raised)
{
    memset(out, 0, sizeof *out);
    if (raised) *raised = 0;
    /* one clock for every rendering of the conversation: strftime_now must not move between a turn's
     * prefix and the whole (a run crossing midnight would break the prefix property) */
    const tt_chat_limits lim0 = {.now = (int64_t)time(NULL)}, *lim = &lim0;
    if (!cJSON_IsArray(messages)) return tt_errorf("the messages are not a list");
    text whole = {0};
    tt_chat_spans gen = {0};
    if (render_first(t, sp, lim, messages, cJSON_GetArraySize(messages), tools, 0, &whole, &gen, raised)) {
        tt_chat_spans_free(&gen);
        return -1;
    }
    tt_chat_sample *s = add_sample(out, &whole);
    tt_err rc = s ? 0 : -1;
    free(whole.p);
    if (!rc && on == TT_CHAT_TRAIN_ALL) {
        rc = push_range(s, 0, s->len);
        if (!rc && walk_turns(t, sp, lim, messages, tools, first_trained, 0, s, raised) < 0) rc = -1;
    } else if (!rc && t->has_generation) {
        /* the template marks what is trained; a prompt's (TRL) turns are not */
        text p0 = {0};
        if (first_trained > 0) rc = render_first(t, sp, lim, messages, first_trained, tools, 1, &p0, NULL, raised);
        for (int k = 0; !rc && k < gen.n; k++)
            if (gen.start[k] >= p0.n) rc = push_range(s, gen.start[k], gen.end[k]);
        free(p0.p);
        if (!rc && walk_turns(t, sp, lim, messages, tools, first_trained, 0, s, raised) < 0) rc = -1;
    } else if (!rc) {
        int broken = walk_turns(t, sp, lim, messages, tools, first_trained, 1, s, raised);
        if (broken < 0) rc = -1;
        if (broken > 0) {
            tt_chat_samples_free(out);
            rc = per_turn(t, sp, lim, messages, tools, first_trained, out, raised);
        }
    }
    tt_chat_spans_free(&gen);
    if (!rc && !out->per_turn) {
        if (s->n_ranges == 0) {
            tt_chat_samples_free(out); /* nothing to train */
        } else {
            find_prefix(t, sp, lim, messages, tools, s);
            /* a cut inside the repeated prefix would repeat it twice */
            int k = 0;
            for (int j = 0; j < s->n_cuts; j++)
                if (s->cut[j] > s->prefix) s->cut[k++] = s->cut[j];
            s->n_cuts = k;
        }
    }
    if (rc) tt_chat_samples_free(out);
    return rc;
}
