// When an op is worth an OpenMP parallel region: below ~32K elements of work the fork/join (and,
// on a host that time-slices the 2nd vCPU, the barrier wait) costs more than the work itself.
#pragma once

#include <cstddef>

namespace bertbench::ops {

constexpr size_t kParallelMinWork = size_t(1) << 15;

inline bool worth_parallel(size_t work) { return work >= kParallelMinWork; }

// f(begin, end) for each chunk [0, chunk), [chunk, 2·chunk), ... of [0, n); the chunks are shared
// statically among the OpenMP threads when `work` (element-operations in all) is worth it.
template <typename F>
void for_each_chunk(size_t n, size_t chunk, size_t work, F&& f) {
    const long long count = static_cast<long long>((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static) if (worth_parallel(work))
    for (long long c = 0; c < count; ++c) {
        const size_t b = static_cast<size_t>(c) * chunk;
        f(b, n - b < chunk ? n : b + chunk);
    }
}

}  // namespace bertbench::ops
