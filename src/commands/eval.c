/* eval.c — `titan eval`: the loss and perplexity of a checkpoint on the
 * validation data. */
#include <math.h>

#include "train/run_open.h"
#include "train/validate.h"

tt_err tt_eval(const tt_config *cfg, double *loss, double *ppl, long *tokens)
{
    tt_run r;
    if (tt_run_open(&r, cfg, TT_RUN_EVAL)) return -1;
    tt_err rc = 0;
    if (!r.val_loader) rc = tt_errorf("no validation data: set validation.dataset_path (or use the synthetic corpus)");
    else if (!(rc = tt_run_validate(&r, loss, tokens))) {
        *ppl = exp(*loss);
        tt_log("eval step %ld: loss %.4f  perplexity %.3f  tokens %ld", r.step, *loss, *ppl, *tokens);
        if (r.builtin_corpus)
            tt_log("corpus floor %.4f, unigram %.4f: gap closed %.1f%%, loss/floor %.3f", r.corpus.floor_nats,
                   r.corpus.unigram_nats, 100 * (r.corpus.unigram_nats - *loss) / r.corpus.gap_nats,
                   *loss / r.corpus.floor_nats);
    }
    tt_run_close(&r);
    return rc;
}
