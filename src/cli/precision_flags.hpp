// The precision flags of the commands that run the engine: --dtype (PerfZero's and MLPerf TPU's
// spelling: fp32 | bf16; fp16 refused with its reason) and its alias --precision (Intel model
// zoo: fp32 | bfloat16); for training also dynamic loss scaling (PerfZero's --loss_scale).
#pragma once

#include <string>

#include "core/flags.hpp"
#include "ops/bf16.hpp"

namespace bertbench::cli {

struct PrecisionFlags {
    std::string dtype = "fp32";
    std::string loss_scale;          // "" = none, "dynamic", or a fixed factor
    double initial_loss_scale = 32768;
    int loss_scale_window = 2000;

    // Registers --dtype and --precision; with `training`, the loss-scale flags too.
    void add(Flags& f, bool training);
    // The precision; warns once when bf16 runs emulated (no bf16 units on this CPU) or int8 has no
    // dot-product units. Error for values outside the list, naming what the CPU offers, and for
    // int8 in a run that `trains`.
    ops::Precision precision(bool trains) const;
};

// Whether this CPU runs precision p (`flag` names the flag): an Error where oneDNN has no int8
// matmul, a warning where bf16 or int8 runs without the CPU's units for it.
void check_dtype(ops::Precision p, const std::string& flag);
// One --dtype value: the precision, checked (check_dtype).
ops::Precision parse_dtype(const std::string& value, const std::string& flag);

}  // namespace bertbench::cli
