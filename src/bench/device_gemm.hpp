// GEMM rates through a backend's gemm op (backend/backend.hpp): `bench --mode=gemm --device=cuda`
// (the ceiling a GPU's MFU is read against) and the backend_gemm tool. The CPU's ceiling keeps its
// own measurement (ceiling.hpp: oneDNN's GEMMs per thread count, next to the FMA peak).
#pragma once

#include <nlohmann/json.hpp>
#include <iosfwd>
#include <vector>

#include "backend/backend.hpp"
#include "bench/ceiling.hpp"
#include "model/config.hpp"
#include "ops/bf16.hpp"

namespace bertbench::bench {

struct RateSpread {
    double median = 0, min = 0, max = 0;  // GFLOP/s over the repeats
};

// C(M,N) = op(A)·op(B) with fp32 C, timed on `be`: one warm-up product, then products until
// min_time seconds have run between two synchronize() calls, `repeats` times. Operands hold
// values in [-0.5, 0.5) (zeros would run faster on some tensor cores).
RateSpread time_backend_gemm(backend::Backend& be, backend::MatmulType type, const GemmShape& s, double min_time,
                             int repeats);

// The dense datasheet rate of a GPU of this name for bf16 or fp32 (H100 SXM/PCIe, H200, A100), in
// GFLOP/s; 0 where unknown.
double nominal_peak_gflops(const std::string& device_name, ops::Precision dtype);

// bench --mode=gemm on a device backend: BERT's 18 linear-layer shapes at `tokens` rows (weighted
// by their count per layer, as the CPU ceiling is) and a 8192³ square, per dtype; prints a
// summary per dtype and returns one JSON object each.
nlohmann::json run_device_gemm(backend::Backend& be, const model::BertConfig& c, int tokens, int repeats,
                               const std::vector<ops::Precision>& dtypes, std::ostream& text);

}  // namespace bertbench::bench
