// Fixed work split of a ParamTable-laid-out buffer: every tensor cut into chunks of at most
// kChunkFloats, in table order. Reductions sum per-chunk partials in this order, so results do
// not depend on the number of OpenMP threads (deterministic for any OMP_NUM_THREADS).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "model/param_table.hpp"
#include "ops/optimizer.hpp"

namespace bertbench::optim {

inline constexpr size_t kChunkFloats = size_t{1} << 15;  // 128 KiB of fp32 per stream

// tensor: index into the entries; [begin, end): absolute float offsets into the flat buffer
using Chunk = ops::ParamChunk;

// One tensor as the optimizer sees it (a copy of the ParamInfo fields it needs).
struct TensorSlot {
    std::string name;
    size_t offset = 0, size = 0;
    bool decay = true;  // weight decay and LAMB layer adaptation apply
};

class ChunkPlan {
public:
    ChunkPlan() = default;
    // Validates that every tensor lies inside [0, total_floats); Error naming the tensor if not.
    ChunkPlan(std::span<const model::ParamInfo> entries, size_t total_floats);
    ChunkPlan(const ChunkPlan&) = delete;  // table() points into it
    ChunkPlan& operator=(const ChunkPlan&) = delete;

    const std::vector<TensorSlot>& tensors() const { return tensors_; }
    const std::vector<Chunk>& chunks() const { return chunks_; }
    // chunks of tensor t are chunks()[first_chunk(t) .. first_chunk(t+1))
    size_t first_chunk(size_t t) const { return first_chunk_[t]; }
    size_t total_floats() const { return total_; }
    // The plan as the backend's optimizer ops read it (host memory).
    const ops::ChunkTable& table() const { return table_; }

private:
    std::vector<TensorSlot> tensors_;
    std::vector<Chunk> chunks_;
    std::vector<size_t> first_chunk_;  // (tensors + 1)
    std::vector<uint8_t> decay_;       // (tensors)
    ops::ChunkTable table_;
    size_t total_ = 0;
};

}  // namespace bertbench::optim
