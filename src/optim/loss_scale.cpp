// Loss scaling (see loss_scale.hpp).
#include "optim/loss_scale.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/error.hpp"
#include "core/flags.hpp"

namespace bertbench::optim {

LossScaler LossScaler::from_flag(const std::string& value, double initial, int window) {
    LossScaler s;
    if (value.empty() || value == "none") return s;
    if (window < 1) fail("--loss_scale_window: expected >= 1, got {}", window);
    if (value == "dynamic") {
        if (!(initial >= 1 && initial <= 0x1p127))
            fail("--initial_loss_scale: expected 1 .. 2^127, got {}", initial);
        s.mode_ = Mode::dynamic;
        s.scale_ = initial;
        s.window_ = window;
        return s;
    }
    double v = 0;
    if (!python_float(value, &v) || !(v > 0 && v <= 0x1p127))
        fail("--loss_scale: expected '', 'dynamic' or a factor in (0, 2^127], got \"{}\"", value);
    s.mode_ = Mode::fixed;
    s.scale_ = v;
    return s;
}

bool LossScaler::unscale(std::span<float> grads, backend::Backend& be) const {
    if (!enabled()) return true;
    if (nonfinite_on_ != &be) {
        nonfinite_ = std::make_unique<backend::Buffer<int32_t>>(be, 1);
        nonfinite_on_ = &be;
    }
    BB_OP(be, scale_values)(grads.data(), grads.size(), static_cast<float>(1.0 / scale_), nonfinite_->get());
    return nonfinite_->download()[0] == 0;
}

std::string LossScaler::on_overflow(int64_t step) {
    if (mode_ != Mode::dynamic) return "";
    ++overflows_;
    clean_ = 0;
    const double before = scale_;
    scale_ = std::max(1.0, scale_ / 2);
    return fmt::format("step {}: gradient not finite with loss scale {:g}: update skipped, scale {:g}",
                       step, before, scale_);
}

std::string LossScaler::on_clean_update(int64_t step) {
    if (mode_ != Mode::dynamic) return "";
    if (++clean_ < window_) return "";
    clean_ = 0;
    if (scale_ * 2 > 0x1p127) return "";
    scale_ *= 2;
    return fmt::format("step {}: {} clean updates: loss scale raised to {:g}", step, window_, scale_);
}

nlohmann::json LossScaler::state() const {
    return {{"loss_scale", scale_}, {"clean_updates", clean_}, {"overflows", overflows_}};
}

void LossScaler::restore(const nlohmann::json& j, int64_t max_count) {
    if (!enabled()) return;
    const auto num = [&](const char* k) -> const nlohmann::json& {
        if (!j.contains(k) || !j[k].is_number())
            fail("checkpoint state: loss scaler field \"{}\" missing or not a number", k);
        return j[k];
    };
    // A count is an integer in [0, max_count]: a float such as 1e300 would not even convert.
    const auto count = [&](const char* k) {
        const nlohmann::json& v = num(k);
        const bool ok = v.is_number_unsigned()  ? v.get<uint64_t>() <= uint64_t(max_count)
                        : v.is_number_integer() ? v.get<int64_t>() >= 0 && v.get<int64_t>() <= max_count
                                                : false;
        if (!ok)
            fail("checkpoint state: loss scaler field \"{}\": expected an integer in [0, {}] (at "
                 "most the global step), got {}", k, max_count, v.dump());
        return v.get<int64_t>();
    };
    const double s = num("loss_scale").get<double>();
    if (!(s > 0 && s <= 0x1p127)) fail("checkpoint state: loss_scale {} outside (0, 2^127]", s);
    if (mode_ == Mode::dynamic) scale_ = s;  // a fixed scale is the flag's
    clean_ = count("clean_updates");
    overflows_ = count("overflows");
}

}  // namespace bertbench::optim
