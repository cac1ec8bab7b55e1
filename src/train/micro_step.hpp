// The one micro-step of every training run: the training loop (train/loop.cpp, pretraining and
// SQuAD) and bench's two runners (bench/runner.cpp, bench/mpi_point.cpp) all call micro_step().
// forward with dropout -> (a finite loss) zero the gradient buffer, the all-reduce hook under
// mpirun, backward at the loss scale -> unscale (dynamic loss scaling: an overflow skips the update)
// -> ParameterUpdater::micro_step (clip, accumulate, the optimizer at update boundaries) with the
// ranks' mean -> the engines' bf16 copies refreshed after an update.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/batch.hpp"
#include "optim/loss_scale.hpp"
#include "optim/update.hpp"

namespace bertbench::dist {
class Comm;
}  // namespace bertbench::dist
namespace bertbench::model {
template <typename T>
class BasicBertPretrainer;
template <typename T>
class BasicBertSquad;
}  // namespace bertbench::model

namespace bertbench::train {

class DataParallel;

// One micro-step's losses: `loss` is what the optimizer minimises; `parts` are the task's named
// components (e.g. mlm_loss, nsp_loss), logged as means over the update's micro-steps.
struct StepLoss {
    double loss = 0;
    std::vector<std::pair<std::string, double>> parts;
};

// A model at its current micro-batch, as a micro-step drives it. Under mpirun forward() returns
// the global batch's loss (a collective), as global_losses() does.
class Trainable {
public:
    virtual ~Trainable() = default;
    virtual StepLoss forward(std::span<const float> params, uint64_t seed, uint64_t step) = 0;
    virtual void backward(std::span<float> grads, std::span<const float> params, float scale) = 0;
    // Under mpirun: installs the hook the next backward() calls as gradients become final, so the
    // all-reduce overlaps the backward. false: the model has none (the all-reduce then runs after).
    virtual bool set_backward_hook(model::GradientsReady) { return false; }
    virtual void weights_changed() = 0;  // new weights: the bf16 engines copy them again
};

// The pretraining and SQuAD engines as Trainables, at the batch last set (bench's runners; the
// training tasks keep one each). `comm`: the ranks whose global batch forward() reports (the
// pretraining losses through global_losses(), the SQuAD loss as the mean of the ranks'); null: this
// process alone, no collective (bench's single-process point, which rank 0 also runs by itself
// under mpirun as the scaling baseline).
class PretrainStep final : public Trainable {
public:
    PretrainStep(model::BasicBertPretrainer<float>& engine, dist::Comm* comm) : engine_(engine), comm_(comm) {}
    void set_batch(const model::Batch& b) { batch_ = &b; }
    StepLoss forward(std::span<const float> params, uint64_t seed, uint64_t step) override;
    void backward(std::span<float> grads, std::span<const float> params, float scale) override;
    bool set_backward_hook(model::GradientsReady hook) override;
    void weights_changed() override;

private:
    model::BasicBertPretrainer<float>& engine_;
    dist::Comm* comm_;
    const model::Batch* batch_ = nullptr;
};

class SquadStep final : public Trainable {
public:
    SquadStep(model::BasicBertSquad<float>& engine, dist::Comm* comm) : engine_(engine), comm_(comm) {}
    // starts/ends: the batch's answer spans, kept by the caller as long as the batch
    void set_batch(const model::Batch& b, std::span<const int32_t> starts, std::span<const int32_t> ends) {
        batch_ = &b, starts_ = starts, ends_ = ends;
    }
    StepLoss forward(std::span<const float> params, uint64_t seed, uint64_t step) override;
    void backward(std::span<float> grads, std::span<const float> params, float scale) override;
    void weights_changed() override;

private:
    model::BasicBertSquad<float>& engine_;
    dist::Comm* comm_;
    const model::Batch* batch_ = nullptr;
    std::span<const int32_t> starts_, ends_;
};

struct MicroStepOutcome {
    enum class Status {
        done,            // accumulated (and, at an update boundary, applied)
        nonfinite_loss,  // the forward's loss is not finite: nothing else ran
        overflow,        // dynamic loss scaling: the gradient overflowed; message: the scaler's note
        nonfinite_grad,  // the updater refused a non-finite gradient norm; message: its error
    };
    Status status = Status::done;
    StepLoss loss;
    optim::MicroStepResult result;
    std::string message;  // done: the scaler's note on a clean update, if any
};

struct MicroStepContext {
    optim::ParameterUpdater& updater;
    DataParallel* dp = nullptr;            // null: one process
    optim::LossScaler* scaler = nullptr;   // null: no loss scaling
    bool allow_overlap = true;             // the all-reduce may overlap the backward
};

// params, grads: (total_floats) in the memory of the updater's backend, which the model's engines
// run on.
MicroStepOutcome micro_step(Trainable& model, std::span<float> params, std::span<float> grads,
                            const MicroStepContext& ctx, uint64_t seed, uint64_t step);

}  // namespace bertbench::train
