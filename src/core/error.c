/* error.c — the thread-local error message and plain logging. */
#include <stdarg.h>
#include <stdio.h>
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

void tt_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}

void tt_warn(const char *fmt, ...)
{
    va_list ap;
    fputs("warning: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
