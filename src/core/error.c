/* error.c — the thread-local error message, and logging (rank 0's lines, every rank's warnings). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

static _Thread_local char err_msg[2048];

const char *tt_last_error(void) { return err_msg[0] ? err_msg : "unknown error"; }

int tt_errorf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    return -1;
}

int tt_error_prefix(const char *fmt, ...)
{
    char prefix[512], old[sizeof err_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err_msg, sizeof old);
    size_t k = strlen(prefix);
    memcpy(err_msg, prefix, k);
    size_t rest = strnlen(old, sizeof old - 1 - k);
    memcpy(err_msg + k, old, rest);
    err_msg[k + rest] = 0;
    return -1;
}

/* Set once by the dist layer before other threads log (core cannot ask it). */
static int log_rank = 0, log_world = 1;

void tt_log_set_rank(int rank, int world)
{
    log_rank = rank;
    log_world = world;
}

/* fmt's text in buf, or in a malloc'd buffer when longer (*heap then set, to
 * be freed); cut to fit buf when that allocation fails. */
static char *format_line(char *buf, size_t size, char **heap, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(buf, size, fmt, ap);
    *heap = NULL;
    if (n >= 0 && (size_t)n >= size && (*heap = malloc((size_t)n + 1))) vsnprintf(*heap, (size_t)n + 1, fmt, again);
    va_end(again);
    return *heap ? *heap : buf;
}

/* Each line goes out in one write, so the lines of ranks sharing a terminal
 * (through mpirun) do not interleave mid-line. */
void tt_log(const char *fmt, ...)
{
    if (log_rank != 0) return;
    char buf[4096], *heap;
    va_list ap;
    va_start(ap, fmt);
    const char *line = format_line(buf, sizeof buf, &heap, fmt, ap);
    va_end(ap);
    fprintf(stdout, "%s\n", line);
    fflush(stdout);
    free(heap);
}

void tt_warn(const char *fmt, ...)
{
    char buf[4096], *heap, rank[32] = "";
    va_list ap;
    va_start(ap, fmt);
    const char *msg = format_line(buf, sizeof buf, &heap, fmt, ap);
    va_end(ap);
    if (log_world > 1) snprintf(rank, sizeof rank, "rank %d: ", log_rank);
    fprintf(stderr, "%swarning: %s\n", rank, msg);
    free(heap);
}
