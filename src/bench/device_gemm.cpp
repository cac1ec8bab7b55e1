// GEMM rates through a backend (device_gemm.hpp).
#include "bench/device_gemm.hpp"

#include <algorithm>
#include <chrono>
#include <iostream>

#include "core/error.hpp"

namespace bertbench::bench {

RateSpread time_backend_gemm(backend::Backend& be, backend::MatmulType type, const GemmShape& s, double min_time,
                             int repeats) {
    const size_t es = type == backend::MatmulType::bf16 ? 2 : 4;
    const size_t na = static_cast<size_t>(s.m) * s.k, nb = static_cast<size_t>(s.k) * s.n;
    const size_t n = std::max(na, nb);
    std::vector<float> vals(n);
    for (size_t i = 0; i < n; ++i) vals[i] = static_cast<float>((i * 2654435761u) >> 24 & 0xff) / 256.f - 0.5f;
    std::vector<ops::bf16> half(type == backend::MatmulType::bf16 ? n : 0);
    for (size_t i = 0; i < half.size(); ++i) half[i] = ops::to_bf16(vals[i]);
    const void* src = half.empty() ? static_cast<const void*>(vals.data()) : static_cast<const void*>(half.data());
    void* a = be.alloc(na * es);
    void* b = be.alloc(nb * es);
    void* c = be.alloc(static_cast<size_t>(s.m) * s.n * 4);
    be.upload(a, src, na * es);
    be.upload(b, src, nb * es);
    const auto gemm = BB_OP(be, gemm);
    const int lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
    const auto once = [&] {
        gemm(type, s.trans_a, s.trans_b, s.m, s.n, s.k, a, lda, b, ldb, 0.f, c, s.n, nullptr,
             backend::MatmulType::f32);
    };
    once();
    be.synchronize();
    std::vector<double> rates;
    for (int r = 0; r < repeats; ++r) {
        using clock = std::chrono::steady_clock;
        long iters = 0;
        double secs = 0;
        const auto t0 = clock::now();
        while (secs < min_time || iters == 0) {
            const long batch = std::max<long>(1, iters);
            for (long i = 0; i < batch; ++i) once();
            be.synchronize();
            iters += batch;
            secs = std::chrono::duration<double>(clock::now() - t0).count();
        }
        rates.push_back(2.0 * s.m * s.n * s.k * iters / secs / 1e9);
    }
    be.release(a);
    be.release(b);
    be.release(c);
    std::sort(rates.begin(), rates.end());
    return {rates[rates.size() / 2], rates.front(), rates.back()};
}

double nominal_peak_gflops(const std::string& name, ops::Precision dtype) {
    const bool bf = dtype == ops::Precision::bf16;
    if (name.find("H100") != std::string::npos && name.find("PCIe") != std::string::npos)
        return bf ? 756'000 : 51'000;
    if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos)  // SXM
        return bf ? 989'400 : 66'900;
    if (name.find("A100") != std::string::npos) return bf ? 312'000 : 19'500;
    return 0;
}

nlohmann::json run_device_gemm(backend::Backend& be, const model::BertConfig& c, int tokens, int repeats,
                               const std::vector<ops::Precision>& dtypes, std::ostream& text) {
    nlohmann::json out = nlohmann::json::array();
    const std::string describe = be.describe();
    for (const ops::Precision d : dtypes) {
        const auto type = d == ops::Precision::bf16 ? backend::MatmulType::bf16 : backend::MatmulType::f32;
        nlohmann::json shapes = nlohmann::json::array();
        double total_flops = 0, total_time = 0;
        for (const GemmShape& s : bert_linear_shapes(tokens, c.hidden_size, c.intermediate_size)) {
            const RateSpread r = time_backend_gemm(be, type, s, 0.2, std::max(1, repeats));
            const double flops = 2.0 * s.m * s.n * s.k;
            total_flops += flops * s.count;
            total_time += flops / (r.max * 1e9) * s.count;  // a ceiling: the best repeat
            shapes.push_back({{"role", s.role}, {"m", s.m}, {"n", s.n}, {"k", s.k}, {"count", s.count},
                              {"gflops_median", r.median}, {"gflops_max", r.max}});
        }
        const RateSpread sq = time_backend_gemm(be, type, GemmShape{"square", 8192, 8192, 8192, false, false, 1},
                                                0.3, std::max(1, repeats));
        const double gemm_gflops = total_flops / total_time / 1e9;
        const double peak = nominal_peak_gflops(describe, d);
        text << fmt::format(
            "{}: {} GEMM on BERT linear shapes ({} tokens, H {}, I {}) {:.1f} TFLOP/s; 8192³ {:.1f} TFLOP/s "
            "(median of {}, {:.1f}-{:.1f}){}\n",
            be.name(), ops::precision_name(d), tokens, c.hidden_size, c.intermediate_size, gemm_gflops / 1e3,
            sq.median / 1e3, repeats, sq.min / 1e3, sq.max / 1e3,
            peak > 0 ? fmt::format("; nominal dense peak {:.1f} TFLOP/s", peak / 1e3) : std::string());
        nlohmann::json j = {{"mode", "gemm"},
                            {"device", be.name()},
                            {"device_info", describe},
                            {"dtype", ops::precision_name(d)},
                            {"tokens", tokens},
                            {"gemm_gflops", gemm_gflops},
                            {"square_8192_gflops", sq.median},
                            {"shapes", shapes}};
        j["nominal_peak_gflops"] = peak > 0 ? nlohmann::json(peak) : nlohmann::json(nullptr);
        out.push_back(j);
    }
    return out;
}

}  // namespace bertbench::bench
