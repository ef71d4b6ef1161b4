/* backend_ops.h — what the parts of test_backend_ops share: the graph a case
 * builds and how the harness fills its inputs (test_backend_ops.c runs them),
 * the table of cases (backend_ops_cases.c) and the checks worked out by hand
 * (backend_ops_hand.c). */
#ifndef TT_TEST_BACKEND_OPS_H
#define TT_TEST_BACKEND_OPS_H
#include "backend/backend.h"
#include "graph/exec.h"
#include "harness.h"

#define MAX_VALS 64

/* How the harness fills an input. */
typedef enum {
    F_ACT,    /* activation dtype (f32, bf16; f64 in the twin), normal * scale */
    F_W,      /* weight dtype (f32; f64 in the twin), normal * scale */
    F_W_POS,  /* weight dtype, |normal| * scale (AdamW's second moment) */
    F_F32,    /* always f32, normal * scale (+ offset) */
    F_F64,    /* always f64: the values given in `fixed` */
    F_FREQ,   /* always f32: RoPE inverse frequencies of head dim `a` */
    I_UNI,    /* i32 uniform in [a, b) */
    I_TGT,    /* i32 targets in [0, a), one in five ignored (-100) */
    I_DOC,    /* i32 document ids of a (B = a, T = b) batch */
    I_POS,    /* i32 positions restarting at each document of a (B = a, T = b) batch */
    I_FIXED,  /* i32 / i64: the values given in `fixed` */
    F_W_COLS, /* weight dtype, normal * scale + fixed[j % a]: a per-column offset (skewed router logits) */
} fill_kind;

typedef struct {
    fill_kind kind;
    double scale, offset;
    int a, b;
    const double *fixed;
} fill;

/* One graph being built: the harness context every case writes through. */
typedef struct {
    tt_graph *g;
    tt_dtype act, w;            /* the dtypes of activations and of weights */
    tt_value *in[MAX_VALS];     /* inputs in creation order */
    fill spec[MAX_VALS];
    int n_in;
    tt_node *fwd;               /* the node under test */
    tt_value *gin[16];          /* gradients its backward rule gave, per input */
    tt_value *dy[8];            /* the upstream gradients given, per output */
    double tol;                 /* a case's own tolerance (0: the dtype's) */
} hc;

typedef struct {
    const char *name;
    void (*build)(hc *h, const void *p);
    const void *p;
    int fd;          /* check the f64 twin against finite differences (small shapes) */
    double tol_bf16; /* 0: the default */
} test_case;

/* every case, in the order they run (backend_ops_cases.c) */
extern const test_case op_cases[];
extern const size_t n_op_cases;

/* the checks against numbers worked out by hand, each on every registered backend (backend_ops_hand.c) */
void test_adamw_hand(void);
void test_expert_parallel_hand(void);
void test_grouped_matmul_tail(void);
void test_swiglu_tail(void);

#endif
