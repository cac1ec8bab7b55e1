// The one micro-step (micro_step.hpp).
#include "train/micro_step.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/profile.hpp"
#include "dist/comm.hpp"
#include "model/bert.hpp"
#include "model/cost.hpp"
#include "train/data_parallel.hpp"

namespace bertbench::train {

StepLoss PretrainStep::forward(std::span<const float> params, uint64_t seed, uint64_t step) {
    // Under mpirun: the global batch's losses (one small all-reduce), which also sets the global
    // masked-LM weight for the backward.
    model::Losses l = engine_.forward(params, *batch_, true, seed, step);
    if (comm_) l = global_losses(*comm_, engine_, l);
    return {l.total, {{"mlm_loss", l.mlm_loss}, {"nsp_loss", l.nsp_loss}}};
}
void PretrainStep::backward(std::span<float> grads, std::span<const float> params, float scale) {
    engine_.backward(grads, params, *batch_, scale);
}
bool PretrainStep::set_backward_hook(model::GradientsReady hook) {
    engine_.set_backward_hook(std::move(hook));
    return true;
}
void PretrainStep::weights_changed() { engine_.weights_changed(); }

StepLoss SquadStep::forward(std::span<const float> params, uint64_t seed, uint64_t step) {
    const model::SpanLosses l = engine_.forward(params, *batch_, starts_, ends_, true, seed, step);
    // Under mpirun: the global batch's loss, the mean of the ranks' equal-sized batch means (their
    // gradients are averaged the same way).
    return {comm_ && comm_->size() > 1 ? comm_->sum(l.total) / comm_->size() : l.total, {}};
}
void SquadStep::backward(std::span<float> grads, std::span<const float> params, float scale) {
    // The span head's backward (and its loss gradient) runs before the encoder's first profile
    // mark, so it is timed under this label.
    BB_PROFILE_OP_SCOPE(model::Op::span_head, model::Pass::backward);
    engine_.backward(grads, params, *batch_, scale);
}
void SquadStep::weights_changed() { engine_.weights_changed(); }

MicroStepOutcome micro_step(Trainable& model, std::span<float> params, std::span<float> grads,
                            const MicroStepContext& ctx, uint64_t seed, uint64_t step) {
    using Status = MicroStepOutcome::Status;
    MicroStepOutcome out;
    out.loss = model.forward(params, seed, step);
    if (!std::isfinite(out.loss.loss)) {
        out.status = Status::nonfinite_loss;
        return out;
    }
    {
        BB_PROFILE_OP_SCOPE(model::Op::zero_grads, model::Pass::step);
        ctx.updater.optimizer().backend().zero(grads.data(), grads.size() * sizeof(float));
    }
    // Under mpirun the all-reduce starts during the backward where the updater allows it;
    // micro_step's mean() finishes it (or does all of it). Loss scaling unscales first: no overlap.
    DataParallel* dp = ctx.dp;
    if (dp && dp->active()) {
        const bool overlap =
            ctx.allow_overlap && ctx.updater.overlappable() && !(ctx.scaler && ctx.scaler->enabled());
        if (!model.set_backward_hook(dp->begin_backward(grads, overlap))) dp->begin_backward(grads, false);
    }
    model.backward(grads, params, ctx.scaler ? ctx.scaler->scale() : 1.0f);
    // Dynamic loss scaling: an overflow skips the update and halves the scale; a fixed scale's
    // overflow is a non-finite gradient like any other (below).
    if (ctx.scaler && !ctx.scaler->unscale(grads, ctx.updater.optimizer().backend()) &&
        ctx.scaler->mode() == optim::LossScaler::Mode::dynamic) {
        out.status = Status::overflow;
        out.message = ctx.scaler->on_overflow(static_cast<int64_t>(step) + 1);  // train_log.jsonl's number
        return out;
    }
    try {
        BB_PROFILE_OP_SCOPE(model::Op::clip_accumulate, model::Pass::step);
        out.result = ctx.updater.micro_step(params, grads, dp ? dp->mean() : optim::GradientMean{});
    } catch (const Error& e) {
        out.status = Status::nonfinite_grad;
        out.message = e.what();
        return out;
    }
    if (out.result.applied) {
        model.weights_changed();
        if (ctx.scaler) out.message = ctx.scaler->on_clean_update(static_cast<int64_t>(step) + 1);
    }
    return out;
}

}  // namespace bertbench::train
