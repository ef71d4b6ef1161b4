/* fuzz_chat_template.c — libFuzzer target for the chat template interpreter (src/chat/): any bytes
 * are parsed as a template and, when they parse, rendered over a fixed conversation with tools,
 * under small bounds; nothing may crash, and the generation ranges must lie inside the output. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_template.h"
#include "core/core.h"

static const char conversation[] =
    "[{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"H\\u00e9llo \\ud83d\\ude00\\nworld\", \"n\": 3, \"f\": 1.5},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\", \"function\":"
    "   {\"name\": \"f\", \"arguments\": {\"x\": [1, 2.0, true, null]}}}]},"
    " {\"role\": \"tool\", \"content\": \"42\"},"
    " {\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"ok\"}], \"reasoning\": \"r\"}]";
static const char tools_json[] = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static cJSON *messages, *tools;
    if (!messages) {
        messages = cJSON_Parse(conversation);
        tools = cJSON_Parse(tools_json);
        if (!messages || !tools || tt_chat_json_keep_numbers(messages, conversation, strlen(conversation))) __builtin_trap();
    }
    tt_chat_template *t = tt_chat_template_parse((const char *)data, size, "fuzz.jinja");
    if (!t) return 0;
    tt_chat_specials sp = {"<s>", "</s>", NULL, NULL, NULL, NULL, NULL};
    tt_chat_limits lim = {200000, 1 << 20, 64 << 20, 1700000000};
    for (int agp = 0; agp < 2; agp++) {
        char *out = NULL;
        size_t len = 0;
        int raised = 0;
        tt_chat_spans gen = {0};
        if (tt_chat_render(t, messages, agp ? tools : NULL, agp, &sp, &lim, &out, &len, &gen, &raised) == 0) {
            if (strlen(out) > len) __builtin_trap();
            for (int i = 0; i < gen.n; i++)
                if (gen.start[i] > gen.end[i] || gen.end[i] > len) __builtin_trap();
        } else if (!tt_last_error()[0]) {
            __builtin_trap(); /* every failure says why */
        }
        free(out);
        tt_chat_spans_free(&gen);
    }
    tt_chat_template_free(t);
    return 0;
}
