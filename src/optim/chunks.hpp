// Fixed work split of a ParamTable-laid-out buffer: every tensor cut into chunks of at most
// kChunkFloats, in table order. Reductions sum per-chunk partials in this order, so results do
// not depend on the number of OpenMP threads (deterministic for any OMP_NUM_THREADS).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "model/param_table.hpp"
#include "ops/optimizer.hpp"

namespace bertbench::optim {

inline constexpr size_t kChunkFloats = size_t{1} << 15;  // 128 KiB of fp32 per stream

// tensor: index into tensors() (the trained entries); [begin, end): absolute float offsets into the flat buffer
using Chunk = ops::ParamChunk;

// One tensor as the optimizer sees it (a copy of the ParamInfo fields it needs).
struct TensorSlot {
    std::string name;
    size_t offset = 0, size = 0;
    bool decay = true;  // weight decay applies
    bool adapt = true;  // LAMB's layer adaptation (trust ratio) applies
};

class ChunkPlan {
public:
    // The entries the optimizer updates (ParamInfo::trained; the others are left as they are).
    // Validates that every tensor lies inside [0, total_floats); Error naming the tensor if not.
    // The ops that read it run on `be`: table() and sums() are in its memory. LAMB adapts the
    // tensors with decay (MLPerf: exclude_from_layer_adaptation defaults to the decay exclusions),
    // or with adapt_all every tensor (NVIDIA NGC TF's LAMBOptimizer). tf2_decay: the tensors
    // MLPerf TF2's AdamWeightDecay decays (ParamInfo::decay, and decayed_in_tf2).
    ChunkPlan(std::span<const model::ParamInfo> entries, size_t total_floats,
              backend::Backend& be = backend::cpu(), bool adapt_all = false, bool tf2_decay = false);
    ChunkPlan(const ChunkPlan&) = delete;  // table() points into it
    ChunkPlan& operator=(const ChunkPlan&) = delete;

    const std::vector<TensorSlot>& tensors() const { return tensors_; }
    const std::vector<Chunk>& chunks() const { return chunks_; }
    // chunks of tensor t are chunks()[first_chunk(t) .. first_chunk(t+1))
    size_t first_chunk(size_t t) const { return first_chunk_[t]; }
    size_t total_floats() const { return total_; }
    // The plan as the backend's optimizer ops read it (the backend's memory).
    const ops::ChunkTable& table() const { return table_; }
    backend::Backend& backend() const { return *be_; }
    // Scratch for the ops' per-chunk sums (2 per chunk: chunk_sum_squares' and lamb_update's
    // partials), in the backend's memory; one user at a time.
    double* sums() const { return sums_->get(); }

private:
    std::vector<TensorSlot> tensors_;
    std::vector<Chunk> chunks_;
    std::vector<size_t> first_chunk_;  // (tensors + 1)
    std::vector<uint8_t> decay_;       // (tensors)
    std::vector<uint8_t> adapt_;       // (tensors)
    ops::ChunkTable table_;
    size_t total_ = 0;
    backend::Backend* be_;
    // The table's arrays in the backend's memory, where that is not the host's
    std::unique_ptr<backend::Buffer<Chunk>> chunks_be_;
    std::unique_ptr<backend::Buffer<size_t>> first_chunk_be_;
    std::unique_ptr<backend::Buffer<uint8_t>> decay_be_, adapt_be_;
    std::unique_ptr<backend::Buffer<double>> sums_;
};

}  // namespace bertbench::optim
