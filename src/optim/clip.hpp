// Global-norm gradient clipping and gradient accumulation as the MLPerf BERT reference does them
// (optimization.py: tf.clip_by_global_norm(grads, 1.0) on every micro-batch gradient, then
// deferred_grad_optimizer.py: accum += g / steps_per_update). Norms are accumulated in double
// over a fixed chunk split (chunks.hpp): same bits for any thread count.
#pragma once

#include <span>

#include "backend/backend.hpp"
#include "optim/chunks.hpp"

namespace bertbench::optim {

// sqrt(sum over tensors of sum g^2), padding between tensors ignored. (total_floats) buffer.
// The sums run on the plan's backend (grads: its memory), one double per chunk, added on the host.
float global_norm(const ChunkPlan& plan, std::span<const float> grads);
float global_norm(const model::ParamTable& table, std::span<const float> grads);

// The factor tf.clip_by_global_norm multiplies every gradient by:
//   clip_norm * min(1 / norm, 1 / clip_norm)   (1 for norm <= clip_norm, incl. norm == 0);
// NaN when norm is not finite (TF then turns every gradient into NaN; callers should check).
// clip_norm = +inf means no clipping: 1 (where TF would give inf * 0 = NaN).
float clip_scale(float norm, float clip_norm = 1.0f);

// accum[i] += (grad[i] * scale) / n over every tensor (padding untouched); the reference's
// "accum + g / steps_per_update" with g already clipped. (total_floats) buffers in the memory of
// the plan's backend.
void accumulate_scaled(const ChunkPlan& plan, std::span<float> accum, std::span<const float> grads,
                       float scale, int n);

}  // namespace bertbench::optim
