// LR schedule and MLPerf eval interval; see schedule.hpp. The float32 arithmetic below follows
// tf.train.polynomial_decay and the warm-up block of create_optimizer op by op.
#include "optim/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace bertbench::optim {

float LrSchedule::at(int64_t global_step) const {
    if (poly_warmup.total_updates > 0) {
        const PolyWarmup& n = poly_warmup;
        const double lr0 = learning_rate;
        const double p = static_cast<double>(global_step / std::max(n.steps_per_update, 1) + 1) / n.total_updates;
        // past max_steps (no NVIDIA run gets there: Python would raise on a complex power) 0
        return static_cast<float>(p < n.warmup ? lr0 * p / n.warmup : lr0 * std::pow(std::max(1.0 - p, 0.0), n.degree));
    }
    if (warmup_linear.total_steps > 0) {
        const WarmupLinear& n = warmup_linear;
        const double lr0 = learning_rate;
        const double x = static_cast<double>(global_step + n.step_offset) / n.total_steps;
        // (a warm-up over all of t_total, LinearWarmUpScheduler's 1.0: 0 from x = 1 on, the ramp's
        // end, where Python's division raises)
        if (x >= n.warmup && n.warmup >= 1) return 0.0f;
        return static_cast<float>(x < n.warmup ? lr0 * x / n.warmup
                                               : lr0 * std::max((x - 1.0) / (n.warmup - 1.0), 0.0));
    }
    // polynomial_decay(lr0, global_step, T, end=0, power=p, cycle=False), all in float32:
    //   step = min(float(global_step), float(T)); frac = step / float(T);
    //   lr = (lr0 - 0) * pow(1 - frac, p) + 0
    const int64_t k = std::max(update_counter, 1);
    const int64_t s = global_step / k, T = num_train_steps / k, W = num_warmup_steps / k;
    const float lr0 = static_cast<float>(learning_rate);
    const float steps_f = static_cast<float>(T);
    const float step_f = std::min(static_cast<float>(s), steps_f);
    const float frac = step_f / steps_f;
    const float decay_lr0 = decay_learning_rate > 0 ? static_cast<float>(decay_learning_rate) : lr0;
    float lr = (decay_lr0 - 0.0f) * std::pow(1.0f - frac, static_cast<float>(poly_power)) + 0.0f;
    if (W != 0) {
        // int32 arithmetic in TF: global_steps_int = int(global_step) - start_warmup_step.
        const int64_t since = s - start_warmup_step;
        const float percent = static_cast<float>(since) / static_cast<float>(W);
        const float warmup_lr = lr0 * percent;
        // is_warmup in {0, 1}: (1 - w) * lr + w * warmup_lr is exactly one of the two.
        if (since < W) lr = warmup_lr;
    }
    return lr;
}

void LrSchedule::validate() const {
    if (num_train_steps <= 0)
        fail("--num_train_steps: expected > 0, got {} (hint: it counts micro-steps)",
             num_train_steps);
    if (num_warmup_steps < 0) fail("--num_warmup_steps: expected >= 0, got {}", num_warmup_steps);
    if (!(poly_power > 0)) fail("--poly_power: expected > 0, got {}", poly_power);
    if (!(learning_rate >= 0 && learning_rate <= std::numeric_limits<float>::max()))
        fail("--learning_rate: expected 0 .. {:g} (the optimizer's float), got {}", std::numeric_limits<float>::max(),
             learning_rate);
    if (poly_warmup.total_updates > 0 && !(poly_warmup.warmup >= 0 && poly_warmup.warmup <= 1))
        fail("--warmup_proportion: expected a fraction in [0, 1] (NVIDIA's PolyWarmUpScheduler), got {}",
             poly_warmup.warmup);
    if (warmup_linear.total_steps > 0) warmup_linear.validate();
}

void LrSchedule::WarmupLinear::validate() const {
    // BertAdam refuses a warm-up of 1; --fp16's LinearWarmUpScheduler checks nothing (0 .. 1 here)
    const bool bert_adam = step_offset == 0;
    if (!(warmup >= 0 && (bert_adam ? warmup < 1 : warmup <= 1)))
        fail("--warmup_proportion={}: expected a fraction in {} (NVIDIA's {})", warmup,
             bert_adam ? "[0, 1)" : "[0, 1]", bert_adam ? "BertAdam" : "LinearWarmUpScheduler under --fp16");
}

int64_t mlperf_eval_interval_samples(int64_t global_batch_size) {
    if (global_batch_size <= 0)
        fail("global batch size: expected > 0, got {} (hint: train_batch_size x ranks x "
             "steps_per_update)",
             global_batch_size);
    // 0.05 * (230.23 * B + 3e6) / 25000 = (23023 * B + 3e8) / 5e7, exactly.
    return (23023 * global_batch_size + 300000000) / 50000000 * 25000;
}

}  // namespace bertbench::optim
