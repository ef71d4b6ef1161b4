/* test_host_queue.c — the host backends' queue in both modes (synchronous, and TITAN_QUEUE=async
 * with a worker thread a queue): copies in order, an upload's source free for reuse at once, a
 * download's bytes after finish or a later event's sync, another queue's event waited on, and a
 * kernel's error reported with the same message at run (synchronous) or at the read that waits
 * (asynchronous), the queue usable again after it. */
#include <stdlib.h>
#include <string.h>

#include "graph/exec.h"
#include "harness.h"
#include "ops/ops.h"

#define N 4096

static void copies(const tt_backend *be, const char *mode)
{
    tt_queue *q = be->queue_new(), *q2 = be->queue_new();
    tt_buf *a = be->alloc(N * sizeof(float)), *b = be->alloc(N * sizeof(float));
    float *src = malloc(N * sizeof *src), *d1 = malloc(N * sizeof *d1), *d2 = malloc(N * sizeof *d2);
    CHECK_MSG(q && q2 && a && b && src && d1 && d2, "%s %s: setup: %s", be->name, mode, tt_last_error());
    if (!q || !q2 || !a || !b || !src || !d1 || !d2) return;
    for (int i = 0; i < N; i++) src[i] = (float)i;
    /* upload, then reuse the source at once: the queue must have taken its bytes */
    CHECK(be->upload(q, (tt_mem){a, 0}, src, N * sizeof(float)) == 0);
    for (int i = 0; i < N; i++) src[i] = -1;
    CHECK(be->copy(q, (tt_mem){b, 0}, (tt_mem){a, 0}, N * sizeof(float)) == 0);
    CHECK(be->zero(q, (tt_mem){a, 0}, N / 2 * sizeof(float)) == 0);
    CHECK(be->download(q, d1, (tt_mem){b, 0}, N * sizeof(float)) == 0);
    CHECK(be->download(q, d2, (tt_mem){a, 0}, N * sizeof(float)) == 0);
    CHECK(be->finish(q) == 0);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += d1[i] != (float)i || d2[i] != (i < N / 2 ? 0.0f : (float)i);
    CHECK_MSG(bad == 0, "%s %s: upload, copy, zero and downloads in order: %d wrong", be->name, mode, bad);

    /* a download's bytes after the sync of an event recorded after it */
    for (int i = 0; i < N; i++) src[i] = (float)(3 * i);
    CHECK(be->upload(q, (tt_mem){a, 0}, src, N * sizeof(float)) == 0);
    CHECK(be->download(q, d1, (tt_mem){a, 0}, N * sizeof(float)) == 0);
    tt_event *ev = be->record(q);
    CHECK(ev && be->sync(ev) == 0);
    bad = 0;
    for (int i = 0; i < N; i++) bad += d1[i] != (float)(3 * i);
    CHECK_MSG(bad == 0, "%s %s: a download after an event's sync: %d wrong", be->name, mode, bad);

    /* q2 waits on an event of q: its copy reads what q wrote before it */
    for (int i = 0; i < N; i++) src[i] = (float)(7 * i);
    CHECK(be->upload(q, (tt_mem){a, 0}, src, N * sizeof(float)) == 0);
    ev = be->record(q);
    CHECK(ev && be->wait(q2, ev) == 0);
    CHECK(be->copy(q2, (tt_mem){b, 0}, (tt_mem){a, 0}, N * sizeof(float)) == 0);
    CHECK(be->download(q2, d2, (tt_mem){b, 0}, N * sizeof(float)) == 0);
    CHECK(be->finish(q2) == 0);
    CHECK(ev && be->sync(ev) == 0);
    bad = 0;
    for (int i = 0; i < N; i++) bad += d2[i] != (float)(7 * i);
    CHECK_MSG(bad == 0, "%s %s: a copy on another queue after an event: %d wrong", be->name, mode, bad);

    be->free(a);
    be->free(b);
    be->queue_free(q);
    be->queue_free(q2);
    free(src), free(d1), free(d2);
}

/* An embedding of an id outside the table: the kernel fails. Returns the message (static). */
static const char *kernel_error(const tt_backend *be, const char *mode, int async)
{
    static char msg[2][512];
    tt_graph *g = tt_graph_new();
    const int64_t n = 4, tab[2] = {8, 16};
    tt_value *ids = tt_graph_input(g, "ids", TT_I32, 1, &n), *t = tt_graph_input(g, "table", TT_F32, 2, tab);
    tt_value *y = tt_embedding(g, ids, t);
    tt_graph_mark_output(g, y);
    tt_exec *e = tt_exec_new(g, be, NULL, TT_EXEC_GRAPH);
    CHECK_MSG(e, "%s %s: %s", be->name, mode, tt_last_error());
    msg[async][0] = 0;
    if (!e) return msg[async];
    const int32_t bad_ids[4] = {1, 2, 99, 3}, good_ids[4] = {0, 1, 2, 7};
    float table[8 * 16], out[4 * 16];
    for (int i = 0; i < 8 * 16; i++) table[i] = (float)i;
    CHECK(tt_exec_write(e, t, table, sizeof table) == 0);
    CHECK(tt_exec_write(e, ids, bad_ids, sizeof bad_ids) == 0);
    tt_err rc = tt_exec_run(e);
    /* synchronous: the run fails; asynchronous: the run enqueues, and the read that waits fails */
    CHECK_MSG(async ? rc == 0 : rc != 0, "%s %s: the failing run returned %d", be->name, mode, rc);
    if (!rc) rc = tt_exec_read(e, y, out, sizeof out);
    CHECK_MSG(rc != 0, "%s %s: an id outside the table went unreported", be->name, mode);
    snprintf(msg[async], sizeof msg[async], "%s", tt_last_error());
    /* reported once: the queue runs again */
    CHECK(tt_exec_write(e, ids, good_ids, sizeof good_ids) == 0);
    CHECK_MSG(tt_exec_run(e) == 0 && tt_exec_read(e, y, out, sizeof out) == 0, "%s %s: after the error: %s", be->name,
              mode, tt_last_error());
    CHECK(out[3 * 16 + 5] == (float)(7 * 16 + 5));
    tt_exec_free(e);
    tt_graph_free(g);
    return msg[async];
}

int main(void)
{
    const char *names[] = {"cpu", "ref"};
    for (int b = 0; b < 2; b++) {
        const tt_backend *be = tt_backend_get(names[b]);
        CHECK(be != NULL);
        if (!be) continue;
        const char *m[2];
        for (int async = 0; async < 2; async++) { /* the mode is read when a queue is made */
            setenv("TITAN_QUEUE", async ? "async" : "sync", 1);
            copies(be, async ? "async" : "sync");
            m[async] = kernel_error(be, async ? "async" : "sync", async);
        }
        CHECK_MSG(strstr(m[0], "embedding") && strstr(m[0], "99") && strcmp(m[0], m[1]) == 0,
                  "%s: the kernel's error differs between the modes:\n  sync:  %s\n  async: %s", be->name, m[0], m[1]);
        printf("  %s: a kernel's error in both modes: %s\n", be->name, m[0]);
    }
    return th_done("test_host_queue");
}
