// The conformance tests' fixture (backend_ops_test.cpp, backend_ops_model_test.cpp): one case per
// backend this build has, the tolerances and the small helpers both files use.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "ops/attention.hpp"
#include "ops/check.hpp"
#include "ops/gemm.hpp"

namespace bertbench::backend {

using testing::all_close;
using testing::random_vector;
using ops::bf16;

inline constexpr double kAtol = 1e-6, kRtol = 1e-5;      // elementwise
inline constexpr double kAtolSum = 1e-5, kRtolSum = 1e-4;  // reductions, GEMMs

inline std::vector<float> rand_f(size_t n, uint64_t seed, double scale = 1.0) {
    const std::vector<double> d = random_vector(n, seed, scale);
    return {d.begin(), d.end()};
}
inline std::vector<double> wide(const std::vector<float>& v) { return {v.begin(), v.end()}; }
inline std::vector<bf16> narrow(const std::vector<float>& v) {
    std::vector<bf16> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = ops::to_bf16(v[i]);
    return out;
}
inline bool same_bits(const std::vector<bf16>& a, const std::vector<bf16>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].bits != b[i].bits) return false;
    return true;
}
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The double-precision materialized attention (ops/attention.hpp) that every attention kernel of
// every backend is checked against: inputs q, k, v, dctx (N, NH·HS) on the sequences `offsets`,
// key lengths (null: every row a key), dropout stream `drop` (null: none).
struct AttentionReference {
    std::vector<size_t> pofs;  // the probabilities' offsets per sequence
    std::vector<double> ctx, probs, dq, dk, dv;
    std::vector<uint8_t> mask;
};
inline AttentionReference attention_reference(const std::vector<int32_t>& offsets, const int32_t* key_lengths, int NH,
                                              int HS, const std::vector<double>& q, const std::vector<double>& k,
                                              const std::vector<double>& v, const std::vector<double>& dctx,
                                              const ops::DropoutStream* drop) {
    const int B = static_cast<int>(offsets.size()) - 1;
    AttentionReference r;
    r.pofs.resize(offsets.size());
    const size_t np = ops::attention_prob_offsets(r.pofs.data(), offsets.data(), B, NH, key_lengths);
    const ops::AttentionShape s{offsets.data(), r.pofs.data(), B, NH, HS, key_lengths};
    r.ctx.resize(q.size()), r.dq.resize(q.size()), r.dk.resize(q.size()), r.dv.resize(q.size());
    r.probs.resize(np), r.mask.resize(np);
    std::vector<double> scratch(np), dprobs(np);
    ops::attention_forward<double>(r.ctx.data(), r.probs.data(), scratch.data(), r.mask.data(), q.data(), k.data(),
                                   v.data(), s, drop, nullptr);
    ops::attention_backward<double>(r.dq.data(), r.dk.data(), r.dv.data(), dprobs.data(), dctx.data(), q.data(),
                                    k.data(), v.data(), r.probs.data(), drop ? r.mask.data() : nullptr,
                                    drop ? drop->keep_prob : 1.0, s, nullptr);
    return r;
}

// The fused attention's lse(N, NH) for the reference's inputs q, k (the same offsets, key lengths,
// heads): lse_i = s·q_i·k_0 − log P_i0, from each row's probability of its first key.
inline std::vector<double> reference_lse(const std::vector<int32_t>& offsets, const int32_t* key_lengths, int NH,
                                         int HS, const std::vector<float>& q, const std::vector<float>& k,
                                         const AttentionReference& ref) {
    const int B = static_cast<int>(offsets.size()) - 1, H = NH * HS;
    std::vector<double> lse(static_cast<size_t>(offsets[B]) * NH);
    for (int b = 0; b < B; ++b) {
        const int o = offsets[b], t = offsets[b + 1] - o, kn = key_lengths ? key_lengths[b] : t;
        for (int h = 0; h < NH; ++h)
            for (int i = 0; i < t; ++i) {
                double dot = 0;
                for (int c = 0; c < HS; ++c)
                    dot += double(q[static_cast<size_t>(o + i) * H + h * HS + c]) * k[static_cast<size_t>(o) * H + h * HS + c];
                const double p0 = ref.probs[ref.pofs[b] + (static_cast<size_t>(h) * t + i) * kn];
                lse[static_cast<size_t>(o + i) * NH + h] = dot / std::sqrt(double(HS)) - std::log(p0);
            }
    }
    return lse;
}

class BackendOps : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        if (GetParam() == "cpu") {
            be_ = make_cpu_backend();
            return;
        }
        if (!cuda_built()) GTEST_SKIP() << "this build has no CUDA backend (cmake -DBB_CUDA=ON; docs/gpu.md)";
        try {
            be_ = make_cuda_backend(0);
        } catch (const Error& e) {
            GTEST_SKIP() << e.what();
        }
    }
    template <typename T>
    std::unique_ptr<Buffer<T>> put(const std::vector<T>& host) {
        return std::make_unique<Buffer<T>>(*be_, host);
    }
    Backend& be() { return *be_; }
    std::unique_ptr<Backend> be_;
};

// The same cases for a backend's collectives (collectives_test.cpp).
class BackendCollectives : public BackendOps {};

// Skips the rest of a test whose op the backend lacks, naming it.
#define REQUIRE_OP(op)                                                                            \
    if (!be().ops().op) GTEST_SKIP() << "backend " << be().name() << " lacks the op " #op;

}  // namespace bertbench::backend
