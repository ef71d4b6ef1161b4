/* parallel.h — the parallelism keys against the job's world: the mesh's
 * degrees, resolved and checked once the number of processes is known, and the
 * test-only fault injection's trigger. */
#ifndef TT_PARALLEL_H
#define TT_PARALLEL_H

#include <stdbool.h>

#include "core/core.h"
#include "titan/config.h"
#include "train/step_graph.h"

/* The mesh for a world of `world` processes: parallelism.
 * data_parallel_replicate_degree x data_parallel_shard_degree (-1: the world
 * divided by the replicate degree), and expert_parallel_degree (*ep), which
 * must divide the shard degree. An error naming the keys and the world when
 * they do not fit it (saying so when this build has no MPI and so runs one
 * process). Call after tt_dist_get, before tt_dist_set_mesh. */
tt_err tt_parallel_resolve(const tt_config *c, int world, int *replicate, int *shard, int *ep);

/* Join the job, for a command that trains or evaluates on every rank: the
 * dist layer (*d), the mesh resolved and set, every rank checked to run the
 * same resolved config, the watchdog's timeout (comm.timeout_seconds), and
 * each rank's threads (the cores the launcher bound it to, else its share of
 * the machine's; OMP_NUM_THREADS rules when set). One process: only *d. */
struct tt_dist;
tt_err tt_parallel_join(const tt_config *c, struct tt_dist **d);

/* The expert parallel degree against the shard degree it splits (it must
 * divide it) and, when mc is given, the model's experts (an MoE model whose
 * experts it divides): an error naming parallelism.expert_parallel_degree. */
tt_err tt_parallel_check_experts(int ep, int shards, const tt_model_cfg *mc);

/* LoRA under the expert parallel degree ep: refused past 1, naming the keys. */
tt_err tt_parallel_check_lora(int ep);

/* A rank's step graph under the mesh sh lays out (sh->shards x
 * sh->replicas > 1): the FSDP keys of c into *sc (sh, reduce dtype,
 * resharding, overlap). */
void tt_parallel_step_cfg(const tt_config *c, const tt_sharding *sh, tt_step_cfg *sc);

/* Whether the test-only fault strikes: this is comm.fault_rank and `step` is
 * comm.fault_step. What to do is comm.fault_kind's: the caller ends the
 * process (exit), stops answering (hang) or poisons its loss (nan). */
bool tt_parallel_fault_now(const tt_config *c, int rank, long step);
/* comm.fault_kind = slow_save (fault.c): the seconds that rank's writes of
 * `step` take on purpose, 3 x comm.timeout_seconds (0 when the fault does not
 * strike); and that much slow work, in slices, each reported as progress as
 * a slow disk's chunks would be. */
double tt_fault_slow_seconds(const tt_config *c, int rank, long step);
void tt_fault_slow_work(double seconds);

#endif
