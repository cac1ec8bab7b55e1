// LAMB (MLPerf BERT lamb_optimizer_v1.py; NVIDIA NGC TF's LAMBOptimizer) and AdamW (google-research/bert
// optimization.py AdamWeightDecayOptimizer; MLPerf TF2's Keras AdamWeightDecay) over a
// ParamTable-laid-out fp32 buffer, with the reference's fp32 order of operations. Gradients given to step() are the reference's *clipped, accumulated*
// gradients; the optional grad_scale multiplies each one as it is read (the clip factor when
// there is no accumulation, saving a pass). Formulas: docs/training.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "optim/chunks.hpp"

namespace bertbench::optim {

enum class OptimizerKind { lamb, adamw };
OptimizerKind parse_optimizer_kind(const std::string& name);  // "lamb" | "adamw"; Error otherwise
const char* to_string(OptimizerKind kind);

// Which reference's update a kind follows (config.json "optimizer_variant").
enum class OptimizerVariant {
    standard,  // LAMB: MLPerf lamb_optimizer_v1.py (no trust ratio where no decay); AdamW: google's
               // TF1 AdamWeightDecayOptimizer (no bias correction, fixed constants)
    ngc_tf,    // LAMB only: NVIDIA NGC TF LAMBOptimizer, the trust ratio on every tensor
    keras,     // AdamW only: MLPerf TF2 / PerfZero AdamWeightDecay (Keras Adam, bias-corrected,
               // decoupled decay lr·wd·w first; betas, epsilon, decay rate from the flags)
};
const char* to_string(OptimizerVariant variant);  // "standard" | "ngc_tf" | "keras"

struct OptimizerConfig {
    OptimizerKind kind = OptimizerKind::lamb;
    OptimizerVariant variant = OptimizerVariant::standard;
    // Doubles, as the reference's Python floats; each is rounded to fp32 where TF does it
    // (e.g. LAMB's 1 - beta_1 is taken in fp32, AdamW's in double, as in the reference).
    double beta_1 = 0.9;              // --lamb_beta_1 (AdamW: fixed 0.9 in the reference)
    double beta_2 = 0.999;            // --lamb_beta_2 (AdamW: fixed 0.999)
    double epsilon = 1e-6;            // 10^--log_epsilon (default -6; AdamW: fixed 1e-6)
    double weight_decay_rate = 0.01;  // --lamb_weight_decay_rate (AdamW: fixed 0.01)
    static OptimizerConfig adamw_reference();  // the values google-research/bert hard-codes
    // Error on betas outside [0,1), eps <= 0, wd < 0, a variant of the other kind
    void validate() const;
};

// A named view of optimizer state for checkpoints: "<tf name>/adam_m" and "<tf name>/adam_v"
// (the slot names of AdamWeightDecayOptimizer and of Google's released BERT checkpoints; TF's
// own LAMB class would call them "<tf name>/LAMB" and "<tf name>/LAMB_1").
struct StateTensor {
    std::string name;
    std::span<float> data;  // (size of the parameter)
};

// The updates run on backend `be` (its lamb_update/adamw_update ops); the state (m, v), like the
// parameters and gradients given to step(), is that backend's memory.
class Optimizer {
public:
    Optimizer(std::span<const model::ParamInfo> entries, size_t total_floats,
              OptimizerConfig config, backend::Backend& be = backend::cpu());
    Optimizer(const model::ParamTable& table, OptimizerConfig config,
              backend::Backend& be = backend::cpu());

    // One update. params, grads: (total_floats) in the table layout; padding is neither read
    // nor written. lr: the schedule's value for this update. Increments update_count() and, for
    // LAMB, advances beta1_power/beta2_power (bias correction uses t = number of updates so far,
    // counting this one, as TF's beta powers do: micro-steps of accumulation do not count; Keras
    // Adam takes the same t from update_count(), as Keras does from its iterations).
    void step(std::span<float> params, std::span<const float> grads, float lr,
              float grad_scale = 1.0f);

    const OptimizerConfig& config() const { return config_; }
    const ChunkPlan& plan() const { return plan_; }
    backend::Backend& backend() const { return plan_.backend(); }

    // State. m, v: (total_floats) in the table layout, zero-initialised, in the backend's memory.
    std::span<float> m() const { return m_.span(); }
    std::span<float> v() const { return v_.span(); }
    int64_t update_count() const { return updates_; }
    // TF's LAMB non-slot variables beta1_power = beta_1^(t+1), beta2_power = beta_2^(t+1), kept
    // as fp32 products exactly as TF updates them (not pow()).
    float beta1_power() const { return beta1_power_; }
    float beta2_power() const { return beta2_power_; }
    // Restores the scalar state (after a checkpoint load has filled m() and v()).
    void set_scalars(int64_t update_count, float beta1_power, float beta2_power);

    // Every parameter's m and v as "<name>/adam_m", "<name>/adam_v", in table order (the
    // backend's memory).
    std::vector<StateTensor> state_tensors();

    // LAMB trust ratios of the last step, one per trained tensor in table order (1 where excluded);
    // AdamW: all 1. For logging and tests (a copy on the host).
    std::vector<float> last_trust_ratios() const { return ratios_.download(); }

private:
    void step_lamb(float* w, const float* g, float lr, float grad_scale);
    void step_adamw(float* w, const float* g, float lr, float grad_scale);
    void step_keras_adam(float* w, const float* g, float lr, float grad_scale);

    OptimizerConfig config_;
    ChunkPlan plan_;  // its sums(): LAMB's per-chunk sums of w² and u²
    backend::Buffer<float> m_, v_;
    backend::Buffer<float> ratios_;  // (tensors)
    int64_t updates_ = 0;
    float beta1_power_, beta2_power_;
};

}  // namespace bertbench::optim
