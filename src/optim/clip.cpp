// Global norm, clip factor, accumulation; see clip.hpp. Also the ChunkPlan (chunks.hpp).
#include "optim/clip.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.hpp"

namespace bertbench::optim {

ChunkPlan::ChunkPlan(std::span<const model::ParamInfo> entries, size_t total_floats)
    : total_(total_floats) {
    tensors_.reserve(entries.size());
    first_chunk_.reserve(entries.size() + 1);
    for (const auto& e : entries) {
        if (e.offset > total_floats || e.size > total_floats - e.offset)
            fail("[optim] parameter {}: [{}, {}) lies outside the {}-float buffer "
                 "(hint: the ParamTable and the buffers disagree)",
                 e.name, e.offset, e.offset + e.size, total_floats);
        first_chunk_.push_back(chunks_.size());
        const size_t t = tensors_.size();
        tensors_.push_back({e.name, e.offset, e.size, e.decay});
        for (size_t b = 0; b < e.size; b += kChunkFloats)
            chunks_.push_back({t, e.offset + b, e.offset + std::min(e.size, b + kChunkFloats)});
    }
    first_chunk_.push_back(chunks_.size());
}

namespace {

// Σ x² in double. AVX: four independent accumulators of 4 doubles (16 floats per iteration),
// combined in a fixed order, so the result depends only on n and the data.
double sum_squares(const float* x, size_t n) {
    size_t i = 0;
    double s = 0.0;
#if defined(__AVX__)
    __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                      _mm256_setzero_pd()};
    for (; i + 16 <= n; i += 16) {
        for (int k = 0; k < 4; ++k) {
            const __m256d d = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4 * k));
            acc[k] = _mm256_add_pd(acc[k], _mm256_mul_pd(d, d));
        }
    }
    alignas(32) double lanes[4];
    _mm256_store_pd(lanes, _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])));
    s = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
#endif
    for (; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
    return s;
}

void check_size(const ChunkPlan& plan, size_t got, const char* what) {
    if (got != plan.total_floats())
        fail("[optim] {}: expected {} floats (the ParamTable's total), got {}", what,
             plan.total_floats(), got);
}

}  // namespace

float global_norm(const ChunkPlan& plan, std::span<const float> grads) {
    check_size(plan, grads.size(), "gradient buffer");
    const auto& chunks = plan.chunks();
    std::vector<double> partial(chunks.size());
    const long n = static_cast<long>(chunks.size());
#pragma omp parallel for schedule(dynamic, 1)
    for (long c = 0; c < n; ++c)
        partial[c] = sum_squares(grads.data() + chunks[c].begin, chunks[c].end - chunks[c].begin);
    double total = 0.0;
    for (double p : partial) total += p;  // fixed order: deterministic for any thread count
    return static_cast<float>(std::sqrt(total));
}

float global_norm(const model::ParamTable& table, std::span<const float> grads) {
    return global_norm(ChunkPlan(table.entries(), table.total_floats()), grads);
}

float clip_scale(float norm, float clip_norm) {
    if (std::isinf(clip_norm) && clip_norm > 0) return 1.0f;  // "no clipping" (TF: NaN)
    if (!std::isfinite(norm)) return std::numeric_limits<float>::quiet_NaN();
    // TF: clip_norm * minimum(1.0 / use_norm, 1.0 / clip_norm); 1/0 = inf so norm 0 gives 1.
    return clip_norm * std::min(1.0f / norm, 1.0f / clip_norm);
}

void fill_zero(std::span<float> buf) {
    const size_t n = buf.size();
    const long count = static_cast<long>((n + kChunkFloats - 1) / kChunkFloats);
#pragma omp parallel for schedule(static) if (count > 1)
    for (long c = 0; c < count; ++c) {
        const size_t b = static_cast<size_t>(c) * kChunkFloats;
        std::memset(buf.data() + b, 0, std::min(kChunkFloats, n - b) * sizeof(float));
    }
}

void accumulate_scaled(const ChunkPlan& plan, std::span<float> accum,
                       std::span<const float> grads, float scale, int n) {
    check_size(plan, accum.size(), "accumulation buffer");
    check_size(plan, grads.size(), "gradient buffer");
    if (n < 1) fail("[optim] steps_per_update: expected >= 1, got {}", n);
    const float nf = static_cast<float>(n);
    const auto& chunks = plan.chunks();
    const long count = static_cast<long>(chunks.size());
#pragma omp parallel for schedule(dynamic, 1)
    for (long c = 0; c < count; ++c) {
        float* a = accum.data();
        const float* g = grads.data();
        for (size_t i = chunks[c].begin; i < chunks[c].end; ++i) a[i] = a[i] + (g[i] * scale) / nf;
    }
}

}  // namespace bertbench::optim
