// Learning-rate schedule of MLPerf BERT (run_pretraining.py -> optimization.py create_optimizer):
// tf.train.polynomial_decay to 0 over num_train_steps, overridden during warm-up by a linear ramp
// that starts at start_warmup_step (which may be negative). Evaluated in float32 with TF's order
// of operations, so every value equals the reference's to the last bit (see docs/training.md).
// Step values are MICRO-steps (TF global_step counts every micro-batch under accumulation).
#pragma once

#include <cstdint>

namespace bertbench::optim {

struct LrSchedule {
    double learning_rate = 4e-4;      // lr0, --learning_rate
    int64_t num_train_steps = 0;      // T, --num_train_steps (micro-steps); decay reaches 0 at T
    int64_t num_warmup_steps = 0;     // W, --num_warmup_steps; 0 = no warm-up
    int64_t start_warmup_step = 0;    // s0, --start_warmup_step (may be negative)
    double poly_power = 1.0;          // p, --poly_power
    // lr0 of the decay when it is not the warm-up's peak (NVIDIA NGC TF's AdamWeightDecay starts
    // the decay at lr0 / (1 - W/T), so that it meets the warm-up's end at lr0); 0 = lr0.
    double decay_learning_rate = 0;
    // NVIDIA PyTorch run_squad.py's warmup_linear (its optimization.py, BertAdam's schedule; and
    // schedulers.py's LinearWarmUpScheduler under --fp16) replaces the formula above when
    // total_steps > 0. In double, as Python computes it, then rounded to float32:
    //   x = (s + step_offset) / total_steps   (t_total: examples / batch, times a float epochs)
    //   x < warmup :  lr0 * x / warmup          otherwise  lr0 * max((x - 1) / (warmup - 1), 0)
    // step_offset 0: BertAdam (its state step before the increment); 1: LinearWarmUpScheduler,
    // which steps before the update.
    struct WarmupLinear {
        double total_steps = 0;
        double warmup = 0;  // a fraction of total_steps, in [0, 1) (BertAdam), [0, 1] (LinearWarmUpScheduler)
        int step_offset = 0;
        // Throws Error naming --warmup_proportion when warmup is outside the scheduler's range.
        void validate() const;
    };
    WarmupLinear warmup_linear{};
    // NVIDIA PyTorch run_pretraining.py's PolyWarmUpScheduler (its schedulers.py, stepped before
    // each optimizer step from the optimizer's step count) replaces the formula above when
    // total_updates > 0. The update u = global_step / steps_per_update + 1 (1 on the first update
    // of a run or phase, continuing on a resume) gets, in double as Python computes it, then
    // rounded to float32:
    //   p = u / total_updates   (its --max_steps, a float)
    //   p < warmup :  lr0 * p / warmup          otherwise  lr0 * (1 - p) ^ degree
    // so its first update has a rate above 0 and its last (u = max_steps) has 0.
    struct PolyWarmup {
        double total_updates = 0;
        double warmup = 0;  // a fraction of total_updates, in [0, 1]
        double degree = 0.5;
        int steps_per_update = 1;
    };
    PolyWarmup poly_warmup{};
    // NVIDIA NGC TF's and PerfZero/MLPerf TF2's counters count optimizer updates, not
    // micro-steps: with update_counter = K > 1 (their accumulation) the formula below runs on the
    // update counter floor(s / K) (u - 1 for update u) with T and W divided by K (multiples of K:
    // their flags, converted to micro-steps) and s0 as given (their flag counts updates too).
    int update_counter = 1;

    // The learning rate the reference applies when its global_step (before the increment of this
    // step) equals `global_step`:
    //   s - s0 < W :  lr0 * (s - s0) / W                     (no decay factor; negative if s < s0)
    //   otherwise  :  lr0 * (1 - min(s, T) / T) ^ p    (decay_learning_rate for lr0 if set)
    float at(int64_t global_step) const;

    // Throws Error naming the flag when T <= 0, W < 0, p <= 0 or lr0 < 0 (warmup_linear: a warm-up
    // fraction outside [0, 1)).
    void validate() const;
};

// MLPerf BERT evaluation interval in samples for a global batch size (training rules; README of
// the reference): floor(0.05 * (230.23 * GBS + 3,000,000) / 25,000) * 25,000. Computed exactly in
// integers: floor((23023 * GBS + 300,000,000) / 50,000,000) * 25,000. Error if GBS <= 0.
int64_t mlperf_eval_interval_samples(int64_t global_batch_size);

}  // namespace bertbench::optim
