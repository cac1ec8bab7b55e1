// Small statistics shared by the benchmark and the commands that time themselves.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace bertbench {

// Nearest-rank percentile of sorted values, q in [0, 1]; 0 for no values.
inline double percentile(const std::vector<double>& sorted, double q) {
    if (sorted.empty()) return 0;
    const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
    return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace bertbench
