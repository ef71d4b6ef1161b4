/* parallel.c — the parallelism keys against the job's world (how many
 * processes the launcher started is known only at run time, so
 * tt_config_finalize cannot check this), and the test-only fault's trigger. */
#include "train/parallel.h"

#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"

tt_err tt_parallel_resolve(const tt_config *c, int world, int *replicate, int *shard, int *ep)
{
    const tt_parallelism_config *p = &c->parallelism;
    int r = p->data_parallel_replicate_degree, s = p->data_parallel_shard_degree;
    const char *why = tt_dist_built_with_mpi() ? "" : " (this build of titan has no MPI: it runs one process)";
    char job[160];
    snprintf(job, sizeof job, "the job has %d process%s (mpirun -np, srun -n)%s", world, world == 1 ? "" : "es",
             why);
    if (world < 1) return tt_errorf("a world of %d processes", world);
    if (r < 1) return tt_errorf("parallelism.data_parallel_replicate_degree = %d must be at least 1", r);
    if (s == -1) {
        if (world % r)
            return tt_errorf("parallelism.data_parallel_replicate_degree = %d does not divide the world: %s, and "
                             "parallelism.data_parallel_shard_degree = -1 takes what is left of it",
                             r, job);
        s = world / r;
    } else if (s < 1) {
        return tt_errorf("parallelism.data_parallel_shard_degree = %d must be at least 1, or -1 (the rest)", s);
    } else if ((long long)r * s != world) {
        return tt_errorf("parallelism.data_parallel_replicate_degree x data_parallel_shard_degree = %d x %d = %lld, "
                         "but %s: they must be equal (data_parallel_shard_degree = -1 takes the rest)",
                         r, s, (long long)r * s, job);
    }
    const int e = p->expert_parallel_degree;
    if (tt_parallel_check_experts(e, s, NULL)) return -1;
    *replicate = r, *shard = s, *ep = e;
    return 0;
}

tt_err tt_parallel_check_experts(int ep, int shards, const tt_model_cfg *mc)
{
    if (ep < 1 || shards % ep)
        return tt_errorf("parallelism.expert_parallel_degree = %d must divide data_parallel_shard_degree = %d (the "
                         "experts are exchanged within groups of that many ranks of a shard group)",
                         ep, shards);
    if (mc && ep > 1 && (mc->moe.n_experts <= 0 || mc->moe.n_experts % ep))
        return tt_errorf("parallelism.expert_parallel_degree = %d needs a Mixture-of-Experts model whose experts it "
                         "divides (model.num_experts = %d)",
                         ep, mc->moe.n_experts);
    return 0;
}

tt_err tt_parallel_check_lora(int ep)
{
    /* the base's experts would have to be split over the expert group as a trained state's are */
    if (ep > 1)
        return tt_errorf("LoRA (lora.rank, lora.adapter_path) with parallelism.expert_parallel_degree = %d: LoRA does "
                         "not split the experts over ranks (its frozen base is sharded with each MoE block whole); "
                         "set expert_parallel_degree = 1 (FSDP and HSDP shard the experts with their blocks)",
                         ep);
    return 0;
}

bool tt_parallel_fault_now(const tt_config *c, int rank, long step)
{
    return c->comm.fault_rank >= 0 && c->comm.fault_rank == rank && step == c->comm.fault_step;
}

tt_err tt_parallel_join(const tt_config *c, tt_dist **out)
{
    tt_dist *d = *out = tt_dist_start(c->comm.timeout_seconds);
    if (!d) return -1;
    const int world = tt_dist_world(d);
    int rep = 1, shard = 1, ep = 1;
    if (tt_parallel_resolve(c, world, &rep, &shard, &ep) || tt_dist_set_mesh(d, rep, shard, ep)) return -1;
    if (world == 1) return 0;
    char *toml = tt_config_to_toml(c);
    tt_err rc = toml ? tt_dist_check_same(d, toml, strlen(toml), "the resolved config (every rank must run the same job)")
                     : tt_errorf("out of memory");
    free(toml);
    if (rc) return -1;
    int bound, cores = tt_num_cores(&bound);
    if (!getenv("OMP_NUM_THREADS")) /* the cores the launcher bound it to, or its share of the machine's */
        tt_set_num_threads(bound ? cores : cores / tt_dist_local_size(d));
    return 0;
}

void tt_parallel_step_cfg(const tt_config *c, const tt_sharding *sh, tt_step_cfg *sc)
{
    const tt_reshard_mode m = c->parallelism.fsdp_reshard_after_forward;
    sc->sh = sh;
    sc->reduce_dtype = c->training.mixed_precision_reduce == TT_PARAM_BFLOAT16 ? TT_BF16 : TT_F32;
    sc->reshard_after_forward = m == TT_RESHARD_NEVER ? 0 : m == TT_RESHARD_ALWAYS ? 2 : 1;
    sc->no_overlap = !c->comm.overlap;
    sc->ep_recv_factor = c->parallelism.expert_receive_factor;
}
