/* modes.h — how the executor runs a graph and how much of the forward the
 * backward recomputes: the two enums of the config that the library's graph
 * layer takes too, apart so that it need not see the whole config. */
#ifndef TITAN_MODES_H
#define TITAN_MODES_H

/* training.exec_mode; the C value is the index of the name in the key's allowed list */
typedef enum { TT_EXEC_GRAPH = 0, TT_EXEC_EAGER, TT_EXEC_DEBUG } tt_exec_mode;   /* "graph" "eager" "debug" */
/* activation_checkpoint.mode: recompute activations in the backward instead of keeping them */
typedef enum { TT_AC_NONE = 0, TT_AC_SELECTIVE, TT_AC_FULL } tt_ac_mode;         /* "none" "selective" "full" */

#endif
