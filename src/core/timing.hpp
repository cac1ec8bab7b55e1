// Clocks and the statistics of timed runs, shared by the benchmark, the training loop, the
// gradient reducer and the data tools.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace bertbench {

// A monotonic clock in seconds / milliseconds (differences only).
inline double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline double now_ms() { return 1e3 * now_s(); }

// Nearest-rank percentile of sorted values, q in [0, 1]; 0 for no values.
inline double percentile(const std::vector<double>& sorted, double q) {
    if (sorted.empty()) return 0;
    const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
    return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace bertbench
