// Loss scaling, as TensorFlow's DynamicLossScale / FixedLossScale (PerfZero's --loss_scale) and
// PyTorch's GradScaler do it: the backward starts from loss × S, the gradients are divided by S
// before clipping and the optimizer. Dynamic: S starts at `initial` (2^15 by default); a micro-batch
// whose scaled gradient is not finite halves S and its optimizer update is skipped; after `window`
// clean updates in a row S doubles. Powers of two keep the scaling exact in binary floating point,
// so a run whose gradients never overflow or underflow is bit-identical to one without scaling.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "backend/backend.hpp"

namespace bertbench::optim {

class LossScaler {
public:
    enum class Mode { none, fixed, dynamic };
    // "" -> none, "dynamic" -> dynamic from `initial`, a number > 0 -> fixed. Error otherwise,
    // naming --loss_scale.
    static LossScaler from_flag(const std::string& value, double initial, int window);

    Mode mode() const { return mode_; }
    bool enabled() const { return mode_ != Mode::none; }
    float scale() const { return static_cast<float>(scale_); }

    // grads /= S in place on backend `be` (nothing when disabled); false when any element is NaN
    // or ±Inf.
    bool unscale(std::span<float> grads, backend::Backend& be = backend::cpu()) const;
    // Dynamic only: an overflow (halve, reset the clean count) or a clean optimizer update (double
    // after `window` of them). Returns a line for the log when S changed, else "".
    std::string on_overflow(int64_t step);
    std::string on_clean_update(int64_t step);
    int64_t overflows() const { return overflows_; }

    nlohmann::json state() const;             // for checkpoints
    // Error naming the bad field. `max_count` bounds clean_updates and overflows (the run's
    // global step: both count its updates or skipped steps).
    void restore(const nlohmann::json& j,
                 int64_t max_count = std::numeric_limits<int64_t>::max());

private:
    Mode mode_ = Mode::none;
    double scale_ = 1;
    int window_ = 2000;
    int64_t clean_ = 0, overflows_ = 0;
    // scale_values' finiteness flag in the memory of the backend unscale() ran on, kept between
    // calls (a device allocation per micro-step would synchronise a GPU)
    mutable std::unique_ptr<backend::Buffer<int32_t>> nonfinite_;
    mutable const backend::Backend* nonfinite_on_ = nullptr;
};

}  // namespace bertbench::optim
