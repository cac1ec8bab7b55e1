// Test helpers for ops and model: numpy.isclose-style comparison (|got − want| ≤ atol + rtol·|want|)
// that prints name, #bad, worst index, got and want; central finite differences in double.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace bertbench::testing {

template <typename A, typename B>
::testing::AssertionResult all_close(const std::string& name, const A& got, const B& want,
                                     double atol, double rtol) {
    if (got.size() != want.size())
        return ::testing::AssertionFailure()
               << name << ": size " << got.size() << " != " << want.size();
    size_t bad = 0, worst = 0;
    double worst_excess = -1;
    for (size_t i = 0; i < got.size(); ++i) {
        const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
        const double excess = std::abs(g - w) - (atol + rtol * std::abs(w));
        if (!(excess <= 0)) ++bad;
        if (!(excess <= worst_excess)) {
            worst_excess = excess;
            worst = i;
        }
    }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << name << ": " << bad << " of " << got.size() << " elements not close (atol " << atol
           << ", rtol " << rtol << "); worst index " << worst << ": got "
           << static_cast<double>(got[worst]) << ", want " << static_cast<double>(want[worst]);
}

inline std::vector<double> random_vector(size_t n, uint64_t seed, double scale = 1.0) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-scale, scale);
    std::vector<double> v(n);
    for (double& x : v) x = u(rng);
    return v;
}

// random_vector's values rounded to float.
inline std::vector<float> rand_f(size_t n, uint64_t seed, double scale = 3.0) {
    const std::vector<double> d = random_vector(n, seed, scale);
    return {d.begin(), d.end()};
}

// Equal sizes and equal bytes (floats, bf16s: -0 and NaN payloads included).
template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// d f / d x[i] for every i by central differences (x is restored).
inline std::vector<double> numeric_grad(std::vector<double>& x, const std::function<double()>& f,
                                        double eps = 1e-6) {
    std::vector<double> g(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        const double keep = x[i];
        x[i] = keep + eps;
        const double fp = f();
        x[i] = keep - eps;
        const double fm = f();
        x[i] = keep;
        g[i] = (fp - fm) / (2 * eps);
    }
    return g;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

}  // namespace bertbench::testing
