// When an op is worth an OpenMP parallel region: below ~32K elements of work the fork/join (and,
// on a host that time-slices the 2nd vCPU, the barrier wait) costs more than the work itself.
#pragma once

#include <cstddef>

namespace bertbench::ops {

constexpr size_t kParallelMinWork = size_t(1) << 15;

inline bool worth_parallel(size_t work) { return work >= kParallelMinWork; }

}  // namespace bertbench::ops
