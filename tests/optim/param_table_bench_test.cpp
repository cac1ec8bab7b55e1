// The optimizer on the model's real ParamTable: decay flags agree with the reference's exclusion
// regexes, slot names cover every tensor. DISABLED_ benchmark (run by hand with
// --gtest_also_run_disabled_tests --gtest_filter='*Bench*'): one LAMB/AdamW update and one
// global norm on BERT-base, against a plain memory-bandwidth yardstick (copy of the same bytes).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "model/param_table.hpp"
#include "optim/clip.hpp"
#include "optim/optimizer.hpp"

namespace bertbench::optim {
namespace {

TEST(OptimizerOnParamTable, DecayFlagsFollowTheReferenceRule) {
    const model::ParamTable table(model::BertConfig::preset("tiny"), model::Heads::pretraining);
    Optimizer opt(table, OptimizerConfig{});
    int excluded = 0;
    for (const auto& e : table.entries()) {
        const bool ref_excluded = e.name.find("LayerNorm") != std::string::npos ||
                                  e.name.find("layer_norm") != std::string::npos ||
                                  e.name.find("bias") != std::string::npos;
        EXPECT_EQ(e.decay, !ref_excluded) << e.name;
        excluded += ref_excluded;
    }
    EXPECT_GT(excluded, 0);
    const auto st = opt.state_tensors();
    ASSERT_EQ(st.size(), 2 * table.entries().size());
    EXPECT_EQ(st[0].name, table.entries()[0].name + "/adam_m");
}

double seconds_median(int reps, const std::function<void()>& f) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        const auto a = std::chrono::steady_clock::now();
        f();
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

TEST(OptimizerBench, DISABLED_BertBaseUpdate) {
    const model::ParamTable table(model::BertConfig::preset("base"), model::Heads::pretraining);
    const size_t n = table.total_floats();
    std::vector<float> w(n, 0.01f), g(n, 1e-4f), a(n), b(n);
    for (size_t i = 0; i < n; ++i) w[i] = 0.01f * static_cast<float>(i % 97) - 0.4f;
    Optimizer lamb(table, OptimizerConfig{});
    Optimizer adamw(table, OptimizerConfig::adamw_reference());
    const ChunkPlan plan(table.entries(), n);
    lamb.step(w, g, 1e-4f);  // touch pages
    adamw.step(w, g, 1e-4f);
    const int reps = 7;
    const double t_copy = seconds_median(reps, [&] {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < static_cast<long>(n); ++i) a[i] = b[i];
    });
    const double t_norm = seconds_median(reps, [&] { volatile float x = global_norm(plan, g); (void)x; });
    const double t_lamb = seconds_median(reps, [&] { lamb.step(w, g, 1e-4f, 0.5f); });
    const double t_adamw = seconds_median(reps, [&] { adamw.step(w, g, 1e-4f, 0.5f); });
    const double mb = n * 4.0 / 1e6;
    std::printf("BERT-base %zu floats, %d threads, median of %d:\n", n, omp_get_max_threads(), reps);
    std::printf("  copy (8 B/param)            %7.1f ms  %6.1f GB/s\n", t_copy * 1e3, 2 * mb / t_copy / 1e3);
    std::printf("  global_norm (4 B/param)     %7.1f ms  %6.1f GB/s\n", t_norm * 1e3, mb / t_norm / 1e3);
    std::printf("  LAMB step (40 B/param min)  %7.1f ms  %6.1f GB/s effective\n", t_lamb * 1e3, 10 * mb / t_lamb / 1e3);
    std::printf("  AdamW step (24 B/param)     %7.1f ms  %6.1f GB/s effective\n", t_adamw * 1e3, 6 * mb / t_adamw / 1e3);
}

}  // namespace
}  // namespace bertbench::optim
