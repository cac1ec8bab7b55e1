// Global norm, clip factor, accumulation; see clip.hpp. Also the ChunkPlan (chunks.hpp).
#include "optim/clip.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.hpp"

namespace bertbench::optim {

ChunkPlan::ChunkPlan(std::span<const model::ParamInfo> entries, size_t total_floats,
                     backend::Backend& be, bool adapt_all, bool tf2_decay)
    : total_(total_floats), be_(&be) {
    tensors_.reserve(entries.size());
    first_chunk_.reserve(entries.size() + 1);
    for (const auto& e : entries) {
        if (e.offset > total_floats || e.size > total_floats - e.offset)
            fail("[optim] parameter {}: [{}, {}) lies outside the {}-float buffer "
                 "(hint: the ParamTable and the buffers disagree)",
                 e.name, e.offset, e.offset + e.size, total_floats);
        if (!e.trained) continue;  // no gradient, no update, no decay
        first_chunk_.push_back(chunks_.size());
        const size_t t = tensors_.size();
        const bool decay = e.decay || (tf2_decay && e.decayed_in_tf2);
        tensors_.push_back({e.name, e.offset, e.size, decay, decay || adapt_all});
        decay_.push_back(decay ? 1 : 0);
        adapt_.push_back(tensors_.back().adapt ? 1 : 0);
        for (size_t b = 0; b < e.size; b += kChunkFloats)
            chunks_.push_back({t, e.offset + b, e.offset + std::min(e.size, b + kChunkFloats)});
    }
    first_chunk_.push_back(chunks_.size());
    table_ = {chunks_.data(), chunks_.size(), first_chunk_.data(), decay_.data(), tensors_.size(),
              adapt_.data()};
    if (!be.host_memory()) {
        chunks_be_ = std::make_unique<backend::Buffer<Chunk>>(be, chunks_);
        first_chunk_be_ = std::make_unique<backend::Buffer<size_t>>(be, first_chunk_);
        decay_be_ = std::make_unique<backend::Buffer<uint8_t>>(be, decay_);
        table_.chunks = chunks_be_->get();
        table_.first_chunk = first_chunk_be_->get();
        table_.decay = decay_be_->get();
        adapt_be_ = std::make_unique<backend::Buffer<uint8_t>>(be, adapt_);
        table_.adapt = adapt_be_->get();
    }
    sums_ = std::make_unique<backend::Buffer<double>>(be, 2 * chunks_.size());
}

namespace {

void check_size(const ChunkPlan& plan, size_t got, const char* what) {
    if (got != plan.total_floats())
        fail("[optim] {}: expected {} floats (the ParamTable's total), got {}", what,
             plan.total_floats(), got);
}

}  // namespace

float global_norm(const ChunkPlan& plan, std::span<const float> grads) {
    check_size(plan, grads.size(), "gradient buffer");
    backend::Backend& be = plan.backend();
    BB_OP(be, chunk_sum_squares)(plan.sums(), grads.data(), plan.table());
    std::vector<double> copy;
    double total = 0.0;
    for (double p : backend::host_view(be, plan.sums(), plan.chunks().size(), copy))
        total += p;  // fixed order: deterministic for any thread count
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

void accumulate_scaled(const ChunkPlan& plan, std::span<float> accum, std::span<const float> grads,
                       float scale, int n) {
    check_size(plan, accum.size(), "accumulation buffer");
    check_size(plan, grads.size(), "gradient buffer");
    if (n < 1) fail("[optim] steps_per_update: expected >= 1, got {}", n);
    BB_OP(plan.backend(), chunk_accumulate)(accum.data(), grads.data(), plan.table(), scale, static_cast<float>(n));
}

}  // namespace bertbench::optim
