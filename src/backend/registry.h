/* registry.h — each backend implementation's constructor, which the table
 * of backends (backend.c) lists; declared once here so that the compiler
 * checks every implementation against the table's type. */
#ifndef TT_BACKEND_REGISTRY_H
#define TT_BACKEND_REGISTRY_H
struct tt_backend; /* backend.h (not included: backend.c includes this file) */

const struct tt_backend *tt_backend_cpu_make(void); /* cpu/cpu_backend.c */
const struct tt_backend *tt_backend_ref_make(void); /* ref/ref_backend.c */
#endif
