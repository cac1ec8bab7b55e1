// LAMB and AdamW; see optimizer.hpp. The updates themselves are the backend's ops
// (ops/optimizer.cpp on the CPU); this class keeps the state and the reference's scalars.
#include "optim/optimizer.hpp"

#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "core/profile.hpp"
#include "model/cost.hpp"

namespace bertbench::optim {

OptimizerKind parse_optimizer_kind(const std::string& name) {
    if (name == "lamb") return OptimizerKind::lamb;
    if (name == "adamw") return OptimizerKind::adamw;
    fail("--optimizer: expected \"lamb\" or \"adamw\", got \"{}\"", name);
}

const char* to_string(OptimizerKind kind) {
    return kind == OptimizerKind::lamb ? "lamb" : "adamw";
}

const char* to_string(OptimizerVariant variant) {
    switch (variant) {
        case OptimizerVariant::ngc_tf: return "ngc_tf";
        case OptimizerVariant::keras: return "keras";
        case OptimizerVariant::standard: break;
    }
    return "standard";
}

OptimizerConfig OptimizerConfig::adamw_reference() {
    OptimizerConfig c;
    c.kind = OptimizerKind::adamw;
    c.beta_1 = 0.9;
    c.beta_2 = 0.999;
    c.epsilon = 1e-6;
    c.weight_decay_rate = 0.01;
    return c;
}

void OptimizerConfig::validate() const {
    if (!(beta_1 >= 0 && beta_1 < 1)) fail("--lamb_beta_1: expected in [0, 1), got {}", beta_1);
    if (!(beta_2 >= 0 && beta_2 < 1)) fail("--lamb_beta_2: expected in [0, 1), got {}", beta_2);
    // The update runs in fp32: an epsilon that rounds to 0 there divides by zero at the first
    // update (NaN weights), one that rounds to infinity stops every update.
    if (!(epsilon >= std::numeric_limits<float>::min() &&
          epsilon <= std::numeric_limits<float>::max()))
        fail(
            "--log_epsilon: expected epsilon = 10^log_epsilon a normal fp32 number (log_epsilon "
            "in -37.9 .. 38.5), got {}",
            epsilon);
    if (!(weight_decay_rate >= 0))
        fail("--lamb_weight_decay_rate: expected >= 0, got {}", weight_decay_rate);
    if ((variant == OptimizerVariant::ngc_tf && kind != OptimizerKind::lamb) ||
        (variant == OptimizerVariant::keras && kind != OptimizerKind::adamw))
        fail("[optim] optimizer variant {}: expected with --optimizer={}, got --optimizer={}",
             to_string(variant), variant == OptimizerVariant::ngc_tf ? "lamb" : "adamw", to_string(kind));
}

Optimizer::Optimizer(std::span<const model::ParamInfo> entries, size_t total_floats,
                     OptimizerConfig config, backend::Backend& be)
    : config_(config),
      plan_(entries, total_floats, be, config.variant == OptimizerVariant::ngc_tf,
            config.variant == OptimizerVariant::keras),
      m_(be, total_floats),
      v_(be, total_floats),
      ratios_(be, std::vector<float>(plan_.tensors().size(), 1.0f)),
      beta1_power_(static_cast<float>(config.beta_1)),
      beta2_power_(static_cast<float>(config.beta_2)) {
    config_.validate();
    m_.zero();
    v_.zero();
}

Optimizer::Optimizer(const model::ParamTable& table, OptimizerConfig config, backend::Backend& be)
    : Optimizer(table.entries(), table.total_floats(), config, be) {}

void Optimizer::set_scalars(int64_t update_count, float beta1_power, float beta2_power) {
    if (update_count < 0) fail("[optim] update count: expected >= 0, got {}", update_count);
    updates_ = update_count;
    beta1_power_ = beta1_power;
    beta2_power_ = beta2_power;
}

std::vector<StateTensor> Optimizer::state_tensors() {
    std::vector<StateTensor> out;
    out.reserve(2 * plan_.tensors().size());
    for (const auto& t : plan_.tensors()) {
        out.push_back({t.name + "/adam_m", m().subspan(t.offset, t.size)});
        out.push_back({t.name + "/adam_v", v().subspan(t.offset, t.size)});
    }
    return out;
}

void Optimizer::step(std::span<float> params, std::span<const float> grads, float lr,
                     float grad_scale) {
    if (params.size() != plan_.total_floats() || grads.size() != plan_.total_floats())
        fail("[optim] step: expected params and grads of {} floats (the ParamTable's total), got "
             "{} and {}",
             plan_.total_floats(), params.size(), grads.size());
    BB_PROFILE_OP_SCOPE(model::Op::optimizer, model::Pass::step);
    if (config_.kind == OptimizerKind::lamb)
        step_lamb(params.data(), grads.data(), lr, grad_scale);
    else if (config_.variant == OptimizerVariant::keras)
        step_keras_adam(params.data(), grads.data(), lr, grad_scale);
    else
        step_adamw(params.data(), grads.data(), lr, grad_scale);
    ++updates_;
}

void Optimizer::step_lamb(float* w, const float* g, float lr, float grad_scale) {
    const float b1 = static_cast<float>(config_.beta_1), b2 = static_cast<float>(config_.beta_2);
    // TF: 1 - beta1_t and 1 - beta1_power are fp32 ops on fp32 tensors.
    const ops::LambConstants k{b1,
                               b2,
                               1.0f - b1,
                               1.0f - b2,
                               1.0f - beta1_power_,
                               1.0f - beta2_power_,
                               static_cast<float>(config_.epsilon),
                               static_cast<float>(config_.weight_decay_rate)};
    BB_OP(backend(), lamb_update)(w, m_.get(), v_.get(), g, plan_.table(), grad_scale, lr, k, plan_.sums(),
                                  ratios_.get());
    // TF _finish: beta powers advance after the update, as fp32 products.
    beta1_power_ = beta1_power_ * b1;
    beta2_power_ = beta2_power_ * b2;
}

void Optimizer::step_adamw(float* w, const float* g, float lr, float grad_scale) {
    // AdamWeightDecayOptimizer: Python-float constants, so 1 - beta is taken in double and then
    // rounded to fp32; no bias correction; decay skipped when the rate is 0 or the name excluded.
    const ops::AdamConstants k{static_cast<float>(config_.beta_1), static_cast<float>(config_.beta_2),
                               static_cast<float>(1.0 - config_.beta_1),
                               static_cast<float>(1.0 - config_.beta_2),
                               static_cast<float>(config_.epsilon),
                               static_cast<float>(config_.weight_decay_rate)};
    BB_OP(backend(), adamw_update)(w, m_.get(), v_.get(), g, plan_.table(), grad_scale, lr, k);
}

void Optimizer::step_keras_adam(float* w, const float* g, float lr, float grad_scale) {
    // Keras Adam._prepare_local: local_step = iterations + 1 and beta^local_step by fp32 pow;
    // ResourceApplyAdam: alpha = lr·√(1 - beta2_power)/(1 - beta1_power) and 1 - beta in fp32.
    // t comes from update_count(), which checkpoints restore (the beta powers are LAMB's).
    const float b1 = static_cast<float>(config_.beta_1), b2 = static_cast<float>(config_.beta_2);
    const float t = static_cast<float>(updates_ + 1);
    const float b1_power = std::pow(b1, t), b2_power = std::pow(b2, t);
    const ops::KerasAdamConstants k{1.0f - b1, 1.0f - b2, static_cast<float>(config_.epsilon),
                                    static_cast<float>(config_.weight_decay_rate),
                                    lr * std::sqrt(1.0f - b2_power) / (1.0f - b1_power)};
    BB_OP(backend(), keras_adam_update)(w, m_.get(), v_.get(), g, plan_.table(), grad_scale, lr, k);
}

}  // namespace bertbench::optim
