// --device of the commands that run the engine: cpu (the default) or cuda[:N]. pretrain, squad and
// eval run their engines, parameters and optimizer on the backend it names (docs/gpu.md), and
// bench its GEMM ceiling, training and inference steps. What a command cannot run on CUDA is refused in one line
// naming what is missing first: the build (-DBB_CUDA=ON), the GPU, then the path. Checked right
// after the flags, before any output.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "core/flags.hpp"
#include "ops/bf16.hpp"

namespace bertbench::cli {

struct DeviceFlag {
    std::string device = "cpu";

    void add(Flags& f);
    bool cuda() const;  // --device=cuda or cuda:N (another value is an Error)
    // The CUDA backend on the GPU --device names (Error where the build or the machine has none);
    // plain cuda: the local rank's GPU under mpirun (OMPI_COMM_WORLD_LOCAL_RANK), else GPU 0.
    std::unique_ptr<backend::Backend> cuda_backend() const;
    // The backend --device names: null for cpu (the engines' own CPU backend), else cuda_backend().
    std::unique_ptr<backend::Backend> backend() const;
};

// An Error, before any work, where backend `be` (null: the CPU) cannot run the engine at this
// precision: int8 needs the backend's int8 kernels.
void require_precision(const backend::Backend* be, ops::Precision precision);

}  // namespace bertbench::cli
