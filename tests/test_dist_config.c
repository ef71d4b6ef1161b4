/* test_dist_config.c — the keys of jobs of several processes: parallelism.*,
 * training.mixed_precision_reduce and comm.*: their defaults and ranges, the
 * degrees that do not exist yet refused at finalize, the mesh resolved against
 * a world (tt_parallel_resolve), the TOML round trip, and the fault trigger. */
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "harness.h"
#include "titan/config.h"
#include "train/parallel.h"

#define HAS(needle) (strstr(tt_last_error(), needle) != NULL)

static int set(tt_config *c, const char *key, const char *value) { return tt_config_set(c, key, value, "cli"); }

static void defaults(void)
{
    tt_config c;
    tt_config_defaults(&c);
    const tt_parallelism_config *p = &c.parallelism;
    CHECK(p->data_parallel_replicate_degree == 1 && p->data_parallel_shard_degree == -1);
    CHECK(p->fsdp_reshard_after_forward == TT_RESHARD_DEFAULT && p->fsdp_bucket_bytes == 0);
    CHECK(p->tensor_parallel_degree == 1 && p->pipeline_parallel_degree == 1 && p->context_parallel_degree == 1 &&
          p->expert_parallel_degree == 1);
    CHECK(c.training.mixed_precision_reduce == TT_PARAM_FLOAT32);
    CHECK(c.comm.timeout_seconds == 60 && c.comm.fault_rank == -1 && c.comm.fault_step == 1 &&
          c.comm.fault_kind == TT_FAULT_EXIT);
    CHECK_MSG(tt_config_finalize(&c) == 0, "%s", tt_last_error());
}

static void setting(void)
{
    tt_config c;
    tt_config_defaults(&c);
    CHECK(set(&c, "parallelism.data_parallel_replicate_degree", "2") == 0 &&
          c.parallelism.data_parallel_replicate_degree == 2);
    CHECK(set(&c, "parallelism.data_parallel_shard_degree", "4") == 0 && c.parallelism.data_parallel_shard_degree == 4);
    CHECK(set(&c, "parallelism.fsdp_reshard_after_forward", "never") == 0 &&
          c.parallelism.fsdp_reshard_after_forward == TT_RESHARD_NEVER);
    CHECK(set(&c, "parallelism.fsdp_bucket_bytes", "100_000_000") == 0 &&
          c.parallelism.fsdp_bucket_bytes == 100000000);
    CHECK(set(&c, "training.mixed_precision_reduce", "bfloat16") == 0 &&
          c.training.mixed_precision_reduce == TT_PARAM_BFLOAT16);
    CHECK(set(&c, "comm.timeout_seconds", "2.5") == 0 && c.comm.timeout_seconds == 2.5);
    CHECK(set(&c, "comm.timeout_seconds", "0") == 0); /* 0: wait forever */
    CHECK(set(&c, "comm.fault_rank", "3") == 0 && set(&c, "comm.fault_step", "7") == 0 &&
          set(&c, "comm.fault_kind", "hang") == 0 && c.comm.fault_kind == TT_FAULT_HANG);
    CHECK(set(&c, "comm.fault_kind", "nan") == 0 && c.comm.fault_kind == TT_FAULT_NAN);

    /* what each key refuses */
    CHECK(set(&c, "parallelism.data_parallel_replicate_degree", "0") != 0 && HAS("must be >= 1"));
    CHECK(set(&c, "parallelism.data_parallel_replicate_degree", "-1") != 0);
    CHECK(set(&c, "parallelism.data_parallel_shard_degree", "0") != 0 && HAS(">= 1 or -1"));
    CHECK(set(&c, "parallelism.data_parallel_shard_degree", "-2") != 0);
    CHECK(set(&c, "parallelism.fsdp_reshard_after_forward", "sometimes") != 0 && HAS("default, always, never"));
    CHECK(set(&c, "parallelism.fsdp_bucket_bytes", "-1") != 0);
    CHECK(set(&c, "training.mixed_precision_reduce", "float16") != 0 && HAS("float32, bfloat16"));
    CHECK(set(&c, "comm.timeout_seconds", "-1") != 0);
    CHECK(set(&c, "comm.fault_rank", "-2") != 0);
    CHECK(set(&c, "comm.fault_step", "0") != 0);
    CHECK(set(&c, "comm.fault_kind", "segfault") != 0 && HAS("exit, hang, nan"));

    /* the TOML round trip carries the new sections */
    char *text = tt_config_to_toml(&c);
    CHECK(text && strstr(text, "[parallelism]") && strstr(text, "[comm]") &&
          strstr(text, "fsdp_reshard_after_forward = \"never\"") &&
          strstr(text, "mixed_precision_reduce = \"bfloat16\""));
    tt_config d;
    tt_config_defaults(&d);
    CHECK(text && tt_config_load_string(&d, text, strlen(text), "emitted.toml") == 0 &&
          memcmp(&c, &d, offsetof(tt_config, set_by_user_)) == 0);
    free(text);
}

/* tensor, pipeline and context parallelism do not exist yet; expert
 * parallelism does, with a receive bound of at least 1 */
