/* parallel.c — the parallelism keys against the job's world (how many
 * processes the launcher started is known only at run time, so
 * tt_config_finalize cannot check this), and the test-only fault's trigger. */
#include "train/parallel.h"

#include "dist/dist.h"

tt_err tt_parallel_resolve(const tt_config *c, int world, int *replicate, int *shard)
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
    *replicate = r, *shard = s;
    return 0;
}

bool tt_parallel_fault_now(const tt_config *c, int rank, long step)
{
    return c->comm.fault_rank >= 0 && c->comm.fault_rank == rank && step == c->comm.fault_step;
}
