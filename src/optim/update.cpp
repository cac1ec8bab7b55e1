// Clip, accumulate, schedule, apply: see update.hpp.
#include "optim/update.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "optim/clip.hpp"

namespace bertbench::optim {

const char* to_string(ClipMode mode) {
    switch (mode) {
        case ClipMode::per_micro_batch: return "per_micro_batch";
        case ClipMode::after_accumulation: return "after_accumulation";
        case ClipMode::averaged_micro_batch: return "averaged_micro_batch";
    }
    return "?";
}

ParameterUpdater::ParameterUpdater(std::span<const model::ParamInfo> entries,
                                   size_t total_floats, OptimizerConfig optimizer,
                                   LrSchedule schedule, int steps_per_update, ClipMode clip_mode,
                                   float clip_norm, backend::Backend& be)
    : optimizer_(entries, total_floats, optimizer, be),
      schedule_(schedule),
      n_(steps_per_update),
      clip_mode_(clip_mode),
      clip_norm_(clip_norm),
      accum_(be, steps_per_update > 1 ? total_floats : 0) {
    schedule_.validate();
    if (n_ < 1) fail("--steps_per_update: expected >= 1, got {}", n_);
    if (!(clip_norm_ > 0)) fail("[optim] clip norm: expected > 0, got {}", clip_norm_);
    clear_accumulator();
}

void ParameterUpdater::clear_accumulator() {
    accum_.zero();
}

ParameterUpdater::ParameterUpdater(const model::ParamTable& table, OptimizerConfig optimizer,
                                   LrSchedule schedule, int steps_per_update, ClipMode clip_mode,
                                   float clip_norm, backend::Backend& be)
    : ParameterUpdater(table.entries(), table.total_floats(), optimizer, schedule,
                       steps_per_update, clip_mode, clip_norm, be) {}

void ParameterUpdater::set_global_step(int64_t step) {
    if (step < 0) fail("[optim] global step: expected >= 0, got {}", step);
    global_step_ = step;
}

MicroStepResult ParameterUpdater::micro_step(std::span<float> params, std::span<const float> grads) {
    return micro_step_impl(params, grads, nullptr, nullptr);
}

MicroStepResult ParameterUpdater::micro_step(std::span<float> params, std::span<float> grads,
                                             const GradientMean& mean) {
    return micro_step_impl(params, grads, mean ? grads.data() : nullptr, mean ? &mean : nullptr);
}

MicroStepResult ParameterUpdater::micro_step_impl(std::span<float> params,
                                                  std::span<const float> grads,
                                                  float* grads_mut, const GradientMean* mean) {
    const ChunkPlan& plan = optimizer_.plan();
    backend::Backend& be = optimizer_.backend();
    const std::span<float> accum = accum_.span();
    MicroStepResult r;
    r.learning_rate = schedule_.at(global_step_);
    // deferred_grad_optimizer: apply when global_step % n == n - 1, then zero the accumulator.
    const bool apply = global_step_ % n_ == n_ - 1;
    const auto clip = [&](std::span<const float> g) {
        r.grad_norm = global_norm(plan, g);
        r.norm_measured = true;
        if (!std::isfinite(r.grad_norm))
            fail("[optim] step {}: gradient global norm is {} (expected finite); the "
                 "loss diverged or the input is bad (hint: lower --learning_rate or check the "
                 "data)",
                 global_step_ + 1, r.grad_norm);  // numbered from 1, as train_log.jsonl numbers steps
        r.clip_scale = clip_scale(r.grad_norm, clip_norm_);
    };
    if (mean != nullptr && clip_mode_ == ClipMode::averaged_micro_batch) {
        (*mean)(std::span<float>(grads_mut, grads.size()));  // then as one process
        mean = nullptr;
    }
    if (mean != nullptr && n_ == 1) {
        const std::span<float> g(grads_mut, grads.size());
        if (clip_mode_ == ClipMode::per_micro_batch) {  // this replica's clip, then the mean
            clip(grads);
            if (r.clip_scale != 1.0f) BB_OP(be, scale_values)(g.data(), g.size(), r.clip_scale, nullptr);
            (*mean)(g);
            optimizer_.step(params, grads, r.learning_rate);
        } else {  // the mean, then its clip
            (*mean)(g);
            clip(grads);
            optimizer_.step(params, grads, r.learning_rate, r.clip_scale);
        }
    } else if (n_ == 1) {
        clip(grads);
        optimizer_.step(params, grads, r.learning_rate, r.clip_scale);  // clip fused into the read
    } else if (clip_mode_ != ClipMode::after_accumulation) {
        clip(grads);
        accumulate_scaled(plan, accum, grads, r.clip_scale, n_);
        if (apply) {
            if (mean != nullptr) (*mean)(accum);
            optimizer_.step(params, accum, r.learning_rate);
        }
    } else {
        accumulate_scaled(plan, accum, grads, 1.0f, n_);
        if (apply) {
            if (mean != nullptr) (*mean)(accum);
            clip(accum);
            optimizer_.step(params, accum, r.learning_rate, r.clip_scale);
        }
    }
    if (apply) clear_accumulator();
    r.applied = apply;
    ++global_step_;
    return r;
}

}  // namespace bertbench::optim
