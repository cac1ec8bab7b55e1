// The 2-thread sgemm "ceiling" for model-FLOP utilisation: ops::gemm (oneDNN's sgemm) on the
// linear-layer shapes of BERT-base at 4096 tokens — forward (x·W), backward-data (dy·Wᵀ) and
// backward-weight (xᵀ·dy) of QKV/attention-output (768→768), intermediate (768→3072) and output
// (3072→768) — weighted as in one training step. Prints per-shape and aggregate GFLOP/s.
// Usage: sgemm_ceiling [tokens=4096] [reps=3]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ops/gemm.hpp"

namespace {
double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

int main(int argc, char** argv) {
    const int N = argc > 1 ? std::atoi(argv[1]) : 4096;
    const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
    struct Layer { int in, out, count; const char* name; };
    const Layer layers[] = {{768, 768, 4, "qkv+attn_out 768x768"}, {768, 3072, 1, "intermediate 768x3072"},
                            {3072, 768, 1, "output 3072x768"}};
    std::vector<float> x(static_cast<size_t>(N) * 3072, 0.01f), w(3072 * 3072, 0.02f),
        y(static_cast<size_t>(N) * 3072, 0.f), dw(3072 * 3072, 0.f);
    double total_flops = 0, total_time = 0;
    for (const Layer& l : layers) {
        for (int kind = 0; kind < 3; ++kind) {
            const char* kname = kind == 0 ? "fwd" : kind == 1 ? "bwd_data" : "bwd_weight";
            std::vector<double> ts;
            for (int r = 0; r < reps + 1; ++r) {
                const double t0 = now();
                if (kind == 0)
                    bertbench::ops::gemm(false, false, N, l.out, l.in, 1.f, x.data(), l.in, w.data(), l.out, 0.f, y.data(), l.out);
                else if (kind == 1)
                    bertbench::ops::gemm(false, true, N, l.in, l.out, 1.f, y.data(), l.out, w.data(), l.out, 0.f, x.data(), l.in);
                else
                    bertbench::ops::gemm(true, false, l.in, l.out, N, 1.f, x.data(), l.in, y.data(), l.out, 1.f, dw.data(), l.out);
                ts.push_back(now() - t0);
            }
            ts.erase(ts.begin());
            std::sort(ts.begin(), ts.end());
            const double f = 2.0 * N * l.in * l.out;
            std::printf("%-24s %-10s %7.1f GFLOP/s (median of %d)\n", l.name, kname, f / ts[ts.size() / 2] * 1e-9, reps);
            total_flops += f * l.count;
            total_time += ts[ts.size() / 2] * l.count;
        }
    }
    std::printf("{\"sgemm_ceiling_gflops\":%.1f,\"tokens\":%d,\"threads\":%d}\n", total_flops / total_time * 1e-9, N,
                omp_get_max_threads());
    return 0;
}
