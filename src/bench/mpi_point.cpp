// run_point_mpi: see mpi_point.hpp.
#include "bench/mpi_point.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/aligned.hpp"
#include "core/error.hpp"
#include "core/sysinfo.hpp"
#include "core/timing.hpp"
#include "dist/comm.hpp"
#include "model/bert.hpp"
#include "model/param_table.hpp"
#include "optim/update.hpp"
#include "train/data_parallel.hpp"
#include "train/micro_step.hpp"

namespace bertbench::bench {
namespace {

double median_or_zero(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

MpiPointResult run_point_mpi(const Point& p, double ceiling_gflops, const MpiOptions& o) {
    dist::Comm& comm = dist::world();
    const int N = comm.size();
    const int local_batch = dist::local_batch(p.batch_size, N, "batch_size");
    if (o.bucket_mb <= 0) fail("--bucket_mb: expected > 0, got {}", o.bucket_mb);
    Point local = p;
    local.batch_size = local_batch;
    const bool train = p.mode == "train";

    MpiPointResult out;
    // Scaling baseline: rank 0 alone at the per-rank batch, the others asleep.
    double base_sps = 0;
    if (o.baseline && N > 1) {
        if (comm.rank() == 0) base_sps = run_point(local, 0).sequences_per_second;
        dist::idle_barrier(comm);
    }

    omp_set_num_threads(p.threads);
    const int max_pred = point_max_predictions(p);
    const model::ParamTable table(p.config, model::Heads::pretraining);
    model::EngineOptions opts{p.dtype};
    opts.last_layer_subset = p.last_layer_subset;
    model::BertPretrainer engine(table, {local.batch_size, p.seq_len, max_pred, !train}, opts);
    AlignedVector<float> params(table.total_floats()), grads;
    table.initialize(params, 42);
    const int needed = (p.warmup + p.steps) * (train ? p.steps_per_update : 1);
    std::vector<model::Batch> batches;
    if (p.data_files.empty())
        batches.push_back(synthetic_batch(p.config, local.batch_size, p.seq_len, max_pred,
                                          7 + static_cast<uint64_t>(comm.rank())));
    else
        batches = read_batches(p.data_files, p.config, p.seq_len, max_pred, local.batch_size,
                               std::min(needed, 256), p.skip_corrupt_records);
    std::unique_ptr<optim::ParameterUpdater> updater;
    train::DataParallel dp(comm, table, static_cast<size_t>(o.bucket_mb * (1 << 20)));
    if (train) {
        grads.assign(table.total_floats(), 0.0f);
        optim::LrSchedule schedule;
        schedule.num_train_steps = 1'000'000;
        updater = std::make_unique<optim::ParameterUpdater>(
            table, optim::OptimizerConfig{}, schedule, p.steps_per_update,
            optim::ClipMode::after_accumulation);
    }

    std::vector<double> step_ms, wait_ms, span_ms;
    double seqs = 0, real = 0, padded = 0, flops = 0, bytes = 0;
    size_t next = 0;
    uint64_t micro = 0;
    comm.barrier();
    for (int k = 0; k < p.warmup + p.steps; ++k) {
        const double t0 = now_ms();
        double s_seqs = 0, s_real = 0, s_flops = 0;
        for (int m = 0; m < (train ? p.steps_per_update : 1); ++m) {
            const model::Batch& b = batches[next++ % batches.size()];
            s_seqs += b.batch_size;
            s_real += b.num_tokens();  // unpadded: every token is real
            s_flops += model::forward_flops(p.config, b, model::Heads::pretraining, p.last_layer_subset) *
                       (train ? 3.0 : 1.0);
            if (!train) {
                engine.forward(params, b, false, 0, 0);
                continue;
            }
            train::PretrainStep model(engine, &comm);
            model.set_batch(b);
            train::micro_step(model, params, grads, {*updater, &dp, nullptr, o.overlap}, 1234, micro);
            ++micro;
        }
        const double dt = now_ms() - t0;
        const train::DataParallel::Stats st = dp.take_stats();
        if (k < p.warmup) continue;
        step_ms.push_back(dt);
        wait_ms.push_back(st.wait_s * 1e3);
        span_ms.push_back(st.span_s * 1e3);
        bytes += st.bytes;
        seqs += s_seqs;
        real += s_real;
        padded += static_cast<double>(local.batch_size) * p.seq_len * (train ? p.steps_per_update : 1);
        flops += s_flops;
    }
    if (train)
        dp.require_same_weights(params, fmt::format("after step {}", micro),
                                "the ranks diverged: a bug, please report it");

    PointResult& r = out.result;
    r.point = p;
    r.step_ms = step_ms;
    std::vector<double> sorted = step_ms;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    r.step_ms_median = median_or_zero(step_ms);
    r.step_ms_min = sorted.front();
    r.step_ms_max = sorted.back();
    r.latency_ms_p50 = r.step_ms_median;
    r.latency_ms_p90 = sorted[std::min(n - 1, static_cast<size_t>(std::ceil(0.9 * n)) - 1)];
    r.latency_ms_p99 = sorted[std::min(n - 1, static_cast<size_t>(std::ceil(0.99 * n)) - 1)];
    const double per_s = 1e3 / r.step_ms_median / static_cast<double>(n);
    const double rank_sps = seqs * per_s;
    // job totals: every rank's sequences per second summed
    double tot[4] = {rank_sps, real * per_s, padded * per_s, flops * per_s / 1e9};
    comm.all_reduce_sum(std::span<double>(tot, 4));
    r.sequences_per_second = tot[0];
    r.tokens_per_second = tot[1];
    r.padded_tokens_per_second = tot[2];
    r.real_token_fraction = tot[2] > 0 ? tot[1] / tot[2] : 1.0;
    r.gflops = tot[3];
    r.ceiling_gflops = ceiling_gflops * N;  // N ranks, each with its own ceiling
    r.mfu = r.ceiling_gflops > 0 ? r.gflops / r.ceiling_gflops : 0.0;
    r.peak_rss_mb = sysinfo::peak_rss_mb();
    r.arena_mb = static_cast<double>(engine.arena_bytes()) / (1 << 20);

    const double exposed = median_or_zero(wait_ms), step = r.step_ms_median;
    nlohmann::json& j = out.mpi;
    j = {{"ranks", N},
         {"batch_size_per_rank", local.batch_size},
         {"threads_per_rank", p.threads},
         {"sequences_per_second_per_rank", rank_sps},
         {"sequences_per_second_total", r.sequences_per_second},
         {"allreduce_overlap", o.overlap},
         {"bucket_mb", o.bucket_mb}};
    if (base_sps > 0) {
        j["sequences_per_second_1rank"] = base_sps;
        j["scaling_efficiency"] = r.sequences_per_second / (N * base_sps);
    }
    if (train) {
        const double b_step = bytes / static_cast<double>(n);
        const double span = median_or_zero(span_ms);
        j["step_ms_compute"] = step - exposed;
        j["step_ms_exposed_comm"] = exposed;
        j["exposed_comm_fraction"] = step > 0 ? exposed / step : 0.0;
        j["allreduce_bytes_per_step"] = b_step;
        j["allreduce_ms_median"] = span;
        // ring all-reduce moves 2(N-1)/N of the buffer in and out of each rank
        j["allreduce_bus_gbps"] =
            span > 0 ? 8.0 * b_step * 2.0 * (N - 1) / N / (span * 1e-3) / 1e9 : 0.0;
    }
    return out;
}

}  // namespace bertbench::bench
