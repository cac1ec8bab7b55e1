// One training micro-step's parameter-update logic, as MLPerf BERT's create_optimizer wires it:
// clip every micro-batch gradient by the global norm (1.0), and with steps_per_update n > 1
// accumulate g_clipped / n (deferred_grad_optimizer.py) and apply the optimizer on the n-th
// micro-step only. global_step counts micro-steps and feeds the LR schedule; the update on the
// micro-step whose global_step (before its increment) is s uses lr(s), s = k*n + n - 1 for the
// k-th update (k from 0). Bias correction counts updates, not micro-steps.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"

namespace bertbench::optim {

// Where clip_by_global_norm is applied (run_pretraining.py
// --clip_by_global_norm_after_gradient_allreduce). All three agree in one process with
// steps_per_update == 1.
enum class ClipMode {
    per_micro_batch,   // flag False (default, "how the model was pre-trained"): every micro-batch
                       // gradient is clipped (each replica its own), then accumulated as g_clipped / n
    after_accumulation, // flag True: LAMB clips the accumulated (all-reduced) gradient once per
                        // update; micro-batch gradients are accumulated unclipped as g / n
    averaged_micro_batch // NVIDIA NGC TF under Horovod's DistributedOptimizer: every micro-batch
                         // gradient is averaged over the replicas, then clipped, then accumulated
                         // as g_clipped / n (one process: per_micro_batch)
};
const char* to_string(ClipMode mode);  // "per_micro_batch", ... (config.json)

// Data parallel: replaces a gradient buffer by its mean over the replicas, in place and with the
// same bits on every replica (the training loop wraps dist::GradientReducer). Empty: one process.
using GradientMean = std::function<void(std::span<float> grads)>;

struct MicroStepResult {
    float grad_norm = 0;      // global norm before clipping: of this micro-batch's gradient
                              // (per_micro_batch), or of the accumulated one on update
                              // micro-steps (after_accumulation; 0 on the others)
    bool norm_measured = false;  // grad_norm was computed on this micro-step
    float clip_scale = 1;     // factor applied (1 when norm <= clip_norm)
    bool applied = false;     // true when the optimizer ran on this micro-step
    float learning_rate = 0;  // lr(global_step) of this micro-step (used only when applied)
};

class ParameterUpdater {
public:
    ParameterUpdater(std::span<const model::ParamInfo> entries, size_t total_floats,
                     OptimizerConfig optimizer, LrSchedule schedule, int steps_per_update,
                     ClipMode clip_mode = ClipMode::per_micro_batch, float clip_norm = 1.0f,
                     backend::Backend& be = backend::cpu());
    ParameterUpdater(const model::ParamTable& table, OptimizerConfig optimizer,
                     LrSchedule schedule, int steps_per_update,
                     ClipMode clip_mode = ClipMode::per_micro_batch, float clip_norm = 1.0f,
                     backend::Backend& be = backend::cpu());

    // One micro-step with this micro-batch's gradient. Data-parallel callers pass the all-reduced
    // (mean) gradient, which is what makes N ranks x batch b equal 1 rank x N*b; the reference's
    // default instead clips each replica's gradient before its all-reduce (do that with clip.hpp
    // before the all-reduce and construct this with clip_norm = +inf if you need it).
    // params, grads: (total_floats). Throws Error when the gradient norm is not finite (the
    // reference would silently write NaN into every weight), naming the global step.
    MicroStepResult micro_step(std::span<float> params, std::span<const float> grads);

    // Data-parallel micro-step: `grads` is this replica's micro-batch gradient; `mean` averages
    // a buffer over the replicas. Where the reference puts the all-reduce:
    //  - per_micro_batch (default): each replica clips ITS OWN micro-batch gradient (its own
    //    norm), accumulates g_clipped / n locally, and the replicas' accumulated gradients are
    //    averaged once per update (linear, so this equals averaging every micro-batch); with
    //    n == 1 the clipped gradient itself is averaged (grads is scaled in place). grad_norm is
    //    this replica's own.
    //  - after_accumulation (--clip_by_global_norm_after_gradient_allreduce): g / n accumulates
    //    unclipped, the accumulated gradient is averaged, then clipped once by ITS norm (the
    //    same on every replica) — with n == 1 exactly what one process of N·b sequences does.
    //    With n == 1 the average of `grads` may already be under way (overlapped with the
    //    backward): `mean(grads)` then just finishes it (see overlappable()).
    //  - averaged_micro_batch: `grads` is averaged first (it may be under way as above), then
    //    clipped and accumulated as one process does (an all-reduce per micro-step).
    // Without `mean` this is micro_step(params, grads).
    MicroStepResult micro_step(std::span<float> params, std::span<float> grads,
                               const GradientMean& mean);
    // Whether `mean` is applied to the micro-batch gradient itself before anything reads it, so
    // the caller may start averaging it during the backward: n == 1 and after_accumulation, or
    // averaged_micro_batch.
    bool overlappable() const {
        return (n_ == 1 && clip_mode_ == ClipMode::after_accumulation) ||
               clip_mode_ == ClipMode::averaged_micro_batch;
    }
    ClipMode clip_mode() const { return clip_mode_; }

    int64_t global_step() const { return global_step_; }  // micro-steps done
    void set_global_step(int64_t step);                    // for resume
    int steps_per_update() const { return n_; }
    Optimizer& optimizer() { return optimizer_; }
    const Optimizer& optimizer() const { return optimizer_; }
    const LrSchedule& schedule() const { return schedule_; }
    // The accumulator in the backend's memory (empty when steps_per_update == 1); zero at every
    // update boundary.
    std::span<float> grad_accum() const { return accum_.span(); }
    // Drops what the accumulator holds (a skipped update).
    void clear_accumulator();

private:
    MicroStepResult micro_step_impl(std::span<float> params, std::span<const float> grads,
                                    float* grads_mut, const GradientMean* mean);

    Optimizer optimizer_;
    LrSchedule schedule_;
    int n_;
    ClipMode clip_mode_;
    float clip_norm_;
    int64_t global_step_ = 0;
    backend::Buffer<float> accum_;
};

}  // namespace bertbench::optim
