/* bpe_regex_fast.c — hand-written matchers for the three pre-tokenizer regexes
 * almost every byte-level tokenizer uses (GPT-2's, Llama 3's and Qwen2's).
 * They decide a match from ASCII alone and answer "ask PCRE2" whenever the
 * match or the character that ends it is not ASCII, so PCRE2 stays the
 * reference for all of Unicode; test_tokenizer checks them against PCRE2. */
#include <string.h>

#include "tokenizer/bpe_internal.h"

static const char GPT2_RE[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char LLAMA3_RE[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_RE[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                               "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

int tok_fast_kind(const char *pat, size_t n)
{
    if (n == sizeof GPT2_RE - 1 && !memcmp(pat, GPT2_RE, n)) return TOK_FAST_GPT2;
    if (n == sizeof LLAMA3_RE - 1 && !memcmp(pat, LLAMA3_RE, n)) return TOK_FAST_LLAMA3;
    if (n == sizeof QWEN2_RE - 1 && !memcmp(pat, QWEN2_RE, n)) return TOK_FAST_QWEN2;
    return 0;
}

/* ASCII classes: letter (\p{L}), digit (\p{N}), space (\s), other; any
 * byte >= 0x80 is C_HIGH (not decided here) */
enum { C_OTHER = 0, C_LETTER, C_DIGIT, C_SPACE, C_HIGH };
#define O C_OTHER
#define L C_LETTER
#define D C_DIGIT
#define S C_SPACE
static const uint8_t ascii_cls[128] = {
    O, O, O, O, O, O, O, O, O, S, S, S, S, S, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O,
    S, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, D, D, D, D, D, D, D, D, D, D, O, O, O, O, O, O,
    O, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, O, O, O, O, O,
    O, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, O, O, O, O, O,
};
#undef O
#undef L
#undef D
#undef S

static inline int cls_of(uint8_t c) { return c < 0x80 ? ascii_cls[c] : C_HIGH; }

#define CLS(i) (i < n ? cls_of((uint8_t)s[i]) : -1) /* -1: end of text */

/* the end of a run of class k from i; *stop = class of the byte that ended it */
static size_t run(const char *s, size_t n, size_t i, int k, int *stop)
{
    while (i < n && cls_of((uint8_t)s[i]) == k) i++;
    *stop = CLS(i);
    return i;
}

/* 's 't 're 've 'm 'll 'd at i (s[i] == '\''); icase for (?i:...) */
static size_t contraction(const char *s, size_t n, size_t i, int icase)
{
    char a = i + 1 < n ? s[i + 1] : 0, b = i + 2 < n ? s[i + 2] : 0;
    if (icase) {
        a = (char)(a >= 'A' && a <= 'Z' ? a + 32 : a);
        b = (char)(b >= 'A' && b <= 'Z' ? b + 32 : b);
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* whitespace at i: \s*[\r\n]+ (when newlines), \s+(?!\S), \s+ */
static int space_match(const char *s, size_t n, size_t i, int newline_alt, size_t *end)
{
    int stop;
    size_t e = run(s, n, i, C_SPACE, &stop);
    if (stop == C_HIGH) return 0; /* a non-ASCII space may continue the run */
    if (newline_alt) {
        size_t k = e;
        while (k > i && s[k - 1] != '\n' && s[k - 1] != '\r') k--;
        if (k > i) {
            *end = k;
            return 1;
        }
    }
    *end = (stop < 0 || e - i == 1) ? e : e - 1;
    return 1;
}

static int gpt2(const char *s, size_t n, size_t i, size_t *end)
{
    int c = cls_of((uint8_t)s[i]), stop;
    if (s[i] == '\'') {
        if (i + 1 < n && ((uint8_t)s[i + 1] & 0x80)) return 0;
        size_t k = contraction(s, n, i, 0);
        if (k) {
            *end = i + k;
            return 1;
        }
    }
    size_t j = i;
    if (s[i] == ' ' && i + 1 < n && cls_of((uint8_t)s[i + 1]) != C_SPACE) {
        j = i + 1; /* " ?" before a letter, digit or other run */
        c = cls_of((uint8_t)s[j]);
    }
    if (c == C_HIGH) return 0;
    if (c == C_SPACE) return space_match(s, n, i, 0, end);
    *end = run(s, n, j, c, &stop);
    return stop != C_HIGH;
}

static int llama3(const char *s, size_t n, size_t i, size_t *end, int max_digits)
{
    int c = cls_of((uint8_t)s[i]), stop;
    if (c == C_HIGH) return 0;
    if (s[i] == '\'') {
        if ((i + 1 < n && ((uint8_t)s[i + 1] & 0x80)) || (i + 2 < n && ((uint8_t)s[i + 2] & 0x80))) return 0;
        size_t k = contraction(s, n, i, 1);
        if (k) {
            *end = i + k;
            return 1;
        }
    }
    int next = CLS(i + 1);
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (c == C_LETTER || (c != C_DIGIT && s[i] != '\r' && s[i] != '\n' && (next == C_LETTER || next == C_HIGH))) {
        if (c != C_LETTER && next == C_HIGH) return 0; /* is it a letter? */
        *end = run(s, n, c == C_LETTER ? i : i + 1, C_LETTER, &stop);
        return stop != C_HIGH;
    }
    /* \p{N}{1,3} or \p{N} */
    if (c == C_DIGIT) {
        size_t e = i;
        while (e < n && e - i < (size_t)max_digits && cls_of((uint8_t)s[e]) == C_DIGIT) e++;
        if (e - i < (size_t)max_digits && e < n && ((uint8_t)s[e] & 0x80)) return 0;
        *end = e;
        return 1;
    }
    /* " ?[^\s\p{L}\p{N}]+[\r\n]*" */
    size_t j = (s[i] == ' ' && next == C_OTHER) ? i + 1 : i;
    if (cls_of((uint8_t)s[j]) == C_OTHER) {
        size_t e = run(s, n, j, C_OTHER, &stop);
        if (stop == C_HIGH) return 0;
        while (e < n && (s[e] == '\r' || s[e] == '\n')) e++;
        *end = e;
        return 1;
    }
    if (s[i] == ' ' && next == C_HIGH) return 0; /* " " before a non-ASCII other */
    return space_match(s, n, i, 1, end);
}

int tok_fast_match(int kind, const char *s, size_t n, size_t i, size_t *end)
{
    switch (kind) {
    case TOK_FAST_GPT2: return gpt2(s, n, i, end);
    case TOK_FAST_LLAMA3: return llama3(s, n, i, end, 3);
    case TOK_FAST_QWEN2: return llama3(s, n, i, end, 1);
    }
    return 0;
}
