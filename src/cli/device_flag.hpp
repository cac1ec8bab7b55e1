// --device of the commands that run the engine: cpu (the default) or cuda[:N]. The CUDA backend's
// ops exist (src/backend, docs/gpu.md) but the engine does not run on them yet, so every command
// but `bench --mode=gemm` refuses cuda, in one line naming what is missing first: the build
// (-DBB_CUDA=ON), the GPU, then the engine. Checked right after the flags, before any output.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "core/flags.hpp"

namespace bertbench::cli {

struct DeviceFlag {
    std::string device = "cpu";

    void add(Flags& f);
    bool cuda() const;  // --device=cuda or cuda:N (another value is an Error)
    // The CUDA backend on the GPU --device names (Error where the build or the machine has none).
    std::unique_ptr<backend::Backend> cuda_backend() const;
    // For a command whose engine runs on the CPU only: an Error for --device=cuda saying why.
    void require_cpu(const std::string& what) const;
};

}  // namespace bertbench::cli
