// The CUDA backend's fused-attention kernels (src/backend/cuda/flash_kernels.cu, flash_tc.cu)
// run on the host emulation of shim/cuda_runtime.h, against the double-precision materialized
// attention that backend_ops_test.cpp checks every backend against: the kernels' tiling, padding,
// online softmax, dropout indices and barriers are tested on every CI run, without a GPU. The
// same cases run on the GPU in test_backend (FlashAttentionAcrossTiles); what only a GPU shows
// (the hardware's wmma fragments, timing, shared-memory limits beyond the launch's request) is
// left to that test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../backend/backend_ops_util.hpp"
#include "backend/cuda/kernels.cuh"

namespace bertbench::backend {
namespace {

namespace ck = cuda;

enum class Kernel { cores_fp32, cores_bf16, tensor_bf16 };

std::vector<uint16_t> bits(const std::vector<float>& v) {
    std::vector<uint16_t> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = ops::to_bf16(v[i]).bits;
    return out;
}

// Sequences of 70, 1 and 140 rows (key lengths 45, 1, 133 with dropout): tiles of 32 and 64 rows
// on both sides, partial tiles, a one-row sequence; heads of 13, 37 and 100 channels: each of the
// kernels' three instances, none a multiple of 16.
void check(Kernel kernel, int HS, bool dropout) {
    const std::vector<int32_t> offsets = {0, 70, 71, 211}, key_lengths = {45, 1, 133};
    const int NH = 2, B = 3, N = offsets[B], H = NH * HS;
    const size_t nh = static_cast<size_t>(N) * H;
    const bool bf = kernel != Kernel::cores_fp32;
    std::vector<float> q = rand_f(nh, 51, 4.0), k = rand_f(nh, 52), v = rand_f(nh, 53),
                       dctx = rand_f(nh, 54);
    if (bf)  // the kernels see the bf16 values; the reference gets the same
        for (std::vector<float>* x : {&q, &k, &v, &dctx})
            for (float& e : *x) e = ops::to_float(ops::to_bf16(e));
    const ops::DropoutStream stream{7, 3, 11, 0.85};
    const ops::DropoutStream* drop = dropout ? &stream : nullptr;
    const int32_t* keys = dropout ? key_lengths.data() : nullptr;
    const AttentionReference ref =
        attention_reference(offsets, keys, NH, HS, wide(q), wide(k), wide(v), wide(dctx), drop);
    const ck::Philox ph{stream.seed, stream.step, stream.site, stream.threshold()};
    const ck::AttnShape s{offsets.data(), ref.pofs.data(), keys, B, NH, HS};
    const ck::Philox* dp = dropout ? &ph : nullptr;
    const float keep = static_cast<float>(stream.keep_prob);
    std::vector<float> ctx(nh, 9.f), lse(static_cast<size_t>(N) * NH, 9.f), dq(nh, 9.f),
        dk(nh, 9.f), dv(nh, 9.f);
    const std::vector<uint16_t> qb = bits(q), kb = bits(k), vb = bits(v), db = bits(dctx);
    if (kernel == Kernel::tensor_bf16) {
        ck::flash_attention_forward_tc(nullptr, ctx.data(), lse.data(), qb.data(), kb.data(),
                                       vb.data(), s, dp, keep);
        ck::flash_attention_backward_tc(nullptr, dq.data(), dk.data(), dv.data(), db.data(),
                                        qb.data(), kb.data(), vb.data(), ctx.data(), lse.data(), s,
                                        dp, keep);
    } else {
        const auto in = [&](const std::vector<float>& f,
                            const std::vector<uint16_t>& b) -> const void* {
            return bf ? static_cast<const void*>(b.data()) : f.data();
        };
        ck::flash_attention_forward(nullptr, ctx.data(), lse.data(), in(q, qb), in(k, kb),
                                    in(v, vb), bf, s, dp, keep);
        ck::flash_attention_backward(nullptr, dq.data(), dk.data(), dv.data(), in(dctx, db),
                                     in(q, qb), in(k, kb), in(v, vb), bf, ctx.data(), lse.data(), s,
                                     dp, keep);
    }
    const std::vector<double> ref_lse = reference_lse(offsets, keys, NH, HS, q, k, ref);
    // the tensor cores round P and dS to bf16 as the CPU's bf16 kernel does
    // (FlashAttentionAcrossTiles' tolerances); the CUDA cores keep them fp32
    const bool rounded = kernel == Kernel::tensor_bf16;
    const double atol = rounded ? 4e-3 : kAtolSum, rtol = rounded ? 1.0 / 64 : kRtolSum;
    const std::string what = std::string(kernel == Kernel::tensor_bf16 ? "tensor cores"
                                         : bf                          ? "CUDA cores, bf16"
                                                                       : "CUDA cores, fp32") +
                             ", HS " + std::to_string(HS) + (dropout ? ", dropout" : "");
    EXPECT_TRUE(all_close("ctx (" + what + ")", ctx, ref.ctx, atol, rtol));
    EXPECT_TRUE(all_close("lse (" + what + ")", lse, ref_lse, 1e-4, 1e-4));
    EXPECT_TRUE(all_close("dq (" + what + ")", dq, ref.dq, atol, rtol));
    EXPECT_TRUE(all_close("dk (" + what + ")", dk, ref.dk, atol, rtol));
    EXPECT_TRUE(all_close("dv (" + what + ")", dv, ref.dv, atol, rtol));
}

TEST(CudaEmulation, FlashAttentionOnTheTensorCores) {
    for (const int HS : {13, 37, 100})
        for (const bool dropout : {false, true}) check(Kernel::tensor_bf16, HS, dropout);
}

TEST(CudaEmulation, FlashAttentionOnTheCudaCores) {
    for (const int HS : {13, 37, 100})
        for (const bool dropout : {false, true}) {
            check(Kernel::cores_fp32, HS, dropout);
            check(Kernel::cores_bf16, HS, dropout);
        }
}

}  // namespace
}  // namespace bertbench::backend
