// bench under `mpirun -np N` (issue 12, the NVIDIA table's multi-GPU rows): the pretraining point
// data-parallel over N ranks. --batch_size is the GLOBAL batch (each rank takes batch / N, as
// pretrain's --train_batch_size); a training step is every rank's forward + backward with the
// bucketed gradient all-reduce overlapped with the backward (dist::GradientReducer), the clip of
// the averaged gradient (--clip_by_global_norm_after_gradient_allreduce, MLPerf's multi-node
// setting, the one that can overlap) and the LAMB update. Reported besides the usual figures:
// per-rank and total throughput, scaling efficiency against rank 0 alone at the per-rank batch
// (measured first while the other ranks sleep), and the step split into compute and EXPOSED
// communication (the time the optimizer waited for the all-reduce).
#pragma once

#include <nlohmann/json.hpp>

#include "bench/runner.hpp"

namespace bertbench::bench {

struct MpiOptions {
    bool overlap = true;       // start buckets during the backward (false: all after it)
    double bucket_mb = 4;      // all-reduce bucket size, MiB
    bool baseline = true;      // measure rank 0 alone for the scaling efficiency
};

struct MpiPointResult {
    PointResult result;  // the usual fields; sequences/tokens per second are the job's totals
    nlohmann::json mpi;  // the data-parallel figures (see docs/benchmark.md)
};

// Collective: every rank calls it with the same point. The pretraining model (the squad task's
// span model does not run data-parallel yet).
MpiPointResult run_point_mpi(const Point& p, double ceiling_gflops, const MpiOptions& o);

}  // namespace bertbench::bench