static void refused_at_finalize(void)
{
    static const char *const keys[][2] = {{"parallelism.tensor_parallel_degree", "tensor parallelism"},
                                          {"parallelism.pipeline_parallel_degree", "pipeline parallelism"},
                                          {"parallelism.context_parallel_degree", "context parallelism"}};
    tt_config e;
    tt_config_defaults(&e);
    CHECK(set(&e, "parallelism.expert_parallel_degree", "2") == 0 && tt_config_finalize(&e) == 0);
    CHECK(set(&e, "parallelism.expert_receive_factor", "0.5") == 0 && tt_config_finalize(&e) != 0 &&
          HAS("parallelism.expert_receive_factor = 0.5"));
    CHECK(set(&e, "parallelism.expert_receive_factor", "1.5") == 0 && tt_config_finalize(&e) == 0);
    for (size_t i = 0; i < 3; i++) {
        tt_config c;
        tt_config_defaults(&c);
        CHECK(set(&c, keys[i][0], "2") == 0); /* the key exists, with TorchTitan's name */
        char want[160];
        snprintf(want, sizeof want, "%s = 2: %s does not exist in titan yet", keys[i][0], keys[i][1]);
        CHECK_MSG(tt_config_finalize(&c) != 0 && HAS(want), "%s: '%s'", keys[i][0], tt_last_error());
        CHECK(set(&c, keys[i][0], "1") == 0 && tt_config_finalize(&c) == 0);
    }
}

static void expect_mesh(int replicate, int shard, int world, int want_r, int want_s)
{
    tt_config c;
    tt_config_defaults(&c);
    c.parallelism.data_parallel_replicate_degree = replicate;
    c.parallelism.data_parallel_shard_degree = shard;
    int r = 0, s = 0, e = 0;
    CHECK_MSG(tt_parallel_resolve(&c, world, &r, &s, &e) == 0 && r == want_r && s == want_s && e == 1,
              "%d x %d on %d: %d x %d (%s)", replicate, shard, world, r, s, tt_last_error());
}

static void expect_refused(int replicate, int shard, int world, const char *needle)
{
    tt_config c;
    tt_config_defaults(&c);
    c.parallelism.data_parallel_replicate_degree = replicate;
    c.parallelism.data_parallel_shard_degree = shard;
    int r = -5, s = -5, e = -5;
    CHECK_MSG(tt_parallel_resolve(&c, world, &r, &s, &e) != 0 && HAS(needle) && r == -5 && s == -5,
              "%d x %d on %d: '%s' lacks '%s'", replicate, shard, world, tt_last_error(), needle);
}

static void resolve(void)
{
    expect_mesh(1, -1, 1, 1, 1);
    expect_mesh(1, -1, 4, 1, 4); /* FSDP over the world: the default */
    expect_mesh(2, -1, 4, 2, 2); /* HSDP */
    expect_mesh(4, -1, 4, 4, 1); /* plain data parallel */
    expect_mesh(4, 1, 4, 4, 1);
    expect_mesh(2, 64, 128, 2, 64);
    expect_refused(3, -1, 4, "parallelism.data_parallel_replicate_degree = 3 does not divide the world: the job "
                             "has 4 processes");
    expect_refused(2, 3, 4, "parallelism.data_parallel_replicate_degree x data_parallel_shard_degree = 2 x 3 = 6, "
                            "but the job has 4 processes");
    expect_refused(1, 2, 1, "the job has 1 process");
    expect_refused(2, -1, 1, "does not divide the world");
    expect_refused(65536, 65536, 4, "= 4294967296"); /* no int overflow */
    if (!tt_dist_built_with_mpi()) expect_refused(1, 2, 1, "this build of titan has no MPI");
    /* the expert degree divides the shard degree */
    tt_config c;
    tt_config_defaults(&c);
    c.parallelism.data_parallel_replicate_degree = 2, c.parallelism.expert_parallel_degree = 2;
    int r = 0, s = 0, e = 0;
    CHECK(tt_parallel_resolve(&c, 8, &r, &s, &e) == 0 && r == 2 && s == 4 && e == 2);
    c.parallelism.expert_parallel_degree = 3;
    CHECK(tt_parallel_resolve(&c, 8, &r, &s, &e) != 0 &&
          HAS("parallelism.expert_parallel_degree = 3 must divide data_parallel_shard_degree = 4"));
}

static void fault(void)
{
    tt_config c;
    tt_config_defaults(&c);
    CHECK(!tt_parallel_fault_now(&c, 0, 1)); /* fault_rank -1: never */
    c.comm.fault_rank = 1, c.comm.fault_step = 3;
    CHECK(tt_parallel_fault_now(&c, 1, 3));
    CHECK(!tt_parallel_fault_now(&c, 0, 3) && !tt_parallel_fault_now(&c, 1, 2) && !tt_parallel_fault_now(&c, 1, 4));
}

static void help(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tt_config_print_help(f);
    fclose(f);
    CHECK(buf && strstr(buf, "[parallelism]") && strstr(buf, "--parallelism.fsdp_bucket_bytes") &&
          strstr(buf, "--comm.timeout_seconds") && strstr(buf, "for tests"));
    free(buf);
}

int main(void)
{
    defaults();
    setting();
    refused_at_finalize();
    resolve();
    fault();
    help();
    return th_done("test_dist_config");
}
