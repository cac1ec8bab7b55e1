// Time and samples to a target accuracy, as MLPerf scores a run; see time_to_target.hpp.
#include "train/time_to_target.hpp"

#include <fmt/format.h>

#include <limits>

#include "core/error.hpp"
#include "train/loop.hpp"

namespace bertbench::train {
using nlohmann::json;

bool TimeToTarget::record(double accuracy, int64_t samples, double elapsed_s) {
    ++evals;
    last_accuracy = accuracy;
    if (accuracy > best_accuracy) {  // the first evaluation at the best value
        best_accuracy = accuracy;
        best_samples = samples;
        best_elapsed_s = elapsed_s;
    }
    if (reached || !(accuracy >= target)) return false;
    reached = true;
    samples_to_target = samples;
    time_to_target_s = elapsed_s;
    return true;
}

json TimeToTarget::state() const {
    return {{"evals", evals},
            {"best_accuracy", best_accuracy},
            {"last_accuracy", last_accuracy},
            {"target_reached", reached},
            {"time_to_target_s", time_to_target_s},
            {"samples_to_target", samples_to_target},
            {"best_samples", best_samples},
            {"best_elapsed_s", best_elapsed_s}};
}

void TimeToTarget::restore(const json& j, int64_t samples) {
    constexpr double kMaxSeconds = std::numeric_limits<double>::max();
    evals = saved_int(j, "evals", 0, kMaxRunSamples);
    best_accuracy = saved_real(j, "best_accuracy", -1, 1, "an accuracy, -1 before any");
    last_accuracy = saved_real(j, "last_accuracy", -1, 1, "an accuracy, -1 before any");
    const auto it = j.find("target_reached");
    if (it == j.end() || !it->is_boolean())
        fail("\"target_reached\": expected true or false, got {}",
             it == j.end() ? std::string("none") : it->dump());
    reached = it->get<bool>();
    time_to_target_s = saved_real(j, "time_to_target_s", -1, kMaxSeconds, "seconds, -1 before the target");
    samples_to_target = saved_int(j, "samples_to_target", -1, samples,
                                  "at most the samples seen, -1 before the target");
    // Checkpoints written before these two existed: unknown.
    best_samples = j.contains("best_samples")
                       ? saved_int(j, "best_samples", -1, samples, "at most the samples seen, -1 before any")
                       : -1;
    best_elapsed_s = j.contains("best_elapsed_s")
                         ? saved_real(j, "best_elapsed_s", -1, kMaxSeconds, "seconds, -1 before any")
                         : -1;
}

void TimeToTarget::add_results(json& j) const {
    const auto opt = [](double v) { return v >= 0 ? json(v) : json(nullptr); };
    const auto opt_int = [](int64_t v) { return v >= 0 ? json(v) : json(nullptr); };
    j["target_reached"] = reached;
    j["samples_to_target"] = opt_int(samples_to_target);
    j["time_to_target_s"] = opt(time_to_target_s);
    j["time_to_target_definition"] =
        "MLPerf's time to train: run_start -> the end of the first evaluation whose masked-LM "
        "accuracy >= target_mlm_accuracy (run_stop follows it); initialisation before run_start "
        "(initialization_s) is not counted; summed over resumed segments. samples_to_target: "
        "training sequences seen at that evaluation (eval_accuracy's epoch_num in mlperf.log)";
    j["best_masked_lm_accuracy_samples"] = opt_int(best_samples);
    j["best_masked_lm_accuracy_time_s"] = opt(best_elapsed_s);
}

std::string TimeToTarget::summary(int64_t samples_trained, double elapsed_s,
                                  double initialization_s) const {
    const std::string init =
        initialization_s >= 0
            ? fmt::format("; {:.1f} s of initialisation before run_start not counted", initialization_s)
            : std::string();
    if (reached)
        return fmt::format("time to target {:.1f} s, {} samples: masked-LM accuracy >= {} at the "
                           "evaluation after {} samples (MLPerf: run_start to that evaluation{})",
                           time_to_target_s, samples_to_target, target, samples_to_target, init);
    if (evals == 0 || best_accuracy < 0)
        return fmt::format("target masked-LM accuracy {} not reached: no evaluation in {} samples "
                           "({:.1f} s after run_start)",
                           target, samples_trained, elapsed_s);
    const std::string when =
        best_samples >= 0 ? fmt::format(" at {} samples ({:.1f} s after run_start)", best_samples,
                                        best_elapsed_s)
                          : std::string();
    return fmt::format("target masked-LM accuracy {} not reached in {} samples ({:.1f} s after "
                       "run_start): best {:.4f}{}, last {:.4f} ({} evaluation{})",
                       target, samples_trained, elapsed_s, best_accuracy, when, last_accuracy, evals,
                       evals == 1 ? "" : "s");
}

}  // namespace bertbench::train
