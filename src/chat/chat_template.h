/* chat_template.h — Hugging Face chat templates rendered in C: a Jinja2 interpreter for the subset
 * chat templates use, with the settings of transformers' apply_chat_template (trim_blocks,
 * lstrip_blocks, loop controls, the immutable sandbox, raise_exception, strftime_now, namespace,
 * {% generation %}, transformers' tojson). What it does not support it refuses, naming the construct
 * and its line:column; it never renders differently from jinja2. */
#ifndef TT_CHAT_TEMPLATE_H
#define TT_CHAT_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "titan/titan.h"

typedef struct cJSON cJSON;
typedef struct tt_chat_template tt_chat_template;

/* Parse a template; NULL + tt_errorf("NAME:LINE:COL: ...") on a syntax error or a construct outside
 * the subset. name is for messages. */
tt_chat_template *tt_chat_template_parse(const char *src, size_t len, const char *name);
void tt_chat_template_free(tt_chat_template *t);

/* The special tokens the template sees (transformers passes the tokenizer's special_tokens_map);
 * NULL: not set, so the variable is undefined, as in transformers. */
typedef struct {
    const char *bos, *eos, *unk, *pad, *sep, *cls, *mask;
} tt_chat_specials;

/* The byte ranges [start, end) of the rendered text that {% generation %} blocks wrote, in order,
 * measured where transformers measures them (the top-level output written so far), and cut at the
 * text's end: 0 <= start <= end <= the text's length. */
typedef struct tt_chat_spans {
    size_t *start, *end;
    int n, cap;
} tt_chat_spans;
void tt_chat_spans_free(tt_chat_spans *s);

/* Bounds on one rendering (0: the default). */
typedef struct {
    uint64_t max_steps;  /* evaluation steps (default 10,000,000) */
    size_t max_output;   /* bytes of output and of any string built (default 64 MiB) */
    size_t max_memory;   /* bytes of values (default 256 MiB) */
    int64_t now;         /* strftime_now's time in seconds since the epoch (local time); 0: the clock */
} tt_chat_limits;

/* Render messages (a JSON array of {role, content, ...}; content a string or a list of parts) as
 * transformers' apply_chat_template(messages, tools=tools, add_generation_prompt=...) renders them:
 * a message's keys whose value is null are dropped and the reasoning fields aliased first, as it
 * does. tools may be NULL (the variable is then None). *out (malloc'd, NUL-terminated) and *out_len
 * receive the text; gen (may be NULL) the {% generation %} ranges. On error: -1 and the message
 * (tt_last_error); a template's raise_exception gives exactly its message, and *raised (may be NULL)
 * is set to 1; other errors say "NAME:LINE:COL: ...". */
tt_err tt_chat_render(const tt_chat_template *t, const cJSON *messages, const cJSON *tools,
                      int add_generation_prompt, const tt_chat_specials *sp, const tt_chat_limits *lim,
                      char **out, size_t *out_len, tt_chat_spans *gen, int *raised);

/* A model folder's chat template as transformers loads it: chat_template.jinja, else
 * tokenizer_config.json's "chat_template" (a string, or a list of {name, template} from which
 * "default" is taken). *src is malloc'd. */
tt_err tt_chat_template_from_hf_dir(const char *dir, char **src, size_t *len, char *name, size_t name_cap);
/* The special tokens of tokenizer_config.json (strings or {"content": ...}); strings are malloc'd
 * into *sp; free with tt_chat_specials_free. A folder without the file gives none. */
tt_err tt_chat_specials_from_hf_dir(const char *dir, tt_chat_specials *sp);
void tt_chat_specials_free(tt_chat_specials *sp);

/* The messages (a new array, cJSON_Delete it) and tools (inside line, may be NULL) of one chat
 * JSONL line: {"messages": [...], "tools": [...]}, ShareGPT's {"conversations": [{from, value}]}
 * (human, gpt, system, tool), TRL's {"prompt": [...], "completion": [...]}, or a bare list. Each
 * message must be an object whose "role" is system, user, assistant or tool. *first_trained (may be
 * NULL) is the first message whose assistant turns are trained: the completion's for TRL, else 0. */
tt_err tt_chat_conversation_of(const cJSON *line, cJSON **messages, const cJSON **tools, int *first_trained);

/* The template a command renders with: file (--chat-template) when given, else hf_dir's; and
 * hf_dir's special tokens (none without hf_dir). Free with tt_chat_template_free and
 * tt_chat_specials_free; on error nothing is left to free. */
tt_err tt_chat_template_open(const char *hf_dir, const char *file, tt_chat_template **t, tt_chat_specials *sp);

/* One JSONL line as JSON (its length given, no NUL needed); NULL + "malformed JSON..." when it is
 * not, or when anything but whitespace follows the value. */
cJSON *tt_chat_parse_line(const char *line, size_t len);

/* cJSON keeps no number literal, so 1.0 and 1 would both read as a number: after cJSON_Parse of
 * text, this stores each number's literal (valuestring, freed by cJSON_Delete) so that the template
 * sees ints and floats as Python's json.loads makes them. */
tt_err tt_chat_json_keep_numbers(cJSON *root, const char *text, size_t len);

#endif
