/* trace.c — a training step's per-node timings as a Chrome trace: one "X"
 * (complete) event per node, named by its op, with its scope, input shapes and
 * FLOPs (trace.h has the format). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "formats/safetensors.h"
#include "train/trace.h"

static tt_err add_part(cJSON *events, const tt_trace_part *p, double t0)
{
    const tt_graph *g = tt_exec_graph(p->exec);
    for (int i = 0; i < g->n_nodes; i++) {
        const tt_node *nd = g->nodes[i];
        cJSON *x = cJSON_CreateObject();
        if (!x || !cJSON_AddItemToArray(events, x)) {
            cJSON_Delete(x);
            return tt_errorf("out of memory building a trace");
        }
        cJSON_AddStringToObject(x, "name", tt_op_name(nd->op));
        cJSON_AddStringToObject(x, "cat", nd->scope[0] ? nd->scope : p->graph);
        cJSON_AddStringToObject(x, "ph", "X");
        cJSON_AddNumberToObject(x, "ts", 1e6 * (p->start[i] - t0));
        cJSON_AddNumberToObject(x, "dur", 1e6 * p->dur[i]);
        cJSON_AddNumberToObject(x, "pid", 0);
        cJSON_AddNumberToObject(x, "tid", 0);
        cJSON *args = cJSON_AddObjectToObject(x, "args");
        if (!args) return tt_errorf("out of memory building a trace");
        cJSON_AddStringToObject(args, "scope", nd->scope);
        cJSON_AddStringToObject(args, "graph", p->graph);
        if (p->micro_step >= 0) cJSON_AddNumberToObject(args, "micro_step", p->micro_step);
        char shapes[512] = "", d[96];
        size_t k = 0;
        for (int j = 0; j < nd->n_in && k < sizeof shapes - 100; j++)
            k += (size_t)snprintf(shapes + k, sizeof shapes - k, "%s%s", j ? ", " : "",
                                  tt_value_desc(nd->in[j], d, sizeof d));
        cJSON_AddStringToObject(args, "inputs", shapes);
        cJSON_AddNumberToObject(args, "gflop", tt_ops[nd->op]->flops(nd) / 1e9);
    }
    return 0;
}

tt_err tt_trace_write(const char *path, const tt_trace_part *parts, int n_parts)
{
    if (n_parts < 1 || tt_exec_graph(parts[0].exec)->n_nodes < 1) return tt_errorf("%s: an empty trace", path);
    const double t0 = parts[0].start[0]; /* times are from the step's first node */
    cJSON *root = cJSON_CreateObject(), *events = root ? cJSON_AddArrayToObject(root, "traceEvents") : NULL;
    tt_err rc = events ? 0 : tt_errorf("out of memory building a trace");
    for (int k = 0; k < n_parts && !rc; k++) rc = add_part(events, &parts[k], t0);
    if (!rc) cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
    char *text = rc ? NULL : cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!rc && !text) rc = tt_errorf("out of memory printing a trace");
    if (rc) tt_error_prefix("%s: ", path);
    else rc = tt_write_file_atomic(path, text, strlen(text)); /* its errors name the path */
    free(text);
    return rc;
}
