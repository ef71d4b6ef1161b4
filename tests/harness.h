/* harness.h — a tiny test harness: CHECK macros, a pass/fail count, skip. */
#ifndef TT_HARNESS_H
#define TT_HARNESS_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/core.h"
#include "graph/exec.h"
#include "models/model.h"

extern int th_failed, th_passed;
#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (cond) th_passed++;                                                          \
        else {                                                                          \
            th_failed++;                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);    \
        }                                                                               \
    } while (0)
#define CHECK_MSG(cond, ...)                                                            \
    do {                                                                                \
        if (cond) th_passed++;                                                          \
        else {                                                                          \
            th_failed++;                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                               \
            fputc('\n', stderr);                                                        \
        }                                                                               \
    } while (0)
#define CHECK_NEAR(a, b, tol) CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%g vs %g (tol %g)", (double)(a), (double)(b), (double)(tol))
/* Print the summary line and return the process exit code. */
int th_done(const char *name);
/* Report a skip with a reason and return 77 (CTest's SKIP_RETURN_CODE). */
/* The whole test cannot run here: prints why and returns 77 (CTest's "skipped"); under CI=true, where nothing may
 * be skipped, a failure (1). */
int th_skip(const char *name, const char *why);
/* A part of the test cannot run here: prints why; under CI=true counts a failure */
void th_skip_part(const char *why);
/* A part of the test needs instructions this CPU lacks (AVX-512 kernels on an AVX2 CPU): prints what was not
 * run, and never counts a failure, even under CI=true: no install step can add them, and the tests that
 * force each GEMM path (test_gemm) skip the paths a CPU lacks the same way. */
void th_cpu_lacks(const char *what);
/* Zeroed memory for n elements of size bytes, released with free(); n = 0
 * still gives a pointer. Overflow or out of memory ends the test (exit 1). */
void *th_alloc(size_t n, size_t size);
/* Document ids (B, T) drawn from r: row b starts document 100 * b, and each
 * later token starts a new document with probability 1/4. */
int32_t *th_doc_ids(tt_rng *r, int B, int T);
/* The whole file at path in a NUL-terminated buffer (free() it), its size in
 * *len unless len is NULL; NULL (and *len 0) when it cannot be read. */
char *th_read_file(const char *path, size_t *len);
/* Write text to root/rel, making rel's folders; 0 on success. Tests that
 * build a synthetic source tree share it. */
int th_write_file(const char *root, const char *rel, const char *text);
/* Remove the folder root and everything in it. */
void th_rm_tree(const char *root);
/* Path to ../shared beside the source tree, or NULL if absent. */
const char *th_shared_dir(void);

/* A hand-built train graph of a model over a (B, T) batch: the forward, its
 * ce_linear loss and the loss's gradient for every parameter, all marked as
 * outputs. Tests that check the executor or a pass on a real model share it
 * instead of going through the step graph. It binds nothing: the unit roots
 * and the inputs get their values once an executor exists (upload below). */
typedef struct {
    tt_graph *g;
    tt_value *loss;
    tt_value **grads; /* one per parameter, NULL where the loss does not reach it */
    tt_value **wrt, **wgrads; /* every view of the weights the forward reads, and its gradient */
    int n_wrt;
    tt_value **units; /* the unit roots the parameters are views of */
    tt_value *ids, *pos, *doc, *targets, *scale; /* inputs: (B*T) i32, scale (1) f32 */
    int n_fwd; /* the forward's node count (through the loss): a pass like tt_remat needs it */
    int B, T;
} th_train_graph;
/* Build it; failures are CHECKs (the fields stay NULL where a step failed). */
th_train_graph th_train_graph_build(const tt_model *m, int B, int T);
/* Write the weights (unit k: the slice [units[k].offset, + numel) of the
 * model's flat host layout) into the unit roots, then the batch into the
 * inputs. One CHECK; returns its status (0 = ok). */
int th_train_graph_upload(tt_exec *e, const tt_model *m, const th_train_graph *t, const float *weights,
                          const int32_t *ids, const int32_t *targets, const int32_t *pos, const int32_t *doc,
                          const float *scale);
/* Download the gradients into grad (m->numel floats, the flat layout; zeros
 * where a parameter has none): each view's gradient added at its offset, as
 * the step graph accumulates them. Each read is a CHECK naming the view;
 * returns -1 if any failed. */
int th_train_graph_grads(tt_exec *e, const tt_model *m, const th_train_graph *t, float *grad);
/* Free the graph and the arrays (not the executor). */
void th_train_graph_free(th_train_graph *t);
#endif
