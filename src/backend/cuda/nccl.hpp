// NCCL behind the CUDA backend's collectives (backend.hpp, Backend::collectives): loaded at run
// time, so that a binary built with CUDA starts where NCCL is missing (the GPU machine has it only
// as a pip wheel) and says so when collectives are asked for.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.hpp"

namespace bertbench::backend::cuda {

// A new ncclUniqueId's bytes (rank 0), or empty with `why` set where NCCL cannot be loaded.
std::vector<std::byte> nccl_unique_id(std::string& why);
// This process's rank of `size` on the current GPU, its all-reduces on stream `st` (collective:
// every rank calls it with rank 0's id). An Error naming NCCL's message when it fails.
std::unique_ptr<Collectives> make_nccl_collectives(cudaStream_t st, std::span<const std::byte> id, int rank,
                                                   int size);

}  // namespace bertbench::backend::cuda
