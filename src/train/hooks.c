/* hooks.c — the step hooks a config asks for, made and freed together. */
#include "train/hooks.h"

tt_err tt_step_hooks_from_config(tt_run *r, tt_step_hook *hooks, int *n)
{
    int (*const make[])(tt_run *, tt_step_hook *) = {tt_fault_hook, tt_profile_hook, tt_peak_check_hook};
    _Static_assert(sizeof make / sizeof make[0] <= TT_MAX_HOOKS, "TT_MAX_HOOKS holds every hook");
    *n = 0;
    for (size_t i = 0; i < sizeof make / sizeof make[0]; i++) {
        int k = make[i](r, &hooks[*n]);
        if (k < 0) {
            tt_step_hooks_free(hooks, *n);
            *n = 0;
            return -1;
        }
        *n += k;
    }
    return 0;
}

void tt_step_hooks_free(tt_step_hook *hooks, int n)
{
    for (int i = 0; i < n; i++)
        if (hooks[i].free) hooks[i].free(hooks[i].ctx);
}
